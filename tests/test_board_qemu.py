"""The board runtime end to end in QEMU, UART0 on a loopback TCP socket that pyserial opens as
socket://127.0.0.1:PORT: flashing through the pockmcu bootloader (AN3155), streamed training equal to
host simulation (also through a link that drops, duplicates and corrupts bytes), pulling the trained
model, a power cut during a checkpoint save, Ctrl-C, and what users get wrong."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
from conftest import tflm_run

from pockmcu import digits
from pockmcu.board import bootloader as B
from pockmcu.board import firmware
from pockmcu.board.client import Link, NoAnswer, open_board
from pockmcu.board.emulate import Emulator, free_port, port_in_use
from pockmcu.board.image import load_image
from pockmcu.board.proxy import LossyProxy
from pockmcu.train import HostTrainer, stream


def _gen(tmp, scheme):
    from pockmcu.codegen import write_project
    from pockmcu.compiler import TrainOptions, compile_model, parse_size

    c = compile_model(digits.model_path(), ram=parse_size("256KB"), train=TrainOptions(spec=digits.spec_json(scheme)))
    return write_project(c, tmp / scheme)


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("board")
    out = _gen(tmp, "sparse")
    train, test = digits.datasets()
    np.savez(tmp / "train.npz", x=train.x, y=train.y)
    np.savez(tmp / "test.npz", x=test.x, y=test.y)
    cli_env = dict(os.environ, XDG_CACHE_HOME=str(tmp / "cache"))
    return dict(tmp=tmp, out=out, train=train, test=test, env=cli_env)


def pockmcu(env, *args, timeout=300):
    return subprocess.run([sys.executable, "-m", "pockmcu.cli", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, env=env["env"])


def one_line_error(r, needle):
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr, r.stderr
    assert needle.lower() in r.stderr.lower(), r.stderr


def host_params(out, data, order, seed):
    h = HostTrainer(out)
    h.init(seed)
    for i in order:
        h.step(data.x[i], data.y[i])
    return h.params()


def label(y) -> bytes:
    return np.int32(y).tobytes()


# ---------------------------------------------------------------- the whole story


def test_flash_train_pull_end_to_end(env):
    out, tmp = env["out"], env["tmp"]
    with Emulator(out, "qemu-m4", bootloader_only=True) as emu:
        r = pockmcu(env, "flash", "--port", emu.url, out, "--target", "qemu-m4")
        assert r.returncode == 0, r.stderr
        assert "verified" in r.stdout and "the application is running" in r.stdout
        r = pockmcu(env, "train", "--port", emu.url, "--data", tmp / "train.npz", "--epochs", 3, "--seed", 4,
                    "--eval", tmp / "test.npz")
        assert r.returncode == 0, r.stderr
        print(r.stdout)
        rows = re.findall(r"epoch (\d)/3: loss ([\d.]+), train accuracy ([\d.]+), eval accuracy ([\d.]+)", r.stdout)
        assert len(rows) == 3
        loss = [float(x[1]) for x in rows]
        acc = [float(x[2]) for x in rows]
        ev = [float(x[3]) for x in rows]
        ev0 = float(re.search(r"before training: eval accuracy ([\d.]+)", r.stdout).group(1))
        assert loss[0] > loss[1] > loss[2] and acc[0] < acc[1] < acc[2] and ev0 < 0.2 < ev[0] < ev[2]
        assert "1881 samples applied (device steps 1881)" in r.stdout
        r = pockmcu(env, "pull", "--port", emu.url, "-o", tmp / "trained.tflite", "--params", tmp / "pulled.bin")
        assert r.returncode == 0, r.stderr
    # host simulation of the same samples, epochs and seed
    h = HostTrainer(out)
    before = h.evaluate(env["test"])
    h.train(env["train"], 3, seed=4, log=lambda *_: None)
    from pockmcu.train import read_params

    assert b"".join(d for _, _, d in read_params(tmp / "pulled.bin")) == h.params()
    y_host = h.model.invoke(env["test"].x).reshape(len(env["test"].x), -1)
    y_tflm = tflm_run(tmp / "trained.tflite", env["test"].x).reshape(len(env["test"].x), -1)
    assert np.array_equal(y_host, y_tflm)            # TFLite Micro on the pulled model = host simulation
    final = float(np.mean(np.argmax(y_tflm, 1) == env["test"].y))
    assert before < 0.2 and final > 0.8 and abs(final - ev[2]) <= 0.0005, (before, final, ev)


# ---------------------------------------------------------------- a bad link


def test_lossy_link_applies_every_sample_exactly_once(env):
    out, train = env["out"], env["train"]
    # (2,000 samples and throughput at 0 / 0.1 / 1% damage: python -m pockmcu.bench --serial)
    order = np.concatenate(stream(len(train.x), 4, 11))[:300]
    with Emulator(out, "qemu-m4") as emu:
        proxy = LossyProxy(emu.port, rate=0.01, seed=5)
        try:
            c = open_board(proxy.url, timeout=0.1)
            c.set_seed(11)
            t0 = time.monotonic()
            for k, i in enumerate(order):
                r = c.train(k, label(train.y[i]), train.x[i].tobytes())
                assert r.sample_id == k and r.steps == k + 1
            params = c.read_params(c.info.params_bytes)
            st = c.get_stats()
            elapsed = time.monotonic() - t0
            c.link.close()
        finally:
            proxy.close()
    print(f"\n{len(order)} samples through 1% damage in {elapsed:.1f} s: link {c.stats}; proxy {proxy.counts}; "
          f"device: {st.duplicates} repeats answered from memory, {st.bad_frames} bad frames")
    assert st.steps == len(order) and st.api_steps == len(order) and st.samples == len(order)
    assert params == host_params(out, train, order, 11)
    assert proxy.damaged() > 300 and c.stats.retransmissions > 150 and st.duplicates > 10


# ---------------------------------------------------------------- power loss, reset, Ctrl-C


def test_power_cut_during_a_save_keeps_the_previous_checkpoint(env):
    out, train = env["out"], env["train"]
    with Emulator(out, "qemu-m4") as emu:
        c = open_board(emu.url, connect_timeout=5)
        assert c.info.has_checkpoints and c.info.test_hooks and not c.info.restored
        c.set_seed(2)
        for k in range(40):
            c.train(k, label(train.y[k]), train.x[k].tobytes())
        assert c.save() == (1, 0)
        p1 = c.read_params(c.info.params_bytes)
        for k in range(40, 80):
            c.train(k, label(train.y[k]), train.x[k].tobytes())
        p2 = c.read_params(c.info.params_bytes)
        assert p2 != p1
        # power lost in the middle of writing the parameters into slot 1: erase (4096) + 1500 bytes
        with pytest.raises(NoAnswer):
            c.save(cut_after=4096 + 1500)
        info = c.connect()                           # the device rebooted through the bootloader
        assert info.restored and info.ckpt_seq == 1
        assert c.read_params(info.params_bytes) == p1 and c.get_stats().steps == 40
        # the checkpoint holds the training state too (RNG streams, step count): resuming from it
        # and replaying samples 40..79 (new sample ids) lands on exactly the bytes of the first run
        for k in range(40, 80):
            c.train(1000 + k, label(train.y[k]), train.x[k].tobytes())
        assert c.read_params(info.params_bytes) == p2
        # a complete save after the cut, then a reset: the new one is restored
        for k in range(80, 90):
            c.train(k, label(train.y[k]), train.x[k].tobytes())
        p3 = c.read_params(info.params_bytes)
        assert c.save() == (2, 1)
        c.reset()
        assert c.info.restored and c.info.ckpt_seq == 2
        assert c.read_params(info.params_bytes) == p3 and c.get_stats().steps == 90
        c.link.close()


def test_ctrl_c_leaves_the_device_consistent(env):
    out, tmp, train = env["out"], env["tmp"], env["train"]
    with Emulator(out, "qemu-m4") as emu:
        p = subprocess.Popen([sys.executable, "-m", "pockmcu.cli", "train", "--port", emu.url, "--data",
                              str(tmp / "train.npz"), "--epochs", "3", "--seed", "9"], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, env=env["env"])
        first = p.stdout.readline()                  # "training on ...": Ctrl-C is handled from here on
        assert first.startswith("training on"), (first, p.stderr.read() if p.poll() is not None else "")
        time.sleep(1.5)
        p.send_signal(signal.SIGINT)
        stdout, stderr = p.communicate(timeout=30)
        assert p.returncode == 130, (stdout, stderr)
        assert "consistent" in stderr
        applied = int(re.search(r"(\d+) samples applied", stdout).group(1))
        assert 0 <= applied < 3 * len(train.x)
        c = open_board(emu.url, connect_timeout=5)
        assert c.get_stats().steps == applied
        params = c.read_params(c.info.params_bytes)
        c.link.close()
    assert params == host_params(out, train, np.concatenate(stream(len(train.x), 3, 9))[:applied], 9)


def test_emulate_command_runs_until_interrupted(env):
    port = free_port()
    p = subprocess.Popen([sys.executable, "-m", "pockmcu.cli", "emulate", str(env["out"]), "--target", "qemu-m4",
                          "--port", str(port)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env["env"])
    try:
        end = time.monotonic() + 60
        while not port_in_use(port):
            assert p.poll() is None and time.monotonic() < end, p.communicate()
            time.sleep(0.05)
        c = open_board(f"socket://127.0.0.1:{port}", connect_timeout=5)
        assert c.info.target == "qemu-m4" and c.info.training
        c.link.close()
        p.send_signal(signal.SIGINT)
        stdout, _ = p.communicate(timeout=15)
        assert p.returncode == 0 and f"socket://127.0.0.1:{port}" in stdout
        assert not port_in_use(port)                 # QEMU stopped with it
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


# ---------------------------------------------------------------- other QEMU machines


@pytest.mark.parametrize("target", ["qemu-m3", "qemu-m33", "qemu-m55"])
def test_other_machines_flash_train_and_restore(env, target):
    out, train = env["out"], env["train"]
    lay = firmware.layout_for(target, 2632)
    base, image = load_image(firmware.build_app(out, target), flash=(lay.flash_base, lay.flash_base + lay.flash_size))
    with Emulator(out, target, bootloader_only=True) as emu:
        with Link(emu.url, connect_timeout=5) as link:
            B.flash_image(B.enter(link, log=lambda *_: None), base, image, 2632, target, log=lambda *_: None)
        c = open_board(emu.url, connect_timeout=5)
        assert c.info.target == target
        c.set_seed(5)
        for k in range(30):
            c.train(k, label(train.y[k]), train.x[k].tobytes())
        p = c.read_params(c.info.params_bytes)
        c.save()
        c.reset()
        assert c.info.restored and c.read_params(c.info.params_bytes) == p
        c.link.close()
    assert p == host_params(out, train, range(30), 5)


# ---------------------------------------------------------------- what users get wrong


def test_unreachable_port(env):
    port = free_port()
    for args in (["train", "--port", f"socket://127.0.0.1:{port}", "--data", env["tmp"] / "train.npz"],
                 ["pull", "--port", f"socket://127.0.0.1:{port}", "-o", env["tmp"] / "x.tflite"],
                 ["flash", "--port", f"socket://127.0.0.1:{port}", env["out"], "--target", "qemu-m4"],
                 ["monitor", "--port", "/dev/ttyNOSUCH0"]):
        one_line_error(pockmcu(env, *args), "cannot open")


def test_device_that_does_not_answer(env):
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(4)
    conns = []

    def swallow():
        while True:
            try:
                s, _ = srv.accept()
            except OSError:
                return
            conns.append(s)

    threading.Thread(target=swallow, daemon=True).start()
    url = f"socket://127.0.0.1:{srv.getsockname()[1]}"
    try:
        t0 = time.monotonic()
        one_line_error(pockmcu(env, "train", "--port", url, "--data", env["tmp"] / "train.npz"), "does not answer")
        one_line_error(pockmcu(env, "flash", "--port", url, env["out"], "--target", "qemu-m4"), "does not answer")
        assert time.monotonic() - t0 < 30
    finally:
        srv.close()
        for s in conns:
            s.close()
    # a device in its bootloader does not speak the board protocol either
    with Emulator(env["out"], "qemu-m4", bootloader_only=True) as emu:
        one_line_error(pockmcu(env, "monitor", "--port", emu.url, "--count", 1), "does not answer")


def test_firmware_for_another_model_and_images_too_large(env):
    out, tmp = env["out"], env["tmp"]
    other = _gen(tmp, "last")                        # same network, other trained tensors: another hash
    assert firmware.model_hash(other) != firmware.model_hash(out)
    big = tmp / "big.bin"
    big.write_bytes(bytes(5 * 1024 * 1024))
    one_line_error(pockmcu(env, "flash", "--port", "socket://127.0.0.1:9", big, "--target", "qemu-m4"),
                   "too large for the flash")
    with Emulator(out, "qemu-m4") as emu:
        one_line_error(pockmcu(env, "pull", "--port", emu.url, "--out", other, "-o", tmp / "x.tflite"),
                       "hash mismatch")
        one_line_error(pockmcu(env, "train", "--port", emu.url, "--out", other, "--data", tmp / "train.npz"),
                       "hash mismatch")
        assert not (tmp / "x.tflite").exists()
        r = pockmcu(env, "monitor", "--port", emu.url, "--count", 2, "--interval", 0.1)
        assert r.returncode == 0 and "model " + firmware.model_hash(out).hex() in r.stdout, r.stderr
        # the device checks too: the board app enters the bootloader, which refuses the oversized image
        one_line_error(pockmcu(env, "flash", "--port", emu.url, big, "--address", "0x10000"),
                       "too large for the flash")
