"""OpenVINO's MulticlassNms (opsets 8 and 9) and PSROIPooling as ONNX ops.

MulticlassNms: a TopK per image and class for ``nms_top_k``, ONNX's NonMaxSuppression, then
sorts (TopK of distinct integer keys) and filters for ``background_class``, ``keep_top_k`` and
the order ``sort_result_type`` asks for.

OpenVINO's CPU keeps a box whose score is at least ``score_threshold`` and drops one whose IoU
with a kept box is at least ``iou_threshold``, where ONNX's NonMaxSuppression keeps scores above
its threshold and drops IoUs above its threshold: the thresholds given to it are the next float
below OpenVINO's (an ``iou_threshold`` of 0 or less keeps one box per image and class).  With
``normalized=False`` a box's width and height count one more (pixel boxes), which is the same as
moving its far corner by one.  A box of no or negative width or height overlaps nothing.
``nms_eta`` other than 1 (adaptive NMS, whose threshold changes as boxes are kept) is refused.
Equal scores go by image, class, then box, as on OpenVINO's CPU; scores that differ by less than
1e-6 its sort takes as equal for the class order but not for the score order, so their order
there depends on its sort algorithm: here they go by score.

PSROIPooling (opset 1) as gathers: ``average`` sums each bin from running sums along W (no matrix
product, which OpenVINO's CPU may run in bf16), ``bilinear`` reads each sample's four neighbours.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
import onnx_ir as ir

from inferplex._opsets.build import (
    NodeInput,
    ascending,
    choice,
    int64,
    make_op,
    round_half_away,
    step,
    value_of,
)
from inferplex._opsets.build import dim as _dim
from inferplex._opsets.build import floats as _floats
from inferplex._opsets.build import ints as _ints
from inferplex.api.nodes import Node, to_ir_dtype
from inferplex.errors import InputError

__all__ = ["multiclass_nms", "psroi_pooling"]

_SORT_TYPES = ("classid", "score", "none")
_INDEX_TYPES = ("i32", "i64")
_FLOAT = int(ir.DataType.FLOAT)
_INT64 = int(ir.DataType.INT64)
_INT32_MAX = int(np.iinfo(np.int32).max)


def _scalar(value: ir.Value) -> ir.Value:
    return step("Squeeze", [value, _ints([0])])


def _below(number: float) -> np.float32:
    """The largest float32 below ``number`` (as float32)."""
    return np.nextafter(np.float32(number), np.float32(-np.inf))


_NMS_ORDER = ("sort_result_type", "sort_result_across_batch", "output_type", "iou_threshold",
              "score_threshold", "nms_top_k", "keep_top_k", "background_class", "nms_eta", "normalized",
              "name")
"""MulticlassNms' arguments after boxes and scores in opset 8 (opset 9: roisnum first)."""
_NMS_DEFAULTS: dict[str, Any] = {
    "roisnum": None, "sort_result_type": "none", "sort_result_across_batch": False, "output_type": "i64",
    "iou_threshold": 0.0, "score_threshold": 0.0, "nms_top_k": -1, "keep_top_k": -1, "background_class": -1,
    "nms_eta": 1.0, "normalized": True, "name": None}


def multiclass_nms(boxes: NodeInput, scores: NodeInput, *args: Any, **kwargs: Any) -> Node:
    """Non-maximum suppression of each class's boxes, as OpenVINO's MulticlassNms: outputs
    ``selected_outputs`` [S, 6] (class, score, x1, y1, x2, y2), ``selected_indices`` [S, 1] and
    ``selected_num`` [N] (boxes kept per image).

    The arguments after ``boxes`` and ``scores`` as OpenVINO's opset 9 (``roisnum``,
    ``sort_result_type``, ``sort_result_across_batch``, ``output_type``, ``iou_threshold``,
    ``score_threshold``, ``nms_top_k``, ``keep_top_k``, ``background_class``, ``nms_eta``,
    ``normalized``, ``name``) or opset 8 (the same without ``roisnum``: a string third).
    ``boxes`` [N, M, 4] shared by the classes of ``scores`` [N, C, M] (index ``image * M + box``),
    or (opset 9) ``boxes`` [C, M, 4] and ``scores`` [C, M] of the images whose ``roisnum`` [N]
    boxes follow one another along M (index ``box * C + class``).  ``nms_top_k`` boxes of the
    best scores per image and class go through NMS, ``keep_top_k`` of the best kept per image;
    ``sort_result_type`` ``"classid"`` orders each image's boxes by class then score, ``"score"``
    and ``"none"`` by score; ``sort_result_across_batch`` orders them over every image."""
    order = _NMS_ORDER if args and isinstance(args[0], str) else ("roisnum", *_NMS_ORDER)
    if len(args) > len(order):
        raise InputError(f"multiclass_nms takes at most {len(order) + 2} arguments, got {len(args) + 2}")
    given = dict(zip(order, args, strict=False))
    unknown = sorted(set(kwargs) - set(_NMS_DEFAULTS))
    twice = sorted(set(kwargs) & set(given))
    if unknown or twice:
        raise InputError(f"multiclass_nms arguments: unknown {unknown}, given twice {twice}; accepted: "
                         f"boxes, scores, {', '.join(_NMS_DEFAULTS)}")
    options = {**_NMS_DEFAULTS, **given, **kwargs}
    return _multiclass_nms(boxes, scores, **options)


