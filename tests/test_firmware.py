"""Firmware runtime, generated Makefile, host builds and QEMU runs, on a tiny fake model.

The fake model implements the model.h API with two inputs, two outputs and
three ops: an int8 mix (kernels/pockmcu_fake.c), a spin loop of exactly
2 * SPIN + 1 instructions on Arm (`movs` + SPIN x (`subs`, `bne`)), and a
weighted int32 sum (kernels/arm_fake_sum.c, a "CMSIS-named" kernel).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import struct
import subprocess
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from pockmcu.errors import PockError
from pockmcu.resources import firmware_dir, templates_dir

QEMU_TARGETS = ["qemu-m3", "qemu-m4", "qemu-m7", "qemu-m33", "qemu-m55"]
BOARD_TARGETS = ["stm32f746g-disco", "nucleo-h743zi", "nrf52840-dk", "rp2350"]
SPIN = 1000
N_IN0, N_IN1 = 64, 16

MODEL_H = """\
#ifndef POCKMCU_MODEL_H
#define POCKMCU_MODEL_H
#include <stdint.h>
#define POCKMCU_NUM_INPUTS  2
#define POCKMCU_NUM_OUTPUTS 2
#define POCKMCU_NUM_OPS     3
#define POCKMCU_ARENA_BYTES {arena}
int pockmcu_init(void);
void *pockmcu_input(int index);
const void *pockmcu_output(int index);
uint32_t pockmcu_input_bytes(int index);
uint32_t pockmcu_output_bytes(int index);
int pockmcu_invoke(void);
#ifdef POCKMCU_PROFILE
void pockmcu_profile_hook(int op_index);
#endif
#endif
"""

MODEL_C = """\
#include <string.h>
#include "model.h"
#include "weights.h"
#include "pockmcu_fake.h"

static uint8_t arena[POCKMCU_ARENA_BYTES] __attribute__((aligned(16)));
#define IN0  ((int8_t *)(arena + 0))
#define IN1  ((int8_t *)(arena + 64))
#define OUT0 ((int8_t *)(arena + 128))
#define OUT1 ((int32_t *)(void *)(arena + 192))

EXTRA_DEFS
#ifdef POCKMCU_PROFILE
#define HOOK(i) pockmcu_profile_hook(i)
#else
#define HOOK(i) ((void)0)
#endif

int pockmcu_init(void) { memset(arena, 0, sizeof arena); return 0; }
void *pockmcu_input(int i) { return i == 0 ? (void *)IN0 : i == 1 ? (void *)IN1 : (void *)0; }
const void *pockmcu_output(int i) { return i == 0 ? (const void *)OUT0 : i == 1 ? (const void *)OUT1 : (const void *)0; }
uint32_t pockmcu_input_bytes(int i) { return i == 0 ? 64u : i == 1 ? 16u : 0u; }
uint32_t pockmcu_output_bytes(int i) { return i == 0 ? 64u : i == 1 ? 4u : 0u; }

int pockmcu_invoke(void)
{
    HOOK(0);
    EXTRA_CODE
    fake_mix(IN0, IN1, OUT0, 64, 16);
    HOOK(1);
    fake_spin(SPIN_COUNT);
    HOOK(2);
    arm_fake_sum(OUT0, fake_weights, 64, OUT1);
    HOOK(3);
    return 0;
}
"""

WEIGHTS_H = """\
#ifndef WEIGHTS_H
#define WEIGHTS_H
#include <stdint.h>
#define SPIN_COUNT {spin}u
extern const int8_t fake_weights[64];
#endif
"""

WEIGHTS_C = """\
#include "weights.h"
const int8_t fake_weights[64] = {{ {weights} }};
"""

KERNEL_H = """\
#ifndef POCKMCU_FAKE_H
#define POCKMCU_FAKE_H
#include <stdint.h>
void fake_mix(const int8_t *a, const int8_t *b, int8_t *out, int n, int nb);
void fake_spin(uint32_t n);
void arm_fake_sum(const int8_t *x, const int8_t *w, int n, int32_t *out);
#endif
"""

KERNEL_POCKMCU_C = """\
#include "pockmcu_fake.h"
#ifdef POCKMCU_USE_CMSIS_NN
/* With CMSIS_NN_PATH the arm_*.c kernels are left out: stand in for the
 * library's kernel here and reference one real CMSIS-NN function. */
