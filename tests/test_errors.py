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
    assert least.plan.arena_bytes < compile_model(KWS, ram=1 << 30, stream="off").plan.arena_bytes
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


# -- issue 15: damaged models whose declared shapes or options contradict their ops ------------------
# Each case edits one field of a fixture in place (the fuzzer's field map, tests/fuzz_models.py) and
# expects one line naming the op and the problem; before shape inference these compiled and then
# corrupted memory, or raised a traceback.

def _cli(capsys, *args) -> tuple[int, str, str]:
    """pockmcu in this process (fast); (exit status, stderr, stdout)."""
    from pockmcu.cli import main

    try:
        rc = main([str(a) for a in args])
    except SystemExit as exc:
        rc = exc.code
    cap = capsys.readouterr()
    return rc, cap.err, cap.out


def _tensor_of(model: Path, op: int, outputs: bool = True, k: int = 0) -> int:
    import tflite

    o = tflite.Model.GetRootAs(model.read_bytes(), 0).Subgraphs(0).Operators(op)
    return int((o.OutputsAsNumpy() if outputs else o.InputsAsNumpy())[k])


def _edit(model: Path, dst: Path, what: str, index: int, value, fmt: str = "<i") -> Path:
    """``model`` with the index-th field described as ``what`` (tests/fuzz_models.tflite_sites) set."""
    import struct

    from fuzz_models import tflite_sites

    data = bytearray(model.read_bytes())
    sites = [s for s in tflite_sites(bytes(data))[0] if s.what == what and s.fmt == fmt]
    assert len(sites) > index, (what, [s.what for s in tflite_sites(bytes(data))[0]][:40])
    struct.pack_into(fmt, data, sites[index].offset, value)
    dst.write_bytes(bytes(data))
    return dst


def _shape_case(name: str, tmp: Path) -> Path:
    conv = FIXTURES / "conv_3x3_s1_same_relu.tflite"
    cases = {
        # a declared output that contradicts the op (rows of a SAME 3x3 stride-1 conv = input rows)
        "conv_output": lambda: _edit(conv, tmp / "m.tflite", f"tensor {_tensor_of(conv, 0)} shape", 1, 5),
        "conv_stride_0": lambda: _edit(conv, tmp / "m.tflite", "op 0 option 1", 0, 0),
        "conv_stride_1000": lambda: _edit(conv, tmp / "m.tflite", "op 0 option 2", 0, 1000),
        "conv_dilation_neg": lambda: _edit(FIXTURES / "conv_3x3_dil2_valid_pertensor.tflite", tmp / "m.tflite",
                                           "op 0 option 4", 0, -1),
        "pool_output": lambda: _edit(FIXTURES / "maxpool_2x2_s2_valid.tflite", tmp / "m.tflite",
                                     f"tensor {_tensor_of(FIXTURES / 'maxpool_2x2_s2_valid.tflite', 0)} shape", 3, 7),
        "fc_output": lambda: _edit(FIXTURES / "fc_none.tflite", tmp / "m.tflite",
                                   f"tensor {_tensor_of(FIXTURES / 'fc_none.tflite', 0)} shape", 1, 3),
        "pad_output": lambda: _edit(FIXTURES / "pad_channels.tflite", tmp / "m.tflite",
                                    f"tensor {_tensor_of(FIXTURES / 'pad_channels.tflite', 0)} shape", 3, 99),
        "pad_operand_missing": lambda: _edit(FIXTURES / "pad_channels.tflite", tmp / "m.tflite", "op 0 inputs", 1, -1),
        "softmax_output": lambda: _edit(FIXTURES / "softmax_basic.tflite", tmp / "m.tflite",
                                        f"tensor {_tensor_of(FIXTURES / 'softmax_basic.tflite', 0)} shape", 1, 11),
        "empty_activation": lambda: _edit(FIXTURES / "small_cnn.tflite", tmp / "m.tflite",
                                          f"tensor {_tensor_of(FIXTURES / 'small_cnn.tflite', 0)} shape", 2, 0),
        "empty_input": lambda: _edit(conv, tmp / "m.tflite", f"tensor {_tensor_of(conv, 0, False)} shape", 2, 0),
        "huge_scale": lambda: _edit(FIXTURES / "unary_leaky_relu.tflite", tmp / "m.tflite",
                                    f"tensor {_tensor_of(FIXTURES / 'unary_leaky_relu.tflite', 0, False)} scale", 0,
                                    3.4e38, "<f"),
    }
    return cases[name]()


