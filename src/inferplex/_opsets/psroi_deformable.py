"""OpenVINO's DeformablePSROIPooling (opset 1: deformable R-FCN's pooling) as ONNX ops.

As OpenVINO's CPU computes it: a region's corners are rounded (halves away from zero), the far one
counted inclusive, scaled and moved by half a pixel; each of its ``group_size`` x ``group_size``
bins averages ``spatial_bins_y`` x ``spatial_bins_x`` bilinear samples of its own input channel
(``(k * group_size + i) * group_size + j`` for output channel k, bin (i, j)), the bin moved by
its part's offset (``offsets`` [R, 2 * classes, part_size, part_size], x then y per class of
``output_dim / classes`` output channels, times ``trans_std`` and the region's size).  Samples
more than half a pixel outside the map are left out, the others clamped to it; a bin of no sample
is 0.  A region whose batch index is -1 ends the list: it and those after it give zeros.
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from inferplex._opsets.build import NodeInput, choice, make_op, round_half_away, step, value_of
from inferplex._opsets.build import dim as _dim
from inferplex._opsets.build import floats as _floats
from inferplex._opsets.build import ints as _ints
from inferplex.api.nodes import Node
from inferplex.errors import InputError

__all__ = ["deformable_psroi_pooling"]

_FLOAT = int(ir.DataType.FLOAT)
_INT64 = int(ir.DataType.INT64)


def deformable_psroi_pooling(feature_maps: NodeInput, coords: NodeInput, output_dim: int,
                             spatial_scale: float, group_size: int = 1, mode: str = "bilinear_deformable",
                             spatial_bins_x: int = 1, spatial_bins_y: int = 1, trans_std: float = 1.0,
                             part_size: int = 1, offsets: NodeInput | None = None,
                             name: str | None = None) -> Node:
    """Deformable position-sensitive ROI pooling of ``feature_maps`` [B, output_dim * group_size², H,
    W] over ``coords`` [R, 5] (batch index, x1, y1, x2, y2) to [R, output_dim, group_size, group_size],
    each bin moved by ``offsets`` (None: not moved); see the module's notes."""
    choice(mode, ("bilinear_deformable",), "deformable_psroi_pooling mode")
    out_dim, group, parts = int(output_dim), int(group_size), int(part_size)
    bins_x, bins_y = int(spatial_bins_x), int(spatial_bins_y)
    if min(out_dim, group, parts, bins_x, bins_y) < 1:
        raise InputError(f"deformable_psroi_pooling needs output_dim, group_size, part_size and spatial bins "
                         f"of 1 or more, got {output_dim}, {group_size}, {part_size}, {spatial_bins_x}, "
                         f"{spatial_bins_y}")
    x = value_of(feature_maps)
    if x.shape is None or len(x.shape) != 4:
        raise InputError("deformable_psroi_pooling takes feature maps of rank 4 [B, C, H, W]")
    channels = x.shape[1]
    if isinstance(channels, int) and channels != out_dim * group * group:
        want = out_dim * group * group
        raise InputError(f"deformable_psroi_pooling needs output_dim * group_size² = {want} input channels, "
                         f"got {channels}")
    dtype = x.dtype or ir.DataType.FLOAT
    data = x if dtype == ir.DataType.FLOAT else step("Cast", [x], {"to": _FLOAT})
    rois = value_of(coords)
    if rois.dtype != ir.DataType.FLOAT:
        rois = step("Cast", [rois], {"to": _FLOAT})
    column = [step("Reshape", [step("Slice", [rois, _ints([i]), _ints([i + 1]), _ints([1])]),
                               _ints([-1, 1, 1, 1])]) for i in range(5)]  # [R, 1, 1, 1]
    image = step("Cast", [column[0]], {"to": _INT64})
    scale, half = _floats(float(np.float32(spatial_scale))), _floats(0.5)
    start_w = step("Sub", [step("Mul", [round_half_away(column[1]), scale]), half])
    start_h = step("Sub", [step("Mul", [round_half_away(column[2]), scale]), half])
    end_w = step("Sub", [step("Mul", [step("Add", [round_half_away(column[3]), _floats(1.0)]), scale]), half])
    end_h = step("Sub", [step("Mul", [step("Add", [round_half_away(column[4]), _floats(1.0)]), scale]), half])
    roi_w = step("Max", [step("Sub", [end_w, start_w]), _floats(0.1)])
    roi_h = step("Max", [step("Sub", [end_h, start_h]), _floats(0.1)])
    bin_w, bin_h = (step("Div", [size, _floats(float(group))]) for size in (roi_w, roi_h))
    sub_w, sub_h = step("Div", [bin_w, _floats(float(bins_x))]), step("Div", [bin_h, _floats(float(bins_y))])

    # [R, O, G, G]: each bin's corner, moved by its part's offset
    places = np.arange(group, dtype=np.float32)
    across = _floats(places.reshape(1, 1, 1, -1))
    down = _floats(places.reshape(1, 1, -1, 1))
    corner_w = step("Add", [step("Mul", [across, bin_w]), start_w])
    corner_h = step("Add", [step("Mul", [down, bin_h]), start_h])
    if offsets is not None:
        move_x, move_y = _moves(value_of(offsets), out_dim, group, parts, float(np.float32(trans_std)))
        corner_w = step("Add", [corner_w, step("Mul", [move_x, roi_w])])
        corner_h = step("Add", [corner_h, step("Mul", [move_y, roi_h])])

    # [R, O, G, G, Y, X]: the samples
    steps_x = _floats(np.arange(bins_x, dtype=np.float32).reshape(1, 1, 1, 1, 1, -1))
    steps_y = _floats(np.arange(bins_y, dtype=np.float32).reshape(1, 1, 1, 1, -1, 1))
    sample_w = step("Add", [step("Unsqueeze", [corner_w, _ints([4, 5])]),
                            step("Mul", [steps_x, step("Unsqueeze", [sub_w, _ints([4, 5])])])])
    sample_h = step("Add", [step("Unsqueeze", [corner_h, _ints([4, 5])]),
                            step("Mul", [steps_y, step("Unsqueeze", [sub_h, _ints([4, 5])])])])
    height = step("Cast", [_dim(data, 2)], {"to": _FLOAT})
    width = step("Cast", [_dim(data, 3)], {"to": _FLOAT})
    def beyond(sample: ir.Value, size: ir.Value) -> ir.Value:  # more than half a pixel off the map
        past = step("Greater", [sample, step("Sub", [size, half])])
        return step("Or", [step("Less", [sample, _floats(-0.5)]), past])

    outside = step("Or", [beyond(sample_w, width), beyond(sample_h, height)])
    last_w, last_h = step("Sub", [width, _floats(1.0)]), step("Sub", [height, _floats(1.0)])
    sample_w = step("Min", [step("Max", [sample_w, _floats(0.0)]), last_w])
    sample_h = step("Min", [step("Max", [sample_h, _floats(0.0)]), last_h])
    values = _bilinear(data, image, sample_w, sample_h, out_dim, group)
    inside = step("Not", [outside])
    total = step("ReduceSum", [step("Where", [inside, values, _floats(0.0)]), _ints([4, 5])], {"keepdims": 0})
    count = step("ReduceSum", [step("Cast", [inside], {"to": _FLOAT}), _ints([4, 5])], {"keepdims": 0})
    pooled = step("Where", [step("Equal", [count, _floats(0.0)]), _floats(0.0),
                            step("Div", [total, step("Max", [count, _floats(1.0)])])])
    # the regions from the first of batch index -1 on are zeros
    ended = step("Cast", [step("Equal", [image, _ints(-1)])], {"to": _INT64})
    live = step("Equal", [step("CumSum", [ended, _ints(0)]), _ints(0)])  # [R, 1, 1, 1]
    if dtype == ir.DataType.FLOAT:
        return make_op("DeformablePSROIPooling", "Where", [live, pooled, _floats(0)], {}, name)
    kept = step("Where", [live, pooled, _floats(0)])
    return make_op("DeformablePSROIPooling", "Cast", [kept], {"to": int(dtype)}, name)


