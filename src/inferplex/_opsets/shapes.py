"""OpenVINO's ops that make or rearrange tensors: Broadcast, Pad, Range, DepthToSpace,
SpaceToDepth, ShuffleChannels and NonZero, each as the ONNX ops that compute the same thing.
"""

from __future__ import annotations

import builtins
from typing import Any

import numpy as np
import onnx_ir as ir

from inferplex._opsets.build import (
    INT64_MAX,
    INT64_MIN,
    NodeInput,
    as_op,
    constant_data,
    constant_ints,
    int64,
    make_op,
    rank_of,
    static_dims,
    value_of,
)
from inferplex._opsets.build import step as _step
from inferplex.api.nodes import Node, to_ir_dtype
from inferplex.errors import InputError

__all__ = ["broadcast", "depth_to_space", "non_zero", "pad", "range", "shuffle_channels", "space_to_depth"]

_BROADCAST_MODES = ("numpy", "bidirectional", "explicit")
_PAD_MODES = ("constant", "edge", "reflect", "symmetric")
_BLOCK_MODES = ("blocks_first", "depth_first")


def broadcast(data: NodeInput, target_shape: NodeInput, axes_mapping: NodeInput = None,
              broadcast_spec: str = "NUMPY", name: str | None = None, *, mode: str | None = None) -> Node:
    """Broadcast ``data`` to ``target_shape``.

    ``broadcast_spec`` (opset 1's keyword: ``mode``): ``"numpy"`` (to ``target_shape``),
    ``"bidirectional"`` (to the numpy broadcast of both shapes) or ``"explicit"`` (dim ``i`` of
    ``data`` goes to output axis ``axes_mapping[i]``, the rest are repeated).
    """
    spec = str(mode if mode is not None else broadcast_spec).lower()
    if spec not in _BROADCAST_MODES:
        raise InputError(f"broadcast mode {spec!r}: ONNX Expand broadcasts numpy-style; accepted: "
                         f"{', '.join(_BROADCAST_MODES)}")
    x = value_of(data)
    shape = int64(target_shape)
    if spec == "explicit":
        if axes_mapping is None:
            raise InputError("broadcast mode 'explicit' needs axes_mapping (one output axis per dim of data)")
        mapping = constant_ints(axes_mapping, "broadcast axes_mapping")
        if shape.shape is None or not isinstance(shape.shape[0], int):
            raise InputError("broadcast mode 'explicit' needs a target_shape of known length")
        if mapping != sorted(set(mapping)) or rank_of(x, "broadcast") != len(mapping):
            raise InputError(f"broadcast axes_mapping {mapping} must list one increasing output axis "
                             f"per dim of data (rank {len(x.shape or [])})")
        missing = [axis for axis in builtins.range(shape.shape[0]) if axis not in mapping]
        if missing:
            x = _step("Unsqueeze", [x, np.array(missing, dtype=np.int64)])
    return make_op("Broadcast", "Expand", [x, shape], {}, name)


def pad(arg: NodeInput, pads_begin: NodeInput, pads_end: NodeInput, pad_mode: str,
        arg_pad_value: NodeInput = None, name: str | None = None) -> Node:
    """Pad ``arg`` by ``pads_begin``/``pads_end`` per axis; ``pad_mode`` is ``"constant"`` (with
    ``arg_pad_value``, 0 by default), ``"edge"``, ``"reflect"`` or ``"symmetric"`` (a mirror that
    repeats the edge).  Negative pads (constant ones) crop."""
    kind = str(pad_mode).lower()
    if kind not in _PAD_MODES:
        raise InputError(f"pad mode {pad_mode!r}; accepted: {', '.join(_PAD_MODES)}")
    x = value_of(arg)
    begin, end = constant_data(pads_begin), constant_data(pads_end)
    fill = None if arg_pad_value is None or kind != "constant" else value_of(arg_pad_value, x.dtype)
    if begin is None or end is None:
        if kind == "symmetric":
            raise InputError("pad mode 'symmetric' needs constant pads_begin and pads_end")
        pads = _step("Concat", [int64(pads_begin), int64(pads_end)], {"axis": 0})
        return make_op("Pad", "Pad", [x, pads, fill], {"mode": kind}, name)
    begin_list = [int(v) for v in np.asarray(begin).reshape(-1)]
    end_list = [int(v) for v in np.asarray(end).reshape(-1)]
    if len(begin_list) != len(end_list):
        raise InputError(f"pad: pads_begin {begin_list} and pads_end {end_list} differ in length")
    if any(v < 0 for v in begin_list + end_list):
        x = _crop(x, begin_list, end_list)
        begin_list, end_list = [max(v, 0) for v in begin_list], [max(v, 0) for v in end_list]
    if kind == "symmetric":
        return as_op("Pad", _mirror(x, begin_list, end_list), name)
    pads = value_of(np.array(begin_list + end_list, dtype=np.int64))
    return make_op("Pad", "Pad", [x, pads, fill], {"mode": kind}, name)


