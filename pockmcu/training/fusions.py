"""Fusion passes over the training graph. Each takes a ``TrainGraph`` and returns a new one; the
gradient rules (ops/*.py ``backward``) stay plain, and each is switched by ``Fusions`` (the compile
options' ``TrainOptions.fusions``; ``pockmcu gen --train --no-fusion NAME``). Every pass keeps the
bits of a training step: only RAM changes.

``fuse_mean_backward``: a 1x1 CONV_2D whose output only feeds a spatial mean (MEAN over H, W, or an
average pool whose one window is the whole input). Unfused, the mean's backward writes its broadcast
gradient (N x H x W x C floats: 80 KB for MobileNetV2's last conv), which MASK_APPLY, BIAS_UPDATE and
CONV_2D_GRAD_INPUT then read. Fused, one op (CONV_1X1_GRAD_FROM_MEAN) forms (mask ? g / (H W) : 0)
where the bias update and the input gradient read it, with the same float operations in the same
order: bit-identical, and the broadcast gradient never exists.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..ir import Op
from ..ops.base import make_op, operand, option_items
from ..ops.conv import is_1x1, update_coefs
from .graph import TrainGraph


@dataclass(frozen=True)
class Fusions:
    """Which training-graph passes run (all by default)."""

    mean_backward: bool = True        # fuse_mean_backward
    in_place_depthwise: bool = True   # depthwise_grad_in_place
    split_storage: bool = True        # store_split_channels

    #: the names ``--no-fusion`` takes
    NAMES = ("mean-backward", "in-place-depthwise", "split-storage")

    def without(self, names) -> "Fusions":
        return replace(self, **{n.replace("-", "_"): False for n in names})


def apply_fusions(tg: TrainGraph, fusions: Fusions) -> TrainGraph:
    """The passes ``fusions`` asks for, in order."""
    if fusions.mean_backward:
        tg = fuse_mean_backward(tg)
    if fusions.in_place_depthwise:
        tg = depthwise_grad_in_place(tg)
    if fusions.split_storage:
        tg = store_split_channels(tg)
    return tg


def depthwise_grad_in_place(tg: TrainGraph) -> TrainGraph:
    """Let the input gradient of a stride-1, multiplier-1 depthwise conv be written over its output
    gradient when that dies there (the planner decides; the row-by-row kernel then runs with a
    small ring of rows as scratch, same bits). That halves the peak of a depthwise backward step."""
    sched = [replace_options(op, in_place=True) if op.kind == "DEPTHWISE_CONV_2D_GRAD_INPUT" else op
             for op in tg.schedule]
    return replace(tg, schedule=sched)


def store_split_channels(tg: TrainGraph) -> TrainGraph:
    """Keep in RAM only the trained input channels of a CONV_2D weight whose update trains the first
    k < C_in of them (rows of k per filter tap; the frozen channels are read from flash):
    ``TrainGraph.head_channels``. Without it the whole tensor is copied to RAM."""
    split = set()
    for op in tg.schedule:
        if op.kind == "CONV_2D_WGRAD_UPDATE":
            w = tg.graph.t(op.options.weights)
            if op.options.channel_begin == 0 and op.options.channels < w.shape[-1]:
                split.add(op.options.weights)
    return replace(tg, split_tensors=frozenset(split))


def replace_options(op: Op, **changes) -> Op:
    """A copy of ``op`` with some options changed."""
    return replace(op, options=replace(op.options, **changes))


def fuse_mean_backward(tg: TrainGraph) -> TrainGraph:
    g = tg.graph
    sched = tg.schedule
    producer = {t: op for op in sched for t in op.outputs}
    readers: dict[str, list[Op]] = {}
    for op in sched:
        for t in op.inputs:
            if t:
                readers.setdefault(t, []).append(op)
    fwd_producer = {t: op for op in tg.forward for t in op.outputs}
    drop: set[int] = set()
    fused_at: dict[int, Op] = {}
    dead_tensors: set[str] = set()
    for mean in sched[tg.n_forward:]:
        if not option_items(mean).get("spatial_mean"):
            continue
        layer = option_items(mean)["layer"]          # the MEAN or the global average pool
        conv = fwd_producer.get(layer.inputs[0])
        broadcast = mean.outputs[0]
        apply = readers.get(broadcast, [])
        if conv is None or conv.kind != "CONV_2D" or not is_1x1(g, conv) or len(apply) != 1:
            continue
        apply = apply[0]
        mask = apply.inputs[1] if apply.kind == "MASK_APPLY" else None
        if mask is None or producer.get(mask) is None or producer[mask].inputs[0] != conv.outputs[0]:
            continue
        dz = apply.outputs[0]
        users = readers.get(dz, [])
        bias_updates = [u for u in users if u.kind == "BIAS_UPDATE" and u.options.bias == operand(conv, "bias")]
        grad_inputs = [u for u in users if u.kind == "CONV_2D_GRAD_INPUT" and u.options.layer is conv]
        if len(bias_updates) + len(grad_inputs) != len(users) or len(bias_updates) > 1 or len(grad_inputs) > 1:
            continue                      # a weight gradient (or anything else) reads the broadcast gradient
        _, bcoef = update_coefs(g, conv, tg.spec.qas)
        fused = make_op("CONV_1X1_GRAD_FROM_MEAN", f"{conv.name}_grad_from_{layer.name}", [mean.inputs[-1], mask],
                        list(grad_inputs[0].outputs) if grad_inputs else [], "training graph",
                        layer=conv, bias=operand(conv, "bias") if bias_updates else None, coef=bcoef)
        drop |= {id(mean), id(apply)} | {id(u) for u in users}
        fused_at[id(apply)] = fused
        dead_tensors |= {broadcast, dz}
    if not fused_at:
        return tg
    schedule = []
    for op in sched:
        if id(op) in fused_at:
            schedule.append(fused_at[id(op)])
        elif id(op) not in drop:
            schedule.append(op)
    tensors = {k: v for k, v in g.tensors.items() if k not in dead_tensors}
    return replace(tg, schedule=schedule, graph=replace(g, tensors=tensors))
