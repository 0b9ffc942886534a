"""inferplex: run one ONNX model on every device of a machine at once.

OpenVINO's Python runtime API (``import inferplex as ov``) over ONNX Runtime
(CPU) and PyTorch (NVIDIA GPUs), with OpenVINO's multi-device modes: HETERO,
PIPELINE_PARALLEL, MULTI and AUTO.

    >>> import inferplex as ov
    >>> core = ov.Core()
    >>> compiled = core.compile_model("model.onnx", "CPU")       # doctest: +SKIP
    >>> results = compiled({"x": array})                         # doctest: +SKIP

The public API is what ``__all__`` names, with the modules it names
(``errors``, ``properties``, ``preprocess``, ``layout_helpers``, ``op`` and the
``opset`` modules), and, for device plugin authors, ``inferplex.devices.base``
and ``inferplex.config.values``.  Modules whose names start with ``_`` and the
packages ``api``, ``config``, ``engine``, ``scheduling``, ``hetero``, ``multi``,
``devices`` (but its ``base``) and ``cli`` are internal: they may change
without notice.
"""

import sys as _sys

from inferplex import errors, helpers, op, opset, opset1, opset8, preprocess, properties, utils
from inferplex._async_queue import AsyncInferQueue
from inferplex._binding import InferResults
from inferplex._compiled_model import CompiledModel
from inferplex._core import Core, Extension, compile_model, get_version
from inferplex._infer_request import InferRequest
from inferplex._model import Model
from inferplex._model_io import save_model, serialize
from inferplex._ports import ElementType, Input, Op, Port, RTMap
from inferplex.api import layout_helpers
from inferplex.api.batch import get_batch, set_batch
from inferplex.api.convert import convert_model
from inferplex.api.layout import Layout
from inferplex.api.nodes import Node
from inferplex.api.shapes import (
    AxisSet,
    AxisVector,
    Coordinate,
    CoordinateDiff,
    Dimension,
    PartialShape,
    Shape,
    Strides,
    Symbol,
)
from inferplex.api.tensor import Tensor, tensor_from_file
from inferplex.api.types import Type
from inferplex.api.version import Version
from inferplex.config.any_value import OVAny
from inferplex.devices.base import DevicePlugin, DeviceProgram, MemoryInfo, ProfilingInfo, ProfilingRecord

__version__ = "0.1.0"

ConstOutput = Port
"""OpenVINO's name for a model's (or compiled model's) input or output port."""
Output = Port
"""OpenVINO's name for an op's output port."""
"""OpenVINO's name for one rt_info value."""

# OpenVINO's opset modules 2..17 by number (``import openvino.opset13 as ops``): each is the latest
# functions this package builds, with opset 1's one-output max_pool below opset 8.
for _number in range(2, 18):
    if _number != 8:
        _module = opset1 if _number < 8 else opset
        _sys.modules[f"{__name__}.opset{_number}"] = _module
        globals()[f"opset{_number}"] = _module
del _number, _module

__all__ = [
    "AsyncInferQueue",
    "AxisSet",
    "AxisVector",
    "CompiledModel",
    "ConstOutput",
    "Coordinate",
    "CoordinateDiff",
    "Core",
    "DevicePlugin",
    "DeviceProgram",
    "Dimension",
    "ElementType",
    "Extension",
    "InferRequest",
    "InferResults",
    "Input",
    "Layout",
    "MemoryInfo",
    "Model",
    "Node",
    "OVAny",
    "Op",
    "Output",
    "PartialShape",
    "Port",
    "ProfilingInfo",
    "ProfilingRecord",
    "RTMap",
    "Shape",
    "Strides",
    "Symbol",
    "Tensor",
    "Type",
    "Version",
    "__version__",
    "compile_model",
    "convert_model",
    "errors",
    "get_batch",
    "get_version",
    "helpers",
    "layout_helpers",
    "op",
    "opset",
    "opset1",
    "opset8",
    "preprocess",
    "properties",
    "save_model",
    "serialize",
    "set_batch",
    "tensor_from_file",
    "utils",
]

from inferplex import _pyopenvino  # noqa: E402,F401 - ``openvino._pyopenvino``'s names, for programs that name it
