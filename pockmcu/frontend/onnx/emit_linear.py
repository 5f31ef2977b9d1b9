"""The ops with weights: ONNX Conv / MatMul / Gemm (QDQ), ConvInteger / MatMulInteger, QLinearConv /
QLinearMatMul / QGemm (QOperator) -> CONV_2D, DEPTHWISE_CONV_2D, FULLY_CONNECTED.

The node handlers read the node into a ``Pending`` op in ONNX terms (NCHW, OIHW / KxN weights as
stored, ONNX pads); the emitters lay the weights out as the IR wants them (OHWI, 1HWC, NxK; a flatten
feeding a fully connected layer is absorbed by permuting its weight rows), turn the bias into int32
in units of s_x * s_w, and build the IR op. The IR attributes of each family are built in one place:
``conv_ir_attrs`` and ``fc_ir_attrs``.
"""

from __future__ import annotations

import numpy as np

from ...ir import Quant
from ...ops.base import same_or_valid_pads, window_out_size
from ...ops.transpose_conv import transpose_conv_pads
from .build import Builder
from .emit_binary import align
from .emit_move import plain
from .layout import NCHW_AS_NHWC, Layout
from .read import node_attrs, window
from .values import Act, Deq, Pending, QConst, int_data

# -- reading the nodes ---------------------------------------------------------------------------


def weight_input(cx: Builder, name: str) -> QConst:
    v = cx.val(name)
    if isinstance(v, Deq) and isinstance(v.src, QConst):
        return v.src
    if isinstance(v, QConst):
        return v
    if isinstance(v, np.ndarray) and v.dtype.kind == "f":
        raise cx.err(f"float weights '{name}' (not quantized): quantize the model's weights too")
    raise cx.err(f"weights '{name}' must be a constant quantized with DequantizeLinear")


def bias_input(cx: Builder, name: str):
    if not name:
        return None
    v = cx.val(name)
    if isinstance(v, Deq) and isinstance(v.src, QConst):
        return v.src
    if isinstance(v, np.ndarray) and v.dtype.kind == "f":
        return v.astype(np.float32)
    raise cx.err(f"bias '{name}' must be a constant")


def qweight(cx: Builder, node, i: int, axis: int) -> QConst:
    """Weights input i of a QLinear node, with its scale/zero point inputs at i+1, i+2."""
    w = cx.cval(node.input[i], "weights")
    scale, zp, _ = cx.qparams(node, i + 1, i + 2, str(w.dtype))
    return QConst(w, scale, zp, axis, node.input[i])


def qbias(cx: Builder, name: str) -> QConst:
    """A QOperator int32 bias (its scale is implied: s_x * s_w)."""
    return QConst(cx.cval(name, "bias"), None, np.zeros(1, np.int64), 0, name)


def integer_weights(cx: Builder, node) -> tuple[np.ndarray, np.ndarray]:
    """(weights, zero points int64 1-D) of a ConvInteger / MatMulInteger node."""
    w = cx.cval(node.input[1], "weights")
    wzp = cx.cval(node.input[3]) if len(node.input) > 3 and node.input[3] else np.zeros(1, w.dtype)
    return w, wzp.astype(np.int64).reshape(-1)


def integer_input_quant(cx: Builder, node, x: Act, zp_i: int) -> Act:
    zp_name = node.input[zp_i] if len(node.input) > zp_i else ""
    zp = int(cx.cval(zp_name).reshape(-1)[0]) if zp_name else 0
    z8 = zp - (128 if x.onnx_dtype == "uint8" else 0)
    q = cx.q_of(x.ir)
    if q is None:
        return cx.with_quant(x, Quant(scale=np.ones(1, np.float32), zero_point=np.array([z8], np.int32)))
    if q.zp != z8:
        raise cx.err(f"zero point {zp} differs from the input's quantization ({q.zp})")
    return x


def deq_act(cx: Builder, node, what: str) -> Act:
    """Input 0 of a float Conv/MatMul/Gemm: it must be DequantizeLinear of a quantized activation."""
    x = cx.val(node.input[0])
    if not (isinstance(x, Deq) and isinstance(x.src, Act)):
        raise cx.err(what)
    return x.src


