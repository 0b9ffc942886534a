"""PrePostProcessor's ``pad`` step and ``PaddingMode``; ``preprocess.get_version``,
``InputTensorInfo.set_memory_type``, and the OpenVINO names and values of the preprocess enums.

The model is an Identity, so what it returns is the preprocessed tensor.  References: numpy's
``np.pad`` (modes constant, edge, reflect, symmetric are OpenVINO's CONSTANT, EDGE, REFLECT,
SYMMETRIC); negative pads remove elements after the positive ones are added, as in OpenVINO;
resize NEAREST by 2 (half-pixel, round-prefer-floor) repeats each element twice.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import inferplex as ov
from inferplex import preprocess
from inferplex.errors import InputError, InputTypeError, ModelError
from inferplex.preprocess import ColorFormat, PaddingMode, PrePostProcessor, ResizeAlgorithm

from conftest import make_model

FLOAT = TensorProto.FLOAT
NUMPY_MODES = {PaddingMode.CONSTANT: "constant", PaddingMode.EDGE: "edge",
               PaddingMode.REFLECT: "reflect", PaddingMode.SYMMETRIC: "symmetric"}


def _identity(shape: Sequence[int | str], opset: int = 17, elem: int = FLOAT) -> onnx.ModelProto:
    """x -> Identity -> y, both of ``shape`` (strings are dynamic dims)."""
    return make_model([helper.make_node("Identity", ["x"], ["y"])], [("x", elem, list(shape))],
                      [("y", elem, list(shape))], opset=opset)


def _built(core: ov.Core, model_shape: Sequence[int | str], configure: Callable[[PrePostProcessor], Any],
           opset: int = 17) -> ov.Model:
    model = core.read_model(_identity(model_shape, opset))
    ppp = PrePostProcessor(model)
    configure(ppp)
    return ppp.build()


def _run(core: ov.Core, model: ov.Model, x: np.ndarray, device: str = "CPU") -> np.ndarray:
    return np.asarray(core.compile_model(model, device)(x)[0])


def _image(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _reference(x: np.ndarray, begin: Sequence[int], end: Sequence[int], value: float,
               mode: PaddingMode) -> np.ndarray:
    """np.pad with the positive pads, then the negative ones cut off."""
    widths = [(max(b, 0), max(e, 0)) for b, e in zip(begin, end, strict=True)]
    extra = {"constant_values": value} if mode is PaddingMode.CONSTANT else {}
    grown = np.pad(x, widths, mode=NUMPY_MODES[mode], **extra)  # type: ignore[call-overload]
    pairs = enumerate(zip(begin, end, strict=True))
    cut = tuple(slice(max(-b, 0), grown.shape[i] + min(e, 0)) for i, (b, e) in pairs)
    return grown[cut]


def _np_hw(x: np.ndarray, height: tuple[int, int], width: tuple[int, int], **how: Any) -> np.ndarray:
    """np.pad of the last two axes of an NCHW array."""
    return np.pad(x, [(0, 0), (0, 0), height, width], **how)


def _padding(shape: Sequence[int], begin: Sequence[int], end: Sequence[int], value: Any,
             mode: PaddingMode) -> Callable[[PrePostProcessor], None]:
    def configure(ppp: PrePostProcessor) -> None:
        ppp.input().tensor().set_shape(list(shape))
        ppp.input().preprocess().pad(begin, end, value, mode)
    return configure


def _padded_shape(shape: Sequence[int], begin: Sequence[int], end: Sequence[int]) -> list[int]:
    return [d + b + e for d, b, e in zip(shape, begin, end, strict=True)]


# --- each mode's values -----------------------------------------------------------------------------

PADS = [([0, 0, 1, 2], [0, 0, 2, 1]), ([0, 1, 0, 0], [0, 1, 0, 0]), ([1, 0, 2, 3], [0, 0, 2, 3]),
        ([0, 0, 0, 0], [0, 0, 0, 1])]


@pytest.mark.parametrize("mode", list(PaddingMode), ids=lambda m: m.name)
@pytest.mark.parametrize(("begin", "end"), PADS, ids=["hw", "channels", "batch-and-max", "one"])
def test_each_mode_gives_numpys_pad(core: ov.Core, mode: PaddingMode, begin: list[int],
                                    end: list[int]) -> None:
    x = _image(2, 2, 3, 4)
    model = _built(core, _padded_shape(x.shape, begin, end), _padding(x.shape, begin, end, 2.5, mode))
    assert str(model.input().get_partial_shape()) == "[2,2,3,4]"  # the user feeds the unpadded tensor
    assert str(model.output().get_partial_shape()) == str(ov.PartialShape(_padded_shape(x.shape, begin, end)))
    np.testing.assert_array_equal(_run(core, model, x), _reference(x, begin, end, 2.5, mode))


def test_mode_values_on_one_row(core: ov.Core) -> None:
    x = np.arange(4, dtype=np.float32).reshape(1, 4)
    want = {PaddingMode.CONSTANT: [9, 9, 0, 1, 2, 3, 9, 9, 9],
            PaddingMode.EDGE: [0, 0, 0, 1, 2, 3, 3, 3, 3],
            PaddingMode.REFLECT: [2, 1, 0, 1, 2, 3, 2, 1, 0],
            PaddingMode.SYMMETRIC: [1, 0, 0, 1, 2, 3, 3, 2, 1]}
    for mode, row in want.items():
        model = _built(core, [1, 9], _padding([1, 4], [0, 2], [0, 3], 9.0, mode))
        assert _run(core, model, x).ravel().tolist() == row, mode


@pytest.mark.parametrize("mode", list(PaddingMode), ids=lambda m: m.name)
@pytest.mark.parametrize(("begin", "end"), [([0, 0, -1, 2], [0, 0, 2, -2]), ([0, 0, 0, -3], [0, 0, 0, 3]),
                                            ([0, -1, -1, -1], [0, 0, -1, -1])],
                         ids=["mixed", "cut-then-mirror", "all-cut"])
def test_negative_pads_remove_elements_after_the_positive_ones_are_added(
        core: ov.Core, mode: PaddingMode, begin: list[int], end: list[int]) -> None:
    x = _image(1, 2, 3, 4, seed=1)
    want = _reference(x, begin, end, -1.0, mode)
    model = _built(core, want.shape, _padding(x.shape, begin, end, -1.0, mode))
    np.testing.assert_array_equal(_run(core, model, x), want)


def test_reflect_cuts_from_the_mirrored_tensor() -> None:
    row = np.arange(4, dtype=np.float32).reshape(1, 4)
    assert _reference(row, [0, -3], [0, 3], 0.0, PaddingMode.REFLECT).ravel().tolist() == [3, 2, 1, 0]


def test_value_is_cast_to_the_tensors_type_and_ignored_by_other_modes(core: ov.Core) -> None:
    x = _image(1, 1, 2, 2, seed=2).astype(np.float16)

    def half(ppp: PrePostProcessor) -> None:
        ppp.input().tensor().set_element_type(ov.Type.f16).set_shape([1, 1, 2, 2])
        ppp.input().preprocess().pad([0, 0, 1, 1], [0, 0, 1, 1], 0.3, PaddingMode.CONSTANT)
    model = _built(core, [1, 1, 4, 4], half)
    assert model.input().get_element_type() == ov.Type.f16
    got = _run(core, model, x)
    want = _np_hw(x, (1, 1), (1, 1), constant_values=np.float16(0.3))
    np.testing.assert_array_equal(got, want.astype(np.float32))
    x = _image(1, 1, 3, 3, seed=3)
    configure = _padding(x.shape, [0, 0, 1, 1], [0, 0, 1, 1], 7.0, PaddingMode.REFLECT)
    model = _built(core, [1, 1, 5, 5], configure)
    np.testing.assert_array_equal(_run(core, model, x), _np_hw(x, (1, 1), (1, 1), mode="reflect"))


@pytest.mark.parametrize(("begin", "end", "value"), [
    ((0, 0, 1, 1), (0, 0, 1, 1), 1),
    (np.array([0, 0, 1, 1]), np.array([0, 0, 1, 1]), np.float32(1.0)),
    ([np.int64(0), 0, True, 1], [0, 0, 1, np.int32(1)], [1.0]),
], ids=["tuples-int-value", "arrays", "numpy-ints-bool-one-value-list"])
def test_argument_forms(core: ov.Core, begin: Any, end: Any, value: Any) -> None:
    x = _image(1, 1, 2, 2, seed=4)
    model = _built(core, [1, 1, 4, 4], _padding(x.shape, begin, end, value, PaddingMode.CONSTANT))
    np.testing.assert_array_equal(_run(core, model, x), _np_hw(x, (1, 1), (1, 1), constant_values=1))


def test_keywords_and_chaining(core: ov.Core) -> None:
    steps = PrePostProcessor(core.read_model(_identity([1, 1, 4, 4]))).input().preprocess()
    assert steps.pad(pads_begin=[0, 0, 1, 1], pads_end=[0, 0, 1, 1], value=0.0,
                     mode=PaddingMode.EDGE).scale(2.0) is steps


# --- shapes -------------------------------------------------------------------------------------------


def test_without_the_tensors_shape_a_growing_pad_is_refused(core: ov.Core) -> None:
    """As OpenVINO: an unset tensor shape is the model's, which the pad then grows."""
    def configure(ppp: PrePostProcessor) -> None:
        ppp.input().preprocess().pad([0, 0, 1, 1], [0, 0, 1, 1], 0.0, PaddingMode.CONSTANT)
    with pytest.raises(ModelError, match=r"has shape \[1,2,5,6\], but the model takes \[1,2,3,4\].*pad"):
        _built(core, [1, 2, 3, 4], configure)
    zero = _built(core, [1, 2, 3, 4], lambda ppp: ppp.input().preprocess().pad(
        [0, 0, 0, 0], [0, 0, 0, 0], 0.0, PaddingMode.REFLECT))
    assert str(zero.input().get_partial_shape()) == "[1,2,3,4]"


