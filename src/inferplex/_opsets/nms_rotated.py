"""OpenVINO's ``nms_rotated`` (opset 13), as ONNX ops: greedy non-maximum suppression of rotated
boxes [x_ctr, y_ctr, width, height, angle], per image and class.

The overlap of two boxes is the area of their intersection (a convex polygon) over that of their
union, as OpenVINO computes it after detectron2: the polygon's corners are the crossings of the
two boxes' edges and each box's corners inside the other; here they are ordered by their angle
about their centroid (a monotone "diamond" angle, ONNX having no atan2) and the area taken by the
shoelace formula, where OpenVINO takes the convex hull.  Every pair of boxes of an image is
computed at once: N**2 x 24 candidate corners an image.

The greedy pass is an ONNX Loop over the boxes in score order (every image and class at once): a
box above ``score_threshold`` is kept unless it overlaps a kept one by more than
``iou_threshold``; the first ``max_output_boxes_per_class`` kept of each class stay.  The outputs
are :func:`~inferplex._opsets.detection.non_max_suppression`'s.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx_ir as ir

from inferplex._opsets.build import NodeInput, as_op, choice, int64, make_op, show, step, value_of
from inferplex._opsets.build import dim as _dim
from inferplex._opsets.build import floats as _floats
from inferplex._opsets.build import ints as _ints
from inferplex._opsets.detection import selection_bound, selection_outputs, threshold
from inferplex.api.nodes import Node
from inferplex.errors import InputError

__all__ = ["nms_rotated"]

_FLOAT = int(ir.DataType.FLOAT)
_INT64 = int(ir.DataType.INT64)
_PARALLEL = 1e-14
"""Edges whose cross product is at most this are parallel (OpenVINO's and detectron2's rule)."""


def nms_rotated(boxes: NodeInput, scores: NodeInput, max_output_boxes_per_class: NodeInput,
                iou_threshold: NodeInput, score_threshold: NodeInput, sort_result_descending: bool = True,
                output_type: str = "i64", clockwise: bool = True, name: str | None = None) -> Node:
    """Greedy NMS of rotated ``boxes`` [batch, boxes, 5] (centre x, centre y, width, height, angle in
    radians, turning clockwise; with ``clockwise`` off, the other way) by ``scores`` [batch, classes,
    boxes]: outputs
    ``selected_indices`` [N, 3], ``selected_scores`` [N, 3] and ``valid_outputs``, ordered by score
    over every batch and class with ``sort_result_descending``, else by batch, class, then score."""
    kind = choice(output_type, ("i32", "i64"), "nms_rotated output_type")
    box_values, score_values = value_of(boxes), value_of(scores)
    _check(box_values, score_values)
    as_float = [v if v.dtype == ir.DataType.FLOAT else step("Cast", [v], {"to": _FLOAT})
                for v in (box_values, score_values)]
    count = _dim(as_float[1], -1)
    order, sorted_scores = _score_order(as_float[1], count)
    over = step("Greater", [_sorted_pairs(_rotated_iou(as_float[0], clockwise), order, count),
                            threshold(iou_threshold)])  # [B, C, N, N], in score order
    eligible = step("Greater", [sorted_scores, threshold(score_threshold)])
    kept = _greedy(over, eligible, count)
    limit = step("Reshape", [int64(max_output_boxes_per_class), _ints([1, 1, 1])])
    place = step("CumSum", [step("Cast", [kept], {"to": _INT64}), _ints(-1)])
    kept = step("And", [kept, step("LessOrEqual", [place, limit])])
    where = step("Transpose", [step("NonZero", [kept])], {"perm": [1, 0]})  # [M, 3]: image, class, place
    box = step("GatherND", [order, where])
    selected = step("Concat", [step("Slice", [where, _ints([0]), _ints([2]), _ints([1])]),
                               step("Unsqueeze", [box, _ints([1])])], {"axis": 1})
    picked = step("GatherND", [sorted_scores, where])
    bound = selection_bound(box_values, score_values, max_output_boxes_per_class)
    return selection_outputs("NMSRotated", selected, picked, bool(sort_result_descending), kind,
                             int(score_values.dtype or ir.DataType.FLOAT), bound, name)


def _check(boxes: ir.Value, scores: ir.Value) -> None:
    if boxes.shape is not None and (len(boxes.shape) != 3
                                    or (isinstance(boxes.shape[2], int) and boxes.shape[2] != 5)):
        raise InputError(f"nms_rotated takes boxes [batch, boxes, 5] (centre x, centre y, width, height, "
                         f"angle), got {show(boxes)}")
    if scores.shape is not None and len(scores.shape) != 3:
        raise InputError(f"nms_rotated takes scores [batch, classes, boxes], got {show(scores)}")


def _score_order(scores: ir.Value, count: ir.Value) -> tuple[ir.Value, ir.Value]:
    """(the boxes of each image and class by score, highest first (ties: the lower index first, as
    ONNX's TopK orders them), their scores), each [B, C, N]."""
    best = make_op("TopK", "TopK", [scores, count], {"axis": -1, "largest": 1, "sorted": 1}, None,
                   num_outputs=2)
    return best._outputs[1], best._outputs[0]  # noqa: SLF001


def _sorted_pairs(iou: ir.Value, order: ir.Value, count: ir.Value) -> ir.Value:
    """``iou`` [B, N, N] of each image, rows and columns in each class's score ``order`` [B, C, N]:
    [B, C, N, N]."""
    shape = step("Concat", [step("Shape", [order]), count], {"axis": 0})
    every = step("Expand", [step("Unsqueeze", [iou, _ints([1])]), shape])
    rows = step("GatherElements", [every, step("Expand", [step("Unsqueeze", [order, _ints([-1])]), shape])],
                {"axis": 2})
    return step("GatherElements", [rows, step("Expand", [step("Unsqueeze", [order, _ints([-2])]), shape])],
                {"axis": 3})


def _greedy(over: ir.Value, eligible: ir.Value, count: ir.Value) -> ir.Value:
    """Which boxes (in score order, [B, C, N]) the greedy pass keeps: box i when ``eligible`` and no
    box kept before it overlaps it (``over`` [B, C, N, N]); an ONNX Loop over i."""
    from inferplex._model import Model
    from inferplex._opsets.control_loops import loop
    from inferplex.opset import parameter, result

    counter = parameter([1], np.int64, name="nms_rotated_box")
    carried = parameter([-1, -1, -1], np.bool_, name="nms_rotated_kept")
    overlaps = parameter([-1, -1, -1, -1], np.bool_, name="nms_rotated_over")
    candidates = parameter([-1, -1, -1], np.bool_, name="nms_rotated_eligible")
    i = value_of(counter)
    row = step("Squeeze", [step("Gather", [value_of(overlaps), i], {"axis": 2}), _ints([2])])  # [B, C, N]
    hits = step("Cast", [step("And", [row, value_of(carried)])], {"to": _INT64})
    hit = step("ReduceMax", [hits], {"axes": [-1], "keepdims": 1})
    keep = step("And", [step("Gather", [value_of(candidates), i], {"axis": 2}),
                        step("Equal", [hit, _ints(0)])])  # [B, C, 1]
    places = step("Range", [_ints(0), step("Squeeze", [_dim(value_of(carried), -1)]), _ints(1)])
    now = step("And", [step("Equal", [places, i]), keep])
    stepped = result(as_op("Identity", step("Or", [value_of(carried), now]), None))
    going = result(as_op("Identity", value_of(np.array([True])), None))
    body = Model([going, stepped], [counter, carried, overlaps, candidates])
    node = loop(step("Squeeze", [count]), value_of(np.array(True)))
    node.set_function(body)
    node.set_special_body_ports([0, 0])
    node.set_invariant_input(overlaps, over)
    node.set_invariant_input(candidates, eligible)
    node.set_merged_input(carried, step("Expand", [value_of(np.array(False)), step("Shape", [eligible])]),
                          stepped.output(0))
    return value_of(node.get_iter_value(stepped.output(0), -1))


def _corners(boxes: ir.Value, clockwise: bool) -> tuple[ir.Value, ir.Value]:
    """Each box's corners (x, y), each [B, N, 4], in detectron2's order."""
    parts = [step("Gather", [boxes, _ints(i)], {"axis": 2}) for i in range(5)]
    cx, cy, w, h, angle = parts
    if not clockwise:
        angle = step("Neg", [angle])
    half_cos = step("Mul", [step("Cos", [angle]), _floats(0.5)])
    half_sin = step("Mul", [step("Sin", [angle]), _floats(0.5)])
    x0 = step("Sub", [step("Sub", [cx, step("Mul", [half_sin, h])]), step("Mul", [half_cos, w])])
    y0 = step("Sub", [step("Add", [cy, step("Mul", [half_cos, h])]), step("Mul", [half_sin, w])])
    x1 = step("Sub", [step("Add", [cx, step("Mul", [half_sin, h])]), step("Mul", [half_cos, w])])
    y1 = step("Sub", [step("Sub", [cy, step("Mul", [half_cos, h])]), step("Mul", [half_sin, w])])
    twice_x, twice_y = step("Mul", [cx, _floats(2.0)]), step("Mul", [cy, _floats(2.0)])
    x2, y2 = step("Sub", [twice_x, x0]), step("Sub", [twice_y, y0])
    x3, y3 = step("Sub", [twice_x, x1]), step("Sub", [twice_y, y1])
    stack = [(x0, x1, x2, x3), (y0, y1, y2, y3)]
    return tuple(step("Concat", [step("Unsqueeze", [v, _ints([-1])]) for v in axis], {"axis": -1})
                 for axis in stack)  # type: ignore[return-value]


def _cross(ax: Any, ay: Any, bx: Any, by: Any) -> ir.Value:
    return step("Sub", [step("Mul", [ax, by]), step("Mul", [bx, ay])])


def _dot(ax: Any, ay: Any, bx: Any, by: Any) -> ir.Value:
    return step("Add", [step("Mul", [ax, bx]), step("Mul", [ay, by])])


def _rolled(values: ir.Value, size: int = 4) -> ir.Value:
    """The next of each of ``values`` [..., size] (the last's next the first)."""
    return step("Concat", [step("Slice", [values, _ints([1]), _ints([size]), _ints([-1])]),
                           step("Slice", [values, _ints([0]), _ints([1]), _ints([-1])])], {"axis": -1})


def _at(value: ir.Value, axes: list[int]) -> ir.Value:
    return step("Unsqueeze", [value, _ints(axes)])


def _inside(px: ir.Value, py: ir.Value, ox: ir.Value, oy: ir.Value, ex: ir.Value, ey: ir.Value) -> ir.Value:
    """Whether points (px, py) lie in the boxes of corner 0 (ox, oy) and edges (ex, ey) [..., 4]: their
    projections on the first edge and on the last (reversed) within those edges."""
    first = [step("Slice", [e, _ints([0]), _ints([1]), _ints([-1])]) for e in (ex, ey)]
    last = [step("Slice", [e, _ints([3]), _ints([4]), _ints([-1])]) for e in (ex, ey)]
    corner = [step("Slice", [o, _ints([0]), _ints([1]), _ints([-1])]) for o in (ox, oy)]
    apx, apy = step("Sub", [px, corner[0]]), step("Sub", [py, corner[1]])
    along = _dot(apx, apy, *first)
    across = step("Neg", [_dot(apx, apy, *last)])
    zero = _floats(0.0)
    past_start = step("And", [step("GreaterOrEqual", [along, zero]), step("GreaterOrEqual", [across, zero])])
    before_end = step("And", [step("LessOrEqual", [along, _dot(*first, *first)]),
                              step("LessOrEqual", [across, _dot(*last, *last)])])
    return step("And", [past_start, before_end])


def _rotated_iou(boxes: ir.Value, clockwise: bool) -> ir.Value:
    """The intersection over union of every pair of boxes of each image: [B, N, N]."""
    xs, ys = _corners(boxes, clockwise)  # [B, N, 4]
    ex, ey = step("Sub", [_rolled(xs), xs]), step("Sub", [_rolled(ys), ys])
    # box i along axis 1, box j along axis 2; box i's edge along axis 3, box j's along axis 4
    x1, y1, vx1, vy1 = (_at(v, [2, 4]) for v in (xs, ys, ex, ey))  # [B, N, 1, 4, 1]
    x2, y2, vx2, vy2 = (_at(v, [1, 3]) for v in (xs, ys, ex, ey))  # [B, 1, N, 1, 4]
    det = _cross(vx2, vy2, vx1, vy1)
    dx, dy = step("Sub", [x2, x1]), step("Sub", [y2, y1])
    solvable = step("Greater", [step("Abs", [det]), _floats(_PARALLEL)])
    divisor = step("Where", [solvable, det, _floats(1.0)])
    t1 = step("Div", [_cross(vx2, vy2, dx, dy), divisor])
    t2 = step("Div", [_cross(vx1, vy1, dx, dy), divisor])
    zero, one = _floats(0.0), _floats(1.0)
    crossing = step("And", [solvable, step("And", [
        step("And", [step("GreaterOrEqual", [t1, zero]), step("LessOrEqual", [t1, one])]),
        step("And", [step("GreaterOrEqual", [t2, zero]), step("LessOrEqual", [t2, one])])])])
    cross_x = step("Add", [x1, step("Mul", [vx1, t1])])  # [B, N, N, 4, 4]
    cross_y = step("Add", [y1, step("Mul", [vy1, t1])])
    # corners of box i in box j, and of box j in box i: [B, N, N, 4]
    in_j = _inside(_at(xs, [2]), _at(ys, [2]), _at(xs, [1]), _at(ys, [1]), _at(ex, [1]), _at(ey, [1]))
    in_i = _inside(_at(xs, [1]), _at(ys, [1]), _at(xs, [2]), _at(ys, [2]), _at(ex, [2]), _at(ey, [2]))
    pair = step("Concat", [step("Shape", [boxes], {"end": 2}), _dim(boxes, 1)], {"axis": 0})  # [B, N, N]
    crossings = step("Concat", [pair, _ints([4, 4])], {"axis": 0})
    flat, four = (step("Concat", [pair, _ints([size])], {"axis": 0}) for size in (16, 4))

    def candidates(crossed: ir.Value, own: ir.Value, other: ir.Value) -> ir.Value:
        """[B, N, N, 24]: the 16 edge crossings, box i's corners, box j's corners."""
        return step("Concat", [step("Reshape", [step("Expand", [crossed, crossings]), flat]),
                               step("Expand", [own, four]), step("Expand", [other, four])], {"axis": -1})

    px = candidates(cross_x, _at(xs, [2]), _at(xs, [1]))
    py = candidates(cross_y, _at(ys, [2]), _at(ys, [1]))
    valid = step("Concat", [step("Reshape", [step("Expand", [crossing, crossings]), flat]), in_j, in_i],
                 {"axis": -1})
    area = _polygon_area(px, py, valid)
    width, height = (step("Gather", [boxes, _ints(i)], {"axis": 2}) for i in (2, 3))
    areas = step("Mul", [width, height])
    area_i, area_j = _at(areas, [2]), _at(areas, [1])
    union = step("Sub", [step("Add", [area_i, area_j]), area])
    positive = step("And", [step("Greater", [area_i, zero]), step("Greater", [area_j, zero])])
    return step("Where", [positive, step("Div", [area, step("Where", [positive, union, one])]), zero])


def _polygon_area(px: ir.Value, py: ir.Value, valid: ir.Value) -> ir.Value:
    """The area of the convex polygon of the ``valid`` points among (px, py) [..., 24]: the points
    ordered by their angle about their centroid, the shoelace sum; 0 for two points or fewer."""
    weight = step("Cast", [valid], {"to": _FLOAT})
    count = step("ReduceSum", [weight, _ints([-1])], {"keepdims": 1})
    spread = step("Max", [count, _floats(1.0)])
    mx = step("Div", [step("ReduceSum", [step("Mul", [px, weight]), _ints([-1])], {"keepdims": 1}), spread])
    my = step("Div", [step("ReduceSum", [step("Mul", [py, weight]), _ints([-1])], {"keepdims": 1}), spread])
    dx, dy = step("Sub", [px, mx]), step("Sub", [py, my])
    size = step("Add", [step("Abs", [dx]), step("Abs", [dy])])
    size = step("Where", [step("Greater", [size, _floats(0.0)]), size, _floats(1.0)])
    zero = _floats(0.0)
    up = step("GreaterOrEqual", [dy, zero])
    right = step("GreaterOrEqual", [dx, zero])
    turn = step("Where", [up,
                          step("Where", [right, step("Div", [dy, size]),
                                         step("Sub", [_floats(1.0), step("Div", [dx, size])])]),
                          step("Where", [right, step("Add", [_floats(3.0), step("Div", [dx, size])]),
                                         step("Sub", [_floats(2.0), step("Div", [dy, size])])])])
    key = step("Where", [valid, turn, _floats(8.0)])  # the points left out last
    order = make_op("TopK", "TopK", [key, _ints([24])], {"axis": -1, "largest": 0, "sorted": 1}, None,
                    num_outputs=2)._outputs[1]  # noqa: SLF001
    sx, sy, kept = (step("GatherElements", [v, order], {"axis": -1}) for v in (dx, dy, valid))
    first_x = step("Slice", [sx, _ints([0]), _ints([1]), _ints([-1])])
    first_y = step("Slice", [sy, _ints([0]), _ints([1]), _ints([-1])])
    sx, sy = step("Where", [kept, sx, first_x]), step("Where", [kept, sy, first_y])  # left out: the first
    twice = step("ReduceSum", [_cross(sx, sy, _rolled(sx, 24), _rolled(sy, 24)), _ints([-1])],
                 {"keepdims": 0})
    area = step("Mul", [step("Abs", [twice]), _floats(0.5)])
    return step("Where", [step("Greater", [step("Squeeze", [count, _ints([-1])]), _floats(2.0)]), area, zero])

