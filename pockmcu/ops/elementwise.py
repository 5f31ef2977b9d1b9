"""ADD of two int8 tensors, each with its own scale and zero point: equal shapes, or any two
NumPy-broadcastable shapes (rank <= 5), either operand may be a constant (a flash array).

Semantics: TFLite Micro's int8 ADD: both inputs shifted left by 20, rescaled
by s_i / (2 max(s1, s2)), summed, rescaled by 2 max(s1, s2) / (2^20 s_out),
plus zp_out, clamped to the fused activation range. Broadcasting (BroadcastAdd6DSlow) applies the
same arithmetic at broadcast indices. Equal shapes call CMSIS-NN's arm_elementwise_add_s8 (the
kernel table's general row); other shapes pockmcu_add_broadcast_s8 (its "broadcast" row), with the
broadcasting helpers of pockmcu/ops/binary.py. The gradient sums dz over each operand's broadcast axes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import fixedpoint as fp
from ..ccode import Array, Call, Emission, Local, Ptr
from ..ir import Graph, Op
from .base import SUPPORTED_ACTIVATIONS, OpDef, Window, fused_activation, register
from .binary import add_reduced_grad, broadcast_problems, broadcast_window, dims15, operand_values, same_shape_inputs


@dataclass(frozen=True)
class AddOptions:
    activation: str = "NONE"          # the fused activation (base.ACTIVATIONS)


@dataclass(frozen=True)
class AddData:
    """The compile-time constants (TFLM's OpDataAdd for int8, CalculateOpDataAdd)."""

    q: dict                           # fixedpoint.add_params: offsets, left shift, multipliers and shifts
    act_min: int                      # the fused activation's clamp range in the output's int8 values
    act_max: int
    dims: tuple = ()                  # broadcasting shapes: the kernel's dims array (binary.dims15)


@register
class Add(OpDef):
    kind = "ADD"
    tflite_ops = ("ADD",)
    tflite_options = "AddOptions"
    Options = AddOptions
    operands = ("input1", "input2")
    kernel = "arm_elementwise_add_s8"
    may_share_input = (0, 1)  # element-wise in order: the output may overwrite a dying input

    def parse_tflite(self, o, op: Op, tensors) -> AddOptions:
        return AddOptions(activation=fused_activation(o.FusedActivationFunction()) if o else "NONE")

    def check(self, g: Graph, op: Op) -> list[str]:
        problems = super().check(g, op)
        if op.options.activation not in SUPPORTED_ACTIVATIONS:
            problems.append(op.options.activation)
        if problems:
            return problems
        problems = broadcast_problems(g, op, 5)
        if problems:
            return problems
        a, b, y = (g.t(i) for i in (*op.inputs[:2], op.outputs[0]))
        if a.quant.per_channel or b.quant.per_channel or y.quant.per_channel:
            return ["per-channel activation quantization"]
        try:
            fp.add_params(a.quant.s, a.quant.zp, b.quant.s, b.quant.zp, y.quant.s, y.quant.zp)
        except ValueError:
            return [f"scales {a.quant.s:.6g}, {b.quant.s:.6g} -> {y.quant.s:.6g} give a rescale TFLite Micro "
                    "cannot represent; requantize the model"]
        return []

    def variant(self, g: Graph, op: Op, cg) -> str:
        return "broadcast" if self._broadcasts(g, op) else ""

    @staticmethod
    def _broadcasts(g: Graph, op: Op) -> bool:
        a, b, y = (g.t(i) for i in (*op.inputs[:2], op.outputs[0]))
        return not (a.shape == b.shape == y.shape)

    def shared_inputs(self, g: Graph, op: Op) -> tuple[int, ...]:
        return same_shape_inputs(g, op)

    def prepare(self, g: Graph, op: Op) -> AddData:
        a, b, y = g.t(op.inputs[0]), g.t(op.inputs[1]), g.t(op.outputs[0])
        q = fp.add_params(a.quant.s, a.quant.zp, b.quant.s, b.quant.zp, y.quant.s, y.quant.zp)
        dims = dims15(y.shape, a.shape, b.shape) if self._broadcasts(g, op) else ()
        return AddData(q, *fp.activation_range(op.options.activation, y.quant.s, y.quant.zp), dims)

    def window(self, g: Graph, op: Op) -> Window | None:
        return broadcast_window(g, op)

    def reference(self, g: Graph, op: Op, xs, rt=None):
        p, y = op.prepared, g.t(op.outputs[0])
        out = fp.add_s8(*operand_values(g, op, xs), p.q, p.act_min, p.act_max)
        return [np.ascontiguousarray(out.reshape((out.shape[0],) + tuple(y.shape[1:])))]

    def backward(self, tb, op: Op) -> None:
        """y = a + b in real values (requantization is straight-through): both get dz; the second
        gets its own copy because later rules may mask gradients in place. An operand broadcast
        along some axes gets dz summed over them (BROADCAST_GRAD)."""
        dz = tb.masked(op, tb.grad(op.outputs[0]))
        given = False
        for k, x in enumerate(op.inputs[:2]):
            if not tb.needs_grad(x):
                continue
            if tb.g.t(x).shape != tb.g.t(op.outputs[0]).shape:
                add_reduced_grad(tb, op, k, dz, coef=1.0)
            elif given:
                dx = tb.grad_tensor(x, f"{tb.short(x)}_grad_from_{op.name}")
                tb.emit("COPY_F32", f"{op.name}_grad_copy", [dz], [dx])
                tb.add_grad(x, dx)
            else:
                tb.add_grad(x, dz)
                given = True

    def emit(self, g: Graph, op: Op, cg) -> Emission:
        p, q = op.prepared, op.prepared.q
        a, b, y = op.inputs[0], op.inputs[1], op.outputs[0]
        if p.dims:
            return Emission(decls=(Array("dims", "int32_t", p.dims, comment="output shape, input1 strides, "
                                         "input2 strides"),), calls=(Call(cg.kernel(op).function, (
                Ptr(a), Ptr(b), Local("dims", address=False),
                q["input1_offset"], q["input1_multiplier"], q["input1_shift"],
                q["input2_offset"], q["input2_multiplier"], q["input2_shift"], q["left_shift"], Ptr(y),
                q["output_offset"], q["output_multiplier"], q["output_shift"], p.act_min, p.act_max), status=True),))
        return Emission(calls=(Call(cg.kernel(op).function, (
            Ptr(a), Ptr(b),
            q["input1_offset"], q["input1_multiplier"], q["input1_shift"],
            q["input2_offset"], q["input2_multiplier"], q["input2_shift"],
            q["left_shift"], Ptr(y),
            q["output_offset"], q["output_multiplier"], q["output_shift"],
            p.act_min, p.act_max, g.t(y).size), status=True),))
