"""How an IR tensor holds an ONNX tensor: the layout bookkeeping of the ONNX frontend.

ONNX models are NCHW; the IR (and every kernel) is NHWC. Instead of inserting
a transpose at every boundary, the frontend records for each value *how* its
IR tensor relates to the ONNX tensor it stands for, and only moves bytes when
a consumer needs another arrangement that no relabelling can give:

* ``Layout(perm)``: IR = onnx.transpose(perm). NHWC of an NCHW tensor is
  ``perm = (0, 2, 3, 1)``; the identity is the ONNX layout itself. A
  ``Transpose`` node only changes ``perm`` (tf2onnx's NHWC -> NCHW transpose at
  the input cancels against the NHWC the convolutions want).
* ``Layout(perm, pre)``: the ONNX value is the flatten ``X.reshape(N, -1)`` of
  a tensor X of shape ``pre``, and the IR holds ``X.transpose(perm)`` flattened.
  This is what a Flatten/Reshape of an NHWC-held NCHW tensor becomes; the
  following fully connected layer absorbs it by permuting its weight rows at
  compile time (``flat_index``), so it costs nothing at run time.

All layouts keep the batch axis first (``perm[0] == 0``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Layout:
    perm: tuple[int, ...]
    pre: tuple[int, ...] | None = None

    @staticmethod
    def identity(rank: int) -> "Layout":
        return Layout(tuple(range(rank)))

    def ir_shape(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        """Shape of the IR tensor holding an ONNX value of ``shape`` in this layout."""
        if self.pre is not None:
            return tuple(shape)
        return tuple(int(shape[p]) for p in self.perm)

    def source_shape(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        """Shape of the tensor X that is permuted (the ONNX shape, or ``pre``)."""
        return tuple(self.pre) if self.pre is not None else tuple(shape)

    def flat_index(self, shape: tuple[int, ...]) -> np.ndarray:
        """For every element of one sample in IR order, its flat index in the ONNX sample."""
        src = self.source_shape(shape)
        n = int(np.prod(src[1:], dtype=np.int64))
        return np.arange(n).reshape(src[1:]).transpose([p - 1 for p in self.perm[1:]]).reshape(-1)

    def same_bytes_as_onnx(self, shape: tuple[int, ...]) -> bool:
        """True if the IR bytes are the ONNX tensor's row-major bytes (only size-1 axes move)."""
        src = self.source_shape(shape)
        order = [p for p in self.perm if src[p] != 1]
        return order == sorted(order)

    def apply(self, data: np.ndarray) -> np.ndarray:
        """Lay out a constant of the ONNX value's shape the way the IR tensor holds it."""
        if self.pre is None:
            return np.ascontiguousarray(data.transpose(self.perm))
        x = data.reshape(self.pre).transpose(self.perm)
        return np.ascontiguousarray(x.reshape(data.shape))


NCHW_AS_NHWC = Layout((0, 2, 3, 1))


def inverse(perm) -> tuple[int, ...]:
    inv = [0] * len(perm)
    for i, p in enumerate(perm):
        inv[p] = i
    return tuple(inv)


def compose_transpose(node_perm, layout: Layout) -> Layout:
    """Layout of ``Transpose(perm=node_perm)(v)`` when v is held in ``layout`` (no bytes move)."""
    inv = inverse(node_perm)
    return Layout(tuple(inv[r] for r in layout.perm))


def relative_perm(src: Layout, dst: Layout) -> tuple[int, ...]:
    """k with IR_dst = IR_src.transpose(k), for two permutation layouts of the same value."""
    inv = inverse(src.perm)
    return tuple(inv[t] for t in dst.perm)
