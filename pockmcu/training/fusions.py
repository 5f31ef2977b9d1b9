"""Fusion passes over the training graph. Each takes a ``TrainGraph`` and returns a new one; the
gradient rules (ops/*.py ``backward``) stay plain, and each fusion is switched from the compile
options (compiler.TrainOptions).

``fuse_mean_backward``: a 1x1 CONV_2D whose output only feeds a spatial mean (MEAN over H, W, or an
average pool whose one window is the whole input). Unfused, the mean's backward writes its broadcast
gradient (N x H x W x C floats: 80 KB for MobileNetV2's last conv), which MASK_APPLY, BIAS_UPDATE and
CONV_2D_GRAD_INPUT then read. Fused, one op (CONV_1X1_GRAD_FROM_MEAN) forms (mask ? g / (H W) : 0)
where the bias update and the input gradient read it, with the same float operations in the same
order: bit-identical, and the broadcast gradient never exists.
"""

from __future__ import annotations

from dataclasses import replace

from ..ir import Op
from ..ops.base import make_op, operand, option_items
from ..ops.conv import is_1x1, update_coefs
from .graph import TrainGraph


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
