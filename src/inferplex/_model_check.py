"""What ``read_model`` checks in an ONNX model before it is used.

- every text field is UTF-8, every element type is one ONNX defines, subgraphs
  nest at most MAX_SUBGRAPH_DEPTH deep, graph inputs and outputs have unique
  names (:func:`check_fields`, one pass over the proto that never copies weights);
- external data stays in the model's folder, in a regular file holding the
  bytes its offset and length name (:func:`check_external_data`);
- ``onnx.checker.check_model`` (without shape inference), named errors.

Graph inputs and outputs declared with an element type but no shape are
accepted, as ONNX Runtime and OpenVINO accept them (exporters write them; an
input's rank is then dynamic, an output's shape is found by shape inference or
is dynamic): onnx's checker wants a shape on every main-graph input and output,
so its copy of the model gives such values an empty one, which it does not read
further without shape inference.
Likewise the ops ONNX Runtime registers in the ONNX domain, which its
transformer optimizer writes (SimplifiedLayerNormalization, LayerNormalization
before opset 17), are given to the checker as ``com.microsoft`` ops, whose
schemas it does not check.

The first two run before anything else reads the model: onnx-ir, the checker
and the engines fail on such models with their own errors (a ``SerdeError``,
a ``UnicodeDecodeError`` raised while the checker words its message), or not
at all until a compile.

The checker takes the model as serialized bytes: given an ``onnx.ModelProto``
it calls ``SerializeToString``, which holds the GIL while it copies every
weight, and then parses them again in C++.  Every compile starts with
``read_model``, AUTO's and MULTI's devices included, so that time delayed them
all.  So the checker is given a copy of the model in which each large
initializer or Constant value stored as ``raw_data`` (subgraphs' included) is an
empty placeholder of the same name and type; the checker's rules on those
tensors' data (one data field, bytes that fill the declared shape) are checked
here.  ``python bench/read_model.py`` compares the two on stacks of
BERT-base-sized layers.
"""

from __future__ import annotations

import math
import os
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import onnx
import onnx_ir as ir

from inferplex.errors import ModelError

__all__ = ["check_external_data", "check_fields", "check_model", "checker_copy",
           "external_data_problem", "refuse"]

LARGE_TENSOR_BYTES = 1 << 16
"""Tensors larger than this are left out of the checker's copy (their size is checked here)."""

_P = onnx.TensorProto
_ITEM_BYTES = {
    _P.FLOAT: 4, _P.DOUBLE: 8, _P.FLOAT16: 2, _P.BFLOAT16: 2, _P.BOOL: 1,
    _P.INT8: 1, _P.INT16: 2, _P.INT32: 4, _P.INT64: 8, _P.UINT8: 1, _P.UINT16: 2, _P.UINT32: 4, _P.UINT64: 8,
    _P.COMPLEX64: 8, _P.COMPLEX128: 16,
    **{getattr(_P, name): 1 for name in ("FLOAT8E4M3FN", "FLOAT8E4M3FNUZ", "FLOAT8E5M2", "FLOAT8E5M2FNUZ")
       if hasattr(_P, name)},
}
"""Bytes per element of the types sized here (4-bit and string tensors are left to the checker)."""
_TYPED_FIELDS = ("float_data", "int32_data", "string_data", "int64_data", "double_data", "uint64_data")


MAX_SUBGRAPH_DEPTH = 40
"""Subgraphs (If, Loop, Scan bodies) nested deeper than this are refused.

protobuf parses messages at most 100 deep, three per subgraph level, so no
file nests deeper than 33 levels; a deeper ``onnx.ModelProto`` built in memory
would overflow onnx-ir's recursive reader and the checker's parser."""

_KNOWN_TYPES = frozenset(int(t) for t in ir.DataType) & frozenset(onnx.TensorProto.DataType.values())
"""Element type numbers both onnx and onnx-ir know (0, UNDEFINED, included: types may be unknown)."""

_Path = tuple[Any, str, int | None] | None
"""Where a message sits: (its parent's path, its field, its index); spelled out only for a problem."""

