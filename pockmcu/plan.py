"""Static memory plan: a schedule, lifetimes over it, offsets in one arena.

Three passes, each in its own module, each of which can only lower the arena:

1. **Schedule** (``schedule.py``): a valid order of the ops with a lower peak of live bytes.
2. **Lifetimes** (``lifetimes.py``): every activation and scratch buffer with its first and
   last step; tensors that are the same bytes share a buffer.
3. **Placement** (``placement.py``): offsets for the buffers, at the lower bound where the
   search reaches it; it sees only buffers.

``plan_memory`` reads the graph and the schedule it is given and returns a new ``Plan`` holding
the order it chose (``Plan.schedule``); it changes neither. The compiler builds the graph and
training schedule that code generation runs from that order.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .ir import Graph, Op
from .lifetimes import Buffer, lifetimes, live_bytes, lower_bound
from .placement import place_buffers
from .schedule import best_schedule, schedule_peak


@dataclass
class Plan:
    buffers: list[Buffer]
    tensor_buffer: dict[str, str]          # tensor name -> buffer name
    scratch: dict[str, str]                # op name -> scratch buffer name
    arena_bytes: int
    lower_bound_bytes: int
    greedy_bytes: int                      # TFLM-style greedy-by-size on the same lifetimes
    strategy: str
    schedule: list[Op] = field(default_factory=list)             # the ops in the planned order
    writes_over_input: frozenset[str] = frozenset()              # ops writing over a dying input

    @property
    def steps(self) -> list[str]:
        """Op names in schedule order."""
        return [op.name for op in self.schedule]

    def buffer(self, name: str) -> Buffer:
        return self._by_name[name]

    def offset(self, tensor: str) -> int:
        return self._by_name[self.tensor_buffer[tensor]].offset

    def __post_init__(self) -> None:
        self._by_name = {b.name: b for b in self.buffers}

    def live_bytes(self) -> list[int]:
        return live_bytes(self.buffers, len(self.steps))


def plan_memory(g: Graph, schedule: list | None = None, reorder: bool = True, share: bool = True) -> Plan:
    """Plan ``schedule`` (default ``g.ops``).

    With ``reorder``, a valid order with a strictly lower peak replaces the given one in the
    returned plan (``Plan.schedule``). ``share``: in-place outputs of ``shared_inputs`` ops.
    """
    ops = list(g.ops if schedule is None else schedule)
    if reorder and len(ops) > 2:
        new = best_schedule(g, ops)
        if [id(o) for o in new] != [id(o) for o in ops] and schedule_peak(g, new) < schedule_peak(g, ops):
            ops = new
    lt = lifetimes(g, ops, share)          # new buffers: placement writes their offsets
    buffers = lt.buffers
    offsets, arena, greedy, strategy = place_buffers(buffers, len(ops))
    for b, off in zip(buffers, offsets):
        b.offset = off
    return Plan(buffers=buffers, tensor_buffer=lt.tensor_buffer, scratch=lt.scratch, arena_bytes=arena,
                lower_bound_bytes=lower_bound(buffers, len(ops)), greedy_bytes=greedy, strategy=strategy,
                schedule=ops, writes_over_input=lt.writes_over_input)


def check_plan(plan: Plan) -> None:
    """Assert no two buffers live at the same step overlap in the arena (used by tests)."""
    bs = plan.buffers
    for i, a in enumerate(bs):
        assert 0 <= a.offset and a.offset + a.size <= plan.arena_bytes, a
        for b in bs[i + 1:]:
            if a.first <= b.last and b.first <= a.last:
                assert a.offset + a.size <= b.offset or b.offset + b.size <= a.offset, (a, b)
