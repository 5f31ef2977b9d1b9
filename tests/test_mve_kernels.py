"""Helium (MVE) kernels for Cortex-M55: each equals the portable kernel it stands in for, byte for byte.

One C program runs hundreds of random cases (channels 1..67 with odd counts and non-multiples of 16,
kernels 1..7, strides 1..3, dilations 1..3, SAME / VALID / asymmetric padding, ch_mult 1..3, batches,
per-channel multipliers and shifts from -31 to +7, extreme zero points, clamps, with and without bias; plus
fixed larger geometries (BIG), average pools and element-wise adds from a second random stream)
through both the portable kernel (arm_*) and the MVE kernel (pockmcu_*_mve_s8) in the same run and
writes both outputs plus 16 guard bytes after each; the test compares them. On qemu-m55 the MVE code
runs (Helium); on qemu-m4 and on the host (-fsanitize=address,undefined) the same program builds the
fallback, which must compile and be exact too. The model-level tests generate KWS and a trained
fixture for qemu-m55 and check that the host simulation equals QEMU byte for byte.
"""

from __future__ import annotations

import json
import struct
import subprocess

import numpy as np
import pytest
from conftest import FIXTURES, SHARED, tflm_run

from pockmcu import kernel_table
from pockmcu.codegen import write_project
from pockmcu.compiler import TrainOptions, compile_model, parse_size
from pockmcu.runner import run_on_target
from pockmcu.sim import load
from pockmcu.train import Data, HostTrainer, train_on_target
from pockmcu.training import params
from tests.qemu_c import CASE_READER_C, KERNELS, build_program, cases_mains, run_program

KERNEL_FILES = ["arm_convolve_wrapper_s8.c", "arm_depthwise_conv_wrapper_s8.c", "arm_fully_connected_s8.c",
                "arm_avgpool_s8.c", "pockmcu_avgpool_mve_s8.c", "arm_elementwise_add_s8.c",
                "pockmcu_elementwise_add_mve_s8.c",
                "arm_fully_connected_per_channel_s8.c", "pockmcu_convolve_mve_s8.c",
                "pockmcu_depthwise_conv_mve_s8.c", "pockmcu_fully_connected_mve_s8.c",
                "pockmcu_fully_connected_per_channel_mve_s8.c", "pockmcu_convolve_mve_s8_get_buffer_size.c",
                "pockmcu_depthwise_conv_mve_s8_get_buffer_size.c"]
HEADER_WORDS = 26
GUARD = 16

