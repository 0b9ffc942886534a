"""Float8 inputs and outputs on the CPU device, both engines, and across devices.

inferplex's arrays of float8 values are ml_dtypes' (``ov.Type.f8e4m3.to_dtype()``
and the like), on every device.  The reference is ONNX Runtime on the whole
model: its ``OrtValue`` typed by ONNX element type for float8 inputs, and its
output's bytes for float8 outputs (``run`` gives FLOAT8E4M3FN as uint8, the
others only through ``run_with_ort_values``).
"""

from __future__ import annotations

import ctypes
from typing import Any

import ml_dtypes
import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import ModelProto, TensorProto, helper

import inferplex as ov

ENGINES = ("OPENVINO", "ONNXRUNTIME")

FLOAT8: dict[int, Any] = {
    TensorProto.FLOAT8E4M3FN: ml_dtypes.float8_e4m3fn, TensorProto.FLOAT8E5M2: ml_dtypes.float8_e5m2,
    TensorProto.FLOAT8E4M3FNUZ: ml_dtypes.float8_e4m3fnuz,
    TensorProto.FLOAT8E5M2FNUZ: ml_dtypes.float8_e5m2fnuz}
OPENVINO_READS = (TensorProto.FLOAT8E4M3FN, TensorProto.FLOAT8E5M2)
"""The float8 types OpenVINO's ONNX frontend reads (FNUZ ones run on ONNX Runtime)."""

X = np.array([[0.3, -1.1, 2.7], [3.3, 200.0, -0.02]], np.float32)
"""Values every float8 type holds the range of: OpenVINO casts these as ONNX does."""
OUT_OF_RANGE = np.array([[1e6, -np.inf, np.inf], [-1e6, 0.3, 3.3]], np.float32)
"""Values ONNX's casts and QuantizeLinear saturate to the largest finite float8 by default."""


def _model(nodes: list[Any], inputs: list[tuple[str, int]], outputs: list[tuple[str, int]],
           initializers: list[Any] = ()) -> ModelProto:  # type: ignore[assignment]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(n, t, [2, 3]) for n, t in inputs],
                              [helper.make_tensor_value_info(n, t, [2, 3]) for n, t in outputs],
                              list(initializers))
    # IR 10 (float8 needs 9 or later): a newer onnx writes an IR its ONNX Runtime may not read yet
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)


def _cast_to(to: int) -> ModelProto:
    return _model([helper.make_node("Cast", ["x"], ["y"], to=to)], [("x", TensorProto.FLOAT)], [("y", to)])


def _quantize_to(to: int, scale: float) -> ModelProto:
    return _model([helper.make_node("QuantizeLinear", ["x", "scale", "zero"], ["y"])],
                  [("x", TensorProto.FLOAT)], [("y", to)],
                  [helper.make_tensor("scale", TensorProto.FLOAT, [], [scale]),
                   helper.make_tensor("zero", to, [], [0.0])])


def _reference(model: ModelProto, feed: dict[str, np.ndarray], float8_outputs: dict[str, Any]) -> list[Any]:
    """ONNX Runtime's outputs of ``model``: float8 inputs fed as typed OrtValues, float8 outputs
    read as their bytes, viewed as ml_dtypes' type."""
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    inputs = {}
    for port in session.get_inputs():
        array = np.ascontiguousarray(feed[port.name])
        onnx_type = next((t for t, d in FLOAT8.items() if np.dtype(d) == array.dtype), None)
        inputs[port.name] = (ort.OrtValue.ortvalue_from_numpy_with_onnx_type(array.view(np.uint8), onnx_type)
                             if onnx_type else ort.OrtValue.ortvalue_from_numpy(array))
    names = [port.name for port in session.get_outputs()]
    results = []
    for name, value in zip(names, session.run_with_ort_values(names, inputs), strict=True):
        if name not in float8_outputs:
            results.append(value.numpy())
            continue
        octets = (ctypes.c_uint8 * value.tensor_size_in_bytes()).from_address(value.data_ptr())
        bits = np.frombuffer(octets, np.uint8).copy()
        results.append(bits.view(float8_outputs[name]).reshape(value.shape()))
    return results


def _engines(to: int) -> list[str]:
    return list(ENGINES) if to in OPENVINO_READS else ["ONNXRUNTIME"]


@pytest.mark.parametrize("to", list(FLOAT8), ids=[TensorProto.DataType.Name(t) for t in FLOAT8])
def test_a_float8_output_is_ml_dtypes_float8_with_onnx_runtimes_bits(core: ov.Core, to: int) -> None:
    model = _cast_to(to)
    (expected,) = _reference(model, {"x": X}, {"y": FLOAT8[to]})
    for engine in _engines(to):
        compiled = core.compile_model(core.read_model(model.SerializeToString()), "CPU", {"ENGINE": engine})
        assert compiled.get_property("ENGINE") == engine
        result = compiled({"x": X})["y"]
        assert result.dtype == np.dtype(FLOAT8[to]) == compiled.outputs[0].element_type.to_dtype()
        np.testing.assert_array_equal(result.view(np.uint8), expected.view(np.uint8))


