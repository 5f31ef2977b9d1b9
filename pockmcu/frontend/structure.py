"""The graph a frontend built, checked as a dataflow program before anything else reads it.

Both frontends call ``check_structure``: a model must have inputs and outputs, none of them empty
(a 0-byte input once made the sanitized runner loop forever); every op reads only
model inputs, constants and tensors an earlier op wrote; no tensor is written twice, and no op writes
a model input or a constant; every model output is written (or is an input) and none is a constant; a
constant an op reads where it takes data (its input, input1, input2, lhs or rhs) has the dtype and
quantization an activation there must have (an operator input index moved onto an int32 bias once made
FULLY_CONNECTED read it as int8 data: C that does not compile); every int8 / uint8 tensor's zero points
lie in its dtype's range, whichever frontend made them (an ONNX uint8 input dequantized with an int32
zero point of -128 became an int8 tensor with zero point -256: inputs minus it reach 383, beyond the 256
every accumulator bound assumes). A damaged or reordered file fails here with one line naming the op and
the tensor, never later as a missing name.
"""

from __future__ import annotations

import numpy as np

from ..errors import PockError
from ..ir import Graph, Op
from ..ops.base import REGISTRY

#: the zero points a quantized tensor of each dtype may have
ZP_RANGE = {"int8": (-128, 127), "uint8": (0, 255)}

#: operand names (OpDef.operands) that carry data: an activation, or a constant in its place
DATA_OPERANDS = ("input", "input1", "input2", "lhs", "rhs")


def data_constant_problem(g: Graph, op: Op) -> str:
    """Why a constant in one of ``op``'s data operands cannot be read as its data ("" if none):
    OpDef.check holds activations to the kind's io_dtypes and quantization, constants are left to here."""
    d = REGISTRY.get(op.kind)
    if d is None or not d.io_dtypes:
        return ""
    for k, name in enumerate(d.operands):
        if name not in DATA_OPERANDS or k >= len(op.inputs) or not op.inputs[k] or not g.t(op.inputs[k]).is_const:
            continue
        t = g.t(op.inputs[k])
        if t.dtype not in d.io_dtypes:
            return (f"reads the {t.dtype} constant '{t.name}' as its {name}, which must be "
                    f"{'/'.join(d.io_dtypes)}")
        if t.dtype in ("int8", "uint8") and t.quant is None:
            return f"reads the constant '{t.name}' as its {name}, and it has no quantization parameters"
    return ""


def check_structure(g: Graph, source: str, variables: set[str] | frozenset[str] = frozenset()) -> None:
    """``variables``: state tensors an op both reads and writes (TFLite variable tensors)."""
    if not g.inputs:
        raise PockError(f"{source}: the model has no input")
    if not g.outputs:
        raise PockError(f"{source}: the model has no output")
    if len(set(g.inputs)) != len(g.inputs):
        raise PockError(f"{source}: a tensor is listed twice as a model input")
    for t in g.inputs + g.outputs:
        if any(int(d) <= 0 for d in g.t(t).shape):
            raise PockError(f"{source}: model {'input' if t in g.inputs else 'output'} '{t}' has shape "
                            f"{list(g.t(t).shape)}, which holds no values; the model file is damaged")
    for t in g.inputs:
        if g.t(t).is_const:
            raise PockError(f"{source}: model input '{t}' is a constant; the model file is damaged")
    for name, t in g.tensors.items():
        if t.quant is None or t.dtype not in ZP_RANGE:
            continue
        lo, hi = ZP_RANGE[t.dtype]
        zp = np.asarray(t.quant.zero_point, np.int64).reshape(-1)
        bad = zp[(zp < lo) | (zp > hi)]
        if bad.size:
            raise PockError(f"{source}: {t.dtype} tensor '{name}' has zero point {int(bad[0])}, outside [{lo}, {hi}]; "
                            "the model file is damaged")
    written = set(g.inputs) | set(variables)
    for op in g.ops:
        where = f"{source}: {op.kind} at {op.location.split(' (')[0]}"
        for t in op.inputs:
            if t and t not in written and not g.t(t).is_const:
                raise PockError(f"{where} reads '{t}' before any op writes it; the operators are out of order "
                                "or the model file is damaged")
        bad = data_constant_problem(g, op)
        if bad:
            raise PockError(f"{where} {bad}; the model file is damaged")
        for t in op.outputs:
            if t in variables:
                continue
            if t in written or g.t(t).is_const:
                what = "a model input" if t in g.inputs else "a constant" if g.t(t).is_const else "written twice"
                raise PockError(f"{where} writes '{t}', which is {what}; the model file is damaged")
            written.add(t)
    for t in g.outputs:
        if g.t(t).is_const:
            raise PockError(f"{source}: model output '{t}' is a constant, which no op computes; the model file is "
                            "damaged (or drop that output: pockmcu runs only what the model computes)")
        if t not in written:
            raise PockError(f"{source}: model output '{t}' is written by no op; the model file is damaged")
