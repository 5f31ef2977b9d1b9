"""Arm's CMSIS-NN as a drop-in (--kernels cmsis-nn, make CMSIS_NN_PATH=...): the kernel choice, the
scratch Arm's kernels ask for on each core (pockmcu/cmsis_scratch.py), the Makefile's refusal of a
project planned for other kernels, and, with a CMSIS-NN checkout in CMSIS_NN_PATH, Arm's own
*_get_buffer_size queries compiled for each core and every shared model run with Arm's kernels in
QEMU, byte for byte equal to ours. CI has no CMSIS-NN: there the formulas are checked on geometries
whose answers were read from Arm's compiled queries."""

from __future__ import annotations

import os
import struct
import subprocess
from pathlib import Path

import numpy as np
import pytest
from conftest import SHARED
from qemu_c import FIRMWARE, target_vars

from pockmcu import cmsis_scratch as cs
from pockmcu.bench import random_input
from pockmcu.build import build_target
from pockmcu.codegen import CodeGen, write_project
from pockmcu.compiler import compile_model, default_numerics
from pockmcu.errors import PockError
from pockmcu.kernel_table import TABLE, Kernel, choose
from pockmcu.ops import opdef
from pockmcu.qemu import run_app, run_samples
from pockmcu.sim import load, read_plan
from pockmcu.targets import get_target

CMSIS = os.environ.get("CMSIS_NN_PATH", "")
needs_cmsis = pytest.mark.skipif(not (CMSIS and (Path(CMSIS) / "Include" / "arm_nnfunctions.h").is_file()),
                                 reason="set CMSIS_NN_PATH to a CMSIS-NN checkout")
CORES = {"qemu-m3": "none", "qemu-m4": "dsp", "qemu-m7": "dsp", "qemu-m33": "dsp", "qemu-m55": "mve"}
SHARED_MODELS = sorted(SHARED.glob("*.tflite")) + sorted(SHARED.glob("*.onnx"))


# -- the formulas, on geometries whose answers Arm's compiled queries gave (CMSIS-NN 99f736a, GCC 12) --
# (pad (h, w), stride, dilation, input dims, filter dims, output dims) -> {core: bytes}
CONV_KNOWN = [
    # 1x1 stride 1 and stride 2: none with GCC on every core
    (((0, 0), (1, 1), (1, 1), (1, 25, 5, 64), (64, 1, 1, 64), (1, 25, 5, 64)), dict(none=0, dsp=0, mve=0)),
    (((0, 0), (2, 2), (1, 1), (1, 8, 8, 16), (8, 1, 1, 16), (1, 4, 4, 8)), dict(none=0, dsp=0, mve=0)),
    # KWS's first conv, 10x4 kernel, 1 channel: 40 columns
    (((4, 1), (2, 2), (1, 1), (1, 49, 10, 1), (64, 10, 4, 1), (1, 25, 5, 64)), dict(none=160, dsp=160, mve=192)),
    # 3x3 over 3 channels (27 columns, aligned to 28)
    (((1, 1), (1, 1), (1, 1), (1, 16, 16, 3), (8, 3, 3, 3), (1, 16, 16, 8)), dict(none=112, dsp=112, mve=128)),
    # 1xN: height 1, stride * channels a multiple of 4; MVE sizes its own padded row
    (((0, 2), (1, 1), (1, 1), (1, 1, 20, 8), (4, 1, 5, 8), (1, 1, 20, 4)), dict(none=160, dsp=160, mve=56)),
    (((0, 0), (1, 1), (1, 1), (1, 1, 20, 4), (4, 1, 3, 4), (1, 1, 18, 4)), dict(none=48, dsp=48, mve=12)),
]
DW_KNOWN = [
    # 3x3, channel multiplier 1, pad <= 1: Arm's 3x3 kernel (none) except on MVE
    (((1, 1), (1, 1), (1, 1), (1, 25, 5, 64), (1, 3, 3, 64), (1, 25, 5, 64)), dict(none=0, dsp=0, mve=4464)),
    # 5x5: the optimized kernel's int16 column on DSP
    (((2, 2), (1, 1), (1, 1), (1, 12, 12, 10), (1, 5, 5, 10), (1, 12, 12, 10)), dict(none=0, dsp=500, mve=12400)),
    # channel multiplier 2: the generic kernel, no scratch
    (((1, 1), (1, 1), (1, 1), (1, 8, 8, 4), (1, 3, 3, 8), (1, 8, 8, 8)), dict(none=0, dsp=0, mve=0)),
    # dilation 2: generic
    (((2, 2), (1, 1), (2, 2), (1, 8, 8, 4), (1, 3, 3, 4), (1, 8, 8, 4)), dict(none=0, dsp=0, mve=0)),
    # one input channel to 8 outputs: a convolution on MVE (im2col + transposed filter)
    (((1, 1), (1, 1), (1, 1), (1, 8, 8, 1), (1, 3, 3, 8), (1, 8, 8, 8)), dict(none=0, dsp=0, mve=136)),
]


