"""The external parameter format: the trainable tensors as stored in RAM, back to back.

``pockmcu_params_read`` / ``pockmcu_params_write``, P.bin (--save-params), the board's
READ/WRITE_PARAMS and its checkpoints all carry the RAM contents. A tensor is stored whole,
except a split CONV_2D weight (TrainGraph.head_channels): only its trained channels, a
``(O, KH, KW, k)`` array, rows of ``head`` = k values for the ``row`` = C_in of the full tensor.
The full tensor is the original constant with the first k values of every row replaced.

``entries`` describes the layout (written to plan.json ``training.trainable``); ``expand``
turns raw parameter bytes back into full tensors and ``pack`` does the opposite.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from ..errors import PockError


def entries(tg, names=None) -> list[dict]:
    """One layout entry per trainable tensor of TrainGraph ``tg``, in pockmcu_params_read order:
    tensor, dtype, shape (full), stored_shape, bytes (stored), row / head (C_in and k of a split
    tensor, else None), trainable_elements. ``names(t)`` (codegen's RAM array name) adds ``c``."""
    out = []
    for t in tg.trainable_tensors:
        tensor = tg.graph.t(t)
        k = tg.head_channels(t)
        e = dict(tensor=t, **({"c": names(t)} if names is not None else {}), dtype=tensor.dtype,
                 shape=list(tensor.shape), stored_shape=list(tg.stored_shape(t)), bytes=tg.stored_bytes(t),
                 row=int(tensor.shape[-1]) if k else None, head=k or None, trainable_elements=tg.state_elements(t))
        out.append(e)
    return out


def _split(entry_list: Sequence[Mapping], raw: bytes | Sequence[bytes]) -> list[bytes]:
    if isinstance(raw, (bytes, bytearray, memoryview)):
        raw = bytes(raw)
        parts, pos = [], 0
        for e in entry_list:
            parts.append(raw[pos:pos + e["bytes"]])
            pos += e["bytes"]
        if pos != len(raw):
            raise PockError(f"parameters: {len(raw)} bytes, the layout needs {pos}")
        return parts
    parts = [bytes(p) for p in raw]
    if [len(p) for p in parts] != [e["bytes"] for e in entry_list]:
        raise PockError("parameters: tensor sizes do not match the layout")
    return parts


def expand(entry_list: Sequence[Mapping], raw: bytes | Sequence[bytes],
           originals: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Full tensors from raw parameter bytes (all back to back, or one bytes per tensor).

    A whole tensor is its bytes; a split one is ``originals[tensor]`` (the original constant,
    full shape) with the first ``head`` values of every row of ``row`` replaced by the stored
    rows. ``originals`` needs only the split tensors."""
    out = {}
    for e, data in zip(entry_list, _split(entry_list, raw)):
        dt = np.dtype(e["dtype"])
        stored = np.frombuffer(data, dt).reshape(e["stored_shape"])
        if not e.get("head"):
            out[e["tensor"]] = stored.reshape(e["shape"]).copy()
            continue
        full = np.array(originals[e["tensor"]], dtype=dt).reshape(-1, e["row"])
        full[:, :e["head"]] = stored.reshape(-1, e["head"])
        out[e["tensor"]] = full.reshape(e["shape"])
    return out


def pack(entry_list: Sequence[Mapping], tensors: Mapping[str, np.ndarray]) -> bytes:
    """Raw parameter bytes (pockmcu_params_read layout) from full tensors: the stored part of each."""
    parts = []
    for e in entry_list:
        a = np.ascontiguousarray(np.asarray(tensors[e["tensor"]], np.dtype(e["dtype"])).reshape(e["shape"]))
        if e.get("head"):
            a = np.ascontiguousarray(a.reshape(-1, e["row"])[:, :e["head"]])
        parts.append(a.tobytes())
    return b"".join(parts)
