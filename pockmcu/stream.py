"""Streamed early layers: run the first, high-resolution stage of a network tile by tile.

The first layers of an image model hold the largest activations (MobileNetV2 at
128x128: a 64x64x48 expansion, 192 KB) although no gradient ever flows there.
This pass picks a stage -- a run of consecutive ops with one tensor coming in
(``source``) and one going out (``sink``), every op spatial (``OpDef.window``)
-- splits the sink into a grid of tiles and, for each tile, runs every layer of
the stage on just the region that tile needs (its receptive field, halo
included), as MCUNetV2's patch-based inference does. The whole intermediate
tensors never exist: each tile's are small and die within the tile.

Each tile of each layer is an ordinary op of the graph (a copy of the layer with
tile-sized tensors and the tile's padding: padding applies only where the tile
touches the real image border), joined by TILE_CROP (the region a tile needs out
of a larger tensor) and TILE_PASTE (the finished tile into the sink). So the
reference, the planner, training and code generation need nothing special, and
every output element is computed by the same arithmetic from the same inputs as
without streaming: the result is byte-identical (tests/test_stream.py). The cost
is the recomputed halo (reported as extra MACs).

``choose_stream`` evaluates every valid stage (start, end) and tile grid by the
peak of live bytes of the resulting schedule; ``--stream auto`` (default) keeps
the lowest peak that costs at most 50% more MACs and 100 more kernel calls (the
tiles are unrolled in the generated C) when it lowers the peak by 10% or more;
``--stream max`` the lowest peak whatever it costs; ``--stream off`` never
streams.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from .ir import Graph, Op, Tensor, Tile
from .lifetimes import lifetimes, live_bytes
from .ops import opdef
from .ops.base import make_op

#: tile grids tried (rows x columns of the sink); bands (n x 1) stream whole rows
GRIDS = ((2, 2), (3, 3), (4, 4), (6, 6), (8, 8), (2, 1), (4, 1), (8, 1), (16, 1))

#: candidates whose peak is within this fraction of the lowest compete on MACs (fewest wins)
SLACK = 0.05

Region = tuple[int, int, int, int]      # rows [r0, r1), columns [c0, c1)


@dataclass
class Stream:
    """A chosen stage and grid, with what it does to the peak and the work."""

    ops: list[str]                       # names of the stage's layers (original graph)
    source: str
    sink: str
    grid: tuple[int, int]
    peak_before: int
    peak_after: int
    macs_before: int
    macs_after: int
    tiles: list[Region] = field(default_factory=list)

    def summary(self) -> dict:
        return dict(layers=self.ops, source=self.source, sink=self.sink, grid=list(self.grid),
                    peak_bytes_before=self.peak_before, peak_bytes_after=self.peak_after,
                    macs_before=self.macs_before, macs_after=self.macs_after)

    def describe(self) -> str:
        extra = self.macs_after / self.macs_before - 1 if self.macs_before else 0.0
        return (f"streamed {len(self.ops)} layers ({self.ops[0]} .. {self.ops[-1]}) in "
                f"{self.grid[0]}x{self.grid[1]} tiles: peak {self.peak_before} -> {self.peak_after} bytes, "
                f"{extra:+.1%} MACs")


# -- geometry ---------------------------------------------------------------------------------

def _splits(n: int, parts: int) -> list[tuple[int, int]]:
    edges = [round(k * n / parts) for k in range(parts + 1)]
    return [(a, b) for a, b in zip(edges, edges[1:]) if b > a]


def tile_regions(shape, grid: tuple[int, int]) -> list[Region]:
    _, h, w, _ = shape
    return [(r0, r1, c0, c1) for r0, r1 in _splits(h, grid[0]) for c0, c1 in _splits(w, grid[1])]


def _needed(out: Region, win, in_hw) -> Region:
    """The input region an output region reads (clipped to the tensor)."""
    box = []
    for axis in range(2):
        o0, o1 = out[2 * axis], out[2 * axis + 1]
        k, s, d, pad = win.size[axis], win.stride[axis], win.dilation[axis], win.pads[axis]
        lo = o0 * s - pad
        hi = (o1 - 1) * s - pad + (k - 1) * d + 1
        box += [max(lo, 0), min(hi, in_hw[axis])]
    return tuple(box)


def _tile_pads(out: Region, have: Region, win) -> tuple[int, int, int, int]:
    """Padding of a layer run on input tile ``have`` for output region ``out`` (tile coordinates)."""
    pads = []
    for axis in range(2):
        o0, o1 = out[2 * axis], out[2 * axis + 1]
        k, s, d, pad = win.size[axis], win.stride[axis], win.dilation[axis], win.pads[axis]
        first = pad + have[2 * axis] - o0 * s                 # rows of padding before the tile
        end = (o1 - 1) * s - pad + (k - 1) * d + 1            # one past the last row read (image coords)
        pads.append((first, max(end - have[2 * axis + 1], 0)))
    return (pads[0][0], pads[1][0], pads[0][1], pads[1][1])


def _union(a: Region | None, b: Region) -> Region:
    if a is None:
        return b
    return (min(a[0], b[0]), max(a[1], b[1]), min(a[2], b[2]), max(a[3], b[3]))


# -- stages -----------------------------------------------------------------------------------

@dataclass
class _Stage:
    start: int
    end: int
    source: str
    sink: str


def _is_tile_tensor(t: Tensor) -> bool:
    return not t.is_const and t.dtype == "int8" and len(t.shape) == 4 and t.shape[0] == 1


def stages(g: Graph, limit: int | None = None) -> list[_Stage]:
    """Every run ops[start:end] (end <= limit) of spatial ops with one tensor in and one out."""
    ops = g.ops
    limit = len(ops) if limit is None else limit
    windows = [opdef(op.kind).window(g, op) for op in ops]
    used_after: dict[str, int] = {}
    for k, op in enumerate(ops):
        for t in op.inputs:
            if t:
                used_after[t] = k
    outputs = set(g.outputs)
    found = []
    for start in range(limit):
        if windows[start] is None or (start > 0 and windows[start - 1] is not None):
            continue
        produced: list[str] = []
        external: set[str] = set()
        for end in range(start + 1, limit + 1):
            op = ops[end - 1]
            if windows[end - 1] is None or not all(_is_tile_tensor(g.t(t)) for t in op.outputs):
                break
            acts = opdef(op.kind).activation_inputs(g, op)
            if not all(_is_tile_tensor(g.t(t)) for t in acts):
                break
            external |= {t for t in acts if t not in produced}
            produced += op.outputs
            if end - start < 2 or len(external) != 1:
                continue
            live_out = [t for t in produced if used_after.get(t, -1) >= end or t in outputs]
            if len(live_out) == 1 and live_out[0] not in outputs:
                found.append(_Stage(start, end, next(iter(external)), live_out[0]))
    return found


def apply_stream(g: Graph, st: _Stage, grid: tuple[int, int]) -> tuple[Graph, list[Region]]:
    """A new graph (sharing unchanged tensors and ops) with ops[start:end] run tile by tile."""
    layers = g.ops[st.start:st.end]
    sink = g.t(st.sink)
    tiles = tile_regions(sink.shape, grid)
    tensors = dict(g.tensors)
    new_ops: list[Op] = []

    def tile_tensor(of: str, name: str, region: Region) -> str:
        t = g.t(of)
        tensors[name] = Tensor(name=name, shape=(1, region[1] - region[0], region[3] - region[2], t.shape[3]),
                               dtype=t.dtype, quant=t.quant)
        return name

    windows = {op.name: opdef(op.kind).window(g, op) for op in layers}
    acts = {op.name: opdef(op.kind).activation_inputs(g, op) for op in layers}
    prev = st.sink
    for k, out_region in enumerate(tiles):
        # what each tensor of the stage must hold for this tile (receptive field, walking back)
        regions: dict[str, Region] = {st.sink: out_region}
        for op in reversed(layers):
            r = regions.get(op.outputs[0])
            if r is None:
                continue
            win = windows[op.name]
            for x in acts[op.name]:
                regions[x] = _union(regions.get(x), _needed(r, win, g.t(x).shape[1:3]))
        have: dict[str, tuple[str, Region]] = {}
        src_shape = g.t(st.source).shape
        have[st.source] = (st.source, (0, src_shape[1], 0, src_shape[2]))
        for op in layers:
            r = regions.get(op.outputs[0])
            if r is None:
                continue
            win = windows[op.name]
            inputs = []
            pads = None
            for x in op.inputs:
                if not x or g.t(x).is_const:
                    inputs.append(x)
                    continue
                need = _needed(r, win, g.t(x).shape[1:3])
                name, region = have[x]
                if region != need:
                    crop = tile_tensor(x, f"{x}/tile{k}_in_{op.name}", need)
                    new_ops.append(make_op("TILE_CROP", f"{op.name}_tile{k}_crop", [name], [crop],
                                           f"streamed {op.location}", origin=(need[0] - region[0], need[2] - region[2])))
                    name = crop
                inputs.append(name)
                pads = _tile_pads(r, need, win)
            y = op.outputs[0]
            out = tile_tensor(y, f"{y}/tile{k}", r)
            # the copy keeps the layer's prepared constants; only its padding is the tile's
            tiled = replace(op, name=f"{op.name}_tile{k}", inputs=inputs, outputs=[out],
                            location=f"{op.location}, tile {k + 1} of {len(tiles)}", tile=Tile(op.name, k))
            if not win.pointwise:
                tiled.prepared = replace(op.prepared, pads=pads)
            new_ops.append(tiled)
            have[y] = (out, r)
        tile, r = have[st.sink]
        last = k == len(tiles) - 1
        part = st.sink if last else f"{st.sink}/part{k}"
        if not last:
            tensors[part] = Tensor(name=part, shape=sink.shape, dtype=sink.dtype, quant=sink.quant)
        if k == 0:
            paste = make_op("TILE_PASTE_FRESH", f"{st.sink.split('/')[0]}_paste{k}", [tile], [part],
                            "streamed stage output", origin=(r[0], r[2]))
        else:
            paste = make_op("TILE_PASTE", f"{st.sink.split('/')[0]}_paste{k}", [prev, tile], [part],
                            "streamed stage output", origin=(r[0], r[2]))
        new_ops.append(paste)
        prev = part
    internal = {t for op in layers for t in op.outputs} - {st.sink}
    for t in internal:
        tensors.pop(t, None)
    ng = replace(g, tensors=tensors, ops=g.ops[:st.start] + new_ops + g.ops[st.end:])
    return ng, tiles      # the copies keep the layers' prepared constants (they depend on no shape)


def _live(g: Graph, ops: list[Op]) -> list[int]:
    return live_bytes(lifetimes(g, ops, share=True).buffers, len(ops))


def macs(g: Graph) -> int:
    return sum(opdef(op.kind).macs(g, op) for op in g.ops)


#: ``auto`` streams only when the peak drops by at least this fraction ...
AUTO_MIN_GAIN = 0.10
#: ... for at most this fraction of extra MACs ...
AUTO_MAX_EXTRA_MACS = 0.50
#: ... and at most this many extra kernel calls: the tiles are unrolled in the generated C, each
#: call about 170 bytes of flash on Cortex-M4 (``max`` has neither limit)
AUTO_MAX_EXTRA_OPS = 100
MODES = ("auto", "max", "off")

def all_candidates(g: Graph, grids=GRIDS) -> list[tuple[_Stage, tuple[int, int], int, int, int]]:
    """Every (stage, grid) with the peak of live bytes of its inference schedule, its MACs and its
    number of ops. The compiler computes it once per loaded graph and passes it to
    ``choose_stream`` (the update search compiles one graph many times)."""
    out = []
    for st in stages(g):
        sink = g.t(st.sink)
        for grid in grids:
            if grid[0] > sink.shape[1] or grid[1] > sink.shape[2]:
                continue
            ng, _ = apply_stream(g, st, grid)
            out.append((st, grid, max(_live(ng, ng.ops)), macs(ng), len(ng.ops)))
    return out


def choose_stream(g: Graph, mode: str = "auto", limit: int | None = None, floor=None, candidates=None
                  ) -> tuple[Graph, Stream | None]:
    """The graph with the chosen stage and grid run tile by tile (or ``g`` and None).

    ``mode``: ``max`` takes the lowest peak (among candidates within ``SLACK`` of it, the fewest
    MACs); ``auto`` the lowest peak among candidates costing at most ``AUTO_MAX_EXTRA_MACS`` more
    MACs, and only when it lowers the peak by ``AUTO_MIN_GAIN`` or more; ``off`` never streams.
    ``limit``: stages end at or before op ``limit`` (training: before the first op that trains).
    ``floor(end)``: bytes live elsewhere that streaming cannot lower (training: the peak of the
    training schedule after a stage ending at op ``end``); default 0. ``candidates``: the result
    of ``all_candidates(g)`` when the caller has it.
    """
    if mode == "off":
        return g, None
    limit = len(g.ops) if limit is None else limit
    base_macs = macs(g)
    base = max(max(_live(g, g.ops)), floor(len(g.ops)) if floor else 0)
    found = []
    for st, grid, peak, m, n_ops in (all_candidates(g) if candidates is None else candidates):
        if st.end > limit:
            continue
        peak = max(peak, floor(st.end) if floor else 0)
        if mode == "auto" and (m > base_macs * (1 + AUTO_MAX_EXTRA_MACS) or n_ops - len(g.ops) > AUTO_MAX_EXTRA_OPS):
            continue
        found.append((peak, m, st, grid))
    if not found:
        return g, None
    lowest = min(f[0] for f in found)
    need = base * (1 - AUTO_MIN_GAIN) if mode == "auto" else base - 1
    if lowest > need:
        return g, None
    peak, m, st, grid = min((f for f in found if f[0] <= lowest * (1 + SLACK)), key=lambda f: (f[1], f[0]))
    ng, tiles = apply_stream(g, st, grid)
    return ng, Stream(ops=[op.name for op in g.ops[st.start:st.end]], source=st.source, sink=st.sink, grid=grid,
                      peak_before=base, peak_after=peak, macs_before=base_macs, macs_after=m, tiles=tiles)
