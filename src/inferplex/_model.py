"""Model: OpenVINO's model API over an onnx-ir graph (its ports and ops in ``_ports``).

``read_model`` accepts a path, bytes, an ``onnx.ModelProto`` or an
``onnx_ir.Model``.  On reading, inferplex

- checks the model with ``onnx.checker`` and names what is malformed, and
  refuses external data whose location leaves the model's folder
  (:mod:`inferplex._model_check`);
- treats initializers that are also listed as graph inputs (IR version < 4,
  e.g. the ``light`` models in the onnx wheel) as constants, so engines can fold
  them — ONNX Runtime runs such models 2-3x slower otherwise;
- gives every node a stable, unique friendly name: its ONNX name, or
  ``<op_type>_<index>`` when it has none.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import onnx
import onnx_ir as ir

from inferplex._model_check import (
    LARGE_TENSOR_BYTES,
    check_external_data,
    check_fields,
    check_model,
    external_data_problem,
    refuse,
)
from inferplex._ports import Op, Port, find_port
from inferplex._serialize import serialize_leaving_out
from inferplex.errors import InputError, InputTypeError, ModelError

__all__ = ["Model", "is_model_source", "load_model", "save_model", "serialize"]

Dim = int | str | None


class Model:
    """An ONNX model ready to query and compile; wraps an ``onnx_ir.Model``.

    ``Model(ir_model, name)`` wraps a graph; ``Model(results, parameters, name)``
    assembles one from nodes built with :mod:`inferplex.opset`, as OpenVINO's
    ``ov.Model`` does (``results``: a node, an output port, or a list of them).
    """

    def __init__(self, model: Any = None, parameters: Any = None, name: str | None = None, *,
                 results: Any = None, sinks: Any = None, variables: Any = None) -> None:
        if results is not None:  # OpenVINO's keyword spelling: Model(results=..., parameters=...)
            model = results
        if sinks or variables:
            raise ModelError("Model(sinks=..., variables=...) builds a stateful model (ReadValue/Assign); "
                             "ONNX models have no state, so inferplex cannot run one")
        if model is None:
            raise ModelError("Model needs results: Model(results, parameters, name) or "
                             "Model(onnx_ir.Model, name)")
        if isinstance(model, ir.Model):
            if isinstance(parameters, str) and name is None:
                parameters, name = None, parameters
            if parameters is not None:
                raise ModelError("Model(onnx_ir.Model, name) takes no parameters; "
                                 "Model(results, parameters, name) builds a model from nodes")
        sources: list[Any] = []
        if not isinstance(model, ir.Model):
            from inferplex.api.build import build_model

            given = parameters if isinstance(parameters, (list, tuple)) else \
                ([] if parameters is None else [parameters])
            sources = [getattr(p, "_outputs", [None])[0] for p in given]
            model = build_model(model, parameters, name)
        self.ir = model
        self._param_sources: list[Any] = sources
        """The built Parameters' values, by input index (``get_parameter_index`` finds them)."""
        self._name = name or model.graph.name or "model"

    @property
    def friendly_name(self) -> str:
        return self._name

    @friendly_name.setter
    def friendly_name(self, name: str) -> None:
        self.set_friendly_name(name)

    def get_friendly_name(self) -> str:
        return self._name

    def set_friendly_name(self, name: str) -> None:
        """Rename the model (its MODEL_NAME once compiled; the ONNX graph's name when saved)."""
        self._name = str(name)
        self.ir.graph.name = self._name

    def get_name(self) -> str:
        return self._name

    @property
    def name(self) -> str:
        return self._name

    @property
    def inputs(self) -> list[Port]:
        return [Port(v, i, "input", live=True) for i, v in enumerate(self.ir.graph.inputs)]

    @property
    def outputs(self) -> list[Port]:
        return [Port(v, i, "output", live=True) for i, v in enumerate(self.ir.graph.outputs)]

    def input(self, key: int | str | Port = 0) -> Port:
        """An input by index, tensor name or port."""
        return find_port(self.inputs, key, "input")

    def output(self, key: int | str | Port = 0) -> Port:
        """An output by index, tensor name or port."""
        return find_port(self.outputs, key, "output")

    def get_output_size(self) -> int:
        return len(self.ir.graph.outputs)

    def get_parameters(self) -> list[Any]:
        """The inputs as Parameter nodes (live: ``set_layout`` and shape setters change the model)."""
        from inferplex.api.nodes import Parameter

        return [Parameter.view(value) for value in self.ir.graph.inputs]

    @property
    def parameters(self) -> list[Any]:
        return self.get_parameters()

    def get_results(self) -> list[Any]:
        """The outputs as Result nodes."""
        from inferplex.api.nodes import Result

        return [Result(value, name=value.name) for value in self.ir.graph.outputs]

    @property
    def results(self) -> list[Any]:
        return self.get_results()

    def get_ops(self) -> list[Op]:
        """Every op of the main graph, in graph order (the ops that take affinities and placement)."""
        return [Op(node) for node in self.ir.graph]

    def get_ordered_ops(self) -> list[Any]:
        """Parameters, the ops in topological order, then Results (OpenVINO's order)."""
        ops = [Op(node) for node in _topological(self.ir.graph)]
        return [*self.get_parameters(), *ops, *self.get_results()]

    def is_dynamic(self) -> bool:
        """True when some input or output has a dynamic dimension or rank."""
        return any(p.is_dynamic for p in self.inputs + self.outputs)

    @property
    def dynamic(self) -> bool:
        return self.is_dynamic()

    def reshape(self, shapes: Any, variable_shapes: Any = None) -> None:
        """Set input shapes and re-infer every shape downstream (see :mod:`inferplex.api.reshape`).

        ``shapes``: one shape for a one-input model (``[1, 3, 224, 224]``,
        ``"1..8,3,224,224"``, a PartialShape), or ``{name | index | port: shape}``.
        A shape the model cannot take raises InputError and leaves the model as it was.
        """
        from inferplex.api.reshape import apply_input_shapes, parse_shape

        if variable_shapes:
            raise InputError("reshape with variable shapes needs stateful models, which ONNX models are not")
        _check_reshape_types(shapes)
        if not isinstance(shapes, Mapping):
            if len(self.ir.graph.inputs) != 1:
                raise InputError(f"one shape was given but the model has {len(self.ir.graph.inputs)} "
                                 "inputs; pass {name or index or port: shape}")
            shapes = {0: shapes}
        new = {self.input(key).index: parse_shape(value) for key, value in shapes.items()}
        apply_input_shapes(self.ir, new)

    # --- editing, as OpenVINO's Model (see inferplex.api.model_edit) ----------------------

    def add_outputs(self, outputs: Any) -> list[Port]:
        """Make tensors outputs: a tensor name, ``(op name, output index)``, a port, or a list."""
        from inferplex.api import model_edit

        return model_edit.add_outputs(self, outputs)

    def add_results(self, results: Any) -> None:
        from inferplex.api import model_edit

        model_edit.add_results(self, results)

    def remove_result(self, result: Any) -> None:
        from inferplex.api import model_edit

        model_edit.remove_result(self, result)

    def get_result_index(self, result: Any) -> int:
        """The output index of a Result or output port of this model; -1 when it is not one."""
        from inferplex.api import model_edit

        return model_edit.get_result_index(self, result)

    def get_parameter_index(self, parameter: Any) -> int:
        """The input index of a Parameter of this model; -1 when it is not one."""
        from inferplex.api import model_edit

        return model_edit.get_parameter_index(self, parameter)

    def replace_parameter(self, index: int, parameter: Any) -> None:
        from inferplex.api import model_edit

        model_edit.replace_parameter(self, index, parameter)

    def add_parameters(self, parameters: Any) -> None:
        from inferplex.api import model_edit

        model_edit.add_parameters(self, parameters)

    def remove_parameter(self, parameter: Any) -> None:
        from inferplex.api import model_edit

        model_edit.remove_parameter(self, parameter)

    def validate_nodes_and_infer_types(self) -> None:
        """Re-infer shapes and types; a ModelError names the node whose inputs do not fit."""
        from inferplex.api import model_edit

        model_edit.validate(self)

    def evaluate(self, output_tensors: Any, input_tensors: Any) -> bool:
        """Run the model once on the CPU, writing the results into ``output_tensors``."""
        from inferplex.api import model_edit

        return model_edit.evaluate(self, output_tensors, input_tensors)

    def get_rt_info(self, path: Any = None) -> Any:
        """The rt_info value at ``path`` (a name or list of names), or all of it as nested dicts."""
        from inferplex.api import model_edit

        return model_edit.get_rt_info(self, path)

    @property
    def rt_info(self) -> Any:
        return self.get_rt_info()

    def set_rt_info(self, value: Any, path: Any) -> None:
        """Store ``value`` at ``path``; kept in the ONNX model's metadata, so it is saved with it."""
        from inferplex.api import model_edit

        model_edit.set_rt_info(self, value, path)

    def has_rt_info(self, path: Any) -> bool:
        from inferplex.api import model_edit

        return model_edit.has_rt_info(self, path)

    def get_result(self) -> Any:
        """The only Result (OpenVINO's ``get_result``); an error for a model with several."""
        return self.get_results()[find_port(self.outputs, None, "output").index]

    def result(self) -> Any:
        return self.get_result()

    def get_output_op(self, index: int) -> Any:
        return self.get_results()[index]

    def get_output_element_type(self, index: int) -> Any:
        return self.output(index).get_element_type()

    def get_output_partial_shape(self, index: int) -> Any:
        return self.output(index).get_partial_shape()

    def get_output_shape(self, index: int) -> Any:
        return self.output(index).get_shape()

    def to_onnx(self) -> onnx.ModelProto:
        """The model as an ``onnx.ModelProto`` (rt_info included as node metadata)."""
        return ir.serde.serialize_model(self.ir)

    def clone(self) -> Model:
        """A deep copy: reshaping or editing it leaves this model as it is."""
        return Model(ir.serde.deserialize_model(self.to_onnx()), self._name)

    def __repr__(self) -> str:
        """OpenVINO's form: the name, then one line per input and per output port."""
        inputs = ",".join(f"\n{port!r}" for port in self.inputs)
        outputs = ",".join(f"\n{port!r}" for port in self.outputs)
        return f"<Model: {self._name!r}\ninputs[{inputs}\n]\noutputs[{outputs}\n]>"


