"""Transfer learning on a public zoo model (pockmcu/zoo_transfer.py): ST MNIST v1 from the ST model
zoo (uint8 in, float out, 36 classes), fine-tuned by the generated C to a new class split of
scikit-learn's digits (even / odd), next to the float PyTorch reference of the same update.

The model is ST's (SLA0044, not committable): it is read from the corpus cache
(``python -m pockmcu.corpus fetch``; $POCKMCU_CACHE_DIR); the tests that need it skip only when the
cache does not hold it."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from pockmcu import zoo_transfer
from pockmcu.codegen import write_project
from pockmcu.compiler import TrainOptions, compile_model, parse_size
from pockmcu.corpus import tflm_outputs
from pockmcu.frontend import load_model
from pockmcu.train import HostTrainer, train_on_target

MODEL = zoo_transfer.model_path()
needs_model = pytest.mark.skipif(MODEL is None, reason=f"{zoo_transfer.MODEL} is not in the corpus cache "
                                                       "(python -m pockmcu.corpus fetch)")


def test_data_is_the_digits_in_mnist_layout():
    x, digit = zoo_transfer.digits_28()
    assert x.shape == (1797, 28, 28, 1) and x.dtype == np.uint8 and sorted(set(digit)) == list(range(10))
    assert not x[:, :4].any() and not x[:, 24:].any() and not x[:, :, :4].any() and not x[:, :, 24:].any()
    from sklearn.datasets import load_digits
    img = torch.from_numpy(load_digits().images.astype(np.float32) / 16)[:, None]
    want = torch.nn.functional.interpolate(img, size=(20, 20), mode="bilinear", align_corners=False)[:, 0].numpy()
    got = zoo_transfer._resize_bilinear(img[:, 0].numpy(), 20)
    assert np.abs(got - want).max() < 1e-5                       # PyTorch's bilinear resize
    train, test, test_digits = zoo_transfer.datasets()
    assert (len(train.x), len(test.x)) == (1257, 540)
    assert np.array_equal(test.y, test_digits % 2) and set(train.y) == {0, 1}


@needs_model
def test_float_reference_is_the_same_network():
    """The float network from the dequantized file gives the probabilities TFLite Micro gives from the
    int8 file, up to quantization: the same class wherever the int8 maximum is unique, within a
    few hundredths for most images (a wrong padding, layout or scale axis would break both)."""
    _, test, test_digits = zoo_transfer.datasets()
    g = load_model(MODEL)
    net = zoo_transfer.FloatNet(g, set())
    with torch.no_grad():
        logits = net.logits(torch.from_numpy(zoo_transfer._input_real(g, test.x)))
    p = torch.softmax(logits, 1).numpy()
    q = tflm_outputs(MODEL, [test.x], 1)[0].reshape(len(test.x), -1)
    assert p.shape == q.shape == (540, 36)
    top2 = np.sort(q, 1)[:, -2:]
    unique = top2[:, 1] > top2[:, 0]
    assert unique.mean() > 0.9
    assert np.mean((p.argmax(1) == q.argmax(1))[unique]) >= 0.97
    assert np.median(np.abs(p - q).max(1)) < 0.03
    int8_digits, float_digits = (np.mean(v[:, :10].argmax(1) == test_digits) for v in (q, p))
    assert int8_digits >= 0.7 and abs(int8_digits - float_digits) <= 0.02     # the zoo model reads these digits


@needs_model
def test_fine_tuning_raises_accuracy_as_float_does(tmp_path):
    """A small run (300 training images, 2 epochs): the int8 update in host simulation takes the new
    split from chance to far above it, as the float reference does with the same parameters, and the
    exported .tflite gives the host simulation's outputs in TFLite Micro."""
    r = zoo_transfer.run(MODEL, tmp_path, epochs=2, n_train=300, log=lambda *_: None)
    f = r["float"]
    assert r["before"] < 0.2 and f["before"] < 0.2                # outputs 0/1 are the shipped "0" and "1"
    assert r["after"] > r["before"] + 0.5, r
    assert f["after"] > f["before"] + 0.5, f
    assert abs(r["after"] - f["after"]) < 0.05, (r["after"], f["after"])
    assert r["losses"][-1] < r["losses"][0]
    assert r["tflm_equal"] and r["tflm_after"] == r["after"]
    assert len(r["trainable"]) == 5 and r["trainable_elements"] == 4484     # fc0 + conv2 weights, 3 biases


def test_markdown_reports_before_after_and_float():
    r = dict(n_train=1257, n_test=540, spec={"bias": {"last": 3}}, trainable=["a", "b"], trainable_elements=10,
             ram_needed=28680, epochs=5, seed=0, before=0.1, after=0.96, zero_shot_mapped=0.92,
             zero_shot_digits=0.8, tflm_after=0.96, tflm_equal=True, history=[0.9, 0.96], losses=[0.6, 0.1],
             float=dict(before=0.09, after=0.955, history=[0.89, 0.955]))
    md = zoo_transfer.markdown(r)
    assert md.startswith(zoo_transfer.BEGIN) and md.rstrip().endswith(zoo_transfer.END)
    assert "| before fine-tuning, int8 (outputs 0 / 1 read as even / odd) | 10.00% |" in md
    assert "| after fine-tuning, int8 on the device (host simulation) | **96.00%** |" in md
    assert "| after fine-tuning, float reference (same parameters, same SGD) | **95.50%** |" in md
    assert "byte-identical outputs" in md


def test_section_replaces_itself(tmp_path):
    target = tmp_path / "B.md"
    target.write_text("# Other\n\ntext\n")
    zoo_transfer.write_section(f"{zoo_transfer.BEGIN}\nold\n{zoo_transfer.END}\n", target)
    zoo_transfer.write_section(f"{zoo_transfer.BEGIN}\nnew\n{zoo_transfer.END}\n", target)
    text = target.read_text()
    assert text.startswith("# Other\n\ntext\n") and text.count(zoo_transfer.BEGIN) == 1 and "new" in text
    assert "old" not in text


@needs_model
def test_qemu_fine_tunes_to_the_same_bytes(tmp_path):
    """The same update of the zoo model in QEMU (Cortex-M4) ends with the host simulation's bytes."""
    train, _, _ = zoo_transfer.datasets(n_train=24)
    c = compile_model(MODEL, ram=parse_size(zoo_transfer.RAM), stream="off",
                      train=TrainOptions(spec=zoo_transfer.spec_json(), loss="xent"))
    out = write_project(c, tmp_path / "zoo")
    h = HostTrainer(out)
    h.train(train, 1, seed=3, log=lambda *_: None)
    _, raw, _ = train_on_target(out, "qemu-m4", train, 1, seed=3, log=lambda *_: None)
    assert raw == h.params()
