"""COBS (Consistent Overhead Byte Stuffing) and CRC-32, as the firmware does them
(firmware/proto/cobs.c, firmware/proto/crc32.c)."""

from __future__ import annotations

import zlib


def crc32(data: bytes) -> int:
    """CRC-32 (IEEE 802.3), the same as zlib.crc32 and the firmware's pk_crc32(0, ...)."""
    return zlib.crc32(data) & 0xFFFFFFFF


def encode(data: bytes) -> bytes:
    """COBS-encode: no zero byte in the result; one byte added per started 254 bytes, plus one."""
    out = bytearray()
    block = bytearray()
    full_at_end = False
    for b in data:
        full_at_end = False
        if b == 0:
            out.append(len(block) + 1)
            out += block
            block.clear()
        else:
            block.append(b)
            if len(block) == 254:
                out.append(255)
                out += block
                block.clear()
                full_at_end = True
    if not full_at_end:          # a 254-byte block that ends the data needs no closing block
        out.append(len(block) + 1)
        out += block
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
