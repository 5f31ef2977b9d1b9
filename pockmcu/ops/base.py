"""The operator interface and registry.

Every operator is one ``OpDef`` subclass in one module under ``pockmcu/ops``.
It keeps together everything the pipeline needs to know about the operator:

- ``Options``: a frozen dataclass of the kind's options (``op.options``), which
  ``parse_tflite`` returns for TFLite builtins and ``make_op`` builds for the ONNX
  frontend and the training builder; ``operands`` names the input positions;
- ``check``: dtype/option problems the compiler cannot handle (messages);
- ``prepare``: compile-time constants (multipliers, shifts, activation range),
  returned as a frozen dataclass (``op.prepared``; TFLite Micro's Prepare step and
  OpData, done in Python);
- ``reference``: numpy implementation with the exact integer semantics;
- ``macs`` and ``scratch_bytes``;
- ``emit``: the step's C as data (pockmcu/ccode.py): its constant declarations
  (``Array``, ``Struct``), its kernel calls (``Call``, the function being the
  kernel-choice table's, ``cg.kernel(op).function``) and the kernel's scratch
  query; codegen writes all of them as C in one place, and plan.json and the
  reports read the same data.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, ClassVar

import numpy as np

from ..ccode import Emission
from ..errors import PockError
from ..ir import Graph, Op


@dataclass(frozen=True)
class Window:
    """How an op's output rows/columns depend on its input: output position o reads input positions
    o * stride - pad + i * dilation for i < size (clipped to the tensor). Streaming (pockmcu/stream.py)
    uses it to run an op on a spatial tile: the op's ``prepared.pads`` is then the tile's padding."""

    size: tuple[int, int] = (1, 1)
    stride: tuple[int, int] = (1, 1)
    dilation: tuple[int, int] = (1, 1)
    pads: tuple[int, int, int, int] = (0, 0, 0, 0)     # top, left, bottom, right

    @property
    def pointwise(self) -> bool:
        return self.size == (1, 1) and self.stride == (1, 1) and self.pads == (0, 0, 0, 0)


#: the window of element-wise ops (output element k reads input element k)
POINTWISE = Window()

REGISTRY: dict[str, "OpDef"] = {}
TFLITE_BUILTINS: dict[str, "OpDef"] = {}


def register(cls: type["OpDef"]) -> type["OpDef"]:
    inst = cls()
    REGISTRY[cls.kind] = inst
    for name in cls.tflite_ops:
        TFLITE_BUILTINS[name] = inst
    return cls


def opdef(kind: str) -> "OpDef":
    return REGISTRY[kind]


def make_op(kind: str, name: str, inputs: list[str], outputs: list[str], location: str = "", **options) -> Op:
    """An op of ``kind`` with its options built as the kind's ``Options`` dataclass."""
    d = REGISTRY[kind]
    if d.Options is None:
        if options:
            raise TypeError(f"{kind} takes no options, got {sorted(options)}")
        return Op(kind=kind, name=name, inputs=inputs, outputs=outputs, location=location)
    return Op(kind=kind, name=name, inputs=inputs, outputs=outputs, location=location, options=d.Options(**options))


def operand(op: Op, name: str) -> str:
    """The tensor at the input position ``name`` of the op's kind ("" when absent)."""
    k = REGISTRY[op.kind].operands.index(name)
    return op.inputs[k] if k < len(op.inputs) else ""


def op_problems(g: Graph, op: Op) -> list[str]:
    """Why ``op`` cannot compile: a missing operand or output first (then nothing else is asked),
    else its kind's ``check``."""
    d = REGISTRY[op.kind]
    missing = [f"input {k} ({name}) is missing" for k, name in enumerate(d.operands)
               if name not in d.optional_operands and (k >= len(op.inputs) or not op.inputs[k])]
    if not op.outputs:
        missing.append("it has no output")
    return missing or d.check(g, op)


def option_items(op: Op) -> dict:
    """Every option of an op by name (the scheduler scans them for parameters)."""
    if op.options is None:
        return {}
    return {f.name: getattr(op.options, f.name) for f in fields(op.options)}


