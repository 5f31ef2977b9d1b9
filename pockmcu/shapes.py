"""Shape inference as the source of truth: each op's output shapes computed from its inputs and options.

``op_shape_problems(g, op)`` runs for every op once after loading (``compiler.checked_op_problems``,
from ``compiler.unsupported`` and ``inspect``): for every op with a rule here it computes the output
shapes from the input shapes and the options and refuses a declared shape that disagrees, naming the
op and both shapes. It also refuses windows that make no sense (strides and dilations outside
1..MAX_WINDOW, kernel sizes outside 1..MAX_KERNEL, explicit paddings that are negative or as wide as
the window, a VALID window larger than its input) and empty tensors. The planner and codegen size
every buffer and every kernel's dims from the declared shapes, so after this pass they never see an
inconsistent tensor.

The same pass proves the arithmetic limits of the multiply-accumulate kernels (``accumulator_problems``):
for CONV_2D, DEPTHWISE_CONV_2D and FULLY_CONNECTED the worst accumulator from the actual weights and
bias, for any int8 input and zero point, must fit int32. Biases written later over the serial link
are held to the same bound for any int8 weights by the board app (firmware/PROTOCOL.md, "Parameter
limits").

Rules are keyed by op kind. Kinds that check their own shapes in ``OpDef.check`` (RESHAPE, the
reductions, resizes, TRANSPOSE_CONV and the data movements' ``shape_problems``) are listed in
``CHECKED_BY_OP``; with the constant ops folded at load time (``FOLDED``) they are every kind a model
file can name (tests/test_errors.py checks that). Each rule returns the expected output shapes
(FULLY_CONNECTED's as ("rows", rows, outputs): its leading dims are compared by element count) or
raises ShapeProblem.
"""

from __future__ import annotations

import math
from dataclasses import fields, is_dataclass
from typing import Callable

import numpy as np

from .ir import Graph, Op

#: strides and dilations above this are refused: far above any real model, small enough that no index
#: arithmetic in the kernels or the streaming planner can overflow
MAX_WINDOW = 255
#: kernel (filter) sizes above this are refused (a global pooling over a long 1-D signal stays below)
MAX_KERNEL = 4096


class ShapeProblem(Exception):
    """One line saying what is inconsistent (the caller prefixes the op)."""


Rule = Callable[[Graph, Op], list]
RULES: dict[str, Rule] = {}

#: kinds whose own ``check`` compares their output shapes with their inputs and options
CHECKED_BY_OP = frozenset({
    "RESHAPE", "MEAN", "SUM", "REDUCE_MAX", "REDUCE_MIN", "RESIZE_NEAREST_NEIGHBOR", "RESIZE_BILINEAR",
    "TRANSPOSE_CONV", "TRANSPOSE", "SPLIT", "SPLIT_V", "UNPACK", "PACK", "SLICE_ND", "TILE", "GATHER",
    "DEPTH_TO_SPACE", "SPACE_TO_DEPTH", "STRIDED_SLICE", "CONCATENATION", "BATCH_MATMUL",
})


#: kinds that never reach the C: folded to a constant at load time, of the declared output shape
FOLDED = frozenset({"SHAPE", "FILL", "ZEROS_LIKE"})


def rule(*kinds: str):
    def deco(f: Rule) -> Rule:
        for k in kinds:
            RULES[k] = f
        return f
    return deco


def rule_kinds() -> list[str]:
    return sorted(RULES)


def _shape(g: Graph, name: str) -> tuple[int, ...]:
    return tuple(int(d) for d in g.t(name).shape)


def _window_param(what: str, pair, limit: int = MAX_WINDOW) -> tuple[int, int]:
    vals = tuple(int(v) for v in pair)
    if len(vals) != 2 or any(not 1 <= v <= limit for v in vals):
        raise ShapeProblem(f"{what} {list(vals)} (each must be 1..{limit})")
    return vals


