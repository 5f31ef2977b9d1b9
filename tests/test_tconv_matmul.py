"""TRANSPOSE_CONV and BATCH_MATMUL (pockmcu/ops/transpose_conv.py, pockmcu/ops/batch_matmul.py).

* Prepare and the numpy references against the TFLite Micro interpreter: single-op models with random
  shapes, strides, SAME / VALID padding (and output sizes TFLM crops), random scales, per-channel and
  per-tensor weights, bias or none, fused activations; random inputs and extreme ones (every input at
  -128 / 127, weights at +-127, biases near the int32 limits so that TFLM's accumulator wraps);
  BATCH_MATMUL with adj_x / adj_y, ranks 2 to 5, broadcast batch axes, a constant operand;
* the C kernels (kernels_c/pockmcu_transpose_conv_*.c, pockmcu_batch_matmul_*.c) against the numpy
  references (forward bit for bit; gradients to float32 rounding), and again under ASan + UBSan;
* the gradient kernels against PyTorch autograd (conv_transpose2d, matmul) on the dequantized tensors;
* the fixtures end to end: host simulation = numpy reference = TFLite Micro; an attention block
  (QK^T -> SOFTMAX -> V) compiles; a small decoder with TRANSPOSE_CONV trains (generated C = numpy
  reference byte for byte, the TRANSPOSE_CONV weights move), and the same on QEMU (Cortex-M4) = host.

Run standalone as `python tests/test_tconv_matmul.py --sanitized-run LIB.so` (used by the sanitizer test).
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

from pockmcu.ops.batch_matmul import batch_matmul_s8, matmul_shapes  # noqa: E402
from pockmcu.ops.transpose_conv import TransposeConvData, transpose_conv_pads, transpose_conv_s8  # noqa: E402

KERNELS = REPO / "kernels_c"
FUNCS = ["pockmcu_transpose_conv_s8", "pockmcu_transpose_conv_grad_input_f32",
         "pockmcu_transpose_conv_wgrad_update_s8", "pockmcu_transpose_conv_wgrad_update_s8_get_buffer_size",
         "pockmcu_batch_matmul_s8", "pockmcu_batch_matmul_grad_lhs_f32", "pockmcu_batch_matmul_grad_rhs_f32",
         "pockmcu_update_s8", "pockmcu_stochastic_round", "pockmcu_xorshift32"]
SOURCES = [KERNELS / f"{f}.c" for f in FUNCS]
F32 = np.float32


def build_lib(outdir: Path, sanitize: bool = False) -> Path:
    return build_kernel_lib(outdir / ("libtm_san.so" if sanitize else "libtm.so"), SOURCES, sanitize)


# --------------------------------------------------------------------------
# random cases (shared by the TFLM tests and the kernel checks)
# --------------------------------------------------------------------------

def tconv_case(rng, extreme: str = "") -> dict:
    """A random TRANSPOSE_CONV: shapes, stride, padding, output size, quantization, weights, bias."""
    n = int(rng.integers(1, 3))
    h, w = (int(v) for v in rng.integers(1, 6, 2))
    cin, cout = (int(v) for v in rng.integers(1, 6, 2))
    kh, kw = (int(v) for v in rng.integers(1, 5, 2))
    stride = tuple(int(v) for v in rng.integers(1, 4, 2))
    padding = "SAME" if rng.random() < 0.5 else "VALID"
    full = ((h - 1) * stride[0] + kh, (w - 1) * stride[1] + kw)
    if padding == "SAME":
        out_hw = (h * stride[0], w * stride[1])
    else:
        out_hw = full
    if rng.random() < 0.25:   # output sizes an exporter's output_padding gives: TFLM crops or leaves rows empty
        out_hw = tuple(max(1, int(o + rng.integers(-2, 3))) for o in out_hw)
    per_channel = rng.random() < 0.7
    s_in = float(F32(10 ** rng.uniform(-3, 0)))
    s_w = (10 ** rng.uniform(-3, -1, cout if per_channel else 1)).astype(F32)
    acc_scale = s_in * float(np.mean(s_w)) * 128 * np.sqrt(cin * kh * kw / (stride[0] * stride[1]))
    s_out = float(F32(acc_scale * 10 ** rng.uniform(-1.5, 0.5) / 128))
    zp_in, zp_out = (int(v) for v in rng.integers(-128, 128, 2))
    wq = rng.integers(-127, 128, (cout, kh, kw, cin)).astype(np.int8)
    bias = rng.integers(-5000, 5000, cout).astype(np.int32) if rng.random() < 0.7 else None
    x = rng.integers(-128, 128, (n, h, w, cin)).astype(np.int8)
    act = ["NONE", "RELU", "RELU6", "RELU_N1_TO_1"][int(rng.integers(0, 4))]
    if extreme:
        x[:] = -128 if extreme == "min" else 127
        wq[:] = np.where(rng.random(wq.shape) < 0.5, -127, 127)
        zp_in = 127 if extreme == "min" else -128
        if bias is not None:
            bias = np.where(rng.random(cout) < 0.5, (1 << 31) - 1 - int(rng.integers(0, 1000)),
                            -(1 << 31) + int(rng.integers(0, 1000))).astype(np.int32)
        s_out = float(F32(10 ** rng.uniform(-2, 2) * s_in))
    return dict(x=x, w=wq, bias=bias, stride=stride, padding=padding, out_hw=tuple(out_hw), s_in=s_in, s_w=s_w,
                s_out=s_out, zp_in=zp_in, zp_out=zp_out, act=act)


def tconv_prepare(c: dict) -> TransposeConvData:
    from pockmcu import fixedpoint as fp

    pads = transpose_conv_pads(c["padding"], c["out_hw"], c["w"].shape[1:3], c["stride"])
    mult, shift = fp.conv_per_channel_multipliers(c["s_in"], np.broadcast_to(c["s_w"], (c["w"].shape[0],)), c["s_out"])
    act_min, act_max = fp.activation_range(c["act"], c["s_out"], c["zp_out"])
    return TransposeConvData(pads, mult, shift, act_min, act_max)


def tconv_reference(c: dict) -> np.ndarray:
    return transpose_conv_s8(c["x"], c["zp_in"], c["w"], c["bias"], c["stride"], tconv_prepare(c), c["zp_out"],
                             c["out_hw"])


def bmm_case(rng, extreme: str = "", const: str = "") -> dict:
    """A random BATCH_MATMUL: ranks 2-5 with broadcast batch axes, adj flags, quantization (batch axes
    that merge into at most two groups, what the kernel takes; the rest is refused, tested apart)."""
    while True:
        c = _bmm_case(rng, extreme, const)
        if len(matmul_shapes(c["lhs"].shape, c["rhs"].shape, c["adj_x"], c["adj_y"])[1]) <= 2:
            return c


def _bmm_case(rng, extreme: str, const: str) -> dict:
    rows, depth, cols = (int(v) for v in rng.integers(1, 7, 3))
    nb = int(rng.integers(0, 4))
    out_b = [int(v) for v in rng.integers(1, 4, nb)]
    lb = [d if rng.random() < 0.6 else 1 for d in out_b]
    rb = [d if rng.random() < 0.6 else 1 for d in out_b]
    lb = lb[int(rng.integers(0, len(lb) + 1)):] if rng.random() < 0.3 else lb     # lower rank lhs
    adj_x, adj_y = bool(rng.integers(0, 2)), bool(rng.integers(0, 2))
    lshape = tuple(lb) + ((depth, rows) if adj_x else (rows, depth))
    rshape = tuple(rb) + ((cols, depth) if adj_y else (depth, cols))
    s_l, s_r = (float(F32(10 ** rng.uniform(-3, 0))) for _ in range(2))
    s_out = float(F32(s_l * s_r * 128 * 128 * np.sqrt(depth) * 10 ** rng.uniform(-1.5, 0.5) / 128))
    zp_l, zp_r, zp_out = (int(v) for v in rng.integers(-128, 128, 3))
    lhs = rng.integers(-128, 128, lshape).astype(np.int8)
    rhs = rng.integers(-128, 128, rshape).astype(np.int8)
    if const == "rhs":
        zp_r = 0
    if extreme:
        v, z = (-128, 127) if extreme == "min" else (127, -128)
        lhs[:], rhs[:] = v, v
        zp_l, zp_r = z, z if const != "rhs" else 0
        s_out = float(F32(s_l * s_r * 10 ** rng.uniform(0, 5)))
    return dict(lhs=lhs, rhs=rhs, adj_x=adj_x, adj_y=adj_y, s_l=s_l, s_r=s_r, s_out=s_out, zp_l=zp_l, zp_r=zp_r,
                zp_out=zp_out, const=const)


def bmm_prepare(c: dict) -> tuple[int, int]:
    from pockmcu import fixedpoint as fp

    return fp.fc_per_tensor_multiplier(c["s_l"], c["s_r"], c["s_out"])


def bmm_reference(c: dict) -> np.ndarray:
    mult, shift = bmm_prepare(c)
    return batch_matmul_s8(c["lhs"], c["rhs"], c["zp_l"], c["zp_r"], c["adj_x"], c["adj_y"], mult, shift, c["zp_out"])


# --------------------------------------------------------------------------
# the C kernels through cffi
# --------------------------------------------------------------------------

class K:
    def __init__(self, so: Path):
        import cffi

        self.ffi = cffi.FFI()
        self.ffi.cdef(kernel_cdef())
        self.lib = self.ffi.dlopen(str(so))
        self.keep = []

    def dims(self, shape):
        s = [int(d) for d in shape]
        s = [1] * (4 - len(s)) + s
        d = self.ffi.new("cmsis_nn_dims *", {"n": s[0], "h": s[1], "w": s[2], "c": s[3]})
        return d

    def buf(self, ctype, arr):
        self.keep.append(arr)
        return self.ffi.from_buffer(ctype, arr)

    def conv_params(self, in_off, out_off, stride, pads, act=(-128, 127)):
        return self.ffi.new("cmsis_nn_conv_params *", {
            "input_offset": in_off, "output_offset": out_off, "stride": {"h": stride[0], "w": stride[1]},
            "padding": {"h": pads[0], "w": pads[1]}, "dilation": {"h": 1, "w": 1},
            "activation": {"min": act[0], "max": act[1]}})

    def tconv(self, c: dict) -> tuple[int, np.ndarray]:
        p = tconv_prepare(c)
        x, w = np.ascontiguousarray(c["x"]), np.ascontiguousarray(c["w"])
        n, cout = x.shape[0], w.shape[0]
        y = np.full((n,) + c["out_hw"] + (cout,), 99, np.int8)
        mult = np.ascontiguousarray(p.multiplier, np.int32)
        shift = np.ascontiguousarray(p.shift, np.int32)
        q = self.ffi.new("cmsis_nn_per_channel_quant_params *", {"multiplier": self.buf("int32_t[]", mult),
                                                                  "shift": self.buf("int32_t[]", shift)})
        bias = self.buf("int32_t[]", np.ascontiguousarray(c["bias"])) if c["bias"] is not None else self.ffi.NULL
        st = self.lib.pockmcu_transpose_conv_s8(
            self.conv_params(-c["zp_in"], c["zp_out"], c["stride"], p.pads, (p.act_min, p.act_max)), q,
            self.dims(x.shape), self.buf("int8_t[]", x), self.dims(w.shape), self.buf("int8_t[]", w),
            self.dims((1, 1, 1, cout)), bias, self.dims(y.shape), self.buf("int8_t[]", y))
        return st, y

    def tconv_grad_input(self, c: dict, dz: np.ndarray) -> np.ndarray:
        p = tconv_prepare(c)
        x, w = c["x"], np.ascontiguousarray(c["w"])
        dz = np.ascontiguousarray(dz, F32)
        dx = np.full(x.shape, np.nan, F32)
        scales = np.ascontiguousarray(np.broadcast_to(c["s_w"], (w.shape[0],)), F32)
        st = self.lib.pockmcu_transpose_conv_grad_input_f32(
            self.conv_params(-c["zp_in"], c["zp_out"], c["stride"], p.pads), self.dims(x.shape), self.dims(w.shape),
            self.buf("int8_t[]", w), self.buf("float[]", scales), self.dims(dz.shape), self.buf("float[]", dz),
            self.buf("float[]", dx))
        assert st == 0
        return dx

    def tconv_wgrad_accum(self, c: dict, dz: np.ndarray) -> np.ndarray:
        """The raw weight gradient sums, read from the accumulator of an accumulate-only call (coef 1)."""
        p = tconv_prepare(c)
        x, w = np.ascontiguousarray(c["x"]), c["w"].copy()
        dz = np.ascontiguousarray(dz, F32)
        accum = np.zeros(w.size, F32)
        size = self.lib.pockmcu_transpose_conv_wgrad_update_s8_get_buffer_size(self.dims(x.shape), self.dims(w.shape))
        scratch = np.zeros(size, np.uint8)
        ctx = self.ffi.new("cmsis_nn_context *", {"buf": self.buf("uint8_t[]", scratch), "size": size})
        opt = self.ffi.new("pockmcu_optimizer *", {"lr": 0.1, "momentum": 0.0, "batch": 2, "apply": 0})
        rng = self.ffi.new("uint32_t *", 1)
        coef = np.ones(w.shape[0], F32)
        st = self.lib.pockmcu_transpose_conv_wgrad_update_s8(
            ctx, self.conv_params(-c["zp_in"], c["zp_out"], c["stride"], p.pads), self.dims(x.shape),
            self.buf("int8_t[]", x), self.dims(w.shape), self.buf("int8_t[]", w), 0, self.dims(dz.shape),
            self.buf("float[]", dz), self.buf("float[]", coef), self.buf("float[]", accum), self.ffi.NULL, opt, rng)
        assert st == 0 and np.array_equal(w, c["w"]), "an accumulate-only call changes no weight"
        return accum.reshape(w.shape)

    def bmm_views(self, c: dict):
        out_shape, groups, rows, depth, cols = matmul_shapes(c["lhs"].shape, c["rhs"].shape, c["adj_x"], c["adj_y"])
        from pockmcu.ops.batch_matmul import _dims4

        ld = _dims4(groups, (depth, rows) if c["adj_x"] else (rows, depth), 1)
        rd = _dims4(groups, (cols, depth) if c["adj_y"] else (depth, cols), 2)
        od = _dims4(groups, (rows, cols), 0)
        return out_shape, self.dims(ld), self.dims(rd), self.dims(od)

    def bmm(self, c: dict) -> tuple[int, np.ndarray]:
        mult, shift = bmm_prepare(c)
        out_shape, ld, rd, od = self.bmm_views(c)
        y = np.full(out_shape, 99, np.int8)
        fc = self.ffi.new("cmsis_nn_fc_params *", {"input_offset": -c["zp_l"], "filter_offset": -c["zp_r"],
                                                   "output_offset": c["zp_out"],
                                                   "activation": {"min": -128, "max": 127}})
        q = self.ffi.new("cmsis_nn_per_tensor_quant_params *", {"multiplier": mult, "shift": shift})
        st = self.lib.pockmcu_batch_matmul_s8(fc, int(c["adj_x"]), int(c["adj_y"]), q, ld,
                                              self.buf("int8_t[]", np.ascontiguousarray(c["lhs"])), rd,
                                              self.buf("int8_t[]", np.ascontiguousarray(c["rhs"])), od,
                                              self.buf("int8_t[]", y))
        return st, y

    def bmm_grads(self, c: dict, dz: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        _, ld, rd, od = self.bmm_views(c)
        dz = np.ascontiguousarray(dz, F32)
        dl = np.full(c["lhs"].shape, np.nan, F32)
        dr = np.full(c["rhs"].shape, np.nan, F32)
        lhs, rhs = np.ascontiguousarray(c["lhs"]), np.ascontiguousarray(c["rhs"])
        a = self.lib.pockmcu_batch_matmul_grad_lhs_f32(int(c["adj_x"]), int(c["adj_y"]), ld, rd,
                                                       self.buf("int8_t[]", rhs), float(F32(c["s_r"])), -c["zp_r"], od,
                                                       self.buf("float[]", dz), self.buf("float[]", dl))
        b = self.lib.pockmcu_batch_matmul_grad_rhs_f32(int(c["adj_x"]), int(c["adj_y"]), ld,
                                                       self.buf("int8_t[]", lhs), float(F32(c["s_l"])), -c["zp_l"],
                                                       rd, od, self.buf("float[]", dz), self.buf("float[]", dr))
        assert a == 0 and b == 0
        return dl, dr


# --------------------------------------------------------------------------
# float references of the gradients (float64, the numpy side of training)
# --------------------------------------------------------------------------

def tconv_grads_f64(c: dict, dz: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(dx real, raw weight-gradient sums dz * (x - zp)) in float64, by the ops' own references."""
    from pockmcu.ops.transpose_conv import _gathered_grad

    p = tconv_prepare(c)
    w = c["w"].astype(np.float64) * np.broadcast_to(c["s_w"], (c["w"].shape[0],)).astype(np.float64)[:, None, None, None]
    dz = dz.astype(np.float64)
    x = c["x"]
    dx = np.zeros(x.shape)
    raw = np.zeros(c["w"].shape)
    xc = (x.astype(np.float64) - c["zp_in"]).reshape(-1, x.shape[-1])
    for ky in range(w.shape[1]):
        for kx in range(w.shape[2]):
            d = _gathered_grad(dz, x.shape[1:3], c["stride"], p.pads, ky, kx)
            dx += d @ w[:, ky, kx, :]
            raw[:, ky, kx, :] = d.reshape(-1, d.shape[-1]).T @ xc
    return dx, raw


