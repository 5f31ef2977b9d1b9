"""HARD_SWISH (pockmcu/ops/hard_swish.py), the worked example of README "Adding an operator".

* Prepare and the numpy reference against the TFLite Micro interpreter: single-op models with
  random scales over twelve orders of magnitude, every int8 input value, including the corner
  cases of TFLM's 16-bit arithmetic (output shift 0, saturating left shifts, shifts of 16 or more);
* the C kernels (kernels_c/pockmcu_hard_swish_s8.c, pockmcu_hard_swish_grad_f32.c) against the
  numpy reference bit for bit, and again under ASan + UBSan;
* the gradient kernel against PyTorch autograd (torch.nn.functional.hardswish): bit for bit in
  float32, and against float64;
* the fixtures end to end: host simulation = numpy reference = TFLM on all 256 input values, the
  op streamed tile by tile, a refused model, training through HARD_SWISH to the conv before it
  (generated C = numpy reference), and the same training on QEMU (Cortex-M4) = host.

Run standalone as `python tests/test_hard_swish.py --sanitized-run LIB.so` (used by the sanitizer test).
"""

from __future__ import annotations

import json
import sys
import zlib
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from conftest import build_kernel_lib, kernel_cdef  # noqa: E402

from pockmcu.ops.hard_swish import HardSwishParams, hard_swish_grad, hard_swish_params, hard_swish_s8  # noqa: E402

KERNELS = REPO / "kernels_c"
SOURCES = [KERNELS / "pockmcu_hard_swish_s8.c", KERNELS / "pockmcu_hard_swish_grad_f32.c"]
ALL_INT8 = np.arange(-128, 128, dtype=np.int8)
F32 = np.float32


# --------------------------------------------------------------------------
# the kernels through cffi
# --------------------------------------------------------------------------

def build_lib(outdir: Path, sanitize: bool = False) -> Path:
    return build_kernel_lib(outdir / ("libhard_swish_san.so" if sanitize else "libhard_swish.so"), SOURCES, sanitize)


class HS:
    def __init__(self, so: Path):
        import cffi

        self.ffi = cffi.FFI()
        self.ffi.cdef(kernel_cdef())
        self.lib = self.ffi.dlopen(str(so))

    def forward(self, x: np.ndarray, p: HardSwishParams, in_place: bool = False) -> tuple[int, np.ndarray]:
        x = np.ascontiguousarray(x, np.int8)
        y = x.copy() if in_place else np.zeros_like(x)
        xp = self.ffi.from_buffer("int8_t[]", y if in_place else x)
        status = self.lib.pockmcu_hard_swish_s8(xp, x.size, -p.input_zero_point, p.reluish_multiplier,
                                                p.reluish_shift, p.output_multiplier, p.output_shift,
                                                p.output_zero_point, self.ffi.from_buffer("int8_t[]", y))
        return status, y

    def grad(self, x: np.ndarray, dy: np.ndarray, scale: float, zp: int, in_place: bool = False) -> np.ndarray:
        x = np.ascontiguousarray(x, np.int8)
        dy = np.array(dy, F32)
        dx = dy if in_place else np.full_like(dy, np.nan)
        self.lib.pockmcu_hard_swish_grad_f32(self.ffi.from_buffer("int8_t[]", x), x.size, float(F32(scale)), zp,
                                             self.ffi.from_buffer("float[]", dy), self.ffi.from_buffer("float[]", dx))
        return dx


def random_scales(rng, n: int, ratio=(-2.2, 4.6)) -> list[tuple[float, int, float, int]]:
    """(s_in, zp_in, s_out, zp_out) with s_in in [1e-9, 1e3] and s_out / s_in over ``ratio`` decades."""
    out = []
    for _ in range(n):
        s_in = float(F32(10 ** rng.uniform(-9, 3)))
        s_out = float(F32(s_in * 10 ** rng.uniform(*ratio)))
        out.append((s_in, int(rng.integers(-128, 128)), s_out, int(rng.integers(-128, 128))))
    return out


def param_sets(rng, n: int) -> list[HardSwishParams]:
    """Prepare's constants for random scales, and raw constants over the kernel's whole contract."""
    ps = [hard_swish_params(*q) for q in random_scales(rng, n)]
    ps = [p for p in ps if p.output_shift <= 0]
    for _ in range(n):
        zi, zo = (int(v) for v in rng.integers(-128, 128, 2))
        ps.append(HardSwishParams(zi, zo, int(rng.integers(0, 32768)), int(rng.integers(-31, 24)),
                                  int(rng.integers(0, 32768)), int(rng.integers(-31, 1))))
    return ps


