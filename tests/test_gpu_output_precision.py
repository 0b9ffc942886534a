"""OUTPUT_PRECISION: floating outputs in the model's types (MODEL) or in the lowered precision (INFERENCE).

On the emulated GPU, against ONNX Runtime at the lowered precision's tolerance;
the compiled model's ports say the type results come in; MULTI of GPU and CPU
gives every request the same types; torch's profiler shows that no conversion
of the outputs runs on the GPU.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import inferplex as ov
from inferplex.errors import PropertyError

from conftest import make_model, ort_run

torch = pytest.importorskip("torch")

_BOUND = {"f16": 2**-9, "bf16": 2**-6}
"""Relative error of one rounding to the type."""


@pytest.fixture(scope="module")
def gpu() -> Iterator[ov.Core]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("INFERPLEX_EMULATED_GPUS", "1")
        yield ov.Core()


def _model() -> onnx.ModelProto:
    """MatMul + Softmax (f32 output ``p``), and an int64 ArgMax (``k``), which keeps its type."""
    rng = np.random.default_rng(0)
    values = rng.standard_normal((16, 8)).astype(np.float32)
    weight = helper.make_tensor("w", TensorProto.FLOAT, [16, 8], values.ravel())
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"]),
             helper.make_node("Softmax", ["h"], ["p"], axis=-1),
             helper.make_node("ArgMax", ["h"], ["k"], axis=-1, keepdims=0)]
    return make_model(nodes, [("x", TensorProto.FLOAT, [4, 16])],
                      [("p", TensorProto.FLOAT, [4, 8]), ("k", TensorProto.INT64, [4])], [weight])


def _input() -> np.ndarray:
    return np.random.default_rng(1).standard_normal((4, 16)).astype(np.float32)


def _check(results: Any, precision: str) -> None:
    """``results`` (by output name) against ONNX Runtime: ``p`` in ``precision``, ``k`` exact."""
    probabilities, indices = ort_run(_model(), {"x": _input()})
    got = results["p"]
    assert got.dtype == ov.Type(precision).to_dtype()
    bound = 4 * _BOUND[precision]
    np.testing.assert_allclose(got.astype(np.float32), probabilities, rtol=bound, atol=bound)
    np.testing.assert_array_equal(results["k"], indices)


@pytest.mark.parametrize("precision", ["f16", "bf16"])
def test_inference_gives_floating_outputs_in_the_hinted_precision(gpu: ov.Core, precision: str) -> None:
    compiled = gpu.compile_model(_model(), "GPU.0", {"INFERENCE_PRECISION_HINT": precision,
                                                     "OUTPUT_PRECISION": "INFERENCE"})
    assert compiled.output("p").get_element_type() == ov.Type(precision)
    assert compiled.output("k").get_element_type() == ov.Type.i64
    assert compiled.get_property("OUTPUT_PRECISION") == "INFERENCE"
    _check(compiled(_input()), precision)
    queue = ov.AsyncInferQueue(compiled, 2)
    outcomes: list[dict[str, np.ndarray]] = []
    queue.set_callback(lambda request, _: outcomes.append({"p": request.results["p"].copy(),
                                                           "k": request.results["k"].copy()}))
    for _ in range(4):
        queue.start_async({"x": _input()})
    queue.wait_all()
    assert len(outcomes) == 4
    for outcome in outcomes:
        _check(outcome, precision)


def test_model_keeps_the_declared_types_and_the_caller_model_is_untouched(gpu: ov.Core) -> None:
    model = gpu.read_model(_model())
    f16 = {"INFERENCE_PRECISION_HINT": "f16"}
    declared = gpu.compile_model(model, "GPU.0", {**f16, "OUTPUT_PRECISION": "MODEL"})
    assert declared.output("p").get_element_type() == ov.Type.f32
    assert declared(_input())["p"].dtype == np.float32
    lowered = gpu.compile_model(model, "GPU.0", {**f16, "OUTPUT_PRECISION": "INFERENCE"})
    assert lowered.output("p").get_element_type() == ov.Type.f16
    assert model.output("p").get_element_type() == ov.Type.f32


@pytest.mark.parametrize("device", ["GPU.0", "CPU", "MULTI:GPU.0,CPU"])
def test_the_setting_in_force_reads_back_and_is_listed(gpu: ov.Core, device: str) -> None:
    default = gpu.compile_model(_model(), device)
    assert default.get_property("OUTPUT_PRECISION") == "MODEL"
    assert "OUTPUT_PRECISION" in default.get_property("SUPPORTED_PROPERTIES")
    lowered = gpu.compile_model(_model(), device, {"OUTPUT_PRECISION": "INFERENCE"})
    assert lowered.get_property("OUTPUT_PRECISION") == "INFERENCE"


def test_inference_under_f32_keeps_the_declared_types(gpu: ov.Core) -> None:
    compiled = gpu.compile_model(_model(), "GPU.0", {"OUTPUT_PRECISION": "INFERENCE"})
    assert compiled.output("p").get_element_type() == ov.Type.f32
    probabilities = ort_run(_model(), {"x": _input()})[0]
    np.testing.assert_allclose(compiled(_input())["p"], probabilities, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("value", ["f16", "LOWERED", 1, None])
def test_bad_values_are_refused_naming_the_accepted_ones(gpu: ov.Core, value: object) -> None:
    with pytest.raises(PropertyError, match=r"OUTPUT_PRECISION.*MODEL, INFERENCE"):
        gpu.compile_model(_model(), "GPU.0", {"OUTPUT_PRECISION": value})


def test_multi_of_gpu_and_cpu_gives_every_request_the_lowered_type(gpu: ov.Core) -> None:
    """The GPU computes in f16 and hands it out; the CPU, hinted at nothing, converts its outputs."""
    compiled = gpu.compile_model(_model(), "MULTI:GPU.0,CPU", {
        "OUTPUT_PRECISION": "INFERENCE", "DEVICE_PROPERTIES": {"GPU": {"INFERENCE_PRECISION_HINT": "f16"}}})
    assert compiled.output("p").get_element_type() == ov.Type.f16
    queue = ov.AsyncInferQueue(compiled, 4)
    outcomes: list[dict[str, np.ndarray]] = []
    queue.set_callback(lambda request, _: outcomes.append({"p": request.results["p"].copy(),
                                                           "k": request.results["k"].copy()}))
    for _ in range(16):
        queue.start_async({"x": _input()})
    queue.wait_all()
    assert len(outcomes) == 16
    for outcome in outcomes:
        _check(outcome, "f16")


def test_hetero_gives_the_lowered_type(gpu: ov.Core) -> None:
    compiled = gpu.compile_model(_model(), "HETERO:GPU.0,CPU", {"INFERENCE_PRECISION_HINT": "f16",
                                                                 "OUTPUT_PRECISION": "INFERENCE"})
    assert compiled.output("p").get_element_type() == ov.Type.f16
    _check(compiled(_input()), "f16")


def test_members_hinted_at_two_lowered_precisions_are_refused(gpu: ov.Core) -> None:
    config = {"OUTPUT_PRECISION": "INFERENCE",
              "DEVICE_PROPERTIES": {"GPU": {"INFERENCE_PRECISION_HINT": "f16"},
                                    "CPU": {"INFERENCE_PRECISION_HINT": "bf16"}}}
    with pytest.raises(PropertyError, match=r"one lowered precision.*f16 on GPU\.0.*bf16 on CPU"):
        gpu.compile_model(_model(), "MULTI:GPU.0,CPU", config)


def _conversions(compiled: ov.CompiledModel) -> list[list[int]]:
    """The shapes of the tensors torch converts to another dtype (``aten::_to_copy``) in one inference."""
    compiled(_input())  # the first run out of the profile
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], record_shapes=True) as prof:
        compiled(_input())
    return [list(event.input_shapes[0]) for event in prof.events() if event.name == "aten::_to_copy"]


def test_no_conversion_of_the_outputs_runs(gpu: ov.Core) -> None:
    """With INFERENCE the f16 result is handed out as computed; with MODEL it is converted to f32.
    The f32 input's conversion to f16 runs in both."""
    config = {"INFERENCE_PRECISION_HINT": "f16", "CUDA_GRAPHS": False}
    declared = _conversions(gpu.compile_model(_model(), "GPU.0", {**config, "OUTPUT_PRECISION": "MODEL"}))
    lowered = _conversions(gpu.compile_model(_model(), "GPU.0", {**config, "OUTPUT_PRECISION": "INFERENCE"}))
    assert declared == [[4, 16], [4, 8]]  # the input x, the output p
    assert lowered == [[4, 16]]


def test_the_cpu_alone_gives_the_lowered_type_too(gpu: ov.Core) -> None:
    config = {"INFERENCE_PRECISION_HINT": "f16", "OUTPUT_PRECISION": "INFERENCE"}
    compiled = gpu.compile_model(_model(), "CPU", config)
    assert compiled.output("p").get_element_type() == ov.Type.f16
    _check(compiled(_input()), "f16")


def test_auto_and_an_exported_model_keep_the_lowered_type(gpu: ov.Core) -> None:
    config = {"INFERENCE_PRECISION_HINT": "f16", "OUTPUT_PRECISION": "INFERENCE"}
    auto = gpu.compile_model(_model(), "AUTO:GPU.0,CPU", config)
    assert auto.output("p").get_element_type() == ov.Type.f16
    _check(auto(_input()), "f16")
    imported = gpu.import_model(gpu.compile_model(_model(), "GPU.0", config).export_model(), "GPU.0")
    assert imported.output("p").get_element_type() == ov.Type.f16
    _check(imported(_input()), "f16")
