"""Lowerings: Gather/Scatter families, OneHot, ReverseSequence.

ONNX indices may be negative (counted from the end of the axis); torch's index
kernels reject them, so every lowering here wraps them with the axis size, a
Python int read from the runtime shape (no host sync).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import onnx_ir as ir
import torch

from inferplex.devices.gpu.ops._common import (
    EXACT_DTYPES,
    NUMERIC_DTYPES,
    attrs_reason,
    const_ints,
    dtype_reason,
    eager,
    first_reason,
    normalize_axis,
)
from inferplex.devices.gpu.ops._unsigned import WIDE_UNSIGNED, moves_bits
from inferplex.devices.gpu.registry import NodeInfo, register
from inferplex.errors import InputError

_INDEX_DTYPES = frozenset({ir.DataType.INT32, ir.DataType.INT64})
_REDUCTIONS = {"add": "sum", "mul": "prod", "max": "amax", "min": "amin"}


def _check(attrs: tuple[str, ...], data: tuple[int, ...], indices: tuple[int, ...],
           reduce: bool = False, moves: bool = False) -> Callable[[NodeInfo], str | None]:
    """``moves``: the op only selects data values, so uint16/32/64 data runs as signed bits."""
    allowed = EXACT_DTYPES | WIDE_UNSIGNED if moves else EXACT_DTYPES

    def supports(info: NodeInfo) -> str | None:
        reason = first_reason(attrs_reason(info, attrs), dtype_reason(info, data, allowed),
                              dtype_reason(info, indices, _INDEX_DTYPES))
        reduction = info.attr("reduction", "none") if reduce else "none"
        if reason is None and reduction not in ("none", *_REDUCTIONS):
            return f"reduction {reduction!r} is not implemented"
        if reason is None and reduction != "none" and info.input_dtypes[0] == ir.DataType.BOOL:
            return "reductions on bool are not implemented"
        return reason

    return supports


def _wrap(index: torch.Tensor, size: int) -> torch.Tensor:
    index = index.long()
    return torch.where(index < 0, index + size, index)


@register("Gather", supports=_check(("axis",), (0,), (1,), moves=True), held_dtypes=WIDE_UNSIGNED)
@moves_bits
def _gather(info: NodeInfo) -> Callable[..., Any]:
    axis = info.attr("axis", 0)
    constant = const_ints(info, 1)
    if constant is not None and len(constant) == 1 and info.rank(1) == 0:
        # A constant scalar index (shape arithmetic, last token): a view, no kernel.
        return lambda x, _i=None: x.select(normalize_axis(axis, x.dim()), constant[0])

    def gather(x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        a = normalize_axis(axis, x.dim())
        flat = x.index_select(a, _wrap(index, x.shape[a]).reshape(-1))
        return flat.reshape(x.shape[:a] + index.shape + x.shape[a + 1:])

    return gather


@register("GatherElements", versions=(11, None), supports=_check(("axis",), (0,), (1,), moves=True),
          held_dtypes=WIDE_UNSIGNED)
@moves_bits
def _gather_elements(info: NodeInfo) -> Callable[..., Any]:
    axis = info.attr("axis", 0)

    def gather_elements(x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        a = normalize_axis(axis, x.dim())
        return torch.gather(x, a, _wrap(index, x.shape[a]))

    return gather_elements


def _linear_index(index: torch.Tensor, dims: tuple[int, ...]) -> torch.Tensor:
    """Row-major offsets of the coordinates in ``index``'s last axis within ``dims``."""
    linear = torch.zeros(index.shape[:-1], dtype=torch.int64, device=index.device)
    for j, size in enumerate(dims):
        linear = linear * size + _wrap(index[..., j], size)
    return linear


@register("GatherND", versions=(11, None), supports=_check(("batch_dims",), (0,), (1,), moves=True),
          held_dtypes=WIDE_UNSIGNED)
