"""RESIZE_NEAREST_NEIGHBOR and RESIZE_BILINEAR of an int8 NHWC tensor, and their gradients.

Semantics: TFLite Micro's resize_nearest_neighbor.cc / resize_bilinear.cc, size a constant int32
[2] input (TFLM refuses a computed one), align_corners and half_pixel_centers as the options say.

- Nearest (reference_ops::ResizeNearestNeighbor): each output row and column reads one source row
  and column, found with float32 arithmetic (GetNearestNeighbor: scale = in / out, or (in - 1) /
  (out - 1) with align_corners; (o + 0.5 if half_pixel_centers) * scale, rounded half away from zero
  with align_corners and floored otherwise, clamped). pockmcu evaluates those float32 expressions
  at compile time (``nearest_indices``); the kernel copies.
- Bilinear, int8 (reference_ops::ResizeBilinearInteger, no float at all): 10-bit fixed-point
  scales ((1024 in + out / 2) / out, or the align_corners form), per output row the source
  coordinate input_y = y scale (+ scale / 2 - 512 with half_pixel_centers), rows y0 = max(input_y
  / 1024, 0) and y1 = min(ceil, in - 1) with C's truncating division, and per output the four
  products of fractions summed in 64 bits and divided by 2^20 rounding half away from zero (TFLM's
  default double-rounding build). pockmcu computes {y0, y1, input_y - 1024 y0} per row and column at
  compile time (``bilinear_axis``); the kernel does the integer sums.

Input and output share their quantization (TFLM copies and interpolates the int8 values without
rescaling; a model with different quantization is refused). So the real-valued op is the same
linear map, and its gradient is the transposed map, in float32: nearest scatters each output
gradient to its source (a scatter-add), bilinear distributes it with the forward's exact weights.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..ccode import Array, Call, Emission, Local, Ptr, Struct, dims4
from ..ir import Graph, Op
from .base import OpDef, operand, register

F32 = np.float32


@dataclass(frozen=True)
class ResizeOptions:
    align_corners: bool = False
    half_pixel_centers: bool = False


@dataclass(frozen=True)
class ResizeData:
    """Compile-time source indices: nearest, rows[OH] / cols[OW]; bilinear, {y0, y1, fy} per row
    (rows[3 OH]) and {x0, x1, fx} per column (cols[3 OW])."""

    rows: tuple[int, ...]
    cols: tuple[int, ...]


@dataclass(frozen=True, eq=False)
class ResizeGradOptions:
    layer: Op                          # the forward resize (its decls: input/output dims, rows, cols)


def _round_half_away(v: F32) -> int:
    """TfLiteRound (std::round) of a float32, as an int."""
    a = np.floor(np.abs(np.float64(v)) + 0.5)
    return int(a) if v >= 0 else -int(a)


def nearest_indices(out_size: int, in_size: int, align_corners: bool, half_pixel_centers: bool) -> tuple[int, ...]:
    """TFLM GetNearestNeighbor for every output position, in float32."""
    if align_corners and out_size > 1:
        scale = F32(in_size - 1) / F32(out_size - 1)
    else:
        scale = F32(in_size) / F32(out_size)
    offset = F32(0.5) if half_pixel_centers else F32(0.0)
    out = []
    for o in range(out_size):
        v = F32(F32(o) + offset) * scale
        k = min(_round_half_away(v) if align_corners else int(np.floor(v)), in_size - 1)
        out.append(max(0, k) if half_pixel_centers else k)
    return tuple(out)


def _cdiv(a: int, b: int) -> int:
    """C integer division (toward zero), b > 0."""
    return a // b if a >= 0 else -((-a) // b)


def bilinear_axis(out_size: int, in_size: int, align_corners: bool, half_pixel_centers: bool) -> tuple[int, ...]:
    """TFLM ResizeBilinearInteger's scale_10 and ComputeInterpolationValuesInteger for every output
    position: {lower, upper, input_coord - 1024 lower} flattened."""
    scale = _cdiv((1 << 10) * in_size + out_size // 2, out_size)
    if align_corners and out_size > 1:
        scale = _cdiv((1 << 10) * (in_size - 1) + (out_size - 1) // 2, out_size - 1)
    out: list[int] = []
    for o in range(out_size):
        v = o * scale + _cdiv(scale, 2) - (1 << 9) if half_pixel_centers else o * scale
        lo = max(_cdiv(v, 1 << 10), 0)
        hi = min(_cdiv(v + (1 << 10) - 1, 1 << 10), in_size - 1)
        out += [lo, hi, v - (1 << 10) * lo]
    return tuple(out)


def resize_nearest_s8(x: np.ndarray, rows, cols) -> np.ndarray:
    return np.asarray(x)[:, list(rows)][:, :, list(cols)]


def _weights(rows, cols):
    r = np.asarray(rows, np.int64).reshape(-1, 3)
    c = np.asarray(cols, np.int64).reshape(-1, 3)
    fy, fx = r[:, 2][:, None], c[:, 2][None, :]
    w = [(1024 - fy) * (1024 - fx), fy * (1024 - fx), (1024 - fy) * fx, fy * fx]   # ll, lu, rl, ru (TFLM's order)
    taps = [(r[:, 0], c[:, 0]), (r[:, 1], c[:, 0]), (r[:, 0], c[:, 1]), (r[:, 1], c[:, 1])]
    return w, taps


def resize_bilinear_s8(x: np.ndarray, rows, cols) -> np.ndarray:
    """TFLM ResizeBilinearInteger<int8_t> on [N, H, W, C]."""
    xs = np.asarray(x).astype(np.int64)
    w, taps = _weights(rows, cols)
    v = sum(xs[:, ty][:, :, tx] * wk[None, :, :, None] for wk, (ty, tx) in zip(w, taps))
    t = v + np.where(v > 0, 1 << 19, -(1 << 19))
    return np.where(t >= 0, t >> 20, -((-t) >> 20)).astype(np.int8)


def resize_nearest_grad(dy: np.ndarray, in_shape, rows, cols) -> np.ndarray:
    """pockmcu_resize_nearest_grad_f32: zero, then += each output gradient at its source, outputs in order."""
    dy = np.asarray(dy, np.float64).astype(F32)
    dx = np.zeros((dy.shape[0],) + tuple(in_shape[1:]), F32)
    for y, r in enumerate(rows):
        for x, c in enumerate(cols):
            dx[:, r, c, :] += dy[:, y, x, :]
    return dx


def resize_bilinear_grad(dy: np.ndarray, in_shape, rows, cols) -> np.ndarray:
    """pockmcu_resize_bilinear_grad_f32: the transposed interpolation, float32, outputs in order and the
    four taps in TFLM's order, each g * k with k = w / 2^20 exact in float32."""
    dy = np.asarray(dy, np.float64).astype(F32)
    dx = np.zeros((dy.shape[0],) + tuple(in_shape[1:]), F32)
    w, taps = _weights(rows, cols)
    unit = F32(1.0 / 1048576.0)
    k = [wk.astype(F32) * unit for wk in w]
    for y in range(dy.shape[1]):
        for x in range(dy.shape[2]):
            g = dy[:, y, x, :]
            for kk, (ty, tx) in zip(k, taps):
                dx[:, ty[y], tx[x], :] += g * kk[y, x]
    return dx


