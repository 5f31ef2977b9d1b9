"""The corpus: public third-party quantized models, as users bring them, and what pockmcu does with each.

    python -m pockmcu.corpus fetch [--from DIR]     # download every model of the manifest into the cache
    python -m pockmcu.corpus eval [--into BENCHMARKS.md] [--only NAME,...]

The manifest (tests/corpus/models.toml) names each model's repository, commit, path, a download URL
pinned to that commit, its sha256, size and license. ``fetch`` puts the files into
``$POCKMCU_CACHE_DIR/corpus`` (else ``$XDG_CACHE_HOME/pockmcu/corpus``, else
``~/.cache/pockmcu/corpus``), checks every sha256, skips files already there and says in one line
per model what went wrong (offline, a changed file); ``--from DIR`` takes files from a directory
(by name or by content) where the URL cannot be reached. ``eval`` asks of every model, each in a
child process of its own so that nothing one model does can stop the table:

- compile: ``pockmcu inspect`` finds nothing unsupported and ``gen`` writes the project;
- bit-exact: the generated C (host simulation) equals the oracle -- TFLite Micro for .tflite,
  onnxruntime for .onnx -- on every output, on seeded random inputs and on extreme ones;
- trainable: ``gen --train`` (``--loss xent`` for classifiers, ``mse`` otherwise, the biases of the
  last two layers and the last layer's weights, SGD) builds, and a few epochs of host simulation on
  synthetic data lower the loss (mean loss of the last epoch below that of the first);
- QEMU = host: wherever ``gen --train`` builds, the same training project (compiled for the RAM of
  ``QEMU_TARGET``) takes one training step in QEMU and in host simulation from the same sample and
  seed, and the trained parameters (``pockmcu_params_read``) are byte-equal.

Each failure is reported by its first reason in one line. ``make corpus`` (called by ``make bench``)
fetches and evaluates the corpus and writes the table into BENCHMARKS.md as its own section.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections import Counter
from pathlib import Path

import numpy as np

from .codegen import write_project
from .compiler import TrainOptions, compile_model, parse_size
from .errors import PockError
from .inspect import inspect
from .sim import load
from .targets import get_target
from .train import Data, HostTrainer, train_on_target

try:  # the oracle for .tflite models (a test dependency)
    from tflite_micro.python.tflite_micro import runtime as tflm_runtime
except ImportError:  # pragma: no cover - eval says so per model
    tflm_runtime = None

ROOT = Path(__file__).resolve().parents[1]
MANIFEST = ROOT / "tests" / "corpus" / "models.toml"
FIELDS = ("name", "task", "loss", "repo", "commit", "path", "url", "sha256", "size", "license")
#: budgets for evaluation: op support is measured, not whether a part has the RAM (the arena is reported)
RAM = "64MB"
N_RANDOM = 6                 # random inputs per model; plus 3 extreme ones
N_TRAIN, EPOCHS, LR = 8, 4, 0.01
TRAIN_SPEC = {"bias": {"last": 2}, "weights": [{"layer": -1, "ratio": 1.0}],
              "optimizer": {"kind": "sgd", "lr": LR, "momentum": 0.0}}
QEMU_TARGET = "qemu-m4"      # one training step here vs host simulation
TIMEOUT = 300                # seconds per model (child process)
BEGIN, END = "<!-- corpus: written by make corpus -->", "<!-- /corpus -->"


# -- manifest and cache ---------------------------------------------------------------------------


def parse_manifest(text: str, where: str = "manifest") -> list[dict]:
    """The manifest's TOML subset (Python 3.10 has no tomllib): comments, ``[[model]]`` headers and
    ``key = "string"`` or ``key = integer`` lines; anything else is an error."""
    rows: list[dict] = []
    for n, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line == "[[model]]":
            rows.append({})
            continue
        key, eq, value = (part.strip() for part in line.partition("="))
        if not eq or not rows or not key.isidentifier():
            raise PockError(f"{where}, line {n}: expected [[model]] or key = value, got {line[:60]!r}")
        if len(value) >= 2 and value[0] == value[-1] == '"' and '"' not in value[1:-1] and "\\" not in value:
            rows[-1][key] = value[1:-1]
        elif value.isdigit():
            rows[-1][key] = int(value)
        else:
            raise PockError(f"{where}, line {n}: {key}: give a \"string\" or a whole number, got {value[:60]!r}")
    return rows


def read_manifest(path: Path = MANIFEST) -> list[dict]:
    try:
        rows = parse_manifest(Path(path).read_text(), str(path))
    except FileNotFoundError:
        raise PockError(f"{path}: no such manifest") from None
    if not rows:
        raise PockError(f"{path}: no [[model]] tables")
    for r in rows:
        missing = [f for f in FIELDS if f not in r]
        if missing:
            raise PockError(f"{path}: model {r.get('name', '?')} lacks {', '.join(missing)}")
    return rows


def cache_dir() -> Path:
    """Where fetched models live: $POCKMCU_CACHE_DIR/corpus, $XDG_CACHE_HOME/pockmcu/corpus or
    ~/.cache/pockmcu/corpus (POCKMCU_CACHE_DIR=off turns off the kernel cache only)."""
    env = os.environ.get("POCKMCU_CACHE_DIR")
    if env and env.lower() not in ("off", "0", "no"):
        return Path(env) / "corpus"
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) / "pockmcu" if xdg else Path.home() / ".cache" / "pockmcu") / "corpus"


def file_name(row: dict) -> str:
    return row["name"] + Path(row["path"]).suffix


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def cached(row: dict, cache: Path) -> Path | None:
    """The model's file in the cache when its sha256 is the manifest's."""
    p = cache / file_name(row)
    return p if p.is_file() and sha256(p.read_bytes()) == row["sha256"] else None


def _download(url: str, timeout: float) -> bytes:
    with urllib.request.urlopen(url, timeout=timeout) as resp:  # noqa: S310 - https URLs from the manifest
        return resp.read()


def _from_dir(row: dict, src: Path) -> bytes | None:
    """A file in src (searched recursively) named like the model or like its upstream file, whose
    sha256 is the manifest's."""
    names = {file_name(row), Path(row["path"]).name}
    for p in sorted(src.rglob("*")):
        if p.name in names and p.is_file() and p.stat().st_size == row["size"]:
            data = p.read_bytes()
            if sha256(data) == row["sha256"]:
                return data
    return None