def test_dynamic_dims_stay_dynamic(core: ov.Core) -> None:
    model = _built(core, [1, 2, "h", "w"], lambda ppp: ppp.input().preprocess().pad(
        [0, 0, 1, 1], [0, 0, 1, 1], 0.0, PaddingMode.SYMMETRIC))
    assert str(model.input().get_partial_shape()) == "[1,2,?,?]"
    x = _image(1, 2, 3, 5, seed=5)
    np.testing.assert_array_equal(_run(core, model, x), _np_hw(x, (1, 1), (1, 1), mode="symmetric"))

    def one_dynamic(ppp: PrePostProcessor) -> None:
        ppp.input().tensor().set_shape([1, 2, -1, 4])
        ppp.input().preprocess().pad([0, 0, 2, 1], [0, 0, 0, 1], 0.0, PaddingMode.REFLECT)
    model = _built(core, [1, 2, "h", 6], one_dynamic)
    assert str(model.input().get_partial_shape()) == "[1,2,?,4]"
    np.testing.assert_array_equal(_run(core, model, x[..., :4]),
                                  np.pad(x[..., :4], [(0, 0), (0, 0), (2, 0), (1, 1)], mode="reflect"))


@pytest.mark.parametrize("mode", list(PaddingMode), ids=lambda m: m.name)
def test_a_tensor_of_unknown_rank_is_padded(core: ov.Core, mode: PaddingMode) -> None:
    graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "any_rank",
                              [helper.make_tensor_value_info("x", FLOAT, None)],
                              [helper.make_tensor_value_info("y", FLOAT, None)])
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    ppp = PrePostProcessor(core.read_model(proto))
    ppp.input().preprocess().pad([1, -1], [2, 1], 4.0, mode)
    model = ppp.build()
    assert str(model.input().get_partial_shape()) == "[...]"
    x = _image(3, 4, seed=12)
    np.testing.assert_array_equal(_run(core, model, x), _reference(x, [1, -1], [2, 1], 4.0, mode))


