"""MULTI and AUTO through the public API (Core, AsyncInferQueue), on emulated GPUs where present."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import inferplex as ov
from inferplex.errors import PropertyError

from multi_plugins import expected, input_for, linear_model, run_program

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def core(emulated_core: ov.Core) -> ov.Core:
    return emulated_core


def device_list(core: ov.Core) -> str:
    gpus = [d for d in core.available_devices if d.startswith("GPU.")][:2]
    return ",".join([*gpus, "CPU"])


@pytest.mark.parametrize("processes", ["NO", "YES"])
def test_2000_async_requests_over_emulated_gpus_and_cpu(core: ov.Core, processes: str) -> None:
    """Also with each GPU served from a worker process of its own (shared buffers, sockets)."""
    devices = device_list(core)
    compiled = core.compile_model(linear_model(), f"MULTI:{devices}", {"MULTI_WORKER_PROCESSES": processes})
    assert compiled.get_property("EXECUTION_DEVICES") == devices.split(",")
    results: dict[int, tuple[np.ndarray | BaseException, str]] = {}
    twice: list[int] = []
    lock = threading.Lock()

    def on_done(request: ov.InferRequest, index: int) -> None:
        try:
            outcome: np.ndarray | BaseException = np.array(request.results["y"])
        except BaseException as error:  # noqa: BLE001 - recorded, checked below
            outcome = error
        with lock:
            if index in results:
                twice.append(index)
            results[index] = (outcome, request.device)

    queue = ov.AsyncInferQueue(compiled)
    queue.set_callback(on_done)
    for index in range(2000):
        queue.start_async({"x": input_for(index)}, index)
    queue.wait_all()
    assert not twice and len(results) == 2000
    for index, (outcome, _) in results.items():
        assert not isinstance(outcome, BaseException), f"request {index}: {outcome!r}"
        np.testing.assert_allclose(outcome, expected(input_for(index)), rtol=1e-5)
    used = {device for _, device in results.values()}
    assert used <= set(devices.split(",")) and len(used) >= 2
    stats = compiled.get_property("DEVICE_STATISTICS")
    assert sum(entry["requests"] for entry in stats.values()) == 2000
    compiled.release()


def test_priorities_on_a_compiled_model(core: ov.Core) -> None:
    compiled = core.compile_model(linear_model(), f"MULTI:{device_list(core)}")
    compiled.set_property({"MULTI_DEVICE_PRIORITIES": "CPU"})
    assert compiled.get_property("EXECUTION_DEVICES") == ["CPU"]
    assert compiled.create_infer_request().infer({"x": input_for(2)}) is not None
    with pytest.raises(PropertyError, match="was not in the original device list"):
        compiled.set_property({"MULTI_DEVICE_PRIORITIES": "CPU,NOPE"})
    compiled.release()


def test_compile_model_without_a_device_is_auto(core: ov.Core) -> None:
    compiled = core.compile_model(linear_model())
    result = compiled({"x": input_for(5)})
    np.testing.assert_allclose(np.array(result["y"]), expected(input_for(5)), rtol=1e-5)
    compiled.release()


def test_cumulative_throughput_uses_every_device(core: ov.Core) -> None:
    compiled = core.compile_model(linear_model(), "AUTO",
                                  {"PERFORMANCE_HINT": "CUMULATIVE_THROUGHPUT"})
    assert set(compiled.get_property("EXECUTION_DEVICES")) == set(core.available_devices)
    compiled.release()


@pytest.mark.parametrize("wait", ["infer", "start_async and wait", "start_async and wait_for"])
def test_a_callback_may_wait_for_another_request_of_the_same_model(core: ov.Core, wait: str) -> None:
    """Callbacks run on MULTI's worker threads; with GPU.0(1) the nested request can only go to
    the worker whose thread runs the callback, which must run it rather than wait for itself."""
    compiled = core.compile_model(linear_model(), "MULTI:GPU.0(1)")
    nested: dict[int, np.ndarray] = {}
    done = threading.Event()

    def on_done(request: ov.InferRequest, index: int) -> None:
        other = compiled.create_infer_request()
        if wait == "infer":
            other.infer({"x": input_for(100 + index)})
        else:
            other.start_async({"x": input_for(100 + index)})
            if wait == "start_async and wait":
                other.wait()
            else:
                assert other.wait_for(10_000)
        nested[index] = np.array(other.results["y"])
        if len(nested) == 5:
            done.set()

    queue = ov.AsyncInferQueue(compiled, 1)
    queue.set_callback(on_done)
    for index in range(5):
        queue.start_async({"x": input_for(index)}, index)
    assert done.wait(20), f"{5 - len(nested)} callbacks never saw their nested request end"
    queue.wait_all()
    for index in range(5):
        np.testing.assert_allclose(nested[index], expected(input_for(100 + index)), rtol=1e-6)
    compiled.release()


@pytest.mark.parametrize("jobs", [1, 0])
def test_callbacks_that_feed_their_own_queue_end_every_job_once(core: ov.Core, jobs: int) -> None:
    """Every callback starts the next job of its chain on the same queue: with one job, or with
    every job in a callback at once, none is idle, so the job is queued rather than waited for."""
    devices = "MULTI:GPU.0(1)" if jobs == 1 else f"MULTI:{device_list(core)}"
    compiled = core.compile_model(linear_model(), devices)
    queue = ov.AsyncInferQueue(compiled, jobs)
    ended: dict[int, np.ndarray] = {}
    counts: dict[int, int] = {}
    lock = threading.Lock()
    chains, length = 2 * len(queue), 25

    def on_done(request: ov.InferRequest, index: int) -> None:
        with lock:
            counts[index] = counts.get(index, 0) + 1
            ended[index] = np.array(request.results["y"])
        if index % length < length - 1:
            queue.start_async({"x": input_for(index + 1)}, index + 1)

    queue.set_callback(on_done)
    for chain in range(chains):
        queue.start_async({"x": input_for(chain * length)}, chain * length)
    queue.wait_all()
    assert counts == dict.fromkeys(range(chains * length), 1)
    for index in range(chains * length):
        np.testing.assert_allclose(ended[index], expected(input_for(index)), rtol=1e-6)
    compiled.release()


_EXIT_WITH_REQUESTS_IN_FLIGHT = """
import atexit, json, sys
ended, wrong = [], []
atexit.register(lambda: print(f"ended {len(ended)} wrong {len(wrong)}", flush=True))  # runs last