def check_forward_kernel(k: HS, rng, n: int) -> None:
    for p in param_sets(rng, n):
        status, got = k.forward(ALL_INT8, p)
        assert status == 0, p
        np.testing.assert_array_equal(got, hard_swish_s8(ALL_INT8, p), err_msg=str(p))
        status, again = k.forward(ALL_INT8, p, in_place=True)
        assert status == 0 and np.array_equal(again, got), p
    bad = HardSwishParams(0, 0, 20000, 1, 20000, 1)
    assert k.forward(ALL_INT8, bad)[0] != 0, "a left output shift is refused"


def check_grad_kernel(k: HS, rng, n: int) -> None:
    for s_in, zp, _, _ in random_scales(rng, n, ratio=(0, 0)) + [(0.5, 0, 0, 0), (0.03, -7, 0, 0)]:
        dy = rng.standard_normal(256).astype(F32)
        dy[::17] = 0.0
        want = hard_swish_grad(ALL_INT8, dy, s_in, zp)
        got = k.grad(ALL_INT8, dy, s_in, zp)
        np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32), err_msg=f"{s_in} {zp}")
        np.testing.assert_array_equal(k.grad(ALL_INT8, dy, s_in, zp, in_place=True).view(np.uint32),
                                      want.view(np.uint32))


CHECKS = {"forward": (check_forward_kernel, 300), "grad": (check_grad_kernel, 60)}


def _sanitized_main(so: str) -> int:
    k = HS(Path(so))
    for name, (fn, n) in CHECKS.items():
        fn(k, np.random.default_rng(zlib.crc32(name.encode())), n)
    print("ALL OK")
    return 0


# --------------------------------------------------------------------------
# pytest tests
# --------------------------------------------------------------------------

try:
    import pytest
except ImportError:  # standalone sanitizer run without pytest
    pytest = None

