"""CONV_2D and DEPTHWISE_CONV_2D, int8 with per-tensor or per-channel weights.

Semantics: TFLite Micro reference_integer_ops::ConvPerChannel and
DepthwiseConvPerChannel. acc = sum((x - zp_in) * w) + bias, requantized per
output channel with the multiplier/shift of s_in * s_w[c] / s_out (double
rounding), plus zp_out, clamped to the fused activation range. Out-of-bounds
taps contribute nothing, so asymmetric SAME padding needs no special case.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import ClassVar

import numpy as np

from .. import fixedpoint as fp
from .. import fixedpoint_ort as ort
from ..ccode import SCRATCH, Array, Call, Emission, Local, Ptr, Struct, dims4
from ..ir import Graph, Op
from ..kernel_table import DSP_SCRATCH, choose, dsp_column_bytes
from .base import SUPPORTED_ACTIVATIONS, OpDef, Window, fused_activation, opdef, operand, register, same_or_valid_pads
from .training_ops import sgd_update

PADDING = {0: "SAME", 1: "VALID"}


@dataclass(frozen=True)
class ConvOptions:
    """CONV_2D and DEPTHWISE_CONV_2D options, as the model file gives them."""

    stride: tuple[int, int]                          # (h, w)
    dilation: tuple[int, int]                        # (h, w)
    padding: str                                     # "SAME" | "VALID" (TFLite's rule)
    activation: str                                  # fused: NONE, RELU, RELU6, RELU_N1_TO_1
    pads: tuple[int, int, int, int] | None = None    # explicit (top, left, bottom, right) from ONNX
    ch_mult: int = 1                                 # depthwise: output channels per input channel


@dataclass(frozen=True, eq=False)
class ConvData:
    """What Prepare computes for CONV_2D / DEPTHWISE_CONV_2D (TFLite Micro's OpDataConv)."""

    pads: tuple[int, int, int, int]                  # (top, left, bottom, right)
    multiplier: np.ndarray                           # int32 per output channel
    shift: np.ndarray                                # int32 per output channel
    act_min: int
    act_max: int


def requant_params(g: Graph, op: Op) -> tuple[np.ndarray, np.ndarray]:
    """Per-output-channel (multiplier, shift) from s_in * s_w[c] / s_out, as TFLM computes them."""
    x, w, y = g.t(op.inputs[0]), g.t(operand(op, "weights")), g.t(op.outputs[0])
    out_ch = y.shape[-1]
    ws = w.quant.scale if w.quant.per_channel else np.full(out_ch, w.quant.scale[0], np.float32)
    if g.numerics == "onnxruntime":     # float32 scale as mantissa/exponent (fixedpoint_ort.requantize_ort)
        return ort.ort_output_scales(x.quant.s, ws, y.quant.s)
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
    if operand(op, "bias"):
        acc = acc + g.t(operand(op, "bias")).data.astype(np.int64)
    p = op.prepared
    requant = ort.requantize_ort if g.numerics == "onnxruntime" else fp.multiply_by_quantized_multiplier
    out = requant(acc, p.multiplier, p.shift) + g.t(op.outputs[0]).quant.zp
    return np.clip(out, p.act_min, p.act_max).astype(np.int8)


class _WindowOp(OpDef):
    """Shared options, checks and Prepare of CONV_2D and DEPTHWISE_CONV_2D."""

    Options = ConvOptions
    operands = ("input", "weights", "bias")

    def parse_tflite(self, o, op: Op, tensors) -> ConvOptions:
        return ConvOptions(stride=(o.StrideH(), o.StrideW()), dilation=(o.DilationHFactor(), o.DilationWFactor()),
                           padding=PADDING[o.Padding()], activation=fused_activation(o.FusedActivationFunction()))

    def window(self, g: Graph, op: Op) -> Window:
        o = op.options
        return Window(tuple(g.t(operand(op, "weights")).shape[1:3]), tuple(o.stride), tuple(o.dilation), tuple(op.prepared.pads))

    def check(self, g: Graph, op: Op) -> list[str]:
        problems = super().check(g, op)
        if op.options.activation not in SUPPORTED_ACTIVATIONS:
            problems.append(op.options.activation)
        w = g.t(operand(op, "weights"))
        if w.dtype != "int8" or w.data is None:
            problems.append(f"weights '{w.name}' are {w.dtype}{'' if w.is_const else ' and not constant'} (need constant int8)")
        elif w.quant is None or np.any(w.quant.zero_point != 0):
            problems.append(f"weights '{w.name}' need symmetric int8 quantization (zero point 0)")
        if operand(op, "bias"):
            b = g.t(operand(op, "bias"))
            if b.dtype != "int32" or b.data is None:
                problems.append(f"bias '{b.name}' is {b.dtype} (need constant int32)")
        return problems

    def prepare(self, g: Graph, op: Op) -> ConvData:
        o = op.options
        x, w, y = g.t(op.inputs[0]), g.t(operand(op, "weights")), g.t(op.outputs[0])
        pads = o.pads if o.pads is not None else same_or_valid_pads(o.padding, x.shape[1:3], w.shape[1:3], o.stride,
                                                                    o.dilation, y.shape[1:3])
        multiplier, shift = requant_params(g, op)
        act_min, act_max = fp.activation_range(o.activation, y.quant.s, y.quant.zp)
        return ConvData(tuple(pads), multiplier, shift, act_min, act_max)

    #: the params struct of the kind (cmsis_nn_conv_params / cmsis_nn_dw_conv_params)
    params_type: ClassVar[str] = "cmsis_nn_conv_params"

    def params_fields(self, op: Op) -> dict:
        """The kind's params struct; DEPTHWISE_CONV_2D adds ch_mult after the offsets."""
        return {}

    def emit(self, g: Graph, op: Op, cg) -> Emission:
        """The params struct, quantization and dims of the layer, and one call. Tile copies of one
        layer (pockmcu/stream.py) share its multiplier and shift arrays (declared by tile 0). With
        split-stored weights (codegen.CodeGen.head: the trained input channels in RAM, the frozen
        ones read from flash) the split kernel takes both and needs no scratch."""
        o, p = op.options, op.prepared
        x, y = g.t(op.inputs[0]), g.t(op.outputs[0])
        w, bias = operand(op, "weights"), operand(op, "bias")
        head = cg.head(w) if self.variant(g, op, cg) == "split" else None
        out_c = y.shape[3]
        decls = []
        if op.tile is None or op.tile.index == 0:
            decls += [Array("multiplier", "int32_t", tuple(p.multiplier), owner=op.layer),
                      Array("shift", "int32_t", tuple(p.shift), owner=op.layer)]
        params = dict(input_offset=-x.quant.zp, output_offset=y.quant.zp, **self.params_fields(op),
                      stride=dict(w=o.stride[1], h=o.stride[0]), padding=dict(w=p.pads[1], h=p.pads[0]),
                      dilation=dict(w=o.dilation[1], h=o.dilation[0]), activation=dict(min=p.act_min, max=p.act_max))
        decls += [Struct("params", self.params_type, params),
                  Struct("quant", "cmsis_nn_per_channel_quant_params",
                         (Local("multiplier", owner=op.layer, address=False, cast="int32_t *"),
                          Local("shift", owner=op.layer, address=False, cast="int32_t *"))),
                  Struct("input_dims", "cmsis_nn_dims", dims4(x.shape)),
                  Struct("filter_dims", "cmsis_nn_dims", dims4(g.t(w).shape)),
                  Struct("bias_dims", "cmsis_nn_dims", (1, 1, 1, out_c if bias else 0)),
                  Struct("output_dims", "cmsis_nn_dims", dims4(y.shape))]
        b = Ptr(bias) if bias else "NULL"
        function = cg.kernel(op).function
        if head:
            args = (SCRATCH, Local("params"), Local("quant"), Local("input_dims"), Ptr(x.name), Local("filter_dims"),
                    Ptr(w), head[0], head[1], Local("bias_dims"), b, Local("output_dims"), Ptr(y.name),
                    int(g.numerics == "onnxruntime"))
            return Emission(calls=(Call(function, args, status=True),), decls=tuple(decls))
        args = (SCRATCH, Local("params"), Local("quant"), Local("input_dims"), Ptr(x.name), Local("filter_dims"),
                Ptr(w), Local("bias_dims"), b, Local("output_dims"), Ptr(y.name))
        query = Call(f"{function}_get_buffer_size",
                     (Local("params"), Local("input_dims"), Local("filter_dims"), Local("output_dims")))
        return Emission(calls=(Call(function, args, status=True),), decls=tuple(decls), buffer_query=query)


@register
class Conv2D(_WindowOp):
    kind = "CONV_2D"
    tflite_ops = ("CONV_2D",)
    tflite_options = "Conv2DOptions"
    kernel = "arm_convolve_wrapper_s8"

    def backward(self, tb, op: Op) -> None:
        param_backward(tb, op, "CONV_2D_GRAD_INPUT", "CONV_2D_WGRAD_UPDATE")

    def variant(self, g: Graph, op: Op, cg) -> str:
        """"split" (split-stored trained weights), else the shape class: "1x1" (pointwise) or ""."""
        return "split" if cg.head(operand(op, "weights")) else self.shape_class(g, op)

    @staticmethod
    def shape_class(g: Graph, op: Op) -> str:
        """The kernel table's shape class: "1x1" for a pointwise convolution (a matrix multiply of the
        input rows, no im2col), "" for any other geometry (kernel_table.py states the rule)."""
        return "1x1" if is_1x1(g, op) else ""

    def scratch_bytes(self, g: Graph, op: Op, in_place: bool = False) -> int:
        """The DSP kernels' scratch (pockmcu_dsp_conv_buffer_size): the int16 column of four output
        pixels, plus one int8 receptive field unless pointwise; the portable kernels need none. Sized
        for the kernel the table picks for g's features (a split-stored layer then runs the portable
        split kernel and leaves its scratch unused)."""
        kind = DSP_SCRATCH.get(choose(self.kind, self.kernel, g.numerics, g.features, self.shape_class(g, op),
                                      library=g.library, off=g.kernels_off).function)
        if kind is None:
            return 0
        w, y = g.t(operand(op, "weights")), g.t(op.outputs[0])
        depth = int(w.shape[1] * w.shape[2] * g.t(op.inputs[0]).shape[3])
        return dsp_column_bytes(depth, int(np.prod(y.shape[:3]))) + (0 if kind == "conv_1x1" else (depth + 3) // 4 * 4)

    def check(self, g: Graph, op: Op) -> list[str]:
        problems = super().check(g, op)
        x, w = g.t(op.inputs[0]), g.t(operand(op, "weights"))
        if w.data is not None and w.shape[-1] != x.shape[-1]:
            problems.append(f"grouped convolution ({x.shape[-1]} input channels, filter depth {w.shape[-1]})")
        return problems

    def reference(self, g: Graph, op: Op, xs, rt=None):
        x = xs[0]
        w = g.t(operand(op, "weights")).data.astype(np.float64)
        y = g.t(op.outputs[0])
        o = op.options
        acc = np.zeros((x.shape[0], y.shape[1], y.shape[2], y.shape[3]), np.float64)
        for i, j, patch in conv_taps(x, g.t(op.inputs[0]).quant.zp, w.shape[1], w.shape[2], o.stride,
                                     o.dilation, op.prepared.pads, y.shape[1:3]):
            acc += patch @ w[:, i, j, :].T   # exact: |sum| < 2**53
        return [finish(acc, op, g)]

    def macs(self, g: Graph, op: Op) -> int:
        w, y = g.t(operand(op, "weights")), g.t(op.outputs[0])
        return int(np.prod(y.shape[1:])) * int(np.prod(w.shape[1:]))

    def describe(self, g: Graph, op: Op) -> str:
        w, a = g.t(operand(op, "weights")), op.options
        return (f"CONV_2D {w.shape[1]}x{w.shape[2]} stride {a.stride[0]}x{a.stride[1]} "
                f"dilation {a.dilation[0]}x{a.dilation[1]} {a.padding} {a.activation}: "
                f"{list(g.t(op.inputs[0]).shape)} -> {list(g.t(op.outputs[0]).shape)}")


def dw_mult_scratch_bytes(ch_mult: int, in_c: int, k_h: int, k_w: int) -> int:
    """pockmcu_depthwise_conv_mult_dsp_s8_get_buffer_size for ch_mult > 1 (pockmcu_dwm_buffer_size in
    pockmcu_dw_dsp_loops.h): int16 weight rows of one input channel, two gathered columns, the requantization
    parameters (5 words per output) and alignment; with 4 or more input channels at least one multiplier's filter
    copy and requantization parameters."""
    k4 = (k_h * ((k_w + 1) & ~1) + 3) & ~3
    split = ((k_h * k_w * in_c + 3) & ~3) + 12 * in_c + 4 if in_c >= 4 else 0
    return max(2 * k4 * (ch_mult + 2) + 20 * ch_mult + 4, split)


@register
class DepthwiseConv2D(_WindowOp):
    kind = "DEPTHWISE_CONV_2D"
    tflite_ops = ("DEPTHWISE_CONV_2D",)
    tflite_options = "DepthwiseConv2DOptions"
    kernel = "arm_depthwise_conv_wrapper_s8"

    def parse_tflite(self, o, op: Op, tensors) -> ConvOptions:
        x, w = tensors[op.inputs[0]], tensors[operand(op, "weights")]
        return replace(super().parse_tflite(o, op, tensors), ch_mult=w.shape[3] // max(x.shape[3], 1))

    def backward(self, tb, op: Op) -> None:
        param_backward(tb, op, "DEPTHWISE_CONV_2D_GRAD_INPUT", "DEPTHWISE_CONV_2D_WGRAD_UPDATE")

    def check(self, g: Graph, op: Op) -> list[str]:
        problems = super().check(g, op)
        x, w = g.t(op.inputs[0]), g.t(operand(op, "weights"))
        if w.shape[0] != 1 or w.shape[3] != x.shape[3] * op.options.ch_mult:
            problems.append(f"depthwise weights of shape {list(w.shape)} do not match input {list(x.shape)}")
        return problems

    def reference(self, g: Graph, op: Op, xs, rt=None):
        x = xs[0]
        w = g.t(operand(op, "weights")).data.astype(np.float64)
        y = g.t(op.outputs[0])
        o = op.options
        m = o.ch_mult
        acc = np.zeros((x.shape[0],) + y.shape[1:], np.float64)
        for i, j, patch in conv_taps(x, g.t(op.inputs[0]).quant.zp, w.shape[1], w.shape[2], o.stride,
                                     o.dilation, op.prepared.pads, y.shape[1:3]):
            acc += np.repeat(patch, m, axis=-1) * w[0, i, j, :]   # output channel c*m+k reads input channel c
        return [finish(acc, op, g)]

    def macs(self, g: Graph, op: Op) -> int:
        w, y = g.t(operand(op, "weights")), g.t(op.outputs[0])
        return int(np.prod(y.shape[1:])) * w.shape[1] * w.shape[2]

    def describe(self, g: Graph, op: Op) -> str:
        w, a = g.t(operand(op, "weights")), op.options
        return (f"DEPTHWISE_CONV_2D {w.shape[1]}x{w.shape[2]} x{a.ch_mult} stride {a.stride[0]}x{a.stride[1]} "
                f"dilation {a.dilation[0]}x{a.dilation[1]} {a.padding} {a.activation}: "
                f"{list(g.t(op.inputs[0]).shape)} -> {list(g.t(op.outputs[0]).shape)}")

    params_type = "cmsis_nn_dw_conv_params"

    def params_fields(self, op: Op) -> dict:
        return dict(ch_mult=op.options.ch_mult)

    def variant(self, g: Graph, op: Op, cg) -> str:
        """The kernel table's shape class (kernel_table.py, the dspdw block): "3x3" for a 3x3 filter with
        channel multiplier 1, no dilation and a requantization the 3x3 DSP kernel's row loops do exactly
        (every channel's shift <= -1, i.e. a scale below 1/2, and |bias| + 9 * 255 * 128 < 2^30, decided here
        at compile time; the kernel checks it again per call for biases that train), "mult" for a channel
        multiplier above 1 (pockmcu_depthwise_conv_mult_dsp_s8 on a DSP core), "" otherwise."""
        w, o = g.t(operand(op, "weights")), op.options
        if o.ch_mult > 1:
            return "mult"    # a channel multiplier above 1: pockmcu_depthwise_conv_mult_dsp_s8 on a DSP core
        if tuple(w.shape[1:3]) != (3, 3) or o.ch_mult != 1 or tuple(o.dilation) != (1, 1):
            return ""
        bias = g.t(operand(op, "bias")).data if operand(op, "bias") else None
        bound = (np.abs(bias.astype(np.int64)) if bias is not None else np.zeros(1, np.int64)) + 9 * 255 * 128
        shift = np.asarray(op.prepared.shift, np.int64)
        fold = bound.max() + 3 + (129 << np.clip(-shift, 0, 31)) < (1 << 31)    # the output offset folded in
        return "3x3" if np.all((shift <= -1) & (shift >= -31) & fold) and np.all(bound < (1 << 30)) else ""

    def scratch_bytes(self, g: Graph, op: Op, in_place: bool = False) -> int:
        """pockmcu_depthwise_conv_3x3_dsp_s8_get_buffer_size: extended weights, requantization parameters
        and a ring of 3 extended input rows; pockmcu_depthwise_conv_mult_dsp_s8_get_buffer_size (channel
        multiplier above 1); the other depthwise kernels need none."""
        k = choose(self.kind, self.kernel, g.numerics, g.features, self.variant(g, op, None), library=g.library,
                   off=g.kernels_off)
        if k.function == "pockmcu_depthwise_conv_mult_dsp_s8":
            w = g.t(operand(op, "weights"))
            return dw_mult_scratch_bytes(op.options.ch_mult, g.t(op.inputs[0]).shape[3], w.shape[1], w.shape[2])
        if k.function != "pockmcu_depthwise_conv_3x3_dsp_s8":
            return 0
        _, out_h, out_w, _ = g.t(op.outputs[0]).shape
        cols = max((out_w - 1) * op.options.stride[1] + 3, (out_h - 1) * op.options.stride[0] + 3)
        return 4 * (102 + 12 * cols) + 4


# -- training: gradient rules and the backward ops of CONV_2D / DEPTHWISE_CONV_2D -------------------


def weight_scales(g: Graph, op: Op) -> np.ndarray:
    """Per-output-channel float32 weight scales (a per-tensor scale broadcast)."""
    w, out_ch = g.t(operand(op, "weights")), g.t(op.outputs[0]).shape[-1]
    return np.broadcast_to(w.quant.scale.astype(np.float32), (out_ch,)).copy()


def update_coefs(g: Graph, op: Op, qas: bool) -> tuple[np.ndarray, np.ndarray]:
    """Factors from the kernels' raw sums to gradients in units of the stored integers.

    Weights: the kernel sums dz * (x_q - zp_x) = G_W / s_x, and G_Wq = s_w G_W; QAS scales by
    s_w^-2, so the factor is s_x / s_w (QAS) or s_x * s_w (plain). Biases: G_bq = s_b G_b; QAS
    scales by s_b^-2 (s_b = s_x s_w), so 1 / s_b (QAS) or s_b (plain). With QAS the learning rate
    means what it means in float SGD.
    """
    sx = float(g.t(op.inputs[0]).quant.s)
    sw = weight_scales(g, op).astype(np.float64)
    if operand(op, "bias") and g.t(operand(op, "bias")).quant is not None:
        sb = np.broadcast_to(g.t(operand(op, "bias")).quant.scale.astype(np.float64), sw.shape)
    else:
        sb = sx * sw
    wcoef = sx / sw if qas else sx * sw
    bcoef = 1.0 / sb if qas else sb
    return wcoef.astype(np.float32), bcoef.astype(np.float32)


def param_backward(tb, op: Op, grad_input_kind: str, wgrad_kind: str, in_rows=None) -> None:
    """The gradient rule shared by CONV_2D, DEPTHWISE_CONV_2D and FULLY_CONNECTED.

    dz = mask(dy); then (reordered) the weight gradient fused with its update, the bias update,
    and last the input gradient if anything upstream trains.
    """
    g = tb.g
    u = tb.update_of(op)
    x = op.inputs[0]
    wcoef, bcoef = update_coefs(g, op, tb.spec.qas)
    dz = tb.masked(op, tb.grad(op.outputs[0]))
    if u and u.channels:
        saved, xt = x, g.t(x)
        outer, row = in_rows(g, op) if in_rows else (xt.size // xt.shape[-1], xt.shape[-1])
        if u.channels < u.total_channels:
            shape = (xt.shape[:-1] + (u.channels,)) if not in_rows else (outer, u.channels)
            saved = tb.new_tensor(f"{op.name}_saved_input", shape, "int8")
            g.t(saved).quant = xt.quant
            tb.save_before(op, "SLICE", f"{op.name}_save_input", [x], [saved], outer=outer, row=row, offset=0,
                           chunk=u.channels)
        tb.emit(wgrad_kind, f"{op.name}_wgrad_update", [saved, dz], [], layer=op, weights=operand(op, "weights"),
                channel_begin=0, channels=u.channels, coef=wcoef)
    if u and u.bias:
        tb.emit("BIAS_UPDATE", f"{op.name}_bias_update", [dz], [], bias=operand(op, "bias"), coef=bcoef)
    if tb.needs_grad(x):
        dx = tb.grad_tensor(x, f"{tb.short(x)}_grad_from_{op.name}")
        tb.emit(grad_input_kind, f"{op.name}_grad_input", [dz], [dx], layer=op)
        tb.add_grad(x, dx)


def is_1x1(g: Graph, op: Op) -> bool:
    a, w = op.options, g.t(operand(op, "weights"))
    return (tuple(w.shape[1:3]) == (1, 1) and tuple(a.stride) == (1, 1) and not any(op.prepared.pads)
            and w.shape[-1] == g.t(op.inputs[0]).shape[-1])


def _padded_grad(x_shape, pads, stride, dilation, k_hw):
    n, h, w, c = x_shape
    top, left, bottom, right = pads
    return np.zeros((n, h + top + bottom + stride[0] + dilation[0] * k_hw[0],
                     w + left + right + stride[1] + dilation[1] * k_hw[1], c))


def _tap_slices(i, j, a, out_hw):
    r0, c0 = i * a.dilation[0], j * a.dilation[1]
    return (slice(None), slice(r0, r0 + a.stride[0] * (out_hw[0] - 1) + 1, a.stride[0]),
            slice(c0, c0 + a.stride[1] * (out_hw[1] - 1) + 1, a.stride[1]), slice(None))


def _crop(dxp, x_shape, pads):
    return dxp[:, pads[0]:pads[0] + x_shape[1], pads[1]:pads[1] + x_shape[2], :]


@dataclass(frozen=True, eq=False)
class LayerGrad:
    """A backward op of a forward layer: which layer (its options and prepared data are read)."""

    layer: Op


@dataclass(frozen=True, eq=False)
class WeightUpdate:
    """A fused weight gradient + update: of which layer, which RAM tensor, which input channels, and
    the per-output-channel factor from the kernel's raw sums to the stored integers (update_coefs)."""

    layer: Op
    weights: str
    channel_begin: int
    channels: int
    coef: np.ndarray


class _GradOp(OpDef):
    """A backward op attached to a forward layer (options.layer)."""

    Options = LayerGrad

    io_dtypes = ("float32", "int8")

    @staticmethod
    def of_layer(op: Op, name: str) -> Local:
        """``&<layer>_<name>``: a declaration of the forward layer (its params and dims) reused here."""
        return Local(name, owner=op.options.layer.name)

    @staticmethod
    def filter_scale(g: Graph, op: Op) -> Array:
        """The forward layer's per-output-channel weight scales (float32)."""
        return Array("filter_scale", "float", tuple(weight_scales(g, op.options.layer)))


@register
class Conv2DGradInput(_GradOp):
    kind = "CONV_2D_GRAD_INPUT"
    kernel = "pockmcu_conv_grad_input_f32"

    def macs(self, g: Graph, op: Op) -> int:
        """One multiply-accumulate per forward MAC: dx = dz (*) w transposed."""
        f = op.options.layer
        return opdef(f.kind).macs(g, f)

    def reference(self, g: Graph, op: Op, xs, rt=None):
        f = op.options.layer
        a, xshape = f.options, (xs[0].shape[0],) + g.t(f.inputs[0]).shape[1:]
        w = g.t(operand(f, "weights")).data.astype(np.float64) * weight_scales(g, f).astype(np.float64)[:, None, None, None]
        dz = xs[0].astype(np.float64)
        dxp = _padded_grad(xshape, f.prepared.pads, a.stride, a.dilation, w.shape[1:3])
        for i in range(w.shape[1]):
            for j in range(w.shape[2]):
                dxp[_tap_slices(i, j, a, dz.shape[1:3])] += dz @ w[:, i, j, :]
        return [_crop(dxp, xshape, f.prepared.pads)]

    def variant(self, g: Graph, op: Op, cg) -> str:
        return "split" if cg.head(operand(op.options.layer, "weights")) else ""

    def emit(self, g: Graph, op: Op, cg) -> Emission:
        """Reuses the forward layer's params and dims; split-stored weights (codegen.CodeGen.head)
        are read from both their flash array and the RAM rows of the trained channels."""
        w = operand(op.options.layer, "weights")
        head = cg.head(w)
        split = (head[0], head[1]) if head else ()
        args = (self.of_layer(op, "params"), self.of_layer(op, "input_dims"), self.of_layer(op, "filter_dims"),
                Ptr(w), *split, Local("filter_scale", address=False), self.of_layer(op, "output_dims"),
                Ptr(op.inputs[0]), Ptr(op.outputs[0]))
        return Emission(calls=(Call(cg.kernel(op).function, args, status=True),), decls=(self.filter_scale(g, op),))


@register
class Conv2DWgradUpdate(_GradOp):
    """Weight gradient of the trainable input channels, fused with the update (no gradient tensor)."""

    kind = "CONV_2D_WGRAD_UPDATE"
    operands = ("saved_input", "output_grad")
    Options = WeightUpdate
    role = "update"
    kernel = "pockmcu_conv_wgrad_update_s8"

    def macs(self, g: Graph, op: Op) -> int:
        """Per trained weight, one MAC per output position: dz x saved input over the taps."""
        w, dz = g.t(op.options.weights), g.t(operand(op, "output_grad"))
        return int(np.prod(dz.shape[1:3])) * w.shape[0] * w.shape[1] * w.shape[2] * op.options.channels

    def raw_grad(self, g: Graph, op: Op, xs) -> np.ndarray:
        f = op.options.layer
        saved, dz = xs
        a, w = f.options, g.t(operand(f, "weights"))
        k = op.options.channels
        d2 = dz.reshape(-1, dz.shape[-1]).astype(np.float64)
        grad = np.zeros(w.shape[:3] + (k,))
        for i, j, patch in conv_taps(saved, g.t(op.inputs[0]).quant.zp, w.shape[1], w.shape[2], a.stride,
                                     a.dilation, f.prepared.pads, dz.shape[1:3]):
            grad[:, i, j, :] = d2.T @ patch.reshape(-1, k)
        return grad

    def reference(self, g: Graph, op: Op, xs, rt=None):
        w = g.t(op.options.weights)
        b, k = op.options.channel_begin, op.options.channels
        grad = self.raw_grad(g, op, xs)
        coef = np.repeat(op.options.coef, grad[0].size)
        part = w.data[..., b:b + k]
        new = sgd_update(part, grad, coef, rt, w.name, -127, 127).reshape(part.shape)
        rt.params[w.name] = w.data.copy()
        rt.params[w.name][..., b:b + k] = new
        return []

    def scratch_bytes(self, g: Graph, op: Op, in_place: bool = False) -> int:
        """pockmcu_conv_wgrad_update_s8_get_buffer_size: the gradient rows of min(4, O) output channels
        (the kernel works on 4 at a time), KH x KW x k floats each."""
        w = g.t(op.options.weights)
        return 4 * min(4, w.shape[0]) * w.shape[1] * w.shape[2] * op.options.channels

    def filter_dims(self, op: Op, cg) -> Local:
        """A split-stored filter (codegen.CodeGen.head) is updated in its RAM rows of k: filter dims
        {O, KH, KW, k} (``<step>_head_dims``) and channel_begin 0; otherwise the whole RAM tensor at
        channel_begin, with the layer's filter dims."""
        return Local("head_dims") if cg.head(op.options.weights) else self.of_layer(op, "filter_dims")

    def emit(self, g: Graph, op: Op, cg) -> Emission:
        u = op.options
        saved = op.inputs[0]
        decls = [Array("coef", "float", tuple(u.coef)), Struct("input_dims", "cmsis_nn_dims", dims4(g.t(saved).shape))]
        if cg.head(u.weights):
            assert u.channel_begin == 0
            decls.append(Struct("head_dims", "cmsis_nn_dims", dims4(cg.train.stored_shape(u.weights)),
                                comment="the RAM rows of the trained channels"))
        opt = cg.optimizer_args(u.weights)
        function = cg.kernel(op).function
        args = (SCRATCH, self.of_layer(op, "params"), Local("input_dims"), Ptr(saved), self.filter_dims(op, cg),
                cg.param(u.weights), u.channel_begin, self.of_layer(op, "output_dims"), Ptr(operand(op, "output_grad")),
                Local("coef", address=False), opt["accum"], opt["velocity"], "&train.optimizer", opt["rng"])
        query = Call(f"{function}_get_buffer_size", (Local("input_dims"), self.filter_dims(op, cg)))
        return Emission(calls=(Call(function, args, status=True),), decls=tuple(decls), buffer_query=query)


@dataclass(frozen=True, eq=False)
class DepthwiseGrad(LayerGrad):
    """The input gradient of a depthwise layer; ``in_place``: dx may be written over dz
    (training/fusions.py depthwise_grad_in_place)."""

    in_place: bool = False


@register
class DepthwiseGradInput(_GradOp):
    kind = "DEPTHWISE_CONV_2D_GRAD_INPUT"
    Options = DepthwiseGrad
    kernel = "pockmcu_depthwise_conv_grad_input_f32"

    def macs(self, g: Graph, op: Op) -> int:
        f = op.options.layer
        return opdef(f.kind).macs(g, f)

    def reference(self, g: Graph, op: Op, xs, rt=None):
        f = op.options.layer
        a, xshape = f.options, (xs[0].shape[0],) + g.t(f.inputs[0]).shape[1:]
        m = a.ch_mult
        w = g.t(operand(f, "weights")).data.astype(np.float64)[0] * weight_scales(g, f).astype(np.float64)
        dz = xs[0].astype(np.float64)
        dxp = _padded_grad(xshape, f.prepared.pads, a.stride, a.dilation, w.shape[0:2])
        for i in range(w.shape[0]):
            for j in range(w.shape[1]):
                contrib = (dz * w[i, j]).reshape(dz.shape[:3] + (xshape[3], m)).sum(axis=-1)
                dxp[_tap_slices(i, j, a, dz.shape[1:3])] += contrib
        return [_crop(dxp, xshape, f.prepared.pads)]

    # Stride 1, ch_mult 1, when the fusion pass allows it: dx may be written over dz when dz dies here
    # (the planner decides); then the row-by-row kernel (same bits, a small ring of rows as scratch)
    # runs. That halves the peak of a depthwise backward step.
    def shared_inputs(self, g: Graph, op: Op) -> tuple[int, ...]:
        f = op.options.layer
        if not op.options.in_place:
            return ()
        same = g.t(op.inputs[0]).shape == g.t(op.outputs[0]).shape
        return (0,) if tuple(f.options.stride) == (1, 1) and same and f.options.ch_mult == 1 else ()

    def scratch_bytes(self, g: Graph, op: Op, in_place: bool = False) -> int:
        if not in_place:
            return 0
        f = op.options.layer
        kh, dil, pad = g.t(operand(f, "weights")).shape[1], f.options.dilation[0], f.prepared.pads[0]
        x = g.t(f.inputs[0])
        # a ring of rows for a block of up to 16 channels (POCKMCU_DW_GRAD_ROWS_BLOCK)
        return max((kh - 1) * dil - pad + 1, 1) * x.shape[2] * min(x.shape[3], 16) * 4

    def variant(self, g: Graph, op: Op, cg) -> str:
        return "in_place" if op.name in cg.plan.writes_over_input else ""

    def emit(self, g: Graph, op: Op, cg) -> Emission:
        """Reuses the forward layer's params and dims; the in-place (row by row) kernel takes the
        planned scratch context first."""
        w = operand(op.options.layer, "weights")
        ctx = (SCRATCH,) if self.variant(g, op, cg) == "in_place" else ()
        args = (*ctx, self.of_layer(op, "params"), self.of_layer(op, "input_dims"), self.of_layer(op, "filter_dims"),
                Ptr(w), Local("filter_scale", address=False), self.of_layer(op, "output_dims"),
                Ptr(op.inputs[0]), Ptr(op.outputs[0]))
        return Emission(calls=(Call(cg.kernel(op).function, args, status=True),), decls=(self.filter_scale(g, op),))


@register
class DepthwiseWgradUpdate(Conv2DWgradUpdate):
    kind = "DEPTHWISE_CONV_2D_WGRAD_UPDATE"
    kernel = "pockmcu_depthwise_conv_wgrad_update_s8"

    def macs(self, g: Graph, op: Op) -> int:
        w, dz = g.t(op.options.weights), g.t(operand(op, "output_grad"))
        m = op.options.layer.options.ch_mult
        return int(np.prod(dz.shape[1:3])) * w.shape[1] * w.shape[2] * op.options.channels * m

    def raw_grad(self, g: Graph, op: Op, xs) -> np.ndarray:
        f = op.options.layer
        saved, dz = xs
        a, w = f.options, g.t(operand(f, "weights"))
        m, b, k = a.ch_mult, op.options.channel_begin, op.options.channels
        d = dz[..., b * m:(b + k) * m].astype(np.float64)
        grad = np.zeros((w.shape[1], w.shape[2], k * m))
        for i, j, patch in conv_taps(saved, g.t(op.inputs[0]).quant.zp, w.shape[1], w.shape[2], a.stride,
                                     a.dilation, f.prepared.pads, dz.shape[1:3]):
            grad[i, j] = (np.repeat(patch, m, axis=-1) * d).reshape(-1, k * m).sum(axis=0)
        return grad

    def reference(self, g: Graph, op: Op, xs, rt=None):
        f = op.options.layer
        w = g.t(op.options.weights)
        m, b, k = f.options.ch_mult, op.options.channel_begin, op.options.channels
        grad = self.raw_grad(g, op, xs)
        coef = np.tile(op.options.coef[b * m:(b + k) * m], grad.shape[0] * grad.shape[1])
        part = w.data[0, :, :, b * m:(b + k) * m]
        new = sgd_update(part, grad, coef, rt, w.name, -127, 127).reshape(part.shape)
        rt.params[w.name] = w.data.copy()
        rt.params[w.name][0, :, :, b * m:(b + k) * m] = new
        return []

    def scratch_bytes(self, g: Graph, op: Op, in_place: bool = False) -> int:
        """What pockmcu_depthwise_conv_wgrad_update_s8_get_buffer_size asks for: one float per filter
        column (an upper bound; the kernel works tap by tap on the trained columns)."""
        return 4 * g.t(op.options.weights).shape[3]

    def filter_dims(self, op: Op, cg) -> Local:
        """Depthwise weights are never split-stored: the layer's filter dims."""
        return self.of_layer(op, "filter_dims")
