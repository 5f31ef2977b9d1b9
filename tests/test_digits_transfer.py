"""Transfer learning really works: the bundled int8 digits model, pretrained on 0-4, fine-tuned on
5-9 by the generated C, lands within 2 points of float fine-tuning of the same parameters with the
same optimizer settings; QAS is what makes int8 updates move at all; QEMU trains to the same bytes."""

from __future__ import annotations

import pytest

from pockmcu import digits
from pockmcu.codegen import write_project
from pockmcu.compiler import TrainOptions, compile_model, parse_size
from pockmcu.train import HostTrainer, train_on_target


def train_int8(tmp_path, scheme: str, qas: bool = True):
    train, test = digits.datasets()
    c = compile_model(digits.model_path(), ram=parse_size("256KB"),
                      train=TrainOptions(spec=digits.spec_json(scheme, qas)))
    out = write_project(c, tmp_path / f"{scheme}_{qas}")
    h = HostTrainer(out)
    before = h.evaluate(test)
    hist = h.train(train, digits.EPOCHS, seed=0, eval_data=test, log=lambda *_: None)
    return c, out, h, before, hist[-1]["eval_accuracy"]


@pytest.mark.parametrize("scheme", ["sparse", "last"])
def test_int8_fine_tuning_within_two_points_of_float(scheme, tmp_path):
    c, _, _, before, after = train_int8(tmp_path, scheme)
    lr = digits.SCHEMES[scheme][1]
    ref = digits.example().float_finetune(scheme, digits.EPOCHS, lr, 0)["test_acc"]
    assert before < 0.2, before                  # pretrained on 0-4: it cannot tell 5-9 apart yet
    assert after >= ref - 0.02, (after, ref)
    assert after >= 0.85
    assert c.ram_needed <= 256 * 1024


def test_qas_is_what_makes_int8_updates_move(tmp_path):
    *_, with_qas = train_int8(tmp_path, "sparse", qas=True)
    *_, without = train_int8(tmp_path, "sparse", qas=False)
    assert with_qas > without + 0.3, (with_qas, without)


def test_device_fine_tunes_to_the_same_bytes(tmp_path):
    train, _ = digits.datasets()
    c = compile_model(digits.model_path(), ram=parse_size("256KB"), train=TrainOptions(spec=digits.spec_json("sparse")))
    out = write_project(c, tmp_path / "dev")
    h = HostTrainer(out)
    h.train(train, 1, seed=4, log=lambda *_: None)
    _, raw, _ = train_on_target(out, "qemu-m4", train, 1, seed=4, log=lambda *_: None)
    assert raw == h.params()
