"""The enums of ``ov.preprocess``: ResizeAlgorithm, ColorFormat and PaddingMode.

Members carry OpenVINO's names and integer values (``ResizeAlgorithm.RESIZE_LINEAR.value == 0``),
convert with ``int()``, and are found by value or by name (``ColorFormat(5)``,
``ColorFormat("RGB")``).
"""

from __future__ import annotations

import enum
from typing import Any, TypeVar

from inferplex.errors import InputError, InputTypeError

__all__ = ["ColorFormat", "PaddingMode", "ResizeAlgorithm", "member"]

_E = TypeVar("_E", bound="_OpenVINOEnum")


class _OpenVINOEnum(enum.Enum):
    """An enum whose members have OpenVINO's integer values and can also be looked up by name."""

    @classmethod
    def _missing_(cls, value: object) -> Any:
        if isinstance(value, str):
            return cls.__members__.get(value)
        return None

    def __int__(self) -> int:
        return int(self.value)

    def __index__(self) -> int:
        return int(self.value)


class ResizeAlgorithm(_OpenVINOEnum):
    """How ``resize`` interpolates (ONNX Resize, half-pixel coordinates).

    The ``*_PILLOW`` modes resample as Pillow does (antialiased when downscaling; ONNX Resize's
    ``antialias``, from opset 18: a model of an older opset is converted first); the others
    do not antialias."""

    RESIZE_LINEAR = 0
    RESIZE_CUBIC = 1
    RESIZE_NEAREST = 2
    RESIZE_BILINEAR_PILLOW = 3
    RESIZE_BICUBIC_PILLOW = 4


class ColorFormat(_OpenVINOEnum):
    """Colour formats of image tensors; conversions from RGB, BGR, RGBX, BGRX, NV12 and I420 (one plane or
    several) to RGB or BGR are built."""

    UNDEFINED = 0
    NV12_SINGLE_PLANE = 1
    NV12_TWO_PLANES = 2
    I420_SINGLE_PLANE = 3
    I420_THREE_PLANES = 4
    RGB = 5
    BGR = 6
    GRAY = 7
    RGBX = 8
    BGRX = 9


class PaddingMode(_OpenVINOEnum):
    """How ``pad`` fills the new elements: with a constant, the edge element repeated, a mirror
    without the edge (REFLECT) or a mirror that repeats it (SYMMETRIC).

    EDGE is OpenVINO's C++ ``PaddingMode::EDGE`` (value 1), which its Python enum leaves out."""

    CONSTANT = 0
    EDGE = 1
    REFLECT = 2
    SYMMETRIC = 3


def member(kind: type[_E], value: Any, what: str) -> _E:
    """``value`` as a member of ``kind`` (a member, its integer value or its name); InputTypeError
    or InputError naming ``what`` and the members when it is none of them."""
    if isinstance(value, kind):
        return value
    names = ", ".join(kind.__members__)
    if not isinstance(value, (int, str)) or isinstance(value, bool):
        raise InputTypeError(f"{what} takes a {kind.__name__} ({names}), got {type(value).__name__} "
                             f"{value!r}")
    try:
        return kind(value)
    except ValueError as error:
        raise InputError(f"{what} takes a {kind.__name__} ({names}), got {value!r}") from error
