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
    # 16,000 B of activations + the largest scratch: the DSP 1x1 kernel's small-depth chunk (16 of the 125
    # pixels of 64 channels widened to int16, and one widened filter row: 17 x 128 = 2,176 B; the 3x3 depthwise
    # ring takes 1,708 B), at the lower bound (the default --kernels auto: every DSP kernel; --kernels compact may
    # leave some out for flash)
    assert "arena 18176 B (lower bound 18176 B)" in r.stdout
    assert "kernels: pockmcu for qemu-m4 (dsp, fpu)" in r.stdout
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
    assert plan["ram_budget_bytes"] == 262144 and plan["arena_bytes"] == plan["lower_bound_bytes"] == 18176


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


# -- issue 15: bad invocations end with one line and exit 2, nothing written, no traceback ---------------

def _cli(capsys, *args) -> tuple[int, str]:
    """pockmcu in this process (fast); (exit status, stderr)."""
    from pockmcu.cli import main

    try:
        rc = main([str(a) for a in args])
    except SystemExit as exc:
        rc = exc.code
    return rc, capsys.readouterr().err


def _refused(capsys, *args, needle: str = "") -> str:
    rc, err = _cli(capsys, *args)
    assert rc == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1, (rc, err)
    assert needle.lower() in err.lower(), (needle, err)
    return err


@pytest.mark.parametrize("args,needle", [
    (["sim", "OUT", "--train", "d.npz", "--seed", "-1"], "--seed"),
    (["sim", "OUT", "--train", "d.npz", "--epochs", "1000000000"], "--epochs"),
    (["sim", "OUT", "--train", "d.npz", "--epochs", "0"], "--epochs"),
    (["plan", str(KWS), "--train", "--ram", "64KB", "--seed", "-5"], "--seed"),
    (["emulate", "OUT", "--port", "-1"], "--port"),
    (["emulate", "OUT", "--port", "70000"], "--port"),
    (["flash", "OUT", "--address", "xyz"], "--address"),
    (["monitor", "--port", "socket://127.0.0.1:1", "--interval", "-1"], "--interval"),
    (["monitor", "--port", "socket://127.0.0.1:1", "--interval", "nan"], "--interval"),
    (["monitor", "--port", "socket://127.0.0.1:1", "--interval", "inf"], "--interval"),
    (["monitor", "--port", "socket://127.0.0.1:1", "--count", "0"], "--count"),
    (["monitor", "--port", "socket://127.0.0.1:1", "--timeout", "nan"], "--timeout"),
    (["monitor", "--port", "socket://127.0.0.1:1", "--baud", "0"], "--baud"),
    (["train", "--port", "socket://127.0.0.1:1", "--data", "d.npz", "--lr", "nan"], "--lr"),
    (["train", "--port", "socket://127.0.0.1:1", "--data", "d.npz", "--seed", "-1"], "--seed"),
])
def test_numbers_are_range_checked(args, needle, capsys):
    _refused(capsys, *args, needle=needle)


@pytest.mark.parametrize("args,needle", [
    (["--ram", "100000000000000000000000000MB"], "4 GiB"),
    (["--ram", "1e26MB"], "not a size"),
    (["--ram", "256KB", "--flash", "99999999999KB"], "4 GiB"),
    (["--ram", "256KB", "--stack", "1"], "--stack"),
    (["--ram", "256KB", "--stack", "255"], "minimum of 256"),
])
def test_gen_budgets_are_checked_before_the_build(args, needle, tmp_path, capsys):
    """--stack 1 used to pass gen and fail at link time; budgets beyond 4 GiB were accepted."""
    _refused(capsys, "gen", KWS, *args, "-o", tmp_path / "o", needle=needle)
    assert not (tmp_path / "o").exists()


def test_update_spec_nesting_and_lr(tmp_path, capsys):
    deep = tmp_path / "deep.json"
    deep.write_text('{"bias": ' + "[" * 100000 + "]" * 100000 + "}")
    _refused(capsys, "gen", KWS, "--ram", "256KB", "--train", "--update", deep, "-o", tmp_path / "o",
             needle="nested")
    _refused(capsys, "gen", KWS, "--ram", "256KB", "--train", "--update",
             '{"bias": "all", "optimizer": {"kind": "sgd", "lr": 1e39}}', "-o", tmp_path / "o", needle="lr")
    assert not (tmp_path / "o").exists()


@pytest.fixture(scope="module")
def fc_train(tmp_path_factory):
    """A small regression model compiled for training (mse), with data files."""
    d = tmp_path_factory.mktemp("fc_train")
    out = d / "out"
    r = pockmcu("gen", FIXTURES / "fc_none.tflite", "--ram", "256KB", "--train", "--loss", "mse", "--update",
                '{"bias": "all"}', "-o", out)
    assert r.returncode == 0
    return out


def test_unwritable_outputs_fail_before_any_work(fc_train, tmp_path, capsys):
    """-o under a regular file (root ignores permissions, not that): one line, for every writing command."""
    f = tmp_path / "file"
    f.write_text("x")
    bad = f / "sub" / "r.npy"
    x = np.zeros((1,) + tuple(json.loads((fc_train / "plan.json").read_text())["inputs"][0]["shape"][1:]), np.int8)
    np.save(tmp_path / "x.npy", x)
    _refused(capsys, "gen", KWS, "--ram", "256KB", "-o", f / "o", needle="cannot write")
    _refused(capsys, "sim", fc_train, "--input", tmp_path / "x.npy", "-o", bad, needle="cannot write")
    _refused(capsys, "run", fc_train, "--input", tmp_path / "x.npy", "-o", bad, needle="cannot write")
    _refused(capsys, "export", fc_train, "--params", tmp_path / "p.bin", "-o", bad, needle="cannot write")
    _refused(capsys, "plan", KWS, "--train", "--ram", "64KB", "-o", bad, needle="cannot write")
    _refused(capsys, "pull", "--port", "socket://127.0.0.1:1", "-o", bad, needle="cannot write")