def window_out(what: str, in_hw, k_hw, stride, dilation, padding: str, pads) -> tuple[int, int]:
    """Output (h, w) of a 2-D window op; raises ShapeProblem on nonsense parameters."""
    stride = _window_param("stride", stride)
    dilation = _window_param("dilation", dilation)
    k_hw = _window_param(f"{what} size", k_hw, MAX_KERNEL)
    out = []
    for i in range(2):
        eff = (k_hw[i] - 1) * dilation[i] + 1
        if pads is not None:
            before, after = int(pads[i]), int(pads[i + 2])
            if before < 0 or after < 0 or before >= eff or after >= eff:
                raise ShapeProblem(f"explicit padding {list(pads)} for a {k_hw[0]}x{k_hw[1]} window (each pad "
                                   "must be >= 0 and smaller than the window)")
            o = (in_hw[i] + before + after - eff) // stride[i] + 1
        elif padding == "SAME":
            o = (in_hw[i] + stride[i] - 1) // stride[i]
        elif padding == "VALID":
            o = (in_hw[i] - eff) // stride[i] + 1 if in_hw[i] >= eff else 0
        else:
            raise ShapeProblem(f"padding {padding!r} (SAME or VALID)")
        if o < 1:
            raise ShapeProblem(f"a {k_hw[0]}x{k_hw[1]} window (dilation {list(dilation)}) does not fit the "
                               f"{in_hw[0]}x{in_hw[1]} input")
        out.append(o)
    return out[0], out[1]


def _nhwc(g: Graph, name: str, what: str) -> tuple[int, ...]:
    s = _shape(g, name)
    if len(s) != 4:
        raise ShapeProblem(f"{what} '{name}' has shape {list(s)} (a 4-D NHWC tensor is needed)")
    return s


@rule("CONV_2D")
def _conv(g: Graph, op: Op) -> list:
    o = op.options
    x = _nhwc(g, op.inputs[0], "input")
    w = _nhwc(g, op.inputs[1], "weights")
    if w[3] != x[3]:
        raise ShapeProblem(f"weights {list(w)} have depth {w[3]} but the input {list(x)} has {x[3]} channels")
    oh, ow = window_out("filter", x[1:3], w[1:3], o.stride, o.dilation, o.padding, o.pads)
    _bias(g, op, w[0])
    return [(x[0], oh, ow, w[0])]


@rule("DEPTHWISE_CONV_2D")
def _depthwise(g: Graph, op: Op) -> list:
    o = op.options
    x = _nhwc(g, op.inputs[0], "input")
    w = _nhwc(g, op.inputs[1], "weights")
    m = int(o.ch_mult)
    if w[0] != 1 or m < 1 or w[3] != x[3] * m:
        raise ShapeProblem(f"depthwise weights {list(w)} do not match input {list(x)} with channel multiplier {m}")
    oh, ow = window_out("filter", x[1:3], w[1:3], o.stride, o.dilation, o.padding, o.pads)
    _bias(g, op, w[3])
    return [(x[0], oh, ow, w[3])]


def _bias(g: Graph, op: Op, channels: int) -> None:
    if len(op.inputs) > 2 and op.inputs[2]:
        b = g.t(op.inputs[2])
        if b.size != channels:
            raise ShapeProblem(f"bias '{b.name}' has {b.size} values for {channels} output channels")


