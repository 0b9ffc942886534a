"""MULTI and AUTO through the public API (Core, AsyncInferQueue), on emulated GPUs where present."""

from __future__ import annotations

import threading
from pathlib import Path

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
    """With GPU.0(1) the nested request needs the only worker, free once the outer run ended
    (callbacks run off the devices' threads)."""
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


@pytest.mark.parametrize(("device", "config"), [
    ("CPU", {"PERFORMANCE_HINT": "THROUGHPUT"}),
    ("GPU.0", {"MEMORY_LIMIT": "1GB", "PERFORMANCE_HINT_NUM_REQUESTS": 2}),
    ("MULTI:GPU.0,CPU", {}),
    ("AUTO", {}),
    ("AUTO", {"PERFORMANCE_HINT": "CUMULATIVE_THROUGHPUT"}),
    ("HETERO:GPU.0,CPU", {}),
])
def test_supported_properties_lists_every_key_a_compiled_model_reads(
        core: ov.Core, device: str, config: dict[str, object]) -> None:
    """As with OpenVINO, ``for key in SUPPORTED_PROPERTIES: get_property(key)`` reads everything."""
    compiled = core.compile_model(linear_model(), device, config)
    listed = compiled.get_property("SUPPORTED_PROPERTIES")
    values = {key: compiled.get_property(key) for key in listed}  # each listed key reads
    assert len(set(listed)) == len(listed)
    assert values["EXECUTION_DEVICES"] == compiled.get_property("EXECUTION_DEVICES")
    for key, value in config.items():  # what the user set reads back (GPU programs used to refuse)
        assert key in listed
        assert values[key] == {"1GB": 10**9}.get(value, value)  # type: ignore[call-overload]
    readable = {
        "CPU": {"NUM_STREAMS", "INFERENCE_NUM_THREADS", "PERFORMANCE_HINT"},
        "GPU.0": {"NUM_STREAMS", "CUDA_GRAPHS", "INFERENCE_PRECISION_HINT"},
        "HETERO:GPU.0,CPU": {"HETERO_NUMBER_OF_SUBMODELS", "HETERO_SUBGRAPHS"},
    }.get(device, {"MULTI_DEVICE_PRIORITIES", "DEVICE_STATISTICS", "SCHEDULE_POLICY", "PERFORMANCE_HINT"})
    assert readable <= set(listed)
    with pytest.raises(PropertyError, match="NOT_A_KEY"):
        compiled.get_property("NOT_A_KEY")
    compiled.release()


@pytest.mark.parametrize(("device", "config", "hint"), [
    ("AUTO", {}, "LATENCY"),
    ("AUTO", {"PERFORMANCE_HINT": "THROUGHPUT"}, "THROUGHPUT"),
    ("AUTO", {"PERFORMANCE_HINT": "CUMULATIVE_THROUGHPUT"}, "CUMULATIVE_THROUGHPUT"),
    ("MULTI:GPU.0,CPU", {}, "CUMULATIVE_THROUGHPUT"),
    ("MULTI:GPU.0,CPU", {"PERFORMANCE_HINT": "THROUGHPUT"}, "THROUGHPUT"),
])
def test_a_virtual_device_reports_the_hint_it_runs_with(core: ov.Core, device: str, config: dict[str, str],
                                                        hint: str) -> None:
    compiled = core.compile_model(linear_model(), device, config)
    assert compiled.get_property("PERFORMANCE_HINT") == hint
    compiled.release()


@pytest.mark.parametrize("key", ["NPU", "GPU0", "gpu", "GPU.x", "MULTI"])
def test_device_properties_naming_no_device_are_refused(core: ov.Core, key: str) -> None:
    """A misspelt key would otherwise be ignored in silence; nothing is set by a refused call."""
    with pytest.raises(PropertyError, match=rf"DEVICE_PROPERTIES names '{key}'.*CPU, GPU"):
        core.compile_model(linear_model(), "MULTI:GPU.0,CPU", {"DEVICE_PROPERTIES": {key: {}}})
    with pytest.raises(PropertyError, match=rf"'{key}'"):
        core.set_property("MULTI", {"DEVICE_PROPERTIES": {key: {"NUM_STREAMS": 2}}})
    with pytest.raises(PropertyError, match=rf"'{key}'"):
        core.set_property({"DEVICE_PROPERTIES": {key: {}}, "NUM_STREAMS": 1})
    for virtual in ("MULTI", "AUTO", "HETERO"):
        assert core.get_property(virtual, "DEVICE_PROPERTIES") == {}  # nothing set by the refusals
    assert "NUM_STREAMS" not in core.registry.global_config("CPU")


