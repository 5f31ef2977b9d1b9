"""`pockmcu export`: the original TFLite file with the trained parameters written into it.

Trained int8 weights and int32 biases keep their size, so each tensor's bytes
are replaced in place inside the flatbuffer; everything else (graph,
quantization, metadata) stays byte for byte the original. A split-stored
CONV_2D weight (only its trained input channels in P.bin) is merged with the
original values by pockmcu.training.params.expand: only the first k values of
every filter tap change.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import numpy as np
import tflite

from .errors import PockError
from .frontend.tflite import clean_name, unique_name
from .sim import read_plan
from .train import read_params
from .training.params import expand


def _buffer_spans(model_bytes: bytes) -> dict[str, tuple[int, int]]:
    """Tensor name -> (offset, length) of its constant data inside the file."""
    m = tflite.Model.GetRootAs(model_bytes, 0)
    sg = m.Subgraphs(0)
    spans, used = {}, set()
    for i in range(sg.TensorsLength()):
        t = sg.Tensors(i)
        raw = t.Name()
        # the frontend's names: cleaned, cut at MAX_NAME characters, duplicates numbered
        name = unique_name(clean_name(raw) if raw else f"tensor_{i}", used)
        b = m.Buffers(t.Buffer())
        if b is None or b.DataIsNone() or b.DataLength() == 0:
            continue
        # the vector's first byte: the table's data field holds the offset of a length-prefixed vector
        start = b._tab.Vector(b._tab.Offset(4))
        spans[name] = (start, b.DataLength())
    return spans


def export_tflite(out, params_path, dest) -> int:
    plan = read_plan(out)
    if not plan.get("training"):
        raise PockError(f"{out}: generated without --train; nothing to export")
    if plan["format"] != "tflite":
        raise PockError(f"{out}: export writes .tflite and the model is {plan['format']}")
    source = Path(out) / plan["model_file"]
    if not source.is_file():
        raise PockError(f"{out}: {plan['model_file']} (the copy of the original model) is missing; run gen again")
    tensors = read_params(params_path)
    layout = plan["training"]["trainable"]
    expected = [(t["tensor"], t["bytes"]) for t in layout]
    if [(n, len(d)) for n, _, d in tensors] != expected:
        raise PockError(f"--params {params_path}: written for another model or update spec than {out}")
    if not all("stored_shape" in e for e in layout):
        raise PockError(f"{out}: plan.json was written by an older pockmcu (no parameter layout); run gen again")
    data = bytearray(source.read_bytes())
    spans = _buffer_spans(bytes(data))
    originals = {}
    for e in layout:
        dt = np.dtype(e["dtype"])
        want = int(np.prod(e["shape"])) * dt.itemsize
        if e["tensor"] not in spans or spans[e["tensor"]][1] != want:
            raise PockError(f"{source}: tensor '{e['tensor']}' not found with {want} bytes")
        off, n = spans[e["tensor"]]
        originals[e["tensor"]] = np.frombuffer(bytes(data[off:off + n]), dt)
    trained = expand(layout, [d for _, _, d in tensors], originals)   # full tensors, heads merged
    for e in layout:
        off, n = spans[e["tensor"]]
        data[off:off + n] = trained[e["tensor"]].tobytes()
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{dest.name}.", dir=dest.parent)
    with os.fdopen(fd, "wb") as f:
        f.write(bytes(data))
    os.replace(tmp, dest)
    return len(tensors)

