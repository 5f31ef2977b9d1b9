"""The scratch Arm's CMSIS-NN kernels ask for, per core (``--kernels cmsis-nn``).

``make CMSIS_NN_PATH=...`` links Arm's library in place of ``kernels/arm_*.c``; pockmcu_init then
asks Arm's ``*_get_buffer_size`` queries, compiled for the target's core, and refuses to run when a
planned scratch buffer is smaller. For a graph with ``library == "cmsis-nn"`` the planner
(lifetimes.py, schedule.py) sizes each op's scratch here: the same arithmetic as Arm's queries
(CMSIS-NN's Source/*/arm_*_get_buffer_sizes_s8.c, built by GCC) for the three builds Arm has:

- "mve": ARM_MATH_MVEI (``__ARM_FEATURE_MVE``: Cortex-M55),
- "dsp": ARM_MATH_DSP without MVE (``__ARM_FEATURE_DSP``: Cortex-M4, M7, M33),
- "none": plain C (Cortex-M3, the host).

tests/test_cmsis_nn.py checks these formulas against numbers Arm's queries return for known
geometries (always) and against Arm's compiled queries on random geometries (with CMSIS_NN_PATH).

One kernel needs more than scratch: on Helium Arm's fully connected layers read per-row kernel sums
(bias + input_offset * (sum of the row's weights + cols * filter_offset), what ``arm_vector_sum_s8``
writes; TFLite Micro computes them once in Prepare) from ``ctx->buf``. The compiler knows the
weights, so ``fc_kernel_sums`` computes them at compile time into a flash array that the layer's
context points at; that layer then needs no arena scratch.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from .ccode import SCRATCH, Array, Emission, Local, Struct
from .ir import Graph, Op

#: Arm's CH_IN_BLOCK_MVE (arm_nnsupportfunctions.h): channels per block of arm_depthwise_conv_s8_opt on MVE
CH_IN_BLOCK_MVE = 124
#: Arm's CONVERT_DW_CONV_WITH_ONE_INPUT_CH_AND_OUTPUT_CH_ABOVE_THRESHOLD with GCC (8 with Arm Compiler 6)
DW_TO_CONV_THRESHOLD = 1


def arm_core(features) -> str:
    """Which of Arm's builds a core with these features gets: "mve", "dsp" or "none"."""
    return "mve" if "mve" in features else "dsp" if "dsp" in features else "none"


# -- Arm's queries, argument for argument (dims are (n, h, w, c) tuples; pads, strides, dilations (h, w))

def _is_1x1(pad, dilation, input_dims, filter_dims) -> bool:
    return (pad == (0, 0) and filter_dims[1] == 1 and filter_dims[2] == 1 and dilation == (1, 1)
            and input_dims[3] == filter_dims[3])


def _is_1_x_n(stride, dilation, input_dims, filter_dims) -> bool:
    return (input_dims[1] == 1 and dilation[1] == 1 and filter_dims[1] == 1 and (stride[1] * input_dims[3]) % 4 == 0
            and input_dims[3] == filter_dims[3])


