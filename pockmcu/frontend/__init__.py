"""Frontends: model files -> graph IR."""

from pathlib import Path

from ..errors import PockError
from ..ir import Graph
from .onnx import load_onnx
from .tflite import load_tflite


def load_model(path, numerics: str = "tflm") -> Graph:
    """Load a .tflite or .onnx file into the graph IR (raises PockError with one line on bad input).
    numerics: whose arithmetic the graph will follow (the ONNX frontend lowers a few ops differently)."""
    path = Path(path)
    if path.suffix.lower() == ".onnx":

        return load_onnx(path, numerics)
    if not path.exists():
        raise PockError(f"{path}: no such file; give the path of a .tflite or .onnx model")
    head = path.read_bytes()[:8] if path.is_file() else b""
    if path.suffix.lower() != ".tflite" and head[4:8] != b"TFL3":
        raise PockError(f"{path}: unknown model format; pockmcu reads .tflite (TFLite flatbuffer) and .onnx files")

    return load_tflite(path)