def test_e4m3fn_bits_are_onnx_runtimes_uint8_view(core: ov.Core) -> None:
    """ONNX Runtime's plain ``run`` gives FLOAT8E4M3FN outputs as uint8: the same bytes."""
    model = _cast_to(TensorProto.FLOAT8E4M3FN)
    (bits,) = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, {"x": X})
    assert bits.dtype == np.uint8
    result = core.compile_model(core.read_model(model.SerializeToString()), "CPU")({"x": X})["y"]
    np.testing.assert_array_equal(result.view(np.uint8), bits)


@pytest.mark.parametrize("engine", ENGINES)
def test_quantize_linear_to_float8_then_dequantize(core: ov.Core, engine: str) -> None:
    to = TensorProto.FLOAT8E4M3FN
    nodes = [helper.make_node("QuantizeLinear", ["x", "scale", "zero"], ["q"]),
             helper.make_node("DequantizeLinear", ["q", "scale", "zero"], ["d"])]
    initializers = [helper.make_tensor("scale", TensorProto.FLOAT, [], [0.5]),
                    helper.make_tensor("zero", to, [], [0.0])]
    model = _model(nodes, [("x", TensorProto.FLOAT)], [("q", to), ("d", TensorProto.FLOAT)], initializers)
    q_ref, d_ref = _reference(model, {"x": X}, {"q": FLOAT8[to]})
    compiled = core.compile_model(core.read_model(model.SerializeToString()), "CPU", {"ENGINE": engine})
    results = compiled({"x": X})
    assert results["q"].dtype == np.dtype(FLOAT8[to])
    np.testing.assert_array_equal(results["q"].view(np.uint8), q_ref.view(np.uint8))
    np.testing.assert_array_equal(results["d"], d_ref)


@pytest.mark.parametrize("to", list(FLOAT8), ids=[TensorProto.DataType.Name(t) for t in FLOAT8])
def test_a_float8_input_takes_ml_dtypes_arrays(core: ov.Core, to: int) -> None:
    model = _model([helper.make_node("Cast", ["x"], ["y"], to=TensorProto.FLOAT)],
                   [("x", to)], [("y", TensorProto.FLOAT)])
    x = X.astype(FLOAT8[to])
    (expected,) = _reference(model, {"x": x}, {})
    for engine in _engines(to):
        compiled = core.compile_model(core.read_model(model.SerializeToString()), "CPU", {"ENGINE": engine})
        np.testing.assert_array_equal(compiled({"x": x})["y"], expected)
        request = compiled.create_infer_request()  # the same through a request's own input tensor
        request.get_input_tensor(0).data[:] = x
        request.infer()
        np.testing.assert_array_equal(request.get_output_tensor(0).data, expected)


def _through_float8() -> ModelProto:
    """x -> float8 (node "to8") -> float32 y (node "back") -> float8 z (node "again")."""
    to = TensorProto.FLOAT8E5M2
    nodes = [helper.make_node("Cast", ["x"], ["h"], to=to, name="to8"),
             helper.make_node("Cast", ["h"], ["y"], to=TensorProto.FLOAT, name="back"),
             helper.make_node("Cast", ["y"], ["z"], to=to, name="again")]
    return _model(nodes, [("x", TensorProto.FLOAT)], [("y", TensorProto.FLOAT), ("z", to)])


def _placed(core: ov.Core, model: ModelProto, affinities: tuple[str, str, str]) -> ov.Model:
    """``model`` read with nodes to8, back and again placed on ``affinities``."""
    split = core.read_model(model.SerializeToString())
    for op in split.get_ops():
        if op.get_friendly_name() in ("to8", "back", "again"):
            op.get_rt_info()["affinity"] = affinities[("to8", "back", "again").index(op.get_friendly_name())]
    return split


@pytest.mark.parametrize("affinities", [("GPU.0", "CPU", "GPU.0"), ("CPU", "GPU.0", "CPU")])
@pytest.mark.parametrize("engine", ENGINES)
def test_hetero_hands_float8_tensors_between_cpu_and_gpu(emulated_core: ov.Core, engine: str,
                                                         affinities: tuple[str, str, str]) -> None:
    """Float8 tensors cross a HETERO boundary either way, and every device gives the same results."""
    model = _through_float8()
    y_ref, z_ref = _reference(model, {"x": X}, {"z": ml_dtypes.float8_e5m2})
    split = _placed(emulated_core, model, affinities)
    config = {"DEVICE_PROPERTIES": {"CPU": {"ENGINE": engine}}}
    runs = {"HETERO": emulated_core.compile_model(split, "HETERO:GPU.0,CPU", config)}
    for device in ("GPU.0", "MULTI:GPU.0,CPU", "AUTO:GPU.0,CPU"):
        whole = emulated_core.read_model(model.SerializeToString())
        runs[device] = emulated_core.compile_model(whole, device, config if device != "GPU.0" else {})
    assert runs["HETERO"].get_property("HETERO_NUMBER_OF_SUBMODELS") == 3
    for device, compiled in runs.items():
        results = compiled({"x": X})
        assert results["z"].dtype == np.dtype(ml_dtypes.float8_e5m2), device
        np.testing.assert_array_equal(results["y"], y_ref, err_msg=device)
        np.testing.assert_array_equal(results["z"].view(np.uint8), z_ref.view(np.uint8), err_msg=device)


