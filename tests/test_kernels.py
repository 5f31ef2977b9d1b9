"""Tests for the portable C kernels (kernels_c/) and pockmcu.fixedpoint.

* The C kernels are compiled for the host (gcc -Werror) into a shared library
  loaded with cffi (ABI mode) and compared bit for bit with numpy references:
  pockmcu.fixedpoint for the exact fixed-point ops and straightforward numpy
  implementations (written here) for conv / depthwise / FC / pooling.
* The same checks run again in a subprocess against an
  -fsanitize=address,undefined build (libasan preloaded into Python).
* Single-op .tflite models are run through the real TFLM interpreter
  (tflite_micro) to anchor both the numpy references and the C kernels.
* Every kernel is compiled with arm-none-eabi-gcc for Cortex-M4 (hard float)
  and Cortex-M3 (soft float) with -Werror.

Run standalone as `python tests/test_kernels.py --sanitized-run LIB.so` (used
by the sanitizer test).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zlib
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from pockmcu import fixedpoint as fp  # noqa: E402

KERNELS = REPO / "kernels_c"
C_SOURCES = sorted(KERNELS.glob("*.c"))
WARN_FLAGS = ["-std=c99", "-Wall", "-Wextra", "-Werror", "-Wshadow"]

I32_MIN = -(1 << 31)
I32_MAX = (1 << 31) - 1

# --------------------------------------------------------------------------
# build + cffi bindings
# --------------------------------------------------------------------------

def cdef() -> str:
    """cffi declarations: kernels_c/pockmcu_nn.h (and what it includes) as gcc reads it, plus the
    shim's functions below; no prototype is copied here."""
    from pockmcu.cdecl import code_declarations

    return code_declarations(SHIM_C, include_dirs=[KERNELS])


# Test-only C shim exposing the static inline helpers of pockmcu_nn_support.h.
SHIM_C = r"""
#include "pockmcu_nn.h"
#include "pockmcu_nn_support.h"
void shim_requantize(const int32_t *x, const int32_t *m, const int32_t *s, int32_t *o, int32_t n)
{ int32_t i; for (i = 0; i < n; i++) o[i] = pockmcu_requantize(x[i], m[i], s[i]); }
void shim_srdhm(const int32_t *a, const int32_t *b, int32_t *o, int32_t n)
{ int32_t i; for (i = 0; i < n; i++) o[i] = pockmcu_srdhm(a[i], b[i]); }
void shim_rdbpot(const int32_t *x, const int32_t *e, int32_t *o, int32_t n)
{ int32_t i; for (i = 0; i < n; i++) o[i] = pockmcu_rdbpot(x[i], e[i]); }
void shim_exp_on_negative_values(const int32_t *a, int32_t ib, int32_t *o, int32_t n)
{ int32_t i; for (i = 0; i < n; i++) o[i] = pockmcu_exp_on_negative_values(a[i], ib); }
void shim_one_over_one_plus_x(const int32_t *a, int32_t *o, int32_t n)
{ int32_t i; for (i = 0; i < n; i++) o[i] = pockmcu_one_over_one_plus_x_for_x_in_0_1(a[i]); }
void shim_logistic_fixed(const int32_t *a, int32_t ib, int32_t *o, int32_t n)
{ int32_t i; for (i = 0; i < n; i++) o[i] = pockmcu_logistic_fixed(a[i], ib); }
void shim_roundf(const float *x, float *o, int32_t n)
{ int32_t i; for (i = 0; i < n; i++) o[i] = pockmcu_roundf(x[i]); }
"""


def build_host_lib(outdir: Path, sanitize: bool = False) -> Path:
    outdir.mkdir(parents=True, exist_ok=True)
    shim = outdir / "pockmcu_test_shim.c"
    shim.write_text(SHIM_C)
    so = outdir / ("libpockmcu_kernels_san.so" if sanitize else "libpockmcu_kernels.so")
    cmd = ["gcc", *WARN_FLAGS, "-fPIC", "-shared", f"-I{KERNELS}"]
    if sanitize:
        cmd += ["-O1", "-g", "-fsanitize=address,undefined", "-fno-sanitize-recover=all",
                "-fno-omit-frame-pointer"]
    else:
        cmd += ["-O2"]
    cmd += [str(p) for p in C_SOURCES] + [str(shim), "-o", str(so)]
    res = subprocess.run(cmd, capture_output=True, text=True)
    assert res.returncode == 0, f"host build failed:\n{' '.join(cmd)}\n{res.stderr}"
    assert res.stderr == "", res.stderr
    return so


