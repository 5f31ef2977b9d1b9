"""QUANTIZE (float32 -> int8) and DEQUANTIZE (int8 -> float32) at the model's edges.

Semantics: TFLite Micro's AffineQuantize (round(x / s) half away from zero in
float, + zp, clamp) and Dequantize ((float)((double)s * (q - zp))). These are
the only float operations of an inference and exist only for models whose
input or output is float.
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import fixedpoint as fp
from ..ir import Graph, Op
from .base import OpDef, register


@dataclass(frozen=True)
class AffineQuant:
    """The compile-time constants of QUANTIZE and DEQUANTIZE (TFLM's OpDataQuantize /
    DequantizeOpData): the int8 side's scale and zero point."""

    scale: float
    zero_point: int


@register
class Quantize(OpDef):
    kind = "QUANTIZE"
    tflite_ops = ("QUANTIZE",)
    kernel = "pockmcu_quantize_f32_s8"
    c_status = True

    def check(self, g: Graph, op: Op) -> list[str]:
        x, y = g.t(op.inputs[0]), g.t(op.outputs[0])
        if x.dtype != "float32" or y.dtype != "int8":
            return [f"QUANTIZE {x.dtype} -> {y.dtype} (only float32 -> int8)"]
        return [] if y.quant else [f"tensor '{y.name}' has no quantization parameters"]

    def prepare(self, g: Graph, op: Op) -> AffineQuant:
        y = g.t(op.outputs[0])
        return AffineQuant(y.quant.s, y.quant.zp)

    def reference(self, g: Graph, op: Op, xs, rt=None):
        return [fp.quantize_f32_s8(xs[0], op.prepared.scale, op.prepared.zero_point)]

    def c_context(self, g: Graph, op: Op, cg) -> dict:
        p = op.prepared
        return dict(x=g.t(op.inputs[0]), y=g.t(op.outputs[0]), scale=cg.float_lit(p.scale), zp=p.zero_point)

    c_call = """\
status = pockmcu_quantize_f32_s8({{ptr(x)}}, {{x.size}}, {{scale}}, {{zp}}, {{ptr(y)}});"""


@register
class Dequantize(OpDef):
    kind = "DEQUANTIZE"
    tflite_ops = ("DEQUANTIZE",)
    kernel = "pockmcu_dequantize_s8_f32"
    c_status = True

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

    def c_context(self, g: Graph, op: Op, cg) -> dict:
        p = op.prepared
        return dict(x=g.t(op.inputs[0]), y=g.t(op.outputs[0]), scale=cg.float_lit(p.scale), zp=p.zero_point)

    c_call = """\
status = pockmcu_dequantize_s8_f32({{ptr(x)}}, {{x.size}}, {{scale}}, {{zp}}, {{ptr(y)}});"""
