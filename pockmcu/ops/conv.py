"""CONV_2D and DEPTHWISE_CONV_2D, int8 with per-tensor or per-channel weights.

Semantics: TFLite Micro reference_integer_ops::ConvPerChannel and
DepthwiseConvPerChannel. acc = sum((x - zp_in) * w) + bias, requantized per
output channel with the multiplier/shift of s_in * s_w[c] / s_out (double
rounding), plus zp_out, clamped to the fused activation range. Out-of-bounds
taps contribute nothing, so asymmetric SAME padding needs no special case.
"""

from __future__ import annotations

import numpy as np

from .. import fixedpoint as fp
from ..ir import Graph, Op
from .base import SUPPORTED_ACTIVATIONS, OpDef, fused_activation, register, same_or_valid_pads

PADDING = {0: "SAME", 1: "VALID"}


def requant_params(g: Graph, op: Op) -> tuple[np.ndarray, np.ndarray]:
    """Per-output-channel (multiplier, shift) from s_in * s_w[c] / s_out, as TFLM computes them."""
    x, w, y = g.t(op.inputs[0]), g.t(op.inputs[1]), g.t(op.outputs[0])
    out_ch = y.shape[-1]
    ws = w.quant.scale if w.quant.per_channel else np.full(out_ch, w.quant.scale[0], np.float32)
    mult, shift = zip(*(fp.quantize_multiplier(float(x.quant.s) * float(s) / float(y.quant.s)) for s in ws))
    return np.array(mult, np.int32), np.array(shift, np.int32)


def conv_taps(xq: np.ndarray, zp: int, kh: int, kw: int, stride, dilation, pads, out_hw):
    """Yield (i, j, patch) with patch = (x - zp) at tap (i, j) for every output position, [N, OH, OW, C]."""
    top, left, bottom, right = pads
    xc = xq.astype(np.float64) - zp
    xp = np.pad(xc, ((0, 0), (top, bottom + stride[0]), (left, right + stride[1]), (0, 0)))
    oh, ow = out_hw
    for i in range(kh):
        for j in range(kw):
            r0, c0 = i * dilation[0], j * dilation[1]
            yield i, j, xp[:, r0:r0 + stride[0] * (oh - 1) + 1:stride[0], c0:c0 + stride[1] * (ow - 1) + 1:stride[1], :]


def finish(acc: np.ndarray, op: Op, g: Graph) -> np.ndarray:
    """Bias, per-channel requantization, zero point and activation clamp (the common epilogue)."""
    acc = acc.astype(np.int64)
    if len(op.inputs) > 2 and op.inputs[2]:
        acc = acc + g.t(op.inputs[2]).data.astype(np.int64)
    a = op.attrs
    out = fp.multiply_by_quantized_multiplier(acc, a["multiplier"], a["shift"]) + g.t(op.outputs[0]).quant.zp
    return np.clip(out, a["act_min"], a["act_max"]).astype(np.int8)


class _WindowOp(OpDef):
    """Shared option parsing for ops with stride/dilation/padding/fused activation."""

    def parse_tflite(self, o, op: Op, tensors) -> None:
        op.attrs.update(stride=(o.StrideH(), o.StrideW()), padding=PADDING[o.Padding()],
                        activation=fused_activation(o.FusedActivationFunction()))
        op.attrs["dilation"] = (o.DilationHFactor(), o.DilationWFactor())

    def resolve_pads(self, g: Graph, op: Op) -> None:
        a = op.attrs
        if "pads" not in a:
            x, w, y = g.t(op.inputs[0]), g.t(op.inputs[1]), g.t(op.outputs[0])
            a["pads"] = same_or_valid_pads(a["padding"], x.shape[1:3], w.shape[1:3], a["stride"],
                                           a["dilation"], y.shape[1:3])

    def check(self, g: Graph, op: Op) -> list[str]:
        problems = super().check(g, op)
        a = op.attrs
        if a["activation"] not in SUPPORTED_ACTIVATIONS:
            problems.append(a["activation"])
        w = g.t(op.inputs[1])
        if w.dtype != "int8" or w.data is None:
            problems.append(f"weights '{w.name}' are {w.dtype}{'' if w.is_const else ' and not constant'} (need constant int8)")
        elif w.quant is None or np.any(w.quant.zero_point != 0):
            problems.append(f"weights '{w.name}' need symmetric int8 quantization (zero point 0)")
        if len(op.inputs) > 2 and op.inputs[2]:
            b = g.t(op.inputs[2])
            if b.dtype != "int32" or b.data is None:
                problems.append(f"bias '{b.name}' is {b.dtype} (need constant int32)")
        return problems

    def prepare(self, g: Graph, op: Op) -> None:
        self.resolve_pads(g, op)
        y = g.t(op.outputs[0])
        op.attrs["multiplier"], op.attrs["shift"] = requant_params(g, op)
        op.attrs["act_min"], op.attrs["act_max"] = fp.activation_range(op.attrs["activation"], y.quant.s, y.quant.zp)

    def c_context(self, g: Graph, op: Op, cg) -> dict:
        a = op.attrs
        x, w, y = g.t(op.inputs[0]), g.t(op.inputs[1]), g.t(op.outputs[0])
        has_bias = len(op.inputs) > 2 and bool(op.inputs[2])
        return dict(
            x=x, w=w, y=y, pads=a["pads"], stride=a["stride"], dilation=a["dilation"],
            in_offset=-x.quant.zp, out_offset=y.quant.zp, act_min=a["act_min"], act_max=a["act_max"],
            multiplier=cg.int_list(a["multiplier"]), shift=cg.int_list(a["shift"]),
            bias=cg.const(op.inputs[2]) if has_bias else "NULL", weights=cg.const(op.inputs[1]),
            bias_c=y.shape[-1] if has_bias else 0)


