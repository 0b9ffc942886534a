"""OpenVINO's discrete Fourier transforms: DFT, IDFT (opset 7), RDFT and IRDFT (opset 9), as ONNX
DFTs (one a transformed axis).

OpenVINO keeps a complex tensor's real and imaginary parts in a last axis of 2, as ONNX does;
ONNX's DFT transforms the axes after a batch dim, so the data takes a leading dim of 1 for the
transforms.  ``axes`` count the dims before the complex axis (a negative axis ``a`` is
``a + rank - 1`` for DFT, IDFT and IRDFT, ``a + rank`` for RDFT's real input); ``signal_size``
(-1: the axis's own length) pads with zeros or trims each axis before its transform.  The inverse
transforms divide by the signal's size.  RDFT transforms its real input as complex (a zero
imaginary part) and keeps the non-redundant half of its last axis; IRDFT rebuilds the full
spectrum of its last axis from the half given (the rest is the conjugate mirror) and keeps the
real part.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx_ir as ir

from inferplex._opsets.build import NodeInput, as_op, constant_ints, rank_of, step, value_of
from inferplex.api.nodes import Node
from inferplex.errors import InputError

__all__ = ["dft", "idft", "irdft", "rdft"]

_FIRST = np.array([0], np.int64)


def dft(data: NodeInput, axes: NodeInput, signal_size: NodeInput = None, name: str | None = None) -> Node:
    """The discrete Fourier transform of complex ``data`` [..., 2] over ``axes``."""
    x, spans = _prepared("DFT", data, axes, signal_size, complex_input=True)
    for axis, size in spans:
        x = _transform(x, axis, size, inverse=False)
    return as_op("DFT", step("Squeeze", [x, _FIRST]), name)


def idft(data: NodeInput, axes: NodeInput, signal_size: NodeInput = None, name: str | None = None) -> Node:
    """The inverse discrete Fourier transform of complex ``data`` [..., 2] over ``axes`` (divided
    by the signal's size)."""
    x, spans = _prepared("IDFT", data, axes, signal_size, complex_input=True)
    for axis, size in spans:
        x = _transform(x, axis, size, inverse=True)
    return as_op("IDFT", step("Squeeze", [x, _FIRST]), name)


def rdft(data: NodeInput, axes: NodeInput, signal_size: NodeInput = None, name: str | None = None) -> Node:
    """The discrete Fourier transform of real ``data`` over ``axes``: complex [..., 2], the last
    of ``axes`` keeping its ``n // 2 + 1`` non-redundant terms."""
    x, spans = _prepared("RDFT", data, axes, signal_size, complex_input=False)
    x = step("Unsqueeze", [x, np.array([-1], np.int64)])
    x = step("Pad", [x, np.array([0] * (2 * rank_of(x, "rdft") - 1) + [1], np.int64)])  # imaginary 0
    for axis, size in spans:
        x = _transform(x, axis, size, inverse=False)
    last_axis = spans[-1][0]
    length = x.shape[last_axis] if x.shape is not None else None
    if isinstance(length, int):
        x = _fit(x, last_axis, length // 2 + 1)
    else:
        half = step("Add", [step("Div", [step("Shape", [x], {"start": last_axis, "end": last_axis + 1}),
                                         np.array([2], np.int64)]), np.array([1], np.int64)])
        x = step("Slice", [x, np.array([0], np.int64), half, np.array([last_axis], np.int64)])
    return as_op("RDFT", step("Squeeze", [x, _FIRST]), name)


def irdft(data: NodeInput, axes: NodeInput, signal_size: NodeInput = None, name: str | None = None) -> Node:
    """The real inverse of :func:`rdft`: complex ``data`` [..., 2] whose last of ``axes`` holds the
    ``n // 2 + 1`` first terms of a Hermitian spectrum; the output's length on that axis is its
    ``signal_size`` (by default ``2 * (length - 1)``)."""
    x, spans = _prepared("IRDFT", data, axes, signal_size, complex_input=True)
    for axis, size in spans[:-1]:
        x = _transform(x, axis, size, inverse=True)
    axis, size = spans[-1]
    if size == -1:
        length = x.shape[axis] if x.shape is not None else None
        if not isinstance(length, int):
            raise InputError(f"irdft over an axis of dynamic length ({axis - 1}) needs its signal_size")
        size = 2 * (length - 1)
    full = _hermitian(x, axis, size)
    x = _transform(full, axis, size, inverse=True)
    real = step("Slice", [x, np.array([0], np.int64), np.array([1], np.int64), np.array([-1], np.int64)])
    return as_op("IRDFT", step("Squeeze", [real, np.array([0, -1], np.int64)]), name)


# --- shared ---------------------------------------------------------------------------------------


def _prepared(type_name: str, data: NodeInput, axes: NodeInput, signal_size: NodeInput,
              complex_input: bool) -> tuple[ir.Value, list[tuple[int, int]]]:
    """``data`` with a leading batch dim of 1, and each transformed axis (of the batched data) with
    its signal size (-1: its own length)."""
    x = value_of(data)
    rank = rank_of(x, type_name.lower())
    last = x.shape[-1] if x.shape is not None and len(x.shape) else None
    if complex_input and isinstance(last, int) and last != 2:
        raise InputError(f"{type_name.lower()} takes complex data with a last axis of 2 (real, imaginary); "
                         f"got a last axis of {last}")
    signal_rank = rank - 1 if complex_input else rank
    listed = constant_ints(axes, f"{type_name.lower()} axes")
    normal = [a + signal_rank if a < 0 else a for a in listed]
    if not listed or any(not 0 <= a < signal_rank for a in normal) or len(set(normal)) != len(normal):
        raise InputError(f"{type_name.lower()} axes {listed}: give distinct axes in "
                         f"[-{signal_rank}, {signal_rank - 1}] (the dims before the complex axis)")
    sizes = [-1] * len(normal) if signal_size is None else constant_ints(signal_size,
                                                                          f"{type_name.lower()} signal_size")
    if len(sizes) != len(normal):
        raise InputError(f"{type_name.lower()} signal_size {sizes} has {len(sizes)} values for "
                         f"{len(normal)} axes; give one a transformed axis (-1: its own length)")
    batched = step("Unsqueeze", [x, _FIRST])
    return batched, [(a + 1, s) for a, s in zip(normal, sizes, strict=True)]


def _transform(x: ir.Value, axis: int, size: int, inverse: bool) -> ir.Value:
    """One ONNX DFT along ``axis``, the signal first padded with zeros or trimmed to ``size``."""
    attrs: dict[str, Any] = {"axis": axis, "inverse": int(inverse)}
    length = x.shape[axis] if x.shape is not None else None
    if size == -1 or size == length:
        return step("DFT", [x], attrs)
    if not isinstance(length, int):
        return step("DFT", [x, np.array(size, np.int64)], attrs)
    return step("DFT", [_fit(x, axis, size)], attrs)


def _fit(x: ir.Value, axis: int, size: int) -> ir.Value:
    """``x`` padded with zeros at the end of ``axis`` or trimmed to ``size`` (a static length)."""
    length = x.shape[axis] if x.shape is not None else None
    if isinstance(length, int) and length < size:
        rank = rank_of(x, "a Fourier transform")
        pads = np.zeros(2 * rank, np.int64)
        pads[rank + axis] = size - length
        return step("Pad", [x, pads])
    if length == size:
        return x
    return step("Slice", [x, np.array([0], np.int64), np.array([size], np.int64), np.array([axis], np.int64)])


def _hermitian(x: ir.Value, axis: int, size: int) -> ir.Value:
    """The full spectrum of ``size`` terms along ``axis`` from the first ``size // 2 + 1`` of ``x``
    (zero-padded where ``x`` has fewer); the others are the conjugates of terms ``size - k``."""
    half = size // 2 + 1
    x = _fit(x, axis, half)
    mirrored = size - half
    if mirrored == 0:
        return x
    tail = step("Slice", [x, np.array([mirrored], np.int64), np.array([0], np.int64),
                          np.array([axis], np.int64), np.array([-1], np.int64)])
    conjugate = step("Mul", [tail, value_of(np.array([1, -1], x.dtype.numpy() if x.dtype else np.float32))])
    return step("Concat", [x, conjugate], {"axis": axis})
