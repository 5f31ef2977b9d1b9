"""Style of the C sources: formatted with the repository's .clang-format (CMSIS-NN's settings).

The check is clang-format's own (--dry-run --Werror), as Debian 12's clang-format 14 applies it;
`make test` installs the package. Fix a file with `clang-format -i FILE`.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

#: C files that must be clang-format clean, as globs relative to the repository root. Add a
#: directory here once it has been formatted. firmware/**: the runtime, its ports, the board
#: protocol and the bootloader (the unity-build includes keep their order under clang-format off).
CLANG_FORMAT_GLOBS = ("kernels_c/*.[ch]", "firmware/**/*.[ch]")


def _clang_format() -> str:
    exe = shutil.which("clang-format")
    assert exe is not None, "clang-format is missing: run 'make test' (it installs the Debian package clang-format)"
    return exe


def _run(exe: str, files, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([exe, "--dry-run", "--Werror", "--style=file", *map(str, files)], cwd=cwd,
                          capture_output=True, text=True)


def formatted_files() -> list[Path]:
    files = []
    for pattern in CLANG_FORMAT_GLOBS:
        matched = sorted(REPO.glob(pattern))
        assert matched, f"{pattern} matches no file"
        files += matched
    return files


def test_c_sources_are_clang_format_clean():
    exe = _clang_format()
    assert (REPO / ".clang-format").is_file(), "the repository's .clang-format is missing"
    res = _run(exe, formatted_files(), REPO)
    assert res.returncode == 0, "not clang-format clean (fix with clang-format -i FILE):\n" + res.stderr[-6000:]


def test_check_catches_a_misformatted_file(tmp_path):
    """The check above is not vacuous: a kernel with its layout spoiled fails it."""
    exe = _clang_format()
    shutil.copy(REPO / ".clang-format", tmp_path / ".clang-format")
    src = (REPO / "kernels_c" / "pockmcu_add_f32.c").read_text()
    bad = tmp_path / "pockmcu_add_f32.c"
    bad.write_text(src.replace("    int32_t k;\n", "  int32_t k ;\n"))
    assert bad.read_text() != src
    assert _run(exe, [bad], tmp_path).returncode != 0
    bad.write_text(src)
    assert _run(exe, [bad], tmp_path).returncode == 0
