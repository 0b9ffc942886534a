"""Lowering: RoiAlign (the region pooling of two-stage detectors such as Mask R-CNN), as ONNX
Runtime computes it.

Each region ``[x1, y1, x2, y2]`` (scaled by ``spatial_scale``, shifted by half a
pixel under ``half_pixel``; at least one pixel wide and high otherwise) is cut
into ``output_height x output_width`` bins, and each bin into a grid of
``sampling_ratio`` (or, when it is 0, ``ceil(bin size)``) samples per axis.  A
sample outside ``[-1, size]`` on either axis counts as 0; the others are read
bilinearly from the feature map (clamped to its edge).  ``avg`` averages a bin's
samples; ``max`` takes, as ONNX Runtime does, the largest of the four weighted
corner reads of every sample, then the largest over the bin's samples.

The samples of all regions that share one grid size are read at once with four
gathers over the channels-last feature map.  With a fixed ``sampling_ratio``
(what exporters write: Mask R-CNN's is 2) every region shares it and nothing is
read back to the host; with an adaptive one the regions' sizes are read back
(the program then runs eagerly) and regions are grouped by grid size.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import onnx_ir as ir
import torch

from inferplex.devices.gpu.ops._common import (
    FLOAT_DTYPES,
    attrs_reason,
    dtype_reason,
    eager,
    first_reason,
    text,
)
from inferplex.devices.gpu.registry import NodeInfo, register

_ATTRS = ("coordinate_transformation_mode", "mode", "output_height", "output_width", "sampling_ratio",
          "spatial_scale")


def _supports(info: NodeInfo) -> str | None:
    reason = first_reason(attrs_reason(info, _ATTRS), dtype_reason(info, (0, 1), FLOAT_DTYPES),
                          dtype_reason(info, (2,), frozenset({ir.DataType.INT64, ir.DataType.INT32})))
    if reason is None and text(info.attr("mode", "avg")) not in ("avg", "max"):
        return f"RoiAlign mode {info.attr('mode')!r} is not avg or max"
    if reason is None and text(info.attr("coordinate_transformation_mode", "half_pixel")) not in (
            "half_pixel", "output_half_pixel"):
        return "RoiAlign coordinate_transformation_mode is not half_pixel or output_half_pixel"
    return reason


def _axis_samples(start: torch.Tensor, bin_size: torch.Tensor, bins: int, grid: int,
                  size: int) -> tuple[torch.Tensor, ...]:
    """Along one axis, for [regions] ``start`` and ``bin_size``: the low and high pixel index, their
    weights and whether the sample is inside, each [regions, bins, grid]."""
    steps = torch.arange(bins, dtype=start.dtype, device=start.device).reshape(1, bins, 1)
    ticks = (torch.arange(grid, dtype=start.dtype, device=start.device) + 0.5).reshape(1, 1, grid)
    bin_size = bin_size.reshape(-1, 1, 1)
    at = start.reshape(-1, 1, 1) + steps * bin_size + ticks * bin_size / grid
    inside = (at >= -1.0) & (at <= size)
    at = at.clamp(min=0)
    low = at.to(torch.int64)
    edge = low >= size - 1
    low = torch.where(edge, torch.full_like(low, size - 1), low)
    high = torch.where(edge, low, low + 1)
    at = torch.where(edge, low.to(at.dtype), at)
    frac = at - low.to(at.dtype)
    return low, high, 1 - frac, frac, inside


def _pool(rows: torch.Tensor, width: int, plane: torch.Tensor, y: tuple[torch.Tensor, ...],
          x: tuple[torch.Tensor, ...], average: bool) -> torch.Tensor:
    """Pooled [regions, C, bins_h, bins_w] from ``rows`` (the feature map as [B*H*W, C]).

    ``plane``: each region's first row (batch index * H * W); ``y``, ``x``: :func:`_axis_samples`.
    """
    y_low, y_high, y_wlow, y_whigh, y_in = (t[:, :, :, None, None] for t in y)
    x_low, x_high, x_wlow, x_whigh, x_in = (t[:, None, None, :, :] for t in x)
    # A sample outside the map gets zero weights: it adds 0 to a mean and is a 0 in a max.
    y_wlow, y_whigh = y_wlow * y_in, y_whigh * y_in
    x_wlow, x_whigh = x_wlow * x_in, x_whigh * x_in
    base = plane.reshape(-1, 1, 1, 1, 1)
    corners = [(yi, wy, xi, wx) for yi, wy in ((y_low, y_wlow), (y_high, y_whigh))
               for xi, wx in ((x_low, x_wlow), (x_high, x_whigh))]

    def read(yi: torch.Tensor, wy: torch.Tensor, xi: torch.Tensor, wx: torch.Tensor) -> torch.Tensor:
        return rows[base + yi * width + xi].mul_((wy * wx).unsqueeze(-1).to(rows.dtype))

    # One corner read at a time, folded into the running sum or max: the reads are
    # [regions, bins, grid, bins, grid, C] each, the largest tensors here.
    total = read(*corners[0])
    for corner in corners[1:]:
        total = total.add_(read(*corner)) if average else torch.maximum(total, read(*corner))
    if average:
        pooled = total.sum(dim=(2, 4)) / (total.shape[2] * total.shape[4])
    else:
        pooled = total.amax(dim=(2, 4))
    return pooled.permute(0, 3, 1, 2)  # [regions, bins_h, bins_w, C] -> [regions, C, bins_h, bins_w]


def _geometry_type(x: torch.Tensor) -> torch.dtype:
    """Sample positions and weights are computed in float32 at least: in f16/bf16 (a reduced
    precision hint) positions tens of pixels into the map would round by a sizeable part of a pixel."""
    return torch.float64 if x.dtype == torch.float64 else torch.float32


@register("RoiAlign", versions=(10, None), supports=_supports)
def _roi_align(info: NodeInfo) -> Callable[..., Any]:
    half_pixel = info.opset >= 16 and text(info.attr("coordinate_transformation_mode",
                                                      "half_pixel")) == "half_pixel"
    average = text(info.attr("mode", "avg")) == "avg"
    bins_h, bins_w = int(info.attr("output_height", 1)), int(info.attr("output_width", 1))
    ratio, scale = int(info.attr("sampling_ratio", 0)), float(info.attr("spatial_scale", 1.0))

    def regions(x: torch.Tensor, rois: torch.Tensor) -> tuple[torch.Tensor, ...]:
        start = rois[:, :2] * scale - (0.5 if half_pixel else 0.0)  # (x, y)
        size = rois[:, 2:] * scale - (0.5 if half_pixel else 0.0) - start
        if not half_pixel:
            size = size.clamp(min=1.0)
        return start[:, 1], start[:, 0], size[:, 1] / bins_h, size[:, 0] / bins_w

    def pool(x: torch.Tensor, rois: torch.Tensor, batch: torch.Tensor, grid_h: int,
             grid_w: int) -> torch.Tensor:
        if grid_h <= 0 or grid_w <= 0:  # an empty region: no samples, zeros
            return x.new_zeros((rois.shape[0], x.shape[1], bins_h, bins_w))
        height, width = x.shape[2], x.shape[3]
        start_y, start_x, bin_y, bin_x = regions(x, rois.to(_geometry_type(x)))
        rows = x.permute(0, 2, 3, 1).reshape(-1, x.shape[1])
        y = _axis_samples(start_y, bin_y, bins_h, grid_h, height)
        xs = _axis_samples(start_x, bin_x, bins_w, grid_w, width)
        return _pool(rows, width, batch.to(torch.int64) * (height * width), y, xs, average)

    if ratio > 0:
        return lambda x, rois, batch: pool(x, rois, batch, ratio, ratio)

    def adaptive(x: torch.Tensor, rois: torch.Tensor, batch: torch.Tensor) -> torch.Tensor:
        _, _, bin_y, bin_x = regions(x, rois.to(_geometry_type(x)))
        grids = list(zip((math.ceil(v) for v in bin_y.tolist()), (math.ceil(v) for v in bin_x.tolist()),
                         strict=True))
        out = x.new_zeros((rois.shape[0], x.shape[1], bins_h, bins_w))
        for grid in sorted(set(grids)):
            chosen = torch.tensor([i for i, g in enumerate(grids) if g == grid], device=x.device)
            out[chosen] = pool(x, rois[chosen], batch[chosen], *grid)
        return out

    return eager(adaptive)
