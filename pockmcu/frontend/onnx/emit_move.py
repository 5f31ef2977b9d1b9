"""Data movement and reductions on activations: ONNX Slice, Split, Tile, Gather (constant indices),
DepthToSpace, SpaceToDepth, Resize (nearest / linear), ReduceMean / ReduceSum / ReduceMax / ReduceMin
-> SLICE_ND, STRIDED_SLICE, SPLIT_V, TILE, GATHER, DEPTH_TO_SPACE, SPACE_TO_DEPTH,
RESIZE_NEAREST_NEIGHBOR, RESIZE_BILINEAR, MEAN, SUM, REDUCE_MAX, REDUCE_MIN (+ TRANSPOSE, REQUANTIZE).

Ops that only move bytes (and REDUCE_MAX / REDUCE_MIN, which pick one) commute with DequantizeLinear, so
they are emitted at once at the input's quantization and their result is ``Deq(Act)`` (or the integer
``Act`` itself in a QOperator model): the QuantizeLinear after them keeps the bytes when it names the
same quantization (onnxruntime drops such DQ/Q pairs too) and requantizes otherwise (exact with
onnxruntime numerics: a table of its float32 DequantizeLinear -> QuantizeLinear). A per-axis op works in
whatever layout its input is held (an NCHW tensor held NHWC is sliced along its NHWC axis; nothing is
transposed). MEAN and SUM round into the output quantization, so they wait for it (``Pending``).
On constants (shape arithmetic) the ops are evaluated with numpy.
"""

from __future__ import annotations

import math

import numpy as np

from ...ir import Quant
from ...ops.resize import nearest_indices
from .build import Builder
from .layout import NCHW_AS_NHWC, Layout
from .read import node_attrs
from .values import Act, Deq, Pending, QConst, copy_quant

# -- reading inputs --------------------------------------------------------------------------------


def act_of(v) -> tuple[Act, bool] | None:
    """(activation, seen through DequantizeLinear?) of an integer activation value, else None."""
    if isinstance(v, Deq) and isinstance(v.src, Act):
        return v.src, True
    if isinstance(v, Act) and v.onnx_dtype != "float32":
        return v, False
    return None


def plain(cx: Builder, a: Act) -> Act:
    """``a`` in a permutation layout (a flatten view is laid out as the ONNX tensor first)."""
    if a.layout.pre is None:
        return a
    ident = Layout.identity(len(a.shape))
    return Act(cx.materialize(a, ident), ident, a.shape, a.onnx_dtype)


def drop_axes(layout: Layout, removed) -> Layout:
    """The layout of a value held in ``layout`` once the ONNX axes ``removed`` are gone (kept axes keep
    their IR order)."""
    removed = set(removed)
    keep = [p for p in layout.perm if p not in removed]
    return Layout(tuple(p - sum(1 for r in removed if r < p) for p in keep))


def int_list(cx: Builder, node, i: int, attr: str | None = None, what: str = "input") -> list[int] | None:
    """A constant integer list from input i, or from attribute ``attr`` (None when neither is given)."""
    if len(node.input) > i and node.input[i]:
        return [int(v) for v in cx.cval(node.input[i], what).reshape(-1)]
    if attr is not None:
        v = node_attrs(node).get(attr)
        return None if v is None else [int(a) for a in v]
    return None


def new_act(cx: Builder, x: Act, hint: str, ir_shape, layout: Layout, shape) -> tuple[str, Act]:
    """An IR tensor for a data movement's output (the input's quantization) and its Act."""
    y = cx.tensor(hint, ir_shape, "int8", copy_quant(cx.q_of(x.ir)))
    return y, Act(y, layout, tuple(int(d) for d in shape), x.onnx_dtype)


def const_result(cx: Builder, v, fn):
    """A data movement on a constant: numpy on the value (a quantized constant keeps its quantization)."""
    if isinstance(v, np.ndarray):
        return fn(v)
    qc = v.src if isinstance(v, Deq) else v
    if qc.scale is not None and qc.scale.size > 1:
        raise cx.err("moving the values of a per-channel quantized constant")
    nq = QConst(np.ascontiguousarray(fn(qc.data)), qc.scale, qc.zp, 0, qc.name)
    return Deq(nq) if isinstance(v, Deq) else nq


