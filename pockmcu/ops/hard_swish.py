"""HARD_SWISH, int8 in, int8 out: y = x * relu6(x + 3) / 6, and its gradient.

The worked example of README "Adding an operator": everything pockmcu knows about the operator is
in this module, side by side (TFLite builtin, checks, Prepare, numpy reference, gradient rule,
window, C emission); its kernels are kernels_c/pockmcu_hard_swish_s8.c and
kernels_c/pockmcu_hard_swish_grad_f32.c, its fixtures the hard_swish_* variants of
tests/fixtures/make_fixtures.py.

Semantics: TFLite Micro's HardSwishPrepare (hard_swish_common.cc) and
reference_ops::HardSwish<int8_t> (reference/hard_swish.h), in 16-bit fixed point: x - zp_in is
put on a "high-resolution" scale (x 2^7), rescaled once to the output scale (a rounding doubling
high multiply by a 16-bit multiplier) and once to a "relu-ish" value in [-1, 1] that represents
[-3, 3] with saturation; that value, mapped to [0, 1], multiplies the first with a non-rounding
doubling high multiply; a rounding right shift and zp_out finish. The 16-bit primitives are
gemmlowp's, including their corner case: a rounding shift of an int16 value by 16 or more gives
1 for x >= 0 and -1 below (TFLM does the same; the kernel tests check it against the interpreter).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import fixedpoint as fp
from ..ccode import Call, Emission, Ptr
from ..ir import Graph, Op
from .base import POINTWISE, OpDef, Window, register
from .conv import LayerGrad

F32 = np.float32
I16_MIN, I16_MAX = -(1 << 15), (1 << 15) - 1


@dataclass(frozen=True)
class HardSwishParams:
    """The compile-time constants (TFLM's HardSwishParams, filled as HardSwishPrepare does)."""

    input_zero_point: int
    output_zero_point: int
    reluish_multiplier: int      # int16 fixed-point multiplier: high-resolution input -> [-1, 1] for [-3, 3]
    reluish_shift: int           # its exponent (> 0: left shift)
    output_multiplier: int       # int16 fixed-point multiplier: high-resolution input -> output scale
    output_shift: int            # its exponent (<= 0)


def _downscale_to_int16(m: int) -> int:
    """TFLM DownScaleInt32ToInt16Multiplier: the rounded top 16 bits of a Q31 multiplier."""
    return I16_MAX if m >= (1 << 31) - 1 - (1 << 15) else (m + (1 << 15)) >> 16


def hard_swish_params(s_in: float, zp_in: int, s_out: float, zp_out: int) -> HardSwishParams:
    """HardSwishPrepare for int8: the scales in float32, each quotient widened to double for
    QuantizeMultiplier, then cut to 16 bits."""
    hires = F32(1.0 / 128.0) * F32(s_in)
    out_m, out_e = fp.quantize_multiplier(float(hires / F32(s_out)))
    relu_m, relu_e = fp.quantize_multiplier(float(hires / F32(3.0 / 32768.0)))
    return HardSwishParams(int(zp_in), int(zp_out), _downscale_to_int16(relu_m), relu_e,
                           _downscale_to_int16(out_m), out_e)


# -- gemmlowp's int16 primitives, vectorized (int64 arrays holding int16 values) -------------------

def _trunc_div(x, d: int) -> np.ndarray:
    """C integer division by d > 0 (rounds toward zero)."""
    return np.where(x >= 0, x // d, -((-x) // d))


def _srdhm16(a, b: int) -> np.ndarray:
    """SaturatingRoundingDoublingHighMul<int16_t>."""
    ab = a * b
    r = _trunc_div(ab + np.where(ab >= 0, 1 << 14, 1 - (1 << 14)), 1 << 15)
    return np.where((a == I16_MIN) & (b == I16_MIN), I16_MAX, r)


def _sdhm16(a, b) -> np.ndarray:
    """TFLM's SaturatingDoublingHighMul (int16, truncating)."""
    return np.where((a == I16_MIN) & (b == I16_MIN), I16_MAX, _trunc_div(a * b, 1 << 15))


def _rdbpot16(x, exponent: int) -> np.ndarray:
    """RoundingDivideByPOT<int16_t>: its mask (1 << exponent) - 1 is cut to 16 bits, so from 16 on
    it is -1 and the result is 1 for x >= 0, -1 for x < 0."""
    mask = -1 if exponent >= 16 else (1 << exponent) - 1
    threshold = (mask >> 1) + (x < 0)
    return (x >> exponent) + ((x & mask) > threshold)


def _sat_shl16(x, amount: int) -> np.ndarray:
    """TFLM's SaturatingLeftShift (int16)."""
    return np.clip(x * (1 << amount), I16_MIN, I16_MAX)


def hard_swish_s8(x: np.ndarray, p: HardSwishParams) -> np.ndarray:
    """reference_ops::HardSwish<int8_t>, element by element."""
    hires = (np.asarray(x, np.int64) - p.input_zero_point) * (1 << 7)
    preshift = _srdhm16(hires, p.output_multiplier)
    reluish = hires
    if p.reluish_shift > 0:
        reluish = _sat_shl16(reluish, p.reluish_shift - 1)
    reluish = _srdhm16(reluish, p.reluish_multiplier)
    if p.reluish_shift > 0:
        reluish = _sat_shl16(reluish, 1)
    if p.reluish_shift < 0:
        reluish = _rdbpot16(reluish, -p.reluish_shift)
    reluish = (reluish + (1 << 15)) >> 1
    # |the doubling high product| <= 32639, so TFLM's int16 sum with the zero point cannot wrap
    out = _rdbpot16(_sdhm16(reluish, preshift), -p.output_shift) + p.output_zero_point
    return np.clip(out, -128, 127).astype(np.int8)


def hard_swish_grad(x: np.ndarray, dy: np.ndarray, s_in: float, zp_in: int) -> np.ndarray:
    """dx = dy * hard_swish'(x) on the dequantized input x = s_in * (q - zp_in), in float32 in the
    kernel's (and PyTorch's) order: 0 for x <= -3, dy * (x / 3 + 1/2) for -3 < x < 3, dy from 3 on
    (at the kinks, the slope of the outer piece)."""
    xr = F32(s_in) * (np.asarray(x, np.int32) - zp_in).astype(F32)
    dy = np.asarray(dy).astype(F32)
    with np.errstate(invalid="ignore", over="ignore"):
        mid = dy * (xr / F32(3.0) + F32(0.5))
    return np.where(xr <= F32(-3.0), F32(0.0), np.where(xr < F32(3.0), mid, dy)).astype(F32)


@register
class HardSwish(OpDef):
    kind = "HARD_SWISH"
    tflite_ops = ("HARD_SWISH",)
    kernel = "pockmcu_hard_swish_s8"
    may_share_input = (0,)  # element-wise in order: the output may overwrite a dying input

    def check(self, g: Graph, op: Op) -> list[str]:
        problems = super().check(g, op)
        if problems:
            return problems
        x, y = g.t(op.inputs[0]), g.t(op.outputs[0])
        if x.size != y.size:
            return [f"input {list(x.shape)} and output {list(y.shape)} differ in size"]
        if x.quant.per_channel or y.quant.per_channel:
            return ["per-channel activation quantization"]
        if hard_swish_params(x.quant.s, x.quant.zp, y.quant.s, y.quant.zp).output_shift > 0:
            # TFLM's HardSwishPrepare refuses it (TF_LITE_ENSURE(output_multiplier_exponent <= 0))
            return [f"output scale {y.quant.s} is below input scale / 128 ({x.quant.s / 128}); TFLite Micro refuses it"]
        return []

    def prepare(self, g: Graph, op: Op) -> HardSwishParams:
        x, y = g.t(op.inputs[0]), g.t(op.outputs[0])
        return hard_swish_params(x.quant.s, x.quant.zp, y.quant.s, y.quant.zp)

    def reference(self, g: Graph, op: Op, xs, rt=None):
        return [hard_swish_s8(xs[0], op.prepared)]

    def macs(self, g: Graph, op: Op) -> int:
        """None: as for the other element-wise ops, plan.json counts the multiply-accumulates of
        convolutions and matrix products only."""
        return 0

    def window(self, g: Graph, op: Op) -> Window:
        return POINTWISE

    def backward(self, tb, op: Op) -> None:
        """dx = dy * hard_swish'(x), x the dequantized input, read from the saved int8 input. The
        int8 output's clamp is not masked: hard_swish' is the whole rule (as PyTorch's)."""
        x = op.inputs[0]
        if not tb.needs_grad(x):
            return
        dx = tb.grad_tensor(x, f"{tb.short(x)}_grad_from_{op.name}")
        tb.emit("HARD_SWISH_GRAD", f"{op.name}_grad", [x, tb.grad(op.outputs[0])], [dx], layer=op)
        tb.add_grad(x, dx)

    def emit(self, g: Graph, op: Op, cg) -> Emission:
        p = op.prepared
        x, y = op.inputs[0], op.outputs[0]
        return Emission(calls=(Call(cg.kernel(op).function, (
            Ptr(x), g.t(x).size, -p.input_zero_point, p.reluish_multiplier, p.reluish_shift,
            p.output_multiplier, p.output_shift, p.output_zero_point, Ptr(y)), status=True),))


@register
class HardSwishGrad(OpDef):
    """The backward of HARD_SWISH: inputs the forward's saved int8 input and the output gradient."""

    kind = "HARD_SWISH_GRAD"
    Options = LayerGrad
    kernel = "pockmcu_hard_swish_grad_f32"
    io_dtypes = ("int8", "float32")
    may_share_input = (1,)  # reads grad_output[k] before it writes grad_input[k]

    def reference(self, g: Graph, op: Op, xs, rt=None):
        x = g.t(op.inputs[0])
        return [hard_swish_grad(xs[0], xs[1], x.quant.s, x.quant.zp).astype(np.float64)]

    def emit(self, g: Graph, op: Op, cg) -> Emission:
        x = g.t(op.inputs[0])
        return Emission(calls=(Call(cg.kernel(op).function, (
            Ptr(x.name), x.size, float(x.quant.s), x.quant.zp, Ptr(op.inputs[1]), Ptr(op.outputs[0]))),))