def check_tconv_kernel(k: K, rng, n: int) -> None:
    for i in range(n):
        c = tconv_case(rng, extreme=["", "", "min", "max"][i % 4])
        st, got = k.tconv(c)
        assert st == 0
        np.testing.assert_array_equal(got, tconv_reference(c), err_msg=str(i))


def check_tconv_grad_kernels(k: K, rng, n: int) -> None:
    for i in range(n):
        c = tconv_case(rng)
        dz = rng.standard_normal((c["x"].shape[0],) + c["out_hw"] + (c["w"].shape[0],)).astype(F32)
        dz[rng.random(dz.shape) < 0.2] = 0.0
        want_dx, want_raw = tconv_grads_f64(c, dz)
        got_dx = k.tconv_grad_input(c, dz)
        got_raw = k.tconv_wgrad_accum(c, dz)
        np.testing.assert_allclose(got_dx, want_dx, rtol=1e-5, atol=1e-5 * (1 + np.abs(want_dx).max()))
        np.testing.assert_allclose(got_raw, want_raw, rtol=1e-5, atol=1e-5 * (1 + np.abs(want_raw).max()))


def bmm_grads_f64(c: dict, dz: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    lr = c["s_l"] * (c["lhs"].astype(np.float64) - c["zp_l"])
    rr = c["s_r"] * (c["rhs"].astype(np.float64) - c["zp_r"])
    rank = max(lr.ndim, rr.ndim)
    lr = lr.reshape((1,) * (rank - lr.ndim) + lr.shape)
    rr = rr.reshape((1,) * (rank - rr.ndim) + rr.shape)
    lm = np.swapaxes(lr, -1, -2) if c["adj_x"] else lr
    rm = np.swapaxes(rr, -1, -2) if c["adj_y"] else rr
    dl = dz.astype(np.float64) @ np.swapaxes(rm, -1, -2)
    dr = np.swapaxes(lm, -1, -2) @ dz.astype(np.float64)
    dl = np.swapaxes(dl, -1, -2) if c["adj_x"] else dl
    dr = np.swapaxes(dr, -1, -2) if c["adj_y"] else dr

    def sum_to(d, shape):
        d = d.sum(axis=tuple(range(d.ndim - len(shape)))) if d.ndim > len(shape) else d
        axes = tuple(i for i, s in enumerate(shape) if s == 1 and d.shape[i] != 1)
        return d.sum(axis=axes, keepdims=True) if axes else d
    return sum_to(dl, c["lhs"].shape).reshape(c["lhs"].shape), sum_to(dr, c["rhs"].shape).reshape(c["rhs"].shape)


def check_bmm_kernel(k: K, rng, n: int) -> None:
    for i in range(n):
        c = bmm_case(rng, extreme=["", "", "min", "max"][i % 4])
        st, got = k.bmm(c)
        assert st == 0
        np.testing.assert_array_equal(got, bmm_reference(c), err_msg=str(i))


def check_bmm_grad_kernels(k: K, rng, n: int) -> None:
    for _ in range(n):
        c = bmm_case(rng)
        out_shape = matmul_shapes(c["lhs"].shape, c["rhs"].shape, c["adj_x"], c["adj_y"])[0]
        dz = rng.standard_normal(out_shape).astype(F32)
        got_l, got_r = k.bmm_grads(c, dz)
        want_l, want_r = bmm_grads_f64(c, dz)
        for got, want in ((got_l, want_l), (got_r, want_r)):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * (1 + np.abs(want).max()))


