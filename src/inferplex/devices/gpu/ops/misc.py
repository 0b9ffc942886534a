"""Lowerings: Einsum, Det, MeanVarianceNormalization, CenterCropPad, and the
data-dependent NonZero, Compress and Unique.

The output shapes of NonZero, Compress and Unique depend on tensor values, so
their lowerings read the device on the host and are marked ``data_dependent``:
they run eagerly, outside CUDA graphs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import onnx_ir as ir
import torch

from inferplex.devices.gpu.ops._common import (
    EXACT_DTYPES,
    FLOAT_DTYPES,
    NUMERIC_DTYPES,
    attrs_reason,
    const_ints,
    dtype_reason,
    eager,
    first_reason,
    host_ints,
    normalize_axis,
)
from inferplex.devices.gpu.registry import NodeInfo, register
from inferplex.errors import UnsupportedOpError


def _check(attrs: tuple[str, ...], allowed: frozenset[ir.DataType],
           inputs: tuple[int, ...] = (0,)) -> Callable[[NodeInfo], str | None]:
    def supports(info: NodeInfo) -> str | None:
        return first_reason(attrs_reason(info, attrs), dtype_reason(info, inputs, allowed))

    return supports


@register("Einsum", versions=(12, None), supports=lambda info: first_reason(
    attrs_reason(info, ("equation",)),
    # Integer einsum lowers to integer matmuls, which CUDA lacks.
    dtype_reason(info, range(info.num_inputs), FLOAT_DTYPES)))
def _einsum(info: NodeInfo) -> Callable[..., Any]:
    equation = info.attr("equation").replace(" ", "")
    return lambda *operands: torch.einsum(equation, *operands)


@register("Det", versions=(11, None), supports=_check((), frozenset({ir.DataType.FLOAT,
                                                                      ir.DataType.DOUBLE})))
def _det(info: NodeInfo) -> Callable[..., Any]:
    return torch.linalg.det


@register("MeanVarianceNormalization", versions=(9, None), supports=_check(("axes",), FLOAT_DTYPES))
def _mean_variance_normalization(info: NodeInfo) -> Callable[..., Any]:
    axes = info.attr("axes", [0, 2, 3])

    def normalize(x: torch.Tensor) -> torch.Tensor:
        # Axes past the input's rank are left out, as ONNX Runtime does: the default [0, 2, 3]
        # on a 3-D [N, C, L] input normalizes over N and L.
        dims = [normalize_axis(a, x.dim()) for a in axes if a < x.dim()]
        mean = torch.mean(x, dims, keepdim=True)
        # The function body of the ONNX op: E[x^2] - E[x]^2, epsilon 1e-9 on the std.
        variance = torch.mean(x * x, dims, keepdim=True) - mean * mean
        return (x - mean) / (torch.sqrt(variance) + 1e-9)

    return normalize


def _center_crop_pad_fn(shape: list[int], axes: list[int] | None) -> Callable[..., Any]:
    def center_crop_pad(x: torch.Tensor, _s: Any = None) -> torch.Tensor:
        chosen = [normalize_axis(a, x.dim()) for a in axes] if axes else list(range(x.dim()))
        for a, target in zip(chosen, shape, strict=False):
            size = x.shape[a]
            if target < size:  # crop, the extra element (odd difference) from the end
                x = x.narrow(a, (size - target) // 2, target)
            elif target > size:  # zero pad, the extra element at the end
                before = (target - size) // 2
                widths = [0, 0] * (x.dim() - 1 - a) + [before, target - size - before]
                x = torch.nn.functional.pad(x, widths)
        return x

    return center_crop_pad


@register("CenterCropPad", versions=(18, None), supports=_check(("axes",), EXACT_DTYPES))
def _center_crop_pad(info: NodeInfo) -> Callable[..., Any]:
    axes = info.attr("axes")
    shape = const_ints(info, 1)
    if shape is not None:
        return _center_crop_pad_fn(shape, axes)

    def center_crop_pad(x: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return _center_crop_pad_fn(host_ints(target) or [], axes)(x)

    return eager(center_crop_pad)


@register("NonZero", versions=(9, None), supports=_check((), EXACT_DTYPES))
def _non_zero(info: NodeInfo) -> Callable[..., Any]:
    def non_zero(x: torch.Tensor) -> torch.Tensor:
        # torch.nonzero gives one row per element, ONNX one row per dimension.
        return torch.nonzero(x.reshape(1) if x.dim() == 0 else x).t()[: max(x.dim(), 1)]

    return eager(non_zero)


@register("Compress", versions=(9, None), supports=_check(("axis",), EXACT_DTYPES))
def _compress(info: NodeInfo) -> Callable[..., Any]:
    axis = info.attr("axis")

    def compress(x: torch.Tensor, condition: torch.Tensor) -> torch.Tensor:
        data, a = (x.reshape(-1), 0) if axis is None else (x, normalize_axis(axis, x.dim()))
        # A condition shorter than the axis selects nothing past its end.
        keep = torch.nonzero(condition.reshape(-1)[: data.shape[a]]).reshape(-1)
        return data.index_select(a, keep)

    return eager(compress)


@register("Unique", versions=(11, None), supports=_check(("axis", "sorted"), NUMERIC_DTYPES))
def _unique(info: NodeInfo) -> Callable[..., Any]:
    axis, ordered = info.attr("axis"), bool(info.attr("sorted", 1))

    def unique(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        data, a = (x.reshape(-1), 0) if axis is None else (x, normalize_axis(axis, x.dim()))
        if data.is_floating_point() and bool(torch.isnan(data).any()):
            # numpy merges NaNs into one unique value, torch keeps each apart.
            raise UnsupportedOpError("Unique of a tensor holding NaN is not supported on GPU")
        values, inverse, counts = torch.unique(data, sorted=True, return_inverse=True,
                                               return_counts=True, dim=a)
        # First occurrence of each unique value: the smallest position mapping to it.
        positions = torch.arange(data.shape[a], device=x.device)
        first = torch.full((values.shape[a],), data.shape[a], dtype=torch.int64, device=x.device)
        first = first.scatter_reduce(0, inverse, positions, "amin")
        if not ordered:  # unique values in order of first occurrence
            order = torch.argsort(first)
            rank = torch.empty_like(order).scatter_(0, order, torch.arange(order.numel(),
                                                                           device=x.device))
            values, first, counts, inverse = values.index_select(a, order), first[order], \
                counts[order], rank[inverse]
        return values, first, inverse.reshape(-1), counts

    return eager(unique)
