"""`pockmcu inspect` (every problem listed, exit status 0/2), the messages it shares with gen, and the
corpus of public models: the manifest, fetching into the cache, and the evaluation of one model.

Evaluating the whole corpus is `make corpus` (part of `make bench`), not the test suite: nothing here
needs the network (downloads go to a closed loopback port)."""

from __future__ import annotations

import hashlib
import importlib.util
import re
import subprocess
import sys

import numpy as np
import pytest
import tflite
from conftest import FIXTURES, ROOT

from pockmcu import corpus
from pockmcu.compiler import supported_ops
from pockmcu.corpus import MANIFEST, cache_dir, evaluate, fetch, file_name, markdown, parse_manifest, read_manifest, write_section
from pockmcu.errors import PockError
from pockmcu.ops import REGISTRY
from pockmcu.train import Data

try:
    import tomllib  # Python 3.11+: the manifest must read the same with it
except ImportError:     # pragma: no cover
    tomllib = None

SUPPORTED = FIXTURES / "conv_3x3_s1_same_relu.tflite"
CLASSIFIER = FIXTURES / "small_cnn.tflite"


def pockmcu(*args):
    return subprocess.run([sys.executable, "-m", "pockmcu.cli", *map(str, args)], capture_output=True, text=True,
                          timeout=300, cwd=ROOT)


def _fixture_module():
    if "make_fixtures" in sys.modules:
        return sys.modules["make_fixtures"]
    spec = importlib.util.spec_from_file_location("make_fixtures", FIXTURES.parent / "make_fixtures.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["make_fixtures"] = mod
    spec.loader.exec_module(mod)
    return mod


def two_unsupported_ops(subgraphs: int = 1) -> bytes:
    """int8 [1, 4] -> EXP -> COS -> int16 output: two ops pockmcu has no kernel for and an int16
    tensor; with subgraphs=2 the subgraph appears twice (as control flow would add a second one)."""
    base = _fixture_module().TFLiteBuilder

    class Builder(base):
        def _table_vector(self, b, start_fn, offsets):
            if start_fn is tflite.ModelStartSubgraphsVector:
                offsets = offsets * subgraphs
            return base._table_vector(b, start_fn, offsets)

    m = Builder("two unsupported ops")
    x = m.add_tensor("x", [1, 4], "int8", [0.05], [0])
    a = m.add_tensor("a", [1, 4], "int8", [0.05], [0])
    y = m.add_tensor("y", [1, 4], "int16", [0.001], [0])
    m.add_op("EXP", [x], [a])
    m.add_op("COS", [a], [y])
    m.set_io([x], [y])
    return m.serialize()


# -- inspect ------------------------------------------------------------------------------------


def test_inspect_exit_status_is_zero_when_the_model_compiles():
    r = pockmcu("inspect", SUPPORTED)
    assert r.returncode == 0, r.stderr
    assert "CONV_2D" in r.stdout and "supported: every op" in r.stdout and r.stderr == ""


def test_inspect_lists_every_problem_and_exits_2(tmp_path):
    model = tmp_path / "two.tflite"
    model.write_bytes(two_unsupported_ops())
    r = pockmcu("inspect", model)
    assert r.returncode == 2
    assert "does not compile: 3 problem(s)" in r.stderr and len(r.stderr.splitlines()) == 1
    problems = r.stdout.split("NOT SUPPORTED (3):")[1]
    assert "op EXP at op #0" in problems and "op COS at op #1" in problems
    assert "model output 'y' is int16" in problems
    assert r.stdout.count("<- unsupported") == 2           # both ops marked in the table


def test_inspect_lists_every_subgraph(tmp_path):
    """A multi-subgraph model (which the frontend refuses as a whole) is listed from the file: the
    structure and every op of every subgraph."""
    model = tmp_path / "two_sg.tflite"
    model.write_bytes(two_unsupported_ops(subgraphs=2))
    r = pockmcu("inspect", model)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "2 subgraphs" in r.stdout
    for where in ("subgraph 0 op #0", "subgraph 0 op #1", "subgraph 1 op #0", "subgraph 1 op #1"):
        assert where in r.stdout, where
    assert "int16 tensor" in r.stdout
    # gen refuses the same model in one line
    g = pockmcu("gen", model, "--ram", "64KB", "-o", tmp_path / "out")
    assert g.returncode == 2 and "subgraphs" in g.stderr and len(g.stderr.splitlines()) == 1


def test_inspect_refused_onnx_lists_every_node(tmp_path):
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])
    inits = [numpy_helper.from_array(np.array(0.1, np.float32), "s"),
             numpy_helper.from_array(np.array(0, np.int8), "zp")]
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "zp"], ["q"]),
             helper.make_node("DequantizeLinear", ["q", "s", "zp"], ["d"]),
             helper.make_node("Sin", ["d"], ["e"], name="sin"), helper.make_node("Cos", ["e"], ["y"], name="cos")]
    m = helper.make_model(helper.make_graph(nodes, "g", [x], [y], inits), opset_imports=[helper.make_opsetid("", 13)])
    path = tmp_path / "sincos.onnx"
    onnx.save(m, str(path))
    r = pockmcu("inspect", path)
    assert r.returncode == 2
    assert "node #2 'sin' (Sin) is not supported" in r.stdout and "node #3 'cos' (Cos) is not supported" in r.stdout


