"""The converter's state and the IR-building primitives every node handler and emitter uses.

A ``Builder`` holds the IR under construction (tensors, ops), the ONNX value environment
(``env``: ONNX name -> value of values.py), and the node being converted (for one-line error
messages). It knows how to:

* read a node's inputs as the values they must be (``val``, ``cval``, ``act_input``, QOperator
  scale / zero-point inputs ``qparams`` / ``qact`` / ``qout``);
* build IR: tensors, constants, ops; aliases (RESHAPE) and layout changes (TRANSPOSE) of a tensor,
  moving bytes only when a consumer needs them (``materialize``);
* emit a ``Pending`` op once its output quantization is known (``emit``: common checks, then the
  emitter of its kind from the table it was given), with a fused activation or an exact clamp.

It does not know any ONNX op: the handlers (fold.py, emit_*.py) are functions of a Builder.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import numpy as np

from ... import fixedpoint as fp
from ...errors import PockError
from ...ir import Op, Quant, Tensor
from ...ops.base import make_op
from .layout import Layout, inverse, relative_perm
from .values import FLOAT_INPUT_OK, NAMED_ACTIVATIONS, Act, Deq, Pending, copy_quant, int_range, same_quant, shift_zp

#: emitter of a Pending kind: (builder, pending op, output ONNX name, output quantization, ONNX dtype) -> Act
Emitter = Callable[["Builder", Pending, str, Quant, str], Act]


class Builder:
    def __init__(self, path: Path, model, numerics: str, ort_float_nodes: set[str], emitters: dict[str, Emitter]):
        self.path = path
        self.model = model
        self.graph = model.graph
        self.numerics = numerics
        self.ort_float_nodes = ort_float_nodes         # onnxruntime numerics: Softmax nodes ORT keeps in float
        self.emitters = emitters
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
        """Append an op (named for now; convert.rename_ops numbers the survivors of pruning)."""
        op = make_op(kind, f"op{len(self.ops)}", inputs, outputs, self.where(), **attrs)
        self.ops.append(op)
        return op

    def q_of(self, ir: str) -> Quant | None:
        return self.tensors[ir].quant

    def set_quant(self, ir: str, q: Quant) -> None:
        """Give a tensor (and every alias of it) the quantization a consumer reveals (model inputs)."""
        root = self.alias_root.get(ir, ir)
        for m in self.alias_members.get(root, [root]):
            if self.tensors[m].quant is None:
                self.tensors[m].quant = copy_quant(q)
            if m in self.flip_src and self.tensors[self.flip_src[m]].quant is None:
                self.tensors[self.flip_src[m]].quant = shift_zp(q, 128)

    def alias(self, ir: str, shape, quant: Quant | None = None, hint: str | None = None) -> str:
        """The bytes of ``ir`` seen with another shape (and possibly another quantization): a RESHAPE."""
        shape = tuple(int(d) for d in shape)
        t = self.tensors[ir]
        quant = t.quant if quant is None else quant
        root = self.alias_root.get(ir, ir)
        members = self.alias_members.setdefault(root, [root])
        for m in members:
            if self.tensors[m].shape == shape and same_quant(self.tensors[m].quant, quant):
                return m
        out = self.tensor(hint or f"{root}_reshaped", shape, t.dtype, copy_quant(quant))
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
                          copy_quant(t.quant))
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

    def common_layout(self, xs: list[Act]) -> tuple[Layout, list[str]]:
        """One layout for several activations read together (the first one's, unless it is a flatten)."""
        lay = xs[0].layout if xs[0].layout.pre is None else Layout.identity(len(xs[0].shape))
        return lay, [self.materialize(x, lay) for x in xs]

    def quantize_input(self, x: Act, q: Quant, dtype: str) -> Act:
        """The float model input ``x`` quantized with ``q`` (one QUANTIZE per quantization)."""
        key = (x.ir, float(q.s), q.zp)
        if key not in self.mat_cache:
            y = self.tensor(f"{x.ir}_quantized", self.tensors[x.ir].shape, "int8", q)
            self.add_op("QUANTIZE", [x.ir], [y])
            self.mat_cache[key] = y
        return Act(self.mat_cache[key], x.layout, x.shape, dtype)

    def requantize(self, ir: str, q: Quant, hint: str, clamp=None) -> str:
        if same_quant(self.q_of(ir), q) and clamp is None:
            return ir
        y = self.tensor(hint, self.tensors[ir].shape, "int8", q)
        self.add_op("REQUANTIZE", [ir], [y], clamp=clamp)
        return y

    def pad_op(self, xin: str, pads4: list[list[int]], value: int, hint: str) -> str:
        t = self.tensors[xin]
        shape = tuple(d + p[0] + p[1] for d, p in zip(t.shape, pads4))
        y = self.tensor(hint, shape, "int8", copy_quant(t.quant))
        self.add_op("PAD", [xin, self.const(f"{hint}_paddings", np.array(pads4, np.int32)),
                            self.const(f"{hint}_value", np.array([value], np.int8))], [y])
        return y

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
        if not np.all(np.isfinite(scale)) or np.any(scale < np.finfo(np.float32).tiny):
            raise self.err(f"scale {scale.tolist()[:4]} is not a positive finite (normal float32) number")
        lo, hi = {"int8": (-128, 127), "uint8": (0, 255)}.get(dtype, (-(1 << 31), (1 << 31) - 1))
        if np.any(zp < lo) or np.any(zp > hi):
            raise self.err(f"zero point {zp.tolist()[:4]} is outside the {dtype} range [{lo}, {hi}]")
        if zp.size not in (1, scale.size):
            raise self.err(f"{zp.size} zero points for {scale.size} scales")
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
        if same_quant(cur, q):
            return a
        return Act(self.alias(a.ir, self.tensors[a.ir].shape, quant=q), a.layout, a.shape, a.onnx_dtype)

    def act_input(self, name: str, what: str = "input") -> Act:
        v = self.val(name)
        if isinstance(v, Deq) and isinstance(v.src, Act):
            return v.src
        if isinstance(v, Act) and v.onnx_dtype != "float32":
            return v
        raise self.err(f"{what} '{name}' must be a quantized activation (int8/uint8, or DequantizeLinear of one)")

    def qact(self, node, i: int) -> Act:
        """Input i of a QLinear node, with its scale/zero point inputs at i+1, i+2."""
        a = self.act_input(node.input[i])
        scale, zp, dtype = self.qparams(node, i + 1, i + 2, a.onnx_dtype)
        return self.with_quant(a, self.act_quant(scale, zp, a.onnx_dtype))

    def qout(self, node, i: int):
        """(quantization, ONNX dtype) of a QLinear node's output from its scale/zero point inputs at i, i+1."""
        scale, zp, dtype = self.qparams(node, i, i + 1)
        return self.act_quant(scale, zp, dtype), dtype

    # -- emitting pending ops -----------------------------------------------------------------------
    def emit(self, p: Pending, out: str, q: Quant, dtype: str) -> Act:
        """IR ops computing ``p`` into the ONNX value ``out`` quantized with ``q``."""
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
            return self.emitters[p.kind](self, p, out, q, dtype)
        finally:
            self.k, self.node = k, node

    def activation(self, p: Pending, q: Quant) -> tuple[str, tuple[int, int] | None]:
        """Fused activation name for the pending op's clamp, or NONE plus an exact integer range."""
        if (p.lo, p.hi) in NAMED_ACTIVATIONS:
            return NAMED_ACTIVATIONS[(p.lo, p.hi)], None
        rng = int_range(p, q)
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

    def finish(self, kind: str, inputs: list[str], out: str, ir_shape, q: Quant, clamp, suffix: str = "_unclamped",
               **attrs) -> str:
        """Emit ``kind`` into ``out``, followed by an exact clamp when the activation has no fused name
        (then ``kind`` writes the tensor ``out + suffix``)."""
        if clamp is None:
            y = self.tensor(out, ir_shape, "int8", q)
            self.add_op(kind, inputs, [y], **attrs)
            return y
        t = self.tensor(f"{out}{suffix}", ir_shape, "int8", copy_quant(q))
        self.add_op(kind, inputs, [t], **attrs)
        return self.requantize(t, q, out, clamp)
