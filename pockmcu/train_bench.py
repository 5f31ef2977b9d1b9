"""Exact instructions of one training step in QEMU, split by phase and by op.

``pockmcu bench MODEL --train [--update SPEC] [--loss xent|mse] --target qemu-m7 [--json]``:

* compiles MODEL with ``--train`` (the update of ``--update``, or, as ``gen`` does, the update
  with the most expected gain that fits ``--ram``);
* runs ``steps`` training steps on seeded random samples twice in QEMU under ``-icount``:
  once with the ordinary training app (``semihost_train``: one timer reading around each
  ``pockmcu_train_step``; the median is ``instructions_per_step``) and once with
  ``semihost_train_profile`` (``-DPOCKMCU_PROFILE_TRAIN``: a reading before every step of the
  training schedule), which gives the instructions of every op of the step whose total is the
  median; both runs must end with the same parameters;
* optionally trains the same samples in host simulation and checks the parameters are the
  QEMU bytes (``host_equals_qemu``).

Phases: ``forward`` (the forward pass with the saves training needs), ``loss`` (the loss
gradient), ``updates`` (ops that write a trainable parameter: the fused weight-gradient +
update kernels and the bias updates) and ``backward`` (everything else after the loss: input
gradients, masks, pooling / mean gradients). MACs per op as plan.json counts them (backward
MACs included). RAM = arena + persistent (trainable tensors, optimizer state, RNG streams).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from .build import run_make
from .codegen import write_project
from .compiler import TrainOptions, compile_model, parse_size
from .errors import PockError
from .ops import opdef
from .qemu import parse_profile, run_app
from .search import search_update
from .sim import read_plan
from .targets import get_target
from .train import Data, HostTrainer, stream, train_on_target, train_stream_bytes

PHASES = ("forward", "loss", "backward", "updates")
PROFILE_APP = "semihost_train_profile"


def random_data(plan: dict, n: int, seed: int = 0) -> Data:
    """n seeded random samples in the model's input dtype, with random labels (xent) or targets (mse)."""
    rng = np.random.default_rng(seed)
    spec = plan["inputs"][0]
    shape = (n,) + tuple(spec["shape"][1:])
    if spec["dtype"] == "float32":
        x = rng.standard_normal(shape).astype(np.float32)
    else:
        info = np.iinfo(spec["dtype"])
        x = rng.integers(info.min, info.max + 1, shape).astype(spec["dtype"])
    out = plan["outputs"][0]
    if plan["training"]["loss"] == "xent":
        y = rng.integers(0, out["shape"][-1], n).astype(np.int32)
    else:
        y = rng.standard_normal((n,) + tuple(out["shape"][1:])).astype(np.float32)
    return Data(x, y)


def phase_of(step: dict, role: str) -> str:
    if step["phase"] == "forward":
        return "forward"
    return {"loss": "loss", "update": "updates"}.get(role, "backward")


def build_profile_app(out: Path, target: str) -> Path:
    """The training app with a timer reading before every step (its own build directory)."""
    t = get_target(target)
    build = f"build/{t.name}-train-profile"
    run_make(out, f"training profile firmware for {t.name}",
             [f"TARGET={t.name}", "PROFILE=0", "CMSIS_NN_PATH=", f"APP={PROFILE_APP}", f"BUILD={build}",
              "FW_DEFS=$(PORT_DEFS) -DPOCKMCU_PROFILE_TRAIN"], ["arm-none-eabi-gcc"], t)
    return out / build / "pockmcu_model.elf"


def profile_steps(out: Path, target: str, stream_bytes: bytes, steps: int) -> tuple[list[list[int]], bytes]:
    """Per training step, per schedule step: exact instructions; and the parameters after the run."""
    t = get_target(target)
    elf = build_profile_app(out, t.name)
    files = run_app(elf, t.name, {"train.bin": stream_bytes}, ["profile.bin", "params.bin"], profile=True,
                    timeout=120 + steps * 60)
    counts, _ = parse_profile(files["profile.bin"], t.timer_hz)
    if len(counts) != steps:
        raise PockError(f"{target}: the profiled training run stopped after {len(counts)} of {steps} steps")
    return counts, files["params.bin"]


def host_params(out: Path, data: Data, seed: int) -> bytes:
    """The parameters after the same steps in host simulation (cffi)."""
    h = HostTrainer(out)
    h.init(seed)
    for idx in stream(len(data.x), 1, seed)[0]:
        h.step(data.x[idx], data.y[idx])
    return h.params()