import numpy as np
import inferplex as ov
from multi_plugins import relu_stack, relu_stack_reference

model, weights = relu_stack(8, 512, 64)  # enough work that requests still run when the program ends
compiled = ov.Core().compile_model(model, sys.argv[1], json.loads(sys.argv[2]))
rng = np.random.default_rng(1)
inputs = [rng.standard_normal((64, 512)).astype(np.float32) for _ in range(48)]

def check(request, index):
    expected = relu_stack_reference(inputs[index], weights)
    if not np.allclose(request.results["y"], expected, rtol=1e-3, atol=1e-3):
        wrong.append(index)
    ended.append(index)

queue = ov.AsyncInferQueue(compiled, 16)
queue.set_callback(check)
for index, x in enumerate(inputs):
    queue.start_async({"x": x}, index)
print("submitted", flush=True)
"""


@pytest.mark.parametrize(("devices", "config"), [
    ("MULTI:GPU.0,CPU", {}), ("MULTI:CPU", {}), ("CPU", {"PERFORMANCE_HINT": "THROUGHPUT"}),
    ("HETERO:GPU.0,GPU.1", {"MODEL_DISTRIBUTION_POLICY": "PIPELINE_PARALLEL"})])
def test_a_program_may_exit_with_requests_in_flight(devices: str, config: dict[str, str]) -> None:
    """Every request still ends, right, with its callback, and the interpreter exits cleanly
    (worker threads stopped inside ONNX Runtime or torch aborted it)."""
    import json

    done = run_program(_EXIT_WITH_REQUESTS_IN_FLIGHT, devices, json.dumps(config))
    assert done.returncode == 0, f"exit code {done.returncode}: {done.stderr[-2000:]}"
    assert done.stdout.split() == ["submitted", "ended", "48", "wrong", "0"]
