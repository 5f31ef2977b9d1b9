"""Per-kernel MAC per instruction: single-layer int8 TFLite models built on the fly, measured by
``pockmcu bench`` (pockmcu/bench.py ``bench_model``) on each QEMU core with our optimized kernels
(``--kernels auto``: whatever the kernel table chooses for the core), the portable ones and, with a
CMSIS-NN checkout, Arm's (``--kernels cmsis-nn`` built with CMSIS_NN_PATH).

    python -m pockmcu.bench --kernels-table [--targets qemu-m4,...]

The layers are the issue's shapes (1x1 conv at 64 input channels, 3x3 conv, depthwise 3x3, fully
connected) and a few other channel counts, odd ones included. Every model is written with the
``tflite`` package's flatbuffer code: one operator, int8 input with a nonzero zero point, per-channel
int8 weights (per-tensor for fully connected), int32 bias, seeded random values.
"""

from __future__ import annotations

import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import flatbuffers
import numpy as np
import tflite

from .errors import PockError

_TYPES = {"int8": tflite.TensorType.INT8, "int32": tflite.TensorType.INT32}


@dataclass(frozen=True)
class Layer:
    """One benchmark layer: kind "conv" (k x k), "dw" (depthwise k x k; cout = cin x its channel multiplier),
    "fc", "avgpool" (k x k, 0 = global) or "add" (two maps of h x w x cin)."""

    kind: str
    h: int = 1
    w: int = 1
    cin: int = 1
    cout: int = 1
    k: int = 1
    stride: int = 1

    @property
    def name(self) -> str:
        if self.kind == "fc":
            return f"fully connected {self.cin} -> {self.cout}"
        what = "depthwise" if self.kind == "dw" else "conv"
        return (f"{what} {self.k}x{self.k}{f' stride {self.stride}' if self.stride > 1 else ''} "
                f"{self.h}x{self.w}x{self.cin}" + (f" x{self.cout // self.cin}" if self.kind == "dw" and self.cout > self.cin
                                                   else "" if self.kind == "dw" else f" -> {self.cout}"))


#: the issue's shapes first (KWS-like 25x5 maps), then other channel counts
LAYERS = (
    Layer("conv", 25, 5, 64, 64, 1),
    Layer("conv", 16, 16, 32, 32, 3),
    Layer("dw", 25, 5, 64, 64, 3),
    Layer("fc", cin=256, cout=64),
    Layer("conv", 25, 5, 16, 16, 1),
    Layer("conv", 12, 12, 67, 33, 1),
    Layer("conv", 16, 16, 8, 16, 3),
    Layer("conv", 16, 16, 24, 24, 3, 2),
    Layer("dw", 16, 16, 32, 32, 3),
    Layer("dw", 12, 12, 67, 67, 3, 2),
    Layer("fc", cin=64, cout=12),
    Layer("fc", cin=1000, cout=67),
)


