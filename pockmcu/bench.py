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
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from . import digits, tte_bench, zoo_transfer
from .board.client import open_board
from .board.emulate import HostBoard
from .board.proxy import LossyProxy
from .build import build_target, elf_size
from .codegen import write_project
from .compiler import TrainOptions, compile_graph, compile_model, load_and_check, parse_size, with_kernels
from .errors import PockError
from .kernel_bench import kernel_markdown, kernel_table
from .qemu import run_samples
from .reference import run_reference
from .sim import read_plan
from .stream import all_candidates
from .targets import get_target
from .train import HostTrainer, stream
from .train_bench import bench_train
from .tte_bench import section

QEMU_TARGETS = ["qemu-m3", "qemu-m4", "qemu-m7", "qemu-m33", "qemu-m55"]


def random_input(spec: dict, n: int = 1, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    shape = (n,) + tuple(spec["shape"][1:])
    if spec["dtype"] == "float32":
        return rng.standard_normal(shape).astype(np.float32)
    info = np.iinfo(spec["dtype"])
    return rng.integers(info.min, info.max + 1, shape).astype(spec["dtype"])


def onnx_vs_onnxruntime(model: str | Path, n: int = 20, seed: int = 0, numerics: str | None = None) -> dict:
    """For an ONNX model: our outputs (the numpy reference, byte-equal to the generated C) against
    onnxruntime's on n seeded random inputs: largest difference in output LSB and fraction differing.
    numerics: onnxruntime (the default for .onnx) or tflm."""
    import onnxruntime as ort  # noqa: PLC0415  (optional: only for ONNX models)


    g = load_and_check(model, numerics)
    specs = [dict(shape=g.t(t).shape, dtype=g.t(t).dtype) for t in g.inputs]
    xs = [random_input(s, n, seed + k) for k, s in enumerate(specs)]
    (ours,) = run_reference(g, *xs)
    so = ort.SessionOptions()
    so.log_severity_level = 3
    sess = ort.InferenceSession(str(model), so, providers=["CPUExecutionProvider"])
    names = [i.name for i in sess.get_inputs()]
    theirs = np.concatenate([sess.run(None, {k: x[i:i + 1] for k, x in zip(names, xs)})[0] for i in range(n)])
    out = g.t(g.outputs[0])
    if out.quant is None:    # float output: compare in steps of the dequantized tensor's scale
        s = g.t(next(op for op in g.ops if g.outputs[0] in op.outputs).inputs[0]).quant.s
        d = np.abs(np.rint(ours.astype(np.float64) / s) - np.rint(theirs.astype(np.float64) / s))
    else:
        d = np.abs(ours.astype(np.int64) - theirs.astype(np.int64).reshape(ours.shape))
    return dict(samples=n, max_lsb=int(d.max()), fraction_differing=float((d > 0).mean()), numerics=g.numerics)


def onnx_both_numerics(model: str | Path, n: int = 20, seed: int = 0) -> dict:
    """onnx_vs_onnxruntime in both numerics modes: {"onnxruntime": {...}, "tflm": {...}}."""
    return {m: onnx_vs_onnxruntime(model, n, seed, m) for m in ("onnxruntime", "tflm")}


def cmsis_nn_checkout(kernels: str, cmsis_nn_path: str | Path | None = None) -> str | None:
    """The CMSIS-NN checkout a --kernels cmsis-nn measurement builds against (``cmsis_nn_path``, else
    the CMSIS_NN_PATH environment variable); None for pockmcu's kernels."""
    if kernels != "cmsis-nn":
        return None
    path = str(cmsis_nn_path or os.environ.get("CMSIS_NN_PATH", ""))
    if not path:
        raise PockError("--kernels cmsis-nn measures Arm's CMSIS-NN: set CMSIS_NN_PATH to a CMSIS-NN checkout "
                        "(git clone https://github.com/ARM-software/CMSIS-NN)")
    if not (Path(path) / "Include" / "arm_nnfunctions.h").is_file():
        raise PockError(f"CMSIS_NN_PATH={path} has no Include/arm_nnfunctions.h; point it at a CMSIS-NN checkout")
    return path


def run_profiled(out: Path, target: str, xs: list, cmsis_nn_path: str | None = None) -> tuple[bytes, list[int]]:
    """One sample in QEMU with per-op timing: (the output bytes, instructions per op); built against
    Arm's CMSIS-NN when ``cmsis_nn_path`` is given."""
    plan = read_plan(out)
    elf = build_target(out, target, profile=True, cmsis_nn_path=cmsis_nn_path)
    data = b"".join(np.ascontiguousarray(x[0]).tobytes() for x in xs)
    raw, prof = run_samples(elf, target, data, sum(s["bytes"] for s in plan["inputs"]),
                            sum(s["bytes"] for s in plan["outputs"]), profile=True)
    return raw, prof[0]


def bench_compile(model: str | Path, target: str, ram: int, numerics: str | None = None, kernels: str = "auto",
                  schedule_of: str | None = None):
    """``compile_model`` with --stream auto; ``schedule_of``: the kernel library whose streaming decision the
    schedule takes (the stream pass weighs each library's scratch buffers, so Arm's kernels alone may leave a
    model untiled that ours tile: side_by_side gives Arm's build the schedule of ours)."""
    g = load_and_check(model, numerics)
    cands = all_candidates(with_kernels(g, target, schedule_of)) if schedule_of else None
    return compile_graph(g, ram, target=target, stream_candidates=cands, kernels=kernels)


def bench_model(model: str | Path, target: str = "qemu-m4", ram: str = "4MB", workdir: Path | None = None,
                numerics: str | None = None, kernels: str = "auto", cmsis_nn_path: str | Path | None = None,
                seed: int = 0, schedule_of: str | None = None) -> dict:
    """Exact instructions per op and per inference, RAM and flash, for --kernels auto | portable |
    cmsis-nn (Arm's kernels: built against ``cmsis_nn_path`` or $CMSIS_NN_PATH). ``output_hex``: the
    output bytes of the measured inference (seeded random input), for byte comparisons. ``schedule_of``:
    see ``bench_compile``."""
    cmsis = cmsis_nn_checkout(kernels, cmsis_nn_path)
    tmp = tempfile.TemporaryDirectory(prefix="pockmcu-bench-") if workdir is None else None
    out = Path(tmp.name if tmp else workdir) / "out"
    try:

        t0 = time.perf_counter()
        budget = min(parse_size(ram), get_target(target).ram_bytes)   # never more than the part has
        compiled = bench_compile(model, target, budget, numerics, kernels, schedule_of)
        write_project(compiled, out)
        gen_seconds = time.perf_counter() - t0
        plan = read_plan(out)
        xs = [random_input(s, seed=seed + k) for k, s in enumerate(plan["inputs"])]
        raw, per_op = run_profiled(out, target, xs, cmsis)
        size = elf_size(build_target(out, target, profile=False, cmsis_nn_path=cmsis))
        steps = plan["steps"]
        ops = [dict(step=s["step"], name=s["name"], kind=s["kind"], kernel=s["kernel"], macs=s["macs"],
                    instructions=int(n), macs_per_instruction=(s["macs"] / n) if n else 0.0)
               for s, n in zip(steps, per_op)]
        total = int(sum(per_op))
        return dict(model=Path(model).name, target=target, kernels=kernels, instructions=total, macs=plan["macs"],
                    macs_per_instruction=plan["macs"] / total if total else 0.0,
                    arena_bytes=plan["arena_bytes"], lower_bound_bytes=plan["lower_bound_bytes"],
                    weights_bytes=plan["flash_bytes"], flash_bytes=size["flash"], ram_bytes=size["ram"],
                    text=size["text"], data=size["data"], bss=size["bss"], gen_seconds=round(gen_seconds, 3),
                    schedule=[s["name"] for s in steps], output_hex=raw.hex(),
                    ops=ops, **({"onnx_vs_onnxruntime": onnx_both_numerics(model)}
                                if str(model).lower().endswith(".onnx") and kernels == "auto" else {}))
    finally:
        if tmp:
            tmp.cleanup()


def format_bench(r: dict) -> str:
    lines = [f"{r['model']} on {r['target']} (--kernels {r['kernels']}): {r['instructions']:,} instructions per "
             f"inference, {r['macs']:,} MACs, {r['macs_per_instruction']:.3f} MAC/instruction",
             f"arena {r['arena_bytes']} B (lower bound {r['lower_bound_bytes']} B), RAM {r['ram_bytes']} B "
             f"(.data+.bss, includes the stack reserve), flash {r['flash_bytes']} B (.text+.data), gen {r['gen_seconds']} s",
             "",
             f"{'#':>3} {'op':12s} {'kernel':34s} {'instructions':>13} {'MACs':>10} {'MAC/instr':>9}"]
    if "onnx_vs_onnxruntime" in r:
        for k, (mode, o) in enumerate(r["onnx_vs_onnxruntime"].items()):
            lines.insert(2 + k, f"vs onnxruntime, --numerics {mode}: {o['fraction_differing']:.2%} of outputs differ, "
                                f"largest difference {o['max_lsb']} LSB ({o['samples']} random inputs)")
    for o in r["ops"]:
        lines.append(f"{o['step']:3d} {o['name']:12s} {o['kernel'] or '(alias)':34s} {o['instructions']:13,d} "
                     f"{o['macs']:10,d} {o['macs_per_instruction']:9.3f}")
    return "\n".join(lines)


def side_by_side(model: str | Path, target: str, cmsis_nn_path: str | Path | None = None, seed: int = 0) -> dict:
    """One model on one core: ours optimized (--kernels auto), ours portable (--kernels portable) and,
    with a CMSIS-NN checkout, Arm's kernels on the same generated schedule (--kernels cmsis-nn built
    with CMSIS_NN_PATH), all on the same seeded input; ``outputs_equal``: every output byte for byte
    equal to the optimized build's (``same_schedule``: Arm's plan runs the ops in the same order)."""
    row = dict(model=Path(model).name, target=target)
    row["auto"] = bench_model(model, target, kernels="auto", seed=seed)
    row["compact"] = bench_model(model, target, kernels="compact", seed=seed)
    row["portable"] = bench_model(model, target, kernels="portable", seed=seed)
    row["arm"] = bench_model(model, target, kernels="cmsis-nn", cmsis_nn_path=cmsis_nn_path,
                             seed=seed, schedule_of="auto") if cmsis_nn_path else None
    runs = [r for r in (row["compact"], row["portable"], row["arm"]) if r]
    row["outputs_equal"] = all(r["output_hex"] == row["auto"]["output_hex"] for r in runs)
    row["same_schedule"] = row["arm"] is None or row["arm"]["schedule"] == row["auto"]["schedule"]
    return row


def bench_all(models: list[Path], targets: list[str], log=sys.stderr, cmsis_nn_path: str | None = None) -> list[dict]:
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
                rows.append(side_by_side(m, t, cmsis_nn_path))
            except PockError as exc:
                rows.append(dict(model=m.name, target=t, failed=str(exc)[:120]))
    return rows


def _ratio(a: int, b: int) -> str:
    return f"{a / b:.2f}x" if b else "-"


def markdown(rows: list[dict], cmsis_nn: str | None = None) -> str:
    arm_note = (f"Arm = Arm's CMSIS-NN ({cmsis_nn}) on the same generated schedule (`--kernels cmsis-nn`, built with "
                "`make CMSIS_NN_PATH=...`, scratch planned for Arm's kernels on that core); 'outputs' says whether the "
                "compact, portable and Arm builds gave the auto build's output bytes exactly. "
                if cmsis_nn else "Arm's CMSIS-NN column is empty: run with CMSIS_NN_PATH set to a CMSIS-NN checkout. ")
    out = ["# Inference benchmarks", "",
           "Written by `make bench` (`python -m pockmcu.bench --all`). Exact instruction counts from QEMU 7.2 "
           "with `-icount shift=8` (instructions, not cycles), one inference on a seeded random input, built by "
           "arm-none-eabi-gcc 12 at -O2. ours = `--kernels auto` (every layer on the fastest row of the kernel "
           "table for the core), compact = `--kernels compact` (optimized kernels only within the flash rule: at "
           "most +10% over portable, pockmcu/kernel_choice.py), portable = `--kernels portable` (portable C on "
           "every core). " + arm_note +
           "Flash = .text + .data of the whole firmware from `arm-none-eabi-size`; RAM = .data + .bss including "
           "the stack reserve; arena and lower bound from `plan.json`; gen = wall time of `pockmcu gen` (this "
           "machine).", "",
           "| model | target | ours instr | ours MAC/instr | portable instr | Arm instr | Arm MAC/instr | Arm / ours | "
           "outputs | MACs | arena B (ours / Arm) | lower bound B | flash B (ours / portable / Arm) | "
           "RAM B (ours / Arm) | gen s | compact instr | compact flash B |",
           "|---|---|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        if "skipped" in r:
            out.append(f"| {r['model']} | all | not supported: {r['skipped']} |" + " |" * 12)
        elif "failed" in r:
            out.append(f"| {r['model']} | {r['target']} | failed: {r['failed']} |" + " |" * 12)
        else:
            a, p, arm = r["auto"], r["portable"], r["arm"]
            same = "byte-identical" if r["outputs_equal"] else "DIFFER"
            if arm and not r["same_schedule"]:
                same += " (Arm's schedule differs)"
            def arm_col(key: str, fmt: str = ",", sep: str = "") -> str:
                return f"{sep}{arm[key]:{fmt}}" if arm else ("" if sep else "-")

            ratio = _ratio(arm["instructions"], a["instructions"]) if arm else "-"

            def fast_col(key: str) -> str:
                return f"{r['compact'][key]:,}" if r.get("compact") else "-"

            out.append(
                f"| {r['model']} | {r['target']} | {a['instructions']:,} | {a['macs_per_instruction']:.3f} | "
                f"{p['instructions']:,} | {arm_col('instructions')} | {arm_col('macs_per_instruction', '.3f')} | "
                f"{ratio} | {same} | {a['macs']:,} | {a['arena_bytes']:,}{arm_col('arena_bytes', sep=' / ')} | "
                f"{a['lower_bound_bytes']:,} | {a['flash_bytes']:,} / {p['flash_bytes']:,}"
                f"{arm_col('flash_bytes', sep=' / ')} | {a['ram_bytes']:,}{arm_col('ram_bytes', sep=' / ')} | "
                f"{a['gen_seconds']:.2f} | {fast_col('instructions')} | {fast_col('flash_bytes')} |")
    onnx_rows = {r["model"]: r["auto"]["onnx_vs_onnxruntime"] for r in rows
                 if "auto" in r and "onnx_vs_onnxruntime" in r["auto"]}
    if onnx_rows:
        out += onnx_table(onnx_rows)
    return "\n".join(out) + "\n"


def onnx_table(onnx_rows: dict) -> list[str]:
    """Markdown lines: per ONNX model, outputs differing from onnxruntime and the largest difference, both modes."""
    out = ["", "ONNX models against onnxruntime 1.31 (CPU execution provider, default session options): our outputs "
           "(bit-exact with the generated C) on 20 seeded random inputs. `--numerics onnxruntime` (the default for "
           ".onnx) emulates onnxruntime's float32 requantization exactly in integers; `--numerics tflm` uses TFLite "
           "Micro's fixed point (same C as the TFLite model):", "",
           "| model | onnxruntime: outputs differing | max (LSB) | tflm: outputs differing | max (LSB) |",
           "|---|---:|---:|---:|---:|"]
    for m, o in onnx_rows.items():
        a, b = o["onnxruntime"], o["tflm"]
        out.append(f"| {m} | {a['fraction_differing']:.2%} | {a['max_lsb']} | {b['fraction_differing']:.2%} | "
                   f"{b['max_lsb']} |")
    return out


TRAIN_MODELS = {  # sparse schemes shaped like the Tiny Training Engine's: late biases, a few late weight layers
    "mlperf_vww_mobilenetv1_96": {"bias": {"last": 10}, "weights": [{"layer": -1, "ratio": 1.0},
                                                                     {"layer": -2, "ratio": 0.5},
                                                                     {"layer": -4, "ratio": 0.25}]},
    "mlperf_ic_resnet8": {"bias": {"last": 5}, "weights": [{"layer": -1, "ratio": 1.0},
                                                            {"layer": -2, "ratio": 0.5}]},
    "mlperf_kws_dscnn": {"bias": {"last": 4}, "weights": [{"layer": -1, "ratio": 1.0},
                                                           {"layer": -2, "ratio": 0.5}]},
}
FULL = {"bias": "all", "weights": "all"}


def bench_training(model: Path, spec: dict, reorder: bool, target: str = "qemu-m4", steps: int = 3) -> dict:
    """RAM from the plan and exact instructions per train_step in QEMU, split by phase and kernel
    (pockmcu/train_bench.py), with the host simulation = QEMU parameter check."""
    r = bench_train(model, target, spec=json.dumps(spec), loss="xent", steps=steps, reorder=reorder,
                    check_host=True)
    return dict(r, model=Path(model).name, instructions=r["instructions_per_step"])


def _top_kernels(r: dict, n: int = 3) -> str:
    total = r["instructions"]
    return ", ".join(f"{k.removeprefix('pockmcu_')} {v / total:.0%}" for k, v in list(r["backward_kernels"].items())[:n])


def training_markdown(rows: list[dict]) -> str:
    out = ["# Training benchmarks", "",
           "Written by `make bench` (`python -m pockmcu.bench --train`; one row is `pockmcu bench MODEL --train "
           "--update SPEC --target T`). RAM = arena + persistent RAM (trainable tensors, optimizer state, RNG "
           "streams) from `plan.json`; instructions = median exact instruction count of one `pockmcu_train_step` "
           "over 3 steps on seeded random samples in QEMU with `-icount shift=8`, gcc 12 -O2, the kernels chosen "
           "for the core (`--kernels auto`). The split comes from a second build that reads the timer before every "
           "step of the training schedule (`semihost_train_profile`): forward (with the saves training needs), "
           "loss, backward (input gradients, masks, pooling gradients) and updates (the fused weight-gradient + "
           "update kernels and the bias updates); top kernels = the three backward / update kernels with the most "
           "instructions, as a share of the step. host = QEMU: the host simulation of the same steps ends with "
           "the QEMU parameters byte for byte. 'updates at the end' runs every update after the whole backward "
           "pass (`--no-reorder`); 'reordered' runs each layer's update as soon as its gradient exists (default).",
           "",
           "| model | target | scheme | schedule | RAM B | instructions / step | forward | loss | backward | updates "
           "| backward MACs | top kernels | host = QEMU |",
           "|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---|---|"]
    for r in rows:
        ph = r["phases"]
        out.append(f"| {r['model']} | {r['target']} | {r['scheme']} | "
                   f"{'reordered' if r['reorder'] else 'updates at the end'} | {r['ram_bytes']:,} | "
                   f"{r['instructions']:,} | {ph['forward']:,} | {ph['loss']:,} | {ph['backward']:,} | "
                   f"{ph['updates']:,} | {r['macs']['backward']:,} | {_top_kernels(r)} | "
                   f"{'yes' if r.get('host_equals_qemu') else 'NO'} |")
    out += ["", "Sparse schemes (update spec JSON):", ""]
    for name, spec in TRAIN_MODELS.items():
        out.append(f"- {name}: `{json.dumps(spec)}`")
    out.append(f"- MobileNetV2-w0.35 128x128 (`{tte_bench.MODEL.name}`), the Tiny Training Engine's scheme: "
               "biases of the last 22 layers, the classifier, the first pointwise conv of the last four blocks at "
               "ratios 1, 1/2, 1/4, 1/8")
    return "\n".join(out) + "\n"


def bench_training_all(models_dir: Path, log=sys.stderr) -> list[dict]:
    rows = []
    for stem, sparse in TRAIN_MODELS.items():
        model = models_dir / f"{stem}.tflite"
        for scheme, spec, reorder in (("full update", FULL, False), ("full update", FULL, True),
                                      ("sparse update", sparse, False), ("sparse update", sparse, True)):
            log.write(f"train bench {stem}: {scheme}, {'reordered' if reorder else 'updates at the end'} ...\n")
            log.flush()
            rows.append(dict(bench_training(model, spec, reorder), scheme=scheme))
    mnv2 = tte_bench.model_path()
    log.write("train bench MobileNetV2-w0.35: the TTE scheme on qemu-m7 ...\n")
    log.flush()
    rows.append(dict(bench_training(mnv2, tte_bench.sparse_spec(mnv2), True, target="qemu-m7"),
                     scheme="sparse update (TTE's)"))
    return rows


def digits_markdown(log=sys.stderr) -> str:
    """Transfer learning on the bundled digits model: int8 on-device fine-tuning against float."""

    md = digits.example()
    train, test = digits.datasets()
    rows = []
    with tempfile.TemporaryDirectory(prefix="pockmcu-digits-") as tmp:
        for scheme, (_, lr) in digits.SCHEMES.items():
            float_same = md.float_finetune(scheme, digits.EPOCHS, lr, 0)["test_acc"]
            best = md.FINETUNE_DEFAULTS[scheme]
            float_best = md.float_finetune(scheme, best["epochs"], best["lr"], 0)["test_acc"]
            for qas in (True, False):
                log.write(f"digits {scheme} qas={qas} ...\n")
                c = compile_model(digits.model_path(), ram=parse_size("256KB"),
                                  train=TrainOptions(spec=digits.spec_json(scheme, qas)))
                out = write_project(c, Path(tmp) / f"{scheme}{qas}")
                h = HostTrainer(out)
                before = h.evaluate(test)
                acc = h.train(train, digits.EPOCHS, 0, test, log=lambda *_: None)[-1]["eval_accuracy"]
                rows.append((scheme, qas, lr, before, acc, float_same, best["lr"], float_best,
                             c.plan.arena_bytes + c.persistent_ram_bytes))
    out = ["# Transfer learning: digits 0-4 -> 5-9", "",
           "Written by `make bench`. The bundled int8 CNN (examples/digits, pretrained in float on digits 0-4 of "
           f"scikit-learn's load_digits) fine-tuned on digits 5-9 ({len(train.x)} training images, {digits.EPOCHS} "
           f"epochs, batch 1, SGD, seed 0) by the generated C in host simulation, which QEMU reproduces byte for "
           f"byte (tests/test_digits_transfer.py); accuracy on the {len(test.x)} held-out 5-9 images. Float = "
           "PyTorch fine-tuning of the same parameters of the dequantized model, at the same learning rate and "
           "at the best learning rate found for float.", "",
           "| parameters | QAS | lr | before | int8 after | float, same lr | float, best lr | RAM B |",
           "|---|---|---:|---:|---:|---:|---:|---:|"]
    for scheme, qas, lr, before, acc, fs, blr, fb, ram in rows:
        out.append(f"| {scheme} | {'on' if qas else 'off'} | {lr} | {before:.3f} | {acc:.3f} | {fs:.3f} | "
                   f"{fb:.3f} (lr {blr}) | {ram:,} |")
    out += ["", "Parameter sets: sparse = biases of the last 3 layers + weights of the last conv and the "
            "classifier; last = the classifier's weights and bias; full = every weight and bias."]
    return "\n".join(out) + "\n"


# ------------------------------------------------------------------ the serial link (board protocol)


def serial_bench(models_dir: Path, samples: int = 2000, rates=(0.0, 0.001, 0.01), log=sys.stderr) -> str:
    """Training samples streamed to the board runtime built for the host (pockmcu/board/emulate.py
    HostBoard) through a proxy that drops, duplicates and corrupts a fraction of the bytes each way:
    for the digits model (64-byte samples) and a 96x96x3 image model, at each damage rate, the time,
    the sample throughput, the retransmissions, and the check that every sample was applied exactly
    once with the parameters equal to the host simulation. Returns a markdown section."""
    spec = '{"bias": {"last": 1}, "weights": [{"layer": -1}], "optimizer": {"kind": "sgd", "lr": 0.001}}'
    rows = []
    with tempfile.TemporaryDirectory(prefix="pockmcu-serial-") as tmp:
        train, _ = digits.datasets()
        order = np.concatenate(stream(len(train.x), samples // len(train.x) + 1, 1))[:samples]
        setups = [("digits (8x8x1, sparse update)",
                   compile_model(digits.model_path(), ram=parse_size("256KB"),
                                 train=TrainOptions(spec=digits.spec_json("sparse"))),
                   train.x[order], train.y[order].astype(np.int32))]
        rng = np.random.default_rng(0)
        setups.append(("VWW MobileNetV1 96x96x3 (last layer)",
                       compile_model(Path(models_dir) / "mlperf_vww_mobilenetv1_96.tflite", ram=parse_size("1MB"),
                                     train=TrainOptions(spec=spec)),
                       rng.integers(-128, 128, (samples, 96, 96, 3)).astype(np.int8),
                       rng.integers(0, 2, samples).astype(np.int32)))
        for k, (name, c, xs, ys) in enumerate(setups):
            out = write_project(c, Path(tmp) / f"m{k}")
            h = HostTrainer(out)
            h.init(1)
            for i in range(len(xs)):
                h.step(xs[i], ys[i])
            want = h.params()
            for rate in rates:
                with HostBoard(out, Path(tmp) / f"hb{k}") as hb, LossyProxy(hb.port, rate, seed=1) as px:
                    cl = open_board(hb.url if rate == 0 else px.url, connect_timeout=5)
                    cl.set_seed(1)
                    t0 = time.monotonic()
                    for i in range(len(xs)):
                        cl.train(i, ys[i].tobytes(), xs[i].tobytes())
                    el = time.monotonic() - t0
                    st = cl.get_stats()
                    same = cl.read_params(cl.info.params_bytes) == want
                    cl.link.close()
                    damaged = px.damaged()
                row = dict(model=name, rate=rate, n=len(xs), sample_bytes=int(xs[0].nbytes) + 4, seconds=el,
                           steps=st.steps, repeats=st.duplicates, retrans=cl.stats.retransmissions,
                           timeouts=cl.stats.timeouts, damaged=damaged, chunk=cl.chunk_size(), equal=same)
                log.write(f"serial: {row}\n")
                rows.append(row)
    out = ["# The serial link: streamed training through a damaging link", "",
           f"{samples} training samples per row (digits: its {len(train.x)}-sample training set in shuffled epochs; "
           "VWW: seeded random images and labels) streamed to the "
           "board runtime built for the host (`HostBoard`) over TCP, through `LossyProxy` damaging the given "
           "fraction of bytes each way (each damaged byte dropped, duplicated or corrupted). Exactly once: the "
           "device's step count equals the samples sent, and its parameters equal the host simulation of the "
           "same samples byte for byte. `python -m pockmcu.bench --serial`.", "",
           "| model | damage each way | samples | bytes/sample | seconds | samples/s | KiB/s | device steps | "
           "params = host sim | retransmissions | timeouts | bytes damaged | repeats answered from memory | "
           "chunk at the end |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        out.append(f"| {r['model']} | {r['rate']:.1%} | {r['n']} | {r['sample_bytes']} | {r['seconds']:.1f} | "
                   f"{r['n'] / r['seconds']:.1f} | {r['n'] * r['sample_bytes'] / r['seconds'] / 1024:.1f} | "
                   f"{r['steps']} | {'yes' if r['equal'] else 'NO'} | {r['retrans']} | {r['timeouts']} | "
                   f"{r['damaged']} | {r['repeats']} | {r['chunk']} |")
    return "\n".join(out) + "\n"


def _supported(model: Path) -> bool:
    try:
        load_and_check(model)
    except PockError:
        return False
    return True


def flash_bytes(model: str | Path, target: str, kernels: str) -> dict:
    """Flash (.text + .data, arm-none-eabi-size) of the firmware for ``model`` on ``target`` with ``--kernels
    kernels`` (built, not run), and the flash rule's record from plan.json (``--kernels compact``)."""
    with tempfile.TemporaryDirectory(prefix="pockmcu-flash-") as d:
        c = compile_model(model, ram=min(4 << 20, get_target(target).ram_bytes), target=target, kernels=kernels)
        out = write_project(c, Path(d) / "out")
        return dict(flash=elf_size(build_target(out, target))["flash"], rule=read_plan(out)["kernels"].get("rule"))


def flash_markdown(models: list[Path], targets: list[str], log=sys.stderr) -> str:
    """Per model and core: flash with --kernels portable, compact (the flash rule) and auto (every optimized
    kernel), the growth over portable, and how many layers the rule kept off their fastest row."""
    out = ["# Flash per kernel choice", "",
           "Written by `python -m pockmcu.bench --flash`. Flash = .text + .data of the firmware "
           "(`arm-none-eabi-size`), arm-none-eabi-gcc 12 -O2 (fallback-only kernels -Os). auto = `--kernels auto` "
           "(the default: every optimized kernel of the core), compact = `--kernels compact` (optimized kernels "
           "within +10% of the portable build's counted flash, pockmcu/kernel_choice.py).", "",
           "| model | target | portable B | auto B | auto / portable | compact B | compact / portable | "
           "layers compact keeps off their fastest row |", "|---|---|---:|---:|---:|---:|---:|---:|"]
    for m in models:
        for t in targets:
            log.write(f"flash {m.name} on {t} ...\n")
            try:
                r = {k: flash_bytes(m, t, k) for k in ("portable", "auto", "compact")}
            except PockError as exc:
                out.append(f"| {m.name} | {t} | failed: {str(exc)[:90]} |" + " |" * 5)
                continue
            p, a, c = (r[k]["flash"] for k in ("portable", "auto", "compact"))
            rule = r["compact"]["rule"]
            out.append(f"| {m.name} | {t} | {p:,} | {a:,} | {a / p:.3f} | {c:,} | {c / p:.3f} | "
                       f"{len(rule['fallbacks']) if rule else '-'} |")
    return "\n".join(out) + "\n"


def _kernel_speed(model, target: str, kernels: str = "auto", **kw) -> dict:
    """bench_model for the per-kernel table, which measures kernel speed (auto: every optimized kernel)."""
    return bench_model(model, target, kernels=kernels, **kw)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m pockmcu.bench")
    ap.add_argument("--all", action="store_true", help="every model in --models on every QEMU target (ours "
                    "optimized, ours portable, Arm's CMSIS-NN with --cmsis-nn) and the per-kernel table")
    ap.add_argument("--kernels-table", action="store_true", help="only the per-kernel MAC/instruction table")
    ap.add_argument("--flash", action="store_true", help="flash per model and core: portable, auto, compact "
                    "(built, not run)")
    ap.add_argument("--cmsis-nn", default=os.environ.get("CMSIS_NN_PATH") or None, metavar="PATH",
                    help="a CMSIS-NN checkout to measure Arm's kernels on the same schedules (default $CMSIS_NN_PATH)")
    ap.add_argument("--train", action="store_true", help="the training table (full/sparse, reordered or not)")
    ap.add_argument("--digits", action="store_true", help="the digits transfer-learning table")
    ap.add_argument("--zoo", action="store_true",
                    help="transfer learning on a zoo model from the corpus cache (pockmcu/zoo_transfer.py)")
    ap.add_argument("--planner", action="store_true",
                    help="planner quality per model and the MobileNetV2 / Tiny Training Engine table")
    ap.add_argument("--serial", action="store_true",
                    help="streamed training over a link damaging 0%%, 0.1%% and 1%% of the bytes (board protocol)")
    ap.add_argument("--serial-samples", type=int, default=2000, help="samples per --serial row (default 2000)")
    ap.add_argument("--models", default=str(Path(__file__).resolve().parents[1].parent / "shared" / "models"))
    ap.add_argument("--targets", default=",".join(QEMU_TARGETS))
    ap.add_argument("-o", "--output", default="BENCHMARKS.md")
    args = ap.parse_args(argv)
    sections = []
    if args.all:
        models = sorted(Path(args.models).glob("*.tflite")) + sorted(Path(args.models).glob("*.onnx"))
        if not models:
            sys.stderr.write(f"no .tflite or .onnx models in {args.models}\n")
            return 2
        cmsis = cmsis_nn_checkout("cmsis-nn", args.cmsis_nn) if args.cmsis_nn else None
        sections.append(markdown(bench_all(models, args.targets.split(","), cmsis_nn_path=cmsis), cmsis))
    if args.all or args.kernels_table:
        cmsis = cmsis_nn_checkout("cmsis-nn", args.cmsis_nn) if args.cmsis_nn else None
        sections.append(kernel_markdown(kernel_table(args.targets.split(","), _kernel_speed, cmsis), cmsis))
    if args.flash:
        models = [p for p in sorted(Path(args.models).glob("*.tflite")) + sorted(Path(args.models).glob("*.onnx"))
                  if _supported(p)]
        sections.append(flash_markdown(models, [t for t in args.targets.split(",") if t != "qemu-m3"]))
    if args.train:
        sections.append(training_markdown(bench_training_all(Path(args.models))))
    if args.digits:
        sections.append(digits_markdown())
    if args.zoo:
        sections.append(zoo_transfer.bench_section(log=lambda s: sys.stderr.write(s + "\n")))
    if args.planner:

        sections.append(section(Path(args.models)))
    if args.serial:
        sections.append(serial_bench(Path(args.models), args.serial_samples))
    if not sections:
        ap.error("give --all, --kernels-table, --flash, --train, --digits, --zoo, --planner and/or --serial")
    Path(args.output).write_text("\n".join(sections))
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