@pytest.mark.parametrize("op", ["Cast", "QuantizeLinear"])
@pytest.mark.parametrize("to", OPENVINO_READS, ids=[TensorProto.DataType.Name(t) for t in OPENVINO_READS])
def test_saturating_float8_casts_are_onnxs_on_the_default_engine_and_the_gpu(
        emulated_core: ov.Core, op: str, to: int) -> None:
    """OpenVINO does not saturate Cast to float8 (nor quantize NaN as ONNX does): the default engine
    leaves such models to ONNX Runtime, saying why, and agrees with the GPU."""
    model = _cast_to(to) if op == "Cast" else _quantize_to(to, 1.0)
    (expected,) = _reference(model, {"x": OUT_OF_RANGE}, {"y": FLOAT8[to]})
    cpu = emulated_core.compile_model(emulated_core.read_model(model.SerializeToString()), "CPU")
    assert cpu.get_property("ENGINE") == "ONNXRUNTIME"
    assert f"computes {op} to float8" in cpu.get_property("ENGINE_FALLBACK_REASON")
    for compiled in (cpu, emulated_core.compile_model(emulated_core.read_model(model.SerializeToString()),
                                                      "GPU.0")):
        result = compiled({"x": OUT_OF_RANGE})["y"]
        assert result.dtype == np.dtype(FLOAT8[to])
        np.testing.assert_array_equal(result.view(np.uint8), expected.view(np.uint8))


def test_where_onnx_runtime_has_no_kernel_openvino_runs_the_float8_model(core: ov.Core) -> None:
    """ONNX Runtime has no QuantizeLinear kernel at the newest opset: the default engine stays on
    OpenVINO rather than failing, and gives ONNX's values for in-range inputs."""
    to = TensorProto.FLOAT8E4M3FN
    model = _quantize_to(to, 0.5)
    newest = onnx.defs.onnx_opset_version()
    model.opset_import[0].version = newest
    with pytest.raises(Exception, match="QuantizeLinear"):  # raw ONNX Runtime cannot compile it
        ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    compiled = core.compile_model(core.read_model(model.SerializeToString()), "CPU")
    assert compiled.get_property("ENGINE") == "OPENVINO"
    expected = (X / 0.5).astype(ml_dtypes.float8_e4m3fn)  # round to nearest even, in range
    np.testing.assert_array_equal(compiled({"x": X})["y"].view(np.uint8), expected.view(np.uint8))


@pytest.mark.gpu
@pytest.mark.parametrize("to", OPENVINO_READS, ids=[TensorProto.DataType.Name(t) for t in OPENVINO_READS])
def test_cpu_and_a_cuda_gpu_agree_on_float8(to: int) -> None:
    """On a CUDA GPU: float8 outputs of Cast and QuantizeLinear, and a float8 tensor handed from the
    GPU to the CPU inside HETERO, have ONNX Runtime's bits on both devices."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    core = ov.Core()
    for model in (_cast_to(to), _quantize_to(to, 0.5)):
        for device in ("CPU", "GPU.0", "AUTO:GPU.0,CPU"):
            compiled = core.compile_model(core.read_model(model.SerializeToString()), device)
            for x in (X, OUT_OF_RANGE):
                (expected,) = _reference(model, {"x": x}, {"y": FLOAT8[to]})
                result = compiled({"x": x})["y"]
                assert result.dtype == np.dtype(FLOAT8[to]), device
                np.testing.assert_array_equal(result.view(np.uint8), expected.view(np.uint8), err_msg=device)
    model = _through_float8()
    y_ref, z_ref = _reference(model, {"x": X}, {"z": ml_dtypes.float8_e5m2})
    split = _placed(core, model, ("GPU.0", "CPU", "GPU.0"))
    results = core.compile_model(split, "HETERO:GPU.0,CPU")({"x": X})
    np.testing.assert_array_equal(results["y"], y_ref)
    np.testing.assert_array_equal(results["z"].view(np.uint8), z_ref.view(np.uint8))


@pytest.mark.parametrize("dtype", [ml_dtypes.float8_e5m2, ml_dtypes.float8_e4m3fn])
def test_a_tensor_holds_float8_arrays_of_either_numpy_kind(dtype: Any) -> None:
    """ml_dtypes' float8_e5m2 is of numpy kind 'f' with no buffer format; the others of kind 'V'."""
    values = X.astype(dtype)
    shared = ov.Tensor(values, shared_memory=True)
    assert shared.element_type == ov.Type(np.dtype(dtype)) and shared.shape == list(values.shape)
    assert np.shares_memory(shared.data, values)
    np.testing.assert_array_equal(ov.Tensor(values).data.view(np.uint8), values.view(np.uint8))
