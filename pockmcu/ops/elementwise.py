"""ADD of two int8 tensors of the same shape, each with its own scale and zero point.

Semantics: TFLite Micro's int8 ADD: both inputs shifted left by 20, rescaled
by s_i / (2 max(s1, s2)), summed, rescaled by 2 max(s1, s2) / (2^20 s_out),
plus zp_out, clamped to the fused activation range.
"""

from __future__ import annotations

from .. import fixedpoint as fp
from ..ir import Graph, Op
from .base import POINTWISE, SUPPORTED_ACTIVATIONS, OpDef, Window, fused_activation, register


@register
class Add(OpDef):
    kind = "ADD"
    tflite_ops = ("ADD",)
    tflite_options = "AddOptions"
    kernel = "arm_elementwise_add_s8"
    may_share_input = (0, 1)  # element-wise in order: the output may overwrite a dying input
    c_status = True

    def parse_tflite(self, o, op: Op, tensors) -> None:
        op.attrs["activation"] = fused_activation(o.FusedActivationFunction()) if o else "NONE"

    def check(self, g: Graph, op: Op) -> list[str]:
        problems = super().check(g, op)
        if op.attrs["activation"] not in SUPPORTED_ACTIVATIONS:
            problems.append(op.attrs["activation"])
        a, b = (g.t(i) for i in op.inputs[:2])
        if a.shape != b.shape:
            problems.append(f"broadcasting ADD {list(a.shape)} + {list(b.shape)} (only equal shapes)")
        if a.is_const or b.is_const:
            problems.append("ADD with a constant operand")
        return problems

    def prepare(self, g: Graph, op: Op) -> None:
        a, b, y = g.t(op.inputs[0]), g.t(op.inputs[1]), g.t(op.outputs[0])
        op.attrs["q"] = fp.add_params(a.quant.s, a.quant.zp, b.quant.s, b.quant.zp, y.quant.s, y.quant.zp)
        op.attrs["act_min"], op.attrs["act_max"] = fp.activation_range(op.attrs["activation"], y.quant.s, y.quant.zp)

    def window(self, g: Graph, op: Op) -> Window:
        return POINTWISE

    def reference(self, g: Graph, op: Op, xs, rt=None):
        return [fp.add_s8(xs[0], xs[1], op.attrs["q"], op.attrs["act_min"], op.attrs["act_max"])]

    def backward(self, tb, op: Op) -> None:
        """y = a + b in real values (requantization is straight-through): both get dz; the second
        gets its own copy because later rules may mask gradients in place."""
        dz = tb.masked(op, tb.grad(op.outputs[0]))
        given = False
        for x in op.inputs[:2]:
            if not tb.needs_grad(x):
                continue
            if given:
                dx = tb.grad_tensor(x, f"{tb.short(x)}_grad_from_{op.name}")
                tb.emit("COPY_F32", f"{op.name}_grad_copy", [dz], [dx])
                tb.add_grad(x, dx)
            else:
                tb.add_grad(x, dz)
                given = True

    def c_context(self, g: Graph, op: Op, cg) -> dict:
        return dict(a=g.t(op.inputs[0]), b=g.t(op.inputs[1]), y=g.t(op.outputs[0]), q=op.attrs["q"],
                    act_min=op.attrs["act_min"], act_max=op.attrs["act_max"])

    c_call = """\
status = arm_elementwise_add_s8({{ptr(a)}}, {{ptr(b)}},
                                {{q.input1_offset}}, {{q.input1_multiplier}}, {{q.input1_shift}},
                                {{q.input2_offset}}, {{q.input2_multiplier}}, {{q.input2_shift}},
                                {{q.left_shift}}, {{ptr(y)}},
                                {{q.output_offset}}, {{q.output_multiplier}}, {{q.output_shift}},
                                {{act_min}}, {{act_max}}, {{y.size}});"""