def test_pads_index_the_tensors_layout_at_the_step(core: ov.Core) -> None:
    """An NHWC tensor is padded in NHWC, then transposed to the NCHW model; a per-channel mean after."""
    mean = [1.0, 2.0]
    x = _image(1, 3, 4, 2, seed=6)

    def configure(ppp: PrePostProcessor) -> None:
        ppp.input().tensor().set_shape([1, 3, 4, 2]).set_layout("NHWC")
        ppp.input().model().set_layout("NCHW")
        ppp.input().preprocess().pad([0, 1, 1, 0], [0, 1, 0, 0], 0.0, PaddingMode.SYMMETRIC).mean(mean)
    model = _built(core, [1, 2, 5, 5], configure)
    assert str(model.input().get_partial_shape()) == "[1,3,4,2]"
    want = np.pad(x, [(0, 0), (1, 1), (1, 0), (0, 0)], mode="symmetric") - np.array(mean, np.float32)
    np.testing.assert_allclose(_run(core, model, x), want.transpose(0, 3, 1, 2), rtol=1e-6)

    def after_transpose(ppp: PrePostProcessor) -> None:
        ppp.input().tensor().set_shape([1, 3, 4, 2]).set_layout("NHWC")
        ppp.input().preprocess().convert_layout("NCHW").pad(
            [0, 0, 1, 1], [0, 0, 0, 0], 0.0, PaddingMode.REFLECT)
    model = _built(core, [1, 2, 4, 5], after_transpose)
    want = np.pad(x.transpose(0, 3, 1, 2), [(0, 0), (0, 0), (1, 0), (1, 0)], mode="reflect")
    np.testing.assert_array_equal(_run(core, model, x), want)


