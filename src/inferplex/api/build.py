"""``ov.Model(results, parameters, name)``: an ONNX graph assembled from built nodes through onnx-ir.

The nodes reachable from the results are collected in a topological order;
constants become initializers; every value gets a unique name (a parameter
keeps its own, an unnamed output takes its node's friendly name).  The graph is
assembled as an ``onnx_ir.GraphView`` and copied once (serialized and read
back), so the built nodes stay free: the same nodes may go into several models.
The copy remembers which built value each of its values copies, so a node built
later on a built one reads the model's copy when it joins the model (:func:`attach`).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Sequence
from typing import Any

import onnx_ir as ir

from inferplex._subgraphs import outer_values
from inferplex.api.nodes import Node, Parameter, Result
from inferplex.errors import ModelError

__all__ = ["IR_VERSION", "OPSET", "attach", "build_model", "check_declared", "declare", "is_undeclared",
           "unique_name"]

OPSET = 17
"""ONNX opset of built models: Softmax along one axis (13+), Reshape's allowzero (14+)."""
IR_VERSION = 8
"""The ONNX IR version that goes with opset 17."""
_COPIES_KEY = "inferplex.copies"
"""Graph ``meta`` key (in memory only): the built values the graph's values are copies of."""
_UNDECLARED_KEY = "inferplex.undeclared"
"""Value ``meta`` key (in memory only) of a graph input that ops read before the model declared it."""


def build_model(results: Any, parameters: Any, name: str | None, sinks: Sequence[ir.Node] = ()) -> ir.Model:
    """An ``onnx_ir.Model`` computing ``results`` from ``parameters``, with the ``sinks``
    (``Assign`` nodes, :mod:`inferplex.state`) and what they read among its nodes."""
    outputs = _result_values(results)
    inputs = _parameter_values(parameters)
    known = {id(v): v for v in inputs}
    reached = [value for value, _ in outputs] + [v for sink in sinks for v in sink.outputs]
    nodes, initializers, undeclared = _collect(reached, lambda v: known.get(id(v)))
    nodes += [sink for sink in sinks if not sink.outputs and sink not in nodes]  # an Assign of no value
    if undeclared:
        raise ModelError(f"the results depend on Parameter {_listed(undeclared)}, "
                         "not in the model's parameters; add it to the parameters list")
    outputs_named, identities = _name_values(inputs, initializers, nodes, outputs)
    imports = {"": OPSET, **{node.domain: 1 for node in nodes if node.domain not in ("", "ai.onnx")}}
    view = ir.GraphView(inputs, outputs_named, nodes=[*nodes, *identities], initializers=initializers,
                        opset_imports=imports, name=name or "model")
    model = ir.Model(view, ir_version=IR_VERSION, producer_name="inferplex")  # type: ignore[arg-type]
    copy = ir.serde.deserialize_model(ir.serde.serialize_model(model))
    copies: weakref.WeakKeyDictionary[ir.Value, ir.Value] = weakref.WeakKeyDictionary()
    copies.update(zip(inputs, copy.graph.inputs, strict=True))
    saved = copy.graph.initializers
    copies.update((v, saved[v.name]) for v in initializers if v.name is not None and v.name in saved)
    for built, copied in zip(nodes, copy.graph, strict=False):
        copies.update(zip(built.outputs, copied.outputs, strict=True))
    copy.graph.meta[_COPIES_KEY] = copies
    return copy


def attach(graph: ir.Graph, value: ir.Value) -> tuple[ir.Value, list[ir.Node]]:
    """``value`` as a value of ``graph``, and the built nodes added to the graph to compute it.

    A value of the graph is itself; a built value the graph was made from is its copy;
    a value built nodes compute (on the graph's values) joins the graph with those
    nodes and their constants, named uniquely.  A Parameter they read that the model does not
    have joins its inputs as *undeclared*, as OpenVINO lets a graph read one until
    ``add_parameters`` or ``replace_parameter`` declares it; compiling a model that still has
    one is refused (:func:`check_declared`).  ModelError when they read another model's values.
    """
    def resolve(item: ir.Value) -> ir.Value | None:
        if item.graph is graph:
            return item
        copies = graph.meta.get(_COPIES_KEY)
        copied = copies.get(item) if copies is not None else None
        return copied if copied is not None and copied.graph is graph else None

    found = resolve(value)
    if found is not None:
        return found, []
    nodes, initializers, undeclared = _collect([value], resolve)
    foreign = [node.name or node.op_type for node in nodes if node.graph is not None]
    if foreign:
        raise ModelError(f"the new ops read the output of {', '.join(repr(n) for n in foreign)}, an op of "
                         "another model; build them on this model's ops")
    _name_attached(graph, nodes, initializers)
    for constant in initializers:
        graph.register_initializer(constant)
    for parameter in undeclared:  # an input until the model declares it (or compiling refuses it)
        parameter.meta[_UNDECLARED_KEY] = True
        graph.inputs.append(parameter)
    graph.extend(nodes)
    graph.sort()
    return value, nodes