def _check_reshape_types(shapes: Any) -> None:
    """TypeError for keys and values ``reshape`` does not take, as OpenVINO raises it."""
    from inferplex.api.shapes import Dimension, PartialShape, Shape

    shape_types = (PartialShape, Shape, str, list, tuple)
    items = shapes.items() if isinstance(shapes, Mapping) else [(0, shapes)]
    for key, value in items:
        if not isinstance(key, (int, str, Port)) or isinstance(key, bool):
            raise InputTypeError(f"Incorrect key type {type(key)} to reshape a model, expected keys as "
                            "an input port (ov.Output), int or str.")
        if not isinstance(value, shape_types) and not isinstance(value, Dimension):
            raise InputTypeError(f"Incorrect value type {type(value)} to reshape a model, expected values as "
                            "PartialShape, str, list or tuple.")


def _topological(graph: ir.Graph) -> list[ir.Node]:
    """The graph's nodes in a topological order (the graph itself is not reordered)."""
    placed: set[int] = set()
    order: list[ir.Node] = []
    for node in graph:  # ONNX requires graph order to be topological; re-check it cheaply
        pending = [node]
        while pending:
            current = pending[-1]
            if id(current) in placed:
                pending.pop()
                continue
            producers = [v.producer() for v in current.inputs if v is not None and v.producer() is not None]
            todo = [p for p in producers if p is not None and p.graph is graph and id(p) not in placed]
            if todo:
                pending.extend(todo)
                continue
            placed.add(id(current))
            order.append(current)
            pending.pop()
    return order


