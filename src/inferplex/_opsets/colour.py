"""OpenVINO's colour conversions NV12toRGB, NV12toBGR, I420toRGB and I420toBGR (opset 8) as ONNX
arithmetic: the chroma planes repeated over 2x2 pixels, then OpenVINO's BT.601 formulas
``r = 1.164 (y - 16) + 1.596 (v - 128)``, ``g = 1.164 (y - 16) - 0.391 (u - 128) - 0.813 (v - 128)``,
``b = 1.164 (y - 16) + 2.018 (u - 128)``, clipped to [0, 255] (and for u8 rounded half to even, as
OpenVINO's CPU rounds; a value within a float rounding of a half may still come out one apart).

Images are NHWC: one plane [N, H * 3 / 2, W, 1] (NV12: Y, then interleaved U and V rows; I420: Y,
then the U plane, then the V plane), or separate planes: Y [N, H, W, 1] and UV [N, H / 2, W / 2, 2]
(NV12), or Y, U and V [N, H / 2, W / 2, 1] (I420).  H and W must be static and even.
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from inferplex._opsets.build import NodeInput, dim_at, make_op, settle_shape, step, value_of
from inferplex._opsets.build import ints as _ints
from inferplex.api.nodes import Node
from inferplex.errors import InputError

__all__ = ["i420_to_bgr", "i420_to_rgb", "nv12_to_bgr", "nv12_to_rgb"]

_FLOAT = int(ir.DataType.FLOAT)
_TYPES = (ir.DataType.UINT8, ir.DataType.FLOAT)


def _f(number: float) -> ir.Value:
    return value_of(np.asarray(number, np.float32))


def _plane(value: ir.Value, what: str, channels: int) -> tuple[int, int]:
    """The static height and width of a [N, H, W, channels] plane of u8 or f32."""
    if value.dtype not in _TYPES:
        raise InputError(f"{what} takes u8 or f32 planes, got {value.dtype}")
    if value.shape is None or len(value.shape) != 4 or value.shape[3] != channels:
        raise InputError(f"{what} takes NHWC planes [N, H, W, {channels}], got shape {value.shape}")
    h, w = value.shape[1], value.shape[2]
    if not isinstance(h, int) or not isinstance(w, int):
        raise InputError(f"{what} needs static heights and widths, got shape {value.shape}")
    return h, w


def _rows(value: ir.Value, begin: int, end: int) -> ir.Value:
    return step("Slice", [value, _ints([begin]), _ints([end]), _ints([1])])


def _upsample(plane: ir.Value, h: int, w: int) -> ir.Value:
    """A chroma plane [N, h, w] repeated over 2x2 pixels: [N, 2h, 2w, 1]."""
    spread = step("Unsqueeze", [plane, _ints([2, 4])])
    batch = step("Shape", [plane], {"end": 1})
    wide = step("Expand", [spread, step("Concat", [batch, _ints([h, 2, w, 2])], {"axis": 0})])
    return step("Reshape", [wide, step("Concat", [batch, _ints([2 * h, 2 * w, 1])], {"axis": 0})])


def _convert(type_name: str, y: ir.Value, u: ir.Value, v: ir.Value, h: int, w: int, bgr: bool,
             dtype: ir.DataType, name: str | None) -> Node:
    """Y [N, H, W, 1] and the chroma planes [N, h, w] (f32) to RGB or BGR [N, H, W, 3]."""
    luma = step("Mul", [step("Sub", [y, _f(16.0)]), _f(1.164)])
    d = step("Sub", [_upsample(u, h, w), _f(128.0)])
    e = step("Sub", [_upsample(v, h, w), _f(128.0)])
    r = step("Add", [luma, step("Mul", [e, _f(1.596)])])
    g = step("Sub", [step("Sub", [luma, step("Mul", [d, _f(0.391)])]), step("Mul", [e, _f(0.813)])])
    b = step("Add", [luma, step("Mul", [d, _f(2.018)])])
    joined = step("Concat", [b, g, r] if bgr else [r, g, b], {"axis": 3})
    clipped = step("Clip", [joined, _f(0.0), _f(255.0)])
    if dtype == ir.DataType.FLOAT:
        return make_op(type_name, "Identity", [clipped], {}, name)
    return make_op(type_name, "Cast", [step("Round", [clipped])], {"to": int(dtype)}, name)


def _float(value: ir.Value) -> ir.Value:
    return value if value.dtype == ir.DataType.FLOAT else step("Cast", [value], {"to": _FLOAT})


def _nv12(type_name: str, arg: NodeInput, arg_uv: NodeInput, bgr: bool, name: str | None) -> Node:
    what = type_name
    data = value_of(arg)
    rows, w = _plane(data, what, 1)
    if arg_uv is None:
        if rows % 3 or (rows * 2 // 3) % 2 or w % 2:
            raise InputError(f"{what} takes one plane of H * 3 / 2 rows (H and W even), got {rows}x{w}")
        h = rows * 2 // 3
        y = _rows(data, 0, h)
        uv = step("Reshape", [_rows(data, h, rows), _ints([0, h // 2, w // 2, 2])])
    else:
        h = rows
        y, uv = data, value_of(arg_uv)
        if _plane(uv, what, 2) != (h // 2, w // 2) or h % 2 or w % 2:
            raise InputError(f"{what} takes UV [N, H / 2, W / 2, 2] for Y [N, H, W, 1] (H and W even), got "
                             f"{uv.shape} for {data.shape}")
    uv = _float(uv)
    u = step("Squeeze", [step("Slice", [uv, _ints([0]), _ints([1]), _ints([3])]), _ints([3])])
    v = step("Squeeze", [step("Slice", [uv, _ints([1]), _ints([2]), _ints([3])]), _ints([3])])
    built = _convert(type_name, _float(y), u, v, h // 2, w // 2, bgr, data.dtype, name)  # type: ignore[arg-type]
    return settle_shape(built, 0, [dim_at(data, 0), h, w, 3])


def _i420(type_name: str, arg: NodeInput, arg_u: NodeInput, arg_v: NodeInput, bgr: bool,
          name: str | None) -> Node:
    what = type_name
    data = value_of(arg)
    rows, w = _plane(data, what, 1)
    if (arg_u is None) != (arg_v is None):
        raise InputError(f"{what} takes one plane, or Y, U and V planes: give both arg_u and arg_v")
    if arg_u is None:
        if rows % 3 or (rows * 2 // 3) % 2 or w % 2:
            raise InputError(f"{what} takes one plane of H * 3 / 2 rows (H and W even), got {rows}x{w}")
        h = rows * 2 // 3
        y = _rows(data, 0, h)
        quarter = (h // 2) * (w // 2)
        rest = step("Reshape", [_rows(data, h, rows), _ints([0, -1])])
        u = step("Slice", [rest, _ints([0]), _ints([quarter]), _ints([1])])
        v = step("Slice", [rest, _ints([quarter]), _ints([2 * quarter]), _ints([1])])
    else:
        h = rows
        y, u, v = data, value_of(arg_u), value_of(arg_v)
        for plane in (u, v):
            if _plane(plane, what, 1) != (h // 2, w // 2) or h % 2 or w % 2:
                raise InputError(f"{what} takes U and V [N, H / 2, W / 2, 1] for Y [N, H, W, 1] (H and W "
                                 f"even), got {plane.shape} for {data.shape}")
    u, v = (step("Reshape", [_float(p), _ints([0, h // 2, w // 2])]) for p in (u, v))
    built = _convert(type_name, _float(y), u, v, h // 2, w // 2, bgr, data.dtype, name)  # type: ignore[arg-type]
    return settle_shape(built, 0, [dim_at(data, 0), h, w, 3])


def nv12_to_rgb(arg: NodeInput, arg_uv: NodeInput = None, name: str | None = None) -> Node:
    """NV12 (one plane ``arg``, or Y ``arg`` and UV ``arg_uv``) to RGB [N, H, W, 3] of its type."""
    return _nv12("NV12toRGB", arg, arg_uv, False, name)


def nv12_to_bgr(arg: NodeInput, arg_uv: NodeInput = None, name: str | None = None) -> Node:
    """NV12 (one plane ``arg``, or Y ``arg`` and UV ``arg_uv``) to BGR [N, H, W, 3] of its type."""
    return _nv12("NV12toBGR", arg, arg_uv, True, name)


def i420_to_rgb(arg: NodeInput, arg_u: NodeInput = None, arg_v: NodeInput = None,
                name: str | None = None) -> Node:
    """I420 (one plane ``arg``, or planes Y ``arg``, ``arg_u``, ``arg_v``) to RGB [N, H, W, 3]."""
    return _i420("I420toRGB", arg, arg_u, arg_v, False, name)


def i420_to_bgr(arg: NodeInput, arg_u: NodeInput = None, arg_v: NodeInput = None,
                name: str | None = None) -> Node:
    """I420 (one plane ``arg``, or planes Y ``arg``, ``arg_u``, ``arg_v``) to BGR [N, H, W, 3]."""
    return _i420("I420toBGR", arg, arg_u, arg_v, True, name)
