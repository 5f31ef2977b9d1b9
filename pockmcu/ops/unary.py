"""Standalone int8 activations: LEAKY_RELU, PRELU (alpha a constant, broadcast against the input),
TANH, RELU, RELU6, RELU_N1_TO_1, and their input gradients.

Semantics, as TFLite Micro computes them (activations.cc, leaky_relu*.cc, prelu*.cc, tanh.cc):
- RELU: ``zp_out + MultiplyByQuantizedMultiplier(x - zp_in, QuantizeMultiplier(float32(s_in / s_out)))``
  clamped to [max(-128, zp_out + roundf(0 / s_out)), 127] (ReluQuantized); pockmcu_requantize_s8 computes
  exactly that. RELU_N1_TO_1 has no TFLite Micro kernel (TFLM refuses the op); pockmcu gives it TFLite's
  (QuantizedReluX with the range [-1, 1]: the same formula, bounds zp_out + roundf(+-1 / s_out)).
- RELU6: a clamp of the stored values to [zp_in, FloatToQuantizedType(6, s_in, zp_in)], no
  requantization (Relu6Quantized; the output's quantization is not read); pockmcu_clamp_s8.
- LEAKY_RELU: identity and alpha multipliers from float32 ratios (``s_in * alpha / s_out``), a negative
  alpha applied as a sign after the rescale (QuantizeLeakyRelu); pockmcu_leaky_relu_s8.
- PRELU: multipliers s_in / s_out and s_in s_alpha / s_out in double, ``(x - zp) (alpha - zp_alpha)`` rescaled
  for negative x (BroadcastPrelu4DSlow); pockmcu_prelu_s8.
- TANH: reference_integer_ops::Tanh: x - zp_in rescaled into Q4.27 (LOGISTIC's Prepare), gemmlowp's
  fixed-point tanh, a rounding shift by 24 to the output (scale 1/128, zero point 0); saturated beyond
  the input radius. The int8 -> int8 function is a 256-entry table made at compile time from this
  numpy code, run by pockmcu_lut_s8 (TFLite's own optimized int8 tanh is a table too).

Gradients, float32 w.r.t. real values (PyTorch's rules): RELU / RELU6 / RELU_N1_TO_1 pass dy where the
real input lies strictly inside the range (relu / hardtanh backward; pockmcu_clamp_grad_f32 with the
int8 bounds found at compile time), LEAKY_RELU / PRELU pass dy for a positive input and alpha * dy
otherwise (alpha not trained), TANH gives dy (1 - y^2) from the saved int8 output y (tanh_backward). As
for HARD_SWISH, the int8 output's own clamp is not masked.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .. import fixedpoint as fp
from ..ccode import Array, Call, Emission, Local, Ptr
from ..ir import Graph, Op
from .base import POINTWISE, OpDef, Window, register
from .binary import broadcast_problems, dims15
from .conv import LayerGrad

F32 = np.float32
ALL_INT8 = np.arange(-128, 128, dtype=np.int64)


def _round_f32_away(v) -> int:
    """roundf / std::round of a float32 value: half away from zero."""
    v = float(v)
    return int(math.copysign(math.floor(abs(v) + 0.5), v))


def _tflm_range_bound(bound: float, s_out: float, zp_out: int) -> int:
    """zp + static_cast<int32_t>(roundf(bound / scale)), the division in float32."""
    return int(zp_out) + _round_f32_away(F32(bound) / F32(s_out))


def _unary_problems(g: Graph, op: Op) -> list[str]:
    x, y = g.t(op.inputs[0]), g.t(op.outputs[0])
    if x.size != y.size:
        return [f"input {list(x.shape)} and output {list(y.shape)} differ in size"]
    if x.quant.per_channel or y.quant.per_channel:
        return ["per-channel activation quantization"]
    return []


def _clamp_bounds(s: float, zp: int, lo: float, hi: float) -> tuple[int, int]:
    """The int8 values q whose real value float32(s) * float32(q - zp) lies strictly inside (lo, hi)
    (monotone, so an interval; (1, 0) when none)."""
    real = F32(s) * (ALL_INT8 - zp).astype(F32)
    inside = ALL_INT8[(real > F32(lo)) & (real < F32(hi))]
    return (int(inside[0]), int(inside[-1])) if inside.size else (1, 0)


def _elementwise_backward(tb, op: Op, kind: str, saved: str, extra=()) -> None:
    x = op.inputs[0]
    if not tb.needs_grad(x):
        return
    dx = tb.grad_tensor(x, f"{tb.short(x)}_grad_from_{op.name}")
    tb.emit(kind, f"{op.name}_grad", [saved, tb.grad(op.outputs[0]), *extra], [dx], layer=op)
    tb.add_grad(x, dx)


# -- RELU, RELU_N1_TO_1, RELU6 --------------------------------------------------------------------------

@dataclass(frozen=True)
class ReluData:
    """TFLM's ReluOpData for int8 (CalculateReluOpData)."""

    multiplier: int
    shift: int
    act_min: int
    act_max: int


