"""OpenVINO's Proposal (opsets 1 and 4: a Faster R-CNN region proposal network's boxes) and
GenerateProposals (opset 9: Mask R-CNN's, with anchors given per place) as ONNX ops.

Anchors: for each ratio and scale of ``attrs``, a box about a ``base_size`` square's centre, made once
here in float32 as OpenVINO's CPU makes them; shifted by ``feat_stride`` to each place of the
score map.  Each anchor moves and grows by its four deltas (``dx * w + cx``, ``exp(dw) * w``), is
clipped to the image (``clip_before_nms``), and its score (the map's second half of channels, the
foreground's) becomes 0 where its width or height is below ``min_size`` times the image's scale.
The ``pre_nms_topn`` best scores of each image go through ONNX's NonMaxSuppression (its order
kept: they are handed to it as strictly decreasing ranks; IoU above ``nms_thresh`` suppresses)
up to ``post_nms_topn`` boxes; kept boxes are clipped (``clip_after_nms``) and divided by the image
size (``normalize``).  Rows past an image's kept boxes are 0, the first of them with image index -1.

``framework`` ``""`` (Caffe's rules: a box's width and height count one more, ratios round the
anchor sizes) or ``"tensorflow"`` (no extra pixel, anchors about the origin, clipped to the image
before they move, x along the map's rows and the image's height and width swapped), as OpenVINO's
CPU.  Where a box's far corner lies less than one pixel before another's near one, Caffe's rules on
OpenVINO's CPU find no overlap and ONNX's NMS (the far corners moved by one) a small one.

GenerateProposals follows OpenVINO's CPU likewise: the anchors are an input; a box's size moves by at
most log(1000 / 16); its far corner lies one pixel in (pixel boxes, ``normalized=False``); boxes
below ``min_size`` take no part in NMS (where Proposal scores them 0); the kept boxes of all images
follow one another, with their count per image.  ``nms_eta`` other than 1 (adaptive NMS, which
OpenVINO's CPU ignores) is refused.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import onnx_ir as ir

from inferplex._opsets.build import NodeInput, choice, dim_at, make_op, settle_shape, step, value_of
from inferplex._opsets.build import dim as _dim
from inferplex._opsets.build import floats as _floats
from inferplex._opsets.build import ints as _ints
from inferplex.api.nodes import Node, to_ir_dtype
from inferplex.errors import InputError

__all__ = ["generate_proposals", "proposal"]

_REQUIRED = ("base_size", "pre_nms_topn", "post_nms_topn", "nms_thresh", "feat_stride", "min_size", "ratio",
             "scale")
_OPTIONAL: dict[str, Any] = {"clip_before_nms": True, "clip_after_nms": False, "normalize": False,
                             "box_size_scale": 1.0, "box_coordinate_scale": 1.0, "framework": ""}
_FRAMEWORKS = ("", "caffe", "tensorflow")
_FLOAT = int(ir.DataType.FLOAT)
_INT64 = int(ir.DataType.INT64)
_F32 = np.float32


def _column(value: ir.Value, index: int) -> ir.Value:
    """Column ``index`` of the last axis, kept as an axis of 1."""
    return step("Slice", [value, _ints([index]), _ints([index + 1]), _ints([-1])])


def _clamp(value: ir.Value, high: ir.Value) -> ir.Value:
    """``max(0, min(value, high))``, OpenVINO's clip."""
    return step("Max", [_floats(0.0), step("Min", [value, high])])


