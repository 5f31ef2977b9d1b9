"""Exact fixed-point primitives and reference int8 kernels, bit-exact with TFLM.

Everything here mirrors TensorFlow Lite Micro's integer code paths (with the
default TFLITE_SINGLE_ROUNDING=0, i.e. gemmlowp style double rounding) and
gemmlowp's fixedpoint.h. Array functions are vectorized numpy, computed in
int64 and wrapped to int32 exactly where the C/C++ code wraps, and they
broadcast their arguments (e.g. a per-channel multiplier/shift along the last
axis).

Parameter functions take the float32 tensor scales as stored in the model and
reproduce TFLM's Prepare arithmetic, including where it computes in float32
and where in double.

onnxruntime's numerics (float32 requantization emulated with integers, its
float32 pooling and softmax) are in pockmcu.fixedpoint_ort; the small integer
helpers both use are in pockmcu.intmath.
"""

from __future__ import annotations

import math
from typing import Iterable

import numpy as np

from .intmath import as_result, i64, is_scalar, wrap32

INT32_MIN = -(1 << 31)
INT32_MAX = (1 << 31) - 1

__all__ = [
    "quantize_multiplier",
    "quantize_multiplier_smaller_than_one_exp",
    "quantize_multiplier_greater_than_one",
    "saturating_rounding_doubling_high_mul",
    "rounding_divide_by_pot",
    "saturating_rounding_multiply_by_pot",
    "multiply_by_quantized_multiplier",
    "multiply_by_quantized_multiplier_smaller_than_one_exp",
    "multiply_by_quantized_multiplier_greater_than_one",
    "exp_on_negative_values",
    "one_over_one_plus_x_for_x_in_0_1",
    "logistic_fixed",
    "get_reciprocal",
    "calculate_input_radius",
    "softmax_params",
    "logistic_params",
    "add_params",
    "mean_params",
    "mean_adjusted_multiplier",
    "activation_range",
    "conv_per_channel_multipliers",
    "fc_per_tensor_multiplier",
    "softmax_s8",
    "logistic_s8",
    "add_s8",
    "mean_s8",
    "quantize_f32_s8",
    "dequantize_s8_f32",
]


# --------------------------------------------------------------------------
# scalar helpers
# --------------------------------------------------------------------------

def _f32(x) -> float:
    """The double value of x rounded to float32 (how a TFLite scale is stored)."""
    return float(np.float32(x))


def _round_half_away(v: float) -> int:
    """std::round on a double, exactly (no floor(v + 0.5) pitfalls)."""
    if v < 0:
        return -_round_half_away(-v)
    i = math.floor(v)
    return i + 1 if v - i >= 0.5 else i


def _shl_wrap32(x, shift) -> np.ndarray:
    """int32 x * (1 << shift) with two's complement wrap, 0 <= shift <= 31."""
    x = i64(x)
    shift = i64(shift)
    if np.any(shift < 0) or np.any(shift > 31):
        raise ValueError("left shift must be in [0, 31]")
    return wrap32((x & 0xFFFFFFFF) << shift)


def _trunc_div_pow2(x, e: int) -> np.ndarray:
    """C/C++ integer division x / 2**e (truncation toward zero)."""
    x = i64(x)
    return np.where(x >= 0, x >> e, -((-x) >> e))


# --------------------------------------------------------------------------
# TFLM quantization_util.cc
# --------------------------------------------------------------------------

def quantize_multiplier(real: float) -> tuple[int, int]:
    """TFLM QuantizeMultiplier(double) -> (quantized_multiplier, shift).

    frexp, q_fixed = round_half_away(q * 2^31), the q_fixed == 2^31 fix-up,
    and shift < -31 -> (0, 0). shift > 0 means a left shift.
    """
    real = float(real)
    if real == 0.0:
        return 0, 0
    q, shift = math.frexp(real)
    q_fixed = _round_half_away(q * float(1 << 31))
    if q_fixed > (1 << 31):
        raise ValueError("QuantizeMultiplier: q_fixed out of range")
    if q_fixed == (1 << 31):
        q_fixed //= 2
        shift += 1
    if shift < -31:
        shift = 0
        q_fixed = 0
    return int(q_fixed), int(shift)