def _multiclass_nms(boxes: NodeInput, scores: NodeInput, roisnum: NodeInput, sort_result_type: Any,
                    sort_result_across_batch: Any, output_type: Any, iou_threshold: Any, score_threshold: Any,
                    nms_top_k: Any, keep_top_k: Any, background_class: Any, nms_eta: Any, normalized: Any,
                    name: str | None) -> Node:
    sort = choice(sort_result_type, _SORT_TYPES, "multiclass_nms sort_result_type")
    kind = choice(output_type, _INDEX_TYPES, "multiclass_nms output_type")
    if float(nms_eta) != 1.0:
        raise InputError(f"multiclass_nms nms_eta {nms_eta}: adaptive NMS (an IoU threshold that shrinks as "
                         "boxes are kept) has no ONNX equivalent; accepted: 1.0")
    top_k = int(nms_top_k)
    if top_k < -1:
        raise InputError(f"multiclass_nms nms_top_k {nms_top_k}; accepted: -1 (every box) or a count of 0 "
                         "or more")
    box_values, score_values = value_of(boxes), value_of(scores)
    box_rank = None if box_values.shape is None else len(box_values.shape)
    score_rank = None if score_values.shape is None else len(score_values.shape)
    if box_rank != 3 or score_rank not in (2, 3):
        raise InputError(f"multiclass_nms takes boxes of rank 3 and scores of rank 3 ([N, M, 4] and "
                         f"[N, C, M]) or 2 ([C, M, 4], [C, M] and roisnum); got ranks {box_rank} and "
                         f"{score_rank}")
    shared = score_rank == 3
    if not shared and roisnum is None:
        raise InputError("multiclass_nms with scores of rank 2 ([C, M]) needs roisnum (boxes per image)")
    out_dtype = box_values.dtype or ir.DataType.FLOAT
    as_float = [v if v.dtype == ir.DataType.FLOAT else step("Cast", [v], {"to": _FLOAT})
                for v in (box_values, score_values)]
    flat_boxes, flat_scores = as_float
    classes = _dim(flat_scores, 1 if shared else 0)
    boxes_per_group = _dim(flat_boxes, 1)
    if shared:
        images = _dim(flat_boxes, 0)
    else:  # each (image, class) one group of ONNX's NMS, its scores outside the image's boxes -inf
        counts = int64(roisnum)
        images = _dim(counts, 0)
        first = step("CumSum", [counts, _ints(0)], {"exclusive": 1})
        position = step("Range", [_ints(0), _scalar(boxes_per_group), _ints(1)])
        inside = step("And", [
            step("GreaterOrEqual", [step("Unsqueeze", [position, _ints([0])]),
                                    step("Unsqueeze", [first, _ints([1])])]),
            step("Less", [step("Unsqueeze", [position, _ints([0])]),
                          step("Unsqueeze", [step("Add", [first, counts]), _ints([1])])])])  # [N, M]
        grid = step("Concat", [images, classes, boxes_per_group], {"axis": 0})
        flat_scores = step("Where", [step("Unsqueeze", [inside, _ints([1])]),
                                     step("Unsqueeze", [flat_scores, _ints([0])]), _floats(-np.inf)])
        flat_scores = step("Reshape", [flat_scores, _ints([-1, 1, 0])])  # [N * C, 1, M]
        grid4 = step("Concat", [grid, _ints([4])], {"axis": 0})
        flat_boxes = step("Reshape", [step("Expand", [step("Unsqueeze", [flat_boxes, _ints([0])]), grid4]),
                                      step("Concat", [_ints([-1]), boxes_per_group, _ints([4])],
                                           {"axis": 0})])  # [N * C, M, 4]
    if top_k >= 0:  # only each group's top_k best scores go through NMS
        k = step("Min", [_ints([top_k]), boxes_per_group])
        best = make_op("TopK", "TopK", [flat_scores, k], {"axis": -1, "largest": 1, "sorted": 1}, None,
                       num_outputs=2)
        blank = step("Expand", [_floats(-np.inf), step("Shape", [flat_scores])])
        flat_scores = step("ScatterElements", [blank, best._outputs[1], best._outputs[0]],  # noqa: SLF001
                           {"axis": -1})
    nms_boxes = flat_boxes
    if not bool(normalized):
        nms_boxes = step("Add", [nms_boxes, _floats([0, 0, 1, 1])])
    low = step("Slice", [nms_boxes, _ints([0]), _ints([2]), _ints([2])])
    high = step("Slice", [nms_boxes, _ints([2]), _ints([4]), _ints([2])])
    narrowest = step("ReduceMin", [step("Sub", [high, low])], {"axes": [2], "keepdims": 1})
    empty = step("LessOrEqual", [narrowest, _floats(0)])
    nms_boxes = step("Where", [empty, _floats([0, 0, 0, 0]), nms_boxes])
    iou = float(np.float32(iou_threshold))
    if iou > 1:  # no IoU reaches it: boxes that overlap nothing, whether NMS drops IoUs above or from 1
        nms_boxes = step("Expand", [_floats([0, 0, 0, 0]), step("Shape", [nms_boxes])])
    limit = _ints([1]) if iou <= 0 else step("Max", [boxes_per_group, _ints([1])])
    iou_value = _floats([min(max(float(_below(iou)), 0.0), 1.0)])
    least = _floats([_below(float(score_threshold))])
    selected = step("NonMaxSuppression", [nms_boxes, flat_scores, limit, iou_value, least], {})
    score = step("GatherND", [flat_scores, selected])  # [S]
    group = step("Slice", [selected, _ints([0]), _ints([1]), _ints([1])])
    box = step("Slice", [selected, _ints([2]), _ints([3]), _ints([1])])
    if shared:
        image, label = group, step("Slice", [selected, _ints([1]), _ints([2]), _ints([1])])
        index = step("Add", [step("Mul", [image, boxes_per_group]), box])
        where = step("Concat", [image, box], {"axis": 1})
    else:
        image, label = step("Div", [group, classes]), step("Mod", [group, classes])
        index = step("Add", [step("Mul", [box, classes]), label])
        where = step("Concat", [label, box], {"axis": 1})
    known = (box_values if shared else value_of(roisnum)).shape
    kept = Selected(score, image, label, box, index, where)
    bound = kept_bound(score_values, top_k, int(keep_top_k), None if shared else value_of(roisnum))
    sizes = Grid(images, classes, boxes_per_group, known[0] if known is not None else None, bound)
    return selected_outputs("MulticlassNms", kept, sizes, flat_boxes if shared else as_float[0],
                            int(background_class), int(keep_top_k), sort, bool(sort_result_across_batch),
                            True, kind, out_dtype, name)