# --- with other steps -----------------------------------------------------------------------------------


def test_convert_element_type_then_pad(core: ov.Core) -> None:
    frame = (np.arange(24).reshape(1, 2, 3, 4) % 7).astype(np.uint8)

    def configure(ppp: PrePostProcessor) -> None:
        ppp.input().tensor().set_element_type(ov.Type.u8).set_shape([1, 2, 3, 4])
        ppp.input().preprocess().convert_element_type(ov.Type.f32).pad(
            [0, 0, 1, 1], [0, 0, 1, 1], -1.0, PaddingMode.CONSTANT)
    model = _built(core, [1, 2, 5, 6], configure)
    assert model.input().get_element_type() == ov.Type.u8
    want = np.pad(frame.astype(np.float32), [(0, 0), (0, 0), (1, 1), (1, 1)], constant_values=-1)
    np.testing.assert_array_equal(_run(core, model, frame), want)


def test_pad_then_resize_to_the_models_size(core: ov.Core) -> None:
    x = _image(1, 2, 2, 3, seed=7)

    def configure(ppp: PrePostProcessor) -> None:
        ppp.input().tensor().set_shape([1, 2, 2, 3]).set_layout("NCHW")
        ppp.input().preprocess().pad([0, 0, 1, 0], [0, 0, 1, 1], 0.0, PaddingMode.EDGE) \
            .resize(ResizeAlgorithm.RESIZE_NEAREST)
    model = _built(core, [1, 2, 8, 8], configure)
    grown = np.pad(x, [(0, 0), (0, 0), (1, 1), (0, 1)], mode="edge")
    np.testing.assert_array_equal(_run(core, model, x), grown.repeat(2, axis=2).repeat(2, axis=3))


def test_resize_then_pad_then_scale_and_two_pads(core: ov.Core) -> None:
    x = _image(1, 1, 2, 2, seed=8)

    def configure(ppp: PrePostProcessor) -> None:
        ppp.input().tensor().set_shape([1, 1, 2, 2]).set_layout("NCHW")
        ppp.input().preprocess().resize(ResizeAlgorithm.RESIZE_NEAREST, 4, 4) \
            .pad([0, 0, 1, 1], [0, 0, 1, 1], 3.0, PaddingMode.CONSTANT) \
            .pad([0, 0, 0, 2], [0, 0, 0, 0], 0.0, PaddingMode.REFLECT).scale(2.0)
    model = _built(core, [1, 1, 6, 8], configure)
    big = np.pad(x.repeat(2, axis=2).repeat(2, axis=3), [(0, 0), (0, 0), (1, 1), (1, 1)], constant_values=3)
    want = np.pad(big, [(0, 0), (0, 0), (0, 0), (2, 0)], mode="reflect") / 2
    np.testing.assert_allclose(_run(core, model, x), want, rtol=1e-6)


def test_a_model_of_an_old_opset_is_converted(core: ov.Core) -> None:
    x = _image(1, 1, 3, 3, seed=9)
    model = _built(core, [1, 1, 5, 6], _padding(x.shape, [0, 0, 1, 2], [0, 0, 1, 1], 0.0, PaddingMode.EDGE),
                   opset=9)
    assert model.ir.graph.opset_imports[""] >= 11  # Pad takes its pads as an input from opset 11
    np.testing.assert_array_equal(_run(core, model, x), _np_hw(x, (1, 1), (2, 1), mode="edge"))


@pytest.mark.parametrize("mode", list(PaddingMode), ids=lambda m: m.name)
def test_every_mode_runs_on_the_emulated_gpu(emulated_core: ov.Core, mode: PaddingMode) -> None:
    x = _image(1, 2, 3, 4, seed=10)
    begin, end = [0, 0, 2, -1], [0, 1, 1, 3]
    want = _reference(x, begin, end, 0.5, mode)
    model = _built(emulated_core, want.shape, _padding(x.shape, begin, end, 0.5, mode))
    np.testing.assert_allclose(_run(emulated_core, model, x, "GPU.0"), want, rtol=1e-6)


