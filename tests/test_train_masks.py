"""pockmcu_mask_pack_s8 (8 elements per SSUB8 / SEL step on DSP cores) against its defining loop, on the host and
on every QEMU core: random int8 activations of every length 0..70 (tails), ReLU / ReLU6 / clamp bounds including
the extremes and bounds outside int8 (the loop path). The program writes a flag (memcmp against the reference loop
in C) and the masks; QEMU must give the host's bytes."""

from __future__ import annotations

import pytest
from conftest import KERNELS_DIR, build_kernel_lib
from qemu_c import build_program, run_program, workload_main

WORKLOAD_C = r"""
#include <string.h>
#include "pockmcu_nn.h"

static uint32_t rs = 777u;
static uint32_t rnd(void)
{
    rs ^= rs << 13;
    rs ^= rs >> 17;
    rs ^= rs << 5;
    return rs;
}

static void ref_pack(const int8_t *x, int32_t n, int32_t lo, int32_t hi, uint8_t *mask)
{
    for (int32_t k = 0; k < n; k++)
    {
        if (k % 8 == 0)
        {
            mask[k / 8] = 0;
        }
        if (lo < x[k] && x[k] < hi)
        {
            mask[k / 8] = (uint8_t)(mask[k / 8] | (1u << (k % 8)));
        }
    }
}

int pockmcu_mask_workload(uint8_t *dst, int32_t cap)
{
    static const int32_t bounds[][2] = {{-128, 128}, {-128, 127}, {-5, 128}, {-128, 6}, {-20, 100}, {126, 128},
                                        {-129, 128}, {-128, 129}, {127, 128}, {-128, -127}, {0, 0}, {30, 10}};
    static int8_t x[80];
    static uint8_t m1[16], m2[16];
    int32_t ok = 1, out = 4;
    for (int32_t it = 0; it < 71 * 12; it++)
    {
        const int32_t n = it / 12, lo = bounds[it % 12][0], hi = bounds[it % 12][1];
        const int32_t off = (int32_t)(rnd() % 4u); /* unaligned starts */
        for (int32_t k = 0; k < n + off; k++)
        {
            x[k] = (int8_t)(rnd() & 0xFFu);
        }
        memset(m1, 0xAA, sizeof m1);
        memset(m2, 0xAA, sizeof m2);
        pockmcu_mask_pack_s8(x + off, n, lo, hi, m1);
        ref_pack(x + off, n, lo, hi, m2);
        if (memcmp(m1, m2, sizeof m1) != 0)
        {
            ok = 0;
        }
        if (out + (n + 7) / 8 <= cap)
        {
            memcpy(dst + out, m1, (size_t)((n + 7) / 8));
            out += (n + 7) / 8;
        }
    }
    memcpy(dst, &ok, 4);
    return out;
}
"""

MAIN_C = workload_main("pockmcu_mask_workload", 16384)

KERNEL_FILES = ["pockmcu_mask_pack_s8.c"]


@pytest.fixture(scope="module")
def host_bytes(tmp_path_factory):
    import cffi

    tmp = tmp_path_factory.mktemp("masks")
    (tmp / "workload.c").write_text(WORKLOAD_C)
    so = build_kernel_lib(tmp / "libmasks.so", [KERNELS_DIR / f for f in KERNEL_FILES] + [tmp / "workload.c"])
    ffi = cffi.FFI()
    ffi.cdef("int pockmcu_mask_workload(uint8_t *dst, int32_t cap);")
    lib = ffi.dlopen(str(so))
    buf = ffi.new("uint8_t[16384]")
    n = lib.pockmcu_mask_workload(buf, 16384)
    assert 1000 < n <= 16384
    return bytes(ffi.buffer(buf, n))


def test_mask_pack_equals_its_loop_on_host(host_bytes):
    assert host_bytes[:4] == (1).to_bytes(4, "little")


@pytest.mark.qemu
@pytest.mark.parametrize("target", ["qemu-m3", "qemu-m4", "qemu-m7", "qemu-m33", "qemu-m55"])
def test_mask_pack_host_equals_qemu(tmp_path, target, host_bytes):

    (tmp_path / "src").mkdir()
    wl = tmp_path / "src" / "workload.c"
    wl.write_text(WORKLOAD_C)
    elf = build_program(tmp_path, target, MAIN_C + '\n#include "' + str(wl) + '"\n', KERNEL_FILES)
    assert run_program(elf, target, {}, ["out.bin"])["out.bin"] == host_bytes
