"""OpenVINO's detection ops: NonMaxSuppression, ROIAlign, ROIPooling, ReorgYolo and RegionYolo as the
ONNX ops that compute the same numbers (NonMaxSuppression, RoiAlign, MaxRoiPool, SpaceToDepth,
Sigmoid and Softmax); PriorBox and PriorBoxClustered, whose output depends only on shapes, are in
:mod:`inferplex._opsets.priors`.

DetectionOutput (opsets 1 and 8) has no ONNX equivalent: it is the ``org.openvinotoolkit`` domain's
DetectionOutput, which OpenVINO's ONNX reader makes a DetectionOutput-8 of, so a model holding it
runs on the CPU device's OpenVINO engine (not on ONNX Runtime, nor on the GPU).

NonMaxSuppression gives OpenVINO's three outputs: ``selected_indices`` [N, 3] (batch, class, box)
and ``selected_scores`` [N, 3] (batch, class, score) of the N boxes kept, as OpenVINO's CPU gives
them (no -1 rows), and ``valid_outputs`` [1] = N.  Soft NMS (a ``soft_nms_sigma`` other than 0)
lowers the scores of overlapping boxes instead of dropping them, which ONNX's NonMaxSuppression
cannot do: it is refused.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx_ir as ir

from inferplex._opsets.build import (
    NodeInput,
    choice,
    constant_data,
    int64,
    make_custom,
    make_op,
    static_dims,
    step,
    value_of,
)
from inferplex._opsets.build import ints as _ints
from inferplex._opsets.soft_nms import soft_selection
from inferplex.api.nodes import Node, to_ir_dtype
from inferplex.errors import InputError

__all__ = ["detection_output", "non_max_suppression", "region_yolo", "reorg_yolo", "roi_align", "roi_pooling"]

OPENVINO_DOMAIN = "org.openvinotoolkit"
"""The ONNX domain of the ops OpenVINO's ONNX reader takes as its own (DetectionOutput,
DeformableConv2D, ...): a model holding them runs on the CPU device's OpenVINO engine only."""

_INDEX_TYPES = ("i32", "i64")
_ENCODINGS = {"corner": 0, "center": 1}
_ALIGNED = {"asymmetric": ("output_half_pixel", 0.0), "half_pixel_for_nn": ("half_pixel", 0.0),
            "half_pixel": ("half_pixel", 0.5)}
"""OpenVINO's aligned_mode -> ONNX's coordinate_transformation_mode and what OpenVINO adds to a
region's corners before scaling them (``(x + 0.5) * spatial_scale - 0.5`` in half_pixel)."""
_FLOAT = int(ir.DataType.FLOAT)


def threshold(item: NodeInput) -> ir.Value:
    """A threshold as ONNX's NonMaxSuppression takes it: f32 of one element."""
    data = constant_data(item)
    if data is not None:
        return value_of(np.asarray(data, np.float32).reshape([1]))
    return step("Reshape", [step("Cast", [value_of(item)], {"to": _FLOAT}), _ints([1])])


