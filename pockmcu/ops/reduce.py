"""MEAN of an int8 NHWC tensor over its spatial axes (1, 2), with or without keep_dims.

Semantics: TFLite Micro's integer MEAN (reduce_common.cc): the sum over the
axes, then a multiplier/shift that folds 1/count and s_in / s_out, exactly as
TFLM computes them in Prepare; see pockmcu.fixedpoint.mean_params.
"""

from __future__ import annotations

import numpy as np

from .. import fixedpoint as fp
from ..ir import Graph, Op
from .base import OpDef, register


@register
class Mean(OpDef):
    kind = "MEAN"
    tflite_ops = ("MEAN",)
    tflite_options = "ReducerOptions"
    kernel = "pockmcu_mean_s8"
    c_status = True

    def parse_tflite(self, o, op: Op, tensors) -> None:
        op.attrs["keep_dims"] = bool(o.KeepDims()) if o else False

    def activation_inputs(self, g: Graph, op: Op) -> list[str]:
        return [op.inputs[0]]

    def check(self, g: Graph, op: Op) -> list[str]:
        problems = super().check(g, op)
        x = g.t(op.inputs[0])
        axes_t = g.t(op.inputs[1])
        if axes_t.data is None:
            return problems + ["MEAN with non-constant axes"]
        axes = sorted(int(a) % len(x.shape) for a in axes_t.data.reshape(-1))
        if len(x.shape) != 4 or axes != [1, 2]:
            problems.append(f"MEAN over axes {axes} of a rank-{len(x.shape)} tensor (only axes 1, 2 of NHWC)")
        return problems

    def prepare(self, g: Graph, op: Op) -> None:
        x, y = g.t(op.inputs[0]), g.t(op.outputs[0])
        op.attrs["q"] = fp.mean_params(x.quant.s, x.quant.zp, y.quant.s, y.quant.zp, x.shape[1] * x.shape[2])
        if g.numerics == "onnxruntime":
            # QLinearGlobalAveragePool: scale = float32(s_in / (s_out * float32(count)))
            n = np.float32(x.shape[1] * x.shape[2])
            scale = np.float32(x.quant.scale[0]) / np.float32(np.float32(y.quant.scale[0]) * n)
            m, e = fp.f32_mant_exp(scale)
            op.attrs["q"].update(ort_mant=int(m[0]), ort_exp=int(e[0]))

    def reference(self, g: Graph, op: Op, xs):
        if g.numerics == "onnxruntime":   # RoundHalfEven(float32(float32(sum - zp * count) * scale)) + zp_out
            q, x = op.attrs["q"], xs[0].astype(np.int64)
            acc = x.sum(axis=(1, 2), keepdims=True) - q["input_zero_point"] * x.shape[1] * x.shape[2]
            out = np.clip(fp.requantize_ort(acc, q["ort_mant"], q["ort_exp"]) + q["output_zero_point"], -128, 127)
            return [out.astype(np.int8).reshape((xs[0].shape[0],) + g.t(op.outputs[0]).shape[1:])]
        out = fp.mean_s8(xs[0], (1, 2), op.attrs["keep_dims"], op.attrs["q"])
        return [out.reshape((xs[0].shape[0],) + g.t(op.outputs[0]).shape[1:])]

    def c_context(self, g: Graph, op: Op, cg) -> dict:
        return dict(x=g.t(op.inputs[0]), y=g.t(op.outputs[0]), q=op.attrs["q"], ort=g.numerics == "onnxruntime")

    def backward(self, tb, op: Op) -> None:
        x = op.inputs[0]
        dx = tb.grad_tensor(x, f"{tb.short(x)}_grad_from_{op.name}")
        tb.emit("MEAN_GRAD", f"{op.name}_grad", [tb.grad(op.outputs[0])], [dx], layer=op)
        tb.add_grad(x, dx)

    c_decls = """\
static const cmsis_nn_dims {{n}}_input_dims = {{ dims(x.shape) }};
"""
    c_call = """\
{% if ort %}
status = pockmcu_mean_ort_s8(&{{n}}_input_dims, {{ptr(x)}}, {{q.input_offset}}, {{q.output_offset}},
                             {{q.ort_mant}}, {{q.ort_exp}}, {{ptr(y)}});
{% else %}
status = pockmcu_mean_s8(&{{n}}_input_dims, {{ptr(x)}}, {{q.input_offset}}, {{q.output_offset}},
                         {{q.multiplier}}, {{q.shift}}, {{ptr(y)}});
{% endif %}"""


@register
class MeanGrad(OpDef):
    """d mean / d x = 1 / (H W) for every position (real domain)."""

    kind = "MEAN_GRAD"
    kernel = "pockmcu_mean_grad_f32"
    io_dtypes = ("float32",)

    def reference(self, g: Graph, op: Op, xs):
        f = op.attrs["layer"]
        shape = (xs[0].shape[0],) + g.t(f.inputs[0]).shape[1:]
        dy = xs[0].reshape(shape[0], 1, 1, shape[3]).astype(np.float64)
        return [np.broadcast_to(dy / (shape[1] * shape[2]), shape).copy()]

    def c_context(self, g: Graph, op: Op, cg) -> dict:
        return dict(layer=op.attrs["layer"].name, dy=g.t(op.inputs[0]), dx=g.t(op.outputs[0]))

    c_call = "pockmcu_mean_grad_f32(&{{layer}}_input_dims, {{ptr(dy)}}, {{ptr(dx)}});"
