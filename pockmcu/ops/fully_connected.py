"""FULLY_CONNECTED, int8, per-tensor or per-channel weights [out, in].

Semantics: TFLite Micro reference_integer_ops::FullyConnected. The input is
read as [batches, in] whatever its rank. Per-tensor: the multiplier comes from
the float32 product s_in * s_w, widened to double, divided by s_out (that is
how TFLM's GetQuantizedConvolutionMultipler computes it, and it matters for
bit-exactness); per-channel: double products, like CONV_2D.
"""

from __future__ import annotations

import numpy as np

from .. import fixedpoint as fp
from .. import fixedpoint_ort as ort
from ..ir import Graph, Op
from .base import SUPPORTED_ACTIVATIONS, OpDef, fused_activation, register
from .conv import _GradOp, finish, param_backward, weight_scales
from .training_ops import sgd_update


@register
class FullyConnected(OpDef):
    kind = "FULLY_CONNECTED"
    tflite_ops = ("FULLY_CONNECTED",)
    tflite_options = "FullyConnectedOptions"
    kernel = "arm_fully_connected_s8"
    c_status = True

    def parse_tflite(self, o, op: Op, tensors) -> None:
        op.attrs["activation"] = fused_activation(o.FusedActivationFunction()) if o else "NONE"
        op.attrs["keep_num_dims"] = bool(o.KeepNumDims()) if o else False
        op.attrs["weights_format"] = int(o.WeightsFormat()) if o else 0

    def check(self, g: Graph, op: Op) -> list[str]:
        problems = super().check(g, op)
        a = op.attrs
        if a["activation"] not in SUPPORTED_ACTIVATIONS:
            problems.append(a["activation"])
        if a.get("weights_format", 0) != 0:
            problems.append("shuffled FULLY_CONNECTED weights format")
        w = g.t(op.inputs[1])
        if w.dtype != "int8" or w.data is None:
            problems.append(f"weights '{w.name}' are {w.dtype}{'' if w.is_const else ' and not constant'} (need constant int8)")
        elif w.quant is None:
            problems.append(f"weights '{w.name}' have no quantization")
        elif w.quant.per_channel and np.any(w.quant.zero_point != 0):
            problems.append(f"per-channel weights '{w.name}' need zero point 0")
        if len(op.inputs) > 2 and op.inputs[2]:
            b = g.t(op.inputs[2])
            if b.dtype != "int32" or b.data is None:
                problems.append(f"bias '{b.name}' is {b.dtype} (need constant int32)")
        return problems

    def prepare(self, g: Graph, op: Op) -> None:
        x, w, y = g.t(op.inputs[0]), g.t(op.inputs[1]), g.t(op.outputs[0])
        a = op.attrs
        if g.numerics == "onnxruntime":     # float32 scale as mantissa/exponent (fixedpoint_ort.requantize_ort)
            ws = w.quant.scale if w.quant.per_channel else w.quant.scale[:1]
            pairs = list(zip(*ort.ort_output_scales(x.quant.s, ws, y.quant.s)))
        elif w.quant.per_channel:
            pairs = [fp.quantize_multiplier(float(x.quant.s) * float(s) / float(y.quant.s)) for s in w.quant.scale]
        else:
            product = np.float32(x.quant.scale[0]) * np.float32(w.quant.scale[0])   # float32, as TFLM
            pairs = [fp.quantize_multiplier(float(product) / float(y.quant.s))]
        a["multiplier"] = np.array([p[0] for p in pairs], np.int32)
        a["shift"] = np.array([p[1] for p in pairs], np.int32)
        a["act_min"], a["act_max"] = fp.activation_range(a["activation"], y.quant.s, y.quant.zp)
        a["in_features"] = w.shape[1]
        a["batches"] = x.size // w.shape[1]

    def reference(self, g: Graph, op: Op, xs, rt=None):
        x = xs[0]
        n = x.shape[0]
        w = g.t(op.inputs[1])
        xin = x.reshape(n * op.attrs["batches"], w.shape[1]).astype(np.float64) - g.t(op.inputs[0]).quant.zp
        wf = w.data.astype(np.float64) - (0 if w.quant.per_channel else w.quant.zp)
        acc = xin @ wf.T
        out = finish(acc, op, g)
        return [out.reshape((n,) + g.t(op.outputs[0]).shape[1:])]

    def macs(self, g: Graph, op: Op) -> int:
        w = g.t(op.inputs[1])
        return int(w.shape[0] * w.shape[1] * (g.t(op.inputs[0]).size // w.shape[1]))

    def backward(self, tb, op: Op) -> None:
        param_backward(tb, op, "FULLY_CONNECTED_GRAD_INPUT", "FULLY_CONNECTED_WGRAD_UPDATE", in_rows=fc_rows)

    def describe(self, g: Graph, op: Op) -> str:
        w = g.t(op.inputs[1])
        return (f"FULLY_CONNECTED {w.shape[1]} -> {w.shape[0]} {op.attrs['activation']}: "
                f"{list(g.t(op.inputs[0]).shape)} -> {list(g.t(op.outputs[0]).shape)}")

    def variant(self, g: Graph, op: Op, cg) -> str:
        return "per_channel" if g.t(op.inputs[1]).quant.per_channel else "per_tensor"

    def c_context(self, g: Graph, op: Op, cg) -> dict:
        a = op.attrs
        x, w, y = g.t(op.inputs[0]), g.t(op.inputs[1]), g.t(op.outputs[0])
        has_bias = len(op.inputs) > 2 and bool(op.inputs[2])
        pc = w.quant.per_channel
        return dict(x=x, w=w, y=y, per_channel=pc, batches=a["batches"],
                    in_features=w.shape[1], out_features=w.shape[0],
                    in_offset=-x.quant.zp, filter_offset=0 if w.quant.per_channel else -w.quant.zp,
                    out_offset=y.quant.zp, act_min=a["act_min"], act_max=a["act_max"],
                    multiplier=cg.int_list(a["multiplier"]), shift=cg.int_list(a["shift"]),
                    n_quant=len(a["multiplier"]),
                    bias=cg.const(op.inputs[2]) if has_bias else "NULL", weights=cg.const(op.inputs[1]))

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
    return op.attrs["batches"], g.t(op.inputs[1]).shape[1]


@register
class FullyConnectedGradInput(_GradOp):
    kind = "FULLY_CONNECTED_GRAD_INPUT"
    kernel = "pockmcu_fully_connected_grad_input_f32"
    c_status = True

    def macs(self, g: Graph, op: Op) -> int:
        f = op.attrs["layer"]
        return FullyConnected().macs(g, f)

    def reference(self, g: Graph, op: Op, xs, rt=None):
        f = op.attrs["layer"]
        w = g.t(f.inputs[1])
        zp = 0 if w.quant.per_channel else w.quant.zp
        wr = (w.data.astype(np.float64) - zp) * weight_scales(g, f).astype(np.float64)[:, None]
        n = xs[0].shape[0]
        dz = xs[0].reshape(n * f.attrs["batches"], -1).astype(np.float64)
        return [(dz @ wr).reshape((n,) + g.t(f.inputs[0]).shape[1:])]

    def c_context(self, g, op, cg):
        f = op.attrs["layer"]
        w = g.t(f.inputs[1])
        return dict(self.layer_ctx(g, op, cg), dz=g.t(op.inputs[0]), dx=g.t(op.outputs[0]),
                    filter_offset=0 if w.quant.per_channel else -w.quant.zp)

    c_decls = "static const float {{n}}_filter_scale[{{w.shape[0]}}] = {{ '{' }}{{scales}}{{ '}' }};\n"
    c_call = """\
status = pockmcu_fully_connected_grad_input_f32(&{{layer}}_input_dims, &{{layer}}_filter_dims, {{weights}},
                                                {{filter_offset}}, {{n}}_filter_scale, {{ptr(dz)}}, {{ptr(dx)}});"""


@register
class FullyConnectedWgradUpdate(_GradOp):
    kind = "FULLY_CONNECTED_WGRAD_UPDATE"
    role = "update"
    kernel = "pockmcu_fully_connected_wgrad_update_s8"
    c_status = True

    def macs(self, g: Graph, op: Op) -> int:
        f, w = op.attrs["layer"], g.t(op.attrs["weights"])
        return f.attrs["batches"] * w.shape[0] * op.attrs["channels"]

    def reference(self, g: Graph, op: Op, xs, rt=None):
        f = op.attrs["layer"]
        saved, dz = xs
        w = g.t(op.attrs["weights"])
        b, k = op.attrs["channel_begin"], op.attrs["channels"]
        rows = saved.shape[0] * f.attrs["batches"]
        x = saved.reshape(rows, k).astype(np.float64) - g.t(op.inputs[0]).quant.zp
        grad = dz.reshape(rows, -1).astype(np.float64).T @ x
        coef = np.repeat(op.attrs["coef"], k)
        part = w.data[:, b:b + k]
        new = sgd_update(part, grad, coef, rt, w.name, -127, 127).reshape(part.shape)
        rt.params[w.name] = w.data.copy()
        rt.params[w.name][:, b:b + k] = new
        return []

    def c_context(self, g, op, cg):
        f = op.attrs["layer"]
        saved = g.t(op.inputs[0])
        return dict(self.layer_ctx(g, op, cg), saved=saved, dz=g.t(op.inputs[1]), begin=op.attrs["channel_begin"],
                    batches=f.attrs["batches"], k=op.attrs["channels"], in_offset=-saved.quant.zp,
                    weights=cg.param(op.attrs["weights"]), coef=cg.float_list(op.attrs["coef"]),
                    **cg.optimizer_args(op.attrs["weights"]))

    c_decls = """\
static const float {{n}}_coef[{{w.shape[0]}}] = {{ '{' }}{{coef}}{{ '}' }};
static const cmsis_nn_dims {{n}}_input_dims = {{ '{' }}{{batches}}, 1, 1, {{k}}{{ '}' }};
"""
    c_call = """\
status = pockmcu_fully_connected_wgrad_update_s8(&{{n}}_input_dims, {{ptr(saved)}}, {{in_offset}},
                                                 &{{layer}}_filter_dims, {{weights}}, {{begin}}, {{ptr(dz)}},
                                                 {{n}}_coef, {{accum}}, {{velocity}}, &train.optimizer, {{rng}});"""
