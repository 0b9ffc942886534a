"""NV12 and I420 input tensors: their planes, their shapes, and ``convert_color`` to RGB or BGR as ONNX ops.

An NV12 or I420 tensor is NHWC with one channel: one plane ``[N, H * 3 / 2, W, 1]`` (NV12: the Y rows,
then interleaved U and V rows; I420: the Y rows, then the U plane, then the V plane), or separate planes,
each a model input of its own: Y ``[N, H, W, 1]`` and UV ``[N, H / 2, W / 2, 2]`` (NV12), or Y, U and V
``[N, H / 2, W / 2, 1]`` (I420), named ``<input>/<plane>``.  The conversion is OpenVINO's (its NV12toRGB,
NV12toBGR, I420toRGB and I420toBGR ops, as in :mod:`inferplex._opsets.colour`): the chroma planes
repeated over 2x2 pixels, then ``r = 1.164 (y - 16) + 1.596 (v - 128)``,
``g = 1.164 (y - 16) - 0.391 (u - 128) - 0.813 (v - 128)``, ``b = 1.164 (y - 16) + 2.018 (u - 128)``,
computed in f32, clipped to [0, 255], and for u8 rounded half to even.  Heights and widths may be dynamic
(the ops read them from the tensor's shape).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import onnx_ir as ir

from inferplex.api.shapes import Dimension, PartialShape
from inferplex.api.types import Type
from inferplex.preprocess._enums import ColorFormat

if TYPE_CHECKING:
    from inferplex.preprocess._ops import Emitter

__all__ = ["COLOR_NAMES", "PLANES", "emit_yuv", "is_yuv", "plane_shapes", "planes_of", "yuv_backward",
           "yuv_forward"]

PLANES: dict[ColorFormat, tuple[str, ...]] = {
    ColorFormat.NV12_SINGLE_PLANE: ("",),
    ColorFormat.NV12_TWO_PLANES: ("y", "uv"),
    ColorFormat.I420_SINGLE_PLANE: ("",),
    ColorFormat.I420_THREE_PLANES: ("y", "u", "v"),
}
"""The planes of each YUV format: their default names (a single plane keeps the input's name)."""

COLOR_NAMES = {
    ColorFormat.NV12_SINGLE_PLANE: "NV12 (single plane)",
    ColorFormat.NV12_TWO_PLANES: "NV12 (multi-plane)",
    ColorFormat.I420_SINGLE_PLANE: "I420 (single plane)",
    ColorFormat.I420_THREE_PLANES: "I420 (multi-plane)",
}
"""OpenVINO's names of the YUV formats (the others are named as their members)."""

_TYPES = (Type.u8, Type.f16, Type.f32, Type.f64)
"""The element types the conversion takes (OpenVINO: u8 or floating point)."""

_INT64_MAX = int(np.iinfo(np.int64).max)


def is_yuv(color: ColorFormat | None) -> bool:
    return color in PLANES


def planes_of(color: ColorFormat | None) -> int:
    """How many inputs a tensor of ``color`` becomes (1 but for the multi-plane YUV formats)."""
    return len(PLANES[color]) if color is not None and color in PLANES else 1


def _single(color: ColorFormat) -> bool:
    return len(PLANES[color]) == 1


def _scaled(dim: Dimension, numerator: int, denominator: int) -> Dimension:
    if dim.is_dynamic or (dim.get_length() * numerator) % denominator:
        return Dimension()
    return Dimension(dim.get_length() * numerator // denominator)


def yuv_forward(color: ColorFormat, target: ColorFormat, shape: PartialShape) -> PartialShape:
    """The RGB/BGR image ``[N, H, W, 3]`` (GRAY: ``[N, H, W, 1]``) made from the tensor ``shape`` (the
    plane, or the Y plane)."""
    return _converted_shape(color, shape, (2, 3), 1 if target == ColorFormat.GRAY else 3)


def yuv_backward(color: ColorFormat, shape: PartialShape) -> PartialShape:
    """The tensor's shape (the plane, or the Y plane) for an RGB/BGR image of ``shape``."""
    return _converted_shape(color, shape, (3, 2), 1)


def _converted_shape(color: ColorFormat, shape: PartialShape, ratio: tuple[int, int],
                     channels: int) -> PartialShape:
    """``shape`` with its height times ``ratio`` (a single plane's rows against the image's) and
    ``channels`` channels."""
    if shape.rank.is_dynamic:
        return PartialShape(shape)
    dims = list(shape)
    if _single(color):
        dims[1] = _scaled(dims[1], *ratio)
    dims[3] = Dimension(channels)
    return PartialShape(dims)


def plane_shapes(color: ColorFormat, shape: PartialShape) -> list[PartialShape]:
    """The shapes of the planes, from the tensor's ``shape`` (the plane, or the Y plane)."""
    if _single(color) or shape.rank.is_dynamic:
        return [PartialShape(shape)] * len(PLANES[color])
    n, h, w, _ = list(shape)
    chroma = [n, _scaled(h, 1, 2), _scaled(w, 1, 2)]
    if color == ColorFormat.NV12_TWO_PLANES:
        return [PartialShape(shape), PartialShape([*chroma, Dimension(2)])]
    return [PartialShape(shape)] + [PartialShape([*chroma, Dimension(1)])] * 2


def check_element(element: Type, what: str = "NV12/I420 conversion") -> str | None:
    """Why ``element`` cannot be converted, or None."""
    if element in _TYPES:
        return None
    return (f"{what} takes u8 or float (f16, f32, f64) data, got {element.get_type_name()}; add "
            "convert_element_type(Type.f32) before convert_color or set the tensor's element type")


def emit_yuv(out: Emitter, color: ColorFormat, target: ColorFormat, planes: list[ir.Value], element: Type,
             result: PartialShape) -> ir.Value:
    """Add the nodes converting ``planes`` (of ``element`` type) to RGB or BGR ``[N, H, W, 3]`` to
    ``out`` (an Emitter); returns the image, of ``element`` type and ``result`` shape.  GRAY is the
    Y plane as it is (``[N, H, W, 1]``), as OpenVINO takes it."""
    converter = _Yuv(out, element)
    if target == ColorFormat.GRAY:
        return converter.luma(color, planes, result)
    return converter.convert(color, target == ColorFormat.BGR, planes, result)


class _Yuv:
    """The node-building helpers of one conversion."""

    def __init__(self, out: Emitter, element: Type) -> None:
        self.out = out
        self.element = element

    def op(self, op_type: str, inputs: list[ir.Value], element: Type | None = None,
           shape: PartialShape | None = None, **attributes: object) -> ir.Value:
        return self.out.op(op_type, inputs, element or Type.f32,
                           shape if shape is not None else PartialShape.dynamic(), **attributes)

    def ints(self, values: list[int]) -> ir.Value:
        return self.out.ints(values)

    def number(self, value: float) -> ir.Value:
        return self.out.const(np.asarray(value, dtype=np.float32))

    def slice(self, value: ir.Value, begin: ir.Value, end: ir.Value, axis: int,
              element: Type) -> ir.Value:
        return self.op("Slice", [value, begin, end, self.ints([axis])], element)

    def float(self, value: ir.Value) -> ir.Value:
        if self.element == Type.f32:
            return value
        return self.op("Cast", [value], Type.f32, to=int(ir.DataType.FLOAT))

    def upsample(self, plane: ir.Value, half: ir.Value, full: ir.Value) -> ir.Value:
        """A chroma plane (any shape of N * h * w elements) repeated over 2x2 pixels: [N, 2h, 2w, 1]."""
        plane = self.op("Reshape", [plane, half], self.element)
        wide = self.op("Concat", [plane, plane], self.element, axis=3)                  # [N, h, w, 2]
        rows = self.op("Reshape", [wide, self.ints([0, 0, 1, -1])], self.element)     # [N, h, 1, 2w]
        tall = self.op("Concat", [rows, rows], self.element, axis=2)                    # [N, h, 2, 2w]
        return self.float(self.op("Reshape", [tall, full], self.element))

    def image_rows(self, data: ir.Value) -> ir.Value:
        """The image's height (two thirds of a single plane's rows), as a one-value i64 tensor."""
        rows = self.slice(self.op("Shape", [data], Type.i64), self.ints([1]), self.ints([2]), 0, Type.i64)
        return self.op("Div", [self.op("Mul", [rows, self.ints([2])], Type.i64), self.ints([3])], Type.i64)

    def luma(self, color: ColorFormat, planes: list[ir.Value], result: PartialShape) -> ir.Value:
        """The Y plane: a single plane's first rows, or the first of several planes."""
        if not _single(color):
            return planes[0]
        return self.out.op("Slice", [planes[0], self.ints([0]), self.image_rows(planes[0]), self.ints([1])],
                           self.element, result)

    def convert(self, color: ColorFormat, bgr: bool, planes: list[ir.Value],
                result: PartialShape) -> ir.Value:
        element = self.element
        if _single(color):
            data = planes[0]
            height = self.image_rows(data)
            y = self.slice(data, self.ints([0]), height, 1, element)
            rest = self.slice(data, height, self.ints([_INT64_MAX]), 1, element)        # [N, H/2, W, 1]
            if color == ColorFormat.NV12_SINGLE_PLANE:
                uv = self.op("Reshape", [rest, self.ints([0, 0, -1, 2])], element)
                chroma = [self.slice(uv, self.ints([i]), self.ints([i + 1]), 3, element) for i in (0, 1)]
            else:
                flat = self.op("Reshape", [rest, self.ints([0, 2, -1])], element)      # [N, 2, h * w]
                chroma = [self.slice(flat, self.ints([i]), self.ints([i + 1]), 1, element) for i in (0, 1)]
        elif color == ColorFormat.NV12_TWO_PLANES:
            y, uv = planes
            chroma = [self.slice(uv, self.ints([i]), self.ints([i + 1]), 3, element) for i in (0, 1)]
        else:
            y, *chroma = planes
        full = self.op("Shape", [y], Type.i64)
        half = self.op("Div", [full, self.ints([1, 2, 2, 1])], Type.i64)
        u, v = (self.upsample(plane, half, full) for plane in chroma)
        luma = self.op("Mul", [self.op("Sub", [self.float(y), self.number(16.0)]), self.number(1.164)])
        d = self.op("Sub", [u, self.number(128.0)])
        e = self.op("Sub", [v, self.number(128.0)])
        r = self.op("Add", [luma, self.op("Mul", [e, self.number(1.596)])])
        g = self.op("Sub", [self.op("Sub", [luma, self.op("Mul", [d, self.number(0.391)])]),
                            self.op("Mul", [e, self.number(0.813)])])
        b = self.op("Add", [luma, self.op("Mul", [d, self.number(2.018)])])
        joined = self.op("Concat", [b, g, r] if bgr else [r, g, b], axis=3)
        clipped = self.op("Clip", [joined, self.number(0.0), self.number(255.0)],
                          shape=result if element == Type.f32 else None)
        if element == Type.f32:
            return clipped
        if element == Type.u8:
            clipped = self.op("Round", [clipped])
        return self.op("Cast", [clipped], element, result, to=int(element.data_type))
