"""Build and run targets: QEMU machines (emulated, exact instruction counts) and real boards.

The C side of each target is ``firmware/targets/<name>.mk`` (core flags, memory
map, port file) plus ``firmware/ports/<port>.c``; this table is the Python side
(QEMU machine, timer for the profiler) and repeats the memory map and flags so
Python can reason about budgets. ``tests/test_firmware.py`` checks that the two
agree.
"""

from __future__ import annotations

from dataclasses import dataclass

from .errors import PockError

KB = 1024
MB = 1024 * 1024


@dataclass(frozen=True)
class Target:
    name: str
    qemu_machine: str | None       # None: a real board (build only)
    core: str                      # "cortex-m4", ...
    cflags: tuple[str, ...]        # core flags given to arm-none-eabi-gcc (plus -mthumb)
    port: str                      # firmware/ports/<port>.c
    flash_origin: int
    flash_bytes: int               # the part's code memory
    ram_origin: int
    ram_bytes: int                 # the part's data memory usable by the linker script
    timer_kind: str                # "cmsdk-down32" | "sse300-counter" | "dwt-cyccnt"
    timer_base: int | None
    timer_hz: int                  # ticks per second of port_timer_read()
    uart: str                      # UART peripheral and pins / address
    fpu: bool
    dsp: bool                      # ARMv7E-M / ARMv8-M DSP extension (SMLAD, SXTB16, ...)
    mve: bool                      # Helium
    description: str

    @property
    def is_qemu(self) -> bool:
        return self.qemu_machine is not None


_M3 = ("-mcpu=cortex-m3", "-mfloat-abi=soft")
_M4F = ("-mcpu=cortex-m4", "-mfpu=fpv4-sp-d16", "-mfloat-abi=hard")
_M7D = ("-mcpu=cortex-m7", "-mfpu=fpv5-d16", "-mfloat-abi=hard")
_M7S = ("-mcpu=cortex-m7", "-mfpu=fpv5-sp-d16", "-mfloat-abi=hard")
_M33F = ("-mcpu=cortex-m33", "-mfpu=fpv5-sp-d16", "-mfloat-abi=hard")
_M55 = ("-mcpu=cortex-m55", "-mfloat-abi=hard")

