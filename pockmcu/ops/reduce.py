"""Reductions of an int8 tensor over any axes: MEAN, SUM, REDUCE_MAX, REDUCE_MIN, and their gradients.

Semantics: TFLite Micro's reduce.cc / reduce_common.cc. For int8, MEAN and SUM both run
reference_ops::QuantizedMeanOrSum whatever the axes (TFLM has no separate spatial path for int8;
its special 4-D axes-1-and-2 path is float-only): the sum over the axes wraps in int32, the input
zero point times the count is subtracted, and MultiplyByQuantizedMultiplier with
QuantizeMultiplier(s_in / s_out) requantizes; MEAN first folds 1 / count into that multiplier at
Eval time (fixedpoint.mean_adjusted_multiplier), SUM does not. REDUCE_MAX / REDUCE_MIN run
ReduceGeneric and require equal input and output quantization (TFLM fails otherwise).

Any axes: the input is folded at compile time into five groups (outer, reduced, middle, reduced,
inner; ``reduce_groups``), which every set of axes of a rank <= 4 tensor fits; the kernels
(kernels_c/pockmcu_reduce_*_s8.c) loop over those. A MEAN over H and W of an NHWC tensor keeps its
own kernel, pockmcu_mean_s8 (or onnxruntime's pockmcu_mean_ort_s8), and its gradient MEAN_GRAD,
which the training fusion CONV_1X1_GRAD_FROM_MEAN (training/fusions.py) builds on.

Gradients (float32, w.r.t. real values): MEAN and SUM broadcast the output gradient (divided by the
count for MEAN); REDUCE_MAX / REDUCE_MIN share each output's gradient equally among the inputs equal
to it, as PyTorch's amax / amin. The int8 output's clamp is not masked (as for MEAN before).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import fixedpoint as fp
from .. import fixedpoint_ort as ort
from ..ccode import Array, Call, Emission, Local, Ptr, Struct, dims4
from ..ir import Graph, Op
from ..shapes import bias_limit
from .base import OpDef, opdef, operand, register
from .conv import weight_scales

F32 = np.float32


@dataclass(frozen=True)
class ReduceOptions:
    keep_dims: bool = False


#: the name MEAN's options had (the ONNX frontend builds MEAN with keep_dims)
MeanOptions = ReduceOptions


@dataclass(frozen=True)
class ReduceData:
    """Compile-time constants of a reduction."""

    groups: tuple[int, ...]      # the input folded: (outer, reduced0, middle, reduced1, inner)
    count: int                   # inputs reduced into each output
    spatial: bool = False        # MEAN over H, W of NHWC: pockmcu_mean_s8 (and MEAN_GRAD)
    q: dict | None = None        # MEAN / SUM: fixedpoint.mean_params (+ ort_mant, ort_exp for onnxruntime)
    multiplier: int = 0          # what pockmcu_reduce_sum_s8 applies (MEAN: 1 / count folded in, as TFLM's Eval)
    shift: int = 0


@dataclass(frozen=True, eq=False)
class MeanGradOptions:
    layer: Op
    spatial_mean: bool = True          # the gradient is the output gradient / (H W) at every position


@dataclass(frozen=True, eq=False)
class ReduceGradOptions:
    layer: Op                          # the forward MEAN / SUM / REDUCE_MAX / REDUCE_MIN


@dataclass(frozen=True, eq=False)
class FusedMeanGradOptions:
    layer: Op                          # the 1x1 CONV_2D
    bias: str | None                   # its trained bias tensor, or None
    coef: np.ndarray                   # the bias update's QAS coefficients


def resolve_axes(rank: int, axes) -> list[int] | None:
    """TFLM's ResolveAxis: negative axes counted from the end, duplicates dropped (None: out of range)."""
    out: list[int] = []
    for a in np.asarray(axes).reshape(-1):
        a = int(a) + rank if int(a) < 0 else int(a)
        if not 0 <= a < rank:
            return None
        if a not in out:
            out.append(a)
    return out


