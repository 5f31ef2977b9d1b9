"""Checks of the bundled digits transfer-learning model (examples/digits).

    .venv/bin/python -m pytest examples/digits/tests

* the committed digits_0to4_int8.tflite is what make_digits.py regenerates;
* it loads and runs in TFLite Micro, with the promised graph and quantization;
* int8 (TFLM) accuracy on the 0-4 test split >= 95% and within 2 points of float;
* before fine-tuning it cannot classify 5-9;
* float fine-tuning of the last layer / the sparse set learns 5-9.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import tflite

HERE = Path(__file__).resolve().parents[1] / "examples" / "digits"
sys.path.insert(0, str(HERE))
import make_digits as md  # noqa: E402

MODEL = HERE / "digits_0to4_int8.tflite"


@pytest.fixture(scope="module")
def model_bytes() -> bytes:
    assert MODEL.is_file(), f"{MODEL} missing: run examples/digits/make_digits.py"
    return MODEL.read_bytes()


@pytest.fixture(scope="module")
def regenerated(tmp_path_factory):
    """Run the script (with its TFLM check) into a temporary file: (bytes, stdout)."""
    out = tmp_path_factory.mktemp("digits") / "digits.tflite"
    r = subprocess.run([sys.executable, str(HERE / "make_digits.py"), str(out)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    return out.read_bytes(), r.stdout


def test_regenerates_byte_identical(regenerated, model_bytes):
    assert regenerated[0] == model_bytes


def test_graph_and_quantization(model_bytes):
    m = tflite.Model.GetRootAsModel(model_bytes, 0)
    sg = m.Subgraphs(0)
    names = {v: k for k, v in vars(tflite.BuiltinOperator).items() if not k.startswith("_")}
    ops = [names[m.OperatorCodes(sg.Operators(i).OpcodeIndex()).BuiltinCode()]
           for i in range(sg.OperatorsLength())]
    assert ops == ["CONV_2D", "DEPTHWISE_CONV_2D", "CONV_2D", "CONV_2D", "AVERAGE_POOL_2D",
                   "RESHAPE", "FULLY_CONNECTED", "SOFTMAX"]
    t = md.read_tflite(model_bytes)
    prev = {"conv0": "input", "dwconv0": "conv0/out", "conv1": "dwconv0/out",
            "conv2": "conv1/out", "fc0": "reshape0/out"}
    for name, qdim, n in [("conv0", 0, 8), ("dwconv0", 3, 8), ("conv1", 0, 16), ("conv2", 0, 16),
                          ("fc0", 0, 1)]:
        w, ws, wz = t[f"{name}/weights"]
        b, bs, bz = t[f"{name}/bias"]
        assert w.dtype == np.int8 and len(ws) == n and not wz.any() and np.abs(w).max() == 127
        assert b.dtype == np.int32 and len(bs) == n   # scale input_scale * weight_scale[c]
        assert not bz.any()
        assert np.array_equal(bs, (t[prev[name]][1][0] * ws).astype(np.float32))
        qd = [sg.Tensors(i) for i in range(sg.TensorsLength())
              if sg.Tensors(i).Name().decode() == f"{name}/weights"][0]
        assert qd.Quantization().QuantizedDimension() == qdim
    # average pool and reshape keep conv2's quantization (TFLM requires it for the pool)
    s = {k: (float(v[1][0]), int(v[2][0])) for k, v in t.items() if k.endswith("/out")}
    assert s["avgpool0/out"] == s["conv2/out"] == s["reshape0/out"]
    assert s["softmax0/out"] == (1 / 256, -128)
    for name in ("conv0", "dwconv0", "conv1", "conv2"):  # fused ReLU: range starts at 0
        assert s[f"{name}/out"][1] == -128
    assert md.input_quantization(model_bytes) == (pytest.approx(1 / 255, rel=1e-5), -128)
    assert sum(v[0].size for k, v in t.items() if k.endswith(("/weights", "/bias"))) == 2794


def test_quantize_input_rounds_half_away_from_zero():
    x = np.array([-1.5, -0.5, 0.49, 0.5, 1.5, 300.0, -300.0], np.float32)
    assert md.quantize_input(x, 1.0, 0).tolist() == [-2, -1, 0, 1, 2, 127, -128]
    assert md.quantize_input(np.array([0.0, 1.0]), 1 / 255, -128).tolist() == [-128, 127]


def test_load_split():
    x_tr, y_tr, x_te, y_te = md.load_split(md.FINETUNE_DIGITS)
    assert x_tr.dtype == np.float32 and x_tr.shape[1:] == (8, 8, 1) and y_tr.dtype == np.int64
    assert 0.0 <= x_tr.min() and x_tr.max() <= 1.0
    assert set(y_tr) == set(y_te) == {5, 6, 7, 8, 9}
    assert abs(len(x_te) / (len(x_tr) + len(x_te)) - 0.3) < 0.01
    again = md.load_split(md.FINETUNE_DIGITS)
    assert all(np.array_equal(a, b) for a, b in zip(again, (x_tr, y_tr, x_te, y_te)))


def test_loads_in_tflm(model_bytes):
    y = md.tflm_predict(model_bytes, md.load_split(md.PRETRAIN_DIGITS)[2][:3])
    assert y.shape == (3, 10) and y.dtype == np.int8


def test_int8_accuracy_on_0to4_close_to_float(regenerated, model_bytes):
    # the float accuracy is the pretrained float model's, printed by the script
    m = re.search(r"digits 0-4 test: float ([0-9.]+)", regenerated[1])
    f = float(m.group(1))
    _, _, x, y = md.load_split(md.PRETRAIN_DIGITS)
    q = md.tflm_accuracy(model_bytes, x, y)
    print(f"digits 0-4 test: float {f:.4f}, int8 TFLM {q:.4f}")   # measured: 0.9852, 0.9852
    assert q >= 0.95
    assert abs(q - f) <= 0.02


def test_5to9_unknown_before_fine_tuning(model_bytes):
    _, _, x, y = md.load_split(md.FINETUNE_DIGITS)
    assert md.tflm_accuracy(model_bytes, x, y) < 0.20


def test_float_fine_tuning_last_layer():
    r = md.float_finetune("last", **md.FINETUNE_DEFAULTS["last"], seed=0)
    print("float fine-tuning, last:", r)   # measured: test 0.885, train 0.906
    assert r["test_acc"] >= 0.85


def test_float_fine_tuning_sparse():
    r = md.float_finetune("sparse", **md.FINETUNE_DEFAULTS["sparse"], seed=0)
    print("float fine-tuning, sparse:", r)   # measured: test 0.959, train 0.981
    assert r["test_acc"] >= 0.93


def test_float_finetune_rejects_unknown_set():
    with pytest.raises(ValueError):
        md.float_finetune("everything", 1, 0.01, 0)
