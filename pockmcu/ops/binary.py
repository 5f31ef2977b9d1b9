"""Binary element-wise int8 ops with NumPy broadcasting and constant operands: SUB, MUL,
SQUARED_DIFFERENCE, MAXIMUM, MINIMUM (ADD is pockmcu/ops/elementwise.py, on the same helpers), and
their gradients.

Semantics: TFLite Micro's int8 kernels (sub.cc, mul.cc, squared_difference.cc, maximum_minimum.cc and
their reference_ops / reference_integer_ops). Broadcasting never changes the per-element arithmetic
(BroadcastQuantSubSlow, BroadcastMul6DSlow and BroadcastBinaryFunction4DSlow apply the element-wise
function at broadcast indices), so one numpy function per op serves both paths; the C kernels
(kernels_c/pockmcu_{sub,mul,squared_difference,maximum,minimum}_s8.c) walk the output in row-major
order with a stride per input and axis, 0 on the axes an input is broadcast along (``dims15``).
The Prepare steps differ in float detail, and are reproduced here as TFLM writes them:
- SUB: the rescale ratios in float32 (``2 * max(s1, s2)`` and both quotients are float), then
  QuantizeMultiplierSmallerThanOneExp; left shift 20;
- MUL: ``QuantizeMultiplier((double)s1 * (double)s2 / (double)s_out)``, no left shift;
- SQUARED_DIFFERENCE: ADD's double ratios with left shift 7, the output multiplier
  ``(2 max)^2 / (2^14 s_out)`` through QuantizeMultiplier; no fused activation (clamp to int8);
- MAXIMUM / MINIMUM: the larger / smaller stored int8 value, no requantization.

Gradients are w.r.t. real (dequantized) values, float32, summed over each input's broadcast axes in
row-major output order (pockmcu_*_grad_f32): ADD and SUB pass dz (SUB's second input -dz), MUL
dz * other, SQUARED_DIFFERENCE dz * 2 (x - other), MAXIMUM / MINIMUM dz where the input wins and half
of it on a tie (PyTorch's rule). As for ADD, the output gradient is first masked where the int8
output was clamped (straight-through requantization); MAXIMUM / MINIMUM do not requantize and are
not masked.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import fixedpoint as fp
from ..ccode import Array, Call, Emission, Local, Ptr
from ..ir import Graph, Op
from .base import POINTWISE, SUPPORTED_ACTIVATIONS, OpDef, Window, fused_activation, register

F32 = np.float32
#: the C kernels' rank
MAX_RANK = 5


# -- broadcasting helpers (shared with ADD in elementwise.py and PRELU in unary.py) --------------------

def broadcast_shape(*shapes) -> tuple[int, ...] | None:
    """NumPy's broadcast shape, or None when the shapes do not broadcast."""
    try:
        return tuple(int(d) for d in np.broadcast_shapes(*[tuple(s) for s in shapes]))
    except ValueError:
        return None


def strides5(shape, out_shape) -> tuple[int, ...]:
    """Element strides of a tensor of ``shape`` read at the broadcast indices of ``out_shape``, as 5
    values (leading axes first): 0 on the axes where it has size 1 (or does not exist)."""
    shape = (1,) * (len(out_shape) - len(shape)) + tuple(int(d) for d in shape)
    strides, step = [], 1
    for d in reversed(shape):
        strides.append(step if d > 1 else 0)
        step *= d
    strides = strides[::-1]
    return (0,) * (MAX_RANK - len(strides)) + tuple(strides)


def dims15(out_shape, first, second) -> tuple[int, ...]:
    """The kernels' ``dims`` array: the output shape as 5 dimensions, then the strides of the two
    operands (see strides5)."""
    out = (1,) * (MAX_RANK - len(out_shape)) + tuple(int(d) for d in out_shape)
    return out + strides5(first, out_shape) + strides5(second, out_shape)