def reduce_groups(shape, axes) -> tuple[int, ...] | None:
    """The shape folded into (outer, reduced0, middle, reduced1, inner): runs of adjacent kept or
    reduced axes merged, padded with 1s; None when the axes alternate more often than that allows
    (possible only from rank 5 on)."""
    runs: list[list] = []
    for i, d in enumerate(shape):
        r = i in axes
        if runs and runs[-1][0] == r:
            runs[-1][1] *= int(d)
        else:
            runs.append([r, int(d)])
    if not runs or runs[0][0]:
        runs.insert(0, [False, 1])
    if len(runs) > 5:
        return None
    while len(runs) < 5:
        runs.append([not runs[-1][0], 1])
    return tuple(d for _, d in runs)


def _folded(x: np.ndarray, groups) -> np.ndarray:
    """N samples of the input as [S, outer, reduced0, middle, reduced1, inner]."""
    return np.asarray(x).reshape((-1,) + tuple(groups))


def reduce_sum_s8(x: np.ndarray, groups, input_zp: int, output_zp: int, multiplier: int, shift: int) -> np.ndarray:
    """pockmcu_reduce_sum_s8 (TFLM QuantizedMeanOrSum with the multiplier it applies): [S, outer,
    middle, inner] int8."""
    xs = _folded(x, groups).astype(np.int64)
    count = groups[1] * groups[3]
    total = fp.wrap32(fp.wrap32(xs.sum(axis=(2, 4))) - input_zp * count)
    out = fp.multiply_by_quantized_multiplier(total, multiplier, shift) + output_zp
    return np.clip(out, -128, 127).astype(np.int8)


def reduce_extremum_s8(x: np.ndarray, groups, kind: str) -> np.ndarray:
    xs = _folded(x, groups)
    return (xs.max if kind == "REDUCE_MAX" else xs.min)(axis=(2, 4)).astype(np.int8)


def reduce_broadcast_grad(dy: np.ndarray, groups, divisor: int) -> np.ndarray:
    """pockmcu_reduce_broadcast_grad_f32: dy / divisor in float32, broadcast over the reduced axes."""
    o0, r0, o1, r1, o2 = groups
    v = np.asarray(dy, np.float64).astype(F32).reshape(-1, o0, 1, o1, 1, o2) / F32(divisor)
    return np.broadcast_to(v, (v.shape[0],) + tuple(groups)).astype(F32)


def reduce_extremum_grad(x: np.ndarray, y: np.ndarray, dy: np.ndarray, groups) -> np.ndarray:
    """pockmcu_reduce_extremum_grad_f32: (dy / ties) * (x == y) in float32 (PyTorch's amax backward)."""
    o0, r0, o1, r1, o2 = groups
    xs = _folded(x, groups)
    ys = np.asarray(y).reshape(-1, o0, 1, o1, 1, o2)
    eq = xs == ys
    ties = eq.sum(axis=(2, 4), keepdims=True).astype(F32)
    v = np.asarray(dy, np.float64).astype(F32).reshape(ys.shape) / ties
    return (v * eq.astype(F32)).astype(F32)


