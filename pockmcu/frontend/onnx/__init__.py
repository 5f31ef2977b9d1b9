"""ONNX (int8/uint8, QDQ or QOperator form) -> graph IR.

The result is the same IR the TFLite frontend builds (op kinds CONV_2D, DEPTHWISE_CONV_2D,
FULLY_CONNECTED, ... with the attributes their OpDefs expect), so planning, code generation, kernels
and the numpy reference are shared. What the frontend does:

* **QDQ folding.** A float tensor between ``DequantizeLinear`` and ``QuantizeLinear`` is notation.
  ``DequantizeLinear`` of an integer tensor gives a ``Deq`` value; float ops on ``Deq`` inputs become
  a ``Pending`` op that waits for the ``QuantizeLinear`` deciding its output quantization, swallowing
  on the way a bias ``Add`` (MatMul + Add -> FULLY_CONNECTED) and ``Relu``/``Clip`` (-> the fused
  activation, or an exact clamp). Weights and biases behind ``DequantizeLinear`` become constant
  int8 / int32 tensors with their float32 scales exactly as stored. QOperator nodes (QLinearConv,
  QLinearMatMul, QGemm, QLinearAdd, ...) map onto the same emitters directly.
* **uint8.** onnxruntime's default activation type is uint8; every uint8 activation is held as int8
  with zero point - 128 (exact: same real values). A uint8 model input or output gets an
  UINT8_TO_INT8 / INT8_TO_UINT8 edge op.
* **Layouts.** Activations are NHWC inside, whatever the model says; see layout.py for how a value's
  IR layout is tracked and when bytes move (TRANSPOSE) and when they do not (tf2onnx's input
  transpose, a flatten feeding a fully connected layer: its weight rows are permuted instead).
* **Shapes.** A symbolic (or 0 / -1) batch dimension becomes 1; every other dimension must be
  static. Shapes are computed here, op by op.

Errors are one line (PockError): not an ONNX file, a float-only model, every unsupported node at once
(index, name, type), dynamic dimensions, and the first node whose quantized semantics pockmcu cannot
reproduce.

Modules, in the order a model goes through them:

* read.py -- the protobuf: loading and validation, node attributes, window geometry;
* convert.py -- the driver (``load_onnx``): model inputs, the node loop, outputs, naming;
* values.py -- what an ONNX value is during conversion (Act, QConst, Deq, Pending);
* layout.py -- how an IR tensor holds an ONNX tensor (NCHW as NHWC, flattens);
* build.py -- the Builder: converter state and the IR-building primitives;
* fold.py -- constants, shape arithmetic, QDQ notation, Relu/Clip/bias folding, reshapes;
* emit_linear.py, emit_pool.py, emit_eltwise.py, emit_data.py, emit_softmax.py -- per op family,
  the ONNX nodes that compute and the IR ops they become (each builds its IR attributes in one place).
* emit_binary.py (broadcasting arithmetic, Max / Min, the activations, LogSoftmax) and emit_move.py
  (Slice, Split, Tile, Gather, DepthToSpace / SpaceToDepth, Resize, the Reduce* ops) -- the issue-12 ops.

A new ONNX op: a handler in the module of its family (or a new ``emit_*.py`` listed in convert.py),
registered in that module's ``HANDLERS`` (and ``EMITTERS`` for a new pending kind).
"""

from .convert import load_onnx
from .read import ort_float_nodes, read_model

__all__ = ["load_onnx", "ort_float_nodes", "read_model"]