def proposal(class_probs: NodeInput, bbox_deltas: NodeInput, image_shape: NodeInput, attrs: dict[str, Any],
             name: str | None = None) -> Node:
    """Region proposals from ``class_probs`` [N, 2A, H, W] (A = len(ratio) * len(scale) anchors:
    background scores, then foreground), ``bbox_deltas`` [N, 4A, H, W] and ``image_shape`` [3] or
    [4] (height, width, scale of the height, of the width: the height's where absent).  Outputs
    [N * post_nms_topn, 5] (image index, x1, y1, x2, y2) and the boxes' scores [N * post_nms_topn].
    ``attrs`` as OpenVINO's: required ``base_size``, ``pre_nms_topn``, ``post_nms_topn``,
    ``nms_thresh``, ``feat_stride``, ``min_size``, ``ratio``, ``scale``; optional
    ``clip_before_nms`` (True), ``clip_after_nms`` (False), ``normalize`` (False),
    ``box_size_scale`` (1.0), ``box_coordinate_scale`` (1.0), ``framework`` ("" or "tensorflow")."""
    options = _options(attrs)
    probs, deltas, info = (value_of(v) for v in (class_probs, bbox_deltas, image_shape))
    for what, value in (("class_probs", probs), ("bbox_deltas", deltas)):
        if value.shape is not None and len(value.shape) != 4:
            raise InputError(f"proposal takes {what} of rank 4 [N, C, H, W], got rank {len(value.shape)}")
    known = info.shape
    if known is not None and (len(known) != 1 or (isinstance(known[0], int) and known[0] not in (3, 4))):
        raise InputError(f"proposal takes image_shape [3] or [4] (height, width, scale of the height[, of "
                         f"the width]), got {list(known)}")
    anchors = _anchors(options)
    count = len(anchors)
    for what, value, per in (("class_probs", probs, 2), ("bbox_deltas", deltas, 4)):
        channels = None if value.shape is None else value.shape[1]
        if isinstance(channels, int) and channels != per * count:
            raise InputError(f"proposal's {count} anchors (ratios x scales) need {per * count} channels of "
                             f"{what}, got {channels}")
    out_dtype = probs.dtype or ir.DataType.FLOAT
    batch = None if probs.shape is None else probs.shape[0]
    probs, deltas, info = (v if v.dtype == ir.DataType.FLOAT else step("Cast", [v], {"to": _FLOAT})
                           for v in (probs, deltas, info))
    swap = options["framework"] == "tensorflow"
    offset = 0.0 if swap else 1.0
    info = step("Reshape", [info, _ints([-1])])
    image_h = step("Gather", [info, _ints([1 if swap else 0])], {"axis": 0})
    image_w = step("Gather", [info, _ints([0 if swap else 1])], {"axis": 0})
    last = step("Min", [step("Sub", [_dim(info, 0), _ints([1])]), _ints([3])])
    scale_h, scale_w = (step("Gather", [info, index], {"axis": 0}) for index in (_ints([2]), last))
    min_size = _floats([float(options["min_size"])])
    min_h, min_w = step("Mul", [min_size, scale_h]), step("Mul", [min_size, scale_w])

    # the foreground scores and the deltas, one row per (h, w, anchor) of each image
    scores = step("Slice", [probs, _ints([count]), _ints([2 * count]), _ints([1])])
    scores = step("Reshape", [step("Transpose", [scores], {"perm": [0, 2, 3, 1]}), _ints([0, -1])])  # [N, P]
    deltas = step("Reshape", [deltas, _ints([0, count, 4, -1])])
    deltas = step("Reshape", [step("Transpose", [deltas], {"perm": [0, 3, 1, 2]}), _ints([0, -1, 4])])
    dx, dy, dw, dh = (_column(deltas, i) for i in range(4))  # [N, P, 1]
    coordinate_scale = _floats(options["box_coordinate_scale"])
    size_scale = _floats(options["box_size_scale"])
    dx, dy = (step("Div", [d, coordinate_scale]) for d in (dx, dy))
    dw, dh = (step("Div", [d, size_scale]) for d in (dw, dh))

    # the anchors at each place of the map: [1, P, 1] per corner
    height, width = _dim(probs, 2), _dim(probs, 3)
    stride = _ints(int(options["feat_stride"]))
    rows = step("Unsqueeze", [step("Mul", [step("Range", [_ints(0), step("Squeeze", [height]), _ints(1)]),
                                           stride]), _ints([1])])  # [H, 1]
    columns = step("Unsqueeze", [step("Mul", [step("Range", [_ints(0), step("Squeeze", [width]), _ints(1)]),
                                              stride]), _ints([0])])  # [1, W]
    grid = step("Concat", [height, width], {"axis": 0})
    along_x, along_y = (rows, columns) if swap else (columns, rows)
    places_x, places_y = (step("Cast", [step("Reshape", [step("Expand", [v, grid]), _ints([-1, 1])])],
                               {"to": _FLOAT}) for v in (along_x, along_y))  # [H * W, 1]
    corners = []
    for index, places in enumerate((places_x, places_y, places_x, places_y)):
        corner = step("Add", [places, _floats(anchors[:, index].reshape(1, -1))])  # [H * W, A]
        corners.append(step("Reshape", [corner, _ints([1, -1, 1])]))
    x0, y0, x1, y1 = corners
    if swap:  # TensorFlow's anchors are clipped to the image before they move
        x0, x1 = (_clamp(v, image_w) for v in (x0, x1))
        y0, y1 = (_clamp(v, image_h) for v in (y0, y1))
    one = _floats(offset)
    half = _floats(0.5)
    box_w = step("Add", [step("Sub", [x1, x0]), one])
    box_h = step("Add", [step("Sub", [y1, y0]), one])
    centre_x = step("Add", [step("Mul", [dx, box_w]), step("Add", [x0, step("Mul", [half, box_w])])])
    centre_y = step("Add", [step("Mul", [dy, box_h]), step("Add", [y0, step("Mul", [half, box_h])])])
    half_w = step("Mul", [half, step("Mul", [step("Exp", [dw]), box_w])])
    half_h = step("Mul", [half, step("Mul", [step("Exp", [dh]), box_h])])
    x0, x1 = step("Sub", [centre_x, half_w]), step("Add", [centre_x, half_w])
    y0, y1 = step("Sub", [centre_y, half_h]), step("Add", [centre_y, half_h])
    if bool(options["clip_before_nms"]):
        limit_w, limit_h = step("Sub", [image_w, one]), step("Sub", [image_h, one])
        x0, x1 = (_clamp(v, limit_w) for v in (x0, x1))
        y0, y1 = (_clamp(v, limit_h) for v in (y0, y1))
    wide = step("LessOrEqual", [min_w, step("Add", [step("Sub", [x1, x0]), one])])
    tall = step("LessOrEqual", [min_h, step("Add", [step("Sub", [y1, y0]), one])])
    big = step("Cast", [step("Squeeze", [step("And", [wide, tall]), _ints([2])])], {"to": _FLOAT})
    scores = step("Mul", [big, scores])  # OpenVINO's product: a small box's score is +-0
    boxes = step("Concat", [x0, y0, x1, y1], {"axis": 2})  # [N, P, 4]

    # the pre_nms_topn best of each image, NMS in that order, post_nms_topn kept
    keep = int(options["post_nms_topn"])
    image, kept_boxes, kept_scores = _ranked_nms(boxes, scores, None, int(options["pre_nms_topn"]), keep,
                                                 float(options["nms_thresh"]), offset)
    images = _dim(scores, 0)
    found = _dim(image, 0)
    size = step("Concat", [image_w, image_h, image_w, image_h], {"axis": 0})
    if bool(options["clip_after_nms"]):
        kept_boxes = _clamp(kept_boxes, size)
    if bool(options["normalize"]):
        kept_boxes = step("Div", [kept_boxes, size])

    # each kept box's row: its place among its image's kept boxes (NMS lists them image by image)
    image_ids = step("Range", [_ints(0), step("Squeeze", [images]), _ints(1)])
    earlier = step("Less", [image, step("Unsqueeze", [image_ids, _ints([0])])])  # [S, N]
    before = step("ReduceSum", [step("Cast", [earlier], {"to": _INT64}), _ints([0])], {"keepdims": 0})  # [N]
    image_flat = step("Squeeze", [image, _ints([1])])
    place = step("Sub", [step("Range", [_ints(0), step("Squeeze", [found]), _ints(1)]),
                         step("Gather", [before, image_flat], {"axis": 0})])
    targets = step("Concat", [image, step("Unsqueeze", [place, _ints([1])])], {"axis": 1})  # [S, 2]
    rois = step("Concat", [step("Cast", [image], {"to": _FLOAT}), kept_boxes], {"axis": 1})  # [S, 5]
    shape = step("Concat", [images, _ints([keep])], {"axis": 0})
    blank_rois = step("Expand", [_floats(0.0), step("Concat", [shape, _ints([5])], {"axis": 0})])
    table = step("ScatterND", [blank_rois, targets, rois])  # [N, post, 5]
    probabilities = step("ScatterND", [step("Expand", [_floats(0.0), shape]), targets, kept_scores])
    # the row after an image's last kept box (where it has fewer than post_nms_topn) marks the end
    counts = step("Sub", [step("Concat", [step("Slice", [before, _ints([1]), _ints([2**62]), _ints([0])]),
                                          found], {"axis": 0}), before])  # [N]
    end = step("Equal", [step("Unsqueeze", [step("Range", [_ints(0), _ints(keep), _ints(1)]), _ints([0])]),
                         step("Unsqueeze", [counts, _ints([1])])])  # [N, post]
    first = step("Where", [end, _floats(-1.0), step("Squeeze", [_column(table, 0), _ints([2])])])
    table = step("Concat", [step("Unsqueeze", [first, _ints([2])]),
                            step("Slice", [table, _ints([1]), _ints([5]), _ints([2])])], {"axis": 2})
    total = batch * keep if isinstance(batch, int) else -1  # OpenVINO's static dim where the batch is known
    outputs = [step("Reshape", [table, _ints([total, 5])]), step("Reshape", [probabilities, _ints([total])])]
    if out_dtype != ir.DataType.FLOAT:
        outputs = [step("Cast", [v], {"to": int(out_dtype)}) for v in outputs]
    built = make_op("Proposal", "Identity", [outputs[0]], {}, name)
    built._outputs.append(outputs[1])  # noqa: SLF001
    return built


