"""OpenVINO's indexing ops: GatherND, GatherElements, the three scatters and OneHot, as ONNX
GatherND, GatherElements, ScatterND, ScatterElements and OneHot.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx_ir as ir

from inferplex._opsets.build import (
    NodeInput,
    constant_data,
    constant_ints,
    int64,
    like,
    make_op,
    rank_of,
    step,
    value_of,
)
from inferplex.api.nodes import Node
from inferplex.errors import InputError

__all__ = ["gather_elements", "gather_nd", "one_hot", "scatter_elements_update", "scatter_nd_update",
           "scatter_update"]

_ELEMENTS_REDUCTIONS = {"none": "none", "sum": "add", "prod": "mul"}
_ND_REDUCTIONS = {"none": "none", "sum": "add", "sub": "add", "prod": "mul"}
_NEGATIVE_MODES = ("ignore-negative", "normalize")


def gather_nd(data: NodeInput, indices: NodeInput, batch_dims: int | None = 0,
              name: str | None = None) -> Node:
    """Slices of ``data`` at the index tuples in the last dim of ``indices``, after ``batch_dims``
    leading dims shared by both."""
    return make_op("GatherND", "GatherND", [value_of(data), int64(indices)],
                   {"batch_dims": int(batch_dims or 0)}, name)


def gather_elements(data: NodeInput, indices: NodeInput, axis: int | None = 0,
                    name: str | None = None) -> Node:
    """``out[i][j][k] = data[indices[i][j][k]][j][k]`` for ``axis`` 0, and so on for the others."""
    return make_op("GatherElements", "GatherElements", [value_of(data), value_of(indices)],
                   {"axis": int(axis or 0)}, name)


def scatter_elements_update(data: NodeInput, indices: NodeInput, updates: NodeInput, axis: NodeInput,
                            reduction: str | None = "None", use_init_val: bool | None = True,
                            name: str | None = None) -> Node:
    """``data`` with ``data[indices[i][j]][j] = updates[i][j]`` (for ``axis`` 0); ``reduction``
    ``"sum"`` or ``"prod"`` combines the updates with each other and, with ``use_init_val``,
    with ``data``'s element.  ``"min"``, ``"max"`` and ``"mean"`` have no ONNX opset 17 equivalent."""
    kind = str(reduction or "none").lower()
    if kind not in _ELEMENTS_REDUCTIONS:
        raise InputError(f"scatter_elements_update reduction {reduction!r}: ONNX opset 17's ScatterElements "
                         f"reduces by sum or product only; accepted: {', '.join(_ELEMENTS_REDUCTIONS)}")
    x, where, new = value_of(data), int64(indices), value_of(updates)
    attrs = {"axis": _one_int(axis, "scatter_elements_update axis")}
    if kind != "none" and use_init_val is False:  # start each target from the reduction's identity
        identity = step("Expand", [like(x, 0 if kind == "sum" else 1), step("Shape", [new])])
        x = step("ScatterElements", [x, where, identity], attrs)
    return make_op("ScatterElementsUpdate", "ScatterElements", [x, where, new],
                   {**attrs, "reduction": _ELEMENTS_REDUCTIONS[kind]}, name)


def scatter_update(data: NodeInput, indices: NodeInput, updates: NodeInput, axis: NodeInput,
                   name: str | None = None) -> Node:
    """``data`` with the slices at ``indices`` along ``axis`` replaced: ``updates`` has shape
    ``data.shape[:axis] + indices.shape + data.shape[axis + 1:]``."""
    x, where, new = value_of(data), int64(indices), value_of(updates)
    rank = rank_of(x, "scatter_update")
    index_rank = rank_of(where, "scatter_update indices")
    position = _one_int(axis, "scatter_update axis") % rank
    where = step("Unsqueeze", [where, np.array([-1], np.int64)])
    if position == 0:
        return make_op("ScatterUpdate", "ScatterND", [x, where, new], {}, name)
    front = [position, *range(position), *range(position + 1, rank)]
    block = list(range(position, position + index_rank))
    update_order = [*block, *range(position), *range(position + index_rank, rank - 1 + index_rank)]
    moved = step("ScatterND", [step("Transpose", [x], {"perm": front}), where,
                               step("Transpose", [new], {"perm": update_order})])
    back = [int(i) for i in np.argsort(front)]
    return make_op("ScatterUpdate", "Transpose", [moved], {"perm": back}, name)


