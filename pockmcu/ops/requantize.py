"""REQUANTIZE (int8 -> int8, new scale/zero point, optional clamp), ADD_CONST
(int8 tensor + int8 constant broadcast along the last axis) and AVERAGE_POOL_REQUANT
(average pooling into another quantization), added for ONNX models whose
quantized ops TFLite has no single op for.

Semantics:
- REQUANTIZE: TFLite Micro's int8 -> int8 QUANTIZE (reference_ops::Requantize):
  MultiplyByQuantizedMultiplier(x - zp_in, QuantizeMultiplier(s_in / s_out))
  + zp_out, clamped to [act_min, act_max] (the int8 range unless the frontend
  lowered a Relu/Clip into it). With equal scales it is exact.
- ADD_CONST: TFLite Micro's int8 ADD (left shift 20, per-input and output
  multipliers, see pockmcu.fixedpoint.add_params) with the second operand a
  constant of the whole shape or of the last axis (a per-channel vector), as
  onnxruntime's QOperator / QDQ quantizer leaves an Add of a bias. Emitted as
  one arm_elementwise_add_s8 call per row.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import fixedpoint as fp
from .. import fixedpoint_ort as ort
from ..ccode import Array, Call, Emission, Local, Ptr
from ..ir import Graph, Op
from .base import SUPPORTED_ACTIVATIONS, OpDef, register
from .pool import OrtPool, PoolOptions, ort_pool_call, ort_pool_prepare, ort_pool_reference, pool_decls, pool_pads, pool_taps


@dataclass(frozen=True)
class RequantizeOptions:
    #: the exact integer range a lowered Relu/Clip leaves (None: the whole int8 range)
    clamp: tuple[int, int] | None = None


@dataclass(frozen=True, eq=False)
class RequantizeData:
    multiplier: int              # QuantizeMultiplier(s_in / s_out)
    shift: int
    act_min: int
    act_max: int
    table: np.ndarray | None = None   # onnxruntime numerics: the int8 -> int8 table (index x + 128)


@register
class Requantize(OpDef):
    kind = "REQUANTIZE"
    kernel = "pockmcu_requantize_s8"
    Options = RequantizeOptions

    def variant(self, g: Graph, op: Op, cg) -> str:
        return "table" if op.prepared.table is not None else ""

    def check(self, g: Graph, op: Op) -> list[str]:
        problems = super().check(g, op)
        x, y = g.t(op.inputs[0]), g.t(op.outputs[0])
        if x.shape != y.shape:
            problems.append(f"shape {list(x.shape)} -> {list(y.shape)}")
        if not problems and (x.quant.per_channel or y.quant.per_channel):
            problems.append("per-channel activation quantization")
        return problems

    def prepare(self, g: Graph, op: Op) -> RequantizeData:
        x, y = g.t(op.inputs[0]), g.t(op.outputs[0])
        multiplier, shift = fp.quantize_multiplier(float(x.quant.s) / float(y.quant.s))
        lo, hi = op.options.clamp or (-128, 127)
        act_min, act_max = max(int(lo), -128), min(int(hi), 127)
        table = None
        if g.numerics == "onnxruntime":   # DequantizeLinear -> QuantizeLinear in float32, as a table
            table = ort.ort_requantize_table(x.quant.s, x.quant.zp, y.quant.s, y.quant.zp, act_min, act_max)
        return RequantizeData(multiplier, shift, act_min, act_max, table)

    def reference(self, g: Graph, op: Op, xs, rt=None):
        p = op.prepared
        x, y = g.t(op.inputs[0]), g.t(op.outputs[0])
        if p.table is not None:
            return [p.table[xs[0].astype(np.int64) + 128]]
        v = fp.multiply_by_quantized_multiplier(xs[0].astype(np.int64) - x.quant.zp, p.multiplier, p.shift)
        return [np.clip(np.asarray(v) + y.quant.zp, p.act_min, p.act_max).astype(np.int8)]

    def describe(self, g: Graph, op: Op) -> str:
        x, y, c = g.t(op.inputs[0]), g.t(op.outputs[0]), op.options.clamp
        clamp = f" clamp [{c[0]}, {c[1]}]" if c else ""
        return (f"REQUANTIZE {x.quant.s:.6g}/{x.quant.zp} -> {y.quant.s:.6g}/{y.quant.zp}{clamp}: "
                f"{list(x.shape)}")

    def emit(self, g: Graph, op: Op, cg) -> Emission:
        x, y, p = g.t(op.inputs[0]), g.t(op.outputs[0]), op.prepared
        function = cg.kernel(op).function
        if p.table is not None:     # onnxruntime numerics: a 256-entry lookup
            return Emission(calls=(Call(function, (Ptr(x.name), x.size, Local("table", address=False), Ptr(y.name)),
                                        status=True),),
                            decls=(Array("table", "int8_t", tuple(p.table)),))
        return Emission(calls=(Call(function, (Ptr(x.name), x.size, -x.quant.zp, p.multiplier, p.shift, y.quant.zp,
                                               p.act_min, p.act_max, Ptr(y.name)), status=True),))

    def backward(self, tb, op: Op) -> None:
        """(onnxops, additive) Real values pass through a requantization: the output gradient, zeroed
        where the output was clamped (the clamp range or the int8 range; straight-through, as ADD's)."""
        if tb.needs_grad(op.inputs[0]):
            tb.add_grad(op.inputs[0], tb.masked(op, tb.grad(op.outputs[0])))


@dataclass(frozen=True)
class AddConstOptions:
    activation: str = "NONE"


@dataclass(frozen=True)
class AddConstData:
    q: dict                      # fixedpoint.add_params: offsets, multipliers and shifts of TFLM's int8 ADD
    act_min: int
    act_max: int


@register
class AddConst(OpDef):
    kind = "ADD_CONST"
    kernel = "arm_elementwise_add_s8"
    Options = AddConstOptions
    operands = ("input", "constant")

    def check(self, g: Graph, op: Op) -> list[str]:
        problems = super().check(g, op)
        if op.options.activation not in SUPPORTED_ACTIVATIONS:
            problems.append(op.options.activation)
        x, c = g.t(op.inputs[0]), g.t(op.inputs[1])
        if c.data is None or c.dtype != "int8" or c.quant is None or c.quant.per_channel:
            problems.append(f"constant operand '{c.name}' must be int8 with per-tensor quantization")
        elif not (c.size == x.size or (x.shape and c.size == x.shape[-1])):
            problems.append(f"constant of shape {list(c.shape)} does not broadcast along the last axis of {list(x.shape)}")
        return problems

    def prepare(self, g: Graph, op: Op) -> AddConstData:
        x, c, y = g.t(op.inputs[0]), g.t(op.inputs[1]), g.t(op.outputs[0])
        q = fp.add_params(x.quant.s, x.quant.zp, c.quant.s, c.quant.zp, y.quant.s, y.quant.zp)
        return AddConstData(q, *fp.activation_range(op.options.activation, y.quant.s, y.quant.zp))

    def _broadcast(self, g: Graph, op: Op, x: np.ndarray) -> np.ndarray:
        c = g.t(op.inputs[1]).data
        per_sample = int(np.prod(x.shape[1:], dtype=np.int64))
        return c.reshape(x.shape[1:]) if c.size == per_sample else c.reshape(-1)

    def reference(self, g: Graph, op: Op, xs, rt=None):
        p = op.prepared
        return [fp.add_s8(xs[0], self._broadcast(g, op, xs[0]), p.q, p.act_min, p.act_max)]

    def emit(self, g: Graph, op: Op, cg) -> Emission:
        """One call per row of the constant's size (the whole tensor: one row)."""
        x, c, p, q = g.t(op.inputs[0]), g.t(op.inputs[1]), op.prepared, op.prepared.q
        block = c.size
        return Emission(calls=(Call(cg.kernel(op).function, (
            Ptr(x.name, f"r * {block}"), Ptr(c.name),
            q["input1_offset"], q["input1_multiplier"], q["input1_shift"],
            q["input2_offset"], q["input2_multiplier"], q["input2_shift"],
            q["left_shift"], Ptr(op.outputs[0], f"r * {block}"),
            q["output_offset"], q["output_multiplier"], q["output_shift"],
            p.act_min, p.act_max, block), status=True, repeat=("r", x.size // block)),))

    def backward(self, tb, op: Op) -> None:
        """(onnxops, additive) y = x + c in real values: x gets the output gradient, zeroed where the
        output was clamped (straight-through, as ADD's)."""
        if tb.needs_grad(op.inputs[0]):
            tb.add_grad(op.inputs[0], tb.masked(op, tb.grad(op.outputs[0])))


@dataclass(frozen=True, eq=False)
class PoolRequantData:
    """The compile-time constants of AVERAGE_POOL_REQUANT: per in-bounds tap count k (index k - 1)
    the multiplier and shift of s_in / (s_out * k)."""

    pads: tuple[int, int, int, int]     # top, left, bottom, right
    act_min: int
    act_max: int
    multipliers: np.ndarray             # int32 [filter_h * filter_w]
    shifts: np.ndarray                  # int32 [filter_h * filter_w]
    ort: OrtPool | None = None          # onnxruntime numerics: computed in float32 instead


@register
class AveragePoolRequant(OpDef):
    """AVERAGE_POOL_2D whose output has its own scale/zero point, in one rounding (onnxruntime's
    QLinearAveragePool): out = MultiplyByQuantizedMultiplier(sum(x - zp_in), QuantizeMultiplier(
    s_in / (s_out * count))) + zp_out over the in-bounds taps, clamped to the fused activation range."""

    kind = "AVERAGE_POOL_REQUANT"
    kernel = "pockmcu_avgpool_requant_s8"
    Options = PoolOptions

    def variant(self, g: Graph, op: Op, cg) -> str:
        return "ort_float" if op.prepared.ort is not None else ""

    def check(self, g: Graph, op: Op) -> list[str]:
        problems = super().check(g, op)
        if op.options.activation not in SUPPORTED_ACTIVATIONS:
            problems.append(op.options.activation)
        return problems

    def prepare(self, g: Graph, op: Op) -> PoolRequantData:
        o = op.options
        x, y = g.t(op.inputs[0]), g.t(op.outputs[0])
        pairs = [fp.quantize_multiplier(float(x.quant.s) / (float(y.quant.s) * k))
                 for k in range(1, o.filter[0] * o.filter[1] + 1)]
        act_min, act_max = fp.activation_range(o.activation, y.quant.s, y.quant.zp)
        return PoolRequantData(pool_pads(g, op), act_min, act_max,
                               np.array([m for m, _ in pairs], np.int32), np.array([s for _, s in pairs], np.int32),
                               ort_pool_prepare(g, op) if g.numerics == "onnxruntime" else None)

    def reference(self, g: Graph, op: Op, xs, rt=None):
        o, p = op.options, op.prepared
        if p.ort is not None:
            return [ort_pool_reference(g, op, xs)]
        x, y = g.t(op.inputs[0]), g.t(op.outputs[0])
        total = np.zeros((xs[0].shape[0],) + y.shape[1:], np.int64)
        count = np.zeros((1,) + y.shape[1:3] + (1,), np.int64)
        for vals, valid in pool_taps(xs[0], *o.filter, o.stride, p.pads, y.shape[1:3]):
            total += np.where(valid, vals - x.quant.zp, 0)
            count += valid
        idx = np.broadcast_to(count - 1, total.shape)
        out = fp.multiply_by_quantized_multiplier(total, p.multipliers[idx], p.shifts[idx]) + y.quant.zp
        return [np.clip(out, p.act_min, p.act_max).astype(np.int8)]

    def describe(self, g: Graph, op: Op) -> str:
        o, x, y = op.options, g.t(op.inputs[0]), g.t(op.outputs[0])
        return (f"AVERAGE_POOL_REQUANT {o.filter[0]}x{o.filter[1]} stride {o.stride[0]}x{o.stride[1]} "
                f"{x.quant.s:.6g}/{x.quant.zp} -> {y.quant.s:.6g}/{y.quant.zp}: {list(x.shape)} -> {list(y.shape)}")

    def emit(self, g: Graph, op: Op, cg) -> Emission:
        """A pool's params and dims; per in-bounds tap count the multiplier and shift (onnxruntime
        numerics: its float32 average pooling, as AVERAGE_POOL_2D's)."""
        x, y, p = g.t(op.inputs[0]), g.t(op.outputs[0]), op.prepared
        decls = pool_decls(g, op)
        if p.ort is not None:
            return Emission(calls=(ort_pool_call(g, op, cg),), decls=tuple(decls))
        decls += [Array("multipliers", "int32_t", tuple(p.multipliers)), Array("shifts", "int32_t", tuple(p.shifts))]
        return Emission(calls=(Call(cg.kernel(op).function, (
            Local("params"), Local("input_dims"), Ptr(x.name), Local("filter_dims"), Local("output_dims"),
            -x.quant.zp, y.quant.zp, Local("multipliers", address=False), Local("shifts", address=False),
            Ptr(y.name)), status=True),), decls=tuple(decls))