def test_device_properties_are_checked_for_devices_not_in_the_list(core: ov.Core) -> None:
    """GPU.1 and an absent GPU.7 may carry properties (one config for several machines), valid ones."""
    config = {"DEVICE_PROPERTIES": {"GPU.1": {"NUM_STREAMS": 3}, "GPU.7": {"NUM_STREAMS": 2}}}
    compiled = core.compile_model(linear_model(), "MULTI:GPU.0,CPU", config)
    result = compiled({"x": input_for(3)})["y"]
    np.testing.assert_allclose(np.array(result), expected(input_for(3)), rtol=1e-5)
    compiled.release()
    with pytest.raises(PropertyError, match=r"DEVICE_PROPERTIES\['GPU.1'\].*NUM_STREAMS.*'lots'"):
        core.compile_model(linear_model(), "MULTI:GPU.0,CPU",
                           {"DEVICE_PROPERTIES": {"GPU.1": {"NUM_STREAMS": "lots"}}})
    with pytest.raises(PropertyError, match=r"DEVICE_PROPERTIES\['CPU'\].*CUDA_GRAPHS"):
        core.compile_model(linear_model(), "AUTO", {"DEVICE_PROPERTIES": {"CPU": {"CUDA_GRAPHS": True}}})


def test_priorities_on_a_compiled_model_keep_the_request_counts(core: ov.Core) -> None:
    compiled = core.compile_model(linear_model(), "MULTI:GPU.0,CPU(2)")
    compiled.set_property({"MULTI_DEVICE_PRIORITIES": "CPU(2),GPU.0"})  # the compiled count: accepted
    assert compiled.get_property("EXECUTION_DEVICES") == ["CPU", "GPU.0"]
    with pytest.raises(PropertyError, match=r"CPU\(3\) \(CPU has 2\).*set when compiling"):
        compiled.set_property({"MULTI_DEVICE_PRIORITIES": "GPU.0,CPU(3)"})
    assert compiled.get_property("MULTI_DEVICE_PRIORITIES") == "CPU,GPU.0"  # unchanged
    assert compiled.get_property("OPTIMAL_NUMBER_OF_INFER_REQUESTS") == 2 + 2
    compiled.release()


@pytest.mark.parametrize("device", ["MULTI:GPU.0,CPU", "AUTO:GPU.0,CPU", "HETERO:GPU.0,CPU"])
def test_a_device_key_given_to_a_virtual_device_reaches_the_members_that_take_it(
        core: ov.Core, device: str) -> None:
    """OpenVINO passes device keys down; they used to be accepted by the virtual device and dropped."""
    config = {"GPU_QUEUE_THROTTLE": "LOW", "THREAD_SPINNING": False, "ENABLE_STARTUP_FALLBACK": False}
    if device.startswith("HETERO"):
        del config["ENABLE_STARTUP_FALLBACK"]
    compiled = core.compile_model(linear_model(), device, config)
    if device.startswith("HETERO"):
        members = {r.device: r.pool.program for r in compiled._runner.runners}  # HETERO: no public read
        assert members["GPU.0"].get_property("GPU_QUEUE_THROTTLE") == "LOW"
        if "CPU" in members:
            assert members["CPU"].get_property("THREAD_SPINNING") is False
    else:  # MULTI and AUTO read their members' keys from the members, in priority order
        assert compiled.get_property("GPU_QUEUE_THROTTLE") == "LOW"
        if "CPU" in compiled.get_property("EXECUTION_DEVICES"):
            assert compiled.get_property("THREAD_SPINNING") is False
    result = compiled({"x": input_for(4)})["y"]
    np.testing.assert_allclose(np.array(result), expected(input_for(4)), rtol=1e-5)
    compiled.release()


@pytest.mark.parametrize(("device", "key", "value"), [
    ("HETERO:GPU.0,CPU", "SCHEDULE_POLICY", "ROUND_ROBIN"),
    ("HETERO:GPU.0,CPU", "ENABLE_STARTUP_FALLBACK", False),
    ("MULTI:GPU.0,CPU", "MODEL_DISTRIBUTION_POLICY", "PIPELINE_PARALLEL"),
    ("AUTO", "NOT_A_KEY", 1),
])
def test_a_key_no_part_of_a_virtual_device_takes_is_refused(core: ov.Core, device: str, key: str,
                                                            value: object) -> None:
    virtual = device.split(":")[0]
    with pytest.raises(PropertyError, match=rf"unknown property '{key}' for {virtual}; accepted keys: .*"):
        core.compile_model(linear_model(), device, {key: value})
    with pytest.raises(PropertyError, match=rf"'{key}'"):
        core.set_property(virtual, {key: value})
    assert key not in core.get_property(virtual, "SUPPORTED_PROPERTIES")


