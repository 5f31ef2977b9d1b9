"""The kernel-choice table: (op kind, numerics, core features, variant) -> the C kernel that runs.

Code generation, plan.json and the reports all read the choice from here (``choose``); nothing
else decides which kernel an op calls. A row names the C function, the numerics it reproduces
("tflm", "onnxruntime" or "*" for both), the core features it needs (a subset of the target's:
"fpu", "dsp" for Armv7E-M/Armv8-M DSP, "mve" for Helium) and the op-specific variant it serves
(the shape class an op reports through ``OpDef.variant``: split-stored weights, per-channel
requantization, an in-place gradient, ...). Among the rows that fit, the one needing the strongest
features wins (FEATURE_RANK: mve over dsp over fpu), then a row for the exact numerics over a "*"
row; an op kind with no rows runs ``OpDef.kernel``. Optimized kernels for a core are new rows with ``features``: each must produce
the bytes of the portable row it stands in for.
"""

from __future__ import annotations

from dataclasses import dataclass

from .errors import PockError


@dataclass(frozen=True)
class Kernel:
    function: str                          # the C function called
    numerics: str = "*"                    # "tflm" | "onnxruntime" | "*"
    features: frozenset = frozenset()      # core features it needs
    variant: str = ""                      # the op's shape class it serves ("" = the general case)


def _k(function, numerics="*", variant="", features=()):
    return Kernel(function, numerics, frozenset(features), variant)


TABLE: dict[str, tuple[Kernel, ...]] = {
    "CONV_2D": (
        _k("arm_convolve_wrapper_s8", "tflm"),
        _k("pockmcu_convolve_ort_s8", "onnxruntime"),
        # trained input channels in RAM, frozen ones in flash (TrainGraph.head_channels)
        _k("pockmcu_convolve_split_s8", variant="split"),
    ),
    "DEPTHWISE_CONV_2D": (
        _k("arm_depthwise_conv_wrapper_s8", "tflm"),
        _k("pockmcu_depthwise_conv_ort_s8", "onnxruntime"),
    ),
    "FULLY_CONNECTED": (
        _k("arm_fully_connected_s8", "tflm", "per_tensor"),
        _k("arm_fully_connected_per_channel_s8", "tflm", "per_channel"),
        _k("pockmcu_fully_connected_ort_s8", "onnxruntime", "per_tensor"),
        _k("pockmcu_fully_connected_per_channel_ort_s8", "onnxruntime", "per_channel"),
    ),
    "MEAN": (
        _k("pockmcu_mean_s8", "tflm"),
        _k("pockmcu_mean_ort_s8", "onnxruntime"),
        # any other axes (pockmcu/ops/reduce.py): TFLM's same arithmetic over the five folded axis groups
        _k("pockmcu_reduce_sum_s8", "tflm", "general"),
    ),
    # ONNX average pools and softmaxes that onnxruntime computes in float (emulated bit for bit)
    "AVERAGE_POOL_2D": (_k("arm_avgpool_s8"), _k("pockmcu_avgpool_ort_s8", variant="ort_float")),
    "AVERAGE_POOL_REQUANT": (_k("pockmcu_avgpool_requant_s8"), _k("pockmcu_avgpool_ort_s8", variant="ort_float")),
    "SOFTMAX": (_k("arm_softmax_s8"), _k("pockmcu_softmax_ort_s8", variant="ort_float")),
    # a dequantize-quantize pair folded into a 256-entry table
    "REQUANTIZE": (_k("pockmcu_requantize_s8"), _k("pockmcu_lut_s8", variant="table")),
    "CONCATENATION": tuple(_k(f"arm_concatenation_s8_{a}", variant=a) for a in "xyzw"),
    "SLICE": (_k("pockmcu_slice_s8", variant="int8"), _k("pockmcu_slice_f32", variant="float32")),
    "MSE_GRAD": (_k("pockmcu_mse_grad_s8", variant="int8"), _k("pockmcu_mse_grad_f32", variant="float32")),
    "CONV_2D_GRAD_INPUT": (_k("pockmcu_conv_grad_input_f32"), _k("pockmcu_conv_grad_input_split_f32", variant="split")),
    # stride 1, written over its output gradient: row by row with a ring of rows as scratch
    "DEPTHWISE_CONV_2D_GRAD_INPUT": (_k("pockmcu_depthwise_conv_grad_input_f32"),
                                     _k("pockmcu_depthwise_conv_grad_input_rows_f32", variant="in_place")),
    # QUANTIZE float32 -> int8, and between 8-bit integer types (TFLM's Requantize; its x ^ 0x80 fast path)
    "QUANTIZE": (_k("pockmcu_quantize_f32_s8"), _k("pockmcu_flip_sign_8", variant="flip"),
                 _k("pockmcu_requantize_s8", variant="s8_s8"), _k("pockmcu_requantize_u8_s8", variant="u8_s8"),
                 _k("pockmcu_requantize_s8_u8", variant="s8_u8")),
    # ADD of equal shapes: CMSIS-NN's kernel; broadcasting shapes: pockmcu's (same arithmetic)
    "ADD": (_k("arm_elementwise_add_s8"), _k("pockmcu_add_broadcast_s8", variant="broadcast")),
}