#include "arm_nnfunctions.h"
void arm_fake_sum(const int8_t *x, const int8_t *w, int n, int32_t *out)
{
    int32_t acc = 0;
    for (int j = 0; j < n; j++) {
        acc += (int32_t)x[j] * (int32_t)w[j] * (j + 1);
    }
    *out = acc;
}
#endif
void fake_mix(const int8_t *a, const int8_t *b, int8_t *out, int n, int nb)
{
#ifdef POCKMCU_USE_CMSIS_NN
    arm_relu_q7(out, 0);
#endif
    for (int j = 0; j < n; j++) {
        int32_t v = ((int32_t)a[j] * 3 + (int32_t)b[j % nb]) >> 1;
        out[j] = (int8_t)(v > 127 ? 127 : v < -128 ? -128 : v);
    }
}
__attribute__((noinline)) void fake_spin(uint32_t n)
{
#if defined(__arm__)
    __asm__ volatile("1: subs %0, %0, #1\\n\\tbne 1b" : "+r"(n) : : "cc");
#else
    (void)n;
#endif
}
"""

KERNEL_ARM_C = """\
#include "pockmcu_fake.h"
void arm_fake_sum(const int8_t *x, const int8_t *w, int n, int32_t *out)
{
    int32_t acc = 0;
    for (int j = 0; j < n; j++) {
        acc += (int32_t)x[j] * (int32_t)w[j] * (j + 1);
    }
    *out = acc;
}
"""

WEIGHTS = (np.arange(64) * 37 % 255 - 127).astype(np.int8)


def make_project(out: Path, *, ram_bytes: int = 64 * 1024, arena: int = 256, stack: int = 4096,
                 target: str = "qemu-m4", spin: int = SPIN, extra_defs: str = "", extra_code: str = "",
                 library: str = "pockmcu") -> Path:
    """Write a fake generated project (what pockmcu codegen writes) into out."""
    import jinja2

    out.mkdir(parents=True, exist_ok=True)
    (out / "model.h").write_text(MODEL_H.format(arena=arena))
    (out / "model.c").write_text(MODEL_C.replace("EXTRA_DEFS", extra_defs).replace("EXTRA_CODE", extra_code))
    (out / "weights.h").write_text(WEIGHTS_H.format(spin=spin))
    (out / "weights.c").write_text(WEIGHTS_C.format(weights=", ".join(str(int(v)) for v in WEIGHTS)))
    (out / "kernels").mkdir(exist_ok=True)
    (out / "kernels" / "pockmcu_fake.h").write_text(KERNEL_H)
    (out / "kernels" / "pockmcu_fake.c").write_text(KERNEL_POCKMCU_C)
    (out / "kernels" / "arm_fake_sum.c").write_text(KERNEL_ARM_C)
    if (out / "firmware").exists():
        shutil.rmtree(out / "firmware")
    shutil.copytree(firmware_dir(), out / "firmware")
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(templates_dir())), keep_trailing_newline=True,
                             undefined=jinja2.StrictUndefined)
    (out / "Makefile").write_text(env.get_template("Makefile.j2").render(
        model_sources=["model.c", "weights.c"], ram_bytes=ram_bytes, flash_bytes=None, stack_bytes=stack,
        default_target=target, model_name="fake", g=SimpleNamespace(library=library),
        input_bytes=N_IN0 + N_IN1, float_inputs=False))
    # what the board app's build (pockmcu/board/firmware.py) reads: sizes, the RAM budget, no training
    (out / "plan.json").write_text(json.dumps({
        "model": "fake", "ram_budget_bytes": ram_bytes, "training": None,
        "inputs": [{"bytes": N_IN0, "dtype": "int8"}, {"bytes": N_IN1, "dtype": "int8"}],
        "outputs": [{"bytes": 64, "dtype": "int8"}, {"bytes": 4, "dtype": "int32"}]}))
    return out


def reference(in0: np.ndarray, in1: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """numpy version of the fake model, per sample: (out0 int8[64], out1 int32)."""
    v = (in0.astype(np.int32) * 3 + np.tile(in1.astype(np.int32), (1, N_IN0 // N_IN1))) >> 1
    out0 = np.clip(v, -128, 127).astype(np.int8)
    out1 = (out0.astype(np.int64) * WEIGHTS.astype(np.int64) * np.arange(1, 65)).sum(axis=1).astype(np.int32)
    return out0, out1


def samples(n: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    in0 = rng.integers(-128, 128, (n, N_IN0)).astype(np.int8)
    in1 = rng.integers(-128, 128, (n, N_IN1)).astype(np.int8)
    data = b"".join(in0[i].tobytes() + in1[i].tobytes() for i in range(n))
    out0, out1 = reference(in0, in1)
    expected = b"".join(out0[i].tobytes() + out1[i:i + 1].tobytes() for i in range(n))
    return data, expected


SAMPLE_IN = N_IN0 + N_IN1
SAMPLE_OUT = N_IN0 + 4
DATA, EXPECTED = samples(10)
SPIN_OP = 1  # op index of fake_spin


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    return make_project(tmp_path_factory.mktemp("fw") / "out")


# ------------------------------------------------------------------ targets


def parse_mk(path: Path) -> dict[str, str]:
    out = {}
    for ln in path.read_text().splitlines():
        if ":=" in ln and not ln.lstrip().startswith("#"):
            k, v = ln.split(":=", 1)
            out[k.strip()] = v.strip()
    return out


def test_target_table_matches_make_fragments():
    from pockmcu.targets import TARGETS

    mk_dir = firmware_dir() / "targets"
    assert sorted(p.stem for p in mk_dir.glob("*.mk")) == sorted(TARGETS)
    for name, t in TARGETS.items():
        mk = parse_mk(mk_dir / f"{name}.mk")
        assert (mk["QEMU_MACHINE"] or None) == t.qemu_machine, name
        assert mk["CPU_FLAGS"].split() == list(t.cflags), name
        assert mk["PORT"] == t.port and (firmware_dir() / "ports" / f"{t.port}.c").is_file(), name
        assert int(mk["FLASH_ORIGIN"], 16) == t.flash_origin and int(mk["PART_FLASH_BYTES"]) == t.flash_bytes, name
        assert int(mk["RAM_ORIGIN"], 16) == t.ram_origin and int(mk["PART_RAM_BYTES"]) == t.ram_bytes, name
        assert mk["DEFAULT_APP"] == ("semihost" if t.is_qemu else "board"), name
        if t.timer_kind == "cmsdk-down32":
            assert f"-DPORT_TIMER_BASE={t.timer_base:#010x}u" in mk["PORT_DEFS"], name
            assert f"-DPORT_TIMER_HZ={t.timer_hz}u" in mk["PORT_DEFS"], name
    assert set(QEMU_TARGETS) == {n for n, t in TARGETS.items() if t.is_qemu}
    assert set(BOARD_TARGETS) == {n for n, t in TARGETS.items() if not t.is_qemu}


def test_get_target():
    from pockmcu.targets import get_target, instructions_from_ticks

    assert get_target("cortex-m4").name == "qemu-m4"
    assert get_target("QEMU-M55").qemu_machine == "mps3-an547"
    with pytest.raises(PockError, match="valid targets: qemu-m3, qemu-m4"):
        get_target("cortex-m0")
    # 2017 instructions at 25 MHz are 12908.8 ticks: either neighbour rounds back
    assert instructions_from_ticks(12908, 25_000_000) == instructions_from_ticks(12909, 25_000_000) == 2017


# --------------------------------------------------------------------- host


def test_host_lib_cffi(project):
    import cffi

    from pockmcu.build import build_host_lib
    from pockmcu.sim import model_cdef

    lib_path = build_host_lib(project)
    assert lib_path == project / "build" / "host" / "libpockmcu_model.so" and lib_path.is_file()
    ffi = cffi.FFI()
    ffi.cdef(model_cdef(project))
    lib = ffi.dlopen(str(lib_path))
    assert lib.pockmcu_init() == 0
    assert [lib.pockmcu_input_bytes(i) for i in range(2)] == [N_IN0, N_IN1]
    got = b""
    for i in range(len(DATA) // SAMPLE_IN):
        chunk = DATA[i * SAMPLE_IN:(i + 1) * SAMPLE_IN]
        ffi.memmove(lib.pockmcu_input(0), chunk[:N_IN0], N_IN0)
        ffi.memmove(lib.pockmcu_input(1), chunk[N_IN0:], N_IN1)
        assert lib.pockmcu_invoke() == 0
        got += ffi.buffer(lib.pockmcu_output(0), 64)[:] + ffi.buffer(lib.pockmcu_output(1), 4)[:]
    assert got == EXPECTED


def test_host_sanitized(project):
    from pockmcu.build import build_host_sanitized, run_host_sanitized

    exe = build_host_sanitized(project)
    assert exe == project / "build" / "host-san" / "pockmcu_run"
    assert run_host_sanitized(exe, DATA) == EXPECTED
    with pytest.raises(PockError, match="ends inside a sample"):
        run_host_sanitized(exe, DATA[:-1])


# --------------------------------------------------------------------- QEMU


@pytest.mark.parametrize("target", QEMU_TARGETS)
def test_qemu_outputs_match_host(project, target):
    from pockmcu.build import build_target
    from pockmcu.qemu import run, run_samples

    elf = build_target(project, target)
    assert elf == project / "build" / target / "pockmcu_model.elf"
    assert elf.with_suffix(".bin").is_file()
    out, prof = run_samples(elf, target, DATA, SAMPLE_IN, SAMPLE_OUT)
    assert out == EXPECTED and prof is None
    r = run(elf, target, DATA[:2 * SAMPLE_IN], SAMPLE_IN, SAMPLE_OUT)
    assert r.samples == 2 and r.stack_size == 4096 and 32 < r.stack_used < 1024


@pytest.mark.parametrize("target", QEMU_TARGETS)
def test_qemu_profile_exact(project, target):
    from pockmcu.build import build_target
    from pockmcu.qemu import run

    elf = build_target(project, target, profile=True)
    assert elf == project / "build" / f"{target}-profile" / "pockmcu_model.elf"
    a = run(elf, target, DATA, SAMPLE_IN, SAMPLE_OUT, profile=True)
    b = run(elf, target, DATA, SAMPLE_IN, SAMPLE_OUT, profile=True)
    assert a.outputs == EXPECTED
    assert a.profile == b.profile and len(a.profile) == 10 and all(len(p) == 3 for p in a.profile)
    # the spin op: movs + SPIN x (subs, bne) = 2 SPIN + 1, plus the call and return around it
    spin = {p[SPIN_OP] for p in a.profile}
    assert len(spin) == 1 and 0 <= spin.pop() - (2 * SPIN + 1) <= 4
    assert 8 <= a.overhead_instructions <= 30
    assert all(100 < p[0] < 3000 and 100 < p[2] < 3000 for p in a.profile)


def test_parse_profile_format():
    import struct

    from pockmcu.qemu import parse_profile

    hz = 25_000_000
    header = struct.pack("<6I", 0x46504B50, 1, 2, hz, 90, 0)  # 90 ticks = 14 instructions
    t0 = 0xFFFFFF00  # readings wrap modulo 2^32
    ticks = [t0, (t0 + 6550) & 0xFFFFFFFF, (t0 + 6550 + 12909) & 0xFFFFFFFF]
    counts, overhead = parse_profile(header + struct.pack("<3I", *ticks), hz)
    assert overhead == 14 and counts == [[1023 - 14, 2017 - 14]]
    with pytest.raises(PockError, match="another target"):
        parse_profile(header, 20_000_000)
    with pytest.raises(PockError, match="PROFILE=1"):
        parse_profile(b"", hz)


def test_run_errors(project):
    from pockmcu.build import build_target
    from pockmcu.qemu import run_samples

    elf = build_target(project, "qemu-m4")
    with pytest.raises(PockError, match="ends inside a sample"):
        run_samples(elf, "qemu-m4", DATA[:SAMPLE_IN + 5], SAMPLE_IN + 5, SAMPLE_OUT)
    with pytest.raises(PockError, match="PROFILE=1"):
        run_samples(elf, "qemu-m4", DATA, SAMPLE_IN, SAMPLE_OUT, profile=True)
    with pytest.raises(PockError, match="real board"):
        run_samples(elf, "nrf52840-dk", DATA, SAMPLE_IN, SAMPLE_OUT)


def test_qemu_timeout_kills(tmp_path):
    from pockmcu.build import build_target
    from pockmcu.qemu import run_samples

    out = make_project(tmp_path / "out", spin=0xFFFFFFFF)
    elf = build_target(out, "qemu-m4")
    with pytest.raises(PockError, match="did not finish 1 samples within 1 s"):
        run_samples(elf, "qemu-m4", DATA[:SAMPLE_IN], SAMPLE_IN, SAMPLE_OUT, timeout=1)


@pytest.mark.parametrize("target", ["qemu-m4", "qemu-m33"])  # MPU guard (ARMv7-M), PSPLIM (ARMv8-M)
def test_stack_overflow_is_reported(tmp_path, target):
    from pockmcu.build import build_target
    from pockmcu.qemu import run_samples

    deep = ("__attribute__((noinline)) static int deep(volatile int n)\n"
            "{ volatile char buf[64]; buf[0] = (char)n; return n == 0 ? buf[0] : deep(n - 1) + buf[0]; }\n")
    out = make_project(tmp_path / "out", extra_defs=deep, extra_code="if (deep(1000) == 12345) return 1;")
    elf = build_target(out, target)
    with pytest.raises(PockError, match="status 7: stack overflow"):
        run_samples(elf, target, DATA, SAMPLE_IN, SAMPLE_OUT, timeout=20)


def test_fault_is_reported(tmp_path):
    from pockmcu.build import build_target
    from pockmcu.qemu import run_samples

    out = make_project(tmp_path / "out", extra_code="*(volatile uint32_t *)0xF0000000u = 1u;")
    elf = build_target(out, "qemu-m55")
    with pytest.raises(PockError, match="status 5: the firmware faulted"):
        run_samples(elf, "qemu-m55", DATA, SAMPLE_IN, SAMPLE_OUT, timeout=20)


def test_board_app_inference_in_qemu(project):
    """Inference over the one serial protocol (firmware/PROTOCOL.md): the board app built with PROFILE=1
    in QEMU, UART0 on a loopback TCP port, real bytes through pyserial. Outputs, exact per-op
    instruction counts and the overhead are those of the semihosting app."""
    from pockmcu.board import protocol as P
    from pockmcu.board.client import DeviceError, open_board, run_samples
    from pockmcu.board.emulate import Emulator
    from pockmcu.build import build_target
    from pockmcu.qemu import run

    ref = run(build_target(project, "qemu-m4", profile=True), "qemu-m4", DATA, SAMPLE_IN, SAMPLE_OUT, profile=True)
    with Emulator(project, "qemu-m4", profile=True) as emu:
        r = run_samples(emu.url, DATA, SAMPLE_IN, SAMPLE_OUT, profile=True, icount=True, connect_timeout=10)
        assert r.outputs == EXPECTED and r.samples == 10 and 0 < r.stack_used < r.stack_size == 4096
        assert {p[SPIN_OP] for p in r.profile} == {2 * SPIN + 3}
        assert r.profile == ref.profile and r.overhead_instructions == ref.overhead_instructions
        c = open_board(emu.url)
        try:
            whole = c.profile()        # the readings of the last sample, in pages from any first reading
            tail = P.Profile.parse(c.request(P.PROFILE, struct.pack("<I", 2)))
            assert whole.num_ops == 3 and len(whole.ticks) == 4 and tail.first == 2 and tail.ticks == whole.ticks[2:]
            with pytest.raises(DeviceError, match="past num_ops"):
                c.request(P.PROFILE, struct.pack("<I", 5))
            c.stage_input(DATA[:SAMPLE_IN], chunk=16)  # inputs too big for one frame go in pieces
            assert c.infer(b"") == EXPECTED[:SAMPLE_OUT]
            with pytest.raises(PockError, match="takes 80 input bytes per sample, not 81"):
                c.run_samples(DATA, SAMPLE_IN + 1)
        finally:
            c.link.close()


# ------------------------------------------------------ budgets and boards


def test_oversized_arena_fails_at_link_time(tmp_path):
    from pockmcu.build import build_target

    out = make_project(tmp_path / "out", ram_bytes=16 * 1024, arena=16000, stack=2048)
    with pytest.raises(PockError, match=r"region `RAM' overflowed by \d+ bytes") as e:
        build_target(out, "qemu-m4")
    assert "RAM_BYTES=16384" in str(e.value)
    make_project(out, ram_bytes=20 * 1024, arena=16000, stack=2048)  # fits once the budget is raised
    build_target(out, "qemu-m4")


def test_firmware_larger_than_the_parts_flash(tmp_path):
    """Weights past the whole flash of the part: the message names the part's flash and does not suggest --flash
    (which cannot go above it); a FLASH_BYTES below the part's flash is told the size that links."""
    from pockmcu.build import build_target

    big = dict(extra_defs="const int8_t pockmcu_big[600000] = {1};",
               extra_code="(void)*(const volatile int8_t *)&pockmcu_big[1];")
    out = make_project(tmp_path / "m55", target="qemu-m55", **big)
    with pytest.raises(PockError, match=r"region `FLASH' overflowed by \d+ bytes") as e:
        build_target(out, "qemu-m55")
    msg = str(e.value)
    assert "qemu-m55's whole 524288-byte flash" in msg and "--flash" not in msg and "STACK" not in msg, msg

    out = make_project(tmp_path / "m4", target="qemu-m4", **big)
    mk = out / "Makefile"
    mk.write_text(re.sub(r"^FLASH_BYTES[ \t]*\?=.*$", "FLASH_BYTES ?= 524288", mk.read_text(), flags=re.M))
    with pytest.raises(PockError, match=r"\(FLASH_BYTES=524288\); raise --flash to (\d+) bytes or more") as e:
        build_target(out, "qemu-m4")
    need = int(re.search(r"raise --flash to (\d+)", str(e.value)).group(1))
    mk.write_text(mk.read_text().replace("FLASH_BYTES ?= 524288", f"FLASH_BYTES ?= {need}"))
    build_target(out, "qemu-m4")  # the size the message names links