def is_undeclared(value: ir.Value) -> bool:
    """Whether ``value`` is a Parameter that new ops read before the model declared it (see
    :func:`attach`)."""
    return bool(value.meta.get(_UNDECLARED_KEY))


def declare(graph: ir.Graph, built: ir.Value, value: ir.Value) -> None:
    """``value`` (a graph input) is the model's copy of the Parameter ``built``, or ``built``
    itself, which no longer counts as undeclared: ops built on ``built`` later read ``value``."""
    value.meta.pop(_UNDECLARED_KEY, None)
    copies = graph.meta.get(_COPIES_KEY)
    if copies is None:
        copies = graph.meta[_COPIES_KEY] = weakref.WeakKeyDictionary()
    if built is not value:
        copies[built] = value


def check_declared(graph: ir.Graph) -> None:
    """ModelError where ops read a Parameter the model never declared (OpenVINO's 'Model references
    undeclared parameters')."""
    undeclared = [value for value in graph.inputs if is_undeclared(value)]
    if undeclared:
        raise ModelError(f"the model's ops read Parameter {_listed(undeclared)}, which the model does not "
                         "declare; add it with model.add_parameters([...]) or put it in place of another "
                         "with model.replace_parameter(index, parameter)")


def _listed(values: Sequence[ir.Value]) -> str:
    return ", ".join(repr(value.name or "?") for value in values)


def _name_attached(graph: ir.Graph, nodes: Sequence[ir.Node], initializers: Sequence[ir.Value]) -> None:
    """Names for the nodes and values joining ``graph``, unique among its own."""
    value_names = {v.name for v in graph.inputs} | set(graph.initializers) | \
        {v.name for node in graph for v in node.outputs}
    node_names = {node.name for node in graph}
    for constant in initializers:
        constant.name = unique_name(constant.name or "Constant", value_names)
    for node in nodes:
        node.name = unique_name(node.name or node.op_type, node_names)
        for index, output in enumerate(node.outputs):
            output.name = unique_name(output.name or (node.name if index == 0 else f"{node.name}:{index}"),
                                      value_names)


def unique_name(base: str, taken: set[str | None]) -> str:
    """``base``, or ``base_1``, ``base_2``, ... : the first not in ``taken``, which it joins."""
    name, suffix = base, 1
    while name in taken:
        name, suffix = f"{base}_{suffix}", suffix + 1
    taken.add(name)
    return name


def _result_values(results: Any) -> list[tuple[ir.Value, str | None]]:
    """``(value, result name)`` for each result: a Result, a node (all its outputs) or an output port."""
    items = results if isinstance(results, (list, tuple)) else [results]
    if not items:
        raise ModelError("a model needs at least one result")
    values: list[tuple[ir.Value, str | None]] = []
    for item in items:
        if isinstance(item, Result):
            values.append((item.value, item.get_friendly_name()))
        elif isinstance(item, Node):
            values.extend((value, None) for value in item._outputs)  # noqa: SLF001 - same layer
        elif isinstance(getattr(item, "_value", None), ir.Value):  # an output port
            values.append((item._value, None))  # noqa: SLF001
        else:
            raise ModelError(f"a model's results are nodes, Results or output ports, not "
                             f"{type(item).__name__}")
    return values


def _parameter_values(parameters: Any) -> list[ir.Value]:
    if parameters is None:
        raise ModelError("Model(results, parameters, name) needs the list of Parameters")
    items = parameters if isinstance(parameters, (list, tuple)) else [parameters]
    values: list[ir.Value] = []
    for item in items:
        if not isinstance(item, Parameter):
            raise ModelError(f"a model's parameters are Parameter nodes (opset.parameter), not "
                             f"{type(item).__name__}")
        if any(item.value is v for v in values):
            raise ModelError(f"Parameter {item.get_friendly_name()!r} is listed twice")
        values.append(item.value)
    return values


