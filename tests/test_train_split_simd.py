"""pockmcu_convolve_split_s8_simd (the DSP form of the split-stored trainable conv) against the portable
pockmcu_convolve_split_s8, on the host and on every QEMU core.

A C workload draws seeded random convolutions (any filter size, stride, dilation, padding, channel counts with
4-channel tails, head_c from 0 to C_in, both roundings, odd pixel and channel counts; a scratch column for the
pointwise fast path, none or one too small), runs both kernels and
writes the SIMD kernel's outputs plus a flag (memcmp with the portable outputs). The host build (portable C of
the SIMD helpers) and the QEMU builds (SXTAB16 / SMLAD on M4, M7, M33, M55; portable C on M3) must give the same
bytes with the flag set. The kernel table picks the SIMD row for split-stored layers on a DSP core only.
"""

from __future__ import annotations

import pytest
from conftest import build_kernel_lib
from qemu_c import build_program, run_program, workload_main

from pockmcu import kernel_table

KERNEL_FILES = ["pockmcu_convolve_split_s8.c", "pockmcu_convolve_split_s8_simd.c"]

WORKLOAD_C = r"""
#include <string.h>
#include "pockmcu_nn.h"

static uint32_t rs = 12345u;
static uint32_t rnd(void)
{
    rs ^= rs << 13;
    rs ^= rs >> 17;
    rs ^= rs << 5;
    return rs;
}
static int32_t rint_in(int32_t lo, int32_t hi) { return lo + (int32_t)(rnd() % (uint32_t)(hi - lo + 1)); }

static int8_t x[2 * 9 * 9 * 21], flash[10 * 3 * 3 * 21], head[10 * 3 * 3 * 21];
static int8_t y_ref[2 * 9 * 9 * 10], y_simd[2 * 9 * 9 * 10];
static int32_t bias[10], mult[10], shift[10];
static uint32_t scratch[4 * 11]; /* the int16 column of 4 pixels of up to 21 input channels (pointwise fast path) */

int pockmcu_split_workload(uint8_t *dst, int32_t cap)
{
    int32_t ok = 1, n_out = 4, it;
    for (it = 0; it < 300; it++)
    {
        cmsis_nn_conv_params p;
        cmsis_nn_per_channel_quant_params q;
        cmsis_nn_dims in_d, f_d, b_d, o_d;
        cmsis_nn_context ctx;
        const int32_t n = rint_in(1, 2), in_h = rint_in(1, 9), in_w = rint_in(1, 9), in_c = rint_in(1, 21);
        const int32_t out_c = rint_in(1, 10), ort = (int32_t)(rnd() & 1u);
        const int32_t kh = it % 3 == 0 ? 1 : rint_in(1, 3), kw = it % 3 == 0 ? 1 : rint_in(1, 3);
        const int32_t head_c = it % 5 == 0 ? 0 : (it % 5 == 1 ? in_c : rint_in(0, in_c));
        int32_t i, oh, ow, eff_h, eff_w, st0, st1, count;
        p.stride.h = it % 3 == 0 ? 1 : rint_in(1, 2);
        p.stride.w = it % 3 == 0 ? 1 : rint_in(1, 2);
        p.dilation.h = rint_in(1, 2);
        p.dilation.w = rint_in(1, 2);
        p.padding.h = it % 3 == 0 ? 0 : rint_in(0, kh - 1);
        p.padding.w = it % 3 == 0 ? 0 : rint_in(0, kw - 1);
        eff_h = (kh - 1) * p.dilation.h + 1;
        eff_w = (kw - 1) * p.dilation.w + 1;
        oh = (in_h + 2 * p.padding.h - eff_h) / p.stride.h + 1;
        ow = (in_w + 2 * p.padding.w - eff_w) / p.stride.w + 1;
        if (oh < 1 || ow < 1)
        {
            continue;
        }
        p.input_offset = it % 7 == 0 ? 128 : rint_in(-127, 128);
        p.output_offset = rint_in(-128, 127);
        p.activation.min = rnd() & 1u ? -128 : rint_in(-128, 0);
        p.activation.max = rnd() & 1u ? 127 : rint_in(0, 127);
        count = n * in_h * in_w * in_c;
        for (i = 0; i < count; i++)
        {
            x[i] = (int8_t)rint_in(-128, 127);
        }
        for (i = 0; i < out_c * kh * kw * in_c; i++)
        {
            flash[i] = (int8_t)rint_in(-127, 127);
        }
        for (i = 0; i < out_c * kh * kw * head_c; i++)
        {
            head[i] = (int8_t)rint_in(-127, 127);
        }
        for (i = 0; i < out_c; i++)
        {
            bias[i] = rint_in(-5000, 5000);
            mult[i] = ort ? rint_in(1 << 23, (1 << 24) - 1) : rint_in(1 << 30, 0x7FFFFFFF);
            shift[i] = ort ? -rint_in(33, 38) : -rint_in(6, 11);
        }
        q.multiplier = mult;
        q.shift = shift;
        in_d.n = n, in_d.h = in_h, in_d.w = in_w, in_d.c = in_c;
        f_d.n = out_c, f_d.h = kh, f_d.w = kw, f_d.c = in_c;
        b_d.n = 1, b_d.h = 1, b_d.w = 1, b_d.c = out_c;
        o_d.n = n, o_d.h = oh, o_d.w = ow, o_d.c = out_c;
        /* the pointwise fast path needs the column of 4 pixels: none, too small, or enough */
        ctx.buf = it % 9 == 3 ? NULL : scratch;
        ctx.size = ctx.buf == NULL ? 0 : (it % 9 == 6 ? 4 * (in_c >> 2) : (int32_t)sizeof scratch);
        count = n * oh * ow * out_c;
        memset(y_ref, 0x55, sizeof y_ref);
        memset(y_simd, 0x55, sizeof y_simd);
        st0 = pockmcu_convolve_split_s8(&ctx, &p, &q, &in_d, x, &f_d, flash, head_c ? head : NULL, head_c, &b_d,
                                        it % 4 == 3 ? NULL : bias, &o_d, y_ref, ort);
        st1 = pockmcu_convolve_split_s8_simd(&ctx, &p, &q, &in_d, x, &f_d, flash, head_c ? head : NULL, head_c,
                                             &b_d, it % 4 == 3 ? NULL : bias, &o_d, y_simd, ort);
        if (st0 != 0 || st1 != 0 || memcmp(y_ref, y_simd, sizeof y_ref) != 0)
        {
            ok = 0;
        }
        if (n_out + count <= cap)
        {
            memcpy(dst + n_out, y_simd, (size_t)count);
            n_out += count;
        }
    }
    memcpy(dst, &ok, 4);
    return n_out;
}
"""