_STRING, _MESSAGE = 9, 11
"""protobuf's FieldDescriptor.TYPE_STRING and TYPE_MESSAGE (numbers fixed by descriptor.proto)."""


def check_fields(proto: onnx.ModelProto) -> None:
    """Raise :class:`ModelError` listing every field onnx-ir or the engines could not take.

    Text fields that are not UTF-8 (protobuf hands them over as bytes),
    element types ONNX does not define (``data_type`` 99), negative dims in
    a value's type (they would become negative port shapes), graphs with two
    inputs or two outputs of one name, subgraphs nested deeper than
    MAX_SUBGRAPH_DEPTH, small tensors whose raw_data does not fill their shape
    exactly (large ones are checked as the checker's copy is made).  One pass
    over the messages, without recursion, that reads no large tensor's data.
    """
    problems: list[str] = []
    pending: list[tuple[Any, _Path, int]] = [(proto, None, 0)]
    while pending:
        message, path, depth = pending.pop()
        kind = type(message)
        if kind is onnx.TensorShapeProto:  # most of a model's messages: checked here, not queued
            _check_shape(message, path, problems)
            continue
        if kind is onnx.TensorProto:
            _check_tensor(message, path, problems)
            continue  # listing its fields would copy its raw_data
        if kind is onnx.AttributeProto and message.type in _PLAIN_ATTRIBUTES:
            _check_plain_attribute(message, path, problems)
            continue
        if kind is onnx.GraphProto:
            depth += 1
            if depth > MAX_SUBGRAPH_DEPTH:
                problems.append(f"{_spell(path)} is a subgraph nested {depth} levels deep (at most "
                                f"{MAX_SUBGRAPH_DEPTH} are read)")
                continue
            _check_unique_names(message, path, problems)
        elif kind is onnx.TypeProto.Tensor or kind is onnx.TypeProto.SparseTensor:
            _check_type(message.elem_type, (path, "elem_type", None), problems)
        elif kind is onnx.TypeProto.Map:
            _check_type(message.key_type, (path, "key_type", None), problems)
        for field, value in message.ListFields():
            if field.type == _STRING:
                if field.is_repeated:
                    if any(type(item) is bytes for item in value):
                        _check_texts(value, path, field.name, True, problems)
                elif type(value) is bytes:
                    _check_texts([value], path, field.name, False, problems)
            elif field.type == _MESSAGE:
                name = field.name
                if field.is_repeated:
                    pending.extend((item, (path, name, index), depth) for index, item in enumerate(value))
                else:
                    pending.append((value, (path, name, None), depth))
    if problems:
        refuse("malformed ONNX model", problems, "read_model accepts UTF-8 text, the element types "
               f"of onnx.TensorProto.DataType, dims >= 0, unique graph input and output names, subgraphs "
               f"nested at most {MAX_SUBGRAPH_DEPTH} deep, and raw_data that fills each tensor's shape")


_A = onnx.AttributeProto
_PLAIN_ATTRIBUTES = frozenset({_A.FLOAT, _A.INT, _A.STRING, _A.FLOATS, _A.INTS, _A.STRINGS})
"""Attribute types holding no message: most of a model's attributes, checked without listing fields."""


def _check_plain_attribute(attribute: onnx.AttributeProto, path: _Path, problems: list[str]) -> None:
    for field in ("name", "ref_attr_name", "doc_string"):
        if type(getattr(attribute, field)) is bytes:
            _check_texts([getattr(attribute, field)], path, field, False, problems)


def _check_shape(shape: onnx.TensorShapeProto, path: _Path, problems: list[str]) -> None:
    for index, dim in enumerate(shape.dim):
        if dim.dim_value < 0:
            problems.append(f"{_spell((path, 'dim', index))} is {dim.dim_value} (a dim_value is >= 0; "
                            "a dim_param names a dynamic dim)")
        if type(dim.dim_param) is bytes or type(dim.denotation) is bytes:
            dim_path = (path, "dim", index)
            _check_texts([dim.dim_param], dim_path, "dim_param", False, problems)
            _check_texts([dim.denotation], dim_path, "denotation", False, problems)


