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

from inferplex import errors, op, opset, opset1, opset8, preprocess, properties
from inferplex._async_queue import AsyncInferQueue
from inferplex._binding import InferResults
from inferplex._core import Core, compile_model, get_version
from inferplex._model import Model, save_model
from inferplex._ports import ElementType, Op, Port
from inferplex._runtime import CompiledModel, InferRequest
from inferplex.api import layout_helpers
from inferplex.api.batch import get_batch, set_batch
from inferplex.api.convert import convert_model
from inferplex.api.layout import Layout
from inferplex.api.shapes import Dimension, PartialShape, Shape
from inferplex.api.tensor import Tensor
from inferplex.api.types import Type
from inferplex.api.version import Version
from inferplex.devices.base import DevicePlugin, DeviceProgram, MemoryInfo, ProfilingInfo, ProfilingRecord

__version__ = "0.1.0"

__all__ = [
    "AsyncInferQueue",
    "CompiledModel",
    "Core",
    "DevicePlugin",
    "DeviceProgram",
    "Dimension",
    "ElementType",
    "InferRequest",
    "InferResults",
    "Layout",
    "MemoryInfo",
    "Model",
    "Op",
    "PartialShape",
    "Port",
    "ProfilingInfo",
    "ProfilingRecord",
    "Shape",
    "Tensor",
    "Type",
    "Version",
    "__version__",
    "compile_model",
    "convert_model",
    "errors",
    "get_batch",
    "get_version",
    "layout_helpers",
    "op",
    "opset",
    "opset1",
    "opset8",
    "preprocess",
    "properties",
    "save_model",
    "set_batch",
]