def broadcast_problems(g: Graph, op: Op, max_rank: int) -> list[str]:
    """What keeps a broadcasting op's operands from compiling: shapes that do not broadcast to the
    output, too many dimensions, two constants, an activation operand whose batch axis the output
    does not share, a constant that is not int8 per tensor."""
    ins = [g.t(i) for i in op.inputs[:2]]
    y = g.t(op.outputs[0])
    shapes = " and ".join(str(list(t.shape)) for t in ins)
    if broadcast_shape(*(t.shape for t in ins)) != tuple(y.shape):
        return [f"operands {shapes} do not broadcast to the output {list(y.shape)}"]
    if len(y.shape) > max_rank:
        return [f"operands {shapes}: at most {max_rank} dimensions (TFLite Micro's limit)"]
    if all(t.is_const for t in ins):
        return ["both operands are constants"]
    problems = []
    for t in ins:
        if t.is_const:
            if t.dtype != "int8" or t.quant is None or t.quant.per_channel:
                problems.append(f"constant operand '{t.name}' must be int8 with per-tensor quantization")
            elif len(y.shape) and (1,) * (len(y.shape) - len(t.shape)) + tuple(t.shape) != tuple(y.shape) \
                    and ((1,) * (len(y.shape) - len(t.shape)) + tuple(t.shape))[0] != 1:
                problems.append(f"constant operand '{t.name}' {list(t.shape)} varies along the batch axis")
        elif len(t.shape) != len(y.shape) and t.size > 1:
            problems.append(f"activation operand '{t.name}' {list(t.shape)} has fewer dimensions than the "
                            f"output {list(y.shape)}")
    return problems


def operand_values(g: Graph, op: Op, xs) -> list[np.ndarray]:
    """Both operands as arrays that broadcast like the tensors, with the samples on axis 0: an
    activation as the reference passes it ([N, *shape[1:]]), a constant padded to the output's rank."""
    rank = len(g.t(op.outputs[0]).shape)
    acts = iter(xs)
    vals = []
    for name in op.inputs[:2]:
        t = g.t(name)
        if t.is_const:
            vals.append(np.asarray(t.data).reshape((1,) * (rank - len(t.shape)) + tuple(t.shape)))
        else:
            v = np.asarray(next(acts))
            vals.append(v.reshape((v.shape[0],) + tuple(t.shape[1:])) if len(t.shape) == rank
                        else v.reshape((v.shape[0],) + (1,) * (rank - 1)))
    return vals


def same_shape_inputs(g: Graph, op: Op) -> tuple[int, ...]:
    """The activation inputs the output may overwrite: those of the output's shape (their element k is
    read just before output element k is written)."""
    y = g.t(op.outputs[0])
    return tuple(k for k, i in enumerate(op.inputs[:2]) if not g.t(i).is_const and g.t(i).shape == y.shape)


def broadcast_window(g: Graph, op: Op) -> Window | None:
    """Pointwise for streaming only when both operands are activations of the output's shape."""
    y = g.t(op.outputs[0])
    return POINTWISE if len(same_shape_inputs(g, op)) == 2 and g.t(op.inputs[0]).shape == y.shape else None


def _shl20(x, shift):
    return fp._shl_wrap32(x, shift)


def _rescale(x, mult, shift):
    return fp.multiply_by_quantized_multiplier_smaller_than_one_exp(x, mult, shift)


# -- Prepare --------------------------------------------------------------------------------------------

def sub_params(s1: float, zp1: int, s2: float, zp2: int, s_out: float, zp_out: int) -> dict:
    """TFLM CalculateOpDataSub for int8: as ADD's, but twice the larger scale and the three ratios are
    computed in float32 before QuantizeMultiplierSmallerThanOneExp."""
    s1, s2, so = F32(s1), F32(s2), F32(s_out)
    twice_max = F32(2) * max(s1, s2)
    with np.errstate(over="ignore", divide="ignore"):
        r1, r2 = float(s1 / twice_max), float(s2 / twice_max)
        r_out = float(twice_max / (F32(1 << 20) * so))
    m1, sh1 = fp.quantize_multiplier_smaller_than_one_exp(r1)
    m2, sh2 = fp.quantize_multiplier_smaller_than_one_exp(r2)
    mo, sho = fp.quantize_multiplier_smaller_than_one_exp(r_out)
    return {"input1_offset": -int(zp1), "input2_offset": -int(zp2), "output_offset": int(zp_out), "left_shift": 20,
            "input1_multiplier": m1, "input1_shift": sh1, "input2_multiplier": m2, "input2_shift": sh2,
            "output_multiplier": mo, "output_shift": sho}