#: how much a feature says about a row's speed: a Helium row beats a DSP row on a core with both
FEATURE_RANK = {"fpu": 1, "dsp": 2, "mve": 4}


def target_features(target) -> frozenset:
    """The table's feature names for a targets.Target."""
    return frozenset(f for f, on in (("fpu", target.fpu), ("dsp", target.dsp), ("mve", target.mve)) if on)


def choose(kind: str, default: str, numerics: str, features: frozenset = frozenset(), variant: str = "",
           library: str = "pockmcu") -> Kernel:
    """The row for this op (``default``: its ``OpDef.kernel``, used when the kind has no rows).

    ``library`` "cmsis-nn" (``--kernels cmsis-nn``, built with ``make CMSIS_NN_PATH=...``): a fitting
    row with Arm's API (an ``arm_*`` function, which Arm's library then provides) wins over any
    optimized pockmcu row; ops without one keep pockmcu's choice."""
    rows = TABLE.get(kind)
    if not rows:
        return Kernel(default)
    fits = [r for r in rows if r.variant == variant and r.numerics in ("*", numerics) and r.features <= features]
    if not fits:
        raise PockError(f"internal: no {kind} kernel for numerics {numerics}, variant {variant!r}, "
                        f"features {sorted(features)}")
    arm = [r for r in fits if r.function.startswith("arm_")] if library == "cmsis-nn" else []
    return max(arm or fits, key=lambda r: (sum(FEATURE_RANK[f] for f in r.features), r.numerics != "*"))

# -- shape and data movement (pockmcu/ops/datamove.py, shape_ops.py, layout.py): rank > 4 as strided copies
TABLE["TRANSPOSE"] = (_k("pockmcu_transpose_s8"), _k("pockmcu_strided_copy_s8", variant="strided"))
TABLE["CONCATENATION"] = TABLE["CONCATENATION"] + (_k("pockmcu_strided_copy_s8", variant="strided"),)
# the input gradient of a copy: copied back, or summed where the forward reads an element more than once
TABLE["DATA_MOVE_GRAD"] = (_k("pockmcu_strided_copy_f32"), _k("pockmcu_strided_add_f32", variant="add"))

# -- Armv7E-M / Armv8-M DSP kernels of CONV_2D and FULLY_CONNECTED (kernels_c/pockmcu_nn_dsp.h, issue 13) -----
# CONV_2D's shape class (Conv2D.variant): "1x1" for a pointwise convolution (1x1 filter, stride 1, no
# padding), whose input rows are already the matrix (no im2col), "" for every other geometry (im2col of two
# output pixels into scratch, then the same matrix multiply). The rule is exact geometry, not a tuned
# threshold: on a DSP core both classes beat the portable loop at every shape (the DSP inner loop takes 16
# MACs in about 24 instructions, the portable one about 5 instructions per MAC), and the pointwise class only
# saves the im2col copy. Without DSP (Cortex-M3, --kernels portable) both classes run the portable kernels.
TABLE["CONV_2D"] = TABLE["CONV_2D"] + (
    _k("arm_convolve_wrapper_s8", "tflm", "1x1"),
    _k("pockmcu_convolve_ort_s8", "onnxruntime", "1x1"),
    _k("pockmcu_convolve_1x1_s8_dsp", "tflm", "1x1", ("dsp",)),
    _k("pockmcu_convolve_s8_dsp", "tflm", "", ("dsp",)),
    _k("pockmcu_convolve_1x1_ort_s8_dsp", "onnxruntime", "1x1", ("dsp",)),
    _k("pockmcu_convolve_ort_s8_dsp", "onnxruntime", "", ("dsp",)),
)
TABLE["FULLY_CONNECTED"] = TABLE["FULLY_CONNECTED"] + (
    _k("pockmcu_fully_connected_s8_dsp", "tflm", "per_tensor", ("dsp",)),
    _k("pockmcu_fully_connected_per_channel_s8_dsp", "tflm", "per_channel", ("dsp",)),
    _k("pockmcu_fully_connected_ort_s8_dsp", "onnxruntime", "per_tensor", ("dsp",)),
    _k("pockmcu_fully_connected_per_channel_ort_s8_dsp", "onnxruntime", "per_channel", ("dsp",)),
)
#: the DSP kernels above -> how their scratch is sized (Conv2D / FullyConnected.scratch_bytes, the C
#: *_get_buffer_size): "conv_1x1" the int16 column of 4 pixels, "conv" that plus one int8 im2col field,
#: "fc" the column of 4 batches (fewer when there are fewer)
DSP_SCRATCH = {
    "pockmcu_convolve_1x1_s8_dsp": "conv_1x1", "pockmcu_convolve_1x1_ort_s8_dsp": "conv_1x1",
    "pockmcu_convolve_s8_dsp": "conv", "pockmcu_convolve_ort_s8_dsp": "conv",
    "pockmcu_fully_connected_s8_dsp": "fc", "pockmcu_fully_connected_per_channel_s8_dsp": "fc",
    "pockmcu_fully_connected_ort_s8_dsp": "fc", "pockmcu_fully_connected_per_channel_ort_s8_dsp": "fc",
}


