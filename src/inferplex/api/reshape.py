"""Model.reshape: new input shapes in every form OpenVINO takes, and shape inference after.

A shape may be given as an ``ov.PartialShape`` or ``ov.Shape``, a list or
tuple of dims, a string (``"1,3,?,?"``, ``"[1..8,3,224,224]"``), or any other
object whose ``to_string()`` prints such a string or that iterates into dims.
A dim is an int (``-1`` is dynamic), ``None``, ``"?"``, an ``ov.Dimension``
(``Dimension()``, ``Dimension(1, 8)``, ``Dimension(2, -1)``), a range ``(1, 8)``
or ``"1..8"`` (``"1.."`` and ``"..8"`` leave one end open), or an object whose
``to_string()`` prints one of those.

ONNX has no ranged dimension, so a range is kept as a symbolic dimension named
``"1..8"``: it survives saving, shape inference carries it downstream, and
input binding checks a tensor's dimension against its bounds.  A name that is
not a number or range (``"batch"``) is an ONNX symbolic dimension: inputs that
share it must agree on its size.

After the inputs change, ONNX shape inference runs over the whole graph (on a
copy without the large weights, where ONNX Runtime's contrib ops stand as
standard ops of the same output shapes: :mod:`inferplex.shape_inference`),
so every downstream port shows the new shapes.  A shape the model cannot take
(a rank a Conv refuses, channels its weight does not take, a size a Reshape
constant contradicts: :func:`inferplex.shape_inference.find_conflicts`) is an
:class:`~inferplex.errors.InputError` naming the input, the shape asked for and
the shape the model declares; the model is left as it was.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import onnx
import onnx_ir as ir

from inferplex.api.shapes import Dimension, PartialShape, Shape, parse_dimension_text, split_shape_text
from inferplex.api.types import type_name
from inferplex.errors import InputError
from inferplex.shape_inference import find_conflicts, infer, proto_dims, weightless_copy

__all__ = ["Dim", "apply_input_shapes", "apply_input_types", "as_dimension", "dim_bounds", "format_dims",
           "parse_shape"]

Dim = int | str | None
"""A dimension as stored: a size, a range or symbol name (``"1..8"``, ``"batch"``), None for any."""

_RANGE = re.compile(r"^\s*(\d*)\s*\.\.\s*(\d*)\s*$")
_SYMBOL = re.compile(r"^[A-Za-z_][A-Za-z0-9_.:/-]*$")
_ACCEPTED = ("a shape is a list of dims, a string such as '1,3,?,?' or '1..8,3,224,224', or an "
             "object printing '[1,3,?,?]'; a dim is an int (-1 dynamic), '?', a range (1, 8) or "
             "'1..8', or a symbol name")


def format_dims(dims: Sequence[Dim] | None) -> str:
    """OpenVINO's spelling of a shape: ``[1,3,?,?]``, ``[1..8,3]``; ``[...]`` for an unknown rank."""
    if dims is None:
        return "[...]"
    return "[" + ",".join("?" if d is None else str(d) for d in dims) + "]"


def dim_bounds(dim: Dim) -> tuple[int, int | None] | None:
    """``(min, max)`` of a ranged dim (max None when open); None for sizes, symbols and ``?``."""
    if not isinstance(dim, str):
        return None
    match = _RANGE.match(dim)
    if match is None or not (match.group(1) or match.group(2)):
        return None
    return int(match.group(1) or 0), int(match.group(2)) if match.group(2) else None


def as_dimension(dim: Dim) -> Dimension:
    """A stored dim as OpenVINO shows it: a size, a range (the symbol ``"1..8"``) or ``?``.

    ONNX symbols (``"batch"``) show as ``?``, as OpenVINO's ONNX reader shows them.
    """
    if isinstance(dim, int):
        return Dimension(dim)
    bounds = dim_bounds(dim)
    if bounds is None:
        return Dimension()
    low, high = bounds
    return Dimension(low, -1 if high is None else high)


def _range(low: int, high: int | None, given: Any) -> Dim:
    if low < 0 or (high is not None and high < low):
        raise InputError(f"dimension range {given!r} is not valid: need 0 <= min <= max")
    if high == low:
        return low
    if low == 0 and high is None:
        return None
    return f"{low or ''}..{'' if high is None else high}"  # OpenVINO prints "..8" and "1.."


def _parse_dim_text(text: str) -> Dim:
    """A dim written as OpenVINO writes one (``PartialShape``'s reading), or an ONNX symbol (``N``)."""
    text = text.strip()
    if not text:
        return None
    if _SYMBOL.match(text) and ".." not in text:
        return text
    try:
        low, high = parse_dimension_text(text)
    except InputError:
        raise InputError(f"dimension {text!r} is not understood; {_ACCEPTED}") from None
    return _range(low, high, text)


