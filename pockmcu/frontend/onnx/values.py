"""The values the ONNX converter passes between nodes, and small quantization helpers.

Every ONNX value name maps (in ``Builder.env``) to one of:

* a numpy array: a float or integer constant (initializers, shape arithmetic);
* ``QConst``: a quantized constant (weights, biases) with its scale and zero point;
* ``Act``: an activation, held by an IR tensor in some layout (layout.py);
* ``Deq``: ``DequantizeLinear`` of an ``Act`` or a ``QConst`` -- a float value that is only notation;
* ``Pending``: a float op on ``Deq`` inputs, waiting for the ``QuantizeLinear`` that fixes its output
  quantization (fold.py builds them, the emit_* modules turn them into IR ops).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...ir import Quant
from .layout import Layout

INF = math.inf
#: named fused activations by their float range
NAMED_ACTIVATIONS = {(-INF, INF): "NONE", (0.0, INF): "RELU", (0.0, 6.0): "RELU6", (-1.0, 1.0): "RELU_N1_TO_1"}
#: pending ops that may read the float model input directly (they commute with quantization)
FLOAT_INPUT_OK = {"PAD", "MAX_POOL_2D", "CONCAT", "CLAMP"}


@dataclass
class Act:
    """An activation: IR tensor ``ir`` holds the ONNX value of ``shape`` in ``layout``."""

    ir: str
    layout: Layout
    shape: tuple[int, ...]
    onnx_dtype: str                     # int8 | uint8 | float32 (the model's own dtype)


@dataclass
class QConst:
    """A quantized constant (weights, biases): integer data as stored, float32 scale, zero point."""

    data: np.ndarray
    scale: np.ndarray | None            # None: implied (QOperator bias: s_x * s_w)
    zp: np.ndarray
    axis: int
    name: str


@dataclass
class Deq:
    """The float value DequantizeLinear(src): exactly representable, nothing computed yet."""

    src: Act | QConst


@dataclass
class Pending:
    """A float op on dequantized inputs, emitted when a QuantizeLinear fixes its output quantization.

    ``attrs`` holds what the ONNX node said, in ONNX terms (NCHW shapes, ONNX pads); the emitter of
    ``kind`` turns it into the IR op's attributes."""

    kind: str
    node: int
    inputs: list[Act]
    attrs: dict[str, Any] = field(default_factory=dict)
    lo: float = -INF
    hi: float = INF
    int_acc: bool = False               # ConvInteger / MatMulInteger: integer accumulator, scale from a Mul
    acc_scale: np.ndarray | None = None


def replace(p: Pending, **changes) -> Pending:
    """A copy of ``p`` with some fields changed (``p`` itself is left as it is)."""
    return Pending(**{**p.__dict__, **changes})


def shape_of(v) -> tuple[int, ...] | None:
    """The ONNX shape of a value, or None for a float result (a Pending op) that has none yet."""
    if isinstance(v, np.ndarray):
        return v.shape
    if isinstance(v, QConst):
        return v.data.shape
    if isinstance(v, Deq):
        return shape_of(v.src)
    if isinstance(v, Act):
        return v.shape
    return None


def rne_quant(x, scale, zp: int) -> int:
    """onnxruntime QuantizeLinear of one float value into the int8 domain (round half to even)."""
    v = np.float32(np.float32(x) / np.float32(scale))
    return int(np.clip(np.rint(v) + zp, -128, 127))


def int_range(p: Pending, q: Quant) -> tuple[int, int]:
    """The int8 range of the pending op's Relu/Clip bounds quantized with ``q``."""
    return (-128 if p.lo == -INF else rne_quant(p.lo, q.s, q.zp),
            127 if p.hi == INF else rne_quant(p.hi, q.s, q.zp))


def same_quant(a: Quant | None, b: Quant | None) -> bool:
    if a is None or b is None:
        return a is b
    return (a.scale.shape == b.scale.shape and np.array_equal(a.scale, b.scale)
            and np.array_equal(a.zero_point, b.zero_point))


def copy_quant(q: Quant | None) -> Quant | None:
    return None if q is None else Quant(scale=q.scale.copy(), zero_point=q.zero_point.copy(), axis=q.axis)


def shift_zp(q: Quant, by: int) -> Quant:
    """``q`` with its zero point moved by ``by`` (128: int8 -> uint8 of the same real values)."""
    return Quant(scale=q.scale.copy(), zero_point=q.zero_point + by)


def int_data(data: np.ndarray, zp) -> tuple[np.ndarray, np.ndarray]:
    """uint8 -> int8 (values and zero points - 128); others unchanged."""
    zp = np.asarray(zp).astype(np.int64)
    if data.dtype == np.uint8:
        return (data.astype(np.int16) - 128).astype(np.int8), zp - 128
    return data, zp
