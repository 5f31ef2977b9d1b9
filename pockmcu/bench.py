"""Benchmarks: exact instruction counts in QEMU (-icount), per op and per inference.

``pockmcu bench MODEL --target qemu-m4`` measures one model; ``python -m
pockmcu.bench --all -o BENCHMARKS.md`` (``make bench``) measures every
supported model of ../shared/models on every QEMU target and writes the table.
Counts are instructions, not cycles: QEMU retires one instruction per 256 ns
of virtual time at icount shift 8, and the firmware reads a hardware timer
around each op (see pockmcu/qemu.py).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from .errors import PockError

QEMU_TARGETS = ["qemu-m3", "qemu-m4", "qemu-m7", "qemu-m33", "qemu-m55"]


def random_input(spec: dict, n: int = 1, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    shape = (n,) + tuple(spec["shape"][1:])
    if spec["dtype"] == "float32":
        return rng.standard_normal(shape).astype(np.float32)
    info = np.iinfo(spec["dtype"])
    return rng.integers(info.min, info.max + 1, shape).astype(spec["dtype"])


def bench_model(model: str | Path, target: str = "qemu-m4", ram: str = "4MB", workdir: Path | None = None) -> dict:
    from .build import build_target, elf_size
    from .codegen import write_project
    from .compiler import compile_model, parse_size
    from .runner import run_on_target
    from .sim import read_plan

    tmp = tempfile.TemporaryDirectory(prefix="pockmcu-bench-") if workdir is None else None
    out = Path(tmp.name if tmp else workdir) / "out"
    try:
        t0 = time.perf_counter()
        compiled = compile_model(model, ram=parse_size(ram), target=target)
        write_project(compiled, out)
        gen_seconds = time.perf_counter() - t0
        plan = read_plan(out)
        xs = [random_input(s) for s in plan["inputs"]]
        _, prof = run_on_target(out, target, *xs, profile=True)
        size = elf_size(build_target(out, target, profile=False))
        per_op = prof[0]
        steps = plan["steps"]
        ops = [dict(step=s["step"], name=s["name"], kind=s["kind"], kernel=s["kernel"], macs=s["macs"],
                    instructions=int(n), macs_per_instruction=(s["macs"] / n) if n else 0.0)
               for s, n in zip(steps, per_op)]
        total = int(sum(per_op))
        return dict(model=Path(model).name, target=target, instructions=total, macs=plan["macs"],
                    macs_per_instruction=plan["macs"] / total if total else 0.0,
                    arena_bytes=plan["arena_bytes"], lower_bound_bytes=plan["lower_bound_bytes"],
                    weights_bytes=plan["flash_bytes"], flash_bytes=size["flash"], ram_bytes=size["ram"],
                    text=size["text"], data=size["data"], bss=size["bss"], gen_seconds=round(gen_seconds, 3),
                    ops=ops)
    finally:
        if tmp:
            tmp.cleanup()


def format_bench(r: dict) -> str:
    lines = [f"{r['model']} on {r['target']}: {r['instructions']:,} instructions per inference, "
             f"{r['macs']:,} MACs, {r['macs_per_instruction']:.3f} MAC/instruction",
             f"arena {r['arena_bytes']} B (lower bound {r['lower_bound_bytes']} B), RAM {r['ram_bytes']} B "
             f"(.data+.bss, includes the stack reserve), flash {r['flash_bytes']} B (.text+.data), gen {r['gen_seconds']} s",
             "",
             f"{'#':>3} {'op':12s} {'kernel':34s} {'instructions':>13} {'MACs':>10} {'MAC/instr':>9}"]
    for o in r["ops"]:
        lines.append(f"{o['step']:3d} {o['name']:12s} {o['kernel'] or '(alias)':34s} {o['instructions']:13,d} "
                     f"{o['macs']:10,d} {o['macs_per_instruction']:9.3f}")
    return "\n".join(lines)


def bench_all(models: list[Path], targets: list[str], log=sys.stderr) -> list[dict]:
    from .compiler import load_and_check

    rows = []
    for m in models:
        try:
            load_and_check(m)
        except PockError as exc:
            rows.append(dict(model=m.name, skipped=str(exc).split(": cannot compile: ")[-1][:90]))
            continue
        for t in targets:
            log.write(f"bench {m.name} on {t} ...\n")
            log.flush()
            try:
                rows.append(bench_model(m, t))
            except PockError as exc:
                rows.append(dict(model=m.name, target=t, failed=str(exc)[:120]))
    return rows


def markdown(rows: list[dict]) -> str:
    out = ["# Inference benchmarks", "",
           "Written by `make bench` (`python -m pockmcu.bench --all`). Exact instruction counts from QEMU 7.2 "
           "with `-icount shift=8` (instructions, not cycles), one inference on a seeded random input, "
           "portable C kernels (`kernels_c/`) built by arm-none-eabi-gcc 12 at -O2. Flash = .text + .data of "
           "the whole firmware from `arm-none-eabi-size`; RAM = .data + .bss including the stack reserve; "
           "arena and lower bound from `plan.json`; gen = wall time of `pockmcu gen` (this machine).", "",
           "| model | target | instructions | MACs | MAC/instr | arena B | lower bound B | flash B | RAM B | gen s |",
           "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        if "skipped" in r:
            out.append(f"| {r['model']} | all | not supported: {r['skipped']} | | | | | | | |")
        elif "failed" in r:
            out.append(f"| {r['model']} | {r['target']} | failed: {r['failed']} | | | | | | | |")
        else:
            out.append(f"| {r['model']} | {r['target']} | {r['instructions']:,} | {r['macs']:,} | "
                       f"{r['macs_per_instruction']:.3f} | {r['arena_bytes']:,} | {r['lower_bound_bytes']:,} | "
                       f"{r['flash_bytes']:,} | {r['ram_bytes']:,} | {r['gen_seconds']:.2f} |")
    return "\n".join(out) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m pockmcu.bench")
    ap.add_argument("--all", action="store_true", help="every model in --models on every QEMU target")
    ap.add_argument("--models", default=str(Path(__file__).resolve().parents[1].parent / "shared" / "models"))
    ap.add_argument("--targets", default=",".join(QEMU_TARGETS))
    ap.add_argument("-o", "--output", default="BENCHMARKS.md")
    args = ap.parse_args(argv)
    models = sorted(Path(args.models).glob("*.tflite"))
    if not models:
        sys.stderr.write(f"no .tflite models in {args.models}\n")
        return 2
    rows = bench_all(models, args.targets.split(","))
    Path(args.output).write_text(markdown(rows))
    print(f"wrote {args.output} ({len(rows)} rows)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
