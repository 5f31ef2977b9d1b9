"""Operator definitions. Importing this package registers every operator.

To add an operator, add one module here with an ``OpDef`` subclass decorated
with ``@register`` and import it below.
"""

from .base import REGISTRY, TFLITE_BUILTINS, OpDef, opdef, register  # noqa: F401
from . import activations, conv, elementwise, fully_connected, layout, pool, quantize, reduce, requantize, shape_ops, tiling  # noqa: F401,E402,E501
from . import training_ops  # noqa: F401,E402  (ops that exist only in training graphs)
