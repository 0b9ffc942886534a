"""OpenVINO's opset 8 functions (``from openvino import opset8``): those of :mod:`inferplex.opset`
that opset 8 has, with opset 8's ``range`` (no ``output_type``)."""

from __future__ import annotations

from inferplex._opsets import shapes as _shapes
from inferplex.opset import *  # noqa: F403
from inferplex.opset import SINCE_OPSET as _SINCE_OPSET
from inferplex.opset import __all__ as _latest

__all__ = [name for name in _latest if _SINCE_OPSET.get(name, 1) <= 8]

range = _shapes.range_untyped
for _later in set(_latest) - set(__all__):  # the functions of opset 9 and later
    globals().pop(_later, None)
