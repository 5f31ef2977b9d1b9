"""The DSP CONV_2D / FULLY_CONNECTED kernels (kernels_c/pockmcu_nn_dsp.h) write the portable kernels' bytes.

One C program (CASES_C) runs hundreds of random cases, each through the portable kernel
(arm_convolve_wrapper_s8, arm_fully_connected_s8, arm_fully_connected_per_channel_s8, or their onnxruntime
variants) and through the DSP kernel the kernel table picks for it (pointwise -> pockmcu_convolve_1x1_*,
else pockmcu_convolve_*; FC per-tensor / per-channel), with the scratch its *_get_buffer_size asks for.
It writes both outputs, whether the DSP fast path ran (its loops returned SUCCESS rather than handing the
call to the portable kernel) and the instruction counts of both calls. The same program runs in QEMU on
Cortex-M3 (portable C for each pockmcu_simd.h wrapper), M4, M7, M33 and M55 (the DSP instructions), and
on the host under ASan/UBSan (the host simulation's build). Checks: DSP bytes = portable bytes = the numpy
reference (tests/test_kernels.py) on every core and the host; every valid case took the fast path; the
deliberate fallbacks (grouped conv, FC filter offset, no scratch, input offset out of int8 range) did not.

Cases: channels 1..67 (odd counts included), filters 1..7, strides 1..3, dilations 1..3, SAME / VALID /
asymmetric padding, per-channel multipliers including the extremes (0, 2^30, 2^31 - 1, shifts -31..+8),
input offsets -127 and 128, output offsets -128 and 127, activation clamps. Model-level use of the kernels
(plan.json names, KWS host = QEMU) is at the end.
"""

from __future__ import annotations

import json
import shutil
import struct
import subprocess

import numpy as np
import pytest

from pockmcu import fixedpoint as fp
from pockmcu.codegen import write_project
from pockmcu.compiler import TrainOptions, compile_model, parse_size
from pockmcu.runner import run_on_target
from pockmcu.sim import load
from pockmcu.targets import get_target, instructions_from_ticks
from tests.conftest import FIXTURES, KERNEL_CFLAGS, SANITIZE_CFLAGS, SHARED, random_inputs, tflm_run
from tests.qemu_c import FIRMWARE, KERNELS, QEMU_TARGETS, build_program, run_program
from tests.test_kernels import _rand_act, ref_conv, ref_fc

I32_MAX = (1 << 31) - 1
HEADER = ("kind", "ort", "per_channel", "n", "in_h", "in_w", "in_c", "out_c", "k_h", "k_w", "stride_h",
          "stride_w", "dil_h", "dil_w", "pad_h", "pad_w", "out_h", "out_w", "input_offset", "output_offset",
          "act_min", "act_max", "has_bias", "filter_offset", "no_scratch", "general", "k_c")
CONV, FC = 0, 1