def squared_difference_params(s1: float, zp1: int, s2: float, zp2: int, s_out: float, zp_out: int) -> dict:
    """TFLM squared_difference.cc PrepareQuantized for int8 (left shift 7): the input ratios in double
    through QuantizeMultiplierSmallerThanOneExp, the output one (2 max)^2 / float32(2^14 s_out) through
    QuantizeMultiplier."""
    twice_max = 2.0 * float(max(F32(s1), F32(s2)))
    r1, r2 = float(F32(s1)) / twice_max, float(F32(s2)) / twice_max
    r_out = twice_max * twice_max / float(F32(1 << 14) * F32(s_out))
    m1, sh1 = fp.quantize_multiplier_smaller_than_one_exp(r1)
    m2, sh2 = fp.quantize_multiplier_smaller_than_one_exp(r2)
    mo, sho = fp.quantize_multiplier(r_out)
    return {"input1_offset": -int(zp1), "input2_offset": -int(zp2), "output_offset": int(zp_out), "left_shift": 7,
            "input1_multiplier": m1, "input1_shift": sh1, "input2_multiplier": m2, "input2_shift": sh2,
            "output_multiplier": mo, "output_shift": sho}


def mul_params(s1: float, zp1: int, s2: float, zp2: int, s_out: float, zp_out: int) -> dict:
    """TFLM CalculateOpDataMul for int8: QuantizeMultiplier(s1 * s2 / s_out) in double."""
    m, sh = fp.quantize_multiplier(float(F32(s1)) * float(F32(s2)) / float(F32(s_out)))
    return {"input1_offset": -int(zp1), "input2_offset": -int(zp2), "output_offset": int(zp_out),
            "output_multiplier": m, "output_shift": sh}


# -- numpy references (element-wise; numpy broadcasting) ------------------------------------------------

def sub_s8(a, b, q: dict, act_min: int = -128, act_max: int = 127) -> np.ndarray:
    """TFLM's int8 SUB (SubElementwise / BroadcastQuantSubSlow)."""
    a, b = np.broadcast_arrays(fp.i64(a), fp.i64(b))
    sa = _rescale(_shl20(a + q["input1_offset"], q["left_shift"]), q["input1_multiplier"], q["input1_shift"])
    sb = _rescale(_shl20(b + q["input2_offset"], q["left_shift"]), q["input2_multiplier"], q["input2_shift"])
    raw = fp.wrap32(_rescale(fp.wrap32(sa - sb), q["output_multiplier"], q["output_shift"]) + q["output_offset"])
    return np.clip(raw, act_min, act_max).astype(np.int8)


def mul_s8(a, b, q: dict, act_min: int = -128, act_max: int = 127) -> np.ndarray:
    """TFLM's int8 MUL (MulElementwise): MultiplyByQuantizedMultiplier of the product of the offset
    inputs, no left shift."""
    a, b = np.broadcast_arrays(fp.i64(a), fp.i64(b))
    prod = (a + q["input1_offset"]) * (b + q["input2_offset"])
    raw = fp.multiply_by_quantized_multiplier(prod, q["output_multiplier"], q["output_shift"]) + q["output_offset"]
    return np.clip(raw, act_min, act_max).astype(np.int8)


def squared_difference_s8(a, b, q: dict) -> np.ndarray:
    """TFLM's int8 SQUARED_DIFFERENCE (squared_difference.cc SquaredDifference<int8_t>)."""
    a, b = np.broadcast_arrays(fp.i64(a), fp.i64(b))
    sa = _rescale(_shl20(a + q["input1_offset"], q["left_shift"]), q["input1_multiplier"], q["input1_shift"])
    sb = _rescale(_shl20(b + q["input2_offset"], q["left_shift"]), q["input2_multiplier"], q["input2_shift"])
    d = sa - sb
    raw = fp.multiply_by_quantized_multiplier(fp.wrap32(d * d), q["output_multiplier"], q["output_shift"])
    return np.clip(raw + q["output_offset"], -128, 127).astype(np.int8)


# -- the ops ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class BinaryOptions:
    activation: str = "NONE"          # the fused activation (SUB, MUL; base.ACTIVATIONS)


@dataclass(frozen=True)
class BinaryData:
    """The compile-time constants: ``q`` the offsets, multipliers and shifts (keys as fixedpoint.add_params),
    the fused activation's clamp range, and the kernel's dims array."""

    q: dict
    act_min: int
    act_max: int
    dims: tuple