class _Writer:
    """A one-subgraph TFLite model: tensors (with optional constant data) and operators."""

    def __init__(self) -> None:
        self.tensors: list[dict] = []
        self.ops: list[dict] = []

    def tensor(self, name, shape, dtype, scale, zero_point, data=None, qdim=0) -> int:
        self.tensors.append(dict(name=name, shape=list(shape), dtype=dtype, scale=list(scale),
                                 zp=list(zero_point), data=data, qdim=qdim))
        return len(self.tensors) - 1

    def op(self, code: str, inputs, outputs, options_type: str, options: dict) -> None:
        self.ops.append(dict(code=code, inputs=inputs, outputs=outputs, type=options_type, options=options))

    def serialize(self, inputs, outputs) -> bytes:
        b = flatbuffers.Builder(1 << 16)

        def vec(v, dt=np.int32):
            return b.CreateNumpyVector(np.asarray(v, dt))

        datas = [None] + [t["data"] for t in self.tensors if t["data"] is not None]
        bufs = []
        for d in datas:
            raw = None
            if d is not None:
                raw = np.ascontiguousarray(d).astype(d.dtype.newbyteorder("<")).tobytes()
                b.StartVector(1, len(raw), 16)
                b.head -= len(raw)
                b.Bytes[b.head:b.head + len(raw)] = raw
                raw = b.EndVector()
            tflite.BufferStart(b)
            if raw is not None:
                tflite.BufferAddData(b, raw)
            bufs.append(tflite.BufferEnd(b))
        tens, nbuf = [], 0
        for t in self.tensors:
            name, shape = b.CreateString(t["name"]), vec(t["shape"])
            sc, zp = vec(t["scale"], np.float32), vec(t["zp"], np.int64)
            tflite.QuantizationParametersStart(b)
            tflite.QuantizationParametersAddScale(b, sc)
            tflite.QuantizationParametersAddZeroPoint(b, zp)
            tflite.QuantizationParametersAddQuantizedDimension(b, t["qdim"])
            q = tflite.QuantizationParametersEnd(b)
            if t["data"] is not None:
                nbuf += 1
            tflite.TensorStart(b)
            tflite.TensorAddShape(b, shape)
            tflite.TensorAddType(b, _TYPES[t["dtype"]])
            tflite.TensorAddBuffer(b, nbuf if t["data"] is not None else 0)
            tflite.TensorAddName(b, name)
            tflite.TensorAddQuantization(b, q)
            tens.append(tflite.TensorEnd(b))
        codes = list(dict.fromkeys(o["code"] for o in self.ops))
        ops = []
        for o in self.ops:
            ins, outs = vec(o["inputs"]), vec(o["outputs"])
            getattr(tflite, o["type"] + "Start")(b)
            for k in sorted(o["options"]):
                getattr(tflite, f"{o['type']}Add{k}")(b, o["options"][k])
            opts = getattr(tflite, o["type"] + "End")(b)
            tflite.OperatorStart(b)
            tflite.OperatorAddOpcodeIndex(b, codes.index(o["code"]))
            tflite.OperatorAddInputs(b, ins)
            tflite.OperatorAddOutputs(b, outs)
            tflite.OperatorAddBuiltinOptionsType(b, getattr(tflite.BuiltinOptions, o["type"]))
            tflite.OperatorAddBuiltinOptions(b, opts)
            ops.append(tflite.OperatorEnd(b))

        def table(start, offs):
            start(b, len(offs))
            for off in reversed(offs):
                b.PrependUOffsetTRelative(off)
            return b.EndVector()

        tv, ov = table(tflite.SubGraphStartTensorsVector, tens), table(tflite.SubGraphStartOperatorsVector, ops)
        iv, outv, sgname = vec(inputs), vec(outputs), b.CreateString("main")
        tflite.SubGraphStart(b)
        tflite.SubGraphAddTensors(b, tv)
        tflite.SubGraphAddInputs(b, iv)
        tflite.SubGraphAddOutputs(b, outv)
        tflite.SubGraphAddOperators(b, ov)
        tflite.SubGraphAddName(b, sgname)
        sg = tflite.SubGraphEnd(b)
        code_offs = []
        for c in codes:
            n = getattr(tflite.BuiltinOperator, c)
            tflite.OperatorCodeStart(b)
            tflite.OperatorCodeAddDeprecatedBuiltinCode(b, min(n, 127))
            tflite.OperatorCodeAddBuiltinCode(b, n)
            tflite.OperatorCodeAddVersion(b, 3)
            code_offs.append(tflite.OperatorCodeEnd(b))
        cv = table(tflite.ModelStartOperatorCodesVector, code_offs)
        sv = table(tflite.ModelStartSubgraphsVector, [sg])
        bv = table(tflite.ModelStartBuffersVector, bufs)
        desc = b.CreateString("pockmcu kernel benchmark layer")
        tflite.ModelStart(b)
        tflite.ModelAddVersion(b, 3)
        tflite.ModelAddOperatorCodes(b, cv)
        tflite.ModelAddSubgraphs(b, sv)
        tflite.ModelAddDescription(b, desc)
        tflite.ModelAddBuffers(b, bv)
        b.Finish(tflite.ModelEnd(b), file_identifier=b"TFL3")
        return bytes(b.Output())