def scatter_nd_update(data: NodeInput, indices: NodeInput, updates: NodeInput, reduction: str | None = None,
                      name: str | None = None) -> Node:
    """``data`` with the elements or slices at the index tuples of ``indices`` set to ``updates``;
    ``reduction`` ``"sum"``, ``"sub"`` or ``"prod"`` combines them with ``data`` instead
    (``"min"``/``"max"`` have no ONNX opset 17 equivalent)."""
    kind = str(reduction or "none").lower()
    if kind not in _ND_REDUCTIONS:
        raise InputError(f"scatter_nd_update reduction {reduction!r}: ONNX opset 17's ScatterND "
                         f"reduces by sum or product only; accepted: {', '.join(_ND_REDUCTIONS)}")
    new = value_of(updates)
    if kind == "sub":
        new = step("Neg", [new])
    attrs = {"reduction": _ND_REDUCTIONS[kind]} if kind != "none" else {}
    return make_op("ScatterNDUpdate", "ScatterND", [value_of(data), int64(indices), new], attrs, name)


def one_hot(indices: NodeInput, depth: NodeInput, on_value: NodeInput, off_value: NodeInput, axis: int,
            negative_indices_mode: str | None = None, name: str | None = None) -> Node:
    """A new ``axis`` of length ``depth`` holding ``on_value`` at each index, ``off_value`` elsewhere.
    A negative index gives all ``off_value`` (``"ignore-negative"``, the default) or counts from
    the end (``"normalize"``); an index past ``depth`` gives all ``off_value``."""
    # OpenVINO's enum spells it ignore_negative, its string attribute ignore-negative: both are taken
    mode = str(negative_indices_mode or "ignore-negative").lower().replace("_", "-")
    if mode not in _NEGATIVE_MODES:
        raise InputError(f"one_hot negative_indices_mode {negative_indices_mode!r}; accepted: "
                         f"{', '.join(_NEGATIVE_MODES)}")
    where = value_of(indices)
    count = _depth(depth)
    on = value_of(on_value)
    values = _on_off(on, off_value)
    if mode == "ignore-negative" and where.dtype is not None and where.dtype.is_signed():
        # ONNX counts a negative index from the end; OpenVINO's default leaves its row off:
        # move negatives past the end, where ONNX also leaves the row off
        past_end = step("Cast", [count], {"to": int(where.dtype)})
        where = step("Where", [step("Less", [where, like(where, 0)]), past_end, where])
    return make_op("OneHot", "OneHot", [where, count, values], {"axis": int(axis)}, name)


def _depth(depth: NodeInput) -> ir.Value:
    data = constant_data(depth)
    if data is not None:
        return value_of(np.asarray(data, dtype=np.int64).reshape(()))
    return value_of(depth)


def _on_off(on: ir.Value, off_value: NodeInput) -> ir.Value:
    on_data, off_data = on.const_value, constant_data(off_value)
    if on_data is not None and off_data is not None:
        dtype = on_data.numpy().dtype
        pair = [np.asarray(off_data).reshape(()), on_data.numpy().reshape(())]
        return value_of(np.array(pair, dtype=dtype))
    off = value_of(off_value, on.dtype)
    flat = [step("Reshape", [v, np.array([1], np.int64)]) for v in (off, on)]
    return step("Concat", flat, {"axis": 0})


def _one_int(value: Any, what: str) -> int:
    ints = constant_ints(value, what)
    if len(ints) != 1:
        raise InputError(f"{what} must be one integer, got {ints}")
    return ints[0]


