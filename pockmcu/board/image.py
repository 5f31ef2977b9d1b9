"""Firmware images for flashing: a raw .bin (at a given base address) or the loadable flash contents of
an ELF (PT_LOAD segments by physical address, gaps filled with 0xFF)."""

from __future__ import annotations

import struct
from pathlib import Path

from ..errors import PockError


def elf_segments(data: bytes, what: str) -> list[tuple[int, bytes]]:
    if data[:4] != b"\x7fELF":
        raise PockError(f"{what}: not an ELF file")
    if data[4] != 1 or data[5] != 1:
        raise PockError(f"{what}: not a 32-bit little-endian ELF (built for a Cortex-M?)")
    try:
        (e_phoff,) = struct.unpack_from("<I", data, 28)
        e_phentsize, e_phnum = struct.unpack_from("<HH", data, 42)
        segs = []
        for i in range(e_phnum):
            p_type, p_offset, _vaddr, p_paddr, p_filesz, _memsz, _flags, _align = struct.unpack_from(
                "<8I", data, e_phoff + i * e_phentsize)
            if p_type == 1 and p_filesz > 0:                 # PT_LOAD with bytes in the file
                segs.append((p_paddr, data[p_offset:p_offset + p_filesz]))
        return segs
    except struct.error:
        raise PockError(f"{what}: truncated ELF file") from None


def load_image(path, base: int | None = None, flash: tuple[int, int] | None = None) -> tuple[int, bytes]:
    """(base address, bytes) of a .bin (needs `base`) or an .elf. For an ELF, `flash` = (start, end)
    keeps only segments inside that range (the RAM image of .data is loaded from flash anyway)."""
    p = Path(path)
    if not p.is_file():
        raise PockError(f"{path}: no such file")
    data = p.read_bytes()
    if data[:4] == b"\x7fELF":
        segs = elf_segments(data, str(path))
        if flash is not None:
            segs = [(a, b) for a, b in segs if flash[0] <= a < flash[1]]
        else:   # without a flash range: the segments below the RAM (0x20000000 / 0x38000000 on these parts)
            lo = min((a for a, _ in segs), default=0)
            segs = [(a, b) for a, b in segs if a - lo < 0x10000000]
        if not segs:
            raise PockError(f"{path}: no loadable segments in flash")
        start = min(a for a, _ in segs)
        end = max(a + len(b) for a, b in segs)
        img = bytearray(b"\xff" * (end - start))
        for a, b in segs:
            img[a - start:a - start + len(b)] = b
        return start, bytes(img)
    if base is None:
        raise PockError(f"{path}: a raw image needs its address (--address) or a --target")
    if not data:
        raise PockError(f"{path}: empty image")
    return base, data
