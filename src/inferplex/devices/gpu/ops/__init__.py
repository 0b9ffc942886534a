"""ONNX op lowerings for the GPU device; importing this package fills the registry."""

from inferplex.devices.gpu.ops import (  # noqa: F401
    activations,
    detection,
    indexing,
    math,
    misc,
    nn,
    quantized,
    reduce,
    sequence,
    sampling,
    shape,
    transformer,
    types,
)
