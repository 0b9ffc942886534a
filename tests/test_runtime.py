"""CompiledModel, InferRequest and AsyncInferQueue on the CPU device.

Every result is compared with raw ONNX Runtime on the whole model; concurrency
is checked with barriers and gates (deterministic), never with timings.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Collection, Mapping
from typing import Any

import numpy as np
import onnx
import onnx_ir as ir
import onnxruntime as ort
import pytest
from hooked_plugin import hooked_compile
from onnx import TensorProto, helper, numpy_helper

import inferplex as ov
from inferplex.errors import InferenceError, InferplexError

from conftest import make_model

FLOAT = TensorProto.FLOAT


def _model() -> onnx.ModelProto:
    """x, y [N,4] -> relu_out = Relu(x+y) [N,4], tanh_out = Tanh((x+y) @ W) [N,3]."""
    weights = numpy_helper.from_array(
        (np.arange(12, dtype=np.float32).reshape(4, 3) - 6) / 10, "W")
    return make_model(
        [helper.make_node("Add", ["x", "y"], ["s"], name="add"),
         helper.make_node("Relu", ["s"], ["relu_out"], name="relu"),
         helper.make_node("MatMul", ["s", "W"], ["mm"]),
         helper.make_node("Tanh", ["mm"], ["tanh_out"])],
        [("x", FLOAT, ["N", 4]), ("y", FLOAT, ["N", 4])],
        [("relu_out", FLOAT, ["N", 4]), ("tanh_out", FLOAT, ["N", 3])],
        [weights])


MODEL = _model()


@pytest.fixture(scope="module")
def reference() -> ort.InferenceSession:
    return ort.InferenceSession(MODEL.SerializeToString(), providers=["CPUExecutionProvider"])


@pytest.fixture(scope="module")
def compiled(core: ov.Core) -> ov.CompiledModel:
    return core.compile_model(MODEL, "CPU")


def _inputs(seed: int, batch: int = 2) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {"x": rng.standard_normal((batch, 4), dtype=np.float32),
            "y": rng.standard_normal((batch, 4), dtype=np.float32)}


def _assert_matches(results: Any, reference: ort.InferenceSession, feeds: Mapping[str, Any]) -> None:
    expected = reference.run(None, dict(feeds))
    for index, name in enumerate(("relu_out", "tanh_out")):
        np.testing.assert_allclose(results[name], expected[index], rtol=1e-6, atol=1e-7)
        np.testing.assert_array_equal(results[index], results[name])


def _gated(gate: threading.Event, config: Mapping[str, Any] | None = None) -> ov.CompiledModel:
    """MODEL compiled so that every run waits for ``gate`` before running for real."""

    def wait(inputs: Mapping[str, Any], worker: int) -> None:
        assert gate.wait(20), "the test never opened the gate"

    return hooked_compile(MODEL, config, wait)


# --- sync --------------------------------------------------------------------------------------


def test_call_and_infer_equal_onnx_runtime(compiled: ov.CompiledModel,
                                           reference: ort.InferenceSession) -> None:
    feeds = _inputs(0)
    _assert_matches(compiled(feeds), reference, feeds)
    request = compiled.create_infer_request()
    _assert_matches(request.infer(feeds), reference, feeds)
    _assert_matches(request.results, reference, feeds)


def test_inputs_by_index_port_and_list(compiled: ov.CompiledModel,
                                       reference: ort.InferenceSession) -> None:
    feeds = _inputs(1, batch=5)
    x_port, y_port = compiled.inputs
    for given in ({0: feeds["x"], 1: feeds["y"]}, {x_port: feeds["x"], y_port: feeds["y"]},
                  [feeds["x"], feeds["y"]]):
        _assert_matches(compiled(given), reference, feeds)


def test_results_by_name_index_and_port(compiled: ov.CompiledModel,
                                        reference: ort.InferenceSession) -> None:
    feeds = _inputs(2)
    results = compiled(feeds)
    expected = reference.run(None, feeds)
    model_port = ov.Core().read_model(MODEL).outputs[1]
    assert list(results) == compiled.outputs  # OpenVINO's OVDict: its keys are the output ports
    assert results.names() == ({"relu_out"}, {"tanh_out"})
    for index, port in enumerate(compiled.outputs):
        np.testing.assert_allclose(results[port], expected[index], rtol=1e-6)
        np.testing.assert_array_equal(results[port], results[index])
        np.testing.assert_array_equal(results[port], results[port.any_name])
    np.testing.assert_array_equal(results[model_port], results["tanh_out"])
    np.testing.assert_array_equal(results.to_tuple()[1], results[1])
    with pytest.raises(KeyError, match="relu_out"):
        results["nope"]
    with pytest.raises(KeyError, match="2 outputs"):
        results[2]


def test_set_tensor_then_infer(compiled: ov.CompiledModel, reference: ort.InferenceSession) -> None:
    feeds = _inputs(3)
    request = compiled.create_infer_request()
    request.set_tensor("x", feeds["x"])
    request.set_tensor(compiled.inputs[1], feeds["y"])
    _assert_matches(request.infer(), reference, feeds)
    np.testing.assert_array_equal(request.get_tensor("x"), feeds["x"])
    # a later set_tensor by index replaces the earlier one
    other = _inputs(4)
    request.set_tensor(0, other["x"])
    _assert_matches(request.infer(), reference, {"x": other["x"], "y": feeds["y"]})
    np.testing.assert_array_equal(request.get_output_tensor(1), request.results["tanh_out"])


# --- async ------------------------------------------------------------------------------------


@pytest.mark.timeout(30)
def test_start_async_wait_and_callback_userdata(compiled: ov.CompiledModel,
                                                reference: ort.InferenceSession) -> None:
    request = compiled.create_infer_request()
    calls: list[Any] = []
    userdata = object()
    request.set_callback(calls.append, userdata)
    for seed in range(5):
        feeds = _inputs(seed)
        request.start_async(feeds)
        request.wait()
        _assert_matches(request.results, reference, feeds)
    assert calls == [userdata] * 5  # once per run, already done when wait() returns


@pytest.mark.timeout(60)
@pytest.mark.parametrize("wait", ["wait", "wait_for"])
def test_a_callback_may_wait_for_an_async_request_of_its_own_model(
        core: ov.Core, reference: ort.InferenceSession, wait: str) -> None:
    """With one worker (LATENCY), the callback's thread is the only one the nested request can
    run on: waiting must run it rather than wait for itself."""
    compiled = core.compile_model(MODEL, "CPU", {"PERFORMANCE_HINT": "LATENCY"})
    assert compiled.get_property("OPTIMAL_NUMBER_OF_INFER_REQUESTS") == 1
    outer, nested = compiled.create_infer_request(), compiled.create_infer_request()
    seen: list[Any] = []
    done = threading.Event()

    def callback(_: Any) -> None:
        nested.start_async(_inputs(11))
        if wait == "wait":
            nested.wait()
        else:
            assert nested.wait_for(10_000)
        seen.append({name: np.array(nested.results[name]) for name in ("relu_out", "tanh_out")})
        done.set()

    outer.set_callback(callback)
    outer.start_async(_inputs(10))
    assert done.wait(20), "the nested request never ended"
    outer.wait()
    _assert_matches(outer.results, reference, _inputs(10))
    expected = reference.run(None, _inputs(11))
    np.testing.assert_allclose(seen[0]["relu_out"], expected[0], rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(seen[0]["tanh_out"], expected[1], rtol=1e-6, atol=1e-7)
    compiled.release()


@pytest.mark.timeout(30)
def test_wait_for_reports_running_then_done(core: ov.Core, reference: ort.InferenceSession) -> None:
    gate = threading.Event()
    compiled = _gated(gate)
    request = compiled.create_infer_request()
    feeds = _inputs(5)
    request.start_async(feeds)
    assert request.wait_for(50) is False  # held at the gate: not done
    gate.set()
    assert request.wait_for(10_000) is True
    _assert_matches(request.results, reference, feeds)


@pytest.mark.timeout(60)
def test_queue_of_1000_requests_each_ends_once_with_its_own_result(
        compiled: ov.CompiledModel, reference: ort.InferenceSession) -> None:
    queue = ov.AsyncInferQueue(compiled, jobs=4)
    ended: Counter[int] = Counter()
    results: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    lock = threading.Lock()

    def on_done(request: ov.InferRequest, userdata: int) -> None:
        out = request.results
        with lock:
            ended[userdata] += 1
            results[userdata] = (out["relu_out"].copy(), out[1].copy())

    queue.set_callback(on_done)
    feeds = [_inputs(seed, batch=1 + seed % 3) for seed in range(1000)]
    for index, given in enumerate(feeds):
        queue.start_async(given, userdata=index)
    queue.wait_all()
    assert ended == Counter(range(1000))  # every request once, none twice, none lost
    for index, given in enumerate(feeds):
        expected = reference.run(None, given)
        np.testing.assert_allclose(results[index][0], expected[0], rtol=1e-6, atol=1e-7)
        np.testing.assert_allclose(results[index][1], expected[1], rtol=1e-6, atol=1e-7)


@pytest.mark.timeout(60)
def test_a_raising_callback_does_not_stall_the_queue(compiled: ov.CompiledModel,
                                                     reference: ort.InferenceSession) -> None:
    queue = ov.AsyncInferQueue(compiled, jobs=2)
    ended: Counter[int] = Counter()
    lock = threading.Lock()
    feeds = [_inputs(seed) for seed in range(200)]
    outputs: dict[int, np.ndarray] = {}

    def on_done(request: ov.InferRequest, userdata: int) -> None:
        with lock:
            ended[userdata] += 1
            outputs[userdata] = request.results["tanh_out"].copy()
        if userdata % 3 == 0:
            raise RuntimeError(f"user callback failure {userdata}")

    queue.set_callback(on_done)
    started: list[int] = []
    for index, given in enumerate(feeds):
        try:  # as OpenVINO, the next start_async raises a callback's exception, and starts nothing
            queue.start_async(given, userdata=index)
            started.append(index)
        except RuntimeError as error:
            assert "user callback failure" in str(error)
    try:
        queue.wait_all()
    except RuntimeError as error:  # OpenVINO's wait_all raises it too (if no start_async did)
        assert "user callback failure" in str(error)
    assert ended == Counter(started) and len(started) < 200
    assert queue.is_ready()
    queue.wait_all()  # each exception is raised once: the next wait has nothing to raise
    for index in (*started[:2], started[-1]):
        np.testing.assert_allclose(outputs[index], reference.run(None, feeds[index])[1], rtol=1e-6)


@pytest.mark.timeout(30)
def test_a_raising_request_callback_does_not_block_wait(compiled: ov.CompiledModel,
                                                        reference: ort.InferenceSession) -> None:
    request = compiled.create_infer_request()
    calls: list[int] = []

    def explode(userdata: int) -> None:
        calls.append(userdata)
        raise RuntimeError("user callback failure")

    request.set_callback(explode, 7)
    feeds = _inputs(6)
    request.start_async(feeds)
    with pytest.raises(RuntimeError, match="user callback failure"):  # as OpenVINO's wait raises it
        request.wait()
    assert calls == [7]
    _assert_matches(request.results, reference, feeds)


# --- AsyncInferQueue used inside callbacks -----------------------------------------------------


@pytest.mark.timeout(60)
@pytest.mark.parametrize("jobs", [1, 2])
def test_start_async_inside_the_queues_own_callback_never_waits_for_itself(
        core: ov.Core, reference: ort.InferenceSession, jobs: int) -> None:
    """Each job's callback starts the next: with one job (or every job's callback feeding the
    queue) there is no idle job until the callback returns, so the job is queued, not waited for."""
    compiled = core.compile_model(MODEL, "CPU", {"PERFORMANCE_HINT": "THROUGHPUT"})
    queue = ov.AsyncInferQueue(compiled, jobs=jobs)
    ended: Counter[int] = Counter()
    outputs: dict[int, np.ndarray] = {}
    lock = threading.Lock()
    chains, length = 2 * jobs, 30

    def on_done(request: ov.InferRequest, userdata: int) -> None:
        with lock:
            ended[userdata] += 1
            outputs[userdata] = request.results["tanh_out"].copy()
        if userdata % length < length - 1:
            feeds = _inputs(userdata + 1)
            queue.start_async(feeds, userdata + 1)
            if jobs == 1:  # the only job runs this callback: the next is queued with its own copy
                for array in feeds.values():
                    array.fill(np.nan)

    queue.set_callback(on_done)
    for chain in range(chains):
        queue.start_async(_inputs(chain * length), chain * length)
    queue.wait_all()
    assert ended == Counter(range(chains * length))  # each job once, none lost
    for index in range(chains * length):
        np.testing.assert_allclose(outputs[index], reference.run(None, _inputs(index))[1], rtol=1e-6)
    compiled.release()


@pytest.mark.timeout(60)
def test_jobs_queued_inside_callbacks_are_bounded(core: ov.Core, reference: ort.InferenceSession,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Each result fans out into two jobs: the queue grows until start_async refuses, in the
    callback; every job it accepted ends once, right, and the queue drains."""
    from inferplex import _async_queue as async_queue

    monkeypatch.setattr(async_queue, "QUEUED_PER_JOB", 4)
    compiled = core.compile_model(MODEL, "CPU", {"PERFORMANCE_HINT": "THROUGHPUT"})
    queue = ov.AsyncInferQueue(compiled, jobs=2)
    ended: Counter[int] = Counter()
    outputs: dict[int, np.ndarray] = {}
    refused: list[BaseException] = []
    most_queued = [0]
    numbers = iter(range(1, 10**6))
    accepted = {0}
    lock = threading.Lock()

    def on_done(request: ov.InferRequest, userdata: int) -> None:
        with lock:
            ended[userdata] += 1
            outputs[userdata] = request.results["tanh_out"].copy()
        for _ in range(2):
            if refused:
                return  # once refused, the tree stops growing and the queue drains
            with lock:
                number = next(numbers)
            try:
                queue.start_async(_inputs(number), number)
            except ov.errors.RequestBusyError as error:
                refused.append(error)
                return
            with lock:
                accepted.add(number)
                most_queued[0] = max(most_queued[0], len(queue._queued))

    queue.set_callback(on_done)
    queue.start_async(_inputs(0), 0)
    queue.wait_all()
    assert refused and "8 jobs already waiting" in str(refused[0]) and "4 per job" in str(refused[0])
    assert 0 < most_queued[0] <= 8  # 4 per job, 2 jobs: never more
    assert ended == Counter(accepted)  # every accepted job ended once; a refused one never ran
    for index in accepted:
        np.testing.assert_allclose(outputs[index], reference.run(None, _inputs(index))[1], rtol=1e-6)
    compiled.release()