class Selected(NamedTuple):
    """The boxes an NMS kept, one row each: ``score`` [S], and [S, 1] int64 columns ``image``,
    ``label`` (class), ``box`` (its place in its group), ``selected_index`` (the op's index of it),
    and ``where`` [S, 2], the box's place in the boxes tensor."""

    score: ir.Value
    image: ir.Value
    label: ir.Value
    box: ir.Value
    selected_index: ir.Value
    where: ir.Value


class Grid(NamedTuple):
    """The op's images, classes and boxes per group (int64 tensors of one element), the images'
    count where the input shape gives it (OpenVINO's static dim of the kept counts), and the most
    rows the op can keep where the shapes give it (:func:`kept_bound`)."""

    images: ir.Value
    classes: ir.Value
    boxes_per_group: ir.Value
    known_images: Any
    bound: int | None = None


def kept_bound(scores: ir.Value, nms_top_k: int, keep_top_k: int,
               roisnum: ir.Value | None = None) -> int | None:
    """The most rows MulticlassNms and MatrixNms keep, as OpenVINO bounds their outputs, where the
    dims are known: each image's classes times its ``nms_top_k`` best boxes (-1: every box), at most
    ``keep_top_k`` (-1: no limit), times the images.  ``scores`` [N, C, M] (images, classes, boxes),
    or [C, M] with ``roisnum`` [N]; else None."""
    if roisnum is None:
        dims = list(scores.shape or [])
    else:
        dims = [*(roisnum.shape or [None])[:1], *(scores.shape or [])]
    known = [d for d in dims if isinstance(d, int)]
    if len(dims) != 3 or len(known) != 3:
        return None
    images, classes, count = known
    per_image = classes * (count if nms_top_k < 0 else min(nms_top_k, count))
    return images * (per_image if keep_top_k < 0 else min(keep_top_k, per_image))


