"""ONNX frontend: QDQ and QOperator int8/uint8 models through the same IR, kernels and reference.

For every ONNX model (the four tf2onnx conversions in ../shared/models and the
fixtures of tests/fixtures/onnx, written by make_onnx_fixtures.py):

* the generated C (host simulation) equals our numpy reference byte for byte,
  in both numerics modes (onnxruntime, the default for .onnx, and tflm);
* against onnxruntime (onnxruntime numerics), end to end on seeded random
  inputs, no output differs by more than 1 LSB, and layer by layer (each of our
  ops fed onnxruntime's own values of its inputs) no output differs by more than
  1 LSB either. The layer-by-layer comparison exposes intermediate tensors as
  graph outputs, which changes which QDQ groups onnxruntime fuses (a fused
  QLinearConv may then run as a float Conv), so it is looser than the end-to-end
  check, which runs the model unchanged;
* with --numerics tflm the shared ONNX conversions give the same C constants and
  the same outputs as their TFLite originals, bit-exact with TFLite Micro.

Bad ONNX inputs end with one line and exit status 2; a few models also run in QEMU.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import onnx
import pytest
from conftest import ROOT, SHARED, model_id, random_inputs, tflm_run
from test_errors import assert_clean_error, pockmcu

from pockmcu.ops import opdef
from pockmcu.ops.base import data_items
from pockmcu.reference import run_reference
from pockmcu.sim import load

ONNX_FIXTURES = ROOT / "tests" / "fixtures" / "onnx"
N_INPUTS = 20
N_LAYERWISE = 8
SHARED_ONNX = sorted(SHARED.glob("*_qdq.onnx"))
FIXTURES = sorted(p for p in ONNX_FIXTURES.glob("*.onnx") if not p.name.startswith("bad_"))
ALL = SHARED_ONNX + FIXTURES


def test_fixture_inventory():
    assert len(SHARED_ONNX) == 4, SHARED_ONNX
    names = {p.stem for p in FIXTURES}
    for kind in ("qdq_", "qop_", "_s8_", "_u8_", "_pc", "_pt"):
        assert sum(kind in n for n in names) >= 8, kind
    assert {"small_cnn_qdq_s8_pc", "small_cnn_qdq_u8_pt", "small_cnn_qop_s8_pt", "small_cnn_qop_u8_pc"} <= names
    assert {"convinteger", "matmulinteger", "conv_3x3_relu_qdq_u8io", "small_cnn_qdq_s8io"} <= names
    assert all(p.stat().st_size < 16_000 for p in FIXTURES)


# -- onnxruntime ------------------------------------------------------------------------------


def ort_session(model: Path, extra_outputs: dict[str, str] | None = None):
    import onnxruntime as ort

    m = onnx.load(model)
    have = {o.name for o in m.graph.output}
    for name, dtype in (extra_outputs or {}).items():
        if name not in have:
            m.graph.output.append(onnx.helper.make_tensor_value_info(
                name, {"int8": onnx.TensorProto.INT8, "uint8": onnx.TensorProto.UINT8}[dtype], None))
    so = ort.SessionOptions()
    so.log_severity_level = 3
    return ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])


def ort_run(model: Path, xs: list[np.ndarray], names: dict[str, str] | None = None):
    """onnxruntime on every sample (batch 1 each): the model output [N, ...] and, if asked, named tensors."""
    sess = ort_session(model, names)
    ins = [i.name for i in sess.get_inputs()]
    out0 = sess.get_outputs()[0].name
    wanted = [out0] + sorted(names or {})
    runs = [sess.run(wanted, {n: x[i:i + 1] for n, x in zip(ins, xs)}) for i in range(len(xs[0]))]
    return np.concatenate([r[0] for r in runs]), [dict(zip(wanted[1:], r[1:])) for r in runs]


def output_scale(g) -> float:
    """The quantization step of the model output (the DEQUANTIZE input's, for a float output)."""
    out = g.t(g.outputs[0])
    if out.quant is not None:
        return out.quant.s
    prod = next(op for op in g.ops if g.outputs[0] in op.outputs)
    return g.t(prod.inputs[0]).quant.s


def lsb_diff(a: np.ndarray, b: np.ndarray, scale: float, is_float: bool) -> np.ndarray:
    if is_float:
        return np.abs(np.rint(a.astype(np.float64) / scale) - np.rint(b.astype(np.float64) / scale))
    return np.abs(a.astype(np.int64) - b.astype(np.int64))


def to_ir(value: np.ndarray, layout, dtype: str) -> np.ndarray:
    v = layout.apply(value)
    return (v.astype(np.int16) - 128).astype(np.int8) if dtype == "uint8" else v


def layerwise(gen, n: int):
    """Each op fed onnxruntime's values of its inputs, compared with onnxruntime's value of its output:
    {op name: (kind, max |diff| in LSB, fraction differing)}."""
    g = gen.compiled.graph
    vals = g.onnx_values
    xs = gen.inputs(n, seed=101)
    _, seen = ort_run(gen.model, xs, {v[0]: v[3] for v in vals.values()})
    stats: dict[str, list] = {}
    for s in range(n):
        env = {name: x[s:s + 1] for name, x in zip(g.inputs, xs)}
        for op in g.ops:
            d = opdef(op.kind)
            ins = []
            for i in d.activation_inputs(g, op):
                if i in vals and i not in g.inputs:
                    onnx_name, lay, _, dt = vals[i]
                    ins.append(to_ir(seen[s][onnx_name], lay, dt))
                else:
                    ins.append(env[i])
            for o, y in zip(op.outputs, d.reference(g, op, ins)):
                env[o] = y
                if o in vals and o not in g.inputs:
                    onnx_name, lay, _, dt = vals[o]
                    want = to_ir(seen[s][onnx_name], lay, dt)
                    diff = np.abs(want.astype(np.int64) - y.reshape(want.shape).astype(np.int64))
                    st = stats.setdefault(op.name, [op.kind, 0, 0, 0])
                    st[1] = max(st[1], int(diff.max()))
                    st[2] += int((diff > 0).sum())
                    st[3] += diff.size
    return {k: (v[0], v[1], v[2] / v[3]) for k, v in stats.items()}


# -- the tests -----------------------------------------------------------------------------------


@pytest.mark.parametrize("model", ALL, ids=model_id)
def test_host_simulation_equals_reference(model, generated):
    gen = generated(model)
    xs = gen.inputs(N_INPUTS, seed=7)
    got = load(gen.out).invoke(*xs)
    (want,) = run_reference(gen.compiled.graph, *xs)
    assert got.dtype == want.dtype and got.shape == want.shape
    assert got.tobytes() == want.tobytes(), f"{int(np.sum(got != want))} of {got.size} values differ"


def test_plan_names_the_kernels_each_numerics_calls(generated):
    """plan.json (and the reports built from it) name the function each step calls: onnxruntime's
    rounding kernels in onnxruntime mode, TFLite Micro's in tflm mode."""
    import json

    kws = next(m for m in SHARED_ONNX if "kws" in m.name)
    kernels = {mode: [s["kernel"] for s in json.loads((generated(kws, mode).out / "plan.json").read_text())["steps"]]
               for mode in ("onnxruntime", "tflm")}
    for mode, ort in (("onnxruntime", True), ("tflm", False)):
        ks = kernels[mode]
        # every conv, depthwise, FC and pool kernel is the numerics' own (optimized rows keep "_ort_")
        layer_kernels = [k for k in ks if k and any(w in k for w in ("conv", "fully_connected", "avgpool"))]
        assert len(layer_kernels) >= 10 and all(("_ort_" in k) == ort for k in layer_kernels), ks
        assert ("pockmcu_avgpool_ort_s8" in ks) == ort, ks
        model_c = (generated(kws, mode).out / "model.c").read_text()
        assert all(k in model_c for k in ks if k)


@pytest.mark.parametrize("model", SHARED_ONNX + FIXTURES[::4], ids=model_id)
def test_tflm_numerics_host_simulation_equals_reference(model, generated):
    gen = generated(model, "tflm")
    xs = gen.inputs(N_INPUTS, seed=7)
    got = load(gen.out).invoke(*xs)
    (want,) = run_reference(gen.compiled.graph, *xs)
    assert got.tobytes() == want.tobytes(), f"{int(np.sum(got != want))} of {got.size} values differ"


#: onnxruntime runs part of this graph in float32 (Conv / Add it does not fuse): its float sums decide
#: values within ~1e-5 LSB of a rounding tie and the flips grow through the residual blocks; its own two
#: optimization levels disagree by several LSB (test_onnxruntime_float_path_disagrees_with_itself)
ORT_FLOAT_PATH = {"mlperf_ic_resnet8_qdq"}


def _end_to_end_param(model: Path):
    if model.stem in ORT_FLOAT_PATH:
        return pytest.param(model, marks=pytest.mark.xfail(
            strict=True, reason="onnxruntime computes 6 of 9 convolutions in float32 (see ORT_FLOAT_PATH)"))
    return model


@pytest.mark.parametrize("model", [_end_to_end_param(m) for m in ALL], ids=model_id)
def test_against_onnxruntime(model, generated):
    gen = generated(model)
    g = gen.compiled.graph
    xs = gen.inputs(N_INPUTS, seed=3)
    (ours,) = run_reference(g, *xs)
    theirs, _ = ort_run(model, xs)
    assert ours.shape == theirs.shape and ours.dtype == theirs.dtype
    is_float = ours.dtype == np.float32
    d = lsb_diff(ours, theirs, output_scale(g), is_float)
    end = f"end to end: max {int(d.max())} LSB, {float((d > 0).mean()):.2%} of {d.size} outputs differ"
    per_op = layerwise(gen, N_LAYERWISE if model in SHARED_ONNX else N_INPUTS)
    worst = max(per_op.values(), key=lambda v: v[1])
    table = "; ".join(f"{k} {v[0]} {v[1]} LSB {v[2]:.2%}" for k, v in per_op.items())
    assert per_op, "no layer could be compared with onnxruntime"
    print(f"{model.name}: {end}; worst layer {worst[1]} LSB")
    assert worst[1] <= 1, f"a layer differs from onnxruntime by more than 1 LSB ({end}): {table}"
    assert d.max() <= 1, f"{end}; layers: {table}"


@pytest.mark.parametrize("name", sorted(ORT_FLOAT_PATH))
def test_onnxruntime_float_path_disagrees_with_itself(name, tmp_path):
    """Why ORT_FLOAT_PATH models cannot match onnxruntime to 1 LSB: onnxruntime's optimized graph keeps
    float Conv nodes, and onnxruntime at its default level and with every optimization off (the
    plain DequantizeLinear -> float op -> QuantizeLinear semantics) differ by more than 1 LSB on the
    inputs the end-to-end test uses. Our largest difference is reported beside it."""
    import onnxruntime as ort

    model = SHARED / f"{name}.onnx"
    so = ort.SessionOptions()
    so.log_severity_level = 3
    so.optimized_model_filepath = str(tmp_path / "optimized.onnx")
    ort.InferenceSession(str(model), so, providers=["CPUExecutionProvider"])
    kinds = [n.op_type for n in onnx.load(tmp_path / "optimized.onnx").graph.node]
    assert "Conv" in kinds and "QLinearConv" in kinds, kinds

    def run(level):
        o = ort.SessionOptions()
        o.log_severity_level, o.graph_optimization_level = 3, level
        sess = ort.InferenceSession(str(model), o, providers=["CPUExecutionProvider"])
        return np.concatenate([sess.run(None, {sess.get_inputs()[0].name: x[None]})[0] for x in xs[0]])

    from pockmcu.compiler import load_and_check

    g = load_and_check(model)
    t = g.t(g.inputs[0])
    xs = [random_inputs(t.shape, t.dtype, N_INPUTS, 3)]   # the end-to-end test's inputs (seed 3)
    default, plain = run(ort.GraphOptimizationLevel.ORT_ENABLE_ALL), run(ort.GraphOptimizationLevel.ORT_DISABLE_ALL)
    own = lsb_diff(default, plain, output_scale(g), default.dtype == np.float32)
    assert own.max() > 1, f"onnxruntime's levels now agree to {own.max()} LSB: drop {name} from ORT_FLOAT_PATH"
    print(f"{name}: onnxruntime default vs unoptimized: max {int(own.max())} LSB, {float((own > 0).mean()):.2%} differ")


@pytest.mark.parametrize("model", SHARED_ONNX, ids=model_id)
def test_shared_conversion_matches_tflite(model, generated):
    """Same constants (weights, biases, multipliers, shifts, ranges) and the same outputs as the TFLite file."""
    tfl_model = model.with_name(model.name.replace("_qdq.onnx", ".tflite"))
    onnx_gen, tfl_gen = generated(model, "tflm"), generated(tfl_model)

    def signature(g):
        sigs = []
        for op in g.ops:
            if opdef(op.kind).alias:
                continue
            consts = tuple(g.t(i).data.tobytes() for i in op.inputs if i and g.t(i).is_const)
            a = {k: np.asarray(v).tolist() for k, v in data_items(op).items()
                 if k in ("multiplier", "shift", "act_min", "act_max", "pads", "stride", "dilation", "ch_mult",
                          "filter", "q", "mult", "left_shift", "diff_min")}
            ins = tuple((g.t(i).shape, g.t(i).quant.zp) for i in op.inputs if i and not g.t(i).is_const)
            sigs.append((op.kind, repr(sorted(a.items())), consts, ins))
        return sigs

    a, b = signature(onnx_gen.compiled.graph), signature(tfl_gen.compiled.graph)
    assert sorted(a) == sorted(b), "C constants differ between the ONNX conversion and the TFLite model"
    if "resnet" not in model.name:   # tf2onnx keeps the TFLite op order, except ResNet's shortcut convs
        assert a == b

        def body(p: Path) -> str:   # without comments (they name the source file and its tensors)
            return re.sub(r"/\*.*?\*/", "", p.read_text(), flags=re.S)

        for f in ("model.c", "weights.c"):
            assert body(onnx_gen.out / f) == body(tfl_gen.out / f), f"{f} differs"
    xs = onnx_gen.inputs(N_INPUTS, seed=13)
    (got,) = run_reference(onnx_gen.compiled.graph, *xs)
    want = tflm_run(tfl_model, *xs)
    np.testing.assert_array_equal(got.reshape(want.shape), want)


QEMU_MODELS = SHARED_ONNX + [ONNX_FIXTURES / "small_cnn_qop_u8_pc.onnx", ONNX_FIXTURES / "conv_3x3_relu_qdq_u8io.onnx"]


@pytest.mark.parametrize("model", QEMU_MODELS, ids=model_id)
def test_qemu_equals_host(model, generated):
    from pockmcu.runner import run_on_target

    gen = generated(model)
    xs = gen.inputs(3, seed=21)
    got = run_on_target(gen.out, "qemu-m4", *xs)
    want = load(gen.out).invoke(*xs)
    assert got.tobytes() == want.tobytes()


def test_layouts_and_dtypes_are_the_models():
    from pockmcu.compiler import load_and_check

    g = load_and_check(ONNX_FIXTURES / "conv_3x3_relu_qdq_u8io.onnx")
    x, y = g.t(g.inputs[0]), g.t(g.outputs[0])
    assert (x.dtype, x.shape, y.dtype, y.shape) == ("uint8", (1, 3, 8, 8), "uint8", (1, 8, 8, 8))
    assert [op.kind for op in g.ops] == ["UINT8_TO_INT8", "TRANSPOSE", "CONV_2D", "TRANSPOSE", "INT8_TO_UINT8"]
    g = load_and_check(ONNX_FIXTURES / "small_cnn_qdq_s8_pc.onnx")
    assert g.t(g.inputs[0]).dtype == "float32" and g.t(g.inputs[0]).shape == (1, 3, 12, 12)
    assert g.ops[0].kind == "QUANTIZE" and g.ops[1].kind == "TRANSPOSE" and g.ops[-1].kind == "DEQUANTIZE"
    # a Flatten of an NCHW tensor feeding a Gemm costs nothing at run time: the weight rows are permuted
    g = load_and_check(ONNX_FIXTURES / "flatten_gemm_qdq_s8_pc.onnx")
    assert [op.kind for op in g.ops] == ["QUANTIZE", "TRANSPOSE", "CONV_2D", "RESHAPE", "FULLY_CONNECTED",
                                         "DEQUANTIZE"]
    # tf2onnx's NHWC -> NCHW input transpose cancels against the NHWC the convolutions want
    for m in SHARED_ONNX:
        assert "TRANSPOSE" not in {op.kind for op in load_and_check(m).ops}


def test_names_and_locations():
    from pockmcu.compiler import load_and_check

    g = load_and_check(SHARED / "mlperf_kws_dscnn_qdq.onnx")
    assert [op.name for op in g.ops][:4] == ["conv0", "dwconv0", "conv1", "dwconv1"]
    assert g.ops[0].location.startswith("node #22 '")


def test_inspect_onnx():
    r = pockmcu("inspect", ONNX_FIXTURES / "small_cnn_qop_u8_pc.onnx")
    assert r.returncode == 0, r.stderr
    assert "onnx" in r.stdout and "supported: every op" in r.stdout and "uint8" not in r.stdout.split("\n")[1]


def test_cli_gen_and_sim(tmp_path):
    out = tmp_path / "out"
    r = pockmcu("gen", ONNX_FIXTURES / "conv_3x3_relu_qdq_u8io.onnx", "--ram", "64KB", "-o", out)
    assert r.returncode == 0, r.stderr
    x = random_inputs((1, 3, 8, 8), np.uint8, 2, 0)
    np.save(tmp_path / "x.npy", x)
    r = pockmcu("sim", out, "--input", tmp_path / "x.npy", "-o", tmp_path / "y.npy")
    assert r.returncode == 0, r.stderr
    y = np.load(tmp_path / "y.npy")
    theirs, _ = ort_run(ONNX_FIXTURES / "conv_3x3_relu_qdq_u8io.onnx", [x])
    assert y.dtype == np.uint8 and y.shape == (2, 8, 8, 8)
    assert np.abs(y.astype(int) - theirs).max() <= 1


def _bad(tmp: Path) -> dict[str, tuple[Path, str]]:
    kws = SHARED / "mlperf_kws_dscnn_qdq.onnx"
    (tmp / "empty.onnx").write_bytes(b"")
    (tmp / "truncated.onnx").write_bytes(kws.read_bytes()[: kws.stat().st_size // 3])
    (tmp / "random.onnx").write_bytes(np.random.default_rng(1).integers(0, 256, 3000, dtype=np.uint8).tobytes())
    (tmp / "renamed.onnx").write_bytes((SHARED / "mlperf_kws_dscnn.tflite").read_bytes())
    return {
        "missing": (tmp / "nope.onnx", "no such file"),
        "empty": (tmp / "empty.onnx", "empty"),
        "truncated": (tmp / "truncated.onnx", "onnx"),
        "random": (tmp / "random.onnx", "onnx"),
        "tflite_named_onnx": (tmp / "renamed.onnx", "tflite"),
        "float": (ONNX_FIXTURES / "bad_float.onnx", "quantize_static"),
        "unsupported": (ONNX_FIXTURES / "bad_unsupported_ops.onnx", "Sigmoid"),
        "dynamic": (ONNX_FIXTURES / "bad_dynamic_dims.onnx", "dynamic dimension 'H'"),
    }


@pytest.mark.parametrize("case", ["missing", "empty", "truncated", "random", "tflite_named_onnx", "float",
                                  "unsupported", "dynamic"])
def test_gen_refuses_bad_onnx(case, tmp_path):
    model, needle = _bad(tmp_path)[case]
    out = tmp_path / "out"
    r = pockmcu("gen", model, "--ram", "256KB", "-o", out)
    assert_clean_error(r, needle)
    assert not out.exists()


def test_unsupported_message_lists_every_node(tmp_path):
    r = pockmcu("gen", ONNX_FIXTURES / "bad_unsupported_ops.onnx", "--ram", "256KB", "-o", tmp_path / "o")
    assert_clean_error(r, "Sigmoid", "Erf", "my_erf", "node #")


def test_training_spec_addresses_onnx_layers_as_tflite(tmp_path):
    """Layer indices and names of an update spec pick the same layers in the ONNX conversion as in the TFLite
    model, and the training code is the same."""
    from pockmcu.codegen import write_project
    from pockmcu.compiler import TrainOptions, compile_model, parse_size

    spec = '{"bias": {"last": 2}, "weights": [{"layer": -1, "ratio": 1.0}, {"layer": "conv4", "ratio": 0.5}]}'
    bodies, described = [], []
    for m in (SHARED / "mlperf_kws_dscnn_qdq.onnx", SHARED / "mlperf_kws_dscnn.tflite"):
        c = compile_model(m, ram=parse_size("1MB"), train=TrainOptions(spec=spec), numerics="tflm")
        out = write_project(c, tmp_path / m.stem)
        bodies.append(re.sub(r"/\*.*?\*/", "", (out / "model.c").read_text(), flags=re.S))
        described.append(c.train.spec.describe())
    assert described[0] == described[1] == "conv4[8]: bias weights 32/64 ch, fc0[9]: bias weights"
    assert bodies[0] == bodies[1]


def test_fixtures_regenerate_identically(tmp_path):
    import importlib.util

    spec = importlib.util.spec_from_file_location("make_onnx_fixtures", ONNX_FIXTURES.parent / "make_onnx_fixtures.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    written = mod.main(tmp_path)
    assert {p.name for p in written.values()} == {p.name for p in ONNX_FIXTURES.glob("*.onnx")}
    for p in written.values():
        assert p.read_bytes() == (ONNX_FIXTURES / p.name).read_bytes(), f"{p.name} differs when regenerated"


@pytest.mark.parametrize("name", ["pools_qop_s8_pt", "matmul_add_relu_qop_u8_pc", "conv_3x3_relu_qdq_u8io",
                                  "small_cnn_qop_u8_pc", "small_cnn_qdq_s8io", "clip_narrow_qdq_s8_pc"])
def test_new_kernels_under_sanitizers(name, generated):
    """AVERAGE_POOL_REQUANT, ADD_CONST, REQUANTIZE, TRANSPOSE, the uint8 edges and the onnxruntime-numerics
    kernels (convolution, FC, average pool, mean, softmax, table lookup) built with ASan + UBSan."""
    from pockmcu.build import build_host_sanitized, run_host_sanitized

    gen = generated(ONNX_FIXTURES / f"{name}.onnx")
    xs = gen.inputs(4, seed=5)
    exe = build_host_sanitized(gen.out)
    data = b"".join(b"".join(np.ascontiguousarray(x[i]).tobytes() for x in xs) for i in range(4))
    want = load(gen.out).invoke(*xs)
    assert run_host_sanitized(exe, data) == want.tobytes()


@pytest.mark.parametrize("numerics", ["onnxruntime", "tflm"])
@pytest.mark.parametrize("name", ["mlperf_kws_dscnn_qdq", "flatten_gemm_qop_u8_pt"])
def test_training_in_both_numerics(name, numerics, tmp_path):
    """--train on an ONNX model in either numerics mode: three steps of the generated C end with the same
    parameters as the numpy training reference (whose forward pass is the same integer arithmetic)."""
    from pockmcu.codegen import write_project
    from pockmcu.compiler import TrainOptions, compile_model, parse_size
    from pockmcu.train import HostTrainer
    from pockmcu.training import params
    from pockmcu.training.reference import ReferenceTrainer

    model = SHARED / f"{name}.onnx" if name.startswith("mlperf") else ONNX_FIXTURES / f"{name}.onnx"
    split = ', {"layer": -2, "ratio": 0.5}' if name.startswith("mlperf") else ""   # KWS conv4: split storage
    spec = ('{"bias": {"last": 2}, "weights": [{"layer": -1, "ratio": 1.0}' + split + '], '
            '"optimizer": {"kind": "sgd", "lr": 0.05}}')
    loss = "xent" if name.startswith("mlperf") else "mse"
    c = compile_model(model, ram=parse_size("1MB"), train=TrainOptions(spec=spec, loss=loss), numerics=numerics)
    assert c.graph.numerics == numerics
    out = write_project(c, tmp_path / "out")
    g = c.graph
    x = g.t(g.inputs[0])
    xs = random_inputs(x.shape, x.np_dtype, 3, 9)
    out_t = g.t(g.outputs[0])
    rng = np.random.default_rng(9)
    ys = (rng.integers(0, out_t.shape[-1], 3).astype(np.int32) if loss == "xent"
          else rng.random((3,) + out_t.shape[1:]).astype(np.float32))
    host, ref = HostTrainer(out), ReferenceTrainer(c.train, seed=5)
    host.init(5)
    for i in range(3):
        host.step(xs[i], ys[i])
        ref.step(xs[i], ys[i])
    layout = params.entries(c.train)
    assert any(e["head"] for e in layout) == bool(split)
    got = params.expand(layout, host.params(), {t: g.t(t).data for t in c.train.trainable_tensors})
    for t, want in ref.params().items():
        np.testing.assert_array_equal(got[t], want, err_msg=t)


def test_float_softmax_rule_without_onnxruntime(monkeypatch):
    """Which Softmax nodes onnxruntime leaves in float (asked of onnxruntime) agrees, on every model here,
    with the rule the frontend falls back to when onnxruntime is not installed."""
    import builtins

    from pockmcu.frontend.onnx import ort_float_nodes
    from pockmcu.frontend.onnx import read_model as _read

    real_import = builtins.__import__

    def no_ort(name, *args, **kwargs):
        if name == "onnxruntime":
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    floats = 0
    for path in ALL:
        m = _read(path)
        softmax = {n.name for n in m.graph.node if n.op_type == "Softmax"}
        asked = ort_float_nodes(m) & softmax
        monkeypatch.setattr(builtins, "__import__", no_ort)
        rule = ort_float_nodes(m)
        monkeypatch.setattr(builtins, "__import__", real_import)
        assert asked == rule, path.name
        floats += len(asked)
    assert floats >= 4


@pytest.mark.parametrize("target", ["qemu-m3", "qemu-m55"])
@pytest.mark.parametrize("name", ["small_cnn_qop_u8_pc", "pools_qop_s8_pt"])
def test_qemu_other_cores_equal_host(name, target, generated):
    """The onnxruntime-numerics kernels (64-bit integer requantization, software float32 in pooling and softmax)
    on a core without an FPU (M3) and on Helium (M55)."""
    from pockmcu.runner import run_on_target

    gen = generated(ONNX_FIXTURES / f"{name}.onnx")
    xs = gen.inputs(3, seed=21)
    assert run_on_target(gen.out, target, *xs).tobytes() == load(gen.out).invoke(*xs).tobytes()


def test_numerics_flag(tmp_path):
    x = ONNX_FIXTURES / "conv_3x3_relu_qop_u8_pt.onnx"
    for numerics, kernels, kernel in (("tflm", "portable", "arm_convolve_wrapper_s8("),
                                      ("tflm", "auto", "pockmcu_convolve_s8_dsp("),   # default target: Cortex-M4
                                      ("onnxruntime", "portable", "pockmcu_convolve_ort_s8(")):
        out = tmp_path / f"{numerics}-{kernels}"
        r = pockmcu("gen", x, "--ram", "64KB", "-o", out, "--numerics", numerics, "--kernels", kernels)
        assert r.returncode == 0, r.stderr
        assert kernel in (out / "model.c").read_text()
    r = pockmcu("gen", x, "--ram", "64KB", "-o", tmp_path / "default", "--kernels", "auto")   # default numerics
    assert "pockmcu_convolve_ort_s8_dsp(" in (tmp_path / "default" / "model.c").read_text()
    r = pockmcu("gen", SHARED / "mlperf_kws_dscnn.tflite", "--ram", "256KB", "-o", tmp_path / "t", "--numerics",
                "onnxruntime")
    assert_clean_error(r, "--numerics onnxruntime", "tflm")