def layer_model(layer: Layer, seed: int = 0) -> bytes:
    """The single-layer int8 .tflite model of ``layer`` (SAME padding, no fused activation)."""
    rng = np.random.default_rng(seed)
    s_in, zp_in = 0.05, -7
    fw = _Writer()
    if layer.kind in ("avgpool", "add"):
        return _elementwise_model(fw, layer, s_in, zp_in)
    if layer.kind == "fc":
        x = fw.tensor("input", (1, layer.cin), "int8", [s_in], [zp_in])
        w_shape, fan_in, per_channel = (layer.cout, layer.cin), layer.cin, False
    else:
        x = fw.tensor("input", (1, layer.h, layer.w, layer.cin), "int8", [s_in], [zp_in])
        if layer.kind == "dw" and layer.cout % layer.cin:
            raise ValueError(f"depthwise: {layer.cout} output channels are not a multiple of {layer.cin}")
        cout = layer.cout
        w_shape = (1, layer.k, layer.k, cout) if layer.kind == "dw" else (cout, layer.k, layer.k, layer.cin)
        fan_in, per_channel = layer.k * layer.k * (1 if layer.kind == "dw" else layer.cin), True
    cout = w_shape[3] if layer.kind == "dw" else w_shape[0]
    s_w = (0.01 * (1 + rng.random(cout))) if per_channel else np.array([0.01])
    wq = rng.integers(-127, 128, w_shape).astype(np.int8)
    w = fw.tensor("layer/weights", w_shape, "int8", s_w, [0] * len(s_w), wq, qdim=3 if layer.kind == "dw" else 0)
    s_b = s_in * (s_w if per_channel else np.full(cout, s_w[0]))
    bias = rng.integers(-2000, 2000, cout).astype(np.int32)
    b = fw.tensor("layer/bias", (cout,), "int32", s_b, [0] * cout, bias)
    # the accumulator's spread is about 74 * 73 * sqrt(fan_in) input-weight units: +-3 of it over the int8 range
    s_out = float(s_in * np.mean(s_w) * 74 * 73 * np.sqrt(fan_in) * 3 / 128)
    if layer.kind == "fc":
        y = fw.tensor("layer/out", (1, cout), "int8", [s_out], [3])
        fw.op("FULLY_CONNECTED", [x, w, b], [y], "FullyConnectedOptions", dict(FusedActivationFunction=0))
    else:
        oh, ow = -(-layer.h // layer.stride), -(-layer.w // layer.stride)
        y = fw.tensor("layer/out", (1, oh, ow, cout), "int8", [s_out], [3])
        opts = dict(Padding=tflite.Padding.SAME, StrideH=layer.stride, StrideW=layer.stride,
                    FusedActivationFunction=0, DilationHFactor=1, DilationWFactor=1)
        if layer.kind == "dw":
            fw.op("DEPTHWISE_CONV_2D", [x, w, b], [y], "DepthwiseConv2DOptions", dict(opts, DepthMultiplier=cout // layer.cin))
        else:
            fw.op("CONV_2D", [x, w, b], [y], "Conv2DOptions", opts)
    return fw.serialize([x], [y])


def _elementwise_model(fw: _Writer, layer: Layer, s_in: float, zp_in: int) -> bytes:
    """``layer.kind`` "avgpool": a k x k average pool (VALID, stride k; k = 0 pools the whole map, as a
    classifier's global pool does); "add": two h x w x cin int8 maps added (different scales)."""
    x = fw.tensor("input", (1, layer.h, layer.w, layer.cin), "int8", [s_in], [zp_in])
    if layer.kind == "add":
        x2 = fw.tensor("input2", (1, layer.h, layer.w, layer.cin), "int8", [s_in * 1.7], [11])
        y = fw.tensor("layer/out", (1, layer.h, layer.w, layer.cin), "int8", [s_in * 2.2], [-4])
        fw.op("ADD", [x, x2], [y], "AddOptions", dict(FusedActivationFunction=0))
        return fw.serialize([x, x2], [y])
    kh, kw = (layer.k, layer.k) if layer.k else (layer.h, layer.w)
    y = fw.tensor("layer/out", (1, layer.h // kh, layer.w // kw, layer.cin), "int8", [s_in], [zp_in])
    fw.op("AVERAGE_POOL_2D", [x], [y], "Pool2DOptions", dict(Padding=tflite.Padding.VALID, StrideH=kh, StrideW=kw,
                                                              FilterHeight=kh, FilterWidth=kw, FusedActivationFunction=0))
    return fw.serialize([x], [y])


def kernel_table(targets: list[str], measure, cmsis_nn_path: str | None = None, layers=LAYERS,
                 log=sys.stderr) -> list[dict]:
    """Per layer and core: the kernel each build ran and its MAC per instruction (auto, portable, Arm),
    and whether Arm's and the portable outputs equal the optimized build's byte for byte. ``measure``:
    pockmcu.bench.bench_model (passed in: bench imports this module)."""
    rows = []
    with tempfile.TemporaryDirectory(prefix="pockmcu-kbench-") as tmp:
        for i, layer in enumerate(layers):
            model = Path(tmp) / f"layer{i}.tflite"
            model.write_bytes(layer_model(layer, seed=i))
            for t in targets:
                log.write(f"kernel bench {layer.name} on {t} ...\n")
                log.flush()
                row = dict(layer=layer.name, target=t)
                for kernels in ("auto", "portable") + (("cmsis-nn",) if cmsis_nn_path else ()):
                    try:
                        r = measure(model, t, kernels=kernels, cmsis_nn_path=cmsis_nn_path)
                    except PockError as exc:
                        row[kernels] = dict(failed=str(exc)[:100])
                        continue
                    op = max(r["ops"], key=lambda o: o["macs"])
                    row[kernels] = dict(kernel=op["kernel"], macs=op["macs"], instructions=op["instructions"],
                                        macs_per_instruction=op["macs_per_instruction"], output_hex=r["output_hex"])
                ref = row["auto"].get("output_hex")
                row["outputs_equal"] = all(row[k].get("output_hex") == ref for k in row
                                           if k in ("portable", "cmsis-nn"))
                rows.append(row)
    return rows


def kernel_markdown(rows: list[dict], cmsis_nn: str | None = None) -> str:
    def cell(r: dict | None) -> str:
        if not r:
            return "-"
        if "failed" in r:
            return f"failed: {r['failed']}"
        return f"{r['macs_per_instruction']:.3f} (`{r['kernel']}`)"

    out = ["## Per kernel: MAC per instruction", "",
           "Written by `make bench` (`python -m pockmcu.bench --kernels-table`, pockmcu/kernel_bench.py). One-layer "
           "int8 TFLite models built on the fly (SAME padding, no activation, input zero point -7, per-channel weights; "
           "fully connected per-tensor), measured by `pockmcu bench`: exact QEMU instructions of the layer's call. "
           "ours = `--kernels auto`, portable = `--kernels portable`, Arm = Arm's CMSIS-NN"
           + (f" ({cmsis_nn})" if cmsis_nn else " (not measured: set CMSIS_NN_PATH)")
           + "; the kernel each ran in backquotes; 'outputs': the other builds' bytes equal ours.", "",
           "| layer | target | MACs | ours | portable | Arm | outputs |", "|---|---|---:|---|---|---|---|"]
    for r in rows:
        macs = next((r[k]["macs"] for k in ("auto", "portable") if "macs" in r.get(k, {})), 0)
        out.append(f"| {r['layer']} | {r['target']} | {macs:,} | {cell(r.get('auto'))} | {cell(r.get('portable'))} | "
                   f"{cell(r.get('cmsis-nn'))} | {'byte-identical' if r['outputs_equal'] else 'DIFFER'} |")
    return "\n".join(out) + "\n"