def selected_outputs(type_name: str, kept: Selected, grid: Grid, boxes: ir.Value, background: int,
                     keep_top_k: int, sort: str, across_batch: bool, image_classid: bool, kind: str,
                     out_dtype: ir.DataType, name: str | None) -> Node:
    """The outputs OpenVINO's MulticlassNms and MatrixNms share from the ``kept`` rows:
    ``selected_outputs`` [S, 6] (class, score, the box's corners from ``boxes``), the selected
    indices [S, 1] and the boxes kept per image [N].  Rows of class ``background`` are dropped;
    each image keeps its ``keep_top_k`` best (-1: all), by score, equal scores by class then box.
    ``sort`` ``"classid"`` orders each image's rows by class then score (only where
    ``image_classid``: OpenVINO's MatrixNms orders them by score), across the batch
    (``across_batch``) by class, image, score; ``"score"`` across the batch by score."""
    score, image, label, box, index, where = kept
    images, classes, boxes_per_group = grid.images, grid.classes, grid.boxes_per_group
    if background >= 0:
        keep = step("Squeeze", [step("Not", [step("Equal", [label, _ints([background])])]), _ints([1])])
        score, image, label, box, index, where = (step("Compress", [v, keep], {"axis": 0})
                                                  for v in (score, image, label, box, index, where))
    image, label, box = (step("Squeeze", [v, _ints([1])]) for v in (image, label, box))
    pair = step("Add", [step("Mul", [image, classes]), label])
    position = step("Add", [step("Mul", [pair, boxes_per_group]), box])  # equal scores: image, class, box
    rank = _score_rank(score, position)
    rows = _dim(score, 0)
    # each image's boxes by score (ties: class, then box), the first keep_top_k of each image kept
    order = ascending(step("Add", [step("Mul", [image, rows]), rank]))
    score, image, label, index, where, rank = (step("Gather", [v, order], {"axis": 0})
                                               for v in (score, image, label, index, where, rank))
    image_ids = step("Range", [_ints(0), _scalar(images), _ints(1)])
    counts_before = step("ReduceSum", [step("Cast", [step("Less", [
        step("Unsqueeze", [image, _ints([1])]), step("Unsqueeze", [image_ids, _ints([0])])])],
        {"to": _INT64}), _ints([0])], {"keepdims": 0})  # [N]: rows of earlier images
    if keep_top_k >= 0:
        place = step("Sub", [step("Range", [_ints(0), _scalar(rows), _ints(1)]),
                             step("Gather", [counts_before, image], {"axis": 0})])
        keep = step("Less", [place, _ints(keep_top_k)])
        score, image, label, index, where, rank = (step("Compress", [v, keep], {"axis": 0})
                                                   for v in (score, image, label, index, where, rank))
    key = None  # rows (before keep_top_k) bounds rank
    if across_batch and sort == "score":
        key = rank
    elif across_batch and sort == "classid":
        key = step("Add", [step("Mul", [step("Add", [step("Mul", [label, images]), image]), rows]), rank])
    elif sort == "classid" and image_classid:
        key = step("Add", [step("Mul", [step("Add", [step("Mul", [image, classes]), label]), rows]), rank])
    if key is not None:
        order = ascending(key)
        score, image, label, index, where = (step("Gather", [v, order], {"axis": 0})
                                             for v in (score, image, label, index, where))
    corners = step("GatherND", [boxes, where])  # [S, 4]
    columns = [step("Unsqueeze", [step("Cast", [label], {"to": _FLOAT}), _ints([1])]),
               step("Unsqueeze", [score, _ints([1])]), corners]
    outputs = make_op(type_name, "Concat", columns, {"axis": 1}, name)
    if out_dtype != ir.DataType.FLOAT:
        outputs._outputs[0] = step("Cast", [outputs._outputs[0]], {"to": int(out_dtype)})  # noqa: SLF001
    index_type = int(to_ir_dtype(kind))
    selected_num = step("ReduceSum", [step("Cast", [step("Equal", [
        step("Unsqueeze", [image, _ints([1])]), step("Unsqueeze", [image_ids, _ints([0])])])],
        {"to": _INT64}), _ints([0])], {"keepdims": 0})
    if isinstance(grid.known_images, int):  # selected_num's static dim, as OpenVINO's
        selected_num = step("Reshape", [selected_num, _ints([grid.known_images])])
    bounded: int | str | None = None if grid.bound is None else grid.bound if grid.bound == 0 \
        else f"..{grid.bound}"  # OpenVINO's "..K" range of rows
    if bounded is not None:
        outputs._outputs[0].shape = ir.Shape([bounded, 6])  # noqa: SLF001
    outputs._outputs.extend([step("Cast", [index], {"to": index_type}),  # noqa: SLF001
                             step("Cast", [selected_num], {"to": index_type})])
    if bounded is not None:
        outputs._outputs[1].shape = ir.Shape([bounded, 1])  # noqa: SLF001
    return outputs


