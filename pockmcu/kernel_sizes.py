"""The measured facts behind the kernel cost rule (pockmcu/kernel_choice.py): per core, what each kernel
costs in flash and what it costs in instructions per MAC. Written to pockmcu/kernel_sizes.json by

    python -m pockmcu.kernel_sizes            # sizes (about 30 s) and instructions per MAC (QEMU, minutes)
    python -m pockmcu.kernel_sizes --sizes    # sizes only, keeping the measured speeds

and checked by tests/test_flash.py, which recompiles every kernel and compares (so a kernel that changes
fails the test until this command is run again).

Sizes: every kernel file the rule weighs (the rows of the op kinds that have an optimized row, their
``*_get_buffer_size`` and every kernel they call) is compiled alone with the generated Makefile's firmware
flags for the core, at -O2 (``hot``: a kernel a step calls) and at -Os (``cold``: a kernel only linked as
another's fallback, which the Makefile compiles at -Os); bytes = its .text*, .rodata* and .data* sections
as ``arm-none-eabi-size -A`` prints them (with -ffunction-sections the linker keeps all of them).
``calls`` = the kernel functions its object references (``arm-none-eabi-nm -u``). C library helpers
(memcpy, __aeabi_*) are shared by every build and not counted.

Speeds: each shape class's single-layer model (pockmcu/kernel_bench.py) is run in QEMU with
``--kernels auto`` and ``--kernels portable``; instructions of the layer / its MACs = the kernel's
instructions per MAC on that core (for an op without MACs, average pool and ADD, per element read:
``OpDef.work``). An onnxruntime-numerics twin runs the same loops as its TFLite Micro
kernel and takes its number (SAME_LOOPS).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

from .bench import random_input, run_profiled
from .build import require_tool
from .codegen import write_project
from .compiler import compile_graph, load_and_check
from .kernel_bench import Layer, layer_model
from .kernel_choice import SIZES_FILE, load_table, weighed_kinds
from .kernel_table import TABLE
from .ops import opdef
from .resources import firmware_dir, kernels_dir
from .sim import read_plan
from .targets import get_target

#: the cores the rule is measured for: every core with an optimized row (Cortex-M3 has none)
CORES = {"cortex-m4": "qemu-m4", "cortex-m7": "qemu-m7", "cortex-m33": "qemu-m33", "cortex-m55": "qemu-m55"}
#: the generated Makefile's firmware flags (templates/Makefile.j2 FW_CFLAGS), without the optimization level
FLAGS = ("-mthumb", "-std=c99", "-ffp-contract=off", "-Wall", "-Wextra", "-Werror", "-ffunction-sections",
         "-fdata-sections")
HOT, COLD = "-O2", "-Os"

#: the single-layer models that measure each shape class (kernel_bench.Layer arguments); the portable run of
#: the same model measures the portable kernel
SPEED_LAYERS = {
    "conv 1x1": dict(kind="conv", h=25, w=5, cin=64, cout=64, k=1),
    "conv 3x3": dict(kind="conv", h=16, w=16, cin=32, cout=32, k=3),
    "depthwise 3x3": dict(kind="dw", h=25, w=5, cin=64, cout=64, k=3),
    "depthwise 5x5": dict(kind="dw", h=16, w=16, cin=32, cout=32, k=5),
    "depthwise 3x3 x4": dict(kind="dw", h=16, w=16, cin=8, cout=32, k=3),
    "fully connected": dict(kind="fc", cin=256, cout=64),
    "average pool": dict(kind="avgpool", h=25, w=5, cin=64, k=0),
    "add": dict(kind="add", h=16, w=16, cin=32),
}


def _kernel_file(function: str) -> Path:
    return kernels_dir() / f"{function}.c"


def object_size(obj: Path) -> int:
    """Flash bytes of one object: its .text*, .rodata* and .data* sections (arm-none-eabi-size -A)."""
    out = subprocess.run([require_tool("arm-none-eabi-size"), "-A", "-d", str(obj)], capture_output=True, text=True,
                         check=True).stdout
    return sum(int(p[1]) for p in (ln.split() for ln in out.splitlines())
               if len(p) >= 2 and p[0].startswith((".text", ".rodata", ".data")) and p[1].isdigit())


def compile_kernel(function: str, core: str, level: str, tmp: Path) -> tuple[int, list[str]]:
    """(flash bytes, kernel functions it calls) of kernels_c/<function>.c built for ``core`` at ``level``."""
    obj = tmp / f"{function}{level}.o"
    cc = require_tool("arm-none-eabi-gcc")
    cmd = [cc, *get_target(CORES[core]).cflags, *FLAGS, level, f"-I{kernels_dir()}", f"-I{firmware_dir()}",
           "-c", str(_kernel_file(function)), "-o", str(obj)]
    subprocess.run(cmd, check=True, capture_output=True)
    nm = subprocess.run([require_tool("arm-none-eabi-nm"), "-u", str(obj)], capture_output=True, text=True,
                        check=True).stdout
    calls = sorted({s.split()[-1] for s in nm.splitlines() if s.strip()} - {function})
    return object_size(obj), [c for c in calls if _kernel_file(c).is_file()]


def weighed_functions() -> list[str]:
    """The table's functions of the weighed kinds and their *_get_buffer_size (those that exist)."""
    fns = {r.function for k in weighed_kinds() for r in TABLE[k]}
    fns |= {f"{f}_get_buffer_size" for f in fns}
    return sorted(f for f in fns if _kernel_file(f).is_file())