# --- reading and saving ------------------------------------------------------------


def is_model_source(source: Any) -> bool:
    """Whether :func:`load_model` takes ``source``'s type: a Model, path, bytes, ModelProto, onnx_ir.Model."""
    return isinstance(source, (Model, ir.Model, str, os.PathLike, bytes, bytearray, memoryview,
                               onnx.ModelProto))


def load_model(source: Any, weights: Any = None) -> Model:
    """Read a model from a path, bytes, ``onnx.ModelProto`` or ``onnx_ir.Model``.

    Whatever is wrong with the source ends as a :class:`ModelError` naming it:
    a file that is missing or not a protobuf, text that is not UTF-8, unknown
    element types, external data that is malformed or leaves the model's
    folder, what ``onnx.checker`` finds (:mod:`inferplex._model_check`).
    """
    del weights  # OpenVINO's read_model(model, weights): ONNX keeps weights inside or beside
    base_dir: Path | None = None
    name: str | None = None
    if isinstance(source, Model):
        return source
    if isinstance(source, ir.Model):
        _check_ir_model(source)
        return Model(_read_ir(lambda: _prepare(source)), None)
    if isinstance(source, (str, os.PathLike)):
        path = Path(source)
        if not path.is_file():
            raise ModelError(f"model file {str(path)!r} does not exist or is not a file; "
                             "read_model accepts a path to an .onnx file, bytes, an "
                             "onnx.ModelProto or an onnx_ir.Model")
        proto = _parse(lambda: onnx.load(str(path), load_external_data=False), str(path), path)
        base_dir, name = path.resolve().parent, path.stem
    elif isinstance(source, (bytes, bytearray, memoryview)):
        proto = _parse(lambda: onnx.load_from_string(bytes(source)), "the given bytes", bytes(source[:64]))
    elif isinstance(source, onnx.ModelProto):
        proto = source
    else:
        raise InputTypeError(f"Provided python object type {type(source)} isn't supported as 'model' "
                             "argument. read_model accepts a path (str or os.PathLike), bytes, "
                             "onnx.ModelProto or onnx_ir.Model")
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
    """Write ``model`` (with rt_info such as affinities and layouts) to an .onnx file.

    ``compress_to_fp16`` (default True, as in OpenVINO) stores float32 weights
    as float16 followed by a Cast back to float32, halving the file; inputs,
    outputs and the arithmetic stay float32.  Weights out of float16's range
    stay float32.  The model in memory is not changed.
    """
    to_save = model.ir
    if compress_to_fp16:
        from inferplex.api.fp16 import compressed_weights_copy

        to_save = compressed_weights_copy(model.ir)
    ir.save(to_save, os.fspath(output_model))


