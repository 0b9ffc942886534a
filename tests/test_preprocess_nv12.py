"""ov.preprocess: NV12 and I420 inputs, ``str(ppp)`` and OpenVINO's keyword names.

Each pipeline is configured the same way on inferplex and on OpenVINO (same ONNX model, same calls);
the built models must have the same inputs (names, shapes, element types, layouts) and give the same
numbers on OpenVINO's CPU (f32 inference), and ``str(ppp)`` must print what OpenVINO prints.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import inferplex
import inferplex as ov
from inferplex.errors import InputError, InputTypeError, ModelError
from inferplex.preprocess import ColorFormat, PrePostProcessor, ResizeAlgorithm

from conftest import make_model

openvino = pytest.importorskip("openvino")

FLOAT = TensorProto.FLOAT
SUB_NAMES = {"NV12_TWO_PLANES": ["y", "uv"], "I420_THREE_PLANES": ["y", "u", "v"]}
FORMATS = ["NV12_SINGLE_PLANE", "NV12_TWO_PLANES", "I420_SINGLE_PLANE", "I420_THREE_PLANES"]

Configure = Callable[[Any, Any], Any]
"""``configure(lib, ppp)``: the same calls on either library (``lib`` is inferplex or openvino)."""


def _model(height: int = 8, width: int = 8, names: str = "x") -> onnx.ModelProto:
    """Inputs ``names`` f32 [1, 3, H, W] (NCHW, no layout set), multiplied by per-channel weights (so
    the channel order shows) and summed: y [1, 3, H, W]."""
    weight = onnx.numpy_helper.from_array(np.array([1.0, 0.5, 2.0], np.float32).reshape(1, 3, 1, 1), "w")
    nodes = [helper.make_node("Mul", [names[0], "w"], ["m0"])]
    for index, name in enumerate(names[1:], 1):
        nodes.append(helper.make_node("Add", [f"m{index - 1}", name], [f"m{index}"]))
    nodes.append(helper.make_node("Identity", [f"m{len(names) - 1}"], ["y"]))
    return make_model(nodes, [(n, FLOAT, [1, 3, height, width]) for n in names],
                      [("y", FLOAT, [1, 3, height, width])], [weight], opset=13)


def _both(configure: Configure, proto: onnx.ModelProto | None = None) -> dict[str, tuple[Any, str]]:
    """{"inferplex": (built model, str(ppp)), "openvino": (...)} for the same ``configure``."""
    source = (proto if proto is not None else _model()).SerializeToString()
    built = {}
    for lib in (inferplex, openvino):
        ppp = lib.preprocess.PrePostProcessor(lib.Core().read_model(source))
        configure(lib, ppp)
        text = str(ppp)
        built[lib.__name__] = (ppp.build(), text)
    return built


def _inputs(model: Any, lib: Any) -> list[tuple[str, str, str, str]]:
    return [(", ".join(sorted(port.get_names())), str(port.get_partial_shape()),
             port.get_element_type().get_type_name(), str(lib.layout_helpers.get_layout(port)))
            for port in model.inputs]


def _feeds(model: Any, element: str, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    dtype = np.uint8 if element == "u8" else np.float32
    return [rng.integers(0, 256, tuple(port.get_shape())).astype(dtype) for port in model.inputs]


def _run(built: dict[str, tuple[Any, str]], feeds: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    ours = ov.Core().compile_model(built["inferplex"][0], "CPU")(feeds)[0]
    theirs = openvino.Core().compile_model(built["openvino"][0], "CPU", {"INFERENCE_PRECISION_HINT": "f32"})(
        feeds)[0]
    return ours, theirs


def _yuv(fmt: str, element: str, cast_first: bool, target: str = "BGR") -> Configure:
    def configure(lib: Any, ppp: Any) -> None:
        formats = lib.preprocess.ColorFormat
        ppp.input().tensor().set_element_type(getattr(lib.Type, element)) \
            .set_color_format(getattr(formats, fmt), SUB_NAMES.get(fmt, []))
        if cast_first:
            ppp.input().preprocess().convert_element_type(lib.Type.f32)
        ppp.input().preprocess().convert_color(getattr(formats, target))
        if not cast_first:
            ppp.input().preprocess().convert_element_type(lib.Type.f32)
        ppp.input().model().set_layout(lib.Layout("NCHW"))
    return configure


# --- NV12 and I420 inputs: OpenVINO's inputs and numbers -----------------------------------------------


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("element", ["u8", "f32"])
@pytest.mark.parametrize("cast_first", [True, False], ids=["convert-then-color", "color-then-convert"])
@pytest.mark.parametrize("target", ["RGB", "BGR"])
def test_yuv_inputs_match_openvino(fmt: str, element: str, cast_first: bool, target: str) -> None:
    built = _both(_yuv(fmt, element, cast_first, target))
    ours_model, theirs_model = built["inferplex"][0], built["openvino"][0]
    assert _inputs(ours_model, inferplex) == _inputs(theirs_model, openvino)
    ours, theirs = _run(built, _feeds(theirs_model, element))
    assert ours.shape == theirs.shape == (1, 3, 8, 8)
    if element == "u8" and not cast_first:  # converted as u8: OpenVINO's rounded levels
        assert np.abs(ours - theirs).max() <= 1.0 and np.mean(ours == theirs) > 0.99
    else:
        np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-3)


def test_yuv_inputs_have_openvinos_names_shapes_types_and_layouts() -> None:
    cases = {
        "NV12_SINGLE_PLANE": [("x", "[1,12,8,1]", "u8", "[N,H,W,C]")],
        "NV12_TWO_PLANES": [("x/y", "[1,8,8,1]", "u8", "[N,H,W,C]"),
                            ("x/uv", "[1,4,4,2]", "u8", "[N,H,W,C]")],
        "I420_SINGLE_PLANE": [("x", "[1,12,8,1]", "u8", "[N,H,W,C]")],
        "I420_THREE_PLANES": [("x/y", "[1,8,8,1]", "u8", "[N,H,W,C]"),
                              ("x/u", "[1,4,4,1]", "u8", "[N,H,W,C]"),
                              ("x/v", "[1,4,4,1]", "u8", "[N,H,W,C]")],
    }
    for fmt, want in cases.items():
        model = _both(_yuv(fmt, "u8", True))["inferplex"][0]
        assert _inputs(model, inferplex) == want, fmt
        assert [port.any_name for port in model.inputs] == [name for name, *_ in want]


def test_planes_without_sub_names_are_named_after_the_plane() -> None:
    """OpenVINO leaves such planes unnamed; an ONNX input needs a name: ``<input>/y``, ``/uv``."""
    def configure(lib: Any, ppp: Any) -> None:
        ppp.input().tensor().set_color_format(lib.preprocess.ColorFormat.NV12_TWO_PLANES)
        ppp.input().preprocess().convert_color(lib.preprocess.ColorFormat.RGB)
        ppp.input().model().set_layout(lib.Layout("NCHW"))
    built = _both(configure)
    ours, theirs = built["inferplex"][0], built["openvino"][0]
    assert [p.any_name for p in ours.inputs] == ["x/y", "x/uv"]
    assert [str(p.get_partial_shape()) for p in ours.inputs] == \
        [str(p.get_partial_shape()) for p in theirs.inputs] == ["[1,8,8,1]", "[1,4,4,2]"]
    a, b = _run(built, _feeds(theirs, "f32"))
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-3)
    with pytest.raises(RuntimeError):  # OpenVINO's planes have no names
        theirs.inputs[0].get_any_name()


def test_the_nv12_sample_pipeline_with_resize_mean_and_scale() -> None:
    """hello_nv12_input_classification: u8 NV12 of a given size, to BGR f32, resized to the model."""
    def configure(lib: Any, ppp: Any) -> None:
        pre = lib.preprocess
        ppp.input().tensor().set_element_type(lib.Type.u8) \
            .set_color_format(pre.ColorFormat.NV12_SINGLE_PLANE).set_spatial_static_shape(20, 30)
        ppp.input().preprocess().convert_element_type(lib.Type.f32).convert_color(pre.ColorFormat.BGR) \
            .resize(pre.ResizeAlgorithm.RESIZE_LINEAR).mean([100.0, 110.0, 120.0]).scale(58.0)
        ppp.input().model().set_layout(lib.Layout("NCHW"))
    built = _both(configure, _model(10, 12))
    assert _inputs(built["inferplex"][0], inferplex) == [("x", "[1,30,30,1]", "u8", "[N,H,W,C]")]
    assert built["inferplex"][1] == built["openvino"][1]
    ours, theirs = _run(built, _feeds(built["openvino"][0], "u8", seed=3))
    np.testing.assert_allclose(ours, theirs, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("fmt", FORMATS)
def test_dynamic_frame_sizes_resized_to_the_model(fmt: str) -> None:
    def configure(lib: Any, ppp: Any) -> None:
        pre = lib.preprocess
        ppp.input().tensor().set_element_type(lib.Type.u8) \
            .set_color_format(getattr(pre.ColorFormat, fmt), SUB_NAMES.get(fmt, [])) \
            .set_spatial_dynamic_shape()
        ppp.input().preprocess().convert_element_type(lib.Type.f32).convert_color(pre.ColorFormat.RGB) \
            .resize(pre.ResizeAlgorithm.RESIZE_LINEAR)
        ppp.input().model().set_layout(lib.Layout("NCHW"))
    built = _both(configure)
    assert _inputs(built["inferplex"][0], inferplex) == _inputs(built["openvino"][0], openvino)
    assert all("?" in str(p.get_partial_shape()) for p in built["inferplex"][0].inputs)
    rng = np.random.default_rng(4)
    height, width = 12, 16
    if fmt.endswith("SINGLE_PLANE"):
        shapes = [(1, height * 3 // 2, width, 1)]
    elif fmt.startswith("NV12"):
        shapes = [(1, height, width, 1), (1, height // 2, width // 2, 2)]
    else:
        shapes = [(1, height, width, 1)] + [(1, height // 2, width // 2, 1)] * 2
    feeds = [rng.integers(0, 256, shape).astype(np.uint8) for shape in shapes]
    ours, theirs = _run(built, feeds)
    assert ours.shape == (1, 3, 8, 8)
    np.testing.assert_allclose(ours, theirs, rtol=1e-4, atol=1e-3)


def test_planes_take_the_inputs_place_among_several_inputs() -> None:
    def configure(lib: Any, ppp: Any) -> None:
        formats = lib.preprocess.ColorFormat
        ppp.input("x").tensor().set_element_type(lib.Type.u8).set_color_format(formats.I420_THREE_PLANES,
                                                                                 ["y", "u", "v"])
        ppp.input("x").preprocess().convert_element_type(lib.Type.f32).convert_color(formats.RGB)
        ppp.input("x").model().set_layout(lib.Layout("NCHW"))
        ppp.input("b").tensor().set_element_type(lib.Type.u8).set_color_format(formats.NV12_SINGLE_PLANE)
        ppp.input("b").preprocess().convert_color(formats.BGR)
        ppp.input("b").model().set_layout(lib.Layout("NCHW"))
    built = _both(configure, _model(names="axb"))
    ours, theirs = built["inferplex"][0], built["openvino"][0]
    assert [p.any_name for p in ours.inputs] == ["a", "x/y", "x/u", "x/v", "b"]
    assert _inputs(ours, inferplex) == _inputs(theirs, openvino)
    rng = np.random.default_rng(2)
    feeds = [rng.standard_normal((1, 3, 8, 8)).astype(np.float32)] + [
        rng.integers(0, 256, tuple(p.get_shape())).astype(np.uint8) for p in theirs.inputs[1:]]
    a, b = _run(built, feeds)
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-2)


def test_u8_conversion_rounds_and_clips_as_openvino() -> None:
    """Extreme Y, U and V values (clipped at 0 and 255) give OpenVINO's levels exactly."""
    built = _both(_yuv("NV12_TWO_PLANES", "u8", False))
    y = np.tile(np.array([0, 16, 128, 235, 255, 1, 254, 100], np.uint8), (1, 8, 1)).reshape(1, 8, 8, 1)
    uv = np.tile(np.array([[0, 255], [255, 0], [128, 128], [16, 240]], np.uint8), (1, 4, 1, 1))
    ours, theirs = _run(built, [y, uv.reshape(1, 4, 4, 2)])
    assert ours.min() == 0.0 and ours.max() == 2 * 255.0  # clipped (the model doubles channel 2)
    np.testing.assert_array_equal(ours, theirs)


