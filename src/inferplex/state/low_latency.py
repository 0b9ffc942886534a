"""OpenVINO's ``LowLatency2``: the values a Loop or TensorIterator carries from one iteration to the
next (its merged inputs) carried from one inference to the next too, as variables.

For each such value of a loop in the main graph, a ``ReadValue`` gives the loop its starting value
and an ``Assign`` keeps the value the last iteration left, so the next inference goes on where this
one stopped (``reset_state`` starts again).  Until the variable is first assigned it reads as its
initial value: zeros of the starting value's shape with ``use_const_initializer`` (OpenVINO's
default), else the starting value the model computes.  The variable is named as OpenVINO names
it: ``<loop>/<body Parameter>/variable_<loop input>``.
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from inferplex._opsets.control_loops import merged_parameter
from inferplex.state.variables import ASSIGN, READ_VALUE, STATE_DOMAIN, VariableSpec, variable_attributes

__all__ = ["make_loops_stateful"]

_LOOP_INPUTS = 2
"""An ONNX Loop's inputs before the carried ones: the trip count and the condition."""
_BODY_INPUTS = 2
"""A Loop body's inputs before the carried ones: the iteration number and the condition."""


def make_loops_stateful(graph: ir.Graph, use_const_initializer: bool = True) -> bool:
    """Apply LowLatency2 to the Loops of ``graph`` (a model's main graph); whether any changed."""
    changed = False
    for loop in [node for node in graph if node.op_type == "Loop" and node.domain in ("", "ai.onnx")]:
        body = loop.attributes["body"].as_graph()
        for k, start in enumerate(loop.inputs[_LOOP_INPUTS:]):
            carried = body.inputs[_BODY_INPUTS + k]
            if start is None or _passes_through(body.outputs[1 + k], carried):
                continue
            _make_stateful(graph, loop, k, start, _variable_id(loop, carried, k), use_const_initializer)
            changed = True
    if changed:
        graph.opset_imports.setdefault(STATE_DOMAIN, 1)
        graph.sort()
    return changed


def _passes_through(output: ir.Value, carried: ir.Value) -> bool:
    """Whether the body gives ``carried`` back unchanged (an invariant or sliced input)."""
    producer = output.producer()
    return output is carried or (producer is not None and producer.op_type == "Identity"
                                 and producer.inputs[0] is carried)


def _variable_id(loop: ir.Node, carried: ir.Value, k: int) -> str:
    parameter = merged_parameter(carried) or (carried.name or f"carried{k}").rsplit("/", 1)[-1]
    return f"{loop.name}/{parameter}/variable_{k}"


def _make_stateful(graph: ir.Graph, loop: ir.Node, k: int, start: ir.Value, variable_id: str,
                   use_const_initializer: bool) -> None:
    """The loop starts carried value ``k`` from a variable that it assigns its final value to."""
    dims = None if start.shape is None else tuple(d if isinstance(d, int) else None for d in start.shape)
    spec = VariableSpec(variable_id, start.dtype or ir.DataType.FLOAT, dims)
    made: list[ir.Node] = []
    initial = start
    if use_const_initializer:  # zeros of the starting value's shape
        shape = ir.node("Shape", [start], name=f"{variable_id}/shape")
        zero = ir.tensor(np.zeros(1, dtype=spec.dtype.numpy()))
        zeros = ir.node("ConstantOfShape", [shape.outputs[0]], attributes={"value": zero},
                        name=f"{variable_id}/zeros")
        zeros.outputs[0].type, zeros.outputs[0].shape = start.type, start.shape
        made += [shape, zeros]
        initial = zeros.outputs[0]
    read = ir.node(READ_VALUE, [initial], attributes=variable_attributes(spec), domain=STATE_DOMAIN,
                   name=f"{variable_id}/read")
    read.outputs[0].name = f"{variable_id}/value"
    read.outputs[0].type, read.outputs[0].shape = start.type, start.shape
    loop.replace_input_with(_LOOP_INPUTS + k, read.outputs[0])
    final = loop.outputs[k]
    assign = ir.node(ASSIGN, [final], attributes={"variable_id": variable_id}, domain=STATE_DOMAIN,
                     name=f"{variable_id}/assign")
    assign.outputs[0].name = f"{variable_id}/assigned"
    assign.outputs[0].type, assign.outputs[0].shape = final.type, final.shape
    graph.extend([*made, read, assign])