@pytest.mark.parametrize("case,needles", [
    ("conv_output", ["CONV_2D", "declared [1, 5,", "give [1, 8,"]),
    ("conv_stride_0", ["CONV_2D", "stride"]),
    ("conv_stride_1000", ["CONV_2D", "stride", "1..255"]),
    ("conv_dilation_neg", ["CONV_2D", "dilation"]),
    ("pool_output", ["MAX_POOL_2D", "declared", "give"]),
    ("fc_output", ["FULLY_CONNECTED", "declared", "give"]),
    ("pad_output", ["PAD", "declared", "99]"]),
    ("pad_operand_missing", ["PAD", "missing"]),
    ("softmax_output", ["SOFTMAX", "declared", "give"]),
    ("empty_activation", ["empty activation"]),
    ("empty_input", ["model input", "holds no values"]),
    ("huge_scale", ["LEAKY_RELU"]),
])
def test_inconsistent_model_is_refused_naming_op_and_shapes(case, needles, tmp_path, capsys):
    model = _shape_case(case, tmp_path)
    for cmd in (["gen", model, "--ram", "1MB", "-o", tmp_path / "out"], ["inspect", model]):
        rc, err, out = _cli(capsys, *cmd)
        assert rc == 2, (cmd[0], err)
        assert "Traceback" not in err + out and len(err.strip().splitlines()) == 1, err
        said = err if cmd[0] == "gen" else out       # inspect lists the problems in its report
        for n in needles:
            assert n.lower() in said.lower(), (cmd[0], n, said[-600:])
    assert not (tmp_path / "out").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".out")]


def test_shape_rules_agree_with_every_model_that_compiles():
    """No false refusals: every fixture and shared model's declared shapes equal the inferred ones
    (the rules cover the conv, FC, pool, broadcast, PAD and same-shape kinds of these models)."""
    from conftest import all_models

    from pockmcu.frontend import load_model
    from pockmcu.shapes import RULES, infer, op_shape_problems

    checked = set()
    for m in all_models():
        g = load_model(m)
        for op in g.ops:
            if op.kind in RULES and not op_shape_problems(g, op):
                checked.add(op.kind)
                assert infer(g, op) is not None
            assert not op_shape_problems(g, op), (m.name, op.kind, op_shape_problems(g, op))
    assert {"CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED", "AVERAGE_POOL_2D", "MAX_POOL_2D", "ADD", "PAD",
            "SOFTMAX", "MUL"} <= checked


def _set_bias(model: Path, dst: Path, value: int) -> Path:
    """``model`` with the first int32 of op 0's bias buffer (input 2) set to ``value``."""
    import struct

    import tflite

    data = bytearray(model.read_bytes())
    m = tflite.Model.GetRootAs(bytes(data), 0)
    t = m.Subgraphs(0).Tensors(_tensor_of(model, 0, outputs=False, k=2))
    tab = m.Buffers(t.Buffer())._tab
    struct.pack_into("<i", data, tab.Vector(tab.Offset(4)), value)
    dst.write_bytes(bytes(data))
    return dst


@pytest.mark.parametrize("fixture", ["conv_3x3_s1_same_relu.tflite", "dwconv_3x3_s1_same_relu.tflite",
                                     "fc_none.tflite"])
