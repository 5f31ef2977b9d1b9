"""`make demo`: the main job end to end on the bundled example.

An int8 CNN pretrained on handwritten digits 0-4 (examples/digits) is compiled with --train for a
256 KB budget, run on a Cortex-M4 in QEMU, fine-tuned there on digits 5-9, exported, and run again.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from . import digits
from .bench import bench_model
from .build import build_target, elf_size
from .codegen import write_project
from .compiler import TrainOptions, compile_model, parse_size
from .errors import PockError
from .export import export_tflite
from .runner import run_on_target
from .sim import load, read_plan
from .train import Data, train_on_target, write_params

TARGET = "qemu-m4"


def accuracy(y: np.ndarray, labels: np.ndarray) -> float:
    return float(np.mean(np.argmax(y.reshape(len(y), -1), axis=1) == labels))


def main(argv=None) -> int:
    out = Path("demo_out")
    ram = parse_size("256KB")
    try:
        model = digits.model_path()
        train, test = digits.datasets()
        print(f"== pockmcu gen {model.name} --train --update <sparse> --ram 256KB -o {out / 'digits'}")
        c = compile_model(model, ram=ram, target=TARGET, train=TrainOptions(spec=digits.spec_json("sparse")))
        proj = write_project(c, out / "digits")
        print(f"   trains: {c.train.spec.describe()}")
        print(f"   RAM needed {c.ram_needed} B of {ram} B: arena {c.plan.arena_bytes} B (lower bound "
              f"{c.plan.lower_bound_bytes} B) + trainable parameters and state {c.persistent_ram_bytes} B "
              f"+ stack and runtime")

        print(f"== inference on {TARGET} (QEMU mps2-an386), 8 test images of digits 5-9")
        dev = run_on_target(proj, TARGET, test.x[:8])
        host = load(proj).invoke(test.x[:8])
        print(f"   predictions {np.argmax(dev.reshape(8, -1), axis=1).tolist()} labels {test.y[:8].tolist()} "
              f"(device equals host simulation: {bool(np.array_equal(dev, host))})")
        b = bench_model(model, TARGET)
        print(f"   {b['instructions']:,} instructions per inference ({b['macs']:,} MACs), exact, QEMU -icount")

        before = accuracy(run_on_target(proj, TARGET, test.x), test.y)
        print(f"== accuracy on held-out digits 5-9 before fine-tuning: {before:.3f}")

        print(f"== fine-tuning on the device: {len(train.x)} images x {digits.EPOCHS} epochs in QEMU")
        _, raw, _ = train_on_target(proj, TARGET, train, digits.EPOCHS, seed=0,
                                    log=lambda line: print("   " + line))
        write_params(out / "digits_trained.bin", load_plan(proj), raw)
        export_tflite(proj, out / "digits_trained.bin", out / "digits_trained.tflite")
        tc = compile_model(out / "digits_trained.tflite", ram=ram, target=TARGET)
        trained_proj = write_project(tc, out / "digits_trained")
        after = accuracy(run_on_target(trained_proj, TARGET, test.x), test.y)
        print(f"== accuracy on held-out digits 5-9 after fine-tuning: {after:.3f} "
              f"(exported model {out / 'digits_trained.tflite'}, run again on {TARGET})")

        size = elf_size(build_target(proj, TARGET, app="semihost_train"))
        _, _, instr = train_on_target(proj, TARGET, train_subset(train, 3), 1, seed=0, timed=True,
                                      log=lambda *_: None)
        print(f"== training firmware: RAM {size['ram']} B of the 256KB budget (.data + .bss with the stack "
              f"reserve), flash {size['flash']} B; {int(np.median(instr)):,} instructions per training step")
        return 0 if after > before + 0.5 else 1
    except PockError as exc:
        sys.stderr.write(f"demo: error: {exc}\n")
        return 2


def load_plan(proj: Path) -> dict:
    return read_plan(proj)


def train_subset(data, n: int):
    return Data(data.x[:n], data.y[:n])


if __name__ == "__main__":
    sys.exit(main())