class _Binary(OpDef):
    """What the broadcasting int8 ops share: operands, checks, in-place rule, window, C arguments."""

    operands = ("input1", "input2")
    max_rank = 6                      # TFLM's broadcast limit for the op
    params = None                     # (s1, zp1, s2, zp2, s_out, zp_out) -> dict
    fused = True                      # the op has a fused activation

    def parse_tflite(self, o, op: Op, tensors) -> BinaryOptions:
        act = fused_activation(o.FusedActivationFunction()) if (o is not None and self.fused) else "NONE"
        return BinaryOptions(activation=act)

    def check(self, g: Graph, op: Op) -> list[str]:
        problems = super().check(g, op)
        if op.options.activation not in SUPPORTED_ACTIVATIONS:
            problems.append(op.options.activation)
        if problems:
            return problems
        problems = broadcast_problems(g, op, min(self.max_rank, MAX_RANK))
        if problems or type(self).params is None:
            return problems
        a, b, y = (g.t(i) for i in (*op.inputs[:2], op.outputs[0]))
        if a.quant.per_channel or b.quant.per_channel or y.quant.per_channel:
            return ["per-channel activation quantization"]
        try:
            type(self).params(a.quant.s, a.quant.zp, b.quant.s, b.quant.zp, y.quant.s, y.quant.zp)
        except ValueError:
            return [f"scales {a.quant.s:.6g}, {b.quant.s:.6g} -> {y.quant.s:.6g} give a rescale TFLite Micro "
                    "cannot represent; requantize the model"]
        return []

    def prepare(self, g: Graph, op: Op) -> BinaryData:
        a, b, y = (g.t(i) for i in (*op.inputs[:2], op.outputs[0]))
        q = type(self).params(a.quant.s, a.quant.zp, b.quant.s, b.quant.zp, y.quant.s, y.quant.zp) \
            if type(self).params is not None else {}
        act_min, act_max = fp.activation_range(op.options.activation, y.quant.s, y.quant.zp) \
            if self.fused else (-128, 127)
        return BinaryData(q, act_min, act_max, dims15(y.shape, a.shape, b.shape))

    def shared_inputs(self, g: Graph, op: Op) -> tuple[int, ...]:
        return same_shape_inputs(g, op)

    def window(self, g: Graph, op: Op) -> Window | None:
        return broadcast_window(g, op)

    def reference(self, g: Graph, op: Op, xs, rt=None):
        y = g.t(op.outputs[0])
        out = self.compute(op.prepared, *operand_values(g, op, xs))
        return [np.ascontiguousarray(out.reshape((out.shape[0],) + tuple(y.shape[1:])))]

    def compute(self, p: BinaryData, a, b) -> np.ndarray:
        raise NotImplementedError

    def dims_decl(self, op: Op) -> Array:
        return Array("dims", "int32_t", op.prepared.dims, comment="output shape, input1 strides, input2 strides")

    def backward(self, tb, op: Op) -> None:
        binary_backward(tb, op, self.grad_kind, masked=self.fused or self.kind == "SQUARED_DIFFERENCE")

    grad_kind = ""


def rescaled_args(q: dict) -> tuple:
    return (q["input1_offset"], q["input1_multiplier"], q["input1_shift"],
            q["input2_offset"], q["input2_multiplier"], q["input2_shift"], q["left_shift"])


@register
class Sub(_Binary):
    kind = "SUB"
    tflite_ops = ("SUB",)
    tflite_options = "SubOptions"
    Options = BinaryOptions
    kernel = "pockmcu_sub_s8"
    params = staticmethod(sub_params)

    def compute(self, p, a, b):
        return sub_s8(a, b, p.q, p.act_min, p.act_max)

    def emit(self, g: Graph, op: Op, cg) -> Emission:
        p, q = op.prepared, op.prepared.q
        a, b, y = op.inputs[0], op.inputs[1], op.outputs[0]
        return Emission(decls=(self.dims_decl(op),), calls=(Call(cg.kernel(op).function, (
            Ptr(a), Ptr(b), Local("dims", address=False), *rescaled_args(q), Ptr(y),
            q["output_offset"], q["output_multiplier"], q["output_shift"], p.act_min, p.act_max), status=True),))

    def backward(self, tb, op: Op) -> None:
        dz = tb.masked(op, tb.grad(op.outputs[0]))
        for k, x in enumerate(op.inputs[:2]):
            if tb.needs_grad(x):
                add_reduced_grad(tb, op, k, dz, coef=1.0 if k == 0 else -1.0)


