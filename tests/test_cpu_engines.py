"""The CPU device's two engines (devices/cpu/): OpenVINO's CPU plugin by default, ONNX Runtime by
property and as the fallback.  Results are checked against ONNX Runtime on the whole model;
threads, streams, precision and counters against what raw OpenVINO does with the same settings."""

from __future__ import annotations

import os
import threading

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import inferplex as ov
from inferplex.errors import CompileError, PropertyError

from conftest import mlp_model

openvino = pytest.importorskip("openvino")

ENGINES = ["OPENVINO", "ONNXRUNTIME"]


def _mlp() -> object:
    return mlp_model("N", seed=7)


def _with_inverse() -> object:
    """Relu -> com.microsoft.Inverse -> Neg: ONNX Runtime has the contrib op, OpenVINO does not."""
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"),
             helper.make_node("Inverse", ["r"], ["i"], name="inverse", domain="com.microsoft"),
             helper.make_node("Neg", ["i"], ["y"], name="neg")]
    graph = helper.make_graph(nodes, "inv", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 3])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                   helper.make_opsetid("com.microsoft", 1)])


def _ort(model: object, feeds: dict[str, np.ndarray]) -> np.ndarray:
    data = model.SerializeToString()  # type: ignore[attr-defined]
    session = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    return session.run(None, feeds)[0]


def _raw_openvino(model: object, config: dict[str, object]) -> object:
    core = openvino.Core()
    return core.compile_model(core.read_model(model.SerializeToString(), b""), "CPU", config)  # type: ignore[attr-defined]


X = np.random.default_rng(8).standard_normal((4, 32)).astype(np.float32)


def test_openvino_is_the_default_engine_and_reads_back() -> None:
    core = ov.Core()
    assert core.get_property("CPU", "ENGINE") == "OPENVINO"
    compiled = core.compile_model(_mlp(), "CPU")
    assert compiled.get_property("ENGINE") == "OPENVINO"
    assert compiled.get_property("ENGINE_FALLBACK_REASON") == ""
    core.set_property("CPU", {"ENGINE": "onnxruntime"})
    assert core.get_property("CPU", "ENGINE") == "ONNXRUNTIME"
    assert core.compile_model(_mlp(), "CPU").get_property("ENGINE") == "ONNXRUNTIME"
    with pytest.raises(PropertyError, match=r"ENGINE.*'TENSORRT'.*OPENVINO, ONNXRUNTIME"):
        core.set_property("CPU", {"ENGINE": "TENSORRT"})


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("hint", ["LATENCY", "THROUGHPUT"])
def test_f32_results_match_onnx_runtime_on_the_whole_model(engine: str, hint: str) -> None:
    compiled = ov.Core().compile_model(_mlp(), "CPU", {"ENGINE": engine, "PERFORMANCE_HINT": hint,
                                                       "INFERENCE_PRECISION_HINT": "f32"})
    assert compiled.get_property("INFERENCE_PRECISION_HINT") == ov.Type.f32
    want = _ort(_mlp(), {"x": X})
    count = compiled.get_property("OPTIMAL_NUMBER_OF_INFER_REQUESTS")
    requests = [compiled.create_infer_request() for _ in range(count)]
    for request in requests:
        np.testing.assert_allclose(request.infer({"x": X})["y"], want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("share", [False, True])
def test_any_numpy_layout_reaches_openvino_right(share: bool) -> None:
    """Read-only, Fortran-ordered, strided and 0-d arrays, bool and int inputs: OpenVINO shares
    only writable C-ordered memory, so the engine hands it a C-ordered copy of the others."""
    rng = np.random.default_rng(3)
    nodes = [helper.make_node("Where", ["m", "x", "z"], ["w"]),
             helper.make_node("Cast", ["k"], ["kf"], to=TensorProto.FLOAT),
             helper.make_node("Mul", ["w", "kf"], ["wk"]),
             helper.make_node("Add", ["wk", "s"], ["y"])]
    graph = helper.make_graph(nodes, "layouts", [
        helper.make_tensor_value_info("m", TensorProto.BOOL, [3, 4]),
        helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4]),
        helper.make_tensor_value_info("z", TensorProto.FLOAT, [3, 4]),
        helper.make_tensor_value_info("k", TensorProto.INT64, [3, 4]),
        helper.make_tensor_value_info("s", TensorProto.FLOAT, [])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 4])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    read_only = rng.standard_normal((3, 4)).astype(np.float32)
    read_only.flags.writeable = False
    feeds = {"m": rng.random((3, 4)) > 0.5, "x": read_only,
             "z": np.asfortranarray(rng.standard_normal((3, 4)).astype(np.float32)),
             "k": rng.integers(-3, 3, (3, 8))[:, ::2], "s": np.array(0.5, np.float32)}
    want = _ort(model, {name: np.ascontiguousarray(value) for name, value in feeds.items()})
    request = ov.Core().compile_model(model, "CPU", {"ENGINE": "OPENVINO"}).create_infer_request()
    for _ in range(2):  # the second run reuses the request's tensors
        np.testing.assert_allclose(request.infer(feeds, share_inputs=share)[0], want, rtol=1e-6)