_EXACT_ROWS = 46340
"""The most rows whose sort keys (a run of equal scores times the rows, plus a row) stay below
2**31: OpenVINO's CPU holds 64-bit integers in 32 bits.  Beyond it, equal scores keep the order
TopK gives them (by position on ONNX Runtime, as it likes on OpenVINO)."""


def _score_rank(score: ir.Value, position: ir.Value) -> ir.Value:
    """Each row's place when the rows are ordered by score, highest first, rows of equal scores by
    ``position`` (distinct int64 values, smallest first): TopK orders equal values as it likes, so
    the runs of equal scores are numbered and the order made from distinct integers."""
    rows = _dim(score, 0)
    places = step("Range", [_ints(0), _scalar(rows), _ints(1)])
    by_position = ascending(position)
    padded = step("Concat", [step("Gather", [score, by_position], {"axis": 0}), _floats([-np.inf])],
                  {"axis": 0})  # keeps TopK's k above 0
    best = make_op("TopK", "TopK", [padded, step("Add", [rows, _ints([1])])],
                   {"axis": 0, "largest": 1, "sorted": 1}, None, num_outputs=2)
    values = step("Slice", [best._outputs[0], _ints([0]), rows, _ints([0])])  # noqa: SLF001
    order = step("Slice", [best._outputs[1], _ints([0]), rows, _ints([0])])  # noqa: SLF001
    before = step("Slice", [values, _ints([0]), _ints([-1]), _ints([0])])
    earlier = step("Concat", [_floats([np.inf]), before], {"axis": 0})
    starts = step("Cast", [step("Not", [step("Equal", [values, earlier])])], {"to": _INT64})
    level = step("ScatterElements", [places, order, step("CumSum", [starts, _ints(0)])], {"axis": 0})
    key = step("Min", [step("Add", [step("Mul", [level, rows]), places]), _ints(_INT32_MAX - 1)])
    exact = _inverse(ascending(key), places)  # its keys wrong only beyond _EXACT_ROWS, where unused
    small = step("LessOrEqual", [rows, _ints([_EXACT_ROWS])])
    ranked = step("Where", [small, exact, _inverse(order, places)])  # the rows in position order
    return step("ScatterElements", [places, by_position, ranked], {"axis": 0})


def _inverse(order: ir.Value, places: ir.Value) -> ir.Value:
    """The place of each row in ``order`` (a permutation of ``places``)."""
    return step("ScatterElements", [places, order, places], {"axis": 0})


_PSROI_MODES = ("average", "bilinear")