def _check_tensor(tensor: onnx.TensorProto, path: _Path, problems: list[str]) -> None:
    for name in ("name", "doc_string"):
        _check_texts([getattr(tensor, name)], path, name, False, problems)
    for field in ("external_data", "metadata_props"):
        for index, entry in enumerate(getattr(tensor, field)):
            entry_path = (path, field, index)
            _check_texts([entry.key], entry_path, "key", False, problems)
            _check_texts([entry.value], entry_path, "value", False, problems)
    if tensor.data_type == 0 or tensor.data_type not in _KNOWN_TYPES:
        problems.append(f"tensor {tensor.name!r} ({_spell(path)}) has element type {tensor.data_type}, "
                        "which is not one of onnx.TensorProto.DataType")
    elif not _large(tensor):  # a large one's size is checked as the checker's copy is made
        problem = _raw_size_problem(tensor)
        if problem:
            problems.append(f"{problem} ({_spell(path)})")


def _check_type(number: int, path: _Path, problems: list[str]) -> None:
    if number not in _KNOWN_TYPES:
        problems.append(f"{_spell(path)} is {number}, which is not one of onnx.TensorProto.DataType")


def _check_texts(values: Any, path: _Path, field: str, repeated: bool, problems: list[str]) -> None:
    for index, value in enumerate(values):
        if isinstance(value, bytes):
            where = _spell((path, field, index if repeated else None))
            problems.append(f"{where} is not UTF-8 text ({value[:40]!r})")


def _check_unique_names(graph: onnx.GraphProto, path: _Path, problems: list[str]) -> None:
    for field in ("input", "output"):
        counts = Counter(value.name for value in getattr(graph, field))
        twice = sorted(name for name, count in counts.items() if count > 1 and isinstance(name, str))
        if twice:
            problems.append(f"{_spell(path)} lists the {field}s {', '.join(map(repr, twice))} more than once")


def _spell(path: _Path) -> str:
    """``graph.node[3].attribute[0].g`` for a path; ``the model`` for the root."""
    parts: list[str] = []
    while path is not None:
        path, field, index = path
        parts.append(field if index is None else f"{field}[{index}]")
    return ".".join(reversed(parts)) or "the model"


def check_model(proto: onnx.ModelProto, path: Any = None) -> None:
    """Raise :class:`ModelError` when ``proto`` is not a well-formed ONNX model.

    ``path``: the file it was read from (the checker then finds external data
    files relative to it).
    """
    if not proto.graph.node and not proto.graph.output:
        raise ModelError("the ONNX model has an empty graph: no nodes and no outputs")
    # The checker finds external data files relative to the model's folder only when
    # it is given the path (given the proto, it looks in the working directory).
    external = path is not None and any(t.data_location == onnx.TensorProto.EXTERNAL
                                        for t in all_tensors(proto))
    if external and not _shapeless_values(proto.graph) and not _runtime_ops(proto):
        checked: Any = os.fspath(path)
    else:  # external tensors, checked by check_external_data, are placeholders in the copy
        checked = checker_copy(proto, external=external)
    try:
        onnx.checker.check_model(checked, full_check=False)
    except onnx.checker.ValidationError as error:
        # the checker spreads one finding over several lines (the node is on the second)
        text = " ".join(line.strip() for line in str(error).splitlines() if line.strip())
        raise ModelError(f"malformed ONNX model: {text}; read_model accepts models that pass "
                         "onnx.checker.check_model") from error
    except Exception as error:  # noqa: BLE001 - the checker's C++ side raises several unrelated types
        raise ModelError(f"malformed ONNX model: onnx.checker could not check it ({type(error).__name__}: "
                         f"{error}); read_model accepts models that pass onnx.checker.check_model") from error


