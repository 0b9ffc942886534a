"""OpenVINO's If: two bodies (inferplex Models) chosen between by a runtime condition, as ONNX ``If``.

``if_op(condition)`` returns a node configured as OpenVINO's is: ``set_then_body`` and
``set_else_body`` take the bodies, ``set_input(value, then_parameter, else_parameter)`` feeds a
body Parameter of each, ``set_output(then_result, else_result)`` adds an output and returns its
port.  The ONNX node is made again each time an output is added (its ports stay valid): each
branch is a copy of its body in which the body's Parameters are the outer values fed to them
(ONNX branches take no inputs but read the enclosing graph's values by name; a model built on
the If holds those values: :func:`inferplex._subgraphs.outer_values`).

Shared with :mod:`inferplex._opsets.control_loops`: copying a body graph, finding its Parameters
and Results, and moving an op's output values onto newly made ONNX nodes.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import onnx_ir as ir

from inferplex._opsets.build import NodeInput, value_of
from inferplex.api.nodes import Node
from inferplex.errors import InputError

__all__ = ["if_op"]

_COPIES_KEY = "inferplex.copies"
"""Graph ``meta`` key of :mod:`inferplex.api.build`: the built values a model's values copy."""
_branch_ids = itertools.count(1)


def if_op(condition: NodeInput, name: str | None = None) -> IfNode:
    """OpenVINO's If: ``condition`` (a boolean scalar or 1-element tensor) picks the then or the
    else body at run time; bodies, inputs and outputs are set on the returned node."""
    cond = value_of(condition)
    if cond.dtype is not None and cond.dtype != ir.DataType.BOOL:
        raise InputError(f"If condition must be boolean, got {cond.dtype.name.lower()}; "
                         "accepted: a boolean scalar or 1-element tensor")
    if cond.shape is not None and any(isinstance(d, int) and d != 1 for d in cond.shape):
        raise InputError(f"If condition must hold one element, got shape {list(cond.shape)}")
    return IfNode(cond, name)


