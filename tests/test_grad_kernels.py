"""Tests for the training kernels (backward + update) in kernels_c/pockmcu_*.c.

* The training kernels are compiled for the host (gcc -Werror, -ffp-contract=off
  as in the generated build) into a shared library loaded with cffi (ABI mode).
* Gradients are checked against PyTorch autograd in float64 on the dequantized
  tensors (relative error of the whole tensor <= 1e-4, plus a tiny absolute
  floor), and, where the summation order is documented, bit for bit against a
  numpy float32 reproduction of that order.
* Weight gradients are observed through the update: an accumulate-only call
  (apply = 0, coef = 1, zeroed accum) leaves exactly G in accum; an applying
  call is reproduced bit for bit by a Python xorshift32 + update rule, and
  every updated weight lies between floor and ceil of q + delta_torch.
* The same checks run again against an -fsanitize=address,undefined build, and
  every new file is compiled with arm-none-eabi-gcc (Cortex-M4 hard float,
  Cortex-M3 soft float) with -Werror, without libm / double helpers.

Run standalone as `python tests/test_grad_kernels.py --sanitized-run LIB.so`
(used by the sanitizer test).
"""

from __future__ import annotations

import math
import shutil
import subprocess
import sys
import zlib
from pathlib import Path

import numpy as np
from conftest import build_kernel_lib, kernel_cdef

REPO = Path(__file__).resolve().parents[1]
KERNELS = REPO / "kernels_c"
WARN_FLAGS = ["-std=c99", "-Wall", "-Wextra", "-Werror", "-Wshadow"]
FP_FLAGS = ["-ffp-contract=off"]

TRAIN_FUNCS = [
    "pockmcu_xorshift32", "pockmcu_stochastic_round", "pockmcu_update_s8", "pockmcu_update_s32",
    "pockmcu_conv_grad_input_f32", "pockmcu_conv_grad_input_split_f32", "pockmcu_depthwise_conv_grad_input_f32",
    "pockmcu_depthwise_conv_grad_input_rows_f32", "pockmcu_depthwise_conv_grad_input_rows_f32_get_buffer_size",
    "pockmcu_fully_connected_grad_input_f32",
    "pockmcu_conv_wgrad_update_s8", "pockmcu_conv_wgrad_update_s8_get_buffer_size",
    "pockmcu_depthwise_conv_wgrad_update_s8", "pockmcu_depthwise_conv_wgrad_update_s8_get_buffer_size",
    "pockmcu_fully_connected_wgrad_update_s8", "pockmcu_bias_update_s32",
    "pockmcu_mask_pack_s8", "pockmcu_mask_apply_f32", "pockmcu_mask_bytes",
    "pockmcu_avgpool_grad_f32", "pockmcu_max_pool_grad_f32", "pockmcu_mean_grad_f32",
    "pockmcu_conv_1x1_grad_from_mean_f32",
    "pockmcu_pad_grad_f32", "pockmcu_slice_f32", "pockmcu_slice_s8", "pockmcu_add_f32",
    "pockmcu_softmax_xent_grad_s8", "pockmcu_mse_grad_s8", "pockmcu_mse_grad_f32",
    # split weight storage: the forward kernel, checked against the unsplit ones on merged weights
    "pockmcu_convolve_split_s8", "arm_convolve_wrapper_s8", "pockmcu_convolve_ort_s8",
    "pockmcu_convolve_split_s8_simd",   # its DSP form (portable C of the same loops on the host)
]
TRAIN_SOURCES = [KERNELS / f"{name}.c" for name in TRAIN_FUNCS]

I32_MIN = -(1 << 31)
I32_MAX = (1 << 31) - 1
F32 = np.float32

# --------------------------------------------------------------------------
# build + cffi bindings
# --------------------------------------------------------------------------

def cdef() -> str:
    return kernel_cdef()


def build_lib(outdir: Path, sanitize: bool = False) -> Path:
    return build_kernel_lib(outdir / ("libpockmcu_train_san.so" if sanitize else "libpockmcu_train.so"),
                            TRAIN_SOURCES, sanitize)


