"""pockmcu bench --train: exact instructions per training step, split by phase and by op
(pockmcu/train_bench.py, firmware/semihost_train_profile_main.c)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from conftest import FIXTURES, SHARED

from pockmcu.train_bench import PHASES, bench_train, phase_of

KWS = SHARED / "mlperf_kws_dscnn.tflite"
KWS_SPARSE = {"bias": {"last": 4}, "weights": [{"layer": -1, "ratio": 1.0}, {"layer": -2, "ratio": 0.5}]}


def pockmcu(*args):
    return subprocess.run([sys.executable, "-m", "pockmcu.cli", *map(str, args)], capture_output=True, text=True,
                          timeout=900)


def test_phases():
    assert phase_of({"phase": "forward"}, "") == "forward"
    assert phase_of({"phase": "backward"}, "loss") == "loss"
    assert phase_of({"phase": "backward"}, "update") == "updates"
    assert phase_of({"phase": "backward"}, "") == "backward"


@pytest.mark.qemu
def test_train_bench_split_adds_up():
    """A small CNN, full update with momentum: the per-op counts of the profiled step add up to its
    total, which is within 0.5% of the unprofiled median (the hooks cost a few instructions each);
    every phase ran; backward MACs are the plan's; and the host simulation ends with QEMU's bytes."""
    spec = {"bias": "all", "weights": "all", "optimizer": {"kind": "momentum", "lr": 0.01, "momentum": 0.5}}
    r = bench_train(FIXTURES / "small_cnn.tflite", "qemu-m4", spec=json.dumps(spec), steps=3, check_host=True)
    assert r["host_equals_qemu"] is True
    assert len(r["step_instructions"]) == 3 and r["instructions_per_step"] == sorted(r["step_instructions"])[1]
    assert sum(o["instructions"] for o in r["ops"]) == r["profiled_total"] == sum(r["phases"].values())
    assert abs(r["profiled_total"] - r["instructions_per_step"]) <= 0.005 * r["instructions_per_step"]
    assert all(r["phases"][p] > 0 for p in PHASES)
    assert all(o["instructions"] > 0 for o in r["ops"] if o["kernel"])
    assert sum(o["macs"] for o in r["ops"] if o["phase"] != "forward") == r["macs"]["backward"] > 0
    assert {o["phase"] for o in r["ops"] if "wgrad_update" in o["kind"].lower()} == {"updates"}
    assert r["ram_bytes"] == r["arena_bytes"] + r["persistent_bytes"] > 0


@pytest.mark.qemu
def test_cli_bench_train_json():
    """`pockmcu bench MODEL --train --update SPEC --json` on KWS's sparse scheme: exact and repeatable,
    the JSON names instructions_per_step, and the backward pass stays under 4 M instructions on M4
    (5.82 M before the fast backward kernels)."""
    args = ("bench", KWS, "--train", "--update", json.dumps(KWS_SPARSE), "--target", "qemu-m4", "--json",
            "--steps", "1")
    a, b = pockmcu(*args), pockmcu(*args)
    assert a.returncode == 0, a.stderr
    ra, rb = json.loads(a.stdout), json.loads(b.stdout)
    assert ra["instructions_per_step"] == rb["instructions_per_step"] > 0
    assert [o["instructions"] for o in ra["ops"]] == [o["instructions"] for o in rb["ops"]]
    assert ra["phases"]["backward"] + ra["phases"]["updates"] < 4_000_000


def test_cli_train_flags_need_train():
    r = pockmcu("bench", KWS, "--loss", "mse")
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "--train" in r.stderr and "Traceback" not in r.stderr
