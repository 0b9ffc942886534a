"""What ``read_model`` checks in an ONNX model before it is used.

- ``onnx.checker.check_model`` (without shape inference), named errors;
- external data must stay in the model's folder.

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
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import onnx

from inferplex.errors import ModelError

__all__ = ["LARGE_TENSOR_BYTES", "check_external_data", "check_model", "checker_copy"]

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
    try:
        onnx.checker.check_model(os.fspath(path) if external else checker_copy(proto), full_check=False)
    except onnx.checker.ValidationError as error:
        # the checker spreads one finding over several lines (the node is on the second)
        text = " ".join(line.strip() for line in str(error).splitlines() if line.strip())
        raise ModelError(f"malformed ONNX model: {text}; read_model accepts models that pass "
                         "onnx.checker.check_model") from error


def checker_copy(proto: onnx.ModelProto) -> onnx.ModelProto:
    """``proto`` with its large raw-data tensors as empty placeholders (``proto`` itself when none).

    Large tensors are initializers and nodes' tensor attributes (a Constant's
    ``value``), in the main graph and in subgraphs (If, Loop, Scan bodies).
    Raises :class:`ModelError` for a left-out tensor that breaks the checker's
    rules on data: bytes that do not fill its shape, or a second data field.
    """
    if not _holds_large(proto.graph):
        return proto
    copy = onnx.ModelProto()
    _copy_fields(proto, copy, leave_out=("graph",))
    _copy_graph(proto.graph, copy.graph)
    return copy


def _copy_graph(graph: onnx.GraphProto, target: onnx.GraphProto) -> None:
    """``graph`` into ``target``, its large tensors (and its subgraphs') as placeholders."""
    _copy_fields(graph, target, leave_out=("initializer", "node"))
    for tensor in graph.initializer:
        _copy_tensor(tensor, target.initializer.add())
    for node in graph.node:
        if not any(_attribute_holds_large(attribute) for attribute in node.attribute):
            target.node.add().CopyFrom(node)
            continue
        copied = target.node.add()
        _copy_fields(node, copied, leave_out=("attribute",))
        for attribute in node.attribute:
            kept = copied.attribute.add()
            _copy_fields(attribute, kept, leave_out=("t", "tensors", "g", "graphs"))
            if attribute.HasField("t"):
                _copy_tensor(attribute.t, kept.t)
            for tensor in attribute.tensors:
                _copy_tensor(tensor, kept.tensors.add())
            if attribute.HasField("g"):
                _copy_graph(attribute.g, kept.g)
            for subgraph in attribute.graphs:
                _copy_graph(subgraph, kept.graphs.add())


def _holds_large(graph: onnx.GraphProto) -> bool:
    return any(_large(tensor) for tensor in graph.initializer) or any(
        _attribute_holds_large(attribute) for node in graph.node for attribute in node.attribute)


def _attribute_holds_large(attribute: onnx.AttributeProto) -> bool:
    return ((attribute.HasField("t") and _large(attribute.t)) or any(_large(t) for t in attribute.tensors)
            or (attribute.HasField("g") and _holds_large(attribute.g))
            or any(_holds_large(g) for g in attribute.graphs))


def _copy_tensor(tensor: onnx.TensorProto, target: onnx.TensorProto) -> None:
    """``tensor`` into ``target``: as it is, or as a placeholder when large (its data checked here)."""
    if not _large(tensor):
        target.CopyFrom(tensor)
        return
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
    dims = list(tensor.dims)
    needed = math.prod(dims) * _ITEM_BYTES[tensor.data_type]
    held = len(tensor.raw_data)
    if held < needed:
        kind = onnx.TensorProto.DataType.Name(tensor.data_type)
        raise ModelError(f"malformed ONNX model: tensor {tensor.name!r} holds {held} bytes of "
                         f"raw_data, too few for its shape {dims} and type {kind} ({needed} bytes "
                         "required); read_model accepts models that pass onnx.checker.check_model")


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
    """Refuse external data whose location leaves the model's folder (or that has no folder)."""
    refused: list[str] = []
    for tensor in all_tensors(proto):
        if tensor.data_location != onnx.TensorProto.EXTERNAL:
            continue
        location = next((e.value for e in tensor.external_data if e.key == "location"), "")
        if base_dir is None:
            refused.append(f"{tensor.name!r} (external data needs a model read from a file)")
            continue
        target = (base_dir / location).resolve()
        if os.path.isabs(location) or not target.is_relative_to(base_dir):
            refused.append(f"{tensor.name!r} -> {location!r}")
    if refused:
        raise ModelError("external data outside the model's folder is refused: "
                         + ", ".join(refused) + "; keep external data files next to the model")


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