def conv_like(cx: Builder, node, x: Act, w: QConst, bias, int_acc=False) -> Pending:
    at = node_attrs(node)
    if len(x.shape) != 4:
        raise cx.err(f"{node.op_type} on a rank-{len(x.shape)} input (only 2-D convolutions, NCHW)")
    if w.data.ndim != 4:
        raise cx.err(f"weights of shape {list(w.data.shape)} (need OIHW)")
    o, i, kh, kw = w.data.shape
    strides = tuple(at.get("strides", (1, 1)))
    dil = tuple(at.get("dilations", (1, 1)))
    group = int(at.get("group", 1))
    c = x.shape[1]
    if i * group != c:
        raise cx.err(f"weights {list(w.data.shape)} with group {group} do not match {c} input channels")
    pads, out_hw = window(at, x.shape[2:], (kh, kw), strides, dil, cx.err)
    if group == 1:
        kind = "CONV_2D"
    elif group == c and i == 1:
        kind = "DEPTHWISE_CONV_2D"
    else:
        raise cx.err(f"grouped convolution (group {group} of {c} channels); only group 1 and group = "
                     "channels (depthwise) are supported")
    attrs = dict(w=w, stride=strides, dilation=dil, pads=pads, out_shape=(1, o) + out_hw, group=group,
                 in_hw=tuple(x.shape[2:]), kernel_hw=(kh, kw))
    if bias is not None:
        attrs["bias"] = bias
    return Pending(kind, cx.k, [x], attrs, int_acc=int_acc)


def fc_like(cx: Builder, x: Act, w_kn: np.ndarray, scale, zp, bias, name: str, int_acc=False) -> Pending:
    if w_kn.ndim != 2:
        raise cx.err(f"weights of shape {list(w_kn.shape)} (need a 2-D matrix)")
    if x.shape[-1] != w_kn.shape[0]:
        raise cx.err(f"input {list(x.shape)} does not match weights {list(w_kn.shape)}")
    w = QConst(w_kn, scale, zp, 1, name)
    attrs = dict(w=w, out_shape=tuple(x.shape[:-1]) + (w_kn.shape[1],))
    if bias is not None:
        attrs["bias"] = bias
    return Pending("FULLY_CONNECTED", cx.k, [x], attrs, int_acc=int_acc)


def conv(cx: Builder, node):
    x = deq_act(cx, node, "Conv input must be DequantizeLinear of a quantized activation")
    bias = bias_input(cx, node.input[2]) if len(node.input) > 2 else None
    cx.env[node.output[0]] = conv_like(cx, node, x, weight_input(cx, node.input[1]), bias)


def conv_integer(cx: Builder, node):
    x = integer_input_quant(cx, node, cx.act_input(node.input[0]), 2)
    w, wzp = integer_weights(cx, node)
    cx.env[node.output[0]] = conv_like(cx, node, x, QConst(w, None, wzp, 0, node.input[1]), None, int_acc=True)


def qlinear_conv(cx: Builder, node):
    x = cx.qact(node, 0)
    w = qweight(cx, node, 3, 0)
    bias = qbias(cx, node.input[8]) if len(node.input) > 8 and node.input[8] else None
    p = conv_like(cx, node, x, w, bias)
    cx.env[node.output[0]] = cx.emit(p, node.output[0], *cx.qout(node, 6))


def matmul(cx: Builder, node):
    x = deq_act(cx, node, "MatMul input A must be DequantizeLinear of a quantized activation")
    b = cx.val(node.input[1])
    if isinstance(b, Deq) and isinstance(b.src, Act):          # two activations: BATCH_MATMUL
        cx.env[node.output[0]] = Pending("BATCH_MATMUL", cx.k, [x, b.src])
        return
    w = weight_input(cx, node.input[1])
    if w.data.ndim != 2:
        raise cx.err(f"MatMul with a rank-{w.data.ndim} constant (only 2-D weights)")
    if w.scale is not None and w.scale.size > 1 and w.axis != 1:
        raise cx.err("MatMul weights quantized per row (need per output column, axis 1)")
    cx.env[node.output[0]] = fc_like(cx, x, w.data, w.scale, w.zp, None, w.name)


def matmul_integer(cx: Builder, node):
    x = integer_input_quant(cx, node, cx.act_input(node.input[0]), 2)
    w, wzp = integer_weights(cx, node)
    if wzp.size > 1 and np.any(wzp != wzp[0]):
        raise cx.err("per-column weight zero points")
    cx.env[node.output[0]] = fc_like(cx, x, w, None, wzp[:1], None, node.input[1], int_acc=True)


