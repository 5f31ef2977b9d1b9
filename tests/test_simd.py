"""kernels_c/pockmcu_simd.h: each DSP instruction wrapper gives the architected 32 bits.

A Python model of each instruction (the Arm ARM's pseudocode, lanes and wrap-around) is the oracle.
The header's functions run on random and extreme words on the host (the portable C the host
simulation uses), in QEMU on Cortex-M3 (portable C on a core without DSP) and on M4, M7, M33 and M55
(the instructions themselves, ACLE and inline assembly). All must equal the model bit for bit.
"""

from __future__ import annotations

import subprocess

import numpy as np
import pytest

from tests.qemu_c import KERNELS, QEMU_TARGETS, build_program, run_program

FUNCS = ("sxtb16", "sxtb16_ror8", "sxtab16", "sxtab16_ror8", "sadd16", "smlad", "smladx", "smlabb", "smlatt",
         "pkhbt", "pkhtb",
         # the dsp13c block: paired-lane multiplies, the folded requantization, PKH and BFI as instructions
         "smlabt", "smlatb", "smmlar", "ssat8", "pkhbt_lsl16", "pkhtb_asr16", "pack_s8x2")

EVAL_C = r"""
#include <stdint.h>
#include "pockmcu_simd.h"

/* For each triple (a, b, c): every function of pockmcu_simd.h, in the order of FUNCS. */
static void simd_eval(const uint32_t *in, uint32_t *out, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
    {
        const uint32_t a = in[3 * i], b = in[3 * i + 1], c = in[3 * i + 2];
        uint32_t *o = out + 18 * i;
        o[0] = pockmcu_sxtb16(a);
        o[1] = pockmcu_sxtb16_ror8(a);
        o[2] = pockmcu_sxtab16(b, a);
        o[3] = pockmcu_sxtab16_ror8(b, a);
        o[4] = pockmcu_sadd16(a, b);
        o[5] = (uint32_t)pockmcu_smlad(a, b, (int32_t)c);
        o[6] = (uint32_t)pockmcu_smladx(a, b, (int32_t)c);
        o[7] = (uint32_t)pockmcu_smlabb(a, b, (int32_t)c);
        o[8] = (uint32_t)pockmcu_smlatt(a, b, (int32_t)c);
        o[9] = pockmcu_pkhbt(a, b);
        o[10] = pockmcu_pkhtb(a, b);
        o[11] = (uint32_t)pockmcu_smlabt(a, b, (int32_t)c);
        o[12] = (uint32_t)pockmcu_smlatb(a, b, (int32_t)c);
        o[13] = (uint32_t)pockmcu_smmlar((int32_t)a, (int32_t)b, (int32_t)c);
        o[14] = (uint32_t)pockmcu_ssat8((int32_t)a);
        o[15] = pockmcu_pkhbt_lsl16(a, b);
        o[16] = pockmcu_pkhtb_asr16(a, b);
        o[17] = pockmcu_pack_s8x2((int32_t)a, (int32_t)b) & 0xFFFFu; /* only the low half is defined */
    }
}
"""

QEMU_MAIN = EVAL_C + r"""
#include "semihost.h"
#define N_MAX 4096
static uint32_t in_words[3 * N_MAX];
static uint32_t out_words[18 * N_MAX];

int main(void)
{
    int fd = sh_open("in.bin", SH_MODE_RB);
    if (fd < 0 || sh_read(fd, in_words, sizeof(in_words)) < 0) return 2;
    sh_close(fd);
    simd_eval(in_words, out_words, N_MAX);
    fd = sh_open("out.bin", SH_MODE_WB);
    if (fd < 0 || sh_write(fd, out_words, sizeof(out_words)) != 0) return 2;
    sh_close(fd);
    return 0;
}
"""

HOST_MAIN = EVAL_C + r"""
#include <stdio.h>
#define N_MAX 4096
static uint32_t in_words[3 * N_MAX];
static uint32_t out_words[18 * N_MAX];

int main(int argc, char **argv)
{
    FILE *f = fopen(argv[1], "rb");
    if (argc < 3 || !f || fread(in_words, 4, 3 * N_MAX, f) != 3 * N_MAX) return 2;
    fclose(f);
    simd_eval(in_words, out_words, N_MAX);
    f = fopen(argv[2], "wb");
    if (!f || fwrite(out_words, 4, 18 * N_MAX, f) != 18 * N_MAX) return 2;
    fclose(f);
    return 0;
}
"""

N = 4096


def _s16(x):
    x = x & 0xFFFF
    return x - 0x10000 if x & 0x8000 else x


