"""Ops that only move or reinterpret bytes: RESHAPE / SQUEEZE / EXPAND_DIMS (an alias), PAD,
CONCATENATION, PACK and STRIDED_SLICE, and SHAPE. The constant shape arithmetic Keras exports leave
(SHAPE -> STRIDED_SLICE -> PACK) is folded away by the frontend (``fold``); PACK, STRIDED_SLICE and
CONCATENATION of activations (and constants) compile to copies (pockmcu/ops/datamove.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..ccode import Call, Emission, Local, Ptr, Struct, dims4
from ..ir import Graph, Op
from .base import OpDef, register
from .datamove import CopyOp, Move, const_ints, contiguous_strides, emit_moves, positive_axis


@register
class Reshape(OpDef):
    """The output is the input's bytes with another shape: no code, one shared buffer."""

    kind = "RESHAPE"
    tflite_ops = ("RESHAPE", "SQUEEZE", "EXPAND_DIMS")
    alias = True
    io_dtypes = ("int8", "float32")

    def check(self, g: Graph, op: Op) -> list[str]:
        problems = super().check(g, op)
        x, y = g.t(op.inputs[0]), g.t(op.outputs[0])
        if x.size != y.size:
            problems.append(f"reshape of {x.size} elements into {list(y.shape)}")
        return problems

    def activation_inputs(self, g: Graph, op: Op) -> list[str]:
        return [op.inputs[0]]

    def reference(self, g: Graph, op: Op, xs, rt=None):
        return [xs[0].reshape((xs[0].shape[0],) + g.t(op.outputs[0]).shape[1:])]

    def backward(self, tb, op: Op) -> None:
        x = op.inputs[0]
        dx = tb.grad_tensor(x, f"{tb.short(x)}_grad_from_{op.name}")
        tb.emit("RESHAPE", f"{op.name}_grad", [tb.grad(op.outputs[0])], [dx])
        tb.add_grad(x, dx)


@dataclass(frozen=True)
class PadData:
    """PAD's compile-time constants, as 4-D NHWC (a lower-rank tensor gets leading size-1 axes)."""

    pads: tuple[tuple[int, int], ...]   # (before, after) per axis, 4 pairs
    in4: tuple[int, ...]                # the input shape
    value: int                          # the pad value (PADV2's constant, else the output zero point)


@register
class Pad(OpDef):
    """PAD / PADV2 of an int8 tensor; the pad value is the output zero point (PAD) or the given constant (PADV2)."""

    kind = "PAD"
    tflite_ops = ("PAD", "PADV2")
    kernel = "arm_pad_s8"

    def check(self, g: Graph, op: Op) -> list[str]:
        problems = super().check(g, op)
        if len(op.inputs) < 2 or not g.t(op.inputs[1]).is_const:
            problems.append("PAD with non-constant paddings")
        if len(op.inputs) > 2 and op.inputs[2] and not g.t(op.inputs[2]).is_const:
            problems.append("PADV2 with a non-constant pad value")
        x = g.t(op.inputs[0])
        if len(x.shape) > 4:
            problems.append(f"PAD of a rank-{len(x.shape)} tensor (at most 4)")
        return problems

    def prepare(self, g: Graph, op: Op) -> PadData:
        x = g.t(op.inputs[0])
        pads = [(int(a), int(b)) for a, b in g.t(op.inputs[1]).data.astype(int).reshape(-1, 2)]
        rank = len(x.shape)
        if len(op.inputs) > 2 and op.inputs[2]:
            value = int(g.t(op.inputs[2]).data.reshape(-1)[0])
        else:
            value = g.t(op.outputs[0]).quant.zp
        return PadData(pads=((0, 0),) * (4 - rank) + tuple(pads), in4=(1,) * (4 - rank) + tuple(x.shape),
                       value=value)

    def backward(self, tb, op: Op) -> None:
        x = op.inputs[0]
        dx = tb.grad_tensor(x, f"{tb.short(x)}_grad_from_{op.name}")
        tb.emit("PAD_GRAD", f"{op.name}_grad", [tb.grad(op.outputs[0])], [dx], layer=op)
        tb.add_grad(x, dx)

    def reference(self, g: Graph, op: Op, xs, rt=None):
        x = xs[0]
        pads = op.prepared.pads[4 - x.ndim:]
        pads = [(0, 0)] + [tuple(p) for p in pads[1:]]
        return [np.pad(x, pads, constant_values=op.prepared.value)]

    def emit(self, g: Graph, op: Op, cg) -> Emission:
        p = op.prepared
        return Emission(
            calls=(Call(cg.kernel(op).function, (Ptr(op.inputs[0]), Ptr(op.outputs[0]), p.value, Local("input_dims"),
                                                  Local("pre_pad"), Local("post_pad")), status=True),),
            decls=(Struct("input_dims", "cmsis_nn_dims", dims4(p.in4)),
                   Struct("pre_pad", "cmsis_nn_dims", tuple(a for a, _ in p.pads)),
                   Struct("post_pad", "cmsis_nn_dims", tuple(b for _, b in p.pads))))