@register
class Conv2D(_WindowOp):
    kind = "CONV_2D"
    tflite_ops = ("CONV_2D",)
    tflite_options = "Conv2DOptions"
    kernel = "arm_convolve_wrapper_s8"
    c_status = True

    def check(self, g: Graph, op: Op) -> list[str]:
        problems = super().check(g, op)
        x, w = g.t(op.inputs[0]), g.t(op.inputs[1])
        if w.data is not None and w.shape[-1] != x.shape[-1]:
            problems.append(f"grouped convolution ({x.shape[-1]} input channels, filter depth {w.shape[-1]})")
        return problems

    def reference(self, g: Graph, op: Op, xs):
        x = xs[0]
        w = g.t(op.inputs[1]).data.astype(np.float64)
        y = g.t(op.outputs[0])
        a = op.attrs
        acc = np.zeros((x.shape[0], y.shape[1], y.shape[2], y.shape[3]), np.float64)
        for i, j, patch in conv_taps(x, g.t(op.inputs[0]).quant.zp, w.shape[1], w.shape[2], a["stride"],
                                     a["dilation"], a["pads"], y.shape[1:3]):
            acc += patch @ w[:, i, j, :].T   # exact: |sum| < 2**53
        return [finish(acc, op, g)]

    def macs(self, g: Graph, op: Op) -> int:
        w, y = g.t(op.inputs[1]), g.t(op.outputs[0])
        return int(np.prod(y.shape[1:])) * int(np.prod(w.shape[1:]))

    def describe(self, g: Graph, op: Op) -> str:
        w, a = g.t(op.inputs[1]), op.attrs
        return (f"CONV_2D {w.shape[1]}x{w.shape[2]} stride {a['stride'][0]}x{a['stride'][1]} "
                f"dilation {a['dilation'][0]}x{a['dilation'][1]} {a['padding']} {a['activation']}: "
                f"{list(g.t(op.inputs[0]).shape)} -> {list(g.t(op.outputs[0]).shape)}")

    c_decls = """\
static const int32_t {{n}}_multiplier[{{y.shape[3]}}] = {{ '{' }}{{multiplier}}{{ '}' }};
static const int32_t {{n}}_shift[{{y.shape[3]}}] = {{ '{' }}{{shift}}{{ '}' }};
static const cmsis_nn_conv_params {{n}}_params = {
    .input_offset = {{in_offset}}, .output_offset = {{out_offset}},
    .stride = {.w = {{stride[1]}}, .h = {{stride[0]}}}, .padding = {.w = {{pads[1]}}, .h = {{pads[0]}}},
    .dilation = {.w = {{dilation[1]}}, .h = {{dilation[0]}}}, .activation = {.min = {{act_min}}, .max = {{act_max}}}};
static const cmsis_nn_per_channel_quant_params {{n}}_quant = {(int32_t *){{n}}_multiplier, (int32_t *){{n}}_shift};
static const cmsis_nn_dims {{n}}_input_dims = {{ dims(x.shape) }};
static const cmsis_nn_dims {{n}}_filter_dims = {{ dims(w.shape) }};
static const cmsis_nn_dims {{n}}_bias_dims = {1, 1, 1, {{bias_c}}};
static const cmsis_nn_dims {{n}}_output_dims = {{ dims(y.shape) }};
"""
    c_call = """\
ctx.buf = {{scratch}};
ctx.size = {{scratch_size}};
status = arm_convolve_wrapper_s8(&ctx, &{{n}}_params, &{{n}}_quant, &{{n}}_input_dims, {{ptr(x)}},
                                 &{{n}}_filter_dims, {{weights}}, &{{n}}_bias_dims, {{bias}},
                                 &{{n}}_output_dims, {{ptr(y)}});"""
    c_buffer_query = ("arm_convolve_wrapper_s8_get_buffer_size(&{{n}}_params, &{{n}}_input_dims, "
                      "&{{n}}_filter_dims, &{{n}}_output_dims)")


