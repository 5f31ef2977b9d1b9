"""Folding: the ONNX nodes that compute nothing at run time, or fold into a neighbour.

* **Constants and shape arithmetic** (Constant, Shape, Gather, Cast, Mul, Add of constants) are
  evaluated here with numpy.
* **QDQ notation.** ``DequantizeLinear`` of an integer tensor gives a ``Deq`` value (of a weight or
  bias: a ``QConst`` kept exactly as stored); ``QuantizeLinear`` of a ``Pending`` float op emits it
  with the output quantization it names (or of a constant, quantizes it). A bias ``Add`` after a
  Conv/MatMul/Gemm, ``Relu``/``Clip`` (-> fused activation or exact clamp) and the scale ``Mul``
  after ConvInteger/MatMulInteger fold into the pending op; an Add of two dequantized activations
  becomes a pending ADD / ADD_CONST.
* **Data movement** (Reshape, Flatten, Squeeze, Unsqueeze, Transpose, Identity, Dropout) relabels
  the value: an activation's layout changes and bytes move only when no relabelling can do it
  (layout.py).

Each handler is ``handler(builder, node)`` and sets the node's outputs in ``builder.env``.
"""

from __future__ import annotations

import math

import numpy as np

from .build import Builder
from .emit_binary import pending_binary
from .layout import Layout, compose_transpose
from .read import ONNX_DTYPES, node_attrs
from .values import INF, Act, Deq, Pending, QConst, copy_quant, replace, same_quant, shape_of

# -- constants and shape arithmetic ------------------------------------------------------------


def constant(cx: Builder, node):
    import onnx  # noqa: PLC0415  (optional: ONNX models only)

    a = node.attribute[0]
    if a.name == "value":
        v = onnx.numpy_helper.to_array(a.t)
    elif a.name in ("value_float", "value_int"):
        v = np.array(onnx.helper.get_attribute_value(a), np.float32 if a.name == "value_float" else np.int64)
    elif a.name in ("value_floats", "value_ints"):
        v = np.array(onnx.helper.get_attribute_value(a), np.float32 if a.name == "value_floats" else np.int64)
    else:
        raise cx.err(f"Constant with {a.name} is not supported")
    cx.env[node.output[0]] = v


def shape(cx: Builder, node):
    v = cx.val(node.input[0])
    shp = shape_of(v)
    if shp is None:
        raise cx.err("Shape of a value whose shape is not known here")
    s = np.array(shp, np.int64)
    at = node_attrs(node)
    cx.env[node.output[0]] = s[at.get("start", 0):at.get("end", len(s))]


def gather(cx: Builder, node):
    data, idx = cx.cval(node.input[0], "data"), cx.cval(node.input[1], "indices")
    cx.env[node.output[0]] = np.take(data, idx, axis=node_attrs(node).get("axis", 0))


def cast(cx: Builder, node):
    v = cx.val(node.input[0])
    to = ONNX_DTYPES.get(node_attrs(node)["to"], "?")
    if isinstance(v, np.ndarray) and to in ("float32", "int64", "int32", "int8", "uint8", "float64", "bool"):
        cx.env[node.output[0]] = v.astype(to)
    elif isinstance(v, Pending) and v.int_acc and to == "float32":
        cx.env[node.output[0]] = v
    else:
        raise cx.err(f"Cast to {to} of an activation (only of constants, or of a ConvInteger/MatMulInteger "
                     "result before its scale Mul)")


def channel_vector(cx: Builder, p: Pending, c: np.ndarray, what: str) -> np.ndarray:
    """A constant that ONNX broadcasting applies per output channel of a pending conv (NCHW: [C, 1, 1])
    or per output feature of an FC ([N]), as a vector [C] (or [1] for a scalar)."""
    c = np.asarray(c)
    if c.size == 1:
        return c.reshape(1)
    if p.kind in ("CONV_2D", "DEPTHWISE_CONV_2D"):
        if c.ndim >= 3 and c.shape[-3] == c.size:
            return c.reshape(-1)
        raise cx.err(f"{what} of shape {list(c.shape)} is not per output channel of an NCHW conv")
    if c.shape[-1] == c.size:
        return c.reshape(-1)
    raise cx.err(f"{what} of shape {list(c.shape)} is not per output feature")