CASES_C = r"""
#include <stdint.h>
#include <string.h>

#include "pockmcu_dsp_loops.h"
#include "pockmcu_nn.h"

#ifdef POCKMCU_TEST_HOST
    #include <stdio.h>
static FILE *f_in, *f_out;
static int in_read(void *p, uint32_t n) { return fread(p, 1, n, f_in) == n ? 0 : -1; }
static void out_write(const void *p, uint32_t n) { fwrite(p, 1, n, f_out); }
static uint32_t ticks(void) { return 0; }
#else
    #include "port.h"
    #include "semihost.h"
static int fd_in, fd_out;
static int in_read(void *p, uint32_t n) { return sh_read(fd_in, p, n) == 0 ? 0 : -1; }
static void out_write(const void *p, uint32_t n) { sh_write(fd_out, p, n); }
static uint32_t ticks(void) { return port_timer_read(); }
#endif

#define NH 27
static int32_t hdr[NH];
static int8_t input[16384], filter[65536], out_ref[32768], out_dsp[32768], out_fast[32768];
static int32_t bias[256], mult[256], shift[256];
static uint32_t scratch[8192];

/* the arguments every kernel takes (CMSIS-NN API) */
#define KARGS(q, out) (&ctx, &p, q, &in_d, input, &f_d, filter, &b_d, b, &o_d, out)

static uint32_t pad4(uint32_t n) { return (n + 3u) & ~3u; }

/* the empty call's ticks, subtracted from every measurement */
static void empty(void) { __asm__ volatile("" ::: "memory"); }

static int run_case(void)
{
    const int32_t kind = hdr[0], ort = hdr[1], per_channel = hdr[2], n = hdr[3];
    const int32_t in_c = hdr[6], out_c = hdr[7], k_h = hdr[8], k_w = hdr[9], k_c = hdr[26];
    const uint32_t in_bytes = (uint32_t)(n * hdr[4] * hdr[5] * in_c);
    const uint32_t f_bytes = (uint32_t)(out_c * k_h * k_w * k_c);
    const uint32_t out_bytes = (uint32_t)(n * hdr[16] * hdr[17] * out_c);
    const uint32_t n_q = (kind == 1 && !per_channel) ? 1u : (uint32_t)out_c;
    const int32_t *b = hdr[22] ? bias : NULL;
    cmsis_nn_context ctx = {NULL, 0};
    cmsis_nn_dims in_d = {n, hdr[4], hdr[5], in_c}, f_d, b_d = {1, 1, 1, out_c}, o_d = {n, hdr[16], hdr[17], out_c};
    int32_t st[3], size = 0, fast;
    uint32_t t0, t1, t2, t3;

    if (in_read(input, pad4(in_bytes)) || in_read(filter, pad4(f_bytes)) || in_read(bias, 4u * (uint32_t)out_c) ||
        in_read(mult, 4u * n_q) || in_read(shift, 4u * n_q))
    {
        return -1;
    }
    memset(out_ref, 0x55, out_bytes);
    memset(out_dsp, 0x66, out_bytes);
    memset(out_fast, 0x77, out_bytes);
    if (kind == 0)
    {
        cmsis_nn_conv_params p;
        cmsis_nn_per_channel_quant_params q = {mult, shift};
        const int32_t pointwise = !hdr[25] && k_h == 1 && k_w == 1 && hdr[10] == 1 && hdr[11] == 1 && hdr[14] == 0 &&
                                  hdr[15] == 0 && hdr[16] == hdr[4] && hdr[17] == hdr[5];
        f_d.n = out_c;
        f_d.h = k_h;
        f_d.w = k_w;
        f_d.c = k_c;
        p.input_offset = hdr[18];
        p.output_offset = hdr[19];
        p.stride.h = hdr[10];
        p.stride.w = hdr[11];
        p.dilation.h = hdr[12];
        p.dilation.w = hdr[13];
        p.padding.h = hdr[14];
        p.padding.w = hdr[15];
        p.activation.min = hdr[20];
        p.activation.max = hdr[21];
        size = pointwise ? (ort ? pockmcu_convolve_1x1_ort_s8_dsp_get_buffer_size(&p, &in_d, &f_d, &o_d)
                                : pockmcu_convolve_1x1_s8_dsp_get_buffer_size(&p, &in_d, &f_d, &o_d))
                         : (ort ? pockmcu_convolve_ort_s8_dsp_get_buffer_size(&p, &in_d, &f_d, &o_d)
                                : pockmcu_convolve_s8_dsp_get_buffer_size(&p, &in_d, &f_d, &o_d));
        if (!hdr[24])
        {
            ctx.buf = scratch;
            ctx.size = size;
        }
        t0 = ticks();
        st[0] = ort ? pockmcu_convolve_ort_s8 KARGS(&q, out_ref)
                    : arm_convolve_wrapper_s8 KARGS(&q, out_ref);
        t1 = ticks();
        if (pointwise)
        {
            st[1] = ort ? pockmcu_convolve_1x1_ort_s8_dsp KARGS(&q, out_dsp)
                        : pockmcu_convolve_1x1_s8_dsp KARGS(&q, out_dsp);
        }
        else
        {
            st[1] = ort ? pockmcu_convolve_ort_s8_dsp KARGS(&q, out_dsp)
                        : pockmcu_convolve_s8_dsp KARGS(&q, out_dsp);
        }
        t2 = ticks();
        st[2] = ort ? pockmcu_dsp_conv_s8_loops(&ctx, &p, &q, &in_d, input, &f_d, filter, b, &o_d, out_fast, pointwise, 1)
                    : pockmcu_dsp_conv_s8_loops(&ctx, &p, &q, &in_d, input, &f_d, filter, b, &o_d, out_fast, pointwise, 0);
    }
    else
    {
        cmsis_nn_fc_params p;
        cmsis_nn_per_channel_quant_params qc = {mult, shift};
        cmsis_nn_per_tensor_quant_params qt;
        qt.multiplier = mult[0];
        qt.shift = shift[0];
        f_d.n = in_c;
        f_d.h = 1;
        f_d.w = 1;
        f_d.c = out_c;
        in_d.h = 1;
        in_d.w = 1;
        o_d.h = 1;
        o_d.w = 1;
        p.input_offset = hdr[18];
        p.filter_offset = hdr[23];
        p.output_offset = hdr[19];
        p.activation.min = hdr[20];
        p.activation.max = hdr[21];
        size = per_channel ? (ort ? pockmcu_fully_connected_per_channel_ort_s8_dsp_get_buffer_size(&in_d, &f_d)
                                  : pockmcu_fully_connected_per_channel_s8_dsp_get_buffer_size(&in_d, &f_d))
                           : (ort ? pockmcu_fully_connected_ort_s8_dsp_get_buffer_size(&in_d, &f_d)
                                  : pockmcu_fully_connected_s8_dsp_get_buffer_size(&in_d, &f_d));
        if (!hdr[24])
        {
            ctx.buf = scratch;
            ctx.size = size;
        }
        t0 = ticks();
        if (per_channel)
        {
            st[0] = ort ? pockmcu_fully_connected_per_channel_ort_s8 KARGS(&qc, out_ref)
                        : arm_fully_connected_per_channel_s8 KARGS(&qc, out_ref);
        }
        else
        {
            st[0] = ort ? pockmcu_fully_connected_ort_s8 KARGS(&qt, out_ref)
                        : arm_fully_connected_s8 KARGS(&qt, out_ref);
        }
        t1 = ticks();
        if (per_channel)
        {
            st[1] = ort ? pockmcu_fully_connected_per_channel_ort_s8_dsp KARGS(&qc, out_dsp)
                        : pockmcu_fully_connected_per_channel_s8_dsp KARGS(&qc, out_dsp);
        }
        else
        {
            st[1] = ort ? pockmcu_fully_connected_ort_s8_dsp KARGS(&qt, out_dsp)
                        : pockmcu_fully_connected_s8_dsp KARGS(&qt, out_dsp);
        }
        t2 = ticks();
        if (per_channel)
        {
            st[2] = ort ? pockmcu_dsp_fc_s8_loops(&ctx, &p, mult, shift, &in_d, input, &f_d, filter, b, &o_d, out_fast, 1, 1)
                        : pockmcu_dsp_fc_s8_loops(&ctx, &p, mult, shift, &in_d, input, &f_d, filter, b, &o_d, out_fast, 1, 0);
        }
        else
        {
            st[2] = ort ? pockmcu_dsp_fc_s8_loops(&ctx, &p, mult, shift, &in_d, input, &f_d, filter, b, &o_d, out_fast, 0, 1)
                        : pockmcu_dsp_fc_s8_loops(&ctx, &p, mult, shift, &in_d, input, &f_d, filter, b, &o_d, out_fast, 0, 0);
        }
    }
    t3 = ticks();
    empty();
    fast = st[2] == ARM_CMSIS_NN_SUCCESS;
    {
        const int32_t rec[6] = {st[0], st[1], fast, (int32_t)(t1 - t0), (int32_t)(t2 - t1), size};
        (void)t3;
        out_write(rec, sizeof(rec));
    }
    out_write(out_ref, pad4(out_bytes));
    out_write(out_dsp, pad4(out_bytes));
    out_write(out_fast, pad4(out_bytes));
    return 0;
}

static int run_all(void)
{
    int32_t count;
    if (in_read(&count, 4))
    {
        return 2;
    }
    while (count-- > 0)
    {
        if (in_read(hdr, sizeof(hdr)) || run_case())
        {
            return 3;
        }
    }
    return 0;
}

#ifdef POCKMCU_TEST_HOST
int main(int argc, char **argv)
{
    int rc;
    if (argc < 3 || !(f_in = fopen(argv[1], "rb")) || !(f_out = fopen(argv[2], "wb")))
    {
        return 2;
    }
    rc = run_all();
    fclose(f_in);
    fclose(f_out);
    return rc;
}
#else
int main(void)
{
    int rc;
    fd_in = sh_open("cases.bin", SH_MODE_RB);
    fd_out = sh_open("out.bin", SH_MODE_WB);
    if (fd_in < 0 || fd_out < 0)
    {
        return 2;
    }
    rc = run_all();
    sh_close(fd_in);
    sh_close(fd_out);
    return rc;
}
#endif
"""

