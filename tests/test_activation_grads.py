"""Gradients through LOGISTIC, SOFTMAX, LOG_SOFTMAX and an int8 -> int8 QUANTIZE inside a network.

* the C kernels (host gcc through cffi, the generated build's flags) against PyTorch autograd on
  the dequantized saved output, and bit for bit against the numpy references the training
  reference uses (same order of float32 operations);
* a fixture whose conv0 trains through all four (act_grads_classifier): generated C = numpy
  reference after 4 steps, and QEMU = host.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import FIXTURES, KERNELS_DIR, build_kernel_lib, kernel_cdef
from test_binops import train_host_equals_reference, train_qemu_equals_host

F32 = np.float32
SOURCES = ["pockmcu_logistic_grad_f32", "pockmcu_softmax_grad_f32", "pockmcu_log_softmax_grad_f32"]


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    import cffi

    so = build_kernel_lib(tmp_path_factory.mktemp("actgrad") / "libactgrad.so",
                          [KERNELS_DIR / f"{n}.c" for n in SOURCES])
    ffi = cffi.FFI()
    ffi.cdef(kernel_cdef())
    return ffi, ffi.dlopen(str(so))


def _bits(a):
    return (np.asarray(a, F32) + F32(0)).view(np.uint32)


def _torch_grad(fn, x_real, dy):
    import torch

    t = torch.tensor(x_real, requires_grad=True)
    fn(t).backward(torch.tensor(dy))
    return t.grad.numpy()


def test_logistic_grad_equals_torch_every_value(lib):
    """Every int8 output: PyTorch's sigmoid_backward at the output's real value, the same float32 bits."""
    import torch

    from pockmcu.ops.activations import logistic_grad

    ffi, k = lib
    rng = np.random.default_rng(1)
    q = np.arange(-128, 128).astype(np.int8)
    for s, zp in [(1 / 256, -128), (0.0042, -3), (0.02, 50)]:
        dy = rng.standard_normal(256).astype(F32)
        got = np.empty(256, F32)
        k.pockmcu_logistic_grad_f32(ffi.from_buffer("int8_t[]", q), 256, s, zp, ffi.from_buffer("float[]", dy),
                                    ffi.from_buffer("float[]", got))
        y = F32(s) * (q.astype(np.int32) - zp).astype(F32)
        want = torch.ops.aten.sigmoid_backward(torch.tensor(dy), torch.tensor(y)).numpy()
        np.testing.assert_array_equal(_bits(got), _bits(want))
        np.testing.assert_array_equal(_bits(got), _bits(logistic_grad(q, dy, s, zp)))


def _close_to_float32_rounding(got, want, dy):
    """Equal but for the order of a row's float32 sum: within a few ulps of the row's magnitude."""
    bound = 4 * np.finfo(F32).eps * (1 + np.abs(dy).sum(-1, keepdims=True))
    assert (np.abs(got - want) <= bound).all(), float(np.abs(got - want).max())


@pytest.mark.parametrize("depth", [1, 5, 10, 33])
def test_softmax_grads_equal_torch(lib, depth):
    """SOFTMAX and LOG_SOFTMAX backward over rows of int8 outputs: PyTorch's autograd of softmax /
    log_softmax (recomputed from the dequantized output's logits) within float32 rounding of the row sum,
    and the numpy reference bit for bit; in place (grad_input = grad_output) too."""
    import torch

    from pockmcu.ops.activations import softmax_grad
    from pockmcu.ops.log_softmax import exp_table, log_softmax_grad

    ffi, k = lib
    rng = np.random.default_rng(depth)
    rows = 7
    for case in range(3):
        # softmax: outputs of a real softmax, quantized with TFLite's 1/256, -128
        logits = rng.standard_normal((rows, depth)) * (1 + 3 * case)
        p = np.exp(logits - logits.max(-1, keepdims=True))
        p /= p.sum(-1, keepdims=True)
        q = np.clip(np.round(p * 256) - 128, -128, 127).astype(np.int8)
        dy = rng.standard_normal((rows, depth)).astype(F32)
        got = np.empty((rows, depth), F32)
        k.pockmcu_softmax_grad_f32(ffi.from_buffer("int8_t[]", q), rows, depth, 1 / 256, -128,
                                   ffi.from_buffer("float[]", dy), ffi.from_buffer("float[]", got))
        np.testing.assert_array_equal(_bits(got), _bits(softmax_grad(q, dy, 1 / 256, -128)))
        y = torch.tensor(F32(1 / 256) * (q.astype(np.int32) + 128).astype(F32))
        want = torch.ops.aten._softmax_backward_data(torch.tensor(dy), y, -1, torch.float32).numpy()
        _close_to_float32_rounding(got, want, dy)
        inplace = dy.copy()
        buf = ffi.from_buffer("float[]", inplace)
        k.pockmcu_softmax_grad_f32(ffi.from_buffer("int8_t[]", q), rows, depth, 1 / 256, -128, buf, buf)
        np.testing.assert_array_equal(_bits(inplace), _bits(got))

        # log_softmax: outputs quantized with TFLite's 16/256, 127
        ls = logits - logits.max(-1, keepdims=True)
        ls = ls - np.log(np.exp(ls).sum(-1, keepdims=True))
        lq = np.clip(np.round(ls * 16) + 127, -128, 127).astype(np.int8)
        table = exp_table(16 / 256, 127)
        k.pockmcu_log_softmax_grad_f32(ffi.from_buffer("int8_t[]", lq), rows, depth,
                                       ffi.from_buffer("uint32_t[]", table.view(np.uint32)),
                                       ffi.from_buffer("float[]", dy), ffi.from_buffer("float[]", got))
        np.testing.assert_array_equal(_bits(got), _bits(log_softmax_grad(lq, dy, 16 / 256, 127)))
        yl = torch.tensor(F32(16 / 256) * (lq.astype(np.int32) - 127).astype(F32))
        want = torch.ops.aten._log_softmax_backward_data(torch.tensor(dy), yl, -1, torch.float32).numpy()
        _close_to_float32_rounding(got, want, dy)


def test_training_through_activations_c_equals_reference(tmp_path):
    """conv0 trains through LOGISTIC, QUANTIZE int8 -> int8, SOFTMAX and LOG_SOFTMAX inside the network."""
    train_host_equals_reference(FIXTURES / "act_grads_classifier.tflite", tmp_path,
                                ["LOGISTIC_GRAD", "SOFTMAX_GRAD", "LOG_SOFTMAX_GRAD"])


@pytest.mark.qemu
def test_training_through_activations_on_qemu_equals_host(tmp_path):
    train_qemu_equals_host(FIXTURES / "act_grads_classifier.tflite", tmp_path)
