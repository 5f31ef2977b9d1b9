"""A small seeded sample of `make fuzz` (tests/fuzz_models.py) on every run: mutated TFLite and ONNX
files through inspect and gen must each be refused with one line or compile; none may raise a
traceback, hang or crash."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


@pytest.mark.parametrize("seed", [11, pytest.param(12, marks=pytest.mark.slow)])
def test_mutated_models_are_refused_cleanly(seed, tmp_path):
    r = subprocess.run([sys.executable, str(HERE / "fuzz_models.py"), "--count", "150", "--seed", str(seed),
                        "--jobs", "2", "--timeout", "120", "--json", str(tmp_path / "counts.json")],
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    counts = json.loads((tmp_path / "counts.json").read_text())
    assert counts["mutants"] == 150
    gen = counts["counts"]["gen"]
    # the sample exercises both ways out: some mutants still compile, most are refused
    assert gen["ok"] > 0 and gen["refused"] > 0
