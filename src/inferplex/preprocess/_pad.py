"""The ``pad`` step: its arguments checked as OpenVINO's, the shape it makes, and its ONNX nodes.

As in OpenVINO, ``pads_begin[i]``/``pads_end[i]`` count elements added before and after dimension
``i`` of the tensor as it is at that step (its layout then, one pad per dimension); a negative
pad removes elements, after the positive pads are added.  CONSTANT, EDGE and REFLECT are ONNX
Pad; SYMMETRIC, which ONNX Pad has no mode for, is each side's reversed run of edge elements
(Slice with step -1) concatenated with the tensor; negative pads are a Slice after them.
"""

from __future__ import annotations

import numbers
import operator
from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx_ir as ir

from inferplex.api.shapes import Dimension, PartialShape
from inferplex.api.types import Type
from inferplex.errors import InputError, InputTypeError, ModelError
from inferplex.preprocess._enums import PaddingMode

__all__ = ["check_pad", "emit_pad", "pad_arguments", "padded"]

_INT64 = np.iinfo(np.int64)

_ONNX_MODES = {PaddingMode.CONSTANT: "constant", PaddingMode.EDGE: "edge",
               PaddingMode.REFLECT: "reflect"}


def _pads(values: Any, what: str) -> tuple[int, ...]:
    if isinstance(values, (str, bytes)) or not isinstance(values, (Sequence, np.ndarray)):
        raise InputTypeError(f"pad {what} takes a list of ints (one per dimension of the tensor), "
                             f"got {type(values).__name__} {values!r}")
    try:
        pads = tuple(operator.index(v) for v in values)
    except TypeError as error:
        raise InputTypeError(f"pad {what} takes a list of ints (one per dimension of the tensor), "
                             f"got {values!r}") from error
    if any(not _INT64.min <= p <= _INT64.max for p in pads):
        raise InputTypeError(f"pad {what} {list(pads)}: every pad must fit in int64")
    return pads


def _fill(value: Any) -> float:
    if isinstance(value, np.ndarray):
        items = value.reshape(-1).tolist()
    elif isinstance(value, Sequence) and not isinstance(value, (str, bytes)):
        items = list(value)
    else:
        items = [value]
    if len(items) != 1:
        raise InputError(f"pad value takes one number (or a list of one), got {len(items)} values "
                         f"{items!r}")
    if not isinstance(items[0], numbers.Real):
        raise InputTypeError(f"pad value takes a number, got {type(items[0]).__name__} {items[0]!r}")
    return float(items[0])


def pad_arguments(pads_begin: Any, pads_end: Any, value: Any,
                  mode: Any) -> tuple[tuple[int, ...], tuple[int, ...], float, PaddingMode]:
    """The checked arguments of ``pad``: pads as int tuples, the fill value as a float, the mode.

    InputTypeError for an argument of a type pad does not take (OpenVINO's TypeError),
    InputError for pad lists of different lengths or a value list not of one number."""
    if not isinstance(mode, PaddingMode):
        names = ", ".join(PaddingMode.__members__)
        raise InputTypeError(f"pad mode takes a PaddingMode ({names}), got {type(mode).__name__} "
                             f"{mode!r}")
    begin, end = _pads(pads_begin, "pads_begin"), _pads(pads_end, "pads_end")
    if len(begin) != len(end):
        raise InputError(f"pad pads_begin {list(begin)} and pads_end {list(end)} differ in length; "
                         "give one pad per dimension of the tensor in each")
    return begin, end, _fill(value), mode


def check_pad(begin: tuple[int, ...], element: Type, rank: int | None) -> None:
    """ModelError unless the tensor at the pad step is a float one with one pad per dimension."""
    if not element.is_real():
        raise ModelError("pad applies to float tensors (as in OpenVINO); this one is "
                         f"{element.get_type_name()} "
                         "there: add convert_element_type(Type.f32) before it")
    if rank is not None and len(begin) != rank:
        raise ModelError(f"pad takes one pad per dimension: pads_begin and pads_end have "
                         f"{len(begin)} values, but the tensor has rank {rank} there")


