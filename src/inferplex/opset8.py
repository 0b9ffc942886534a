"""OpenVINO's opset 8 functions (``from openvino import opset8``): those of :mod:`inferplex.opset`."""

from __future__ import annotations

from inferplex.opset import *  # noqa: F403
from inferplex.opset import __all__ as __all__
