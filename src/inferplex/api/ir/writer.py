"""Writing a Model as an OpenVINO IR (``.xml`` with its ``.bin``) with OpenVINO itself.

inferplex's models are ONNX graphs; OpenVINO's ONNX frontend turns one into an ``openvino.Model``
(as the CPU device's OpenVINO engine reads it), and OpenVINO writes that as IR, so the files are
the ones OpenVINO writes: OpenVINO reads them, and so does inferplex (:mod:`.graph`).  What the
frontend does not carry is set on the ``openvino.Model`` before it is written: the model's
friendly name, its rt_info, the inputs' and outputs' layouts, and its state.

State: each ``ReadValue`` becomes, in the graph handed to the frontend, one more graph input
(and, where it has an initial value, one more output giving that value), each ``Assign`` one more
output; in the ``openvino.Model`` they become OpenVINO's ``ReadValue`` (opset 6, with its initial
value) and ``Assign`` again, reading and writing one ``Variable`` per variable id.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import onnx_ir as ir

from inferplex._model import Model
from inferplex._openvino_package import openvino_running, openvino_submodule
from inferplex.api.ir.source import openvino_module
from inferplex.errors import ModelError
from inferplex.state.variables import (
    ASSIGN,
    READ_VALUE,
    STATE_DOMAIN,
    VariableSpec,
    declared_variables,
    is_state_node,
    node_variable,
)

__all__ = ["write_ir"]

_OWN_METADATA = ("rt_info:", "inferplex.")
"""The ``metadata_props`` keys inferplex keeps its model's rt_info and variables under."""
_ONNX_HINT = "save it as ONNX instead (a path ending in .onnx), which keeps every op inferplex runs"


def write_ir(model: Model, xml_path: Path, bin_path: Path | None, compress_to_fp16: bool) -> None:
    """Write ``model`` as IR: ``xml_path`` and ``bin_path`` (None: ``<name>.bin`` beside the xml),
    their folders made where missing; ``compress_to_fp16`` stores float32 weights as float16, as
    OpenVINO's ``save_model`` does.  ModelError where OpenVINO cannot hold the model."""
    openvino = openvino_module("writing an OpenVINO IR (.xml/.bin)")
    bin_path = bin_path if bin_path is not None else xml_path.with_suffix(".bin")
    with tempfile.TemporaryDirectory(prefix="inferplex-ir-") as scratch, openvino_running():
        ov_model = openvino_model(model, Path(scratch))
        for folder in {xml_path.parent, bin_path.parent}:
            folder.mkdir(parents=True, exist_ok=True)
        _prepare_as_ovc_does(ov_model, compress_to_fp16)
        try:
            openvino.serialize(ov_model, str(xml_path), str(bin_path))
        except RuntimeError as error:  # an unwritable path, a full disk
            raise ModelError(f"OpenVINO could not write the IR to {str(xml_path)!r} and {str(bin_path)!r}: "
                             f"{str(error).strip().splitlines()[-1]}") from error
        del ov_model  # before the scratch folder, whose files it may map


def _prepare_as_ovc_does(ov_model: Any, compress_to_fp16: bool) -> None:
    """OpenVINO's ``convert_model`` and ``save_model`` steps on a model its frontend read: weight
    subgraphs folded to constants (so a GroupConvolution's reshaped filters are a constant, as
    the IR's readers expect), quantized weights stored in their low type, f16 compression."""
    transformations = openvino_submodule("_offline_transformations")
    transformations.apply_moc_transformations(ov_model, cf=False, smart_reshape=True)
    transformations.compress_quantize_weights_transformation(ov_model)
    transformations.apply_fused_names_cleanup(ov_model)
    if compress_to_fp16:
        transformations.compress_model_transformation(ov_model)


def openvino_model(model: Model, scratch: Path) -> Any:
    """``model`` as an ``openvino.Model``, with its name, rt_info, layouts and state; ``scratch`` is a
    folder for the ONNX file of a model whose weights are large or external, which must outlive
    the ``openvino.Model``."""
    from inferplex.devices.cpu.openvino_engine import OpenVinoCannotRun, read

    graph, ports = _state_as_ports(model.ir)
    try:
        ov_model = _through_file(graph, scratch) if _weights_outgrow_bytes(graph) else read(graph)
    except OpenVinoCannotRun as error:
        raise ModelError(f"OpenVINO IR cannot hold model {model.friendly_name!r}: OpenVINO's ONNX frontend "
                         f"does not read it ({error}); {_ONNX_HINT}") from error
    if ports:
        _restore_state(ov_model, ports)
    ov_model.set_friendly_name(model.friendly_name)
    for path, text in _rt_info_leaves(model.get_rt_info()):
        ov_model.set_rt_info(text, path)
    _copy_port_details(model, ov_model)
    return ov_model


