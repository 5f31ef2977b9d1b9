"""The schedule: one valid order of the ops with a low peak of live bytes.

``best_schedule`` looks for a topological order with a lower peak (which branch of a residual
block runs first, where a save or an update lands) by a beam-limited dynamic program over the sets
of executed ops (exact when the graph is narrow). The order keeps every data dependency, the
relative order of every op that touches a buffer written in place, the relative order of every op
that reads or updates the same trainable parameter, the loss as the barrier between the forward
and backward phases, and a deferred tail of updates (``--no-reorder``) at the end.
"""

from __future__ import annotations

from .cmsis_scratch import planned_scratch_bytes
from .ir import Graph, Op
from .lifetimes import align, fixed_groups, lifetimes, lower_bound
from .ops import opdef
from .ops.base import option_items

#: states kept per depth by the schedule search (the search is exact while fewer exist)
SCHEDULE_BEAM = 48


def _params_touched(g: Graph, op: Op) -> set[str]:
    """Constant tensors (weights, biases) an op reads or updates, directly or through its options' layer."""
    out = {t for t in op.inputs if t and t in g.tensors and g.t(t).is_const}
    for v in option_items(op).values():
        if isinstance(v, str) and v in g.tensors and g.t(v).is_const:
            out.add(v)
        elif isinstance(v, Op):
            out |= {t for t in v.inputs if t and t in g.tensors and g.t(t).is_const}
    return out


def dependencies(g: Graph, ops: list[Op]) -> list[int]:
    """Predecessor bit masks: which ops must run before op i in any valid reordering."""
    n = len(ops)
    preds = [0] * n
    producer: dict[str, int] = {}
    for i, op in enumerate(ops):
        for t in op.inputs:
            if t in producer:
                preds[i] |= 1 << producer[t]
        for t in op.outputs:
            producer[t] = i

    def chain(idx: list[int]) -> None:
        for a, b in zip(idx, idx[1:]):
            preds[b] |= 1 << a

    # buffers written in place or aliased: keep every toucher in its order
    gr = fixed_groups(ops)
    touch: dict[str, list[int]] = {}
    for i, op in enumerate(ops):
        for t in dict.fromkeys(x for x in op.inputs + op.outputs if x and not g.t(x).is_const):
            touch.setdefault(gr.root(t), []).append(i)
    shared = {gr.root(t) for t in gr.parent}
    for r, idx in touch.items():
        if r in shared:
            chain(sorted(set(idx)))
    # trainable parameters: readers and updaters keep their order
    ptouch: dict[str, list[int]] = {}
    written: set[str] = set()
    for i, op in enumerate(ops):
        ps = _params_touched(g, op)
        for p in ps:
            ptouch.setdefault(p, []).append(i)
        # an op naming a parameter in its options' weights / bias updates it
        written |= {v for k, v in option_items(op).items() if k in ("weights", "bias") and isinstance(v, str)}
    for p in written:
        chain(ptouch.get(p, []))
    # a streamed stage (pockmcu/stream.py) runs tile after tile, each tile's layers in order, so
    # every tile's buffers die before the next tile starts
    chain([i for i, op in enumerate(ops) if op.tile is not None or op.kind.startswith("TILE_")])
    # the loss separates the forward and backward phases
    for li, op in enumerate(ops):
        if opdef(op.kind).role == "loss":
            for i in range(li):
                preds[li] |= 1 << i
            for j in range(li + 1, n):
                preds[j] |= 1 << li
    # a deferred tail of updates (--no-reorder) stays the tail, in order
    k = n
    while k > 0 and opdef(ops[k - 1].kind).role == "update":
        k -= 1
    if k < n:
        head = (1 << k) - 1
        for j in range(k, n):
            preds[j] |= head
        chain(list(range(k, n)))
    return preds


def schedule_peak(g: Graph, ops: list[Op]) -> int:
    lt = lifetimes(g, ops)
    return lower_bound(lt.buffers, len(ops))


