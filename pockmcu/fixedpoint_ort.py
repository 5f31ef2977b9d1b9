"""onnxruntime numerics: float32 arithmetic emulated exactly with integers.

What onnxruntime (MLAS and its contrib quantization ops) computes for the quantized operators, bit
for bit: the requantization of an int32 accumulator through float32 (requantize_ort, with the scale
split into a 24-bit mantissa and a power of two at compile time), the DequantizeLinear ->
QuantizeLinear tables, and the float32 QLinearAveragePool and (QLinear)Softmax paths, the latter
with the C library's logf. The TFLite Micro / gemmlowp numerics are in pockmcu.fixedpoint; the C
versions of these are kernels_c/pockmcu_nn_support_ort.h and pockmcu_nn_ort.h.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import math

import numpy as np

from .intmath import as_result, i64, is_scalar, wrap32

__all__ = [
    "ORT_SAT",
    "f32_mant_exp",
    "rne_shr",
    "requantize_ort",
    "ort_output_scales",
    "ort_requantize_table",
    "f32_bits",
    "ort_dequantize_table",
    "ort_avgpool",
    "ort_softmax_table",
    "ort_softmax",
]

# onnxruntime (MLAS) requantizes an int32 accumulator as
#     q = RoundHalfEven(float32(float32(acc) * scale)) + zero_point, clamped,
# with scale = float32(float32(s_x * s_w) / s_y) (MlasRequantizeOutput, QLinearConv's and
# QGemm's ComputeOutputScale). Each float32 operation rounds to 24 significant bits, half to even.
# The functions below reproduce those roundings bit for bit with int64 arithmetic; the scale is
# split at compile time into a 24-bit mantissa and a power of two (scale = m * 2**e).

ORT_SAT = 1 << 15     # |result| is saturated here; every int8 clamp lies well inside


def f32_mant_exp(x) -> tuple[np.ndarray, np.ndarray]:
    """Positive normal float32 values x = m * 2**e with 2**23 <= m < 2**24 (exact), as int32 arrays."""
    x = np.atleast_1d(np.asarray(x, dtype=np.float32)).astype(np.float64)
    if np.any(~np.isfinite(x)) or np.any(x <= 0) or np.any(x < np.finfo(np.float32).tiny):
        raise ValueError("scale must be a positive normal float32")
    fr, ex = np.frexp(x)                       # x = fr * 2**ex, 0.5 <= fr < 1 (exact in float64)
    m = (fr * (1 << 24)).astype(np.int64)
    if np.any(m.astype(np.float64) != fr * (1 << 24)):
        raise ValueError("not a float32 value")
    return m.astype(np.int32), (ex - 24).astype(np.int32)


def _bitlen(x: np.ndarray) -> np.ndarray:
    """Bit length of non-negative int64 values below 2**53 (0 for 0)."""
    return np.where(x > 0, np.frexp(x.astype(np.float64))[1], 0).astype(np.int64)


def rne_shr(x, k):
    """Round(x / 2**k) half to even for int64 x (any sign) and k >= 0 (k <= 62)."""
    x, k = np.broadcast_arrays(i64(x), i64(k))
    mag = np.abs(x)
    q = mag >> k
    rem = mag - (q << k)
    half = np.where(k > 0, np.int64(1) << np.maximum(k - 1, 0), 1)
    up = (k > 0) & ((rem > half) | ((rem == half) & ((q & 1) == 1)))
    q = q + up
    return np.where(x < 0, -q, q)


def requantize_ort(acc, mant, exp):
    """RoundHalfEven(float32(float32(acc) * (mant * 2**exp))) for int32 acc, exactly, saturated to
    +-ORT_SAT. mant/exp broadcast (per channel along the last axis).

    float32(acc) = A * 2**ka (A: acc rounded to 24 significant bits); the product A * mant < 2**48 is
    exact in int64 and is rounded to 24 significant bits, P * 2**kp; the value P * 2**(ka + kp + exp)
    is then rounded to an integer, half to even (the second rounding, as cvtps2dq does)."""
    scalar = is_scalar(acc, mant, exp)
    acc = wrap32(acc)
    ka = np.maximum(_bitlen(np.abs(acc)) - 24, 0)
    a = rne_shr(acc, ka)
    p = a * i64(mant)
    kp = np.maximum(_bitlen(np.abs(p)) - 24, 0)
    pp = rne_shr(p, kp)
    e = ka + kp + i64(exp)
    big = (e >= 0) | (_bitlen(np.abs(pp)) + e > 16)
    r = np.where(big, np.sign(pp) * ORT_SAT, rne_shr(pp, np.clip(-e, 0, 62)))
    return as_result(np.clip(r, -ORT_SAT, ORT_SAT), scalar)


def ort_output_scales(input_scale: float, filter_scales, output_scale: float) -> tuple[np.ndarray, np.ndarray]:
    """onnxruntime's requantization scale per channel, float32 (X_scale * W_scale[c]) / Y_scale as
    QLinearConv / QGemm / QLinearMatMul compute it, as (mantissa, exponent) int32 arrays."""
    f32 = np.float32
    ws = np.atleast_1d(np.asarray(filter_scales, dtype=f32))
    with np.errstate(all="raise"):
        s = (f32(input_scale) * ws).astype(f32) / f32(output_scale)
    return f32_mant_exp(s.astype(f32))


def ort_requantize_table(s_in: float, zp_in: int, s_out: float, zp_out: int, lo: int = -128, hi: int = 127) -> np.ndarray:
    """onnxruntime's DequantizeLinear -> QuantizeLinear of every int8 value (int8 domain zero points):
    d = float32(s_in * (x - zp_in)); q = RoundHalfEven(float32(d / s_out)) + zp_out, clamped to [lo, hi]
    (MlasQuantizeLinear: divide, clamp, cvtps2dq, add the zero point). Index x + 128."""
    f32 = np.float32
    x = np.arange(-128, 128, dtype=np.int64)
    d = (f32(s_in) * (x - int(zp_in)).astype(f32)).astype(f32)
    q = np.rint((d / f32(s_out)).astype(f32)).astype(np.float64)
    return np.clip(q + int(zp_out), max(lo, -128), min(hi, 127)).astype(np.int8)


def f32_bits(x) -> np.ndarray:
    """float32 values -> their IEEE bit patterns (uint32)."""
    return np.ascontiguousarray(np.asarray(x, dtype=np.float32)).view(np.uint32)


def ort_dequantize_table(s_in: float, zp_in: int) -> np.ndarray:
    """float32(s_in * (x - zp_in)) for every int8 x (index x + 128), as DequantizeLinear computes it."""
    x = np.arange(-128, 128, dtype=np.int64)
    return (np.float32(s_in) * (x - int(zp_in)).astype(np.float32)).astype(np.float32)


def ort_avgpool(taps, dq: np.ndarray, s_out: float, zp_out_onnx: int, zp_offset: int, act_min: int, act_max: int):
    """onnxruntime's QLinearAveragePool (contrib_ops/cpu/quantization/qlinear_pool.cc) in numpy float32:
    y = sum of the dequantized in-bounds taps, in window order; y / count; then
    nearbyint(float32(y / s_out) + zp) with the zero point in the model's own domain (uint8: +128),
    clamped. taps yields (int8 values, valid) per tap; dq is ort_dequantize_table."""
    f32 = np.float32
    total = count = None
    for vals, valid in taps:
        d = dq[vals.astype(np.int64) + 128]
        if total is None:
            total = np.zeros(np.broadcast_shapes(d.shape, valid.shape), f32)
            count = np.zeros(valid.shape, np.int64)
        total = np.where(valid, (total + d).astype(f32), total)
        count = count + valid
    avg = (total / count.astype(f32)).astype(f32)
    v = ((avg / f32(s_out)).astype(f32) + f32(zp_out_onnx)).astype(f32)
    q = np.rint(v).astype(np.int64) - int(zp_offset)
    return np.clip(q, act_min, act_max).astype(np.int8)


def _logf(x: float) -> float:
    """The C library's float32 logf (what onnxruntime's std::log(float) calls), numpy's float32 log without one."""

    name = ctypes.util.find_library("m")
    if name:
        try:
            logf = ctypes.CDLL(name).logf
            logf.restype, logf.argtypes = ctypes.c_float, [ctypes.c_float]
            return float(logf(x))
        except (OSError, AttributeError):
            pass
    return float(np.log(np.float32(x)))


