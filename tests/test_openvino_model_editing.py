"""Model edits and keyword forms OpenVINO programs use, checked against OpenVINO's behaviour.

Parameters a graph reads before the model declares them (``add_parameters`` after the ops that
read it, rewiring to a new Parameter before ``replace_parameter``), the names ``replace_parameter``
keeps, the shapes ``add_outputs`` and the IR reader give inner tensors, and OpenVINO's keyword
names for the arguments of requests, models, shapes, layouts and queues.  Results are checked
against numpy; names and shapes against openvino where it is installed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import inferplex as ov
from inferplex import opset8 as ops
from inferplex.errors import InputError, InputTypeError, ModelError


def _conv_net() -> onnx.ModelProto:
    """x [N, 3, H, W] -> Conv (8 channels, bias) -> Relu -> mean over H, W -> Gemm (+ bias) ->
    probs [N, 10]."""
    rng = np.random.default_rng(0)
    weights = [onnx.numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32), name)
               for name, shape in (("w", (8, 3, 3, 3)), ("b", (8,)), ("fc", (10, 8)), ("bias", (10,)))]
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["conv"], name="conv", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["conv"], ["act"], name="act"),
             helper.make_node("ReduceMean", ["act"], ["pooled"], name="pool", axes=[2, 3], keepdims=0),
             helper.make_node("Gemm", ["pooled", "fc", "bias"], ["logits"], name="gemm", transB=1),
             helper.make_node("Softmax", ["logits"], ["probs"], name="softmax")]
    graph = helper.make_graph(nodes, "net", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                           ["N", 3, "H", "W"])],
                              [helper.make_tensor_value_info("probs", TensorProto.FLOAT, ["N", 10])], weights)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _run(model: Any, feeds: Any) -> list[np.ndarray]:
    compiled = ov.Core().compile_model(model, "CPU")
    results = compiled(feeds)
    return [np.asarray(results[i]) for i in range(len(compiled.outputs))]


def test_a_parameter_added_after_the_ops_that_read_it() -> None:
    model = ov.Core().read_model(_conv_net().SerializeToString())
    extra = ops.parameter([1], np.float32, name="extra")
    model.add_parameters([extra])
    model.add_results([ops.result(ops.multiply(extra, ops.constant(np.float32(2))))])
    assert [p.any_name for p in model.inputs] == ["x", "extra"]
    x = np.random.default_rng(1).standard_normal((1, 3, 8, 8)).astype(np.float32)
    probs, doubled = _run(model, {"x": x, "extra": np.array([3.0], np.float32)})
    assert doubled.tolist() == [6.0]
    assert probs.shape == (1, 10)


def test_a_parameter_read_before_it_is_declared_is_refused_until_then() -> None:
    param = ops.parameter([2], np.float32, name="p")
    model = ov.Model([ops.relu(param)], [param], "m")
    late = ops.parameter([2], np.float32, name="late")
    model.add_results([ops.result(ops.add(late, ops.constant(np.ones(2, np.float32))))])
    with pytest.raises(ModelError, match=r"'late'.*add_parameters"):
        ov.Core().compile_model(model, "CPU")
    model.add_parameters([late])
    outputs = _run(model, {"p": np.array([-1.0, 2.0], np.float32), "late": np.array([1.0, 2.0], np.float32)})
    assert [o.tolist() for o in outputs] == [[0.0, 2.0], [2.0, 3.0]]


def test_rewiring_to_a_new_parameter_then_replacing_the_old_one() -> None:
    # the usual way to take NHWC data: a Transpose after a new Parameter, put in the old one's place
    model = ov.Core().read_model(_conv_net().SerializeToString())
    x = np.random.default_rng(2).standard_normal((1, 3, 8, 8)).astype(np.float32)
    expected = _run(model, {"x": x})[0]
    nhwc = ops.parameter([1, 8, 8, 3], np.float32, name="nhwc")
    transposed = ops.transpose(nhwc, ops.constant(np.array([0, 3, 1, 2], np.int64)))
    old = model.get_parameters()[0]
    for target in old.output(0).get_target_inputs():
        target.replace_source_output(transposed.output(0))
    model.replace_parameter(0, nhwc)
    model.validate_nodes_and_infer_types()
    assert len(model.inputs) == 1
    assert model.input(0).get_partial_shape() == ov.PartialShape([1, 8, 8, 3])
    assert model.input(0).get_names() >= {"x", "nhwc"}  # OpenVINO keeps the replaced input's names
    np.testing.assert_allclose(_run(model, {"x": x.transpose(0, 2, 3, 1).copy()})[0], expected, rtol=1e-5)


def test_replace_parameter_keeps_the_old_names_as_openvino_does() -> None:
    openvino = pytest.importorskip("openvino")
    seen = []
    for package, opset in ((openvino, openvino.opset13), (ov, ops)):
        first = opset.parameter([1, 3], np.float32, name="a")
        first.output(0).get_tensor().set_names({"a_t"})
        model = package.Model([opset.relu(first)], [first], "m")
        second = opset.parameter([1, 3], np.float32, name="b")
        second.output(0).get_tensor().set_names({"b_t"})
        model.replace_parameter(0, second)
        seen.append(model.input(0).get_names())
    assert seen[1] == seen[0] == {"a_t", "b_t"}


def test_add_outputs_gives_an_inner_tensor_its_shape() -> None:
    model = ov.Core().read_model(_conv_net().SerializeToString())
    port = model.add_outputs("act")[0]
    assert port.get_partial_shape().rank.is_static
    assert port.get_partial_shape().to_string() == "[?,8,?,?]"
    x = np.ones((2, 3, 5, 5), np.float32)
    assert _run(model, {"x": x})[1].shape == (2, 8, 5, 5)


def test_an_ir_whose_shapes_onnx_inference_loses_keeps_openvinos(tmp_path: Path) -> None:
    openvino = pytest.importorskip("openvino")
    source = _conv_net()
    # OpenVINO's read_model (no conversion passes) reshapes the Conv's bias by computed shapes
    ov_model = openvino.Core().read_model(source.SerializeToString(), b"")
    xml = tmp_path / "net.xml"
    openvino.save_model(ov_model, str(xml), compress_to_fp16=False)
    again = ov.Core().read_model(xml)
    expected = openvino.Core().read_model(str(xml))
    assert [p.get_partial_shape().to_string() for p in again.outputs] == \
        [p.get_partial_shape().to_string() for p in expected.outputs]


def test_openvino_keyword_names_reach_their_arguments() -> None:
    param = ops.parameter([1, 3], np.float32, name="x")
    model = ov.Model([ops.relu(param)], [param], "m")
    assert model.input(index=0).any_name == model.input(tensor_name="x").any_name == "x"
    assert model.output(index=0) == model.output(0)
    model.set_rt_info(obj="v", path="key")
    assert model.get_rt_info("key") == "v"
    model.reshape(partial_shape=[2, 3])
    assert model.input(0).get_partial_shape() == ov.PartialShape([2, 3])
    model.reshape(partial_shapes={"x": [4, 3]})
    assert model.input(0).get_partial_shape() == ov.PartialShape([4, 3])
    compiled = ov.Core().compile_model(model, "CPU")
    request = compiled.create_infer_request()
    data = ov.Tensor(np.array([[-1.0, 2.0, 3.0]] * 4, np.float32))
    request.set_tensor(name="x", tensor=data)
    request.set_input_tensor(index=0, tensor=data)
    request.set_input_tensor(tensor=data)
    request.infer()
    assert request.get_tensor(name="x").data.tolist() == data.data.tolist()
    assert request.get_output_tensor(index=0).data[0].tolist() == [0.0, 2.0, 3.0]
    assert compiled.input(index=0).any_name == compiled.input(tensor_name="x").any_name == "x"
    assert compiled.output(index=0) == compiled.output(0)
    assert compiled.get_property(property="PERFORMANCE_HINT") == compiled.get_property("PERFORMANCE_HINT")
    core = ov.Core()
    assert core.get_property("CPU", name="FULL_DEVICE_NAME") == core.get_property("CPU", "FULL_DEVICE_NAME")
    assert core.get_property(property="CACHE_DIR") == core.get_property("CACHE_DIR")
    queue = ov.AsyncInferQueue(model=compiled, jobs=2)
    assert len(queue) == 2
    assert ov.Dimension(min_dimension=1, max_dimension=4) == ov.Dimension(1, 4)
    assert ov.Dimension(dimension=3) == ov.Dimension(3)
    assert ov.Dimension(3).compatible(dim=ov.Dimension(1, 4))
    assert ov.PartialShape(shape=[1, -1]).compatible(shape=ov.PartialShape([1, 5]))
    assert ov.Shape(axis_lengths=[2, 3]) == ov.Shape([2, 3])
    layout = ov.Layout(layout_str="NCHW")
    assert layout.has_name(dimension_name="C") and layout.get_index_by_name(dimension_name="C") == 1
    target = ov.Tensor(np.zeros(3, np.float32))
    ov.Tensor(np.arange(3, dtype=np.float32)).copy_to(target_tensor=target)
    assert target.data.tolist() == [0.0, 1.0, 2.0]
    with pytest.raises(InputTypeError, match="accepted"):
        request.set_input_tensor(position=0, tensor=data)


def test_set_input_tensors_by_index_takes_a_batch() -> None:
    param = ops.parameter([2, 3], np.float32, name="x")
    compiled = ov.Core().compile_model(ov.Model([ops.relu(param)], [param], "m"), "CPU")
    request = compiled.create_infer_request()
    rows = [ov.Tensor(np.array([[-1.0, 2.0, 3.0]], np.float32)),
            ov.Tensor(np.array([[4.0, -5.0, 6.0]], np.float32))]
    request.set_input_tensors(0, rows)
    request.infer()
    assert request.get_output_tensor().data.tolist() == [[0.0, 2.0, 3.0], [4.0, 0.0, 6.0]]
    request.set_input_tensors(idx=0, tensors=rows[::-1])
    request.infer()
    assert request.get_output_tensor().data.tolist() == [[4.0, 0.0, 6.0], [0.0, 2.0, 3.0]]


def test_roi_tensors_from_coordinates_share_the_parent_memory() -> None:
    parent = ov.Tensor(np.arange(12, dtype=np.float32).reshape(3, 4))
    region = ov.Tensor(parent, ov.Coordinate([1, 1]), ov.Coordinate([3, 3]))
    assert list(region.shape) == [2, 2] and not region.is_continuous()
    assert region.data.tolist() == [[5.0, 6.0], [9.0, 10.0]]
    region.data[0, 0] = 100.0
    assert parent.data[1, 1] == 100.0


def test_axis_and_coordinate_containers() -> None:
    assert list(ov.AxisSet({2, 0, 1})) == [0, 1, 2] and 1 in ov.AxisSet([1])
    assert list(ov.AxisVector([1, 0])) == [1, 0]
    assert list(ov.CoordinateDiff([0, -1])) == [0, -1]
    with pytest.raises(InputError):
        ov.Coordinate([0, -1])  # a position, not an offset


def test_openvino_exception_names_catch_inferplex_errors() -> None:
    from inferplex.exceptions import OVError, OVTypeError, UserInputError

    param = ops.parameter([1, 3], np.float32, name="x")
    compiled = ov.Core().compile_model(ov.Model([ops.relu(param)], [param], "m"), "CPU")
    with pytest.raises(UserInputError):
        compiled({"y": np.zeros((1, 3), np.float32)})
    with pytest.raises(OVTypeError):
        compiled.create_infer_request().set_input_tensor(position=0)
    assert issubclass(UserInputError, OVError) and issubclass(OVError, RuntimeError)


def test_node_names_arguments_and_constant_sizes_as_in_openvino() -> None:
    param = ops.parameter([1, 3], np.float32, name="x")
    ones = ops.constant(np.ones((1, 3), np.float32))
    added = ops.add(param, ones, name="sum")
    assert added.get_name() == added.name == "sum" and ones.get_byte_size() == 12
    added.rt_info["note"] = "kept"
    assert added.get_rt_info()["note"] == "kept"
    added.set_argument(1, param.output(0))  # x + x
    model = ov.Model([added], [param], "m")
    assert _run(model, np.array([[1.0, 2.0, 3.0]], np.float32))[0].tolist() == [[2.0, 4.0, 6.0]]
    added.set_arguments([ones.output(0), param.output(0)])  # 1 + x
    assert _run(ov.Model([added], [param], "m"), np.array([[1.0, 2.0, 3.0]], np.float32))[0].tolist() == \
        [[2.0, 3.0, 4.0]]
    with pytest.raises(InputError, match="has 2 inputs"):
        added.set_arguments([param.output(0)])


def test_replace_node_and_replace_output_update_name() -> None:
    from inferplex.utils import replace_node, replace_output_update_name

    model = ov.Core().read_model(_conv_net().SerializeToString())
    x = np.random.default_rng(5).standard_normal((1, 3, 6, 6)).astype(np.float32)
    softmax = model.get_results()[0].input_value(0).get_node()
    logits = softmax.input_value(0)
    replace_node(softmax, ops.sigmoid(logits))
    assert model.output(0).get_names() == {"probs"}
    probabilities = _run(model, {"x": x})[0]
    assert probabilities.shape == (1, 10) and not np.isclose(probabilities.sum(), 1.0)  # no longer a softmax
    doubled = ops.multiply(model.get_results()[0].input_value(0), ops.constant(np.float32(2)), name="twice")
    assert replace_output_update_name(model.get_results()[0].input_value(0), doubled.output(0))
    np.testing.assert_allclose(_run(model, {"x": x})[0], 2 * probabilities, rtol=1e-6)
    with pytest.raises(InputError, match="outputs"):
        replace_node(model.get_results()[0].input_value(0).get_node(), [logits, logits])


def test_convert_model_imports_from_the_ovc_namespace_too() -> None:
    from inferplex.tools.ovc import convert_model

    model = convert_model(_conv_net().SerializeToString(), input=[("x", [2, 3, 8, 8])])
    assert model.input(0).get_partial_shape() == ov.PartialShape([2, 3, 8, 8])
    assert convert_model is ov.convert_model


def test_ops_built_by_opset_functions_report_openvinos_type_names() -> None:
    param = ops.parameter([1, 3, 8, 8], np.float32, name="x")
    conv = ops.convolution(param, ops.constant(np.ones((4, 3, 3, 3), np.float32)), [1, 1], [1, 1], [1, 1],
                           [1, 1])
    scaled = ops.multiply(ops.relu(conv), ops.constant(np.float32(2)))
    model = ov.Model([ops.convert(scaled, "f16")], [param], "m")
    computing = [op.get_type_name() for op in model.get_ordered_ops()
                 if op.get_type_name() not in ("Parameter", "Constant", "Result")]
    assert computing == ["Convolution", "Relu", "Multiply", "Convert"]
    assert all(not key.startswith("inferplex.") for op in model.get_ops() for key in op.get_rt_info())
    assert [op.get_type_name() for op in model.get_ops() if op.get_type_name() == "Convolution"]
