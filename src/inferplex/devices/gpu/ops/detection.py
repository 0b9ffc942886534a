"""Lowering: NonMaxSuppression, greedy like ONNX Runtime's.

The pairwise overlaps (IoU) of each batch's boxes are computed on the device in
one batched kernel; the greedy pass, whose length depends on the data, then
walks each (batch, class)'s candidates on the host in decreasing score order
(ties keep the lower box index first) and keeps a box unless its IoU with a box
already kept exceeds ``iou_threshold``.  Boxes scoring at or below
``score_threshold`` are never candidates.  The output (selected_index rows of
batch, class, box) has a data-dependent length, so the program runs eagerly.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from inferplex.devices.gpu.ops._common import FLOAT_DTYPES, attrs_reason, dtype_reason, eager, first_reason
from inferplex.devices.gpu.registry import NodeInfo, register


def _corners(boxes: torch.Tensor, center_point_box: int) -> torch.Tensor:
    """Boxes as (y1, x1, y2, x2) with y1 <= y2 and x1 <= x2, whatever order they came in."""
    if center_point_box:
        x, y, w, h = boxes.unbind(-1)
        return torch.stack((y - h / 2, x - w / 2, y + h / 2, x + w / 2), dim=-1)
    a, b, c, d = boxes.unbind(-1)
    return torch.stack((torch.minimum(a, c), torch.minimum(b, d), torch.maximum(a, c),
                        torch.maximum(b, d)), dim=-1)


def _pairwise_iou(corners: torch.Tensor) -> torch.Tensor:
    """[B, N, N] IoU of every pair of boxes of each batch (0 where the union is empty)."""
    y1, x1, y2, x2 = corners.unsqueeze(-1).unbind(-2)
    area = (y2 - y1) * (x2 - x1)
    y1t, x1t, y2t, x2t = (t.transpose(-1, -2) for t in (y1, x1, y2, x2))
    height = (torch.minimum(y2, y2t) - torch.maximum(y1, y1t)).clamp(min=0)
    width = (torch.minimum(x2, x2t) - torch.maximum(x1, x1t)).clamp(min=0)
    inter = height * width
    union = area + area.transpose(-1, -2) - inter
    valid = (area > 0) & (area.transpose(-1, -2) > 0) & (union > 0)
    safe_union = torch.where(valid, union, torch.ones_like(union))
    return torch.where(valid, inter / safe_union, torch.zeros_like(union))


def _greedy(order: np.ndarray, iou: np.ndarray, threshold: float, limit: int) -> list[int]:
    kept: list[int] = []
    for box in order:
        if len(kept) >= limit:
            break
        if not kept or not (iou[box, kept] > threshold).any():
            kept.append(int(box))
    return kept


def _nms_supports(info: NodeInfo) -> str | None:
    return first_reason(attrs_reason(info, ("center_point_box",)), dtype_reason(info, (0, 1), FLOAT_DTYPES))


@register("NonMaxSuppression", versions=(10, None), supports=_nms_supports)
def _non_max_suppression(info: NodeInfo) -> Callable[..., Any]:
    center = int(info.attr("center_point_box", 0))

    def nms(boxes: torch.Tensor, scores: torch.Tensor, max_output: torch.Tensor | None = None,
            iou_threshold: torch.Tensor | None = None,
            score_threshold: torch.Tensor | None = None) -> torch.Tensor:
        limit = 0 if max_output is None or max_output.numel() == 0 else int(max_output.reshape(-1)[0])
        if limit <= 0 or boxes.shape[1] == 0:
            return torch.zeros((0, 3), dtype=torch.int64, device=boxes.device)
        iou = _pairwise_iou(_corners(boxes.double(), center)).cpu().numpy()
        overlap = 0.0 if iou_threshold is None else float(iou_threshold.reshape(-1)[0])
        host_scores = scores.double().cpu().numpy()
        floor = None if score_threshold is None else float(score_threshold.reshape(-1)[0])
        rows: list[tuple[int, int, int]] = []
        for b in range(host_scores.shape[0]):
            for c in range(host_scores.shape[1]):
                s = host_scores[b, c]
                order = np.argsort(-s, kind="stable")
                if floor is not None:
                    order = order[s[order] > floor]
                rows += [(b, c, k) for k in _greedy(order, iou[b], overlap, limit)]
        out = torch.tensor(rows, dtype=torch.int64).reshape(-1, 3)
        return out.to(boxes.device)

    return eager(nms)
