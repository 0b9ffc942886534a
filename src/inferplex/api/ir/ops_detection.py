"""The IR builders of OpenVINO's detection ops (NonMaxSuppression, NMSRotated, ROIAlign, ROIAlignRotated,
ROIPooling, ReorgYolo, RegionYolo, PriorBox, PriorBoxClustered, Proposal, GenerateProposals,
DeformablePSROIPooling) and of the colour conversions (NV12 and I420 to RGB and BGR), RandomUniform,
GatherTree and CTCLoss, merged into :data:`inferplex.api.ir.ops.BUILDERS`.

NonMaxSuppression-1, -3 and -4 read as NMS-5 without soft NMS (their one output is NMS-5's
first); ROIAlign-3 has no ``aligned_mode`` (asymmetric); Proposal-1's one output is Proposal-4's first.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from inferplex import opset
from inferplex.api.nodes import Node

__all__ = ["DETECTION_BUILDERS"]


def _optional(op: Any, index: int) -> Any:
    return op.arg(index) if index < op.size else None


def _value(op: Any, index: int) -> Any:
    return op.value(index) if index < op.size else None


def _nms(op: Any) -> Node:
    a = op.attrs
    return opset.non_max_suppression(op.value(0), op.value(1), _optional(op, 2), _optional(op, 3),
                                     _optional(op, 4), _optional(op, 5) if op.version >= 5 else None,
                                     str(a.get("box_encoding", "corner")),
                                     bool(a.get("sort_result_descending", True)),
                                     str(a.get("output_type", "i64")), name=op.name)


def _nms_rotated(op: Any) -> Node:
    a = op.attrs
    return opset.nms_rotated(op.value(0), op.value(1), op.arg(2), op.arg(3), op.arg(4),
                             bool(a.get("sort_result_descending", True)), str(a.get("output_type", "i64")),
                             bool(a.get("clockwise", True)), name=op.name)


def _roi_align(op: Any) -> Node:
    a = op.attrs
    return opset.roi_align(op.value(0), op.value(1), op.value(2), int(a["pooled_h"]), int(a["pooled_w"]),
                           int(a["sampling_ratio"]), float(a["spatial_scale"]), str(a["mode"]),
                           str(a.get("aligned_mode", "asymmetric")), name=op.name)


def _roi_align_rotated(op: Any) -> Node:
    a = op.attrs
    return opset.roi_align_rotated(op.value(0), op.value(1), op.value(2), int(a["pooled_h"]),
                                   int(a["pooled_w"]), int(a["sampling_ratio"]), float(a["spatial_scale"]),
                                   bool(a.get("clockwise_mode", False)), name=op.name)


def _roi_pooling(op: Any) -> Node:
    a = op.attrs
    size = a.get("output_size") or [a["pooled_h"], a["pooled_w"]]
    return opset.roi_pooling(op.value(0), op.value(1), [int(v) for v in size], float(a["spatial_scale"]),
                             str(a.get("method", "max")), name=op.name)


def _region_yolo(op: Any) -> Node:
    a = op.attrs
    return opset.region_yolo(op.value(0), int(a["coords"]), int(a["classes"]), int(a["num"]),
                             bool(a["do_softmax"]), [int(v) for v in a.get("mask") or []], int(a["axis"]),
                             int(a["end_axis"]), a.get("anchors") or None, name=op.name)


def _priors(function: str) -> Callable[[Any], Node]:
    """PriorBox and PriorBoxClustered: their attributes as the dict the builder takes (empty lists
    left out)."""
    def build(op: Any) -> Node:
        attrs = {key: value for key, value in op.attrs.items()
                 if not (isinstance(value, list | tuple | np.ndarray) and len(value) == 0)}
        return getattr(opset, function)(op.arg(0), op.arg(1), attrs, name=op.name)
    return build


_PROPOSAL_ATTRIBUTES = ("base_size", "pre_nms_topn", "post_nms_topn", "nms_thresh", "feat_stride", "min_size",
                        "ratio", "scale", "clip_before_nms", "clip_after_nms", "normalize", "box_size_scale",
                        "box_coordinate_scale", "framework")


def _generate_proposals(op: Any) -> Node:
    a = op.attrs
    return opset.generate_proposals(op.value(0), op.value(1), op.value(2), op.value(3), float(a["min_size"]),
                                    float(a["nms_threshold"]), int(a["pre_nms_count"]),
                                    int(a["post_nms_count"]), bool(a.get("normalized", True)),
                                    float(a.get("nms_eta", 1.0)), str(a.get("roi_num_type", "i64")),
                                    name=op.name)


def _deformable_psroi_pooling(op: Any) -> Node:
    a = op.attrs
    return opset.deformable_psroi_pooling(
        op.value(0), op.value(1), int(a["output_dim"]), float(a["spatial_scale"]),
        int(a.get("group_size", 1)), str(a.get("mode", "bilinear_deformable")),
        int(a.get("spatial_bins_x", 1)), int(a.get("spatial_bins_y", 1)), float(a.get("trans_std", 1.0)),
        int(a.get("part_size", 1)), _value(op, 2), name=op.name)


def _proposal(op: Any) -> Node:
    attrs = {key: op.attrs[key] for key in _PROPOSAL_ATTRIBUTES if key in op.attrs}
    return opset.proposal(op.value(0), op.value(1), op.value(2), attrs, name=op.name)


DETECTION_BUILDERS: dict[str, Callable[[Any], Node]] = {
    "NonMaxSuppression": _nms,
    "NMSRotated": _nms_rotated,
    "ROIAlign": _roi_align,
    "ROIAlignRotated": _roi_align_rotated,
    "ROIPooling": _roi_pooling,
    "ReorgYolo": lambda op: opset.reorg_yolo(op.value(0), [int(v) for v in np.atleast_1d(op.attrs["stride"])],
                                             name=op.name),
    "RegionYolo": _region_yolo,
    "PriorBox": _priors("prior_box"),
    "PriorBoxClustered": _priors("prior_box_clustered"),
    "Proposal": _proposal,
    "GenerateProposals": _generate_proposals,
    "DeformablePSROIPooling": _deformable_psroi_pooling,
    "NV12toRGB": lambda op: opset.nv12_to_rgb(op.value(0), _value(op, 1), name=op.name),
    "NV12toBGR": lambda op: opset.nv12_to_bgr(op.value(0), _value(op, 1), name=op.name),
    "I420toRGB": lambda op: opset.i420_to_rgb(op.value(0), _value(op, 1), _value(op, 2), name=op.name),
    "I420toBGR": lambda op: opset.i420_to_bgr(op.value(0), _value(op, 1), _value(op, 2), name=op.name),
    "RandomUniform": lambda op: opset.random_uniform(
        op.ints(0), op.value(1), op.value(2), str(op.attrs["output_type"]),
        int(op.attrs.get("global_seed", 0)), int(op.attrs.get("op_seed", 0)),
        str(op.attrs.get("alignment", "tensorflow")), name=op.name),
    "GatherTree": lambda op: opset.gather_tree(op.value(0), op.value(1), op.value(2), op.value(3),
                                               name=op.name),
    "CTCLoss": lambda op: opset.ctc_loss(
        op.value(0), op.value(1), op.value(2), op.value(3), _value(op, 4),
        bool(op.attrs.get("preprocess_collapse_repeated", False)),
        bool(op.attrs.get("ctc_merge_repeated", True)),
        bool(op.attrs.get("unique", False)), name=op.name),
}
"""OpenVINO op type -> the function that builds it."""
