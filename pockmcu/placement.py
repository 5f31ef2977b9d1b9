"""Placement: offsets in one arena for buffers with lifetimes. It sees only buffers (sizes and
first/last steps), as TFLite Micro's planner does.

Greedy placement with gap filling under several orderings and two fits (TFLite Micro's
greedy-by-size first-fit is one of them and is reported as the baseline); when the best is above
the lower bound, an exact branch-and-bound over first-fit orders (up to ``EXACT_MAX_BUFFERS``
buffers) or a seeded local search over orderings. The best is kept. The lower bound is the
largest number of bytes live at any one step: no placement of these lifetimes can use less.
"""

from __future__ import annotations

import random

from .lifetimes import Buffer, lower_bound

#: exact placement search (branch and bound) up to this many buffers
EXACT_MAX_BUFFERS = 20
#: node budget of the exact search before it settles for the best found
EXACT_NODE_LIMIT = 50_000
#: evaluations of the local search over placement orderings (large plans only)
SEARCH_ITERATIONS = 300
#: restarts of the local search (seed k starts from the k-th heuristic ordering)
SEARCH_RESTARTS = 10
#: work budget of the local search in buffer-conflict visits (about 2 s of Python): large plans get
#: fewer iterations, deterministically
SEARCH_WORK = 5_000_000


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
