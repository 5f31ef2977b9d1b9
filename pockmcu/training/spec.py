"""The sparse-update spec: which parameters train, and how.

    {"bias": {"last": K} | "all" | "none",
     "weights": [{"layer": I | "name", "ratio": R}, ...] | "all" | "none",
     "optimizer": {"kind": "sgd" | "momentum", "lr": F (0.001), "momentum": F},
     "batch": B, "qas": true}

``layer`` indexes the parameterized ops (CONV_2D, DEPTHWISE_CONV_2D,
FULLY_CONNECTED) in model order from 0; negative counts from the end (-1 is
the last); a string names the op (as ``pockmcu inspect`` lists it) or one of
its tensors. ``ratio`` in (0, 1] trains the first ceil(ratio * C_in) input
channels of that layer's weights (for a depthwise conv, the channels it
filters); the rest stay frozen. Keeping the first channels makes the saved
activation a contiguous slice and the trained weights contiguous per tap: for
every row r = (o, ky, kx) of an OHWI filter the values [r*C : r*C+k].

Storage: a CONV_2D (no groups) trained at k < C_in channels keeps only that
prefix in RAM, a (O, KH, KW, k) array (rows of k); the frozen remainder is read
from the flash constant, which stays the whole original tensor
(pockmcu_convolve_split_s8; TrainGraph.head_channels / stored_shape). The
parameter bytes (pockmcu_params_read, P.bin, the board's pull) are the RAM
contents; pockmcu.training.params.expand merges them into full tensors.
FULLY_CONNECTED and DEPTHWISE_CONV_2D weights keep the whole tensor in RAM
whatever the ratio (as do biases and fully trained weights).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import PockError
from ..ir import Graph, Op
from ..ops.base import operand

PARAM_KINDS = ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED", "TRANSPOSE_CONV")
#: The optimizer when the spec names none. Without --update at all, gen searches for the update
#: under --ram (pockmcu/search.py); DEFAULT_SPEC is what read_spec(None) gives a library caller.
DEFAULT_OPTIMIZER = {"kind": "sgd", "lr": 0.001, "momentum": 0.0}
DEFAULT_SPEC = {"bias": "all", "weights": [{"layer": -1, "ratio": 1.0}], "optimizer": DEFAULT_OPTIMIZER}


@dataclass
class LayerUpdate:
    op: Op
    index: int                     # among parameterized ops
    bias: bool = False
    channels: int = 0              # trainable input channels of the weights (0 = weights frozen)
    total_channels: int = 0


@dataclass
class UpdateSpec:
    layers: list[LayerUpdate]
    kind: str = "sgd"
    lr: float = 0.1
    momentum: float = 0.0
    batch: int = 1
    qas: bool = True
    source: dict = field(default_factory=dict)

    def trainable(self) -> list[LayerUpdate]:
        return [u for u in self.layers if u.bias or u.channels]

    def by_op(self) -> dict[str, LayerUpdate]:
        return {u.op.name: u for u in self.layers}

    def describe(self) -> str:
        parts = []
        for u in self.trainable():
            w = "" if not u.channels else (f" weights {u.channels}/{u.total_channels} ch" if u.channels < u.total_channels
                                           else " weights")
            parts.append(f"{u.op.name}[{u.index}]:{' bias' if u.bias else ''}{w}")
        return ", ".join(parts)


def param_ops(g: Graph) -> list[Op]:
    return [op for op in g.ops if op.kind in PARAM_KINDS]


def input_channels(g: Graph, op: Op) -> int:
    w = g.t(operand(op, "weights"))
    if op.kind == "DEPTHWISE_CONV_2D":
        return g.t(op.inputs[0]).shape[-1]
    return w.shape[-1]


def read_spec(text_or_path: str | None) -> dict:
    """The spec from a JSON file path or the JSON text itself (None: the default)."""
    if text_or_path is None:
        return json.loads(json.dumps(DEFAULT_SPEC))
    text = str(text_or_path)
    if not text.lstrip().startswith("{"):
        p = Path(text)
        if not p.is_file():
            raise PockError(f"--update {text}: no such file (give a JSON file or the JSON text itself)")
        text = p.read_text()
    try:
        spec = json.loads(text)
    except json.JSONDecodeError as exc:
        raise PockError(f"--update: malformed JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") from None
    if not isinstance(spec, dict):
        raise PockError("--update: the spec must be a JSON object like {\"bias\": \"all\", \"weights\": [...]}")
    unknown = set(spec) - {"bias", "weights", "optimizer", "batch", "qas"}
    if unknown:
        raise PockError(f"--update: unknown key(s) {', '.join(sorted(unknown))}; "
                        "allowed: bias, weights, optimizer, batch, qas")
    return spec


def _resolve_layer(ref, ops: list[Op], g: Graph) -> int:
    n = len(ops)
    if isinstance(ref, bool) or not isinstance(ref, (int, str)):
        raise PockError(f"--update: layer {ref!r} must be an index or a name")
    if isinstance(ref, int):
        if not -n <= ref < n:
            raise PockError(f"--update: layer {ref} does not exist; the model has {n} parameterized layers "
                            f"(0..{n - 1}, or -1..-{n} from the end)")
        return ref % n
    for i, op in enumerate(ops):
        if ref == op.name or ref in op.inputs or ref in op.outputs:
            return i
    names = ", ".join(op.name for op in ops[:12]) + (" ..." if n > 12 else "")
    raise PockError(f"--update: no layer named {ref!r}; parameterized layers are: {names}")


def resolve_spec(raw: dict, g: Graph) -> UpdateSpec:
    ops = param_ops(g)
    if not ops:
        raise PockError(f"{g.source}: no CONV_2D, DEPTHWISE_CONV_2D or FULLY_CONNECTED layer to train")
    layers = [LayerUpdate(op=op, index=i, total_channels=input_channels(g, op)) for i, op in enumerate(ops)]

    bias = raw.get("bias", "none")
    if bias == "all":
        for u in layers:
            u.bias = True
    elif isinstance(bias, dict) and set(bias) == {"last"}:
        k = bias["last"]
        if isinstance(k, bool) or not isinstance(k, int) or k < 0:
            raise PockError(f"--update: bias.last must be a whole number >= 0, got {k!r}")
        for u in layers[max(len(layers) - k, 0):]:
            u.bias = True
    elif bias not in ("none", None):
        raise PockError(f"--update: bias must be \"all\", \"none\" or {{\"last\": K}}, got {json.dumps(bias)}")
    for u in layers:  # a layer without a bias tensor has no bias to train
        if u.bias and not operand(u.op, "bias"):
            u.bias = False

    weights = raw.get("weights", "none")
    if weights == "all":
        weights = [{"layer": i, "ratio": 1.0} for i in range(len(layers))]
    elif weights in ("none", None):
        weights = []
    if not isinstance(weights, list):
        raise PockError("--update: weights must be \"all\", \"none\" or a list of {\"layer\": I, \"ratio\": R}")
    for item in weights:
        if not isinstance(item, dict) or "layer" not in item:
            raise PockError(f"--update: each weights entry needs a \"layer\", got {json.dumps(item)}")
        i = _resolve_layer(item["layer"], ops, g)
        ratio = item.get("ratio", 1.0)
        if isinstance(ratio, bool) or not isinstance(ratio, (int, float)) or not 0 < ratio <= 1:
            raise PockError(f"--update: ratio {ratio!r} of layer {item['layer']!r} must be in (0, 1]")
        u = layers[i]
        u.channels = max(1, min(u.total_channels, math.ceil(ratio * u.total_channels - 1e-9)))

    opt = raw.get("optimizer", {})
    if not isinstance(opt, dict):
        raise PockError("--update: optimizer must be an object like {\"kind\": \"sgd\", \"lr\": 0.1}")
    kind = opt.get("kind", "sgd")
    if kind not in ("sgd", "momentum"):
        raise PockError(f"--update: optimizer kind {kind!r} is not supported (sgd or momentum)")
    lr = opt.get("lr", DEFAULT_OPTIMIZER["lr"])
    mom = opt.get("momentum", 0.9 if kind == "momentum" else 0.0)
    for name, v, lo, hi in (("lr", lr, 0, math.inf), ("momentum", mom, 0, 1)):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not lo <= v < hi or (name == "lr" and v == 0):
            raise PockError(f"--update: optimizer {name} {v!r} is out of range")
    if kind == "sgd" and mom:
        kind = "momentum"
    batch = raw.get("batch", 1)
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise PockError(f"--update: batch must be a whole number >= 1, got {batch!r}")
    qas = raw.get("qas", True)
    if not isinstance(qas, bool):
        raise PockError("--update: qas must be true or false")
    spec = UpdateSpec(layers=layers, kind=kind, lr=float(lr), momentum=float(mom), batch=batch, qas=qas, source=raw)
    if not spec.trainable():
        raise PockError("--update: the spec trains nothing; give at least one bias or weights entry")
    return spec
