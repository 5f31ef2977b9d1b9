"""`pockmcu run`: build OUT for a Cortex-M target and run samples in QEMU."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .build import build_target
from .errors import PockError
from .qemu import run_samples
from .sim import check_batch, read_plan
from .targets import get_target


def run_on_target(out: str | Path, target: str, *xs: np.ndarray, profile: bool = False):
    """Run N samples in QEMU; returns outputs [N, ...] (and per-sample per-op instruction counts if profile)."""

    t = get_target(target)
    if t.qemu_machine is None:
        raise PockError(f"target {target} is a real board; use a qemu-* target to run in QEMU")
    plan = read_plan(out)
    if len(xs) != len(plan["inputs"]):
        raise PockError(f"the model takes {len(plan['inputs'])} input(s), got {len(xs)}")
    xs = [check_batch(x, spec, f"input {k}") for k, (x, spec) in enumerate(zip(xs, plan["inputs"]))]
    n = xs[0].shape[0]
    sample_in = sum(s["bytes"] for s in plan["inputs"])
    sample_out = sum(s["bytes"] for s in plan["outputs"])
    data = b"".join(b"".join(np.ascontiguousarray(x[i]).tobytes() for x in xs) for i in range(n))
    elf = build_target(Path(out), t.name, profile=profile)
    raw, prof = run_samples(elf, t.name, data, sample_in, sample_out, profile=profile)
    if len(raw) != n * sample_out:
        raise PockError(f"{target}: firmware wrote {len(raw)} bytes for {n} samples, expected {n * sample_out}")
    outs, pos = [], 0
    per_sample = [np.frombuffer(raw[i * sample_out:(i + 1) * sample_out], np.uint8) for i in range(n)]
    for spec in plan["outputs"]:
        arr = np.stack([s[pos:pos + spec["bytes"]].view(np.dtype(spec["dtype"])) for s in per_sample])
        outs.append(arr.reshape((n,) + tuple(spec["shape"][1:])))
        pos += spec["bytes"]
    y = outs[0] if len(outs) == 1 else outs
    return (y, prof) if profile else y