def test_onnx_scales_given_as_graph_inputs_are_named(tmp_path):
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])
    s = helper.make_tensor_value_info("x_scale", TensorProto.FLOAT, [])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])
    zp = numpy_helper.from_array(np.array(0, np.int8), "x_zp")
    nodes = [helper.make_node("QuantizeLinear", ["x", "x_scale", "x_zp"], ["q"]),
             helper.make_node("DequantizeLinear", ["q", "x_scale", "x_zp"], ["y"])]
    m = helper.make_model(helper.make_graph(nodes, "g", [x, s], [y], [zp]), opset_imports=[helper.make_opsetid("", 13)])
    path = tmp_path / "scale_input.onnx"
    onnx.save(m, str(path))
    g = pockmcu("gen", path, "--ram", "64KB", "-o", tmp_path / "out")
    assert g.returncode == 2 and len(g.stderr.splitlines()) == 1
    assert "graph inputs" in g.stderr and "'x_scale' (scale of node #0" in g.stderr and "initializers" in g.stderr
    assert "batch axis" not in g.stderr
    r = pockmcu("inspect", path)
    assert r.returncode == 2 and "'x_scale'" in r.stdout and "graph input" in r.stdout


def test_supported_ops_are_model_level_ops(tmp_path):
    names = supported_ops()
    internal = [k for k, d in REGISTRY.items() if d.role or k.endswith(("_GRAD", "_GRAD_INPUT", "_UPDATE"))]
    assert internal and not set(internal) & set(names)
    for k in ("MASK_PACK", "MASK_APPLY", "CONV_2D_WGRAD_UPDATE", "XENT_GRAD", "UINT8_TO_INT8", "TILE_PASTE"):
        assert k not in names
    builtins = set(vars(tflite.BuiltinOperator))
    assert all(n in builtins for n in names), [n for n in names if n not in builtins]
    assert {"CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED", "SOFTMAX"} <= set(names)
    # ops that also run on activations are listed; those that only exist folded are not
    assert {"TRANSPOSE", "STRIDED_SLICE", "PACK", "GATHER", "CONCATENATION", "SPLIT", "TILE"} <= set(names)
    assert not {"SHAPE", "FILL", "ZEROS_LIKE"} & set(names)
    model = tmp_path / "two.tflite"
    model.write_bytes(two_unsupported_ops())
    r = pockmcu("gen", model, "--ram", "64KB", "-o", tmp_path / "out")
    assert r.returncode == 2
    listed = r.stderr.split("Supported ops: ")[1].strip().split(", ")
    assert listed == names


# -- the corpus manifest and cache ------------------------------------------------------------------


def test_manifest_is_well_formed():
    rows = read_manifest()
    if tomllib is not None:
        assert rows == tomllib.loads(MANIFEST.read_text())["model"]   # our TOML subset reads as TOML does
    assert len(rows) >= 30
    assert len({r["name"] for r in rows}) == len(rows)
    assert len({r["sha256"] for r in rows}) == len(rows)
    for r in rows:
        assert re.fullmatch(r"[0-9a-f]{40}", r["commit"]), r["name"]
        assert re.fullmatch(r"[0-9a-f]{64}", r["sha256"]), r["name"]
        assert r["url"] == f"https://raw.githubusercontent.com/{r['repo']}/{r['commit']}/{r['path']}", r["name"]
        assert r["size"] > 200 and r["license"] and r["task"] and r["loss"] in ("xent", "mse")   # > an LFS pointer
        assert file_name(r).endswith((".tflite", ".onnx"))
    assert sum(r["path"].endswith(".onnx") for r in rows) >= 3
    assert len({r["repo"] for r in rows}) >= 5


