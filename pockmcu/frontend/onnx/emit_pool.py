"""Pooling: ONNX AveragePool / MaxPool / GlobalAveragePool (QDQ or on integers) and QLinearAveragePool /
QLinearGlobalAveragePool -> AVERAGE_POOL_2D, MAX_POOL_2D, AVERAGE_POOL_REQUANT, MEAN (+ PAD, REQUANTIZE).

An average whose output quantization differs from its input's is one rounding from the sum
(AVERAGE_POOL_REQUANT; a global one: MEAN), never an average then a requantization; count_include_pad
pads with the zero point first. The IR attributes of the family are built in one place: ``pool_ir_attrs``.
"""

from __future__ import annotations

import numpy as np

from ...ir import Quant
from .build import Builder
from .layout import NCHW_AS_NHWC, Layout
from .read import node_attrs, window
from .values import Act, Deq, Pending, copy_quant, same_quant

# -- reading the nodes ---------------------------------------------------------------------------


def pool(cx: Builder, node, kind: str, x: Act, quantized: tuple | None = None, channels_last: bool = False):
    """A pooling node on x: pending (float between DQ and Q) unless ``quantized`` = (quant, dtype) is known."""
    at = node_attrs(node)
    if len(x.shape) != 4:
        raise cx.err(f"{node.op_type} on a rank-{len(x.shape)} input (only 2-D pooling)")
    hw = tuple(x.shape[1:3]) if channels_last else tuple(x.shape[2:])
    c = x.shape[3] if channels_last else x.shape[1]
    if kind == "GLOBAL":
        k, strides, pads, out_hw, include_pad = hw, (1, 1), (0, 0, 0, 0), (1, 1), 0
        kind = "AVERAGE_POOL_2D"
    else:
        k = tuple(at["kernel_shape"])
        if len(k) != 2:
            raise cx.err(f"kernel_shape {list(k)} (only 2-D pooling)")
        strides = tuple(at.get("strides", (1, 1)))
        dil = tuple(at.get("dilations", (1, 1)))
        if dil != (1, 1):
            raise cx.err(f"pooling with dilations {list(dil)}")
        pads, out_hw = window(at, hw, k, strides, dil, cx.err, at.get("ceil_mode", 0))
        include_pad = at.get("count_include_pad", 0)
    out_shape = (1,) + out_hw + (c,) if channels_last else (1, c) + out_hw
    attrs = dict(filter=k, stride=strides, pads=pads, out_shape=out_shape, in_hw=hw,
                 channels_last=channels_last, include_pad=include_pad)
    p = Pending(kind, cx.k, [x], attrs)
    cx.env[node.output[0]] = p if quantized is None else cx.emit(p, node.output[0], *quantized)


def float_pool(cx: Builder, node, kind: str):
    x = cx.val(node.input[0])
    if isinstance(x, Deq) and isinstance(x.src, Act):
        pool(cx, node, kind, x.src)
    elif isinstance(x, Act) and x.onnx_dtype == "float32" and kind == "MAX_POOL_2D":
        pool(cx, node, kind, x)                                       # float model input: quantized after
    elif isinstance(x, Act) and kind == "MAX_POOL_2D":
        pool(cx, node, kind, x, (cx.q_of(x.ir), x.onnx_dtype))     # integer MaxPool: quantization unchanged
    else:
        raise cx.err(f"{node.op_type} input must be DequantizeLinear of a quantized activation")


def average_pool(cx: Builder, node):
    float_pool(cx, node, "AVERAGE_POOL_2D")


def max_pool(cx: Builder, node):
    if len(node.output) > 1 and node.output[1]:
        raise cx.err("MaxPool with an Indices output")
    float_pool(cx, node, "MAX_POOL_2D")


def global_average_pool(cx: Builder, node):
    float_pool(cx, node, "GLOBAL")


def qlinear_global_average_pool(cx: Builder, node):
    pool(cx, node, "GLOBAL", cx.qact(node, 0), cx.qout(node, 3),
         channels_last=bool(node_attrs(node).get("channels_last", 0)))


def qlinear_average_pool(cx: Builder, node):
    pool(cx, node, "AVERAGE_POOL_2D", cx.qact(node, 0), cx.qout(node, 3),
         channels_last=bool(node_attrs(node).get("channels_last", 0)))


# == IR attributes of the pooling family: the one place they are built =============================


def pool_ir_attrs(p: Pending, pads, activation: str, dtype: str) -> dict:
    """MAX_POOL_2D / AVERAGE_POOL_2D / AVERAGE_POOL_REQUANT."""
    a = p.attrs
    return dict(stride=a["stride"], filter=a["filter"], pads=pads, activation=activation,
                padding="VALID" if pads == (0, 0, 0, 0) else "EXPLICIT",
                onnx_zp_offset=128 if dtype == "uint8" else 0)   # onnxruntime adds the zero point in float


def mean_ir_attrs() -> dict:
    return dict(keep_dims=True)


def emit_pool(cx: Builder, p: Pending, out: str, q: Quant, dtype: str) -> Act:
    a = p.attrs
    x = p.inputs[0]
    lay = Layout.identity(4) if a["channels_last"] else NCHW_AS_NHWC
    xin = cx.materialize(x, lay)
    xq = cx.q_of(xin)
    out_shape = a["out_shape"]
    ir_shape = lay.ir_shape(out_shape)
    pads = a["pads"]
    kind = p.kind
    glob = tuple(a["filter"]) == tuple(a["in_hw"]) and pads == (0, 0, 0, 0)
    if kind == "AVERAGE_POOL_2D" and a["include_pad"] and pads != (0, 0, 0, 0):
        # count_include_pad=1: pad with the zero point (real 0), then a VALID average
        xin = cx.pad_op(xin, [[0, 0], [pads[0], pads[2]], [pads[1], pads[3]], [0, 0]], xq.zp, f"{out}_padded")
        pads = (0, 0, 0, 0)
    if kind == "AVERAGE_POOL_2D" and glob and not same_quant(xq, q):
        axes = cx.const(f"{out}_axes", np.array([1, 2], np.int32))
        y = cx.finish("MEAN", [xin, axes], out, ir_shape, q, cx.clamp_range(p, q), **mean_ir_attrs())
        return Act(y, lay, out_shape, dtype)
    same = same_quant(xq, q)
    act, clamp = cx.activation(p, q) if same or kind == "AVERAGE_POOL_2D" else ("NONE", None)
    attrs = pool_ir_attrs(p, pads, act, dtype)
    if kind == "AVERAGE_POOL_2D" and not same:
        # one rounding from the sum to the output scale (an average then a requantization would round twice)
        y = cx.finish("AVERAGE_POOL_REQUANT", [xin], out, ir_shape, q, clamp, **attrs)
    elif same:
        y = cx.finish(kind, [xin], out, ir_shape, q, clamp, **attrs)
    else:
        t = cx.tensor(f"{out}_pool", ir_shape, "int8", copy_quant(xq))
        cx.add_op(kind, [xin], [t], **attrs)
        y = cx.requantize(t, q, out, cx.clamp_range(p, q))
    return Act(y, lay, out_shape, dtype)


HANDLERS = {
    "AveragePool": average_pool, "MaxPool": max_pool, "GlobalAveragePool": global_average_pool,
    "QLinearAveragePool": qlinear_average_pool, "QLinearGlobalAveragePool": qlinear_global_average_pool,
}
EMITTERS = {"AVERAGE_POOL_2D": emit_pool, "MAX_POOL_2D": emit_pool}
