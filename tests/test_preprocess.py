"""ov.preprocess.PrePostProcessor: steps built into the ONNX graph, checked against numpy.

The reference for each case is the same steps done in numpy on the input, fed
to the original model under plain ONNX Runtime.  Resize's reference is a numpy
half-pixel interpolation (OpenVINO's preprocessing resize, no antialiasing);
where OpenVINO is installed, the built model is also compared with OpenVINO's.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import inferplex as ov
from inferplex.errors import InputError, ModelError
from inferplex.preprocess import ColorFormat, PrePostProcessor, ResizeAlgorithm

from conftest import make_model, ort_run

FLOAT = TensorProto.FLOAT


def _conv_model(height: int = 8, width: int = 8) -> onnx.ModelProto:
    """A 1x1 convolution (mixes channels, so channel order matters) then Relu, NCHW f32."""
    weight = np.array([[1.0, 0.5, -0.25], [-1.0, 2.0, 0.5]], np.float32).reshape(2, 3, 1, 1)
    return make_model(
        [helper.make_node("Conv", ["x", "w"], ["c"]), helper.make_node("Relu", ["c"], ["y"])],
        [("x", FLOAT, [1, 3, height, width])], [("y", FLOAT, [1, 2, height, width])],
        [onnx.numpy_helper.from_array(weight, "w")])


def _build(core: ov.Core, configure: object, model: onnx.ModelProto | None = None) -> ov.Model:
    built = core.read_model(model or _conv_model())
    ppp = PrePostProcessor(built)
    configure(ppp)  # type: ignore[operator]
    assert ppp.build() is built  # OpenVINO's build() changes the model in place
    return built


def _run(core: ov.Core, model: ov.Model, x: np.ndarray) -> np.ndarray:
    return core.compile_model(model, "CPU")(x)[0]


def _resize_linear(x: np.ndarray, height: int, width: int) -> np.ndarray:
    """Half-pixel bilinear resize of an NCHW float array (no antialiasing)."""
    def weights(size: int, target: int) -> np.ndarray:
        src = np.clip((np.arange(target) + 0.5) * size / target - 0.5, 0, size - 1)
        low = np.floor(src).astype(int)
        high = np.minimum(low + 1, size - 1)
        matrix = np.zeros((target, size))
        np.add.at(matrix, (np.arange(target), low), 1 - (src - low))
        np.add.at(matrix, (np.arange(target), high), src - low)
        return matrix
    rows, cols = weights(x.shape[2], height), weights(x.shape[3], width)
    return (rows @ x.astype(np.float64) @ cols.T).astype(np.float32)


def _resize_nearest(x: np.ndarray, height: int, width: int) -> np.ndarray:
    """Half-pixel nearest resize (round half down, ONNX's default nearest mode)."""
    def index(size: int, target: int) -> np.ndarray:
        src = (np.arange(target) + 0.5) * size / target - 0.5
        return np.clip(np.ceil(src - 0.5), 0, size - 1).astype(int)
    return x[:, :, index(x.shape[2], height)][:, :, :, index(x.shape[3], width)]


def test_u8_nhwc_frames_resized_as_the_deployment_guide_does(core: ov.Core) -> None:
    def configure(ppp: PrePostProcessor) -> None:
        ppp.input().tensor().set_element_type(ov.Type.u8).set_layout(ov.Layout("NHWC")) \
            .set_spatial_dynamic_shape()
        ppp.input().preprocess().convert_element_type(ov.Type.f32) \
            .resize(ResizeAlgorithm.RESIZE_LINEAR)
        ppp.input().model().set_layout(ov.Layout("NCHW"))
    built = _build(core, configure, _conv_model(224, 224))
    port = built.input()
    assert port.element_type == ov.Type.u8 and port.partial_shape == ov.PartialShape("1,?,?,3")
    assert port.any_name == "x" and ov.layout_helpers.get_layout(port) == ov.Layout("NHWC")
    frame = np.random.default_rng(0).integers(0, 256, (1, 1080, 1920, 3), dtype=np.uint8)
    nchw = frame.transpose(0, 3, 1, 2).astype(np.float32)
    want = ort_run(_conv_model(224, 224), {"x": _resize_linear(nchw, 224, 224)})[0]
    # ONNX Runtime computes sampling positions in float32: weights off by ~1e-4 of 255 levels
    np.testing.assert_allclose(_run(core, built, frame), want, rtol=1e-4, atol=0.1)
    small = frame[:, :300, :500]  # any frame size is accepted
    want = ort_run(_conv_model(224, 224), {"x": _resize_linear(nchw[:, :, :300, :500], 224, 224)})[0]
    np.testing.assert_allclose(_run(core, built, small), want, rtol=1e-4, atol=0.1)


def test_resize_nearest_to_a_static_tensor_size(core: ov.Core) -> None:
    def configure(ppp: PrePostProcessor) -> None:
        ppp.input().tensor().set_layout(ov.Layout("NCHW")).set_spatial_static_shape(13, 5)
        ppp.input().preprocess().resize(ResizeAlgorithm.RESIZE_NEAREST)
    built = _build(core, configure)
    assert built.input().shape == [1, 3, 13, 5]
    x = np.random.default_rng(1).random((1, 3, 13, 5), dtype=np.float32)
    want = ort_run(_conv_model(), {"x": _resize_nearest(x, 8, 8)})[0]
    np.testing.assert_allclose(_run(core, built, x), want, rtol=1e-5, atol=1e-6)


def test_resize_on_a_model_of_an_older_opset_converts_it_first(core: ov.Core) -> None:
    """Resize is an opset-11 op: an opset-9 model is converted, keeping its weights and rt_info."""
    weight = np.random.default_rng(9).standard_normal((16, 3, 3, 3)).astype(np.float32)  # > 1 KiB
    proto = make_model([helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1], name="conv"),
                        helper.make_node("Relu", ["c"], ["y"], name="act")],
                       [("x", FLOAT, [1, 3, 8, 8])], [("y", FLOAT, [1, 16, 8, 8])],
                       [onnx.numpy_helper.from_array(weight, "w")], opset=9)
    model = core.read_model(proto)
    model.get_ops()[0].get_rt_info()["affinity"] = "CPU"
    ov.layout_helpers.set_layout(model.output(), ov.Layout("NCHW"))
    ppp = PrePostProcessor(model)
    ppp.input().tensor().set_layout(ov.Layout("NCHW")).set_spatial_static_shape(13, 5)
    ppp.input().preprocess().resize(ResizeAlgorithm.RESIZE_LINEAR)
    assert ppp.build() is model
    assert model.input().shape == [1, 3, 13, 5]
    assert {op.get_friendly_name(): dict(op.get_rt_info()) for op in model.get_ops()}["conv"] == \
        {"affinity": "CPU"}
    assert ov.layout_helpers.get_layout(model.output()) == ov.Layout("NCHW")
    x = np.random.default_rng(10).random((1, 3, 13, 5), dtype=np.float32)
    want = ort_run(proto, {"x": _resize_linear(x, 8, 8)})[0]
    np.testing.assert_allclose(_run(core, model, x), want, rtol=1e-4, atol=1e-5)


