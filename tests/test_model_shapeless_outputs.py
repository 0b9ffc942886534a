"""Graph outputs declared with an element type and no shape, as exporters write them.

ONNX Runtime and OpenVINO run such models; ``read_model`` reads them from every
source, the output's shape is what ONNX shape inference finds (as OpenVINO's
read_model shows ``[?,4]``), or dynamic where it finds none, and every device
gives ONNX Runtime's results on the whole model.  (onnx's checker wants a shape
on the main graph's inputs and outputs; read_model's check leaves that rule out
for outputs.)
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import inferplex as ov
from inferplex.errors import ModelError

from conftest import ort_run

LARGE = (64, 512)
"""A weight past the size read_model's checker copy leaves out (128 KiB of float32)."""


@pytest.fixture(scope="module")
def core() -> Iterator[ov.Core]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("INFERPLEX_EMULATED_GPUS", "2")
        yield ov.Core()


def _model(weight_shape: tuple[int, int] = (3, 4)) -> onnx.ModelProto:
    """y = relu(x @ w) and s = Shape(x @ w), both declared with a type and no shape."""
    weight = np.random.default_rng(0).standard_normal(weight_shape).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Relu", ["h"], ["y"]),
             helper.make_node("Shape", ["h"], ["s"])]
    graph = helper.make_graph(
        nodes, "shapeless", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", weight_shape[0]])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None),
         helper.make_tensor_value_info("s", TensorProto.INT64, None)],
        [numpy_helper.from_array(weight, "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    assert not model.graph.output[0].type.tensor_type.HasField("shape")
    return model


def _input(model: onnx.ModelProto) -> np.ndarray:
    rows = model.graph.initializer[0].dims[0]
    return np.random.default_rng(1).standard_normal((2, rows)).astype(np.float32)


def _check(compiled: ov.CompiledModel, model: onnx.ModelProto) -> None:
    x = _input(model)
    y_ref, s_ref = ort_run(model, {"x": x})
    results = compiled({"x": x})
    np.testing.assert_allclose(results["y"], y_ref, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(results["s"], s_ref)
    assert results["y"].dtype == np.float32 and results["s"].dtype == np.int64


INFERRED = [ov.PartialShape("[?,4]"), ov.PartialShape([2])]
"""The outputs' shapes as OpenVINO's read_model gives them (ONNX shape inference's)."""


def test_read_from_every_source_with_inferred_output_shapes(core: ov.Core, tmp_path: Path) -> None:
    model = _model()
    path = tmp_path / "m.onnx"
    onnx.save(model, str(path))
    for source in (model, model.SerializeToString(), str(path), path):
        read = core.read_model(source)
        assert [port.get_element_type() for port in read.outputs] == [ov.Type.f32, ov.Type.i64]
        assert [port.get_partial_shape() for port in read.outputs] == INFERRED
        assert read.inputs[0].get_partial_shape() == ov.PartialShape("[?,3]")  # declared shapes stay
        _check(core.compile_model(read, "CPU"), model)


def test_an_output_shape_inference_cannot_tell_stays_dynamic(core: ov.Core) -> None:
    """The output of a contrib op with no shape twin (ONNX Runtime's com.microsoft CDist; those
    with one are in ``test_contrib_shapes.py``): no shape from ONNX's inference."""
    nodes = [helper.make_node("Relu", ["x"], ["h"]),
             helper.make_node("CDist", ["h", "h"], ["y"], domain="com.microsoft")]
    graph = helper.make_graph(nodes, "contrib",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                    helper.make_opsetid("com.microsoft", 1)])
    read = core.read_model(model)
    assert read.outputs[0].get_partial_shape().rank.is_dynamic
    x = np.linspace(-2, 2, 6, dtype=np.float32).reshape(2, 3)
    (expected,) = ort_run(model, {"x": x})
    np.testing.assert_allclose(core.compile_model(read, "CPU")({"x": x})["y"], expected, rtol=1e-6)


@pytest.mark.parametrize("device", ["CPU", "GPU.0", "HETERO:GPU.0,CPU", "MULTI:GPU.0,CPU", "AUTO"])
def test_every_device_runs_them_as_onnx_runtime_does(core: ov.Core, device: str) -> None:
    model = _model()
    compiled = core.compile_model(core.read_model(model), device)
    assert [port.get_partial_shape() for port in compiled.outputs] == INFERRED
    _check(compiled, model)


def test_split_across_devices(core: ov.Core) -> None:
    model = _model()
    read = core.read_model(model)
    for op in read.get_ops():
        if op.get_type_name() in ("Relu", "Shape"):
            op.get_rt_info()["affinity"] = "CPU"
        elif op.get_type_name() == "MatMul":
            op.get_rt_info()["affinity"] = "GPU.0"
    _check(core.compile_model(read, "HETERO:GPU.0,CPU"), model)
    config = {"MODEL_DISTRIBUTION_POLICY": "PIPELINE_PARALLEL"}
    _check(core.compile_model(core.read_model(model), "HETERO:GPU.0,GPU.1", config), model)


def test_onnx_runtime_engine_and_request_tensors(core: ov.Core) -> None:
    model = _model()
    compiled = core.compile_model(core.read_model(model), "CPU", {"ENGINE": "ONNXRUNTIME"})
    _check(compiled, model)
    request = compiled.create_infer_request()
    x = _input(model)
    request.infer({"x": x})
    y_ref, s_ref = ort_run(model, {"x": x})
    assert request.get_output_tensor(0).shape == y_ref.shape
    np.testing.assert_array_equal(request.get_tensor("s").data, s_ref)


def test_large_weights_and_external_data(core: ov.Core, tmp_path: Path) -> None:
    """The checker's copy leaves large weights out and reads external data from the model's folder."""
    model = _model(LARGE)
    _check(core.compile_model(core.read_model(model), "CPU"), model)
    path = tmp_path / "external.onnx"
    saved = onnx.ModelProto()
    saved.CopyFrom(model)  # onnx.save moves the copy's weights out, in place
    onnx.save(saved, str(path), save_as_external_data=True, location="external.bin", size_threshold=0)
    assert (tmp_path / "external.bin").is_file()
    _check(core.compile_model(core.read_model(path), "CPU"), model)


def test_reshape_gives_the_outputs_inferred_shapes(core: ov.Core) -> None:
    read = core.read_model(_model())
    read.reshape({"x": [5, 3]})
    shapes = [port.get_partial_shape() for port in read.outputs]
    assert shapes == [ov.PartialShape([5, 4]), ov.PartialShape([2])]


def test_an_output_with_neither_type_nor_shape_is_still_refused(core: ov.Core) -> None:
    model = _model()
    model.graph.output[0].ClearField("type")
    with pytest.raises(ModelError, match=r"malformed ONNX model.*type"):
        core.read_model(model)