DSP_FILES = sorted(p.name for p in KERNELS.glob("pockmcu_*_dsp*.c"))
PORTABLE_FILES = ["arm_convolve_wrapper_s8.c", "pockmcu_convolve_ort_s8.c", "arm_fully_connected_s8.c",
                  "arm_fully_connected_per_channel_s8.c", "pockmcu_fully_connected_ort_s8.c",
                  "pockmcu_fully_connected_per_channel_ort_s8.c",
                  "arm_depthwise_conv_wrapper_s8.c",      # the depthwise DSP kernels' fallback (DSP_FILES links them)
                  "arm_elementwise_add_s8.c"]             # the DSP ADD kernel's fallback


def _i8(rng, shape):
    return rng.integers(-128, 128, shape).astype(np.int8)


def _requant(rng, n, depth):
    """Multipliers/shifts that map the accumulator to about +-100, and extremes (0, 2^30, 2^31 - 1 with
    shifts -31..0, and left shifts up to 8 with small accumulators' scale)."""
    mults, shifts = [], []
    for _ in range(n):
        r = rng.random()
        if r < 0.08:
            m, s = int(rng.choice([0, 1 << 30, I32_MAX])), int(rng.integers(-31, 1))
        elif r < 0.12:
            m, s = int(rng.integers(1 << 30, I32_MAX)), int(rng.integers(1, 9))
        else:
            real = float(np.exp(rng.uniform(-1.5, 1.5))) * 100.0 / (128.0 * 128.0 * np.sqrt(depth))
            m, s = fp.quantize_multiplier(real)
        mults.append(m)
        shifts.append(s)
    return np.array(mults, np.int64), np.array(shifts, np.int64)