def fetch(rows: list[dict], cache: Path, src: Path | None = None, timeout: float = 30, log=print) -> int:
    """Bring every model into the cache; returns how many are missing afterwards."""
    cache.mkdir(parents=True, exist_ok=True)
    missing = 0
    for row in rows:
        if cached(row, cache):
            continue
        data, why = None, ""
        try:
            data = _download(row["url"], timeout)
            if sha256(data) != row["sha256"]:
                why = f"the download's sha256 is {sha256(data)[:12]}..., the manifest says {row['sha256'][:12]}..."
                data = None
        except (urllib.error.URLError, OSError, ValueError) as exc:
            reason = getattr(exc, "reason", None) or exc
            why = f"cannot download {row['url']} ({reason}); offline? give --from DIR with the files"
        if data is None and src is not None:
            data = _from_dir(row, src)
            if data is None:
                why += f"; not in {src} either"
        if data is None:
            log(f"{row['name']}: {why}")
            missing += 1
            continue
        fd, tmp = tempfile.mkstemp(prefix=f".{file_name(row)}.", dir=cache)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, cache / file_name(row))
        log(f"{row['name']}: {len(data)} bytes")
    return missing


# -- evaluating one model -------------------------------------------------------------------------


def model_inputs(specs: list[dict], n: int, seed: int) -> list[np.ndarray]:
    """n seeded random samples per input, then 3 extreme ones: all lowest, all highest, alternating
    (int inputs: the dtype's range; float inputs: +-1000, far outside any input range)."""
    xs = []
    for k, s in enumerate(specs):
        rng = np.random.default_rng(seed + k)
        shape, dtype = tuple(s["shape"][1:]), np.dtype(s["dtype"])
        if dtype == np.float32:
            lo, hi = -1000.0, 1000.0
            rand = (rng.standard_normal((n,) + shape) * 2).astype(np.float32)
        else:
            lo, hi = np.iinfo(dtype).min, np.iinfo(dtype).max
            rand = rng.integers(lo, hi + 1, (n,) + shape).astype(dtype)
        alt = np.where(np.indices(shape).sum(axis=0) % 2 == 0, lo, hi) if shape else np.array(lo)
        extreme = np.stack([np.full(shape, lo), np.full(shape, hi), alt]).astype(dtype)
        xs.append(np.concatenate([rand, extreme]))
    return xs