def serialize(model: Model, xml_path: str | os.PathLike[str], bin_path: str | os.PathLike[str] | None = None,
              version: Any = None) -> None:
    """OpenVINO's ``serialize(model, xml_path, bin_path)``, writing inferplex's model format.

    inferplex models are ONNX, so ``xml_path`` receives an ONNX file with its
    weights inside (not OpenVINO IR, whatever its extension), and ``bin_path``,
    when given, an empty file, so code that writes both and reads them back with
    ``read_model(xml_path, bin_path)`` runs unchanged.  ``version`` (IR version)
    is accepted and ignored.  Use :func:`save_model` to choose a path and fp16 weights.
    """
    del version
    save_model(model, xml_path, compress_to_fp16=False)
    if bin_path is not None:
        Path(bin_path).write_bytes(b"")


def _parse(load: Any, what: str, source: Path | bytes) -> onnx.ModelProto:
    try:
        return load()
    except Exception as error:  # noqa: BLE001 - protobuf raises several unrelated types
        raise ModelError(f"{what} is not a readable ONNX model: {_cause(error)}{_other_format(source)}") \
            from error


def _other_format(source: Path | bytes) -> str:
    """A hint where the unreadable model is another framework's format that OpenVINO reads."""
    if isinstance(source, Path):
        try:
            with source.open("rb") as file:
                head = file.read(64)
        except OSError:
            return ""
    else:
        head = source
    text = head.lstrip()
    if text.startswith((b"<?xml", b"<net")):
        return ("; it is an OpenVINO IR (.xml) file: inferplex reads ONNX models (accepted: .onnx files, "
                "bytes, onnx.ModelProto, onnx_ir.Model); export the model to ONNX instead")
    if head[4:8] == b"TFL3":
        return ("; it is a TensorFlow Lite model: inferplex reads ONNX models (accepted: .onnx files, "
                "bytes, onnx.ModelProto, onnx_ir.Model); convert it to ONNX (tf2onnx) instead")
    return ""


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
    return model