def best_schedule(g: Graph, ops: list[Op], beam: int = SCHEDULE_BEAM) -> list[Op]:
    """A valid reordering of ``ops`` with the lowest peak of live bytes the search finds.

    Dynamic programming over sets of executed ops (bit masks), one depth per step; each state
    keeps the lowest (peak so far, live bytes now) path reaching it; at most ``beam`` states per
    depth survive (all of them for narrow graphs, which makes the search exact there). The
    memory model is the one of ``lifetimes`` without ``may_share_input`` (which depends on the
    order): a buffer is live from the first op touching it to the last; graph inputs from the
    start, graph outputs to the end; each op's scratch at its own step.
    """
    n = len(ops)
    if n < 3:
        return list(ops)
    preds = dependencies(g, ops)
    gr = fixed_groups(ops)
    gid: dict[str, int] = {}
    gsize: list[int] = []
    gmask: list[int] = []
    op_groups: list[list[int]] = []
    for i, op in enumerate(ops):
        mine = []
        for t in op.inputs + op.outputs:
            if not t or g.t(t).is_const:
                continue
            r = gr.root(t)
            if r not in gid:
                gid[r] = len(gsize)
                gsize.append(0)
                gmask.append(0)
            k = gid[r]
            gsize[k] = max(gsize[k], align(g.t(t).nbytes))
            gmask[k] |= 1 << i
            if k not in mine:
                mine.append(k)
        op_groups.append(mine)
    opened0 = {gid[gr.root(t)] for t in g.inputs if gr.root(t) in gid}
    pinned = {gid[gr.root(t)] for t in g.outputs if gr.root(t) in gid}
    # --kernels cmsis-nn: what Arm's kernel asks for (cmsis_scratch.py)
    scratch = [align(planned_scratch_bytes(g, op, opdef(op.kind).scratch_bytes(g, op, False))) for op in ops]
    succs: list[list[int]] = [[] for _ in range(n)]
    for i, p in enumerate(preds):
        for j in range(i):
            if (p >> j) & 1:
                succs[j].append(i)
    ready0 = sum(1 << i for i in range(n) if preds[i] == 0)
    live0 = sum(gsize[k] for k in opened0)
    # state: mask -> (peak, live, order_key, parent_mask, op, ready mask)
    layer: dict[int, tuple] = {0: (live0, live0, 0, -1, -1, ready0)}
    history: list[dict[int, tuple]] = []
    for _depth in range(n):
        nxt: dict[int, tuple] = {}
        for mask, (peak, live, okey, _pm, _po, ready) in layer.items():
            rest = ready
            while rest:
                bit = rest & -rest
                rest ^= bit
                v = bit.bit_length() - 1
                after = mask | bit
                new = freed = 0
                for k in op_groups[v]:
                    if not (gmask[k] & mask) and k not in opened0:
                        new += gsize[k]
                    if not (gmask[k] & ~after) and k not in pinned:
                        freed += gsize[k]
                step = live + new + scratch[v]
                rdy = ready ^ bit
                for w in succs[v]:
                    if not preds[w] & ~after:
                        rdy |= 1 << w
                cand = (max(peak, step), live + new - freed, okey + v, mask, v, rdy)
                old = nxt.get(after)
                if old is None or cand[:3] < old[:3]:
                    nxt[after] = cand
        if len(nxt) > beam:
            keep = sorted(nxt.items(), key=lambda kv: kv[1][:3])[:beam]
            nxt = dict(keep)
        history.append(nxt)
        layer = nxt
    full = (1 << n) - 1
    if full not in layer:
        return list(ops)
    order = []
    mask = full
    for depth in range(n - 1, -1, -1):
        _, _, _, pm, v, _ = history[depth][mask]
        order.append(v)
        mask = pm
    order.reverse()
    return [ops[i] for i in order]
