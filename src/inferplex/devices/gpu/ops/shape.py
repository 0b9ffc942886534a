"""Lowerings: reshaping, slicing, concatenation, padding, shape queries and generators.

Shapes, axes, pads, starts/ends, repeats read from constant inputs become Python
ints at lowering time.  When such an input is computed at run time the lowering
reads it on the host and is marked ``data_dependent`` (see ``_common.eager``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import onnx_ir as ir
import torch
import torch.nn.functional as F

from inferplex.devices.gpu.ops._common import (
    EXACT_DTYPES,
    NUMERIC_DTYPES,
    attrs_reason,
    const_ints,
    dtype_reason,
    eager,
    first_reason,
    host_ints,
    int64_tensor,
    normalize_axis,
    torch_dtype,
)
from inferplex.devices.gpu.ops._unsigned import WIDE_UNSIGNED, moves_bits
from inferplex.devices.gpu.ops.types import CAST_HELD
from inferplex.devices.gpu.registry import NodeInfo, register
from inferplex.errors import InputError

_MOVABLE = EXACT_DTYPES | CAST_HELD
_MOVES = EXACT_DTYPES | WIDE_UNSIGNED
"""Types of the ops that select or join values (Concat, Slice, ...): uint16/32/64 as signed bits."""
"""Element types the view-only ops (Reshape, Transpose, Squeeze, ...) move: torch holds uint16/32/64
and float8 and can view and copy them, though it computes little on them."""


def _check(attrs: tuple[str, ...] = (), inputs: tuple[int, ...] = (0,),
           allowed: frozenset[ir.DataType] = EXACT_DTYPES) -> Callable[[NodeInfo], str | None]:
    def supports(info: NodeInfo) -> str | None:
        return first_reason(attrs_reason(info, attrs), dtype_reason(info, inputs, allowed))

    return supports


def _ints_input(info: NodeInfo, index: int,
                build: Callable[[list[int] | None], Callable[..., Any]]) -> Callable[..., Any]:
    """Lower an op whose input ``index`` holds ints (a shape, axes, repeats, ...).

    ``build(values)`` returns the forward function for those values (None: input
    absent).  A constant input is read now; a computed one on every call, eagerly.
    """
    return _ints_inputs(info, (index,), build)


def _ints_inputs(info: NodeInfo, indices: Sequence[int],
                 build: Callable[..., Callable[..., Any]]) -> Callable[..., Any]:
    """Like :func:`_ints_input` for several int inputs: ``build(*values)``."""
    if all(not info.has_input(i) or info.const(i) is not None for i in indices):
        return build(*(const_ints(info, i) for i in indices))

    def run(*inputs: torch.Tensor | None) -> Any:
        values = (host_ints(inputs[i]) if i < len(inputs) else None for i in indices)
        return build(*values)(*inputs)

    return eager(run)


# --- reshaping ---------------------------------------------------------------

def _reshape_target(shape: Sequence[int], target: Sequence[int], allowzero: bool) -> list[int]:
    if allowzero:
        return list(target)
    # shape entry 0 copies the input's dimension (unless allowzero).
    return [shape[i] if t == 0 else t for i, t in enumerate(target)]


@register("Reshape", versions=(5, None), supports=_check(("allowzero",), allowed=_MOVABLE),
          held_dtypes=CAST_HELD)
def _reshape(info: NodeInfo) -> Callable[..., Any]:
    allowzero = bool(info.attr("allowzero", 0))

    def build(target: list[int] | None) -> Callable[..., Any]:
        return lambda x, _s=None: x.reshape(_reshape_target(x.shape, target or [], allowzero))

    return _ints_input(info, 1, build)


@register("Transpose", supports=_check(("perm",), allowed=_MOVABLE), held_dtypes=CAST_HELD)
def _transpose(info: NodeInfo) -> Callable[..., Any]:
    perm = info.attr("perm")
    if perm is None:
        return lambda x: x.permute(*reversed(range(x.dim())))
    return lambda x: x.permute(*perm)


@register("Flatten", supports=_check(("axis",), allowed=_MOVABLE), held_dtypes=CAST_HELD)
def _flatten(info: NodeInfo) -> Callable[..., Any]:
    axis = info.attr("axis", 1)

    def flatten(x: torch.Tensor) -> torch.Tensor:
        a = normalize_axis(axis, x.dim())
        # Explicit sizes: reshape(-1) cannot infer a dimension next to a zero-size one.
        return x.reshape(math.prod(x.shape[:a]), math.prod(x.shape[a:]))

    return flatten


def _axes(info: NodeInfo, index: int) -> tuple[str, int]:
    """Where the axes are: ("attr", 0) before opset 13, else ("input", index)."""
    return ("attr", 0) if info.opset < 13 else ("input", index)


@register("Squeeze", supports=_check(("axes",), allowed=_MOVABLE), held_dtypes=CAST_HELD)
def _squeeze(info: NodeInfo) -> Callable[..., Any]:
    def build(axes: list[int] | None) -> Callable[..., Any]:
        if not axes:
            return lambda x, _a=None: x.reshape([d for d in x.shape if d != 1])
        return lambda x, _a=None: x.squeeze(tuple(normalize_axis(a, x.dim()) for a in axes))

    if info.opset < 13:
        return build(info.attr("axes"))
    return _ints_input(info, 1, build)


@register("Unsqueeze", supports=_check(("axes",), allowed=_MOVABLE), held_dtypes=CAST_HELD)
def _unsqueeze(info: NodeInfo) -> Callable[..., Any]:
    def build(axes: list[int] | None) -> Callable[..., Any]:
        def unsqueeze(x: torch.Tensor, _a: Any = None) -> torch.Tensor:
            rank = x.dim() + len(axes or [])
            shape = list(x.shape)
            for a in sorted(normalize_axis(a, rank) for a in axes or []):
                shape.insert(a, 1)
            return x.reshape(shape)

        return unsqueeze

    if info.opset < 13:
        return build(info.attr("axes"))
    return _ints_input(info, 1, build)


@register("Concat", versions=(4, None), held_dtypes=WIDE_UNSIGNED, supports=lambda info: first_reason(
    attrs_reason(info, ("axis",)), dtype_reason(info, range(info.num_inputs), _MOVES)))
@moves_bits
def _concat(info: NodeInfo) -> Callable[..., Any]:
    axis = info.attr("axis")
    return lambda *xs: torch.cat(xs, dim=axis)


def _split_sizes(dim: int, count: int, sizes: list[int] | None) -> list[int]:
    if sizes:
        return sizes
    # Uneven (opset 18 num_outputs): every chunk ceil-sized, the last one what remains.
    chunk = dim // count if dim % count == 0 else dim // count + 1
    if dim - chunk * (count - 1) < 0:
        raise InputError(f"Split: a dimension of {dim} cannot be split into {count} outputs of "
                         f"{chunk} (the last one smaller); give the split sizes")
    return [chunk] * (count - 1) + [dim - chunk * (count - 1)]


@register("Split", versions=(2, None), supports=_check(("axis", "split", "num_outputs"), allowed=_MOVES),
          held_dtypes=WIDE_UNSIGNED)
@moves_bits
def _split(info: NodeInfo) -> Callable[..., Any]:
    axis, count = info.attr("axis", 0), len(info.node.outputs)

    def build(sizes: list[int] | None) -> Callable[..., Any]:
        def split(x: torch.Tensor, _s: Any = None) -> tuple[torch.Tensor, ...]:
            a = normalize_axis(axis, x.dim())
            return tuple(torch.split(x, _split_sizes(x.shape[a], count, sizes), dim=a))

        return split

    if info.opset < 13:
        return build(info.attr("split"))
    return _ints_input(info, 1, build)


@register("Expand", versions=(8, None), supports=_check(allowed=_MOVABLE), held_dtypes=CAST_HELD)
def _expand(info: NodeInfo) -> Callable[..., Any]:
    def build(shape: list[int] | None) -> Callable[..., Any]:
        return lambda x, _s=None: x.expand(torch.broadcast_shapes(x.shape, tuple(shape or ())))

    return _ints_input(info, 1, build)


@register("Tile", versions=(6, None), supports=_check(allowed=_MOVES), held_dtypes=WIDE_UNSIGNED)
@moves_bits
def _tile(info: NodeInfo) -> Callable[..., Any]:
    def build(repeats: list[int] | None) -> Callable[..., Any]:
        return lambda x, _r=None: x.repeat(*(repeats or []))

    return _ints_input(info, 1, build)


def _space_depth_supports(info: NodeInfo) -> str | None:
    reason = _check(("blocksize", "mode"))(info)
    if reason is None and info.attr("mode", "DCR") not in ("DCR", "CRD"):
        return f"mode {info.attr('mode')!r} is not DCR or CRD"
    return reason


@register("DepthToSpace", supports=_space_depth_supports)
def _depth_to_space(info: NodeInfo) -> Callable[..., Any]:
    b, crd = info.attr("blocksize"), info.attr("mode", "DCR") == "CRD"

    def depth_to_space(x: torch.Tensor) -> torch.Tensor:
        n, c, h, w = x.shape
        if crd:
            y = x.reshape(n, c // (b * b), b, b, h, w).permute(0, 1, 4, 2, 5, 3)
        else:
            y = x.reshape(n, b, b, c // (b * b), h, w).permute(0, 3, 4, 1, 5, 2)
        return y.reshape(n, c // (b * b), h * b, w * b)

    return depth_to_space


@register("SpaceToDepth", supports=_space_depth_supports)
def _space_to_depth(info: NodeInfo) -> Callable[..., Any]:
    b, crd = info.attr("blocksize"), info.attr("mode", "DCR") == "CRD"

    def space_to_depth(x: torch.Tensor) -> torch.Tensor:
        n, c, h, w = x.shape
        y = x.reshape(n, c, h // b, b, w // b, b)
        # Output channels ordered (block row, block col, channel) for DCR, (channel, ...) for CRD.
        y = y.permute(0, 1, 3, 5, 2, 4) if crd else y.permute(0, 3, 5, 1, 2, 4)
        return y.reshape(n, c * b * b, h // b, w // b)

    return space_to_depth


# --- slicing and padding -----------------------------------------------------

def _slice_fn(starts: list[int], ends: list[int], axes: list[int] | None,
              steps: list[int] | None) -> Callable[..., Any]:
    def slice_(x: torch.Tensor, *_: Any) -> torch.Tensor:
        index: list[slice] = [slice(None)] * x.dim()
        flips = []
        for i, (start, end) in enumerate(zip(starts, ends, strict=False)):
            a = normalize_axis(axes[i] if axes else i, x.dim())
            # Python's slice.indices clamps exactly as ONNX (numpy) does, steps of both signs.
            lo, hi, step = slice(start, end, steps[i] if steps else 1).indices(x.shape[a])
            count = len(range(lo, hi, step))
            if step > 0 or count == 0:
                index[a] = slice(lo, hi, step) if count else slice(0, 0)
            else:
                # torch has no negative steps: take the same elements forwards, then flip.
                index[a] = slice(lo + (count - 1) * step, lo + 1, -step)
                flips.append(a)
        y = x[tuple(index)]
        return y.flip(flips) if flips else y

    return slice_


@register("Slice", supports=_check(("starts", "ends", "axes"), allowed=_MOVES), held_dtypes=WIDE_UNSIGNED)
@moves_bits
def _slice(info: NodeInfo) -> Callable[..., Any]:
    if info.opset < 10:
        return _slice_fn(info.attr("starts"), info.attr("ends"), info.attr("axes"), None)
    return _ints_inputs(info, (1, 2, 3, 4), _slice_fn)


def _pad_index(mode: str, dim: int, before: int, after: int, device: torch.device) -> torch.Tensor:
    """Source index along one axis for edge/wrap/reflect padding (negative pads crop)."""
    index = torch.arange(-before, dim + after, device=device)
    if mode == "edge" or (mode == "reflect" and dim == 1):
        return index.clamp(0, dim - 1)
    if mode == "wrap":
        return index.remainder(dim)
    period = 2 * (dim - 1)
    index = index.remainder(period)
    return torch.where(index >= dim, period - index, index)


def _pad_fn(mode: str, pads: list[int], axes: list[int] | None,
            value: float | int | bool | None) -> Callable[..., Any]:
    def pad(x: torch.Tensor, _p: Any = None, fill: torch.Tensor | None = None,
            *_: Any) -> torch.Tensor:
        rank = x.dim()
        chosen = [normalize_axis(a, rank) for a in axes] if axes else list(range(rank))
        before = dict(zip(chosen, pads[:len(chosen)], strict=False))
        after = dict(zip(chosen, pads[len(chosen):], strict=False))
        if mode != "constant":
            for a in chosen:
                x = x.index_select(a, _pad_index(mode, x.shape[a], before[a], after[a], x.device))
            return x
        widths = [w for a in reversed(range(rank)) for w in (before.get(a, 0), after.get(a, 0))]
        if value is not None or fill is None:
            return F.pad(x, widths, value=value or 0)
        # A computed pad value stays on the device: pad with 0, then fill the border.
        inside = F.pad(torch.ones_like(x, dtype=torch.bool), widths, value=False)
        return torch.where(inside, F.pad(x, widths, value=0), fill.reshape(()).to(x.dtype))

    return pad


def _pad_supports(info: NodeInfo) -> str | None:
    reason = _check(("mode", "pads", "value"))(info)
    mode = info.attr("mode", "constant")
    if reason is None and mode not in ("constant", "reflect", "edge", "wrap"):
        return f"Pad mode {mode!r} is not implemented"
    return reason


@register("Pad", versions=(2, None), supports=_pad_supports)
def _pad(info: NodeInfo) -> Callable[..., Any]:
    mode = info.attr("mode", "constant")
    if info.opset < 11:
        return _pad_fn(mode, info.attr("pads"), None, info.attr("value", 0.0))
    fill = info.const(2) if info.has_input(2) else np.zeros(())
    value = None if fill is None else np.asarray(fill).reshape(-1)[0].item()
    return _ints_inputs(info, (1, 3), lambda pads, axes: _pad_fn(mode, pads or [], axes, value))


# --- shapes and generated tensors --------------------------------------------

@register("Shape", supports=_check(("start", "end"), allowed=_MOVABLE), held_dtypes=CAST_HELD)
def _shape(info: NodeInfo) -> Callable[..., Any]:
    start, end = info.attr("start", 0), info.attr("end")
    # Python's list slicing clamps start/end like ONNX.
    return lambda x: int64_tensor(list(x.shape)[start:end], x.device)


@register("Size", supports=_check(allowed=_MOVABLE), held_dtypes=CAST_HELD)
def _size(info: NodeInfo) -> Callable[..., Any]:
    return lambda x: torch.full((), x.numel(), dtype=torch.int64, device=x.device)


def _constant_value(info: NodeInfo) -> np.ndarray | None:
    for name in ("value", "value_float", "value_floats", "value_int", "value_ints"):
        raw = info.attr(name)
        if raw is not None:
            return np.asarray(raw, dtype=np.float32 if "float" in name else
                              (np.int64 if "int" in name else None))
    return None


def _constant_supports(info: NodeInfo) -> str | None:
    value = _constant_value(info)
    if value is None:
        return "only dense numeric Constant values are implemented"
    if ir.DataType.from_numpy(value.dtype) not in EXACT_DTYPES:
        return f"element type {value.dtype} is not supported"
    return None


@register("Constant", supports=_constant_supports)
def _constant(info: NodeInfo) -> Callable[..., Any]:
    """The value, copied once per device and then shared (callers never mutate it).

    With no input to take a device from, the caller passes ``device=`` (default CPU).
    """
    value = torch.from_numpy(np.array(_constant_value(info)))
    cache: dict[torch.device, torch.Tensor] = {}

    def constant(*, device: torch.device | str | None = None) -> torch.Tensor:
        key = torch.device(device or "cpu")
        if key not in cache:
            cache[key] = value.to(key)
        return cache[key]

    return constant


def _constant_of_shape_supports(info: NodeInfo) -> str | None:
    value = info.attr("value")
    if value is not None and ir.DataType.from_numpy(value.dtype) not in EXACT_DTYPES:
        return f"element type {value.dtype} is not supported"
    return attrs_reason(info, ("value",))


@register("ConstantOfShape", versions=(9, None), supports=_constant_of_shape_supports)
def _constant_of_shape(info: NodeInfo) -> Callable[..., Any]:
    value = info.attr("value", np.zeros(1, dtype=np.float32))
    dtype, fill = torch.from_numpy(np.array(value)).dtype, value.reshape(-1)[0].item()

    def build(shape: list[int] | None) -> Callable[..., Any]:
        return lambda s: torch.full(shape or [], fill, dtype=dtype, device=s.device)

    return _ints_input(info, 0, build)


def _range_fn(dtype: torch.dtype, start: float, limit: float, delta: float) -> Callable[..., Any]:
    if dtype.is_floating_point:
        count = max(math.ceil((limit - start) / delta), 0)
    else:
        start, limit, delta = int(start), int(limit), int(delta)
        count = max(-((start - limit) // delta), 0)

    def range_(s: torch.Tensor, *_: Any) -> torch.Tensor:
        # output[i] = start + i * delta, computed in double and rounded once for floats.
        steps = torch.arange(count, dtype=torch.float64 if dtype.is_floating_point else torch.int64,
                             device=s.device)
        return (steps * delta + start).to(dtype)

    return range_


@register("Range", versions=(11, None), supports=_check(inputs=(0, 1, 2), allowed=NUMERIC_DTYPES))
def _range(info: NodeInfo) -> Callable[..., Any]:
    dtype = torch_dtype(info.input_dtypes[0]) if info.input_dtypes[0] else torch.float32
    if all(info.const(i) is not None for i in range(3)):
        return _range_fn(dtype, *(np.asarray(info.const(i)).item() for i in range(3)))

    def range_(*scalars: torch.Tensor) -> torch.Tensor:
        return _range_fn(scalars[0].dtype, *(s.item() for s in scalars))(scalars[0])

    return eager(range_)


@register("EyeLike", versions=(9, None), supports=lambda info: first_reason(
    _check(("dtype", "k"), allowed=NUMERIC_DTYPES | {ir.DataType.BOOL})(info),
    None if info.attr("dtype") is None or ir.DataType(info.attr("dtype")) in EXACT_DTYPES
    else "output element type not supported"))
def _eye_like(info: NodeInfo) -> Callable[..., Any]:
    k, code = info.attr("k", 0), info.attr("dtype")
    dtype = None if code is None else torch_dtype(code)

    def eye_like(x: torch.Tensor) -> torch.Tensor:
        rows = torch.arange(x.shape[0], device=x.device).unsqueeze(1)
        cols = torch.arange(x.shape[1], device=x.device)
        return (cols - rows == k).to(dtype or x.dtype)

    return eye_like


@register("Trilu", versions=(14, None), supports=_check(("upper",)))
def _trilu(info: NodeInfo) -> Callable[..., Any]:
    op = torch.triu if info.attr("upper", 1) else torch.tril

    def build(k: list[int] | None) -> Callable[..., Any]:
        return lambda x, _k=None: op(x, k[0] if k else 0)

    return _ints_input(info, 1, build)
