"""Reading an ONNX file: the protobuf, its validation, and what the nodes' attributes say.

Everything here looks at the ONNX model only (no IR is built): loading and checking the file
(``read_model``), the whole-graph refusals that come before any conversion (``check_graph``: a float
model, unsupported nodes -- all of them at once --, dynamic quantization), the static shape and dtype
of a model input (``input_signature``), node attributes (``node_attrs``) and the window geometry of a
convolution or pooling node as ONNX defines it (``window``), and which nodes onnxruntime itself
computes in float (``ort_float_nodes``).
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any, Callable

from ...errors import PockError
from ...ops.base import same_or_valid_pads, window_out_size

ONNX_DTYPES = {1: "float32", 2: "uint8", 3: "int8", 4: "uint16", 5: "int16", 6: "int32", 7: "int64",
               8: "string", 9: "bool", 10: "float16", 11: "float64", 12: "uint32", 13: "uint64",
               16: "bfloat16", 21: "uint4", 22: "int4"}
QUANT_OPS = {"QuantizeLinear", "DequantizeLinear", "QLinearConv", "QLinearMatMul", "QLinearAdd", "QGemm",
             "QLinearGlobalAveragePool", "QLinearAveragePool", "QLinearConcat", "QLinearSoftmax",
             "ConvInteger", "MatMulInteger", "DynamicQuantizeLinear"}
#: op type -> the input positions that carry a scale or a zero point (QLinearConcat: below)
QPARAM_INPUTS = {"QuantizeLinear": (1, 2), "DequantizeLinear": (1, 2), "QLinearConv": (1, 2, 4, 5, 6, 7),
                 "QLinearMatMul": (1, 2, 4, 5, 6, 7), "QLinearAdd": (1, 2, 4, 5, 6, 7),
                 "QLinearMul": (1, 2, 4, 5, 6, 7), "QGemm": (1, 2, 4, 5, 7, 8),
                 "QLinearGlobalAveragePool": (1, 2, 3, 4), "QLinearAveragePool": (1, 2, 3, 4),
                 "QLinearSoftmax": (1, 2, 3, 4), "ConvInteger": (2, 3), "MatMulInteger": (2, 3)}


def node_attrs(node) -> dict[str, Any]:
    import onnx  # noqa: PLC0415  (optional: ONNX models only)

    return {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}


def read_model(path: Path):
    """The ModelProto of an .onnx file, with its initializers readable (PockError otherwise)."""
    try:
        import onnx  # noqa: PLC0415  (optional: ONNX models only)
    except ImportError:
        raise PockError(f"{path}: reading ONNX models needs the onnx package: pip install onnx") from None
    if not path.exists():
        raise PockError(f"{path}: no such file; give the path of a .tflite or .onnx model")
    if path.is_dir():
        raise PockError(f"{path}: is a directory; give the path of a .tflite or .onnx model")
    buf = path.read_bytes()
    if len(buf) == 0:
        raise PockError(f"{path}: file is empty, not an ONNX model")
    if buf[4:8] == b"TFL3":
        raise PockError(f"{path}: this is a TFLite model with an .onnx name; rename it to .tflite")
    try:
        model = onnx.load_model_from_string(buf)
    except Exception as exc:  # protobuf DecodeError and friends
        raise PockError(f"{path}: not an ONNX model or corrupt/truncated file ({type(exc).__name__}); "
                        "re-export it") from None
    if model.ir_version <= 0 or not model.HasField("graph") or len(model.graph.node) == 0:
        raise PockError(f"{path}: not an ONNX model (no graph with nodes); re-export it")
    try:
        for init in model.graph.initializer:
            onnx.numpy_helper.to_array(init)
    except Exception as exc:
        raise PockError(f"{path}: corrupt ONNX initializer data ({type(exc).__name__}); re-export the model") from None
    return model


def check_graph(path: Path, graph, supported) -> None:
    """Refuse, before converting anything, a float model, unsupported nodes (naming every one) and a
    dynamically quantized model. ``supported``: the ONNX op types the converter handles."""
    bad = []
    for k, node in enumerate(graph.node):
        if node.domain not in ("", "ai.onnx", "com.microsoft") or node.op_type not in supported:
            domain = "" if node.domain in ("", "ai.onnx") else f" in {node.domain}"
            bad.append(f"node #{k} '{node.name}' ({node.op_type}{domain})")
    if not any(n.op_type in QUANT_OPS for n in graph.node):
        raise PockError(f"{path}: a float model (no QuantizeLinear/DequantizeLinear or QLinear* nodes): "
                        "quantize it first with onnxruntime.quantization.quantize_static")
    if bad:
        shown = ", ".join(bad[:12]) + (f" and {len(bad) - 12} more" if len(bad) > 12 else "")
        raise PockError(f"{path}: cannot compile: unsupported ONNX ops: {shown}. Supported: "
                        + ", ".join(sorted(supported)))
    if any(n.op_type == "DynamicQuantizeLinear" for n in graph.node):
        raise PockError(f"{path}: dynamically quantized model (DynamicQuantizeLinear computes scales at "
                        "run time); quantize it statically with onnxruntime.quantization.quantize_static")
    fed = runtime_qparams(graph)
    if fed:
        shown = ", ".join(fed[:6]) + (f" and {len(fed) - 6} more" if len(fed) > 6 else "")
        raise PockError(f"{path}: quantization parameters are graph inputs, given at run time: {shown}; pockmcu "
                        "needs every scale and zero point fixed in the model: make them initializers (constants)")


def runtime_qparams(graph) -> list[str]:
    """Scales and zero points that are graph inputs (set by the caller at run time) rather than
    initializers, each once as "'name' (scale|zero point of node #k 'node' (op))" at its first use."""
    consts = {i.name for i in graph.initializer}
    fed = {vi.name for vi in graph.input} - consts
    found, seen = [], set()
    for k, node in enumerate(graph.node):
        if node.op_type == "QLinearConcat":     # Y_scale, Y_zero_point, then (X, scale, zero point) triples
            positions = [i for i in range(len(node.input)) if i < 2 or (i - 2) % 3]
        else:
            positions = QPARAM_INPUTS.get(node.op_type, ())
        for i in positions:
            name = node.input[i] if i < len(node.input) else ""
            if name and name in fed and name not in seen:
                seen.add(name)
                what = "zero point" if _is_zp(node.op_type, i) else "scale"
                found.append(f"'{name}' ({what} of node #{k} '{node.name}' ({node.op_type}))")
    return found


def _is_zp(op_type: str, i: int) -> bool:
    """Whether input i of a quantized op is a zero point (else a scale)."""
    if op_type == "QLinearConcat":
        return i == 1 or (i >= 2 and (i - 2) % 3 == 2)
    if op_type in ("ConvInteger", "MatMulInteger"):
        return True
    positions = QPARAM_INPUTS[op_type]
    return positions.index(i) % 2 == 1


def input_signature(path: Path, vi) -> tuple[tuple[int, ...], str]:
    """(static shape, dtype) of a model input; a symbolic (or 0 / -1) batch dimension becomes 1."""
    tt = vi.type.tensor_type
    dtype = ONNX_DTYPES.get(tt.elem_type, f"type{tt.elem_type}")
    if not tt.HasField("shape"):
        raise PockError(f"{path}: model input '{vi.name}' has no shape; give it a static shape "
                        "(e.g. onnxruntime.tools.make_dynamic_shape_fixed)")
    shape = []
    for i, d in enumerate(tt.shape.dim):
        if d.HasField("dim_value") and d.dim_value > 0:
            shape.append(int(d.dim_value))
        elif i == 0:
            shape.append(1)                     # symbolic batch -> 1
        else:
            raise PockError(f"{path}: model input '{vi.name}' has a dynamic dimension "
                            f"'{d.dim_param or '?'}' at axis {i}; fix it to a number, e.g. with "
                            "python -m onnxruntime.tools.make_dynamic_shape_fixed")
    shape = tuple(shape)
    if not shape:
        raise PockError(f"{path}: model input '{vi.name}' is a scalar; pockmcu needs a batch axis")
    if shape[0] != 1:
        raise PockError(f"{path}: model input '{vi.name}' {list(shape)} has a batch dimension of "
                        f"{shape[0]}; pockmcu runs one sample per inference: export with batch 1 or a "
                        "symbolic batch dimension")
    if dtype not in ("int8", "uint8", "float32"):
        raise PockError(f"{path}: model input '{vi.name}' is {dtype}; pockmcu takes int8, uint8 or "
                        "float32 inputs")
    return shape, dtype


def window(at: dict, in_hw, k_hw, strides, dil, err: Callable[[str], PockError], ceil_mode: int = 0):
    """((top, left, bottom, right) effective pads, (OH, OW)) of a 2-D window as ONNX defines them
    (auto_pad SAME_UPPER / SAME_LOWER / VALID, or explicit pads with ceil_mode)."""
    auto = at.get("auto_pad", b"NOTSET")
    auto = auto.decode() if isinstance(auto, bytes) else auto
    if min(list(k_hw) + list(strides) + list(dil)) < 1:
        raise err(f"kernel {list(k_hw)}, strides {list(strides)} and dilations {list(dil)} must be positive")
    eff = [(k_hw[i] - 1) * dil[i] + 1 for i in range(2)]
    if auto in ("SAME_UPPER", "SAME_LOWER", "VALID"):
        padding = "VALID" if auto == "VALID" else "SAME"
        out = [window_out_size(padding, in_hw[i], k_hw[i], strides[i], dil[i]) for i in range(2)]
        if min(out) <= 0:
            raise err(f"window {k_hw} does not fit the input {list(in_hw)}")
        pads = same_or_valid_pads(padding, in_hw, k_hw, strides, dil, out)
        begin = list(pads[2:] if auto == "SAME_LOWER" else pads[:2])    # SAME_LOWER: the extra pad goes first
    else:
        p = list(at.get("pads", [0, 0, 0, 0]))
        if len(p) != 4:
            raise err(f"pads {p} (need 4 values for a 2-D window)")
        if min(p) < 0:
            raise err(f"negative pads {p}")
        if max(p) > 1 << 16:
            raise err(f"pads {p} would make tensors far larger than a microcontroller holds")
        out, begin = [], p[:2]
        for i in range(2):
            span = in_hw[i] + p[i] + p[i + 2] - eff[i]
            o = (-(-span // strides[i]) if ceil_mode else span // strides[i]) + 1
            if ceil_mode and (o - 1) * strides[i] >= in_hw[i] + p[i]:
                o -= 1
            if o <= 0:
                raise err(f"window {k_hw} does not fit the input {list(in_hw)}")
            out.append(o)
    end = [max((out[i] - 1) * strides[i] + eff[i] - in_hw[i] - begin[i], 0) for i in range(2)]
    return (begin[0], begin[1], end[0], end[1]), tuple(out)


def ort_float_nodes(model) -> set[str]:
    """Names of the nodes onnxruntime's graph optimizer leaves in float (default session options, CPU
    execution provider): a Softmax between DequantizeLinear and QuantizeLinear becomes QLinearSoftmax
    only in some graphs (not, for example, when its QuantizeLinear output is a graph output), and the
    two compute differently. Asked of onnxruntime itself when it is installed; without it, a heuristic
    that holds for every model in tests/ and ../shared/models but is not onnxruntime's rule (a bare
    DequantizeLinear -> Softmax -> QuantizeLinear graph is fused although its QuantizeLinear is a graph
    output): a Softmax stays float when the QuantizeLinear after it is a graph output."""

    try:
        import onnx  # noqa: PLC0415  (optional: ONNX models only)
        import onnxruntime as ort  # noqa: PLC0415  (optional)
    except ImportError:
        outs = {o.name for o in model.graph.output}
        q_out = {n.input[0] for n in model.graph.node if n.op_type == "QuantizeLinear" and n.output[0] in outs}
        return {n.name for n in model.graph.node if n.op_type == "Softmax" and n.output[0] in q_out}
    with tempfile.TemporaryDirectory(prefix="pockmcu-ort-") as tmp:
        out = Path(tmp) / "optimized.onnx"
        try:
            so = ort.SessionOptions()
            so.log_severity_level = 4
            so.optimized_model_filepath = str(out)
            ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
            opt = onnx.load(str(out))
        except Exception:  # noqa: BLE001 - a model onnxruntime cannot load: assume the fused kernels
            return set()
    return {n.name for n in opt.graph.node if n.domain in ("", "ai.onnx") and n.op_type in ("Softmax", "Add")}