def quantize_multiplier_smaller_than_one_exp(real: float) -> tuple[int, int]:
    """TFLM QuantizeMultiplierSmallerThanOneExp: 0 < real < 1, shift <= 0."""
    real = float(real)
    if not (0.0 < real < 1.0):
        raise ValueError(f"multiplier {real!r} not in (0, 1)")
    m, s = quantize_multiplier(real)
    if s > 0:
        raise ValueError("QuantizeMultiplierSmallerThanOneExp: shift > 0")
    return m, s


def quantize_multiplier_greater_than_one(real: float) -> tuple[int, int]:
    """TFLM QuantizeMultiplierGreaterThanOne: real > 1, left shift >= 0."""
    real = float(real)
    if not real > 1.0:
        raise ValueError(f"multiplier {real!r} not > 1")
    m, s = quantize_multiplier(real)
    if s < 0:
        raise ValueError("QuantizeMultiplierGreaterThanOne: shift < 0")
    return m, s


def calculate_input_radius(input_integer_bits: int, input_left_shift: int,
                           total_signed_bits: int = 31) -> int:
    """TFLM CalculateInputRadius (the double arithmetic version)."""
    max_input_rescaled = math.ldexp(
        1.0 * ((1 << input_integer_bits) - 1),
        (total_signed_bits - input_integer_bits) - input_left_shift)
    return int(math.floor(max_input_rescaled))


# --------------------------------------------------------------------------
# gemmlowp fixedpoint.h / TFLM common.h primitives (vectorized)
# --------------------------------------------------------------------------

def saturating_rounding_doubling_high_mul(a, b):
    """gemmlowp SaturatingRoundingDoublingHighMul for int32 (VQRDMULH)."""
    scalar = is_scalar(a, b)
    a = i64(a)
    b = i64(b)
    ab = a * b
    nudge = np.where(ab >= 0, 1 << 30, 1 - (1 << 30))
    res = _trunc_div_pow2(ab + nudge, 31)
    res = np.where((a == INT32_MIN) & (b == INT32_MIN), INT32_MAX, res)
    return as_result(res, scalar)


def rounding_divide_by_pot(x, exponent):
    """gemmlowp RoundingDivideByPOT (round to nearest, ties away from zero).

    exponent in [0, 31]; may be an array broadcast against x.
    """
    scalar = is_scalar(x, exponent)
    x = i64(x)
    exponent = i64(exponent)
    if np.any(exponent < 0) or np.any(exponent > 31):
        raise ValueError("RoundingDivideByPOT exponent must be in [0, 31]")
    mask = (np.int64(1) << exponent) - 1
    remainder = x & mask
    threshold = (mask >> 1) + (x < 0).astype(np.int64)
    res = (x >> exponent) + (remainder > threshold).astype(np.int64)
    return as_result(res, scalar)


def saturating_rounding_multiply_by_pot(x, exponent: int):
    """gemmlowp SaturatingRoundingMultiplyByPOT<exponent> (int32)."""
    scalar = is_scalar(x)
    x = i64(x)
    if exponent == 0:
        res = x
    elif exponent < 0:
        res = rounding_divide_by_pot(x, -exponent)
    else:
        threshold = (1 << (31 - exponent)) - 1
        res = np.where(x > threshold, INT32_MAX,
                       np.where(x < -threshold, INT32_MIN, _shl_wrap32(x, exponent)))
    return as_result(res, scalar)


def multiply_by_quantized_multiplier(x, mult, shift):
    """TFLM MultiplyByQuantizedMultiplier(int32 x, ...) with double rounding.

    RoundingDivideByPOT(SRDHM(x * (1 << max(shift, 0)), mult), max(-shift, 0)),
    the left shift wrapping like the int32 C++ multiply. mult/shift broadcast
    (per-channel along the last axis for NHWC tensors).
    """
    scalar = is_scalar(x, mult, shift)
    x = wrap32(x)
    mult = i64(mult)
    shift = i64(shift)
    left = np.maximum(shift, 0)
    right = np.maximum(-shift, 0)
    res = rounding_divide_by_pot(
        saturating_rounding_doubling_high_mul(_shl_wrap32(x, left), mult), right)
    return as_result(res, scalar)


