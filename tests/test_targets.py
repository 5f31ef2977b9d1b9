"""The same generated C on the device: QEMU Cortex-M equals the host byte for byte,
and the host build is clean under ASan and UBSan, on every supported model."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import all_models, model_id, shared_models

from pockmcu.build import build_host_sanitized, run_host_sanitized
from pockmcu.runner import run_on_target
from pockmcu.sim import load

# A smaller set on the other cores: every op family once, and models that fit each part.
OTHER_CORES = {
    "qemu-m3": ["mlperf_kws_dscnn", "tflm_micro_speech", "small_cnn", "quant_float_io", "logistic"],
    "qemu-m7": ["mlperf_ic_resnet8", "mlperf_ad_autoencoder_floatio", "concat_channels", "softmax_beta"],
    "qemu-m33": ["mlperf_sww_ref", "tflm_hello_world", "mean_spatial_nokeep", "pad_spatial"],
    "qemu-m55": ["mlperf_vww_mobilenetv1_96", "tflm_person_detect", "add_diff_scales", "dwconv_mult8_1ch"],
}


def by_stem(stem):
    return next(m for m in all_models() if m.stem == stem)


@pytest.mark.parametrize("model", shared_models(), ids=model_id)
def test_qemu_m4_equals_host(model, generated):
    gen = generated(model)
    xs = gen.inputs(3, seed=21)
    host = load(gen.out).invoke(*xs)
    dev = run_on_target(gen.out, "qemu-m4", *xs)
    np.testing.assert_array_equal(dev, host)


@pytest.mark.parametrize("target,stem", [(t, s) for t, stems in OTHER_CORES.items() for s in stems])
def test_other_cores_equal_host(target, stem, generated):
    gen = generated(by_stem(stem))
    xs = gen.inputs(2, seed=5)
    np.testing.assert_array_equal(run_on_target(gen.out, target, *xs), load(gen.out).invoke(*xs))


@pytest.mark.parametrize("model", all_models(), ids=model_id)
def test_sanitized_host_build_is_clean(model, generated):
    gen = generated(model)
    xs = gen.inputs(3, seed=3)
    exe = build_host_sanitized(gen.out)
    data = b"".join(b"".join(np.ascontiguousarray(x[i]).tobytes() for x in xs) for i in range(3))
    raw = run_host_sanitized(exe, data)  # raises on any ASan/UBSan report (non-zero exit)
    host = load(gen.out).invoke(*xs)
    assert raw == np.ascontiguousarray(host).tobytes()
