"""The kernel-choice table: (op kind, numerics, core features, variant) -> the C kernel that runs.

Code generation, plan.json and the reports all read the choice from here (``choose``); nothing
else decides which kernel an op calls. A row names the C function, the numerics it reproduces
("tflm", "onnxruntime" or "*" for both), the core features it needs (a subset of the target's:
"fpu", "dsp" for Armv7E-M/Armv8-M DSP, "mve" for Helium) and the op-specific variant it serves
(the shape class an op reports through ``OpDef.variant``: split-stored weights, per-channel
requantization, an in-place gradient, ...). Among the rows that fit, the one needing the most
features wins, then a row for the exact numerics over a "*" row; an op kind with no rows runs
``OpDef.kernel``. Optimized kernels for a core are new rows with ``features``: each must produce
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
    return max(arm or fits, key=lambda r: (len(r.features), r.numerics != "*"))

# -- shape and data movement (pockmcu/ops/datamove.py, shape_ops.py, layout.py): rank > 4 as strided copies
TABLE["TRANSPOSE"] = (_k("pockmcu_transpose_s8"), _k("pockmcu_strided_copy_s8", variant="strided"))
TABLE["CONCATENATION"] = TABLE["CONCATENATION"] + (_k("pockmcu_strided_copy_s8", variant="strided"),)
# the input gradient of a copy: copied back, or summed where the forward reads an element more than once
TABLE["DATA_MOVE_GRAD"] = (_k("pockmcu_strided_copy_f32"), _k("pockmcu_strided_add_f32", variant="add"))