def test_budget_larger_than_part(tmp_path):
    from pockmcu.board.firmware import build_app

    out = make_project(tmp_path / "out", ram_bytes=1024 * 1024)
    with pytest.raises(PockError, match="larger than the nrf52840-dk's RAM"):
        build_app(out, "nrf52840-dk")  # the board app: the real boards' app


@pytest.mark.parametrize("target", BOARD_TARGETS)
def test_real_boards_compile_and_link(project, target):
    """The board app (their default app) for each real board."""
    from pockmcu.board.firmware import build_app
    from pockmcu.build import build_target, elf_size
    from pockmcu.targets import get_target

    with pytest.raises(PockError, match="board_config.h is missing"):  # plain make: pockmcu writes the layout
        build_target(project, target)
    elf = build_app(project, target)
    size = elf_size(elf)
    t = get_target(target)
    assert 1000 < size["text"] < 16384 and size["stack"] == 4096 + 256  # + the handler stack
    assert size["flash"] == size["text"] + size["data"] and size["ram"] == size["data"] + size["bss"]
    entry = int.from_bytes(elf.with_suffix(".bin").read_bytes()[4:8], "little")
    assert t.flash_origin <= entry < t.flash_origin + t.flash_bytes  # reset vector points into flash
    if target == "rp2350":  # IMAGE_DEF block within the first 4 KB
        assert bytes.fromhex("d3deffff42012110") in elf.with_suffix(".bin").read_bytes()[:4096]


