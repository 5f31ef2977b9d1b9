#!/usr/bin/env python3
"""Mutated model files through pockmcu: every one must be refused with one line (exit 2) or compile.

    python tests/fuzz_models.py [--count N] [--seconds S] [--seed K] [--stages inspect,gen,sim,san]
                                [--jobs J] [--timeout T] [--keep DIR] [--json FILE]

Seeds are the shared third-party models (../shared/models) and the repo's fixtures. Each mutant is
one seeded edit of one seed file:

- bytes: bit flips, overwritten / deleted / inserted / swapped bytes, truncation;
- TFLite fields, edited in place in the flatbuffer: tensor shapes, types, buffer indices,
  quantization scales (0, NaN, inf, negative, 1e-45, ...), zero points (1000, -129, 2^40, ...) and
  quantized dimensions, operator input/output indices (-1, n, 2^31-1, ...), opcode indices,
  builtin option fields (strides 0 / -1 / 1000, ...), subgraph inputs/outputs, buffer lengths,
  operators removed or swapped;
- ONNX fields: initializer dims and data, scales and zero points, node attributes (strides,
  kernel_shape, axis, ...) changed or removed, nodes removed or swapped, inputs renamed.

Mutant k of a run is a function of (--seed, k) alone. The harness imports pockmcu once and forks one
child per mutant (a memory limit; the parent times every stage), which makes the mutant and runs its
stages in order, --jobs children at a time. A mutant's outcome per stage: ok, refused (a PockError:
one line, exit 2), traceback (any other exception: a bug), hang (time limit), crash (the child
died), halfwritten (gen left a partial OUT or a temporary directory), buildfail (the generated C
does not compile) or sanitizer (an ASan/UBSan report, a bounds assertion, or sim failing on a model
gen accepted). With ``sim``, every mutant gen accepts is built for the host (cffi, the kernels
linked from the build cache's archive) and run on one random sample; with ``san``, ``make
host-check`` builds it with ASan, UBSan and the bounds assertions of POCKMCU_CHECKED (the sanitized
kernels from the cache) and runs it on one sample, every file it writes capped at 64 MB; with
``train``, ``gen --train`` (mse, every bias and the last layer's weights, a huge lr with momentum so
biases reach their bound) and ``make host-check`` of that project: inference and a training step on
each of 3 samples, checked the same way. The
summary counts them (and the seconds each stage took); ``--json FILE`` writes them, every 30 s
while running too; ``--keep DIR`` saves the mutants that failed (at most --max-keep), with a
one-line reason each, to reproduce one:
``pockmcu gen DIR/<name> -o /tmp/x``. Exit status 1 if any did.
"""

from __future__ import annotations

import argparse
import importlib
import io
import json
import math
import os
import random
import resource
import select
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "models"
FIXTURES = ROOT / "tests" / "fixtures"

# values that break assumptions
INTS = [0, -1, 1, 2, 3, 7, 255, 1000, -1000, 65535, 1 << 20, (1 << 31) - 1, -(1 << 31)]
FLOATS = [0.0, -0.0, float("nan"), float("inf"), float("-inf"), -1.0, 1e-45, 1e-30, 1e30, 3.4e38, 1.0, 0.5]
ZPS = [1000, -129, 128, 255, -1000, 1 << 40, -(1 << 40), 127, -128]

STAGES = ("inspect", "gen", "sim", "san", "train")
#: the train stage's update: every bias and the last layer's weights, a huge lr with momentum, so that
#: biases reach their bound and weights saturate within the few steps the checked runner makes
TRAIN_UPDATE = json.dumps({"bias": "all", "weights": [{"layer": -1, "ratio": 1}],
                           "optimizer": {"kind": "momentum", "lr": 1e6, "momentum": 0.9}})
#: per stage: ok, same (sim, san: generated C byte-identical to an earlier mutant's that passed the
#: stage in this run, so not built again), refused (one line, exit 2), or a failure: traceback, hang, crash (the worker died),
#: halfwritten (gen left a partial OUT or a temporary directory), buildfail (the generated C did not
#: compile), sanitizer (ASan/UBSan or a host-check bounds assertion fired, or the runner misbehaved)
OUTCOMES = ("ok", "same", "refused", "traceback", "hang", "crash", "halfwritten", "buildfail", "sanitizer")
BAD = frozenset(OUTCOMES) - {"ok", "same", "refused"}


def seeds() -> list[Path]:
    out = sorted(SHARED.glob("*.tflite")) + sorted(SHARED.glob("*.onnx"))
    out += sorted((FIXTURES / "models").glob("*.tflite")) + sorted((FIXTURES / "onnx").glob("*.onnx"))
    return [p for p in out if p.stat().st_size < 2_000_000]


# -- byte mutations ---------------------------------------------------------------------------------

