"""Classifiers as users export them: float or uint8 I/O around an int8 body, logits without a softmax,
LOG_SOFTMAX, SOFTMAX -> RESHAPE (the cls_* fixtures), and the QUANTIZE conversions between uint8 and
int8 (exact x ^ 0x80 and general rescale) and int8 -> int8.

* forward: host simulation and numpy reference equal TFLite Micro on random and extreme inputs;
  LOG_SOFTMAX and every QUANTIZE conversion over random scales and all 256 input values;
* training with --loss xent: the gradient w.r.t. the logits against PyTorch autograd (softmax
  cross-entropy on the dequantized logits), the generated C against the numpy reference byte for
  byte, a few epochs lower the loss, QEMU ends with the host's parameters;
* export writes the trained model in its original I/O form and TFLite Micro on it equals the host;
* the error messages only suggest a change that works.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys

import numpy as np
import pytest
from conftest import FIXTURES, ROOT, SHARED, tflm_run

from pockmcu.codegen import write_project
from pockmcu.compiler import TrainOptions, compile_model, parse_size
from pockmcu.export import export_tflite
from pockmcu.ops.log_softmax import log_softmax_params, log_softmax_s8
from pockmcu.ops.quantize import requantize_8, requantize_params
from pockmcu.ops.training_ops import logits_exp_table, logits_xent
from pockmcu.reference import run_reference
from pockmcu.sim import load
from pockmcu.train import Data, HostTrainer, train_on_target, write_params

CLASSIFIERS = ["cls_float_io_softmax", "cls_logits", "cls_logits_conv_float_io", "cls_log_softmax",
               "cls_softmax_reshape", "cls_uint8_shift", "cls_uint8_rescale"]
FORWARD = CLASSIFIERS + ["quantize_int8_requant"]
FULL = {"bias": "all", "weights": "all", "optimizer": {"kind": "momentum", "lr": 0.01, "momentum": 0.5}, "batch": 2}


def _fixtures_module():
    spec = importlib.util.spec_from_file_location("make_fixtures", ROOT / "tests" / "fixtures" / "make_fixtures.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("make_fixtures", mod)
    spec.loader.exec_module(mod)
    return mod


def inputs(t, n, seed):
    """n random samples of the model input ``t`` followed by its extremes (all min, all max, alternating)."""
    rng = np.random.default_rng(seed)
    shape = (n,) + tuple(t.shape[1:])
    if t.dtype == "float32":
        x = (rng.standard_normal(shape) * 2).astype(np.float32)
        lo, hi = -1e4, 1e4
    else:
        info = np.iinfo(t.dtype)
        x = rng.integers(info.min, info.max + 1, shape).astype(t.dtype)
        lo, hi = info.min, info.max
    alt = np.where(np.arange(int(np.prod(shape[1:]))) % 2, hi, lo).reshape(shape[1:])
    ext = np.stack([np.full(shape[1:], lo), np.full(shape[1:], hi), alt]).astype(x.dtype)
    return np.concatenate([x, ext])


@pytest.mark.parametrize("name", FORWARD)
def test_forward_equals_tflm(name, generated):
    gen = generated(FIXTURES / f"{name}.tflite")
    g = gen.compiled.graph
    x = inputs(g.t(g.inputs[0]), 40, seed=3)
    want = tflm_run(gen.model, x)
    got = load(gen.out).invoke(x)
    assert got.dtype == want.dtype and got.shape == want.shape
    assert np.array_equal(got, want), f"{int(np.sum(got != want))} of {got.size} values differ from TFLite Micro"
    (ref,) = run_reference(g, x)
    assert np.array_equal(ref.reshape(want.shape), want)


def _single_op_model(mf, opcode, x, y, options_type=None):
    b = mf.TFLiteBuilder()
    b.add_tensor("x", *x)
    b.add_tensor("y", *y)
    b.add_op(opcode, [0], [1], options_type, {})
    b.set_io([0], [1])
    return b.serialize()


def _tflm(buf, xs):
    from tflite_micro.python.tflite_micro import runtime

    it = runtime.Interpreter.from_bytes(buf)
    outs = []
    for x in xs:
        it.set_input(x, 0)
        it.invoke()
        outs.append(np.array(it.get_output(0)))
        it.reset()
    return np.stack(outs)


def test_log_softmax_reference_equals_tflm_over_scales():
    """40 random input scales (1e-3 .. 3), rows of 1..40 classes, random and extreme rows."""
    mf = _fixtures_module()
    rng = np.random.default_rng(0)
    checked = 0
    for _ in range(40):
        s = float(np.float32(10 ** rng.uniform(-3, 0.5)))
        rows, depth = int(rng.integers(1, 4)), int(rng.integers(1, 41))
        zp = int(rng.integers(-20, 21))
        buf = _single_op_model(mf, "LOG_SOFTMAX", ((rows, depth), "int8", [s], [zp]),
                               ((rows, depth), "int8", [16 / 256], [127]), "LogSoftmaxOptions")
        xs = [rng.integers(-128, 128, (rows, depth)).astype(np.int8) for _ in range(4)]
        xs += [np.full((rows, depth), 127, np.int8), np.where(rng.random((rows, depth)) < 0.5, -128, 127).astype(np.int8)]
        want = _tflm(buf, xs)
        got = np.stack([log_softmax_s8(x, log_softmax_params(s)) for x in xs])
        assert np.array_equal(got, want), (s, depth)
        checked += got.size
    assert checked > 1000


@pytest.mark.parametrize("src,dst", [("uint8", "int8"), ("int8", "uint8"), ("int8", "int8")])
def test_quantize_conversions_equal_tflm_on_every_value(src, dst):
    """QUANTIZE between integer types: every input value, random scales and zero points, and the
    exact case (equal scales, zero points 128 apart) that TFLite Micro computes as x ^ 0x80."""
    mf = _fixtures_module()
    rng = np.random.default_rng({"uint8": 1, "int8": 2}[src] * 7 + len(dst))
    lo_in, hi_in = (0, 255) if src == "uint8" else (-128, 127)
    lo_out, hi_out = (0, 255) if dst == "uint8" else (-128, 127)
    cases = [(float(np.float32(10 ** rng.uniform(-3, 0))), int(rng.integers(lo_in, hi_in + 1)),
              float(np.float32(10 ** rng.uniform(-3, 0))), int(rng.integers(lo_out, hi_out + 1))) for _ in range(20)]
    if src != dst:
        shift = 128 if src == "uint8" else -128
        cases.append((0.02, 3 if src == "int8" else 131, 0.02, (3 if src == "int8" else 131) - shift))
    flips = 0
    for s_in, zp_in, s_out, zp_out in cases:
        buf = _single_op_model(mf, "QUANTIZE", ((1, 256), src, [s_in], [zp_in]), ((1, 256), dst, [s_out], [zp_out]))
        x = np.arange(lo_in, hi_in + 1).astype(src).reshape(1, 256)
        want = _tflm(buf, [x])[0]
        p = requantize_params(np.float32(s_in), zp_in, np.float32(s_out), zp_out, src, dst)
        flips += p.flip
        assert np.array_equal(requantize_8(x, p, dst), want), (s_in, zp_in, s_out, zp_out)
    assert flips == (1 if src != dst else 0)


def test_logits_gradient_equals_torch():
    """XENT_LOGITS_GRAD's rule (numpy, the kernel's float32 order) against PyTorch's cross_entropy on
    the dequantized logits: gradient within float32 rounding, loss too."""
    import torch

    rng = np.random.default_rng(5)
    for _ in range(200):
        classes = int(rng.integers(2, 40))
        s = float(np.float32(10 ** rng.uniform(-3, 0)))
        zp = int(rng.integers(-30, 30))
        q = rng.integers(-128, 128, classes)
        if rng.random() < 0.2:
            q[:] = 127
        label = int(rng.integers(0, classes))
        grad, loss = logits_xent(q, label, s, logits_exp_table(s))
        z = torch.tensor(np.float32(s) * (q - zp).astype(np.float64), requires_grad=True)
        ce = torch.nn.functional.cross_entropy(z[None], torch.tensor([label]))
        ce.backward()
        np.testing.assert_allclose(grad, z.grad.numpy(), rtol=0, atol=4e-7 * classes)
        assert abs(loss - ce.item()) <= 1e-5 * max(1.0, ce.item())


def _make(name, tmp_path, spec=FULL, loss="xent"):
    c = compile_model(FIXTURES / f"{name}.tflite", ram=parse_size("512KB"),
                      train=TrainOptions(spec=json.dumps(spec), loss=loss))
    return c, write_project(c, tmp_path / name)


def _data(c, n, seed):
    g = c.graph
    x = inputs(g.t(g.inputs[0]), n - 3, seed)
    y = np.random.default_rng(seed + 1).integers(0, g.t(g.outputs[0]).shape[-1], n).astype(np.int32)
    return Data(x, y)


@pytest.mark.parametrize("name", CLASSIFIERS)
def test_xent_training_c_equals_reference(name, tmp_path):
    """Every weight and bias, momentum, batch 2, 5 steps: the generated C ends with the numpy
    reference's bytes, the losses agree, and the loss reads the logits (no gradient rule runs for the
    softmax, LOG_SOFTMAX or the output conversions)."""
    from pockmcu.training.reference import ReferenceTrainer

    c, out = _make(name, tmp_path)
    kinds = [op.kind for op in c.train.schedule[c.train.n_forward:]]
    softmax_probs = name in ("cls_float_io_softmax", "cls_softmax_reshape", "cls_uint8_shift")
    assert kinds[0] == ("XENT_GRAD" if softmax_probs else "XENT_LOGITS_GRAD")
    data = _data(c, 5, seed=2)
    host = HostTrainer(out)
    host.init(9)
    ref = ReferenceTrainer(c.train, seed=9)
    for x, y in zip(data.x, data.y):
        lc, _, _ = host.step(x, y)
        lr = ref.step(x, y)
        assert abs(lc - lr) <= 1e-5 * max(1.0, abs(lr))
    want = b"".join(np.ascontiguousarray(ref.params()[t]).tobytes() for t in c.train.trainable_tensors)
    assert host.params() == want
    assert want != b"".join(c.graph.t(t).data.tobytes() for t in c.train.trainable_tensors)


@pytest.mark.parametrize("name", ["cls_float_io_softmax", "cls_logits", "cls_log_softmax", "cls_uint8_rescale"])
def test_a_few_epochs_lower_the_loss(name, tmp_path):
    """Labels the model does not predict yet (its own prediction + 1): 4 epochs of SGD on 24 samples
    lower the mean training loss and raise the accuracy."""
    spec = {"bias": "all", "weights": "all", "optimizer": {"kind": "sgd", "lr": 0.02}}
    c, out = _make(name, tmp_path, spec)
    g = c.graph
    x = inputs(g.t(g.inputs[0]), 24, seed=4)[:24]
    classes = g.t(g.outputs[0]).shape[-1]
    y = ((np.argmax(load(out).invoke(x).reshape(len(x), -1), axis=1) + 1) % classes).astype(np.int32)
    hist = HostTrainer(out).train(Data(x, y), epochs=4, seed=0, log=lambda *_: None)
    assert hist[-1]["loss"] < 0.8 * hist[0]["loss"], hist
    assert hist[-1]["train_accuracy"] > hist[0]["train_accuracy"], hist


def test_qemu_parameters_equal_host(tmp_path):
    c, out = _make("cls_float_io_softmax", tmp_path)
    data = _data(c, 12, seed=6)
    host = HostTrainer(out)
    host.train(data, epochs=1, seed=3, log=lambda *_: None)
    _, raw, _ = train_on_target(out, "qemu-m4", data, epochs=1, seed=3, log=lambda *_: None)
    assert raw == host.params()


@pytest.mark.parametrize("name", ["cls_float_io_softmax", "cls_uint8_shift", "cls_uint8_rescale", "cls_log_softmax"])
def test_export_keeps_io_and_equals_host(name, tmp_path):
    """The exported file has the original input and output dtypes, differs from the original, and
    TFLite Micro on it gives the trained host simulation's outputs."""
    c, out = _make(name, tmp_path, {"bias": "all", "weights": [{"layer": -1}], "optimizer": {"kind": "sgd", "lr": 0.05}})
    data = _data(c, 10, seed=8)
    host = HostTrainer(out)
    host.train(data, epochs=2, seed=1, log=lambda *_: None)
    write_params(tmp_path / "p.bin", json.loads((out / "plan.json").read_text()), host.params())
    export_tflite(out, tmp_path / "p.bin", tmp_path / "trained.tflite")
    g = c.graph
    x = inputs(g.t(g.inputs[0]), 8, seed=9)
    trained = host.model.invoke(x)
    exported = tflm_run(tmp_path / "trained.tflite", x)
    assert exported.dtype == np.dtype(g.t(g.outputs[0]).dtype)
    np.testing.assert_array_equal(exported, trained)
    assert not np.array_equal(tflm_run(FIXTURES / f"{name}.tflite", x), trained)


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "pockmcu.cli", *map(str, args)], capture_output=True, text=True,
                          timeout=600, cwd=ROOT)