def relu_params(s_in: float, zp_in: int, s_out: float, zp_out: int, lo: float, hi: float | None) -> ReluData:
    m, sh = fp.quantize_multiplier(float(F32(s_in) / F32(s_out)))
    act_min = max(-128, _tflm_range_bound(lo, s_out, zp_out))
    act_max = 127 if hi is None else min(127, _tflm_range_bound(hi, s_out, zp_out))
    return ReluData(m, sh, act_min, act_max)


def relu_s8(x, zp_in: int, zp_out: int, p: ReluData) -> np.ndarray:
    """TFLM ReluQuantized<int8_t>."""
    v = fp.multiply_by_quantized_multiplier(fp.i64(x) - zp_in, p.multiplier, p.shift) + zp_out
    return np.clip(np.clip(v, p.act_min, None), None, p.act_max).astype(np.int8)


class _ReluX(OpDef):
    tflite_ops: tuple = ()
    kernel = "pockmcu_requantize_s8"
    may_share_input = (0,)
    lo = 0.0
    hi: float | None = None

    def check(self, g: Graph, op: Op) -> list[str]:
        problems = super().check(g, op) or _unary_problems(g, op)
        if problems:
            return problems
        x, y = g.t(op.inputs[0]), g.t(op.outputs[0])
        if abs(float(F32(x.quant.s) / F32(y.quant.s))) >= 2.0 ** 30 or max(abs(self.lo), abs(self.hi or 0)) \
                / y.quant.s >= 2.0 ** 30:
            return [f"scales {x.quant.s:.6g} -> {y.quant.s:.6g} overflow TFLite Micro's int32 arithmetic"]
        return []

    def prepare(self, g: Graph, op: Op) -> ReluData:
        x, y = g.t(op.inputs[0]), g.t(op.outputs[0])
        return relu_params(x.quant.s, x.quant.zp, y.quant.s, y.quant.zp, self.lo, self.hi)

    def reference(self, g: Graph, op: Op, xs, rt=None):
        x, y = g.t(op.inputs[0]), g.t(op.outputs[0])
        return [relu_s8(xs[0], x.quant.zp, y.quant.zp, op.prepared).reshape((len(xs[0]),) + tuple(y.shape[1:]))]

    def window(self, g: Graph, op: Op) -> Window:
        return POINTWISE

    def backward(self, tb, op: Op) -> None:
        _elementwise_backward(tb, op, "CLAMP_GRAD", op.inputs[0])

    def emit(self, g: Graph, op: Op, cg) -> Emission:
        x, y, p = g.t(op.inputs[0]), g.t(op.outputs[0]), op.prepared
        return Emission(calls=(Call(cg.kernel(op).function, (
            Ptr(x.name), x.size, -x.quant.zp, p.multiplier, p.shift, y.quant.zp, p.act_min, p.act_max, Ptr(y.name)),
            status=True),))


@register
class Relu(_ReluX):
    kind = "RELU"
    tflite_ops = ("RELU",)


@register
class ReluN1To1(_ReluX):
    kind = "RELU_N1_TO_1"
    tflite_ops = ("RELU_N1_TO_1",)
    lo, hi = -1.0, 1.0