def checker_copy(proto: onnx.ModelProto, external: bool = False) -> onnx.ModelProto:
    """``proto`` as the checker is given it: its large raw-data tensors as empty placeholders, and
    its shapeless graph inputs and outputs with an empty shape, and ONNX Runtime's ops of the ONNX
    domain as ``com.microsoft`` ones (``proto`` itself when it has none of these).

    Large tensors are initializers and nodes' tensor attributes (a Constant's
    ``value``), in the main graph and in subgraphs (If, Loop, Scan bodies).
    Raises :class:`ModelError` for a left-out tensor that breaks the checker's
    rules on data: bytes that do not fill its shape, or a second data field.
    ``external``: external-data tensors become placeholders too (the checker given
    a copy finds their files relative to the working directory, not the model's
    folder; :func:`check_external_data` has checked them).
    """
    shapeless = _shapeless_values(proto.graph)
    runtime_ops = _runtime_ops(proto)
    if not shapeless and not runtime_ops and not _holds_large(proto.graph, external):
        return proto
    copy = onnx.ModelProto()
    _copy_fields(proto, copy, leave_out=("graph",))
    _copy_graph(proto.graph, copy.graph, external)
    for field, index in shapeless:
        getattr(copy.graph, field)[index].type.tensor_type.shape.SetInParent()
    for index in runtime_ops:
        copy.graph.node[index].domain = _ORT_DOMAIN
    if runtime_ops and all(i.domain != _ORT_DOMAIN for i in copy.opset_import):
        copy.opset_import.append(onnx.helper.make_opsetid(_ORT_DOMAIN, 1))
    return copy


_ORT_DOMAIN = "com.microsoft"


def _runtime_ops(proto: onnx.ModelProto) -> list[int]:
    """Indices of the main graph's nodes that ONNX Runtime registers in the ONNX domain and onnx's
    checker does not know: SimplifiedLayerNormalization, and LayerNormalization before opset 17."""
    version = next((i.version for i in proto.opset_import if i.domain in ("", "ai.onnx")), 0)
    runtime_ops = {"SimplifiedLayerNormalization"} | ({"LayerNormalization"} if version < 17 else set())
    return [index for index, node in enumerate(proto.graph.node)
            if node.domain in ("", "ai.onnx") and node.op_type in runtime_ops]


def _shapeless_values(graph: onnx.GraphProto) -> list[tuple[str, int]]:
    """``("input" | "output", index)`` of the graph inputs and outputs declared as tensors of a type
    with no shape."""
    return [(field, index) for field in ("input", "output")
            for index, value in enumerate(getattr(graph, field))
            if value.type.HasField("tensor_type") and not value.type.tensor_type.HasField("shape")]


def _copy_graph(graph: onnx.GraphProto, target: onnx.GraphProto, external: bool) -> None:
    """``graph`` into ``target``, its large tensors (and its subgraphs') as placeholders."""
    _copy_fields(graph, target, leave_out=("initializer", "node"))
    for tensor in graph.initializer:
        _copy_tensor(tensor, target.initializer.add(), external)
    for node in graph.node:
        if not any(_attribute_holds_large(attribute, external) for attribute in node.attribute):
            target.node.add().CopyFrom(node)
            continue
        copied = target.node.add()
        _copy_fields(node, copied, leave_out=("attribute",))
        for attribute in node.attribute:
            kept = copied.attribute.add()
            _copy_fields(attribute, kept, leave_out=("t", "tensors", "g", "graphs"))
            if attribute.HasField("t"):
                _copy_tensor(attribute.t, kept.t, external)
            for tensor in attribute.tensors:
                _copy_tensor(tensor, kept.tensors.add(), external)
            if attribute.HasField("g"):
                _copy_graph(attribute.g, kept.g, external)
            for subgraph in attribute.graphs:
                _copy_graph(subgraph, kept.graphs.add(), external)


def _holds_large(graph: onnx.GraphProto, external: bool) -> bool:
    return any(_left_out(tensor, external) for tensor in graph.initializer) or any(
        _attribute_holds_large(attribute, external) for node in graph.node for attribute in node.attribute)


