"""Editing a Model as OpenVINO's ``ov.Model`` does: outputs, results and parameters added,
removed or replaced, indices of results and parameters, validation, evaluation, and
the model's nested ``rt_info``.

A model built with ``ov.Model(results, parameters)`` is an ONNX graph copied from the
built nodes (:mod:`inferplex.api.build`), which remembers the built values it copies; so a
built node's output is found in the model as its copy, and a built Parameter by the
Parameter the model was made from.  Nodes built on a model's outputs join its graph when
a Result or an op's input is made to read them (``add_results``,
``Input.replace_source_output``), as in OpenVINO, where nodes are shared.
The functions take the :class:`~inferplex._model.Model` first (the rewiring ones, the graph);
its methods and those of the ports and nodes call them.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx
import onnx_ir as ir

from inferplex._ports import _NAMES_KEY, Port, RtValue, graph_changed
from inferplex.api.build import attach, check_declared, declare
from inferplex.api.nodes import RESULT_KEY, Result
from inferplex.config.any_value import OVAny
from inferplex.errors import InputError, InputTypeError, ModelError

__all__ = [
    "add_outputs", "add_parameters", "add_results", "evaluate", "get_parameter_index", "get_result_index",
    "get_rt_info", "has_rt_info", "remove_parameter", "remove_result", "replace_node_input",
    "replace_parameter", "replace_result_source", "set_rt_info", "validate",
]

_RT_PREFIX = "rt_info:"
"""Model metadata_props key prefix of rt_info entries (path parts joined by '/')."""


# --- outputs and results -----------------------------------------------------------------------


def add_outputs(model: Any, outputs: Any) -> list[Port]:
    """Make tensors model outputs: a tensor name, ``(op name, output index)``, an output port,
    or a list of those; returns the new output ports."""
    items = outputs if isinstance(outputs, list) else [outputs]
    values = []
    for index, item in enumerate(items):
        if not isinstance(item, (str, tuple, Port)):
            where = f" at index {index}" if isinstance(outputs, list) else ""
            raise InputTypeError(f"Incorrect type of a value to add as output{where}. Accepted: a "
                                 "tensor name (str), (op name, output index) or an output port; got "
                                 f"{type(item).__name__}")
        values.append(_find_value(model, item))
    if any(value.shape is None for value in values):  # a model read from ONNX keeps few inner shapes
        from inferplex.api.reshape import apply_input_shapes

        with contextlib.suppress(InputError):  # else the outputs stay of dynamic rank, as they were
            apply_input_shapes(model.ir, {})
    return [_append_output(model, value, None) for value in values]


def add_results(model: Any, results: Sequence[Any]) -> None:
    """Add Result nodes (``ops.result(node)``) as model outputs; nodes built on the model's
    outputs for them join the model."""
    for result in results:
        port = result.output(0)
        if port._value.name is None:  # noqa: SLF001 - a new node's output: the Result names it
            port._value.name = result.get_friendly_name()  # noqa: SLF001
        _append_output(model, _find_value(model, port), result.get_friendly_name())


def replace_result_source(graph: ir.Graph, output: ir.Value, value: ir.Value) -> ir.Value:
    """Make the graph output ``output`` read ``value`` instead; returns the new graph output.

    The output keeps its names (a new op's output takes them; an existing value is output
    through an Identity that carries them), so results are still found by the same name.
    """
    slot = next((i for i, v in enumerate(graph.outputs) if v is output), None)
    if slot is None:
        raise InputError(f"the Result of {output.name!r} is no longer an output of its model")
    value, added = attach(graph, value)
    if value is output:
        return output
    name, extra = output.name or "output", output.metadata_props.pop(_NAMES_KEY, None)
    if output.producer() is not None:  # free the name; a graph input or initializer keeps its own
        output.name = _unique(graph, name)
    if value.producer() is not None and value.producer() in added:
        value.name = name if output.name != name else _unique(graph, name)
    else:
        value = _identity(graph, value, name if output.name != name else _unique(graph, name))
    if extra:
        value.metadata_props[_NAMES_KEY] = extra
    if RESULT_KEY in output.meta:  # the Result is the same node, now reading ``value``
        value.meta[RESULT_KEY] = output.meta.pop(RESULT_KEY)
    graph.outputs[slot] = value
    graph_changed(graph)
    return value


def replace_node_input(node: ir.Node, index: int, value: ir.Value) -> None:
    """Make input ``index`` of ``node`` read ``value``; nodes built to compute it join the graph.
    ModelError, and no change, where ``value`` is computed from ``node`` (a cycle)."""
    graph = node.graph
    if graph is None:  # a built node, not in a model yet
        node.replace_input_with(index, value)
        return
    if _computed_from(value, node):
        raise ModelError(f"{node.op_type} {node.name!r} cannot read a value computed from its own "
                         "output: the graph would have a cycle")
    value, _ = attach(graph, value)
    node.replace_input_with(index, value)
    graph.sort()
    graph_changed(graph)


def _computed_from(value: ir.Value, node: ir.Node) -> bool:
    """Whether ``node`` is among the ops ``value`` is computed from."""
    seen: set[int] = set()
    pending = [value]
    while pending:
        producer = pending.pop().producer()
        if producer is None or id(producer) in seen:
            continue
        if producer is node:
            return True
        seen.add(id(producer))
        pending.extend(v for v in producer.inputs if v is not None)
    return False


def _identity(graph: ir.Graph, value: ir.Value, name: str) -> ir.Value:
    """A new graph value named ``name`` that copies ``value`` (an Identity node)."""
    identity = ir.node("Identity", [value], name=f"{name}/result")
    copy = identity.outputs[0]
    copy.name, copy.type, copy.shape = name, value.type, value.shape
    graph.append(identity)
    return copy


def remove_result(model: Any, result: Any) -> None:
    index = get_result_index(model, result)
    if index < 0:
        name = getattr(result, "get_friendly_name", lambda: result)()
        raise InputError(f"remove_result: {name!r} is not a result of this model")
    model.ir.graph.outputs.pop(index)


def get_result_index(model: Any, result: Any) -> int:
    """The output index of a Result node or an output port of this model; -1 when it is not one."""
    value = _value_of(result)
    outputs = list(model.ir.graph.outputs)
    for index, output in enumerate(outputs):
        if output is value:
            return index
    name = result.get_friendly_name() if hasattr(result, "get_type_name") and \
        result.get_type_name() == "Result" else None
    for index, output in enumerate(outputs):  # a built Result the model was made from
        if name and output.name == name and value is not None and value.name in (name, _source_name(output)):
            return index
    return -1


def _source_name(output: ir.Value) -> str | None:
    producer = output.producer()
    if producer is not None and producer.op_type == "Identity" and producer.inputs[0] is not None:
        return producer.inputs[0].name
    return output.name


def _append_output(model: Any, value: ir.Value, name: str | None) -> Port:
    graph = model.ir.graph
    if any(v is value for v in graph.outputs) or value in graph.inputs or (name and name != value.name):
        value = _identity(graph, value, _unique(graph, name or f"{value.name}_output"))
    graph.outputs.append(value)
    return model.outputs[len(graph.outputs) - 1]


def _unique(graph: ir.Graph, base: str) -> str:
    taken = {v.name for node in graph for v in node.outputs} | {v.name for v in graph.inputs}
    name, suffix = base, 1
    while name in taken:
        name, suffix = f"{base}_{suffix}", suffix + 1
    return name


def _find_value(model: Any, key: Any) -> ir.Value:
    """The model's value for a tensor name, ``(op name, index)`` or an output port."""
    graph = model.ir.graph
    if isinstance(key, Port):
        value = key._value  # noqa: SLF001 - the port class of this package
        if value.graph is None or value.graph is graph:
            return attach(graph, value)[0]  # the graph's value, or built nodes joining the graph
        if value.name:
            return _find_value(model, value.name)
        producer = value.producer()
        if producer is not None and producer.name:
            return _find_value(model, (producer.name, value.index() or 0))
        raise InputError("the port is not part of this model")
    if isinstance(key, tuple):
        op_name, index = key
        for node in graph:
            if node.name == op_name:
                if not 0 <= int(index) < len(node.outputs):
                    raise InputError(f"op {op_name!r} has {len(node.outputs)} output(s); "
                                     f"output {index} does not exist")
                return node.outputs[int(index)]
        raise InputError(f"the model has no op named {op_name!r}")
    for value in [*graph.inputs, *(v for node in graph for v in node.outputs)]:
        names = {value.name, *Port(value, 0, "output").names}
        if key in names:
            return value
    raise InputError(f"the model has no tensor named {key!r}")


