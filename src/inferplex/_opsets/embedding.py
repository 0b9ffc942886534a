"""OpenVINO's embedding bags (EmbeddingBagOffsetsSum, EmbeddingBagPackedSum, EmbeddingSegmentsSum)
and greedy CTC decoders (CTCGreedyDecoder, CTCGreedyDecoderSeqLen), as the ONNX ops that compute
the same thing.

A bag's rows are gathered from the table, weighted, and summed into the bag by a product with a
0/1 membership matrix [bags, indices]; an empty bag takes the table's ``default_index`` row (zeros
without one).  A decoder takes each step's most likely class, drops blanks (and with
``merge_repeated`` a class equal to the step before), and moves what is kept to the front (a ScatterElements).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx_ir as ir

from inferplex._opsets.build import (
    NodeInput,
    as_op,
    choice,
    constant_data,
    dim_at,
    int64,
    make_op,
    rank_of,
    settle_shape,
    step,
    value_of,
)
from inferplex._opsets.build import ints as _ints
from inferplex.api.nodes import Node, to_ir_dtype
from inferplex.api.types import type_name
from inferplex.errors import InputError

__all__ = ["ctc_greedy_decoder", "ctc_greedy_decoder_seq_len", "embedding_bag_offsets",
           "embedding_bag_offsets_sum", "embedding_bag_packed", "embedding_bag_packed_sum",
           "embedding_segments_sum"]

_REDUCTIONS = ("sum", "mean")

_INDEX_TYPES = ("i32", "i64")


def embedding_bag_offsets_sum(emb_table: NodeInput, indices: NodeInput, offsets: NodeInput,
                              default_index: NodeInput = None, per_sample_weights: NodeInput = None,
                              name: str | None = None) -> Node:
    """Sums of bags of ``emb_table`` rows: bag ``b`` takes ``indices[offsets[b]:offsets[b + 1]]``
    (each row times its ``per_sample_weights``)."""
    return _offsets_bags("EmbeddingBagOffsetsSum", emb_table, indices, offsets, default_index,
                         per_sample_weights, False, name)


def embedding_bag_offsets(emb_table: NodeInput, indices: NodeInput, offsets: NodeInput,
                          default_index: NodeInput = None, per_sample_weights: NodeInput = None,
                          reduction: str = "sum", name: str | None = None) -> Node:
    """Opset 15's EmbeddingBagOffsets: :func:`embedding_bag_offsets_sum`, or with ``reduction``
    ``"mean"`` each bag's mean (``per_sample_weights`` only with ``"sum"``)."""
    mean = _mean(reduction, per_sample_weights, "embedding_bag_offsets")
    return _offsets_bags("EmbeddingBagOffsets", emb_table, indices, offsets, default_index,
                         per_sample_weights, mean, name)


def _offsets_bags(type_name: str, emb_table: NodeInput, indices: NodeInput, offsets: NodeInput,
                  default_index: NodeInput, per_sample_weights: NodeInput, mean: bool,
                  name: str | None) -> Node:
    idx = int64(indices)
    starts = int64(offsets)
    positions = _arange(step("Shape", [idx]))
    started = step("LessOrEqual", [step("Unsqueeze", [starts, _ints([0])]),
                                   step("Unsqueeze", [positions, _ints([1])])])  # [index, bag]
    begun = step("ReduceSum", [step("Cast", [started], {"to": int(ir.DataType.INT64)}), _ints([1])],
                 {"keepdims": 0})
    bag_of = step("Sub", [begun, _ints(1)])
    return _bags(type_name, emb_table, idx, bag_of, step("Shape", [starts]), default_index,
                 per_sample_weights, name, mean, dim_at(starts, 0))


def _mean(reduction: str, per_sample_weights: NodeInput, what: str) -> bool:
    kind = choice(reduction, _REDUCTIONS, f"{what} reduction")
    if kind == "mean" and per_sample_weights is not None:
        raise InputError(f"{what} takes per_sample_weights with reduction 'sum' only")
    return kind == "mean"


def embedding_segments_sum(emb_table: NodeInput, indices: NodeInput, segment_ids: NodeInput,
                           num_segments: NodeInput = None, default_index: NodeInput = None,
                           per_sample_weights: NodeInput = None, name: str | None = None) -> Node:
    """Sums of ``emb_table`` rows by segment: row ``indices[i]`` (times its ``per_sample_weights``)
    goes to segment ``segment_ids[i]``; ``num_segments`` segments."""
    if num_segments is None:
        raise InputError("embedding_segments_sum needs num_segments (the number of output rows)")
    count = step("Reshape", [int64(num_segments), _ints([1])])
    fixed = constant_data(num_segments)
    segments = int(np.asarray(fixed).reshape(-1)[0]) if fixed is not None and np.size(fixed) == 1 else None
    return _bags("EmbeddingSegmentsSum", emb_table, int64(indices), int64(segment_ids), count, default_index,
                 per_sample_weights, name, bags=segments)


