"""MEAN of an int8 NHWC tensor over its spatial axes (1, 2), with or without keep_dims.

Semantics: TFLite Micro's integer MEAN (reduce_common.cc): the sum over the
axes, then a multiplier/shift that folds 1/count and s_in / s_out, exactly as
TFLM computes them in Prepare; see pockmcu.fixedpoint.mean_params.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import fixedpoint as fp
from .. import fixedpoint_ort as ort
from ..ir import Graph, Op
from .base import OpDef, opdef, operand, register
from .conv import weight_scales


@dataclass(frozen=True)
class MeanOptions:
    keep_dims: bool = False


@dataclass(frozen=True)
class MeanData:
    """The requantization of the spatial mean (fixedpoint.mean_params; onnxruntime: ort_mant, ort_exp)."""

    q: dict


@dataclass(frozen=True, eq=False)
class MeanGradOptions:
    layer: Op
    spatial_mean: bool = True          # the gradient is the output gradient / (H W) at every position


@dataclass(frozen=True, eq=False)
class FusedMeanGradOptions:
    layer: Op                          # the 1x1 CONV_2D
    bias: str | None                   # its trained bias tensor, or None
    coef: np.ndarray                   # the bias update's QAS coefficients


@register
class Mean(OpDef):
    kind = "MEAN"
    Options = MeanOptions
    operands = ("input", "axes")
    tflite_ops = ("MEAN",)
    tflite_options = "ReducerOptions"
    kernel = "pockmcu_mean_s8"
    c_status = True

    def parse_tflite(self, o, op: Op, tensors) -> MeanOptions:
        return MeanOptions(keep_dims=bool(o.KeepDims()) if o else False)

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

    def prepare(self, g: Graph, op: Op) -> MeanData:
        x, y = g.t(op.inputs[0]), g.t(op.outputs[0])
        q = fp.mean_params(x.quant.s, x.quant.zp, y.quant.s, y.quant.zp, x.shape[1] * x.shape[2])
        if g.numerics == "onnxruntime":
            # QLinearGlobalAveragePool: scale = float32(s_in / (s_out * float32(count)))
            n = np.float32(x.shape[1] * x.shape[2])
            scale = np.float32(x.quant.scale[0]) / np.float32(np.float32(y.quant.scale[0]) * n)
            m, e = ort.f32_mant_exp(scale)
            q.update(ort_mant=int(m[0]), ort_exp=int(e[0]))
        return MeanData(q)

    def reference(self, g: Graph, op: Op, xs, rt=None):
        if g.numerics == "onnxruntime":   # RoundHalfEven(float32(float32(sum - zp * count) * scale)) + zp_out
            q, x = op.prepared.q, xs[0].astype(np.int64)
            acc = x.sum(axis=(1, 2), keepdims=True) - q["input_zero_point"] * x.shape[1] * x.shape[2]
            out = np.clip(ort.requantize_ort(acc, q["ort_mant"], q["ort_exp"]) + q["output_zero_point"], -128, 127)
            return [out.astype(np.int8).reshape((xs[0].shape[0],) + g.t(op.outputs[0]).shape[1:])]
        out = fp.mean_s8(xs[0], (1, 2), op.options.keep_dims, op.prepared.q)
        return [out.reshape((xs[0].shape[0],) + g.t(op.outputs[0]).shape[1:])]

    def c_context(self, g: Graph, op: Op, cg) -> dict:
        return dict(x=g.t(op.inputs[0]), y=g.t(op.outputs[0]), q=op.prepared.q, ort=g.numerics == "onnxruntime")

    def backward(self, tb, op: Op) -> None:
        x = op.inputs[0]
        dx = tb.grad_tensor(x, f"{tb.short(x)}_grad_from_{op.name}")
        tb.emit("MEAN_GRAD", f"{op.name}_grad", [tb.grad(op.outputs[0])], [dx], layer=op, spatial_mean=True)
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
    Options = MeanGradOptions
    kernel = "pockmcu_mean_grad_f32"
    io_dtypes = ("float32",)

    def reference(self, g: Graph, op: Op, xs, rt=None):
        f = op.options.layer
        shape = (xs[0].shape[0],) + g.t(f.inputs[0]).shape[1:]
        dy = xs[0].reshape(shape[0], 1, 1, shape[3]).astype(np.float64)
        return [np.broadcast_to(dy / (shape[1] * shape[2]), shape).copy()]

    def c_context(self, g: Graph, op: Op, cg) -> dict:
        return dict(layer=op.options.layer.name, dy=g.t(op.inputs[0]), dx=g.t(op.outputs[0]))

    c_call = "pockmcu_mean_grad_f32(&{{layer}}_input_dims, {{ptr(dy)}}, {{ptr(dx)}});"


@register
class Conv1x1GradFromMean(OpDef):
    """The backward of a 1x1 CONV_2D whose output only feeds a spatial mean (MEAN, or an average
    pool whose one window is the whole input), fused so that the mean's broadcast gradient
    (N x H x W x C_out floats; 80 KB for MobileNetV2's last conv at 4x4x1280) never exists: the
    kernel forms (mask ? g / (H W) : 0) where the bias update and the input gradient read it, with
    the float operations of the unfused MEAN_GRAD, MASK_APPLY, BIAS_UPDATE and CONV_2D_GRAD_INPUT
    in their order (bit-identical). Emitted by the conv's gradient rule (conv.param_backward).

    inputs: [the mean's output gradient, the conv's output mask]; outputs: [input gradient] or none;
    options: FusedMeanGradOptions."""

    kind = "CONV_1X1_GRAD_FROM_MEAN"
    Options = FusedMeanGradOptions
    kernel = "pockmcu_conv_1x1_grad_from_mean_f32"
    c_status = True
    io_dtypes = ("float32", "uint8")

    def macs(self, g: Graph, op: Op) -> int:
        """The input gradient's MACs (the fused 1x1 conv's forward MACs), when it is formed."""
        f = op.options.layer
        return opdef(f.kind).macs(g, f) if op.outputs else 0

    def reference(self, g: Graph, op: Op, xs, rt=None):
        """The unfused ops' references in their order: broadcast / (H W), mask, bias update, input
        gradient (this op's options carry what they read: layer, bias, coef)."""
        gm, mask = xs
        shape = g.t(op.options.layer.outputs[0]).shape
        dy = np.broadcast_to(gm.reshape(gm.shape[0], 1, 1, shape[-1]).astype(np.float64) / (shape[1] * shape[2]),
                             (gm.shape[0],) + tuple(shape[1:]))
        (dz,) = opdef("MASK_APPLY").reference(g, op, [dy, mask])
        if op.options.bias is not None:
            opdef("BIAS_UPDATE").reference(g, op, [dz], rt)
        return opdef("CONV_2D_GRAD_INPUT").reference(g, op, [dz]) if op.outputs else []

    def c_context(self, g: Graph, op: Op, cg) -> dict:
        f = op.options.layer
        bias = op.options.bias
        opt = cg.optimizer_args(bias) if bias else dict(accum="NULL", velocity="NULL", rng="NULL")
        return dict(layer=f.name, gm=g.t(op.inputs[0]), mask=g.t(op.inputs[1]), y=g.t(f.outputs[0]),
                    weights=cg.const(operand(f, "weights")), scales=cg.float_list(weight_scales(g, f)),
                    bias=cg.param(bias) if bias else "NULL", coef=cg.float_list(op.options.coef) if bias else "",
                    dx=g.t(op.outputs[0]) if op.outputs else None, **opt)

    c_decls = """static const float {{n}}_filter_scale[{{y.shape[-1]}}] = {{ '{' }}{{scales}}{{ '}' }};
{% if bias != "NULL" %}
static const float {{n}}_coef[{{y.shape[-1]}}] = {{ '{' }}{{coef}}{{ '}' }};
{% endif %}
"""
    c_call = """status = pockmcu_conv_1x1_grad_from_mean_f32(&{{layer}}_output_dims, {{ptr(gm)}}, {{ptr(mask)}},
                                             &{{layer}}_filter_dims, {{weights}}, {{n}}_filter_scale,
                                             {{bias}}, {{n + "_coef" if bias != "NULL" else "NULL"}}, {{accum}},
                                             {{velocity}}, &train.optimizer, {{rng}},
                                             {{ptr(dx) if dx else "NULL"}});"""
