"""``pack_data`` / ``unpack_data``: sub-byte element types in OpenVINO's packed byte layout.

OpenVINO stores ``u1`` eight to a byte and ``u4``/``i4``/``nf4`` two to a byte, the first
element in the highest bits.  Programs
that exchange packed buffers with OpenVINO (``from openvino.helpers import
pack_data``) use these; inferplex's own ``Tensor`` keeps one element per byte.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from inferplex.api.types import Type
from inferplex.errors import InputError

__all__ = ["pack_data", "unpack_data"]

_PACKED = {"u1": 1, "u4": 4, "i4": 4, "nf4": 4}


def _name(element_type: Any) -> str:
    if isinstance(element_type, str):
        return element_type
    getter = getattr(element_type, "get_type_name", None)
    return str(getter()) if callable(getter) else Type(element_type).get_type_name()


def _bits(element_type: Any) -> int:
    name = _name(element_type)
    if name not in _PACKED:
        raise InputError(f"pack_data/unpack_data take a sub-byte type ({', '.join(_PACKED)}), got {name}")
    return _PACKED[name]


def pack_data(array: np.ndarray, element_type: Any) -> np.ndarray:
    """``array``'s values (each fitting ``element_type``) packed into a flat uint8 array."""
    bits = _bits(element_type)
    values = np.asarray(array).reshape(-1).astype(np.int64)
    low, high = (-8, 7) if _name(element_type) == "i4" else (0, (1 << bits) - 1)
    if values.size and (values.min() < low or values.max() > high):
        raise InputError(f"pack_data: values must lie in [{low}, {high}] for {_name(element_type)}")
    per_byte = 8 // bits
    padded = np.zeros(-(-values.size // per_byte) * per_byte, dtype=np.uint8)
    padded[: values.size] = (values & ((1 << bits) - 1)).astype(np.uint8)
    groups = padded.reshape(-1, per_byte).astype(np.uint16)
    shifts = np.arange(per_byte)[::-1] * bits
    return (groups << shifts).sum(axis=1).astype(np.uint8)


def unpack_data(array: np.ndarray, element_type: Any, shape: Any) -> np.ndarray:
    """The values of a packed uint8 buffer, as an array of ``shape`` (int8 for i4, else uint8)."""
    bits = _bits(element_type)
    per_byte = 8 // bits
    packed = np.asarray(array).reshape(-1).view(np.uint8).astype(np.uint16)
    shifts = np.arange(per_byte)[::-1] * bits
    values = ((packed[:, None] >> shifts) & ((1 << bits) - 1)).reshape(-1)
    dims = tuple(int(d) for d in shape)
    count = int(np.prod(dims)) if dims else 1
    out = values[:count].astype(np.int16)
    if _name(element_type) == "i4":
        out = np.where(out > 7, out - 16, out).astype(np.int8)
        return out.reshape(dims)
    return out.astype(np.uint8).reshape(dims)