def multiply_by_quantized_multiplier_smaller_than_one_exp(x, mult, left_shift):
    """TFLM MultiplyByQuantizedMultiplierSmallerThanOneExp (left_shift <= 0)."""
    scalar = is_scalar(x, mult, left_shift)
    left_shift = i64(left_shift)
    if np.any(left_shift > 0):
        raise ValueError("left_shift must be <= 0")
    res = rounding_divide_by_pot(
        saturating_rounding_doubling_high_mul(wrap32(x), mult), -left_shift)
    return as_result(res, scalar)


def multiply_by_quantized_multiplier_greater_than_one(x, mult, left_shift):
    """TFLM MultiplyByQuantizedMultiplierGreaterThanOne (left_shift >= 0)."""
    scalar = is_scalar(x, mult, left_shift)
    res = saturating_rounding_doubling_high_mul(_shl_wrap32(wrap32(x), left_shift), mult)
    return as_result(res, scalar)


def _exp_on_interval_between_negative_one_quarter_and_0_excl(a):
    a = i64(a)
    constant_term = 1895147668  # exp(-1/8), Q0.31
    constant_1_over_3 = 715827883
    srdhm = saturating_rounding_doubling_high_mul
    x = wrap32(a + (1 << 28))
    x2 = srdhm(x, x)
    x3 = srdhm(x2, x)
    x4 = srdhm(x2, x2)
    x4_over_4 = rounding_divide_by_pot(x4, 2)
    poly = rounding_divide_by_pot(
        wrap32(srdhm(wrap32(x4_over_4 + x3), constant_1_over_3) + x2), 1)
    return wrap32(constant_term + srdhm(constant_term, wrap32(x + poly)))


_EXP_BARREL = (
    (-2, 1672461947),  # exp(-1/4)
    (-1, 1302514674),  # exp(-1/2)
    (0, 790015084),    # exp(-1)
    (1, 290630308),    # exp(-2)
    (2, 39332535),     # exp(-4)
    (3, 720401),       # exp(-8)
    (4, 242),          # exp(-16)
)


def exp_on_negative_values(a, integer_bits: int):
    """gemmlowp exp_on_negative_values for FixedPoint<int32, integer_bits> a<=0.

    Returns the raw Q0.31 result.
    """
    scalar = is_scalar(a)
    a = i64(a)
    fractional_bits = 31 - integer_bits
    one_quarter = 1 << (fractional_bits - 2)
    mask = one_quarter - 1
    a_mod_quarter_minus_one_quarter = (a & mask) - one_quarter
    result = _exp_on_interval_between_negative_one_quarter_and_0_excl(
        saturating_rounding_multiply_by_pot(a_mod_quarter_minus_one_quarter, integer_bits))
    remainder = wrap32(a_mod_quarter_minus_one_quarter - a)
    for exponent, multiplier in _EXP_BARREL:
        if integer_bits > exponent:
            bit = 1 << (fractional_bits + exponent)
            result = np.where((remainder & bit) != 0,
                              saturating_rounding_doubling_high_mul(result, multiplier),
                              result)
    if integer_bits > 5:
        clamp = -(1 << (36 - integer_bits))
        result = np.where(a < clamp, 0, result)
    result = np.where(a == 0, INT32_MAX, result)
    return as_result(result, scalar)


def one_over_one_plus_x_for_x_in_0_1(a):
    """gemmlowp one_over_one_plus_x_for_x_in_0_1, raw Q0.31 in and out."""
    scalar = is_scalar(a)
    a = i64(a)
    srdhm = saturating_rounding_doubling_high_mul
    s = a + INT32_MAX  # RoundingHalfSum(a, One)
    sign = np.where(s >= 0, 1, -1)
    half_denominator = _trunc_div_pow2(s + sign, 1)
    x = wrap32(1515870810 + srdhm(half_denominator, -1010580540))
    for _ in range(3):
        half_denominator_times_x = srdhm(half_denominator, x)
        one_minus = wrap32((1 << 29) - half_denominator_times_x)
        x = wrap32(x + saturating_rounding_multiply_by_pot(srdhm(x, one_minus), 2))
    return as_result(saturating_rounding_multiply_by_pot(x, 1), scalar)


