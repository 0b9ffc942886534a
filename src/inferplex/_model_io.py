"""Reading a :class:`~inferplex._model.Model` from its sources, and saving one.

``read_model`` (:func:`load_model`) accepts a path, bytes, an ``onnx.ModelProto`` or an
``onnx_ir.Model``.  A path or bytes (or text) whose content is an OpenVINO IR (``.xml``, with its
``.bin``) is read by :mod:`inferplex.api.ir`, which needs the ``openvino`` package; an ``.xml``
path whose content is ONNX reads as ONNX.  On reading ONNX, inferplex

- checks the model with ``onnx.checker`` and names what is malformed, and
  refuses external data whose location leaves the model's folder
  (:mod:`inferplex._model_check`);
- treats initializers that are also listed as graph inputs (IR version < 4,
  e.g. the ``light`` models in the onnx wheel) as constants, so engines can fold
  them — ONNX Runtime runs such models 2-3x slower otherwise;
- gives every node a stable, unique friendly name: its ONNX name, or
  ``<op_type>_<index>`` when it has none;
- gives graph outputs declared with a type but no shape (ONNX Runtime and
  OpenVINO run them) the shape ONNX shape inference finds, as OpenVINO's
  ``read_model`` shows them (``[?,3]``); where it finds none they stay dynamic
  (rank unknown);
- keeps graph inputs declared with a type but no shape as inputs of dynamic rank
  (``PartialShape.dynamic()``, ``[...]``), as OpenVINO reads them: they take
  arrays of any rank the model's ops accept, and ``Model.reshape`` can fix them.

:func:`save_model` and :func:`serialize` write a Model as an OpenVINO IR (an ``.xml`` path) or an
ONNX file (any other path).  Kept apart from :mod:`inferplex._model`, which holds the Model's own
API over the graph.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import onnx
import onnx_ir as ir

from inferplex._model import Model
from inferplex._model_check import (
    LARGE_TENSOR_BYTES,
    check_external_data,
    check_fields,
    check_model,
    external_data_problem,
    refuse,
)
from inferplex._serialize import serialize_leaving_out
from inferplex.api.build import check_declared
from inferplex.errors import InputTypeError, ModelError

__all__ = ["is_model_source", "load_model", "save_model", "serialize"]


def is_model_source(source: Any) -> bool:
    """Whether :func:`load_model` takes ``source``'s type: a Model, path, bytes, ModelProto, onnx_ir.Model."""
    return isinstance(source, (Model, ir.Model, str, os.PathLike, bytes, bytearray, memoryview,
                               onnx.ModelProto))


def load_model(source: Any, weights: Any = None) -> Model:
    """Read a model from a path, bytes, ``onnx.ModelProto`` or ``onnx_ir.Model``.

    An OpenVINO IR is read from its .xml path (``weights``: the .bin's path, by default
    ``<name>.bin`` beside it) or from its xml as bytes or text (``weights``: the .bin's bytes or
    an ``ov.Tensor`` of them).  For ONNX, ``weights`` is not used: ONNX keeps its weights inside
    the model or beside it.  Whatever is wrong with the source ends as a :class:`ModelError`
    naming it: a file that is missing or not a protobuf, text that is not UTF-8, unknown
    element types, external data that is malformed or leaves the model's folder, what
    ``onnx.checker`` finds (:mod:`inferplex._model_check`), an IR op inferplex cannot build.
    """
    base_dir: Path | None = None
    name: str | None = None
    if isinstance(source, Model):
        check_declared(source.ir.graph)  # ops reading a Parameter the model never declared
        return source
    if isinstance(source, ir.Model):
        _check_ir_model(source)
        return Model(_read_ir(lambda: _prepare(source)), None)
    if isinstance(source, str) and _is_openvino_ir(source[:_IR_HEAD].encode("utf-8", errors="replace")):
        return _read_openvino_ir(source, weights)
    if isinstance(source, (str, os.PathLike)):
        path = Path(source)
        if not path.is_file():
            raise ModelError(f"model file {str(path)!r} does not exist or is not a file; "
                             f"read_model accepts {_ACCEPTED}")
        if _is_openvino_ir(_head(path)):
            return _read_openvino_ir(path, weights)
        proto = _parse(lambda: onnx.load(str(path), load_external_data=False), str(path), path)
        base_dir, name = path.resolve().parent, path.stem
    elif isinstance(source, (bytes, bytearray, memoryview)):
        if _is_openvino_ir(bytes(source[:_IR_HEAD])):
            return _read_openvino_ir(bytes(source), weights)
        proto = _parse(lambda: onnx.load_from_string(bytes(source)), "the given bytes", bytes(source[:64]))
    elif isinstance(source, onnx.ModelProto):
        proto = source
    else:
        raise InputTypeError(f"Provided python object type {type(source)} isn't supported as 'model' "
                             "argument. read_model accepts a path (str or os.PathLike), bytes, "
                             "onnx.ModelProto or onnx_ir.Model (and OpenVINO IR as a .xml path or its bytes)")
    check_fields(proto)
    check_external_data(proto, base_dir)
    check_model(proto, source if base_dir is not None else None)

    def read() -> ir.Model:
        model = ir.serde.deserialize_model(proto)
        if base_dir is not None:
            ir.external_data.set_base_dir(model.graph, str(base_dir))
        return _prepare(model)

    return Model(_read_ir(read), name or proto.graph.name or None)