MAIN_C = workload_main("pockmcu_split_workload", 262144)


@pytest.fixture(scope="module")
def host_bytes(tmp_path_factory):
    import cffi
    from conftest import KERNELS_DIR

    tmp = tmp_path_factory.mktemp("split")
    (tmp / "workload.c").write_text(WORKLOAD_C)
    so = build_kernel_lib(tmp / "libsplit.so", [KERNELS_DIR / f for f in KERNEL_FILES] + [tmp / "workload.c"])
    ffi = cffi.FFI()
    ffi.cdef("int pockmcu_split_workload(uint8_t *dst, int32_t cap);")
    lib = ffi.dlopen(str(so))
    buf = ffi.new("uint8_t[262144]")
    n = lib.pockmcu_split_workload(buf, 262144)
    assert 10000 < n <= 262144
    return bytes(ffi.buffer(buf, n))


def test_split_simd_equals_portable_on_host(host_bytes):
    assert host_bytes[:4] == (1).to_bytes(4, "little"), "the SIMD split conv differs from the portable one"


@pytest.mark.qemu
@pytest.mark.parametrize("target", ["qemu-m3", "qemu-m4", "qemu-m7", "qemu-m33", "qemu-m55"])
def test_split_simd_host_equals_qemu(tmp_path, target, host_bytes):

    (tmp_path / "src").mkdir()
    wl = tmp_path / "src" / "workload.c"
    wl.write_text(WORKLOAD_C)
    elf = build_program(tmp_path, target, MAIN_C + '\n#include "' + str(wl) + '"\n', KERNEL_FILES)
    out = run_program(elf, target, {}, ["out.bin"])["out.bin"]
    assert out == host_bytes


def test_table_picks_the_simd_split_on_dsp_cores():
    dsp, mve = frozenset({"fpu", "dsp"}), frozenset({"fpu", "dsp", "mve"})
    for numerics in ("tflm", "onnxruntime"):
        assert kernel_table.choose("CONV_2D", "", numerics, dsp, "split").function == "pockmcu_convolve_split_s8_simd"
        assert kernel_table.choose("CONV_2D", "", numerics, mve, "split").function == "pockmcu_convolve_split_s8_simd"
        assert kernel_table.choose("CONV_2D", "", numerics, frozenset({"fpu"}), "split").function == \
            "pockmcu_convolve_split_s8"
