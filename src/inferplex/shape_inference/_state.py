"""Shape twins of the state ops (:mod:`inferplex.state`): a ``ReadValue``'s output is a graph
input of the variable's element type and shape (its value is whatever the variable holds, so
its declared type and shape are all inference may know), and an ``Assign``'s output its input's."""

from __future__ import annotations

import onnx
from onnx import helper

from inferplex.shape_inference._rewriter import Rewriter, Twin


def _read_value(rewriter: Rewriter, node: onnx.NodeProto) -> list[onnx.NodeProto] | None:
    from inferplex.api.reshape import parse_shape  # imports this package

    attrs = {a.name: a for a in node.attribute}
    elem = attrs["variable_type"].i if "variable_type" in attrs else 0
    shape_text = attrs["variable_shape"].s.decode() if "variable_shape" in attrs else "[...]"
    if not elem and node.input and node.input[0]:  # a dynamic type: its initial value's
        elem = rewriter.type_of(node.input[0]) or 0
    if not elem:
        return None
    dims = parse_shape(shape_text)
    shape = None if dims is None else [d if isinstance(d, int) else None for d in dims]
    rewriter.graph.input.append(helper.make_tensor_value_info(node.output[0], elem, shape))
    return []


def _assign(rewriter: Rewriter, node: onnx.NodeProto) -> list[onnx.NodeProto] | None:
    if not node.input or not node.output:
        return []
    nodes: list[onnx.NodeProto] = []
    rewriter.same(node.input[0], node.output[0], nodes)
    return nodes


STATE_TWINS: dict[str, Twin] = {"ReadValue": _read_value, "Assign": _assign}