def save_model(model: Model, output_model: str | os.PathLike[str], compress_to_fp16: bool = True) -> None:
    """Write ``model`` (with its rt_info: affinities, layouts) to ``output_model``, making its
    folder where missing.

    A path ending in ``.xml`` receives an OpenVINO IR (the ``.bin`` beside it), written by
    OpenVINO as its ``save_model`` writes it (:mod:`inferplex.api.ir.writer`); any other path an
    ONNX file, which keeps every op inferplex runs (OpenVINO's IR cannot hold some of them, nor
    ONNX Runtime's contrib ops).  ``compress_to_fp16`` (default True, as in OpenVINO) stores
    float32 weights as float16 followed by a conversion back to float32, halving the file;
    inputs, outputs and the arithmetic stay float32; weights out of float16's range stay float32.
    The model in memory is not changed.
    """
    path = Path(os.fspath(output_model))
    if _is_ir_path(path):
        from inferplex.api.ir.writer import write_ir

        write_ir(model, path, None, compress_to_fp16)
        return
    to_save = model.ir
    if compress_to_fp16:
        from inferplex.api.fp16 import compressed_weights_copy

        to_save = compressed_weights_copy(model.ir)
    path.parent.mkdir(parents=True, exist_ok=True)
    ir.save(to_save, str(path))


def serialize(model: Model, xml_path: str | os.PathLike[str], bin_path: str | os.PathLike[str] | None = None,
              version: Any = None) -> None:
    """OpenVINO's ``serialize(model, xml_path, bin_path)``: an OpenVINO IR at ``xml_path`` (``.xml``)
    with its weights at ``bin_path`` (default: the ``.bin`` beside it), as written by OpenVINO,
    float32 weights kept as they are.  A path not ending in ``.xml`` receives an ONNX file, as
    :func:`save_model` writes it.  ``version`` (IR version) is accepted: OpenVINO writes IR v11.
    """
    del version
    path = Path(os.fspath(xml_path))
    if not _is_ir_path(path):
        save_model(model, path, compress_to_fp16=False)
        return
    from inferplex.api.ir.writer import write_ir

    write_ir(model, path, None if bin_path is None else Path(os.fspath(bin_path)), compress_to_fp16=False)


def _is_ir_path(path: Path) -> bool:
    return path.suffix.lower() == ".xml"


def _parse(load: Any, what: str, source: Path | bytes) -> onnx.ModelProto:
    try:
        return load()
    except Exception as error:  # noqa: BLE001 - protobuf raises several unrelated types
        raise ModelError(f"{what} is not a readable ONNX model: {_cause(error)}{_other_format(source)}") \
            from error


def _other_format(source: Path | bytes) -> str:
    """A hint where the unreadable model is another format: XML that is not an OpenVINO IR, TFLite."""
    head = _head(source) if isinstance(source, Path) else source
    if head.lstrip(b"\xef\xbb\xbf \t\r\n").startswith(b"<"):
        return ("; it is XML but not an OpenVINO IR (whose root element is <net>): read_model accepts "
                f"{_ACCEPTED}")
    if head[4:8] == b"TFL3":
        return (f"; it is a TensorFlow Lite model: read_model accepts {_ACCEPTED}; convert it to ONNX "
                "(tf2onnx) instead")
    return ""


_ACCEPTED = ("a path to an .onnx file or an OpenVINO IR .xml (with its .bin), bytes of either, an "
             "onnx.ModelProto or an onnx_ir.Model")
_IR_HEAD = 1024
"""How much of a source decides whether it is an OpenVINO IR."""


def _head(path: Path) -> bytes:
    try:
        with path.open("rb") as file:
            return file.read(_IR_HEAD)
    except OSError:
        return b""


