"""The ONNX forms of the issue-12 operators (tests/fixtures/onnx_ops, written by make_onnx_fixtures.py
``main_ops``): Add / Sub / Mul with broadcasting and constants, Max / Min, PRelu, LeakyRelu, Tanh,
Sigmoid, HardSwish, Transpose, Split, Concat, Slice, Tile, Gather, Squeeze / Unsqueeze, DepthToSpace /
SpaceToDepth, ReduceMean / Sum / Max / Min, Resize, ConvTranspose, MatMul of two activations,
LogSoftmax, Softmax over channels; QDQ and QOperator, int8 and uint8.

* the generated C (host simulation) equals the numpy reference byte for byte, on random and on extreme
  inputs (far outside the input range: every quantized input saturates), in both numerics modes;
* against onnxruntime, op by op (each op fed onnxruntime's own values of its inputs, tests/test_onnx.py's
  ``layerwise``) and end to end: ops whose arithmetic pockmcu emulates (data movement, Max / Min,
  ReduceMax / Min, nearest resizes, the requantization tables, QLinearConv / MatMul / GlobalAveragePool /
  Softmax) are bit-exact with --numerics onnxruntime; the ops that keep TFLite Micro's arithmetic differ
  by design, and the largest differences measured here are the bounds (LAYER_LSB, END_LSB);
* training through every differentiable op: three steps of the generated C end with the numpy training
  reference's parameters, and host-simulation epochs lower the loss;
* what is refused says so in one line.
"""

from __future__ import annotations

import importlib.util
import json
from types import SimpleNamespace

import numpy as np
import onnx
import pytest
from conftest import ROOT, model_id, random_inputs
from test_onnx import layerwise, lsb_diff, ort_run, output_scale

from pockmcu.compiler import compile_model, parse_size
from pockmcu.errors import PockError
from pockmcu.reference import run_reference
from pockmcu.sim import load

OPS = ROOT / "tests" / "fixtures" / "onnx_ops"
FIXTURES = sorted(OPS.glob("*.onnx"))
#: pockmcu refuses these with --numerics onnxruntime (onnxruntime runs ConvTranspose in float32)
TFLM_ONLY = {"convtranspose_qdq_s8_pc", "convtranspose_qdq_u8_pt"}
N = 20

#: IR ops whose arithmetic under --numerics onnxruntime is onnxruntime's: no difference allowed
ORT_EXACT_KINDS = {"SLICE_ND", "STRIDED_SLICE", "SPLIT_V", "TILE", "GATHER", "DEPTH_TO_SPACE", "SPACE_TO_DEPTH",
                   "TRANSPOSE", "RESHAPE", "CONCATENATION", "MAXIMUM", "MINIMUM", "REDUCE_MAX", "REDUCE_MIN",
                   "RESIZE_NEAREST_NEIGHBOR", "REQUANTIZE", "CONV_2D", "FULLY_CONNECTED", "SOFTMAX", "QUANTIZE"}
#: the largest op-by-op difference from onnxruntime (LSB) of an op with TFLite Micro's arithmetic, measured on
#: these fixtures in either numerics mode (TANH and LOGISTIC write TFLite's fixed 1/128, 1/256 output scale,
#: requantized to the model's: two roundings)
LAYER_LSB = {"ADD": 1, "ADD_CONST": 1, "SUB": 1, "MUL": 1, "PRELU": 1, "LEAKY_RELU": 1, "HARD_SWISH": 1,
             "REQUANTIZE": 1, "MEAN": 1, "SUM": 1, "RESIZE_BILINEAR": 1, "BATCH_MATMUL": 1, "LOG_SOFTMAX": 1,
             "TRANSPOSE_CONV": 1, "CONV_2D": 1, "FULLY_CONNECTED": 1, "SOFTMAX": 1, "TANH": 1, "LOGISTIC": 1}
#: ops writing TFLite's fixed output quantization, followed by a REQUANTIZE to the model's
FIXED_OUTPUT = {"TANH", "LOGISTIC", "LOG_SOFTMAX", "SOFTMAX"}
#: end to end (model output, LSB of the output scale), measured: a 1-LSB difference early is scaled by the
#: ratio of the scales after it (maxmin: Min with a small constant makes the output scale 18x finer than the
#: convolutions'; an attention block amplifies through its softmax)
END_LSB = {("maxmin", "tflm"): 18, ("matmul_acts", None): 11, ("matmul_acts", "tflm"): 11,
           ("softmax_channels", "tflm"): 4, ("tanh", None): 2, ("tanh", "tflm"): 4, ("convtranspose", "tflm"): 2,
           ("add_bcast", "tflm"): 2, ("mul_bcast", "tflm"): 2,
           ("sigmoid", "tflm"): 2, ("hardswish", "tflm"): 2, ("reduce_max_w", "tflm"): 2,
           ("reduce_min_ch", "tflm"): 2, ("reduce_sum_c", "tflm"): 2}


