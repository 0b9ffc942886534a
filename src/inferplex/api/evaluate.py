"""``Node.evaluate``: one op computed on host tensors, as OpenVINO's ``Node.evaluate`` does.

The op's ONNX node runs alone, on ONNX Runtime's CPU provider, with the given tensors as its
inputs; its outputs are written into the given output tensors.  An op built from several ONNX
nodes, or of a domain ONNX Runtime does not know, is not evaluated (False), as OpenVINO answers
for ops without an evaluation.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import onnx
import onnx_ir as ir
from onnx import helper

from inferplex.api.build import OPSET
from inferplex.errors import InputError

if TYPE_CHECKING:
    from inferplex.api.nodes import Node

__all__ = ["evaluate_node", "run_alone"]


def evaluate_node(node: Node, output_tensors: list[Any], input_tensors: list[Any]) -> bool:
    """Compute ``node`` on ``input_tensors`` into ``output_tensors`` (see the module docstring)."""
    onnx_nodes = node.onnx_nodes
    inputs = node.inputs()
    if len(input_tensors) != len(inputs) or len(output_tensors) != node.get_output_size():
        raise InputError(f"evaluate: {node.get_type_name()} takes {len(inputs)} input and "
                         f"{node.get_output_size()} output tensors, got {len(input_tensors)} and "
                         f"{len(output_tensors)}")
    for index, (port, tensor) in enumerate(zip(inputs, input_tensors, strict=True)):
        if port.get_element_type() != tensor.get_element_type():
            raise InputError(f"evaluate: {node.get_type_name()} input {index} takes "
                             f"{port.get_element_type().get_type_name()} data, got a "
                             f"{tensor.get_element_type().get_type_name()} tensor")
    if len(onnx_nodes) != 1 or len(onnx_nodes[0].outputs) != len(output_tensors):
        return False
    arrays = [np.asarray(tensor.data) for tensor in input_tensors]
    results = run_alone(onnx_nodes[0], arrays, OPSET)
    if results is None:
        return False
    for tensor, result in zip(output_tensors, results, strict=True):
        if tuple(tensor.shape) != result.shape:
            tensor.shape = list(result.shape)
        np.copyto(tensor.data, result.astype(tensor.data.dtype, copy=False))
    return True


def run_alone(node: ir.Node, arrays: Sequence[np.ndarray | None], opset: int) -> list[np.ndarray] | None:
    """``node`` run by itself on ONNX Runtime's CPU provider, ``arrays`` its inputs in order (None for
    an optional input left out), in ONNX ``opset``; None where it cannot run so."""
    import onnxruntime

    names = [f"input{index}" if array is not None else "" for index, array in enumerate(arrays)]
    outputs = [f"output{index}" for index in range(len(node.outputs))]
    proto = helper.make_node(node.op_type, names, outputs, domain=node.domain)
    feeds = {name: array for name, array in zip(names, arrays, strict=True) if array is not None}
    try:
        proto.attribute.extend(ir.serde.serialize_attribute(attribute)
                               for attribute in node.attributes.values())
        graph = helper.make_graph(
            [proto], "alone",
            [helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(array.dtype), array.shape)
             for name, array in feeds.items()],
            [onnx.ValueInfoProto(name=name) for name in outputs])
        # the outputs' types from ONNX's inference (ONNX Runtime takes none unset)
        model = onnx.shape_inference.infer_shapes(
            helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)]), strict_mode=True)
        session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        return [np.asarray(result) for result in session.run(outputs, feeds)]
    except Exception:  # noqa: BLE001 - a node ONNX Runtime cannot run by itself (or a type it lacks)
        return None
