"""On-device training: the generated train_step against the numpy float reference,
host simulation against QEMU, export against the TFLite Micro interpreter, and the
training graph's structure (dead code, reordering, sparse channels)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import FIXTURES, SHARED, tflm_run

from pockmcu.codegen import write_project
from pockmcu.compiler import TrainOptions, compile_model
from pockmcu.export import export_tflite
from pockmcu.ops.base import option_items
from pockmcu.train import Data, HostTrainer, read_params, train_on_target, write_params
from pockmcu.training import params
from pockmcu.training.fusions import Fusions
from pockmcu.training.reference import ReferenceTrainer

SPARSE = {  # shaped like the Tiny Training Engine's schemes: biases of the last layers, a few weight layers
    "mlperf_kws_dscnn": {"bias": {"last": 4}, "weights": [{"layer": -1, "ratio": 1.0}, {"layer": -2, "ratio": 0.5}],
                         "optimizer": {"kind": "sgd", "lr": 0.05}},
    "mlperf_ic_resnet8": {"bias": {"last": 5}, "weights": [{"layer": -1, "ratio": 1.0}, {"layer": -2, "ratio": 0.25}],
                          "optimizer": {"kind": "momentum", "lr": 0.02, "momentum": 0.9}},
    "mlperf_vww_mobilenetv1_96": {"bias": {"last": 6}, "weights": [{"layer": -1, "ratio": 1.0},
                                                                    {"layer": -2, "ratio": 0.125},
                                                                    {"layer": -3, "ratio": 0.5}],
                                  "optimizer": {"kind": "sgd", "lr": 0.05}},
}


def make(model, spec, tmp_path, loss="xent", reorder=True, ram="512KB", fuse_mean=True, fusions=None):
    from pockmcu.compiler import parse_size

    fusions = fusions or Fusions(mean_backward=fuse_mean)
    c = compile_model(model, ram=parse_size(ram), train=TrainOptions(spec=json.dumps(spec), loss=loss,
                                                                     reorder=reorder, fusions=fusions))
    out = write_project(c, tmp_path / model.stem)
    return c, out


def random_data(c, n, seed):
    g = c.graph
    x = g.t(g.inputs[0])
    rng = np.random.default_rng(seed)
    xs = rng.integers(-128, 128, (n,) + x.shape[1:]).astype(np.int8)
    if c.train.loss == "xent":
        ys = rng.integers(0, g.t(g.outputs[0]).shape[-1], n).astype(np.int32)
    else:
        ys = rng.standard_normal((n,) + g.t(g.outputs[0]).shape[1:]).astype(np.float32)
    return Data(xs, ys)


def unpack(c, raw: bytes) -> dict[str, np.ndarray]:
    """Full trained tensors from pockmcu_params_read bytes (split heads merged into the originals)."""
    layout = params.entries(c.train)
    assert sum(e["bytes"] for e in layout) == len(raw)
    return params.expand(layout, raw, {t: c.graph.t(t).data for t in c.train.trainable_tensors})


@pytest.mark.parametrize("stem", list(SPARSE))
def test_one_step_equals_float_reference(stem, tmp_path):
    """After one step every trained parameter is the float reference's q + delta rounded down or up
    (stochastic rounding), and with the same RNG streams the rounding picks the same side."""
    c, out = make(SHARED / f"{stem}.tflite", SPARSE[stem], tmp_path)
    data = random_data(c, 1, seed=1)
    host = HostTrainer(out)
    host.init(7)
    ref = ReferenceTrainer(c.train, seed=7)
    loss_c, _, _ = host.step(data.x[0], data.y[0])
    loss_ref = ref.step(data.x[0], data.y[0])
    assert abs(loss_c - loss_ref) <= 1e-6 * max(1.0, abs(loss_ref))
    got = unpack(c, host.params())
    deltas = ref.state.deltas
    changed = 0
    for t, new in got.items():
        old = c.graph.t(t).data
        np.testing.assert_array_equal(new, ref.params()[t], err_msg=t)
        lo, hi = (-127, 127) if new.dtype == np.int8 else (-2**31, 2**31 - 1)
        flat_old, flat_new = old.reshape(-1).astype(np.float64), new.reshape(-1).astype(np.float64)
        changed += int(np.count_nonzero(flat_new != flat_old))
        part = _trained_part(c, t, flat_old.size)
        want = flat_old[part] + deltas[t]
        assert np.all(flat_new[part] >= np.clip(np.floor(want) - 1e-9, lo, hi)), t
        assert np.all(flat_new[part] <= np.clip(np.ceil(want) + 1e-9, lo, hi)), t
        frozen = np.setdiff1d(np.arange(old.size), part)
        np.testing.assert_array_equal(flat_new[frozen], flat_old[frozen], err_msg=f"{t}: frozen part moved")
    assert changed > 0


def _trained_part(c, tensor: str, size: int) -> np.ndarray:
    """Flat indices, in update order, of the elements of ``tensor`` that train."""
    for op in c.train.schedule:
        o = option_items(op)
        if o.get("bias") == tensor:
            return np.arange(size)
        if o.get("weights") == tensor:
            w = c.graph.t(tensor)
            idx = np.arange(size).reshape(w.shape)
            k, b = o["channels"], o["channel_begin"]
            if op.kind == "DEPTHWISE_CONV_2D_WGRAD_UPDATE":
                m = o["layer"].options.ch_mult
                return idx[0, :, :, b * m:(b + k) * m].reshape(-1)
            return idx[..., b:b + k].reshape(-1)
    raise AssertionError(tensor)


@pytest.mark.parametrize("stem", list(SPARSE))
def test_host_and_qemu_train_to_identical_parameters(stem, tmp_path):
    c, out = make(SHARED / f"{stem}.tflite", SPARSE[stem], tmp_path)
    data = random_data(c, 20, seed=2)
    host = HostTrainer(out)
    host.train(data, epochs=1, seed=5, log=lambda *_: None)
    _, raw_dev, _ = train_on_target(out, "qemu-m4", data, epochs=1, seed=5, log=lambda *_: None)
    assert raw_dev == host.params()
    layout = params.entries(c.train)
    assert raw_dev != params.pack(layout, {t: c.graph.t(t).data for t in c.train.trainable_tensors})


TRAIN_FIXTURES = [  # (fixture, loss): every op with a gradient rule on a path to a trained layer
    ("small_cnn", "xent"), ("train_mixed", "xent"), ("add_residual_relu", "mse"), ("concat_channels", "mse"),
    ("dwconv_3x3_s2_same_mult2_relu6", "mse"),
    ("conv_5x3_s2_same_relu6", "mse"), ("conv_3x3_dil2_valid_pertensor", "mse"), ("fc_4d_input", "mse"),
    ("keras_flatten", "mse"), ("quant_float_io", "mse"), ("dwconv_mult8_1ch", "mse"),
]


@pytest.mark.parametrize("stem,loss", TRAIN_FIXTURES)
def test_full_update_c_equals_reference(stem, loss, tmp_path):
    """Full update (every weight and bias), 3 steps with momentum and batch 2: the generated C and the
    numpy reference end with the same bytes; gradients flow through every op of the fixture."""
    spec = {"bias": "all", "weights": "all", "optimizer": {"kind": "momentum", "lr": 0.01, "momentum": 0.5},
            "batch": 2}
    model = FIXTURES / f"{stem}.tflite"
    try:
        c, out = make(model, spec, tmp_path, loss=loss)
    except Exception as exc:  # a fixture without a trainable layer is a test bug, not a skip
        raise AssertionError(f"{stem}: {exc}") from exc
    g = c.graph
    rng = np.random.default_rng(4)
    x = g.t(g.inputs[0])
    xs = (rng.standard_normal((3,) + x.shape[1:]).astype(np.float32) if x.dtype == "float32"
          else rng.integers(-128, 128, (3,) + x.shape[1:]).astype(np.int8))
    data = random_data(c, 3, seed=4)
    host = HostTrainer(out)
    host.init(11)
    ref = ReferenceTrainer(c.train, seed=11)
    for i in range(3):
        host.step(xs[i], data.y[i])
        ref.step(xs[i], data.y[i])
    got = unpack(c, host.params())
    for t, want in ref.params().items():
        np.testing.assert_array_equal(got[t], want, err_msg=t)
    assert any((got[t] != g.t(t).data).any() for t in got)


def test_dead_code_elimination_and_reordering(tmp_path):
    kws = SHARED / "mlperf_kws_dscnn.tflite"
    c, _ = make(kws, {"bias": "none", "weights": [{"layer": -1}]}, tmp_path)
    kinds = [op.kind for op in c.train.schedule]
    assert not any(k.endswith("GRAD_INPUT") for k in kinds), "last-layer training must not back-propagate"
    c2, out2 = make(kws, SPARSE["mlperf_kws_dscnn"], tmp_path)
    names = [op.name for op in c2.train.schedule]
    assert names.index("conv4_wgrad_update") < names.index("conv4_grad_input")  # update before input gradient
    assert not any(n.startswith(("conv3_", "dwconv2_")) and "grad" in n for n in names)  # stops at dwconv3
    plan = json.loads((out2 / "plan.json").read_text())
    assert plan["training"]["reorder"] is True
    assert [s["phase"] for s in plan["steps"]].count("backward") == len(c2.train.schedule) - c2.train.n_forward
    c3, _ = make(kws, SPARSE["mlperf_kws_dscnn"], tmp_path / "nr", reorder=False)
    names3 = [op.name for op in c3.train.schedule]
    assert names3.index("conv4_wgrad_update") > names3.index("dwconv3_mask_apply")  # deferred to the end
    assert c3.plan.arena_bytes > c2.plan.arena_bytes


def test_channel_sparse_saves_only_trained_channels(tmp_path):
    c, _ = make(SHARED / "mlperf_kws_dscnn.tflite", SPARSE["mlperf_kws_dscnn"], tmp_path)
    saved = c.graph.t("conv4_saved_input")
    assert saved.shape == (1, 25, 5, 32) and saved.dtype == "int8"


def test_export_matches_device(tmp_path):
    """Train, save, export: TFLite Micro on the exported model gives the trained model's outputs."""
    kws = SHARED / "mlperf_kws_dscnn.tflite"
    c, out = make(kws, SPARSE["mlperf_kws_dscnn"], tmp_path)
    data = random_data(c, 12, seed=8)
    host = HostTrainer(out)
    host.train(data, epochs=2, seed=1, log=lambda *_: None)
    write_params(tmp_path / "p.bin", json.loads((out / "plan.json").read_text()), host.params())
    assert [n for n, _, _ in read_params(tmp_path / "p.bin")] == c.train.trainable_tensors
    export_tflite(out, tmp_path / "p.bin", tmp_path / "trained.tflite")
    x = random_data(c, 6, seed=9).x
    trained = host.model.invoke(x)  # the trainer's library, parameters now trained
    np.testing.assert_array_equal(tflm_run(tmp_path / "trained.tflite", x), trained)
    assert not np.array_equal(tflm_run(kws, x), trained)


