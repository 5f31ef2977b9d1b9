"""The commands a user runs, end to end, as subprocesses."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import numpy as np
import pytest
from conftest import FIXTURES, SHARED, tflm_run

from pockmcu.compiler import parse_size

KWS = SHARED / "mlperf_kws_dscnn.tflite"


def pockmcu(*args, check=True):
    r = subprocess.run([sys.executable, "-m", "pockmcu.cli", *map(str, args)], capture_output=True, text=True,
                       timeout=600)
    if check:
        assert r.returncode == 0, r.stderr
    return r


@pytest.mark.parametrize("text", ["256KB", "256K", "256KiB", "262144", "0.25MB", "256kb"])
def test_sizes(text):
    assert parse_size(text) == 262144


def test_gen_sim_run_match_tflm(tmp_path):
    out = tmp_path / "kws"
    r = pockmcu("gen", KWS, "--ram", "256KB", "--target", "cortex-m4", "-o", out)
    assert "arena 16000 B" in r.stdout
    for name in ("model.h", "model.c", "weights.c", "weights.h", "Makefile", "plan.json", "report.txt",
                 "report.html"):
        assert (out / name).is_file(), name
    x = np.random.default_rng(0).integers(-128, 128, (4, 49, 10, 1)).astype(np.int8)
    np.save(tmp_path / "in.npy", x)
    pockmcu("sim", out, "--input", tmp_path / "in.npy", "-o", tmp_path / "host.npy")
    pockmcu("run", out, "--target", "qemu-m4", "--input", tmp_path / "in.npy", "-o", tmp_path / "dev.npy")
    host, dev = np.load(tmp_path / "host.npy"), np.load(tmp_path / "dev.npy")
    assert host.shape == (4, 12) and host.dtype == np.int8
    np.testing.assert_array_equal(host, tflm_run(KWS, x))
    np.testing.assert_array_equal(dev, host)
    plan = json.loads((out / "plan.json").read_text())
    assert plan["ram_budget_bytes"] == 262144 and plan["arena_bytes"] == 16000


def test_python_api(tmp_path):
    from pockmcu import sim

    pockmcu("gen", FIXTURES / "quant_float_io.tflite", "--ram", "64KB", "-o", tmp_path / "o")
    m = sim.load(tmp_path / "o")
    x = np.random.default_rng(1).standard_normal((5,) + tuple(m.inputs[0]["shape"][1:])).astype(np.float32)
    y = m.invoke(x)
    assert y.dtype == np.float32
    np.testing.assert_array_equal(y, tflm_run(FIXTURES / "quant_float_io.tflite", x))


def test_generated_c_hygiene(tmp_path):
    """No malloc, named constants, no giant lines, comments that say what each layer is."""
    pockmcu("gen", SHARED / "mlperf_vww_mobilenetv1_96.tflite", "--ram", "256KB", "-o", tmp_path / "o")
    src = {p.name: p.read_text() for p in (tmp_path / "o").glob("*.[ch]")}
    kernels = {p.name: p.read_text() for p in (tmp_path / "o" / "kernels").glob("*.[ch]")}
    for name, text in {**src, **kernels}.items():
        assert not re.search(r"\b(malloc|calloc|realloc|free)\s*\(", text), name
        assert max(len(line) for line in text.splitlines()) < 200, name
    assert re.search(r"/\* conv0(_tile0)?: CONV_2D 3x3 stride 2x2", src["model.c"])   # streamed: per tile
    assert src["weights.c"].count("const int8_t") >= 28


def test_inspect_lists_ops_and_support():
    r = pockmcu("inspect", KWS)
    assert "DEPTHWISE_CONV_2D" in r.stdout and "2656768 MACs" in r.stdout and "supported" in r.stdout
    r = pockmcu("inspect", SHARED / "tflm_mnist_lstm.tflite", check=False)
    assert r.returncode == 2 and "does not compile" in r.stderr   # the exit status says it does not compile
    assert "NOT SUPPORTED" in r.stdout and "UNIDIRECTIONAL_SEQUENCE_LSTM" in r.stdout


def test_bench_is_exact_and_repeatable():
    a = json.loads(pockmcu("bench", KWS, "--target", "qemu-m4", "--json").stdout)
    b = json.loads(pockmcu("bench", KWS, "--target", "qemu-m4", "--json").stdout)
    assert a["instructions"] == b["instructions"] > 0
    assert [o["instructions"] for o in a["ops"]] == [o["instructions"] for o in b["ops"]]
    assert a["macs"] == 2656768
    assert sum(o["instructions"] for o in a["ops"]) == a["instructions"]
    assert all(o["instructions"] > 0 for o in a["ops"] if o["kernel"])
    assert a["flash_bytes"] > a["weights_bytes"] > 0


def test_report_html_has_timeline(tmp_path):
    pockmcu("gen", KWS, "--ram", "256KB", "-o", tmp_path / "o")
    html = (tmp_path / "o" / "report.html").read_text()
    assert html.count('class="tensor"') >= 10 and "<svg" in html
    assert "src=" not in html and "href=" not in html and "<link" not in html  # self-contained, no network
