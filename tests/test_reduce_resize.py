"""Reductions over any axes (pockmcu/ops/reduce.py) and resizes (pockmcu/ops/resize.py).

* Prepare and the numpy references against the TFLite Micro interpreter: single-op MEAN / SUM /
  REDUCE_MAX / REDUCE_MIN models over random shapes, axes (spatial and not, negative, duplicated),
  keep_dims either way and random scales, and RESIZE_NEAREST_NEIGHBOR / RESIZE_BILINEAR over random
  sizes up and down with align_corners, half_pixel_centers or neither; random and extreme inputs
  (all -128, all 127, alternating), with the corners of the arithmetic counted (left-shift
  requantization, saturation, 32-bit wrap of the sum, negative bilinear fractions);
* the C kernels (kernels_c/pockmcu_reduce_*.c, pockmcu_resize_*.c) against the references bit for
  bit, and again under ASan + UBSan;
* the gradients against PyTorch autograd on the dequantized tensors: MEAN / SUM / amax / amin
  bit for bit in float32; nearest and bilinear against the same maps built from torch ops, and
  against F.interpolate where TFLM's 10-bit weights are exact;
* the fixtures end to end (host simulation = numpy reference = TFLM on extreme inputs), refused
  models, and training through a bilinear and a nearest resize, REDUCE_MAX, a channel MEAN and a
  SUM to the first conv (generated C = numpy reference byte for byte; QEMU = host).

Run standalone as `python tests/test_reduce_resize.py --sanitized-run LIB.so` (the sanitizer test).
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

from pockmcu import fixedpoint as fp  # noqa: E402
from pockmcu.ops.reduce import (  # noqa: E402
    reduce_broadcast_grad,
    reduce_extremum_grad,
    reduce_extremum_s8,
    reduce_groups,
    reduce_sum_s8,
    resolve_axes,
)
from pockmcu.ops.resize import (  # noqa: E402
    bilinear_axis,
    nearest_indices,
    resize_bilinear_grad,
    resize_bilinear_s8,
    resize_nearest_grad,
    resize_nearest_s8,
)

KERNELS = REPO / "kernels_c"
NAMES = ["pockmcu_reduce_sum_s8", "pockmcu_reduce_max_s8", "pockmcu_reduce_min_s8", "pockmcu_resize_nearest_s8",
         "pockmcu_resize_bilinear_s8", "pockmcu_reduce_broadcast_grad_f32", "pockmcu_reduce_extremum_grad_f32",
         "pockmcu_resize_nearest_grad_f32", "pockmcu_resize_bilinear_grad_f32"]
SOURCES = [KERNELS / f"{n}.c" for n in NAMES]
F32 = np.float32


# --------------------------------------------------------------------------
# the kernels through cffi
# --------------------------------------------------------------------------

def build_lib(outdir: Path, sanitize: bool = False) -> Path:
    return build_kernel_lib(outdir / ("libreduce_resize_san.so" if sanitize else "libreduce_resize.so"), SOURCES, sanitize)


class K:
    def __init__(self, so: Path):
        import cffi

        self.ffi = cffi.FFI()
        self.ffi.cdef(kernel_cdef())
        self.lib = self.ffi.dlopen(str(so))

    def _b(self, ctype, a):
        return self.ffi.from_buffer(ctype, a)

    def _dims(self, shape):
        return self.ffi.new("cmsis_nn_dims *", dict(zip("nhwc", (int(v) for v in shape))))

    def reduce_sum(self, x, groups, izp, ozp, mult, shift):
        g = np.array(groups, np.int32)
        y = np.zeros(groups[0] * groups[2] * groups[4], np.int8)
        st = self.lib.pockmcu_reduce_sum_s8(self._b("int32_t[]", g), self._b("int8_t[]", np.ascontiguousarray(x)),
                                            -izp, ozp, mult, shift, self._b("int8_t[]", y))
        return st, y

    def reduce_ext(self, x, groups, kind):
        g = np.array(groups, np.int32)
        y = np.zeros(groups[0] * groups[2] * groups[4], np.int8)
        fn = self.lib.pockmcu_reduce_max_s8 if kind == "REDUCE_MAX" else self.lib.pockmcu_reduce_min_s8
        st = fn(self._b("int32_t[]", g), self._b("int8_t[]", np.ascontiguousarray(x)), self._b("int8_t[]", y))
        return st, y

    def broadcast_grad(self, dy, groups, divisor):
        g = np.array(groups, np.int32)
        dx = np.full(int(np.prod(groups)), np.nan, F32)
        self.lib.pockmcu_reduce_broadcast_grad_f32(self._b("int32_t[]", g), self._b("float[]", np.array(dy, F32)),
                                                   divisor, self._b("float[]", dx))
        return dx

    def extremum_grad(self, x, y, dy, groups):
        g = np.array(groups, np.int32)
        dx = np.full(int(np.prod(groups)), np.nan, F32)
        self.lib.pockmcu_reduce_extremum_grad_f32(self._b("int32_t[]", g), self._b("int8_t[]", np.ascontiguousarray(x)),
                                                  self._b("int8_t[]", np.ascontiguousarray(y)),
                                                  self._b("float[]", np.array(dy, F32)), self._b("float[]", dx))
        return dx

    def resize(self, x, out_hw, rows, cols, bilinear):
        x = np.ascontiguousarray(x, np.int8)
        y = np.zeros((x.shape[0],) + tuple(out_hw) + (x.shape[3],), np.int8)
        fn = self.lib.pockmcu_resize_bilinear_s8 if bilinear else self.lib.pockmcu_resize_nearest_s8
        st = fn(self._dims(x.shape), self._b("int8_t[]", x), self._dims(y.shape),
                self._b("int32_t[]", np.array(rows, np.int32)), self._b("int32_t[]", np.array(cols, np.int32)),
                self._b("int8_t[]", y))
        return st, y

    def resize_grad(self, dy, in_shape, rows, cols, bilinear):
        dy = np.ascontiguousarray(dy, F32)
        dx = np.full((dy.shape[0],) + tuple(in_shape[1:]), np.nan, F32)
        fn = self.lib.pockmcu_resize_bilinear_grad_f32 if bilinear else self.lib.pockmcu_resize_nearest_grad_f32
        fn(self._dims(dx.shape), self._dims(dy.shape), self._b("int32_t[]", np.array(rows, np.int32)),
           self._b("int32_t[]", np.array(cols, np.int32)), self._b("float[]", dy), self._b("float[]", dx))
        return dx


def random_input(rng, shape) -> np.ndarray:
    """Random int8, or one of the extremes: all -128, all 127, alternating -128 / 127."""
    kind = int(rng.integers(0, 5))
    size = int(np.prod(shape))
    if kind == 0:
        return np.full(shape, -128, np.int8)
    if kind == 1:
        return np.full(shape, 127, np.int8)
    if kind == 2:
        return np.where(np.arange(size) % 2 == 0, -128, 127).astype(np.int8).reshape(shape)
    return rng.integers(-128, 128, shape).astype(np.int8)


def random_axes(rng, rank):
    """1..rank axes, some negative, some repeated."""
    axes = [int(a) for a in rng.integers(0, rank, int(rng.integers(1, rank + 2)))]
    return [a - rank if rng.integers(0, 3) == 0 else a for a in axes]


def check_reduce_kernels(k: K, rng, n: int) -> None:
    for _ in range(n):
        rank = int(rng.integers(1, 5))
        shape = tuple(int(v) for v in rng.integers(1, 7, rank))
        axes = resolve_axes(rank, random_axes(rng, rank))
        groups = reduce_groups(shape, axes)
        x = random_input(rng, shape)
        izp, ozp = (int(v) for v in rng.integers(-128, 128, 2))
        mult, shift = int(rng.integers(1 << 30, (1 << 31) - 1)), int(rng.integers(-31, 8))
        st, got = k.reduce_sum(x, groups, izp, ozp, mult, shift)
        assert st == 0
        np.testing.assert_array_equal(got, reduce_sum_s8(x, groups, izp, ozp, mult, shift).reshape(-1))
        for kind in ("REDUCE_MAX", "REDUCE_MIN"):
            st, got = k.reduce_ext(x, groups, kind)
            y = reduce_extremum_s8(x, groups, kind)
            assert st == 0
            np.testing.assert_array_equal(got, y.reshape(-1))
            dy = rng.standard_normal(y.size).astype(F32)
            np.testing.assert_array_equal(k.extremum_grad(x, y, dy, groups).view(np.uint32),
                                          reduce_extremum_grad(x, y, dy, groups).reshape(-1).view(np.uint32))
        dy = rng.standard_normal(groups[0] * groups[2] * groups[4]).astype(F32)
        for divisor in (1, groups[1] * groups[3], 7):
            np.testing.assert_array_equal(k.broadcast_grad(dy, groups, divisor).view(np.uint32),
                                          reduce_broadcast_grad(dy, groups, divisor).reshape(-1).view(np.uint32))
    assert k.reduce_sum(np.zeros(4, np.int8), (1, 0, 1, 4, 1), 0, 0, 1 << 30, 0)[0] != 0, "an empty group is refused"


def resize_case(rng):
    h, w = (int(v) for v in rng.integers(1, 9, 2))
    oh, ow = (int(v) for v in rng.integers(1, 17, 2))
    align = bool(rng.integers(0, 2))
    half = (not align) and bool(rng.integers(0, 2))
    return h, w, oh, ow, align, half


def check_resize_kernels(k: K, rng, n: int) -> None:
    for _ in range(n):
        h, w, oh, ow, align, half = resize_case(rng)
        c, nb = int(rng.integers(1, 5)), int(rng.integers(1, 3))
        x = random_input(rng, (nb, h, w, c))
        dy = rng.standard_normal((nb, oh, ow, c)).astype(F32)
        for bilinear in (False, True):
            rows = (bilinear_axis if bilinear else nearest_indices)(oh, h, align, half)
            cols = (bilinear_axis if bilinear else nearest_indices)(ow, w, align, half)
            st, got = k.resize(x, (oh, ow), rows, cols, bilinear)
            want = (resize_bilinear_s8 if bilinear else resize_nearest_s8)(x, rows, cols)
            assert st == 0
            np.testing.assert_array_equal(got, want, err_msg=f"{h, w, oh, ow, align, half, bilinear}")
            ref = (resize_bilinear_grad if bilinear else resize_nearest_grad)(dy, x.shape, rows, cols)
            np.testing.assert_array_equal(k.resize_grad(dy, x.shape, rows, cols, bilinear).view(np.uint32),
                                          ref.view(np.uint32))


CHECKS = {"reduce": (check_reduce_kernels, 300), "resize": (check_resize_kernels, 150)}


def _sanitized_main(so: str) -> int:
    k = K(Path(so))
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

    TRAIN = FIXTURES / "train_reduce_resize.tflite"
    REDUCE_FIXTURES = sorted(p for p in FIXTURES.glob("*.tflite")
                             if p.stem.startswith(("mean_", "sum_", "reduce_", "resize_")))

    def _make_fixtures():
        import importlib.util

        if "make_fixtures" not in sys.modules:
            spec = importlib.util.spec_from_file_location("make_fixtures", REPO / "tests" / "fixtures" / "make_fixtures.py")
            mod = importlib.util.module_from_spec(spec)
            sys.modules["make_fixtures"] = mod
            spec.loader.exec_module(mod)
        return sys.modules["make_fixtures"]

    def single_op_model(opcode, xshape, yshape, qin, qout, const, options_type, options) -> bytes:
        b = _make_fixtures().TFLiteBuilder()
        x = b.add_tensor("input", xshape, "int8", [qin[0]], [qin[1]])
        c = b.add_tensor("op0/const", (len(const),), "int32", data=np.asarray(const, np.int32))
        y = b.add_tensor("op0/out", yshape, "int8", [qout[0]], [qout[1]])
        b.add_op(opcode, [x, c], [y], options_type, options)
        b.set_io([x], [y])
        return b.serialize()

    def tflm(buf: bytes, x: np.ndarray) -> np.ndarray:
        from tflite_micro.python.tflite_micro import runtime

        it = runtime.Interpreter.from_bytes(buf, arena_size=256 * 1024)
        it.set_input(x, 0)
        it.invoke()
        return np.array(it.get_output(0))

    def reduced_shape(shape, axes, keep):
        return [1 if i in axes else d for i, d in enumerate(shape)] if keep else \
            [d for i, d in enumerate(shape) if i not in axes]

    @pytest.fixture(scope="module")
    def kern(tmp_path_factory):
        return K(build_lib(tmp_path_factory.mktemp("rr")))

    def test_mean_sum_prepare_and_reference_equal_tflm():
        """400 random MEAN and SUM models (rank 1-4, any axes, keep_dims either way, scale ratios over
        six decades), each on a random and an extreme input: numpy reference == TFLM, and the sample
        reaches left-shift requantization, saturation at both ends, spatial and non-spatial axes."""
        rng = np.random.default_rng(7)
        seen, n = set(), 0
        for _ in range(200):
            rank = int(rng.integers(1, 5))
            shape = tuple(int(v) for v in rng.integers(1, 7, rank))
            raw_axes = random_axes(rng, rank)
            axes = resolve_axes(rank, raw_axes)
            keep = bool(rng.integers(0, 2))
            s_in = float(F32(10 ** rng.uniform(-5, 1)))
            s_out = float(F32(s_in * 10 ** rng.uniform(-3, 3)))
            zi, zo = (int(v) for v in rng.integers(-128, 128, 2))
            groups = reduce_groups(shape, axes)
            for opcode in ("MEAN", "SUM"):
                buf = single_op_model(opcode, shape, reduced_shape(shape, axes, keep), (s_in, zi), (s_out, zo), raw_axes,
                                      "ReducerOptions", dict(KeepDims=keep))
                p = fp.mean_params(s_in, zi, s_out, zo, groups[1] * groups[3])
                mult, shift = (p["adjusted_multiplier"], p["adjusted_shift"]) if opcode == "MEAN" else \
                    (p["multiplier"], p["shift"])
                for x in (rng.integers(-128, 128, shape).astype(np.int8), random_input(rng, shape)):
                    want = tflm(buf, x)
                    got = reduce_sum_s8(x, groups, zi, zo, mult, shift)
                    np.testing.assert_array_equal(got.reshape(-1), want.reshape(-1), err_msg=f"{opcode} {shape} {axes}")
                    n += 1
                    seen |= {k for k, on in (("left_shift", shift > 0), ("sat_hi", (want == 127).any()),
                                             ("sat_lo", (want == -128).any()),
                                             ("spatial", rank == 4 and sorted(axes) == [1, 2]),
                                             ("alternating", groups[3] > 1 and groups[2] > 1)) if on}
        assert n == 800
        assert seen >= {"left_shift", "sat_hi", "sat_lo", "spatial", "alternating"}, seen

    def test_sum_left_shift_wraps_like_tflm():
        """A SUM whose output scale is 2^-12 of the input's: MultiplyByQuantizedMultiplier shifts the
        int32 accumulator left by 13 before the high multiply, and for 4096 inputs that product leaves
        int32; TFLM's int32 multiply wraps, and so do the reference and the kernel."""
        shape = (1, 64, 64, 1)
        groups = reduce_groups(shape, [1, 2])
        rng = np.random.default_rng(3)
        wrapped = 0
        for zi in (-128, 0, 127):
            p = fp.mean_params(1.0, zi, 2.0 ** -12, 0)
            assert p["shift"] == 13
            buf = single_op_model("SUM", shape, [1, 1, 1, 1], (1.0, zi), (2.0 ** -12, 0), [1, 2], "ReducerOptions",
                                  dict(KeepDims=True))
            for x in (np.full(shape, 127, np.int8), np.full(shape, -128, np.int8), rng.integers(-128, 128, shape)):
                x = x.astype(np.int8)
                acc = int(x.astype(np.int64).sum()) - zi * 4096
                wrapped += not -(1 << 31) <= acc * (1 << 13) < (1 << 31)
                got = reduce_sum_s8(x, groups, zi, 0, p["multiplier"], p["shift"])
                np.testing.assert_array_equal(got.reshape(-1), tflm(buf, x).reshape(-1), err_msg=f"{zi} {acc}")
        assert wrapped >= 4

    def test_max_min_reference_equal_tflm():
        rng = np.random.default_rng(8)
        n = 0
        for _ in range(100):
            rank = int(rng.integers(1, 5))
            shape = tuple(int(v) for v in rng.integers(1, 7, rank))
            raw_axes = random_axes(rng, rank)
            axes = resolve_axes(rank, raw_axes)
            keep = bool(rng.integers(0, 2))
            q = (float(F32(10 ** rng.uniform(-4, 1))), int(rng.integers(-128, 128)))
            for opcode in ("REDUCE_MAX", "REDUCE_MIN"):
                buf = single_op_model(opcode, shape, reduced_shape(shape, axes, keep), q, q, raw_axes,
                                      "ReducerOptions", dict(KeepDims=keep))
                for x in (rng.integers(-128, 128, shape).astype(np.int8), random_input(rng, shape)):
                    got = reduce_extremum_s8(x, reduce_groups(shape, axes), opcode)
                    np.testing.assert_array_equal(got.reshape(-1), tflm(buf, x).reshape(-1))
                    n += 1
        assert n == 400

    def test_resize_prepare_and_reference_equal_tflm():
        """300 random resizes (input 1..8, output 1..16 per side, so up and down, all three coordinate
        modes), each kind on a random and an extreme input: reference == TFLM; the sample includes
        negative bilinear fractions (half_pixel_centers at the border) and align_corners rounding."""
        rng = np.random.default_rng(9)
        seen, n = set(), 0
        for _ in range(150):
            h, w, oh, ow, align, half = resize_case(rng)
            c = int(rng.integers(1, 4))
            q = (float(F32(10 ** rng.uniform(-4, 1))), int(rng.integers(-128, 128)))
            for opcode, opts in (("RESIZE_NEAREST_NEIGHBOR", "ResizeNearestNeighborOptions"),
                                 ("RESIZE_BILINEAR", "ResizeBilinearOptions")):
                buf = single_op_model(opcode, (2, h, w, c), (2, oh, ow, c), q, q, [oh, ow], opts,
                                      dict(AlignCorners=align, HalfPixelCenters=half))
                bil = opcode == "RESIZE_BILINEAR"
                rows = (bilinear_axis if bil else nearest_indices)(oh, h, align, half)
                cols = (bilinear_axis if bil else nearest_indices)(ow, w, align, half)
                for x in (rng.integers(-128, 128, (2, h, w, c)).astype(np.int8), random_input(rng, (2, h, w, c))):
                    got = (resize_bilinear_s8 if bil else resize_nearest_s8)(x, rows, cols)
                    np.testing.assert_array_equal(got, tflm(buf, x), err_msg=f"{opcode} {h, w, oh, ow, align, half}")
                    n += 1
                if bil:
                    seen |= {k for k, on in (("negative_fraction", min(rows[2::3] + cols[2::3]) < 0),
                                             ("up", oh > h), ("down", oh < h), ("align", align), ("half", half),
                                             ("legacy", not align and not half)) if on}
        assert n == 600
        assert seen == {"negative_fraction", "up", "down", "align", "half", "legacy"}, seen

    def test_kernels_equal_reference(kern):
        for name, (fn, n) in CHECKS.items():
            fn(kern, np.random.default_rng(zlib.crc32(name.encode())), n)

    def test_sanitized_build(tmp_path):
        """ASan + UBSan build of the nine kernels, exercised by the same checks."""
        from conftest import run_sanitized_checks

        run_sanitized_checks(__file__, build_lib(tmp_path, sanitize=True))

    def test_reduce_gradients_equal_torch(kern):
        """MEAN, SUM, amax, amin over random axes of dequantized int8 tensors (ties are common): the
        kernels give PyTorch autograd's float32 bits (sign of zero included), and float64's values
        within float32 rounding."""
        import torch

        torch.set_num_threads(1)
        rng = np.random.default_rng(12)
        for it in range(60):
            rank = int(rng.integers(1, 5))
            shape = tuple(int(v) for v in rng.integers(1, 6, rank))
            axes = resolve_axes(rank, random_axes(rng, rank))
            groups = reduce_groups(shape, axes)
            s, zp = float(F32(10 ** rng.uniform(-3, 0))), int(rng.integers(-20, 20))
            x = rng.integers(-6, 6, shape).astype(np.int8) if it % 2 else random_input(rng, shape)
            xr = (F32(s) * (x.astype(np.int32) - zp).astype(F32)).astype(F32)
            yshape = reduced_shape(shape, axes, True)
            dy = rng.standard_normal(yshape).astype(F32)
            for kind in ("MEAN", "SUM", "REDUCE_MAX", "REDUCE_MIN"):
                fn = {"MEAN": torch.mean, "SUM": torch.sum, "REDUCE_MAX": torch.amax, "REDUCE_MIN": torch.amin}[kind]
                for dtype in (torch.float32, torch.float64):
                    xt = torch.tensor(xr, dtype=dtype, requires_grad=True)
                    fn(xt, dim=tuple(axes), keepdim=True).backward(torch.tensor(dy, dtype=dtype))
                    want = xt.grad.numpy()
                    if kind in ("MEAN", "SUM"):
                        got = kern.broadcast_grad(dy, groups, groups[1] * groups[3] if kind == "MEAN" else 1)
                    else:
                        y = reduce_extremum_s8(x, groups, kind)
                        got = kern.extremum_grad(x, y, dy, groups)
                    if dtype == torch.float32:
                        np.testing.assert_array_equal(got.view(np.uint32), want.reshape(-1).view(np.uint32),
                                                      err_msg=f"{kind} {shape} {axes}")
                    else:
                        np.testing.assert_allclose(got, want.reshape(-1), rtol=1e-6, atol=1e-30)

    def _torch_resize(xt, rows, cols, bilinear):
        """The kernels' linear map built from torch ops (index_select and weighted sums)."""
        import torch

        if not bilinear:
            return xt.index_select(1, torch.tensor(rows)).index_select(2, torch.tensor(cols))
        r, c = np.array(rows).reshape(-1, 3), np.array(cols).reshape(-1, 3)
        fy = torch.tensor(r[:, 2], dtype=xt.dtype)[None, :, None, None] / 1024
        fx = torch.tensor(c[:, 2], dtype=xt.dtype)[None, None, :, None] / 1024

        def tap(ry, cx):
            return xt.index_select(1, torch.tensor(ry)).index_select(2, torch.tensor(cx))

        return (tap(r[:, 0], c[:, 0]) * ((1 - fy) * (1 - fx)) + tap(r[:, 1], c[:, 0]) * (fy * (1 - fx))
                + tap(r[:, 0], c[:, 1]) * ((1 - fy) * fx) + tap(r[:, 1], c[:, 1]) * (fy * fx))

    def test_resize_gradients_equal_torch(kern):
        """The kernels' gradients against autograd of the same maps in torch (float64, within float32
        rounding), and forward and gradient against F.interpolate where the modes coincide and TFLM's
        10-bit weights are exact: nearest (legacy) = 'nearest', nearest half-pixel = 'nearest-exact',
        bilinear align_corners = align_corners=True, bilinear half-pixel = align_corners=False."""
        import torch
        import torch.nn.functional as tf

        torch.set_num_threads(1)
        rng = np.random.default_rng(13)
        for _ in range(40):
            h, w, oh, ow, align, half = resize_case(rng)
            x = rng.integers(-128, 128, (1, h, w, 3)).astype(np.int8)
            xr = (F32(0.05) * (x.astype(np.int32) - 3)).astype(F32)
            dy = rng.standard_normal((1, oh, ow, 3)).astype(F32)
            for bilinear in (False, True):
                rows = (bilinear_axis if bilinear else nearest_indices)(oh, h, align, half)
                cols = (bilinear_axis if bilinear else nearest_indices)(ow, w, align, half)
                got = kern.resize_grad(dy, x.shape, rows, cols, bilinear)
                xt = torch.tensor(xr.astype(np.float64), requires_grad=True)
                _torch_resize(xt, rows, cols, bilinear).backward(torch.tensor(dy.astype(np.float64)))
                np.testing.assert_allclose(got, xt.grad.numpy(), rtol=2e-6, atol=1e-6)
        exact = [(False, 4, 5, 8, 10, False, False), (False, 4, 5, 7, 9, False, True),
                 (True, 5, 3, 9, 5, True, False), (True, 4, 3, 8, 6, False, True), (True, 3, 5, 9, 17, True, False)]
        for bilinear, h, w, oh, ow, align, half in exact:
            x = rng.integers(-128, 128, (2, h, w, 3)).astype(np.int8)
            xr = (F32(0.05) * (x.astype(np.int32) - 3)).astype(np.float64)
            dy = rng.standard_normal((2, oh, ow, 3))
            rows = (bilinear_axis if bilinear else nearest_indices)(oh, h, align, half)
            cols = (bilinear_axis if bilinear else nearest_indices)(ow, w, align, half)
            xt = torch.tensor(xr.transpose(0, 3, 1, 2), requires_grad=True)
            if bilinear:
                yt = tf.interpolate(xt, size=(oh, ow), mode="bilinear", align_corners=align)
            else:
                yt = tf.interpolate(xt, size=(oh, ow), mode="nearest-exact" if half else "nearest")
            yt.backward(torch.tensor(dy.transpose(0, 3, 1, 2)))
            q = (resize_bilinear_s8 if bilinear else resize_nearest_s8)(x, rows, cols)
            np.testing.assert_allclose(0.05 * (q.astype(np.int32) - 3), yt.detach().numpy().transpose(0, 2, 3, 1),
                                       atol=0.05 * 0.5 + 1e-9)
            if not bilinear:
                np.testing.assert_array_equal(q, resize_nearest_s8(x, rows, cols))
            got = kern.resize_grad(dy.astype(F32), x.shape, rows, cols, bilinear)
            np.testing.assert_allclose(got, xt.grad.numpy().transpose(0, 2, 3, 1), rtol=2e-6, atol=1e-6)

    @pytest.mark.parametrize("model", REDUCE_FIXTURES, ids=lambda p: p.stem)
    def test_fixture_extreme_inputs_host_reference_tflm(model, generated):
        """Every reduce / resize fixture on extreme inputs (all -128, all 127, alternating, random):
        host simulation = numpy reference = TFLM."""
        from pockmcu.reference import run_reference
        from pockmcu.sim import load

        gen = generated(model)
        shape = gen.input_specs[0].shape[1:]
        rng = np.random.default_rng(5)
        xs = np.stack([np.full(shape, -128), np.full(shape, 127),
                       np.where(np.arange(int(np.prod(shape))) % 2, 127, -128).reshape(shape),
                       rng.integers(-128, 128, shape)]).astype(np.int8)
        want = tflm_run(model, xs)
        np.testing.assert_array_equal(load(gen.out).invoke(xs), want)
        np.testing.assert_array_equal(run_reference(gen.compiled.graph, xs)[0].reshape(want.shape), want)

    @pytest.mark.parametrize("opcode,qout,options,message", [
        ("REDUCE_MAX", (0.1, 0), dict(KeepDims=False), "TFLite Micro refuses it"),
        ("RESIZE_BILINEAR", (0.05, 0), dict(AlignCorners=True, HalfPixelCenters=True), "TFLite Micro refuses it"),
        ("RESIZE_NEAREST_NEIGHBOR", (0.05, 4), dict(AlignCorners=False, HalfPixelCenters=False), "without rescaling"),
    ])
    def test_refuses_in_one_line(tmp_path, opcode, qout, options, message):
        from test_errors import pockmcu

        if opcode == "REDUCE_MAX":
            buf = single_op_model(opcode, (1, 4, 4, 3), (1, 3), (0.05, 0), qout, [1, 2], "ReducerOptions", options)
        else:
            opts = "ResizeBilinearOptions" if opcode == "RESIZE_BILINEAR" else "ResizeNearestNeighborOptions"
            buf = single_op_model(opcode, (1, 4, 4, 3), (1, 8, 8, 3), (0.05, 0), qout, [8, 8], opts, options)
        (tmp_path / "m.tflite").write_bytes(buf)
        r = pockmcu("gen", tmp_path / "m.tflite", "--ram", "64KB", "-o", tmp_path / "o")
        assert r.returncode == 2 and opcode in r.stderr and message in r.stderr, r.stderr
        assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr

    SPEC = {"bias": "all", "weights": "all", "optimizer": {"kind": "momentum", "lr": 0.05, "momentum": 0.5}, "batch": 2}

    def _train_model(tmp_path):
        from pockmcu.codegen import write_project
        from pockmcu.compiler import TrainOptions, compile_model

        c = compile_model(TRAIN, ram=512 * 1024, train=TrainOptions(spec=json.dumps(SPEC), loss="xent"))
        return c, write_project(c, tmp_path / "train")

    def _data(n, seed):
        from pockmcu.train import Data

        rng = np.random.default_rng(seed)
        return Data(rng.integers(-128, 128, (n, 6, 6, 2)).astype(np.int8), rng.integers(0, 5, n).astype(np.int32))

    def test_training_through_reductions_and_resizes_c_equals_reference(tmp_path):
        """Every weight and bias trains (momentum, batch 2), 6 steps: the gradient passes SUM, a channel
        MEAN, REDUCE_MAX, a nearest and a bilinear resize to conv0; the generated C and the numpy
        reference end with the same bytes, and conv0 has moved."""
        from pockmcu.train import HostTrainer
        from pockmcu.training import params
        from pockmcu.training.reference import ReferenceTrainer

        c, out = _train_model(tmp_path)
        kinds = [op.kind for op in c.train.schedule]
        for k in ("REDUCE_BROADCAST_GRAD", "REDUCE_EXTREMUM_GRAD", "RESIZE_NEAREST_NEIGHBOR_GRAD",
                  "RESIZE_BILINEAR_GRAD"):
            assert k in kinds, k
        assert kinds.count("REDUCE_BROADCAST_GRAD") == 2 and "MEAN_GRAD" not in kinds
        data = _data(6, seed=4)
        host = HostTrainer(out)
        host.init(3)
        ref = ReferenceTrainer(c.train, seed=3)
        for i in range(6):
            loss_c, _, _ = host.step(data.x[i], data.y[i])
            loss_ref = ref.step(data.x[i], data.y[i])
            assert abs(loss_c - loss_ref) <= 1e-6 * max(1.0, abs(loss_ref))
        layout = params.entries(c.train)
        got = params.expand(layout, host.params(), {t: c.graph.t(t).data for t in c.train.trainable_tensors})
        for t, want in ref.params().items():
            np.testing.assert_array_equal(got[t], want, err_msg=t)
        conv_w = c.graph.ops[0].inputs[1]
        assert (got[conv_w] != c.graph.t(conv_w).data).any(), "no gradient reached conv0"

    @pytest.mark.qemu
    def test_training_on_qemu_equals_host(tmp_path):
        """One epoch of 10 samples on QEMU (Cortex-M4, FPv4) leaves the host's parameter bytes."""
        from pockmcu.train import HostTrainer, train_on_target
        from pockmcu.training import params

        c, out = _train_model(tmp_path)
        data = _data(10, seed=6)
        host = HostTrainer(out)
        host.train(data, epochs=1, seed=5, log=lambda *_: None)
        _, raw_dev, _ = train_on_target(out, "qemu-m4", data, epochs=1, seed=5, log=lambda *_: None)
        assert raw_dev == host.params()
        initial = params.pack(params.entries(c.train), {t: c.graph.t(t).data for t in c.train.trainable_tensors})
        assert raw_dev != initial


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--sanitized-run":
        sys.exit(_sanitized_main(sys.argv[2]))
    print("usage: test_reduce_resize.py --sanitized-run LIB.so", file=sys.stderr)
    sys.exit(2)
