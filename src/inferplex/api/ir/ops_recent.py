"""The IR builders of the ops OpenVINO's opsets 14 to 16 added (Inverse, STFT, SearchSorted,
SliceScatter, Col2Im, EmbeddingBagOffsets, EmbeddingBagPacked, SegmentMax, the bitwise shifts,
ConvertPromoteTypes, ISTFT, SparseFillEmptyRows),
merged into :data:`inferplex.api.ir.ops.BUILDERS`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from inferplex import opset
from inferplex.api.nodes import Node

__all__ = ["RECENT_BUILDERS"]


def _optional(op: Any, index: int) -> Any:
    return op.arg(index) if index < op.size else None


def _col2im(op: Any) -> Node:
    a = op.attrs
    return opset.col2im(op.value(0), op.arg(1), op.arg(2), list(a.get("strides", [1, 1])),
                        list(a.get("dilations", [1, 1])), list(a.get("pads_begin", [0, 0])),
                        list(a.get("pads_end", [0, 0])), name=op.name)


RECENT_BUILDERS: dict[str, Callable[[Any], Node]] = {
    "Inverse": lambda op: opset.inverse(op.value(0), bool(op.attrs.get("adjoint", False)), name=op.name),
    "STFT": lambda op: opset.stft(op.value(0), op.value(1), op.arg(2), op.arg(3),
                                  bool(op.attrs.get("transpose_frames", False)), name=op.name),
    "ISTFT": lambda op: opset.istft(op.value(0), op.value(1), op.arg(2), op.arg(3), bool(op.attrs["center"]),
                                    bool(op.attrs["normalized"]), _optional(op, 4), name=op.name),
    "SearchSorted": lambda op: opset.search_sorted(op.value(0), op.value(1),
                                                   bool(op.attrs.get("right_mode", False)), name=op.name),
    "SliceScatter": lambda op: opset.slice_scatter(op.value(0), op.value(1), op.arg(2), op.arg(3), op.arg(4),
                                                   _optional(op, 5), name=op.name),
    "Col2Im": _col2im,
    "EmbeddingBagOffsets": lambda op: opset.embedding_bag_offsets(
        op.value(0), op.value(1), op.value(2), _optional(op, 3), _optional(op, 4),
        str(op.attrs.get("reduction", "sum")), name=op.name),
    "EmbeddingBagPacked": lambda op: opset.embedding_bag_packed(
        op.value(0), op.value(1), _optional(op, 2), str(op.attrs.get("reduction", "sum")), name=op.name),
    "BitwiseLeftShift": lambda op: opset.bitwise_left_shift(
        op.value(0), op.value(1), str(op.attrs.get("auto_broadcast", "numpy")), name=op.name),
    "BitwiseRightShift": lambda op: opset.bitwise_right_shift(
        op.value(0), op.value(1), str(op.attrs.get("auto_broadcast", "numpy")), name=op.name),
    "ConvertPromoteTypes": lambda op: opset.convert_promote_types(
        op.value(0), op.value(1), bool(op.attrs.get("promote_unsafe", False)),
        bool(op.attrs.get("pytorch_scalar_promotion", False)),
        op.attrs.get("u64_integer_promotion_target", "f32"), name=op.name),
    "SegmentMax": lambda op: opset.segment_max(op.value(0), op.value(1), _optional(op, 2),
                                               str(op.attrs.get("fill_mode", "ZERO")), name=op.name),
    "SparseFillEmptyRows": lambda op: opset.sparse_fill_empty_rows(op.value(0), op.value(1), op.value(2),
                                                                   op.value(3), name=op.name),
}
"""OpenVINO op type -> the function that builds it."""
