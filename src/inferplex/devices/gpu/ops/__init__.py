"""ONNX op lowerings for the GPU device; importing this package fills the registry."""

from inferplex.devices.gpu.ops import (  # noqa: F401
    activations,
    control_flow,
    detection,
    indexing,
    math,
    misc,
    ml,
    nn,
    quantized,
    reduce,
    roi,
    sampling,
    sequence,
    sequences,
    shape,
    spectral,
    transformer,
    trees,
    types,
    unpool,
)
