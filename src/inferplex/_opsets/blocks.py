"""OpenVINO's ops over blocks and windows of a tensor: GRN, Bucketize, BatchToSpace, SpaceToBatch,
AdaptiveAvgPool, AdaptiveMaxPool (opset 8) and ExtractImagePatches, each as the ONNX ops that compute
the same thing.

The adaptive pools and ExtractImagePatches' ``same`` padding need the input's spatial dims static:
their windows are constants (the averages a constant matrix a spatial axis, the maxima a Gather of
each window's elements).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx_ir as ir

from inferplex._opsets.build import (
    NodeInput,
    as_op,
    constant_ints,
    dim_at,
    like,
    make_op,
    rank_of,
    settle_shape,
    static_dims,
    step,
    value_of,
)
from inferplex._opsets.build import ints as _ints
from inferplex.api.nodes import Node, to_ir_dtype
from inferplex.api.types import type_name
from inferplex.errors import InputError

__all__ = ["adaptive_avg_pool", "adaptive_max_pool", "batch_to_space", "bucketize", "extract_image_patches",
           "grn", "space_to_batch"]

_INDEX_TYPES = ("i32", "i64")
_PATCH_PADS = ("valid", "same_upper", "same_lower")


def grn(data: NodeInput, bias: float, name: str | None = None) -> Node:
    """Global response normalization: ``x / sqrt(sum over the channels (dim 1) of x ** 2 + bias)``."""
    x = value_of(data)
    total = step("ReduceSum", [step("Mul", [x, x]), _ints([1])], {"keepdims": 1})
    return make_op("GRN", "Div", [x, step("Sqrt", [step("Add", [total, like(x, bias)])])], {}, name)


def bucketize(data: NodeInput, buckets: NodeInput, output_type: str = "i64", with_right_bound: bool = True,
              name: str | None = None) -> Node:
    """The index of each element's bucket among the sorted 1-D ``buckets`` boundaries: the number of
    boundaries below it (``with_right_bound``: a boundary belongs to the bucket it ends) or at most it."""
    kind = type_name(output_type).lower()
    if kind not in _INDEX_TYPES:
        raise InputError(f"bucketize output_type {output_type!r}; accepted: {', '.join(_INDEX_TYPES)}")
    x = value_of(data)
    bounds = value_of(buckets, x.dtype)
    if bounds.dtype != x.dtype:
        bounds = step("Cast", [bounds], {"to": int(x.dtype or ir.DataType.FLOAT)})
    column = step("Unsqueeze", [x, _ints([-1])])
    above = step("Greater" if with_right_bound else "GreaterOrEqual", [column, bounds])
    counts = step("ReduceSum", [step("Cast", [above], {"to": int(ir.DataType.INT64)}), _ints([-1])],
                  {"keepdims": 0})
    return make_op("Bucketize", "Cast", [counts], {"to": int(to_ir_dtype(kind))}, name)


def batch_to_space(data: NodeInput, block_shape: NodeInput, crops_begin: NodeInput, crops_end: NodeInput,
                   name: str | None = None) -> Node:
    """Move blocks of the batch into the other dims (``block_shape`` a dim, 1 for the batch), then
    crop ``crops_begin``/``crops_end`` from each dim."""
    x = value_of(data)
    rank = rank_of(x, "batch_to_space")
    named = ((block_shape, "block_shape"), (crops_begin, "crops_begin"), (crops_end, "crops_end"))
    blocks, begin, end = (_per_dim(v, rank, "batch_to_space", what) for v, what in named)
    spatial = rank - 1
    dims = step("Shape", [x], {"start": 1})
    split = step("Concat", [_ints(blocks[1:]), _ints([-1]), dims], {"axis": 0})
    order = [spatial]
    for axis in range(spatial):
        order += [spatial + 1 + axis, axis]
    moved = step("Transpose", [step("Reshape", [x, split])], {"perm": order})
    grown = step("Mul", [dims, _ints(blocks[1:])])
    merged = step("Reshape", [moved, step("Concat", [_ints([-1]), grown], {"axis": 0})])
    full = step("Shape", [merged])
    ends = step("Sub", [full, _ints(end)])
    built = make_op("BatchToSpace", "Slice", [merged, _ints(begin), ends, _ints(list(range(rank)))], {}, name)
    known = [dim_at(x, axis) for axis in range(rank)]
    if not all(isinstance(d, int) for d in known):
        return built
    batch = int(known[0]) // int(np.prod(blocks))
    edges = zip(known[1:], blocks[1:], begin[1:], end[1:], strict=True)
    spatial_dims = [int(d) * b - low - high for d, b, low, high in edges]
    return settle_shape(built, 0, [batch, *spatial_dims])


def space_to_batch(data: NodeInput, block_shape: NodeInput, pads_begin: NodeInput, pads_end: NodeInput,
                   name: str | None = None) -> Node:
    """Pad each dim by ``pads_begin``/``pads_end``, then move blocks of ``block_shape`` (a dim, 1 for
    the batch) from the other dims into the batch."""
    x = value_of(data)
    rank = rank_of(x, "space_to_batch")
    blocks, begin, end = (_per_dim(v, rank, "space_to_batch", what) for v, what in
                          ((block_shape, "block_shape"), (pads_begin, "pads_begin"), (pads_end, "pads_end")))
    padded = step("Pad", [x, _ints([*begin, *end])])
    dims = step("Shape", [padded])
    parts = [step("Slice", [dims, _ints([0]), _ints([1])])]
    for axis in range(1, rank):
        size = step("Slice", [dims, _ints([axis]), _ints([axis + 1])])
        parts += [step("Div", [size, _ints([blocks[axis]])]), _ints([blocks[axis]])]
    split = step("Reshape", [padded, step("Concat", parts, {"axis": 0})])
    order = [2 * axis for axis in range(1, rank)] + [0] + [2 * axis - 1 for axis in range(1, rank)]
    moved = step("Transpose", [split], {"perm": order})
    outer = [step("Mul", [parts[0], _ints([int(np.prod(blocks))])]), *parts[1::2]]
    built = make_op("SpaceToBatch", "Reshape", [moved, step("Concat", outer, {"axis": 0})], {}, name)
    known = [dim_at(x, axis) for axis in range(rank)]
    if not all(isinstance(d, int) for d in known):
        return built
    edges = zip(known[1:], blocks[1:], begin[1:], end[1:], strict=True)
    spatial_dims = [(int(d) + low + high) // b for d, b, low, high in edges]
    return settle_shape(built, 0, [int(known[0]) * int(np.prod(blocks)), *spatial_dims])


def _per_dim(item: NodeInput, rank: int, function: str, what: str) -> list[int]:
    values = constant_ints(item, f"{function} {what}")
    if len(values) != rank:
        raise InputError(f"{function} {what} {values}: give one value a dim of the data ({rank})")
    if what == "block_shape" and (values[0] != 1 or min(values) < 1):
        raise InputError(f"{function} block_shape {values}: give positive blocks, 1 for the batch (dim 0)")
    return values


def adaptive_avg_pool(data: NodeInput, output_shape: NodeInput, name: str | None = None) -> Node:
    """Average pooling to ``output_shape`` (the spatial dims): output ``i`` of a dim of ``n`` averages
    inputs ``floor(i * n / out)`` to ``ceil((i + 1) * n / out)``; the spatial dims must be static."""
    x, sizes, spatial = _adaptive("adaptive_avg_pool", data, output_shape)
    rank = len(spatial) + 2
    for axis, (size, out) in enumerate(zip(spatial, sizes, strict=True), start=2):
        weights = np.zeros((size, out), x.dtype.numpy() if x.dtype else np.float32)
        for i, (start, stop) in enumerate(_windows(size, out)):
            weights[start:stop, i] = 1 / (stop - start)
        perm = list(range(rank))
        perm[axis], perm[-1] = perm[-1], perm[axis]
        x = step("Transpose", [step("MatMul", [step("Transpose", [x], {"perm": perm}), value_of(weights)])],
                 {"perm": perm})
    return as_op("AdaptiveAvgPool", x, name)


def adaptive_max_pool(data: NodeInput, output_shape: NodeInput, index_element_type: str = "i64",
                      name: str | None = None) -> Node:
    """Max pooling to ``output_shape`` over :func:`adaptive_avg_pool`'s windows; outputs the maxima
    and their indices in the flattened spatial dims of each channel (the first where several tie)."""
    kind = type_name(index_element_type).lower()
    if kind not in _INDEX_TYPES:
        raise InputError(f"adaptive_max_pool index_element_type {index_element_type!r}; accepted: "
                         f"{', '.join(_INDEX_TYPES)}")
    x, sizes, spatial = _adaptive("adaptive_max_pool", data, output_shape)
    flat_index = np.arange(int(np.prod(spatial))).reshape(spatial)
    spans = [_windows(n, o) for n, o in zip(spatial, sizes, strict=True)]
    windows = [flat_index[tuple(slice(*spans[d][i]) for d, i in enumerate(corner))].reshape(-1)
               for corner in np.ndindex(*sizes)]
    widest = max(len(w) for w in windows)
    table = np.stack([np.concatenate([w, np.full(widest - len(w), w[0])]) for w in windows])
    flat = step("Reshape", [x, _ints([0, 0, -1])])
    gathered = step("Gather", [flat, value_of(table)], {"axis": 2})
    values = step("ReduceMax", [gathered], {"axes": [3], "keepdims": 0})
    picked = step("ArgMax", [gathered], {"axis": 3, "keepdims": 0})
    offsets = value_of(np.arange(len(windows), dtype=np.int64) * widest)
    indices = step("Gather", [value_of(table.reshape(-1)), step("Add", [picked, offsets])])
    out_shape = _ints([0, 0, *sizes])
    node = make_op("AdaptiveMaxPool", "Reshape", [values, out_shape], {}, name)
    shaped = step("Reshape", [indices, out_shape])
    node._outputs.append(shaped if kind == "i64" else  # noqa: SLF001 - same layer
                         step("Cast", [shaped], {"to": int(ir.DataType.INT32)}))
    return node


def _adaptive(function: str, data: NodeInput,
              output_shape: NodeInput) -> tuple[ir.Value, list[int], list[int]]:
    x = value_of(data)
    rank = rank_of(x, function)
    sizes = constant_ints(output_shape, f"{function} output_shape")
    if rank < 3 or len(sizes) != rank - 2:
        raise InputError(f"{function} output_shape {sizes}: give one size a spatial dim of the data "
                         f"(rank {rank}: [batch, channels, spatial...])")
    dims = [d if isinstance(d, int) else None for d in (x.shape or [])[2:]]
    if None in dims:
        raise InputError(f"{function} needs the input's spatial dims static (its windows are constants); "
                         f"got {x.shape}")
    return x, sizes, dims  # type: ignore[return-value]


def _windows(size: int, out: int) -> list[tuple[int, int]]:
    return [((i * size) // out, -((-(i + 1) * size) // out)) for i in range(out)]


def extract_image_patches(image: NodeInput, sizes: Sequence[int], strides: Sequence[int],
                          rates: Sequence[int], auto_pad: str, name: str | None = None) -> Node:
    """Patches of ``sizes`` [rows, cols] every ``strides``, their elements ``rates`` apart, as
    channels: output [batch, rows * cols * channels, out_rows, out_cols], each patch's values
    ordered by row, column, then channel; ``auto_pad`` valid, same_upper or same_lower."""
    mode = str(auto_pad).lower()
    if mode not in _PATCH_PADS:
        raise InputError(f"extract_image_patches auto_pad {auto_pad!r}; accepted: {', '.join(_PATCH_PADS)}")
    x = value_of(image)
    batch, channels, height, width = static_dims(x, "extract_image_patches")
    del batch, channels
    outs, pads = [], [0, 0, 0, 0, 0, 0, 0, 0]
    for axis, (length, size, stride, rate) in enumerate(zip((height, width), sizes, strides, rates,
                                                            strict=True)):
        span = (size - 1) * rate + 1
        if mode == "valid":
            outs.append(max((length - span) // stride + 1, 0))
            continue
        out = -(-length // stride)
        total = max((out - 1) * stride + span - length, 0)
        first = total // 2 if mode == "same_upper" else total - total // 2
        pads[2 + axis], pads[6 + axis] = first, total - first
        outs.append(out)
    padded = step("Pad", [x, _ints(pads)]) if any(pads) else x
    patches: list[Any] = []
    for row in range(sizes[0]):
        for col in range(sizes[1]):
            starts = [row * rates[0], col * rates[1]]
            ends = [s + (o - 1) * st + 1 for s, o, st in zip(starts, outs, strides, strict=True)]
            patches.append(step("Slice", [padded, _ints(starts), _ints(ends), _ints([2, 3]), _ints(strides)]))
    return make_op("ExtractImagePatches", "Concat", patches, {"axis": 1}, name)
