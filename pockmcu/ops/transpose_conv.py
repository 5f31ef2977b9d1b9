"""TRANSPOSE_CONV, int8 with per-tensor or per-channel weights, and its gradients.

Semantics: TFLite Micro's transpose_conv.cc (Prepare) and reference_integer_ops::TransposeConv.
Inputs in the file's order: output_shape (int32, not read: TFLM takes the output tensor's shape),
weights [O, KH, KW, I] (int8, symmetric, per-channel along O or per-tensor), input [N, H, W, I],
optional bias [O] (int32). Every input element scatters into the output:

    acc[n, iy*s_h - pad_h + ky, ix*s_w - pad_w + kx, o] += (x[n, iy, ix, i] - zp_in) * w[o, ky, kx, i]

(out-of-bounds positions are dropped), then acc + bias is requantized per output channel with the
multiplier/shift of s_in * s_w[o] / s_out (double rounding, TFLM's PopulateConvolutionQuantization
Params), plus zp_out, clamped to the fused activation's range (schema >= 2.x has one; NONE before).
The int32 accumulator wraps as TFLM's does. The padding is TFLM's: ComputePaddingHeightWidth on the
OUTPUT's height and width (a convolution from the output back to the input), the top/left value
only. The kernel (kernels_c/pockmcu_transpose_conv_s8.c) gathers instead of scattering: the same
integer sums, no scratch buffer.

Gradients (training): the input gradient is a regular convolution of the output gradient with the
same filter (pockmcu_transpose_conv_grad_input_f32); the weight gradient is fused with its update
(pockmcu_transpose_conv_wgrad_update_s8), the bias update is BIAS_UPDATE; the spec may train the
first k input channels of the weights (the saved input is then those channels).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import fixedpoint as fp
from ..ccode import SCRATCH, Array, Call, Emission, Local, Ptr, Struct, dims4
from ..ir import Graph, Op
from .base import SUPPORTED_ACTIVATIONS, OpDef, fused_activation, operand, register
from .conv import PADDING, LayerGrad, WeightUpdate, weight_scales
from .training_ops import sgd_update


@dataclass(frozen=True)
class TransposeConvOptions:
    stride: tuple[int, int]          # (h, w)
    padding: str                     # "SAME" | "VALID"
    activation: str = "NONE"         # fused activation (base.ACTIVATIONS)


@dataclass(frozen=True, eq=False)
class TransposeConvData:
    """What Prepare computes (TFLM's OpData of transpose_conv.cc)."""

    pads: tuple[int, int]            # (top, left), as TFLM's padding_values
    multiplier: np.ndarray           # int32 per output channel
    shift: np.ndarray                # int32 per output channel
    act_min: int
    act_max: int


def _trunc_div(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def transpose_conv_pads(padding: str, out_hw, k_hw, stride) -> tuple[int, int]:
    """TFLM ComputePaddingHeightWidth(stride, dilation 1, out_h, out_w, KH, KW, padding): the padding of
    a convolution from the output (size out) back to the input, top/left part (C integer division)."""
    pads = []
    for size, k, s in zip(out_hw, k_hw, stride):
        conv_out = _trunc_div(size + s - 1, s) if padding == "SAME" else _trunc_div(size + s - k, s)
        total = max((conv_out - 1) * s + k - size, 0)
        pads.append(total // 2)
    return pads[0], pads[1]


def _wrap32(a: np.ndarray) -> np.ndarray:
    return ((np.asarray(a, np.int64) + (1 << 31)) % (1 << 32)) - (1 << 31)


def _out_rows(n_in: int, stride: int, pad: int, k: int, n_out: int):
    """For tap k: (input indices, output indices) with out = in * stride - pad + k inside the output."""
    o = np.arange(n_in) * stride - pad + k
    ok = (o >= 0) & (o < n_out)
    return np.nonzero(ok)[0], o[ok]


def transpose_conv_acc(x: np.ndarray, zp: int, w: np.ndarray, stride, pads, out_hw) -> np.ndarray:
    """The int32 (wrapping) accumulator [N, OH, OW, O] of TFLM's TransposeConv, bias not added."""
    n, h, wd, _ = x.shape
    o_ch, kh, kw, _ = w.shape
    xc = np.asarray(x, np.int64) - zp
    acc = np.zeros((n, out_hw[0], out_hw[1], o_ch), np.int64)
    wi = np.asarray(w, np.int64)
    for ky in range(kh):
        iy, oy = _out_rows(h, stride[0], pads[0], ky, out_hw[0])
        for kx in range(kw):
            ix, ox = _out_rows(wd, stride[1], pads[1], kx, out_hw[1])
            if iy.size and ix.size:
                acc[:, oy[:, None], ox[None, :], :] += xc[:, iy[:, None], ix[None, :], :] @ wi[:, ky, kx, :].T
    return _wrap32(acc)


def transpose_conv_s8(x, zp_in, w, bias, stride, p: TransposeConvData, zp_out, out_hw) -> np.ndarray:
    """reference_integer_ops::TransposeConv: accumulate, + bias (wrapping), requantize, clamp."""
    acc = transpose_conv_acc(x, zp_in, w, stride, p.pads, out_hw)
    if bias is not None:
        acc = _wrap32(acc + np.asarray(bias, np.int64))
    out = fp.multiply_by_quantized_multiplier(acc, p.multiplier, p.shift) + zp_out
    return np.clip(out, p.act_min, p.act_max).astype(np.int8)


def _tconv_update_coefs(g: Graph, op: Op, qas: bool) -> tuple[np.ndarray, np.ndarray]:
    """conv.update_coefs for TRANSPOSE_CONV's operand order: the kernel sums dz * (x_q - zp_x) =
    G_W / s_x; QAS scales the int8-weight gradient by s_w^-2 and the bias gradient by s_b^-2."""
    sx = float(g.t(operand(op, "input")).quant.s)
    sw = weight_scales(g, op).astype(np.float64)
    b = operand(op, "bias")
    sb = (np.broadcast_to(g.t(b).quant.scale.astype(np.float64), sw.shape) if b and g.t(b).quant is not None
          else sx * sw)
    wcoef = sx / sw if qas else sx * sw
    bcoef = 1.0 / sb if qas else sb
    return wcoef.astype(np.float32), bcoef.astype(np.float32)


@register
class TransposeConv(OpDef):
    kind = "TRANSPOSE_CONV"
    tflite_ops = ("TRANSPOSE_CONV",)
    tflite_options = "TransposeConvOptions"
    Options = TransposeConvOptions
    operands = ("output_shape", "weights", "input", "bias")
    kernel = "pockmcu_transpose_conv_s8"

    def parse_tflite(self, o, op: Op, tensors) -> TransposeConvOptions:
        return TransposeConvOptions(stride=(o.StrideH(), o.StrideW()), padding=PADDING.get(o.Padding(), "SAME"),
                                    activation=fused_activation(o.FusedActivationFunction()))

    def check(self, g: Graph, op: Op) -> list[str]:
        problems = super().check(g, op)
        o = op.options
        if o.activation not in SUPPORTED_ACTIVATIONS:
            problems.append(o.activation)
        if len(op.inputs) < 3 or not operand(op, "input") or not operand(op, "weights"):
            return problems + ["TRANSPOSE_CONV needs output_shape, weights and input"]
        x, w, y = g.t(operand(op, "input")), g.t(operand(op, "weights")), g.t(op.outputs[0])
        if w.dtype != "int8" or w.data is None:
            problems.append(f"weights '{w.name}' are {w.dtype}{'' if w.is_const else ' and not constant'} "
                            "(need constant int8)")
        elif w.quant is None or np.any(w.quant.zero_point != 0):
            problems.append(f"weights '{w.name}' need symmetric int8 quantization (zero point 0)")
        elif w.quant.scale.size not in (1, w.shape[0]):
            problems.append(f"weights '{w.name}' have {w.quant.scale.size} scales for {w.shape[0]} output channels")
        if len(x.shape) != 4 or len(y.shape) != 4 or len(w.shape) != 4:
            problems.append(f"TRANSPOSE_CONV needs 4-D input, weights and output (got {list(x.shape)}, "
                            f"{list(w.shape)}, {list(y.shape)})")
            return problems
        if w.shape[3] != x.shape[3] or w.shape[0] != y.shape[3] or x.shape[0] != y.shape[0]:
            problems.append(f"weights {list(w.shape)} do not match input {list(x.shape)} and output {list(y.shape)}")
        if min(o.stride) < 1:
            problems.append(f"stride {list(o.stride)} (need >= 1)")
        shape_t = operand(op, "output_shape")
        if shape_t and g.t(shape_t).data is not None and \
                [int(v) for v in g.t(shape_t).data.reshape(-1)] != [int(d) for d in y.shape]:
            problems.append(f"output_shape {g.t(shape_t).data.reshape(-1).tolist()} differs from the output tensor's "
                            f"shape {list(y.shape)}; re-export the model with a static output shape")
        b = operand(op, "bias")
        if b:
            bt = g.t(b)
            if bt.dtype == "int64":
                problems.append(f"bias '{bt.name}' is int64 (TFLite Micro reads int8 TRANSPOSE_CONV biases as int32; "
                                "int64 biases belong to 16x8 models, which pockmcu does not compile)")
            elif bt.dtype != "int32" or bt.data is None:
                problems.append(f"bias '{bt.name}' is {bt.dtype} (need constant int32)")
            elif bt.size != y.shape[3]:
                problems.append(f"bias '{bt.name}' has {bt.size} values for {y.shape[3]} output channels")
        if g.numerics == "onnxruntime":
            problems.append("TRANSPOSE_CONV with onnxruntime numerics")
        return problems

    def prepare(self, g: Graph, op: Op) -> TransposeConvData:
        o = op.options
        x, w, y = g.t(operand(op, "input")), g.t(operand(op, "weights")), g.t(op.outputs[0])
        pads = transpose_conv_pads(o.padding, y.shape[1:3], w.shape[1:3], o.stride)
        scales = np.broadcast_to(w.quant.scale.astype(np.float32), (w.shape[0],))
        mult, shift = fp.conv_per_channel_multipliers(x.quant.s, scales, y.quant.s)
        act_min, act_max = fp.activation_range(o.activation, y.quant.s, y.quant.zp)
        return TransposeConvData(pads, mult, shift, act_min, act_max)

    def reference(self, g: Graph, op: Op, xs, rt=None):
        x, w, y = g.t(operand(op, "input")), g.t(operand(op, "weights")), g.t(op.outputs[0])
        b = operand(op, "bias")
        xv = np.asarray(xs[0]).reshape((-1,) + tuple(x.shape[1:]))
        out = transpose_conv_s8(xv, x.quant.zp, w.data, g.t(b).data if b else None, op.options.stride,
                                op.prepared, y.quant.zp, y.shape[1:3])
        return [out]

    def macs(self, g: Graph, op: Op) -> int:
        """One MAC per (input element, tap, output channel), out-of-bounds taps included."""
        x, w = g.t(operand(op, "input")), g.t(operand(op, "weights"))
        return int(np.prod(x.shape[1:])) * w.shape[0] * w.shape[1] * w.shape[2]

    def describe(self, g: Graph, op: Op) -> str:
        w, a = g.t(operand(op, "weights")), op.options
        return (f"TRANSPOSE_CONV {w.shape[1]}x{w.shape[2]} stride {a.stride[0]}x{a.stride[1]} {a.padding} "
                f"{a.activation}: {list(g.t(operand(op, 'input')).shape)} -> {list(g.t(op.outputs[0]).shape)}")

    def backward(self, tb, op: Op) -> None:
        """dz = mask(dy) (clamped outputs pass nothing); the weight gradient fused with its update and
        the bias update first (reordered), then the input gradient if anything upstream trains."""
        g = tb.g
        u = tb.update_of(op)
        x = operand(op, "input")
        wcoef, bcoef = _tconv_update_coefs(g, op, tb.spec.qas)
        dz = tb.masked(op, tb.grad(op.outputs[0]))
        if u and u.channels:
            saved, xt = x, g.t(x)
            if u.channels < u.total_channels:
                saved = tb.new_tensor(f"{op.name}_saved_input", xt.shape[:-1] + (u.channels,), "int8")
                g.t(saved).quant = xt.quant
                tb.save_before(op, "SLICE", f"{op.name}_save_input", [x], [saved], outer=xt.size // xt.shape[-1],
                               row=xt.shape[-1], offset=0, chunk=u.channels)
            tb.emit("TRANSPOSE_CONV_WGRAD_UPDATE", f"{op.name}_wgrad_update", [saved, dz], [], layer=op,
                    weights=operand(op, "weights"), channel_begin=0, channels=u.channels, coef=wcoef)
        if u and u.bias:
            tb.emit("BIAS_UPDATE", f"{op.name}_bias_update", [dz], [], bias=operand(op, "bias"), coef=bcoef)
        if tb.needs_grad(x):
            dx = tb.grad_tensor(x, f"{tb.short(x)}_grad_from_{op.name}")
            tb.emit("TRANSPOSE_CONV_GRAD_INPUT", f"{op.name}_grad_input", [dz], [dx], layer=op)
            tb.add_grad(x, dx)

    def emit(self, g: Graph, op: Op, cg) -> Emission:
        p, o = op.prepared, op.options
        x, w, y = g.t(operand(op, "input")), g.t(operand(op, "weights")), g.t(op.outputs[0])
        b = operand(op, "bias")
        decls = (
            Array("multiplier", "int32_t", tuple(int(v) for v in p.multiplier)),
            Array("shift", "int32_t", tuple(int(v) for v in p.shift)),
            Struct("params", "cmsis_nn_conv_params", dict(
                input_offset=-x.quant.zp, output_offset=y.quant.zp,
                stride=dict(w=o.stride[1], h=o.stride[0]), padding=dict(w=p.pads[1], h=p.pads[0]),
                dilation=dict(w=1, h=1), activation=dict(min=p.act_min, max=p.act_max))),
            Struct("quant", "cmsis_nn_per_channel_quant_params",
                   (Local("multiplier", address=False, cast="int32_t *"), Local("shift", address=False, cast="int32_t *"))),
            Struct("input_dims", "cmsis_nn_dims", dims4(x.shape)),
            Struct("filter_dims", "cmsis_nn_dims", dims4(w.shape)),
            Struct("bias_dims", "cmsis_nn_dims", (1, 1, 1, y.shape[3] if b else 0)),
            Struct("output_dims", "cmsis_nn_dims", dims4(y.shape)),
        )
        return Emission(decls=decls, calls=(Call(cg.kernel(op).function, (
            Local("params"), Local("quant"), Local("input_dims"), Ptr(x.name), Local("filter_dims"), Ptr(w.name),
            Local("bias_dims"), Ptr(b) if b else "NULL", Local("output_dims"), Ptr(y.name)), status=True),))


# -- the backward ops -------------------------------------------------------------------------------


def _gathered_grad(dz: np.ndarray, in_hw, stride, pads, ky: int, kx: int) -> np.ndarray:
    """dz at the output positions input (iy, ix) reaches through tap (ky, kx), zeros where outside:
    [N, H, W, O]."""
    n, oh, ow, o_ch = dz.shape
    out = np.zeros((n, in_hw[0], in_hw[1], o_ch), dz.dtype)
    iy, oy = _out_rows(in_hw[0], stride[0], pads[0], ky, oh)
    ix, ox = _out_rows(in_hw[1], stride[1], pads[1], kx, ow)
    if iy.size and ix.size:
        out[:, iy[:, None], ix[None, :], :] = dz[:, oy[:, None], ox[None, :], :]
    return out


@register
class TransposeConvGradInput(OpDef):
    """dx[n, iy, ix, i] = sum over taps and o of dz[n, iy*s - pad + ky, ix*s - pad + kx, o] * s_w[o] *
    w[o, ky, kx, i]: a convolution of the output gradient (float32)."""

    kind = "TRANSPOSE_CONV_GRAD_INPUT"
    Options = LayerGrad
    kernel = "pockmcu_transpose_conv_grad_input_f32"
    io_dtypes = ("float32",)

    def macs(self, g: Graph, op: Op) -> int:
        f = op.options.layer
        return TransposeConv().macs(g, f)

    def reference(self, g: Graph, op: Op, xs, rt=None):
        f = op.options.layer
        x = g.t(operand(f, "input"))
        w = g.t(operand(f, "weights")).data.astype(np.float64) * weight_scales(g, f).astype(np.float64)[:, None, None, None]
        dz = np.asarray(xs[0], np.float64)
        dx = np.zeros((dz.shape[0],) + tuple(x.shape[1:]))
        for ky in range(w.shape[1]):
            for kx in range(w.shape[2]):
                dx += _gathered_grad(dz, x.shape[1:3], f.options.stride, f.prepared.pads, ky, kx) @ w[:, ky, kx, :]
        return [dx]

    def emit(self, g: Graph, op: Op, cg) -> Emission:
        f = op.options.layer
        return Emission(
            decls=(Array("filter_scale", "float", tuple(float(s) for s in weight_scales(g, f))),),
            calls=(Call(cg.kernel(op).function, (
                Local("params", owner=f.name), Local("input_dims", owner=f.name), Local("filter_dims", owner=f.name),
                Ptr(operand(f, "weights")), Local("filter_scale", address=False), Local("output_dims", owner=f.name),
                Ptr(op.inputs[0]), Ptr(op.outputs[0])), status=True),))


@register
class TransposeConvWgradUpdate(OpDef):
    """The weight gradient of the trainable input channels fused with the update: for each output
    channel o, G[ky, kx, c] = sum over (n, iy, ix) of dz[n, iy*s - pad + ky, ix*s - pad + kx, o] *
    (x[n, iy, ix, c] - zp_x), then the update of w[o, ky, kx, c] with coef[o] (conv.update_coefs)."""

    kind = "TRANSPOSE_CONV_WGRAD_UPDATE"
    operands = ("saved_input", "output_grad")
    Options = WeightUpdate
    role = "update"
    kernel = "pockmcu_transpose_conv_wgrad_update_s8"
    io_dtypes = ("float32", "int8")

    def macs(self, g: Graph, op: Op) -> int:
        x, w = g.t(op.inputs[0]), g.t(op.options.weights)
        return int(np.prod(x.shape[1:3])) * w.shape[0] * w.shape[1] * w.shape[2] * op.options.channels

    def raw_grad(self, g: Graph, op: Op, xs) -> np.ndarray:
        f = op.options.layer
        saved, dz = xs
        w = g.t(operand(f, "weights"))
        k = op.options.channels
        xc = (np.asarray(saved, np.float64) - g.t(op.inputs[0]).quant.zp).reshape(-1, k)
        dz = np.asarray(dz, np.float64)
        grad = np.zeros(w.shape[:3] + (k,))
        for ky in range(w.shape[1]):
            for kx in range(w.shape[2]):
                d = _gathered_grad(dz, saved.shape[1:3], f.options.stride, f.prepared.pads, ky, kx)
                grad[:, ky, kx, :] = d.reshape(-1, d.shape[-1]).T @ xc
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
        w = g.t(op.options.weights)
        return 4 * w.shape[1] * w.shape[2] * op.options.channels

    def emit(self, g: Graph, op: Op, cg) -> Emission:
        f = op.options.layer
        saved = g.t(op.inputs[0])
        wt = op.options.weights
        opt = cg.optimizer_args(wt)
        return Emission(
            decls=(Array("coef", "float", tuple(float(c) for c in op.options.coef)),
                   Struct("input_dims", "cmsis_nn_dims", dims4(saved.shape))),
            calls=(Call(cg.kernel(op).function, (
                SCRATCH, Local("params", owner=f.name), Local("input_dims"), Ptr(saved.name),
                Local("filter_dims", owner=f.name), Ptr(wt), op.options.channel_begin, Local("output_dims", owner=f.name),
                Ptr(operand(op, "output_grad")), Local("coef", address=False), opt["accum"], opt["velocity"],
                "&train.optimizer", opt["rng"]), status=True),),
            buffer_query=Call("pockmcu_transpose_conv_wgrad_update_s8_get_buffer_size",
                              (Local("input_dims"), Local("filter_dims", owner=f.name))))
