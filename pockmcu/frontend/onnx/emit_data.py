"""Data movement with requantization: ONNX Pad and Concat (QDQ, on integers, or on the float model input)
and QLinearConcat -> PAD, CONCATENATION (+ REQUANTIZE).

Both work in whatever layout their input already has (no transpose for an NHWC-held NCHW tensor): the
pads and the concatenation axis are mapped through the layout. The IR attributes of CONCATENATION are
built in one place, ``concat_ir_attrs`` (PAD has none; its paddings and value are constant inputs,
built by ``Builder.pad_op``).
"""

from __future__ import annotations

import numpy as np

from ...ir import Quant
from .build import Builder
from .layout import Layout
from .read import node_attrs
from .values import Act, Deq, Pending, rne_quant, same_quant


def pad(cx: Builder, node):
    at = node_attrs(node)
    mode = at.get("mode", b"constant")
    mode = mode.decode() if isinstance(mode, bytes) else mode
    if mode != "constant":
        raise cx.err(f"Pad mode '{mode}' (only constant)")
    x = cx.val(node.input[0])
    if len(node.input) > 1 and node.input[1]:
        pads = [int(v) for v in cx.cval(node.input[1], "pads").reshape(-1)]
    else:
        pads = list(at.get("pads", []))
    value = 0.0
    if len(node.input) > 2 and node.input[2]:
        value = cx.cval(node.input[2], "constant_value").reshape(-1)[0]
    elif "value" in at:
        value = at["value"]
    if len(node.input) > 3 and node.input[3]:
        raise cx.err("Pad with an axes input")
    if isinstance(x, Deq) and isinstance(x.src, Act):
        cx.env[node.output[0]] = Pending("PAD", cx.k, [x.src], dict(pads=pads, value=float(value)))
    elif isinstance(x, Act) and x.onnx_dtype == "float32":
        cx.env[node.output[0]] = Pending("PAD", cx.k, [x], dict(pads=pads, value=float(value)))
    elif isinstance(x, Act) and x.onnx_dtype != "float32":
        q = cx.q_of(x.ir)
        v8 = int(value) - (128 if x.onnx_dtype == "uint8" else 0)
        p = Pending("PAD", cx.k, [x], dict(pads=pads, value_q=v8))
        cx.env[node.output[0]] = cx.emit(p, node.output[0], q, x.onnx_dtype)
    else:
        raise cx.err("Pad input must be (DequantizeLinear of) a quantized activation")


def concat(cx: Builder, node):
    axis = int(node_attrs(node)["axis"])
    vals = [cx.val(i) for i in node.input]
    if all(isinstance(v, np.ndarray) for v in vals):
        cx.env[node.output[0]] = np.concatenate(vals, axis=axis)
        return
    if all((isinstance(v, Deq) and isinstance(v.src, Act)) or (isinstance(v, Act) and v.onnx_dtype == "float32")
           for v in vals):
        xs = [v.src if isinstance(v, Deq) else v for v in vals]
        cx.env[node.output[0]] = Pending("CONCAT", cx.k, xs, dict(axis=axis % len(xs[0].shape)))
        return
    if all(isinstance(v, Act) and v.onnx_dtype != "float32" for v in vals):
        q = cx.q_of(vals[0].ir)
        p = Pending("CONCAT", cx.k, vals, dict(axis=axis % len(vals[0].shape)))
        cx.env[node.output[0]] = cx.emit(p, node.output[0], q, vals[0].onnx_dtype)
        return
    raise cx.err("Concat inputs must all be (DequantizeLinear of) quantized activations")


def qlinear_concat(cx: Builder, node):
    q, dtype = cx.qout(node, 0)
    xs = []
    for i in range(2, len(node.input), 3):
        if isinstance(cx.val(node.input[i]), np.ndarray):
            raise cx.err("QLinearConcat of a constant")
        xs.append(cx.qact(node, i))
    p = Pending("CONCAT", cx.k, xs, dict(axis=int(node_attrs(node)["axis"]) % len(xs[0].shape)))
    cx.env[node.output[0]] = cx.emit(p, node.output[0], q, dtype)


def emit_pad(cx: Builder, p: Pending, out: str, q: Quant, dtype: str) -> Act:
    x = p.inputs[0]
    a = p.attrs
    r = len(x.shape)
    pads = a["pads"]
    if len(pads) != 2 * r:
        raise cx.err(f"{len(pads)} pads for a rank-{r} tensor")
    if min(pads) < 0:
        raise cx.err(f"negative pads {pads} (cropping)")
    if pads[0] or pads[r]:
        raise cx.err("padding the batch axis")
    if r > 4:
        raise cx.err(f"Pad of a rank-{r} tensor")
    lay = x.layout if x.layout.pre is None else Layout.identity(r)
    xin = cx.materialize(x, lay)
    xq = cx.q_of(xin)
    ir_pads = [[pads[lay.perm[i]], pads[lay.perm[i] + r]] for i in range(r)]
    value = a["value_q"] if "value_q" in a else rne_quant(a["value"], xq.s, xq.zp)
    out_shape = tuple(d + pads[i] + pads[i + r] for i, d in enumerate(x.shape))
    rng = cx.clamp_range(p, q)
    if same_quant(xq, q) and rng is None:
        y = cx.pad_op(xin, ir_pads, value, out)
    else:
        y = cx.requantize(cx.pad_op(xin, ir_pads, value, f"{out}_padded"), q, out, rng)
    return Act(y, lay, out_shape, dtype)


# == IR attributes of CONCATENATION: the one place they are built ==================================


def concat_ir_attrs(ir_axis: int) -> dict:
    return dict(axis=ir_axis, activation=0)


def emit_concat(cx: Builder, p: Pending, out: str, q: Quant, dtype: str) -> Act:
    axis = p.attrs["axis"]
    xs = p.inputs
    r = len(xs[0].shape)
    for x in xs:
        if len(x.shape) != r or any(x.shape[i] != xs[0].shape[i] for i in range(r) if i != axis):
            raise cx.err(f"Concat of shapes {[list(v.shape) for v in xs]} along axis {axis}")
    if axis == 0:
        raise cx.err("Concat along the batch axis")
    lay, irs = cx.common_layout(xs)
    irs = [cx.requantize(t, q, f"{out}_in{i}") for i, t in enumerate(irs)]
    out_shape = tuple(sum(x.shape[axis] for x in xs) if i == axis else d for i, d in enumerate(xs[0].shape))
    y = cx.finish("CONCATENATION", irs, out, lay.ir_shape(out_shape), q, cx.clamp_range(p, q), suffix="_concat",
                  **concat_ir_attrs(lay.perm.index(axis)))
    return Act(y, lay, out_shape, dtype)


HANDLERS = {"Pad": pad, "Concat": concat, "QLinearConcat": qlinear_concat}
EMITTERS = {"PAD": emit_pad, "CONCAT": emit_concat}
