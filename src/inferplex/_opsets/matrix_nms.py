"""OpenVINO's MatrixNms (opset 8: the soft NMS of SOLOv2 and PaddleDetection's detectors) as ONNX ops.

For each image and class, the boxes scoring above ``score_threshold`` (the ``nms_top_k`` best) are
ordered by score; each box's score decays by its overlap with every better box: the least of
``(1 - iou) / (1 - max_iou + 1e-10)`` (``linear``) or ``exp((max_iou² - iou²) * gaussian_sigma)``
(``gaussian``, as OpenVINO's CPU computes it) over the better boxes, where ``max_iou`` is that better
box's own largest IoU with the boxes before it.  Boxes whose decayed score is above
``post_threshold`` are kept; the outputs, ``keep_top_k`` and the orders are MulticlassNms' (see
:func:`~inferplex._opsets.detection_more.selected_outputs`), but that ``sort_result_type="classid"``
orders an image's boxes by score, as OpenVINO's CPU does, unless ``sort_result_across_batch``.

The IoU matrix of each image and class is held whole ([N, C, K, K] for K boxes through NMS).
Equal scores among a group's boxes go by box index (OpenVINO's partial sort orders them as it
likes).
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from inferplex._opsets.build import NodeInput, choice, make_op, step, value_of
from inferplex._opsets.build import dim as _dim
from inferplex._opsets.build import floats as _floats
from inferplex._opsets.build import ints as _ints
from inferplex._opsets.detection_more import Grid, Selected, kept_bound, selected_outputs
from inferplex.api.nodes import Node
from inferplex.errors import InputError

__all__ = ["matrix_nms"]

_SORT_TYPES = ("classid", "score", "none")
_DECAYS = ("linear", "gaussian")
_INDEX_TYPES = ("i32", "i64")
_FLOAT = int(ir.DataType.FLOAT)


def matrix_nms(boxes: NodeInput, scores: NodeInput, sort_result_type: str = "none",
               sort_result_across_batch: bool = False, output_type: str = "i64", score_threshold: float = 0.0,
               nms_top_k: int = -1, keep_top_k: int = -1, background_class: int = -1,
               decay_function: str = "linear", gaussian_sigma: float = 2.0, post_threshold: float = 0.0,
               normalized: bool = True, name: str | None = None) -> Node:
    """Matrix (soft) NMS of ``boxes`` [N, M, 4] (x1, y1, x2, y2) by each class of ``scores``
    [N, C, M], as OpenVINO's MatrixNms: outputs ``selected_outputs`` [S, 6] (class, decayed score,
    x1, y1, x2, y2), ``selected_indices`` [S, 1] (``image * M + box``) and ``valid_outputs`` [N].
    With ``normalized=False`` a box's width and height count one more (pixel boxes)."""
    sort = choice(sort_result_type, _SORT_TYPES, "matrix_nms sort_result_type")
    decay = choice(decay_function, _DECAYS, "matrix_nms decay_function")
    kind = choice(output_type, _INDEX_TYPES, "matrix_nms output_type")
    top_k = int(nms_top_k)
    if top_k < -1:
        raise InputError(f"matrix_nms nms_top_k {nms_top_k}; accepted: -1 (every box) or a count of 0 or "
                         "more")
    box_values, score_values = value_of(boxes), value_of(scores)
    ranks = [None if v.shape is None else len(v.shape) for v in (box_values, score_values)]
    if ranks != [3, 3]:
        raise InputError(f"matrix_nms takes boxes [N, M, 4] and scores [N, C, M] (ranks 3 and 3); got ranks "
                         f"{ranks[0]} and {ranks[1]}")
    out_dtype = box_values.dtype or ir.DataType.FLOAT
    flat_boxes, flat_scores = (v if v.dtype == ir.DataType.FLOAT else step("Cast", [v], {"to": _FLOAT})
                               for v in (box_values, score_values))
    images, classes, boxes_per_group = _dim(flat_scores, 0), _dim(flat_scores, 1), _dim(flat_boxes, 1)

    # each group's candidates, best first: scores at or below the threshold are never candidates
    threshold = _floats(float(np.float32(score_threshold)))
    candidate = step("Greater", [flat_scores, threshold])
    masked = step("Where", [candidate, flat_scores, _floats(-np.inf)])
    k = boxes_per_group if top_k < 0 else step("Min", [boxes_per_group, _ints([top_k])])
    best = make_op("TopK", "TopK", [masked, k], {"axis": 2, "largest": 1, "sorted": 1}, None, num_outputs=2)
    top_scores, top_index = best._outputs  # noqa: SLF001 - [N, C, K]
    valid = step("Greater", [top_scores, threshold])
    every = step("Concat", [images, classes, boxes_per_group, _ints([4])], {"axis": 0})
    chosen = step("Concat", [images, classes, k, _ints([4])], {"axis": 0})
    picked = step("GatherElements", [step("Expand", [step("Unsqueeze", [flat_boxes, _ints([1])]), every]),
                                     step("Expand", [step("Unsqueeze", [top_index, _ints([3])]), chosen])],
                  {"axis": 2})  # [N, C, K, 4]
    iou = _iou_matrix(picked, bool(normalized))  # [N, C, K, K]: row i against column j

    # each box against the better ones (j < i): the decay of its score
    places = step("Range", [_ints(0), step("Squeeze", [k]), _ints(1)])
    better = step("Less", [step("Unsqueeze", [places, _ints([0])]), step("Unsqueeze", [places, _ints([1])])])
    below = step("Where", [better, iou, _floats(0.0)])
    largest = step("ReduceMax", [below], {"axes": [3], "keepdims": 0})  # [N, C, K]: each box's max IoU
    column_max = step("Unsqueeze", [largest, _ints([2])])  # [N, C, 1, K]: the better box's, by column
    if decay == "linear":
        decays = step("Div", [step("Sub", [_floats(1.0), iou]),
                              step("Add", [step("Sub", [_floats(1.0), column_max]), _floats(1e-10)])])
    else:
        decays = step("Exp", [step("Mul", [step("Sub", [step("Mul", [column_max, column_max]),
                                                        step("Mul", [iou, iou])]),
                                           _floats(float(np.float32(gaussian_sigma)))])])
    least = step("ReduceMin", [step("Where", [better, decays, _floats(1.0)])], {"axes": [3], "keepdims": 0})
    decayed = step("Mul", [least, top_scores])
    kept = step("And", [valid, step("Greater", [decayed, _floats(float(np.float32(post_threshold)))])])

    # the kept (image, class, rank) places as rows
    where_kept = step("Transpose", [step("NonZero", [kept])], {"perm": [1, 0]})  # [S, 3]
    score = step("GatherND", [decayed, where_kept])
    image = step("Slice", [where_kept, _ints([0]), _ints([1]), _ints([1])])
    label = step("Slice", [where_kept, _ints([1]), _ints([2]), _ints([1])])
    box = step("Unsqueeze", [step("GatherND", [top_index, where_kept]), _ints([1])])
    index = step("Add", [step("Mul", [image, boxes_per_group]), box])
    where = step("Concat", [image, box], {"axis": 1})
    known = box_values.shape
    rows = Selected(score, image, label, box, index, where)
    sizes = Grid(images, classes, boxes_per_group, known[0] if known is not None else None,
                 kept_bound(score_values, top_k, int(keep_top_k)))
    return selected_outputs("MatrixNms", rows, sizes, flat_boxes, int(background_class), int(keep_top_k),
                            sort, bool(sort_result_across_batch), False, kind, out_dtype, name)


