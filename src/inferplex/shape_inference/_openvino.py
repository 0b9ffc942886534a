"""Shape twins (see :mod:`inferplex.shape_inference`) of the ``org.openvinotoolkit`` ops that
:mod:`inferplex.opset` writes for OpenVINO ops with no ONNX equivalent (OpenVINO's ONNX reader
takes them as its own):

- DeformableConv2D: the Conv of its data and filters (same strides, pads, dilations, group); the
  offsets and mask only move and scale its taps.
- DetectionOutput: [1, 1, rows, 7] of the box logits' type, with OpenVINO's row count: the batch
  times ``keep_top_k`` where that is positive, else times ``top_k`` (where positive) or the number
  of priors, times the number of classes (class_preds' scores per prior).
"""

from __future__ import annotations

import onnx
from onnx import helper

from inferplex.shape_inference._rewriter import Rewriter, Twin, int_attrs

__all__ = ["OPENVINO_TWINS"]

_CONV_ATTRIBUTES = ("strides", "dilations", "pads", "auto_pad", "group")


def _deformable_conv(rw: Rewriter, node: onnx.NodeProto) -> list[onnx.NodeProto] | None:
    if len(node.input) < 3 or not rw.output(node, 0):
        return None
    attrs = [a for a in node.attribute if a.name in _CONV_ATTRIBUTES]
    conv = helper.make_node("Conv", [node.input[0], node.input[2]], [node.output[0]])
    conv.attribute.extend(attrs)
    return [conv]


def _detection_output(rw: Rewriter, node: onnx.NodeProto) -> list[onnx.NodeProto] | None:
    if len(node.input) < 3 or not rw.output(node, 0):
        return None
    attrs = int_attrs(node)
    nodes: list[onnx.NodeProto] = []
    batch = rw.shape_dims(node.input[0], 0, 1, nodes)
    keep, top = attrs.get("keep_top_k", -1), attrs.get("top_k", -1)
    if keep > 0:
        rows = _product([batch, rw.ints([keep])], rw, nodes)
    else:
        scores = rw.shape_dims(node.input[1], 1, 2, nodes)
        prior_values = rw.shape_dims(node.input[2], 2, 3, nodes)
        size = rw.ints([4 if attrs.get("normalized", 0) else 5])
        priors = _count(prior_values, size, node.input[0], rw, nodes)
        classes = _quotient(scores, priors, node.input[0], rw, nodes)
        rows = _product([batch, rw.ints([top]) if top > 0 else priors, classes], rw, nodes)
    rw.filled([rw.ints([1, 1]), rows, rw.ints([7])], node.input[0], node.output[0], nodes)
    return nodes


def _product(parts: list[str], rw: Rewriter, nodes: list[onnx.NodeProto]) -> str:
    total = parts[0]
    for part in parts[1:]:
        out = rw.name("product")
        nodes.append(helper.make_node("Mul", [total, part], [out]))
        total = out
    return total


def _count(values: str, size: str, like: str, rw: Rewriter, nodes: list[onnx.NodeProto]) -> str:
    """``values / size``: the rows of a Reshape of ``values`` zeros to ``[-1, size]``."""
    flat, target, table = rw.name("flat"), rw.name("target"), rw.name("table")
    rw.filled([values], like, flat, nodes)
    nodes += [helper.make_node("Concat", [rw.ints([-1]), size], [target], axis=0),
              helper.make_node("Reshape", [flat, target], [table])]
    return rw.shape_dims(table, 0, 1, nodes)


def _quotient(left: str, right: str, like: str, rw: Rewriter, nodes: list[onnx.NodeProto]) -> str:
    """``left / right`` (1-D, one dim each) as a Reshape of ``left`` zeros to ``[right, -1]`` infers
    it (ONNX's data propagation does not divide)."""
    flat, target, table = rw.name("flat"), rw.name("target"), rw.name("table")
    rw.filled([left], like, flat, nodes)
    nodes += [helper.make_node("Concat", [right, rw.ints([-1])], [target], axis=0),
              helper.make_node("Reshape", [flat, target], [table])]
    return rw.shape_dims(table, 1, 2, nodes)


OPENVINO_TWINS: dict[str, Twin] = {"DeformableConv2D": _deformable_conv, "DetectionOutput": _detection_output}
