"""Standalone activations: LEAKY_RELU, PRELU, TANH, RELU, RELU6, RELU_N1_TO_1 (pockmcu/ops/unary.py).

* Prepare and the numpy reference against TFLite Micro on every int8 input value, random scales
  over twelve decades (and alphas of both signs), through single-op models; the generated C (host
  simulation) on the same models; RELU_N1_TO_1, which TFLite Micro has no kernel for, against its
  TFLite formula on every input and through the generated C;
* the gradient kernels against PyTorch autograd (leaky_relu, prelu, relu, relu6/hardtanh, tanh's
  backward at the output): the same float32 bits, and the numpy references bit for bit;
* training through every activation to the conv before them (unary_classifier): generated C = numpy
  reference, and QEMU = host.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import FIXTURES
from test_binops import Kernels, compiled, random_q, single_op_model, tflm, train_host_equals_reference, train_qemu_equals_host

F32 = np.float32
ALL_INT8 = np.arange(-128, 128, dtype=np.int8)
SHAPE = (1, 4, 8, 8)


def _model(opcode, qi, qo, rng, **kw):
    if opcode == "PRELU":
        alpha = rng.integers(-128, 128, (1, 1, 8)).astype(np.int8)
        qa = random_q(rng, (-3, 0))
        return single_op_model("PRELU", [qi, qa, qo], [SHAPE, (1, 1, 8), SHAPE], alpha)
    if opcode == "LEAKY_RELU":
        return single_op_model(opcode, [qi, qo], [SHAPE, SHAPE], None, "LeakyReluOptions", {"Alpha": kw["alpha"]})
    return single_op_model(opcode, [qi, qo], [SHAPE, SHAPE])


def _inputs(rng):
    return [ALL_INT8.reshape(SHAPE), ALL_INT8[::-1].reshape(SHAPE), rng.permutation(ALL_INT8).reshape(SHAPE)]


@pytest.mark.parametrize("opcode", ["LEAKY_RELU", "PRELU", "TANH", "RELU", "RELU6"])
def test_reference_equals_tflm_every_value(opcode, tmp_path):
    """40 random quantizations (input scales 1e-9 .. 1e3, output / input ratios over four decades; TANH's
    output is 1/128, 0) x every int8 value in three orders; the generated C on 4 of them."""
    from pockmcu.compiler import load_and_check
    from pockmcu.reference import run_reference

    rng = np.random.default_rng(sum(map(ord, opcode)))
    values = 0
    for k in range(40):
        s_in = float(F32(10 ** rng.uniform(-9, 3)))
        qi = (s_in, int(rng.integers(-128, 128)))
        qo = (1 / 128, 0) if opcode == "TANH" else (float(F32(s_in * 10 ** rng.uniform(-2, 2))),
                                                    int(rng.integers(-128, 128)))
        if opcode == "RELU6":
            qo = qi
        alpha = float(F32(rng.choice([-1, 1]) * 10 ** rng.uniform(-3, 0.5)))
        buf = _model(opcode, qi, qo, rng, alpha=alpha)
        path = tmp_path / "m.tflite"
        path.write_bytes(buf)
        try:
            g = load_and_check(path)
        except Exception as exc:       # refused (TFLM's int32 overflow cases): one clear reason
            assert "overflow" in str(exc) or "undefined" in str(exc), exc
            continue
        for xs in _inputs(rng):
            want = tflm(buf, [xs])
            np.testing.assert_array_equal(run_reference(g, xs)[0].reshape(want.shape), want, err_msg=f"{qi} {qo}")
            values += want.size
        if k < 4:
            _, sim = compiled(tmp_path / f"c{k}", buf)
            for xs in _inputs(rng):
                np.testing.assert_array_equal(sim.invoke(xs).reshape(SHAPE), tflm(buf, [xs]))
    assert values >= 30 * 3 * 256, values


def test_relu_n1_to_1_formula_and_c(tmp_path):
    """RELU_N1_TO_1: TFLite's QuantizedReluX(-1, 1) on every input, in the reference and the generated C."""
    from pockmcu import fixedpoint as fp
    from pockmcu.reference import run_reference

    rng = np.random.default_rng(3)
    for k in range(6):
        qi, qo = random_q(rng, (-3, 0)), random_q(rng, (-3, -1))
        g, sim = compiled(tmp_path / f"n{k}", single_op_model("RELU_N1_TO_1", [qi, qo], [SHAPE, SHAPE]))
        m, sh = fp.quantize_multiplier(float(F32(qi[0]) / F32(qo[0])))
        lo = max(-128, qo[1] + int(np.round(F32(-1) / F32(qo[0]))))
        hi = min(127, qo[1] + int(np.round(F32(1) / F32(qo[0]))))
        x = ALL_INT8.reshape(SHAPE)
        want = np.clip(fp.multiply_by_quantized_multiplier(x.astype(np.int64) - qi[1], m, sh) + qo[1], lo, hi)
        np.testing.assert_array_equal(run_reference(g, x)[0].reshape(SHAPE), want)
        np.testing.assert_array_equal(sim.invoke(x).reshape(SHAPE), want)