def psroi_pooling(input: NodeInput, coords: NodeInput, output_dim: int, group_size: int,
                  spatial_scale: float, spatial_bins_x: int, spatial_bins_y: int, mode: str,
                  name: str | None = None) -> Node:
    """Position-sensitive ROI pooling of ``input`` [B, C, H, W] over ``coords`` [R, 5] (batch index,
    x1, y1, x2, y2) to [R, output_dim, group_size, group_size].

    ``mode="average"``: bin (i, j) of output channel k averages input channel
    ``(k * group_size + i) * group_size + j`` over the bin's pixels (the corners rounded, the far
    one inclusive, scaled by ``spatial_scale``); C is ``output_dim * group_size²``.
    ``mode="bilinear"``: each output averages ``spatial_bins_x * spatial_bins_y`` bilinear samples
    (coordinates relative to the map, scaled by ``spatial_scale``), sub-bin (y, x) read from
    channel ``k + (y * spatial_bins_x + x) * output_dim``; C is ``output_dim * bins``.
    A region whose batch index is -1 ends the list: it and those after it give zeros."""
    kind = str(mode).lower()
    if kind not in _PSROI_MODES:
        raise InputError(f"psroi_pooling mode {mode!r}; accepted: {', '.join(_PSROI_MODES)}")
    out_dim, group = int(output_dim), int(group_size)
    bins_x, bins_y = int(spatial_bins_x), int(spatial_bins_y)
    if out_dim < 1 or group < 1 or bins_x < 1 or bins_y < 1:
        raise InputError(f"psroi_pooling needs output_dim, group_size and spatial bins of 1 or more, got "
                         f"{output_dim}, {group_size}, {spatial_bins_x}, {spatial_bins_y}")
    x = value_of(input)
    if x.shape is None or len(x.shape) != 4:
        raise InputError("psroi_pooling takes an input of rank 4 [B, C, H, W]")
    channels = x.shape[1]
    want = out_dim * group * group if kind == "average" else out_dim * bins_x * bins_y
    if isinstance(channels, int) and channels != want:
        what = ("output_dim * group_size²" if kind == "average"
                else "output_dim * spatial_bins_x * spatial_bins_y")
        raise InputError(f"psroi_pooling mode {kind!r} needs {what} = {want} input channels, got {channels}")
    dtype = x.dtype or ir.DataType.FLOAT
    data = x if dtype == ir.DataType.FLOAT else step("Cast", [x], {"to": _FLOAT})
    rois = value_of(coords)
    if rois.dtype != ir.DataType.FLOAT:
        rois = step("Cast", [rois], {"to": _FLOAT})
    column = [step("Slice", [rois, _ints([i]), _ints([i + 1]), _ints([1])]) for i in range(5)]  # [R, 1]
    image = step("Cast", [column[0]], {"to": _INT64})
    scale = _floats(float(spatial_scale))
    height, width = _dim(data, 2), _dim(data, 3)
    if kind == "average":
        pooled = _psroi_average(data, image, column, scale, height, width, out_dim, group)
    else:
        pooled = _psroi_bilinear(data, image, column, scale, height, width, out_dim, group, bins_x, bins_y)
    # the regions from the first of batch index -1 on are zeros
    ended = step("Cast", [step("Equal", [image, _ints(-1)])], {"to": _INT64})
    live = step("Equal", [step("CumSum", [ended, _ints(0)]), _ints(0)])  # [R, 1]
    live = step("Reshape", [live, _ints([-1, 1, 1, 1])])
    if dtype == ir.DataType.FLOAT:
        return make_op("PSROIPooling", "Where", [live, pooled, _floats(0)], {}, name)
    kept = step("Where", [live, pooled, _floats(0)])
    return make_op("PSROIPooling", "Cast", [kept], {"to": int(dtype)}, name)


def _bounds(start: ir.Value, size: ir.Value, parts: int, limit: ir.Value) -> tuple[ir.Value, ir.Value]:
    """[R, parts] first and end (exclusive) pixels of a region's ``parts`` bins along one axis,
    within 0 and ``limit``."""
    step_size = step("Div", [size, _floats(float(parts))])  # [R, 1]
    index = _floats(np.arange(parts + 1, dtype=np.float32).reshape(1, -1))
    edges = step("Add", [step("Mul", [index, step_size]), start])  # [R, parts + 1]
    low = step("Floor", [step("Slice", [edges, _ints([0]), _ints([parts]), _ints([1])])])
    high = step("Ceil", [step("Slice", [edges, _ints([1]), _ints([parts + 1]), _ints([1])])])
    top = step("Cast", [limit], {"to": _FLOAT})
    low, high = (step("Min", [step("Max", [v, _floats(0)]), top]) for v in (low, high))
    return low, high


