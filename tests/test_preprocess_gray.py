"""ov.preprocess: ``convert_color(ColorFormat.GRAY)``, ``set_memory_type`` in the built input's rt_info,
``openvino.utils.decorators.custom_preprocess_function``, and OpenVINO's words in two refusals.

Each GRAY pipeline is configured the same way on inferplex and on OpenVINO (same model, same calls):
the built models take the same input shapes and give the same numbers (OpenVINO's CPU at f32).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import inferplex
from inferplex.errors import InputError, ModelError
from inferplex.preprocess import PrePostProcessor
from inferplex.utils.decorators import custom_preprocess_function

openvino = pytest.importorskip("openvino")


def _gray_model(lib: Any, source: str, tensor_layout: str | None, element: str, model_shape: list[int],
                model_layout: str) -> Any:
    """A Relu model of ``model_shape`` (f32) whose input converts ``source`` data to GRAY, then to f32."""
    ops = lib.opset13
    parameter = ops.parameter(model_shape, np.float32, name="x")
    model = lib.Model([ops.relu(parameter)], [parameter])
    ppp = lib.preprocess.PrePostProcessor(model)
    tensor = ppp.input().tensor().set_color_format(getattr(lib.preprocess.ColorFormat, source))
    tensor.set_element_type(getattr(lib.Type, element))
    if tensor_layout is not None:
        tensor.set_layout(lib.Layout(tensor_layout))
    ppp.input().model().set_layout(lib.Layout(model_layout))
    ppp.input().preprocess().convert_color(lib.preprocess.ColorFormat.GRAY).convert_element_type(lib.Type.f32)
    return ppp.build()


@pytest.mark.parametrize(("source", "tensor_layout", "element", "model_shape", "model_layout"), [
    ("RGB", "NHWC", "u8", [1, 1, 4, 5], "NCHW"),
    ("BGR", "NHWC", "f32", [1, 4, 5, 1], "NHWC"),
    ("RGB", "NCHW", "f32", [1, 1, 4, 5], "NCHW"),
    ("BGR", "NCHW", "u8", [1, 1, 4, 5], "NCHW"),
    ("NV12_SINGLE_PLANE", None, "u8", [1, 1, 4, 6], "NCHW"),
    ("I420_SINGLE_PLANE", None, "f32", [1, 4, 6, 1], "NHWC"),
])
def test_gray_matches_openvino(source: str, tensor_layout: str | None, element: str, model_shape: list[int],
                               model_layout: str) -> None:
    ours = _gray_model(inferplex, source, tensor_layout, element, model_shape, model_layout)
    theirs = _gray_model(openvino, source, tensor_layout, element, model_shape, model_layout)
    shape = theirs.input().get_partial_shape().to_shape()
    assert list(ours.input().get_partial_shape().to_shape()) == list(shape)
    values = np.random.default_rng(7).integers(0, 256, tuple(shape))
    x = values.astype(np.uint8) if element == "u8" else values.astype(np.float32) + np.float32(0.37)
    got = np.asarray(inferplex.Core().compile_model(ours, "CPU")(x)[0])
    want = openvino.Core().compile_model(theirs, "CPU", {"INFERENCE_PRECISION_HINT": "f32"})(x)[0]
    if element == "u8":  # rounded to whole levels, half to even, on both
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-4)


def test_gray_weighs_rgb_as_openvino_documents() -> None:
    """0.299 R + 0.587 G + 0.114 B, and the channels taken in reverse for BGR."""
    pixels = np.array([[[[10.0, 20.0, 30.0], [255.0, 0.0, 0.0]]]], np.float32)  # [1, 1, 2, 3] NHWC
    for source, order in (("RGB", [0, 1, 2]), ("BGR", [2, 1, 0])):
        model = _gray_model(inferplex, source, "NHWC", "f32", [1, 1, 2, 1], "NHWC")
        got = np.asarray(inferplex.Core().compile_model(model, "CPU")(pixels)[0]).reshape(-1)
        rgb = pixels[..., order].reshape(-1, 3).astype(np.float64)
        np.testing.assert_allclose(got, rgb @ [0.299, 0.587, 0.114], rtol=1e-6)


@pytest.mark.parametrize("source", ["NV12_TWO_PLANES", "I420_THREE_PLANES"])
def test_gray_of_several_planes_is_the_y_plane(source: str) -> None:
    model = _gray_model(inferplex, source, None, "u8", [1, 1, 4, 6], "NCHW")
    names = [port.any_name for port in model.inputs]
    assert names[0] == "x/y" and len(names) == (2 if source.startswith("NV12") else 3)
    rng = np.random.default_rng(3)
    feeds = [rng.integers(0, 256, tuple(port.get_partial_shape().to_shape())).astype(np.uint8)
             for port in model.inputs]
    got = np.asarray(inferplex.Core().compile_model(model, "CPU")(feeds)[0])
    np.testing.assert_array_equal(got.reshape(-1), feeds[0].reshape(-1).astype(np.float32))


@pytest.mark.parametrize(("source", "element", "match"), [
    ("RGBX", "u8", r"convert_color: RGBX is not convertible to GRAY; accepted: .*RGB, BGR and the NV12"),
    ("RGB", "i32", r"convert_color to GRAY takes u8 or float .* got i32"),
])
def test_gray_refusals_name_what_is_accepted(source: str, element: str, match: str) -> None:
    with pytest.raises(ModelError, match=match):
        _gray_model(inferplex, source, "NHWC", element, [1, 1, 4, 5], "NCHW")


def test_set_memory_type_is_in_the_built_inputs_rt_info() -> None:
    built = {}
    for lib in (inferplex, openvino):
        ops = lib.opset13
        parameter = ops.parameter([1, 3, 4, 4], np.float32, name="x")
        ppp = lib.preprocess.PrePostProcessor(lib.Model([ops.relu(parameter)], [parameter]))
        ppp.input().tensor().set_memory_type("GPU_SURFACE")
        built[lib.__name__] = ppp.build()
    keys = {name: [key for key in model.input().rt_info if "memory_type" in key]
            for name, model in built.items()}
    assert keys["inferplex"] == keys["openvino"] == ["memory_type_0"]
    assert str(built["inferplex"].input().rt_info["memory_type_0"]) == "GPU_SURFACE"
    assert dict(built["inferplex"].input().rt_info) == dict(built["inferplex"].input().get_rt_info())


def test_custom_preprocess_function_hands_the_custom_step_its_nodes_output() -> None:
    ops = inferplex.opset13

    @custom_preprocess_function
    def doubled_abs(output: Any) -> Any:
        return ops.multiply(ops.abs(output), ops.constant(np.float32(2.0)))  # a node, not an output

    assert doubled_abs.__name__ == "doubled_abs"
    parameter = ops.parameter([2, 3], np.float32, name="x")
    ppp = PrePostProcessor(inferplex.Model([ops.relu(parameter)], [parameter]))
    ppp.input().preprocess().custom(doubled_abs)
    x = np.array([[-1.5, 2.0, -0.25], [0.0, -3.0, 4.0]], np.float32)
    got = np.asarray(inferplex.Core().compile_model(ppp.build(), "CPU")(x)[0])
    np.testing.assert_array_equal(got, np.abs(x) * 2)


@pytest.mark.parametrize("text", ["1-2-3D", "5-5"])
def test_an_invalid_layout_name_is_refused_in_openvinos_words(text: str) -> None:
    with pytest.raises(InputError, match=r"Layout name is invalid: layout .* English letters, digits"):
        inferplex.Layout(text)


def test_gray_of_a_tensor_of_unknown_rank_is_refused() -> None:
    ops = inferplex.opset13
    parameter = ops.parameter(inferplex.PartialShape.dynamic(), np.float32, name="x")
    ppp = PrePostProcessor(inferplex.Model([ops.relu(parameter)], [parameter]))
    ppp.input().tensor().set_color_format(inferplex.preprocess.ColorFormat.RGB).set_layout(inferplex.Layout("NHWC"))
    ppp.input().preprocess().convert_color(inferplex.preprocess.ColorFormat.GRAY)
    with pytest.raises(ModelError, match="convert_color to GRAY needs the tensor's rank"):
        ppp.build()