@dataclass(frozen=True)
class Relu6Data:
    """TFLM's Relu6OpData for int8: the clamp bounds in the input's stored values."""

    zero: int
    six: int


def relu6_params(s_in: float, zp_in: int) -> Relu6Data:
    """Relu6Prepare: zero = zp_in, six = FloatToQuantizedType<int8_t>(6.0f, s_in, zp_in)."""
    six = min(max(_round_f32_away(F32(6.0) / F32(s_in)) + int(zp_in), -128), 127)
    return Relu6Data(int(zp_in), six)


@register
class Relu6(OpDef):
    kind = "RELU6"
    tflite_ops = ("RELU6",)
    kernel = "pockmcu_clamp_s8"
    may_share_input = (0,)

    def check(self, g: Graph, op: Op) -> list[str]:
        problems = super().check(g, op) or _unary_problems(g, op)
        if not problems and 6.0 / g.t(op.inputs[0]).quant.s >= 2.0 ** 30:
            problems.append("input scale below 6 / 2^30: TFLite Micro's quantized 6 overflows")
        return problems

    def prepare(self, g: Graph, op: Op) -> Relu6Data:
        x = g.t(op.inputs[0])
        return relu6_params(x.quant.s, x.quant.zp)

    def reference(self, g: Graph, op: Op, xs, rt=None):
        p, y = op.prepared, g.t(op.outputs[0])
        v = np.asarray(xs[0])
        return [np.clip(v, p.zero, p.six).astype(np.int8).reshape((len(v),) + tuple(y.shape[1:]))]

    def window(self, g: Graph, op: Op) -> Window:
        return POINTWISE

    def backward(self, tb, op: Op) -> None:
        _elementwise_backward(tb, op, "CLAMP_GRAD", op.inputs[0])

    def emit(self, g: Graph, op: Op, cg) -> Emission:
        x, p = g.t(op.inputs[0]), op.prepared
        return Emission(calls=(Call(cg.kernel(op).function, (
            Ptr(x.name), x.size, p.zero, p.six, Ptr(op.outputs[0])), status=True),))


#: the real range whose inside passes the gradient (PyTorch's relu / hardtanh backward)
CLAMP_RANGES = {"RELU": (0.0, float("inf")), "RELU6": (0.0, 6.0), "RELU_N1_TO_1": (-1.0, 1.0)}


@register
class ClampGrad(OpDef):
    """Backward of RELU / RELU6 / RELU_N1_TO_1: inputs the saved int8 input and the output gradient."""

    kind = "CLAMP_GRAD"
    Options = LayerGrad
    kernel = "pockmcu_clamp_grad_f32"
    io_dtypes = ("int8", "float32")
    may_share_input = (1,)  # reads grad_output[k] before it writes grad_input[k]

    def prepare(self, g: Graph, op: Op) -> tuple[int, int]:
        x = g.t(op.inputs[0])
        return _clamp_bounds(x.quant.s, x.quant.zp, *CLAMP_RANGES[op.options.layer.kind])

    def reference(self, g: Graph, op: Op, xs, rt=None):
        lo, hi = op.prepared
        q, dy = np.asarray(xs[0]), np.asarray(xs[1]).astype(F32)
        return [np.where((q >= lo) & (q <= hi), dy, F32(0)).astype(np.float64)]

    def emit(self, g: Graph, op: Op, cg) -> Emission:
        x = g.t(op.inputs[0])
        lo, hi = op.prepared
        return Emission(calls=(Call(cg.kernel(op).function, (
            Ptr(x.name), x.size, lo, hi, Ptr(op.inputs[1]), Ptr(op.outputs[0]))),))


# -- LEAKY_RELU -----------------------------------------------------------------------------------------

@dataclass(frozen=True)
class LeakyReluOptions:
    alpha: float = 0.2                # TFLite's LeakyReluOptions.alpha (float32)


@dataclass(frozen=True)
class LeakyReluData:
    """TFLM's LeakyReluOpData (CalculateOpDataLeakyRelu for int8)."""

    mult_identity: int
    shift_identity: int
    mult_alpha: int                   # negative for a negative alpha
    shift_alpha: int