def gemm(cx: Builder, node):
    at = node_attrs(node)
    x = deq_act(cx, node, "Gemm input A must be DequantizeLinear of a quantized activation")
    if at.get("transA", 0):
        raise cx.err("Gemm with transA=1")
    w = weight_input(cx, node.input[1])
    scale = w.scale
    if w.data.ndim != 2:
        raise cx.err(f"Gemm weights of shape {list(w.data.shape)}")
    per_col_axis = 0 if at.get("transB", 0) else 1
    if scale is not None and scale.size > 1 and w.axis != per_col_axis:
        raise cx.err("Gemm weights quantized per input feature (need per output feature)")
    w_kn = w.data.T if at.get("transB", 0) else w.data
    alpha, beta = float(at.get("alpha", 1.0)), float(at.get("beta", 1.0))
    if alpha != 1.0:
        scale = (scale * np.float32(alpha)).astype(np.float32)
    bias = bias_input(cx, node.input[2]) if len(node.input) > 2 else None
    if bias is not None and beta != 1.0:
        if isinstance(bias, QConst):
            bias = QConst(bias.data, (bias.scale * np.float32(beta)).astype(np.float32), bias.zp, bias.axis,
                          bias.name)
        else:
            bias = bias * np.float32(beta)
    cx.env[node.output[0]] = fc_like(cx, x, w_kn, scale, w.zp, bias, w.name)


def qlinear_matmul(cx: Builder, node):
    x = cx.qact(node, 0)
    if not isinstance(cx.val(node.input[3]), np.ndarray):      # two activations: BATCH_MATMUL
        p = Pending("BATCH_MATMUL", cx.k, [x, cx.qact(node, 3)])
        cx.env[node.output[0]] = cx.emit(p, node.output[0], *cx.qout(node, 6))
        return
    w = qweight(cx, node, 3, 1)
    p = fc_like(cx, x, w.data, w.scale, w.zp, None, w.name)
    cx.env[node.output[0]] = cx.emit(p, node.output[0], *cx.qout(node, 6))


def qgemm(cx: Builder, node):
    at = node_attrs(node)
    if at.get("transA", 0):
        raise cx.err("QGemm with transA=1")
    if len(node.input) < 9 or not node.input[7]:
        raise cx.err("QGemm with a float output (no y_scale)")
    x = cx.qact(node, 0)
    trans_b = at.get("transB", 0)
    w = qweight(cx, node, 3, 0 if trans_b else 1)
    scale = w.scale * np.float32(at.get("alpha", 1.0))
    bias = qbias(cx, node.input[6]) if node.input[6] else None
    p = fc_like(cx, x, w.data.T if trans_b else w.data, scale.astype(np.float32), w.zp, bias, w.name)
    cx.env[node.output[0]] = cx.emit(p, node.output[0], *cx.qout(node, 7))


# -- weights and bias as the IR holds them ---------------------------------------------------------


def weights(cx: Builder, p: Pending, w: QConst, sx: float, n_out: int, axis_out: int):
    """(int8 data, scale float32 [1] or [n_out], zero point int array) of a pending conv/FC's weights."""
    data, zp = int_data(w.data, w.zp)
    if data.dtype != np.int8:
        raise cx.err(f"{data.dtype} weights (need int8 or uint8)")
    if p.int_acc:
        scale = (np.asarray(p.acc_scale, np.float64) / float(sx)).astype(np.float32)
    else:
        scale = np.asarray(w.scale, np.float32).reshape(-1)
        if scale.size > 1 and w.axis != axis_out:
            raise cx.err("weights quantized per input channel (need per output channel)")
    zp = zp.reshape(-1)
    if scale.size not in (1, n_out):
        raise cx.err(f"{scale.size} weight scales for {n_out} output channels")
    if zp.size > 1 and np.all(zp == zp[0]) and scale.size == 1:
        zp = zp[:1]
    return data, scale.astype(np.float32), zp


