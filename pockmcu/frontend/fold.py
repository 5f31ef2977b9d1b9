"""Constant folding of shape arithmetic left in the graph by exporters."""

from __future__ import annotations

from ..ir import Graph
from ..ops import REGISTRY


def fold_constants(g: Graph) -> None:
    """Replace every foldable op whose value is known at compile time by a constant tensor."""
    changed = True
    while changed:
        changed = False
        for op in list(g.ops):
            opdef = REGISTRY.get(op.kind)
            if opdef is None or not opdef.foldable:
                continue
            value = opdef.fold(g, op)
            if value is None:
                continue
            out = g.t(op.outputs[0])
            out.data = value.astype(out.np_dtype).reshape(out.shape) if out.shape or value.size == 1 else value
            g.ops.remove(op)
            changed = True
