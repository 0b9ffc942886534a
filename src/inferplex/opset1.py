"""OpenVINO's opset 1 to 7 functions: those of :mod:`inferplex.opset` that opset 7 has, with opset 1's
one-output ``max_pool`` and ``range`` with no ``output_type``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from inferplex._opsets import blocks as _blocks
from inferplex._opsets import colour as _colour
from inferplex._opsets import control_flow as _control_flow
from inferplex._opsets import control_loops as _control_loops
from inferplex._opsets import detection as _detection
from inferplex._opsets import detection_more as _detection_more
from inferplex._opsets import embedding as _embedding
from inferplex._opsets import index as _index
from inferplex._opsets import interpolate as _interpolate
from inferplex._opsets import math as _math
from inferplex._opsets import more as _more
from inferplex._opsets import nn as _nn
from inferplex._opsets import priors as _priors
from inferplex._opsets import proposal as _proposal
from inferplex._opsets import psroi_deformable as _psroi_deformable
from inferplex._opsets import recurrent as _recurrent
from inferplex._opsets import sequence_ops as _sequence_ops
from inferplex._opsets import shapes as _shapes
from inferplex._opsets import slicing as _slicing
from inferplex._opsets import spectral as _spectral
from inferplex._opsets.blocks import *  # noqa: F403 - GRN, Bucketize, BatchToSpace, ...
from inferplex._opsets.colour import *  # noqa: F403 - NV12 and I420 to RGB and BGR
from inferplex._opsets.control_flow import *  # noqa: F403 - if_op (opset 8: removed below)
from inferplex._opsets.control_loops import *  # noqa: F403 - loop (opset 5), tensor_iterator
from inferplex._opsets.detection import *  # noqa: F403 - NMS, ROI pooling, YOLO layers
from inferplex._opsets.detection_more import *  # noqa: F403 - PSROIPooling (MulticlassNms: opset 8)
from inferplex._opsets.embedding import *  # noqa: F403 - embedding bags, CTC decoders
from inferplex._opsets.index import *  # noqa: F403 - gathers, scatters, one_hot
from inferplex._opsets.interpolate import *  # noqa: F403 - interpolate
from inferplex._opsets.math import *  # noqa: F403 - more element-wise ops and reductions
from inferplex._opsets.more import *  # noqa: F403 - element-wise ops, splits, reductions
from inferplex._opsets.nn import *  # noqa: F403 - normalizations, group convolution
from inferplex._opsets.priors import *  # noqa: F403 - PriorBox, PriorBoxClustered
from inferplex._opsets.proposal import *  # noqa: F403 - Proposal
from inferplex._opsets.psroi_deformable import *  # noqa: F403 - DeformablePSROIPooling
from inferplex._opsets.recurrent import *  # noqa: F403 - LSTM, GRU, RNN sequences and cells
from inferplex._opsets.sequence_ops import *  # noqa: F403 - RandomUniform, GatherTree
from inferplex._opsets.shapes import *  # noqa: F403 - broadcast, pad, ...
from inferplex._opsets.slicing import *  # noqa: F403 - strided_slice, roll
from inferplex._opsets.spectral import *  # noqa: F403 - DFT, IDFT
from inferplex.api.nodes import Node
from inferplex.opset import (
    SINCE_OPSET,
    add,
    assign,
    avg_pool,
    concat,
    constant,
    convolution,
    divide,
    matmul,
    max_pool_node,
    multiply,
    parameter,
    read_value,
    relu,
    reshape,
    result,
    sigmoid,
    softmax,
    subtract,
    transpose,
)

__all__ = [
    "add", "avg_pool", "concat", "constant", "convolution", "divide", "matmul", "max_pool", "multiply",
    "parameter", "relu", "reshape", "result", "sigmoid", "softmax", "subtract", "transpose",
    "read_value", "assign", "deformable_convolution",
    *(name for module in (_more, _math, _shapes, _slicing, _index, _nn, _interpolate, _recurrent, _spectral,
                                   _blocks, _embedding, _detection, _detection_more, _proposal,
                                   _psroi_deformable, _priors, _colour, _sequence_ops, _control_flow,
                                   _control_loops)
      for name in module.__all__ if SINCE_OPSET.get(name, 1) <= 7),
]

range = _shapes.range_untyped  # type: ignore[assignment]  # opsets 1-11: no output_type
for _later in SINCE_OPSET:  # the functions of opset 8 and later
    if _later not in __all__:
        globals().pop(_later, None)


def deformable_convolution(  # type: ignore[no-redef]  # opset 8's form, popped above
        data: Any, deformable_values: Any, filters: Any, strides: Sequence[int], pads_begin: Sequence[int],
        pads_end: Sequence[int], dilations: Sequence[int], auto_pad: str = "EXPLICIT", group: int = 1,
        deformable_group: int = 1, name: str | None = None) -> Node:
    """DeformableConvolution-1: opset 8's without a mask (:func:`inferplex.opset.deformable_convolution`)."""
    return _nn.deformable_convolution(data, deformable_values, filters, strides, pads_begin, pads_end,
                                      dilations, None, auto_pad, group, deformable_group, name=name)


def max_pool(data: Any, strides: Sequence[int], pads_begin: Sequence[int], pads_end: Sequence[int],
             kernel_shape: Sequence[int], rounding_type: str = "floor", auto_pad: str | None = None,
             name: str | None = None) -> Node:
    """Max pooling with one output (opset 1 has no dilations and no indices)."""
    return max_pool_node(data, strides, [1] * len(kernel_shape), pads_begin, pads_end, kernel_shape,
                         rounding_type, auto_pad, name, num_outputs=1)
