"""Ops that only move bytes or change their signedness: TRANSPOSE (int8 axis permutation, TFLite
and ONNX), UINT8_TO_INT8 and INT8_TO_UINT8 (the exact x ^ 0x80 at the edges of uint8 ONNX models).

The ONNX frontend keeps every activation NHWC inside; these ops appear only
where a model's own layout or dtype must be honoured at an input or output,
or where a layout change cannot be folded into a neighbour (see
pockmcu/frontend/onnx/layout.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..ccode import Array, Call, Emission, Local, Ptr, Struct, dims4
from ..ir import Graph, Op
from .base import OpDef, register
from .datamove import CopyOp, Move, const_ints, contiguous_strides


def perm4(perm) -> list[int]:
    """A rank-r permutation as the 4-D one of the tensor padded with leading size-1 axes."""
    r = len(perm)
    return list(range(4 - r)) + [int(p) + 4 - r for p in perm]


@dataclass(frozen=True)
class Permutation:
    """TRANSPOSE's options: output axis k is input axis perm[k] (None: the TFLite perm operand is not a
    constant)."""

    perm: tuple[int, ...] | None = ()


@register
class Transpose(CopyOp):
    """y = x.transpose(perm), int8, rank <= 6 (TFLite Micro: 5), any permutation (the batch axis of a
    batch-1 model too). Up to rank 4 ``pockmcu_transpose_s8``, above one strided copy. TFLite reads the
    permutation from its constant second operand; ONNX gives it as an attribute."""

    kind = "TRANSPOSE"
    tflite_ops = ("TRANSPOSE",)
    Options = Permutation
    kernel = "pockmcu_transpose_s8"

    def variant(self, g: Graph, op: Op, cg) -> str:
        return "" if len(op.options.perm) <= 4 else "strided"

    def parse_tflite(self, o, op: Op, tensors) -> Permutation:
        perm = const_ints(tensors, op.inputs[1]) if len(op.inputs) > 1 else None
        if perm is not None:
            self.take_operands(op, 1)
        return Permutation(perm=perm)

    def shape_problems(self, g: Graph, op: Op) -> list[str]:
        x, y = g.t(op.inputs[0]), g.t(op.outputs[0])
        if op.options.perm is None:
            return ["TRANSPOSE with a non-constant perm"]
        perm = list(op.options.perm)
        if sorted(perm) != list(range(len(x.shape))):
            return [f"perm {perm} is not a permutation of the {len(x.shape)} axes"]
        if tuple(x.shape[p] for p in perm) != tuple(y.shape):
            return [f"output shape {list(y.shape)} is not {list(x.shape)} permuted by {perm}"]
        return []

    def sample(self, g: Graph, op: Op, vals):
        return [np.ascontiguousarray(np.transpose(vals[0], op.options.perm))]

    def moves(self, g: Graph, op: Op) -> list[Move]:
        x, y = g.t(op.inputs[0]), g.t(op.outputs[0])
        xs = contiguous_strides(x.shape)
        return [Move(x.name, y.name, tuple(y.shape), tuple(xs[p] for p in op.options.perm),
                     contiguous_strides(y.shape))]

    def describe(self, g: Graph, op: Op) -> str:
        return f"TRANSPOSE {list(op.options.perm)}: {list(g.t(op.inputs[0]).shape)} -> {list(g.t(op.outputs[0]).shape)}"

    def emit(self, g: Graph, op: Op, cg) -> Emission:
        if len(op.options.perm) > 4:
            return super().emit(g, op, cg)
        x, y = op.inputs[0], op.outputs[0]
        return Emission(calls=(Call(cg.kernel(op).function, (Ptr(x), Local("input_dims"), Local("perm", address=False),
                                                              Ptr(y)), status=True),),
                        decls=(Struct("input_dims", "cmsis_nn_dims", dims4(g.t(x).shape)),
                               Array("perm", "int32_t", tuple(perm4(op.options.perm)))))


class _FlipSign(OpDef):
    """Same real values, other signedness: q ^ 0x80 with zero point -+ 128."""

    src: str = ""
    dst: str = ""
    kernel = "pockmcu_flip_sign_8"
    io_dtypes = ("int8", "uint8")

    def check(self, g: Graph, op: Op) -> list[str]:
        x, y = g.t(op.inputs[0]), g.t(op.outputs[0])
        if x.dtype != self.src or y.dtype != self.dst:
            return [f"{self.kind} {x.dtype} -> {y.dtype} (only {self.src} -> {self.dst})"]
        if x.quant is None or y.quant is None:
            return ["input or output has no quantization parameters"]
        shift = 128 if self.src == "uint8" else -128
        if x.quant.s != y.quant.s or y.quant.zp != x.quant.zp - shift or x.shape != y.shape:
            return [f"output must be the input with zero point {x.quant.zp} - {shift} and the same scale and shape"]
        return []

    def reference(self, g: Graph, op: Op, xs, rt=None):
        x = np.ascontiguousarray(xs[0])
        return [(x.view(np.uint8) ^ np.uint8(0x80)).view(self.dst)]

    def emit(self, g: Graph, op: Op, cg) -> Emission:
        x = g.t(op.inputs[0])
        return Emission(calls=(Call(cg.kernel(op).function, (Ptr(x.name), x.size, Ptr(op.outputs[0])),
                                    status=True),))


@register
class Uint8ToInt8(_FlipSign):
    kind = "UINT8_TO_INT8"
    src, dst = "uint8", "int8"


@register
class Int8ToUint8(_FlipSign):
    kind = "INT8_TO_UINT8"
    src, dst = "int8", "uint8"
