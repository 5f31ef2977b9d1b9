"""Static memory plan: a schedule, lifetimes over it, offsets in one arena.

Three steps, each of which can only lower the arena:

1. **Schedule.** ``best_schedule`` looks for a topological order of the ops with
   a lower peak of live bytes (e.g. which branch of a residual block runs
   first, where a save or an update lands) by a beam-limited dynamic program
   over the sets of executed ops (exact when the graph is narrow). The order
   keeps every data dependency, the relative order of every op that touches a
   buffer written in place, the relative order of every op that reads or
   updates the same trainable parameter, the loss as the barrier between the
   forward and backward phases, and a deferred tail of updates
   (``--no-reorder``) at the end. ``plan_memory`` applies the order it picks
   to the schedule list it was given (and to ``g.ops``), so code generation
   runs what was planned; it keeps the given order unless the new one has a
   strictly lower peak.
2. **Lifetimes.** Every activation (and every op's scratch buffer) becomes a
   ``Buffer`` live from the step that writes it to the last step that reads
   it. Tensors that are the same bytes share one buffer: RESHAPE (``alias``),
   MASK_APPLY (``inplace``), and an op whose OpDef lists ``may_share_input``
   (element-wise kernels that read element k of every input before writing
   element k of the output) writes over an input that dies at that step.
3. **Placement.** Greedy placement with gap filling under several orderings
   and two fits (TFLite Micro's greedy-by-size first-fit is one of them and is
   reported as the baseline); when the best is above the lower bound, an
   exact branch-and-bound over first-fit orders (up to ``EXACT_MAX_BUFFERS``
   buffers) or a seeded local search over orderings. The best is kept.

The lower bound is the largest number of bytes live at any one step: no
placement of these lifetimes can use less.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from .ir import Graph, Op
from .ops import opdef

ALIGN = 4
#: exact placement search (branch and bound) up to this many buffers
EXACT_MAX_BUFFERS = 20
#: node budget of the exact search before it settles for the best found
EXACT_NODE_LIMIT = 50_000
#: states kept per depth by the schedule search (the search is exact while fewer exist)
SCHEDULE_BEAM = 48
#: evaluations of the local search over placement orderings (large plans only)
SEARCH_ITERATIONS = 300
#: restarts of the local search (seed k starts from the k-th heuristic ordering)
SEARCH_RESTARTS = 10
#: work budget of the local search in buffer-conflict visits (about 2 s of Python): large plans get
#: fewer iterations, deterministically
SEARCH_WORK = 5_000_000

UPDATE_KINDS = ("CONV_2D_WGRAD_UPDATE", "DEPTHWISE_CONV_2D_WGRAD_UPDATE", "FULLY_CONNECTED_WGRAD_UPDATE",
                "BIAS_UPDATE")
LOSS_KINDS = ("XENT_GRAD", "MSE_GRAD")


def align(n: int, a: int = ALIGN) -> int:
    return (n + a - 1) // a * a


@dataclass
class Buffer:
    name: str
    size: int            # bytes, aligned
    first: int           # first step it is live
    last: int            # last step it is live
    tensors: list[str] = field(default_factory=list)
    offset: int = -1
    kind: str = "activation"   # activation | scratch


@dataclass
class Plan:
    buffers: list[Buffer]
    tensor_buffer: dict[str, str]          # tensor name -> buffer name
    scratch: dict[str, str]                # op name -> scratch buffer name
    steps: list[str]                       # op names in schedule order
    arena_bytes: int
    lower_bound_bytes: int
    greedy_bytes: int                      # TFLM-style greedy-by-size on the same lifetimes
    strategy: str

    def buffer(self, name: str) -> Buffer:
        return next(b for b in self.buffers if b.name == name)

    def offset(self, tensor: str) -> int:
        return self._by_name[self.tensor_buffer[tensor]].offset

    def __post_init__(self) -> None:
        self._by_name = {b.name: b for b in self.buffers}

    def live_bytes(self) -> list[int]:
        return live_bytes(self.buffers, len(self.steps))


# -- lifetimes -------------------------------------------------------------------------------

class _Groups:
    """Union-find of tensors that are the same bytes."""

    def __init__(self) -> None:
        self.parent: dict[str, str] = {}

    def root(self, t: str) -> str:
        while self.parent.get(t, t) != t:
            t = self.parent[t]
        return t

    def join(self, child: str, into: str) -> None:
        self.parent[self.root(child)] = self.root(into)


def _fixed_groups(ops: list[Op]) -> _Groups:
    """Groups every schedule forces: RESHAPE outputs (alias) and in-place ops with their input 0."""
    gr = _Groups()
    for op in ops:
        d = opdef(op.kind)
        if d.alias or d.inplace:
            gr.join(op.outputs[0], op.inputs[0])
    return gr


def lifetimes(g: Graph, ops: list | None = None, share: bool = True
              ) -> tuple[list[Buffer], dict[str, str], dict[str, str]]:
    """Buffers with lifetimes for an op schedule (default: the graph's op order).

    With ``share``, an op whose OpDef lists ``may_share_input`` writes its output over input k
    when that input's buffer is last used at this step (and is big enough); such ops get
    ``attrs["writes_over_input"]`` (True or False) for this order, which the last call (the plan's)
    leaves in place for code generation.
    """
    ops = g.ops if ops is None else ops
    gr = _fixed_groups(ops)
    last_step = max(len(ops) - 1, 0)
    span: dict[str, list[int]] = {}
    sizes: dict[str, int] = {}
    members: dict[str, list[str]] = {}

    def touch(t: str, step: int) -> None:
        r = gr.root(t)
        s = span.setdefault(r, [step, step])
        s[0], s[1] = min(s[0], step), max(s[1], step)
        sizes[r] = max(sizes.get(r, 0), g.t(t).nbytes)
        if t not in members.setdefault(r, []):
            members[r].append(t)

    for t in g.inputs:
        touch(t, 0)
    for step, op in enumerate(ops):
        for t in op.inputs + op.outputs:
            if t and not g.t(t).is_const:
                touch(t, step)
    for t in g.outputs:
        touch(t, last_step)

    if share:
        pinned = {gr.root(t) for t in g.outputs}
        for step, op in enumerate(ops):
            shares = opdef(op.kind).shared_inputs(g, op)
            if not shares or not op.outputs:
                continue
            op.attrs["writes_over_input"] = False
            ro = gr.root(op.outputs[0])
            if span[ro][0] != step:
                continue
            for k in shares:
                if k >= len(op.inputs) or not op.inputs[k] or g.t(op.inputs[k]).is_const:
                    continue
                ri = gr.root(op.inputs[k])
                if ri == ro or span[ri][1] != step or ri in pinned or align(sizes[ri]) < align(sizes[ro]):
                    continue
                gr.parent[ro] = ri
                span[ri] = [span[ri][0], span[ro][1]]
                sizes[ri] = max(sizes[ri], sizes[ro])
                members[ri] += [t for t in members[ro] if t not in members[ri]]
                if ro in pinned:
                    pinned.add(ri)
                del span[ro], sizes[ro], members[ro]
                op.attrs["writes_over_input"] = True     # for kernels that work differently in place
                break

    buffers = [Buffer(name=r, size=align(sizes[r]), first=s[0], last=s[1], tensors=members[r])
               for r, s in span.items()]
    tensor_buffer = {t: r for r, ts in members.items() for t in ts}
    scratch: dict[str, str] = {}
    for step, op in enumerate(ops):
        n = opdef(op.kind).scratch_bytes(g, op)
        if n > 0:
            name = f"{op.name}/scratch"
            buffers.append(Buffer(name=name, size=align(n), first=step, last=step, kind="scratch"))
            scratch[op.name] = name
    return buffers, tensor_buffer, scratch


def live_bytes(buffers: list[Buffer], n_steps: int) -> list[int]:
    """Bytes live at each step."""
    live = [0] * max(n_steps, 1)
    for b in buffers:
        for s in range(b.first, b.last + 1):
            live[s] += b.size
    return live


def lower_bound(buffers: list[Buffer], n_steps: int) -> int:
    return max(live_bytes(buffers, n_steps))


# -- schedule --------------------------------------------------------------------------------

def _params_touched(g: Graph, op: Op) -> set[str]:
    """Constant tensors (weights, biases) an op reads or updates, directly or through attrs['layer']."""
    out = {t for t in op.inputs if t and t in g.tensors and g.t(t).is_const}
    for v in op.attrs.values():
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
    gr = _fixed_groups(ops)
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
        # an op naming a parameter in attrs['weights'] / attrs['bias'] updates it
        written |= {v for k, v in op.attrs.items() if k in ("weights", "bias") and isinstance(v, str)}
    for p in written:
        chain(ptouch.get(p, []))
    # a streamed stage (pockmcu/stream.py) runs tile after tile, each tile's layers in order, so
    # every tile's buffers die before the next tile starts
    chain([i for i, op in enumerate(ops) if "tile" in op.attrs or op.kind.startswith("TILE_")])
    # the loss separates the forward and backward phases
    for li, op in enumerate(ops):
        if op.kind in LOSS_KINDS:
            for i in range(li):
                preds[li] |= 1 << i
            for j in range(li + 1, n):
                preds[j] |= 1 << li
    # a deferred tail of updates (--no-reorder) stays the tail, in order
    k = n
    while k > 0 and ops[k - 1].kind in UPDATE_KINDS:
        k -= 1
    if k < n:
        head = (1 << k) - 1
        for j in range(k, n):
            preds[j] |= head
        chain(list(range(k, n)))
    return preds


def schedule_peak(g: Graph, ops: list[Op]) -> int:
    buffers, _, _ = lifetimes(g, ops)
    return lower_bound(buffers, len(ops))


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
    gr = _fixed_groups(ops)
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
    scratch = [align(opdef(op.kind).scratch_bytes(g, op)) for op in ops]
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


# -- placement -------------------------------------------------------------------------------

def _conflicts(buffers: list[Buffer]) -> list[list[int]]:
    n = len(buffers)
    idx = sorted(range(n), key=lambda i: buffers[i].first)
    conf: list[list[int]] = [[] for _ in range(n)]
    for a_pos, i in enumerate(idx):
        bi = buffers[i]
        for j in idx[a_pos + 1:]:
            if buffers[j].first > bi.last:
                break
            conf[i].append(j)
            conf[j].append(i)
    return conf


def place(buffers: list[Buffer], order: list[int], fit: str = "first",
          conf: list[list[int]] | None = None) -> tuple[list[int], int]:
    """Greedy placement with gap filling in the given order; returns offsets and arena size.

    ``fit="first"``: the lowest gap that holds the buffer (TFLite Micro); ``"best"``: the
    smallest such gap (lowest on ties), else on top.
    """
    conf = _conflicts(buffers) if conf is None else conf
    offsets = [-1] * len(buffers)
    end = 0
    for i in order:
        size = buffers[i].size
        busy = sorted((offsets[j], offsets[j] + buffers[j].size) for j in conf[i] if offsets[j] >= 0)
        at, best, best_gap = 0, -1, None
        for lo, hi in busy:
            if at + size <= lo:
                if fit == "first":
                    best = at
                    break
                if best_gap is None or lo - at < best_gap:
                    best, best_gap = at, lo - at
            at = max(at, hi)
        offsets[i] = best if best >= 0 else at
        end = max(end, offsets[i] + size)
    return offsets, end


ORDERINGS = {
    "greedy-by-size": lambda b: (-b.size, b.first),
    "longest-lifetime": lambda b: (-(b.last - b.first), -b.size),
    "size-x-lifetime": lambda b: (-b.size * (b.last - b.first + 1), -b.size),
    "first-use": lambda b: (b.first, -b.size),
    "last-use": lambda b: (-b.last, -b.size),
}


def exact_place(buffers: list[Buffer], upper: int | None = None, node_limit: int = EXACT_NODE_LIMIT
                ) -> tuple[list[int] | None, int, bool]:
    """The smallest arena for these lifetimes: branch and bound over first-fit orders.

    Every placement can be lowered to one that first-fit produces when buffers are taken in
    order of their offsets, so the search only extends orders whose first-fit offsets do not
    decrease (ties by index). Returns (offsets or None if none beats ``upper``, arena, proven):
    ``proven`` is False when the node budget ran out.
    """
    n = len(buffers)
    if n == 0:
        return [], 0, True
    size = [b.size for b in buffers]
    conf = _conflicts(buffers)
    lb = lower_bound(buffers, max(b.last for b in buffers) + 1)
    best_end = upper if upper is not None else sum(size) + 1
    best_off: list[int] | None = None
    offsets = [-1] * n
    nodes = 0
    by_size = sorted(range(n), key=lambda i: -size[i])
    first = [b.first for b in buffers]
    last = [b.last for b in buffers]
    n_steps = max(last) + 1

    def first_fit(i: int) -> int:
        at = 0
        for lo, hi in sorted((offsets[j], offsets[j] + size[j]) for j in conf[i] if offsets[j] >= 0):
            if at + size[i] <= lo:
                break
            at = max(at, hi)
        return at

    def dfs(count: int, prev: tuple[int, int], end: int) -> bool:
        nonlocal best_end, best_off, nodes
        nodes += 1
        if nodes > node_limit:
            return True
        if count == n:
            if end < best_end:
                best_end, best_off = end, list(offsets)
            return best_end <= lb
        remaining = [i for i in by_size if offsets[i] < 0]
        floor = max(prev[0], 0)
        if floor + size[remaining[0]] >= best_end:
            return False
        # every remaining buffer goes at or above ``floor``: at each step, the bytes above the floor
        # (remaining ones plus the parts of placed ones) must fit under the best arena
        need = [0] * n_steps
        for i in range(n):
            o = offsets[i]
            above = size[i] if o < 0 else max(0, o + size[i] - max(o, floor))
            if above:
                for t in range(first[i], last[i] + 1):
                    need[t] += above
        if floor + max(need) >= best_end:
            return False
        cands = []
        for i in remaining:
            off = first_fit(i)
            if (off, i) < prev or max(end, off + size[i]) >= best_end:
                continue
            cands.append((off, i))
        cands.sort()
        for off, i in cands:
            if max(end, off + size[i]) >= best_end:
                continue
            offsets[i] = off
            stop = dfs(count + 1, (off, i), max(end, off + size[i]))
            offsets[i] = -1
            if stop:
                return True
        return False

    if best_end > lb:
        dfs(0, (-1, -1), 0)
    return best_off, best_end, nodes <= node_limit


def _local_search(buffers: list[Buffer], order: list[int], arena: int, lb: int, conf, seed: int = 0,
                  iterations: int | None = None) -> tuple[list[int], list[int], int]:
    """Seeded perturbations of the best order (move a buffer that reaches above the lower bound
    earlier, or swap two); keeps any order that is not worse by (arena, bytes above the lower
    bound). Deterministic: stops at the lower bound or after ``iterations`` placements."""
    rng = random.Random(seed)
    sizes = [b.size for b in buffers]

    def score(off: list[int], end: int) -> tuple[int, int]:
        return end, sum(max(0, o + s - lb) for o, s in zip(off, sizes))

    best_order = list(order)
    best_off, best_end = place(buffers, best_order, "first", conf)
    best_score = score(best_off, best_end)
    for _ in range(SEARCH_ITERATIONS if iterations is None else iterations):
        if best_end <= lb:
            break
        cand = list(best_order)
        high = [i for i in range(len(buffers)) if best_off[i] + sizes[i] > lb]
        if high and rng.random() < 0.7:
            i = rng.choice(high)
            pos = cand.index(i)
            cand.pop(pos)
            cand.insert(rng.randrange(0, pos + 1), i)
        else:
            a, b = rng.randrange(len(cand)), rng.randrange(len(cand))
            cand[a], cand[b] = cand[b], cand[a]
        off, end = place(buffers, cand, "first", conf)
        sc = score(off, end)
        if sc <= best_score:
            best_order, best_off, best_end, best_score = cand, off, end, sc
    return best_order, best_off, best_end


def place_buffers(buffers: list[Buffer], n_steps: int) -> tuple[list[int], int, int, str]:
    """Offsets for the buffers: (offsets, arena, greedy-by-size arena, strategy name)."""
    lb = lower_bound(buffers, n_steps)
    conf = _conflicts(buffers)
    results: dict[str, tuple[list[int], int, list[int]]] = {}
    for name, key in ORDERINGS.items():
        order = sorted(range(len(buffers)), key=lambda i: key(buffers[i]))
        for fit in ("first", "best"):
            off, end = place(buffers, order, fit, conf)
            results[name if fit == "first" else f"{name}/best-fit"] = (off, end, order)
            if end <= lb:
                break
        if results[name][1] <= lb:
            break
    greedy = results["greedy-by-size"][1]
    names = list(results)
    strategy = min(results, key=lambda k: (results[k][1], names.index(k)))
    offsets, arena, order = results[strategy]
    if arena > lb and len(buffers) <= EXACT_MAX_BUFFERS:
        off, end, proven = exact_place(buffers, upper=arena)
        if off is not None and end < arena:
            offsets, arena, strategy = off, end, "exact" if proven else "branch-and-bound"
        elif proven:
            strategy += " (proven optimal)"
    elif arena > lb:
        starts = [order] + [r[2] for k, r in results.items() if k != strategy]
        cost = max(1, len(buffers) + sum(len(c) for c in conf))
        per_restart = max(20, min(SEARCH_ITERATIONS, SEARCH_WORK // cost // SEARCH_RESTARTS))
        for seed in range(SEARCH_RESTARTS):
            _, off, end = _local_search(buffers, starts[seed % len(starts)], arena, lb, conf, seed=seed,
                                        iterations=per_restart)
            if end < arena:
                offsets, arena, strategy = off, end, "local-search"
            if arena <= lb:
                break
    return offsets, arena, greedy, strategy


# -- the plan --------------------------------------------------------------------------------

def plan_memory(g: Graph, schedule: list | None = None, reorder: bool = True, share: bool = True) -> Plan:
    """Plan ``schedule`` (default ``g.ops``).

    With ``reorder``, a valid order with a strictly lower peak replaces the order of the given
    list in place (and ``g.ops`` follows the order of its ops in it), so the code generated from
    those lists runs the planned order. ``share``: in-place outputs of ``may_share_input`` ops.
    """
    ops = g.ops if schedule is None else schedule
    if reorder and len(ops) > 2:
        new = best_schedule(g, ops)
        if [id(o) for o in new] != [id(o) for o in ops] and schedule_peak(g, new) < schedule_peak(g, ops):
            ops[:] = new
            if ops is not g.ops:
                pos = {id(o): k for k, o in enumerate(ops)}
                if all(id(o) in pos for o in g.ops):
                    g.ops[:] = sorted(g.ops, key=lambda o: pos[id(o)])
    buffers, tensor_buffer, scratch = lifetimes(g, ops, share)
    offsets, arena, greedy, strategy = place_buffers(buffers, len(ops))
    for b, off in zip(buffers, offsets):
        b.offset = off
    return Plan(buffers=buffers, tensor_buffer=tensor_buffer, scratch=scratch,
                steps=[op.name for op in ops], arena_bytes=arena,
                lower_bound_bytes=lower_bound(buffers, len(ops)), greedy_bytes=greedy, strategy=strategy)


def check_plan(plan: Plan) -> None:
    """Assert no two buffers live at the same step overlap in the arena (used by tests)."""
    bs = plan.buffers
    for i, a in enumerate(bs):
        assert 0 <= a.offset and a.offset + a.size <= plan.arena_bytes, a
        for b in bs[i + 1:]:
            if a.first <= b.last and b.first <= a.last:
                assert a.offset + a.size <= b.offset or b.offset + b.size <= a.offset, (a, b)