def bias_int32(cx: Builder, bias, acc_scale: np.ndarray, n: int) -> np.ndarray:
    """The int32 bias in units of acc_scale = s_x * s_w[c] (as stored when it matches, else rescaled)."""
    if isinstance(bias, QConst):
        data = bias.data.reshape(-1)
        if data.dtype.kind not in "iu":
            raise cx.err("bias is not an integer constant")
        if np.any(bias.zp != 0):
            raise cx.err("bias with a non-zero zero point")
        data = np.broadcast_to(data.astype(np.int64), (n,))
        if bias.scale is None:
            return data.astype(np.int32)
        bs = np.broadcast_to(np.asarray(bias.scale, np.float64).reshape(-1), (n,))
        if np.allclose(bs, acc_scale, rtol=1e-6, atol=0):
            return data.astype(np.int32)
        real = data * bs
    else:
        real = np.broadcast_to(np.asarray(bias, np.float64).reshape(-1), (n,))
    q = np.rint(real / acc_scale)
    return np.clip(q, -(2 ** 31), 2 ** 31 - 1).astype(np.int32)


def bias_const(cx: Builder, bias, out: str, sx: float, scale: np.ndarray, n: int) -> str:
    """The IR int32 bias tensor (quantized with s_x * s_w) of a conv / FC writing ``out``."""
    acc = (np.float32(sx) * np.broadcast_to(scale, (n,))).astype(np.float32)
    name = bias.name if isinstance(bias, QConst) and bias.name else f"{out}_bias"
    return cx.const(name, bias_int32(cx, bias, acc.astype(np.float64), n),
                    Quant(scale=acc, zero_point=np.zeros(n, np.int32), axis=0))


# == IR attributes of CONV_2D / DEPTHWISE_CONV_2D: the one place they are built ====================


def tflite_padding(in_hw, k_hw, stride, dil, pads, out_hw) -> str:
    """SAME or VALID when the ONNX window is TFLite's, else EXPLICIT (the op then reads ``pads``)."""
    for padding in ("SAME", "VALID"):
        out = tuple(window_out_size(padding, in_hw[i], k_hw[i], stride[i], dil[i]) for i in range(2))
        if out == tuple(out_hw) and same_or_valid_pads(padding, in_hw, k_hw, stride, dil, out) == tuple(pads):
            return padding
    return "EXPLICIT"


def conv_ir_attrs(p: Pending, activation: str, in_channels: int) -> dict:
    a = p.attrs
    padding = tflite_padding(a["in_hw"], a["kernel_hw"], a["stride"], a["dilation"], a["pads"], a["out_shape"][2:])
    attrs = dict(stride=a["stride"], dilation=a["dilation"], padding=padding, pads=a["pads"], activation=activation)
    if p.kind == "DEPTHWISE_CONV_2D":
        attrs["ch_mult"] = a["out_shape"][1] // in_channels
    return attrs


def emit_conv(cx: Builder, p: Pending, out: str, q: Quant, dtype: str) -> Act:
    a = p.attrs
    x = p.inputs[0]
    xin = cx.materialize(x, NCHW_AS_NHWC)
    sx = cx.q_of(xin).s
    o = a["out_shape"][1]
    data, scale, zp = weights(cx, p, a["w"], sx, o, 0)
    if np.any(zp != 0):
        raise cx.err("convolution weights need symmetric quantization (zero point 0); "
                     "quantize with weight_type=QuantType.QInt8")
    kh, kw = a["kernel_hw"]
    if p.kind == "CONV_2D":
        w_ir = data.transpose(0, 2, 3, 1)
        wq = Quant(scale=scale, zero_point=np.zeros(scale.shape, np.int32), axis=0)
    else:
        w_ir = data.reshape(o, kh, kw).transpose(1, 2, 0)[None]
        wq = Quant(scale=scale, zero_point=np.zeros(scale.shape, np.int32), axis=3)
    inputs = [xin, cx.const(a["w"].name, w_ir, wq)]
    if "bias" in a:
        inputs.append(bias_const(cx, a["bias"], out, sx, scale, o))
    act, clamp = cx.activation(p, q)
    attrs = conv_ir_attrs(p, act, x.shape[1])
    y = cx.finish(p.kind, inputs, out, NCHW_AS_NHWC.ir_shape(a["out_shape"]), q, clamp, **attrs)
    return Act(y, NCHW_AS_NHWC, a["out_shape"], dtype)


# == IR attributes of FULLY_CONNECTED: the one place they are built ================================


def fc_ir_attrs(activation: str, out_shape) -> dict:
    return dict(activation=activation, keep_num_dims=len(out_shape) > 2, weights_format=0)