def logistic_fixed(a, integer_bits: int):
    """gemmlowp logistic for FixedPoint<int32, integer_bits>; raw Q0.31 out."""
    scalar = is_scalar(a)
    a = i64(a)
    positive = a > 0
    abs_input = np.where(positive, a, wrap32(-a))
    result_if_positive = one_over_one_plus_x_for_x_in_0_1(
        exp_on_negative_values(wrap32(-abs_input), integer_bits))
    result_if_negative = wrap32(INT32_MAX - result_if_positive)
    res = np.where(a == 0, 1 << 30,
                   np.where(positive, result_if_positive, result_if_negative))
    return as_result(res, scalar)


def _clz32(x) -> np.ndarray:
    x = i64(x) & 0xFFFFFFFF
    bitlen = np.zeros(x.shape, dtype=np.int64)
    for k in range(32):
        bitlen += (x >= (np.int64(1) << k)).astype(np.int64)
    return 32 - bitlen


def get_reciprocal(x, x_integer_digits: int):
    """TFLM GetReciprocal -> (shifted_scale raw Q0.31, num_bits_over_unit)."""
    scalar = is_scalar(x)
    x = i64(x)
    headroom_plus_one = _clz32(x)
    num_bits_over_unit = x_integer_digits - headroom_plus_one
    shifted = ((x & 0xFFFFFFFF) << np.minimum(headroom_plus_one, 31)) & 0xFFFFFFFF
    shifted = np.where(headroom_plus_one >= 32, 0, shifted)
    shifted_sum_minus_one = wrap32(shifted - (1 << 31))
    scale = one_over_one_plus_x_for_x_in_0_1(shifted_sum_minus_one)
    return as_result(scale, scalar), as_result(num_bits_over_unit, scalar)


# --------------------------------------------------------------------------
# Parameter computation (TFLM Prepare)
# --------------------------------------------------------------------------

def softmax_params(input_scale: float, beta: float = 1.0) -> tuple[int, int, int]:
    """TFLM CalculateSoftmaxParams for int8 -> (multiplier, left_shift, diff_min).

    PreprocessSoftmaxScaling in double: min(beta * input_scale * 2^26,
    2^31 - 1), QuantizeMultiplierGreaterThanOne; diff_min =
    -CalculateInputRadius(5, left_shift, 31). beta and input_scale are float32
    in the model and widened to double.
    """
    k_scaled_diff_integer_bits = 5
    real = min(_f32(beta) * _f32(input_scale) * float(1 << (31 - k_scaled_diff_integer_bits)),
               float((1 << 31) - 1))
    mult, left_shift = quantize_multiplier_greater_than_one(real)
    diff_min = -calculate_input_radius(k_scaled_diff_integer_bits, left_shift, 31)
    return mult, left_shift, diff_min


def logistic_params(input_scale: float, input_zp: int) -> dict:
    """TFLM CalculateArithmeticOpDataLogistic for int8.

    Note: TFLM uses a raw frexp here (no q_fixed == 2^31 fix-up and no
    shift < -31 clamp of QuantizeMultiplier); for float32 scales q*2^31 can't
    round up to 2^31, so this is safe.
    """
    k_input_integer_bits = 4
    real = _f32(input_scale) * float(1 << (31 - k_input_integer_bits))
    q, left_shift = math.frexp(real)
    mult = _round_half_away(q * float(1 << 31))
    if mult > INT32_MAX:
        raise ValueError("logistic multiplier overflows int32")
    radius = calculate_input_radius(k_input_integer_bits, left_shift, 31)
    return {
        "input_zero_point": int(input_zp),
        "input_offset": -int(input_zp),
        "input_range_radius": int(radius),
        "input_multiplier": int(mult),
        "input_left_shift": int(left_shift),
    }


