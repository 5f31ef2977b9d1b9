"""python -m pockmcu: the same as the pockmcu command."""

import sys

from .cli import main

sys.exit(main())