@pytest.mark.timeout(30)
def test_bad_inputs_given_inside_a_callback_raise_there_and_queue_nothing(
        compiled: ov.CompiledModel, reference: ort.InferenceSession) -> None:
    queue = ov.AsyncInferQueue(compiled, jobs=1)
    raised: list[BaseException] = []
    ended: list[str] = []

    def on_done(request: ov.InferRequest, userdata: str) -> None:
        ended.append(userdata)
        if userdata == "first":
            try:  # no idle job here: checked before it would be queued
                wrong = {"x": np.zeros((2, 5), np.float32), "y": np.zeros((2, 4), np.float32)}
                queue.start_async(wrong, "bad")
            except ov.errors.InputError as error:
                raised.append(error)
            queue.start_async(_inputs(2), "second")

    queue.set_callback(on_done)
    queue.start_async(_inputs(1), "first")
    queue.wait_all()
    assert ended == ["first", "second"]  # the bad job never started, the good one ran once
    assert len(raised) == 1 and "'x'" in str(raised[0]) and "[N,4]" in str(raised[0]).replace(" ", "")
    _assert_matches(queue[0].results, reference, _inputs(2))


@pytest.mark.timeout(30)
def test_wait_all_and_get_idle_request_id_inside_a_callback_raise_instead_of_hanging(
        compiled: ov.CompiledModel) -> None:
    queue = ov.AsyncInferQueue(compiled, jobs=1)
    raised: list[BaseException] = []

    def on_done(request: ov.InferRequest, userdata: str) -> None:
        try:
            queue.wait_all() if userdata == "wait_all" else queue.get_idle_request_id()
        except ov.errors.RequestBusyError as error:
            raised.append(error)

    queue.set_callback(on_done)
    queue.start_async(_inputs(1), "wait_all")
    queue.wait_all()
    queue.start_async(_inputs(2), "get_idle_request_id")
    queue.wait_all()
    assert [type(e) for e in raised] == [ov.errors.RequestBusyError] * 2
    assert "wait_all() was called inside this AsyncInferQueue's callback" in str(raised[0])
    assert "all 1 jobs were in callbacks waiting" in str(raised[1])
    assert queue.is_ready() and queue.get_idle_request_id() == 0


