"""Training from the command line, and what a new user gets wrong: one line, exit 2, nothing written."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
from conftest import SHARED, tflm_run

KWS = SHARED / "mlperf_kws_dscnn.tflite"
SPEC = '{"bias": {"last": 2}, "weights": [{"layer": -1, "ratio": 1.0}], "optimizer": {"kind": "sgd", "lr": 0.05}}'


def pockmcu(*args):
    return subprocess.run([sys.executable, "-m", "pockmcu.cli", *map(str, args)], capture_output=True, text=True,
                          timeout=600)


def one_line_error(r, needle):
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr, r.stderr
    assert needle.lower() in r.stderr.lower(), r.stderr


@pytest.fixture(scope="module")
def trained_out(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("cli")
    out = tmp / "kws"
    r = pockmcu("gen", KWS, "--train", "--update", SPEC, "--ram", "256KB", "-o", out)
    assert r.returncode == 0, r.stderr
    assert "persistent RAM" in r.stdout
    rng = np.random.default_rng(0)
    np.savez(tmp / "data.npz", x=rng.integers(-128, 128, (24, 49, 10, 1)).astype(np.int8),
             y=rng.integers(0, 12, 24))
    return tmp, out


def test_sim_run_export_round_trip(trained_out):
    tmp, out = trained_out
    r = pockmcu("sim", out, "--train", tmp / "data.npz", "--epochs", "2", "--seed", "3", "--eval", tmp / "data.npz",
                "--save-params", tmp / "host.bin")
    assert r.returncode == 0, r.stderr
    assert "epoch 2/2: loss" in r.stdout and "eval accuracy" in r.stdout
    r = pockmcu("run", out, "--target", "qemu-m4", "--train", tmp / "data.npz", "--epochs", "2", "--seed", "3",
                "--save-params", tmp / "dev.bin")
    assert r.returncode == 0, r.stderr
    assert (tmp / "dev.bin").read_bytes() == (tmp / "host.bin").read_bytes()
    r = pockmcu("export", out, "--params", tmp / "dev.bin", "-o", tmp / "trained.tflite")
    assert r.returncode == 0, r.stderr
    x = np.load(tmp / "data.npz")["x"][:5]
    assert not np.array_equal(tflm_run(tmp / "trained.tflite", x), tflm_run(KWS, x))


@pytest.mark.parametrize("spec,needle", [
    ('{"weights": [{"layer": 40}]}', "layer 40 does not exist"),
    ('{"weights": [{"layer": "conv99"}]}', "no layer named"),
    ('{"weights": [{"layer": -1, "ratio": 1.5}]}', "must be in (0, 1]"),
    ('{"weights": [{"layer": -1, "ratio": 0}]}', "must be in (0, 1]"),
    ('{"bias": {"last": 2}', "malformed JSON"),
    ('{"bias": "some"}', "bias must be"),
    ('{"optimizer": {"kind": "adam"}}', "not supported"),
    ('{"bias": "none", "weights": "none"}', "trains nothing"),
    ("nofile.json", "no such file"),
])
def test_bad_spec(spec, needle, tmp_path):
    r = pockmcu("gen", KWS, "--train", "--update", spec, "--ram", "256KB", "-o", tmp_path / "o")
    one_line_error(r, needle)
    assert not (tmp_path / "o").exists()


def test_bad_training_data(trained_out, tmp_path):
    _, out = trained_out
    rng = np.random.default_rng(1)
    x = rng.integers(-128, 128, (4, 49, 10, 1)).astype(np.int8)
    cases = {
        "labels.npz": (dict(x=x, y=np.array([0, 3, 12, 1])), "outside the model's 12 classes"),
        "neg.npz": (dict(x=x, y=np.array([0, -1, 2, 1])), "outside"),
        "shape.npz": (dict(x=x.reshape(4, 10, 49, 1), y=np.zeros(4, int)), "shape"),
        "dtype.npz": (dict(x=x.astype(np.float32), y=np.zeros(4, int)), "dtype"),
        "nolabels.npz": (dict(x=x), "needs arrays"),
        "floaty.npz": (dict(x=x, y=np.zeros(4, np.float32)), "integer class labels"),
    }
    for name, (arrays, needle) in cases.items():
        np.savez(tmp_path / name, **arrays)
        r = pockmcu("sim", out, "--train", tmp_path / name, "--save-params", tmp_path / "p.bin")
        one_line_error(r, needle)
        assert not (tmp_path / "p.bin").exists()
    (tmp_path / "junk.npz").write_text("junk")
    one_line_error(pockmcu("sim", out, "--train", tmp_path / "junk.npz"), "not a .npz")
    one_line_error(pockmcu("sim", out, "--train", tmp_path / "missing.npz"), "no such file")


def test_training_commands_need_a_training_build(tmp_path):
    assert pockmcu("gen", KWS, "--ram", "256KB", "-o", tmp_path / "inf").returncode == 0
    np.savez(tmp_path / "d.npz", x=np.zeros((2, 49, 10, 1), np.int8), y=np.zeros(2, int))
    one_line_error(pockmcu("sim", tmp_path / "inf", "--train", tmp_path / "d.npz"), "without --train")
    one_line_error(pockmcu("gen", KWS, "--update", SPEC, "--ram", "256KB", "-o", tmp_path / "x"), "go with --train")
    one_line_error(pockmcu("gen", KWS, "--no-fusion", "split-storage", "--ram", "256KB", "-o", tmp_path / "x"),
                   "go with --train")
    one_line_error(pockmcu("gen", SHARED / "mlperf_ad_autoencoder.tflite", "--train", "--ram", "256KB",
                           "-o", tmp_path / "ad"), "--loss mse")


def test_no_fusion_switches_a_pass_off(tmp_path):
    """--no-fusion mean-backward: KWS's pooled 1x1 conv trains through the unfused mean gradient, in a
    larger arena (plan.json), and an unknown pass name is refused."""
    arena = {}
    for tag, extra in (("on", []), ("off", ["--no-fusion", "mean-backward"])):
        r = pockmcu("gen", KWS, "--train", "--update", SPEC, "--ram", "256KB", *extra, "-o", tmp_path / tag)
        assert r.returncode == 0, r.stderr
        plan = json.loads((tmp_path / tag / "plan.json").read_text())
        arena[tag] = plan["arena_bytes"]
        kinds = {s["kind"] for s in plan["steps"]}
        assert ("CONV_1X1_GRAD_FROM_MEAN" in kinds) == (tag == "on")
    assert arena["on"] < arena["off"]
    r = pockmcu("gen", KWS, "--train", "--no-fusion", "everything", "-o", tmp_path / "x")
    assert r.returncode == 2 and "invalid choice" in r.stderr


def test_training_budget_too_small(tmp_path):
    r = pockmcu("gen", KWS, "--train", "--update", '{"weights": "all", "bias": "all"}', "--ram", "48KB",
                "-o", tmp_path / "o")
    one_line_error(r, "train fewer parameters")


def test_default_update_fits_the_budget(tmp_path):
    """Without --update the compiler searches for the update with the most expected gain that fits
    --ram, writes it to OUT/spec.json, and trains more for a larger budget."""
    import json

    big, small = tmp_path / "big", tmp_path / "small"
    assert pockmcu("gen", KWS, "--train", "--ram", "256KB", "-o", big).returncode == 0
    assert pockmcu("gen", KWS, "--train", "--ram", "40KB", "-o", small).returncode == 0
    pb, ps = (json.loads((d / "plan.json").read_text()) for d in (big, small))
    for d, p in ((big, pb), (small, ps)):
        chosen = json.loads((d / "spec.json").read_text())
        assert {k: v for k, v in p["training"]["spec"].items() if k != "optimizer"} == \
            {k: v for k, v in chosen.items() if k != "optimizer"}
    assert ps["ram_needed_bytes"] <= 40 * 1024 < pb["ram_needed_bytes"] <= 256 * 1024
    trained = [sum(t["trainable_elements"] for t in p["training"]["trainable"]) for p in (ps, pb)]
    assert trained[0] < trained[1]
    one_line_error(pockmcu("gen", KWS, "--train", "--ram", "16KB", "-o", tmp_path / "x"), "does not fit")
