"""The board protocol's frames and payloads (firmware/PROTOCOL.md is the reference; the device side
is firmware/proto/frame.c and firmware/proto/board_app.c).

Wire: ``0x00 COBS(type u8 | seq u16 LE | payload | crc32 u32 LE) 0x00``. The size limits below are
firmware/proto/frame.h's (PK_MAX_PAYLOAD, PK_MAX_DECODED, PK_MAX_ENCODED) and PROTOCOL.md's;
tests/test_serial_protocol.py checks that the three agree.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from . import cobs

PROTOCOL_VERSION = 2
MAX_PAYLOAD = 1024                                  # PK_MAX_PAYLOAD
HEADER_BYTES, CRC_BYTES = 3, 4
MAX_DECODED = HEADER_BYTES + MAX_PAYLOAD + CRC_BYTES  # 1031
MAX_ENCODED = MAX_DECODED + MAX_DECODED // 254 + 1  # 1036: COBS adds one byte per started 254, plus one
XFER_MAX_CHUNK = MAX_PAYLOAD - 8                    # XFER_CHUNK: u32 xid, u32 offset, then the chunk
SEQ_NONE = 0xFFFF
RESPONSE = 0x80

INFO, STATS, INFER, TRAIN, READ_PARAMS, WRITE_PARAMS, SAVE, LOAD = 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08
SET_SEED, RESET, SET_LR, STAGE_INPUT, CLEAR_STATS, BOOTLOADER, PING = 0x09, 0x0A, 0x0B, 0x0C, 0x0D, 0x0E, 0x0F
PROFILE = 0x10
XFER_BEGIN, XFER_CHUNK, XFER_COMMIT, READ_OUTPUT = 0x11, 0x12, 0x13, 0x14
ERROR = 0x7F
#: chunked transfer kinds (XFER_BEGIN)
X_TRAIN, X_INFER, X_PARAMS = 1, 2, 3

NAMES = {INFO: "INFO", STATS: "STATS", INFER: "INFER", TRAIN: "TRAIN", READ_PARAMS: "READ_PARAMS",
         WRITE_PARAMS: "WRITE_PARAMS", SAVE: "SAVE", LOAD: "LOAD", SET_SEED: "SET_SEED", RESET: "RESET",
         SET_LR: "SET_LR", STAGE_INPUT: "STAGE_INPUT", CLEAR_STATS: "CLEAR_STATS", BOOTLOADER: "BOOTLOADER",
         PING: "PING", PROFILE: "PROFILE", XFER_BEGIN: "XFER_BEGIN", XFER_CHUNK: "XFER_CHUNK",
         XFER_COMMIT: "XFER_COMMIT", READ_OUTPUT: "READ_OUTPUT", ERROR: "ERROR"}
#: requests the device executes every time (no state change, not remembered for retransmissions)
IDEMPOTENT = {INFO, STATS, READ_PARAMS, PING, PROFILE, READ_OUTPUT}
#: chunked-transfer requests: not remembered per frame either; the transfer id makes them safe to repeat
TRANSFER = {XFER_BEGIN, XFER_CHUNK, XFER_COMMIT}

E_CRC, E_COBS, E_TOO_LONG, E_TOO_SHORT = 1, 2, 3, 4
E_UNKNOWN_TYPE, E_BAD_LENGTH, E_BAD_ARG, E_NO_CKPT, E_FLASH, E_NO_TRAINING, E_MODEL, E_TOO_LARGE, E_UNSUPPORTED = \
    5, 6, 7, 8, 9, 10, 11, 12, 13
E_XFER = 14
FRAME_ERRORS = {E_CRC, E_COBS, E_TOO_LONG, E_TOO_SHORT}
ERROR_NAMES = {E_CRC: "bad CRC", E_COBS: "bad COBS", E_TOO_LONG: "frame too long", E_TOO_SHORT: "frame too short",
               E_UNKNOWN_TYPE: "unknown request", E_BAD_LENGTH: "bad length", E_BAD_ARG: "bad argument",
               E_NO_CKPT: "no checkpoint", E_FLASH: "flash error", E_NO_TRAINING: "no training",
               E_MODEL: "model error", E_TOO_LARGE: "too large", E_UNSUPPORTED: "unsupported",
               E_XFER: "transfer state"}


@dataclass
class Frame:
    type: int
    seq: int
    payload: bytes

    @property
    def error_code(self) -> int | None:
        return self.payload[0] if self.type == ERROR and self.payload else None

    @property
    def error_text(self) -> str:
        return self.payload[4:].decode("ascii", "replace") if self.type == ERROR else ""


class FrameError(Exception):
    """A received frame that cannot be used; .code is one of the frame-level error codes."""

    def __init__(self, code: int, raw: bytes = b""):
        super().__init__(ERROR_NAMES.get(code, str(code)))
        self.code = code
        self.raw = raw


def pack(type_: int, seq: int, payload: bytes = b"") -> bytes:
    """The decoded frame: type, seq, payload, CRC-32."""
    body = struct.pack("<BH", type_, seq) + bytes(payload)
    return body + struct.pack("<I", cobs.crc32(body))


def encode_frame(type_: int, seq: int, payload: bytes = b"") -> bytes:
    """A frame as it goes on the wire, delimiters included."""
    if len(payload) > MAX_PAYLOAD:
        raise ValueError(f"payload of {len(payload)} bytes exceeds {MAX_PAYLOAD}")
    return b"\x00" + cobs.encode(pack(type_, seq, payload)) + b"\x00"



def decode_frame(raw: bytes) -> Frame:
    """One frame's bytes between delimiters -> Frame, or FrameError (what the firmware parser does)."""
    if len(raw) > MAX_ENCODED:
        raise FrameError(E_TOO_LONG, raw)
    try:
        d = cobs.decode(raw)
    except ValueError:
        raise FrameError(E_COBS, raw) from None
    if len(d) > MAX_DECODED:
        raise FrameError(E_TOO_LONG, raw)
    if len(d) < HEADER_BYTES + CRC_BYTES:
        raise FrameError(E_TOO_SHORT, raw)
    (crc,) = struct.unpack_from("<I", d, len(d) - 4)
    if cobs.crc32(d[:-4]) != crc:
        raise FrameError(E_CRC, raw)
    t, seq = struct.unpack_from("<BH", d, 0)
    return Frame(t, seq, d[3:-4])


