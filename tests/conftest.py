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

# Tests whose call took 2.5 s or more on the 2-core machine (pytest --durations=0 -m "not qemu", kernel
# cache warm, load average about 5 from other jobs), without QEMU. Node ids; a name without "[...]"
# covers every parametrization. Values: the measured seconds (for the record; only the keys count).
SLOW_TESTS = {
    "tests/test_board_host.py::test_board_app_builds_for_every_kind_of_board[nrf52840-dk]": 4.1,
    "tests/test_board_host.py::test_board_app_builds_for_every_kind_of_board[nucleo-h743zi]": 3.5,
    "tests/test_board_host.py::test_board_app_builds_for_every_kind_of_board[qemu-m4]": 4.6,
    "tests/test_board_host.py::test_board_app_builds_for_every_kind_of_board[rp2350]": 3.8,
    "tests/test_board_host.py::test_board_app_builds_for_every_kind_of_board[stm32f746g-disco]": 3.1,
    "tests/test_board_host.py::test_bootloader_is_small_and_refuses_real_boards": 2.6,
    "tests/test_board_host.py::test_checkpoint_survives_a_power_cut_at_every_byte": 6.5,
    "tests/test_board_host.py::test_fuzzed_frames_each_get_one_answer": 8.2,
    "tests/test_board_host.py::test_training_answers_repeat_without_applying": 3.7,
    "tests/test_digits_model.py::test_float_fine_tuning_last_layer": 6.3,
    "tests/test_digits_model.py::test_float_fine_tuning_sparse": 4.9,
    "tests/test_digits_transfer.py::test_int8_fine_tuning_within_two_points_of_float[sparse]": 2.8,
    "tests/test_errors.py::test_sim_bad_input_files": 9.4,
    "tests/test_exact.py::test_host_simulation_equals_tflm[mlperf_ad_autoencoder]": 6.6,
    "tests/test_exact.py::test_host_simulation_equals_tflm[mlperf_ic_resnet8_large]": 5.0,
    "tests/test_grad_kernels.py::test_arm_cross_compile": 3.9,
    "tests/test_grad_kernels.py::test_sanitized_build": 5.8,
    "tests/test_kernels.py::test_arm_cross_compile": 13.3,
    "tests/test_kernels.py::test_sanitized_build": 7.8,
    "tests/test_onnx.py::test_host_simulation_equals_reference[mlperf_vww_mobilenetv1_96_qdq]": 3.7,
    "tests/test_onnx.py::test_new_kernels_under_sanitizers[pools_qop_s8_pt]": 7.2,
    "tests/test_plan.py::test_oversized_budget_fails_at_link_time": 3.5,
    "tests/test_planner.py::test_inference_plan_within_2_percent[mobilenetv2_w035_128]": 3.3,
    "tests/test_planner.py::test_plan_uses_exact_search_on_small_plans": 25.4,
    "tests/test_report_html.py::test_report_timeline_is_drawn": 3.6,
    "tests/test_search.py::test_calib_on_digits": 24.6,
    "tests/test_search.py::test_fits_and_grows_with_the_budget[kws]": 2.8,
    "tests/test_search.py::test_fits_and_grows_with_the_budget[vww]": 25.9,
    "tests/test_search.py::test_gen_budget_too_small": 10.0,
    "tests/test_search.py::test_gen_writes_a_spec_that_reproduces_the_build": 3.8,
    "tests/test_search.py::test_plan_table_and_html": 2.5,
    "tests/test_search.py::test_reproducible": 2.7,
    "tests/test_stream.py::test_cli_stream_flag": 5.5,
    "tests/test_stream.py::test_every_stage_and_grid_of_mobilenetv2_is_byte_identical": 61.2,
    "tests/test_stream.py::test_streamed_c_equals_unstreamed_and_tflm[mlperf_ic_resnet8]": 16.8,
    "tests/test_stream.py::test_streamed_c_equals_unstreamed_and_tflm[mlperf_vww_mobilenetv1_96]": 5.2,
    "tests/test_stream.py::test_streamed_c_equals_unstreamed_and_tflm[mobilenetv2_w035_128]": 100.6,
    "tests/test_stream.py::test_streamed_c_equals_unstreamed_and_tflm[tflm_person_detect]": 10.0,
    "tests/test_stream.py::test_streamed_training_step_is_identical": 12.4,
    "tests/test_training.py::test_export_of_split_storage[mlperf_vww_mobilenetv1_96]": 3.8,
    "tests/test_training.py::test_one_step_equals_float_reference[mlperf_vww_mobilenetv1_96]": 5.0,
    "tests/test_training.py::test_split_storage_persistent_ram[mlperf_vww_mobilenetv1_96]": 3.7,
    "tests/test_training.py::test_split_storage_sanitized": 8.6,
    "tests/test_training_cli.py::test_bad_training_data": 2.6,
    "tests/test_training_cli.py::test_default_update_fits_the_budget": 5.0,
    # whole groups: the sanitizer sweep over every model (46 x ~0.8 s), the kernel cache's end-to-end
    # checks (each compiles the kernels once more)
    "tests/test_targets.py::test_sanitized_host_build_is_clean": 34.0,
    "tests/test_build_cache.py::test_changed_kernel_reaches_the_library": 19.4,
    "tests/test_build_cache.py::test_cached_build_equals_plain_make_host": 9.5,
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


# -- kernels built into a host library for cffi (the kernel tests of each op family) ---------------

KERNELS_DIR = Path(__file__).resolve().parents[1] / "kernels_c"
#: every host build of the kernels: C99, warnings as errors, no fused multiply-add (bit-exact floats)
KERNEL_CFLAGS = ["-std=c99", "-Wall", "-Wextra", "-Werror", "-Wshadow", "-ffp-contract=off"]
SANITIZE_CFLAGS = ["-O1", "-g", "-fsanitize=address,undefined", "-fno-sanitize-recover=all",
                   "-fsanitize=float-cast-overflow", "-fno-omit-frame-pointer"]


def build_kernel_lib(so: Path, sources, sanitize: bool = False) -> Path:
    """Compile ``sources`` (kernel .c files) into the shared library ``so``; gcc must be silent."""
    so.parent.mkdir(parents=True, exist_ok=True)
    cmd = ["gcc", *KERNEL_CFLAGS, *(SANITIZE_CFLAGS if sanitize else ["-O2"]), "-fPIC", "-shared",
           f"-I{KERNELS_DIR}", *[str(p) for p in sources], "-o", str(so)]
    res = subprocess.run(cmd, capture_output=True, text=True)
    assert res.returncode == 0 and res.stderr == "", f"{' '.join(cmd)}\n{res.stderr}"
    return so


def kernel_cdef() -> str:
    """cffi declarations of every kernel: kernels_c/pockmcu_nn.h as gcc reads it (no copied prototype)."""
    from pockmcu.cdecl import c_declarations

    return c_declarations(KERNELS_DIR / "pockmcu_nn.h", include_dirs=[KERNELS_DIR])