@dataclass(frozen=True)
class ConcatAxis:
    """CONCATENATION's options: the axis (>= 0) and the TFLite fused activation code (only 0 is supported)."""

    axis: int
    activation: int = 0


@dataclass(frozen=True)
class ConcatData:
    """CONCATENATION's compile-time constants: the axis in the 4-D NHWC view of the tensors (rank <= 4,
    CMSIS-NN's kernels), and the copies that place each input (any rank)."""

    axis4: int
    moves: tuple[Move, ...] = ()


@register
class Concatenation(CopyOp):
    """CONCATENATION of int8 tensors (activations or constants) that share the output's quantization
    (TFLM requires it); all constant, it folds.

    Up to rank 4 it is emitted as one CMSIS-NN arm_concatenation_s8_{x,y,z,w} call per input: the
    tensor is seen as [w][z][y][x] (x innermost), i.e. NHWC -> w=N, z=H, y=W, x=C (a constant input is
    read from its flash array). Rank 5 and 6: one strided copy per input.
    """

    kind = "CONCATENATION"
    tflite_ops = ("CONCATENATION",)
    tflite_options = "ConcatenationOptions"
    kernel = "arm_concatenation_s8"
    Options = ConcatAxis
    AXIS_KERNEL = {3: "x", 2: "y", 1: "z", 0: "w"}   # NHWC axis (of the 4-D view) -> CMSIS-NN axis name

    def variant(self, g: Graph, op: Op, cg) -> str:
        return self.AXIS_KERNEL.get(op.prepared.axis4, "strided")

    def parse_tflite(self, o, op: Op, tensors) -> ConcatAxis:
        rank = len(tensors[op.outputs[0]].shape)
        axis = int(o.Axis())
        return ConcatAxis(axis=axis + rank if axis < 0 else axis, activation=int(o.FusedActivationFunction()))

    def shape_problems(self, g: Graph, op: Op) -> list[str]:
        problems = []
        if op.options.activation != 0:
            problems.append("CONCATENATION with a fused activation")
        y, a = g.t(op.outputs[0]), op.options.axis
        xs = [g.t(i) for i in op.inputs]
        if not 0 <= a < len(y.shape) or any(len(x.shape) != len(y.shape) for x in xs) or \
                any(x.shape[:a] + x.shape[a + 1:] != y.shape[:a] + y.shape[a + 1:] for x in xs) or \
                sum(x.shape[a] for x in xs) != y.shape[a]:
            problems.append(f"inputs {[list(x.shape) for x in xs]} do not concatenate along axis {a} to "
                            f"{list(y.shape)}")
        elif len(y.shape) <= 4 and max(y.shape, default=1) > 0xFFFF:
            problems.append("CONCATENATION dimension larger than 65535")
        return problems

    def sample(self, g: Graph, op: Op, vals):
        return [np.concatenate(vals, axis=op.options.axis)]

    def moves(self, g: Graph, op: Op) -> list[Move]:
        y, a = g.t(op.outputs[0]), op.options.axis
        ys = contiguous_strides(y.shape)
        moves, start = [], 0
        for i in op.inputs:
            x = g.t(i)
            moves.append(Move(i, y.name, tuple(x.shape), contiguous_strides(x.shape), ys, 0, start * ys[a]))
            start += x.shape[a]
        return moves

    def prepare(self, g: Graph, op: Op) -> ConcatData:
        rank = len(g.t(op.outputs[0]).shape)
        return ConcatData(axis4=op.options.axis + 4 - rank if rank <= 4 else -1, moves=tuple(self.moves(g, op)))

    def prepared_moves(self, op: Op) -> tuple[Move, ...]:
        return op.prepared.moves

    def backward(self, tb, op: Op) -> None:
        y = tb.g.t(op.outputs[0])
        if len(y.shape) > 4:
            return super().backward(tb, op)
        axis = op.options.axis
        outer = int(np.prod(y.shape[:axis], dtype=np.int64))
        row = int(np.prod(y.shape[axis:], dtype=np.int64))
        offset = 0
        for x in op.inputs:
            chunk = int(np.prod(tb.g.t(x).shape[axis:], dtype=np.int64))
            if tb.needs_grad(x):
                dx = tb.grad_tensor(x, f"{tb.short(x)}_grad_from_{op.name}")
                tb.emit("SLICE", f"{op.name}_grad_{offset}", [tb.grad(op.outputs[0])], [dx], outer=outer, row=row,
                        offset=offset, chunk=chunk)
                tb.add_grad(x, dx)
            offset += chunk

    def emit(self, g: Graph, op: Op, cg) -> Emission:
        axis4 = op.prepared.axis4
        if axis4 < 0:
            return emit_moves(list(op.prepared.moves), cg.kernel(op).function)

        def as4(shape):
            return (1,) * (4 - len(shape)) + tuple(shape)

        y = op.outputs[0]
        out_dim = as4(g.t(y).shape)[axis4]
        fn = cg.kernel(op).function
        calls, offset = [], 0
        for i in op.inputs:
            n, h, w, c = as4(g.t(i).shape)
            extra = () if axis4 == 0 else (out_dim,)
            calls.append(Call(fn, (Ptr(i), c, w, h, n, Ptr(y)) + extra + (offset,)))
            offset += (n, h, w, c)[axis4]
        return Emission(calls=tuple(calls))