def tflm_outputs(model: Path, xs: list[np.ndarray], n_out: int) -> list[np.ndarray]:
    """The TFLite Micro interpreter's n_out outputs, sample by sample."""
    if tflm_runtime is None:
        raise PockError("the TFLite Micro interpreter is not installed (pip install tflite-micro)")
    it = tflm_runtime.Interpreter.from_file(str(model), arena_size=16 << 20)
    outs = []
    for i in range(len(xs[0])):
        for k, x in enumerate(xs):
            it.set_input(x[i].reshape(it.get_input_details(k)["shape"]), k)
        it.invoke()
        outs.append([np.array(it.get_output(k)) for k in range(n_out)])
        it.reset()
    return [np.stack([o[k] for o in outs]) for k in range(n_out)]


def ort_outputs(model: Path, xs: list[np.ndarray]) -> list[np.ndarray]:
    import onnxruntime as ort  # noqa: PLC0415  (optional: ONNX models only)

    so = ort.SessionOptions()
    so.log_severity_level = 3
    sess = ort.InferenceSession(str(model), so, providers=["CPUExecutionProvider"])
    names = [i.name for i in sess.get_inputs()]
    runs = [sess.run(None, {k: x[i:i + 1] for k, x in zip(names, xs)}) for i in range(len(xs[0]))]
    return [np.concatenate([r[k] for r in runs]) for k in range(len(runs[0]))]


def compare(got: list[np.ndarray], want: list[np.ndarray], outputs: list[dict]) -> str:
    """'' when every output is equal, else one line saying how far apart they are."""
    if len(got) != len(want):
        return f"{len(got)} outputs, the oracle gives {len(want)}"
    for k, (a, b, spec) in enumerate(zip(got, want, outputs)):
        b = b.reshape(a.shape) if b.size == a.size else b
        if a.shape != b.shape:
            return f"output {k} has shape {list(a.shape)}, the oracle's {list(b.shape)}"
        if np.array_equal(a, b):
            continue
        diff = int((a != b).sum())
        if a.dtype.kind == "f":
            scale = spec.get("scale") or 1.0
            lsb = float(np.nanmax(np.abs(a.astype(np.float64) - b.astype(np.float64)))) / scale
            return f"output {k}: {diff} of {a.size} values differ (up to {lsb:.3g} LSB)"
        lsb = int(np.abs(a.astype(np.int64) - b.astype(np.int64)).max())
        return f"output {k}: {diff} of {a.size} values differ (up to {lsb} LSB)"
    return ""


def _first_line(exc: Exception) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return text if isinstance(exc, PockError) else f"internal error: {type(exc).__name__}: {text}"


def _short(text: str, source: Path) -> str:
    """A message without the model path it starts with."""
    for prefix in (f"{source}: ", f"{source.name}: "):
        if text.startswith(prefix):
            return text[len(prefix):]
    return text


def evaluate(row: dict, model: Path, work: Path, qemu_target: str | None = QEMU_TARGET) -> dict:
    """compile / bit-exact / trainable / QEMU = host of one model (see the module doc); never raises.
    qemu_target None leaves out the QEMU step."""
    res = dict(name=row["name"], task=row["task"], format=model.suffix.lstrip("."), ops=0, compile=False,
               exact=None, trainable=None, reason="", keys=[], train_reason="")
    t0 = time.perf_counter()
    try:
        ins = inspect(model)
    except Exception as exc:  # noqa: BLE001 - a model the frontend cannot read at all
        res.update(reason=_short(_first_line(exc), model), keys=["unreadable"])
        return res
    res["ops"] = sum(ins.kinds.values())
    res["kinds"] = dict(ins.kinds)
    if not ins.compiles:
        res.update(reason=ins.problems[0], keys=ins.keys, n_problems=len(ins.problems))
        return res
    try:
        c = compile_model(model, ram=parse_size(RAM), stream="off")
        out = write_project(c, work / "inference")
        res.update(compile=True, arena=c.plan.arena_bytes, weights=c.weights_bytes)
    except Exception as exc:  # noqa: BLE001 - reported, never stops the corpus
        msg = _short(_first_line(exc), model)
        res.update(reason=msg, keys=[f"gen: {msg[:70]}"])
        return res
    try:
        m = load(out)
        xs = model_inputs(m.inputs, N_RANDOM, seed=7)
        got = m.invoke(*xs)
        got = got if isinstance(got, list) else [got]
        want = ort_outputs(model, xs) if res["format"] == "onnx" else tflm_outputs(model, xs, len(m.outputs))
        bad = compare(got, want, m.outputs)
        res["exact"] = not bad
        if bad:
            res["reason"] = f"not bit-exact with {'onnxruntime' if res['format'] == 'onnx' else 'TFLite Micro'}: {bad}"
    except Exception as exc:  # noqa: BLE001
        res.update(exact=False, reason=f"bit-exactness check failed: {_short(_first_line(exc), model)}")
    res["trainable"], res["train_reason"], res["losses"], sample = _train(row, model, work, m.inputs, m.outputs)
    if sample is not None and qemu_target is not None:
        res["qemu_equal"], res["qemu_reason"] = qemu_step_equal(row, model, work, sample, qemu_target)
    if not res["trainable"] and not res["reason"]:
        res["reason"] = res["train_reason"]
    res["seconds"] = round(time.perf_counter() - t0, 1)
    return res