def test_a_model_of_an_older_opset_is_raised_for_the_conversion() -> None:
    """The conversion's Clip and Round need ONNX opset 11; an opset 9 model is converted first."""
    proto = make_model([helper.make_node("Relu", ["x"], ["y"])], [("x", FLOAT, [1, 3, 8, 8])],
                       [("y", FLOAT, [1, 3, 8, 8])], opset=9)
    built = _both(_yuv("I420_SINGLE_PLANE", "u8", False), proto)
    assert built["inferplex"][0].ir.graph.opset_imports[""] == 11
    ours, theirs = _run(built, _feeds(built["openvino"][0], "u8", seed=8))
    assert np.abs(ours - theirs).max() <= 1.0 and np.mean(ours == theirs) > 0.99


# --- str(ppp): OpenVINO's dump of the steps -------------------------------------------------------------


def _L(lib: Any, text: str) -> Any:
    return lib.Layout(text)


DUMPS: dict[str, Configure] = {
    "nothing set": lambda lib, p: p.input(),
    "element type": lambda lib, p: p.input().tensor().set_element_type(lib.Type.u8),
    "deployment guide": lambda lib, p: (
        p.input().tensor().set_element_type(lib.Type.u8).set_layout(_L(lib, "NHWC"))
        .set_shape([1, 16, 16, 3]),
        p.input().model().set_layout(_L(lib, "NCHW")),
        p.input().preprocess().convert_element_type(lib.Type.f32).reverse_channels()
        .resize(lib.preprocess.ResizeAlgorithm.RESIZE_CUBIC, 8, 8).mean([1.0, 2.0, 3.5]).scale([0.5, 2, 3])),
    "layouts": lambda lib, p: (p.input().tensor().set_layout(_L(lib, "NHWC")),
                               p.input().preprocess().convert_layout(_L(lib, "NCHW"))
                               .convert_layout([0, 1, 2, 3])),
    "crop": lambda lib, p: (p.input().tensor().set_shape([1, 3, 10, 10]),
                            p.input().preprocess().crop([0, 0, 1, 1], [1, 3, 9, 9])),
    "pad": lambda lib, p: (p.input().tensor().set_shape([1, 3, 6, 6]), p.input().preprocess().pad(
        [0, 0, 1, 1], [0, 0, 1, 1], 0.5, lib.preprocess.PaddingMode.CONSTANT)),
    "pad reflect": lambda lib, p: (p.input().tensor().set_shape([1, 3, 6, 6]), p.input().preprocess().pad(
        [0, 0, 1, 1], [0, 0, 1, 1], [0.0], lib.preprocess.PaddingMode.REFLECT)),
    "bgrx": lambda lib, p: (p.input().tensor().set_color_format(lib.preprocess.ColorFormat.BGRX),
                            p.input().preprocess().convert_color(lib.preprocess.ColorFormat.RGB),
                            p.input().model().set_layout(_L(lib, "NCHW"))),
    "dynamic resize": lambda lib, p: (
        p.input().tensor().set_element_type(lib.Type.u8).set_layout(_L(lib, "NHWC"))
        .set_spatial_dynamic_shape(),
        p.input().model().set_layout(_L(lib, "NCHW")),
        p.input().preprocess().resize(lib.preprocess.ResizeAlgorithm.RESIZE_LINEAR)),
    "memory type": lambda lib, p: p.input().tensor().set_memory_type("GPU_SURFACE"),
    "output": lambda lib, p: (p.output().tensor().set_element_type(lib.Type.f16).set_layout(_L(lib, "NHWC")),
                              p.output().model().set_layout(_L(lib, "NCHW")),
                              p.output().postprocess().convert_element_type(lib.Type.f16)),
    "output dims": lambda lib, p: (p.output().postprocess().convert_layout([0, 2, 3, 1]),
                                   p.output().tensor().set_element_type(lib.Type.u8)),
    "output unknown layout": lambda lib, p: p.output().postprocess().convert_layout(_L(lib, "NCHW"))
    .convert_layout(_L(lib, "NHWC")),
    "nv12 two planes on a surface": lambda lib, p: (
        p.input().tensor().set_memory_type("GPU_SURFACE").set_element_type(lib.Type.u8)
        .set_color_format(lib.preprocess.ColorFormat.NV12_TWO_PLANES, ["y", "uv"]),
        p.input().preprocess().convert_element_type(lib.Type.f32)
        .convert_color(lib.preprocess.ColorFormat.BGR),
        p.input().model().set_layout(_L(lib, "NCHW"))),
    "i420 planes without names": lambda lib, p: (
        p.input().tensor().set_color_format(lib.preprocess.ColorFormat.I420_THREE_PLANES),
        p.input().preprocess().convert_color(lib.preprocess.ColorFormat.RGB),
        p.input().model().set_layout(_L(lib, "NCHW"))),
    "nv12 resized": lambda lib, p: (
        p.input().tensor().set_element_type(lib.Type.u8)
        .set_color_format(lib.preprocess.ColorFormat.NV12_SINGLE_PLANE).set_spatial_static_shape(16, 20),
        p.input().preprocess().convert_element_type(lib.Type.f32).convert_color(lib.preprocess.ColorFormat.RGB)
        .resize(lib.preprocess.ResizeAlgorithm.RESIZE_LINEAR),
        p.input().model().set_layout(_L(lib, "NCHW"))),
    "i420 dynamic with mean": lambda lib, p: (
        p.input().tensor().set_element_type(lib.Type.u8)
        .set_color_format(lib.preprocess.ColorFormat.I420_THREE_PLANES, ["a", "b", "c"])
        .set_spatial_dynamic_shape(),
        p.input().preprocess().convert_element_type(lib.Type.f32).convert_color(lib.preprocess.ColorFormat.RGB)
        .resize(lib.preprocess.ResizeAlgorithm.RESIZE_LINEAR).mean([1, 2, 3]),
        p.input().model().set_layout(_L(lib, "NCHW"))),
}


