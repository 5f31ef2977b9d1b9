"""Command line: pockmcu gen | sim | run | bench | inspect.

User mistakes end with one line on stderr and exit status 2; nothing is
half-written (files go to a temporary name and are renamed at the end).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import warnings
from pathlib import Path

import numpy as np

from . import __version__
from . import argcheck as A
from .bench import bench_model, format_bench
from .board.cli import add_commands as add_board_commands
from .codegen import write_project
from .compiler import KERNELS, TrainOptions, compile_model, parse_size
from .errors import PockError
from .export import export_tflite
from .inspect import inspect
from .kernel_choice import summary as rule_summary
from .runner import run_on_target
from .search import Searcher, format_table, load_calib, render_plan_html, search_update
from .sim import load
from .targets import get_target
from .train import HostTrainer, load_data, train_on_target, training_plan, write_params
from .train_bench import bench_train, format_train_bench
from .training.fusions import Fusions


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, exit 2, no usage dump
        sys.stderr.write(f"{self.prog}: error: {message} (see '{self.prog} --help')\n")
        sys.exit(2)


def load_npy(path: str, what: str = "--input") -> np.ndarray:
    p = Path(path)
    if not p.is_file():
        raise PockError(f"{what} {path}: no such file")
    try:
        return np.load(p, allow_pickle=False)
    except Exception:
        raise PockError(f"{what} {path}: not a .npy file (write it with numpy.save)") from None


def save_npy(path: str, array: np.ndarray) -> None:
    """Write atomically: a temporary file in the same directory, renamed into place."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".npy", dir=p.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            np.save(f, array)
        os.replace(tmp, p)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def check_samples(x: np.ndarray, path: str) -> None:
    """IN.npy holds at least one sample."""
    if x.ndim == 0 or x.shape[0] == 0:
        raise PockError(f"--input {path}: holds no samples (shape {list(x.shape)}); give [N, ...] with N >= 1")


def check_out_dir(out: str) -> None:
    p = Path(out)
    if p.exists() and (not p.is_dir() or (any(p.iterdir()) and not (p / "plan.json").exists())):
        raise PockError(f"-o {out}: exists and is not a pockmcu output directory; choose a new path or remove it")


# -- commands -------------------------------------------------------------------------------


def cmd_gen(args) -> int:
    ram = A.check_size(parse_size(args.ram, "--ram"), "--ram")
    flash = A.check_size(parse_size(args.flash, "--flash"), "--flash") if args.flash else None
    stack = A.check_size(parse_size(args.stack, "--stack"), "--stack")
    target = get_target(args.target).name
    if not args.train and (args.update or args.loss or args.no_reorder or args.calib or args.no_fusion):
        raise PockError("--update, --loss, --no-reorder, --no-fusion and --calib go with --train")
    if args.calib and args.update:
        raise PockError("--calib chooses the update; give either --calib or --update")
    check_out_dir(args.output)
    A.output_dir(args.output)
    A.check_update(args.update)
    train = TrainOptions(spec=args.update, loss=args.loss or "xent", reorder=not args.no_reorder,
                         fusions=Fusions().without(args.no_fusion or ())) if args.train else None
    choice = None
    if train and train.spec is None:  # choose the sparse update under --ram (pockmcu/search.py)

        calib = load_calib(args.calib, args.model, train.loss) if args.calib else None
        choice = search_update(args.model, ram, loss=train.loss, reorder=train.reorder, stack=stack, target=target,
                               calib=calib, stream=args.stream, fusions=train.fusions)
        train.spec = choice.spec_json
    compiled = compile_model(args.model, ram=ram, flash=flash, stack=stack, target=target, train=train,
                             stream=args.stream, numerics=args.numerics, kernels=args.kernels)
    out = write_project(compiled, args.output)
    if choice:
        (out / "spec.json").write_text(json.dumps(choice.spec, indent=1) + "\n")
        print(f"chose the update for --ram {ram} B (expected gain {choice.gain:.3f}, {choice.gains_source}): "
              f"{choice.summary()}; RAM {compiled.ram_needed} B (arena {compiled.plan.arena_bytes} B, persistent "
              f"{compiled.persistent_ram_bytes} B); spec in {out / 'spec.json'} (use with --update)")
    if compiled.stream:
        print(compiled.stream.describe())
    p = compiled.plan
    print(f"wrote {out}: {len(compiled.graph.ops)} ops, arena {p.arena_bytes} B (lower bound "
          f"{p.lower_bound_bytes} B), RAM {compiled.ram_needed} of {ram} B, weights {compiled.weights_bytes} B")
    g = compiled.graph
    rule = rule_summary(g)
    print(f"kernels: {g.library} for {target} ({', '.join(sorted(g.features)) or 'portable C'}); "
          f"{rule + '; ' if rule else ''}the kernel of every step is in {out / 'plan.json'}")
    if compiled.train:
        tg = compiled.train
        print(f"training: {tg.spec.describe()}; persistent RAM {compiled.persistent_ram_bytes} B; "
              f"{len(tg.schedule)} steps per train_step ({'reordered' if tg.reorder else 'updates at the end'})")
    return 0


