"""Raising a model's ONNX opset for preprocessing ops newer than the model.

Preprocessing is built as ONNX ops: Resize needs opset 11, Slice with steps
opset 10.  A model importing an older opset (the ``light`` models in the onnx
wheel import 9) is converted first with onnx's version converter, which
rewrites every op whose definition changed; OpenVINO meets no such limit, as it
reads any opset into its own ops.

The converter works on a proto without the large weights (typed graph inputs
stand in for them: :func:`inferplex._serialize.weights_as_inputs`, the builder
shape inference uses too, with its own choice of weights: here every external
one, which the converter must not read), so no weight is copied; the weights,
and the rt_info the converter drops (layouts, affinities, friendly names,
stored as ``metadata_props``), are carried over by name.
"""

from __future__ import annotations

import onnx
import onnx_ir as ir

from inferplex._serialize import weights_as_inputs
from inferplex.errors import ModelError

__all__ = ["raise_opset"]

_SMALL_BYTES = 1024
"""Initializers up to this size stay in the converted proto (adapters may read their values)."""


def _left_out(value: ir.Value) -> bool:
    tensor = value.const_value
    return isinstance(tensor, ir.ExternalTensor) or (tensor is not None and tensor.nbytes > _SMALL_BYTES)


def raise_opset(model: ir.Model, version: int) -> ir.Model:
    """``model`` converted to ONNX opset ``version`` (a new model; ``model`` is not changed).

    ModelError when onnx's version converter cannot convert it.
    """
    old = model.graph.opset_imports.get("", 1)
    proto, left = weights_as_inputs(model, _left_out)
    try:
        converted = onnx.version_converter.convert_version(proto, version)
    except Exception as error:  # noqa: BLE001 - the converter raises several unrelated types
        raise ModelError(f"preprocessing needs ONNX opset {version}, but onnx's version converter "
                         f"cannot convert this model from opset {old}: {error}; export the model "
                         f"with opset >= {version}") from error
    converted.ir_version = max(converted.ir_version, onnx.helper.find_min_ir_version_for(
        list(converted.opset_import)))
    upgraded = ir.serde.deserialize_model(converted)
    _restore_weights(upgraded.graph, left)
    _carry_metadata(model, upgraded)
    return upgraded


def _restore_weights(graph: ir.Graph, left: list[ir.Value]) -> None:
    """The stand-in inputs become initializers again, holding the original tensors (an initializer
    that was a graph input too stays one)."""
    by_name = {value.name: value for value in graph.inputs}
    for original in left:
        value = by_name[original.name]
        if not original.is_graph_input():
            graph.inputs.remove(value)
        value.const_value = original.const_value
        graph.register_initializer(value)


def _carry_metadata(source: ir.Model, target: ir.Model) -> None:
    """Copy ``metadata_props`` of the model, graph, inputs, outputs and nodes (by name)."""
    target.metadata_props.update(source.metadata_props)
    target.graph.metadata_props.update(source.graph.metadata_props)
    pairs = [*zip(source.graph.inputs, target.graph.inputs, strict=True),
             *zip(source.graph.outputs, target.graph.outputs, strict=True)]
    for old, new in pairs:
        new.metadata_props.update(old.metadata_props)
    nodes = {node.name: node for node in target.graph}
    for node in source.graph:
        twin = nodes.get(node.name)
        if twin is not None:
            twin.metadata_props.update(node.metadata_props)