def add_params(s1: float, zp1: int, s2: float, zp2: int,
               s_out: float, zp_out: int) -> dict:
    """TFLM CalculateOpDataAdd for int8 (left_shift 20).

    twice_max_input_scale = 2 * (double)max(s1, s2) (max taken in float32);
    input multipliers s_i / twice_max, output multiplier
    twice_max / (2^20 * s_out), all in double and quantized with
    QuantizeMultiplierSmallerThanOneExp.
    """
    left_shift = 20
    twice_max = 2.0 * float(max(np.float32(s1), np.float32(s2)))
    r1 = _f32(s1) / twice_max
    r2 = _f32(s2) / twice_max
    r_out = twice_max / (float(1 << left_shift) * _f32(s_out))
    m1, sh1 = quantize_multiplier_smaller_than_one_exp(r1)
    m2, sh2 = quantize_multiplier_smaller_than_one_exp(r2)
    mo, sho = quantize_multiplier_smaller_than_one_exp(r_out)
    return {
        "input1_offset": -int(zp1),
        "input2_offset": -int(zp2),
        "output_offset": int(zp_out),
        "left_shift": left_shift,
        "input1_multiplier": m1,
        "input1_shift": sh1,
        "input2_multiplier": m2,
        "input2_shift": sh2,
        "output_multiplier": mo,
        "output_shift": sho,
    }


def mean_adjusted_multiplier(multiplier: int, shift: int, num_elements: int) -> tuple[int, int]:
    """The 1/num_elements folding TFLM's QuantizedMeanOrSum does at eval time.

    s = min(floor(log2(num)), 32, 31 + shift);
    multiplier' = (int32)(((int64)multiplier << s) / num); shift' = shift - s.
    """
    num = int(num_elements)
    if num <= 0:
        raise ValueError("num_elements must be positive")
    s = num.bit_length() - 1
    s = min(s, 32)
    s = min(s, 31 + int(shift))
    m = (int(multiplier) << s) // num  # both non-negative: same as C++ '/'
    m = int(wrap32(m))  # static_cast<int32_t>
    return m, int(shift) - s


def mean_params(input_scale: float, input_zp: int, output_scale: float, output_zp: int,
                num_elements: int | None = None) -> dict:
    """TFLM int8 MEAN parameters.

    Prepare: multiplier, shift = QuantizeMultiplier((double)in_scale /
    (double)out_scale) -- these are what pockmcu_mean_s8 takes. If
    num_elements is given, also returns the eval-time adjusted pair.
    """
    real = _f32(input_scale) / _f32(output_scale)
    mult, shift = quantize_multiplier(real)
    p = {
        "input_zero_point": int(input_zp),
        "output_zero_point": int(output_zp),
        "input_offset": -int(input_zp),
        "output_offset": int(output_zp),
        "multiplier": mult,
        "shift": shift,
    }
    if num_elements is not None:
        p["adjusted_multiplier"], p["adjusted_shift"] = mean_adjusted_multiplier(
            mult, shift, num_elements)
    return p


def conv_per_channel_multipliers(input_scale: float, filter_scales, output_scale: float):
    """TFLM PopulateConvolutionQuantizationParams (int8 conv / depthwise, and
    per-channel FULLY_CONNECTED): per channel QuantizeMultiplier(
    (double)input_scale * (double)filter_scale[c] / (double)output_scale).

    A single filter scale gives one entry (per-tensor filter quantization uses
    the same double formula here). Returns (multipliers, shifts) int32 arrays.
    """
    fs = np.atleast_1d(np.asarray(filter_scales, dtype=np.float32))
    mults, shifts = [], []
    for s in fs:
        m, sh = quantize_multiplier(_f32(input_scale) * float(s) / _f32(output_scale))
        mults.append(m)
        shifts.append(sh)
    return np.array(mults, dtype=np.int32), np.array(shifts, dtype=np.int32)


def fc_per_tensor_multiplier(input_scale: float, filter_scale: float,
                             output_scale: float) -> tuple[int, int]:
    """TFLM per-tensor FULLY_CONNECTED (GetQuantizedConvolutionMultipler):
    the input*filter scale product is taken in float32, then widened to
    double and divided by (double)output_scale."""
    product = float(np.float32(np.float32(input_scale) * np.float32(filter_scale)))
    return quantize_multiplier(product / _f32(output_scale))


