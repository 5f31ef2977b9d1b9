"""Shared test helpers: where the models are, a per-session cache of generated projects,
and the TFLite Micro oracle."""

from __future__ import annotations

import inspect
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("POCKMCU_SHARED_MODELS", ROOT.parent / "shared" / "models"))
FIXTURES = ROOT / "tests" / "fixtures" / "models"

# Models in ../shared/models that pockmcu must refuse, and why.
UNSUPPORTED_SHARED = {"tflm_mnist_lstm.tflite": "UNIDIRECTIONAL_SEQUENCE_LSTM",
                      "tflm_dtln_noise_suppression.tflite": "UNIDIRECTIONAL_SEQUENCE_LSTM"}


def shared_models() -> list[Path]:
    models = sorted(p for p in SHARED.glob("*.tflite") if p.name not in UNSUPPORTED_SHARED)
    assert models, f"no models in {SHARED}: the test suite needs ../shared/models beside the checkout"
    return models


def fixture_models() -> list[Path]:
    return sorted(p for p in FIXTURES.glob("*.tflite") if not p.name.startswith("bad_"))


def all_models() -> list[Path]:
    return shared_models() + fixture_models()


def model_id(p: Path) -> str:
    return p.stem


def random_inputs(spec_shape, dtype, n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    shape = (n,) + tuple(spec_shape[1:])
    if np.dtype(dtype) == np.float32:
        return (rng.standard_normal(shape) * 2).astype(np.float32)
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max + 1, shape).astype(dtype)


def tflm_run(model: Path, *xs: np.ndarray) -> np.ndarray:
    """Run every sample (one array [N, ...] per model input) through the TFLite Micro Python
    interpreter, the bit-exactness oracle."""
    from tflite_micro.python.tflite_micro import runtime

    it = runtime.Interpreter.from_file(str(model))
    outs = []
    for i in range(len(xs[0])):
        for k, x in enumerate(xs):
            it.set_input(x[i].reshape(it.get_input_details(k)["shape"]), k)
        it.invoke()
        outs.append(np.array(it.get_output(0)))
        it.reset()
    return np.stack(outs).reshape((len(xs[0]),) + outs[0].shape[1:])


class Generated:
    """pockmcu gen output for one model, made once per session."""

    def __init__(self, model: Path, out: Path, numerics: str | None = None):
        from pockmcu.codegen import write_project
        from pockmcu.compiler import compile_model, parse_size

        self.model = model
        # every part has at least 512KB; numerics None: the default for the file (onnxruntime for .onnx)
        self.compiled = compile_model(model, ram=parse_size("512KB"), numerics=numerics)
        self.out = write_project(self.compiled, out)
        g = self.compiled.graph
        self.input_specs = [g.t(name) for name in g.inputs]

    def inputs(self, n: int, seed: int = 0) -> list[np.ndarray]:
        """One array [n, *shape[1:]] per model input."""
        return [random_inputs(t.shape, t.dtype, n, seed + k) for k, t in enumerate(self.input_specs)]


@pytest.fixture(scope="session")
def generated(tmp_path_factory):
    cache: dict[str, Generated] = {}
    base = tmp_path_factory.mktemp("gen")

    def get(model: Path, numerics: str | None = None) -> Generated:
        key = f"{model.name}-{numerics or 'default'}"
        if key not in cache:
            cache[key] = Generated(model, base / f"{model.stem}-{numerics or 'default'}", numerics)
        return cache[key]

    return get


def run_sanitized_checks(test_file, so_path) -> None:
    """Re-run a kernel test file's checks (its --sanitized-run mode) in a subprocess against an
    ASan + UBSan build of the kernels; any sanitizer report fails the test."""
    libasan = subprocess.run(["gcc", "-print-file-name=libasan.so"], capture_output=True, text=True).stdout.strip()
    env = dict(os.environ, LD_PRELOAD=libasan, ASAN_OPTIONS="detect_leaks=0:abort_on_error=1",
               UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1",
               PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    res = subprocess.run([sys.executable, str(test_file), "--sanitized-run", str(so_path)], capture_output=True,
                         text=True, env=env, timeout=300)
    assert res.returncode == 0 and "ALL OK" in res.stdout, res.stdout[-3000:] + res.stderr[-6000:]
    assert "runtime error" not in res.stderr, res.stderr[-6000:]


# ------------------------------------------------------------------ markers: qemu, slow
# Set here, in one place, so that `make test-fast` (-m "not qemu and not slow") needs no edit of the
# test files. A test is `qemu` when its code, a fixture it uses, or a function of its module that
# it calls (transitively) starts QEMU through one of these; `slow` comes from measured durations.
_QEMU_CODE = re.compile(r"\b(run_on_target|train_on_target|run_samples|run_app|run_uart|run_serial|"
                        r"run_workload_qemu|Emulator|qemu_command)\s*\(|qemu-system-arm|"
                        r"""["']--target["'],\s*["']qemu-|["']emulate["']|"""
                        r"from pockmcu\.qemu import [^\n]*\brun\b")
_NAME = re.compile(r"\b([A-Za-z_]\w*)\b")

# Tests that take more than about 4 s each on the 2-core reference machine, without QEMU
# (pytest --durations=0, kernel cache warm). Node ids; a name without "[...]" covers every
# parametrization. Measured durations in seconds.
SLOW_TESTS = {
}


def _source(obj) -> str:
    try:
        return inspect.getsource(obj)
    except (OSError, TypeError):
        return ""


def _runs_qemu(item, memo: dict) -> bool:
    fn = getattr(item, "function", None)
    if fn is None:
        return False
    module = inspect.getmodule(fn)
    todo = [fn] + [defs[-1].func for name in item.fixturenames
                   for defs in [item._fixtureinfo.name2fixturedefs.get(name) or ()] if defs]
    seen = set()
    while todo:
        f = todo.pop()
        if id(f) in seen:
            continue
        seen.add(id(f))
        if f not in memo:
            memo[f] = _source(f)
        text = memo[f]
        if _QEMU_CODE.search(text):
            return True
        for name in set(_NAME.findall(text)):  # module-level helpers it calls
            g = getattr(module, name, None)
            if inspect.isfunction(g) and inspect.getmodule(g) is module:
                todo.append(g)
    return False


def _is_slow(item) -> bool:
    nodeid = item.nodeid
    base = nodeid.split("[", 1)[0]
    return nodeid in SLOW_TESTS or base in SLOW_TESTS


def pytest_collection_modifyitems(config, items):
    memo: dict = {}
    for item in items:
        if _runs_qemu(item, memo):
            item.add_marker(pytest.mark.qemu)
        if _is_slow(item):
            item.add_marker(pytest.mark.slow)
