"""`pockmcu emulate | flash | train | pull | monitor`: a board (or QEMU as one) over a serial line.

PORT is a device path (/dev/ttyACM0, COM3) or any pyserial URL (socket://127.0.0.1:PORT for
`pockmcu emulate`). Mistakes end with one line and exit status 2 (PockError).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from .. import argcheck as A
from ..errors import PockError
from ..export import export_tflite
from ..targets import get_target
from ..train import Data, load_data, stream, training_plan, write_params
from . import bootloader as B
from . import protocol as P
from .client import Link, open_board
from .emulate import Emulator
from .firmware import build_app, layout_for, model_hash, params_bytes, read_plan
from .image import load_image

# ------------------------------------------------------------------ model registry
# flash/emulate remember which OUT directory a model hash came from, so that pull (and train's data
# checks) find the original model without --out.


def _registry_path() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "pockmcu" / "boards.json"


def remember(out) -> None:
    try:
        p = _registry_path()
        p.parent.mkdir(parents=True, exist_ok=True)
        reg = json.loads(p.read_text()) if p.is_file() else {}
        reg[model_hash(out).hex()] = str(Path(out).resolve())
        fd, tmp = tempfile.mkstemp(dir=p.parent, prefix=".boards.")
        with os.fdopen(fd, "w") as f:
            json.dump(reg, f, indent=1)
        os.replace(tmp, p)
    except OSError:
        pass          # the registry is a convenience; --out always works


def find_out(hash_hex: str, out: str | None, port: str) -> Path:
    """The OUT directory of the model the device runs; PockError on a hash mismatch."""

    if out is not None:
        o = Path(out)
        if not (o / "plan.json").is_file():
            raise PockError(f"--out {out}: not a directory written by 'pockmcu gen'")
        mine = model_hash(o).hex()
        if mine != hash_hex:
            raise PockError(f"model hash mismatch: the firmware on {port} runs model {hash_hex}, {out} is model "
                            f"{mine}; flash {out} first or give the matching --out")
        return o
    try:
        reg = json.loads(_registry_path().read_text())
    except (OSError, ValueError):
        reg = {}
    o = reg.get(hash_hex)
    if o and (Path(o) / "plan.json").is_file() and model_hash(o).hex() == hash_hex:
        return Path(o)
    raise PockError(f"the firmware on {port} runs model {hash_hex}, which no known OUT directory holds; "
                    f"give --out OUT (the directory it was generated into)")


# ------------------------------------------------------------------ commands


def cmd_emulate(args) -> int:
    out = Path(args.out)
    emu = Emulator(out, args.target, port=args.port, bootloader_only=args.bootloader, console=sys.stdout)
    remember(out)
    what = "the bootloader, waiting for an image" if args.bootloader else "the board app"
    print(f"QEMU {emu.target}: {what}; UART0 on {emu.url}  (Ctrl-C stops QEMU)", flush=True)
    def on_term(signum, frame):
        raise KeyboardInterrupt

    # Install both handlers explicitly: a process started in the background by a non-interactive
    # shell inherits SIGINT as ignored, and Python then never raises KeyboardInterrupt.
    old = signal.signal(signal.SIGTERM, on_term)
    old_int = signal.signal(signal.SIGINT, on_term)
    emu.start()
    try:
        rc = emu.proc.wait()
    except KeyboardInterrupt:
        emu.stop()
        print("stopped QEMU", file=sys.stderr)
        return 0
    finally:
        emu.stop()
        signal.signal(signal.SIGTERM, old)
        signal.signal(signal.SIGINT, old_int)
    if rc != 0:
        raise PockError(f"QEMU exited with status {rc}")
    return 0


def cmd_flash(args) -> int:
    src = Path(args.image)
    params = None
    target = get_target(args.target).name if args.target else None
    if src.is_dir():
        if target is None:
            raise PockError("flashing a generated project needs --target (qemu-m4, stm32f746g-disco, ...)")
        params = params_bytes(read_plan(src))
        lay = layout_for(target, params)
        elf = build_app(src, target)
        base, image = load_image(elf, flash=(lay.flash_base, lay.flash_base + lay.flash_size))
    else:
        default = None
        if target is not None:
            default = layout_for(target, 0).app_base
        base, image = load_image(src, base=args.address if args.address is not None else default)
        if target is not None:
            lay = layout_for(target, 0)
    if target is not None:   # size check before touching the device
        limit = lay.ckpt_base if params else lay.flash_base + lay.flash_size
        if base + len(image) > limit:
            raise PockError(f"the image is {len(image)} bytes, too large for the flash: the application region of "
                            f"{target} at 0x{lay.app_base:08X} holds {limit - base} bytes")
    if args.port is None:
        if not src.is_dir():
            raise PockError("flashing a file needs --port (without it, flash only builds OUT's board app)")
        remember(src)
        print(f"built {elf} and {elf.with_suffix('.bin')} ({len(image)} bytes at 0x{base:08X}); flash it with "
              f"your board's tool, or give --port to flash it through an AN3155 bootloader")
        return 0
    with Link(args.port, baudrate=args.baud) as link:
        bl = B.enter(link, log=print)
        try:
            B.flash_image(bl, base, image, params, target, log=print)
        except PockError as exc:
            if not getattr(exc, "flash_untouched", False):
                raise
            try:                  # refused before erasing: start the application that is still there
                bl.go(exc.app_base)
            except (PockError, OSError):
                raise PockError(f"{exc}; the board stays in its bootloader (reset it to start its application)") \
                    from None
            raise PockError(f"{exc}; nothing was written and the board's application was started again") from None
    if src.is_dir():
        remember(src)
    print(f"flashed {len(image)} bytes at 0x{base:08X}; the application is running")
    return 0


class _Stop:
    """First Ctrl-C: finish the sample on the wire, then stop. Second: stop now."""

    def __init__(self):
        self.requested = False
        self.old = None

    def __enter__(self):
        self.old = signal.getsignal(signal.SIGINT)

        def handler(signum, frame):
            if self.requested:
                signal.signal(signal.SIGINT, self.old)
                raise KeyboardInterrupt
            self.requested = True
            sys.stderr.write("\nstopping after the current sample (Ctrl-C again to abort)\n")

        signal.signal(signal.SIGINT, handler)
        return self

    def __exit__(self, *exc):
        signal.signal(signal.SIGINT, self.old)


def _load_train_data(path: str, info: P.Info, out: Path | None):
    if out is not None:
        data = load_data(path, training_plan(out), "--data")
        A.check_finite(data.x, data.y, path, "--data")
        return data
    p = Path(path)
    if not p.is_file():
        raise PockError(f"--data {path}: no such file")
    try:
        with np.load(p, allow_pickle=False) as z:
            x, y = z["x"], z["y"]
    except Exception:
        raise PockError(f"--data {path}: not a .npz file with arrays 'x' and 'y'") from None
    per = x[0].nbytes if len(x) else 0
    if per != info.train_input_bytes:
        raise PockError(f"--data {path}: a sample of x is {per} bytes, the model on the device takes "
                        f"{info.train_input_bytes}")
    if len(y) != len(x):
        raise PockError(f"--data {path}: {len(x)} inputs but {len(y)} labels")
    A.check_finite(x, y, path, "--data")
    y = y.astype(np.int32) if np.issubdtype(y.dtype, np.integer) else y.astype(np.float32)
    return Data(x, y)


def _label_bytes(y, label_bytes: int) -> bytes:
    a = np.asarray(y)
    b = (a.astype(np.int32) if np.issubdtype(a.dtype, np.integer) else a.astype(np.float32)).tobytes()
    if len(b) != label_bytes:
        raise PockError(f"a label is {len(b)} bytes, the device takes {label_bytes}")
    return b


def _bar(done: int, total: int, loss: float, acc: float | None, extra: str = "") -> str:
    width = 24
    fill = int(width * done / max(1, total))
    a = f" acc {acc:.3f}" if acc is not None else ""
    return f"[{'#' * fill}{'.' * (width - fill)}] {done}/{total} loss {loss:.4f}{a}{extra}"


def evaluate_on_device(client, data) -> float:
    hits = 0
    for i in range(len(data.x)):
        y = np.frombuffer(client.infer(np.ascontiguousarray(data.x[i]).tobytes()), np.int8)
        hits += int(np.argmax(y)) == int(data.y[i])
    return hits / len(data.x)


def cmd_train(args) -> int:
    client = open_board(args.port, timeout=args.timeout, baudrate=args.baud)
    try:
        info = client.info
        if not info.training:
            raise PockError(f"the firmware on {args.port} was generated without --train; it cannot train")
        out = None
        if args.out is not None:
            out = find_out(info.hash_hex, args.out, args.port)
        else:
            try:
                out = find_out(info.hash_hex, None, args.port)
            except PockError:
                out = None
        data = _load_train_data(args.data, info, out)
        eval_data = _load_train_data(args.eval, info, out) if args.eval else None
        if eval_data is not None and (info.label_bytes != 4 or not np.issubdtype(eval_data.y.dtype, np.integer)):
            raise PockError("--eval measures classification accuracy; this model is trained on regression targets")
        if args.epochs < 1:
            raise PockError("--epochs must be at least 1")
        orders = stream(len(data.x), args.epochs, args.seed)
        tty = sys.stderr.isatty()
        sid = 0
        stopped = False
        t0 = time.monotonic()
        with _Stop() as stop:            # from here on Ctrl-C stops between requests, never inside one
            print(f"training on {info.target} at {args.port}: {len(data.x)} samples x {args.epochs} epochs, "
                  f"seed {args.seed}", flush=True)
            if args.lr is not None:
                client.set_lr(args.lr)
            if not args.resume:
                client.set_seed(args.seed)      # fresh parameters, the RNG seeded: as `pockmcu sim --train`
            client.clear_stats()
            first = client.get_stats().steps
            if eval_data is not None and not stop.requested:
                print(f"before training: eval accuracy {evaluate_on_device(client, eval_data):.3f}", flush=True)
            for e, order in enumerate(orders, 1):
                losses, correct = [], []
                for i, idx in enumerate(order, 1):
                    if stop.requested:
                        stopped = True
                        break
                    r = client.train(sid, _label_bytes(data.y[idx], info.label_bytes),
                                     np.ascontiguousarray(data.x[idx]).tobytes())
                    sid += 1
                    losses.append(r.loss)
                    correct.append(r.correct)
                    if tty and (i % 8 == 0 or i == len(order)):
                        extra = f"  resent {client.stats.retransmissions}" if client.stats.retransmissions else ""
                        sys.stderr.write(f"\repoch {e}/{args.epochs} " + _bar(
                            i, len(order), float(np.mean(losses)),
                            float(np.mean(correct)) if info.label_bytes == 4 else None, extra))
                        sys.stderr.flush()
                if tty:
                    sys.stderr.write("\r" + " " * 100 + "\r")
                if losses:
                    line = f"epoch {e}/{args.epochs}: loss {np.mean(losses):.4f}, train accuracy {np.mean(correct):.3f}"
                    if len(losses) < len(order):
                        line += f" ({len(losses)} of {len(order)} samples)"
                    if eval_data is not None and not stopped:
                        line += f", eval accuracy {evaluate_on_device(client, eval_data):.3f}"
                    print(line, flush=True)
                if stopped or stop.requested:
                    stopped = True
                    break
            st = client.get_stats()
            applied = st.steps - first
            if args.save:
                seq, slot = client.save()
                print(f"saved checkpoint {seq} (slot {slot})")
        ls = client.stats
        print(f"{applied} samples applied (device steps {st.steps}) in {time.monotonic() - t0:.1f} s; "
              f"link: {ls.retransmissions} retransmissions, {ls.device_frame_errors} damaged frames reported by "
              f"the device, {ls.bad_frames_received} damaged answers")
        if applied != sid:
            raise PockError(f"the device applied {applied} samples but {sid} were sent")
        if stopped:
            print("interrupted: the device is consistent (every sample sent was applied exactly once)",
                  file=sys.stderr)
            return 130
        return 0
    finally:
        client.link.close()


def cmd_pull(args) -> int:
    A.output_file(args.output)
    A.output_file(args.params, "--params")
    client = open_board(args.port, timeout=args.timeout, baudrate=args.baud)
    try:
        info = client.info
        if not info.training:
            raise PockError(f"the firmware on {args.port} was generated without --train; it has no trained "
                            f"parameters")
        out = find_out(info.hash_hex, args.out, args.port)
        plan = training_plan(out)
        want = sum(t["bytes"] for t in plan["training"]["trainable"])
        if want != info.params_bytes:
            raise PockError(f"the device holds {info.params_bytes} parameter bytes, {out} expects {want}")
        raw = client.read_params(info.params_bytes)
        st = client.get_stats()
    finally:
        client.link.close()
    with tempfile.TemporaryDirectory(prefix="pockmcu-pull-") as tmp:
        pbin = Path(args.params) if args.params else Path(tmp) / "P.bin"
        write_params(pbin, plan, raw)
        n = export_tflite(out, pbin, args.output)
    print(f"wrote {args.output}: {n} trained tensors from {info.target} (after {st.steps} training steps), "
          f"model {out / plan['model_file']}")
    return 0


def format_stats(st: P.Stats) -> str:
    acc = f"{st.accuracy:.3f}" if st.accuracy is not None else "-"
    wacc = f"{st.window_accuracy:.3f}" if st.window_accuracy is not None else "-"
    return (f"steps {st.steps}  loss {st.window_loss:.4f} acc {wacc} (last {st.window})  "
            f"since clear: {st.samples} samples, loss {st.mean_loss:.4f}, acc {acc}  "
            f"infer {st.inferences}  repeats {st.duplicates}  bad frames {st.bad_frames}  "
            f"checkpoint {st.ckpt_seq}  up {st.uptime_ms / 1000:.1f} s")


def cmd_monitor(args) -> int:
    client = open_board(args.port, timeout=args.timeout, baudrate=args.baud)
    info = client.info
    print(f"{info.target}: model {info.hash_hex}, firmware {info.firmware >> 8}.{info.firmware & 255}, "
          f"RAM {info.ram_used} of {info.ram_budget} B (stack {info.stack_used} B used), "
          f"flash {info.flash_used} of {info.app_bytes} B, checkpoint {info.ckpt_seq}"
          + (" (restored at boot)" if info.restored else ""), flush=True)
    tty = sys.stdout.isatty()
    n = 0
    try:
        while args.count is None or n < args.count:
            line = format_stats(client.get_stats())
            if tty:
                sys.stdout.write("\r" + line[:200] + "\x1b[K")
            else:
                sys.stdout.write(line + "\n")
            sys.stdout.flush()
            n += 1
            if args.count is None or n < args.count:
                time.sleep(args.interval)
    except KeyboardInterrupt:
        pass
    finally:
        if tty:
            sys.stdout.write("\n")
        client.link.close()
    return 0


def add_commands(sub) -> None:
    """Register emulate, flash, train, pull and monitor on the `pockmcu` subparsers."""
    def port_args(p, required=True):
        p.add_argument("--port", required=required, metavar="PORT",
                       help="serial device (/dev/ttyACM0) or pyserial URL (socket://127.0.0.1:N)")
        p.add_argument("--baud", type=A.BAUD, default=115200, help="baud rate of a serial device (default 115200)")
        p.add_argument("--timeout", type=A.TIMEOUT, default=None,
                       help="seconds to wait for the first answer of each kind before resending (default 0.25 on "
                            "sockets, 0.5); later waits follow the measured round trip, doubling after silence")

    e = sub.add_parser("emulate", help="run a QEMU machine as a board, UART0 on a TCP port",
                       description="Start QEMU with the pockmcu bootloader and the board app of OUT (or the "
                                   "bootloader alone, waiting for an image), UART0 on 127.0.0.1:PORT. Runs until "
                                   "interrupted; stops QEMU with it.")
    e.add_argument("out", metavar="OUT", help="directory written by 'pockmcu gen'")
    e.add_argument("--target", default="qemu-m4", help="qemu-m3, qemu-m4, qemu-m7, qemu-m33, qemu-m55")
    e.add_argument("--bootloader", action="store_true", help="start the bootloader only, waiting for 'pockmcu flash'")
    e.add_argument("--port", type=A.TCP_PORT, default=None, help="TCP port on 127.0.0.1 (default: a free one)")
    e.set_defaults(func=cmd_emulate)

    f = sub.add_parser("flash", help="flash firmware through an AN3155 bootloader",
                       description="Build OUT's board app for --target (or take a .bin/.elf) and write it through "
                                   "the STM32 system bootloader protocol (AN3155): the pockmcu QEMU bootloader or "
                                   "a real STM32 in its ROM bootloader; verify by read-back and start it. Without "
                                   "--port: only build OUT's board app (build/<target>-board/pockmcu_model.bin), "
                                   "for boards flashed with their own tools (nRF52840, RP2350).")
    f.add_argument("image", metavar="OUT|FILE", help="a 'pockmcu gen' directory, or a .bin/.elf file")
    f.add_argument("--target", help="the board or QEMU machine (needed with OUT; checks the device with a file)")
    f.add_argument("--address", type=A.ADDRESS, default=None, help="where a .bin goes (default: the target's "
                                                                  "application base)")
    port_args(f, required=False)
    f.set_defaults(func=cmd_flash)

    t = sub.add_parser("train", help="stream training samples to a board",
                       description="Stream DATA to the board app: every sample applied exactly once, with a "
                                   "progress bar, loss and accuracy. The same data, epochs and seed give the "
                                   "parameters 'pockmcu sim --train' gives. Ctrl-C stops after the current "
                                   "sample.")
    port_args(t)
    t.add_argument("--data", required=True, metavar="DATA.npz", help="x (inputs) and y (labels or targets)")
    t.add_argument("--epochs", type=A.EPOCHS, default=1, help=f"passes over DATA (default 1, at most {A.MAX_EPOCHS})")
    t.add_argument("--seed", type=A.SEED, default=0, help="sample order and stochastic rounding seed (default 0)")
    t.add_argument("--eval", metavar="TEST.npz", help="accuracy on the device (INFER) after every epoch")
    t.add_argument("--lr", type=A.LR, default=None, help="set the learning rate first")
    t.add_argument("--resume", action="store_true", help="keep the device's parameters (no SET_SEED)")
    t.add_argument("--save", action="store_true", help="save a checkpoint at the end (also after Ctrl-C)")
    t.add_argument("--out", metavar="OUT", help="the model's gen directory (checks the model hash and the data)")
    t.set_defaults(func=cmd_train)

    p = sub.add_parser("pull", help="read the trained parameters and write the trained model",
                       description="Read the parameters from the board app and write the original model with "
                                   "them (as 'pockmcu export').")
    port_args(p)
    p.add_argument("-o", "--output", required=True, metavar="trained.tflite")
    p.add_argument("--out", metavar="OUT", help="the model's gen directory (default: found by the model hash)")
    p.add_argument("--params", metavar="P.bin", help="also keep the parameters as a P.bin file")
    p.set_defaults(func=cmd_pull)

    m = sub.add_parser("monitor", help="live training statistics of a board",
                       description="Print the board's info, then its statistics every --interval seconds.")
    port_args(m)
    m.add_argument("--interval", type=A.INTERVAL, default=0.5, help="seconds between readings (default 0.5)")
    m.add_argument("--count", type=A.COUNT, default=None, help="stop after this many readings")
    m.set_defaults(func=cmd_monitor)