def non_max_suppression(boxes: NodeInput, scores: NodeInput, max_output_boxes_per_class: NodeInput = None,
                        iou_threshold: NodeInput = None, score_threshold: NodeInput = None,
                        soft_nms_sigma: NodeInput = None, box_encoding: Any = "corner",
                        sort_result_descending: Any = True, output_type: Any = "i64",
                        name: str | None = None) -> Node:
    """Greedy non-maximum suppression of ``boxes`` [batch, boxes, 4] by ``scores`` [batch, classes,
    boxes]: outputs ``selected_indices`` [N, 3], ``selected_scores`` [N, 3] and ``valid_outputs``.

    ``box_encoding`` ``"corner"`` (y1, x1, y2, x2) or ``"center"`` (x, y, width, height); with
    ``sort_result_descending`` the boxes kept are ordered by score over every batch and class, else
    by batch, class, then score.  The opset 1 to 4 forms (no ``soft_nms_sigma``: ``box_encoding``
    sixth) are taken too."""
    if isinstance(soft_nms_sigma, str):  # opsets 1 to 4: box_encoding, sort_result_descending[, output_type]
        rest = [box_encoding, sort_result_descending, output_type]
        box_encoding, soft_nms_sigma = soft_nms_sigma, None
        sort_result_descending = rest[0] if isinstance(rest[0], bool) else True
        output_type = rest[1] if isinstance(rest[1], str) else "i64"
        if output_type not in _INDEX_TYPES:  # opset 1: the eighth argument is the name
            name, output_type = output_type, "i64"
        elif name is None and isinstance(rest[2], str) and rest[2] not in _INDEX_TYPES:
            name = rest[2]
    encoding = choice(box_encoding, _ENCODINGS, "non_max_suppression box_encoding")
    kind = choice(output_type, _INDEX_TYPES, "non_max_suppression output_type")
    sigma = 0.0
    if soft_nms_sigma is not None:
        given = constant_data(soft_nms_sigma)
        if given is None or np.size(given) != 1:
            raise InputError("non_max_suppression takes soft_nms_sigma as one constant number (0: hard NMS, "
                             "above 0: soft NMS)")
        sigma = float(np.asarray(given).reshape(-1)[0])
    box_values = value_of(boxes)
    score_type = int(box_values.dtype or ir.DataType.FLOAT)
    as_float = [v if v.dtype == ir.DataType.FLOAT else step("Cast", [v], {"to": _FLOAT})
                for v in (box_values, value_of(scores))]
    limit = _ints([0]) if max_output_boxes_per_class is None else step(
        "Reshape", [int64(max_output_boxes_per_class), _ints([1])])
    iou = threshold(0.0 if iou_threshold is None else iou_threshold)
    least = threshold(0.0 if score_threshold is None else score_threshold)
    if sigma > 0:  # soft NMS, which ONNX's NonMaxSuppression has not (see soft_nms)
        selected, picked = soft_selection(as_float[0], as_float[1], limit, least, sigma, encoding == "center")
        bound = selection_bound(box_values, value_of(scores), max_output_boxes_per_class)
        return selection_outputs("NonMaxSuppression", selected, picked, bool(sort_result_descending), kind,
                                 score_type, bound, name)
    fixed = constant_data(limit)
    # OpenVINO's CPU fails on ONNX's NonMaxSuppression of a limit of 0: at least 1, rows dropped after
    positive = fixed is not None and bool(np.all(fixed > 0))
    clamped = limit if positive else step("Max", [limit, _ints([1])])
    selected = step("NonMaxSuppression", [*as_float, clamped, iou, least],
                    {"center_point_box": _ENCODINGS[encoding]})
    if not positive:
        rows = step("Where", [step("Greater", [limit, _ints([0])]), step("Shape", [selected], {"end": 1}),
                              _ints([0])])
        selected = step("Slice", [selected, _ints([0]), rows, _ints([0])])
    picked = step("GatherND", [as_float[1], selected])
    bound = selection_bound(box_values, value_of(scores), max_output_boxes_per_class)
    return selection_outputs("NonMaxSuppression", selected, picked, bool(sort_result_descending), kind,
                             score_type, bound, name)


def selection_outputs(type_name: str, selected: ir.Value, picked: ir.Value, sort_result_descending: bool,
                      kind: str, score_type: int, bound: int | None, name: str | None) -> Node:
    """OpenVINO's NMS outputs from the ``selected`` boxes [M, 3] (image, class, box; int64, by image,
    class, then score) and their scores [M] (f32): ``selected_indices`` [M, 3] (``kind``: i32 or
    i64), ``selected_scores`` [M, 3] (image, class, score; ``score_type``) and ``valid_outputs``
    [1], with ``sort_result_descending`` ordered by score over every image and class.  ``bound``:
    the most rows M can have (:func:`selection_bound`), shown as OpenVINO shows it, or None."""
    if sort_result_descending:  # a last -inf keeps TopK's k above 0 (no box kept)
        count = step("Shape", [picked])
        padded = step("Concat", [picked, value_of(np.array([-np.inf], np.float32))], {"axis": 0})
        order = make_op("TopK", "TopK", [padded, step("Add", [count, _ints([1])])],
                        {"axis": 0, "largest": 1, "sorted": 1}, None, num_outputs=2)
        order_index = step("Slice", [order._outputs[1], _ints([0]), count, _ints([0])])  # noqa: SLF001
        selected = step("Gather", [selected, order_index], {"axis": 0})
        picked = step("Gather", [picked, order_index], {"axis": 0})
    indices = make_op(type_name, "Cast", [selected], {"to": int(to_ir_dtype(kind))}, name)
    where = step("Cast", [step("Slice", [selected, _ints([0]), _ints([2]), _ints([1])])], {"to": _FLOAT})
    scored = step("Concat", [where, step("Unsqueeze", [picked, _ints([1])])], {"axis": 1})
    if score_type != _FLOAT:
        scored = step("Cast", [scored], {"to": score_type})
    valid = step("Cast", [step("Shape", [selected], {"start": 0, "end": 1})], {"to": int(to_ir_dtype(kind))})
    indices._outputs.extend([scored, valid])  # noqa: SLF001
    rows = None if bound is None else bound if bound == 0 else f"..{bound}"  # OpenVINO's "..K" range
    for value, dims in ((indices._outputs[0], [rows, 3]), (scored, [rows, 3]), (valid, [1])):  # noqa: SLF001
        value.shape = ir.Shape(dims)
    return indices


