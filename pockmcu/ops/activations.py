"""SOFTMAX and LOGISTIC, int8 in, int8 out (scale 1/256, zero point -128).

Semantics: TFLite Micro's integer paths, built on gemmlowp fixed point:
SOFTMAX rescales (x - max) by beta * s_in into Q5.26, exponentiates with
exp_on_negative_values, normalizes with a fixed-point reciprocal; LOGISTIC
rescales x - zp into Q4.27 and evaluates gemmlowp::logistic. The numpy
versions live in pockmcu.fixedpoint, the C versions in kernels_c.
"""

from __future__ import annotations

from dataclasses import dataclass

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


@dataclass(frozen=True)
class SoftmaxOptions:
    """SOFTMAX over the last axis (the ONNX frontend brings the softmax axis last)."""

    beta: float = 1.0                 # TFLite's SoftmaxOptions.beta (ONNX: 1)
    #: onnxruntime numerics only (None with TFLite Micro's): True for QLinearSoftmax, False for a
    #: float Softmax that onnxruntime's graph optimizer leaves (pockmcu.fixedpoint_ort.ort_softmax)
    qlinear: bool | None = None
    onnx_zp_offset: int = 0           # 128 when the ONNX output is uint8 (onnxruntime adds the zero point in float)


@dataclass(frozen=True, eq=False)
class SoftmaxData:
    """The compile-time constants (TFLM's SoftmaxParams for int8, CalculateSoftmaxParams)."""

    mult: int                         # input_multiplier: beta * s_in * 2^26 as a Q31 multiplier ...
    left_shift: int                   # ... and its left shift
    diff_min: int                     # x - max below this gives exp 0
    #: onnxruntime numerics: onnxruntime's float32 exp table (256 entries), else None
    ort_table: np.ndarray | None = None


@register
class Softmax(OpDef):
    kind = "SOFTMAX"
    tflite_ops = ("SOFTMAX",)
    tflite_options = "SoftmaxOptions"
    Options = SoftmaxOptions
    kernel = "arm_softmax_s8"

    def variant(self, g: Graph, op: Op, cg) -> str:
        return "ort_float" if op.prepared.ort_table is not None else ""

    def parse_tflite(self, o, op: Op, tensors) -> SoftmaxOptions:
        return SoftmaxOptions(beta=float(o.Beta()) if o else 1.0)

    @staticmethod
    def _ort(g: Graph, op: Op) -> bool:
        """onnxruntime's softmax (any output quantization) rather than TFLite Micro's."""
        return g.numerics == "onnxruntime" and op.options.qlinear is not None

    def check(self, g: Graph, op: Op) -> list[str]:
        problems = super().check(g, op)
        if self._ort(g, op):
            return problems + ([] if op.options.beta == 1.0 else ["beta != 1"])
        return problems or _needs_q8_output(g, op)

    def prepare(self, g: Graph, op: Op) -> SoftmaxData:
        x = g.t(op.inputs[0])
        mult, left_shift, diff_min = fp.softmax_params(x.quant.s, op.options.beta)
        table = ort.ort_softmax_table(x.quant.s, x.shape[-1], op.options.qlinear) if self._ort(g, op) else None
        return SoftmaxData(mult, left_shift, diff_min, table)

    def reference(self, g: Graph, op: Op, xs, rt=None):
        o, p = op.options, op.prepared
        if p.ort_table is not None:
            y = g.t(op.outputs[0])
            return [ort.ort_softmax(xs[0], p.ort_table, y.quant.s, y.quant.zp + o.onnx_zp_offset,
                                    o.onnx_zp_offset == 128, o.qlinear)]
        return [fp.softmax_s8(xs[0], p.mult, p.left_shift, p.diff_min)]

    def c_context(self, g: Graph, op: Op, cg) -> dict:
        x, y, o, p = g.t(op.inputs[0]), g.t(op.outputs[0]), op.options, op.prepared
        ctx = dict(x=x, y=y, rows=x.size // x.shape[-1], row=x.shape[-1], ort=False, mult=p.mult,
                   left_shift=p.left_shift, diff_min=p.diff_min)
        if p.ort_table is not None:
            bits = [f"0x{int(b):08x}u" for b in ort.f32_bits(p.ort_table)]
            ys = np.float32(np.floor(np.float32(1.0) / np.float32(y.quant.scale[0]))) if o.qlinear \
                else np.float32(y.quant.scale[0])
            ctx.update(ort=True, table="\n    " + ",\n    ".join(", ".join(bits[i:i + 8]) for i in range(0, 256, 8)),
                       ys_bits=int(ort.f32_bits([ys])[0]), zp_onnx=y.quant.zp + o.onnx_zp_offset,
                       uint8=int(o.onnx_zp_offset == 128), qlinear=int(o.qlinear))
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


@dataclass(frozen=True)
class LogisticData:
    """The compile-time constants (TFLM's CalculateArithmeticOpDataLogistic for int8)."""

    q: dict                           # fixedpoint.logistic_params: input offset, range radius, multiplier, shift


@register
class Logistic(OpDef):
    kind = "LOGISTIC"
    tflite_ops = ("LOGISTIC",)
    kernel = "pockmcu_logistic_s8"
    c_status = True

    def check(self, g: Graph, op: Op) -> list[str]:
        problems = super().check(g, op)
        return problems or _needs_q8_output(g, op)

    def prepare(self, g: Graph, op: Op) -> LogisticData:
        x = g.t(op.inputs[0])
        return LogisticData(fp.logistic_params(x.quant.s, x.quant.zp))

    def reference(self, g: Graph, op: Op, xs, rt=None):
        return [fp.logistic_s8(xs[0], op.prepared.q)]

    def c_context(self, g: Graph, op: Op, cg) -> dict:
        return dict(x=g.t(op.inputs[0]), y=g.t(op.outputs[0]), q=op.prepared.q)

    c_call = """\
status = pockmcu_logistic_s8({{ptr(x)}}, {{x.size}}, {{q.input_offset}}, {{q.input_range_radius}},
                             {{q.input_multiplier}}, {{q.input_left_shift}}, {{ptr(y)}});"""