def test_cached_models_match_the_manifest():
    """Every corpus model present in the cache (make corpus put it there) is the manifest's file."""
    cache = cache_dir()
    for r in read_manifest():
        p = cache / file_name(r)
        if p.is_file():
            data = p.read_bytes()
            assert len(data) == r["size"] and hashlib.sha256(data).hexdigest() == r["sha256"], r["name"]


def test_manifest_parser_refuses_what_it_does_not_read():
    with pytest.raises(PockError, match="line 3"):
        parse_manifest('[[model]]\nname = "a"\nsize = 1.5\n')
    with pytest.raises(PockError, match="line 1"):
        parse_manifest('name = "a"\n')


def test_fetch_offline_takes_files_from_a_directory(tmp_path):
    data = SUPPORTED.read_bytes()
    row = dict(name="m", task="t", loss="mse", repo="o/r", commit="0" * 40, path="models/conv.tflite",
               url="http://127.0.0.1:9/conv.tflite", sha256=hashlib.sha256(data).hexdigest(), size=len(data),
               license="Apache-2.0")
    cache, src, lines = tmp_path / "cache", tmp_path / "src", []
    (src / "deep").mkdir(parents=True)
    assert fetch([row], cache, None, timeout=2, log=lines.append) == 1          # offline, no directory
    assert len(lines) == 1 and "cannot download" in lines[0] and "--from" in lines[0]
    (src / "deep" / "conv.tflite").write_bytes(data[:-1] + bytes([data[-1] ^ 1]))   # same name, other content
    lines.clear()
    assert fetch([row], cache, src, timeout=2, log=lines.append) == 1
    assert "not in" in lines[0] and not (cache / "m.tflite").exists()
    (src / "deep" / "conv.tflite").write_bytes(data)
    assert fetch([row], cache, src, timeout=2, log=lines.append) == 0
    assert (cache / "m.tflite").read_bytes() == data
    lines.clear()
    assert fetch([row], cache, None, timeout=2, log=lines.append) == 0 and lines == []   # present: skipped


# -- evaluating a model -------------------------------------------------------------------------------


def test_evaluate_reports_the_first_problem(tmp_path):
    model = tmp_path / "two.tflite"
    model.write_bytes(two_unsupported_ops())
    r = evaluate(dict(name="two", task="t", loss="mse"), model, tmp_path / "work")
    assert r["compile"] is False and r["exact"] is None and r["ops"] == 2
    assert r["reason"] == "op EXP at op #0 is not supported"
    assert r["keys"] == ["op EXP", "op COS", "model output int16"]


def test_evaluate_compiles_compares_and_trains_a_classifier(tmp_path):
    r = evaluate(dict(name="small_cnn", task="t", loss="xent"), CLASSIFIER, tmp_path / "work", qemu_target=None)
    assert r["compile"] and r["exact"] and r["trainable"], r
    first, last = r["losses"]
    assert last < first and r["reason"] == ""
    assert "qemu_equal" not in r


def _one_sample():
    x = np.random.default_rng(1).integers(-128, 128, (1, 16, 16, 3)).astype(np.int8)
    return Data(x, np.array([3], np.int32))


@pytest.mark.qemu
def test_evaluate_steps_in_qemu_like_the_host(tmp_path):
    """The corpus' QEMU column: one training step of the same project in QEMU (Cortex-M4) and in
    host simulation ends with the same parameter bytes, and the step did change them."""
    r = evaluate(dict(name="small_cnn", task="t", loss="xent"), CLASSIFIER, tmp_path / "work")
    assert r["trainable"] and r["qemu_equal"] is True and r["qemu_reason"] == "", r


@pytest.mark.qemu
def test_qemu_step_reports_differing_bytes(tmp_path, monkeypatch):
    """When QEMU's parameters differ from the host's, the column says no and how many bytes differ."""
    real = corpus.train_on_target

    def flipped(*args, **kw):
        hist, raw, instr = real(*args, **kw)
        return hist, bytes([raw[0] ^ 1]) + raw[1:], instr

    monkeypatch.setattr(corpus, "train_on_target", flipped)
    ok, why = corpus.qemu_step_equal(dict(name="small_cnn", loss="xent"), CLASSIFIER, tmp_path, _one_sample())
    assert ok is False and "differ from host simulation after one step (1 of" in why



