"""The fast lane's two pieces: host builds link kernels compiled once (pockmcu.build's kernel cache),
and cffi declarations come from the C headers (pockmcu.cdecl), not from copies.

* The cache key follows everything the kernel objects depend on: a changed kernel, a new kernel
  file, a changed header, another compiler or changed compile rules give another key, while two
  projects that differ only in their model share it.
* A changed kernel reaches the library (the cache cannot serve a stale archive), a kernel that does
  not compile fails as it does without the cache, and the library is byte for byte the one a plain
  `make host` builds.
* Every function the kernels export is declared by the header's cdef, which cffi accepts; the
  extraction follows #include, drops static inline helpers and attributes.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import FIXTURES

from pockmcu.build import build_host_lib, kernel_archive, kernel_cache_key
from pockmcu.cdecl import c_declarations, code_declarations, declarations_from_text
from pockmcu.errors import PockError
from pockmcu.resources import kernels_dir

MODEL_A = FIXTURES / "fc_none.tflite"
MODEL_B = FIXTURES / "logistic.tflite"


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("kernel-cache")


@pytest.fixture
def cache(cache_dir, monkeypatch):
    """A kernel cache private to this module (the tests look into it)."""
    monkeypatch.setenv("POCKMCU_CACHE_DIR", str(cache_dir))
    return cache_dir


def copy_project(gen_out: Path, dst: Path) -> Path:
    shutil.copytree(gen_out, dst, ignore=shutil.ignore_patterns("build"))
    return dst


def test_cache_key_follows_what_the_kernel_objects_depend_on(generated, tmp_path, monkeypatch):
    a, b = generated(MODEL_A).out, generated(MODEL_B).out
    key = kernel_cache_key(a)
    assert kernel_cache_key(b) == key  # another model, RAM budget, name: the same kernels
    assert kernel_cache_key(a, "host-san") != key

    def changed(edit) -> str:
        p = copy_project(a, tmp_path / f"p{len(list(tmp_path.iterdir()))}")
        edit(p)
        return kernel_cache_key(p)

    src = sorted((a / "kernels").glob("*.c"))[0].name
    keys = {
        "kernel source": changed(lambda p: (p / "kernels" / src).write_text(
            (p / "kernels" / src).read_text() + "\n/* changed */\n")),
        "new kernel": changed(lambda p: (p / "kernels" / "pockmcu_new_s8.c").write_text("int x;\n")),
        "kernel header": changed(lambda p: (p / "kernels" / "pockmcu_nn.h").write_text(
            (p / "kernels" / "pockmcu_nn.h").read_text() + "\n")),
        "firmware header": changed(lambda p: (p / "firmware" / "extra.h").write_text("#define X 1\n")),
        "compile rule": changed(lambda p: (p / "Makefile").write_text(
            (p / "Makefile").read_text().replace("HOST_CFLAGS := -O2", "HOST_CFLAGS := -O3"))),
    }
    monkeypatch.setenv("HOST_CC", "cc")
    keys["compiler"] = kernel_cache_key(a)
    assert key not in keys.values() and len(set(keys.values())) == len(keys), keys


def test_changed_kernel_reaches_the_library(generated, tmp_path, cache):
    """Two projects, one with a kernel changed: each library holds its own kernels."""
    import cffi

    a = copy_project(generated(MODEL_A).out, tmp_path / "a")
    b = copy_project(generated(MODEL_A).out, tmp_path / "b")
    src = b / "kernels" / "pockmcu_xorshift32.c"
    src.write_text(src.read_text() + "\nint pockmcu_cache_probe(void);\nint pockmcu_cache_probe(void) { return 42; }\n")
    lib_a, lib_b = build_host_lib(a), build_host_lib(b)
    assert len(list(cache.iterdir())) >= 2  # two archives (and the lock file)
    ffi = cffi.FFI()
    ffi.cdef("int pockmcu_cache_probe(void);")
    assert ffi.dlopen(str(lib_b)).pockmcu_cache_probe() == 42
    with pytest.raises(AttributeError):
        ffi.dlopen(str(lib_a)).pockmcu_cache_probe()


def test_cached_build_equals_plain_make_host(generated, tmp_path, cache, monkeypatch):
    a = copy_project(generated(MODEL_A).out, tmp_path / "a")
    b = copy_project(generated(MODEL_A).out, tmp_path / "b")
    cached = build_host_lib(a)
    monkeypatch.setenv("POCKMCU_CACHE_DIR", "off")
    assert kernel_archive(b) is None
    plain = build_host_lib(b)
    assert cached.read_bytes() == plain.read_bytes()
    # the cached build compiled only the project's own files; the plain one compiled the kernels
    assert not (a / "build" / "host" / "obj" / "kernels").exists()
    assert (b / "build" / "host" / "obj" / "kernels").is_dir()
    monkeypatch.setenv("POCKMCU_CACHE_DIR", str(cache))
    assert str(kernel_archive(a)) in (a / "build" / "host" / "ldflags.txt").read_text()
    # `make host` standalone in the cached project links the kernel objects again (b's, copied to
    # save the compile time: they are up to date, so make only relinks), same bytes again
    shutil.copytree(b / "build" / "host" / "obj" / "kernels", a / "build" / "host" / "obj" / "kernels")
    r = subprocess.run(["make", "-C", str(a), "host"], check=True, capture_output=True, text=True)
    assert "HOSTCC" not in r.stdout and "LD       build/host/libpockmcu_model.so" in r.stdout
    assert "--whole-archive" not in (a / "build" / "host" / "ldflags.txt").read_text()
    assert cached.read_bytes() == plain.read_bytes()


def test_kernel_compile_error_is_reported_as_without_cache(generated, tmp_path, cache):
    bad = copy_project(generated(MODEL_A).out, tmp_path / "bad")
    (bad / "kernels" / "arm_avgpool_s8.c").write_text("this is not C;\n")
    with pytest.raises(PockError, match=r"host library build failed in .*arm_avgpool_s8\.c:\d+:\d+: error"):
        build_host_lib(bad)


# ------------------------------------------------------------------ cdef from the headers


def test_header_cdef_declares_every_kernel(generated):
    import cffi

    cdef = c_declarations(kernels_dir() / "pockmcu_nn.h", include_dirs=[kernels_dir()])
    cffi.FFI().cdef(cdef)
    declared = set(re.findall(r"\b(\w+)\s*\(", cdef))
    nm = subprocess.run(["nm", "-g", "--defined-only", str(kernel_archive(generated(MODEL_A).out))],
                        capture_output=True, text=True, check=True).stdout
    exported = {ln.split()[-1] for ln in nm.splitlines() if re.search(r" T \w+$", ln)}
    assert len(exported) > 50 and exported <= declared, sorted(exported - declared)
    for name in ("arm_convolve_wrapper_s8", "pockmcu_conv_wgrad_update_s8", "pockmcu_update_s8"):
        assert re.search(rf"\b{name}\(const|\b{name}\(\w", cdef), name
    assert "pockmcu_optimizer;" in cdef and "cmsis_nn_dims;" in cdef
    # the static inline helpers of pockmcu_nn_support.h are no symbols: not declared
    shim = code_declarations('#include "pockmcu_nn.h"\n#include "pockmcu_nn_support.h"\n'
                             "int probe(int x) { return pockmcu_srdhm(x, x); }\n", include_dirs=[kernels_dir()])
    assert "pockmcu_srdhm" not in shim and "int probe(int x);" in shim


def test_cdef_follows_includes_and_drops_what_cffi_cannot_take(tmp_path):
    import cffi

    (tmp_path / "fam").mkdir()
    (tmp_path / "top.h").write_text('#include <stdint.h>\n#include "fam/conv.h"\n#define N 4\n'
                                    "int32_t top_fn(const int8_t *x, int32_t n) __attribute__((nonnull));\n")
    (tmp_path / "fam" / "conv.h").write_text(
        "typedef struct { int32_t a[N_CONV]; } conv_args;\n"
        "static inline int helper(int x) { const char *s = \"}{;\"; return s[0] + x + '}'; }\n"
        "static const int8_t table[2] = {1, 2};\n"
        "int conv_fn(const conv_args *args);\n")
    text = c_declarations(tmp_path / "top.h", include_dirs=[tmp_path], defines=["N_CONV=3"])
    assert text.splitlines() == ["typedef struct { int32_t a[3]; } conv_args;",
                                 "int conv_fn(const conv_args *args);",
                                 "int32_t top_fn(const int8_t *x, int32_t n);"]
    cffi.FFI().cdef(text)
    assert declarations_from_text("int f(int); int f(int a) { return a; } int (*p)(int);").splitlines() == [
        "int f(int);", "int (*p)(int);"]


def test_ccache_builds_the_same_firmware_and_sanitized_objects(generated, tmp_path):
    """The generated Makefile compiles through ccache when it is installed: the firmware is byte for byte the one a
    plain build (`make CCACHE=`) makes, in another directory too (a cache hit), and the sanitized objects' debug
    info names the project directory ".", so that ccache can share them between projects."""
    import os

    assert shutil.which("ccache"), "ccache is missing: run 'make test' (make setup installs it)"
    env = dict(os.environ, CCACHE_DIR=str(tmp_path / "ccache"))
    env = {k: v for k, v in env.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "CMSIS_NN_PATH")}
    bins = []
    for name, extra in (("plain", ["CCACHE="]), ("miss", []), ("hit", [])):
        p = copy_project(generated(MODEL_A).out, tmp_path / name)
        r = subprocess.run(["make", "-C", str(p), "-j2", "TARGET=qemu-m4", "V=1", *extra], capture_output=True,
                           text=True, env=env)
        assert r.returncode == 0, r.stderr[-2000:]
        assert ("ccache " in r.stdout) == (name != "plain"), r.stdout[-2000:]
        bins.append((p / "build" / "qemu-m4" / "pockmcu_model.bin").read_bytes())
    assert bins[0] == bins[1] == bins[2]
    stats = subprocess.run(["ccache", "--print-stats"], capture_output=True, text=True, env=env).stdout
    hits = {k: int(v) for k, v in (ln.split("\t")[:2] for ln in stats.splitlines() if "\t" in ln) if v.isdigit()}
    assert hits.get("direct_cache_hit", 0) + hits.get("preprocessed_cache_hit", 0) > 100, stats
    mk = (tmp_path / "hit" / "Makefile").read_text()
    assert "-fdebug-prefix-map=$(CURDIR)=." in mk