CHECKS = {"tconv": (check_tconv_kernel, 300), "tconv_grad": (check_tconv_grad_kernels, 80),
          "bmm": (check_bmm_kernel, 300), "bmm_grad": (check_bmm_grad_kernels, 120)}


def _sanitized_main(so: str) -> int:
    k = K(Path(so))
    for name, (fn, n) in CHECKS.items():
        fn(k, np.random.default_rng(zlib.crc32(name.encode())), n // 3)
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

    def _make_fixtures():
        import importlib.util

        if "make_fixtures" not in sys.modules:
            spec = importlib.util.spec_from_file_location("make_fixtures", REPO / "tests" / "fixtures" / "make_fixtures.py")
            mod = importlib.util.module_from_spec(spec)
            sys.modules["make_fixtures"] = mod
            spec.loader.exec_module(mod)
        return sys.modules["make_fixtures"]

    ACT_CODES = {"NONE": 0, "RELU": 1, "RELU_N1_TO_1": 2, "RELU6": 3}

    def tconv_model(c: dict) -> bytes:
        import tflite

        b = _make_fixtures().TFLiteBuilder()
        x = c["x"]
        cout = c["w"].shape[0]
        out_shape = (x.shape[0],) + c["out_hw"] + (cout,)
        shp = b.add_tensor("tconv0/output_shape", (4,), "int32", data=np.array(out_shape, np.int32))
        per_channel = c["s_w"].size > 1
        w = b.add_tensor("tconv0/weights", c["w"].shape, "int8", list(c["s_w"]), [0] * c["s_w"].size,
                         quantized_dimension=0, data=c["w"])
        xi = b.add_tensor("input", x.shape, "int8", [c["s_in"]], [c["zp_in"]])
        ins = [shp, w, xi]
        if c["bias"] is not None:
            bs = [float(F32(c["s_in"] * s)) for s in np.broadcast_to(c["s_w"], (cout,) if per_channel else (1,))]
            ins.append(b.add_tensor("tconv0/bias", (cout,), "int32", bs, [0] * len(bs), data=c["bias"]))
        y = b.add_tensor("tconv0/out", out_shape, "int8", [c["s_out"]], [c["zp_out"]])
        b.add_op("TRANSPOSE_CONV", ins, [y], "TransposeConvOptions", dict(
            Padding=tflite.Padding.SAME if c["padding"] == "SAME" else tflite.Padding.VALID,
            StrideH=c["stride"][0], StrideW=c["stride"][1], FusedActivationFunction=ACT_CODES[c["act"]]))
        b.set_io([xi], [y])
        return b.serialize()

    def bmm_model(c: dict) -> bytes:
        out_shape = matmul_shapes(c["lhs"].shape, c["rhs"].shape, c["adj_x"], c["adj_y"])[0]
        b = _make_fixtures().TFLiteBuilder()
        lhs = b.add_tensor("lhs", c["lhs"].shape, "int8", [c["s_l"]], [c["zp_l"]])
        rhs = b.add_tensor("rhs", c["rhs"].shape, "int8", [c["s_r"]], [c["zp_r"]],
                           data=c["rhs"] if c["const"] == "rhs" else None)
        y = b.add_tensor("bmm0/out", out_shape, "int8", [c["s_out"]], [c["zp_out"]])
        b.add_op("BATCH_MATMUL", [lhs, rhs], [y], "BatchMatMulOptions", dict(AdjX=c["adj_x"], AdjY=c["adj_y"]))
        b.set_io([lhs] if c["const"] == "rhs" else [lhs, rhs], [y])
        return b.serialize()

    def _tflm(buf: bytes, *xs) -> np.ndarray:
        from tflite_micro.python.tflite_micro import runtime

        it = runtime.Interpreter.from_bytes(buf, arena_size=1 << 20)
        for i, x in enumerate(xs):
            it.set_input(x, i)
        it.invoke()
        return it.get_output(0)

    def _compiled_reference(buf: bytes, tmp_path: Path, *xs) -> np.ndarray:
        """The model through pockmcu's frontend, Prepare and numpy reference."""
        from pockmcu.compiler import load_and_check
        from pockmcu.reference import run_reference

        path = tmp_path / "m.tflite"
        path.write_bytes(buf)
        g = load_and_check(path)
        return run_reference(g, *xs)[0]

    def test_transpose_conv_reference_equals_tflm(tmp_path):
        """Random and extreme cases: the numpy reference (alone, and through the frontend and Prepare)
        equals TFLite Micro; the sample covers strides 1 to 3, SAME and VALID, cropped outputs,
        per-channel and per-tensor weights, no bias, every fused activation, wrapping accumulators."""
        rng = np.random.default_rng(12)
        seen, n = set(), 0
        for i in range(160):
            c = tconv_case(rng, extreme=["", "", "", "min", "max"][i % 5])
            buf = tconv_model(c)
            want = _tflm(buf, c["x"]) if c["x"].shape[0] == 1 else np.concatenate(
                [_tflm(buf_b, c["x"][j:j + 1]) for j, buf_b in enumerate([tconv_model(dict(c, x=c["x"][j:j + 1]))
                                                                          for j in range(c["x"].shape[0])])])
            np.testing.assert_array_equal(tconv_reference(c), want, err_msg=str(i))
            if c["x"].shape[0] == 1:
                np.testing.assert_array_equal(_compiled_reference(buf, tmp_path, c["x"]), want, err_msg=str(i))
            n += 1
            full = ((c["x"].shape[1] - 1) * c["stride"][0] + c["w"].shape[1])
            seen |= {k for k, on in (
                ("stride2", 2 in c["stride"]), ("stride1", c["stride"] == (1, 1)), ("same", c["padding"] == "SAME"),
                ("valid", c["padding"] == "VALID"), ("per_tensor", c["s_w"].size == 1), ("no_bias", c["bias"] is None),
                ("per_channel", c["s_w"].size > 1), ("relu6", c["act"] == "RELU6"),
                ("cropped", c["out_hw"][0] < full - 2 * tconv_prepare(c).pads[0]),
                ("wrapped", c["bias"] is not None and np.abs(c["bias"].astype(np.int64)).max() > 2**30),
                ("saturated", (want == 127).any() or (want == -128).any())) if on}
        assert n == 160
        assert seen >= {"stride1", "stride2", "same", "valid", "per_tensor", "per_channel", "no_bias", "relu6",
                        "cropped", "wrapped", "saturated"}, seen

    def test_batch_matmul_reference_equals_tflm(tmp_path):
        """Random and extreme cases, adj flags, ranks 2 to 5, broadcast batch axes, two activations or a
        constant rhs: numpy reference (and frontend + Prepare + reference) == TFLite Micro."""
        rng = np.random.default_rng(13)
        seen = set()
        for i in range(200):
            c = bmm_case(rng, extreme=["", "", "", "min", "max"][i % 5], const="rhs" if i % 3 == 0 else "")
            buf = bmm_model(c)
            xs = [c["lhs"]] if c["const"] else [c["lhs"], c["rhs"]]
            want = _tflm(buf, *xs)
            np.testing.assert_array_equal(bmm_reference(c), want, err_msg=str(i))
            if all(x.shape[0] == 1 for x in xs):    # pockmcu compiles models whose inputs have batch 1
                got = _compiled_reference(buf, tmp_path, *[x.reshape((-1,) + x.shape[1:]) for x in xs])
                np.testing.assert_array_equal(got.reshape(want.shape), want, err_msg=str(i))
            seen |= {k for k, on in (("adj_x", c["adj_x"]), ("adj_y", c["adj_y"]), ("const", bool(c["const"])),
                                     ("rank5", max(c["lhs"].ndim, c["rhs"].ndim) == 5),
                                     ("rank_differs", c["lhs"].ndim != c["rhs"].ndim),
                                     ("broadcast", c["lhs"].shape[:-2] != c["rhs"].shape[:-2]),
                                     ("saturated", (want == 127).any() or (want == -128).any())) if on}
        assert seen >= {"adj_x", "adj_y", "const", "rank5", "rank_differs", "broadcast", "saturated"}, seen

    @pytest.fixture(scope="module")
    def kern(tmp_path_factory):
        return K(build_lib(tmp_path_factory.mktemp("tm")))

    @pytest.mark.parametrize("name", list(CHECKS))
    def test_kernels_equal_reference(kern, name):
        fn, n = CHECKS[name]
        fn(kern, np.random.default_rng(zlib.crc32(name.encode())), n)

    def test_sanitized_build(tmp_path):
        """ASan + UBSan build of the kernels, exercised by the same checks."""
        from conftest import run_sanitized_checks

        run_sanitized_checks(__file__, build_lib(tmp_path, sanitize=True))

    def test_transpose_conv_gradients_equal_torch(kern):
        """Input gradient and raw weight gradient against PyTorch autograd of conv_transpose2d on the
        dequantized tensors (float64): TFLite's padding is the top/left crop of the full output."""
        import torch

        torch.set_num_threads(1)
        rng = np.random.default_rng(21)
        for _ in range(40):
            c = tconv_case(rng)
            p = tconv_prepare(c)
            x, w = c["x"], c["w"]
            n, h, wd, cin = x.shape
            cout, kh, kw, _ = w.shape
            s_w = np.broadcast_to(c["s_w"], (cout,)).astype(np.float64)
            xr = torch.tensor(c["s_in"] * (x.astype(np.float64) - c["zp_in"]), requires_grad=True)
            wr = torch.tensor(w.astype(np.float64) * s_w[:, None, None, None], requires_grad=True)
            # conv_transpose2d: input NCHW, weight [C_in, C_out, KH, KW]; its full output, then TFLite's crop
            full = torch.nn.functional.conv_transpose2d(xr.permute(0, 3, 1, 2), wr.permute(3, 0, 1, 2),
                                                        stride=c["stride"])
            oh, ow = c["out_hw"]
            top, left = p.pads
            fh, fw = full.shape[2], full.shape[3]
            padded = torch.nn.functional.pad(full, (0, max(ow + left - fw, 0), 0, max(oh + top - fh, 0)))
            y = padded[:, :, top:top + oh, left:left + ow]      # out[oy] = full[oy + top] (0 past its end)
            dz = rng.standard_normal((n, oh, ow, cout))
            y.backward(torch.tensor(dz).permute(0, 3, 1, 2))
            got_dx = kern.tconv_grad_input(c, dz.astype(F32))
            got_raw = kern.tconv_wgrad_accum(c, dz.astype(F32))
            want_dx = xr.grad.numpy()
            want_raw = wr.grad.numpy() / c["s_in"]          # the kernel sums dz * (x_q - zp) = G_W / s_x
            np.testing.assert_allclose(got_dx, want_dx, rtol=1e-4, atol=1e-5 * (1 + np.abs(want_dx).max()))
            np.testing.assert_allclose(got_raw, want_raw, rtol=1e-4, atol=1e-5 * (1 + np.abs(want_raw).max()))

    def test_batch_matmul_gradients_equal_torch(kern):
        """Both gradient kernels against PyTorch autograd of torch.matmul (with transposes and
        broadcasting) on the dequantized operands, float64."""
        import torch

        torch.set_num_threads(1)
        rng = np.random.default_rng(22)
        for _ in range(60):
            c = bmm_case(rng)
            lt = torch.tensor(c["s_l"] * (c["lhs"].astype(np.float64) - c["zp_l"]), requires_grad=True)
            rt = torch.tensor(c["s_r"] * (c["rhs"].astype(np.float64) - c["zp_r"]), requires_grad=True)
            y = torch.matmul(lt.transpose(-1, -2) if c["adj_x"] else lt, rt.transpose(-1, -2) if c["adj_y"] else rt)
            dz = rng.standard_normal(tuple(y.shape))
            y.backward(torch.tensor(dz))
            got_l, got_r = kern.bmm_grads(c, dz.astype(F32))
            for got, want in ((got_l, lt.grad.numpy()), (got_r, rt.grad.numpy())):
                np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5 * (1 + np.abs(want).max()))

    def test_graph_gradient_references_equal_torch():
        """The ops' numpy gradient references (what the reference trainer runs) against torch too."""
        import torch

        from pockmcu.ir import Graph, Op, Quant, Tensor
        from pockmcu.ops.batch_matmul import BatchMatMulGradLhs, BatchMatMulGradRhs, MatMulGrad

        rng = np.random.default_rng(23)
        for _ in range(30):
            c = bmm_case(rng)
            if c["lhs"].ndim < 3:
                continue
            q = lambda s, z: Quant(np.array([s], F32), np.array([z], np.int32))  # noqa: E731
            out_shape = matmul_shapes(c["lhs"].shape, c["rhs"].shape, c["adj_x"], c["adj_y"])[0]
            from pockmcu.ops.batch_matmul import BatchMatMulOptions

            g = Graph(tensors={"l": Tensor("l", c["lhs"].shape, "int8", q(c["s_l"], c["zp_l"])),
                               "r": Tensor("r", c["rhs"].shape, "int8", q(c["s_r"], c["zp_r"])),
                               "y": Tensor("y", out_shape, "int8", q(1.0, 0))}, ops=[], inputs=["l", "r"],
                      outputs=["y"])
            f = Op("BATCH_MATMUL", "bmm", ["l", "r"], ["y"], options=BatchMatMulOptions(c["adj_x"], c["adj_y"]))
            dz = rng.standard_normal(out_shape)
            rank = len(out_shape)
            dl = BatchMatMulGradLhs().reference(g, Op("X", "gl", [], [], options=MatMulGrad(f)),
                                               [dz.reshape((-1,) + out_shape[1:]), c["rhs"]])[0]
            dr = BatchMatMulGradRhs().reference(g, Op("X", "gr", [], [], options=MatMulGrad(f)),
                                               [dz.reshape((-1,) + out_shape[1:]), c["lhs"]])[0]
            lt = torch.tensor(c["s_l"] * (c["lhs"].astype(np.float64) - c["zp_l"]), requires_grad=True)
            rt = torch.tensor(c["s_r"] * (c["rhs"].astype(np.float64) - c["zp_r"]), requires_grad=True)
            y = torch.matmul(lt.transpose(-1, -2) if c["adj_x"] else lt, rt.transpose(-1, -2) if c["adj_y"] else rt)
            y.backward(torch.tensor(dz))
            assert rank >= 3
            np.testing.assert_allclose(dl.reshape(c["lhs"].shape), lt.grad.numpy(), rtol=1e-10, atol=1e-12)
            np.testing.assert_allclose(dr.reshape(c["rhs"].shape), rt.grad.numpy(), rtol=1e-10, atol=1e-12)


    FIXTURE_NAMES = ["tconv_3x3_s2_same_relu", "tconv_2x2_s2_valid_pertensor_nobias", "tconv_3x3_s1_same_odd",
                     "tconv_4x3_s2x1_valid_cropped", "tconv_autoencoder", "bmm_adj_y_two_inputs",
                     "bmm_adj_x_broadcast_rank5", "bmm_const_rhs", "attention_block", "bmm_gram_train"]

    @pytest.mark.parametrize("name", FIXTURE_NAMES)
    def test_fixture_host_reference_tflm(name, generated):
        """The generated C (host simulation) = numpy reference = TFLite Micro, on random and on
        extreme inputs (all -128, all 127)."""
        from pockmcu.reference import run_reference
        from pockmcu.sim import load

        model = FIXTURES / f"{name}.tflite"
        gen = generated(model)
        xs = gen.inputs(6, seed=zlib.crc32(name.encode()))
        for k, x in enumerate(xs):
            x[0] = -128
            x[1] = 127
            x[2] = -128 if k % 2 else 127
        want = tflm_run(model, *xs)
        got = load(gen.out).invoke(*xs)
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(run_reference(gen.compiled.graph, *xs)[0].reshape(want.shape), want)
        assert len(np.unique(want)) > 3
        kinds = {op.kind for op in gen.compiled.graph.ops}
        assert kinds & {"TRANSPOSE_CONV", "BATCH_MATMUL"}

    def test_refusals_are_one_line(tmp_path):
        """What TFLite Micro or the kernel cannot run is refused with one line and exit 2: an int64 bias
        on an int8 TRANSPOSE_CONV, a BATCH_MATMUL whose batch axes broadcast in three alternating groups."""
        import tflite
        from test_errors import pockmcu

        b = _make_fixtures().TFLiteBuilder()
        w = np.ones((3, 3, 3, 2), np.int8)
        ins = [b.add_tensor("tconv0/output_shape", (4,), "int32", data=np.array([1, 8, 8, 3], np.int32)),
               b.add_tensor("tconv0/weights", w.shape, "int8", [0.01], [0], data=w),
               b.add_tensor("input", (1, 4, 4, 2), "int8", [0.02], [0]),
               b.add_tensor("tconv0/bias", (3,), "int64", [0.0002], [0], data=np.arange(3))]
        y = b.add_tensor("tconv0/out", (1, 8, 8, 3), "int8", [0.05], [0])
        b.add_op("TRANSPOSE_CONV", ins, [y], "TransposeConvOptions", dict(Padding=tflite.Padding.SAME, StrideH=2,
                                                                           StrideW=2))
        b.set_io([ins[2]], [y])
        (tmp_path / "t.tflite").write_bytes(b.serialize())
        b = _make_fixtures().TFLiteBuilder()
        lhs = b.add_tensor("lhs", (2, 1, 2, 3, 4), "int8", [0.1], [0])
        rhs = b.add_tensor("rhs", (1, 3, 1, 4, 5), "int8", [0.1], [0])
        y = b.add_tensor("bmm0/out", (2, 3, 2, 3, 5), "int8", [0.5], [0])
        b.add_op("BATCH_MATMUL", [lhs, rhs], [y], "BatchMatMulOptions", dict(AdjX=False, AdjY=False))
        b.set_io([lhs, rhs], [y])
        (tmp_path / "b.tflite").write_bytes(b.serialize())
        assert len(matmul_shapes((2, 1, 2, 3, 4), (1, 3, 1, 4, 5), False, False)[1]) == 3
        for name, what in (("t", "int64"), ("b", "alternating groups")):
            r = pockmcu("gen", tmp_path / f"{name}.tflite", "--ram", "256KB", "-o", tmp_path / name)
            assert r.returncode == 2 and what in r.stderr, r.stderr
            assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr

    AUTOENCODER = FIXTURES / "tconv_autoencoder.tflite"
    SPEC = {"bias": "all", "weights": [{"layer": 2, "ratio": 1.0}, {"layer": 3, "ratio": 0.5}, {"layer": 1, "ratio": 1.0}],
            "optimizer": {"kind": "momentum", "lr": 0.05, "momentum": 0.5}, "batch": 2}

    def _autoencoder(tmp_path, spec=SPEC):
        from pockmcu.codegen import write_project
        from pockmcu.compiler import TrainOptions, compile_model

        c = compile_model(AUTOENCODER, ram=512 * 1024, train=TrainOptions(spec=json.dumps(spec), loss="mse"))
        return c, write_project(c, tmp_path / "ae")

    def _ae_data(n, seed):
        from pockmcu.train import Data

        rng = np.random.default_rng(seed)
        x = rng.integers(-128, 128, (n, 8, 8, 3)).astype(np.int8)
        target = (0.02 * x.astype(np.float32)).astype(np.float32)      # reconstruct the input
        return Data(x, target)

    def test_autoencoder_training_c_equals_reference(tmp_path):
        """The decoder's TRANSPOSE_CONV weights (one fully, one on half its input channels) and biases and
        the encoder's last conv train (momentum, batch 2, MSE), 6 steps: generated C and numpy reference
        end with the same parameter bytes and losses; the TRANSPOSE_CONV weights moved."""
        from pockmcu.train import HostTrainer
        from pockmcu.training import params
        from pockmcu.training.reference import ReferenceTrainer

        c, out = _autoencoder(tmp_path)
        kinds = [op.kind for op in c.train.schedule]
        assert kinds.count("TRANSPOSE_CONV_WGRAD_UPDATE") == 2 and "TRANSPOSE_CONV_GRAD_INPUT" in kinds
        assert "CONV_2D_WGRAD_UPDATE" in kinds
        data = _ae_data(6, seed=4)
        host = HostTrainer(out)
        host.init(3)
        ref = ReferenceTrainer(c.train, seed=3)
        for i in range(6):
            loss_c, _, _ = host.step(data.x[i], data.y[i])
            loss_ref = ref.step(data.x[i], data.y[i])
            assert abs(loss_c - loss_ref) <= 1e-5 * max(1.0, abs(loss_ref)), (i, loss_c, loss_ref)
        layout = params.entries(c.train)
        got = params.expand(layout, host.params(), {t: c.graph.t(t).data for t in c.train.trainable_tensors})
        for t, want in ref.params().items():
            np.testing.assert_array_equal(got[t], want, err_msg=t)
        tconvs = [op for op in c.graph.ops if op.kind == "TRANSPOSE_CONV"]
        for op in tconvs:
            w = op.inputs[1]
            assert (got[w] != c.graph.t(w).data).any(), f"{op.name} weights did not move"
        half = c.graph.t(tconvs[1].inputs[1])
        k = -(-half.shape[-1] // 2)
        np.testing.assert_array_equal(got[half.name][..., k:], half.data[..., k:])   # frozen channels stay

    def test_autoencoder_training_lowers_loss(tmp_path):
        """A few host epochs of the decoder on a fixed reconstruction set lower the MSE."""
        from pockmcu.train import HostTrainer

        spec = {"bias": "all", "weights": "all", "optimizer": {"kind": "momentum", "lr": 0.02, "momentum": 0.9}}
        _, out = _autoencoder(tmp_path, spec)
        data = _ae_data(16, seed=9)
        host = HostTrainer(out)
        host.init(1)
        losses = []
        for _ in range(8):
            losses.append(np.mean([host.step(data.x[i], data.y[i])[0] for i in range(len(data.x))]))
        assert losses[-1] < 0.9 * losses[0] and losses[-1] == min(losses), losses

    def test_autoencoder_training_on_qemu_equals_host(tmp_path):
        """One epoch of 8 samples on QEMU (Cortex-M4, FPv4) leaves the host's parameter bytes."""
        from pockmcu.train import HostTrainer, train_on_target
        from pockmcu.training import params

        c, out = _autoencoder(tmp_path)
        data = _ae_data(8, seed=6)
        host = HostTrainer(out)
        host.train(data, epochs=1, seed=5, log=lambda *_: None)
        _, raw_dev, _ = train_on_target(out, "qemu-m4", data, epochs=1, seed=5, log=lambda *_: None)
        assert raw_dev == host.params()
        initial = params.pack(params.entries(c.train), {t: c.graph.t(t).data for t in c.train.trainable_tensors})
        assert raw_dev != initial


    def test_training_through_batch_matmul_c_equals_reference(tmp_path):
        """conv0 -> RESHAPE -> Gram matrix (BATCH_MATMUL of one activation with itself, adj_x) -> BATCH_MATMUL
        with a constant: the conv before them trains (SGD with momentum, MSE), 5 steps; the gradient reaches
        it through both operands of the Gram product (summed) and the constant product; generated C and
        numpy reference end with the same parameter bytes, and the conv weights moved."""
        from pockmcu.codegen import write_project
        from pockmcu.compiler import TrainOptions, compile_model
        from pockmcu.train import HostTrainer
        from pockmcu.training import params
        from pockmcu.training.reference import ReferenceTrainer

        spec = {"bias": "all", "weights": "all", "optimizer": {"kind": "momentum", "lr": 0.05, "momentum": 0.5}}
        c = compile_model(FIXTURES / "bmm_gram_train.tflite", ram=512 * 1024,
                          train=TrainOptions(spec=json.dumps(spec), loss="mse"))
        kinds = [op.kind for op in c.train.schedule]
        assert kinds.count("BATCH_MATMUL_GRAD_LHS") == 2 and kinds.count("BATCH_MATMUL_GRAD_RHS") == 1
        assert "ADD_F32" in kinds and "CONV_2D_WGRAD_UPDATE" in kinds
        out = write_project(c, tmp_path / "gram")
        rng = np.random.default_rng(8)
        host = HostTrainer(out)
        host.init(3)
        ref = ReferenceTrainer(c.train, seed=3)
        for _ in range(5):
            x = rng.integers(-128, 128, (4, 4, 3)).astype(np.int8)
            target = rng.standard_normal((6, 4)).astype(np.float32)
            loss_c, _, _ = host.step(x, target)
            loss_ref = ref.step(x, target)
            assert abs(loss_c - loss_ref) <= 1e-5 * max(1.0, abs(loss_ref)), (loss_c, loss_ref)
        got = params.expand(params.entries(c.train), host.params(),
                            {t: c.graph.t(t).data for t in c.train.trainable_tensors})
        for t, want in ref.params().items():
            np.testing.assert_array_equal(got[t], want, err_msg=t)
        w = c.graph.ops[0].inputs[1]
        assert (got[w] != c.graph.t(w).data).any(), "no gradient reached conv0 through BATCH_MATMUL"


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--sanitized-run":
        sys.exit(_sanitized_main(sys.argv[2]))
    print("usage: test_tconv_matmul.py --sanitized-run LIB.so", file=sys.stderr)
    sys.exit(2)
