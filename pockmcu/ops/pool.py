"""AVERAGE_POOL_2D and MAX_POOL_2D, int8 (input and output share quantization).

Semantics: TFLite Micro reference_integer_ops::AveragePool / MaxPool. Only
in-bounds taps count; the average rounds half away from zero
((sum +- count/2) / count, truncating division); both clamp to the fused
activation range.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import fixedpoint as fp
from .. import fixedpoint_ort as ort
from ..ccode import SCRATCH, Array, Call, Emission, Local, Ptr, Struct, dims4
from ..ir import Graph, Op
from .base import SUPPORTED_ACTIVATIONS, OpDef, Window, fused_activation, register, same_or_valid_pads
from .conv import PADDING


def pool_taps(x: np.ndarray, fh: int, fw: int, stride, pads, out_hw):
    """Yield (values, valid) per filter tap, each [N, OH, OW, C]; valid marks in-bounds taps."""
    top, left, bottom, right = pads
    n, h, w, c = x.shape
    oh, ow = out_hw
    xp = np.pad(x.astype(np.int64), ((0, 0), (top, bottom + stride[0]), (left, right + stride[1]), (0, 0)))
    mask = np.pad(np.ones((1, h, w, 1), bool), ((0, 0), (top, bottom + stride[0]), (left, right + stride[1]), (0, 0)))
    for i in range(fh):
        for j in range(fw):
            sl = (slice(None), slice(i, i + stride[0] * (oh - 1) + 1, stride[0]),
                  slice(j, j + stride[1] * (ow - 1) + 1, stride[1]), slice(None))
            yield xp[sl], mask[sl]


@dataclass(frozen=True)
class PoolOptions:
    """AVERAGE_POOL_2D / MAX_POOL_2D / AVERAGE_POOL_REQUANT: the window, its padding and the fused
    activation. ``pads`` (top, left, bottom, right) is given by the ONNX frontend (``padding`` is
    then EXPLICIT or VALID); from TFLite it is None and Prepare computes it from SAME/VALID."""

    filter: tuple[int, int]
    stride: tuple[int, int]
    padding: str = "VALID"
    activation: str = "NONE"
    pads: tuple[int, int, int, int] | None = None
    onnx_zp_offset: int = 0      # +128 for a uint8 ONNX output (onnxruntime adds the zero point in float)


@dataclass(frozen=True, eq=False)
class OrtPool:
    """onnxruntime's average pooling tables (see ort_pool_prepare)."""

    dq: np.ndarray               # float32: the dequantized value of every int8 input (index x + 128)
    zp_offset: int               # the output zero point's offset to the model's own domain (uint8: 128)
    zp_onnx: int                 # the output zero point in the model's own domain


@dataclass(frozen=True, eq=False)
class PoolData:
    """The compile-time constants of AVERAGE_POOL_2D / MAX_POOL_2D (a streamed tile: its own pads)."""

    pads: tuple[int, int, int, int]     # top, left, bottom, right
    act_min: int
    act_max: int
    ort: OrtPool | None = None          # onnxruntime numerics (average pooling): computed in float32


def pool_pads(g: Graph, op: Op) -> tuple[int, int, int, int]:
    """The frontend's explicit pads, else TFLite's SAME/VALID padding of the window."""
    o = op.options
    if o.pads is not None:
        return o.pads
    x, y = g.t(op.inputs[0]), g.t(op.outputs[0])
    return same_or_valid_pads(o.padding, x.shape[1:3], o.filter, o.stride, (1, 1), y.shape[1:3])


# -- onnxruntime numerics: QLinearAveragePool in float32 (fixedpoint_ort.ort_avgpool, pockmcu_avgpool_ort_s8) --

def ort_pool_prepare(g: Graph, op: Op) -> OrtPool:
    """Compile-time tables of onnxruntime's average pooling: the dequantized value of every int8 input
    and the output scale and zero point as float32 bit patterns (zero point in the model's own domain:
    the frontend records +128 for a uint8 output as onnx_zp_offset)."""
    x, y = g.t(op.inputs[0]), g.t(op.outputs[0])
    offset = int(op.options.onnx_zp_offset)
    return OrtPool(ort.ort_dequantize_table(x.quant.s, x.quant.zp), offset, y.quant.zp + offset)


