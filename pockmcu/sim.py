"""Host simulation: the generated C compiled for this machine and called through cffi.

    m = pockmcu.sim.load("out/")
    y = m.invoke(x)          # x: [N, *input_shape[1:]] in the model's input dtype

Models loaded from the same OUT share one library and so one arena and one set of
parameters; ``load`` runs ``pockmcu_init()``, which for a --train build restores the
initial parameters.

The library is built by OUT/Makefile (``make host``, the kernels linked from the
build cache) and copied to a file named after its contents before loading, so a
rebuilt OUT is never served by a stale library that the process already loaded.
The cffi declarations are OUT/model.h itself, preprocessed (``pockmcu.cdecl``).
"""

from __future__ import annotations

import hashlib
import json
import shutil
import tempfile
from pathlib import Path

import cffi
import numpy as np

from .build import build_host_lib
from .cdecl import c_declarations
from .errors import PockError


def model_cdef(out: str | Path) -> str:
    """The cffi declarations of OUT/model.h (the inference API, and the training API of a --train build)."""
    out = Path(out)
    return c_declarations(out / "model.h", include_dirs=[out, out / "kernels"])

_LOADED: dict[str, object] = {}


def read_plan(out: str | Path) -> dict:
    p = Path(out) / "plan.json"
    if not p.is_file():
        raise PockError(f"{out}: not a pockmcu output directory (no plan.json); run 'pockmcu gen MODEL -o {out}' first")
    return json.loads(p.read_text())


def check_batch(x: np.ndarray, spec: dict, what: str = "input") -> np.ndarray:
    """Validate [N, *shape[1:]] in the model's dtype; a single sample of the full shape is accepted too."""
    shape, dtype = tuple(spec["shape"]), np.dtype(spec["dtype"])
    x = np.asarray(x)
    if x.dtype != dtype:
        raise PockError(f"{what} has dtype {x.dtype}, the model takes {dtype}; convert it (e.g. x.astype(np.{dtype}))")
    if x.shape == shape and shape[:1] == (1,):
        return x
    if x.ndim == len(shape) and x.shape[1:] == shape[1:]:
        return x
    raise PockError(f"{what} has shape {list(x.shape)}, expected [N, {', '.join(map(str, shape[1:]))}] "
                    f"(N samples of the model input {list(shape)})")


def sample_shape(shape) -> tuple[int, ...]:
    """One sample of a model output: its shape without the unit batch axis; an output whose first axis
    is not 1 (an op moved the batch axis, or a rank-1 output) is one sample of its full shape."""
    shape = tuple(int(d) for d in shape)
    return shape[1:] if shape[:1] == (1,) else shape


class Model:
    def __init__(self, out: str | Path):
        self.out = Path(out)
        self.plan = read_plan(out)
        built = build_host_lib(self.out)
        digest = hashlib.sha256(built.read_bytes()).hexdigest()[:16]
        if digest not in _LOADED:
            cache = Path(tempfile.gettempdir()) / "pockmcu-sim"
            cache.mkdir(exist_ok=True)
            lib_path = cache / f"libpockmcu_{digest}.so"
            if not lib_path.exists():
                shutil.copyfile(built, lib_path)
            ffi = cffi.FFI()
            ffi.cdef(model_cdef(self.out))
            _LOADED[digest] = (ffi, ffi.dlopen(str(lib_path)))
        self.ffi, self.lib = _LOADED[digest]
        rc = self.lib.pockmcu_init()
        if rc != 0:
            what = f"training step {rc - 1000}" if rc >= 1000 else f"op {rc - 1}"
            raise PockError(f"{out}: pockmcu_init() failed with {rc} (the scratch buffer of {what} is too small)")
        self.inputs, self.outputs = self.plan["inputs"], self.plan["outputs"]

    def invoke(self, *xs: np.ndarray) -> np.ndarray | list[np.ndarray]:
        """Run N samples; returns one array [N, *out_shape[1:]] per output (a single array for one output)."""
        if len(xs) != len(self.inputs):
            raise PockError(f"the model takes {len(self.inputs)} input(s), got {len(xs)}")
        xs = [check_batch(x, spec, f"input {k}") for k, (x, spec) in enumerate(zip(xs, self.inputs))]
        n = xs[0].shape[0]
        if any(x.shape[0] != n for x in xs):
            raise PockError("all inputs must hold the same number of samples")
        outs = [np.empty((n,) + sample_shape(s["shape"]), np.dtype(s["dtype"])) for s in self.outputs]
        for i in range(n):
            for k, x in enumerate(xs):
                sample = np.ascontiguousarray(x[i])
                self.ffi.memmove(self.lib.pockmcu_input(k), sample.tobytes(), sample.nbytes)
            rc = self.lib.pockmcu_invoke()
            if rc != 0:
                raise PockError(f"pockmcu_invoke() failed at op {rc - 1} on sample {i}")
            for k, o in enumerate(outs):
                nbytes = self.lib.pockmcu_output_bytes(k)
                buf = self.ffi.buffer(self.lib.pockmcu_output(k), nbytes)
                o[i] = np.frombuffer(bytes(buf), o.dtype).reshape(o.shape[1:])
        return outs[0] if len(outs) == 1 else outs


def load(out: str | Path) -> Model:
    return Model(out)
