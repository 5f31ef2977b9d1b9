"""The bundled transfer-learning example: examples/digits (pretrained in float on digits 0-4 of
scikit-learn's load_digits, int8) fine-tuned on digits 5-9. Used by `make demo`, the tests and
`make bench`."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np

from .errors import PockError
from .train import Data

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "digits"
EPOCHS = 5
#: int8 runs: the learning rate that is stable with fixed int8 ranges (see examples/digits/README.md)
SCHEMES = {
    "sparse": ({"bias": {"last": 3}, "weights": [{"layer": 3}, {"layer": 4}]}, 0.001),
    "last": ({"bias": {"last": 1}, "weights": [{"layer": -1}]}, 0.001),
    "full": ({"bias": "all", "weights": "all"}, 0.0003),
}


def example():
    """The examples/digits/make_digits.py module (data split, input quantization, float reference)."""
    script = EXAMPLE / "make_digits.py"
    if not script.is_file():
        raise PockError(f"{script}: the bundled digits example is missing")
    spec = importlib.util.spec_from_file_location("pockmcu_digits_example", script)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def datasets():
    """(train, test) of digits 5-9 as pockmcu.train.Data, inputs quantized like the model's input."""

    md = example()
    scale, zp = md.input_quantization(md.MODEL_PATH.read_bytes())
    xtr, ytr, xte, yte = md.load_split(md.FINETUNE_DIGITS)
    return (Data(md.quantize_input(xtr, scale, zp), ytr.astype(np.int32)),
            Data(md.quantize_input(xte, scale, zp), yte.astype(np.int32)))


def spec_json(scheme: str, qas: bool = True) -> str:
    spec, lr = SCHEMES[scheme]
    return json.dumps(dict(spec, optimizer={"kind": "sgd", "lr": lr}, qas=qas))


def model_path() -> Path:
    return example().MODEL_PATH
