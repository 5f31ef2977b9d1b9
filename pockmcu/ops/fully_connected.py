"""FULLY_CONNECTED, int8, per-tensor or per-channel weights [out, in].

Semantics: TFLite Micro reference_integer_ops::FullyConnected. The input is
read as [batches, in] whatever its rank. Per-tensor: the multiplier comes from
the float32 product s_in * s_w, widened to double, divided by s_out (that is
how TFLM's GetQuantizedConvolutionMultipler computes it, and it matters for
bit-exactness); per-channel: double products, like CONV_2D.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import fixedpoint as fp
from .. import fixedpoint_ort as ort
from ..ir import Graph, Op
from .base import SUPPORTED_ACTIVATIONS, OpDef, fused_activation, operand, register
from .conv import WeightUpdate, _GradOp, finish, param_backward, weight_scales
from .training_ops import sgd_update


@dataclass(frozen=True)
class FullyConnectedOptions:
    activation: str = "NONE"            # fused: NONE, RELU, RELU6, RELU_N1_TO_1
    keep_num_dims: bool = False
    weights_format: int = 0             # TFLite: 0 = default; shuffled formats are refused


@dataclass(frozen=True, eq=False)
class FullyConnectedData:
    """What Prepare computes (TFLite Micro's OpDataFullyConnected)."""

    multiplier: np.ndarray              # int32, one (per tensor) or per output channel
    shift: np.ndarray
    act_min: int
    act_max: int
    in_features: int                    # D: the input is read as [batches, D]
    batches: int


@register
class FullyConnected(OpDef):
    kind = "FULLY_CONNECTED"
    Options = FullyConnectedOptions
    operands = ("input", "weights", "bias")
    tflite_ops = ("FULLY_CONNECTED",)
    tflite_options = "FullyConnectedOptions"
    kernel = "arm_fully_connected_s8"
    c_status = True

    def parse_tflite(self, o, op: Op, tensors) -> FullyConnectedOptions:
        if o is None:
            return FullyConnectedOptions()
        return FullyConnectedOptions(activation=fused_activation(o.FusedActivationFunction()),
                                     keep_num_dims=bool(o.KeepNumDims()), weights_format=int(o.WeightsFormat()))

    def check(self, g: Graph, op: Op) -> list[str]:
        problems = super().check(g, op)
        a = op.options
        if a.activation not in SUPPORTED_ACTIVATIONS:
            problems.append(a.activation)
        if a.weights_format != 0:
            problems.append("shuffled FULLY_CONNECTED weights format")
        w = g.t(operand(op, "weights"))
        if w.dtype != "int8" or w.data is None:
            problems.append(f"weights '{w.name}' are {w.dtype}{'' if w.is_const else ' and not constant'} (need constant int8)")
        elif w.quant is None:
            problems.append(f"weights '{w.name}' have no quantization")
        elif w.quant.per_channel and np.any(w.quant.zero_point != 0):
            problems.append(f"per-channel weights '{w.name}' need zero point 0")
        if operand(op, "bias"):
            b = g.t(operand(op, "bias"))
            if b.dtype != "int32" or b.data is None:
                problems.append(f"bias '{b.name}' is {b.dtype} (need constant int32)")
        return problems

    def prepare(self, g: Graph, op: Op) -> FullyConnectedData:
        x, w, y = g.t(op.inputs[0]), g.t(operand(op, "weights")), g.t(op.outputs[0])
        if g.numerics == "onnxruntime":     # float32 scale as mantissa/exponent (fixedpoint_ort.requantize_ort)
            ws = w.quant.scale if w.quant.per_channel else w.quant.scale[:1]
            pairs = list(zip(*ort.ort_output_scales(x.quant.s, ws, y.quant.s)))
        elif w.quant.per_channel:
            pairs = [fp.quantize_multiplier(float(x.quant.s) * float(s) / float(y.quant.s)) for s in w.quant.scale]
        else:
            product = np.float32(x.quant.scale[0]) * np.float32(w.quant.scale[0])   # float32, as TFLM
            pairs = [fp.quantize_multiplier(float(product) / float(y.quant.s))]
        act_min, act_max = fp.activation_range(op.options.activation, y.quant.s, y.quant.zp)
        return FullyConnectedData(np.array([p[0] for p in pairs], np.int32), np.array([p[1] for p in pairs], np.int32),
                                  act_min, act_max, w.shape[1], x.size // w.shape[1])

    def reference(self, g: Graph, op: Op, xs, rt=None):
        x = xs[0]
        n = x.shape[0]
        w = g.t(operand(op, "weights"))
        xin = x.reshape(n * op.prepared.batches, w.shape[1]).astype(np.float64) - g.t(op.inputs[0]).quant.zp
        wf = w.data.astype(np.float64) - (0 if w.quant.per_channel else w.quant.zp)
        acc = xin @ wf.T
        out = finish(acc, op, g)
        return [out.reshape((n,) + g.t(op.outputs[0]).shape[1:])]

    def macs(self, g: Graph, op: Op) -> int:
        w = g.t(operand(op, "weights"))
        return int(w.shape[0] * w.shape[1] * (g.t(op.inputs[0]).size // w.shape[1]))

    def backward(self, tb, op: Op) -> None:
        param_backward(tb, op, "FULLY_CONNECTED_GRAD_INPUT", "FULLY_CONNECTED_WGRAD_UPDATE", in_rows=fc_rows)

    def describe(self, g: Graph, op: Op) -> str:
        w = g.t(operand(op, "weights"))
        return (f"FULLY_CONNECTED {w.shape[1]} -> {w.shape[0]} {op.options.activation}: "
                f"{list(g.t(op.inputs[0]).shape)} -> {list(g.t(op.outputs[0]).shape)}")

    def variant(self, g: Graph, op: Op, cg) -> str:
        return "per_channel" if g.t(operand(op, "weights")).quant.per_channel else "per_tensor"

    def c_context(self, g: Graph, op: Op, cg) -> dict:
        a = op.prepared
        x, w, y = g.t(op.inputs[0]), g.t(operand(op, "weights")), g.t(op.outputs[0])
        has_bias = bool(operand(op, "bias"))
        pc = w.quant.per_channel
        return dict(x=x, w=w, y=y, per_channel=pc, batches=a.batches,
                    in_features=w.shape[1], out_features=w.shape[0],
                    in_offset=-x.quant.zp, filter_offset=0 if w.quant.per_channel else -w.quant.zp,
                    out_offset=y.quant.zp, act_min=a.act_min, act_max=a.act_max,
                    multiplier=cg.int_list(a.multiplier), shift=cg.int_list(a.shift),
                    n_quant=len(a.multiplier),
                    bias=cg.const(operand(op, "bias")) if has_bias else "NULL", weights=cg.const(operand(op, "weights")))

    c_decls = """\
static const cmsis_nn_fc_params {{n}}_params = {
    .input_offset = {{in_offset}}, .filter_offset = {{filter_offset}}, .output_offset = {{out_offset}},
    .activation = {.min = {{act_min}}, .max = {{act_max}}}};
{% if per_channel %}
static const int32_t {{n}}_multiplier[{{n_quant}}] = {{ '{' }}{{multiplier}}{{ '}' }};
static const int32_t {{n}}_shift[{{n_quant}}] = {{ '{' }}{{shift}}{{ '}' }};
static const cmsis_nn_per_channel_quant_params {{n}}_quant = {(int32_t *){{n}}_multiplier, (int32_t *){{n}}_shift};
{% else %}
static const cmsis_nn_per_tensor_quant_params {{n}}_quant = {.multiplier = {{multiplier}}, .shift = {{shift}}};
{% endif %}
static const cmsis_nn_dims {{n}}_input_dims = {{ '{' }}{{batches}}, 1, 1, {{in_features}}{{ '}' }};
static const cmsis_nn_dims {{n}}_filter_dims = {{ '{' }}{{in_features}}, 1, 1, {{out_features}}{{ '}' }};
static const cmsis_nn_dims {{n}}_bias_dims = {1, 1, 1, {{out_features}}};
static const cmsis_nn_dims {{n}}_output_dims = {{ '{' }}{{batches}}, 1, 1, {{out_features}}{{ '}' }};
"""
    c_call = """\
status = {{kernel}}({{ctx}}, &{{n}}_params, &{{n}}_quant, &{{n}}_input_dims, {{ptr(x)}},
                                &{{n}}_filter_dims, {{weights}}, &{{n}}_bias_dims, {{bias}},
                                &{{n}}_output_dims, {{ptr(y)}});"""
    c_buffer_query = "arm_fully_connected_s8_get_buffer_size(&{{n}}_filter_dims)"


# -- training -----------------------------------------------------------------------------------


def fc_rows(g: Graph, op: Op) -> tuple[int, int]:
    """The FC input seen as [batches, in features], whatever its rank."""
    return op.prepared.batches, g.t(operand(op, "weights")).shape[1]


@register
class FullyConnectedGradInput(_GradOp):
    kind = "FULLY_CONNECTED_GRAD_INPUT"
    kernel = "pockmcu_fully_connected_grad_input_f32"
    c_status = True

    def macs(self, g: Graph, op: Op) -> int:
        f = op.options.layer
        return FullyConnected().macs(g, f)

    def reference(self, g: Graph, op: Op, xs, rt=None):
        f = op.options.layer
        w = g.t(operand(f, "weights"))
        zp = 0 if w.quant.per_channel else w.quant.zp
        wr = (w.data.astype(np.float64) - zp) * weight_scales(g, f).astype(np.float64)[:, None]
        n = xs[0].shape[0]
        dz = xs[0].reshape(n * f.prepared.batches, -1).astype(np.float64)
        return [(dz @ wr).reshape((n,) + g.t(f.inputs[0]).shape[1:])]

    def c_context(self, g, op, cg):
        f = op.options.layer
        w = g.t(operand(f, "weights"))
        return dict(self.layer_ctx(g, op, cg), dz=g.t(op.inputs[0]), dx=g.t(op.outputs[0]),
                    filter_offset=0 if w.quant.per_channel else -w.quant.zp)

    c_decls = "static const float {{n}}_filter_scale[{{w.shape[0]}}] = {{ '{' }}{{scales}}{{ '}' }};\n"
    c_call = """\
status = pockmcu_fully_connected_grad_input_f32(&{{layer}}_input_dims, &{{layer}}_filter_dims, {{weights}},
                                                {{filter_offset}}, {{n}}_filter_scale, {{ptr(dz)}}, {{ptr(dx)}});"""


@register
class FullyConnectedWgradUpdate(_GradOp):
    kind = "FULLY_CONNECTED_WGRAD_UPDATE"
    operands = ("saved_input", "output_grad")
    Options = WeightUpdate
    role = "update"
    kernel = "pockmcu_fully_connected_wgrad_update_s8"
    c_status = True

    def macs(self, g: Graph, op: Op) -> int:
        f, w = op.options.layer, g.t(op.options.weights)
        return f.prepared.batches * w.shape[0] * op.options.channels

    def reference(self, g: Graph, op: Op, xs, rt=None):
        f = op.options.layer
        saved, dz = xs
        w = g.t(op.options.weights)
        b, k = op.options.channel_begin, op.options.channels
        rows = saved.shape[0] * f.prepared.batches
        x = saved.reshape(rows, k).astype(np.float64) - g.t(op.inputs[0]).quant.zp
        grad = dz.reshape(rows, -1).astype(np.float64).T @ x
        coef = np.repeat(op.options.coef, k)
        part = w.data[:, b:b + k]
        new = sgd_update(part, grad, coef, rt, w.name, -127, 127).reshape(part.shape)
        rt.params[w.name] = w.data.copy()
        rt.params[w.name][:, b:b + k] = new
        return []

    def c_context(self, g, op, cg):
        f = op.options.layer
        saved = g.t(op.inputs[0])
        return dict(self.layer_ctx(g, op, cg), saved=saved, dz=g.t(operand(op, "output_grad")), begin=op.options.channel_begin,
                    batches=f.prepared.batches, k=op.options.channels, in_offset=-saved.quant.zp,
                    weights=cg.param(op.options.weights), coef=cg.float_list(op.options.coef),
                    **cg.optimizer_args(op.options.weights))

    c_decls = """\
static const float {{n}}_coef[{{w.shape[0]}}] = {{ '{' }}{{coef}}{{ '}' }};
static const cmsis_nn_dims {{n}}_input_dims = {{ '{' }}{{batches}}, 1, 1, {{k}}{{ '}' }};
"""
    c_call = """\
status = pockmcu_fully_connected_wgrad_update_s8(&{{n}}_input_dims, {{ptr(saved)}}, {{in_offset}},
                                                 &{{layer}}_filter_dims, {{weights}}, {{begin}}, {{ptr(dz)}},
                                                 {{n}}_coef, {{accum}}, {{velocity}}, &train.optimizer, {{rng}});"""