class _Resize(OpDef):
    Options = ResizeOptions
    operands = ("input", "size")

    def parse_tflite(self, o, op: Op, tensors) -> ResizeOptions:
        if o is None:
            return ResizeOptions()
        return ResizeOptions(align_corners=bool(o.AlignCorners()), half_pixel_centers=bool(o.HalfPixelCenters()))

    def activation_inputs(self, g: Graph, op: Op) -> list[str]:
        return [op.inputs[0]]

    def check(self, g: Graph, op: Op) -> list[str]:
        problems = super().check(g, op)
        x, y = g.t(op.inputs[0]), g.t(op.outputs[0])
        size = g.t(operand(op, "size")) if operand(op, "size") else None
        if size is None or size.data is None:
            return problems + [f"{op.kind} with a computed size (TFLite Micro needs a constant size tensor)"]
        if len(x.shape) != 4 or size.data.size != 2:
            return problems + [f"{op.kind} of a rank-{len(x.shape)} input with a size of {size.data.size} values "
                               "(a 4-D NHWC input and [height, width])"]
        oh, ow = (int(v) for v in size.data.reshape(-1))
        if oh <= 0 or ow <= 0 or min(x.shape) <= 0:
            return problems + [f"{op.kind} to size [{oh}, {ow}] from {list(x.shape)} (sizes must be positive)"]
        if tuple(y.shape) != (x.shape[0], oh, ow, x.shape[3]):
            return problems + [f"{op.kind} output {list(y.shape)} does not match size [{oh}, {ow}] of input "
                               f"{list(x.shape)}"]
        if problems:
            return problems
        if (x.quant.per_channel or y.quant.per_channel or float(F32(x.quant.s)) != float(F32(y.quant.s))
                or x.quant.zp != y.quant.zp):
            problems.append(f"input quantization (scale {x.quant.s}, zero point {x.quant.zp}) differs from the output's "
                            f"({y.quant.s}, {y.quant.zp}); TFLite Micro would copy the int8 values without rescaling")
        return problems

    def _sizes(self, g: Graph, op: Op) -> tuple[int, int, int, int]:
        x, y = g.t(op.inputs[0]), g.t(op.outputs[0])
        return x.shape[1], x.shape[2], y.shape[1], y.shape[2]

    def emit(self, g: Graph, op: Op, cg) -> Emission:
        p, x, y = op.prepared, op.inputs[0], op.outputs[0]
        decls = (Struct("input_dims", "cmsis_nn_dims", dims4(g.t(x).shape)),
                 Struct("output_dims", "cmsis_nn_dims", dims4(g.t(y).shape)),
                 Array("rows", "int32_t", p.rows), Array("cols", "int32_t", p.cols))
        return Emission(decls=decls, calls=(Call(cg.kernel(op).function, (
            Local("input_dims"), Ptr(x), Local("output_dims"), Local("rows", address=False),
            Local("cols", address=False), Ptr(y)), status=True),))

    def backward(self, tb, op: Op) -> None:
        x = op.inputs[0]
        if not tb.needs_grad(x):
            return
        dx = tb.grad_tensor(x, f"{tb.short(x)}_grad_from_{op.name}")
        tb.emit(f"{self.kind}_GRAD", f"{op.name}_grad", [tb.grad(op.outputs[0])], [dx], layer=op)
        tb.add_grad(x, dx)