def leaky_relu_params(s_in: float, s_out: float, alpha: float) -> LeakyReluData:
    """The ratios in float32 (``input scale * alpha / output scale`` left to right), then QuantizeMultiplier."""
    with np.errstate(over="ignore"):
        ma, sa = fp.quantize_multiplier(float(F32(s_in) * F32(alpha) / F32(s_out)))
        mi, si = fp.quantize_multiplier(float(F32(s_in) / F32(s_out)))
    return LeakyReluData(mi, si, ma, sa)


def leaky_relu_s8(x, zp_in: int, zp_out: int, p: LeakyReluData) -> np.ndarray:
    """TFLM QuantizeLeakyRelu<int8_t>."""
    v = fp.i64(x) - zp_in
    ident = fp.multiply_by_quantized_multiplier(v, p.mult_identity, p.shift_identity)
    scaled = fp.multiply_by_quantized_multiplier(v, abs(p.mult_alpha), p.shift_alpha)
    neg = np.where(p.mult_alpha < 0, -scaled, scaled)
    return np.clip(zp_out + np.where(v >= 0, ident, neg), -128, 127).astype(np.int8)


@register
class LeakyRelu(OpDef):
    kind = "LEAKY_RELU"
    tflite_ops = ("LEAKY_RELU",)
    tflite_options = "LeakyReluOptions"
    Options = LeakyReluOptions
    kernel = "pockmcu_leaky_relu_s8"
    may_share_input = (0,)

    def parse_tflite(self, o, op: Op, tensors) -> LeakyReluOptions:
        return LeakyReluOptions(alpha=float(F32(o.Alpha())) if o is not None else 0.0)

    def check(self, g: Graph, op: Op) -> list[str]:
        problems = super().check(g, op) or _unary_problems(g, op)
        if problems:
            return problems
        x, y = g.t(op.inputs[0]), g.t(op.outputs[0])
        if not np.isfinite(op.options.alpha):
            return [f"alpha {op.options.alpha}"]
        p = leaky_relu_params(x.quant.s, y.quant.s, op.options.alpha)
        if max(p.shift_identity, p.shift_alpha) > 30 or p.mult_alpha == -(1 << 31):
            return [f"alpha {op.options.alpha} with scales {x.quant.s:.6g} -> {y.quant.s:.6g} overflows TFLite "
                    "Micro's int32 arithmetic"]
        return []

    def prepare(self, g: Graph, op: Op) -> LeakyReluData:
        return leaky_relu_params(g.t(op.inputs[0]).quant.s, g.t(op.outputs[0]).quant.s, op.options.alpha)

    def reference(self, g: Graph, op: Op, xs, rt=None):
        x, y = g.t(op.inputs[0]), g.t(op.outputs[0])
        out = leaky_relu_s8(xs[0], x.quant.zp, y.quant.zp, op.prepared)
        return [out.reshape((len(xs[0]),) + tuple(y.shape[1:]))]

    def window(self, g: Graph, op: Op) -> Window:
        return POINTWISE

    def backward(self, tb, op: Op) -> None:
        _elementwise_backward(tb, op, "LEAKY_RELU_GRAD", op.inputs[0])

    def emit(self, g: Graph, op: Op, cg) -> Emission:
        x, y, p = g.t(op.inputs[0]), g.t(op.outputs[0]), op.prepared
        return Emission(calls=(Call(cg.kernel(op).function, (
            Ptr(x.name), x.size, x.quant.zp, p.mult_identity, p.shift_identity, p.mult_alpha, p.shift_alpha,
            y.quant.zp, Ptr(y.name)), status=True),))


def leaky_relu_grad(q, dy, zp: int, alpha: float) -> np.ndarray:
    dy = np.asarray(dy).astype(F32)
    with np.errstate(over="ignore", invalid="ignore"):
        return np.where(np.asarray(q).astype(np.int32) > zp, dy, dy * F32(alpha)).astype(F32)


