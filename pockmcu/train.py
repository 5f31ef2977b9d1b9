"""Training sessions: the same generated train_step in host simulation (cffi) or in QEMU.

Both runs see the same sample stream (the seeded per-epoch permutation is
made here, in Python) and the same C code, so the parameters they end with
are byte-identical. The parameter file (P.bin) is a small header plus the
trainable tensors back to back, as ``pockmcu_params_read`` lays them out (each
as stored in RAM: a split CONV_2D weight holds only its trained channels, see
pockmcu/training/params.py, whose ``expand`` gives the full tensors):

    "PKMP" u32 version=1, u32 count, then per tensor: u16 name length,
    name (utf-8), u8 dtype (0 int8, 1 int32), u32 bytes; then all tensor data.
"""

from __future__ import annotations

import os
import struct
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .build import build_target
from .errors import PockError
from .qemu import run_app
from .sim import load, read_plan
from .targets import get_target, instructions_from_ticks

DTYPE_CODES = {"int8": 0, "int32": 1}


@dataclass
class Data:
    x: np.ndarray
    y: np.ndarray        # int32 labels (xent) or float32 targets (mse)


def training_plan(out) -> dict:
    plan = read_plan(out)
    if not plan.get("training"):
        raise PockError(f"{out}: generated without --train; run 'pockmcu gen MODEL --train ...' first")
    return plan


def load_data(path, plan: dict, what: str = "--train") -> Data:
    p = Path(path)
    if not p.is_file():
        raise PockError(f"{what} {path}: no such file")
    try:
        with np.load(p, allow_pickle=False) as z:
            if "x" not in z or "y" not in z:
                raise PockError(f"{what} {path}: needs arrays 'x' (inputs) and 'y' (labels or targets); "
                                f"has {', '.join(z.files) or 'none'}")
            x, y = z["x"], z["y"]
    except PockError:
        raise
    except Exception:
        raise PockError(f"{what} {path}: not a .npz file (write it with numpy.savez(path, x=..., y=...))") from None
    spec = plan["inputs"][0]
    shape, dtype = tuple(spec["shape"]), np.dtype(spec["dtype"])
    if x.dtype != dtype:
        raise PockError(f"{what} {path}: x has dtype {x.dtype}, the model takes {dtype}")
    if x.ndim != len(shape) or x.shape[1:] != shape[1:]:
        raise PockError(f"{what} {path}: x has shape {list(x.shape)}, expected [N, {', '.join(map(str, shape[1:]))}]")
    n = x.shape[0]
    if n == 0:
        raise PockError(f"{what} {path}: no samples")
    tr = plan["training"]
    if tr["loss"] == "xent":
        classes = plan["outputs"][0]["shape"][-1]
        if y.shape != (n,) or not np.issubdtype(y.dtype, np.integer):
            raise PockError(f"{what} {path}: y must be {n} integer class labels, has {y.dtype} {list(y.shape)}")
        bad = (y < 0) | (y >= classes)
        if bad.any():
            raise PockError(f"{what} {path}: label {int(y[bad][0])} at sample {int(np.argmax(bad))} is outside "
                            f"the model's {classes} classes (0..{classes - 1})")
        return Data(x=x, y=y.astype(np.int32))
    out = plan["outputs"][0]
    want = (n,) + tuple(out["shape"][1:])
    if y.size != int(np.prod(want)):
        raise PockError(f"{what} {path}: y must hold targets of shape {list(want)}, has {list(y.shape)}")
    y = y.reshape(want)
    if np.issubdtype(y.dtype, np.integer) and out["dtype"] in ("int8", "uint8"):   # quantized targets -> real values
        y = (out["scale"] * (y.astype(np.float64) - out["zero_point"])).astype(np.float32)
    return Data(x=x, y=y.astype(np.float32))


def stream(n: int, epochs: int, seed: int) -> list[np.ndarray]:
    """The sample order of every epoch: a permutation drawn from the seed."""
    rng = np.random.default_rng(seed)
    return [rng.permutation(n) for _ in range(epochs)]