def generate_proposals(im_info: NodeInput, anchors: NodeInput, deltas: NodeInput, scores: NodeInput,
                       min_size: float, nms_threshold: float, pre_nms_count: int, post_nms_count: int,
                       normalized: bool = True, nms_eta: float = 1.0, roi_num_type: str = "i64",
                       name: str | None = None) -> Node:
    """Region proposals of each image, as OpenVINO's GenerateProposals (opset 9): ``anchors``
    [H, W, A, 4] move by ``deltas`` [N, 4A, H, W] (their size's by at most log(1000 / 16)) and are
    clipped to the image of ``im_info`` [N, 3 or 4] (height, width, scale of the height, of the width:
    the height's where absent); those narrower or shorter than ``min_size`` times the scale take no
    part; of the ``pre_nms_count`` best ``scores`` [N, A, H, W], NMS (IoU above ``nms_threshold``)
    keeps up to ``post_nms_count``.  Outputs the kept boxes [S, 4] and scores [S], image after image,
    and the boxes per image [N] (``roi_num_type`` i32 or i64).  ``normalized=False``: pixel boxes,
    whose width and height count one more."""
    kind = choice(roi_num_type, ("i32", "i64"), "generate_proposals roi_num_type")
    if float(nms_eta) != 1.0:
        raise InputError(f"generate_proposals nms_eta {nms_eta}: adaptive NMS, which OpenVINO's CPU does not "
                         "run either; accepted: 1.0")
    for what, number in (("pre_nms_count", pre_nms_count), ("post_nms_count", post_nms_count)):
        if int(number) < 1:
            raise InputError(f"generate_proposals {what} {number}; accepted: a whole number of 1 or more")
    info, boxes, moves, probs = (value_of(v) for v in (im_info, anchors, deltas, scores))
    for what, value, rank in (("im_info", info, 2), ("anchors", boxes, 4), ("deltas", moves, 4),
                              ("scores", probs, 4)):
        if value.shape is not None and len(value.shape) != rank:
            raise InputError(f"generate_proposals takes {what} of rank {rank}, got rank {len(value.shape)}")
    out_dtype = probs.dtype or ir.DataType.FLOAT
    info, boxes, moves, probs = (v if v.dtype == ir.DataType.FLOAT else step("Cast", [v], {"to": _FLOAT})
                                 for v in (info, boxes, moves, probs))
    offset = 0.0 if bool(normalized) else 1.0
    one = _floats(offset)
    half = _floats(0.5)
    count = _dim(probs, 1)

    def column(index: int) -> ir.Value:  # [N, 1, 1] of each image's info
        return step("Unsqueeze", [step("Slice", [info, _ints([index]), _ints([index + 1]), _ints([1])]),
                                  _ints([2])])

    image_h, image_w = column(0), column(1)
    last = step("Min", [step("Sub", [_dim(info, 1), _ints([1])]), _ints([3])])
    scale_h = column(2)
    scale_w = step("Unsqueeze", [step("GatherElements", [info, step("Expand", [
        step("Reshape", [last, _ints([1, 1])]), step("Concat", [_dim(info, 0), _ints([1])], {"axis": 0})])],
        {"axis": 1}), _ints([2])])
    size = _floats([float(np.float32(min_size))])
    min_h, min_w = step("Mul", [size, scale_h]), step("Mul", [size, scale_w])

    # one row per (h, w, anchor) of each image, as the anchors lie
    scores_rows = step("Reshape", [step("Transpose", [probs], {"perm": [0, 2, 3, 1]}), _ints([0, -1])])
    moves = step("Reshape", [moves, step("Concat", [_ints([0]), count, _ints([4, -1])], {"axis": 0})])
    moves = step("Reshape", [step("Transpose", [moves], {"perm": [0, 3, 1, 2]}), _ints([0, -1, 4])])
    dx, dy, dw, dh = (_column(moves, i) for i in range(4))  # [N, P, 1]
    corners = step("Unsqueeze", [step("Reshape", [boxes, _ints([-1, 4])]), _ints([0])])  # [1, P, 4]
    x0, y0, x1, y1 = (_column(corners, i) for i in range(4))
    widest = _floats(float(np.float32(np.log(1000.0 / 16.0))))
    box_w = step("Add", [step("Sub", [x1, x0]), one])
    box_h = step("Add", [step("Sub", [y1, y0]), one])
    centre_x = step("Add", [step("Mul", [dx, box_w]), step("Add", [x0, step("Mul", [half, box_w])])])
    centre_y = step("Add", [step("Mul", [dy, box_h]), step("Add", [y0, step("Mul", [half, box_h])])])
    half_w = step("Mul", [half, step("Mul", [step("Exp", [step("Min", [dw, widest])]), box_w])])
    half_h = step("Mul", [half, step("Mul", [step("Exp", [step("Min", [dh, widest])]), box_h])])
    limit_w, limit_h = step("Sub", [image_w, one]), step("Sub", [image_h, one])
    x0 = _clamp(step("Sub", [centre_x, half_w]), limit_w)
    y0 = _clamp(step("Sub", [centre_y, half_h]), limit_h)
    x1 = _clamp(step("Sub", [step("Add", [centre_x, half_w]), one]), limit_w)
    y1 = _clamp(step("Sub", [step("Add", [centre_y, half_h]), one]), limit_h)
    wide = step("LessOrEqual", [min_w, step("Add", [step("Sub", [x1, x0]), one])])
    tall = step("LessOrEqual", [min_h, step("Add", [step("Sub", [y1, y0]), one])])
    alive = step("Squeeze", [step("And", [wide, tall]), _ints([2])])  # [N, P]
    refined = step("Concat", [x0, y0, x1, y1], {"axis": 2})

    image, kept_boxes, kept_scores = _ranked_nms(refined, scores_rows, alive, int(pre_nms_count),
                                                 int(post_nms_count), float(nms_threshold), offset)
    image_ids = step("Unsqueeze", [step("Range", [_ints(0), step("Squeeze", [_dim(probs, 0)]), _ints(1)]),
                                   _ints([0])])
    matches = step("Cast", [step("Equal", [image, image_ids])], {"to": _INT64})  # [S, N]
    per_image = step("ReduceSum", [matches, _ints([0])], {"keepdims": 0})
    outputs = [kept_boxes, kept_scores]
    if out_dtype != ir.DataType.FLOAT:
        outputs = [step("Cast", [v], {"to": int(out_dtype)}) for v in outputs]
    built = make_op("GenerateProposals", "Identity", [outputs[0]], {}, name)
    built._outputs.extend([outputs[1], step("Cast", [per_image], {"to": int(to_ir_dtype(kind))})])  # noqa: SLF001
    return settle_shape(built, 2, [dim_at(info, 0)])  # one count per image


