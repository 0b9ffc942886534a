"""The CPU device checked as an OpenVINO user checks it: the same program run with raw OpenVINO
(``import openvino``) is the reference for what each property reads back."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

import inferplex as ov
from inferplex.errors import InferenceError

from conftest import mlp_model

openvino = pytest.importorskip("openvino")


def _mlp() -> Any:
    return mlp_model(4, seed=3)


X = np.random.default_rng(4).standard_normal((4, 32)).astype(np.float32)


def _raw(config: dict[str, Any]) -> Any:
    core = openvino.Core()
    return core.compile_model(core.read_model(_mlp().SerializeToString(), b""), "CPU", config)


def _name(value: Any) -> str:
    """An enum read back (OpenVINO's or inferplex's) as its bare name: ``THROUGHPUT``, ``ANY_CORE``."""
    return str(getattr(value, "name", value)).rsplit(".", 1)[-1]


_STREAM_KEYS = ("NUM_STREAMS", "INFERENCE_NUM_THREADS", "PERFORMANCE_HINT_NUM_REQUESTS")


@pytest.mark.parametrize("config", [
    {"NUM_STREAMS": "AUTO"},
    {"NUM_STREAMS": -1},  # OpenVINO's integer code of AUTO
    {"NUM_STREAMS": "-1"},
    {"NUM_STREAMS": "AUTO", "PERFORMANCE_HINT": "LATENCY"},
    {"NUM_STREAMS": "AUTO", "PERFORMANCE_HINT_NUM_REQUESTS": 1},
    {"NUM_STREAMS": "AUTO", "PERFORMANCE_HINT": "CUMULATIVE_THROUGHPUT"},
    {"PERFORMANCE_HINT": "CUMULATIVE_THROUGHPUT", "NUM_STREAMS": 1},
    {"PERFORMANCE_HINT": "THROUGHPUT", "PERFORMANCE_HINT_NUM_REQUESTS": 1},
])
def test_hint_and_streams_read_back_as_openvinos_compiled_model(config: dict[str, Any]) -> None:
    """NUM_STREAMS=AUTO is OpenVINO's THROUGHPUT streams whatever the hint, and the hint then reads
    THROUGHPUT; every threading property of the compiled model is raw OpenVINO's for the same config,
    and the requests are OpenVINO's one per stream, two per stream under THROUGHPUT when
    PERFORMANCE_HINT_NUM_REQUESTS does not cap them."""
    compiled = ov.Core().compile_model(_mlp(), "CPU", config)
    raw = _raw(config)
    for key in _STREAM_KEYS:
        assert int(compiled.get_property(key)) == int(raw.get_property(key)), key
    for key in ("PERFORMANCE_HINT", "SCHEDULING_CORE_TYPE"):
        assert _name(compiled.get_property(key)) == _name(raw.get_property(key)), key
    for key in ("ENABLE_HYPER_THREADING", "ENABLE_CPU_PINNING"):
        assert compiled.get_property(key) == raw.get_property(key), key
    per_stream = 2 if _name(raw.get_property("PERFORMANCE_HINT")) == "THROUGHPUT" and not config.get(
        "PERFORMANCE_HINT_NUM_REQUESTS") else 1
    queue = ov.AsyncInferQueue(compiled)
    assert len(queue) == compiled.get_property("OPTIMAL_NUMBER_OF_INFER_REQUESTS") == (
        per_stream * raw.get_property("OPTIMAL_NUMBER_OF_INFER_REQUESTS"))
    session = ort.InferenceSession(_mlp().SerializeToString(), providers=["CPUExecutionProvider"])
    want = session.run(None, {"x": X})[0]
    # f32 exactly as ONNX Runtime; bf16/f16 (OpenVINO's default on AMX CPUs) within their mantissa
    f32 = compiled.get_property("INFERENCE_PRECISION_HINT") == ov.Type.f32
    rtol, atol = (1e-5, 1e-6) if f32 else (0.0, 2e-2)
    results: dict[int, np.ndarray] = {}
    queue.set_callback(lambda request, index: results.__setitem__(index, request.results["y"].copy()))
    for index in range(4):
        queue.start_async({"x": X}, index)
    queue.wait_all()
    assert sorted(results) == [0, 1, 2, 3]
    for got in results.values():
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)


def test_typed_num_streams_auto_and_the_core_level_setting_act_alike() -> None:
    """``streams.Num.AUTO`` and ``NUM_STREAMS=AUTO`` set on the Core give the streams that
    ``"AUTO"`` in the compile config gives, and the Core's OPTIMAL_NUMBER_OF_INFER_REQUESTS says so
    (two requests per stream: NUM_STREAMS=AUTO is the THROUGHPUT hint's)."""
    raw = _raw({"NUM_STREAMS": "AUTO"})
    auto = ov.properties.streams.Num.AUTO
    typed = ov.Core().compile_model(_mlp(), "CPU", {ov.properties.num_streams: auto})
    core = ov.Core()
    core.set_property("CPU", {"NUM_STREAMS": "AUTO"})
    on_core = core.compile_model(_mlp(), "CPU")
    for compiled in (typed, on_core):
        assert compiled.get_property("NUM_STREAMS") == raw.get_property("NUM_STREAMS")
        assert compiled.get_property("OPTIMAL_NUMBER_OF_INFER_REQUESTS") == \
            2 * raw.get_property("OPTIMAL_NUMBER_OF_INFER_REQUESTS")
    assert core.get_property("CPU", "OPTIMAL_NUMBER_OF_INFER_REQUESTS") == \
        on_core.get_property("OPTIMAL_NUMBER_OF_INFER_REQUESTS")


def test_onnx_runtime_engine_takes_num_streams_auto_as_openvino_does() -> None:
    """On ONNX Runtime too, NUM_STREAMS=AUTO is the THROUGHPUT hint's streams (not one stream as
    under LATENCY), and the hint reads back THROUGHPUT as on OpenVINO."""
    core = ov.Core()
    auto = core.compile_model(_mlp(), "CPU", {"ENGINE": "ONNXRUNTIME", "NUM_STREAMS": "AUTO",
                                               "PERFORMANCE_HINT": "LATENCY"})
    throughput = core.compile_model(_mlp(), "CPU", {"ENGINE": "ONNXRUNTIME",
                                                     "PERFORMANCE_HINT": "THROUGHPUT"})
    for key in ("NUM_STREAMS", "INFERENCE_NUM_THREADS", "OPTIMAL_NUMBER_OF_INFER_REQUESTS"):
        assert auto.get_property(key) == throughput.get_property(key), key
    assert _name(auto.get_property("PERFORMANCE_HINT")) == \
        _name(_raw({"NUM_STREAMS": "AUTO", "PERFORMANCE_HINT": "LATENCY"}).get_property("PERFORMANCE_HINT"))
    session = ort.InferenceSession(_mlp().SerializeToString(), providers=["CPUExecutionProvider"])
    np.testing.assert_allclose(auto({"x": X})["y"], session.run(None, {"x": X})[0], rtol=1e-6, atol=1e-7)


def _strings(op: str) -> Any:
    """A model over a string tensor: ``Identity`` passes it through, ``Concat`` doubles it."""
    node = (helper.make_node(op, ["s", "s"], ["o"], name=op.lower(), axis=0) if op == "Concat"
            else helper.make_node(op, ["s"], ["o"], name=op.lower()))
    length = 4 if op == "Concat" else 2
    graph = helper.make_graph([node], "strings",
                              [helper.make_tensor_value_info("s", TensorProto.STRING, [2])],
                              [helper.make_tensor_value_info("o", TensorProto.STRING, [length])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("op", ["Identity", "Concat"])
def test_a_string_model_runs_on_onnx_runtime_by_default(op: str) -> None:
    """OpenVINO's CPU plugin runs few ops on strings (and its binding aborts the process at exit
    after passing a string tensor through unchanged), so the default engine leaves string models
    to ONNX Runtime, saying why; the results are ONNX Runtime's."""
    words = np.array(["ab", "c"], dtype=object)
    core = ov.Core()
    compiled = core.compile_model(_strings(op), "CPU")
    assert compiled.get_property("ENGINE") == "ONNXRUNTIME"
    assert "string" in compiled.get_property("ENGINE_FALLBACK_REASON")
    session = ort.InferenceSession(_strings(op).SerializeToString(), providers=["CPUExecutionProvider"])
    assert compiled({"s": words})["o"].tolist() == session.run(None, {"s": words})[0].tolist()
    assert core.query_model(_strings(op), "CPU") == {op.lower(): "CPU"}


def test_string_inputs_reach_openvino_when_it_is_asked_for() -> None:
    """With ENGINE=OPENVINO, numpy string arrays (object or str dtype) reach OpenVINO as its string
    tensors, as raw OpenVINO takes them."""
    compiled = ov.Core().compile_model(_strings("Concat"), "CPU", {"ENGINE": "OPENVINO"})
    session = ort.InferenceSession(_strings("Concat").SerializeToString(), providers=["CPUExecutionProvider"])
    for words in (np.array(["ab", "c"], dtype=object), np.array(["ab", "c"])):
        want = session.run(None, {"s": words.astype(object)})[0].tolist()
        assert [str(word) for word in compiled({"s": words})["o"].tolist()] == want


@pytest.mark.parametrize("order", [("x", "unused", "b"), ("b", "x", "unused"), ("unused", "b", "x")])
def test_an_input_read_only_by_a_dropout_is_fed_beside_an_unused_input(order: tuple[str, ...]) -> None:
    """OpenVINO leaves an unused input out of the compiled model and names the Parameter of an
    input read only by a Dropout after the Dropout's output; neither by position nor by name alone
    does each input find its Parameter.  Results equal ONNX Runtime's, compiled and imported."""
    nodes = [helper.make_node("Dropout", ["b"], ["d"]), helper.make_node("Add", ["x", "d"], ["y"])]
    inputs = [helper.make_tensor_value_info(name, TensorProto.FLOAT, [2, 3]) for name in order]
    graph = helper.make_graph(nodes, "dropout", inputs,
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    rng = np.random.default_rng(6)
    feeds = {name: rng.standard_normal((2, 3)).astype(np.float32) for name in order}
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    want = session.run(None, feeds)[0]
    core = ov.Core()
    compiled = core.compile_model(model, "CPU", {"ENGINE": "OPENVINO", "INFERENCE_PRECISION_HINT": "f32"})
    imported = core.import_model(compiled.export_model(), "CPU")
    for program in (compiled, imported):
        np.testing.assert_array_equal(program(feeds)["y"], want)


_CORE_KEYS = ("FULL_DEVICE_NAME", "DEVICE_ARCHITECTURE", "RANGE_FOR_STREAMS",
              "RANGE_FOR_ASYNC_INFER_REQUESTS", "NUM_STREAMS", "INFERENCE_NUM_THREADS",
              "PERFORMANCE_HINT_NUM_REQUESTS", "ENABLE_CPU_PINNING", "ENABLE_HYPER_THREADING",
              "CPU_DENORMALS_OPTIMIZATION")


@pytest.mark.usefixtures("native_cpu_precision")
def test_the_cpus_facts_and_defaults_read_as_openvinos() -> None:
    """``Core.get_property("CPU", key)`` for a key never set answers as raw OpenVINO's Core does."""
    ours, raw = ov.Core(), openvino.Core()
    for key in _CORE_KEYS:
        assert ours.get_property("CPU", key) == raw.get_property("CPU", key), key
    for key in ("PERFORMANCE_HINT", "EXECUTION_MODE_HINT", "SCHEDULING_CORE_TYPE"):
        assert _name(ours.get_property("CPU", key)) == _name(raw.get_property("CPU", key)), key
    precision = raw.get_property("CPU", "INFERENCE_PRECISION_HINT").get_type_name()
    assert ours.get_property("CPU", "INFERENCE_PRECISION_HINT") == ov.Type(precision)


def test_a_failing_run_raises_openvinos_reason_and_the_request_runs_again() -> None:
    """A Reshape to a shape that does not fit its input fails in OpenVINO's kernel: the error is
    an InferenceError carrying OpenVINO's reason without its source-file noise, from ``infer`` and
    from ``wait`` alike; the callback still runs once, and the request then runs a good input."""
    graph = helper.make_graph([helper.make_node("Reshape", ["x", "s"], ["y"])], "reshape",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3]),
                               helper.make_tensor_value_info("s", TensorProto.INT64, [2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["a", "b"])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    request = ov.Core().compile_model(model, "CPU").create_infer_request()
    calls: list[str] = []
    request.set_callback(calls.append, "done")
    with pytest.raises(InferenceError, match=r"conflicts with the reshape pattern") as failed:
        request.infer({"x": x, "s": np.array([4, 4])})
    assert "src/" not in str(failed.value) and "Check '" not in str(failed.value)
    request.start_async({"x": x, "s": np.array([4, 4])})
    with pytest.raises(InferenceError, match=r"conflicts with the reshape pattern"):
        request.wait()
    np.testing.assert_array_equal(request.infer({"x": x, "s": np.array([3, 2])})["y"], x.reshape(3, 2))
    assert calls == ["done"]



def test_bfloat16_inputs_and_outputs_on_the_openvino_engine() -> None:
    """OpenVINO's Python API carries bf16 as float16-typed bits; inferplex gives and takes
    ml_dtypes' bfloat16 arrays, as for every other device."""
    import ml_dtypes

    graph = helper.make_graph(
        [helper.make_node("Cast", ["x"], ["y"], to=TensorProto.BFLOAT16),
         helper.make_node("Relu", ["b"], ["w"])], "bf16",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3]),
         helper.make_tensor_value_info("b", TensorProto.BFLOAT16, [3])],
        [helper.make_tensor_value_info("y", TensorProto.BFLOAT16, [3]),
         helper.make_tensor_value_info("w", TensorProto.BFLOAT16, [3])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 9
    compiled = ov.Core().compile_model(model, "CPU", {"ENGINE": "OPENVINO"})
    assert compiled.get_property("ENGINE") == "OPENVINO"
    x = np.array([1.5, -2.25, 3.0], np.float32)
    b = np.array([1.0, -2.0, 3.5], ml_dtypes.bfloat16)
    for share in (True, False):
        results = compiled.create_infer_request().infer({"x": x, "b": b}, share_inputs=share)
        assert results["y"].dtype == ml_dtypes.bfloat16 and results["w"].dtype == ml_dtypes.bfloat16
        expected = x.astype(ml_dtypes.bfloat16).astype(np.float32)
        np.testing.assert_array_equal(results["y"].astype(np.float32), expected)
        np.testing.assert_array_equal(results["w"].astype(np.float32), [1.0, 0.0, 3.5])