@register
class LeakyReluGrad(OpDef):
    kind = "LEAKY_RELU_GRAD"
    Options = LayerGrad
    kernel = "pockmcu_leaky_relu_grad_f32"
    io_dtypes = ("int8", "float32")
    may_share_input = (1,)

    def reference(self, g: Graph, op: Op, xs, rt=None):
        x = g.t(op.inputs[0])
        return [leaky_relu_grad(xs[0], xs[1], x.quant.zp, op.options.layer.options.alpha).astype(np.float64)]

    def emit(self, g: Graph, op: Op, cg) -> Emission:
        x = g.t(op.inputs[0])
        return Emission(calls=(Call(cg.kernel(op).function, (
            Ptr(x.name), x.size, x.quant.zp, float(op.options.layer.options.alpha), Ptr(op.inputs[1]),
            Ptr(op.outputs[0]))),))


# -- PRELU ----------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class PreluData:
    """TFLM's PreluParams for int8 (CalculatePreluParams) and the kernel's dims array."""

    input_offset: int
    alpha_offset: int
    output_offset: int
    mult_1: int
    shift_1: int
    mult_2: int
    shift_2: int
    dims: tuple


def prelu_s8(x, alpha, p: PreluData) -> np.ndarray:
    """reference_ops::BroadcastPrelu4DSlow<int8_t> (numpy broadcasting of x and alpha)."""
    x, a = np.broadcast_arrays(fp.i64(x) + p.input_offset, fp.i64(alpha) + p.alpha_offset)
    pos = fp.multiply_by_quantized_multiplier(x, p.mult_1, p.shift_1)
    neg = fp.multiply_by_quantized_multiplier(x * a, p.mult_2, p.shift_2)
    return np.clip(np.where(x >= 0, pos, neg) + p.output_offset, -128, 127).astype(np.int8)


@register
class Prelu(OpDef):
    kind = "PRELU"
    tflite_ops = ("PRELU",)
    operands = ("input", "alpha")
    kernel = "pockmcu_prelu_s8"
    may_share_input = (0,)

    def check(self, g: Graph, op: Op) -> list[str]:
        problems = super().check(g, op)
        if problems:
            return problems
        x, a, y = g.t(op.inputs[0]), g.t(op.inputs[1]), g.t(op.outputs[0])
        if not a.is_const:
            return [f"alpha '{a.name}' is not a constant"]
        problems = broadcast_problems(g, op, 4)
        if problems:
            return problems
        if x.shape != y.shape:
            return [f"input {list(x.shape)} is broadcast to the output {list(y.shape)}"]
        if x.quant.per_channel or y.quant.per_channel:
            return ["per-channel activation quantization"]
        p = self.prepare(g, op)
        if max(p.shift_1, p.shift_2) > 30:
            return [f"scales {x.quant.s:.6g} -> {y.quant.s:.6g} overflow TFLite Micro's int32 arithmetic"]
        return []

    def prepare(self, g: Graph, op: Op) -> PreluData:
        x, a, y = g.t(op.inputs[0]), g.t(op.inputs[1]), g.t(op.outputs[0])
        m1, s1 = fp.quantize_multiplier(float(x.quant.s) / float(y.quant.s))
        m2, s2 = fp.quantize_multiplier(float(x.quant.s) * float(a.quant.s) / float(y.quant.s))
        return PreluData(-x.quant.zp, -a.quant.zp, y.quant.zp, m1, s1, m2, s2, dims15(y.shape, x.shape, a.shape))

    def reference(self, g: Graph, op: Op, xs, rt=None):
        a, y = g.t(op.inputs[1]), g.t(op.outputs[0])
        alpha = np.asarray(a.data).reshape((1,) * (len(y.shape) - len(a.shape)) + tuple(a.shape))
        v = np.asarray(xs[0]).reshape((len(xs[0]),) + tuple(y.shape[1:]))
        return [prelu_s8(v, alpha, op.prepared)]

    def backward(self, tb, op: Op) -> None:
        _elementwise_backward(tb, op, "PRELU_GRAD", op.inputs[0], extra=(op.inputs[1],))

    def emit(self, g: Graph, op: Op, cg) -> Emission:
        p = op.prepared
        return Emission(decls=(Array("dims", "int32_t", p.dims, comment="output shape, input strides, alpha strides"),),
                        calls=(Call(cg.kernel(op).function, (
                            Ptr(op.inputs[0]), Ptr(op.inputs[1]), Local("dims", address=False), p.input_offset,
                            p.alpha_offset, p.mult_1, p.shift_1, p.mult_2, p.shift_2, p.output_offset,
                            Ptr(op.outputs[0])), status=True),))