def selection_bound(boxes: ir.Value, scores: ir.Value, limit: NodeInput) -> int | None:
    """The most boxes an NMS keeps, as OpenVINO bounds its outputs' rows: images x classes x the
    smaller of the boxes and ``limit`` (a constant; None: 0), where all are known; else None."""
    count = constant_data(limit) if limit is not None else np.zeros(1, np.int64)
    dims = [*(boxes.shape or [None, None])[:2], *(scores.shape or [None, None])[1:2]]
    if count is None or np.size(count) != 1 or not all(isinstance(d, int) for d in dims):
        return None
    images, boxes_count, classes = dims
    return int(images) * int(classes) * min(int(boxes_count), max(int(np.asarray(count).reshape(-1)[0]), 0))


def roi_align(data: NodeInput, rois: NodeInput, batch_indices: NodeInput, pooled_h: int, pooled_w: int,
              sampling_ratio: int, spatial_scale: float, mode: str, aligned_mode: str | None = "asymmetric",
              name: str | None = None) -> Node:
    """Regions ``rois`` [N, 4] (x1, y1, x2, y2) of ``data`` [batch, C, H, W] (image
    ``batch_indices[n]``) pooled to [N, C, pooled_h, pooled_w] by the average (``mode="avg"``) or
    maximum (``"max"``) of bilinear samples; ``aligned_mode`` ``"asymmetric"`` (opset 3) or
    ``"half_pixel"`` (pixel centres shifted by half a pixel)."""
    kind = str(mode).lower()
    if kind not in ("avg", "max"):
        raise InputError(f"roi_align mode {mode!r}; accepted: avg, max")
    aligned = str(aligned_mode or "asymmetric").lower()
    if aligned not in _ALIGNED:
        raise InputError(f"roi_align aligned_mode {aligned_mode!r}; accepted: {', '.join(_ALIGNED)}")
    if kind == "max":
        raise InputError("roi_align mode 'max' takes the largest bilinear sample, ONNX's RoiAlign the "
                         "largest weighted corner; accepted: avg")
    transform, shift = _ALIGNED[aligned]
    attrs = {"coordinate_transformation_mode": transform, "mode": kind,
             "output_height": int(pooled_h), "output_width": int(pooled_w),
             "sampling_ratio": int(sampling_ratio), "spatial_scale": float(spatial_scale)}
    x = value_of(data)
    boxes = value_of(rois, x.dtype)
    if shift:
        boxes = step("Add", [boxes, value_of(np.asarray(shift, (x.dtype or ir.DataType.FLOAT).numpy()))])
    return make_op("ROIAlign", "RoiAlign", [x, boxes, int64(batch_indices)], attrs, name)


def roi_pooling(input: NodeInput, coords: NodeInput, output_roi: Sequence[int] | None = None,
                spatial_scale: Any = None, method: str = "max", name: str | None = None, *,
                output_size: Sequence[int] | None = None) -> Node:
    """Regions ``coords`` [N, 5] (batch index, x1, y1, x2, y2) of ``input`` [batch, C, H, W] max-pooled
    to [N, C, *output_roi] (``output_size`` its other name)."""
    size = output_roi if output_roi is not None else output_size
    if size is None or len(list(size)) != 2:
        raise InputError(f"roi_pooling needs output_roi (or output_size) [height, width], got {size!r}")
    if spatial_scale is None:
        raise InputError("roi_pooling needs spatial_scale (the ratio of input size to image size)")
    if str(method).lower() != "max":
        raise InputError(f"roi_pooling method {method!r}: bilinear pooling has no ONNX equivalent here; "
                         "accepted: max")
    x = value_of(input)
    return make_op("ROIPooling", "MaxRoiPool", [x, value_of(coords, x.dtype)],
                   {"pooled_shape": [int(v) for v in size], "spatial_scale": float(spatial_scale)}, name)