class _Reduce(OpDef):
    """The shared part of MEAN, SUM, REDUCE_MAX and REDUCE_MIN."""

    Options = ReduceOptions
    operands = ("input", "axes")
    tflite_options = "ReducerOptions"

    def parse_tflite(self, o, op: Op, tensors) -> ReduceOptions:
        return ReduceOptions(keep_dims=bool(o.KeepDims()) if o else False)

    def activation_inputs(self, g: Graph, op: Op) -> list[str]:
        return [op.inputs[0]]

    def axes(self, g: Graph, op: Op) -> list[int] | None:
        return resolve_axes(len(g.t(op.inputs[0]).shape), g.t(operand(op, "axes")).data)

    def check(self, g: Graph, op: Op) -> list[str]:
        problems = super().check(g, op)
        x, y = g.t(op.inputs[0]), g.t(op.outputs[0])
        axes_t = g.t(operand(op, "axes"))
        if axes_t.data is None:
            return problems + [f"{op.kind} with non-constant axes (make them a constant tensor)"]
        axes = self.axes(g, op)
        if axes is None:
            return problems + [f"{op.kind} axes {axes_t.data.reshape(-1).tolist()} out of range for a "
                               f"rank-{len(x.shape)} input"]
        if any(int(d) <= 0 for d in x.shape):
            return problems + [f"{op.kind} of an empty tensor {list(x.shape)}"]
        groups = reduce_groups(x.shape, axes)
        if groups is None:
            return problems + [f"{op.kind} over axes {sorted(axes)} of a rank-{len(x.shape)} tensor: the kept and "
                               "reduced axes alternate more than twice (reshape to rank 4 or less first)"]
        if y.size != groups[0] * groups[2] * groups[4]:
            problems.append(f"{op.kind} output {list(y.shape)} does not match input {list(x.shape)} "
                            f"reduced over axes {sorted(axes)}")
        return problems

    def _data(self, g: Graph, op: Op, **kw) -> ReduceData:
        x = g.t(op.inputs[0])
        groups = reduce_groups(x.shape, self.axes(g, op))
        return ReduceData(groups=groups, count=groups[1] * groups[3], **kw)

    def _out_shape(self, g: Graph, op: Op, out: np.ndarray) -> np.ndarray:
        """[S, outer, middle, inner] as N samples of the output ([N, *shape[1:]])."""
        y = g.t(op.outputs[0])
        return out.reshape((-1,) + tuple(y.shape[1:])) if len(y.shape) else out.reshape(-1)

    def _shape_decl(self, op: Op) -> Array:
        return Array("shape", "int32_t", op.prepared.groups, comment="outer, reduced, middle, reduced, inner")

    def backward(self, tb, op: Op) -> None:
        x = op.inputs[0]
        if not tb.needs_grad(x):
            return
        dx = tb.grad_tensor(x, f"{tb.short(x)}_grad_from_{op.name}")
        self._grad(tb, op, dx)
        tb.add_grad(x, dx)

    def _grad(self, tb, op: Op, dx: str) -> None:
        tb.emit("REDUCE_BROADCAST_GRAD", f"{op.name}_grad", [tb.grad(op.outputs[0])], [dx], layer=op)