def convolve_s8(core: str, input_dims, filter_dims) -> int:
    """arm_convolve_s8_get_buffer_size: two int16 im2col columns (DSP and plain C), four 16-lane
    int8 columns (MVE)."""
    cols = filter_dims[2] * filter_dims[1] * input_dims[3]
    if core == "mve":
        return 4 * ((cols + 15) // 16) * 16
    return 2 * ((cols + 3) // 4 * 4) * 2


def _convolve_1_x_n_mve(pad, stride, input_dims, filter_dims, output_dims) -> int:
    input_x, pad_x, kernel_x, output_x, stride_x = input_dims[2], pad[1], filter_dims[2], output_dims[2], stride[1]
    total_pad = (output_x - 1) * stride_x + kernel_x - input_x
    asym_pad = int(np.fmod(total_pad, 2))               # C's %: the sign of the dividend
    right = max(1, _cdiv(pad_x + asym_pad + stride_x - 1, stride_x)) if pad_x + asym_pad != 0 else 0
    left = max(1, _cdiv(pad_x + stride_x - 1, stride_x)) if pad_x != 0 else 0
    no_pad = max(output_x - (right + left), 0)
    if right + no_pad + left != output_x:
        return convolve_s8("mve", input_dims, filter_dims)
    c = input_dims[3]
    pad_left = pad_x * c
    pad_right = right * c if asym_pad else pad_left
    left_elems = kernel_x * c
    return max(left_elems + pad_left, left_elems - c + pad_right)


def _cdiv(a: int, b: int) -> int:
    """C integer division (truncates toward zero)."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def convolve_wrapper_s8(core: str, pad, stride, dilation, input_dims, filter_dims, output_dims) -> int:
    """arm_convolve_wrapper_s8_get_buffer_size: the 1x1 kernels need none with GCC (Arm's 1x1 fast
    DSP buffer exists only under Arm Compiler 6), 1xN and the general kernel an im2col buffer."""
    if _is_1x1(pad, dilation, input_dims, filter_dims):
        return 0
    if _is_1_x_n(stride, dilation, input_dims, filter_dims):
        if core == "mve":
            return _convolve_1_x_n_mve(pad, stride, input_dims, filter_dims, output_dims)
        return convolve_s8(core, input_dims, filter_dims)
    return convolve_s8(core, input_dims, filter_dims)


def depthwise_conv_wrapper_s8(core: str, pad, stride, dilation, input_dims, filter_dims, output_dims) -> int:
    """arm_depthwise_conv_wrapper_s8_get_buffer_size: 0 for the 3x3 kernel (DSP and plain C) and the
    generic one; the optimized kernel (channel multiplier 1, batch 1, no dilation) an int16 column of
    the input channels (DSP) or four blocks of CH_IN_BLOCK_MVE columns (MVE), none in plain C. On MVE
    one input channel to more outputs runs as a convolution with its filter transposed into scratch."""
    if core == "mve" and input_dims[3] == 1 and output_dims[3] > DW_TO_CONV_THRESHOLD:
        conv_filter = (filter_dims[3], filter_dims[1], filter_dims[2], filter_dims[0])
        return (convolve_wrapper_s8("mve", pad, stride, dilation, input_dims, conv_filter, output_dims)
                + int(np.prod(filter_dims)))
    if input_dims[3] == output_dims[3] and input_dims[0] == 1 and dilation == (1, 1):
        if core == "mve":
            return 4 * CH_IN_BLOCK_MVE * filter_dims[2] * filter_dims[1]
        if filter_dims[2] == 3 and filter_dims[1] == 3 and pad[0] <= 1 and pad[1] <= 1:
            return 0
        if core == "dsp":
            return input_dims[3] * filter_dims[2] * filter_dims[1] * 2
    return 0


def fully_connected_s8(core: str, filter_dims) -> int:
    """arm_fully_connected_s8_get_buffer_size: the int32 kernel sums of the output rows on MVE."""
    return filter_dims[3] * 4 if core == "mve" else 0


def avgpool_s8(core: str, output_w: int, channels: int) -> int:
    """arm_avgpool_s8_get_buffer_size: an int32 sum per channel on DSP, none on MVE and in plain C."""
    return channels * 4 if core == "dsp" else 0


# -- the planner's hook -------------------------------------------------------------------------------

def _conv_geometry(g: Graph, op: Op):
    o, p = op.options, op.prepared
    x, w, y = g.t(op.inputs[0]), g.t(op.inputs[1]), g.t(op.outputs[0])
    return (tuple(p.pads[:2]), tuple(o.stride), tuple(o.dilation), _dims4(x.shape), _dims4(w.shape), _dims4(y.shape))


def _dims4(shape) -> tuple:
    s = [int(d) for d in shape]
    return tuple([1] * (4 - len(s)) + s)


def runs_arm_kernel(g: Graph, op: Op) -> bool:
    """Whether ``op``'s kernel is one of Arm's when built with CMSIS_NN_PATH (kernel_table.choose with
    library "cmsis-nn": the tflm rows of convolutions and fully connected layers, TFLite's average pool);
    tests/test_cmsis_nn.py checks this against codegen's choice on every shared model."""
    if op.kind in ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED"):
        return g.numerics == "tflm"
    if op.kind == "AVERAGE_POOL_2D":
        return op.prepared.ort is None
    return False


def arm_scratch_bytes(g: Graph, op: Op) -> int | None:
    """The scratch bytes ``op`` needs in a CMSIS-NN build on ``g``'s core, or None when its kernel
    and its scratch query are pockmcu's (the planner then asks ``OpDef.scratch_bytes``).

    Ops that run pockmcu's kernel beside Arm's library (onnxruntime numerics) get the larger of Arm's size
    and their own (``planned_scratch_bytes``), which OpDef.scratch_bytes computes for the kernel that runs
    in that library."""
    core = arm_core(g.features)
    if op.kind in ("CONV_2D", "DEPTHWISE_CONV_2D") and runs_arm_kernel(g, op):
        f = convolve_wrapper_s8 if op.kind == "CONV_2D" else depthwise_conv_wrapper_s8
        return f(core, *_conv_geometry(g, op))
    if op.kind == "FULLY_CONNECTED":
        w = g.t(op.inputs[1])
        if core == "mve" and runs_arm_kernel(g, op):
            return 0              # its kernel sums live in flash (fc_kernel_sums)
        return fully_connected_s8(core, (int(w.shape[1]), 1, 1, int(w.shape[0])))
    if op.kind == "AVERAGE_POOL_2D":
        y = g.t(op.outputs[0])
        return avgpool_s8(core, int(y.shape[2]), int(y.shape[3]))
    return None


def planned_scratch_bytes(g: Graph, op: Op, own: int) -> int:
    """What the planner reserves: Arm's size for a CMSIS-NN build where Arm's kernel runs or Arm's
    query is asked (``own``, the pockmcu kernel's size, when pockmcu's kernel runs too), else ``own``."""
    arm = arm_scratch_bytes(g, op) if g.library == "cmsis-nn" else None
    if arm is None:
        return own
    return arm if runs_arm_kernel(g, op) else max(arm, own)


# -- Helium fully connected layers: compile-time kernel sums -------------------------------------------

def kernel_sums(weights: np.ndarray, bias: np.ndarray | None, input_offset: int, filter_offset: int) -> np.ndarray:
    """What arm_vector_sum_s8(buf, cols, rows, weights, input_offset, filter_offset, bias) writes: per
    output row, bias + input_offset * (sum of the row + cols * filter_offset), in int32 arithmetic."""
    w = weights.reshape(weights.shape[0], -1).astype(np.int64)
    sums = np.zeros(w.shape[0], np.int64) if bias is None else bias.astype(np.int64).copy()
    if input_offset:
        sums += (w.sum(axis=1) + (w.shape[1] * filter_offset if filter_offset else 0)) * input_offset
    return ((sums + (1 << 31)) % (1 << 32) - (1 << 31)).astype(np.int32)


def fc_kernel_sums(g: Graph, op: Op, function: str, emission: Emission) -> Emission:
    """A fully connected layer's emission for a CMSIS-NN build: on Helium, when Arm's kernel runs, its
    context points at compile-time kernel sums in flash (Arm's query's size) instead of the arena, and
    pockmcu_init has nothing to check; anything else unchanged."""
    if g.library != "cmsis-nn" or arm_core(g.features) != "mve" or not function.startswith("arm_"):
        return emission
    w = g.t(op.inputs[1])
    bias = g.t(op.inputs[2]).data if len(op.inputs) > 2 and op.inputs[2] else None
    x = g.t(op.inputs[0])
    filter_offset = 0 if w.quant.per_channel else -int(w.quant.zp)
    sums = kernel_sums(w.data, bias, -int(x.quant.zp), filter_offset)
    decls = emission.decls + (
        Array("kernel_sums", "int32_t", tuple(int(v) for v in sums),
              comment="arm_vector_sum_s8's output, computed at compile time (Arm's Helium FC reads it from ctx)"),
        Struct("kernel_sums_ctx", "cmsis_nn_context",
               dict(buf=Local("kernel_sums", address=False, cast="void *"), size=4 * len(sums))))
    calls = tuple(replace(c, args=tuple(Local("kernel_sums_ctx") if a is SCRATCH else a for a in c.args))
                  for c in emission.calls)
    return replace(emission, decls=decls, calls=calls, buffer_query=None)