# --- errors ---------------------------------------------------------------------------------------------


@pytest.fixture
def steps(core: ov.Core) -> preprocess.PreProcessSteps:
    return PrePostProcessor(core.read_model(_identity([1, 1, 4, 4]))).input().preprocess()


@pytest.mark.parametrize(("args", "error", "message"), [
    ((1, 1, 0.0, PaddingMode.CONSTANT), InputTypeError, "pads_begin takes a list of ints"),
    (([0, 1.5], [0, 0], 0.0, PaddingMode.CONSTANT), InputTypeError, r"pads_begin takes a list of ints.*1\.5"),
    (([0, 0], "00", 0.0, PaddingMode.CONSTANT), InputTypeError, "pads_end takes a list of ints"),
    (([2**63], [0], 0.0, PaddingMode.CONSTANT), InputTypeError, "int64"),
    (([0, 1], [0], 0.0, PaddingMode.CONSTANT), InputError, r"pads_begin \[0, 1\] and pads_end \[0\] differ"),
    (([0], [0], [1.0, 2.0], PaddingMode.CONSTANT), InputError, "one number .*got 2 values"),
    (([0], [0], [], PaddingMode.CONSTANT), InputError, "got 0 values"),
    (([0], [0], "a", PaddingMode.CONSTANT), InputTypeError, "value takes a number, got str"),
    (([0], [0], None, PaddingMode.CONSTANT), InputTypeError, "value takes a number, got NoneType"),
    (([0], [0], 0.0, 0), InputTypeError, r"mode takes a PaddingMode \(CONSTANT, EDGE, REFLECT, SYMMETRIC\)"),
    (([0], [0], 0.0, "constant"), InputTypeError, "mode takes a PaddingMode"),
], ids=["int-pads", "float-pad", "str-pads", "huge-pad", "lengths", "two-values", "no-value", "str-value",
        "none-value", "int-mode", "str-mode"])
def test_bad_arguments_name_what_is_accepted(steps: preprocess.PreProcessSteps, args: tuple[Any, ...],
                                             error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=message):
        steps.pad(*args)


def test_pad_needs_all_four_arguments(steps: preprocess.PreProcessSteps) -> None:
    with pytest.raises(TypeError):
        steps.pad([0], [0], 0.0)  # type: ignore[call-arg]


def test_build_errors(core: ov.Core) -> None:
    def integer_tensor(ppp: PrePostProcessor) -> None:
        ppp.input().tensor().set_element_type(ov.Type.u8).set_shape([1, 1, 2, 2])
        ppp.input().preprocess().pad([0, 0, 1, 1], [0, 0, 1, 1], 0.0, PaddingMode.CONSTANT)
    with pytest.raises(ModelError, match=r"pad applies to float tensors.*u8.*convert_element_type"):
        _built(core, [1, 1, 4, 4], integer_tensor)
    with pytest.raises(ModelError, match=r"one pad per dimension.*2 values.*rank 4"):
        _built(core, [1, 1, 4, 4], _padding([1, 1, 2, 2], [1, 1], [1, 1], 0.0, PaddingMode.CONSTANT))
    long_reflect = _padding([1, 1, 3, 3], [0, 0, 3, 0], [0, 0, 0, 0], 0.0, PaddingMode.REFLECT)
    with pytest.raises(ModelError,
                       match=r"REFLECT: pads of dimension 2 \(3 before, 0 after\) must be at most 2,"):
        _built(core, [1, 1, 6, 3], long_reflect)
    long_symmetric = _padding([1, 1, 3, 3], [0, 0, 0, 0], [0, 0, 0, 4], 0.0, PaddingMode.SYMMETRIC)
    with pytest.raises(ModelError,
                       match=r"SYMMETRIC: pads of dimension 3 \(0 before, 4 after\) must be at most 3"):
        _built(core, [1, 1, 3, 7], long_symmetric)
    # the largest pads the mirrors allow
    x = np.arange(3, dtype=np.float32).reshape(1, 1, 1, 3)
    model = _built(core, [1, 1, 1, 9],
                   _padding(x.shape, [0, 0, 0, 3], [0, 0, 0, 3], 0.0, PaddingMode.SYMMETRIC))
    assert _run(core, model, x).ravel().tolist() == [2, 1, 0, 0, 1, 2, 2, 1, 0]
    model = _built(core, [1, 1, 1, 7],
                   _padding(x.shape, [0, 0, 0, 2], [0, 0, 0, 2], 0.0, PaddingMode.REFLECT))
    assert _run(core, model, x).ravel().tolist() == [2, 1, 0, 1, 2, 1, 0]