def test_accumulator_that_can_overflow_int32_is_refused(fixture, tmp_path, capsys):
    """A bias near the int32 limit: bias + sum(w * (x - zp)) overflows for some input (undefined
    behaviour in the kernels). The bound is proven at compile time from the actual weights and bias;
    a bias well inside it still compiles."""
    from pockmcu.frontend import load_model
    from pockmcu.shapes import INT32_MAX, accumulator_bound

    bad = _set_bias(FIXTURES / fixture, tmp_path / "bad.tflite", INT32_MAX - 5)
    rc, err, _ = _cli(capsys, "gen", bad, "--ram", "1MB", "-o", tmp_path / "out")
    assert rc == 2 and len(err.strip().splitlines()) == 1 and "beyond int32" in err and "output channel 0" in err, err
    g = load_model(FIXTURES / fixture)
    worst, _ = accumulator_bound(g, g.ops[0])
    ok = _set_bias(FIXTURES / fixture, tmp_path / "ok.tflite", (INT32_MAX - worst) // 2)
    rc, err, _ = _cli(capsys, "gen", ok, "--ram", "1MB", "-o", tmp_path / "out")
    assert rc == 0, err


def test_fuzz_findings_are_refused_or_run(tmp_path, capsys):
    """Two mutants `make fuzz` found: a scale of 3.4e38 on HARD_SWISH's input (numpy's overflow warning
    made a second line on stderr) and a model output moved to the weights (a constant [8, 3, 3, 3]
    output: sim could not reshape it, and once it could, the C returned zeros, never the constant)."""
    hs = FIXTURES / "hard_swish_wide_range.tflite"
    bad = _edit(hs, tmp_path / "hs.tflite", f"tensor {_tensor_of(hs, 0, False)} scale", 0, 3.4e38, "<f")
    for cmd in (["inspect", bad], ["gen", bad, "--ram", "1MB", "-o", tmp_path / "o"]):
        rc, err, _ = _cli(capsys, *cmd)
        assert rc == 2 and len(err.strip().splitlines()) == 1 and "Warning" not in err, err
    conv = FIXTURES / "conv_3x3_s1_same_relu.tflite"
    moved = _edit(conv, tmp_path / "c.tflite", "subgraph outputs", 0, _tensor_of(conv, 0, False, 1))
    for cmd in (["inspect", moved], ["gen", moved, "--ram", "1MB", "-o", tmp_path / "c"]):
        rc, err, out = _cli(capsys, *cmd)
        assert rc == 2 and len(err.strip().splitlines()) == 1 and "is a constant" in err + out, err
    assert not (tmp_path / "c").exists()


def test_every_model_level_kind_has_its_shapes_checked():
    """Every op kind a model file can name has a shape rule, checks its shapes itself, or is folded."""
    from pockmcu.ops import TFLITE_BUILTINS
    from pockmcu.shapes import CHECKED_BY_OP, FOLDED, RULES

    kinds = {d.kind for d in TFLITE_BUILTINS.values()}
    assert kinds - set(RULES) - CHECKED_BY_OP - FOLDED == set()
    assert CHECKED_BY_OP <= kinds and FOLDED <= kinds


def test_names_with_control_characters_stay_one_line(tmp_path, capsys):
    """A damaged file's tensor name can hold a newline (fuzz seed 7: three refusals came out as several
    lines): names are made printable at load, and every message is one line."""
    import tflite

    conv = FIXTURES / "conv_3x3_s1_same_relu.tflite"
    k = _tensor_of(conv, 0, False)
    model = _edit(conv, tmp_path / "m.tflite", f"tensor {k} shape", 1, -7)
    data = bytearray(model.read_bytes())
    name = tflite.Model.GetRootAs(bytes(data), 0).Subgraphs(0).Tensors(k).Name()
    at = data.find(name)
    data[at + 1:at + 2] = b"\n"
    model.write_bytes(bytes(data))
    rc, err, _ = _cli(capsys, "gen", model, "--ram", "1MB", "-o", tmp_path / "o")
    assert rc == 2 and len(err.strip().splitlines()) == 1 and "negative dimension" in err, err
    from pockmcu.cli import one_line

    assert one_line("a\nb\x1bc") == "a\\nb\\x1bc"


@pytest.mark.parametrize("fixture,scale", [("conv_3x2_s2x1_same.tflite", 1e30), ("fc_none.tflite", 3.4e38),
                                           ("dwconv_3x3_s1_same_relu.tflite", 3.4e38)])
def test_requantization_needing_a_huge_shift_is_refused(fixture, scale, tmp_path, capsys):
    """`make fuzz` (seed 2024, san stage): a weight scale of 1e30 compiled and the checked build's UBSan
    reported a shift by 98 bits in the kernels' requantization. Refused at compile time now."""
    m = FIXTURES / fixture
    bad = _edit(m, tmp_path / "m.tflite", f"tensor {_tensor_of(m, 0, False, 1)} scale", 0, scale, "<f")
    rc, err, _ = _cli(capsys, "gen", bad, "--ram", "1MB", "-o", tmp_path / "o")
    assert rc == 2 and len(err.strip().splitlines()) == 1 and "left shift of" in err, err


@pytest.mark.parametrize("fixture,tensor,scale", [
    ("mean_same_quant.tflite", "input", 1e30), ("sum_spatial_nokeep.tflite", "input", 1e30),
    ("sum_spatial_nokeep.tflite", "sum0/out", 1e-30), ("quantize_int8_requant.tflite", "input", 1e30),
    ("tconv_3x3_s1_same_odd.tflite", "input", 1e30), ("logistic.tflite", "input", 1e-30),
])
def test_any_op_whose_scales_need_an_impossible_shift_is_refused(fixture, tensor, scale, tmp_path, capsys):
    """Beyond the conv family: every op's prepared shifts are checked (MEAN, SUM, QUANTIZE, TRANSPOSE_CONV,
    LOGISTIC compiled with scales of 1e30 / 1e-30 and asked the kernels for shifts of 70 to 110 bits)."""
    import tflite

    m = FIXTURES / fixture
    sg = tflite.Model.GetRootAs(m.read_bytes(), 0).Subgraphs(0)
    k = next(i for i in range(sg.TensorsLength()) if sg.Tensors(i).Name() == tensor.encode())
    bad = _edit(m, tmp_path / "m.tflite", f"tensor {k} scale", 0, scale, "<f")
    rc, err, _ = _cli(capsys, "gen", bad, "--ram", "1MB", "-o", tmp_path / "o")
    assert rc == 2 and len(err.strip().splitlines()) == 1 and "shift" in err, err
