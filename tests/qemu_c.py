"""Build a small C test program for a qemu-* target and run it in QEMU with semihosting file I/O.

Kernel tests use it to run many random cases of a kernel in one QEMU run per core: the test writes
the cases into a file, the program (its own ``main``) reads them with ``sh_open``/``sh_read`` from
firmware/semihost.h, calls the kernels and writes the results back; the test compares bytes. The
program links the firmware's startup, semihosting and port files with the kernel sources it names,
with the flags the generated projects use (templates/Makefile.j2: -O2 -std=c99 -ffp-contract=off
-Wall -Wextra -Werror and the core flags of firmware/targets/<target>.mk).

    elf = build_program(tmp, "qemu-m4", main_source, ["arm_convolve_wrapper_s8.c", ...])
    out = run_program(elf, "qemu-m4", {"cases.bin": data}, ["out.bin"])["out.bin"]

``count_instructions`` runs with -icount: the program reads ``port_timer_read()`` around its region
and writes the ticks; ``pockmcu.targets.instructions_from_ticks`` turns them into exact counts.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from pockmcu.qemu import run_app
from pockmcu.targets import get_target

REPO = Path(__file__).resolve().parents[1]
KERNELS = REPO / "kernels_c"
FIRMWARE = REPO / "firmware"
QEMU_TARGETS = ("qemu-m3", "qemu-m4", "qemu-m7", "qemu-m33", "qemu-m55")
CFLAGS = ("-O2", "-std=c99", "-ffp-contract=off", "-Wall", "-Wextra", "-Werror", "-ffunction-sections",
          "-fdata-sections")


def workload_main(function: str, out_bytes: int) -> str:
    """A ``main`` that calls ``int32_t function(uint8_t *dst, int32_t cap)`` on a static buffer of
    ``out_bytes`` and writes the bytes it returns to out.bin (exit status 2 if it cannot)."""
    return f"""
#include <stdint.h>
#include "semihost.h"
int {function}(uint8_t *dst, int32_t cap);
static uint8_t out[{out_bytes}];
int main(void)
{{
    int32_t n = {function}(out, (int32_t)sizeof out);
    int fd = sh_open("out.bin", SH_MODE_WB);
    if (fd < 0 || sh_write(fd, out, (uint32_t)n) != 0)
    {{
        return 2;
    }}
    sh_close(fd);
    return 0;
}}
"""


def cases_mains(run_c: str, cases_bytes: int, outs_bytes: int) -> tuple[str, str]:
    """The QEMU and the host program around ``run_c``, C text defining ``static uint32_t run_cases(const uint8_t *p,
    const uint8_t *end, uint8_t *out)`` (it runs the cases in [p, end) and returns the bytes it wrote to out): the
    QEMU one reads cases.bin (at most ``cases_bytes``) and writes out.bin by semihosting, the host one reads and
    writes the files named by argv[1] and argv[2]; ``outs_bytes`` of output room. Exit status 2 on an I/O error."""
    qemu = run_c + f"""
#include "semihost.h"
static uint8_t cases[{cases_bytes}];
static uint8_t outs[{outs_bytes}];

