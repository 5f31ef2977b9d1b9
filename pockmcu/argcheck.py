"""Validation of command-line arguments and the files they name, before any work starts.

Every check ends a mistake with one line (argparse ``type=`` functions raise ArgumentTypeError, which
the parser reports as ``pockmcu CMD: error: ...``, exit 2; the rest raise PockError). Numbers are
checked for range and finiteness, output paths for being writable files (or directories) before
anything is computed, so that nothing is half-written and no temporary file is left behind, and data
files for non-finite values.
"""

from __future__ import annotations

import argparse
import json
import math
import os
from pathlib import Path

import numpy as np

from .errors import PockError

#: the most epochs a training command accepts (each is a full pass over the data)
MAX_EPOCHS = 10_000
#: budgets above this are not microcontroller sizes (a 32-bit address space)
MAX_BYTES = 1 << 32
#: the linker script's smallest thread stack (firmware/pockmcu.ld.S)
MIN_STACK_BYTES = 256
#: --update JSON nesting deeper than this is refused before it is parsed
MAX_JSON_DEPTH = 32
FLOAT32_MAX = float(np.finfo(np.float32).max)


def int_arg(lo: int, hi: int, what: str = "a whole number"):
    """argparse type: an integer in [lo, hi] (decimal, or 0x.. hexadecimal)."""

    def parse(text: str) -> int:
        try:
            v = int(str(text).strip(), 0)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {what}") from None
        if not lo <= v <= hi:
            raise argparse.ArgumentTypeError(f"{text} is out of range ({lo}..{hi})")
        return v

    return parse


def float_arg(lo: float, hi: float, lo_open: bool = False):
    """argparse type: a finite number in [lo, hi] ((lo, hi] with lo_open)."""

    def parse(text: str) -> float:
        try:
            v = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if not math.isfinite(v) or v < lo or v > hi or (lo_open and v == lo):
            low = f"above {lo:g}" if lo_open else f"at least {lo:g}"
            raise argparse.ArgumentTypeError(f"{text} must be a finite number {low} and at most {hi:g}")
        return v

    return parse


SEED = int_arg(0, (1 << 32) - 1, "a whole number (a seed, 0..2^32-1)")
EPOCHS = int_arg(1, MAX_EPOCHS)
COUNT = int_arg(1, 1 << 31)
BAUD = int_arg(50, 100_000_000)
TCP_PORT = int_arg(1, 65535, "a TCP port number")
ADDRESS = int_arg(0, (1 << 32) - 1, "an address (e.g. 0x08008000)")
TIMEOUT = float_arg(0.0, 3600.0, lo_open=True)
INTERVAL = float_arg(0.0, 86400.0)
LR = float_arg(0.0, 1e6, lo_open=True)


def check_size(nbytes: int, option: str) -> int:
    """A parsed --ram/--flash/--stack: at most 4 GiB; a stack at least the linker's minimum."""
    if nbytes > MAX_BYTES:
        raise PockError(f"{option} of {nbytes} bytes is larger than any microcontroller's address space (4 GiB)")
    if option == "--stack" and nbytes < MIN_STACK_BYTES:
        raise PockError(f"--stack {nbytes} bytes is below the firmware's minimum of {MIN_STACK_BYTES} bytes "
                        f"(the linker script refuses it); use --stack {MIN_STACK_BYTES} or more")
    return nbytes


def output_file(path: str | None, option: str = "-o") -> None:
    """``path`` can be written as a file: not a directory, its directory exists (or can be made) and is
    writable. Checked before the work, so a mistake leaves nothing behind."""
    if not path:
        return
    p = Path(path)
    if p.is_dir():
        raise PockError(f"{option} {path}: is a directory; give a file name (e.g. {p / 'out'})")
    parent = _existing_parent(p.parent)
    if parent is None or not parent.is_dir() or not os.access(parent, os.W_OK | os.X_OK):
        raise PockError(f"{option} {path}: cannot write there ({parent or p.parent} is not a writable directory)")
    if p.exists() and not os.access(p, os.W_OK):
        raise PockError(f"{option} {path}: exists and is not writable")


def output_dir(path: str, option: str = "-o") -> None:
    """``path`` can be created or replaced as a directory (its parent exists or can be made, writable)."""
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise PockError(f"{option} {path}: exists and is not a directory")
    parent = _existing_parent(p.resolve().parent)
    if parent is None or not parent.is_dir() or not os.access(parent, os.W_OK | os.X_OK):
        raise PockError(f"{option} {path}: cannot write there ({parent or p.parent} is not a writable directory)")


def _existing_parent(p: Path) -> Path | None:
    """The nearest existing ancestor of ``p`` (the directory mkdir -p would create below)."""
    p = Path(os.path.abspath(p))
    while not p.exists():
        if p.parent == p:
            return None
        p = p.parent
    return p


def _depth(text: str) -> int:
    """The deepest bracket nesting of JSON text (strings skipped)."""
    depth = best = 0
    in_str = esc = False
    for ch in text:
        if in_str:
            esc, in_str = (False, in_str) if esc else (ch == "\\", ch != '"')
            continue
        if ch == '"':
            in_str = True
        elif ch in "[{":
            depth += 1
            best = max(best, depth)
        elif ch in "]}":
            depth -= 1
    return best


def check_update(text_or_path: str | None) -> None:
    """--update: not nested deeper than MAX_JSON_DEPTH, and a learning rate that float32 arithmetic
    (the generated C) can hold. The spec's own reader (training/spec.py) checks the rest."""
    if text_or_path is None:
        return
    text = str(text_or_path)
    if not text.lstrip().startswith("{"):
        p = Path(text)
        if not p.is_file():
            return                       # the spec reader names the missing file
        try:
            text = p.read_text()
        except (OSError, UnicodeDecodeError) as exc:
            raise PockError(f"--update {text_or_path}: cannot read it ({exc.__class__.__name__})") from None
    if _depth(text) > MAX_JSON_DEPTH:
        raise PockError(f"--update: JSON nested more than {MAX_JSON_DEPTH} levels deep; a spec is a flat object "
                        "like {\"bias\": \"all\", \"weights\": [...]}")
    try:
        spec = json.loads(text)
    except (ValueError, RecursionError):
        return                           # the spec reader reports malformed JSON with its position
    opt = spec.get("optimizer") if isinstance(spec, dict) else None
    for name in ("lr", "momentum"):
        v = opt.get(name) if isinstance(opt, dict) else None
        if isinstance(v, (int, float)) and not isinstance(v, bool) and not (math.isfinite(v) and abs(v) <= 1e6):
            raise PockError(f"--update: optimizer {name} {v!r} is not a finite number of at most 1e6")


def check_finite(x: np.ndarray, y: np.ndarray, path: str, what: str) -> None:
    """Training data: no NaN or infinite input or target (they would train every parameter to NaN)."""
    for name, a in (("x", x), ("y", y)):
        a = np.asarray(a)
        if np.issubdtype(a.dtype, np.floating):
            bad = ~np.isfinite(a)
            if bad.any():
                k = int(np.argmax(bad.reshape(len(a), -1).any(axis=1))) if a.ndim else 0
                raise PockError(f"{what} {path}: {name} holds {int(bad.sum())} NaN or infinite value(s) (first in "
                                f"sample {k}); remove or fix those samples")