class Kernels:
    """numpy-friendly wrappers around the C kernels."""

    def __init__(self, so_path: Path):
        import cffi

        self.ffi = cffi.FFI()
        self.ffi.cdef(cdef())
        self.lib = self.ffi.dlopen(str(so_path))

    # -- helpers ----------------------------------------------------------
    def _buf(self, ctype: str, arr: np.ndarray):
        assert arr.flags["C_CONTIGUOUS"]
        return self.ffi.from_buffer(ctype + "[]", arr, require_writable=False)

    def _dims(self, n, h, w, c):
        d = self.ffi.new("cmsis_nn_dims *")
        d.n, d.h, d.w, d.c = int(n), int(h), int(w), int(c)
        return d

    def _ctx(self):
        ctx = self.ffi.new("cmsis_nn_context *")
        ctx.buf = self.ffi.NULL
        ctx.size = 0
        return ctx

    def _i32(self, a):
        return np.ascontiguousarray(np.asarray(a, dtype=np.int64).astype(np.int32))

    # -- primitives via the shim ------------------------------------------
    def requantize(self, x, m, s):
        x, m, s = (self._i32(v) for v in np.broadcast_arrays(x, m, s))
        out = np.empty_like(x)
        self.lib.shim_requantize(self._buf("int32_t", x), self._buf("int32_t", m),
                                 self._buf("int32_t", s), self._buf("int32_t", out), x.size)
        return out.astype(np.int64)

    def srdhm(self, a, b):
        a, b = (self._i32(v) for v in np.broadcast_arrays(a, b))
        out = np.empty_like(a)
        self.lib.shim_srdhm(self._buf("int32_t", a), self._buf("int32_t", b),
                            self._buf("int32_t", out), a.size)
        return out.astype(np.int64)

    def rdbpot(self, x, e):
        x, e = (self._i32(v) for v in np.broadcast_arrays(x, e))
        out = np.empty_like(x)
        self.lib.shim_rdbpot(self._buf("int32_t", x), self._buf("int32_t", e),
                             self._buf("int32_t", out), x.size)
        return out.astype(np.int64)

    def exp_on_negative_values(self, a, ib):
        a = self._i32(a)
        out = np.empty_like(a)
        self.lib.shim_exp_on_negative_values(self._buf("int32_t", a), ib,
                                             self._buf("int32_t", out), a.size)
        return out.astype(np.int64)

    def one_over_one_plus_x(self, a):
        a = self._i32(a)
        out = np.empty_like(a)
        self.lib.shim_one_over_one_plus_x(self._buf("int32_t", a), self._buf("int32_t", out), a.size)
        return out.astype(np.int64)

    def logistic_fixed(self, a, ib):
        a = self._i32(a)
        out = np.empty_like(a)
        self.lib.shim_logistic_fixed(self._buf("int32_t", a), ib, self._buf("int32_t", out), a.size)
        return out.astype(np.int64)

    def roundf(self, x):
        x = np.ascontiguousarray(x, dtype=np.float32)
        out = np.empty_like(x)
        self.lib.shim_roundf(self._buf("float", x), self._buf("float", out), x.size)
        return out

    # -- kernels -----------------------------------------------------------
    def conv(self, x, w, bias, mult, shift, stride, pad, dil, in_off, out_off, act, out_hw):
        n, h, wd, ci = x.shape
        co, kh, kw, kc = w.shape
        oh, ow = out_hw
        x = np.ascontiguousarray(x, dtype=np.int8)
        w = np.ascontiguousarray(w, dtype=np.int8)
        mult, shift = self._i32(mult), self._i32(shift)
        out = np.zeros((n, oh, ow, co), dtype=np.int8)
        p = self.ffi.new("cmsis_nn_conv_params *")
        p.input_offset, p.output_offset = in_off, out_off
        p.stride.h, p.stride.w = stride
        p.padding.h, p.padding.w = pad
        p.dilation.h, p.dilation.w = dil
        p.activation.min, p.activation.max = act
        q = self.ffi.new("cmsis_nn_per_channel_quant_params *")
        q.multiplier = self._buf("int32_t", mult)
        q.shift = self._buf("int32_t", shift)
        bias_ptr = self.ffi.NULL
        if bias is not None:
            bias = self._i32(bias)
            bias_ptr = self._buf("int32_t", bias)
        in_d, f_d, b_d, o_d = (self._dims(n, h, wd, ci), self._dims(co, kh, kw, kc),
                               self._dims(1, 1, 1, co), self._dims(n, oh, ow, co))
        assert self.lib.arm_convolve_wrapper_s8_get_buffer_size(p, in_d, f_d, o_d) == 0
        st = self.lib.arm_convolve_wrapper_s8(self._ctx(), p, q, in_d, self._buf("int8_t", x), f_d,
                                              self._buf("int8_t", w), b_d, bias_ptr, o_d,
                                              self.ffi.from_buffer("int8_t[]", out))
        assert st == 0
        return out

    def depthwise(self, x, w, bias, mult, shift, ch_mult, stride, pad, dil, in_off, out_off, act,
                  out_hw):
        n, h, wd, ci = x.shape
        _, kh, kw, co = w.shape
        oh, ow = out_hw
        x = np.ascontiguousarray(x, dtype=np.int8)
        w = np.ascontiguousarray(w, dtype=np.int8)
        mult, shift = self._i32(mult), self._i32(shift)
        out = np.zeros((n, oh, ow, co), dtype=np.int8)
        p = self.ffi.new("cmsis_nn_dw_conv_params *")
        p.input_offset, p.output_offset, p.ch_mult = in_off, out_off, ch_mult
        p.stride.h, p.stride.w = stride
        p.padding.h, p.padding.w = pad
        p.dilation.h, p.dilation.w = dil
        p.activation.min, p.activation.max = act
        q = self.ffi.new("cmsis_nn_per_channel_quant_params *")
        q.multiplier = self._buf("int32_t", mult)
        q.shift = self._buf("int32_t", shift)
        bias_ptr = self.ffi.NULL
        if bias is not None:
            bias = self._i32(bias)
            bias_ptr = self._buf("int32_t", bias)
        in_d, f_d, b_d, o_d = (self._dims(n, h, wd, ci), self._dims(1, kh, kw, co),
                               self._dims(1, 1, 1, co), self._dims(n, oh, ow, co))
        assert self.lib.arm_depthwise_conv_wrapper_s8_get_buffer_size(p, in_d, f_d, o_d) == 0
        st = self.lib.arm_depthwise_conv_wrapper_s8(self._ctx(), p, q, in_d, self._buf("int8_t", x),
                                                    f_d, self._buf("int8_t", w), b_d, bias_ptr,
                                                    o_d, self.ffi.from_buffer("int8_t[]", out))
        assert st == 0
        return out

    def fc(self, x, w, bias, mult, shift, in_off, f_off, out_off, act, per_channel):
        b, d = x.shape
        o = w.shape[0]
        x = np.ascontiguousarray(x, dtype=np.int8)
        w = np.ascontiguousarray(w, dtype=np.int8)
        out = np.zeros((b, o), dtype=np.int8)
        p = self.ffi.new("cmsis_nn_fc_params *")
        p.input_offset, p.filter_offset, p.output_offset = in_off, f_off, out_off
        p.activation.min, p.activation.max = act
        bias_ptr = self.ffi.NULL
        if bias is not None:
            bias = self._i32(bias)
            bias_ptr = self._buf("int32_t", bias)
        in_d, f_d, b_d, o_d = (self._dims(b, 1, 1, d), self._dims(d, 1, 1, o),
                               self._dims(1, 1, 1, o), self._dims(b, 1, 1, o))
        assert self.lib.arm_fully_connected_s8_get_buffer_size(f_d) == 0
        if per_channel:
            mult, shift = self._i32(mult), self._i32(shift)
            q = self.ffi.new("cmsis_nn_per_channel_quant_params *")
            q.multiplier = self._buf("int32_t", mult)
            q.shift = self._buf("int32_t", shift)
            fn = self.lib.arm_fully_connected_per_channel_s8
        else:
            q = self.ffi.new("cmsis_nn_per_tensor_quant_params *")
            q.multiplier, q.shift = int(mult), int(shift)
            fn = self.lib.arm_fully_connected_s8
        st = fn(self._ctx(), p, q, in_d, self._buf("int8_t", x), f_d, self._buf("int8_t", w), b_d,
                bias_ptr, o_d, self.ffi.from_buffer("int8_t[]", out))
        assert st == 0
        return out

    def pool(self, kind, x, k, stride, pad, act, out_hw):
        n, h, w, c = x.shape
        oh, ow = out_hw
        x = np.ascontiguousarray(x, dtype=np.int8)
        out = np.zeros((n, oh, ow, c), dtype=np.int8)
        p = self.ffi.new("cmsis_nn_pool_params *")
        p.stride.h, p.stride.w = stride
        p.padding.h, p.padding.w = pad
        p.activation.min, p.activation.max = act
        fn = self.lib.arm_avgpool_s8 if kind == "avg" else self.lib.arm_max_pool_s8
        if kind == "avg":
            assert self.lib.arm_avgpool_s8_get_buffer_size(ow, c) == 0
        st = fn(self._ctx(), p, self._dims(n, h, w, c), self._buf("int8_t", x),
                self._dims(1, k[0], k[1], 1), self._dims(n, oh, ow, c),
                self.ffi.from_buffer("int8_t[]", out))
        assert st == 0
        return out

    def add(self, a, b, prm, act):
        a = np.ascontiguousarray(a, dtype=np.int8).ravel()
        b = np.ascontiguousarray(b, dtype=np.int8).ravel()
        out = np.zeros(a.size, dtype=np.int8)
        st = self.lib.arm_elementwise_add_s8(
            self._buf("int8_t", a), self._buf("int8_t", b),
            prm["input1_offset"], prm["input1_multiplier"], prm["input1_shift"],
            prm["input2_offset"], prm["input2_multiplier"], prm["input2_shift"],
            prm["left_shift"], self.ffi.from_buffer("int8_t[]", out),
            prm["output_offset"], prm["output_multiplier"], prm["output_shift"],
            act[0], act[1], a.size)
        assert st == 0
        return out

    def softmax(self, x, mult, shift, diff_min):
        x = np.ascontiguousarray(x, dtype=np.int8)
        rows, cols = x.reshape(-1, x.shape[-1]).shape
        out = np.zeros_like(x)
        self.lib.arm_softmax_s8(self._buf("int8_t", x), rows, cols, mult, shift, diff_min,
                                self.ffi.from_buffer("int8_t[]", out))
        return out

    def logistic(self, x, prm):
        x = np.ascontiguousarray(x, dtype=np.int8)
        out = np.zeros_like(x)
        st = self.lib.pockmcu_logistic_s8(self._buf("int8_t", x), x.size, prm["input_offset"],
                                          prm["input_range_radius"], prm["input_multiplier"],
                                          prm["input_left_shift"], self.ffi.from_buffer("int8_t[]", out))
        assert st == 0
        return out

    def mean(self, x, prm):
        """x: (N, H, W, C), mean over H, W -> (N, C)."""
        x = np.ascontiguousarray(x, dtype=np.int8)
        n, h, w, c = x.shape
        out = np.zeros((n, c), dtype=np.int8)
        st = self.lib.pockmcu_mean_s8(self._dims(n, h, w, c), self._buf("int8_t", x),
                                      prm["input_offset"], prm["output_offset"], prm["multiplier"],
                                      prm["shift"], self.ffi.from_buffer("int8_t[]", out))
        assert st == 0
        return out

    def quantize(self, x, scale, zp):
        x = np.ascontiguousarray(x, dtype=np.float32)
        out = np.zeros(x.shape, dtype=np.int8)
        st = self.lib.pockmcu_quantize_f32_s8(self._buf("float", x), x.size, float(scale), zp,
                                              self.ffi.from_buffer("int8_t[]", out))
        assert st == 0
        return out

    def dequantize(self, x, scale, zp):
        x = np.ascontiguousarray(x, dtype=np.int8)
        out = np.zeros(x.shape, dtype=np.float32)
        st = self.lib.pockmcu_dequantize_s8_f32(self._buf("int8_t", x), x.size, float(scale), zp,
                                                self.ffi.from_buffer("float[]", out))
        assert st == 0
        return out

    def pad(self, x, pre, post, value):
        x = np.ascontiguousarray(x, dtype=np.int8)
        shape = tuple(s + a + b for s, a, b in zip(x.shape, pre, post))
        out = np.full(shape, 99, dtype=np.int8)
        st = self.lib.arm_pad_s8(self._buf("int8_t", x), self.ffi.from_buffer("int8_t[]", out),
                                 value, self._dims(*x.shape), self._dims(*pre), self._dims(*post))
        assert st == 0
        return out

    def concat(self, tensors, axis):
        """Concatenate 4D tensors [w, z, y, x] along axis (0=w, 1=z, 2=y, 3=x)."""
        shape = list(tensors[0].shape)
        shape[axis] = sum(t.shape[axis] for t in tensors)
        out = np.zeros(shape, dtype=np.int8)
        ob = self.ffi.from_buffer("int8_t[]", out)
        offset = 0
        for t in tensors:
            t = np.ascontiguousarray(t, dtype=np.int8)
            tw, tz, ty, tx = t.shape
            tb = self._buf("int8_t", t)
            if axis == 3:
                self.lib.arm_concatenation_s8_x(tb, tx, ty, tz, tw, ob, shape[3], offset)
            elif axis == 2:
                self.lib.arm_concatenation_s8_y(tb, tx, ty, tz, tw, ob, shape[2], offset)
            elif axis == 1:
                self.lib.arm_concatenation_s8_z(tb, tx, ty, tz, tw, ob, shape[1], offset)
            else:
                self.lib.arm_concatenation_s8_w(tb, tx, ty, tz, tw, ob, offset)
            offset += t.shape[axis]
        return out


