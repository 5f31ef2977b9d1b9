"""Constant folding: shape arithmetic left in the graph by exporters (SHAPE -> STRIDED_SLICE -> PACK),
data movement of constants (TRANSPOSE, SLICE, CONCATENATION, GATHER, ... of constant tensors) and
constant-valued ops (FILL, ZEROS_LIKE) become constant tensors. An op whose output has a dtype pockmcu
does not compute in (int4, uint64, ...) stays, to be refused as such: folding it made a constant numpy
could hold only when some other package (ml_dtypes, which onnx imports) had taught it the dtype, and
whose size nothing knew (fuzz seed 15: a traceback in inspect after an ONNX model had been read)."""

from __future__ import annotations

import numpy as np

from ..ir import DTYPE_BYTES, Graph
from ..ops import REGISTRY


def fold_constants(g: Graph) -> None:
    """Replace every foldable op whose value is known at compile time by constant tensors (``fold``
    returns the output's value, or a list of values for an op with several outputs)."""
    changed = True
    while changed:
        changed = False
        for op in list(g.ops):
            opdef = REGISTRY.get(op.kind)
            if opdef is None or not opdef.foldable or any(g.t(t).dtype not in DTYPE_BYTES for t in op.outputs):
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
