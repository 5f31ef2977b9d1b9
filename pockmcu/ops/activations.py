"""SOFTMAX and LOGISTIC, int8 in, int8 out (scale 1/256, zero point -128).

Semantics: TFLite Micro's integer paths, built on gemmlowp fixed point:
SOFTMAX rescales (x - max) by beta * s_in into Q5.26, exponentiates with
exp_on_negative_values, normalizes with a fixed-point reciprocal; LOGISTIC
rescales x - zp into Q4.27 and evaluates gemmlowp::logistic. The numpy
versions live in pockmcu.fixedpoint, the C versions in kernels_c.
"""

from __future__ import annotations

import numpy as np

from .. import fixedpoint as fp
from .. import fixedpoint_ort as ort
from ..ir import Graph, Op
from .base import OpDef, register


def _needs_q8_output(g: Graph, op: Op) -> list[str]:
    y = g.t(op.outputs[0])
    if y.quant is not None and (abs(y.quant.s - 1 / 256) > 1e-9 or y.quant.zp != -128):
        return [f"output '{y.name}' must have scale 1/256 and zero point -128 (has {y.quant.s}, {y.quant.zp})"]
    return []


@register
class Softmax(OpDef):
    kind = "SOFTMAX"
    tflite_ops = ("SOFTMAX",)
    tflite_options = "SoftmaxOptions"
    kernel = "arm_softmax_s8"

    def variant(self, g: Graph, op: Op, cg) -> str:
        return "ort_float" if "ort_table" in op.attrs else ""

    def parse_tflite(self, o, op: Op, tensors) -> None:
        op.attrs["beta"] = float(o.Beta()) if o else 1.0

    def check(self, g: Graph, op: Op) -> list[str]:
        problems = super().check(g, op)
        if g.numerics == "onnxruntime" and "qlinear" in op.attrs:   # any output quantization
            return problems + ([] if op.attrs.get("beta", 1.0) == 1.0 else ["beta != 1"])
        return problems or _needs_q8_output(g, op)

    def prepare(self, g: Graph, op: Op) -> None:
        x = g.t(op.inputs[0])
        op.attrs["mult"], op.attrs["left_shift"], op.attrs["diff_min"] = fp.softmax_params(x.quant.s, op.attrs["beta"])
        if g.numerics == "onnxruntime" and "qlinear" in op.attrs:
            op.attrs["ort_table"] = ort.ort_softmax_table(x.quant.s, x.shape[-1], op.attrs["qlinear"])
            op.attrs["ort_zp_offset"] = int(op.attrs.get("onnx_zp_offset", 0))

    def reference(self, g: Graph, op: Op, xs, rt=None):
        a = op.attrs
        if "ort_table" in a:
            y = g.t(op.outputs[0])
            return [ort.ort_softmax(xs[0], a["ort_table"], y.quant.s, y.quant.zp + a["ort_zp_offset"],
                                   a["ort_zp_offset"] == 128, a["qlinear"])]
        return [fp.softmax_s8(xs[0], a["mult"], a["left_shift"], a["diff_min"])]

    def c_context(self, g: Graph, op: Op, cg) -> dict:
        x, y, a = g.t(op.inputs[0]), g.t(op.outputs[0]), op.attrs
        ctx = dict(x=x, y=y, rows=x.size // x.shape[-1], row=x.shape[-1], ort=False, **a)
        if "ort_table" in a:
            bits = [f"0x{int(b):08x}u" for b in ort.f32_bits(a["ort_table"])]
            ys = np.float32(np.floor(np.float32(1.0) / np.float32(y.quant.scale[0]))) if a["qlinear"] \
                else np.float32(y.quant.scale[0])
            ctx.update(ort=True, table="\n    " + ",\n    ".join(", ".join(bits[i:i + 8]) for i in range(0, 256, 8)),
                       ys_bits=int(ort.f32_bits([ys])[0]), zp_onnx=y.quant.zp + a["ort_zp_offset"],
                       uint8=int(a["ort_zp_offset"] == 128), qlinear=int(a["qlinear"]))
        return ctx

    c_decls = """\
{% if ort %}
static const uint32_t {{n}}_exp_table[256] = {{ '{' }}{{table}}
{{ '}' }};
{% endif %}"""
    c_call = """\
{% if ort %}
pockmcu_softmax_ort_s8({{ptr(x)}}, {{rows}}, {{row}}, {{n}}_exp_table, {{ys_bits}}u, {{zp_onnx}}, {{uint8}}, {{qlinear}},
                       {{ptr(y)}});
{% else %}
arm_softmax_s8({{ptr(x)}}, {{rows}}, {{row}}, {{mult}}, {{left_shift}}, {{diff_min}}, {{ptr(y)}});
{% endif %}"""


@register
class Logistic(OpDef):
    kind = "LOGISTIC"
    tflite_ops = ("LOGISTIC",)
    kernel = "pockmcu_logistic_s8"
    c_status = True

    def check(self, g: Graph, op: Op) -> list[str]:
        problems = super().check(g, op)
        return problems or _needs_q8_output(g, op)

    def prepare(self, g: Graph, op: Op) -> None:
        x = g.t(op.inputs[0])
        op.attrs["q"] = fp.logistic_params(x.quant.s, x.quant.zp)

    def reference(self, g: Graph, op: Op, xs, rt=None):
        return [fp.logistic_s8(xs[0], op.attrs["q"])]

    def c_context(self, g: Graph, op: Op, cg) -> dict:
        return dict(x=g.t(op.inputs[0]), y=g.t(op.outputs[0]), q=op.attrs["q"])

    c_call = """\
status = pockmcu_logistic_s8({{ptr(x)}}, {{x.size}}, {{q.input_offset}}, {{q.input_range_radius}},
                             {{q.input_multiplier}}, {{q.input_left_shift}}, {{ptr(y)}});"""
