"""Element-wise ops: an Add of two dequantized activations or of a quantized constant to one, QLinearAdd,
and a Relu/Clip (or a bare DequantizeLinear -> QuantizeLinear) that no op before it absorbed
-> ADD, ADD_CONST, REQUANTIZE (with a clamp).

The QDQ Add itself is recognized in fold.py (an Add can also be a Conv/MatMul bias); this module reads
the QOperator node and emits the pending ops. The IR attributes of the family are built in one place:
``eltwise_ir_attrs``.
"""

from __future__ import annotations

import numpy as np

from ...ir import Quant
from .build import Builder
from .emit_binary import emit_binary
from .values import Act, Pending, QConst, int_data, int_range, replace


def qlinear_add(cx: Builder, node):
    vals = [cx.val(node.input[i]) for i in (0, 3)]
    consts = [isinstance(v, np.ndarray) for v in vals]
    if all(consts):
        raise cx.err("QLinearAdd of two constants")
    order = (3, 0) if consts[0] else (0, 3)
    a = cx.qact(node, order[0])
    q, dtype = cx.qout(node, 6)
    if consts[0] or consts[1]:
        i = order[1]
        c = cx.cval(node.input[i])
        scale, zp, _ = cx.qparams(node, i + 1, i + 2, str(c.dtype))
        p = Pending("ADD_CONST", cx.k, [a], {"const": QConst(c, scale, zp, 0, node.input[i])})
    else:
        p = Pending("ADD", cx.k, [a, cx.qact(node, 3)])
    cx.env[node.output[0]] = cx.emit(p, node.output[0], q, dtype)


# == IR attributes of ADD / ADD_CONST: the one place they are built ================================


def eltwise_ir_attrs(activation: str) -> dict:
    return dict(activation=activation)


def emit_add(cx: Builder, p: Pending, out: str, q: Quant, dtype: str) -> Act:
    a, b = p.inputs
    if a.shape != b.shape:        # broadcasting: the general element-wise emitter
        return emit_binary(cx, replace(p, kind="ADD_BROADCAST", attrs={"operands": [0, 1]}), out, q, dtype)
    lay, (xa, xb) = cx.common_layout([a, b])
    act, clamp = cx.activation(p, q)
    y = cx.finish("ADD", [xa, xb], out, cx.tensors[xa].shape, q, clamp, **eltwise_ir_attrs(act))
    return Act(y, lay, a.shape, dtype)


def emit_add_const(cx: Builder, p: Pending, out: str, q: Quant, dtype: str) -> Act:
    x = p.inputs[0]
    c: QConst = p.attrs["const"]
    data, zp = int_data(c.data, c.zp)
    if data.dtype != np.int8:
        raise cx.err(f"Add of a {c.data.dtype} constant (need int8/uint8)")
    if c.scale is None or c.scale.size != 1:
        raise cx.err("Add of a per-channel quantized constant")
    try:
        full = np.broadcast_to(data, x.shape)
    except ValueError:            # the constant is larger than the activation: the general emitter
        return emit_binary(cx, replace(p, kind="ADD_BROADCAST", attrs={"operands": [0, c]}), out, q, dtype)
    xin, lay = x.ir, x.layout
    ir = lay.apply(np.ascontiguousarray(full))
    rows = ir.reshape(-1, ir.shape[-1])
    cdata = rows[0].copy() if np.all(rows == rows[0]) else ir
    cq = Quant(scale=c.scale.astype(np.float32), zero_point=np.array([int(zp.reshape(-1)[0])], np.int32))
    act, clamp = cx.activation(p, q)
    y = cx.finish("ADD_CONST", [xin, cx.const(c.name, cdata, cq)], out, cx.tensors[xin].shape, q, clamp,
                  **eltwise_ir_attrs(act))
    return Act(y, lay, x.shape, dtype)


def emit_clamp(cx: Builder, p: Pending, out: str, q: Quant, dtype: str) -> Act:
    x = p.inputs[0]
    rng = int_range(p, q)
    y = cx.requantize(x.ir, q, out, None if rng == (-128, 127) else rng)
    return Act(y, x.layout, x.shape, dtype)


HANDLERS = {"QLinearAdd": qlinear_add}
EMITTERS = {"ADD": emit_add, "ADD_CONST": emit_add_const, "CLAMP": emit_clamp}
