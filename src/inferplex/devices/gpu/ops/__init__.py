"""ONNX op lowerings for the GPU device; importing this package fills the registry."""

from inferplex.devices.gpu.ops import activations, math, misc, nn, reduce, shape  # noqa: F401