@register
class Mul(_Binary):
    kind = "MUL"
    tflite_ops = ("MUL",)
    tflite_options = "MulOptions"
    Options = BinaryOptions
    kernel = "pockmcu_mul_s8"
    params = staticmethod(mul_params)
    grad_kind = "MUL_GRAD"

    def check(self, g: Graph, op: Op) -> list[str]:
        problems = super().check(g, op)
        if not problems:
            if self.prepare(g, op).q["output_shift"] > 30:
                problems.append("output scale far below the product of the input scales; TFLite Micro overflows")
        return problems

    def compute(self, p, a, b):
        return mul_s8(a, b, p.q, p.act_min, p.act_max)

    def emit(self, g: Graph, op: Op, cg) -> Emission:
        p, q = op.prepared, op.prepared.q
        a, b, y = op.inputs[0], op.inputs[1], op.outputs[0]
        return Emission(decls=(self.dims_decl(op),), calls=(Call(cg.kernel(op).function, (
            Ptr(a), Ptr(b), Local("dims", address=False), q["input1_offset"], q["input2_offset"], Ptr(y),
            q["output_offset"], q["output_multiplier"], q["output_shift"], p.act_min, p.act_max), status=True),))


@register
class SquaredDifference(_Binary):
    kind = "SQUARED_DIFFERENCE"
    tflite_ops = ("SQUARED_DIFFERENCE",)
    Options = BinaryOptions
    kernel = "pockmcu_squared_difference_s8"
    params = staticmethod(squared_difference_params)
    max_rank = 4                      # BroadcastBinaryFunction4DSlow
    fused = False
    grad_kind = "SQUARED_DIFFERENCE_GRAD"

    def check(self, g: Graph, op: Op) -> list[str]:
        problems = super().check(g, op)
        if not problems and self.prepare(g, op).q["output_shift"] > 30:
            problems.append("output scale far below the input scales squared; TFLite Micro overflows")
        return problems

    def compute(self, p, a, b):
        return squared_difference_s8(a, b, p.q)

    def emit(self, g: Graph, op: Op, cg) -> Emission:
        q = op.prepared.q
        a, b, y = op.inputs[0], op.inputs[1], op.outputs[0]
        return Emission(decls=(self.dims_decl(op),), calls=(Call(cg.kernel(op).function, (
            Ptr(a), Ptr(b), Local("dims", address=False), *rescaled_args(q), Ptr(y),
            q["output_offset"], q["output_multiplier"], q["output_shift"]), status=True),))


class _MaxMin(_Binary):
    fused = False
    max_rank = 5                      # MaximumMinimumBroadcastSlow<N = 5>

    def emit(self, g: Graph, op: Op, cg) -> Emission:
        return Emission(decls=(self.dims_decl(op),), calls=(Call(cg.kernel(op).function, (
            Ptr(op.inputs[0]), Ptr(op.inputs[1]), Local("dims", address=False), Ptr(op.outputs[0])), status=True),))

    def backward(self, tb, op: Op) -> None:
        binary_backward(tb, op, self.grad_kind, masked=False)


@register
class Maximum(_MaxMin):
    kind = "MAXIMUM"
    tflite_ops = ("MAXIMUM",)
    Options = BinaryOptions
    kernel = "pockmcu_maximum_s8"
    grad_kind = "MAXIMUM_GRAD"

    def compute(self, p, a, b):
        return np.maximum(*np.broadcast_arrays(a, b)).astype(np.int8)


@register
class Minimum(_MaxMin):
    kind = "MINIMUM"
    tflite_ops = ("MINIMUM",)
    Options = BinaryOptions
    kernel = "pockmcu_minimum_s8"
    grad_kind = "MINIMUM_GRAD"

    def compute(self, p, a, b):
        return np.minimum(*np.broadcast_arrays(a, b)).astype(np.int8)


# -- gradients -------------------------------------------------------------------------------------------

