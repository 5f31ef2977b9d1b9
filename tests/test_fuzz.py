"""A small seeded sample of `make fuzz` (tests/fuzz_models.py) on every run: mutated TFLite and ONNX
files through inspect and gen must each be refused with one line or compile; none may raise a
traceback, hang or crash."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

HERE = Path(__file__).resolve().parent
FIXTURES = HERE / "fixtures" / "models"


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


@pytest.mark.slow
def test_mutants_through_sim_and_the_checked_build(tmp_path):
    """The same harness with the sim, san and train stages (cffi host build; `make host-check`: ASan,
    UBSan and the bounds assertions of POCKMCU_CHECKED, on one sample; a --train build's host-check,
    inference and a training step on each of 3 samples)."""
    r = subprocess.run([sys.executable, str(HERE / "fuzz_models.py"), "--count", "40", "--seed", "13",
                        "--stages", "inspect,gen,sim,san,train", "--jobs", "2", "--timeout", "300",
                        "--json", str(tmp_path / "counts.json")], capture_output=True, text=True, timeout=1800)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    counts = json.loads((tmp_path / "counts.json").read_text())["counts"]
    assert counts["san"]["ok"] > 0 and counts["train"]["ok"] > 0
    assert sum(counts["san"].values()) == counts["gen"]["ok"]
    assert sum(counts["train"].values()) == counts["san"]["ok"] + counts["san"]["same"]


def _checked_block(text: str) -> str:
    a, b = text.index("#ifdef POCKMCU_CHECKED"), text.index("#endif /* POCKMCU_CHECKED */")
    return text[:a] + text[b + len("#endif /* POCKMCU_CHECKED */\n"):]


@pytest.mark.parametrize("train", [False, True])
def test_host_check_build_checks_every_kernel_pointer(train, tmp_path):
    """`make host-check` runs clean on a generated project (inference, and a training build's inference and
    training step); a pointer range that leaves its array aborts with the step and the array named; without
    POCKMCU_CHECKED the preprocessed model.c is the one without the checked block."""
    from pockmcu.cli import main

    out = tmp_path / "out"
    model = FIXTURES / ("fc_none.tflite" if train else "small_cnn.tflite")
    extra = ["--train", "--loss", "mse", "--update", '{"bias": "all", "weights": [{"layer": -1, "ratio": 1}]}'] \
        if train else []
    assert main(["gen", str(model), "--ram", "1MB", "-o", str(out), *extra]) == 0
    text = (out / "model.c").read_text()
    assert text.count("pockmcu_check_in(step, ") >= 3
    if train:
        assert "pockmcu_checked_train_step" in text
    r = subprocess.run(["make", "-C", str(out), "host-check"], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    # the normal build: the same C after preprocessing as model.c without the checked block
    stripped = out / "stripped.c"
    stripped.write_text(_checked_block(text))
    pre = [subprocess.run(["gcc", "-E", "-P", "-I", str(out), "-I", str(out / "kernels"), "-I", str(out / "firmware"),
                           str(f)], capture_output=True, text=True, check=True).stdout
           for f in (out / "model.c", stripped)]
    assert pre[0] == pre[1]
    # one array one byte too long: the check fires
    m = re.search(r'pockmcu_check_in\(step, "[^"]*", (\w+), (\d+), (\w+),\s+sizeof (\w+)\);', text)
    assert m and m.group(1) == m.group(3) == m.group(4), "no check of a constant array"
    name, n = m.group(1), int(m.group(2))
    call = m.group(0)
    (out / "model.c").write_text(text.replace(call, call.replace(f"{name}, {n}, ", f"{name}, {n + 1}, ")))
    r = subprocess.run(["make", "-C", str(out), "host-check"], capture_output=True, text=True, timeout=600)
    assert r.returncode != 0 and f"{name}: {n + 1} bytes at offset 0 of a {n}-byte array" in r.stdout + r.stderr
    if train:
        # a check only the training step makes (the bias update's RAM copy): host-check runs the training
        # step too (the runner trains on each sample in the checked build of a --train model)
        body = text[text.index("static void pockmcu_checked_train_step"):]
        m = re.search(r'pockmcu_check_in\(step, "pockmcu_bias_update_bounded_s32: (\w+)", (\w+), (\d+), (\w+),\s+'
                      r'sizeof (\w+)\);', body)
        assert m and m.group(2) == m.group(4) == m.group(5) and m.group(1).endswith("_ram"), "no check of a bias update"
        name, n = m.group(1), int(m.group(3))
        call = m.group(0)
        (out / "model.c").write_text(text.replace(call, call.replace(f"{name}, {n}, ", f"{name}, {n + 1}, ")))
        r = subprocess.run(["make", "-C", str(out), "host-check"], capture_output=True, text=True, timeout=600)
        assert r.returncode != 0 and f"{name}: {n + 1} bytes at offset 0 of a {n}-byte array" in r.stdout + r.stderr


def test_float_literals_compile_for_any_value(tmp_path):
    """An lr of 1e39 once produced `INFINITYf`: every float32 value, finite or not, is a literal the C
    compiler reads back bit for bit (-Wall -Wextra -Werror)."""
    import numpy as np

    from pockmcu.ccode import float_lit

    vals = np.array([0.1, -0.0, 1e-45, 3.4e38, 1e39, -1e39, np.nan], np.float64)
    with np.errstate(over="ignore"):
        want = vals.astype(np.float32)
    items = ", ".join(float_lit(v) for v in vals)
    src = tmp_path / "f.c"
    src.write_text("#include <stdio.h>\n#include <string.h>\nint main(void)\n{\n"
                   f"    static const float a[] = {{{items}}};\n    fwrite(a, sizeof a, 1, stdout);\n    return 0;\n}}\n")
    subprocess.run(["gcc", "-std=c99", "-Wall", "-Wextra", "-Werror", str(src), "-o", str(tmp_path / "f")], check=True)
    got = np.frombuffer(subprocess.run([str(tmp_path / "f")], capture_output=True, check=True).stdout, np.float32)
    assert got.view(np.uint32)[:-1].tolist() == want.view(np.uint32)[:-1].tolist() and np.isnan(got[-1])


@pytest.mark.parametrize("out_scale", [0.5, 1e4])
def test_ort_conv_with_tiny_requantization_scale_runs_clean_on_dsp_kernels(out_scale, tmp_path):
    """Fuzz seed 2, san stage: an onnxruntime-numerics conv whose requantization scale is below 2^-12 has
    a float exponent of -35 or less; the DSP conv kernel (the default qemu-m4 target) shifted 1 by
    right - 2 = 33 bits computing a TFLM-only constant (UBSan: shift exponent too large)."""
    import onnx
    from onnx import numpy_helper

    from pockmcu.build import kernel_archive
    from pockmcu.cli import main

    m = onnx.load(HERE / "fixtures" / "onnx" / "conv_dilated_qop_u8_pc.onnx")
    t = next(t for t in m.graph.initializer if t.name == "conv1_scale")
    t.CopyFrom(numpy_helper.from_array(np.array(out_scale, np.float32), t.name))
    model = tmp_path / "tiny_scale.onnx"
    onnx.save(m, model)
    out = tmp_path / "out"
    assert main(["gen", str(model), "--ram", "1MB", "-o", str(out)]) == 0
    assert "_ort_s8_dsp(" in (out / "model.c").read_text()
    lib = kernel_archive(out, "host-san")          # the sanitized kernels, compiled once per content
    r = subprocess.run(["make", "-C", str(out), "host-check", *([f"SAN_KERNEL_LIB={lib}"] if lib else [])],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]


_FAULTS = '''
import os, signal, sys, time
from pathlib import Path
sys.path.insert(0, sys.argv.pop(1))
import fuzz_models as fm
real = fm.run_stage
def faulty(stage, model, work, timeout, report=None):
    k = int(Path(model).name.split("_")[0][1:])
    if (stage, k) == ("gen", 3):
        time.sleep(1000)                         # hangs
    if (stage, k) == ("gen", 5):
        os.kill(os.getpid(), signal.SIGSEGV)     # dies
    if (stage, k) == ("inspect", 7):
        raise SystemExit(0)                      # leaves without answering
    return real(stage, model, work, timeout, report)
fm.run_stage = faulty
sys.exit(fm.main())
'''


def test_harness_reports_hangs_and_crashes_of_a_stage(tmp_path):
    """The fork-per-mutant scheduler times every stage and notices a child that dies: a stage that never
    answers is a hang (killed after --timeout), one whose process dies is a crash naming the signal; the
    other mutants are unaffected and nothing is left running."""
    script = tmp_path / "faulty.py"
    script.write_text(_FAULTS)
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, str(script), str(HERE), "--count", "10", "--seed", "3", "--jobs", "2",
                        "--timeout", "8", "--json", str(tmp_path / "counts.json")],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 1, r.stdout + r.stderr
    assert time.monotonic() - t0 < 120
    res = json.loads((tmp_path / "counts.json").read_text())
    assert res["mutants"] == 10 and res["finished"]
    gen, inspect = res["counts"]["gen"], res["counts"]["inspect"]
    assert gen["hang"] == 1 and gen["crash"] == 1 and inspect["crash"] == 1
    assert sum(inspect.values()) == 10 and sum(gen.values()) == 9       # mutant 7 died in inspect
    fails = "\n".join(res["failures"])
    assert "gen hang: m3_" in fails and "gen crash: m5_" in fails and "signal 11" in fails
    assert "inspect crash: m7_" in fails
    assert subprocess.run(["pgrep", "-f", str(script)], capture_output=True).returncode == 1


def test_constant_of_another_dtype_as_data_input_is_refused(tmp_path, capsys):
    """Fuzz seed 15, sim stage: FULLY_CONNECTED's input index moved from the model input (0) onto an int32
    bias (1) was accepted and the C passed that int32 array as int8 data (-Werror: incompatible pointer
    type). A constant read as data is held to the op's dtypes like an activation: one line, exit 2."""
    import struct

    sys.path.insert(0, str(HERE))
    import fuzz_models

    from pockmcu.cli import main

    data = (HERE.parent.parent / "shared" / "models" / "tflm_hello_world.tflite").read_bytes()
    sites, _, _ = fuzz_models.tflite_sites(data)
    site = next(s for s in sites if s.what == "op 0 inputs" and struct.unpack_from(s.fmt, data, s.offset)[0] == 0)
    b = bytearray(data)
    struct.pack_into(site.fmt, b, site.offset, 1)
    model = tmp_path / "fc_reads_bias.tflite"
    model.write_bytes(bytes(b))
    assert main(["gen", str(model), "--ram", "1MB", "-o", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "FULLY_CONNECTED" in err and "reads the int32 constant" in err, err
    assert not (tmp_path / "out").exists()


def test_foldable_op_of_an_unknown_dtype_is_refused_not_folded(tmp_path, capsys):
    """Fuzz seed 15, inspect stage: ZEROS_LIKE's output retyped int4 was folded into an int4 constant once
    ml_dtypes (which onnx imports) had taught numpy the dtype, and inspect raised KeyError sizing it;
    without ml_dtypes the same file was called corrupt. Now the op stays and is refused for its dtype, one
    line, exit 2, either way."""
    import struct

    import ml_dtypes  # noqa: F401 - the state of a process that has read an ONNX model

    sys.path.insert(0, str(HERE))
    import fuzz_models

    from pockmcu.cli import main

    data = (FIXTURES / "datamove_mix.tflite").read_bytes()
    sites, _, _ = fuzz_models.tflite_sites(data)
    site = next(s for s in sites if s.what == "tensor 16 type")
    b = bytearray(data)
    struct.pack_into(site.fmt, b, site.offset, 17)                # TensorType INT4
    model = tmp_path / "int4_zeros_like.tflite"
    model.write_bytes(bytes(b))
    for argv in (["inspect", str(model)], ["gen", str(model), "--ram", "1MB", "-o", str(tmp_path / "out")]):
        assert main(argv) == 2
        err = capsys.readouterr().err.strip()
        assert err.count("\n") == 0 and "Traceback" not in err, err
    assert not (tmp_path / "out").exists()


def test_zero_point_outside_its_dtype_is_refused_whichever_frontend(tmp_path, capsys):
    """Fuzz seed 15, train stage: an ONNX uint8 input dequantized with an int32 zero point of -128 became an
    int8 tensor with zero point -256 (inputs minus it reach 383, beyond the 256 the accumulator bounds
    assume); once training pushed a bias to its bound the conv accumulator overflowed (UBSan). Every
    int8 / uint8 tensor's zero points are checked against its dtype's range: one line, exit 2."""
    import onnx
    from onnx import numpy_helper

    from pockmcu.cli import main

    m = onnx.load(HERE / "fixtures" / "onnx" / "conv_3x3_relu_qdq_u8io.onnx")
    t = next(t for t in m.graph.initializer if t.name == "input_zero_point")
    t.CopyFrom(numpy_helper.from_array(np.array(-128, np.int32), t.name))
    model = tmp_path / "u8_input_zp_minus128.onnx"
    onnx.save(m, model)
    assert main(["gen", str(model), "--ram", "1MB", "-o", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "zero point -128, outside [0, 255]" in err, err


def test_transpose_conv_stride_outside_the_window_limit_is_refused(tmp_path, capsys):
    """Fuzz seed 15, train stage: TRANSPOSE_CONV's stride_h set to 2^31-1 on a one-row input still gave the
    declared output shape (its own check asked only stride >= 1); inference compiled and the weight
    gradient kernel overflowed int32 (UBSan). Strides and dilations of every op are held to 1..255."""
    import struct

    sys.path.insert(0, str(HERE))
    import fuzz_models

    from pockmcu.cli import main

    data = (FIXTURES / "tconv_2x2_s2_valid_pertensor_nobias.tflite").read_bytes()
    sites, _, _ = fuzz_models.tflite_sites(data)
    site = next(s for s in sites if s.what == "op 0 option 2" and s.fmt == "<i")
    assert struct.unpack_from(site.fmt, data, site.offset)[0] == 2          # stride_h
    b = bytearray(data)
    struct.pack_into(site.fmt, b, site.offset, (1 << 31) - 1)
    model = tmp_path / "tconv_huge_stride.tflite"
    model.write_bytes(bytes(b))
    for train in ([], ["--train", "--loss", "mse", "--update", '{"bias": "all", "weights": "all"}']):
        assert main(["gen", str(model), "--ram", "1MB", "-o", str(tmp_path / "out"), *train]) == 2
        err = capsys.readouterr().err.strip()
        assert err.count("\n") == 0 and "stride [2147483647, 2] (each must be 1..255)" in err, err