def test_a_global_setting_goes_to_the_devices_that_take_it(core: ov.Core) -> None:
    fresh = ov.Core()
    fresh.set_property({"SCHEDULE_POLICY": "ROUND_ROBIN", "MODEL_DISTRIBUTION_POLICY": "PIPELINE_PARALLEL"})
    assert fresh.get_property("MULTI", "SCHEDULE_POLICY") == "ROUND_ROBIN"
    assert fresh.get_property("HETERO", "MODEL_DISTRIBUTION_POLICY") == {"PIPELINE_PARALLEL"}
    with pytest.raises(PropertyError, match="HETERO has no property 'SCHEDULE_POLICY'; it has: "):
        fresh.get_property("HETERO", "SCHEDULE_POLICY")  # MULTI's and AUTO's key
    with pytest.raises(PropertyError, match="unknown property 'NOT_A_KEY' for any device"):
        fresh.set_property({"NOT_A_KEY": 1, "SCHEDULE_POLICY": "DEVICE_PRIORITY"})
    assert fresh.get_property("MULTI", "SCHEDULE_POLICY") == "ROUND_ROBIN"  # nothing set by the refusal


def test_cache_dir_is_taken_by_every_device(core: ov.Core, tmp_path: Path) -> None:
    for device in ("CPU", "AUTO", "MULTI:CPU", "HETERO:CPU"):
        compiled = core.compile_model(linear_model(), device, {"CACHE_DIR": str(tmp_path)})
        assert compiled.get_property("CACHE_DIR") == str(tmp_path)


def test_versions_of_auto_name_its_candidates(core: ov.Core) -> None:
    gpus = [d for d in core.available_devices if d.startswith("GPU.")]
    assert list(core.get_versions("AUTO")) == ["AUTO", *gpus, "CPU"]  # GPUs before the CPU
    assert list(core.get_versions("AUTO:-CPU")) == ["AUTO", *gpus]
    assert core.get_versions("AUTO:CPU")["CPU"] == core.get_versions("CPU")["CPU"]
    with pytest.raises(ov.errors.DeviceNameError, match="no candidate device left"):
        core.get_versions("AUTO:-CPU,-GPU")


def test_a_device_key_no_member_takes_is_refused_when_given_to_the_compile(core: ov.Core) -> None:
    with pytest.raises(PropertyError, match=r"CUDA_GRAPHS given to MULTI:CPU: no device in it \(CPU\)"):
        core.compile_model(linear_model(), "MULTI:CPU", {"CUDA_GRAPHS": False})
    with pytest.raises(PropertyError, match=r"GPU_QUEUE_THROTTLE, TORCH_COMPILE given to AUTO:-GPU.*them"):
        core.compile_model(linear_model(), "AUTO:-GPU", {"GPU_QUEUE_THROTTLE": "LOW", "TORCH_COMPILE": False})
    with pytest.raises(PropertyError, match=r"THREAD_SPINNING given to HETERO: .*\(GPU.0\)"):
        core.compile_model(linear_model(), "HETERO",
                           {"THREAD_SPINNING": False, "MULTI_DEVICE_PRIORITIES": "GPU.0"})
    # Set for every later device list, it stays: this list has no GPU to take it.
    fresh = ov.Core()
    fresh.set_property("MULTI", {"CUDA_GRAPHS": False})
    compiled = fresh.compile_model(linear_model(), "MULTI:CPU")
    result = compiled({"x": input_for(2)})["y"]
    np.testing.assert_allclose(np.array(result), expected(input_for(2)), rtol=1e-5)
    compiled.release()


def test_release_inside_a_multi_callback(core: ov.Core) -> None:
    """Callbacks run off the devices' and the dispatcher's threads: releasing there closes everything."""
    compiled = core.compile_model(linear_model(), f"MULTI:{device_list(core)}")
    request = compiled.create_infer_request()
    released = threading.Event()

    def release(_: object) -> None:
        compiled.release()
        released.set()

    request.set_callback(release, None)
    request.start_async({"x": input_for(7)})
    assert released.wait(20), "release() inside the callback did not return"
    request.wait()
    np.testing.assert_allclose(np.array(request.results["y"]), expected(input_for(7)), rtol=1e-5)
    with pytest.raises(ov.errors.InferenceError, match=r"closed|released"):
        compiled.create_infer_request().infer({"x": input_for(8)})


def test_dropping_multi_models_ends_their_threads(core: ov.Core) -> None:
    """30 compiled MULTI models, each run once and dropped: the thread count returns to where it was."""
    import gc
    import time

    gc.collect()
    baseline = threading.active_count()
    for index in range(30):
        compiled = core.compile_model(linear_model(), f"MULTI:{device_list(core)}")
        queue = ov.AsyncInferQueue(compiled)  # a request on every member: every pool starts its threads
        for job in range(len(queue)):
            queue.start_async({"x": input_for(index + job)})
        queue.wait_all()
        del compiled, queue
    gc.collect()
    deadline = time.monotonic() + 20
    while threading.active_count() > baseline and time.monotonic() < deadline:
        time.sleep(0.05)
    assert threading.active_count() <= baseline, [t.name for t in threading.enumerate()]
