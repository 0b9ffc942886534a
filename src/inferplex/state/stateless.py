"""What the devices run for a stateful model: its graph with each variable as one more input.

In the copy the devices compile, each variable read by a ``ReadValue`` is a graph input (its
*state input*) of the variable's element type and shape:

* a ``ReadValue`` with no initial value is an ``Identity`` of the state input (the request feeds
  zeros until the variable is assigned);
* a ``ReadValue`` with one is an ``If`` on a boolean scalar input (its *ready input*): the state
  input where the variable holds a value, else the initial value, which is then computed;
* an ``Assign`` is an ``Identity`` whose output is one more graph output (its *state output*):
  after each inference the request keeps it as the variable's value.

The nodes keep their names (and rt_info), so what ``query_model`` and HETERO's affinities say of
a ``ReadValue`` or an ``Assign`` holds for the copy.  The added inputs and outputs come after the
model's own, which keep their positions.  :func:`state_plan` names them, for the requests.
"""

from __future__ import annotations

from dataclasses import dataclass

import onnx_ir as ir

from inferplex.api.build import unique_name
from inferplex.errors import ModelError
from inferplex.state.variables import (
    ASSIGN,
    READ_VALUE,
    STATE_DOMAIN,
    VariableSpec,
    is_state_node,
    node_variable,
)

__all__ = ["StatePlan", "VariableSlot", "is_stateful", "state_plan", "stateless_copy"]

_PREFIX = "inferplex.state:"


@dataclass(frozen=True)
class VariableSlot:
    """One variable of a compiled model: what it is and the graph inputs and output that carry it."""

    spec: VariableSpec
    """Its id, element type (never dynamic) and dims."""
    state_input: str
    ready_input: str | None
    """The boolean input that says the variable holds a value (None: its ReadValue has no initial value)."""
    state_output: str | None
    """The output its Assign writes (None: nothing assigns it)."""


@dataclass(frozen=True)
class StatePlan:
    """The variables of a compiled model, in the order ``query_state`` lists them."""

    slots: tuple[VariableSlot, ...]


def is_stateful(model: ir.Model) -> bool:
    return any(is_state_node(node) for node in model.graph)


def state_plan(model: ir.Model) -> StatePlan | None:
    """The variables of ``model`` and their names in :func:`stateless_copy`; None for a model
    without state."""
    if not is_stateful(model):
        return None
    graph = model.graph
    reads: dict[str, list[ir.Node]] = {}
    writes: dict[str, ir.Node] = {}
    for node in graph:
        if is_state_node(node, READ_VALUE):
            reads.setdefault(node_variable(node).variable_id, []).append(node)
        elif is_state_node(node, ASSIGN):
            variable_id = node_variable(node).variable_id
            if not node.inputs or node.inputs[0] is None:
                raise ModelError(
                    f"Assign {node.name!r} of variable {variable_id!r} has no value to assign; "
                    "build it as opset.assign(value, variable)"
                )
            if variable_id in writes:
                raise ModelError(
                    f"variable {variable_id!r} is assigned by two Assign nodes "
                    f"({writes[variable_id].name!r}, {node.name!r}); a variable takes one Assign"
                )
            writes[variable_id] = node
    taken = (
        {v.name for v in graph.inputs}
        | {v.name for v in graph.outputs}
        | {v.name for node in graph for v in node.outputs}
        | set(graph.initializers)
    )
    slots = []
    for variable_id in [*reads, *(v for v in writes if v not in reads)]:
        spec = _resolved(variable_id, reads.get(variable_id, []), writes.get(variable_id))
        read_nodes = reads.get(variable_id, [])
        initialised = any(node.inputs and node.inputs[0] is not None for node in read_nodes)
        slots.append(
            VariableSlot(
                spec,
                unique_name(f"{_PREFIX}{variable_id}", taken),
                unique_name(f"{_PREFIX}{variable_id}:ready", taken) if initialised else None,
                unique_name(f"{_PREFIX}{variable_id}:next", taken) if variable_id in writes else None,
            )
        )
    return StatePlan(tuple(slots))


