"""Builds of the board firmware: the board app (firmware/board_main.c) and the QEMU bootloader
(firmware/boot_main.c), through the generated project's own Makefile.

Each build first writes ``board_config.h`` into its own build directory (``OUT/build/<target>-board``,
``-board-profile``, ``-boot``; the Makefile puts ``-I$(BUILD)`` on the firmware's include path): the
model hash, the flash layout (where the application, the bootloader and the two checkpoint slots live)
and which flash driver to use. A plain ``make TARGET=<board>`` finds none there and stops with one
line, rather than linking another target's layout. The layout per target:

* QEMU machines: the bootloader owns the first 64 KB of code memory, the application is linked at
  +0x10000, the two checkpoint slots (whole 4 KB sectors each) sit at the end of code memory.
* STM32F746G-DISCO: application from 0x08000000 (the ROM bootloader flashes it), checkpoint slots in
  the two last 256 KB sectors (0x08080000, 0x080C0000).
* NUCLEO-H743ZI: slots in the two last 128 KB sectors of bank 2 (0x081C0000, 0x081E0000).
* nRF52840-DK: slots in the two last 4 KB pages (0xFE000, 0xFF000).
* RP2350: slots reserved at the end of the 4 MB flash; no flash driver yet (saves fail cleanly).
"""

from __future__ import annotations

import hashlib
import json
import subprocess
from dataclasses import dataclass
from pathlib import Path

from ..build import project_dir, require_tool, run_make
from ..errors import PockError
from ..frontend import load_model
from ..shapes import bias_limit
from ..targets import get_target

APP_OFFSET = 0x10000           # QEMU: bootloader size, the application starts here
BOOT_RAM_BYTES = 64 * 1024     # the bootloader's RAM budget
STATS_BYTES = 64               # board_persist in proto/board_app.c
CKPT_OVERHEAD = 64             # header + commit record (proto/checkpoint.h)

# QEMU UART0 (CMSDK) base per machine
QEMU_UART = {"qemu-m3": 0x40004000, "qemu-m4": 0x40004000, "qemu-m7": 0x40004000, "qemu-m33": 0x50200000,
             "qemu-m55": 0x59303000}
# AN3155 GET_ID product IDs: 0x449/0x450 are ST's; 0xF0x are the QEMU bootloader's own.
QEMU_PIDS = {"qemu-m3": 0xF03, "qemu-m4": 0xF04, "qemu-m7": 0xF07, "qemu-m33": 0xF33, "qemu-m55": 0xF55}


@dataclass(frozen=True)
class Layout:
    target: str
    flash_base: int
    flash_size: int
    app_base: int
    app_bytes: int              # the application's link region (FLASH_BYTES of its build)
    ckpt_base: int
    slot_bytes: int             # per slot (0: no checkpoints)
    sector_bytes: int           # uniform erase unit (QEMU/nRF), or the slot sector size
    prog_bytes: int
    flash_impl: str
    bootloader_kind: int        # 0 none, 1 the QEMU bootloader (magic word + reset), 2 STM32 ROM
    pid: int | None
    ram_origin: int
    ram_part: int
    boot_magic_addr: int
    sysmem_addr: int = 0
    uart_data_addr: int = 0     # QEMU: UART0 (CMSDK) base, for board_uart_getc (board_sys.h); 0 elsewhere

    @property
    def boot_bytes(self) -> int:
        return self.app_base - self.flash_base


def _align(n: int, a: int) -> int:
    return (n + a - 1) // a * a


def ckpt_need(params_bytes: int) -> int:
    """Bytes one checkpoint slot needs (proto/checkpoint.c ckpt_slot_need)."""
    return CKPT_OVERHEAD + _align(STATS_BYTES + params_bytes, 32)


