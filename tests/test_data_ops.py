"""Shape and data movement operators (pockmcu/ops/datamove.py, shape_ops.py, layout.py's TRANSPOSE).

* every operator on random shapes (odd sizes, ranks 2..5) in single-op TFLite models: the numpy
  reference equals the TFLite Micro interpreter on random and extreme (-128 / 127) inputs, every output
  of SPLIT / SPLIT_V / UNPACK compared; TILE (TFLite Micro has no TILE kernel) against np.tile;
* the generated C (host simulation) equals TFLite Micro on one model per operator, several graph
  outputs included;
* the gradient rules against PyTorch autograd (the numpy reference of DATA_MOVE_GRAD / GATHER_GRAD), and
  their float32 C kernels against that reference (cffi);
* training through TRANSPOSE, SLICE, SPLIT, CONCATENATION and a reversed STRIDED_SLICE to the conv
  before them: the generated C ends with the numpy reference's parameter bytes, and QEMU with the host's;
* what is refused, in one line.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import FIXTURES

from pockmcu.compiler import load_and_check
from pockmcu.ops import opdef
from pockmcu.ops.base import make_op
from pockmcu.reference import run_reference

REPO = Path(__file__).resolve().parents[1]
KERNELS = REPO / "kernels_c"
S, ZP = 0.05, 3
F32 = np.float32


def _mf():
    if "make_fixtures" not in sys.modules:
        spec = importlib.util.spec_from_file_location("make_fixtures", REPO / "tests" / "fixtures" / "make_fixtures.py")
        mod = importlib.util.module_from_spec(spec)
        sys.modules["make_fixtures"] = mod
        spec.loader.exec_module(mod)
    return sys.modules["make_fixtures"]


def single_op(opcode, inputs, outputs, operands=(), first=(), options_type=None, options=None) -> bytes:
    """A one-op model: int8 activations ``inputs`` (shapes, or ("const", int8 data)), int32 constant
    ``operands`` after them (``first`` before them), int8 ``outputs`` (shapes), all one quantization."""
    b = _mf().TFLiteBuilder()
    ins, acts = [], []
    for k, x in enumerate(inputs):
        if isinstance(x, tuple) and x and x[0] == "const":
            ins.append(b.add_tensor(f"const{k}", x[1].shape, "int8", [S], [ZP], data=x[1]))
        else:
            acts.append(b.add_tensor(f"input{k}", x, "int8", [S], [ZP]))
            ins.append(acts[-1])
    pre = [b.add_tensor(f"first{k}", np.shape(v), "int32", data=np.asarray(v, np.int32)) for k, v in enumerate(first)]
    post = [b.add_tensor(f"operand{k}", np.shape(v), "int32", data=np.asarray(v, np.int32))
            for k, v in enumerate(operands)]
    outs = [b.add_tensor("op/out" + (str(k) if k else ""), s, "int8", [S], [ZP]) for k, s in enumerate(outputs)]
    b.add_op(opcode, pre + ins + post, outs, options_type, options)
    b.set_io(acts, outs)
    return b.serialize()


def tflm(buf: bytes, xs: list[np.ndarray], n_out: int) -> list[np.ndarray]:
    """Every output of the model on each sample (xs: [N, *shape] per input)."""
    from tflite_micro.python.tflite_micro import runtime

    it = runtime.Interpreter.from_bytes(buf, arena_size=256 * 1024)
    outs = [[] for _ in range(n_out)]
    for i in range(len(xs[0])):
        for k, x in enumerate(xs):
            it.set_input(x[i], k)
        it.invoke()
        for k in range(n_out):
            outs[k].append(np.array(it.get_output(k)))
        it.reset()
    return [np.stack(o) for o in outs]


def samples(shapes, rng, n=3) -> list[np.ndarray]:
    """n random samples per input, plus one all -128 and one all 127."""
    xs = []
    for s in shapes:
        r = rng.integers(-128, 128, (n,) + tuple(s)).astype(np.int8)
        xs.append(np.concatenate([r, np.full((1,) + tuple(s), -128, np.int8), np.full((1,) + tuple(s), 127, np.int8)]))
    return xs


# -- random single-op cases -------------------------------------------------------------------------

def rand_shape(rng, rank, lo=1, hi=6):
    return (1,) + tuple(int(d) for d in rng.integers(lo, hi, rank - 1))


def case_transpose(rng):
    rank = int(rng.integers(2, 6))
    x = rand_shape(rng, rank, 2, 6)
    perm = [int(p) for p in rng.permutation(rank)]
    return dict(opcode="TRANSPOSE", inputs=[x], outputs=[tuple(x[p] for p in perm)], operands=[perm])


def case_split(rng):
    rank = int(rng.integers(2, 6))
    x = list(rand_shape(rng, rank, 1, 5))
    axis = int(rng.integers(1, rank))
    parts = int(rng.integers(1, 4))
    x[axis] *= parts
    y = list(x)
    y[axis] //= parts
    return dict(opcode="SPLIT", inputs=[tuple(x)], outputs=[tuple(y)] * parts,
                first=[[axis - rank if rng.random() < 0.5 else axis]], options_type="SplitOptions",
                options=dict(NumSplits=parts))


def case_split_v(rng):
    rank = int(rng.integers(2, 6))
    x = list(rand_shape(rng, rank, 1, 5))
    axis = int(rng.integers(1, rank))        # not the batch axis: a model input has batch 1
    sizes = [int(s) for s in rng.integers(1, 4, int(rng.integers(1, 4)))]
    x[axis] = sum(sizes)
    given = list(sizes)
    given[int(rng.integers(0, len(sizes)))] = -1
    outs = [tuple(s if k == axis else d for k, d in enumerate(x)) for s in sizes]
    return dict(opcode="SPLIT_V", inputs=[tuple(x)], outputs=outs, operands=[given, [axis]])


def case_unpack(rng):
    rank = int(rng.integers(2, 6))
    x = rand_shape(rng, rank, 1, 5)
    axis = int(rng.integers(0, rank))
    y = x[:axis] + x[axis + 1:]
    return dict(opcode="UNPACK", inputs=[x], outputs=[y] * x[axis], options_type="UnpackOptions",
                options=dict(Num=x[axis], Axis=axis))


def case_pack(rng):
    rank = int(rng.integers(2, 5))
    x = rand_shape(rng, rank, 1, 5)
    n = int(rng.integers(1, 4))
    axis = int(rng.integers(0, rank + 1))
    y = x[:axis] + (n,) + x[axis:]
    return dict(opcode="PACK", inputs=[x] * n, outputs=[y], options_type="PackOptions",
                options=dict(ValuesCount=n, Axis=axis))


def case_slice(rng):
    rank = int(rng.integers(2, 6))
    x = rand_shape(rng, rank, 1, 7)
    begin = [int(rng.integers(0, d)) for d in x]
    size = [int(rng.integers(1, d - b + 1)) for d, b in zip(x, begin)]
    given = [-1 if rng.random() < 0.3 else s for s in size]
    y = tuple(d - b if s == -1 else s for d, b, s in zip(x, begin, given))
    return dict(opcode="SLICE", inputs=[x], outputs=[y], operands=[begin, given])


def case_strided_slice(rng):
    from pockmcu.ops.shape_ops import SliceMasks, strided_slice_axes

    rank = int(rng.integers(2, 5))
    x = rand_shape(rng, rank, 1, 8)
    begin = [int(rng.integers(-d - 2, d + 2)) for d in x]
    end = [int(rng.integers(-d - 2, d + 2)) for d in x]
    strides = [int(rng.choice([-3, -2, -1, 1, 2, 3])) for _ in x]
    bm, em = int(rng.integers(0, 1 << rank)), int(rng.integers(0, 1 << rank))
    shrink = 0
    for k, d in enumerate(x):          # shrink an axis where the start is inside the tensor
        if rng.random() < 0.3 and strides[k] > 0 and not bm >> k & 1 and -d <= begin[k] < d:
            shrink |= 1 << k
    o = SliceMasks(begin=tuple(begin), end=tuple(end), strides=tuple(strides), begin_mask=bm, end_mask=em,
                   shrink_axis_mask=shrink)
    counts = [len(range(*a)) for a in strided_slice_axes(x, o)]
    if 0 in counts:
        return None
    y = tuple(c for k, c in enumerate(counts) if not shrink >> k & 1)
    return dict(opcode="STRIDED_SLICE", inputs=[x], outputs=[y], operands=[begin, end, strides],
                options_type="StridedSliceOptions", options=dict(BeginMask=bm, EndMask=em, ShrinkAxisMask=shrink))


def case_gather(rng):
    rank = int(rng.integers(2, 5))
    x = rand_shape(rng, rank, 2, 6)
    axis = int(rng.integers(0, rank))
    ishape = tuple(int(d) for d in rng.integers(1, 4, int(rng.integers(1, 3))))
    idx = rng.integers(0, x[axis], ishape).astype(np.int32)
    y = x[:axis] + ishape + x[axis + 1:]
    given = axis - rank if rng.random() < 0.5 else axis
    return dict(opcode="GATHER", inputs=[x], outputs=[y], operands=[idx], options_type="GatherOptions",
                options=dict(Axis=given, BatchDims=0))


def case_depth_to_space(rng):
    b = int(rng.integers(1, 4))
    n, h, w, c = 1, int(rng.integers(1, 4)), int(rng.integers(1, 4)), b * b * int(rng.integers(1, 4))
    return dict(opcode="DEPTH_TO_SPACE", inputs=[(n, h, w, c)], outputs=[(n, h * b, w * b, c // (b * b))],
                options_type="DepthToSpaceOptions", options=dict(BlockSize=b))


def case_space_to_depth(rng):
    b = int(rng.integers(1, 4))
    n, h, w, c = 1, b * int(rng.integers(1, 4)), b * int(rng.integers(1, 4)), int(rng.integers(1, 4))
    return dict(opcode="SPACE_TO_DEPTH", inputs=[(n, h, w, c)], outputs=[(n, h // b, w // b, c * b * b)],
                options_type="SpaceToDepthOptions", options=dict(BlockSize=b))


def case_squeeze(rng):
    x = (1, 3, 1, 5)
    return dict(opcode="SQUEEZE", inputs=[x], outputs=[(1, 3, 5)], options_type="SqueezeOptions",
                options=dict(SqueezeDims=[2]))


def case_expand_dims(rng):
    x = rand_shape(rng, 3, 1, 6)
    return dict(opcode="EXPAND_DIMS", inputs=[x], outputs=[x[:2] + (1,) + x[2:]], operands=[[2]])


def case_concat_const(rng):
    rank = int(rng.integers(2, 6))
    x = rand_shape(rng, rank, 1, 5)
    axis = int(rng.integers(0, rank))
    k = list(x)
    k[axis] = int(rng.integers(1, 4))
    const = rng.integers(-128, 128, k).astype(np.int8)
    y = list(x)
    y[axis] += k[axis] * 2
    return dict(opcode="CONCATENATION", inputs=[("const", const), x, ("const", const)], outputs=[tuple(y)],
                options_type="ConcatenationOptions", options=dict(Axis=axis, FusedActivationFunction=0))


CASES = {f.__name__[5:]: f for f in (case_transpose, case_split, case_split_v, case_unpack, case_pack, case_slice,
                                     case_strided_slice, case_gather, case_depth_to_space, case_space_to_depth,
                                     case_squeeze, case_expand_dims, case_concat_const)}


def build_case(c) -> bytes:
    return single_op(c["opcode"], c["inputs"], c["outputs"], c.get("operands", ()), c.get("first", ()),
                     c.get("options_type"), c.get("options"))


def act_shapes(c):
    return [x for x in c["inputs"] if not (isinstance(x, tuple) and x and x[0] == "const")]


@pytest.mark.parametrize("kind", list(CASES))
def test_reference_equals_tflm(kind, tmp_path):
    """30 random models per operator: the numpy reference equals TFLite Micro on every output."""
    rng = np.random.default_rng(sum(map(ord, kind)))
    done = 0
    for trial in range(300):
        c = CASES[kind](rng)
        if c is None:
            continue
        buf = build_case(c)
        path = tmp_path / f"{kind}{trial}.tflite"
        path.write_bytes(buf)
        xs = samples(act_shapes(c), rng)
        want = tflm(buf, xs, len(c["outputs"]))
        g = load_and_check(path)
        got = run_reference(g, *[x.reshape((-1,) + tuple(s[1:])) for x, s in zip(xs, act_shapes(c))])
        for k, (a, b) in enumerate(zip(got, want)):
            np.testing.assert_array_equal(a.reshape(b.shape), b, err_msg=f"{c} output {k}")
        assert not g.tensors[g.outputs[0]].is_const
        done += 1
        if done == 30:
            break
    assert done == 30


HOST_CASES = ["transpose", "split", "split_v", "unpack", "pack", "slice", "strided_slice", "gather",
              "depth_to_space", "space_to_depth", "concat_const"]


@pytest.mark.parametrize("kind", HOST_CASES)
def test_host_simulation_equals_tflm(kind, tmp_path):
    """The generated C of two random models per operator (every graph output) equals TFLite Micro."""
    from pockmcu.codegen import write_project
    from pockmcu.compiler import compile_graph
    from pockmcu.sim import load

    rng = np.random.default_rng(100 + sum(map(ord, kind)))
    made = 0
    while made < 2:
        c = CASES[kind](rng)
        if c is None or max(len(s) for s in c["outputs"]) < 2 or any(s[0] != 1 for s in c["outputs"]):
            continue        # (the simulation's I/O takes N samples of batch-1 tensors)
        path = tmp_path / f"{kind}{made}.tflite"
        buf = build_case(c)
        path.write_bytes(buf)
        shapes = act_shapes(c)
        xs = samples(shapes, rng)
        want = tflm(buf, xs, len(c["outputs"]))
        comp = compile_graph(load_and_check(path), ram=1 << 20)
        got = load(write_project(comp, tmp_path / f"out{made}")).invoke(
            *[x.reshape((-1,) + tuple(sh[1:])) for x, sh in zip(xs, shapes)])
        got = got if isinstance(got, list) else [got]
        for a, b in zip(got, want):
            np.testing.assert_array_equal(a.reshape(b.shape), b, err_msg=str(c))
        made += 1


def test_rank5_transpose_and_split_are_strided_copies(tmp_path):
    """Above rank 4 TRANSPOSE calls pockmcu_strided_copy_s8; a slice of whole rows is one grid of rank
    2 at most (contiguous axes merged)."""
    from pockmcu.codegen import write_project
    from pockmcu.compiler import compile_graph

    (tmp_path / "t.tflite").write_bytes(single_op("TRANSPOSE", [(1, 2, 3, 4, 5)], [(1, 5, 3, 2, 4)],
                                                  operands=[[0, 4, 2, 1, 3]]))
    out = write_project(compile_graph(load_and_check(tmp_path / "t.tflite"), ram=1 << 20), tmp_path / "o")
    c = (out / "model.c").read_text()
    assert "pockmcu_strided_copy_s8(" in c and "pockmcu_transpose_s8(" not in c
    (tmp_path / "s.tflite").write_bytes(single_op("SPLIT", [(1, 6, 4, 5)], [(1, 2, 4, 5)] * 3, first=[[1]],
                                                  options_type="SplitOptions", options=dict(NumSplits=3)))
    g = load_and_check(tmp_path / "s.tflite")
    moves = [m.simplified() for m in g.ops[0].prepared]
    assert [m.shape for m in moves] == [(40,)] * 3 and [m.src_offset for m in moves] == [0, 40, 80]


def test_tile_against_numpy(tmp_path):
    """TILE: no TFLite Micro kernel exists (its interpreter refuses the model); the reference is
    np.tile (TFLite's reference Tile) and the C equals it."""
    from tflite_micro.python.tflite_micro import runtime

    from pockmcu.codegen import write_project
    from pockmcu.compiler import compile_graph
    from pockmcu.sim import load

    rng = np.random.default_rng(7)
    for k in range(4):
        rank = int(rng.integers(2, 6))
        x = rand_shape(rng, rank, 1, 4)
        m = [1] + [int(v) for v in rng.integers(1, 4, rank - 1)]
        buf = single_op("TILE", [x], [tuple(d * r for d, r in zip(x, m))], operands=[m])
        if k == 0:
            with pytest.raises(RuntimeError):
                runtime.Interpreter.from_bytes(buf, arena_size=65536)
        path = tmp_path / f"tile{k}.tflite"
        path.write_bytes(buf)
        xs = samples([x], rng)[0]
        want = np.concatenate([np.tile(s[None], m) for s in xs])
        g = load_and_check(path)
        np.testing.assert_array_equal(run_reference(g, xs)[0].reshape(want.shape), want)
        if k < 2:
            got = load(write_project(compile_graph(g, ram=1 << 20), tmp_path / f"o{k}")).invoke(
                xs.reshape((-1,) + x[1:]))
            np.testing.assert_array_equal(got.reshape(want.shape), want)


def test_fill_and_zeros_like_fold(tmp_path):
    """FILL and ZEROS_LIKE become constants at compile time; CONCATENATION then reads them from flash."""
    b = _mf().TFLiteBuilder()
    x = b.add_tensor("input", (1, 2, 3), "int8", [S], [ZP])
    dims = b.add_tensor("dims", (3,), "int32", data=np.array([1, 2, 2], np.int32))
    val = b.add_tensor("value", (), "int8", [S], [ZP], data=np.array(-7, np.int8))
    f = b.add_tensor("fill/out", (1, 2, 2), "int8", [S], [ZP])
    z = b.add_tensor("zeros/out", (1, 2, 3), "int8", [S], [ZP])
    y = b.add_tensor("concat/out", (1, 2, 8), "int8", [S], [ZP])
    b.add_op("FILL", [dims, val], [f])
    b.add_op("ZEROS_LIKE", [x], [z])
    b.add_op("CONCATENATION", [f, x, z], [y], "ConcatenationOptions", dict(Axis=2, FusedActivationFunction=0))
    b.set_io([x], [y])
    buf = b.serialize()
    (tmp_path / "m.tflite").write_bytes(buf)
    g = load_and_check(tmp_path / "m.tflite")
    assert [op.kind for op in g.ops] == ["CONCATENATION"]
    xs = samples([(1, 2, 3)], np.random.default_rng(3))
    want = tflm(buf, xs, 1)[0]
    np.testing.assert_array_equal(run_reference(g, xs[0].reshape(-1, 2, 3))[0].reshape(want.shape), want)
    assert (want[..., :2] == -7).all() and (want[..., 5:] == 0).all()


# -- gradients ---------------------------------------------------------------------------------------------

def torch_forward(op, g, xs):
    """The op in PyTorch on real-valued inputs (lists of tensors per output)."""
    import torch

    o = op.options
    kind = op.kind
    x = xs[0]
    if kind == "TRANSPOSE":
        return [x.permute(*o.perm)]
    if kind in ("SPLIT", "SPLIT_V"):
        return list(torch.split(x, [g.t(n).shape[o.axis] for n in op.outputs], dim=o.axis))
    if kind == "UNPACK":
        return list(torch.unbind(x, dim=o.axis))
    if kind == "PACK":
        return [torch.stack(xs, dim=o.axis)]
    if kind == "CONCATENATION":
        return [torch.cat(xs, dim=o.axis)]
    if kind == "SLICE_ND":
        y = g.t(op.outputs[0]).shape
        return [x[tuple(slice(b, b + d) for b, d in zip(o.begin, y))]]
    if kind == "STRIDED_SLICE":
        from pockmcu.ops.shape_ops import strided_slice_axes

        for k, a in enumerate(strided_slice_axes(tuple(x.shape), o)):
            x = torch.index_select(x, k, torch.arange(*a))
        return [x.reshape(g.t(op.outputs[0]).shape)]
    if kind == "TILE":
        return [x.repeat(*o.multiples)]
    if kind == "GATHER":
        y = torch.index_select(x, o.axis, torch.tensor(o.indices))
        return [y.reshape(g.t(op.outputs[0]).shape)]
    if kind == "DEPTH_TO_SPACE":
        n, h, w, c = x.shape
        b = o.block_size
        return [x.reshape(n, h, w, b, b, c // (b * b)).permute(0, 1, 3, 2, 4, 5).reshape(n, h * b, w * b, -1)]
    if kind == "SPACE_TO_DEPTH":
        n, h, w, c = x.shape
        b = o.block_size
        return [x.reshape(n, h // b, b, w // b, b, c).permute(0, 1, 3, 2, 4, 5).reshape(n, h // b, w // b, -1)]
    raise AssertionError(kind)


def backward_ops(g, op):
    """The gradient ops of ``op`` (as the training builder makes them), with float32 dy tensors."""
    from pockmcu.ir import Tensor

    dys = []
    for k, o in enumerate(op.outputs):
        g.tensors[f"dy{k}"] = Tensor(f"dy{k}", g.t(o).shape, "float32")
        dys.append(f"dy{k}")
    ops = []
    for k, x in enumerate(op.inputs):
        if g.t(x).is_const or x in op.inputs[:k]:
            continue
        g.tensors[f"dx{k}"] = Tensor(f"dx{k}", g.t(x).shape, "float32")
        if op.kind == "GATHER":
            b = make_op("GATHER_GRAD", f"grad{k}", dys, [f"dx{k}"], layer=op)
        else:
            b = make_op("DATA_MOVE_GRAD", f"grad{k}", dys, [f"dx{k}"], layer=op, input=k,
                        grads_of=tuple(range(len(op.outputs))))
        b.prepared = opdef(b.kind).prepare(g, b)
        ops.append((k, b))
    return ops


GRAD_KINDS = ["transpose", "split", "split_v", "unpack", "pack", "slice", "strided_slice", "gather",
              "depth_to_space", "space_to_depth", "concat_const", "tile"]


def case_tile(rng):
    rank = int(rng.integers(2, 5))
    x = rand_shape(rng, rank, 1, 4)
    m = [int(v) for v in rng.integers(1, 4, rank)]
    return dict(opcode="TILE", inputs=[x], outputs=[tuple(d * r for d, r in zip(x, m))], operands=[m])


CASES["tile"] = case_tile


@pytest.mark.parametrize("kind", GRAD_KINDS)
def test_gradient_equals_torch(kind, tmp_path):
    """dx of every input from dy of every output, against PyTorch autograd of sum(y * dy) on the
    dequantized inputs: equal bits where the gradient is a copy, within float32 rounding of the
    float64 sum where elements repeat (TILE, GATHER with repeated indices)."""
    import torch

    torch.set_num_threads(1)
    rng = np.random.default_rng(500 + sum(map(ord, kind)))
    checked = 0
    while checked < 8:
        c = CASES[kind](rng)
        if c is None:
            continue
        path = tmp_path / f"{kind}{checked}.tflite"
        path.write_bytes(build_case(c))
        g = load_and_check(path)
        (op,) = g.ops
        xq = [rng.integers(-128, 128, g.t(n).shape).astype(np.int8) if not g.t(n).is_const else g.t(n).data
              for n in op.inputs]
        xt = [torch.tensor(((q.astype(np.float32) - ZP) * F32(S)), requires_grad=not g.t(n).is_const)
              for q, n in zip(xq, op.inputs)]
        ys = torch_forward(op, g, xt)
        dys = [rng.standard_normal(tuple(y.shape)).astype(F32) for y in ys]
        sum((y * torch.tensor(d)).sum() for y, d in zip(ys, dys)).backward()
        for k, b in backward_ops(g, op):
            got = opdef(b.kind).reference(g, b, [d.reshape(g.t(f"dy{j}").shape) for j, d in enumerate(dys)])[0]
            want = xt[k].grad.numpy()
            repeats = kind == "tile" or (kind == "gather" and len(set(op.options.indices)) < len(op.options.indices))
            if repeats:
                np.testing.assert_allclose(got.reshape(want.shape), want, rtol=1e-6, atol=1e-6)
            else:
                np.testing.assert_array_equal(got.astype(F32).reshape(want.shape).view(np.uint32),
                                              want.view(np.uint32), err_msg=str(c))
        checked += 1


def build_kernels(outdir: Path) -> Path:
    so = outdir / "libdatamove.so"
    srcs = [KERNELS / f"{n}.c" for n in ("pockmcu_strided_copy_s8", "pockmcu_strided_copy_f32", "pockmcu_strided_add_f32",
                                         "pockmcu_gather_s8", "pockmcu_gather_grad_f32")]
    cmd = ["gcc", "-std=c99", "-Wall", "-Wextra", "-Werror", "-Wshadow", "-O1", "-g", "-fPIC", "-shared",
           "-fsanitize=undefined", "-fno-sanitize-recover=all", f"-I{KERNELS}"]
    res = subprocess.run(cmd + [str(p) for p in srcs] + ["-o", str(so)], capture_output=True, text=True)
    assert res.returncode == 0 and res.stderr == "", res.stderr
    return so


@pytest.mark.parametrize("kind", ["transpose", "slice", "strided_slice", "split", "tile", "gather", "concat_const"])
def test_grad_kernels_equal_reference(kind, tmp_path):
    """The float32 gradient kernels (strided copy / add with the swapped grids, gather's scatter-add),
    built with UBSan, equal the numpy reference of DATA_MOVE_GRAD / GATHER_GRAD bit for bit; the int8
    forward kernels equal the reference too."""
    import cffi

    from pockmcu.cdecl import c_declarations
    from pockmcu.ops.datamove import grid_dims

    so = build_kernels(tmp_path)
    ffi = cffi.FFI()
    ffi.cdef(c_declarations(KERNELS / "pockmcu_nn.h", include_dirs=[KERNELS]))
    lib = ffi.dlopen(str(so))
    rng = np.random.default_rng(900 + sum(map(ord, kind)))
    for trial in range(6):
        c = CASES[kind](rng)
        if c is None:
            continue
        path = tmp_path / f"{kind}{trial}.tflite"
        path.write_bytes(build_case(c))
        g = load_and_check(path)
        (op,) = g.ops
        x = rng.integers(-128, 128, g.t(op.inputs[-1]).shape).astype(np.int8)
        if op.kind == "GATHER":
            p = op.prepared
            y = np.zeros(g.t(op.outputs[0]).size, np.int8)
            idx = np.array(p.indices, np.int32)
            assert lib.pockmcu_gather_s8(ffi.from_buffer("int8_t[]", x), p.outer, p.axis_size, p.inner,
                                         ffi.from_buffer("int32_t[]", idx), len(idx), ffi.from_buffer("int8_t[]", y)) == 0
            np.testing.assert_array_equal(y, run_reference(g, x)[0].reshape(-1))
        for k, b in backward_ops(g, op):
            dys = [rng.standard_normal(g.t(f"dy{j}").shape).astype(F32) for j in range(len(op.outputs))]
            want = opdef(b.kind).reference(g, b, dys)[0].astype(F32).reshape(-1)
            dx = np.full(want.size, np.nan, F32)
            if b.kind == "GATHER_GRAD":
                p = op.prepared
                idx = np.array(p.indices, np.int32)
                assert lib.pockmcu_gather_grad_f32(ffi.from_buffer("float[]", dys[0]), p.outer, p.axis_size, p.inner,
                                                   ffi.from_buffer("int32_t[]", idx), len(idx),
                                                   ffi.from_buffer("float[]", dx)) == 0
            else:
                p = b.prepared
                if p.zero or p.add:
                    dx[:] = 0
                fn = lib.pockmcu_strided_add_f32 if p.add else lib.pockmcu_strided_copy_f32
                for m in p.moves:
                    s = m.simplified()
                    src = dys[int(s.src[2:])].reshape(-1)
                    dims = np.array(grid_dims(s), np.int32)
                    assert fn(ffi.from_buffer("float[]", src) + s.src_offset, len(s.shape),
                              ffi.from_buffer("int32_t[]", dims), ffi.from_buffer("float[]", dx) + s.dst_offset) == 0
            np.testing.assert_array_equal(dx.view(np.uint32), want.view(np.uint32), err_msg=str(c))


# -- training through data movement ------------------------------------------------------------------------

TRAIN = FIXTURES / "datamove_train.tflite"
SPEC = {"bias": "all", "weights": "all", "optimizer": {"kind": "momentum", "lr": 0.05, "momentum": 0.5}, "batch": 2}


def _train_project(tmp_path):
    from pockmcu.codegen import write_project
    from pockmcu.compiler import TrainOptions, compile_model

    c = compile_model(TRAIN, ram=512 * 1024, train=TrainOptions(spec=json.dumps(SPEC), loss="xent"))
    return c, write_project(c, tmp_path / "train")


def _data(n, seed):
    from pockmcu.train import Data

    rng = np.random.default_rng(seed)
    return Data(rng.integers(-128, 128, (n, 6, 5, 3)).astype(np.int8), rng.integers(0, 5, n).astype(np.int32))


def test_training_through_data_movement_c_equals_reference(tmp_path):
    """4 steps (momentum, batch 2): the generated C and the numpy reference end with the same parameter
    bytes, and conv0, before TRANSPOSE / SLICE / SPLIT / CONCATENATION / STRIDED_SLICE, has moved."""
    from pockmcu.train import HostTrainer
    from pockmcu.training import params
    from pockmcu.training.reference import ReferenceTrainer

    c, out = _train_project(tmp_path)
    kinds = [op.kind for op in c.train.schedule]
    assert kinds.count("DATA_MOVE_GRAD") == 4 and "SLICE" in kinds   # SPLIT's, SLICE's, TRANSPOSE's, STRIDED_SLICE's
    data = _data(4, seed=4)
    host = HostTrainer(out)
    host.init(3)
    ref = ReferenceTrainer(c.train, seed=3)
    for i in range(4):
        loss_c, _, _ = host.step(data.x[i], data.y[i])
        loss_ref = ref.step(data.x[i], data.y[i])
        assert abs(loss_c - loss_ref) <= 1e-6 * max(1.0, abs(loss_ref))
    layout = params.entries(c.train)
    got = params.expand(layout, host.params(), {t: c.graph.t(t).data for t in c.train.trainable_tensors})
    for t, want in ref.params().items():
        np.testing.assert_array_equal(got[t], want, err_msg=t)
    conv_w = c.graph.ops[0].inputs[1]
    assert (got[conv_w] != c.graph.t(conv_w).data).any(), "no gradient reached the conv before the data movement"


def test_training_on_qemu_equals_host(tmp_path):
    """One epoch of 8 samples on QEMU (Cortex-M4) leaves the host's parameter bytes."""
    from pockmcu.train import HostTrainer, train_on_target

    c, out = _train_project(tmp_path)
    data = _data(8, seed=6)
    host = HostTrainer(out)
    host.train(data, epochs=1, seed=5, log=lambda *_: None)
    _, raw_dev, _ = train_on_target(out, "qemu-m4", data, epochs=1, seed=5, log=lambda *_: None)
    assert raw_dev == host.params()


# -- refusals ------------------------------------------------------------------------------------------------

def test_refusals_are_one_line(tmp_path):
    """A non-constant perm, a bad permutation, a GATHER index out of range: one line each, exit 2."""
    from test_errors import pockmcu

    bad = {
        "perm": single_op("TRANSPOSE", [(1, 2, 3)], [(1, 3, 2)], operands=[[0, 2, 2]]),
        "gather": single_op("GATHER", [(1, 4, 3)], [(1, 2, 3)], operands=[[1, 4]], options_type="GatherOptions",
                            options=dict(Axis=1, BatchDims=0)),
    }
    words = {"perm": "perm [0, 2, 2] is not a permutation", "gather": "GATHER index 4 outside [0, 4)"}
    for name, buf in bad.items():
        (tmp_path / f"{name}.tflite").write_bytes(buf)
        r = pockmcu("gen", tmp_path / f"{name}.tflite", "--ram", "64KB", "-o", tmp_path / name)
        assert r.returncode == 2 and words[name] in r.stderr, r.stderr
        assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
