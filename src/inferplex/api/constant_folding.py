"""Constant folding of a model's main graph (OpenVINO's ``ConstantFolding`` pass).

Each node whose inputs are all constants is evaluated once, by ONNX Runtime's CPU provider
(:func:`~inferplex.api.evaluate.run_alone`), and its outputs become initializers; ``Shape`` and
``Size`` of a value whose dims are all known become constants too.  Left alone: nodes of other
domains, nodes with subgraphs (If, Loop, Scan), random ops, and nodes whose outputs the model
returns.  Constant nodes are taken as initializers first, and nodes nothing reads any longer are
removed.
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir
from onnx_ir.passes.common import LiftConstantsToInitializersPass, RemoveUnusedNodesPass

from inferplex.api.evaluate import run_alone

__all__ = ["fold_constants"]

_RANDOM = {"RandomNormal", "RandomNormalLike", "RandomUniform", "RandomUniformLike", "Multinomial",
           "Bernoulli"}
"""Ops whose outputs differ between runs: never folded."""

_ONNX_DOMAINS = ("", "ai.onnx")


def fold_constants(model: ir.Model) -> bool:
    """Fold ``model``'s main graph in place; whether anything changed."""
    graph = model.graph
    changed = LiftConstantsToInitializersPass(lift_all_constants=True, size_limit=0)(model).modified
    opset = graph.opset_imports.get("", 1)
    for node in list(graph):
        outputs = _folded(node, opset)
        if outputs is None:
            continue
        for output, array in zip(node.outputs, outputs, strict=True):
            value = ir.Value(name=f"{output.name or node.name}/folded", const_value=ir.tensor(array))
            graph.register_initializer(value)
            output.replace_all_uses_with(value)
        changed = True
    if changed:
        RemoveUnusedNodesPass()(model)
    return changed


def _folded(node: ir.Node, opset: int) -> list[np.ndarray] | None:
    """The values of ``node``'s outputs where it folds, else None."""
    if node.domain not in _ONNX_DOMAINS or node.op_type in _RANDOM or node.op_type == "Constant" \
            or any(output.is_graph_output() for output in node.outputs) \
            or any(attribute.type in (ir.AttributeType.GRAPH, ir.AttributeType.GRAPHS)
                   for attribute in node.attributes.values()):
        return None
    if node.op_type in ("Shape", "Size") and node.inputs and node.inputs[0] is not None:
        return _shape_facts(node)
    if any(value is not None and value.const_value is None for value in node.inputs):
        return None
    return _evaluate(node, opset)


def _shape_facts(node: ir.Node) -> list[np.ndarray] | None:
    """``Shape`` (with its start and end) or ``Size`` of a value whose dims are all known."""
    source = node.inputs[0]
    known = list(source.shape) if source is not None and source.shape is not None else None
    dims = [d for d in known or [] if isinstance(d, int)]
    if known is None or len(dims) != len(known):
        return None
    if node.op_type == "Size":
        return [np.asarray(int(np.prod(dims)), dtype=np.int64)]
    start = node.attributes.get_int("start", 0)
    end = node.attributes.get_int("end", len(dims))
    return [np.asarray(dims[slice(start, end)], dtype=np.int64)]


def _evaluate(node: ir.Node, opset: int) -> list[np.ndarray] | None:
    arrays = [None if value is None or value.const_value is None else value.const_value.numpy()
              for value in node.inputs]
    return run_alone(node, arrays, opset)
