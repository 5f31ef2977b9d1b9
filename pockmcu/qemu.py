"""Run firmware built for a qemu-* target in QEMU, with semihosting file I/O and exact instruction counts.

(Over a serial line instead - a real board, or QEMU as one - the board app answers the framed protocol
of firmware/PROTOCOL.md: pockmcu.board.client.run_samples gives the same RunResult.)

The firmware (firmware/semihost_main.c) reads ``input.bin`` and writes
``output.bin``, ``stats.bin`` and, when built with PROFILE=1, ``profile.bin``
in QEMU's working directory (a temporary directory here).

Profiling runs QEMU with ``-icount shift=8,align=off,sleep=off``: every guest
instruction advances virtual time by exactly 256 ns, which the 32-bit timer
read by ``pockmcu_profile_hook`` sees. For op i,
``instructions = round(ticks * 1e9 / (F * 256)) - overhead``, where the
overhead is the same measurement around an empty region (two hook calls back
to back) done once by the firmware. The counts are exact and identical from
run to run; they are instructions, not cycles.

profile.bin (all uint32 little-endian):
    header, 6 words: b"PKPF", version 1, num_ops, timer_hz, overhead_ticks, 0
    then per sample num_ops + 1 up-counting timer readings (mod 2^32): before
    op 0, ..., before op num_ops-1, after the last op.
"""

from __future__ import annotations

import struct
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from .build import require_tool
from .errors import PockError
from .targets import get_target, instructions_from_ticks

ICOUNT_SHIFT = 8
PROFILE_MAGIC = b"PKPF"
STATS_MAGIC = b"PKST"

# firmware/app_common.h and startup.c
EXIT_MEANING = {
    1: "pockmcu_init() failed",
    2: "semihosting file I/O failed (input.bin missing or ends inside a sample, or a write failed)",
    3: "pockmcu_invoke() failed",
    4: "an assert() failed in the firmware",
    5: "the firmware faulted (a bad pointer or a misaligned access)",
    6: "abort() was called in the firmware",
    7: "stack overflow: the model needs more stack than STACK_BYTES (raise --stack)",
}


@dataclass
class RunResult:
    outputs: bytes                        # all samples' outputs, back to back
    profile: list[list[int]] | None       # per sample, per op: exact instruction counts
    samples: int                          # samples the firmware processed
    stack_used: int | None                # stack high-water mark (bytes, from the painted stack)
    stack_size: int | None                # stack reserved by the linker script
    overhead_instructions: int | None     # the empty measured region, already subtracted
    console: str                          # QEMU's stdout + stderr (semihosting console)


def qemu_command(elf: str | Path, target: str, profile: bool = False) -> list[str]:
    t = get_target(target)
    if t.qemu_machine is None:
        raise PockError(f"target {t.name} is a real board, not a QEMU machine; use one of "
                        f"qemu-m3, qemu-m4, qemu-m7, qemu-m33, qemu-m55")
    cmd = [require_tool("qemu-system-arm"), "-M", t.qemu_machine, "-nographic", "-monitor", "none",
           "-serial", "null", "-semihosting-config", "enable=on,target=native"]
    if profile:
        cmd += ["-icount", f"shift={ICOUNT_SHIFT},align=off,sleep=off"]
    return cmd + ["-kernel", str(Path(elf).resolve())]


def parse_profile(data: bytes, timer_hz: int | None = None) -> tuple[list[list[int]], int]:
    """profile.bin -> (per-sample per-op instruction counts, overhead instructions subtracted)."""
    if len(data) < 24 or data[:4] != PROFILE_MAGIC:
        raise PockError("profile.bin is missing its header; was the firmware built with PROFILE=1?")
    _, version, num_ops, hz, overhead_ticks, _ = struct.unpack_from("<6I", data, 0)
    if version != 1:
        raise PockError(f"profile.bin version {version} is not supported (expected 1)")
    if timer_hz is not None and hz != timer_hz:
        raise PockError(f"profile.bin timer runs at {hz} Hz but the target's is {timer_hz} Hz; "
                        f"was the firmware built for another target?")
    words = num_ops + 1
    body = data[24:]
    if len(body) % (4 * words):
        raise PockError(f"profile.bin is truncated ({len(body)} bytes of samples, {4 * words} per sample)")
    overhead = instructions_from_ticks(overhead_ticks, hz, ICOUNT_SHIFT)
    counts = []
    for off in range(0, len(body), 4 * words):
        t = struct.unpack_from(f"<{words}I", body, off)
        counts.append([instructions_from_ticks((t[i + 1] - t[i]) & 0xFFFFFFFF, hz, ICOUNT_SHIFT) - overhead
                       for i in range(num_ops)])
    return counts, overhead