@register
class Mean(_Reduce):
    kind = "MEAN"
    tflite_ops = ("MEAN",)
    kernel = "pockmcu_mean_s8"

    @staticmethod
    def is_spatial(g: Graph, op: Op) -> bool:
        x = g.t(op.inputs[0])
        axes = resolve_axes(len(x.shape), g.t(operand(op, "axes")).data)
        return len(x.shape) == 4 and axes is not None and sorted(axes) == [1, 2]

    def check(self, g: Graph, op: Op) -> list[str]:
        problems = super().check(g, op)
        if not problems and g.numerics == "onnxruntime" and not self.is_spatial(g, op):
            x = g.t(op.inputs[0])
            problems.append(f"MEAN over axes {sorted(self.axes(g, op))} of {list(x.shape)} with onnxruntime numerics "
                            "(only the spatial mean of a global average pool)")
        return problems

    def prepare(self, g: Graph, op: Op) -> ReduceData:
        x, y = g.t(op.inputs[0]), g.t(op.outputs[0])
        spatial = self.is_spatial(g, op)
        groups = reduce_groups(x.shape, self.axes(g, op))
        count = groups[1] * groups[3]
        q = fp.mean_params(x.quant.s, x.quant.zp, y.quant.s, y.quant.zp, count)
        if g.numerics == "onnxruntime":
            # QLinearGlobalAveragePool: scale = float32(s_in / (s_out * float32(count)))
            n = np.float32(x.shape[1] * x.shape[2])
            scale = np.float32(x.quant.scale[0]) / np.float32(np.float32(y.quant.scale[0]) * n)
            m, e = ort.f32_mant_exp(scale)
            q.update(ort_mant=int(m[0]), ort_exp=int(e[0]))
        return ReduceData(groups=groups, count=count, spatial=spatial, q=q,
                          multiplier=q["adjusted_multiplier"], shift=q["adjusted_shift"])

    def variant(self, g: Graph, op: Op, cg) -> str:
        return "" if op.prepared.spatial else "general"

    def reference(self, g: Graph, op: Op, xs, rt=None):
        p = op.prepared
        if g.numerics == "onnxruntime":   # RoundHalfEven(float32(float32(sum - zp * count) * scale)) + zp_out
            q, x = p.q, xs[0].astype(np.int64)
            acc = x.sum(axis=(1, 2), keepdims=True) - q["input_zero_point"] * x.shape[1] * x.shape[2]
            out = np.clip(ort.requantize_ort(acc, q["ort_mant"], q["ort_exp"]) + q["output_zero_point"], -128, 127)
            return [out.astype(np.int8).reshape((xs[0].shape[0],) + g.t(op.outputs[0]).shape[1:])]
        if p.spatial:
            out = fp.mean_s8(xs[0], (1, 2), op.options.keep_dims, p.q)
            return [out.reshape((xs[0].shape[0],) + g.t(op.outputs[0]).shape[1:])]
        out = reduce_sum_s8(xs[0], p.groups, p.q["input_zero_point"], p.q["output_zero_point"], p.multiplier, p.shift)
        return [self._out_shape(g, op, out)]

    def emit(self, g: Graph, op: Op, cg) -> Emission:
        p, x, y = op.prepared, op.inputs[0], op.outputs[0]
        fn = cg.kernel(op).function
        if not p.spatial:
            return Emission(decls=(self._shape_decl(op),), calls=(Call(fn, (
                Local("shape", address=False), Ptr(x), p.q["input_offset"], p.q["output_offset"], p.multiplier,
                p.shift, Ptr(y)), status=True),))
        q = p.q
        mult = (q["ort_mant"], q["ort_exp"]) if g.numerics == "onnxruntime" else (q["multiplier"], q["shift"])
        return Emission(decls=(Struct("input_dims", "cmsis_nn_dims", dims4(g.t(x).shape)),), calls=(Call(fn, (
            Local("input_dims"), Ptr(x), q["input_offset"], q["output_offset"], *mult, Ptr(y)), status=True),))

    def _grad(self, tb, op: Op, dx: str) -> None:
        if self.is_spatial(tb.g, op):
            tb.emit("MEAN_GRAD", f"{op.name}_grad", [tb.grad(op.outputs[0])], [dx], layer=op, spatial_mean=True)
        else:
            super()._grad(tb, op, dx)


@register
class Sum(_Reduce):
    kind = "SUM"
    tflite_ops = ("SUM",)
    kernel = "pockmcu_reduce_sum_s8"

    def prepare(self, g: Graph, op: Op) -> ReduceData:
        x, y = g.t(op.inputs[0]), g.t(op.outputs[0])
        q = fp.mean_params(x.quant.s, x.quant.zp, y.quant.s, y.quant.zp)
        return self._data(g, op, q=q, multiplier=q["multiplier"], shift=q["shift"])

    def reference(self, g: Graph, op: Op, xs, rt=None):
        p = op.prepared
        out = reduce_sum_s8(xs[0], p.groups, p.q["input_zero_point"], p.q["output_zero_point"], p.multiplier, p.shift)
        return [self._out_shape(g, op, out)]

    def emit(self, g: Graph, op: Op, cg) -> Emission:
        p = op.prepared
        return Emission(decls=(self._shape_decl(op),), calls=(Call(cg.kernel(op).function, (
            Local("shape", address=False), Ptr(op.inputs[0]), p.q["input_offset"], p.q["output_offset"],
            p.multiplier, p.shift, Ptr(op.outputs[0])), status=True),))