def emit_fully_connected(cx: Builder, p: Pending, out: str, q: Quant, dtype: str) -> Act:
    a = p.attrs
    x = p.inputs[0]
    w_kn = a["w"].data
    if len(x.shape) == 2 and x.layout.pre is not None:
        xin = x.ir
        w_kn = w_kn[x.layout.flat_index(x.shape)]          # the flatten's order, absorbed by the weights
    else:
        xin = cx.materialize(x, Layout.identity(len(x.shape)))
    sx = cx.q_of(xin).s
    n = w_kn.shape[1]
    data, scale, zp = weights(cx, p, QConst(w_kn, a["w"].scale, a["w"].zp, 1, a["w"].name), sx, n, 1)
    if scale.size > 1 and np.any(zp != 0):
        raise cx.err("per-channel fully connected weights need zero point 0")
    zp = zp[:1] if scale.size == 1 else np.zeros(n, np.int64)
    if zp.size != scale.size:
        raise cx.err("per-channel weight zero points with per-tensor scale")
    wq = Quant(scale=scale, zero_point=zp.astype(np.int32), axis=0)
    inputs = [xin, cx.const(a["w"].name, np.ascontiguousarray(data.T), wq)]
    if "bias" in a:
        inputs.append(bias_const(cx, a["bias"], out, sx, scale, n))
    act, clamp = cx.activation(p, q)
    shape = a["out_shape"]
    y = cx.finish("FULLY_CONNECTED", inputs, out, shape, q, clamp, **fc_ir_attrs(act, shape))
    return Act(y, Layout.identity(len(shape)), shape, dtype)


# == BATCH_MATMUL (MatMul of two activations) and TRANSPOSE_CONV (ConvTranspose) ======================


def emit_batch_matmul(cx: Builder, p: Pending, out: str, q: Quant, dtype: str) -> Act:
    """A MatMul of two activations: ONNX broadcasting of the batch axes, both operands in the ONNX layout;
    an operand held with its last two axes swapped (a Transpose before the MatMul, as in Q @ K^T) is read
    transposed by the kernel (adj_x / adj_y) instead of being laid out."""
    a, b = (plain(cx, v) for v in p.inputs)
    if len(a.shape) < 2 or len(b.shape) < 2:
        raise cx.err(f"MatMul of {list(a.shape)} and {list(b.shape)} (1-D operands are not supported)")
    if a.shape[-1] != b.shape[-2]:
        raise cx.err(f"MatMul of {list(a.shape)} and {list(b.shape)}: inner dimensions differ")
    try:
        batch = tuple(int(d) for d in np.broadcast_shapes(a.shape[:-2], b.shape[:-2]))
    except ValueError:
        raise cx.err(f"MatMul batch axes of {list(a.shape)} and {list(b.shape)} do not broadcast") from None
    shape = batch + (a.shape[-2], b.shape[-1])
    r = len(shape)
    if shape[0] != 1 and r > 2:
        raise cx.err(f"MatMul result {list(shape)} has a batch axis of {shape[0]}")

    def side(v: Act) -> tuple[str, bool]:
        n = len(v.shape)
        if n == r and v.layout.perm == tuple(range(n - 2)) + (n - 1, n - 2):
            return v.ir, True
        return align(cx, v, r, Layout.identity(r)), False

    (xa, adj_x), (xb, adj_y) = side(a), side(b)
    y = cx.finish("BATCH_MATMUL", [xa, xb], out, shape, q, cx.clamp_range(p, q), adj_x=adj_x, adj_y=adj_y)
    return Act(y, Layout.identity(r), shape, dtype)


