"""The pipeline as one straight line: frontend -> graph -> passes -> plan -> codegen.

``compile_model`` does everything that can fail on the user's input before a
single file is written; ``write_project`` then writes OUT atomically.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from pathlib import Path

from .errors import PockError
from .frontend import load_model
from .ir import Graph
from .kernel_choice import apply_cost_rule
from .kernel_table import target_features
from .lifetimes import lifetimes, live_bytes
from .ops import REGISTRY, TFLITE_BUILTINS, opdef
from .ops.base import OpDef, op_problems
from .plan import Plan, plan_memory
from .shapes import op_shape_problems, prepared_shift_problems
from .stream import MODES as STREAM_MODES
from .stream import all_candidates, choose_stream
from .targets import get_target
from .training.builder import TrainGraph, build_training, check_trainable
from .training.fusions import Fusions
from .training.spec import read_spec, resolve_spec

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
        for p in checked_op_problems(g, op):
            problems.append(f"{op.kind} '{op.name}' ({op.location.split(' (')[0]}): {p}")
    return problems + io_problems(g)


def checked_op_problems(g: Graph, op) -> list[str]:
    """The op's own checks, then its shapes (shapes.op_shape_problems: outputs inferred from inputs and
    options). A check that trips over a damaged operand (a missing tensor, a value no arithmetic can
    use) is itself reported as a problem of the op, never as a traceback."""
    try:
        return op_problems(g, op) or op_shape_problems(g, op)
    except KeyError as exc:
        what = "an operand it needs is missing" if exc.args and exc.args[0] == "" else \
            f"it names tensor {exc} that the model does not have"
        return [f"{what}; the model file is damaged"]
    except (ValueError, ArithmeticError, IndexError, TypeError, AttributeError) as exc:
        return [f"its operands or options are inconsistent ({type(exc).__name__}: {str(exc)[:100]}); the model "
                "file is damaged or uses values pockmcu cannot represent"]


def io_problems(g: Graph) -> list[str]:
    """The model-level part of ``unsupported``: input and output dtypes."""
    problems = []
    for name in g.inputs + g.outputs:
        t = g.t(name)
        if name in g.inputs and len(t.shape) >= 2 and t.shape[0] != 1:
            problems.append(f"model input '{name}' has batch {t.shape[0]} (shape {list(t.shape)}); pockmcu runs "
                            "one sample at a time: re-export with batch 1")
        if t.dtype not in ("int8", "uint8", "float32"):
            problems.append(f"model {'input' if name in g.inputs else 'output'} '{name}' is {t.dtype} "
                            "(int8, uint8 or float32 only)")
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
    """The model-level ops a user can meet (TFLite operator names), not the internal kinds the
    frontends and the training builder make (MASK_PACK, CONV_2D_WGRAD_UPDATE, UINT8_TO_INT8, ...).
    Ops that only exist folded at compile time (SHAPE, FILL, ZEROS_LIKE: no kernel) are left out;
    foldable ops that also run on activations (TRANSPOSE, STRIDED_SLICE, PACK, ...) are in."""
    return sorted(name for name, d in TFLITE_BUILTINS.items() if not d.foldable or type(d).emit is not OpDef.emit)


@dataclass
class TrainOptions:
    spec: str | None = None        # JSON text or path (None: the update search chooses, search.py)
    loss: str = "xent"
    reorder: bool = True
    #: the passes over the training graph that lower its RAM (training/fusions.py)
    fusions: Fusions = Fusions()


@dataclass
class Compiled:
    graph: Graph
    plan: Plan
    ram_budget: int
    flash_budget: int | None
    stack_bytes: int
    target: str
    train: TrainGraph | None = None     # when --train
    stream: object = None               # stream.Stream when early layers run tile by tile

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
#: --kernels: "auto" (pockmcu's kernels, every layer on the fastest row its core has), "compact" (optimized
#: kernels only where they pay for their flash, at most +10% over portable: kernel_choice.py), "portable"
#: (pockmcu's portable C on any core) or "cmsis-nn" (Arm's CMSIS-NN API, scratch planned for Arm's kernels)
KERNELS = ("auto", "compact", "portable", "cmsis-nn")


def with_kernels(g: Graph, target: str, kernels: str = "auto") -> Graph:
    """``g`` with the kernel library and core features the target and --kernels give (a new Graph);
    ``compact`` then applies the flash cost rule (kernel_choice.apply_cost_rule)."""
    if kernels not in KERNELS:
        raise PockError(f"--kernels {kernels!r}: choose one of {', '.join(KERNELS)}")
    features = frozenset() if kernels == "portable" else target_features(get_target(target))
    g = replace(g, library="cmsis-nn" if kernels == "cmsis-nn" else "pockmcu", features=features)
    return apply_cost_rule(g, target) if kernels == "compact" else g


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
        op.prepared = prepare(g, op)
    return g


def prepare(g: Graph, op) -> object:
    """The op's compile-time constants (OpDef.prepare), with any arithmetic its parameters break
    (a scale whose multiplier needs a shift past 31 bits, a zero beta, shapes that contradict each
    other) reported as one line naming the op."""
    where = f"{op.kind} '{op.name}' ({op.location.split(' (')[0]})"
    try:
        prepared = opdef(op.kind).prepare(g, op)
        for problem in prepared_shift_problems(prepared):
            raise PockError(problem)
        return prepared
    except PockError as exc:
        raise PockError(f"{where}: {exc}") from None
    except (ValueError, ArithmeticError, IndexError) as exc:
        raise PockError(f"{where}: its parameters are out of range or inconsistent ({type(exc).__name__}: "
                        f"{str(exc)[:100]}); the model file is damaged or uses values fixed-point int8 "
                        "arithmetic cannot represent") from None


def compile_graph(g: Graph, ram: int, flash: int | None = None, stack: int = DEFAULT_STACK_BYTES,
                  target: str = "qemu-m4", train: TrainOptions | None = None, stream: str = "auto",
                  stream_candidates: list | None = None, kernels: str = "auto") -> Compiled:
    """A loaded graph (``load_and_check``) -> streaming -> (training graph) -> plan.

    Every pass returns new data: ``g`` is left as it is, so a caller (the update search) compiles
    any number of variants of one loaded graph. ``stream_candidates`` (``stream.all_candidates(g)``)
    may be given to reuse that analysis across compiles of the same graph. ``--stream auto``
    streams where it is cheap and, when --ram needs more, as far as it takes (``max``). Raises
    PockError on any problem.
    """
    if stream not in STREAM_MODES:
        raise PockError(f"--stream {stream!r}: use one of {', '.join(STREAM_MODES)}")
    g = with_kernels(g, target, kernels)
    spec = None
    if train is not None:
        if train.spec is None:
            raise PockError("internal: compile_graph needs an update spec (the search chooses one: search.py)")
        check_trainable(g, train.loss)
        spec = resolve_spec(read_spec(train.spec), g)
    cands = all_candidates(g) if stream != "off" and stream_candidates is None else stream_candidates
    modes = ("auto", "max") if stream == "auto" else (stream,)
    for mode in modes:
        c = _compile_once(g, ram, flash, stack, target, train, spec, mode, cands)
        if c.ram_needed <= ram:
            break
    if c.ram_needed > ram:
        tg = c.train
        persistent = f" + trainable parameters and optimizer state {c.persistent_ram_bytes}" if tg else ""
        raise PockError(
            f"{Path(g.source).name} needs {c.ram_needed} bytes of RAM (arena {c.plan.arena_bytes}{persistent} + "
            f"stack {stack} + runtime {RUNTIME_RAM_BYTES}) but --ram is {ram}; raise --ram to at least "
            f"{c.ram_needed} bytes ({-(-c.ram_needed // 1024)}KB){' or train fewer parameters (--update)' if tg else ''}")
    _check_flash(g.source, c, flash)
    return c


def compile_model(path, ram: int, flash: int | None = None, stack: int = DEFAULT_STACK_BYTES,
                  target: str = "qemu-m4", train: TrainOptions | None = None, stream: str = "auto",
                  numerics: str | None = None, kernels: str = "auto") -> Compiled:
    """Load ``path`` and compile it (``compile_graph``)."""
    return compile_graph(load_and_check(path, numerics), ram, flash, stack, target, train, stream, kernels=kernels)


def _compile_once(g: Graph, ram, flash, stack, target, train: TrainOptions | None, spec, mode: str,
                  cands) -> Compiled:
    """One streaming mode: streamed graph -> training graph -> fusions -> plan, as new data."""
    if train is None:
        sg, streamed = (g, None) if mode == "off" else choose_stream(g, mode, candidates=cands)
        plan = plan_memory(sg)
        sg = replace(sg, ops=list(plan.schedule))
        return Compiled(graph=sg, plan=plan, ram_budget=ram, flash_budget=flash, stack_bytes=stack,
                        target=target, stream=streamed)
    sg, streamed, tg = _stream_for_training(g, mode, spec, train, cands)
    if tg is None or sg is not g:
        tg = build_training(sg, spec, train.loss, reorder=train.reorder, fusions=train.fusions)
    plan = plan_memory(tg.graph, tg.schedule)
    tg = tg.reordered(plan.schedule)
    return Compiled(graph=tg.graph, plan=plan, ram_budget=ram, flash_budget=flash, stack_bytes=stack,
                    target=target, train=tg, stream=streamed)


def _stream_for_training(g: Graph, mode: str, spec, train: TrainOptions, cands):
    """Run the early layers tile by tile when that lowers the peak (pockmcu/stream.py).

    Only layers before the first one that trains can stream, and the rest of the training
    schedule (its saved activations, gradients) is a floor streaming cannot lower: it is measured
    on the training graph built from the unstreamed graph (a new graph; ``g`` is unchanged), which
    is returned too: (graph, stream or None, that training graph or None)."""
    if mode == "off":
        return g, None, None
    trained = [k for k, op in enumerate(g.ops) if any(u.op is op and (u.bias or u.channels) for u in spec.layers)]
    limit = min(trained, default=len(g.ops))
    if not any(c[0].end <= limit for c in cands):
        return g, None, None
    tg = build_training(g, spec, train.loss, reorder=train.reorder, fusions=train.fusions)
    live = live_bytes(lifetimes(tg.graph, tg.schedule).buffers, len(tg.schedule)) + [0]
    for s in range(len(tg.schedule) - 1, -1, -1):     # live[s] = peak from step s on
        live[s] = max(live[s], live[s + 1])
    at = {id(op): k for k, op in enumerate(tg.schedule)}
    fwd = g.ops

    def floor(end: int) -> int:
        return live[at[id(fwd[end - 1])] + 1] if end > 0 else live[0]

    return *choose_stream(g, mode, limit=limit, floor=floor, candidates=cands), tg


def _check_flash(source, c: Compiled, flash: int | None) -> None:
    if flash is not None and c.weights_bytes > flash:
        raise PockError(f"{Path(source).name} has {c.weights_bytes} bytes of weights but --flash is {flash}; "
                        f"raise --flash above {c.weights_bytes} plus code size")
