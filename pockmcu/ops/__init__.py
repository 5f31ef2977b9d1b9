"""Operator definitions. Importing this package registers every operator.

To add an operator, add one module here with an ``OpDef`` subclass decorated
with ``@register`` and import it below.
"""

from .base import REGISTRY, TFLITE_BUILTINS, OpDef, opdef, register  # noqa: F401
from . import activations, conv, elementwise, fully_connected, pool, quantize, reduce, shape_ops  # noqa: F401,E402