def is_const(v) -> bool:
    return isinstance(v, (np.ndarray, QConst)) or (isinstance(v, Deq) and isinstance(v.src, QConst))


def moving_input(cx: Builder, node) -> tuple[Act, bool]:
    got = act_of(cx.val(node.input[0]))
    if got is None:
        v = cx.val(node.input[0])
        if isinstance(v, Act):
            raise cx.err(f"{node.op_type} on the float model input (quantize the input first)")
        raise cx.err(f"{node.op_type} input must be (DequantizeLinear of) a quantized activation or a constant")
    x, deq = got
    if cx.q_of(x.ir) is None:
        raise cx.err(f"quantization of '{x.ir}' is unknown (no DequantizeLinear/QLinear op names it)")
    return plain(cx, x), deq


def wrap(a: Act, deq: bool):
    return Deq(a) if deq else a


# -- Slice -----------------------------------------------------------------------------------------


def slice_axis(start: int, end: int, step: int, dim: int) -> tuple[int, int]:
    """ONNX Slice's (start, end) on one axis after its negative-index and clamping rules."""
    start = start + dim if start < 0 else start
    end = end + dim if end < 0 else end
    if step > 0:
        return min(max(start, 0), dim), min(max(end, 0), dim)
    return min(max(start, 0), dim - 1), min(max(end, -1), dim - 1)


def slice_(cx: Builder, node):
    v = cx.val(node.input[0])
    shp = v.shape if isinstance(v, (Act, np.ndarray)) else (v.src.shape if isinstance(v, Deq) and
                                                              isinstance(v.src, Act) else None)
    if shp is None and is_const(v):
        shp = (v.src if isinstance(v, Deq) else v).data.shape
    if shp is None:
        raise cx.err("Slice input must be (DequantizeLinear of) a quantized activation or a constant")
    rank = len(shp)
    if cx.opset < 10:
        at = node_attrs(node)
        starts, ends, axes, steps = list(at["starts"]), list(at["ends"]), at.get("axes"), None
    else:
        starts, ends = int_list(cx, node, 1, what="starts"), int_list(cx, node, 2, what="ends")
        axes, steps = int_list(cx, node, 3, what="axes"), int_list(cx, node, 4, what="steps")
    axes = list(range(len(starts))) if axes is None else [a + rank if a < 0 else a for a in axes]
    steps = [1] * len(starts) if steps is None else steps
    if not len(starts) == len(ends) == len(axes) == len(steps) or any(not 0 <= a < rank for a in axes):
        raise cx.err(f"starts {starts}, ends {ends}, axes {axes} and steps {steps} do not fit a rank-{rank} input")
    if 0 in steps:
        raise cx.err("Slice with a zero step")
    se = {a: (0, shp[a], 1) for a in range(rank)}
    for s, e, a, st in zip(starts, ends, axes, steps):
        se[a] = (*slice_axis(int(s), int(e), int(st), shp[a]), int(st))
    counts = [len(range(*se[a])) for a in range(rank)]
    if min(counts) <= 0:
        raise cx.err(f"Slice of {list(shp)} is empty")
    if is_const(v):
        idx = tuple(np.arange(*se[a], dtype=np.int64) for a in range(rank))
        cx.env[node.output[0]] = const_result(cx, v, lambda d: d[np.ix_(*idx)] if rank else d)
        return
    x, deq = moving_input(cx, node)
    if counts[0] != shp[0]:
        raise cx.err("Slice of the batch axis")
    perm = x.layout.perm
    ir_se = [se[p] for p in perm]
    ir_shape = tuple(counts[p] for p in perm)
    y, a = new_act(cx, x, node.output[0], ir_shape, x.layout, counts)
    if all(st == 1 for _, _, st in ir_se):
        cx.add_op("SLICE_ND", [x.ir], [y], begin=tuple(s for s, _, _ in ir_se), size=ir_shape)
    else:
        if len(perm) > 4:
            raise cx.err(f"Slice with steps of a rank-{len(perm)} tensor (at most 4)")
        end_mask = sum(1 << k for k, (_, e, st) in enumerate(ir_se) if st < 0 and e < 0)
        cx.add_op("STRIDED_SLICE", [x.ir], [y], begin=tuple(s for s, _, _ in ir_se),
                  end=tuple(max(e, 0) for _, e, _ in ir_se), strides=tuple(st for _, _, st in ir_se),
                  end_mask=end_mask)
    cx.env[node.output[0]] = wrap(a, deq)


