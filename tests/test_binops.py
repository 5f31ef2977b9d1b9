"""ADD / SUB / MUL / SQUARED_DIFFERENCE / MAXIMUM / MINIMUM with broadcasting and constant operands
(pockmcu/ops/binary.py, elementwise.py).

* Prepare and the numpy reference against the TFLite Micro interpreter: single-op models over
  broadcast shape pairs (equal, per-channel vector, scalar, general, rank 5), activation or constant
  second operand, fused activations, random scales over six decades and extreme ones, random and
  extreme inputs (all -128, all 127, the zero points);
* the generated C (host simulation) against TFLite Micro on the same models, so every broadcasting
  kernel runs; equal-shape ADD still calls arm_elementwise_add_s8 (test_exact keeps its C);
* the gradient kernels against PyTorch autograd (float32 bits where nothing is summed, float64
  within float32 rounding where a broadcast axis is summed) and against their numpy references bit
  for bit;
* training through the binops_classifier fixture: generated C = numpy reference, and QEMU = host.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import FIXTURES, build_kernel_lib, kernel_cdef

REPO = Path(__file__).resolve().parents[1]
KERNELS = REPO / "kernels_c"
F32 = np.float32
BINARY_OPS = [("ADD", "AddOptions"), ("SUB", "SubOptions"), ("MUL", "MulOptions"), ("SQUARED_DIFFERENCE", None),
              ("MAXIMUM", None), ("MINIMUM", None)]
SHAPES = [((1, 4, 4, 8), (1, 4, 4, 8)), ((1, 4, 4, 8), (8,)), ((1, 4, 4, 8), ()), ((1, 4, 1, 8), (1, 1, 4, 1)),
          ((1, 3, 4, 8), (1, 3, 1, 1)), ((1, 2, 3, 4, 5), (1, 2, 1, 4, 1)), ((1, 1, 1, 8), (1, 5, 1, 8))]


def make_fixtures():
    if "make_fixtures" not in sys.modules:
        spec = importlib.util.spec_from_file_location("make_fixtures", REPO / "tests" / "fixtures" / "make_fixtures.py")
        mod = importlib.util.module_from_spec(spec)
        sys.modules["make_fixtures"] = mod
        spec.loader.exec_module(mod)
    return sys.modules["make_fixtures"]


def single_op_model(opcode, qs, shapes, const=None, options_type=None, options=None) -> bytes:
    """One op: inputs with the given quantizations (s, zp) and shapes; ``const`` the data of a constant
    last input (None: every input is a graph input)."""
    b = make_fixtures().TFLiteBuilder()
    ins, graph_ins = [], []
    *in_qs, out_q = qs
    *in_shapes, out_shape = shapes
    for k, (q, shape) in enumerate(zip(in_qs, in_shapes)):
        data = const if (const is not None and k == len(in_qs) - 1) else None
        t = b.add_tensor(f"in{k}", shape, "int8", [q[0]], [q[1]], data=data)
        ins.append(t)
        if data is None:
            graph_ins.append(t)
    y = b.add_tensor("op0/out", out_shape, "int8", [out_q[0]], [out_q[1]])
    b.add_op(opcode, ins, [y], options_type, options)
    b.set_io(graph_ins, [y])
    return b.serialize()


def tflm(buf: bytes, xs) -> np.ndarray:
    from tflite_micro.python.tflite_micro import runtime

    it = runtime.Interpreter.from_bytes(buf, arena_size=256 * 1024)
    for k, x in enumerate(xs):
        it.set_input(x, k)
    it.invoke()
    return it.get_output(0)


def input_sets(rng, shapes, zps):
    """Random inputs, then the extremes: all -128, all 127, every input at its zero point, mixed."""
    rand = [rng.integers(-128, 128, s).astype(np.int8) for s in shapes]
    lo = [np.full(s, -128, np.int8) for s in shapes]
    hi = [np.full(s, 127, np.int8) for s in shapes]
    zp = [np.full(s, z, np.int8) for s, z in zip(shapes, zps)]
    return [rand, lo, hi, zp, lo[:1] + hi[1:], hi[:1] + lo[1:]]


def random_q(rng, decades=(-4, 2)):
    return float(F32(10 ** rng.uniform(*decades))), int(rng.integers(-128, 128))


def compiled(tmp_path, buf):
    """(graph, host simulation) of a model: its numpy reference runs on the graph, the C through cffi."""
    from pockmcu.codegen import write_project
    from pockmcu.compiler import compile_model, load_and_check
    from pockmcu.sim import load

    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / "m.tflite"
    path.write_bytes(buf)
    return load_and_check(path), load(write_project(compile_model(path, ram=1 << 20), tmp_path / "gen"))


def test_binary_reference_equals_tflm(tmp_path):
    """Every op x every shape pair x activation or constant operand x 3 random quantizations (plus
    extreme scale ratios) x 6 input sets: numpy reference == TFLite Micro, element for element."""
    from pockmcu.compiler import load_and_check
    from pockmcu.reference import run_reference

    rng = np.random.default_rng(12)
    models = values = 0
    for opcode, otype in BINARY_OPS:
        for sa, sb in SHAPES:
            if opcode == "SQUARED_DIFFERENCE" and len(sa) > 4:
                continue
            out_shape = tuple(np.broadcast_shapes(sa, sb))
            for const in (False, True):
                if not const and len(sb) != len(out_shape):
                    continue      # activation operands of lower rank are refused (see test_refusals)
                qsets = [(random_q(rng), random_q(rng), random_q(rng)) for _ in range(3)]
                qsets += [((1e-5, 3), (20.0, -7), (0.05, 0)), ((3.0, -100), (0.0007, 90), (9e-4, -128))]
                for qa, qb, qo in qsets:
                    if opcode in ("MAXIMUM", "MINIMUM"):
                        qb = qo = qa
                    opts = {"FusedActivationFunction": int(rng.choice([0, 1, 3]))} if otype else None
                    c = rng.integers(-128, 128, sb).astype(np.int8) if const else None
                    buf = single_op_model(opcode, [qa, qb, qo], [sa, sb, out_shape], c, otype, opts)
                    path = tmp_path / f"{opcode}.tflite"
                    path.write_bytes(buf)
                    g = load_and_check(path)
                    models += 1
                    for xs in input_sets(rng, [sa] + ([] if const else [sb]), [qa[1], qb[1]]):
                        want = tflm(buf, xs)
                        got = run_reference(g, *xs)[0].reshape(want.shape)
                        np.testing.assert_array_equal(got, want, err_msg=f"{opcode} {sa} {sb} {qa} {qb} {qo}")
                        values += want.size
    assert models >= 300 and values >= 200_000, (models, values)


@pytest.mark.parametrize("opcode,otype", BINARY_OPS, ids=[o for o, _ in BINARY_OPS])
def test_binary_generated_c_equals_tflm(opcode, otype, tmp_path):
    """The generated C (host simulation, cffi) on broadcasting and constant-operand models: per-channel
    constant, scalar constant, general broadcast of two activations, rank 5; random and extreme inputs."""
    from pockmcu.reference import run_reference

    rng = np.random.default_rng(len(opcode))
    cases = [((1, 4, 4, 8), (8,), True), ((1, 4, 8, 8), (), True), ((1, 4, 1, 8), (1, 1, 4, 1), False),
             ((1, 2, 3, 4, 5), (1, 2, 1, 4, 1), False)]
    for k, (sa, sb, const) in enumerate(cases):
        if opcode == "SQUARED_DIFFERENCE" and len(sa) > 4:
            continue
        out_shape = tuple(np.broadcast_shapes(sa, sb))
        qa, qb, qo = random_q(rng), random_q(rng), random_q(rng)
        if opcode in ("MAXIMUM", "MINIMUM"):
            qb = qo = qa
        c = rng.integers(-128, 128, sb).astype(np.int8) if const else None
        opts = {"FusedActivationFunction": 1} if otype else None
        buf = single_op_model(opcode, [qa, qb, qo], [sa, sb, out_shape], c, otype, opts)
        g, sim = compiled(tmp_path / f"c{k}", buf)
        for xs in input_sets(rng, [sa] + ([] if const else [sb]), [qa[1], qb[1]]):
            want = tflm(buf, xs)
            np.testing.assert_array_equal(sim.invoke(*xs).reshape(want.shape), want, err_msg=f"{opcode} {sa} {sb}")
            np.testing.assert_array_equal(run_reference(g, *xs)[0].reshape(want.shape), want)


def test_equal_shape_add_keeps_cmsis_kernel_and_broadcast_uses_pockmcu(tmp_path):
    """Equal shapes: arm_elementwise_add_s8 (the C test_exact pins), on a DSP core (qemu-m4, the default) its DSP
    form pockmcu_elementwise_add_s8_dsp (tests/test_add_dsp.py); broadcasting: pockmcu_add_broadcast_s8."""
    from pockmcu.codegen import write_project
    from pockmcu.compiler import compile_model

    out = write_project(compile_model(FIXTURES / "add_diff_scales.tflite", ram=1 << 20, target="qemu-m3"),
                        tmp_path / "eq")
    c = (out / "model.c").read_text()
    assert "arm_elementwise_add_s8(" in c and "pockmcu_add_broadcast_s8(" not in c
    out = write_project(compile_model(FIXTURES / "add_diff_scales.tflite", ram=1 << 20), tmp_path / "eq_dsp")
    c = (out / "model.c").read_text()
    assert "pockmcu_elementwise_add_s8_dsp(" in c and "arm_elementwise_add_s8(" not in c
    out = write_project(compile_model(FIXTURES / "binops_add_per_channel_const_relu.tflite", ram=1 << 20),
                        tmp_path / "bc")
    c = (out / "model.c").read_text()
    assert "pockmcu_add_broadcast_s8(" in c and "arm_elementwise_add_s8(" not in c


def test_refusals(tmp_path):
    """What is refused says so in one line (exit 2): non-broadcastable shapes, a lower-rank activation."""
    from test_errors import pockmcu

    q = (0.05, 0)
    for shapes, needle in [([(1, 4, 4, 8), (1, 4, 4, 3), (1, 4, 4, 8)], "do not broadcast"),
                           ([(1, 4, 4, 8), (8,), (1, 4, 4, 8)], "fewer dimensions")]:
        (tmp_path / "m.tflite").write_bytes(single_op_model("SUB", [q, q, q], shapes, None, "SubOptions", {}))
        r = pockmcu("gen", tmp_path / "m.tflite", "--ram", "64KB", "-o", tmp_path / "o")
        assert r.returncode == 2 and needle in r.stderr and "SUB" in r.stderr, r.stderr
        assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1


# --------------------------------------------------------------------------
# gradient kernels
# --------------------------------------------------------------------------

GRAD_SOURCES = ["pockmcu_broadcast_grad_f32", "pockmcu_mul_grad_f32", "pockmcu_squared_difference_grad_f32",
                "pockmcu_maximum_grad_f32", "pockmcu_minimum_grad_f32", "pockmcu_leaky_relu_grad_f32",
                "pockmcu_prelu_grad_f32", "pockmcu_clamp_grad_f32", "pockmcu_tanh_grad_f32"]


class Kernels:
    """The gradient kernels through cffi (host gcc, -Werror, -ffp-contract=off as the generated build)."""

    def __init__(self, outdir: Path):
        import cffi

        so = build_kernel_lib(outdir / "libbinops_grad.so", [KERNELS / f"{n}.c" for n in GRAD_SOURCES])
        self.ffi = cffi.FFI()
        self.ffi.cdef(kernel_cdef())
        self.lib = self.ffi.dlopen(str(so))

    def f32(self, a):
        return self.ffi.from_buffer("float[]", a)

    def i8(self, a):
        return self.ffi.from_buffer("int8_t[]", a)

    def i32(self, a):
        return self.ffi.from_buffer("int32_t[]", a)


@pytest.fixture(scope="module")
def kernels(tmp_path_factory):
    return Kernels(tmp_path_factory.mktemp("grad"))


def _binary_grad_case(rng, out_shape, xshape, oshape):
    from pockmcu.ops.binary import dims15

    x = rng.integers(-128, 128, xshape).astype(np.int8)
    o = rng.integers(-128, 128, oshape).astype(np.int8)
    (sx, zx), (so, zo) = random_q(rng, (-2, 0)), random_q(rng, (-2, 0))
    dz = rng.standard_normal(out_shape).astype(F32)
    return x, o, (sx, zx), (so, zo), dz, np.array(dims15(out_shape, xshape, oshape), np.int32)


GRAD_SHAPES = [((1, 4, 4, 8), (1, 4, 4, 8), (1, 4, 4, 8)), ((1, 4, 4, 8), (1, 4, 4, 8), (8,)),
               ((1, 4, 4, 8), (1, 1, 1, 8), (1, 4, 4, 8)), ((1, 4, 5, 6), (1, 4, 1, 1), (1, 4, 5, 6)),
               ((1, 3, 4, 8), (1, 3, 1, 8), (1, 1, 4, 1))]


def _torch_binary(kind, xr, orr, dz, dtype):
    import torch

    xt = torch.tensor(xr.astype(dtype), requires_grad=True)
    ot = torch.tensor(orr.astype(dtype), requires_grad=True)
    f = {"ADD": lambda a, b: a + b, "SUB_0": lambda a, b: a - b, "SUB_1": lambda a, b: b - a,
         "MUL": lambda a, b: a * b, "SQUARED_DIFFERENCE": lambda a, b: (a - b) ** 2,
         "MAXIMUM": torch.maximum, "MINIMUM": torch.minimum}[kind]
    f(xt, ot).backward(torch.tensor(dz.astype(dtype)))
    return xt.grad.numpy()


@pytest.mark.parametrize("kind", ["ADD", "SUB_1", "MUL", "SQUARED_DIFFERENCE", "MAXIMUM", "MINIMUM"])
def test_binary_gradients_equal_torch(kind, kernels):
    """Each kernel's input gradient against PyTorch autograd on the dequantized operands: the same float32
    bits when nothing is summed, within float32 rounding of float64 when broadcast axes are summed; and
    against the op's numpy reference (the training reference) bit for bit."""
    import torch

    torch.set_num_threads(1)
    k, ffi = kernels, kernels.ffi
    rng = np.random.default_rng(7)
    for out_shape, xshape, oshape in GRAD_SHAPES:
        for _ in range(3):
            x, o, (sx, zx), (so, zo), dz, dims = _binary_grad_case(rng, out_shape, xshape, oshape)
            if kind in ("MAXIMUM", "MINIMUM"):
                so, zo = sx, zx          # the converter's equal quantization; ties then occur
                if o.shape == x.shape:
                    o[..., ::3] = x[..., ::3]
            xr = F32(sx) * (x.astype(np.int32) - zx).astype(F32)
            orr = F32(so) * (o.astype(np.int32) - zo).astype(F32)
            got = np.full(x.size, np.nan, F32)
            if kind in ("ADD", "SUB_1"):
                k.lib.pockmcu_broadcast_grad_f32(k.f32(dz), k.i32(dims), 1.0 if kind == "ADD" else -1.0, x.size,
                                                 k.f32(got))
            elif kind == "MUL":
                k.lib.pockmcu_mul_grad_f32(k.f32(dz), k.i8(o), k.i32(dims), float(so), zo, x.size, k.f32(got))
            else:
                fn = getattr(k.lib, f"pockmcu_{kind.lower()}_grad_f32")
                fn(k.f32(dz), k.i8(x), k.i8(o), k.i32(dims), float(sx), zx, float(so), zo, x.size, k.f32(got))
            got = got.reshape(xshape)
            want32 = _torch_binary(kind, xr, orr, dz, np.float32)
            want64 = _torch_binary(kind, xr, orr, dz, np.float64)
            if xshape == out_shape:   # the kernel sums into +0, so PyTorch's -0 products compare as +0
                np.testing.assert_array_equal(got.view(np.uint32), (want32 + F32(0)).view(np.uint32),
                                              err_msg=f"{kind} {xshape}")
            scale = np.abs(want64).max() + 1e-30
            np.testing.assert_allclose(got, want64, rtol=0, atol=2e-6 * scale * np.prod(out_shape) / np.prod(xshape))
            assert ffi is not None
            np.testing.assert_array_equal(got.view(np.uint32), _numpy_binary_grad(kind, x, o, (sx, zx), (so, zo), dz,
                                                                                    out_shape).view(np.uint32))


