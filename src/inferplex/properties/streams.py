"""``ov.properties.streams``: the number of streams (OpenVINO's ``openvino.properties.streams``).

``streams.num(4)``, ``streams.num(streams.Num.AUTO)``; read back as an int, or
``Num.AUTO`` where the device decides.
"""

from __future__ import annotations

from inferplex.properties._enums import Num
from inferplex.properties._typed import Property

__all__ = ["Num", "num"]

num = Property("NUM_STREAMS")
"""Streams (requests a device runs at once): an int >= 1 or :class:`Num` (``Num.AUTO``)."""
