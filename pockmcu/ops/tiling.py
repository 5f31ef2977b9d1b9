"""TILE_CROP and TILE_PASTE: the glue of streamed execution (pockmcu/stream.py).

A streamed stage runs its layers tile by tile. TILE_CROP copies the region a
tile needs out of a whole NHWC tensor (or out of a larger tile); TILE_PASTE
writes a finished tile of the stage's output into the whole output tensor.
The first paste of a stage (``fresh``) starts the output tensor; each later
one writes into it in place, so the planner sees one buffer that is live from
the first tile to the stage's last consumer. Both only move bytes, row by row.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..ccode import Call, Emission, Ptr
from ..ir import Graph, Op
from .base import OpDef, register


def _rows(t) -> tuple[int, int]:
    """(row bytes, pixel bytes) of an NHWC int8 tensor."""
    return t.shape[2] * t.shape[3], t.shape[3]


@dataclass(frozen=True)
class TileOrigin:
    """Where a tile sits in the larger tensor: its first row and column."""

    origin: tuple[int, int]


@register
class TileCrop(OpDef):
    """y = x[:, r0:r0+h, c0:c0+w, :] with (r0, c0) = options.origin and (h, w) from y's shape."""

    kind = "TILE_CROP"
    Options = TileOrigin
    kernel = "pockmcu_slice_s8"

    def reference(self, g: Graph, op: Op, xs, rt=None):
        r0, c0 = op.options.origin
        _, h, w, _ = g.t(op.outputs[0]).shape
        return [np.ascontiguousarray(xs[0][:, r0:r0 + h, c0:c0 + w, :])]

    def describe(self, g: Graph, op: Op) -> str:
        y = g.t(op.outputs[0])
        r0, c0 = op.options.origin
        return (f"TILE_CROP rows {r0}..{r0 + y.shape[1] - 1}, columns {c0}..{c0 + y.shape[2] - 1} of "
                f"{list(g.t(op.inputs[0]).shape)}")

    def emit(self, g: Graph, op: Op, cg) -> Emission:
        """Rows of the tile's width copied from the first row of the region (the offset is written
        even when 0)."""
        x, y = g.t(op.inputs[0]), g.t(op.outputs[0])
        row, px = _rows(x)
        r0, c0 = op.options.origin
        return Emission(calls=(Call(cg.kernel(op).function, (
            Ptr(x.name, str(r0 * row)), y.shape[1], row, c0 * px, y.shape[2] * px, Ptr(y.name))),))


class _Paste(OpDef):
    """out[:, r0:r0+h, c0:c0+w, :] = tile, (r0, c0) = options.origin; the tile is the last input."""

    kernel = "pockmcu_paste_s8"

    Options = TileOrigin

    def reference(self, g: Graph, op: Op, xs, rt=None):
        y = g.t(op.outputs[0])
        tile = xs[-1]
        out = np.zeros((tile.shape[0],) + y.shape[1:], np.int8) if len(xs) == 1 else xs[0].copy()
        r0, c0 = op.options.origin
        out[:, r0:r0 + tile.shape[1], c0:c0 + tile.shape[2], :] = tile
        return [out]

    def describe(self, g: Graph, op: Op) -> str:
        t = g.t(op.inputs[-1])
        r0, c0 = op.options.origin
        return (f"TILE_PASTE {list(t.shape)} at rows {r0}..{r0 + t.shape[1] - 1}, columns "
                f"{c0}..{c0 + t.shape[2] - 1} of {list(g.t(op.outputs[0]).shape)}")

    def emit(self, g: Graph, op: Op, cg) -> Emission:
        """The tile's rows written from the first row of its region (the offset is written even
        when 0)."""
        t, y = g.t(op.inputs[-1]), g.t(op.outputs[0])
        row, px = _rows(y)
        r0, c0 = op.options.origin
        return Emission(calls=(Call(cg.kernel(op).function, (
            Ptr(t.name), t.shape[1], row, c0 * px, t.shape[2] * px, Ptr(y.name, str(r0 * row)))),))


@register
class TilePasteFresh(_Paste):
    """The first tile of a stage's output: the output tensor starts here (its other tiles follow)."""

    kind = "TILE_PASTE_FRESH"


@register
class TilePaste(_Paste):
    """Every later tile: inputs (output so far, tile), written in place."""

    kind = "TILE_PASTE"
    inplace = True
