"""Walking and editing a model's graph as OpenVINO programs do: Results read the op that makes
the output, nodes reached twice are the same node, weights are Constants, and rewiring a
Result or an op's input (to nodes built with ``opset8``) changes what the model computes.

Edited models are checked against ONNX Runtime on the original model.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import inferplex as ov
from inferplex.errors import InputError, ModelError

from conftest import make_model, ort_run

FLOAT = TensorProto.FLOAT
RNG = np.random.default_rng(5)
W = RNG.standard_normal((4, 3)).astype(np.float32)
B = RNG.standard_normal((3,)).astype(np.float32)
X = RNG.standard_normal((2, 4)).astype(np.float32)
o = ov.opset8


def _mlp() -> onnx.ModelProto:
    """y = relu(x @ w + b), x f32 [2,4]; w and b are initializers."""
    return make_model(
        [helper.make_node("MatMul", ["x", "w"], ["h"], name="mm"),
         helper.make_node("Add", ["h", "b"], ["hb"], name="add"),
         helper.make_node("Relu", ["hb"], ["y"], name="relu")],
        [("x", FLOAT, [2, 4])], [("y", FLOAT, [2, 3])],
        [numpy_helper.from_array(W, "w"), numpy_helper.from_array(B, "b")], name="mlp")


def _read() -> ov.Model:
    return ov.Core().read_model(_mlp())


def _op(model: ov.Model, type_name: str) -> ov.Node:
    return next(op for op in model.get_ordered_ops() if op.get_type_name() == type_name)


def _run(model: ov.Model, *inputs: np.ndarray) -> list[np.ndarray]:
    compiled = ov.Core().compile_model(model, "CPU")
    return [np.asarray(v) for v in compiled(list(inputs)).values()]


def _expected() -> np.ndarray:
    (y,) = ort_run(_mlp(), {"x": X})
    return np.asarray(y)


# --- walking -------------------------------------------------------------------------------------


def test_a_result_reads_the_op_that_makes_the_output() -> None:
    model = _read()
    result = model.get_results()[0]
    assert result.input_value(0).get_node().get_type_name() == "Relu"
    assert result.input(0).get_source_output().get_node() == _op(model, "Relu")
    assert model.output(0).get_node() == result
    chain, node = [], result
    while node.get_input_size():
        node = node.input_value(0).get_node()
        chain.append(node.get_type_name())
    assert chain == ["Relu", "Add", "MatMul", "Parameter"]


def test_an_output_s_target_inputs_include_the_result() -> None:
    model = _read()
    relu, add = _op(model, "Relu"), _op(model, "Add")
    assert [t.get_node().get_type_name() for t in relu.output(0).get_target_inputs()] == ["Result"]
    assert [t.get_node() for t in add.output(0).get_target_inputs()] == [relu]
    param = model.get_parameters()[0]
    assert [t.get_node().get_type_name() for t in param.output(0).get_target_inputs()] == ["MatMul"]


def test_a_node_reached_twice_is_the_same_node() -> None:
    model = _read()
    assert model.get_ordered_ops()[2] == model.get_ordered_ops()[2]
    assert hash(model.get_ordered_ops()[2]) == hash(model.get_ordered_ops()[2])
    assert _op(model, "Relu").input_value(0).get_node() == _op(model, "Add")
    assert model.get_parameters()[0] == model.get_parameters()[0]
    assert model.get_results()[0] == model.get_results()[0]
    assert model.get_parameters()[0].output(0) == model.input(0)
    assert model.get_results()[0].output(0) == model.output(0)
    assert _op(model, "Relu") != _op(model, "Add")
    ordered = model.get_ordered_ops()
    assert len({*ordered, *model.get_ordered_ops()}) == len(ordered) == 7
    assert all(isinstance(op, ov.Node) for op in ordered)


def test_weights_are_constants_listed_before_the_op_that_reads_them() -> None:
    model = _read()
    assert [op.get_type_name() for op in model.get_ordered_ops()] == \
        ["Parameter", "Constant", "MatMul", "Constant", "Add", "Relu", "Result"]
    weight = _op(model, "MatMul").input(1).get_source_output().get_node()
    assert weight.get_type_name() == "Constant" and weight.get_friendly_name() == "w"
    np.testing.assert_array_equal(weight.get_data(), W)
    np.testing.assert_array_equal(weight.get_vector(), W.reshape(-1))
    assert weight.get_attributes() == {"element_type": "f32", "shape": [4, 3]}
    assert [v.get_node().get_type_name() for v in _op(model, "Add").input_values()] == ["MatMul", "Constant"]
    assert [op.get_type_name() for op in model.get_ops()] == ["MatMul", "Add", "Relu"]


def test_an_onnx_constant_node_gives_its_data() -> None:
    value = np.arange(3, dtype=np.float32)
    model = ov.Core().read_model(make_model(
        [helper.make_node("Constant", [], ["c"], name="c", value=numpy_helper.from_array(value)),
         helper.make_node("Add", ["x", "c"], ["y"], name="add")],
        [("x", FLOAT, [3])], [("y", FLOAT, [3])]))
    constant = _op(model, "Add").input_value(1).get_node()
    assert constant.get_type_name() == "Constant"
    np.testing.assert_array_equal(constant.get_data(), value)


def test_inputs_between_ops_have_their_source_s_type_and_shape() -> None:
    model = _read()
    relu = _op(model, "Relu")
    assert relu.input(0).get_element_type() == ov.Type.f32
    assert relu.input(0).get_partial_shape() == ov.PartialShape([2, 3])
    assert list(relu.input(0).get_shape()) == [2, 3]
    assert relu.get_input_element_type(0) == ov.Type.f32
    assert relu.get_input_partial_shape(0) == ov.PartialShape([2, 3])
    assert list(relu.get_input_shape(0)) == [2, 3]
    matmul = _op(model, "MatMul")
    assert matmul.get_element_type() == ov.Type.f32 and list(matmul.shape) == [2, 3]
    assert matmul.get_output_partial_shape(0) == ov.PartialShape([2, 3])


def test_type_info_and_attributes_of_onnx_ops() -> None:
    model = ov.Core().read_model(make_model(
        [helper.make_node("Softmax", ["x"], ["y"], name="softmax", axis=0),
         helper.make_node("Split", ["x"], ["a", "b"], name="split", axis=1, num_outputs=2)],
        [("x", FLOAT, [2, 4])], [("y", FLOAT, [2, 4]), ("a", FLOAT, [2, 2]), ("b", FLOAT, [2, 2])],
        opset=18))
    softmax, split = _op(model, "Softmax"), _op(model, "Split")
    assert softmax.get_type_info().name == "Softmax" and softmax.type_info.version_id == "opset18"
    assert softmax.get_attributes() == {"axis": 0}
    assert split.get_attributes() == {"axis": 1, "num_outputs": 2}
    assert model.get_parameters()[0].get_type_info().name == "Parameter"
    with pytest.raises(InputError, match="has 2"):
        split.get_element_type()


def test_out_of_range_port_index_is_an_index_error_as_in_openvino() -> None:
    model = _read()
    with pytest.raises(IndexError, match=r"input index 5 is out of range; the model has 1 inputs"):
        model.input(5)
    with pytest.raises(InputError, match="out of range"):  # an inferplex error too
        model.output(3)
    with pytest.raises(IndexError, match="has 1 output"):
        _op(model, "Relu").output(1)


# --- editing -------------------------------------------------------------------------------------


def test_rewiring_the_result_through_target_inputs_negates_the_output() -> None:
    model = _read()
    relu = _op(model, "Relu")
    negative = o.negative(relu.output(0))
    for target in relu.output(0).get_target_inputs():
        if target.get_node().get_type_name() == "Result":
            target.replace_source_output(negative.output(0))
    model.validate_nodes_and_infer_types()
    (y,) = _run(model, X)
    np.testing.assert_allclose(y, -_expected(), rtol=1e-5, atol=1e-6)
    assert model.output(0).get_any_name() == "y"
    assert model.get_results()[0].input_value(0).get_node() == negative
    onnx.checker.check_model(model.to_onnx())


def test_result_input_replace_source_output() -> None:
    model = _read()
    result = model.get_results()[0]
    result.input(0).replace_source_output(o.negative(_op(model, "Relu").output(0)).output(0))
    (y,) = _run(model, X)
    np.testing.assert_allclose(y, -_expected(), rtol=1e-5, atol=1e-6)
    assert result == model.get_results()[0]


def test_an_output_replaced_feeds_every_reader_and_keeps_its_names() -> None:
    model = _read()
    relu = _op(model, "Relu")
    relu.output(0).replace(o.negative(relu.output(0)).output(0))
    (y,) = ort_run(model.to_onnx(), {"x": X})
    np.testing.assert_allclose(y, -_expected(), rtol=1e-5, atol=1e-6)
    assert [port.get_any_name() for port in model.outputs] == ["y"]


def test_add_results_adds_an_output_computed_by_new_nodes() -> None:
    model = _read()
    relu = _op(model, "Relu")
    shifted = o.add(o.sigmoid(relu.output(0)), np.float32(1.0))
    model.add_results([o.result(shifted)])
    y, z = _run(model, X)
    expected = _expected()
    np.testing.assert_allclose(y, expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(z, 1 / (1 + np.exp(-expected)) + 1, rtol=1e-5, atol=1e-6)
    assert [op.get_type_name() for op in model.get_ordered_ops()][5:] == \
        ["Relu", "Sigmoid", "Constant", "Add", "Result", "Result"]


def test_an_op_input_rewired_to_a_new_node_on_a_parameter() -> None:
    model = _read()
    matmul = _op(model, "MatMul")
    matmul.input(0).replace_source_output(o.abs(model.get_parameters()[0].output(0)).output(0))
    (y,) = _run(model, X)
    (reference,) = ort_run(_mlp(), {"x": np.abs(X)})
    np.testing.assert_allclose(y, reference, rtol=1e-5, atol=1e-6)
    types = [op.get_type_name() for op in model.get_ordered_ops()]
    assert types.index("Abs") < types.index("MatMul")


def test_rewiring_an_op_to_its_own_output_is_refused() -> None:
    model = _read()
    negative = o.negative(_op(model, "Relu").output(0))
    with pytest.raises(ModelError, match="cycle"):
        _op(model, "Add").input(0).replace_source_output(negative.output(0))
    (y,) = _run(model, X)
    np.testing.assert_allclose(y, _expected(), rtol=1e-5, atol=1e-6)


def test_new_nodes_reading_a_parameter_the_model_lacks_are_refused_until_it_is_declared() -> None:
    # as OpenVINO: the edit is taken; validating or compiling names the undeclared Parameter
    model = _read()
    stranger = o.parameter([2, 3], np.float32, name="stranger")
    model.add_results([o.result(o.add(_op(model, "Relu").output(0), stranger))])
    with pytest.raises(ModelError, match="stranger"):
        model.validate_nodes_and_infer_types()
    with pytest.raises(ModelError, match="stranger"):
        ov.Core().compile_model(model, "CPU")
    model.add_parameters([stranger])
    model.validate_nodes_and_infer_types()
    assert [p.get_friendly_name() for p in model.get_parameters()][-1] == "stranger"


def test_editing_a_model_built_with_opset8() -> None:
    param = o.parameter([2], np.float32, name="p")
    relu = o.relu(param, name="r")
    model = ov.Model([relu], [param], "built")
    data = np.array([-1.0, 2.0], np.float32)
    built_relu = _op(model, "Relu")
    for target in built_relu.output(0).get_target_inputs():
        target.replace_source_output(o.negative(built_relu.output(0)).output(0))
    model.add_results([o.result(o.sigmoid(param))])  # reads the Parameter the model was built from
    y, z = _run(model, data)
    np.testing.assert_array_equal(y, -np.maximum(data, 0))
    np.testing.assert_allclose(z, 1 / (1 + np.exp(-data)), rtol=1e-6)


def test_affinities_on_every_ordered_op_leave_hetero_working() -> None:
    model = _read()
    for op in model.get_ordered_ops():
        op.get_rt_info()["affinity"] = "CPU"
    assert model.get_parameters()[0].get_rt_info()["affinity"] == "CPU"
    compiled = ov.Core().compile_model(model, "HETERO:CPU")
    np.testing.assert_allclose(compiled(X)[0], _expected(), rtol=1e-5, atol=1e-6)


def test_a_results_friendly_name_sticks_and_its_output_name_stays() -> None:
    model = _read()
    result = model.get_results()[0]
    output_name = model.output(0).get_any_name()
    result.set_friendly_name("output_1")
    assert result.get_friendly_name() == "output_1"
    assert model.get_results()[0].friendly_name == "output_1"  # every view of the output
    assert model.output(0).get_any_name() == output_name  # results are still read by it
    compiled = ov.Core().compile_model(_read(), "CPU")
    node = compiled.output(0).get_node()
    node.set_friendly_name("output_2")
    assert node.friendly_name == "output_2"