def test_directory_outputs_leave_no_temporary_files(fc_train, tmp_path, capsys):
    """export / pull / --save-params with -o a directory used to leave .NAME.XXXX files behind."""
    d = tmp_path / "dir"
    d.mkdir()
    y = np.zeros((4,) + tuple(json.loads((fc_train / "plan.json").read_text())["outputs"][0]["shape"][1:]),
                 np.float32)
    x = np.zeros((4,) + tuple(json.loads((fc_train / "plan.json").read_text())["inputs"][0]["shape"][1:]), np.int8)
    np.savez(tmp_path / "d.npz", x=x, y=y)
    _refused(capsys, "export", fc_train, "--params", tmp_path / "p.bin", "-o", d, needle="is a directory")
    _refused(capsys, "pull", "--port", "socket://127.0.0.1:1", "-o", d, needle="is a directory")
    _refused(capsys, "pull", "--port", "socket://127.0.0.1:1", "-o", tmp_path / "t.tflite", "--params", d,
             needle="is a directory")
    _refused(capsys, "sim", fc_train, "--train", tmp_path / "d.npz", "--save-params", d, needle="is a directory")
    assert list(d.iterdir()) == [] and sorted(p.name for p in tmp_path.iterdir()) == ["d.npz", "dir"]


def test_zero_samples_and_non_finite_targets(fc_train, tmp_path, capsys):
    plan = json.loads((fc_train / "plan.json").read_text())
    ishape, oshape = plan["inputs"][0]["shape"][1:], plan["outputs"][0]["shape"][1:]
    np.save(tmp_path / "none.npy", np.zeros([0] + ishape, np.int8))
    _refused(capsys, "sim", fc_train, "--input", tmp_path / "none.npy", "-o", tmp_path / "r.npy", needle="no samples")
    _refused(capsys, "run", fc_train, "--input", tmp_path / "none.npy", "-o", tmp_path / "r.npy", needle="no samples")
    x = np.zeros([4] + ishape, np.int8)
    for bad in (np.nan, np.inf, -np.inf):
        y = np.zeros([4] + oshape, np.float32)
        y[2].flat[0] = bad
        np.savez(tmp_path / "d.npz", x=x, y=y)
        _refused(capsys, "sim", fc_train, "--train", tmp_path / "d.npz", "--save-params", tmp_path / "p.bin",
                 needle="NaN or infinite")
    assert not (tmp_path / "p.bin").exists() and not (tmp_path / "r.npy").exists()


def test_flash_refusal_starts_the_application_again(tmp_path, monkeypatch, capsys):
    """A device that is not the --target: nothing erased, the bootloader told to GO to the app that is
    still in flash (it used to stay in the bootloader)."""
    from contextlib import nullcontext

    import pockmcu.board.cli as board_cli
    calls = []

    class FakeBootloader:
        link = type("L", (), {"port": "fake"})()

        def get(self):
            return 0x31, [0x00, 0x01, 0x02, 0x11, 0x21, 0x31, 0x44]

        def get_id(self):
            return 0x449            # an STM32F746: not a qemu-m4

        def go(self, addr):
            calls.append(("go", addr))

        def erase(self, *a):
            calls.append(("erase",))

    monkeypatch.setattr(board_cli, "Link", lambda *a, **k: nullcontext(None))
    monkeypatch.setattr(board_cli.B, "enter", lambda link, log=print: FakeBootloader())
    image = tmp_path / "app.bin"
    image.write_bytes(b"\0" * 64)
    err = _refused(capsys, "flash", image, "--target", "qemu-m4", "--port", "fake", needle="started again")
    assert "stm32" in err.lower() or "f7" in err.lower()
    from pockmcu.board.bootloader import flash_map

    assert calls == [("go", flash_map(0x449).app_base)]


def test_sim_output_whose_first_axis_is_not_the_batch(tmp_path, capsys):
    """An op may move the unit batch axis (a RESHAPE to [2, 24]): sim returned a traceback; now every
    sample's output is the full declared shape (here the input's bytes reshaped)."""
    import struct

    from fuzz_models import tflite_sites

    data = bytearray((FIXTURES / "reshape_flatten.tflite").read_bytes())
    dims = [s for s in tflite_sites(bytes(data))[0] if s.what == "tensor 2 shape"]
    struct.pack_into("<i", data, dims[0].offset, 2)
    struct.pack_into("<i", data, dims[1].offset, 24)
    model = tmp_path / "m.tflite"
    model.write_bytes(bytes(data))
    x = np.random.default_rng(3).integers(-128, 128, (3, 4, 4, 3)).astype(np.int8)
    np.save(tmp_path / "x.npy", x)
    pockmcu("gen", model, "--ram", "64KB", "-o", tmp_path / "out")
    pockmcu("sim", tmp_path / "out", "--input", tmp_path / "x.npy", "-o", tmp_path / "y.npy")
    y = np.load(tmp_path / "y.npy")
    assert y.shape == (3, 2, 24)
    np.testing.assert_array_equal(y, x.reshape(3, 2, 24))
