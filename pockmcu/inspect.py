"""`pockmcu inspect`: what a model holds and what pockmcu can do with it.

``inspect(path)`` lists the ops and every reason the model cannot be compiled: each unsupported op,
dtype and structure, for TFLite and ONNX alike. A model the frontend cannot turn into a graph at
all (a TFLite model with several subgraphs, an ONNX model with unsupported nodes) is listed from
the file itself, op by op, every subgraph included, so that the user sees all of it at once and not
only the first refusal. ``Inspection.compiles`` is what `pockmcu inspect` turns into its exit status
(0: compiles, 2: does not).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import tflite
from tflite.utils import BUILTIN_OPCODE2NAME

from .compiler import checked_op_problems, default_numerics, io_problems
from .errors import PockError
from .frontend import load_model
from .frontend.onnx.convert import HANDLERS
from .frontend.onnx.read import ONNX_DTYPES, QUANT_OPS, read_model, runtime_qparams
from .frontend.tflite import TENSOR_TYPES
from .ir import Graph
from .ops import REGISTRY, TFLITE_BUILTINS

#: activation dtypes a TFLite model may carry (int32 only as biases and shape operands)
TFLITE_ACT_DTYPES = ("int8", "float32", "int32")


@dataclass
class Inspection:
    path: Path
    format: str
    lines: list[str] = field(default_factory=list)       # the report
    problems: list[str] = field(default_factory=list)    # every reason it does not compile, one line each
    #: short keys of the problems ("op LSTM", "int16 tensors", "subgraphs"), for counting across models
    keys: list[str] = field(default_factory=list)
    kinds: Counter = field(default_factory=Counter)       # op kind -> count (every subgraph)
    graph: Graph | None = None                            # when the frontend could load it

    @property
    def compiles(self) -> bool:
        return not self.problems

    def add(self, key: str, problem: str) -> None:
        self.problems.append(problem)
        key = re.sub(r"'[^']*'", "'.'", key)     # tensor and op names vary from model to model
        if key not in self.keys:
            self.keys.append(key)

    def text(self) -> str:
        lines = list(self.lines)
        if self.problems:
            lines.append(f"  NOT SUPPORTED ({len(self.problems)}):")
            lines += [f"    - {p}" for p in self.problems]
        else:
            lines.append("  supported: every op and dtype can be compiled")
        return "\n".join(lines)


def _quant(t) -> str:
    if t.quant is None:
        return "-"
    if t.quant.per_channel:
        return f"per-channel x{t.quant.scale.size} (axis {t.quant.axis})"
    return f"scale {t.quant.s:.6g} zp {t.quant.zp}"


def inspect(path, numerics: str | None = None) -> Inspection:
    """Everything `pockmcu inspect` reports about the model at ``path`` (PockError only when the file
    is not a model at all)."""
    path = Path(path)
    numerics = numerics or default_numerics(path)
    try:
        g = load_model(path, numerics)
    except Exception as exc:  # noqa: BLE001 - PockError, or a frontend bug: the file is listed all the same
        refusal = exc if isinstance(exc, PockError) else \
            PockError(f"{path}: the frontend failed ({type(exc).__name__}: {exc}); please report it")
        walk = _inspect_onnx_file if path.suffix.lower() == ".onnx" else _inspect_tflite_file
        try:
            return walk(path, refusal)
        except PockError:
            raise
        except Exception:  # noqa: BLE001 - a damaged file the walk trips over: the frontend's line says why
            raise refusal from None
    g.numerics = numerics
    return _inspect_graph(path, g)


def inspect_model(path) -> str:
    return inspect(path).text()


def _inspect_graph(path: Path, g: Graph) -> Inspection:
    r = Inspection(path=path, format=g.format, graph=g, kinds=Counter(op.kind for op in g.ops))
    act = [t for t in g.tensors.values() if not t.is_const]
    if act and all(t.dtype == "float32" for t in act):
        r.add("float model", "a float32 model (no quantized tensors); pockmcu compiles int8-quantized models: "
                             "quantize it first (TFLite full-integer post-training quantization, or ONNX QDQ)")
    bad_ops = set()
    for op in g.ops:
        d = REGISTRY.get(op.kind)
        if d is None:
            bad_ops.add(id(op))
            r.add(f"op {op.kind}", f"op {op.kind} at {op.location.split(' (')[0]} is not supported")
            continue
        try:
            found = checked_op_problems(g, op)     # its checks, then its shapes (shapes.py)
        except Exception as exc:  # noqa: BLE001 - a check that fails on an op it did not expect
            found = [f"pockmcu cannot check this op ({type(exc).__name__}: {exc})"]
        for p in found:
            r.add(f"{op.kind}: {p}", f"{op.kind} '{op.name}' ({op.location.split(' (')[0]}): {p}")
        if found:
            bad_ops.add(id(op))
            continue
        try:
            op.prepared = d.prepare(g, op)
        except Exception as exc:  # noqa: BLE001 - refusals found only while preparing the op's constants
            bad_ops.add(id(op))
            msg = str(exc) if isinstance(exc, PockError) else f"pockmcu cannot prepare this op ({type(exc).__name__}: {exc})"
            r.add(f"{op.kind}: {msg}", f"{op.kind} '{op.name}' ({op.location.split(' (')[0]}): {msg}")
    for p in io_problems(g):        # the model-level checks (input and output dtypes)
        r.add(f"model {p.split()[1]} {p.split(chr(39) + ' is ')[-1].split()[0]}", p)

    r.lines = [f"{path.name}: {g.format}, {len(g.ops)} ops, {len(g.tensors)} tensors"]
    for kind, names in (("input", g.inputs), ("output", g.outputs)):
        for n in names:
            t = g.t(n)
            r.lines.append(f"  {kind:6s} {n}: {t.dtype} {list(t.shape)} {_quant(t)}")
    r.lines += ["", f"  {'#':>3} {'op':12s} {'kind':18s} {'MACs':>10}  {'output':28s} quantization"]
    total = 0
    for i, op in enumerate(g.ops):
        macs = 0
        if id(op) not in bad_ops:
            try:
                macs = REGISTRY[op.kind].macs(g, op)
            except Exception:  # noqa: BLE001 - a half-supported op still gets listed
                macs = 0
        total += macs
        out = g.t(op.outputs[0]) if op.outputs else None
        desc = f"{out.dtype} {list(out.shape)}" if out else ""
        weights = [g.t(x) for x in op.inputs[1:2] if x and g.t(x).is_const]
        q = _quant(weights[0]) if weights else (_quant(out) if out else "")
        mark = "  <- unsupported" if id(op) in bad_ops else ""
        r.lines.append(f"  {i:3d} {op.name:12s} {op.kind:18s} {macs:10d}  {desc:28s} {q}{mark}")
    weights = sum(t.nbytes for t in g.tensors.values() if t.is_const)
    r.lines += ["", f"  total {total} MACs, {weights} bytes of constants"]
    return r


def _inspect_tflite_file(path: Path, refusal: PockError) -> Inspection:
    """A TFLite model the frontend refused as a whole: every op of every subgraph from the flatbuffer."""
    buf = path.read_bytes() if path.is_file() else b""
    if len(buf) < 8 or buf[4:8] != b"TFL3":
        raise refusal                                # not a TFLite model at all
    try:
        model = tflite.Model.GetRootAs(buf, 0)
        n_sg = model.SubgraphsLength()
        subgraphs = [model.Subgraphs(s) for s in range(n_sg)]
    except Exception:  # noqa: BLE001 - a corrupt file: the frontend's one line says so
        raise refusal from None
    r = Inspection(path=path, format="tflite")
    total_ops = sum(sg.OperatorsLength() for sg in subgraphs)
    r.lines = [f"{path.name}: tflite, {n_sg} subgraph{'s' if n_sg > 1 else ''}, {total_ops} ops "
               f"(listed from the file: {str(refusal).split(': ', 1)[-1]})"]
    if n_sg > 1:
        r.add("several subgraphs (control flow)",
              f"{n_sg} subgraphs (control flow: WHILE, IF, CALL_ONCE or resource variables); pockmcu compiles "
              "single-subgraph models")
    r.lines += ["", f"  {'sg':>2} {'#':>3} {'kind':30s} {'output':28s}"]
    odd_dtypes: dict[str, list[str]] = {}
    for s, sg in enumerate(subgraphs):
        names = []
        for i in range(sg.TensorsLength()):
            t = sg.Tensors(i)
            raw = t.Name()
            names.append((raw.decode("utf-8", "replace") if raw else f"tensor_{i}",
                          TENSOR_TYPES.get(t.Type(), f"type{t.Type()}"),
                          [int(d) for d in t.ShapeAsNumpy()] if not t.ShapeIsNone() else [],
                          t.Buffer()))
        for i in range(sg.OperatorsLength()):
            o = sg.Operators(i)
            code = model.OperatorCodes(o.OpcodeIndex())
            builtin = max(int(code.BuiltinCode()), int(code.DeprecatedBuiltinCode()))
            kind = ("CUSTOM:" + (code.CustomCode() or b"?").decode()) if builtin == 32 else \
                BUILTIN_OPCODE2NAME.get(builtin, f"BUILTIN_{builtin}")
            r.kinds[kind] += 1
            outs = [names[j] for j in o.OutputsAsNumpy()] if not o.OutputsIsNone() else []
            ins = [names[j] for j in o.InputsAsNumpy() if j >= 0] if not o.InputsIsNone() else []
            for name, dtype, _, _ in ins + outs:
                if dtype not in TFLITE_ACT_DTYPES:
                    odd_dtypes.setdefault(dtype, []).append(name)
            ok = kind in TFLITE_BUILTINS and n_sg == 1
            where = f"subgraph {s} op #{i}" if n_sg > 1 else f"op #{i}"
            if kind not in TFLITE_BUILTINS:
                r.add(f"op {kind}", f"op {kind} at {where} is not supported")
            desc = f"{outs[0][1]} {outs[0][2]}" if outs else ""
            r.lines.append(f"  {s:2d} {i:3d} {kind:30s} {desc:28s}{'' if ok else '  <- unsupported'}")
    for dtype, tensors in odd_dtypes.items():
        uniq = list(dict.fromkeys(tensors))
        r.add(f"{dtype} tensors", f"{len(uniq)} {dtype} tensor{'s' if len(uniq) > 1 else ''} "
                                  f"(e.g. '{uniq[0]}'); pockmcu computes in int8 (int32 biases)")
    if not r.problems:   # the frontend refused it for a reason of its own: say that one
        r.add("model", str(refusal).split(": ", 1)[-1])
    return r


def _inspect_onnx_file(path: Path, refusal: PockError) -> Inspection:
    """An ONNX model the frontend refused: every node, the unsupported ones marked, every quantization
    parameter given at run time; then the refusal itself when it is about something else."""
    try:
        model = read_model(path)
    except PockError:
        raise refusal from None
    g = model.graph
    r = Inspection(path=path, format="onnx")
    r.kinds = Counter(n.op_type for n in g.node)
    r.lines = [f"{path.name}: onnx, {len(g.node)} nodes (listed from the file)"]
    consts = {i.name for i in g.initializer}
    for vi in g.input:
        if vi.name not in consts:
            tt = vi.type.tensor_type
            dims = [d.dim_value if d.HasField("dim_value") else (d.dim_param or "?") for d in tt.shape.dim]
            r.lines.append(f"  input  {vi.name}: {ONNX_DTYPES.get(tt.elem_type, tt.elem_type)} {dims}")
    r.lines += ["", f"  {'#':>3} {'node':28s} {'op type':24s}"]
    if not any(n.op_type in QUANT_OPS for n in g.node):
        r.add("float model", "a float model (no QuantizeLinear/DequantizeLinear or QLinear* nodes): quantize it "
                             "first with onnxruntime.quantization.quantize_static")
    for k, node in enumerate(g.node):
        ok = node.domain in ("", "ai.onnx", "com.microsoft") and node.op_type in HANDLERS
        domain = "" if node.domain in ("", "ai.onnx") else f" ({node.domain})"
        if not ok:
            r.add(f"op {node.op_type}{domain}", f"node #{k} '{node.name}' ({node.op_type}{domain}) is not supported")
        r.lines.append(f"  {k:3d} {node.name[:28]:28s} {node.op_type + domain:24s}{'' if ok else '  <- unsupported'}")
    if any(n.op_type == "DynamicQuantizeLinear" for n in g.node):
        r.add("dynamic quantization", "dynamically quantized (DynamicQuantizeLinear computes scales at run time); "
                                      "quantize it statically with onnxruntime.quantization.quantize_static")
    for p in runtime_qparams(g):
        r.add("quantization parameters as graph inputs", f"{p} is a graph input, given at run time; "
                                                         "make it an initializer (constant)")
    if not r.problems:   # everything above is fine: the converter's own refusal (the first it met)
        msg = str(refusal).split(": ", 1)[-1]
        r.add(msg.split(": ")[-1][:80], msg)
    return r