class IfNode(Node):
    """OpenVINO's If op, built as one ONNX ``If`` (see the module)."""

    _version_id = "opset8"

    def __init__(self, condition: ir.Value, name: str | None) -> None:
        super().__init__("If", [], [], name=name)
        self._condition = condition
        self._bodies: list[Any] = [None, None]
        self._inputs: list[tuple[ir.Value, int, int]] = []  # outer value, then / else Parameter index
        self._results: list[tuple[int, int]] = []  # then / else Result index of each output

    def set_then_body(self, body: Any) -> None:
        """The Model computed when the condition is true."""
        self._bodies[0] = _check_model(body, "then body")

    def set_else_body(self, body: Any) -> None:
        """The Model computed when the condition is false."""
        self._bodies[1] = _check_model(body, "else body")

    def get_then_body(self) -> Any:
        return self._bodies[0]

    def get_else_body(self) -> Any:
        return self._bodies[1]

    def get_function(self, index: int) -> Any:
        """Body ``index``: 0 the then body, 1 the else body."""
        if index not in (0, 1):
            raise InputError(f"If has bodies 0 (then) and 1 (else), not {index}")
        return self._bodies[index]

    def set_function(self, index: int, body: Any) -> None:
        (self.set_then_body if index == 0 else self.set_else_body)(body)

    def set_input(self, value: NodeInput, then_parameter: Any, else_parameter: Any) -> None:
        """Feed ``value`` to a Parameter of each body (None for a body that does not read it)."""
        then_body, else_body = self._both_bodies("set_input")
        pairs = ((then_body, then_parameter, "then"), (else_body, else_parameter, "else"))
        indexes = [-1 if p is None else parameter_index(b, p, what) for b, p, what in pairs]
        if indexes == [-1, -1]:
            raise InputError("If.set_input needs a Parameter of the then or the else body; both are None")
        self._inputs.append((value_of(value), indexes[0], indexes[1]))
        if self._results:
            self._remake()

    def set_output(self, then_result: Any, else_result: Any) -> Any:
        """Add an output: ``then_result`` of the then body or ``else_result`` of the else body; its port."""
        then_body, else_body = self._both_bodies("set_output")
        appended(self._results, (result_index(then_body, then_result, "then body"),
                                 result_index(else_body, else_result, "else body")), self._remake)
        return self.output(len(self._results) - 1)

    def get_input_descriptions(self, index: int = 0) -> list[tuple[int, int]]:
        """``(input index, body Parameter index)`` of each input of body ``index`` (0 then, 1 else)."""
        return [(i + 1, p[index]) for i, p in enumerate((t, e) for _, t, e in self._inputs) if p[index] >= 0]

    def get_output_descriptions(self, index: int = 0) -> list[tuple[int, int]]:
        """``(output index, body Result index)`` of each output of body ``index`` (0 then, 1 else)."""
        return [(i, r[index]) for i, r in enumerate(self._results)]

    def _input_values(self) -> list[ir.Value]:
        return [self._condition, *(v for v, _, _ in self._inputs)]

    def _both_bodies(self, call: str) -> tuple[Any, Any]:
        if self._bodies[0] is None or self._bodies[1] is None:
            raise InputError(f"If.{call} needs both bodies: call set_then_body and set_else_body first")
        return self._bodies[0], self._bodies[1]

    def _remake(self) -> None:
        prefix = f"{self.get_friendly_name()}/{next(_branch_ids)}"
        branches = []
        for side, label in ((0, "then"), (1, "else")):
            feeds = {p[side]: v for v, *p in self._inputs if p[side] >= 0}
            graph = body_copy(self._bodies[side], f"{prefix}/{label}/")
            for index, graph_input in enumerate(list(graph.inputs)):
                if index in feeds:
                    graph_input.replace_all_uses_with(feeds[index], replace_graph_outputs=True)
            graph.inputs.clear()
            set_outputs(graph, [r[side] for r in self._results], f"{prefix}/{label}")
            branches.append(graph)
        node = ir.node("If", [self._condition], {"then_branch": branches[0], "else_branch": branches[1]},
                       num_outputs=len(self._results), name=self.get_friendly_name())
        for value, then_out, else_out in zip(node.outputs, branches[0].outputs, branches[1].outputs,
                                             strict=True):
            value.type = then_out.type
            value.shape = merged_shape(then_out.shape, else_out.shape)
        publish(self, [node], node, list(node.outputs))


# --- shared with the loops -----------------------------------------------------------------------


def appended(items: list[Any], item: Any, remake: Callable[[], None]) -> None:
    """Add ``item`` to an op's inputs or outputs and make its ONNX node again; where that raises an
    InputError the item is taken out again, so the op stays as it was."""
    items.append(item)
    try:
        remake()
    except InputError:
        items.pop()
        raise


def _check_model(body: Any, what: str) -> Any:
    if not isinstance(getattr(body, "ir", None), ir.Model):
        raise InputError(f"the {what} must be a Model (ov.Model(results, parameters)), "
                         f"not {type(body).__name__}")
    return body


def parameter_index(body: Any, parameter: Any, what: str) -> int:
    """The input index of ``parameter`` in ``body``; InputError naming ``what`` when it is not one."""
    index = int(body.get_parameter_index(parameter))
    if index < 0:
        name = getattr(parameter, "get_friendly_name", lambda: repr(parameter))()
        names = ", ".join(repr(v.name) for v in body.ir.graph.inputs)
        raise InputError(f"{name!r} is not a Parameter of the {what} body; its Parameters: {names}")
    return index


def result_index(body: Any, result: Any, what: str) -> int:
    """The output index of a Result, node or port ``result`` of ``body`` (InputError naming ``what``)."""
    index = int(body.get_result_index(result)) if hasattr(result, "get_type_name") or \
        hasattr(result, "_value") else -1
    if index >= 0:
        return index
    outputs = list(body.ir.graph.outputs)
    try:
        value = value_of(result)
    except InputError:
        value = None
    copies = body.ir.graph.meta.get(_COPIES_KEY)
    copy = copies.get(value) if copies is not None and value is not None else None
    for position, output in enumerate(outputs):
        producer = output.producer()
        source = producer.inputs[0] if producer is not None and producer.op_type == "Identity" else None
        if copy is not None and (output is copy or source is copy):
            return position
    names = ", ".join(repr(v.name) for v in outputs)
    raise InputError(f"{result!r} is not a Result of the {what}; its Results: {names}")


