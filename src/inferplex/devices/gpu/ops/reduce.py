"""Lowerings: Reduce*, ArgMax/ArgMin, CumSum/CumProd, TopK.

Reductions keep the input's element type (torch widens integer sums and products
to int64; the result is cast back, wrapping like ONNX Runtime's accumulators).
Reductions over an empty set give ONNX's identity values (ReduceMax: the lowest
value of the type, ReduceMin: the highest, ...), where torch would raise.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import onnx_ir as ir
import torch

from inferplex.devices.gpu.ops._common import (
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

Reduction = Callable[[torch.Tensor, tuple[int, ...]], torch.Tensor]
"""Reduces ``dims`` of a tensor, keeping them as size-1 dims."""


def _real(x: torch.Tensor) -> torch.Tensor:
    """Integers go through double, like numpy, for reductions that take roots or logs."""
    return x if x.is_floating_point() else x.double()


def _over(op: Callable[..., torch.Tensor]) -> Reduction:
    """``op`` over ``dims`` keeping them; over no dims (noop_with_empty_axes) the input.

    ONNX defines ReduceL1, ReduceL2, ReduceLogSum, ... as an elementwise part around
    ReduceSum, so with no axes to reduce the elementwise part still applies.
    """
    return lambda x, dims: op(x, dims, keepdim=True) if dims else x


def _prod(x: torch.Tensor, dims: tuple[int, ...], keepdim: bool = True) -> torch.Tensor:
    for d in dims:  # torch.prod takes one dim at a time
        x = torch.prod(x, d, keepdim=True)
    return x


def _mean(x: torch.Tensor, dims: tuple[int, ...]) -> torch.Tensor:
    if not dims:
        return x
    if x.is_floating_point():
        return torch.mean(x, dims, keepdim=True)
    count = 1
    for d in dims:
        count *= x.shape[d]
    # numpy's mean-then-cast and ORT both truncate integer means toward zero.
    return torch.div(torch.sum(x, dims, keepdim=True), count, rounding_mode="trunc")


def _extreme(op: Callable[..., torch.Tensor]) -> Reduction:
    def reduce(x: torch.Tensor, dims: tuple[int, ...]) -> torch.Tensor:
        # amax/amin have no bool kernel: max of bools is any, computed on uint8.
        y = x.to(torch.uint8) if x.dtype == torch.bool else x
        return op(y, dims, keepdim=True) if dims else x

    return reduce


_sum = _over(torch.sum)
_REDUCTIONS: dict[str, Reduction] = {
    "ReduceSum": _sum,
    "ReduceMean": _mean,
    "ReduceMax": _extreme(torch.amax),
    "ReduceMin": _extreme(torch.amin),
    "ReduceProd": _over(_prod),
    "ReduceL1": lambda x, d: _sum(torch.abs(x), d),
    "ReduceL2": lambda x, d: torch.sqrt(_sum(_real(x) * _real(x), d)),
    "ReduceLogSum": lambda x, d: torch.log(_sum(_real(x), d)),
    "ReduceLogSumExp": lambda x, d: (_over(torch.logsumexp)(_real(x), d) if d
                                     else torch.log(torch.exp(_real(x)))),
    "ReduceSumSquare": lambda x, d: _sum(x * x, d),
}


def _empty_fill(op_type: str, dtype: torch.dtype) -> float | int | bool | None:
    """The value of ``op_type`` over an empty set, where torch would raise (else None)."""
    if op_type not in ("ReduceMax", "ReduceMin"):
        return None
    high = op_type == "ReduceMin"
    if dtype == torch.bool:
        return high
    if dtype.is_floating_point:
        return float("inf") if high else float("-inf")
    info = torch.iinfo(dtype)
    return info.max if high else info.min


def _reduce_fn(op_type: str, axes: list[int] | None, keepdims: bool,
               noop: bool) -> Callable[..., Any]:
    reduction = _REDUCTIONS[op_type]

    def reduce(x: torch.Tensor, _axes: Any = None) -> torch.Tensor:
        # No dims (noop_with_empty_axes, or a 0-d input) applies only the elementwise part.
        everything = () if noop else range(x.dim())
        dims = tuple(sorted({normalize_axis(a, x.dim()) for a in axes} if axes else everything))
        kept = [1 if d in dims else n for d, n in enumerate(x.shape)]
        shape = kept if keepdims else [n for d, n in enumerate(x.shape) if d not in dims]
        fill = _empty_fill(op_type, x.dtype)
        if fill is not None and any(x.shape[d] == 0 for d in dims):
            return torch.full(shape, fill, dtype=x.dtype, device=x.device)
        return reduction(x, dims).reshape(shape).to(x.dtype)

    return reduce


def _reduce_supports(info: NodeInfo) -> str | None:
    allowed = NUMERIC_DTYPES
    if info.op_type in ("ReduceMax", "ReduceMin"):
        allowed = allowed | {ir.DataType.BOOL}
    return first_reason(attrs_reason(info, ("axes", "keepdims", "noop_with_empty_axes")),
                        dtype_reason(info, (0,), allowed))


def _register_reduce(op_type: str, axes_input_since: int) -> None:
    @register(op_type, supports=_reduce_supports)
    def lower(info: NodeInfo) -> Callable[..., Any]:
        keepdims, noop = bool(info.attr("keepdims", 1)), bool(info.attr("noop_with_empty_axes", 0))
        if info.opset < axes_input_since:
            return _reduce_fn(op_type, info.attr("axes"), keepdims, noop)
        if not info.has_input(1) or info.const(1) is not None:
            return _reduce_fn(op_type, const_ints(info, 1), keepdims, noop)

        def reduce(x: torch.Tensor, axes: torch.Tensor) -> torch.Tensor:
            return _reduce_fn(op_type, host_ints(axes), keepdims, noop)(x)

        return eager(reduce)


for _op in _REDUCTIONS:
    _register_reduce(_op, 13 if _op == "ReduceSum" else 18)


def _arg_supports(info: NodeInfo) -> str | None:
    return first_reason(attrs_reason(info, ("axis", "keepdims", "select_last_index")),
                        dtype_reason(info, (0,), NUMERIC_DTYPES | {ir.DataType.BOOL}))


@register("ArgMax", supports=_arg_supports)
@register("ArgMin", supports=_arg_supports)
def _arg_extreme(info: NodeInfo) -> Callable[..., Any]:
    op = torch.argmax if info.op_type == "ArgMax" else torch.argmin
    axis, keepdims = info.attr("axis", 0), bool(info.attr("keepdims", 1))
    last = bool(info.attr("select_last_index", 0))

    def arg_extreme(x: torch.Tensor) -> torch.Tensor:
        a = normalize_axis(axis, x.dim())
        y = x.to(torch.uint8) if x.dtype == torch.bool else x
        # torch returns the first extreme index; the last one is the first of the flipped axis.
        if last:
            return x.shape[a] - 1 - op(y.flip(a), a, keepdim=keepdims)
        return op(y, a, keepdim=keepdims)

    return arg_extreme


def _cumulative_fn(op_type: str, axis: int, exclusive: bool, reverse: bool) -> Callable[..., Any]:
    op, identity = (torch.cumsum, 0) if op_type == "CumSum" else (torch.cumprod, 1)

    def cumulative(x: torch.Tensor, _axis: Any = None) -> torch.Tensor:
        a = normalize_axis(axis, x.dim())
        if x.shape[a] == 0:
            return x.clone()
        y = x.flip(a) if reverse else x
        out = op(y, a).to(x.dtype)
        if exclusive:
            # Exclusive scan = inclusive scan shifted one step, starting at the identity.
            first = torch.full_like(out.narrow(a, 0, 1), identity)
            out = torch.cat([first, out.narrow(a, 0, x.shape[a] - 1)], a)
        return out.flip(a) if reverse else out

    return cumulative


def _cumulative_supports(info: NodeInfo) -> str | None:
    return first_reason(attrs_reason(info, ("exclusive", "reverse")),
                        dtype_reason(info, (0,), NUMERIC_DTYPES))


@register("CumSum", versions=(11, None), supports=_cumulative_supports)
@register("CumProd", versions=(26, None), supports=_cumulative_supports)
def _cumulative(info: NodeInfo) -> Callable[..., Any]:
    exclusive, reverse = bool(info.attr("exclusive", 0)), bool(info.attr("reverse", 0))
    axis = const_ints(info, 1)
    if axis is not None:
        return _cumulative_fn(info.op_type, axis[0], exclusive, reverse)

    def cumulative(x: torch.Tensor, axis: torch.Tensor) -> torch.Tensor:
        return _cumulative_fn(info.op_type, host_ints(axis)[0], exclusive, reverse)(x)

    return eager(cumulative)


def _top_k_fn(k: int, axis: int, largest: bool) -> Callable[..., Any]:
    def top_k(x: torch.Tensor, _k: Any = None) -> tuple[torch.Tensor, torch.Tensor]:
        a = normalize_axis(axis, x.dim())
        # A stable sort keeps equal values in index order, ONNX's tie rule; torch.topk
        # does not promise any order among ties.
        values, indices = torch.sort(x, dim=a, descending=largest, stable=True)
        return values.narrow(a, 0, k), indices.narrow(a, 0, k)

    return top_k


@register("TopK", supports=lambda info: first_reason(
    attrs_reason(info, ("axis", "k", "largest", "sorted")),
    dtype_reason(info, (0,), NUMERIC_DTYPES)))
def _top_k(info: NodeInfo) -> Callable[..., Any]:
    # sorted=0 lets any order through; sorted output is one of them.
    axis, largest = info.attr("axis", -1), bool(info.attr("largest", 1))
    if info.opset < 10:
        return _top_k_fn(info.attr("k"), axis, largest)
    k = const_ints(info, 1)
    if k is not None:
        return _top_k_fn(k[0], axis, largest)

    def top_k(x: torch.Tensor, k: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return _top_k_fn(host_ints(k)[0], axis, largest)(x)

    return eager(top_k)