def _parse_dim(dim: Any) -> Dim:
    if dim is None:
        return None
    if isinstance(dim, Dimension):
        high = dim.get_max_length()
        return _range(dim.get_min_length(), None if high < 0 else high, dim)
    if isinstance(dim, (bool, np.bool_)):
        raise InputError(f"dimension {dim!r} is a bool; {_ACCEPTED}")
    if isinstance(dim, (int, np.integer)):
        if dim < -1:
            raise InputError(f"dimension {int(dim)} is negative; use -1 or '?' for a dynamic one")
        return None if dim == -1 else int(dim)
    if isinstance(dim, str):
        return _parse_dim_text(dim)
    if isinstance(dim, (tuple, list)) and len(dim) == 2 and all(
            isinstance(end, (int, np.integer)) and not isinstance(end, bool) for end in dim):
        low, high = int(dim[0]), int(dim[1])
        return _range(max(low, 0), None if high == -1 else high, tuple(dim))
    to_string = getattr(dim, "to_string", None)
    if callable(to_string):
        return _parse_dim_text(str(to_string()))
    raise InputError(f"dimension {dim!r} ({type(dim).__name__}) is not understood; {_ACCEPTED}")


def parse_shape(shape: Any) -> list[Dim] | None:
    """Dims from any shape form OpenVINO takes; None for a dynamic rank (``"[...]"``, ``"..."``).

    >>> parse_shape("1..8,3,?,?")
    ['1..8', 3, None, None]
    >>> parse_shape([(1, 8), -1, "?", 4])
    ['1..8', None, None, 4]
    """
    if isinstance(shape, (str, bytes)):
        text = shape.decode() if isinstance(shape, bytes) else shape
        return _parse_shape_text(text)
    if isinstance(shape, PartialShape):
        return None if shape.rank.is_dynamic else [_parse_dim(dim) for dim in shape]
    if isinstance(shape, Shape):
        return [int(dim) for dim in shape]
    if not isinstance(shape, (list, tuple, np.ndarray)):
        to_string = getattr(shape, "to_string", None)
        if callable(to_string):
            return _parse_shape_text(str(to_string()))
    if isinstance(shape, Iterable) and not isinstance(shape, Mapping):
        return [_parse_dim(dim) for dim in shape]
    raise InputError(f"shape {shape!r} ({type(shape).__name__}) is not understood; {_ACCEPTED}")


def _parse_shape_text(text: str) -> list[Dim] | None:
    parts = split_shape_text(text)
    return None if parts is None else [_parse_dim_text(part) for part in parts]


def _ir_dims(dims: Sequence[Dim] | None) -> ir.Shape | None:
    return None if dims is None else ir.Shape(list(dims))


def _dims_of(value: ir.Value) -> list[Dim] | None:
    if value.shape is None:
        return None
    return [d if isinstance(d, int) else d.value for d in value.shape]


# --- applying shapes -----------------------------------------------------------------------------


def apply_input_shapes(model: ir.Model, shapes: Mapping[int, list[Dim] | None]) -> None:
    """Set the shapes of the main graph's inputs ``{index: dims}`` and infer every other shape.

    On an InputError the model is left as it was.
    """
    graph = model.graph
    values = _node_outputs(graph)
    saved = {id(v): v.shape for v in [*graph.inputs, *values]}
    old_inputs = {index: _dims_of(graph.inputs[index]) for index in shapes}
    try:
        for index, dims in shapes.items():
            graph.inputs[index].shape = _ir_dims(dims)
        for value in values:
            value.shape = None
        _infer_into(model, shapes, old_inputs)
    except BaseException:
        for value in [*graph.inputs, *values]:
            value.shape = saved[id(value)]
        raise


def apply_input_types(model: ir.Model, types: Mapping[int, ir.DataType]) -> None:
    """Give the main graph's inputs ``{index: element type}`` and infer every type downstream anew,
    as OpenVINO retypes a Parameter (``convert_model(..., input=[("x", Type.f16)])``): the ops after
    it compute in the new type, and an op whose inputs then disagree (a float16 input against float32
    weights) is an InputError naming the input, the type given and the one the model declares.

    On an InputError the model is left as it was.
    """
    graph = model.graph
    changed = {i: t for i, t in types.items() if graph.inputs[i].dtype != t}
    if not changed:
        return
    values = [value for node in graph for value in node.outputs]
    saved = {id(v): (v.type, v.shape) for v in [*graph.inputs, *values]}
    declared = {i: graph.inputs[i].dtype for i in changed}
    asked = "; ".join(f"input {graph.inputs[i].name!r} of type {type_name(t)} (the model declares "
                      f"{type_name(declared[i]) if declared[i] is not None else 'no type'})"
                      for i, t in changed.items())
    try:
        for index, element in changed.items():
            graph.inputs[index].type = ir.TensorType(element)
        for value in values:
            value.type, value.shape = None, None
        try:
            inferred = _infer(model, strict=True)
        except onnx.shape_inference.InferenceError as error:
            raise InputError(f"the model cannot take {asked}: {_first_line(error)}") from error
        _write_inferred(model, inferred, every_type=True)
        untyped = [v.name or "?" for v in values if v.type is None and saved[id(v)][0] is not None]
        if untyped:
            raise InputError(f"the model cannot take {asked}: the types of {', '.join(untyped[:5])} "
                             "cannot be inferred after it; keep the input's type")
    except BaseException:
        for value in [*graph.inputs, *values]:
            value.type, value.shape = saved[id(value)]
        raise


