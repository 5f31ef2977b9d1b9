"""COBS (Consistent Overhead Byte Stuffing) and CRC-32, as the firmware does them
(firmware/proto/cobs.c, firmware/proto/crc32.c)."""

from __future__ import annotations

import zlib


def crc32(data: bytes) -> int:
    """CRC-32 (IEEE 802.3), the same as zlib.crc32 and the firmware's pk_crc32(0, ...)."""
    return zlib.crc32(data) & 0xFFFFFFFF


def encode(data: bytes) -> bytes:
    """COBS-encode: no zero byte in the result; one byte added per started 254 bytes, plus one.

    Each run between zeros becomes 254-byte blocks (code 0xFF, no zero after them) and a last block
    (code = its length + 1, standing for the zero after it); a run that ends the data with a full
    254-byte block gets no closing block."""
    out = bytearray()
    runs = bytes(data).split(b"\x00")
    last = len(runs) - 1
    for k, run in enumerate(runs):
        i = 0
        while len(run) - i >= 254:
            out.append(255)
            out += run[i:i + 254]
            i += 254
        if k == last and run and i == len(run):
            break                         # ends with a full block: no closing block
        out.append(len(run) - i + 1)
        out += run[i:]
    return bytes(out)


def decode(data: bytes) -> bytes:
    """COBS-decode (no delimiters); ValueError if it is not valid COBS."""
    out = bytearray()
    i, n = 0, len(data)
    while i < n:
        code = data[i]
        i += 1
        if code == 0 or i + code - 1 > n:
            raise ValueError("bad COBS block")
        chunk = data[i:i + code - 1]
        if 0 in chunk:
            raise ValueError("zero inside a COBS block")
        out += chunk
        i += code - 1
        if code != 255 and i < n:
            out.append(0)
    return bytes(out)