def _attribute_holds_large(attribute: onnx.AttributeProto, external: bool) -> bool:
    return ((attribute.HasField("t") and _left_out(attribute.t, external))
            or any(_left_out(t, external) for t in attribute.tensors)
            or (attribute.HasField("g") and _holds_large(attribute.g, external))
            or any(_holds_large(g, external) for g in attribute.graphs))


def _left_out(tensor: onnx.TensorProto, external: bool) -> bool:
    """Whether the checker's copy holds ``tensor`` as a placeholder: large, or external with ``external``."""
    return _large(tensor) or (external and tensor.data_location == onnx.TensorProto.EXTERNAL)


def _copy_tensor(tensor: onnx.TensorProto, target: onnx.TensorProto, external: bool) -> None:
    """``tensor`` into ``target``: as it is, or as a placeholder when left out (a large one's data
    checked here)."""
    if not _left_out(tensor, external):
        target.CopyFrom(tensor)
        return
    if _large(tensor):
        _check_data(tensor)
    target.name, target.data_type = tensor.name, tensor.data_type
    target.dims.append(0)  # no elements and no data: the checker accepts it


def _large(tensor: onnx.TensorProto) -> bool:
    """Raw data of a type sized here, declared larger than LARGE_TENSOR_BYTES (read without copying it)."""
    item = _ITEM_BYTES.get(tensor.data_type)
    return (item is not None and tensor.data_location != onnx.TensorProto.EXTERNAL
            and all(d >= 0 for d in tensor.dims) and math.prod(tensor.dims) * item > LARGE_TENSOR_BYTES
            and tensor.HasField("raw_data"))


def _check_data(tensor: onnx.TensorProto) -> None:
    """The checker's rules on a tensor's data: one data field, holding at least what the shape declares."""
    others = [name for name in _TYPED_FIELDS if len(getattr(tensor, name))]
    if others:
        raise ModelError(f"malformed ONNX model: tensor {tensor.name!r} has raw_data and "
                         f"{', '.join(others)}: a tensor holds its values in one field; read_model "
                         "accepts models that pass onnx.checker.check_model")
    problem = _raw_size_problem(tensor)
    if problem:
        raise ModelError(f"malformed ONNX model: {problem}; read_model accepts models that pass "
                         "onnx.checker.check_model")


def _raw_size_problem(tensor: onnx.TensorProto) -> str:
    """Why ``tensor``'s raw_data does not fill its shape exactly ('' when it does, or has none).

    The checker refuses too few bytes; too many it lets through, but ONNX Runtime refuses them
    ("raw_data size does not match expected size") and onnx-ir fails reshaping them in whatever
    reads the value (a device's ``supported_nodes``, a compile), so both are refused here."""
    item = _ITEM_BYTES.get(tensor.data_type)
    if (item is None or tensor.data_location == onnx.TensorProto.EXTERNAL or any(d < 0 for d in tensor.dims)
            or not tensor.HasField("raw_data")):
        return ""
    dims = list(tensor.dims)
    needed = math.prod(dims) * item
    held = len(tensor.raw_data)
    if held == needed:
        return ""
    kind = onnx.TensorProto.DataType.Name(tensor.data_type)
    amount = "few" if held < needed else "many"
    return (f"tensor {tensor.name!r} holds {held} bytes of raw_data, too {amount} for its shape {dims} "
            f"and type {kind} ({needed} bytes required)")


def _copy_fields(source: Any, target: Any, leave_out: tuple[str, ...]) -> None:
    """Every field set in ``source`` but those in ``leave_out``, copied into ``target`` (messages copied)."""
    for field, value in source.ListFields():
        if field.name in leave_out:
            continue
        if hasattr(value, "extend") and not isinstance(value, (str, bytes)):  # a repeated field
            getattr(target, field.name).extend(value)
        elif hasattr(value, "ListFields"):  # a message
            getattr(target, field.name).CopyFrom(value)
        else:
            setattr(target, field.name, value)


