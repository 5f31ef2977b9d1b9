"""The pipeline as one straight line: frontend -> graph -> passes -> plan -> codegen.

``compile_model`` does everything that can fail on the user's input before a
single file is written; ``write_project`` then writes OUT atomically.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from .errors import PockError
from .frontend import load_model
from .ir import Graph
from .ops import REGISTRY, opdef
from .plan import Plan, plan_memory

#: RAM the runtime needs besides arena and stack (harness statics, I/O handles)
RUNTIME_RAM_BYTES = 512
DEFAULT_STACK_BYTES = 4096
SIZE_UNITS = {"": 1, "b": 1, "k": 1024, "kb": 1024, "kib": 1024, "m": 1 << 20, "mb": 1 << 20, "mib": 1 << 20}


def parse_size(text: str, what: str = "--ram") -> int:
    """'256KB', '256K', '256KiB', '262144', '0.25MB' -> bytes (K = 1024, as memory sizes are quoted on MCUs)."""
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([a-zA-Z]*)\s*", str(text))
    if not m or m.group(2).lower() not in SIZE_UNITS:
        raise PockError(f"{what} {text!r} is not a size; write e.g. 256KB, 256K, 256KiB, 0.25MB or 262144 (bytes)")
    value = float(m.group(1)) * SIZE_UNITS[m.group(2).lower()]
    if value != int(value) or value <= 0:
        raise PockError(f"{what} {text!r} is not a positive whole number of bytes")
    return int(value)


def unsupported(g: Graph) -> list[str]:
    """Every reason the graph cannot be compiled, each naming the op and where it is."""
    problems = []
    for op in g.ops:
        d = REGISTRY.get(op.kind)
        if d is None:
            problems.append(f"op {op.kind} at {op.location.split(' (')[0]} is not supported")
            continue
        for p in d.check(g, op):
            problems.append(f"{op.kind} '{op.name}' ({op.location.split(' (')[0]}): {p}")
    for name in g.inputs + g.outputs:
        t = g.t(name)
        if t.dtype not in ("int8", "float32") and not (t.dtype == "uint8" and g.format == "onnx"):
            problems.append(f"model {'input' if name in g.inputs else 'output'} '{name}' is {t.dtype} (int8 or float32 only)")
    return problems


def check_supported(g: Graph) -> None:
    act = [t for t in g.tensors.values() if not t.is_const]
    if act and all(t.dtype == "float32" for t in act):
        raise PockError(f"{g.source}: a float32 model; pockmcu compiles int8-quantized models: "
                        "quantize it first (TFLite full-integer post-training quantization, or ONNX QDQ)")
    problems = unsupported(g)
    if problems:
        shown = "; ".join(problems[:8]) + (f"; and {len(problems) - 8} more" if len(problems) > 8 else "")
        raise PockError(f"{g.source}: cannot compile: {shown}. Supported ops: {', '.join(supported_ops())}")


def supported_ops() -> list[str]:
    return sorted(k for k, d in REGISTRY.items() if not d.foldable)


@dataclass
class TrainOptions:
    spec: str | None = None        # JSON text or path; None = the documented default
    loss: str = "xent"
    reorder: bool = True


@dataclass
class Compiled:
    graph: Graph
    plan: Plan
    ram_budget: int
    flash_budget: int | None
    stack_bytes: int
    target: str
    train: object = None           # training.builder.TrainGraph when --train
    stream: object = None          # stream.Stream when early layers run tile by tile

    @property
    def persistent_ram_bytes(self) -> int:
        return self.train.persistent_bytes() if self.train else 0

    @property
    def ram_needed(self) -> int:
        return self.plan.arena_bytes + self.persistent_ram_bytes + self.stack_bytes + RUNTIME_RAM_BYTES

    @property
    def weights_bytes(self) -> int:
        return sum(t.nbytes for t in self.graph.tensors.values() if t.is_const)


NUMERICS = ("onnxruntime", "tflm")


def default_numerics(path) -> str:
    """onnxruntime's arithmetic for .onnx models, TFLite Micro's for .tflite models."""
    return "onnxruntime" if str(path).lower().endswith(".onnx") else "tflm"


def load_and_check(path, numerics: str | None = None) -> Graph:
    numerics = numerics or default_numerics(path)
    if numerics not in NUMERICS:
        raise PockError(f"--numerics {numerics!r}: choose one of {', '.join(NUMERICS)}")
    if numerics == "onnxruntime" and not str(path).lower().endswith(".onnx"):
        raise PockError(f"{Path(path).name}: --numerics onnxruntime reproduces onnxruntime on an ONNX graph; "
                        "give the .onnx model, or use --numerics tflm (the default for .tflite)")
    g = load_model(path, numerics)
    g.numerics = numerics
    check_supported(g)
    for op in g.ops:
        opdef(op.kind).prepare(g, op)
    return g


def compile_model(path, ram: int, flash: int | None = None, stack: int = DEFAULT_STACK_BYTES,
                  target: str = "qemu-m4", train: TrainOptions | None = None, stream: str = "auto",
                  numerics: str | None = None) -> Compiled:
    """frontend -> graph -> (training graph) -> streaming -> plan; raises PockError on any problem."""
    from .stream import MODES  # noqa: PLC0415

    if stream not in MODES:
        raise PockError(f"--stream {stream!r}: use one of {', '.join(MODES)}")
    if train is not None and train.spec is None:
        return _compile_default_training(path, ram, flash, stack, target, train, stream, numerics)
    g = load_and_check(path, numerics)
    tg = None
    if train is not None:
        from .training.builder import build_training, check_trainable  # noqa: PLC0415
        from .training.spec import read_spec, resolve_spec  # noqa: PLC0415

        check_trainable(g, train.loss)
        spec = resolve_spec(read_spec(train.spec), g)
        g, streamed = _stream(g, stream, spec, train)
        tg = build_training(g, spec, train.loss, reorder=train.reorder)
    else:
        g, streamed = _stream(g, stream)
    plan = plan_memory(g, tg.schedule if tg else None)
    c = Compiled(graph=g, plan=plan, ram_budget=ram, flash_budget=flash, stack_bytes=stack, target=target, train=tg,
                 stream=streamed)
    if c.ram_needed > ram and stream == "auto":
        # auto streams where it is cheap; when --ram needs more, it streams as far as it takes
        return compile_model(path, ram, flash, stack, target, train, "max", numerics)
    if c.ram_needed > ram:
        persistent = f" + trainable parameters and optimizer state {c.persistent_ram_bytes}" if tg else ""
        raise PockError(
            f"{Path(path).name} needs {c.ram_needed} bytes of RAM (arena {plan.arena_bytes}{persistent} + stack "
            f"{stack} + runtime {RUNTIME_RAM_BYTES}) but --ram is {ram}; raise --ram to at least {c.ram_needed} bytes "
            f"({-(-c.ram_needed // 1024)}KB){' or train fewer parameters (--update)' if tg else ''}")
    _check_flash(path, c, flash)
    return c


def _stream(g: Graph, mode: str, spec=None, train: TrainOptions | None = None):
    """Run the early layers tile by tile when that lowers the peak (pockmcu/stream.py).

    Training: only layers before the first one that trains can stream, and the rest of the
    training schedule (its saved activations, gradients) is a floor streaming cannot lower; it is
    measured on a throwaway copy of the graph with the training ops built."""
    from .stream import choose_stream  # noqa: PLC0415

    if mode == "off":
        return g, None
    if spec is None:
        return choose_stream(g, mode)
    from .stream import candidates  # noqa: PLC0415

    import copy  # noqa: PLC0415

    from .plan import lifetimes, live_bytes  # noqa: PLC0415
    from .training.builder import build_training  # noqa: PLC0415

    trained = [k for k, op in enumerate(g.ops) if any(u.op is op and (u.bias or u.channels) for u in spec.layers)]
    limit = min(trained, default=len(g.ops))
    if not any(c[0].end <= limit for c in candidates(g)):
        return g, None
    probe = copy.deepcopy((g, spec))
    tg = build_training(probe[0], probe[1], train.loss, reorder=train.reorder)
    live = live_bytes(lifetimes(probe[0], tg.schedule)[0], len(tg.schedule)) + [0]
    for s in range(len(tg.schedule) - 1, -1, -1):     # live[s] = peak from step s on
        live[s] = max(live[s], live[s + 1])
    at = {id(op): k for k, op in enumerate(tg.schedule)}
    fwd = probe[0].ops

    def floor(end: int) -> int:
        return live[at[id(fwd[end - 1])] + 1] if end > 0 else live[0]

    return choose_stream(g, mode, limit=limit, floor=floor)


def _compile_default_training(path, ram, flash, stack, target, train: TrainOptions, stream: str = "auto",
                              numerics=None) -> Compiled:
    """No --update: the sparse update with the most expected gain whose RAM fits --ram (pockmcu/search.py:
    a documented prior, greedy by gain per byte with every candidate compiled exactly). When even the
    smallest update does not fit, the error names the minimum and says to raise --ram."""
    from .search import search_update  # noqa: PLC0415

    choice = search_update(path, ram, loss=train.loss, reorder=train.reorder, stack=stack, target=target,
                           stream=stream)
    opts = TrainOptions(spec=choice.spec_json, loss=train.loss, reorder=train.reorder)
    return compile_model(path, ram, flash, stack, target, opts, stream, numerics)


def _check_flash(path, c: Compiled, flash: int | None) -> None:
    if flash is not None and c.weights_bytes > flash:
        raise PockError(f"{Path(path).name} has {c.weights_bytes} bytes of weights but --flash is {flash}; "
                        f"raise --flash above {c.weights_bytes} plus code size")