def _collect(outputs: Sequence[ir.Value], known: Callable[[ir.Value], ir.Value | None]
             ) -> tuple[list[ir.Node], list[ir.Value], list[ir.Value]]:
    """Nodes reachable from ``outputs`` up to the values ``known`` finds (topological order), the
    constants they read, and the Parameters they read that ``known`` does not find.

    ``known(value)`` is the value to read instead (``value`` itself, or the copy of it already in
    the graph being built on), or None; a node reading a value with a copy is rewired to the copy.
    """
    order: list[ir.Node] = []
    placed: set[int] = set()
    initializers: dict[int, ir.Value] = {}
    undeclared: list[ir.Value] = []
    pending: list[ir.Value | ir.Node] = list(reversed(outputs))
    while pending:
        item = pending.pop()
        if isinstance(item, ir.Node):  # its inputs are placed: place it
            if id(item) not in placed:
                placed.add(id(item))
                order.append(item)
            continue
        if known(item) is not None:
            continue
        producer = item.producer()
        if producer is None:
            if item.const_value is not None:
                initializers.setdefault(id(item), item)
            elif all(item is not seen for seen in undeclared):
                undeclared.append(item)
            continue
        if id(producer) in placed:
            continue
        for index, value in enumerate(producer.inputs):
            copy = known(value) if value is not None else None
            if copy is not None and copy is not value:
                producer.replace_input_with(index, copy)
        pending.append(producer)
        pending.extend(v for v in reversed(_reads(producer)) if v is not None and
                       (v.producer() is None or id(v.producer()) not in placed))
    return _ordered(order), list(initializers.values()), undeclared


def _reads(node: ir.Node) -> list[ir.Value | None]:
    """The values ``node`` reads: its inputs, then the outer values its subgraphs read by name
    (an ``If`` branch reads the enclosing graph's values, having no inputs of its own)."""
    return [*node.inputs, *outer_values(node)]


def _ordered(nodes: list[ir.Node]) -> list[ir.Node]:
    """``nodes`` re-ordered so that every node comes after the producers of its inputs."""
    members = {id(n) for n in nodes}
    done: set[int] = set()
    result: list[ir.Node] = []

    def visit(node: ir.Node) -> None:
        stack = [(node, False)]
        while stack:
            current, expanded = stack.pop()
            if id(current) in done:
                continue
            if expanded:
                done.add(id(current))
                result.append(current)
                continue
            stack.append((current, True))
            for value in _reads(current):
                producer = value.producer() if value is not None else None
                if producer is not None and id(producer) in members and id(producer) not in done:
                    stack.append((producer, False))

    for node in nodes:
        visit(node)
    return result


def _name_values(inputs: Sequence[ir.Value], initializers: Sequence[ir.Value], nodes: Sequence[ir.Node],
                 outputs: Sequence[tuple[ir.Value, str | None]]) -> tuple[list[ir.Value], list[ir.Node]]:
    """Unique names for every value; the graph outputs (an Identity where one value is output twice)."""
    used: set[str] = set()
    for value in inputs:
        if value.name in used:
            raise ModelError(f"two parameters are named {value.name!r}; input names must be unique")
        used.add(value.name or "")

    def unique(base: str) -> str:
        name, suffix = base, 1
        while name in used:
            name, suffix = f"{base}_{suffix}", suffix + 1
        used.add(name)
        return name

    for value in initializers:
        value.name = unique(value.name or "Constant")
    node_names: set[str] = set()
    for node in nodes:
        base = name = node.name or node.op_type
        suffix = 1
        while name in node_names:
            name, suffix = f"{base}_{suffix}", suffix + 1
        node.name = name
        node_names.add(name)
    from inferplex._ports import named_by_program

    named_by_result = {id(v): name for v, name in outputs if name and not named_by_program(v)}
    for node in nodes:
        for index, value in enumerate(node.outputs):
            base = (named_by_result.get(id(value)) or value.name
                    or (node.name if index == 0 else f"{node.name}:{index}") or "value")
            value.name = unique(base)
    final: list[ir.Value] = []
    identities: list[ir.Node] = []
    input_ids = {id(v) for v in inputs}
    for value, _ in outputs:
        if id(value) in input_ids or any(v is value for v in final):  # one value, one graph output
            identity = ir.node("Identity", [value], name=unique(f"{value.name}/identity"))
            copy = identity.outputs[0]
            copy.name, copy.type, copy.shape = unique(f"{value.name}_{len(final)}"), value.type, value.shape
            identities.append(identity)
            value = copy
        final.append(value)
    return final, identities
