"""TFLite flatbuffer -> graph IR.

Reads the model with the ``tflite`` schema package, turns every tensor into an
IR ``Tensor`` and every operator into an IR ``Op``. Operator options are parsed
by the operator's own ``OpDef`` (pockmcu/ops); operators nobody registered
stay in the graph with their TFLite name as kind so that the support check can
name them all at once. Constant shape arithmetic (SHAPE, STRIDED_SLICE, PACK,
as Keras' Flatten leaves behind) is folded here by ``fold_constants``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import tflite
from tflite.utils import BUILTIN_OPCODE2NAME

from ..errors import PockError
from ..ir import Graph, Op, Quant, Tensor
from ..ops import TFLITE_BUILTINS
from .fold import fold_constants
from .names import short_name
from .structure import check_structure

TENSOR_TYPES = {0: "float32", 1: "float16", 2: "int32", 3: "uint8", 4: "int64", 5: "string",
                6: "bool", 7: "int16", 8: "complex64", 9: "int8", 10: "float64", 11: "complex128",
                12: "uint64", 13: "resource", 14: "variant", 15: "uint32", 16: "uint16", 17: "int4"}


def _read_model(path: Path) -> tflite.Model:
    if not path.exists():
        raise PockError(f"{path}: no such file; give the path of a .tflite or .onnx model")
    if path.is_dir():
        raise PockError(f"{path}: is a directory; give the path of a .tflite or .onnx model")
    buf = path.read_bytes()
    if len(buf) < 8:
        raise PockError(f"{path}: file is {len(buf)} bytes, too short to be a TFLite model")
    if buf[4:8] != b"TFL3":
        raise PockError(f"{path}: not a TFLite model (no 'TFL3' identifier); pockmcu reads .tflite and .onnx files")
    try:
        model = tflite.Model.GetRootAs(buf, 0)
        if model.SubgraphsLength() < 1:
            raise PockError(f"{path}: the TFLite model has no subgraph")
        # Touch every table once so that a truncated file fails here, not later.
        sg = model.Subgraphs(0)
        for i in range(sg.TensorsLength()):
            t = sg.Tensors(i)
            t.ShapeAsNumpy(), t.Name(), t.Type()
            b = model.Buffers(t.Buffer())
            if b is not None and not b.DataIsNone():
                b.DataAsNumpy()
        for i in range(sg.OperatorsLength()):
            o = sg.Operators(i)
            o.InputsAsNumpy(), o.OutputsAsNumpy(), model.OperatorCodes(o.OpcodeIndex())
    except PockError:
        raise
    except Exception as exc:  # flatbuffers raises IndexError/struct.error etc. on corrupt data
        raise PockError(f"{path}: corrupt or truncated TFLite file ({type(exc).__name__}); re-export the model") from None
    return model


#: zero-point range per integer dtype (TFLite's own limits; int16 activations are symmetric)
ZP_RANGE = {"int8": (-128, 127), "uint8": (0, 255), "int16": (0, 0), "int32": (-(1 << 31), (1 << 31) - 1),
            "int64": (-(1 << 63), (1 << 63) - 1)}
#: elements a tensor may hold: far above any microcontroller model, far below what numpy can allocate
MAX_ELEMENTS = 1 << 28
MAX_RANK = 6


def _quant(t: tflite.Tensor, shape: tuple[int, ...], dtype: str, what: str) -> Quant | None:
    """The tensor's quantization, checked: scales finite and positive, zero points in the dtype's
    range, per-channel vectors as long as the quantized axis."""
    q = t.Quantization()
    if q is None or q.ScaleIsNone() or q.ScaleLength() == 0:
        return None
    scale = q.ScaleAsNumpy().astype(np.float32)
    zp = q.ZeroPointAsNumpy().astype(np.int64) if not q.ZeroPointIsNone() else np.zeros(scale.shape, np.int64)
    if dtype not in ZP_RANGE:          # float tensors may carry stray quantization parameters
        return None
    bad = scale[~(np.isfinite(scale) & (scale >= np.finfo(np.float32).tiny))]
    if bad.size:
        raise PockError(f"{what}: quantization scale {float(bad[0]):g} is not a positive finite number; "
                        "the model file is damaged or was not quantized by a converter")
    if zp.size not in (1, scale.size):
        raise PockError(f"{what}: {zp.size} zero points for {scale.size} scales")
    lo, hi = ZP_RANGE[dtype]
    out = zp[(zp < lo) | (zp > hi)]
    if out.size:
        raise PockError(f"{what}: zero point {int(out[0])} is outside the {dtype} range [{lo}, {hi}]")
    if zp.size == 1 and scale.size > 1:
        zp = np.full(scale.shape, zp[0], np.int64)
    axis = int(q.QuantizedDimension())
    if scale.size == 1 or len(shape) == 1:
        axis = 0 if len(shape) <= 1 else axis  # rank-1 biases sometimes carry axis 3 (person_detect)
    if scale.size > 1:
        if not 0 <= axis < len(shape):
            raise PockError(f"{what}: quantized dimension {axis} of a rank-{len(shape)} tensor")
        if shape[axis] != scale.size:
            raise PockError(f"{what}: {scale.size} per-channel scales for {shape[axis]} channels on axis {axis}")
    return Quant(scale=scale, zero_point=zp.astype(np.int32), axis=axis)


def _shape(t: tflite.Tensor, what: str) -> tuple[int, ...]:
    shape = tuple(int(d) for d in t.ShapeAsNumpy()) if not t.ShapeIsNone() else ()
    if len(shape) > MAX_RANK:
        raise PockError(f"{what}: rank {len(shape)} (at most {MAX_RANK} is supported)")
    if any(d < -1 for d in shape):
        raise PockError(f"{what}: shape {list(shape)} has a negative dimension")
    if int(np.prod([max(d, 1) for d in shape], dtype=np.float64)) > MAX_ELEMENTS:
        raise PockError(f"{what}: shape {list(shape)} holds more than {MAX_ELEMENTS:,} elements; "
                        "far too large for a microcontroller")
    return shape


def _index(j: int, n: int, what: str, optional: bool = False) -> int:
    if optional and j == -1:
        return j
    if not 0 <= j < n:
        raise PockError(f"{what}: tensor index {j} is out of range (the subgraph has {n} tensors); "
                        "the model file is damaged")
    return j


#: longest tensor name kept (names reach messages, reports and plan.json)
MAX_NAME = 256


def clean_name(raw: bytes) -> str:
    """A tensor name from the file as printable text: undecodable bytes and control characters (a damaged
    file's) become '?', and it is cut at MAX_NAME characters."""
    text = raw.decode("utf-8", "replace")
    return "".join(c if c.isprintable() else "?" for c in text)[:MAX_NAME] or "?"


def unique_name(name: str, used: set[str]) -> str:
    """name, or name_1, name_2, ... : the first not in used (which it joins)."""
    base, k = name, 1
    while name in used:
        name = f"{base}_{k}"
        k += 1
    used.add(name)
    return name


def load_tflite(path: str | Path) -> Graph:
    """Read and validate a TFLite file: every index, buffer length, quantization parameter and option
    table is checked before use, and anything the flatbuffer library trips over is reported as a
    corrupt file (one line, PockError)."""
    path = Path(path)
    model = _read_model(path)
    if model.SubgraphsLength() > 1:
        raise PockError(f"{path}: has {model.SubgraphsLength()} subgraphs (control flow); "
                        "only single-subgraph models are supported")
    where = ["the model"]
    try:
        return _load(path, model, where)
    except PockError:
        raise
    except Exception as exc:  # flatbuffers, numpy or struct on a damaged table
        raise PockError(f"{path}: corrupt TFLite file at {where[0]} ({type(exc).__name__}); "
                        "re-export the model") from None


def _load(path: Path, model: tflite.Model, where: list[str]) -> Graph:
    sg = model.Subgraphs(0)
    tensors: dict[str, Tensor] = {}
    names: list[str] = []
    used: set[str] = set()
    n_tensors, n_buffers = sg.TensorsLength(), model.BuffersLength()
    for i in range(n_tensors):
        where[0] = f"tensor {i}"
        t = sg.Tensors(i)
        raw = t.Name()
        name = unique_name(clean_name(raw) if raw else f"tensor_{i}", used)
        what = f"{path.name}: tensor {i} '{name}'"
        shape = _shape(t, what)
        dtype = TENSOR_TYPES.get(t.Type(), f"type{t.Type()}")
        data = None
        b = t.Buffer()
        if b >= n_buffers:
            raise PockError(f"{what}: buffer index {b} is out of range ({n_buffers} buffers); the model file is damaged")
        buf = model.Buffers(b)
        if buf is not None and not buf.DataIsNone() and buf.DataLength() > 0 and dtype in (
                "int8", "uint8", "int16", "int32", "int64", "float32", "bool"):
            raw_data = buf.DataAsNumpy().tobytes()
            want = int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
            if any(d < 0 for d in shape) or len(raw_data) != want:
                raise PockError(f"{what}: its buffer holds {len(raw_data)} bytes but shape {list(shape)} {dtype} "
                                f"needs {want}; the model file is damaged")
            data = np.frombuffer(raw_data, dtype=np.dtype(dtype).newbyteorder("<"))
            data = data.astype(np.dtype(dtype)).reshape(shape)
        elif buf is not None and buf.Offset() > 1:
            raise PockError(f"{path}: tensor '{name}' is stored outside the flatbuffer (>2 GB model layout); not supported")
        if any(d < 0 for d in shape) and data is None:
            shape = tuple(1 if d < 0 else d for d in shape)
        tensors[name] = Tensor(name=name, shape=shape, dtype=dtype, quant=_quant(t, shape, dtype, what), data=data)
        names.append(name)

    variables = {names[i] for i in range(n_tensors) if sg.Tensors(i).IsVariable()}   # state (LSTM, SVDF)
    ops: list[Op] = []
    op_used: set[str] = set()
    counters: dict[str, int] = {}
    n_codes = model.OperatorCodesLength()
    for i in range(sg.OperatorsLength()):
        where[0] = f"operator #{i}"
        o = sg.Operators(i)
        if o.OpcodeIndex() >= n_codes:
            raise PockError(f"{path.name}: op #{i}: opcode index {o.OpcodeIndex()} is out of range ({n_codes} "
                            "operator codes); the model file is damaged")
        code = model.OperatorCodes(o.OpcodeIndex())
        builtin = max(int(code.BuiltinCode()), int(code.DeprecatedBuiltinCode()))
        if builtin == 32:
            custom = code.CustomCode()
            kind = "CUSTOM:" + (custom.decode("utf-8", "replace") if custom else "?")
        else:
            kind = BUILTIN_OPCODE2NAME.get(builtin, f"BUILTIN_{builtin}")
        what = f"{path.name}: op #{i} ({kind})"
        ins = [names[_index(int(j), n_tensors, f"{what} input {k}", optional=True)] if j != -1 else ""
               for k, j in enumerate(o.InputsAsNumpy())] if not o.InputsIsNone() else []
        outs = [names[_index(int(j), n_tensors, f"{what} output {k}")]
                for k, j in enumerate(o.OutputsAsNumpy())] if not o.OutputsIsNone() else []
        if not outs:
            raise PockError(f"{what}: has no output; the model file is damaged")
        opdef = TFLITE_BUILTINS.get(kind)
        short = short_name(opdef.kind if opdef else kind)
        k = counters.get(short, 0)
        counters[short] = k + 1
        op = Op(kind=opdef.kind if opdef else kind, name=unique_name(f"{short}{k}", op_used), inputs=ins,
                outputs=outs, location=f"op #{i} ({kind})")
        if opdef is not None:
            table = o.BuiltinOptions()
            options = None
            if table is not None and opdef.tflite_options:
                options = getattr(tflite, opdef.tflite_options)()
                options.Init(table.Bytes, table.Pos)
            op.options = opdef.parse_tflite(options, op, tensors)
        ops.append(op)

    where[0] = "the subgraph's inputs and outputs"
    inputs = [names[_index(int(j), n_tensors, f"{path.name}: model input {k}")]
              for k, j in enumerate(sg.InputsAsNumpy())] if not sg.InputsIsNone() else []
    outputs = [names[_index(int(j), n_tensors, f"{path.name}: model output {k}")]
               for k, j in enumerate(sg.OutputsAsNumpy())] if not sg.OutputsIsNone() else []
    g = Graph(tensors=tensors, ops=ops, inputs=inputs, outputs=outputs, source=str(path), format="tflite")
    check_structure(g, path.name, variables)
    fold_constants(g)
    g.prune()
    return g