def reorg_yolo(input: NodeInput, stride: Sequence[int] | int, name: str | None = None) -> Node:
    """YOLOv2's reorganisation of ``input`` [N, C, H, W] into [N, C * s * s, H / s, W / s] (Darknet's
    reorg, which reads the data as [N, C / (s * s), H * s, W * s])."""
    strides = [int(stride)] if isinstance(stride, int | np.integer) else [int(v) for v in stride]
    if not strides or strides[0] < 1 or any(v != strides[0] for v in strides):
        raise InputError(f"reorg_yolo stride {stride!r}; accepted: one positive stride (or equal ones)")
    s = strides[0]
    x = value_of(input)
    n, c, h, w = _four_dims(x, "reorg_yolo")
    if h % s or w % s or c % (s * s):
        raise InputError(f"reorg_yolo needs H and W divisible by the stride {s} and C by its square, "
                         f"got [{n},{c},{h},{w}]")
    # OpenVINO reads the data as [N, C / s², H * s, W * s], moves each s-by-s tile into channels and
    # writes the result as [N, C * s², H / s, W / s]
    tiles = step("Reshape", [x, _ints([n, c // (s * s), h * s, w * s])])
    moved = step("SpaceToDepth", [tiles], {"blocksize": s})
    return make_op("ReorgYolo", "Reshape", [moved, _ints([n, c * s * s, h // s, w // s])], {}, name)


def _four_dims(value: ir.Value, what: str) -> list[int]:
    dims = static_dims(value, what)
    if len(dims) != 4:
        raise InputError(f"{what} needs an input of rank 4 [N, C, H, W], got rank {len(dims)}")
    return dims


def region_yolo(input: NodeInput, coords: int, classes: int, num: int, do_softmax: bool,
                mask: Sequence[int], axis: int, end_axis: int, anchors: Sequence[float] | None = None,
                name: str | None = None) -> Node:
    """YOLO's region layer on ``input`` [N, regions * (coords + 1 + classes), H, W]: sigmoid of each
    region's x, y and confidence, softmax (``do_softmax``, ``num`` regions, the output flattened
    from ``axis`` to ``end_axis``) or sigmoid (``len(mask)`` regions) of its class scores."""
    x = value_of(input)
    n, c, h, w = _four_dims(x, "region_yolo")
    regions = int(num) if do_softmax else len(list(mask))
    entry = int(coords) + 1 + int(classes)
    if regions * entry != c:
        raise InputError(f"region_yolo needs {regions} regions of {entry} channels (coords + 1 + classes), "
                         f"got {c} channels")
    split = step("Reshape", [x, _ints([n, regions, entry, h, w])])
    xy = step("Sigmoid", [_part(split, 0, 2)])
    wh = _part(split, 2, int(coords))
    confidence = step("Sigmoid", [_part(split, int(coords), int(coords) + 1)])
    scores = _part(split, int(coords) + 1, entry)
    scores = step("Softmax", [scores], {"axis": 2}) if do_softmax else step("Sigmoid", [scores])
    joined = step("Concat", [xy, wh, confidence, scores], {"axis": 2})
    dims = [n, c, h, w]
    if do_softmax:
        first, last = int(axis) % 4, int(end_axis) % 4
        dims = [*dims[:first], int(np.prod(dims[first:last + 1])), *dims[last + 1:]]
    return make_op("RegionYolo", "Reshape", [joined, _ints(dims)], {}, name)


def _part(value: ir.Value, begin: int, end: int) -> ir.Value:
    return step("Slice", [value, _ints([begin]), _ints([end]), _ints([2])])


_DETECTION_DEFAULTS: dict[str, Any] = {
    "background_label_id": 0, "top_k": -1, "variance_encoded_in_target": False,
    "code_type": "caffe.PriorBoxParameter.CORNER", "share_location": True, "confidence_threshold": 0.0,
    "clip_after_nms": False, "clip_before_nms": False, "decrease_label_id": False, "normalized": False,
    "input_height": 1, "input_width": 1, "objectness_score": 0.0}
"""DetectionOutput's optional attributes and OpenVINO's defaults for them."""
_CODE_TYPES = ("CORNER", "CENTER_SIZE")


def detection_output(box_logits: NodeInput, class_preds: NodeInput, proposals: NodeInput,
                     attrs: dict[str, Any], aux_class_preds: NodeInput = None,
                     aux_box_preds: NodeInput = None,
                     name: str | None = None) -> Node:
    """The boxes kept after decoding ``box_logits`` [N, priors * loc classes * 4] against the
    ``proposals`` (priors) and NMS on the ``class_preds`` [N, priors * classes] scores, as
    [1, 1, boxes, 7] rows (image, label, score, x_min, y_min, x_max, y_max).  ``attrs`` as
    OpenVINO's: ``keep_top_k`` and ``nms_threshold`` required, ``num_classes`` (opset 1) checked
    against the inputs' dims; ``aux_class_preds`` and ``aux_box_preds`` come together."""
    options = dict(attrs)
    known = {*_DETECTION_DEFAULTS, "keep_top_k", "nms_threshold", "num_classes"}
    unknown, missing = set(options) - known, {"keep_top_k", "nms_threshold"} - set(options)
    if unknown or missing:
        raise InputError(f"detection_output attrs: unknown {sorted(unknown)}, missing {sorted(missing)}; "
                         f"needs keep_top_k and nms_threshold, may have num_classes, "
                         f"{', '.join(_DETECTION_DEFAULTS)}")
    if (aux_class_preds is None) != (aux_box_preds is None):
        raise InputError("detection_output takes aux_class_preds and aux_box_preds together (or neither)")
    values = {**_DETECTION_DEFAULTS, **options}
    code = str(values["code_type"]).removeprefix("caffe.PriorBoxParameter.")
    if code not in _CODE_TYPES:
        raise InputError(f"detection_output code_type {values['code_type']!r}; accepted: "
                         f"{', '.join('caffe.PriorBoxParameter.' + c for c in _CODE_TYPES)}")
    keep = [int(k) for k in np.asarray(values["keep_top_k"]).reshape(-1)]
    if len(keep) != 1:
        raise InputError(f"detection_output keep_top_k {keep}: one number (OpenVINO's CPU keeps one)")
    flags = ("variance_encoded_in_target", "share_location", "clip_after_nms", "clip_before_nms",
             "decrease_label_id", "normalized")
    onnx_attrs: dict[str, Any] = {
        **{key: int(bool(values[key])) for key in flags},
        **{key: int(values[key]) for key in ("background_label_id", "top_k", "input_height", "input_width")},
        **{key: float(values[key]) for key in ("nms_threshold", "confidence_threshold", "objectness_score")},
        "keep_top_k": keep[0], "code_type": "caffe.PriorBoxParameter." + code}
    inputs = [value_of(v) for v in (box_logits, class_preds, proposals)]
    if aux_class_preds is not None:
        inputs += [value_of(aux_class_preds), value_of(aux_box_preds)]
    count = _detections(inputs, values, keep[0])
    dtype = inputs[0].dtype or ir.DataType.FLOAT
    return make_custom("DetectionOutput", OPENVINO_DOMAIN, "DetectionOutput", inputs, onnx_attrs, name,
                       [(dtype, [1, 1, count, 7])])


def _detections(inputs: list[ir.Value], values: dict[str, Any], keep: int) -> int | None:
    """The number of output rows (OpenVINO's DetectionOutput shape rule); None where a dim it
    depends on is dynamic."""
    dims = [[d if isinstance(d, int) else None for d in (v.shape or [])] for v in inputs[:3]]
    if any(len(d) != n for d, n in zip(dims, (2, 2, 3), strict=True)):
        raise InputError("detection_output takes box_logits and class_preds of rank 2 and proposals of "
                         "rank 3")
    batch, scores, prior_values = dims[0][0], dims[1][1], dims[2][2]
    if None in (batch, scores, prior_values):
        return None
    assert batch is not None and scores is not None and prior_values is not None
    priors = prior_values // (4 if values["normalized"] else 5)
    if not priors or scores % priors:
        raise InputError(f"detection_output: class_preds of {scores} scores per image do not divide among "
                         f"{priors} priors")
    classes = scores // priors
    if "num_classes" in values and int(values["num_classes"]) != classes:
        raise InputError(f"detection_output num_classes {values['num_classes']}: the inputs have {classes} "
                         f"({scores} scores for {priors} priors)")
    if keep > 0:
        return batch * keep
    top = int(values["top_k"])
    return batch * (top if top > 0 else priors) * classes