def cmd_sim(args) -> int:
    if args.train:
        return train_session(args, target=None)
    if not args.input or not args.output:
        raise PockError("sim needs --input IN.npy -o RESULT.npy (or --train DATA.npz)")
    A.output_file(args.output)
    x = load_npy(args.input)
    check_samples(x, args.input)
    model = load(args.out)
    y = model.invoke(x)
    save_npy(args.output, y)
    print(f"{x.shape[0] if x.ndim else 1} sample(s) -> {args.output} {list(np.shape(y))} {np.asarray(y).dtype}")
    return 0


def train_session(args, target: str | None) -> int:
    """sim/run --train: train on DATA.npz for E epochs, print loss/accuracy, save the parameters."""

    plan = training_plan(args.out)
    if args.epochs < 1:
        raise PockError(f"--epochs {args.epochs}: must be at least 1")
    A.output_file(args.save_params, "--save-params")
    data = load_data(args.train, plan)
    A.check_finite(data.x, data.y, args.train, "--train")
    eval_data = load_data(args.eval, plan, "--eval") if getattr(args, "eval", None) else None
    if eval_data is not None:
        A.check_finite(eval_data.x, eval_data.y, args.eval, "--eval")
    if target is None:
        trainer = HostTrainer(args.out)
        trainer.train(data, args.epochs, args.seed, eval_data)
        raw = trainer.params()
    else:
        _, raw, _ = train_on_target(args.out, target, data, args.epochs, args.seed)
    if args.save_params:
        write_params(args.save_params, plan, raw)
        print(f"saved {len(raw)} bytes of trained parameters to {args.save_params}")
    return 0


def cmd_export(args) -> int:
    A.output_file(args.output)
    n = export_tflite(args.out, args.params, args.output)
    print(f"wrote {args.output}: the original model with {n} trained tensors")
    return 0


def cmd_run(args) -> int:
    if args.train:
        return train_session(args, target=args.target)
    if not args.input or not args.output:
        raise PockError("run needs --input IN.npy -o RESULT.npy (or --train DATA.npz)")
    A.output_file(args.output)
    x = load_npy(args.input)
    check_samples(x, args.input)
    y = run_on_target(args.out, args.target, x)
    save_npy(args.output, y)
    print(f"{y.shape[0]} sample(s) on {args.target} -> {args.output} {list(y.shape)} {y.dtype}")
    return 0


def cmd_bench(args) -> int:
    if args.train:
        r = bench_train(args.model, args.target, spec=args.update, loss=args.loss, ram=args.ram, kernels=args.kernels,
                        steps=args.steps, reorder=not args.no_reorder)
        print(json.dumps(r, indent=1) if args.json else format_train_bench(r))
        return 0
    if args.update or args.loss or args.no_reorder:
        raise PockError("--update, --loss and --no-reorder go with --train")
    result = bench_model(args.model, args.target, ram=args.ram, kernels=args.kernels)
    print(json.dumps(result, indent=1) if args.json else format_bench(result))
    return 0