def test_an_input_that_flows_unchanged_into_an_output_is_fed() -> None:
    """OpenVINO names a Parameter read only by a Dropout after the Dropout's output; the input
    must still reach it (found by position), with the other inputs in their places."""
    nodes = [helper.make_node("Dropout", ["x"], ["y"]), helper.make_node("Add", ["a", "b"], ["z"])]
    graph = helper.make_graph(nodes, "passing", [
        helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3]),
        helper.make_tensor_value_info("a", TensorProto.FLOAT, [2]),
        helper.make_tensor_value_info("b", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3]),
         helper.make_tensor_value_info("z", TensorProto.FLOAT, [2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    rng = np.random.default_rng(5)
    feeds = {"x": rng.standard_normal((2, 3)).astype(np.float32) * 1e10,
             "a": np.array([1, 2], np.float32), "b": np.array([10, 20], np.float32)}
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    want = session.run(None, feeds)
    compiled = ov.Core().compile_model(model, "CPU", {"ENGINE": "OPENVINO"})
    assert compiled.get_property("ENGINE") == "OPENVINO"
    for share in (False, True):
        results = compiled.create_infer_request().infer(feeds, share_inputs=share)
        np.testing.assert_array_equal(results["y"], want[0])
        np.testing.assert_array_equal(results["z"], want[1])


@pytest.mark.usefixtures("native_cpu_precision")
@pytest.mark.parametrize("precision", ["bf16", "f16"])
def test_low_precision_is_what_openvino_runs_and_stays_within_its_bounds(precision: str) -> None:
    """The precision read back is raw OpenVINO's for the same hint (f32 where the CPU lacks the
    type); results within bf16's 8-bit mantissa of ONNX Runtime's f32 (softmax outputs in [0, 1])."""
    compiled = ov.Core().compile_model(_mlp(), "CPU", {"INFERENCE_PRECISION_HINT": precision})
    raw = _raw_openvino(_mlp(), {"INFERENCE_PRECISION_HINT": precision})
    assert compiled.get_property("INFERENCE_PRECISION_HINT") == ov.Type(raw.get_property(
        "INFERENCE_PRECISION_HINT").get_type_name())
    np.testing.assert_allclose(compiled({"x": X})["y"], _ort(_mlp(), {"x": X}), atol=2e-2)


@pytest.mark.usefixtures("native_cpu_precision")
def test_the_default_precision_is_openvinos() -> None:
    default = ov.Type(openvino.Core().get_property("CPU", "INFERENCE_PRECISION_HINT").get_type_name())
    assert ov.Core().get_property("CPU", "INFERENCE_PRECISION_HINT") == default
    assert ov.Core().compile_model(_mlp(), "CPU").get_property("INFERENCE_PRECISION_HINT") == default


def test_onnx_runtime_engine_refuses_bf16_naming_the_way_out() -> None:
    with pytest.raises(PropertyError, match=r"'bf16'.*ONNX Runtime engine.*accepted: f32.*ENGINE=OPENVINO"):
        ov.Core().compile_model(_mlp(), "CPU", {"ENGINE": "ONNXRUNTIME", "INFERENCE_PRECISION_HINT": "bf16"})


def test_a_model_openvino_cannot_read_falls_back_to_onnx_runtime() -> None:
    core = ov.Core()
    x = np.array([[2.0, 1.0, 0.0], [1.0, 3.0, 0.5], [0.0, 0.5, 4.0]], np.float32)
    compiled = core.compile_model(_with_inverse(), "CPU")
    assert compiled.get_property("ENGINE") == "ONNXRUNTIME"
    assert "com.microsoft.Inverse" in compiled.get_property("ENGINE_FALLBACK_REASON")
    np.testing.assert_allclose(compiled({"x": x})["y"], _ort(_with_inverse(), {"x": x}), rtol=1e-6)
    np.testing.assert_allclose(compiled({"x": x})["y"], -np.linalg.inv(x), rtol=1e-5)
    # query_model answers for the engine in force: ONNX Runtime runs all three nodes.
    assert core.query_model(_with_inverse(), "CPU") == {"relu": "CPU", "inverse": "CPU", "neg": "CPU"}
    with pytest.raises(CompileError, match=r"OpenVINO cannot run.*microsoft\.Inverse.*ENGINE=ONNXRUNTIME"):
        core.compile_model(_with_inverse(), "CPU", {"ENGINE": "OPENVINO"})
    # OpenVINO, asked for by name, answers for itself: the contrib op is not its.
    assert core.query_model(_with_inverse(), "CPU", {"ENGINE": "OPENVINO"}) == {"relu": "CPU", "neg": "CPU"}


def test_a_float64_model_stays_on_onnx_runtime_which_computes_in_float64() -> None:
    graph = helper.make_graph([helper.make_node("Exp", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.DOUBLE, [3])],
                              [helper.make_tensor_value_info("y", TensorProto.DOUBLE, [3])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    x = np.array([1e-3, 700.0, 800.0])  # exp(800) is inf in f64 and f32 alike; exp(700) only in f32
    compiled = ov.Core().compile_model(model, "CPU")
    assert compiled.get_property("ENGINE") == "ONNXRUNTIME"
    assert "float64" in compiled.get_property("ENGINE_FALLBACK_REASON")
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(compiled({"x": x})["y"], np.exp(x))


@pytest.mark.parametrize("config", [{"PERFORMANCE_HINT": "LATENCY"}, {"PERFORMANCE_HINT": "THROUGHPUT"},
                                    {"NUM_STREAMS": 2}, {"INFERENCE_NUM_THREADS": 1},
                                    {"PERFORMANCE_HINT": "THROUGHPUT", "PERFORMANCE_HINT_NUM_REQUESTS": 1}])
def test_streams_threads_and_requests_are_openvinos_own(config: dict[str, object]) -> None:
    """Streams and threads are OpenVINO's; the requests are OpenVINO's one per stream, two per stream
    under the THROUGHPUT hint when PERFORMANCE_HINT_NUM_REQUESTS does not cap them."""
    core = ov.Core()
    compiled = core.compile_model(_mlp(), "CPU", config)
    raw = _raw_openvino(_mlp(), config)
    for key in ("NUM_STREAMS", "INFERENCE_NUM_THREADS"):
        assert compiled.get_property(key) == raw.get_property(key), key
    per_stream = 2 if config == {"PERFORMANCE_HINT": "THROUGHPUT"} else 1
    assert compiled.get_property("OPTIMAL_NUMBER_OF_INFER_REQUESTS") == (
        per_stream * raw.get_property("OPTIMAL_NUMBER_OF_INFER_REQUESTS"))
    assert core.get_property("CPU", "OPTIMAL_NUMBER_OF_INFER_REQUESTS") == 1  # LATENCY by default
    queue = ov.AsyncInferQueue(compiled, 0)
    results: dict[int, np.ndarray] = {}
    queue.set_callback(lambda request, index: results.__setitem__(index, request.results["y"]))
    for index in range(6):
        queue.start_async({"x": X[index % 4:index % 4 + 1]}, index)
    queue.wait_all()
    want = _ort(_mlp(), {"x": X})
    for index, got in results.items():
        np.testing.assert_allclose(got[0], want[index % 4], rtol=1e-5, atol=1e-6)
    assert sorted(results) == list(range(6))


def test_performance_hint_num_requests_caps_the_requests_kept() -> None:
    """Under THROUGHPUT the engine keeps up to two requests per OpenVINO stream, never more than
    PERFORMANCE_HINT_NUM_REQUESTS, never fewer than OpenVINO's own number; a queue of that many
    jobs ends every request right."""
    base = {"PERFORMANCE_HINT": "THROUGHPUT"}
    streams = _raw_openvino(_mlp(), base).get_property("NUM_STREAMS")
    for cap in range(1, 2 * streams + 2):
        config = {**base, "PERFORMANCE_HINT_NUM_REQUESTS": cap}
        raw = _raw_openvino(_mlp(), config).get_property("OPTIMAL_NUMBER_OF_INFER_REQUESTS")
        compiled = ov.Core().compile_model(_mlp(), "CPU", config)
        kept = compiled.get_property("OPTIMAL_NUMBER_OF_INFER_REQUESTS")
        assert raw <= kept <= max(raw, cap), (cap, raw, kept)
        assert kept <= 2 * raw
        if cap >= 2 * raw:
            assert kept == 2 * raw, (cap, raw, kept)
    queue = ov.AsyncInferQueue(compiled, 0)
    assert len(queue) == kept
    results: dict[int, np.ndarray] = {}
    queue.set_callback(lambda request, index: results.__setitem__(index, request.results["y"].copy()))
    for index in range(3 * kept):
        queue.start_async({"x": X[index % 4:index % 4 + 1]}, index)
    queue.wait_all()
    assert sorted(results) == list(range(3 * kept))
    want = _ort(_mlp(), {"x": X})
    for index, got in results.items():
        np.testing.assert_allclose(got[0], want[index % 4], rtol=1e-5, atol=1e-6)


@pytest.mark.usefixtures("native_cpu_precision")
def test_counters_are_openvinos_per_op_with_the_kernel_that_ran_it() -> None:
    compiled = ov.Core().compile_model(_mlp(), "CPU", {"ENABLE_PROFILING": True})
    request = compiled.create_infer_request()
    request.infer({"x": X})
    records = request.get_profiling_info()
    raw = _raw_openvino(_mlp(), {"PERF_COUNT": True}).create_infer_request()
    raw.infer({0: X})
    expected = {(p.node_name, p.node_type) for p in raw.get_profiling_info()}
    assert {(r.node_name, r.node_type) for r in records} == expected
    executed = [r for r in records if r.status == "EXECUTED"]
    assert executed and all(r.exec_type and r.exec_type != "undef" for r in executed)
    assert {r.status for r in records} <= {"EXECUTED", "NOT_RUN"}


def test_host_sharing_settings_reach_openvino() -> None:
    """THREAD_SPINNING=NO (set beside accelerators) unpins OpenVINO's threads; they read back."""
    compiled = ov.Core().compile_model(_mlp(), "CPU", {"THREAD_SPINNING": False, "INFERENCE_NUM_THREADS": 1})
    assert compiled.get_property("THREAD_SPINNING") is False
    assert compiled.get_property("INFERENCE_NUM_THREADS") == 1
    np.testing.assert_allclose(compiled({"x": X})["y"], _ort(_mlp(), {"x": X}), rtol=1e-5, atol=1e-6)


@pytest.mark.skipif(not hasattr(os, "setpriority") or not os.path.isdir("/proc/self/task"),
                    reason="per-thread priority is Linux's")
def test_low_thread_priority_puts_openvinos_new_threads_at_nice_19() -> None:
    def nice_values() -> dict[int, int]:
        values = {}
        for tid in os.listdir("/proc/self/task"):
            try:
                with open(f"/proc/self/task/{tid}/stat", encoding="ascii") as handle:
                    values[int(tid)] = int(handle.read().rsplit(")", 1)[1].split()[16])
            except OSError:
                continue
        return values

    before = nice_values()
    compiled = ov.Core().compile_model(_mlp(), "CPU", {"THREAD_PRIORITY": "LOW", "NUM_STREAMS": 2})
    new = {tid: nice for tid, nice in nice_values().items() if tid not in before}
    assert compiled.get_property("THREAD_PRIORITY") == "LOW"
    assert set(new.values()) <= {19}, new
    me = threading.get_native_id()
    assert nice_values()[me] == before[me]
    np.testing.assert_allclose(compiled({"x": X})["y"], _ort(_mlp(), {"x": X}), rtol=1e-5, atol=1e-6)


def test_runs_release_the_gil() -> None:
    """Another Python thread keeps running while OpenVINO computes a long request."""
    rng = np.random.default_rng(9)
    weight = numpy_helper.from_array(rng.standard_normal((512, 512)).astype(np.float32) * 0.05, "w")
    nodes, name = [], "x"
    for index in range(40):
        nodes.append(helper.make_node("MatMul", [name, "w"], [f"m{index}"]))
        nodes.append(helper.make_node("Tanh", [f"m{index}"], [f"t{index}"]))
        name = f"t{index}"
    x_info = helper.make_tensor_value_info("x", TensorProto.FLOAT, [256, 512])
    graph = helper.make_graph(nodes, "deep", [x_info],
                              [helper.make_tensor_value_info(name, TensorProto.FLOAT, [256, 512])], [weight])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    compiled = ov.Core().compile_model(model, "CPU")
    x = rng.standard_normal((256, 512)).astype(np.float32)
    request = compiled.create_infer_request()
    ticks = [0]
    done = threading.Event()

    def count() -> None:
        while not done.is_set():
            ticks[0] += 1

    counter = threading.Thread(target=count)
    counter.start()
    try:
        request.start_async({"x": x})
        request.wait()
        start = ticks[0]
        request.infer({"x": x})
        during = ticks[0] - start
    finally:
        done.set()
        counter.join()
    assert during > 1000  # the counting thread ran throughout the inference


def test_hetero_and_multi_compile_their_cpu_parts_on_openvino() -> None:
    core = ov.Core()
    model = core.read_model(_mlp())
    for op in model.get_ops():
        op.get_rt_info()["affinity"] = "CPU"
    for device in ("HETERO:CPU", "MULTI:CPU"):
        compiled = core.compile_model(model, device)
        np.testing.assert_allclose(compiled({"x": X})["y"], _ort(_mlp(), {"x": X}), rtol=1e-5, atol=1e-6)


def test_openvino_model_cache_dir_is_filled(tmp_path: object) -> None:
    """CACHE_DIR, where the CPU is given it, is OpenVINO's model cache (blobs written there)."""
    from inferplex.devices.cpu import CpuPlugin

    program = CpuPlugin().compile(ov.Core().read_model(_mlp()).ir, "CPU", {"CACHE_DIR": str(tmp_path)})
    try:
        np.testing.assert_allclose(program.run({"x": X})["y"], _ort(_mlp(), {"x": X}), rtol=1e-5, atol=1e-6)
    finally:
        program.close()
    assert any(name.endswith(".blob") for name in os.listdir(str(tmp_path)))
