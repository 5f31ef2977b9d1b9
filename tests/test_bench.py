"""The inference benchmark tables (pockmcu/bench.py, pockmcu/kernel_bench.py): the one-layer models of
the per-kernel table are valid TFLite (TFLite Micro runs them and our reference gives its bytes), the
side-by-side table reports what the runs measured, and --kernels cmsis-nn without a checkout is one
clear line."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import SHARED, tflm_run

from pockmcu.bench import cmsis_nn_checkout, markdown
from pockmcu.compiler import load_and_check
from pockmcu.errors import PockError
from pockmcu.kernel_bench import LAYERS, kernel_markdown, layer_model
from pockmcu.reference import run_reference


@pytest.mark.parametrize("layer", LAYERS, ids=lambda v: v.name)
def test_layer_models_are_valid_and_bit_exact(tmp_path, layer):
    path = tmp_path / "layer.tflite"
    path.write_bytes(layer_model(layer, seed=3))
    g = load_and_check(path)
    assert [op.kind for op in g.ops] == [{"conv": "CONV_2D", "dw": "DEPTHWISE_CONV_2D", "fc": "FULLY_CONNECTED"}[
        layer.kind]]
    x = np.random.default_rng(0).integers(-128, 128, (4,) + g.t(g.inputs[0]).shape[1:]).astype(np.int8)
    want = tflm_run(path, x)
    (got,) = run_reference(g, x)
    np.testing.assert_array_equal(got.reshape(want.shape), want)
    assert np.mean((want > -128) & (want < 127)) > 0.5, "most outputs inside the int8 range"


def _run(kind: str, n: int, out: str) -> dict:
    return dict(kernels=kind, instructions=n, macs=1000, macs_per_instruction=1000 / n, arena_bytes=64,
                lower_bound_bytes=60, flash_bytes=5000, ram_bytes=700, gen_seconds=0.5, output_hex=out, ops=[])


def test_side_by_side_table():
    same = dict(model="m.tflite", target="qemu-m4", auto=_run("auto", 2000, "ab"), portable=_run("portable", 4000, "ab"),
                arm=_run("cmsis-nn", 3000, "ab"), outputs_equal=True, same_schedule=True)
    differ = dict(same, target="qemu-m7", arm=_run("cmsis-nn", 3000, "ac"), outputs_equal=False)
    no_arm = dict(same, target="qemu-m3", arm=None)
    md = markdown([same, differ, no_arm], "/x/CMSIS-NN")
    assert "| m.tflite | qemu-m4 | 2,000 | 0.500 | 4,000 | 3,000 | 0.333 | 1.50x | byte-identical |" in md
    assert "| m.tflite | qemu-m7 | 2,000 | 0.500 | 4,000 | 3,000 | 0.333 | 1.50x | DIFFER |" in md
    assert "| m.tflite | qemu-m3 | 2,000 | 0.500 | 4,000 | - | - | - | byte-identical |" in md
    kmd = kernel_markdown([dict(layer="conv 1x1", target="qemu-m4", outputs_equal=True,
                                auto=dict(kernel="k_dsp", macs=100, macs_per_instruction=0.7),
                                portable=dict(kernel="k", macs=100, macs_per_instruction=0.1))])
    assert "| conv 1x1 | qemu-m4 | 100 | 0.700 (`k_dsp`) | 0.100 (`k`) | - | byte-identical |" in kmd


def test_cmsis_nn_needs_a_checkout(monkeypatch, tmp_path):
    monkeypatch.delenv("CMSIS_NN_PATH", raising=False)
    assert cmsis_nn_checkout("auto") is None
    with pytest.raises(PockError, match="set CMSIS_NN_PATH to a CMSIS-NN checkout"):
        cmsis_nn_checkout("cmsis-nn")
    with pytest.raises(PockError, match="has no Include/arm_nnfunctions.h"):
        cmsis_nn_checkout("cmsis-nn", tmp_path)


def test_arm_runs_the_schedule_of_ours(monkeypatch):
    """side_by_side measures Arm's kernels on the schedule of ours: the stream pass weighs each library's scratch
    buffers, so on its own Arm's build leaves sww_ref untiled where ours runs it in 8 tiles (+18% MACs), and the
    two counts were of different work. Compiled only (no CMSIS-NN checkout or QEMU needed)."""
    from pockmcu import bench
    from pockmcu.compiler import parse_size

    def compile_only(model, target, kernels="auto", cmsis_nn_path=None, seed=0, schedule_of=None):
        c = bench.bench_compile(model, target, parse_size("512KB"), None, kernels, schedule_of)
        return dict(schedule=[op.name for op in c.graph.ops], output_hex="", streamed=c.stream is not None)

    monkeypatch.setattr(bench, "bench_model", compile_only)
    row = bench.side_by_side(SHARED / "mlperf_sww_ref.tflite", "qemu-m55", cmsis_nn_path="/x/CMSIS-NN")
    assert row["auto"]["streamed"] and row["arm"]["streamed"]
    assert row["same_schedule"]