class Deframer:
    """Splits a received byte stream at 0x00 delimiters; empty frames are skipped."""

    def __init__(self):
        self.buf = bytearray()
        self.overflow = False

    def feed(self, data: bytes) -> list:
        """-> list of Frame or FrameError, in order."""
        out = []
        for b in data:
            if b:
                if len(self.buf) < MAX_ENCODED:
                    self.buf.append(b)
                else:
                    self.overflow = True
                continue
            raw, over = bytes(self.buf), self.overflow
            self.buf.clear()
            self.overflow = False
            if over:
                out.append(FrameError(E_TOO_LONG, raw))
            elif raw:
                try:
                    out.append(decode_frame(raw))
                except FrameError as exc:
                    out.append(exc)
        return out


# ---------------------------------------------------------------- payloads

_INFO = struct.Struct("<4sHH8sIIIIIIHHIIIIIIIIIHBBIIBBH")
_STATS = struct.Struct("<IIIIIIfHHfIIIIIIfIB")
_TRAIN = struct.Struct("<IIfiB")
_PROFILE = struct.Struct("<5I")


@dataclass
class Info:
    protocol: int
    firmware: int
    model_hash: bytes
    input_bytes: int          # all inputs, concatenated (INFER)
    output_bytes: int         # all outputs
    train_input_bytes: int    # input 0 (TRAIN)
    label_bytes: int
    params_bytes: int
    num_trainable: int
    max_payload: int
    flags: int
    ram_used: int
    ram_budget: int
    stack_used: int
    flash_used: int
    app_bytes: int
    app_base: int
    ckpt_base: int
    ckpt_slot_bytes: int
    ckpt_seq: int
    last_seq: int
    last_seq_valid: bool
    uptime_ms: int
    last_xid: int             # the last committed chunked transfer
    last_xid_valid: bool
    max_chunk: int            # largest XFER_CHUNK data
    target: str

    @property
    def training(self) -> bool:
        return bool(self.flags & 1)

    @property
    def restored(self) -> bool:
        return bool(self.flags & 2)

    @property
    def test_hooks(self) -> bool:
        return bool(self.flags & 4)

    @property
    def has_checkpoints(self) -> bool:
        return bool(self.flags & 8)

    @property
    def can_enter_bootloader(self) -> bool:
        return bool(self.flags & 16)

    @property
    def hash_hex(self) -> str:
        return self.model_hash.hex()

    @classmethod
    def parse(cls, p: bytes) -> "Info":
        if len(p) < _INFO.size or p[:4] != b"PKBD":
            raise ValueError("not a pockmcu board INFO payload")
        v = _INFO.unpack_from(p, 0)
        return cls(*v[1:21], v[21], bool(v[22]), v[24], v[25], bool(v[26]), v[28],
                   p[_INFO.size:].decode("ascii", "replace"))