@pytest.mark.parametrize("reorder", [True, False])
def test_mean_backward_fused_is_bit_identical(reorder, tmp_path):
    """KWS ends in 1x1 conv -> global average pool -> FC: the conv's backward reads the pool's
    broadcast gradient without writing it out (CONV_1X1_GRAD_FROM_MEAN); its training steps give
    the parameters of the unfused backward byte for byte, in a smaller arena."""
    kws = SHARED / "mlperf_kws_dscnn.tflite"
    spec = {"bias": {"last": 4}, "weights": [{"layer": -1}], "optimizer": {"kind": "momentum", "lr": 0.05,
                                                                           "momentum": 0.9}}
    c, out = make(kws, spec, tmp_path / "fused", reorder=reorder)
    c0, out0 = make(kws, spec, tmp_path / "unfused", reorder=reorder, fuse_mean=False)
    kinds, kinds0 = [op.kind for op in c.train.schedule], [op.kind for op in c0.train.schedule]
    assert "CONV_1X1_GRAD_FROM_MEAN" in kinds and "AVERAGE_POOL_2D_GRAD" not in kinds
    assert "CONV_1X1_GRAD_FROM_MEAN" not in kinds0 and "AVERAGE_POOL_2D_GRAD" in kinds0
    pool = next(op for op in c0.graph.ops if op.kind == "AVERAGE_POOL_2D")
    broadcast = c0.graph.t(pool.inputs[0]).size * 4      # the gradient the fused kernel never writes
    # it set the unfused peak: the arena drops by nearly all of it (66,012 -> 35,268 B reordered)
    assert broadcast == 25 * 5 * 64 * 4 and c0.plan.arena_bytes - c.plan.arena_bytes > 0.9 * broadcast
    data = random_data(c, 6, seed=3)
    params = []
    for o in (out, out0):
        host = HostTrainer(o)
        host.train(data, epochs=1, seed=4, log=lambda *_: None)
        params.append(host.params())
    assert params[0] == params[1]
    if reorder:   # and on the device: QEMU Cortex-M4 (hard float) ends with the host's bytes
        _, raw_dev, _ = train_on_target(out, "qemu-m4", data, epochs=1, seed=4, log=lambda *_: None)
        assert raw_dev == params[0]
    ref = ReferenceTrainer(c.train, seed=4)
    ref0 = ReferenceTrainer(c0.train, seed=4)
    for x, y in zip(data.x[:2], data.y[:2]):
        assert ref.step(x, y) == ref0.step(x, y)
    for t, v in ref.params().items():
        np.testing.assert_array_equal(v, ref0.params()[t], err_msg=t)