def _ranked_nms(boxes: ir.Value, scores: ir.Value, alive: ir.Value | None, pre_nms: int, post_nms: int,
                threshold: float, offset: float) -> tuple[ir.Value, ir.Value, ir.Value]:
    """OpenVINO's CPU NMS of region proposals: each image's ``pre_nms`` best ``scores`` [N, P] (of
    ``boxes`` [N, P, 4]; where ``alive`` [N, P] is given, only its true ones take part), in that
    order (ONNX's NMS is handed strictly decreasing ranks), an IoU above ``threshold`` (pixel boxes
    one wider where ``offset`` is 1) suppressing, up to ``post_nms`` kept.  The kept boxes' images
    [S, 1], corners [S, 4] and scores [S], image by image, best first."""
    k = step("Min", [_dim(scores, 1), _ints([pre_nms])])
    best = make_op("TopK", "TopK", [scores, k], {"axis": 1, "largest": 1, "sorted": 1}, None, num_outputs=2)
    top_scores, top_index = best._outputs  # noqa: SLF001 - [N, k]
    top_index = step("Unsqueeze", [top_index, _ints([2])])
    top_boxes = step("GatherND", [boxes, top_index], {"batch_dims": 1})
    nms_boxes = step("Add", [top_boxes, _floats([0.0, 0.0, offset, offset])])
    ranks = step("Cast", [step("Range", [step("Squeeze", [k]), _ints(0), _ints(-1)])], {"to": _FLOAT})
    ranks = step("Expand", [step("Reshape", [ranks, _ints([1, -1])]), step("Shape", [top_scores])])
    least: list[ir.Value] = []
    if alive is not None:  # the boxes that take no part rank 0, below the score threshold
        ranks = step("Where", [step("GatherND", [alive, top_index], {"batch_dims": 1}), ranks, _floats(0.0)])
        least = [_floats([0.5])]
    ranks = step("Unsqueeze", [ranks, _ints([1])])  # [N, 1, k]: one class
    selected = step("NonMaxSuppression", [nms_boxes, ranks, _ints([post_nms]),
                                          _floats([float(np.float32(threshold))]), *least], {})
    image = step("Slice", [selected, _ints([0]), _ints([1]), _ints([1])])  # [S, 1]
    box = step("Slice", [selected, _ints([2]), _ints([3]), _ints([1])])
    where = step("Concat", [image, box], {"axis": 1})
    return image, step("GatherND", [top_boxes, where]), step("GatherND", [top_scores, where])