def _train(row: dict, model: Path, work: Path, inputs: list[dict], outputs: list[dict]):
    """(trained, why not, [first epoch loss, last epoch loss], the first training sample as Data or None
    when gen --train does not build)."""
    try:
        c = compile_model(model, ram=parse_size(RAM), stream="off",
                          train=TrainOptions(spec=json.dumps(TRAIN_SPEC), loss=row["loss"]))
        out = write_project(c, work / "train")
        trainer = HostTrainer(out)
        x = model_inputs(inputs, N_TRAIN, seed=3)[0][:N_TRAIN]
        rng = np.random.default_rng(5)
        spec = outputs[0]
        if row["loss"] == "xent":
            y = rng.integers(0, spec["shape"][-1], N_TRAIN).astype(np.int32)
        else:   # move every output by a quarter of its spread: the biases can learn that
            cur = np.asarray(load(out).invoke(x), np.float64)
            if spec["dtype"] != "float32":
                cur = spec["scale"] * (cur - spec["zero_point"])
            y = (cur + 0.25 * (cur.std() + 1e-3)).astype(np.float32)
        hist = trainer.train(Data(x, y), EPOCHS, 0, log=lambda *_: None)
        first, last = float(hist[0]["loss"]), float(hist[-1]["loss"])
        sample = Data(x[:1], y[:1])
        if not (np.isfinite(last) and last < first):
            return False, f"trains, but the loss does not go down ({first:.4g} -> {last:.4g})", [first, last], sample
        return True, "", [first, last], sample
    except Exception as exc:  # noqa: BLE001
        return False, f"--train: {_short(_first_line(exc), model)}", None, None


def qemu_step_equal(row: dict, model: Path, work: Path, sample: Data, target: str = QEMU_TARGET,
                    seed: int = 1) -> tuple[bool | None, str]:
    """(parameters byte-equal, why not): one training step of the same project in QEMU and in host
    simulation. None, with the reason, when the project does not fit the QEMU machine or the step
    changes no parameter byte (equal bytes would then prove nothing)."""
    t = get_target(target)
    try:
        c = compile_model(model, ram=t.ram_bytes, flash=t.flash_bytes, stream="off", target=t.name,
                          train=TrainOptions(spec=json.dumps(TRAIN_SPEC), loss=row["loss"]))
    except PockError as exc:
        return None, f"{target}: {_short(_first_line(exc), model)}"
    try:
        out = write_project(c, work / "train_qemu")
        host = HostTrainer(out)
        initial = host.params()
        host.train(sample, 1, seed, log=lambda *_: None)
        _, raw, _ = train_on_target(out, t.name, sample, 1, seed, log=lambda *_: None)
    except Exception as exc:  # noqa: BLE001 - reported, never stops the corpus
        return False, f"{target} training step failed: {_short(_first_line(exc), model)}"
    if raw != host.params():
        a, b = np.frombuffer(raw, np.uint8), np.frombuffer(host.params(), np.uint8)
        diff = int((a != b).sum()) if len(a) == len(b) else abs(len(a) - len(b))
        return False, f"{target} parameters differ from host simulation after one step ({diff} of {len(b)} bytes)"
    if raw == initial:
        return None, f"one training step changed no parameter byte: nothing to compare on {target}"
    return True, ""


