"""QUANTIZE and DEQUANTIZE: float32 <-> int8 at the model's edges, and QUANTIZE between 8-bit
integer types (uint8 -> int8, int8 -> uint8, int8 -> int8).

Semantics: TFLite Micro's quantize.cc / dequantize.cc.
- float32 -> int8: AffineQuantize (round(x / s) half away from zero in float, + zp, clamp).
- int8 -> float32: Dequantize ((float)((double)s * (q - zp))).
- between integer types: reference_ops::Requantize with QuantizeMultiplier(s_in / s_out):
  MultiplyByQuantizedMultiplier(x - zp_in) + zp_out, clamped to the output type. Its fast path
  (equal scales, int8 <-> uint8 and zero points 128 apart) is x ^ 0x80 (pockmcu_flip_sign_8), which
  the general path equals bit for bit there too.
Float operations happen only in the float conversions, for models whose input or output is float;
the integer conversions are how vendor zoos ship uint8 I/O around an int8 model.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import fixedpoint as fp
from ..ccode import Call, Emission, Ptr
from ..ir import Graph, Op
from .base import OpDef, register

#: the integer conversions QUANTIZE supports (input dtype, output dtype) -> kernel-table variant
INTEGER_CONVERSIONS = {("uint8", "int8"): "u8_s8", ("int8", "uint8"): "s8_u8", ("int8", "int8"): "s8_s8"}
_RANGE = {"int8": (-128, 127), "uint8": (0, 255)}


@dataclass(frozen=True)
class AffineQuant:
    """The compile-time constants of QUANTIZE and DEQUANTIZE (TFLM's OpDataQuantize /
    DequantizeOpData): the int8 side's scale and zero point."""

    scale: float
    zero_point: int


@dataclass(frozen=True)
class RequantizeParams:
    """QUANTIZE between integer types (TFLM's OpDataQuantize requantize fields)."""

    multiplier: int              # QuantizeMultiplier((double)s_in / (double)s_out)
    shift: int
    input_zero_point: int
    output_zero_point: int
    flip: bool                   # TFLM's fast path: equal scales, int8 <-> uint8, zero points 128 apart
    variant: str                 # "u8_s8", "s8_u8" or "s8_s8" (INTEGER_CONVERSIONS)


def requantize_params(s_in: float, zp_in: int, s_out: float, zp_out: int, src: str, dst: str) -> RequantizeParams:
    mult, shift = fp.quantize_multiplier(float(s_in) / float(s_out))
    diff = int(zp_in) - int(zp_out)
    flip = mult == 1 << 30 and shift == 1 and ((src, dst, diff) in (("int8", "uint8", -128), ("uint8", "int8", 128)))
    return RequantizeParams(mult, shift, int(zp_in), int(zp_out), flip, INTEGER_CONVERSIONS[(src, dst)])


def requantize_8(x: np.ndarray, p: RequantizeParams, dst: str) -> np.ndarray:
    """reference_ops::Requantize<src, dst> on 8-bit integers."""
    x = np.ascontiguousarray(x)
    if p.flip:
        return (x.view(np.uint8) ^ np.uint8(0x80)).view(dst)
    v = fp.multiply_by_quantized_multiplier(x.astype(np.int64) - p.input_zero_point, p.multiplier, p.shift)
    return np.clip(np.asarray(v) + p.output_zero_point, *_RANGE[dst]).astype(dst)


