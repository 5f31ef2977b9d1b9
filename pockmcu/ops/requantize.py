"""REQUANTIZE (int8 -> int8, new scale/zero point, optional clamp), ADD_CONST
(int8 tensor + int8 constant broadcast along the last axis) and AVERAGE_POOL_REQUANT
(average pooling into another quantization), added for ONNX models whose
quantized ops TFLite has no single op for.

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
from .. import fixedpoint_ort as ort
from ..ir import Graph, Op
from .base import SUPPORTED_ACTIVATIONS, OpDef, register, same_or_valid_pads
from .pool import ort_pool_context, ort_pool_prepare, ort_pool_reference, pool_taps


@register
class Requantize(OpDef):
    kind = "REQUANTIZE"
    kernel = "pockmcu_requantize_s8"
    c_status = True

    def variant(self, g: Graph, op: Op, cg) -> str:
        return "table" if "table" in op.attrs else ""

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
        if g.numerics == "onnxruntime":   # DequantizeLinear -> QuantizeLinear in float32, as a table
            a["table"] = ort.ort_requantize_table(x.quant.s, x.quant.zp, y.quant.s, y.quant.zp,
                                                 a["act_min"], a["act_max"])

    def reference(self, g: Graph, op: Op, xs, rt=None):
        a = op.attrs
        x, y = g.t(op.inputs[0]), g.t(op.outputs[0])
        if "table" in a:
            return [a["table"][xs[0].astype(np.int64) + 128]]
        v = fp.multiply_by_quantized_multiplier(xs[0].astype(np.int64) - x.quant.zp, a["multiplier"], a["shift"])
        return [np.clip(np.asarray(v) + y.quant.zp, a["act_min"], a["act_max"]).astype(np.int8)]

    def describe(self, g: Graph, op: Op) -> str:
        x, y, a = g.t(op.inputs[0]), g.t(op.outputs[0]), op.attrs
        clamp = f" clamp [{a['clamp'][0]}, {a['clamp'][1]}]" if a.get("clamp") else ""
        return (f"REQUANTIZE {x.quant.s:.6g}/{x.quant.zp} -> {y.quant.s:.6g}/{y.quant.zp}{clamp}: "
                f"{list(x.shape)}")

    def c_context(self, g: Graph, op: Op, cg) -> dict:
        x, y = g.t(op.inputs[0]), g.t(op.outputs[0])
        return dict(x=x, y=y, in_offset=-x.quant.zp, out_offset=y.quant.zp, **op.attrs,
                    lut_values=cg.int_list(op.attrs["table"], 16) if "table" in op.attrs else "")

    c_decls = """\
{% if table is defined %}
static const int8_t {{n}}_table[256] = {{ '{' }}{{lut_values}}{{ '}' }};
{% endif %}"""
    c_call = """\
{% if table is defined %}
status = pockmcu_lut_s8({{ptr(x)}}, {{x.size}}, {{n}}_table, {{ptr(y)}});
{% else %}
status = pockmcu_requantize_s8({{ptr(x)}}, {{x.size}}, {{in_offset}}, {{multiplier}}, {{shift}}, {{out_offset}},
                               {{act_min}}, {{act_max}}, {{ptr(y)}});
{% endif %}"""


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

    def reference(self, g: Graph, op: Op, xs, rt=None):
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


@register
class AveragePoolRequant(OpDef):
    """AVERAGE_POOL_2D whose output has its own scale/zero point, in one rounding (onnxruntime's
    QLinearAveragePool): out = MultiplyByQuantizedMultiplier(sum(x - zp_in), QuantizeMultiplier(
    s_in / (s_out * count))) + zp_out over the in-bounds taps, clamped to the fused activation range."""

    kind = "AVERAGE_POOL_REQUANT"
    kernel = "pockmcu_avgpool_requant_s8"
    c_status = True

    def variant(self, g: Graph, op: Op, cg) -> str:
        return "ort_float" if "ort_dq" in op.attrs else ""

    def check(self, g: Graph, op: Op) -> list[str]:
        problems = super().check(g, op)
        if op.attrs.get("activation", "NONE") not in SUPPORTED_ACTIVATIONS:
            problems.append(op.attrs["activation"])
        return problems

    def prepare(self, g: Graph, op: Op) -> None:
        a = op.attrs
        x, y = g.t(op.inputs[0]), g.t(op.outputs[0])
        if "pads" not in a:
            a["pads"] = same_or_valid_pads(a["padding"], x.shape[1:3], a["filter"], a["stride"], (1, 1), y.shape[1:3])
        pairs = [fp.quantize_multiplier(float(x.quant.s) / (float(y.quant.s) * k))
                 for k in range(1, a["filter"][0] * a["filter"][1] + 1)]
        a["multipliers"] = np.array([m for m, _ in pairs], np.int32)
        a["shifts"] = np.array([s for _, s in pairs], np.int32)
        a["act_min"], a["act_max"] = fp.activation_range(a.get("activation", "NONE"), y.quant.s, y.quant.zp)
        if g.numerics == "onnxruntime":

            ort_pool_prepare(g, op)

    def reference(self, g: Graph, op: Op, xs, rt=None):
        if "ort_dq" in op.attrs:
            return [ort_pool_reference(g, op, xs)]
        a = op.attrs
        x, y = g.t(op.inputs[0]), g.t(op.outputs[0])
        total = np.zeros((xs[0].shape[0],) + y.shape[1:], np.int64)
        count = np.zeros((1,) + y.shape[1:3] + (1,), np.int64)
        for vals, valid in pool_taps(xs[0], *a["filter"], a["stride"], a["pads"], y.shape[1:3]):
            total += np.where(valid, vals - x.quant.zp, 0)
            count += valid
        idx = np.broadcast_to(count - 1, total.shape)
        out = fp.multiply_by_quantized_multiplier(total, a["multipliers"][idx], a["shifts"][idx]) + y.quant.zp
        return [np.clip(out, a["act_min"], a["act_max"]).astype(np.int8)]

    def describe(self, g: Graph, op: Op) -> str:
        a, x, y = op.attrs, g.t(op.inputs[0]), g.t(op.outputs[0])
        return (f"AVERAGE_POOL_REQUANT {a['filter'][0]}x{a['filter'][1]} stride {a['stride'][0]}x{a['stride'][1]} "
                f"{x.quant.s:.6g}/{x.quant.zp} -> {y.quant.s:.6g}/{y.quant.zp}: {list(x.shape)} -> {list(y.shape)}")

    def c_context(self, g: Graph, op: Op, cg) -> dict:
        a = op.attrs
        x, y = g.t(op.inputs[0]), g.t(op.outputs[0])

        return dict(x=x, y=y, stride=a["stride"], pads=a["pads"], filter=a["filter"], act_min=a["act_min"],
                    act_max=a["act_max"], in_offset=-x.quant.zp, out_offset=y.quant.zp, n_table=len(a["shifts"]),
                    multipliers=cg.int_list(a["multipliers"]), shifts=cg.int_list(a["shifts"]),
                    **(ort_pool_context(g, op, cg) if "ort_dq" in a else {"ort": False}))

    c_decls = """\