def _options(attrs: dict[str, Any]) -> dict[str, Any]:
    """``attrs`` checked, with the optional ones' defaults."""
    if not isinstance(attrs, dict):
        raise InputError(f"proposal takes its attributes as a dict, got {type(attrs).__name__}")
    missing = [key for key in _REQUIRED if key not in attrs]
    unknown = sorted(set(attrs) - set(_REQUIRED) - set(_OPTIONAL))
    if missing or unknown:
        raise InputError(f"proposal attributes: missing {missing}, unknown {unknown}; required: "
                         f"{', '.join(_REQUIRED)}; optional: {', '.join(_OPTIONAL)}")
    options = {**_OPTIONAL, **attrs}
    options["framework"] = str(options["framework"]).lower()
    if options["framework"] not in _FRAMEWORKS:
        raise InputError(f"proposal framework {attrs['framework']!r}; accepted: \"\" (Caffe's rules) or "
                         "\"tensorflow\"")
    if options["framework"] == "caffe":
        options["framework"] = ""
    for key in ("base_size", "pre_nms_topn", "post_nms_topn", "feat_stride"):
        if int(options[key]) < 1:
            raise InputError(f"proposal {key} {options[key]}: accepted: a whole number of 1 or more")
    if not len(options["ratio"]) or not len(options["scale"]):
        raise InputError("proposal needs at least one ratio and one scale")
    return options