@register
class Quantize(OpDef):
    kind = "QUANTIZE"
    tflite_ops = ("QUANTIZE",)
    kernel = "pockmcu_quantize_f32_s8"
    io_dtypes = ("float32", "int8", "uint8")

    def check(self, g: Graph, op: Op) -> list[str]:
        x, y = g.t(op.inputs[0]), g.t(op.outputs[0])
        pair = (x.dtype, y.dtype)
        if pair != ("float32", "int8") and pair not in INTEGER_CONVERSIONS:
            return [f"QUANTIZE {x.dtype} -> {y.dtype} (only float32 -> int8, uint8 -> int8, int8 -> uint8 "
                    "and int8 -> int8)"]
        if y.quant is None:
            return [f"tensor '{y.name}' has no quantization parameters"]
        if x.dtype != "float32" and x.quant is None:
            return [f"tensor '{x.name}' has no quantization parameters"]
        if y.quant.per_channel or (x.quant is not None and x.quant.per_channel):
            return ["per-channel quantization of an activation"]
        if x.size != y.size:
            return [f"input {list(x.shape)} and output {list(y.shape)} differ in size"]
        return []

    def variant(self, g: Graph, op: Op, cg) -> str:
        p = op.prepared
        return "" if isinstance(p, AffineQuant) else ("flip" if p.flip else p.variant)

    def prepare(self, g: Graph, op: Op) -> AffineQuant | RequantizeParams:
        x, y = g.t(op.inputs[0]), g.t(op.outputs[0])
        if x.dtype == "float32":
            return AffineQuant(y.quant.s, y.quant.zp)
        return requantize_params(x.quant.s, x.quant.zp, y.quant.s, y.quant.zp, x.dtype, y.dtype)

    def reference(self, g: Graph, op: Op, xs, rt=None):
        p = op.prepared
        if isinstance(p, AffineQuant):
            return [fp.quantize_f32_s8(xs[0], p.scale, p.zero_point)]
        return [requantize_8(xs[0], p, g.t(op.outputs[0]).dtype)]

    def backward(self, tb, op: Op) -> None:
        """int8 -> int8 inside the network: the real value passes unchanged (the straight-through
        estimator, as for every rounding step), so the gradient is the output's, an alias."""
        x = op.inputs[0]
        if tb.g.t(x).dtype != "int8" or not tb.needs_grad(x):
            return
        dx = tb.grad_tensor(x, f"{tb.short(x)}_grad_from_{op.name}")
        tb.emit("RESHAPE", f"{op.name}_grad", [tb.grad(op.outputs[0])], [dx])
        tb.add_grad(x, dx)

    def describe(self, g: Graph, op: Op) -> str:
        x, y = g.t(op.inputs[0]), g.t(op.outputs[0])
        if x.dtype == "float32":
            return super().describe(g, op)
        how = "x ^ 0x80" if op.prepared.flip else "requantize"
        return (f"QUANTIZE {x.dtype} {x.quant.s:.6g}/{x.quant.zp} -> {y.dtype} {y.quant.s:.6g}/{y.quant.zp} "
                f"({how}): {list(x.shape)}")

    def emit(self, g: Graph, op: Op, cg) -> Emission:
        p = op.prepared
        x, y = g.t(op.inputs[0]), g.t(op.outputs[0])
        if isinstance(p, AffineQuant):
            args = (Ptr(x.name), x.size, float(p.scale), p.zero_point, Ptr(y.name))
        elif p.flip:
            args = (Ptr(x.name), x.size, Ptr(y.name))
        else:
            clamp = (-128, 127) if y.dtype == "int8" and x.dtype == "int8" else ()
            args = (Ptr(x.name), x.size, -p.input_zero_point, p.multiplier, p.shift, p.output_zero_point, *clamp,
                    Ptr(y.name))
        return Emission(calls=(Call(cg.kernel(op).function, args, status=True),))


@register
class Dequantize(OpDef):
    kind = "DEQUANTIZE"
    tflite_ops = ("DEQUANTIZE",)
    kernel = "pockmcu_dequantize_s8_f32"

    def check(self, g: Graph, op: Op) -> list[str]:
        x, y = g.t(op.inputs[0]), g.t(op.outputs[0])
        if x.dtype != "int8" or y.dtype != "float32":
            return [f"DEQUANTIZE {x.dtype} -> {y.dtype} (only int8 -> float32)"]
        return [] if x.quant else [f"tensor '{x.name}' has no quantization parameters"]

    def prepare(self, g: Graph, op: Op) -> AffineQuant:
        x = g.t(op.inputs[0])
        return AffineQuant(x.quant.s, x.quant.zp)

    def reference(self, g: Graph, op: Op, xs, rt=None):
        return [fp.dequantize_s8_f32(xs[0], op.prepared.scale, op.prepared.zero_point)]

    def backward(self, tb, op: Op) -> None:
        """Real values pass through unchanged: the output gradient is the input gradient."""
        tb.add_grad(op.inputs[0], tb.grad(op.outputs[0]))

    def emit(self, g: Graph, op: Op, cg) -> Emission:
        p, x = op.prepared, g.t(op.inputs[0])
        return Emission(calls=(Call(cg.kernel(op).function, (Ptr(x.name), x.size, float(p.scale), p.zero_point,
                                                              Ptr(op.outputs[0])), status=True),))