# -- Split -----------------------------------------------------------------------------------------


def split(cx: Builder, node):
    v = cx.val(node.input[0])
    at = node_attrs(node)
    x, deq = (None, False) if is_const(v) else moving_input(cx, node)
    shp = x.shape if x is not None else (v.src if isinstance(v, Deq) else v).data.shape if not \
        isinstance(v, np.ndarray) else v.shape
    axis = int(at.get("axis", 0)) % len(shp)
    sizes = int_list(cx, node, 1, "split", "split") if cx.opset >= 13 else \
        ([int(s) for s in at["split"]] if "split" in at else None)
    n = len(node.output)
    if sizes is None:
        n = int(at.get("num_outputs", n))
        each = -(-shp[axis] // n)
        sizes = [min(each, shp[axis] - k * each) for k in range(n)]
    if len(sizes) != len(node.output) or sum(sizes) != shp[axis] or min(sizes) <= 0:
        raise cx.err(f"Split of {shp[axis]} along axis {axis} into {sizes} for {len(node.output)} outputs")
    cuts = np.cumsum(sizes)[:-1]
    if x is None:
        for k, name in enumerate(node.output):
            cx.env[name] = const_result(cx, v, lambda d, k=k: np.split(d, cuts, axis=axis)[k])
        return
    if axis == 0:
        raise cx.err("Split of the batch axis")
    ia = x.layout.perm.index(axis)
    ir_in = cx.tensors[x.ir].shape
    outs, acts = [], []
    for name, s in zip(node.output, sizes):
        shape = tuple(s if i == axis else d for i, d in enumerate(x.shape))
        y, a = new_act(cx, x, name, tuple(s if i == ia else d for i, d in enumerate(ir_in)), x.layout, shape)
        outs.append(y)
        acts.append(a)
    cx.add_op("SPLIT_V", [x.ir], outs, axis=ia, sizes=tuple(int(s) for s in sizes))
    for name, a in zip(node.output, acts):
        cx.env[name] = wrap(a, deq)


# -- Tile ------------------------------------------------------------------------------------------


def tile(cx: Builder, node):
    v = cx.val(node.input[0])
    reps = int_list(cx, node, 1, what="repeats")
    if is_const(v):
        cx.env[node.output[0]] = const_result(cx, v, lambda d: np.tile(d, reps))
        return
    x, deq = moving_input(cx, node)
    if len(reps) != len(x.shape) or min(reps) < 1:
        raise cx.err(f"repeats {reps} for a rank-{len(x.shape)} input")
    if reps[0] != 1:
        raise cx.err(f"Tile repeats the batch axis {reps[0]} times (pockmcu runs one sample)")
    perm = x.layout.perm
    shape = tuple(d * r for d, r in zip(x.shape, reps))
    y, a = new_act(cx, x, node.output[0], x.layout.ir_shape(shape), x.layout, shape)
    cx.add_op("TILE", [x.ir], [y], multiples=tuple(reps[p] for p in perm))
    cx.env[node.output[0]] = wrap(a, deq)


# -- Gather ----------------------------------------------------------------------------------------


def gather(cx: Builder, node):
    v = cx.val(node.input[0])
    idx = cx.cval(node.input[1], "indices")
    axis = int(node_attrs(node).get("axis", 0))
    if is_const(v):
        cx.env[node.output[0]] = const_result(cx, v, lambda d: np.take(d, idx, axis=axis % max(d.ndim, 1)))
        return
    x, deq = moving_input(cx, node)
    rank = len(x.shape)
    axis %= rank
    if axis == 0:
        raise cx.err("Gather along the batch axis")
    dim = x.shape[axis]
    flat = idx.astype(np.int64).reshape(-1)
    if np.any(flat < -dim) or np.any(flat >= dim):
        raise cx.err(f"Gather index outside [-{dim}, {dim}) along axis {axis}")
    flat = np.where(flat < 0, flat + dim, flat)
    shape = x.shape[:axis] + tuple(idx.shape) + x.shape[axis + 1:]
    if idx.ndim == 1:
        lay = x.layout
    elif idx.ndim == 0:
        lay = drop_axes(x.layout, {axis})
    else:                               # new axes: gather in the ONNX layout itself
        ident = Layout.identity(rank)
        x = Act(cx.materialize(x, ident), ident, x.shape, x.onnx_dtype)
        lay = Layout.identity(len(shape))
    ia = x.layout.perm.index(axis)
    ir_in = cx.tensors[x.ir].shape
    ir_shape = ir_in[:ia] + tuple(idx.shape) + ir_in[ia + 1:]
    y, a = new_act(cx, x, node.output[0], ir_shape, lay, shape)
    cx.add_op("GATHER", [x.ir], [y], axis=ia, indices=tuple(int(i) for i in flat), indices_shape=tuple(idx.shape))
    cx.env[node.output[0]] = wrap(a, deq)


# -- DepthToSpace / SpaceToDepth -------------------------------------------------------------------


def nhwc_input(cx: Builder, node) -> tuple[Act, bool]:
    x, deq = moving_input(cx, node)
    if len(x.shape) != 4:
        raise cx.err(f"{node.op_type} of a rank-{len(x.shape)} tensor (NCHW only)")
    return Act(cx.materialize(x, NCHW_AS_NHWC), NCHW_AS_NHWC, x.shape, x.onnx_dtype), deq


def depth_to_space(cx: Builder, node):
    at = node_attrs(node)
    b = int(at["blocksize"])
    mode = at.get("mode", b"DCR")
    mode = mode.decode() if isinstance(mode, bytes) else mode
    x, deq = nhwc_input(cx, node)
    n, c, h, w = x.shape
    if b < 1 or c % (b * b):
        raise cx.err(f"DepthToSpace of {c} channels with block size {b}")
    src = x.ir
    if mode == "CRD":
        # CRD reads channel c b^2 + i b + j for output channel c at block offset (i, j); TFLite's (DCR) reads
        # (i b + j) C' + c: permute the channels first
        co = c // (b * b)
        order = tuple(k * b * b + i * b + j for i in range(b) for j in range(b) for k in range(co))
        src = cx.tensor(f"{node.output[0]}_crd", cx.tensors[x.ir].shape, "int8", copy_quant(cx.q_of(x.ir)))
        cx.add_op("GATHER", [x.ir], [src], axis=3, indices=order, indices_shape=(c,))
    elif mode != "DCR":
        raise cx.err(f"DepthToSpace mode '{mode}' (DCR or CRD)")
    shape = (n, c // (b * b), h * b, w * b)
    y, a = new_act(cx, x, node.output[0], NCHW_AS_NHWC.ir_shape(shape), NCHW_AS_NHWC, shape)
    cx.add_op("DEPTH_TO_SPACE", [src], [y], block_size=b)
    cx.env[node.output[0]] = wrap(a, deq)


def space_to_depth(cx: Builder, node):
    b = int(node_attrs(node)["blocksize"])
    x, deq = nhwc_input(cx, node)
    n, c, h, w = x.shape
    if b < 1 or h % b or w % b:
        raise cx.err(f"SpaceToDepth of {h}x{w} with block size {b}")
    shape = (n, c * b * b, h // b, w // b)
    y, a = new_act(cx, x, node.output[0], NCHW_AS_NHWC.ir_shape(shape), NCHW_AS_NHWC, shape)
    cx.add_op("SPACE_TO_DEPTH", [x.ir], [y], block_size=b)
    cx.env[node.output[0]] = wrap(a, deq)


# -- Resize ----------------------------------------------------------------------------------------

F32 = np.float32
#: TFLite's (align_corners, half_pixel_centers) for ONNX's linear coordinate_transformation_mode
LINEAR_MODES = {"half_pixel": (False, True), "pytorch_half_pixel": (False, True), "align_corners": (True, False),
                "asymmetric": (False, False)}


def onnx_nearest(out_size: int, in_size: int, scale: float, coord: str, nearest: str) -> tuple[int, ...] | None:
    """onnxruntime's nearest-neighbour source index of every output position (float32), or None for a
    coordinate mode it would not apply here."""
    s = F32(scale)
    res = []
    for o in range(out_size):
        if coord == "half_pixel":
            v = F32(F32(F32(o) + F32(0.5)) / s) - F32(0.5)
        elif coord == "pytorch_half_pixel":
            v = F32(F32(F32(o) + F32(0.5)) / s) - F32(0.5) if out_size > 1 else F32(0)
        elif coord == "asymmetric":
            v = F32(F32(o) / s)
        elif coord == "tf_half_pixel_for_nn":
            v = F32(F32(F32(o) + F32(0.5)) / s)
        elif coord == "align_corners":
            v = F32(0) if out_size == 1 else F32(F32(o) * F32(in_size - 1)) / F32(out_size - 1)
        else:
            return None
        if nearest == "floor":
            k = math.floor(v)
        elif nearest == "ceil":
            k = math.ceil(v)
        elif nearest in ("round_prefer_floor", "round_prefer_ceil"):
            tie = float(v) - math.floor(v) == 0.5
            k = (math.floor(v) if nearest == "round_prefer_floor" else math.ceil(v)) if tie else round(float(v))
        else:
            return None
        res.append(min(max(int(k), 0), in_size - 1))
    return tuple(res)


def resize(cx: Builder, node):
    at = node_attrs(node)

    def s(name, default):
        v = at.get(name, default)
        return v.decode() if isinstance(v, bytes) else v

    mode, coord, nearest = s("mode", "nearest"), s("coordinate_transformation_mode", "half_pixel"), \
        s("nearest_mode", "round_prefer_floor")
    if cx.opset < 11:
        coord, nearest = "asymmetric", "round_prefer_floor"      # Upsample / Resize-10 semantics
    x, deq = nhwc_input(cx, node)
    n, c, h, w = x.shape
    scales = sizes = None
    si, zi = (1, None) if cx.opset < 11 else (2, 3)
    if len(node.input) > si and node.input[si] and cx.cval(node.input[si], "scales").size:
        scales = [float(v) for v in cx.cval(node.input[si], "scales").reshape(-1)]
    if zi is not None and len(node.input) > zi and node.input[zi]:
        sizes = [int(v) for v in cx.cval(node.input[zi], "sizes").reshape(-1)]
    if at.get("axes") is not None or s("keep_aspect_ratio_policy", "stretch") != "stretch":
        raise cx.err("Resize with axes or keep_aspect_ratio_policy (give scales or sizes for all 4 axes)")
    if sizes is not None:
        if len(sizes) != 4:
            raise cx.err(f"Resize sizes {sizes} (need 4 values, NCHW)")
        out = sizes
        sc = [F32(o) / F32(i) for o, i in zip(out, x.shape)]
    elif scales is not None:
        if len(scales) != 4:
            raise cx.err(f"Resize scales {scales} (need 4 values, NCHW)")
        out = [int(math.floor(d * F32(k))) for d, k in zip(x.shape, scales)]
        sc = [F32(k) for k in scales]
    else:
        raise cx.err("Resize without scales or sizes")
    if out[0] != n or out[1] != c:
        raise cx.err(f"Resize of the batch or channel axis ({list(x.shape)} -> {out}); only H and W")
    if min(out) <= 0:
        raise cx.err(f"Resize to {out}")
    oh, ow = out[2], out[3]
    if mode == "nearest":
        want = [onnx_nearest(oh, h, sc[2], coord, nearest), onnx_nearest(ow, w, sc[3], coord, nearest)]
        flags = next(((ac, hp) for ac, hp in ((False, False), (False, True), (True, False))
                      if [nearest_indices(oh, h, ac, hp), nearest_indices(ow, w, ac, hp)] == want), None)
        if flags is None:
            raise cx.err(f"Resize nearest with coordinate_transformation_mode '{coord}' and nearest_mode "
                         f"'{nearest}' picks other pixels for {h}x{w} -> {oh}x{ow} than TFLite's nearest "
                         "resize (asymmetric + floor, half_pixel + round_prefer_ceil, align_corners + "
                         "round_prefer_ceil agree with it)")
        kind = "RESIZE_NEAREST_NEIGHBOR"
    elif mode == "linear":
        if coord not in LINEAR_MODES:
            raise cx.err(f"Resize linear with coordinate_transformation_mode '{coord}' (half_pixel, "
                         "pytorch_half_pixel, align_corners or asymmetric)")
        if at.get("antialias", 0) and (oh < h or ow < w):
            raise cx.err("Resize linear with antialias while downscaling")
        if coord == "pytorch_half_pixel" and (oh == 1 or ow == 1):
            raise cx.err("Resize linear pytorch_half_pixel to a size of 1")
        if any(F32(o) / F32(i) != k for o, i, k in zip((oh, ow), (h, w), sc[2:])):
            raise cx.err(f"Resize linear with scales {[float(v) for v in sc]} that are not output / input "
                         f"sizes ({h}x{w} -> {oh}x{ow}); give sizes, or scales that divide exactly")
        flags = LINEAR_MODES[coord]
        kind = "RESIZE_BILINEAR"
    else:
        raise cx.err(f"Resize mode '{mode}' (nearest or linear; cubic is not supported)")
    shape = (n, c, oh, ow)
    y, a = new_act(cx, x, node.output[0], NCHW_AS_NHWC.ir_shape(shape), NCHW_AS_NHWC, shape)
    size = cx.const(f"{node.output[0]}_size", np.array([oh, ow], np.int32))
    cx.add_op(kind, [x.ir, size], [y], align_corners=flags[0], half_pixel_centers=flags[1])
    cx.env[node.output[0]] = wrap(a, deq)


# -- reductions ------------------------------------------------------------------------------------


def reduce_axes(cx: Builder, node, rank: int) -> tuple[list[int], bool]:
    """(ONNX axes reduced, keepdims): the axes attribute (opset < 18) or input, all axes when absent."""
    at = node_attrs(node)
    axes = int_list(cx, node, 1, "axes", "axes")
    if not axes:
        if at.get("noop_with_empty_axes", 0):
            raise cx.err(f"{node.op_type} with noop_with_empty_axes and no axes (an identity)")
        axes = list(range(rank))
    axes = sorted({a + rank if a < 0 else a for a in axes})
    if any(not 0 <= a < rank for a in axes):
        raise cx.err(f"axes {axes} out of range for a rank-{rank} input")
    if 0 in axes:
        raise cx.err(f"{node.op_type} over the batch axis")
    return axes, bool(at.get("keepdims", 1))


def reduce_extremum(cx: Builder, node, kind: str):
    x, deq = moving_input(cx, node)
    axes, keep = reduce_axes(cx, node, len(x.shape))
    shape, lay, ir_out = reduced(x, axes, keep)
    y, a = new_act(cx, x, node.output[0], ir_out, lay, shape)
    cx.add_op(kind, [x.ir, axes_const(cx, x, axes, node.output[0])], [y], keep_dims=keep)
    cx.env[node.output[0]] = wrap(a, deq)


def reduced(x: Act, axes, keep: bool):
    """(ONNX shape, layout, IR shape) of ``x`` reduced over ``axes``."""
    if keep:
        shape = tuple(1 if i in axes else d for i, d in enumerate(x.shape))
        return shape, x.layout, x.layout.ir_shape(shape)
    shape = tuple(d for i, d in enumerate(x.shape) if i not in axes)
    lay = drop_axes(x.layout, axes)
    return shape, lay, lay.ir_shape(shape)


def axes_const(cx: Builder, x: Act, axes, hint: str) -> str:
    return cx.const(f"{hint}_axes", np.array(sorted(x.layout.perm.index(a) for a in axes), np.int32))


def reduce_mean_sum(cx: Builder, node, kind: str):
    v = cx.val(node.input[0])
    got = act_of(v) if isinstance(v, Deq) else None
    if got is None:
        raise cx.err(f"{node.op_type} input must be DequantizeLinear of a quantized activation")
    x = plain(cx, got[0])
    axes, keep = reduce_axes(cx, node, len(x.shape))
    cx.env[node.output[0]] = Pending(kind, cx.k, [x], dict(axes=axes, keep=keep))


def emit_reduce(cx: Builder, p: Pending, out: str, q: Quant, dtype: str) -> Act:
    x = p.inputs[0]
    axes, keep = p.attrs["axes"], p.attrs["keep"]
    shape, lay, ir_out = reduced(x, axes, keep)
    clamp = cx.clamp_range(p, q)
    ir_axes = sorted(x.layout.perm.index(a) for a in axes)
    xshape = cx.tensors[x.ir].shape
    kind = {"REDUCE_MEAN": "MEAN", "REDUCE_SUM": "SUM"}[p.kind]
    if kind == "MEAN" and cx.numerics == "onnxruntime" and not (len(xshape) == 4 and ir_axes == [1, 2]):
        # onnxruntime numerics has the spatial mean only: bring the reduced axes together after the batch
        # axis (a transpose when bytes must move), view them as [1, R, 1, K], average, view as the output
        kept = [i for i in range(1, len(xshape)) if i not in ir_axes]
        perm = [0] + ir_axes + kept
        src = x.ir
        if [i for i in perm if xshape[i] != 1] != sorted(i for i in perm if xshape[i] != 1):
            src = cx.tensor(f"{out}_gathered", tuple(xshape[i] for i in perm), "int8", copy_quant(cx.q_of(x.ir)))
            cx.add_op("TRANSPOSE", [x.ir], [src], perm=tuple(perm))
        r = math.prod(xshape[i] for i in ir_axes)
        k = math.prod(xshape[i] for i in kept)
        view = cx.alias(src, (1, r, 1, k))
        t = cx.finish("MEAN", [view, cx.const(f"{out}_axes", np.array([1, 2], np.int32))], f"{out}_mean",
                      (1, 1, 1, k), q, clamp, keep_dims=True)
        return Act(cx.alias(t, ir_out, hint=out), lay, shape, dtype)
    y = cx.finish(kind, [x.ir, axes_const(cx, x, axes, out)], out, ir_out, q, clamp, keep_dims=keep)
    return Act(y, lay, shape, dtype)


HANDLERS = {
    "Slice": slice_, "Split": split, "Tile": tile, "Gather": gather, "DepthToSpace": depth_to_space,
    "SpaceToDepth": space_to_depth, "Resize": resize, "Upsample": resize,
    "ReduceMax": lambda cx, node: reduce_extremum(cx, node, "REDUCE_MAX"),
    "ReduceMin": lambda cx, node: reduce_extremum(cx, node, "REDUCE_MIN"),
    "ReduceMean": lambda cx, node: reduce_mean_sum(cx, node, "REDUCE_MEAN"),
    "ReduceSum": lambda cx, node: reduce_mean_sum(cx, node, "REDUCE_SUM"),
}
EMITTERS = {"REDUCE_MEAN": emit_reduce, "REDUCE_SUM": emit_reduce}