@moves_bits
def _gather_nd(info: NodeInfo) -> Callable[..., Any]:
    batch_dims = info.attr("batch_dims", 0)

    def gather_nd(x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        b, k = batch_dims, index.shape[-1]
        batch = math.prod(x.shape[:b])
        rows = x.reshape(batch, math.prod(x.shape[b:b + k]), *x.shape[b + k:])
        linear = _linear_index(index, tuple(x.shape[b:b + k])).reshape(batch, -1)
        picked = rows[torch.arange(batch, device=x.device).unsqueeze(1), linear]
        return picked.reshape(*index.shape[:-1], *x.shape[b + k:])

    return gather_nd


def _scatter_elements_fn(axis: int, reduction: str) -> Callable[..., Any]:
    def scatter_elements(x: torch.Tensor, index: torch.Tensor,
                         updates: torch.Tensor) -> torch.Tensor:
        a = normalize_axis(axis, x.dim())
        index = _wrap(index, x.shape[a])
        if reduction == "none":
            return torch.scatter(x, a, index, updates)
        return torch.scatter_reduce(x, a, index, updates, _REDUCTIONS[reduction], include_self=True)

    return scatter_elements


@register("ScatterElements", versions=(11, None),
          supports=_check(("axis", "reduction"), (0, 2), (1,), reduce=True))
def _scatter_elements(info: NodeInfo) -> Callable[..., Any]:
    return _scatter_elements_fn(info.attr("axis", 0), info.attr("reduction", "none"))


@register("Scatter", versions=(9, 10), supports=_check(("axis",), (0, 2), (1,)))
def _scatter(info: NodeInfo) -> Callable[..., Any]:
    return _scatter_elements_fn(info.attr("axis", 0), "none")


@register("ScatterND", versions=(11, None),
          supports=_check(("reduction",), (0, 2), (1,), reduce=True))
def _scatter_nd(info: NodeInfo) -> Callable[..., Any]:
    reduction = info.attr("reduction", "none")

    def scatter_nd(x: torch.Tensor, index: torch.Tensor, updates: torch.Tensor) -> torch.Tensor:
        k = index.shape[-1]
        # Rows of x addressed by the first k dims; each index row picks one of them.
        rows = x.reshape(math.prod(x.shape[:k]), math.prod(x.shape[k:]))
        linear = _linear_index(index, tuple(x.shape[:k])).reshape(-1, 1)
        linear = linear.expand(linear.shape[0], rows.shape[1])
        values = updates.reshape(linear.shape)
        if reduction == "none":
            out = rows.scatter(0, linear, values)
        else:
            out = rows.scatter_reduce(0, linear, values, _REDUCTIONS[reduction], include_self=True)
        return out.reshape(x.shape)

    return scatter_nd


def _one_hot_supports(info: NodeInfo) -> str | None:
    reason = first_reason(attrs_reason(info, ("axis",)), dtype_reason(info, (0, 1), NUMERIC_DTYPES),
                          dtype_reason(info, (2,)))
    depth = info.const(1)
    if reason is None and depth is not None and float(depth.reshape(-1)[0]) % 1:
        return "a non-integral depth is not supported"
    return reason


@register("OneHot", versions=(9, None), supports=_one_hot_supports)
def _one_hot(info: NodeInfo) -> Callable[..., Any]:
    axis, constant = info.attr("axis", -1), info.const(1)

    def encode(index: torch.Tensor, depth: int, values: torch.Tensor) -> torch.Tensor:
        a = normalize_axis(axis, index.dim() + 1)
        # Compared in the indices' own type: a float index like 1.5 matches no class.
        classes = torch.arange(depth, device=index.device, dtype=index.dtype)
        classes = classes.reshape([depth] + [1] * (index.dim() - a))
        index = torch.where(index < 0, index + depth, index).unsqueeze(a)
        return torch.where(index == classes, values[1], values[0])

    if constant is not None:
        fixed = int(constant.reshape(-1)[0])
        return lambda index, _d, values: encode(index, fixed, values)

    def one_hot(index: torch.Tensor, depth: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
        count = depth.reshape(-1)[0].item()
        if count % 1:
            raise InputError(f"OneHot depth must be an integer, got {count}")
        return encode(index, int(count), values)

    return eager(one_hot)


@register("ReverseSequence", versions=(10, None),
          supports=_check(("batch_axis", "time_axis"), (0,), (1,)))
def _reverse_sequence(info: NodeInfo) -> Callable[..., Any]:
    batch_axis, time_axis = info.attr("batch_axis", 1), info.attr("time_axis", 0)

    def reverse_sequence(x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        steps = x.shape[time_axis]
        shape = [1] * x.dim()
        shape[time_axis] = steps
        time = torch.arange(steps, device=x.device).reshape(shape)
        shape = [1] * x.dim()
        shape[batch_axis] = x.shape[batch_axis]
        length = lengths.long().reshape(shape)
        # Positions before each sequence's length read from its mirror, the rest stay.
        source = torch.where(time < length, length - 1 - time, time)
        return torch.gather(x, time_axis, source.expand(x.shape))

    return reverse_sequence