@pytest.fixture(scope="module")
def kernels(tmp_path_factory):
    return Kernels(tmp_path_factory.mktemp("ugrad"))


def test_gradients_equal_torch(kernels):
    """Each activation's gradient kernel against PyTorch autograd on the dequantized input (TANH: its
    backward at the dequantized output), every int8 value: the same float32 bits."""
    import torch
    import torch.nn.functional as F

    from pockmcu.ops.binary import dims15
    from pockmcu.ops.unary import CLAMP_RANGES, _clamp_bounds, leaky_relu_grad, tanh_grad

    torch.set_num_threads(1)
    k = kernels
    rng = np.random.default_rng(9)
    x = ALL_INT8.copy()
    for s, zp in [(0.05, 0), (0.0421, -3), (0.75, -60), (0.01, 100), (3.1, 7)]:
        xr = F32(s) * (x.astype(np.int32) - zp).astype(F32)
        dy = rng.standard_normal(256).astype(F32)

        def torch_grad(fn, inp=xr):
            t = torch.tensor(inp, requires_grad=True)
            fn(t).backward(torch.tensor(dy))
            return t.grad.numpy()

        def bits(a):
            return (np.asarray(a, F32) + F32(0)).view(np.uint32)

        got = np.empty(256, F32)
        for alpha in (0.2, -0.7):
            k.lib.pockmcu_leaky_relu_grad_f32(k.i8(x), 256, zp, alpha, k.f32(dy), k.f32(got))
            np.testing.assert_array_equal(bits(got), bits(torch_grad(lambda t: F.leaky_relu(t, alpha))))
            np.testing.assert_array_equal(bits(got), bits(leaky_relu_grad(x, dy, zp, alpha)))
        for kind, fn in (("RELU", F.relu), ("RELU6", F.relu6), ("RELU_N1_TO_1", lambda t: F.hardtanh(t, -1.0, 1.0))):
            lo, hi = _clamp_bounds(s, zp, *CLAMP_RANGES[kind])
            k.lib.pockmcu_clamp_grad_f32(k.i8(x), 256, lo, hi, k.f32(dy), k.f32(got))
            np.testing.assert_array_equal(bits(got), bits(torch_grad(fn)), err_msg=f"{kind} {s} {zp}")
        # PRELU, 256 = 32 x 8 channels, alpha per channel
        alpha_q = rng.integers(-128, 128, 8).astype(np.int8)
        sa, za = 0.004, 5
        ar = F32(sa) * (alpha_q.astype(np.int32) - za).astype(F32)
        dims = np.array(dims15((32, 8), (32, 8), (8,)), np.int32)
        k.lib.pockmcu_prelu_grad_f32(k.i8(x), k.i8(alpha_q), k.i32(dims), zp, sa, za, k.f32(dy), k.f32(got))
        t = torch.tensor(xr.reshape(32, 8), requires_grad=True)
        F.prelu(t, torch.tensor(ar)).backward(torch.tensor(dy.reshape(32, 8)))
        np.testing.assert_array_equal(bits(got), bits(t.grad.numpy().reshape(-1)))
        # TANH from its output (scale 1/128): PyTorch's tanh backward at that output
        k.lib.pockmcu_tanh_grad_f32(k.i8(x), 256, 1 / 128, 0, k.f32(dy), k.f32(got))
        yr = F32(1 / 128) * x.astype(F32)
        want = torch.ops.aten.tanh_backward(torch.tensor(dy), torch.tensor(yr)).numpy()
        np.testing.assert_array_equal(bits(got), bits(want))
        np.testing.assert_array_equal(bits(got), bits(tanh_grad(x, dy, 1 / 128, 0)))


def test_training_through_activations_c_equals_reference(tmp_path):
    train_host_equals_reference(FIXTURES / "unary_classifier.tflite", tmp_path,
                                ["LEAKY_RELU_GRAD", "PRELU_GRAD", "TANH_GRAD", "CLAMP_GRAD", "MAXIMUM_GRAD",
                                 "MINIMUM_GRAD"])


@pytest.mark.qemu
def test_training_through_activations_on_qemu_equals_host(tmp_path):
    train_qemu_equals_host(FIXTURES / "unary_classifier.tflite", tmp_path)
