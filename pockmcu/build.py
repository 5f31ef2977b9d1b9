"""Build a generated project (OUT) with its own Makefile.

* ``build_host_lib(out)``        -> OUT/build/host/libpockmcu_model.so (Python cffi, ABI mode)
* ``build_host_sanitized(out)``  -> OUT/build/host-san/pockmcu_run (ASan + UBSan runner)
* ``build_target(out, target)``  -> OUT/build/<target>[-profile]/pockmcu_model.elf (arm-none-eabi-gcc)
* ``elf_size(elf)``              -> section sizes from arm-none-eabi-size

Builds are incremental (make decides), quiet on success, and a failure raises
``PockError`` carrying the first compiler/linker error lines.
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import subprocess
import tempfile
from contextlib import contextmanager
from pathlib import Path

from .errors import PockError
from .targets import get_target

# tool -> Debian/Ubuntu package(s) that provide it
PACKAGES = {
    "make": "make",
    "gcc": "build-essential",
    "arm-none-eabi-gcc": "gcc-arm-none-eabi libnewlib-arm-none-eabi",
    "arm-none-eabi-size": "binutils-arm-none-eabi",
    "qemu-system-arm": "qemu-system-arm",
}

_ERROR_LINE = re.compile(r"(error|undefined reference|multiple definition|overflowed|will not fit|"
                         r"No rule to make target|\*\*\*|cannot find|ASSERT|pockmcu: )", re.IGNORECASE)
_NOISE = re.compile(r"^make(\[\d+\])?: \*\*\* (.*Error \d+|Waiting for unfinished jobs)|"
                    r"collect2: error: ld returned")


def require_tool(tool: str) -> str:
    """Path of `tool`, or a PockError naming the apt package to install."""
    path = shutil.which(tool)
    if path is None:
        pkg = PACKAGES.get(tool, tool)
        raise PockError(f"{tool} not found on PATH; install it with: sudo apt-get install {pkg}")
    return path


def project_dir(out_dir: str | Path) -> Path:
    out = Path(out_dir)
    if not (out / "Makefile").is_file():
        raise PockError(f"{out}: no Makefile here; run 'pockmcu gen MODEL -o {out}' first")
    return out


@contextmanager
def _locked(out: Path):
    """Serialise builds of one project (two processes must not run make in the same tree)."""
    (out / "build").mkdir(exist_ok=True)
    with open(out / "build" / ".lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _makefile_var(out: Path, name: str) -> str | None:
    m = re.search(rf"^{name}\s*\??:?=\s*(\S*)", (out / "Makefile").read_text(), re.MULTILINE)
    return m.group(1) if m else None


def _explain(what: str, out: Path, log: str, make_vars: dict[str, str], target=None) -> str:
    m = re.search(r"region `(RAM|FLASH)' overflowed by (\d+) bytes", log)
    if m:
        region, n = m.group(1), int(m.group(2))
        if region == "RAM":
            budget = make_vars.get("RAM_BYTES") or _makefile_var(out, "RAM_BYTES")
            stack = make_vars.get("STACK_BYTES") or _makefile_var(out, "STACK_BYTES")
            return (f"{what} does not fit in the RAM budget: region `RAM' overflowed by {n} bytes "
                    f"(budget RAM_BYTES={budget}, holding the {stack}-byte stack, .data and .bss with the arena); "
                    f"raise --ram or reduce the model's memory")
        flash = make_vars.get("FLASH_BYTES") or _makefile_var(out, "FLASH_BYTES") or "the part's flash"
        return (f"{what} does not fit in flash: region `FLASH' overflowed by {n} bytes (FLASH_BYTES={flash}); "
                f"raise --flash or use a target with more flash")
    if "larger than this part's RAM" in log and target is not None:
        budget = make_vars.get("RAM_BYTES") or _makefile_var(out, "RAM_BYTES")
        return (f"{what}: the RAM budget ({budget} bytes) is larger than the {target.name}'s RAM "
                f"({target.ram_bytes} bytes); lower --ram or pick a target with more RAM")
    if "larger than this part's flash" in log and target is not None:
        return (f"{what}: FLASH_BYTES is larger than the {target.name}'s flash ({target.flash_bytes} bytes); "
                f"lower --flash")
    if re.search(r"cannot find -l(c|m|gcc)\b|stdint\.h: No such file", log) and "arm-none-eabi" in log:
        return f"{what}: newlib is missing; install it with: sudo apt-get install libnewlib-arm-none-eabi"
    if re.search(r"cannot find (-lasan|-lubsan|libasan|libubsan)", log):
        return f"{what}: the sanitizer runtimes are missing; install them with: sudo apt-get install build-essential"
    lines = [ln.strip() for ln in log.splitlines() if _ERROR_LINE.search(ln) and not _NOISE.search(ln)]
    if not lines:
        lines = [ln.strip() for ln in log.splitlines() if ln.strip()][-3:] or ["(no output)"]
    lines = [re.sub(r"^\S*/(arm-none-eabi-)?ld: ", "ld: ", ln) for ln in lines]
    first, rest = lines[0], lines[1:5]
    return f"{what} build failed in {out}: {first}" + "".join(f"\n  {ln}" for ln in rest)


def run_make(out: Path, what: str, args: list[str], tools: list[str], target=None) -> None:
    require_tool("make")
    for t in tools:
        require_tool(t)
    make_vars = dict(a.split("=", 1) for a in args if "=" in a)
    cmd = ["make", "-C", str(out), f"-j{os.cpu_count() or 1}", "--no-print-directory", *args]
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    with _locked(out):
        p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if p.returncode != 0:
        raise PockError(_explain(what, out, p.stdout + "\n" + p.stderr, make_vars, target))


def build_host_lib(out_dir: str | Path) -> Path:
    """`make host`: the model as a shared library for cffi; returns its path."""
    out = project_dir(out_dir)
    run_make(out, "host library", ["host"], ["gcc"])
    return out / "build" / "host" / "libpockmcu_model.so"


def build_host_sanitized(out_dir: str | Path) -> Path:
    """`make host-san`: pockmcu_run INPUT OUTPUT built with ASan + UBSan; returns its path."""
    out = project_dir(out_dir)
    run_make(out, "sanitized host runner", ["host-san"], ["gcc"])
    return out / "build" / "host-san" / "pockmcu_run"


def run_host_sanitized(exe: str | Path, input_bytes: bytes, timeout: float = 120) -> bytes:
    """Run the sanitized runner on samples (all inputs concatenated per sample); returns the outputs.

    Any sanitizer report or error raises PockError with the runner's first stderr lines."""

    with tempfile.TemporaryDirectory(prefix="pockmcu-san-") as tmp:
        fin, fout = Path(tmp) / "input.bin", Path(tmp) / "output.bin"
        fin.write_bytes(input_bytes)
        env = dict(os.environ, ASAN_OPTIONS="detect_leaks=1:abort_on_error=0:exitcode=86",
                   UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:exitcode=87")
        try:
            p = subprocess.run([str(exe), str(fin), str(fout)], capture_output=True, text=True,
                               timeout=timeout, env=env)
        except subprocess.TimeoutExpired:
            raise PockError(f"{exe} did not finish within {timeout:g} s") from None
        if p.returncode != 0:
            err = [ln for ln in p.stderr.splitlines() if ln.strip()]
            key = [ln for ln in err if "ERROR" in ln or "runtime error" in ln or "pockmcu_run" in ln] or err
            raise PockError(f"sanitized run failed (exit {p.returncode}): " + " | ".join(key[:3]))
        return fout.read_bytes()


def build_target(out_dir: str | Path, target: str, profile: bool = False, *,
                 cmsis_nn_path: str | Path | None = None, app: str | None = None) -> Path:
    """`make TARGET=<target> [PROFILE=1]`: Cortex-M firmware; returns the .elf path.

    cmsis_nn_path: build against a CMSIS-NN checkout instead of kernels/arm_*.c.
    app: "semihost" (QEMU default) or "semihost_train"; the board app (the real-board default) needs the
    board_config.h that pockmcu.board.firmware.build_app writes: build it there.
    """
    t = get_target(target)
    out = project_dir(out_dir)
    args = [f"TARGET={t.name}", f"PROFILE={1 if profile else 0}",
            f"CMSIS_NN_PATH={Path(cmsis_nn_path).resolve() if cmsis_nn_path else ''}", f"APP={app or ''}"]
    run_make(out, f"firmware for {t.name}", args, ["arm-none-eabi-gcc"], t)
    return out / "build" / (t.name + ("-profile" if profile else "")) / "pockmcu_model.elf"


def elf_size(elf: str | Path) -> dict:
    """Sizes in bytes: text, data, bss as `arm-none-eabi-size` prints them (bss includes the stack
    reserve), stack (the reserve alone: STACK_BYTES + the 256-byte handler stack), flash = text + data,
    ram = data + bss (everything in the RAM region)."""
    size = require_tool("arm-none-eabi-size")
    elf = Path(elf)
    if not elf.is_file():
        raise PockError(f"{elf}: no such firmware file; build it first")
    p = subprocess.run([size, "-B", "-d", str(elf)], capture_output=True, text=True)
    a = subprocess.run([size, "-A", "-d", str(elf)], capture_output=True, text=True)
    if p.returncode != 0 or a.returncode != 0:
        raise PockError(f"arm-none-eabi-size failed on {elf}: {(p.stderr or a.stderr).strip()}")
    text, data, bss = (int(v) for v in p.stdout.splitlines()[1].split()[:3])
    sections = {}
    for ln in a.stdout.splitlines():
        parts = ln.split()
        if len(parts) >= 3 and parts[0].startswith(".") and parts[1].isdigit():
            sections[parts[0]] = int(parts[1])
    return dict(text=text, data=data, bss=bss, stack=sections.get(".stack", 0),
                flash=text + data, ram=data + bss)
