"""Softmax (QDQ) and QLinearSoftmax -> SOFTMAX (+ REQUANTIZE).

With onnxruntime numerics the op computes the model's output quantization directly, as onnxruntime's
QLinearSoftmax or, where onnxruntime's graph optimizer leaves a float Softmax (read.ort_float_nodes),
as that one. With TFLM numerics it is TFLite's int8 softmax (scale 1/256, zero point -128), requantized
when the model asks for a coarser scale. The softmax axis is brought last by the layout. The IR
attributes are built in one place: ``softmax_ir_attrs``.
"""

from __future__ import annotations

import numpy as np

from ...ir import Quant
from .build import Builder
from .layout import Layout
from .read import node_attrs
from .values import INF, Act, Deq, Pending


def softmax_axis(cx: Builder, node, x: Act) -> int:
    r = len(x.shape)
    at = node_attrs(node)
    opset = at.get("opset", cx.opset)
    axis = at.get("axis", -1 if opset >= 13 else 1) % r
    if opset < 13 and axis != r - 1:
        raise cx.err(f"Softmax (opset {opset}) over axes {axis}.. of a rank-{r} tensor (only the last axis)")
    return axis


def softmax(cx: Builder, node):
    x = cx.val(node.input[0])
    if not (isinstance(x, Deq) and isinstance(x.src, Act)):
        raise cx.err("Softmax input must be DequantizeLinear of a quantized activation")
    cx.env[node.output[0]] = Pending("SOFTMAX", cx.k, [x.src], dict(axis=softmax_axis(cx, node, x.src)))


def qlinear_softmax(cx: Builder, node):
    x = cx.qact(node, 0)
    q, dtype = cx.qout(node, 3)
    p = Pending("SOFTMAX", cx.k, [x], dict(axis=softmax_axis(cx, node, x)))
    cx.env[node.output[0]] = cx.emit(p, node.output[0], q, dtype)


# == IR attributes of SOFTMAX: the one place they are built ========================================


def softmax_ir_attrs(ort: tuple[bool, str] | None = None) -> dict:
    """TFLM numerics (``ort`` None), or onnxruntime's: ``ort`` = (QLinearSoftmax?, ONNX dtype)."""
    if ort is None:
        return dict(beta=1.0)
    qlinear, dtype = ort
    return dict(beta=1.0, qlinear=qlinear, onnx_zp_offset=128 if dtype == "uint8" else 0)


def emit_softmax(cx: Builder, p: Pending, out: str, q: Quant, dtype: str) -> Act:
    x = p.inputs[0]
    axis = p.attrs["axis"]
    r = len(x.shape)
    if x.layout.pre is not None and r == 2 and axis == 1:
        lay, xin = x.layout, x.ir                         # a whole-row softmax does not care about order
    elif x.layout.pre is None and x.layout.perm[-1] == axis:
        lay, xin = x.layout, x.ir
    else:
        lay = Layout(tuple(i for i in range(r) if i != axis) + (axis,))
        xin = cx.materialize(x, lay)
    q8 = Quant(scale=np.array([1 / 256], np.float32), zero_point=np.array([-128], np.int32))
    if p.lo != -INF or p.hi != INF:
        raise cx.err("Relu/Clip after Softmax")
    if cx.numerics == "onnxruntime":
        # onnxruntime's float32 arithmetic produces the model's output quantization directly: QLinearSoftmax,
        # or a float Softmax where its graph optimizer leaves one (pockmcu.fixedpoint_ort.ort_softmax)
        fused = not (cx.node.op_type == "Softmax" and cx.node.name in cx.ort_float_nodes)
        y = cx.tensor(out, cx.tensors[xin].shape, "int8", q)
        cx.add_op("SOFTMAX", [xin], [y], **softmax_ir_attrs((fused, dtype)))
        return Act(y, lay, x.shape, dtype)
    if abs(q.s - 1 / 256) <= 1e-9 and q.zp == -128:
        y = cx.tensor(out, cx.tensors[xin].shape, "int8", q)
        cx.add_op("SOFTMAX", [xin], [y], **softmax_ir_attrs())
    elif q.s >= 1 / 256 * (1 - 1e-6):
        # e.g. onnxruntime's QDQ default 1/255: the int8 softmax (scale 1/256, zero point -128), then an
        # int8 requantization to the model's scale (measured against onnxruntime in tests/test_onnx.py)
        t = cx.tensor(f"{out}_q256", cx.tensors[xin].shape, "int8", q8)
        cx.add_op("SOFTMAX", [xin], [t], **softmax_ir_attrs())
        y = cx.requantize(t, q, out)
    else:
        raise cx.err(f"Softmax output quantized with scale {q.s:g} and zero point {q.zp} (int8 domain); "
                     "pockmcu's int8 softmax produces scale 1/256, zero point -128 (uint8: 0): quantize "
                     "with that (TensorQuantOverrides) or a coarser scale")
    return Act(y, lay, x.shape, dtype)


HANDLERS = {"Softmax": softmax, "QLinearSoftmax": qlinear_softmax}
EMITTERS = {"SOFTMAX": emit_softmax}