@register
class ResizeNearestNeighbor(_Resize):
    kind = "RESIZE_NEAREST_NEIGHBOR"
    tflite_ops = ("RESIZE_NEAREST_NEIGHBOR",)
    tflite_options = "ResizeNearestNeighborOptions"
    kernel = "pockmcu_resize_nearest_s8"

    def prepare(self, g: Graph, op: Op) -> ResizeData:
        h, w, oh, ow = self._sizes(g, op)
        o = op.options
        return ResizeData(nearest_indices(oh, h, o.align_corners, o.half_pixel_centers),
                          nearest_indices(ow, w, o.align_corners, o.half_pixel_centers))

    def reference(self, g: Graph, op: Op, xs, rt=None):
        return [resize_nearest_s8(xs[0], op.prepared.rows, op.prepared.cols)]


@register
class ResizeBilinear(_Resize):
    kind = "RESIZE_BILINEAR"
    tflite_ops = ("RESIZE_BILINEAR",)
    tflite_options = "ResizeBilinearOptions"
    kernel = "pockmcu_resize_bilinear_s8"

    def check(self, g: Graph, op: Op) -> list[str]:
        problems = super().check(g, op)
        if problems:
            return problems
        o = op.options
        if o.align_corners and o.half_pixel_centers:
            return ["align_corners and half_pixel_centers are both set; TFLite Micro refuses it"]
        p = self.prepare(g, op)
        h, w, _, _ = self._sizes(g, op)
        if max(p.rows[0::3]) > h - 1 or max(p.cols[0::3]) > w - 1:
            return ["its 10-bit source coordinates run past the input (TFLite Micro would read outside it); "
                    "resize in two steps"]
        return []

    def prepare(self, g: Graph, op: Op) -> ResizeData:
        h, w, oh, ow = self._sizes(g, op)
        o = op.options
        return ResizeData(bilinear_axis(oh, h, o.align_corners, o.half_pixel_centers),
                          bilinear_axis(ow, w, o.align_corners, o.half_pixel_centers))

    def reference(self, g: Graph, op: Op, xs, rt=None):
        return [resize_bilinear_s8(xs[0], op.prepared.rows, op.prepared.cols)]


class _ResizeGrad(OpDef):
    Options = ResizeGradOptions
    io_dtypes = ("float32",)

    def emit(self, g: Graph, op: Op, cg) -> Emission:
        f = op.options.layer.name
        return Emission(calls=(Call(cg.kernel(op).function, (
            Local("input_dims", owner=f), Local("output_dims", owner=f), Local("rows", owner=f, address=False),
            Local("cols", owner=f, address=False), Ptr(op.inputs[0]), Ptr(op.outputs[0]))),))


@register
class ResizeNearestNeighborGrad(_ResizeGrad):
    """The backward of RESIZE_NEAREST_NEIGHBOR: a scatter-add of the output gradient. inputs: [dy]."""

    kind = "RESIZE_NEAREST_NEIGHBOR_GRAD"
    kernel = "pockmcu_resize_nearest_grad_f32"

    def reference(self, g: Graph, op: Op, xs, rt=None):
        f = op.options.layer
        return [resize_nearest_grad(xs[0], g.t(f.inputs[0]).shape, f.prepared.rows, f.prepared.cols)
                .astype(np.float64)]


@register
class ResizeBilinearGrad(_ResizeGrad):
    """The backward of RESIZE_BILINEAR: the transposed interpolation. inputs: [dy]."""

    kind = "RESIZE_BILINEAR_GRAD"
    kernel = "pockmcu_resize_bilinear_grad_f32"

    def reference(self, g: Graph, op: Op, xs, rt=None):
        f = op.options.layer
        return [resize_bilinear_grad(xs[0], g.t(f.inputs[0]).shape, f.prepared.rows, f.prepared.cols)
                .astype(np.float64)]
