"""onnxruntime numerics: the integer emulation of float32 arithmetic is exact.

onnxruntime requantizes with float32 operations (MLAS: RoundHalfEven(float32(float32(acc) * scale)),
QLinearAveragePool and QLinearSoftmax in float32). pockmcu reproduces them with integers only:

* pockmcu.fixedpoint_ort.requantize_ort (numpy, int64) against numpy float32 itself, on random and
  edge cases: ties (dyadic scales make acc * scale land exactly on k + 0.5), accumulators beyond
  2**24 (where float32(acc) rounds), tiny and large scales, saturation;
* the C versions (pockmcu_requantize_ort and the pockmcu_f32_* add / mul / div / rint on IEEE bit
  patterns in kernels_c/pockmcu_nn_support.h) against the same numpy float32 results, bit for bit,
  including subnormals, signed zeros, cancellation and exact ties;
* the same C checks again under AddressSanitizer + UndefinedBehaviorSanitizer.

Run standalone as `python tests/test_ort_numerics.py --sanitized-run LIB.so` (used by the sanitizer test).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from pockmcu import fixedpoint_ort as ort  # noqa: E402

KERNELS = REPO / "kernels_c"
F32 = np.float32

SHIM_C = r"""
#include "pockmcu_nn.h"
#include "pockmcu_nn_support.h"
void shim_requantize_ort(const int32_t *x, const int32_t *m, const int32_t *e, int32_t *o, int32_t n)
{ int32_t i; for (i = 0; i < n; i++) o[i] = pockmcu_requantize_ort(x[i], m[i], e[i]); }
void shim_f32_add(const uint32_t *a, const uint32_t *b, uint32_t *o, int32_t n)
{ int32_t i; for (i = 0; i < n; i++) o[i] = pockmcu_f32_add(a[i], b[i]); }
void shim_f32_mul(const uint32_t *a, const uint32_t *b, uint32_t *o, int32_t n)
{ int32_t i; for (i = 0; i < n; i++) o[i] = pockmcu_f32_mul(a[i], b[i]); }
void shim_f32_div(const uint32_t *a, const uint32_t *b, uint32_t *o, int32_t n)
{ int32_t i; for (i = 0; i < n; i++) o[i] = pockmcu_f32_div(a[i], b[i]); }
void shim_f32_rint(const uint32_t *a, int32_t *o, int32_t n)
{ int32_t i; for (i = 0; i < n; i++) o[i] = pockmcu_f32_rint(a[i]); }
void shim_f32_from_int(const int32_t *a, uint32_t *o, int32_t n)
{ int32_t i; for (i = 0; i < n; i++) o[i] = pockmcu_f32_from_int(a[i]); }
"""

def cdef() -> str:
    """cffi declarations of the shim's functions (and of kernels_c/pockmcu_nn.h, which it includes)."""
    from pockmcu.cdecl import code_declarations

    return code_declarations(SHIM_C, include_dirs=[KERNELS])



def build_shim(outdir: Path, sanitize: bool = False) -> Path:
    outdir.mkdir(parents=True, exist_ok=True)
    src = outdir / "ort_shim.c"
    src.write_text(SHIM_C)
    so = outdir / ("libort_shim_san.so" if sanitize else "libort_shim.so")
    cmd = ["gcc", "-std=c99", "-Wall", "-Wextra", "-Werror", "-Wshadow", "-fPIC", "-shared", f"-I{KERNELS}"]
    cmd += (["-O1", "-g", "-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-fno-omit-frame-pointer"]
            if sanitize else ["-O2"])
    res = subprocess.run(cmd + [str(src), "-o", str(so)], capture_output=True, text=True)
    assert res.returncode == 0 and res.stderr == "", res.stderr
    return so


