"""The graph IR every stage works on.

A ``Graph`` is plain data: named ``Tensor``s (shape, dtype, quantization,
constant data) and a list of ``Op``s in execution order. Activations are NHWC,
conv weights OHWI, depthwise weights 1HWC. Frontends produce it, passes
rewrite it, the planner and code generator read it.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np

DTYPE_BYTES = {"int8": 1, "uint8": 1, "int16": 2, "int32": 4, "int64": 8, "float32": 4, "bool": 1}
C_TYPES = {"int8": "int8_t", "uint8": "uint8_t", "int16": "int16_t", "int32": "int32_t",
           "int64": "int64_t", "float32": "float", "bool": "uint8_t"}


@dataclass
class Quant:
    """Affine quantization: real = scale * (q - zero_point), per tensor or per channel along ``axis``."""

    scale: np.ndarray          # float32, shape [1] or [C]
    zero_point: np.ndarray     # int32, same shape as scale
    axis: int = 0

    @property
    def per_channel(self) -> bool:
        return self.scale.size > 1

    @property
    def s(self) -> float:
        """The per-tensor scale as a Python float (of the float32 value)."""
        return float(self.scale[0])

    @property
    def zp(self) -> int:
        return int(self.zero_point[0])


@dataclass
class Tensor:
    name: str
    shape: tuple[int, ...]
    dtype: str
    quant: Quant | None = None
    data: np.ndarray | None = None       # constant contents, None for activations

    @property
    def is_const(self) -> bool:
        return self.data is not None

    @property
    def size(self) -> int:
        return math.prod(int(d) for d in self.shape)

    @property
    def nbytes(self) -> int:
        return self.size * DTYPE_BYTES[self.dtype]

    @property
    def np_dtype(self) -> np.dtype:
        return np.dtype(self.dtype)


@dataclass(frozen=True)
class Tile:
    """What a streamed op is: tile ``index`` of layer ``of`` (stream.py)."""

    of: str
    index: int


@dataclass
class Op:
    kind: str                        # e.g. "CONV_2D"
    name: str                        # stable, readable, unique
    inputs: list[str]                # tensor names; "" for an absent optional input
    outputs: list[str]
    location: str = ""               # where it came from, for messages ("op #3 in subgraph 0")
    options: Any = None              # the kind's typed options (``OpDef.Options``), from the frontend
    prepared: Any = None             # the kind's compile-time constants (``OpDef.prepare``)
    tile: Tile | None = None         # set on the tile copies of a streamed layer

    @property
    def layer(self) -> str:
        """The name of the layer this op computes (a streamed tile's: its layer's)."""
        return self.tile.of if self.tile else self.name


@dataclass
class Graph:
    tensors: dict[str, Tensor]
    ops: list[Op]
    inputs: list[str]
    outputs: list[str]
    source: str = ""
    format: str = ""                 # "tflite" or "onnx"
    #: whose integer arithmetic the ops reproduce: "tflm" (TFLite Micro's fixed point) or
    #: "onnxruntime" (MLAS's float32 requantization, emulated exactly with integers)
    numerics: str = "tflm"
    #: the kernel library the C calls and the planner sizes scratch for: "pockmcu" (ours; optimized
    #: rows of kernel_table.TABLE where ``features`` allow) or "cmsis-nn" (Arm's CMSIS-NN API and its
    #: scratch sizes on this core, for ``make CMSIS_NN_PATH=...``)
    library: str = "pockmcu"
    #: the core features the kernels may use (kernel_table.target_features; empty: portable C)
    features: frozenset = frozenset()
    #: optimized kernels the flash cost rule left out (kernel_choice.py; ``--kernels auto``): the layers
    #: that would run them take the next row of the table; and the rule's reasons, for plan.json and gen
    kernels_off: frozenset = frozenset()
    kernel_choice: dict = field(default_factory=dict)
    #: ONNX models: IR tensor name -> (ONNX value name, layout, ONNX shape, ONNX dtype), for
    #: comparing layer outputs with onnxruntime
    onnx_values: dict = field(default_factory=dict)

    def t(self, name: str) -> Tensor:
        return self.tensors[name]

    def producers(self) -> dict[str, Op]:
        return {o: op for op in self.ops for o in op.outputs}

    def prune(self) -> None:
        """Drop ops whose outputs nobody needs and tensors nobody references."""
        needed = set(self.outputs)
        kept: list[Op] = []
        for op in reversed(self.ops):
            if any(o in needed for o in op.outputs):
                kept.append(op)
                needed.update(i for i in op.inputs if i)
        self.ops = kept[::-1]
        # every output of a kept op stays, used or not (SPLIT / UNPACK outputs nobody reads)
        used = needed | set(self.inputs) | {o for op in self.ops for o in op.outputs}
        self.tensors = {k: v for k, v in self.tensors.items() if k in used}


def c_ident(text: str) -> str:
    s = re.sub(r"[^0-9a-zA-Z_]", "_", text).strip("_") or "t"
    return ("t_" + s) if s[0].isdigit() else s