def _anchors(options: dict[str, Any]) -> np.ndarray:
    """[A, 4] (x1, y1, x2, y2) about the origin, ratio by ratio and scale by scale within each, in
    float32 as OpenVINO's CPU computes them (Caffe's rules round the widths and heights, half away
    from zero; TensorFlow's centre them on the origin)."""
    tensorflow = options["framework"] == "tensorflow"
    offset = _F32(0.0 if tensorflow else 1.0)
    base = int(options["base_size"])
    area = _F32(base * base)
    centre = _F32(0.5) * (_F32(base) - offset)
    found = []
    for ratio in np.asarray(options["ratio"], np.float32).reshape(-1):
        width = np.sqrt(area / ratio, dtype=np.float32)
        if not tensorflow:
            width = _round_away(width)
        height = width * ratio
        if not tensorflow:
            height = _round_away(height)
        for scale in np.asarray(options["scale"], np.float32).reshape(-1):
            half_w = _F32(0.5) * (width * scale - offset)
            half_h = _F32(0.5) * (height * scale - offset)
            box = np.array([centre - half_w, centre - half_h, centre + half_w, centre + half_h], np.float32)
            if tensorflow:
                box = box - _F32(base) * _F32(0.5)
            found.append(box)
    return np.stack(found).astype(np.float32)


def _round_away(x: np.float32) -> np.float32:
    """``roundf``: to nearest, halves away from zero (in double, where adding the half is exact)."""
    value = float(x)
    return _F32(math.copysign(math.floor(abs(value) + 0.5), value))
