"""Training graph: loss, backward ops from per-op gradient rules, fused updates, one schedule.

The forward graph stays as it is. ``build_training`` adds:
- forward-side saves: 1-bit masks of fused ReLU/ReLU6 outputs (MASK_PACK) and
  the trainable channels of a layer's input when only some train (SLICE_S8);
- the loss and its gradient (XENT_GRAD from the int8 softmax output, or MSE_GRAD);
- backward ops, emitted in reverse forward order by each op's ``backward`` rule.
  Dead code is never built: an input gradient is made only when some trainable
  parameter lies upstream of that input, so the backward pass stops at the
  earliest layer that trains.
- updates fused into the weight-gradient kernels (no weight-gradient tensor).

Reordering (default): a layer's weight-gradient+update and bias update run as
soon as its output gradient exists, before its input gradient, so the saved
input dies first (as in the Tiny Training Engine; the input gradient then
sees the freshly updated weights). With ``reorder=False`` every update is
deferred to the end of the backward pass: exact SGD order, but the saved
activations and output gradients stay live until then.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..errors import PockError
from ..ir import Graph, Op, Tensor
from ..ops import REGISTRY, opdef
from .spec import LayerUpdate, UpdateSpec

UPDATE_KINDS = ("CONV_2D_WGRAD_UPDATE", "DEPTHWISE_CONV_2D_WGRAD_UPDATE", "FULLY_CONNECTED_WGRAD_UPDATE",
                "BIAS_UPDATE")


@dataclass
class TrainGraph:
    graph: Graph                     # tensors of forward + training
    forward: list[Op]                # inference schedule (pockmcu_invoke)
    schedule: list[Op]               # training schedule (pockmcu_train_step)
    spec: UpdateSpec
    loss: str
    n_forward: int = 0               # schedule[:n_forward] is the forward phase (with saves)
    reorder: bool = True
    trainable_tensors: list[str] = field(default_factory=list)   # int8 weights / int32 biases kept in RAM
    label_shape: tuple[int, ...] = ()

    def state_elements(self, tensor: str) -> int:
        """Elements of ``tensor`` that train (the size of its optimizer state)."""
        for op in self.schedule:
            if op.attrs.get("bias") == tensor:
                return self.graph.t(tensor).size
            if op.attrs.get("weights") == tensor:
                w = self.graph.t(tensor)
                k = op.attrs["channels"]
                if op.kind == "DEPTHWISE_CONV_2D_WGRAD_UPDATE":
                    return w.shape[1] * w.shape[2] * k * op.attrs["layer"].attrs["ch_mult"]
                return w.size // w.shape[-1] * k
        return 0

    def head_channels(self, tensor: str) -> int:
        """k when ``tensor`` is stored split, else 0.

        A CONV_2D (no groups) whose update trains only the first k < C_in input channels keeps
        just those in RAM: rows of k values, one row per filter tap (o, ky, kx). The frozen
        channels are read from the flash constant (the whole original tensor), so the forward
        pass and the input gradient take both (pockmcu_convolve_split_s8). FULLY_CONNECTED and
        DEPTHWISE_CONV_2D weights, biases and fully trained tensors are stored whole.
        """
        for op in self.schedule:
            if op.kind == "CONV_2D_WGRAD_UPDATE" and op.attrs.get("weights") == tensor:
                w = self.graph.t(tensor)
                k = op.attrs["channels"]
                return k if op.attrs["channel_begin"] == 0 and k < w.shape[-1] else 0
        return 0

    def stored_shape(self, tensor: str) -> tuple[int, ...]:
        """The shape of the RAM copy of a trainable tensor: (O, KH, KW, k) when split, else its shape."""
        shape = tuple(self.graph.t(tensor).shape)
        k = self.head_channels(tensor)
        return shape[:-1] + (k,) if k else shape

    def stored_bytes(self, tensor: str) -> int:
        """Bytes of the RAM copy (and of the tensor in pockmcu_params_read / P.bin)."""
        return int(np.prod(self.stored_shape(tensor))) * self.graph.t(tensor).np_dtype.itemsize

    def persistent_bytes(self) -> int:
        """RAM that lives across steps: trainable tensors (as stored: a split CONV_2D only its trained
        channels), momentum and batch accumulators, RNG states."""
        total = 0
        for t in self.trainable_tensors:
            total += self.stored_bytes(t) + 4            # the stored tensor and its RNG state
            n = self.state_elements(t)
            total += 4 * n * ((self.spec.momentum > 0) + (self.spec.batch > 1))
        return total + 16                                # optimizer struct, step counter


class TrainBuilder:
    def __init__(self, g: Graph, spec: UpdateSpec, loss: str, reorder: bool):
        self.g, self.spec, self.loss, self.reorder = g, spec, loss, reorder
        self.updates = spec.by_op()
        self.before: dict[str, list[Op]] = {}     # forward op name -> ops to run just before it
        self.after: dict[str, list[Op]] = {}      # forward op name -> ops to run just after it
        self.backward: list[Op] = []
        self.deferred: list[Op] = []
        self.grads: dict[str, str] = {}
        self._upstream = self._upstream_trainable()
        producers = g.producers()
        self._short = {t: (f"{producers[t].name}_out" if t in producers else "input") for t in g.tensors}

    def short(self, tensor: str) -> str:
        """A readable name for a forward tensor: '<op>_out' (TFLite names can be 200 characters)."""
        return self._short.get(tensor, tensor)

    # -- helpers used by the op rules -----------------------------------------------------
    def update_of(self, op: Op) -> LayerUpdate | None:
        u = self.updates.get(op.name)
        return u if u and (u.bias or u.channels) else None

    def needs_grad(self, tensor: str) -> bool:
        return tensor in self._upstream

    def grad(self, tensor: str) -> str:
        return self.grads[tensor]

    def new_tensor(self, name: str, shape, dtype: str) -> str:
        base, k = name, 1
        while name in self.g.tensors:
            name, k = f"{base}_{k}", k + 1
        self.g.tensors[name] = Tensor(name=name, shape=tuple(int(s) for s in shape), dtype=dtype)
        return name

    def grad_tensor(self, of: str, name: str | None = None) -> str:
        return self.new_tensor(name or f"{self.short(of)}_grad", self.g.t(of).shape, "float32")

    def emit(self, kind: str, name: str, inputs: list[str], outputs: list[str], **attrs) -> Op:
        op = Op(kind=kind, name=name, inputs=inputs, outputs=outputs, attrs=attrs, location="training graph")
        if kind in UPDATE_KINDS and not self.reorder:
            self.deferred.append(op)
        else:
            self.backward.append(op)
        return op

    def save_before(self, fwd: Op, kind: str, name: str, inputs, outputs, **attrs) -> Op:
        op = Op(kind=kind, name=name, inputs=inputs, outputs=outputs, attrs=attrs, location="training graph")
        self.before.setdefault(fwd.name, []).append(op)
        return op

    def save_after(self, fwd: Op, kind: str, name: str, inputs, outputs, **attrs) -> Op:
        op = Op(kind=kind, name=name, inputs=inputs, outputs=outputs, attrs=attrs, location="training graph")
        self.after.setdefault(fwd.name, []).append(op)
        return op

    def spatial_mean_grad(self, grad: str) -> Op | None:
        """The backward op that wrote ``grad`` as a spatial broadcast (the input gradient of a MEAN
        over H, W or of a global average pool: the output gradient / (H W) at every position), when
        ``grad`` is only that. A consumer that can read the small gradient instead calls ``unemit``."""
        for op in self.backward:
            if grad in op.outputs and op.attrs.get("spatial_mean"):
                return op
        return None

    def unemit(self, op: Op) -> None:
        self.backward.remove(op)

    def add_grad(self, tensor: str, grad: str) -> None:
        """Contribute ``grad`` to the gradient of ``tensor`` (summing where a tensor fans out)."""
        if tensor not in self.grads:
            self.grads[tensor] = grad
            return
        total = self.new_tensor(f"{self.short(tensor)}_grad_sum", self.g.t(tensor).shape, "float32")
        self.emit("ADD_F32", f"{self.short(tensor)}_grad_accumulate", [self.grads[tensor], grad], [total])
        self.grads[tensor] = total

    def mask(self, op: Op) -> str:
        """The 1-bit mask of ``op``'s output, packed in the forward pass: bit k says that output k was
        not clamped (see ``masked``)."""
        out = self.g.t(op.outputs[0])
        lo, hi = op.attrs.get("act_min", -128), op.attrs.get("act_max", 127)
        mask = self.new_tensor(f"{op.name}_mask", ((out.size + 7) // 8,), "uint8")
        self.save_after(op, "MASK_PACK", f"{op.name}_mask_pack", [op.outputs[0]], [mask], lo=int(lo), hi=int(hi))
        return mask

    def masked(self, op: Op, dy: str) -> str:
        """Zero the output gradient wherever the int8 output was clamped (in place).

        The straight-through estimator of quantization-aware training: an output pinned at the
        fused activation's bound or at the int8 range (act_min / act_max; -128 / 127 with no
        activation) passes no gradient. The mask is 1 bit per element, packed in the forward pass.
        """
        out = self.g.t(op.outputs[0])
        mask = self.mask(op)
        dz = self.new_tensor(f"{op.name}_out_grad_masked", out.shape, "float32")
        self.emit("MASK_APPLY", f"{op.name}_mask_apply", [dy, mask], [dz])
        return dz

    # -- construction ---------------------------------------------------------------------------
    def _upstream_trainable(self) -> set[str]:
        up: set[str] = set()
        for op in self.g.ops:
            if self.update_of(op) or any(i in up for i in op.inputs if i):
                up.update(op.outputs)
        return up

    def _loss(self) -> None:
        g = self.g
        out = g.outputs[0]
        producers = g.producers()
        last = producers.get(out)
        if self.loss == "xent":
            if last is None or last.kind != "SOFTMAX":
                raise PockError(f"--loss xent needs a model whose output comes from SOFTMAX (this one ends in "
                                f"{last.kind if last else 'its input'}); use --loss mse")
            logits = last.inputs[0]
            dl = self.grad_tensor(logits)
            self.emit("XENT_GRAD", "loss_xent", [out], [dl], beta=float(last.attrs.get("beta", 1.0)),
                      classes=int(g.t(out).shape[-1]))
            self.grads[logits] = dl
            self.skip = {last.name}
        else:
            dl = self.grad_tensor(out)
            self.emit("MSE_GRAD", "loss_mse", [out], [dl], count=int(g.t(out).size))
            self.grads[out] = dl
            self.skip = set()

    def build(self) -> list[Op]:
        self._loss()
        for op in reversed(self.g.ops):
            if op.name in self.skip or not any(o in self.grads for o in op.outputs):
                continue
            d = REGISTRY[op.kind]
            if not self.update_of(op) and not any(self.needs_grad(i) for i in d.activation_inputs(self.g, op)):
                continue
            d.backward(self, op)
        schedule: list[Op] = []
        for op in self.g.ops:
            schedule += self.before.get(op.name, []) + [op] + self.after.get(op.name, [])
        return schedule + self.backward + self.deferred


def build_training(g: Graph, spec: UpdateSpec, loss: str, reorder: bool = True) -> TrainGraph:
    forward = list(g.ops)
    tb = TrainBuilder(g, spec, loss, reorder)
    schedule = tb.build()
    for op in schedule[len(forward):]:
        if op.kind in REGISTRY:
            opdef(op.kind).prepare(g, op)
    for op in schedule:
        if op not in forward and op.kind not in REGISTRY:
            raise PockError(f"internal: no definition for training op {op.kind}")
    trainable = []
    for u in spec.trainable():
        if u.channels:
            trainable.append(u.op.inputs[1])
        if u.bias:
            trainable.append(u.op.inputs[2])
    out = g.t(g.outputs[0])
    label_shape = (1,) if loss == "xent" else tuple(out.shape)
    tg = TrainGraph(graph=g, forward=forward, schedule=schedule, spec=spec, loss=loss,
                    n_forward=len(schedule) - len(tb.backward) - len(tb.deferred), reorder=reorder,
                    trainable_tensors=trainable, label_shape=label_shape)
    g.ops = forward
    return tg


def check_trainable(g: Graph, loss: str) -> None:
    if loss not in ("xent", "mse"):
        raise PockError(f"--loss {loss!r}: use xent (classification) or mse (regression)")
    if len(g.inputs) != 1 or len(g.outputs) != 1:
        raise PockError("training needs a model with one input and one output")


def coefficient(values) -> np.ndarray:
    return np.asarray(values, np.float64).astype(np.float32)
