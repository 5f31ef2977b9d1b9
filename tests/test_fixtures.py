"""Checks of the generated TFLite fixtures in tests/fixtures/models.

* every fixture is listed here with its output shape/dtype and operators;
* every non-bad fixture loads and runs in the TFLite Micro interpreter;
* regenerating with tests/fixtures/make_fixtures.py gives identical bytes;
* names and quantization follow the conventions the script promises.
"""

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest
import tflite

FIXTURES = Path(__file__).resolve().parent / "fixtures"
MODELS = FIXTURES / "models"

# name -> (output shape, output dtype, operators in graph order)
EXPECTED = {
    "conv_3x3_s1_same_relu": ((1, 8, 8, 8), "int8", ["CONV_2D"]),
    "conv_5x3_s2_same_relu6": ((1, 5, 4, 6), "int8", ["CONV_2D"]),
    "conv_3x3_dil2_valid_pertensor": ((1, 6, 6, 5), "int8", ["CONV_2D"]),
    "conv_1x1_s1_valid": ((1, 8, 8, 6), "int8", ["CONV_2D"]),
    "conv_3x2_s2x1_same": ((1, 5, 8, 4), "int8", ["CONV_2D"]),
    "conv_dil2x1_same": ((1, 8, 8, 5), "int8", ["CONV_2D"]),
    "dwconv_3x3_s1_same_relu": ((1, 8, 8, 6), "int8", ["DEPTHWISE_CONV_2D"]),
    "dwconv_3x3_s2_same_mult2_relu6": ((1, 5, 5, 8), "int8", ["DEPTHWISE_CONV_2D"]),
    "dwconv_3x3_dil2_valid_pertensor": ((1, 6, 6, 4), "int8", ["DEPTHWISE_CONV_2D"]),
    "dwconv_mult8_1ch": ((1, 8, 8, 8), "int8", ["DEPTHWISE_CONV_2D"]),
    "dwconv_5x1_valid": ((1, 12, 1, 6), "int8", ["DEPTHWISE_CONV_2D"]),
    "fc_relu": ((1, 8), "int8", ["FULLY_CONNECTED"]),
    "fc_none": ((1, 5), "int8", ["FULLY_CONNECTED"]),
    "fc_4d_input": ((1, 6), "int8", ["FULLY_CONNECTED"]),
    "fc_perchannel": ((1, 7), "int8", ["FULLY_CONNECTED"]),
    "avgpool_2x2_s2_valid": ((1, 4, 4, 4), "int8", ["AVERAGE_POOL_2D"]),
    "avgpool_3x3_s1_same": ((1, 7, 6, 3), "int8", ["AVERAGE_POOL_2D"]),
    "avgpool_global": ((1, 1, 1, 8), "int8", ["AVERAGE_POOL_2D"]),
    "maxpool_2x2_s2_valid": ((1, 4, 4, 4), "int8", ["MAX_POOL_2D"]),
    "maxpool_3x3_s2_same_relu": ((1, 5, 5, 3), "int8", ["MAX_POOL_2D"]),
    "add_diff_scales": ((1, 6, 6, 4), "int8", ["ADD"]),
    "add_residual_relu": ((1, 8, 8, 4), "int8", ["CONV_2D", "ADD"]),
    "mean_spatial_keepdims": ((1, 1, 1, 5), "int8", ["MEAN"]),
    "mean_spatial_nokeep": ((1, 6), "int8", ["MEAN"]),
    "mean_same_quant": ((1, 8), "int8", ["MEAN"]),
    "pad_spatial": ((1, 9, 9, 3), "int8", ["PAD"]),
    "pad_channels": ((1, 4, 4, 6), "int8", ["PAD"]),
    "padv2_value": ((1, 8, 7, 3), "int8", ["PADV2"]),
    "reshape_flatten": ((1, 48), "int8", ["RESHAPE"]),
    "softmax_basic": ((1, 10), "int8", ["SOFTMAX"]),
    "softmax_beta": ((1, 16), "int8", ["SOFTMAX"]),
    "logistic": ((1, 4, 4, 3), "int8", ["LOGISTIC"]),
    "quant_float_io": ((1, 4), "float32", ["QUANTIZE", "FULLY_CONNECTED", "DEQUANTIZE"]),
    "concat_channels": ((1, 8, 8, 8), "int8", ["CONV_2D", "CONV_2D", "CONCATENATION"]),
    "concat_axis1": ((1, 8, 6, 3), "int8", ["MAX_POOL_2D", "CONCATENATION"]),
    "keras_flatten": ((1, 5), "int8", ["CONV_2D", "SHAPE", "STRIDED_SLICE", "PACK",
                                        "RESHAPE", "FULLY_CONNECTED"]),
    "small_cnn": ((1, 10), "int8", ["CONV_2D", "DEPTHWISE_CONV_2D", "CONV_2D", "ADD",
                                    "CONV_2D", "CONV_2D", "AVERAGE_POOL_2D", "MEAN",
                                    "FULLY_CONNECTED", "SOFTMAX"]),
    "train_mixed": ((1, 5), "int8", ["CONV_2D", "PAD", "MAX_POOL_2D", "CONV_2D", "DEPTHWISE_CONV_2D", "CONV_2D",
                                     "CONCATENATION", "MEAN", "RESHAPE", "FULLY_CONNECTED", "SOFTMAX"]),
    "bad_float32": ((1, 8, 8, 4), "float32", ["CONV_2D"]),
    "bad_int16": ((1, 8), "int16", ["FULLY_CONNECTED"]),
    "bad_unsupported_op": ((1, 8), "int8", ["FULLY_CONNECTED", "TANH"]),
}
GOOD = [n for n in EXPECTED if not n.startswith("bad_")]

