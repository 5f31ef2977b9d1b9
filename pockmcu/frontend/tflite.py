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


def _quant(t: tflite.Tensor, shape: tuple[int, ...]) -> Quant | None:
    q = t.Quantization()
    if q is None or q.ScaleIsNone() or q.ScaleLength() == 0:
        return None
    scale = q.ScaleAsNumpy().astype(np.float32)
    zp = q.ZeroPointAsNumpy().astype(np.int32) if not q.ZeroPointIsNone() else np.zeros_like(scale, np.int32)
    if zp.size == 1 and scale.size > 1:
        zp = np.full(scale.shape, zp[0], np.int32)
    axis = int(q.QuantizedDimension())
    if scale.size == 1 or len(shape) == 1:
        axis = 0 if len(shape) <= 1 else axis  # rank-1 biases sometimes carry axis 3 (person_detect)
    return Quant(scale=scale, zero_point=zp, axis=axis)


def _unique(name: str, used: set[str]) -> str:
    base, k = name, 1
    while name in used:
        name = f"{base}_{k}"
        k += 1
    used.add(name)
    return name


def load_tflite(path: str | Path) -> Graph:
    path = Path(path)
    model = _read_model(path)
    if model.SubgraphsLength() > 1:
        raise PockError(f"{path}: has {model.SubgraphsLength()} subgraphs (control flow); "
                        "only single-subgraph models are supported")
    sg = model.Subgraphs(0)

    tensors: dict[str, Tensor] = {}
    names: list[str] = []
    used: set[str] = set()
    for i in range(sg.TensorsLength()):
        t = sg.Tensors(i)
        raw = t.Name()
        name = _unique(raw.decode("utf-8", "replace") if raw else f"tensor_{i}", used)
        shape = tuple(int(d) for d in t.ShapeAsNumpy()) if not t.ShapeIsNone() else ()
        dtype = TENSOR_TYPES.get(t.Type(), f"type{t.Type()}")
        data = None
        buf = model.Buffers(t.Buffer())
        if buf is not None and not buf.DataIsNone() and buf.DataLength() > 0 and dtype in (
                "int8", "uint8", "int16", "int32", "int64", "float32", "bool"):
            data = np.frombuffer(buf.DataAsNumpy().tobytes(), dtype=np.dtype(dtype).newbyteorder("<"))
            data = data.astype(np.dtype(dtype)).reshape(shape)
        elif buf is not None and buf.Offset() > 1:
            raise PockError(f"{path}: tensor '{name}' is stored outside the flatbuffer (>2 GB model layout); not supported")
        if any(d < 0 for d in shape) and data is None:
            shape = tuple(1 if d < 0 else d for d in shape)
        tensors[name] = Tensor(name=name, shape=shape, dtype=dtype, quant=_quant(t, shape), data=data)
        names.append(name)

    ops: list[Op] = []
    op_used: set[str] = set()
    counters: dict[str, int] = {}
    for i in range(sg.OperatorsLength()):
        o = sg.Operators(i)
        code = model.OperatorCodes(o.OpcodeIndex())
        builtin = max(int(code.BuiltinCode()), int(code.DeprecatedBuiltinCode()))
        if builtin == 32:
            custom = code.CustomCode()
            kind = "CUSTOM:" + (custom.decode() if custom else "?")
        else:
            kind = BUILTIN_OPCODE2NAME.get(builtin, f"BUILTIN_{builtin}")
        ins = [names[j] if j >= 0 else "" for j in o.InputsAsNumpy()] if not o.InputsIsNone() else []
        outs = [names[j] for j in o.OutputsAsNumpy()] if not o.OutputsIsNone() else []
        opdef = TFLITE_BUILTINS.get(kind)
        short = short_name(opdef.kind if opdef else kind)
        k = counters.get(short, 0)
        counters[short] = k + 1
        op = Op(kind=opdef.kind if opdef else kind, name=_unique(f"{short}{k}", op_used), inputs=ins,
                outputs=outs, location=f"op #{i} ({kind})")
        if opdef is not None:
            table = o.BuiltinOptions()
            options = None
            if table is not None and opdef.tflite_options:
                options = getattr(tflite, opdef.tflite_options)()
                options.Init(table.Bytes, table.Pos)
            op.options = opdef.parse_tflite(options, op, tensors)
        ops.append(op)

    inputs = [names[j] for j in sg.InputsAsNumpy()]
    outputs = [names[j] for j in sg.OutputsAsNumpy()]
    g = Graph(tensors=tensors, ops=ops, inputs=inputs, outputs=outputs, source=str(path), format="tflite")
    fold_constants(g)
    g.prune()
    return g