def mutate_bytes(data: bytes, rng: random.Random) -> tuple[bytes, str]:
    b = bytearray(data)
    n = len(b)
    how = rng.choice(["flip", "flip", "overwrite", "delete", "insert", "swap", "truncate"])
    if how == "flip":
        for _ in range(rng.choice([1, 1, 2, 8])):
            i = rng.randrange(n)
            b[i] ^= 1 << rng.randrange(8)
    elif how == "overwrite":
        i = rng.randrange(n)
        k = rng.choice([1, 2, 4, 8, 64])
        b[i:i + k] = bytes(rng.randrange(256) for _ in range(min(k, n - i)))
    elif how == "delete":
        i = rng.randrange(n)
        del b[i:i + rng.choice([1, 4, 64])]
    elif how == "insert":
        i = rng.randrange(n)
        b[i:i] = bytes(rng.randrange(256) for _ in range(rng.choice([1, 4, 64])))
    elif how == "swap":
        k = rng.choice([4, 16, 64])
        i, j = rng.randrange(max(n - k, 1)), rng.randrange(max(n - k, 1))
        b[i:i + k], b[j:j + k] = b[j:j + k], b[i:i + k]
    else:
        b = b[:rng.randrange(n)]
    return bytes(b), f"bytes:{how}"


# -- TFLite field mutations -------------------------------------------------------------------------

@dataclass
class Site:
    offset: int          # absolute byte offset in the file
    fmt: str             # struct format of the field
    what: str            # description (for the report)
    kind: str            # int / float / zp / index / enum


def _vec(tab, field: int):
    """(absolute start, length) of a vector field of a flatbuffer table, or None."""
    o = tab.Offset(field)
    if not o:
        return None
    return tab.Vector(o), tab.VectorLen(o)


def _scalar(tab, field: int):
    o = tab.Offset(field)
    return o + tab.Pos if o else None