def _crop(x: ir.Value, begin: list[int], end: list[int]) -> ir.Value:
    axes = [axis for axis, (b, e) in enumerate(zip(begin, end, strict=True)) if b < 0 or e < 0]
    starts = [-min(begin[a], 0) for a in axes]
    ends = [min(end[a], 0) or INT64_MAX for a in axes]
    return _step("Slice", [x, np.array(starts, np.int64), np.array(ends, np.int64), np.array(axes, np.int64)])


def _mirror(x: ir.Value, begin: list[int], end: list[int]) -> ir.Value:
    """Symmetric padding: each side gets the reversed run of its first (last) elements."""
    def piece(axis: int, start: int, stop: int) -> ir.Value:
        return _step("Slice", [x, np.array([start], np.int64), np.array([stop], np.int64),
                              np.array([axis], np.int64), np.array([-1], np.int64)])

    for axis, (b, e) in enumerate(zip(begin, end, strict=True)):
        parts = []
        if b:
            parts.append(piece(axis, b - 1, INT64_MIN))
        parts.append(x)
        if e:
            parts.append(piece(axis, -1, -e - 1))
        if len(parts) > 1:
            x = _step("Concat", parts, {"axis": axis})
    return x


def range(start: NodeInput, stop: NodeInput, step: NodeInput, output_type: Any = None,
          name: str | None = None) -> Node:
    """``[start, start + step, ...)`` up to ``stop``; with ``output_type`` the three are converted to
    it first (OpenVINO's Range-4), without it they take ``start``'s type (Range-1)."""
    target = to_ir_dtype(output_type) if output_type is not None else value_of(start).dtype
    items = [_scalar(item, target) for item in (start, stop, step)]
    return make_op("Range", "Range", items, {}, name)


def range_untyped(start: NodeInput, stop: NodeInput, step: NodeInput, name: str | None = None) -> Node:
    """``range`` as opsets 1 to 11 spell it (no ``output_type``): the output takes ``start``'s type."""
    return range(start, stop, step, None, name)


def _scalar(item: NodeInput, dtype: ir.DataType | None) -> ir.Value:
    data = constant_data(item)
    if data is not None:
        array = np.asarray(data).reshape(())
        return value_of(array.astype(dtype.numpy()) if dtype is not None else array)
    value = value_of(item)
    if value.shape is not None and len(value.shape) == 1:
        value = _step("Squeeze", [value, np.array([0], np.int64)])
    if dtype is not None and value.dtype != dtype:
        value = _step("Cast", [value], {"to": int(dtype)})
    return value


def non_zero(data: NodeInput, output_type: Any = "i64", name: str | None = None) -> Node:
    """The indices of the non-zero elements, one row per dim: ``[rank, count]``."""
    node = make_op("NonZero", "NonZero", [value_of(data)], {}, name)
    target = to_ir_dtype(output_type)
    if target not in (ir.DataType.INT64, ir.DataType.INT32):
        raise InputError(f"non_zero output_type {output_type!r}; accepted: 'i64', 'i32'")
    if target == ir.DataType.INT64:
        return node
    node.set_friendly_name(f"{node.get_friendly_name()}/indices")
    return make_op("NonZero", "Cast", [value_of(node)], {"to": int(target)}, name)


