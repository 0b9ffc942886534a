"""ONNX protos of a model without its large weights: only the weights' names, types and shapes.

Engines that take a model as an ``onnx.ModelProto`` (ONNX Runtime, ONNX's shape
inference) do not need every weight inside it: ONNX Runtime takes large
initializers as in-memory values, and shape inference reads them as typed
inputs.  Copying them into a proto, and ``SerializeToString`` after, holds the
GIL for seconds on a model the size of BERT-base, while other devices compile
beside (MULTI, AUTO's startup fallback).  :func:`serialize_leaving_out`
serializes the model's main graph through a read-only view that lists only the
initializers to keep, so the others are never copied, and the model itself is
not changed: other threads may read it meanwhile.  :func:`weights_as_inputs`
builds the one weight-free copy that ONNX's tools read (shape inference, the
version converter): the left-out weights declared as typed graph inputs.
"""

from __future__ import annotations

from collections.abc import Callable

import onnx
import onnx_ir as ir

__all__ = ["serialize_leaving_out", "weights_as_inputs"]


def serialize_leaving_out(model: ir.Model,
                          leave_out: Callable[[ir.Value], bool]) -> tuple[onnx.ModelProto, list[ir.Value]]:
    """The model as a proto without the main-graph initializers ``leave_out`` picks, and those initializers.

    Nodes still name the left-out values; the caller declares them (as graph
    inputs, or as initializers with external data) as its engine needs.
    """
    graph = model.graph
    kept: list[ir.Value] = []
    left: list[ir.Value] = []
    for value in graph.initializers.values():
        (left if value.const_value is not None and leave_out(value) else kept).append(value)
    if not left:
        return ir.serde.serialize_model(model), []
    view = ir.GraphView(graph.inputs, graph.outputs, nodes=graph, initializers=kept,
                        doc_string=graph.doc_string, opset_imports=dict(graph.opset_imports), name=graph.name,
                        metadata_props=dict(graph.metadata_props))
    shell = ir.Model(view, ir_version=model.ir_version,  # type: ignore[arg-type] # a view serializes alike
                     producer_name=model.producer_name, producer_version=model.producer_version,
                     domain=model.domain, model_version=model.model_version, doc_string=model.doc_string,
                     functions=list(model.functions.values()), metadata_props=dict(model.metadata_props))
    return ir.serde.serialize_model(shell), left


def weights_as_inputs(model: ir.Model,
                      leave_out: Callable[[ir.Value], bool]) -> tuple[onnx.ModelProto, list[ir.Value]]:
    """The model as a proto whose initializers picked by ``leave_out`` are typed graph inputs instead
    (same name, element type and shape; no data), and those initializers.

    ONNX's shape inference and version converter read such an input as they read the weight, but for
    its values.  An initializer that is a graph input already (an overridable one) keeps that one
    declaration.
    """
    proto, left = serialize_leaving_out(model, leave_out)
    declared = {info.name for info in proto.graph.input}
    for value in left:
        tensor = value.const_value
        if value.name not in declared and tensor is not None:
            proto.graph.input.append(onnx.helper.make_tensor_value_info(
                value.name or "", tensor.dtype.value, [int(d) for d in tensor.shape.numpy()]))
    return proto, left