@dataclass(frozen=True, eq=False)
class BinaryGrad:
    """A backward op of a binary forward op: which layer, which of its two operands (0 or 1) the
    gradient is for, and (ADD/SUB) the sign."""

    layer: Op
    target: int
    coef: float = 1.0


def add_reduced_grad(tb, op: Op, k: int, dz: str, coef: float) -> None:
    """ADD / SUB: operand k's gradient is coef * dz summed over its broadcast axes (a kernel call
    unless it is dz itself)."""
    x = op.inputs[k]
    if coef == 1.0 and tb.g.t(x).shape == tb.g.t(op.outputs[0]).shape:
        tb.add_grad(x, dz)
        return
    dx = tb.grad_tensor(x, f"{tb.short(x)}_grad_from_{op.name}")
    tb.emit("BROADCAST_GRAD", f"{op.name}_grad{k}", [dz], [dx], layer=op, target=k, coef=coef)
    tb.add_grad(x, dx)


def binary_backward(tb, op: Op, kind: str, masked: bool) -> None:
    """MUL, SQUARED_DIFFERENCE, MAXIMUM, MINIMUM: one gradient op per operand that needs one, reading
    the saved operands."""
    dz = tb.grad(op.outputs[0])
    if masked:
        dz = tb.masked(op, dz)
    for k, x in enumerate(op.inputs[:2]):
        if not tb.needs_grad(x):
            continue
        other = op.inputs[1 - k]
        dx = tb.grad_tensor(x, f"{tb.short(x)}_grad_from_{op.name}")
        ins = [dz, other] if kind == "MUL_GRAD" else [dz, x, other]
        tb.emit(kind, f"{op.name}_grad{k}", ins, [dx], layer=op, target=k)
        tb.add_grad(x, dx)


def grad_dims(g: Graph, o: BinaryGrad) -> tuple[int, ...]:
    """dims15 with the target operand's strides first."""
    fwd = o.layer
    y = g.t(fwd.outputs[0])
    t, other = fwd.inputs[o.target], fwd.inputs[1 - o.target]
    return dims15(y.shape, g.t(t).shape, g.t(other).shape)


def _real(g: Graph, name: str, value) -> np.ndarray:
    """A saved int8 operand as float32 real values, shaped as its tensor (one sample)."""
    t = g.t(name)
    q = np.asarray(t.data if t.is_const else value).reshape(t.shape)
    return F32(t.quant.s) * (q.astype(np.int32) - t.quant.zp).astype(F32)


def reduce_to(g: Graph, o: BinaryGrad, terms: np.ndarray) -> np.ndarray:
    """Sum the output-shaped float32 ``terms`` into the target operand's shape, in row-major output
    order, as the kernels do (np.add.at adds one element at a time, in index order)."""
    fwd = o.layer
    y = g.t(fwd.outputs[0])
    tshape = g.t(fwd.inputs[o.target]).shape
    idx = np.broadcast_to(np.arange(int(np.prod(tshape, dtype=np.int64))).reshape(
        (1,) * (len(y.shape) - len(tshape)) + tuple(tshape)), y.shape).reshape(-1)
    out = np.zeros(int(np.prod(tshape, dtype=np.int64)), F32)
    np.add.at(out, idx, np.asarray(terms, F32).reshape(-1))
    return out.reshape(tshape)


class _BinaryGradOp(OpDef):
    Options = BinaryGrad
    io_dtypes = ("int8", "float32")

    def prepare(self, g: Graph, op: Op) -> tuple:
        return grad_dims(g, op.options)

    def terms(self, g: Graph, op: Op, dz: np.ndarray, xs) -> np.ndarray:
        raise NotImplementedError

    def reference(self, g: Graph, op: Op, xs, rt=None):
        o = op.options
        y = g.t(o.layer.outputs[0])
        dz = np.asarray(xs[0], F32).reshape(y.shape)
        with np.errstate(over="ignore", invalid="ignore"):
            out = reduce_to(g, o, self.terms(g, op, dz, xs[1:]))
        return [out.reshape((1,) + tuple(g.t(op.outputs[0]).shape[1:])).astype(np.float64)]

    def dims_decl(self, op: Op) -> Array:
        return Array("dims", "int32_t", op.prepared, comment="output shape, this operand's strides, the other's")