_OPNAMES = {v: k for k, v in vars(tflite.BuiltinOperator).items() if not k.startswith("_")}
_DTYPES = {tflite.TensorType.FLOAT32: "float32", tflite.TensorType.INT8: "int8",
           tflite.TensorType.INT16: "int16", tflite.TensorType.INT32: "int32",
           tflite.TensorType.INT64: "int64"}


def _load_script():
    if "make_fixtures" in sys.modules:
        return sys.modules["make_fixtures"]
    spec = importlib.util.spec_from_file_location("make_fixtures", FIXTURES / "make_fixtures.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["make_fixtures"] = mod  # dataclasses look their module up here
    spec.loader.exec_module(mod)
    return mod


def _read(name):
    buf = (MODELS / f"{name}.tflite").read_bytes()
    return buf, tflite.Model.GetRootAsModel(buf, 0)


def _tensors(model):
    g = model.Subgraphs(0)
    out = []
    for i in range(g.TensorsLength()):
        t = g.Tensors(i)
        q = t.Quantization()
        has_q = q is not None and q.ScaleLength() > 0
        out.append(dict(
            name=t.Name().decode(),
            shape=tuple(int(d) for d in t.ShapeAsNumpy()) if t.ShapeLength() else (),
            dtype=_DTYPES[t.Type()],
            const=model.Buffers(t.Buffer()).DataLength() > 0,
            scale=q.ScaleAsNumpy().astype(np.float64) if has_q else None,
            zp=q.ZeroPointAsNumpy() if has_q else None,
            qdim=q.QuantizedDimension() if has_q else None))
    return out


def _ops(model):
    g = model.Subgraphs(0)
    ops = []
    for i in range(g.OperatorsLength()):
        op = g.Operators(i)
        oc = model.OperatorCodes(op.OpcodeIndex())
        code = max(oc.BuiltinCode(), oc.DeprecatedBuiltinCode())
        ops.append((_OPNAMES[code], [int(x) for x in op.InputsAsNumpy()],
                    [int(x) for x in op.OutputsAsNumpy()]))
    return ops


def test_fixture_set_matches():
    script = _load_script()
    assert list(script.VARIANTS) == list(EXPECTED)
    assert sorted(p.stem for p in MODELS.glob("*.tflite")) == sorted(EXPECTED)


@pytest.mark.parametrize("name", GOOD)
def test_runs_in_tflm(name):
    runtime = __import__("tflite_micro.python.tflite_micro.runtime", fromlist=["runtime"])
    buf, model = _read(name)
    g = model.Subgraphs(0)
    it = runtime.Interpreter.from_bytes(buf, arena_size=256 * 1024)
    rng = np.random.default_rng(1234)
    for i in range(g.InputsLength()):
        d = it.get_input_details(i)
        shape = tuple(int(s) for s in d["shape"])
        if np.dtype(d["dtype"]) == np.float32:
            x = rng.uniform(-2.0, 2.0, size=shape).astype(np.float32)
        else:
            info = np.iinfo(d["dtype"])
            x = rng.integers(info.min, info.max + 1, size=shape).astype(d["dtype"])
        it.set_input(x, i)
    it.invoke()
    y = it.get_output(0)
    shape, dtype, _ = EXPECTED[name]
    assert tuple(y.shape) == shape
    assert y.dtype == np.dtype(dtype)
    if dtype == "int8":
        assert len(np.unique(y)) > 1 or y.size == 1


def test_regenerate_identical(tmp_path):
    script = _load_script()
    script.main(tmp_path, check=False)
    for name in EXPECTED:
        new = (tmp_path / f"{name}.tflite").read_bytes()
        old = (MODELS / f"{name}.tflite").read_bytes()
        assert new == old, f"{name}.tflite differs from a fresh generation; rerun make_fixtures.py"


@pytest.mark.parametrize("name", list(EXPECTED))
def test_structure_and_names(name):
    buf, model = _read(name)
    assert tflite.Model.ModelBufferHasIdentifier(buf, 0)  # "TFL3"
    assert model.Version() == 3 and model.SubgraphsLength() == 1
    g = model.Subgraphs(0)
    tensors, ops = _tensors(model), _ops(model)
    shape, dtype, opnames = EXPECTED[name]
    assert [o[0] for o in ops] == opnames
    assert g.OutputsLength() == 1
    out = tensors[g.Outputs(0)]
    assert (out["shape"], out["dtype"]) == (shape, dtype)

    names = [t["name"] for t in tensors]
    assert all(n and n.isascii() and " " not in n for n in names)
    assert len(set(names)) == len(names)
    # operators carry their name through their output tensor "<op>/out"
    op_names = [tensors[o[2][0]]["name"] for o in ops]
    assert all(n.endswith("/out") for n in op_names)
    assert len(set(op_names)) == len(op_names)
    for i in range(g.InputsLength()):
        assert not tensors[g.Inputs(i)]["const"]


@pytest.mark.parametrize("name", [n for n in EXPECTED if n != "bad_float32"])
def test_quantization_conventions(name):
    _, model = _read(name)
    tensors, ops = _tensors(model), _ops(model)
    for opname, ins, outs in ops:
        for t in (tensors[i] for i in ins + outs if i >= 0):
            if t["dtype"] in ("int8", "int16") and not t["const"]:
                assert t["scale"] is not None and len(t["scale"]) == 1, t["name"]
                if t["dtype"] == "int16":
                    assert t["zp"][0] == 0
        if opname in ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED"):
            x, w, b = (tensors[i] for i in ins)
            assert w["const"] and w["dtype"] == "int8" and np.all(w["zp"] == 0)
            n_out = w["shape"][3 if opname == "DEPTHWISE_CONV_2D" else 0]
            if len(w["scale"]) > 1:
                assert len(w["scale"]) == n_out
                assert w["qdim"] == (3 if opname == "DEPTHWISE_CONV_2D" else 0)
            assert b["const"] and b["dtype"] == ("int64" if x["dtype"] == "int16" else "int32")
            assert b["shape"] == (n_out,) and np.all(b["zp"] == 0)
            np.testing.assert_allclose(b["scale"], x["scale"][0] * w["scale"], rtol=1e-6)