def check_external_data(proto: onnx.ModelProto, base_dir: Path | None) -> None:
    """Refuse external data that is malformed, leaves the model's folder, or has no folder.

    Each tensor stored outside the file needs a relative ``location`` in the
    model's folder (symlinks resolved) naming a regular file, and non-negative
    decimal ``offset`` and ``length`` within that file.
    """
    refused: list[str] = []
    for tensor in all_tensors(proto):
        if tensor.data_location != onnx.TensorProto.EXTERNAL:
            continue
        entries = {entry.key: entry.value for entry in tensor.external_data}
        if base_dir is None:
            refused.append(f"{tensor.name!r} (external data needs a model read from a file)")
            continue
        problem = external_data_problem(entries.get("location", ""), entries.get("offset"),
                                        entries.get("length"), base_dir, _tensor_bytes(tensor))
        if problem:
            refused.append(f"{tensor.name!r} -> {problem}")
    if refused:
        refuse("external data refused", refused, "keep external data files next to the model, with "
               "non-negative offset and length within the file")


def external_data_problem(location: str, offset: str | int | None, length: str | int | None,
                          base_dir: Path, needed: int | None) -> str | None:
    """What is wrong with one tensor's external data reference, or None when nothing is.

    ``offset`` and ``length`` as stored (decimal text in a proto, ints in
    onnx-ir; None when absent); ``needed``: the bytes the tensor's shape and
    type call for, None when not known here.
    """
    if not isinstance(location, str) or not location:
        return "no location: external data names the file holding it"
    if "\0" in location:
        return f"{location!r}: a location may not hold a NUL character"
    numbers: dict[str, int] = {}
    for key, text in (("offset", offset), ("length", length)):
        if text is None or text == "":
            continue
        number = _decimal(text)
        if number is None or number < 0:
            return f"{location!r}: {key} {text!r} is not a non-negative integer"
        numbers[key] = number
    target = (base_dir / location).resolve()
    if os.path.isabs(location) or not target.is_relative_to(base_dir.resolve()):
        return f"{location!r} (outside the model's folder)"
    if not target.is_file():
        return f"{location!r}: no such file in the model's folder"
    start = numbers.get("offset", 0)
    size = target.stat().st_size
    stored = numbers.get("length", size - start)
    if start + stored > size:
        return f"{location!r}: offset {start} + length {stored} passes the file's end ({size} bytes)"
    if needed is not None and stored < needed:
        return f"{location!r}: {stored} bytes stored, too few for the tensor ({needed} bytes required)"
    return None


def _decimal(text: str | int) -> int | None:
    if isinstance(text, int):
        return text
    stripped = text.strip()
    return int(stripped) if stripped.lstrip("-").isdigit() and stripped.isascii() else None


def _tensor_bytes(tensor: onnx.TensorProto) -> int | None:
    """Bytes a tensor of a type sized here needs for its shape (None for other types)."""
    item = _ITEM_BYTES.get(tensor.data_type)
    if item is None or any(d < 0 for d in tensor.dims):
        return None
    return math.prod(tensor.dims) * item


def refuse(lead: str, problems: list[str], accepted: str, shown: int = 8) -> None:
    """Raise one :class:`ModelError`: ``lead``, the first ``shown`` problems, and what is accepted."""
    listed = "; ".join(problems[:shown])
    if len(problems) > shown:
        listed += f"; and {len(problems) - shown} more"
    raise ModelError(f"{lead}: {listed}; {accepted}")


def all_tensors(proto: onnx.ModelProto) -> Iterator[onnx.TensorProto]:
    """Every tensor stored in the model: initializers and attribute tensors, subgraphs included."""
    def walk(graph: onnx.GraphProto) -> Iterator[onnx.TensorProto]:
        yield from graph.initializer
        for node in graph.node:
            for attribute in node.attribute:
                if attribute.HasField("t"):
                    yield attribute.t
                yield from attribute.tensors
                if attribute.HasField("g"):
                    yield from walk(attribute.g)
                for sub in attribute.graphs:
                    yield from walk(sub)

    yield from walk(proto.graph)