# --- get_version, set_memory_type, enums --------------------------------------------------------------------


def test_get_version_is_the_runtimes_version_string() -> None:
    assert preprocess.get_version() == ov.get_version() == ov.__version__
    assert isinstance(preprocess.get_version(), str)


def test_set_memory_type_chains_and_leaves_the_model_as_it_is(core: ov.Core) -> None:
    model = core.read_model(_identity([1, 3, 4, 4]))
    before = [op.get_type_name() for op in model.get_ordered_ops()]
    ppp = PrePostProcessor(model)
    tensor = ppp.input().tensor()
    assert tensor.set_memory_type("GPU_SURFACE") is tensor
    assert tensor.set_memory_type("").set_layout("NCHW") is tensor
    assert tensor.set_memory_type(memory_type="GPU_SURFACE").set_element_type(ov.Type.f32) is tensor
    built = ppp.build()
    assert str(built.input().get_partial_shape()) == "[1,3,4,4]"
    assert built.input().get_element_type() == ov.Type.f32
    assert [op.get_type_name() for op in built.get_ordered_ops()] == before
    x = _image(1, 3, 4, 4, seed=11)
    np.testing.assert_array_equal(_run(core, built, x), x)
    for bad in (None, 1, ["GPU_SURFACE"]):
        with pytest.raises(InputTypeError, match="set_memory_type takes a string"):
            tensor.set_memory_type(bad)  # type: ignore[arg-type]


def test_enum_members_have_openvinos_names_and_values() -> None:
    """The values of OpenVINO's enums (ResizeAlgorithm.RESIZE_LINEAR.value == 0, ...); PaddingMode's
    are OpenVINO's PadMode's, EDGE included."""
    assert {m.name: m.value for m in ResizeAlgorithm} == {
        "RESIZE_LINEAR": 0, "RESIZE_CUBIC": 1, "RESIZE_NEAREST": 2, "RESIZE_BILINEAR_PILLOW": 3,
        "RESIZE_BICUBIC_PILLOW": 4}
    assert {m.name: m.value for m in ColorFormat} == {
        "UNDEFINED": 0, "NV12_SINGLE_PLANE": 1, "NV12_TWO_PLANES": 2, "I420_SINGLE_PLANE": 3,
        "I420_THREE_PLANES": 4, "RGB": 5, "BGR": 6, "GRAY": 7, "RGBX": 8, "BGRX": 9}
    assert {m.name: m.value for m in PaddingMode} == {"CONSTANT": 0, "EDGE": 1, "REFLECT": 2, "SYMMETRIC": 3}
    assert ResizeAlgorithm.RESIZE_LINEAR.name == "RESIZE_LINEAR"
    assert int(ColorFormat.BGR) == 6 and [10, 11, 12][PaddingMode.REFLECT] == 12
    assert repr(PaddingMode.SYMMETRIC) == "<PaddingMode.SYMMETRIC: 3>"
    assert str(ResizeAlgorithm.RESIZE_CUBIC) == "ResizeAlgorithm.RESIZE_CUBIC"
    assert ResizeAlgorithm(0) is ResizeAlgorithm.RESIZE_LINEAR and ColorFormat("RGB") is ColorFormat.RGB
    assert ResizeAlgorithm.RESIZE_LINEAR != 0  # members, not ints, as OpenVINO's


def test_colour_formats_by_member_value_or_name(core: ov.Core) -> None:
    tensor = PrePostProcessor(core.read_model(_identity([1, 3, 4, 4]))).input().tensor()
    for given in (ColorFormat.BGR, 6, "BGR"):
        assert tensor.set_color_format(given).facts.color is ColorFormat.BGR  # type: ignore[arg-type]
    with pytest.raises(InputError, match=r"set_color_format takes a ColorFormat \(UNDEFINED, .*\), got 42"):
        tensor.set_color_format(42)  # type: ignore[arg-type]
    with pytest.raises(InputTypeError, match="convert_color takes a ColorFormat"):
        PrePostProcessor(core.read_model(_identity([1, 3, 4, 4]))).input().preprocess().convert_color(
            1.5)  # type: ignore[arg-type]
