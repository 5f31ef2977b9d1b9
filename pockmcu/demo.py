"""`make demo`: the main job end to end on a bundled example model.

gen (--ram 256KB) -> host simulation -> Cortex-M4 firmware in QEMU -> compare,
then print predictions, RAM and flash, and exact instructions per inference.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from .bench import bench_model, random_input
from .build import build_target, elf_size
from .codegen import write_project
from .compiler import compile_model, parse_size
from .errors import PockError
from .runner import run_on_target
from .sim import load


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    model = Path(argv[0] if argv else "tests/fixtures/models/small_cnn.tflite")
    out = Path("demo_out") / model.stem
    ram = parse_size("256KB")
    try:
        print(f"== pockmcu gen {model} --ram 256KB -o {out}")
        compiled = compile_model(model, ram=ram, target="qemu-m4")
        write_project(compiled, out)
        plan = compiled.plan
        print(f"   {len(compiled.graph.ops)} ops; arena {plan.arena_bytes} B (lower bound {plan.lower_bound_bytes} B); "
              f"RAM needed {compiled.ram_needed} of {ram} B; weights {compiled.weights_bytes} B")

        spec = load(out).inputs[0]
        x = random_input(spec, n=8, seed=1)
        print("== host simulation (cffi) of 8 sample inputs")
        host = load(out).invoke(x)
        print("== Cortex-M4 firmware in QEMU (mps2-an386)")
        dev = run_on_target(out, "qemu-m4", x)
        same = int(np.all(host == dev, axis=tuple(range(1, host.ndim))).sum())
        print(f"   device output equals host simulation on {same}/{len(x)} samples")
        flat = dev.reshape(len(dev), -1)
        for i, row in enumerate(flat):
            print(f"   sample {i}: prediction {int(np.argmax(row))}  output {row[:12].tolist()}{' ...' if row.size > 12 else ''}")
        size = elf_size(build_target(out, "qemu-m4"))
        print(f"== memory: RAM {size['ram']} B of the 256KB budget (.data+.bss with stack reserve; arena "
              f"{plan.arena_bytes} B), flash {size['flash']} B (.text+.data)")
        b = bench_model(model, "qemu-m4")
        print(f"== speed: {b['instructions']:,} instructions per inference on Cortex-M4 "
              f"({b['macs']:,} MACs, {b['macs_per_instruction']:.3f} MAC/instruction, exact, QEMU -icount)")
        return 0 if same == len(x) else 1
    except PockError as exc:
        sys.stderr.write(f"demo: error: {exc}\n")
        return 2


if __name__ == "__main__":
    sys.exit(main())