def _quantize_float_tflm(scale: float, zero_point: int, f: float) -> int:
    """kernel_util.cc Quantize(): float32 f / scale, roundf, + zero_point."""
    tmp = np.float32(np.float32(f) / np.float32(scale))
    r = _round_half_away_f32(tmp)
    return int(zero_point) + int(r)


def activation_range(act: str, out_scale: float, out_zp: int) -> tuple[int, int]:
    """TFLM CalculateActivationRangeQuantized for an int8 output.

    act: 'NONE' | 'RELU' | 'RELU6' | 'RELU_N1_TO_1' (TFLite enum names are
    accepted too). Other fused activations fall into TFLM's else-branch,
    i.e. (-128, 127).
    """
    qmin, qmax = -128, 127
    a = str(act).upper()
    if a in ("RELU",):
        return max(qmin, _quantize_float_tflm(out_scale, out_zp, 0.0)), qmax
    if a in ("RELU6",):
        return (max(qmin, _quantize_float_tflm(out_scale, out_zp, 0.0)),
                min(qmax, _quantize_float_tflm(out_scale, out_zp, 6.0)))
    if a in ("RELU_N1_TO_1", "RELUN1TO1"):
        return (max(qmin, _quantize_float_tflm(out_scale, out_zp, -1.0)),
                min(qmax, _quantize_float_tflm(out_scale, out_zp, 1.0)))
    if a in ("NONE", "", "TANH", "SIGN_BIT", "SIGMOID"):
        return qmin, qmax
    raise ValueError(f"unknown fused activation {act!r}")


# --------------------------------------------------------------------------
# Reference kernels
# --------------------------------------------------------------------------

def softmax_s8(x, mult: int, left_shift: int, diff_min: int) -> np.ndarray:
    """TFLM reference_ops::Softmax<int8_t, int8_t> over the last axis."""
    x = i64(x)
    max_in_row = x.max(axis=-1, keepdims=True)
    diff = x - max_in_row
    valid = diff >= diff_min
    rescaled = multiply_by_quantized_multiplier_greater_than_one(
        np.where(valid, diff, 0), mult, left_shift)
    exp_q0 = exp_on_negative_values(rescaled, 5)
    exp_q12 = rounding_divide_by_pot(exp_q0, 12)  # Rescale<12>
    sum_of_exps = wrap32(np.where(valid, exp_q12, 0).sum(axis=-1, keepdims=True))
    shifted_scale, num_bits_over_unit = get_reciprocal(sum_of_exps, 12)
    exponent = num_bits_over_unit + 31 - 8
    if np.any(exponent < 0):
        raise ValueError("softmax exponent < 0 (TFLITE_CHECK fails)")
    # TFLM aborts (TFLITE_CHECK(exponent <= 31)) when the sum of exps reaches
    # 512, i.e. rows with more than ~512 entries close to the row max. The
    # natural extension (|product| < 2^31, divided by >= 2^32) rounds to 0,
    # which is what pockmcu's arm_softmax_s8 returns: every output is -128.
    unsat = np.where(
        exponent > 31, 0,
        rounding_divide_by_pot(saturating_rounding_doubling_high_mul(shifted_scale, exp_q0),
                               np.minimum(exponent, 31)))
    out = np.clip(unsat - 128, -128, 127)
    out = np.where(valid, out, -128)
    return out.astype(np.int8)


def logistic_s8(x, params: dict) -> np.ndarray:
    """TFLM reference_integer_ops::Logistic (int8); params from logistic_params."""
    x = i64(x)
    zp = params["input_zero_point"]
    radius = params["input_range_radius"]
    inp = x - zp
    low = inp <= -radius
    high = inp >= radius
    mid = ~(low | high)
    q4 = multiply_by_quantized_multiplier(np.where(mid, inp, 0),
                                          params["input_multiplier"],
                                          params["input_left_shift"])
    q0 = logistic_fixed(q4, 4)
    q = np.clip(rounding_divide_by_pot(q0, 23) - 128, -128, 127)
    out = np.where(low, -128, np.where(high, 127, q))
    return out.astype(np.int8)


