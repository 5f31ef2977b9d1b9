"""The driver: an ONNX model -> graph IR, node by node in the model's order.

``load_onnx`` reads and checks the file (read.py), gives every model input an IR tensor (a uint8
input is flipped to int8 by an UINT8_TO_INT8 edge op), runs each node's handler (the ``HANDLERS``
table gathered from fold.py and the emit_* modules), turns the graph outputs into IR outputs
(DEQUANTIZE / INT8_TO_UINT8 edge ops where the model's dtype asks), then propagates quantization
through the byte-preserving ops, prunes and names the ops as the TFLite frontend does.
"""

from __future__ import annotations

from pathlib import Path

from ...errors import PockError
from ...ir import Graph
from ..names import short_name
from ..structure import check_structure
from . import emit_binary, emit_data, emit_eltwise, emit_linear, emit_move, emit_pool, emit_softmax, fold
from .build import Builder
from .layout import Layout
from .read import check_graph, input_signature, ort_float_nodes, read_model
from .values import Act, Deq, Pending, shift_zp

_FAMILIES = (fold, emit_linear, emit_pool, emit_eltwise, emit_data, emit_softmax, emit_binary, emit_move)
#: ONNX op type -> handler(builder, node)
HANDLERS = {op_type: h for m in _FAMILIES for op_type, h in m.HANDLERS.items()}
#: Pending kind -> emitter(builder, pending, out, quant, dtype)
EMITTERS = {kind: e for m in _FAMILIES for kind, e in getattr(m, "EMITTERS", {}).items()}

#: how the edge ops change the zero point (int8 <-> uint8 of the same real values)
ZP_SHIFT = {"RESHAPE": 0, "TRANSPOSE": 0, "UINT8_TO_INT8": -128, "INT8_TO_UINT8": 128}


def load_onnx(path: str | Path, numerics: str = "tflm") -> Graph:
    import onnx  # noqa: PLC0415  (optional: ONNX models only)

    path = Path(path)
    model = read_model(path)
    cx = Builder(path, model, numerics, ort_float_nodes(model) if numerics == "onnxruntime" else set(), EMITTERS)
    g = model.graph
    check_graph(path, g, HANDLERS)
    for init in g.initializer:
        try:
            cx.env[init.name] = onnx.numpy_helper.to_array(init)
        except Exception as exc:  # noqa: BLE001 - protobuf/numpy on a damaged initializer
            raise PockError(f"{path.name}: initializer '{init.name}' is damaged ({type(exc).__name__}: "
                            f"{str(exc)[:80]}); re-export the model") from None
    inputs = [model_input(cx, vi) for vi in g.input if vi.name not in cx.env]
    for k, node in enumerate(g.node):
        cx.k, cx.node = k, node
        try:
            HANDLERS[node.op_type](cx, node)
        except PockError:
            raise
        except KeyError as exc:      # an attribute or a value the node names does not exist
            raise cx.err(f"names {exc} which the model does not define (a missing attribute or input)") from None
        except MemoryError:
            raise cx.err("its attributes make a tensor too large to hold in memory") from None
        except (IndexError, ValueError, TypeError, ArithmeticError) as exc:
            raise cx.err(f"its attributes or inputs are inconsistent ({type(exc).__name__}: "
                         f"{str(exc)[:100]})") from None
    cx.k, cx.node = -1, None
    outputs = [model_output(cx, vi) for vi in g.output]

    graph = Graph(tensors=cx.tensors, ops=cx.ops, inputs=inputs, outputs=outputs, source=str(path), format="onnx")
    # which IR tensor holds which ONNX integer tensor, and how (tests compare layer by layer with onnxruntime)
    graph.onnx_values = {v.ir: (name, v.layout, v.shape, v.onnx_dtype) for name, v in cx.env.items()
                         if isinstance(v, Act) and v.onnx_dtype != "float32" and v.ir in cx.tensors}
    propagate_quant(graph)
    graph.prune()
    rename_ops(graph)
    check_structure(graph, Path(path).name)
    return graph


def model_input(cx: Builder, vi) -> str:
    shape, dtype = input_signature(cx.path, vi)
    name = cx.tensor(vi.name, shape, dtype)
    if dtype == "uint8":
        ir = cx.tensor(f"{vi.name}_int8", shape, "int8")
        cx.add_op("UINT8_TO_INT8", [name], [ir]).location = f"model input '{vi.name}'"
        cx.flip_src[ir] = name
        cx.env[vi.name] = Act(ir, Layout.identity(len(shape)), shape, "uint8")
    else:
        cx.env[vi.name] = Act(name, Layout.identity(len(shape)), shape, dtype)
    return name


def model_output(cx: Builder, vi) -> str:
    v = cx.env.get(vi.name)
    where = f"model output '{vi.name}'"
    if isinstance(v, Deq) and isinstance(v.src, Act):
        a = v.src
        x = cx.materialize(a, Layout.identity(len(a.shape)))
        if cx.q_of(x) is None:
            raise PockError(f"{cx.path}: {where}: quantization unknown")
        y = cx.tensor(vi.name, a.shape, "float32")
        cx.add_op("DEQUANTIZE", [x], [y]).location = where
        return y
    if isinstance(v, Act):
        ident = Layout.identity(len(v.shape))
        if v.onnx_dtype == "uint8":
            x = cx.materialize(v, ident)
            q = cx.q_of(x)
            y = cx.tensor(vi.name, v.shape, "uint8", None if q is None else shift_zp(q, 128))
            cx.add_op("INT8_TO_UINT8", [x], [y]).location = where
            return y
        return cx.materialize(v, ident, hint=vi.name)
    if isinstance(v, Pending):
        raise PockError(f"{cx.path}: {where} is the float result of node #{v.node} with no QuantizeLinear "
                        "after it; pockmcu needs quantized outputs (quantize the model's outputs too)")
    raise PockError(f"{cx.path}: {where} is not a computed activation")


def propagate_quant(g: Graph) -> None:
    """Quantization known on one side of a byte-preserving op (RESHAPE, TRANSPOSE, uint8 <-> int8) is
    given to the other side, until nothing changes (a model input learns its quantization late)."""
    changed = True
    while changed:
        changed = False
        for op in g.ops:
            if op.kind not in ZP_SHIFT:
                continue
            x, y = g.tensors[op.inputs[0]], g.tensors[op.outputs[0]]
            shift = ZP_SHIFT[op.kind]
            if x.quant is not None and y.quant is None:
                y.quant = shift_zp(x.quant, shift)
                changed = True
            elif y.quant is not None and x.quant is None:
                x.quant = shift_zp(y.quant, -shift)
                changed = True


def rename_ops(g: Graph) -> None:
    """Number ops per kind in schedule order after pruning (conv0, dwconv0, fc0, ...), as the TFLite
    frontend does, so that layer names are stable and match the TFLite model's where the graphs agree."""
    counters: dict[str, int] = {}
    for op in g.ops:
        short = short_name(op.kind)
        k = counters.get(short, 0)
        counters[short] = k + 1
        op.name = f"{short}{k}"