@pytest.mark.parametrize("geometry, want", CONV_KNOWN)
def test_convolve_wrapper_formula(geometry, want):
    assert {c: cs.convolve_wrapper_s8(c, *geometry) for c in want} == want


@pytest.mark.parametrize("geometry, want", DW_KNOWN)
def test_depthwise_wrapper_formula(geometry, want):
    assert {c: cs.depthwise_conv_wrapper_s8(c, *geometry) for c in want} == want


def test_fc_and_avgpool_formulas():
    assert [cs.fully_connected_s8(c, (64, 1, 1, 12)) for c in ("none", "dsp", "mve")] == [0, 0, 48]
    assert [cs.avgpool_s8(c, 1, 64) for c in ("none", "dsp", "mve")] == [0, 256, 0]
    assert [cs.arm_core(f) for f in (frozenset(), {"fpu", "dsp"}, {"fpu", "dsp", "mve"})] == ["none", "dsp", "mve"]


def test_kernel_sums_match_arm_vector_sum():
    """arm_vector_sum_s8's loop (bias + lhs_offset * (row sum + cols * rhs_offset)), written out."""
    rng = np.random.default_rng(3)
    w = rng.integers(-128, 128, (7, 13)).astype(np.int8)
    b = rng.integers(-1000, 1000, 7).astype(np.int32)
    want = [int(b[r]) + (int(w[r].astype(np.int64).sum()) + 13 * 5) * 17 for r in range(7)]
    assert cs.kernel_sums(w, b, 17, 5).tolist() == want
    assert cs.kernel_sums(w, None, 0, 5).tolist() == [0] * 7   # no input offset: only the bias


def test_choose_prefers_arm_rows_for_cmsis_nn(monkeypatch):
    rows = (Kernel("arm_thing_s8", "tflm"), Kernel("pockmcu_thing_dsp_s8", "tflm", frozenset({"dsp"})),
            Kernel("pockmcu_thing_ort_s8", "onnxruntime"))
    monkeypatch.setitem(TABLE, "X_OP", rows)
    dsp = frozenset({"dsp", "fpu"})
    assert choose("X_OP", "", "tflm", dsp).function == "pockmcu_thing_dsp_s8"
    assert choose("X_OP", "", "tflm", dsp, library="cmsis-nn").function == "arm_thing_s8"
    # no Arm row fits: pockmcu's kernel stays
    assert choose("X_OP", "", "onnxruntime", dsp, library="cmsis-nn").function == "pockmcu_thing_ort_s8"


def _compile(model: Path, target: str, kernels: str):
    return compile_model(model, ram=get_target(target).ram_bytes, target=target, kernels=kernels,
                         numerics=default_numerics(model))


@pytest.mark.parametrize("model", [SHARED / "mlperf_kws_dscnn.tflite", SHARED / "mlperf_vww_mobilenetv1_96.tflite",
                                   SHARED / "mlperf_ic_resnet8_qdq.onnx", SHARED / "mlperf_ad_autoencoder.tflite"],
                         ids=lambda p: p.stem)