def dsp_column_bytes(depth: int, count: int) -> int:
    """Bytes of the DSP kernels' int16 column for ``count`` rows of ``depth`` values: 4 rows at a time, 2 or 1
    when there are fewer (pockmcu_dsp_block_rows, pockmcu_dsp_col_words)."""
    rows = 4 if count >= 4 else 2 if count >= 2 else 1
    return 4 * rows * ((depth >> 2) * 2 + (depth & 3))

# -- dspdw: Armv7E-M / Armv8-M DSP depthwise, pooling, ADD (kernels_c/pockmcu_nn_dsp_dw.h) ----------------
# DEPTHWISE_CONV_2D's variant (ops/conv.py DepthwiseConv2D.variant): "3x3" for a 3x3 filter with channel
# multiplier 1, no dilation and a scale below 1/2 with a bias its requantization takes exactly (decided at
# compile time; the 3x3 kernel's row loops over a scratch ring, the planner sizes it), "" otherwise. On a DSP core every TFLM
# depthwise layer takes a DSP kernel: per loaded word it does the work of 4 scalar MACs and it never does
# more work than the portable loops (it runs them itself for ch_mult > 1 and for accumulator ranges its
# fast requantization cannot prove exact), so the cost rule is "DSP kernel whenever the core has DSP".
TABLE["DEPTHWISE_CONV_2D"] = TABLE["DEPTHWISE_CONV_2D"] + (
    _k("arm_depthwise_conv_wrapper_s8", "tflm", "3x3"),
    _k("pockmcu_depthwise_conv_ort_s8", "onnxruntime", "3x3"),
    _k("pockmcu_depthwise_conv_dsp_s8", "tflm", features=("dsp",)),
    _k("pockmcu_depthwise_conv_3x3_dsp_s8", "tflm", "3x3", features=("dsp",)),
)

# -- Helium (MVE) kernels for Cortex-M55 (kernels_c/pockmcu_*_mve_s8.c, pockmcu_nn_mve.h): the same arguments
# and bytes as the portable TFLM rows they stand in for (tests/test_mve_kernels.py); no scratch
TABLE["CONV_2D"] = TABLE["CONV_2D"] + (_k("pockmcu_convolve_mve_s8", "tflm", features=("mve",)),)
TABLE["DEPTHWISE_CONV_2D"] = TABLE["DEPTHWISE_CONV_2D"] + (_k("pockmcu_depthwise_conv_mve_s8", "tflm",
                                                              features=("mve",)),)
TABLE["FULLY_CONNECTED"] = TABLE["FULLY_CONNECTED"] + (
    _k("pockmcu_fully_connected_mve_s8", "tflm", "per_tensor", ("mve",)),
    _k("pockmcu_fully_connected_per_channel_mve_s8", "tflm", "per_channel", ("mve",)))
# the 3x3 shape class on M55: Helium's kernel (the same bytes; it needs no scratch)
TABLE["DEPTHWISE_CONV_2D"] = TABLE["DEPTHWISE_CONV_2D"] + (_k("pockmcu_depthwise_conv_mve_s8", "tflm", "3x3",
                                                              features=("mve",)),)
# the pointwise class on M55: Helium's conv kernel reads 1x1 inputs in place (no scratch)
TABLE["CONV_2D"] = TABLE["CONV_2D"] + (_k("pockmcu_convolve_mve_s8", "tflm", "1x1", ("mve",)),)
# the average pool on M55 (kernels_c/pockmcu_avgpool_mve_s8.c): window sums 16 channels per Helium vector, the
# portable division per channel; the same bytes as arm_avgpool_s8, no scratch
TABLE["AVERAGE_POOL_2D"] = TABLE["AVERAGE_POOL_2D"] + (_k("pockmcu_avgpool_mve_s8", features=("mve",)),)
# same-shape ADD on M55 (kernels_c/pockmcu_elementwise_add_mve_s8.c): four elements per Helium vector, the bytes of
# arm_elementwise_add_s8, no scratch
TABLE["ADD"] = TABLE["ADD"] + (_k("pockmcu_elementwise_add_mve_s8", features=("mve",)),)