def _dumps(configure: Configure, proto: onnx.ModelProto | None = None) -> dict[str, str]:
    source = (proto if proto is not None else _model()).SerializeToString()
    texts = {}
    for lib in (inferplex, openvino):
        ppp = lib.preprocess.PrePostProcessor(lib.Core().read_model(source))
        configure(lib, ppp)
        texts[lib.__name__] = str(ppp)
    return texts


@pytest.mark.parametrize("case", list(DUMPS))
def test_str_prints_openvinos_dump(case: str) -> None:
    texts = _dumps(DUMPS[case])
    assert texts["inferplex"] == texts["openvino"]
    assert texts["inferplex"] == "" if case == "nothing set" else texts["inferplex"].count("\n") >= 3


def test_str_of_several_inputs_and_outputs_and_of_nothing() -> None:
    def configure(lib: Any, ppp: Any) -> None:
        ppp.input("b").tensor().set_element_type(lib.Type.u8)
        ppp.input("x").tensor().set_element_type(lib.Type.f16)
        ppp.output().tensor().set_element_type(lib.Type.u8)
    texts = _dumps(configure, _model(names="xb"))
    assert texts["inferplex"] == texts["openvino"]
    assert texts["inferplex"].index('Input "x"') < texts["inferplex"].index('Input "b"') \
        < texts["inferplex"].index('Output "y"')
    assert str(PrePostProcessor(ov.Core().read_model(_model().SerializeToString()))) == ""