def bench_train(model: str | Path, target: str = "qemu-m4", spec: str | None = None, loss: str | None = None,
                ram: str = "4MB", kernels: str = "auto", steps: int = 3, reorder: bool = True, seed: int = 0,
                stream_mode: str = "auto", check_host: bool = False, workdir: Path | None = None) -> dict:
    """Compile MODEL for training and measure ``steps`` training steps in QEMU (see the module docstring)."""
    if steps < 1:
        raise PockError(f"--steps {steps}: measure at least one training step")
    t = get_target(target)
    if t.qemu_machine is None:
        raise PockError(f"target {t.name} is a real board; bench --train needs a qemu-* target "
                        f"(qemu-m3, qemu-m4, qemu-m7, qemu-m33, qemu-m55)")
    tmp = tempfile.TemporaryDirectory(prefix="pockmcu-trainbench-") if workdir is None else None
    out = Path(tmp.name if tmp else workdir) / "out"
    try:
        t0 = time.perf_counter()
        budget = min(parse_size(ram, "--ram"), t.ram_bytes)
        opts = TrainOptions(spec=spec, loss=loss or "xent", reorder=reorder)
        chosen = None
        if spec is None:
            chosen = search_update(model, budget, loss=opts.loss, reorder=reorder, target=t.name, stream=stream_mode)
            opts.spec = chosen.spec_json
        c = compile_model(model, ram=budget, target=t.name, train=opts, stream=stream_mode, kernels=kernels)
        write_project(c, out)
        gen_seconds = time.perf_counter() - t0
        plan = read_plan(out)
        data = random_data(plan, steps, seed)
        stream_bytes, _ = train_stream_bytes(plan, data, 1, seed, timed=True)
        _, params, totals = train_on_target(out, t.name, data, 1, seed, timed=True, log=lambda *_: None)
        per_op, prof_params = profile_steps(out, t.name, stream_bytes, steps)
        if prof_params != params:
            raise PockError("internal: the profiled training build ended with other parameters than the plain one")
        median = int(np.median(totals))
        pick = min(range(steps), key=lambda k: (abs(totals[k] - median), k))   # the step closest to the median
        g = c.graph
        sched = c.train.schedule
        ops = []
        for s, op, n in zip(plan["steps"], sched, per_op[pick]):
            ops.append(dict(step=s["step"], name=s["name"], kind=s["kind"], kernel=s["kernel"],
                            phase=phase_of(s, opdef(op.kind).role), macs=s["macs"], instructions=int(n),
                            macs_per_instruction=s["macs"] / n if n > 0 else 0.0))
        phases = {p: sum(o["instructions"] for o in ops if o["phase"] == p) for p in PHASES}
        phase_macs = {p: sum(o["macs"] for o in ops if o["phase"] == p) for p in PHASES}
        kernels_sum: dict[str, int] = {}
        for o in ops:
            if o["phase"] != "forward" and o["kernel"]:
                kernels_sum[o["kernel"]] = kernels_sum.get(o["kernel"], 0) + o["instructions"]
        result = dict(
            model=Path(model).name, target=t.name, kernels=dict(library=g.library, features=sorted(g.features)),
            update=c.train.spec.describe(), spec=json.loads(opts.spec) if opts.spec.lstrip().startswith("{")
            else opts.spec, chosen_by_search=chosen is not None, loss=c.train.loss, reorder=reorder,
            streamed=c.stream is not None, steps=steps, instructions_per_step=median,
            step_instructions=[int(v) for v in totals], profiled_step=pick,
            profiled_total=int(sum(per_op[pick])), phases=phases, phase_macs=phase_macs,
            macs=dict(forward=plan["training"]["forward_macs"], backward=plan["training"]["backward_macs"]),
            backward_kernels=dict(sorted(kernels_sum.items(), key=lambda kv: -kv[1])),
            arena_bytes=c.plan.arena_bytes, lower_bound_bytes=c.plan.lower_bound_bytes,
            persistent_bytes=c.persistent_ram_bytes, ram_bytes=c.plan.arena_bytes + c.persistent_ram_bytes,
            ram_needed_bytes=c.ram_needed, gen_seconds=round(gen_seconds, 3), ops=ops)
        if check_host:
            result["host_equals_qemu"] = host_params(out, data, seed) == params
        return result
    finally:
        if tmp:
            tmp.cleanup()


def format_train_bench(r: dict) -> str:
    feats = ", ".join(r["kernels"]["features"]) or "portable C"
    lines = [f"{r['model']} on {r['target']} ({r['kernels']['library']} kernels, {feats}): "
             f"{r['instructions_per_step']:,} instructions per training step (median of {r['steps']})",
             f"update: {r['update']}{' (chosen by the search under --ram)' if r['chosen_by_search'] else ''}; "
             f"loss {r['loss']}; {'reordered' if r['reorder'] else 'updates at the end'}"
             f"{'; streamed' if r['streamed'] else ''}",
             f"RAM {r['ram_bytes']:,} B (arena {r['arena_bytes']:,} B + persistent {r['persistent_bytes']:,} B); "
             f"forward MACs {r['macs']['forward']:,}, backward MACs {r['macs']['backward']:,}",
             "   " + "   ".join(f"{p} {r['phases'][p]:,}" for p in PHASES)
             + f"   (profiled step {r['profiled_step']}: {r['profiled_total']:,})"]
    if "host_equals_qemu" in r:
        lines.append(f"host simulation = QEMU parameters: {'yes' if r['host_equals_qemu'] else 'NO'}")
    lines += ["", f"{'#':>3} {'phase':8s} {'op':28s} {'kernel':42s} {'instructions':>13} {'MACs':>10} {'MAC/instr':>9}"]
    for o in r["ops"]:
        lines.append(f"{o['step']:3d} {o['phase']:8s} {o['name'][:28]:28s} {(o['kernel'] or '(alias)')[:42]:42s} "
                     f"{o['instructions']:13,d} {o['macs']:10,d} {o['macs_per_instruction']:9.3f}")
    return "\n".join(lines)


def main(argv=None) -> int:
    """python -m pockmcu.train_bench MODEL [--update SPEC] [--target T] [--json]: as ``pockmcu bench --train``."""
    ap = argparse.ArgumentParser(prog="python -m pockmcu.train_bench")
    ap.add_argument("model")
    ap.add_argument("--target", default="qemu-m4")
    ap.add_argument("--update")
    ap.add_argument("--loss", choices=["xent", "mse"])
    ap.add_argument("--ram", default="4MB")
    ap.add_argument("--kernels", default="auto")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--stream", default="auto")
    ap.add_argument("--no-reorder", action="store_true")
    ap.add_argument("--check-host", action="store_true")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    r = bench_train(a.model, a.target, a.update, a.loss, a.ram, a.kernels, a.steps, not a.no_reorder,
                    stream_mode=a.stream, check_host=a.check_host)
    print(json.dumps(r, indent=1) if a.json else format_train_bench(r))
    return 0


if __name__ == "__main__":
    sys.exit(main())