def depth_to_space(node: NodeInput, mode: str, block_size: int = 1, name: str | None = None) -> Node:
    """Move blocks of ``block_size ** K`` channels into the K spatial dims; ``mode`` says whether
    the block index comes before the channel in the depth (``"blocks_first"``) or after it."""
    x, kind, size = value_of(node), _block_mode(mode, "depth_to_space"), int(block_size)
    if x.shape is not None and len(x.shape) == 4:
        attrs = {"blocksize": size, "mode": "DCR" if kind == "blocks_first" else "CRD"}
        return make_op("DepthToSpace", "DepthToSpace", [x], attrs, name)
    dims = static_dims(x, f"depth_to_space of rank {rank_of(x, 'depth_to_space')}")
    n, c, spatial = dims[0], dims[1], dims[2:]
    k = len(spatial)
    depth = c // size ** k
    if kind == "blocks_first":
        split = [n, *[size] * k, depth, *spatial]
        order = [0, k + 1, *[v for i in builtins.range(k) for v in (k + 2 + i, 1 + i)]]
    else:
        split = [n, depth, *[size] * k, *spatial]
        order = [0, 1, *[v for i in builtins.range(k) for v in (k + 2 + i, 2 + i)]]
    return _rearrange("DepthToSpace", x, split, order, [n, depth, *[d * size for d in spatial]], name)


def space_to_depth(data: NodeInput, mode: str, block_size: int = 1, name: str | None = None) -> Node:
    """Move ``block_size``-wide blocks of the spatial dims into the channels (the inverse of
    :func:`depth_to_space` in the same ``mode``)."""
    x, kind, size = value_of(data), _block_mode(mode, "space_to_depth"), int(block_size)
    if x.shape is not None and len(x.shape) == 4 and kind == "blocks_first":
        return make_op("SpaceToDepth", "SpaceToDepth", [x], {"blocksize": size}, name)
    dims = static_dims(x, f"space_to_depth in mode {kind!r}")
    n, c, spatial = dims[0], dims[1], dims[2:]
    k = len(spatial)
    split = [n, c, *[v for d in spatial for v in (d // size, size)]]
    blocks = [3 + 2 * i for i in builtins.range(k)]
    places = [2 + 2 * i for i in builtins.range(k)]
    order = [0, *blocks, 1, *places] if kind == "blocks_first" else [0, 1, *blocks, *places]
    out = [n, c * size ** k, *[d // size for d in spatial]]
    return _rearrange("SpaceToDepth", x, split, order, out, name)


def shuffle_channels(data: NodeInput, axis: int, group: int, name: str | None = None) -> Node:
    """Split ``axis`` into ``group`` groups and interleave them (the input of static shape)."""
    x = value_of(data)
    dims = static_dims(x, "shuffle_channels")
    where = int(axis) % len(dims)
    if dims[where] % int(group):
        raise InputError(f"shuffle_channels: axis {axis} of length {dims[where]} does not divide into "
                         f"{group} groups")
    split = [*dims[:where], int(group), dims[where] // int(group), *dims[where + 1:]]
    order = [*builtins.range(where), where + 1, where, *builtins.range(where + 2, len(split))]
    return _rearrange("ShuffleChannels", x, split, order, dims, name)


def _rearrange(type_name: str, x: ir.Value, split: list[int], order: list[int], out: list[int],
               name: str | None) -> Node:
    parts = _step("Reshape", [x, np.array(split, np.int64)])
    moved = _step("Transpose", [parts], {"perm": order})
    return make_op(type_name, "Reshape", [moved, value_of(np.array(out, np.int64))], {}, name)


def _block_mode(mode: str, what: str) -> str:
    kind = str(mode).lower()
    if kind not in _BLOCK_MODES:
        raise InputError(f"{what} mode {mode!r}; accepted: {', '.join(_BLOCK_MODES)}")
    return kind