# --------------------------------------------------------------------------
# numpy references for the spatial kernels (direct, written for clarity)
# --------------------------------------------------------------------------

def _gather_window(xo, oh, ow, stride, pad, dil, ky, kx):
    """(x + input_offset) at the tap (ky, kx) for every output pixel; 0 outside."""
    n, h, w, c = xo.shape
    rows = np.arange(oh) * stride[0] - pad[0] + ky * dil[0]
    cols = np.arange(ow) * stride[1] - pad[1] + kx * dil[1]
    vr = (rows >= 0) & (rows < h)
    vc = (cols >= 0) & (cols < w)
    g = xo[:, np.clip(rows, 0, h - 1)][:, :, np.clip(cols, 0, w - 1)]
    mask = (vr[:, None] & vc[None, :])[None, :, :, None]
    return np.where(mask, g, 0)


def ref_conv(x, w, bias, mult, shift, stride, pad, dil, in_off, out_off, act, out_hw):
    n, h, wd, ci = x.shape
    co, kh, kw, kc = w.shape
    groups = ci // kc
    opg = co // groups
    oh, ow = out_hw
    xo = x.astype(np.int64) + in_off
    acc = np.zeros((n, oh, ow, co), dtype=np.int64)
    for ky in range(kh):
        for kx in range(kw):
            g = _gather_window(xo, oh, ow, stride, pad, dil, ky, kx)
            for gi in range(groups):
                acc[..., gi * opg:(gi + 1) * opg] += np.einsum(
                    "nhwc,oc->nhwo", g[..., gi * kc:(gi + 1) * kc],
                    w[gi * opg:(gi + 1) * opg, ky, kx, :].astype(np.int64))
    if bias is not None:
        acc += np.asarray(bias, dtype=np.int64)
    out = fp.multiply_by_quantized_multiplier(acc, np.asarray(mult), np.asarray(shift)) + out_off
    return np.clip(out, act[0], act[1]).astype(np.int8)


def ref_depthwise(x, w, bias, mult, shift, ch_mult, stride, pad, dil, in_off, out_off, act, out_hw):
    n, h, wd, ci = x.shape
    _, kh, kw, co = w.shape
    oh, ow = out_hw
    xo = x.astype(np.int64) + in_off
    acc = np.zeros((n, oh, ow, co), dtype=np.int64)
    for ky in range(kh):
        for kx in range(kw):
            g = np.repeat(_gather_window(xo, oh, ow, stride, pad, dil, ky, kx), ch_mult, axis=-1)
            acc += g * w[0, ky, kx, :].astype(np.int64)
    if bias is not None:
        acc += np.asarray(bias, dtype=np.int64)
    out = fp.multiply_by_quantized_multiplier(acc, np.asarray(mult), np.asarray(shift)) + out_off
    return np.clip(out, act[0], act[1]).astype(np.int8)


def ref_fc(x, w, bias, mult, shift, in_off, f_off, out_off, act):
    acc = (x.astype(np.int64) + in_off) @ (w.astype(np.int64) + f_off).T
    if bias is not None:
        acc += np.asarray(bias, dtype=np.int64)
    out = fp.multiply_by_quantized_multiplier(acc, np.asarray(mult), np.asarray(shift)) + out_off
    return np.clip(out, act[0], act[1]).astype(np.int8)