def _is_openvino_ir(head: bytes) -> bool:
    from inferplex.api.ir.source import looks_like_ir

    return looks_like_ir(head)


def _read_openvino_ir(source: Path | bytes | str, weights: Any) -> Model:
    """An OpenVINO IR, read with the openvino package and rebuilt with inferplex's opset."""
    from inferplex.api.ir import read_ir

    return read_ir(source, weights)


def _read_ir(read: Callable[[], ir.Model]) -> ir.Model:
    """``read()``, its failures (onnx-ir's SerdeError and what it wraps) as a ModelError."""
    try:
        return read()
    except ModelError:
        raise
    except Exception as error:  # noqa: BLE001 - whatever a checked model still trips in onnx-ir
        raise ModelError(f"malformed ONNX model: onnx_ir cannot read it: {_cause(error)}") from error


def _cause(error: BaseException) -> str:
    """The innermost error of a chain as ``Type: message`` (onnx-ir's SerdeError names only the call)."""
    while error.__cause__ is not None:
        error = error.__cause__
    return f"{type(error).__name__}: {error}"


def _check_ir_model(model: ir.Model) -> None:
    """An ``onnx_ir.Model`` gets the checks a file gets, on its proto without large weights.

    Main-graph initializers stored outside (``ir.ExternalTensor``) must stay
    in their folder; they and the large in-memory ones are left out of the
    proto (:func:`inferplex._serialize.serialize_leaving_out`), so no weight is
    copied, and stand in it as empty placeholders of their name and type.
    """
    refused = []
    for value in model.graph.initializers.values():
        tensor = value.const_value
        if isinstance(tensor, ir.ExternalTensor):
            problem = external_data_problem(os.fspath(tensor.location), tensor.offset, tensor.length,
                                            Path(tensor.base_dir or ".").resolve(), tensor.nbytes)
            if problem:
                refused.append(f"{value.name!r} -> {problem}")
    if refused:
        refuse("external data refused", refused, "keep external data files next to the model, with "
               "non-negative offset and length within the file")

    def left_out(value: ir.Value) -> bool:
        tensor = value.const_value
        return isinstance(tensor, ir.ExternalTensor) or (
            tensor is not None and tensor.nbytes > LARGE_TENSOR_BYTES)

    try:
        proto, left = serialize_leaving_out(model, left_out)
    except Exception as error:  # noqa: BLE001 - onnx-ir's SerdeError wraps what the proto refused
        raise ModelError(f"malformed onnx_ir.Model: it cannot be written as ONNX: {_cause(error)}") from error
    for value in left:
        placeholder = proto.graph.initializer.add()
        placeholder.name, placeholder.data_type = value.name or "", int(value.dtype or 0)
        placeholder.dims.append(0)
    check_fields(proto)
    check_model(proto)


def _prepare(model: ir.Model) -> ir.Model:
    """Initializers listed as inputs become constants; every node gets a unique name."""
    graph = model.graph
    initializer_inputs = [v for v in graph.inputs if v.name in graph.initializers]
    for value in initializer_inputs:
        graph.inputs.remove(value)
    if initializer_inputs and model.ir_version < 4:
        # IR < 4 requires every initializer to be a graph input; IR 4 is the first
        # version where an initializer may be a plain constant (ONNX Runtime refuses
        # an IR 3 model with an unused initializer that is not an input).
        model.ir_version = 4
    used: set[str] = set()
    for index, node in enumerate(graph):
        name = node.name or f"{node.op_type}_{index}"
        if name in used:
            suffix = 1
            while f"{name}_{suffix}" in used:
                suffix += 1
            name = f"{name}_{suffix}"
        node.name = name
        used.add(name)
    _shape_outputs(model)
    return model


def _shape_outputs(model: ir.Model) -> None:
    """Outputs of nodes declared without a shape get the shape ONNX shape inference finds (see the
    module docstring); every other value keeps the shape and type the model declares."""
    shapeless = {id(value) for value in model.graph.outputs
                 if value.shape is None and value.producer() is not None}
    if not shapeless:
        return
    from inferplex.api.reshape import apply_input_shapes

    values = [value for node in ir.traversal.RecursiveGraphIterator(model.graph) for value in node.outputs]
    declared = [(value, value.shape, value.type) for value in values if id(value) not in shapeless]
    try:
        apply_input_shapes(model, {})  # every node output's shape, from the declared inputs'
    except Exception:  # noqa: BLE001 - it restores the shapes: the outputs stay dynamic
        pass
    finally:
        for value, shape, element in declared:
            value.shape, value.type = shape, element
