"""LOG_SOFTMAX, int8 in, int8 out (scale 16/256, zero point 127), over the last axis.

Semantics: TFLite Micro's log_softmax.cc (CalculateOpData) and
reference_ops::LogSoftmaxQuantized<int8_t> (micro/kernels/internal/reference/log_softmax.h),
built on gemmlowp fixed point: per row, x - max is rescaled into Q5.26 by beta * s_in (beta 1),
the exps are summed in Q12.19, log(sum) is gemmlowp's log_x_for_x_greater_than_or_equal_to_1
(Q5.26 out), and each output is (diff - log_sum) rounded to Q4.27's top bits + 127, clamped.
Entries below a row-dependent threshold (diff_min, or where the result would fall off Q5.26)
give -128. Its kernel is kernels_c/pockmcu_log_softmax_s8.c. At the end of a classifier
``--loss xent`` reads the logits before it (pockmcu/training/builder.py); inside the network its
gradient is dx = dy - exp(y) * sum(dy) per row (LOG_SOFTMAX_GRAD), exp(y) of the 256 possible
int8 outputs tabulated at compile time (no expf at run time: host and device agree to the bit).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import fixedpoint as fp
from ..ccode import Array, Call, Emission, Local, Ptr
from ..intmath import wrap32
from ..ir import Graph, Op
from .activations import _SavedOutputGrad, dequantized_f32, saved_output_backward
from .base import OpDef, register

F32 = np.float32

OUTPUT_SCALE = 16.0 / 256
OUTPUT_ZERO_POINT = 127
_INPUT_BITS, _ACCUM_BITS, _OUTPUT_BITS = 5, 12, 4


@dataclass(frozen=True)
class LogSoftmaxParams:
    """The compile-time constants (TFLM's LogSoftmaxOpData for int8)."""

    input_multiplier: int            # beta * s_in * 2^26 as a Q31 multiplier ...
    input_left_shift: int            # ... and its left shift
    reverse_scaling_divisor: int     # the inverse of that scaling (QuantizeMultiplierSmallerThanOneExp) ...
    reverse_scaling_left_shift: int  # ... and its shift (<= 0)
    diff_min: int                    # x - max below this gives -128


def log_softmax_params(s_in: float) -> LogSoftmaxParams:
    """PreprocessLogSoftmaxScalingExp(beta 1, s_in, 5 integer bits) and -CalculateInputRadius."""
    mult, left_shift, _ = fp.softmax_params(s_in, 1.0)
    rev = float(1 << (31 - left_shift)) / float(mult)
    rev_mult, rev_shift = fp.quantize_multiplier_smaller_than_one_exp(rev)
    diff_min = -fp.calculate_input_radius(_INPUT_BITS, left_shift, 31)
    return LogSoftmaxParams(mult, left_shift, rev_mult, rev_shift, diff_min)


def _sat_add(a, b):
    return np.clip(np.asarray(a, np.int64) + b, fp.INT32_MIN, fp.INT32_MAX)


def _clz32(x) -> np.ndarray:
    x = np.asarray(x, np.int64) & 0xFFFFFFFF
    n = np.zeros(x.shape, np.int64)
    for k in range(32):
        n += (x >= (np.int64(1) << k))
    return 32 - n


def _pot(x, exponent):
    """SaturatingRoundingMultiplyByPOTParam with exponent >= 0 (array) or a rounding right shift."""
    x = np.asarray(x, np.int64)
    exponent = np.broadcast_to(np.asarray(exponent, np.int64), x.shape)
    out = np.empty(x.shape, np.int64)
    for e in np.unique(exponent):
        sel = exponent == e
        out[sel] = fp.saturating_rounding_multiply_by_pot(x[sel], int(e))
    return out


def log_x_ge_1(x, input_bits: int, output_bits: int) -> np.ndarray:
    """gemmlowp / TFLM log_x_for_x_greater_than_or_equal_to_1<output_bits>(FixedPoint<input_bits> x), raw."""
    srdhm = fp.saturating_rounding_doubling_high_mul
    accum_bits = output_bits + 1
    log_2, sqrt_sqrt_half, sqrt_half, one_quarter = 1488522236, 1805811301, 1518500250, 536870912
    alpha_n, alpha_d, alpha_i, alpha_f = 117049297, 127690142, 1057819769, 638450708
    shifted_quarter = fp.rounding_divide_by_pot(one_quarter, accum_bits)
    z_a = np.asarray(x, np.int64)
    z_a_headroom_plus_1 = _clz32(z_a)
    r_a_tmp = _pot(z_a, z_a_headroom_plus_1 - 1)
    r_a_raw = _pot(srdhm(r_a_tmp, sqrt_half), 1)
    z_a_pow_2_adj = _sat_add(_pot(input_bits - z_a_headroom_plus_1, 31 - accum_bits), shifted_quarter)
    z_b = srdhm(z_a, sqrt_half)
    z_b_headroom = _clz32(z_b) - 1
    r_b_raw = _pot(z_a, z_b_headroom)
    z_b_pow_2_adj = _sat_add(_pot(input_bits - z_b_headroom, 31 - accum_bits), -shifted_quarter)
    r = np.minimum(r_a_raw, r_b_raw)
    z_pow_2_adj = np.maximum(z_a_pow_2_adj, z_b_pow_2_adj)
    s = r + sqrt_sqrt_half                                  # RoundingHalfSum
    p = np.trunc((s + np.where(s >= 0, 1, -1)) / 2).astype(np.int64)
    q = wrap32(r - sqrt_sqrt_half)
    q = wrap32(q + q)
    common_sq = srdhm(q, q)
    num = wrap32(srdhm(q, r) + srdhm(srdhm(q, common_sq), alpha_n))
    denom_minus_one_0 = wrap32(srdhm(p, wrap32(wrap32(alpha_i + q) + srdhm(alpha_d, common_sq))) + srdhm(alpha_f, q))
    recip_denom = fp.one_over_one_plus_x_for_x_in_0_1(denom_minus_one_0)
    num_scaled = fp.rounding_divide_by_pot(num, accum_bits)
    total = wrap32(srdhm(z_pow_2_adj, log_2) + srdhm(num_scaled, recip_denom))
    return np.asarray(fp.saturating_rounding_multiply_by_pot(total, accum_bits - output_bits), np.int64)


def log_softmax_s8(x: np.ndarray, p: LogSoftmaxParams) -> np.ndarray:
    """reference_ops::LogSoftmaxQuantized<int8_t> over the last axis."""
    x = np.asarray(x)
    rows = x.reshape(-1, x.shape[-1]).astype(np.int64)
    diff = rows - rows.max(axis=1, keepdims=True)
    scaled = np.asarray(fp.multiply_by_quantized_multiplier(diff, p.input_multiplier, p.input_left_shift), np.int64)
    e = fp.rounding_divide_by_pot(fp.exp_on_negative_values(scaled, _INPUT_BITS), _ACCUM_BITS)
    sums = np.zeros(len(rows), np.int64)
    for c in range(rows.shape[1]):                          # int32 additions in order (cannot wrap: < 2^12 terms)
        sums = wrap32(sums + np.where(diff[:, c] >= p.diff_min, e[:, c], 0))
    log_sum = log_x_ge_1(sums, _ACCUM_BITS, _INPUT_BITS)[:, None]
    shifted = wrap32(log_sum + fp.INT32_MIN)
    adjusted = np.maximum(p.diff_min - 1, np.asarray(fp.multiply_by_quantized_multiplier(
        shifted, p.reverse_scaling_divisor, p.reverse_scaling_left_shift), np.int64))
    out = fp.rounding_divide_by_pot(wrap32(scaled - log_sum), 31 - _INPUT_BITS - _OUTPUT_BITS) + 127
    out = np.where(diff > adjusted, np.clip(out, -128, 127), -128)
    return out.astype(np.int8).reshape(x.shape)


@register
class LogSoftmax(OpDef):
    kind = "LOG_SOFTMAX"
    tflite_ops = ("LOG_SOFTMAX",)
    kernel = "pockmcu_log_softmax_s8"

    def check(self, g: Graph, op: Op) -> list[str]:
        problems = super().check(g, op)
        if problems:
            return problems
        x, y = g.t(op.inputs[0]), g.t(op.outputs[0])
        if x.shape != y.shape:
            return [f"input {list(x.shape)} and output {list(y.shape)} differ"]
        if x.quant.per_channel:
            return ["per-channel activation quantization"]
        if np.float32(y.quant.s) != np.float32(OUTPUT_SCALE) or y.quant.zp != OUTPUT_ZERO_POINT:
            return [f"output '{y.name}' must have scale 16/256 and zero point 127, as TFLite Micro requires "
                    f"(has {y.quant.s}, {y.quant.zp})"]
        return []

    def prepare(self, g: Graph, op: Op) -> LogSoftmaxParams:
        return log_softmax_params(g.t(op.inputs[0]).quant.s)

    def reference(self, g: Graph, op: Op, xs, rt=None):
        return [log_softmax_s8(xs[0], op.prepared)]

    def backward(self, tb, op: Op) -> None:
        saved_output_backward(tb, op, "LOG_SOFTMAX_GRAD")

    def emit(self, g: Graph, op: Op, cg) -> Emission:
        x, p = g.t(op.inputs[0]), op.prepared
        return Emission(calls=(Call(cg.kernel(op).function, (
            Ptr(x.name), x.size // x.shape[-1], x.shape[-1], p.input_multiplier, p.input_left_shift,
            p.reverse_scaling_divisor, p.reverse_scaling_left_shift, p.diff_min, Ptr(op.outputs[0]))),))


def exp_table(s: float, zp: int) -> np.ndarray:
    """exp of the real value of every int8 output q (index q + 128), float32."""
    return np.exp(dequantized_f32(np.arange(-128, 128), s, zp)).astype(F32)


def log_softmax_grad(yq, dy, s: float, zp: int) -> np.ndarray:
    """Per row: total = sum over k in order of dy[k] (float32); dx[k] = dy[k] - exp(y[k]) * total
    (PyTorch's log_softmax backward; the C kernel's order)."""
    table = exp_table(s, zp)
    yq = np.asarray(yq)
    d = np.asarray(dy).astype(F32).reshape(yq.shape)
    e = table[yq.astype(np.int64) + 128].reshape(-1, yq.shape[-1])
    rows = d.reshape(-1, yq.shape[-1])
    total = np.zeros(rows.shape[0], F32)
    with np.errstate(over="ignore", invalid="ignore"):
        for k in range(rows.shape[1]):
            total = (total + rows[:, k]).astype(F32)
        return (rows - e * total[:, None]).astype(F32).reshape(yq.shape)


@register
class LogSoftmaxGrad(_SavedOutputGrad):
    """Backward of a LOG_SOFTMAX inside the network: dx = dy - exp(y) * sum(dy) per row."""

    kind = "LOG_SOFTMAX_GRAD"
    kernel = "pockmcu_log_softmax_grad_f32"
    may_share_input = (1,)    # a row's sum is formed before any of its elements is written

    def reference(self, g: Graph, op: Op, xs, rt=None):
        y = g.t(op.inputs[0])
        return [log_softmax_grad(xs[0], xs[1], y.quant.s, y.quant.zp).astype(np.float64)]

    def emit(self, g: Graph, op: Op, cg) -> Emission:
        y = g.t(op.inputs[0])
        depth = y.shape[-1]
        table = Array("exp_table", "uint32_t", tuple(f"0x{int(b):08x}u" for b in
                                                      exp_table(y.quant.s, y.quant.zp).view(np.uint32)),
                      comment="exp of the real value of output q, at q + 128 (float32 bits)")
        return Emission(decls=(table,), calls=(Call(cg.kernel(op).function, (
            Ptr(y.name), y.size // depth, depth, Local("exp_table", address=False),
            Ptr(op.inputs[1]), Ptr(op.outputs[0]))),))
