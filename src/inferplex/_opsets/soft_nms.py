"""Soft non-maximum suppression (NonMaxSuppression-5 and -9 with a ``soft_nms_sigma`` above 0), as
ONNX ops: the selection :func:`~inferplex._opsets.detection.non_max_suppression` runs in place of
ONNX's NonMaxSuppression, which has no soft form.

Each image and class, in turns: the box of the highest score still above ``score_threshold`` is
selected (the lower index on ties), then every other box's score is multiplied by
``exp(-0.5 * iou**2 / sigma)`` of its overlap with it, and a box whose score falls to
``score_threshold`` or below leaves.  OpenVINO's CPU computes the same (its queue decays a score
when the box reaches its top; the products are the same) and, with a sigma, suppresses no box
outright by ``iou_threshold``.  The turns are an ONNX Loop of ``min(boxes, max_output_boxes_per_class)``
steps over every image and class at once; a selected box's score is its score when selected.
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from inferplex._opsets.build import as_op, step, value_of
from inferplex._opsets.build import dim as _dim
from inferplex._opsets.build import floats as _floats
from inferplex._opsets.build import ints as _ints

__all__ = ["soft_selection"]

_FLOAT = int(ir.DataType.FLOAT)
_INT64 = int(ir.DataType.INT64)


def soft_selection(boxes: ir.Value, scores: ir.Value, limit: ir.Value, least: ir.Value, sigma: float,
                   center: bool) -> tuple[ir.Value, ir.Value]:
    """(the selected boxes [M, 3] (image, class, box; int64, by image, class, then turn), their
    scores [M] (f32)) of f32 ``boxes`` [B, N, 4] (corners (y1, x1, y2, x2), or with ``center``
    (x, y, width, height)) and ``scores`` [B, C, N]; ``limit`` [1] int64, ``least`` [1] f32."""
    weights = _decays(_overlaps(boxes, center), sigma)  # [B, N, N]
    count = _dim(scores, -1)
    turns = step("Max", [step("Min", [count, limit]), _ints([1])])  # a Loop of at least one turn
    alive = step("Greater", [scores, least])
    rows = step("Reshape", [weights, step("Concat", [_ints([-1]), count], {"axis": 0})])  # [B * N, N]
    images = step("Range", [_ints(0), step("Squeeze", [_dim(scores, 0)]), _ints(1)])
    firsts = step("Reshape", [step("Mul", [images, step("Squeeze", [count])]), _ints([-1, 1])])  # b * N
    picked, scored, taken = _turns(scores, alive, rows, firsts, least, turns)  # each [T, B, C]
    order = step("Range", [_ints(0), step("Squeeze", [turns]), _ints(1)])
    order = step("Reshape", [order, _ints([-1, 1, 1])])
    taken = step("And", [taken, step("Less", [order, step("Reshape", [limit, _ints([1, 1, 1])])])])
    where = step("Transpose", [step("NonZero", [step("Transpose", [taken], {"perm": [1, 2, 0]})])],
                 {"perm": [1, 0]})  # [M, 3]: image, class, turn
    as_turns = [step("Transpose", [v], {"perm": [1, 2, 0]}) for v in (picked, scored)]  # [B, C, T]
    box = step("GatherND", [as_turns[0], where])
    selected = step("Concat", [step("Slice", [where, _ints([0]), _ints([2]), _ints([1])]),
                               step("Unsqueeze", [box, _ints([1])])], {"axis": 1})
    return selected, step("GatherND", [as_turns[1], where])


def _overlaps(boxes: ir.Value, center: bool) -> ir.Value:
    """The intersection over union of every pair of boxes of each image [B, N, N]; 0 where either box
    has no area."""
    parts = [step("Gather", [boxes, _ints(i)], {"axis": 2}) for i in range(4)]  # [B, N] each
    if center:  # (x, y, width, height)
        x, y, w, h = parts
        half_w, half_h = step("Mul", [w, _floats(0.5)]), step("Mul", [h, _floats(0.5)])
        low_y, low_x = step("Sub", [y, half_h]), step("Sub", [x, half_w])
        high_y, high_x = step("Add", [y, half_h]), step("Add", [x, half_w])
    else:  # corners in either order
        low_y, high_y = step("Min", [parts[0], parts[2]]), step("Max", [parts[0], parts[2]])
        low_x, high_x = step("Min", [parts[1], parts[3]]), step("Max", [parts[1], parts[3]])
    area = step("Mul", [step("Sub", [high_y, low_y]), step("Sub", [high_x, low_x])])

    def pair(value: ir.Value, axis: int) -> ir.Value:
        return step("Unsqueeze", [value, _ints([axis])])

    zero = _floats(0.0)
    tall = step("Max", [zero, step("Sub", [step("Min", [pair(high_y, 2), pair(high_y, 1)]),
                                           step("Max", [pair(low_y, 2), pair(low_y, 1)])])])
    wide = step("Max", [zero, step("Sub", [step("Min", [pair(high_x, 2), pair(high_x, 1)]),
                                           step("Max", [pair(low_x, 2), pair(low_x, 1)])])])
    inter = step("Mul", [tall, wide])
    union = step("Sub", [step("Add", [pair(area, 2), pair(area, 1)]), inter])
    positive = step("And", [step("Greater", [pair(area, 2), zero]), step("Greater", [pair(area, 1), zero])])
    ratio = step("Div", [inter, step("Where", [positive, union, _floats(1.0)])])
    return step("Where", [positive, ratio, zero])


def _decays(iou: ir.Value, sigma: float) -> ir.Value:
    """``exp(-0.5 / sigma * iou**2)``, the factor a selected box puts on the others' scores."""
    scale = _floats(float(np.float32(-0.5) / np.float32(sigma)))
    return step("Exp", [step("Mul", [step("Mul", [scale, iou]), iou])])


