"""What the generated C looks like to a reviewer: typed arena pointers, status codes from model.h,
scratch contexts only where a kernel has scratch, the forward pass emitted once for inference and
training, parameter comments that name the layer, and reports and plan.json that use the C names
and count the backward MACs."""

from __future__ import annotations

import json
import re

import pytest
from conftest import SHARED

from pockmcu.codegen import CodeGen, write_project
from pockmcu.compiler import TrainOptions, compile_model

KWS = SHARED / "mlperf_kws_dscnn.tflite"
SPEC = json.dumps({"bias": {"last": 4}, "weights": [{"layer": -1}, {"layer": -2, "ratio": 0.5}]})


@pytest.fixture(scope="module")
def kws_train(tmp_path_factory):
    c = compile_model(KWS, ram=1 << 30, train=TrainOptions(spec=SPEC))
    return c, write_project(c, tmp_path_factory.mktemp("gen") / "kws_train")


def test_arena_tensors_are_typed_pointers(kws_train):
    _, out = kws_train
    src = (out / "model.c").read_text()
    assert not re.search(r"^#define [a-z]\w* \(\(", src, re.M), "arena tensors as lowercase macros"
    pointers = re.findall(r"^static (int8_t|uint8_t|float) \*const (\w+) = \(\1 \*\)\(pockmcu_arena \+ \d+\);", src, re.M)
    names = {n for _, n in pointers}
    assert {"input", "output", "conv0_out", "conv4_saved_input"} <= names
    body = src[src.index("static int forward"):]
    for name in names:       # each declared pointer is used (no unused-variable warnings)
        assert re.search(rf"\b{name}\b", body), name


def test_status_codes_come_from_model_h(kws_train):
    _, out = kws_train
    header, src = (out / "model.h").read_text(), (out / "model.c").read_text()
    assert "enum pockmcu_status" in header and "POCKMCU_ERR_OP = 1" in header
    assert "POCKMCU_ERR_TRAIN_SCRATCH = 1000" in header and "POCKMCU_ERR_LABEL = -1" in header
    assert not re.search(r"return -?\d+;", src), "a bare number returned instead of a status code"


def test_no_scratch_set_up_before_calls(kws_train):
    c, out = kws_train
    src = (out / "model.c").read_text()
    assert "ctx.buf" not in src and "cmsis_nn_context ctx" not in src
    # an op with planned scratch gets a constant context at its buffer; the rest share the empty one
    for op_name, buf in c.plan.scratch.items():
        b = c.plan.buffer(buf)
        assert f"{op_name}_ctx = {{.buf = pockmcu_arena + {b.offset}, .size = {b.size}}};" in src
        assert f"(&{op_name}_ctx," in src
    assert "&pockmcu_no_scratch" in src


def test_forward_pass_emitted_once(kws_train):
    """Each forward call appears once in model.c: pockmcu_invoke and pockmcu_train_step share it."""
    c, out = kws_train
    src = (out / "model.c").read_text()
    calls = [layer["call"] for layer in CodeGen(c).layers(c.graph.ops) if layer["call"]]
    assert len(calls) == 12          # 13 ops, one a RESHAPE (no code)
    for call in calls:
        assert src.count(call.splitlines()[0]) == 1, call
    assert src.count("forward(0)") == 1 and src.count("forward(1)") == 1


def test_parameter_comments_name_the_layer(kws_train):
    _, out = kws_train
    src, weights = (out / "model.c").read_text(), (out / "weights.c").read_text()
    assert re.search(r"static int32_t conv3_bias_ram\[64\]; /\* the bias of conv3,", src)
    assert re.search(r"static int8_t conv4_weights_ram\[\d+\]; /\* the weights of conv4: input channels 0\.\.31", src)
    assert "/* the bias of conv0 ('" in weights and "/* the weights of conv0 ('" in weights


def test_reports_and_plan_use_c_names_and_count_backward_macs(kws_train):
    c, out = kws_train
    plan = json.loads((out / "plan.json").read_text())
    report = (out / "report.txt").read_text()
    by_c = {t["c"] for t in plan["tensors"]}
    assert {"input", "output"} <= by_c and "Identity" not in by_c
    assert re.search(r"\boutput\b", report) and "Identity" not in report.split("Schedule")[0]
    tr, steps = plan["training"], plan["steps"]
    backward = [s for s in steps if s["phase"] == "backward"]
    assert tr["backward_macs"] == sum(s["macs"] for s in backward) > 0
    assert tr["forward_macs"] == plan["macs"] == 2656768
    macs = {s["name"]: s["macs"] for s in steps}
    assert macs["conv4_grad_input"] == macs["conv4"] == 512000       # dx = dz (*) w^T: one MAC per forward MAC
    assert macs["conv4_wgrad_update"] == 25 * 5 * 64 * 32             # positions x out x trained in channels
    assert macs["fc0_grad_input"] == macs["fc0_wgrad_update"] == 64 * 12
