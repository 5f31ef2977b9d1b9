"""Element-wise arithmetic beyond the plain Add: ONNX Add / Sub / Mul with broadcasting and constant operands,
Max / Min, PRelu, LeakyRelu, Tanh, Sigmoid, HardSwish, LogSoftmax (QDQ), and QLinearMul / QLinearLeakyRelu /
QLinearSigmoid (QOperator, com.microsoft) -> ADD, SUB, MUL, MAXIMUM, MINIMUM, PRELU, LEAKY_RELU, TANH,
LOGISTIC, HARD_SWISH, LOG_SOFTMAX (+ REQUANTIZE).

Broadcasting follows ONNX (NumPy) on the ONNX shapes; in the IR every operand is given the output's
rank (leading 1s) and laid out like the full-size activation operand (an NCHW tensor held NHWC keeps
its layout; a per-channel [C, 1, 1] constant becomes [1, 1, 1, C]). A constant operand is a quantized
constant (DequantizeLinear of an int8 / uint8 initializer, per tensor) or a float scalar, which is exact
as the int8 value +-1 with scale |c|. Max / Min take no rescaling in TFLite: each operand is requantized
to the output's quantization first (exact: quantization is monotone, so max(q(a), q(b)) = q(max(a, b))),
constants at compile time. TANH, LOGISTIC and LOG_SOFTMAX write TFLite's fixed output quantization
(1/128, 1/256 and 16/256), requantized to the model's when it differs.
"""

from __future__ import annotations

import numpy as np

from ...ir import Quant
from .build import Builder
from .emit_move import plain
from .emit_softmax import softmax_axis
from .layout import Layout
from .read import node_attrs
from .values import Act, Deq, Pending, QConst, int_data, rne_quant, same_quant

#: output quantization TFLite's int8 kernel writes (scale, zero point)
FIXED_OUT = {"TANH": (1 / 128, 0), "LOGISTIC": (1 / 256, -128), "LOG_SOFTMAX": (16 / 256, 127)}
BINARY = ("ADD", "SUB", "MUL", "MAXIMUM", "MINIMUM")


def fixed_quant(kind: str) -> Quant:
    s, z = FIXED_OUT[kind]
    return Quant(scale=np.array([s], np.float32), zero_point=np.array([z], np.int32))


def exact_scalar(c: np.ndarray, name: str) -> QConst:
    """A float scalar constant as a quantized one with the same real value: +-1 with scale |c|."""
    v = float(np.float32(c.reshape(-1)[0]))
    q = np.full(c.shape, 0 if v == 0 else (1 if v > 0 else -1), np.int8)
    return QConst(q, np.array([abs(v) if v else 1.0], np.float32), np.zeros(1, np.int64), 0, name)


def operand(cx: Builder, v, name: str):
    """An operand of an arithmetic node: an Act (a dequantized activation) or a QConst."""
    if isinstance(v, Deq):
        return v.src
    if isinstance(v, np.ndarray) and v.dtype.kind == "f":
        if v.size == 1:
            return exact_scalar(v, name)
        raise cx.err(f"float constant '{name}' of shape {list(v.shape)} (not quantized): quantize it "
                     "(DequantizeLinear of an int8 initializer), or use a scalar")
    if isinstance(v, Act) and v.onnx_dtype == "float32":
        raise cx.err(f"{cx.node.op_type} on the float model input (quantize the input first)")
    raise cx.err(f"input '{name}' must be DequantizeLinear of a quantized activation or constant")


def pending_binary(cx: Builder, kind: str, vals: list, names: list[str]) -> Pending:
    ops = [operand(cx, v, n) for v, n in zip(vals, names)]
    acts = [o for o in ops if isinstance(o, Act)]
    if not acts:
        raise cx.err(f"{cx.node.op_type} of constants only")
    refs = [acts.index(o) if isinstance(o, Act) else o for o in ops]
    return Pending(kind, cx.k, acts, {"operands": refs})


def binary(cx: Builder, node, kind: str):
    """Sub / Mul / Max / Min (and the Adds fold.add does not take): a pending op waiting for its output
    quantization; Max / Min with more than two inputs become a chain."""
    vals = [cx.val(i) for i in node.input]
    if len(vals) == 1:
        cx.env[node.output[0]] = vals[0]
        return
    if len(vals) > 2 and kind not in ("MAXIMUM", "MINIMUM"):
        raise cx.err(f"{node.op_type} of {len(vals)} inputs")
    cx.env[node.output[0]] = pending_binary(cx, kind, vals, list(node.input))


