"""Operator definitions. Importing this package registers every operator.

To add an operator, add one module here with an ``OpDef`` subclass decorated
with ``@register`` and import it below.
"""

from . import (  # noqa: F401,E402,E501
    activations,
    conv,
    elementwise,
    fully_connected,
    layout,
    pool,
    quantize,
    reduce,
    requantize,
    shape_ops,
    tiling,
    training_ops,  # noqa: F401,E402  (ops that exist only in training graphs)
)
from .base import REGISTRY, TFLITE_BUILTINS, OpDef, opdef, register  # noqa: F401
