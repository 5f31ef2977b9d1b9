"""Build a generated project (OUT) with its own Makefile.

* ``build_host_lib(out)``        -> OUT/build/host/libpockmcu_model.so (Python cffi, ABI mode)
* ``build_host_sanitized(out)``  -> OUT/build/host-san/pockmcu_run (ASan + UBSan runner)
* ``build_target(out, target)``  -> OUT/build/<target>[-profile]/pockmcu_model.elf (arm-none-eabi-gcc)
* ``elf_size(elf)``              -> section sizes from arm-none-eabi-size

Builds are incremental (make decides), quiet on success, and a failure raises
``PockError`` carrying the first compiler/linker error lines.

The host builds compile the kernels (OUT/kernels/*.c) once per content, not once per project:
``kernel_archive(out)`` builds them with OUT's own Makefile (``make host-kernels``) in a
cache directory, keyed by a hash of everything the objects depend on (the Makefile's rules and
flags, the compiler, every file under OUT/kernels and OUT/firmware), and the project links that
archive (``make host KERNEL_LIB=...``). The cache is ``$POCKMCU_CACHE_DIR``, else
``$XDG_CACHE_HOME/pockmcu``, else ``~/.cache/pockmcu``; ``POCKMCU_CACHE_DIR=off`` turns it off
(as does a cache that cannot be written): ``make host`` then compiles everything, as it does
standalone.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
import time
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
def _flock(path: Path):
    with open(path, "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


@contextmanager
def _locked(out: Path):
    """Serialise builds of one project (two processes must not run make in the same tree)."""
    (out / "build").mkdir(exist_ok=True)
    with _flock(out / "build" / ".lock"):
        yield


def _makefile_var(out: Path, name: str) -> str | None:
    m = re.search(rf"^{name}[ \t]*\??:?=[ \t]*(\S*)", (out / "Makefile").read_text(), re.MULTILINE)
    return m.group(1) if m and m.group(1) else None


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
        flash = make_vars.get("FLASH_BYTES") or _makefile_var(out, "FLASH_BYTES")
        part = target.flash_bytes if target is not None else None
        head = f"{what} does not fit in flash: region `FLASH' overflowed by {n} bytes"
        if flash and flash.isdigit() and (part is None or int(flash) + n <= part):
            return (f"{head} (FLASH_BYTES={flash}); raise --flash to {int(flash) + n} bytes or more"
                    + (f" (the {target.name} has {part})" if part else ""))
        where = f"the {target.name}'s whole {part}-byte flash" if part else "the part's whole flash"
        return (f"{head} ({where}); use a target with more flash, or a model with fewer weights")
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


def _make(out: Path, args: list[str]) -> subprocess.CompletedProcess:
    cmd = ["make", "-C", str(out), f"-j{os.cpu_count() or 1}", "--no-print-directory", *args]
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    return subprocess.run(cmd, capture_output=True, text=True, env=env)


def run_make(out: Path, what: str, args: list[str], tools: list[str], target=None) -> None:
    require_tool("make")
    for t in tools:
        require_tool(t)
    make_vars = dict(a.split("=", 1) for a in args if "=" in a)
    with _locked(out):
        p = _make(out, args)
    if p.returncode != 0:
        raise PockError(_explain(what, out, p.stdout + "\n" + p.stderr, make_vars, target))


# ------------------------------------------------------------------ kernel cache
# flavour -> (make goal of the archive, its path in the build tree, the make variable that links it)
_KERNEL_FLAVOURS = {
    "host": ("host-kernels", "build/host/libpockmcu_kernels.a", "KERNEL_LIB"),
    "host-san": ("host-san-kernels", "build/host-san/libpockmcu_kernels.a", "SAN_KERNEL_LIB"),
}
_KERNEL_CACHE_FORMAT = "pockmcu kernel archive 1"
# Makefile lines that differ between projects and do not reach the kernel objects
_PROJECT_LINE = re.compile(r"^(# Generated by pockmcu for model |"
                           r"(MODEL_NAME|MODEL_SRCS|RAM_BYTES|FLASH_BYTES|STACK_BYTES|TARGET|KERNEL_LIBRARY|KERNELS_COLD|CHECK_BYTES)\s*\??:?=)")
_KEEP_ENTRIES = 16
_COMPILER_IDS: dict[tuple, str] = {}


def kernel_cache_dir() -> Path | None:
    """The kernel archive cache, or None when POCKMCU_CACHE_DIR=off."""
    env = os.environ.get("POCKMCU_CACHE_DIR")
    if env:
        return None if env.lower() in ("off", "0", "no") else Path(env)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return Path(xdg) / "pockmcu" if xdg else Path.home() / ".cache" / "pockmcu"


def _compiler_id(cc: str) -> str:
    path = shutil.which(cc)
    if path is None:
        return f"missing {cc}"
    st = os.stat(path)
    memo = (path, st.st_mtime_ns, st.st_size)
    if memo not in _COMPILER_IDS:
        p = subprocess.run([path, "--version"], capture_output=True, text=True)
        _COMPILER_IDS[memo] = f"{os.path.realpath(path)}\n{p.stdout}"
    return _COMPILER_IDS[memo]


def kernel_cache_key(out: str | Path, flavour: str = "host") -> str:
    """Hash of everything OUT's kernel objects of this flavour depend on: the Makefile (rules and
    flags; the lines naming the model, its sources and its memory budget left out), the host
    compiler and archiver as the environment picks them, the compiler's identity, and the name and
    content of every file under OUT/kernels and OUT/firmware (the include directories)."""
    out = Path(out)
    h = hashlib.sha256()

    def put(label: str, data: bytes) -> None:
        h.update(f"{label}\0{len(data)}\0".encode())
        h.update(data)

    put("format", f"{_KERNEL_CACHE_FORMAT} {flavour}".encode())
    makefile = "".join(ln for ln in (out / "Makefile").read_text().splitlines(True) if not _PROJECT_LINE.match(ln))
    put("Makefile", makefile.encode())
    cc, ar = os.environ.get("HOST_CC", "gcc"), os.environ.get("HOST_AR", "ar")
    put("tools", f"{cc}\0{ar}".encode())
    put("compiler", _compiler_id(cc).encode())
    for sub in ("kernels", "firmware"):
        for f in sorted(p for p in (out / sub).rglob("*") if p.is_file()):
            put(f.relative_to(out).as_posix(), f.read_bytes())
    return h.hexdigest()


def _prune(root: Path, keep: int) -> None:
    """Drop all but the `keep` most recently used entries (each use touches its entry)."""
    entries = sorted((p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")),
                     key=lambda p: p.stat().st_mtime, reverse=True)
    for old in entries[keep:]:
        shutil.rmtree(old, ignore_errors=True)
    for tmp in root.glob(".*.tmp-*"):  # left by a process that died while building
        if time.time() - tmp.stat().st_mtime > 3600:
            shutil.rmtree(tmp, ignore_errors=True)


def kernel_archive(out_dir: str | Path, flavour: str = "host") -> Path | None:
    """The archive of OUT's kernels compiled for `flavour` ("host" or "host-san"), from the cache,
    built there first if needed; None when there is no usable cache (the caller then lets make
    compile the kernels in OUT, which also reports any compile error exactly as before)."""
    goal, built, _ = _KERNEL_FLAVOURS[flavour]
    root = kernel_cache_dir()
    out = Path(out_dir)
    if root is None or not (out / "kernels").is_dir():
        return None
    root = root.resolve()
    entry = root / f"{flavour}-{kernel_cache_key(out, flavour)[:40]}"
    lib = entry / "libpockmcu_kernels.a"
    if re.search(r"[\s$#'\"\\:;%]", str(lib)):  # not expressible as a make prerequisite
        return None
    try:
        root.mkdir(parents=True, exist_ok=True)
        if not lib.is_file():
            with _flock(root / ".lock"):
                if not lib.is_file():
                    tmp = Path(tempfile.mkdtemp(prefix=f".{entry.name}.tmp-", dir=root))
                    try:
                        for sub in ("kernels", "firmware"):
                            shutil.copytree(out / sub, tmp / sub, ignore=shutil.ignore_patterns("*.o", "*.d"))
                        shutil.copyfile(out / "Makefile", tmp / "Makefile")
                        if _make(tmp, [goal]).returncode != 0:
                            return None
                        stage = tmp / "entry"
                        stage.mkdir()
                        os.replace(tmp / built, stage / lib.name)
                        os.rename(stage, entry)
                    finally:
                        shutil.rmtree(tmp, ignore_errors=True)
                    _prune(root, _KEEP_ENTRIES)
        now = time.time()
        os.utime(entry, (now, now))
    except OSError:
        return None
    return lib


def _kernel_args(out: Path, flavour: str, kernel_cache: bool) -> list[str]:
    lib = kernel_archive(out, flavour) if kernel_cache else None
    return [f"{_KERNEL_FLAVOURS[flavour][2]}={lib}"] if lib else []


def build_host_lib(out_dir: str | Path, *, kernel_cache: bool = True) -> Path:
    """`make host`: the model as a shared library for cffi; returns its path.

    kernel_cache: link the kernels from the cache (see the module docstring) instead of compiling them in OUT."""
    out = project_dir(out_dir)
    require_tool("gcc")
    run_make(out, "host library", ["host", *_kernel_args(out, "host", kernel_cache)], ["gcc"])
    return out / "build" / "host" / "libpockmcu_model.so"


def build_host_sanitized(out_dir: str | Path, *, kernel_cache: bool = True) -> Path:
    """`make host-san`: pockmcu_run INPUT OUTPUT built with ASan + UBSan; returns its path."""
    out = project_dir(out_dir)
    require_tool("gcc")
    run_make(out, "sanitized host runner", ["host-san", *_kernel_args(out, "host-san", kernel_cache)], ["gcc"])
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
