"""CompiledModel's OpenVINO surface, and HETERO configured one device at a time.

OpenVINO's ``test_compiled_model.py`` and the HETERO guide are the
specification; results are compared with raw ONNX Runtime on the whole model.
HETERO runs on two emulated GPUs (torch's CPU device) so it runs anywhere.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import inferplex as ov
from inferplex.errors import DeviceNameError

from conftest import make_model, ort_run

FLOAT = TensorProto.FLOAT


def _model() -> onnx.ModelProto:
    """x [2,4] -> relu_out = Relu(x+1), tanh_out = Tanh(Relu(x+1) @ W)."""
    one = numpy_helper.from_array(np.ones(4, np.float32), "one")
    weights = numpy_helper.from_array((np.arange(12, dtype=np.float32).reshape(4, 3) - 6) / 10, "W")
    return make_model(
        [helper.make_node("Add", ["x", "one"], ["s"], name="add"),
         helper.make_node("Relu", ["s"], ["relu_out"], name="relu"),
         helper.make_node("MatMul", ["relu_out", "W"], ["mm"], name="matmul"),
         helper.make_node("Tanh", ["mm"], ["tanh_out"], name="tanh")],
        [("x", FLOAT, [2, 4])], [("relu_out", FLOAT, [2, 4]), ("tanh_out", FLOAT, [2, 3])],
        [one, weights])


MODEL = _model()
ON_GPU = {"add", "relu"}
"""Ops placed on GPU.0 by manual affinity in the HETERO tests; the rest run on the CPU."""


def _feeds(seed: int) -> dict[str, np.ndarray]:
    return {"x": np.random.default_rng(seed).standard_normal((2, 4), dtype=np.float32)}


def _matches(results: ov.InferResults, feeds: dict[str, np.ndarray]) -> None:
    for got, want in zip(results.to_tuple(), ort_run(MODEL, feeds), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.fixture(scope="module")
def compiled(core: ov.Core) -> ov.CompiledModel:
    return core.compile_model(MODEL, "CPU")


def test_infer_new_request_and_call(compiled: ov.CompiledModel) -> None:
    feeds = _feeds(1)
    _matches(compiled.infer_new_request(feeds), feeds)
    _matches(compiled.infer_new_request(feeds["x"]), feeds)
    for share_inputs in (True, False):
        for share_outputs in (True, False):
            _matches(compiled(feeds, share_inputs, share_outputs), feeds)
            _matches(compiled(feeds, share_inputs=share_inputs, share_outputs=share_outputs), feeds)
    first, second = compiled.create_infer_request(), compiled.create_infer_request()
    first.infer(feeds)
    second.infer(_feeds(2))  # each request holds its own tensors
    _matches(first.infer(), feeds)


def test_ports(compiled: ov.CompiledModel) -> None:
    assert [p.any_name for p in compiled.inputs] == ["x"]
    assert [p.any_name for p in compiled.outputs] == ["relu_out", "tanh_out"]
    assert compiled.input() == compiled.input(0) == compiled.input("x") == compiled.inputs[0]
    assert compiled.output(1) == compiled.output("tanh_out") == compiled.outputs[1]
    assert list(compiled.output(1).shape) == [2, 3]


def _every_property_reads(compiled: ov.CompiledModel) -> None:
    keys = list(compiled.get_property("SUPPORTED_PROPERTIES"))
    assert "OPTIMAL_NUMBER_OF_INFER_REQUESTS" in keys and "EXECUTION_DEVICES" in keys
    for key in keys:
        compiled.get_property(key)  # each key it lists, it answers


def test_every_supported_property_reads(compiled: ov.CompiledModel) -> None:
    _every_property_reads(compiled)
    assert compiled.get_property("EXECUTION_DEVICES") == ["CPU"]


def test_runtime_model_on_one_device(compiled: ov.CompiledModel) -> None:
    runtime = compiled.get_runtime_model()
    assert isinstance(runtime, ov.Model)
    ops = {op.get_friendly_name(): op.get_rt_info() for op in runtime.get_ops()}
    assert set(ops) == {"add", "relu", "matmul", "tanh"}
    assert {info["affinity"] for info in ops.values()} == {"CPU"}
    assert sorted(int(info["execOrder"]) for info in ops.values()) == [0, 1, 2, 3]
    assert ops["matmul"]["layerType"] == "MatMul"
    feeds = _feeds(3)  # a Model like any other: it compiles and runs
    _matches(ov.Core().compile_model(runtime, "CPU").infer_new_request(feeds), feeds)


def test_release_memory_keeps_the_model_usable(compiled: ov.CompiledModel) -> None:
    request = compiled.create_infer_request()
    compiled.release_memory()
    feeds = _feeds(4)
    _matches(request.infer(feeds), feeds)


def test_an_empty_virtual_device_list_names_the_device(core: ov.Core) -> None:
    for virtual in ("HETERO", "MULTI", "AUTO"):
        with pytest.raises(DeviceNameError, match=f"{virtual} got an empty device list"):
            core.compile_model(MODEL, f"{virtual}:")


# --- HETERO, configured one device at a time ------------------------------------------------------


@pytest.fixture(scope="module")
def hetero(emulated_core: ov.Core) -> ov.CompiledModel:
    """The HETERO guide's setup: each device configured alone, priorities set on HETERO."""
    emulated_core.set_property("GPU", {"ENABLE_PROFILING": True})
    emulated_core.set_property("CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    emulated_core.set_property("HETERO", {"MULTI_DEVICE_PRIORITIES": "GPU,CPU"})
    model = emulated_core.read_model(MODEL)
    for op in model.get_ops():
        op.get_rt_info()["affinity"] = "GPU.0" if op.get_friendly_name() in ON_GPU else "CPU"
    try:
        yield emulated_core.compile_model(model, "HETERO")
    finally:
        emulated_core.set_property("GPU", {"ENABLE_PROFILING": False})


def test_hetero_returns_the_profiling_records_of_the_device_that_enabled_them(
        hetero: ov.CompiledModel) -> None:
    request = hetero.create_infer_request()
    feeds = _feeds(5)
    _matches(request.infer(feeds), feeds)
    records = request.get_profiling_info()
    ran = {r.node_name.split(": ")[-1] for r in records if r.node_type != "Transfer"}
    assert ran == ON_GPU  # the GPU's ops; the CPU was not asked to count
    assert all(r.status == ov.ProfilingInfo.Status.EXECUTED for r in records if r.node_name in ran)


def test_hetero_runtime_model_shows_each_ops_device(hetero: ov.CompiledModel) -> None:
    runtime = hetero.get_runtime_model()
    placed = {op.get_friendly_name(): op.get_rt_info()["affinity"] for op in runtime.get_ops()}
    assert placed == {name: "GPU.0" if name in ON_GPU else "CPU" for name in placed}
    assert set(placed) == {"add", "relu", "matmul", "tanh"}
    _every_property_reads(hetero)
    assert hetero.get_property("HETERO_NUMBER_OF_SUBMODELS") == 2


def _mixed_model() -> onnx.ModelProto:
    """A float op (Relu), then Shape (i64 out), as OpenVINO's runtime model tells them apart."""
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["r"], name="relu"),
         helper.make_node("Shape", ["r"], ["s"], name="shape")],
        "mixed", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4, 5])],
        [helper.make_tensor_value_info("r", TensorProto.FLOAT, [2, 3, 4, 5]),
         helper.make_tensor_value_info("s", TensorProto.INT64, [4])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 9
    return model


@pytest.mark.parametrize(("device", "hint", "precision"), [("CPU", "f32", "f32"), ("GPU.0", "f16", "f16")])
def test_runtime_model_says_each_ops_precision_as_openvino(emulated_core: ov.Core, device: str, hint: str,
                                                            precision: str) -> None:
    model = emulated_core.read_model(_mixed_model().SerializeToString())
    compiled = emulated_core.compile_model(model, device, {"INFERENCE_PRECISION_HINT": hint})
    ops = {op.get_friendly_name(): op for op in compiled.get_runtime_model().get_ops()}
    relu, shape = ops["relu"].get_rt_info(), ops["shape"].get_rt_info()
    assert relu["runtimePrecision"].astype(str) == precision  # OpenVINO's OVAny idiom
    assert relu["outputPrecisions"] == precision and relu["outputLayouts"] == "abcd"
    assert shape["runtimePrecision"] == "i64" and shape["outputLayouts"] == "a"
    assert relu["execTimeMcs"] == "not_executed" and relu["layerType"] == "Relu"
    assert int(relu["execOrder"].astype(int)) < int(shape["execOrder"])
    assert ops["relu"].get_output_size() == 1
    assert ops["relu"].get_output_element_type(0) == ov.Type.f32
    assert ops["relu"].get_output_partial_shape(0) == ov.PartialShape([2, 3, 4, 5])
    with pytest.raises(ov.errors.InputError, match=r"has 1 output.*index 1 is out of range"):
        ops["relu"].get_output_element_type(1)