def add_s8(a, b, params: dict, act_min: int = -128, act_max: int = 127) -> np.ndarray:
    """TFLM int8 ADD (AddFunc), numpy broadcasting of a and b."""
    a = i64(a)
    b = i64(b)
    a, b = np.broadcast_arrays(a, b)
    ls = params["left_shift"]
    sa = _shl_wrap32(a + params["input1_offset"], ls)
    sb = _shl_wrap32(b + params["input2_offset"], ls)
    sa = multiply_by_quantized_multiplier_smaller_than_one_exp(
        sa, params["input1_multiplier"], params["input1_shift"])
    sb = multiply_by_quantized_multiplier_smaller_than_one_exp(
        sb, params["input2_multiplier"], params["input2_shift"])
    raw_sum = wrap32(sa + sb)
    raw_out = wrap32(multiply_by_quantized_multiplier_smaller_than_one_exp(
        raw_sum, params["output_multiplier"], params["output_shift"]) + params["output_offset"])
    return np.clip(raw_out, act_min, act_max).astype(np.int8)


def mean_s8(x, axes: Iterable[int] | int, keep_dims: bool, params: dict) -> np.ndarray:
    """TFLM int8 MEAN (reference_ops::QuantizedMeanOrSum, compute_sum=false).

    params: from mean_params (uses input_zero_point, output_zero_point,
    multiplier, shift). Any axes (negative and duplicate axes resolved like
    TFLM's ResolveAxis).
    """
    x = i64(x)
    if np.ndim(axes) == 0:
        axes = [int(axes)]
    resolved: list[int] = []
    for ax in axes:
        ax = int(ax)
        cur = ax + x.ndim if ax < 0 else ax
        if not 0 <= cur < x.ndim:
            raise ValueError(f"axis {ax} out of range")
        if cur not in resolved:
            resolved.append(cur)
    out_shape = [1 if i in resolved else d for i, d in enumerate(x.shape)]
    if not keep_dims:
        out_shape = [d for i, d in enumerate(x.shape) if i not in resolved]
    num = 1
    for ax in resolved:
        num *= x.shape[ax]
    if x.size == 0 or num == 0:
        return np.zeros(out_shape, dtype=np.int8)
    total = wrap32(x.sum(axis=tuple(resolved), keepdims=True))
    mult, shift = mean_adjusted_multiplier(params["multiplier"], params["shift"], num)
    shifted_sum = wrap32(total - params["input_zero_point"] * num)
    out = multiply_by_quantized_multiplier(shifted_sum, mult, shift) + params["output_zero_point"]
    out = np.clip(out, -128, 127).astype(np.int8)
    return out.reshape(out_shape)


def _round_half_away_f32(x) -> np.ndarray:
    """std::round on float32 values, exactly, returned as float32."""
    x = np.asarray(x, dtype=np.float32)
    t = np.trunc(x)
    frac = x - t  # exact for float32
    with np.errstate(invalid="ignore"):
        r = np.where(frac >= 0.5, t + np.float32(1),
                     np.where(frac <= -0.5, t - np.float32(1), t))
    return r.astype(np.float32)


def quantize_f32_s8(x, scale: float, zp: int) -> np.ndarray:
    """TFLM AffineQuantize float32 -> int8.

    float32 x / (float)scale, std::round (half away from zero), + zp, clamp.
    Non-finite and out-of-int32 values (UB in TFLM) saturate; NaN -> zp, like
    pockmcu_quantize_f32_s8.
    """
    x = np.asarray(x, dtype=np.float32)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        q = np.float32(x / np.float32(scale))
        r = _round_half_away_f32(q)
        r = np.where(np.isnan(r), np.float32(0), r)
        r = np.clip(r, np.float32(-1024), np.float32(1024))
    out = r.astype(np.int64) + int(zp)
    return np.clip(out, -128, 127).astype(np.int8)


def dequantize_s8_f32(x, scale: float, zp: int) -> np.ndarray:
    """TFLM Dequantize int8 -> float32: (float)((double)scale * (x - zp))."""
    x = i64(x)
    return (np.float64(_f32(scale)) * (x - int(zp)).astype(np.float64)).astype(np.float32)