def _value_of(item: Any) -> ir.Value | None:
    if isinstance(item, Port):
        return item._value  # noqa: SLF001
    if isinstance(item, Result):
        return item.value
    outputs = getattr(item, "_outputs", None)
    return outputs[0] if outputs else None


# --- parameters ------------------------------------------------------------------------------------


def get_parameter_index(model: Any, parameter: Any) -> int:
    """The input index of a Parameter of this model (or one it was built from); -1 otherwise."""
    value = _value_of(parameter)
    for index, graph_input in enumerate(model.ir.graph.inputs):
        if graph_input is value:
            return index
    for index, source in enumerate(model._param_sources):  # noqa: SLF001 - the Model of this package
        if source is value and value is not None:
            return index
    return -1


def replace_parameter(model: Any, index: int, parameter: Any) -> None:
    """Input ``index`` becomes ``parameter`` (its name, type and shape); ops that read the old
    input read the new one.  Shapes downstream are not re-inferred: see ``validate``."""
    graph = model.ir.graph
    if not 0 <= index < len(graph.inputs):
        raise InputError(f"replace_parameter: index {index} is out of range; the model has "
                         f"{len(graph.inputs)} parameters")
    old, new = graph.inputs[index], _graph_input(model, parameter)
    sources = _sources(model)
    if new in graph.inputs:  # ops already read it, undeclared: it leaves its place at the end
        at = next(i for i, v in enumerate(graph.inputs) if v is new)
        graph.inputs.pop(at)
        sources.pop(at)
    ir.convenience.replace_all_uses_with(old, new)
    graph.inputs[index] = new
    sources[index] = _value_of(parameter)
    Port(new, 0, "output").add_names(Port(old, 0, "output").names)  # OpenVINO keeps the old names too