def mul(cx: Builder, node):
    a, b = cx.val(node.input[0]), cx.val(node.input[1])
    if isinstance(a, np.ndarray) and isinstance(b, np.ndarray):
        cx.env[node.output[0]] = a * b
        return
    p, c = (a, b) if isinstance(a, Pending) else (b, a)
    if isinstance(p, Pending) and p.int_acc and p.acc_scale is None and isinstance(c, np.ndarray):
        cx.env[node.output[0]] = replace(p, acc_scale=channel_vector(cx, p, c.astype(np.float32), "scale"))
        return
    if isinstance(a, Pending) or isinstance(b, Pending):
        raise cx.err("Mul of a float result that is not quantized first (supported: the scale of a "
                     "ConvInteger/MatMulInteger result, or a Mul of quantized values)")
    cx.env[node.output[0]] = pending_binary(cx, "MUL", [a, b], list(node.input))


def add(cx: Builder, node):
    a, b = cx.val(node.input[0]), cx.val(node.input[1])
    out = node.output[0]
    if isinstance(a, np.ndarray) and isinstance(b, np.ndarray):
        cx.env[out] = a + b
        return
    if isinstance(b, Pending) and not isinstance(a, Pending):
        a, b = b, a
    if isinstance(a, Pending) and a.kind in ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED") \
            and "bias" not in a.attrs \
            and a.lo == -INF and a.hi == INF:
        if isinstance(b, Deq) and isinstance(b.src, QConst):
            bias = QConst(channel_vector(cx, a, b.src.data, "bias"), b.src.scale, b.src.zp, 0, b.src.name)
        elif isinstance(b, np.ndarray) and b.dtype.kind == "f":
            bias = channel_vector(cx, a, b.astype(np.float32), "bias")
        else:
            raise cx.err("Add after a Conv/MatMul must add a constant bias")
        cx.env[out] = replace(a, attrs={**a.attrs, "bias": bias})
        return
    if isinstance(a, Deq) and isinstance(b, Deq):
        if isinstance(a.src, Act) and isinstance(b.src, Act):
            cx.env[out] = Pending("ADD", cx.k, [a.src, b.src])
            return
        if isinstance(a.src, QConst) and isinstance(b.src, Act):
            a, b = b, a
        if isinstance(a.src, Act) and isinstance(b.src, QConst):
            cx.env[out] = Pending("ADD_CONST", cx.k, [a.src], {"const": b.src})
            return
    if isinstance(a, Pending) or isinstance(b, Pending):
        raise cx.err("Add is supported between quantized activations and constants (any broadcastable shapes), "
                     "or as the bias of a Conv/MatMul/Gemm")
    cx.env[out] = pending_binary(cx, "ADD_BROADCAST", [a, b], list(node.input))


# -- QuantizeLinear / DequantizeLinear ----------------------------------------------------------


def quantize_linear(cx: Builder, node):
    x = cx.val(node.input[0])
    scale, zp, dtype = cx.qparams(node, 1, 2)
    axis = node_attrs(node).get("axis", 1)
    out = node.output[0]
    if isinstance(x, np.ndarray):
        ax = axis % max(x.ndim, 1)
        s, z = scale, zp
        if s.size > 1:
            shp = [1] * x.ndim
            shp[ax] = -1
            s, z = s.reshape(shp), z.reshape(shp)
        info = np.iinfo(dtype)
        q = np.clip(np.rint(x.astype(np.float32) / s.astype(np.float32)) + z, info.min, info.max).astype(dtype)
        cx.env[out] = QConst(q, scale, zp, ax, out)
        return
    q = cx.act_quant(scale, zp, dtype)
    if isinstance(x, Pending):
        cx.env[out] = cx.emit(x, out, q, dtype)
    elif isinstance(x, Deq) and isinstance(x.src, Act):
        a = x.src
        if same_quant(cx.q_of(a.ir), q):
            cx.env[out] = Act(a.ir, a.layout, a.shape, dtype)
        else:
            cx.env[out] = cx.emit(Pending("CLAMP", cx.k, [a]), out, q, dtype)
    elif isinstance(x, Act) and x.onnx_dtype == "float32":
        y = cx.tensor(out, cx.tensors[x.ir].shape, "int8", q)
        cx.add_op("QUANTIZE", [x.ir], [y])
        cx.env[out] = Act(y, x.layout, x.shape, dtype)
    else:
        raise cx.err(f"QuantizeLinear of {type(x).__name__} '{node.input[0]}' is not supported")