def test_the_dump_of_a_yuv_pipeline_reads_as_openvinos() -> None:
    ppp = PrePostProcessor(ov.Core().read_model(_model().SerializeToString()))
    _yuv("NV12_TWO_PLANES", "u8", True)(inferplex, ppp)
    assert str(ppp) == (
        'Input "x" (color NV12 (multi-plane)):\n'
        "    2 user's tensors expected for each plane:\n"
        "       0: x/y [1,8,8,1], [N,H,W,C], u8\n"
        "       1: x/uv [1,4,4,2], [N,H,W,C], u8\n"
        "    Model's expected tensor: [1,3,8,8], [N,C,H,W], f32\n"
        "    Pre-processing steps (2):\n"
        "      convert type (f32): ([1,8,8,1], [N,H,W,C], u8, NV12 (multi-plane)) -> "
        "([1,8,8,1], [N,H,W,C], f32, NV12 (multi-plane))\n"
        "      convert color (BGR): ([1,8,8,1], [N,H,W,C], f32, NV12 (multi-plane)) -> "
        "([1,8,8,3], [N,H,W,C], f32, BGR)\n"
        "    Implicit pre-processing steps (1):\n"
        "      convert layout [N,C,H,W]: ([1,8,8,3], [N,H,W,C], f32, BGR) -> "
        "([1,3,8,8], [N,C,H,W], f32, BGR)\n")
    print(ppp)  # print() gives the same text


