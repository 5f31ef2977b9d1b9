"""The training graph: the forward graph with its training ops and the one schedule
pockmcu_train_step runs (training/builder.py builds it; training/fusions.py rewrites it)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from ..ir import Graph, Op
from ..ops.base import option_items
from .spec import UpdateSpec


@dataclass
class TrainGraph:
    graph: Graph                     # tensors of forward + training
    forward: list[Op]                # inference schedule (pockmcu_invoke)
    schedule: list[Op]               # training schedule (pockmcu_train_step)
    spec: UpdateSpec
    loss: str
    n_forward: int = 0               # schedule[:n_forward] is the forward phase (with saves)
    reorder: bool = True
    trainable_tensors: list[str] = field(default_factory=list)   # int8 weights / int32 biases kept in RAM
    label_shape: tuple[int, ...] = ()
    #: CONV_2D weights kept in RAM as their trained input channels only (fusions.store_split_channels)
    split_tensors: frozenset[str] = frozenset()

    def reordered(self, schedule: list[Op]) -> "TrainGraph":
        """The same training graph run in ``schedule`` (a valid reordering, plan.Plan.schedule): the
        forward pass (and the graph's op list, which pockmcu_invoke runs) follow its order."""
        pos = {id(o): k for k, o in enumerate(schedule)}
        forward = sorted(self.forward, key=lambda o: pos[id(o)])
        return replace(self, schedule=list(schedule), forward=forward, graph=replace(self.graph, ops=list(forward)))

    def state_elements(self, tensor: str) -> int:
        """Elements of ``tensor`` that train (the size of its optimizer state)."""
        for op in self.schedule:
            o = option_items(op)
            if o.get("bias") == tensor:
                return self.graph.t(tensor).size
            if o.get("weights") == tensor:
                w = self.graph.t(tensor)
                k = o["channels"]
                if op.kind == "DEPTHWISE_CONV_2D_WGRAD_UPDATE":
                    return w.shape[1] * w.shape[2] * k * o["layer"].options.ch_mult
                return w.size // w.shape[-1] * k
        return 0

    def head_channels(self, tensor: str) -> int:
        """k when ``tensor`` is stored split, else 0.

        A CONV_2D (no groups) whose update trains only the first k < C_in input channels keeps
        just those in RAM: rows of k values, one row per filter tap (o, ky, kx). The frozen
        channels are read from the flash constant (the whole original tensor), so the forward
        pass and the input gradient take both (pockmcu_convolve_split_s8). FULLY_CONNECTED and
        DEPTHWISE_CONV_2D weights, biases and fully trained tensors are stored whole.
        """
        if tensor not in self.split_tensors:
            return 0
        for op in self.schedule:
            if op.kind == "CONV_2D_WGRAD_UPDATE" and op.options.weights == tensor:
                return op.options.channels
        return 0

    def stored_shape(self, tensor: str) -> tuple[int, ...]:
        """The shape of the RAM copy of a trainable tensor: (O, KH, KW, k) when split, else its shape."""
        shape = tuple(self.graph.t(tensor).shape)
        k = self.head_channels(tensor)
        return shape[:-1] + (k,) if k else shape

    def stored_bytes(self, tensor: str) -> int:
        """Bytes of the RAM copy (and of the tensor in pockmcu_params_read / P.bin)."""
        return int(np.prod(self.stored_shape(tensor))) * self.graph.t(tensor).np_dtype.itemsize

    def persistent_bytes(self) -> int:
        """RAM that lives across steps: trainable tensors (as stored: a split CONV_2D only its trained
        channels), momentum and batch accumulators, RNG states."""
        total = 0
        for t in self.trainable_tensors:
            total += self.stored_bytes(t) + 4            # the stored tensor and its RNG state
            n = self.state_elements(t)
            total += 4 * n * ((self.spec.momentum > 0) + (self.spec.batch > 1))
        return total + 16                                # optimizer struct, step counter