@pytest.mark.timeout(30)
def test_get_idle_request_id_in_a_callback_waits_for_a_job_that_is_still_running(
        core: ov.Core) -> None:
    """Only a wait that cannot end raises: here the other job ends once its gate opens."""
    held, gate = _inputs(1), threading.Event()

    def gated(inputs: Mapping[str, Any], worker: int) -> None:
        if np.array_equal(inputs["x"], held["x"]):
            assert gate.wait(20), "the test never opened the gate"

    compiled = hooked_compile(MODEL, {"NUM_STREAMS": 2}, gated)
    queue = ov.AsyncInferQueue(compiled, jobs=2)
    found: list[int] = []

    def on_done(request: ov.InferRequest, userdata: str) -> None:
        if userdata == "free":
            gate.set()  # the held job can end now, while this callback waits for it
            found.append(queue.get_idle_request_id())

    queue.set_callback(on_done)
    queue.start_async(held, "held")
    queue.start_async(_inputs(0), "free")
    queue.wait_all()
    assert len(found) == 1 and queue.userdata[found[0]] == "held"
    compiled.release()


@pytest.mark.timeout(30)
def test_start_async_without_sharing_inputs_copies_them(core: ov.Core,
                                                      reference: ort.InferenceSession) -> None:
    """``share_inputs=False`` lets the caller overwrite its arrays as soon as start_async returns."""
    gate = threading.Event()
    compiled = _gated(gate)  # LATENCY: one worker, requests run in order
    first, second = compiled.create_infer_request(), compiled.create_infer_request()
    first.start_async(_inputs(1))  # holds the only worker at the gate
    feeds = _inputs(2)
    second.start_async(feeds, share_inputs=False)
    queue = ov.AsyncInferQueue(compiled, jobs=1)
    queue_feeds = _inputs(3)
    queue.start_async(queue_feeds, share_inputs=False)
    for array in (*feeds.values(), *queue_feeds.values()):
        array.fill(np.nan)
    gate.set()
    first.wait(), second.wait(), queue.wait_all()
    _assert_matches(second.results, reference, _inputs(2))
    _assert_matches(queue[0].results, reference, _inputs(3))
    compiled.release()


