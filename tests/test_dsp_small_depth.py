"""The small-depth path of the DSP int8 GEMM loops (issue 14, kernels_c/pockmcu_dsp_loops.h pockmcu_dsp_chunk):
the bytes of the portable kernels and numpy.

At a small depth (pointwise convolutions of up to 64 input channels, small im2col fields; not the fully connected
layers, whose many-batch cases here check they keep the 4-row loops) the loops turn around: output channel outer,
over a chunk of up to POCKMCU_DSP_SMALL_BYTES of expanded rows, with the weights expanded (and doubled for the fast
requantization) once per channel and chunk, unrolled variants for the depths 8, 16, 24 and 32, and the rows that are
left (a shorter last chunk, then 2 and 1 rows) on the 4/2/1-row loops. These cases are chosen to run every part of
it: row counts that are not multiples of 4 (odd ones too) and that span several chunks, every depth 1..40 (each of
the unrolled depths several times) and a few up to 70 (past the path's last depth, 64), per-channel multipliers that
allow the fast requantization (often) or not (extremes: the exact 64-bit one), activation clamps (the clamp
variant), input offsets -127 and 128, output offsets at both ends, onnxruntime rounding. Each case's scratch (the
*_get_buffer_size query) must be what pockmcu/kernel_table.py's dsp_column_bytes plans and larger than the 4-row
column whenever Python says the chunk path applies, so the C and Python rules agree and the chunk path did run. The
program and checks are tests/test_dsp_conv.py's (DSP = portable = the fast-path loops = numpy), on the host
(portable wrappers, UBSan) and in QEMU on Cortex-M4 and M7 (the DSP instructions); host and QEMU bytes are also
compared with each other.
"""

from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pytest

from pockmcu import fixedpoint as fp
from pockmcu.kernel_table import DSP_SMALL_BYTES, dsp_column_bytes
from tests.conftest import KERNEL_CFLAGS
from tests.qemu_c import FIRMWARE, KERNELS, build_program, run_program
from tests.test_dsp_conv import (
    CASES_C,
    CONV,
    DSP_FILES,
    PORTABLE_FILES,
    _requant,
    check,
    conv_case,
    decode,
    encode,
    fc_case,
)
from tests.test_kernels import _rand_act

UBSAN_CFLAGS = ["-O1", "-fsanitize=undefined", "-fno-sanitize-recover=all"]
# the DSP convolution / FC kernels and their portable fallbacks: what the program calls (faster to build than
# tests/test_dsp_conv.py's every DSP kernel)
FILES = [f for f in DSP_FILES if f.startswith(("pockmcu_convolve", "pockmcu_fully_connected"))] + [
    f for f in PORTABLE_FILES if not f.startswith(("arm_depthwise", "arm_elementwise"))]
UNROLLED = (8, 16, 24, 32)


def _fast_requant(rng, n: int, depth: int):
    """Multipliers and shifts QuantizeMultiplier makes for scales below 1/2 (the fast requantization's domain)."""
    mults, shifts = [], []
    for _ in range(n):
        real = float(np.exp(rng.uniform(-2.0, 2.0))) * 100.0 / (128.0 * 128.0 * np.sqrt(depth))
        m, s = fp.quantize_multiplier(min(real, 0.49))
        mults.append(m)
        shifts.append(s)
    return np.array(mults, np.int64), np.array(shifts, np.int64)


def _pointwise(rng, depth: int, rows: int, out_c: int) -> dict:
    """A 1x1 convolution of `rows` pixels (h * w, n images) of `depth` channels."""
    n = 2 if rows % 2 == 0 and rng.random() < 0.2 else 1
    per = rows // n
    h = next(d for d in range(int(np.sqrt(per)), 0, -1) if per % d == 0)
    c = conv_case(rng, pointwise=True, in_c=depth, out_c=out_c)
    c.update(n=n, in_h=h, in_w=per // h, out_h=h, out_w=per // h, x=rng.integers(-128, 128, (n, h, per // h, depth))
             .astype(np.int8), w=rng.integers(-127, 128, (out_c, 1, 1, depth)).astype(np.int8))
    return c


def _field(rng, in_c: int, rows_min: int) -> dict:
    """An im2col convolution (filter 1..3 x 1..3, stride 1..2, SAME or VALID) of a small field, many pixels."""
    while True:
        c = conv_case(rng, in_c=in_c, out_c=int(rng.integers(1, 24)))
        depth = c["k_h"] * c["k_w"] * in_c
        rows = c["n"] * c["out_h"] * c["out_w"]
        if depth <= 40 and rows >= rows_min:
            return c