def conv_transpose(cx: Builder, node):
    x = deq_act(cx, node, "ConvTranspose input must be DequantizeLinear of a quantized activation")
    w = weight_input(cx, node.input[1])
    bias = bias_input(cx, node.input[2]) if len(node.input) > 2 else None
    at = node_attrs(node)
    if len(x.shape) != 4 or w.data.ndim != 4:
        raise cx.err(f"ConvTranspose of a rank-{len(x.shape)} input (only 2-D, NCHW)")
    if int(at.get("group", 1)) != 1:
        raise cx.err(f"ConvTranspose with group {at['group']} (only 1)")
    if tuple(at.get("dilations", (1, 1))) != (1, 1):
        raise cx.err(f"ConvTranspose with dilations {list(at['dilations'])} (only 1)")
    if "output_shape" in at:
        raise cx.err("ConvTranspose with an output_shape attribute (give pads and output_padding)")
    auto = at.get("auto_pad", b"NOTSET")
    auto = auto.decode() if isinstance(auto, bytes) else auto
    if auto not in ("NOTSET", "VALID"):
        raise cx.err(f"ConvTranspose with auto_pad {auto} (give explicit pads)")
    cin, cout, kh, kw = w.data.shape
    if cin != x.shape[1]:
        raise cx.err(f"weights {list(w.data.shape)} do not match {x.shape[1]} input channels")
    stride = tuple(int(v) for v in at.get("strides", (1, 1)))
    pads = [0, 0, 0, 0] if auto == "VALID" else [int(v) for v in at.get("pads", (0, 0, 0, 0))]
    opad = [int(v) for v in at.get("output_padding", (0, 0))]
    out_hw = tuple(stride[i] * (x.shape[2 + i] - 1) + opad[i] + (kh, kw)[i] - pads[i] - pads[i + 2] for i in range(2))
    if min(out_hw) <= 0 or min(stride) < 1:
        raise cx.err(f"ConvTranspose gives an output of {list(out_hw)}")
    attrs = dict(w=w, stride=stride, pads=tuple(pads[:2]), out_shape=(1, cout) + out_hw, kernel_hw=(kh, kw))
    if bias is not None:
        attrs["bias"] = bias
    cx.env[node.output[0]] = Pending("TRANSPOSE_CONV", cx.k, [x], attrs)


def emit_transpose_conv(cx: Builder, p: Pending, out: str, q: Quant, dtype: str) -> Act:
    if cx.numerics == "onnxruntime":
        raise cx.err("ConvTranspose with --numerics onnxruntime: onnxruntime computes it in float32, which "
                     "pockmcu does not reproduce; compile with --numerics tflm (TFLite Micro's TRANSPOSE_CONV)")
    a = p.attrs
    x = p.inputs[0]
    xin = cx.materialize(x, NCHW_AS_NHWC)
    sx = cx.q_of(xin).s
    o = a["out_shape"][1]
    out_hw = a["out_shape"][2:]
    padding = next((pd for pd in ("VALID", "SAME")
                    if transpose_conv_pads(pd, out_hw, a["kernel_hw"], a["stride"]) == a["pads"]), None)
    if padding is None:
        raise cx.err(f"ConvTranspose pads {list(a['pads'])} (top, left) for an output of {list(out_hw)}: TFLite's "
                     "TRANSPOSE_CONV crops only as SAME or VALID padding would "
                     f"({list(transpose_conv_pads('SAME', out_hw, a['kernel_hw'], a['stride']))} or "
                     f"{list(transpose_conv_pads('VALID', out_hw, a['kernel_hw'], a['stride']))})")
    data, scale, zp = weights(cx, p, a["w"], sx, o, 1)
    if np.any(zp != 0):
        raise cx.err("ConvTranspose weights need symmetric quantization (zero point 0)")
    w_ir = np.ascontiguousarray(data.transpose(1, 2, 3, 0))
    wq = Quant(scale=scale, zero_point=np.zeros(scale.shape, np.int32), axis=0)
    ir_shape = NCHW_AS_NHWC.ir_shape(a["out_shape"])
    inputs = [cx.const(f"{out}_output_shape", np.array(ir_shape, np.int32)), cx.const(a["w"].name, w_ir, wq), xin]
    if "bias" in a:
        inputs.append(bias_const(cx, a["bias"], out, sx, scale, o))
    act, clamp = cx.activation(p, q)
    y = cx.finish("TRANSPOSE_CONV", inputs, out, ir_shape, q, clamp, stride=a["stride"], padding=padding,
                  activation=act)
    return Act(y, NCHW_AS_NHWC, a["out_shape"], dtype)


HANDLERS = {
    "ConvTranspose": conv_transpose,
    "Conv": conv, "ConvInteger": conv_integer, "QLinearConv": qlinear_conv,
    "MatMul": matmul, "MatMulInteger": matmul_integer, "Gemm": gemm, "QLinearMatMul": qlinear_matmul, "QGemm": qgemm,
}
EMITTERS = {"CONV_2D": emit_conv, "DEPTHWISE_CONV_2D": emit_conv, "FULLY_CONNECTED": emit_fully_connected,
            "BATCH_MATMUL": emit_batch_matmul, "TRANSPOSE_CONV": emit_transpose_conv}