@register
class BroadcastGrad(_BinaryGradOp):
    """ADD / SUB: coef * dz summed over the target operand's broadcast axes."""

    kind = "BROADCAST_GRAD"
    kernel = "pockmcu_broadcast_grad_f32"
    io_dtypes = ("float32",)

    def terms(self, g, op, dz, xs):
        return F32(op.options.coef) * dz

    def emit(self, g: Graph, op: Op, cg) -> Emission:
        dx = g.t(op.outputs[0])
        return Emission(decls=(self.dims_decl(op),), calls=(Call(cg.kernel(op).function, (
            Ptr(op.inputs[0]), Local("dims", address=False), float(op.options.coef), dx.size, Ptr(dx.name))),))


def _acts(g: Graph, op: Op, names: list[str], xs) -> list:
    """Values of the named inputs: the activation ones from xs (in order), constants as None."""
    it = iter(xs)
    return [None if g.t(n).is_const else next(it) for n in names]


@register
class MulGrad(_BinaryGradOp):
    """MUL: dz * other, summed over the target's broadcast axes."""

    kind = "MUL_GRAD"
    kernel = "pockmcu_mul_grad_f32"

    def terms(self, g, op, dz, xs):
        (ov,) = _acts(g, op, op.inputs[1:2], xs)
        return dz * np.broadcast_to(_real(g, op.inputs[1], ov).reshape(
            (1,) * (dz.ndim - len(g.t(op.inputs[1]).shape)) + g.t(op.inputs[1]).shape), dz.shape)

    def emit(self, g: Graph, op: Op, cg) -> Emission:
        other, dx = g.t(op.inputs[1]), g.t(op.outputs[0])
        return Emission(decls=(self.dims_decl(op),), calls=(Call(cg.kernel(op).function, (
            Ptr(op.inputs[0]), Ptr(other.name), Local("dims", address=False), float(other.quant.s),
            other.quant.zp, dx.size, Ptr(dx.name))),))


class _PairGrad(_BinaryGradOp):
    """Inputs [dz, target operand, other operand]."""

    def pair(self, g, op, dz, xs):
        xv, ov = _acts(g, op, op.inputs[1:3], xs)
        out = []
        for name, v in ((op.inputs[1], xv), (op.inputs[2], ov)):
            r = _real(g, name, v)
            out.append(np.broadcast_to(r.reshape((1,) * (dz.ndim - r.ndim) + r.shape), dz.shape))
        return out

    def emit(self, g: Graph, op: Op, cg) -> Emission:
        x, other, dx = g.t(op.inputs[1]), g.t(op.inputs[2]), g.t(op.outputs[0])
        return Emission(decls=(self.dims_decl(op),), calls=(Call(cg.kernel(op).function, (
            Ptr(op.inputs[0]), Ptr(x.name), Ptr(other.name), Local("dims", address=False), float(x.quant.s),
            x.quant.zp, float(other.quant.s), other.quant.zp, dx.size, Ptr(dx.name))),))


@register
class SquaredDifferenceGrad(_PairGrad):
    """SQUARED_DIFFERENCE: dz * (2 (x - other))."""

    kind = "SQUARED_DIFFERENCE_GRAD"
    kernel = "pockmcu_squared_difference_grad_f32"

    def terms(self, g, op, dz, xs):
        x, o = self.pair(g, op, dz, xs)
        return dz * (F32(2) * (x - o))


@register
class MaximumGrad(_PairGrad):
    """MAXIMUM: dz where x > other, dz / 2 where equal (PyTorch's maximum backward)."""

    kind = "MAXIMUM_GRAD"
    kernel = "pockmcu_maximum_grad_f32"

    def terms(self, g, op, dz, xs):
        x, o = self.pair(g, op, dz, xs)
        return np.where(x > o, dz, np.where(x == o, dz / F32(2), F32(0)))


@register
class MinimumGrad(_PairGrad):
    """MINIMUM: dz where x < other, dz / 2 where equal."""

    kind = "MINIMUM_GRAD"
    kernel = "pockmcu_minimum_grad_f32"

    def terms(self, g, op, dz, xs):
        x, o = self.pair(g, op, dz, xs)
        return np.where(x < o, dz, np.where(x == o, dz / F32(2), F32(0)))