# --- failing requests, through a tiny device plugin --------------------------------------------


class _FlakyProgram(ov.DeviceProgram):
    """ONNX Runtime, except that a batch whose x[0, 0] is negative fails."""

    num_workers = 2

    def __init__(self, model: ir.Model) -> None:
        self.device = "FLAKY"
        proto = ir.serde.serialize_model(model)
        self._session = ort.InferenceSession(proto.SerializeToString(),
                                             providers=["CPUExecutionProvider"])

    def run(self, inputs: Mapping[str, Any], worker: int = 0,
            keep_on_device: Collection[str] = ()) -> dict[str, Any]:
        if float(np.asarray(inputs["x"]).flat[0]) < 0:
            raise RuntimeError("flaky device: negative first element")
        names = [o.name for o in self._session.get_outputs()]
        return dict(zip(names, self._session.run(None, dict(inputs)), strict=True))


class _FlakyPlugin(ov.DevicePlugin):
    family = "FLAKY"

    def devices(self) -> list[str]:
        return ["FLAKY"]

    def supported_properties(self) -> tuple[str, ...]:
        return ("PERFORMANCE_HINT",)

    def device_property(self, device: str, key: str) -> Any:
        if key == "FULL_DEVICE_NAME":
            return "a device that fails on purpose"
        raise KeyError(key)

    def supported_nodes(self, model: Any, device: str, config: Mapping[str, Any]) -> set[str]:
        return {node.name for node in model.graph}

    def compile(self, model: Any, device: str, config: Mapping[str, Any]) -> ov.DeviceProgram:
        return _FlakyProgram(model)

    def memory(self, device: str) -> ov.MemoryInfo:
        return ov.MemoryInfo(1 << 30, 1 << 30)