def qlinear_binary(cx: Builder, node, kind: str):
    """QLinearAdd / QLinearMul (A, A_scale, A_zp, B, B_scale, B_zp, C_scale, C_zp)."""
    ops = []
    for i in (0, 3):
        v = cx.val(node.input[i])
        if isinstance(v, np.ndarray):
            scale, zp, _ = cx.qparams(node, i + 1, i + 2, str(v.dtype))
            ops.append(QConst(v, scale, zp, 0, node.input[i]))
        else:
            ops.append(cx.qact(node, i))
    acts = [o for o in ops if isinstance(o, Act)]
    if not acts:
        raise cx.err(f"{node.op_type} of two constants")
    p = Pending(kind, cx.k, acts, {"operands": [acts.index(o) if isinstance(o, Act) else o for o in ops]})
    cx.env[node.output[0]] = cx.emit(p, node.output[0], *cx.qout(node, 6))


def align(cx: Builder, a: Act, rank: int, lay: Layout) -> str:
    """``a`` as an IR tensor of the output's rank (leading 1s) in layout ``lay`` (bytes move only when a
    size > 1 axis changes place)."""
    a = plain(cx, a)
    if len(a.shape) == rank and a.layout == lay:
        return a.ir
    ir = cx.materialize(a, Layout.identity(len(a.shape)))
    padded = (1,) * (rank - len(a.shape)) + tuple(a.shape)
    if padded != tuple(a.shape):
        ir = cx.alias(ir, padded)
    return cx.materialize(Act(ir, Layout.identity(rank), padded, a.onnx_dtype), lay)


def const_operand(cx: Builder, c: QConst, rank: int, lay: Layout, q: Quant | None, hint: str) -> str:
    """A constant operand laid out like the output; requantized to ``q`` at compile time when given
    (Max / Min), else int8 with its own per-tensor quantization."""
    if c.scale is None or np.asarray(c.scale).size != 1:
        raise cx.err(f"constant operand '{c.name}' quantized per channel (only per tensor)")
    data, zp = int_data(c.data, c.zp)
    if data.dtype != np.int8:
        raise cx.err(f"constant operand '{c.name}' is {c.data.dtype} (need int8 / uint8)")
    zp = int(np.asarray(zp).reshape(-1)[0])
    scale = np.float32(np.asarray(c.scale).reshape(-1)[0])
    if q is not None:
        real = (data.astype(np.float32) - np.float32(zp)) * scale
        data = np.array([rne_quant(v, q.s, q.zp) for v in real.reshape(-1)], np.int8).reshape(data.shape)
        cq = Quant(scale=q.scale.copy(), zero_point=q.zero_point.copy())
    else:
        cq = Quant(scale=np.array([scale], np.float32), zero_point=np.array([zp], np.int32))
    data = data.reshape((1,) * (rank - data.ndim) + data.shape).transpose(lay.perm)
    return cx.const(f"{c.name}_{hint}" if q is not None else c.name, np.ascontiguousarray(data), cq)


def emit_binary(cx: Builder, p: Pending, out: str, q: Quant, dtype: str) -> Act:
    refs = p.attrs["operands"]
    ops = [p.inputs[r] if isinstance(r, int) else r for r in refs]
    shapes = [tuple(o.shape) if isinstance(o, Act) else tuple(o.data.shape) for o in ops]
    try:
        oshape = tuple(int(d) for d in np.broadcast_shapes(*shapes))
    except ValueError:
        raise cx.err(f"operands {[list(s) for s in shapes]} do not broadcast") from None
    rank = len(oshape)
    if not rank or oshape[0] != 1:
        raise cx.err(f"{p.kind} result {list(oshape)} has no batch axis of 1")
    full = [o for o in ops if isinstance(o, Act) and o.shape == oshape and o.layout.pre is None]
    lay = full[0].layout if full else Layout.identity(rank)
    maxmin = p.kind in ("MAXIMUM", "MINIMUM")
    names = []
    for k, o in enumerate(ops):
        if isinstance(o, Act):
            ir = align(cx, o, rank, lay)
            names.append(cx.requantize(ir, q, f"{out}_in{k}") if maxmin else ir)
        else:
            names.append(const_operand(cx, o, rank, lay, q if maxmin else None, f"as_{out}"))
    if maxmin:
        act, clamp = "NONE", cx.clamp_range(p, q)
    else:
        act, clamp = cx.activation(p, q)
    kind = "ADD" if p.kind == "ADD_BROADCAST" else p.kind
    y = names[0]
    for k in range(1, len(names)):        # Max / Min of more than two: a chain
        last = k == len(names) - 1
        y = cx.finish(kind, [y, names[k]], out if last else f"{out}_{k}", lay.ir_shape(oshape), q,
                      clamp if last else None, activation=act)
    return Act(y, lay, oshape, dtype)


# -- PRelu -------------------------------------------------------------------------------------------


def prelu(cx: Builder, node):
    x = operand(cx, cx.val(node.input[0]), node.input[0])
    slope = operand(cx, cx.val(node.input[1]), node.input[1])
    if not isinstance(x, Act) or not isinstance(slope, QConst):
        raise cx.err("PRelu needs a quantized activation and a constant slope")
    cx.env[node.output[0]] = Pending("PRELU", cx.k, [x], {"slope": slope})