def prelu_grad(q, dy, zp: int, alpha_real) -> np.ndarray:
    """dx = dy for a positive input, alpha * dy otherwise (alpha broadcast to dy's shape)."""
    dy = np.asarray(dy).astype(F32)
    with np.errstate(over="ignore", invalid="ignore"):
        return np.where(np.asarray(q).astype(np.int32) > zp, dy, np.asarray(alpha_real, F32) * dy).astype(F32)


@register
class PreluGrad(OpDef):
    """Backward of PRELU: inputs the saved int8 input, the output gradient and alpha (a constant)."""

    kind = "PRELU_GRAD"
    Options = LayerGrad
    kernel = "pockmcu_prelu_grad_f32"
    io_dtypes = ("int8", "float32")
    may_share_input = (1,)

    def reference(self, g: Graph, op: Op, xs, rt=None):
        x, a = g.t(op.inputs[0]), g.t(op.inputs[2])
        alpha = F32(a.quant.s) * (np.asarray(a.data).astype(np.int32) - a.quant.zp).astype(F32)
        alpha = alpha.reshape((1,) * (len(x.shape) - len(a.shape)) + tuple(a.shape))
        q = np.asarray(xs[0]).reshape(x.shape)
        return [prelu_grad(q, np.asarray(xs[1]).reshape(x.shape), x.quant.zp, alpha).astype(np.float64)]

    def emit(self, g: Graph, op: Op, cg) -> Emission:
        x, a = g.t(op.inputs[0]), g.t(op.inputs[2])
        dims = op.options.layer.prepared.dims
        return Emission(decls=(Array("dims", "int32_t", dims, comment="shape, input strides, alpha strides"),),
                        calls=(Call(cg.kernel(op).function, (
                            Ptr(x.name), Ptr(a.name), Local("dims", address=False), x.quant.zp, float(a.quant.s),
                            a.quant.zp, Ptr(op.inputs[1]), Ptr(op.outputs[0]))),))


# -- TANH -----------------------------------------------------------------------------------------------