@pytest.fixture(scope="module")
def flaky() -> ov.CompiledModel:
    core = ov.Core()
    core.register_plugin(_FlakyPlugin())
    return core.compile_model(MODEL, "FLAKY")


def _bad(seed: int) -> dict[str, np.ndarray]:
    feeds = _inputs(seed)
    feeds["x"][0, 0] = -abs(feeds["x"][0, 0]) - 1
    return feeds


def _good(seed: int) -> dict[str, np.ndarray]:
    feeds = _inputs(seed)
    feeds["x"][0, 0] = abs(feeds["x"][0, 0]) + 1
    return feeds


@pytest.mark.timeout(30)
def test_failing_request_raises_inferplex_error(flaky: ov.CompiledModel,
                                                reference: ort.InferenceSession) -> None:
    request = flaky.create_infer_request()
    with pytest.raises(InferenceError, match="negative first element") as info:
        request.infer(_bad(0))
    assert isinstance(info.value.__cause__, RuntimeError)
    with pytest.raises(InferenceError):
        _ = request.results
    feeds = _good(1)  # the request is usable again, and correct
    _assert_matches(request.infer(feeds), reference, feeds)


@pytest.mark.timeout(30)
def test_failing_async_request_ends_once_with_its_error(flaky: ov.CompiledModel) -> None:
    request = flaky.create_infer_request()
    calls: list[str] = []
    request.set_callback(calls.append, "bad")
    request.start_async(_bad(2))
    with pytest.raises(InferenceError, match="FLAKY"):
        request.wait()
    with pytest.raises(InferplexError):
        _ = request.results
    assert calls == ["bad"]


