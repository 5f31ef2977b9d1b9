"""The flash cost rule of --kernels compact (pockmcu/kernel_choice.py): optimized kernels only where they pay
for their flash, at most +10% over the portable build on every shared model, measured with
arm-none-eabi-size; the rule's facts (pockmcu/kernel_sizes.json) match the kernels as they compile today;
the Makefile's -Os for fallback-only kernels changes no instruction count."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
from conftest import SHARED, UNSUPPORTED_SHARED

from pockmcu.bench import random_input
from pockmcu.build import build_target, elf_size
from pockmcu.codegen import write_project
from pockmcu.compiler import compile_model, load_and_check, with_kernels
from pockmcu.kernel_choice import (
    ALLOWANCE,
    apply_cost_rule,
    fallback_only,
    instructions_per_mac,
    linked_bytes,
    load_table,
    weighed_kinds,
)
from pockmcu.kernel_sizes import CORES, HOT, compile_kernel, object_size
from pockmcu.kernel_table import TABLE
from pockmcu.qemu import run_samples
from pockmcu.sim import read_plan
from pockmcu.targets import get_target

KWS = SHARED / "mlperf_kws_dscnn.tflite"
HELLO = SHARED / "tflm_hello_world.tflite"


def shared_all() -> list:
    """Every model of ../shared/models pockmcu compiles, .tflite and .onnx."""
    return sorted(p for p in SHARED.iterdir() if p.suffix in (".tflite", ".onnx") and p.name not in UNSUPPORTED_SHARED)


def _compile(model, target, kernels):
    return compile_model(model, ram=min(4 << 20, get_target(target).ram_bytes), target=target, kernels=kernels)


def _flash(model, target, kernels, out) -> tuple[int, dict]:
    c = _compile(model, target, kernels)
    write_project(c, out)
    return elf_size(build_target(out, target))["flash"], json.loads((out / "plan.json").read_text())


# -- the rule on its own (no compiler run) ------------------------------------------------------------------
def _table(hot: dict, ipm: dict, calls: dict | None = None) -> dict:
    calls = calls or {}
    return dict(sizes={"cortex-m4": {f: dict(hot=b, cold=b // 2, calls=calls.get(f, [])) for f, b in hot.items()}},
                instructions_per_mac={"cortex-m4": ipm})


KWS_PORTABLE = {"arm_convolve_wrapper_s8": 1000, "arm_depthwise_conv_wrapper_s8": 900, "arm_fully_connected_s8": 300,
                "arm_avgpool_s8": 600}
KWS_IPM = {"arm_avgpool_s8": 2.0, "arm_convolve_wrapper_s8": 5.0, "arm_depthwise_conv_wrapper_s8": 7.0,
           "arm_fully_connected_s8": 4.0,
           "pockmcu_convolve_1x1_s8_dsp": 1.5, "pockmcu_convolve_s8_dsp": 1.6, "pockmcu_depthwise_conv_dsp_s8": 3.0,
           "pockmcu_depthwise_conv_3x3_dsp_s8": 2.5, "pockmcu_fully_connected_s8_dsp": 1.6}


def test_rule_keeps_what_fits_by_saving_per_byte():
    """KWS's counted portable flash is its 24,376 B of weights + the portable kernels of its weighed layers (conv,
    depthwise, FC, average pool: 2,800 B here): 2,717 B allowed. Pointwise conv (4 x 512,000 MACs x 3.5 instructions
    saved for 2,000 B) is the best buy; then the first conv adds only 100 B (600 B of code, and the portable conv,
    now only its fallback, drops from 1,000 B at -O2 to 500 B at -Os); depthwise (+3,100 B) and FC (+3,700 B) no
    longer fit, and their layers say so."""
    sizes = dict(KWS_PORTABLE, pockmcu_convolve_1x1_s8_dsp=2000, pockmcu_convolve_s8_dsp=600,
                 pockmcu_depthwise_conv_3x3_dsp_s8=4000, pockmcu_depthwise_conv_dsp_s8=2500,
                 pockmcu_fully_connected_s8_dsp=4000)
    g = with_kernels(load_and_check(KWS), "qemu-m4", "auto")
    calls = {"pockmcu_convolve_1x1_s8_dsp": ["arm_convolve_wrapper_s8"],
             "pockmcu_convolve_s8_dsp": ["arm_convolve_wrapper_s8"]}
    r = apply_cost_rule(g, "qemu-m4", _table(sizes, KWS_IPM, calls))
    rule = r.kernel_choice
    assert rule["counted_portable_bytes"] == 24376 + 1000 + 900 + 300 + 600
    assert rule["allowance_bytes"] == int(ALLOWANCE * rule["counted_portable_bytes"])
    assert [k["function"] for k in rule["kept"]] == ["pockmcu_convolve_1x1_s8_dsp", "pockmcu_convolve_s8_dsp"]
    assert [k["bytes"] for k in rule["kept"]] == [2000, 100] and rule["added_bytes"] == 2100
    assert rule["kept"][0]["instructions_saved"] == 4 * 512000 * 3.5
    assert rule["kept"][1]["instructions_saved"] == round(320000 * 3.4)
    fell = {f["layer"]: f for f in rule["fallbacks"]}
    assert sorted(fell) == ["dwconv0", "dwconv1", "dwconv2", "dwconv3", "fc0"]
    assert fell["fc0"]["kernel"] == "arm_fully_connected_s8"
    assert fell["fc0"]["instead_of"] == "pockmcu_fully_connected_s8_dsp"
    assert "flash allowance" in fell["fc0"]["reason"] and "flash allowance" in fell["dwconv0"]["reason"]
    assert g.kernels_off == frozenset() and not g.kernel_choice      # a pure pass: g is unchanged
    # more room: everything fits and nothing falls back
    big = apply_cost_rule(g, "qemu-m4", _table({f: b // 100 for f, b in sizes.items()}, KWS_IPM, calls))
    assert big.kernel_choice["fallbacks"] == [] and big.kernels_off.isdisjoint(
        {"pockmcu_convolve_1x1_s8_dsp", "pockmcu_fully_connected_s8_dsp", "pockmcu_depthwise_conv_3x3_dsp_s8"})


def test_rule_leaves_out_unmeasured_kernels():
    g = with_kernels(load_and_check(HELLO), "qemu-m4", "auto")
    r = apply_cost_rule(g, "qemu-m4", _table({"arm_fully_connected_s8": 348}, {"arm_fully_connected_s8": 4.0}))
    assert "pockmcu_fully_connected_s8_dsp" in r.kernels_off
    assert all("kernel_sizes" in f["reason"] for f in r.kernel_choice["fallbacks"])


def test_linked_bytes_counts_fallbacks_cold_and_buffer_queries():
    sizes = {"a_dsp": dict(hot=100, cold=80, calls=["arm_fully_connected_s8"]),
             "a_dsp_get_buffer_size": dict(hot=8, cold=6, calls=[]),
             "arm_fully_connected_s8": dict(hot=50, cold=30, calls=[])}
    assert "arm_fully_connected_s8" in fallback_only({"a_dsp"})
    assert linked_bytes({"a_dsp"}, sizes) == 100 + 8 + 30
    assert linked_bytes({"a_dsp", "arm_fully_connected_s8"}, sizes) == 100 + 8 + 50
    assert linked_bytes({"unknown"}, sizes) is None


def test_plan_and_gen_show_the_rule(tmp_path):
    """tflm_hello_world on M4: the DSP FC kernel (about 4 KB) cannot fit 10% of a 3.7 KB firmware: its
    layers stay portable and plan.json / gen say why; --kernels auto takes it anyway."""
    c = _compile(HELLO, "qemu-m4", "compact")
    plan = json.loads((write_project(c, tmp_path / "a") / "plan.json").read_text())
    rule = plan["kernels"]["rule"]
    assert plan["kernels"]["features"] == ["dsp", "fpu"]
    assert {f["layer"] for f in rule["fallbacks"]} == {s["name"] for s in plan["steps"] if s["kind"] == "FULLY_CONNECTED"}
    assert all(s["kernel"] == "arm_fully_connected_s8" for s in plan["steps"] if s["kind"] == "FULLY_CONNECTED")
    assert all("flash allowance" in f["reason"] for f in rule["fallbacks"])
    r = subprocess.run([sys.executable, "-m", "pockmcu.cli", "gen", str(HELLO), "--ram", "64KB", "--kernels", "compact",
                        "-o", str(tmp_path / "cli")], capture_output=True, text=True, check=True)
    assert "kernels: pockmcu for qemu-m4 (dsp, fpu); flash rule: +0 of " in r.stdout
    assert f"optimized kernels kept: none; {len(rule['fallbacks'])} layer(s) on a slower row" in r.stdout
    fast = json.loads((write_project(_compile(HELLO, "qemu-m4", "auto"), tmp_path / "f") / "plan.json").read_text())
    assert "rule" not in fast["kernels"]
    assert {s["kernel"] for s in fast["steps"] if s["kind"] == "FULLY_CONNECTED"} == {"pockmcu_fully_connected_s8_dsp"}


# -- the measured facts match the kernels as they are -------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("core", sorted(CORES))
def test_size_table_matches_the_kernels(core, tmp_path):
    """Every size and call list in kernel_sizes.json is what the kernel compiles to today (-O2 and -Os);
    when a kernel changes, run `python -m pockmcu.kernel_sizes --sizes` (or without --sizes to measure
    instructions per MAC too)."""
    table = load_table()["sizes"][core]
    stale = []
    for f, row in table.items():
        hot, calls = compile_kernel(f, core, HOT, tmp_path)
        cold, _ = compile_kernel(f, core, "-Os", tmp_path)
        if (hot, cold, calls) != (row["hot"], row["cold"], row["calls"]):
            stale.append(f"{f}: measured hot {hot} cold {cold} calls {calls}, table says {row}")
    assert not stale, "kernel_sizes.json is stale (python -m pockmcu.kernel_sizes):\n" + "\n".join(stale)
    speeds = load_table()["instructions_per_mac"][core]
    need = {"mve", "dsp"} if core == "cortex-m55" else {"dsp"}      # every optimized row the core can run
    # (split-stored convolutions exist only in training graphs, which the rule never weighs)
    opt = {r.function for k in weighed_kinds() for r in TABLE[k] if need & r.features and r.variant != "split"}
    assert opt
    # and the general-case portable row of every weighed kind (the rule's starting point on any model)
    opt |= {r.function for k in weighed_kinds() for r in TABLE[k]
            if not r.features and r.variant in ("", "per_tensor", "per_channel")}
    assert all(instructions_per_mac(speeds, f) for f in opt), sorted(f for f in opt if not instructions_per_mac(speeds, f))


def test_object_size_counts_code_and_constants(tmp_path):
    src = tmp_path / "x.c"
    src.write_text("const int t[100] = {1};\nint f(int a) { return t[a]; }\nint z[50];\n")
    obj = tmp_path / "x.o"
    subprocess.run(["arm-none-eabi-gcc", "-mthumb", "-mcpu=cortex-m4", "-O2", "-ffunction-sections",
                    "-fdata-sections", "-c", str(src), "-o", str(obj)], check=True)
    n = object_size(obj)
    assert 400 < n < 440                           # 400 B of table + a few instructions, no .bss


# -- the firmware: at most +10% flash, and the -Os fallbacks never run --------------------------------------
#: Cortex-M55's rows are checked on the models that exercise each of them (Helium conv, depthwise with channel
#: multiplier 1 and 8, FC, average pool, ADD; an onnxruntime model on DSP rows) to keep the suite's time; M7/M33
#: run M4's DSP rows; `python -m pockmcu.bench --flash` covers every model on every core
M55_MODELS = ("mlperf_kws_dscnn.tflite", "tflm_micro_speech.tflite", "mlperf_ic_resnet8.tflite",
              "mlperf_sww_ref.tflite", "mlperf_kws_dscnn_qdq.onnx")


@pytest.mark.slow
@pytest.mark.parametrize("model, target", [(m, "qemu-m4") for m in shared_all()]
                         + [(m, "qemu-m55") for m in shared_all() if m.name in M55_MODELS],
                         ids=lambda v: getattr(v, "name", v))
def test_compact_flash_within_10_percent_of_portable(model, target, tmp_path):
    auto, plan = _flash(model, target, "compact", tmp_path / "compact")
    portable, _ = _flash(model, target, "portable", tmp_path / "portable")
    assert auto <= (1 + ALLOWANCE) * portable, (auto, portable, plan["kernels"]["rule"])
    rule = plan["kernels"]["rule"]
    # every weighed layer not on its fastest row is listed with a reason, and the rule had every size and speed
    # it needed (a kernel missing from kernel_sizes.json leaves the whole model portable)
    assert all(f["reason"] for f in rule["fallbacks"])
    assert not [f for f in rule["fallbacks"] if "kernel_sizes" in f["reason"]], rule["fallbacks"]
    assert rule["added_bytes"] <= rule["allowance_bytes"]


@pytest.mark.slow
@pytest.mark.qemu
@pytest.mark.parametrize("target", ["qemu-m4", "qemu-m33"])
def test_fallback_kernels_at_os_change_no_instruction_count(target, tmp_path):
    """KWS with every DSP kernel (--kernels auto): the portable kernels only linked as fallbacks
    are compiled -Os (KERNELS_COLD); the same project with KERNELS_COLD emptied (all -O2) runs every op in
    exactly as many instructions and gives the same bytes, and is larger."""
    out = write_project(_compile(KWS, target, "auto"), tmp_path / "o")
    plan = read_plan(out)
    assert "KERNELS_COLD  := " in (out / "Makefile").read_text()
    xs = [random_input(s, seed=k) for k, s in enumerate(plan["inputs"])]
    data = b"".join(np.ascontiguousarray(x[0]).tobytes() for x in xs)
    n_in, n_out = sum(s["bytes"] for s in plan["inputs"]), sum(s["bytes"] for s in plan["outputs"])
    runs = []
    for cold in (None, ""):
        if cold is not None:
            text = (out / "Makefile").read_text()
            (out / "Makefile").write_text("\n".join("KERNELS_COLD  :=" if ln.startswith("KERNELS_COLD") else ln
                                                    for ln in text.splitlines()) + "\n")
        elf = build_target(out, target, profile=True)
        raw, prof = run_samples(elf, target, data, n_in, n_out, profile=True)
        runs.append((raw, prof[0], elf_size(build_target(out, target))["flash"]))
    (raw_os, prof_os, flash_os), (raw_o2, prof_o2, flash_o2) = runs
    assert raw_os == raw_o2 and list(prof_os) == list(prof_o2)
    assert flash_os < flash_o2