TARGETS: dict[str, Target] = {t.name: t for t in [
    Target("qemu-m3", "mps2-an385", "cortex-m3", _M3, "qemu_mps2",
           0x00000000, 4 * MB, 0x20000000, 4 * MB, "cmsdk-down32", 0x40000000, 25_000_000,
           "CMSDK UART0 0x40004000", fpu=False, dsp=False, mve=False,
           description="QEMU mps2-an385, Cortex-M3"),
    Target("qemu-m4", "mps2-an386", "cortex-m4", _M4F, "qemu_mps2",
           0x00000000, 4 * MB, 0x20000000, 4 * MB, "cmsdk-down32", 0x40000000, 25_000_000,
           "CMSDK UART0 0x40004000", fpu=True, dsp=True, mve=False,
           description="QEMU mps2-an386, Cortex-M4F"),
    Target("qemu-m7", "mps2-an500", "cortex-m7", _M7D, "qemu_mps2",
           0x00000000, 4 * MB, 0x20000000, 4 * MB, "cmsdk-down32", 0x40000000, 25_000_000,
           "CMSDK UART0 0x40004000", fpu=True, dsp=True, mve=False,
           description="QEMU mps2-an500, Cortex-M7 (DP FPU)"),
    Target("qemu-m33", "mps2-an505", "cortex-m33", _M33F, "qemu_mps2",
           0x10000000, 4 * MB, 0x38000000, 4 * MB, "cmsdk-down32", 0x50000000, 20_000_000,
           "CMSDK UART0 0x50200000 (Secure alias)", fpu=True, dsp=True, mve=False,
           description="QEMU mps2-an505, Cortex-M33, runs Secure (Secure aliases of memory and peripherals)"),
    Target("qemu-m55", "mps3-an547", "cortex-m55", _M55, "qemu_an547",
           0x00000000, 512 * KB, 0x20000000, 512 * KB, "sse300-counter", 0x58100000, 32_000_000,
           "CMSDK UART0 0x59303000 (Secure alias)", fpu=True, dsp=True, mve=True,
           description="QEMU mps3-an547, Cortex-M55 with Helium (ITCM code, DTCM data)"),
    Target("stm32f746g-disco", None, "cortex-m7", _M7S, "stm32f746g_disco",
           0x08000000, 1 * MB, 0x20000000, 320 * KB, "dwt-cyccnt", None, 16_000_000,
           "USART1 TX PA9 / RX PB7 (ST-LINK VCP), 115200", fpu=True, dsp=True, mve=False,
           description="STM32F746G-DISCO, Cortex-M7 (SP FPU), runs at the reset clock HSI 16 MHz"),
    Target("nucleo-h743zi", None, "cortex-m7", _M7D, "nucleo_h743zi",
           0x08000000, 2 * MB, 0x24000000, 512 * KB, "dwt-cyccnt", None, 64_000_000,
           "USART3 TX PD8 / RX PD9 (ST-LINK VCP), 115200", fpu=True, dsp=True, mve=False,
           description="NUCLEO-H743ZI, Cortex-M7 (DP FPU), AXI SRAM, runs at the reset clock HSI 64 MHz"),
    Target("nrf52840-dk", None, "cortex-m4", _M4F, "nrf52840_dk",
           0x00000000, 1 * MB, 0x20000000, 256 * KB, "dwt-cyccnt", None, 64_000_000,
           "UART0 TX P0.06 / RX P0.08 (J-Link VCP), 115200", fpu=True, dsp=True, mve=False,
           description="nRF52840-DK, Cortex-M4F at 64 MHz"),
    Target("rp2350", None, "cortex-m33", _M33F, "rp2350",
           0x10000000, 4 * MB, 0x20000000, 520 * KB, "dwt-cyccnt", None, 11_000_000,
           "UART0 TX GP0 / RX GP1 (not implemented yet)", fpu=True, dsp=True, mve=False,
           description="Raspberry Pi Pico 2 (RP2350), Cortex-M33, Secure"),
]}

ALIASES = {
    "cortex-m3": "qemu-m3", "cortex-m4": "qemu-m4", "cortex-m7": "qemu-m7",
    "cortex-m33": "qemu-m33", "cortex-m55": "qemu-m55",
    "mps2-an385": "qemu-m3", "mps2-an386": "qemu-m4", "mps2-an500": "qemu-m7",
    "mps2-an505": "qemu-m33", "mps3-an547": "qemu-m55",
    "pico2": "rp2350", "stm32f746-disco": "stm32f746g-disco", "nrf52840": "nrf52840-dk",
}


def get_target(name: str) -> Target:
    """Look up a target by name (or alias such as cortex-m4 = qemu-m4)."""
    key = str(name).strip().lower()
    key = ALIASES.get(key, key)
    if key not in TARGETS:
        raise PockError(f"unknown target '{name}'; valid targets: {', '.join(TARGETS)} "
                        f"(aliases: cortex-m3/m4/m7/m33/m55 = qemu-*)")
    return TARGETS[key]


def instructions_from_ticks(ticks: int, timer_hz: int, icount_shift: int = 8) -> int:
    """Instructions executed in `ticks` timer ticks under `-icount shift=N` (each instruction = 2^N ns).

    Every instruction spans at least 5.12 timer ticks on the QEMU targets (20, 25
    or 32 MHz against 256 ns), so the +-1 tick of quantisation at either end is
    well under half an instruction and rounding recovers the exact count.
    """
    num = ticks * 1_000_000_000
    den = timer_hz << icount_shift
    return (2 * num + den) // (2 * den)
