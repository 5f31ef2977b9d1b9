"""Byte-exactness: host simulation (generated C via cffi) and the numpy reference
against the TFLite Micro interpreter, on every supported model and fixture."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import all_models, model_id, tflm_run

from pockmcu.reference import run_reference
from pockmcu.sim import load

N_INPUTS = 20


@pytest.mark.parametrize("model", all_models(), ids=model_id)
def test_host_simulation_equals_tflm(model, generated):
    gen = generated(model)
    xs = gen.inputs(N_INPUTS, seed=7)
    want = tflm_run(model, *xs)
    got = load(gen.out).invoke(*xs)
    assert got.dtype == want.dtype and got.shape == want.shape
    mismatched = int(np.sum(got != want))
    assert mismatched == 0, f"{mismatched} of {got.size} output values differ from TFLM"


@pytest.mark.parametrize("model", all_models(), ids=model_id)
def test_numpy_reference_equals_tflm(model, generated):
    gen = generated(model)
    xs = gen.inputs(N_INPUTS, seed=11)
    want = tflm_run(model, *xs)
    (got,) = run_reference(gen.compiled.graph, *xs)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got.reshape(want.shape), want)
