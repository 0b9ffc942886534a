"""``custom(fn)`` steps: a Python function over opset outputs, spliced into the graph as its ONNX nodes.

The function gets the step's input as an output port (what :mod:`inferplex.opset` functions take)
and returns an output port (or a node, for its first output), as OpenVINO's ``custom`` does.  The
nodes the ``inferplex.opset`` functions made, from that input to the returned output, and the
constants they read, join the other steps' nodes: every device runs them.  Those nodes are built as
in ONNX opset :data:`~inferplex.api.build.OPSET`; each is checked against the model's opset, and one
that the model's opset defines differently is an error naming it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import onnx
import onnx_ir as ir

from inferplex._ports import Port
from inferplex.api.build import OPSET
from inferplex.errors import ModelError

__all__ = ["emit_custom"]


def emit_custom(out: Any, value: ir.Value, operation: Callable[[Any], Any]) -> ir.Value:
    """Run ``operation`` on ``value`` and add the nodes it built to ``out`` (an Emitter); returns the
    value it returned."""
    returned = operation(Port(value, 0, "output", live=True))
    result = _value_of(returned)
    if result is value:
        return value
    nodes, constants = _reached(result, value)
    for constant in constants:
        constant.name = out._name("const")  # noqa: SLF001 - the emitter's names, same package
        out.initializers.append(constant)
    for node in nodes:
        node.name = out._name(f"custom_{node.op_type}")  # noqa: SLF001
        for index, output in enumerate(node.outputs):
            output.name = node.name if index == 0 else f"{node.name}:{index}"
        _check_opset(node, out.opset)
        out.nodes.append(node)
    return result


def _value_of(returned: Any) -> ir.Value:
    if isinstance(returned, Port):
        return returned._value  # noqa: SLF001 - the port's value, same package
    outputs = getattr(returned, "outputs", None)
    if callable(outputs) and hasattr(returned, "onnx_nodes") and returned.get_output_size() >= 1:
        return _value_of(returned.output(0))
    raise ModelError(f"a custom step's function returns an output (e.g. opset.abs(node).output(0)); "
                     f"it returned {type(returned).__name__}")


def _reached(result: ir.Value, start: ir.Value) -> tuple[list[ir.Node], list[ir.Value]]:
    """The nodes computing ``result`` from ``start`` (inputs before users) and the constants they read."""
    order: list[ir.Node] = []
    constants: dict[int, ir.Value] = {}
    placed: set[int] = set()
    stack: list[tuple[ir.Value | ir.Node, bool]] = [(result, False)]
    while stack:
        item, expanded = stack.pop()
        if isinstance(item, ir.Node):
            if expanded and id(item) not in placed:
                placed.add(id(item))
                order.append(item)
            elif not expanded and id(item) not in placed:
                stack.append((item, True))
                stack.extend((v, False) for v in reversed(item.inputs) if v is not None)
            continue
        if item is start:
            continue
        producer = item.producer()
        if producer is not None and producer.graph is None:
            stack.append((producer, False))
        elif producer is None and item.const_value is not None and item.graph is None:
            constants.setdefault(id(item), item)
        else:
            raise ModelError(f"a custom step's result depends on {item.name or 'a value'!r}, which is "
                             "neither the step's input nor a constant; build it from the input the "
                             "function is given")
    return order, list(constants.values())


def _check_opset(node: ir.Node, opset: int) -> None:
    context = onnx.checker.C.CheckerContext()
    context.ir_version = onnx.helper.find_min_ir_version_for([onnx.helper.make_opsetid("", opset)])
    context.opset_imports = {"": opset}
    try:
        onnx.checker.check_node(ir.serde.serialize_node(node), context)
    except (onnx.checker.ValidationError, onnx.defs.SchemaError) as error:
        detail = str(error).strip().rstrip(".")
        raise ModelError(f"a custom step's {node.op_type} is built as in ONNX opset {OPSET}, which the "
                         f"model's opset {opset} defines differently ({detail}); export the model "
                         f"with opset {OPSET}") from error