def dequantize_linear(cx: Builder, node):
    x = cx.val(node.input[0])
    default = str(x.dtype) if isinstance(x, np.ndarray) else "uint8"
    scale, zp, dtype = cx.qparams(node, 1, 2, default)
    axis = node_attrs(node).get("axis", 1)
    out = node.output[0]
    if isinstance(x, QConst):
        x = x.data
    if isinstance(x, np.ndarray):
        if x.dtype.kind not in "iu":
            raise cx.err(f"DequantizeLinear of a {x.dtype} constant")
        cx.env[out] = Deq(QConst(x, scale, zp, axis % max(x.ndim, 1), node.input[0]))
    elif isinstance(x, Act) and x.onnx_dtype != "float32":
        cx.env[out] = Deq(cx.with_quant(x, cx.act_quant(scale, zp, x.onnx_dtype)))
    else:
        raise cx.err(f"DequantizeLinear of {type(x).__name__} '{node.input[0]}' is not supported")


# -- Relu / Clip ------------------------------------------------------------------------------


def relu(cx: Builder, node):
    clamp(cx, node, 0.0, INF)


def clip(cx: Builder, node):
    at = node_attrs(node)
    lo, hi = at.get("min", -INF), at.get("max", INF)
    x = cx.val(node.input[0])
    integer = isinstance(x, Act) and x.onnx_dtype != "float32"
    if len(node.input) > 1 and node.input[1]:
        lo = cx.cval(node.input[1], "min").reshape(-1)[0]
    if len(node.input) > 2 and node.input[2]:
        hi = cx.cval(node.input[2], "max").reshape(-1)[0]
    if integer:
        lo, hi = (float(v) - (128 if x.onnx_dtype == "uint8" and math.isfinite(v) else 0) for v in (lo, hi))
    clamp(cx, node, float(lo), float(hi))


def clamp(cx: Builder, node, lo: float, hi: float):
    x = cx.val(node.input[0])
    out = node.output[0]
    if isinstance(x, Pending):
        cx.env[out] = replace(x, lo=max(x.lo, lo), hi=min(x.hi, hi))
    elif isinstance(x, Deq) and isinstance(x.src, Act):
        cx.env[out] = Pending("CLAMP", cx.k, [x.src], lo=lo, hi=hi)
    elif isinstance(x, Act) and x.onnx_dtype == "float32":
        cx.env[out] = Pending("CLAMP", cx.k, [x], lo=lo, hi=hi)
    elif isinstance(x, Act) and x.onnx_dtype != "float32":
        # an integer Relu/Clip on the stored values: bounds are in the int8 domain already
        q = cx.q_of(x.ir)
        if q is None:
            raise cx.err("clamp of a tensor whose quantization is unknown")
        rng = (max(-128, math.ceil(lo)) if lo > -INF else -128, min(127, math.floor(hi)) if hi < INF else 127)
        if x.onnx_dtype == "uint8" and node.op_type == "Relu":
            rng = (-128, 127)
        y = cx.requantize(x.ir, copy_quant(q), out, clamp=rng)
        cx.env[out] = Act(y, x.layout, x.shape, x.onnx_dtype)
    else:
        raise cx.err(f"{node.op_type} of {type(x).__name__} is not supported")


# -- data movement -----------------------------------------------------------------------------


def moved(cx: Builder, node, new_shape=None, perm=None):
    """Reshape-like (new_shape) or Transpose (perm) of whatever the input is."""
    x = cx.val(node.input[0])
    out = node.output[0]
    if isinstance(x, np.ndarray):
        cx.env[out] = x.transpose(perm) if perm is not None else x.reshape(new_shape)
    elif isinstance(x, QConst) or (isinstance(x, Deq) and isinstance(x.src, QConst)):
        qc = x if isinstance(x, QConst) else x.src
        if qc.scale is not None and qc.scale.size > 1:
            raise cx.err("reshaping a per-channel quantized constant")
        data = qc.data.transpose(perm) if perm is not None else qc.data.reshape(new_shape)
        nq = QConst(data, qc.scale, qc.zp, 0, qc.name)
        cx.env[out] = nq if isinstance(x, QConst) else Deq(nq)
    elif isinstance(x, Act):
        cx.env[out] = move_act(cx, x, new_shape, perm)
    elif isinstance(x, Deq):
        cx.env[out] = Deq(move_act(cx, x.src, new_shape, perm))
    else:
        raise cx.err(f"{node.op_type} of a float result that is not quantized first")


