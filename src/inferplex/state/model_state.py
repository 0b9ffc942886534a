"""A Model's sinks and variables, as OpenVINO's ``Model`` gives them.

Sinks are the model's ``Assign`` nodes: they compute nothing a result reads, so the model keeps
them as nodes of its graph that no output reaches.  Its variables are those its ``ReadValue``
and ``Assign`` nodes name, then those declared without a node (``add_variables``), in that order.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import onnx_ir as ir

from inferplex._ports import op_of
from inferplex.api.build import attach
from inferplex.api.reshape import format_dims, parse_shape
from inferplex.api.shapes import PartialShape, Shape
from inferplex.errors import InputError, InputTypeError
from inferplex.state.variables import (
    ASSIGN,
    READ_VALUE,
    STATE_DOMAIN,
    Variable,
    VariableSpec,
    declared_variables,
    is_state_node,
    node_variable,
    set_declared_variables,
)

__all__ = [
    "add_sinks",
    "add_variables",
    "get_sink_index",
    "get_sinks",
    "get_variable_by_id",
    "get_variables",
    "remove_sink",
    "remove_variable",
    "reshaped_variables",
    "sink_node",
]

STATE_OPSET = 1
"""The version of :data:`STATE_DOMAIN` a model imports."""


def sink_node(sink: Any) -> ir.Node:
    """The ONNX node of an ``Assign`` given as a node or its output port; InputTypeError otherwise."""
    port_value = getattr(sink, "_value", None)
    if isinstance(port_value, ir.Value) and port_value.producer() is not None:
        node = port_value.producer()
    else:
        main = getattr(sink, "_main", None)
        node = main if isinstance(main, ir.Node) else None
    if node is None or not is_state_node(node, ASSIGN):
        raise InputTypeError(
            "Incorrect argument type. Sink node is expected as argument. Accepted: an "
            f"Assign (opset.assign) or its output; got {type(sink).__name__}"
        )
    return node


def get_sinks(model: Any) -> list[Any]:
    return [op_of(node) for node in model.ir.graph if is_state_node(node, ASSIGN)]


def add_sinks(model: Any, sinks: Sequence[Any]) -> None:
    """Add ``Assign`` nodes (built on this model's values) to the model."""
    graph = model.ir.graph
    for sink in sinks:
        node = sink_node(sink)
        if node.graph is graph:
            continue
        if node.outputs:
            attach(graph, node.outputs[0])
        else:  # an Assign with no value: nothing it reads joins
            graph.append(node)
    graph.opset_imports.setdefault(STATE_DOMAIN, STATE_OPSET)


def remove_sink(model: Any, sink: Any) -> None:
    node = _graph_node(model, sink)
    if node is None:
        raise InputError("remove_sink: the Assign is not a sink of this model")
    model.ir.graph.remove(node, safe=False)


def get_sink_index(model: Any, sink: Any) -> int:
    """The sink's position among :func:`get_sinks`; -1 for a node that is not one of them."""
    if not hasattr(sink, "get_type_name") and not isinstance(getattr(sink, "_value", None), ir.Value):
        raise InputTypeError(
            "Incorrect argument type. Sink node is expected as argument. Accepted: an "
            f"Assign (opset.assign) or its output; got {type(sink).__name__}"
        )
    try:
        node = _graph_node(model, sink)
    except InputTypeError:
        return -1
    sinks = [n for n in model.ir.graph if is_state_node(n, ASSIGN)]
    return next((i for i, n in enumerate(sinks) if n is node), -1)


def _graph_node(model: Any, sink: Any) -> ir.Node | None:
    """The graph's own node for ``sink`` (itself, or the copy of the node the model was built from)."""
    node = sink_node(sink)
    graph = model.ir.graph
    if node.graph is graph:
        return node
    return next((n for n in graph if is_state_node(n, ASSIGN) and n.name == node.name), None)


def get_variables(model: Any) -> list[Variable]:
    return [Variable.of(spec) for spec in variable_specs(model.ir)]


def variable_specs(model: ir.Model) -> list[VariableSpec]:
    """Each variable once: those the ReadValue nodes describe, those only Assign nodes name (typed
    by the value assigned), then those declared without a node."""
    found: dict[str, VariableSpec] = {}
    for op_type in (READ_VALUE, ASSIGN):
        for node in model.graph:
            if is_state_node(node, op_type):
                spec = node_variable(node)
                found.setdefault(spec.variable_id, spec)
    for spec in declared_variables(model):
        found.setdefault(spec.variable_id, spec)
    return list(found.values())


def add_variables(model: Any, variables: Sequence[Any]) -> None:
    declared = declared_variables(model.ir)
    for variable in variables:
        if not isinstance(variable, Variable):
            raise InputTypeError(
                f"add_variables takes Variables (op.util.Variable), not {type(variable).__name__}"
            )
        declared = [s for s in declared if s.variable_id != variable.spec.variable_id] + [variable.spec]
    set_declared_variables(model.ir, declared)


def remove_variable(model: Any, variable: Any) -> None:
    """Forget a variable declared with ``add_variables`` (one its nodes name stays while they do)."""
    if not isinstance(variable, Variable):
        raise InputTypeError(
            f"remove_variable takes a Variable (op.util.Variable), not {type(variable).__name__}"
        )
    declared = declared_variables(model.ir)
    set_declared_variables(model.ir, [s for s in declared if s.variable_id != variable.spec.variable_id])


def get_variable_by_id(model: Any, variable_id: str) -> Variable:
    for spec in variable_specs(model.ir):
        if spec.variable_id == variable_id:
            return Variable.of(spec)
    names = ", ".join(repr(s.variable_id) for s in variable_specs(model.ir)) or "none"
    raise InputError(f"the model has no variable {variable_id!r}; its variables: {names}")


@contextmanager
def reshaped_variables(model: ir.Model, shapes: Mapping[Any, Any]) -> Iterator[None]:
    """Give the variables ``{id: shape}`` their new shapes for the reshape run inside; where it
    raises, they take their old ones back.  TypeError for keys and values ``reshape`` does not take."""
    if not isinstance(shapes, Mapping):
        raise InputTypeError(
            f"reshape's variable shapes are {{variable id: shape}}, not {type(shapes).__name__}"
        )
    reads = [node for node in model.graph if is_state_node(node, READ_VALUE)]
    known = {node_variable(node).variable_id for node in reads}
    changed: list[tuple[ir.Node, str]] = []
    for key, value in shapes.items():
        if not isinstance(key, str):
            raise InputTypeError(
                f"Incorrect key type {type(key)} to reshape a model, expected values as str."
            )
        if not isinstance(value, (PartialShape, Shape, str, list, tuple)):
            raise InputTypeError(
                f"Incorrect value type {type(value)} to reshape a model, expected values as "
                "PartialShape, str, list or tuple."
            )
        if key not in known:
            raise InputError(
                f"reshape: the model has no variable {key!r} read by a ReadValue; its variables: "
                f"{', '.join(repr(k) for k in sorted(known)) or 'none'}"
            )
        text = format_dims(parse_shape(value))
        for node in reads:
            if node_variable(node).variable_id == key:
                changed.append((node, node.attributes.get_string("variable_shape", "[...]")))
                node.attributes["variable_shape"] = ir.AttrString("variable_shape", text)
    try:
        yield
    except BaseException:
        for node, old in changed:
            node.attributes["variable_shape"] = ir.AttrString("variable_shape", old)
        raise
