"""Lifetimes: every activation and scratch buffer of a schedule, live from the step that writes
it to the last step that reads it.

Tensors that are the same bytes share one buffer: RESHAPE (``alias``), MASK_APPLY (``inplace``),
and an op whose OpDef lists ``shared_inputs`` (element-wise kernels that read element k of every
input before writing element k of the output) writes over an input that dies at that step. Which
ops write over an input is part of the result (``Lifetimes.writes_over_input``), decided here and
read by code generation; nothing is written into the ops.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .cmsis_scratch import planned_scratch_bytes
from .ir import Graph, Op
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


@dataclass(frozen=True)
class Lifetimes:
    buffers: list[Buffer]
    tensor_buffer: dict[str, str]          # tensor name -> buffer name
    scratch: dict[str, str]                # op name -> scratch buffer name
    writes_over_input: frozenset[str]      # ops whose output shares the buffer of a dying input


class Groups:
    """Union-find of tensors that are the same bytes."""

    def __init__(self) -> None:
        self.parent: dict[str, str] = {}

    def root(self, t: str) -> str:
        while self.parent.get(t, t) != t:
            t = self.parent[t]
        return t

    def join(self, child: str, into: str) -> None:
        self.parent[self.root(child)] = self.root(into)


def fixed_groups(ops: list[Op]) -> Groups:
    """Groups every schedule forces: RESHAPE outputs (alias) and in-place ops with their input 0."""
    gr = Groups()
    for op in ops:
        d = opdef(op.kind)
        if d.alias or d.inplace:
            gr.join(op.outputs[0], op.inputs[0])
    return gr


def lifetimes(g: Graph, ops: list | None = None, share: bool = True) -> Lifetimes:
    """Buffers with lifetimes for an op schedule (default: the graph's op order).

    With ``share``, an op whose OpDef lists ``shared_inputs`` writes its output over input k
    when that input's buffer is last used at this step (and is big enough); those ops are
    ``writes_over_input`` of the result, and their scratch need is asked for in that mode.
    """
    ops = g.ops if ops is None else ops
    gr = fixed_groups(ops)
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

    over: set[str] = set()
    if share:
        pinned = {gr.root(t) for t in g.outputs}
        for step, op in enumerate(ops):
            shares = opdef(op.kind).shared_inputs(g, op)
            if not shares or not op.outputs:
                continue
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
                over.add(op.name)
                break

    buffers = [Buffer(name=r, size=align(sizes[r]), first=s[0], last=s[1], tensors=members[r])
               for r, s in span.items()]
    tensor_buffer = {t: r for r, ts in members.items() for t in ts}
    scratch: dict[str, str] = {}
    for step, op in enumerate(ops):
        n = opdef(op.kind).scratch_bytes(g, op, op.name in over)
        n = planned_scratch_bytes(g, op, n)   # --kernels cmsis-nn: what Arm's kernel asks for (cmsis_scratch.py)
        if n > 0:
            name = f"{op.name}/scratch"
            buffers.append(Buffer(name=name, size=align(n), first=step, last=step, kind="scratch"))
            scratch[op.name] = name
    return Lifetimes(buffers, tensor_buffer, scratch, frozenset(over))


def live_bytes(buffers: list[Buffer], n_steps: int) -> list[int]:
    """Bytes live at each step."""
    live = [0] * max(n_steps, 1)
    for b in buffers:
        for s in range(b.first, b.last + 1):
            live[s] += b.size
    return live


def lower_bound(buffers: list[Buffer], n_steps: int) -> int:
    return max(live_bytes(buffers, n_steps))
