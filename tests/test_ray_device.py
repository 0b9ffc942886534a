"""The RAY device family: the nodes of a Ray cluster as devices under MULTI and AUTO.

The cluster cases need a Ray cluster on loopback only: :func:`test_cases_in_a_local_cluster`
re-runs this file's ``test_cluster_*`` cases in a child process under ``unshare``
(new network and PID namespaces, only ``lo`` up), where a module fixture starts two
Ray nodes of one CPU each on 127.0.0.1 once, and ``ray stop`` there stops only
what the child started.  Results are checked against ONNX Runtime on the whole model.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort
import pytest
from onnx import ModelProto, TensorProto, helper, numpy_helper

import inferplex as ov
from inferplex.errors import DeviceNameError, InferenceError, PropertyError

from local_ray import IN_NAMESPACE, LocalCluster, namespace_refusal, rerun_in_namespace

IN_CLUSTER = os.environ.get(IN_NAMESPACE) == "1"
in_cluster = pytest.mark.skipif(not IN_CLUSTER, reason="runs in the child that test_cases_in_a_local_cluster "
                                                      "starts under unshare, beside a local Ray cluster")
_SRC = str(Path(__file__).resolve().parents[1] / "src")


def _model() -> ModelProto:
    weights = np.random.default_rng(7).standard_normal((16, 8)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["m"]), helper.make_node("Relu", ["m"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8])],
        [numpy_helper.from_array(weights, "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 10
    return model


def _inputs(count: int) -> np.ndarray:
    return np.random.default_rng(count).standard_normal((count, 1, 16)).astype(np.float32)


def _reference(inputs: np.ndarray) -> np.ndarray:
    session = ort.InferenceSession(_model().SerializeToString(), providers=["CPUExecutionProvider"])
    return np.stack([session.run(None, {"x": x})[0] for x in inputs])


def _run(code: str, **env: str) -> str:
    full_env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    full_env.update(env, PYTHONPATH=_SRC)
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                            timeout=120, env=full_env, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout.strip()


# --- without a cluster --------------------------------------------------------------------------


def test_import_and_a_core_do_not_import_ray() -> None:
    out = _run("""
        import sys
        import inferplex as ov
        core = ov.Core()
        print(any(d.startswith("RAY") for d in core.available_devices), "ray" in sys.modules)
    """)
    assert out == "False False"


def test_an_unreachable_ray_address_is_a_device_error_naming_it() -> None:
    with socket.socket() as probe:  # a port where nothing listens once this socket is closed
        probe.bind(("127.0.0.1", 0))
        address = f"127.0.0.1:{probe.getsockname()[1]}"
    out = _run("""
        import inferplex as ov
        from inferplex.errors import DeviceError
        core = ov.Core()
        print(any(d.startswith("RAY") for d in core.available_devices))  # listed devices skip it (warned)
        for _ in range(2):  # the second time from what the first found, without waiting again
            try:
                core.get_property("RAY.0", "FULL_DEVICE_NAME")
            except DeviceError as error:
                print(error)
    """, RAY_ADDRESS=address)
    listed, message, again = out.splitlines()
    assert listed == "False"
    assert address in message and "RAY_ADDRESS" in message and again == message


@pytest.mark.timeout(300)
def test_cases_in_a_local_cluster() -> None:
    """Re-runs the ``test_cluster_*`` cases in network and PID namespaces of their own."""
    if IN_CLUSTER:
        pytest.skip("this is the child that runs the cluster cases")
    refusal = namespace_refusal()
    if refusal is not None:
        pytest.skip(f"no local Ray cluster: {refusal}")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([_SRC, str(Path(__file__).parent)]))
    result = rerun_in_namespace([sys.executable, "-m", "pytest", __file__, "-q", "-k", "cluster_",
                                 "-p", "no:cacheprovider", "-W", "ignore::DeprecationWarning"],
                                timeout=280, env=env)
    summary = result.stdout[-6000:] + result.stderr[-2000:]
    assert result.returncode == 0, summary
    assert " passed" in result.stdout and "skipped" not in result.stdout.splitlines()[-1], summary


# --- in the child, beside a local cluster ----------------------------------------------------------


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    # Each node's host shows a GPU (emulated) that Ray does not list for the node: a node must
    # not use it (nodes that split one host would otherwise all serve from the host's GPU).
    local = LocalCluster(nodes=2, cpus=1, node_env={"INFERPLEX_EMULATED_GPUS": "1"}).start()
    os.environ["RAY_ADDRESS"] = local.address  # found by inferplex as a user's program would be
    try:
        yield local
    finally:
        import ray

        ray.shutdown()
        local.stop()


@pytest.fixture(scope="module")
def core(cluster: LocalCluster) -> ov.Core:
    core = ov.Core()
    # the nodes' CPUs at f32, as the suite's (``cpu_precision``): their processes are Ray's
    core.set_property("RAY", {"INFERENCE_PRECISION_HINT": "f32"})
    return core


@pytest.fixture(scope="module")
def multi(core: ov.Core) -> Iterator[Any]:
    compiled = core.compile_model(_model(), "MULTI:RAY.0,RAY.1", {"MULTI_QUARANTINE_TIME": 0.5})
    yield compiled
    compiled.release()


class _Collector:
    """Results of async requests by userdata, and how many times each ended."""

    def __init__(self, compiled: Any, signal_after: int = 0) -> None:
        self.queue = ov.AsyncInferQueue(compiled)
        self.results: dict[int, np.ndarray] = {}
        self.ends: Counter[int] = Counter()
        self.reached = threading.Event()
        """Set once ``signal_after`` requests have ended."""
        self._signal_after = signal_after
        self._lock = threading.Lock()
        self.queue.set_callback(self._ended)

    def _ended(self, request: Any, userdata: int) -> None:
        with self._lock:
            self.ends[userdata] += 1
            self.results[userdata] = request.results[0].copy()
            if len(self.ends) >= self._signal_after:
                self.reached.set()

    def submit(self, inputs: np.ndarray, first: int = 0) -> None:
        for index, x in enumerate(inputs):
            self.queue.start_async({"x": x}, first + index)

    def check(self, inputs: np.ndarray, expected: np.ndarray | None = None) -> None:
        """Every request ended once, with ``expected`` (default: ONNX Runtime on :func:`_model`)."""
        self.queue.wait_all()
        assert set(self.ends) == set(range(len(inputs))) and set(self.ends.values()) == {1}
        got = np.stack([self.results[i] for i in range(len(inputs))])
        np.testing.assert_allclose(got, _reference(inputs) if expected is None else expected,
                                   rtol=1e-4, atol=1e-5)


def _served(compiled: Any) -> dict[str, int]:
    return {d: int(s["requests"]) for d, s in compiled.get_property("DEVICE_STATISTICS").items()}


def _actor_names(device: str) -> set[str]:
    import ray

    return {name for name in ray.util.list_named_actors() if name.startswith(f"inferplex {device} ")}


@in_cluster
def test_cluster_lists_one_device_per_node_on_loopback(core: ov.Core) -> None:
    import ray

    ray_devices = [d for d in core.available_devices if d.startswith("RAY")]
    assert ray_devices == ["RAY.0", "RAY.1"]
    assert sorted(node["NodeManagerAddress"] for node in ray.nodes() if node["Alive"]) == ["127.0.0.1"] * 2
    ids = [core.get_property(d, "DEVICE_ID") for d in ray_devices]
    assert ids == sorted(ids) and len(set(ids)) == 2
    for device in ray_devices:
        assert "127.0.0.1" in core.get_property(device, "FULL_DEVICE_NAME")


@in_cluster
def test_cluster_2000_async_requests_over_two_nodes_end_once_each(multi: Any) -> None:
    inputs = _inputs(2000)
    collector = _Collector(multi)
    collector.submit(inputs)
    collector.check(inputs)
    served = _served(multi)
    assert set(served) == {"RAY.0", "RAY.1"} and all(count > 0 for count in served.values())
    workers = {d: s["workers"] for d, s in multi.get_property("DEVICE_STATISTICS").items()}
    assert multi.get_property("OPTIMAL_NUMBER_OF_INFER_REQUESTS") == sum(workers.values())
    calls = multi.get_property("NODE_CALLS")  # of the first member by priority
    assert calls["device"] == "RAY.0" and calls["requests"] == served["RAY.0"]
    assert 1 < calls["largest"] <= multi.get_property("REQUESTS_PER_CALL")
    assert calls["calls"] < calls["requests"] / 2  # gathered: far fewer actor calls than requests


def _relu_model(width: int) -> ModelProto:
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, width])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, width])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 10
    return model


@in_cluster
def test_cluster_large_requests_over_two_nodes_take_no_longer_than_on_one(core: ov.Core) -> None:
    """Inputs and outputs of 128 KiB go through Ray's object store (over its 100 KiB inline limit).

    With a call's reply read by a waiting ``ray.get``, calls to several nodes from
    one process held each other up in one-second steps: MULTI over two nodes took
    more than ten times as long as one node for the same requests.
    """
    width, count = 32768, 160
    model = _relu_model(width)
    inputs = np.random.default_rng(3).standard_normal((count, 1, width)).astype(np.float32)
    expected = np.maximum(inputs, 0)
    one_per_call = {"REQUESTS_PER_CALL": 1, "CALLS_IN_FLIGHT": 4}  # many replies waited for at once

    def timed(device: str, config: dict[str, Any]) -> float:
        compiled = core.compile_model(model, device, config)
        compiled({"x": inputs[0]})  # the first call's costs out of the timing
        collector = _Collector(compiled)
        begin = time.perf_counter()
        collector.submit(inputs)
        collector.check(inputs, expected)
        took = time.perf_counter() - begin
        compiled.release()
        return took

    alone = timed("RAY.0", one_per_call)
    both = timed("MULTI:RAY.0,RAY.1", {"DEVICE_PROPERTIES": {"RAY": one_per_call}})
    assert both < 3 * alone + 1.0, f"MULTI over two nodes took {both:.1f} s, one node {alone:.1f} s"


@in_cluster
def test_cluster_priorities_changed_under_load(multi: Any) -> None:
    inputs = _inputs(900)
    collector = _Collector(multi)
    collector.submit(inputs[:300])
    multi.set_property({"MULTI_DEVICE_PRIORITIES": "RAY.1"})  # RAY.0 left out while requests run
    assert multi.get_property("EXECUTION_DEVICES") == ["RAY.1"]
    collector.queue.wait_all()
    before = _served(multi)
    collector.submit(inputs[300:600], 300)
    collector.queue.wait_all()
    after = _served(multi)
    assert after["RAY.0"] == before["RAY.0"] and after["RAY.1"] == before["RAY.1"] + 300
    multi.set_property({"MULTI_DEVICE_PRIORITIES": "RAY.0,RAY.1"})
    collector.submit(inputs[600:], 600)
    collector.check(inputs)


@in_cluster
def test_cluster_an_actor_killed_mid_run_loses_nothing(multi: Any) -> None:
    import ray

    compiled = multi  # the last case to use it: its RAY.1 actor dies here
    compiled.set_property({"MULTI_DEVICE_PRIORITIES": "RAY.1,RAY.0"})  # NODE_CALLS: RAY.1's
    (victim,) = _actor_names("RAY.1")
    inputs = _inputs(1500)
    collector = _Collector(compiled, signal_after=300)
    before: dict[str, Any] = {}

    def kill_mid_run() -> None:  # while requests are still being submitted: RAY.1 has its calls running
        collector.reached.wait(60)
        before.update(compiled.get_property("NODE_CALLS"))
        ray.kill(ray.get_actor(victim), no_restart=True)

    killer = threading.Thread(target=kill_mid_run)
    killer.start()
    collector.submit(inputs)
    killer.join()
    collector.check(inputs)
    statistics = compiled.get_property("DEVICE_STATISTICS")
    assert statistics["RAY.1"]["failures"] >= 1 and statistics["RAY.0"]["requests"] > 0
    assert before["device"] == "RAY.1" and before["largest"] > 1  # calls of several requests were in flight
    # Tried again, the node serves from a new actor, compiled from the bytes in the object store.
    served = _served(compiled)["RAY.1"]
    compiled.set_property({"MULTI_DEVICE_PRIORITIES": "RAY.1"})
    again = _inputs(20)
    got = np.stack([compiled({"x": x})[0] for x in again])
    np.testing.assert_allclose(got, _reference(again), rtol=1e-4, atol=1e-5)
    assert _served(compiled)["RAY.1"] == served + 20
    assert len(_actor_names("RAY.1") - {victim}) == 1


@in_cluster
def test_cluster_auto_ray_uses_every_node_and_sums_their_requests(core: ov.Core) -> None:
    compiled = core.compile_model(_model(), "AUTO:RAY", {"PERFORMANCE_HINT": "CUMULATIVE_THROUGHPUT"})
    assert compiled.get_property("EXECUTION_DEVICES") == ["RAY.0", "RAY.1"]
    workers = [s["workers"] for s in compiled.get_property("DEVICE_STATISTICS").values()]
    assert compiled.get_property("OPTIMAL_NUMBER_OF_INFER_REQUESTS") == sum(workers)
    inputs = _inputs(8)
    got = np.stack([compiled({"x": x})[0] for x in inputs])
    np.testing.assert_allclose(got, _reference(inputs), rtol=1e-4, atol=1e-5)
    compiled.release()
    local = core.compile_model(_model(), "AUTO")  # latency: a node over the network is not chosen
    assert all(not d.startswith("RAY") for d in local.get_property("EXECUTION_DEVICES"))


@in_cluster
def test_cluster_node_settings_and_release_frees_the_actor(core: ov.Core) -> None:
    default = core.compile_model(_model(), "RAY.0")  # the node's AUTO, every device of it serving
    assert default.get_property("PERFORMANCE_HINT") == "CUMULATIVE_THROUGHPUT"  # the node's answer
    # its CPU only: the host's GPU (emulated, see the cluster fixture) is not the node's in Ray
    assert core.get_property("RAY.0", "NODE_RESOURCES").get("GPU", 0) == 0
    assert default.get_property("NODE_EXECUTION_DEVICES") == ["CPU"]
    default.release()
    before = _actor_names("RAY.1")
    per_device = {"RAY": {"NODE_DEVICE": "CPU"}, "RAY.1": {"NODE_PROPERTIES": {"ENGINE": "ONNXRUNTIME"}}}
    compiled = core.compile_model(_model(), "MULTI:RAY.1", {"DEVICE_PROPERTIES": per_device})
    (actor,) = _actor_names("RAY.1") - before
    assert compiled.get_property("NODE_EXECUTION_DEVICES") == ["CPU"]
    assert compiled.get_property("ENGINE") == "ONNXRUNTIME"  # read from the node's compiled model
    node_optimal = compiled.get_property("NODE_OPTIMAL_NUMBER_OF_INFER_REQUESTS")
    per_call = compiled.get_property("REQUESTS_PER_CALL")
    assert per_call == max(4, 2 * node_optimal) and compiled.get_property("CALLS_IN_FLIGHT") == 2
    # every call in flight, and the next one gathering, full
    assert compiled.get_property("OPTIMAL_NUMBER_OF_INFER_REQUESTS") == 3 * per_call
    inputs = _inputs(4)
    np.testing.assert_allclose(np.stack([compiled({"x": x})[0] for x in inputs]), _reference(inputs),
                               rtol=1e-4, atol=1e-5)
    calls = compiled.get_property("NODE_CALLS")  # one at a time: each sent at once, alone
    assert (calls["calls"], calls["requests"], calls["largest"]) == (4, 4, 1)
    compiled.release()
    deadline = time.monotonic() + 30
    while actor in _actor_names("RAY.1") and time.monotonic() < deadline:
        time.sleep(0.1)
    assert actor not in _actor_names("RAY.1")


@in_cluster
def test_cluster_bad_node_settings_are_clear_errors(core: ov.Core) -> None:
    with pytest.raises(PropertyError, match="NODE_DEVICE"):
        core.compile_model(_model(), "RAY.0", {"NODE_DEVICE": "MULTI:RAY.1,CPU"})
    with pytest.raises(PropertyError, match="NODE_PROPERTIES"):
        core.compile_model(_model(), "RAY.0", {"NODE_PROPERTIES": "fast"})
    with pytest.raises(PropertyError, match=r"REQUESTS_PER_CALL.*0 to 256"):
        core.compile_model(_model(), "RAY.0", {"REQUESTS_PER_CALL": -1})
    with pytest.raises(PropertyError, match=r"CALLS_IN_FLIGHT.*1 to 16"):
        core.compile_model(_model(), "RAY.0", {"CALLS_IN_FLIGHT": 0})
    with pytest.raises(DeviceNameError, match=r"RAY\.0 .*GPU\.3"):  # the node has no GPU.3
        core.compile_model(_model(), "RAY.0", {"NODE_DEVICE": "GPU.3"})


def _gather_model() -> tuple[ModelProto, np.ndarray]:
    """Rows of a table by index: an index past the table is an error in ONNX Runtime, at run time."""
    table = np.arange(40, dtype=np.float32).reshape(10, 4)
    graph = helper.make_graph(
        [helper.make_node("Gather", ["table", "i"], ["y"], axis=0)], "g",
        [helper.make_tensor_value_info("i", TensorProto.INT64, [1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])],
        [numpy_helper.from_array(table, "table")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 10
    return model, table


@in_cluster
def test_cluster_a_request_the_node_fails_fails_alone_in_its_call(core: ov.Core) -> None:
    model, table = _gather_model()
    node_ort = {"NODE_DEVICE": "CPU", "NODE_PROPERTIES": {"ENGINE": "ONNXRUNTIME"}}
    compiled = core.compile_model(model, "RAY.0", node_ort)
    queue = ov.AsyncInferQueue(compiled)
    ended: dict[int, Any] = {}
    ends: Counter[int] = Counter()
    lock = threading.Lock()

    def done(request: Any, index: int) -> None:
        try:
            outcome: Any = request.results[0].copy()
        except InferenceError as error:
            outcome = error
        with lock:
            ends[index] += 1
            ended[index] = outcome

    queue.set_callback(done)
    count, bad = 240, set(range(7, 240, 23))  # every 23rd index is past the table's 10 rows
    for index in range(count):
        queue.start_async({"i": np.array([index + 100 if index in bad else index % 10])}, index)
    queue.wait_all()
    assert sorted(ends) == list(range(count)) and set(ends.values()) == {1}
    for index in range(count):
        if index in bad:
            assert isinstance(ended[index], InferenceError) and "RAY.0" in str(ended[index])
        else:
            np.testing.assert_array_equal(ended[index], table[[index % 10]])
    calls = compiled.get_property("NODE_CALLS")
    assert calls["requests"] == count and calls["largest"] > 1 and calls["calls"] < count / 2
    compiled.release()


@in_cluster
def test_cluster_requests_in_flight_at_exit_all_end(cluster: LocalCluster) -> None:
    out = _run("""
        import numpy as np
        import inferplex as ov
        from onnx import TensorProto, helper
        graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                                  [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16])],
                                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16])])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
        model.ir_version = 10
        queue = ov.AsyncInferQueue(ov.Core().compile_model(model, "MULTI:RAY.0,RAY.1"))
        queue.set_callback(lambda request, i: print(i, float(request.results[0].sum()), flush=True))
        for i in range(300):
            queue.start_async({"x": np.full((1, 16), i - 150, np.float32)}, i)
    """, RAY_ADDRESS=cluster.address)  # the program ends with requests in flight
    lines = [line.split() for line in out.splitlines()]  # Ray may forward a node's log lines too
    ended = dict(words for words in lines if len(words) == 2 and words[0].isdigit())
    assert sorted(map(int, ended)) == list(range(300))
    assert all(float(ended[str(i)]) == 16.0 * max(i - 150, 0) for i in range(300))


@in_cluster
def test_cluster_a_node_lost_mid_run_loses_nothing_and_then_says_so(cluster: LocalCluster,
                                                                    core: ov.Core) -> None:
    """The last case: it takes a worker node (not the head) out of the cluster for good."""
    import ray

    head = next(n["NodeID"] for n in ray.nodes() if "node:__internal_head__" in n["Resources"])
    lost = next(d for d in ("RAY.0", "RAY.1") if core.get_property(d, "DEVICE_ID") != head)
    node_id = core.get_property(lost, "DEVICE_ID")
    compiled = core.compile_model(_model(), "MULTI:RAY.0,RAY.1", {"MULTI_QUARANTINE_TIME": 0.5})
    inputs = _inputs(1500)
    collector = _Collector(compiled, signal_after=300)

    def lose_the_node() -> None:
        collector.reached.wait(60)
        assert cluster.kill_node(node_id) >= 2  # its raylet and the actor's worker at least

    killer = threading.Thread(target=lose_the_node)
    killer.start()
    collector.submit(inputs)
    killer.join()
    collector.check(inputs)
    assert compiled.get_property("DEVICE_STATISTICS")[lost]["failures"] >= 1
    compiled.set_property({"MULTI_DEVICE_PRIORITIES": lost})
    with pytest.raises(InferenceError, match=rf"{lost} (is gone|could not start a new actor)"):
        compiled({"x": inputs[0]})
    compiled.release()