def data_items(op: Op) -> dict:
    """Options and prepared constants of an op by name (for comparisons in tests)."""
    items = option_items(op)
    if op.prepared is not None and hasattr(op.prepared, "__dataclass_fields__"):
        items.update({f.name: getattr(op.prepared, f.name) for f in fields(op.prepared)})
    return items


def clamp_range(op: Op) -> tuple[int, int]:
    """The int8 range an op's output is clamped to by its fused activation (-128..127 without one):
    where the straight-through gradient is cut (``prepared.act_min/act_max``)."""
    p = op.prepared
    if p is not None and hasattr(p, "act_min"):
        return int(p.act_min), int(p.act_max)
    return -128, 127


class OpDef:
    kind: ClassVar[str] = ""
    tflite_ops: ClassVar[tuple[str, ...]] = ()
    #: the output is the input's bytes seen with another shape (no code, shared buffer)
    alias: ClassVar[bool] = False
    #: the output overwrites input 0 in place (code, shared buffer)
    inplace: ClassVar[bool] = False
    #: inputs the output may overwrite when they die at this op (kernel reads element k of every
    #: input before it writes element k of the output, in order); the planner decides
    may_share_input: ClassVar[tuple[int, ...]] = ()
    #: CMSIS-NN or pockmcu kernel function called (for reports)
    kernel: ClassVar[str] = ""
    #: dtypes accepted for (activation) inputs and outputs
    io_dtypes: ClassVar[tuple[str, ...]] = ("int8",)
    #: the kind's typed options (a frozen dataclass; the frontends and the training builder build
    #: it with ``make_op``), or None for a kind that takes none
    Options: ClassVar[type | None] = None
    #: names of the input positions (``operand(op, "weights")`` instead of ``op.inputs[1]``)
    operands: ClassVar[tuple[str, ...]] = ("input",)
    #: operands a model may leave out (TFLite index -1, or fewer inputs)
    optional_operands: ClassVar[tuple[str, ...]] = ("bias",)
    #: what a training-graph op is to the scheduler: "update" (writes a trainable parameter; kept in
    #: order and, with --no-reorder, deferred to the end), "loss" (the barrier between the forward
    #: and backward phases), or "" (anything else)
    role: ClassVar[str] = ""

    # -- frontend -------------------------------------------------------------------
    #: name of the class in the ``tflite`` package holding this op's builtin options
    tflite_options: ClassVar[str] = ""

    def parse_tflite(self, options: Any, op: Op, tensors: dict) -> Any:
        """The TFLite builtin options object as this kind's ``Options`` (None for a kind without)."""

    #: constant-foldable shape arithmetic: ``fold`` returns the output's value
    foldable: ClassVar[bool] = False

    def fold(self, g: Graph, op: Op) -> np.ndarray | None:
        """Value of the output when it can be computed at compile time, else None."""
        return None

    # -- checks and Prepare -----------------------------------------------------------
    def check(self, g: Graph, op: Op) -> list[str]:
        """Return problems that make this op unsupported (empty if fine)."""
        problems = []
        for name in self.activation_inputs(g, op) + list(op.outputs):
            t = g.t(name)
            if t.dtype not in self.io_dtypes:
                problems.append(f"{t.dtype} tensor '{name}' (only {'/'.join(self.io_dtypes)} is supported)")
            elif t.dtype in ("int8", "uint8") and t.quant is None:
                problems.append(f"tensor '{name}' has no quantization parameters")
        return problems

    def prepare(self, g: Graph, op: Op) -> Any:
        """The compile-time constants (TFLite Micro's Prepare, as a frozen dataclass or None): they
        become ``op.prepared``."""

    # -- semantics --------------------------------------------------------------------
    def reference(self, g: Graph, op: Op, xs: list[np.ndarray], rt=None) -> list[np.ndarray]:
        """The op's outputs for the activation inputs ``xs`` ([N, ...] each). ``rt``: the training
        step's run-time state (training_ops.TrainState) for the ops of a training graph that read the
        label or update parameters; they write new parameter values into it, never into ``g``."""
        raise NotImplementedError(self.kind)

    def macs(self, g: Graph, op: Op) -> int:
        return 0

    def work(self, g: Graph, op: Op) -> int:
        """What the flash cost rule (pockmcu/kernel_choice.py) multiplies a kernel's measured instructions
        per unit by: the MACs, or for an op without MACs (pooling, element-wise arithmetic) the elements it
        reads from its non-constant inputs."""
        return self.macs(g, op) or sum(g.tensors[t].size for t in op.inputs
                                       if t and t in g.tensors and not g.tensors[t].is_const)

    # -- training -----------------------------------------------------------------------
    def backward(self, tb, op: Op) -> None:
        """The gradient rule: given tb.grad(output), emit backward ops through tb (TrainBuilder)."""
        raise PockError(f"cannot train through {op.kind} '{op.name}' ({op.location}): it has no gradient rule; "
                        "train only layers after it")

    def scratch_bytes(self, g: Graph, op: Op, in_place: bool = False) -> int:
        """Scratch bytes the kernel needs; ``in_place``: the planner writes the output over an input
        (``shared_inputs``), which some kernels do differently."""
        return 0

    def shared_inputs(self, g: Graph, op: Op) -> tuple[int, ...]:
        """Inputs this op's output may overwrite when they die at it (default ``may_share_input``)."""
        return self.may_share_input

    # -- streaming ------------------------------------------------------------------------
    def window(self, g: Graph, op: Op) -> Window | None:
        """The spatial window of an NHWC op that can run on a tile of its output (None: it cannot).

        An op that returns a window must compute any tile exactly when given the input tile its
        window needs, the tile's shapes and ``prepared.pads`` (see ``Window``)."""
        return None

    # -- code generation ------------------------------------------------------------------
    def variant(self, g: Graph, op: Op, cg: Any) -> str:
        """The op's row in the kernel-choice table (kernel_table.py), besides numerics and core:
        a shape class such as "per_channel" or "split" ("" for the general case)."""
        return ""

    def emit(self, g: Graph, op: Op, cg: Any) -> Emission | None:
        """What the step puts into the C (pockmcu/ccode.py): its declarations and kernel calls as
        data. ``cg`` gives ``cg.kernel(op).function`` (the kernel-choice table's choice) and the
        names of trainable parameters (``cg.param``, ``cg.head``, ``cg.optimizer_args``)."""
        return None

    def describe(self, g: Graph, op: Op) -> str:
        """One line for C comments and reports."""
        ins = [g.t(i) for i in op.inputs if i and not g.t(i).is_const]
        shapes = ", ".join(str(list(t.shape)) for t in ins)
        outs = ", ".join(str(list(g.t(o).shape)) for o in op.outputs)
        return f"{self.kind} {shapes} -> {outs}"

    # -- helpers ----------------------------------------------------------------------
    @staticmethod
    def activation_inputs(g: Graph, op: Op) -> list[str]:
        return [i for i in op.inputs if i and not g.t(i).is_const]