if pytest is not None:
    from conftest import FIXTURES, tflm_run

    SINGLE = [FIXTURES / "hard_swish_wide_range.tflite", FIXTURES / "hard_swish_narrow_range.tflite"]
    CLASSIFIER = FIXTURES / "hard_swish_classifier.tflite"

    def _make_fixtures():
        import importlib.util

        if "make_fixtures" not in sys.modules:
            spec = importlib.util.spec_from_file_location("make_fixtures", REPO / "tests" / "fixtures" / "make_fixtures.py")
            mod = importlib.util.module_from_spec(spec)
            sys.modules["make_fixtures"] = mod
            spec.loader.exec_module(mod)
        return sys.modules["make_fixtures"]

    def single_op_model(s_in, zp_in, s_out, zp_out) -> bytes:
        b = _make_fixtures().TFLiteBuilder()
        x = b.add_tensor("input", (1, 256), "int8", [s_in], [zp_in])
        y = b.add_tensor("hard_swish0/out", (1, 256), "int8", [s_out], [zp_out])
        b.add_op("HARD_SWISH", [x], [y])
        b.set_io([x], [y])
        return b.serialize()

    @pytest.fixture(scope="module")
    def hs(tmp_path_factory):
        return HS(build_lib(tmp_path_factory.mktemp("hs")))

    def test_prepare_and_reference_equal_tflm_on_every_input(tmp_path):
        """Random scales, every int8 input: numpy reference == TFLite Micro, and the sample reaches
        each corner of the 16-bit arithmetic (so the corners are checked against TFLM, not assumed)."""
        from tflite_micro.python.tflite_micro import runtime

        rng = np.random.default_rng(2024)
        seen = set()
        for q in random_scales(rng, 160):
            p = hard_swish_params(*q)
            if p.output_shift > 0:
                continue    # TFLM refuses these (checked in test_refuses_what_tflm_refuses)
            it = runtime.Interpreter.from_bytes(single_op_model(*q), arena_size=64 * 1024)
            it.set_input(ALL_INT8.reshape(1, 256), 0)
            it.invoke()
            want = it.get_output(0).reshape(-1)
            np.testing.assert_array_equal(hard_swish_s8(ALL_INT8, p), want, err_msg=f"{q} {p}")
            seen |= {k for k, on in (("out_shift_0", p.output_shift == 0), ("out_shift_ge16", p.output_shift <= -16),
                                     ("relu_left", p.reluish_shift > 1), ("relu_right_ge16", p.reluish_shift <= -16),
                                     ("saturated_127", (want == 127).any())) if on}
        assert seen >= {"out_shift_0", "out_shift_ge16", "relu_left", "relu_right_ge16", "saturated_127"}, seen

    def test_kernels_equal_reference(hs):
        for name, (fn, n) in CHECKS.items():
            fn(hs, np.random.default_rng(zlib.crc32(name.encode())), n)

    def test_sanitized_build(tmp_path):
        """ASan + UBSan build of both kernels, exercised by the same checks."""
        from conftest import run_sanitized_checks

        run_sanitized_checks(__file__, build_lib(tmp_path, sanitize=True))

    def test_gradient_equals_torch(hs):
        """The gradient kernel against PyTorch autograd of F.hardswish on the dequantized input: the
        same bits in float32, and within float32 rounding of float64; at x = -3 and x = 3 (the kinks)
        the outer pieces' slopes, 0 and 1."""
        import torch

        torch.set_num_threads(1)
        rng = np.random.default_rng(11)
        for s_in, zp in [(0.5, 0), (0.25, 10), (0.0421, -3), (0.75, -60), (0.0005, 9), (3.1, 100)]:
            x_real = F32(s_in) * (ALL_INT8.astype(np.int32) - zp).astype(F32)
            dy = rng.standard_normal(256).astype(F32)
            got = hs.grad(ALL_INT8, dy, s_in, zp)
            xt = torch.tensor(x_real, requires_grad=True)
            torch.nn.functional.hardswish(xt).backward(torch.tensor(dy))
            np.testing.assert_array_equal(got.view(np.uint32), xt.grad.numpy().view(np.uint32), err_msg=str(s_in))
            x64 = torch.tensor(x_real.astype(np.float64), requires_grad=True)
            torch.nn.functional.hardswish(x64).backward(torch.tensor(dy.astype(np.float64)))
            np.testing.assert_allclose(got, x64.grad.numpy(), rtol=1e-6, atol=1e-7)
            if s_in == 0.5:
                assert {-3.0, 3.0} <= set(x_real.tolist())
                np.testing.assert_array_equal(got[x_real == -3.0], 0.0)
                np.testing.assert_array_equal(got[x_real == 3.0], dy[x_real == 3.0])

    @pytest.mark.parametrize("model", SINGLE, ids=lambda p: p.stem)
    def test_every_int8_value_host_reference_tflm(model, generated):
        """The single-op fixtures (256 elements) on every int8 value, in three orders."""
        from pockmcu.reference import run_reference
        from pockmcu.sim import load

        gen = generated(model)
        rng = np.random.default_rng(5)
        xs = np.stack([ALL_INT8, ALL_INT8[::-1], rng.permutation(ALL_INT8)]).reshape((3,) + gen.input_specs[0].shape[1:])
        want = tflm_run(model, xs)
        np.testing.assert_array_equal(load(gen.out).invoke(xs), want)
        np.testing.assert_array_equal(run_reference(gen.compiled.graph, xs)[0].reshape(want.shape), want)
        assert len(np.unique(want)) > 20

    def test_streamed_tile_by_tile(tmp_path):
        """conv0 -> HARD_SWISH run tile by tile (its window is pointwise): byte-identical in the numpy
        reference for every grid, and in the generated C against TFLM."""
        from dataclasses import replace

        from pockmcu.codegen import write_project
        from pockmcu.compiler import DEFAULT_STACK_BYTES, Compiled, load_and_check
        from pockmcu.plan import plan_memory
        from pockmcu.reference import run_reference
        from pockmcu.sim import load
        from pockmcu.stream import GRIDS, apply_stream, stages

        g = load_and_check(CLASSIFIER)
        (st,) = stages(g)
        assert st.sink == "hard_swish1/out"
        x = np.random.default_rng(3).integers(-128, 128, (4, 6, 6, 3)).astype(np.int8)
        want = tflm_run(CLASSIFIER, x)
        for grid in [gr for gr in GRIDS if gr[0] <= 6 and gr[1] <= 6]:
            ng, tiles = apply_stream(g, st, grid)
            assert sum(op.kind == "HARD_SWISH" for op in ng.ops) == len(tiles) > 1
            np.testing.assert_array_equal(run_reference(ng, x)[0], want)
        ng, _ = apply_stream(g, st, (3, 3))
        plan = plan_memory(ng)
        c = Compiled(graph=replace(ng, ops=list(plan.schedule)), plan=plan, ram_budget=1 << 30, flash_budget=None,
                     stack_bytes=DEFAULT_STACK_BYTES, target="qemu-m4")
        np.testing.assert_array_equal(load(write_project(c, tmp_path / "streamed")).invoke(x), want)

    def test_refuses_what_tflm_refuses(tmp_path):
        """An output scale below input scale / 128 needs a left output shift: TFLM's Prepare fails, and
        pockmcu says so in one line (exit 2)."""
        from test_errors import pockmcu
        from tflite_micro.python.tflite_micro import runtime

        q = (0.5, 0, 0.5 / 200, 0)
        assert hard_swish_params(*q).output_shift > 0
        (tmp_path / "m.tflite").write_bytes(single_op_model(*q))
        with pytest.raises(Exception):
            it = runtime.Interpreter.from_bytes(single_op_model(*q), arena_size=64 * 1024)
            it.set_input(ALL_INT8.reshape(1, 256), 0)
            it.invoke()
        r = pockmcu("gen", tmp_path / "m.tflite", "--ram", "64KB", "-o", tmp_path / "o")
        assert r.returncode == 2 and "HARD_SWISH" in r.stderr and "TFLite Micro refuses it" in r.stderr
        assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr

    SPEC = {"bias": "all", "weights": "all", "optimizer": {"kind": "momentum", "lr": 0.05, "momentum": 0.5}, "batch": 2}

    def _classifier(tmp_path):
        from pockmcu.codegen import write_project
        from pockmcu.compiler import TrainOptions, compile_model

        c = compile_model(CLASSIFIER, ram=512 * 1024, train=TrainOptions(spec=json.dumps(SPEC), loss="xent"))
        return c, write_project(c, tmp_path / "cls")

    def _data(n, seed):
        from pockmcu.train import Data

        rng = np.random.default_rng(seed)
        return Data(rng.integers(-128, 128, (n, 6, 6, 3)).astype(np.int8), rng.integers(0, 5, n).astype(np.int32))

    def test_training_through_hard_swish_c_equals_reference(tmp_path):
        """Every weight and bias trains (momentum, batch 2), 4 steps: the generated C and the numpy
        reference end with the same bytes, and conv0 (before HARD_SWISH) has moved."""
        from pockmcu.train import HostTrainer
        from pockmcu.training import params
        from pockmcu.training.reference import ReferenceTrainer

        c, out = _classifier(tmp_path)
        kinds = [op.kind for op in c.train.schedule]
        assert "HARD_SWISH_GRAD" in kinds and kinds.index("HARD_SWISH_GRAD") < kinds.index("CONV_2D_WGRAD_UPDATE")
        data = _data(4, seed=4)
        host = HostTrainer(out)
        host.init(3)
        ref = ReferenceTrainer(c.train, seed=3)
        for i in range(4):
            loss_c, _, _ = host.step(data.x[i], data.y[i])
            loss_ref = ref.step(data.x[i], data.y[i])
            assert abs(loss_c - loss_ref) <= 1e-6 * max(1.0, abs(loss_ref))
        layout = params.entries(c.train)
        got = params.expand(layout, host.params(), {t: c.graph.t(t).data for t in c.train.trainable_tensors})
        for t, want in ref.params().items():
            np.testing.assert_array_equal(got[t], want, err_msg=t)
        conv_w = c.graph.ops[0].inputs[1]
        assert (got[conv_w] != c.graph.t(conv_w).data).any(), "no gradient reached the conv before HARD_SWISH"

    def test_training_on_qemu_equals_host(tmp_path):
        """One epoch of 12 samples on QEMU (Cortex-M4, FPv4) leaves the host's parameter bytes."""
        from pockmcu.train import HostTrainer, train_on_target
        from pockmcu.training import params

        c, out = _classifier(tmp_path)
        data = _data(12, seed=6)
        host = HostTrainer(out)
        host.train(data, epochs=1, seed=5, log=lambda *_: None)
        _, raw_dev, _ = train_on_target(out, "qemu-m4", data, epochs=1, seed=5, log=lambda *_: None)
        assert raw_dev == host.params()
        initial = params.pack(params.entries(c.train), {t: c.graph.t(t).data for t in c.train.trainable_tensors})
        assert raw_dev != initial


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--sanitized-run":
        sys.exit(_sanitized_main(sys.argv[2]))
    print("usage: test_hard_swish.py --sanitized-run LIB.so", file=sys.stderr)
    sys.exit(2)
