"""Model.reshape, set_batch and get_batch, checked against ONNX Runtime on the same model.

Shapes in every form OpenVINO takes; downstream ports follow; compiled models
take the new shapes and refuse others; a shape the model cannot take is an
InputError that names the input and leaves the model as it was.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import inferplex as ov
from inferplex.errors import InputError

from conftest import make_model, ort_run

FLOAT = TensorProto.FLOAT
RNG = np.random.default_rng(3)
WEIGHTS = RNG.standard_normal((4, 3, 3, 3)).astype(np.float32)


def _conv_model() -> onnx.ModelProto:
    """x f32 [N,3,H,W] -> Conv 3x3 (pad 1, stride 2) -> Relu -> y f32 [N,4,?,?]."""
    return make_model(
        [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1], strides=[2, 2], name="conv"),
         helper.make_node("Relu", ["c"], ["y"], name="act")],
        [("x", FLOAT, ["N", 3, "H", "W"])], [("y", FLOAT, ["N", 4, None, None])],
        [numpy_helper.from_array(WEIGHTS, "w")])


def _two_input_model() -> onnx.ModelProto:
    return make_model([helper.make_node("Add", ["a", "b"], ["s"])],
                      [("a", FLOAT, ["N", 4]), ("b", FLOAT, ["N", 4])], [("s", FLOAT, ["N", 4])])


def _reshape_const_model() -> onnx.ModelProto:
    """x f32 [2,6] -> Reshape to the constant [3,4]."""
    return make_model([helper.make_node("Reshape", ["x", "s"], ["y"])], [("x", FLOAT, [2, 6])],
                      [("y", FLOAT, [3, 4])], [numpy_helper.from_array(np.array([3, 4], np.int64), "s")])


@pytest.mark.parametrize(("shape", "want"), [
    ([2, 3, 16, 16], "2,3,16,16"),
    ((2, 3, 16, 16), "2,3,16,16"),
    ("1,3,?,?", "1,3,?,?"),
    ("[1,3,?,?]", "1,3,?,?"),
    ("1..8,3,224,224", "1..8,3,224,224"),
    ([-1, 3, "?", 32], "?,3,?,32"),
    ([(1, 8), 3, (16, -1), "..64"], "1..8,3,16..,..64"),
    ([(0, 64), 3, "0..", (0, -1)], "..64,3,?,?"),
    (["1..8", 3, 10, 10], "1..8,3,10,10"),
    ([(4, 4), 3, 8, 8], "4,3,8,8"),
    (ov.PartialShape("[1..8,3,224,224]"), "1..8,3,224,224"),
    (ov.PartialShape([ov.Dimension(2), 3, ov.Dimension(), ov.Dimension(1, 8)]), "2,3,?,1..8"),
    ([ov.Dimension(2), ov.Dimension(3), ov.Dimension(), ov.Dimension(1, 8)], "2,3,?,1..8"),
    ([ov.Dimension(2, -1), 3, ov.Dimension(0, 64), ov.Dimension(-1)], "2..,3,..64,?"),
    (ov.Shape([1, 3, 8, 8]), "1,3,8,8"),
])
def test_shape_forms(shape: object, want: str) -> None:
    model = ov.Core().read_model(_conv_model())
    model.reshape(shape)
    assert model.input().partial_shape == ov.PartialShape(want)
    assert model.input().is_dynamic == ov.PartialShape(want).is_dynamic


def test_ranged_dims_show_as_ranged_dimensions() -> None:
    model = ov.Core().read_model(_conv_model())
    model.reshape({"x": ov.PartialShape([ov.Dimension(1, 8), 3, ov.Dimension(16, -1), 16])})
    batch, _, height, _ = model.input().partial_shape
    assert (batch.get_min_length(), batch.get_max_length()) == (1, 8)
    assert (height.get_min_length(), height.get_max_length()) == (16, -1)
    assert model.output().partial_shape[0] == ov.Dimension(1, 8)  # carried downstream
    assert model.input().dims == ("1..8", 3, "16..", 16)  # inferplex's stored form


def test_by_index_name_and_port_and_ports_taken_before_follow() -> None:
    model = ov.Core().read_model(_two_input_model())
    a, b = model.inputs
    model.reshape({0: [2, 4], "b": [2, 4]})
    assert (a.shape, b.shape, model.output().shape) == ((2, 4), (2, 4), (2, 4))
    model.reshape({b: "?,4", a: [-1, 4]})
    assert a.partial_shape == ov.PartialShape("?,4") == b.partial_shape


def test_downstream_shapes_follow_and_results_match_onnx_runtime() -> None:
    core = ov.Core()
    model = core.read_model(_conv_model())
    out = model.output()
    model.reshape([2, 3, 16, 12])
    assert out.shape == (2, 4, 8, 6)
    x = RNG.standard_normal((2, 3, 16, 12)).astype(np.float32)
    (want,) = ort_run(_conv_model(), {"x": x})
    got = core.compile_model(model, "CPU")(x)["y"]
    assert got.shape == out.shape
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_compiled_model_takes_the_new_shapes_and_refuses_others() -> None:
    core = ov.Core()
    model = core.read_model(_conv_model())
    model.reshape("1..4,3,8,8")
    compiled = core.compile_model(model, "CPU")
    x = RNG.standard_normal((3, 3, 8, 8)).astype(np.float32)
    np.testing.assert_allclose(compiled(x)["y"], ort_run(_conv_model(), {"x": x})[0], rtol=1e-5, atol=1e-5)
    with pytest.raises(InputError, match=r"dimension 0 must be in 1\.\.4"):
        compiled(RNG.standard_normal((5, 3, 8, 8)).astype(np.float32))
    with pytest.raises(InputError, match=r"dimension 2 must be 8"):
        compiled(RNG.standard_normal((1, 3, 9, 8)).astype(np.float32))
    model.reshape([1, 3, 16, 16])  # the compiled model keeps the shapes it was compiled with
    assert compiled.input().partial_shape == ov.PartialShape("1..4,3,8,8")


def test_a_range_in_two_inputs_does_not_tie_them() -> None:
    core = ov.Core()
    model = core.read_model(make_model([helper.make_node("ReduceSum", ["a"], ["s"], keepdims=0),
                                        helper.make_node("Identity", ["b"], ["t"])],
                                       [("a", FLOAT, ["N"]), ("b", FLOAT, ["M"])],
                                       [("s", FLOAT, []), ("t", FLOAT, ["M"])]))
    model.reshape({"a": ["1..8"], "b": ["1..8"]})
    results = core.compile_model(model, "CPU")({"a": np.ones(2, np.float32), "b": np.ones(5, np.float32)})
    assert results["s"] == 2 and results["t"].shape == (5,)


def test_rank_the_model_cannot_take_names_the_input_and_leaves_the_model() -> None:
    model = ov.Core().read_model(_conv_model())
    before = (model.input().partial_shape, model.output().partial_shape)
    with pytest.raises(InputError, match=r"input 'x' \[1,3,8\] \(the model declares \[N,3,H,W\]\)"):
        model.reshape([1, 3, 8])
    assert (model.input().partial_shape, model.output().partial_shape) == before


def test_static_dims_a_reshape_constant_contradicts_are_refused() -> None:
    model = ov.Core().read_model(_reshape_const_model())
    with pytest.raises(InputError, match=r"input 'x' \[2,7\] \(the model declares \[2,6\]\)"):
        model.reshape([2, 7])
    assert model.input().shape == (2, 6)
    model.reshape([3, 4])  # same element count: the constant allows it
    x = RNG.standard_normal((3, 4)).astype(np.float32)
    np.testing.assert_array_equal(ov.Core().compile_model(model, "CPU")(x)["y"], x.reshape(3, 4))


@pytest.mark.parametrize(("shapes", "message"), [
    ([1, -2, 3, 3], "negative"),
    ("1,3,x y,4", "not understood"),
    ([(8, 1), 3, 4, 4], "not valid"),
    ({"nope": [1, 3, 4, 4]}, "no input named 'nope'"),
    ({4: [1, 3, 4, 4]}, "out of range"),
    ([True, 3, 4, 4], "bool"),
])
def test_bad_shapes_are_input_errors(shapes: object, message: str) -> None:
    with pytest.raises(InputError, match=message):
        ov.Core().read_model(_conv_model()).reshape(shapes)


def test_one_shape_for_a_model_of_two_inputs_is_refused() -> None:
    with pytest.raises(InputError, match="2 inputs"):
        ov.Core().read_model(_two_input_model()).reshape([2, 4])


# --- set_batch / get_batch -----------------------------------------------------------------------


def test_get_batch_needs_a_layout_as_in_openvino() -> None:
    model = ov.Core().read_model(_conv_model())
    with pytest.raises(InputError, match=r"'x' \[N,3,H,W\] layout not set.*set_layout"):
        ov.get_batch(model)
    with pytest.raises(InputError, match="set_layout"):
        ov.set_batch(model, 2)


def test_set_batch_changes_only_inputs_with_n_and_runs() -> None:
    core = ov.Core()
    model = core.read_model(_conv_model())
    model.reshape([1, 3, 8, 8])
    param = model.get_parameters()[0]
    param.set_layout("NCHW")
    assert param.get_layout() == ov.Layout("NCHW") and ov.get_batch(model) == 1
    ov.set_batch(model, 4)
    assert ov.get_batch(model) == 4 and param.get_partial_shape() == (4, 3, 8, 8)
    assert model.output().shape == (4, 4, 4, 4)
    x = RNG.standard_normal((4, 3, 8, 8)).astype(np.float32)
    np.testing.assert_allclose(core.compile_model(model, "CPU")(x)["y"], ort_run(_conv_model(), {"x": x})[0],
                               rtol=1e-5, atol=1e-5)
    ov.set_batch(model)  # -1: dynamic, as OpenVINO's default
    assert model.is_dynamic() and model.input().partial_shape == ov.PartialShape("?,3,8,8")
    assert ov.get_batch(model) == ov.Dimension()
    ov.set_batch(model, ov.Dimension(1, 8))
    assert ov.get_batch(model) == ov.Dimension(1, 8)


def test_batch_named_after_the_ellipsis_and_inputs_without_n() -> None:
    model = ov.Core().read_model(make_model(
        [helper.make_node("Add", ["a", "b"], ["s"])],
        [("a", FLOAT, [3, 1, 5]), ("b", FLOAT, [3, 1, 5])], [("s", FLOAT, [3, 1, 5])]))
    a, b = model.get_parameters()
    a.set_layout("...N")  # OpenVINO's CHWN-style: the batch is the last dim
    assert ov.get_batch(model) == 5
    ov.set_batch(model, 1)
    assert a.get_partial_shape() == (3, 1, 1) and b.get_partial_shape() == (3, 1, 5)


def test_inputs_that_disagree_on_the_batch_are_refused() -> None:
    model = ov.Core().read_model(make_model(
        [helper.make_node("Identity", ["a"], ["c"]), helper.make_node("Identity", ["b"], ["d"])],
        [("a", FLOAT, [2, 4]), ("b", FLOAT, [3, 4])], [("c", FLOAT, [2, 4]), ("d", FLOAT, [3, 4])]))
    for param in model.get_parameters():
        param.set_layout("NC")
    with pytest.raises(InputError, match=r"disagree.*'b'"):
        ov.get_batch(model)


def test_layout_survives_save_and_load(tmp_path: object) -> None:
    model = ov.Core().read_model(_conv_model())
    model.get_parameters()[0].set_layout("[N,C,H,W]")
    path = f"{tmp_path}/m.onnx"
    ov.save_model(model, path)
    again = ov.Core().read_model(path)
    assert again.get_parameters()[0].get_layout() == "[N,C,H,W]"
    with pytest.raises(InputError, match="layout"):
        again.get_parameters()[0].set_layout("N,C??")


def test_reshaped_intermediate_values_keep_their_types(caplog: pytest.LogCaptureFixture) -> None:
    """Shapes inferred by a reshape come with their element types, so the model saves whole."""
    weights = numpy_helper.from_array(np.ones((4, 3, 3, 3), np.float32), "w")
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["c"], name="conv"),
         helper.make_node("Relu", ["c"], ["r"], name="relu"),
         helper.make_node("Add", ["r", "r"], ["y"], name="add")], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4, 6, 6])], [weights])
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    proto.ir_version = 9
    core = ov.Core()
    model = core.read_model(proto)
    model.reshape({"x": [2, 3, 8, 8]})
    with caplog.at_level("WARNING"):
        compiled = core.compile_model(model, "CPU")
    assert "not known" not in caplog.text
    x = np.random.default_rng(0).random((2, 3, 8, 8), dtype=np.float32)
    expected = ort_run(proto, {"x": x})[0]
    np.testing.assert_allclose(compiled({"x": x})[0], expected, rtol=1e-4, atol=1e-5)
    saved = onnx.load_from_string(model.to_onnx().SerializeToString())
    typed = {info.name: info.type.tensor_type.elem_type for info in saved.graph.value_info}
    assert typed.get("c") == TensorProto.FLOAT and typed.get("r") == TensorProto.FLOAT
