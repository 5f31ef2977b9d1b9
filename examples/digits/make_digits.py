#!/usr/bin/env python3
"""Transfer-learning example: a small int8 CNN for scikit-learn's 8x8 digits.

    python examples/digits/make_digits.py [OUT.tflite] [--no-check]

Pretrains a small float CNN (PyTorch, CPU, seeded) on digits 0-4 of
``sklearn.datasets.load_digits``, quantizes it to int8 post-training and
writes ``digits_0to4_int8.tflite`` with the flatbuffers builder of
tests/fixtures/make_fixtures.py (no TensorFlow). The model has a 10-way head;
fine-tuning on the device then teaches it digits 5-9.

Deterministic: seeded torch on one thread with deterministic algorithms, so
running the script twice writes a byte-identical file (on the same machine /
torch build).

Importable API (used by the tests and as the float reference for on-device
training):

* ``load_split(digits, seed=0)`` -> x_train, y_train, x_test, y_test
* ``quantize_input(x, scale, zero_point)`` -> int8, as TFLite quantizes
* ``float_finetune(params, epochs, lr, seed)`` -> {"test_acc", "train_acc"}
* ``tflm_accuracy(model_bytes, x, y)`` -> accuracy of the int8 model in TFLM

Graph (operator order; tensor names ``<op>/weights``, ``<op>/bias``, ``<op>/out``):

    input  [1,8,8,1]  int8, scale 1/255, zero point -128 (pixel/16 in [0,1])
    conv0    CONV_2D 3x3 s1 SAME, 1->8, RELU             [1,8,8,8]
    dwconv0  DEPTHWISE_CONV_2D 3x3 s2 SAME, 8, RELU      [1,4,4,8]
    conv1    CONV_2D 1x1 s1, 8->16, RELU                 [1,4,4,16]
    conv2    CONV_2D 3x3 s2 SAME, 16->16, RELU           [1,2,2,16]
    avgpool0 AVERAGE_POOL_2D 2x2 s2 VALID (global)       [1,1,1,16]
    reshape0 RESHAPE                                     [1,16]
    fc0      FULLY_CONNECTED 16->10 (per-tensor weights) [1,10]
    softmax0 SOFTMAX, output scale 1/256, zero point -128 [1,10]

Operator names follow pockmcu's own naming (<kind><k-th of that kind>), so
pockmcu's op names equal the tensor-name prefixes here.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import numpy as np
import tflite

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
MODEL_PATH = HERE / "digits_0to4_int8.tflite"

sys.path.insert(0, str(ROOT / "tests" / "fixtures"))
from make_fixtures import TFLiteBuilder, qparams_from_range  # noqa: E402

PRETRAIN_DIGITS = (0, 1, 2, 3, 4)
FINETUNE_DIGITS = (5, 6, 7, 8, 9)
SEED = 0

# Parameterized layers in model order (index over CONV_2D, DEPTHWISE_CONV_2D,
# FULLY_CONNECTED): 0 conv0, 1 dwconv0, 2 conv1, 3 conv2, 4 fc0.
LAYERS = ("conv0", "dwconv0", "conv1", "conv2", "fc0")

# Parameter sets for fine-tuning: names of torch parameters "<layer>.weight|bias".
PARAM_SETS = {
    "full": [f"{l}.{p}" for l in LAYERS for p in ("weight", "bias")],
    "last": ["fc0.weight", "fc0.bias"],
    "bias": [f"{l}.bias" for l in LAYERS],
    "sparse": ["fc0.weight", "fc0.bias", "conv1.bias", "conv2.bias", "conv2.weight"],
}

# Epochs / learning rate of the float fine-tuning reference (plain SGD, batch 1,
# cross-entropy): per set the best mean train accuracy over fine-tuning seeds
# 0-2 on the grid lr in {0.001, 0.003, 0.01, 0.03} x epochs in {5, 10}.
FINETUNE_DEFAULTS = {
    "full": dict(epochs=10, lr=0.03),
    "last": dict(epochs=10, lr=0.001),
    "bias": dict(epochs=10, lr=0.01),
    "sparse": dict(epochs=10, lr=0.03),
}


# --------------------------------------------------------------------------
# Data
# --------------------------------------------------------------------------

def load_split(digits, seed: int = 0):
    """Images of the given digit classes from sklearn's load_digits, split
    stratified 70/30 with ``seed``. x: float32 [N,8,8,1] in [0,1] (pixel/16);
    y: int64, the true digit (0..9)."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    d = load_digits()
    keep = np.isin(d.target, list(digits))
    x = (d.images[keep].astype(np.float32) / np.float32(16.0)).reshape(-1, 8, 8, 1)
    y = d.target[keep].astype(np.int64)
    x_tr, x_te, y_tr, y_te = train_test_split(x, y, test_size=0.3, stratify=y,
                                              random_state=seed)
    return (np.ascontiguousarray(x_tr, np.float32), y_tr.astype(np.int64),
            np.ascontiguousarray(x_te, np.float32), y_te.astype(np.int64))