def embedding_bag_packed_sum(emb_table: NodeInput, indices: NodeInput, per_sample_weights: NodeInput = None,
                             name: str | None = None) -> Node:
    """Sums of bags of ``emb_table`` rows, a bag a row of ``indices`` [bags, bag size] (each row
    times its ``per_sample_weights``, of the same shape)."""
    return _packed_bags("EmbeddingBagPackedSum", emb_table, indices, per_sample_weights, False, name)


def embedding_bag_packed(emb_table: NodeInput, indices: NodeInput, per_sample_weights: NodeInput = None,
                         reduction: str = "sum", name: str | None = None) -> Node:
    """Opset 15's EmbeddingBagPacked: :func:`embedding_bag_packed_sum`, or with ``reduction``
    ``"mean"`` each bag's mean (``per_sample_weights`` only with ``"sum"``)."""
    mean = _mean(reduction, per_sample_weights, "embedding_bag_packed")
    return _packed_bags("EmbeddingBagPacked", emb_table, indices, per_sample_weights, mean, name)


def _packed_bags(type_name: str, emb_table: NodeInput, indices: NodeInput, per_sample_weights: NodeInput,
                 mean: bool, name: str | None) -> Node:
    table = value_of(emb_table)
    rows = step("Gather", [table, int64(indices)], {"axis": 0})
    if per_sample_weights is not None:
        weights = value_of(per_sample_weights, table.dtype)
        rows = step("Mul", [rows, _spread(weights, rank_of(table, type_name))])
    return make_op(type_name, "ReduceMean" if mean else "ReduceSum", [rows, *([] if mean else [_ints([1])])],
                   {"axes": [1], "keepdims": 0} if mean else {"keepdims": 0}, name)


def _bags(type_name: str, emb_table: NodeInput, idx: ir.Value, bag_of: ir.Value, count: ir.Value,
          default_index: NodeInput, weights: NodeInput, name: str | None, mean: bool = False,
          bags: Any = None) -> Node:
    """[``count``, the table's row dims]: the bags (``bags``: their number, where known)."""
    table = value_of(emb_table)
    rows_shape = [bags, *(table.shape[1:] if table.shape is not None else [])]
    built = _bags_of(type_name, table, idx, bag_of, count, default_index, weights, name, mean)
    return settle_shape(built, 0, rows_shape) if table.shape is not None else built


def _bags_of(type_name: str, table: ir.Value, idx: ir.Value, bag_of: ir.Value, count: ir.Value,
             default_index: NodeInput, weights: NodeInput, name: str | None, mean: bool) -> Node:
    rank = rank_of(table, type_name)
    rows = step("Gather", [table, idx], {"axis": 0})
    if weights is not None:
        rows = step("Mul", [rows, _spread(value_of(weights, table.dtype), rank)])
    member = step("Equal", [step("Unsqueeze", [_arange(count), _ints([1])]),
                            step("Unsqueeze", [bag_of, _ints([0])])])
    flat = step("Reshape", [rows, step("Concat", [step("Shape", [idx]), _ints([-1])], {"axis": 0})])
    summed = step("MatMul", [step("Cast", [member], {"to": int(table.dtype or ir.DataType.FLOAT)}), flat])
    shape = step("Concat", [count, step("Shape", [table], {"start": 1})], {"axis": 0})
    result = step("Reshape", [summed, shape])
    members = step("ReduceSum", [step("Cast", [member], {"to": int(ir.DataType.INT64)}), _ints([1])],
                   {"keepdims": 0})
    if mean:  # an empty bag's sum is 0, and stays 0
        divisor = step("Cast", [step("Max", [members, _ints(1)])],
                       {"to": int(table.dtype or ir.DataType.FLOAT)})
        result = step("Div", [result, _spread(divisor, rank)])
    fixed = constant_data(default_index) if default_index is not None else None
    if default_index is None or (fixed is not None and int(np.asarray(fixed).reshape(-1)[0]) < 0):
        return as_op(type_name, result, name)
    empty = step("Equal", [members, _ints(0)])
    default_row = step("Gather", [table, step("Reshape", [int64(default_index), _ints([])])], {"axis": 0})
    return make_op(type_name, "Where", [_spread(empty, rank),
                                         default_row, result], {}, name)


def _spread(value: ir.Value, rank: int) -> ir.Value:
    """``value`` with trailing dims of 1 for a table row's ``rank - 1`` dims."""
    return step("Unsqueeze", [value, _ints(list(range(-rank + 1, 0)))]) if rank > 1 else value