def _one_minus_x_over_one_plus_x(a) -> np.ndarray:
    """gemmlowp one_minus_x_over_one_plus_x_for_x_in_0_1, raw Q0.31 in and out."""
    srdhm = fp.saturating_rounding_doubling_high_mul
    a = fp.i64(a)
    s = a + fp.INT32_MAX                 # RoundingHalfSum(a, One)
    half_denominator = np.where(s >= 0, (s + 1) // 2, -((-(s - 1)) // 2))
    x = fp.wrap32(1515870810 + srdhm(half_denominator, -1010580540))
    for _ in range(3):
        one_minus = fp.wrap32((1 << 29) - srdhm(half_denominator, x))
        x = fp.wrap32(x + fp.saturating_rounding_multiply_by_pot(srdhm(x, one_minus), 2))
    return fp.saturating_rounding_multiply_by_pot(fp.wrap32(x - (1 << 29)), 2)


def tanh_fixed(a) -> np.ndarray:
    """gemmlowp tanh of a FixedPoint<int32, 4> (raw), raw Q0.31 out."""
    a = fp.i64(a)
    neg = a < 0
    n = np.where(neg, a, fp.wrap32(-a))
    t = _one_minus_x_over_one_plus_x(fp.exp_on_negative_values(n, 5))   # ExactMulByPot<1>: Q5 raw n
    return np.where(a == 0, 0, np.where(neg, fp.wrap32(-t), t))


def tanh_s8(x, q: dict) -> np.ndarray:
    """reference_integer_ops::Tanh (int8), q from fixedpoint.logistic_params (TFLM's CalculateArithmeticOpData)."""
    v = fp.i64(x) - q["input_zero_point"]
    r = q["input_range_radius"]
    inside = np.clip(v, -r + 1, r - 1) if r > 0 else np.zeros_like(v)
    # from a left shift of 31 on the radius is 0 and no input reaches the multiply
    q4 = fp.multiply_by_quantized_multiplier(inside, q["input_multiplier"], min(q["input_left_shift"], 31))
    out = np.clip(fp.rounding_divide_by_pot(tanh_fixed(q4), 24), -128, 127)
    return np.where(v <= -r, -128, np.where(v >= r, 127, out)).astype(np.int8)


@dataclass(frozen=True, eq=False)
class TanhData:
    q: dict                           # fixedpoint.logistic_params (TFLM computes TANH's the same way)
    table: np.ndarray                 # int8 [256]: the output for input value k - 128


@register
class Tanh(OpDef):
    kind = "TANH"
    tflite_ops = ("TANH",)
    kernel = "pockmcu_lut_s8"
    may_share_input = (0,)

    def check(self, g: Graph, op: Op) -> list[str]:
        problems = super().check(g, op) or _unary_problems(g, op)
        if problems:
            return problems
        y = g.t(op.outputs[0])
        if abs(y.quant.s - 1 / 128) > 1e-9 or y.quant.zp != 0:
            return [f"output '{y.name}' must have scale 1/128 and zero point 0 (has {y.quant.s}, {y.quant.zp}); "
                    "TFLite Micro's int8 TANH writes that"]
        if fp.logistic_params(g.t(op.inputs[0]).quant.s, 0)["input_left_shift"] < 0:
            # CalculateInputRadius shifts by the negative exponent: undefined in C++, target-dependent
            return [f"input scale {g.t(op.inputs[0]).quant.s:.3g} is below 2^-28, where TFLite Micro's int8 TANH "
                    "is undefined; requantize the model"]
        return []

    def prepare(self, g: Graph, op: Op) -> TanhData:
        x = g.t(op.inputs[0])
        q = fp.logistic_params(x.quant.s, x.quant.zp)
        return TanhData(q, tanh_s8(ALL_INT8, q))

    def reference(self, g: Graph, op: Op, xs, rt=None):
        return [tanh_s8(xs[0], op.prepared.q)]

    def window(self, g: Graph, op: Op) -> Window:
        return POINTWISE

    def backward(self, tb, op: Op) -> None:
        _elementwise_backward(tb, op, "TANH_GRAD", op.outputs[0])

    def emit(self, g: Graph, op: Op, cg) -> Emission:
        x = g.t(op.inputs[0])
        return Emission(decls=(Array("table", "int8_t", tuple(int(v) for v in op.prepared.table),
                                     comment="tanh of input value k - 128"),),
                        calls=(Call(cg.kernel(op).function, (
                            Ptr(x.name), x.size, Local("table", address=False), Ptr(op.outputs[0])), status=True),))


def tanh_grad(yq, dy, s_out: float, zp_out: int) -> np.ndarray:
    y = F32(s_out) * (np.asarray(yq).astype(np.int32) - zp_out).astype(F32)
    with np.errstate(over="ignore", invalid="ignore"):
        return (np.asarray(dy).astype(F32) * (F32(1) - y * y)).astype(F32)


@register
class TanhGrad(OpDef):
    """Backward of TANH: inputs the saved int8 output and the output gradient."""

    kind = "TANH_GRAD"
    Options = LayerGrad
    kernel = "pockmcu_tanh_grad_f32"
    io_dtypes = ("int8", "float32")
    may_share_input = (1,)

    def reference(self, g: Graph, op: Op, xs, rt=None):
        y = g.t(op.inputs[0])
        return [tanh_grad(xs[0], xs[1], y.quant.s, y.quant.zp).astype(np.float64)]

    def emit(self, g: Graph, op: Op, cg) -> Emission:
        y = g.t(op.inputs[0])
        return Emission(calls=(Call(cg.kernel(op).function, (
            Ptr(y.name), y.size, float(y.quant.s), y.quant.zp, Ptr(op.inputs[1]), Ptr(op.outputs[0]))),))
