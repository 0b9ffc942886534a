"""Lowering: MaxUnpool, the partial inverse of MaxPool.

ONNX's indices (MaxPool's second output) are flat over the whole N*C*D1*...*Dk
output tensor, where torch's ``max_unpool`` takes them per (n, c) plane, so the
lowering scatters into the flattened output directly: ``Y.flat[I] = X``.  The
output shape is the inverse of the pooling arithmetic,
``(in - 1) * stride + kernel - pad_begin - pad_end`` per spatial axis.

An ``output_shape`` input is taken only where it is a constant equal to that
shape: where it differs, ONNX's reference scatters into the inferred shape and
pads the end with zeros (its ``test_maxunpool_export_with_output_shape``), while
ONNX Runtime (the CPU device) scatters into ``output_shape`` itself, which is what
undoes a MaxPool over an input of that shape (onnx/onnx#2398).  The two disagree,
so such a node is refused and HETERO places it on the CPU device.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import onnx_ir as ir
import torch

from inferplex.devices.gpu.ops._common import (
    FLOAT_DTYPES,
    attrs_reason,
    const_ints,
    dtype_reason,
    first_reason,
)
from inferplex.devices.gpu.registry import NodeInfo, register

_INDEX_DTYPES = frozenset({ir.DataType.INT64})


def _window(info: NodeInfo) -> tuple[list[int], list[int], list[int]]:
    """kernel_shape, strides and pads, with ONNX's defaults."""
    kernel = [int(k) for k in info.attr("kernel_shape")]
    strides = [int(s) for s in info.attr("strides", [1] * len(kernel))]
    pads = [int(p) for p in info.attr("pads", [0] * 2 * len(kernel))]
    return kernel, strides, pads


def _default_shape(x_shape: Sequence[int], kernel: Sequence[int], strides: Sequence[int],
                   pads: Sequence[int]) -> list[int]:
    spatial = len(kernel)
    return [*x_shape[:2], *((x_shape[2 + i] - 1) * strides[i] + kernel[i] - pads[i] - pads[spatial + i]
                            for i in range(spatial))]


def _output_shape_reason(info: NodeInfo) -> str | None:
    """Why ``output_shape`` is refused: unless it is known to equal the inferred shape, ONNX's
    reference and ONNX Runtime place the values differently (see the module docstring)."""
    given = const_ints(info, 2)
    x_shape = info.input_shapes[0]
    if given is None or x_shape is None or not all(isinstance(d, int) for d in x_shape):
        return ("MaxUnpool with an output_shape not known at compile time (where it differs from "
                "the inferred shape, ONNX's reference pads the result and ONNX Runtime does not)")
    inferred = _default_shape([int(d) for d in x_shape if isinstance(d, int)], *_window(info))
    if given != inferred:
        return (f"MaxUnpool with output_shape {given} other than the inferred {inferred} (ONNX's "
                "reference pads the result, ONNX Runtime unpools into that shape)")
    return None


def _max_unpool_supports(info: NodeInfo) -> str | None:
    reason = first_reason(attrs_reason(info, ("kernel_shape", "pads", "strides")),
                          dtype_reason(info, (0,), FLOAT_DTYPES), dtype_reason(info, (1,), _INDEX_DTYPES),
                          dtype_reason(info, (2,), _INDEX_DTYPES))
    if reason is None and not info.attr("kernel_shape"):
        return "MaxUnpool needs kernel_shape"
    if reason is None and info.has_input(2):
        return _output_shape_reason(info)
    return reason


@register("MaxUnpool", versions=(9, None), supports=_max_unpool_supports)
def _max_unpool(info: NodeInfo) -> Callable[..., Any]:
    kernel, strides, pads = _window(info)

    def max_unpool(x: torch.Tensor, indices: torch.Tensor, _output_shape: Any = None) -> torch.Tensor:
        shape = _default_shape(x.shape, kernel, strides, pads)
        flat = x.new_zeros(int(torch.Size(shape).numel()))
        flat.scatter_(0, indices.reshape(-1), x.reshape(-1))
        return flat.reshape(shape)

    return max_unpool