def cmd_inspect(args) -> int:
    report = inspect(args.model, numerics=args.numerics)
    print(report.text())
    if not report.compiles:
        sys.stderr.write(f"pockmcu inspect: {Path(args.model).name} does not compile: {len(report.problems)} "
                         "problem(s), listed above\n")
        return 2
    return 0


def cmd_plan(args) -> int:
    if not args.train:
        raise PockError("plan chooses the sparse update for on-device training: add --train")
    budgets = [parse_size(b, "--ram") for b in args.ram.split(",") if b.strip()]
    if not budgets:
        raise PockError("--ram: give one or more budgets, e.g. 64KB,128KB,256KB")
    budgets = [A.check_size(b, "--ram") for b in budgets]
    stack = A.check_size(parse_size(args.stack, "--stack"), "--stack")
    A.output_file(args.output)
    loss = args.loss or "xent"
    calib = load_calib(args.calib, args.model, loss) if args.calib else None
    searcher = Searcher(args.model, loss=loss, reorder=not args.no_reorder, stack=stack,
                        target=get_target(args.target).name, calib=calib, seed=args.seed, stream=args.stream)
    _, smallest = searcher.minimum(min(budgets))
    if min(budgets) < smallest.ram:
        raise PockError(searcher.too_small_message(min(budgets)))
    choices = searcher.search_all(budgets)
    print(format_table(choices))
    source = f"accuracy gain measured per candidate on {args.calib}" if calib is not None else "the prior"
    print(f"expected gain: {source}; {searcher.coster.compiles} exact compiles")
    if args.output:
        p = Path(args.output)
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(render_plan_html(args.model, choices, searcher))
        print(f"wrote {p}")
    return 0


