"""The numpy reference: the graph executed op by op with each op's exact integer semantics."""

from __future__ import annotations

import numpy as np

from .ir import Graph
from .ops import opdef


def run_reference(g: Graph, *xs: np.ndarray, keep: bool = False):
    """Run N samples ([N, *shape[1:]] per input); returns the outputs (and every tensor if keep)."""
    env: dict[str, np.ndarray] = {}
    for name, x in zip(g.inputs, xs):
        t = g.t(name)
        env[name] = np.asarray(x, dtype=t.np_dtype).reshape((-1,) + tuple(t.shape[1:]))
    for op in g.ops:
        d = opdef(op.kind)
        outs = d.reference(g, op, [env[i] for i in d.activation_inputs(g, op)])
        for name, value in zip(op.outputs, outs):
            env[name] = value
    outs = [env[o] for o in g.outputs]
    return (outs, env) if keep else outs
