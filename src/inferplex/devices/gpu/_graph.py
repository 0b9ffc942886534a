"""Queries on an analysed ONNX graph that the GPU lowering's fusion planners share."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import onnx_ir as ir

if TYPE_CHECKING:
    from inferplex.devices.gpu.lower import Analysis

__all__ = ["ONNX_DOMAINS", "constant", "next_consumer", "running", "runs", "same_shapes", "sole_consumer",
           "written_pads"]

ONNX_DOMAINS = ("", "ai.onnx")


def sole_consumer(value: ir.Value | None) -> tuple[ir.Node, int] | None:
    """(node, input index) of the one use of ``value``; None for a graph output or several uses."""
    if value is None or value.is_graph_output():
        return None
    uses = list(value.uses())
    return (uses[0].node, uses[0].idx) if len(uses) == 1 else None


def constant(analysis: Analysis, value: ir.Value | None) -> np.ndarray | None:
    """The value's array where the analysis resolved it to a constant."""
    return None if value is None else analysis.constants.get(value)


def runs(analysis: Analysis, names: dict[ir.Node, str], node: ir.Node) -> bool:
    """Whether ``node`` is lowered and runs (not folded into constants)."""
    name = names.get(node)
    return name is not None and name in analysis.functions and name not in analysis.folded


def next_consumer(analysis: Analysis, names: dict[ir.Node, str], node: ir.Node,
                  op_types: tuple[str, ...]) -> tuple[ir.Node, int] | None:
    """The sole consumer of ``node``'s output when it is one of ``op_types`` and runs."""
    consumer = sole_consumer(node.outputs[0])
    if consumer is None or consumer[0].op_type not in op_types or consumer[0].domain not in ONNX_DOMAINS \
            or not runs(analysis, names, consumer[0]):
        return None
    return consumer


def running(analysis: Analysis, names: dict[ir.Node, str], op_type: str,
            skipped: set[ir.Node]) -> list[ir.Node]:
    """The ONNX-domain nodes of ``op_type`` that run, in order, but those in ``skipped``."""
    return [node for _, node in analysis.nodes if node.op_type == op_type and node.domain in ONNX_DOMAINS
            and node not in skipped and runs(analysis, names, node)]


def same_shapes(analysis: Analysis, names: dict[ir.Node, str], node: ir.Node) -> bool:
    """Whether a two-input node's inputs have one known shape (no broadcasting)."""
    shapes = analysis.infos[names[node]].input_shapes
    return len(shapes) == 2 and shapes[0] is not None and None not in shapes[0] and shapes[0] == shapes[1]


def written_pads(conv: ir.Node) -> list[int] | None:
    """A 2-D Conv's pads (ONNX's begins then ends) where the node writes them out, or VALID."""
    auto_pad = conv.attributes.get("auto_pad")
    mode = auto_pad.value if auto_pad is not None else "NOTSET"
    if mode == "VALID":
        return [0, 0, 0, 0]
    if mode != "NOTSET":
        return None
    pads = conv.attributes.get("pads")
    values = [int(p) for p in pads.value] if pads is not None else [0, 0, 0, 0]
    return values if len(values) == 4 else None