def ref_pool(kind, x, k, stride, pad, act, out_hw):
    n, h, w, c = x.shape
    oh, ow = out_hw
    out = np.zeros((n, oh, ow, c), dtype=np.int64)
    for oy in range(oh):
        y0 = oy * stride[0] - pad[0]
        ys, ye = max(0, y0), min(h, y0 + k[0])
        for ox in range(ow):
            x0 = ox * stride[1] - pad[1]
            xs, xe = max(0, x0), min(w, x0 + k[1])
            win = x[:, ys:ye, xs:xe, :].astype(np.int64)
            if kind == "max":
                out[:, oy, ox, :] = np.maximum(win.max(axis=(1, 2)), -128)
            else:
                count = (ye - ys) * (xe - xs)
                s = win.sum(axis=(1, 2))
                out[:, oy, ox, :] = np.where(s > 0, (s + count // 2) // count,
                                             -((-s + count // 2) // count))
    return np.clip(out, act[0], act[1]).astype(np.int8)


# --------------------------------------------------------------------------
# random parameter helpers
# --------------------------------------------------------------------------

def _rand_scale(rng, lo=1e-3, hi=1.0) -> float:
    return float(np.float32(np.exp(rng.uniform(np.log(lo), np.log(hi)))))


def _rand_act(rng):
    lo = int(rng.integers(-128, 20))
    hi = int(rng.integers(max(lo, -20), 128))
    choices = [(-128, 127), (lo, hi), (int(rng.integers(-128, 0)), 127)]
    return choices[int(rng.choice(3, p=[0.5, 0.3, 0.2]))]


def _rand_spatial(rng, k_max=4, stride_max=3, dil_max=3, allow_dil=True):
    """Input size, kernel, stride, dilation, top/left pad, output size with an
    independent (possibly asymmetric) bottom/right pad."""
    k = (int(rng.integers(1, k_max + 1)), int(rng.integers(1, k_max + 1)))
    stride = (int(rng.integers(1, stride_max + 1)), int(rng.integers(1, stride_max + 1)))
    dil = (int(rng.integers(1, dil_max + 1)), int(rng.integers(1, dil_max + 1))) if allow_dil else (1, 1)
    eff = ((k[0] - 1) * dil[0] + 1, (k[1] - 1) * dil[1] + 1)
    while True:
        hw = (int(rng.integers(1, 10)), int(rng.integers(1, 10)))
        pad = (int(rng.integers(0, eff[0])), int(rng.integers(0, eff[1])))
        post = (int(rng.integers(0, eff[0])), int(rng.integers(0, eff[1])))
        oh = (hw[0] + pad[0] + post[0] - eff[0]) // stride[0] + 1
        ow = (hw[1] + pad[1] + post[1] - eff[1]) // stride[1] + 1
        if oh >= 1 and ow >= 1:
            return hw, k, stride, dil, pad, (oh, ow)


def _rand_requant(rng, n, acc_mag):
    """Per-channel multipliers/shifts that map |acc| ~ acc_mag to ~ +-100,
    with occasional extreme values."""
    mults, shifts = [], []
    for _ in range(n):
        r = rng.random()
        if r < 0.08:
            m, s = int(rng.choice([0, 1 << 30, I32_MAX])), int(rng.integers(-31, 1))
        else:
            real = float(np.exp(rng.uniform(-1.5, 1.5))) * 100.0 / max(acc_mag, 1.0)
            m, s = fp.quantize_multiplier(real)
        mults.append(m)
        shifts.append(s)
    return np.array(mults, dtype=np.int64), np.array(shifts, dtype=np.int64)


# --------------------------------------------------------------------------
# checks (shared by the pytest tests and the sanitizer subprocess)
# --------------------------------------------------------------------------

def check_primitives(k: Kernels, rng, n_iter: int):
    edge = np.array([I32_MIN, I32_MIN + 1, -(1 << 30), -12345, -1, 0, 1, 12345, 1 << 30,
                     I32_MAX - 1, I32_MAX], dtype=np.int64)
    for _ in range(n_iter):
        x = np.concatenate([edge, rng.integers(I32_MIN, I32_MAX, 2000, endpoint=True),
                            rng.integers(-70000, 70000, 2000)])
        m = rng.choice(np.concatenate([edge[edge >= 0], rng.integers(0, I32_MAX, 50)]), x.size)
        s = rng.integers(-31, 32, x.size)
        np.testing.assert_array_equal(k.requantize(x, m, s), fp.multiply_by_quantized_multiplier(x, m, s))
        b = rng.choice(np.concatenate([edge, rng.integers(I32_MIN, I32_MAX, 50)]), x.size)
        np.testing.assert_array_equal(k.srdhm(x, b), fp.saturating_rounding_doubling_high_mul(x, b))
        e = rng.integers(0, 32, x.size)
        np.testing.assert_array_equal(k.rdbpot(x, e), fp.rounding_divide_by_pot(x, e))
        neg = -np.abs(rng.integers(0, I32_MAX, 3000))
        neg = np.concatenate([neg, [0, -1, I32_MIN + 1, I32_MIN, -(1 << 26), -(1 << 27)]])
        for ib in (4, 5):
            np.testing.assert_array_equal(k.exp_on_negative_values(neg, ib),
                                          fp.exp_on_negative_values(neg, ib))
        pos = np.concatenate([rng.integers(0, I32_MAX, 3000), [0, 1, I32_MAX]])
        np.testing.assert_array_equal(k.one_over_one_plus_x(pos), fp.one_over_one_plus_x_for_x_in_0_1(pos))
        q4 = rng.integers(-(15 << 27), 15 << 27, 3000)
        q4 = np.concatenate([q4, [0, 1, -1, I32_MAX, I32_MIN + 1]])
        np.testing.assert_array_equal(k.logistic_fixed(q4, 4), fp.logistic_fixed(q4, 4))
    # roundf: ties, near-ties, large, specials
    f = np.concatenate([np.arange(-10, 10, 0.5, dtype=np.float32),
                        np.nextafter(np.float32(0.5), np.float32(0)) * np.array([1, -1], np.float32),
                        np.array([2.0 ** 23 + 1, -(2.0 ** 24), 1e30, -1e30, 8388607.5, -8388607.5],
                                 dtype=np.float32),
                        (rng.standard_normal(2000) * 300).astype(np.float32)])
    np.testing.assert_array_equal(k.roundf(f), fp._round_half_away_f32(f))
    # std::round semantics: half away from zero
    assert list(k.roundf(np.array([0.5, -0.5, 1.5, -2.5], np.float32))) == [1, -1, 2, -3]


def check_softmax(k: Kernels, rng, n_iter: int):
    for it in range(n_iter):
        scale = _rand_scale(rng, 1e-3, 4.0)
        beta = float(rng.choice([1.0, 1.0, 0.5, 2.0, rng.uniform(0.05, 4.0)]))
        if float(np.float32(beta)) * scale * 2 ** 26 <= 1.0:
            continue
        mult, shift, diff_min = fp.softmax_params(scale, beta)
        rows, cols = int(rng.integers(1, 6)), int(rng.choice([1, 2, 3, 10, 33, 100, 1000]))
        x = rng.integers(-128, 128, (rows, cols))
        x[0] = x[0, 0]  # all-equal row
        if rows > 1:  # exactly at / just past diff_min from the row max
            x[1, :] = -128
            x[1, 0] = 127
            d = max(diff_min, -255)
            x[1, -1] = 127 + d
            if cols > 2 and 127 + d - 1 >= -128:
                x[1, 1] = 127 + d - 1
        if rows > 2:
            x[2] = rng.choice([-128, 127], cols)
        x = x.astype(np.int8)
        np.testing.assert_array_equal(k.softmax(x, mult, shift, diff_min),
                                      fp.softmax_s8(x, mult, shift, diff_min),
                                      err_msg=f"scale={scale} beta={beta}")
    # saturated multiplier (beta * scale * 2^26 > 2^31 - 1) and huge left shift
    for scale in (40.0, 100.0, 1000.0):
        mult, shift, diff_min = fp.softmax_params(scale, 1.0)
        x = rng.integers(-128, 128, (4, 16)).astype(np.int8)
        np.testing.assert_array_equal(k.softmax(x, mult, shift, diff_min),
                                      fp.softmax_s8(x, mult, shift, diff_min))


def check_logistic(k: Kernels, rng, n_iter: int):
    x = np.arange(-128, 128, dtype=np.int8)
    for it in range(n_iter):
        scale = _rand_scale(rng, 1e-4, 8.0)
        zp = int(rng.integers(-128, 128))
        prm = fp.logistic_params(scale, zp)
        np.testing.assert_array_equal(k.logistic(x, prm), fp.logistic_s8(x, prm),
                                      err_msg=f"scale={scale} zp={zp}")


def check_add(k: Kernels, rng, n_iter: int):
    for it in range(n_iter):
        s1, s2 = _rand_scale(rng), _rand_scale(rng)
        if it % 5 == 0:
            s2 = s1
        so = _rand_scale(rng, 1e-3, 2.0)
        if 2 * max(s1, s2) / (2 ** 20 * so) >= 1.0:
            continue
        zp1, zp2, zpo = (int(v) for v in rng.integers(-128, 128, 3))
        prm = fp.add_params(s1, zp1, s2, zp2, so, zpo)
        act = fp.activation_range(str(rng.choice(["NONE", "RELU", "RELU6", "RELU_N1_TO_1"])), so, zpo)
        if act[0] > act[1]:
            continue
        a = np.repeat(np.arange(-128, 128), 256).astype(np.int8)
        b = np.tile(np.arange(-128, 128), 256).astype(np.int8)
        np.testing.assert_array_equal(k.add(a, b, prm, act), fp.add_s8(a, b, prm, *act))


def check_mean(k: Kernels, rng, n_iter: int):
    for it in range(n_iter):
        n, h, w, c = (int(rng.integers(1, 3)), int(rng.integers(1, 20)), int(rng.integers(1, 20)),
                      int(rng.integers(1, 9)))
        si = _rand_scale(rng)
        zi = int(rng.integers(-128, 128))
        if it % 3 == 0:
            so, zo = si, zi  # equal quantization
        else:
            so, zo = _rand_scale(rng, 1e-3, 2.0), int(rng.integers(-128, 128))
        prm = fp.mean_params(si, zi, so, zo)
        x = rng.integers(-128, 128, (n, h, w, c)).astype(np.int8)
        if it % 4 == 1:
            x[...] = rng.choice([-128, 127])
        got = k.mean(x, prm)
        for keep in (False, True):
            ref = fp.mean_s8(x, (1, 2), keep, prm)
            np.testing.assert_array_equal(got.reshape(ref.shape), ref)
    # extreme multipliers / shifts, large reduction counts
    for m, s in ((I32_MAX, 7), (1 << 30, -31), (1 << 30, -30), (1 << 30, 0), (1_500_000_000, 3)):
        prm = {"input_zero_point": 5, "output_zero_point": -3, "input_offset": -5,
               "output_offset": -3, "multiplier": m, "shift": s}
        x = rng.integers(-128, 128, (1, 37, 41, 3)).astype(np.int8)
        np.testing.assert_array_equal(k.mean(x, prm), fp.mean_s8(x, (1, 2), False, prm))


def check_quantize(k: Kernels, rng, n_iter: int):
    for _ in range(n_iter):
        scale = _rand_scale(rng, 1e-3, 2.0)
        zp = int(rng.integers(-128, 128))
        ties = ((np.arange(-300, 300) + 0.5) * np.float32(scale)).astype(np.float32)
        x = np.concatenate([ties, (rng.standard_normal(3000) * 100 * scale).astype(np.float32),
                            np.array([0.0, -0.0, 1e30, -1e30, np.inf, -np.inf, np.nan], np.float32)])
        np.testing.assert_array_equal(k.quantize(x, scale, zp), fp.quantize_f32_s8(x, scale, zp))
        q = np.arange(-128, 128, dtype=np.int8)
        got = k.dequantize(q, scale, zp)
        ref = fp.dequantize_s8_f32(q, scale, zp)
        assert got.tobytes() == ref.tobytes()


def check_conv(k: Kernels, rng, n_iter: int):
    for _ in range(n_iter):
        (h, w), ks, stride, dil, pad, out_hw = _rand_spatial(rng)
        n = int(rng.integers(1, 3))
        kc = int(rng.integers(1, 6))
        groups = int(rng.choice([1, 1, 1, 2, 3]))
        ci = kc * groups
        co = groups * int(rng.integers(1, 5))
        x = rng.integers(-128, 128, (n, h, w, ci)).astype(np.int8)
        wt = rng.integers(-127, 128, (co, ks[0], ks[1], kc)).astype(np.int8)
        bias = rng.integers(-20000, 20000, co) if rng.random() < 0.8 else None
        in_off = int(rng.integers(-127, 129))
        out_off = int(rng.integers(-128, 128))
        mult, shift = _rand_requant(rng, co, 128.0 * 128.0 * np.sqrt(ks[0] * ks[1] * kc))
        act = _rand_act(rng)
        args = (x, wt, bias, mult, shift, stride, pad, dil, in_off, out_off, act, out_hw)
        np.testing.assert_array_equal(k.conv(*args), ref_conv(*args))


def check_depthwise(k: Kernels, rng, n_iter: int):
    for _ in range(n_iter):
        (h, w), ks, stride, dil, pad, out_hw = _rand_spatial(rng)
        n = int(rng.integers(1, 3))
        ci = int(rng.integers(1, 7))
        cm = int(rng.choice([1, 1, 2, 3]))
        co = ci * cm
        x = rng.integers(-128, 128, (n, h, w, ci)).astype(np.int8)
        wt = rng.integers(-127, 128, (1, ks[0], ks[1], co)).astype(np.int8)
        bias = rng.integers(-20000, 20000, co) if rng.random() < 0.8 else None
        in_off = int(rng.integers(-127, 129))
        out_off = int(rng.integers(-128, 128))
        mult, shift = _rand_requant(rng, co, 128.0 * 128.0 * np.sqrt(ks[0] * ks[1]))
        act = _rand_act(rng)
        np.testing.assert_array_equal(
            k.depthwise(x, wt, bias, mult, shift, cm, stride, pad, dil, in_off, out_off, act, out_hw),
            ref_depthwise(x, wt, bias, mult, shift, cm, stride, pad, dil, in_off, out_off, act, out_hw))


def check_fc(k: Kernels, rng, n_iter: int):
    for it in range(n_iter):
        b, d, o = int(rng.integers(1, 4)), int(rng.integers(1, 300)), int(rng.integers(1, 20))
        x = rng.integers(-128, 128, (b, d)).astype(np.int8)
        wt = rng.integers(-127, 128, (o, d)).astype(np.int8)
        bias = rng.integers(-50000, 50000, o) if rng.random() < 0.8 else None
        in_off = int(rng.integers(-127, 129))
        out_off = int(rng.integers(-128, 128))
        act = _rand_act(rng)
        per_channel = bool(it % 2)
        f_off = 0 if per_channel else int(rng.choice([0, 0, int(rng.integers(-127, 128))]))
        mult, shift = _rand_requant(rng, o if per_channel else 1, 128.0 * 128.0 * np.sqrt(d))
        if not per_channel:
            mult, shift = int(mult[0]), int(shift[0])
        np.testing.assert_array_equal(
            k.fc(x, wt, bias, mult, shift, in_off, f_off, out_off, act, per_channel),
            ref_fc(x, wt, bias, mult, shift, in_off, f_off, out_off, act))


def check_pool(k: Kernels, rng, n_iter: int):
    for it in range(n_iter):
        (h, w), ks, stride, _, pad, out_hw = _rand_spatial(rng, k_max=5, allow_dil=False)
        n, c = int(rng.integers(1, 3)), int(rng.integers(1, 6))
        x = rng.integers(-128, 128, (n, h, w, c)).astype(np.int8)
        if it % 7 == 0:
            x[...] = rng.choice([-128, 127, -1])
        act = _rand_act(rng)
        for kind in ("avg", "max"):
            np.testing.assert_array_equal(k.pool(kind, x, ks, stride, pad, act, out_hw),
                                          ref_pool(kind, x, ks, stride, pad, act, out_hw),
                                          err_msg=kind)


def check_pad_concat(k: Kernels, rng, n_iter: int):
    for _ in range(n_iter):
        shape = tuple(int(v) for v in rng.integers(1, 5, 4))
        x = rng.integers(-128, 128, shape).astype(np.int8)
        pre = tuple(int(v) for v in rng.integers(0, 3, 4))
        post = tuple(int(v) for v in rng.integers(0, 3, 4))
        val = int(rng.integers(-128, 128))
        ref = np.pad(x, list(zip(pre, post)), constant_values=val)
        np.testing.assert_array_equal(k.pad(x, pre, post, val), ref)
        axis = int(rng.integers(0, 4))
        parts = []
        for _ in range(int(rng.integers(1, 4))):
            s = list(shape)
            s[axis] = int(rng.integers(1, 4))
            parts.append(rng.integers(-128, 128, s).astype(np.int8))
        np.testing.assert_array_equal(k.concat(parts, axis), np.concatenate(parts, axis=axis))


ALL_CHECKS = {
    "primitives": (check_primitives, 3),
    "softmax": (check_softmax, 150),
    "logistic": (check_logistic, 200),
    "add": (check_add, 40),
    "mean": (check_mean, 80),
    "quantize": (check_quantize, 40),
    "conv": (check_conv, 150),
    "depthwise": (check_depthwise, 150),
    "fc": (check_fc, 100),
    "pool": (check_pool, 150),
    "pad_concat": (check_pad_concat, 60),
}


# --------------------------------------------------------------------------
# pytest tests
# --------------------------------------------------------------------------

try:
    import pytest
except ImportError:  # standalone sanitizer run without pytest
    pytest = None

if pytest is not None:
    from conftest import run_sanitized_checks

    @pytest.fixture(scope="module")
    def kernels(tmp_path_factory):
        return Kernels(build_host_lib(tmp_path_factory.mktemp("host")))

    @pytest.mark.parametrize("name", sorted(ALL_CHECKS))
    def test_c_kernels_match_numpy(kernels, name):
        fn, n_iter = ALL_CHECKS[name]
        fn(kernels, np.random.default_rng(zlib.crc32(name.encode())), n_iter)

    def test_sanitized_build(tmp_path):
        """ASan + UBSan build of all kernels, exercised by the same checks."""
        run_sanitized_checks(__file__, build_host_lib(tmp_path, sanitize=True))

    def test_quantize_multiplier_known_values():
        # TFLM quantization_util_test.cc (QuantizeMultiplierArray)
        weights = [-4, -2, -1, -0.5, -0.25, -0.125, 0, 0.125, 0.25, 0.5, 1, 2, 4]
        sig = [-1073741824] * 6 + [0] + [1073741824] * 6
        shifts = [3, 2, 1, 0, -1, -2, 0, -2, -1, 0, 1, 2, 3]
        assert [fp.quantize_multiplier(w) for w in weights] == list(zip(sig, shifts))
        # CalculateInputRadius (same test file)
        assert fp.calculate_input_radius(4, 27) == 15
        assert fp.calculate_input_radius(3, 27) == 14
        assert fp.calculate_input_radius(3, 28) == 7
        assert fp.calculate_input_radius(4, 2) == 503316480
        # q_fixed == 2^31 fix-up, tiny multipliers flushed to zero, rounding
        assert fp.quantize_multiplier(1.0 - 2.0 ** -40) == (1 << 30, 1)
        assert fp.quantize_multiplier(2.0 ** -40) == (0, 0)
        assert fp.quantize_multiplier(2.0 ** -31) == (1 << 30, -30)
        assert fp.quantize_multiplier(0.75) == (1610612736, 0)
        assert fp.quantize_multiplier_smaller_than_one_exp(0.25) == (1 << 30, -1)
        assert fp.quantize_multiplier_greater_than_one(3.0) == (1610612736, 2)
        with pytest.raises(ValueError):
            fp.quantize_multiplier_smaller_than_one_exp(1.5)
        with pytest.raises(ValueError):
            fp.quantize_multiplier_greater_than_one(0.5)

    def test_fixedpoint_scalars_and_rounding():
        # C++ truncating division vs numpy floor: negative ties round away from 0
        assert fp.rounding_divide_by_pot(-5, 1) == -3
        assert fp.rounding_divide_by_pot(5, 1) == 3
        assert fp.rounding_divide_by_pot(-4, 1) == -2
        assert fp.rounding_divide_by_pot(-6, 2) == -2  # -1.5 -> -2
        assert fp.saturating_rounding_doubling_high_mul(I32_MIN, I32_MIN) == I32_MAX
        # VQRDMULH rounding: +1.5 -> 2 but -1.5 -> -1 (nudge 1 - 2^30 for negatives)
        assert fp.saturating_rounding_doubling_high_mul(3, 1 << 30) == 2
        assert fp.saturating_rounding_doubling_high_mul(-3, 1 << 30) == -1
        # per-channel broadcasting along the last axis
        acc = np.array([[1000, -1000], [5000, 7]])
        got = fp.multiply_by_quantized_multiplier(acc, np.array([1 << 30, 1 << 30]), np.array([-1, 2]))
        assert got.tolist() == [[250, -2000], [1250, 14]]
        # x * (1 << shift) wraps like the int32 C++ multiply
        assert fp.multiply_by_quantized_multiplier(1 << 30, I32_MAX, 2) == 0
        assert fp.exp_on_negative_values(0, 5) == I32_MAX
        assert fp.logistic_fixed(0, 4) == 1 << 30
        # activation ranges
        assert fp.activation_range("NONE", 0.1, 3) == (-128, 127)
        assert fp.activation_range("RELU", 0.1, 3) == (3, 127)
        assert fp.activation_range("RELU6", 0.05, -128) == (-128, -8)
        assert fp.activation_range("RELU_N1_TO_1", 0.01, 0) == (-100, 100)
        # float32 product in per-tensor FC vs double in per-channel conv
        m_fc = fp.fc_per_tensor_multiplier(0.02, 0.001, 0.1)
        m_cv = fp.conv_per_channel_multipliers(0.02, [0.001], 0.1)
        assert m_fc == (1759218694, -12) and (int(m_cv[0][0]), int(m_cv[1][0])) == (1759218622, -12)
        # mean: 1/num folding
        assert fp.mean_adjusted_multiplier(1 << 30, 0, 49) == ((1 << 35) // 49, -5)
        assert fp.mean_adjusted_multiplier(1 << 30, -31, 49) == ((1 << 30) // 49, -31)  # s clamped to 0

    def test_arm_cross_compile(tmp_path):
        cc = shutil.which("arm-none-eabi-gcc")
        assert cc is not None, "arm-none-eabi-gcc is missing: run 'make test' (it installs gcc-arm-none-eabi)"
        targets = {
            "m4_hard": ["-mthumb", "-mcpu=cortex-m4", "-mfloat-abi=hard", "-mfpu=fpv4-sp-d16"],
            "m3_soft": ["-mthumb", "-mcpu=cortex-m3", "-mfloat-abi=soft"],
        }
        for name, flags in targets.items():
            for src in C_SOURCES:
                obj = tmp_path / f"{src.stem}.{name}.o"
                cmd = [cc, *WARN_FLAGS, "-O2", *flags, f"-I{KERNELS}", "-c", str(src), "-o", str(obj)]
                res = subprocess.run(cmd, capture_output=True, text=True)
                assert res.returncode == 0 and res.stderr == "", f"{' '.join(cmd)}\n{res.stderr}"
                # no libm / double-precision helpers pulled in by the int8 kernels
                nm = shutil.which("arm-none-eabi-nm")
                if nm:
                    syms = subprocess.run([nm, "-u", str(obj)], capture_output=True, text=True).stdout
                    for bad in ("roundf", "__aeabi_d", "lround", "floor", "malloc"):
                        assert bad not in syms, f"{src.name} ({name}) references {bad}:\n{syms}"

    def test_header_is_cxx_and_c_clean(tmp_path):
        src = tmp_path / "hdr.c"
        src.write_text('#include "pockmcu_nn.h"\n#include "pockmcu_nn_support.h"\nint main(void){return 0;}\n')
        res = subprocess.run(["gcc", *WARN_FLAGS, "-pedantic", f"-I{KERNELS}", "-fsyntax-only", str(src)],
                             capture_output=True, text=True)
        assert res.returncode == 0, res.stderr
        if shutil.which("g++"):
            srcpp = tmp_path / "hdr.cpp"
            srcpp.write_text(src.read_text())
            res = subprocess.run(["g++", "-Wall", "-Wextra", "-Werror", f"-I{KERNELS}",
                                  "-fsyntax-only", str(srcpp)], capture_output=True, text=True)
            assert res.returncode == 0, res.stderr

    def test_kernel_files_layout():
        """One public function per .c file, named after it, with a header comment."""
        for src in C_SOURCES:
            text = src.read_text()
            assert text.startswith("/*"), src.name
            assert src.stem.startswith(("arm_", "pockmcu_")), src.name
            assert f"{src.stem}(" in text, src.name
            assert "malloc" not in text, src.name

    def test_against_cmsis_nn_headers(tmp_path):
        """With POCKMCU_USE_CMSIS_NN and Arm's headers, our arm_*.c must still
        compile: same prototypes and same struct field names as CMSIS-NN."""
        cmsis = os.environ.get("CMSIS_NN_PATH")
        if not cmsis or not (Path(cmsis) / "Include" / "arm_nnfunctions.h").exists():
            pytest.skip("set CMSIS_NN_PATH to a CMSIS-NN checkout to run")
        for src in C_SOURCES:
            res = subprocess.run(["gcc", *WARN_FLAGS, "-DPOCKMCU_USE_CMSIS_NN", f"-I{KERNELS}",
                                  f"-I{Path(cmsis) / 'Include'}", "-fsyntax-only", str(src)],
                                 capture_output=True, text=True)
            assert res.returncode == 0, f"{src.name}\n{res.stderr}"


# --------------------------------------------------------------------------
# TFLM anchors: single-op models through the real TFLM interpreter
# --------------------------------------------------------------------------

def _tflm():
    try:
        import flatbuffers  # noqa: F401
        from tflite_micro import runtime  # noqa: F401
    except Exception:  # pragma: no cover
        return None
    return runtime


def _tflm_model(op, opts_type, opts, tensors, op_inputs, op_outputs, graph_inputs, graph_outputs):
    import flatbuffers
    from tflite_micro import runtime
    sf = runtime.schema_fb
    model = sf.ModelT()
    model.version = 3
    oc = sf.OperatorCodeT()
    oc.builtinCode = op
    oc.deprecatedBuiltinCode = min(op, 127)
    oc.version = 1
    model.operatorCodes = [oc]
    bufs = [sf.BufferT()]
    sg = sf.SubGraphT()
    sg.tensors = []
    for i, t in enumerate(tensors):
        tt = sf.TensorT()
        tt.shape = [int(v) for v in t["shape"]]
        tt.type = t["type"]
        tt.name = f"t{i}"
        buf = sf.BufferT()
        if t.get("data") is not None:
            buf.data = np.frombuffer(np.ascontiguousarray(t["data"]).tobytes(), dtype=np.uint8)
        bufs.append(buf)
        tt.buffer = len(bufs) - 1
        if t.get("scale") is not None:
            q = sf.QuantizationParametersT()
            q.scale = [float(v) for v in np.atleast_1d(t["scale"])]
            q.zeroPoint = [int(v) for v in np.atleast_1d(t["zp"])]
            q.quantizedDimension = int(t.get("qdim", 0))
            tt.quantization = q
        sg.tensors.append(tt)
    o = sf.OperatorT()
    o.opcodeIndex = 0
    o.inputs = list(op_inputs)
    o.outputs = list(op_outputs)
    if opts_type:
        o.builtinOptionsType = opts_type
        o.builtinOptions = opts
    sg.operators = [o]
    sg.inputs = list(graph_inputs)
    sg.outputs = list(graph_outputs)
    model.subgraphs = [sg]
    model.buffers = bufs
    b = flatbuffers.Builder(1024)
    b.Finish(model.Pack(b), file_identifier=b"TFL3")
    return bytes(b.Output())


def _tflm_run(model_bytes, inputs):
    from tflite_micro import runtime
    it = runtime.Interpreter.from_bytes(model_bytes, arena_size=1 << 20)
    for i, a in enumerate(inputs):
        it.set_input(a, i)
    it.invoke()
    return it.get_output(0)


def _same_padding(in_size, k, stride, dil):
    eff = (k - 1) * dil + 1
    out = (in_size + stride - 1) // stride
    total = max((out - 1) * stride + eff - in_size, 0)
    return out, total // 2


def _valid_out(in_size, k, stride, dil):
    eff = (k - 1) * dil + 1
    return (in_size - eff + stride) // stride


if pytest is not None:

    @pytest.fixture(scope="module")
    def tflm():
        rt = _tflm()
        assert rt is not None, "tflite-micro is missing: run 'make test' (it installs the test dependencies)"
        return rt.schema_fb

    _ACTS = {"NONE": 0, "RELU": 1, "RELU_N1_TO_1": 2, "RELU6": 3}

    def test_tflm_softmax_logistic(kernels, tflm):
        sf = tflm
        rng = np.random.default_rng(11)
        I8 = sf.TensorType.INT8
        for _ in range(12):
            scale = _rand_scale(rng, 1e-3, 2.0)
            beta = float(np.float32(rng.choice([1.0, 0.5, 2.0])))
            zp = int(rng.integers(-128, 128))
            x = rng.integers(-128, 128, (3, 20)).astype(np.int8)
            x[1] = x[1, 0]
            opts = sf.SoftmaxOptionsT()
            opts.beta = beta
            model = _tflm_model(sf.BuiltinOperator.SOFTMAX, sf.BuiltinOptions.SoftmaxOptions, opts,
                                [dict(shape=x.shape, type=I8, scale=scale, zp=zp),
                                 dict(shape=x.shape, type=I8, scale=1 / 256, zp=-128)],
                                [0], [1], [0], [1])
            ref = _tflm_run(model, [x])
            m, s, d = fp.softmax_params(scale, beta)
            np.testing.assert_array_equal(fp.softmax_s8(x, m, s, d), ref)
            np.testing.assert_array_equal(kernels.softmax(x, m, s, d), ref)

            xl = np.arange(-128, 128, dtype=np.int8).reshape(1, 256)
            lscale = _rand_scale(rng, 1e-3, 1.0)
            model = _tflm_model(sf.BuiltinOperator.LOGISTIC, 0, None,
                                [dict(shape=xl.shape, type=I8, scale=lscale, zp=zp),
                                 dict(shape=xl.shape, type=I8, scale=1 / 256, zp=-128)],
                                [0], [1], [0], [1])
            ref = _tflm_run(model, [xl])
            prm = fp.logistic_params(lscale, zp)
            np.testing.assert_array_equal(fp.logistic_s8(xl, prm), ref)
            np.testing.assert_array_equal(kernels.logistic(xl, prm), ref)

    def test_tflm_add_mean_quantize(kernels, tflm):
        sf = tflm
        rng = np.random.default_rng(12)
        I8, F32, I32 = sf.TensorType.INT8, sf.TensorType.FLOAT32, sf.TensorType.INT32
        for it in range(10):
            s1, s2, so = _rand_scale(rng), _rand_scale(rng), _rand_scale(rng, 1e-2, 1.0)
            zp1, zp2, zpo = (int(v) for v in rng.integers(-128, 128, 3))
            act = ["NONE", "RELU", "RELU6", "RELU_N1_TO_1"][it % 4]
            a = np.repeat(np.arange(-128, 128), 16).astype(np.int8).reshape(1, 16, 16, 16)
            b = rng.integers(-128, 128, a.shape).astype(np.int8)
            opts = sf.AddOptionsT()
            opts.fusedActivationFunction = _ACTS[act]
            model = _tflm_model(sf.BuiltinOperator.ADD, sf.BuiltinOptions.AddOptions, opts,
                                [dict(shape=a.shape, type=I8, scale=s1, zp=zp1),
                                 dict(shape=a.shape, type=I8, scale=s2, zp=zp2),
                                 dict(shape=a.shape, type=I8, scale=so, zp=zpo)],
                                [0, 1], [2], [0, 1], [2])
            ref = _tflm_run(model, [a, b])
            prm = fp.add_params(s1, zp1, s2, zp2, so, zpo)
            lo_hi = fp.activation_range(act, so, zpo)
            np.testing.assert_array_equal(fp.add_s8(a, b, prm, *lo_hi), ref)
            np.testing.assert_array_equal(kernels.add(a, b, prm, lo_hi).reshape(a.shape), ref)

            # MEAN over H, W (keep_dims both ways; equal and different quantization)
            n, h, w, c = 1 + it % 2, int(rng.integers(1, 12)), int(rng.integers(1, 12)), 5
            x = rng.integers(-128, 128, (n, h, w, c)).astype(np.int8)
            si, zi = _rand_scale(rng), int(rng.integers(-128, 128))
            so2, zo2 = (si, zi) if it % 2 == 0 else (_rand_scale(rng), int(rng.integers(-128, 128)))
            keep = bool(it % 3)
            opts = sf.ReducerOptionsT()
            opts.keepDims = keep
            oshape = (n, 1, 1, c) if keep else (n, c)
            model = _tflm_model(sf.BuiltinOperator.MEAN, sf.BuiltinOptions.ReducerOptions, opts,
                                [dict(shape=x.shape, type=I8, scale=si, zp=zi),
                                 dict(shape=(2,), type=I32, data=np.array([1, 2], np.int32)),
                                 dict(shape=oshape, type=I8, scale=so2, zp=zo2)],
                                [0, 1], [2], [0], [2])
            ref = _tflm_run(model, [x])
            prm = fp.mean_params(si, zi, so2, zo2)
            np.testing.assert_array_equal(fp.mean_s8(x, [1, 2], keep, prm), ref)
            np.testing.assert_array_equal(kernels.mean(x, prm).reshape(ref.shape), ref)

            # QUANTIZE / DEQUANTIZE
            qs, qz = _rand_scale(rng, 1e-3, 1.0), int(rng.integers(-128, 128))
            xf = np.concatenate([((np.arange(-200, 200) + 0.5) * np.float32(qs)),
                                 rng.standard_normal(200) * 100 * qs]).astype(np.float32).reshape(1, -1)
            model = _tflm_model(sf.BuiltinOperator.QUANTIZE, 0, None,
                                [dict(shape=xf.shape, type=F32),
                                 dict(shape=xf.shape, type=I8, scale=qs, zp=qz)],
                                [0], [1], [0], [1])
            ref = _tflm_run(model, [xf])
            np.testing.assert_array_equal(fp.quantize_f32_s8(xf, qs, qz), ref)
            np.testing.assert_array_equal(kernels.quantize(xf, qs, qz), ref)
            xq = np.arange(-128, 128, dtype=np.int8).reshape(1, 256)
            model = _tflm_model(sf.BuiltinOperator.DEQUANTIZE, 0, None,
                                [dict(shape=xq.shape, type=I8, scale=qs, zp=qz),
                                 dict(shape=xq.shape, type=F32)],
                                [0], [1], [0], [1])
            ref = _tflm_run(model, [xq])
            assert fp.dequantize_s8_f32(xq, qs, qz).tobytes() == ref.tobytes()
            assert kernels.dequantize(xq, qs, qz).tobytes() == ref.tobytes()

    def test_tflm_conv_depthwise_fc_pool(kernels, tflm):
        sf = tflm
        rng = np.random.default_rng(13)
        I8, I32 = sf.TensorType.INT8, sf.TensorType.INT32
        for it in range(10):
            n = 1 + it % 2
            h, w = int(rng.integers(3, 10)), int(rng.integers(3, 10))
            ci = int(rng.integers(1, 5))
            kh, kw = int(rng.integers(1, 4)), int(rng.integers(1, 4))
            sh, sw = int(rng.integers(1, 3)), int(rng.integers(1, 3))
            dh, dw = (1, 1) if it % 3 else (2, 1)
            same = bool(it % 2)
            act = ["NONE", "RELU", "RELU6", "RELU_N1_TO_1"][it % 4]
            if same:
                oh, ph = _same_padding(h, kh, sh, dh)
                ow, pw = _same_padding(w, kw, sw, dw)
            else:
                oh, ph, ow, pw = _valid_out(h, kh, sh, dh), 0, _valid_out(w, kw, sw, dw), 0
            if oh < 1 or ow < 1:
                continue
            si, zi = _rand_scale(rng, 1e-2, 0.5), int(rng.integers(-128, 128))
            so, zo = _rand_scale(rng, 0.05, 2.0), int(rng.integers(-128, 128))
            x = rng.integers(-128, 128, (n, h, w, ci)).astype(np.int8)
            lo_hi = fp.activation_range(act, so, zo)
            pad_enum = sf.Padding.SAME if same else sf.Padding.VALID

            # CONV_2D, per-channel weights
            co = int(rng.integers(1, 5))
            fs = np.array([_rand_scale(rng, 1e-3, 0.05) for _ in range(co)], np.float32)
            wt = rng.integers(-127, 128, (co, kh, kw, ci)).astype(np.int8)
            bias = rng.integers(-3000, 3000, co).astype(np.int32)
            opts = sf.Conv2DOptionsT()
            opts.padding, opts.strideH, opts.strideW = pad_enum, sh, sw
            opts.dilationHFactor, opts.dilationWFactor = dh, dw
            opts.fusedActivationFunction = _ACTS[act]
            model = _tflm_model(sf.BuiltinOperator.CONV_2D, sf.BuiltinOptions.Conv2DOptions, opts,
                                [dict(shape=x.shape, type=I8, scale=si, zp=zi),
                                 dict(shape=wt.shape, type=I8, scale=fs, zp=[0] * co, data=wt),
                                 dict(shape=(co,), type=I32, scale=fs * np.float32(si), zp=[0] * co,
                                      data=bias),
                                 dict(shape=(n, oh, ow, co), type=I8, scale=so, zp=zo)],
                                [0, 1, 2], [3], [0], [3])
            ref = _tflm_run(model, [x])
            mult, shift = fp.conv_per_channel_multipliers(si, fs, so)
            args = (x, wt, bias, mult, shift, (sh, sw), (ph, pw), (dh, dw), -zi, zo, lo_hi, (oh, ow))
            np.testing.assert_array_equal(ref_conv(*args), ref)
            np.testing.assert_array_equal(kernels.conv(*args), ref)

            # DEPTHWISE_CONV_2D
            cm = 1 + it % 3
            co = ci * cm
            fs = np.array([_rand_scale(rng, 1e-3, 0.05) for _ in range(co)], np.float32)
            wt = rng.integers(-127, 128, (1, kh, kw, co)).astype(np.int8)
            bias = rng.integers(-3000, 3000, co).astype(np.int32)
            opts = sf.DepthwiseConv2DOptionsT()
            opts.padding, opts.strideH, opts.strideW = pad_enum, sh, sw
            opts.dilationHFactor, opts.dilationWFactor = dh, dw
            opts.depthMultiplier = cm
            opts.fusedActivationFunction = _ACTS[act]
            model = _tflm_model(sf.BuiltinOperator.DEPTHWISE_CONV_2D,
                                sf.BuiltinOptions.DepthwiseConv2DOptions, opts,
                                [dict(shape=x.shape, type=I8, scale=si, zp=zi),
                                 dict(shape=wt.shape, type=I8, scale=fs, zp=[0] * co, data=wt, qdim=3),
                                 dict(shape=(co,), type=I32, scale=fs * np.float32(si), zp=[0] * co,
                                      data=bias),
                                 dict(shape=(n, oh, ow, co), type=I8, scale=so, zp=zo)],
                                [0, 1, 2], [3], [0], [3])
            ref = _tflm_run(model, [x])
            mult, shift = fp.conv_per_channel_multipliers(si, fs, so)
            args = (x, wt, bias, mult, shift, cm, (sh, sw), (ph, pw), (dh, dw), -zi, zo, lo_hi, (oh, ow))
            np.testing.assert_array_equal(ref_depthwise(*args), ref)
            np.testing.assert_array_equal(kernels.depthwise(*args), ref)

            # FULLY_CONNECTED, per-tensor weights (float32 scale product!)
            d = h * w * ci
            o = int(rng.integers(1, 8))
            fsc = _rand_scale(rng, 1e-4, 0.01)
            wt = rng.integers(-127, 128, (o, d)).astype(np.int8)
            bias = rng.integers(-3000, 3000, o).astype(np.int32)
            xf = x.reshape(n, d)
            opts = sf.FullyConnectedOptionsT()
            opts.fusedActivationFunction = _ACTS[act]
            model = _tflm_model(sf.BuiltinOperator.FULLY_CONNECTED,
                                sf.BuiltinOptions.FullyConnectedOptions, opts,
                                [dict(shape=xf.shape, type=I8, scale=si, zp=zi),
                                 dict(shape=wt.shape, type=I8, scale=fsc, zp=0, data=wt),
                                 dict(shape=(o,), type=I32, scale=float(np.float32(si) * np.float32(fsc)),
                                      zp=0, data=bias),
                                 dict(shape=(n, o), type=I8, scale=so, zp=zo)],
                                [0, 1, 2], [3], [0], [3])
            ref = _tflm_run(model, [xf])
            m1, s1 = fp.fc_per_tensor_multiplier(si, fsc, so)
            args = (xf, wt, bias, m1, s1, -zi, 0, zo, lo_hi)
            np.testing.assert_array_equal(ref_fc(*args), ref)
            np.testing.assert_array_equal(kernels.fc(*args, per_channel=False), ref)

            # AVERAGE_POOL_2D / MAX_POOL_2D (same quantization in and out)
            if same:
                poh, pph = _same_padding(h, kh, sh, 1)
                pow_, ppw = _same_padding(w, kw, sw, 1)
            else:
                poh, pph, pow_, ppw = _valid_out(h, kh, sh, 1), 0, _valid_out(w, kw, sw, 1), 0
            plo_hi = fp.activation_range(act, si, zi)
            for kind, op in (("avg", sf.BuiltinOperator.AVERAGE_POOL_2D),
                             ("max", sf.BuiltinOperator.MAX_POOL_2D)):
                opts = sf.Pool2DOptionsT()
                opts.padding, opts.strideH, opts.strideW = pad_enum, sh, sw
                opts.filterHeight, opts.filterWidth = kh, kw
                opts.fusedActivationFunction = _ACTS[act]
                model = _tflm_model(op, sf.BuiltinOptions.Pool2DOptions, opts,
                                    [dict(shape=x.shape, type=I8, scale=si, zp=zi),
                                     dict(shape=(n, poh, pow_, ci), type=I8, scale=si, zp=zi)],
                                    [0], [1], [0], [1])
                ref = _tflm_run(model, [x])
                args = (kind, x, (kh, kw), (sh, sw), (pph, ppw), plo_hi, (poh, pow_))
                np.testing.assert_array_equal(ref_pool(*args), ref, err_msg=kind)
                np.testing.assert_array_equal(kernels.pool(*args), ref, err_msg=kind)


# --------------------------------------------------------------------------
# standalone entry point (sanitizer subprocess)
# --------------------------------------------------------------------------

def _sanitized_main(so_path: str) -> int:
    k = Kernels(Path(so_path))
    rng = np.random.default_rng(1234)
    for name, (fn, n_iter) in sorted(ALL_CHECKS.items()):
        fn(k, rng, max(1, n_iter // 4))
        print(f"{name} ok", flush=True)
    print("ALL OK", flush=True)
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--sanitized-run":
        sys.exit(_sanitized_main(sys.argv[2]))
    print("usage: test_kernels.py --sanitized-run LIB.so", file=sys.stderr)
    sys.exit(2)