def _s8(x):
    x = x & 0xFF
    return x - 0x100 if x & 0x80 else x


def _s32(x):
    x = x & 0xFFFFFFFF
    return x - (1 << 32) if x & 0x80000000 else x


def _pack(lo, hi):
    return (lo & 0xFFFF) | ((hi & 0xFFFF) << 16)


def model(a: int, b: int, c: int) -> list[int]:
    """The Arm ARM's pseudocode of each instruction, in the order of FUNCS."""
    lo, hi = _s16, lambda x: _s16(x >> 16)
    m = 0xFFFFFFFF
    return [
        _pack(_s8(a), _s8(a >> 16)),
        _pack(_s8(a >> 8), _s8(a >> 24)),
        _pack(lo(b) + _s8(a), hi(b) + _s8(a >> 16)),
        _pack(lo(b) + _s8(a >> 8), hi(b) + _s8(a >> 24)),
        _pack(lo(a) + lo(b), hi(a) + hi(b)),
        (c + lo(a) * lo(b) + hi(a) * hi(b)) & m,
        (c + lo(a) * hi(b) + hi(a) * lo(b)) & m,
        (c + lo(a) * lo(b)) & m,
        (c + hi(a) * hi(b)) & m,
        (a & 0xFFFF) | ((b & 0xFFFF) << 16),
        (a & 0xFFFF0000) | (b >> 16),
        (c + lo(a) * hi(b)) & m,
        (c + hi(a) * lo(b)) & m,
        (_s32(c) + ((_s32(a) * _s32(b) + (1 << 31)) >> 32)) & m,    # SMMLAR: (c << 32) + a * b, rounded, high word
        min(max(_s32(a), -128), 127) & m,
        (a & 0xFFFF) | ((b & 0xFFFF) << 16),
        (a & 0xFFFF0000) | (b >> 16),
        (a & 0xFF) | ((b & 0xFF) << 8),
    ]


def cases() -> np.ndarray:
    rng = np.random.default_rng(7)
    words = rng.integers(0, 1 << 32, size=(N, 3), dtype=np.uint64).astype(np.uint32)
    extreme = np.array([0, 1, 0x7F, 0x80, 0xFF, 0x7FFF, 0x8000, 0xFFFF, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF,
                        0x80808080, 0x7F7F7F7F, 0x80008000, 0x7FFF7FFF], np.uint32)
    k = len(extreme)
    grid = np.stack(np.meshgrid(extreme, extreme, extreme, indexing="ij"), -1).reshape(-1, 3)
    words[: len(grid)] = grid[:N]
    assert k ** 3 <= N
    return words


def expected(words: np.ndarray) -> np.ndarray:
    return np.array([model(int(a), int(b), int(c)) for a, b, c in words], np.uint32)


def test_host_equals_model(tmp_path):
    words = cases()
    src = tmp_path / "simd_host.c"
    src.write_text(HOST_MAIN)
    exe = tmp_path / "simd_host"
    subprocess.run(["gcc", "-O2", "-std=c99", "-Wall", "-Wextra", "-Werror", "-fsanitize=undefined",
                    "-fno-sanitize-recover=all", f"-I{KERNELS}", str(src), "-o", str(exe)], check=True)
    (tmp_path / "in.bin").write_bytes(words.tobytes())
    subprocess.run([str(exe), str(tmp_path / "in.bin"), str(tmp_path / "out.bin")], check=True)
    got = np.frombuffer((tmp_path / "out.bin").read_bytes(), np.uint32).reshape(N, len(FUNCS))
    want = expected(words)
    for j, f in enumerate(FUNCS):
        bad = np.flatnonzero(got[:, j] != want[:, j])
        assert not len(bad), f"{f}({words[bad[0]]}) = {got[bad[0], j]:#x}, want {want[bad[0], j]:#x}"


@pytest.mark.qemu
@pytest.mark.parametrize("target", QEMU_TARGETS)
def test_qemu_equals_model(tmp_path, target):
    words = cases()
    elf = build_program(tmp_path, target, QEMU_MAIN)
    out = run_program(elf, target, {"in.bin": words.tobytes()}, ["out.bin"])["out.bin"]
    got = np.frombuffer(out, np.uint32).reshape(N, len(FUNCS))
    want = expected(words)
    for j, f in enumerate(FUNCS):
        bad = np.flatnonzero(got[:, j] != want[:, j])
        assert not len(bad), f"{target} {f}({words[bad[0]]}) = {got[bad[0], j]:#x}, want {want[bad[0], j]:#x}"
