"""Small FULLY_CONNECTED layers on the DSP kernels (issue 13): the bytes of the portable kernels and numpy.

The per-call setup of pockmcu_fully_connected_*_s8_dsp (the O(1)-per-channel proof that the SMMLAR
requantization is exact, the bias bound taken as an OR of the biases, the per-tensor constants hoisted once a
call, the four outputs of a 1x4 block requantized and clamped together) matters most on tiny layers, so these
cases are tiny: depth 1..67 (odd depths included), 1..20 batches (rows), 1..20 output channels, per tensor and
per channel, extreme input/output offsets, multipliers and shifts (tests/test_dsp_conv.py's _requant), and
biases placed on both sides of the fast requantization's bound (|bias| up to 2^31 - 1, and just below and above
2^31 - 3 - 129 * 2^-shift - depth * 255 * 128), so both the fast and the exact 64-bit requantization run.
The program and checks are tests/test_dsp_conv.py's (DSP = portable = the fast-path loops = numpy), run on
the host under UBSan and in QEMU on Cortex-M4, M7, M33 and M55.
"""

from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pytest

from tests.conftest import KERNEL_CFLAGS
from tests.qemu_c import FIRMWARE, KERNELS
from tests.test_dsp_conv import CASES_C, DSP_FILES, I32_MAX, PORTABLE_FILES, _qemu_run, _requant, check, decode, encode, fc_case

FC_TARGETS = ("qemu-m4", "qemu-m7", "qemu-m33", "qemu-m55")
# UBSan (signed overflow in the edge-of-bound biases is what these cases can provoke); tests/test_dsp_conv.py runs
# the same program under ASan too
UBSAN_CFLAGS = ["-O1", "-fsanitize=undefined", "-fno-sanitize-recover=all"]


def _bias(rng, o: int, depth: int, shift: np.ndarray) -> np.ndarray:
    """Per channel: a usual bias, a huge one, or one within a few units of where the fast requantization's
    bound (B + 3 + 129 * 2^e < 2^31, B = |bias| + depth * 32640) stops holding for that channel's shift."""
    out = []
    for k in range(o):
        r = rng.random()
        e = int(-shift[k % len(shift)])
        if r < 0.5:
            b = int(rng.integers(-(1 << 20), 1 << 20))
        elif r < 0.6:
            b = int(rng.choice([I32_MAX, -I32_MAX - 1, 1 << 30, -(1 << 30), (1 << 29) + 7]))
        elif 1 <= e <= 31:
            edge = (1 << 31) - 3 - 129 * (1 << e) - depth * 255 * 128
            edge = min(max(edge, 0), (1 << 30) - depth * 255 * 128)
            b = int(edge + rng.integers(-4, 5)) * int(rng.choice([-1, 1]))
        else:
            b = int(rng.integers(-(1 << 29), 1 << 29))
        cap = I32_MAX - depth * 255 * 128       # the int32 accumulator of TFLM's (and the portable) kernel
        out.append(max(min(b, cap), -cap))
    return np.array(out, np.int64)


def small_cases() -> list[dict]:
    rng = np.random.default_rng(1313)
    cases = []
    for i in range(80):
        per_channel = bool(i % 2)
        depth = int(rng.integers(1, 68)) if i >= 8 else 1 + i % 4       # depth 1..4 first: the scalar tails
        c = fc_case(rng, per_channel, batches=int(rng.integers(1, 21)), depth=depth, out_c=int(rng.integers(1, 21)))
        if rng.random() < 0.3:      # extreme multipliers and shifts for every channel
            c["mult"], c["shift"] = _requant(rng, c["out_c"] if per_channel else 1, depth)
        c["bias"] = _bias(rng, c["out_c"], depth, c["shift"])
        if rng.random() < 0.3:
            c["input_offset"] = int(rng.choice([-127, 128]))
            c["output_offset"] = int(rng.choice([-128, 127]))
        c["expect_fast"] = True
        cases.append(c)
    # the hello_world geometries (1 -> 16, 16 -> 16, 16 -> 1; one batch)
    for d, o in ((1, 16), (16, 16), (16, 1)):
        c = fc_case(rng, False, batches=1, depth=d, out_c=o)
        c["expect_fast"] = True
        cases.append(c)
    return cases


@pytest.fixture(scope="module")
def cases():
    return small_cases()


def test_small_fc_cases_reach_both_requantizations(cases):
    """The bias cases straddle the fast requantization's bound (so both output stages are exercised)."""
    inside = outside = 0
    for c in cases:
        shift = np.asarray(c["shift"], np.int64)
        bound = np.abs(np.asarray(c["bias"], np.int64)).max() + c["in_c"] * 255 * 128
        ok = bool(np.all((shift <= -1) & (shift >= -23)) and bound + 3 + 129 * (1 << int(-shift.min())) < (1 << 31)
                  and bound < (1 << 30)) if c["has_bias"] else True
        inside += ok
        outside += not ok
    assert inside >= 15 and outside >= 15, (inside, outside)


def test_host_small_fc_equals_portable_and_numpy(tmp_path, cases):
    exe = tmp_path / "fc_cases"
    src = tmp_path / "fc_cases.c"
    src.write_text(CASES_C)
    sources = [str(KERNELS / f) for f in DSP_FILES + PORTABLE_FILES]
    cmd = ["gcc", *KERNEL_CFLAGS, *UBSAN_CFLAGS, "-DPOCKMCU_TEST_HOST", f"-I{KERNELS}", str(src), *sources,
           "-o", str(exe)]
    res = subprocess.run(cmd, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr[-4000:]
    (tmp_path / "cases.bin").write_bytes(encode(cases))
    run = subprocess.run([str(exe), str(tmp_path / "cases.bin"), str(tmp_path / "out.bin")], capture_output=True,
                         text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-4000:]
    check(cases, decode((tmp_path / "out.bin").read_bytes(), cases), "host")


@pytest.mark.qemu
@pytest.mark.parametrize("target", FC_TARGETS)
def test_qemu_small_fc_equals_portable(tmp_path, target, cases):
    assert shutil.which("qemu-system-arm") and (FIRMWARE / "startup.c").exists()
    check(cases, _qemu_run(tmp_path, target, cases), target)