def layout_for(target: str, params_bytes: int) -> Layout:
    t = get_target(target)
    need = ckpt_need(params_bytes) if params_bytes else 0
    ram_top_magic = t.ram_origin + t.ram_bytes - 16
    if t.is_qemu:
        sector = 4096
        slot = _align(need, sector) if need else 0
        ckpt_base = t.flash_origin + t.flash_bytes - 2 * slot
        app_base = t.flash_origin + APP_OFFSET
        if ckpt_base - app_base < 64 * 1024:
            raise PockError(f"two checkpoint slots of {slot} bytes leave no room for the application in the "
                            f"{t.flash_bytes}-byte code memory of {t.name}")
        return Layout(t.name, t.flash_origin, t.flash_bytes, app_base, ckpt_base - app_base, ckpt_base, slot,
                      sector, 4, "board_flash_ram.c", 1, QEMU_PIDS[t.name], t.ram_origin, t.ram_bytes,
                      ram_top_magic, 0, QEMU_UART[t.name])
    fixed = {
        # target: (ckpt base, slot bytes (= erase sector), program unit, driver, bootloader kind, pid, sysmem)
        "stm32f746g-disco": (0x08080000, 256 * 1024, 4, "board_flash_stm32f7.c", 2, 0x449, 0x1FF00000),
        "nucleo-h743zi": (0x081C0000, 128 * 1024, 32, "board_flash_stm32h7.c", 2, 0x450, 0x1FF09800),
        "nrf52840-dk": (0x000FE000, 4096, 4, "board_flash_nrf52.c", 0, None, 0),
        "rp2350": (0x10000000 + 4 * 1024 * 1024 - 2 * 4096, 4096, 4, "board_flash_rp2350.c", 0, None, 0),
    }
    base, slot, prog, impl, kind, pid, sysmem = fixed[t.name]
    if need > slot:
        raise PockError(f"the checkpoint needs {need} bytes, more than a {slot}-byte slot on {t.name}")
    return Layout(t.name, t.flash_origin, t.flash_bytes, t.flash_origin, base - t.flash_origin, base,
                  slot if need else 0, slot, prog, impl, kind, pid, t.ram_origin, t.ram_bytes, ram_top_magic,
                  sysmem)


def read_plan(out) -> dict:
    p = Path(out) / "plan.json"
    if not p.is_file():
        raise PockError(f"{out}: no plan.json; run 'pockmcu gen MODEL -o {out}' first")
    return json.loads(p.read_text())


def params_bytes(plan: dict) -> int:
    tr = plan.get("training")
    return sum(t["bytes"] for t in tr["trainable"]) if tr else 0


def model_hash(out) -> bytes:
    """8 bytes that identify the model and its training set-up: SHA-256 of the original model file,
    the inputs/outputs and the training section of plan.json."""
    plan = read_plan(out)
    src = Path(out) / plan.get("model_file", "original.tflite")
    h = hashlib.sha256()
    h.update(src.read_bytes() if src.is_file() else plan.get("model", "").encode())
    h.update(json.dumps({k: plan.get(k) for k in ("inputs", "outputs", "training")}, sort_keys=True).encode())
    return h.digest()[:8]


NO_LIMIT = -1


def param_limits(out) -> list[int]:
    """Per trainable tensor (plan.json order): the largest |value| a written int32 bias may take so that
    its op's accumulator, bias + K products (K: the weights per output channel), stays inside int32
    for ANY int8 weights and inputs: 2^31 - 1 - K * 2^15 (0 if K is that large; 256 * (128 + |zp_w|) per
    product for weights with a zero point), shapes.bias_limit, the bound training saturates a bias at.
    int8 tensors: -1, no limit. The board app refuses WRITE_PARAMS / parameter chunks that break a limit
    (firmware/PROTOCOL.md, "Parameter limits")."""
    plan = read_plan(out)
    tr = (plan.get("training") or {}).get("trainable") or []
    if not any(t["dtype"] == "int32" for t in tr):
        return [NO_LIMIT] * len(tr)
    g = load_model(Path(out) / plan.get("model_file", "original.tflite"))
    return [bias_limit(g, t["tensor"]) if t["dtype"] == "int32" else NO_LIMIT for t in tr]


