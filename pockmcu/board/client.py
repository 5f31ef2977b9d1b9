"""Host side of the board protocol over pyserial: a device path (/dev/ttyACM0, COM3) or any pyserial
URL (socket://127.0.0.1:PORT for QEMU, rfc2217://, loop://).

Stop-and-wait with retransmission: every request carries a sequence number; the host resends it
when the answer does not come within the timeout, when the answer arrives damaged, or when the device
reports that it received a damaged frame. The device answers a repeated request from its cache
without applying it again, so each request - each training sample - is applied exactly once.
"""

from __future__ import annotations

import socket
import struct
import time
from dataclasses import dataclass, field

import serial

from ..errors import PockError
from ..qemu import ICOUNT_SHIFT, RunResult
from ..targets import instructions_from_ticks
from . import protocol as P


class DeviceError(PockError):
    """The device answered with an error frame (code in .code)."""

    def __init__(self, code: int, request: int, text: str):
        name = P.NAMES.get(request, f"0x{request:02x}")
        super().__init__(f"the device refused {name}: {text or P.ERROR_NAMES.get(code, code)}")
        self.code = code


class NoAnswer(PockError):
    pass


class Link:
    """A serial line: open with one clear error, non-blocking reads, TCP_NODELAY on sockets."""

    def __init__(self, port: str, baudrate: int = 115200, parity: str = "N", connect_timeout: float = 0.0):
        self.port = port
        self.baudrate = baudrate
        deadline = time.monotonic() + connect_timeout
        while True:
            try:
                self.ser = serial.serial_for_url(port, baudrate=baudrate, parity=parity, timeout=0,
                                                 write_timeout=10, do_not_open=False)
                break
            except (serial.SerialException, OSError, ValueError) as exc:
                if time.monotonic() >= deadline:
                    raise PockError(f"cannot open {port}: {_reason(exc)}") from None
                time.sleep(0.05)
        sock = getattr(self.ser, "_socket", None)
        if sock is not None:  # each small round trip costs ~40 ms without it
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.is_socket = sock is not None or "://" in port

    def set_parity(self, parity: str) -> None:
        """'N' (the board app) or 'E' (an STM32 ROM bootloader: 8E1); no effect on sockets."""
        if not self.is_socket and self.ser.parity != parity:
            self.ser.parity = parity

    def write(self, data: bytes) -> None:
        try:
            self.ser.write(data)
        except (serial.SerialException, OSError) as exc:
            raise PockError(f"{self.port}: connection lost ({_reason(exc)})") from None

    def read(self, wait: float) -> bytes:
        """Whatever arrives within `wait` seconds (returns as soon as something is there)."""

        deadline = time.monotonic() + max(0.0, wait)
        try:
            while True:
                n = self.ser.in_waiting
                if n:
                    return self.ser.read(n)
                left = deadline - time.monotonic()
                if left <= 0:
                    return b""
                self.ser.timeout = min(left, 0.05)
                b = self.ser.read(1)
                self.ser.timeout = 0
                if b:
                    return b + (self.ser.read(self.ser.in_waiting) if self.ser.in_waiting else b"")
        except (serial.SerialException, OSError) as exc:
            raise PockError(f"{self.port}: connection lost ({_reason(exc)})") from None

    def drain(self, quiet: float = 0.05, limit: float = 1.0) -> bytes:
        """Read until the line has been quiet for `quiet` seconds (at most `limit`)."""
        got = bytearray()
        end = time.monotonic() + limit
        while time.monotonic() < end:
            b = self.read(quiet)
            if not b:
                break
            got += b
        return bytes(got)

    def close(self) -> None:
        try:
            self.ser.close()
        except Exception:
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _reason(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    if "Connection refused" in text or "[Errno 111]" in text:
        return "connection refused (nothing listens there; is QEMU / pockmcu emulate running?)"
    if "No such file" in text or "[Errno 2]" in text:
        return "no such device"
    return text


@dataclass
class LinkStats:
    requests: int = 0
    frames_sent: int = 0
    retransmissions: int = 0
    timeouts: int = 0
    bad_frames_received: int = 0
    device_frame_errors: int = 0     # error frames: the device got a damaged frame
    stale_frames: int = 0            # answers to an earlier attempt or request
    by_reason: dict = field(default_factory=dict)


class Client:
    """Requests with retransmission. `timeout`: seconds to wait for an answer before resending."""

    def __init__(self, link: Link, timeout: float | None = None, retries: int = 60):
        self.link = link
        self.timeout = timeout if timeout is not None else (0.25 if link.is_socket else 0.5)
        self.retries = retries
        self.seq = 0
        self.deframer = P.Deframer()
        self.stats = LinkStats()
        self.info: P.Info | None = None
        self.rtt: dict[int, float] = {}   # per request type: smoothed round trip of first attempts

    def _next_seq(self) -> int:
        self.seq = (self.seq + 1) & 0xFFFF
        if self.seq == P.SEQ_NONE:
            self.seq = 0
        return self.seq

    def _wire_time(self, nbytes: int) -> float:
        return 0.0 if self.link.is_socket else nbytes * 10.0 / max(1, self.link.baudrate)

    def request(self, type_: int, payload: bytes = b"", timeout: float | None = None,
                retries: int | None = None) -> bytes:
        """Send one request until its answer arrives; returns the answer's payload."""
        seq = self._next_seq()
        frame = P.encode_frame(type_, seq, payload)
        base = timeout if timeout is not None else self.timeout
        # a slow request (a training step of a big model on a slow board) must not be resent while it runs:
        # wait at least 4x its usual round trip (measured on first attempts only)
        wait = max(base, 4 * self.rtt.get(type_, 0.0)) + 2 * self._wire_time(len(frame) + 64)
        retries = self.retries if retries is None else retries
        self.stats.requests += 1
        attempt = 0
        t_first = time.monotonic()
        while True:
            self.link.write(frame)
            self.stats.frames_sent += 1
            deadline = time.monotonic() + wait
            resend = None
            while resend is None:
                left = deadline - time.monotonic()
                data = self.link.read(left) if left > 0 else b""
                if not data and time.monotonic() >= deadline:
                    resend = "timeout"
                    self.stats.timeouts += 1
                    break
                for item in self.deframer.feed(data):
                    if isinstance(item, P.FrameError):
                        self.stats.bad_frames_received += 1
                        resend = resend or "damaged answer"
                        continue
                    if item.type == P.ERROR and item.error_code in P.FRAME_ERRORS and item.seq == P.SEQ_NONE:
                        self.stats.device_frame_errors += 1
                        resend = resend or "device got a damaged frame"
                        continue
                    if item.seq != seq:
                        self.stats.stale_frames += 1
                        continue
                    if item.type == P.ERROR:
                        raise DeviceError(item.error_code or 0, type_, item.error_text)
                    if item.type == type_ | P.RESPONSE:
                        if attempt == 0:
                            rtt = time.monotonic() - t_first
                            old = self.rtt.get(type_)
                            self.rtt[type_] = rtt if old is None else 0.8 * old + 0.2 * rtt
                        return item.payload
                    self.stats.stale_frames += 1
            attempt += 1
            self.stats.retransmissions += 1
            self.stats.by_reason[resend] = self.stats.by_reason.get(resend, 0) + 1
            if attempt > retries:
                raise NoAnswer(f"{self.link.port}: no valid answer to {P.NAMES.get(type_, type_)} after "
                               f"{attempt} attempts; is the pockmcu board app running there?")

    # ------------------------------------------------------------ commands

    def connect(self, deadline: float = 3.0) -> P.Info:
        """INFO until the device answers (it may still be booting); continue after its last seq."""
        end = time.monotonic() + deadline
        self.link.drain(0.02, 0.2)
        self.deframer = P.Deframer()
        while True:
            try:
                raw = self.request(P.INFO, timeout=min(self.timeout, 0.3), retries=0)
                break
            except NoAnswer:
                if time.monotonic() >= end:
                    raise NoAnswer(f"{self.link.port}: the device does not answer (no pockmcu board app there, "
                                   f"or it waits in a bootloader: run 'pockmcu flash' first)") from None
        try:
            self.info = P.Info.parse(raw)
        except ValueError:
            raise PockError(f"{self.link.port}: the device's INFO answer is not from a pockmcu board app") from None
        if self.info.protocol != 1:
            raise PockError(f"{self.link.port}: the device speaks board protocol {self.info.protocol}, "
                            f"this pockmcu speaks 1; flash matching firmware")
        self.seq = self.info.last_seq  # the next request gets last + 1: never mistaken for a repeat
        return self.info

    def get_info(self) -> P.Info:
        self.info = P.Info.parse(self.request(P.INFO))
        return self.info

    def get_stats(self) -> P.Stats:
        return P.Stats.parse(self.request(P.STATS))

    def infer(self, x: bytes) -> bytes:
        return self.request(P.INFER, x)

    def stage_input(self, x: bytes, chunk: int = 1016) -> None:
        """STAGE_INPUT in pieces: for inputs that do not fit one frame (then INFER with no payload)."""
        self._chunked(P.STAGE_INPUT, lambda off, n: struct.pack("<I", off) + x[off:off + n], len(x), chunk)

    def profile(self) -> P.Profile:
        """PROFILE: the num_ops + 1 timer readings of the last invoke (several frames for many ops)."""
        prof = P.Profile.parse(self.request(P.PROFILE))
        while len(prof.ticks) < prof.num_ops + 1:
            more = P.Profile.parse(self.request(P.PROFILE, struct.pack("<I", len(prof.ticks))))
            if not more.ticks:
                raise PockError(f"{self.link.port}: PROFILE answered no readings from {len(prof.ticks)}")
            prof.ticks += more.ticks
        return prof

    def run_samples(self, input_bytes: bytes, sample_in: int | None = None, sample_out: int | None = None, *,
                    profile: bool = False, icount: bool = False) -> RunResult:
        """Every sample of input_bytes (all inputs concatenated per sample) through INFER, one by one.

        profile=True (firmware built with PROFILE=1) reads PROFILE after each sample: per-op timer ticks
        minus the empty-region overhead, i.e. core cycles on the real boards (DWT_CYCCNT); with
        icount=True (QEMU under -icount shift=8) exact instruction counts, as pockmcu.qemu.run() gives.
        `samples` is the number of INFERs the device counted during this call."""
        port = self.link.port
        info = self.get_info()
        in_b, out_b = info.input_bytes, info.output_bytes
        if sample_in is not None and sample_in != in_b:
            raise PockError(f"{port}: the firmware takes {in_b} input bytes per sample, not {sample_in}")
        if sample_out is not None and sample_out != out_b:
            raise PockError(f"{port}: the firmware writes {out_b} output bytes per sample, not {sample_out}")
        if in_b <= 0 or len(input_bytes) % in_b:
            raise PockError(f"input is {len(input_bytes)} bytes, not a whole number of {in_b}-byte samples")
        n = len(input_bytes) // in_b
        before = self.get_stats().inferences
        outputs, counts, prof = [], [], None
        for i in range(n):
            x = input_bytes[i * in_b:(i + 1) * in_b]
            try:
                if in_b <= P.MAX_PAYLOAD:
                    y = self.infer(x)
                else:
                    self.stage_input(x)
                    y = self.infer(b"")
            except DeviceError as exc:
                raise PockError(f"{port}: sample {i}: {exc}") from None
            if len(y) != out_b:
                raise PockError(f"{port}: sample {i}: INFER answered {len(y)} bytes, INFO says {out_b}")
            outputs.append(y)
            if profile:
                try:
                    prof = self.profile()
                except DeviceError as exc:
                    if exc.code == P.E_UNSUPPORTED:
                        raise PockError(f"{port}: the board app was built without profiling; build it with "
                                        f"profile=True (make PROFILE=1)") from None
                    raise
                t = prof.ticks
                d = [(t[k + 1] - t[k]) & 0xFFFFFFFF for k in range(prof.num_ops)]
                if icount:
                    d = [instructions_from_ticks(v, prof.timer_hz, ICOUNT_SHIFT) for v in d]
                counts.append(d)
        overhead = None
        if prof is not None:
            overhead = (instructions_from_ticks(prof.overhead_ticks, prof.timer_hz, ICOUNT_SHIFT) if icount
                        else prof.overhead_ticks)
            counts = [[v - overhead for v in c] for c in counts]
        samples = (self.get_stats().inferences - before) & 0xFFFFFFFF
        stack_used = self.get_info().stack_used
        return RunResult(b"".join(outputs), counts if profile else None, samples, stack_used,
                         prof.stack_bytes if prof is not None else None, overhead, "")

    def train(self, sample_id: int, label: bytes, x: bytes) -> P.TrainResult:
        return P.TrainResult.parse(self.request(P.TRAIN, struct.pack("<I", sample_id & 0xFFFFFFFF) + label + x))

    def _chunked(self, type_: int, make, total: int, chunk: int) -> list[bytes]:
        """Requests over [0, total) in chunks; a chunk that keeps failing (a bad link damages long
        frames more often) is retried at half the size, down to 64 bytes."""
        answers, off = [], 0
        while off < total:
            n = min(chunk, total - off)
            try:
                answers.append(self.request(type_, make(off, n), retries=None if chunk <= 64 else 6))
            except NoAnswer:
                if chunk <= 64:
                    raise
                chunk //= 2
                continue
            off += n
        return answers

    def read_params(self, total: int, chunk: int = 1016) -> bytes:
        out = bytearray()
        for p in self._chunked(P.READ_PARAMS, lambda off, n: struct.pack("<IH", off, n), total, chunk):
            (off,) = struct.unpack_from("<I", p, 0)
            if off != len(out):
                raise PockError(f"{self.link.port}: READ_PARAMS answered the wrong range")
            out += p[4:]
        if len(out) != total:
            raise PockError(f"{self.link.port}: READ_PARAMS answered {len(out)} of {total} bytes")
        return bytes(out)

    def write_params(self, data: bytes, chunk: int = 1016) -> None:
        self._chunked(P.WRITE_PARAMS, lambda off, n: struct.pack("<I", off) + data[off:off + n], len(data), chunk)

    def save(self, cut_after: int | None = None, timeout: float = 10.0) -> tuple[int, int]:
        """SAVE a checkpoint -> (seq, slot). cut_after (QEMU test hook): the device stops after that many
        flash bytes and resets, as if the power went; the request then ends in NoAnswer."""
        payload = b"" if cut_after is None else struct.pack("<I", cut_after)
        if cut_after is not None:
            timeout = min(timeout, 1.0)
        p = self.request(P.SAVE, payload, timeout=timeout, retries=3 if cut_after is None else 0)
        seq, slot = struct.unpack_from("<IB", p, 0)
        return seq, slot

    def load(self, timeout: float = 5.0) -> tuple[int, int]:
        seq, steps = struct.unpack_from("<II", self.request(P.LOAD, timeout=timeout), 0)
        return seq, steps

    def set_seed(self, seed: int) -> None:
        self.request(P.SET_SEED, struct.pack("<I", seed & 0xFFFFFFFF))

    def set_lr(self, lr: float) -> float:
        return struct.unpack("<f", self.request(P.SET_LR, struct.pack("<f", lr)))[0]

    def clear_stats(self) -> None:
        self.request(P.CLEAR_STATS)

    def reset(self) -> None:
        """RESET, then wait for the device to come back and pick up its new session."""
        self.request(P.RESET)
        time.sleep(0.05)
        self.connect()

    def enter_bootloader(self) -> None:
        self.request(P.BOOTLOADER)


def open_board(port: str, timeout: float | None = None, connect_timeout: float = 0.0,
               baudrate: int = 115200) -> Client:
    """Open `port` and say hello; PockError with one line if nothing usable answers."""
    link = Link(port, baudrate=baudrate, connect_timeout=connect_timeout)
    client = Client(link, timeout=timeout)
    try:
        client.connect()
    except BaseException:
        link.close()
        raise
    return client


def run_samples(port: str, input_bytes: bytes, sample_in: int | None = None, sample_out: int | None = None, *,
                profile: bool = False, icount: bool = False, baudrate: int = 115200, timeout: float | None = None,
                connect_timeout: float = 0.0) -> RunResult:
    """Inference on the board app at `port` (a device path or a pyserial URL such as socket://127.0.0.1:N):
    Client.run_samples on a fresh connection."""
    client = open_board(port, timeout=timeout, connect_timeout=connect_timeout, baudrate=baudrate)
    try:
        return client.run_samples(input_bytes, sample_in, sample_out, profile=profile, icount=icount)
    finally:
        client.link.close()
