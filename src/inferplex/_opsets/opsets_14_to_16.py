"""Functions OpenVINO's opsets 14 to 16 added, as ONNX ops: ``inverse``, ``convert_promote_types``
(14), ``stft``, ``search_sorted``, ``slice_scatter``, ``col2im``, the bitwise shifts (15),
``segment_max`` and ``istft`` (16).

``inverse`` is Gauss-Jordan elimination with partial pivoting, unrolled over the matrix's size where
it is static, a Loop over it where it is not; ``col2im`` adds each column's values into its place of
the padded image (ScatterElements' ``add``) with the places worked out here from the static sizes;
``slice_scatter`` writes ``updates`` at the places ONNX's Slice would read with the same start,
stop, step and axes.

The bitwise shifts are C's on the integer's own width: logical on unsigned types, arithmetic (the
sign kept) right shifts of signed ones, through ONNX's BitShift on the unsigned type of that width;
a count of the width or more shifts every bit out (0, or -1 for a negative value shifted right), a
negative count shifts nothing.  (OpenVINO's CPU shifts 32- and 64-bit values in 32-bit signed
arithmetic; on the CPU device models with 32- and 64-bit shifts run where ONNX Runtime runs them.)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx_ir as ir

from inferplex._opsets.build import (
    NodeInput,
    as_op,
    choice,
    constant_data,
    constant_ints,
    int64,
    is_graph_input,
    make_op,
    mark_exact_integers,
    show,
    step,
    value_of,
)
from inferplex._opsets.build import dim as _dim
from inferplex._opsets.build import floats as _floats
from inferplex._opsets.build import ints as _ints
from inferplex.api.nodes import Node
from inferplex.errors import InputError

__all__ = ["bitwise_left_shift", "bitwise_right_shift", "col2im", "convert_promote_types", "inverse", "istft",
           "search_sorted", "segment_max", "slice_scatter", "stft"]

_FLOAT = int(ir.DataType.FLOAT)
_INT64 = int(ir.DataType.INT64)


def stft(data: NodeInput, window: NodeInput, frame_size: NodeInput, frame_step: NodeInput,
         transpose_frames: bool, name: str | None = None) -> Node:
    """The short-time Fourier transform of ``data`` [signal] or [batch, signal], as OpenVINO's STFT
    (opset 15): frames of ``frame_size`` every ``frame_step`` samples, times ``window`` (zero-padded
    on both sides to ``frame_size`` where shorter), their one-sided DFT: [batch?, frames,
    frame_size // 2 + 1, 2] (real, imaginary), or [batch?, bins, frames, 2] with
    ``transpose_frames``."""
    signal, taps = value_of(data), value_of(window)
    rank = None if signal.shape is None else len(signal.shape)
    if rank not in (1, 2):
        raise InputError(f"stft takes data of rank 1 or 2 ([signal] or [batch, signal]), got rank {rank}")
    _check_window(taps, "stft")
    dtype = signal.dtype or ir.DataType.FLOAT
    signal, taps = (v if v.dtype == ir.DataType.FLOAT else step("Cast", [v], {"to": _FLOAT})
                    for v in (signal, taps))
    size, hop = (_scalar_int(v) for v in (frame_size, frame_step))
    short = step("Sub", [step("Reshape", [size, _ints([1])]), _dim(taps, 0)])  # zeros to add
    left = step("Div", [short, _ints([2])])
    taps = step("Pad", [taps, step("Concat", [left, step("Sub", [short, left])], {"axis": 0})])
    batch = signal if rank == 2 else step("Unsqueeze", [signal, _ints([0])])
    frames = step("STFT", [step("Unsqueeze", [batch, _ints([2])]), hop, taps, size], {"onesided": 1})
    if transpose_frames:
        frames = step("Transpose", [frames], {"perm": [0, 2, 1, 3]})
    if rank == 1:
        frames = step("Squeeze", [frames, _ints([0])])
    if dtype != ir.DataType.FLOAT:
        frames = step("Cast", [frames], {"to": int(dtype)})
    return as_op("STFT", frames, name)


def istft(data: NodeInput, window: NodeInput, frame_size: NodeInput, frame_step: NodeInput, center: bool,
          normalized: bool, signal_length: NodeInput = None, name: str | None = None) -> Node:
    """The inverse of :func:`stft` (torch's ``istft``), as OpenVINO's ISTFT (opset 16): ``data``
    [batch?, frame_size // 2 + 1, frames, 2] (the bins before the frames) back to a signal: each
    frame's inverse real DFT (times sqrt(frame_size) where ``normalized``), times ``window``
    (zero-padded on both sides to ``frame_size``), added where it starts (every ``frame_step``
    samples), divided by the windows' squares added the same way where that sum is not 0;
    ``center`` drops ``frame_size // 2`` samples at each end; ``signal_length`` cuts or zero-pads
    the end.  ``frame_size`` must be a constant."""
    from inferplex._opsets.spectral import irdft

    spectrum, taps = value_of(data), value_of(window)
    rank = None if spectrum.shape is None else len(spectrum.shape)
    if rank not in (3, 4):
        raise InputError(f"istft takes data of rank 3 or 4 ([batch?, bins, frames, 2]), got rank {rank}")
    _check_window(taps, "istft")
    size = int(constant_ints(frame_size, "istft frame_size")[0])
    dtype = spectrum.dtype or ir.DataType.FLOAT
    spectrum, taps = (v if v.dtype == ir.DataType.FLOAT else step("Cast", [v], {"to": _FLOAT})
                      for v in (spectrum, taps))
    batch = spectrum if rank == 4 else step("Unsqueeze", [spectrum, _ints([0])])
    frames = step("Transpose", [batch], {"perm": [0, 2, 1, 3]})  # [B, frames, bins, 2]
    signal = irdft(frames, _ints([2]), _ints([size]))._outputs[0]  # noqa: SLF001 - [B, frames, size]
    if normalized:
        signal = step("Mul", [signal, _floats(float(np.float32(np.sqrt(size))))])
    short = step("Sub", [_ints([size]), _dim(taps, 0)])
    left = step("Div", [short, _ints([2])])
    taps = step("Pad", [taps, step("Concat", [left, step("Sub", [short, left])], {"axis": 0})])
    signal = step("Mul", [signal, taps])
    hop = _scalar_int(frame_step)
    count = _dim(signal, 1)
    starts = step("Mul", [step("Range", [_ints(0), step("Squeeze", [count]), _ints(1)]), hop])
    places = step("Reshape", [step("Add", [step("Unsqueeze", [starts, _ints([1])]),
                                           _ints(np.arange(size).reshape(1, -1))]), _ints([1, -1])])
    length = step("Add", [step("Mul", [step("Sub", [count, _ints([1])]), hop]), _ints([size])])  # [1]
    flat = step("Reshape", [signal, _ints([0, -1])])  # [B, frames * size]
    blank = step("Expand", [_floats(0.0), step("Concat", [_dim(flat, 0), length], {"axis": 0})])
    added = step("ScatterElements", [blank, step("Expand", [places, step("Shape", [flat])]), flat],
                 {"axis": 1, "reduction": "add"})
    squares = step("Expand", [step("Reshape", [step("Mul", [taps, taps]), _ints([1, -1])]),
                              step("Concat", [count, _ints([size])], {"axis": 0})])
    envelope = step("ScatterElements", [step("Expand", [_floats(0.0), step("Concat", [_ints([1]), length],
                                                                             {"axis": 0})]),
                                        places, step("Reshape", [squares, _ints([1, -1])])],
                    {"axis": 1, "reduction": "add"})  # [1, length]
    added = step("Where", [step("Equal", [envelope, _floats(0.0)]), added, step("Div", [added, envelope])])
    if center:
        added = step("Slice", [added, _ints([size // 2]), step("Sub", [length, _ints([size // 2])]),
                               _ints([1])])
    if signal_length is not None:
        wanted = step("Reshape", [int64(signal_length), _ints([1])])
        added = step("Pad", [added, step("Concat", [_ints([0, 0, 0]), step("Max", [
            step("Sub", [wanted, _dim(added, 1)]), _ints([0])])], {"axis": 0})])
        added = step("Slice", [added, _ints([0]), wanted, _ints([1])])
    if rank == 3:
        added = step("Squeeze", [added, _ints([0])])
    if dtype != ir.DataType.FLOAT:
        added = step("Cast", [added], {"to": int(dtype)})
    return as_op("ISTFT", added, name)


def _check_window(window: ir.Value, what: str) -> None:
    if window.shape is not None and len(window.shape) != 1:
        raise InputError(f"{what} takes a window of rank 1 [window_size], got {show(window)}")


def _scalar_int(item: NodeInput) -> ir.Value:
    """``item`` as an int64 scalar: a constant where it is one (OpenVINO's ONNX reader takes STFT's
    frame step and length as constants only)."""
    data = constant_data(item)
    if data is not None:
        return _ints(int(np.asarray(data).reshape(-1)[0]))
    return step("Reshape", [int64(item), _ints([])])


def search_sorted(sorted_sequence: NodeInput, values: NodeInput, right_mode: bool = False,
                  name: str | None = None) -> Node:
    """For each of ``values`` [..., M], its place in ``sorted_sequence`` ([..., N] of the same
    leading dims, or [N]) that keeps it sorted: before equal values (the count of smaller ones) or,
    with ``right_mode``, after them (the count of those not larger); int64."""
    ordered, wanted = value_of(sorted_sequence), value_of(values)
    if ordered.shape is not None and wanted.shape is not None and len(ordered.shape) != 1:
        lead = list(zip(ordered.shape[:-1], wanted.shape[:-1], strict=False))
        if len(ordered.shape) != len(wanted.shape) or any(
                isinstance(x, int) and isinstance(y, int) and x != y for x, y in lead):
            raise InputError(f"search_sorted takes sorted_sequence [N] or [..., N] with values [..., M] of "
                             f"the same leading dims, got {show(ordered)} and {show(wanted)}")
    compare = "LessOrEqual" if right_mode else "Less"
    below = step(compare, [step("Unsqueeze", [ordered, _ints([-2])]),
                           step("Unsqueeze", [wanted, _ints([-1])])])  # [..., M, N]
    return make_op("SearchSorted", "ReduceSum", [step("Cast", [below], {"to": _INT64}), _ints([-1])],
                   {"keepdims": 0}, name)


def slice_scatter(data: NodeInput, updates: NodeInput, start: NodeInput, stop: NodeInput,
                  step_: NodeInput = None, axes: NodeInput = None, name: str | None = None,
                  **keywords: Any) -> Node:
    """``data`` with ``updates`` written where ONNX's Slice (``start``, ``stop``, ``step``, ``axes``:
    constants; default axes 0, 1, ...) would read; ``updates`` has that slice's shape."""
    steps = keywords.pop("step", step_)
    if keywords:
        raise InputError(f"slice_scatter got unknown arguments {sorted(keywords)}; accepted: data, updates, "
                         "start, stop, step, axes, name")
    base = value_of(data)
    rank = None if base.shape is None else len(base.shape)
    if rank is None:
        raise InputError("slice_scatter needs data of known rank")
    begins, ends = int64(start), int64(stop)
    count = len(constant_ints(start, "slice_scatter start")) if axes is None else None
    axis_list = list(range(count or 0)) if axes is None else constant_ints(axes, "slice_scatter axes")
    axis_list = [a + rank if a < 0 else a for a in axis_list]
    if sorted(set(axis_list)) != sorted(axis_list) or any(not 0 <= a < rank for a in axis_list):
        raise InputError(f"slice_scatter axes {axis_list}: each within the data's rank {rank}, once")
    strides = int64(steps) if steps is not None else _ints([1] * len(axis_list))
    places = []
    for axis in range(rank):
        every = step("Range", [_ints(0), step("Squeeze", [_dim(base, axis)]), _ints(1)])
        if axis in axis_list:
            at = _ints([axis_list.index(axis)])
            every = step("Slice", [every, *(step("Gather", [v, at], {"axis": 0}) for v in (begins, ends)),
                                   _ints([0]), step("Gather", [strides, at], {"axis": 0})])
        places.append(every)
    shape = step("Concat", [_dim_of(p) for p in places], {"axis": 0})
    grid = []
    for axis, every in enumerate(places):
        spread = step("Reshape", [every, _ints([-1 if a == axis else 1 for a in range(rank)])])
        grid.append(step("Unsqueeze", [step("Expand", [spread, shape]), _ints([-1])]))
    index = step("Concat", grid, {"axis": -1})
    written = value_of(updates, base.dtype)
    if written.shape is not None and len(written.shape) != rank:
        raise InputError(f"slice_scatter takes updates of the data's rank {rank} (the slice's shape), got "
                         f"{show(written)}")
    return make_op("SliceScatter", "ScatterND", [base, index, written], {}, name)


def _dim_of(value: ir.Value) -> ir.Value:
    return step("Shape", [value])


def col2im(data: NodeInput, output_size: NodeInput, kernel_size: NodeInput,
           strides: Sequence[int] | None = None, dilations: Sequence[int] | None = None,
           pads_begin: Sequence[int] | None = None, pads_end: Sequence[int] | None = None,
           name: str | None = None) -> Node:
    """The image [N?, C, H, W] (``output_size`` H, W) whose sliding blocks of ``kernel_size`` are the
    columns of ``data`` [N?, C * kH * kW, L] (torch's ``fold``): each column value added to its
    pixel; ``output_size``, ``kernel_size`` and the channel count must be constants."""
    height, width = constant_ints(output_size, "col2im output_size")
    kernel_h, kernel_w = constant_ints(kernel_size, "col2im kernel_size")
    stride_h, stride_w = list(strides or [1, 1])
    dilate_h, dilate_w = list(dilations or [1, 1])
    top, left = list(pads_begin or [0, 0])
    bottom, right = list(pads_end or [0, 0])
    columns = value_of(data)
    shape = columns.shape
    if shape is None or len(shape) not in (2, 3) or not isinstance(shape[-2], int):
        raise InputError("col2im takes data [N, C * kH * kW, L] or [C * kH * kW, L] with a known middle dim")
    rank, depth = len(shape), int(shape[-2])
    if depth % (kernel_h * kernel_w):
        raise InputError(f"col2im data's {depth} rows are not a multiple of kernel_size "
                         f"{kernel_h} x {kernel_w}")
    channels = depth // (kernel_h * kernel_w)
    padded_h, padded_w = height + top + bottom, width + left + right
    blocks_h = (padded_h - (dilate_h * (kernel_h - 1) + 1)) // stride_h + 1
    blocks_w = (padded_w - (dilate_w * (kernel_w - 1) + 1)) // stride_w + 1
    if blocks_h < 1 or blocks_w < 1:
        raise InputError(f"col2im: no block of kernel {kernel_h} x {kernel_w} fits output {height} x {width}")
    length = shape[-1]
    if isinstance(length, int) and length != blocks_h * blocks_w:
        blocks = blocks_h * blocks_w
        raise InputError(f"col2im: kernel {kernel_h} x {kernel_w} over output {height} x {width} (with the "
                         f"strides, dilations and pads) makes {blocks} blocks; the data has {length}")
    c, i, j, bh, bw = np.meshgrid(np.arange(channels), np.arange(kernel_h), np.arange(kernel_w),
                                  np.arange(blocks_h), np.arange(blocks_w), indexing="ij")
    rows = bh * stride_h + i * dilate_h
    cols = bw * stride_w + j * dilate_w
    target = ((c * padded_h + rows) * padded_w + cols).reshape(depth, blocks_h * blocks_w)
    batch = columns if rank == 3 else step("Unsqueeze", [columns, _ints([0])])
    flat = step("Reshape", [batch, _ints([0, -1])])  # [N, C * kH * kW * L]
    index = step("Expand", [_ints(target.reshape(1, -1)), step("Shape", [flat])])
    canvas = step("Concat", [_dim(flat, 0), _ints([channels * padded_h * padded_w])], {"axis": 0})
    zero = value_of(np.zeros((), dtype=(columns.dtype or ir.DataType.FLOAT).numpy()))
    blank = step("Expand", [zero, canvas])
    image = step("ScatterElements", [blank, index, flat], {"axis": 1, "reduction": "add"})
    image = step("Reshape", [image, _ints([0, channels, padded_h, padded_w])])
    image = step("Slice", [image, _ints([top, left]), _ints([top + height, left + width]), _ints([2, 3])])
    if rank == 2:
        image = step("Squeeze", [image, _ints([0])])
    return as_op("Col2Im", image, name)


def inverse(data: NodeInput, adjoint: bool = False, name: str | None = None) -> Node:
    """The inverse of each square matrix of ``data`` [..., N, N], by Gauss-Jordan elimination with
    partial pivoting (unrolled where N is a constant, a Loop over N otherwise); ``adjoint``: of its
    (conjugate) transpose."""
    matrices = value_of(data)
    shape = matrices.shape
    if shape is None or len(shape) < 2 or (isinstance(shape[-1], int) and isinstance(shape[-2], int)
                                           and shape[-1] != shape[-2]):
        raise InputError("inverse takes square matrices [..., N, N], got "
                         f"{None if shape is None else list(shape)}")
    dtype = matrices.dtype or ir.DataType.FLOAT
    if dtype not in _FLOATS:
        raise InputError(f"inverse takes floating-point matrices (f16, bf16, f32, f64), got {show(matrices)}")
    work = matrices if dtype == ir.DataType.FLOAT else step("Cast", [matrices], {"to": _FLOAT})
    if adjoint:
        work = _transposed(work, len(shape))
    size = _dim(work, -1)
    places = step("Range", [_ints(0), step("Squeeze", [size]), _ints(1)])
    diagonal = step("Equal", [step("Unsqueeze", [places, _ints([1])]), places])
    identity = step("Cast", [diagonal], {"to": _FLOAT})
    augmented = step("Concat", [work, step("Expand", [identity, step("Shape", [work])])], {"axis": -1})
    known = shape[-1] if isinstance(shape[-1], int) else shape[-2] if isinstance(shape[-2], int) else None
    if known is not None:
        for k in range(int(known)):
            augmented = _eliminated(augmented, _ints([k]))
    else:
        augmented = _eliminated_in_a_loop(augmented, size)
    result = step("Slice", [augmented, size, step("Mul", [size, _ints([2])]), _ints([-1])])
    if dtype != ir.DataType.FLOAT:
        result = step("Cast", [result], {"to": int(dtype)})
    return as_op("Inverse", result, name)


def _eliminated(augmented: ir.Value, k: ir.Value) -> ir.Value:
    """One Gauss-Jordan step on ``augmented`` [..., N, 2N] at column ``k`` ([1] int64): the row of the
    largest magnitude at or below k swapped into row k, divided by its lead, taken off the others."""
    rows = step("Unsqueeze", [step("Range", [_ints(0), step("Squeeze", [_dim(augmented, -2)]), _ints(1)]),
                              _ints([1])])  # [N, 1]
    after = step("Add", [k, _ints([1])])
    column = step("Slice", [augmented, k, after, _ints([-1])])  # [..., N, 1]
    below = step("Where", [step("Less", [rows, k]), _floats(-1.0), step("Abs", [column])])
    pivot = step("ArgMax", [below], {"axis": -2, "keepdims": 1})  # [..., 1, 1]
    others = step("Where", [step("Equal", [rows, pivot]), k, rows])
    swapped = step("Where", [step("Equal", [rows, k]), pivot, others])  # [..., N, 1]
    augmented = step("GatherElements", [augmented, step("Expand", [swapped, step("Shape", [augmented])])],
                     {"axis": -2})
    row = step("Slice", [augmented, k, after, _ints([-2])])  # [..., 1, 2N]
    row = step("Div", [row, step("Slice", [row, k, after, _ints([-1])])])
    factors = step("Slice", [augmented, k, after, _ints([-1])])  # [..., N, 1]
    reduced = step("Sub", [augmented, step("Mul", [factors, row])])
    return step("Where", [step("Equal", [rows, k]), row, reduced])


def _eliminated_in_a_loop(augmented: ir.Value, size: ir.Value) -> ir.Value:
    """:func:`_eliminated` at columns 0 to N - 1, as a Loop (N known only when the model runs)."""
    from inferplex._model import Model
    from inferplex._opsets.control_loops import loop
    from inferplex.opset import parameter, result

    rank = len(augmented.shape) if augmented.shape is not None else None
    if rank is None:
        raise InputError("inverse needs matrices of a known rank")
    counter = parameter([1], np.int64, name="inverse_column")
    carried = parameter([-1] * rank, np.float32, name="inverse_augmented")
    stepped = result(as_op("Identity", _eliminated(value_of(carried), value_of(counter)), None))
    going = result(as_op("Identity", value_of(np.array([True])), None))
    body = Model([going, stepped], [counter, carried])
    node = loop(step("Squeeze", [size]), value_of(np.array(True)))
    node.set_function(body)
    node.set_special_body_ports([0, 0])
    node.set_merged_input(carried, augmented, stepped.output(0))
    return value_of(node.get_iter_value(stepped.output(0), -1))


def _transposed(value: ir.Value, rank: int) -> ir.Value:
    return step("Transpose", [value], {"perm": [*range(rank - 2), rank - 1, rank - 2]})


_FILL_MODES = ("zero", "lowest")


def segment_max(data: NodeInput, segment_ids: NodeInput, num_segments: NodeInput = None,
                fill_mode: str | None = None, name: str | None = None) -> Node:
    """The largest row of ``data`` [N, ...] in each segment of ``segment_ids`` [N] (sorted, from
    0): [num_segments (default: the last id + 1), ...]; a segment without rows is 0 (``fill_mode``
    ``"ZERO"``) or the type's lowest value (``"LOWEST"``)."""
    mode = choice(fill_mode if fill_mode is not None else "zero", _FILL_MODES, "segment_max fill_mode")
    rows, ids = value_of(data), int64(segment_ids)
    rank = None if rows.shape is None else len(rows.shape)
    if rank is None or rank < 1:
        raise InputError("segment_max takes data of rank 1 or more")
    given = value_of(segment_ids)
    ids_shape, rows_shape = given.shape, rows.shape
    if ids_shape is not None and rows_shape is not None and (len(ids_shape) != 1 or (
            isinstance(ids_shape[0], int) and isinstance(rows_shape[0], int)
            and ids_shape[0] != rows_shape[0])):
        raise InputError(f"segment_max takes segment_ids [N], one per row of data {show(rows)}, got "
                         f"{show(given)}")
    count = (step("Add", [step("ReduceMax", [ids], {"keepdims": 1}), _ints([1])]) if num_segments is None
             else step("Reshape", [int64(num_segments), _ints([1])]))
    segments = step("Range", [_ints(0), step("Squeeze", [count]), _ints(1)])
    member = step("Equal", [step("Unsqueeze", [segments, _ints([1])]), step("Unsqueeze", [ids, _ints([0])])])
    member = step("Reshape", [member, step("Concat", [step("Shape", [member]), _ints([1] * (rank - 1))],
                                           {"axis": 0})])  # [S, N, 1, ...]
    dtype = rows.dtype or ir.DataType.FLOAT
    kind = dtype.numpy()
    lowest = np.array(np.finfo(kind).min if dtype.is_floating_point() else np.iinfo(kind).min, dtype=kind)
    held = step("Where", [member, step("Unsqueeze", [rows, _ints([0])]), value_of(lowest)])
    largest = step("ReduceMax", [held], {"axes": [1], "keepdims": 0})
    members = step("ReduceMax", [step("Cast", [member], {"to": _INT64})], {"axes": [1], "keepdims": 0})
    empty = step("Equal", [members, _ints(0)])  # written out: a reduction's own start may differ
    fill = lowest if mode == "lowest" else np.zeros((), dtype.numpy())
    return make_op("SegmentMax", "Where", [empty, value_of(fill), largest], {}, name)


_WIDTHS = {ir.DataType.INT8: (8, ir.DataType.UINT8), ir.DataType.INT16: (16, ir.DataType.UINT16),
           ir.DataType.INT32: (32, ir.DataType.UINT32), ir.DataType.INT64: (64, ir.DataType.UINT64),
           ir.DataType.UINT8: (8, ir.DataType.UINT8), ir.DataType.UINT16: (16, ir.DataType.UINT16),
           ir.DataType.UINT32: (32, ir.DataType.UINT32), ir.DataType.UINT64: (64, ir.DataType.UINT64)}
"""Each integer type's width and the unsigned type of that width."""


def bitwise_left_shift(arg0: NodeInput, arg1: NodeInput, auto_broadcast: str = "NUMPY",
                       name: str | None = None) -> Node:
    """``arg0 << arg1`` element-wise on integers of one type (numpy broadcasting)."""
    return _shift("BitwiseLeftShift", arg0, arg1, auto_broadcast, name)


def bitwise_right_shift(arg0: NodeInput, arg1: NodeInput, auto_broadcast: str = "NUMPY",
                        name: str | None = None) -> Node:
    """``arg0 >> arg1`` element-wise on integers of one type (numpy broadcasting): arithmetic for
    signed types."""
    return _shift("BitwiseRightShift", arg0, arg1, auto_broadcast, name)


def _shift(type_name: str, left: NodeInput, right: NodeInput, auto_broadcast: str,
           name: str | None) -> Node:
    choice(auto_broadcast, ("numpy", "none"), f"{type_name} auto_broadcast")
    typed = value_of(left) if is_graph_input(left) else value_of(right) if is_graph_input(right) else None
    dtype = typed.dtype if typed is not None else None
    a, b = value_of(left, dtype), value_of(right, dtype)
    if a.dtype != b.dtype or a.dtype not in _WIDTHS:
        raise InputError(f"{type_name} of {show(a)} and {show(b)}: it takes integers of one element type")
    width, unsigned = _WIDTHS[a.dtype]
    signed = unsigned != a.dtype
    # counts and signs in int64 (ONNX Runtime's Min, Max and Neg lack the narrow types)
    counts = step("Min", [step("Max", [step("Cast", [b], {"to": _INT64}), _ints(0)]), _ints(width)])
    first = step("Min", [counts, _ints(width - 1)])
    rest = step("Sub", [counts, first])  # 1 where the count is the width: every bit shifted out
    negative = None
    bits = a if not signed else step("Cast", [a], {"to": int(unsigned)})
    if signed and type_name == "BitwiseRightShift":
        # a negative value shifted right is the complement of its complement shifted right: ~x = -x - 1
        wide = step("Cast", [a], {"to": _INT64})
        negative = step("Less", [wide, _ints(0)])
        complement = step("Where", [negative, step("Sub", [step("Neg", [wide]), _ints(1)]), wide])
        bits = step("Cast", [complement], {"to": int(unsigned)})
    direction = "LEFT" if type_name == "BitwiseLeftShift" else "RIGHT"
    # 8- and 16-bit values shift as uint32 (ONNX Runtime's BitShift has no uint16, OpenVINO's
    # saturates uint8), the bits past their width dropped
    work = unsigned if width >= 32 else ir.DataType.UINT32
    moved = bits if work == unsigned else step("Cast", [bits], {"to": int(work)})
    for count in (first, rest):
        moved = step("BitShift", [moved, step("Cast", [count], {"to": int(work)})], {"direction": direction})
    if work != unsigned:
        if direction == "LEFT":
            moved = step("Mod", [moved, value_of(np.asarray(1 << width, np.uint32))])
        moved = step("Cast", [moved], {"to": int(unsigned)})
    if negative is None:
        result = moved if not signed else step("Cast", [moved], {"to": int(a.dtype)})
    else:
        shifted = step("Cast", [moved], {"to": _INT64})
        flipped = step("Sub", [step("Neg", [shifted]), _ints(1)])
        result = step("Cast", [step("Where", [negative, flipped, shifted])], {"to": int(a.dtype)})
    built = as_op(type_name, result, name)
    if width >= 32:
        mark_exact_integers(built, f"{type_name} of {show(a)}")
    return built



_FLOATS = (ir.DataType.FLOAT16, ir.DataType.BFLOAT16, ir.DataType.FLOAT, ir.DataType.DOUBLE)


def convert_promote_types(left_node: NodeInput, right_node: NodeInput, promote_unsafe: bool = False,
                          pytorch_scalar_promotion: bool = False, u64_integer_promotion_target: Any = "f32",
                          name: str | None = None) -> Node:
    """Both inputs converted to one element type, as OpenVINO's ConvertPromoteTypes: a boolean gives
    way to anything, a float to a wider float (f16 and bf16 meet at f32), an integer to a float;
    integers of one signedness to the wider; an unsigned and a signed one to the signed where wider,
    else to a signed type twice the unsigned one's width (u64 with a signed type:
    ``u64_integer_promotion_target``).  Without ``promote_unsafe`` a promotion that can lose values
    (a signed type with an unsigned as wide, an integer into a float no wider than it, f16 with
    bf16) is an InputError.  With ``pytorch_scalar_promotion`` a scalar (rank 0) of a kind no
    higher (boolean, integer, float) than a tensor's takes the tensor's type."""
    from inferplex.api.nodes import to_ir_dtype

    a, b = value_of(left_node), value_of(right_node)
    target = to_ir_dtype(u64_integer_promotion_target)
    scalars = [v.shape is not None and len(v.shape) == 0 for v in (a, b)]
    tensor, scalar = (b, a) if scalars[0] else (a, b)
    if pytorch_scalar_promotion and scalars[0] != scalars[1] and tensor.dtype is not None \
            and scalar.dtype is not None and _kind(scalar.dtype) <= _kind(tensor.dtype):
        if not promote_unsafe and not _scalar_fits(scalar.dtype, tensor.dtype):
            raise InputError(f"convert_promote_types of {show(a)} and {show(b)}: the scalar's "
                             f"{scalar.dtype} into the tensor's {tensor.dtype} can lose values; "
                             "promote_unsafe=True allows it")
        common = tensor.dtype
    else:
        common = _promotion(a.dtype, b.dtype, bool(promote_unsafe), target)
    outputs = [step("Identity", [v]) if v.dtype == common else step("Cast", [v], {"to": int(common)})
               for v in (a, b)]
    built = make_op("ConvertPromoteTypes", "Identity", [outputs[0]], {}, name)
    built._outputs.append(outputs[1])  # noqa: SLF001
    return built


def _scalar_fits(scalar: ir.DataType, tensor: ir.DataType) -> bool:
    """Whether OpenVINO's safe promotion lets a scalar of a kind no higher take a tensor's type: a
    boolean always; an integer into a float wider than it; a float or a signed integer into one at
    least as wide; an unsigned integer into an unsigned one at least as wide or a signed one at
    least half as wide (as OpenVINO checks it)."""
    if scalar == ir.DataType.BOOL:
        return True
    if _kind(scalar) < _kind(tensor):
        return scalar.bitwidth < tensor.bitwidth
    if scalar in _FLOATS or scalar.is_signed():
        return (scalar in _FLOATS or tensor.is_signed()) and scalar.bitwidth <= tensor.bitwidth
    return scalar.bitwidth <= (2 * tensor.bitwidth if tensor.is_signed() else tensor.bitwidth)


def _kind(dtype: ir.DataType | None) -> int:
    """0 boolean, 1 integer, 2 float."""
    return 0 if dtype == ir.DataType.BOOL else 2 if dtype in _FLOATS else 1


def _promotion(a: ir.DataType | None, b: ir.DataType | None, unsafe: bool, u64_target: ir.DataType
               ) -> ir.DataType:
    """The common type of ``a`` and ``b`` (see :func:`convert_promote_types`)."""
    if a is None or b is None:
        raise InputError("convert_promote_types needs both inputs' element types")
    if a == b or b == ir.DataType.BOOL:
        return a
    if a == ir.DataType.BOOL:
        return b

    def refuse(why: str) -> InputError:
        return InputError(f"convert_promote_types of {a} and {b}: {why}; promote_unsafe=True allows it")

    floats = [t for t in (a, b) if t in _FLOATS]
    if len(floats) == 2:
        if {a, b} == {ir.DataType.FLOAT16, ir.DataType.BFLOAT16}:
            if not unsafe:
                raise refuse("f16 and bf16 meet only at f32")
            return ir.DataType.FLOAT
        return max(a, b, key=lambda t: t.bitwidth)
    if len(floats) == 1:
        number = b if floats[0] == a else a
        if not unsafe and number.bitwidth >= floats[0].bitwidth:
            raise refuse(f"{number} into {floats[0]} can lose values")
        return floats[0]
    signed = [t.is_signed() for t in (a, b)]
    if signed[0] == signed[1]:
        return max(a, b, key=lambda t: t.bitwidth)
    unsigned_type, signed_type = (b, a) if signed[0] else (a, b)
    if signed_type.bitwidth > unsigned_type.bitwidth:
        return signed_type
    if not unsafe:
        raise refuse(f"{signed_type} cannot hold every {unsigned_type}")
    if unsigned_type.bitwidth == 64:
        return u64_target
    return {8: ir.DataType.INT16, 16: ir.DataType.INT32, 32: ir.DataType.INT64}[unsigned_type.bitwidth]