ACTIVATIONS = {0: "NONE", 1: "RELU", 2: "RELU_N1_TO_1", 3: "RELU6"}
SUPPORTED_ACTIVATIONS = frozenset(ACTIVATIONS.values())


def fused_activation(code: int) -> str:
    """TFLite ActivationFunctionType -> name; TANH and SIGN_BIT stay numeric so check() can refuse them."""
    return ACTIVATIONS.get(int(code), f"unsupported fused activation {int(code)}")


def same_or_valid_pads(padding: str, in_hw: tuple[int, int], filt_hw: tuple[int, int],
                       stride: tuple[int, int], dilation: tuple[int, int],
                       out_hw: tuple[int, int]) -> tuple[int, int, int, int]:
    """(top, left, bottom, right) padding as TFLite computes it (ComputePaddingWithOffset)."""
    if padding == "VALID":
        return (0, 0, 0, 0)
    pads = []
    for i in range(2):
        eff = (filt_hw[i] - 1) * dilation[i] + 1
        total = max((out_hw[i] - 1) * stride[i] + eff - in_hw[i], 0)
        pads.append((total // 2, total - total // 2))
    return (pads[0][0], pads[1][0], pads[0][1], pads[1][1])


def window_out_size(padding: str, size: int, filt: int, stride: int, dilation: int = 1) -> int:
    eff = (filt - 1) * dilation + 1
    if padding == "SAME":
        return (size + stride - 1) // stride
    return (size + stride - eff) // stride