def test_a_step_that_fails_ends_the_dump_with_the_error() -> None:
    def configure(lib: Any, ppp: Any) -> None:
        ppp.input().tensor().set_shape([1, 3, 10, 10])
        ppp.input().preprocess().mean([1, 2])
    texts = _dumps(configure)
    ours, theirs = (texts[k].splitlines() for k in ("inferplex", "openvino"))
    cut = theirs.index(next(line for line in theirs if line.startswith("Error occurred: ")))
    assert ours[:cut] == theirs[:cut]
    assert ours[cut].startswith("Error occurred: ") and "layout with C" in ours[cut]


# --- keyword names: every keyword OpenVINO's PrePostProcessor classes take ------------------------------


def _openvino_keywords() -> dict[tuple[str, str], set[str]]:
    """{(class, method): keyword names}, read from the signatures in OpenVINO's docstrings."""
    found: dict[tuple[str, str], set[str]] = {}
    pre = openvino.preprocess
    for cls in (pre.PrePostProcessor, pre.InputInfo, pre.OutputInfo, pre.InputTensorInfo,
                pre.OutputTensorInfo, pre.InputModelInfo, pre.OutputModelInfo, pre.PreProcessSteps,
                pre.PostProcessSteps):
        for name in dir(cls):
            if name.startswith("_") and name != "__init__":
                continue
            for line in (getattr(cls, name).__doc__ or "").splitlines():
                match = re.search(rf"\b{re.escape(name)}\(self: [^,)]+(.*)\) ->", line)
                if match:
                    params = re.findall(r"(?:^|, )(\w+): ", match.group(1))
                    found.setdefault((cls.__name__, name), set()).update(params)
    return found