def _numpy_binary_grad(kind, x, o, qx, qo, dz, out_shape):
    """The training reference of pockmcu/ops/binary.py on a tiny graph holding these tensors."""
    from pockmcu.ir import Graph, Op, Quant, Tensor
    from pockmcu.ops import opdef
    from pockmcu.ops.base import make_op

    def q(s, z):
        return Quant(np.array([s], F32), np.array([z], np.int32))

    t = {"x": Tensor("x", x.shape, "int8", q(*qx)), "o": Tensor("o", o.shape, "int8", q(*qo)),
         "y": Tensor("y", out_shape, "int8", q(0.1, 0)), "dz": Tensor("dz", out_shape, "float32"),
         "dx": Tensor("dx", x.shape, "float32")}
    fwd = Op(kind="ADD", name="f", inputs=["x", "o"], outputs=["y"])
    g = Graph(tensors=t, ops=[], inputs=[], outputs=[])
    gk = {"ADD": "BROADCAST_GRAD", "SUB_1": "BROADCAST_GRAD"}.get(kind, f"{kind}_GRAD")
    ins = {"BROADCAST_GRAD": ["dz"], "MUL_GRAD": ["dz", "o"]}.get(gk, ["dz", "x", "o"])
    op = make_op(gk, "b", ins, ["dx"], layer=fwd, target=0, coef=-1.0 if kind == "SUB_1" else 1.0)
    op.prepared = opdef(gk).prepare(g, op)
    vals = {"dz": dz[None] if dz.shape[0] != 1 else dz, "x": x, "o": o}
    return opdef(gk).reference(g, op, [vals[i] for i in ins])[0].astype(F32).reshape(x.shape)


