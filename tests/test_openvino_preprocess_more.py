"""PrePostProcessor: convert_layout to a named layout on a model of unset layout, custom steps, and
Pillow's resampling (``RESIZE_BILINEAR_PILLOW``, ``RESIZE_BICUBIC_PILLOW``).

References: the plain model under ONNX Runtime on numpy-transformed inputs; for Pillow's modes, a
numpy version of Pillow's separable resampling (a triangle or a = -0.5 cubic filter, widened by
the downscaling factor, weights renormalised inside the image).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import inferplex as ov
from inferplex import opset8
from inferplex.errors import InputError, ModelError
from inferplex.preprocess import PrePostProcessor, ResizeAlgorithm

from conftest import make_model, ort_run

FLOAT = TensorProto.FLOAT
WEIGHT = np.random.default_rng(5).standard_normal((2, 3, 3, 3)).astype(np.float32)


def _conv(opset: int = 13, height: int = 8, width: int = 8) -> onnx.ModelProto:
    """x f32 [1,3,H,W] (NCHW, no layout set) -> Conv 3x3 pad 1 -> Relu -> y [1,2,H,W]."""
    return make_model(
        [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
         helper.make_node("Relu", ["c"], ["y"])],
        [("x", FLOAT, [1, 3, height, width])], [("y", FLOAT, [1, 2, height, width])],
        [numpy_helper.from_array(WEIGHT, "w")], opset=opset)


def _image(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _built(core: ov.Core, configure: Callable[[PrePostProcessor], Any],
           proto: onnx.ModelProto | None = None) -> ov.Model:
    model = core.read_model(proto if proto is not None else _conv())
    ppp = PrePostProcessor(model)
    configure(ppp)
    return ppp.build()


def _run(core: ov.Core, model: ov.Model, x: np.ndarray, device: str = "CPU") -> np.ndarray:
    return core.compile_model(model, device)(x)[0]


# --- convert_layout with a destination layout and no model layout ---------------------------------


def test_convert_layout_names_the_model_layout_when_it_is_not_set(core: ov.Core) -> None:
    def configure(ppp: PrePostProcessor) -> None:
        ppp.input().tensor().set_layout(ov.Layout("NHWC")).set_shape([1, 8, 8, 3])
        ppp.input().preprocess().convert_layout(ov.Layout("NCHW"))
    model = _built(core, configure)
    assert str(model.input().get_partial_shape()) == "[1,8,8,3]"
    assert ov.layout_helpers.get_layout(model.input()) == ov.Layout("NHWC")
    x = _image(1, 3, 8, 8)
    want = ort_run(_conv(), {"x": x})[0]
    np.testing.assert_allclose(_run(core, model, x.transpose(0, 2, 3, 1)), want, rtol=1e-5, atol=1e-5)


def test_convert_layout_then_per_channel_mean_and_no_tensor_shape(core: ov.Core) -> None:
    mean = np.array([0.1, -0.2, 0.3], np.float32)

    def configure(ppp: PrePostProcessor) -> None:
        ppp.input().tensor().set_layout("NHWC")
        ppp.input().preprocess().convert_layout("NCHW").mean(mean.tolist())
    model = _built(core, configure)
    assert str(model.input().get_partial_shape()) == "[1,8,8,3]"  # derived back from the model's
    x = _image(1, 3, 8, 8, seed=1)
    want = ort_run(_conv(), {"x": x - mean.reshape(1, 3, 1, 1)})[0]
    np.testing.assert_allclose(_run(core, model, x.transpose(0, 2, 3, 1)), want, rtol=1e-5, atol=1e-5)


def test_output_convert_layout_with_no_model_layout_names_the_output_layout(core: ov.Core) -> None:
    x = _image(1, 3, 8, 8, seed=2)
    want = ort_run(_conv(), {"x": x})[0]
    model = _built(core, lambda ppp: ppp.output().postprocess().convert_layout(ov.Layout("NHWC")))
    assert ov.layout_helpers.get_layout(model.output()) == ov.Layout("NHWC")
    np.testing.assert_allclose(_run(core, model, x), want, rtol=1e-5, atol=1e-5)  # no transpose

    def to_nchw(ppp: PrePostProcessor) -> None:
        ppp.output().tensor().set_layout(ov.Layout("NCHW"))
        ppp.output().postprocess().convert_layout(ov.Layout("NHWC"))
    model = _built(core, to_nchw)  # the output, read as NHWC, transposed to NCHW
    np.testing.assert_allclose(_run(core, model, x), want.transpose(0, 3, 1, 2), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("make", [np.asarray, ov.Tensor], ids=["array", "tensor"])
def test_set_from_takes_the_type_and_shape_of_a_tensor(core: ov.Core, make: Any) -> None:
    frame = (np.arange(192).reshape(1, 8, 8, 3) % 11).astype(np.uint8)

    def configure(ppp: PrePostProcessor) -> None:
        ppp.input().tensor().set_from(make(frame)).set_layout("NHWC")
        ppp.input().model().set_layout("NCHW")
    model = _built(core, configure)
    assert model.input().get_element_type() == ov.Type.u8
    assert str(model.input().get_partial_shape()) == "[1,8,8,3]"
    want = ort_run(_conv(), {"x": frame.transpose(0, 3, 1, 2).astype(np.float32)})[0]
    np.testing.assert_allclose(_run(core, model, frame), want, rtol=1e-5, atol=1e-5)
    with pytest.raises(InputError, match=r"set_from takes an ov\.Tensor or a numpy array"):
        PrePostProcessor(core.read_model(_conv())).input().tensor().set_from(object())


def test_convert_layout_from_no_layout_is_still_refused(core: ov.Core) -> None:
    with pytest.raises(ModelError, match="cannot convert layout"):
        _built(core, lambda ppp: ppp.input().preprocess().convert_layout(ov.Layout("NCHW")))


# --- custom steps ----------------------------------------------------------------------------------


def test_custom_pre_and_post_steps_run_their_ops(core: ov.Core) -> None:
    seen: list[str] = []

    def absolute(node: Any) -> Any:
        seen.append(str(node.get_partial_shape()))
        return opset8.abs(node).output(0)

    def configure(ppp: PrePostProcessor) -> None:
        ppp.input().preprocess().custom(absolute)
        ppp.output().postprocess().custom(lambda node: opset8.negative(node).output(0))
    model = _built(core, configure)
    assert seen == ["[1,3,8,8]"]
    x = _image(1, 3, 8, 8, seed=3)
    want = -ort_run(_conv(), {"x": np.abs(x)})[0]
    np.testing.assert_allclose(_run(core, model, x), want, rtol=1e-5, atol=1e-5)


def test_custom_steps_with_constants_and_other_steps_keep_their_order(core: ov.Core) -> None:
    def configure(ppp: PrePostProcessor) -> None:
        ppp.input().tensor().set_element_type(ov.Type.u8)
        ppp.input().preprocess().convert_element_type(ov.Type.f32) \
            .custom(lambda node: opset8.multiply(node, opset8.constant(np.float32(0.5))).output(0)) \
            .mean(1.0).custom(lambda node: opset8.sqrt(opset8.abs(node)).output(0))
    model = _built(core, configure)
    assert model.input().get_element_type() == ov.Type.u8
    x = (np.arange(192).reshape(1, 3, 8, 8) % 9).astype(np.uint8)
    reference = np.sqrt(np.abs(x.astype(np.float32) * 0.5 - 1.0))
    want = ort_run(_conv(), {"x": reference})[0]
    np.testing.assert_allclose(_run(core, model, x), want, rtol=1e-5, atol=1e-5)


def test_a_custom_step_that_changes_the_type_gets_the_models_type_back(core: ov.Core) -> None:
    def configure(ppp: PrePostProcessor) -> None:
        ppp.input().tensor().set_element_type(ov.Type.u8)
        ppp.input().preprocess().custom(lambda node: opset8.convert(node, ov.Type.f16).output(0))
        ppp.output().postprocess().custom(lambda node: opset8.convert(node, ov.Type.f16).output(0))
    model = _built(core, configure)
    assert model.output().get_element_type() == ov.Type.f16
    x = (np.arange(192).reshape(1, 3, 8, 8) % 7).astype(np.uint8)
    want = ort_run(_conv(), {"x": x.astype(np.float32)})[0]
    got = _run(core, model, x)
    assert got.dtype == np.float16
    np.testing.assert_allclose(got, want, rtol=2e-3, atol=2e-3)


def test_custom_step_mistakes_are_named(core: ov.Core) -> None:
    ppp = PrePostProcessor(core.read_model(_conv()))
    with pytest.raises(InputError, match="custom takes a function"):
        ppp.input().preprocess().custom(3)  # type: ignore[arg-type]
    with pytest.raises(ModelError, match=r"returns an output.*it returned int"):
        _built(core, lambda p: p.input().preprocess().custom(lambda node: 1))
    outside = opset8.parameter([1, 3, 8, 8], np.float32, name="elsewhere")
    with pytest.raises(ModelError, match=r"depends on 'elsewhere'.*neither the step's input"):
        _built(core, lambda p: p.input().preprocess().custom(lambda node: opset8.add(node, outside)))
    old = core.read_model(_conv(opset=11))
    ppp = PrePostProcessor(old)
    ppp.input().preprocess().custom(lambda node: opset8.unsqueeze(opset8.squeeze(node, [0]), [0]).output(0))
    with pytest.raises(ModelError, match=r"Squeeze is built as in ONNX opset 17.*opset 11"):
        ppp.build()
    x = _image(1, 3, 8, 8, seed=6)  # the model was left as it was
    np.testing.assert_allclose(_run(core, old, x), ort_run(_conv(), {"x": x})[0], rtol=1e-5, atol=1e-5)


# --- Pillow's resampling ----------------------------------------------------------------------------


def _pillow_weights(kind: str, size: int, target: int) -> np.ndarray:
    """Pillow's resampling matrix along one axis (``ImagingResample``'s coefficients)."""
    def kernel(x: np.ndarray) -> np.ndarray:
        x = np.abs(x)
        if kind == "bilinear":
            return np.where(x < 1, 1 - x, 0.0)
        a = -0.5
        near = ((a + 2) * x - (a + 3)) * x * x + 1
        far = (((x - 5) * x + 8) * x - 4) * a
        return np.where(x < 1, near, np.where(x < 2, far, 0.0))
    scale = size / target
    stretch = max(scale, 1.0)
    support = (1.0 if kind == "bilinear" else 2.0) * stretch
    matrix = np.zeros((target, size))
    for i in range(target):
        centre = (i + 0.5) * scale
        low, high = max(int(centre - support + 0.5), 0), min(int(centre + support + 0.5), size)
        taps = kernel((np.arange(low, high) - centre + 0.5) / stretch)
        matrix[i, low:high] = taps / taps.sum()
    return matrix


def _pillow(x: np.ndarray, kind: str, height: int, width: int) -> np.ndarray:
    rows = _pillow_weights(kind, x.shape[2], height)
    cols = _pillow_weights(kind, x.shape[3], width)
    return np.einsum("ij,ncjk,lk->ncil", rows, x.astype(np.float64), cols)


def _identity(height: int, width: int, element: int = FLOAT) -> onnx.ModelProto:
    return make_model([helper.make_node("Identity", ["x"], ["y"])],
                      [("x", element, [1, 3, height, width])], [("y", element, [1, 3, height, width])],
                      opset=13)


PILLOW = [("bilinear", ResizeAlgorithm.RESIZE_BILINEAR_PILLOW),
          ("bicubic", ResizeAlgorithm.RESIZE_BICUBIC_PILLOW)]
SIZES = [((16, 16), (8, 8)), ((8, 8), (16, 16)), ((17, 13), (5, 9)), ((6, 20), (9, 7))]


@pytest.mark.parametrize(("kind", "algorithm"), PILLOW, ids=["bilinear", "bicubic"])
@pytest.mark.parametrize(("source", "target"), SIZES, ids=["down", "up", "mixed", "cross"])
@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
def test_pillow_resize_matches_pillows_resampling(core: ov.Core, kind: str, algorithm: ResizeAlgorithm,
                                                  source: tuple[int, int], target: tuple[int, int],
                                                  layout: str) -> None:
    def configure(ppp: PrePostProcessor) -> None:
        shape = [1, 3, *source] if layout == "NCHW" else [1, *source, 3]
        ppp.input().tensor().set_shape(shape).set_layout(ov.Layout(layout))
        ppp.input().model().set_layout(ov.Layout("NCHW"))
        ppp.input().preprocess().resize(algorithm)
    model = _built(core, configure, _identity(*target))
    x = _image(1, 3, *source, seed=sum(source))
    given = x if layout == "NCHW" else x.transpose(0, 2, 3, 1)
    np.testing.assert_allclose(_run(core, model, given), _pillow(x, kind, *target), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(("kind", "algorithm"), PILLOW, ids=["bilinear", "bicubic"])
def test_pillow_resize_of_u8_images_rounds_to_pillows_values(core: ov.Core, kind: str,
                                                             algorithm: ResizeAlgorithm) -> None:
    def configure(ppp: PrePostProcessor) -> None:
        ppp.input().tensor().set_spatial_dynamic_shape()
        ppp.input().model().set_layout(ov.Layout("NCHW"))
        ppp.input().preprocess().resize(algorithm)
    model = _built(core, configure, _identity(16, 16, TensorProto.UINT8))
    frame = np.random.default_rng(9).integers(0, 256, (1, 3, 45, 61), dtype=np.uint8)
    want = np.clip(np.round(_pillow(frame, kind, 16, 16)), 0, 255)
    got = _run(core, model, frame)
    assert got.dtype == np.uint8
    np.testing.assert_allclose(got, want, atol=1)  # integer rounding of the sums may differ by one


def test_pillow_resize_and_custom_steps_run_on_the_emulated_gpu(emulated_core: ov.Core) -> None:
    def configure(ppp: PrePostProcessor) -> None:
        ppp.input().tensor().set_shape([1, 3, 17, 13])
        ppp.input().model().set_layout(ov.Layout("NCHW"))
        ppp.input().preprocess().resize(ResizeAlgorithm.RESIZE_BICUBIC_PILLOW) \
            .custom(lambda node: opset8.abs(node).output(0))
    model = _built(emulated_core, configure, _conv(height=8, width=8))
    x = _image(1, 3, 17, 13, seed=4)
    want = ort_run(_conv(), {"x": np.abs(_pillow(x, "bicubic", 8, 8)).astype(np.float32)})[0]
    np.testing.assert_allclose(_run(emulated_core, model, x, "GPU.0"), want, rtol=1e-4, atol=1e-4)