def test_every_openvino_keyword_is_a_parameter_here() -> None:
    keywords = _openvino_keywords()
    assert keywords[("PrePostProcessor", "input")] == {"tensor_name", "input_index"}
    assert keywords[("PreProcessSteps", "resize")] == {"alg", "dst_height", "dst_width"}
    assert len(keywords) >= 25
    missing = []
    for (cls_name, method), names in keywords.items():
        ours = getattr(getattr(inferplex.preprocess, cls_name), method)
        params = inspect.signature(ours).parameters
        missing += [f"{cls_name}.{method}({n}=)" for n in sorted(names) if n not in params]
    assert not missing


def test_keyword_calls_build_as_openvinos() -> None:
    def configure(lib: Any, ppp: Any) -> None:
        pre = lib.preprocess
        tensor = ppp.input(tensor_name="x").tensor()
        tensor.set_element_type(type=lib.Type.u8).set_layout(layout=lib.Layout("NHWC"))
        tensor.set_spatial_static_shape(height=10, width=12)
        ppp.input(input_index=0).preprocess().convert_element_type(type=lib.Type.f32) \
            .resize(alg=pre.ResizeAlgorithm.RESIZE_LINEAR, dst_height=8, dst_width=8) \
            .mean(values=[1.0, 2.0, 3.0]).scale(value=2.0).mean(value=0.5).scale(values=[1.0, 2.0, 4.0]) \
            .convert_layout(dst_layout=lib.Layout("NCHW")).convert_layout(dims=[0, 1, 2, 3])
        ppp.input(tensor_name="x").model().set_layout(layout=lib.Layout("NCHW"))
        ppp.output(tensor_name="y").tensor().set_element_type(type=lib.Type.f32)
        ppp.output(output_index=0).postprocess().convert_layout(dims=[0, 2, 3, 1])
    built = _both(configure)
    assert built["inferplex"][1] == built["openvino"][1]
    frame = np.random.default_rng(6).integers(0, 256, (1, 10, 12, 3)).astype(np.uint8)
    ours, theirs = _run(built, [frame])
    assert ours.shape == (1, 8, 8, 3)
    np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-4)