@register
class DepthwiseConv2D(_WindowOp):
    kind = "DEPTHWISE_CONV_2D"
    tflite_ops = ("DEPTHWISE_CONV_2D",)
    tflite_options = "DepthwiseConv2DOptions"
    kernel = "arm_depthwise_conv_wrapper_s8"
    c_status = True

    def parse_tflite(self, o, op: Op, tensors) -> None:
        super().parse_tflite(o, op, tensors)
        x, w = tensors[op.inputs[0]], tensors[op.inputs[1]]
        op.attrs["ch_mult"] = w.shape[3] // max(x.shape[3], 1)

    def check(self, g: Graph, op: Op) -> list[str]:
        problems = super().check(g, op)
        x, w = g.t(op.inputs[0]), g.t(op.inputs[1])
        if w.shape[0] != 1 or w.shape[3] != x.shape[3] * op.attrs["ch_mult"]:
            problems.append(f"depthwise weights of shape {list(w.shape)} do not match input {list(x.shape)}")
        return problems

    def reference(self, g: Graph, op: Op, xs):
        x = xs[0]
        w = g.t(op.inputs[1]).data.astype(np.float64)
        y = g.t(op.outputs[0])
        a = op.attrs
        m = a["ch_mult"]
        acc = np.zeros((x.shape[0],) + y.shape[1:], np.float64)
        for i, j, patch in conv_taps(x, g.t(op.inputs[0]).quant.zp, w.shape[1], w.shape[2], a["stride"],
                                     a["dilation"], a["pads"], y.shape[1:3]):
            acc += np.repeat(patch, m, axis=-1) * w[0, i, j, :]   # output channel c*m+k reads input channel c
        return [finish(acc, op, g)]

    def macs(self, g: Graph, op: Op) -> int:
        w, y = g.t(op.inputs[1]), g.t(op.outputs[0])
        return int(np.prod(y.shape[1:])) * w.shape[1] * w.shape[2]

    def describe(self, g: Graph, op: Op) -> str:
        w, a = g.t(op.inputs[1]), op.attrs
        return (f"DEPTHWISE_CONV_2D {w.shape[1]}x{w.shape[2]} x{a['ch_mult']} stride {a['stride'][0]}x{a['stride'][1]} "
                f"dilation {a['dilation'][0]}x{a['dilation'][1]} {a['padding']} {a['activation']}: "
                f"{list(g.t(op.inputs[0]).shape)} -> {list(g.t(op.outputs[0]).shape)}")

    c_decls = """\
static const int32_t {{n}}_multiplier[{{y.shape[3]}}] = {{ '{' }}{{multiplier}}{{ '}' }};
static const int32_t {{n}}_shift[{{y.shape[3]}}] = {{ '{' }}{{shift}}{{ '}' }};
static const cmsis_nn_dw_conv_params {{n}}_params = {
    .input_offset = {{in_offset}}, .output_offset = {{out_offset}}, .ch_mult = {{ch_mult}},
    .stride = {.w = {{stride[1]}}, .h = {{stride[0]}}}, .padding = {.w = {{pads[1]}}, .h = {{pads[0]}}},
    .dilation = {.w = {{dilation[1]}}, .h = {{dilation[0]}}}, .activation = {.min = {{act_min}}, .max = {{act_max}}}};
static const cmsis_nn_per_channel_quant_params {{n}}_quant = {(int32_t *){{n}}_multiplier, (int32_t *){{n}}_shift};
static const cmsis_nn_dims {{n}}_input_dims = {{ dims(x.shape) }};
static const cmsis_nn_dims {{n}}_filter_dims = {{ dims(w.shape) }};
static const cmsis_nn_dims {{n}}_bias_dims = {1, 1, 1, {{bias_c}}};
static const cmsis_nn_dims {{n}}_output_dims = {{ dims(y.shape) }};
"""
    c_call = """\
ctx.buf = {{scratch}};
ctx.size = {{scratch_size}};
status = arm_depthwise_conv_wrapper_s8(&ctx, &{{n}}_params, &{{n}}_quant, &{{n}}_input_dims, {{ptr(x)}},
                                       &{{n}}_filter_dims, {{weights}}, &{{n}}_bias_dims, {{bias}},
                                       &{{n}}_output_dims, {{ptr(y)}});"""
    c_buffer_query = ("arm_depthwise_conv_wrapper_s8_get_buffer_size(&{{n}}_params, &{{n}}_input_dims, "
                      "&{{n}}_filter_dims, &{{n}}_output_dims)")

    def c_context(self, g: Graph, op: Op, cg) -> dict:
        return dict(super().c_context(g, op, cg), ch_mult=op.attrs["ch_mult"])
