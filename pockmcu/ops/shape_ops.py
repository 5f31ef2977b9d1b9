"""Ops that only move or reinterpret bytes: RESHAPE (an alias), PAD, CONCATENATION,
and the constant shape arithmetic that Keras exports leave (SHAPE, STRIDED_SLICE,
PACK), which the frontend folds away.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..ir import Graph, Op
from .base import OpDef, register


@register
class Reshape(OpDef):
    """The output is the input's bytes with another shape: no code, one shared buffer."""

    kind = "RESHAPE"
    tflite_ops = ("RESHAPE", "SQUEEZE", "EXPAND_DIMS")
    alias = True
    io_dtypes = ("int8", "float32")

    def check(self, g: Graph, op: Op) -> list[str]:
        problems = super().check(g, op)
        x, y = g.t(op.inputs[0]), g.t(op.outputs[0])
        if x.size != y.size:
            problems.append(f"reshape of {x.size} elements into {list(y.shape)}")
        return problems

    def activation_inputs(self, g: Graph, op: Op) -> list[str]:
        return [op.inputs[0]]

    def reference(self, g: Graph, op: Op, xs, rt=None):
        return [xs[0].reshape((xs[0].shape[0],) + g.t(op.outputs[0]).shape[1:])]

    def backward(self, tb, op: Op) -> None:
        x = op.inputs[0]
        dx = tb.grad_tensor(x, f"{tb.short(x)}_grad_from_{op.name}")
        tb.emit("RESHAPE", f"{op.name}_grad", [tb.grad(op.outputs[0])], [dx])
        tb.add_grad(x, dx)


@dataclass(frozen=True)
class PadData:
    """PAD's compile-time constants, as 4-D NHWC (a lower-rank tensor gets leading size-1 axes)."""

    pads: tuple[tuple[int, int], ...]   # (before, after) per axis, 4 pairs
    in4: tuple[int, ...]                # the input shape
    value: int                          # the pad value (PADV2's constant, else the output zero point)


@register
class Pad(OpDef):
    """PAD / PADV2 of an int8 tensor; the pad value is the output zero point (PAD) or the given constant (PADV2)."""

    kind = "PAD"
    tflite_ops = ("PAD", "PADV2")
    kernel = "arm_pad_s8"
    c_status = True

    def check(self, g: Graph, op: Op) -> list[str]:
        problems = super().check(g, op)
        if len(op.inputs) < 2 or not g.t(op.inputs[1]).is_const:
            problems.append("PAD with non-constant paddings")
        if len(op.inputs) > 2 and op.inputs[2] and not g.t(op.inputs[2]).is_const:
            problems.append("PADV2 with a non-constant pad value")
        x = g.t(op.inputs[0])
        if len(x.shape) > 4:
            problems.append(f"PAD of a rank-{len(x.shape)} tensor (at most 4)")
        return problems

    def prepare(self, g: Graph, op: Op) -> PadData:
        x = g.t(op.inputs[0])
        pads = [(int(a), int(b)) for a, b in g.t(op.inputs[1]).data.astype(int).reshape(-1, 2)]
        rank = len(x.shape)
        if len(op.inputs) > 2 and op.inputs[2]:
            value = int(g.t(op.inputs[2]).data.reshape(-1)[0])
        else:
            value = g.t(op.outputs[0]).quant.zp
        return PadData(pads=((0, 0),) * (4 - rank) + tuple(pads), in4=(1,) * (4 - rank) + tuple(x.shape),
                       value=value)

    def backward(self, tb, op: Op) -> None:
        x = op.inputs[0]
        dx = tb.grad_tensor(x, f"{tb.short(x)}_grad_from_{op.name}")
        tb.emit("PAD_GRAD", f"{op.name}_grad", [tb.grad(op.outputs[0])], [dx], layer=op)
        tb.add_grad(x, dx)

    def reference(self, g: Graph, op: Op, xs, rt=None):
        x = xs[0]
        pads = op.prepared.pads[4 - x.ndim:]
        pads = [(0, 0)] + [tuple(p) for p in pads[1:]]
        return [np.pad(x, pads, constant_values=op.prepared.value)]

    def c_context(self, g: Graph, op: Op, cg) -> dict:
        p = op.prepared
        return dict(x=g.t(op.inputs[0]), y=g.t(op.outputs[0]), in4=p.in4, pads=p.pads, value=p.value)

    c_decls = """\
static const cmsis_nn_dims {{n}}_input_dims = {{ dims(in4) }};
static const cmsis_nn_dims {{n}}_pre_pad = {{ '{' }}{{pads[0][0]}}, {{pads[1][0]}}, {{pads[2][0]}}, {{pads[3][0]}}{{ '}' }};
static const cmsis_nn_dims {{n}}_post_pad = {{ '{' }}{{pads[0][1]}}, {{pads[1][1]}}, {{pads[2][1]}}, {{pads[3][1]}}{{ '}' }};
"""
    c_call = """\
status = arm_pad_s8({{ptr(x)}}, {{ptr(y)}}, {{value}}, &{{n}}_input_dims, &{{n}}_pre_pad, &{{n}}_post_pad);"""


