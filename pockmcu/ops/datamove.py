"""Shape and data movement: operators that only re-index int8 bytes, and their gradients.

Every operator here is exact by construction (it copies bytes; no arithmetic touches a value), so its
TFLite Micro semantics are about *which* bytes go where: the TFLM Prepare/Eval logic is followed for
bounds, masks and clamping (STRIDED_SLICE), and the compile-time constants of each op are read from its
constant operands at parse time and kept in its options (perm, begin/size, axis, multiples, indices), as
the ONNX frontend does: no dead constant reaches weights.c.

Most of these operators are affine re-indexings: output element i reads input element
``offset + sum_k i_k * stride_k`` over an index grid. ``Move`` describes one such copy from one tensor
into another; ``CopyOp.moves`` lists an op's moves (one per SPLIT output, one per PACK input, ...), and
the C is one ``pockmcu_strided_copy_s8`` call per move, with axes that are contiguous in both tensors
merged at compile time (a slice of whole rows is one memcpy per row). GATHER (rows picked by constant
indices) has its own kernel. FILL and ZEROS_LIKE only fold (their outputs are constants).

Gradients (float32 with respect to real values; input and output share one quantization, so the real
values move exactly as the bytes do): the input gradient of a copy is the same grid with the input and
output index maps swapped (``DATA_MOVE_GRAD``): TRANSPOSE's goes back through the inverse permutation,
SPLIT's is a concatenation, CONCATENATION's / PACK's a split, SLICE's a zero-padded paste (the untouched
elements get 0), TILE's a sum over the repeats (``pockmcu_strided_add_f32``, in grid order); GATHER's is
a scatter-add (``GATHER_GRAD``).

The numpy references run sample by sample on tensors of the model's own shape (``per_sample``), so an
op may move the model's batch axis (TRANSPOSE [1, 0, 2], UNPACK along 0, ...).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..ccode import Array, Call, Emission, Local, Ptr
from ..ir import Graph, Op, Tensor
from .base import REGISTRY, OpDef, register

#: the kernels' POCKMCU_STRIDED_MAX_RANK
MAX_GRID_RANK = 12
#: the largest tensor rank these operators take (TFLite Micro: TRANSPOSE, SLICE 5; STRIDED_SLICE 4)
MAX_RANK = 6
F32 = np.float32


# -- affine copies -----------------------------------------------------------------------------------

def contiguous_strides(shape) -> tuple[int, ...]:
    """Row-major element strides of a tensor of ``shape``."""
    strides, step = [], 1
    for d in reversed([int(s) for s in shape]):
        strides.append(step)
        step *= d
    return tuple(reversed(strides))


@dataclass(frozen=True)
class Move:
    """One affine copy: over the index grid ``shape`` (row-major), element i of the grid goes from
    ``src[src_offset + sum i_k src_strides[k]]`` to ``dst[dst_offset + sum i_k dst_strides[k]]``."""

    src: str
    dst: str
    shape: tuple[int, ...]
    src_strides: tuple[int, ...]
    dst_strides: tuple[int, ...]
    src_offset: int = 0
    dst_offset: int = 0

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    def simplified(self) -> "Move":
        """The same copy on the fewest axes: size-1 axes dropped, neighbours that are contiguous in
        both tensors merged (the kernel's innermost row then is as long as it can be)."""
        axes = [(d, s, t) for d, s, t in zip(self.shape, self.src_strides, self.dst_strides) if d != 1]
        if any(d == 0 for d, _, _ in axes):
            axes = [(0, 1, 1)]
        merged: list[tuple[int, int, int]] = []
        for d, s, t in axes:
            if merged and merged[-1][1] == s * d and merged[-1][2] == t * d:
                pd, _, _ = merged.pop()
                merged.append((pd * d, s, t))
            else:
                merged.append((d, s, t))
        merged = merged or [(1, 1, 1)]
        return Move(self.src, self.dst, tuple(m[0] for m in merged), tuple(m[1] for m in merged),
                    tuple(m[2] for m in merged), self.src_offset, self.dst_offset)

    def indices(self) -> tuple[np.ndarray, np.ndarray]:
        """Flat (source, destination) element indices in grid order."""
        src = np.full(self.shape, self.src_offset, np.int64)
        dst = np.full(self.shape, self.dst_offset, np.int64)
        for k, d in enumerate(self.shape):
            view = [1] * len(self.shape)
            view[k] = d
            i = np.arange(d, dtype=np.int64).reshape(view)
            src = src + i * self.src_strides[k]
            dst = dst + i * self.dst_strides[k]
        return src.reshape(-1), dst.reshape(-1)

    def swapped(self, src: str, dst: str) -> "Move":
        """The reverse copy (the gradient's): from ``src`` laid out as this move's destination into
        ``dst`` laid out as its source."""
        return Move(src, dst, self.shape, self.dst_strides, self.src_strides, self.dst_offset, self.src_offset)


def grid_dims(m: Move) -> tuple[int, ...]:
    """The kernel's ``dims`` array: grid shape, input strides, output strides."""
    return tuple(m.shape) + tuple(m.src_strides) + tuple(m.dst_strides)


def emit_moves(moves: list[Move], function: str) -> Emission:
    """One strided-copy call per move (axes merged), the ``dims`` arrays shared between equal grids."""
    arrays: dict[tuple, str] = {}
    calls = []
    for m in moves:
        s = m.simplified()
        dims = grid_dims(s)
        if dims not in arrays:
            arrays[dims] = f"grid{len(arrays)}"
        calls.append(Call(function, (Ptr(s.src, s.src_offset), len(s.shape), Local(arrays[dims], address=False),
                                     Ptr(s.dst, s.dst_offset)), status=True))
    decls = tuple(Array(name, "int32_t", dims) for dims, name in arrays.items())
    return Emission(calls=tuple(calls), decls=decls)


# -- references sample by sample ---------------------------------------------------------------------

def per_sample(g: Graph, op: Op, xs: list[np.ndarray], fn) -> list[np.ndarray]:
    """Run ``fn`` (every input of the op at the model's shape, constants as their data, absent ones as
    None -> one array per output at the model's shape) on each sample of the activation inputs ``xs``
    ([N * shape[0], *shape[1:]] each, as the reference runs them)."""
    acts = iter(xs)
    ins = []
    for name in op.inputs:
        if not name:
            ins.append(None)
        elif g.t(name).is_const:
            ins.append(np.asarray(g.t(name).data))
        else:
            t = g.t(name)
            x = next(acts)
            ins.append((t, x))
    first = next((v for v in ins if isinstance(v, tuple)), None)
    if first is None:
        return [np.asarray(y) for y in fn(ins)]
    t0, x0 = first
    n = x0.size // max(t0.size, 1)
    outs: list[list[np.ndarray]] = [[] for _ in op.outputs]
    for s in range(n):
        vals = [v[1].reshape((n,) + tuple(v[0].shape))[s] if isinstance(v, tuple) else v for v in ins]
        for k, y in enumerate(fn(vals)):
            outs[k].append(np.asarray(y))
    result = []
    for k, name in enumerate(op.outputs):
        shape = g.t(name).shape
        y = np.stack(outs[k])
        result.append(y.reshape((-1,) + tuple(shape[1:])) if shape else y.reshape(-1))
    return result


def const_ints(tensors: dict, name: str) -> tuple[int, ...] | None:
    """The values of a constant integer operand, or None when it is absent or not constant."""
    if not name or name not in tensors or tensors[name].data is None:
        return None
    return tuple(int(v) for v in np.asarray(tensors[name].data).reshape(-1))


def same_quant(a: Tensor, b: Tensor) -> bool:
    qa, qb = a.quant, b.quant
    if qa is None or qb is None:
        return qa is None and qb is None
    return qa.scale.size == 1 and qb.scale.size == 1 and qa.s == qb.s and qa.zp == qb.zp


# -- the common base ---------------------------------------------------------------------------------

class DataMove(OpDef):
    """An operator that only moves int8 bytes: folded at compile time when its inputs are constants,
    checked for one shared quantization, referenced sample by sample (``sample``)."""

    io_dtypes = ("int8",)
    foldable = True
    #: the op's compile-time operands, read into its options at parse time (see ``take_operands``)
    max_rank: int = MAX_RANK

    @staticmethod
    def take_operands(op: Op, keep: int) -> None:
        """Drop the compile-time operands after the first ``keep`` inputs, once the frontend has read
        them into the options (they are then no tensors of the op: nothing of them reaches the C)."""
        del op.inputs[keep:]

    def sample(self, g: Graph, op: Op, vals: list) -> list[np.ndarray]:
        """The outputs for one sample: every input at the model's shape (constants as their data)."""
        raise NotImplementedError(self.kind)

    def reference(self, g: Graph, op: Op, xs, rt=None):
        return per_sample(g, op, xs, lambda vals: self.sample(g, op, vals))

    def fold(self, g: Graph, op: Op):
        ins = [g.t(i) for i in op.inputs if i]
        if not ins or any(t.data is None for t in ins) or self.shape_problems(g, op):
            return None
        outs = per_sample(g, op, [], lambda vals: self.sample(g, op, vals))
        return outs if len(op.outputs) > 1 else outs[0]

    def shape_problems(self, g: Graph, op: Op) -> list[str]:
        """What makes the op's options and shapes inconsistent (checked before fold and compile)."""
        return []

    def check(self, g: Graph, op: Op) -> list[str]:
        problems = super().check(g, op)
        if problems:
            return problems
        names = [i for i in op.inputs if i] + list(op.outputs)
        rank = max(len(g.t(n).shape) for n in names)
        if rank > self.max_rank:
            return [f"{self.kind} of a rank-{rank} tensor (at most {self.max_rank})"]
        problems = self.shape_problems(g, op)
        if problems:
            return problems
        y = g.t(op.outputs[0])
        for n in names:
            if g.t(n).dtype != y.dtype or not same_quant(g.t(n), y):
                return [f"'{n}' is quantized differently from '{y.name}' (a data movement keeps the scale "
                        "and zero point; TFLite Micro copies the bytes)"]
        return []


class CopyOp(DataMove):
    """A data movement that is a list of affine copies (``moves``): one strided-copy call each, and
    the swapped copies as its gradient."""

    kernel = "pockmcu_strided_copy_s8"

    def moves(self, g: Graph, op: Op) -> list[Move]:
        raise NotImplementedError(self.kind)

    def prepare(self, g: Graph, op: Op) -> tuple[Move, ...]:
        return tuple(self.moves(g, op))

    def prepared_moves(self, op: Op) -> tuple[Move, ...]:
        """The moves among the op's compile-time constants (``prepare``)."""
        return op.prepared

    def emit(self, g: Graph, op: Op, cg) -> Emission:
        return emit_moves(list(self.prepared_moves(op)), cg.kernel(op).function)

    def backward(self, tb, op: Op) -> None:
        """One DATA_MOVE_GRAD per input that needs a gradient, from the gradients of the outputs that
        have one (an output nobody differentiates contributes zeros)."""
        outs = tuple(k for k, o in enumerate(op.outputs) if o in tb.grads)
        for k, x in enumerate(op.inputs):
            if not x or tb.g.t(x).is_const or not tb.needs_grad(x) or x in op.inputs[:k]:
                continue
            dx = tb.grad_tensor(x, f"{tb.short(x)}_grad_from_{op.name}")
            tb.emit("DATA_MOVE_GRAD", f"{op.name}_grad{k}", [tb.grad(op.outputs[j]) for j in outs], [dx],
                    layer=op, input=k, grads_of=outs)
            tb.add_grad(x, dx)


# -- the gradient of a copy ------------------------------------------------------------------------------

@dataclass(frozen=True, eq=False)
class MoveGradOf:
    """DATA_MOVE_GRAD's options: the forward op, which of its inputs this is the gradient of, and which
    of its outputs the op's inputs are the gradients of (in that order)."""

    layer: Op
    input: int = 0
    grads_of: tuple[int, ...] = (0,)


@dataclass(frozen=True)
class MoveGradData:
    """The copies back into the input gradient, and whether it is zeroed first and accumulated."""

    moves: tuple[Move, ...]
    zero: bool          # some input element receives nothing: zero the gradient first
    add: bool           # some input element is read more than once forward: accumulate


@register
class DataMoveGrad(OpDef):
    """Input gradient of a CopyOp: the forward copies that read the input, with source and destination
    swapped (``pockmcu_strided_copy_f32``), zero-filled first where the forward leaves input elements
    unread, accumulated (``pockmcu_strided_add_f32``) where it reads one more than once."""

    kind = "DATA_MOVE_GRAD"
    Options = MoveGradOf
    io_dtypes = ("float32",)
    kernel = "pockmcu_strided_copy_f32"

    def variant(self, g: Graph, op: Op, cg) -> str:
        return "add" if op.prepared.add else ""

    def prepare(self, g: Graph, op: Op) -> MoveGradData:
        f, o = op.options.layer, op.options
        x = f.inputs[o.input]
        dx = op.outputs[0]
        fwd = [m for m in REGISTRY[f.kind].prepared_moves(f) if m.src == x]
        hits = np.zeros(g.t(x).size, np.int64)
        for m in fwd:
            np.add.at(hits, m.indices()[0], 1)
        grads = {f.outputs[j]: op.inputs[i] for i, j in enumerate(o.grads_of)}
        back = tuple(m.swapped(grads[m.dst], dx) for m in fwd if m.dst in grads)
        covered = np.zeros(g.t(x).size, np.int64)
        for m in back:
            np.add.at(covered, m.indices()[1], 1)
        return MoveGradData(moves=back, zero=bool((covered == 0).any()), add=bool((hits > 1).any()))

    def reference(self, g: Graph, op: Op, xs, rt=None):
        p = op.prepared
        dx_t = g.t(op.outputs[0])
        n = xs[0].size // max(g.t(op.inputs[0]).size, 1) if xs else 1
        dx = np.zeros((n, dx_t.size), F32)
        flat = {name: x.astype(F32).reshape(n, -1) for name, x in zip(op.inputs, xs)}
        for m in p.moves:
            src, dst = m.indices()
            for s in range(n):
                if p.add:
                    np.add.at(dx[s], dst, flat[m.src][s][src])
                else:
                    dx[s][dst] = flat[m.src][s][src]
        return [dx.astype(np.float64).reshape((-1,) + tuple(dx_t.shape[1:]))]

    def emit(self, g: Graph, op: Op, cg) -> Emission:
        p = op.prepared
        e = emit_moves(list(p.moves), cg.kernel(op).function)
        if not (p.zero or p.add):
            return e
        dx = g.t(op.outputs[0])
        return Emission(calls=(Call("memset", (Ptr(dx.name), 0, dx.nbytes)),) + e.calls, decls=e.decls)

    def describe(self, g: Graph, op: Op) -> str:
        return f"{op.options.layer.kind} gradient -> {list(g.t(op.outputs[0]).shape)}"


# -- the operators ---------------------------------------------------------------------------------------

def positive_axis(axis: int, rank: int) -> int:
    return axis + rank if axis < 0 else axis


@dataclass(frozen=True)
class SplitAxis:
    """SPLIT / SPLIT_V / UNPACK options: the axis (None when its operand is not a constant) and, for
    SPLIT_V, the sizes as given (one may be -1)."""

    axis: int | None = 0
    sizes: tuple[int, ...] | None = None


class _Split(CopyOp):
    """Outputs are consecutive slices of the input along ``axis``, each as the output tensor's shape."""

    def shape_problems(self, g: Graph, op: Op) -> list[str]:
        x = g.t(op.inputs[0])
        a = op.options.axis
        if a is None:
            return [f"{self.kind} with a non-constant axis"]
        if not 0 <= a < len(x.shape):
            return [f"axis {a} is outside the {len(x.shape)} axes of '{x.name}'"]
        outs = [g.t(o) for o in op.outputs]
        for y in outs:
            if len(y.shape) != len(x.shape) or any(y.shape[k] != x.shape[k] for k in range(len(x.shape)) if k != a):
                return [f"output {list(y.shape)} is not a slice of {list(x.shape)} along axis {a}"]
        if sum(y.shape[a] for y in outs) != x.shape[a]:
            return [f"outputs along axis {a} ({[y.shape[a] for y in outs]}) do not add up to {x.shape[a]}"]
        return []

    def sample(self, g, op, vals):
        x = vals[0]
        a = op.options.axis
        cuts = np.cumsum([g.t(o).shape[a] for o in op.outputs])[:-1]
        return np.split(x, cuts, axis=a)

    def moves(self, g, op):
        x = g.t(op.inputs[0])
        a = op.options.axis
        xs = contiguous_strides(x.shape)
        moves, start = [], 0
        for o in op.outputs:
            y = g.t(o)
            moves.append(Move(x.name, o, tuple(y.shape), xs, contiguous_strides(y.shape), start * xs[a], 0))
            start += y.shape[a]
        return moves


@register
class Split(_Split):
    """SPLIT: inputs (axis, input), num_splits equal parts."""

    kind = "SPLIT"
    tflite_ops = ("SPLIT",)
    Options = SplitAxis

    def parse_tflite(self, o, op: Op, tensors) -> SplitAxis:
        axis = const_ints(tensors, op.inputs[0])
        x = op.inputs[1]
        op.inputs[:] = [x]
        return SplitAxis(axis=positive_axis(axis[0], len(tensors[x].shape)) if axis else None)


@register
class SplitV(_Split):
    """SPLIT_V: inputs (input, size_splits, axis); the output tensors' shapes give the sizes."""

    kind = "SPLIT_V"
    tflite_ops = ("SPLIT_V",)
    Options = SplitAxis

    def parse_tflite(self, o, op: Op, tensors) -> SplitAxis:
        axis = const_ints(tensors, op.inputs[2]) if len(op.inputs) > 2 else None
        sizes = const_ints(tensors, op.inputs[1])
        rank = len(tensors[op.inputs[0]].shape)
        self.take_operands(op, 1)
        return SplitAxis(axis=positive_axis(axis[0], rank) if axis else None, sizes=sizes)


@register
class Unpack(CopyOp):
    """UNPACK: output j is input[..., j, ...] along ``axis`` (the axis removed)."""

    kind = "UNPACK"
    tflite_ops = ("UNPACK",)
    tflite_options = "UnpackOptions"
    Options = SplitAxis

    def parse_tflite(self, o, op: Op, tensors) -> SplitAxis:
        rank = len(tensors[op.inputs[0]].shape)
        return SplitAxis(axis=positive_axis(int(o.Axis()) if o else 0, rank))

    def shape_problems(self, g, op):
        x = g.t(op.inputs[0])
        a = op.options.axis
        if not 0 <= a < len(x.shape) or x.shape[a] != len(op.outputs):
            return [f"UNPACK of {list(x.shape)} along axis {a} into {len(op.outputs)} outputs"]
        want = x.shape[:a] + x.shape[a + 1:]
        if any(g.t(o).shape != want for o in op.outputs):
            return [f"UNPACK outputs must be {list(want)}"]
        return []

    def sample(self, g, op, vals):
        return [np.take(vals[0], j, axis=op.options.axis) for j in range(len(op.outputs))]

    def moves(self, g, op):
        x = g.t(op.inputs[0])
        a = op.options.axis
        xs = contiguous_strides(x.shape)
        grid = x.shape[:a] + (1,) + x.shape[a + 1:]
        return [Move(x.name, o, grid, xs, contiguous_strides(grid), j * xs[a], 0) for j, o in enumerate(op.outputs)]


@dataclass(frozen=True)
class Blocks:
    """DEPTH_TO_SPACE / SPACE_TO_DEPTH options: the block size."""

    block_size: int


@register
class DepthToSpace(CopyOp):
    """[N, H, W, C] -> [N, H b, W b, C / b^2]: y[n, h b + i, w b + j, c] = x[n, h, w, (i b + j) C' + c]."""

    kind = "DEPTH_TO_SPACE"
    tflite_ops = ("DEPTH_TO_SPACE",)
    tflite_options = "DepthToSpaceOptions"
    Options = Blocks

    def parse_tflite(self, o, op: Op, tensors) -> Blocks:
        return Blocks(block_size=int(o.BlockSize()))

    def shape_problems(self, g, op):
        x, y, b = g.t(op.inputs[0]), g.t(op.outputs[0]), op.options.block_size
        if len(x.shape) != 4 or b < 1 or x.shape[3] % (b * b) or \
                y.shape != (x.shape[0], x.shape[1] * b, x.shape[2] * b, x.shape[3] // (b * b)):
            return [f"DEPTH_TO_SPACE of {list(x.shape)} with block {b} cannot give {list(y.shape)}"]
        return []

    def sample(self, g, op, vals):
        x, b = vals[0], op.options.block_size
        n, h, w, c = x.shape
        return [x.reshape(n, h, w, b, b, c // (b * b)).transpose(0, 1, 3, 2, 4, 5).reshape(n, h * b, w * b, -1)]

    def moves(self, g, op):
        x, y, b = g.t(op.inputs[0]), g.t(op.outputs[0]), op.options.block_size
        n, h, w, c = x.shape
        cy = c // (b * b)
        xs = contiguous_strides(x.shape)
        grid = (n, h, b, w, b, cy)
        return [Move(x.name, y.name, grid, (xs[0], xs[1], b * cy, xs[2], cy, 1), contiguous_strides(grid))]


@register
class SpaceToDepth(CopyOp):
    """[N, H, W, C] -> [N, H / b, W / b, C b^2]: y[n, h, w, (i b + j) C + c] = x[n, h b + i, w b + j, c]."""

    kind = "SPACE_TO_DEPTH"
    tflite_ops = ("SPACE_TO_DEPTH",)
    tflite_options = "SpaceToDepthOptions"
    Options = Blocks

    def parse_tflite(self, o, op: Op, tensors) -> Blocks:
        return Blocks(block_size=int(o.BlockSize()))

    def shape_problems(self, g, op):
        x, y, b = g.t(op.inputs[0]), g.t(op.outputs[0]), op.options.block_size
        if len(x.shape) != 4 or b < 1 or x.shape[1] % b or x.shape[2] % b or \
                y.shape != (x.shape[0], x.shape[1] // b, x.shape[2] // b, x.shape[3] * b * b):
            return [f"SPACE_TO_DEPTH of {list(x.shape)} with block {b} cannot give {list(y.shape)}"]
        return []

    def sample(self, g, op, vals):
        x, b = vals[0], op.options.block_size
        n, h, w, c = x.shape
        return [x.reshape(n, h // b, b, w // b, b, c).transpose(0, 1, 3, 2, 4, 5).reshape(n, h // b, w // b, -1)]

    def moves(self, g, op):
        x, y, b = g.t(op.inputs[0]), g.t(op.outputs[0]), op.options.block_size
        n, h, w, c = x.shape
        xs = contiguous_strides(x.shape)
        grid = (n, h // b, w // b, b, b, c)
        return [Move(x.name, y.name, grid, (xs[0], b * xs[1], b * xs[2], xs[1], xs[2], 1), contiguous_strides(grid))]


@dataclass(frozen=True)
class Multiples:
    """TILE's options: how often each axis repeats (None when the operand is not a constant)."""

    multiples: tuple[int, ...] | None


@register
class Tile(CopyOp):
    """TILE (numpy's np.tile): axis k repeats multiples[k] times. TFLite Micro has no TILE kernel; the
    semantics are TFLite's reference Tile (= np.tile)."""

    kind = "TILE"
    tflite_ops = ("TILE",)
    Options = Multiples

    def parse_tflite(self, o, op: Op, tensors) -> Multiples:
        m = const_ints(tensors, op.inputs[1]) if len(op.inputs) > 1 else None
        self.take_operands(op, 1)
        return Multiples(multiples=m)

    def shape_problems(self, g, op):
        x, y, m = g.t(op.inputs[0]), g.t(op.outputs[0]), op.options.multiples
        if m is None:
            return ["TILE with non-constant multiples"]
        if len(m) != len(x.shape) or any(k < 0 for k in m) or \
                y.shape != tuple(d * k for d, k in zip(x.shape, m)):
            return [f"TILE of {list(x.shape)} by {list(m)} cannot give {list(y.shape)}"]
        return []

    def sample(self, g, op, vals):
        return [np.tile(vals[0], op.options.multiples)]

    def moves(self, g, op):
        x, y, m = g.t(op.inputs[0]), g.t(op.outputs[0]), op.options.multiples
        xs, ys = contiguous_strides(x.shape), contiguous_strides(y.shape)
        grid, ss, ds = [], [], []
        for d, k, sx, sy in zip(x.shape, m, xs, ys):
            grid += [k, d]
            ss += [0, sx]
            ds += [d * sy, sy]
        return [Move(x.name, y.name, tuple(grid), tuple(ss), tuple(ds))]


@dataclass(frozen=True)
class Begins:
    """SLICE's options: begin and size per axis (size -1: to the end), None when not constant."""

    begin: tuple[int, ...] | None
    size: tuple[int, ...] | None


@register
class SliceND(CopyOp):
    """TFLite SLICE: y = x[b_0 : b_0 + s_0, ...] (the output tensor's shape; size -1 runs to the end).

    The kind is SLICE_ND because SLICE names the training graph's row slice (training_ops.py)."""

    kind = "SLICE_ND"
    tflite_ops = ("SLICE",)
    Options = Begins

    def parse_tflite(self, o, op: Op, tensors) -> Begins:
        b = const_ints(tensors, op.inputs[1]) if len(op.inputs) > 1 else None
        s = const_ints(tensors, op.inputs[2]) if len(op.inputs) > 2 else None
        self.take_operands(op, 1)
        return Begins(begin=b, size=s)

    def shape_problems(self, g, op):
        x, y, o = g.t(op.inputs[0]), g.t(op.outputs[0]), op.options
        if o.begin is None or o.size is None:
            return ["SLICE with non-constant begin or size"]
        if len(o.begin) != len(x.shape) or len(o.size) != len(x.shape):
            return [f"SLICE begin {list(o.begin)} / size {list(o.size)} do not match {list(x.shape)}"]
        want = tuple(d - b if s == -1 else s for d, b, s in zip(x.shape, o.begin, o.size))
        if any(b < 0 or s < 0 or b + s > d for d, b, s in zip(x.shape, o.begin, want)) or y.shape != want:
            return [f"SLICE of {list(x.shape)} at {list(o.begin)} size {list(o.size)} cannot give {list(y.shape)}"]
        return []

    def sample(self, g, op, vals):
        y = g.t(op.outputs[0])
        return [vals[0][tuple(slice(b, b + d) for b, d in zip(op.options.begin, y.shape))]]

    def moves(self, g, op):
        x, y = g.t(op.inputs[0]), g.t(op.outputs[0])
        xs = contiguous_strides(x.shape)
        return [Move(x.name, y.name, tuple(y.shape), xs, contiguous_strides(y.shape),
                     sum(b * s for b, s in zip(op.options.begin, xs)))]

    def describe(self, g, op):
        return f"SLICE {list(g.t(op.inputs[0]).shape)} at {list(op.options.begin)} -> {list(g.t(op.outputs[0]).shape)}"


@dataclass(frozen=True)
class GatherData:
    """GATHER's compile-time view: input [outer][axis_size][inner], indices [count]."""

    outer: int
    axis_size: int
    inner: int
    indices: tuple[int, ...]


@dataclass(frozen=True)
class GatherOptions:
    """GATHER's options: the axis, batch_dims and the constant indices (None when not constant)."""

    axis: int
    batch_dims: int = 0
    indices: tuple[int, ...] | None = None
    indices_shape: tuple[int, ...] = ()


@register
class Gather(DataMove):
    """GATHER (batch_dims 0) of an int8 tensor by constant int32 indices, along any axis."""

    kind = "GATHER"
    tflite_ops = ("GATHER",)
    tflite_options = "GatherOptions"
    Options = GatherOptions
    kernel = "pockmcu_gather_s8"

    def parse_tflite(self, o, op: Op, tensors) -> GatherOptions:
        x, i = tensors[op.inputs[0]], tensors[op.inputs[1]]
        axis = positive_axis(int(o.Axis()) if o else 0, len(x.shape))
        batch_dims = int(o.BatchDims()) if o else 0
        indices = None
        if i.data is not None and i.dtype == "int32" and x.data is None:
            indices = const_ints(tensors, i.name)
            self.take_operands(op, 1)
        return GatherOptions(axis=axis, batch_dims=batch_dims, indices=indices, indices_shape=tuple(i.shape))

    def shape_problems(self, g, op):
        o = op.options
        x, y = g.t(op.inputs[0]), g.t(op.outputs[0])
        if o.batch_dims != 0:
            return [f"GATHER with batch_dims {o.batch_dims} (only 0)"]
        if o.indices is None:
            return ["GATHER with non-constant or non-int32 indices"]
        if not 0 <= o.axis < len(x.shape):
            return [f"GATHER axis {o.axis} outside the {len(x.shape)} axes"]
        bad = [v for v in o.indices if not 0 <= v < x.shape[o.axis]]
        if bad:
            return [f"GATHER index {bad[0]} outside [0, {x.shape[o.axis]}) (TFLite Micro reads out of bounds)"]
        if y.shape != x.shape[:o.axis] + o.indices_shape + x.shape[o.axis + 1:]:
            return [f"GATHER output {list(y.shape)} is not {list(x.shape)} indexed by {list(o.indices_shape)}"]
        return []

    def fold(self, g, op):
        if len(op.inputs) > 1:       # the indices stayed an operand: fold only an all-constant GATHER
            x, i = (g.t(n) for n in op.inputs[:2])
            if x.data is None or i.data is None:
                return None
            return np.take(x.data, np.asarray(i.data, np.int64), axis=op.options.axis)
        return super().fold(g, op)

    def sample(self, g, op, vals):
        o = op.options
        return [np.take(vals[0], np.array(o.indices, np.int64).reshape(o.indices_shape), axis=o.axis)]

    def prepare(self, g, op) -> GatherData:
        x, a = g.t(op.inputs[0]), op.options.axis
        return GatherData(outer=math.prod(x.shape[:a]), axis_size=x.shape[a], inner=math.prod(x.shape[a + 1:]),
                          indices=op.options.indices)

    def emit(self, g, op, cg) -> Emission:
        p = op.prepared
        return Emission(calls=(Call(cg.kernel(op).function, (
            Ptr(op.inputs[0]), p.outer, p.axis_size, p.inner, Local("indices", address=False), len(p.indices),
            Ptr(op.outputs[0])), status=True),), decls=(Array("indices", "int32_t", p.indices),))

    def backward(self, tb, op: Op) -> None:
        x = op.inputs[0]
        if not tb.needs_grad(x):
            return
        dx = tb.grad_tensor(x, f"{tb.short(x)}_grad_from_{op.name}")
        tb.emit("GATHER_GRAD", f"{op.name}_grad", [tb.grad(op.outputs[0])], [dx], layer=op)
        tb.add_grad(x, dx)


@dataclass(frozen=True, eq=False)
class GatherGradOf:
    """GATHER_GRAD's options: the forward GATHER (its indices and shapes)."""

    layer: Op


@register
class GatherGrad(OpDef):
    """GATHER backward: a scatter-add into the zeroed input gradient (``pockmcu_gather_grad_f32``)."""

    kind = "GATHER_GRAD"
    Options = GatherGradOf
    io_dtypes = ("float32",)
    kernel = "pockmcu_gather_grad_f32"

    def reference(self, g, op, xs, rt=None):
        p = op.options.layer.prepared
        dx_t = g.t(op.outputs[0])
        n = xs[0].size // max(g.t(op.inputs[0]).size, 1)
        dy = xs[0].astype(F32).reshape(n, p.outer, len(p.indices), p.inner)
        dx = np.zeros((n, p.outer, p.axis_size, p.inner), F32)
        for k, i in enumerate(p.indices):
            dx[:, :, i, :] += dy[:, :, k, :]
        return [dx.astype(np.float64).reshape((-1,) + tuple(dx_t.shape[1:]))]

    def emit(self, g, op, cg) -> Emission:
        f = op.options.layer
        p = f.prepared
        return Emission(calls=(Call(cg.kernel(op).function, (
            Ptr(op.inputs[0]), p.outer, p.axis_size, p.inner, Local("indices", owner=f.name, address=False),
            len(p.indices), Ptr(op.outputs[0])), status=True),))


# -- compile-time constants ---------------------------------------------------------------------------

class _Constant(OpDef):
    """An op whose output is a constant: always folded, never emitted."""

    foldable = True
    io_dtypes = ()

    def check(self, g: Graph, op: Op) -> list[str]:
        return [f"{self.kind} whose value is not known at compile time"]


@register
class Fill(_Constant):
    """FILL(dims, value): the output tensor's shape filled with the scalar value (its raw bytes)."""

    kind = "FILL"
    tflite_ops = ("FILL",)

    def fold(self, g, op):
        v = g.t(op.inputs[1]) if len(op.inputs) > 1 else None
        if v is None or v.data is None or np.asarray(v.data).size != 1:
            return None
        y = g.t(op.outputs[0])
        return np.full(y.shape, np.asarray(v.data).reshape(-1)[0], dtype=y.np_dtype)


@register
class ZerosLike(_Constant):
    """ZEROS_LIKE(x): zeros of x's shape and type (raw 0 bytes, whatever the quantization)."""

    kind = "ZEROS_LIKE"
    tflite_ops = ("ZEROS_LIKE",)

    def fold(self, g, op):
        y = g.t(op.outputs[0])
        return np.zeros(y.shape, dtype=y.np_dtype)
