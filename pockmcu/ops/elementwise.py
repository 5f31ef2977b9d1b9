"""ADD of two int8 tensors of the same shape, each with its own scale and zero point.

Semantics: TFLite Micro's int8 ADD: both inputs shifted left by 20, rescaled
by s_i / (2 max(s1, s2)), summed, rescaled by 2 max(s1, s2) / (2^20 s_out),
plus zp_out, clamped to the fused activation range.
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import fixedpoint as fp
from ..ccode import Call, Emission, Ptr
from ..ir import Graph, Op
from .base import POINTWISE, SUPPORTED_ACTIVATIONS, OpDef, Window, fused_activation, register


@dataclass(frozen=True)
class AddOptions:
    activation: str = "NONE"          # the fused activation (base.ACTIVATIONS)


@dataclass(frozen=True)
class AddData:
    """The compile-time constants (TFLM's OpDataAdd for int8, CalculateOpDataAdd)."""

    q: dict                           # fixedpoint.add_params: offsets, left shift, multipliers and shifts
    act_min: int                      # the fused activation's clamp range in the output's int8 values
    act_max: int


@register
class Add(OpDef):
    kind = "ADD"
    tflite_ops = ("ADD",)
    tflite_options = "AddOptions"
    Options = AddOptions
    operands = ("input1", "input2")
    kernel = "arm_elementwise_add_s8"
    may_share_input = (0, 1)  # element-wise in order: the output may overwrite a dying input
    c_status = True

    def parse_tflite(self, o, op: Op, tensors) -> AddOptions:
        return AddOptions(activation=fused_activation(o.FusedActivationFunction()) if o else "NONE")

    def check(self, g: Graph, op: Op) -> list[str]:
        problems = super().check(g, op)
        if op.options.activation not in SUPPORTED_ACTIVATIONS:
            problems.append(op.options.activation)
        a, b = (g.t(i) for i in op.inputs[:2])
        if a.shape != b.shape:
            problems.append(f"broadcasting ADD {list(a.shape)} + {list(b.shape)} (only equal shapes)")
        if a.is_const or b.is_const:
            problems.append("ADD with a constant operand")
        return problems

    def prepare(self, g: Graph, op: Op) -> AddData:
        a, b, y = g.t(op.inputs[0]), g.t(op.inputs[1]), g.t(op.outputs[0])
        q = fp.add_params(a.quant.s, a.quant.zp, b.quant.s, b.quant.zp, y.quant.s, y.quant.zp)
        return AddData(q, *fp.activation_range(op.options.activation, y.quant.s, y.quant.zp))

    def window(self, g: Graph, op: Op) -> Window:
        return POINTWISE

    def reference(self, g: Graph, op: Op, xs, rt=None):
        p = op.prepared
        return [fp.add_s8(xs[0], xs[1], p.q, p.act_min, p.act_max)]

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

    def emit(self, g: Graph, op: Op, cg) -> Emission:
        p, q = op.prepared, op.prepared.q
        a, b, y = op.inputs[0], op.inputs[1], op.outputs[0]
        return Emission(calls=(Call(cg.kernel(op).function, (
            Ptr(a), Ptr(b),
            q["input1_offset"], q["input1_multiplier"], q["input1_shift"],
            q["input2_offset"], q["input2_multiplier"], q["input2_shift"],
            q["left_shift"], Ptr(y),
            q["output_offset"], q["output_multiplier"], q["output_shift"],
            p.act_min, p.act_max, g.t(y).size), status=True),))