class Shim:
    def __init__(self, so: Path):
        import cffi

        self.ffi = cffi.FFI()
        self.ffi.cdef(cdef())
        self.lib = self.ffi.dlopen(str(so))

    def _p(self, ctype, a):
        return self.ffi.from_buffer(ctype + "[]", a)

    def requantize_ort(self, x, m, e):
        x, m, e = (np.ascontiguousarray(v, dtype=np.int32) for v in np.broadcast_arrays(x, m, e))
        out = np.empty_like(x)
        self.lib.shim_requantize_ort(self._p("int32_t", x), self._p("int32_t", m), self._p("int32_t", e),
                                     self._p("int32_t", out), x.size)
        return out.astype(np.int64)

    def binary(self, name, a, b):
        a, b = (np.ascontiguousarray(ort.f32_bits(v)) for v in (a, b))
        out = np.empty_like(a)
        getattr(self.lib, f"shim_f32_{name}")(self._p("uint32_t", a), self._p("uint32_t", b),
                                              self._p("uint32_t", out), a.size)
        return out

    def rint(self, a):
        a = np.ascontiguousarray(ort.f32_bits(a))
        out = np.empty(a.shape, np.int32)
        self.lib.shim_f32_rint(self._p("uint32_t", a), self._p("int32_t", out), a.size)
        return out.astype(np.int64)

    def from_int(self, x):
        x = np.ascontiguousarray(x, dtype=np.int32)
        out = np.empty(x.shape, np.uint32)
        self.lib.shim_f32_from_int(self._p("int32_t", x), self._p("uint32_t", out), x.size)
        return out


# -- cases ----------------------------------------------------------------------------------------------


def requant_cases(seed: int = 0):
    """(acc, scale) pairs: random scales over 1e-9 .. 300, dyadic scales (exact ties), big accumulators."""
    rng = np.random.default_rng(seed)
    accs, scales = [], []
    for _ in range(400):
        s = F32(np.exp(rng.uniform(np.log(1e-9), np.log(300.0))))
        a = np.concatenate([rng.integers(-2**31, 2**31, 200), rng.integers(-2**26, 2**26, 200),
                            rng.integers(-5000, 5000, 200), [0, 1, -1, 2**31 - 1, -2**31, 2**24 + 1, -(2**24 + 3)]])
        k = rng.integers(-300, 300, 100)
        t = np.rint((k + 0.5) / np.float64(s)).astype(np.int64)       # near and at k + 0.5
        a = np.clip(np.concatenate([a, t - 1, t, t + 1]), -2**31, 2**31 - 1)
        accs.append(a)
        scales.append(np.full(a.size, s, F32))
    for n in range(1, 30):                                              # dyadic: odd * 2**-n, many exact ties
        s = F32(rng.integers(1, 2**20) * 2 + 1) * F32(2.0 ** -(n + 20))
        a = rng.integers(-2**27, 2**27, 2000)
        accs.append(a)
        scales.append(np.full(a.size, s, F32))
    return np.concatenate(accs).astype(np.int64), np.concatenate(scales)


def float32_requant(acc, scale):
    v = np.rint((acc.astype(F32) * scale).astype(F32)).astype(np.float64)
    return np.clip(v, -ort.ORT_SAT, ort.ORT_SAT).astype(np.int64)