@pytest.mark.parametrize("name", ["in-place-depthwise", "split-storage"])
def test_fusion_switches_keep_bits(name, tmp_path):
    """Each RAM pass over the training graph can be switched off (gen --no-fusion NAME); with it on,
    RAM is lower and a training epoch leaves the same parameters byte for byte."""
    if name == "in-place-depthwise":   # train the layers behind KWS's stride-1 depthwise convs
        model = SHARED / "mlperf_kws_dscnn.tflite"
        spec = {"bias": "all", "weights": [{"layer": -1}], "optimizer": {"kind": "sgd", "lr": 0.05}}
    else:                              # ResNet-8's second-to-last conv trains 1/4 of its input channels
        model, spec = SHARED / "mlperf_ic_resnet8.tflite", SPARSE["mlperf_ic_resnet8"]
    c, out = make(model, spec, tmp_path / "on")
    c0, out0 = make(model, spec, tmp_path / "off", fusions=Fusions().without([name]))
    if name == "in-place-depthwise":
        over = {op.kind for op in c.train.schedule if op.name in c.plan.writes_over_input}
        over0 = {op.kind for op in c0.train.schedule if op.name in c0.plan.writes_over_input}
        assert "DEPTHWISE_CONV_2D_GRAD_INPUT" in over and "DEPTHWISE_CONV_2D_GRAD_INPUT" not in over0
        assert c.plan.arena_bytes < c0.plan.arena_bytes
    else:
        assert c.train.split_tensors and not c0.train.split_tensors
        assert c.persistent_ram_bytes < c0.persistent_ram_bytes
    data = random_data(c, 4, seed=5)
    trained = []
    for cc, o in ((c, out), (c0, out0)):
        host = HostTrainer(o)
        host.train(data, epochs=1, seed=6, log=lambda *_: None)
        trained.append(unpack(cc, host.params()))
    assert trained[0].keys() == trained[1].keys()
    for t in trained[0]:
        np.testing.assert_array_equal(trained[0][t], trained[1][t], err_msg=t)