def quantize_input(x, scale, zero_point) -> np.ndarray:
    """float -> int8 as TFLite does: round half away from zero of x/scale
    (float32 arithmetic), plus the zero point, clamped to [-128, 127]."""
    v = np.asarray(x, np.float32) / np.float32(scale)
    r = np.sign(v) * np.floor(np.abs(v) + np.float32(0.5))
    return np.clip(r + int(zero_point), -128, 127).astype(np.int8)


# --------------------------------------------------------------------------
# Float model (PyTorch)
# --------------------------------------------------------------------------

def _torch():
    import torch
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    return torch


def build_model():
    """The float CNN. NCHW inside torch; the stride-2 convolutions pad
    bottom/right only, which is TensorFlow's SAME for an even input."""
    torch = _torch()
    nn, F = torch.nn, torch.nn.functional

    class DigitsCNN(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv0 = nn.Conv2d(1, 8, 3, padding=1)
            self.dwconv0 = nn.Conv2d(8, 8, 3, stride=2, groups=8)
            self.conv1 = nn.Conv2d(8, 16, 1)
            self.conv2 = nn.Conv2d(16, 16, 3, stride=2)
            self.fc0 = nn.Linear(16, 10)

        def features(self, x):  # x: NHWC float
            x = x.permute(0, 3, 1, 2)
            acts = {}
            x = acts["conv0"] = F.relu(self.conv0(x))
            x = acts["dwconv0"] = F.relu(self.dwconv0(F.pad(x, (0, 1, 0, 1))))
            x = acts["conv1"] = F.relu(self.conv1(x))
            x = acts["conv2"] = F.relu(self.conv2(F.pad(x, (0, 1, 0, 1))))
            return x.mean(dim=(2, 3)), acts

        def forward(self, x):  # logits
            return self.fc0(self.features(x)[0])

    return DigitsCNN()


def _accuracy(model, x, y) -> float:
    torch = _torch()
    with torch.no_grad():
        pred = model(torch.from_numpy(x)).argmax(1).numpy()
    return float(np.mean(pred == y))


def pretrain(seed: int = SEED, epochs: int = 100, lr: float = 0.003, batch: int = 32):
    """Float pretraining on digits 0-4: Adam, cross-entropy over the logits of
    classes 0-4 only. The head rows of classes 5-9 start at zero and get no
    gradient, so they stay zero (logits 0) until fine-tuning; training the
    0-4 rows against them would drive the features that 5-9 need to zero
    (dead ReLU channels) and make the model transfer worse."""
    torch = _torch()
    torch.manual_seed(seed)
    model = build_model()
    with torch.no_grad():
        model.fc0.weight[len(PRETRAIN_DIGITS):] = 0.0
        model.fc0.bias[len(PRETRAIN_DIGITS):] = 0.0
    x_tr, y_tr, _, _ = load_split(PRETRAIN_DIGITS, seed)
    xt, yt = torch.from_numpy(x_tr), torch.from_numpy(y_tr)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    gen = torch.Generator().manual_seed(seed)
    for _ in range(epochs):
        perm = torch.randperm(len(xt), generator=gen)
        for i in range(0, len(xt), batch):
            idx = perm[i:i + batch]
            logits = model(xt[idx])[:, :len(PRETRAIN_DIGITS)]
            loss = torch.nn.functional.cross_entropy(logits, yt[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
    model.eval()
    return model


# --------------------------------------------------------------------------
# Post-training int8 quantization
# --------------------------------------------------------------------------

def _f32(v) -> float:
    return float(np.float32(v))


def _sym_quant(w: np.ndarray, axis: int | None):
    """Symmetric int8 weights, per channel along ``axis`` (None: per tensor)."""
    if axis is None:
        amax = np.array([np.max(np.abs(w))])
        shape = [1] * w.ndim
    else:
        amax = np.max(np.abs(w), axis=tuple(a for a in range(w.ndim) if a != axis))
        shape = [1] * w.ndim
        shape[axis] = -1
    scales = np.array([_f32(max(float(a), 1e-8) / 127.0) for a in amax], np.float32)
    q = np.clip(np.round(w.astype(np.float64) / scales.astype(np.float64).reshape(shape)),
                -127, 127).astype(np.int8)
    return q, scales


def _dequant(q: np.ndarray, scales: np.ndarray, axis: int | None) -> np.ndarray:
    shape = [-1 if a == axis else 1 for a in range(q.ndim)]
    return (q.astype(np.float32) * np.asarray(scales, np.float32).reshape(shape)).astype(np.float32)


def _tflite_weights(model) -> dict:
    """Float weights in TFLite layouts: CONV_2D OHWI, DEPTHWISE 1HWC, FC [out, in]."""
    sd = {k: v.detach().numpy().astype(np.float32) for k, v in model.state_dict().items()}
    return {
        "conv0": (sd["conv0.weight"].transpose(0, 2, 3, 1), sd["conv0.bias"]),
        "dwconv0": (sd["dwconv0.weight"].transpose(1, 2, 3, 0), sd["dwconv0.bias"]),
        "conv1": (sd["conv1.weight"].transpose(0, 2, 3, 1), sd["conv1.bias"]),
        "conv2": (sd["conv2.weight"].transpose(0, 2, 3, 1), sd["conv2.bias"]),
        "fc0": (sd["fc0.weight"], sd["fc0.bias"]),
    }


def _load_tflite_weights(model, weights: dict) -> None:
    """Inverse of _tflite_weights: copy TFLite-layout float weights into the model."""
    torch = _torch()
    to_torch = {"conv0": (0, 3, 1, 2), "dwconv0": (3, 0, 1, 2), "conv1": (0, 3, 1, 2),
                "conv2": (0, 3, 1, 2), "fc0": (0, 1)}
    with torch.no_grad():
        for name, (w, b) in weights.items():
            layer = getattr(model, name)
            layer.weight.copy_(torch.from_numpy(np.ascontiguousarray(
                np.transpose(w, to_torch[name]), np.float32)))
            layer.bias.copy_(torch.from_numpy(np.asarray(b, np.float32)))


def quantize(model) -> bytes:
    """Post-training int8 quantization of the pretrained model -> .tflite bytes.

    Weights: symmetric int8, per channel for CONV_2D (dim 0) and
    DEPTHWISE_CONV_2D (dim 3), per tensor for FULLY_CONNECTED. Biases: int32,
    scale input_scale * weight_scale[c]. Activations: asymmetric int8 from the
    min/max of the float model (with the int8 weights) on the training images
    of digits 0-4 AND 5-9, so the ranges also suit fine-tuning on 5-9."""
    torch = _torch()
    fw = _tflite_weights(model)
    qw = {}
    axes = {"conv0": 0, "dwconv0": 3, "conv1": 0, "conv2": 0, "fc0": None}
    for name, (w, _) in fw.items():
        qw[name] = _sym_quant(w, axes[name])

    # Calibrate with the weights as they will be stored.
    calib = build_model()
    _load_tflite_weights(calib, {n: (_dequant(q, s, axes[n]), fw[n][1])
                                 for n, (q, s) in qw.items()})
    calib.eval()
    x_cal = np.concatenate([load_split(PRETRAIN_DIGITS, SEED)[0],
                            load_split(FINETUNE_DIGITS, SEED)[0]])
    with torch.no_grad():
        feat, acts = calib.features(torch.from_numpy(x_cal))
        acts = {k: v.numpy() for k, v in acts.items()}
        acts["fc0"] = calib.fc0(feat).numpy()

    in_s, in_zp = qparams_from_range(0.0, 1.0)
    act_q = {n: qparams_from_range(float(acts[n].min()), float(acts[n].max())) for n in LAYERS}

    fb = TFLiteBuilder("pockmcu example: digits 0-4 CNN, int8 post-training quantized "
                       "(examples/digits/make_digits.py)")
    x = fb.add_tensor("input", (1, 8, 8, 1), "int8", [in_s], [in_zp])
    prev_s, prev_zp = in_s, in_zp
    shapes = {"conv0": (1, 8, 8, 8), "dwconv0": (1, 4, 4, 8), "conv1": (1, 4, 4, 16),
              "conv2": (1, 2, 2, 16), "fc0": (1, 10)}
    relu = tflite.ActivationFunctionType.RELU
    opts = {
        "conv0": ("CONV_2D", "Conv2DOptions", dict(
            Padding=tflite.Padding.SAME, StrideH=1, StrideW=1, DilationHFactor=1,
            DilationWFactor=1, FusedActivationFunction=relu)),
        "dwconv0": ("DEPTHWISE_CONV_2D", "DepthwiseConv2DOptions", dict(
            Padding=tflite.Padding.SAME, StrideH=2, StrideW=2, DepthMultiplier=1,
            DilationHFactor=1, DilationWFactor=1, FusedActivationFunction=relu)),
        "conv1": ("CONV_2D", "Conv2DOptions", dict(
            Padding=tflite.Padding.VALID, StrideH=1, StrideW=1, DilationHFactor=1,
            DilationWFactor=1, FusedActivationFunction=relu)),
        "conv2": ("CONV_2D", "Conv2DOptions", dict(
            Padding=tflite.Padding.SAME, StrideH=2, StrideW=2, DilationHFactor=1,
            DilationWFactor=1, FusedActivationFunction=relu)),
        "fc0": ("FULLY_CONNECTED", "FullyConnectedOptions", dict(
            FusedActivationFunction=tflite.ActivationFunctionType.NONE, KeepNumDims=False)),
    }
    for name in LAYERS:
        if name == "fc0":  # global average pool + flatten before the classifier
            p = fb.add_tensor("avgpool0/out", (1, 1, 1, 16), "int8", [prev_s], [prev_zp])
            fb.add_op("AVERAGE_POOL_2D", [x], [p], "Pool2DOptions", dict(
                Padding=tflite.Padding.VALID, StrideH=2, StrideW=2, FilterHeight=2,
                FilterWidth=2, FusedActivationFunction=tflite.ActivationFunctionType.NONE))
            shp = fb.add_tensor("reshape0/shape", (2,), "int32", data=[1, 16])
            x = fb.add_tensor("reshape0/out", (1, 16), "int8", [prev_s], [prev_zp])
            fb.add_op("RESHAPE", [p, shp], [x])
        q, ws = qw[name]
        bs = np.array([_f32(prev_s * s) for s in ws], np.float32)
        bq = np.round(fw[name][1].astype(np.float64) / bs.astype(np.float64))
        bq = np.clip(bq, -2**31, 2**31 - 1).astype(np.int32)
        qdim = axes[name] or 0
        wt = fb.add_tensor(f"{name}/weights", q.shape, "int8", list(ws), [0] * len(ws),
                           quantized_dimension=qdim, data=q)
        bt = fb.add_tensor(f"{name}/bias", bq.shape, "int32", list(bs), [0] * len(bs),
                           quantized_dimension=0, data=bq)
        out_s, out_zp = act_q[name]
        y = fb.add_tensor(f"{name}/out", shapes[name], "int8", [out_s], [out_zp])
        opcode, otype, o = opts[name]
        fb.add_op(opcode, [x, wt, bt], [y], otype, o)
        x, prev_s, prev_zp = y, out_s, out_zp
    sm = fb.add_tensor("softmax0/out", (1, 10), "int8", [1.0 / 256], [-128])
    fb.add_op("SOFTMAX", [x], [sm], "SoftmaxOptions", dict(Beta=1.0))
    fb.set_io([fb.index("input")], [sm])
    return fb.serialize()


# --------------------------------------------------------------------------
# Reading the int8 model back
# --------------------------------------------------------------------------

def read_tflite(model_bytes: bytes) -> dict:
    """name -> (int array or None, scale array or None, zero point array or None)."""
    m = tflite.Model.GetRootAsModel(model_bytes, 0)
    sg = m.Subgraphs(0)
    np_types = {tflite.TensorType.INT8: np.int8, tflite.TensorType.INT32: np.int32,
                tflite.TensorType.FLOAT32: np.float32}
    out = {}
    for i in range(sg.TensorsLength()):
        t = sg.Tensors(i)
        name = t.Name().decode()
        buf = m.Buffers(t.Buffer())
        data = None
        if buf is not None and buf.DataLength() > 0:
            data = np.frombuffer(buf.DataAsNumpy().tobytes(), np_types[t.Type()]).reshape(
                t.ShapeAsNumpy())
        q = t.Quantization()
        scale = zp = None
        if q is not None and q.ScaleLength() > 0:
            scale, zp = q.ScaleAsNumpy().copy(), q.ZeroPointAsNumpy().copy()
        out[name] = (data, scale, zp)
    return out


def dequantized_weights(model_bytes: bytes) -> dict:
    """Float (TFLite-layout) weights and biases dequantized from the int8 model."""
    t = read_tflite(model_bytes)
    res = {}
    for name in LAYERS:
        wq, ws, _ = t[f"{name}/weights"]
        bq, bs, _ = t[f"{name}/bias"]
        axis = (3 if name == "dwconv0" else 0) if len(ws) > 1 else None
        res[name] = (_dequant(wq, ws, axis), (bq.astype(np.float64) * bs).astype(np.float32))
    return res


def input_quantization(model_bytes: bytes):
    _, s, z = read_tflite(model_bytes)["input"]
    return float(s[0]), int(z[0])


def float_model_from_tflite(model_bytes: bytes):
    model = build_model()
    _load_tflite_weights(model, dequantized_weights(model_bytes))
    model.eval()
    return model


def tflm_predict(model_bytes: bytes, x: np.ndarray) -> np.ndarray:
    """int8 outputs [N,10] of the model in the TFLite Micro interpreter."""
    from tflite_micro.python.tflite_micro import runtime
    s, z = input_quantization(model_bytes)
    xq = quantize_input(x, s, z)
    it = runtime.Interpreter.from_bytes(model_bytes, arena_size=64 * 1024)
    outs = []
    for i in range(len(xq)):
        it.set_input(xq[i:i + 1], 0)
        it.invoke()
        outs.append(np.array(it.get_output(0)).reshape(-1))
    return np.stack(outs)


def tflm_accuracy(model_bytes: bytes, x: np.ndarray, y: np.ndarray) -> float:
    return float(np.mean(tflm_predict(model_bytes, x).argmax(1) == y))


# --------------------------------------------------------------------------
# Float fine-tuning reference
# --------------------------------------------------------------------------

def float_finetune(params: str, epochs: int, lr: float, seed: int,
                   model_path: str | os.PathLike = MODEL_PATH) -> dict:
    """Fine-tune the float model dequantized from the int8 .tflite on the 5-9
    train split: plain SGD, batch 1, cross-entropy on the 10-way logits,
    training only the parameter set ``params`` ("full", "last", "bias",
    "sparse"; see PARAM_SETS). Samples are visited in a fresh random order
    each epoch (torch.randperm seeded with ``seed``). Returns the 10-way
    argmax accuracy of the float forward on the 5-9 test and train splits."""
    torch = _torch()
    if params not in PARAM_SETS:
        raise ValueError(f"params must be one of {sorted(PARAM_SETS)}, not {params!r}")
    torch.manual_seed(seed)
    model = float_model_from_tflite(Path(model_path).read_bytes())
    train = set(PARAM_SETS[params])
    for n, p in model.named_parameters():
        p.requires_grad_(n in train)
    opt = torch.optim.SGD([p for n, p in model.named_parameters() if n in train], lr=lr)
    x_tr, y_tr, x_te, y_te = load_split(FINETUNE_DIGITS, seed=SEED)
    xt, yt = torch.from_numpy(x_tr), torch.from_numpy(y_tr)
    gen = torch.Generator().manual_seed(seed)
    for _ in range(epochs):
        for i in torch.randperm(len(xt), generator=gen).tolist():
            loss = torch.nn.functional.cross_entropy(model(xt[i:i + 1]), yt[i:i + 1])
            opt.zero_grad()
            loss.backward()
            opt.step()
    return {"test_acc": _accuracy(model, x_te, y_te), "train_acc": _accuracy(model, x_tr, y_tr)}


# --------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------

def make_model() -> tuple[bytes, object]:
    """Pretrain and quantize; returns (.tflite bytes, float torch model)."""
    model = pretrain()
    return quantize(model), model


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", nargs="?", default=str(MODEL_PATH))
    ap.add_argument("--no-check", action="store_true",
                    help="skip the TFLite Micro accuracy check")
    args = ap.parse_args(argv)
    data, model = make_model()
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_bytes(data)
    print(f"wrote {args.out} ({len(data)} bytes)")
    if args.no_check:
        return 0
    _, _, x04, y04 = load_split(PRETRAIN_DIGITS, SEED)
    _, _, x59, y59 = load_split(FINETUNE_DIGITS, SEED)
    f04, q04 = _accuracy(model, x04, y04), tflm_accuracy(data, x04, y04)
    f59, q59 = _accuracy(model, x59, y59), tflm_accuracy(data, x59, y59)
    print(f"digits 0-4 test: float {f04:.4f}  int8 (TFLM) {q04:.4f}")
    print(f"digits 5-9 test (before fine-tuning): float {f59:.4f}  int8 (TFLM) {q59:.4f}")
    if abs(f04 - q04) > 0.02 or q04 < 0.95:
        print("FAIL: int8 accuracy on 0-4 is not within 2 points of float / below 95%")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