@dataclass(frozen=True)
class ConcatAxis:
    """CONCATENATION's options: the axis (>= 0) and the TFLite fused activation code (only 0 is supported)."""

    axis: int
    activation: int = 0


@dataclass(frozen=True)
class ConcatData:
    """CONCATENATION's compile-time constant: the axis in the 4-D NHWC view of the tensors."""

    axis4: int


@register
class Concatenation(OpDef):
    """CONCATENATION of int8 tensors that share the output's quantization (TFLM requires it).

    Emitted as one CMSIS-NN arm_concatenation_s8_{x,y,z,w} call per input: the
    tensor is seen as [w][z][y][x] (x innermost), i.e. NHWC -> w=N, z=H, y=W, x=C.
    """

    kind = "CONCATENATION"
    tflite_ops = ("CONCATENATION",)
    tflite_options = "ConcatenationOptions"
    kernel = "arm_concatenation_s8"
    Options = ConcatAxis
    AXIS_KERNEL = {3: "x", 2: "y", 1: "z", 0: "w"}   # NHWC axis (of the 4-D view) -> CMSIS-NN axis name

    def variant(self, g: Graph, op: Op, cg) -> str:
        return self.AXIS_KERNEL[op.prepared.axis4]

    def parse_tflite(self, o, op: Op, tensors) -> ConcatAxis:
        rank = len(tensors[op.outputs[0]].shape)
        axis = int(o.Axis())
        return ConcatAxis(axis=axis + rank if axis < 0 else axis, activation=int(o.FusedActivationFunction()))

    def check(self, g: Graph, op: Op) -> list[str]:
        problems = super().check(g, op)
        if op.options.activation != 0:
            problems.append("CONCATENATION with a fused activation")
        y = g.t(op.outputs[0])
        if len(y.shape) > 4:
            problems.append(f"CONCATENATION of rank-{len(y.shape)} tensors (at most 4)")
        if max(y.shape, default=1) > 0xFFFF:
            problems.append("CONCATENATION dimension larger than 65535")
        for i in op.inputs:
            t = g.t(i)
            if t.is_const:
                problems.append(f"CONCATENATION of constant '{i}'")
            elif not problems and (t.quant.s != y.quant.s or t.quant.zp != y.quant.zp):
                problems.append(f"CONCATENATION input '{i}' quantized differently from the output")
        return problems

    def prepare(self, g: Graph, op: Op) -> ConcatData:
        rank = len(g.t(op.outputs[0]).shape)
        return ConcatData(axis4=op.options.axis + 4 - rank)

    def reference(self, g: Graph, op: Op, xs, rt=None):
        return [np.concatenate(xs, axis=op.options.axis)]

    def backward(self, tb, op: Op) -> None:
        y = tb.g.t(op.outputs[0])
        axis = op.options.axis
        outer = int(np.prod(y.shape[:axis], dtype=np.int64))
        row = int(np.prod(y.shape[axis:], dtype=np.int64))
        offset = 0
        for x in op.inputs:
            chunk = int(np.prod(tb.g.t(x).shape[axis:], dtype=np.int64))
            if tb.needs_grad(x):
                dx = tb.grad_tensor(x, f"{tb.short(x)}_grad_from_{op.name}")
                tb.emit("SLICE", f"{op.name}_grad_{offset}", [tb.grad(op.outputs[0])], [dx], outer=outer, row=row,
                        offset=offset, chunk=chunk)
                tb.add_grad(x, dx)
            offset += chunk

    def c_context(self, g: Graph, op: Op, cg) -> dict:
        axis4 = op.prepared.axis4

        def as4(shape):
            return (1,) * (4 - len(shape)) + tuple(shape)

        y4 = as4(g.t(op.outputs[0]).shape)
        parts, offset = [], 0
        for i in op.inputs:
            s4 = as4(g.t(i).shape)
            parts.append(dict(t=g.t(i), n=s4[0], h=s4[1], w=s4[2], c=s4[3], offset=offset))
            offset += s4[axis4]
        return dict(parts=parts, y=g.t(op.outputs[0]), fn=self.AXIS_KERNEL[axis4], out_dim=y4[axis4])

    c_call = """\
{% for p in parts %}
{% if fn == 'w' %}
arm_concatenation_s8_w({{ptr(p.t)}}, {{p.c}}, {{p.w}}, {{p.h}}, {{p.n}}, {{ptr(y)}}, {{p.offset}});
{% else %}
arm_concatenation_s8_{{fn}}({{ptr(p.t)}}, {{p.c}}, {{p.w}}, {{p.h}}, {{p.n}}, {{ptr(y)}}, {{out_dim}}, {{p.offset}});
{% endif %}
{% endfor %}"""


