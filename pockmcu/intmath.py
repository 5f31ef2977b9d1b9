"""Small integer helpers shared by the TFLite Micro numerics (fixedpoint) and the onnxruntime
numerics (fixedpoint_ort): int64 views, int32 wrap-around, and scalar-in / scalar-out results."""

from __future__ import annotations

import numpy as np


def i64(x) -> np.ndarray:
    """x as an int64 array."""
    return np.asarray(x, dtype=np.int64)


def wrap32(x) -> np.ndarray:
    """Two's complement wrap of int64 values to the int32 range (as int64)."""
    x = i64(x)
    return ((x + (1 << 31)) & 0xFFFFFFFF) - (1 << 31)


def as_result(v, like_scalar: bool):
    """v as an int64 array, or as a Python int when the arguments were all scalars."""
    v = np.asarray(v, dtype=np.int64)
    return int(v) if like_scalar else v


def is_scalar(*args) -> bool:
    """True when every argument is a scalar (0-d)."""
    return all(np.ndim(a) == 0 for a in args)
