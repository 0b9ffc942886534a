"""OpenVINO's slicing ops: Slice (opset 8), StridedSlice with its five masks, Roll and
ReverseSequence, as ONNX Slice, Squeeze, Unsqueeze, Concat and ReverseSequence.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

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
    value_of,
)
from inferplex._opsets.build import step as _step
from inferplex.api.nodes import Node
from inferplex.errors import InputError

__all__ = ["reverse_sequence", "roll", "slice", "strided_slice"]


def slice(data: NodeInput, start: NodeInput, stop: NodeInput, step: NodeInput,
          axes: NodeInput = None, name: str | None = None) -> Node:
    """``data[start:stop:step]`` along ``axes`` (all leading axes by default), as numpy slices:
    negative positions count from the end, out-of-range ones are clamped."""
    inputs = [value_of(data), int64(start), int64(stop), None if axes is None else int64(axes), int64(step)]
    return make_op("Slice", "Slice", inputs, {}, name)


@dataclass
class _Plan:
    """What a StridedSlice does to each input axis, and where its new axes go."""

    axes: list[int] = field(default_factory=list)
    """Input axes that are sliced (the others are kept whole)."""
    starts: list[int] = field(default_factory=list)
    ends: list[int] = field(default_factory=list)
    steps: list[int] = field(default_factory=list)
    shrink: list[int] = field(default_factory=list)
    """Input axes removed after slicing (a single index was taken)."""
    new: list[int] = field(default_factory=list)
    """Output positions of the inserted length-1 axes."""


def strided_slice(data: NodeInput, begin: NodeInput, end: NodeInput, strides: NodeInput,
                  begin_mask: Sequence[int], end_mask: Sequence[int],
                  new_axis_mask: Sequence[int] | None = None, shrink_axis_mask: Sequence[int] | None = None,
                  ellipsis_mask: Sequence[int] | None = None, name: str | None = None) -> Node:
    """numpy-style ``data[b0:e0:s0, b1:e1:s1, ...]`` with OpenVINO's masks: ``begin_mask[i]`` /
    ``end_mask[i]`` = 1 ignores ``begin[i]`` / ``end[i]`` (the slice runs from / to the edge),
    ``new_axis_mask`` inserts a length-1 axis (``np.newaxis``), ``shrink_axis_mask`` takes the one
    element at ``begin[i]`` and drops the axis, ``ellipsis_mask`` stands for the axes not named
    (``...``).  With a mask that has an effect, begin, end and strides must be constant."""
    x = value_of(data)
    masks = [[] if m is None else [int(bit) for bit in m]
             for m in (begin_mask, end_mask, new_axis_mask, shrink_axis_mask, ellipsis_mask)]
    values = [constant_data(v) for v in (begin, end, strides)]
    if any(v is None for v in values):
        if any(any(m) for m in masks):
            raise InputError("strided_slice with computed begin, end or strides takes no masks; "
                             "give constant begin/end/strides to use begin_mask, end_mask, ...")
        return slice(x, begin, end, strides, None, name)
    rank = rank_of(x, "strided_slice")
    begins, ends, steps = ([int(v) for v in np.asarray(a).reshape(-1)] for a in values)
    if not len(begins) == len(ends) == len(steps):
        raise InputError(f"strided_slice: begin {begins}, end {ends} and strides {steps} differ in length")
    if 0 in steps:
        raise InputError(f"strided_slice strides {steps} contain 0; a stride must be non-zero")
    plan = _plan(rank, begins, ends, steps, *masks)
    out = x
    if plan.axes:
        bounds = (np.array(v, np.int64) for v in (plan.starts, plan.ends, plan.axes, plan.steps))
        out = _step("Slice", [out, *bounds])
    if plan.shrink:
        out = _step("Squeeze", [out, np.array(plan.shrink, np.int64)])
    if plan.new:
        out = _step("Unsqueeze", [out, np.array(plan.new, np.int64)])
    if out is x:
        return make_op("StridedSlice", "Identity", [x], {}, name)
    return as_op("StridedSlice", out, name)


def _plan(rank: int, begins: list[int], ends: list[int], steps: list[int], begin_mask: list[int],
          end_mask: list[int], new_mask: list[int], shrink_mask: list[int],
          ellipsis_mask: list[int]) -> _Plan:
    def bit(mask: list[int], i: int) -> bool:
        return i < len(mask) and bool(mask[i])

    count = len(begins)
    if sum(bit(ellipsis_mask, i) for i in range(count)) > 1:
        raise InputError(f"strided_slice ellipsis_mask {ellipsis_mask} marks more than one ellipsis")
    named = sum(1 for i in range(count) if not bit(new_mask, i) and not bit(ellipsis_mask, i))
    if named > rank:
        raise InputError(f"strided_slice slices {named} axes of a rank-{rank} input")
    plan = _Plan()
    axis = position = 0
    for i in range(count):
        if bit(ellipsis_mask, i):
            skipped = rank - named
            axis, position = axis + skipped, position + skipped
            continue
        if bit(new_mask, i):
            plan.new.append(position)
            position += 1
            continue
        if bit(shrink_mask, i):
            _take(plan, axis, begins[i], begins[i] + 1 if begins[i] != -1 else INT64_MAX, 1)
            plan.shrink.append(axis)
        else:
            forward = steps[i] > 0
            start = (0 if forward else INT64_MAX) if bit(begin_mask, i) else begins[i]
            stop = (INT64_MAX if forward else INT64_MIN) if bit(end_mask, i) else ends[i]
            if (start, stop, steps[i]) != (0, INT64_MAX, 1):  # not the whole axis
                _take(plan, axis, start, stop, steps[i])
            position += 1
        axis += 1
    return plan


def _take(plan: _Plan, axis: int, start: int, stop: int, stride: int) -> None:
    plan.axes.append(axis)
    plan.starts.append(start)
    plan.ends.append(stop)
    plan.steps.append(stride)


def roll(data: NodeInput, shift: NodeInput, axes: NodeInput, name: str | None = None) -> Node:
    """Shift elements along ``axes`` by ``shift`` (one shift, or one per axis), those pushed off one
    end coming back at the other; an axis named twice moves by the sum.  ``shift`` and ``axes``
    must be constant and the rolled axes of static length."""
    x = value_of(data)
    rank = rank_of(x, "roll")
    shifts, axis_list = constant_ints(shift, "roll shift"), constant_ints(axes, "roll axes")
    if len(shifts) == 1:
        shifts = shifts * len(axis_list)
    if len(shifts) != len(axis_list):
        raise InputError(f"roll: {len(shifts)} shifts for {len(axis_list)} axes; "
                         "give one shift or one per axis")
    total: dict[int, int] = {}
    for axis, amount in zip(axis_list, shifts, strict=True):
        if not -rank <= axis < rank:
            raise InputError(f"roll axis {axis} is out of range for rank {rank}")
        total[axis % rank] = total.get(axis % rank, 0) + amount
    out = x
    for axis, amount in sorted(total.items()):
        out = _roll_axis(out, axis, amount)
    if out is x:
        return make_op("Roll", "Identity", [x], {}, name)
    return as_op("Roll", out, name)


def _roll_axis(x: ir.Value, axis: int, amount: int) -> ir.Value:
    length = x.shape[axis] if x.shape is not None else None
    if not isinstance(length, int):
        raise InputError(f"roll along axis {axis} of dynamic length: the split point needs its length")
    cut = amount % length if length else 0
    if cut == 0:
        return x

    def part(start: int, stop: int) -> ir.Value:
        return _step("Slice", [x, np.array([start], np.int64), np.array([stop], np.int64),
                              np.array([axis], np.int64)])

    return _step("Concat", [part(length - cut, length), part(0, length - cut)], {"axis": axis})


def reverse_sequence(input: NodeInput, seq_lengths: NodeInput, batch_axis: int, seq_axis: int,
                     name: str | None = None) -> Node:
    """Reverse the first ``seq_lengths[b]`` elements along ``seq_axis`` of each batch ``b``
    (``batch_axis``); ONNX's ReverseSequence takes the axes 0 and 1, so other axes are moved there
    (and back) by transposes."""
    x = value_of(input)
    rank = rank_of(x, "reverse_sequence")
    if not (-rank <= int(batch_axis) < rank and -rank <= int(seq_axis) < rank):
        raise InputError(f"reverse_sequence batch_axis {batch_axis}, seq_axis {seq_axis}: out of range for "
                         f"rank {rank}")
    batch, time = int(batch_axis) % rank, int(seq_axis) % rank
    if batch == time:
        raise InputError(f"reverse_sequence batch_axis {batch_axis} and seq_axis {seq_axis} are one axis; "
                         "they must differ")
    lengths = int64(seq_lengths)
    if {batch, time} == {0, 1}:
        return make_op("ReverseSequence", "ReverseSequence", [x, lengths],
                       {"batch_axis": batch, "time_axis": time}, name)
    order = [batch, time, *(a for a in range(rank) if a not in (batch, time))]
    moved = _step("Transpose", [x], {"perm": order})
    reversed_ = _step("ReverseSequence", [moved, lengths], {"batch_axis": 0, "time_axis": 1})
    back = [int(i) for i in np.argsort(order)]
    return make_op("ReverseSequence", "Transpose", [reversed_], {"perm": back}, name)
