"""OpenVINO's PriorBox and PriorBoxClustered: SSD's anchor boxes, which depend only on the feature
map's and the image's sizes.  Both are computed here, as OpenVINO's reference does, when the sizes
are constant; the op is that constant, f32 [2, 4 * H * W * priors]: row 0 each prior's (xmin, ymin,
xmax, ymax) over the image's size, row 1 the variances.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import onnx
import onnx_ir as ir
from onnx.reference import ReferenceEvaluator

from inferplex._opsets.build import NodeInput, as_op, constant_data, value_of
from inferplex.api.nodes import Node
from inferplex.errors import InputError, InputTypeError

__all__ = ["prior_box", "prior_box_clustered"]


def _fold(value: ir.Value, depth: int = 0) -> np.ndarray | None:
    """The data of ``value`` where it follows from constants and static shapes alone (a feature
    map's size taken with ShapeOf and sliced, as OpenVINO's IRs give it); None otherwise."""
    if value.const_value is not None:
        return value.const_value.numpy()
    node = value.producer()
    if node is None or depth > 12 or node.domain not in ("", "ai.onnx"):
        return None
    if node.op_type == "Shape":
        source = node.inputs[0]
        dims = [] if source is None or source.shape is None else list(source.shape)
        if source is None or source.shape is None or not all(isinstance(d, int) for d in dims):
            return None
        start = node.attributes["start"].as_int() if "start" in node.attributes else 0
        end = node.attributes["end"].as_int() if "end" in node.attributes else len(dims)
        return np.asarray(dims[start:end] if end != 0 else [], np.int64)
    inputs = [None if item is None else _fold(item, depth + 1) for item in node.inputs]
    if any(data is None and item is not None for data, item in zip(inputs, node.inputs, strict=True)):
        return None
    names = [f"in{i}" if data is not None else "" for i, data in enumerate(inputs)]
    feeds = {name: data for name, data in zip(names, inputs, strict=True) if name}
    try:
        proto = onnx.helper.make_node(node.op_type, names, [f"out{i}" for i in range(len(node.outputs))],
                                      **{key: attr.value for key, attr in node.attributes.items()})
        results = ReferenceEvaluator(proto).run(None, feeds)
    except Exception:  # noqa: BLE001 - an op the reference cannot fold: the size is not known here
        return None
    found = list(results.values()) if isinstance(results, dict) else list(results)
    return np.asarray(found[list(node.outputs).index(value)])


def _sizes(item: NodeInput, what: str) -> tuple[int, int]:
    data = constant_data(item)
    if data is None:
        data = _fold(value_of(item))
    if data is None:
        raise InputError(f"{what} must be constant or follow from static shapes ([height, width]): the "
                         "boxes are computed when the model is built")
    flat = np.asarray(data).reshape(-1)
    if flat.size != 2:
        raise InputError(f"{what} must be [height, width], got {flat.tolist()}")
    return int(flat[0]), int(flat[1])


def _floats(attrs: dict[str, Any], key: str) -> list[float]:
    return [float(v) for v in np.asarray(attrs.get(key, []), np.float64).reshape(-1)]


def _checked(attrs: Any, what: str, known: set[str]) -> dict[str, Any]:
    if not isinstance(attrs, dict):
        raise InputTypeError(f"{what} takes its attributes as a dict, not {type(attrs).__name__}")
    unknown = sorted(set(attrs) - known)
    if unknown:
        raise InputError(f"{what} attributes {unknown}; accepted: {', '.join(sorted(known))}")
    if "offset" not in attrs:
        raise InputError(f"{what} needs the attribute 'offset'")
    return attrs


def _emit(table: np.ndarray, variances: list[float], name: str | None, type_name: str) -> Node:
    boxes = table.reshape(-1).astype(np.float32)
    variance = np.asarray(variances or [0.1], np.float32)
    if variance.size not in (1, 4):
        raise InputError(f"{type_name} variance of {variance.size} values; accepted: 1 or 4")
    rows = np.stack([boxes, np.tile(variance, boxes.size // variance.size)])
    return as_op(type_name, value_of(rows), name)


_BOX_KEYS = {"offset", "min_size", "max_size", "aspect_ratio", "flip", "clip", "step", "variance",
             "scale_all_sizes", "fixed_ratio", "fixed_size", "density", "min_max_aspect_ratios_order"}


def prior_box(layer_shape: NodeInput, image_shape: NodeInput, attrs: dict, name: str | None = None) -> Node:
    """SSD's prior boxes around each point of a feature map of ``layer_shape`` [H, W] over an image
    of ``image_shape`` [height, width]: squares of each ``min_size`` (and of sqrt(min * max)), boxes
    of each ``aspect_ratio`` (with ``flip``, its inverse too); ``fixed_size``, ``fixed_ratio`` and
    ``density`` are refused."""
    a = _checked(attrs, "prior_box", _BOX_KEYS)
    if any(_floats(a, key) for key in ("fixed_size", "fixed_ratio", "density")):
        raise InputError("prior_box with fixed_size, fixed_ratio or density is not built here; accepted: "
                         "min_size, max_size and aspect_ratio boxes")
    h, w = _sizes(layer_shape, "prior_box layer_shape")
    ih, iw = _sizes(image_shape, "prior_box image_shape")
    flip, clip = bool(a.get("flip", False)), bool(a.get("clip", False))
    scale_all = bool(a.get("scale_all_sizes", True))
    order = bool(a.get("min_max_aspect_ratios_order", True))
    ratios = [1.0]
    for ratio in _floats(a, "aspect_ratio"):
        if all(abs(ratio - seen) >= 1e-6 for seen in ratios):
            ratios.append(ratio)
            if flip:
                ratios.append(1.0 / ratio)
    step = float(a.get("step", 0.0))
    min_sizes, max_sizes = _floats(a, "min_size"), _floats(a, "max_size")
    if not scale_all:  # mxnet's prior boxes: sizes and step relative to the image
        step = ih / h if step == -1 else step * ih
        min_sizes = [size * ih for size in min_sizes]
    step_x, step_y = (iw / w, ih / h) if step == 0 else (step, step)
    offset = float(a["offset"])
    boxes: list[list[float]] = []
    for row in range(h):
        for col in range(w):
            if step == 0:
                cx, cy = (col + 0.5) * step_x, (row + 0.5) * step_y
            else:
                cx, cy = (offset + col) * step, (offset + row) * step
            for index, size in enumerate(min_sizes):
                shapes = [(size / 2, size / 2)]
                big = [(math.sqrt(size * max_sizes[index]) / 2,) * 2] if index < len(max_sizes) else []
                ratioed: list[tuple[float, float]] = []
                if scale_all or index == len(min_sizes) - 1:
                    base = min_sizes[index if scale_all else 0]
                    ratioed = [(base / 2 * math.sqrt(r), base / 2 / math.sqrt(r)) for r in ratios
                               if abs(r - 1.0) >= 1e-6]
                shapes += big + ratioed if order else ratioed + big
                boxes += [[(cx - bw) / iw, (cy - bh) / ih, (cx + bw) / iw, (cy + bh) / ih]
                          for bw, bh in shapes]
    table = np.asarray(boxes, np.float32).reshape(-1, 4)
    if clip:
        table = np.clip(table, 0.0, 1.0)
    return _emit(table, _floats(a, "variance"), name, "PriorBox")


_CLUSTERED_KEYS = {"width", "height", "widths", "heights", "clip", "step_w", "step_h", "step_widths",
                   "step_heights", "step", "offset", "variance"}


def prior_box_clustered(output_size: NodeInput, image_size: NodeInput, attrs: dict,
                        name: str | None = None) -> Node:
    """Prior boxes of the given ``width`` and ``height`` lists (pixels; ``widths`` and ``heights`` too)
    around each point of a feature map of ``output_size`` [H, W] over an image of ``image_size``
    [height, width]; ``step_w`` and ``step_h`` (``step_widths``, ``step_heights``) or ``step``
    between points, else the image's size over the map's."""
    a = _checked(attrs, "prior_box_clustered", _CLUSTERED_KEYS)
    widths = _floats(a, "width") or _floats(a, "widths")
    heights = _floats(a, "height") or _floats(a, "heights")
    if len(widths) != len(heights):
        raise InputError(f"prior_box_clustered needs as many widths as heights, got {len(widths)} and "
                         f"{len(heights)}")
    h, w = _sizes(output_size, "prior_box_clustered output_size")
    ih, iw = _sizes(image_size, "prior_box_clustered image_size")
    step = float(a.get("step", 0.0))
    step_w = float(a.get("step_w", a.get("step_widths", 0.0))) or step
    step_h = float(a.get("step_h", a.get("step_heights", 0.0))) or step
    if step_w == 0 and step_h == 0:
        step_w, step_h = iw / w, ih / h
    offset = float(a["offset"])
    cx = ((np.arange(w) + offset) * step_w)[None, :, None]
    cy = ((np.arange(h) + offset) * step_h)[:, None, None]
    bw, bh = np.asarray(widths)[None, None, :] / 2, np.asarray(heights)[None, None, :] / 2
    table = np.stack(np.broadcast_arrays((cx - bw) / iw, (cy - bh) / ih, (cx + bw) / iw, (cy + bh) / ih), -1)
    if bool(a.get("clip", True)):
        table = np.clip(table, 0.0, 1.0)
    return _emit(table, _floats(a, "variance"), name, "PriorBoxClustered")
