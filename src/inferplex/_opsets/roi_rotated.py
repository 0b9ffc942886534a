"""OpenVINO's ``roi_align_rotated`` (opset 15), as ONNX ops.

Each region [cx, cy, w, h, angle] of the image its batch index names is scaled by
``spatial_scale`` (the centre moved by half a pixel) and split into ``pooled_h`` x ``pooled_w``
bins; each bin averages bilinear samples on a grid of ``sampling_ratio`` x ``sampling_ratio``
points, or with ``sampling_ratio`` 0 of ``ceil(bin height)`` x ``ceil(bin width)``, which differs
from region to region.  The samples are rotated about the centre by the angle (radians,
counterclockwise; clockwise with ``clockwise_mode``).  A sample more than a pixel outside the image
counts as 0; one within a pixel of an edge reads the edge's pixels, as OpenVINO's reference does.

Built here as one sampling grid for every region, as large as the largest region's (a size known
when the model runs), each region's extra points weighing 0; the four neighbours of every sample are
gathered from the feature map in channels-last order.
"""

from __future__ import annotations

import onnx_ir as ir

from inferplex._opsets.build import NodeInput, dim_at, int64, make_op, settle_shape, show, step, value_of
from inferplex._opsets.build import floats as _floats
from inferplex._opsets.build import ints as _ints
from inferplex.api.nodes import Node
from inferplex.errors import InputError

__all__ = ["roi_align_rotated"]

_FLOAT = int(ir.DataType.FLOAT)
_INT64 = int(ir.DataType.INT64)


def roi_align_rotated(data: NodeInput, rois: NodeInput, batch_indices: NodeInput, pooled_h: int,
                      pooled_w: int, sampling_ratio: int, spatial_scale: float, clockwise_mode: bool,
                      name: str | None = None) -> Node:
    """Rotated regions ``rois`` [N, 5] (centre x, centre y, width, height, angle) of ``data``
    [batch, C, H, W] (image ``batch_indices[n]``) pooled to [N, C, pooled_h, pooled_w] by the
    average of bilinear samples."""
    x, regions = value_of(data), value_of(rois)
    _check(x, regions, pooled_h, pooled_w, sampling_ratio)
    kind = x.dtype or ir.DataType.FLOAT
    boxes = step("Cast", [regions], {"to": _FLOAT})
    column = [step("Gather", [boxes, _ints(i)], {"axis": 1}) for i in range(5)]  # [N] each
    scale = _floats(float(spatial_scale))
    centre_x, centre_y = (step("Sub", [step("Mul", [c, scale]), _floats(0.5)]) for c in column[:2])
    width, height = (step("Mul", [c, scale]) for c in column[2:4])
    angle = step("Neg", [column[4]]) if clockwise_mode else column[4]
    cos, sin = step("Cos", [angle]), step("Sin", [angle])
    bin_w = step("Div", [width, _floats(float(pooled_w))])
    bin_h = step("Div", [height, _floats(float(pooled_h))])
    if sampling_ratio > 0:
        count_x = count_y = _floats(float(sampling_ratio))
        grid_x = grid_y = _ints(sampling_ratio)
    else:  # each region's own grid; the shared one as large as the largest
        count_x, count_y = step("Ceil", [bin_w]), step("Ceil", [bin_h])
        grid_x, grid_y = (step("Cast", [step("ReduceMax", [c], {"keepdims": 0})], {"to": _INT64})
                          for c in (count_x, count_y))

    def spread(value: ir.Value, axis: int) -> ir.Value:
        """[K] laid along ``axis`` of the sample grid [N, pooled_h, pooled_w, grid_y, grid_x]."""
        return step("Reshape", [value, _ints([-1 if a == axis else 1 for a in range(5)])])

    def points(count: ir.Value) -> ir.Value:
        return step("Cast", [step("Range", [_ints(0), count, _ints(1)])], {"to": _FLOAT})

    per_region = {name: spread(v, 0) for name, v in (
        ("bin_w", bin_w), ("bin_h", bin_h), ("cx", centre_x), ("cy", centre_y), ("cos", cos), ("sin", sin),
        ("count_x", count_x), ("count_y", count_y))}  # [N, 1, 1, 1, 1] (the counts: [1, ...] where fixed)
    step_x = step("Div", [per_region["bin_w"], per_region["count_x"]])
    step_y = step("Div", [per_region["bin_h"], per_region["count_y"]])
    index_x, index_y = points(grid_x), points(grid_y)
    bins_x, bins_y = points(_ints(pooled_w)), points(_ints(pooled_h))
    half = _floats(0.5)
    start_x = step("Mul", [spread(width, 0), _floats(-0.5)])
    start_y = step("Mul", [spread(height, 0), _floats(-0.5)])
    along_x = step("Add", [step("Add", [start_x, step("Mul", [spread(bins_x, 2), per_region["bin_w"]])]),
                           step("Mul", [step_x, step("Add", [spread(index_x, 4), half])])])
    along_y = step("Add", [step("Add", [start_y, step("Mul", [spread(bins_y, 1), per_region["bin_h"]])]),
                           step("Mul", [step_y, step("Add", [spread(index_y, 3), half])])])
    sample_y = step("Add", [step("Sub", [step("Mul", [along_y, per_region["cos"]]),
                                         step("Mul", [along_x, per_region["sin"]])]), per_region["cy"]])
    sample_x = step("Add", [step("Add", [step("Mul", [along_y, per_region["sin"]]),
                                         step("Mul", [along_x, per_region["cos"]])]), per_region["cx"]])
    taken = step("And", [step("Less", [spread(index_x, 4), per_region["count_x"]]),
                         step("Less", [spread(index_y, 3), per_region["count_y"]])])
    shape = step("Shape", [x])
    image_h, image_w = (step("Gather", [shape, _ints(i)], {"axis": 0}) for i in (2, 3))
    size_h, size_w = (step("Cast", [v], {"to": _FLOAT}) for v in (image_h, image_w))
    inside = step("Not", [step("Or", [
        step("Or", [step("Less", [sample_x, _floats(-1.0)]), step("Greater", [sample_x, size_w])]),
        step("Or", [step("Less", [sample_y, _floats(-1.0)]), step("Greater", [sample_y, size_h])])])])
    low_y, high_y, frac_y = _neighbours(sample_y, size_h)
    low_x, high_x, frac_x = _neighbours(sample_x, size_w)
    weight = step("Cast", [step("And", [inside, taken])], {"to": _FLOAT})
    one = _floats(1.0)
    rest_y, rest_x = step("Sub", [one, frac_y]), step("Sub", [one, frac_x])
    # the feature map channels-last, one row per pixel of every image: [batch * H * W, C]
    channels = step("Gather", [shape, _ints([1])], {"axis": 0})
    last = step("Transpose", [step("Cast", [x], {"to": _FLOAT})], {"perm": [0, 2, 3, 1]})
    pixels = step("Reshape", [last, step("Concat", [_ints([-1]), channels], {"axis": 0})])
    image = spread(step("Mul", [step("Mul", [int64(batch_indices), image_h]), image_w]), 0)
    total = None
    for row, row_weight in ((low_y, rest_y), (high_y, frac_y)):
        for col, col_weight in ((low_x, rest_x), (high_x, frac_x)):
            place = step("Add", [image, step("Add", [step("Mul", [row, image_w]), col])])
            share = step("Mul", [step("Mul", [row_weight, col_weight]), weight])
            part = step("Mul", [step("Gather", [pixels, place], {"axis": 0}),  # [..., C]
                                step("Unsqueeze", [share, _ints([-1])])])
            total = part if total is None else step("Add", [total, part])
    assert total is not None
    summed = step("ReduceSum", [total, _ints([3, 4])], {"keepdims": 0})  # [N, pooled_h, pooled_w, C]
    count = step("Reshape", [step("Mul", [count_x, count_y]), _ints([-1, 1, 1, 1])])
    averaged = step("Where", [step("Greater", [count, _floats(0.0)]),
                              step("Div", [summed, step("Max", [count, one])]), _floats(0.0)])
    pooled = step("Transpose", [averaged], {"perm": [0, 3, 1, 2]})
    built = make_op("ROIAlignRotated", "Cast", [pooled], {"to": int(kind)}, name)
    return settle_shape(built, 0, [dim_at(regions, 0), dim_at(x, 1), pooled_h, pooled_w])