RUN_C = r"""
#include <stdint.h>
#include <string.h>
#include "pockmcu_nn.h"

#define GUARD 16
/* Case header (int32): kind (0 conv, 1 depthwise, 2 fc, 3 fc per channel, 4 average pool, 5 add), n, in_h, in_w, in_c, out_h,
 * out_w, out_c, k_h, k_w, k_c, stride_h, stride_w, dil_h, dil_w, pad_h, pad_w, input_offset,
 * output_offset, act_min, act_max, ch_mult, filter_offset, has_bias, input bytes, filter bytes; then
 * multiplier[out_c], shift[out_c], bias[out_c], input, filter (each padded to 4 bytes).
 * Output per case: status portable, status mve, out_bytes + GUARD bytes of each. */
""" + CASE_READER_C + r"""

static uint32_t run_cases(const uint8_t *p, const uint8_t *end, uint8_t *out)
{
    uint8_t *o = out;
    static int32_t mult[320], shift[320], bias[320];
    while (p < end)
    {
        int32_t h[26];
        int32_t i, out_bytes, st0, st1;
        const int8_t *input, *filter;
        cmsis_nn_context ctx = {NULL, 0};
        cmsis_nn_dims in_d, f_d, b_d, o_d;
        int8_t *y0, *y1;
        const int32_t *bp;
        for (i = 0; i < 26; i++) h[i] = rd(&p);
        for (i = 0; i < h[7]; i++) mult[i] = rd(&p);
        for (i = 0; i < h[7]; i++) shift[i] = rd(&p);
        for (i = 0; i < h[7]; i++) bias[i] = rd(&p);
        bp = h[23] ? bias : NULL;
        input = (const int8_t *)p;
        p += pad4((uint32_t)h[24]);
        filter = (const int8_t *)p;
        p += pad4((uint32_t)h[25]);
        in_d.n = h[1]; in_d.h = h[2]; in_d.w = h[3]; in_d.c = h[4];
        o_d.n = h[1]; o_d.h = h[5]; o_d.w = h[6]; o_d.c = h[7];
        b_d.n = 1; b_d.h = 1; b_d.w = 1; b_d.c = h[7];
        out_bytes = h[1] * h[5] * h[6] * h[7];
        memcpy(o, &out_bytes, 4);
        y0 = (int8_t *)o + 12;
        y1 = y0 + pad4((uint32_t)(out_bytes + GUARD));
        memset(y0, 0x5A, (size_t)(2 * pad4((uint32_t)(out_bytes + GUARD))));
        if (h[0] == 5)
        {
            /* add: in_c elements; input 2 in the filter bytes, its offset in filter_offset, left_shift in ch_mult;
             * multipliers / shifts [0] input 1, [1] input 2, [2] output */
            st0 = arm_elementwise_add_s8(input, filter, h[17], mult[0], shift[0], h[22], mult[1], shift[1], h[21],
                                         y0, h[18], mult[2], shift[2], h[19], h[20], h[4]);
            st1 = pockmcu_elementwise_add_mve_s8(input, filter, h[17], mult[0], shift[0], h[22], mult[1], shift[1],
                                                 h[21], y1, h[18], mult[2], shift[2], h[19], h[20], h[4]);
        }
        else if (h[0] == 4)
        {
            cmsis_nn_pool_params c = {{h[12], h[11]}, {h[16], h[15]}, {h[19], h[20]}};
            f_d.n = 1; f_d.h = h[8]; f_d.w = h[9]; f_d.c = 1;
            st0 = arm_avgpool_s8(&ctx, &c, &in_d, input, &f_d, &o_d, y0);
            st1 = pockmcu_avgpool_mve_s8(&ctx, &c, &in_d, input, &f_d, &o_d, y1);
        }
        else if (h[0] <= 1)
        {
            cmsis_nn_per_channel_quant_params q = {mult, shift};
            f_d.n = h[7]; f_d.h = h[8]; f_d.w = h[9]; f_d.c = h[10];
            if (h[0] == 0)
            {
                cmsis_nn_conv_params c = {h[17], h[18], {h[12], h[11]}, {h[16], h[15]}, {h[14], h[13]}, {h[19], h[20]}};
                st0 = arm_convolve_wrapper_s8(&ctx, &c, &q, &in_d, input, &f_d, filter, &b_d, bp, &o_d, y0);
                st1 = pockmcu_convolve_mve_s8(&ctx, &c, &q, &in_d, input, &f_d, filter, &b_d, bp, &o_d, y1);
                st1 |= pockmcu_convolve_mve_s8_get_buffer_size(&c, &in_d, &f_d, &o_d) << 8;
            }
            else
            {
                cmsis_nn_dw_conv_params c = {h[17], h[18], h[21], {h[12], h[11]}, {h[16], h[15]}, {h[14], h[13]},
                                             {h[19], h[20]}};
                f_d.n = 1; f_d.c = h[7];
                st0 = arm_depthwise_conv_wrapper_s8(&ctx, &c, &q, &in_d, input, &f_d, filter, &b_d, bp, &o_d, y0);
                st1 = pockmcu_depthwise_conv_mve_s8(&ctx, &c, &q, &in_d, input, &f_d, filter, &b_d, bp, &o_d, y1);
                st1 |= pockmcu_depthwise_conv_mve_s8_get_buffer_size(&c, &in_d, &f_d, &o_d) << 8;
            }
        }
        else
        {
            cmsis_nn_fc_params c = {h[17], h[22], h[18], {h[19], h[20]}};
            f_d.n = h[4]; f_d.h = 1; f_d.w = 1; f_d.c = h[7];
            in_d.h = 1; in_d.w = 1;
            if (h[0] == 2)
            {
                cmsis_nn_per_tensor_quant_params q = {mult[0], shift[0]};
                st0 = arm_fully_connected_s8(&ctx, &c, &q, &in_d, input, &f_d, filter, &b_d, bp, &o_d, y0);
                st1 = pockmcu_fully_connected_mve_s8(&ctx, &c, &q, &in_d, input, &f_d, filter, &b_d, bp, &o_d, y1);
            }
            else
            {
                cmsis_nn_per_channel_quant_params q = {mult, shift};
                st0 = arm_fully_connected_per_channel_s8(&ctx, &c, &q, &in_d, input, &f_d, filter, &b_d, bp, &o_d, y0);
                st1 = pockmcu_fully_connected_per_channel_mve_s8(&ctx, &c, &q, &in_d, input, &f_d, filter, &b_d, bp, &o_d, y1);
            }
        }
        memcpy(o + 4, &st0, 4);
        memcpy(o + 8, &st1, 4);
        o += 12 + 2 * pad4((uint32_t)(out_bytes + GUARD));
    }
    return (uint32_t)(o - out);
}
"""