# -- the whole corpus -----------------------------------------------------------------------------


def evaluate_all(rows: list[dict], cache: Path, manifest: Path = MANIFEST, log=sys.stderr) -> list[dict]:
    """Every model in a child process of its own (a crash or a hang is that model's row)."""
    results = []
    for row in rows:
        path = cached(row, cache)
        if path is None:
            results.append(dict(name=row["name"], task=row["task"], format=Path(row["path"]).suffix.lstrip("."),
                                ops=0, compile=False, exact=None, trainable=None, keys=["not fetched"],
                                reason="not in the cache: run python -m pockmcu.corpus fetch"))
            continue
        log.write(f"corpus {row['name']} ...\n")
        log.flush()
        t0 = time.perf_counter()
        try:
            p = subprocess.run([sys.executable, "-m", "pockmcu.corpus", "--manifest", str(manifest), "--cache", str(cache),
                                "one", row["name"]],
                               capture_output=True, text=True, timeout=TIMEOUT, cwd=ROOT,
                               env=dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")))
            lines = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
            if p.returncode == 0 and lines:
                results.append(json.loads(lines[-1]))
            else:
                tail = (p.stderr.strip().splitlines() or ["no output"])[-1][:100]
                results.append(dict(name=row["name"], task=row["task"], format=path.suffix.lstrip("."), ops=0,
                                    compile=False, exact=None, trainable=None, keys=["crash"],
                                    reason=f"evaluation crashed (exit {p.returncode}): {tail}"))
        except subprocess.TimeoutExpired:
            results.append(dict(name=row["name"], task=row["task"], format=path.suffix.lstrip("."), ops=0,
                                compile=False, exact=None, trainable=None, keys=["timeout"],
                                reason=f"evaluation took more than {TIMEOUT} s"))
        results[-1]["seconds"] = round(time.perf_counter() - t0, 1)
    return results


def _mark(v) -> str:
    return "-" if v is None else ("yes" if v else "**no**")


def markdown(results: list[dict], rows: list[dict]) -> str:
    n = len(results)
    comp = sum(bool(r["compile"]) for r in results)
    exact = sum(bool(r["exact"]) for r in results)
    train = sum(bool(r["trainable"]) for r in results)
    stepped = [r for r in results if r.get("qemu_equal") is not None]
    qemu = sum(bool(r["qemu_equal"]) for r in stepped)
    by_name = {r["name"]: r for r in rows}
    out = ["# Corpus: public third-party models", "",
           f"Written by `make corpus` (called by `make bench`; `python -m pockmcu.corpus`). {n} quantized models "
           "as vendors' model zoos and public example repositories ship them, listed with repository, commit, "
           "URL, sha256 and license in `tests/corpus/models.toml`, fetched into a cache that is not committed. "
           "compile: `pockmcu inspect` finds nothing unsupported and `gen` writes the project. bit-exact: host "
           f"simulation of the generated C equals the oracle (TFLite Micro for .tflite, onnxruntime for .onnx) on "
           f"every output for {N_RANDOM} seeded random and 3 extreme inputs. trainable: `gen --train` "
           f"(xent for classifiers, mse otherwise; biases of the last 2 layers and the last layer's weights, SGD "
           f"lr {LR}) builds and {EPOCHS} epochs of host simulation on {N_TRAIN} synthetic samples lower the mean "
           f"loss. QEMU = host: wherever `gen --train` builds, the training project compiled for {QEMU_TARGET}'s "
           f"RAM takes one training step in QEMU ({QEMU_TARGET}) and in host simulation from the same sample and "
           "seed, and the trained parameters are byte-equal (-: not run, the reason says why). reason: the first "
           "problem (`pockmcu inspect MODEL` lists all of them).", "",
           f"**{comp} of {n} compile, {exact} of {comp} bit-exact, {train} of {comp} trainable; QEMU parameters "
           f"byte-equal to host simulation after a training step for {qemu} of {len(stepped)} models stepped.**", "",
           "| model | task | ops | compile | bit-exact | trainable | QEMU = host | reason |",
           "|---|---|---:|---|---|---|---|---|"]
    for r in results:
        task = by_name.get(r["name"], {}).get("task", r.get("task", ""))
        reason = r.get("reason", "")
        if r.get("trainable") and r.get("losses"):
            reason = (reason + "; " if reason else "") + "loss {:.3g} -> {:.3g}".format(*r["losses"])
        if r.get("qemu_reason"):
            reason = (reason + "; " if reason else "") + r["qemu_reason"]
        reason = reason.replace("|", "\\|")
        out.append(f"| {r['name']} ({r['format']}) | {task} | {r['ops']} | {_mark(r['compile'])} | "
                   f"{_mark(r['exact'])} | {_mark(r['trainable'])} | {_mark(r.get('qemu_equal'))} | {reason[:200]} |")
    blockers = Counter(k for r in results if not r["compile"] for k in r.get("keys", []))
    out += ["", "What keeps models from compiling (models each problem blocks; a model counts once per problem):", ""]
    out += [f"- {k}: {v}" for k, v in blockers.most_common()]
    untrained = Counter(r["train_reason"].split(" (")[0][:100] for r in results if r["compile"] and not r["trainable"])
    if untrained:
        out += ["", "What keeps compiled models from training:", ""]
        out += [f"- {k}: {v}" for k, v in untrained.most_common()]
    return "\n".join(out) + "\n"


def write_section(md: str, target: Path) -> None:
    """Put the corpus section into target (replacing an earlier one; appended when there is none)."""
    text = target.read_text() if target.is_file() else ""
    block = f"{BEGIN}\n{md}{END}\n"
    if BEGIN in text and END in text:
        head, rest = text.split(BEGIN, 1)
        text = head + block + rest.split(END, 1)[1].lstrip("\n")
    else:
        text = text + ("\n" if text and not text.endswith("\n\n") else "") + block
    target.write_text(text)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m pockmcu.corpus", description=__doc__.split("\n\n")[0])
    ap.add_argument("--manifest", default=str(MANIFEST))
    ap.add_argument("--cache", help=f"model cache (default {cache_dir()})")
    sub = ap.add_subparsers(dest="command", required=True)
    f = sub.add_parser("fetch", help="download every model into the cache, checking sha256")
    f.add_argument("--from", dest="src", metavar="DIR", help="take files from DIR where the URL cannot be reached")
    f.add_argument("--timeout", type=float, default=30, help="seconds per download (default 30)")
    e = sub.add_parser("eval", help="compile / bit-exact / trainable per model, as a markdown table")
    e.add_argument("--only", help="comma-separated model names")
    e.add_argument("--into", metavar="FILE.md", help="write the table into FILE as its own section")
    e.add_argument("--json", metavar="FILE.json", help="also write the raw results here")
    o = sub.add_parser("one", help="evaluate one model, print JSON (what eval runs per model)")
    o.add_argument("name")
    args = ap.parse_args(argv)
    try:
        rows = read_manifest(Path(args.manifest))
        cache = Path(args.cache) if args.cache else cache_dir()
        if args.command == "fetch":
            missing = fetch(rows, cache, Path(args.src) if args.src else None, args.timeout)
            print(f"{len(rows) - missing} of {len(rows)} models in {cache}")
            return 2 if missing else 0
        if args.command == "one":
            row = next((r for r in rows if r["name"] == args.name), None)
            if row is None or cached(row, cache) is None:
                raise PockError(f"{args.name}: not in the manifest or not in the cache {cache}")
            with tempfile.TemporaryDirectory(prefix="pockmcu-corpus-") as tmp:
                print(json.dumps(evaluate(row, cached(row, cache), Path(tmp))))
            return 0
        if args.only:
            names = set(args.only.split(","))
            unknown = names - {r["name"] for r in rows}
            if unknown:
                raise PockError(f"--only: no model named {', '.join(sorted(unknown))} in {args.manifest}")
            rows = [r for r in rows if r["name"] in names]
        t0 = time.perf_counter()
        results = evaluate_all(rows, cache, Path(args.manifest))
        md = markdown(results, rows)
        if args.json:
            Path(args.json).write_text(json.dumps(results, indent=1) + "\n")
        if args.into:
            write_section(md, Path(args.into))
            print(f"wrote the corpus section of {args.into} ({time.perf_counter() - t0:.0f} s)")
        else:
            print(md)
        return 0
    except PockError as exc:
        sys.stderr.write(f"python -m pockmcu.corpus: error: {exc}\n")
        return 2


if __name__ == "__main__":
    sys.exit(main())
