"""Ops that exist only in the training graph and belong to no single forward op:
activation masks, bias updates, gradient plumbing (sum, copy, slice), and the losses.

Gradients are float32 with respect to real (dequantized) values. Every update
follows one rule (see ``sgd_update``), implemented once in C
(kernels_c/pockmcu_update_s8.c, pockmcu_update_s32.c) and once here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ..ccode import Array, Call, Emission, Local, Ptr
from ..ir import Graph, Op
from ..shapes import bias_limit
from .base import OpDef, register

F32 = np.float32


# -- the update rule, shared by every update op's numpy reference -----------------------------

def xorshift32(state: int) -> int:
    x = state & 0xFFFFFFFF
    x ^= (x << 13) & 0xFFFFFFFF
    x ^= x >> 17
    x ^= (x << 5) & 0xFFFFFFFF
    return x


def seed_stream(seed: int, k: int) -> int:
    """The RNG state of trainable tensor k for a given seed (splitmix-style mix, never 0); C: pockmcu_train_init."""
    x = (seed + 0x9E3779B9 * (k + 1)) & 0xFFFFFFFF
    x ^= x >> 16
    x = (x * 0x85EBCA6B) & 0xFFFFFFFF
    x ^= x >> 13
    x = (x * 0xC2B2AE35) & 0xFFFFFFFF
    x ^= x >> 16
    return x or 1


@dataclass
class TrainState:
    """The run-time state of the numpy training step: what the generated C keeps in its ``train``
    struct (optimizer, RNG streams, accumulators), the current trainable parameters, and the step's
    label or target and loss. The reference trainer owns it; graphs never hold it."""

    lr: float
    momentum: float
    batch: int
    rng: dict[str, int]                                  # one xorshift32 stream per trainable tensor
    params: dict[str, np.ndarray] = field(default_factory=dict)   # trainable tensor -> current values
    apply: int = 1                                       # this step applies the (accumulated) update
    accum: dict[str, np.ndarray] = field(default_factory=dict)
    velocity: dict[str, np.ndarray] = field(default_factory=dict)
    deltas: dict[str, np.ndarray] = field(default_factory=dict)   # last float steps, for rounding checks
    label: np.ndarray | None = None
    target: np.ndarray | None = None
    loss: float = 0.0


def sgd_update(q: np.ndarray, grad: np.ndarray, coef, st: TrainState, key: str, lo: int, hi: int) -> np.ndarray:
    """q (flat) updated by the rule of kernels_c/pockmcu_update_*.c, in float32, in element order."""
    lr, mom, batch, apply = F32(st.lr), F32(st.momentum), st.batch, st.apply
    gq = grad.astype(F32).reshape(-1) * np.asarray(coef, F32).reshape(-1)
    if batch > 1:
        acc = st.accum.setdefault(key, np.zeros(q.size, F32))
        acc += gq
        if not apply:
            return q
        gq = acc / F32(batch)
        st.accum[key] = np.zeros(q.size, F32)
    if mom != 0:
        v = st.velocity.setdefault(key, np.zeros(q.size, F32))
        v[:] = mom * v + gq
        gq = v.copy()
    delta = (-lr * gq).astype(F32)
    st.deltas[key] = (-float(st.lr) * np.asarray(gq, np.float64))
    rng = st.rng[key]
    out = q.astype(np.int64).reshape(-1).copy()
    for k in range(out.size):
        rng = xorshift32(rng)
        u = F32((rng >> 8) * (1.0 / 16777216.0))
        d = min(max(float(delta[k]), -2.0 ** 30), 2.0 ** 30)
        out[k] = min(max(out[k] + math.floor(F32(F32(d) + u)), lo), hi)
    st.rng[key] = rng
    return out


@dataclass(frozen=True)
class MaskRange:
    """The 1-bit mask keeps output k where lo < y[k] < hi (the fused activation did not clamp it)."""

    lo: int
    hi: int


@dataclass(frozen=True, eq=False)
class BiasUpdateOptions:
    bias: str                          # the trainable int32 bias tensor
    coef: np.ndarray                   # per output channel: raw gradient sum -> stored integers


@dataclass(frozen=True)
class RowSlice:
    """dst[r] = src[r][offset:offset + chunk] for each of ``outer`` rows of ``row`` elements."""

    outer: int
    row: int
    offset: int
    chunk: int


@dataclass(frozen=True)
class XentOptions:
    beta: float                        # the softmax's beta
    classes: int


@dataclass(frozen=True)
class MseOptions:
    count: int                         # elements the mean is over


@register
class MaskPack(OpDef):
    """Forward side: bit k = lo < y[k] < hi for a fused-activation output y (1 bit per element)."""

    kind = "MASK_PACK"
    Options = MaskRange
    kernel = "pockmcu_mask_pack_s8"
    io_dtypes = ("int8", "uint8")

    def reference(self, g: Graph, op: Op, xs, rt=None):
        y = xs[0].reshape(xs[0].shape[0], -1)
        bits = (y > op.options.lo) & (y < op.options.hi)
        return [np.packbits(bits, axis=1, bitorder="little")]

    def emit(self, g: Graph, op: Op, cg) -> Emission:
        x = op.inputs[0]
        return Emission(calls=(Call(cg.kernel(op).function, (Ptr(x), g.t(x).size, op.options.lo, op.options.hi,
                                                              Ptr(op.outputs[0]))),))


@register
class MaskApply(OpDef):
    """Backward side: zero the gradient where the activation was cut (in place)."""

    kind = "MASK_APPLY"
    inplace = True
    kernel = "pockmcu_mask_apply_f32"
    io_dtypes = ("float32", "uint8")

    def reference(self, g: Graph, op: Op, xs, rt=None):
        dy, mask = xs
        n = int(np.prod(dy.shape[1:]))
        bits = np.unpackbits(mask, axis=1, bitorder="little", count=n).astype(bool)
        return [np.where(bits.reshape(dy.shape), dy, 0.0)]

    def emit(self, g: Graph, op: Op, cg) -> Emission:
        dy, mask = op.inputs[:2]
        return Emission(calls=(Call(cg.kernel(op).function, (Ptr(dy), Ptr(mask), g.t(dy).size)),))


@register
class BiasUpdate(OpDef):
    """Bias gradient (sum of the output gradient over positions) and its update, fused. The update
    saturates at +-shapes.bias_limit (the accumulator bound for any int8 weights and inputs, which the
    device's WRITE_PARAMS check uses too), not at the int32 range: training never pushes a bias to a value
    that can overflow its layer's accumulator."""

    kind = "BIAS_UPDATE"
    Options = BiasUpdateOptions
    role = "update"
    kernel = "pockmcu_bias_update_bounded_s32"
    io_dtypes = ("float32",)

    def reference(self, g: Graph, op: Op, xs, rt=None):
        b = g.t(op.options.bias)
        limit = bias_limit(g, b.name)
        # the kernel's sums: float32, over the positions in ascending order from +0 (a float64 or pairwise
        # sum differs from it in the last bit now and then, which a large lr turns into a different bias)
        rows = np.asarray(xs[0], F32).reshape(-1, np.shape(xs[0])[-1])
        grad = np.zeros(rows.shape[1], F32)
        for row in rows:
            grad = grad + row
        new = sgd_update(b.data, grad, op.options.coef, rt, b.name, -limit, limit).astype(np.int32)
        rt.params[b.name] = new.reshape(b.data.shape)
        return []

    def emit(self, g: Graph, op: Op, cg) -> Emission:
        dz = g.t(op.inputs[0])
        channels = dz.shape[-1]
        opt = cg.optimizer_args(op.options.bias)
        coef = Array("coef", "float", tuple(float(c) for c in np.asarray(op.options.coef, np.float32).reshape(-1)))
        return Emission(decls=(coef,), calls=(Call(cg.kernel(op).function, (
            Ptr(op.options.bias), Ptr(dz.name), dz.size // channels, channels, Local("coef", address=False),
            opt["accum"], opt["velocity"], "&train.optimizer", opt["rng"], bias_limit(g, op.options.bias))),))


@register
class AddF32(OpDef):
    """Sum of two gradients where a tensor fans out in the forward graph."""

    kind = "ADD_F32"
    kernel = "pockmcu_add_f32"
    may_share_input = (0, 1)  # element-wise in order: the output may overwrite a dying input
    io_dtypes = ("float32",)

    def reference(self, g: Graph, op: Op, xs, rt=None):
        return [xs[0] + xs[1]]

    def emit(self, g: Graph, op: Op, cg) -> Emission:
        y = op.outputs[0]
        return Emission(calls=(Call(cg.kernel(op).function, (Ptr(op.inputs[0]), Ptr(op.inputs[1]), Ptr(y),
                                                              g.t(y).size)),))


@register
class CopyF32(OpDef):
    kind = "COPY_F32"
    kernel = "memcpy"
    io_dtypes = ("float32",)

    def reference(self, g: Graph, op: Op, xs, rt=None):
        return [xs[0].copy()]

    def emit(self, g: Graph, op: Op, cg) -> Emission:
        x = op.inputs[0]
        return Emission(calls=(Call("memcpy", (Ptr(op.outputs[0]), Ptr(x), g.t(x).nbytes)),))


@register
class Slice(OpDef):
    """Rows of a contiguous slice: dst[r] = src[r][offset:offset+chunk]. SLICE_S8 saves the
    trainable channels of an activation; SLICE_F32 splits a gradient (CONCATENATION backward)."""

    kind = "SLICE"
    Options = RowSlice
    io_dtypes = ("int8", "float32")

    def variant(self, g: Graph, op: Op, cg) -> str:
        return g.t(op.inputs[0]).dtype

    def reference(self, g: Graph, op: Op, xs, rt=None):
        a = op.options
        x = xs[0]
        rows = x.reshape(x.shape[0], a.outer, a.row)
        out = rows[:, :, a.offset:a.offset + a.chunk]
        return [out.reshape((x.shape[0],) + g.t(op.outputs[0]).shape[1:])]

    def emit(self, g: Graph, op: Op, cg) -> Emission:
        a = op.options
        return Emission(calls=(Call(cg.kernel(op).function, (Ptr(op.inputs[0]), a.outer, a.row, a.offset, a.chunk,
                                                              Ptr(op.outputs[0]))),))


@register
class XentGrad(OpDef):
    """Softmax cross-entropy fused: d loss / d logits = beta * (p - onehot), p from the int8 softmax
    output (q + 128) / 256; the loss -ln p[label] comes from a 256-entry table made at compile time."""

    kind = "XENT_GRAD"
    Options = XentOptions
    role = "loss"
    kernel = "pockmcu_softmax_xent_grad_s8"
    io_dtypes = ("int8", "float32")

    def reference(self, g: Graph, op: Op, xs, rt=None):
        q = xs[0].reshape(xs[0].shape[0], -1).astype(np.float64)
        p = (q + 128) / 256.0
        onehot = np.zeros_like(p)
        onehot[np.arange(len(p)), rt.label] = 1
        rt.loss = float(nll_table()[int(xs[0].reshape(-1)[rt.label[0]]) + 128])
        return [(op.options.beta * (p - onehot)).reshape((len(p),) + g.t(op.outputs[0]).shape[1:])]

    def emit(self, g: Graph, op: Op, cg) -> Emission:
        return Emission(calls=(Call(cg.kernel(op).function, (
            Ptr(op.inputs[0]), op.options.classes, "*(const int32_t *)label", float(op.options.beta), "nll_table",
            Ptr(op.outputs[0])), assign="result->loss"),))


def nll_table() -> np.ndarray:
    """-ln(p) for the int8 softmax output q (p = (q + 128) / 256, and 1/512 for q = -128)."""
    p = np.maximum(np.arange(256, dtype=np.float64), 0.5) / 256.0
    return (-np.log(p)).astype(np.float32)


@register
class MseGrad(OpDef):
    """Mean squared error against a float target: grad = 2 (y - t) / n, y dequantized."""

    kind = "MSE_GRAD"
    Options = MseOptions
    role = "loss"
    io_dtypes = ("int8", "float32")

    def variant(self, g: Graph, op: Op, cg) -> str:
        return g.t(op.inputs[0]).dtype

    def reference(self, g: Graph, op: Op, xs, rt=None):
        y = g.t(op.inputs[0])
        yr = xs[0].astype(np.float64)
        if y.dtype == "int8":
            yr = y.quant.s * (yr - y.quant.zp)
        t = np.asarray(rt.target, np.float64).reshape(yr.shape)
        d = yr - t
        rt.loss = float(np.mean(d * d))
        return [2 * d / d[0].size]

    def emit(self, g: Graph, op: Op, cg) -> Emission:
        y = g.t(op.inputs[0])
        if y.dtype == "int8":
            args = (Ptr(y.name), y.size, float(y.quant.s), y.quant.zp, "(const float *)label", Ptr(op.outputs[0]))
        else:
            args = (Ptr(y.name), y.size, "(const float *)label", Ptr(op.outputs[0]))
        return Emission(calls=(Call(cg.kernel(op).function, args, assign="result->loss"),))


@dataclass(frozen=True)
class XentLogitsOptions:
    classes: int


@dataclass(frozen=True, eq=False)
class XentLogitsData:
    scale: float                       # the int8 logits' scale
    exp_table: np.ndarray              # float32 [256]: exp(-scale * d) for d = max(q) - q


def logits_exp_table(scale: float) -> np.ndarray:
    """exp(-s * d), d = 0..255, each rounded once to float32 (s: the logits' float32 scale)."""
    return np.exp(-float(np.float32(scale)) * np.arange(256, dtype=np.float64)).astype(F32)


def logits_xent(q: np.ndarray, label: int, scale: float, table: np.ndarray) -> tuple[np.ndarray, float]:
    """Softmax cross-entropy on the dequantized int8 logits z = s (q - zp) and its gradient p - onehot,
    in float32 in the kernel's order (kernels_c/pockmcu_logits_xent_grad_s8.c): e_c = table[max q - q_c]
    (softmax is shift-invariant, so the zero point drops out), sum in class order, p_c = e_c / sum.
    The loss ln(sum) + s (max q - q_label) is reported in float64 (the kernel's logf may differ in
    the last place; only the gradient reaches the parameters)."""
    q = np.asarray(q, np.int64).reshape(-1)
    d = q.max() - q
    e = table[d]
    total = F32(0.0)
    for v in e:
        total = F32(total + v)
    p = (e / total).astype(F32)
    grad = p.copy()
    grad[label] = F32(p[label] - F32(1.0))
    loss = float(np.log(np.float64(total))) + float(F32(scale) * F32(d[label]))
    return grad, loss


@register
class XentLogitsGrad(OpDef):
    """Softmax cross-entropy from int8 logits (models without a softmax, or ending in LOG_SOFTMAX):
    d loss / d logits = softmax(z) - onehot on the dequantized logits z; the exps come from a
    256-entry table of the logits' scale made at compile time."""

    kind = "XENT_LOGITS_GRAD"
    Options = XentLogitsOptions
    role = "loss"
    kernel = "pockmcu_logits_xent_grad_s8"
    io_dtypes = ("int8", "float32")

    def prepare(self, g: Graph, op: Op) -> XentLogitsData:
        s = g.t(op.inputs[0]).quant.s
        return XentLogitsData(s, logits_exp_table(s))

    def reference(self, g: Graph, op: Op, xs, rt=None):
        rows = xs[0].reshape(xs[0].shape[0], -1)
        grads, losses = [], []
        for q, label in zip(rows, rt.label):
            grad, loss = logits_xent(q, int(label), op.prepared.scale, op.prepared.exp_table)
            grads.append(grad)
            losses.append(loss)
        rt.loss = losses[0]
        return [np.stack(grads).astype(np.float64).reshape((len(rows),) + g.t(op.outputs[0]).shape[1:])]

    def emit(self, g: Graph, op: Op, cg) -> Emission:
        table = Array("exp", "float", tuple(float(v) for v in op.prepared.exp_table))
        return Emission(decls=(table,), calls=(Call(cg.kernel(op).function, (
            Ptr(op.inputs[0]), op.options.classes, "*(const int32_t *)label", float(op.prepared.scale),
            Local("exp", address=False), Ptr(op.outputs[0])), assign="result->loss"),))
