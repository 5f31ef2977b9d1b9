"""Ops that only move bytes or change their signedness, added for ONNX models:
TRANSPOSE (int8 axis permutation), UINT8_TO_INT8 and INT8_TO_UINT8 (the
exact x ^ 0x80 at the edges of uint8 models).

The ONNX frontend keeps every activation NHWC inside; these ops appear only
where a model's own layout or dtype must be honoured at an input or output,
or where a layout change cannot be folded into a neighbour (see
pockmcu/frontend/onnx/layout.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..ccode import Call, Emission, Ptr
from ..ir import Graph, Op
from .base import OpDef, register


def perm4(perm) -> list[int]:
    """A rank-r permutation as the 4-D one of the tensor padded with leading size-1 axes."""
    r = len(perm)
    return list(range(4 - r)) + [int(p) + 4 - r for p in perm]


@dataclass(frozen=True)
class Permutation:
    """TRANSPOSE's options: output axis k is input axis perm[k] (rank <= 4, perm[0] == 0)."""

    perm: tuple[int, ...] = ()


@register
class Transpose(OpDef):
    """y = x.transpose(perm), int8, rank <= 4, the batch axis stays first (perm[0] == 0)."""

    kind = "TRANSPOSE"
    Options = Permutation
    kernel = "pockmcu_transpose_s8"
    c_status = True

    def check(self, g: Graph, op: Op) -> list[str]:
        problems = super().check(g, op)
        x, y = g.t(op.inputs[0]), g.t(op.outputs[0])
        perm = list(op.options.perm)
        if sorted(perm) != list(range(len(x.shape))):
            problems.append(f"perm {perm} is not a permutation of the {len(x.shape)} axes")
        elif len(perm) > 4:
            problems.append(f"TRANSPOSE of a rank-{len(perm)} tensor (at most 4)")
        elif perm[0] != 0:
            problems.append(f"TRANSPOSE {perm} moves the batch axis")
        elif tuple(x.shape[p] for p in perm) != tuple(y.shape):
            problems.append(f"output shape {list(y.shape)} is not {list(x.shape)} permuted by {perm}")
        if not problems and (x.quant.s != y.quant.s or x.quant.zp != y.quant.zp):
            problems.append("input and output quantization differ")
        return problems

    def reference(self, g: Graph, op: Op, xs, rt=None):
        return [np.ascontiguousarray(xs[0].transpose(op.options.perm))]

    def describe(self, g: Graph, op: Op) -> str:
        return f"TRANSPOSE {list(op.options.perm)}: {list(g.t(op.inputs[0]).shape)} -> {list(g.t(op.outputs[0]).shape)}"

    def c_context(self, g: Graph, op: Op, cg) -> dict:
        return dict(x=g.t(op.inputs[0]), y=g.t(op.outputs[0]), perm=", ".join(map(str, perm4(op.options.perm))))

    c_decls = """\
static const cmsis_nn_dims {{n}}_input_dims = {{ dims(x.shape) }};
static const int32_t {{n}}_perm[4] = {{ '{' }}{{perm}}{{ '}' }};
"""
    c_call = """\
status = pockmcu_transpose_s8({{ptr(x)}}, &{{n}}_input_dims, {{n}}_perm, {{ptr(y)}});"""


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
