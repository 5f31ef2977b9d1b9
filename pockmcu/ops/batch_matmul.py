"""BATCH_MATMUL, int8 (per-tensor quantization), and its gradients with respect to both operands.

Semantics: TFLite Micro's batch_matmul.cc (Prepare) and reference_ops::BatchMatMul<int8_t, int32_t>:
out[..., i, j] = clamp(requantize(sum over k of (L[..., i, k] - zp_lhs) * (R[..., k, j] - zp_rhs)) + zp_out)
with L = lhs (its last two axes swapped when adj_x), R = rhs (swapped when adj_y), ranks 2 to 5, batch
axes broadcast as NumPy does (a 1 against n), one multiplier / shift for s_lhs * s_rhs / s_out (TFLM's
GetQuantizedConvolutionMultipler: the scale product in float32, then double), no fused activation
(clamp to [-128, 127]), the int32 sum wrapping. Either operand may be a constant.

The kernel (kernels_c/pockmcu_batch_matmul_s8.c) reads the stored layouts directly (no transposed
copies, no scratch) and takes at most two batch axes: Prepare merges neighbouring batch axes that both
operands broadcast alike (and drops those of size 1), which covers every model whose batch axes are
not interleaved broadcasts; the rest are refused.

Gradients (real values, float32 kernels): d lhs = dz R^T and d rhs = L^T dz per batch, summed over the
batches a broadcast operand was reused for; dz is the output gradient with clamped outputs masked
(straight-through, as CONV_2D / FULLY_CONNECTED). Constant operands get no gradient.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import fixedpoint as fp
from ..ccode import Call, Emission, Local, Ptr, Struct
from ..ir import Graph, Op
from .base import OpDef, operand, register


@dataclass(frozen=True)
class BatchMatMulOptions:
    adj_x: bool = False
    adj_y: bool = False


@dataclass(frozen=True)
class BatchMatMulData:
    """Prepare's constants: the requantization and the kernel's 4-D views (batch axes merged)."""

    multiplier: int
    shift: int
    lhs_dims: tuple[int, int, int, int]      # {B0 or 1, B1 or 1, stored rows, stored cols}
    rhs_dims: tuple[int, int, int, int]
    out_dims: tuple[int, int, int, int]      # {B0, B1, ROWS, COLS}
    out_shape: tuple[int, ...]               # the broadcast output shape (TFLM's ReshapeOutputTensor)


def _extended(shape, rank: int) -> tuple[int, ...]:
    return (1,) * (rank - len(shape)) + tuple(int(d) for d in shape)


def matmul_shapes(lshape, rshape, adj_x: bool, adj_y: bool):
    """(output shape, merged batch groups [(size, lhs broadcast, rhs broadcast)], rows, depth, cols) or a
    problem string."""
    if not (2 <= len(lshape) <= 5 and 2 <= len(rshape) <= 5):
        return f"operands of rank {len(lshape)} and {len(rshape)} (TFLite Micro takes ranks 2 to 5)"
    rank = max(len(lshape), len(rshape))
    lx, rx = _extended(lshape, rank), _extended(rshape, rank)
    rows, depth = (lx[-1], lx[-2]) if adj_x else (lx[-2], lx[-1])
    rdepth, cols = (rx[-1], rx[-2]) if adj_y else (rx[-2], rx[-1])
    if depth != rdepth:
        return f"inner dimensions differ ({depth} and {rdepth}) for shapes {list(lshape)} and {list(rshape)}"
    batch, groups = [], []
    for a, b in zip(lx[:-2], rx[:-2]):
        if a != b and 1 not in (a, b):
            return f"batch dimensions {list(lshape[:-2])} and {list(rshape[:-2])} do not broadcast"
        n = max(a, b)
        batch.append(n)
        if n == 1:
            continue
        pattern = (a == 1, b == 1)
        if groups and groups[-1][1:] == pattern:
            groups[-1] = (groups[-1][0] * n,) + pattern
        else:
            groups.append((n,) + pattern)
    return tuple(batch) + (rows, cols), groups, rows, depth, cols


def batch_matmul_s8(lhs, rhs, zp_l: int, zp_r: int, adj_x: bool, adj_y: bool, mult: int, shift: int,
                    zp_out: int) -> np.ndarray:
    """reference_ops::BatchMatMul<int8_t, int32_t> on NumPy-broadcastable operands."""
    a = np.asarray(lhs, np.int64) - zp_l
    b = np.asarray(rhs, np.int64) - zp_r
    if adj_x:
        a = np.swapaxes(a, -1, -2)
    if adj_y:
        b = np.swapaxes(b, -1, -2)
    acc = fp.wrap32(np.matmul(a, b))
    out = fp.multiply_by_quantized_multiplier(acc, mult, shift) + zp_out
    return np.clip(out, -128, 127).astype(np.int8)


def _operand_values(g: Graph, op: Op, xs) -> dict[str, np.ndarray]:
    """lhs and rhs as [samples, *shape extended to the output's rank] (constants: one sample)."""
    rank = max(len(g.t(operand(op, n)).shape) for n in ("lhs", "rhs"))
    it = iter(xs)
    vals = {}
    for name in ("lhs", "rhs"):
        t = g.t(operand(op, name))
        v = t.data if t.is_const else next(it)
        vals[name] = np.asarray(v).reshape((-1,) + _extended(t.shape, rank))
    return vals


def _dims4(groups, rows_cols, which: int) -> tuple[int, int, int, int]:
    """A 4-D kernel view {B0, B1, r, c}: which = 0 for the output, 1 for lhs, 2 for rhs (1 where that
    operand is broadcast)."""
    sizes = [1 if which and grp[which] else grp[0] for grp in groups]
    sizes = [1] * (2 - len(sizes)) + sizes
    return (sizes[0], sizes[1]) + tuple(rows_cols)


@register
class BatchMatMul(OpDef):
    kind = "BATCH_MATMUL"
    tflite_ops = ("BATCH_MATMUL",)
    tflite_options = "BatchMatMulOptions"
    Options = BatchMatMulOptions
    operands = ("lhs", "rhs")
    kernel = "pockmcu_batch_matmul_s8"

    def parse_tflite(self, o, op: Op, tensors) -> BatchMatMulOptions:
        return BatchMatMulOptions(adj_x=bool(o.AdjX()), adj_y=bool(o.AdjY())) if o else BatchMatMulOptions()

    def check(self, g: Graph, op: Op) -> list[str]:
        problems = super().check(g, op)
        if len(op.inputs) != 2 or not all(op.inputs):
            return problems + [f"BATCH_MATMUL needs two inputs (got {len(op.inputs)})"]
        ts = [g.t(i) for i in op.inputs] + [g.t(op.outputs[0])]
        for t in ts:
            if t.dtype != "int8":
                problems.append(f"{t.dtype} tensor '{t.name}' (only int8 BATCH_MATMUL is supported)")
            elif t.quant is None:
                problems.append(f"tensor '{t.name}' has no quantization parameters")
            elif t.quant.per_channel:
                problems.append(f"tensor '{t.name}' is quantized per channel (BATCH_MATMUL takes one scale per tensor)")
        if problems:
            return problems
        if all(t.is_const for t in ts[:2]):
            return ["BATCH_MATMUL of two constants (fold it before export)"]
        shapes = matmul_shapes(ts[0].shape, ts[1].shape, op.options.adj_x, op.options.adj_y)
        if isinstance(shapes, str):
            return [shapes]
        out_shape, groups = shapes[0], shapes[1]
        if tuple(ts[2].shape) != out_shape:
            problems.append(f"output shape {list(ts[2].shape)} is not the product's {list(out_shape)}")
        if len(groups) > 2:
            problems.append(f"batch dimensions {list(ts[0].shape[:-2])} x {list(ts[1].shape[:-2])} broadcast in more "
                            "than two alternating groups (pockmcu's kernel takes two batch axes)")
        return problems

    def prepare(self, g: Graph, op: Op) -> BatchMatMulData:
        lt, rt, y = g.t(op.inputs[0]), g.t(op.inputs[1]), g.t(op.outputs[0])
        a = op.options
        out_shape, groups, rows, depth, cols = matmul_shapes(lt.shape, rt.shape, a.adj_x, a.adj_y)
        mult, shift = fp.fc_per_tensor_multiplier(lt.quant.s, rt.quant.s, y.quant.s)
        return BatchMatMulData(int(mult), int(shift),
                               _dims4(groups, (depth, rows) if a.adj_x else (rows, depth), 1),
                               _dims4(groups, (cols, depth) if a.adj_y else (depth, cols), 2),
                               _dims4(groups, (rows, cols), 0), tuple(out_shape))

    def reference(self, g: Graph, op: Op, xs, rt=None):
        v = _operand_values(g, op, xs)
        lt, r_t, y = g.t(op.inputs[0]), g.t(op.inputs[1]), g.t(op.outputs[0])
        p, a = op.prepared, op.options
        out = batch_matmul_s8(v["lhs"], v["rhs"], lt.quant.zp, r_t.quant.zp, a.adj_x, a.adj_y, p.multiplier, p.shift,
                              y.quant.zp)
        return [out.reshape((-1,) + tuple(y.shape[1:]))]

    def macs(self, g: Graph, op: Op) -> int:
        shapes = matmul_shapes(g.t(op.inputs[0]).shape, g.t(op.inputs[1]).shape, op.options.adj_x, op.options.adj_y)
        return 0 if isinstance(shapes, str) else int(np.prod(shapes[0])) * shapes[3]

    def describe(self, g: Graph, op: Op) -> str:
        a = op.options
        return (f"BATCH_MATMUL{' adj_x' if a.adj_x else ''}{' adj_y' if a.adj_y else ''}: "
                f"{list(g.t(op.inputs[0]).shape)} x {list(g.t(op.inputs[1]).shape)} -> {list(g.t(op.outputs[0]).shape)}")

    def backward(self, tb, op: Op) -> None:
        """dz = mask(dy); d lhs and d rhs for each activation operand something upstream trains through."""
        g = tb.g
        wanted = [n for n in ("lhs", "rhs") if not g.t(operand(op, n)).is_const and tb.needs_grad(operand(op, n))]
        if not wanted:
            return
        dz = tb.masked(op, tb.grad(op.outputs[0]))
        for name in wanted:
            x = operand(op, name)
            other = operand(op, "rhs" if name == "lhs" else "lhs")
            dx = tb.grad_tensor(x, f"{tb.short(x)}_grad_from_{op.name}_{name}")
            tb.emit(f"BATCH_MATMUL_GRAD_{name.upper()}", f"{op.name}_grad_{name}",
                    [dz] + ([] if g.t(other).is_const else [other]), [dx], layer=op)
            tb.add_grad(x, dx)

    def emit(self, g: Graph, op: Op, cg) -> Emission:
        p, a = op.prepared, op.options
        lt, r_t, y = g.t(op.inputs[0]), g.t(op.inputs[1]), g.t(op.outputs[0])
        decls = (
            Struct("params", "cmsis_nn_fc_params", dict(input_offset=-lt.quant.zp, filter_offset=-r_t.quant.zp,
                                                        output_offset=y.quant.zp, activation=dict(min=-128, max=127))),
            Struct("quant", "cmsis_nn_per_tensor_quant_params", dict(multiplier=p.multiplier, shift=p.shift)),
            Struct("lhs_dims", "cmsis_nn_dims", p.lhs_dims),
            Struct("rhs_dims", "cmsis_nn_dims", p.rhs_dims),
            Struct("output_dims", "cmsis_nn_dims", p.out_dims),
        )
        return Emission(decls=decls, calls=(Call(cg.kernel(op).function, (
            Local("params"), int(a.adj_x), int(a.adj_y), Local("quant"), Local("lhs_dims"), Ptr(lt.name),
            Local("rhs_dims"), Ptr(r_t.name), Local("output_dims"), Ptr(y.name)), status=True),))


# -- the backward ops -------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class MatMulGrad:
    """A gradient op of a BATCH_MATMUL layer (its options and prepared views are read)."""

    layer: Op


def _real(t, v) -> np.ndarray:
    return float(t.quant.s) * (np.asarray(v, np.float64) - t.quant.zp)


def _sum_to(x: np.ndarray, shape) -> np.ndarray:
    """Sum a broadcast gradient [samples, *out batch, r, c] back to [samples, *shape] (shape's rank)."""
    lead = x.ndim - 1 - len(shape)
    x = x.sum(axis=tuple(range(1, 1 + lead))) if lead > 0 else x
    axes = tuple(1 + i for i, d in enumerate(shape) if d == 1 and x.shape[1 + i] != 1)
    return x.sum(axis=axes, keepdims=True) if axes else x


class _MatMulGradOp(OpDef):
    Options = MatMulGrad
    io_dtypes = ("float32", "int8")
    which = ""

    def macs(self, g: Graph, op: Op) -> int:
        f = op.options.layer
        return BatchMatMul().macs(g, f)

    def reference(self, g: Graph, op: Op, xs, rt=None):
        f = op.options.layer
        a = f.options
        lt, r_t = g.t(f.inputs[0]), g.t(f.inputs[1])
        rank = max(len(lt.shape), len(r_t.shape))
        dz = np.asarray(xs[0], np.float64).reshape((-1,) + _extended(g.t(f.outputs[0]).shape, rank))
        other_t = r_t if self.which == "lhs" else lt
        ov = other_t.data if other_t.is_const else xs[1]
        other = _real(other_t, np.asarray(ov).reshape((-1,) + _extended(other_t.shape, rank)))
        if self.which == "lhs":
            rm = np.swapaxes(other, -1, -2) if a.adj_y else other          # R [.., K, C]
            d = dz @ np.swapaxes(rm, -1, -2)                                # [.., R, K]
            d = np.swapaxes(d, -1, -2) if a.adj_x else d
            shape = lt.shape
        else:
            lm = np.swapaxes(other, -1, -2) if a.adj_x else other          # L [.., R, K]
            d = np.swapaxes(lm, -1, -2) @ dz                                # [.., K, C]
            d = np.swapaxes(d, -1, -2) if a.adj_y else d
            shape = r_t.shape
        d = _sum_to(d, _extended(shape, rank))
        return [d.reshape((-1,) + tuple(shape[1:]))]


@register
class BatchMatMulGradLhs(_MatMulGradOp):
    """d lhs = dz R^T (stored layout of lhs); inputs: the output gradient and the saved int8 rhs
    (absent when rhs is a constant)."""

    kind = "BATCH_MATMUL_GRAD_LHS"
    kernel = "pockmcu_batch_matmul_grad_lhs_f32"
    which = "lhs"

    def emit(self, g: Graph, op: Op, cg) -> Emission:
        f = op.options.layer
        a, r_t = f.options, g.t(f.inputs[1])
        return Emission(calls=(Call(cg.kernel(op).function, (
            int(a.adj_x), int(a.adj_y), Local("lhs_dims", owner=f.name), Local("rhs_dims", owner=f.name),
            Ptr(r_t.name), float(r_t.quant.s), -r_t.quant.zp, Local("output_dims", owner=f.name),
            Ptr(op.inputs[0]), Ptr(op.outputs[0])), status=True),))


@register
class BatchMatMulGradRhs(_MatMulGradOp):
    """d rhs = L^T dz (stored layout of rhs); inputs: the output gradient and the saved int8 lhs
    (absent when lhs is a constant)."""

    kind = "BATCH_MATMUL_GRAD_RHS"
    kernel = "pockmcu_batch_matmul_grad_rhs_f32"
    which = "rhs"

    def emit(self, g: Graph, op: Op, cg) -> Emission:
        f = op.options.layer
        a, lt = f.options, g.t(f.inputs[0])
        return Emission(calls=(Call(cg.kernel(op).function, (
            int(a.adj_x), int(a.adj_y), Local("lhs_dims", owner=f.name), Ptr(lt.name), float(lt.quant.s), -lt.quant.zp,
            Local("rhs_dims", owner=f.name), Local("output_dims", owner=f.name),
            Ptr(op.inputs[0]), Ptr(op.outputs[0])), status=True),))
