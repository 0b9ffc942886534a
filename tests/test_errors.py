"""Bad input gets an inferplex.errors error naming what was wrong and what is accepted.

One test per case; each checks the error type and both halves of the message.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from hooked_plugin import hooked_compile
from onnx import TensorProto, helper, numpy_helper

import inferplex as ov
from inferplex.errors import (
    DeviceNameError,
    InferplexError,
    InputError,
    InputTypeError,
    ModelError,
    PropertyError,
    RequestBusyError,
)

from conftest import make_model

FLOAT = TensorProto.FLOAT

MODEL = make_model(
    [helper.make_node("Add", ["a", "b"], ["c"], name="adder")],
    [("a", FLOAT, ["N", 3]), ("b", FLOAT, ["N", 3])],
    [("c", FLOAT, ["N", 3])])
GOOD = np.ones((2, 3), np.float32)


@pytest.fixture(scope="module")
def compiled(core: ov.Core) -> ov.CompiledModel:
    return core.compile_model(MODEL, "CPU")


def _raises(error_type: type[Exception], *fragments: str) -> Any:
    """pytest.raises for ``error_type`` whose message holds every fragment (literal text)."""
    return pytest.raises(error_type, match="(?s)" + "".join(f"(?=.*{re.escape(f)})" for f in fragments))


# --- inputs ---------------------------------------------------------------------------------------


def test_wrong_input_name(compiled: ov.CompiledModel) -> None:
    with _raises(InputError, "'bb'", "'a', 'b'"):
        compiled({"a": GOOD, "bb": GOOD})


def test_missing_input(compiled: ov.CompiledModel) -> None:
    with _raises(InputError, "missing input 'b'", "'a', 'b'"):
        compiled({"a": GOOD})


def test_wrong_rank(compiled: ov.CompiledModel) -> None:
    with _raises(InputError, "'a'", "rank 3", "[1, 2, 3]", "rank 2", "[N,3]"):
        compiled({"a": GOOD[None], "b": GOOD})


def test_wrong_static_dim(compiled: ov.CompiledModel) -> None:
    with _raises(InputError, "'b'", "[2, 4]", "[N,3]", "dimension 1 must be 3"):
        compiled({"a": GOOD, "b": np.ones((2, 4), np.float32)})


def test_inconsistent_symbolic_dim(compiled: ov.CompiledModel) -> None:
    with _raises(InputError, "'N'", "2 in input 'a'", "3 in input 'b'", "must agree"):
        compiled({"a": GOOD, "b": np.ones((3, 3), np.float32)})


def test_wrong_dtype(compiled: ov.CompiledModel) -> None:
    # Numbers of another dtype are converted (OpenVINO's data dispatcher); text cannot be.
    with _raises(InputError, "'a'", "cannot convert", "f32"):
        compiled({"a": np.full((2, 3), "x"), "b": GOOD})


def test_every_input_problem_is_reported_at_once(compiled: ov.CompiledModel) -> None:
    with _raises(InputError, "'a': cannot convert", "'b' has rank 1"):
        compiled({"a": np.full((2, 3), "x"), "b": np.ones(3, np.float32)})


def test_input_errors_do_not_break_the_request(compiled: ov.CompiledModel) -> None:
    request = compiled.create_infer_request()
    with pytest.raises(InputError):
        request.start_async({"a": GOOD})
    request.infer({"a": GOOD, "b": GOOD})  # not left busy by the refused start
    np.testing.assert_array_equal(request.results["c"], GOOD + GOOD)


# --- devices ---------------------------------------------------------------------------------------


def test_unknown_device(core: ov.Core) -> None:
    with _raises(DeviceNameError, "'NPU'", "available devices: CPU", "HETERO, MULTI, AUTO"):
        core.compile_model(MODEL, "NPU")


def test_absent_device_index(core: ov.Core) -> None:
    with _raises(DeviceNameError, "'CPU.3'", "CPU devices here: CPU"):
        core.compile_model(MODEL, "CPU.3")


@pytest.mark.parametrize("device, fragments", [
    ("cpu", ("'cpu'", "accepted: NAME, NAME.<index>", "'GPU.1'")),
    ("CPU:1", ("unknown virtual device 'CPU'", "accepted: HETERO, MULTI, AUTO")),
    ("FOO:CPU", ("'FOO'", "accepted: HETERO, MULTI, AUTO")),
    ("HETERO:", ("HETERO got an empty device list", "'GPU,CPU'")),
    ("MULTI:", ("MULTI got an empty device list", "'GPU,CPU'")),
    ("MULTI:CPU,,GPU", ("'CPU,,GPU'", "single commas with no spaces")),
    ("HETERO:CPU, GPU", ("'CPU, GPU'", "single commas with no spaces")),
    ("CPU(2)", ("'CPU(2)'", "only accepted in MULTI/AUTO")),
    ("HETERO:CPU(2)", ("'CPU(2)'", "only accepted in MULTI/AUTO")),
    ("MULTI:CPU,CPU", ("'CPU,CPU'", "CPU more than once")),
    ("AUTO:CPU,-GPU", ("'AUTO:CPU,-GPU'", "either a candidate list or exclusions")),
    ("MULTI:-CPU", ("'-CPU'", "only accepted in AUTO")),
    ("MULTI:CPU(0)", ("'CPU(0)'", "at least 1")),
    ("HETERO:AUTO", ("'HETERO:AUTO'", "virtual device cannot be listed")),
])
def test_malformed_device_string(core: ov.Core, device: str, fragments: tuple[str, ...]) -> None:
    with _raises(DeviceNameError, *fragments):
        core.compile_model(MODEL, device)


# --- properties ------------------------------------------------------------------------------------


def test_unknown_property_key(core: ov.Core) -> None:
    with _raises(PropertyError, "'NUM_STREAMZ'", "accepted keys:", "NUM_STREAMS", "PERFORMANCE_HINT"):
        core.set_property("CPU", {"NUM_STREAMZ": 2})


def test_unknown_property_key_in_compile_config(core: ov.Core) -> None:
    with _raises(PropertyError, "'HINT'", "accepted keys:", "PERFORMANCE_HINT"):
        core.compile_model(MODEL, "CPU", {"HINT": "LATENCY"})


@pytest.mark.parametrize("key, value, fragments", [
    ("PERFORMANCE_HINT", "FAST", ("'FAST'", "LATENCY, THROUGHPUT, CUMULATIVE_THROUGHPUT")),
    ("NUM_STREAMS", 0, ("NUM_STREAMS", "value 0", "integer >= 1")),
    ("NUM_STREAMS", 1.5, ("NUM_STREAMS", "1.5", "integer >= 1")),
    ("ENABLE_PROFILING", "maybe", ("'maybe'", "'YES'/'NO'")),
    ("MEMORY_LIMIT", "lots", ("'lots'", "'20GiB'")),
])
def test_bad_property_value(core: ov.Core, key: str, value: Any, fragments: tuple[str, ...]) -> None:
    with _raises(PropertyError, *fragments):
        core.set_property("CPU", {key: value})


def test_every_property_problem_is_reported_at_once(core: ov.Core) -> None:
    with _raises(PropertyError, "'FAST'", "'NOPE'"):
        core.compile_model(MODEL, "CPU", {"PERFORMANCE_HINT": "FAST", "NOPE": 1})


def test_cpu_onnx_runtime_engine_refuses_f16_precision(core: ov.Core) -> None:
    with _raises(PropertyError, "INFERENCE_PRECISION_HINT", "'f16'", "accepted: f32"):
        core.compile_model(MODEL, "CPU", {"INFERENCE_PRECISION_HINT": "f16", "ENGINE": "ONNXRUNTIME"})


def test_read_only_property_on_device(core: ov.Core) -> None:
    with _raises(PropertyError, "'FULL_DEVICE_NAME'", "read-only", "get_property"):
        core.set_property("CPU", {"FULL_DEVICE_NAME": "mine"})


def test_read_only_property_on_compiled_model(compiled: ov.CompiledModel) -> None:
    with _raises(PropertyError, "'OPTIMAL_NUMBER_OF_INFER_REQUESTS'", "read-only"):
        compiled.set_property({"OPTIMAL_NUMBER_OF_INFER_REQUESTS": 4})


def test_unknown_property_read(core: ov.Core, compiled: ov.CompiledModel) -> None:
    with _raises(PropertyError, "'NOPE'", "FULL_DEVICE_NAME", "NUM_STREAMS"):
        core.get_property("CPU", "NOPE")
    with _raises(PropertyError, "'NOPE'", "OPTIMAL_NUMBER_OF_INFER_REQUESTS"):
        compiled.get_property("NOPE")


# --- model files -------------------------------------------------------------------------------------


def test_missing_file(core: ov.Core, tmp_path: Path) -> None:
    path = tmp_path / "absent.onnx"
    with _raises(ModelError, str(path), "does not exist", "accepts a path to an .onnx file"):
        core.read_model(path)


def test_unreadable_file(core: ov.Core, tmp_path: Path) -> None:
    path = tmp_path / "garbage.onnx"
    path.write_bytes(b"\x08\x07 certainly not protobuf \xff\xff\xff")
    with _raises(ModelError, str(path), "not a readable ONNX model"):
        core.read_model(path)
    with _raises(ModelError, "not a readable ONNX model"):
        core.read_model(path.read_bytes())


def test_an_openvino_ir_file_is_named_as_such(core: ov.Core, tmp_path: Path) -> None:
    path = tmp_path / "model.xml"
    path.write_text('<?xml version="1.0"?>\n<net name="model" version="11"><layers/></net>\n')
    with _raises(ModelError, str(path), "OpenVINO IR", str(tmp_path / "model.bin"), "does not exist"):
        core.read_model(path, tmp_path / "model.bin")
    with _raises(ModelError, "OpenVINO IR"):  # no Result (or, without openvino, the package it needs)
        core.read_model(path.read_bytes())


def test_xml_that_is_not_an_openvino_ir_is_named_as_such(core: ov.Core, tmp_path: Path) -> None:
    path = tmp_path / "settings.xml"
    path.write_text('<?xml version="1.0"?>\n<config><device>CPU</device></config>\n')
    with _raises(ModelError, str(path), "not an OpenVINO IR", "OpenVINO IR .xml (with its .bin)"):
        core.read_model(path)


def test_a_folder_is_not_a_model(core: ov.Core, tmp_path: Path) -> None:
    with _raises(ModelError, "not a file", "path to an .onnx file"):
        core.read_model(tmp_path)


def test_unsupported_source_type(core: ov.Core) -> None:
    with _raises(InputTypeError, "int", "bytes, onnx.ModelProto or onnx_ir.Model"):
        core.read_model(3)  # a TypeError too, as OpenVINO raises for a model of the wrong type


def test_malformed_model(core: ov.Core) -> None:
    bad = onnx.ModelProto()
    bad.CopyFrom(MODEL)
    bad.graph.node[0].input[1] = "nowhere"
    with _raises(ModelError, "malformed", "'nowhere'", "adder", "onnx.checker"):
        core.read_model(bad)


def test_unknown_op_is_malformed(core: ov.Core) -> None:
    bad = onnx.ModelProto()
    bad.CopyFrom(MODEL)
    bad.graph.node[0].op_type = "Addd"
    with _raises(ModelError, "Addd", "adder", "onnx.checker"):
        core.read_model(bad.SerializeToString())


def _large_weight_model() -> onnx.ModelProto:
    """y = x @ w with w of 128 KiB: large enough that the checker is given a placeholder for it."""
    weights = np.ones((128, 256), np.float32)
    return make_model([helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")],
                      [("x", FLOAT, [2, 128])], [("y", FLOAT, [2, 256])],
                      [numpy_helper.from_array(weights, "w")])


def test_malformed_model_with_large_weights(core: ov.Core) -> None:
    # The checker sees the graph without the weights' bytes: its findings are the same.
    bad = _large_weight_model()
    bad.graph.node[0].input[0] = "nowhere"
    with _raises(ModelError, "malformed", "'nowhere'", "mm", "onnx.checker"):
        core.read_model(bad)


def test_large_weights_too_short_for_their_shape(core: ov.Core) -> None:
    bad = _large_weight_model()
    bad.graph.initializer[0].raw_data = bad.graph.initializer[0].raw_data[:-4]
    with _raises(ModelError, "malformed", "'w'", "131068 bytes", "[128, 256]", "FLOAT",
                 "131072 bytes required", "onnx.checker"):
        core.read_model(bad)
    with pytest.raises(onnx.checker.ValidationError, match="too small"):  # what the checker says of it
        onnx.checker.check_model(bad)


def test_large_constant_value_too_short_for_its_shape(core: ov.Core) -> None:
    value = numpy_helper.from_array(np.ones((128, 256), np.float32), "w_value")
    bad = make_model([helper.make_node("Constant", [], ["w"], name="weights", value=value),
                      helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")],
                     [("x", FLOAT, [2, 128])], [("y", FLOAT, [2, 256])])
    stored = bad.graph.node[0].attribute[0].t
    stored.raw_data = stored.raw_data[:1000]
    with _raises(ModelError, "malformed", "'w_value'", "1000 bytes", "131072 bytes required"):
        core.read_model(bad)
    with pytest.raises(onnx.checker.ValidationError, match="too small"):
        onnx.checker.check_model(bad)


def test_large_weights_with_two_data_fields(core: ov.Core) -> None:
    bad = _large_weight_model()
    bad.graph.initializer[0].float_data.append(1.0)
    with _raises(ModelError, "malformed", "'w'", "raw_data and float_data", "onnx.checker"):
        core.read_model(bad.SerializeToString())
    with pytest.raises(onnx.checker.ValidationError, match="one and only one value field"):
        onnx.checker.check_model(bad)


def _model_with_external_weights(folder: Path, location: str) -> Path:
    weights = numpy_helper.from_array(np.arange(6, dtype=np.float32).reshape(2, 3), "w")
    model = make_model([helper.make_node("Add", ["x", "w"], ["y"])],
                       [("x", FLOAT, [2, 3])], [("y", FLOAT, [2, 3])], [weights])
    onnx.external_data_helper.convert_model_to_external_data(
        model, all_tensors_to_one_file=True, location="weights.bin", size_threshold=0)
    for entry in model.graph.initializer[0].external_data:
        if entry.key == "location":
            entry.value = location
    path = folder / "model.onnx"
    path.write_bytes(model.SerializeToString())  # onnx.save_model would refuse such paths itself
    return path


@pytest.mark.parametrize("location", ["../secret.bin", "sub/../../secret.bin", "/etc/passwd"])
def test_external_data_leaving_the_model_folder_is_refused(core: ov.Core, tmp_path: Path,
                                                           location: str) -> None:
    folder = tmp_path / "model"
    folder.mkdir()
    (tmp_path / "secret.bin").write_bytes(np.zeros(6, np.float32).tobytes())
    path = _model_with_external_weights(folder, location)
    with _raises(ModelError, "outside the model's folder", f"'w' -> {location!r}",
                 "keep external data files next to the model"):
        core.read_model(path)


def test_external_data_without_a_folder_is_refused(core: ov.Core, tmp_path: Path) -> None:
    path = _model_with_external_weights(tmp_path, "weights.bin")
    with _raises(ModelError, "'w'", "needs a model read from a file"):
        core.read_model(path.read_bytes())


# --- requests ------------------------------------------------------------------------------------------


@pytest.mark.timeout(30)
def test_double_start_async_is_busy(core: ov.Core) -> None:
    gate = threading.Event()

    def gated(inputs: Mapping[str, Any], worker: int) -> None:
        assert gate.wait(20)

    compiled = hooked_compile(MODEL, None, gated)
    request = compiled.create_infer_request()
    calls: list[int] = []
    request.set_callback(calls.append, 1)
    request.start_async({"a": GOOD, "b": GOOD})
    try:
        with _raises(RequestBusyError, "still running", "wait()"):
            request.start_async({"a": GOOD, "b": GOOD})
        with _raises(RequestBusyError, "wait()"):
            request.infer({"a": GOOD, "b": GOOD})
        with _raises(RequestBusyError, "not ready", "wait()"):
            _ = request.results
    finally:
        gate.set()
    request.wait()
    assert calls == [1]  # the refused starts did not end the running request twice
    np.testing.assert_array_equal(request.results["c"], GOOD + GOOD)


def test_every_error_is_an_inferplex_error_and_a_value_error() -> None:
    for error_type in (ModelError, DeviceNameError, PropertyError, InputError):
        assert issubclass(error_type, InferplexError)
        assert issubclass(error_type, ValueError)
    assert issubclass(RequestBusyError, InferplexError)


@pytest.mark.parametrize("jobs", [-1, 2.5, "4", True])
def test_async_infer_queue_refuses_a_bad_job_count(compiled: ov.CompiledModel, jobs: Any) -> None:
    with _raises(PropertyError, "AsyncInferQueue jobs", "int >= 0", repr(jobs)):
        ov.AsyncInferQueue(compiled, jobs)


def test_async_infer_queue_takes_numpy_ints(compiled: ov.CompiledModel) -> None:
    assert len(ov.AsyncInferQueue(compiled, np.int64(3))) == 3