def _one_line(r, needle):
    assert r.returncode == 2 and "Traceback" not in r.stderr, (r.returncode, r.stderr)
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert needle in r.stderr, r.stderr


def test_errors_only_suggest_a_change_that_works(tmp_path):
    """A softmax classifier trains with either loss (mse of the probabilities passes the SOFTMAX's own
    gradient); xent on a regression model points to mse, and that command then succeeds."""
    upd = '{"bias": "all"}'
    for loss in ("mse", "xent"):
        r = _cli("gen", FIXTURES / "cls_float_io_softmax.tflite", "--train", "--loss", loss, "--update", upd,
                 "--ram", "256KB", "-o", tmp_path / "a")
        assert r.returncode == 0, r.stderr
    for model in (SHARED / "mlperf_ad_autoencoder_floatio.tflite", SHARED / "tflm_hello_world.tflite"):
        r = _cli("gen", model, "--train", "--update", upd, "--ram", "512KB", "-o", tmp_path / "b")
        _one_line(r, "--loss mse")
        r = _cli("gen", model, "--train", "--loss", "mse", "--update", upd, "--ram", "512KB", "-o", tmp_path / "b")
        assert r.returncode == 0, r.stderr


def test_mse_on_a_classifier_trains_through_its_softmax(tmp_path):
    """xent reads a classifier's logits; mse on its probabilities passes the SOFTMAX's gradient
    (SOFTMAX_GRAD) and trains; a model with no layer before its softmax can train with neither loss,
    and the checks say so."""
    from pockmcu.compiler import load_and_check
    from pockmcu.training.builder import classifier_head, trainable_with

    g = load_and_check(FIXTURES / "cls_softmax_reshape.tflite")
    assert classifier_head(g).logits == "conv1/out" and trainable_with(g, "xent") and trainable_with(g, "mse")
    c, _ = _make("cls_softmax_reshape", tmp_path, {"bias": "all"}, loss="mse")
    assert "SOFTMAX_GRAD" in [op.kind for op in c.train.schedule]
    g2 = load_and_check(FIXTURES / "softmax_basic.tflite")
    assert not trainable_with(g2, "mse") and not trainable_with(g2, "xent")
