"""The DSP depthwise kernels (kernels_c/pockmcu_nn_dsp_dw.h) equal the portable kernel byte for byte.

One C program runs every random case through arm_depthwise_conv_wrapper_s8 (portable, the reference),
pockmcu_depthwise_conv_dsp_s8, pockmcu_depthwise_conv_3x3_dsp_s8 and pockmcu_depthwise_conv_mult_dsp_s8
(with its queried scratch, misaligned) and writes the four results; the test compares bytes. The program
runs on the host (gcc with ASan + UBSan: the portable C of each pockmcu_simd.h wrapper, as the host
simulation runs it), in QEMU on Cortex-M3 (portable wrappers) and on M4, M7, M33 and M55 (the DSP
instructions). Cases: channels 1..67 (odd counts and tails), channel multipliers 1..3, filters 1..7 (3x3
often, non-square), and 120 more with channel multipliers 2..8, input channels 1..9 (1 often) and filters
up to 10x8; strides 1..3, dilations 1..3, VALID / SAME / asymmetric padding, per-channel multipliers and
shifts including extreme ones, extreme offsets, activation clamps, with and without bias, biases large
enough to need the exact requantization.
"""

from __future__ import annotations

import struct
import subprocess

import numpy as np
import pytest

from tests.qemu_c import KERNELS, QEMU_TARGETS, build_program, run_program

KERNEL_FILES = ("arm_depthwise_conv_wrapper_s8.c", "pockmcu_depthwise_conv_dsp_s8.c",
                "pockmcu_depthwise_conv_3x3_dsp_s8.c", "pockmcu_depthwise_conv_3x3_dsp_s8_get_buffer_size.c",
                "pockmcu_depthwise_conv_mult_dsp_s8.c", "pockmcu_depthwise_conv_mult_dsp_s8_get_buffer_size.c")
N_KERNELS = 4   # the portable reference, the general DSP kernel, the 3x3 one, the channel-multiplier one
HEADER = 20     # int32 fields per case
N_CASES = 300
N_MULT = 120    # channel multipliers 2..8 (pockmcu_depthwise_conv_mult_dsp_loops)

