"""Protos of a model without its large weights (serialize.py): the rest as serialize_model gives it."""

from __future__ import annotations

import numpy as np
import onnx_ir as ir
from onnx import TensorProto, helper, numpy_helper

from inferplex._serialize import serialize_leaving_out, weights_as_inputs


def _model() -> ir.Model:
    rng = np.random.default_rng(0)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["h"], name="mm"),
         helper.make_node("Add", ["h", "b"], ["y"], name="add")],
        "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 32])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 8])],
        [numpy_helper.from_array(rng.standard_normal((32, 8)).astype(np.float32), "w"),
         numpy_helper.from_array(rng.standard_normal(8).astype(np.float32), "b")],
        value_info=[helper.make_tensor_value_info("h", TensorProto.FLOAT, ["N", 8])])
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="test")
    proto.metadata_props.add(key="k", value="v")
    return ir.serde.deserialize_model(proto)


def test_left_out_initializers_are_missing_and_the_rest_is_as_serialize_model_gives_it() -> None:
    model = _model()
    whole = ir.serde.serialize_model(model)
    proto, left = serialize_leaving_out(model, lambda value: value.name == "w")
    assert [value.name for value in left] == ["w"]
    assert [t.name for t in proto.graph.initializer] == ["b"]
    for field in (whole.graph.initializer, whole.graph.value_info):  # all that names w goes
        kept = [entry for entry in field if entry.name != "w"]
        del field[:]
        field.extend(kept)
    assert proto == whole  # nodes, inputs, outputs, value_info, opsets, producer, metadata


def test_the_model_is_not_changed() -> None:
    model = _model()
    before = ir.serde.serialize_model(model).SerializeToString()
    serialize_leaving_out(model, lambda value: True)
    assert ir.serde.serialize_model(model).SerializeToString() == before
    assert all(node.graph is model.graph for node in model.graph)


def test_nothing_left_out_is_serialize_model() -> None:
    model = _model()
    proto, left = serialize_leaving_out(model, lambda value: False)
    assert left == [] and proto == ir.serde.serialize_model(model)


def test_weights_as_inputs_declares_each_left_out_weight_once_as_a_typed_input() -> None:
    model = _model()
    model.graph.inputs.append(model.graph.initializers["b"])  # an overridable initializer
    proto, left = weights_as_inputs(model, lambda value: True)
    assert sorted(value.name for value in left) == ["b", "w"] and not proto.graph.initializer
    declared = {info.name: info.type.tensor_type for info in proto.graph.input}
    assert [info.name for info in proto.graph.input] == ["x", "b", "w"]
    for name, array in (("w", (32, 8)), ("b", (8,))):
        assert declared[name].elem_type == TensorProto.FLOAT
        assert tuple(d.dim_value for d in declared[name].shape.dim) == array