_INLINE_BYTES = 1 << 30
"""Weights up to this size reach OpenVINO's frontend as ONNX bytes (protobuf holds at most 2 GiB);
larger ones, and weights kept in external files, as an ONNX file with external data."""


def _weights_outgrow_bytes(graph: ir.Model) -> bool:
    total = 0
    for value in graph.graph.initializers.values():
        tensor = value.const_value
        if isinstance(tensor, ir.ExternalTensor):
            return True
        total += tensor.nbytes if tensor is not None else 0
    return total > _INLINE_BYTES


def _through_file(graph: ir.Model, scratch: Path) -> Any:
    """``graph`` (a copy of the model's, which this changes) read by OpenVINO from an ONNX file in
    ``scratch`` with its weights in an external data file beside it."""
    from inferplex.devices.cpu.openvino_engine import OpenVinoCannotRun, reason

    path = scratch / "model.onnx"
    ir.save(graph, str(path), external_data="model.onnx.data")
    try:
        return openvino_module().Core().read_model(str(path))
    except Exception as error:  # noqa: BLE001 - OpenVINO raises RuntimeError and its own types
        raise OpenVinoCannotRun(reason(error)) from error


# --- state --------------------------------------------------------------------------------


@dataclass(frozen=True)
class _StatePort:
    """One ReadValue or Assign of the model, as the graph inputs and outputs that stand for it."""

    spec: VariableSpec
    read: bool
    """A ReadValue (``value`` is its state input, ``init`` the output giving its initial value or
    None); else an Assign (``value`` is the output it writes)."""
    value: str
    init: str | None = None


def _state_as_ports(model: ir.Model) -> tuple[ir.Model, list[_StatePort]]:
    """A copy of ``model`` without inferplex's own metadata (OpenVINO's ONNX frontend would keep it
    as rt_info), where each ReadValue is a graph input (its initial value one more output) and each
    Assign one more output; and those ports."""
    declared = declared_variables(model)
    stateful = any(is_state_node(node) for node in model.graph)
    if declared and not stateful:
        raise ModelError(f"variables {[s.variable_id for s in declared]} are declared but no ReadValue "
                         f"reads them; OpenVINO IR keeps variables only through their ops; {_ONNX_HINT}")
    copy = model.clone()
    for key in [key for key in copy.metadata_props if key.startswith(_OWN_METADATA)]:
        del copy.metadata_props[key]  # written to the IR as rt_info, or as ReadValue and Assign
    if not stateful:
        return copy, []
    graph = copy.graph
    specs = {spec.variable_id: spec for spec in declared}
    for node in graph:
        if is_state_node(node, READ_VALUE):
            spec = node_variable(node)
            specs.setdefault(spec.variable_id, spec)
    ports: list[_StatePort] = []
    for index, node in enumerate(list(graph)):
        if not is_state_node(node):
            continue
        spec = node_variable(node)
        spec = specs.get(spec.variable_id, spec)
        if spec.dtype == ir.DataType.UNDEFINED or spec.dims is None:
            raise ModelError(f"variable {spec.variable_id!r} has no static element type and rank; OpenVINO "
                             f"IR needs both; {_ONNX_HINT}")
        label = f"inferplex.state.{index}"
        if node.op_type == READ_VALUE:
            ports.append(_read_value_port(graph, node, spec, label))
        else:
            assert node.op_type == ASSIGN
            ports.append(_StatePort(spec, False, _output(graph, node.inputs[0], f"{label}.assign")))
            graph.remove(node, safe=True)
    graph.opset_imports.pop(STATE_DOMAIN, None)
    return copy, ports


def _read_value_port(graph: ir.Graph, node: ir.Node, spec: VariableSpec, label: str) -> _StatePort:
    """The ReadValue's output as a graph input of its name (given back to OpenVINO's ReadValue)."""
    dims = ir.Shape([d if isinstance(d, int) else None for d in spec.dims or ()])
    read = node.outputs[0]
    name = read.name or f"{label}.read"
    state = ir.Value(type=ir.TensorType(spec.dtype), shape=dims)
    init = node.inputs[0] if node.inputs else None
    init_name = _output(graph, init, f"{label}.init") if init is not None else None
    ir.convenience.replace_all_uses_with(read, state, replace_graph_outputs=True)
    graph.remove(node, safe=True)
    read.name, state.name = None, name
    graph.inputs.append(state)
    return _StatePort(spec, True, name, init_name)