def float_cases(seed: int = 1, n: int = 200_000):
    """float32 operand pairs: random bits over the finite range (subnormals, zeros, both signs), values of
    close magnitude (cancellation), and b = a's half ulp multiples (exact ties for add)."""
    rng = np.random.default_rng(seed)
    bits = rng.integers(0, 2**32, (n, 2), dtype=np.uint64).astype(np.uint32)
    bits[:, :][((bits >> 23) & 0xFF) == 0xFF] &= 0xBFFFFFFF             # no inf / NaN
    a, b = bits[:, 0].view(F32), bits[:, 1].view(F32)
    # moderate exponents (so that sums, products and quotients stay finite and meaningful)
    m = rng.integers(0, 2**23, (n, 2)).astype(np.uint32)
    e = rng.integers(60, 190, (n, 2)).astype(np.uint32)
    sgn = rng.integers(0, 2, (n, 2)).astype(np.uint32) << 31
    c = (sgn | (e << 23) | m).view(F32)
    close = c[:, 0] * F32(1) + (c[:, 0] * F32(rng.uniform(-1e-6, 1e-6, n))).astype(F32)
    sub = (rng.integers(0, 2**23, (n // 4, 2)).astype(np.uint32) | (sgn[: n // 4] & 0)).view(F32)
    ulp = np.spacing(np.abs(c[:, 0])).astype(F32)
    ties = (ulp * F32(0.5) * rng.integers(-8, 9, n).astype(F32)).astype(F32)
    xa = np.concatenate([a, c[:, 0], c[:, 0], sub[:, 0], c[:, 0], [0, -0.0, 1, 1e-45, -1e-45, 1.5, 2.5]]).astype(F32)
    xb = np.concatenate([b, c[:, 1], -close, sub[:, 1], ties, [-0.0, -0.0, 1e-45, 1e-45, 1e-45, 0.5, -0.5]]).astype(F32)
    return xa, xb


def np_op(name, a, b):
    with np.errstate(all="ignore"):
        return {"add": a + b, "mul": a * b, "div": a / b}[name].astype(F32)


def check_float_ops(shim: Shim) -> int:
    a, b = float_cases()
    checked = 0
    for name in ("add", "mul", "div"):
        want = np_op(name, a, b)
        ok = np.isfinite(want) & np.isfinite(a) & np.isfinite(b)
        if name == "div":
            ok &= b != 0
        got = shim.binary(name, a[ok], b[ok])
        exp = ort.f32_bits(want[ok])
        bad = np.flatnonzero(got != exp)
        assert bad.size == 0, (f"{name}: {bad.size} of {ok.sum()} differ, e.g. {a[ok][bad[:3]]!r} {b[ok][bad[:3]]!r} "
                               f"-> {got[bad[:3]].view(F32)!r}, want {want[ok][bad[:3]]!r}")
        checked += int(ok.sum())
    r = np.concatenate([a[np.abs(a) < 2**29], np.arange(-1000, 1000, dtype=F32) / F32(4)]).astype(F32)
    want = np.rint(r).astype(np.int64)
    assert np.array_equal(shim.rint(r), want), "rint"
    ints = np.concatenate([np.random.default_rng(3).integers(-2**31, 2**31, 100_000),
                           [0, 1, -1, 2**24 + 1, 2**31 - 1, -2**31]]).astype(np.int32)
    assert np.array_equal(shim.from_int(ints), ort.f32_bits(ints.astype(F32))), "from_int"
    return checked


def check_requantize(shim: Shim) -> None:
    acc, scale = requant_cases()
    m, e = ort.f32_mant_exp(scale)
    want = float32_requant(acc, scale)
    assert np.array_equal(shim.requantize_ort(acc, m, e), want)


# -- tests --------------------------------------------------------------------------------------------------


def test_requantize_ort_equals_float32_numpy():
    acc, scale = requant_cases()
    m, e = ort.f32_mant_exp(scale)
    assert np.array_equal(ort.f32_mant_exp(scale)[0].astype(np.float64) * 2.0 ** e, scale.astype(np.float64))
    got = ort.requantize_ort(acc, m, e)
    want = float32_requant(acc, scale)
    bad = np.flatnonzero(got != want)
    assert bad.size == 0, f"{bad.size} of {acc.size} differ: acc {acc[bad[:5]]}, scale {scale[bad[:5]]}"
    # the cases really exercise the hard parts
    prod = (acc.astype(F32) * scale).astype(F32)
    ties = np.abs(prod) < ort.ORT_SAT
    ties &= (prod - np.floor(prod)) == F32(0.5)
    assert ties.sum() > 1000, f"only {ties.sum()} exact ties"
    assert (np.abs(acc) > 2**24).sum() > 50_000
    assert (np.abs(want) == ort.ORT_SAT).sum() > 1000


def test_c_requantize_and_float32_ops_are_exact(tmp_path):
    shim = Shim(build_shim(tmp_path))
    check_requantize(shim)
    assert check_float_ops(shim) > 500_000


def test_c_emulation_under_sanitizers(tmp_path):
    from conftest import run_sanitized_checks

    run_sanitized_checks(Path(__file__), build_shim(tmp_path, sanitize=True))


def test_ort_tables_are_what_onnxruntime_computes():
    """QLinearSoftmax's table entry 255 is exp(bit_shift * s): below FLT_MAX / row by the 5 reserve bits."""
    t = ort.ort_softmax_table(0.05, 10)
    assert t.dtype == np.float32 and np.all(np.diff(t.astype(np.float64)) > 0)
    assert np.isclose(float(t[255]) * 10 * np.exp(5.0), float(np.finfo(np.float32).max), rtol=1e-5)
    assert np.array_equal(ort.ort_dequantize_table(0.1, 3), (F32(0.1) * (np.arange(-128, 128) - 3).astype(F32)))


if __name__ == "__main__" and len(sys.argv) == 3 and sys.argv[1] == "--sanitized-run":
    s = Shim(Path(sys.argv[2]))
    check_requantize(s)
    check_float_ops(s)
    print("ALL OK")


def _softmax_model(xs: float, xzp: int, ys: float, yzp: int, n: int) -> bytes:
    import onnx
    from onnx import TensorProto as T
    from onnx import helper as h

    nodes = [h.make_node("DequantizeLinear", ["x", "xs", "xz"], ["xf"]),
             h.make_node("Softmax", ["xf"], ["p"], axis=-1),
             h.make_node("QuantizeLinear", ["p", "ys", "yz"], ["y"])]
    inits = [h.make_tensor("xs", T.FLOAT, [], [xs]), h.make_tensor("xz", T.INT8, [], [xzp]),
             h.make_tensor("ys", T.FLOAT, [], [ys]), h.make_tensor("yz", T.INT8, [], [yzp])]
    g = h.make_graph(nodes, "softmax", [h.make_tensor_value_info("x", T.INT8, [None, n])],
                     [h.make_tensor_value_info("y", T.INT8, [None, n])], inits)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 13)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    return m.SerializeToString()


def test_softmax_emulation_against_onnxruntime():
    """DequantizeLinear -> Softmax -> QuantizeLinear on random int8 rows of 2..40 values, many input scales,
    output scales 1/256 and 1/255. onnxruntime fuses it into QLinearSoftmax at its default optimization level
    (emulated exactly) and runs MLAS's float Softmax at ORT_ENABLE_BASIC (emulated from an exp table; float32
    exp and summation order differ, so a few outputs may differ by 1)."""
    import onnxruntime

    level = onnxruntime.GraphOptimizationLevel
    rng = np.random.default_rng(0)
    bad = {True: 0, False: 0}
    total = 0
    for trial in range(30):
        n = int(rng.integers(2, 40))
        xs = float(F32(np.exp(rng.uniform(np.log(0.01), np.log(0.5)))))
        xzp = int(rng.integers(-20, 20))
        ys = 1 / 256 if trial % 2 else 1 / 255
        x = rng.integers(-128, 128, (400, n)).astype(np.int8)
        model = _softmax_model(xs, xzp, ys, -128, n)
        total += x.size
        for qlinear, lvl in ((True, level.ORT_ENABLE_ALL), (False, level.ORT_ENABLE_BASIC)):
            so = onnxruntime.SessionOptions()
            so.log_severity_level = 3
            so.graph_optimization_level = lvl
            want = onnxruntime.InferenceSession(model, so, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
            got = ort.ort_softmax(x, ort.ort_softmax_table(xs, n, qlinear), ys, -128, False, qlinear)
            d = np.abs(got.astype(np.int64) - want.astype(np.int64))
            assert d.max() <= 1
            bad[qlinear] += int((d > 0).sum())
    assert bad[True] == 0, f"QLinearSoftmax: {bad[True]} of {total} differ"
    assert bad[False] <= total * 1e-4, f"float Softmax: {bad[False]} of {total} differ"
