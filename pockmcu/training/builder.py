"""Training graph: loss, backward ops from per-op gradient rules, fused updates, one schedule.

The forward graph stays as it is. ``build_training`` adds:
- forward-side saves: 1-bit masks of fused ReLU/ReLU6 outputs (MASK_PACK) and
  the trainable channels of a layer's input when only some train (SLICE_S8);
- the loss and its gradient: XENT_GRAD from the int8 softmax output, XENT_LOGITS_GRAD from int8
  logits (no softmax, or LOG_SOFTMAX), or MSE_GRAD; ops that only deliver the scores in another
  dtype or shape (DEQUANTIZE, QUANTIZE to uint8, RESHAPE; ``classifier_head``) are not differentiated;
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

from dataclasses import dataclass, field, replace
from pathlib import Path

from ..errors import PockError
from ..ir import Graph, Op, Tensor
from ..ops import REGISTRY, opdef
from ..ops.base import OpDef, clamp_range, make_op, operand
from .fusions import Fusions, apply_fusions
from .graph import TrainGraph
from .spec import PARAM_KINDS, LayerUpdate, UpdateSpec


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
        if self.loss == "xent":
            head = classifier_head(g)
            if head.problem:
                raise PockError(head.problem + _other_loss_hint(g, "mse"))
            self.skip = {op.name for op in head.skipped}
            dl = self.grad_tensor(head.logits)
            if head.probs:          # the int8 softmax output: p = (q + 128) / 256
                self.emit("XENT_GRAD", "loss_xent", [head.probs], [dl], beta=float(head.beta), classes=head.classes)
            else:
                self.emit("XENT_LOGITS_GRAD", "loss_xent", [head.logits], [dl], classes=head.classes)
            self.grads[head.logits] = dl
        else:
            out = _mse_output(g)
            dl = self.grad_tensor(out)
            self.emit("MSE_GRAD", "loss_mse", [out], [dl], count=int(g.t(out).size))
            self.grads[out] = dl
            self.skip = {op.name for op in _delivery(g, integer_only=True)[1]}

    def build(self) -> list[Op]:
        self._loss()
        for op in reversed(self.g.ops):
            if op.name in self.skip or not any(o in self.grads for o in op.outputs):
                continue
            d = REGISTRY[op.kind]
            if not self.update_of(op) and not any(self.needs_grad(i) for i in d.activation_inputs(self.g, op)):
                continue
            if not has_gradient_rule(op.kind):
                raise PockError(no_gradient_message(self.g, op, self.loss))
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
    if loss == "xent":
        problem = classifier_head(g).problem
        if problem:
            raise PockError(problem + _other_loss_hint(g, "mse"))


# -- the loss's place in the graph ----------------------------------------------------------------

#: ops that only change how a model delivers its scores (dtype, shape), not what they are: the
#: loss reads the tensor before them and the backward pass never runs them
DELIVERY_OPS = ("DEQUANTIZE", "QUANTIZE", "RESHAPE", "INT8_TO_UINT8")


def _delivery(g: Graph, integer_only: bool = False) -> tuple[str, list[Op]]:
    """(the tensor before the delivery ops at the model's output, those ops from the output back).

    ``integer_only``: only the conversions to uint8 and int8 requantizations (for --loss mse, whose
    targets are real values: a float output keeps its DEQUANTIZE, whose gradient rule passes it)."""
    producers = g.producers()
    t, ops = g.outputs[0], []
    while t in producers:
        op = producers[t]
        src = g.t(op.inputs[0])
        if op.kind not in DELIVERY_OPS or (op.kind == "QUANTIZE" and src.dtype == "float32"):
            break
        if integer_only and (op.kind in ("DEQUANTIZE", "RESHAPE") or g.t(t).dtype not in ("int8", "uint8")):
            break
        ops.append(op)
        t = op.inputs[0]
    return t, ops


def _mse_output(g: Graph) -> str:
    """The tensor MSE_GRAD reads: the model's output, or for a uint8 output the int8 tensor it is
    converted from (the same real values with the exact x ^ 0x80 conversion; within half an output
    step with a rescale)."""
    return _delivery(g, integer_only=True)[0]


@dataclass
class ClassifierHead:
    """Where softmax cross-entropy attaches: the int8 logits its gradient is for, the int8 softmax
    output it reads (or "": it reads the logits), and the ops after the logits the backward skips."""

    logits: str = ""
    probs: str = ""
    beta: float = 1.0
    classes: int = 0
    skipped: list = field(default_factory=list)
    problem: str = ""


def classifier_head(g: Graph) -> ClassifierHead:
    """The classifier head of ``g`` for --loss xent, whatever dtype and shape the scores are delivered in:
    ... -> SOFTMAX [-> RESHAPE] [-> DEQUANTIZE | QUANTIZE to uint8]: the softmax's int8 output and logits;
    ... -> LOG_SOFTMAX [-> ...]: the logits before it; anything else ending in int8 scores (a
    FULLY_CONNECTED, CONV_2D, RESHAPE of logits, Keras from_logits=True): those logits."""
    out = g.t(g.outputs[0])
    name = f"{Path(g.source).name}" if g.source else "the model"
    if out.size != out.shape[-1] if out.shape else True:
        return ClassifierHead(problem=f"--loss xent needs a model whose output is one vector of class scores; "
                                      f"{name} outputs shape {list(out.shape)}")
    t, skipped = _delivery(g)
    producers = g.producers()
    op = producers.get(t)
    head = ClassifierHead(classes=int(out.size), skipped=list(skipped))
    if op is not None and op.kind in ("SOFTMAX", "LOG_SOFTMAX"):
        probs = g.t(t)
        q8 = probs.quant is not None and abs(probs.quant.s - 1 / 256) <= 1e-9 and probs.quant.zp == -128
        head.skipped.append(op)
        t = op.inputs[0]
        if op.kind == "SOFTMAX" and q8:
            head.probs, head.beta = probs.name, float(op.options.beta)
    elif g.inputs and tuple(g.t(g.inputs[0]).shape) == tuple(out.shape):
        return ClassifierHead(problem=f"--loss xent: {name} has no softmax and its output has the shape of its "
                                      f"input, {list(out.shape)} (an autoencoder or another regression model), "
                                      "not class scores")
    scores = g.t(t)
    if scores.dtype != "int8" or scores.quant is None or scores.quant.per_channel:
        return ClassifierHead(problem=f"--loss xent needs int8 class scores (logits or an int8 softmax) at the "
                                      f"end of {name}; its scores '{t}' are {scores.dtype}")
    if scores.size != head.classes:
        return ClassifierHead(problem=f"--loss xent needs one vector of {head.classes} class scores; "
                                      f"'{t}' has shape {list(scores.shape)}")
    head.logits = t
    return head


def has_gradient_rule(kind: str) -> bool:
    return type(REGISTRY[kind]).backward is not OpDef.backward


def _path_to_last_layer(g: Graph, start: str) -> list[Op]:
    """The ops from the one producing ``start`` back to the last parameterized layer (first inputs)."""
    producers, ops, t = g.producers(), [], start
    while t in producers:
        op = producers[t]
        ops.append(op)
        if op.kind in PARAM_KINDS:
            return ops
        acts = REGISTRY[op.kind].activation_inputs(g, op) if op.kind in REGISTRY else []
        if not acts:
            break
        t = acts[0]
    return []


def trainable_with(g: Graph, loss: str) -> bool:
    """Whether --loss ``loss`` can train at least the last layer's bias of ``g``: the loss attaches,
    and every op between it and the last CONV_2D / DEPTHWISE_CONV_2D / FULLY_CONNECTED has a
    gradient rule."""
    if loss == "xent":
        head = classifier_head(g)
        if head.problem:
            return False
        path = _path_to_last_layer(g, head.logits)
    else:
        path = _path_to_last_layer(g, _mse_output(g))
    return bool(path) and all(has_gradient_rule(op.kind) for op in path if op.kind not in PARAM_KINDS)


def _other_loss_hint(g: Graph, other: str) -> str:
    what = {"mse": "mean squared error against targets of the output's shape",
            "xent": "softmax cross-entropy, the default"}[other]
    return f"; use --loss {other} ({what})" if trainable_with(g, other) else ""


def no_gradient_message(g: Graph, op: Op, loss: str) -> str:
    """Why the backward pass cannot pass ``op``, and a change that works, if one does."""
    text = f"cannot train through {op.kind} '{op.name}' ({op.location.split(' (')[0]}): it has no gradient rule"
    if loss == "mse" and trainable_with(g, "xent"):
        return text + "; the model is a classifier: train it with --loss xent (softmax cross-entropy, the default)"
    at = {id(o): k for k, o in enumerate(g.ops)}.get(id(op), -1)
    later = [o.name for o in g.ops[at + 1:] if o.kind in PARAM_KINDS] if at >= 0 else []
    if later:
        return text + f"; train only layers after it ({', '.join(later)})"
    return text + "; no layer after it can train, so this model cannot be trained with this loss"