def tflite_sites(data: bytes) -> tuple[list[Site], list[tuple[int, int]], list[int]]:
    """Every editable field: (sites, [(vector length offset, length)] of buffers/op lists, op list)."""
    import tflite

    m = tflite.Model.GetRootAs(data, 0)
    sites: list[Site] = []
    lengths: list[tuple[int, int]] = []
    for s in range(m.SubgraphsLength()):
        sg = m.Subgraphs(s)
        for field, what in ((6, "subgraph inputs"), (8, "subgraph outputs")):
            v = _vec(sg._tab, field)
            if v:
                sites += [Site(v[0] + 4 * j, "<i", what, "index") for j in range(v[1])]
        for i in range(sg.TensorsLength()):
            t = sg.Tensors(i)
            v = _vec(t._tab, 4)
            if v:
                sites += [Site(v[0] + 4 * j, "<i", f"tensor {i} shape", "int") for j in range(v[1])]
                lengths.append((v[0] - 4, v[1]))
            for field, fmt, what, kind in ((6, "<b", "type", "enum"), (8, "<I", "buffer", "index")):
                p = _scalar(t._tab, field)
                if p is not None:
                    sites.append(Site(p, fmt, f"tensor {i} {what}", kind))
            q = t.Quantization()
            if q is not None:
                for field, fmt, what, kind in ((8, "<f", "scale", "float"), (10, "<q", "zero point", "zp")):
                    v = _vec(q._tab, field)
                    if v:
                        size = struct.calcsize(fmt)
                        sites += [Site(v[0] + size * j, fmt, f"tensor {i} {what}", kind) for j in range(v[1])]
                        lengths.append((v[0] - 4, v[1]))
                p = _scalar(q._tab, 16)
                if p is not None:
                    sites.append(Site(p, "<i", f"tensor {i} quantized dimension", "int"))
        for i in range(sg.OperatorsLength()):
            o = sg.Operators(i)
            p = _scalar(o._tab, 4)
            if p is not None:
                sites.append(Site(p, "<I", f"op {i} opcode index", "index"))
            for field, what in ((6, "inputs"), (8, "outputs")):
                v = _vec(o._tab, field)
                if v:
                    sites += [Site(v[0] + 4 * j, "<i", f"op {i} {what}", "index") for j in range(v[1])]
                    lengths.append((v[0] - 4, v[1]))
            opt = o.BuiltinOptions()
            if opt is not None:
                # every field present in the options table's vtable: write its low byte or 4 bytes
                vt = opt.Pos - struct.unpack_from("<i", data, opt.Pos)[0]
                vt_len = struct.unpack_from("<H", data, vt)[0]
                for k in range((vt_len - 4) // 2):
                    fo = struct.unpack_from("<H", data, vt + 4 + 2 * k)[0]
                    if fo:
                        sites.append(Site(opt.Pos + fo, "<b", f"op {i} option {k}", "int"))
                        sites.append(Site(opt.Pos + fo, "<i", f"op {i} option {k}", "int"))
        ops = _vec(sg._tab, 10)
        if ops:
            lengths.append((ops[0] - 4, ops[1]))
    for b in range(m.BuffersLength()):
        v = _vec(m.Buffers(b)._tab, 4)
        if v and v[1]:
            lengths.append((v[0] - 4, v[1]))
    op_vector = []
    if m.SubgraphsLength():
        ops = _vec(m.Subgraphs(0)._tab, 10)
        if ops:
            op_vector = [ops[0] + 4 * j for j in range(ops[1])]
    return sites, lengths, op_vector


def _value_for(site: Site, rng: random.Random, old):
    if site.kind == "float":
        v = rng.choice(FLOATS + [old * 10 ** rng.randint(-30, 30) if math.isfinite(old) else 1.0])
        return struct.pack("<f", v)[:4] and v
    if site.kind == "zp":
        return rng.choice(ZPS)
    if site.kind == "enum":
        return rng.choice([0, 1, 2, 3, 9, 17, 100, -1])
    if site.kind == "index":
        return rng.choice([-1, -2, 0, 1, old + 1, old - 1, 1 << 20, (1 << 31) - 1] if site.fmt != "<I"
                          else [0, 1, old + 1, max(old - 1, 0), 1 << 20, (1 << 32) - 1])
    return rng.choice(INTS + [old * 2, old + 1, -old])


def _fits(fmt: str, v) -> bool:
    try:
        struct.pack(fmt, v)
        return True
    except struct.error:
        return False


def mutate_tflite(data: bytes, rng: random.Random) -> tuple[bytes, str]:
    sites, lengths, op_vector = tflite_sites(data)
    b = bytearray(data)
    how = rng.choice(["field"] * 6 + ["length", "drop_op", "swap_ops"])
    if how == "length" and lengths:
        at, n = rng.choice(lengths)
        new = rng.choice([0, max(n - 1, 0), n + 1, n * 2, 1 << 30])
        struct.pack_into("<I", b, at, new)
        return bytes(b), f"tflite:vector length {n}->{new}"
    if how == "drop_op" and len(op_vector) > 1:
        k = rng.randrange(len(op_vector))
        last = op_vector[-1]
        target = last + struct.unpack_from("<I", data, last)[0]
        struct.pack_into("<I", b, op_vector[k], target - op_vector[k])      # op k := the last op
        struct.pack_into("<I", b, op_vector[0] - 4, len(op_vector) - 1)      # one op fewer
        return bytes(b), f"tflite:drop op {k}"
    if how == "swap_ops" and len(op_vector) > 1:
        i, j = rng.sample(range(len(op_vector)), 2)
        ti = op_vector[i] + struct.unpack_from("<I", data, op_vector[i])[0]
        tj = op_vector[j] + struct.unpack_from("<I", data, op_vector[j])[0]
        struct.pack_into("<I", b, op_vector[i], tj - op_vector[i])
        struct.pack_into("<I", b, op_vector[j], ti - op_vector[j])
        return bytes(b), f"tflite:swap ops {i} {j}"
    if not sites:
        return mutate_bytes(data, rng)
    site = rng.choice(sites)
    old = struct.unpack_from(site.fmt, data, site.offset)[0]
    for _ in range(10):
        new = _value_for(site, rng, old)
        if _fits(site.fmt, new) and new != old:
            break
    else:
        return mutate_bytes(data, rng)
    struct.pack_into(site.fmt, b, site.offset, new)
    return bytes(b), f"tflite:{site.what} {old}->{new}"


# -- ONNX field mutations ---------------------------------------------------------------------------

def mutate_onnx(data: bytes, rng: random.Random) -> tuple[bytes, str]:
    import numpy as np
    import onnx
    from onnx import numpy_helper

    m = onnx.load_from_string(data)
    g = m.graph
    how = rng.choice(["init_dims", "init_data", "scale", "zero_point", "attr", "attr_drop", "node_drop",
                      "node_swap", "rename", "opset"])
    inits = list(g.initializer)
    if how in ("scale", "zero_point"):
        names = set()
        for n in g.node:
            if n.op_type in ("QuantizeLinear", "DequantizeLinear") and len(n.input) >= 2:
                names.add(n.input[1] if how == "scale" else (n.input[2] if len(n.input) > 2 else ""))
            elif n.op_type.startswith("QLinear"):
                names.update(n.input[1::3] if how == "scale" else n.input[2::3])
        cands = [t for t in inits if t.name in names]
        if cands:
            t = rng.choice(cands)
            a = numpy_helper.to_array(t).copy()
            if how == "scale":
                a.reshape(-1)[rng.randrange(a.size)] = rng.choice(FLOATS)
                new = numpy_helper.from_array(a.astype(np.float32), t.name)
            else:
                v = rng.choice(ZPS)
                new = numpy_helper.from_array(np.full(a.shape, v, np.int64).astype(
                    np.int32 if abs(v) < (1 << 31) else np.int64), t.name)
            t.CopyFrom(new)
            return m.SerializeToString(), f"onnx:{how} {t.name}"
    if how == "init_dims" and inits:
        t = rng.choice(inits)
        if t.dims:
            k = rng.randrange(len(t.dims))
            t.dims[k] = rng.choice([0, 1, t.dims[k] + 1, (1 << 31) - 1, -1 if False else 2])
            return m.SerializeToString(), f"onnx:dims of {t.name}"
    if how == "init_data" and inits:
        t = rng.choice(inits)
        if t.raw_data:
            t.raw_data = t.raw_data[:rng.randrange(len(t.raw_data))]
            return m.SerializeToString(), f"onnx:truncated data of {t.name}"
    if how in ("attr", "attr_drop"):
        nodes = [n for n in g.node if n.attribute]
        if nodes:
            n = rng.choice(nodes)
            k = rng.randrange(len(n.attribute))
            a = n.attribute[k]
            if how == "attr_drop":
                del n.attribute[k]
                return m.SerializeToString(), f"onnx:drop attribute {a.name} of {n.op_type}"
            if a.ints:
                a.ints[rng.randrange(len(a.ints))] = rng.choice([0, -1, 1000, (1 << 31) - 1])
            elif a.type == onnx.AttributeProto.INT:
                a.i = rng.choice([0, -1, 5, 1000, -1000])
            elif a.type == onnx.AttributeProto.FLOAT:
                a.f = rng.choice(FLOATS)
            return m.SerializeToString(), f"onnx:attribute {a.name} of {n.op_type}"
    if how == "node_drop" and len(g.node) > 1:
        k = rng.randrange(len(g.node))
        op = g.node[k].op_type
        del g.node[k]
        return m.SerializeToString(), f"onnx:drop node {k} ({op})"
    if how == "node_swap" and len(g.node) > 1:
        i, j = rng.sample(range(len(g.node)), 2)
        a, b = onnx.NodeProto(), onnx.NodeProto()
        a.CopyFrom(g.node[i])
        b.CopyFrom(g.node[j])
        g.node[i].CopyFrom(b)
        g.node[j].CopyFrom(a)
        return m.SerializeToString(), f"onnx:swap nodes {i} {j}"
    if how == "rename" and g.node:
        n = rng.choice(list(g.node))
        if n.input:
            n.input[rng.randrange(len(n.input))] = rng.choice(["", "no_such_tensor"])
            return m.SerializeToString(), f"onnx:rename an input of {n.op_type}"
    if how == "opset" and m.opset_import:
        m.opset_import[0].version = rng.choice([1, 7, 99])
        return m.SerializeToString(), "onnx:opset"
    return mutate_bytes(data, rng)


def mutate(path: Path, rng: random.Random) -> tuple[bytes, str]:
    data = path.read_bytes()
    try:
        if rng.random() < 0.3:
            return mutate_bytes(data, rng)
        return (mutate_onnx if path.suffix == ".onnx" else mutate_tflite)(data, rng)
    except Exception:  # a seed the structured mutators cannot walk: fall back to bytes
        return mutate_bytes(data, rng)


# -- running ------------------------------------------------------------------------------------------

def _limit_memory(gb: int = 6) -> None:
    """A soft limit only: the san stage's children (make, gcc, the ASan runner, which reserves
    terabytes of shadow address space) lift it again (``_child_limits``)."""
    hard = resource.getrlimit(resource.RLIMIT_AS)[1]
    soft = gb << 30 if hard == resource.RLIM_INFINITY else min(gb << 30, hard)
    resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


#: bytes any file the san stage's build or runner writes may reach (a runner that loops writing
#: output hits it instead of filling the disk)
MAX_FILE_BYTES = 64 << 20


def _child_limits() -> None:
    os.setsid()
    resource.setrlimit(resource.RLIMIT_AS, (resource.getrlimit(resource.RLIMIT_AS)[1],) * 2)
    resource.setrlimit(resource.RLIMIT_FSIZE, (MAX_FILE_BYTES, MAX_FILE_BYTES))


def _sample(out: Path, n: int = 1) -> list:
    """n random samples of the model's inputs, [n, ...] each (integers over the dtype's range, normal floats)."""
    import numpy as np

    from pockmcu import sim

    xs = []
    rng = np.random.default_rng(1)
    for spec in sim.read_plan(out)["inputs"]:
        info = np.iinfo(spec["dtype"]) if spec["dtype"] != "float32" else None
        xs.append(rng.integers(info.min, info.max + 1, [n] + spec["shape"][1:]).astype(spec["dtype"])
                  if info else rng.standard_normal([n] + spec["shape"][1:]).astype(np.float32))
    return xs


def _gen_train(model: str, out: Path) -> tuple[str, str]:
    """``pockmcu gen --train`` (mse, TRAIN_UPDATE) into OUT: (ok | refused | traceback | halfwritten, detail)."""
    from pockmcu.cli import main

    err = io.StringIO()
    old = sys.stderr, sys.stdout
    sys.stderr, sys.stdout = err, io.StringIO()
    try:
        rc = main(["gen", model, "--ram", "4MB", "-o", str(out), "--train", "--loss", "mse", "--update", TRAIN_UPDATE])
    except SystemExit as exc:
        rc = exc.code if isinstance(exc.code, int) else 2
    except BaseException as exc:   # noqa: BLE001
        tb = traceback.extract_tb(exc.__traceback__)
        where = f"{Path(tb[-1].filename).name}:{tb[-1].lineno}" if tb else "?"
        return "traceback", f"gen --train: {type(exc).__name__} at {where}: {str(exc)[:160]}"
    finally:
        sys.stderr, sys.stdout = old
    text = err.getvalue().strip()
    left = [p.name for p in out.parent.iterdir() if p.name.startswith(f".{out.name}")]
    if left or (rc != 0 and out.exists()) or (rc == 0 and not (out / "plan.json").is_file()):
        return "halfwritten", f"gen --train exit {rc}, left behind: {left}"
    if rc == 0:
        return "ok", ""
    if rc == 2 and text.count("\n") == 0 and "Traceback" not in text:
        return "refused", text
    return "traceback", f"gen --train exit {rc}: {text[-200:]}"


def run_checked(out: Path, timeout: float, report=None, samples: int = 1) -> tuple[str, str]:
    """``make host-check`` (ASan + UBSan + bounds assertions on every kernel call) on ``samples`` samples
    (a --train build also makes a training step on each), the kernels from the build cache; (outcome,
    detail): ok, buildfail, sanitizer or hang."""
    import numpy as np

    from pockmcu import sim
    from pockmcu.build import kernel_archive

    xs = _sample(out, samples)
    sample = out.parent / f"sample-{out.name}.bin"
    sample.write_bytes(b"".join(x[i].tobytes() for i in range(samples) for x in xs))
    lib = kernel_archive(out, "host-san")
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    env.update(ASAN_OPTIONS="detect_leaks=1:abort_on_error=0:exitcode=86",
               UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:exitcode=87")
    cmd = ["make", "-C", str(out), "--no-print-directory", "host-check", f"CHECK_INPUT={sample}"]
    if lib:
        cmd.append(f"SAN_KERNEL_LIB={lib}")
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, preexec_fn=_child_limits)
    if report is not None:
        report(p.pid)
    try:
        log, _ = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, 9)
        p.communicate()
        return "hang", f"make host-check did not finish in {timeout:.0f} s"
    text = log.decode("utf-8", "replace")
    if p.returncode == 0:
        want = sum(int(np.prod(s["shape"][1:])) * np.dtype(s["dtype"]).itemsize
                   for s in sim.read_plan(out)["outputs"])
        got = (out / "build" / "host-check" / "output.bin").stat().st_size
        if got != want * samples:
            return "sanitizer", f"the runner wrote {got} output bytes for {samples} sample(s), expected {want * samples}"
        return "ok", ""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if not (out / "build" / "host-check" / "pockmcu_run").exists():
        errs = [ln for ln in lines if "error" in ln.lower()] or lines
        return "buildfail", " | ".join(errs[:3])[:300]
    key = [ln for ln in lines if "ERROR" in ln or "runtime error" in ln or "host-check:" in ln] or lines[-3:]
    return "sanitizer", " | ".join(key[:3])[:300]


