"""Transfer learning on a public zoo model: STMicroelectronics' ST MNIST v1 (the corpus model
``st_ic_stmnist_emnist``: EMNIST handwritten digits and letters, 36 classes; uint8 image in,
QUANTIZE ... SOFTMAX -> DEQUANTIZE, float32 probabilities out) fine-tuned by the generated C to a new
class split of a dataset a Python package ships: scikit-learn's ``load_digits`` (1,797 scanned 8x8
digits, UCI "optical recognition of handwritten digits"), relabelled even (0) / odd (1).

    python -m pockmcu.zoo_transfer [--into BENCHMARKS.md] [--epochs N] [--n-train N]

Data: every 8x8 image (pixel / 16) is resized bilinearly to 20x20 and centred in 28x28 with a
4-pixel border, MNIST's own layout, then written as uint8 (x 255, the model's input scale 1/255);
a stratified 70/30 split (seed 0) by digit gives 1,257 training and 540 held-out images. The new
labels sit on the model's first two outputs (its classes "0" and "1"); accuracy is the argmax over all
36 outputs, as the device reads it.

The run (``run``): ``gen --train --loss xent`` with a sparse update (``SPEC``: the last
FULLY_CONNECTED's and the last 1x1 CONV_2D's weights, the biases of the last three layers; SGD lr
``LR``, QAS on; the rate was picked from 0.001, 0.003 and 0.01 by the last epoch's *training*
accuracy, 92.2 / 94.7 / 93.5%) trains ``EPOCHS`` epochs in host simulation (the same C as the device;
tests/test_zoo_transfer.py checks that QEMU ends with the same bytes), ``export`` writes the
trained .tflite and TFLite Micro runs it on the held-out images (it must give the host simulation's
outputs byte for byte). The float reference: the same network in float32 PyTorch (weights and
biases dequantized from the file; QUANTIZE / DEQUANTIZE are identities on real values), the same
tensors trained by plain SGD on the softmax cross-entropy of the logits with the same learning rate,
batch 1 and the same sample order (pockmcu.train.stream), evaluated the same way.

The model is not committed (ST's SLA0044 license): it comes from the corpus cache
(``python -m pockmcu.corpus fetch``). scikit-learn and PyTorch are test dependencies.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from .codegen import write_project
from .compiler import TrainOptions, compile_model, parse_size
from .corpus import BEGIN as CORPUS_BEGIN
from .corpus import cache_dir, cached, read_manifest, tflm_outputs
from .errors import PockError
from .export import export_tflite
from .frontend import load_model
from .ir import Graph
from .ops.base import same_or_valid_pads
from .sim import read_plan
from .train import Data, HostTrainer, stream, write_params

MODEL = "st_ic_stmnist_emnist"
RAM = "256KB"
SPEC = {"bias": {"last": 3}, "weights": [{"layer": -1}, {"layer": -2}]}
LR, EPOCHS, SEED, SPLIT_SEED = 0.003, 5, 0, 0
NEW_CLASSES = ("even", "odd")
BEGIN, END = "<!-- zoo: written by python -m pockmcu.zoo_transfer -->", "<!-- /zoo -->"


def spec_json(lr: float = LR) -> str:
    return json.dumps(dict(SPEC, optimizer={"kind": "sgd", "lr": lr, "momentum": 0.0}, qas=True))


def model_path(cache: Path | None = None) -> Path | None:
    """The zoo model in the corpus cache (sha256 checked), None when it is not there."""
    row = next(r for r in read_manifest() if r["name"] == MODEL)
    return cached(row, cache or cache_dir())


# -- data -------------------------------------------------------------------------------------------


def _resize_bilinear(img: np.ndarray, size: int) -> np.ndarray:
    """[N, h, w] -> [N, size, size], half-pixel centres, edges clamped (PyTorch's bilinear with
    align_corners=False, antialias off)."""
    def axis(n_in: int):
        src = np.clip((np.arange(size) + 0.5) * n_in / size - 0.5, 0, n_in - 1)
        lo = np.floor(src).astype(int)
        hi = np.minimum(lo + 1, n_in - 1)
        return lo, hi, (src - lo).astype(np.float32)

    r0, r1, fr = axis(img.shape[1])
    c0, c1, fc = axis(img.shape[2])
    rows = img[:, r0, :] * (1 - fr)[None, :, None] + img[:, r1, :] * fr[None, :, None]
    return rows[:, :, c0] * (1 - fc)[None, None, :] + rows[:, :, c1] * fc[None, None, :]


def digits_28() -> tuple[np.ndarray, np.ndarray]:
    """scikit-learn's digits as the model's input: uint8 [1797, 28, 28, 1] (the digit in the central
    20x20, MNIST's layout), and the digit of each."""
    from sklearn.datasets import load_digits  # noqa: PLC0415  (optional: a test dependency)

    d = load_digits()
    img = _resize_bilinear(d.images.astype(np.float32) / np.float32(16.0), 20)
    x = np.zeros((len(img), 28, 28), np.float32)
    x[:, 4:24, 4:24] = img
    return np.clip(np.round(x * 255), 0, 255).astype(np.uint8)[..., None], d.target.astype(np.int64)


def new_label(digit: np.ndarray) -> np.ndarray:
    """The new class split: 0 for even digits, 1 for odd ones."""
    return (np.asarray(digit) % 2).astype(np.int32)


def datasets(n_train: int | None = None, seed: int = SPLIT_SEED):
    """(train, test, test digits): a stratified 70/30 split by digit; n_train keeps the first n
    training images (a smaller run)."""
    from sklearn.model_selection import train_test_split  # noqa: PLC0415  (optional: a test dependency)

    x, digit = digits_28()
    xtr, xte, dtr, dte = train_test_split(x, digit, test_size=0.3, stratify=digit, random_state=seed)
    if n_train is not None:
        xtr, dtr = xtr[:n_train], dtr[:n_train]
    return (Data(np.ascontiguousarray(xtr), new_label(dtr)), Data(np.ascontiguousarray(xte), new_label(dte)), dte)


# -- the float reference ----------------------------------------------------------------------------


def _real(t) -> np.ndarray:
    """A constant tensor's real values (float64), per-channel scales along its axis."""
    q = t.data.astype(np.float64)
    if t.quant is None:
        return q
    shape = [1] * q.ndim
    if t.quant.per_channel:
        shape[t.quant.axis] = -1
    scale = t.quant.scale.astype(np.float64).reshape(shape)
    zp = t.quant.zero_point.astype(np.float64).reshape(shape)
    return scale * (q - zp)


class FloatNet:
    """The graph in float32 PyTorch: CONV_2D, DEPTHWISE_CONV_2D, FULLY_CONNECTED, MEAN, RESHAPE,
    SOFTMAX and QUANTIZE / DEQUANTIZE (identities on real values); weights and biases dequantized
    from the file, one torch parameter per constant tensor of a layer. ``logits(x)`` returns the input
    of the final SOFTMAX."""

    LAYERS = ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED")

    def __init__(self, g: Graph, trainable: set[str]):
        import torch  # noqa: PLC0415  (optional: the float reference needs PyTorch)

        self.torch, self.g = torch, g
        self.params: dict[str, torch.Tensor] = {}
        for op in g.ops:
            if op.kind not in self.LAYERS + ("MEAN", "RESHAPE", "SOFTMAX", "QUANTIZE", "DEQUANTIZE"):
                raise PockError(f"float reference: no float rule for {op.kind} '{op.name}'")
            if op.kind in self.LAYERS:
                for name in op.inputs[1:3]:
                    if name:
                        p = torch.tensor(_real(g.t(name)), dtype=torch.float32)
                        self.params[name] = p.requires_grad_(name in trainable)
        missing = trainable - set(self.params)
        if missing:
            raise PockError(f"float reference: trainable tensor {sorted(missing)[0]!r} is not a layer's weight or bias")

    def trained(self) -> list:
        return [p for p in self.params.values() if p.requires_grad]

    def logits(self, x_real):
        """x_real: float32 [N, *input_shape[1:]] (real values) -> the logits [N, classes]."""
        torch, g = self.torch, self.g
        F = torch.nn.functional
        vals = {g.inputs[0]: x_real}
        for op in g.ops:
            x = vals[op.inputs[0]]
            if op.kind in ("CONV_2D", "DEPTHWISE_CONV_2D"):
                o, w, b = op.options, self.params[op.inputs[1]], self.params.get(op.inputs[2])
                out_hw = g.t(op.outputs[0]).shape[1:3]
                top, left, bottom, right = o.pads or same_or_valid_pads(o.padding, x.shape[1:3], w.shape[1:3],
                                                                        o.stride, o.dilation, out_hw)
                xc = F.pad(x.permute(0, 3, 1, 2), (left, right, top, bottom))
                if op.kind == "CONV_2D":
                    y = F.conv2d(xc, w.permute(0, 3, 1, 2), b, o.stride, 0, o.dilation)
                else:
                    y = F.conv2d(xc, w.permute(3, 0, 1, 2), b, o.stride, 0, o.dilation, groups=x.shape[3])
                y = self._act(y.permute(0, 2, 3, 1), o.activation)
            elif op.kind == "FULLY_CONNECTED":
                w, b = self.params[op.inputs[1]], self.params.get(op.inputs[2])
                y = self._act(F.linear(x.reshape(x.shape[0], w.shape[1]), w, b), op.options.activation)
            elif op.kind == "MEAN":
                axes = tuple(int(a) % x.dim() for a in g.t(op.inputs[1]).data.reshape(-1))
                y = x.mean(dim=axes, keepdim=op.options.keep_dims)
            elif op.kind == "RESHAPE":
                y = x.reshape((x.shape[0],) + tuple(g.t(op.outputs[0]).shape[1:]))
            elif op.kind == "SOFTMAX":
                return x
            else:   # QUANTIZE / DEQUANTIZE: the same real values
                y = x
            vals[op.outputs[0]] = y
        raise PockError("float reference: the model has no SOFTMAX")

    def _act(self, y, act: str):
        if act == "RELU":
            return y.clamp_min(0)
        if act == "RELU6":
            return y.clamp(0, 6)
        if act == "RELU_N1_TO_1":
            return y.clamp(-1, 1)
        return y


def _input_real(g: Graph, x: np.ndarray) -> np.ndarray:
    q = g.t(g.inputs[0]).quant
    if q is None:
        return x.astype(np.float32)
    return (np.float64(q.s) * (x.astype(np.float64) - q.zp)).astype(np.float32)


def float_reference(model: Path, trainable: list[str], train: Data, test: Data, epochs: int, lr: float,
                    seed: int) -> dict:
    """Plain float SGD (batch 1, softmax cross-entropy) of the same tensors in the same sample order;
    accuracy before and after each epoch on test."""
    import torch  # noqa: PLC0415  (optional: the float reference needs PyTorch)

    torch.set_num_threads(1)
    g = load_model(model)
    net = FloatNet(g, set(trainable))
    opt = torch.optim.SGD(net.trained(), lr=lr, momentum=0.0)
    xtr = torch.from_numpy(_input_real(g, train.x))
    ytr = torch.from_numpy(train.y.astype(np.int64))
    xte = torch.from_numpy(_input_real(g, test.x))

    def accuracy() -> float:
        with torch.no_grad():
            return float(np.mean(net.logits(xte).argmax(1).numpy() == test.y))

    before, history = accuracy(), []
    for order in stream(len(train.x), epochs, seed):
        for i in order.tolist():
            loss = torch.nn.functional.cross_entropy(net.logits(xtr[i:i + 1]), ytr[i:i + 1])
            opt.zero_grad()
            loss.backward()
            opt.step()
        history.append(accuracy())
    return dict(before=before, after=history[-1], history=history)


# -- the run ----------------------------------------------------------------------------------------


def run(model: Path, work: Path, epochs: int = EPOCHS, n_train: int | None = None, lr: float = LR,
        seed: int = SEED, reference: bool = True, log=print) -> dict:
    """Fine-tune the zoo model in host simulation; see the module doc. Returns accuracies and sizes."""
    t0 = time.perf_counter()
    train, test, test_digits = datasets(n_train)
    c = compile_model(model, ram=parse_size(RAM), stream="off", train=TrainOptions(spec=spec_json(lr), loss="xent"))
    out = write_project(c, work / "train")
    plan = read_plan(out)
    trainable = [t["tensor"] for t in plan["training"]["trainable"]]
    h = HostTrainer(out)
    probs = h.model.invoke(test.x).reshape(len(test.x), -1)
    before = float(np.mean(probs.argmax(1) == test.y))
    digit_pred = probs[:, :10].argmax(1)          # the shipped classes "0".."9", read as digits
    zero_shot_digits = float(np.mean(digit_pred == test_digits))
    zero_shot_mapped = float(np.mean(new_label(digit_pred) == test.y))
    hist = h.train(train, epochs, seed, eval_data=test, log=log)
    after = hist[-1]["eval_accuracy"]
    int8_seconds = time.perf_counter() - t0
    # export, then TFLite Micro on the trained file must give the host simulation's outputs
    write_params(work / "P.bin", plan, h.params())
    export_tflite(out, work / "P.bin", work / "trained.tflite")
    got = h.model.invoke(test.x)              # the trained state (a new load would re-initialize)
    want = tflm_outputs(work / "trained.tflite", [test.x], 1)[0].reshape(got.shape)
    res = dict(model=MODEL, new_classes=list(NEW_CLASSES), n_train=len(train.x), n_test=len(test.x), epochs=epochs,
               lr=lr, seed=seed, spec=json.loads(spec_json(lr)), trainable=trainable,
               trainable_elements=sum(t["trainable_elements"] for t in plan["training"]["trainable"]),
               ram_needed=c.ram_needed, before=before, after=after, history=[r["eval_accuracy"] for r in hist],
               losses=[r["loss"] for r in hist], zero_shot_digits=zero_shot_digits, zero_shot_mapped=zero_shot_mapped,
               tflm_equal=bool(np.array_equal(got, want)),
               tflm_after=float(np.mean(want.reshape(len(test.x), -1).argmax(1) == test.y)),
               int8_seconds=round(int8_seconds, 1))
    if reference:
        t1 = time.perf_counter()
        res["float"] = float_reference(model, trainable, train, test, epochs, lr, seed)
        res["float_seconds"] = round(time.perf_counter() - t1, 1)
    return res


def _pct(v: float) -> str:
    return f"{100 * v:.2f}%"


def markdown(r: dict) -> str:
    f = r.get("float")
    lines = [
        BEGIN, "# Transfer learning on a zoo model", "",
        "Written by `python -m pockmcu.zoo_transfer` (`make bench`: `python -m pockmcu.bench --zoo`). "
        "The model: STMicroelectronics' ST MNIST v1 from the stm32ai-modelzoo (corpus row `st_ic_stmnist_emnist`: "
        "EMNIST, 36 classes, uint8 input -> QUANTIZE ... SOFTMAX -> DEQUANTIZE, float32 output), as shipped. "
        "The data: scikit-learn's `load_digits` (1,797 scanned 8x8 digits), resized to 20x20 and centred in "
        f"28x28 (MNIST's layout), stratified 70/30 split: {r['n_train']} training, {r['n_test']} held-out images. "
        "The new class split: even / odd digits on the model's outputs 0 and 1; accuracy is the argmax over all "
        "36 outputs on the held-out images.", "",
        f"Update: `{json.dumps(r['spec'])}` ({r['trainable_elements']} trainable elements in "
        f"{len(r['trainable'])} tensors; {r['ram_needed']:,} B of RAM), {r['epochs']} epochs, seed {r['seed']}, "
        "host simulation of the generated C (QEMU trains to the same bytes: tests/test_zoo_transfer.py). "
        "Float reference: the same network "
        "in float32 PyTorch from the dequantized weights, the same tensors trained by plain SGD on the softmax "
        "cross-entropy with the same learning rate, batch 1 and the same sample order.", "",
        "| | held-out accuracy |", "|---|---:|",
        f"| before fine-tuning, int8 (outputs 0 / 1 read as even / odd) | {_pct(r['before'])} |",
    ]
    if f:
        lines.append(f"| before fine-tuning, float reference | {_pct(f['before'])} |")
    lines += [
        f"| before, the shipped digit classes mapped to even / odd in software | {_pct(r['zero_shot_mapped'])} |",
        f"| after fine-tuning, int8 on the device (host simulation) | **{_pct(r['after'])}** |",
        f"| after, the exported .tflite in TFLite Micro | {_pct(r['tflm_after'])} "
        f"({'byte-identical outputs' if r['tflm_equal'] else 'outputs DIFFER from the host simulation'}) |",
    ]
    if f:
        lines.append(f"| after fine-tuning, float reference (same parameters, same SGD) | **{_pct(f['after'])}** |")
    per_epoch = ", ".join(_pct(a) for a in r["history"])
    lines += ["", f"Per epoch (int8): {per_epoch}; mean training loss {r['losses'][0]:.3f} -> {r['losses'][-1]:.3f}."]
    if f:
        lines.append(f"Per epoch (float): {', '.join(_pct(a) for a in f['history'])}.")
    lines += ["", f"For scale: the shipped model reads the 10 digits themselves at {_pct(r['zero_shot_digits'])} "
              "(argmax of its outputs 0-9).", END]
    return "\n".join(lines) + "\n"


def write_section(md: str, target: Path) -> None:
    """Put the section into target, replacing an earlier one (before the corpus section when new)."""
    text = target.read_text() if target.is_file() else ""
    if BEGIN in text and END in text:
        head, rest = text.split(BEGIN, 1)
        text = head + md.rstrip("\n") + rest.split(END, 1)[1]
    elif CORPUS_BEGIN in text:
        head, rest = text.split(CORPUS_BEGIN, 1)
        text = head + md + "\n" + CORPUS_BEGIN + rest
    else:
        text = text + ("\n" if text and not text.endswith("\n\n") else "") + md
    target.write_text(text)


def bench_section(log=print) -> str:
    """The BENCHMARKS.md section (python -m pockmcu.bench --zoo); says so when the model is not cached."""
    model = model_path()
    if model is None:
        return (f"{BEGIN}\n# Transfer learning on a zoo model\n\nNot run: {MODEL} is not in the corpus cache "
                f"{cache_dir()} (python -m pockmcu.corpus fetch).\n{END}\n")
    with tempfile.TemporaryDirectory(prefix="pockmcu-zoo-") as tmp:
        return markdown(run(model, Path(tmp), log=log))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m pockmcu.zoo_transfer", description=__doc__.split("\n\n")[0])
    ap.add_argument("--into", metavar="FILE.md", help="write the section into FILE (else print it)")
    ap.add_argument("--epochs", type=int, default=EPOCHS)
    ap.add_argument("--n-train", type=int, help="use the first N training images only")
    ap.add_argument("--lr", type=float, default=LR)
    ap.add_argument("--seed", type=int, default=SEED)
    ap.add_argument("--json", action="store_true", help="print the results as JSON")
    args = ap.parse_args(argv)
    try:
        model = model_path()
        if model is None:
            raise PockError(f"{MODEL} is not in the corpus cache {cache_dir()}: run python -m pockmcu.corpus fetch "
                            "(or set POCKMCU_CACHE_DIR to the cache that has it)")
        with tempfile.TemporaryDirectory(prefix="pockmcu-zoo-") as tmp:
            res = run(model, Path(tmp), args.epochs, args.n_train, args.lr, args.seed,
                      log=lambda s: sys.stderr.write(s + "\n"))
        if args.json:
            print(json.dumps(res, indent=1))
        elif args.into:
            write_section(markdown(res), Path(args.into))
            print(f"wrote the zoo section of {args.into}")
        else:
            print(markdown(res))
        return 0
    except PockError as exc:
        sys.stderr.write(f"python -m pockmcu.zoo_transfer: error: {exc}\n")
        return 2


if __name__ == "__main__":
    sys.exit(main())