def ort_pool_reference(g: Graph, op: Op, xs) -> np.ndarray:
    o, p, y = op.options, op.prepared, g.t(op.outputs[0])
    return ort.ort_avgpool(pool_taps(xs[0], *o.filter, o.stride, p.pads, y.shape[1:3]), p.ort.dq,
                          y.quant.s, p.ort.zp_onnx, p.ort.zp_offset, p.act_min, p.act_max)


def pool_decls(g: Graph, op: Op) -> list:
    """The params struct and dims of a pool (AVERAGE_POOL_2D, MAX_POOL_2D, AVERAGE_POOL_REQUANT), and
    with onnxruntime numerics its dequantization table (the bit patterns of 256 float32 values)."""
    o, p = op.options, op.prepared
    decls = [Struct("params", "cmsis_nn_pool_params", dict(
                 stride=dict(w=o.stride[1], h=o.stride[0]), padding=dict(w=p.pads[1], h=p.pads[0]),
                 activation=dict(min=p.act_min, max=p.act_max))),
             Struct("input_dims", "cmsis_nn_dims", dims4(g.t(op.inputs[0]).shape)),
             Struct("filter_dims", "cmsis_nn_dims", (1, o.filter[0], o.filter[1], 1)),
             Struct("output_dims", "cmsis_nn_dims", dims4(g.t(op.outputs[0]).shape))]
    if p.ort is not None:
        decls.append(Array("dq", "uint32_t", tuple(f"0x{int(b):08x}u" for b in ort.f32_bits(p.ort.dq))))
    return decls


def ort_pool_call(g: Graph, op: Op, cg) -> Call:
    """onnxruntime's average pooling in float32 (pockmcu_avgpool_ort_s8): the output scale and zero
    point passed as float32 bit patterns."""
    r, y = op.prepared.ort, g.t(op.outputs[0])
    scale_bits, zp_bits = int(ort.f32_bits(y.quant.scale[:1])[0]), int(ort.f32_bits([r.zp_onnx])[0])
    return Call(cg.kernel(op).function, (
        Local("params"), Local("input_dims"), Ptr(op.inputs[0]), Local("filter_dims"), Local("output_dims"),
        Local("dq", address=False), f"{scale_bits}u", f"{zp_bits}u", r.zp_offset, Ptr(op.outputs[0])), status=True)


class _Pool(OpDef):
    tflite_options = "Pool2DOptions"
    Options = PoolOptions

    def parse_tflite(self, o, op: Op, tensors) -> PoolOptions:
        return PoolOptions(stride=(o.StrideH(), o.StrideW()), filter=(o.FilterHeight(), o.FilterWidth()),
                           padding=PADDING[o.Padding()], activation=fused_activation(o.FusedActivationFunction()))

    def check(self, g: Graph, op: Op) -> list[str]:
        problems = super().check(g, op)
        if op.options.activation not in SUPPORTED_ACTIVATIONS:
            problems.append(op.options.activation)
        if not problems:
            x, y = g.t(op.inputs[0]), g.t(op.outputs[0])
            if x.quant.s != y.quant.s or x.quant.zp != y.quant.zp:
                problems.append(f"input and output quantization differ ({x.quant.s}/{x.quant.zp} vs {y.quant.s}/{y.quant.zp})")
        return problems

    def prepare(self, g: Graph, op: Op) -> PoolData:
        y = g.t(op.outputs[0])
        act_min, act_max = fp.activation_range(op.options.activation, y.quant.s, y.quant.zp)
        ort_data = ort_pool_prepare(g, op) if g.numerics == "onnxruntime" and self.kind == "AVERAGE_POOL_2D" else None
        return PoolData(pool_pads(g, op), act_min, act_max, ort_data)

    def window(self, g: Graph, op: Op) -> Window:
        o = op.options
        return Window(tuple(o.filter), tuple(o.stride), (1, 1), tuple(op.prepared.pads))

    def describe(self, g: Graph, op: Op) -> str:
        o = op.options
        return (f"{self.kind} {o.filter[0]}x{o.filter[1]} stride {o.stride[0]}x{o.stride[1]} "
                f"{o.padding}: {list(g.t(op.inputs[0]).shape)} -> {list(g.t(op.outputs[0]).shape)}")

    def emit(self, g: Graph, op: Op, cg) -> Emission:
        if op.prepared.ort is not None:
            call = ort_pool_call(g, op, cg)
        else:
            call = Call(cg.kernel(op).function, (SCRATCH, Local("params"), Local("input_dims"), Ptr(op.inputs[0]),
                                                 Local("filter_dims"), Local("output_dims"), Ptr(op.outputs[0])),
                        status=True)
        return Emission(calls=(call,), decls=tuple(pool_decls(g, op)), buffer_query=self.buffer_query(g, op))

    def buffer_query(self, g: Graph, op: Op) -> Call | None:
        """The kernel's scratch query for pockmcu_init (None: it asks for none)."""
        return None