def config_text(layout: Layout, hash8: bytes, default_lr: float, test_hooks: bool,
                limits: list[int] | None = None) -> str:
    def hx(v: int) -> str:
        return f"0x{v:08X}u"

    rows = [
        "/* Written by pockmcu (pockmcu/board/firmware.py) for each board build; do not edit. */",
        "#ifndef POCKMCU_BOARD_CONFIG_H",
        "#define POCKMCU_BOARD_CONFIG_H",
        f'#define BOARD_TARGET_NAME "{layout.target}"',
        "#define BOARD_MODEL_HASH {" + ", ".join(f"0x{b:02X}u" for b in hash8) + "}",
        f'#define BOARD_FLASH_IMPL "{layout.flash_impl}"',
        f"#define BOARD_FLASH_BASE {hx(layout.flash_base)}",
        f"#define BOARD_FLASH_SIZE {hx(layout.flash_size)}",
        f"#define BOARD_FLASH_SECTOR_BYTES {layout.sector_bytes}u",
        f"#define BOARD_FLASH_PROG_BYTES {layout.prog_bytes}u",
        f"#define BOARD_APP_BASE {hx(layout.app_base)}",
        f"#define BOARD_APP_BYTES {hx(layout.app_bytes)}",
        f"#define BOARD_CKPT_BASE {hx(layout.ckpt_base)}",
        f"#define BOARD_CKPT_SLOT_BYTES {layout.slot_bytes}u",
        f"#define BOARD_RAM_ORIGIN {hx(layout.ram_origin)}",
        f"#define BOARD_RAM_PART_BYTES {hx(layout.ram_part)}",
        f"#define BOARD_BOOT_MAGIC_ADDR {hx(layout.boot_magic_addr)}",
        f"#define BOARD_BOOTLOADER_KIND {layout.bootloader_kind}",
        f"#define BOARD_SYSMEM_ADDR {hx(layout.sysmem_addr)}",
        f"#define BOARD_BOOT_PID 0x{layout.pid or 0:03X}u",
        f"#define BOARD_TEST_HOOKS {1 if test_hooks else 0}",
        f"#define BOARD_QEMU_UART_BASE {hx(layout.uart_data_addr)}",
        f"#define BOARD_DEFAULT_LR {float(default_lr)!r}f",
        "/* per trainable tensor: the largest |value| of a written int32 bias, -1 none (param_limits) */",
        "#define BOARD_PARAM_LIMITS {" + ", ".join(f"{v}" for v in (limits or [NO_LIMIT])) + "}",
        "#ifndef BOARD_RAM_BUDGET",
        "#define BOARD_RAM_BUDGET RAM_BUDGET_FROM_MAKEFILE",
        "#endif",
        "#endif",
        "",
    ]
    return "\n".join(rows)


def _write_if_changed(path: Path, text: str) -> None:
    if not path.is_file() or path.read_text() != text:
        path.write_text(text)


def prepare(out, target: str, build: str) -> tuple[Path, Layout, dict]:
    """Check OUT, compute the layout and write OUT/<build>/board_config.h (only when it changes)."""
    out = project_dir(out)
    if not (out / "firmware" / "board_main.c").is_file():
        raise PockError(f"{out}: generated by an older pockmcu without the board runtime; run 'pockmcu gen' again")
    plan = read_plan(out)
    layout = layout_for(target, params_bytes(plan))
    lr = (plan.get("training") or {}).get("optimizer", {}).get("lr", 0.0)
    text = config_text(layout, model_hash(out), lr, get_target(target).is_qemu, param_limits(out))
    text = text.replace("RAM_BUDGET_FROM_MAKEFILE", f"{int(plan['ram_budget_bytes'])}u")
    (out / build).mkdir(parents=True, exist_ok=True)
    _write_if_changed(out / build / "board_config.h", text)
    return out, layout, plan