def run(elf: str | Path, target: str, input_bytes: bytes, sample_in: int, sample_out: int,
        profile: bool = False, timeout: float = 120) -> RunResult:
    """Run every sample of input_bytes (sample_in bytes each) through the firmware in QEMU."""
    t = get_target(target)
    elf = Path(elf)
    if not elf.is_file():
        raise PockError(f"{elf}: no such firmware file; build it first")
    if sample_in <= 0 or len(input_bytes) % sample_in:
        raise PockError(f"input is {len(input_bytes)} bytes, not a whole number of {sample_in}-byte samples")
    n = len(input_bytes) // sample_in
    cmd = qemu_command(elf, t.name, profile)
    with tempfile.TemporaryDirectory(prefix="pockmcu-qemu-") as tmp:
        work = Path(tmp)
        (work / "input.bin").write_bytes(input_bytes)
        console = _run_in(cmd, work, t, timeout, f"{n} samples")
        out_path = work / "output.bin"
        outputs = out_path.read_bytes() if out_path.exists() else b""
        if len(outputs) != n * sample_out:
            raise PockError(f"firmware on {t.name} wrote {len(outputs)} output bytes for {n} samples, expected "
                            f"{n * sample_out}; is sample_in/sample_out right for this model?")
        samples = stack_used = stack_size = None
        stats = work / "stats.bin"
        if stats.exists() and stats.stat().st_size >= 20 and stats.read_bytes()[:4] == STATS_MAGIC:
            _, _, samples, stack_used, stack_size = struct.unpack("<5I", stats.read_bytes()[:20])
        if samples is not None and samples != n:
            raise PockError(f"firmware on {t.name} processed {samples} samples, expected {n}; "
                            f"sample_in ({sample_in}) does not match the model's input size?")
        counts = overhead = None
        if profile:
            prof = work / "profile.bin"
            if not prof.exists():
                raise PockError(f"{elf} wrote no profile.bin; build it with profile=True (make PROFILE=1)")
            counts, overhead = parse_profile(prof.read_bytes(), t.timer_hz)
            if len(counts) != n:
                raise PockError(f"profile.bin has {len(counts)} samples, expected {n}")
    return RunResult(outputs, counts, n if samples is None else samples, stack_used, stack_size, overhead, console)


def _run_in(cmd: list[str], work: Path, t, timeout: float, what: str) -> str:
    """Run QEMU in ``work``; a non-zero exit becomes one clear PockError. Returns the console text."""
    try:
        p = subprocess.run(cmd, cwd=work, stdin=subprocess.DEVNULL, capture_output=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise PockError(f"QEMU ({t.qemu_machine}) did not finish {what} within {timeout:g} s and was "
                        f"killed: the firmware hung, or the run needs a longer timeout") from None
    console = (p.stdout + p.stderr).decode(errors="replace")
    if p.returncode != 0:
        if "qemu-system-arm:" in console:
            raise PockError(f"QEMU failed: {_first_line(console, 'qemu-system-arm:')}")
        meaning = EXIT_MEANING.get(p.returncode, "unknown failure")
        detail = _first_line(console, "pockmcu:")
        raise PockError(f"firmware on {t.name} exited with status {p.returncode}: {meaning}"
                        + (f" ({detail})" if detail else ""))
    return console


def run_app(elf: str | Path, target: str, files_in: dict[str, bytes], files_out: list[str],
            profile: bool = False, timeout: float = 120) -> dict[str, bytes]:
    """Run any semihosting app: write ``files_in`` into QEMU's working directory, return ``files_out``."""
    t = get_target(target)
    with tempfile.TemporaryDirectory(prefix="pockmcu-qemu-") as tmp:
        work = Path(tmp)
        for name, data in files_in.items():
            (work / name).write_bytes(data)
        _run_in(qemu_command(elf, t.name, profile), work, t, timeout, "its run")
        missing = [f for f in files_out if not (work / f).exists()]
        if missing:
            raise PockError(f"firmware on {t.name} wrote no {', '.join(missing)}")
        return {f: (work / f).read_bytes() for f in files_out}


def run_samples(elf: str | Path, target: str, input_bytes: bytes, sample_in: int, sample_out: int,
                profile: bool = False, timeout: float = 120) -> tuple[bytes, list[list[int]] | None]:
    """Run samples in QEMU: (all outputs back to back, per-sample per-op instruction counts or None)."""
    r = run(elf, target, input_bytes, sample_in, sample_out, profile=profile, timeout=timeout)
    return r.outputs, r.profile


def _first_line(text: str, marker: str) -> str:
    """The first console line containing marker, plus the fault registers if the firmware printed them."""
    lines = text.splitlines()
    for k, ln in enumerate(lines):
        if marker in ln:
            regs = [r.strip() for r in lines[k + 1:k + 9] if r.strip().split(" ")[0] in ("PC", "LR", "BFAR", "CFSR")]
            regs = [" ".join(r.split()) for r in regs]
            return ln.strip() + (" [" + ", ".join(regs) + "]" if regs else "")
    return ""