def _offsets(rng):
    r = rng.random()
    in_off = int(rng.choice([-127, 128])) if r < 0.25 else int(rng.integers(-127, 129))
    out_off = int(rng.choice([-128, 127])) if rng.random() < 0.2 else int(rng.integers(-128, 128))
    return in_off, out_off


def conv_case(rng, pointwise=False, general=False, **force):
    """A random CONV_2D case (dict of the header fields and arrays) with at most 25k MACs."""
    while True:
        if pointwise:
            k, stride, dil, pad = (1, 1), (1, 1), (int(rng.integers(1, 4)),) * 2, (0, 0)
            hw = (int(rng.integers(1, 8)), int(rng.integers(1, 8)))
            post, out_hw = (0, 0), hw
        else:
            k = (int(rng.integers(1, 8)), int(rng.integers(1, 8)))
            stride = (int(rng.integers(1, 4)), int(rng.integers(1, 4)))
            dil = (int(rng.integers(1, 4)), int(rng.integers(1, 4))) if rng.random() < 0.4 else (1, 1)
            hw = (int(rng.integers(1, 12)), int(rng.integers(1, 12)))
            k, stride, dil, hw = force.get("k", k), force.get("stride", stride), force.get("dil", dil), force.get("hw", hw)
            eff = ((k[0] - 1) * dil[0] + 1, (k[1] - 1) * dil[1] + 1)
            mode = rng.random()
            if mode < 0.3:    # VALID
                pad, post = (0, 0), (0, 0)
            elif mode < 0.6:  # SAME (TFLite: total split, the extra row at the bottom/right)
                tot = [max(((hw[i] + stride[i] - 1) // stride[i] - 1) * stride[i] + eff[i] - hw[i], 0) for i in range(2)]
                pad, post = (tot[0] // 2, tot[1] // 2), (tot[0] - tot[0] // 2, tot[1] - tot[1] // 2)
            else:             # asymmetric, any amount
                pad = (int(rng.integers(0, eff[0])), int(rng.integers(0, eff[1])))
                post = (int(rng.integers(0, eff[0])), int(rng.integers(0, eff[1])))
            out_hw = tuple((hw[i] + pad[i] + post[i] - eff[i]) // stride[i] + 1 for i in range(2))
            if min(out_hw) < 1:
                continue
        n = int(rng.integers(1, 3)) if rng.random() < 0.2 else 1
        in_c = int(rng.integers(1, 68))
        out_c = int(rng.integers(1, 68))
        in_c, out_c = force.get("in_c", in_c), force.get("out_c", out_c)
        macs = n * out_hw[0] * out_hw[1] * out_c * k[0] * k[1] * in_c
        if macs <= force.get("max_macs", 25000) and n * hw[0] * hw[1] * in_c <= 16384 and out_c * k[0] * k[1] * in_c <= 65536:
            break
    in_off, out_off = _offsets(rng)
    mult, shift = _requant(rng, out_c, k[0] * k[1] * in_c)
    act = _rand_act(rng)
    return dict(kind=CONV, ort=0, per_channel=1, n=n, in_h=hw[0], in_w=hw[1], in_c=in_c, out_c=out_c, k_h=k[0],
                k_w=k[1], stride_h=stride[0], stride_w=stride[1], dil_h=dil[0], dil_w=dil[1], pad_h=pad[0],
                pad_w=pad[1], out_h=out_hw[0], out_w=out_hw[1], input_offset=in_off, output_offset=out_off,
                act_min=act[0], act_max=act[1], has_bias=int(rng.random() < 0.85), filter_offset=0, no_scratch=0,
                general=int(general), k_c=in_c,
                x=_i8(rng, (n, hw[0], hw[1], in_c)), w=rng.integers(-127, 128, (out_c, k[0], k[1], in_c)).astype(np.int8),
                bias=rng.integers(-(1 << 20), 1 << 20, out_c), mult=mult, shift=shift)


def fc_case(rng, per_channel, batches=None, depth=None, out_c=None):
    b = batches or int(rng.choice([1, 1, 1, 2, 3, 4, 5, 7]))
    d = depth or int(rng.integers(1, 400))
    o = out_c or int(rng.integers(1, 68))
    in_off, out_off = _offsets(rng)
    mult, shift = _requant(rng, o if per_channel else 1, d)
    act = _rand_act(rng)
    return dict(kind=FC, ort=0, per_channel=int(per_channel), n=b, in_h=1, in_w=1, in_c=d, out_c=o, k_h=1, k_w=1,
                stride_h=1, stride_w=1, dil_h=1, dil_w=1, pad_h=0, pad_w=0, out_h=1, out_w=1, input_offset=in_off,
                output_offset=out_off, act_min=act[0], act_max=act[1], has_bias=int(rng.random() < 0.85),
                filter_offset=0, no_scratch=0, general=0, k_c=d, x=_i8(rng, (b, d)),
                w=rng.integers(-127, 128, (o, d)).astype(np.int8), bias=rng.integers(-(1 << 20), 1 << 20, o),
                mult=mult, shift=shift)


def all_cases() -> list[dict]:
    """The random cases, the deliberate fallbacks (expect_fast False) and the benchmark shapes."""
    rng = np.random.default_rng(13)
    cases = []
    for i in range(200):
        cases.append(conv_case(rng))
    for i in range(60):
        cases.append(conv_case(rng, pointwise=True))
    for i in range(20):
        cases.append(conv_case(rng, pointwise=True, general=True))   # the im2col kernel on 1x1 geometry
    # im2col fields of a small depth over many pixels (the chunked small-depth loops, depth % 4 of 0 to 3: an RGB
    # image's first 3x3 conv is depth 27), inside the image and on every border
    srng = np.random.default_rng(29)
    for i in range(24):
        in_c = (1, 2, 3, 5, 6, 7)[i % 6]
        k = ((3, 3), (3, 3), (2, 3), (3, 1))[i % 4]
        cases.append(conv_case(srng, in_c=in_c, out_c=int(srng.integers(1, 9)), k=k, stride=(1 + i % 2, 1 + i // 12),
                               dil=(1, 1), hw=(int(srng.integers(6, 11)), int(srng.integers(6, 11))), max_macs=60000))
    for i in range(120):
        cases.append(fc_case(rng, per_channel=bool(i % 2)))
    for c in cases[::5]:
        c["ort"] = 1
    for c in cases:
        c["expect_fast"] = True
    # fallbacks: no scratch, FC filter offset, grouped conv, an input offset outside the int8 zero-point range
    fallback = [conv_case(rng), fc_case(rng, False), conv_case(rng), conv_case(rng)]
    fallback[0]["no_scratch"] = 1
    fallback[1]["filter_offset"] = 3
    g = conv_case(rng, in_c=6, out_c=4)
    g["k_c"] = 3
    g["w"] = np.ascontiguousarray(g["w"][..., :3])
    fallback[2] = g
    fallback[3]["input_offset"] = 129
    for c in fallback:
        c["expect_fast"] = False
    return cases + fallback


def bench_cases() -> dict[str, dict]:
    """Fixed shapes for the MAC/instruction figures (names are what the report and BENCHMARKS use)."""
    rng = np.random.default_rng(5)
    out = {}
    c = conv_case(rng, pointwise=True)
    c.update(n=1, in_h=25, in_w=5, in_c=64, out_c=64, out_h=25, out_w=5, x=_i8(rng, (1, 25, 5, 64)),
             w=rng.integers(-127, 128, (64, 1, 1, 64)).astype(np.int8), bias=rng.integers(-5000, 5000, 64),
             act_min=-128, act_max=127, k_c=64)
    c["mult"], c["shift"] = _requant(np.random.default_rng(1), 64, 64)
    out["conv 1x1 64->64, 25x5 (KWS)"] = c
    c = conv_case(rng, in_c=32, out_c=32)
    c.update(n=1, in_h=10, in_w=10, k_h=3, k_w=3, stride_h=1, stride_w=1, dil_h=1, dil_w=1, pad_h=1, pad_w=1, out_h=10,
             out_w=10, x=_i8(rng, (1, 10, 10, 32)), w=rng.integers(-127, 128, (32, 3, 3, 32)).astype(np.int8),
             bias=rng.integers(-5000, 5000, 32), act_min=-128, act_max=127, k_c=32)
    c["mult"], c["shift"] = _requant(np.random.default_rng(2), 32, 288)
    out["conv 3x3 32->32, 10x10 SAME"] = c
    c = fc_case(rng, False, batches=1, depth=512, out_c=64)
    c.update(act_min=-128, act_max=127)
    out["fully connected 512->64"] = c
    for c in out.values():
        c["expect_fast"] = True
    return out


def encode(cases: list[dict]) -> bytes:
    def pad4(b: bytes) -> bytes:
        return b + b"\0" * (-len(b) % 4)

    parts = [struct.pack("<i", len(cases))]
    for c in cases:
        parts.append(struct.pack(f"<{len(HEADER)}i", *[int(c[k]) for k in HEADER]))
        nq = c["out_c"] if (c["kind"] == CONV or c["per_channel"]) else 1
        parts += [pad4(c["x"].tobytes()), pad4(c["w"].tobytes()), np.asarray(c["bias"], "<i4").tobytes(),
                  np.asarray(c["mult"][:nq], "<i4").tobytes(), np.asarray(c["shift"][:nq], "<i4").tobytes()]
    return b"".join(parts)


def decode(data: bytes, cases: list[dict]) -> list[dict]:
    res, pos = [], 0
    for c in cases:
        st_ref, st_dsp, fast, t_ref, t_dsp, size = struct.unpack_from("<6i", data, pos)
        pos += 24
        nbytes = c["n"] * c["out_h"] * c["out_w"] * c["out_c"]
        step = nbytes + (-nbytes % 4)
        outs = [np.frombuffer(data, np.int8, nbytes, pos + k * step) for k in range(3)]
        pos += 3 * step
        res.append(dict(st_ref=st_ref, st_dsp=st_dsp, fast=fast, t_ref=t_ref, t_dsp=t_dsp, size=size, ref=outs[0],
                        dsp=outs[1], fast_out=outs[2]))
    assert pos == len(data), (pos, len(data))
    return res


def reference(c: dict) -> np.ndarray:
    """tests/test_kernels.py's numpy references (TFLM numerics)."""
    bias = c["bias"] if c["has_bias"] else None
    act = (c["act_min"], c["act_max"])
    if c["kind"] == CONV:
        return ref_conv(c["x"], c["w"], bias, c["mult"], c["shift"], (c["stride_h"], c["stride_w"]),
                        (c["pad_h"], c["pad_w"]), (c["dil_h"], c["dil_w"]), c["input_offset"], c["output_offset"],
                        act, (c["out_h"], c["out_w"])).reshape(-1)
    m, s = (c["mult"], c["shift"]) if c["per_channel"] else (int(c["mult"][0]), int(c["shift"][0]))
    return ref_fc(c["x"], c["w"], bias, m, s, c["input_offset"], c["filter_offset"], c["output_offset"],
                  act).reshape(-1)


def check(cases: list[dict], results: list[dict], where: str) -> None:
    for i, (c, r) in enumerate(zip(cases, results)):
        what = f"{where} case {i} ({'conv' if c['kind'] == CONV else 'fc'}, ort {c['ort']})"
        assert r["st_ref"] == 0 and r["st_dsp"] == 0, what
        np.testing.assert_array_equal(r["dsp"], r["ref"], err_msg=what)
        assert r["fast"] == int(c["expect_fast"]), what
        if r["fast"]:
            np.testing.assert_array_equal(r["fast_out"], r["ref"], err_msg=what)
        if not c["ort"]:
            np.testing.assert_array_equal(r["ref"], reference(c), err_msg=what)


@pytest.fixture(scope="module")
def cases():
    return all_cases()


def test_host_dsp_equals_portable_and_numpy(tmp_path, cases):
    """The host build (portable pockmcu_simd.h, as the host simulation compiles the kernels), under ASan/UBSan."""
    exe = tmp_path / "dsp_cases"
    src = tmp_path / "dsp_cases.c"
    src.write_text(CASES_C)
    sources = [str(KERNELS / f) for f in DSP_FILES + PORTABLE_FILES]
    cmd = ["gcc", *KERNEL_CFLAGS, *SANITIZE_CFLAGS, "-DPOCKMCU_TEST_HOST", f"-I{KERNELS}", str(src), *sources,
           "-o", str(exe)]
    res = subprocess.run(cmd, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr[-4000:]
    (tmp_path / "cases.bin").write_bytes(encode(cases))
    run = subprocess.run([str(exe), str(tmp_path / "cases.bin"), str(tmp_path / "out.bin")], capture_output=True,
                         text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-4000:]
    check(cases, decode((tmp_path / "out.bin").read_bytes(), cases), "host")


def _qemu_run(tmp_path, target, cases, profile=False):
    elf = build_program(tmp_path, target, CASES_C, DSP_FILES + PORTABLE_FILES)
    out = run_program(elf, target, {"cases.bin": encode(cases)}, ["out.bin"], profile=profile)["out.bin"]
    return decode(out, cases)


@pytest.mark.qemu
@pytest.mark.parametrize("target", QEMU_TARGETS)
def test_qemu_dsp_equals_portable(tmp_path, target, cases):
    """One build and one QEMU run per core; Cortex-M3 runs the same loops with the portable wrappers."""
    assert shutil.which("qemu-system-arm") and (FIRMWARE / "startup.c").exists()
    results = _qemu_run(tmp_path, target, cases)
    check(cases, results, target)


@pytest.mark.qemu
@pytest.mark.parametrize("target", ["qemu-m4", "qemu-m7", "qemu-m33"])
def test_qemu_mac_per_instruction(tmp_path, target):
    """Exact instruction counts of the three target shapes: the DSP kernels beat the portable ones by 4x or
    more on every DSP core (the absolute figures are in the report / BENCHMARKS.md)."""
    shapes = bench_cases()
    cases = list(shapes.values())
    results = _qemu_run(tmp_path, target, cases, profile=True)
    check(cases, results, target)
    hz = get_target(target).timer_hz
    for name, c, r in zip(shapes, cases, results):
        macs = c["n"] * c["out_h"] * c["out_w"] * c["out_c"] * c["k_h"] * c["k_w"] * c["in_c"]
        dsp, port = instructions_from_ticks(r["t_dsp"], hz), instructions_from_ticks(r["t_ref"], hz)
        print(f"{target} {name}: DSP {dsp} instructions ({macs / dsp:.3f} MAC/instr), portable {port} "
              f"({macs / port:.3f})")
        assert dsp * 4 < port, (name, dsp, port)


# -- model level: the kernel table picks the DSP kernels on DSP cores, and generated models stay exact ---------

KWS = SHARED / "mlperf_kws_dscnn.tflite"
DSP_NAMES = dict(conv="pockmcu_convolve_s8_dsp", conv_1x1="pockmcu_convolve_1x1_s8_dsp",
                 fc="pockmcu_fully_connected_s8_dsp")
PORTABLE_NAMES = dict(conv="arm_convolve_wrapper_s8", conv_1x1="arm_convolve_wrapper_s8", fc="arm_fully_connected_s8")


def _gen(path, out, target="qemu-m4", kernels="auto", train=None):   # auto: every DSP kernel (no flash rule)
    c = compile_model(path, ram=parse_size("512KB"), target=target, kernels=kernels, train=train)
    return c, write_project(c, out)


def _step_kernels(out) -> dict[str, str]:
    return {s["name"]: s["kernel"] for s in json.loads((out / "plan.json").read_text())["steps"]}


@pytest.mark.parametrize("target, kernels, names", [("qemu-m4", "auto", DSP_NAMES), ("qemu-m33", "auto", DSP_NAMES),
                                                    ("qemu-m4", "portable", PORTABLE_NAMES),
                                                    ("qemu-m3", "auto", PORTABLE_NAMES)])
def test_kws_plan_names_the_chosen_kernels(tmp_path, target, kernels, names):
    """KWS: its first conv (10x4, stride 2) is the im2col class, its four 1x1 convs the pointwise class, its FC
    per-tensor; plan.json, the model.c calls and the planned scratch follow the table for the core."""
    c, out = _gen(KWS, tmp_path / "kws", target, kernels)
    steps = _step_kernels(out)
    assert steps["conv0"] == names["conv"]
    assert [steps[f"conv{i}"] for i in range(1, 5)] == [names["conv_1x1"]] * 4
    assert steps["fc0"] == names["fc"]
    model_c = (out / "model.c").read_text()
    for f in set(names.values()):
        assert f"{f}(" in model_c
    scratch = {op: c.plan.buffer(b).size for op, b in c.plan.scratch.items()}
    if names is DSP_NAMES:
        # 1x1: 125 pixels -> the column of 4 rows of 64 channels; conv0: 4 rows of 10*4*1 values + one field
        assert scratch["conv1"] >= 4 * 4 * 32 and scratch["conv0"] >= 4 * 4 * 20 + 40
        assert "pockmcu_convolve_1x1_s8_dsp_get_buffer_size(" in model_c
    else:
        assert not {"conv0", "conv1", "fc0"} & set(scratch)


@pytest.mark.qemu
def test_kws_host_equals_qemu_and_tflm_with_dsp_kernels(tmp_path):
    """The host simulation (portable wrappers) and Cortex-M4 (the DSP instructions) give TFLite Micro's bytes."""
    _, out = _gen(KWS, tmp_path / "kws")
    assert set(_step_kernels(out).values()) >= set(DSP_NAMES.values())
    x = random_inputs((1, 49, 10, 1), "int8", 6, seed=3)
    host = load(out).invoke(x)
    dev = run_on_target(out, "qemu-m4", x)
    np.testing.assert_array_equal(dev, host)
    np.testing.assert_array_equal(host, tflm_run(KWS, x))


TRAIN_SPEC = {"bias": "all", "weights": [{"layer": "conv0", "ratio": 1.0}, {"layer": "conv1", "ratio": 1.0},
                                         {"layer": "conv2", "ratio": 0.5}, {"layer": "fc0", "ratio": 1.0}],
              "optimizer": {"kind": "sgd", "lr": 0.05, "momentum": 0.0}}


@pytest.mark.qemu
def test_training_with_dsp_kernels_on_ram_weights_host_equals_qemu(tmp_path):
    """small_cnn trains conv0, conv1 (1x1) and fc0 whole (weights in RAM, read by the DSP kernels, which
    need no compile-time sums) and conv2 split-stored (the portable split kernel): host and Cortex-M4 end
    with the same parameter bytes, and they moved."""
    from pockmcu.train import Data, HostTrainer, train_on_target
    from pockmcu.training import params

    c, out = _gen(FIXTURES / "small_cnn.tflite", tmp_path / "cnn",
                  train=TrainOptions(spec=json.dumps(TRAIN_SPEC), loss="xent"))
    steps = _step_kernels(out)
    assert steps["conv0"] == DSP_NAMES["conv"] and steps["conv1"] == DSP_NAMES["conv_1x1"]
    assert steps["fc0"] == DSP_NAMES["fc"] and steps["conv2"] == "pockmcu_convolve_split_s8_simd"
    rng = np.random.default_rng(2)
    d = Data(rng.integers(-128, 128, (8, 16, 16, 3)).astype(np.int8), rng.integers(0, 10, 8).astype(np.int32))
    host = HostTrainer(out)
    host.train(d, epochs=1, seed=4, log=lambda *_: None)
    _, raw_dev, _ = train_on_target(out, "qemu-m4", d, epochs=1, seed=4, log=lambda *_: None)
    assert raw_dev == host.params()
    initial = params.pack(params.entries(c.train), {t: c.graph.t(t).data for t in c.train.trainable_tensors})
    assert raw_dev != initial
