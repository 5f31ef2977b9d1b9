"""Static memory plan: lifetimes over one op schedule, offsets in one arena.

Every activation (and every op's scratch buffer) becomes a ``Buffer`` that is
live from the step that writes it to the last step that reads it. Tensors
that are the same bytes (RESHAPE output and input) share one buffer. Offsets
come from greedy placement with gap filling, tried under several orderings
(TFLite Micro's greedy-by-size is one of them); the best is kept.

The lower bound is the largest number of bytes live at any one step: no
placement of these lifetimes can use less.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .ir import Graph
from .ops import opdef

ALIGN = 4


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
        live = [0] * max(len(self.steps), 1)
        for b in self.buffers:
            for s in range(b.first, b.last + 1):
                live[s] += b.size
        return live


def lifetimes(g: Graph, ops: list | None = None) -> tuple[list[Buffer], dict[str, str], dict[str, str]]:
    """Buffers with lifetimes for an op schedule (default: the graph's op order)."""
    ops = g.ops if ops is None else ops
    parent: dict[str, str] = {}

    def root(t: str) -> str:
        while parent.get(t, t) != t:
            t = parent[t]
        return t

    for op in ops:
        d = opdef(op.kind)
        if d.alias or d.inplace:
            parent[root(op.outputs[0])] = root(op.inputs[0])

    last_step = max(len(ops) - 1, 0)
    span: dict[str, list[int]] = {}
    sizes: dict[str, int] = {}
    members: dict[str, list[str]] = {}

    def touch(t: str, step: int) -> None:
        r = root(t)
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


def lower_bound(buffers: list[Buffer], n_steps: int) -> int:
    live = [0] * max(n_steps, 1)
    for b in buffers:
        for s in range(b.first, b.last + 1):
            live[s] += b.size
    return max(live) if live else 0


def place(buffers: list[Buffer], order: list[int]) -> tuple[list[int], int]:
    """Greedy placement with gap filling in the given order; returns offsets and arena size."""
    offsets = [-1] * len(buffers)
    placed: list[int] = []
    for i in order:
        b = buffers[i]
        busy = sorted((offsets[j], offsets[j] + buffers[j].size) for j in placed
                      if buffers[j].first <= b.last and b.first <= buffers[j].last)
        at = 0
        for lo, hi in busy:
            if at + b.size <= lo:
                break
            at = max(at, hi)
        offsets[i] = at
        placed.append(i)
    end = max((offsets[i] + buffers[i].size for i in range(len(buffers))), default=0)
    return offsets, end


ORDERINGS = {
    "greedy-by-size": lambda b: (-b.size, b.first),
    "longest-lifetime": lambda b: (-(b.last - b.first), -b.size),
    "size-x-lifetime": lambda b: (-b.size * (b.last - b.first + 1), -b.size),
    "first-use": lambda b: (b.first, -b.size),
    "last-use": lambda b: (-b.last, -b.size),
}


def plan_memory(g: Graph, schedule: list | None = None) -> Plan:
    ops = g.ops if schedule is None else schedule
    buffers, tensor_buffer, scratch = lifetimes(g, ops)
    results = {}
    for name, key in ORDERINGS.items():
        order = sorted(range(len(buffers)), key=lambda i: key(buffers[i]))
        results[name] = place(buffers, order)
    best = min(results, key=lambda k: (results[k][1], list(ORDERINGS).index(k)))
    offsets, arena = results[best]
    for b, off in zip(buffers, offsets):
        b.offset = off
    return Plan(buffers=buffers, tensor_buffer=tensor_buffer, scratch=scratch,
                steps=[op.name for op in ops], arena_bytes=arena,
                lower_bound_bytes=lower_bound(buffers, len(ops)),
                greedy_bytes=results["greedy-by-size"][1], strategy=best)


def check_plan(plan: Plan) -> None:
    """Assert no two buffers live at the same step overlap in the arena (used by tests)."""
    bs = plan.buffers
    for i, a in enumerate(bs):
        assert 0 <= a.offset and a.offset + a.size <= plan.arena_bytes, a
        for b in bs[i + 1:]:
            if a.first <= b.last and b.first <= a.last:
                assert a.offset + a.size <= b.offset or b.offset + b.size <= a.offset, (a, b)
