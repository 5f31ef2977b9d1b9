"""Host side of the board protocol over pyserial: a device path (/dev/ttyACM0, COM3) or any pyserial
URL (socket://127.0.0.1:PORT for QEMU, rfc2217://, loop://).

Stop-and-wait with retransmission: every request carries a sequence number; the host resends it
when the answer does not come within the timeout (waiting longer after each silent attempt: back-off),
at once when the answer arrives damaged or when the device reports that it received a damaged frame.
The device answers a repeated request from its cache without applying it again, so each request -
each training sample - is applied exactly once.

Payloads longer than a good frame on this line travel as a chunked transfer (firmware/PROTOCOL.md,
"Chunked transfers"): XFER_BEGIN, fixed-size XFER_CHUNKs (each checked by its frame CRC and
acknowledged), XFER_COMMIT (the device checks the whole payload's CRC-32, applies it once and
remembers the transfer id with its answer). The chunk size follows the damage seen on the line: a
frame of n bytes survives a byte error rate p with probability (1-p)^n, so long frames never get
through a noisy line; the client estimates p from its failed attempts and picks the chunk size
with the least expected cost per byte.
"""

from __future__ import annotations

import math
import socket
import struct
import time
import zlib
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


class _Rechunk(Exception):
    """Internal: restart a transfer with XFER_BEGIN at another chunk size."""


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
    transfers: int = 0               # chunked transfers committed
    chunks: int = 0                  # XFER_CHUNK requests (first attempts)
    transfer_restarts: int = 0       # XFER_BEGIN again after an E_XFER refusal or a chunk size change
    by_reason: dict = field(default_factory=dict)


#: chunk sizes the client chooses from (bytes of data per XFER_CHUNK / READ_* request)
CHUNK_SIZES = (16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, P.XFER_MAX_CHUNK)
#: bytes a round trip costs besides the data: the request's header, CRC, COBS and delimiters, the answer
ROUND_TRIP_OVERHEAD = 40
#: the damage estimate before anything is measured, and how fast old attempts are forgotten
PRIOR_ERRORS, PRIOR_BYTES, FORGET = 0.01, 10_000.0, 0.98
#: attempts at one chunk before the transfer continues with a smaller chunk size
CHUNK_ATTEMPTS = 16