def _neighbours(sample: ir.Value, size: ir.Value) -> tuple[ir.Value, ir.Value, ir.Value]:
    """(lower, upper pixel index as int64, the sample's fraction past the lower) of samples along an
    axis of ``size`` pixels: the sample held at 0 or more, both at the last pixel from there on.  A
    NaN sample (a region of no height or width has no grid: its points weigh 0) reads pixel 0."""
    held = step("Where", [step("IsNaN", [sample]), _floats(0.0), step("Max", [sample, _floats(0.0)])])
    last = step("Sub", [size, _floats(1.0)])
    low = step("Floor", [held])
    at_end = step("GreaterOrEqual", [low, last])
    low = step("Where", [at_end, last, low])
    held = step("Where", [at_end, low, held])
    high = step("Where", [at_end, low, step("Add", [low, _floats(1.0)])])
    fraction = step("Sub", [held, low])
    return (step("Cast", [low], {"to": _INT64}), step("Cast", [high], {"to": _INT64}), fraction)


def _check(x: ir.Value, regions: ir.Value, pooled_h: int, pooled_w: int, sampling_ratio: int) -> None:
    if x.shape is not None and len(x.shape) != 4:
        raise InputError(f"roi_align_rotated takes data [batch, C, H, W], got {show(x)}")
    if regions.shape is not None and (len(regions.shape) != 2
                                      or (isinstance(regions.shape[1], int) and regions.shape[1] != 5)):
        raise InputError(f"roi_align_rotated takes rois [N, 5] (centre x, centre y, width, height, angle), "
                         f"got {show(regions)}")
    if pooled_h < 1 or pooled_w < 1 or sampling_ratio < 0:
        raise InputError(f"roi_align_rotated takes pooled_h and pooled_w of 1 or more and a sampling_ratio "
                         f"of 0 or more, got {pooled_h}, {pooled_w} and {sampling_ratio}")