def test_more_keyword_calls() -> None:
    model = ov.Core().read_model(_model().SerializeToString())
    ppp = PrePostProcessor(model=model)
    ppp.input().tensor().set_color_format(format=ColorFormat.I420_THREE_PLANES, sub_names=["y", "u", "v"]) \
        .set_shape([1, 8, 8, 1])  # the Y plane's
    ppp.input().preprocess().convert_color(dst_format=ColorFormat.RGB).custom(operation=lambda n: n) \
        .crop(begin=[0, 0, 0, 0], end=[1, 8, 8, 3]) \
        .pad(pads_begin=[0, 0, 0, 0], pads_end=[0, 0, 0, 0], value=0.0,
             mode=ov.preprocess.PaddingMode.CONSTANT)
    ppp.input().model().set_layout(layout="NCHW")
    ppp.output().tensor().set_layout(layout="NCHW")
    ppp.output().model().set_layout(layout="NCHW")
    built = ppp.build()
    assert [p.any_name for p in built.inputs] == ["x/y", "x/u", "x/v"]
    other = PrePostProcessor(ov.Core().read_model(_model().SerializeToString()))
    other.input().tensor().set_from(tensor=np.zeros((1, 3, 8, 8), np.float16)).set_shape(shape=[1, 3, 8, 8])
    other.input().tensor().set_memory_type(memory_type="GPU_SURFACE")
    assert other.build().input().element_type == ov.Type.f16


# --- what is refused, and the errors naming what is accepted ------------------------------------------


def _ppp(names: str = "x") -> PrePostProcessor:
    return PrePostProcessor(ov.Core().read_model(_model(names=names).SerializeToString()))


def test_sub_names_must_fit_the_format() -> None:
    tensor = _ppp().input().tensor()
    with pytest.raises(InputError, match=r"NV12_TWO_PLANES has 2 planes: give 2 sub_names, got \['y'\]"):
        tensor.set_color_format(ColorFormat.NV12_TWO_PLANES, ["y"])
    with pytest.raises(InputError, match=r"only for the multi-plane formats NV12_TWO_PLANES .*I420_THREE"):
        tensor.set_color_format(ColorFormat.NV12_SINGLE_PLANE, ["y"])
    with pytest.raises(InputError, match="must differ"):
        tensor.set_color_format(ColorFormat.I420_THREE_PLANES, ["y", "u", "u"])
    with pytest.raises(InputTypeError, match="list of strings"):
        tensor.set_color_format(ColorFormat.NV12_TWO_PLANES, "yuv")  # type: ignore[arg-type]