def test_flash_without_port_builds_the_board_app(project, tmp_path):
    """`pockmcu flash OUT --target BOARD` without --port: the board image for the board's own flashing tool."""
    import sys

    env = dict(os.environ, XDG_CACHE_HOME=str(tmp_path / "cache"))
    cli = [sys.executable, "-m", "pockmcu.cli", "flash"]
    r = subprocess.run(cli + [str(project), "--target", "nrf52840-dk"], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    bin_path = project / "build" / "nrf52840-dk-board" / "pockmcu_model.bin"
    assert f"built {bin_path.with_suffix('.elf')}" in r.stdout and bin_path.stat().st_size > 1000
    r = subprocess.run(cli + [str(bin_path), "--target", "nrf52840-dk"], capture_output=True, text=True, env=env)
    assert r.returncode == 2 and r.stderr.strip().splitlines() == ["pockmcu flash: error: flashing a file needs --port "
                                                                   "(without it, flash only builds OUT's board app)"]


def test_incremental_and_flag_changes(project):
    from pockmcu.build import build_target, elf_size

    elf = build_target(project, "qemu-m7")
    stamp = elf.stat().st_mtime_ns
    assert build_target(project, "qemu-m7").stat().st_mtime_ns == stamp  # nothing to do
    make = ["make", "-C", str(project), "TARGET=qemu-m7", "CMSIS_NN_PATH=", "APP="]
    r = subprocess.run(make + ["STACK_BYTES=8192"], capture_output=True, text=True, check=True)
    assert "LD       build/qemu-m7/pockmcu_model.elf" in r.stdout and "CC " not in r.stdout  # a budget change relinks
    assert elf_size(elf)["stack"] == 8192 + 256
    r = subprocess.run(make + ["PORT_DEFS=-DPOCKMCU_TEST_FLAG"], capture_output=True, text=True, check=True)
    assert "CC       model.c" in r.stdout  # a compile-flag change recompiles
    build_target(project, "qemu-m7")
    assert elf_size(elf)["stack"] == 4096 + 256


def test_build_error_message(tmp_path):
    from pockmcu.build import build_host_lib, build_target

    out = make_project(tmp_path / "out", extra_code="this is not C;")
    with pytest.raises(PockError, match=r"firmware for qemu-m3 build failed in .*model\.c:\d+:\d+: error"):
        build_target(out, "qemu-m3")
    with pytest.raises(PockError, match=r"host library build failed in .*error"):
        build_host_lib(out)
    with pytest.raises(PockError, match="no Makefile"):
        build_host_lib(tmp_path)


def test_missing_toolchain_names_package(project, monkeypatch, tmp_path):
    from pockmcu.build import build_target

    make = shutil.which("make")
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(PockError, match="apt-get install make"):
        build_target(project, "qemu-m4")
    (tmp_path / "make").symlink_to(make)
    with pytest.raises(PockError, match="arm-none-eabi-gcc not found.*gcc-arm-none-eabi libnewlib-arm-none-eabi"):
        build_target(project, "qemu-m4")


@pytest.mark.skipif(not os.environ.get("CMSIS_NN_PATH"), reason="set CMSIS_NN_PATH to a CMSIS-NN checkout")
def test_cmsis_nn_build(tmp_path):
    from pockmcu.build import build_target
    from pockmcu.qemu import run_samples

    out = make_project(tmp_path / "out", library="cmsis-nn")   # the Makefile refuses CMSIS_NN_PATH otherwise
    for target in ("qemu-m4", "qemu-m55"):
        elf = build_target(out, target, cmsis_nn_path=os.environ["CMSIS_NN_PATH"])
        assert run_samples(elf, target, DATA, SAMPLE_IN, SAMPLE_OUT)[0] == EXPECTED
