"""``ov.preprocess``: OpenVINO's PrePostProcessor, built into the ONNX graph.

Steps recorded on a :class:`PrePostProcessor` become ONNX ops at ``build()``,
so every device (and the GPU's fused lowered graph) runs them, and no numpy
preprocessing is left to the host.  Built: element type and layout
conversion, resize (linear, nearest, cubic), mean, scale, channel reversal,
RGB/BGR/RGBX/BGRX colour conversion, NV12 and I420 inputs (one plane, or one input per plane:
``<name>/y``, ``<name>/uv``) converted to RGB or BGR, crop and pad, plus OpenVINO's implicit
conversions to the model's element type and layout; on outputs, element type
and layout conversion.  Resize also resamples as Pillow does
(``RESIZE_BILINEAR_PILLOW``, ``RESIZE_BICUBIC_PILLOW``), and ``custom(fn)`` steps
splice in the ops a function builds with ``inferplex.opset`` (on inputs and outputs).
``str(ppp)`` prints the steps as OpenVINO does.
"""

from inferplex._core import get_version
from inferplex.preprocess._enums import ColorFormat, PaddingMode, ResizeAlgorithm
from inferplex.preprocess._info import (
    InputInfo,
    InputModelInfo,
    InputTensorInfo,
    OutputInfo,
    OutputModelInfo,
    OutputTensorInfo,
    PostProcessSteps,
    PreProcessSteps,
)
from inferplex.preprocess._processor import PrePostProcessor

__all__ = [
    "ColorFormat",
    "InputInfo",
    "InputModelInfo",
    "InputTensorInfo",
    "OutputInfo",
    "OutputModelInfo",
    "OutputTensorInfo",
    "PaddingMode",
    "PostProcessSteps",
    "PrePostProcessor",
    "PreProcessSteps",
    "ResizeAlgorithm",
    "get_version",
]