def _passed_marker(model: str, work: str, out: Path, stage: str) -> Path:
    """The file that says C byte-identical to OUT's (model.h, model.c, weights.c; the mutant's file name,
    which model.c quotes, left out) passed ``stage`` earlier in this run: building and running the same
    C on the same sample again would find nothing new (counted as "same")."""
    import hashlib

    stem = Path(model).stem.encode()
    digest = hashlib.sha256(b"".join((out / f).read_bytes().replace(stem, b"MODEL")
                                     for f in ("model.h", "model.c", "weights.c")))
    return Path(work).parent / f".passed-{stage}-{digest.hexdigest()[:32]}"


def run_stage(stage: str, model: str, work: str, timeout: float, report=None) -> tuple[str, str]:
    """Run one stage on one mutant, in the mutant's own process; (outcome, detail). ``report(pid)`` is
    told the process group of the san stage's build, which whoever kills this process on a hang kills
    too."""
    from pockmcu.cli import main
    from pockmcu.errors import PockError

    out = Path(work) / "out"
    marker = None
    if stage in ("sim", "san"):       # C equal to a mutant's that already passed this stage passes again
        marker = _passed_marker(model, work, out, stage)
        if marker.exists():
            return "same", ""
    if stage == "train":           # gen --train, then make host-check (inference and a training step per sample)
        tout = Path(work) / "train"
        try:
            outcome, detail = _gen_train(model, tout)
            if outcome != "ok":
                return outcome, detail
            marker = _passed_marker(model, work, tout, stage)
            if marker.exists():
                return "same", ""
            outcome, detail = run_checked(tout, timeout * 0.9, report, samples=3)
        except BaseException as exc:  # noqa: BLE001
            return "traceback", f"{type(exc).__name__} in the train stage: {str(exc)[:160]}"
        if outcome == "ok":
            marker.touch()
        return outcome, detail
    if stage == "san":
        try:
            outcome, detail = run_checked(out, timeout * 0.9, report)
        except BaseException as exc:  # noqa: BLE001
            return "traceback", f"{type(exc).__name__} in the san stage: {str(exc)[:160]}"
        if outcome == "ok":
            marker.touch()
        return outcome, detail
    err = io.StringIO()
    old = sys.stderr, sys.stdout
    sys.stderr, sys.stdout = err, io.StringIO()
    try:
        if stage == "sim":            # the host build of what gen wrote, one random sample
            from pockmcu import sim

            sim.load(out).invoke(*_sample(out))
            rc = 0
        else:
            rc = main({"inspect": ["inspect", model],
                       "gen": ["gen", model, "--ram", "1MB", "-o", str(out)]}[stage])
    except PockError as exc:       # raised outside main's handler: sim of a model gen accepted
        if stage != "sim":
            return "refused", str(exc)
        if "build failed" in str(exc):
            return "buildfail", str(exc)[:300]
        return "sanitizer", f"sim refused a model gen accepted: {str(exc)[:250]}"
    except SystemExit as exc:
        rc = exc.code if isinstance(exc.code, int) else 2
    except BaseException as exc:   # noqa: BLE001 - the point is to catch everything
        tb = traceback.extract_tb(exc.__traceback__)
        where = f"{Path(tb[-1].filename).name}:{tb[-1].lineno}" if tb else "?"
        return "traceback", f"{type(exc).__name__} at {where}: {str(exc)[:160]}"
    finally:
        sys.stderr, sys.stdout = old
    text = err.getvalue().strip()
    if stage == "gen":                # OUT is whole or absent, and no temporary sibling is left
        left = [p.name for p in Path(work).iterdir() if p.name.startswith(".out")]
        if left or (rc != 0 and out.exists()) or (rc == 0 and not (out / "plan.json").is_file()):
            return "halfwritten", f"exit {rc}, left behind: {left or sorted(p.name for p in out.iterdir())[:5]}"
    if rc == 0:
        if marker is not None:
            marker.touch()
        return "ok", ""
    if rc == 2 and text.count("\n") == 0 and "Traceback" not in text:
        return "refused", text
    return "traceback", f"exit {rc}: {text[-200:]}"