@register
class AveragePool2D(_Pool):
    kind = "AVERAGE_POOL_2D"
    tflite_ops = ("AVERAGE_POOL_2D",)
    kernel = "arm_avgpool_s8"

    def variant(self, g: Graph, op: Op, cg) -> str:
        return "ort_float" if op.prepared.ort is not None else ""

    def backward(self, tb, op: Op) -> None:
        _pool_backward(tb, op, "AVERAGE_POOL_2D_GRAD", needs_input=False)

    def reference(self, g: Graph, op: Op, xs, rt=None):
        o, p = op.options, op.prepared
        if p.ort is not None:
            return [ort_pool_reference(g, op, xs)]
        y = g.t(op.outputs[0])
        total = np.zeros((xs[0].shape[0],) + y.shape[1:], np.int64)
        count = np.zeros((1,) + y.shape[1:3] + (1,), np.int64)
        for vals, valid in pool_taps(xs[0], *o.filter, o.stride, p.pads, y.shape[1:3]):
            total += vals
            count += valid
        half = count // 2
        avg = np.where(total > 0, (total + half) // count, -((-(total - half)) // count))  # C division truncates
        return [np.clip(avg, p.act_min, p.act_max).astype(np.int8)]

    def buffer_query(self, g: Graph, op: Op) -> Call:
        """arm_avgpool_s8's scratch query (pockmcu_init asks it for the onnxruntime kernel too)."""
        y = g.t(op.outputs[0])
        return Call("arm_avgpool_s8_get_buffer_size", (y.shape[2], y.shape[3]))


@register
class MaxPool2D(_Pool):
    kind = "MAX_POOL_2D"
    tflite_ops = ("MAX_POOL_2D",)
    kernel = "arm_max_pool_s8"

    def backward(self, tb, op: Op) -> None:
        _pool_backward(tb, op, "MAX_POOL_2D_GRAD", needs_input=True)

    def reference(self, g: Graph, op: Op, xs, rt=None):
        o, p = op.options, op.prepared
        y = g.t(op.outputs[0])
        best = np.full((xs[0].shape[0],) + y.shape[1:], -129, np.int64)
        for vals, valid in pool_taps(xs[0], *o.filter, o.stride, p.pads, y.shape[1:3]):
            best = np.where(valid, np.maximum(best, vals), best)
        return [np.clip(best, p.act_min, p.act_max).astype(np.int8)]



# -- training ----------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class PoolGradOptions:
    """The backward of a pool: the forward ``layer`` (its window and pads, and its C parameters
    ``<layer>_params`` / ``_dims``, which the gradient call reuses) and whether that pool is a
    spatial mean (one window covering the whole unpadded input: training/fusions.py may fuse it)."""

    layer: Op
    spatial_mean: bool = False


class _PoolGrad(OpDef):
    io_dtypes = ("float32", "int8")
    Options = PoolGradOptions

    @staticmethod
    def of_layer(op: Op, name: str) -> Local:
        """``&<layer>_<name>``: the forward pool's params and dims, reused by the gradient call."""
        return Local(name, owner=op.options.layer.name)


@register
class AveragePoolGrad(_PoolGrad):
    """Each output's gradient, divided by its window's in-bounds count, to every in-bounds input."""

    kind = "AVERAGE_POOL_2D_GRAD"
    kernel = "pockmcu_avgpool_grad_f32"

    def reference(self, g: Graph, op: Op, xs, rt=None):
        f = op.options.layer
        (fh, fw), (sh, sw), pads = f.options.filter, f.options.stride, f.prepared.pads
        dy = xs[0].astype(np.float64)
        n, (h, w, c) = dy.shape[0], g.t(f.inputs[0]).shape[1:]
        count = np.zeros((1,) + dy.shape[1:3] + (1,))
        for _, valid in pool_taps(np.zeros((1, h, w, 1), np.int8), fh, fw, (sh, sw), pads, dy.shape[1:3]):
            count += valid
        share = dy / count
        top, left = pads[0], pads[1]
        dxp = np.zeros((n, h + pads[0] + pads[2] + sh + fh, w + pads[1] + pads[3] + sw + fw, c))
        oh, ow = dy.shape[1:3]
        for i in range(fh):
            for j in range(fw):
                dxp[:, i:i + sh * (oh - 1) + 1:sh, j:j + sw * (ow - 1) + 1:sw, :] += share
        return [dxp[:, top:top + h, left:left + w, :]]

    def emit(self, g: Graph, op: Op, cg) -> Emission:
        return Emission(calls=(Call(cg.kernel(op).function, (
            self.of_layer(op, "params"), self.of_layer(op, "input_dims"), self.of_layer(op, "filter_dims"),
            self.of_layer(op, "output_dims"), Ptr(op.inputs[-1]), Ptr(op.outputs[0])), status=True),))


@register
class MaxPoolGrad(_PoolGrad):
    """Each output's gradient to the first maximum of its window (scan order), from the saved input."""

    kind = "MAX_POOL_2D_GRAD"
    kernel = "pockmcu_max_pool_grad_f32"

    def reference(self, g: Graph, op: Op, xs, rt=None):
        f = op.options.layer
        (fh, fw), (sh, sw) = f.options.filter, f.options.stride
        x, dy = xs[0].astype(np.int64), xs[1].astype(np.float64)
        n, h, w, c = x.shape
        oh, ow = dy.shape[1:3]
        dx = np.zeros(x.shape)
        top, left = f.prepared.pads[0], f.prepared.pads[1]
        for b in range(n):
            for r in range(oh):
                for s in range(ow):
                    for ch in range(c):
                        best, at = None, None
                        for i in range(fh):
                            for j in range(fw):
                                yy, xx = r * sh - top + i, s * sw - left + j
                                if 0 <= yy < h and 0 <= xx < w and (best is None or x[b, yy, xx, ch] > best):
                                    best, at = x[b, yy, xx, ch], (yy, xx)
                        if at is not None:
                            dx[b, at[0], at[1], ch] += dy[b, r, s, ch]
        return [dx]

    def emit(self, g: Graph, op: Op, cg) -> Emission:
        """Reads the forward pool's input (saved for it) to find each window's first maximum."""
        return Emission(calls=(Call(cg.kernel(op).function, (
            self.of_layer(op, "params"), self.of_layer(op, "input_dims"), Ptr(op.options.layer.inputs[0]),
            self.of_layer(op, "filter_dims"), self.of_layer(op, "output_dims"), Ptr(op.inputs[-1]),
            Ptr(op.outputs[0])), status=True),))


def _pool_backward(tb, op: Op, grad_kind: str, needs_input: bool) -> None:
    x = op.inputs[0]
    if not tb.needs_grad(x):
        return
    dz = tb.masked(op, tb.grad(op.outputs[0]))
    dx = tb.grad_tensor(x, f"{tb.short(x)}_grad_from_{op.name}")
    xt, y = tb.g.t(x), tb.g.t(op.outputs[0])
    whole = (grad_kind == "AVERAGE_POOL_2D_GRAD" and tuple(y.shape[1:3]) == (1, 1)
             and tuple(op.options.filter) == tuple(xt.shape[1:3]) and not any(op.prepared.pads))
    tb.emit(grad_kind, f"{op.name}_grad", ([x] if needs_input else []) + [dz], [dx], layer=op,
            spatial_mean=whole)
    tb.add_grad(x, dx)
