"""Bad input, as a new user would give it: one line on stderr, exit status 2,
no traceback, and no OUT left behind."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import FIXTURES, SHARED

KWS = SHARED / "mlperf_kws_dscnn.tflite"


def pockmcu(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "pockmcu.cli", *map(str, args)], capture_output=True,
                          text=True, cwd=cwd, timeout=300)


def assert_clean_error(r, *needles):
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert "Traceback" not in r.stderr
    for n in needles:
        assert n.lower() in r.stderr.lower(), (n, r.stderr)


def bad_models(tmp: Path) -> dict[str, tuple[Path, str]]:
    (tmp / "empty.tflite").write_bytes(b"")
    (tmp / "truncated.tflite").write_bytes(KWS.read_bytes()[: KWS.stat().st_size // 3])
    (tmp / "random.tflite").write_bytes(np.random.default_rng(0).integers(0, 256, 5000, dtype=np.uint8).tobytes())
    (tmp / "notes.txt").write_text("hello")
    return {
        "missing": (tmp / "nope.tflite", "no such file"),
        "empty": (tmp / "empty.tflite", "too short"),
        "truncated": (tmp / "truncated.tflite", "truncated"),
        "random": (tmp / "random.tflite", "not a tflite model"),
        "text": (tmp / "notes.txt", "unknown model format"),
        "float32": (FIXTURES / "bad_float32.tflite", "float32 model"),
        "int16": (FIXTURES / "bad_int16.tflite", "int16"),
        "unsupported_op": (FIXTURES / "bad_unsupported_op.tflite", "ELU"),
        "lstm": (SHARED / "tflm_mnist_lstm.tflite", "UNIDIRECTIONAL_SEQUENCE_LSTM"),
        "lstm_dtln": (SHARED / "tflm_dtln_noise_suppression.tflite", "UNIDIRECTIONAL_SEQUENCE_LSTM"),
    }


@pytest.mark.parametrize("case", ["missing", "empty", "truncated", "random", "text", "float32", "int16",
                                  "unsupported_op", "lstm", "lstm_dtln"])
def test_gen_refuses_bad_model(case, tmp_path):
    model, needle = bad_models(tmp_path)[case]
    out = tmp_path / "out"
    r = pockmcu("gen", model, "--ram", "256KB", "-o", out)
    assert_clean_error(r, needle)
    assert not out.exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".out")], "temporary output left behind"


def test_lstm_message_names_every_unsupported_op(tmp_path):
    r = pockmcu("gen", SHARED / "tflm_dtln_noise_suppression.tflite", "--ram", "256KB", "-o", tmp_path / "o")
    assert_clean_error(r)
    assert r.stderr.count("UNIDIRECTIONAL_SEQUENCE_LSTM") >= 2 and "#0" in r.stderr and "#1" in r.stderr


@pytest.mark.parametrize("ram,needle", [("1KB", "raise --ram to at least"), ("lots", "not a size"),
                                        ("=-5KB", "not a size"), ("0", "positive")])
def test_gen_refuses_bad_budget(ram, needle, tmp_path):
    out = tmp_path / "out"
    args = ["--ram" + ram] if ram.startswith("=") else ["--ram", ram]
    r = pockmcu("gen", KWS, *args, "-o", out)
    assert_clean_error(r, needle)
    assert not out.exists()


def test_budget_error_names_bytes_needed(tmp_path):
    """Too small even streamed as far as it goes: the error names the least RAM that works."""
    from pockmcu.compiler import compile_model

    r = pockmcu("gen", KWS, "--ram", "1KB", "-o", tmp_path / "o")
    assert_clean_error(r)
    least = compile_model(KWS, ram=1 << 30, stream="max")
    assert least.plan.arena_bytes < 16000                  # the KWS arena unstreamed
    assert f"needs {least.ram_needed} bytes" in r.stderr and f"arena {least.plan.arena_bytes} " in r.stderr


def test_failed_gen_keeps_previous_output(tmp_path):
    out = tmp_path / "out"
    assert pockmcu("gen", KWS, "--ram", "256KB", "-o", out).returncode == 0
    before = (out / "model.c").read_text()
    r = pockmcu("gen", FIXTURES / "bad_float32.tflite", "--ram", "256KB", "-o", out)
    assert_clean_error(r)
    assert (out / "model.c").read_text() == before


def test_gen_refuses_to_overwrite_foreign_directory(tmp_path):
    (tmp_path / "mine.txt").write_text("precious")
    r = pockmcu("gen", KWS, "--ram", "256KB", "-o", tmp_path)
    assert_clean_error(r, "not a pockmcu output directory")
    assert (tmp_path / "mine.txt").read_text() == "precious"


def test_bad_arguments_are_one_line(tmp_path):
    assert_clean_error(pockmcu("gen", KWS, "-o", tmp_path / "o"), "--ram")
    assert_clean_error(pockmcu("frobnicate"), "invalid choice")
    assert_clean_error(pockmcu("gen", KWS, "--ram", "256KB", "--target", "cortex-z9", "-o", tmp_path / "o"),
                       "cortex-z9")


def test_sim_bad_input_files(tmp_path):
    out = tmp_path / "out"
    assert pockmcu("gen", KWS, "--ram", "256KB", "-o", out).returncode == 0
    res = tmp_path / "res.npy"
    assert_clean_error(pockmcu("sim", out, "--input", tmp_path / "none.npy", "-o", res), "no such file")
    (tmp_path / "junk.npy").write_text("junk")
    assert_clean_error(pockmcu("sim", out, "--input", tmp_path / "junk.npy", "-o", res), "not a .npy")
    np.save(tmp_path / "f.npy", np.zeros((2, 49, 10, 1), np.float32))
    assert_clean_error(pockmcu("sim", out, "--input", tmp_path / "f.npy", "-o", res), "dtype")
    np.save(tmp_path / "s.npy", np.zeros((2, 10, 49, 1), np.int8))
    assert_clean_error(pockmcu("sim", out, "--input", tmp_path / "s.npy", "-o", res), "shape")
    assert_clean_error(pockmcu("sim", tmp_path / "nowhere", "--input", tmp_path / "s.npy", "-o", res), "plan.json")
    assert not res.exists()
