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

from dataclasses import replace

from ..errors import PockError
from ..ir import Graph, Op, Tensor
from ..ops import REGISTRY, opdef
from ..ops.base import clamp_range, make_op, operand, option_items
from .fusions import Fusions, apply_fusions
from .graph import TrainGraph
from .spec import LayerUpdate, UpdateSpec


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
        op = make_op(kind, name, inputs, outputs, "training graph", **attrs)
        if opdef(kind).role == "update" and not self.reorder:
            self.deferred.append(op)
        else:
            self.backward.append(op)
        return op

    def save_before(self, fwd: Op, kind: str, name: str, inputs, outputs, **attrs) -> Op:
        op = make_op(kind, name, inputs, outputs, "training graph", **attrs)
        self.before.setdefault(fwd.name, []).append(op)
        return op

    def save_after(self, fwd: Op, kind: str, name: str, inputs, outputs, **attrs) -> Op:
        op = make_op(kind, name, inputs, outputs, "training graph", **attrs)
        self.after.setdefault(fwd.name, []).append(op)
        return op

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
        lo, hi = clamp_range(op)
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
            self.emit("XENT_GRAD", "loss_xent", [out], [dl], beta=float(option_items(last).get("beta", 1.0)),
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


def build_training(g: Graph, spec: UpdateSpec, loss: str, reorder: bool = True,
                   fusions: Fusions = Fusions()) -> TrainGraph:
    """The training graph of ``g`` (a new graph holding g's tensors and the new ones; ``g`` is not
    changed), then the fusion passes asked for (training/fusions.py)."""
    tgraph = replace(g, tensors=dict(g.tensors), ops=list(g.ops))
    forward = list(tgraph.ops)
    tb = TrainBuilder(tgraph, spec, loss, reorder)
    schedule = tb.build()
    trainable = []
    for u in spec.trainable():
        if u.channels:
            trainable.append(operand(u.op, "weights"))
        if u.bias:
            trainable.append(operand(u.op, "bias"))
    out = tgraph.t(tgraph.outputs[0])
    label_shape = (1,) if loss == "xent" else tuple(out.shape)
    tg = TrainGraph(graph=tgraph, forward=forward, schedule=schedule, spec=spec, loss=loss,
                    n_forward=len(schedule) - len(tb.backward) - len(tb.deferred), reorder=reorder,
                    trainable_tensors=trainable, label_shape=label_shape)
    tg = apply_fusions(tg, fusions)
    for op in tg.schedule[tg.n_forward:]:
        if op.kind not in REGISTRY:
            raise PockError(f"internal: no definition for training op {op.kind}")
        op.prepared = opdef(op.kind).prepare(tg.graph, op)
    return tg


def check_trainable(g: Graph, loss: str) -> None:
    if loss not in ("xent", "mse"):
        raise PockError(f"--loss {loss!r}: use xent (classification) or mse (regression)")
    if len(g.inputs) != 1 or len(g.outputs) != 1:
        raise PockError("training needs a model with one input and one output")