# --------------------------------------------------------------------------
# training through the classifier
# --------------------------------------------------------------------------

SPEC = {"bias": "all", "weights": "all", "optimizer": {"kind": "momentum", "lr": 0.05, "momentum": 0.5}, "batch": 2}


def classifier(path, tmp_path):
    from pockmcu.codegen import write_project
    from pockmcu.compiler import TrainOptions, compile_model

    c = compile_model(path, ram=1 << 20, train=TrainOptions(spec=json.dumps(SPEC), loss="xent"))
    return c, write_project(c, tmp_path / "cls")


def data(n, seed):
    from pockmcu.train import Data

    rng = np.random.default_rng(seed)
    return Data(rng.integers(-128, 128, (n, 6, 6, 3)).astype(np.int8), rng.integers(0, 5, n).astype(np.int32))


def train_host_equals_reference(path, tmp_path, grad_kinds):
    """Every weight and bias trains (momentum, batch 2), 4 steps: generated C and numpy reference end with
    the same bytes, and conv0 (before every op under test) has moved."""
    from pockmcu.train import HostTrainer
    from pockmcu.training import params
    from pockmcu.training.reference import ReferenceTrainer

    c, out = classifier(path, tmp_path)
    kinds = [op.kind for op in c.train.schedule]
    assert set(grad_kinds) <= set(kinds), set(grad_kinds) - set(kinds)
    d = data(4, seed=4)
    host = HostTrainer(out)
    host.init(3)
    ref = ReferenceTrainer(c.train, seed=3)
    for i in range(4):
        loss_c, _, _ = host.step(d.x[i], d.y[i])
        loss_ref = ref.step(d.x[i], d.y[i])
        assert abs(loss_c - loss_ref) <= 1e-6 * max(1.0, abs(loss_ref))
    layout = params.entries(c.train)
    got = params.expand(layout, host.params(), {t: c.graph.t(t).data for t in c.train.trainable_tensors})
    for t, want in ref.params().items():
        np.testing.assert_array_equal(got[t], want, err_msg=t)
    conv_w = c.graph.ops[0].inputs[1]
    assert (got[conv_w] != c.graph.t(conv_w).data).any(), "no gradient reached conv0"


def train_qemu_equals_host(path, tmp_path):
    from pockmcu.train import HostTrainer, train_on_target
    from pockmcu.training import params

    c, out = classifier(path, tmp_path)
    d = data(8, seed=6)
    host = HostTrainer(out)
    host.train(d, epochs=1, seed=5, log=lambda *_: None)
    _, raw_dev, _ = train_on_target(out, "qemu-m4", d, epochs=1, seed=5, log=lambda *_: None)
    assert raw_dev == host.params()
    initial = params.pack(params.entries(c.train), {t: c.graph.t(t).data for t in c.train.trainable_tensors})
    assert raw_dev != initial


def test_training_through_binops_c_equals_reference(tmp_path):
    train_host_equals_reference(FIXTURES / "binops_classifier.tflite", tmp_path,
                                ["BROADCAST_GRAD", "SQUARED_DIFFERENCE_GRAD", "MUL_GRAD"])


@pytest.mark.qemu
def test_training_through_binops_on_qemu_equals_host(tmp_path):
    train_qemu_equals_host(FIXTURES / "binops_classifier.tflite", tmp_path)