@rule("FULLY_CONNECTED")
def _fc(g: Graph, op: Op) -> list:
    x, w = _shape(g, op.inputs[0]), _shape(g, op.inputs[1])
    if len(w) != 2:
        raise ShapeProblem(f"weights '{op.inputs[1]}' have shape {list(w)} (need [outputs, inputs])")
    n = math.prod(x)
    if w[1] < 1 or n % w[1]:
        raise ShapeProblem(f"input {list(x)} ({n} values) is not a whole number of rows of {w[1]} "
                           f"(weights {list(w)})")
    _bias(g, op, w[0])
    return [("rows", n // w[1], w[0])]


@rule("AVERAGE_POOL_2D", "MAX_POOL_2D", "AVERAGE_POOL_REQUANT")
def _pool(g: Graph, op: Op) -> list:
    o = op.options
    x = _nhwc(g, op.inputs[0], "input")
    oh, ow = window_out("filter", x[1:3], o.filter, o.stride, (1, 1), o.padding, o.pads)
    return [(x[0], oh, ow, x[3])]


@rule("ADD", "SUB", "MUL", "SQUARED_DIFFERENCE", "MAXIMUM", "MINIMUM", "ADD_CONST")
def _broadcast(g: Graph, op: Op) -> list:
    shapes = [_shape(g, i) for i in op.inputs[:2] if i]
    try:
        return [tuple(int(d) for d in np.broadcast_shapes(*shapes))]
    except ValueError:
        raise ShapeProblem(f"input shapes {' and '.join(str(list(s)) for s in shapes)} do not broadcast") from None


@rule("SOFTMAX", "LOG_SOFTMAX", "LOGISTIC", "TANH", "RELU", "RELU6", "RELU_N1_TO_1", "LEAKY_RELU", "PRELU",
      "HARD_SWISH", "QUANTIZE", "DEQUANTIZE", "REQUANTIZE", "UINT8_TO_INT8", "INT8_TO_UINT8")
def _same(g: Graph, op: Op) -> list:
    return [_shape(g, op.inputs[0])]


@rule("PAD")
def _pad(g: Graph, op: Op) -> list:
    x = _shape(g, op.inputs[0])
    p = g.t(op.inputs[1]).data if len(op.inputs) > 1 and op.inputs[1] else None
    if p is None:
        raise ShapeProblem("PAD with non-constant paddings")
    p = np.asarray(p).astype(np.int64).reshape(-1)
    if p.size != 2 * len(x):
        raise ShapeProblem(f"{p.size} padding values for a rank-{len(x)} input (need {2 * len(x)})")
    pairs = p.reshape(-1, 2)
    if np.any(pairs < 0) or np.any(pairs > 1 << 16):
        raise ShapeProblem(f"paddings {pairs.tolist()} (each must be 0..65536)")
    return [tuple(int(d + a + b) for d, (a, b) in zip(x, pairs))]


# -- arithmetic limits: the worst accumulator of the int8 multiply-accumulate kernels -------------------

INT32_MAX = (1 << 31) - 1
#: |x - zp_in| <= 255 for int8 x and zp in [-128, 127]; 256 covers every order in which a kernel sums
#: sum(x * w), input_offset * sum(w) and the bias (folding the offset into the bias first, or not)
ACTIVATION_BOUND = 256


def accumulator_bound(g: Graph, op: Op) -> tuple[int, int] | None:
    """(worst |accumulator|, output channel) of a CONV_2D / DEPTHWISE_CONV_2D / FULLY_CONNECTED from its
    actual weights and bias: ACTIVATION_BOUND * sum|w - zp_w| + |bias| per output channel, maximized;
    None for other kinds or non-constant operands."""
    if op.kind not in ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED") or len(op.inputs) < 2:
        return None
    w = g.t(op.inputs[1])
    if w.data is None:
        return None
    wd = w.data.astype(np.int64)
    if w.quant is not None and not w.quant.per_channel:
        wd = wd - int(w.quant.zp)
    if op.kind == "DEPTHWISE_CONV_2D":
        per = np.abs(wd).reshape(-1, wd.shape[-1]).sum(axis=0)         # [1, kh, kw, C*m]: channel last
    else:
        per = np.abs(wd).reshape(wd.shape[0], -1).sum(axis=1)          # [O, ...]: channel first
    acc = ACTIVATION_BOUND * per
    if len(op.inputs) > 2 and op.inputs[2] and g.t(op.inputs[2]).data is not None:
        b = np.abs(g.t(op.inputs[2]).data.astype(np.int64).reshape(-1))
        if b.size == acc.size:
            acc = acc + b
    c = int(np.argmax(acc))
    return int(acc[c]), c


#: |w| <= 128 for an int8 weight, |x - zp_in| <= 256 for an int8 input: the largest product an accumulator
#: adds, for ANY weights and inputs (training changes the weights; board/firmware.py uses the same bound),
#: for weights without a zero point; a per-tensor weight zero point zp_w makes it 256 * (128 + |zp_w|)
PRODUCT_BOUND = 128 * 256


def bias_limit(g: Graph, bias: str) -> int:
    """The largest |value| a trained (or written) int32 bias may take: 2^31 - 1 - K * P (0 if that is
    negative), K the products the accumulator of the op reading the bias adds per output channel (its
    weights per output channel: kh * kw * in_channels for a convolution, kh * kw for a depthwise one,
    the inputs of a fully connected layer) and P the largest product, 256 * (128 + |zp_w|)
    (PRODUCT_BOUND without a weight zero point). bias + K products then fits int32 for any int8 weights
    and inputs, however long both train: the bound of the device's WRITE_PARAMS check
    (board.firmware.param_limits). A bias no op reads with a constant int8 operand gets the deepest
    accumulation of the graph (safe)."""
    b = g.t(bias)
    worst = 0
    for op in g.ops:
        if bias in op.inputs and b.size:
            ws = [g.t(t) for t in op.inputs if t and t != bias and t in g.tensors
                  and g.t(t).dtype == "int8" and g.t(t).data is not None]
            if ws:
                w = max(ws, key=lambda t: t.size)
                zp = int(np.abs(np.asarray(w.quant.zero_point, np.int64)).max()) if w.quant is not None else 0
                worst = max(worst, w.size // b.size * ACTIVATION_BOUND * (128 + zp))
    if worst == 0:
        depth = max((t.size for t in g.tensors.values() if t.dtype == "int8" and t.data is not None), default=1 << 16)
        worst = depth * ACTIVATION_BOUND * 255
    return max(0, INT32_MAX - worst)


#: the largest left shift a requantization may need: the kernels shift an int32 by it (defined up to 31)
MAX_LEFT_SHIFT = 30


def requant_shift_problems(g: Graph, op: Op) -> list[str]:
    """CONV_2D / DEPTHWISE_CONV_2D / FULLY_CONNECTED: the requantization scale s_in * s_w / s_out of every
    output channel must need a left shift of at most MAX_LEFT_SHIFT bits (a weight scale of 1e30 asked
    for a shift of 98: undefined behaviour in the kernels)."""
    if op.kind not in ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED") or len(op.inputs) < 2:
        return []
    x, w, y = g.t(op.inputs[0]), g.t(op.inputs[1]), g.t(op.outputs[0])
    if x.quant is None or w.quant is None or y.quant is None:
        return []
    with np.errstate(all="ignore"):
        m = float(x.quant.s) * w.quant.scale.astype(np.float64) / float(y.quant.s)
    if not np.all(np.isfinite(m)):
        return ["its requantization scale (input scale x weight scale / output scale) is not a finite number"]
    shift = int(np.frexp(m.max() * (1 + 1e-6))[1])
    if shift > MAX_LEFT_SHIFT:
        return [f"its requantization scale {m.max():.4g} (input scale x weight scale / output scale) needs a left "
                f"shift of {shift} bits, more than {MAX_LEFT_SHIFT}; the scales are damaged"]
    return []


def prepared_shift_problems(prepared) -> list[str]:
    """Any op's prepared constants (after OpDef.prepare): no left shift above MAX_LEFT_SHIFT. The kernels
    shift int32 values by these; a scale of 1e30 or 1e-30 asks for 90 bits and more (MEAN, SUM,
    QUANTIZE, TRANSPOSE_CONV, BATCH_MATMUL, LOGISTIC, TANH: undefined behaviour in C). Right shifts
    (negative) are left alone (TFLM's multipliers clamp them, onnxruntime's exponents are wider), except
    a field named as a left shift (LOGISTIC's input_left_shift): -31 at least. Shipped models reach at
    most 25."""
    if not is_dataclass(prepared):
        return []
    for f in fields(prepared):
        v = getattr(prepared, f.name)
        items = v.items() if isinstance(v, dict) else [(f.name, v)]
        if isinstance(v, dict) and v.get("input_range_radius") == 0:
            # LOGISTIC / TANH from a left shift of 31 on: the radius is 0, every input saturates before the
            # multiply (TFLite Micro's kernels and ours), so the shift is never made
            items = [(n, x) for n, x in items if n != "input_left_shift"]
        for name, x in items:
            if "shift" not in name or isinstance(x, (str, bool)) or x is None:
                continue
            try:
                a = np.asarray(x, dtype=np.float64)
            except (TypeError, ValueError):
                continue
            if a.size and (np.nanmax(a) > MAX_LEFT_SHIFT or ("left_shift" in name and np.nanmin(a) < -31)):
                worst = int(np.nanmax(a)) if np.nanmax(a) > MAX_LEFT_SHIFT else int(np.nanmin(a))
                return [f"its scales need a shift of {worst} bits ({name}), outside -31..{MAX_LEFT_SHIFT}; "
                        "the quantization scales are damaged or far outside int8 practice"]
    return []


def accumulator_problems(g: Graph, op: Op) -> list[str]:
    """The op's int32 accumulator could overflow for some int8 input (undefined behaviour in C), or its
    requantization needs a shift the kernels cannot make."""
    shift = requant_shift_problems(g, op)
    if shift:
        return shift
    found = accumulator_bound(g, op)
    if found is None or found[0] <= INT32_MAX:
        return []
    worst, c = found
    return [f"output channel {c} can accumulate {worst:,} in the worst case (|weights| summed times 256 for the "
            f"offset input, plus |bias|), beyond int32 ({INT32_MAX:,}); the weights or bias are damaged or far "
            "outside what an int8 converter writes"]


def infer(g: Graph, op: Op) -> list | None:
    """The op's expected output shapes (None: no rule for its kind)."""
    f = RULES.get(op.kind)
    return None if f is None else f(g, op)


def _matches(want, got: tuple[int, ...]) -> bool:
    if want and want[0] == "rows":           # FULLY_CONNECTED: [rows, outputs] in any leading dims
        return len(got) >= 1 and got[-1] == want[2] and math.prod(got) == want[1] * want[2]
    return tuple(want) == tuple(got)


def _show(want) -> str:
    if want and want[0] == "rows":
        return f"[{want[1]}, {want[2]}] (or the same values with other leading dims)"
    return str(list(want))


def window_option_problems(op: Op) -> list[str]:
    """Any op's (h, w) stride and dilation options in 1..MAX_WINDOW, also for kinds without a rule here:
    TRANSPOSE_CONV checked only stride >= 1, and a stride of 2^31-1 on a one-row input gave the declared
    output shape, compiled, and overflowed int32 in its weight-gradient kernel (fuzz seed 15, train stage)."""
    for name in ("stride", "dilation"):
        v = getattr(op.options, name, None) if op.options is not None else None
        if isinstance(v, tuple) and len(v) == 2 and all(isinstance(x, (int, np.integer)) for x in v):
            try:
                _window_param(name, v)
            except ShapeProblem as exc:
                return [str(exc)]
    return []


def op_shape_problems(g: Graph, op: Op) -> list[str]:
    """Why ``op``'s declared shapes are inconsistent (empty when fine or when no rule covers it)."""
    bad = window_option_problems(op)
    if bad:
        return bad
    for name in [i for i in op.inputs if i] + list(op.outputs):
        t = g.t(name)
        if not t.is_const and any(int(d) <= 0 for d in t.shape):
            return [f"tensor '{name}' has shape {list(t.shape)}: an empty activation"]
    try:
        want = infer(g, op)
    except ShapeProblem as exc:
        return [str(exc)]
    if want is None:
        return accumulator_problems(g, op)
    if len(want) != len(op.outputs):
        return [f"{len(op.outputs)} outputs, its inputs give {len(want)}"]
    problems = []
    for w, name in zip(want, op.outputs):
        got = _shape(g, name)
        if not _matches(w, got):
            problems.append(f"output '{name}' is declared {list(got)} but its inputs and options give {_show(w)}")
    return problems or accumulator_problems(g, op)