def _node_outputs(graph: ir.Graph) -> list[ir.Value]:
    """Outputs of every node, subgraphs included (their shapes may depend on the inputs)."""
    return [value for node in ir.traversal.RecursiveGraphIterator(graph) for value in node.outputs]


def _infer_into(model: ir.Model, shapes: Mapping[int, list[Dim] | None],
                old_inputs: Mapping[int, list[Dim] | None]) -> None:
    try:
        inferred = _infer(model, strict=True)
    except onnx.shape_inference.InferenceError as error:
        if _fails_as_declared(model, old_inputs):
            inferred = _infer(model, strict=False)  # the model fails inference whatever the shapes
        else:
            asked = "; ".join(f"input {model.graph.inputs[i].name!r} {format_dims(d)} (the model "
                              f"declares {format_dims(old_inputs[i])})" for i, d in shapes.items())
            raise InputError(f"the model cannot take {asked}: {_first_line(error)}") from error
    _write_inferred(model, inferred)
    problems = find_conflicts(model.graph) if shapes else []
    if problems:
        asked = "; ".join(f"input {model.graph.inputs[i].name!r} {format_dims(d)} (the model declares "
                          f"{format_dims(old_inputs[i])})" for i, d in shapes.items())
        raise InputError(f"the model cannot take {asked}: {'; '.join(problems)}")


def _write_inferred(model: ir.Model, inferred: onnx.ModelProto, every_type: bool = False) -> None:
    """Copy the shapes ``inferred`` found into the main graph, with the types of untyped values that
    get a shape (a shape without a type cannot be saved); ``every_type``: of every untyped value."""
    by_name = {info.name: info for info in [*inferred.graph.value_info, *inferred.graph.output]}
    for node in model.graph:
        for value in node.outputs:
            info = by_name.get(value.name or "")
            if info is None or not info.type.HasField("tensor_type"):
                continue
            element = info.type.tensor_type.elem_type
            has_shape = info.type.tensor_type.HasField("shape")
            if value.type is None and element and (has_shape or every_type):
                value.type = ir.TensorType(ir.DataType(element))
            if has_shape:
                value.shape = ir.Shape(list(proto_dims(info.type.tensor_type.shape)))


def _first_line(error: Exception) -> str:
    return str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__


def _fails_as_declared(model: ir.Model, old_inputs: Mapping[int, list[Dim] | None]) -> bool:
    """True when strict inference fails with the inputs' declared shapes too (not the reshape's fault)."""
    graph = model.graph
    new = {index: graph.inputs[index].shape for index in old_inputs}
    try:
        for index, dims in old_inputs.items():
            graph.inputs[index].shape = _ir_dims(dims)
        _infer(model, strict=True)
    except onnx.shape_inference.InferenceError:
        return True
    finally:
        for index, shape in new.items():
            graph.inputs[index].shape = shape
    return False


def _infer(model: ir.Model, strict: bool) -> onnx.ModelProto:
    """ONNX shape inference on the model's weight-free copy (:mod:`inferplex.shape_inference`)."""
    return infer(weightless_copy(model), strict)


def value_types(model: ir.Model) -> dict[str, tuple[int, int | None]]:
    """``{value name: (ONNX element type, rank or None)}`` of every value ONNX shape inference types
    (lenient: what it cannot infer is left out)."""
    try:
        proto = _infer(model, strict=False)
    except Exception:  # noqa: BLE001 - no types beyond those the model declares
        return {}
    types: dict[str, tuple[int, int | None]] = {}
    for info in (*proto.graph.value_info, *proto.graph.output, *proto.graph.input):
        tensor = info.type.tensor_type
        if info.type.HasField("tensor_type") and tensor.elem_type:
            rank = len(tensor.shape.dim) if tensor.HasField("shape") else None
            types[info.name] = (int(tensor.elem_type), rank)
    return types

