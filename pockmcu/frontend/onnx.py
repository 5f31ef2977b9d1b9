"""ONNX (int8/uint8, QDQ or QOperator form) -> graph IR.

The result is the same IR the TFLite frontend builds (op kinds CONV_2D,
DEPTHWISE_CONV_2D, FULLY_CONNECTED, ... with the attributes their OpDefs
expect), so planning, code generation, kernels and the numpy reference are
shared. What this module does:

* **QDQ folding.** A float tensor between ``DequantizeLinear`` and
  ``QuantizeLinear`` is notation. ``DequantizeLinear`` of an integer tensor
  gives a ``Deq`` value; float ops on ``Deq`` inputs become a ``Pending`` op
  that waits for the ``QuantizeLinear`` deciding its output quantization,
  swallowing on the way a bias ``Add`` (MatMul + Add -> FULLY_CONNECTED) and
  ``Relu``/``Clip`` (-> the fused activation, or an exact clamp). Weights and
  biases behind ``DequantizeLinear`` become constant int8 / int32 tensors with
  their float32 scales exactly as stored. QOperator nodes (QLinearConv,
  QLinearMatMul, QGemm, QLinearAdd, ...) map onto the same emitters directly.
* **uint8.** onnxruntime's default activation type is uint8; every uint8
  activation is held as int8 with zero point - 128 (exact: same real values).
  A uint8 model input or output gets an UINT8_TO_INT8 / INT8_TO_UINT8 edge op.
* **Layouts.** Activations are NHWC inside, whatever the model says; see
  onnx_layout.py for how a value's IR layout is tracked and when bytes move
  (TRANSPOSE) and when they do not (tf2onnx's input transpose, a flatten
  feeding a fully connected layer: its weight rows are permuted instead).
* **Shapes.** A symbolic (or 0 / -1) batch dimension becomes 1; every other
  dimension must be static. Shapes are computed here, op by op.

Errors are one line (PockError): not an ONNX file, a float-only model, every
unsupported node at once (index, name, type), dynamic dimensions, and the
first node whose quantized semantics pockmcu cannot reproduce.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .. import fixedpoint as fp
from ..errors import PockError
from ..ir import Graph, Op, Quant, Tensor
from .onnx_layout import NCHW_AS_NHWC, Layout, compose_transpose, inverse, relative_perm

INF = math.inf
ONNX_DTYPES = {1: "float32", 2: "uint8", 3: "int8", 4: "uint16", 5: "int16", 6: "int32", 7: "int64",
               8: "string", 9: "bool", 10: "float16", 11: "float64", 12: "uint32", 13: "uint64",
               16: "bfloat16", 21: "uint4", 22: "int4"}
QUANT_OPS = {"QuantizeLinear", "DequantizeLinear", "QLinearConv", "QLinearMatMul", "QLinearAdd", "QGemm",
             "QLinearGlobalAveragePool", "QLinearAveragePool", "QLinearConcat", "QLinearSoftmax",
             "ConvInteger", "MatMulInteger", "DynamicQuantizeLinear"}
#: named fused activations by their float range
NAMED_ACTIVATIONS = {(-INF, INF): "NONE", (0.0, INF): "RELU", (0.0, 6.0): "RELU6", (-1.0, 1.0): "RELU_N1_TO_1"}
#: pending ops that may read the float model input directly (they commute with quantization)
FLOAT_INPUT_OK = {"PAD", "MAX_POOL_2D", "CONCAT", "CLAMP"}
SHORT_NAMES = {"fully_connected": "fc", "average_pool": "avgpool", "max_pool": "maxpool",
               "concatenation": "concat", "average_pool_requant": "avgpool_requant",
               "uint8_to_int8": "from_uint8", "int8_to_uint8": "to_uint8"}


def short_name(kind: str) -> str:
    """Op name stem, as the TFLite frontend makes it (conv, dwconv, fc, avgpool, ...)."""
    short = kind.lower().replace("_2d", "").replace("depthwise_conv", "dwconv")
    return SHORT_NAMES.get(short, short)


# -- values the converter passes between nodes ------------------------------------------------


@dataclass
class Act:
    """An activation: IR tensor ``ir`` holds the ONNX value of ``shape`` in ``layout``."""

    ir: str
    layout: Layout
    shape: tuple[int, ...]
    onnx_dtype: str                     # int8 | uint8 | float32 (the model's own dtype)


@dataclass
class QConst:
    """A quantized constant (weights, biases): integer data as stored, float32 scale, zero point."""

    data: np.ndarray
    scale: np.ndarray | None            # None: implied (QOperator bias: s_x * s_w)
    zp: np.ndarray
    axis: int
    name: str


@dataclass
class Deq:
    """The float value DequantizeLinear(src): exactly representable, nothing computed yet."""

    src: Act | QConst


@dataclass
class Pending:
    """A float op on dequantized inputs, emitted when a QuantizeLinear fixes its output quantization."""

    kind: str
    node: int
    inputs: list[Act]
    attrs: dict[str, Any] = field(default_factory=dict)
    lo: float = -INF
    hi: float = INF
    int_acc: bool = False               # ConvInteger / MatMulInteger: integer accumulator, scale from a Mul
    acc_scale: np.ndarray | None = None


def _attrs(node) -> dict[str, Any]:
    import onnx  # noqa: PLC0415

    return {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}


def _rne_quant(x, scale, zp: int) -> int:
    """onnxruntime QuantizeLinear of one float value into the int8 domain (round half to even)."""
    v = np.float32(np.float32(x) / np.float32(scale))
    return int(np.clip(np.rint(v) + zp, -128, 127))


def _same_quant(a: Quant | None, b: Quant | None) -> bool:
    if a is None or b is None:
        return a is b
    return (a.scale.shape == b.scale.shape and np.array_equal(a.scale, b.scale)
            and np.array_equal(a.zero_point, b.zero_point))


def _copy_quant(q: Quant | None) -> Quant | None:
    return None if q is None else Quant(scale=q.scale.copy(), zero_point=q.zero_point.copy(), axis=q.axis)


def _int_data(data: np.ndarray, zp) -> tuple[np.ndarray, np.ndarray]:
    """uint8 -> int8 (values and zero points - 128); others unchanged."""
    zp = np.asarray(zp).astype(np.int64)
    if data.dtype == np.uint8:
        return (data.astype(np.int16) - 128).astype(np.int8), zp - 128
    return data, zp


# -- loading ------------------------------------------------------------------------------------


def _read(path: Path):
    try:
        import onnx  # noqa: PLC0415
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


def load_onnx(path: str | Path, numerics: str = "tflm") -> Graph:
    path = Path(path)
    model = _read(path)
    conv = _Converter(path, model)
    conv.numerics = numerics
    conv.ort_float_nodes = ort_float_nodes(model) if numerics == "onnxruntime" else set()
    return conv.run()


def ort_float_nodes(model) -> set[str]:
    """Names of the nodes onnxruntime's graph optimizer leaves in float (default session options, CPU
    execution provider): a Softmax between DequantizeLinear and QuantizeLinear becomes QLinearSoftmax
    only in some graphs (not, for example, when its QuantizeLinear output is a graph output), and the
    two compute differently. Asked of onnxruntime itself when it is installed; without it, a heuristic
    that holds for every model in tests/ and ../shared/models but is not onnxruntime's rule (a bare
    DequantizeLinear -> Softmax -> QuantizeLinear graph is fused although its QuantizeLinear is a graph
    output): a Softmax stays float when the QuantizeLinear after it is a graph output."""
    import tempfile  # noqa: PLC0415

    try:
        import onnx  # noqa: PLC0415
        import onnxruntime as ort  # noqa: PLC0415
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


class _Converter:
    def __init__(self, path: Path, model):
        self.path = path
        self.model = model
        self.graph = model.graph
        self.tensors: dict[str, Tensor] = {}
        self.ops: list[Op] = []
        self.env: dict[str, Any] = {}
        self.used_tensor_names: set[str] = set()
        self.alias_root: dict[str, str] = {}
        self.alias_members: dict[str, list[str]] = {}
        self.flip_src: dict[str, str] = {}            # int8 IR tensor -> the uint8 model input it mirrors
        self.mat_cache: dict[tuple, str] = {}
        self.k = -1
        self.node = None
        self.opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 13)
        self.numerics = "tflm"
        self.ort_float_nodes: set[str] = set()

    # -- messages -----------------------------------------------------------------------------
    def where(self) -> str:
        n = self.node
        return f"node #{self.k} '{n.name}' ({n.op_type})" if n is not None else "graph"

    def err(self, msg: str) -> PockError:
        return PockError(f"{self.path}: {self.where()}: {msg}")

    # -- IR construction ------------------------------------------------------------------------
    def tensor(self, hint: str, shape, dtype: str, quant: Quant | None = None, data=None) -> str:
        name, k = hint or "t", 1
        while name in self.used_tensor_names:
            name, k = f"{hint}_{k}", k + 1
        self.used_tensor_names.add(name)
        self.tensors[name] = Tensor(name=name, shape=tuple(int(d) for d in shape), dtype=dtype,
                                    quant=quant, data=data)
        return name

    def const(self, hint: str, data: np.ndarray, quant: Quant | None = None) -> str:
        data = np.ascontiguousarray(data)
        return self.tensor(hint, data.shape, str(data.dtype), quant, data)

    def add_op(self, kind: str, inputs: list[str], outputs: list[str], **attrs) -> Op:
        """Append an op (named for now; rename_ops numbers the survivors of pruning)."""
        op = Op(kind=kind, name=f"op{len(self.ops)}", inputs=inputs, outputs=outputs, attrs=dict(attrs),
                location=self.where())
        self.ops.append(op)
        return op

    def q_of(self, ir: str) -> Quant | None:
        return self.tensors[ir].quant

    def set_quant(self, ir: str, q: Quant) -> None:
        """Give a tensor (and every alias of it) the quantization a consumer reveals (model inputs)."""
        root = self.alias_root.get(ir, ir)
        for m in self.alias_members.get(root, [root]):
            if self.tensors[m].quant is None:
                self.tensors[m].quant = _copy_quant(q)
            if m in self.flip_src and self.tensors[self.flip_src[m]].quant is None:
                self.tensors[self.flip_src[m]].quant = Quant(scale=q.scale.copy(),
                                                              zero_point=q.zero_point + 128)

    def alias(self, ir: str, shape, quant: Quant | None = None, hint: str | None = None) -> str:
        """The bytes of ``ir`` seen with another shape (and possibly another quantization): a RESHAPE."""
        shape = tuple(int(d) for d in shape)
        t = self.tensors[ir]
        quant = t.quant if quant is None else quant
        root = self.alias_root.get(ir, ir)
        members = self.alias_members.setdefault(root, [root])
        for m in members:
            if self.tensors[m].shape == shape and _same_quant(self.tensors[m].quant, quant):
                return m
        out = self.tensor(hint or f"{root}_reshaped", shape, t.dtype, _copy_quant(quant))
        self.add_op("RESHAPE", [ir], [out])
        self.alias_root[out] = root
        members.append(out)
        return out

    def transpose(self, ir: str, perm, hint: str | None = None) -> str:
        t = self.tensors[ir]
        perm = tuple(int(p) for p in perm)
        if perm[0] != 0:
            raise self.err(f"a layout change {list(perm)} would move the batch axis")
        if len(perm) > 4:
            raise self.err(f"a layout change of a rank-{len(perm)} tensor is needed (at most 4 supported)")
        if t.dtype != "int8":
            raise self.err(f"a layout change of the {t.dtype} tensor '{ir}' is needed; only int8 tensors "
                           "can be transposed (quantize before transposing)")
        out = self.tensor(hint or f"{ir}_t{''.join(map(str, perm))}", tuple(t.shape[p] for p in perm), "int8",
                          _copy_quant(t.quant))
        self.add_op("TRANSPOSE", [ir], [out], perm=perm)
        return out

    def materialize(self, a: Act, target: Layout, hint: str | None = None) -> str:
        """The IR tensor holding ``a`` in ``target`` layout (moves bytes only when it must)."""
        if a.layout == target:
            return a.ir
        key = (a.ir, a.layout, target)
        if key in self.mat_cache:
            return self.mat_cache[key]
        tshape = target.ir_shape(a.shape)
        if np.array_equal(a.layout.flat_index(a.shape), target.flat_index(a.shape)):
            out = self.alias(a.ir, tshape, hint=hint)
        elif target.pre is not None:
            raise self.err("internal: cannot lay out a value as a flatten")
        elif a.layout.pre is None:
            out = self.transpose(a.ir, relative_perm(a.layout, target), hint=hint)
        else:
            pre, perm = a.layout.pre, a.layout.perm
            held = self.alias(a.ir, tuple(pre[p] for p in perm))
            x = self.transpose(held, inverse(perm))
            out = self.alias(x, tshape, hint=hint)
        self.mat_cache[key] = out
        return out

    # -- reading node inputs ----------------------------------------------------------------------
    def val(self, name: str):
        if not name:
            return None
        if name not in self.env:
            raise self.err(f"input '{name}' is not produced by any earlier node")
        return self.env[name]

    def cval(self, name: str, what: str = "input") -> np.ndarray:
        v = self.val(name)
        if not isinstance(v, np.ndarray):
            raise self.err(f"{what} '{name}' must be a constant")
        return v

    def qparams(self, node, scale_i: int, zp_i: int, default_dtype: str = "uint8"):
        """(scale float32 1-D, zero point int64 1-D, integer dtype) from a node's scale/zero-point inputs."""
        scale = self.cval(node.input[scale_i], "scale").astype(np.float32).reshape(-1)
        zp_name = node.input[zp_i] if len(node.input) > zp_i else ""
        if zp_name:
            zp = self.cval(zp_name, "zero point")
            dtype = str(zp.dtype)
            zp = zp.astype(np.int64).reshape(-1)
        else:
            zp, dtype = np.zeros(scale.shape, np.int64), default_dtype
        if not np.all(np.isfinite(scale)) or np.any(scale <= 0):
            raise self.err(f"scale {scale.tolist()[:4]} is not positive and finite")
        if zp.size == 1 and scale.size > 1:
            zp = np.full(scale.shape, zp[0], np.int64)
        return scale, zp, dtype

    def act_quant(self, scale, zp, dtype: str) -> Quant:
        if scale.size != 1:
            raise self.err("per-channel quantization of an activation (only weights may be per-channel)")
        if dtype not in ("int8", "uint8"):
            raise self.err(f"{dtype} activations (pockmcu runs int8/uint8 models)")
        z = int(zp[0]) - (128 if dtype == "uint8" else 0)
        return Quant(scale=scale.astype(np.float32).copy(), zero_point=np.array([z], np.int32))

    def with_quant(self, a: Act, q: Quant) -> Act:
        """``a`` read with quantization ``q`` (model inputs learn theirs here)."""
        cur = self.q_of(a.ir)
        if cur is None:
            self.set_quant(a.ir, q)
            return a
        if _same_quant(cur, q):
            return a
        return Act(self.alias(a.ir, self.tensors[a.ir].shape, quant=q), a.layout, a.shape, a.onnx_dtype)

    def act_input(self, name: str, what: str = "input") -> Act:
        v = self.val(name)
        if isinstance(v, Deq) and isinstance(v.src, Act):
            return v.src
        if isinstance(v, Act) and v.onnx_dtype != "float32":
            return v
        raise self.err(f"{what} '{name}' must be a quantized activation (int8/uint8, or DequantizeLinear of one)")

    # -- the driver ---------------------------------------------------------------------------------
    def run(self) -> Graph:
        import onnx  # noqa: PLC0415

        g = self.graph
        handlers = {}
        bad = []
        for k, node in enumerate(g.node):
            h = getattr(self, f"op_{node.op_type}", None)
            if node.domain not in ("", "ai.onnx", "com.microsoft") or h is None:
                bad.append(f"node #{k} '{node.name}' ({node.op_type}{'' if node.domain in ('', 'ai.onnx') else ' in ' + node.domain})")
            handlers[k] = h
        if not any(n.op_type in QUANT_OPS for n in g.node):
            raise PockError(f"{self.path}: a float model (no QuantizeLinear/DequantizeLinear or QLinear* nodes): "
                            "quantize it first with onnxruntime.quantization.quantize_static")
        if bad:
            shown = ", ".join(bad[:12]) + (f" and {len(bad) - 12} more" if len(bad) > 12 else "")
            raise PockError(f"{self.path}: cannot compile: unsupported ONNX ops: {shown}. Supported: "
                            + ", ".join(sorted(n[3:] for n in dir(self) if n.startswith("op_"))))
        dyn = [n for n in g.node if n.op_type == "DynamicQuantizeLinear"]
        if dyn:
            raise PockError(f"{self.path}: dynamically quantized model (DynamicQuantizeLinear computes scales at "
                            "run time); quantize it statically with onnxruntime.quantization.quantize_static")

        for init in g.initializer:
            self.env[init.name] = onnx.numpy_helper.to_array(init)
        inputs = []
        for vi in g.input:
            if vi.name in self.env:
                continue
            inputs.append(self.model_input(vi))
        for k, node in enumerate(g.node):
            self.k, self.node = k, node
            handlers[k](node)
        self.k, self.node = -1, None
        outputs = [self.model_output(vi) for vi in g.output]

        graph = Graph(tensors=self.tensors, ops=self.ops, inputs=inputs, outputs=outputs,
                      source=str(self.path), format="onnx")
        # which IR tensor holds which ONNX integer tensor, and how (tests compare layer by layer with onnxruntime)
        graph.onnx_values = {v.ir: (name, v.layout, v.shape, v.onnx_dtype) for name, v in self.env.items()
                             if isinstance(v, Act) and v.onnx_dtype != "float32" and v.ir in self.tensors}
        self.propagate_quant(graph)
        graph.prune()
        self.rename_ops(graph)
        return graph

    @staticmethod
    def rename_ops(g: Graph) -> None:
        """Number ops per kind in schedule order after pruning (conv0, dwconv0, fc0, ...), as the TFLite
        frontend does, so that layer names are stable and match the TFLite model's where the graphs agree."""
        counters: dict[str, int] = {}
        for op in g.ops:
            short = short_name(op.kind)
            k = counters.get(short, 0)
            counters[short] = k + 1
            op.name = f"{short}{k}"

    def model_input(self, vi) -> str:
        tt = vi.type.tensor_type
        dtype = ONNX_DTYPES.get(tt.elem_type, f"type{tt.elem_type}")
        if not tt.HasField("shape"):
            raise PockError(f"{self.path}: model input '{vi.name}' has no shape; give it a static shape "
                            "(e.g. onnxruntime.tools.make_dynamic_shape_fixed)")
        shape = []
        for i, d in enumerate(tt.shape.dim):
            if d.HasField("dim_value") and d.dim_value > 0:
                shape.append(int(d.dim_value))
            elif i == 0:
                shape.append(1)                     # symbolic batch -> 1
            else:
                raise PockError(f"{self.path}: model input '{vi.name}' has a dynamic dimension "
                                f"'{d.dim_param or '?'}' at axis {i}; fix it to a number, e.g. with "
                                "python -m onnxruntime.tools.make_dynamic_shape_fixed")
        shape = tuple(shape)
        if not shape:
            raise PockError(f"{self.path}: model input '{vi.name}' is a scalar; pockmcu needs a batch axis")
        if shape[0] != 1:
            raise PockError(f"{self.path}: model input '{vi.name}' {list(shape)} has a batch dimension of "
                            f"{shape[0]}; pockmcu runs one sample per inference: export with batch 1 or a "
                            "symbolic batch dimension")
        if dtype not in ("int8", "uint8", "float32"):
            raise PockError(f"{self.path}: model input '{vi.name}' is {dtype}; pockmcu takes int8, uint8 or "
                            "float32 inputs")
        name = self.tensor(vi.name, shape, dtype)
        if dtype == "uint8":
            ir = self.tensor(f"{vi.name}_int8", shape, "int8")
            self.k, self.node = -1, None
            self.add_op("UINT8_TO_INT8", [name], [ir]).location = f"model input '{vi.name}'"
            self.flip_src[ir] = name
            self.env[vi.name] = Act(ir, Layout.identity(len(shape)), shape, "uint8")
        else:
            self.env[vi.name] = Act(name, Layout.identity(len(shape)), shape, dtype)
        return name

    def model_output(self, vi) -> str:
        v = self.env.get(vi.name)
        where = f"model output '{vi.name}'"
        if isinstance(v, Deq) and isinstance(v.src, Act):
            a = v.src
            x = self.materialize(a, Layout.identity(len(a.shape)))
            if self.q_of(x) is None:
                raise PockError(f"{self.path}: {where}: quantization unknown")
            y = self.tensor(vi.name, a.shape, "float32")
            self.add_op("DEQUANTIZE", [x], [y]).location = where
            return y
        if isinstance(v, Act):
            ident = Layout.identity(len(v.shape))
            if v.onnx_dtype == "uint8":
                x = self.materialize(v, ident)
                q = self.q_of(x)
                y = self.tensor(vi.name, v.shape, "uint8",
                                None if q is None else Quant(scale=q.scale.copy(), zero_point=q.zero_point + 128))
                self.add_op("INT8_TO_UINT8", [x], [y]).location = where
                return y
            return self.materialize(v, ident, hint=vi.name)
        if isinstance(v, Pending):
            raise PockError(f"{self.path}: {where} is the float result of node #{v.node} with no QuantizeLinear "
                            "after it; pockmcu needs quantized outputs (quantize the model's outputs too)")
        raise PockError(f"{self.path}: {where} is not a computed activation")

    def propagate_quant(self, g: Graph) -> None:
        changed = True
        while changed:
            changed = False
            for op in g.ops:
                if op.kind not in ("RESHAPE", "TRANSPOSE", "UINT8_TO_INT8", "INT8_TO_UINT8"):
                    continue
                x, y = self.tensors[op.inputs[0]], self.tensors[op.outputs[0]]
                shift = {"UINT8_TO_INT8": -128, "INT8_TO_UINT8": 128}.get(op.kind, 0)
                if x.quant is not None and y.quant is None:
                    y.quant = Quant(scale=x.quant.scale.copy(), zero_point=x.quant.zero_point + shift)
                    changed = True
                elif y.quant is not None and x.quant is None:
                    x.quant = Quant(scale=y.quant.scale.copy(), zero_point=y.quant.zero_point - shift)
                    changed = True

    # -- constants and shape arithmetic ------------------------------------------------------------
    def op_Constant(self, node):
        import onnx  # noqa: PLC0415

        a = node.attribute[0]
        if a.name == "value":
            v = onnx.numpy_helper.to_array(a.t)
        elif a.name in ("value_float", "value_int"):
            v = np.array(onnx.helper.get_attribute_value(a), np.float32 if a.name == "value_float" else np.int64)
        elif a.name in ("value_floats", "value_ints"):
            v = np.array(onnx.helper.get_attribute_value(a), np.float32 if a.name == "value_floats" else np.int64)
        else:
            raise self.err(f"Constant with {a.name} is not supported")
        self.env[node.output[0]] = v

    def op_Shape(self, node):
        v = self.val(node.input[0])
        shape = v.shape if isinstance(v, (np.ndarray, Act)) else v.src.shape if isinstance(v, Deq) else None
        if shape is None:
            raise self.err("Shape of a value whose shape is not known here")
        s = np.array(shape, np.int64)
        at = _attrs(node)
        self.env[node.output[0]] = s[at.get("start", 0):at.get("end", len(s))]

    def op_Gather(self, node):
        data, idx = self.cval(node.input[0], "data"), self.cval(node.input[1], "indices")
        self.env[node.output[0]] = np.take(data, idx, axis=_attrs(node).get("axis", 0))

    def op_Cast(self, node):
        v = self.val(node.input[0])
        to = ONNX_DTYPES.get(_attrs(node)["to"], "?")
        if isinstance(v, np.ndarray) and to in ("float32", "int64", "int32", "int8", "uint8", "float64", "bool"):
            self.env[node.output[0]] = v.astype(to)
        elif isinstance(v, Pending) and v.int_acc and to == "float32":
            self.env[node.output[0]] = v
        else:
            raise self.err(f"Cast to {to} of an activation (only of constants, or of a ConvInteger/MatMulInteger "
                           "result before its scale Mul)")

    def op_Mul(self, node):
        a, b = self.val(node.input[0]), self.val(node.input[1])
        if isinstance(a, np.ndarray) and isinstance(b, np.ndarray):
            self.env[node.output[0]] = a * b
            return
        p, c = (a, b) if isinstance(a, Pending) else (b, a)
        if isinstance(p, Pending) and p.int_acc and p.acc_scale is None and isinstance(c, np.ndarray):
            p = Pending(**{**p.__dict__, "acc_scale": self.channel_vector(p, c.astype(np.float32), "scale")})
            self.env[node.output[0]] = p
            return
        raise self.err("Mul is supported only as the scale of a ConvInteger/MatMulInteger result "
                       "(or between constants)")

    # -- QuantizeLinear / DequantizeLinear ----------------------------------------------------------
    def op_QuantizeLinear(self, node):
        x = self.val(node.input[0])
        scale, zp, dtype = self.qparams(node, 1, 2)
        axis = _attrs(node).get("axis", 1)
        out = node.output[0]
        if isinstance(x, np.ndarray):
            ax = axis % max(x.ndim, 1)
            s, z = scale, zp
            if s.size > 1:
                shp = [1] * x.ndim
                shp[ax] = -1
                s, z = s.reshape(shp), z.reshape(shp)
            info = np.iinfo(dtype)
            q = np.clip(np.rint(x.astype(np.float32) / s.astype(np.float32)) + z, info.min, info.max).astype(dtype)
            self.env[out] = QConst(q, scale, zp, ax, out)
            return
        q = self.act_quant(scale, zp, dtype)
        if isinstance(x, Pending):
            self.env[out] = self.emit(x, out, q, dtype)
        elif isinstance(x, Deq) and isinstance(x.src, Act):
            a = x.src
            if _same_quant(self.q_of(a.ir), q):
                self.env[out] = Act(a.ir, a.layout, a.shape, dtype)
            else:
                self.env[out] = self.emit(Pending("CLAMP", self.k, [a]), out, q, dtype)
        elif isinstance(x, Act) and x.onnx_dtype == "float32":
            y = self.tensor(out, self.tensors[x.ir].shape, "int8", q)
            self.add_op("QUANTIZE", [x.ir], [y])
            self.env[out] = Act(y, x.layout, x.shape, dtype)
        else:
            raise self.err(f"QuantizeLinear of {type(x).__name__} '{node.input[0]}' is not supported")

    def op_DequantizeLinear(self, node):
        x = self.val(node.input[0])
        default = str(x.dtype) if isinstance(x, np.ndarray) else "uint8"
        scale, zp, dtype = self.qparams(node, 1, 2, default)
        axis = _attrs(node).get("axis", 1)
        out = node.output[0]
        if isinstance(x, QConst):
            x = x.data
        if isinstance(x, np.ndarray):
            if x.dtype.kind not in "iu":
                raise self.err(f"DequantizeLinear of a {x.dtype} constant")
            self.env[out] = Deq(QConst(x, scale, zp, axis % max(x.ndim, 1), node.input[0]))
        elif isinstance(x, Act) and x.onnx_dtype != "float32":
            self.env[out] = Deq(self.with_quant(x, self.act_quant(scale, zp, x.onnx_dtype)))
        else:
            raise self.err(f"DequantizeLinear of {type(x).__name__} '{node.input[0]}' is not supported")

    # -- data movement -----------------------------------------------------------------------------
    def moved(self, node, new_shape=None, perm=None):
        """Reshape-like (new_shape) or Transpose (perm) of whatever the input is."""
        x = self.val(node.input[0])
        out = node.output[0]
        if isinstance(x, np.ndarray):
            self.env[out] = x.transpose(perm) if perm is not None else x.reshape(new_shape)
        elif isinstance(x, QConst) or (isinstance(x, Deq) and isinstance(x.src, QConst)):
            qc = x if isinstance(x, QConst) else x.src
            if qc.scale is not None and qc.scale.size > 1:
                raise self.err("reshaping a per-channel quantized constant")
            data = qc.data.transpose(perm) if perm is not None else qc.data.reshape(new_shape)
            nq = QConst(data, qc.scale, qc.zp, 0, qc.name)
            self.env[out] = nq if isinstance(x, QConst) else Deq(nq)
        elif isinstance(x, Act):
            self.env[out] = self.move_act(x, new_shape, perm)
        elif isinstance(x, Deq):
            self.env[out] = Deq(self.move_act(x.src, new_shape, perm))
        else:
            raise self.err(f"{node.op_type} of a float result that is not quantized first")

    def move_act(self, a: Act, new_shape=None, perm=None) -> Act:
        if perm is not None:
            perm = tuple(int(p) % len(a.shape) for p in perm)
            if perm == tuple(range(len(a.shape))):
                return a
            if a.layout.pre is not None:
                a = Act(self.materialize(a, Layout.identity(len(a.shape))), Layout.identity(len(a.shape)),
                        a.shape, a.onnx_dtype)
            lay = compose_transpose(perm, a.layout)
            if lay.perm[0] != 0:
                raise self.err(f"Transpose {list(perm)} moves the batch axis")
            return Act(a.ir, lay, tuple(a.shape[p] for p in perm), a.onnx_dtype)
        new_shape = tuple(int(d) for d in new_shape)
        if new_shape == a.shape:
            return a
        if not new_shape or new_shape[0] != 1:
            raise self.err(f"reshape of {list(a.shape)} to {list(new_shape)} changes the batch axis")
        if int(np.prod(new_shape)) != int(np.prod(a.shape)):
            raise self.err(f"reshape of {list(a.shape)} to {list(new_shape)}")
        ident = Layout.identity(len(new_shape))
        if a.layout.same_bytes_as_onnx(a.shape):
            return Act(self.alias(a.ir, new_shape), ident, new_shape, a.onnx_dtype)
        if len(new_shape) == 2 and a.layout.pre is None:
            return Act(self.alias(a.ir, new_shape), Layout(a.layout.perm, a.shape), new_shape, a.onnx_dtype)
        x = self.materialize(a, Layout.identity(len(a.shape)))
        return Act(self.alias(x, new_shape), ident, new_shape, a.onnx_dtype)

    def in_shape(self, node) -> tuple[int, ...]:
        x = self.val(node.input[0])
        if isinstance(x, np.ndarray):
            return x.shape
        if isinstance(x, QConst):
            return x.data.shape
        if isinstance(x, Deq):
            return x.src.shape if isinstance(x.src, Act) else x.src.data.shape
        if isinstance(x, Act):
            return x.shape
        raise self.err("input is a float result that is not quantized first")

    def op_Reshape(self, node):
        shape = self.in_shape(node)
        spec = [int(d) for d in self.cval(node.input[1], "shape").reshape(-1)]
        allowzero = _attrs(node).get("allowzero", 0)
        new = [shape[i] if (d == 0 and not allowzero and i < len(shape)) else d for i, d in enumerate(spec)]
        if new.count(-1) == 1:
            known = int(np.prod([d for d in new if d != -1]))
            new[new.index(-1)] = int(np.prod(shape)) // max(known, 1)
        self.moved(node, new_shape=tuple(new))

    def op_Flatten(self, node):
        shape = self.in_shape(node)
        axis = _attrs(node).get("axis", 1) % (len(shape) + 1) if shape else 0
        self.moved(node, new_shape=(int(np.prod(shape[:axis])), int(np.prod(shape[axis:]))))

    def _axes(self, node, rank: int) -> list[int]:
        at = _attrs(node)
        axes = at.get("axes")
        if axes is None and len(node.input) > 1 and node.input[1]:
            axes = self.cval(node.input[1], "axes").reshape(-1).tolist()
        return None if axes is None else sorted(int(a) % rank for a in axes)

    def op_Squeeze(self, node):
        shape = self.in_shape(node)
        axes = self._axes(node, len(shape))
        if axes is None:
            axes = [i for i, d in enumerate(shape) if d == 1 and i > 0]
        if 0 in axes:
            raise self.err("Squeeze of the batch axis")
        self.moved(node, new_shape=tuple(d for i, d in enumerate(shape) if i not in axes))

    def op_Unsqueeze(self, node):
        shape = self.in_shape(node)
        axes = _attrs(node).get("axes")
        if axes is None:
            axes = self.cval(node.input[1], "axes").reshape(-1).tolist()
        rank = len(shape) + len(axes)
        new = list(shape)
        for a in sorted(int(a) % rank for a in axes):
            new.insert(a, 1)
        self.moved(node, new_shape=tuple(new))

    def op_Transpose(self, node):
        shape = self.in_shape(node)
        perm = _attrs(node).get("perm") or list(range(len(shape)))[::-1]
        self.moved(node, perm=perm)

    def op_Identity(self, node):
        self.env[node.output[0]] = self.val(node.input[0])

    op_Dropout = op_Identity

    # -- float ops between DequantizeLinear and QuantizeLinear --------------------------------------------
    def channel_vector(self, p: Pending, c: np.ndarray, what: str) -> np.ndarray:
        """A constant that ONNX broadcasting applies per output channel of a pending conv (NCHW: [C, 1, 1])
        or per output feature of an FC ([N]), as a vector [C] (or [1] for a scalar)."""
        c = np.asarray(c)
        if c.size == 1:
            return c.reshape(1)
        if p.kind in ("CONV_2D", "DEPTHWISE_CONV_2D"):
            if c.ndim >= 3 and c.shape[-3] == c.size:
                return c.reshape(-1)
            raise self.err(f"{what} of shape {list(c.shape)} is not per output channel of an NCHW conv")
        if c.shape[-1] == c.size:
            return c.reshape(-1)
        raise self.err(f"{what} of shape {list(c.shape)} is not per output feature")

    def op_Add(self, node):
        a, b = self.val(node.input[0]), self.val(node.input[1])
        out = node.output[0]
        if isinstance(a, np.ndarray) and isinstance(b, np.ndarray):
            self.env[out] = a + b
            return
        if isinstance(b, Pending) and not isinstance(a, Pending):
            a, b = b, a
        if isinstance(a, Pending) and a.kind in ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED") \
                and "bias" not in a.attrs \
                and a.lo == -INF and a.hi == INF:
            if isinstance(b, Deq) and isinstance(b.src, QConst):
                bias = QConst(self.channel_vector(a, b.src.data, "bias"), b.src.scale, b.src.zp, 0, b.src.name)
            elif isinstance(b, np.ndarray) and b.dtype.kind == "f":
                bias = self.channel_vector(a, b.astype(np.float32), "bias")
            else:
                raise self.err("Add after a Conv/MatMul must add a constant bias")
            self.env[out] = Pending(**{**a.__dict__, "attrs": {**a.attrs, "bias": bias}})
            return
        if isinstance(a, Deq) and isinstance(b, Deq):
            if isinstance(a.src, Act) and isinstance(b.src, Act):
                self.env[out] = Pending("ADD", self.k, [a.src, b.src])
                return
            if isinstance(a.src, QConst) and isinstance(b.src, Act):
                a, b = b, a
            if isinstance(a.src, Act) and isinstance(b.src, QConst):
                self.env[out] = Pending("ADD_CONST", self.k, [a.src], {"const": b.src})
                return
        raise self.err("Add is supported between two quantized activations, of a quantized constant to one, "
                       "or as the bias of a Conv/MatMul/Gemm")

    def op_Relu(self, node):
        self.clamp(node, 0.0, INF)

    def op_Clip(self, node):
        at = _attrs(node)
        lo, hi = at.get("min", -INF), at.get("max", INF)
        x = self.val(node.input[0])
        integer = isinstance(x, Act) and x.onnx_dtype != "float32"
        if len(node.input) > 1 and node.input[1]:
            lo = self.cval(node.input[1], "min").reshape(-1)[0]
        if len(node.input) > 2 and node.input[2]:
            hi = self.cval(node.input[2], "max").reshape(-1)[0]
        if integer:
            lo, hi = (float(v) - (128 if x.onnx_dtype == "uint8" and math.isfinite(v) else 0) for v in (lo, hi))
        self.clamp(node, float(lo), float(hi))

    def clamp(self, node, lo: float, hi: float):
        x = self.val(node.input[0])
        out = node.output[0]
        if isinstance(x, Pending):
            self.env[out] = Pending(**{**x.__dict__, "lo": max(x.lo, lo), "hi": min(x.hi, hi)})
        elif isinstance(x, Deq) and isinstance(x.src, Act):
            self.env[out] = Pending("CLAMP", self.k, [x.src], lo=lo, hi=hi)
        elif isinstance(x, Act) and x.onnx_dtype == "float32":
            self.env[out] = Pending("CLAMP", self.k, [x], lo=lo, hi=hi)
        elif isinstance(x, Act) and x.onnx_dtype != "float32":
            # an integer Relu/Clip on the stored values: bounds are in the int8 domain already
            q = self.q_of(x.ir)
            if q is None:
                raise self.err("clamp of a tensor whose quantization is unknown")
            rng = (max(-128, math.ceil(lo)) if lo > -INF else -128, min(127, math.floor(hi)) if hi < INF else 127)
            if x.onnx_dtype == "uint8" and node.op_type == "Relu":
                rng = (-128, 127)
            y = self.tensor(out, self.tensors[x.ir].shape, "int8", _copy_quant(q))
            self.add_op("REQUANTIZE", [x.ir], [y], clamp=rng)
            self.env[out] = Act(y, x.layout, x.shape, x.onnx_dtype)
        else:
            raise self.err(f"{node.op_type} of {type(x).__name__} is not supported")

    def conv_like(self, node, x: Act, w: QConst, bias, int_acc=False) -> Pending:
        at = _attrs(node)
        if len(x.shape) != 4:
            raise self.err(f"{node.op_type} on a rank-{len(x.shape)} input (only 2-D convolutions, NCHW)")
        if w.data.ndim != 4:
            raise self.err(f"weights of shape {list(w.data.shape)} (need OIHW)")
        o, i, kh, kw = w.data.shape
        strides = tuple(at.get("strides", (1, 1)))
        dil = tuple(at.get("dilations", (1, 1)))
        group = int(at.get("group", 1))
        c = x.shape[1]
        if i * group != c:
            raise self.err(f"weights {list(w.data.shape)} with group {group} do not match {c} input channels")
        pads, out_hw = self.window(at, x.shape[2:], (kh, kw), strides, dil)
        if group == 1:
            kind = "CONV_2D"
        elif group == c and i == 1:
            kind = "DEPTHWISE_CONV_2D"
        else:
            raise self.err(f"grouped convolution (group {group} of {c} channels); only group 1 and group = "
                           "channels (depthwise) are supported")
        attrs = dict(w=w, stride=strides, dilation=dil, pads=pads, out_shape=(1, o) + out_hw, group=group,
                     in_hw=tuple(x.shape[2:]), kernel_hw=(kh, kw))
        if bias is not None:
            attrs["bias"] = bias
        return Pending(kind, self.k, [x], attrs, int_acc=int_acc)

    def window(self, at: dict, in_hw, k_hw, strides, dil, ceil_mode: int = 0):
        """((top, left, bottom, right) effective pads, (OH, OW)) as ONNX defines them."""
        auto = at.get("auto_pad", b"NOTSET")
        auto = auto.decode() if isinstance(auto, bytes) else auto
        eff = [(k_hw[i] - 1) * dil[i] + 1 for i in range(2)]
        out, begin = [], []
        for i in range(2):
            if auto in ("SAME_UPPER", "SAME_LOWER"):
                o = -(-in_hw[i] // strides[i])
                total = max((o - 1) * strides[i] + eff[i] - in_hw[i], 0)
                b = total // 2 if auto == "SAME_UPPER" else total - total // 2
            elif auto == "VALID":
                o = (in_hw[i] - eff[i]) // strides[i] + 1
                b = 0
            else:
                p = list(at.get("pads", [0, 0, 0, 0]))
                if len(p) != 4:
                    raise self.err(f"pads {p} (need 4 values for a 2-D window)")
                if min(p) < 0:
                    raise self.err(f"negative pads {p}")
                span = in_hw[i] + p[i] + p[i + 2] - eff[i]
                o = (-(-span // strides[i]) if ceil_mode else span // strides[i]) + 1
                if ceil_mode and (o - 1) * strides[i] >= in_hw[i] + p[i]:
                    o -= 1
                b = p[i]
            if o <= 0:
                raise self.err(f"window {k_hw} does not fit the input {list(in_hw)}")
            out.append(o)
            begin.append(b)
        end = [max((out[i] - 1) * strides[i] + eff[i] - in_hw[i] - begin[i], 0) for i in range(2)]
        return (begin[0], begin[1], end[0], end[1]), tuple(out)

    def weight_input(self, name: str) -> QConst:
        v = self.val(name)
        if isinstance(v, Deq) and isinstance(v.src, QConst):
            return v.src
        if isinstance(v, QConst):
            return v
        if isinstance(v, np.ndarray) and v.dtype.kind == "f":
            raise self.err(f"float weights '{name}' (not quantized): quantize the model's weights too")
        raise self.err(f"weights '{name}' must be a constant quantized with DequantizeLinear")

    def bias_input(self, name: str):
        if not name:
            return None
        v = self.val(name)
        if isinstance(v, Deq) and isinstance(v.src, QConst):
            return v.src
        if isinstance(v, np.ndarray) and v.dtype.kind == "f":
            return v.astype(np.float32)
        raise self.err(f"bias '{name}' must be a constant")

    def op_Conv(self, node):
        x = self.val(node.input[0])
        if not (isinstance(x, Deq) and isinstance(x.src, Act)):
            raise self.err("Conv input must be DequantizeLinear of a quantized activation")
        bias = self.bias_input(node.input[2]) if len(node.input) > 2 else None
        self.env[node.output[0]] = self.conv_like(node, x.src, self.weight_input(node.input[1]), bias)

    def op_ConvInteger(self, node):
        x = self.act_input(node.input[0])
        x = self.integer_input_quant(node, x, 2)
        w = self.cval(node.input[1], "weights")
        wzp = self.cval(node.input[3]) if len(node.input) > 3 and node.input[3] else np.zeros(1, w.dtype)
        qc = QConst(w, None, wzp.astype(np.int64).reshape(-1), 0, node.input[1])
        self.env[node.output[0]] = self.conv_like(node, x, qc, None, int_acc=True)

    def integer_input_quant(self, node, x: Act, zp_i: int) -> Act:
        zp_name = node.input[zp_i] if len(node.input) > zp_i else ""
        zp = int(self.cval(zp_name).reshape(-1)[0]) if zp_name else 0
        z8 = zp - (128 if x.onnx_dtype == "uint8" else 0)
        q = self.q_of(x.ir)
        if q is None:
            return self.with_quant(x, Quant(scale=np.ones(1, np.float32), zero_point=np.array([z8], np.int32)))
        if q.zp != z8:
            raise self.err(f"zero point {zp} differs from the input's quantization ({q.zp})")
        return x

    def fc_like(self, x: Act, w_kn: np.ndarray, scale, zp, bias, name: str, int_acc=False) -> Pending:
        if w_kn.ndim != 2:
            raise self.err(f"weights of shape {list(w_kn.shape)} (need a 2-D matrix)")
        if x.shape[-1] != w_kn.shape[0]:
            raise self.err(f"input {list(x.shape)} does not match weights {list(w_kn.shape)}")
        w = QConst(w_kn, scale, zp, 1, name)
        attrs = dict(w=w, out_shape=tuple(x.shape[:-1]) + (w_kn.shape[1],))
        if bias is not None:
            attrs["bias"] = bias
        return Pending("FULLY_CONNECTED", self.k, [x], attrs, int_acc=int_acc)

    def op_MatMul(self, node):
        x = self.val(node.input[0])
        if not (isinstance(x, Deq) and isinstance(x.src, Act)):
            raise self.err("MatMul input A must be DequantizeLinear of a quantized activation "
                           "(MatMul of two activations is not supported)")
        w = self.weight_input(node.input[1])
        if w.data.ndim != 2:
            raise self.err(f"MatMul with a rank-{w.data.ndim} constant (only 2-D weights)")
        if w.scale is not None and w.scale.size > 1 and w.axis != 1:
            raise self.err("MatMul weights quantized per row (need per output column, axis 1)")
        self.env[node.output[0]] = self.fc_like(x.src, w.data, w.scale, w.zp, None, w.name)

    def op_MatMulInteger(self, node):
        x = self.integer_input_quant(node, self.act_input(node.input[0]), 2)
        w = self.cval(node.input[1], "weights")
        wzp = self.cval(node.input[3]) if len(node.input) > 3 and node.input[3] else np.zeros(1, w.dtype)
        wzp = wzp.astype(np.int64).reshape(-1)
        if wzp.size > 1 and np.any(wzp != wzp[0]):
            raise self.err("per-column weight zero points")
        self.env[node.output[0]] = self.fc_like(x, w, None, wzp[:1], None, node.input[1], int_acc=True)

    def op_Gemm(self, node):
        at = _attrs(node)
        x = self.val(node.input[0])
        if not (isinstance(x, Deq) and isinstance(x.src, Act)):
            raise self.err("Gemm input A must be DequantizeLinear of a quantized activation")
        if at.get("transA", 0):
            raise self.err("Gemm with transA=1")
        w = self.weight_input(node.input[1])
        scale = w.scale
        if w.data.ndim != 2:
            raise self.err(f"Gemm weights of shape {list(w.data.shape)}")
        per_col_axis = 0 if at.get("transB", 0) else 1
        if scale is not None and scale.size > 1 and w.axis != per_col_axis:
            raise self.err("Gemm weights quantized per input feature (need per output feature)")
        w_kn = w.data.T if at.get("transB", 0) else w.data
        alpha, beta = float(at.get("alpha", 1.0)), float(at.get("beta", 1.0))
        if alpha != 1.0:
            scale = (scale * np.float32(alpha)).astype(np.float32)
        bias = self.bias_input(node.input[2]) if len(node.input) > 2 else None
        if bias is not None and beta != 1.0:
            if isinstance(bias, QConst):
                bias = QConst(bias.data, (bias.scale * np.float32(beta)).astype(np.float32), bias.zp, bias.axis,
                              bias.name)
            else:
                bias = bias * np.float32(beta)
        self.env[node.output[0]] = self.fc_like(x.src, w_kn, scale, w.zp, bias, w.name)

    def pool(self, node, kind: str, x: Act, quantized: tuple | None = None, channels_last: bool = False):
        """A pooling node on x: pending (float between DQ and Q) unless ``quantized`` = (quant, dtype) is known."""
        at = _attrs(node)
        if len(x.shape) != 4:
            raise self.err(f"{node.op_type} on a rank-{len(x.shape)} input (only 2-D pooling)")
        hw = tuple(x.shape[1:3]) if channels_last else tuple(x.shape[2:])
        c = x.shape[3] if channels_last else x.shape[1]
        if kind == "GLOBAL":
            k, strides, pads, out_hw, include_pad = hw, (1, 1), (0, 0, 0, 0), (1, 1), 0
            kind = "AVERAGE_POOL_2D"
        else:
            k = tuple(at["kernel_shape"])
            if len(k) != 2:
                raise self.err(f"kernel_shape {list(k)} (only 2-D pooling)")
            strides = tuple(at.get("strides", (1, 1)))
            dil = tuple(at.get("dilations", (1, 1)))
            if dil != (1, 1):
                raise self.err(f"pooling with dilations {list(dil)}")
            pads, out_hw = self.window(at, hw, k, strides, dil, at.get("ceil_mode", 0))
            include_pad = at.get("count_include_pad", 0)
        out_shape = (1,) + out_hw + (c,) if channels_last else (1, c) + out_hw
        attrs = dict(filter=k, stride=strides, pads=pads, out_shape=out_shape, in_hw=hw,
                     channels_last=channels_last, include_pad=include_pad)
        p = Pending(kind, self.k, [x], attrs)
        self.env[node.output[0]] = p if quantized is None else self.emit(p, node.output[0], *quantized)

    def float_pool(self, node, kind: str):
        x = self.val(node.input[0])
        if isinstance(x, Deq) and isinstance(x.src, Act):
            self.pool(node, kind, x.src)
        elif isinstance(x, Act) and x.onnx_dtype == "float32" and kind == "MAX_POOL_2D":
            self.pool(node, kind, x)                                       # float model input: quantized after
        elif isinstance(x, Act) and kind == "MAX_POOL_2D":
            self.pool(node, kind, x, (self.q_of(x.ir), x.onnx_dtype))   # integer MaxPool: quantization unchanged
        else:
            raise self.err(f"{node.op_type} input must be DequantizeLinear of a quantized activation")

    def op_AveragePool(self, node):
        self.float_pool(node, "AVERAGE_POOL_2D")

    def op_MaxPool(self, node):
        if len(node.output) > 1 and node.output[1]:
            raise self.err("MaxPool with an Indices output")
        self.float_pool(node, "MAX_POOL_2D")

    def op_GlobalAveragePool(self, node):
        self.float_pool(node, "GLOBAL")

    def op_Softmax(self, node):
        x = self.val(node.input[0])
        if not (isinstance(x, Deq) and isinstance(x.src, Act)):
            raise self.err("Softmax input must be DequantizeLinear of a quantized activation")
        self.env[node.output[0]] = Pending("SOFTMAX", self.k, [x.src], dict(axis=self.softmax_axis(node, x.src)))

    def softmax_axis(self, node, x: Act) -> int:
        r = len(x.shape)
        at = _attrs(node)
        opset = at.get("opset", self.opset)
        axis = at.get("axis", -1 if opset >= 13 else 1) % r
        if opset < 13 and axis != r - 1:
            raise self.err(f"Softmax (opset {opset}) over axes {axis}.. of a rank-{r} tensor (only the last axis)")
        return axis

    def op_Pad(self, node):
        at = _attrs(node)
        mode = at.get("mode", b"constant")
        mode = mode.decode() if isinstance(mode, bytes) else mode
        if mode != "constant":
            raise self.err(f"Pad mode '{mode}' (only constant)")
        x = self.val(node.input[0])
        if len(node.input) > 1 and node.input[1]:
            pads = [int(v) for v in self.cval(node.input[1], "pads").reshape(-1)]
        else:
            pads = list(at.get("pads", []))
        value = 0.0
        if len(node.input) > 2 and node.input[2]:
            value = self.cval(node.input[2], "constant_value").reshape(-1)[0]
        elif "value" in at:
            value = at["value"]
        if len(node.input) > 3 and node.input[3]:
            raise self.err("Pad with an axes input")
        if isinstance(x, Deq) and isinstance(x.src, Act):
            self.env[node.output[0]] = Pending("PAD", self.k, [x.src], dict(pads=pads, value=float(value)))
        elif isinstance(x, Act) and x.onnx_dtype == "float32":
            self.env[node.output[0]] = Pending("PAD", self.k, [x], dict(pads=pads, value=float(value)))
        elif isinstance(x, Act) and x.onnx_dtype != "float32":
            q = self.q_of(x.ir)
            v8 = int(value) - (128 if x.onnx_dtype == "uint8" else 0)
            p = Pending("PAD", self.k, [x], dict(pads=pads, value_q=v8))
            self.env[node.output[0]] = self.emit(p, node.output[0], q, x.onnx_dtype)
        else:
            raise self.err("Pad input must be (DequantizeLinear of) a quantized activation")

    def op_Concat(self, node):
        axis = int(_attrs(node)["axis"])
        vals = [self.val(i) for i in node.input]
        if all(isinstance(v, np.ndarray) for v in vals):
            self.env[node.output[0]] = np.concatenate(vals, axis=axis)
            return
        if all((isinstance(v, Deq) and isinstance(v.src, Act)) or (isinstance(v, Act) and v.onnx_dtype == "float32")
               for v in vals):
            xs = [v.src if isinstance(v, Deq) else v for v in vals]
            self.env[node.output[0]] = Pending("CONCAT", self.k, xs, dict(axis=axis % len(xs[0].shape)))
            return
        if all(isinstance(v, Act) and v.onnx_dtype != "float32" for v in vals):
            q = self.q_of(vals[0].ir)
            p = Pending("CONCAT", self.k, vals, dict(axis=axis % len(vals[0].shape)))
            self.env[node.output[0]] = self.emit(p, node.output[0], q, vals[0].onnx_dtype)
            return
        raise self.err("Concat inputs must all be (DequantizeLinear of) quantized activations")

    # -- QOperator nodes ----------------------------------------------------------------------------------
    def qact(self, node, i: int) -> Act:
        """Input i of a QLinear node, with its scale/zero point inputs at i+1, i+2."""
        a = self.act_input(node.input[i])
        scale, zp, dtype = self.qparams(node, i + 1, i + 2, a.onnx_dtype)
        return self.with_quant(a, self.act_quant(scale, zp, a.onnx_dtype))

    def qout(self, node, i: int):
        scale, zp, dtype = self.qparams(node, i, i + 1)
        return self.act_quant(scale, zp, dtype), dtype

    def qweight(self, node, i: int, axis: int) -> QConst:
        w = self.cval(node.input[i], "weights")
        scale, zp, _ = self.qparams(node, i + 1, i + 2, str(w.dtype))
        return QConst(w, scale, zp, axis, node.input[i])

    def op_QLinearConv(self, node):
        x = self.qact(node, 0)
        w = self.qweight(node, 3, 0)
        bias = None
        if len(node.input) > 8 and node.input[8]:
            bias = QConst(self.cval(node.input[8], "bias"), None, np.zeros(1, np.int64), 0, node.input[8])
        p = self.conv_like(node, x, w, bias)
        self.env[node.output[0]] = self.emit(p, node.output[0], *self.qout(node, 6))

    def op_QLinearMatMul(self, node):
        x = self.qact(node, 0)
        w = self.qweight(node, 3, 1)
        p = self.fc_like(x, w.data, w.scale, w.zp, None, w.name)
        self.env[node.output[0]] = self.emit(p, node.output[0], *self.qout(node, 6))

    def op_QGemm(self, node):
        at = _attrs(node)
        if at.get("transA", 0):
            raise self.err("QGemm with transA=1")
        if len(node.input) < 9 or not node.input[7]:
            raise self.err("QGemm with a float output (no y_scale)")
        x = self.qact(node, 0)
        trans_b = at.get("transB", 0)
        w = self.qweight(node, 3, 0 if trans_b else 1)
        scale = w.scale * np.float32(at.get("alpha", 1.0))
        bias = None
        if node.input[6]:
            bias = QConst(self.cval(node.input[6], "bias"), None, np.zeros(1, np.int64), 0, node.input[6])
        p = self.fc_like(x, w.data.T if trans_b else w.data, scale.astype(np.float32), w.zp, bias, w.name)
        self.env[node.output[0]] = self.emit(p, node.output[0], *self.qout(node, 7))

    def op_QLinearAdd(self, node):
        vals = [self.val(node.input[i]) for i in (0, 3)]
        consts = [isinstance(v, np.ndarray) for v in vals]
        if all(consts):
            raise self.err("QLinearAdd of two constants")
        if consts[0]:
            order = (3, 0)
        else:
            order = (0, 3)
        a = self.qact(node, order[0])
        q, dtype = self.qout(node, 6)
        if consts[0] or consts[1]:
            i = order[1]
            c = self.cval(node.input[i])
            scale, zp, _ = self.qparams(node, i + 1, i + 2, str(c.dtype))
            p = Pending("ADD_CONST", self.k, [a], {"const": QConst(c, scale, zp, 0, node.input[i])})
        else:
            p = Pending("ADD", self.k, [a, self.qact(node, 3)])
        self.env[node.output[0]] = self.emit(p, node.output[0], q, dtype)

    def op_QLinearGlobalAveragePool(self, node):
        self.pool(node, "GLOBAL", self.qact(node, 0), self.qout(node, 3),
                  channels_last=bool(_attrs(node).get("channels_last", 0)))

    def op_QLinearAveragePool(self, node):
        self.pool(node, "AVERAGE_POOL_2D", self.qact(node, 0), self.qout(node, 3),
                  channels_last=bool(_attrs(node).get("channels_last", 0)))

    def op_QLinearConcat(self, node):
        q, dtype = self.qout(node, 0)
        xs = []
        for i in range(2, len(node.input), 3):
            if isinstance(self.val(node.input[i]), np.ndarray):
                raise self.err("QLinearConcat of a constant")
            xs.append(self.qact(node, i))
        p = Pending("CONCAT", self.k, xs, dict(axis=int(_attrs(node)["axis"]) % len(xs[0].shape)))
        self.env[node.output[0]] = self.emit(p, node.output[0], q, dtype)

    def op_QLinearSoftmax(self, node):
        x = self.qact(node, 0)
        q, dtype = self.qout(node, 3)
        p = Pending("SOFTMAX", self.k, [x], dict(axis=self.softmax_axis(node, x)))
        self.env[node.output[0]] = self.emit(p, node.output[0], q, dtype)

    # -- emitting IR ops -------------------------------------------------------------------------------------
    def activation(self, p: Pending, q: Quant) -> tuple[str, tuple[int, int] | None]:
        """Fused activation name for the pending op's clamp, or NONE plus an exact integer range."""
        if (p.lo, p.hi) in NAMED_ACTIVATIONS:
            return NAMED_ACTIVATIONS[(p.lo, p.hi)], None
        rng = (-128 if p.lo == -INF else _rne_quant(p.lo, q.s, q.zp),
               127 if p.hi == INF else _rne_quant(p.hi, q.s, q.zp))
        for name in ("NONE", "RELU", "RELU6", "RELU_N1_TO_1"):
            if fp.activation_range(name, q.s, q.zp) == rng:
                return name, None
        return "NONE", rng

    def clamp_range(self, p: Pending, q: Quant) -> tuple[int, int] | None:
        """The integer range the pending op's Relu/Clip leaves (None: the whole int8 range)."""
        act, clamp = self.activation(p, q)
        if clamp is not None:
            return clamp
        rng = fp.activation_range(act, q.s, q.zp)
        return None if rng == (-128, 127) else rng

    def finish(self, kind: str, inputs: list[str], out: str, ir_shape, q: Quant, clamp, **attrs) -> str:
        """Emit ``kind`` into ``out``, followed by an exact clamp when the activation has no fused name."""
        if clamp is None:
            y = self.tensor(out, ir_shape, "int8", q)
            self.add_op(kind, inputs, [y], **attrs)
            return y
        t = self.tensor(f"{out}_unclamped", ir_shape, "int8", _copy_quant(q))
        self.add_op(kind, inputs, [t], **attrs)
        y = self.tensor(out, ir_shape, "int8", q)
        self.add_op("REQUANTIZE", [t], [y], clamp=clamp)
        return y

    def requantize(self, ir: str, q: Quant, hint: str, clamp=None) -> str:
        if _same_quant(self.q_of(ir), q) and clamp is None:
            return ir
        y = self.tensor(hint, self.tensors[ir].shape, "int8", q)
        self.add_op("REQUANTIZE", [ir], [y], clamp=clamp)
        return y

    def emit(self, p: Pending, out: str, q: Quant, dtype: str) -> Act:
        if q is None:
            raise self.err("quantization of the input is unknown")
        if p.int_acc and p.acc_scale is None:
            raise self.err("ConvInteger/MatMulInteger result quantized without a scale Mul")
        if any(x.onnx_dtype == "float32" for x in p.inputs):
            # Pad / MaxPool / Concat / Relu / Clip on a float model input commute with quantization
            # (quantization is monotone and maps a pad value v to q(v)): quantize first, exactly
            if p.kind not in FLOAT_INPUT_OK:
                raise self.err(f"{p.kind} on the float model input (quantize the input first)")
            p.inputs = [self.quantize_input(x, q, dtype) if x.onnx_dtype == "float32" else x for x in p.inputs]
        for x in p.inputs:
            if self.q_of(x.ir) is None:
                raise self.err(f"quantization of '{x.ir}' is unknown (no DequantizeLinear/QLinear op names it)")
        k, node = self.k, self.node
        if 0 <= p.node < len(self.graph.node):
            self.k, self.node = p.node, self.graph.node[p.node]
        try:
            return getattr(self, f"emit_{p.kind.lower()}")(p, out, q, dtype)
        finally:
            self.k, self.node = k, node

    def quantize_input(self, x: Act, q: Quant, dtype: str) -> Act:
        key = (x.ir, float(q.s), q.zp)
        if key not in self.mat_cache:
            y = self.tensor(f"{x.ir}_quantized", self.tensors[x.ir].shape, "int8", q)
            self.add_op("QUANTIZE", [x.ir], [y])
            self.mat_cache[key] = y
        return Act(self.mat_cache[key], x.layout, x.shape, dtype)

    @staticmethod
    def bias_name(bias, out: str) -> str:
        return bias.name if isinstance(bias, QConst) and bias.name else f"{out}_bias"

    def _bias_int32(self, p: Pending, bias, acc_scale: np.ndarray, n: int) -> np.ndarray:
        """The int32 bias in units of acc_scale = s_x * s_w[c] (as stored when it matches, else rescaled)."""
        if isinstance(bias, QConst):
            data = bias.data.reshape(-1)
            if data.dtype.kind not in "iu":
                raise self.err("bias is not an integer constant")
            if np.any(bias.zp != 0):
                raise self.err("bias with a non-zero zero point")
            data = np.broadcast_to(data.astype(np.int64), (n,))
            if bias.scale is None:
                return data.astype(np.int32)
            bs = np.broadcast_to(np.asarray(bias.scale, np.float64).reshape(-1), (n,))
            if np.allclose(bs, acc_scale, rtol=1e-6, atol=0):
                return data.astype(np.int32)
            real = data * bs
        else:
            real = np.broadcast_to(np.asarray(bias, np.float64).reshape(-1), (n,))
        q = np.rint(real / acc_scale)
        return np.clip(q, -(2 ** 31), 2 ** 31 - 1).astype(np.int32)

    def _weights(self, p: Pending, w: QConst, sx: float, n_out: int, axis_out: int):
        """(int8 data, scale float32 [1] or [n_out], zero point int array) of a pending conv/FC's weights."""
        data, zp = _int_data(w.data, w.zp)
        if data.dtype != np.int8:
            raise self.err(f"{data.dtype} weights (need int8 or uint8)")
        if p.int_acc:
            scale = (np.asarray(p.acc_scale, np.float64) / float(sx)).astype(np.float32)
        else:
            scale = np.asarray(w.scale, np.float32).reshape(-1)
            if scale.size > 1 and w.axis != axis_out:
                raise self.err("weights quantized per input channel (need per output channel)")
        zp = zp.reshape(-1)
        if scale.size not in (1, n_out):
            raise self.err(f"{scale.size} weight scales for {n_out} output channels")
        if zp.size > 1 and np.all(zp == zp[0]) and scale.size == 1:
            zp = zp[:1]
        return data, scale.astype(np.float32), zp

    def emit_conv_2d(self, p: Pending, out: str, q: Quant, dtype: str) -> Act:
        return self._emit_conv(p, out, q, dtype)

    def emit_depthwise_conv_2d(self, p: Pending, out: str, q: Quant, dtype: str) -> Act:
        return self._emit_conv(p, out, q, dtype)

    def _emit_conv(self, p: Pending, out: str, q: Quant, dtype: str) -> Act:
        a = p.attrs
        x = p.inputs[0]
        xin = self.materialize(x, NCHW_AS_NHWC)
        sx = self.q_of(xin).s
        o = a["out_shape"][1]
        data, scale, zp = self._weights(p, a["w"], sx, o, 0)
        if np.any(zp != 0):
            raise self.err("convolution weights need symmetric quantization (zero point 0); "
                           "quantize with weight_type=QuantType.QInt8")
        kh, kw = a["kernel_hw"]
        if p.kind == "CONV_2D":
            w_ir = data.transpose(0, 2, 3, 1)
            wq = Quant(scale=scale, zero_point=np.zeros(scale.shape, np.int32), axis=0)
        else:
            w_ir = data.reshape(o, kh, kw).transpose(1, 2, 0)[None]
            wq = Quant(scale=scale, zero_point=np.zeros(scale.shape, np.int32), axis=3)
        inputs = [xin, self.const(p.attrs["w"].name, w_ir, wq)]
        acc_scale = np.float32(sx) * np.broadcast_to(scale, (o,)).astype(np.float32)
        if "bias" in a:
            inputs.append(self.const(self.bias_name(a["bias"], out), self._bias_int32(p, a["bias"],
                                                                                 acc_scale.astype(np.float64), o),
                                     Quant(scale=acc_scale.astype(np.float32),
                                           zero_point=np.zeros(o, np.int32), axis=0)))
        act, clamp = self.activation(p, q)
        pads = a["pads"]
        out_hw = a["out_shape"][2:]
        same = same_pads(a["in_hw"], a["kernel_hw"], a["stride"], a["dilation"])
        padding = ("SAME" if same == (pads, out_hw) else
                   "VALID" if pads == (0, 0, 0, 0) and out_hw == valid_out(a["in_hw"], a["kernel_hw"], a["stride"],
                                                                            a["dilation"]) else "EXPLICIT")
        attrs = dict(stride=a["stride"], dilation=a["dilation"], padding=padding, pads=pads, activation=act)
        if p.kind == "DEPTHWISE_CONV_2D":
            attrs["ch_mult"] = o // x.shape[1]
        y = self.finish(p.kind, inputs, out, NCHW_AS_NHWC.ir_shape(a["out_shape"]), q, clamp, **attrs)
        return Act(y, NCHW_AS_NHWC, a["out_shape"], dtype)

    def emit_fully_connected(self, p: Pending, out: str, q: Quant, dtype: str) -> Act:
        a = p.attrs
        x = p.inputs[0]
        w_kn = a["w"].data
        if len(x.shape) == 2 and x.layout.pre is not None:
            xin = x.ir
            w_kn = w_kn[x.layout.flat_index(x.shape)]          # the flatten's order, absorbed by the weights
        else:
            xin = self.materialize(x, Layout.identity(len(x.shape)))
        sx = self.q_of(xin).s
        n = w_kn.shape[1]
        data, scale, zp = self._weights(p, QConst(w_kn, a["w"].scale, a["w"].zp, 1, a["w"].name), sx, n, 1)
        if scale.size > 1 and np.any(zp != 0):
            raise self.err("per-channel fully connected weights need zero point 0")
        zp = zp[:1] if scale.size == 1 else np.zeros(n, np.int64)
        if zp.size != scale.size:
            raise self.err("per-channel weight zero points with per-tensor scale")
        wq = Quant(scale=scale, zero_point=zp.astype(np.int32), axis=0)
        inputs = [xin, self.const(a["w"].name, np.ascontiguousarray(data.T), wq)]
        acc = (np.float32(sx) * np.broadcast_to(scale, (n,))).astype(np.float32)
        if "bias" in a:
            inputs.append(self.const(self.bias_name(a["bias"], out), self._bias_int32(p, a["bias"],
                                                                                 acc.astype(np.float64), n),
                                     Quant(scale=acc, zero_point=np.zeros(n, np.int32), axis=0)))
        act, clamp = self.activation(p, q)
        shape = a["out_shape"]
        y = self.finish("FULLY_CONNECTED", inputs, out, shape, q, clamp, activation=act, keep_num_dims=len(shape) > 2,
                        weights_format=0)
        return Act(y, Layout.identity(len(shape)), shape, dtype)

    def common_layout(self, xs: list[Act]) -> tuple[Layout, list[str]]:
        lay = xs[0].layout if xs[0].layout.pre is None else Layout.identity(len(xs[0].shape))
        return lay, [self.materialize(x, lay) for x in xs]

    def emit_add(self, p: Pending, out: str, q: Quant, dtype: str) -> Act:
        a, b = p.inputs
        if a.shape != b.shape:
            raise self.err(f"Add of {list(a.shape)} and {list(b.shape)} (broadcasting between activations is "
                           "not supported)")
        lay, (xa, xb) = self.common_layout([a, b])
        act, clamp = self.activation(p, q)
        y = self.finish("ADD", [xa, xb], out, self.tensors[xa].shape, q, clamp, activation=act)
        return Act(y, lay, a.shape, dtype)

    def emit_add_const(self, p: Pending, out: str, q: Quant, dtype: str) -> Act:
        x = p.inputs[0]
        c: QConst = p.attrs["const"]
        data, zp = _int_data(c.data, c.zp)
        if data.dtype != np.int8:
            raise self.err(f"Add of a {c.data.dtype} constant (need int8/uint8)")
        if c.scale is None or c.scale.size != 1:
            raise self.err("Add of a per-channel quantized constant")
        try:
            full = np.broadcast_to(data, x.shape)
        except ValueError:
            raise self.err(f"constant of shape {list(data.shape)} does not broadcast to {list(x.shape)}") from None
        xin, lay = x.ir, x.layout
        ir = lay.apply(np.ascontiguousarray(full))
        rows = ir.reshape(-1, ir.shape[-1])
        cdata = rows[0].copy() if np.all(rows == rows[0]) else ir
        cq = Quant(scale=c.scale.astype(np.float32), zero_point=np.array([int(zp.reshape(-1)[0])], np.int32))
        act, clamp = self.activation(p, q)
        y = self.finish("ADD_CONST", [xin, self.const(c.name, cdata, cq)], out, self.tensors[xin].shape, q, clamp,
                        activation=act)
        return Act(y, lay, x.shape, dtype)

    def emit_clamp(self, p: Pending, out: str, q: Quant, dtype: str) -> Act:
        x = p.inputs[0]
        lo = -128 if p.lo == -INF else _rne_quant(p.lo, q.s, q.zp)
        hi = 127 if p.hi == INF else _rne_quant(p.hi, q.s, q.zp)
        y = self.requantize(x.ir, q, out, None if (lo, hi) == (-128, 127) else (lo, hi))
        return Act(y, x.layout, x.shape, dtype)

    def emit_max_pool_2d(self, p: Pending, out: str, q: Quant, dtype: str) -> Act:
        return self._emit_pool(p, out, q, dtype)

    def emit_average_pool_2d(self, p: Pending, out: str, q: Quant, dtype: str) -> Act:
        return self._emit_pool(p, out, q, dtype)

    def _emit_pool(self, p: Pending, out: str, q: Quant, dtype: str) -> Act:
        a = p.attrs
        x = p.inputs[0]
        lay = Layout.identity(4) if a["channels_last"] else NCHW_AS_NHWC
        xin = self.materialize(x, lay)
        xq = self.q_of(xin)
        out_shape = a["out_shape"]
        ir_shape = lay.ir_shape(out_shape)
        pads = a["pads"]
        kind = p.kind
        glob = tuple(a["filter"]) == tuple(a["in_hw"]) and pads == (0, 0, 0, 0)
        if kind == "AVERAGE_POOL_2D" and a["include_pad"] and pads != (0, 0, 0, 0):
            # count_include_pad=1: pad with the zero point (real 0), then a VALID average
            xin = self.pad_op(xin, [[0, 0], [pads[0], pads[2]], [pads[1], pads[3]], [0, 0]], xq.zp, f"{out}_padded")
            pads = (0, 0, 0, 0)
        if kind == "AVERAGE_POOL_2D" and glob and not _same_quant(xq, q):
            axes = self.const(f"{out}_axes", np.array([1, 2], np.int32))
            y = self.finish("MEAN", [xin, axes], out, ir_shape, q, self.clamp_range(p, q), keep_dims=True)
            return Act(y, lay, out_shape, dtype)
        same = _same_quant(xq, q)
        act, clamp = self.activation(p, q) if same or kind == "AVERAGE_POOL_2D" else ("NONE", None)
        attrs = dict(stride=a["stride"], filter=a["filter"], pads=pads, activation=act,
                     padding="VALID" if pads == (0, 0, 0, 0) else "EXPLICIT",
                     onnx_zp_offset=128 if dtype == "uint8" else 0)   # onnxruntime adds the zero point in float
        if kind == "AVERAGE_POOL_2D" and not same:
            # one rounding from the sum to the output scale (an average then a requantization would round twice)
            y = self.finish("AVERAGE_POOL_REQUANT", [xin], out, ir_shape, q, clamp, **attrs)
        elif same:
            y = self.finish(kind, [xin], out, ir_shape, q, clamp, **attrs)
        else:
            t = self.tensor(f"{out}_pool", ir_shape, "int8", _copy_quant(xq))
            self.add_op(kind, [xin], [t], **attrs)
            y = self.requantize(t, q, out, self.clamp_range(p, q))
        return Act(y, lay, out_shape, dtype)

    def pad_op(self, xin: str, pads4: list[list[int]], value: int, hint: str) -> str:
        t = self.tensors[xin]
        shape = tuple(d + p[0] + p[1] for d, p in zip(t.shape, pads4))
        y = self.tensor(hint, shape, "int8", _copy_quant(t.quant))
        self.add_op("PAD", [xin, self.const(f"{hint}_paddings", np.array(pads4, np.int32)),
                            self.const(f"{hint}_value", np.array([value], np.int8))], [y])
        return y

    def emit_pad(self, p: Pending, out: str, q: Quant, dtype: str) -> Act:
        x = p.inputs[0]
        a = p.attrs
        r = len(x.shape)
        pads = a["pads"]
        if len(pads) != 2 * r:
            raise self.err(f"{len(pads)} pads for a rank-{r} tensor")
        if min(pads) < 0:
            raise self.err(f"negative pads {pads} (cropping)")
        if pads[0] or pads[r]:
            raise self.err("padding the batch axis")
        if r > 4:
            raise self.err(f"Pad of a rank-{r} tensor")
        lay = x.layout if x.layout.pre is None else Layout.identity(r)
        xin = self.materialize(x, lay)
        xq = self.q_of(xin)
        ir_pads = [[pads[lay.perm[i]], pads[lay.perm[i] + r]] for i in range(r)]
        value = a["value_q"] if "value_q" in a else _rne_quant(a["value"], xq.s, xq.zp)
        out_shape = tuple(d + pads[i] + pads[i + r] for i, d in enumerate(x.shape))
        rng = self.clamp_range(p, q)
        if _same_quant(xq, q) and rng is None:
            y = self.pad_op(xin, ir_pads, value, out)
        else:
            y = self.requantize(self.pad_op(xin, ir_pads, value, f"{out}_padded"), q, out, rng)
        return Act(y, lay, out_shape, dtype)

    def emit_concat(self, p: Pending, out: str, q: Quant, dtype: str) -> Act:
        axis = p.attrs["axis"]
        xs = p.inputs
        r = len(xs[0].shape)
        for x in xs:
            if len(x.shape) != r or any(x.shape[i] != xs[0].shape[i] for i in range(r) if i != axis):
                raise self.err(f"Concat of shapes {[list(v.shape) for v in xs]} along axis {axis}")
        if axis == 0:
            raise self.err("Concat along the batch axis")
        lay, irs = self.common_layout(xs)
        irs = [self.requantize(t, q, f"{out}_in{i}") for i, t in enumerate(irs)]
        out_shape = tuple(sum(x.shape[axis] for x in xs) if i == axis else d for i, d in enumerate(xs[0].shape))
        rng = self.clamp_range(p, q)
        if rng is None:
            y = self.tensor(out, lay.ir_shape(out_shape), "int8", q)
            self.add_op("CONCATENATION", irs, [y], axis=lay.perm.index(axis), activation=0)
        else:
            t = self.tensor(f"{out}_concat", lay.ir_shape(out_shape), "int8", _copy_quant(q))
            self.add_op("CONCATENATION", irs, [t], axis=lay.perm.index(axis), activation=0)
            y = self.requantize(t, q, out, rng)
        return Act(y, lay, out_shape, dtype)

    def emit_softmax(self, p: Pending, out: str, q: Quant, dtype: str) -> Act:
        x = p.inputs[0]
        axis = p.attrs["axis"]
        r = len(x.shape)
        if x.layout.pre is not None and r == 2 and axis == 1:
            lay, xin = x.layout, x.ir                         # a whole-row softmax does not care about order
        elif x.layout.pre is None and x.layout.perm[-1] == axis:
            lay, xin = x.layout, x.ir
        else:
            lay = Layout(tuple(i for i in range(r) if i != axis) + (axis,))
            xin = self.materialize(x, lay)
        q8 = Quant(scale=np.array([1 / 256], np.float32), zero_point=np.array([-128], np.int32))
        if p.lo != -INF or p.hi != INF:
            raise self.err("Relu/Clip after Softmax")
        if self.numerics == "onnxruntime":
            # onnxruntime's float32 arithmetic produces the model's output quantization directly: QLinearSoftmax,
            # or a float Softmax where its graph optimizer leaves one (pockmcu.fixedpoint.ort_softmax)
            fused = not (self.node.op_type == "Softmax" and self.node.name in self.ort_float_nodes)
            y = self.tensor(out, self.tensors[xin].shape, "int8", q)
            self.add_op("SOFTMAX", [xin], [y], beta=1.0, qlinear=fused, onnx_zp_offset=128 if dtype == "uint8" else 0)
            return Act(y, lay, x.shape, dtype)
        if abs(q.s - 1 / 256) <= 1e-9 and q.zp == -128:
            y = self.tensor(out, self.tensors[xin].shape, "int8", q)
            self.add_op("SOFTMAX", [xin], [y], beta=1.0)
        elif q.s >= 1 / 256 * (1 - 1e-6):
            # e.g. onnxruntime's QDQ default 1/255: the int8 softmax (scale 1/256, zero point -128), then an
            # int8 requantization to the model's scale (measured against onnxruntime in tests/test_onnx.py)
            t = self.tensor(f"{out}_q256", self.tensors[xin].shape, "int8", q8)
            self.add_op("SOFTMAX", [xin], [t], beta=1.0)
            y = self.requantize(t, q, out)
        else:
            raise self.err(f"Softmax output quantized with scale {q.s:g} and zero point {q.zp} (int8 domain); "
                           "pockmcu's int8 softmax produces scale 1/256, zero point -128 (uint8: 0): quantize "
                           "with that (TensorQuantOverrides) or a coarser scale")
        return Act(y, lay, x.shape, dtype)


def same_pads(in_hw, k_hw, stride, dil):
    """TFLite SAME padding and output size for a window: ((top, left, bottom, right), (OH, OW))."""
    out, pads = [], []
    for i in range(2):
        eff = (k_hw[i] - 1) * dil[i] + 1
        o = -(-in_hw[i] // stride[i])
        total = max((o - 1) * stride[i] + eff - in_hw[i], 0)
        out.append(o)
        pads.append((total // 2, total - total // 2))
    return (pads[0][0], pads[1][0], pads[0][1], pads[1][1]), tuple(out)


def valid_out(in_hw, k_hw, stride, dil):
    return tuple((in_hw[i] - ((k_hw[i] - 1) * dil[i] + 1)) // stride[i] + 1 for i in range(2))
