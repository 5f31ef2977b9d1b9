"""Operator definitions. Importing this package registers every operator.

To add an operator, add one module to this package with an ``OpDef`` subclass decorated with
``@register``: every module here is imported (in name order), so nothing else lists it.
"""

import importlib
import pkgutil

from .base import REGISTRY, TFLITE_BUILTINS, OpDef, opdef, register  # noqa: F401

for _module in sorted(m.name for m in pkgutil.iter_modules(__path__)):
    importlib.import_module(f"{__name__}.{_module}")
