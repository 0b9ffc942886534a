"""The subgraphs of an ONNX node (If's branches, Loop's and Scan's bodies) and the values they
read from the graphs around them: ONNX subgraphs take no inputs for those, they read them by name.

Model building (:mod:`inferplex.api.build`, so that a model holds what an If's branches read) and
the GPU lowering of control flow (:mod:`inferplex.devices.gpu.ops.control_flow`) share these.
"""

from __future__ import annotations

import onnx_ir as ir

__all__ = ["outer_values", "subgraphs"]


def subgraphs(node: ir.Node) -> list[ir.Graph]:
    """The graphs among ``node``'s attributes (an If's two branches, a Loop's body)."""
    graphs: list[ir.Graph] = []
    for attribute in node.attributes.values():
        value = attribute.value
        if isinstance(value, ir.Graph):
            graphs.append(value)
        elif isinstance(value, (list, tuple)):
            graphs.extend(g for g in value if isinstance(g, ir.Graph))
    return graphs


def outer_values(node: ir.Node) -> list[ir.Value]:
    """Values ``node``'s subgraphs (at any depth) read from outside them, in first-use order."""
    found: list[ir.Value] = []
    seen: set[ir.Value] = set()

    def visit(graph: ir.Graph, local: set[ir.Value]) -> None:
        local = local | set(graph.inputs) | set(graph.initializers.values())
        for inner in graph:
            for value in inner.inputs:
                if value is not None and value not in local and value not in seen:
                    seen.add(value)
                    found.append(value)
            for sub in subgraphs(inner):
                visit(sub, local)
            local |= {v for v in inner.outputs if v is not None}

    for graph in subgraphs(node):
        visit(graph, set())
    return found