def _split_layers(c):
    """(weights tensor, k, C_in) of every CONV_2D trained at k < C_in channels."""
    return [(u.op.inputs[1], u.channels, u.total_channels) for u in c.train.spec.layers
            if u.op.kind == "CONV_2D" and 0 < u.channels < u.total_channels]


@pytest.mark.parametrize("stem", list(SPARSE))
def test_split_storage_persistent_ram(stem, tmp_path):
    """A CONV_2D trained at k < C_in input channels keeps only those in RAM: persistent RAM is the
    whole-tensor figure minus exactly the frozen bytes O*KH*KW*(C_in - k); depthwise and fully
    connected weights stay whole; the parameter bytes are the stored ones."""
    c, out = make(SHARED / f"{stem}.tflite", SPARSE[stem], tmp_path)
    tg, g = c.train, c.graph
    n_state = (tg.spec.momentum > 0) + (tg.spec.batch > 1)
    whole = sum(g.t(t).nbytes + 4 + 4 * n_state * tg.state_elements(t) for t in tg.trainable_tensors) + 16
    split = _split_layers(c)
    assert split, "the spec must split at least one CONV_2D"
    frozen = sum(g.t(w).size // cin * (cin - k) for w, k, cin in split)
    assert c.persistent_ram_bytes == whole - frozen
    layout = {e["tensor"]: e for e in json.loads((out / "plan.json").read_text())["training"]["trainable"]}
    for w, k, cin in split:
        shape = list(g.t(w).shape)
        assert layout[w]["stored_shape"] == shape[:-1] + [k] and layout[w]["head"] == k and layout[w]["row"] == cin
        assert layout[w]["bytes"] == g.t(w).size // cin * k
    for u in tg.spec.layers:   # other partly trained layers are stored whole
        if u.channels and u.op.kind != "CONV_2D":
            assert layout[u.op.inputs[1]]["bytes"] == g.t(u.op.inputs[1]).nbytes and not layout[u.op.inputs[1]]["head"]
    host = HostTrainer(out)
    assert len(host.params()) == sum(e["bytes"] for e in layout.values()) == \
        sum(tg.stored_bytes(t) for t in tg.trainable_tensors)


def _tflite_tensors(path, names) -> dict[str, np.ndarray]:
    """Constant tensors of a .tflite file read with the tflite package (independently of export.py), named
    as the README says pockmcu names them: cut at 256 characters, a repeated name numbered _1, _2, ..."""
    import tflite

    m = tflite.Model.GetRootAs(path.read_bytes(), 0)
    sg = m.Subgraphs(0)
    out, used = {}, set()
    for i in range(sg.TensorsLength()):
        t = sg.Tensors(i)
        name = base = t.Name().decode()[:256]
        k = 0
        while name in used:
            k += 1
            name = f"{base}_{k}"
        used.add(name)
        if name in names:
            dtype = {tflite.TensorType.INT8: np.int8, tflite.TensorType.INT32: np.int32}[t.Type()]
            out[name] = m.Buffers(t.Buffer()).DataAsNumpy().view(dtype).reshape(t.ShapeAsNumpy())
    return out


@pytest.mark.parametrize("stem", ["mlperf_kws_dscnn", "mlperf_vww_mobilenetv1_96"])
def test_export_of_split_storage(stem, tmp_path):
    """P.bin of a split-trained model holds only the trained channels; `export` merges them into the
    original tensors: frozen channels equal the original model's, trained ones the numpy reference's."""
    model = SHARED / f"{stem}.tflite"
    c, out = make(model, SPARSE[stem], tmp_path)
    data = random_data(c, 3, seed=12)
    host = HostTrainer(out)
    host.init(3)
    ref = ReferenceTrainer(c.train, seed=3)
    for i in range(3):
        host.step(data.x[i], data.y[i])
        ref.step(data.x[i], data.y[i])
    plan = json.loads((out / "plan.json").read_text())
    write_params(tmp_path / "p.bin", plan, host.params())
    stored = {n: d for n, _, d in read_params(tmp_path / "p.bin")}
    export_tflite(out, tmp_path / "p.bin", tmp_path / "trained.tflite")
    names = set(c.train.trainable_tensors)
    original, exported = _tflite_tensors(model, names), _tflite_tensors(tmp_path / "trained.tflite", names)
    want = ref.params()
    for w, k, cin in _split_layers(c):
        assert len(stored[w]) == c.graph.t(w).size // cin * k          # only the head travels
        np.testing.assert_array_equal(exported[w][..., k:], original[w][..., k:], err_msg=f"{w}: frozen")
        np.testing.assert_array_equal(exported[w][..., :k], want[w][..., :k], err_msg=f"{w}: trained")
        assert (exported[w][..., :k] != original[w][..., :k]).any(), f"{w}: did not train"
    for t in names:
        np.testing.assert_array_equal(exported[t], want[t], err_msg=t)


SAN_MAIN = r"""
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "model.h"

/* stdin: u32 steps, then per step the input sample and an int32 label; stdout: the parameters. */
int main(void)
{
    uint32_t steps, k, n = pockmcu_params_bytes();
    int32_t label;
    pockmcu_step_result r;
    uint8_t *p = malloc(n);
    if (p == NULL || fread(&steps, 4, 1, stdin) != 1 || pockmcu_train_init(7) != 0) return 2;
    for (k = 0; k < steps; k++) {
        if (fread(pockmcu_input(0), pockmcu_input_bytes(0), 1, stdin) != 1 || fread(&label, 4, 1, stdin) != 1) return 3;
        if (pockmcu_train_step(&label, &r) != 0) return 4;
    }
    pockmcu_params_read(p);
    pockmcu_params_write(p);       /* round trip through the RAM arrays */
    pockmcu_params_read(p);
    fwrite(p, 1, n, stdout);
    free(p);
    return 0;
}
"""


def test_split_storage_sanitized(tmp_path):
    """The generated training code with split storage (KWS conv4 at 1/2), built with -Wall -Wextra -Werror
    under ASan + UBSan: a few train steps run clean and end with the host library's parameters."""
    import subprocess

    c, out = make(SHARED / "mlperf_kws_dscnn.tflite", SPARSE["mlperf_kws_dscnn"], tmp_path)
    assert _split_layers(c)
    (tmp_path / "main.c").write_text(SAN_MAIN)
    exe = tmp_path / "san_train"
    cmd = ["gcc", "-O1", "-g", "-std=c99", "-ffp-contract=off", "-Wall", "-Wextra", "-Werror",
           "-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-fno-omit-frame-pointer",
           f"-I{out}", f"-I{out / 'kernels'}", str(out / "model.c"), str(out / "weights.c"),
           *map(str, sorted((out / "kernels").glob("*.c"))), str(tmp_path / "main.c"), "-o", str(exe), "-lm"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    assert r.returncode == 0 and not r.stderr, r.stderr[-3000:]
    data = random_data(c, 3, seed=21)
    stdin = np.uint32(3).tobytes() + b"".join(data.x[i].tobytes() + np.int32(data.y[i]).tobytes() for i in range(3))
    r = subprocess.run([str(exe)], input=stdin, capture_output=True, timeout=300)
    assert r.returncode == 0 and b"runtime error" not in r.stderr, r.stderr.decode(errors="replace")[-3000:]
    host = HostTrainer(out)
    host.init(7)
    for i in range(3):
        host.step(data.x[i], data.y[i])
    assert r.stdout == host.params()