# -- the scheduler: one forked process per mutant -------------------------------------------------------
# The parent imports pockmcu (and numpy, onnx, onnxruntime, jinja2, cffi) once; each mutant is made and
# run through its stages in a child forked from it, so a mutant costs no interpreter start-up or
# import, a crash or a memory blow-up ends one child only, and the parent times every stage of every
# child exactly (no batches: a free slot takes the next mutant at once). A child reports over a pipe,
# one JSON line per event; its stdout and stderr (C-level prints, fatal errors) go to a log in its
# work directory, whose end a crash report quotes.

def _preload() -> None:
    """Everything a stage imports, imported once in the parent before any fork."""
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")     # no BLAS thread pool to fork, 2 cores shared
    import numpy  # noqa: F401

    import pockmcu.cli  # noqa: F401
    import pockmcu.sim  # noqa: F401
    from pockmcu import build

    for optional in ("onnx", "onnx.numpy_helper", "onnxruntime", "tflite"):
        try:
            importlib.import_module(optional)
        except ImportError:
            pass
    build._compiler_id(os.environ.get("HOST_CC", "gcc"))   # one `gcc --version` per run, not per mutant


def mutant_of(run_seed: int, k: int, pool_seeds: list[Path]) -> tuple[Path, bytes, str]:
    """Mutant k of a run: (seed file, bytes, how), a function of (run seed, k) alone, so a run's corpus
    does not depend on --jobs or on the order the mutants finish in."""
    rng = random.Random(f"{run_seed}/{k}")
    seed = pool_seeds[rng.randrange(len(pool_seeds))]
    data, how = mutate(seed, rng)
    return seed, data, how