def stateless_copy(model: ir.Model) -> ir.Model:
    """``model`` itself where it has no state; else a copy where its variables are inputs and outputs."""
    plan = state_plan(model)
    if plan is None:
        return model
    copy = model.clone()
    graph = copy.graph
    by_id = {slot.spec.variable_id: slot for slot in plan.slots}
    state_inputs: dict[str, ir.Value] = {}
    ready_inputs: dict[str, ir.Value] = {}
    for slot in plan.slots:
        dims = (
            None
            if slot.spec.dims is None
            else ir.Shape([d if isinstance(d, int) else None for d in slot.spec.dims])
        )
        state_inputs[slot.spec.variable_id] = ir.Value(
            name=slot.state_input, type=ir.TensorType(slot.spec.dtype), shape=dims
        )
        if slot.ready_input is not None:
            ready_inputs[slot.spec.variable_id] = ir.Value(
                name=slot.ready_input, type=ir.TensorType(ir.DataType.BOOL), shape=ir.Shape([])
            )
    graph.inputs.extend([*state_inputs.values(), *ready_inputs.values()])
    state_outputs: list[ir.Value] = []
    for node in list(graph):
        if not is_state_node(node):
            continue
        slot = by_id[node_variable(node).variable_id]
        if node.op_type == READ_VALUE:
            init = node.inputs[0] if node.inputs else None
            state = state_inputs[slot.spec.variable_id]
            if init is None:
                replacement = ir.node("Identity", [state], name=node.name)
            else:
                replacement = ir.node(
                    "If",
                    [ready_inputs[slot.spec.variable_id]],
                    name=node.name,
                    attributes={
                        "then_branch": _passing(state, "held"),
                        "else_branch": _passing(init, "initial"),
                    },
                )
        else:
            replacement = ir.node("Identity", [node.inputs[0]], name=node.name)
        _replace(graph, node, replacement)
        if node.op_type == ASSIGN:
            out = ir.node("Identity", [replacement.outputs[0]], name=f"{node.name}/state")
            out.outputs[0].name = slot.state_output
            out.outputs[0].type, out.outputs[0].shape = (
                replacement.outputs[0].type,
                replacement.outputs[0].shape,
            )
            graph.insert_after(replacement, out)
            state_outputs.append(out.outputs[0])
    graph.outputs.extend(state_outputs)
    graph.opset_imports.pop(STATE_DOMAIN, None)
    graph.sort()
    return copy


def _passing(value: ir.Value, label: str) -> ir.Graph:
    """A branch of an ``If`` that gives ``value`` (of the graph around it) as it is."""
    node = ir.node("Identity", [value], name=f"{label}")
    out = node.outputs[0]
    out.name, out.type, out.shape = f"{value.name}/{label}", value.type, value.shape
    return ir.Graph([], [out], nodes=[node], name=label)


def _replace(graph: ir.Graph, old: ir.Node, new: ir.Node) -> None:
    """Put ``new`` where ``old`` is: its output takes the old output's name, type, shape and readers."""
    before, after = old.outputs[0] if old.outputs else None, new.outputs[0]
    new.metadata_props.update(old.metadata_props)
    graph.insert_before(old, new)
    if before is not None:
        after.type, after.shape = before.type, before.shape
        ir.convenience.replace_all_uses_with(before, after, replace_graph_outputs=True)
        name, before.name = before.name, None
        after.name = name
    graph.remove(old, safe=True)


def _resolved(variable_id: str, reads: list[ir.Node], write: ir.Node | None) -> VariableSpec:
    """The variable's spec with its element type (and dims) taken from its nodes where it leaves
    them dynamic; ModelError where nothing gives its element type."""
    specs = [node_variable(node) for node in reads]
    dtype = next((s.dtype for s in specs if s.dtype != ir.DataType.UNDEFINED), ir.DataType.UNDEFINED)
    dims = next((s.dims for s in specs if s.dims is not None), None)
    for node in [*reads, *([write] if write is not None else [])]:
        value = node.outputs[0] if node.op_type == READ_VALUE else node.inputs[0]
        if dtype == ir.DataType.UNDEFINED and value is not None and value.dtype is not None:
            dtype = value.dtype
        if dims is None and value is not None and value.shape is not None:
            dims = tuple(d if isinstance(d, int) else d.value for d in value.shape)
    if dtype == ir.DataType.UNDEFINED:
        raise ModelError(
            f"variable {variable_id!r} has no element type: give read_value a variable_type, "
            "or an initial value"
        )
    return VariableSpec(variable_id, dtype, dims)