def body_copy(body: Any, prefix: str) -> ir.Graph:
    """A copy of ``body``'s graph, its constants as Constant nodes, every name prefixed by ``prefix``."""
    graph = ir.serde.deserialize_model(ir.serde.serialize_model(body.ir)).graph
    made = []
    for constant in list(graph.initializers.values()):
        node = ir.node("Constant", [], {"value": constant.const_value})
        out = node.outputs[0]
        out.name, out.type, out.shape = constant.name, constant.type, constant.shape
        constant.replace_all_uses_with(out, replace_graph_outputs=True)
        made.append(node)
    graph.initializers.clear()
    if made and graph.num_nodes():
        graph.insert_before(graph.node(0), made)
    else:
        graph.extend(made)
    for node in graph:
        node.name = prefix + (node.name or node.op_type)
        for value in node.outputs:
            value.name = prefix + (value.name or "value")
    for value in graph.inputs:
        value.name = prefix + (value.name or "input")
    return graph


def set_outputs(graph: ir.Graph, picks: Sequence[int | ir.Value], prefix: str) -> None:
    """``graph``'s outputs become its outputs at ``picks`` (or the values given); an Identity of each
    one that is not made by a node of the graph or is output twice."""
    old = list(graph.outputs)
    chosen = [old[p] if isinstance(p, int) else p for p in picks]
    graph.outputs.clear()
    for index, value in enumerate(chosen):
        producer = value.producer()
        if producer is None or producer.graph is not graph or any(v is value for v in graph.outputs):
            identity = ir.node("Identity", [value], name=f"{prefix}/out{index}")
            copy = identity.outputs[0]
            copy.name, copy.type, copy.shape = f"{prefix}/out{index}", value.type, value.shape
            graph.append(identity)
            value = copy
        graph.outputs.append(value)


def merged_shape(first: ir.Shape | None, second: ir.Shape | None) -> ir.Shape | None:
    """The shape both may have: their dims where they agree, unknown where not."""
    if first is None or second is None or len(first) != len(second):
        return None
    return ir.Shape([a if a == b else None for a, b in zip(first, second, strict=True)])


def publish(built: Node, nodes: list[ir.Node], main: ir.Node, values: list[ir.Value]) -> None:
    """``built``'s outputs become ``values`` (made by ``nodes``, ``main`` named after the op); the
    output values it had (ports already handed out) are kept: each becomes an Identity's output."""
    kept = built._outputs  # noqa: SLF001 - same layer
    identities: list[ir.Node] = []
    for index, value in enumerate(values):
        if index < len(kept):
            old = kept[index].producer()
            if old is not None:
                old.resize_inputs(0)
            kept[index]._producer = None  # noqa: SLF001 - the value moves onto its new node
            kept[index]._index = None  # noqa: SLF001
            identity = ir.Node("", "Identity", [value], outputs=[kept[index]])
            kept[index].type, kept[index].shape = value.type, value.shape
            identities.append(identity)
        else:
            identity = ir.node("Identity", [value])
            identity.outputs[0].type, identity.outputs[0].shape = value.type, value.shape
            identities.append(identity)
    built._outputs = [identity.outputs[0] for identity in identities]  # noqa: SLF001
    built._onnx_nodes = [*nodes, *identities]  # noqa: SLF001
    built._main = main  # noqa: SLF001


def scalar_int64(item: NodeInput, what: str) -> ir.Value:
    """``item`` as an int64 scalar (a constant converted here, a computed value by Cast and Reshape)."""
    value = value_of(item)
    data = value.const_value.numpy() if value.const_value is not None else None
    if data is not None:
        if data.size != 1:
            raise InputError(f"{what} must hold one number, got shape {list(data.shape)}")
        return value_of(np.asarray(data.reshape(()), dtype=np.int64))
    cast = ir.node("Cast", [value], {"to": int(ir.DataType.INT64)})
    shaped = ir.node("Reshape", [cast.outputs[0], value_of(np.zeros(0, dtype=np.int64))])
    out = shaped.outputs[0]
    out.type, out.shape = ir.TensorType(ir.DataType.INT64), ir.Shape([])
    return out
