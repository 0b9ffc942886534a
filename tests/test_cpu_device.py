"""The CPU device's support answer and model hand-over to ONNX Runtime (devices/cpu.py)."""

from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper, numpy_helper

import inferplex as ov


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
