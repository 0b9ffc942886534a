"""``pack_data`` / ``unpack_data``: sub-byte element values to and from packed bytes, as OpenVINO's helpers.

OpenVINO's ``openvino.helpers.pack_data`` writes ``u1``, ``u2``, ``u4``, ``i4``,
``nf4`` and ``f4e2m1`` values first element in the highest bits of each byte,
and ``u3``/``u6`` in its transposed layout; ``unpack_data`` reads them back.
These do the same, so programs that exchange packed buffers with OpenVINO run
unchanged.  (A ``Tensor``'s own memory puts 2- and 4-bit elements first in the
lowest bits, as OpenVINO's does: :mod:`inferplex.api.packed`.)
"""

from __future__ import annotations

from typing import Any

import numpy as np

from inferplex.api import packed
from inferplex.api.types import type_name
from inferplex.errors import InputError

__all__ = ["pack_data", "unpack_data"]

_PACKED = {"u1": 1, "u2": 2, "u3": 3, "u4": 4, "i4": 4, "u6": 6, "nf4": 4, "f4e2m1": 4}


def _bits(element_type: Any) -> int:
    name = type_name(element_type)
    if name not in _PACKED:
        raise InputError(f"pack_data/unpack_data take a sub-byte type ({', '.join(_PACKED)}), got {name}")
    return _PACKED[name]


def pack_data(array: np.ndarray, element_type: Any) -> np.ndarray:
    """``array``'s values (each fitting ``element_type``) packed into a flat uint8 array."""
    bits = _bits(element_type)
    values = np.asarray(array).reshape(-1)
    low, high = (-8, 7) if type_name(element_type) == "i4" else (0, (1 << bits) - 1)
    if values.size and (values.min() < low or values.max() > high or not np.all(values == np.round(values))):
        raise InputError(f"pack_data: values must be integers in [{low}, {high}] for "
                         f"{type_name(element_type)}")
    return packed.pack(packed.to_codes(values.astype(np.int64), bits), bits, first_high=True)


def unpack_data(array: np.ndarray, element_type: Any, shape: Any) -> np.ndarray:
    """The values of a packed uint8 buffer, as an array of ``shape`` (int8 for i4, else uint8)."""
    bits = _bits(element_type)
    dims = tuple(int(d) for d in shape)
    count = int(np.prod(dims)) if dims else 1
    codes = packed.unpack(np.asarray(array), bits, count, first_high=True)
    if codes.size < count:
        raise InputError(f"unpack_data: {np.asarray(array).nbytes} bytes hold {codes.size} "
                         f"{type_name(element_type)} values, shape {list(dims)} needs {count}")
    if type_name(element_type) == "i4":
        return np.where(codes > 7, codes.astype(np.int16) - 16, codes).astype(np.int8).reshape(dims)
    return codes.reshape(dims)
