"""Issue 15, arithmetic limits: a trained int32 bias saturates at the bound the accumulator proof uses,
2^31 - 1 - K * 2^15 (K: the products its layer adds per output channel), the bound the device's
WRITE_PARAMS check uses too, never at the int32 range: bias + K products of int8 weights and inputs then
fits int32 however long the bias and the weights train."""

from __future__ import annotations

import json
import subprocess

import numpy as np
import pytest
from conftest import FIXTURES, SHARED

from pockmcu.board.firmware import param_limits
from pockmcu.build import kernel_archive
from pockmcu.codegen import write_project
from pockmcu.compiler import TrainOptions, compile_model
from pockmcu.shapes import INT32_MAX, PRODUCT_BOUND, bias_limit
from pockmcu.train import HostTrainer
from pockmcu.training import params
from pockmcu.training.reference import ReferenceTrainer

# a huge lr with momentum: every step moves a bias by 2^30 (the rounding's clamp), momentum keeps it moving
# once its layer's output saturates (the mask then stops the gradient): the bound is reached. (The CLI
# takes lr <= 1e6; at 1e6 the C and the reference part by an ulp of an upstream float gradient, which the
# lr turns into 128 in a bias far from the bound: the clamp at 2^30 keeps this test about the bound.)
PUSH = {"kind": "momentum", "lr": 1e12, "momentum": 0.9}


def _compile(model, spec, loss, tmp_path):
    c = compile_model(model, ram=1 << 24, train=TrainOptions(spec=json.dumps(spec), loss=loss))
    return c, write_project(c, tmp_path / model.stem)


@pytest.mark.parametrize("model, spec, loss", [
    (FIXTURES / "small_cnn.tflite", {"bias": "all", "weights": "all", "optimizer": PUSH}, "xent"),
    # KWS: the bias of the 1x1 conv before the average pool updates inside CONV_1X1_GRAD_FROM_MEAN
    (SHARED / "mlperf_kws_dscnn.tflite", {"bias": {"last": 4}, "weights": [{"layer": -1}], "optimizer": PUSH},
     "xent"),
], ids=["small_cnn", "kws_fused_mean"])
def test_training_drives_biases_to_the_accumulator_bound_not_int32(model, spec, loss, tmp_path):
    c, out = _compile(model, spec, loss, tmp_path)
    kinds = {op.kind for op in c.train.schedule}
    assert "BIAS_UPDATE" in kinds
    if model.stem == "mlperf_kws_dscnn":
        assert "CONV_1X1_GRAD_FROM_MEAN" in kinds
    g = c.graph
    rng = np.random.default_rng(5)
    x = rng.integers(-128, 128, (1,) + g.t(g.inputs[0]).shape[1:]).astype(np.int8)[0]
    host = HostTrainer(out)
    host.init(3)
    ref = ReferenceTrainer(c.train, seed=3)
    layout = params.entries(c.train)
    originals = {t: g.t(t).data for t in c.train.trainable_tensors}
    for step in range(4):
        host.step(x, 1)
        ref.step(x, 1)
        got = params.expand(layout, host.params(), originals)
        for t, want in ref.params().items():      # the generated C equals the numpy reference, every step
            np.testing.assert_array_equal(got[t], want, err_msg=f"{t} after step {step + 1}")
    limits = dict(zip([t["tensor"] for t in json.loads((out / "plan.json").read_text())["training"]["trainable"]],
                      param_limits(out)))
    at_bound = 0
    for t in c.train.trainable_tensors:
        if g.t(t).dtype != "int32":
            continue
        limit = bias_limit(g, t)
        assert limit == limits[t]                  # the bound WRITE_PARAMS checks on the device
        layer = next(op for op in g.ops if t in op.inputs)
        k = g.t(layer.inputs[1]).size // g.t(t).size
        assert limit == INT32_MAX - k * PRODUCT_BOUND < INT32_MAX
        b = got[t].astype(np.int64)
        assert np.abs(b).max() <= limit, t
        assert np.abs(b).max() + k * PRODUCT_BOUND <= INT32_MAX          # the accumulator fits, any int8 values
        at_bound += int(np.count_nonzero(np.abs(b) == limit))
    assert at_bound > 0, "no bias reached the bound: the test does not drive training far enough"


def test_checked_build_of_biases_at_the_bound_runs_clean(tmp_path):
    """make host-check on a --train build (each sample: inference, then a training step) with biases pushed to
    the bound: ASan, UBSan and the bounds assertions stay quiet through the forward passes that follow. (With
    the old saturation at int32 UBSan reports "signed integer overflow: 97155 + 2147483216" in the conv
    accumulator of pockmcu_layer_loops.h here.)"""
    spec = {"bias": "all", "weights": "all", "optimizer": PUSH}
    c, out = _compile(FIXTURES / "small_cnn.tflite", spec, "xent", tmp_path)
    n = c.graph.t(c.graph.inputs[0]).nbytes
    rng = np.random.default_rng(9)
    (tmp_path / "samples.bin").write_bytes(rng.integers(-128, 128, 6 * n).astype(np.int8).tobytes())
    lib = kernel_archive(out, "host-san")
    r = subprocess.run(["make", "-C", str(out), "host-check", f"CHECK_INPUT={tmp_path / 'samples.bin'}",
                        *([f"SAN_KERNEL_LIB={lib}"] if lib else [])], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    outputs = (out / "build" / "host-check" / "output.bin").read_bytes()
    assert len(outputs) == 6 * c.graph.t(c.graph.outputs[0]).nbytes


def test_bound_counts_a_weight_zero_point():
    """With a per-tensor weight zero point zp_w a product reaches 256 * (128 + |zp_w|), not 2^15: the bound
    (and so the device's WRITE_PARAMS limit) tightens accordingly."""
    from pockmcu.frontend import load_model
    from pockmcu.ir import Quant

    g = load_model(FIXTURES / "fc_none.tflite")
    fc = next(op for op in g.ops if op.kind == "FULLY_CONNECTED" and len(op.inputs) > 2 and op.inputs[2])
    w, bias = g.t(fc.inputs[1]), fc.inputs[2]
    k = w.size // g.t(bias).size
    assert bias_limit(g, bias) == INT32_MAX - k * PRODUCT_BOUND
    w.quant = Quant(scale=w.quant.scale, zero_point=np.full(w.quant.scale.shape, -5, np.int32))
    assert bias_limit(g, bias) == INT32_MAX - k * 256 * 133