COMMON_C = r"""
#include <stdint.h>
#include <string.h>
#include "pockmcu_nn.h"

#define MAX_IN 16384
#define MAX_OUT 65536
#define MAX_OC 256
static int8_t in_buf[MAX_IN];
static int8_t w_buf[MAX_IN];
static int32_t bias_buf[MAX_OC], mult_buf[MAX_OC], shift_buf[MAX_OC];
static int8_t out_buf[4][MAX_OUT];
#define MAX_SCRATCH 8192
static int8_t scratch_buf[MAX_SCRATCH + 1], scratch_dw[MAX_SCRATCH + 3];

static int32_t pad4(int32_t n) { return (n + 3) & ~3; }

/* One case: read its header and data with rd, run the three kernels, write statuses and outputs with wr. */
static int run_case(int (*rd)(void *, uint32_t), int (*wr)(const void *, uint32_t))
{
    int32_t h[20];
    if (rd(h, sizeof(h)))
        return 1;
    {
        const cmsis_nn_dims input_dims = {h[0], h[1], h[2], h[3]};
        const int32_t oc = h[3] * h[4];
        const cmsis_nn_dims filter_dims = {1, h[5], h[6], oc};
        const cmsis_nn_dims bias_dims = {1, 1, 1, oc};
        const cmsis_nn_dims output_dims = {h[0], h[13], h[14], oc};
        const int32_t in_n = h[0] * h[1] * h[2] * h[3], w_n = h[5] * h[6] * oc, out_n = h[0] * h[13] * h[14] * oc;
        cmsis_nn_dw_conv_params p;
        cmsis_nn_per_channel_quant_params q = {mult_buf, shift_buf};
        cmsis_nn_context ctx = {NULL, 0}, ctxd, ctx3;
        int32_t status[4];
        int k;
        if (in_n > MAX_IN || w_n > MAX_IN || oc > MAX_OC || out_n > MAX_OUT)
            return 3;
        if (rd(in_buf, (uint32_t)pad4(in_n)) || rd(w_buf, (uint32_t)pad4(w_n)) || rd(bias_buf, 4u * (uint32_t)oc) ||
            rd(mult_buf, 4u * (uint32_t)oc) || rd(shift_buf, 4u * (uint32_t)oc))
            return 1;
        p.input_offset = h[15];
        p.output_offset = h[16];
        p.ch_mult = h[4];
        p.stride.h = h[7];
        p.stride.w = h[8];
        p.dilation.h = h[9];
        p.dilation.w = h[10];
        p.padding.h = h[11];
        p.padding.w = h[12];
        p.activation.min = h[17];
        p.activation.max = h[18];
        for (k = 0; k < 4; k++)
            memset(out_buf[k], 0x55, (size_t)out_n);
        /* the 3x3 kernel's scratch as the query sizes it, at an odd address (the kernel aligns it) */
        ctx3.buf = scratch_buf + 1;
        ctx3.size = pockmcu_depthwise_conv_3x3_dsp_s8_get_buffer_size(&p, &input_dims, &filter_dims, &output_dims);
        if (ctx3.size > MAX_SCRATCH)
            return 3;
        memset(scratch_buf, 0xA5, sizeof(scratch_buf));
        /* the channel-multiplier kernel's scratch as its query sizes it, misaligned too */
        ctxd.buf = scratch_dw + 3;
        ctxd.size = pockmcu_depthwise_conv_mult_dsp_s8_get_buffer_size(&p, &input_dims, &filter_dims, &output_dims);
        if (ctxd.size > MAX_SCRATCH)
            return 3;
        memset(scratch_dw, 0x5A, sizeof(scratch_dw));
        status[0] = arm_depthwise_conv_wrapper_s8(&ctx, &p, &q, &input_dims, in_buf, &filter_dims, w_buf, &bias_dims,
                                                  h[19] ? bias_buf : NULL, &output_dims, out_buf[0]);
        status[1] = pockmcu_depthwise_conv_dsp_s8(&ctx, &p, &q, &input_dims, in_buf, &filter_dims, w_buf, &bias_dims,
                                                  h[19] ? bias_buf : NULL, &output_dims, out_buf[1]);
        status[2] = pockmcu_depthwise_conv_3x3_dsp_s8(&ctx3, &p, &q, &input_dims, in_buf, &filter_dims, w_buf,
                                                      &bias_dims, h[19] ? bias_buf : NULL, &output_dims, out_buf[2]);
        status[3] = pockmcu_depthwise_conv_mult_dsp_s8(&ctxd, &p, &q, &input_dims, in_buf, &filter_dims, w_buf,
                                                       &bias_dims, h[19] ? bias_buf : NULL, &output_dims, out_buf[3]);
        if (wr(status, sizeof(status)))
            return 2;
        for (k = 0; k < 4; k++)
            if (wr(out_buf[k], (uint32_t)out_n))
                return 2;
    }
    return 0;
}
"""

QEMU_MAIN = COMMON_C + r"""
#include "semihost.h"
static int fd_in, fd_out;
static int rd(void *p, uint32_t n) { return n ? sh_read(fd_in, p, n) != 0 : 0; }
static int wr(const void *p, uint32_t n) { return n ? sh_write(fd_out, p, n) != 0 : 0; }

int main(void)
{
    int32_t count, i;
    fd_in = sh_open("cases.bin", SH_MODE_RB);
    fd_out = sh_open("out.bin", SH_MODE_WB);
    if (fd_in < 0 || fd_out < 0 || rd(&count, 4))
        return 2;
    for (i = 0; i < count; i++)
        if (run_case(rd, wr))
            return 3;
    sh_close(fd_in);
    sh_close(fd_out);
    return 0;
}
"""

HOST_MAIN = COMMON_C + r"""
#include <stdio.h>
static FILE *f_in, *f_out;
static int rd(void *p, uint32_t n) { return n ? fread(p, 1, n, f_in) != n : 0; }
static int wr(const void *p, uint32_t n) { return n ? fwrite(p, 1, n, f_out) != n : 0; }

int main(int argc, char **argv)
{
    int32_t count, i;
    if (argc < 3)
        return 2;
    f_in = fopen(argv[1], "rb");
    f_out = fopen(argv[2], "wb");
    if (!f_in || !f_out || rd(&count, 4))
        return 2;
    for (i = 0; i < count; i++)
        if (run_case(rd, wr))
            return 3;
    fclose(f_in);
    fclose(f_out);
    return 0;
}
"""