def _psroi_average(data: ir.Value, image: ir.Value, column: list[ir.Value], scale: ir.Value,
                   height: ir.Value, width: ir.Value, out_dim: int, group: int) -> ir.Value:
    """Each bin's sum from running sums along W (one subtraction per row of the bin), no matrix
    products (which a CPU may run at a lower precision)."""
    start_w = step("Mul", [round_half_away(column[1]), scale])
    start_h = step("Mul", [round_half_away(column[2]), scale])
    end_w = step("Mul", [round_half_away(step("Add", [column[3], _floats(1)])), scale])
    end_h = step("Mul", [round_half_away(step("Add", [column[4], _floats(1)])), scale])
    size_w = step("Max", [step("Sub", [end_w, start_w]), _floats(0.1)])
    size_h = step("Max", [step("Sub", [end_h, start_h]), _floats(0.1)])
    row_low, row_high = _bounds(start_h, size_h, group, height)  # [R, G]
    col_low, col_high = _bounds(start_w, size_w, group, width)
    running = step("CumSum", [data, _ints(3)])
    zeros = step("Expand", [_floats(0), step("Concat", [step("Shape", [data], {"end": 3}), _ints([1])],
                                                       {"axis": 0})])
    running = step("Concat", [zeros, running], {"axis": 3})  # [B, C, H, W + 1]
    shape = step("Concat", [_ints([0, out_dim, group, group]), height,
                            step("Add", [width, _ints([1])])], {"axis": 0})
    table = step("Transpose", [step("Reshape", [running, shape])], {"perm": [0, 2, 3, 5, 1, 4]})
    rois = _dim(image, 0)
    grid = step("Concat", [rois, _ints([group, group])], {"axis": 0})  # [R, p, q]
    images = step("Expand", [step("Unsqueeze", [image, _ints([2])]), grid])
    p_index = step("Expand", [_ints(np.arange(group).reshape(1, -1, 1)), grid])
    q_index = step("Expand", [_ints(np.arange(group).reshape(1, 1, -1)), grid])

    def at(columns: ir.Value) -> ir.Value:  # [R, q] -> [R, p, q, K, H]
        place = step("Cast", [step("Unsqueeze", [columns, _ints([1])])], {"to": _INT64})
        place = step("Expand", [place, grid])
        where = step("Concat", [step("Unsqueeze", [v, _ints([3])])
                                for v in (images, p_index, q_index, place)], {"axis": 3})
        return step("GatherND", [table, where])

    pixels = step("Cast", [step("Range", [_ints(0), _scalar(height), _ints(1)])], {"to": _FLOAT})
    pixels = step("Reshape", [pixels, _ints([1, 1, -1])])
    rows = step("And", [step("GreaterOrEqual", [pixels, step("Unsqueeze", [row_low, _ints([2])])]),
                        step("Less", [pixels, step("Unsqueeze", [row_high, _ints([2])])])])  # [R, p, H]
    rows = step("Reshape", [rows, step("Concat", [rois, _ints([group, 1, 1, -1])], {"axis": 0})])
    spans = step("Where", [rows, step("Sub", [at(col_high), at(col_low)]), _floats(0)])
    sums = step("Transpose", [step("ReduceSum", [spans, _ints([4])], {"keepdims": 0})],
                {"perm": [0, 3, 1, 2]})  # [R, K, p, q]
    area = step("Mul", [step("Unsqueeze", [step("Sub", [row_high, row_low]), _ints([2])]),
                        step("Unsqueeze", [step("Sub", [col_high, col_low]), _ints([1])])])
    area = step("Unsqueeze", [area, _ints([1])])  # [R, 1, p, q]
    some = step("Greater", [area, _floats(0)])
    return step("Where", [some, step("Div", [sums, step("Max", [area, _floats(1)])]), _floats(0)])