def _arange(length: ir.Value) -> ir.Value:
    """0, 1, ... ``length - 1`` (``length`` a 1-element int64 tensor)."""
    return step("Range", [_ints(0), step("Squeeze", [length, _ints([0])]), _ints(1)])


def ctc_greedy_decoder(data: NodeInput, sequence_mask: NodeInput, merge_repeated: bool = True,
                       name: str | None = None) -> Node:
    """Greedy CTC decoding of ``data`` [time, batch, classes] (the last class the blank) over the
    steps where ``sequence_mask`` [time, batch] is 1: output [batch, time, 1, 1] of the classes
    kept, -1 after them, of ``data``'s element type."""
    x = value_of(data)
    best = step("Transpose", [step("ArgMax", [x], {"axis": 2, "keepdims": 0})], {"perm": [1, 0]})
    inside = step("Cast", [value_of(sequence_mask, x.dtype)], {"to": int(ir.DataType.BOOL)})
    mask = step("Transpose", [inside], {"perm": [1, 0]})
    blank = step("Sub", [step("Shape", [x], {"start": 2}), _ints([1])])
    classes, _ = _decode(best, mask, blank, merge_repeated)
    typed = step("Cast", [classes], {"to": int(x.dtype or ir.DataType.FLOAT)})
    built = make_op("CTCGreedyDecoder", "Unsqueeze", [typed, _ints([2, 3])], {}, name)
    return settle_shape(built, 0, [dim_at(x, 1), dim_at(x, 0), 1, 1])


def ctc_greedy_decoder_seq_len(data: NodeInput, sequence_length: NodeInput, blank_index: NodeInput = None,
                               merge_repeated: bool = True, classes_index_type: str = "i32",
                               sequence_length_type: str = "i32", name: str | None = None) -> Node:
    """Greedy CTC decoding of ``data`` [batch, time, classes] over each sequence's first
    ``sequence_length`` steps: outputs the classes kept [batch, time] (-1 after them) and how many."""
    kinds = [type_name(t).lower() for t in (classes_index_type, sequence_length_type)]
    if any(kind not in _INDEX_TYPES for kind in kinds):
        raise InputError(f"ctc_greedy_decoder_seq_len index types {classes_index_type!r}, "
                         f"{sequence_length_type!r}; accepted: {', '.join(_INDEX_TYPES)}")
    x = value_of(data)
    best = step("ArgMax", [x], {"axis": 2, "keepdims": 0})
    steps = _arange(step("Shape", [x], {"start": 1, "end": 2}))
    mask = step("Less", [step("Unsqueeze", [steps, _ints([0])]),
                         step("Unsqueeze", [int64(sequence_length), _ints([1])])])
    if blank_index is None:
        blank = step("Sub", [step("Shape", [x], {"start": 2}), _ints([1])])
    else:
        blank = step("Reshape", [int64(blank_index), _ints([1])])
    classes, lengths = _decode(best, mask, blank, merge_repeated)
    node = make_op("CTCGreedyDecoderSeqLen", "Cast", [classes], {"to": int(to_ir_dtype(kinds[0]))}, name)
    node._outputs.append(step("Cast", [lengths], {"to": int(to_ir_dtype(kinds[1]))}))  # noqa: SLF001
    return settle_shape(settle_shape(node, 0, [dim_at(x, 0), dim_at(x, 1)]), 1, [dim_at(x, 0)])


def _decode(best: ir.Value, mask: ir.Value, blank: ir.Value,
            merge_repeated: bool) -> tuple[ir.Value, ir.Value]:
    """The classes kept of ``best`` [batch, time] where ``mask``, moved to the front (-1 after), and
    how many a sequence."""
    keep = step("And", [mask, step("Not", [step("Equal", [best, blank])])])
    if merge_repeated:
        before = step("Concat", [step("Slice", [best, _ints([0]), _ints([1]), _ints([1])]),
                                 step("Slice", [best, _ints([0]), _ints([-1]), _ints([1])])], {"axis": 1})
        first = step("Less", [_arange(step("Shape", [best], {"start": 1, "end": 2})), _ints(1)])
        keep = step("And", [keep, step("Or", [first, step("Not", [step("Equal", [best, before])])])])
    kept = step("Cast", [keep], {"to": int(ir.DataType.INT64)})
    place = step("CumSum", [kept, _ints(1)], {"exclusive": 1})
    length = step("Shape", [best], {"start": 1, "end": 2})
    target = step("Where", [keep, place, step("Reshape", [length, _ints([])])])  # dropped: a spare column
    blank_row = step("Expand", [_ints([[-1]]), step("Add", [step("Shape", [best]), _ints([0, 1])])])
    scattered = step("ScatterElements", [blank_row, target, best], {"axis": 1})
    classes = step("Slice", [scattered, _ints([0]), length, _ints([1])])
    return classes, step("ReduceSum", [kept, _ints([1])], {"keepdims": 0})
