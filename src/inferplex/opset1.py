"""OpenVINO's opset 1 functions: as :mod:`inferplex.opset`, with opset 1's one-output ``max_pool``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from inferplex import _opset_more as _more
from inferplex._opset_more import *  # noqa: F403 - element-wise ops, splits, reductions
from inferplex.api.nodes import Node
from inferplex.opset import (
    add,
    avg_pool,
    concat,
    constant,
    convolution,
    divide,
    matmul,
    max_pool_node,
    multiply,
    parameter,
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
    *_more.__all__,
]


def max_pool(data: Any, strides: Sequence[int], pads_begin: Sequence[int], pads_end: Sequence[int],
             kernel_shape: Sequence[int], rounding_type: str = "floor", auto_pad: str | None = None,
             name: str | None = None) -> Node:
    """Max pooling with one output (opset 1 has no dilations and no indices)."""
    return max_pool_node(data, strides, [1] * len(kernel_shape), pads_begin, pads_end, kernel_shape,
                         rounding_type, auto_pad, name, num_outputs=1)