def _psroi_bilinear(data: ir.Value, image: ir.Value, column: list[ir.Value], scale: ir.Value,
                    height: ir.Value, width: ir.Value, out_dim: int, group: int, bins_x: int,
                    bins_y: int) -> ir.Value:
    start_w, start_h, end_w, end_h = (step("Mul", [column[i], scale]) for i in (1, 2, 3, 4))
    sample_y = _samples(start_h, step("Sub", [end_h, start_h]), bins_y, group, height)  # [R, by, G]
    sample_x = _samples(start_w, step("Sub", [end_w, start_w]), bins_x, group, width)  # [R, bx, G]
    last_y = step("Cast", [step("Sub", [height, _ints([1])])], {"to": _FLOAT})
    last_x = step("Cast", [step("Sub", [width, _ints([1])])], {"to": _FLOAT})
    ok_y, ok_x = (step("And", [step("GreaterOrEqual", [v, _floats(0)]), step("LessOrEqual", [v, last])])
                  for v, last in ((sample_y, last_y), (sample_x, last_x)))
    top = step("Floor", [step("Max", [step("Min", [sample_y, last_y]), _floats(0)])])
    left = step("Floor", [step("Max", [step("Min", [sample_x, last_x]), _floats(0)])])
    bottom = step("Min", [step("Ceil", [step("Max", [step("Min", [sample_y, last_y]), _floats(0)])]), last_y])
    right = step("Min", [step("Ceil", [step("Max", [step("Min", [sample_x, last_x]), _floats(0)])]), last_x])
    dy = step("Sub", [sample_y, top])
    dx = step("Sub", [sample_x, left])
    # the map as [B, by, bx, H, W, K]: sub-bin (y, x) of output channel k is channel k + (y * bx + x) * K
    shape = step("Concat", [_ints([0, bins_y, bins_x, out_dim]), height, width], {"axis": 0})
    table = step("Transpose", [step("Reshape", [data, shape])], {"perm": [0, 1, 2, 4, 5, 3]})
    rois = _dim(image, 0)
    grid = step("Concat", [rois, _ints([bins_y, group, bins_x, group])], {"axis": 0})  # [R, by, h, bx, w]

    def spread(value: ir.Value, axes: list[int]) -> ir.Value:
        return step("Expand", [step("Cast", [step("Unsqueeze", [value, _ints(axes)])], {"to": _INT64}), grid])

    by_index = spread(step("Reshape", [_ints(np.arange(bins_y)), _ints([1, -1, 1])]), [3, 4])
    bx_index = spread(step("Reshape", [_ints(np.arange(bins_x)), _ints([1, -1, 1])]), [1, 2])
    images = spread(image, [2, 3, 4])  # image [R, 1] -> [R, 1, 1, 1, 1]

    def corner(rows: ir.Value, cols: ir.Value) -> ir.Value:
        where = step("Concat", [step("Unsqueeze", [v, _ints([5])]) for v in
                                (images, by_index, bx_index, spread(rows, [3, 4]), spread(cols, [1, 2]))],
                     {"axis": 5})
        return step("GatherND", [table, where])  # [R, by, h, bx, w, K]

    def near(value: ir.Value, axes: list[int]) -> ir.Value:
        return step("Unsqueeze", [value, _ints(axes)])

    dx6, dy6 = near(dx, [1, 2, 5]), near(dy, [3, 4, 5])
    upper = step("Add", [corner(top, left), step("Mul", [step("Sub", [corner(top, right), corner(top, left)]),
                                                         dx6])])
    lower = step("Add", [corner(bottom, left), step("Mul", [step("Sub", [corner(bottom, right),
                                                                         corner(bottom, left)]), dx6])])
    value = step("Add", [upper, step("Mul", [step("Sub", [lower, upper]), dy6])])
    inside = step("And", [near(ok_y, [3, 4, 5]), near(ok_x, [1, 2, 5])])
    value = step("Where", [inside, value, _floats(0)])
    total = step("ReduceSum", [value, _ints([1, 3])], {"keepdims": 0})  # [R, h, w, K]
    mean = step("Div", [total, _floats(float(bins_x * bins_y))])
    return step("Transpose", [mean], {"perm": [0, 3, 1, 2]})


def _samples(start: ir.Value, size: ir.Value, bins: int, group: int, limit: ir.Value) -> ir.Value:
    """[R, bins, group]: where each output bin of each sub-bin samples the map along one axis
    (the region's coordinates relative to the map, scaled by its last index)."""
    last = step("Cast", [step("Sub", [limit, _ints([1])])], {"to": _FLOAT})
    part = step("Div", [size, _floats(float(bins))])  # [R, 1]
    index = _floats(np.arange(bins + 1, dtype=np.float32).reshape(1, -1))
    edges = step("Add", [start, step("Mul", [index, part])])  # [R, bins + 1]
    low = step("Slice", [edges, _ints([0]), _ints([bins]), _ints([1])])
    high = step("Slice", [edges, _ints([1]), _ints([bins + 1]), _ints([1])])
    low, high = (step("Unsqueeze", [v, _ints([2])]) for v in (low, high))  # [R, bins, 1]
    if group > 1:
        stride = step("Div", [step("Mul", [step("Sub", [high, low]), last]), _floats(float(group - 1))])
        places = _floats(np.arange(group, dtype=np.float32).reshape(1, 1, -1))
        return step("Add", [step("Mul", [places, stride]), step("Mul", [low, last])])
    return step("Mul", [step("Mul", [_floats(0.5), step("Add", [low, high])]), last])
