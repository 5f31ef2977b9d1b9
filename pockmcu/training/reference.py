"""The training step in numpy: the same schedule, each op's numpy reference, float64 gradients,
and the update rule with the same xorshift32 streams. It is the float reference the generated
C is checked against (equal up to the documented rounding rule)."""

from __future__ import annotations

import copy

import numpy as np

from ..ops import opdef
from ..ops.training_ops import seed_stream
from .builder import TrainGraph


class ReferenceTrainer:
    def __init__(self, tg: TrainGraph, seed: int):
        self.tg = copy.deepcopy(tg)
        g = self.tg.graph
        spec = self.tg.spec
        g.state = dict(lr=spec.lr, momentum=spec.momentum, batch=spec.batch, apply=1,
                       rng={t: seed_stream(seed & 0xFFFFFFFF, k) for k, t in enumerate(self.tg.trainable_tensors)},
                       accum={}, velocity={})
        self.steps = 0

    def step(self, x: np.ndarray, label) -> float:
        g = self.tg.graph
        g.state["apply"] = int((self.steps + 1) % g.state["batch"] == 0)
        if self.tg.loss == "xent":
            g.state["label"] = np.array([int(label)])
        else:
            g.state["target"] = np.asarray(label, np.float64)
        env = {g.inputs[0]: np.asarray(x)[None]}
        for op in self.tg.schedule:
            d = opdef(op.kind)
            outs = d.reference(g, op, [env[i] for i in d.activation_inputs(g, op)])
            env.update(zip(op.outputs, outs))
        self.steps += 1
        return g.state["loss"]

    def params(self) -> dict[str, np.ndarray]:
        return {t: self.tg.graph.t(t).data.copy() for t in self.tg.trainable_tensors}
