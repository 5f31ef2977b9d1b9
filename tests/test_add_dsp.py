"""pockmcu_elementwise_add_s8_dsp (Cortex-M4/M7/M33 same-shape ADD) equals arm_elementwise_add_s8 byte for byte.

One C program runs a few hundred random cases through both kernels: lengths 1..67 (odd, multiples of 4 and not),
input and output pointers at every alignment, offsets -128..127 (and some far outside, which must take the portable
path), multipliers and shifts as TFLM's PrepareAdd makes them from random scales plus extremes (0, 2^31 - 1,
shifts -31..+7, left shifts 0..30, positive output shifts), activation clamps narrower than int8 and some outside
it; each output is followed by guard bytes. Host (-fsanitize=address,undefined: the portable form of every DSP
instruction) and QEMU on M4, M7 and M33 (the DSP instructions) must give identical bytes for both kernels.
"""

from __future__ import annotations

import math
import struct
import subprocess

import numpy as np
import pytest

from pockmcu import kernel_table
from tests.qemu_c import CASE_READER_C, KERNELS, build_program, cases_mains, run_program

KERNEL_FILES = ["arm_elementwise_add_s8.c", "pockmcu_elementwise_add_s8_dsp.c"]
GUARD = 8
HEADER = 16

RUN_C = r"""
#include <stdint.h>
#include <string.h>
#include "pockmcu_nn.h"

#define GUARD 8
/* Case (int32): n, off1, mult1, shift1, off2, mult2, shift2, left_shift, out_off, out_mult, out_shift, act_min,
 * act_max, align1, align2, align_out; then input 1 and input 2 (n bytes each, padded to 4).
 * Output per case: status portable, status dsp, n + GUARD bytes of each (padded to 4). */
""" + CASE_READER_C + r"""

static uint32_t run_cases(const uint8_t *p, const uint8_t *end, uint8_t *out)
{
    static int8_t x1[96], x2[96], y0[96], y1[96];
    uint8_t *o = out;
    while (p < end)
    {
        int32_t h[16], i, st0, st1;
        for (i = 0; i < 16; i++) h[i] = rd(&p);
        memcpy(x1 + h[13], p, (size_t)h[0]);
        p += pad4((uint32_t)h[0]);
        memcpy(x2 + h[14], p, (size_t)h[0]);
        p += pad4((uint32_t)h[0]);
        memset(y0, 0x5A, sizeof y0);
        memset(y1, 0x5A, sizeof y1);
        st0 = arm_elementwise_add_s8(x1 + h[13], x2 + h[14], h[1], h[2], h[3], h[4], h[5], h[6], h[7], y0 + h[15],
                                     h[8], h[9], h[10], h[11], h[12], h[0]);
        st1 = pockmcu_elementwise_add_s8_dsp(x1 + h[13], x2 + h[14], h[1], h[2], h[3], h[4], h[5], h[6], h[7],
                                             y1 + h[15], h[8], h[9], h[10], h[11], h[12], h[0]);
        memcpy(o, &st0, 4);
        memcpy(o + 4, &st1, 4);
        o += 8;
        memcpy(o, y0 + h[15], (size_t)(h[0] + GUARD));
        o += pad4((uint32_t)(h[0] + GUARD));
        memcpy(o, y1 + h[15], (size_t)(h[0] + GUARD));
        o += pad4((uint32_t)(h[0] + GUARD));
    }
    return (uint32_t)(o - out);
}
"""

QEMU_MAIN, HOST_MAIN = cases_mains(RUN_C, 96 * 1024, 96 * 1024)


def _quantize_multiplier(real: float) -> tuple[int, int]:
    """TFLM QuantizeMultiplier."""
    if real == 0.0:
        return 0, 0
    q, shift = math.frexp(real)
    q_fixed = round(q * (1 << 31))
    if q_fixed == 1 << 31:
        q_fixed //= 2
        shift += 1
    if shift < -31:
        return 0, 0
    return q_fixed, shift


def _tflm_params(rng) -> dict:
    """TFLM PrepareAdd's parameters from random scales (left_shift 20)."""
    s1, s2 = (float(10.0 ** rng.uniform(-3.5, 0)) for _ in range(2))
    if rng.random() < 0.2:
        s2 = s1
    so = float(10.0 ** rng.uniform(-3.5, 0.5))
    twice_max = 2 * max(s1, s2)
    m1, sh1 = _quantize_multiplier(s1 / twice_max)
    m2, sh2 = _quantize_multiplier(s2 / twice_max)
    mo, sho = _quantize_multiplier(twice_max / ((1 << 20) * so))
    if rng.random() < 0.25:  # both input shifts negative (r >= 1 for both: the DSP kernel's third loop form)
        sh1, sh2 = sh1 - int(rng.integers(1, 4)), sh2 - int(rng.integers(1, 4))
    return dict(m1=m1, s1=sh1, m2=m2, s2=sh2, mo=mo, so=sho, ls=20)


def _extreme_params(rng) -> dict:
    mults = [0, 1, 1 << 30, (1 << 31) - 1, int(rng.integers(0, 1 << 31)), int(rng.integers(1 << 30, 1 << 31))]
    def pick_mult():
        return int(mults[int(rng.integers(len(mults)))])
    return dict(m1=pick_mult(), s1=int(rng.integers(-31, 8)), m2=pick_mult(), s2=int(rng.integers(-31, 8)),
                mo=pick_mult(), so=int(rng.integers(-31, 3)), ls=int(rng.choice([0, 1, 8, 16, 20, 20, 21, 24, 30])))


