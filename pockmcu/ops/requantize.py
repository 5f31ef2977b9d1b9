"""REQUANTIZE (int8 -> int8, new scale/zero point, optional clamp) and ADD_CONST
(int8 tensor + int8 constant broadcast along the last axis), added for ONNX.

Semantics:
- REQUANTIZE: TFLite Micro's int8 -> int8 QUANTIZE (reference_ops::Requantize):
  MultiplyByQuantizedMultiplier(x - zp_in, QuantizeMultiplier(s_in / s_out))
  + zp_out, clamped to [act_min, act_max] (the int8 range unless the frontend
  lowered a Relu/Clip into it). With equal scales it is exact.
- ADD_CONST: TFLite Micro's int8 ADD (left shift 20, per-input and output
  multipliers, see pockmcu.fixedpoint.add_params) with the second operand a
  constant of the whole shape or of the last axis (a per-channel vector), as
  onnxruntime's QOperator / QDQ quantizer leaves an Add of a bias. Emitted as
  one arm_elementwise_add_s8 call per row.
"""

from __future__ import annotations

import numpy as np

from .. import fixedpoint as fp
from ..ir import Graph, Op
from .base import SUPPORTED_ACTIVATIONS, OpDef, register


@register
class Requantize(OpDef):
    kind = "REQUANTIZE"
    kernel = "pockmcu_requantize_s8"
    c_status = True

    def check(self, g: Graph, op: Op) -> list[str]:
        problems = super().check(g, op)
        x, y = g.t(op.inputs[0]), g.t(op.outputs[0])
        if x.shape != y.shape:
            problems.append(f"shape {list(x.shape)} -> {list(y.shape)}")
        if not problems and (x.quant.per_channel or y.quant.per_channel):
            problems.append("per-channel activation quantization")
        return problems

    def prepare(self, g: Graph, op: Op) -> None:
        x, y = g.t(op.inputs[0]), g.t(op.outputs[0])
        a = op.attrs
        a["multiplier"], a["shift"] = fp.quantize_multiplier(float(x.quant.s) / float(y.quant.s))
        lo, hi = a.get("clamp") or (-128, 127)
        a["act_min"], a["act_max"] = max(int(lo), -128), min(int(hi), 127)

    def reference(self, g: Graph, op: Op, xs):
        a = op.attrs
        x, y = g.t(op.inputs[0]), g.t(op.outputs[0])
        v = fp.multiply_by_quantized_multiplier(xs[0].astype(np.int64) - x.quant.zp, a["multiplier"], a["shift"])
        return [np.clip(np.asarray(v) + y.quant.zp, a["act_min"], a["act_max"]).astype(np.int8)]

    def describe(self, g: Graph, op: Op) -> str:
        x, y, a = g.t(op.inputs[0]), g.t(op.outputs[0]), op.attrs
        clamp = f" clamp [{a['clamp'][0]}, {a['clamp'][1]}]" if a.get("clamp") else ""
        return (f"REQUANTIZE {x.quant.s:.6g}/{x.quant.zp} -> {y.quant.s:.6g}/{y.quant.zp}{clamp}: "
                f"{list(x.shape)}")

    def c_context(self, g: Graph, op: Op, cg) -> dict:
        x, y = g.t(op.inputs[0]), g.t(op.outputs[0])
        return dict(x=x, y=y, in_offset=-x.quant.zp, out_offset=y.quant.zp, **op.attrs)

    c_call = """\
status = pockmcu_requantize_s8({{ptr(x)}}, {{x.size}}, {{in_offset}}, {{multiplier}}, {{shift}}, {{out_offset}},
                               {{act_min}}, {{act_max}}, {{ptr(y)}});"""


@register
class AddConst(OpDef):
    kind = "ADD_CONST"
    kernel = "arm_elementwise_add_s8"
    c_status = True

    def check(self, g: Graph, op: Op) -> list[str]:
        problems = super().check(g, op)
        if op.attrs.get("activation", "NONE") not in SUPPORTED_ACTIVATIONS:
            problems.append(op.attrs["activation"])
        x, c = g.t(op.inputs[0]), g.t(op.inputs[1])
        if c.data is None or c.dtype != "int8" or c.quant is None or c.quant.per_channel:
            problems.append(f"constant operand '{c.name}' must be int8 with per-tensor quantization")
        elif not (c.size == x.size or (x.shape and c.size == x.shape[-1])):
            problems.append(f"constant of shape {list(c.shape)} does not broadcast along the last axis of {list(x.shape)}")
        return problems

    def prepare(self, g: Graph, op: Op) -> None:
        x, c, y = g.t(op.inputs[0]), g.t(op.inputs[1]), g.t(op.outputs[0])
        op.attrs["q"] = fp.add_params(x.quant.s, x.quant.zp, c.quant.s, c.quant.zp, y.quant.s, y.quant.zp)
        op.attrs["act_min"], op.attrs["act_max"] = fp.activation_range(op.attrs.get("activation", "NONE"),
                                                                       y.quant.s, y.quant.zp)

    def _broadcast(self, g: Graph, op: Op, x: np.ndarray) -> np.ndarray:
        c = g.t(op.inputs[1]).data
        per_sample = int(np.prod(x.shape[1:], dtype=np.int64))
        return c.reshape(x.shape[1:]) if c.size == per_sample else c.reshape(-1)

    def reference(self, g: Graph, op: Op, xs):
        a = op.attrs
        return [fp.add_s8(xs[0], self._broadcast(g, op, xs[0]), a["q"], a["act_min"], a["act_max"])]

    def c_context(self, g: Graph, op: Op, cg) -> dict:
        x, c = g.t(op.inputs[0]), g.t(op.inputs[1])
        return dict(x=x, c=cg.const(op.inputs[1]), y=g.t(op.outputs[0]), q=op.attrs["q"], block=c.size,
                    rows=x.size // c.size, act_min=op.attrs["act_min"], act_max=op.attrs["act_max"])

    c_call = """\
for (int32_t r = 0; r < {{rows}} && status == ARM_CMSIS_NN_SUCCESS; r++) {
    status = arm_elementwise_add_s8({{ptr(x)}} + r * {{block}}, {{c}},
                                    {{q.input1_offset}}, {{q.input1_multiplier}}, {{q.input1_shift}},
                                    {{q.input2_offset}}, {{q.input2_multiplier}}, {{q.input2_shift}},
                                    {{q.left_shift}}, {{ptr(y)}} + r * {{block}},
                                    {{q.output_offset}}, {{q.output_multiplier}}, {{q.output_shift}},
                                    {{act_min}}, {{act_max}}, {{block}});
}"""