def _child(k: int, run_seed: int, pool_seeds: list[Path], stages: list[str], timeout: float, work: Path,
           wfd: int) -> None:
    def send(**msg) -> None:
        os.write(wfd, (json.dumps(msg) + "\n").encode())

    seed, data, how = mutant_of(run_seed, k, pool_seeds)
    model = work / f"m{k}_{seed.stem}{seed.suffix}"
    model.write_bytes(data)
    send(model=model.name, how=how)
    alive = True
    for stage in stages:
        if not alive:
            break
        send(stage=stage)
        t0 = time.perf_counter()
        outcome, detail = run_stage(stage, str(model), str(work), timeout, report=lambda pid: send(pgid=pid))
        send(stage=stage, outcome=outcome, detail=detail[:400], seconds=time.perf_counter() - t0)
        alive = stage == "inspect" or outcome in ("ok", "same")   # inspect's outcome never stops gen


def _fork(k: int, run_seed: int, pool_seeds: list[Path], stages: list[str], timeout: float, work: Path):
    work.mkdir()
    rfd, wfd = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:                                        # the child: never returns
        try:
            os.close(rfd)
            os.setpgid(0, 0)                            # its own group: a hang kills it and its builds
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            log = os.open(work / "child.log", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.dup2(log, 1)
            os.dup2(log, 2)
            _limit_memory()
            tempfile.tempdir = str(work)                # sim's library copies, onnxruntime's files: gone with work
            _child(k, run_seed, pool_seeds, stages, timeout, work, wfd)
        except BaseException:  # noqa: BLE001 - reported as a crash of the stage under way
            traceback.print_exc()
        finally:
            os._exit(0)
    os.close(wfd)
    os.set_blocking(rfd, False)
    return pid, rfd


@dataclass
class Running:
    k: int
    fd: int
    work: Path
    since: float                          # monotonic time of the last event (fork, stage start)
    buf: bytes = b""
    model: str = "?"
    how: str = "?"
    stage: str | None = None              # the stage under way (started, no result yet)
    pgids: tuple = ()
    killed: bool = False
    results: tuple = ()                   # (stage, outcome, detail, seconds)


def _drain(r: Running) -> None:
    while True:
        try:
            chunk = os.read(r.fd, 65536)
        except BlockingIOError:
            break
        if not chunk:
            break
        r.buf += chunk
    *lines, r.buf = r.buf.split(b"\n")
    for ln in lines:
        msg = json.loads(ln)
        if "model" in msg:
            r.model, r.how = msg["model"], msg["how"]
        elif "pgid" in msg:
            r.pgids += (msg["pgid"],)
        elif "outcome" in msg:
            r.results += ((msg["stage"], msg["outcome"], msg["detail"], msg["seconds"]),)
            r.stage = None
        else:
            r.stage, r.since = msg["stage"], time.monotonic()


def _kill(pid: int, r: Running) -> None:
    for g in (pid, *r.pgids):
        try:
            os.killpg(g, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


class Tally:
    """Counts, worker seconds and failures of a run; written as JSON now and then (--json), so a long
    run can be read while it goes."""

    def __init__(self, stages, keep: Path | None, max_keep: int, max_failures: int = 2000):
        self.stages, self.keep, self.max_keep, self.max_failures = stages, keep, max_keep, max_failures
        self.counts = {s: dict.fromkeys(OUTCOMES, 0) for s in stages}
        self.seconds = dict.fromkeys(stages, 0.0)
        self.failures: list[str] = []
        self.n_failures = 0
        self.kept = 0
        self.done = 0

    def add(self, r: Running, status: int) -> None:
        results = list(r.results)
        if r.stage is not None:           # a stage started and never answered
            if r.killed:
                results.append((r.stage, "hang", f"no answer in {time.monotonic() - r.since:.0f} s", 0.0))
            else:
                how = (f"signal {os.WTERMSIG(status)}" if os.WIFSIGNALED(status) else f"exit {os.waitstatus_to_exitcode(status)}")
                tail = _tail(r.work / "child.log")
                results.append((r.stage, "crash", f"the process died ({how}): {tail}", 0.0))
        elif not results:                 # died or hung before its first stage: the mutator
            results.append((self.stages[0], "hang" if r.killed else "crash",
                            f"while making the mutant: {_tail(r.work / 'child.log')}", 0.0))
        model = r.work / r.model
        for stage, outcome, detail, took in results:
            self.counts[stage][outcome] += 1
            self.seconds[stage] += took
            if outcome in BAD:
                line = f"{stage} {outcome}: {r.model} ({r.how}): {detail}".replace("\n", " | ")
                self.n_failures += 1
                if len(self.failures) < self.max_failures:
                    self.failures.append(line)
                if self.keep:
                    with open(self.keep / "reasons.txt", "a") as f:
                        f.write(line + "\n")
                    if self.kept < self.max_keep and model.is_file():
                        shutil.copyfile(model, self.keep / model.name)
                        self.kept += 1
        self.done += 1

    def as_json(self, **extra) -> dict:
        return dict(mutants=self.done, counts=self.counts, stage_seconds={k: round(v, 1) for k, v in self.seconds.items()},
                    failures=self.failures, failures_total=self.n_failures, **extra)


def _tail(log: Path) -> str:
    try:
        text = log.read_bytes()[-4000:].decode("utf-8", "replace")
    except OSError:
        return "(no log)"
    lines = [ln for ln in text.splitlines() if ln.strip()]
    return " | ".join(lines[-3:])[:300] or "(no output)"


def _write_json(path: Path | None, data: dict) -> None:
    if path is None:
        return
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(data, indent=1))
    os.replace(tmp, path)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--count", type=int, default=200, help="mutants (default 200)")
    ap.add_argument("--seconds", type=float, default=600, help="stop starting new mutants after this (default 600)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--stages", default="inspect,gen",
                    help="comma-separated, in order: inspect, gen, sim (cffi host build, one sample), san "
                         "(make host-check: ASan + UBSan + bounds assertions, one sample), train (gen --train, "
                         "then make host-check: inference and a training step on each of 3 samples)")
    ap.add_argument("--timeout", type=float, default=60, help="seconds per stage before it counts as a hang")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--keep", metavar="DIR", help="save the mutants that failed (at most --max-keep), with their reasons")
    ap.add_argument("--max-keep", type=int, default=500, help="mutant files --keep saves at most (default 500)")
    ap.add_argument("--json", metavar="FILE", help="write the counts as JSON (also every 30 s while running)")
    a = ap.parse_args()
    stages = [s for s in a.stages.split(",") if s]
    unknown = set(stages) - set(STAGES)
    if unknown:
        ap.error(f"unknown stage(s) {', '.join(sorted(unknown))}; choose from {', '.join(STAGES)}")
    if a.jobs < 1 or a.count < 0 or not a.timeout > 0:
        ap.error("--jobs must be at least 1, --count at least 0 and --timeout above 0")
    sys.path.insert(0, str(ROOT))
    _preload()
    pool_seeds = seeds()
    keep = Path(a.keep) if a.keep else None
    if keep:
        keep.mkdir(parents=True, exist_ok=True)
    json_path = Path(a.json) if a.json else None
    tally = Tally(stages, keep, a.max_keep)
    start = time.monotonic()
    tmp = Path(tempfile.mkdtemp(prefix="pockmcu-fuzz-"))
    running: dict[int, Running] = {}
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))    # killed: still end the children, remove tmp
    k, finished, last_json, last_line = 0, False, start, 0

    def info(**extra) -> dict:
        took = time.monotonic() - start
        return tally.as_json(seconds=round(took, 1), per_minute=round(tally.done / took * 60, 1) if took else 0,
                             seed=a.seed, stages=stages, jobs=a.jobs, **extra)

    try:
        while True:
            while len(running) < a.jobs and k < a.count and time.monotonic() - start <= a.seconds:
                work = tmp / f"m{k}"
                pid, fd = _fork(k, a.seed, pool_seeds, stages, a.timeout, work)
                running[pid] = Running(k, fd, work, time.monotonic())
                k += 1
            if not running:
                break
            ready, _, _ = select.select([r.fd for r in running.values()], [], [], 0.2)
            now = time.monotonic()
            for pid, r in list(running.items()):
                if r.fd in ready:
                    _drain(r)
                if not r.killed and now - r.since > a.timeout:
                    r.killed = True
                    _kill(pid, r)
                got, status = os.waitpid(pid, os.WNOHANG)
                if got == 0:
                    continue
                _drain(r)
                os.close(r.fd)
                if r.killed:
                    _kill(pid, r)         # anything of its san build still alive
                tally.add(r, status)
                shutil.rmtree(r.work, ignore_errors=True)    # disk stays bounded
                del running[pid]
            if tally.done - last_line >= 100:
                last_line = tally.done
                print(f"{tally.done} mutants, {now - start:.0f} s, {tally.n_failures} failures", file=sys.stderr, flush=True)
            if now - last_json > 30:
                last_json = now
                _write_json(json_path, info(finished=False))
        finished = True
    finally:
        for pid, r in running.items():
            _kill(pid, r)
            os.waitpid(pid, 0)
        shutil.rmtree(tmp, ignore_errors=True)
        _write_json(json_path, info(finished=finished))
    took = time.monotonic() - start
    print(f"{tally.done} mutants of {len(pool_seeds)} seeds in {took:.0f} s ({tally.done / took * 60:.0f} a minute)")
    for s in stages:
        c = tally.counts[s]
        print(f"  {s:8s} " + ", ".join(f"{n} {v}" for n, v in c.items()) + f"; {tally.seconds[s]:.0f} s")
    for line in tally.failures[:50]:
        print("  " + line)
    return 1 if tally.n_failures else 0


if __name__ == "__main__":
    sys.exit(main())
