"""The CPU device's support answer and model hand-over to its engines (devices/cpu/)."""

from __future__ import annotations

import numpy as np
import onnx
import onnx_ir as ir
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import inferplex as ov
from inferplex.devices.cpu.onnxruntime_engine import serialize_for_ort as _serialize


def _constant_model(ir_version: int | None = None) -> object:
    two = helper.make_node("Constant", [], ["two"], value=numpy_helper.from_array(np.float32(2.0), "two"))
    mul = helper.make_node("Mul", ["x", "two"], ["y"])
    graph = helper.make_graph([two, mul], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    if ir_version is not None:
        model.ir_version = ir_version
    return model


def test_constant_nodes_are_supported_though_ort_has_no_kernel_for_them() -> None:
    core = ov.Core()
    model = core.read_model(_constant_model())
    assert core.query_model(model, "CPU") == {"Constant_0": "CPU", "Mul_1": "CPU"}


def test_a_model_stamped_with_a_newer_ir_version_than_ort_reads_still_runs() -> None:
    # onnx.helper stamps its newest IR version; ONNX Runtime may read only older ones.
    model = _constant_model(ir_version=14)
    x = np.array([1.0, -2.0, 3.5], np.float32)
    result = ov.Core().compile_model(model, "CPU")({"x": x})
    np.testing.assert_array_equal(result["y"], x * 2)


def _weighted_model() -> onnx.ModelProto:
    """y = relu(x @ w + b) + cast(c): w large (f32), b small, c a large bfloat16 constant."""
    rng = np.random.default_rng(3)
    w = rng.standard_normal((256, 64)).astype(np.float32)
    b = rng.standard_normal(64).astype(np.float32)
    c = helper.make_tensor("c", TensorProto.BFLOAT16, [64], rng.standard_normal(64).tolist())
    c_big = helper.make_tensor("c_big", TensorProto.BFLOAT16, [8, 64], rng.standard_normal(512).tolist())
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["xw"]),
        helper.make_node("Add", ["xw", "b"], ["pre"]),
        helper.make_node("Relu", ["pre"], ["act"]),
        helper.make_node("Cast", ["c_big"], ["c_big_f"], to=TensorProto.FLOAT),
        helper.make_node("ReduceSum", ["c_big_f", "axis"], ["c_sum"], keepdims=0),
        helper.make_node("Cast", ["c"], ["c_f"], to=TensorProto.FLOAT),
        helper.make_node("Add", ["act", "c_f"], ["with_c"]),
        helper.make_node("Add", ["with_c", "c_sum"], ["y"]),
    ]
    inits = [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b"), c, c_big,
             numpy_helper.from_array(np.array([0], np.int64), "axis")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 256])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 64])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_large_initializers_reach_onnx_runtime_outside_the_serialized_model() -> None:
    model = _weighted_model()
    data, initializers = _serialize(ir.serde.deserialize_model(model))
    assert [name for name, _ in initializers] == ["w"]  # b is small, c_big is bfloat16: both stay inside
    assert len(data) < 256 * 64 * 4 // 8
    handed = {t.name: t for t in onnx.load_from_string(data).graph.initializer}
    assert handed["w"].data_location == TensorProto.EXTERNAL and not handed["w"].raw_data
    assert handed["c_big"].data_location == handed["b"].data_location == TensorProto.DEFAULT


def test_a_model_with_large_initializers_matches_onnx_runtime_on_the_whole_model() -> None:
    model = _weighted_model()
    x = np.random.default_rng(4).standard_normal((5, 256)).astype(np.float32)
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, {"x": x})[0]
    for hint in ("LATENCY", "THROUGHPUT"):  # one session, then several sharing the initializers' values
        compiled = ov.Core().compile_model(model, "CPU", {"PERFORMANCE_HINT": hint})
        requests = [compiled.create_infer_request() for _ in range(3)]
        for request in requests:
            np.testing.assert_allclose(request.infer({"x": x})["y"], want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("engine", ["OPENVINO", "ONNXRUNTIME"])
def test_run_into_hands_the_worker_on_once_after_the_run_also_when_it_fails(engine: str) -> None:
    """DeviceProgram.run_into's ``queued`` for a device that does not queue runs (the CPU): called
    once, after the run, and also when it fails; the result is ONNX Runtime's."""
    from inferplex.devices.cpu import CpuPlugin

    model = _weighted_model()
    program = CpuPlugin().compile(ir.serde.deserialize_model(model), "CPU", {"ENGINE": engine})
    x = np.random.default_rng(5).standard_normal((2, 256)).astype(np.float32)
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, {"x": x})[0]
    calls: list[str] = []
    out = program.run_into({"x": x}, 0, lambda name, dtype, shape: None, lambda: calls.append("ok"))
    np.testing.assert_allclose(out["y"], want, rtol=1e-5, atol=1e-5)
    # Past the compiled model's input checks, the engine's own error comes back as one of ours.
    with pytest.raises(ov.errors.InferenceError, match=r"inference failed on CPU: "):
        program.run_into({"x": x[:, :100]}, 0, lambda name, dtype, shape: None,
                         lambda: calls.append("failed"))
    assert calls == ["ok", "failed"]
    program.close()
    program.close()  # idempotent
    with pytest.raises(ov.errors.InferenceError, match="the program on CPU was closed"):
        program.run({"x": x}, 0)


def test_a_run_that_onnx_runtime_fails_ends_with_an_inference_error_naming_the_cpu() -> None:
    """A failure inside the model (a Reshape to a shape its data does not fit, given as an input)
    comes back through the public API as inferplex's InferenceError with ONNX Runtime's reason;
    a shape that fits gives ONNX Runtime's own result."""
    graph = helper.make_graph(
        [helper.make_node("Reshape", ["x", "shape"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 6]),
         helper.make_tensor_value_info("shape", TensorProto.INT64, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["A", "B"])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    x = np.arange(12, dtype=np.float32).reshape(2, 6)
    request = ov.Core().compile_model(model, "CPU").create_infer_request()
    fits = {"x": x, "shape": np.array([3, 4], np.int64)}
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    want = session.run(None, fits)[0]
    np.testing.assert_array_equal(request.infer(fits)["y"], want)
    with pytest.raises(ov.errors.InferenceError, match=r"inference failed on CPU: .*Reshape"):
        request.infer({"x": x, "shape": np.array([5, 5], np.int64)})
    np.testing.assert_array_equal(request.infer(fits)["y"], want)  # the request serves on
