"""Constant folding: shape arithmetic left in the graph by exporters (SHAPE -> STRIDED_SLICE -> PACK),
data movement of constants (TRANSPOSE, SLICE, CONCATENATION, GATHER, ... of constant tensors) and
constant-valued ops (FILL, ZEROS_LIKE) become constant tensors."""

from __future__ import annotations

import numpy as np

from ..ir import Graph
from ..ops import REGISTRY


def fold_constants(g: Graph) -> None:
    """Replace every foldable op whose value is known at compile time by constant tensors (``fold``
    returns the output's value, or a list of values for an op with several outputs)."""
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
            values = value if isinstance(value, list) else [value]
            for name, v in zip(op.outputs, values):
                out = g.t(name)
                v = np.asarray(v)
                out.data = v.astype(out.np_dtype).reshape(out.shape) if out.shape or v.size == 1 else v
            g.ops.remove(op)
            changed = True
