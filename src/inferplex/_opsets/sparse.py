"""OpenVINO's sparse-tensor function (opset 16), as ONNX ops: ``sparse_fill_empty_rows``.

A 2-D sparse tensor is its ``values`` [N], their ``indices`` [N, 2] (row, column) and its
``dense_shape`` [2].  The rows no index names get one entry, at column 0, of ``default_value``; the
entries then come out in row-major order (by row, then column; entries of one place in the order
given).  The row counts come from a ScatterElements ``add``, the order from TopK over the distinct
int64 keys ``(row * columns + column) * entries + position``.  OpenVINO's CPU engine holds 64-bit
integers in 32 bits, so the op is marked as needing exact integers: the CPU device runs such a
model on ONNX Runtime.
"""

from __future__ import annotations

import onnx_ir as ir

from inferplex._opsets.build import (
    NodeInput,
    ascending,
    int64,
    make_op,
    mark_exact_integers,
    show,
    step,
    value_of,
)
from inferplex._opsets.build import ints as _ints
from inferplex.api.nodes import Node
from inferplex.errors import InputError

__all__ = ["sparse_fill_empty_rows"]

_INT64 = int(ir.DataType.INT64)
_INT64_MAX = 2**63 - 1
_INDEX_TYPES = (ir.DataType.INT32, ir.DataType.INT64)


def sparse_fill_empty_rows(values: NodeInput, dense_shape: NodeInput, indices: NodeInput,
                           default_value: NodeInput, name: str | None = None) -> Node:
    """The sparse tensor (``values`` [N], ``dense_shape`` [2], ``indices`` [N, 2]) with an entry of
    ``default_value`` at column 0 of each row that has none: (output_indices [M, 2] in row-major
    order, output_values [M], empty_row_indicator [rows], boolean)."""
    data, places, shape = value_of(values), value_of(indices), value_of(dense_shape)
    _check(data, places, shape)
    index_type = places.dtype if places.dtype in _INDEX_TYPES else ir.DataType.INT64
    fill = value_of(default_value, data.dtype)
    if fill.shape is not None and len(fill.shape) != 0:
        raise InputError(f"sparse_fill_empty_rows takes a scalar default_value, got {show(fill)}")
    places64, shape64 = int64(places), int64(shape)
    rows = step("Gather", [shape64, _ints([0])], {"axis": 0})  # [1]
    columns = step("Gather", [shape64, _ints(1)], {"axis": 0})
    row_of = step("Gather", [places64, _ints(0)], {"axis": 1})  # [N]
    zeros = step("Expand", [_ints(0), rows])
    counts = step("ScatterElements", [zeros, row_of,
                                      step("Expand", [_ints(1), step("Shape", [row_of])])],
                  {"axis": 0, "reduction": "add"})
    empty = step("Equal", [counts, _ints(0)])
    new_rows = step("Reshape", [step("NonZero", [empty]), _ints([-1])])  # [E]
    new_places = step("Concat", [step("Unsqueeze", [new_rows, _ints([1])]),
                                 step("Expand", [_ints([[0]]), step("Concat", [
                                     step("Shape", [new_rows]), _ints([1])], {"axis": 0})])], {"axis": 1})
    every_place = step("Concat", [places64, new_places], {"axis": 0})  # [M, 2]
    every_value = step("Concat", [data, step("Expand", [fill, step("Shape", [new_rows])])], {"axis": 0})
    place = step("Add", [step("Mul", [step("Gather", [every_place, _ints(0)], {"axis": 1}), columns]),
                         step("Gather", [every_place, _ints(1)], {"axis": 1})])
    entries = step("Shape", [place])
    position = step("Range", [_ints(0), step("Squeeze", [entries]), _ints(1)])
    order = ascending(step("Add", [step("Mul", [place, entries]), position]), _INT64_MAX)
    out_places = step("Gather", [every_place, order], {"axis": 0})
    built = make_op("SparseFillEmptyRows", "Cast", [out_places], {"to": int(index_type)}, name)
    built._outputs.extend([step("Gather", [every_value, order], {"axis": 0}), empty])  # noqa: SLF001
    mark_exact_integers(built, "SparseFillEmptyRows's int64 sort keys")
    return built


def _check(data: ir.Value, places: ir.Value, shape: ir.Value) -> None:
    """The inputs' ranks and index types, where known."""
    if data.shape is not None and len(data.shape) != 1:
        raise InputError(f"sparse_fill_empty_rows takes values [N], got {show(data)}")
    if places.shape is not None and (len(places.shape) != 2
                                     or (isinstance(places.shape[1], int) and places.shape[1] != 2)):
        raise InputError(f"sparse_fill_empty_rows takes indices [N, 2] (row, column), got {show(places)}")
    if shape.shape is not None and (len(shape.shape) != 1
                                    or (isinstance(shape.shape[0], int) and shape.shape[0] != 2)):
        raise InputError(f"sparse_fill_empty_rows takes dense_shape [2] (rows, columns), got {show(shape)}")
    for value, what in ((places, "indices"), (shape, "dense_shape")):
        if value.dtype is not None and value.dtype not in _INDEX_TYPES:
            raise InputError(f"sparse_fill_empty_rows takes {what} of i32 or i64, got {show(value)}")