class _Extremum(_Reduce):
    def check(self, g: Graph, op: Op) -> list[str]:
        problems = super().check(g, op)
        x, y = g.t(op.inputs[0]), g.t(op.outputs[0])
        if not problems and (x.quant.per_channel or y.quant.per_channel or float(F32(x.quant.s)) != float(F32(y.quant.s))
                             or x.quant.zp != y.quant.zp):
            problems.append(f"input quantization (scale {x.quant.s}, zero point {x.quant.zp}) differs from the "
                            f"output's ({y.quant.s}, {y.quant.zp}); TFLite Micro refuses it")
        return problems

    def prepare(self, g: Graph, op: Op) -> ReduceData:
        return self._data(g, op)

    def reference(self, g: Graph, op: Op, xs, rt=None):
        return [self._out_shape(g, op, reduce_extremum_s8(xs[0], op.prepared.groups, self.kind))]

    def emit(self, g: Graph, op: Op, cg) -> Emission:
        return Emission(decls=(self._shape_decl(op),), calls=(Call(cg.kernel(op).function, (
            Local("shape", address=False), Ptr(op.inputs[0]), Ptr(op.outputs[0])), status=True),))

    def _grad(self, tb, op: Op, dx: str) -> None:
        tb.emit("REDUCE_EXTREMUM_GRAD", f"{op.name}_grad", [op.inputs[0], op.outputs[0], tb.grad(op.outputs[0])],
                [dx], layer=op)


@register
class ReduceMax(_Extremum):
    kind = "REDUCE_MAX"
    tflite_ops = ("REDUCE_MAX",)
    kernel = "pockmcu_reduce_max_s8"


@register
class ReduceMin(_Extremum):
    kind = "REDUCE_MIN"
    tflite_ops = ("REDUCE_MIN",)
    kernel = "pockmcu_reduce_min_s8"


# -- gradients ----------------------------------------------------------------------------------------

@register
class ReduceBroadcastGrad(OpDef):
    """The backward of MEAN (any axes but the spatial ones) and SUM: the output gradient, divided by
    the count for MEAN, to every input it summed. inputs: [output gradient]."""

    kind = "REDUCE_BROADCAST_GRAD"
    Options = ReduceGradOptions
    kernel = "pockmcu_reduce_broadcast_grad_f32"
    io_dtypes = ("float32",)

    @staticmethod
    def divisor(op: Op) -> int:
        f = op.options.layer
        return f.prepared.count if f.kind == "MEAN" else 1

    def reference(self, g: Graph, op: Op, xs, rt=None):
        f = op.options.layer
        dx = reduce_broadcast_grad(xs[0], f.prepared.groups, self.divisor(op))
        return [dx.astype(np.float64).reshape((-1,) + tuple(g.t(f.inputs[0]).shape[1:]))]

    def emit(self, g: Graph, op: Op, cg) -> Emission:
        return Emission(calls=(Call(cg.kernel(op).function, (
            Local("shape", owner=op.options.layer.name, address=False), Ptr(op.inputs[0]), self.divisor(op),
            Ptr(op.outputs[0]))),))


@register
class ReduceExtremumGrad(OpDef):
    """The backward of REDUCE_MAX / REDUCE_MIN: inputs [saved int8 input, int8 output, output gradient]."""

    kind = "REDUCE_EXTREMUM_GRAD"
    Options = ReduceGradOptions
    kernel = "pockmcu_reduce_extremum_grad_f32"
    io_dtypes = ("int8", "float32")

    def reference(self, g: Graph, op: Op, xs, rt=None):
        f = op.options.layer
        dx = reduce_extremum_grad(xs[0], xs[1], xs[2], f.prepared.groups)
        return [dx.astype(np.float64).reshape((-1,) + tuple(g.t(f.inputs[0]).shape[1:]))]

    def emit(self, g: Graph, op: Op, cg) -> Emission:
        return Emission(calls=(Call(cg.kernel(op).function, (
            Local("shape", owner=op.options.layer.name, address=False), Ptr(op.inputs[0]), Ptr(op.inputs[1]),
            Ptr(op.inputs[2]), Ptr(op.outputs[0]))),))