@pytest.mark.timeout(60)
def test_queue_with_failures_ends_every_request_once(flaky: ov.CompiledModel,
                                                     reference: ort.InferenceSession) -> None:
    queue = ov.AsyncInferQueue(flaky, jobs=0)
    assert len(queue) == 2  # the program's num_workers
    outcome: dict[int, Any] = {}
    ended: Counter[int] = Counter()
    lock = threading.Lock()

    def on_done(request: ov.InferRequest, userdata: int) -> None:
        try:
            value: Any = request.results["tanh_out"].copy()
        except InferplexError as error:
            value = error
        with lock:
            ended[userdata] += 1
            outcome[userdata] = value

    queue.set_callback(on_done)
    feeds = [_bad(i) if i % 4 == 0 else _good(i) for i in range(100)]
    for index, given in enumerate(feeds):
        queue.start_async(given, userdata=index)
    queue.wait_all()
    assert ended == Counter(range(100))
    for index, given in enumerate(feeds):
        if index % 4 == 0:
            assert isinstance(outcome[index], InferenceError), index
        else:
            np.testing.assert_allclose(outcome[index], reference.run(None, given)[1], rtol=1e-6)


# --- streams, hints, optimal requests, profiling -------------------------------------------------


@pytest.mark.timeout(60)
def test_throughput_hint_runs_requests_concurrently(core: ov.Core,
                                                    reference: ort.InferenceSession) -> None:
    # Each run waits at a barrier for another run: it passes only if two run at once.
    barrier = threading.Barrier(2, timeout=20)
    workers: list[int] = []

    def meet(inputs: Mapping[str, Any], worker: int) -> None:
        workers.append(worker)
        barrier.wait()

    compiled = hooked_compile(MODEL, {"PERFORMANCE_HINT": "THROUGHPUT"}, meet)
    streams = compiled.get_property("NUM_STREAMS")
    assert streams > 1
    optimal = compiled.get_property("OPTIMAL_NUMBER_OF_INFER_REQUESTS")
    assert optimal >= streams and optimal % streams == 0  # whole requests per stream
    queue = ov.AsyncInferQueue(compiled, jobs=0)
    assert len(queue) == optimal
    feeds = [_inputs(seed) for seed in range(2 * optimal)]
    for index, given in enumerate(feeds):
        queue.start_async(given, userdata=index)
    queue.wait_all()
    for request, userdata in zip(queue, queue.userdata, strict=True):  # a broken barrier fails them
        _assert_matches(request.results, reference, feeds[userdata])
    assert len(set(workers)) >= 2  # distinct streams (ONNX Runtime sessions) ran them