def add_parameters(model: Any, parameters: Sequence[Any]) -> None:
    for parameter in parameters:
        value = _graph_input(model, parameter)
        sources = _sources(model)
        if value not in model.ir.graph.inputs:
            model.ir.graph.inputs.append(value)
            sources.append(None)
        sources[next(i for i, v in enumerate(model.ir.graph.inputs) if v is value)] = _value_of(parameter)


def remove_parameter(model: Any, parameter: Any) -> None:
    index = get_parameter_index(model, parameter)
    if index < 0:
        raise InputError(f"remove_parameter: {parameter.get_friendly_name()!r} is not a parameter "
                         "of this model")
    sources = _sources(model)
    model.ir.graph.inputs.pop(index)
    sources.pop(index)


def _sources(model: Any) -> list[ir.Value | None]:
    sources: list[ir.Value | None] = model._param_sources  # noqa: SLF001
    while len(sources) < len(model.ir.graph.inputs):
        sources.append(None)
    return sources


def _graph_input(model: Any, parameter: Any) -> ir.Value:
    """The graph input that stands for ``parameter``, declared: the Parameter's own value where
    ops of the model read it already (undeclared), else a new copy of it."""
    value = _value_of(parameter)
    if value is None or value.producer() is not None:
        raise InputError(f"a model parameter must be a Parameter node, got {type(parameter).__name__}")
    graph: ir.Graph = model.ir.graph
    if value.graph is not graph:
        copy = ir.Value(name=value.name, type=value.type, shape=value.shape)
        declare(graph, value, copy)
        return copy
    declare(graph, value, value)
    return value