QEMU_MAIN, HOST_MAIN = cases_mains(RUN_C, 400 * 1024, 80 * 1024)

KINDS = ("conv", "depthwise", "fc", "fc_per_channel", "avgpool", "add")


def _out_size(n_in, k, stride, dil, pad_total):
    return (n_in + pad_total - dil * (k - 1) - 1) // stride + 1


def _quant(rng, out_c, extreme):
    mult = rng.integers(1 << 30, (1 << 31) - 1, out_c, dtype=np.int64)
    shift = rng.integers(-12, 2, out_c)
    if extreme:
        mult = rng.choice(np.array([1 << 30, (1 << 31) - 1, (1 << 30) + 1, 1518500250, 0, 1]), out_c)
        shift = rng.choice(np.array([-31, -30, -20, -1, 0, 1, 7, -8]), out_c)
    return mult.astype(np.int64), shift.astype(np.int64)


def make_case(rng, kind: str, i: int, big: dict | None = None) -> tuple[dict, bytes]:
    """One random case: its parameters and its record for the C program (big: a fixed geometry, see BIG)."""
    extreme = i % 5 == 0
    batches = int(rng.integers(1, 3)) if i % 4 == 0 else 1
    h = dict(kind=KINDS.index(kind), n=batches, ch_mult=1, filter_offset=0, dil_h=1, dil_w=1, stride_h=1,
             stride_w=1, pad_h=0, pad_w=0, k_h=1, k_w=1)
    if kind in ("conv", "depthwise", "avgpool"):
        while True:
            k_h, k_w = (int(rng.integers(1, 8)) for _ in range(2))
            if i % 6 == 1:      # the KWS / MobileNet shapes: 1x1 and 3x3
                k_h = k_w = 1 if kind == "conv" and i % 12 == 1 else 3
            s_h, s_w = (int(rng.integers(1, 4)) for _ in range(2))
            d_h, d_w = (int(rng.integers(1, 4)) if rng.random() < 0.3 and kind != "avgpool" else 1 for _ in range(2))
            in_h, in_w = (int(rng.integers(1, 11)) for _ in range(2))
            in_h, in_w = min(in_h, 3 + 5 * (i % 3 == 1)), min(in_w, 4 + 4 * (i % 3 == 1))
            mode = rng.choice(["valid", "same", "asym"])
            if big is not None:
                k_h, k_w, s_h, s_w, d_h, d_w, in_h, in_w = (big[k] for k in ("k", "k", "s", "s", "d", "d", "h", "w"))
                k_h, k_w = big.get("kh", k_h), big.get("kw", k_w)
                mode = big["mode"]
            pads = []
            for n_in, k, s, d in ((in_h, k_h, s_h, d_h), (in_w, k_w, s_w, d_w)):
                eff = d * (k - 1) + 1
                if mode == "valid":
                    pads.append((0, 0))
                elif mode == "same":
                    out = -(-n_in // s)
                    total = max((out - 1) * s + eff - n_in, 0)
                    pads.append((total // 2, total - total // 2))
                else:
                    pads.append((int(rng.integers(0, eff)), int(rng.integers(0, eff))))
            out_h = _out_size(in_h, k_h, s_h, d_h, sum(pads[0]))
            out_w = _out_size(in_w, k_w, s_w, d_w, sum(pads[1]))
            if out_h >= 1 and out_w >= 1:
                break
        if kind == "conv":
            in_c = int(rng.integers(1, 68)) if big is None else big["c"]
            # the whole file must fit the QEMU program's buffer: at most ~1.4 KB of weights per case
            out_c = max(1, min(int(rng.integers(1, 68)), 1400 // (k_h * k_w * in_c))) if big is None else big["oc"]
            k_c = in_c
            filt_shape = (out_c, k_h, k_w, in_c)
        elif kind == "avgpool":
            in_c = int(rng.integers(1, 68)) if big is None else big["c"]
            out_c = k_c = in_c
            filt_shape = (0,)
        else:
            in_c = int(rng.integers(1, 68)) // (1 if i % 3 else 3) or 1
            ch_mult = int(rng.integers(1, 4)) if i % 3 == 0 else 1
            if big is not None:
                in_c, ch_mult = big["c"], big.get("m", 1)
            out_c = in_c * ch_mult
            k_c = out_c
            h["ch_mult"] = ch_mult
            filt_shape = (1, k_h, k_w, out_c)
        h.update(in_h=in_h, in_w=in_w, in_c=in_c, out_h=out_h, out_w=out_w, out_c=out_c, k_h=k_h, k_w=k_w, k_c=k_c,
                 stride_h=s_h, stride_w=s_w, dil_h=d_h, dil_w=d_w, pad_h=pads[0][0], pad_w=pads[1][0])
        in_shape = (batches, in_h, in_w, in_c)
    elif kind == "add":
        block = int(rng.integers(3, 300))
        h.update(in_h=1, in_w=1, in_c=block, out_h=1, out_w=1, out_c=block, k_c=block,
                 filter_offset=int(rng.integers(-127, 129)), ch_mult=int(rng.choice([20, 20, 0, 7, 31])))
        filt_shape = in_shape = (block,)
    else:
        depth = int(rng.integers(1, 300)) if big is None else big["depth"]
        out_c = max(1, min(int(rng.integers(1, 68)), 900 // depth)) if big is None else big["oc"]
        h.update(in_h=1, in_w=1, in_c=depth, out_h=1, out_w=1, out_c=out_c, k_c=depth)
        if rng.random() < 0.3:
            h["filter_offset"] = int(rng.choice([128, -127, 5, int(rng.integers(-127, 129))]))
        filt_shape = (out_c, depth)
        in_shape = (batches, depth)
    zp_in = int(rng.choice([-128, 127, 0])) if extreme else int(rng.integers(-128, 128))
    h["input_offset"] = -zp_in
    h["output_offset"] = int(rng.choice([-128, 127])) if extreme else int(rng.integers(-128, 128))
    lo, hi = sorted(int(v) for v in rng.integers(-128, 128, 2))
    h["act_min"], h["act_max"] = (-128, 127) if rng.random() < 0.5 else (lo, hi)
    h["has_bias"] = int(rng.random() < 0.8)
    x = rng.integers(-128, 128, in_shape, dtype=np.int64).astype(np.int8)
    w = rng.integers(-128, 128, filt_shape, dtype=np.int64).astype(np.int8)
    if extreme:
        x = rng.choice(np.array([-128, 127], np.int8), in_shape)
        w = rng.choice(np.array([-128, 127, -127], np.int8), filt_shape)
    mult, shift = _quant(rng, h["out_c"], extreme)
    if kind == "fc":
        mult[:], shift[:] = mult[0], shift[0]
    bias = rng.integers(-(1 << 20), 1 << 20, h["out_c"], dtype=np.int64)
    order = ("kind", "n", "in_h", "in_w", "in_c", "out_h", "out_w", "out_c", "k_h", "k_w", "k_c", "stride_h",
             "stride_w", "dil_h", "dil_w", "pad_h", "pad_w", "input_offset", "output_offset", "act_min", "act_max",
             "ch_mult", "filter_offset", "has_bias")
    xb, wb = x.tobytes(), w.tobytes()
    words = [h[k] for k in order] + [len(xb), len(wb)]
    assert len(words) == HEADER_WORDS
    rec = struct.pack(f"<{HEADER_WORDS}i", *words)
    rec += mult.astype("<i4").tobytes() + shift.astype("<i4").tobytes() + bias.astype("<i4").tobytes()
    rec += xb + b"\0" * (-len(xb) % 4) + wb + b"\0" * (-len(wb) % 4)
    return h, rec


# Fixed larger geometries for the Helium paths the small random ones reach rarely: depthwise rows wider than
# one padded-line segment (3x3 and general filters, strides, dilation), full and partial 16-channel groups;
# convolutions with receptive fields beyond the 512-byte gather block (the chunked path), 1x1 layers with
# more than 64 output channels (several channel blocks) and 1xK rows read in place.
BIG = [
    ("depthwise", dict(k=3, s=1, d=1, h=3, w=30, c=33, mode="same")),
    ("depthwise", dict(k=3, s=2, d=1, h=4, w=40, c=16, mode="same")),
    ("depthwise", dict(k=5, s=1, d=2, h=5, w=26, c=21, mode="asym")),
    ("depthwise", dict(k=3, kh=2, kw=7, s=3, d=1, h=4, w=40, c=9, mode="valid")),
    ("depthwise", dict(k=3, s=1, d=1, h=3, w=9, c=67, mode="same")),
    ("depthwise", dict(k=9, s=1, d=1, h=9, w=9, c=5, mode="same")),
    ("conv", dict(k=3, s=1, d=1, h=4, w=5, c=67, oc=3, mode="same")),
    ("conv", dict(k=1, s=1, d=1, h=3, w=5, c=12, oc=70, mode="valid")),
    ("conv", dict(k=3, kh=1, kw=5, s=1, d=1, h=2, w=9, c=7, oc=9, mode="same")),
    ("conv", dict(k=3, s=2, d=2, h=7, w=7, c=5, oc=6, mode="asym")),
    ("avgpool", dict(k=16, s=1, d=1, h=16, w=16, c=17, mode="valid")),  # 256 values: the int32 sums
    ("avgpool", dict(k=3, kh=25, kw=5, s=1, d=1, h=25, w=5, c=20, mode="valid")),  # KWS's global pool
    # 1-D models (sww_ref): tall filters over one column, taps read in place; ch_mult > 1 (micro_speech)
    ("depthwise", dict(k=3, kh=10, kw=1, s=1, d=1, h=16, w=1, c=24, mode="valid")),
    ("depthwise", dict(k=3, kh=5, kw=1, s=2, d=2, h=12, w=2, c=20, mode="same")),
    ("depthwise", dict(k=3, kh=10, kw=8, s=2, d=1, h=10, w=12, c=1, m=8, mode="same")),
    ("depthwise", dict(k=3, kh=3, kw=17, s=1, d=1, h=3, w=18, c=3, m=3, mode="same")),
    # fully connected layers of 16 inputs or fewer (hello_world): the small path, full and partial blocks
    ("fc", dict(depth=1, oc=16)), ("fc", dict(depth=16, oc=11)), ("fc", dict(depth=7, oc=6)),
    ("fc_per_channel", dict(depth=12, oc=9)), ("fc_per_channel", dict(depth=16, oc=1)),
]


def all_cases(seed: int = 13, per_kind: int = 64):
    rng = np.random.default_rng(seed)
    cases, blob = [], b""
    for i in range(per_kind):
        for kind in KINDS[:4]:
            h, rec = make_case(rng, kind, i)
            cases.append((kind, h))
            blob += rec
    pool_rng = np.random.default_rng(seed + 1)       # the average pools: their own stream, few and small
    for i in range(per_kind // 8):
        for kind in ("avgpool", "add"):
            h, rec = make_case(pool_rng, kind, i)
            cases.append((kind, h))
            blob += rec
    for j, (kind, big) in enumerate(BIG):
        h, rec = make_case(rng, kind, 1 + 5 * (j % 2), big)   # every other one with extreme values
        cases.append((kind, h))
        blob += rec
    return cases, blob


def check(cases, out: bytes, where: str, mve: bool) -> None:
    """Both outputs equal (and both guards intact) for every case."""
    off = 0
    for kind, h in cases:
        size, st0, st1 = struct.unpack_from("<3i", out, off)
        span = size + GUARD + (-(size + GUARD) % 4)
        y0 = out[off + 12: off + 12 + size + GUARD]
        y1 = out[off + 12 + span: off + 12 + span + size + GUARD]
        off += 12 + 2 * span
        assert (st0, st1) == (0, 0), f"{where} {kind} {h}: status portable {st0}, mve {st1}"
        assert y0[size:] == y1[size:] == b"\x5a" * GUARD, f"{where} {kind} {h}: a kernel wrote past its output"
        if y0 != y1:
            a, b = np.frombuffer(y0, np.int8), np.frombuffer(y1, np.int8)
            bad = np.flatnonzero(a != b)
            raise AssertionError(f"{where} {kind} {h}: {len(bad)} of {size} bytes differ, first at {bad[0]}: "
                                 f"portable {a[bad[0]]}, mve {b[bad[0]]}")
    assert off == len(out), f"{where}: {len(out)} output bytes, expected {off}"


def test_cases_cover_the_brief():
    cases, blob = all_cases()
    assert len(blob) < 400 * 1024 and sum(2 * (h["n"] * h["out_h"] * h["out_w"] * h["out_c"] + 20) + 12
                                          for k, h in cases) < 80 * 1024
    hs = [h for k, h in cases if k in ("conv", "depthwise")]
    assert {h["k_h"] for h in hs} >= set(range(1, 8)) and {h["stride_w"] for h in hs} >= {1, 2, 3}
    assert {h["dil_h"] for h in hs} >= {1, 2, 3} and {h["ch_mult"] for h in hs} >= {1, 2, 3}
    assert any(h["in_c"] % 2 and h["in_c"] > 16 for h in hs) and any(h["pad_h"] for h in hs)
    assert {h["input_offset"] for k, h in cases} >= {128, -127}
    assert max(h["out_c"] for k, h in cases) <= 320          # the C program's multiplier / shift / bias arrays
    assert {k for k, h in cases} == set(KINDS)


@pytest.mark.qemu
@pytest.mark.parametrize("target", ["qemu-m55", "qemu-m4"])
def test_mve_kernels_equal_portable_in_qemu(tmp_path, target):
    cases, blob = all_cases()
    elf = build_program(tmp_path, target, QEMU_MAIN, KERNEL_FILES, stack_bytes=8192)
    out = run_program(elf, target, {"cases.bin": blob}, ["out.bin"])["out.bin"]
    check(cases, out, target, mve=target == "qemu-m55")


def test_fallback_on_host_is_exact(tmp_path):
    cases, blob = all_cases()
    src = tmp_path / "mve_host.c"
    src.write_text(HOST_MAIN)
    exe = tmp_path / "mve_host"
    subprocess.run(["gcc", "-O1", "-std=c99", "-Wall", "-Wextra", "-Werror", "-fsanitize=address,undefined",
                    "-fno-sanitize-recover=all", f"-I{KERNELS}", str(src),
                    *[str(KERNELS / f) for f in KERNEL_FILES], "-o", str(exe)], check=True)
    (tmp_path / "cases.bin").write_bytes(blob)
    subprocess.run([str(exe), str(tmp_path / "cases.bin"), str(tmp_path / "out.bin")], check=True)
    check(cases, (tmp_path / "out.bin").read_bytes(), "host", mve=False)


def test_table_picks_mve_rows_only_on_helium():
    mve, dsp = frozenset({"dsp", "fpu", "mve"}), frozenset({"dsp", "fpu"})
    assert kernel_table.choose("CONV_2D", "", "tflm", mve).function == "pockmcu_convolve_mve_s8"
    assert kernel_table.choose("DEPTHWISE_CONV_2D", "", "tflm", mve).function == "pockmcu_depthwise_conv_mve_s8"
    assert kernel_table.choose("FULLY_CONNECTED", "", "tflm", mve, "per_tensor").function == \
        "pockmcu_fully_connected_mve_s8"
    assert kernel_table.choose("FULLY_CONNECTED", "", "tflm", mve, "per_channel").function == \
        "pockmcu_fully_connected_per_channel_mve_s8"
    for kind, variant in (("CONV_2D", ""), ("DEPTHWISE_CONV_2D", ""), ("FULLY_CONNECTED", "per_tensor")):
        assert "mve" not in kernel_table.choose(kind, "", "tflm", dsp, variant).function
        assert "mve" not in kernel_table.choose(kind, "", "onnxruntime", mve, variant).function
    assert kernel_table.choose("CONV_2D", "", "tflm", mve, "split").function == "pockmcu_convolve_split_s8_simd"


# -- model level: generated for Cortex-M55, the MVE kernels run in QEMU; the host build runs the portable loops

def _gen_m55(model, tmp_path, train=None):
    # auto: every Helium kernel (--kernels compact may leave some out for flash: tests/test_flash.py)
    c = compile_model(model, ram=parse_size("512KB"), target="qemu-m55", train=train, kernels="auto")
    out = write_project(c, tmp_path / model.stem)
    model_c = (out / "model.c").read_text()
    for fn in ("pockmcu_convolve_mve_s8", "pockmcu_depthwise_conv_mve_s8"):
        assert fn in model_c, f"{model.stem} for qemu-m55 does not call {fn}"
    return c, out


@pytest.mark.slow
def test_kws_on_m55_runs_mve_and_equals_host_and_tflm(tmp_path):
    model = SHARED / "mlperf_kws_dscnn.tflite"
    c, out = _gen_m55(model, tmp_path)
    assert "pockmcu_fully_connected_mve_s8" in (out / "model.c").read_text()
    x = c.graph.t(c.graph.inputs[0])
    xs = np.random.default_rng(8).integers(-128, 128, (3,) + x.shape[1:]).astype(np.int8)
    host = load(out).invoke(xs)
    np.testing.assert_array_equal(run_on_target(out, "qemu-m55", xs), host)
    np.testing.assert_array_equal(host, tflm_run(model, xs))


@pytest.mark.slow
def test_trained_fixture_on_m55_equals_host(tmp_path):
    """One training epoch of small_cnn (every weight and bias) on QEMU M55 with the MVE forward kernels and on
    the host with the portable ones: the same parameter bytes, and they moved."""
    spec = {"bias": "all", "weights": "all", "optimizer": {"kind": "sgd", "lr": 0.05}, "batch": 2}
    c, out = _gen_m55(FIXTURES / "small_cnn.tflite", tmp_path, TrainOptions(spec=json.dumps(spec), loss="xent"))
    g = c.graph
    rng = np.random.default_rng(3)
    xs = rng.integers(-128, 128, (6,) + g.t(g.inputs[0]).shape[1:]).astype(np.int8)
    ys = rng.integers(0, g.t(g.outputs[0]).shape[-1], 6).astype(np.int32)
    host = HostTrainer(out)
    host.train(Data(xs, ys), epochs=1, seed=5, log=lambda *_: None)
    _, raw_dev, _ = train_on_target(out, "qemu-m55", Data(xs, ys), epochs=1, seed=5, log=lambda *_: None)
    assert raw_dev == host.params()
    layout = params.entries(c.train)
    assert raw_dev != params.pack(layout, {t: c.graph.t(t).data for t in c.train.trainable_tensors})