def measure_sizes(cores=tuple(CORES)) -> dict:
    """{core: {function: {"hot": bytes at -O2, "cold": bytes at -Os, "calls": [...]}}} for every weighed
    function and every kernel they call."""
    out: dict = {}
    with tempfile.TemporaryDirectory(prefix="pockmcu-sizes-") as d:
        for core in cores:
            todo, rows = weighed_functions(), {}
            while todo:
                f = todo.pop()
                if f in rows:
                    continue
                hot, calls = compile_kernel(f, core, HOT, Path(d))
                cold, _ = compile_kernel(f, core, COLD, Path(d))
                rows[f] = dict(hot=hot, cold=cold, calls=calls)
                todo += [c for c in calls if c not in rows]
            out[core] = dict(sorted(rows.items()))
    return out


def measure_speeds(cores=tuple(CORES), log=sys.stderr) -> dict:
    """{core: {function: instructions per MAC}} from QEMU runs of SPEED_LAYERS (auto, on a Helium core also
    auto without the Helium rows, which measures its DSP rows, and portable; a kernel already measured on
    the core is not measured again)."""
    out: dict = {}
    weighed = set(weighed_kinds())
    with tempfile.TemporaryDirectory(prefix="pockmcu-speeds-") as d:
        for core in cores:
            rows: dict = {}
            target = CORES[core]
            runs = [("auto", frozenset()), ("portable", frozenset())]
            if get_target(target).mve:
                runs.insert(1, ("auto", frozenset(r.function for rs in TABLE.values() for r in rs
                                                  if "mve" in r.features)))
            for name, spec in SPEED_LAYERS.items():
                model = Path(d) / f"{name.replace(' ', '_')}.tflite"
                model.write_bytes(layer_model(Layer(**spec)))
                for kernels, off in runs:
                    g = replace(load_and_check(model), kernels_off=off)
                    c = compile_graph(g, ram=get_target(target).ram_bytes, target=target, kernels=kernels)
                    prj = write_project(c, Path(d) / "o")
                    plan = read_plan(prj)
                    (op,) = [o for o in g.ops if o.kind in weighed]
                    kernels_of = {r.function for r in TABLE[op.kind]} | {opdef(op.kind).kernel}
                    (step,) = [s for s in plan["steps"] if s["kernel"] in kernels_of]
                    if step["kernel"] in rows:
                        continue
                    log.write(f"{core}: {name}: {step['kernel']}\n")
                    xs = [random_input(s, seed=k) for k, s in enumerate(plan["inputs"])]
                    _, per_op = run_profiled(prj, target, xs)
                    rows[step["kernel"]] = round(per_op[step["step"]] / opdef(op.kind).work(g, op), 4)
            out[core] = dict(sorted(rows.items()))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m pockmcu.kernel_sizes", description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", action="store_true", help="measure sizes only; keep the instructions per MAC")
    a = ap.parse_args(argv)
    old = load_table() if SIZES_FILE.is_file() else {}
    table = dict(sizes=measure_sizes(),
                 instructions_per_mac=old.get("instructions_per_mac", {}) if a.sizes else measure_speeds())
    SIZES_FILE.write_text(json.dumps(table, indent=1, sort_keys=True) + "\n")
    print(f"wrote {SIZES_FILE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