def test_mean_scale_and_reverse_channels(core: ov.Core) -> None:
    def configure(ppp: PrePostProcessor) -> None:
        ppp.input().tensor().set_element_type(ov.Type.u8).set_layout(ov.Layout("NHWC"))
        ppp.input().preprocess().convert_element_type(ov.Type.f32).reverse_channels() \
            .mean([123.7, 116.3, 103.5]).scale([58.4, 57.1, 57.4])
        ppp.input().model().set_layout(ov.Layout("NCHW"))
    built = _build(core, configure)
    x = np.random.default_rng(2).integers(0, 256, (1, 8, 8, 3), dtype=np.uint8)
    reference = (x[..., ::-1].astype(np.float32) - np.float32([123.7, 116.3, 103.5])) \
        / np.float32([58.4, 57.1, 57.4])
    want = ort_run(_conv_model(), {"x": reference.transpose(0, 3, 1, 2)})[0]
    np.testing.assert_allclose(_run(core, built, x), want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(("source", "target", "reference"), [
    (ColorFormat.BGR, ColorFormat.RGB, lambda x: x[..., ::-1]),
    (ColorFormat.RGB, ColorFormat.RGB, lambda x: x),
    (ColorFormat.RGBX, ColorFormat.RGB, lambda x: x[..., :3]),
    (ColorFormat.BGRX, ColorFormat.RGB, lambda x: x[..., 2::-1])])
def test_convert_color(core: ov.Core, source: ColorFormat, target: ColorFormat,
                       reference: object) -> None:
    channels = 4 if source.name.endswith("X") else 3

    def configure(ppp: PrePostProcessor) -> None:
        ppp.input().tensor().set_color_format(source).set_layout("NHWC") \
            .set_shape([1, 8, 8, channels])
        ppp.input().preprocess().convert_color(target)
        ppp.input().model().set_layout("NCHW")
    built = _build(core, configure)
    x = np.random.default_rng(3).random((1, 8, 8, channels), dtype=np.float32)
    want = ort_run(_conv_model(), {"x": reference(x).transpose(0, 3, 1, 2)})[0]  # type: ignore[operator]
    np.testing.assert_allclose(_run(core, built, x), want, rtol=1e-6)


def test_crop_and_layout_by_order(core: ov.Core) -> None:
    def configure(ppp: PrePostProcessor) -> None:
        ppp.input().tensor().set_shape([1, 10, 3, 12])
        ppp.input().preprocess().convert_layout([0, 2, 1, 3]).crop([0, 0, 1, 2], [1, 3, 9, -2])
    built = _build(core, configure)
    assert built.input().shape == [1, 10, 3, 12]
    x = np.random.default_rng(4).random((1, 10, 3, 12), dtype=np.float32)
    want = ort_run(_conv_model(), {"x": x.transpose(0, 2, 1, 3)[:, :, 1:9, 2:-2]})[0]
    np.testing.assert_allclose(_run(core, built, x), want, rtol=1e-6)


def test_implicit_conversions_and_derived_shape(core: ov.Core) -> None:
    """Only the tensor's type and layout set: the conversions to the model's are implied."""
    def configure(ppp: PrePostProcessor) -> None:
        ppp.input().tensor().set_element_type(ov.Type.u8).set_layout(ov.Layout("NHWC"))
        ppp.input().model().set_layout(ov.Layout("NCHW"))
    built = _build(core, configure)
    assert built.input().shape == [1, 8, 8, 3] and built.input().element_type == ov.Type.u8
    x = np.random.default_rng(5).integers(0, 256, (1, 8, 8, 3), dtype=np.uint8)
    want = ort_run(_conv_model(), {"x": x.transpose(0, 3, 1, 2).astype(np.float32)})[0]
    np.testing.assert_allclose(_run(core, built, x), want, rtol=1e-6)


def test_output_type_and_layout(core: ov.Core) -> None:
    def configure(ppp: PrePostProcessor) -> None:
        ppp.output().model().set_layout(ov.Layout("NCHW"))
        ppp.output().tensor().set_element_type(ov.Type.f16).set_layout(ov.Layout("NHWC"))
    built = _build(core, configure)
    out = built.output()
    assert out.any_name == "y" and out.element_type == ov.Type.f16
    assert out.shape == [1, 8, 8, 2] and ov.layout_helpers.get_layout(out) == "NHWC"
    x = np.random.default_rng(6).random((1, 3, 8, 8), dtype=np.float32)
    want = ort_run(_conv_model(), {"x": x})[0].transpose(0, 2, 3, 1).astype(np.float16)
    result = core.compile_model(built, "CPU")(x)
    np.testing.assert_array_equal(result["y"], want)


@pytest.mark.parametrize("precision, element, bound", [("f16", "f16", 2**-9), ("bf16", "bf16", 2**-6)])
def test_gpu_gives_outputs_in_its_lowered_precision_when_asked(
        monkeypatch: pytest.MonkeyPatch, precision: str, element: str, bound: float) -> None:
    """With an f16/bf16 hint the GPU returns f32 as the model declares; an output that
    PrePostProcessor sets to that precision comes back in it, without a round trip through f32."""
    pytest.importorskip("torch")
    monkeypatch.setenv("INFERPLEX_EMULATED_GPUS", "1")
    gpu = ov.Core()
    x = np.random.default_rng(7).random((1, 3, 8, 8), dtype=np.float32)
    want = ort_run(_conv_model(), {"x": x})[0]
    declared = gpu.compile_model(_conv_model(), "GPU.0", {"INFERENCE_PRECISION_HINT": precision})(x)[0]
    assert declared.dtype == np.float32
    built = _build(gpu, lambda ppp: ppp.output().tensor().set_element_type(ov.Type(element)))
    compiled = gpu.compile_model(built, "GPU.0", {"INFERENCE_PRECISION_HINT": precision})
    assert compiled.output(0).get_element_type() == ov.Type(element)
    lowered = compiled(x)[0]
    assert lowered.dtype == ov.Type(element).to_dtype()
    np.testing.assert_allclose(lowered.astype(np.float32), want, rtol=2 * bound, atol=2 * bound)


def test_postprocess_steps(core: ov.Core) -> None:
    def configure(ppp: PrePostProcessor) -> None:
        ppp.output(0).postprocess().convert_layout([0, 2, 3, 1]).convert_element_type(ov.Type.f64)
    built = _build(core, configure)
    x = np.random.default_rng(7).random((1, 3, 8, 8), dtype=np.float32)
    want = ort_run(_conv_model(), {"x": x})[0].transpose(0, 2, 3, 1).astype(np.float64)
    np.testing.assert_array_equal(_run(core, built, x), want)


def test_built_model_saves_and_loads(core: ov.Core, tmp_path: object) -> None:
    def configure(ppp: PrePostProcessor) -> None:
        ppp.input("x").tensor().set_element_type(ov.Type.u8)
        ppp.input("x").preprocess().convert_element_type(ov.Type.f32).scale(255.0)
    built = _build(core, configure)
    path = f"{tmp_path}/pre.onnx"
    ov.save_model(built, path)
    loaded = core.read_model(path)
    assert loaded.input().element_type == ov.Type.u8
    x = np.random.default_rng(8).integers(0, 256, (1, 3, 8, 8), dtype=np.uint8)
    want = ort_run(_conv_model(), {"x": x.astype(np.float32) / np.float32(255)})[0]
    np.testing.assert_allclose(_run(core, loaded, x), want, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize(("configure", "match"), [
    (lambda p: p.input().preprocess().mean([1.0, 2.0, 3.0]), "layout with C"),
    (lambda p: p.input().preprocess().resize(ResizeAlgorithm.RESIZE_LINEAR), "H"),
    (lambda p: p.input().preprocess().reverse_channels(), "layout with C"),
    (lambda p: (p.input().tensor().set_element_type(ov.Type.u8),
                p.input().preprocess().scale(2.0)), "convert_element_type"),
    (lambda p: p.input().preprocess().convert_color(ColorFormat.RGB), "set_color_format"),
    (lambda p: p.input().preprocess().crop([0, 0, 1, 1], [1, 3, 7, 7]), "set_shape"),
    (lambda p: (p.input().tensor().set_shape([1, 3, 10, 10]),
                p.input().preprocess().crop([0, 0, 1, 1], [1, 3, 8, 8])), "model takes"),
    (lambda p: (p.input().tensor().set_color_format(ColorFormat.NV12_SINGLE_PLANE),
                p.input().preprocess().convert_color(ColorFormat.RGBX)), "not convertible to RGBX")])
def test_bad_steps_are_named_at_build(core: ov.Core, configure: object, match: str) -> None:
    ppp = PrePostProcessor(core.read_model(_conv_model()))
    configure(ppp)  # type: ignore[operator]
    with pytest.raises(ModelError, match=match):
        ppp.build()


def test_bad_arguments(core: ov.Core) -> None:
    ppp = PrePostProcessor(core.read_model(_conv_model()))
    with pytest.raises(InputError, match="no input named 'nope'; inputs: x"):
        ppp.input("nope")
    with pytest.raises(InputError, match="output index 3 is out of range; the model has 1 output"):
        ppp.output(3)
    with pytest.raises(InputError, match="permutation"):
        ppp.input().preprocess().convert_layout([0, 0, 1, 2])
    with pytest.raises(InputError, match="ResizeAlgorithm"):
        ppp.input().preprocess().resize("linear")  # type: ignore[arg-type]
    with pytest.raises(InputError, match="inferplex Model"):
        PrePostProcessor(_conv_model())  # type: ignore[arg-type]


@pytest.mark.parametrize("algorithm", ["RESIZE_LINEAR", "RESIZE_NEAREST", "RESIZE_CUBIC"])
def test_same_results_as_openvino(core: ov.Core, algorithm: str) -> None:
    """The Deployment guide's pipeline gives OpenVINO's numbers, cubic included."""
    ref = pytest.importorskip("openvino")
    ref_pre = pytest.importorskip("openvino.preprocess")

    def configure(module: object, pre: object, model: object) -> object:
        ppp = pre.PrePostProcessor(model)  # type: ignore[attr-defined]
        ppp.input().tensor().set_element_type(module.Type.u8).set_layout(  # type: ignore[attr-defined]
            module.Layout("NHWC")).set_spatial_dynamic_shape()  # type: ignore[attr-defined]
        ppp.input().preprocess().convert_element_type(module.Type.f32).resize(  # type: ignore[attr-defined]
            getattr(pre.ResizeAlgorithm, algorithm)).mean(100.0)  # type: ignore[attr-defined]
        ppp.input().model().set_layout(module.Layout("NCHW"))  # type: ignore[attr-defined]
        return ppp.build()
    source = _conv_model(16, 16).SerializeToString()
    ours = configure(ov, __import__("inferplex.preprocess").preprocess, core.read_model(source))
    theirs = configure(ref, ref_pre, ref.Core().read_model(source))
    frame = np.random.default_rng(9).integers(0, 256, (1, 45, 61, 3), dtype=np.uint8)
    want = ref.Core().compile_model(theirs, "CPU", {"INFERENCE_PRECISION_HINT": "f32"})(frame)[0]
    np.testing.assert_allclose(_run(core, ours, frame), want, rtol=1e-4, atol=1e-3)