static const cmsis_nn_pool_params {{n}}_params = {
    .stride = {.w = {{stride[1]}}, .h = {{stride[0]}}}, .padding = {.w = {{pads[1]}}, .h = {{pads[0]}}},
    .activation = {.min = {{act_min}}, .max = {{act_max}}}};
static const cmsis_nn_dims {{n}}_input_dims = {{ dims(x.shape) }};
static const cmsis_nn_dims {{n}}_filter_dims = {{ '{' }}1, {{filter[0]}}, {{filter[1]}}, 1{{ '}' }};
static const cmsis_nn_dims {{n}}_output_dims = {{ dims(y.shape) }};
{% if ort %}
static const uint32_t {{n}}_dq[256] = {{ '{' }}{{dq_bits}}{{ '}' }};
{% else %}
static const int32_t {{n}}_multipliers[{{n_table}}] = {{ '{' }}{{multipliers}}{{ '}' }};
static const int32_t {{n}}_shifts[{{n_table}}] = {{ '{' }}{{shifts}}{{ '}' }};
{% endif %}
"""
    c_call = """\
{% if ort %}
status = pockmcu_avgpool_ort_s8(&{{n}}_params, &{{n}}_input_dims, {{ptr(x)}}, &{{n}}_filter_dims, &{{n}}_output_dims,
                                {{n}}_dq, {{scale_bits}}u, {{zp_bits}}u, {{zp_offset}}, {{ptr(y)}});
{% else %}
status = pockmcu_avgpool_requant_s8(&{{n}}_params, &{{n}}_input_dims, {{ptr(x)}}, &{{n}}_filter_dims,
                                    &{{n}}_output_dims, {{in_offset}}, {{out_offset}}, {{n}}_multipliers,
                                    {{n}}_shifts, {{ptr(y)}});
{% endif %}"""