def _output(graph: ir.Graph, value: ir.Value | None, name: str) -> str:
    """``value`` as one more graph output (through an Identity, so it has a name of its own)."""
    if value is None:
        raise ModelError(f"{name}: an Assign without a value to assign")
    node = ir.node("Identity", [value], name=name)
    node.outputs[0].name, node.outputs[0].type, node.outputs[0].shape = name, value.type, value.shape
    graph.append(node)
    graph.outputs.append(node.outputs[0])
    return name


def _restore_state(ov_model: Any, ports: list[_StatePort]) -> None:
    """Put OpenVINO's ReadValue and Assign where ``ports`` stand for them in ``ov_model``."""
    ov = openvino_module()
    Type, op = ov.Type, ov.op  # noqa: N806 - OpenVINO's class name
    util = openvino_submodule("op.util")
    Variable, VariableInfo = util.Variable, util.VariableInfo  # noqa: N806 - OpenVINO's class names

    variables: dict[str, Any] = {}
    for spec in (port.spec for port in ports):
        if spec.variable_id not in variables:
            info = VariableInfo()
            info.variable_id = spec.variable_id
            info.data_type = Type(_numpy_type(spec.dtype))
            info.data_shape = _ov_shape(spec.dims)
            variables[spec.variable_id] = Variable(info)
    parameters = {name: p for p in ov_model.get_parameters() for name in p.output(0).get_names()}
    results = {name: r for r in ov_model.get_results() for name in r.input_value(0).get_names()}
    sinks = []
    for port in ports:
        variable = variables[port.spec.variable_id]
        if port.read:
            read = (op.read_value(_before_identity(results[port.init]), variable) if port.init
                    else op.read_value(variable))
            parameter = parameters.get(port.value)
            if parameter is not None:
                read.output(0).get_tensor().set_names(parameter.output(0).get_names())
                for target in list(parameter.output(0).get_target_inputs()):
                    target.replace_source_output(read.output(0))
                ov_model.remove_parameter(parameter)
            if port.init:
                ov_model.remove_result(results[port.init])
        else:
            value = _before_identity(results[port.value])
            sink = op.assign(value.get_node(), variable)  # the binding takes a node: its output 0
            sink.input(0).replace_source_output(value)
            sinks.append(sink)
            ov_model.remove_result(results[port.value])
    ov_model.add_sinks(sinks)
    ov_model.add_variables([v for v in variables.values() if v not in ov_model.get_variables()])
    ov_model.validate_nodes_and_infer_types()


def _before_identity(result: Any) -> Any:
    """What the Identity :func:`_output` put before ``result`` reads (the frontend keeps it)."""
    value = result.input_value(0)
    node = value.get_node()
    return node.input_value(0) if node.get_type_name() == "Identity" else value


def _numpy_type(dtype: ir.DataType) -> Any:
    return dtype.numpy()


def _ov_shape(dims: tuple[Any, ...] | None) -> Any:
    return openvino_module().PartialShape([d if isinstance(d, int) else -1 for d in dims or ()])


# --- rt_info, names, layouts -------------------------------------------------------------------


def _rt_info_leaves(tree: dict[str, Any], path: tuple[str, ...] = ()) -> Iterator[tuple[list[str], str]]:
    for key, value in tree.items():
        if isinstance(value, dict):
            yield from _rt_info_leaves(value, (*path, key))
        else:
            yield [*path, key], str(value)


def _copy_port_details(model: Model, ov_model: Any) -> None:
    """Every tensor name and the layout of the model's inputs and outputs (the frontend keeps one name)."""
    from inferplex.api.layout_helpers import get_layout

    ov = openvino_module()

    ov_inputs = {name: port for port in ov_model.inputs for name in port.get_names()}
    ov_outputs = {name: port for port in ov_model.outputs for name in port.get_names()}
    for ports, ov_ports in ((model.inputs, ov_inputs), (model.outputs, ov_outputs)):
        for port in ports:
            names = port.get_names()
            ov_port = next((ov_ports[name] for name in names if name in ov_ports), None)
            if ov_port is None:
                continue
            ov_port.get_tensor().add_names(set(names))
            layout = get_layout(port)
            if not layout.empty:
                ov.layout_helpers.set_layout(ov_port, ov.Layout(layout.to_string()))