def _iou_matrix(boxes: ir.Value, normalized: bool) -> ir.Value:
    """IoU of each box of ``boxes`` [..., K, 4] with each other, [..., K, K] (row i, column j), as
    OpenVINO's MatrixNms computes it: 0 where they do not touch; a box whose far corner lies
    before its near one has no area; pixel boxes (not ``normalized``) one wider and taller."""
    x0, y0, x1, y1 = (step("Slice", [boxes, _ints([i]), _ints([i + 1]), _ints([-1])]) for i in range(4))
    rows = [step("Unsqueeze", [step("Squeeze", [v, _ints([-1])]), _ints([-1])]) for v in (x0, y0, x1, y1)]
    cols = [step("Unsqueeze", [step("Squeeze", [v, _ints([-1])]), _ints([-2])]) for v in (x0, y0, x1, y1)]
    extra = _floats(0.0 if normalized else 1.0)

    def span(low: ir.Value, high: ir.Value) -> ir.Value:
        return step("Add", [step("Sub", [high, low]), extra])

    def area(a0: ir.Value, b0: ir.Value, a1: ir.Value, b1: ir.Value) -> ir.Value:
        empty = step("Or", [step("Less", [a1, a0]), step("Less", [b1, b0])])
        return step("Where", [empty, _floats(0.0), step("Mul", [span(a0, a1), span(b0, b1)])])

    apart = step("Or", [step("Or", [step("Greater", [cols[0], rows[2]]), step("Less", [cols[2], rows[0]])]),
                        step("Or", [step("Greater", [cols[1], rows[3]]), step("Less", [cols[3], rows[1]])])])
    width = span(step("Max", [rows[0], cols[0]]), step("Min", [rows[2], cols[2]]))
    height = span(step("Max", [rows[1], cols[1]]), step("Min", [rows[3], cols[3]]))
    inter = step("Mul", [width, height])
    union = step("Sub", [step("Add", [area(*rows), area(*cols)]), inter])
    return step("Where", [apart, _floats(0.0), step("Div", [inter, union])])

