"""Op name stems shared by the frontends: ops are named <stem><k> (conv0, dwconv1, fc0, ...), numbered per
stem. The names reach the generated C (layer symbols, comments, reports), so both frontends take them
from here."""

from __future__ import annotations

#: stems that are not just the lower-cased kind without "_2d"
SHORT_NAMES = {"fully_connected": "fc", "average_pool": "avgpool", "max_pool": "maxpool",
               "concatenation": "concat", "average_pool_requant": "avgpool_requant",
               "uint8_to_int8": "from_uint8", "int8_to_uint8": "to_uint8"}


def short_name(kind: str) -> str:
    """Op name stem of an op kind: CONV_2D -> conv, DEPTHWISE_CONV_2D -> dwconv, FULLY_CONNECTED -> fc, ..."""
    short = kind.lower().replace("_2d", "").replace("depthwise_conv", "dwconv")
    return SHORT_NAMES.get(short, short)