@dataclass(frozen=True, eq=False)
class PadGradOf:
    """PAD_GRAD's options: the forward PAD op whose padding it crops away."""

    layer: Op


@register
class PadGrad(OpDef):
    """PAD backward: the gradient of the padded tensor cropped back to the input."""

    kind = "PAD_GRAD"
    Options = PadGradOf
    kernel = "pockmcu_pad_grad_f32"
    io_dtypes = ("float32",)

    def reference(self, g: Graph, op: Op, xs, rt=None):
        f = op.options.layer
        x = g.t(f.inputs[0])
        pads = f.prepared.pads[4 - len(x.shape):]
        index = (slice(None),) + tuple(slice(p[0], p[0] + d) for p, d in zip(pads[1:], x.shape[1:]))
        return [xs[0][index]]

    def emit(self, g: Graph, op: Op, cg) -> Emission:
        f = op.options.layer.name
        return Emission(calls=(Call(cg.kernel(op).function, (
            Local("input_dims", owner=f), Local("pre_pad", owner=f), Local("post_pad", owner=f),
            Ptr(op.inputs[0]), Ptr(op.outputs[0])), status=True),))


class _Folded(OpDef):
    """Shape arithmetic: only ever executed by the compiler (fold), never emitted."""

    foldable = True
    io_dtypes = ()

    def check(self, g: Graph, op: Op) -> list[str]:
        return [f"{self.kind} whose value is not known at compile time"]

    def consts(self, g: Graph, op: Op):
        ts = [g.t(i) for i in op.inputs if i]
        return None if any(t.data is None for t in ts) else [t.data for t in ts]


@register
class Shape(_Folded):
    kind = "SHAPE"
    tflite_ops = ("SHAPE",)

    def fold(self, g: Graph, op: Op):
        return np.array(g.t(op.inputs[0]).shape, np.int32)


@dataclass(frozen=True)
class PackAxis:
    """PACK's options: the new axis the inputs are stacked along (>= 0)."""

    axis: int = 0


@register
class Pack(CopyOp):
    """PACK: the inputs (activations or constants) stacked along a new axis; all constant (Keras'
    shape arithmetic), it folds."""

    kind = "PACK"
    tflite_ops = ("PACK",)
    tflite_options = "PackOptions"
    Options = PackAxis

    def parse_tflite(self, o, op: Op, tensors) -> PackAxis:
        rank = len(tensors[op.outputs[0]].shape)
        return PackAxis(axis=positive_axis(int(o.Axis()) if o else 0, rank))

    def shape_problems(self, g: Graph, op: Op) -> list[str]:
        y, a = g.t(op.outputs[0]), op.options.axis
        want = y.shape[:a] + y.shape[a + 1:] if 0 <= a < len(y.shape) else None
        if want is None or y.shape[a] != len(op.inputs) or any(g.t(i).shape != want for i in op.inputs):
            return [f"PACK of {[list(g.t(i).shape) for i in op.inputs]} along axis {a} cannot give {list(y.shape)}"]
        return []

    def sample(self, g: Graph, op: Op, vals):
        return [np.stack(vals, axis=op.options.axis)]

    def moves(self, g: Graph, op: Op) -> list[Move]:
        y, a = g.t(op.outputs[0]), op.options.axis
        ys = contiguous_strides(y.shape)
        grid = y.shape[:a] + (1,) + y.shape[a + 1:]
        return [Move(i, y.name, grid, contiguous_strides(grid), ys, 0, j * ys[a]) for j, i in enumerate(op.inputs)]