# --- validation and evaluation ---------------------------------------------------------------------


def validate(model: Any) -> None:
    """Re-infer every shape and type (OpenVINO's ``validate_nodes_and_infer_types``); a node whose
    inputs do not fit is an error naming it, as is a Parameter ops read that the model never declared."""
    check_declared(model.ir.graph)
    proto = ir.serde.serialize_model(model.ir)
    try:
        onnx.shape_inference.infer_shapes(proto, strict_mode=True, data_prop=True)
    except (onnx.shape_inference.InferenceError, onnx.checker.ValidationError) as error:
        detail = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise ModelError(f"Argument shapes are inconsistent: {detail}") from error
    from inferplex.api.reshape import apply_input_shapes

    apply_input_shapes(model.ir, {})


def evaluate(model: Any, output_tensors: list[Any], input_tensors: list[Any]) -> bool:
    """Run the model on the CPU once, at f32 as OpenVINO's reference evaluation computes (not at
    the CPU's default bf16 or f16), writing into ``output_tensors``; True when it ran."""
    from inferplex._core import Core

    try:
        compiled = Core().compile_model(model, "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
        results = compiled.create_infer_request().infer(list(input_tensors))
    except Exception as error:  # noqa: BLE001 - every failure is OpenVINO's "Cannot evaluate"
        raise ModelError(f"Cannot evaluate model! {type(error).__name__}: {error}") from error
    for index, target in enumerate(output_tensors):
        array = np.asarray(results[index])
        target.shape = list(array.shape)
        target.data[...] = array
    return True


# --- rt_info ---------------------------------------------------------------------------------------


def _path(path: Any) -> list[str]:
    parts = [path] if isinstance(path, str) else list(path)
    if not parts or not all(isinstance(p, str) and p for p in parts):
        raise InputError(f"an rt_info path is a name or a list of names, got {path!r}")
    return parts


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return ",".join(_text(v) for v in value)
    return str(value)


def set_rt_info(model: Any, value: Any, path: Any) -> None:
    """Store ``value`` (str, number, bool or a list of them) at ``path`` (a name or a list of names)."""
    model.ir.metadata_props[_RT_PREFIX + "/".join(_path(path))] = _text(value)


def has_rt_info(model: Any, path: Any) -> bool:
    key = "/".join(_path(path))
    return any(k == _RT_PREFIX + key or k.startswith(_RT_PREFIX + key + "/") for k in model.ir.metadata_props)


def get_rt_info(model: Any, path: Any = None) -> Any:
    """The value at ``path`` (an ``OVAny``-like RtValue; a section of several values as an OVAny of
    their dict, ``.astype(dict)``), or the whole rt_info as nested dicts."""
    entries = {k[len(_RT_PREFIX):]: v for k, v in model.ir.metadata_props.items() if k.startswith(_RT_PREFIX)}
    tree: dict[str, Any] = {}
    for key, text in entries.items():
        branch = tree
        *parents, leaf = key.split("/")
        for part in parents:
            branch = branch.setdefault(part, {})
        branch[leaf] = RtValue(text)
    if path is None:
        return tree
    node: Any = tree
    for part in _path(path):
        if not isinstance(node, dict) or part not in node:
            raise InputError(f"the model has no rt_info at {_path(path)}")
        node = node[part]
    return OVAny(node) if isinstance(node, dict) else node  # a section too, as OpenVINO's OVAny