@dataclass
class Stats:
    steps: int                # training steps applied (device counter; checkpointed)
    api_steps: int            # pockmcu_train_steps() (since the last seed)
    seed: int
    last_sample_id: int
    samples: int              # since CLEAR_STATS / SET_SEED
    correct: int
    mean_loss: float
    window: int               # the last <= 64 samples
    window_correct: int
    window_loss: float
    inferences: int
    duplicates: int           # retransmitted requests answered from the cache
    bad_frames: int
    errors: int
    ckpt_seq: int
    uptime_ms: int
    lr: float
    last_xid: int             # the last committed chunked transfer
    last_xid_valid: bool

    @property
    def accuracy(self) -> float | None:
        return self.correct / self.samples if self.samples else None

    @property
    def window_accuracy(self) -> float | None:
        return self.window_correct / self.window if self.window else None

    @classmethod
    def parse(cls, p: bytes) -> "Stats":
        if len(p) < _STATS.size:
            raise ValueError("short STATS payload")
        v = _STATS.unpack_from(p, 0)
        return cls(*v[:-1], bool(v[-1]))


@dataclass
class Profile:
    """PROFILE's answer (firmware built with PROFILE=1): the timer readings of the last invoke from `first`."""
    num_ops: int
    timer_hz: int
    overhead_ticks: int       # an empty measured region (two hook calls back to back)
    stack_bytes: int          # the thread stack reserved by the linker script
    first: int                # index of ticks[0] among the num_ops + 1 readings
    ticks: list[int]          # up-counting timer (mod 2^32) at the start of op first, first + 1, ...

    @classmethod
    def parse(cls, p: bytes) -> "Profile":
        if len(p) < _PROFILE.size or (len(p) - _PROFILE.size) % 4:
            raise ValueError("bad PROFILE payload")
        n, hz, overhead, stack, first = _PROFILE.unpack_from(p, 0)
        k = (len(p) - _PROFILE.size) // 4
        if first + k > n + 1:
            raise ValueError("PROFILE payload has more readings than num_ops + 1")
        return cls(n, hz, overhead, stack, first, list(struct.unpack_from(f"<{k}I", p, _PROFILE.size)))


@dataclass
class TrainResult:
    sample_id: int
    steps: int
    loss: float
    prediction: int
    correct: bool

    @classmethod
    def parse(cls, p: bytes) -> "TrainResult":
        i, s, loss, pred, c = _TRAIN.unpack_from(p, 0)
        return cls(i, s, loss, pred, bool(c))


# ---------------------------------------------------------------- chunked transfers

_BEGIN = struct.Struct("<IBBHIII")
_BEGIN_R = struct.Struct("<IBBHI")
_COMMIT_R = struct.Struct("<IBBH")


def xfer_begin(xid: int, kind: int, chunk: int, total: int, crc: int, offset: int = 0) -> bytes:
    return _BEGIN.pack(xid & 0xFFFFFFFF, kind, 0, chunk, offset, total, crc)


def parse_begin(p: bytes) -> tuple[int, int, int, int]:
    """XFER_BEGIN's answer -> (xid, state: 0 receiving / 1 committed already, chunk, next offset)."""
    xid, state, _, chunk, nxt = _BEGIN_R.unpack_from(p, 0)
    return xid, state, chunk, nxt


def xfer_chunk(xid: int, offset: int, data: bytes) -> bytes:
    return struct.pack("<II", xid & 0xFFFFFFFF, offset) + bytes(data)


def parse_commit(p: bytes) -> tuple[int, int, bytes]:
    """XFER_COMMIT's answer -> (xid, kind, the kind's result: TRAIN record / u32 output bytes / offset+length)."""
    xid, kind, _, _ = _COMMIT_R.unpack_from(p, 0)
    return xid, kind, p[_COMMIT_R.size:]