@dataclass(frozen=True)
class SliceMasks:
    """STRIDED_SLICE's options: begin / end / strides (None when not constant) and TFLite's bit masks
    (bit d concerns axis d). TFLite Micro ignores ellipsis_mask, new_axis_mask and offset (its
    BuildStridedSliceParams sets the first two to 0 and never reads the third); so does pockmcu."""

    begin: tuple[int, ...] | None = None
    end: tuple[int, ...] | None = None
    strides: tuple[int, ...] | None = None
    begin_mask: int = 0
    end_mask: int = 0
    shrink_axis_mask: int = 0
    ellipsis_mask: int = 0
    new_axis_mask: int = 0


def strided_slice_axes(shape, o: SliceMasks) -> list[tuple[int, int, int]]:
    """(start, stop, stride) per axis as TFLite Micro's StridedSlice Eval computes them
    (StridedSliceStartForAxis / StridedSliceEndForAxis; the loop runs ``range(start, stop, stride)``)."""
    out = []
    for k, d in enumerate(shape):
        stride = o.strides[k]
        lo, hi = (0, d) if stride > 0 else (-1, d - 1)
        start = o.begin[k] + (d if o.begin[k] < 0 else 0)
        start = min(max(start, lo), hi)
        if o.begin_mask >> k & 1:
            start = 0 if stride > 0 else d - 1
        if o.shrink_axis_mask >> k & 1:
            stop = start if start >= d else start + 1
        else:
            stop = o.end[k] + (d if o.end[k] < 0 else 0)
            stop = min(max(stop, lo), hi)
            if o.end_mask >> k & 1:
                stop = d if stride > 0 else -1
        out.append((start, stop, stride))
    return out


@register
class StridedSlice(CopyOp):
    """STRIDED_SLICE with compile-time begin / end / strides (negative strides too), begin, end and
    shrink masks, as TFLite Micro computes it (rank <= 4, as TFLite Micro); a constant input (Keras'
    SHAPE -> STRIDED_SLICE) folds."""

    kind = "STRIDED_SLICE"
    tflite_ops = ("STRIDED_SLICE",)
    tflite_options = "StridedSliceOptions"
    Options = SliceMasks
    max_rank = 4

    def parse_tflite(self, o, op: Op, tensors) -> SliceMasks:
        b, e, s = (const_ints(tensors, op.inputs[k]) if len(op.inputs) > k else None for k in (1, 2, 3))
        if b is not None and e is not None and s is not None:
            self.take_operands(op, 1)
        return SliceMasks(begin=b, end=e, strides=s, begin_mask=o.BeginMask(), end_mask=o.EndMask(),
                          shrink_axis_mask=o.ShrinkAxisMask(), ellipsis_mask=o.EllipsisMask(),
                          new_axis_mask=o.NewAxisMask())

    def shape_problems(self, g: Graph, op: Op) -> list[str]:
        o = op.options
        x, y = g.t(op.inputs[0]), g.t(op.outputs[0])
        if o.begin is None or o.end is None or o.strides is None:
            return ["STRIDED_SLICE with non-constant begin, end or strides"]
        rank = len(x.shape)
        if not len(o.begin) == len(o.end) == len(o.strides) == rank:
            return [f"begin/end/strides of length {len(o.begin)}/{len(o.end)}/{len(o.strides)} for a rank-{rank} input"]
        if 0 in o.strides:
            return ["STRIDED_SLICE with a zero stride"]
        axes = strided_slice_axes(x.shape, o)
        counts = [len(range(*a)) for a in axes]
        kept = tuple(c for k, c in enumerate(counts) if not o.shrink_axis_mask >> k & 1)
        if kept != tuple(y.shape) or math.prod(counts) != y.size:
            return [f"TFLite Micro's strided slice of {list(x.shape)} gives {counts} elements per axis "
                    f"(shrink mask {o.shrink_axis_mask}), not the output {list(y.shape)}"]
        return []

    def sample(self, g: Graph, op: Op, vals):
        axes = strided_slice_axes(vals[0].shape, op.options)
        picked = vals[0][np.ix_(*[np.arange(*a, dtype=np.int64) for a in axes])]
        return [picked.reshape(g.t(op.outputs[0]).shape)]

    def moves(self, g: Graph, op: Op) -> list[Move]:
        x, y = g.t(op.inputs[0]), g.t(op.outputs[0])
        axes = strided_slice_axes(x.shape, op.options)
        xs = contiguous_strides(x.shape)
        grid = tuple(len(range(*a)) for a in axes)
        return [Move(x.name, y.name, grid, tuple(a[2] * s for a, s in zip(axes, xs)), contiguous_strides(grid),
                     sum(a[0] * s for a, s in zip(axes, xs)))]