@dataclass(frozen=True, eq=False)
class PadGradOf:
    """PAD_GRAD's options: the forward PAD op whose padding it crops away."""

    layer: Op


@register
class PadGrad(OpDef):
    """PAD backward: the gradient of the padded tensor cropped back to the input."""

    kind = "PAD_GRAD"
    Options = PadGradOf
    kernel = "pockmcu_pad_grad_f32"
    c_status = True
    io_dtypes = ("float32",)

    def reference(self, g: Graph, op: Op, xs, rt=None):
        f = op.options.layer
        x = g.t(f.inputs[0])
        pads = f.prepared.pads[4 - len(x.shape):]
        index = (slice(None),) + tuple(slice(p[0], p[0] + d) for p, d in zip(pads[1:], x.shape[1:]))
        return [xs[0][index]]

    def c_context(self, g: Graph, op: Op, cg) -> dict:
        return dict(layer=op.options.layer.name, dy=g.t(op.inputs[0]), dx=g.t(op.outputs[0]))

    c_call = """\
status = pockmcu_pad_grad_f32(&{{layer}}_input_dims, &{{layer}}_pre_pad, &{{layer}}_post_pad, {{ptr(dy)}}, {{ptr(dx)}});"""


class _Folded(OpDef):
    """Shape arithmetic: only ever executed by the compiler (fold), never emitted."""

    foldable = True
    io_dtypes = ()

    def check(self, g: Graph, op: Op) -> list[str]:
        return [f"{self.kind} whose value is not known at compile time"]

    def consts(self, g: Graph, op: Op):
        ts = [g.t(i) for i in op.inputs if i]
        return None if any(t.data is None for t in ts) else [t.data for t in ts]


@register
class Shape(_Folded):
    kind = "SHAPE"
    tflite_ops = ("SHAPE",)

    def fold(self, g: Graph, op: Op):
        return np.array(g.t(op.inputs[0]).shape, np.int32)


@dataclass(frozen=True)
class PackAxis:
    """PACK's options: the new axis the inputs are stacked along."""

    axis: int = 0


@register
class Pack(_Folded):
    kind = "PACK"
    tflite_ops = ("PACK",)
    tflite_options = "PackOptions"
    Options = PackAxis

    def parse_tflite(self, o, op: Op, tensors) -> PackAxis:
        return PackAxis(axis=int(o.Axis()) if o else 0)

    def fold(self, g: Graph, op: Op):
        vals = self.consts(g, op)
        return None if vals is None else np.stack(vals, axis=op.options.axis)


@dataclass(frozen=True)
class SliceMasks:
    """STRIDED_SLICE's options: TFLite's bit masks (bit d concerns axis d)."""

    begin_mask: int = 0
    end_mask: int = 0
    shrink_axis_mask: int = 0
    ellipsis_mask: int = 0
    new_axis_mask: int = 0


@register
class StridedSlice(_Folded):
    kind = "STRIDED_SLICE"
    tflite_ops = ("STRIDED_SLICE",)
    tflite_options = "StridedSliceOptions"
    Options = SliceMasks

    def parse_tflite(self, o, op: Op, tensors) -> SliceMasks:
        return SliceMasks(begin_mask=o.BeginMask(), end_mask=o.EndMask(), shrink_axis_mask=o.ShrinkAxisMask(),
                          ellipsis_mask=o.EllipsisMask(), new_axis_mask=o.NewAxisMask())

    def fold(self, g: Graph, op: Op):
        vals = self.consts(g, op)
        a = op.options
        if vals is None or a.ellipsis_mask or a.new_axis_mask:
            return None
        x, begin, end, strides = vals
        index, squeeze = [], []
        for d in range(len(begin)):
            b = None if a.begin_mask >> d & 1 else int(begin[d])
            e = None if a.end_mask >> d & 1 else int(end[d])
            if a.shrink_axis_mask >> d & 1:
                index.append(slice(b, (b + 1) or None, 1))
                squeeze.append(d)
            else:
                index.append(slice(b, e, int(strides[d])))
        out = x[tuple(index)]
        return out.reshape([s for i, s in enumerate(out.shape) if i not in squeeze])