def base_name(model) -> str:
    return model.stem.rsplit("_", 3)[0] if model.stem.split("_")[-3] in ("qdq", "qop") else model.stem


def modes(model):
    return ["tflm"] if model.stem in TFLM_ONLY else [None, "tflm"]


CASES = [pytest.param(m, n, id=f"{model_id(m)}-{n or 'ort'}") for m in FIXTURES for n in modes(m)]


def extreme_inputs(spec, n: int = 6) -> np.ndarray:
    """Inputs far outside the quantized range (every input value saturates), and zeros."""
    shape = (n,) + tuple(spec.shape[1:])
    if spec.dtype != "float32":
        info = np.iinfo(spec.dtype)
        vals = [info.min, info.max]
    else:
        vals = [-1e4, 1e4, 0.0]
    rng = np.random.default_rng(11)
    return np.asarray(rng.choice(vals, shape), spec.np_dtype)


def test_inventory_and_regeneration(tmp_path):
    spec = importlib.util.spec_from_file_location("make_onnx_fixtures", ROOT / "tests" / "fixtures" /
                                                  "make_onnx_fixtures.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    written = mod.main_ops(tmp_path)
    assert {p.name for p in written.values()} == {p.name for p in FIXTURES}
    for p in written.values():
        assert p.read_bytes() == (OPS / p.name).read_bytes(), f"{p.name} differs when regenerated"
    assert all(p.stat().st_size < 16_000 for p in FIXTURES)
    kinds = {n.op_type for p in FIXTURES for n in onnx.load(p).graph.node}
    for op in ("Add", "Sub", "Mul", "Max", "Min", "PRelu", "LeakyRelu", "Tanh", "HardSwish", "Transpose", "Split",
               "Slice", "Tile", "Gather", "Squeeze", "Unsqueeze", "DepthToSpace", "SpaceToDepth", "ReduceMean",
               "ReduceSum", "ReduceMax", "ReduceMin", "Resize", "ConvTranspose", "LogSoftmax", "Softmax",
               "QLinearAdd", "QLinearMul", "QLinearSigmoid", "QLinearLeakyRelu", "QLinearMatMul", "Concat"):
        assert op in kinds, op


@pytest.mark.parametrize("model,numerics", CASES)
def test_host_simulation_equals_reference(model, numerics, generated):
    gen = generated(model, numerics)
    for xs in (gen.inputs(N, seed=7), [extreme_inputs(t) for t in gen.input_specs]):
        got = load(gen.out).invoke(*xs)
        (want,) = run_reference(gen.compiled.graph, *xs)
        assert got.tobytes() == want.tobytes(), f"{int(np.sum(got != want))} of {got.size} values differ"


def _measure(gen, xs):
    g = gen.compiled.graph
    (ours,) = run_reference(g, *xs)
    theirs, _ = ort_run(gen.model, xs)
    return lsb_diff(ours, theirs.reshape(ours.shape), output_scale(g), ours.dtype == np.float32)


@pytest.mark.parametrize("model,numerics", CASES)
def test_against_onnxruntime(model, numerics, generated):
    gen = generated(model, numerics)
    # per op on the graph without streaming: a streamed layer's tiles have no onnxruntime values of their own
    # to be fed, so its pasted output would carry the tiles' errors; end to end below is the generated build's
    flat = SimpleNamespace(model=gen.model, inputs=gen.inputs,
                           compiled=compile_model(model, ram=parse_size("512KB"), numerics=numerics, stream="off"))
    per_op = layerwise(flat, N)
    assert per_op, "no layer could be compared with onnxruntime"
    g = flat.compiled.graph
    producer = {o: op.kind for op in g.ops for o in op.outputs}
    kinds = set()
    for name, (kind, worst, frac) in per_op.items():
        op = next(o for o in g.ops if o.name == name)
        if kind == "REQUANTIZE" and producer.get(op.inputs[0]) in FIXED_OUTPUT:
            kind = producer[op.inputs[0]]       # measured as one: TFLite's op, then the model's scale
        kinds.add(kind)
        bound = 0 if numerics is None and kind in ORT_EXACT_KINDS else LAYER_LSB.get(kind, 0)
        assert worst <= bound, f"{name} ({kind}) differs from onnxruntime by {worst} LSB ({frac:.2%}); bound {bound}"
    end = max(int(_measure(gen, xs).max()) for xs in (gen.inputs(N, seed=3), [extreme_inputs(t) for t in
                                                                               gen.input_specs]))
    bound = END_LSB.get((base_name(model), numerics), 0 if numerics is None and kinds <= ORT_EXACT_KINDS else 1)
    print(f"{model.stem} [{numerics or 'onnxruntime'}]: end to end max {end} LSB; per op "
          + ", ".join(f"{k} {w}" for k, w, _ in per_op.values()))
    assert end <= bound, f"end to end {end} LSB (bound {bound})"


def test_layouts_cost_nothing_where_they_can():
    """Per-axis ops work in the layout the tensor is held in: no TRANSPOSE beyond the model's own edges."""
    from pockmcu.compiler import load_and_check

    for name in ("slice_ops_qdq_s8_pc", "split_concat_qdq_s8_pc", "gather_ops_qdq_s8_pc", "tile_ops_qdq_s8_pc",
                 "add_bcast_qdq_s8_pc", "sub_bcast_qdq_s8_pc", "prelu_qdq_s8_pc", "reduce_max_w_qdq_s8_pc"):
        kinds = [op.kind for op in load_and_check(OPS / f"{name}.onnx").ops]
        assert kinds.count("TRANSPOSE") <= 2, (name, kinds)      # NCHW input -> NHWC, NHWC -> NCHW output
    # Q @ K^T: the transposed operand is read transposed by the kernel (adj_y), no copy
    g = load_and_check(OPS / "matmul_acts_qdq_s8_pc.onnx")
    mm = [op for op in g.ops if op.kind == "BATCH_MATMUL"]
    assert "TRANSPOSE" not in {op.kind for op in g.ops} and mm[0].options.adj_y and not mm[1].options.adj_y


# -- training ------------------------------------------------------------------------------------

#: through Sigmoid (LOGISTIC_GRAD; mul_bcast's squeeze-excite gate), Softmax over channels and LogSoftmax
#: inside the network (SOFTMAX_GRAD, LOG_SOFTMAX_GRAD) too
TRAIN = ["mul_bcast_qdq_s8_pc", "sigmoid_qdq_s8_pc", "softmax_channels_qdq_s8_pc", "logsoftmax_qdq_s8_pc",
         "add_bcast_qdq_s8_pc", "sub_bcast_qdq_u8_pt", "maxmin_qdq_s8_pt",
         "leakyrelu_qop_u8_pt", "prelu_qdq_s8_pc", "tanh_qdq_s8_pc", "hardswish_qdq_s8_pc",
         "transpose_ops_qdq_s8_pc", "split_concat_qdq_s8_pc", "slice_ops_qdq_u8_pt", "tile_ops_qdq_s8_pc",
         "gather_ops_qdq_s8_pc", "depth_space_qdq_s8_pc", "reduce_mean_c_qdq_s8_pc", "reduce_sum_hw_qdq_s8_pc",
         "reduce_max_w_qdq_s8_pc", "reduce_min_ch_qdq_s8_pc", "resize_nearest_qdq_s8_pc", "resize_linear_qdq_s8_pc",
         "convtranspose_qdq_s8_pc", "matmul_acts_qdq_s8_pc"]
#: (layer trained, learning rate) where not (0, 0.02): a smaller step for a sum over 20 values (the attention
#: block's first layer, the Q projection, trains through its SOFTMAX)
TRAIN_SPEC = {"reduce_sum_hw_qdq_s8_pc": (0, 0.001)}


@pytest.mark.parametrize("name", TRAIN)
def test_training_through_the_op(name, tmp_path):
    """The first layer (before the op) trains: gradients pass through the op. Three steps of the generated
    C end with the numpy reference's parameters; five host epochs lower the mean loss."""
    from pockmcu.codegen import write_project
    from pockmcu.compiler import TrainOptions, compile_model, parse_size
    from pockmcu.train import HostTrainer
    from pockmcu.training import params
    from pockmcu.training.reference import ReferenceTrainer

    model = OPS / f"{name}.onnx"
    numerics = "tflm" if model.stem in TFLM_ONLY else None
    loss = "mse"
    layer, lr = TRAIN_SPEC.get(name, (0, 0.02))
    spec = json.dumps({"bias": "none", "weights": [{"layer": layer, "ratio": 1.0}],
                       "optimizer": {"kind": "sgd", "lr": lr}})
    c = compile_model(model, ram=parse_size("1MB"), train=TrainOptions(spec=spec, loss=loss), numerics=numerics)
    out = write_project(c, tmp_path / "out")
    g = c.graph
    x, y = g.t(g.inputs[0]), g.t(g.outputs[0])
    xs = random_inputs(x.shape, x.np_dtype, 12, 9)
    rng = np.random.default_rng(9)
    ys = (rng.standard_normal((12,) + y.shape[1:]) * 0.5).astype(np.float32)
    host, ref = HostTrainer(out), ReferenceTrainer(c.train, seed=5)
    host.init(5)
    for i in range(3):
        host.step(xs[i], ys[i])
        ref.step(xs[i], ys[i])
    layout = params.entries(c.train)
    got = params.expand(layout, host.params(), {t: g.t(t).data for t in c.train.trainable_tensors})
    for t, want in ref.params().items():
        np.testing.assert_array_equal(got[t], want, err_msg=t)
    host.init(5)
    losses = [np.mean([host.step(xs[i], ys[i])[0] for i in range(12)]) for _ in range(5)]
    print(f"{name}: mean loss per epoch {[round(float(v), 4) for v in losses]}")
    assert losses[-1] < losses[0], losses


# -- refusals --------------------------------------------------------------------------------------


def _edited(tmp_path, name: str, edit) -> str:
    m = onnx.load(OPS / f"{name}.onnx")
    edit(m.graph)
    p = tmp_path / f"{name}_edited.onnx"
    onnx.save(m, p)
    return p


def _node(g, op_type):
    return next(n for n in g.node if n.op_type == op_type)


def _set_attr(node, name, value):
    for a in list(node.attribute):
        if a.name == name:
            node.attribute.remove(a)
    node.attribute.append(onnx.helper.make_attribute(name, value))


REFUSED = {
    "convtranspose_ort": ("convtranspose_qdq_s8_pc", None, lambda g: None, "--numerics tflm"),
    "resize_cubic": ("resize_linear_qdq_s8_pc", "tflm", lambda g: _set_attr(_node(g, "Resize"), "mode", "cubic"),
                     "cubic is not supported"),
    "resize_nearest_mismatch": ("resize_nearest_asym_qdq_s8_pc", "tflm",
                                lambda g: _set_attr(_node(g, "Resize"), "nearest_mode", "ceil"),
                                "picks other pixels"),
    "resize_linear_crop": ("resize_linear_qdq_s8_pc", "tflm",
                           lambda g: _set_attr(_node(g, "Resize"), "coordinate_transformation_mode",
                                               "tf_crop_and_resize"), "coordinate_transformation_mode"),
    "depth_to_space_mode": ("depth_space_qdq_s8_pc", "tflm",
                            lambda g: _set_attr(_node(g, "DepthToSpace"), "mode", "XYZ"), "DCR or CRD"),
    "reduce_batch": ("reduce_max_w_qdq_s8_pc", "tflm", lambda g: _set_attr(_node(g, "ReduceMax"), "axes", [0, 3]),
                     "over the batch axis"),
    "convtranspose_pads": ("convtranspose_qdq_s8_pc", "tflm",
                           lambda g: _set_attr(_node(g, "ConvTranspose"), "pads", [2, 2, 0, 0]), "SAME or VALID"),
    "gather_batch": ("gather_ops_qdq_s8_pc", "tflm", lambda g: _set_attr(_node(g, "Gather"), "axis", 0),
                     "batch axis"),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_refusals_are_one_line(case, tmp_path):
    from pockmcu.compiler import load_and_check

    name, numerics, edit, needle = REFUSED[case]
    with pytest.raises(PockError) as e:
        load_and_check(_edited(tmp_path, name, edit), numerics)
    msg = str(e.value)
    assert needle in msg and "\n" not in msg, msg


def test_refused_convtranspose_compiles_as_suggested(generated):
    """The ConvTranspose refusal suggests --numerics tflm: that compiles and runs (test_against_onnxruntime
    measures it)."""
    gen = generated(OPS / "convtranspose_qdq_s8_pc.onnx", "tflm")
    assert "TRANSPOSE_CONV" in {op.kind for op in gen.compiled.graph.ops}
