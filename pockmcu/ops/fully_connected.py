"""FULLY_CONNECTED, int8, per-tensor or per-channel weights [out, in].

Semantics: TFLite Micro reference_integer_ops::FullyConnected. The input is
read as [batches, in] whatever its rank. Per-tensor: the multiplier comes from
the float32 product s_in * s_w, widened to double, divided by s_out (that is
how TFLM's GetQuantizedConvolutionMultipler computes it, and it matters for
bit-exactness); per-channel: double products, like CONV_2D.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import fixedpoint as fp
from .. import fixedpoint_ort as ort
from ..ccode import SCRATCH, Array, Call, Emission, Local, Ptr, Struct
from ..cmsis_scratch import fc_kernel_sums
from ..ir import Graph, Op
from ..kernel_table import DSP_SCRATCH, choose, dsp_column_bytes
from .base import SUPPORTED_ACTIVATIONS, OpDef, fused_activation, operand, register
from .conv import WeightUpdate, _GradOp, finish, param_backward, weight_scales
from .training_ops import sgd_update


@dataclass(frozen=True)
class FullyConnectedOptions:
    activation: str = "NONE"            # fused: NONE, RELU, RELU6, RELU_N1_TO_1
    keep_num_dims: bool = False
    weights_format: int = 0             # TFLite: 0 = default; shuffled formats are refused


@dataclass(frozen=True, eq=False)
class FullyConnectedData:
    """What Prepare computes (TFLite Micro's OpDataFullyConnected)."""

    multiplier: np.ndarray              # int32, one (per tensor) or per output channel
    shift: np.ndarray
    act_min: int
    act_max: int
    in_features: int                    # D: the input is read as [batches, D]
    batches: int


@register
class FullyConnected(OpDef):
    kind = "FULLY_CONNECTED"
    Options = FullyConnectedOptions
    operands = ("input", "weights", "bias")
    tflite_ops = ("FULLY_CONNECTED",)
    tflite_options = "FullyConnectedOptions"
    kernel = "arm_fully_connected_s8"

    def parse_tflite(self, o, op: Op, tensors) -> FullyConnectedOptions:
        if o is None:
            return FullyConnectedOptions()
        return FullyConnectedOptions(activation=fused_activation(o.FusedActivationFunction()),
                                     keep_num_dims=bool(o.KeepNumDims()), weights_format=int(o.WeightsFormat()))

    def check(self, g: Graph, op: Op) -> list[str]:
        problems = super().check(g, op)
        a = op.options
        if a.activation not in SUPPORTED_ACTIVATIONS:
            problems.append(a.activation)
        if a.weights_format != 0:
            problems.append("shuffled FULLY_CONNECTED weights format")
        w = g.t(operand(op, "weights"))
        if w.dtype != "int8" or w.data is None:
            problems.append(f"weights '{w.name}' are {w.dtype}{'' if w.is_const else ' and not constant'} (need constant int8)")
        elif w.quant is None:
            problems.append(f"weights '{w.name}' have no quantization")
        elif w.quant.per_channel and np.any(w.quant.zero_point != 0):
            problems.append(f"per-channel weights '{w.name}' need zero point 0")
        if operand(op, "bias"):
            b = g.t(operand(op, "bias"))
            if b.dtype != "int32" or b.data is None:
                problems.append(f"bias '{b.name}' is {b.dtype} (need constant int32)")
        return problems

    def prepare(self, g: Graph, op: Op) -> FullyConnectedData:
        x, w, y = g.t(op.inputs[0]), g.t(operand(op, "weights")), g.t(op.outputs[0])
        if g.numerics == "onnxruntime":     # float32 scale as mantissa/exponent (fixedpoint_ort.requantize_ort)
            ws = w.quant.scale if w.quant.per_channel else w.quant.scale[:1]
            pairs = list(zip(*ort.ort_output_scales(x.quant.s, ws, y.quant.s)))
        elif w.quant.per_channel:
            pairs = [fp.quantize_multiplier(float(x.quant.s) * float(s) / float(y.quant.s)) for s in w.quant.scale]
        else:
            product = np.float32(x.quant.scale[0]) * np.float32(w.quant.scale[0])   # float32, as TFLM
            pairs = [fp.quantize_multiplier(float(product) / float(y.quant.s))]
        act_min, act_max = fp.activation_range(op.options.activation, y.quant.s, y.quant.zp)
        return FullyConnectedData(np.array([p[0] for p in pairs], np.int32), np.array([p[1] for p in pairs], np.int32),
                                  act_min, act_max, w.shape[1], x.size // w.shape[1])

    def reference(self, g: Graph, op: Op, xs, rt=None):
        x = xs[0]
        n = x.shape[0]
        w = g.t(operand(op, "weights"))
        xin = x.reshape(n * op.prepared.batches, w.shape[1]).astype(np.float64) - g.t(op.inputs[0]).quant.zp
        wf = w.data.astype(np.float64) - (0 if w.quant.per_channel else w.quant.zp)
        acc = xin @ wf.T
        out = finish(acc, op, g)
        return [out.reshape((n,) + g.t(op.outputs[0]).shape[1:])]

    def macs(self, g: Graph, op: Op) -> int:
        w = g.t(operand(op, "weights"))
        return int(w.shape[0] * w.shape[1] * (g.t(op.inputs[0]).size // w.shape[1]))

    def backward(self, tb, op: Op) -> None:
        param_backward(tb, op, "FULLY_CONNECTED_GRAD_INPUT", "FULLY_CONNECTED_WGRAD_UPDATE", in_rows=fc_rows)

    def describe(self, g: Graph, op: Op) -> str:
        w = g.t(operand(op, "weights"))
        return (f"FULLY_CONNECTED {w.shape[1]} -> {w.shape[0]} {op.options.activation}: "
                f"{list(g.t(op.inputs[0]).shape)} -> {list(g.t(op.outputs[0]).shape)}")

    def variant(self, g: Graph, op: Op, cg) -> str:
        return self.quant_class(g, op)

    @staticmethod
    def quant_class(g: Graph, op: Op) -> str:
        return "per_channel" if g.t(operand(op, "weights")).quant.per_channel else "per_tensor"

    def scratch_bytes(self, g: Graph, op: Op, in_place: bool = False) -> int:
        """The DSP kernels' scratch (pockmcu_dsp_fc_buffer_size): the int16 column of four batches (fewer
        when there are fewer); the portable kernels need none."""
        if choose(self.kind, self.kernel, g.numerics, g.features, self.quant_class(g, op), library=g.library,
                  off=g.kernels_off).function not in DSP_SCRATCH:
            return 0
        return dsp_column_bytes(int(op.prepared.in_features), int(op.prepared.batches), small=False)

    def emit(self, g: Graph, op: Op, cg) -> Emission:
        a = op.prepared
        x, w, y = g.t(op.inputs[0]), g.t(operand(op, "weights")), g.t(op.outputs[0])
        bias = operand(op, "bias")
        out_f, in_f = w.shape[0], w.shape[1]
        decls = [Struct("params", "cmsis_nn_fc_params", dict(
            input_offset=-x.quant.zp, filter_offset=0 if w.quant.per_channel else -w.quant.zp,
            output_offset=y.quant.zp, activation=dict(min=a.act_min, max=a.act_max)))]
        if w.quant.per_channel:
            decls += [Array("multiplier", "int32_t", tuple(a.multiplier)), Array("shift", "int32_t", tuple(a.shift)),
                      Struct("quant", "cmsis_nn_per_channel_quant_params",
                             (Local("multiplier", address=False, cast="int32_t *"),
                              Local("shift", address=False, cast="int32_t *")))]
        else:
            decls.append(Struct("quant", "cmsis_nn_per_tensor_quant_params",
                                dict(multiplier=int(a.multiplier[0]), shift=int(a.shift[0]))))
        decls += [Struct("input_dims", "cmsis_nn_dims", (a.batches, 1, 1, in_f)),
                  Struct("filter_dims", "cmsis_nn_dims", (in_f, 1, 1, out_f)),
                  Struct("bias_dims", "cmsis_nn_dims", (1, 1, 1, out_f)),
                  Struct("output_dims", "cmsis_nn_dims", (a.batches, 1, 1, out_f))]
        args = (SCRATCH, Local("params"), Local("quant"), Local("input_dims"), Ptr(x.name), Local("filter_dims"),
                Ptr(w.name), Local("bias_dims"), Ptr(bias) if bias else "NULL", Local("output_dims"), Ptr(y.name))
        function = cg.kernel(op).function
        if function in DSP_SCRATCH:     # the DSP kernels size their column by batches and depth
            query = Call(f"{function}_get_buffer_size", (Local("input_dims"), Local("filter_dims")))
        else:   # every portable FC kernel's scratch is arm_fully_connected_s8's (none)
            query = Call("arm_fully_connected_s8_get_buffer_size", (Local("filter_dims"),))
        emission = Emission(calls=(Call(function, args, status=True),), decls=tuple(decls), buffer_query=query)
        # --kernels cmsis-nn on Helium: Arm's kernel reads compile-time kernel sums (cmsis_scratch.py)
        return fc_kernel_sums(g, op, function, emission)


# -- training -----------------------------------------------------------------------------------


def fc_rows(g: Graph, op: Op) -> tuple[int, int]:
    """The FC input seen as [batches, in features], whatever its rank."""
    return op.prepared.batches, g.t(operand(op, "weights")).shape[1]


@register
class FullyConnectedGradInput(_GradOp):
    kind = "FULLY_CONNECTED_GRAD_INPUT"
    kernel = "pockmcu_fully_connected_grad_input_f32"

    def macs(self, g: Graph, op: Op) -> int:
        f = op.options.layer
        return FullyConnected().macs(g, f)

    def reference(self, g: Graph, op: Op, xs, rt=None):
        f = op.options.layer
        w = g.t(operand(f, "weights"))
        zp = 0 if w.quant.per_channel else w.quant.zp
        wr = (w.data.astype(np.float64) - zp) * weight_scales(g, f).astype(np.float64)[:, None]
        n = xs[0].shape[0]
        dz = xs[0].reshape(n * f.prepared.batches, -1).astype(np.float64)
        return [(dz @ wr).reshape((n,) + g.t(f.inputs[0]).shape[1:])]

    def emit(self, g: Graph, op: Op, cg) -> Emission:
        """Reuses the forward layer's dims."""
        w = g.t(operand(op.options.layer, "weights"))
        args = (self.of_layer(op, "input_dims"), self.of_layer(op, "filter_dims"), Ptr(w.name),
                0 if w.quant.per_channel else -w.quant.zp, Local("filter_scale", address=False),
                Ptr(op.inputs[0]), Ptr(op.outputs[0]))
        return Emission(calls=(Call(cg.kernel(op).function, args, status=True),), decls=(self.filter_scale(g, op),))


@register
class FullyConnectedWgradUpdate(_GradOp):
    kind = "FULLY_CONNECTED_WGRAD_UPDATE"
    operands = ("saved_input", "output_grad")
    Options = WeightUpdate
    role = "update"
    kernel = "pockmcu_fully_connected_wgrad_update_s8"

    def macs(self, g: Graph, op: Op) -> int:
        f, w = op.options.layer, g.t(op.options.weights)
        return f.prepared.batches * w.shape[0] * op.options.channels

    def reference(self, g: Graph, op: Op, xs, rt=None):
        f = op.options.layer
        saved, dz = xs
        w = g.t(op.options.weights)
        b, k = op.options.channel_begin, op.options.channels
        rows = saved.shape[0] * f.prepared.batches
        x = saved.reshape(rows, k).astype(np.float64) - g.t(op.inputs[0]).quant.zp
        grad = dz.reshape(rows, -1).astype(np.float64).T @ x
        coef = np.repeat(op.options.coef, k)
        part = w.data[:, b:b + k]
        new = sgd_update(part, grad, coef, rt, w.name, -127, 127).reshape(part.shape)
        rt.params[w.name] = w.data.copy()
        rt.params[w.name][:, b:b + k] = new
        return []

    def emit(self, g: Graph, op: Op, cg) -> Emission:
        """Reuses the forward layer's filter dims; updates the weights' RAM copy from channel_begin."""
        u = op.options
        saved = g.t(op.inputs[0])
        decls = (Array("coef", "float", tuple(u.coef)),
                 Struct("input_dims", "cmsis_nn_dims", (u.layer.prepared.batches, 1, 1, u.channels)))
        opt = cg.optimizer_args(u.weights)
        args = (Local("input_dims"), Ptr(saved.name), -saved.quant.zp, self.of_layer(op, "filter_dims"),
                cg.param(u.weights), u.channel_begin, Ptr(operand(op, "output_grad")), Local("coef", address=False),
                opt["accum"], opt["velocity"], "&train.optimizer", opt["rng"])
        return Emission(calls=(Call(cg.kernel(op).function, args, status=True),), decls=decls)