def move_act(cx: Builder, a: Act, new_shape=None, perm=None) -> Act:
    if perm is not None:
        perm = tuple(int(p) % len(a.shape) for p in perm)
        if perm == tuple(range(len(a.shape))):
            return a
        if a.layout.pre is not None:
            a = Act(cx.materialize(a, Layout.identity(len(a.shape))), Layout.identity(len(a.shape)),
                    a.shape, a.onnx_dtype)
        lay = compose_transpose(perm, a.layout)
        if lay.perm[0] != 0:
            raise cx.err(f"Transpose {list(perm)} moves the batch axis")
        return Act(a.ir, lay, tuple(a.shape[p] for p in perm), a.onnx_dtype)
    new_shape = tuple(int(d) for d in new_shape)
    if new_shape == a.shape:
        return a
    if not new_shape or new_shape[0] != 1:
        raise cx.err(f"reshape of {list(a.shape)} to {list(new_shape)} changes the batch axis")
    if int(np.prod(new_shape)) != int(np.prod(a.shape)):
        raise cx.err(f"reshape of {list(a.shape)} to {list(new_shape)}")
    ident = Layout.identity(len(new_shape))
    if a.layout.same_bytes_as_onnx(a.shape):
        return Act(cx.alias(a.ir, new_shape), ident, new_shape, a.onnx_dtype)
    if len(new_shape) == 2 and a.layout.pre is None:
        return Act(cx.alias(a.ir, new_shape), Layout(a.layout.perm, a.shape), new_shape, a.onnx_dtype)
    x = cx.materialize(a, Layout.identity(len(a.shape)))
    return Act(cx.alias(x, new_shape), ident, new_shape, a.onnx_dtype)


def in_shape(cx: Builder, node) -> tuple[int, ...]:
    shp = shape_of(cx.val(node.input[0]))
    if shp is None:
        raise cx.err("input is a float result that is not quantized first")
    return shp


def reshape(cx: Builder, node):
    shp = in_shape(cx, node)
    spec = [int(d) for d in cx.cval(node.input[1], "shape").reshape(-1)]
    allowzero = node_attrs(node).get("allowzero", 0)
    new = [shp[i] if (d == 0 and not allowzero and i < len(shp)) else d for i, d in enumerate(spec)]
    if new.count(-1) == 1:
        known = int(np.prod([d for d in new if d != -1]))
        new[new.index(-1)] = int(np.prod(shp)) // max(known, 1)
    moved(cx, node, new_shape=tuple(new))


def flatten(cx: Builder, node):
    shp = in_shape(cx, node)
    axis = node_attrs(node).get("axis", 1) % (len(shp) + 1) if shp else 0
    moved(cx, node, new_shape=(int(np.prod(shp[:axis])), int(np.prod(shp[axis:]))))


def squeeze(cx: Builder, node):
    shp = in_shape(cx, node)
    axes = node_attrs(node).get("axes")
    if axes is None and len(node.input) > 1 and node.input[1]:
        axes = cx.cval(node.input[1], "axes").reshape(-1).tolist()
    if axes is None:
        axes = [i for i, d in enumerate(shp) if d == 1 and i > 0]
    axes = sorted(int(a) % len(shp) for a in axes)
    if 0 in axes:
        raise cx.err("Squeeze of the batch axis")
    moved(cx, node, new_shape=tuple(d for i, d in enumerate(shp) if i not in axes))


def unsqueeze(cx: Builder, node):
    shp = in_shape(cx, node)
    axes = node_attrs(node).get("axes")
    if axes is None:
        axes = cx.cval(node.input[1], "axes").reshape(-1).tolist()
    rank = len(shp) + len(axes)
    new = list(shp)
    for a in sorted(int(a) % rank for a in axes):
        new.insert(a, 1)
    moved(cx, node, new_shape=tuple(new))


def transpose(cx: Builder, node):
    shp = in_shape(cx, node)
    perm = node_attrs(node).get("perm") or list(range(len(shp)))[::-1]
    moved(cx, node, perm=perm)


def identity(cx: Builder, node):
    cx.env[node.output[0]] = cx.val(node.input[0])


HANDLERS = {
    "Constant": constant, "Shape": shape, "Gather": gather, "Cast": cast, "Mul": mul, "Add": add,
    "QuantizeLinear": quantize_linear, "DequantizeLinear": dequantize_linear, "Relu": relu, "Clip": clip,
    "Reshape": reshape, "Flatten": flatten, "Squeeze": squeeze, "Unsqueeze": unsqueeze, "Transpose": transpose,
    "Identity": identity, "Dropout": identity,
}