def all_cases(seed: int = 13, count: int = 360) -> tuple[list[dict], bytes]:
    rng = np.random.default_rng(seed)
    cases, blob = [], bytearray()
    for i in range(count):
        n = int(rng.integers(1, 68)) if i >= 67 else i + 1
        p = _tflm_params(rng) if i % 3 else _extreme_params(rng)
        if i % 5 == 1:  # power-of-two multipliers: exact halves, so every rounding tie (and its sign) occurs
            p = dict(m1=1 << 30, s1=-int(rng.integers(19, 22)), m2=int(rng.choice([1 << 30, 3 << 28])),
                     s2=-int(rng.choice([0, 19, 20, 21])), mo=1 << 30, so=-int(rng.integers(1, 4)), ls=20)
        off1, off2, oo = (int(rng.integers(-128, 128)) for _ in range(3))
        if i % 17 == 5:
            off1 = int(rng.choice([-32768, 255, 1000, 40000]))
        if i % 19 == 7:
            oo = int(rng.choice([-1000, 300, 1 << 20]))
        amin, amax = -128, 127
        r = rng.random()
        if r < 0.3:
            amin, amax = sorted(int(v) for v in rng.integers(-128, 128, 2))
        elif r < 0.4:
            amin = int(rng.integers(-128, 1))
        elif r < 0.45:
            amin, amax = int(rng.choice([-300, -129])), int(rng.choice([127, 128, 400]))
        if i % 23 == 11:
            rng_x = [np.full(n, v, np.int8) for v in rng.choice([-128, 127], 2)]
        else:
            rng_x = [rng.integers(-128, 128, n, dtype=np.int8) for _ in range(2)]
        aligns = [int(v) for v in rng.integers(0, 4, 3)]
        header = [n, off1, p["m1"], p["s1"], off2, p["m2"], p["s2"], p["ls"], oo, p["mo"], p["so"], amin, amax,
                  *aligns]
        assert len(header) == HEADER
        blob += struct.pack(f"<{HEADER}i", *header)
        for x in rng_x:
            blob += x.tobytes() + b"\0" * ((-n) % 4)
        cases.append(dict(n=n, header=header))
    return cases, bytes(blob)


def check(cases: list[dict], out: bytes, where: str) -> None:
    pos = 0
    for k, c in enumerate(cases):
        n = c["n"]
        st0, st1 = struct.unpack_from("<ii", out, pos)
        pos += 8
        size = (n + GUARD + 3) & ~3
        y0 = out[pos:pos + n + GUARD]
        pos += size
        y1 = out[pos:pos + n + GUARD]
        pos += size
        assert st0 == st1 == 0, (where, k, c)
        assert y0[n:] == y1[n:] == b"\x5a" * GUARD, (where, k, c)
        assert y0 == y1, (where, k, c["header"], y0[:n].hex(), y1[:n].hex())
    assert pos == len(out), where


def test_cases_cover_the_brief():
    cases, _ = all_cases()
    ns = {c["n"] for c in cases}
    assert ns >= set(range(1, 68))
    assert {tuple(c["header"][13:16]) for c in cases if c["header"][13] % 4 and c["header"][15] % 4}
    assert any(c["header"][11] > -128 or c["header"][12] < 127 for c in cases)


@pytest.fixture(scope="module")
def host_out(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("add_dsp_host")
    cases, blob = all_cases()
    src = tmp / "add_host.c"
    src.write_text(HOST_MAIN)
    exe = tmp / "add_host"
    subprocess.run(["gcc", "-O1", "-std=c99", "-Wall", "-Wextra", "-Werror", "-fsanitize=address,undefined",
                    "-fno-sanitize-recover=all", f"-I{KERNELS}", str(src),
                    *[str(KERNELS / f) for f in KERNEL_FILES], "-o", str(exe)], check=True)
    (tmp / "cases.bin").write_bytes(blob)
    subprocess.run([str(exe), str(tmp / "cases.bin"), str(tmp / "out.bin")], check=True)
    return (tmp / "out.bin").read_bytes()


def test_host_equals_portable(host_out):
    cases, _ = all_cases()
    check(cases, host_out, "host")


@pytest.mark.qemu
@pytest.mark.parametrize("target", ["qemu-m4", "qemu-m7", "qemu-m33"])
def test_dsp_add_equals_portable_and_host_in_qemu(tmp_path, target, host_out):
    cases, blob = all_cases()
    elf = build_program(tmp_path, target, QEMU_MAIN, KERNEL_FILES, stack_bytes=8192)
    out = run_program(elf, target, {"cases.bin": blob}, ["out.bin"])["out.bin"]
    check(cases, out, target)
    assert out == host_out


def test_table_picks_dsp_add_on_dsp_cores_and_helium_on_m55():
    mve, dsp, m3 = frozenset({"dsp", "fpu", "mve"}), frozenset({"dsp", "fpu"}), frozenset()
    assert kernel_table.choose("ADD", "", "tflm", dsp).function == "pockmcu_elementwise_add_s8_dsp"
    assert kernel_table.choose("ADD", "", "onnxruntime", dsp).function == "pockmcu_elementwise_add_s8_dsp"
    assert kernel_table.choose("ADD", "", "tflm", mve).function == "pockmcu_elementwise_add_mve_s8"
    assert kernel_table.choose("ADD", "", "tflm", m3).function == "arm_elementwise_add_s8"
    assert kernel_table.choose("ADD", "", "tflm", dsp, "broadcast").function == "pockmcu_add_broadcast_s8"
    assert kernel_table.choose("ADD", "", "tflm", dsp, library="cmsis-nn").function == "arm_elementwise_add_s8"