def params_header(plan: dict) -> bytes:
    tensors = plan["training"]["trainable"]
    parts = [b"PKMP", struct.pack("<II", 1, len(tensors))]
    for t in tensors:
        name = t["tensor"].encode()
        dtype = t.get("dtype") or ("int32" if t["c"].endswith("bias_ram") else "int8")
        parts.append(struct.pack("<H", len(name)) + name + struct.pack("<BI", DTYPE_CODES[dtype], t["bytes"]))
    return b"".join(parts)


def write_params(path, plan: dict, raw: bytes) -> None:
    data = params_header(plan) + raw
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", dir=p.parent)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.replace(tmp, p)


def read_params(path) -> list[tuple[str, str, bytes]]:
    p = Path(path)
    if not p.is_file():
        raise PockError(f"--params {path}: no such file")
    b = p.read_bytes()
    try:
        if b[:4] != b"PKMP":
            raise ValueError
        version, count = struct.unpack_from("<II", b, 4)
        pos, meta = 12, []
        for _ in range(count):
            (ln,) = struct.unpack_from("<H", b, pos)
            name = b[pos + 2:pos + 2 + ln].decode()
            code, nbytes = struct.unpack_from("<BI", b, pos + 2 + ln)
            meta.append((name, {0: "int8", 1: "int32"}[code], nbytes))
            pos += 2 + ln + 5
        out = []
        for name, dtype, nbytes in meta:
            if pos + nbytes > len(b):
                raise ValueError
            out.append((name, dtype, b[pos:pos + nbytes]))
            pos += nbytes
        return out
    except (ValueError, struct.error, KeyError, UnicodeDecodeError):
        raise PockError(f"--params {path}: not a pockmcu parameter file (written by --save-params)") from None


class Progress:
    """A one-line progress bar on a terminal; per-epoch lines otherwise."""

    def __init__(self, total: int, epoch: int, epochs: int, out=sys.stderr):
        self.total, self.epoch, self.epochs, self.out = total, epoch, epochs, out
        self.tty = out.isatty()
        self.t0 = time.time()

    def update(self, done: int, loss: float, acc: float | None) -> None:
        if not self.tty or (done % 16 and done != self.total):
            return
        width = 30
        fill = int(width * done / self.total)
        acc_text = f" acc {acc:.3f}" if acc is not None else ""
        self.out.write(f"\repoch {self.epoch}/{self.epochs} [{'#' * fill}{'.' * (width - fill)}] "
                       f"{done}/{self.total} loss {loss:.4f}{acc_text}")
        self.out.flush()

    def close(self) -> None:
        if self.tty:
            self.out.write("\r" + " " * 90 + "\r")


def _summary(epoch: int, epochs: int, losses, corrects, xent: bool, eval_acc) -> dict:
    row = dict(epoch=epoch, loss=float(np.mean(losses)))
    if xent:
        row["train_accuracy"] = float(np.mean(corrects))
    if eval_acc is not None:
        row["eval_accuracy"] = eval_acc
    return row


def format_epoch(row: dict, epochs: int) -> str:
    text = f"epoch {row['epoch']}/{epochs}: loss {row['loss']:.4f}"
    if "train_accuracy" in row:
        text += f", train accuracy {row['train_accuracy']:.3f}"
    if "eval_accuracy" in row:
        text += f", eval accuracy {row['eval_accuracy']:.3f}"
    return text