def add_train_args(p) -> None:
    p.add_argument("--train", metavar="DATA.npz", help="train on x (inputs) and y (labels or targets)")
    p.add_argument("--epochs", type=A.EPOCHS, default=1, help=f"passes over DATA (default 1, at most {A.MAX_EPOCHS})")
    p.add_argument("--seed", type=A.SEED, default=0, help="sample order and stochastic rounding seed (default 0)")
    p.add_argument("--save-params", metavar="P.bin", help="write the trained parameters here")


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="pockmcu", description="Compile int8 TFLite/ONNX models to C for Cortex-M: inference "
                "(and on-device training), simulated on the host, run in QEMU.")
    p.add_argument("--version", action="version", version=f"pockmcu {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    g = sub.add_parser("gen", help="generate a C project from a model",
                       description="Generate model.c/model.h/weights.c, a Makefile, plan.json and reports into OUT.")
    g.add_argument("model", help=".tflite or .onnx model (int8 quantized)")
    g.add_argument("--ram", required=True, help="RAM budget: arena + stack + runtime, e.g. 256KB (K = 1024)")
    g.add_argument("--flash", help="flash budget for weights and code, e.g. 1MB (default: the target's)")
    g.add_argument("--stack", default="4KB", help="stack reserved inside the RAM budget (default 4KB)")
    g.add_argument("--target", default="qemu-m4",
                   help="default build target of the generated Makefile: qemu-m3/m4/m7/m33/m55, cortex-m4 "
                        "(= qemu-m4), or a board (default qemu-m4)")
    g.add_argument("-o", "--output", required=True, metavar="OUT", help="output directory")
    g.add_argument("--train", action="store_true", help="also emit pockmcu_train_step (on-device training)")
    g.add_argument("--update", metavar="SPEC", help="sparse-update spec: a JSON file or the JSON text, e.g. "
                   "'{\"bias\": {\"last\": 4}, \"weights\": [{\"layer\": -1, \"ratio\": 1}]}' "
                   "(default: the update with the most expected gain that fits --ram, written to OUT/spec.json; "
                   "SGD lr 0.001)")
    g.add_argument("--loss", choices=["xent", "mse"], help="xent (softmax cross-entropy, default) or mse")
    g.add_argument("--calib", metavar="DATA.npz", help="without --update: choose the update by the accuracy gain "
                   "each candidate gives on DATA in host simulation (x inputs, y labels) instead of the prior")
    g.add_argument("--stream", choices=["auto", "max", "off"], default="auto",
                    help="run the early high-resolution layers tile by tile: auto (default) when that lowers the "
                         "peak by 10%% or more for at most 50%% more MACs; max: the lowest peak whatever the MACs; off")
    g.add_argument("--no-reorder", action="store_true",
                   help="run every update after the whole backward pass (exact SGD order, more RAM)")
    g.add_argument("--no-fusion", action="append", choices=Fusions.NAMES, metavar="NAME",
                   help="turn off one pass over the training graph that lowers RAM (repeatable; same bits either "
                        "way): mean-backward (a spatial mean's gradient formed inside the 1x1 conv's backward), "
                        "in-place-depthwise (a depthwise input gradient written over its output gradient), "
                        "split-storage (only the trained input channels of a conv weight in RAM)")
    g.add_argument("--kernels", choices=KERNELS, default="auto",
                   help="auto: pockmcu's kernels, every layer on the fastest one its target's core has (default); "
                        "compact: optimized kernels only where they pay for their flash (at most +10%% over "
                        "portable, pockmcu/kernel_choice.py); portable: pockmcu's portable C; "
                        "cmsis-nn: Arm's CMSIS-NN API with its scratch planned for the target's core "
                        "(build with make CMSIS_NN_PATH=...)")
    g.add_argument("--numerics", choices=["onnxruntime", "tflm"],
                   help="whose integer results to reproduce: onnxruntime (float32 requantization emulated exactly "
                        "in integers; default for .onnx) or tflm (TFLite Micro's fixed point; default for .tflite)")
    g.set_defaults(func=cmd_gen)

    s = sub.add_parser("sim", help="run generated C on the host (cffi)",
                       description="Build OUT for the host and run every sample of IN.npy through it.")
    s.add_argument("out", metavar="OUT", help="directory written by 'pockmcu gen'")
    s.add_argument("--input", metavar="IN.npy", help="[N, *input_shape[1:]] in the model's input dtype")
    s.add_argument("-o", "--output", metavar="RESULT.npy")
    add_train_args(s)
    s.add_argument("--eval", metavar="TEST.npz", help="evaluate accuracy on this data after every epoch")
    s.set_defaults(func=cmd_sim)

    r = sub.add_parser("run", help="build firmware and run it in QEMU",
                       description="Build OUT for a Cortex-M target and run every sample of IN.npy in QEMU.")
    r.add_argument("out", metavar="OUT")
    r.add_argument("--target", default="qemu-m4", help="qemu-m3, qemu-m4, qemu-m7, qemu-m33, qemu-m55")
    r.add_argument("--input", metavar="IN.npy")
    r.add_argument("-o", "--output", metavar="RESULT.npy")
    add_train_args(r)
    r.set_defaults(func=cmd_run)

    e = sub.add_parser("export", help="write the model with trained parameters as .tflite",
                       description="Write the original model with the parameters of P.bin (from --save-params).")
    e.add_argument("out", metavar="OUT", help="directory written by 'pockmcu gen --train'")
    e.add_argument("--params", required=True, metavar="P.bin")
    e.add_argument("-o", "--output", required=True, metavar="trained.tflite")
    e.set_defaults(func=cmd_export)

    b = sub.add_parser("bench", help="exact instruction counts per op in QEMU",
                       description="Compile MODEL, run one inference in QEMU with -icount and report exact "
                                   "instructions per op, MACs per instruction, arena and flash bytes.")
    b.add_argument("model")
    b.add_argument("--target", default="qemu-m4")
    b.add_argument("--ram", default="4MB", help="RAM budget for the benchmark build (default 4MB)")
    b.add_argument("--kernels", choices=KERNELS, default="auto", help="as for gen (default auto)")
    b.add_argument("--json", action="store_true", help="print JSON instead of a table")
    b.add_argument("--train", action="store_true",
                   help="measure training steps instead: instructions per step (median), split into forward, loss, "
                        "backward and updates, and per op (JSON key instructions_per_step)")
    b.add_argument("--update", metavar="SPEC", help="with --train: the update spec, as for gen (default: the update "
                   "gen would choose under --ram)")
    b.add_argument("--loss", choices=["xent", "mse"], help="with --train: xent (default) or mse")
    b.add_argument("--no-reorder", action="store_true", help="with --train: every update after the backward pass")
    b.add_argument("--steps", type=int, default=3, help="with --train: training steps measured (default 3)")
    b.set_defaults(func=cmd_bench)

    pl = sub.add_parser("plan", help="the best sparse update for each of several RAM budgets",
                        description="For each budget, the on-device training update with the most expected gain "
                                    "that fits, as a table (and an HTML page with a plot of RAM against gain).")
    pl.add_argument("model", help=".tflite or .onnx model (int8 quantized)")
    pl.add_argument("--train", action="store_true", help="plan the sparse update for on-device training (required)")
    pl.add_argument("--ram", required=True, help="comma-separated RAM budgets, e.g. 64KB,128KB,256KB")
    pl.add_argument("--calib", metavar="DATA.npz", help="measure each candidate's accuracy gain on DATA "
                    "(host simulation) instead of using the prior")
    pl.add_argument("--stack", default="4KB", help="stack reserved inside each budget (default 4KB)")
    pl.add_argument("--target", default="qemu-m4", help="target, as for gen (default qemu-m4)")
    pl.add_argument("--loss", choices=["xent", "mse"], help="xent (default) or mse")
    pl.add_argument("--no-reorder", action="store_true", help="as for gen")
    pl.add_argument("--stream", choices=["auto", "max", "off"], default="auto", help="as for gen")
    pl.add_argument("--seed", type=A.SEED, default=0, help="calibration split and training seed (default 0)")
    pl.add_argument("-o", "--output", metavar="plan.html", help="write a self-contained HTML page here")
    pl.set_defaults(func=cmd_plan)

    i = sub.add_parser("inspect", help="ops, tensors, quantization, MACs and support of a model",
                       description="Print the model's inputs, outputs and op table (every subgraph of a TFLite "
                                   "model, every node of an ONNX model the converter refuses), then every "
                                   "unsupported op, dtype and structure, all at once. Exit status: 0 when the "
                                   "model compiles (every op, dtype and structure is supported; gen may still "
                                   "need a larger --ram), 2 when it does not (or the file is not a model).")
    i.add_argument("model", help=".tflite or .onnx model")
    i.add_argument("--numerics", choices=["onnxruntime", "tflm"], help="as for gen (default: onnxruntime for "
                   ".onnx, tflm for .tflite)")
    i.set_defaults(func=cmd_inspect)
    add_board_commands(sub)
    return p


def one_line(text: str) -> str:
    """A message as one printable line: control characters (from names in a damaged model file) escaped."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        # float overflow in a damaged model's parameters ends in a check's one-line refusal; numpy's
        # RuntimeWarning about it would be a second, confusing line on stderr
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore", RuntimeWarning)
            return args.func(args)
    except PockError as exc:
        sys.stderr.write(f"pockmcu {args.command}: error: {one_line(str(exc))}\n")
        return exc.exit_code
    except OSError as exc:      # a file that cannot be read or written (permissions, a full disk)
        where = f" {exc.filename}:" if exc.filename else ""
        sys.stderr.write(f"pockmcu {args.command}: error:{where} {exc.strerror or exc}\n")
        return 2
    except RecursionError:
        sys.stderr.write(f"pockmcu {args.command}: error: an input is nested too deeply to read\n")
        return 2
    except KeyboardInterrupt:
        sys.stderr.write("pockmcu: interrupted\n")
        return 130


if __name__ == "__main__":
    sys.exit(main())