int main(void)
{{
    int fd = sh_open("cases.bin", SH_MODE_RB);
    int32_t n;
    uint32_t size;
    if (fd < 0) return 2;
    n = sh_read(fd, cases, sizeof(cases)); /* the bytes not read */
    if (n <= 0) return 2;                   /* an error, or a file that may not fit */
    n = (int32_t)sizeof(cases) - n;
    sh_close(fd);
    size = run_cases(cases, cases + n, outs);
    fd = sh_open("out.bin", SH_MODE_WB);
    if (fd < 0 || sh_write(fd, outs, size) != 0) return 2;
    sh_close(fd);
    return 0;
}}
"""
    host = run_c + f"""
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{{
    FILE *f;
    long n;
    uint8_t *cases, *outs;
    uint32_t size;
    if (argc < 3 || !(f = fopen(argv[1], "rb"))) return 2;
    fseek(f, 0, SEEK_END);
    n = ftell(f);
    fseek(f, 0, SEEK_SET);
    cases = malloc((size_t)n);
    outs = calloc({outs_bytes}, 1);
    if (!cases || !outs || fread(cases, 1, (size_t)n, f) != (size_t)n) return 2;
    fclose(f);
    size = run_cases(cases, cases + n, outs);
    f = fopen(argv[2], "wb");
    if (!f || fwrite(outs, 1, size, f) != size) return 2;
    fclose(f);
    free(cases);
    free(outs);
    return 0;
}}
"""
    return qemu, host


def target_vars(target: str) -> dict[str, str]:
    """The ``NAME := value`` lines of firmware/targets/<target>.mk."""
    text = (FIRMWARE / "targets" / f"{get_target(target).name}.mk").read_text()
    return {m.group(1): m.group(2).strip() for m in re.finditer(r"^(\w+)[ \t]*:=[ \t]*(.*)$", text, re.M)}


def build_program(workdir: Path, target: str, main_source: str, kernel_files=(), defines=(),
                  stack_bytes: int = 16384) -> Path:
    """Compile ``main_source`` (a C file's text with ``int main(void)``) with kernels_c/``kernel_files``
    and the firmware support files for ``target``; returns the .elf."""
    v = target_vars(target)
    work = Path(workdir) / f"prog-{get_target(target).name}"
    work.mkdir(parents=True, exist_ok=True)
    (work / "main.c").write_text(main_source)
    arch = v["CPU_FLAGS"].split() + ["-mthumb"]
    ld = work / "pockmcu.ld"
    subprocess.run(["arm-none-eabi-cpp", "-P", "-undef", "-x", "c", f"-DFLASH_ORIGIN={v['FLASH_ORIGIN']}",
                    f"-DFLASH_LENGTH={v['PART_FLASH_BYTES']}", f"-DRAM_ORIGIN={v['RAM_ORIGIN']}",
                    f"-DRAM_LENGTH={v['PART_RAM_BYTES']}", f"-DSTACK_BYTES={stack_bytes}",
                    f"-DPART_FLASH_BYTES={v['PART_FLASH_BYTES']}", f"-DPART_RAM_BYTES={v['PART_RAM_BYTES']}",
                    str(FIRMWARE / "pockmcu.ld.S"), "-o", str(ld)], check=True, capture_output=True, text=True)
    sources = [work / "main.c", FIRMWARE / "startup.c", FIRMWARE / "semihost.c",
               FIRMWARE / "ports" / f"{v['PORT']}.c"] + [KERNELS / f for f in kernel_files]
    elf = work / "program.elf"
    cmd = (["arm-none-eabi-gcc", *arch, *CFLAGS, *v.get("PORT_DEFS", "").split(), *[f"-D{d}" for d in defines],
            f"-I{KERNELS}", f"-I{FIRMWARE}", "-nostartfiles", "-T", str(ld), "-Wl,--gc-sections", "-o", str(elf)]
           + [str(s) for s in sources] + ["-Wl,--start-group", "-lc", "-lm", "-lgcc", "-Wl,--end-group"])
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode:
        raise AssertionError(f"arm-none-eabi-gcc for {target} failed:\n{p.stderr[-4000:]}")
    return elf


def run_program(elf: Path, target: str, files_in: dict[str, bytes], files_out: list[str],
                profile: bool = False, timeout: float = 300) -> dict[str, bytes]:
    """Run the program in QEMU (``profile``: with -icount, exact instruction timing)."""
    return run_app(elf, target, files_in, files_out, profile=profile, timeout=timeout)


#: the case reader of the kernel tests' C programs (they read int32 case fields and 4-byte padded arrays); a test's
#: C text puts it after its #includes (it needs <stdint.h> and <string.h>)
CASE_READER_C = r"""
static int32_t rd(const uint8_t **p)
{
    int32_t v;
    memcpy(&v, *p, 4);
    *p += 4;
    return v;
}

static uint32_t pad4(uint32_t n) { return (n + 3u) & ~3u; }
"""
