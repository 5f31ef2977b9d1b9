"""The training step in numpy: the same schedule, each op's numpy reference, float64 gradients,
and the update rule with the same xorshift32 streams. It is the float reference the generated
C is checked against (equal up to the documented rounding rule).

The compiled training graph is never changed: the trainer keeps the run-time state
(``TrainState``: optimizer, RNG streams, current parameters) and runs each op on a graph whose
trainable tensors hold the current parameters (a new graph each time a parameter changes)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ..ir import Graph
from ..ops import opdef
from ..ops.training_ops import TrainState, seed_stream
from .graph import TrainGraph


class ReferenceTrainer:
    def __init__(self, tg: TrainGraph, seed: int):
        self.tg = tg
        spec = tg.spec
        self.state = TrainState(lr=spec.lr, momentum=spec.momentum, batch=spec.batch,
                                rng={t: seed_stream(seed & 0xFFFFFFFF, k) for k, t in enumerate(tg.trainable_tensors)},
                                params={t: tg.graph.t(t).data.copy() for t in tg.trainable_tensors})
        self.steps = 0

    def _graph(self) -> Graph:
        """The training graph with the current parameters."""
        g = self.tg.graph
        tensors = dict(g.tensors)
        for t, v in self.state.params.items():
            tensors[t] = replace(g.t(t), data=v)
        return replace(g, tensors=tensors)

    def step(self, x: np.ndarray, label) -> float:
        st = self.state
        st.apply = int((self.steps + 1) % st.batch == 0)
        if self.tg.loss == "xent":
            st.label = np.array([int(label)])
        else:
            st.target = np.asarray(label, np.float64)
        g = self._graph()
        env = {g.inputs[0]: np.asarray(x)[None]}
        for op in self.tg.schedule:
            d = opdef(op.kind)
            before = dict(st.params)
            outs = d.reference(g, op, [env[i] for i in d.activation_inputs(g, op)], st)
            env.update(zip(op.outputs, outs))
            if any(st.params[t] is not before[t] for t in st.params):
                g = self._graph()          # later ops (the input gradient after a reordered update) see it
        self.steps += 1
        return st.loss

    def params(self) -> dict[str, np.ndarray]:
        return {t: v.copy() for t, v in self.state.params.items()}