class HostTrainer:
    """train_step through cffi, in this process (the training API is declared by OUT/model.h, which
    pockmcu.sim reads)."""

    def __init__(self, out):
        self.plan = training_plan(out)
        self.model = load(out)
        self.ffi, self.lib = self.model.ffi, self.model.lib
        self.xent = self.plan["training"]["loss"] == "xent"

    def init(self, seed: int) -> None:
        if self.lib.pockmcu_train_init(seed & 0xFFFFFFFF) != 0:
            raise PockError("pockmcu_train_init failed")

    def step(self, x: np.ndarray, y) -> tuple[float, int, int]:
        sample = np.ascontiguousarray(x)
        self.ffi.memmove(self.lib.pockmcu_input(0), sample.tobytes(), sample.nbytes)
        label = np.ascontiguousarray(np.asarray(y, np.int32 if self.xent else np.float32).reshape(-1))
        res = self.ffi.new("pockmcu_step_result *")
        rc = self.lib.pockmcu_train_step(self.ffi.from_buffer(label), res)
        if rc != 0:
            raise PockError(f"pockmcu_train_step failed ({rc})")
        return float(res.loss), int(res.prediction), int(res.correct)

    def params(self) -> bytes:
        n = self.lib.pockmcu_params_bytes()
        buf = self.ffi.new("uint8_t[]", n)
        self.lib.pockmcu_params_read(buf)
        return bytes(self.ffi.buffer(buf, n))

    def evaluate(self, data: Data) -> float | None:
        if not self.xent:
            return None
        y = self.model.invoke(data.x)
        return float(np.mean(np.argmax(y.reshape(len(y), -1), axis=1) == data.y))

    def train(self, data: Data, epochs: int, seed: int, eval_data: Data | None = None, log=print) -> list[dict]:
        self.init(seed)
        history = []
        for e, order in enumerate(stream(len(data.x), epochs, seed), 1):
            bar = Progress(len(order), e, epochs)
            losses, corrects = [], []
            for i, idx in enumerate(order, 1):
                loss, _, correct = self.step(data.x[idx], data.y[idx])
                losses.append(loss)
                corrects.append(correct)
                bar.update(i, float(np.mean(losses)), float(np.mean(corrects)) if self.xent else None)
            bar.close()
            row = _summary(e, epochs, losses, corrects, self.xent, self.evaluate(eval_data) if eval_data else None)
            history.append(row)
            log(format_epoch(row, epochs))
        return history


def train_stream_bytes(plan: dict, data: Data, epochs: int, seed: int, timed: bool = False) -> tuple[bytes, int]:
    orders = stream(len(data.x), epochs, seed)
    steps = sum(len(o) for o in orders)
    sample = plan["inputs"][0]["bytes"]
    label_bytes = 4 * (1 if plan["training"]["loss"] == "xent" else int(np.prod(plan["training"]["label_shape"])))
    head = struct.pack("<7I", 0x52544B50, 1, seed & 0xFFFFFFFF, steps, sample, label_bytes, 1 if timed else 0)
    body = []
    for order in orders:
        for idx in order:
            body.append(np.ascontiguousarray(data.x[idx]).tobytes())
            body.append(np.asarray(data.y[idx]).astype(np.int32 if label_bytes == 4 and
                                                       plan["training"]["loss"] == "xent" else np.float32).tobytes())
    return head + b"".join(body), steps


def train_on_target(out, target: str, data: Data, epochs: int, seed: int, timed: bool = False,
                    log=print) -> tuple[list[dict], bytes, list[int]]:
    """Train in QEMU; returns (per-epoch history, raw parameters, per-step instruction counts if timed)."""

    plan = training_plan(out)
    t = get_target(target)
    if t.qemu_machine is None:
        raise PockError(f"target {target} is a real board; use a qemu-* target, or 'pockmcu train --port' for a board")
    stream_bytes, steps = train_stream_bytes(plan, data, epochs, seed, timed)
    elf = build_target(Path(out), t.name, app="semihost_train")
    files = run_app(elf, t.name, {"train.bin": stream_bytes}, ["steps.bin", "params.bin"], profile=timed,
                    timeout=120 + steps * 0.05)
    raw_steps = files["steps.bin"]
    magic, _, hz, overhead = struct.unpack_from("<4I", raw_steps, 0)
    recs = np.frombuffer(raw_steps[16:], dtype=np.dtype([("loss", "<f4"), ("pred", "<i4"), ("correct", "<i4"),
                                                         ("ticks", "<u4")]))
    if magic != 0x53544B50 or len(recs) != steps:
        raise PockError(f"{target}: the training firmware stopped after {len(recs)} of {steps} steps")
    xent = plan["training"]["loss"] == "xent"
    history, pos = [], 0
    n = len(data.x)
    for e in range(1, epochs + 1):
        r = recs[pos:pos + n]
        pos += n
        row = _summary(e, epochs, r["loss"], r["correct"], xent, None)
        history.append(row)
        log(format_epoch(row, epochs))
    instr = [instructions_from_ticks(int(tk) - overhead, hz) for tk in recs["ticks"]] if timed else []
    return history, files["params.bin"], instr