def ort_softmax_table(x_scale: float, row: int, qlinear: bool = True) -> np.ndarray:
    """Exponentials of the 256 possible differences x - max(row), entry 255 - (max - x), as float32.

    qlinear: QLinearSoftmax's own table (contrib_ops/cpu/quantization/qlinear_softmax.cc,
    QlinearBuildLookupTableUint32 with float entries): bit_shift = log(FLT_MAX / row) (quotient and log in
    float32: C++ picks std::log(float); measured), minus 5 reserve bits, over x_scale; entry i = float32(exp((i - 255 +
    bit_shift) * x_scale)) in double. Otherwise float32(exp((i - 255) * x_scale)), standing in for the float
    Softmax onnxruntime runs between DequantizeLinear and QuantizeLinear when it does not fuse them."""
    xs = float(np.float32(x_scale))
    bit_shift = 0.0
    if qlinear:
        fmax = np.float32(np.finfo(np.float32).max)
        bit_shift = _logf(float(np.float32(fmax / np.float32(row))))
        bit_shift = max(0.0, bit_shift - 5.0) / xs
    return np.array([math.exp((i - 255 + bit_shift) * xs) for i in range(256)], dtype=np.float64).astype(np.float32)


def ort_softmax(x, table: np.ndarray, y_scale: float, zp_onnx: int, uint8: bool, qlinear: bool = True) -> np.ndarray:
    """Softmax over the last axis in numpy float32, t = table[255 - max + x], vsum = t summed in row order.

    qlinear (QLinearSoftmax): q = nearbyint(float32(float32(t * floor(1 / y_scale)) / vsum)) + zp (the
    model's domain), saturated (uint8: min(q, 255) - 128; int8: min(q, 127), measured on onnxruntime 1.31: a
    probability of 1 with scale 1/256 and zero point -128 gives 127). Otherwise (float Softmax, then QuantizeLinear):
    p = t * float32(1 / vsum),
    q = nearbyint(float32(p / y_scale)) + zp, saturated."""
    f32 = np.float32
    x = i64(x)
    t = table[255 - x.max(axis=-1, keepdims=True) + x]
    vsum = np.zeros(t.shape[:-1] + (1,), f32)
    for k in range(t.shape[-1]):
        vsum = (vsum + t[..., k:k + 1]).astype(f32)
    if not qlinear:
        p = (t * (f32(1.0) / vsum).astype(f32)).astype(f32)
        q = np.rint((p / f32(y_scale)).astype(f32)).astype(np.int64) + int(zp_onnx)
        lo = 0 if uint8 else -128
        return (np.clip(q, lo, lo + 255) - (128 if uint8 else 0)).astype(np.int8)
    ys = f32(np.floor(f32(1.0) / f32(y_scale)))
    v = ((t * ys).astype(f32) / vsum).astype(f32)
    q = np.rint(v).astype(np.int64) + int(zp_onnx)
    if uint8:
        return (np.minimum(q, 255) - 128).astype(np.int8)
    return np.clip(q, -128, 127).astype(np.int8)
