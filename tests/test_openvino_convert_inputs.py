"""``convert_model(..., input=...)`` in OpenVINO's forms: names, shapes, types, tuples of them, lists
and dicts.  A shape reshapes the input; a type retypes it, and the ops after it compute in that
type (as OpenVINO's conversion retypes a Parameter), so a retyped model is checked against numpy in
that type; a type the model's ops cannot take, or an entry that is not understood, is an InputError.
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
WEIGHT = np.random.default_rng(2).standard_normal((2, 3, 3, 3)).astype(np.float32)


def _relu() -> onnx.ModelProto:
    return make_model([helper.make_node("Relu", ["x"], ["y"])],
                      [("x", FLOAT, ["batch", 3, 8, 8])], [("y", FLOAT, ["batch", 3, 8, 8])])


def _add() -> onnx.ModelProto:
    return make_model([helper.make_node("Add", ["a", "b"], ["s"])],
                      [("a", FLOAT, ["N", 3]), ("b", FLOAT, ["N", 3])], [("s", FLOAT, ["N", 3])])


def _conv() -> onnx.ModelProto:
    return make_model([helper.make_node("Conv", ["img", "w"], ["y"], pads=[1, 1, 1, 1])],
                      [("img", FLOAT, [1, 3, 8, 8])], [("y", FLOAT, [1, 2, 8, 8])],
                      [numpy_helper.from_array(WEIGHT, "w")])


def _inputs(model: ov.Model) -> list[tuple[str, str, str]]:
    return [(p.get_any_name(), str(p.get_partial_shape()), p.get_element_type().get_type_name())
            for p in model.inputs]


@pytest.mark.parametrize(("given", "shape", "element"), [
    ([("x", [1, 3, 8, 8], ov.Type.f32)], "[1,3,8,8]", "f32"),
    (("x", [2, 3, 8, 8], ov.Type.f32), "[2,3,8,8]", "f32"),
    ([("x", [2, 3, 8, 8])], "[2,3,8,8]", "f32"),
    ([([4, 3, 8, 8], ov.Type.f32)], "[4,3,8,8]", "f32"),
    ([(ov.Type.f32, [4, 3, 8, 8])], "[4,3,8,8]", "f32"),
    ([1, 3, 8, 8], "[1,3,8,8]", "f32"),
    ([[1, 3, 8, 8]], "[1,3,8,8]", "f32"),
    ((2, 3, 8, 8), "[2,3,8,8]", "f32"),
    (ov.PartialShape([-1, 3, 8, 8]), "[?,3,8,8]", "f32"),
    (ov.Shape([4, 3, 8, 8]), "[4,3,8,8]", "f32"),
    ([ov.Dimension(1, 4), 3, 8, 8], "[1..4,3,8,8]", "f32"),
    (["x"], "[?,3,8,8]", "f32"),
    ("x", "[?,3,8,8]", "f32"),
    ({"x": [5, 3, 8, 8]}, "[5,3,8,8]", "f32"),
    ({"x": ([5, 3, 8, 8], ov.Type.f32)}, "[5,3,8,8]", "f32"),
    ({"x": ov.Type.f16}, "[?,3,8,8]", "f16"),
    ({"x": np.float16}, "[?,3,8,8]", "f16"),
    ([("x", ov.Type.f16)], "[?,3,8,8]", "f16"),
    (ov.Type.f16, "[?,3,8,8]", "f16"),
    ([np.float16], "[?,3,8,8]", "f16"),
    ([("x", [2, 3, 8, 8], np.float16)], "[2,3,8,8]", "f16"),
    ([], "[?,3,8,8]", "f32"),
    ("2,3,8,8", "[2,3,8,8]", "f32"),  # text that names no input reads as a shape, as reshape reads it
])
def test_input_forms_set_the_shape_and_type(given: object, shape: str, element: str) -> None:
    assert _inputs(ov.convert_model(_relu(), input=given)) == [("x", shape, element)]


def test_a_retyped_input_runs_in_that_type(core: ov.Core) -> None:
    model = ov.convert_model(_relu(), input=[("x", [2, 3, 8, 8], ov.Type.f16)])
    assert model.output().get_element_type() == ov.Type.f16
    x = np.linspace(-3, 3, 2 * 3 * 64).astype(np.float16).reshape(2, 3, 8, 8)
    got = core.compile_model(model, "CPU")(x)[0]
    assert got.dtype == np.float16
    np.testing.assert_array_equal(got, np.maximum(x, 0))


@pytest.mark.parametrize("given", [
    [[2, 3], [2, 3]], [("b", [2, 3]), ("a", [2, 3])], {"b": [2, 3], "a": [2, 3]},
    [([2, 3], ov.Type.f32), ([2, 3], ov.Type.f32)]])
def test_several_inputs_keep_the_models_order(core: ov.Core, given: object) -> None:
    model = ov.convert_model(_add(), input=given)
    assert _inputs(model) == [("a", "[2,3]", "f32"), ("b", "[2,3]", "f32")]
    feeds = {"a": np.ones((2, 3), np.float32), "b": np.full((2, 3), 2, np.float32)}
    np.testing.assert_array_equal(core.compile_model(model, "CPU")(feeds)[0], ort_run(_add(), feeds)[0])


def test_one_named_input_of_two_changes_that_one() -> None:
    model = ov.convert_model(_add(), input=[("b", [4, 3])])
    assert _inputs(model) == [("a", "[?,3]", "f32"), ("b", "[4,3]", "f32")]


@pytest.mark.parametrize(("given", "message"), [
    ([("nope", [1, 3, 8, 8])], r"no input named 'nope'; inputs: x"),
    ([("x", "y")], r"more than one name"),
    ([("x", "f16")], r"more than one name \(a type is an ov.Type or a numpy type, not text\)"),
    ([("x", [1, 3, 8, 8], [1, 3, 8, 8])], r"more than one shape"),
    ({"x": ("y", [1, 3, 8, 8])}, r"names input 'y' in its value"),
    ([("x", [1, 3, 8, 8]), [1, 3, 8, 8]], r"mixes named and unnamed entries"),
    ([[1, 3, 8, 8], [1, 3, 8, 8]], r"gives 2 entries but the model has 1 input"),
    (3.5, r"input entry 3.5 \(float\) is not understood; accepted: a name, a shape"),
    ([("x", object())], r"is not a name, a shape or a type"),
    ([("x", ov.Type.dynamic)], r"Type.dynamic"),
])
def test_entries_that_are_not_understood_are_named(given: object, message: str) -> None:
    with pytest.raises(InputError, match=message):
        ov.convert_model(_relu(), input=given)


def test_a_type_or_shape_the_model_cannot_take_is_refused() -> None:
    with pytest.raises(InputError, match=r"input 'img' of type f16 \(the model declares f32\): .*Conv"):
        ov.convert_model(_conv(), input=[("img", ov.Type.f16)])
    with pytest.raises(InputError, match=r"input 'img' \[1,4,8,8\].*takes 3 input channels"):
        ov.convert_model(_conv(), input=("img", [1, 4, 8, 8], ov.Type.f32))