def emit_prelu(cx: Builder, p: Pending, out: str, q: Quant, dtype: str) -> Act:
    x = plain(cx, p.inputs[0])
    c: QConst = p.attrs["slope"]
    try:
        if np.broadcast_shapes(x.shape, c.data.shape) != tuple(x.shape):
            raise ValueError
    except ValueError:
        raise cx.err(f"slope {list(c.data.shape)} does not broadcast to the input {list(x.shape)}") from None
    alpha = const_operand(cx, c, len(x.shape), x.layout, None, "")
    y = cx.finish("PRELU", [x.ir, alpha], out, cx.tensors[x.ir].shape, q, cx.clamp_range(p, q))
    return Act(y, x.layout, x.shape, dtype)


# -- unary activations ---------------------------------------------------------------------------------


def unary(cx: Builder, node, kind: str, **attrs):
    x = operand(cx, cx.val(node.input[0]), node.input[0])
    if not isinstance(x, Act):
        raise cx.err(f"{node.op_type} of a constant")
    cx.env[node.output[0]] = Pending(kind, cx.k, [x], attrs)


def qlinear_unary(cx: Builder, node, kind: str, **attrs):
    """QLinearLeakyRelu / QLinearSigmoid (X, X_scale, X_zp, Y_scale, Y_zp)."""
    p = Pending(kind, cx.k, [cx.qact(node, 0)], attrs)
    cx.env[node.output[0]] = cx.emit(p, node.output[0], *cx.qout(node, 3))


def emit_unary(cx: Builder, p: Pending, out: str, q: Quant, dtype: str) -> Act:
    x = plain(cx, p.inputs[0])
    clamp = cx.clamp_range(p, q)
    shape = cx.tensors[x.ir].shape
    attrs = {k: v for k, v in p.attrs.items() if k != "axis"}
    xin, lay = x.ir, x.layout
    if p.kind == "LOG_SOFTMAX":                  # the axis last, as for Softmax
        axis, r = p.attrs["axis"], len(x.shape)
        if lay.perm[-1] != axis:
            lay = Layout(tuple(i for i in range(r) if i != axis) + (axis,))
            xin = cx.materialize(x, lay)
            shape = cx.tensors[xin].shape
    if p.kind not in FIXED_OUT:
        y = cx.finish(p.kind, [xin], out, shape, q, clamp, **attrs)
        return Act(y, lay, x.shape, dtype)
    fq = fixed_quant(p.kind)
    if same_quant(fq, q) and clamp is None:
        y = cx.tensor(out, shape, "int8", q)
        cx.add_op(p.kind, [xin], [y], **attrs)
    else:
        t = cx.tensor(f"{out}_{p.kind.lower()}", shape, "int8", fq)
        cx.add_op(p.kind, [xin], [t], **attrs)
        y = cx.requantize(t, q, out, clamp)
    return Act(y, lay, x.shape, dtype)


def log_softmax(cx: Builder, node):
    x = operand(cx, cx.val(node.input[0]), node.input[0])
    if not isinstance(x, Act):
        raise cx.err("LogSoftmax of a constant")
    x = plain(cx, x)
    cx.env[node.output[0]] = Pending("LOG_SOFTMAX", cx.k, [x], {"axis": softmax_axis(cx, node, x)})


def leaky_alpha(node) -> float:
    return float(np.float32(node_attrs(node).get("alpha", 0.01)))


HANDLERS = {
    "Sub": lambda cx, node: binary(cx, node, "SUB"),
    "Max": lambda cx, node: binary(cx, node, "MAXIMUM"),
    "Min": lambda cx, node: binary(cx, node, "MINIMUM"),
    "QLinearMul": lambda cx, node: qlinear_binary(cx, node, "MUL"),
    "PRelu": prelu,
    "LeakyRelu": lambda cx, node: unary(cx, node, "LEAKY_RELU", alpha=leaky_alpha(node)),
    "Tanh": lambda cx, node: unary(cx, node, "TANH"),
    "Sigmoid": lambda cx, node: unary(cx, node, "LOGISTIC"),
    "HardSwish": lambda cx, node: unary(cx, node, "HARD_SWISH"),
    "LogSoftmax": log_softmax,
    "QLinearLeakyRelu": lambda cx, node: qlinear_unary(cx, node, "LEAKY_RELU", alpha=leaky_alpha(node)),
    "QLinearSigmoid": lambda cx, node: qlinear_unary(cx, node, "LOGISTIC"),
}
EMITTERS = {**{k: emit_binary for k in ("SUB", "MUL", "MAXIMUM", "MINIMUM", "ADD_BROADCAST")},
            "PRELU": emit_prelu,
            **{k: emit_unary for k in ("LEAKY_RELU", "TANH", "LOGISTIC", "HARD_SWISH", "LOG_SOFTMAX")}}