def test_latency_hint_has_one_stream(core: ov.Core) -> None:
    compiled = core.compile_model(MODEL, "CPU", {"PERFORMANCE_HINT": "LATENCY"})
    assert compiled.get_property("NUM_STREAMS") == 1
    assert compiled.get_property("OPTIMAL_NUMBER_OF_INFER_REQUESTS") == 1


@pytest.mark.parametrize("streams", [1, 2])  # OpenVINO's CPU engine runs at most one stream per core
def test_optimal_number_of_infer_requests_and_jobs_zero(core: ov.Core, streams: int) -> None:
    compiled = core.compile_model(MODEL, "CPU", {"NUM_STREAMS": streams})
    assert compiled.get_property("OPTIMAL_NUMBER_OF_INFER_REQUESTS") == streams
    assert len(ov.AsyncInferQueue(compiled, jobs=0)) == streams
    assert len(ov.AsyncInferQueue(compiled)) == streams
    assert len(ov.AsyncInferQueue(compiled, jobs=5)) == 5


def test_device_optimal_requests_match_compiled(core: ov.Core) -> None:
    local = ov.Core()
    local.set_property("CPU", {"PERFORMANCE_HINT": "THROUGHPUT"})
    compiled = local.compile_model(MODEL, "CPU")
    assert local.get_property("CPU", "OPTIMAL_NUMBER_OF_INFER_REQUESTS") == \
        compiled.get_property("OPTIMAL_NUMBER_OF_INFER_REQUESTS") > 1


def test_profiling_records_name_the_models_ops(core: ov.Core, reference: ort.InferenceSession) -> None:
    # ONNX Runtime's counters name the model's own ops; OpenVINO's name the ops of its compiled
    # graph, as raw OpenVINO does (tests/test_cpu_engines.py).
    compiled = core.compile_model(MODEL, "CPU", {"PERF_COUNT": "YES", "ENGINE": "ONNXRUNTIME"})
    ops = {op.get_friendly_name(): op.get_type_name() for op in core.read_model(MODEL).get_ops()}
    assert set(ops) == {"add", "relu", "MatMul_2", "Tanh_3"}
    request = compiled.create_infer_request()
    for seed in range(2):  # counters are those of the last run, every time
        feeds = _inputs(seed)
        _assert_matches(request.infer(feeds), reference, feeds)
        records = request.get_profiling_info()
        assert {r.node_name for r in records} == set(ops)
        assert len(records) == len(ops)
        for record in records:
            assert record.node_type == ops[record.node_name]
            assert record.status == "EXECUTED"
            assert record.real_time.total_seconds() >= 0


def test_profiling_is_empty_when_off(compiled: ov.CompiledModel) -> None:
    request = compiled.create_infer_request()
    request.infer(_inputs(0))
    assert request.get_profiling_info() == []
