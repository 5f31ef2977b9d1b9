"""Host side of the STM32 system-memory bootloader protocol (ST AN3155), the subset flashing needs:
0x7F synchronisation, GET, GET_ID, READ_MEMORY, WRITE_MEMORY, ERASE / EXTENDED_ERASE, GO; XOR
checksums; ACK 0x79 / NACK 0x1F. It talks to the pockmcu QEMU bootloader (firmware/bootloader/) and,
being the same protocol, to a real STM32 in its ROM bootloader (BOOT0 high, USART at 8E1; see
firmware/PROTOCOL.md for which pins).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from ..errors import PockError
from .client import Client, NoAnswer
from .firmware import QEMU_PIDS, layout_for

ACK, NACK, SYNC = 0x79, 0x1F, 0x7F
GET, GET_VERSION, GET_ID, READ_MEMORY, GO, WRITE_MEMORY, ERASE, EXTENDED_ERASE = \
    0x00, 0x01, 0x02, 0x11, 0x21, 0x31, 0x43, 0x44
CMD_NAMES = {GET: "GET", GET_VERSION: "GET_VERSION", GET_ID: "GET_ID", READ_MEMORY: "READ_MEMORY", GO: "GO",
             WRITE_MEMORY: "WRITE_MEMORY", ERASE: "ERASE", EXTENDED_ERASE: "EXTENDED_ERASE"}


@dataclass
class FlashMap:
    """What the host needs to know about a part to flash it: its erase units and where an application
    may go (app_limit keeps the checkpoint slots and anything above them)."""
    name: str
    target: str | None
    flash_base: int
    flash_end: int
    app_base: int
    app_limit: int
    sectors: list          # [(start, size)], index = AN3155 page/sector number
    erase_timeout: float

    def pages_for(self, start: int, end: int) -> list[int]:
        return [i for i, (a, n) in enumerate(self.sectors) if a < end and a + n > start]


def _uniform(base: int, end: int, size: int) -> list:
    return [(a, size) for a in range(base, end, size)]


def flash_map(pid: int, params_bytes: int | None = None) -> FlashMap:
    """The flash map of a bootloader's product ID. params_bytes (the model's, when known) places the
    checkpoint slots on the QEMU machines; without it the application may reach the end of flash."""
    for target, qpid in QEMU_PIDS.items():
        if pid == qpid:
            lay = layout_for(target, params_bytes or 0)
            end = lay.flash_base + lay.flash_size
            limit = lay.ckpt_base if params_bytes else end
            return FlashMap(f"pockmcu QEMU bootloader ({target})", target, lay.flash_base, end, lay.app_base,
                            limit, _uniform(lay.flash_base, end, lay.sector_bytes), 5.0)
    if pid == 0x449:   # STM32F74x/75x, 1 MB single bank
        sizes = [32, 32, 32, 32, 128, 256, 256, 256]
        sectors, a = [], 0x08000000
        for s in sizes:
            sectors.append((a, s * 1024))
            a += s * 1024
        limit = layout_for("stm32f746g-disco", params_bytes).ckpt_base if params_bytes else a
        return FlashMap("STM32F74x/75x ROM bootloader", "stm32f746g-disco", 0x08000000, a, 0x08000000, limit,
                        sectors, 30.0)
    if pid == 0x450:   # STM32H74x/75x, 2 x 1 MB, 128 KB sectors
        limit = layout_for("nucleo-h743zi", params_bytes).ckpt_base if params_bytes else 0x08200000
        return FlashMap("STM32H74x/75x ROM bootloader", "nucleo-h743zi", 0x08000000, 0x08200000, 0x08000000,
                        limit, _uniform(0x08000000, 0x08200000, 128 * 1024), 30.0)
    raise PockError(f"the bootloader reports product ID 0x{pid:03X}, which pockmcu has no flash map for "
                    f"(known: 0x449 STM32F74x, 0x450 STM32H74x, 0xF0x/0xF33/0xF55 the QEMU bootloader)")


class Bootloader:
    def __init__(self, link, timeout: float = 1.0):
        self.link = link
        self.timeout = timeout
        self.buf = bytearray()

    def _read(self, n: int, timeout: float | None = None, what: str = "an answer") -> bytes:
        end = time.monotonic() + (self.timeout if timeout is None else timeout)
        while len(self.buf) < n:
            left = end - time.monotonic()
            if left <= 0:
                raise PockError(f"{self.link.port}: the bootloader sent no {what} within "
                                f"{self.timeout if timeout is None else timeout:g} s")
            self.buf += self.link.read(left)
        out = bytes(self.buf[:n])
        del self.buf[:n]
        return out

    def _ack(self, what: str, timeout: float | None = None) -> None:
        b = self._read(1, timeout, f"ACK for {what}")[0]
        if b == NACK:
            raise PockError(f"{self.link.port}: the bootloader refused {what} (NACK)")
        if b != ACK:
            raise PockError(f"{self.link.port}: the bootloader answered {what} with 0x{b:02X}, not ACK")

    def sync(self, tries: int = 3, wait: float = 0.3) -> bool:
        """0x7F until ACK (or NACK: already synchronised). False if nothing answers."""
        self.link.drain(0.02, 0.2)
        self.buf.clear()
        for _ in range(tries):
            self.link.write(bytes([SYNC]))
            got = self.link.read(wait)
            if got:
                time.sleep(0.02)
                got += self.link.drain(0.02, 0.2)
                if got[-1] in (ACK, NACK):
                    return True
        return False

    def command(self, cmd: int) -> None:
        self.link.write(bytes([cmd, cmd ^ 0xFF]))
        self._ack(CMD_NAMES.get(cmd, f"command 0x{cmd:02X}"))

    def get(self) -> tuple[int, list[int]]:
        self.command(GET)
        n = self._read(1)[0]
        body = self._read(n + 1)
        self._ack("GET (end)")
        return body[0], list(body[1:])

    def get_id(self) -> int:
        self.command(GET_ID)
        n = self._read(1)[0]
        pid = self._read(n + 1)
        self._ack("GET_ID (end)")
        return int.from_bytes(pid, "big")

    def _address(self, addr: int, what: str) -> None:
        a = addr.to_bytes(4, "big")
        self.link.write(a + bytes([a[0] ^ a[1] ^ a[2] ^ a[3]]))
        self._ack(f"{what} address 0x{addr:08X}")

    def read_memory(self, addr: int, n: int) -> bytes:
        assert 1 <= n <= 256
        self.command(READ_MEMORY)
        self._address(addr, "READ_MEMORY")
        self.link.write(bytes([n - 1, (n - 1) ^ 0xFF]))
        self._ack("READ_MEMORY length")
        return self._read(n, what=f"{n} bytes from 0x{addr:08X}")

    def write_memory(self, addr: int, data: bytes) -> None:
        assert 1 <= len(data) <= 256 and len(data) % 4 == 0
        self.command(WRITE_MEMORY)
        self._address(addr, "WRITE_MEMORY")
        x = len(data) - 1
        for b in data:
            x ^= b
        self.link.write(bytes([len(data) - 1]) + data + bytes([x]))
        self._ack(f"WRITE_MEMORY of {len(data)} bytes at 0x{addr:08X}", timeout=max(self.timeout, 2.0))

    def erase(self, pages: list[int], extended: bool, timeout: float) -> None:
        for k in range(0, len(pages), 64):
            group = pages[k:k + 64]
            if extended:
                self.command(EXTENDED_ERASE)
                msg = (len(group) - 1).to_bytes(2, "big") + b"".join(p.to_bytes(2, "big") for p in group)
            else:
                if max(group) > 255:
                    raise PockError("page numbers above 255 need EXTENDED_ERASE, which this bootloader lacks")
                self.command(ERASE)
                msg = bytes([len(group) - 1] + group)
            x = 0
            for b in msg:
                x ^= b
            self.link.write(msg + bytes([x]))
            self._ack(f"ERASE of pages {group[0]}..{group[-1]}", timeout=timeout * len(group))

    def go(self, addr: int) -> None:
        self.command(GO)
        self._address(addr, "GO")


def enter(link, log=print) -> Bootloader:
    """A synchronised bootloader on `link`: already there, or asked for through the board protocol
    (the pockmcu board app's BOOTLOADER request)."""
    bl = Bootloader(link)
    link.set_parity("E")              # AN3155 is 8E1 (a QEMU socket ignores parity)
    if bl.sync():
        return bl

    link.set_parity("N")              # the board app is 8N1
    client = Client(link, timeout=0.25)
    try:
        info = client.connect(deadline=1.5)
    except NoAnswer:
        raise PockError(f"{link.port}: the device does not answer (neither an AN3155 bootloader nor the pockmcu "
                        f"board app); on an STM32 set BOOT0 and reset it into its ROM bootloader") from None
    if not info.can_enter_bootloader:
        raise PockError(f"{link.port}: the pockmcu board app on this {info.target} cannot enter a bootloader; "
                        f"reset the board into its bootloader by hand")
    log(f"{link.port}: the board app ({info.target}) is running; asking it to enter the bootloader")
    client.enter_bootloader()
    link.set_parity("E")
    time.sleep(0.05)
    end = time.monotonic() + 3.0
    while time.monotonic() < end:
        if bl.sync(tries=1, wait=0.3):
            return bl
    raise PockError(f"{link.port}: the board did not come back in its bootloader")


def _untouched(fmap, message: str) -> PockError:
    """A refusal before anything was erased: the caller may start the application still in flash
    (``flash_untouched``, ``app_base``) instead of leaving the board in its bootloader."""
    exc = PockError(message)
    exc.flash_untouched = True
    exc.app_base = fmap.app_base
    return exc


def flash_image(bl: Bootloader, base: int, image: bytes, params_bytes: int | None = None,
                expect_target: str | None = None, log=print) -> FlashMap:
    """Erase, write, verify by read-back and start `image` at `base`."""
    version, cmds = bl.get()
    pid = bl.get_id()
    fmap = flash_map(pid, params_bytes)
    if expect_target and fmap.target != expect_target:
        raise _untouched(fmap, f"{bl.link.port}: the device is {fmap.name}, the image was built for {expect_target}")
    if len(image) % 4:
        image = image + b"\xff" * (4 - len(image) % 4)
    end = base + len(image)
    region = fmap.app_limit - fmap.app_base
    if base < fmap.app_base or base >= fmap.app_limit:
        raise _untouched(fmap, f"the image starts at 0x{base:08X}, outside the application region 0x{fmap.app_base:08X}"
                               f"..0x{fmap.app_limit:08X} of the {fmap.name}")
    if end > fmap.app_limit:
        raise _untouched(fmap, f"the image is {len(image)} bytes, too large for the flash: the application region at "
                               f"0x{fmap.app_base:08X} holds {region - (base - fmap.app_base)} bytes")
    extended = EXTENDED_ERASE in cmds
    if not extended and ERASE not in cmds:
        raise _untouched(fmap, f"{bl.link.port}: the bootloader offers neither ERASE nor EXTENDED_ERASE")
    pages = fmap.pages_for(base, end)
    log(f"{fmap.name} (bootloader v{version >> 4}.{version & 15}): erasing {len(pages)} sectors, "
        f"writing {len(image)} bytes at 0x{base:08X}")
    bl.erase(pages, extended, fmap.erase_timeout)
    for off in range(0, len(image), 256):
        bl.write_memory(base + off, image[off:off + 256])
    for off in range(0, len(image), 256):
        n = min(256, len(image) - off)
        got = bl.read_memory(base + off, n)
        if got != image[off:off + n]:
            bad = next(i for i in range(n) if got[i] != image[off + i])
            raise PockError(f"verify failed at 0x{base + off + bad:08X}: wrote 0x{image[off + bad]:02X}, "
                            f"read 0x{got[bad]:02X}")
    log(f"verified {len(image)} bytes; starting the image at 0x{base:08X}")
    bl.go(base)
    return fmap