def padded(shape: PartialShape, begin: Sequence[int], end: Sequence[int]) -> PartialShape:
    """``shape`` with ``begin[i] + end[i]`` added to dimension ``i`` (a length never below 0)."""
    if shape.rank.is_dynamic:
        return PartialShape(shape)
    return PartialShape([_grown(d, b + e) for d, b, e in zip(shape, begin, end, strict=True)])


def _grown(dim: Dimension, grow: int) -> Dimension:
    if dim.is_static:
        return Dimension(max(dim.get_length() + grow, 0))
    high = dim.get_max_length()
    return Dimension(max(dim.get_min_length() + grow, 0), -1 if high == -1 else max(high + grow, 0))


def emit_pad(out: Any, value: ir.Value, element: Type, shape: PartialShape,
             args: tuple[Any, ...]) -> ir.Value:
    """Add the nodes of a pad (``args``: begin, end, fill, mode) after ``value`` to ``out`` (an
    Emitter); returns the padded value."""
    begin, end, fill, mode = args
    check_pad(begin, element, None if shape.rank.is_dynamic else len(shape))
    grow_begin, grow_end = [max(b, 0) for b in begin], [max(e, 0) for e in end]
    _check_mirror(shape, grow_begin, grow_end, mode)
    if any(grow_begin) or any(grow_end):
        if mode is PaddingMode.SYMMETRIC:
            value, shape = _mirror(out, value, element, shape, grow_begin, grow_end)
        else:
            inputs = [value, out.ints(grow_begin + grow_end)]
            if mode is PaddingMode.CONSTANT:
                inputs.append(out.const(np.array(fill, dtype=element.to_dtype())))
            shape = padded(shape, grow_begin, grow_end)
            value = out.op("Pad", inputs, element, shape, mode=_ONNX_MODES[mode])
    cut = [axis for axis, (b, e) in enumerate(zip(begin, end, strict=True)) if b < 0 or e < 0]
    if not cut:
        return value
    starts = [max(-begin[a], 0) for a in cut]
    ends = [end[a] if end[a] < 0 else int(_INT64.max) for a in cut]
    result = padded(shape, [min(b, 0) for b in begin], [min(e, 0) for e in end])
    return out.op("Slice", [value, out.ints(starts), out.ints(ends), out.ints(cut)], element, result)


def _check_mirror(shape: PartialShape, begin: list[int], end: list[int], mode: PaddingMode) -> None:
    """ModelError, as OpenVINO's, when a mirror pad is longer than a static dimension allows."""
    if mode not in (PaddingMode.REFLECT, PaddingMode.SYMMETRIC) or shape.rank.is_dynamic:
        return
    spare = 1 if mode is PaddingMode.REFLECT else 0
    for axis, (dim, b, e) in enumerate(zip(shape, begin, end, strict=True)):
        if dim.is_static and max(b, e) > dim.get_length() - spare:
            raise ModelError(f"pad {mode.name}: pads of dimension {axis} ({b} before, {e} after) "
                             f"must be at most {dim.get_length() - spare}, its length"
                             f"{' - 1' if spare else ''} (tensor shape {shape} there)")


def _mirror(out: Any, value: ir.Value, element: Type, shape: PartialShape, begin: list[int],
            end: list[int]) -> tuple[ir.Value, PartialShape]:
    """SYMMETRIC padding, one axis at a time: the first ``b`` elements reversed, the tensor, the
    last ``e`` elements reversed."""
    for axis, (b, e) in enumerate(zip(begin, end, strict=True)):
        if not b and not e:
            continue
        parts = []
        if b:
            parts.append(_reversed_run(out, value, element, shape, axis, b, b - 1, int(_INT64.min)))
        parts.append(value)
        if e:
            parts.append(_reversed_run(out, value, element, shape, axis, e, -1, -e - 1))
        grow = [0] * len(begin)
        grow[axis] = b + e
        shape = padded(shape, grow, [0] * len(begin))
        value = out.op("Concat", parts, element, shape, axis=axis)
    return value, shape


def _reversed_run(out: Any, value: ir.Value, element: Type, shape: PartialShape, axis: int,
                  length: int, start: int, stop: int) -> ir.Value:
    run = PartialShape(shape)
    if run.rank.is_static:
        run[axis] = Dimension(length)
    inputs = [value, out.ints([start]), out.ints([stop]), out.ints([axis]), out.ints([-1])]
    return out.op("Slice", inputs, element, run)