def test_markdown_section_replaces_itself(tmp_path):
    rows = [dict(name="a", task="task a"), dict(name="b", task="task b")]
    results = [dict(name="a", format="tflite", ops=3, compile=True, exact=True, trainable=True, losses=[2.0, 1.0],
                    reason="", keys=[], train_reason="", qemu_equal=True, qemu_reason=""),
               dict(name="b", format="onnx", ops=0, compile=False, exact=None, trainable=None, keys=["timeout"],
                    reason="evaluation took more than 300 s | x")]
    md = markdown(results, rows)
    assert "**1 of 2 compile, 1 of 1 bit-exact, 1 of 1 trainable; QEMU parameters byte-equal to host simulation " \
           "after a training step for 1 of 1 models stepped.**" in md
    assert "| a (tflite) | task a | 3 | yes | yes | yes | yes | loss 2 -> 1 |" in md
    assert "| b (onnx) | task b | 0 | **no** | - | - | - |" in md
    assert "300 s \\| x" in md and "- timeout: 1" in md
    target = tmp_path / "B.md"
    target.write_text("# Other\n\ntext\n")
    write_section(md, target)
    write_section(md.replace("task a", "task A"), target)
    text = target.read_text()
    assert text.startswith("# Other\n\ntext\n") and text.count("# Corpus") == 1 and "task A" in text


# -- float inputs far outside the input range (issue 12) ------------------------------------------------


def _quantize_probe(scale: float, zp: int, n: int) -> bytes:
    """float32 [1, n] -> QUANTIZE -> int8 [1, n] output: what a float-I/O model does to its input."""
    m = _fixture_module().TFLiteBuilder("float input quantization probe")
    x = m.add_tensor("x", [1, n], "float32")
    y = m.add_tensor("y", [1, n], "int8", [scale], [zp])
    m.add_op("QUANTIZE", [x], [y])
    m.set_io([x], [y])
    return m.serialize()


def test_float_inputs_outside_int32_match_tflm_except_the_documented_case(tmp_path):
    """Float input quantization (pockmcu_quantize_f32_s8 in the generated C) against TFLite Micro.

    Every input with |round(x / scale)| < 2^31 gives TFLite Micro's int8, up to and including the edge
    of int32. Beyond it, and for NaN, TFLite Micro converts an out-of-range float to int32 (undefined
    behaviour in C++): its x86-64 interpreter gets INT32_MIN and adds the zero point with wrap-around,
    so every such input, +inf and NaN included, becomes 127 when the zero point is negative and -128
    otherwise. pockmcu saturates toward the input's sign and maps NaN to the zero point (README,
    "Float inputs outside int32"). Both behaviours are pinned here."""
    from tflite_micro.python.tflite_micro import runtime

    from pockmcu.codegen import write_project
    from pockmcu.compiler import compile_model
    from pockmcu.sim import load

    s = 0.05
    f32 = np.float32
    edge = f32(2.0**31 - 128) * f32(s)                # round(x / s) just below 2^31 in float32
    rng = np.random.default_rng(0)
    inside = np.concatenate([np.array([edge, -edge, 1000 * s, -1000 * s, 126.4 * s, -127.5 * s, 0.0, -0.0], f32),
                             (rng.standard_normal(24) * 1e6).astype(f32)])
    outside = np.array([2.0**31 * s, -(2.0**31) * s, 3e9 * s, -3e9 * s, 1e30, -1e30, np.inf, -np.inf, np.nan, -np.nan], f32)
    assert np.all(np.abs(np.round(inside.astype(np.float64) / s)) < 2.0**31)
    assert np.all(np.isnan(outside) | (np.abs(outside / f32(s)) >= 2.0**31))
    x = np.concatenate([inside, outside])[None]
    for zp in (-128, -5, 0, 127):
        path = tmp_path / f"q{zp}.tflite"
        path.write_bytes(_quantize_probe(s, zp, x.shape[1]))
        it = runtime.Interpreter.from_file(str(path), arena_size=1 << 14)
        it.set_input(x, 0)
        it.invoke()
        tflm = np.array(it.get_output(0)).reshape(-1)
        ours = load(write_project(compile_model(path, ram=1 << 16), tmp_path / f"q{zp}")).invoke(x).reshape(-1)
        n = len(inside)
        assert np.array_equal(ours[:n], tflm[:n]), zp                                   # inside int32: equal
        assert np.all(tflm[n:] == (127 if zp < 0 else -128)), (zp, tflm[n:])          # TFLM (x86-64): wrapped
        sign = np.where(np.isnan(outside), 0, np.sign(outside))
        assert np.array_equal(ours[n:], np.where(sign > 0, 127, np.where(sign < 0, -128, zp))), (zp, ours[n:])