class Client:
    """Requests with retransmission. `timeout`: seconds to wait for an answer before resending."""

    def __init__(self, link: Link, timeout: float | None = None, retries: int = 60, chunk: int | None = None):
        self.link = link
        # the wait for an answer before any round trip of that request type is measured; afterwards
        # the wait is 4x the measured round trip (at least min_wait), doubling after each silent attempt
        self.timeout = timeout if timeout is not None else (0.25 if link.is_socket else 0.5)
        self.min_wait = 0.005 if link.is_socket else 0.02
        self.retries = retries
        self.seq = 0
        self.xid = 0
        self.deframer = P.Deframer()
        self.stats = LinkStats()
        self.info: P.Info | None = None
        self.rtt: dict[int, float] = {}   # per request type: smoothed round trip of first attempts
        self.fixed_chunk = chunk          # None: adapt the chunk size to the damage seen
        self._err = PRIOR_ERRORS          # decaying count of failed attempts ...
        self._bytes = PRIOR_BYTES         # ... over the bytes they carried: the byte error estimate
        # a round trip's fixed cost in byte times: the turnaround of a serial line (~2 ms), or the
        # per-frame cost of a socket through userspace (about 256 bytes' worth)
        self.latency_bytes = 256.0 if link.is_socket else 0.002 * link.baudrate / 10.0

    # ------------------------------------------------------------ damage estimate, chunk size

    def _observe(self, ok: bool, nbytes: int) -> None:
        """One attempt's outcome: a failure is (about) one damaged byte among the bytes it carried."""
        self._err = self._err * FORGET + (0.0 if ok else 1.0)
        self._bytes = self._bytes * FORGET + nbytes

    @property
    def byte_error_rate(self) -> float:
        """Estimated probability that a byte on the line (either way) is damaged."""
        return min(0.5, self._err / max(self._bytes, 1.0))

    def _cost(self, nbytes: int) -> float:
        """Expected byte times to get one round trip carrying nbytes through: each attempt costs the
        frames and the latency, and succeeds with probability (1-p)^(frame bytes)."""
        n = nbytes + ROUND_TRIP_OVERHEAD
        q = math.exp(n * math.log1p(-self.byte_error_rate))
        return (n + self.latency_bytes) / max(q, 1e-300)

    def chunk_size(self, limit: int = P.XFER_MAX_CHUNK) -> int:
        """The chunk size (data bytes per request) with the least expected cost per byte now."""
        if self.fixed_chunk is not None:
            return max(1, min(self.fixed_chunk, limit))
        sizes = [c for c in CHUNK_SIZES if c <= limit] or [limit]
        return min(sizes, key=lambda c: self._cost(c + 8) / c)

    def _one_frame_is_better(self, nbytes: int) -> bool:
        """Is one frame of nbytes cheaper than a transfer (BEGIN, chunks, COMMIT) of the same bytes?"""
        if nbytes > P.MAX_PAYLOAD:
            return False
        if self.fixed_chunk is not None:
            return nbytes <= self.fixed_chunk
        c = self.chunk_size()
        full, rest = divmod(nbytes, c)
        xfer = self._cost(20) + self._cost(8) + full * self._cost(c + 8) + (self._cost(rest + 8) if rest else 0.0)
        return self._cost(nbytes) <= xfer

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
        if timeout is not None:
            base = timeout
        elif type_ in self.rtt:
            # a slow request (a training step of a big model on a slow board) must not be resent while it
            # runs: wait 4x its usual round trip (measured on first attempts only)
            base = max(self.min_wait, 4 * self.rtt[type_])
        else:
            base = self.timeout
        wait0 = base + 2 * self._wire_time(len(frame) + 64)
        cap = max(wait0, 4 * self.timeout)
        silent = 0
        retries = self.retries if retries is None else retries
        self.stats.requests += 1
        attempt = 0
        t_first = time.monotonic()
        while True:
            self.link.write(frame)
            self.stats.frames_sent += 1
            wait = min(cap, wait0 * 2 ** silent)      # back-off: longer after each attempt without an answer
            deadline = time.monotonic() + wait
            resend = None
            while resend is None:
                left = deadline - time.monotonic()
                data = self.link.read(left) if left > 0 else b""
                if not data and time.monotonic() >= deadline:
                    resend = "timeout"
                    self.stats.timeouts += 1
                    silent += 1
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
                        self._observe(True, len(frame) + len(item.payload) + 20)
                        raise DeviceError(item.error_code or 0, type_, item.error_text)
                    if item.type == type_ | P.RESPONSE:
                        if attempt == 0:
                            rtt = time.monotonic() - t_first
                            old = self.rtt.get(type_)
                            self.rtt[type_] = rtt if old is None else 0.8 * old + 0.2 * rtt
                        self._observe(True, len(frame) + len(item.payload) + 20)
                        return item.payload
                    self.stats.stale_frames += 1
            self._observe(False, len(frame) + 20)
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
        if self.info.protocol != P.PROTOCOL_VERSION:
            raise PockError(f"{self.link.port}: the device speaks board protocol {self.info.protocol}, "
                            f"this pockmcu speaks {P.PROTOCOL_VERSION}; flash matching firmware")
        if self.info.max_payload != P.MAX_PAYLOAD:
            raise PockError(f"{self.link.port}: the device's frames carry up to {self.info.max_payload} bytes, "
                            f"this pockmcu's {P.MAX_PAYLOAD}; flash matching firmware")
        self.seq = self.info.last_seq  # the next request gets last + 1: never mistaken for a repeat
        self.xid = self.info.last_xid  # the next transfer gets last + 1: never the committed one
        return self.info

    def get_info(self) -> P.Info:
        self.info = P.Info.parse(self.request(P.INFO))
        return self.info

    def get_stats(self) -> P.Stats:
        return P.Stats.parse(self.request(P.STATS))

    def infer(self, x: bytes) -> bytes:
        """One inference on x (all inputs concatenated) -> all outputs concatenated. One INFER frame when
        that is the cheaper way, else a chunked transfer and READ_OUTPUT in chunks."""
        out_b = self.info.output_bytes if self.info is not None else None
        if out_b is not None and out_b <= P.MAX_PAYLOAD and self._one_frame_is_better(len(x)):
            return self.request(P.INFER, x)
        _, _, res = self.transfer(P.X_INFER, x)
        (n,) = struct.unpack_from("<I", res, 0)
        return self._read_range(P.READ_OUTPUT, n)

    def stage_input(self, x: bytes, chunk: int | None = None) -> None:
        """STAGE_INPUT in pieces (then INFER or TRAIN with no input); infer() and train() send long
        inputs as chunked transfers instead."""
        off = 0
        while off < len(x):
            n = min(chunk or self.chunk_size(P.MAX_PAYLOAD - 4), len(x) - off)
            self.request(P.STAGE_INPUT, struct.pack("<I", off) + x[off:off + n])
            off += n

    # ------------------------------------------------------------ chunked transfers

    def _next_xid(self) -> int:
        self.xid = (self.xid + 1) & 0xFFFFFFFF
        return self.xid

    def transfer(self, kind: int, data: bytes, offset: int = 0, commit: bytes = b"",
                 max_restarts: int = 20) -> tuple[int, int, bytes]:
        """One chunked transfer (PROTOCOL.md): XFER_BEGIN, the chunks from where the device says,
        XFER_COMMIT -> (xid, kind, the commit's result bytes). Applied exactly once on the device.
        A refusal about the transfer's state (E_XFER: the device lost it, a CRC mismatch) or a chunk
        that does not get through restarts it with XFER_BEGIN (same id: the device resumes where its
        data ends), at most max_restarts times."""
        data = bytes(data)
        xid, total, crc = self._next_xid(), len(data), zlib.crc32(data) & 0xFFFFFFFF
        restarts, limit = 0, P.XFER_MAX_CHUNK
        while True:
            chunk = self.chunk_size(limit)
            try:
                _, state, _, pos = P.parse_begin(self.request(
                    P.XFER_BEGIN, P.xfer_begin(xid, kind, chunk, total, crc, offset)))
                while state == 0 and pos < total:
                    n = min(chunk, total - pos)
                    self.stats.chunks += 1
                    try:
                        # a chunk that keeps failing is too long for this line: after a few attempts,
                        # continue with the smaller size the damage estimate now prefers
                        adapt = self.fixed_chunk is None and chunk > CHUNK_SIZES[0]
                        self.request(P.XFER_CHUNK, P.xfer_chunk(xid, pos, data[pos:pos + n]),
                                     retries=CHUNK_ATTEMPTS if adapt else None)
                    except NoAnswer:
                        if not adapt:
                            raise
                        limit = max(CHUNK_SIZES[0], min(self.chunk_size(), chunk // 2))
                        raise _Rechunk from None
                    pos += n
                    limit = P.XFER_MAX_CHUNK      # through: the damage estimate decides again
                    better = self.chunk_size()
                    if pos < total and (better >= 4 * chunk or 4 * better <= chunk):
                        raise _Rechunk      # the line changed a lot: continue with another chunk size
                res = self.request(P.XFER_COMMIT, struct.pack("<I", xid) + commit)
            except _Rechunk:
                self.stats.transfer_restarts += 1
                continue
            except DeviceError as exc:
                if exc.code != P.E_XFER or restarts >= max_restarts:
                    raise
                restarts += 1
                self.stats.transfer_restarts += 1
                continue
            self.stats.transfers += 1
            rxid, rkind, result = P.parse_commit(res)
            if rxid != xid or rkind != kind:
                raise PockError(f"{self.link.port}: XFER_COMMIT answered transfer {rxid} kind {rkind}, "
                                f"not {xid} kind {kind}")
            return rxid, rkind, result

    def _read_range(self, type_: int, total: int) -> bytes:
        """READ_PARAMS / READ_OUTPUT over [0, total) in chunks of the current best size."""
        out = bytearray()
        while len(out) < total:
            n = min(self.chunk_size(P.MAX_PAYLOAD - 4), total - len(out))
            p = self.request(type_, struct.pack("<IH", len(out), n))
            (off,) = struct.unpack_from("<I", p, 0)
            if off != len(out) or len(p) - 4 != n:
                raise PockError(f"{self.link.port}: {P.NAMES[type_]} answered the wrong range")
            out += p[4:]
        return bytes(out)

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
                y = self.infer(x)
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
        """One training sample, applied exactly once: a TRAIN frame when that is the cheaper way, else a
        chunked transfer of the label and input 0."""
        sid = struct.pack("<I", sample_id & 0xFFFFFFFF)
        if self._one_frame_is_better(4 + len(label) + len(x)):
            return P.TrainResult.parse(self.request(P.TRAIN, sid + label + x))
        _, _, res = self.transfer(P.X_TRAIN, label + x, commit=sid)
        return P.TrainResult.parse(res)

    def read_params(self, total: int) -> bytes:
        return self._read_range(P.READ_PARAMS, total)

    def write_params(self, data: bytes, offset: int = 0) -> None:
        """A chunked transfer of kind PARAMS; the device refuses a bias outside its limit (DeviceError)."""
        self.transfer(P.X_PARAMS, data, offset=offset)

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
               baudrate: int = 115200, chunk: int | None = None) -> Client:
    """Open `port` and say hello; PockError with one line if nothing usable answers. chunk: a fixed
    chunk size for long payloads (default: adapt to the damage seen on the line)."""
    link = Link(port, baudrate=baudrate, connect_timeout=connect_timeout)
    client = Client(link, timeout=timeout, chunk=chunk)
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