class Geom:
    """2-D window geometry: kernel, stride, dilation, padding (before/after), output."""

    def __init__(self, in_hw, k, stride, dil, same):
        self.in_hw, self.k, self.stride, self.dil = tuple(in_hw), tuple(k), tuple(stride), tuple(dil)
        self.same = same
        out, pb, pa = [], [], []
        for n, kk, s, d in zip(in_hw, k, stride, dil):
            eff = (kk - 1) * d + 1
            if same:
                o = -(-n // s)
                tot = max((o - 1) * s + eff - n, 0)
                out.append(o), pb.append(tot // 2), pa.append(tot - tot // 2)
            else:
                out.append((n - eff) // s + 1), pb.append(0), pa.append(0)
        self.out, self.pad_before, self.pad_after = tuple(out), tuple(pb), tuple(pa)

    def __repr__(self):
        return (f"Geom(in={self.in_hw}, k={self.k}, s={self.stride}, d={self.dil}, "
                f"{'SAME' if self.same else 'VALID'}, out={self.out})")


def rand_geom(rng, k_max=5, s_max=2, d_max=2, size=(2, 10)):
    k = [int(v) for v in rng.integers(1, k_max + 1, 2)]
    s = [int(v) for v in rng.integers(1, s_max + 1, 2)]
    d = [int(v) for v in rng.integers(1, d_max + 1, 2)]
    same = bool(rng.random() < 0.5)
    hw = []
    for kk, dd in zip(k, d):
        eff = (kk - 1) * dd + 1
        lo = size[0] if same else max(size[0], eff)
        hw.append(int(rng.integers(lo, max(lo, size[1]) + 1)))
    return Geom(hw, k, s, d, same)


class TK:
    """numpy-friendly wrappers around the training kernels."""

    def __init__(self, so_path: Path):
        import cffi

        self.ffi = cffi.FFI()
        self.ffi.cdef(cdef())
        self.lib = self.ffi.dlopen(str(so_path))

    # -- helpers ----------------------------------------------------------
    def p(self, ctype: str, arr):
        if arr is None:
            return self.ffi.NULL
        assert arr.flags["C_CONTIGUOUS"], "array must be C contiguous"
        return self.ffi.from_buffer(ctype + "[]", arr)

    def dims(self, n, h, w, c):
        d = self.ffi.new("cmsis_nn_dims *")
        d.n, d.h, d.w, d.c = int(n), int(h), int(w), int(c)
        return d

    def opt(self, lr, momentum=0.0, batch=1, apply=1):
        o = self.ffi.new("pockmcu_optimizer *")
        o.lr, o.momentum, o.batch, o.apply = float(F32(lr)), float(F32(momentum)), int(batch), int(apply)
        return o

    def conv_params(self, g: Geom, in_off=0):
        p = self.ffi.new("cmsis_nn_conv_params *")
        p.input_offset, p.output_offset = int(in_off), 0
        p.stride.h, p.stride.w = g.stride
        p.padding.h, p.padding.w = g.pad_before
        p.dilation.h, p.dilation.w = g.dil
        p.activation.min, p.activation.max = -128, 127
        return p

    def dw_params(self, g: Geom, ch_mult, in_off=0):
        p = self.ffi.new("cmsis_nn_dw_conv_params *")
        p.input_offset, p.output_offset, p.ch_mult = int(in_off), 0, int(ch_mult)
        p.stride.h, p.stride.w = g.stride
        p.padding.h, p.padding.w = g.pad_before
        p.dilation.h, p.dilation.w = g.dil
        p.activation.min, p.activation.max = -128, 127
        return p

    def pool_params(self, g: Geom):
        p = self.ffi.new("cmsis_nn_pool_params *")
        p.stride.h, p.stride.w = g.stride
        p.padding.h, p.padding.w = g.pad_before
        p.activation.min, p.activation.max = -128, 127
        return p

    def ctx(self, nbytes):
        buf = np.zeros(max(int(nbytes), 4) // 4 + 1, dtype=np.float32)
        c = self.ffi.new("cmsis_nn_context *")
        c.buf = self.ffi.cast("void *", self.p("float", buf))
        c.size = int(nbytes)
        return c, buf

    # -- scalar / elementwise -----------------------------------------------
    def xorshift32(self, state, n):
        st = self.ffi.new("uint32_t *", state)
        return [int(self.lib.pockmcu_xorshift32(st)) for _ in range(n)], int(st[0])

    def stochastic_round(self, xs, state):
        st = self.ffi.new("uint32_t *", state)
        out = [int(self.lib.pockmcu_stochastic_round(float(F32(x)), st)) for x in xs]
        return np.array(out, dtype=np.int64), int(st[0])

    def update_s8(self, q, grad, coef, accum, velocity, opt, state):
        q = np.ascontiguousarray(q, dtype=np.int8).copy()
        grad = np.ascontiguousarray(grad, dtype=np.float32)
        st = self.ffi.new("uint32_t *", state)
        self.lib.pockmcu_update_s8(self.p("int8_t", q), self.p("float", grad), q.size, float(F32(coef)),
                                   self.p("float", accum), self.p("float", velocity), opt, st)
        return q, int(st[0])

    def update_s32(self, q, grad, coef, accum, velocity, opt, state):
        q = np.ascontiguousarray(q, dtype=np.int32).copy()
        grad = np.ascontiguousarray(grad, dtype=np.float32)
        coef = np.ascontiguousarray(coef, dtype=np.float32)
        st = self.ffi.new("uint32_t *", state)
        self.lib.pockmcu_update_s32(self.p("int32_t", q), self.p("float", grad), q.size, self.p("float", coef),
                                    self.p("float", accum), self.p("float", velocity), opt, st)
        return q, int(st[0])

    # -- layers ----------------------------------------------------------------
    def conv_grad_input(self, g: Geom, n, cin, w, fs, go, head=None, head_c=0, status=False):
        """head: split storage, [O, KH, KW, head_c] int8 (channels < head_c of every tap): the split
        kernel (also whenever head_c is given); else the plain one."""
        co, kh, kw, _ = w.shape
        gi = np.full((n, *g.in_hw, cin), np.nan, dtype=np.float32)
        args = (self.conv_params(g), self.dims(n, *g.in_hw, cin), self.dims(co, kh, kw, w.shape[3]),
                self.p("int8_t", np.ascontiguousarray(w, dtype=np.int8)))
        rest = (self.p("float", np.ascontiguousarray(fs, dtype=np.float32)), self.dims(n, *g.out, co),
                self.p("float", np.ascontiguousarray(go, dtype=np.float32)), self.p("float", gi))
        if head is None and head_c == 0:
            st = self.lib.pockmcu_conv_grad_input_f32(*args, *rest)
        else:
            st = self.lib.pockmcu_conv_grad_input_split_f32(
                *args, self.p("int8_t", None if head is None else np.ascontiguousarray(head, dtype=np.int8)),
                int(head_c), *rest)
        if status:
            return st, gi
        assert st == 0, st
        return gi

    def conv_forward(self, g: Geom, x, w, bias, mult, shift, in_off, out_off, act, ort, head=None, head_c=0,
                     split=False, simd=False):
        """int8 forward conv: arm_convolve_wrapper_s8 / pockmcu_convolve_ort_s8 (split=False) or
        pockmcu_convolve_split_s8 (split=True, head as in conv_grad_input; simd: its DSP form
        pockmcu_convolve_split_s8_simd). Returns (status, output)."""
        n, _, _, cin = x.shape
        co, kh, kw, kc = w.shape
        p = self.conv_params(g, in_off)
        p.output_offset = int(out_off)
        p.activation.min, p.activation.max = act
        mult = np.ascontiguousarray(mult, np.int32)
        shift = np.ascontiguousarray(shift, np.int32)
        q = self.ffi.new("cmsis_nn_per_channel_quant_params *")
        q.multiplier, q.shift = self.p("int32_t", mult), self.p("int32_t", shift)
        y = np.full((n, *g.out, co), 55, np.int8)
        ctx = self.ffi.new("cmsis_nn_context *")
        args_in = (ctx, p, q, self.dims(n, *g.in_hw, cin), self.p("int8_t", np.ascontiguousarray(x, np.int8)),
                   self.dims(co, kh, kw, kc), self.p("int8_t", np.ascontiguousarray(w, np.int8)))
        args_out = (self.dims(1, 1, 1, co), self.p("int32_t", None if bias is None else np.ascontiguousarray(
            bias, np.int32)), self.dims(n, *g.out, co), self.p("int8_t", y))
        if split:
            hp = self.p("int8_t", None if head is None else np.ascontiguousarray(head, np.int8))
            f = self.lib.pockmcu_convolve_split_s8_simd if simd else self.lib.pockmcu_convolve_split_s8
            st = f(*args_in, hp, int(head_c), *args_out, int(ort))
        elif ort:
            st = self.lib.pockmcu_convolve_ort_s8(*args_in, *args_out)
        else:
            st = self.lib.arm_convolve_wrapper_s8(*args_in, *args_out)
        return st, y

    def dw_grad_input(self, g: Geom, n, cin, ch_mult, w, fs, go):
        _, kh, kw, co = w.shape
        gi = np.full((n, *g.in_hw, cin), np.nan, dtype=np.float32)
        st = self.lib.pockmcu_depthwise_conv_grad_input_f32(
            self.dw_params(g, ch_mult), self.dims(n, *g.in_hw, cin), self.dims(1, kh, kw, co),
            self.p("int8_t", np.ascontiguousarray(w, dtype=np.int8)),
            self.p("float", np.ascontiguousarray(fs, dtype=np.float32)), self.dims(n, *g.out, co),
            self.p("float", np.ascontiguousarray(go, dtype=np.float32)), self.p("float", gi))
        assert st == 0, st
        return gi

    def dw_grad_input_rows(self, g: Geom, n, cin, ch_mult, w, fs, go, in_place=False, buf_bytes=None):
        """The row-by-row kernel; in place: grad_input is written over (a copy of) grad_output."""
        _, kh, kw, co = w.shape
        params, in_d, f_d = self.dw_params(g, ch_mult), self.dims(n, *g.in_hw, cin), self.dims(1, kh, kw, co)
        size = self.lib.pockmcu_depthwise_conv_grad_input_rows_f32_get_buffer_size(params, in_d, f_d)
        ring = np.full(max(size // 4, 1), np.nan, np.float32)
        ctx = self.ffi.new("cmsis_nn_context *")
        ctx.buf, ctx.size = self.ffi.cast("void *", self.ffi.from_buffer(ring)), size if buf_bytes is None else buf_bytes
        src = np.ascontiguousarray(go, dtype=np.float32).copy()
        gi = src if in_place else np.full((n, *g.in_hw, cin), np.nan, dtype=np.float32)
        st = self.lib.pockmcu_depthwise_conv_grad_input_rows_f32(
            ctx, params, in_d, f_d, self.p("int8_t", np.ascontiguousarray(w, dtype=np.int8)),
            self.p("float", np.ascontiguousarray(fs, dtype=np.float32)), self.dims(n, *g.out, co),
            self.p("float", src), self.p("float", gi))
        return st, gi.reshape(n, *g.in_hw, cin)

    def fc_grad_input(self, w, f_off, fs, go):
        out_f, in_f = w.shape
        b = go.shape[0]
        gi = np.full((b, in_f), np.nan, dtype=np.float32)
        st = self.lib.pockmcu_fully_connected_grad_input_f32(
            self.dims(b, 1, 1, in_f), self.dims(in_f, 1, 1, out_f),
            self.p("int8_t", np.ascontiguousarray(w, dtype=np.int8)), int(f_off),
            self.p("float", np.ascontiguousarray(fs, dtype=np.float32)),
            self.p("float", np.ascontiguousarray(go, dtype=np.float32)), self.p("float", gi))
        assert st == 0, st
        return gi

    def conv_wgrad(self, g: Geom, x_saved, in_off, w, cb, go, coef, accum, velocity, opt, state,
                   buf_bytes=None):
        """Returns (status, updated filter copy, rng state)."""
        n, _, _, k = x_saved.shape
        co, kh, kw, cin = w.shape
        w = np.ascontiguousarray(w, dtype=np.int8).copy()
        in_d, f_d = self.dims(n, *g.in_hw, k), self.dims(co, kh, kw, cin)
        need = self.lib.pockmcu_conv_wgrad_update_s8_get_buffer_size(in_d, f_d)
        assert need == min(4, co) * kh * kw * k * 4  # up to 4 output channels at a time
        ctx, _keep = self.ctx(need if buf_bytes is None else buf_bytes)
        st = self.ffi.new("uint32_t *", state)
        status = self.lib.pockmcu_conv_wgrad_update_s8(
            ctx, self.conv_params(g, in_off), in_d, self.p("int8_t", np.ascontiguousarray(x_saved, np.int8)),
            f_d, self.p("int8_t", w), int(cb), self.dims(n, *g.out, co),
            self.p("float", np.ascontiguousarray(go, dtype=np.float32)),
            self.p("float", np.ascontiguousarray(coef, dtype=np.float32)),
            self.p("float", accum), self.p("float", velocity), opt, st)
        return status, w, int(st[0])

    def dw_wgrad(self, g: Geom, ch_mult, x_saved, in_off, w, cb, go, coef, accum, velocity, opt, state,
                 buf_bytes=None):
        n, _, _, k = x_saved.shape
        _, kh, kw, co = w.shape
        w = np.ascontiguousarray(w, dtype=np.int8).copy()
        in_d, f_d = self.dims(n, *g.in_hw, k), self.dims(1, kh, kw, co)
        need = self.lib.pockmcu_depthwise_conv_wgrad_update_s8_get_buffer_size(in_d, f_d)
        assert need == co * 4 and need >= k * ch_mult * 4
        ctx, _keep = self.ctx(k * ch_mult * 4 if buf_bytes is None else buf_bytes)
        st = self.ffi.new("uint32_t *", state)
        status = self.lib.pockmcu_depthwise_conv_wgrad_update_s8(
            ctx, self.dw_params(g, ch_mult, in_off), in_d,
            self.p("int8_t", np.ascontiguousarray(x_saved, np.int8)), f_d, self.p("int8_t", w), int(cb),
            self.dims(n, *g.out, co), self.p("float", np.ascontiguousarray(go, dtype=np.float32)),
            self.p("float", np.ascontiguousarray(coef, dtype=np.float32)),
            self.p("float", accum), self.p("float", velocity), opt, st)
        return status, w, int(st[0])

    def fc_wgrad(self, x_saved, in_off, w, cb, go, coef, accum, velocity, opt, state):
        b, k = x_saved.shape
        out_f, in_f = w.shape
        w = np.ascontiguousarray(w, dtype=np.int8).copy()
        st = self.ffi.new("uint32_t *", state)
        status = self.lib.pockmcu_fully_connected_wgrad_update_s8(
            self.dims(b, 1, 1, k), self.p("int8_t", np.ascontiguousarray(x_saved, np.int8)), int(in_off),
            self.dims(in_f, 1, 1, out_f), self.p("int8_t", w), int(cb),
            self.p("float", np.ascontiguousarray(go, dtype=np.float32)),
            self.p("float", np.ascontiguousarray(coef, dtype=np.float32)),
            self.p("float", accum), self.p("float", velocity), opt, st)
        return status, w, int(st[0])

    def bias_update(self, bias, go, coef, accum, velocity, opt, state):
        positions, channels = go.shape
        bias = np.ascontiguousarray(bias, dtype=np.int32).copy()
        st = self.ffi.new("uint32_t *", state)
        self.lib.pockmcu_bias_update_s32(self.p("int32_t", bias),
                                         self.p("float", np.ascontiguousarray(go, dtype=np.float32)),
                                         positions, channels,
                                         self.p("float", np.ascontiguousarray(coef, dtype=np.float32)),
                                         self.p("float", accum), self.p("float", velocity), opt, st)
        return bias, int(st[0])

    def slice_s8(self, x, offset, chunk):
        rows = int(np.prod(x.shape[:-1]))
        x = np.ascontiguousarray(x, dtype=np.int8)
        dst = np.empty(x.shape[:-1] + (chunk,), dtype=np.int8)
        self.lib.pockmcu_slice_s8(self.p("int8_t", x), rows, x.shape[-1], offset, chunk, self.p("int8_t", dst))
        return dst

    def slice_f32(self, x, offset, chunk):
        rows = int(np.prod(x.shape[:-1]))
        x = np.ascontiguousarray(x, dtype=np.float32)
        dst = np.empty(x.shape[:-1] + (chunk,), dtype=np.float32)
        self.lib.pockmcu_slice_f32(self.p("float", x), rows, x.shape[-1], offset, chunk, self.p("float", dst))
        return dst


# --------------------------------------------------------------------------
# Python reference of the RNG and the update rule (bit-exact)
# --------------------------------------------------------------------------

M32 = 0xFFFFFFFF


def py_xorshift32(x: int) -> int:
    x ^= (x << 13) & M32
    x ^= x >> 17
    x ^= (x << 5) & M32
    return x


def py_stochastic_round(x: np.ndarray, state: int):
    """Vectorised float32 part; the draws are made sequentially (element order)."""
    x = np.asarray(x, dtype=np.float32).reshape(-1)
    draws = np.empty(x.size, dtype=np.uint32)
    for i in range(x.size):
        state = py_xorshift32(state)
        draws[i] = state
    u = (draws >> 8).astype(np.int32).astype(np.float32) * F32(2.0 ** -24)
    lim = F32(2.0 ** 30)
    xc = np.where(np.isnan(x), F32(0), np.clip(x, -lim, lim)).astype(np.float32)
    t = (xc + u).astype(np.float32)
    return np.floor(t).astype(np.int64), state


def py_update(q, grad, coef, accum, velocity, lr, momentum, batch, apply, state, lo, hi):
    """The update rule on flattened arrays; accum / velocity (float32) are updated in place."""
    q = np.asarray(q).astype(np.int64).reshape(-1)
    coef = np.asarray(coef, dtype=np.float32)
    coef = np.full(q.shape, coef, np.float32) if coef.size == 1 else coef.reshape(-1)
    g = np.asarray(grad, dtype=np.float32).reshape(-1) * coef
    if accum is not None:
        accum += g
        if not apply:
            return q.copy(), state
        g = accum / F32(max(batch, 1))
        accum[:] = 0
    if velocity is not None:
        velocity[:] = F32(momentum) * velocity + g
        g = velocity.copy()
    r, state = py_stochastic_round(F32(-F32(lr)) * g, state)
    return np.clip(q + r, lo, hi), state


# --------------------------------------------------------------------------
# torch references (float64) and numpy float32 order reproductions
# --------------------------------------------------------------------------

def _torch():
    import torch

    torch.set_num_threads(1)
    return torch


def relerr_ok(got, ref, rtol=1e-4, atol=1e-6) -> bool:
    got = np.asarray(got, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    assert got.shape == ref.shape, (got.shape, ref.shape)
    return bool(np.all(np.isfinite(got))) and np.linalg.norm(got - ref) <= rtol * np.linalg.norm(ref) + atol


def assert_close(got, ref, what, rtol=1e-4, atol=1e-6):
    got64, ref64 = np.asarray(got, np.float64), np.asarray(ref, np.float64)
    assert relerr_ok(got64, ref64, rtol, atol), (
        f"{what}: rel err {np.linalg.norm(got64 - ref64) / max(np.linalg.norm(ref64), 1e-300):.3g}")


def torch_conv(x_real, w_real, g: Geom, go, groups=1):
    """x_real NHWC, w_real OHWI (OHW1 for groups), go NHWC. Returns (grad x, grad w) as NHWC / OHWI."""
    torch = _torch()
    F = torch.nn.functional
    x = torch.tensor(np.ascontiguousarray(x_real.transpose(0, 3, 1, 2)), dtype=torch.float64, requires_grad=True)
    w = torch.tensor(np.ascontiguousarray(w_real.transpose(0, 3, 1, 2)), dtype=torch.float64, requires_grad=True)
    xp = F.pad(x, (g.pad_before[1], g.pad_after[1], g.pad_before[0], g.pad_after[0]))
    y = F.conv2d(xp, w, stride=g.stride, dilation=g.dil, groups=groups)
    assert tuple(y.shape[2:]) == g.out, (tuple(y.shape), g)
    (y * torch.tensor(go.transpose(0, 3, 1, 2), dtype=torch.float64)).sum().backward()
    return x.grad.numpy().transpose(0, 2, 3, 1), w.grad.numpy().transpose(0, 2, 3, 1)


def np_patches(xf, g: Geom):
    """xf: float32 NHWC (already offset). Returns patches [n, oh, ow, kh, kw, c] with 0 outside."""
    n, h, w, c = xf.shape
    ph, pw = g.pad_before
    big = (g.out[0] - 1) * g.stride[0] + (g.k[0] - 1) * g.dil[0] + 1
    bigw = (g.out[1] - 1) * g.stride[1] + (g.k[1] - 1) * g.dil[1] + 1
    xp = np.zeros((n, max(big, ph + h), max(bigw, pw + w), c), dtype=np.float32)
    xp[:, ph:ph + h, pw:pw + w] = xf
    iy = (np.arange(g.out[0]) * g.stride[0])[:, None] + np.arange(g.k[0]) * g.dil[0]
    ix = (np.arange(g.out[1]) * g.stride[1])[:, None] + np.arange(g.k[1]) * g.dil[1]
    return xp[:, iy[:, None, :, None], ix[None, :, None, :], :]  # n, oh, ow, kh, kw, c


def np_conv_wgrad_order(x_saved, in_off, go, g: Geom):
    """G[o][i][j][c'] accumulated in float32 over (n, oh, ow) ascending, from +0."""
    xf = (x_saved.astype(np.int32) + in_off).astype(np.float32)
    pt = np_patches(xf, g)
    n, oh, ow, co = go.shape
    G = np.zeros((co,) + pt.shape[3:], dtype=np.float32)
    for b in range(n):
        for y in range(oh):
            for x in range(ow):
                G += go[b, y, x][:, None, None, None] * pt[b, y, x][None]
    return G


def np_dw_wgrad_order(x_saved, in_off, go_sel, g: Geom, ch_mult):
    """G[i][j][c'*m+mm] over (n, oh, ow) ascending from +0; go_sel: the trained output channels."""
    xf = (x_saved.astype(np.int32) + in_off).astype(np.float32)
    pt = np.repeat(np_patches(xf, g), ch_mult, axis=-1)  # n, oh, ow, kh, kw, k*m
    n, oh, ow, _ = go_sel.shape
    G = np.zeros(pt.shape[3:], dtype=np.float32)
    for b in range(n):
        for y in range(oh):
            for x in range(ow):
                G += go_sel[b, y, x][None, None, :] * pt[b, y, x]
    return G


def np_conv_grad_input_order(w, fs, go, g: Geom, n, cin):
    """Scatter order (n, oh, ow, i, j, o) in float32, o summed sequentially (cumsum)."""
    co = w.shape[0]
    wf = w.astype(np.float32)
    gi = np.zeros((n, *g.in_hw, cin), dtype=np.float32)
    for b in range(n):
        for y in range(g.out[0]):
            for x in range(g.out[1]):
                s = (go[b, y, x] * fs).astype(np.float32)  # [o]
                for i in range(g.k[0]):
                    iy = y * g.stride[0] - g.pad_before[0] + i * g.dil[0]
                    if not 0 <= iy < g.in_hw[0]:
                        continue
                    for j in range(g.k[1]):
                        ix = x * g.stride[1] - g.pad_before[1] + j * g.dil[1]
                        if not 0 <= ix < g.in_hw[1]:
                            continue
                        terms = np.empty((co + 1, cin), dtype=np.float32)
                        terms[0] = gi[b, iy, ix]
                        terms[1:] = s[:, None] * wf[:, i, j, :]
                        gi[b, iy, ix] = np.cumsum(terms, axis=0, dtype=np.float32)[-1]
    return gi


def np_dw_grad_input_order(w, fs, go, g: Geom, n, cin, ch_mult):
    """Scatter order (n, oh, ow, i, j, ic), m summed sequentially (cumsum) in float32."""
    wf = w[0].astype(np.float32)
    gi = np.zeros((n, *g.in_hw, cin), dtype=np.float32)
    for b in range(n):
        for y in range(g.out[0]):
            for x in range(g.out[1]):
                s = (go[b, y, x] * fs).astype(np.float32)  # [oc]
                for i in range(g.k[0]):
                    iy = y * g.stride[0] - g.pad_before[0] + i * g.dil[0]
                    if not 0 <= iy < g.in_hw[0]:
                        continue
                    for j in range(g.k[1]):
                        ix = x * g.stride[1] - g.pad_before[1] + j * g.dil[1]
                        if not 0 <= ix < g.in_hw[1]:
                            continue
                        terms = np.empty((ch_mult + 1, cin), dtype=np.float32)
                        terms[0] = gi[b, iy, ix]
                        terms[1:] = (s * wf[i, j]).reshape(cin, ch_mult).T
                        gi[b, iy, ix] = np.cumsum(terms, axis=0, dtype=np.float32)[-1]
    return gi


def check_floor_ceil(q0, q1, delta, lo=-127, hi=127, what=""):
    """Every updated q lies between floor and ceil of q0 + delta (clamped); delta from float64."""
    q0 = np.asarray(q0, np.int64).reshape(-1)
    q1 = np.asarray(q1, np.int64).reshape(-1)
    delta = np.asarray(delta, np.float64).reshape(-1)
    eps = 1e-4 * np.maximum(1.0, np.abs(delta))
    lo_b = np.clip(q0 + np.floor(delta - eps), lo, hi)
    hi_b = np.clip(q0 + np.ceil(delta + eps), lo, hi)
    bad = (q1 < lo_b) | (q1 > hi_b)
    assert not bad.any(), f"{what}: {bad.sum()} updates outside floor/ceil, e.g. q0={q0[bad][:4]} " \
                          f"delta={delta[bad][:4]} q1={q1[bad][:4]}"


def _rand_scale(rng, lo=2e-3, hi=0.2):
    return float(np.exp(rng.uniform(np.log(lo), np.log(hi))))


def _seed(rng) -> int:
    return int(rng.integers(1, 1 << 32))


# --------------------------------------------------------------------------
# checks (shared by the pytest tests and the sanitizer subprocess)
# --------------------------------------------------------------------------

def check_rng_and_rounding(k: TK, rng, n_iter):
    # xorshift32: known first values from state 1, then long runs against Python
    vals, st = k.xorshift32(1, 3)
    assert vals == [270369, 67634689, 2647435461], vals
    for _ in range(n_iter):
        s0 = _seed(rng)
        vals, st = k.xorshift32(s0, 200)
        ref, s = [], s0
        for _ in range(200):
            s = py_xorshift32(s)
            ref.append(s)
        assert vals == ref and st == s
    # stochastic rounding: bit-exact with the Python model incl. clamps, NaN, huge values
    specials = [0.0, -0.0, 0.5, -0.5, 1.0, -1.0, 1e-30, -1e-30, 2.0 ** 23 + 0.5, -(2.0 ** 23) - 0.5,
                2.0 ** 24, 2.0 ** 30, -(2.0 ** 30), 3e9, -3e9, 1e38, -1e38, float("inf"), float("-inf"),
                float("nan"), 0.999999, -0.999999, 127.3, -127.3]
    for _ in range(n_iter):
        xs = np.concatenate([np.array(specials, np.float32),
                             (rng.standard_normal(300) * 10.0 ** rng.integers(-3, 8, 300)).astype(np.float32)])
        s0 = _seed(rng)
        got, st = k.stochastic_round(xs, s0)
        ref, st_ref = py_stochastic_round(xs, s0)
        assert np.array_equal(got, ref) and st == st_ref
        fin = np.isfinite(xs) & (np.abs(xs) < 2.0 ** 22)
        assert np.all((got[fin] == np.floor(xs[fin])) | (got[fin] == np.floor(xs[fin]) + 1))
    assert int(k.stochastic_round([3e9], 7)[0][0]) == 1 << 30
    assert int(k.stochastic_round([-3e9], 7)[0][0]) == -(1 << 30)
    assert int(k.stochastic_round([float("nan")], 7)[0][0]) == 0
    # unbiased: mean of many roundings of 0.3 / -1.7
    for x in (0.3, -1.7):
        got, _ = k.stochastic_round(np.full(20000, x, np.float32), 12345)
        assert abs(got.mean() - x) < 0.02, (x, got.mean())


def check_update_rule(k: TK, rng, n_iter):
    for it in range(n_iter):
        n = int(rng.integers(1, 60))
        lr = float(F32(_rand_scale(rng, 1e-3, 1.0)))
        mom = float(F32(rng.choice([0.0, 0.5, 0.9])))
        batch = int(rng.integers(1, 4))
        use_acc, use_vel = bool(rng.random() < 0.6), bool(rng.random() < 0.5)
        # int8 parameters
        q = rng.integers(-128, 128, n).astype(np.int8)
        coef = float(F32(_rand_scale(rng, 0.1, 50.0)))
        acc_c = np.zeros(n, np.float32) if use_acc else None
        vel_c = np.zeros(n, np.float32) if use_vel else None
        acc_p = None if acc_c is None else acc_c.copy()
        vel_p = None if vel_c is None else vel_c.copy()
        s_c = s_p = _seed(rng)
        q_c, q_p = q.copy(), q.astype(np.int64)
        for step in range(2 * batch):
            apply = 1 if (acc_c is None or (step + 1) % batch == 0) else 0
            grad = (rng.standard_normal(n) * 10.0 ** rng.integers(-3, 3)).astype(np.float32)
            q_c, s_c = k.update_s8(q_c, grad, coef, acc_c, vel_c, k.opt(lr, mom, batch, apply), s_c)
            q_p, s_p = py_update(q_p, grad, coef, acc_p, vel_p, lr, mom, batch, apply, s_p, -127, 127)
            assert np.array_equal(q_c.astype(np.int64), q_p), (it, step)
            assert s_c == s_p, "RNG draws differ (accumulate-only calls must draw none)"
            if acc_c is not None:
                assert np.array_equal(acc_c.view(np.uint32), acc_p.view(np.uint32))
            if vel_c is not None:
                assert np.array_equal(vel_c.view(np.uint32), vel_p.view(np.uint32))
        # int32 parameters, per-element coef
        q32 = rng.integers(-(1 << 20), 1 << 20, n).astype(np.int32)
        coef32 = rng.uniform(0.5, 1e4, n).astype(np.float32)
        grad = rng.standard_normal(n).astype(np.float32)
        s0 = _seed(rng)
        got, st = k.update_s32(q32, grad, coef32, None, None, k.opt(lr, mom), s0)
        ref, st_ref = py_update(q32, grad, coef32, None, None, lr, mom, 1, 1, s0, I32_MIN, I32_MAX)
        assert np.array_equal(got.astype(np.int64), ref) and st == st_ref
    # accumulate-only calls leave q and the RNG untouched
    q = np.arange(-5, 5, dtype=np.int8)
    acc = np.zeros(10, np.float32)
    q1, st = k.update_s8(q, np.ones(10, np.float32), 2.0, acc, None, k.opt(1.0, 0.0, 2, 0), 99)
    assert np.array_equal(q1, q) and st == 99 and np.all(acc == 2.0)
    # saturation: int8 at +-127 (also from -128), int32 at its limits (x clamped to 2^30 first)
    q = np.array([120, -120, 127, -128, -127, 0], np.int8)
    g = np.array([-1e6, 1e6, -3.0, 0.0, 5.0, 1e30], np.float32)
    q1, _ = k.update_s8(q, g, 1.0, None, None, k.opt(1.0), 5)
    assert q1.tolist()[:4] == [127, -127, 127, -127] and q1[4] < -127 + 1 and q1[5] == -127, q1
    q32 = np.array([I32_MAX - 3, I32_MIN + 3, I32_MAX, I32_MIN, 0, 0], np.int32)
    g32 = np.array([-1e12, 1e12, -1.0, 1.0, -1e30, 1e30], np.float32)
    q1, _ = k.update_s32(q32, g32, np.ones(6, np.float32), None, None, k.opt(1.0), 5)
    assert q1.tolist() == [I32_MAX, I32_MIN, I32_MAX, I32_MIN, 1 << 30, -(1 << 30)], q1


def _conv_case(rng, ch_max=6, n_max=2):
    g = rand_geom(rng)
    n = int(rng.integers(1, n_max + 1))
    cin = int(rng.integers(1, ch_max + 1))
    co = int(rng.integers(1, ch_max + 1))
    zp = int(rng.integers(-128, 128))
    s_x = _rand_scale(rng)
    x = rng.integers(-128, 128, (n, *g.in_hw, cin)).astype(np.int8)
    w = rng.integers(-127, 128, (co, *g.k, cin)).astype(np.int8)
    fs = np.array([_rand_scale(rng, 1e-3, 0.05) for _ in range(co)], np.float32)
    go = rng.standard_normal((n, *g.out, co)).astype(np.float32)
    go[rng.random(go.shape) < 0.2] = 0.0  # ReLU-masked zeros
    return g, n, cin, co, zp, s_x, x, w, fs, go


def check_conv_split(k: TK, rng, n_iter):
    """Split weight storage (a channel-sparse CONV_2D keeps its trained input channels in RAM):
    the first head_c channels of every tap from a head array, the rest from the full filter. The
    forward kernel (both rounding modes) and the input gradient equal the unsplit kernels on the
    merged filter bit for bit, the full filter's head channels are never read, and the weight
    update on the head rows (filter dims {O, KH, KW, head_c}, begin 0) equals the update of those
    channels in the full tensor, RNG stream included."""
    from pockmcu import fixedpoint as fp
    from pockmcu import fixedpoint_ort

    for it in range(n_iter):
        g, n, cin, co, zp, s_x, x, w, fs, go = _conv_case(rng, ch_max=9)
        head_c = [0, cin, int(rng.integers(1, cin + 1))][min(it, 2)] if it < 3 else int(rng.integers(0, cin + 1))
        head = np.ascontiguousarray(w[..., :head_c])
        flash = w.copy()
        flash[..., :head_c] = rng.integers(-128, 128, flash[..., :head_c].shape)  # stale values: never read
        bias = rng.integers(-3000, 3000, co).astype(np.int32) if rng.random() < 0.8 else None
        s_y = s_x * float(np.max(fs)) * rng.uniform(2.0, 40.0)
        in_off, out_off = -zp, int(rng.integers(-128, 128))
        act = (-128, 127) if rng.random() < 0.5 else (int(rng.integers(-128, 0)), int(rng.integers(0, 128)))
        for ort in (0, 1):
            if ort:
                mult, shift = fixedpoint_ort.ort_output_scales(s_x, fs, s_y)
            else:
                mult, shift = (np.array(v, np.int32) for v in zip(*(fp.quantize_multiplier(s_x * float(f) / s_y)
                                                                     for f in fs)))
            st0, want = k.conv_forward(g, x, w, bias, mult, shift, in_off, out_off, act, ort)
            st1, got = k.conv_forward(g, x, flash, bias, mult, shift, in_off, out_off, act, ort,
                                      head if head_c else None, head_c, split=True)
            assert st0 == 0 and st1 == 0, (st0, st1)
            assert np.array_equal(got, want), f"split forward (ort={ort}, head_c={head_c}/{cin}) {g}"
            st2, simd = k.conv_forward(g, x, flash, bias, mult, shift, in_off, out_off, act, ort,
                                       head if head_c else None, head_c, split=True, simd=True)
            assert st2 == 0 and np.array_equal(simd, want), f"split simd forward (ort={ort}, {head_c}/{cin}) {g}"
            assert len(np.unique(want)) > 1 or want.size < 4, "degenerate case: every output clamped"
        gi = k.conv_grad_input(g, n, cin, w, fs, go)
        gi_split = k.conv_grad_input(g, n, cin, flash, fs, go, head if head_c else None, head_c)
        assert np.array_equal(gi.view(np.uint32), gi_split.view(np.uint32)), f"split grad_input {head_c} {g}"

        if head_c:  # the update of the head rows == the update of channels [0, head_c) in place
            x_saved = np.ascontiguousarray(x[..., :head_c])
            coef = (F32(s_x) / fs).astype(np.float32)
            s0 = _seed(rng)
            acc_full, acc_head = (np.zeros(co * g.k[0] * g.k[1] * head_c, np.float32) for _ in range(2))
            for apply in (0, 1):
                opt = k.opt(float(F32(rng.uniform(0.5, 50.0))), 0.0, 2, apply)
                st_a, w_full, s_a = k.conv_wgrad(g, x_saved, -zp, w, 0, go, coef, acc_full, None, opt, s0)
                st_b, w_head, s_b = k.conv_wgrad(g, x_saved, -zp, head, 0, go, coef, acc_head, None, opt, s0)
                assert st_a == 0 and st_b == 0 and s_a == s_b
                assert np.array_equal(w_head, w_full[..., :head_c]), f"split update {head_c} {g}"
                assert np.array_equal(acc_full.view(np.uint32), acc_head.view(np.uint32))
                w, head = w_full, w_head

    # bad arguments
    g, n, cin, co, zp, s_x, x, w, fs, go = _conv_case(rng)
    ones = np.full(co, 1 << 30, np.int32), np.full(co, -8, np.int32)
    for head, head_c in ((None, 1), (np.zeros((co, *g.k, cin + 1), np.int8), cin + 1),
                         (np.zeros((co, *g.k, 1), np.int8), -1)):
        st, _ = k.conv_forward(g, x, w, None, *ones, 0, 0, (-128, 127), 0, head, head_c, split=True)
        assert st == -1, (head_c, st)
        st, _ = k.conv_forward(g, x, w, None, *ones, 0, 0, (-128, 127), 0, head, head_c, split=True, simd=True)
        assert st == -1, (head_c, st)
        st, _ = k.conv_grad_input(g, n, cin, w, fs, go, head, head_c, status=True)
        assert st == -1, (head_c, st)
    st, _ = k.conv_grad_input(g, n, cin, w, fs, go, np.zeros((co, *g.k, 1), np.int8), 0, status=True)
    assert st == -1, "the split input gradient needs a head"
    if cin > 1:  # grouped filters are not splittable
        st, _ = k.conv_forward(g, x, w[..., :1], None, *ones, 0, 0, (-128, 127), 0, w[..., :1], 1, split=True)
        assert st == -1, st
        st, _ = k.conv_forward(g, x, w[..., :1], None, *ones, 0, 0, (-128, 127), 0, w[..., :1], 1, split=True,
                               simd=True)
        assert st == -1, st


def check_conv(k: TK, rng, n_iter):
    for it in range(n_iter):
        g, n, cin, co, zp, s_x, x, w, fs, go = _conv_case(rng)
        x_real = s_x * (x.astype(np.float64) - zp)
        w_real = fs.astype(np.float64)[:, None, None, None] * w
        gx_t, gw_t = torch_conv(x_real, w_real, g, go)

        # input gradient: torch, and bit-exact documented order
        gi = k.conv_grad_input(g, n, cin, w, fs, go)
        assert_close(gi, gx_t, f"conv grad_input {g}")
        if it < 4:
            ref = np_conv_grad_input_order(w, fs, go, g, n, cin)
            assert np.array_equal(gi.view(np.uint32), ref.view(np.uint32)), f"conv grad_input order {g}"

        # trainable channel range (channel-sparse when cb > 0 or kk < cin)
        cb = int(rng.integers(0, cin))
        kk = int(rng.integers(1, cin - cb + 1))
        x_saved = k.slice_s8(x, cb, kk)
        assert np.array_equal(x_saved, x[..., cb:cb + kk])
        ntrain = co * g.k[0] * g.k[1] * kk

        # G through an accumulate-only call: accum == G exactly, nothing else moves
        acc = np.zeros(ntrain, np.float32)
        s0 = _seed(rng)
        st, w1, s1 = k.conv_wgrad(g, x_saved, -zp, w, cb, go, np.ones(co, np.float32), acc, None,
                                  k.opt(1.0, 0.0, 1, 0), s0)
        assert st == 0 and np.array_equal(w1, w) and s1 == s0
        G = acc.reshape(co, *g.k, kk).copy()
        G_ref = np_conv_wgrad_order(x_saved, -zp, go, g)
        assert np.array_equal(G.view(np.uint32), G_ref.view(np.uint32)), f"conv wgrad order {g}"
        G_t = gw_t[..., cb:cb + kk] / s_x
        assert_close(G, G_t, f"conv wgrad {g}")

        # applying update, QAS-style coef, momentum 0, batch 1
        coef = (F32(s_x) / fs).astype(np.float32)
        dmax = float(np.max(np.abs(G * coef[:, None, None, None]))) or 1.0
        lr = float(F32(rng.uniform(1.0, 6.0) / dmax))
        s0 = _seed(rng)
        st, w2, s2 = k.conv_wgrad(g, x_saved, -zp, w, cb, go, coef, None, None, k.opt(lr), s0)
        assert st == 0
        coef_e = np.broadcast_to(coef[:, None, None, None], G.shape)
        q_ref, s_ref = py_update(w[..., cb:cb + kk], G, coef_e, None, None, lr, 0.0, 1, 1, s0, -127, 127)
        assert np.array_equal(w2[..., cb:cb + kk].reshape(-1).astype(np.int64), q_ref) and s2 == s_ref
        mask = np.ones(w.shape, bool)
        mask[..., cb:cb + kk] = False
        assert np.array_equal(w2[mask], w[mask]), "frozen channels changed"
        check_floor_ceil(w[..., cb:cb + kk], w2[..., cb:cb + kk],
                         -lr * G_t * coef_e.astype(np.float64), what=f"conv update {g}")

    # batch of 3 accumulated == one update with the mean gradient; momentum over 3 steps
    for it in range(max(1, n_iter // 3)):
        g, _, cin, co, zp, s_x, x, w, fs, go = _conv_case(rng, n_max=1)
        xs = rng.integers(-128, 128, (3, *g.in_hw, cin)).astype(np.int8)
        gos = rng.standard_normal((3, *g.out, co)).astype(np.float32)
        cb = int(rng.integers(0, cin))
        kk = int(rng.integers(1, cin - cb + 1))
        ntrain = co * g.k[0] * g.k[1] * kk
        coef = (F32(s_x) / fs).astype(np.float32)
        coef_e = np.broadcast_to(coef[:, None, None, None], (co, *g.k, kk)).reshape(-1)
        Gs = []
        for b in range(3):
            a = np.zeros(ntrain, np.float32)
            k.conv_wgrad(g, xs[b:b + 1, ..., cb:cb + kk].copy(), -zp, w, cb, gos[b:b + 1],
                         np.ones(co, np.float32), a, None, k.opt(1.0, 0.0, 1, 0), 1)
            Gs.append(a)
        lr = float(F32(4.0 / (float(np.max(np.abs(Gs[0] * coef_e))) or 1.0)))
        acc = np.zeros(ntrain, np.float32)
        s0 = _seed(rng)
        wc, sc = w, s0
        for b in range(3):
            st, wc, sc = k.conv_wgrad(g, xs[b:b + 1, ..., cb:cb + kk].copy(), -zp, wc, cb, gos[b:b + 1], coef,
                                      acc, None, k.opt(lr, 0.0, 3, 1 if b == 2 else 0), sc)
            assert st == 0
            if b < 2:
                assert np.array_equal(wc, w) and sc == s0
        assert np.all(acc == 0)
        mean = ((Gs[0] * coef_e + Gs[1] * coef_e) + Gs[2] * coef_e) / F32(3)
        wq = np.ascontiguousarray(w[..., cb:cb + kk]).reshape(-1)
        q_one, s_one = k.update_s8(wq, mean.astype(np.float32), 1.0, None, None, k.opt(lr), s0)
        assert np.array_equal(wc[..., cb:cb + kk].reshape(-1), q_one) and sc == s_one
        a_p = np.zeros(ntrain, np.float32)
        q_p, s_p = wq.astype(np.int64), s0
        for b in range(3):
            q_p, s_p = py_update(q_p, Gs[b], coef_e, a_p, None, lr, 0.0, 3, int(b == 2), s_p, -127, 127)
        assert np.array_equal(q_one.astype(np.int64), q_p) and s_one == s_p
        # against torch: mean over the 3 samples
        x_real = s_x * (xs.astype(np.float64) - zp)
        w_real = fs.astype(np.float64)[:, None, None, None] * w
        _, gw_t = torch_conv(x_real, w_real, g, gos)
        delta = -lr * (gw_t[..., cb:cb + kk] / s_x / 3.0).reshape(-1) * coef_e
        check_floor_ceil(wq, wc[..., cb:cb + kk], delta, what="conv batch-3 update")

        # momentum 0.9 over 3 steps (batch 1): bit-exact with the formula
        vel = np.zeros(ntrain, np.float32)
        v_p = np.zeros(ntrain, np.float32)
        wc, sc = w, s0
        q_p, s_p = wq.astype(np.int64), s0
        for b in range(3):
            st, wc, sc = k.conv_wgrad(g, xs[b:b + 1, ..., cb:cb + kk].copy(), -zp, wc, cb, gos[b:b + 1], coef,
                                      None, vel, k.opt(lr, 0.9), sc)
            q_p, s_p = py_update(q_p, Gs[b], coef_e, None, v_p, lr, 0.9, 1, 1, s_p, -127, 127)
            assert np.array_equal(wc[..., cb:cb + kk].reshape(-1).astype(np.int64), q_p) and sc == s_p
            assert np.array_equal(vel.view(np.uint32), v_p.view(np.uint32))
        v64 = np.zeros(ntrain)
        for b in range(3):  # the float64 momentum sum stays close to the float32 one
            v64 = 0.9 * v64 + Gs[b].astype(np.float64) * coef_e
        assert_close(vel, v64, "momentum velocity")

    # saturation through the kernel, errors on bad arguments
    g, n, cin, co, zp, s_x, x, w, fs, go = _conv_case(rng)
    w = np.where(rng.random(w.shape) < 0.5, 126, -126).astype(np.int8)
    st, w2, _ = k.conv_wgrad(g, x, -zp, w, 0, go, np.full(co, 1e6, np.float32), None, None, k.opt(1.0), 3)
    assert st == 0 and w2.min() >= -127 and w2.max() <= 127
    st, _, _ = k.conv_wgrad(g, x, -zp, w, 0, go, np.ones(co, np.float32), None, None, k.opt(1.0), 3,
                            buf_bytes=g.k[0] * g.k[1] * cin * 4 - 4)
    assert st == -1, "a too small ctx buffer must be refused"
    st, _, _ = k.conv_wgrad(g, x, -zp, w, 1, go, np.ones(co, np.float32), None, None, k.opt(1.0), 3)
    assert st == -1, "channel range outside C_in must be refused"


def check_depthwise_rows(k: TK, rng, n_iter):
    """The row-by-row input gradient (stride 1) in place over grad_output: the scatter kernel's bits."""
    for _ in range(n_iter):
        g = rand_geom(rng, s_max=1, d_max=3)
        g = Geom(g.in_hw, g.k, (1, 1), g.dil, True)       # SAME, stride 1: input and output shapes agree
        # channel counts below, at and across the kernel's 16-channel blocks
        n, cin = int(rng.integers(1, 3)), int(rng.choice([1, 3, 6, 16, 17, 40]))
        w = rng.integers(-127, 128, (1, *g.k, cin)).astype(np.int8)
        fs = np.array([_rand_scale(rng, 1e-3, 0.05) for _ in range(cin)], np.float32)
        go = rng.standard_normal((n, *g.out, cin)).astype(np.float32)
        want = k.dw_grad_input(g, n, cin, 1, w, fs, go)
        size = k.lib.pockmcu_depthwise_conv_grad_input_rows_f32_get_buffer_size(
            k.dw_params(g, 1), k.dims(n, *g.in_hw, cin), k.dims(1, *g.k, cin))
        lag = (g.k[0] - 1) * g.dil[0] - g.pad_before[0]
        assert size == max(lag + 1, 1) * g.in_hw[1] * min(cin, 16) * 4     # the ring: one channel block
        for in_place in (False, True):
            st, got = k.dw_grad_input_rows(g, n, cin, 1, w, fs, go, in_place=in_place)
            assert st == 0 and np.array_equal(got.view(np.uint32), want.view(np.uint32)), (g, in_place)


def check_depthwise(k: TK, rng, n_iter):
    checked_in_place = []
    for it in range(n_iter):
        g = rand_geom(rng)
        n = int(rng.integers(1, 3))
        cin = int(rng.integers(1, 7))
        m = int(rng.choice([1, 2, 3]))
        co = cin * m
        zp = int(rng.integers(-128, 128))
        s_x = _rand_scale(rng)
        x = rng.integers(-128, 128, (n, *g.in_hw, cin)).astype(np.int8)
        w = rng.integers(-127, 128, (1, *g.k, co)).astype(np.int8)
        fs = np.array([_rand_scale(rng, 1e-3, 0.05) for _ in range(co)], np.float32)
        go = rng.standard_normal((n, *g.out, co)).astype(np.float32)
        x_real = s_x * (x.astype(np.float64) - zp)
        w_real = (fs.astype(np.float64) * w[0]).transpose(2, 0, 1)[..., None]  # [co, kh, kw, 1]
        gx_t, gw_t = torch_conv(x_real, w_real, g, go, groups=cin)
        gw_t = gw_t[..., 0].transpose(1, 2, 0)  # [kh, kw, co]

        gi = k.dw_grad_input(g, n, cin, m, w, fs, go)
        assert_close(gi, gx_t, f"depthwise grad_input m={m} {g}")
        if g.stride == (1, 1):   # the row-by-row kernel: the same bits, in place too when shapes allow
            st, rows = k.dw_grad_input_rows(g, n, cin, m, w, fs, go)
            assert st == 0 and np.array_equal(rows.view(np.uint32), gi.view(np.uint32)), f"rows kernel {g}"
            if m == 1 and g.out == g.in_hw:
                st, rows = k.dw_grad_input_rows(g, n, cin, m, w, fs, go, in_place=True)
                assert st == 0 and np.array_equal(rows.view(np.uint32), gi.view(np.uint32)), f"in place {g}"
                checked_in_place.append(g)
            st, _ = k.dw_grad_input_rows(g, n, cin, m, w, fs, go, buf_bytes=0)
            assert st == -1
        if it < 6:
            ref = np_dw_grad_input_order(w, fs, go, g, n, cin, m)
            assert np.array_equal(gi.view(np.uint32), ref.view(np.uint32)), f"depthwise grad_input order {g}"

        cb = int(rng.integers(0, cin))
        kk = int(rng.integers(1, cin - cb + 1))
        x_saved = k.slice_s8(x, cb, kk)
        oc0, oc1 = cb * m, (cb + kk) * m
        ntrain = g.k[0] * g.k[1] * kk * m
        acc = np.zeros(ntrain, np.float32)
        s0 = _seed(rng)
        st, w1, s1 = k.dw_wgrad(g, m, x_saved, -zp, w, cb, go, np.ones(co, np.float32), acc, None,
                                k.opt(1.0, 0.0, 1, 0), s0)
        assert st == 0 and np.array_equal(w1, w) and s1 == s0
        G = acc.reshape(*g.k, kk * m).copy()
        G_ref = np_dw_wgrad_order(x_saved, -zp, np.ascontiguousarray(go[..., oc0:oc1]), g, m)
        assert np.array_equal(G.view(np.uint32), G_ref.view(np.uint32)), f"depthwise wgrad order {g}"
        G_t = gw_t[..., oc0:oc1] / s_x
        assert_close(G, G_t, f"depthwise wgrad m={m} {g}")

        coef = (F32(s_x) / fs).astype(np.float32)
        coef_e = np.broadcast_to(coef[oc0:oc1], G.shape)
        lr = float(F32(rng.uniform(1.0, 6.0) / (float(np.max(np.abs(G * coef_e))) or 1.0)))
        use_acc = it % 3 == 1
        use_vel = it % 3 == 2
        acc = np.zeros(ntrain, np.float32) if use_acc else None
        vel = np.zeros(ntrain, np.float32) if use_vel else None
        acc_p = None if acc is None else acc.copy()
        vel_p = None if vel is None else vel.copy()
        s0 = _seed(rng)
        st, w2, s2 = k.dw_wgrad(g, m, x_saved, -zp, w, cb, go, coef, acc, vel, k.opt(lr, 0.5, 1, 1), s0)
        assert st == 0
        q_ref, s_ref = py_update(w[0, ..., oc0:oc1], G, coef_e, acc_p, vel_p, lr, 0.5, 1, 1, s0, -127, 127)
        assert np.array_equal(w2[0, ..., oc0:oc1].reshape(-1).astype(np.int64), q_ref) and s2 == s_ref
        mask = np.ones(w.shape, bool)
        mask[..., oc0:oc1] = False
        assert np.array_equal(w2[mask], w[mask]), "frozen depthwise channels changed"
        check_floor_ceil(w[0, ..., oc0:oc1], w2[0, ..., oc0:oc1], -lr * G_t * coef_e.astype(np.float64),
                         what=f"depthwise update {g}")
    st, _, _ = k.dw_wgrad(g, m, x_saved, -zp, w, cb, go, np.ones(co, np.float32), None, None, k.opt(1.0), 3,
                          buf_bytes=kk * m * 4 - 4)
    assert st == -1


def check_fc(k: TK, rng, n_iter):
    torch = _torch()
    for it in range(n_iter):
        b = int(rng.integers(1, 5))
        in_f = int(rng.integers(1, 70))
        out_f = int(rng.integers(1, 20))
        zp = int(rng.integers(-128, 128))
        f_off = int(rng.integers(-20, 21))
        s_x = _rand_scale(rng)
        x = rng.integers(-128, 128, (b, in_f)).astype(np.int8)
        w = rng.integers(-127, 108, (out_f, in_f)).astype(np.int8)
        fs = np.full(out_f, _rand_scale(rng, 1e-3, 0.05), np.float32)
        if it % 2:
            fs = np.array([_rand_scale(rng, 1e-3, 0.05) for _ in range(out_f)], np.float32)
        go = rng.standard_normal((b, out_f)).astype(np.float32)
        xt = torch.tensor(s_x * (x.astype(np.float64) - zp), requires_grad=True)
        wt = torch.tensor(fs.astype(np.float64)[:, None] * (w.astype(np.float64) + f_off), requires_grad=True)
        ((xt @ wt.T) * torch.tensor(go, dtype=torch.float64)).sum().backward()
        gx_t, gw_t = xt.grad.numpy(), wt.grad.numpy()

        gi = k.fc_grad_input(w, f_off, fs, go)
        assert_close(gi, gx_t, "fc grad_input")
        ref = np.zeros((b, in_f), np.float32)  # order: o ascending, from +0
        for o in range(out_f):
            ref += (go[:, o] * fs[o]).astype(np.float32)[:, None] * (w[o].astype(np.int32) + f_off).astype(np.float32)
        assert np.array_equal(gi.view(np.uint32), ref.view(np.uint32)), "fc grad_input order"

        cb = int(rng.integers(0, in_f))
        kk = int(rng.integers(1, in_f - cb + 1))
        x_saved = k.slice_s8(x, cb, kk)
        acc = np.zeros(out_f * kk, np.float32)
        st, w1, s1 = k.fc_wgrad(x_saved, -zp, w, cb, go, np.ones(out_f, np.float32), acc, None,
                                k.opt(1.0, 0.0, 1, 0), 77)
        assert st == 0 and np.array_equal(w1, w) and s1 == 77
        G = acc.reshape(out_f, kk).copy()
        G_ref = np.zeros((out_f, kk), np.float32)
        xf = (x_saved.astype(np.int32) - zp).astype(np.float32)
        for bb in range(b):
            G_ref += go[bb][:, None] * xf[bb][None, :]
        assert np.array_equal(G.view(np.uint32), G_ref.view(np.uint32)), "fc wgrad order"
        G_t = gw_t[:, cb:cb + kk] / s_x
        assert_close(G, G_t, "fc wgrad")

        coef = (F32(s_x) / fs).astype(np.float32)
        coef_e = np.broadcast_to(coef[:, None], G.shape)
        lr = float(F32(rng.uniform(1.0, 6.0) / (float(np.max(np.abs(G * coef_e))) or 1.0)))
        s0 = _seed(rng)
        st, w2, s2 = k.fc_wgrad(x_saved, -zp, w, cb, go, coef, None, None, k.opt(lr), s0)
        assert st == 0
        q_ref, s_ref = py_update(w[:, cb:cb + kk], G, coef_e, None, None, lr, 0.0, 1, 1, s0, -127, 127)
        assert np.array_equal(w2[:, cb:cb + kk].reshape(-1).astype(np.int64), q_ref) and s2 == s_ref
        assert np.array_equal(np.delete(w2, np.s_[cb:cb + kk], axis=1), np.delete(w, np.s_[cb:cb + kk], axis=1))
        check_floor_ceil(w[:, cb:cb + kk], w2[:, cb:cb + kk], -lr * G_t * coef_e.astype(np.float64),
                         what="fc update")
    st, _, _ = k.fc_wgrad(x_saved, -zp, w, in_f - kk + 1, go, coef, None, None, k.opt(lr), 1)
    assert st == -1


def check_bias(k: TK, rng, n_iter):
    for it in range(n_iter):
        positions = int(rng.integers(1, 50))
        ch = int(rng.integers(1, 40))
        go = rng.standard_normal((positions, ch)).astype(np.float32)
        bias = rng.integers(-5000, 5000, ch).astype(np.int32)
        acc = np.zeros(ch, np.float32)
        b1, s1 = k.bias_update(bias, go, np.ones(ch, np.float32), acc, None, k.opt(1.0, 0.0, 1, 0), 9)
        assert np.array_equal(b1, bias) and s1 == 9
        G_ref = np.cumsum(go, axis=0, dtype=np.float32)[-1]  # sequential over p
        assert np.array_equal(acc.view(np.uint32), G_ref.view(np.uint32)), "bias grad order"
        assert_close(acc, go.astype(np.float64).sum(0), "bias grad")
        # QAS coef = 1 / (s_w * s_x)^2 * (s_w * s_x) = 1 / (s_w * s_x): large, per channel
        coef = (1.0 / np.array([_rand_scale(rng, 1e-6, 1e-3) for _ in range(ch)])).astype(np.float32)
        lr = float(F32(rng.uniform(1.0, 100.0) / float(np.max(np.abs(acc * coef)))))
        mom = 0.9 if it % 2 else 0.0
        vel = np.zeros(ch, np.float32) if it % 2 else None
        vel_p = None if vel is None else vel.copy()
        s0 = _seed(rng)
        b2, s2 = k.bias_update(bias, go, coef, None, vel, k.opt(lr, mom), s0)
        ref, s_ref = py_update(bias, acc, coef, None, vel_p, lr, mom, 1, 1, s0, I32_MIN, I32_MAX)
        assert np.array_equal(b2.astype(np.int64), ref) and s2 == s_ref
        check_floor_ceil(bias, b2, -lr * go.astype(np.float64).sum(0) * coef, lo=I32_MIN, hi=I32_MAX,
                         what="bias update")
    # int32 saturation through the kernel
    bias = np.array([I32_MAX - 2, I32_MIN + 2], np.int32)
    b2, _ = k.bias_update(bias, np.array([[-1.0, 1.0]], np.float32), np.full(2, 1e12, np.float32),
                          None, None, k.opt(1.0), 4)
    assert b2.tolist() == [I32_MAX, I32_MIN]


def check_pools(k: TK, rng, n_iter):
    torch = _torch()
    F = torch.nn.functional
    for it in range(n_iter):
        g = rand_geom(rng, k_max=4, s_max=3, d_max=1, size=(1, 9))
        n = int(rng.integers(1, 3))
        ch = int(rng.integers(1, 6))
        go = rng.standard_normal((n, *g.out, ch)).astype(np.float32)
        pads = (g.pad_before[1], g.pad_after[1], g.pad_before[0], g.pad_after[0])
        got_t = torch.tensor(go.transpose(0, 3, 1, 2), dtype=torch.float64)
        # average pool: divide by the in-bounds count (sum pool of x / sum pool of ones)
        gi = np.full((n, *g.in_hw, ch), np.nan, np.float32)
        st = k.lib.pockmcu_avgpool_grad_f32(k.pool_params(g), k.dims(n, *g.in_hw, ch), k.dims(1, *g.k, 1),
                                            k.dims(n, *g.out, ch), k.p("float", go), k.p("float", gi))
        assert st == 0
        xt = torch.zeros((n, ch, *g.in_hw), dtype=torch.float64, requires_grad=True)
        kk = g.k[0] * g.k[1]
        sums = F.avg_pool2d(F.pad(xt, pads), g.k, g.stride) * kk
        cnt = F.avg_pool2d(F.pad(torch.ones_like(xt), pads), g.k, g.stride) * kk
        assert tuple(sums.shape[2:]) == g.out
        ((sums / cnt) * got_t).sum().backward()
        assert_close(gi, xt.grad.numpy().transpose(0, 2, 3, 1), f"avgpool grad {g}")
        ref = np.zeros_like(gi)  # exact: float32 division by the count, sums over (oh, ow) ascending
        for b in range(n):
            for oy in range(g.out[0]):
                for ox in range(g.out[1]):
                    y0, x0 = oy * g.stride[0] - g.pad_before[0], ox * g.stride[1] - g.pad_before[1]
                    ys = slice(max(y0, 0), min(y0 + g.k[0], g.in_hw[0]))
                    xs = slice(max(x0, 0), min(x0 + g.k[1], g.in_hw[1]))
                    cnt = F32((ys.stop - ys.start) * (xs.stop - xs.start))
                    ref[b, ys, xs] += go[b, oy, ox] / cnt
        assert np.array_equal(gi.view(np.uint32), ref.view(np.uint32)), f"avgpool exact {g}"
        # max pool with many ties (values from a tiny set): first maximum in scan order
        x = rng.integers(-3, 3, (n, *g.in_hw, ch)).astype(np.int8)
        if it % 2:
            x = rng.integers(-128, 128, (n, *g.in_hw, ch)).astype(np.int8)
        gi = np.full((n, *g.in_hw, ch), np.nan, np.float32)
        st = k.lib.pockmcu_max_pool_grad_f32(k.pool_params(g), k.dims(n, *g.in_hw, ch), k.p("int8_t", x),
                                             k.dims(1, *g.k, 1), k.dims(n, *g.out, ch), k.p("float", go),
                                             k.p("float", gi))
        assert st == 0
        xt = torch.tensor((0.05 * (x.astype(np.float64) + 7)).transpose(0, 3, 1, 2), requires_grad=True)
        y = F.max_pool2d(F.pad(xt, pads, value=-math.inf), g.k, g.stride)
        (y * got_t).sum().backward()
        gmax_t = xt.grad.numpy().transpose(0, 2, 3, 1)
        assert_close(gi, gmax_t, f"maxpool grad {g}")
        # exact reference (scan order, strict >, float32 sums over (oh, ow) ascending)
        ref = np.zeros_like(gi)
        for b in range(n):
            for oy in range(g.out[0]):
                for ox in range(g.out[1]):
                    y0, x0 = oy * g.stride[0] - g.pad_before[0], ox * g.stride[1] - g.pad_before[1]
                    for c in range(ch):
                        best = None
                        for i in range(g.k[0]):
                            for j in range(g.k[1]):
                                yy, xx = y0 + i, x0 + j
                                if 0 <= yy < g.in_hw[0] and 0 <= xx < g.in_hw[1]:
                                    if best is None or x[b, yy, xx, c] > x[b, best[0], best[1], c]:
                                        best = (yy, xx)
                        if best is not None:
                            ref[b, best[0], best[1], c] += go[b, oy, ox, c]
        assert np.array_equal(gi.view(np.uint32), ref.view(np.uint32)), f"maxpool exact {g}"


def check_mean_pad_slice_add(k: TK, rng, n_iter):
    torch = _torch()
    F = torch.nn.functional
    for _ in range(n_iter):
        n, h, w, c = (int(v) for v in rng.integers(1, 7, 4))
        go = rng.standard_normal((n, c)).astype(np.float32)
        gi = np.full((n, h, w, c), np.nan, np.float32)
        k.lib.pockmcu_mean_grad_f32(k.dims(n, h, w, c), k.p("float", go), k.p("float", gi))
        xt = torch.zeros((n, h, w, c), dtype=torch.float64, requires_grad=True)
        (xt.mean(dim=(1, 2)) * torch.tensor(go, dtype=torch.float64)).sum().backward()
        assert_close(gi, xt.grad.numpy(), "mean grad")
        assert np.array_equal(gi, np.broadcast_to((go / F32(h * w))[:, None, None, :], gi.shape))
        # pad (crop), all four dims
        pre = [int(v) for v in rng.integers(0, 3, 4)]
        post = [int(v) for v in rng.integers(0, 3, 4)]
        shp = [pre[i] + (n, h, w, c)[i] + post[i] for i in range(4)]
        gpad = rng.standard_normal(shp).astype(np.float32)
        gi = np.full((n, h, w, c), np.nan, np.float32)
        st = k.lib.pockmcu_pad_grad_f32(k.dims(n, h, w, c), k.dims(*pre), k.dims(*post), k.p("float", gpad),
                                        k.p("float", gi))
        assert st == 0
        xt = torch.zeros((n, h, w, c), dtype=torch.float64, requires_grad=True)
        y = F.pad(xt, (pre[3], post[3], pre[2], post[2], pre[1], post[1], pre[0], post[0]))
        (y * torch.tensor(gpad, dtype=torch.float64)).sum().backward()
        assert np.array_equal(gi, xt.grad.numpy().astype(np.float32)), "pad grad"
        assert k.lib.pockmcu_pad_grad_f32(k.dims(n, h, w, c), k.dims(0, -1, 0, 0), k.dims(*post),
                                          k.p("float", gpad), k.p("float", gi)) == -1
        # slices and add
        off = int(rng.integers(0, c))
        chunk = int(rng.integers(1, c - off + 1))
        xf = rng.standard_normal((n, h, w, c)).astype(np.float32)
        assert np.array_equal(k.slice_f32(xf, off, chunk), xf[..., off:off + chunk])
        xi = rng.integers(-128, 128, (n, h, w, c)).astype(np.int8)
        assert np.array_equal(k.slice_s8(xi, off, chunk), xi[..., off:off + chunk])
        a = rng.standard_normal(37).astype(np.float32)
        b = rng.standard_normal(37).astype(np.float32)
        out = np.empty(37, np.float32)
        k.lib.pockmcu_add_f32(k.p("float", a), k.p("float", b), k.p("float", out), 37)
        assert np.array_equal(out, a + b)
        a2 = a.copy()
        k.lib.pockmcu_add_f32(k.p("float", a2), k.p("float", b), k.p("float", a2), 37)  # aliasing
        assert np.array_equal(a2, a + b)


def check_conv_1x1_from_mean(k: TK, rng, n_iter):
    """The fused backward of a 1x1 conv feeding a spatial mean = the unfused kernels bit for bit:
    mean_grad -> mask_apply -> bias_update -> conv_grad_input, with exact zeros, masked entries and
    every optimizer state in play."""
    for it in range(n_iter):
        n, h, w = (int(v) for v in rng.integers(1, 5, 3))
        co, ci = int(rng.integers(1, 40)), int(rng.integers(1, 9))
        g = Geom((h, w), (1, 1), (1, 1), (1, 1), False)
        wt = rng.integers(-127, 128, (co, 1, 1, ci)).astype(np.int8)
        fs = np.array([_rand_scale(rng, 1e-3, 0.05) for _ in range(co)], np.float32)
        gm = rng.standard_normal((n, co)).astype(np.float32)
        gm[rng.random(gm.shape) < 0.2] = 0.0
        if it % 4 == 3:  # a scaled gradient of 2e36 (over 2^120): the chunk runs the branching loops
            fs[0] = 1.0
            gm[:, 0] = np.float32(2e36) * np.float32(h * w)
        y = rng.integers(-128, 128, (n, h, w, co)).astype(np.int8)
        mask = np.zeros((n * h * w * co + 7) // 8, np.uint8)
        lo, hi = (90, 128) if it % 3 == 1 else (-100, 100)  # a sparse mask (1 bit in 7): the branching loops
        k.lib.pockmcu_mask_pack_s8(k.p("int8_t", y), y.size, lo, hi, k.p("uint8_t", mask))
        bias = rng.integers(-1000, 1000, co).astype(np.int32)
        coef = np.array([_rand_scale(rng, 0.1, 10.0) for _ in range(co)], np.float32)
        mom, batch = (0.0, 1) if it % 3 == 0 else (0.5, 1) if it % 3 == 1 else (0.0, 2)
        state = _seed(rng)
        accum = np.zeros(co, np.float32) if batch > 1 else None
        vel = rng.standard_normal(co).astype(np.float32) if mom else None
        opt = k.opt(3.0, mom, batch, 1)
        # unfused
        dz = np.full((n, h, w, co), np.nan, np.float32)
        k.lib.pockmcu_mean_grad_f32(k.dims(n, h, w, co), k.p("float", gm), k.p("float", dz))
        k.lib.pockmcu_mask_apply_f32(k.p("float", dz), k.p("uint8_t", mask), dz.size)
        acc_u = None if accum is None else accum.copy()
        vel_u = None if vel is None else vel.copy()
        b_u, s_u = k.bias_update(bias, dz.reshape(-1, co), coef, acc_u, vel_u, opt, state)
        gi_u = k.conv_grad_input(g, n, ci, wt, fs, dz)
        # fused, with and without each part
        for want_bias, want_gi in ((True, True), (True, False), (False, True)):
            b_f = bias.copy()
            acc_f = None if accum is None else accum.copy()
            vel_f = None if vel is None else vel.copy()
            st_f = k.ffi.new("uint32_t *", state)
            gi_f = np.full((n, h, w, ci), np.nan, np.float32)
            st = k.lib.pockmcu_conv_1x1_grad_from_mean_f32(
                k.dims(n, h, w, co), k.p("float", gm), k.p("uint8_t", mask), k.dims(co, 1, 1, ci),
                k.p("int8_t", wt), k.p("float", fs), k.p("int32_t", b_f) if want_bias else k.ffi.NULL,
                k.p("float", coef), k.p("float", acc_f), k.p("float", vel_f), opt, st_f,
                k.p("float", gi_f) if want_gi else k.ffi.NULL)
            assert st == 0
            if want_bias:
                assert np.array_equal(b_f, b_u) and int(st_f[0]) == s_u, (n, h, w, co, ci)
                if vel is not None:
                    assert np.array_equal(vel_f.view(np.uint32), vel_u.view(np.uint32))
                if accum is not None:
                    assert np.array_equal(acc_f.view(np.uint32), acc_u.view(np.uint32))
            else:
                assert np.array_equal(b_f, bias) and int(st_f[0]) == state
            if want_gi:
                assert np.array_equal(gi_f.view(np.uint32), gi_u.view(np.uint32)), (n, h, w, co, ci)
            else:
                assert np.isnan(gi_f).all()
        st = k.lib.pockmcu_conv_1x1_grad_from_mean_f32(
            k.dims(n, h, w, co), k.p("float", gm), k.p("uint8_t", mask), k.dims(co, 3, 1, ci),
            k.p("int8_t", wt), k.p("float", fs), k.ffi.NULL, k.ffi.NULL, k.ffi.NULL, k.ffi.NULL, opt,
            k.ffi.NULL, k.ffi.NULL)
        assert st == -1


def check_masks(k: TK, rng, n_iter):
    torch = _torch()
    for it in range(n_iter):
        n = int(rng.integers(1, 100))
        assert k.lib.pockmcu_mask_bytes(n) == (n + 7) // 8
        relu6 = bool(it % 2)
        zp = int(rng.integers(-128, -50))
        s_y = _rand_scale(rng, 0.01, 0.04)
        if relu6:  # 6.0 representable: act_max is the ReLU6 clamp, not the int8 limit
            s_y = max(s_y, 6.0 / (126 - zp))
        act_min = zp
        act_max = min(127, zp + int(round(6.0 / s_y))) if relu6 else 127
        hi = act_max if relu6 else 128
        # pre-activations away from 0 and 6
        z = rng.uniform(0.1, 5.9, n) * rng.choice([-1, 1, 1], n)
        z = np.where(rng.random(n) < 0.2, rng.uniform(6.1, 8.0, n), z)
        if not relu6:
            z = np.where(z > 0, np.minimum(z, (127 - zp) * s_y - 0.1), z)
        y = np.clip(np.round(z / s_y) + zp, act_min, act_max).astype(np.int8)
        mask = np.full(k.lib.pockmcu_mask_bytes(n), 0xAA, np.uint8)
        k.lib.pockmcu_mask_pack_s8(k.p("int8_t", y), n, act_min, hi, k.p("uint8_t", mask))
        bits = np.unpackbits(mask, bitorder="little")
        assert np.array_equal(bits[:n], ((y > act_min) & (y < hi)).astype(np.uint8))
        assert not bits[n:].any(), "unused mask bits must be 0"
        go = rng.standard_normal(n).astype(np.float32)
        gm = go.copy()
        k.lib.pockmcu_mask_apply_f32(k.p("float", gm), k.p("uint8_t", mask), n)
        zt = torch.tensor(z, requires_grad=True)
        act = torch.nn.functional.hardtanh(zt, 0.0, 6.0) if relu6 else torch.relu(zt)
        (act * torch.tensor(go, dtype=torch.float64)).sum().backward()
        assert np.array_equal(gm, zt.grad.numpy().astype(np.float32)), f"mask relu6={relu6}"


def check_losses(k: TK, rng, n_iter):
    torch = _torch()
    F = torch.nn.functional
    table = np.array([-math.log(max(i, 0.5) / 256.0) for i in range(256)], np.float32)
    for it in range(n_iter):
        classes = int(rng.integers(2, 20))
        logits = rng.standard_normal(classes) * rng.uniform(0.5, 4.0)
        p = np.exp(logits - logits.max())
        p /= p.sum()
        q = np.clip(np.round(p * 256.0) - 128, -128, 127).astype(np.int8)
        label = int(rng.integers(0, classes))
        beta = float(F32(rng.uniform(0.1, 2.0)))
        grad = np.full(classes, np.nan, np.float32)
        loss = k.lib.pockmcu_softmax_xent_grad_s8(k.p("int8_t", q), classes, label, beta, k.p("float", table),
                                                  k.p("float", grad))
        assert F32(loss) == table[int(q[label]) + 128]
        onehot = (np.arange(classes) == label).astype(np.float32)
        ref = F32(beta) * ((q.astype(np.int32) + 128).astype(np.float32) * F32(1 / 256) - onehot)
        assert np.array_equal(grad, ref.astype(np.float32)), "softmax xent formula"
        lt = torch.tensor(logits, requires_grad=True)
        ce = F.cross_entropy(lt[None], torch.tensor([label])) * beta
        ce.backward()
        assert np.max(np.abs(grad - lt.grad.numpy())) <= beta * (1 / 512 + 1e-6), "xent grad vs torch"
        if int(q[label]) > -128:  # -ln(p_q) vs -ln(p) with |p_q - p| <= 1/512
            pq = (int(q[label]) + 128) / 256.0
            tol = (1 / 512) / min(pq, float(p[label])) + 1e-5
            assert abs(loss - ce.item() / beta) <= tol, "xent loss vs torch"
        # mean squared error, int8 and float outputs
        n = int(rng.integers(1, 200))
        y = rng.integers(-128, 128, n).astype(np.int8)
        s, zp = float(F32(_rand_scale(rng, 0.01, 0.5))), int(rng.integers(-128, 128))
        tgt = (rng.standard_normal(n) * 3).astype(np.float32)
        g8 = np.full(n, np.nan, np.float32)
        l8 = k.lib.pockmcu_mse_grad_s8(k.p("int8_t", y), n, s, zp, k.p("float", tgt), k.p("float", g8))
        yt = torch.tensor(s * (y.astype(np.float64) - zp), requires_grad=True)
        lt = F.mse_loss(yt, torch.tensor(tgt, dtype=torch.float64))
        lt.backward()
        assert_close(g8, yt.grad.numpy(), "mse s8 grad")
        assert abs(l8 - lt.item()) <= 1e-4 * lt.item() + 1e-9, "mse s8 loss"
        d = F32(s) * (y.astype(np.int32) - zp).astype(np.float32) - tgt
        assert np.array_equal(g8, (F32(2) * d) / F32(n))
        assert F32(l8) == np.cumsum(d * d, dtype=np.float32)[-1] / F32(n)
        yf = (rng.standard_normal(n) * 2).astype(np.float32)
        gf = np.full(n, np.nan, np.float32)
        lf = k.lib.pockmcu_mse_grad_f32(k.p("float", yf), n, k.p("float", tgt), k.p("float", gf))
        yt = torch.tensor(yf.astype(np.float64), requires_grad=True)
        lt = F.mse_loss(yt, torch.tensor(tgt, dtype=torch.float64))
        lt.backward()
        assert_close(gf, yt.grad.numpy(), "mse f32 grad")
        assert abs(lf - lt.item()) <= 1e-4 * lt.item() + 1e-9, "mse f32 loss"


# --------------------------------------------------------------------------
# host vs Cortex-M bit identity: one C workload over every training kernel,
# run on the host (cffi) and under QEMU (M3 soft float, M4 hard float)
# --------------------------------------------------------------------------

WORKLOAD_C = r"""/* Deterministic workload over every training kernel; results appended to out. */
#include <string.h>
#include "pockmcu_nn.h"

static uint32_t wl_rng = 0x12345u;
static float frand(void) { return (float)(int32_t)(pockmcu_xorshift32(&wl_rng) >> 8) * 0x1p-23f - 1.0f; }
static int8_t qrand(void) { return (int8_t)(int32_t)((pockmcu_xorshift32(&wl_rng) >> 24) - 128u); }

static uint8_t *o_ptr;
static int32_t o_left;
static void emit(const void *p, int32_t n)
{
    if (n > o_left) { n = o_left; }
    memcpy(o_ptr, p, (size_t)n);
    o_ptr += n;
    o_left -= n;
}

/* shapes */
#define N 2
#define H 7
#define W 6
#define C 5
#define O 4
#define KH 3
#define KW 2
#define OH 4
#define OW 3
#define KK 3 /* trainable channels */
#define CB 1
#define M 2

static int8_t x[N * H * W * C], xs[N * H * W * KK], wconv[O * KH * KW * C], wdw[KH * KW * C * M];
static float go[N * OH * OW * O], godw[N * OH * OW * C * M], gi[N * H * W * C], fs[C * M], coef[C * M];
static float acc[256], vel[256], buf[KH * KW * C * M + C * M];
static int8_t wfc[6 * 20], xfc[3 * 20];
static float gofc[3 * 6], gifc[3 * 20];
static int32_t bias[O];
static float tgt[40], gmse[40], lt[256], gsm[10];
static int8_t pr[10];
static uint8_t mask[8];

int32_t pockmcu_workload(uint8_t *out, int32_t size)
{
    cmsis_nn_conv_params cp;
    cmsis_nn_dw_conv_params dp;
    cmsis_nn_pool_params pp;
    cmsis_nn_context ctx;
    cmsis_nn_dims in_d = {N, H, W, C}, xs_d = {N, H, W, KK}, f_d = {O, KH, KW, C}, o_d = {N, OH, OW, O};
    cmsis_nn_dims fdw_d = {1, KH, KW, C * M}, odw_d = {N, OH, OW, C * M}, xsdw_d = {N, H, W, KK};
    pockmcu_optimizer opt;
    uint32_t r = 99u;
    int32_t i, step;
    float f;

    o_ptr = out;
    o_left = size;
    wl_rng = 0x12345u;
    for (i = 0; i < N * H * W * C; i++) x[i] = qrand();
    for (i = 0; i < O * KH * KW * C; i++) wconv[i] = qrand();
    for (i = 0; i < KH * KW * C * M; i++) wdw[i] = qrand();
    for (i = 0; i < N * OH * OW * O; i++) go[i] = frand();
    for (i = 0; i < N * OH * OW * C * M; i++) godw[i] = frand();
    for (i = 0; i < C * M; i++) { fs[i] = 0.01f + 0.005f * frand(); coef[i] = 3.0f + frand(); }
    memset(&cp, 0, sizeof(cp));
    cp.input_offset = 17; cp.stride.h = 2; cp.stride.w = 2; cp.padding.h = 1; cp.padding.w = 0;
    cp.dilation.h = 1; cp.dilation.w = 2;
    memset(&dp, 0, sizeof(dp));
    dp.input_offset = -5; dp.ch_mult = M; dp.stride.h = 2; dp.stride.w = 2; dp.padding.h = 1; dp.padding.w = 1;
    dp.dilation.h = 1; dp.dilation.w = 1;
    ctx.buf = buf; ctx.size = (int32_t)sizeof(buf);

    pockmcu_conv_grad_input_f32(&cp, &in_d, &f_d, wconv, fs, &o_d, go, gi);
    emit(gi, (int32_t)sizeof(gi));
    pockmcu_depthwise_conv_grad_input_f32(&dp, &in_d, &fdw_d, wdw, fs, &odw_d, godw, gi);
    emit(gi, (int32_t)sizeof(gi));

    pockmcu_slice_s8(x, N * H * W, C, CB, KK, xs);
    memset(acc, 0, sizeof(acc)); memset(vel, 0, sizeof(vel));
    for (step = 0; step < 4; step++)
    {
        opt.lr = 0.05f; opt.momentum = 0.9f; opt.batch = 2; opt.apply = step & 1;
        pockmcu_conv_wgrad_update_s8(&ctx, &cp, &xs_d, xs, &f_d, wconv, CB, &o_d, go, coef, acc, vel, &opt, &r);
        pockmcu_depthwise_conv_wgrad_update_s8(&ctx, &dp, &xsdw_d, xs, &fdw_d, wdw, CB, &odw_d, godw, coef,
                                               acc + 128, vel + 128, &opt, &r);
    }
    emit(wconv, (int32_t)sizeof(wconv)); emit(wdw, (int32_t)sizeof(wdw));
    emit(acc, (int32_t)sizeof(acc)); emit(vel, (int32_t)sizeof(vel)); emit(&r, 4);

    /* fully connected */
    {
        cmsis_nn_dims fin_d = {3, 1, 1, 20}, ff_d = {20, 1, 1, 6}, fxs_d = {3, 1, 1, 7};
        for (i = 0; i < 6 * 20; i++) wfc[i] = qrand();
        for (i = 0; i < 3 * 20; i++) xfc[i] = qrand();
        for (i = 0; i < 3 * 6; i++) gofc[i] = frand() * 100.0f;
        pockmcu_fully_connected_grad_input_f32(&fin_d, &ff_d, wfc, 3, fs, gofc, gifc);
        emit(gifc, (int32_t)sizeof(gifc));
        opt.lr = 0.01f; opt.momentum = 0.0f; opt.batch = 1; opt.apply = 1;
        pockmcu_slice_s8(xfc, 3, 20, 5, 7, xs);
        pockmcu_fully_connected_wgrad_update_s8(&fxs_d, xs, 9, &ff_d, wfc, 5, gofc, coef, NULL, vel, &opt, &r);
        emit(wfc, (int32_t)sizeof(wfc));
        pockmcu_fully_connected_wgrad_update_s8(&fxs_d, xs, 9, &ff_d, wfc, 5, gofc, coef, NULL, NULL, &opt, &r);
        emit(wfc, (int32_t)sizeof(wfc)); /* plain SGD: the fused loop */
        for (i = 0; i < O; i++) bias[i] = (int32_t)(pockmcu_xorshift32(&wl_rng) >> 4) - 100000000;
        bias[0] = 2147483600;
        opt.lr = 1e4f;
        pockmcu_bias_update_s32(bias, go, N * OH * OW, O, coef, NULL, NULL, &opt, &r);
        emit(bias, (int32_t)sizeof(bias));
    }
    /* pools */
    pp.stride.h = 2; pp.stride.w = 1; pp.padding.h = 1; pp.padding.w = 1; pp.activation.min = -128;
    pp.activation.max = 127;
    {
        cmsis_nn_dims pk = {1, 3, 3, 1}, po = {N, 4, 6, C};
        pockmcu_avgpool_grad_f32(&pp, &in_d, &pk, &po, godw, gi);
        emit(gi, (int32_t)sizeof(gi));
        pockmcu_max_pool_grad_f32(&pp, &in_d, x, &pk, &po, godw, gi);
        emit(gi, (int32_t)sizeof(gi));
        pockmcu_mean_grad_f32(&in_d, go, gi);
        emit(gi, (int32_t)sizeof(gi));
    }
    /* masks, losses, rounding */
    pockmcu_mask_pack_s8(x, 60, -20, 100, mask);
    emit(mask, 8);
    for (i = 0; i < 60; i++) gi[i] = frand();
    pockmcu_mask_apply_f32(gi, mask, 60);
    emit(gi, 60 * 4);
    for (i = 0; i < 40; i++) tgt[i] = frand() * 3.0f;
    f = pockmcu_mse_grad_s8(x, 40, 0.037f, -3, tgt, gmse);
    emit(gmse, (int32_t)sizeof(gmse)); emit(&f, 4);
    f = pockmcu_mse_grad_f32(go, 40, tgt, gmse);
    emit(gmse, (int32_t)sizeof(gmse)); emit(&f, 4);
    for (i = 0; i < 256; i++) lt[i] = frand();
    for (i = 0; i < 10; i++) pr[i] = qrand();
    f = pockmcu_softmax_xent_grad_s8(pr, 10, 3, 0.3f, lt, gsm);
    emit(gsm, (int32_t)sizeof(gsm)); emit(&f, 4);
    for (i = 0; i < 64; i++)
    {
        int32_t v = pockmcu_stochastic_round(frand() * (float)(1 << (i % 31)), &r);
        emit(&v, 4);
    }
    return size - o_left;
}
"""

HARNESS_C = r"""/* Bare-metal QEMU harness: run the workload, print it in hex via semihosting, exit. */
#include <stdint.h>

int32_t pockmcu_workload(uint8_t *out, int32_t size);

extern uint32_t _estack, _sidata, _sdata, _edata, _sbss, _ebss;
void Reset_Handler(void);
static void Fault_Handler(void) { for (;;) { } }

__attribute__((section(".isr_vector"), used)) void (*const vectors[16])(void) = {
    (void (*)(void))(&_estack), Reset_Handler, Fault_Handler, Fault_Handler, Fault_Handler, Fault_Handler,
    Fault_Handler, 0, 0, 0, 0, Fault_Handler, Fault_Handler, 0, Fault_Handler, Fault_Handler};

static int32_t semihost(int32_t op, const void *arg)
{
    register int32_t r0 __asm__("r0") = op;
    register const void *r1 __asm__("r1") = arg;
    __asm__ volatile("bkpt 0xab" : "+r"(r0) : "r"(r1) : "memory");
    return r0;
}

static uint8_t result[16384];
static char line[130];

void Reset_Handler(void)
{
    uint32_t *src = &_sidata, *dst;
    int32_t n, i, j;
    for (dst = &_sdata; dst < &_edata;) *dst++ = *src++;
    for (dst = &_sbss; dst < &_ebss;) *dst++ = 0u;
#if defined(__ARM_FP)
    *(volatile uint32_t *)0xE000ED88u |= 0xFu << 20; /* CPACR: CP10, CP11 full access */
    __asm__ volatile("dsb\n isb" ::: "memory");
#endif
    n = pockmcu_workload(result, (int32_t)sizeof(result));
    for (i = 0; i < n; i += 64)
    {
        int32_t k = 0;
        for (j = i; j < n && j < i + 64; j++)
        {
            line[k++] = "0123456789abcdef"[result[j] >> 4];
            line[k++] = "0123456789abcdef"[result[j] & 15];
        }
        line[k++] = '\n';
        line[k] = 0;
        semihost(0x04, line);
    }
    semihost(0x04, "END\n");
    semihost(0x18, (const void *)0x20026u);
    for (;;) { }
}
"""

LINK_LD = r"""MEMORY { FLASH (rx) : ORIGIN = 0x00000000, LENGTH = 4M
         RAM (rwx)  : ORIGIN = 0x20000000, LENGTH = 4M }
_estack = ORIGIN(RAM) + LENGTH(RAM);
SECTIONS {
  .text : { KEEP(*(.isr_vector)) *(.text*) *(.rodata*) . = ALIGN(4); } > FLASH
  .ARM.exidx : { *(.ARM.exidx*) } > FLASH
  _sidata = LOADADDR(.data);
  .data : { _sdata = .; *(.data*) . = ALIGN(4); _edata = .; } > RAM AT > FLASH
  .bss (NOLOAD) : { _sbss = .; *(.bss*) *(COMMON) . = ALIGN(4); _ebss = .; } > RAM
}
"""

QEMU_TARGETS = {
    "m3_soft": ("mps2-an385", "cortex-m3", ["-mthumb", "-mcpu=cortex-m3", "-mfloat-abi=soft"]),
    "m4_hard": ("mps2-an386", "cortex-m4",
                ["-mthumb", "-mcpu=cortex-m4", "-mfloat-abi=hard", "-mfpu=fpv4-sp-d16"]),
}


def run_workload_host(tmp: Path) -> bytes:
    import cffi

    (tmp / "workload.c").write_text(WORKLOAD_C)
    so = tmp / "libworkload.so"
    cmd = ["gcc", *WARN_FLAGS, *FP_FLAGS, "-O2", "-fPIC", "-shared", f"-I{KERNELS}",
           *[str(p) for p in TRAIN_SOURCES], str(tmp / "workload.c"), "-o", str(so)]
    res = subprocess.run(cmd, capture_output=True, text=True)
    assert res.returncode == 0 and res.stderr == "", res.stderr
    ffi = cffi.FFI()
    from pockmcu.cdecl import code_declarations

    ffi.cdef(code_declarations(WORKLOAD_C, include_dirs=[KERNELS]))
    lib = ffi.dlopen(str(so))
    buf = ffi.new("uint8_t[16384]")
    n = lib.pockmcu_workload(buf, 16384)
    assert 0 < n < 16384
    return bytes(ffi.buffer(buf, n))


def run_workload_qemu(tmp: Path, name: str) -> bytes:
    machine, cpu, flags = QEMU_TARGETS[name]
    for fname, text in (("workload.c", WORKLOAD_C), ("harness_arm.c", HARNESS_C), ("link.ld", LINK_LD)):
        (tmp / fname).write_text(text)
    elf = tmp / f"workload_{name}.elf"
    cmd = ["arm-none-eabi-gcc", *WARN_FLAGS, *FP_FLAGS, "-O2", *flags, f"-I{KERNELS}",
           *[str(p) for p in TRAIN_SOURCES], str(tmp / "workload.c"), str(tmp / "harness_arm.c"),
           "-nostartfiles", "-T", str(tmp / "link.ld"), "-Wl,--gc-sections", "-o", str(elf), "-lc", "-lgcc"]
    res = subprocess.run(cmd, capture_output=True, text=True)
    assert res.returncode == 0 and res.stderr == "", f"{' '.join(cmd)}\n{res.stderr}"
    res = subprocess.run(["qemu-system-arm", "-M", machine, "-cpu", cpu, "-display", "none", "-serial", "null",
                          "-monitor", "none", "-semihosting-config", "enable=on,target=native",
                          "-kernel", str(elf)], capture_output=True, text=True, timeout=120)
    lines = (res.stdout + res.stderr).split("\n")
    assert res.returncode == 0 and "END" in lines, (res.returncode, (res.stdout + res.stderr)[-2000:])
    return bytes.fromhex("".join(lines[:lines.index("END")]))


ALL_CHECKS = {
    "rng_and_rounding": (check_rng_and_rounding, 4),
    "update_rule": (check_update_rule, 30),
    "conv": (check_conv, 16),
    "conv_split": (check_conv_split, 24),
    "depthwise": (check_depthwise, 16),
    "depthwise_rows": (check_depthwise_rows, 24),
    "fully_connected": (check_fc, 16),
    "bias": (check_bias, 12),
    "pools": (check_pools, 14),
    "mean_pad_slice_add": (check_mean_pad_slice_add, 8),
    "masks": (check_masks, 10),
    "conv_1x1_from_mean": (check_conv_1x1_from_mean, 12),
    "losses": (check_losses, 20),
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
    def tk(tmp_path_factory):
        import torch  # noqa: F401  (a test dependency: fail if missing)
        return TK(build_lib(tmp_path_factory.mktemp("train")))

    @pytest.mark.parametrize("name", sorted(ALL_CHECKS))
    def test_training_kernels(tk, name):
        fn, n_iter = ALL_CHECKS[name]
        fn(tk, np.random.default_rng(zlib.crc32(name.encode())), n_iter)

    def test_sanitized_build(tmp_path):
        """ASan + UBSan build of the training kernels, exercised by the same checks."""
        import torch  # noqa: F401  (a test dependency: fail if missing)
        run_sanitized_checks(__file__, build_lib(tmp_path, sanitize=True))

    def test_arm_cross_compile(tmp_path):
        cc = shutil.which("arm-none-eabi-gcc")
        assert cc is not None, "arm-none-eabi-gcc is missing: run 'make test' (it installs gcc-arm-none-eabi)"
        targets = {
            "m4_hard": ["-mthumb", "-mcpu=cortex-m4", "-mfloat-abi=hard", "-mfpu=fpv4-sp-d16"],
            "m3_soft": ["-mthumb", "-mcpu=cortex-m3", "-mfloat-abi=soft"],
        }
        nm = shutil.which("arm-none-eabi-nm")
        for name, flags in targets.items():
            for src in TRAIN_SOURCES:
                obj = tmp_path / f"{src.stem}.{name}.o"
                cmd = [cc, *WARN_FLAGS, *FP_FLAGS, "-O2", *flags, f"-I{KERNELS}", "-c", str(src), "-o", str(obj)]
                res = subprocess.run(cmd, capture_output=True, text=True)
                assert res.returncode == 0 and res.stderr == "", f"{' '.join(cmd)}\n{res.stderr}"
                if nm:
                    syms = subprocess.run([nm, "-u", str(obj)], capture_output=True, text=True).stdout
                    for bad in ("floor", "roundf", "expf", "logf", "__aeabi_d", "malloc", "calloc", "free"):
                        assert bad not in syms, f"{src.name} ({name}) references {bad}:\n{syms}"

    def test_host_and_cortex_m_bit_identical(tmp_path):
        """The same workload over every training kernel gives the same bits on the host, on a
        Cortex-M3 (soft float) and on a Cortex-M4 (FPv4 hard float), both under QEMU."""
        host = run_workload_host(tmp_path)
        for name in QEMU_TARGETS:
            dev = run_workload_qemu(tmp_path, name)
            assert len(dev) == len(host), (name, len(dev), len(host))
            diff = [i for i in range(len(host)) if host[i] != dev[i]]
            assert not diff, f"{name}: {len(diff)} bytes differ from the host, first at offset {diff[0]}"

    def test_files_and_header():
        """One public function per file, named after it; every prototype in the header."""
        header = subprocess.run(["gcc", "-E", "-P", str(KERNELS / "pockmcu_nn.h")], capture_output=True, text=True,
                                check=True).stdout  # pockmcu_nn.h with the family headers it includes
        assert "pockmcu_optimizer;" in header
        for name, src in zip(TRAIN_FUNCS, TRAIN_SOURCES):
            text = src.read_text()
            assert text.startswith("/*"), src.name
            assert f" {name}(" in text and f"{name}(" in header, name
            assert "malloc" not in text and "math.h" not in text, src.name

    def test_header_pedantic_and_cxx(tmp_path):
        src = tmp_path / "hdr.c"
        src.write_text('#include "pockmcu_nn.h"\nint main(void){pockmcu_optimizer o = {0.1f, 0.0f, 1, 1};'
                       'return (int)o.batch - 1;}\n')
        res = subprocess.run(["gcc", *WARN_FLAGS, "-pedantic", f"-I{KERNELS}", "-fsyntax-only", str(src)],
                             capture_output=True, text=True)
        assert res.returncode == 0, res.stderr
        if shutil.which("g++"):
            srcpp = tmp_path / "hdr.cpp"
            srcpp.write_text(src.read_text())
            res = subprocess.run(["g++", "-Wall", "-Wextra", "-Werror", f"-I{KERNELS}", "-fsyntax-only",
                                  str(srcpp)], capture_output=True, text=True)
            assert res.returncode == 0, res.stderr


# --------------------------------------------------------------------------
# trainbench (issue 14): the fast paths of the training kernels (register-blocked 1x1 input gradient,
# conv_1x1_grad_from_mean, depthwise rows for ch_mult 1, 4-output-channel weight gradient, the update
# rule with the RNG in a register) against the loops they replace, and host = QEMU on every core
# --------------------------------------------------------------------------

FAST_WORKLOAD_C = r"""/* Fast training-kernel paths against the loops they replace, on one deterministic workload. */
#include <string.h>

#include "pockmcu_layer_loops.h"
#include "pockmcu_nn.h"

static uint32_t rs = 12345u;
static uint32_t rnd(void)
{
    rs ^= rs << 13;
    rs ^= rs >> 17;
    rs ^= rs << 5;
    return rs;
}
static float rndf(void) { return (float)(int32_t)(rnd() >> 9) * 0x1p-22f - 1.0f; }
static void fill_s8(int8_t *p, int32_t n)
{
    for (int32_t i = 0; i < n; i++)
    {
        p[i] = (int8_t)((int32_t)(rnd() % 255u) - 127);
    }
}
static void fill_go(float *p, int32_t n, uint32_t zero_pct)
{
    for (int32_t i = 0; i < n; i++)
    {
        p[i] = rnd() % 100u < zero_pct ? 0.0f : rndf();
    }
}
static void fill_scale(float *p, int32_t n)
{
    for (int32_t i = 0; i < n; i++)
    {
        p[i] = 0.001f + 0.05f * (rndf() + 1.0f);
    }
}

static uint8_t *out_p;
static int32_t out_n, out_cap, ok = 1;
static uint32_t zero_pct = 30; /* share of zero gradients (ReLU-masked) */
static void emit(const void *p, int32_t n)
{
    if (out_n + n <= out_cap)
    {
        memcpy(out_p + out_n, p, (size_t)n);
    }
    out_n += n;
}
static void check(int cond) { ok = ok && cond; }

static int8_t w8[8192], w8b[8192], head[8192], xin[8192];
static float go[8192], gi[8192], gref[8192], scale[512], buf[8192], buf2[8192], coefs[512];
static uint8_t maskb[2048];

static void conv1x1_case(int32_t n, int32_t ih, int32_t iw, int32_t cin, int32_t cout, int32_t s, int32_t pad,
                         int32_t head_c)
{
    cmsis_nn_conv_params cp;
    cmsis_nn_dims in_d = {n, ih, iw, cin}, f_d = {cout, 1, 1, cin}, o_d;
    memset(&cp, 0, sizeof cp);
    cp.stride.h = cp.stride.w = s;
    cp.dilation.h = cp.dilation.w = 1;
    cp.padding.h = cp.padding.w = pad;
    o_d.n = n;
    o_d.h = (ih + 2 * pad - 1) / s + 1;
    o_d.w = (iw + 2 * pad - 1) / s + 1;
    o_d.c = cout;
    fill_s8(w8, cout * cin);
    fill_s8(head, cout * cin);
    fill_scale(scale, cout);
    fill_go(go, n * o_d.h * o_d.w * cout, zero_pct);
    memcpy(w8b, w8, (size_t)(cout * cin));
    for (int32_t o = 0; o < cout && head_c > 0; o++) /* the merged filter of the split form */
    {
        memcpy(w8b + o * cin, head + o * head_c, (size_t)head_c);
    }
    if (head_c > 0)
    {
        check(pockmcu_conv_grad_input_split_f32(&cp, &in_d, &f_d, w8, head, head_c, scale, &o_d, go, gi) == 0);
    }
    else
    {
        check(pockmcu_conv_grad_input_f32(&cp, &in_d, &f_d, w8, scale, &o_d, go, gi) == 0);
    }
    check(pockmcu_conv_grad_input_f32_loops(&cp, &in_d, &f_d, w8b, NULL, 0, scale, &o_d, go, gref) == 0);
    check(memcmp(gi, gref, (size_t)(n * ih * iw * cin) * sizeof(float)) == 0);
    emit(gi, n * ih * iw * cin * (int32_t)sizeof(float));
}

/* the gathered input gradient of a general conv against the scatter loops (any filter, stride, dilation) */
static void conv_gi_case(int32_t n, int32_t ih, int32_t iw, int32_t cin, int32_t cout, int32_t kh, int32_t kw,
                         int32_t s, int32_t pad, int32_t dil)
{
    cmsis_nn_conv_params cp;
    cmsis_nn_dims in_d = {n, ih, iw, cin}, f_d = {cout, kh, kw, cin}, o_d;
    memset(&cp, 0, sizeof cp);
    cp.stride.h = cp.stride.w = s;
    cp.dilation.h = cp.dilation.w = dil;
    cp.padding.h = cp.padding.w = pad;
    o_d.n = n;
    o_d.h = (ih + 2 * pad - (kh - 1) * dil - 1) / s + 1;
    o_d.w = (iw + 2 * pad - (kw - 1) * dil - 1) / s + 1;
    o_d.c = cout;
    fill_s8(w8, cout * kh * kw * cin);
    fill_scale(scale, cout);
    fill_go(go, n * o_d.h * o_d.w * cout, zero_pct);
    check(pockmcu_conv_grad_input_f32(&cp, &in_d, &f_d, w8, scale, &o_d, go, gi) == 0);
    check(pockmcu_conv_grad_input_f32_loops(&cp, &in_d, &f_d, w8, NULL, 0, scale, &o_d, go, gref) == 0);
    check(memcmp(gi, gref, (size_t)(n * ih * iw * cin) * sizeof(float)) == 0);
    emit(gi, n * ih * iw * cin * (int32_t)sizeof(float));
}

static void from_mean_case(int32_t n, int32_t h, int32_t w, int32_t cout, int32_t cin)
{
    cmsis_nn_dims o_d = {n, h, w, cout}, f_d = {cout, 1, 1, cin}, in_d = {n, h, w, cin}, m_d = {n, h, w, cout};
    cmsis_nn_conv_params cp;
    pockmcu_optimizer opt = {0.01f, 0.0f, 1, 1};
    int32_t bias[512], bias2[512];
    uint32_t r1 = 7u, r2 = 7u;
    const int32_t total = n * h * w * cout;
    memset(&cp, 0, sizeof cp);
    cp.stride.h = cp.stride.w = 1;
    cp.dilation.h = cp.dilation.w = 1;
    fill_s8(w8, cout * cin);
    fill_scale(scale, cout);
    fill_scale(coefs, cout);
    fill_go(buf, n * cout, 10);
    for (int32_t i = 0; i < (total + 7) / 8; i++)
    {
        maskb[i] = (uint8_t)(cout % 2 ? rnd() & rnd() & rnd() : rnd()); /* odd cout: a sparse mask (1 bit in 8) */
    }
    for (int32_t i = 0; i < cout; i++)
    {
        bias[i] = bias2[i] = (int32_t)(rnd() % 2001u) - 1000;
    }
    check(pockmcu_conv_1x1_grad_from_mean_f32(&o_d, buf, maskb, &f_d, w8, scale, bias, coefs, NULL, NULL, &opt, &r1,
                                              gi) == 0);
    /* unfused: the mean's gradient, the mask, the bias update, the 1x1 input gradient */
    (void)m_d;
    for (int32_t b = 0; b < n; b++)
    {
        for (int32_t p = 0; p < h * w; p++)
        {
            for (int32_t o = 0; o < cout; o++)
            {
                buf2[(b * h * w + p) * cout + o] = buf[b * cout + o] / (float)(h * w);
            }
        }
    }
    pockmcu_mask_apply_f32(buf2, maskb, total);
    pockmcu_bias_update_s32(bias2, buf2, n * h * w, cout, coefs, NULL, NULL, &opt, &r2);
    check(pockmcu_conv_grad_input_f32_loops(&cp, &in_d, &f_d, w8, NULL, 0, scale, &o_d, buf2, gref) == 0);
    check(memcmp(gi, gref, (size_t)(n * h * w * cin) * sizeof(float)) == 0);
    check(memcmp(bias, bias2, (size_t)cout * sizeof(int32_t)) == 0 && r1 == r2);
    emit(gi, n * h * w * cin * (int32_t)sizeof(float));
    emit(bias, cout * (int32_t)sizeof(int32_t));
}

static void dw_rows_case(int32_t ih, int32_t iw, int32_t c, int32_t k, int32_t dil, int32_t pad, int in_place)
{
    cmsis_nn_dw_conv_params dp;
    cmsis_nn_dims in_d = {1, ih, iw, c}, f_d = {1, k, k, c}, o_d;
    cmsis_nn_context ctx;
    memset(&dp, 0, sizeof dp);
    dp.ch_mult = 1;
    dp.stride.h = dp.stride.w = 1;
    dp.dilation.h = dp.dilation.w = dil;
    dp.padding.h = dp.padding.w = pad;
    o_d.n = 1;
    o_d.h = ih + 2 * pad - (k - 1) * dil;
    o_d.w = iw + 2 * pad - (k - 1) * dil;
    o_d.c = c;
    fill_s8(w8, k * k * c);
    fill_scale(scale, c);
    fill_go(go, o_d.h * o_d.w * c, 30);
    check(pockmcu_depthwise_conv_grad_input_f32(&dp, &in_d, &f_d, w8, scale, &o_d, go, gref) == 0);
    ctx.buf = buf2;
    ctx.size = pockmcu_depthwise_conv_grad_input_rows_f32_get_buffer_size(&dp, &in_d, &f_d);
    check(ctx.size <= (int32_t)sizeof buf2);
    if (in_place)
    {
        memcpy(gi, go, (size_t)(o_d.h * o_d.w * c) * sizeof(float));
        check(pockmcu_depthwise_conv_grad_input_rows_f32(&ctx, &dp, &in_d, &f_d, w8, scale, &o_d, gi, gi) == 0);
    }
    else
    {
        check(pockmcu_depthwise_conv_grad_input_rows_f32(&ctx, &dp, &in_d, &f_d, w8, scale, &o_d, go, gi) == 0);
    }
    check(memcmp(gi, gref, (size_t)(ih * iw * c) * sizeof(float)) == 0);
    emit(gi, ih * iw * c * (int32_t)sizeof(float));
}

static void wgrad_case(int32_t n, int32_t ih, int32_t iw, int32_t k_ch, int32_t cin, int32_t cb, int32_t cout,
                       int32_t k, int32_t s, int32_t pad, int momentum)
{
    cmsis_nn_conv_params cp;
    cmsis_nn_dims in_d = {n, ih, iw, k_ch}, f_d = {cout, k, k, cin}, o_d;
    cmsis_nn_context c4, c1;
    pockmcu_optimizer opt = {0.5f, momentum ? 0.9f : 0.0f, 1, 1};
    uint32_t r1 = 99u, r2 = 99u;
    static float vel1[8192], vel2[8192];
    const int32_t nw = cout * k * k * k_ch;
    memset(&cp, 0, sizeof cp);
    cp.stride.h = cp.stride.w = s;
    cp.dilation.h = cp.dilation.w = 1;
    cp.padding.h = cp.padding.w = pad;
    cp.input_offset = (int32_t)(rnd() % 256u) - 128;
    o_d.n = n;
    o_d.h = (ih + 2 * pad - k) / s + 1;
    o_d.w = (iw + 2 * pad - k) / s + 1;
    o_d.c = cout;
    fill_s8(xin, n * ih * iw * k_ch);
    fill_s8(w8, cout * k * k * cin);
    memcpy(w8b, w8, (size_t)(cout * k * k * cin));
    fill_go(go, n * o_d.h * o_d.w * cout, zero_pct);
    fill_scale(coefs, cout);
    for (int32_t i = 0; i < nw; i++)
    {
        vel1[i] = vel2[i] = rndf();
    }
    c4.buf = buf;
    c4.size = pockmcu_conv_wgrad_update_s8_get_buffer_size(&in_d, &f_d);
    c1.buf = buf2;
    c1.size = k * k * k_ch * (int32_t)sizeof(float); /* one row: the channel-at-a-time loops */
    check(c4.size <= (int32_t)sizeof buf);
    check(pockmcu_conv_wgrad_update_s8(&c4, &cp, &in_d, xin, &f_d, w8, cb, &o_d, go, coefs, NULL,
                                       momentum ? vel1 : NULL, &opt, &r1) == 0);
    check(pockmcu_conv_wgrad_update_s8(&c1, &cp, &in_d, xin, &f_d, w8b, cb, &o_d, go, coefs, NULL,
                                       momentum ? vel2 : NULL, &opt, &r2) == 0);
    check(memcmp(w8, w8b, (size_t)(cout * k * k * cin)) == 0 && r1 == r2);
    check(!momentum || memcmp(vel1, vel2, (size_t)nw * sizeof(float)) == 0);
    emit(w8, cout * k * k * cin);
    emit(&r1, 4);
}

/* depthwise weight gradient (ch_mult m): the accumulated G (apply 0) and the applied update; QEMU must give the
 * host's bytes (the host runs the portable C of the fast path's helpers) */
static void dw_wgrad_case(int32_t ih, int32_t iw, int32_t k_ch, int32_t m, int32_t k, int32_t s, int32_t pad,
                          int32_t dil)
{
    cmsis_nn_dw_conv_params dp;
    cmsis_nn_dims in_d = {1, ih, iw, k_ch}, f_d, o_d;
    cmsis_nn_context ctx;
    pockmcu_optimizer opt = {0.5f, 0.0f, 1, 0};
    uint32_t r1 = 7u;
    const int32_t cout = (k_ch + 1) * m, nw = k * k * k_ch * m;
    memset(&dp, 0, sizeof dp);
    dp.ch_mult = m;
    dp.stride.h = dp.stride.w = s;
    dp.dilation.h = dp.dilation.w = dil;
    dp.padding.h = dp.padding.w = pad;
    dp.input_offset = (int32_t)(rnd() % 256u) - 128;
    f_d.n = 1, f_d.h = k, f_d.w = k, f_d.c = cout;
    o_d.n = 1;
    o_d.h = (ih + 2 * pad - (k - 1) * dil - 1) / s + 1;
    o_d.w = (iw + 2 * pad - (k - 1) * dil - 1) / s + 1;
    o_d.c = cout;
    fill_s8(xin, ih * iw * k_ch);
    fill_s8(w8, k * k * cout);
    fill_go(go, o_d.h * o_d.w * cout, zero_pct);
    fill_scale(coefs, cout);
    memset(gref, 0, (size_t)nw * sizeof(float));
    ctx.buf = buf;
    ctx.size = (int32_t)sizeof buf;
    check(pockmcu_depthwise_conv_wgrad_update_s8(&ctx, &dp, &in_d, xin, &f_d, w8, 1, &o_d, go, coefs, gref, NULL, &opt,
                                                 &r1) == 0);
    emit(gref, nw * (int32_t)sizeof(float));
    opt.apply = 1;
    check(pockmcu_depthwise_conv_wgrad_update_s8(&ctx, &dp, &in_d, xin, &f_d, w8, 1, &o_d, go, coefs, NULL, NULL, &opt,
                                                 &r1) == 0);
    emit(w8, k * k * cout);
    emit(&r1, 4);
}

/* the depthwise input gradient (gathered for ch_mult 1, any stride): host = QEMU bytes */
static void dw_gi_case(int32_t ih, int32_t iw, int32_t c, int32_t m, int32_t k, int32_t s, int32_t pad, int32_t dil)
{
    cmsis_nn_dw_conv_params dp;
    cmsis_nn_dims in_d = {1, ih, iw, c}, f_d = {1, k, k, c * m}, o_d;
    memset(&dp, 0, sizeof dp);
    dp.ch_mult = m;
    dp.stride.h = dp.stride.w = s;
    dp.dilation.h = dp.dilation.w = dil;
    dp.padding.h = dp.padding.w = pad;
    o_d.n = 1;
    o_d.h = (ih + 2 * pad - (k - 1) * dil - 1) / s + 1;
    o_d.w = (iw + 2 * pad - (k - 1) * dil - 1) / s + 1;
    o_d.c = c * m;
    fill_s8(w8, k * k * c * m);
    fill_scale(scale, c * m);
    fill_go(go, o_d.h * o_d.w * c * m, zero_pct);
    check(pockmcu_depthwise_conv_grad_input_f32(&dp, &in_d, &f_d, w8, scale, &o_d, go, gi) == 0);
    emit(gi, ih * iw * c * (int32_t)sizeof(float));
}

/* the update rule on values hitting every branch of the rounding (huge, NaN, tiny) */
static void update_case(void)
{
    float g[64];
    int8_t q[64];
    int32_t q32[64];
    pockmcu_optimizer opt = {1.0f, 0.0f, 1, 1};
    uint32_t r1 = 5u, r2 = 5u;
    for (int32_t i = 0; i < 64; i++)
    {
        g[i] = rndf() * (i % 5 == 0 ? 3e9f : (i % 7 == 0 ? 1e-6f : 40.0f));
        q[i] = (int8_t)((int32_t)(rnd() % 255u) - 127);
        q32[i] = (int32_t)rnd();
        coefs[i] = 1.0f;
    }
    g[3] = 0.0f / 0.0f;
    memcpy(w8b, q, 64);
    pockmcu_update_s8(q, g, 64, 1.5f, NULL, NULL, &opt, &r1);
    for (int32_t i = 0; i < 64; i++) /* the rule spelled out with the out-of-line rounding */
    {
        int32_t v = (int32_t)w8b[i] + pockmcu_stochastic_round(-opt.lr * (g[i] * 1.5f), &r2);
        w8b[i] = (int8_t)(v > 127 ? 127 : (v < -127 ? -127 : v));
    }
    check(memcmp(q, w8b, 64) == 0 && r1 == r2);
    pockmcu_update_s32(q32, g, 64, coefs, NULL, NULL, &opt, &r1);
    emit(q, 64);
    emit(q32, 256);
}

int pockmcu_fast_workload(uint8_t *dst, int32_t cap)
{
    out_p = dst;
    out_cap = cap;
    out_n = 4;
    ok = 1;
    zero_pct = 0; /* dense gradients: 8 pixels x 2 channels, odd channel counts, both parts of a split filter */
    conv1x1_case(1, 3, 6, 9, 40, 1, 0, 0);
    conv1x1_case(1, 4, 5, 15, 70, 1, 0, 7);
    conv1x1_case(1, 4, 4, 2, 9, 1, 0, 1);
    zero_pct = 30;
    conv1x1_case(1, 5, 5, 13, 7, 1, 0, 0);
    conv1x1_case(2, 4, 3, 8, 9, 1, 0, 0);
    conv1x1_case(1, 7, 6, 10, 5, 2, 0, 0);
    conv1x1_case(1, 5, 5, 6, 11, 2, 1, 0);
    conv1x1_case(1, 5, 5, 13, 7, 1, 0, 5);
    conv1x1_case(1, 4, 4, 16, 20, 1, 0, 8);
    from_mean_case(1, 4, 4, 40, 12);
    from_mean_case(2, 3, 3, 37, 10);
    from_mean_case(1, 1, 5, 70, 3);
    dw_rows_case(7, 6, 10, 3, 1, 1, 0);
    dw_rows_case(7, 6, 10, 3, 1, 1, 1);
    dw_rows_case(9, 8, 7, 5, 2, 2, 0);
    dw_rows_case(6, 5, 4, 3, 1, 0, 0);
    wgrad_case(1, 6, 5, 7, 9, 2, 9, 1, 1, 0, 0);
    wgrad_case(2, 7, 7, 8, 8, 0, 8, 3, 2, 1, 1);
    wgrad_case(1, 5, 5, 4, 4, 0, 6, 3, 1, 1, 0);
    wgrad_case(1, 9, 8, 3, 3, 0, 8, 3, 2, 1, 0); /* a first layer: 3 channels, stride 2, padding */
    wgrad_case(2, 5, 7, 2, 6, 3, 5, 3, 1, 2, 1); /* channel tail of 2, 5 outputs, padding 2 */
    wgrad_case(1, 4, 4, 1, 1, 0, 4, 1, 1, 0, 0);
    wgrad_case(1, 9, 9, 6, 9, 1, 12, 5, 2, 2, 0); /* 5x5, 4 + 2 channels */
    wgrad_case(1, 8, 8, 13, 13, 0, 8, 1, 1, 0, 0); /* pointwise, tail of 1 */
    dw_wgrad_case(7, 6, 9, 1, 3, 1, 1, 1);
    zero_pct = 10; /* dense gradients: the gathered conv input gradient */
    conv_gi_case(1, 9, 11, 8, 6, 3, 3, 1, 1, 1);
    conv_gi_case(2, 9, 10, 5, 7, 3, 3, 2, 1, 1);
    conv_gi_case(1, 12, 13, 4, 5, 3, 2, 3, 2, 2);
    conv_gi_case(1, 7, 9, 3, 4, 5, 5, 2, 2, 1);
    conv_gi_case(1, 6, 17, 9, 3, 1, 3, 1, 0, 1);
    zero_pct = 90; /* mostly zero: the scatter loops */
    conv_gi_case(1, 9, 10, 5, 7, 3, 3, 2, 1, 1);
    zero_pct = 30;
    dw_gi_case(9, 8, 9, 1, 3, 2, 1, 1);
    dw_gi_case(8, 7, 6, 1, 3, 2, 0, 1);
    dw_gi_case(7, 9, 5, 1, 5, 3, 2, 2);
    dw_gi_case(6, 6, 3, 2, 3, 2, 1, 1);
    dw_wgrad_case(9, 8, 8, 1, 3, 2, 1, 1);
    dw_wgrad_case(6, 7, 6, 1, 3, 1, 2, 2);
    dw_wgrad_case(5, 5, 5, 2, 3, 1, 1, 1);
    dw_wgrad_case(8, 8, 3, 1, 5, 2, 2, 1);
    zero_pct = 95; /* mostly zero gradients: the skipped chunks and positions */
    conv1x1_case(1, 4, 4, 12, 150, 1, 0, 0);
    conv1x1_case(1, 4, 4, 12, 70, 1, 0, 5);
    wgrad_case(1, 6, 5, 7, 9, 2, 9, 1, 1, 0, 0);
    zero_pct = 100;
    conv1x1_case(1, 4, 4, 8, 70, 1, 0, 0);
    wgrad_case(1, 5, 5, 4, 4, 0, 6, 3, 1, 1, 0);
    zero_pct = 30;
    update_case();
    memcpy(dst, &ok, 4);
    return out_n;
}
"""

FAST_KERNELS = ["pockmcu_conv_grad_input_f32.c", "pockmcu_conv_grad_input_split_f32.c",
                "pockmcu_conv_1x1_grad_from_mean_f32.c", "pockmcu_mask_apply_f32.c", "pockmcu_bias_update_s32.c",
                "pockmcu_depthwise_conv_grad_input_f32.c", "pockmcu_depthwise_conv_grad_input_rows_f32.c",
                "pockmcu_depthwise_conv_grad_input_rows_f32_get_buffer_size.c", "pockmcu_conv_wgrad_update_s8.c",
                "pockmcu_conv_wgrad_update_s8_get_buffer_size.c", "pockmcu_update_s8.c", "pockmcu_update_s32.c",
                "pockmcu_stochastic_round.c", "pockmcu_xorshift32.c", "pockmcu_depthwise_conv_wgrad_update_s8.c"]

FAST_MAIN_C = r"""
#include <stdint.h>
#include "semihost.h"
int pockmcu_fast_workload(uint8_t *dst, int32_t cap);
static uint8_t out[65536];
int main(void)
{
    int32_t n = pockmcu_fast_workload(out, (int32_t)sizeof out);
    int fd = sh_open("out.bin", SH_MODE_WB);
    if (fd < 0 || n > (int32_t)sizeof out || sh_write(fd, out, (uint32_t)n) != 0)
    {
        return 2;
    }
    sh_close(fd);
    return 0;
}
"""


def fast_workload_host(tmp: Path) -> bytes:
    """The workload's bytes on the host (the kernels built as the generated projects build them)."""
    import cffi

    (tmp / "fast_workload.c").write_text(FAST_WORKLOAD_C)
    so = build_kernel_lib(tmp / "libfast.so", [KERNELS / f for f in FAST_KERNELS] + [tmp / "fast_workload.c"])
    ffi = cffi.FFI()
    ffi.cdef("int pockmcu_fast_workload(uint8_t *dst, int32_t cap);")
    lib = ffi.dlopen(str(so))
    buf = ffi.new("uint8_t[65536]")
    n = lib.pockmcu_fast_workload(buf, 65536)
    assert 4 < n <= 65536
    return bytes(ffi.buffer(buf, n))


if pytest is not None:
    @pytest.fixture(scope="module")
    def fast_host(tmp_path_factory):
        return fast_workload_host(tmp_path_factory.mktemp("fast"))

    def test_fast_paths_equal_the_loops_they_replace(fast_host):
        """Every fast path gives the bits of the loops it replaces (flag computed in C by memcmp on
        1x1 input gradients with strides, padding, split filters and pixel / channel tails, the fused
        mean backward with unaligned mask bits, the depthwise rows in and out of place, the weight
        gradient with 4 rows against 1 row of scratch, momentum included, and the update rule)."""
        assert fast_host[:4] == (1).to_bytes(4, "little"), "a fast path differs from the loops it replaces"

    def test_fast_paths_sanitized(tmp_path, fast_host):
        """The workload as an ASan + UBSan executable: no report, the same bytes."""
        from conftest import KERNEL_CFLAGS, SANITIZE_CFLAGS

        (tmp_path / "fast_workload.c").write_text(FAST_WORKLOAD_C)
        (tmp_path / "main.c").write_text(
            "#include <stdint.h>\n#include <stdio.h>\nint pockmcu_fast_workload(uint8_t *dst, int32_t cap);\n"
            "static uint8_t out[65536];\nint main(int argc, char **argv)\n{\n    FILE *f;\n    int32_t n;\n"
            "    (void)argc;\n    n = pockmcu_fast_workload(out, (int32_t)sizeof out);\n"
            "    f = fopen(argv[1], \"wb\");\n    fwrite(out, 1, (size_t)n, f);\n    return fclose(f);\n}\n")
        exe = tmp_path / "fast_san"
        cmd = ["gcc", *KERNEL_CFLAGS, *SANITIZE_CFLAGS, f"-I{KERNELS}", *[str(KERNELS / f) for f in FAST_KERNELS],
               str(tmp_path / "fast_workload.c"), str(tmp_path / "main.c"), "-o", str(exe)]
        res = subprocess.run(cmd, capture_output=True, text=True)
        assert res.returncode == 0 and res.stderr == "", res.stderr
        res = subprocess.run([str(exe), str(tmp_path / "out.bin")], capture_output=True, text=True,
                             env={"UBSAN_OPTIONS": "halt_on_error=1", "ASAN_OPTIONS": "detect_leaks=0"})
        assert res.returncode == 0 and "runtime error" not in res.stderr, res.stderr[-3000:]
        assert (tmp_path / "out.bin").read_bytes() == fast_host

    @pytest.mark.qemu
    @pytest.mark.parametrize("target", ["qemu-m3", "qemu-m4", "qemu-m7", "qemu-m33", "qemu-m55"])
    def test_fast_paths_host_equals_qemu(tmp_path, target, fast_host):
        """The same workload in QEMU on every core (VMLA on the FPU cores, soft float on M3) gives the
        host's bytes."""
        from tests.qemu_c import build_program, run_program

        (tmp_path / "src").mkdir()
        wl = tmp_path / "src" / "fast_workload.c"
        wl.write_text(FAST_WORKLOAD_C)
        elf = build_program(tmp_path, target, FAST_MAIN_C + "\n#include \"" + str(wl) + "\"\n", FAST_KERNELS)
        out = run_program(elf, target, {}, ["out.bin"])["out.bin"]
        assert out == fast_host, f"{target}: {sum(a != b for a, b in zip(out, fast_host))} bytes differ"


# --------------------------------------------------------------------------
# standalone entry point (sanitizer subprocess)
# --------------------------------------------------------------------------

def _sanitized_main(so_path: str) -> int:
    tk = TK(Path(so_path))
    for name, (fn, n_iter) in sorted(ALL_CHECKS.items()):
        fn(tk, np.random.default_rng(zlib.crc32(name.encode()) ^ 0x5A5A), max(2, n_iter // 3))
        print(f"ok {name}", flush=True)
    print("ALL OK")
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--sanitized-run":
        sys.exit(_sanitized_main(sys.argv[2]))
    print("usage: test_grad_kernels.py --sanitized-run LIB.so", file=sys.stderr)
    sys.exit(2)
