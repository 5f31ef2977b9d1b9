"""Streamed early layers (pockmcu/stream.py): the stage runs tile by tile, byte-identical.

* every valid stage and grid of MobileNetV2 (border tiles, residual ADDs, stride 2) and the chosen
  stage of every model that streams: the numpy reference equals the unstreamed one byte for byte;
* the generated C of streamed models equals the unstreamed C and TFLite Micro (host simulation);
* a streamed training step leaves the same parameters as the unstreamed one (host simulation);
* the policy: ``auto`` lowers the peak within its MAC limit, ``max`` lowers it most, ``off`` never
  streams; plan.json records what streamed.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import FIXTURES, ROOT, SHARED, fixture_models, model_id, random_inputs, tflm_run
from test_errors import pockmcu

from pockmcu.codegen import write_project
from pockmcu.compiler import TrainOptions, compile_model, load_and_check
from pockmcu.reference import run_reference
from pockmcu.sim import load
from pockmcu.stream import (
    AUTO_MAX_EXTRA_MACS,
    AUTO_MAX_EXTRA_OPS,
    GRIDS,
    apply_stream,
    choose_stream,
    macs,
    stages,
    tile_regions,
)

MOBILENETV2 = ROOT / "tests" / "fixtures" / "mobilenetv2" / "mobilenetv2_w035_128.tflite"
STREAMING = [MOBILENETV2, SHARED / "mlperf_vww_mobilenetv1_96.tflite", SHARED / "tflm_person_detect.tflite",
             SHARED / "mlperf_ic_resnet8.tflite", SHARED / "mlperf_sww_ref.tflite", FIXTURES / "small_cnn.tflite"]


def inputs(g, n=3, seed=0):
    t = g.t(g.inputs[0])
    return random_inputs(t.shape, t.dtype, n, seed)


def test_tiles_partition_the_output():
    for shape in ((1, 32, 32, 8), (1, 7, 5, 3), (1, 16, 1, 4)):
        for grid in GRIDS:
            if grid[0] > shape[1] or grid[1] > shape[2]:
                continue
            cover = np.zeros(shape[1:3], int)
            for r0, r1, c0, c1 in tile_regions(shape, grid):
                cover[r0:r1, c0:c1] += 1
            assert (cover == 1).all(), (shape, grid)


def test_stages_cut_where_one_tensor_is_live():
    g = load_and_check(MOBILENETV2)
    sinks = {st.sink for st in stages(g)}
    assert "b2_add/out" in sinks and "b1_project/out" in sinks
    assert "b2_expand/out" not in sinks    # inside a residual block the block input is live too


def test_every_stage_and_grid_of_mobilenetv2_is_byte_identical():
    g = load_and_check(MOBILENETV2)
    x = inputs(g, 2)
    want = run_reference(g, x)[0]
    checked = 0
    for st in stages(g)[:10]:
        for grid in GRIDS:
            if grid[0] > g.t(st.sink).shape[1]:
                continue
            ng, tiles = apply_stream(g, st, grid)
            assert any(op.kind == "TILE_PASTE" for op in ng.ops)
            got = run_reference(ng, x)[0]
            assert np.array_equal(got, want), (st, grid)
            checked += 1
    assert checked >= 60


@pytest.mark.parametrize("model", STREAMING + fixture_models(), ids=model_id)
def test_chosen_stream_is_byte_identical(model):
    g = load_and_check(model)
    ng, st = choose_stream(g, "max")
    if model in STREAMING:
        assert st is not None and st.peak_after < st.peak_before
    if st is None:
        return
    x = inputs(g)
    for a, b in zip(run_reference(g, x), run_reference(ng, x)):
        assert np.array_equal(a, b)


@pytest.mark.parametrize("model", STREAMING[:4], ids=model_id)
def test_streamed_c_equals_unstreamed_and_tflm(model, tmp_path):
    on = compile_model(model, ram=1 << 30, stream="max")
    off = compile_model(model, ram=1 << 30, stream="off")
    assert on.stream is not None and off.stream is None
    assert on.plan.arena_bytes < off.plan.arena_bytes
    x = inputs(on.graph, 4, seed=7)
    a = load(write_project(on, tmp_path / "on")).invoke(x)
    b = load(write_project(off, tmp_path / "off")).invoke(x)
    assert np.array_equal(a, b)
    assert np.array_equal(a, tflm_run(model, x))
    plan = json.loads((tmp_path / "on" / "plan.json").read_text())
    assert plan["streamed"]["grid"] == list(on.stream.grid)
    assert plan["macs"] == macs(on.graph) > json.loads((tmp_path / "off" / "plan.json").read_text())["macs"]


def test_policy():
    for model in STREAMING + [SHARED / "mlperf_kws_dscnn.tflite"]:
        g = load_and_check(model)
        ng, auto = choose_stream(g, "auto")
        best = choose_stream(g, "max")[1]
        assert choose_stream(g, "off") == (g, None)
        if auto is not None:
            assert auto.macs_after <= auto.macs_before * (1 + AUTO_MAX_EXTRA_MACS)
            assert auto.peak_after <= 0.9 * auto.peak_before
            assert len(ng.ops) - len(g.ops) <= AUTO_MAX_EXTRA_OPS
            assert best.peak_after <= auto.peak_after
    kws = load_and_check(SHARED / "mlperf_kws_dscnn.tflite")
    assert choose_stream(kws, "auto")[1] is None        # streaming would triple its MACs for 11%
    assert choose_stream(load_and_check(MOBILENETV2), "auto")[1] is not None


def test_streamed_training_step_is_identical(tmp_path):
    """VWW, sparse update: the same parameters after 3 steps with and without streaming."""
    model = SHARED / "mlperf_vww_mobilenetv1_96.tflite"
    spec = json.dumps({"bias": {"last": 4}, "weights": [{"layer": -1}], "optimizer": {"lr": 0.01}})
    g = load_and_check(model)
    x = inputs(g, 3, seed=3)
    np.savez(tmp_path / "data.npz", x=x, y=np.array([0, 1, 1]))
    blobs = {}
    for mode in ("max", "off"):
        c = compile_model(model, ram=1 << 30, train=TrainOptions(spec=spec), stream=mode)
        assert (c.stream is not None) == (mode == "max")
        out = write_project(c, tmp_path / mode)
        r = pockmcu("sim", out, "--train", tmp_path / "data.npz", "--epochs", 1, "--save-params",
                    tmp_path / f"{mode}.bin")
        assert r.returncode == 0, r.stderr
        blobs[mode] = (tmp_path / f"{mode}.bin").read_bytes()
    assert blobs["max"] == blobs["off"]


def test_cli_stream_flag(tmp_path):
    model = SHARED / "mlperf_vww_mobilenetv1_96.tflite"
    r = pockmcu("gen", model, "--ram", "256KB", "--stream", "max", "-o", tmp_path / "out")
    assert r.returncode == 0, r.stderr
    assert "streamed 4 layers" in r.stdout and "tiles" in r.stdout
    r = pockmcu("gen", model, "--ram", "256KB", "--stream", "some", "-o", tmp_path / "bad")
    assert r.returncode == 2 and not (tmp_path / "bad").exists()