def build_app(out, target: str, profile: bool = False) -> Path:
    """The board app for `target`, linked at the layout's application base; returns the .elf.
    profile=True: built with PROFILE=1 (per-op timer readings, the PROFILE request) in its own directory."""
    t = get_target(target)
    build = f"build/{t.name}-board" + ("-profile" if profile else "")
    out, layout, _ = prepare(out, target, build)
    run_make(out, f"board firmware for {t.name}",
          [f"TARGET={t.name}", "APP=board", f"PROFILE={1 if profile else 0}", "CMSIS_NN_PATH=", f"BUILD={build}",
           f"FLASH_ORIGIN=0x{layout.app_base:X}", f"FLASH_BYTES={layout.app_bytes}"],
          ["arm-none-eabi-gcc"], t)
    return out / build / "pockmcu_model.elf"


def build_bootloader(out, target: str) -> Path:
    """The QEMU bootloader for `target` (first 64 KB of code memory); returns the .elf."""
    t = get_target(target)
    if not t.is_qemu:
        raise PockError(f"{t.name} has its bootloader in ROM (STM32) or none; the pockmcu bootloader is for "
                        f"the QEMU targets")
    build = f"build/{t.name}-boot"
    out, layout, _ = prepare(out, target, build)
    run_make(out, f"bootloader for {t.name}",
          [f"TARGET={t.name}", "APP=boot", "PROFILE=0", "CMSIS_NN_PATH=", f"BUILD={build}",
           f"FLASH_BYTES={layout.boot_bytes}", f"RAM_BYTES={BOOT_RAM_BYTES}"],
          ["arm-none-eabi-gcc"], t)
    return out / build / "pockmcu_model.elf"


def host_config_text(out) -> str:
    """board_config.h for the host build of the runtime (proto/host_harness.c): a simulated flash
    holding just the two checkpoint slots."""
    plan = read_plan(out)
    need = ckpt_need(params_bytes(plan)) if params_bytes(plan) else 0
    slot = _align(need, 4096) if need else 0
    base = 0x10000000
    lay = Layout("host", base, max(2 * slot, 4096), base, 0, base, slot, 4096, 4, "board_flash_ram.c", 1,
                 0xF00, 0x20000000, 0x100000, 0x200FFFF0)
    lr = (plan.get("training") or {}).get("optimizer", {}).get("lr", 0.0)
    text = config_text(lay, model_hash(out), lr, True, param_limits(out))
    return text.replace("RAM_BUDGET_FROM_MAKEFILE", f"{int(plan['ram_budget_bytes'])}u")


def build_host_harness(out, dest_dir, sanitize: bool = True, optimize: bool = False) -> Path:
    """Compile the board runtime with the model for the host (ASan + UBSan by default; optimize=True:
    -O2 without sanitizers, for a fast device over a socket: pockmcu/board/emulate.py HostBoard)."""
    out = project_dir(out)
    dest = Path(dest_dir)
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "board_config.h").write_text(host_config_text(out))
    exe = dest / "board_host"
    cc = require_tool("gcc")
    flags = ["-O2" if optimize and not sanitize else "-O1", "-g", "-std=c99", "-ffp-contract=off", "-Wall",
             "-Wextra", "-Werror"]
    if sanitize:
        flags += ["-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-fno-omit-frame-pointer"]
    srcs = [out / "model.c", out / "weights.c", *sorted((out / "kernels").glob("*.c")),
            out / "firmware" / "proto" / "host_harness.c"]
    cmd = [cc, *flags, f"-I{dest}", f"-I{out}", f"-I{out / 'kernels'}", f"-I{out / 'firmware'}",
           *map(str, srcs), "-o", str(exe), "-lm"]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        raise PockError("host build of the board runtime failed: " + (p.stderr.strip().splitlines() or ["?"])[0])
    return exe