@register
class MeanGrad(OpDef):
    """d mean / d x = 1 / (H W) for every position (real domain)."""

    kind = "MEAN_GRAD"
    Options = MeanGradOptions
    kernel = "pockmcu_mean_grad_f32"
    io_dtypes = ("float32",)

    def reference(self, g: Graph, op: Op, xs, rt=None):
        f = op.options.layer
        shape = (xs[0].shape[0],) + g.t(f.inputs[0]).shape[1:]
        dy = xs[0].reshape(shape[0], 1, 1, shape[3]).astype(np.float64)
        return [np.broadcast_to(dy / (shape[1] * shape[2]), shape).copy()]

    def emit(self, g: Graph, op: Op, cg) -> Emission:
        return Emission(calls=(Call(cg.kernel(op).function, (
            Local("input_dims", owner=op.options.layer.name), Ptr(op.inputs[0]), Ptr(op.outputs[0]))),))


@register
class Conv1x1GradFromMean(OpDef):
    """The backward of a 1x1 CONV_2D whose output only feeds a spatial mean (MEAN, or an average
    pool whose one window is the whole input), fused so that the mean's broadcast gradient
    (N x H x W x C_out floats; 80 KB for MobileNetV2's last conv at 4x4x1280) never exists: the
    kernel forms (mask ? g / (H W) : 0) where the bias update and the input gradient read it, with
    the float operations of the unfused MEAN_GRAD, MASK_APPLY, BIAS_UPDATE and CONV_2D_GRAD_INPUT
    in their order (bit-identical). Emitted by the conv's gradient rule (conv.param_backward).

    inputs: [the mean's output gradient, the conv's output mask]; outputs: [input gradient] or none;
    options: FusedMeanGradOptions."""

    kind = "CONV_1X1_GRAD_FROM_MEAN"
    Options = FusedMeanGradOptions
    kernel = "pockmcu_conv_1x1_grad_from_mean_bounded_f32"   # the bias saturating as BIAS_UPDATE's (issue 15)
    io_dtypes = ("float32", "uint8")

    def macs(self, g: Graph, op: Op) -> int:
        """The input gradient's MACs (the fused 1x1 conv's forward MACs), when it is formed."""
        f = op.options.layer
        return opdef(f.kind).macs(g, f) if op.outputs else 0

    def reference(self, g: Graph, op: Op, xs, rt=None):
        """The unfused ops' references in their order: broadcast / (H W), mask, bias update, input
        gradient (this op's options carry what they read: layer, bias, coef)."""
        gm, mask = xs
        shape = g.t(op.options.layer.outputs[0]).shape
        dy = np.broadcast_to(gm.reshape(gm.shape[0], 1, 1, shape[-1]).astype(np.float64) / (shape[1] * shape[2]),
                             (gm.shape[0],) + tuple(shape[1:]))
        (dz,) = opdef("MASK_APPLY").reference(g, op, [dy, mask])
        if op.options.bias is not None:
            opdef("BIAS_UPDATE").reference(g, op, [dz], rt)
        return opdef("CONV_2D_GRAD_INPUT").reference(g, op, [dz]) if op.outputs else []

    def emit(self, g: Graph, op: Op, cg) -> Emission:
        f, bias = op.options.layer, op.options.bias
        decls = [Array("filter_scale", "float", tuple(float(s) for s in weight_scales(g, f)))]
        if bias:
            decls.append(Array("coef", "float", tuple(float(F32(c)) for c in np.asarray(op.options.coef).reshape(-1))))
            opt = cg.optimizer_args(bias)
        else:
            opt = dict(accum="NULL", velocity="NULL", rng="NULL")
        return Emission(decls=tuple(decls), calls=(Call(cg.kernel(op).function, (
            Local("output_dims", owner=f.name), Ptr(op.inputs[0]), Ptr(op.inputs[1]), Local("filter_dims", owner=f.name),
            Ptr(operand(f, "weights")), Local("filter_scale", address=False), Ptr(bias) if bias else "NULL",
            Local("coef", address=False) if bias else "NULL", opt["accum"], opt["velocity"], "&train.optimizer",
            opt["rng"], Ptr(op.outputs[0]) if op.outputs else "NULL", bias_limit(g, bias) if bias else 0), status=True),))
