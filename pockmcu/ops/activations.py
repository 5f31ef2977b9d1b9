"""SOFTMAX and LOGISTIC, int8 in, int8 out (scale 1/256, zero point -128).

Semantics: TFLite Micro's integer paths, built on gemmlowp fixed point:
SOFTMAX rescales (x - max) by beta * s_in into Q5.26, exponentiates with
exp_on_negative_values, normalizes with a fixed-point reciprocal; LOGISTIC
rescales x - zp into Q4.27 and evaluates gemmlowp::logistic. The numpy
versions live in pockmcu.fixedpoint, the C versions in kernels_c.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import fixedpoint as fp
from .. import fixedpoint_ort as ort
from ..ccode import Array, Call, Emission, Local, Ptr
from ..ir import Graph, Op
from .base import OpDef, register
from .conv import LayerGrad

F32 = np.float32


def _needs_q8_output(g: Graph, op: Op) -> list[str]:
    y = g.t(op.outputs[0])
    if y.quant is not None and (abs(y.quant.s - 1 / 256) > 1e-9 or y.quant.zp != -128):
        return [f"output '{y.name}' must have scale 1/256 and zero point -128 (has {y.quant.s}, {y.quant.zp})"]
    return []


@dataclass(frozen=True)
class SoftmaxOptions:
    """SOFTMAX over the last axis (the ONNX frontend brings the softmax axis last)."""

    beta: float = 1.0                 # TFLite's SoftmaxOptions.beta (ONNX: 1)
    #: onnxruntime numerics only (None with TFLite Micro's): True for QLinearSoftmax, False for a
    #: float Softmax that onnxruntime's graph optimizer leaves (pockmcu.fixedpoint_ort.ort_softmax)
    qlinear: bool | None = None
    onnx_zp_offset: int = 0           # 128 when the ONNX output is uint8 (onnxruntime adds the zero point in float)


@dataclass(frozen=True, eq=False)
class SoftmaxData:
    """The compile-time constants (TFLM's SoftmaxParams for int8, CalculateSoftmaxParams)."""

    mult: int                         # input_multiplier: beta * s_in * 2^26 as a Q31 multiplier ...
    left_shift: int                   # ... and its left shift
    diff_min: int                     # x - max below this gives exp 0
    #: onnxruntime numerics: onnxruntime's float32 exp table (256 entries), else None
    ort_table: np.ndarray | None = None


@register
class Softmax(OpDef):
    kind = "SOFTMAX"
    tflite_ops = ("SOFTMAX",)
    tflite_options = "SoftmaxOptions"
    Options = SoftmaxOptions
    kernel = "arm_softmax_s8"

    def variant(self, g: Graph, op: Op, cg) -> str:
        return "ort_float" if op.prepared.ort_table is not None else ""

    def parse_tflite(self, o, op: Op, tensors) -> SoftmaxOptions:
        return SoftmaxOptions(beta=float(o.Beta()) if o else 1.0)

    @staticmethod
    def _ort(g: Graph, op: Op) -> bool:
        """onnxruntime's softmax (any output quantization) rather than TFLite Micro's."""
        return g.numerics == "onnxruntime" and op.options.qlinear is not None

    def check(self, g: Graph, op: Op) -> list[str]:
        problems = super().check(g, op)
        if self._ort(g, op):
            return problems + ([] if op.options.beta == 1.0 else ["beta != 1"])
        return problems or _needs_q8_output(g, op)

    def prepare(self, g: Graph, op: Op) -> SoftmaxData:
        x = g.t(op.inputs[0])
        mult, left_shift, diff_min = fp.softmax_params(x.quant.s, op.options.beta)
        table = ort.ort_softmax_table(x.quant.s, x.shape[-1], op.options.qlinear) if self._ort(g, op) else None
        return SoftmaxData(mult, left_shift, diff_min, table)

    def reference(self, g: Graph, op: Op, xs, rt=None):
        o, p = op.options, op.prepared
        if p.ort_table is not None:
            y = g.t(op.outputs[0])
            return [ort.ort_softmax(xs[0], p.ort_table, y.quant.s, y.quant.zp + o.onnx_zp_offset,
                                    o.onnx_zp_offset == 128, o.qlinear)]
        return [fp.softmax_s8(xs[0], p.mult, p.left_shift, p.diff_min)]

    def backward(self, tb, op: Op) -> None:
        """A SOFTMAX inside the network (the one before the loss is the loss's: xent reads the logits):
        dx = y * (dy - sum(dy * y)) per row, from the saved int8 output y."""
        saved_output_backward(tb, op, "SOFTMAX_GRAD")

    def emit(self, g: Graph, op: Op, cg) -> Emission:
        x, y, o, p = g.t(op.inputs[0]), g.t(op.outputs[0]), op.options, op.prepared
        rows, row = x.size // x.shape[-1], x.shape[-1]
        if p.ort_table is None:
            return Emission(calls=(Call(cg.kernel(op).function, (Ptr(x.name), rows, row, p.mult, p.left_shift,
                                                                  p.diff_min, Ptr(y.name))),))
        # onnxruntime's float path: exp table and output scale as float32 bit patterns
        table = Array("exp_table", "uint32_t", tuple(f"0x{int(b):08x}u" for b in ort.f32_bits(p.ort_table)))
        ys = np.float32(np.floor(np.float32(1.0) / np.float32(y.quant.scale[0]))) if o.qlinear \
            else np.float32(y.quant.scale[0])
        return Emission(decls=(table,), calls=(Call(cg.kernel(op).function, (
            Ptr(x.name), rows, row, Local("exp_table", address=False), f"{int(ort.f32_bits([ys])[0])}u",
            y.quant.zp + o.onnx_zp_offset, int(o.onnx_zp_offset == 128), int(o.qlinear), Ptr(y.name))),))


@dataclass(frozen=True)
class LogisticData:
    """The compile-time constants (TFLM's CalculateArithmeticOpDataLogistic for int8)."""

    q: dict                           # fixedpoint.logistic_params: input offset, range radius, multiplier, shift


@register
class Logistic(OpDef):
    kind = "LOGISTIC"
    tflite_ops = ("LOGISTIC",)
    kernel = "pockmcu_logistic_s8"

    def check(self, g: Graph, op: Op) -> list[str]:
        problems = super().check(g, op)
        return problems or _needs_q8_output(g, op)

    def prepare(self, g: Graph, op: Op) -> LogisticData:
        x = g.t(op.inputs[0])
        return LogisticData(fp.logistic_params(x.quant.s, x.quant.zp))

    def reference(self, g: Graph, op: Op, xs, rt=None):
        return [fp.logistic_s8(xs[0], op.prepared.q)]

    def backward(self, tb, op: Op) -> None:
        saved_output_backward(tb, op, "LOGISTIC_GRAD")

    def emit(self, g: Graph, op: Op, cg) -> Emission:
        x, q = g.t(op.inputs[0]), op.prepared.q
        return Emission(calls=(Call(cg.kernel(op).function, (
            Ptr(x.name), x.size, q["input_offset"], q["input_range_radius"], q["input_multiplier"],
            q["input_left_shift"], Ptr(op.outputs[0])), status=True),))


# -- gradients from the saved int8 output -------------------------------------------------------------

def saved_output_backward(tb, op: Op, kind: str) -> None:
    """Emit ``kind`` (inputs: the forward op's int8 output, its output gradient) for ``op``'s input."""
    x = op.inputs[0]
    if not tb.needs_grad(x):
        return
    dx = tb.grad_tensor(x, f"{tb.short(x)}_grad_from_{op.name}")
    tb.emit(kind, f"{op.name}_grad", [op.outputs[0], tb.grad(op.outputs[0])], [dx], layer=op)
    tb.add_grad(x, dx)


def dequantized_f32(q, s: float, zp: int) -> np.ndarray:
    """float32(s) * float32(q - zp), as the C kernels compute the saved output's real value."""
    return F32(s) * (np.asarray(q).astype(np.int32) - zp).astype(F32)


def logistic_grad(yq, dy, s: float, zp: int) -> np.ndarray:
    """PyTorch's sigmoid_backward at the output y: (dy * (1 - y)) * y in float32."""
    y = dequantized_f32(yq, s, zp)
    with np.errstate(over="ignore", invalid="ignore"):
        return ((np.asarray(dy).astype(F32) * (F32(1) - y)) * y).astype(F32)


def softmax_grad(yq, dy, s: float, zp: int) -> np.ndarray:
    """Per row (last axis): dot = sum over k in order of dy[k] * y[k] (float32, one accumulator);
    dx[k] = y[k] * (dy[k] - dot). The order is the C kernel's (pockmcu_softmax_grad_f32)."""
    y = dequantized_f32(yq, s, zp)
    d = np.asarray(dy).astype(F32).reshape(y.shape)
    rows_y, rows_d = y.reshape(-1, y.shape[-1]), d.reshape(-1, y.shape[-1])
    dot = np.zeros(rows_y.shape[0], F32)
    with np.errstate(over="ignore", invalid="ignore"):
        for k in range(rows_y.shape[1]):
            dot = (dot + rows_d[:, k] * rows_y[:, k]).astype(F32)
        return (rows_y * (rows_d - dot[:, None])).astype(F32).reshape(y.shape)


class _SavedOutputGrad(OpDef):
    """A backward op whose inputs are the forward op's saved int8 output and the output gradient."""

    Options = LayerGrad
    io_dtypes = ("int8", "float32")

    def macs(self, g: Graph, op: Op) -> int:
        return 2 * g.t(op.inputs[0]).size


@register
class LogisticGrad(_SavedOutputGrad):
    """Backward of LOGISTIC: dx = dy * (1 - y) * y."""

    kind = "LOGISTIC_GRAD"
    kernel = "pockmcu_logistic_grad_f32"
    may_share_input = (1,)    # element k read before it is written

    def reference(self, g: Graph, op: Op, xs, rt=None):
        y = g.t(op.inputs[0])
        return [logistic_grad(xs[0], xs[1], y.quant.s, y.quant.zp).astype(np.float64)]

    def emit(self, g: Graph, op: Op, cg) -> Emission:
        y = g.t(op.inputs[0])
        return Emission(calls=(Call(cg.kernel(op).function, (
            Ptr(y.name), y.size, float(y.quant.s), y.quant.zp, Ptr(op.inputs[1]), Ptr(op.outputs[0]))),))


@register
class SoftmaxGrad(_SavedOutputGrad):
    """Backward of a SOFTMAX inside the network: dx = y * (dy - sum(dy * y)) per row."""

    kind = "SOFTMAX_GRAD"
    kernel = "pockmcu_softmax_grad_f32"
    may_share_input = (1,)    # a row's dot product is formed before any of its elements is written

    def reference(self, g: Graph, op: Op, xs, rt=None):
        y = g.t(op.inputs[0])
        return [softmax_grad(xs[0], xs[1], y.quant.s, y.quant.zp).astype(np.float64)]

    def emit(self, g: Graph, op: Op, cg) -> Emission:
        y = g.t(op.inputs[0])
        depth = y.shape[-1]
        return Emission(calls=(Call(cg.kernel(op).function, (
            Ptr(y.name), y.size // depth, depth, float(y.quant.s), y.quant.zp, Ptr(op.inputs[1]),
            Ptr(op.outputs[0]))),))