def _turns(scores: ir.Value, alive: ir.Value, rows: ir.Value, firsts: ir.Value, least: ir.Value,
           turns: ir.Value) -> tuple[ir.Value, ir.Value, ir.Value]:
    """The Loop of :func:`soft_selection`: each turn's box, score and whether one was left, [T, B, C]."""
    from inferplex._model import Model
    from inferplex._opsets.control_loops import loop
    from inferplex.opset import parameter, result

    counter = parameter([1], np.int64, name="soft_nms_turn")
    carried_scores = parameter([-1, -1, -1], np.float32, name="soft_nms_scores")
    carried_alive = parameter([-1, -1, -1], np.bool_, name="soft_nms_alive")
    decay_rows = parameter([-1, -1], np.float32, name="soft_nms_decays")
    row_starts = parameter([-1, 1], np.int64, name="soft_nms_firsts")
    threshold = parameter([1], np.float32, name="soft_nms_least")
    s, live = value_of(carried_scores), value_of(carried_alive)
    best = step("ArgMax", [step("Where", [live, s, _floats(-np.inf)])],
                {"axis": -1, "keepdims": 1})  # [B, C, 1]: the first of the highest
    score = step("GatherElements", [s, best], {"axis": -1})
    found = step("GatherElements", [live, best], {"axis": -1})
    at = step("Add", [value_of(row_starts), step("Squeeze", [best, _ints([2])])])
    row = step("Gather", [value_of(decay_rows), at], {"axis": 0})  # [B, C, N]: the chosen box's factors
    decayed = step("Mul", [s, step("Where", [found, row, _floats(1.0)])])
    places = step("Range", [_ints(0), step("Squeeze", [_dim(s, -1)]), _ints(1)])
    chosen = step("And", [step("Equal", [places, best]), found])
    above = step("Greater", [decayed, value_of(threshold)])
    still = step("And", [step("And", [live, step("Not", [chosen])]), above])
    outputs = [result(as_op("Identity", v, None)) for v in (
        decayed, still, step("Squeeze", [best, _ints([2])]), step("Squeeze", [score, _ints([2])]),
        step("Squeeze", [found, _ints([2])]), value_of(np.array([True])))]
    body = Model([outputs[5], *outputs[:5]], [counter, carried_scores, carried_alive, decay_rows, row_starts,
                                               threshold])
    node = loop(step("Squeeze", [turns]), value_of(np.array(True)))
    node.set_function(body)
    node.set_special_body_ports([0, 0])
    node.set_merged_input(carried_scores, scores, outputs[0].output(0))
    node.set_merged_input(carried_alive, alive, outputs[1].output(0))
    node.set_invariant_input(decay_rows, rows)
    node.set_invariant_input(row_starts, firsts)
    node.set_invariant_input(threshold, least)
    per_turn = [value_of(node.get_concatenated_slices(outputs[i].output(0), 0, 1, 1, -1, 0))
                for i in (2, 3, 4)]
    return tuple(step("Reshape", [v, step("Concat", [_ints([-1]), step("Shape", [scores], {"end": 2})],
                                           {"axis": 0})]) for v in per_turn)  # type: ignore[return-value]