def _pad4(b: bytes) -> bytes:
    return b + bytes(-len(b) % 4)


def make_cases(seed: int = 13, n: int = N_CASES, n_mult: int = N_MULT):
    """Random depthwise geometries and quantizations; returns (cases.bin, list of output sizes, fast flags
    of the general DSP loops, fast flags of the 3x3 kernel's row loops, fast requantization flags of the
    channel-multiplier loops (None for a multiplier of 1)). The last n_mult cases have channel multipliers
    2..8, input channels 1..9 (1 often) and filters up to 10x8 (the channel-multiplier loops)."""
    rng = np.random.default_rng(seed)
    blob, sizes, fast, fast3, fastm = [struct.pack("<i", n + n_mult)], [], [], [], []
    for i in range(n + n_mult):
        if i < n:
            c = int(rng.choice([1, 2, 3, 4, 5, 7, 8, 12, 16, 17, 31, 32, 33, 64, 67])) if i % 3 else int(rng.integers(1, 68))
            m = 1 if rng.random() < 0.8 else int(rng.integers(2, 4))
            if c * m > 256:
                m = 1
            kh, kw = (3, 3) if i % 2 == 0 else (int(rng.integers(1, 8)), int(rng.integers(1, 8)))
        else:
            c = 1 if rng.random() < 0.4 else int(rng.integers(1, 10))
            m = int(rng.integers(2, 9))
            kh, kw = (10, 8) if rng.random() < 0.2 else (int(rng.integers(1, 11)), int(rng.integers(1, 9)))
        sh, sw = int(rng.integers(1, 4)), int(rng.integers(1, 4))
        dh, dw = (1, 1) if rng.random() < 0.6 else (int(rng.integers(1, 4)), int(rng.integers(1, 4)))
        batches = 1 if rng.random() < 0.85 else 2
        h, w = int(rng.integers(1, 10 if i < n else 14)), int(rng.integers(1, 10 if i < n else 14))
        ekh, ekw = (kh - 1) * dh + 1, (kw - 1) * dw + 1
        mode = rng.integers(0, 3)    # 0 VALID, 1 SAME, 2 asymmetric
        if mode == 0:
            h, w = max(h, ekh), max(w, ekw)
            pads = (0, 0, 0, 0)
        elif mode == 1:
            oh, ow = -(-h // sh), -(-w // sw)
            th, tw = max((oh - 1) * sh + ekh - h, 0), max((ow - 1) * sw + ekw - w, 0)
            pads = (th // 2, tw // 2, th - th // 2, tw - tw // 2)
        else:
            pads = tuple(int(rng.integers(0, k)) if k > 1 else 0 for k in (ekh, ekw, ekh, ekw))
        oh = (h + pads[0] + pads[2] - ekh) // sh + 1
        ow = (w + pads[1] + pads[3] - ekw) // sw + 1
        if oh < 1 or ow < 1:
            h, w, pads = max(h, ekh), max(w, ekw), (0, 0, 0, 0)
            oh, ow = (h - ekh) // sh + 1, (w - ekw) // sw + 1
        oc = c * m
        if batches * h * w * c > 16384 or batches * oh * ow * oc > 65536:
            batches = 1
        in_off = int(rng.choice([-127, 128, 0])) if rng.random() < 0.3 else int(rng.integers(-127, 129))
        out_off = int(rng.choice([-128, 127])) if rng.random() < 0.3 else int(rng.integers(-128, 128))
        lo, hi = (-128, 127) if rng.random() < 0.5 else tuple(sorted(int(v) for v in rng.integers(-128, 128, 2)))
        x = rng.integers(-128, 128, batches * h * w * c).astype(np.int8)
        if rng.random() < 0.1:
            x[:] = rng.choice([-128, 127])
        wts = rng.integers(-127, 128, kh * kw * oc).astype(np.int8)
        if rng.random() < 0.1:
            wts[:] = rng.choice([-128, 127])
        bias_scale = int(rng.choice([1 << 8, 1 << 14, 1 << 20, 1 << 30], p=[0.3, 0.3, 0.3, 0.1]))
        bias = rng.integers(-bias_scale, bias_scale, oc).astype(np.int32)
        has_bias = int(rng.random() < 0.85)
        mult = rng.integers(1 << 30, (1 << 31) - 1, oc).astype(np.int64)
        if rng.random() < 0.1:
            mult[rng.integers(0, oc)] = int(rng.choice([0, 1, (1 << 31) - 1]))
        r = rng.random()    # all shifts <= -1 (a scale below 1/2, the 3x3 kernel's row loops), some >= 0, extreme
        shift = rng.integers(-12, 0 if r < 0.5 else 2, oc).astype(np.int32) if r < 0.9 else \
            rng.integers(-31, 12, oc).astype(np.int32)
        head = [batches, h, w, c, m, kh, kw, sh, sw, dh, dw, pads[0], pads[1], oh, ow, in_off, out_off, lo, hi,
                has_bias]
        blob += [struct.pack(f"<{HEADER}i", *head), _pad4(x.tobytes()), _pad4(wts.tobytes()), bias.tobytes(),
                 mult.astype(np.int32).tobytes(), shift.tobytes()]
        sizes.append(batches * oh * ow * oc)
        b = np.abs(bias.astype(np.int64)) * has_bias + kh * kw * 255 * 128
        ls = np.maximum(shift, 0)
        fast.append(m == 1 and bool(np.all((ls <= 29) & (b < (1 << (30 - np.minimum(ls, 29)))))))
        b3 = np.abs(bias.astype(np.int64)) * has_bias + 9 * 255 * 128
        fold = b3.max() + 3 + (129 << np.clip(-shift.astype(np.int64), 0, 31)) < (1 << 31)    # max |bias|
        fast3.append((kh, kw, m, dh, dw) == (3, 3, 1, 1, 1) and
                     bool(np.all((shift <= -1) & (shift >= -31) & (b3 < (1 << 30)) & fold)))
        fastm.append(None if m == 1 else bool(np.all((ls <= 29) & (b < (1 << (30 - np.minimum(ls, 29)))))))
    return b"".join(blob), sizes, fast, fast3, fastm


def make_cases_3x3(seed: int = 31, n: int = 160):
    """Cases of the 3x3 kernel's fast loops (pockmcu_depthwise_conv_3x3_dsp_s8): channel multiplier 1, no dilation,
    every shift <= -1 and biases within its bounds; maps 1x1 .. 9x7 (odd sizes, maps where every pixel touches the
    padding), channels 1..37 (tails of 1 to 3), strides 1 and 2 (some 3) in either direction, VALID / SAME /
    asymmetric padding, per-channel multipliers, clamps, input offsets -127 and 128 among others. Same blob and
    sizes as make_cases; also returns the fast flags (all must be True)."""
    rng = np.random.default_rng(seed)
    blob, sizes, fast3 = [struct.pack("<i", n)], [], []
    for i in range(n):
        c = int(rng.integers(1, 38)) if i % 4 else int(rng.choice([1, 2, 3, 4, 5, 8, 12, 36, 37]))
        sh, sw = (int(rng.choice([1, 2])), int(rng.choice([1, 2]))) if i % 8 else (int(rng.integers(1, 4)),
                                                                                 int(rng.integers(1, 4)))
        h, w = int(rng.integers(1, 10)), int(rng.integers(1, 8))
        mode = i % 3    # 0 VALID, 1 SAME, 2 asymmetric
        if mode == 0:
            h, w = max(h, 3), max(w, 3)
            pads = (0, 0)
        elif mode == 1:
            oh, ow = -(-h // sh), -(-w // sw)
            pads = (max((oh - 1) * sh + 3 - h, 0) // 2, max((ow - 1) * sw + 3 - w, 0) // 2)
        else:
            pads = (int(rng.integers(0, 3)), int(rng.integers(0, 3)))
        oh = (h + 2 * pads[0] - 3) // sh + 1 if mode != 1 else -(-h // sh)
        ow = (w + 2 * pads[1] - 3) // sw + 1 if mode != 1 else -(-w // sw)
        if mode == 2:    # the bottom / right padding may be anything up to 2: cut the output to what exists
            oh, ow = max(oh, 1), max(ow, 1)
            h, w = max(h, (oh - 1) * sh + 3 - 2 * pads[0]), max(w, (ow - 1) * sw + 3 - 2 * pads[1])
        batches = 1 if rng.random() < 0.9 else 2
        in_off = int(rng.choice([-127, 128])) if rng.random() < 0.5 else int(rng.integers(-127, 129))
        out_off = int(rng.integers(-128, 128))
        lo, hi = (-128, 127) if rng.random() < 0.5 else tuple(sorted(int(v) for v in rng.integers(-128, 128, 2)))
        x = rng.integers(-128, 128, batches * h * w * c).astype(np.int8)
        if rng.random() < 0.1:
            x[:] = rng.choice([-128, 127])
        wts = rng.integers(-127, 128, 9 * c).astype(np.int8)
        if rng.random() < 0.1:
            wts[:] = rng.choice([-128, 127])
        bias = rng.integers(-(1 << 20), 1 << 20, c).astype(np.int32)
        has_bias = int(rng.random() < 0.85)
        mult = rng.integers(1 << 30, (1 << 31) - 1, c).astype(np.int64)
        if rng.random() < 0.2:
            mult[rng.integers(0, c)] = int(rng.choice([0, 1, (1 << 31) - 1]))
        shift = rng.integers(-12, 0, c).astype(np.int32) if rng.random() < 0.8 else \
            rng.integers(-20, 0, c).astype(np.int32)
        head = [batches, h, w, c, 1, 3, 3, sh, sw, 1, 1, pads[0], pads[1], oh, ow, in_off, out_off, lo, hi, has_bias]
        blob += [struct.pack(f"<{HEADER}i", *head), _pad4(x.tobytes()), _pad4(wts.tobytes()), bias.tobytes(),
                 mult.astype(np.int32).tobytes(), shift.tobytes()]
        sizes.append(batches * oh * ow * c)
        b3 = np.abs(bias.astype(np.int64)) * has_bias + 9 * 255 * 128
        fold = b3.max() + 3 + (129 << (-shift.astype(np.int64))) < (1 << 31)
        fast3.append(bool(np.all((b3 < (1 << 30)) & fold)))
    return b"".join(blob), sizes, fast3


def check(out: bytes, sizes, where: str):
    pos = 0
    for i, n in enumerate(sizes):
        status = struct.unpack_from(f"<{N_KERNELS}i", out, pos)
        pos += 4 * N_KERNELS
        ref, dsp, dsp3, dspm = (out[pos + k * n:pos + (k + 1) * n] for k in range(N_KERNELS))
        pos += N_KERNELS * n
        assert status == (0,) * N_KERNELS, f"{where} case {i}: statuses {status}"
        assert dsp == ref, f"{where} case {i}: pockmcu_depthwise_conv_dsp_s8 differs from the portable kernel"
        assert dsp3 == ref, f"{where} case {i}: pockmcu_depthwise_conv_3x3_dsp_s8 differs from the portable kernel"
        assert dspm == ref, f"{where} case {i}: pockmcu_depthwise_conv_mult_dsp_s8 differs from the portable kernel"
    assert pos == len(out), f"{where}: {len(out) - pos} bytes left over"


def test_cases_exercise_the_fast_loops():
    """Most cases take the DSP loops, not the portable fallback (else the comparison proves little)."""
    _, _, fast, fast3, fastm = make_cases()
    fast, fast3 = fast[:N_CASES], fast3[:N_CASES]    # the cases with channel multipliers 1..3
    assert sum(fast) >= 0.5 * len(fast)
    assert sum(not f for f in fast) >= 10
    assert sum(fast3) >= 0.15 * len(fast3)     # the 3x3 kernel's row loops (its other cases: the general ones)
    mult = [f for f in fastm if f is not None]    # the channel-multiplier loops, both requantizations
    assert len(mult) >= N_MULT and sum(mult) >= 0.5 * len(mult) and sum(not f for f in mult) >= 10


def test_host_equals_portable(tmp_path):
    data, sizes, *_ = make_cases()
    src = tmp_path / "dw_host.c"
    src.write_text(HOST_MAIN)
    exe = tmp_path / "dw_host"
    subprocess.run(["gcc", "-O1", "-std=c99", "-Wall", "-Wextra", "-Werror", "-fsanitize=address,undefined",
                    "-fno-sanitize-recover=all", f"-I{KERNELS}", str(src),
                    *[str(KERNELS / f) for f in KERNEL_FILES], "-o", str(exe)], check=True)
    (tmp_path / "cases.bin").write_bytes(data)
    subprocess.run([str(exe), str(tmp_path / "cases.bin"), str(tmp_path / "out.bin")], check=True)
    check((tmp_path / "out.bin").read_bytes(), sizes, "host")


@pytest.mark.qemu
@pytest.mark.parametrize("target", QEMU_TARGETS)
def test_qemu_equals_portable(tmp_path, target):
    data, sizes, *_ = make_cases()
    elf = build_program(tmp_path, target, QEMU_MAIN, KERNEL_FILES)
    out = run_program(elf, target, {"cases.bin": data}, ["out.bin"])["out.bin"]
    check(out, sizes, target)


def test_3x3_cases_take_the_fast_loops():
    """Every case of make_cases_3x3 meets the 3x3 kernel's conditions (its ring loops, not the general fallback)."""
    _, sizes, fast3 = make_cases_3x3()
    assert all(fast3) and len(sizes) >= 150


def test_3x3_host_equals_portable(tmp_path):
    data, sizes, _ = make_cases_3x3()
    src = tmp_path / "dw3_host.c"
    src.write_text(HOST_MAIN)
    exe = tmp_path / "dw3_host"
    subprocess.run(["gcc", "-O1", "-std=c99", "-Wall", "-Wextra", "-Werror", "-fsanitize=address,undefined",
                    "-fno-sanitize-recover=all", f"-I{KERNELS}", str(src),
                    *[str(KERNELS / f) for f in KERNEL_FILES], "-o", str(exe)], check=True)
    (tmp_path / "cases.bin").write_bytes(data)
    subprocess.run([str(exe), str(tmp_path / "cases.bin"), str(tmp_path / "out.bin")], check=True)
    check((tmp_path / "out.bin").read_bytes(), sizes, "host (3x3 cases)")


@pytest.mark.qemu
@pytest.mark.parametrize("target", QEMU_TARGETS)
def test_3x3_qemu_equals_portable(tmp_path, target):
    data, sizes, _ = make_cases_3x3()
    elf = build_program(tmp_path, target, QEMU_MAIN, KERNEL_FILES)
    out = run_program(elf, target, {"cases.bin": data}, ["out.bin"])["out.bin"]
    check(out, sizes, f"{target} (3x3 cases)")


# -- the wrapper this work added to pockmcu_simd.h (its dspdw block): SMMULR ---------------------------

SMMULR_C = r"""
#include <stdint.h>
#include "pockmcu_simd.h"
#define N_MAX 4096
static int32_t in_words[2 * N_MAX], out_words[N_MAX];
static void eval(void)
{
    for (uint32_t i = 0; i < N_MAX; i++)
        out_words[i] = pockmcu_smmulr(in_words[2 * i], in_words[2 * i + 1]);
}
"""

SMMULR_QEMU = SMMULR_C + r"""
#include "semihost.h"
int main(void)
{
    int fd = sh_open("in.bin", SH_MODE_RB);
    if (fd < 0 || sh_read(fd, in_words, sizeof(in_words)) != 0) return 2;
    sh_close(fd);
    eval();
    fd = sh_open("out.bin", SH_MODE_WB);
    if (fd < 0 || sh_write(fd, out_words, sizeof(out_words)) != 0) return 2;
    sh_close(fd);
    return 0;
}
"""


def smmulr_cases():
    rng = np.random.default_rng(5)
    words = rng.integers(-(1 << 31), 1 << 31, size=(4096, 2), dtype=np.int64)
    extreme = [0, 1, -1, (1 << 31) - 1, -(1 << 31), 1 << 30, -(1 << 30), 12345, -12345]
    grid = np.array([(a, b) for a in extreme for b in extreme], np.int64)
    words[:len(grid)] = grid
    return words.astype(np.int32)


def smmulr_model(words):
    """The Arm ARM: SMMULR Rd = (Rn * Rm + 0x80000000)<63:32>."""
    return np.array([((int(a) * int(b) + (1 << 31)) >> 32) for a, b in words], np.int64).astype(np.int32)


@pytest.mark.qemu
@pytest.mark.parametrize("target", QEMU_TARGETS)
def test_smmulr_qemu(tmp_path, target):
    words = smmulr_cases()
    elf = build_program(tmp_path, target, SMMULR_QEMU)
    out = run_program(elf, target, {"in.bin": words.tobytes()}, ["out.bin"])["out.bin"]
    assert np.array_equal(np.frombuffer(out, np.int32), smmulr_model(words))


def test_smmulr_host(tmp_path):
    words = smmulr_cases()
    src = tmp_path / "smmulr.c"
    src.write_text(SMMULR_C + r"""
#include <stdio.h>
int main(int argc, char **argv)
{
    FILE *f = fopen(argv[1], "rb");
    if (argc < 3 || !f || fread(in_words, 4, 2 * N_MAX, f) != 2 * N_MAX) return 2;
    fclose(f);
    eval();
    f = fopen(argv[2], "wb");
    if (!f || fwrite(out_words, 4, N_MAX, f) != N_MAX) return 2;
    fclose(f);
    return 0;
}
""")
    exe = tmp_path / "smmulr"
    subprocess.run(["gcc", "-O2", "-std=c99", "-Wall", "-Wextra", "-Werror", "-fsanitize=undefined",
                    "-fno-sanitize-recover=all", f"-I{KERNELS}", str(src), "-o", str(exe)], check=True)
    (tmp_path / "in.bin").write_bytes(words.tobytes())
    subprocess.run([str(exe), str(tmp_path / "in.bin"), str(tmp_path / "out.bin")], check=True)
    assert np.array_equal(np.frombuffer((tmp_path / "out.bin").read_bytes(), np.int32), smmulr_model(words))


def test_planner_scratch_equals_the_query(tmp_path):
    """ops/conv.py's size of the channel-multiplier scratch (what the planner reserves) equals the kernel's
    pockmcu_depthwise_conv_mult_dsp_s8_get_buffer_size, so the kernel never falls back for want of scratch."""
    from pockmcu.ops.conv import dw_mult_scratch_bytes
    grid = [(m, c, kh, kw) for m in (1, 2, 3, 8) for c in (1, 3, 4, 9, 64) for kh in (1, 3, 10) for kw in (1, 2, 5, 8)]
    src = tmp_path / "q.c"
    src.write_text('#include <stdio.h>\n#include "pockmcu_nn.h"\nint main(void)\n{\n' + "".join(
        f"    {{ cmsis_nn_dw_conv_params p = {{0}}; cmsis_nn_dims i = {{1, 20, 20, {c}}}, f = {{1, {kh}, {kw}, {c * m}}}, "
        f"o = {{1, 20, 20, {c * m}}}; p.ch_mult = {m}; "
        f'printf("%ld\\n", (long)pockmcu_depthwise_conv_mult_dsp_s8_get_buffer_size(&p, &i, &f, &o)); }}\n'
        for m, c, kh, kw in grid) + "    return 0;\n}\n")
    exe = tmp_path / "q"
    subprocess.run(["gcc", "-std=c99", "-Wall", "-Wextra", "-Werror", f"-I{KERNELS}", str(src),
                    str(KERNELS / "pockmcu_depthwise_conv_mult_dsp_s8_get_buffer_size.c"), "-o", str(exe)], check=True)
    got = [int(v) for v in subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout.split()]
    assert got == [dw_mult_scratch_bytes(m, c, kh, kw) if m > 1 else 0 for m, c, kh, kw in grid]
