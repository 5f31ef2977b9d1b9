"""Memory plan quality and validity on every model: no overlaps, arena close to the lower bound."""

from __future__ import annotations

import json

import pytest
from conftest import all_models, model_id

from pockmcu.compiler import load_and_check
from pockmcu.plan import check_plan, plan_memory


@pytest.mark.parametrize("model", all_models(), ids=model_id)
def test_plan_is_valid_and_tight(model):
    g = load_and_check(model)
    p = plan_memory(g)
    check_plan(p)
    assert p.arena_bytes <= 1.05 * p.lower_bound_bytes, (p.arena_bytes, p.lower_bound_bytes)
    assert p.arena_bytes <= p.greedy_bytes


def test_plan_json_fields(generated):
    from conftest import shared_models

    gen = generated(shared_models()[0])
    plan = json.loads((gen.out / "plan.json").read_text())
    for key in ("arena_bytes", "lower_bound_bytes", "persistent_ram_bytes", "flash_bytes", "ram_budget_bytes"):
        assert isinstance(plan[key], int), key
    assert plan["tensors"] and all({"name", "offset", "size", "first", "last"} <= set(t) for t in plan["tensors"])
    assert max(t["offset"] + t["size"] for t in plan["tensors"]) == plan["arena_bytes"]


def test_oversized_budget_fails_at_link_time(generated, tmp_path):
    """The linker script's RAM region is the budget: a build that does not fit cannot link."""
    import subprocess

    from conftest import SHARED

    gen = generated(SHARED / "mlperf_kws_dscnn.tflite")  # a 16000-byte arena cannot link into 8 KB
    r = subprocess.run(["make", "-s", "TARGET=qemu-m4", "RAM_BYTES=8192"], cwd=gen.out, capture_output=True,
                       text=True)
    assert r.returncode != 0
    assert "region `RAM' overflowed" in r.stdout + r.stderr