def small_depth_cases() -> list[dict]:
    rng = np.random.default_rng(1414)
    cases = []
    depths = list(range(1, 41)) + [d for d in UNROLLED for _ in range(4)] + [48, 61, 64, 65, 70]
    for i, depth in enumerate(depths):
        words = (depth >> 2) * 2 + (depth & 3)
        chunk = max(DSP_SMALL_BYTES // (4 * words) & ~3, 4)
        rows = int(rng.integers(16, min(2 * chunk + 11, 25000 // (depth * 12), 16384 // depth)))
        rows = rows | 1 if i % 3 == 0 else rows                    # odd row counts: the 2- and 1-row tails
        c = _pointwise(rng, depth, rows, int(rng.integers(1, 13)))
        cases.append(c)
    for _ in range(24):
        cases.append(_field(rng, int(rng.integers(1, 5)), 16))
    for i in range(16):
        depth = int(rng.choice([int(rng.integers(1, 41)), *UNROLLED]))
        cases.append(fc_case(rng, per_channel=bool(i % 2), batches=int(rng.integers(16, 71)), depth=depth,
                             out_c=int(rng.integers(1, 20))))
    for i, c in enumerate(cases):
        depth = c["k_h"] * c["k_w"] * c["in_c"]
        n_q = c["out_c"] if (c["kind"] == CONV or c["per_channel"]) else 1
        mode = i % 4
        if mode == 3:
            c["mult"], c["shift"] = _requant(rng, n_q, depth)                    # extremes: often the exact one
        else:
            c["mult"], c["shift"] = _fast_requant(rng, n_q, depth)
            c["bias"] = rng.integers(-(1 << 16), 1 << 16, c["out_c"])
        if mode == 1:                                                            # a clamp narrower than int8
            c["act_min"], c["act_max"] = int(rng.integers(-128, 0)), int(rng.integers(0, 127))
        else:
            c["act_min"], c["act_max"] = _rand_act(rng) if mode == 3 else (-128, 127)
        c["input_offset"] = int(rng.choice([-127, 128])) if i % 2 else int(rng.integers(-127, 129))
        c["output_offset"] = int(rng.choice([-128, 127, int(rng.integers(-128, 128))]))
        c["ort"] = int(i % 7 == 5)
        c["expect_fast"] = True
    return cases


def _expected_scratch(c: dict) -> int:
    depth = c["k_h"] * c["k_w"] * c["in_c"]
    rows = c["n"] * c["out_h"] * c["out_w"]
    pointwise = c["kind"] == CONV and (c["k_h"], c["k_w"], c["stride_h"], c["stride_w"], c["pad_h"], c["pad_w"]) == (
        1, 1, 1, 1, 0, 0) and (c["out_h"], c["out_w"]) == (c["in_h"], c["in_w"]) and not c["general"]
    field = 0 if c["kind"] != CONV or pointwise else (depth + 3) // 4 * 4
    return dsp_column_bytes(depth, rows, small=c["kind"] == CONV) + field


def _check_all(cases, results, where):
    check(cases, results, where)
    chunked = 0
    for i, (c, r) in enumerate(zip(cases, results)):
        depth = c["k_h"] * c["k_w"] * c["in_c"]
        rows = c["n"] * c["out_h"] * c["out_w"]
        assert r["size"] == _expected_scratch(c), (where, i)
        words = (depth >> 2) * 2 + (depth & 3)
        chunked += dsp_column_bytes(depth, rows, small=c["kind"] == CONV) > 4 * 4 * words   # more than 4 rows: chunks
    assert chunked >= 0.75 * len(cases), (chunked, len(cases))   # depths up to 32 (a chunk of 16+ rows) run them


@pytest.fixture(scope="module")
def cases():
    return small_depth_cases()


@pytest.fixture(scope="module")
def host_out(tmp_path_factory, cases):
    tmp = tmp_path_factory.mktemp("small_depth_host")
    exe, src = tmp / "cases", tmp / "cases.c"
    src.write_text(CASES_C)
    sources = [str(KERNELS / f) for f in FILES]
    res = subprocess.run(["gcc", *KERNEL_CFLAGS, *UBSAN_CFLAGS, "-DPOCKMCU_TEST_HOST", f"-I{KERNELS}", str(src),
                          *sources, "-o", str(exe)], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr[-4000:]
    (tmp / "cases.bin").write_bytes(encode(cases))
    run = subprocess.run([str(exe), str(tmp / "cases.bin"), str(tmp / "out.bin")], capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0, run.stderr[-4000:]
    return decode((tmp / "out.bin").read_bytes(), cases)


def test_cases_cover_the_chunk_path(cases):
    """Every depth 1..40, each unrolled depth with and without a clamp, the exact requantization, odd row counts,
    several chunks a call."""
    depths = {c["k_h"] * c["k_w"] * c["in_c"] for c in cases}
    assert set(range(1, 41)) <= depths
    for d in UNROLLED:
        sel = [c for c in cases if c["k_h"] * c["k_w"] * c["in_c"] == d and c["kind"] == CONV]
        assert any(c["act_min"] > -128 or c["act_max"] < 127 for c in sel), d
        assert any(c["act_min"] == -128 and c["act_max"] == 127 and not c["ort"] for c in sel), d
    rows = [c["n"] * c["out_h"] * c["out_w"] for c in cases]
    assert sum(r % 2 for r in rows) >= 20 and sum(r % 4 == 2 for r in rows) >= 5
    assert sum(dsp_column_bytes(8, r) // 16 < r for r in rows) >= 5    # more rows than one chunk of depth 8 holds
    assert {-127, 128} <= {c["input_offset"] for c in cases}


def test_host_small_depth_equals_portable_and_numpy(cases, host_out):
    _check_all(cases, host_out, "host")


@pytest.mark.qemu
@pytest.mark.parametrize("target", ["qemu-m4", "qemu-m7"])
def test_qemu_small_depth_equals_host(tmp_path, target, cases, host_out):
    assert shutil.which("qemu-system-arm") and (FIRMWARE / "startup.c").exists()
    elf = build_program(tmp_path, target, CASES_C, FILES)
    results = decode(run_program(elf, target, {"cases.bin": encode(cases)}, ["out.bin"])["out.bin"], cases)
    _check_all(cases, results, target)
    for i, (h, q) in enumerate(zip(host_out, results)):
        np.testing.assert_array_equal(q["dsp"], h["dsp"], err_msg=f"{target} case {i}")
        np.testing.assert_array_equal(q["fast_out"], h["fast_out"], err_msg=f"{target} case {i}")
