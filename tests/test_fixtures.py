"""Checks of the generated TFLite fixtures in tests/fixtures/models.

* every fixture is declared in make_fixtures.py with its output shape/dtype and operators
  (``@variant``), and the written file has exactly those;
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

_OPNAMES = {v: k for k, v in vars(tflite.BuiltinOperator).items() if not k.startswith("_")}
_DTYPES = {tflite.TensorType.FLOAT32: "float32", tflite.TensorType.INT8: "int8",
           tflite.TensorType.INT16: "int16", tflite.TensorType.INT32: "int32",
           tflite.TensorType.INT64: "int64", tflite.TensorType.UINT8: "uint8"}


def _load_script():
    """tests/fixtures/make_fixtures.py as a module (its variants, their declarations)."""
    if "make_fixtures" in sys.modules:
        return sys.modules["make_fixtures"]
    spec = importlib.util.spec_from_file_location("make_fixtures", FIXTURES / "make_fixtures.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["make_fixtures"] = mod  # dataclasses look their module up here
    spec.loader.exec_module(mod)
    return mod


EXPECTED = _load_script().EXPECTED      # name -> (output shape, output dtype, operators in graph order)
GOOD = [n for n in EXPECTED if not n.startswith("bad_")]


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
    """The committed models are exactly the declared variants."""
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