@pytest.mark.parametrize(("configure", "match"), [
    (lambda p: p.input().tensor().set_color_format(ColorFormat.NV12_TWO_PLANES),
     r"several planes, which the model cannot take as one input: add convert_color"),
    (lambda p: (p.input().tensor().set_color_format(ColorFormat.NV12_SINGLE_PLANE),
                p.input().preprocess().convert_color(ColorFormat.BGRX)),
     r"NV12_SINGLE_PLANE is not convertible to BGRX; accepted: .*NV12_TWO_PLANES.*I420_THREE_PLANES to RGB "
     r"or BGR"),
    (lambda p: (p.input().tensor().set_color_format(ColorFormat.I420_SINGLE_PLANE),
                p.input().preprocess().convert_color(ColorFormat.RGBX)),
     r"I420_SINGLE_PLANE is not convertible to RGBX"),
    (lambda p: (p.input().tensor().set_color_format(ColorFormat.NV12_TWO_PLANES),
                p.input().preprocess().mean(1.0).convert_color(ColorFormat.RGB)),
     r"several planes: before convert_color only convert_element_type"),
    (lambda p: (p.input().tensor().set_element_type(ov.Type.i32)
                .set_color_format(ColorFormat.NV12_SINGLE_PLANE),
                p.input().preprocess().convert_color(ColorFormat.RGB)), r"u8 or float .* got i32"),
    (lambda p: (p.input().tensor().set_layout("NCHW").set_color_format(ColorFormat.NV12_SINGLE_PLANE),
                p.input().preprocess().convert_color(ColorFormat.RGB)),
     r"takes an NHWC tensor of one channel"),
    (lambda p: (p.input().tensor().set_color_format(ColorFormat.NV12_SINGLE_PLANE)
                .set_spatial_static_shape(7, 8),
                p.input().preprocess().convert_color(ColorFormat.RGB).resize(ResizeAlgorithm.RESIZE_LINEAR),
                p.input().model().set_layout("NCHW")), r"even height"),
    (lambda p: (p.input().tensor().set_color_format(ColorFormat.NV12_SINGLE_PLANE),
                p.input().preprocess().convert_color(ColorFormat.RGB)), r"model takes \[1,3,8,8\]"),
])
def test_refused_yuv_pipelines_are_named_at_build(configure: Callable[[PrePostProcessor], Any],
                                                   match: str) -> None:
    ppp = _ppp()
    configure(ppp)
    with pytest.raises(ModelError, match=match):
        ppp.build()
    assert "Error occurred: " in str(ppp) or "model takes" in match


def test_keyword_mistakes_are_named() -> None:
    ppp = _ppp("xb")
    with pytest.raises(InputError,
                       match=r"one of a tensor name \(tensor_name=\) or an index \(input_index=\)"):
        ppp.input("x", input_index=0)
    with pytest.raises(InputError, match=r"output\(output_index=...\) takes an integer"):
        ppp.output(output_index="0")  # type: ignore[arg-type]
    with pytest.raises(InputError, match=r"input\(tensor_name=...\) takes a string"):
        ppp.input(tensor_name=0)  # type: ignore[arg-type]
    assert ppp.input(tensor_name="b") is ppp.input(1) and ppp.output(output_index=0) is ppp.output("y")
    steps = ppp.input("x").preprocess()
    with pytest.raises(InputError, match=r"mean takes value \(one number\) or values \(one per channel\)"):
        steps.mean(1.0, values=[1.0])
    with pytest.raises(InputError, match=r"scale takes value"):
        steps.scale()
    with pytest.raises(InputError, match="resize takes one ResizeAlgorithm, as alg"):
        steps.resize()
    with pytest.raises(InputError, match=r"convert_layout takes one of dst_layout .* or dims"):
        steps.convert_layout("NCHW", dims=[0, 1, 2, 3])
    assert steps.resize(algorithm=ResizeAlgorithm.RESIZE_NEAREST, dst_height=4, dst_width=4) is steps
    assert steps.steps[-1].args == (ResizeAlgorithm.RESIZE_NEAREST, 4, 4)