def _moves(offsets: ir.Value, out_dim: int, group: int, parts: int,
           trans_std: float) -> tuple[ir.Value, ir.Value]:
    """[R, O, G, G] x and y moves of each bin, in units of the region's size: its output channel's
    class (``O / classes`` channels each, classes = offsets' channels / 2) and its part's offsets,
    times ``trans_std``."""
    if offsets.dtype != ir.DataType.FLOAT:
        offsets = step("Cast", [offsets], {"to": _FLOAT})
    classes = step("Div", [_dim(offsets, 1), _ints([2])])
    per_class = step("Div", [_ints([out_dim]), classes])
    label = step("Div", [_ints(np.arange(out_dim)), per_class])  # [O]
    part = _ints([place * parts // group for place in range(group)])  # [G]
    moves = []
    for axis in (0, 1):
        index = step("Add", [step("Mul", [label, _ints(2)]), _ints(axis)])
        picked = step("Gather", [offsets, index], {"axis": 1})
        picked = step("Gather", [step("Gather", [picked, part], {"axis": 2}), part], {"axis": 3})
        moves.append(step("Mul", [picked, _floats(trans_std)]))
    return moves[0], moves[1]


def _bilinear(data: ir.Value, image: ir.Value, sample_w: ir.Value, sample_h: ir.Value, out_dim: int,
              group: int) -> ir.Value:
    """The bilinear value of each sample [R, O, G, G, Y, X] (within the map) of its bin's channel,
    as OpenVINO's CPU weighs the four neighbours (floor and ceiling of each coordinate)."""
    bins = np.arange(group)
    rows = np.arange(out_dim).reshape(-1, 1, 1) * group + bins.reshape(1, -1, 1)
    channel = rows * group + bins.reshape(1, 1, -1)  # (k * G + i) * G + j
    channels, height, width = _dim(data, 1), _dim(data, 2), _dim(data, 3)
    plane = step("Mul", [height, width])
    base = step("Add", [step("Mul", [step("Max", [image, _ints(0)]), step("Mul", [channels, plane])]),
                        step("Mul", [_ints(channel.reshape(1, out_dim, group, group)), plane])])
    base = step("Unsqueeze", [base, _ints([4, 5])])  # [R, O, G, G, 1, 1]
    flat = step("Reshape", [data, _ints([-1])])
    low_x, high_x = step("Floor", [sample_w]), step("Ceil", [sample_w])
    low_y, high_y = step("Floor", [sample_h]), step("Ceil", [sample_h])
    dist_x, dist_y = step("Sub", [sample_w, low_x]), step("Sub", [sample_h, low_y])

    def at(y: ir.Value, x: ir.Value) -> ir.Value:
        offset = step("Add", [step("Mul", [step("Cast", [y], {"to": _INT64}), width]),
                              step("Cast", [x], {"to": _INT64})])
        return step("Gather", [flat, step("Add", [base, offset])], {"axis": 0})

    one = _floats(1.0)
    keep_x, keep_y = step("Sub", [one, dist_x]), step("Sub", [one, dist_y])
    terms = [step("Mul", [step("Mul", [keep_x, keep_y]), at(low_y, low_x)]),
             step("Mul", [step("Mul", [keep_x, dist_y]), at(high_y, low_x)]),
             step("Mul", [step("Mul", [dist_x, keep_y]), at(low_y, high_x)]),
             step("Mul", [step("Mul", [dist_x, dist_y]), at(high_y, high_x)])]
    return step("Add", [step("Add", [step("Add", [terms[0], terms[1]]), terms[2]]), terms[3]])