@pytest.mark.parametrize("target", ["qemu-m3", "qemu-m4", "qemu-m55"])
def test_plan_sizes_scratch_for_the_chosen_library(model, target):
    """--kernels cmsis-nn: every step whose kernel is Arm's calls an arm_* function, and its planned
    scratch is the formula's on the target's core (Helium FC: none in the arena, its context points at
    flash kernel sums of the query's size); ops whose pockmcu kernel asks Arm's query get at least that;
    --kernels auto plans exactly what the ops ask for, as before."""
    c = _compile(model, target, "cmsis-nn")
    g, cg, core = c.graph, CodeGen(c), CORES[target]
    arm_steps = 0
    for op, layer in zip(g.ops, cg.layers(g.ops)):
        if layer["alias"]:
            continue
        fn = cg.kernel(op).function
        assert cs.runs_arm_kernel(g, op) == (fn.startswith("arm_") and op.kind in
                                             ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED", "AVERAGE_POOL_2D")), fn
        arm = cs.arm_scratch_bytes(g, op)
        planned = c.plan.buffer(c.plan.scratch[op.name]).size if op.name in c.plan.scratch else 0
        if arm is None:
            continue
        if op.kind == "FULLY_CONNECTED" and core == "mve" and cs.runs_arm_kernel(g, op):
            assert planned == 0 and "kernel_sums_ctx" in layer["call"] and "kernel_sums_ctx" in layer["decls"]
            assert f".size = {g.t(op.inputs[1]).shape[0] * 4}" in layer["decls"]
            arm_steps += 1
        elif cs.runs_arm_kernel(g, op):
            assert planned == (arm + 3) // 4 * 4, (op.name, planned, arm)
            arm_steps += 1
        else:
            assert planned >= arm
    assert arm_steps or g.numerics == "onnxruntime"
    ours = _compile(model, target, "auto")
    for op in ours.graph.ops:
        own = opdef(op.kind).scratch_bytes(ours.graph, op, op.name in ours.plan.writes_over_input)
        planned = ours.plan.buffer(ours.plan.scratch[op.name]).size if op.name in ours.plan.scratch else 0
        assert planned == (own + 3) // 4 * 4
    # a step that runs the same pockmcu kernel in both builds (onnxruntime numerics: pockmcu's DSP kernels
    # beside Arm's library) gets at least the scratch it gets in ours (it was planned 0: pockmcu_init failed)
    same = {op.name: cg.kernel(op).function for op in g.ops}
    cg_ours = CodeGen(ours)
    for op in ours.graph.ops:
        if same.get(op.name) == cg_ours.kernel(op).function and op.name in ours.plan.scratch:
            theirs = c.plan.buffer(c.plan.scratch[op.name]).size if op.name in c.plan.scratch else 0
            assert theirs >= ours.plan.buffer(ours.plan.scratch[op.name]).size, (op.name, same[op.name])


def _fake_cmsis(tmp_path: Path) -> Path:
    (tmp_path / "fake-cmsis" / "Include").mkdir(parents=True)
    (tmp_path / "fake-cmsis" / "Include" / "arm_nnfunctions.h").write_text("")
    return tmp_path / "fake-cmsis"


def test_makefile_refuses_cmsis_nn_path_for_a_pockmcu_plan(tmp_path):
    """Built with CMSIS_NN_PATH, a project planned for pockmcu's kernels stops with one line saying what
    to do; a --kernels cmsis-nn project gets past the check (make -n: nothing is compiled)."""
    model = SHARED / "mlperf_kws_dscnn.tflite"
    fake = _fake_cmsis(tmp_path)
    for kernels in ("auto", "cmsis-nn"):
        out = write_project(_compile(model, "qemu-m4", kernels), tmp_path / kernels)
        p = subprocess.run(["make", "-n", "-C", str(out), "TARGET=qemu-m4", f"CMSIS_NN_PATH={fake}"],
                           capture_output=True, text=True)
        if kernels == "auto":
            assert p.returncode != 0
            assert ("CMSIS_NN_PATH is set but this project was generated for pockmcu's kernels; regenerate it with "
                    "'pockmcu gen ... --kernels cmsis-nn'") in p.stderr
        else:
            assert p.returncode == 0, p.stderr
            assert "arm-none-eabi-gcc" in p.stdout or "CC " in p.stdout or "LD " in p.stdout


# -- with a CMSIS-NN checkout ---------------------------------------------------------------------------

QUERY_MAIN = r"""
#include <stdint.h>
#include "arm_nnfunctions.h"
#include "semihost.h"

#define MAX_CASES 512
static int32_t cases[MAX_CASES * 19];
static int32_t out[MAX_CASES * 4];

int main(void)
{
    int fd = sh_open("cases.bin", 1);
    int32_t n = (int32_t)((sizeof cases - (uint32_t)sh_read(fd, cases, sizeof cases)) / (19 * 4)); /* returns bytes NOT read */
    sh_close(fd);
    for (int32_t i = 0; i < n; i++) {
        const int32_t *c = cases + 19 * i;
        cmsis_nn_conv_params cp = {0};
        cmsis_nn_dw_conv_params dp = {0};
        cp.padding.h = dp.padding.h = c[0];
        cp.padding.w = dp.padding.w = c[1];
        cp.stride.h = dp.stride.h = c[2];
        cp.stride.w = dp.stride.w = c[3];
        cp.dilation.h = dp.dilation.h = c[4];
        cp.dilation.w = dp.dilation.w = c[5];
        dp.ch_mult = c[18];
        cmsis_nn_dims in = {c[6], c[7], c[8], c[9]}, f = {c[10], c[11], c[12], c[13]};
        cmsis_nn_dims o = {c[14], c[15], c[16], c[17]};
        cmsis_nn_dims fcf = {c[9], 1, 1, c[17]};
        out[4 * i + 0] = arm_convolve_wrapper_s8_get_buffer_size(&cp, &in, &f, &o);
        out[4 * i + 1] = arm_depthwise_conv_wrapper_s8_get_buffer_size(&dp, &in, &f, &o);
        out[4 * i + 2] = arm_fully_connected_s8_get_buffer_size(&fcf);
        out[4 * i + 3] = arm_avgpool_s8_get_buffer_size(c[16], c[17]);
    }
    fd = sh_open("out.bin", 5);
    sh_write(fd, out, n * 16);
    sh_close(fd);
    return 0;
}
"""


def _random_geometries(n: int, seed: int = 0) -> list[tuple]:
    """(pad, stride, dilation, input dims, conv filter dims, conv output dims, dw filter, dw output, mult)."""
    rng = np.random.default_rng(seed)
    out = []
    for k in range(n):
        c = int(rng.integers(1, 68))
        h = 1 if k % 5 == 0 else int(rng.integers(1, 21))
        w = int(rng.integers(1, 21))
        kh = 1 if (h == 1 or k % 7 == 0) else int(rng.integers(1, 8))
        kw = 3 if k % 3 == 0 else int(rng.integers(1, 8))
        stride = (int(rng.integers(1, 4)), int(rng.integers(1, 4)))
        dil = (1, 1) if k % 2 else (int(rng.integers(1, 3)), int(rng.integers(1, 3)))
        pad = (0, 0) if k % 4 == 0 else (int(rng.integers(0, 4)), int(rng.integers(0, 4)))
        oh = max(1, (h + 2 * pad[0] - dil[0] * (kh - 1) - 1) // stride[0] + 1)
        ow = max(1, (w + 2 * pad[1] - dil[1] * (kw - 1) - 1) // stride[1] + 1)
        cout = int(rng.integers(1, 68))
        fc = c if k % 9 else max(1, c // 2)        # some grouped convolutions
        mult = 1 if k % 4 else int(rng.integers(1, 4))
        out.append((pad, stride, dil, (1, h, w, c), (cout, kh, kw, fc), (1, oh, ow, cout),
                    (1, kh, kw, c * mult), (1, oh, ow, c * mult), mult))
    return out


def _build_query_program(tmp: Path, target: str) -> Path:
    """QUERY_MAIN linked with Arm's four *_get_buffer_size sources, for ``target``'s core."""
    v = target_vars(target)
    work = tmp / target
    work.mkdir(parents=True)
    (work / "main.c").write_text(QUERY_MAIN)
    ld = work / "p.ld"
    subprocess.run(["arm-none-eabi-cpp", "-P", "-undef", "-x", "c", f"-DFLASH_ORIGIN={v['FLASH_ORIGIN']}",
                    f"-DFLASH_LENGTH={v['PART_FLASH_BYTES']}", f"-DRAM_ORIGIN={v['RAM_ORIGIN']}",
                    f"-DRAM_LENGTH={v['PART_RAM_BYTES']}", "-DSTACK_BYTES=16384",
                    f"-DPART_FLASH_BYTES={v['PART_FLASH_BYTES']}", f"-DPART_RAM_BYTES={v['PART_RAM_BYTES']}",
                    str(FIRMWARE / "pockmcu.ld.S"), "-o", str(ld)], check=True)
    src = Path(CMSIS) / "Source"
    arm = [src / "ConvolutionFunctions" / "arm_convolve_get_buffer_sizes_s8.c",
           src / "ConvolutionFunctions" / "arm_depthwise_conv_get_buffer_sizes_s8.c",
           src / "FullyConnectedFunctions" / "arm_fully_connected_get_buffer_sizes_s8.c",
           src / "PoolingFunctions" / "arm_avgpool_get_buffer_sizes_s8.c"]
    elf = work / "q.elf"
    cmd = ["arm-none-eabi-gcc", *v["CPU_FLAGS"].split(), "-mthumb", "-O2", "-std=c99",
           *v.get("PORT_DEFS", "").split(), f"-I{Path(CMSIS) / 'Include'}", f"-I{FIRMWARE}", "-nostartfiles",
           "-T", str(ld), "-Wl,--gc-sections", "-o", str(elf), str(work / "main.c"), str(FIRMWARE / "startup.c"),
           str(FIRMWARE / "semihost.c"), str(FIRMWARE / "ports" / f"{v['PORT']}.c"), *map(str, arm),
           "-Wl,--start-group", "-lc", "-lm", "-lgcc", "-Wl,--end-group"]
    p = subprocess.run(cmd, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr[-3000:]
    return elf


@needs_cmsis
@pytest.mark.parametrize("target", list(CORES))
def test_formulas_equal_arms_compiled_queries(tmp_path, target):
    """Arm's four queries compiled for the core (its ARM_MATH_DSP / ARM_MATH_MVEI come from the core's
    flags) and run in QEMU on 400 random geometries plus the known ones: our formulas give the same."""
    geos = _random_geometries(400)
    for (pad, stride, dil, i, f, o), _ in CONV_KNOWN + DW_KNOWN:
        geos.append((pad, stride, dil, i, f, o, f, o, f[3] // i[3] if f[0] == 1 else 1))
    # the conv, FC and pool queries read the conv geometry; the depthwise query its own filter and output
    data = b"".join(struct.pack("<19i", *pad, *stride, *dil, *i, *f, *o, m)
                    for pad, stride, dil, i, f, o, _, _, m in geos)
    dw_data = b"".join(struct.pack("<19i", *pad, *stride, *dil, *i, *dwf, *dwo, m)
                       for pad, stride, dil, i, _, _, dwf, dwo, m in geos)
    elf = _build_query_program(tmp_path, target)
    core = CORES[target]
    for half, blob in (("conv", data), ("dw", dw_data)):
        res = np.frombuffer(run_app(elf, target, {"cases.bin": blob}, ["out.bin"])["out.bin"], "<i4").reshape(-1, 4)
        assert len(res) == len(geos)
        for (pad, stride, dil, i, f, o, dwf, dwo, m), r in zip(geos, res):
            if half == "conv":
                assert r[0] == cs.convolve_wrapper_s8(core, pad, stride, dil, i, f, o), (pad, stride, dil, i, f, o)
                assert r[2] == cs.fully_connected_s8(core, (i[3], 1, 1, o[3]))
                assert r[3] == cs.avgpool_s8(core, o[2], o[3])
            else:
                assert r[1] == cs.depthwise_conv_wrapper_s8(core, pad, stride, dil, i, dwf, dwo), (pad, i, dwf, dwo)
    for geometry, want in CONV_KNOWN:       # the known answers above are Arm's on this core too
        assert cs.convolve_wrapper_s8(core, *geometry) == want[core]


def _supported(model: Path) -> bool:
    try:
        _compile(model, "qemu-m4", "auto")
    except PockError:
        return False
    return True


@needs_cmsis
@pytest.mark.qemu
@pytest.mark.slow
@pytest.mark.parametrize("model", SHARED_MODELS, ids=lambda p: p.name)
def test_arm_kernels_run_every_shared_model_byte_identical(tmp_path, model):
    """make CMSIS_NN_PATH=... of the --kernels cmsis-nn project: pockmcu_init accepts the planned scratch
    and Arm's kernels give the host simulation's bytes (ours, equal to TFLM) on M4, M7, M33 and M55."""
    if not _supported(model):
        pytest.skip(f"{model.name}: pockmcu cannot compile it (see BENCHMARKS.md)")
    for target in ("qemu-m4", "qemu-m7", "qemu-m33", "qemu-m55"):
        out = write_project(_compile(model, target, "cmsis-nn"), tmp_path / target)
        plan = read_plan(out)
        xs = [random_input(s, 3, 11 + k) for k, s in enumerate(plan["inputs"])]
        want = load(out).invoke(*xs)
        want = want if isinstance(want, list) else [want]
        data = b"".join(b"".join(np.ascontiguousarray(x[i]).tobytes() for x in xs) for i in range(3))
        elf = build_target(out, target, cmsis_nn_path=CMSIS)
        raw, _ = run_samples(elf, target, data, sum(s["bytes"] for s in plan["inputs"]),
                             sum(s["bytes"] for s in plan["outputs"]))
        per = sum(s["bytes"] for s in plan["outputs"])
        expect = b"".join(b"".join(np.ascontiguousarray(y[i]).tobytes() for y in want) for i in range(3))
        assert len(raw) == 3 * per and raw == expect, f"{model.name} on {target}: Arm's outputs differ"
