"""Sub-byte element types (u1, u2, u3, u4, i4, u6, nf4, f4e2m1) packed into bytes, as OpenVINO lays them out.

OpenVINO's ``Tensor`` keeps these types packed: ``byte_size`` bytes for
``size`` elements, ``tensor.data`` a flat uint8 array (int8 for i4) of those
bytes.  :class:`inferplex.api.tensor.Tensor` does the same, and converts to
element values (numpy / ml_dtypes arrays, one element per byte) where a model
or numpy reads the tensor.

Layouts, in memory (OpenVINO's, which ONNX shares for its 2- and 4-bit types):

- 1 bit: eight to a byte, the first element in the highest bit;
- 2 and 4 bits: four or two to a byte, the first element in the lowest bits;
- 3 and 6 bits: OpenVINO's transposed layout, eight u3 (four u6) in three
  bytes: their low 2 (4) bits first, highest element first in each byte, then
  a byte of their high bits.

``pack_data``/``unpack_data`` (:mod:`inferplex.helpers`) write 1, 2 and 4-bit
values first-in-highest-bits, as OpenVINO's helpers of that name do.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

__all__ = ["from_codes", "pack", "packed_bits", "packed_size", "to_codes", "unpack"]

_TRANSPOSED = {3: (8, 2), 6: (4, 4)}
"""bits -> (elements per 3-byte group, low bits written first) of OpenVINO's transposed layouts."""


def packed_bits(element: Any) -> int:
    """The bitwidth of ``element`` (an ``ov.Type``) where it is under 8 bits, else 0."""
    bits = int(element.get_bitwidth())
    return bits if 0 < bits < 8 else 0


def packed_size(bits: int, count: int) -> int:
    """Bytes that ``count`` elements of ``bits`` bits take (3-byte groups for u3 and u6)."""
    if bits in _TRANSPOSED:
        per_group = _TRANSPOSED[bits][0]
        return -(-count // per_group) * 3
    return math.ceil(count * bits / 8)


def pack(codes: np.ndarray, bits: int, *, first_high: bool | None = None) -> np.ndarray:
    """``codes`` (uint8, each under ``2**bits``) packed into bytes, in OpenVINO's memory layout
    unless ``first_high`` says where the first element of each byte goes."""
    flat = np.ascontiguousarray(codes, dtype=np.uint8).reshape(-1)
    if bits in _TRANSPOSED:
        return _pack_transposed(flat, bits)
    high = (bits == 1) if first_high is None else first_high
    per_byte = 8 // bits
    padded = np.zeros(-(-flat.size // per_byte) * per_byte, dtype=np.uint8)
    padded[: flat.size] = flat & ((1 << bits) - 1)
    shifts = np.arange(per_byte, dtype=np.uint8) * bits
    if high:
        shifts = shifts[::-1]
    return np.bitwise_or.reduce(padded.reshape(-1, per_byte) << shifts, axis=1).astype(np.uint8)


def unpack(data: np.ndarray, bits: int, count: int, *, first_high: bool | None = None) -> np.ndarray:
    """The first ``count`` codes (uint8) of packed bytes ``data``; the inverse of :func:`pack`."""
    flat = np.ascontiguousarray(data).reshape(-1).view(np.uint8)
    if bits in _TRANSPOSED:
        return _unpack_transposed(flat, bits)[:count]
    high = (bits == 1) if first_high is None else first_high
    per_byte = 8 // bits
    shifts = np.arange(per_byte, dtype=np.uint8) * bits
    if high:
        shifts = shifts[::-1]
    codes = (flat[:, None] >> shifts) & np.uint8((1 << bits) - 1)
    return codes.reshape(-1)[:count].astype(np.uint8)


def to_codes(values: np.ndarray, bits: int) -> np.ndarray:
    """Each element's bit pattern (uint8): ml_dtypes' 2- and 4-bit types keep it in their byte's low
    bits; plain integers are masked to ``bits`` (-1 as i4 is 15)."""
    array = np.asarray(values)
    raw = array.view(np.uint8) if array.dtype.itemsize == 1 and array.dtype.kind == "V" else \
        array.astype(np.int64)
    return (raw & ((1 << bits) - 1)).astype(np.uint8)


def from_codes(codes: np.ndarray, dtype: np.dtype[Any], shape: tuple[int, ...]) -> np.ndarray:
    """Bit patterns as values of ``dtype`` (ml_dtypes' int4, uint4, float4_e2m1fn ... or uint8)."""
    return np.ascontiguousarray(codes, dtype=np.uint8).view(dtype).reshape(shape)


def _pack_transposed(flat: np.ndarray, bits: int) -> np.ndarray:
    per_group, low = _TRANSPOSED[bits]
    padded = np.zeros(-(-flat.size // per_group) * per_group, dtype=np.uint8)
    padded[: flat.size] = flat & ((1 << bits) - 1)
    groups = padded.reshape(-1, per_group)
    lows = pack(groups & ((1 << low) - 1), low, first_high=True).reshape(groups.shape[0], 2)
    highs = pack(groups >> low, bits - low, first_high=True).reshape(groups.shape[0], 1)
    return np.concatenate([lows, highs], axis=1).reshape(-1)


def _unpack_transposed(flat: np.ndarray, bits: int) -> np.ndarray:
    per_group, low = _TRANSPOSED[bits]
    groups = flat[: flat.size - flat.size % 3].reshape(-1, 3)
    lows = unpack(groups[:, :2], low, groups.shape[0] * per_group, first_high=True)
    highs = unpack(groups[:, 2], bits - low, groups.shape[0] * per_group, first_high=True)
    return (lows | (highs << low)).astype(np.uint8)
