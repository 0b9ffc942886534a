"""MULTI: compile on several devices, every request ends exactly once with its own result.

Test devices (multi_plugins) registered on an ``ov.Core``; everything through the public API.
"""

from __future__ import annotations

import logging
import re
import time
from typing import Any

import numpy as np
import pytest

from inferplex.errors import CompileError, DeviceNameError, InferenceError, PropertyError
from inferplex.scheduling.latency import LatencyEstimate

from multi_plugins import (
    Collector,
    Faults,
    FaultyPlugin,
    expected,
    input_for,
    linear_model,
    make_core,
    run_program,
    submit_many,
    submit_when_free,
)

pytestmark = pytest.mark.timeout(60)


def three_devices(**cpu: object) -> tuple[FaultyPlugin, FaultyPlugin, Any]:
    gpu = FaultyPlugin("GPU", ("GPU.0", "GPU.1"), device_type="discrete")
    host = FaultyPlugin("CPU", ("CPU",), {"CPU": Faults(workers=1, **cpu)}, device_type="host")  # type: ignore[arg-type]
    return gpu, host, make_core(host, gpu)


def multi(core: Any, text: str, config: dict | None = None) -> Any:
    return core.compile_model(linear_model(), text, config or {})


def infer(compiled: Any, index: int) -> Any:
    """A synchronous inference of input ``index``; the finished InferRequest."""
    request = compiled.create_infer_request()
    request.infer({"x": input_for(index)})
    return request


@pytest.mark.parametrize("policy", ["EARLIEST_FINISH", "DEVICE_PRIORITY", "ROUND_ROBIN"])
def test_2000_async_requests_end_once_each_with_their_own_result(policy: str) -> None:
    _, _, core = three_devices(delay=0.001)
    compiled = multi(core, "MULTI:GPU.0,GPU.1,CPU", {"SCHEDULE_POLICY": policy})
    try:
        collector = submit_many(compiled, 2000)
        collector.wait(30)
        per_device = collector.check_results()
        assert sum(per_device.values()) == 2000
        assert set(per_device) == {"GPU.0", "GPU.1", "CPU"}
        stats = compiled.get_property("DEVICE_STATISTICS")
        assert {name: s["requests"] for name, s in stats.items()} == per_device
        assert sum(s["share"] for s in stats.values()) == pytest.approx(1.0)
    finally:
        compiled.release()


def _earliest_finish_beside_a_cpu(gpu_faults: Faults, count: int,
                                  cpu_delay: float = 0.02) -> tuple[dict[str, int], float]:
    """``count`` requests, two in flight, over a warming GPU and a CPU taking ``cpu_delay`` s.

    With two requests in flight the CPU always has an idle worker, so the GPU
    gets requests only while its latency estimate says it is faster.  Returns
    the requests each device served and the GPU's latency estimate (ms) at the end.
    """
    import threading

    gpu = FaultyPlugin("GPU", ("GPU.0",), {"GPU.0": gpu_faults}, device_type="discrete")
    host = FaultyPlugin("CPU", ("CPU",), {"CPU": Faults(workers=2, delay=cpu_delay)}, device_type="host")
    compiled = multi(make_core(host, gpu), "MULTI:GPU.0,CPU", {"SCHEDULE_POLICY": "EARLIEST_FINISH"})
    collector = Collector(count)
    slots = threading.Semaphore(2)
    try:
        for index in range(count):
            submit_when_free(compiled, collector, index, slots)
        collector.wait(30)
        per_device = collector.check_results()
        return per_device, compiled.get_property("DEVICE_STATISTICS")["GPU.0"]["latency_ms"]
    finally:
        compiled.release()


def test_earliest_finish_is_not_misled_by_a_fast_devices_slow_first_runs() -> None:
    """Each GPU worker's first run is slow (like a CUDA graph capture); after that it is fast.

    The CPU takes 50 ms: far above a fast run's few milliseconds even on a loaded
    machine, far below the 300 ms warm-up runs that must not count.
    """
    per_device, latency_ms = _earliest_finish_beside_a_cpu(Faults(workers=2, first_run_delay=0.3), 300,
                                                           cpu_delay=0.05)
    assert per_device.get("GPU.0", 0) >= 0.9 * 300, per_device
    assert latency_ms < 50  # the 300 ms warm-up runs are left out


def test_earliest_finish_recovers_when_warm_up_held_back_later_runs_too() -> None:
    """The GPU's first 4 runs over its 2 workers are slow, so 2 runs past each worker's first count.

    Its estimate then reads 300 ms against the CPU's 20 ms: the GPU gets only a
    probe once it has been idle for PROBE_AFTER seconds, and that probe's fast
    time must bring the estimate down at once (the median of 300, 300 and 1 ms
    would not).  The CPU serves about 100 requests/s until then, about 2.6 s in.
    """
    per_device, latency_ms = _earliest_finish_beside_a_cpu(
        Faults(workers=2, first_run_delay=0.3, slow_runs=4), 600)
    assert per_device.get("GPU.0", 0) >= 0.5 * 600, per_device
    assert latency_ms < 20


def test_a_run_far_faster_than_the_estimate_drops_the_slow_samples() -> None:
    estimate = LatencyEstimate(workers=2)
    estimate.record(1.0, 0.0)  # each worker's first run is left out
    estimate.record(1.0, 0.0)
    assert estimate.warm and estimate.latency is None
    for _ in range(3):
        estimate.record(0.3, 0.0)
    assert estimate.latency == 0.3
    estimate.record(0.2, 0.0)  # not far faster: a sample like the others
    assert estimate.latency == 0.3
    estimate.record(0.01, 0.0)
    assert estimate.latency == 0.01
    for elapsed in (0.012, 0.011, 0.5):  # one slow run among fast ones does not take over
        estimate.record(elapsed, 0.0)
    assert estimate.latency == pytest.approx(0.011)
    estimate.record(5.0, 0.0, success=False)  # failures do not count
    assert estimate.latency == pytest.approx(0.011)


@pytest.mark.parametrize("devices", ["MULTI:GPU.0(1)", "MULTI:GPU.0,GPU.1,CPU"])
def test_a_callback_may_run_a_synchronous_inference_on_the_same_model(devices: str) -> None:
    """With ``GPU.0(1)`` the nested request needs the only worker, free once the outer run ended."""
    import threading

    _, _, core = three_devices()
    compiled = multi(core, devices)
    count = 20
    outer: dict[int, Any] = {}
    nested: dict[int, Any] = {}
    lock = threading.Lock()
    all_done = threading.Event()
    requests = [compiled.create_infer_request() for _ in range(count)]

    def done(index: int) -> None:
        result = np.array(infer(compiled, 1000 + index).results["y"])
        with lock:
            assert index not in outer, f"request {index} ended twice"
            outer[index], nested[index] = np.array(requests[index].results["y"]), result
            if len(outer) == count:
                all_done.set()

    try:
        for index, request in enumerate(requests):
            request.set_callback(done, index)
            request.start_async({"x": input_for(index)})
        assert all_done.wait(20), f"{count - len(outer)} callbacks never got their nested result"
        for index in range(count):
            np.testing.assert_allclose(outer[index], expected(input_for(index)), rtol=1e-6)
            np.testing.assert_allclose(nested[index], expected(input_for(1000 + index)), rtol=1e-6)
    finally:
        compiled.release()


def test_sync_run_names_the_device_and_returns_the_result() -> None:
    _, _, core = three_devices()
    compiled = multi(core, "MULTI:GPU.1,CPU")
    request = infer(compiled, 3)
    np.testing.assert_allclose(request.results["y"], expected(input_for(3)), rtol=1e-6)
    assert request.device == "GPU.1"
    compiled.release()


def test_optimal_number_is_the_sum_of_the_real_pools() -> None:
    _, _, core = three_devices()
    compiled = multi(core, "MULTI:GPU.0(3),GPU.1,CPU(5)")
    assert compiled.get_property("OPTIMAL_NUMBER_OF_INFER_REQUESTS") == 3 + 2 + 5
    assert compiled.get_property("EXECUTION_DEVICES") == ["GPU.0", "GPU.1", "CPU"]
    assert compiled.get_property("MULTI_DEVICE_PRIORITIES") == "GPU.0,GPU.1,CPU"
    compiled.release()


def test_device_properties_reach_each_member() -> None:
    _, _, core = three_devices()
    config = {"DEVICE_PROPERTIES": {"GPU": {"NUM_STREAMS": 3}, "GPU.1": {"NUM_STREAMS": 4}}}
    compiled = multi(core, "MULTI:GPU.0,GPU.1", config)
    assert compiled.get_property("OPTIMAL_NUMBER_OF_INFER_REQUESTS") == 3 + 4
    compiled.release()


def test_device_list_from_multi_device_priorities() -> None:
    _, _, core = three_devices()
    compiled = multi(core, "MULTI", {"MULTI_DEVICE_PRIORITIES": "CPU,GPU"})
    assert compiled.get_property("EXECUTION_DEVICES") == ["CPU", "GPU.0"]
    compiled.release()
    compiled = multi(core, "MULTI", {"MULTI_DEVICE_PRIORITIES": "GPU.1(3),CPU"})
    assert compiled.get_property("OPTIMAL_NUMBER_OF_INFER_REQUESTS") == 3 + 1
    compiled.release()
    with pytest.raises(DeviceNameError, match="MULTI_DEVICE_PRIORITIES"):
        multi(core, "MULTI")
    with pytest.raises(DeviceNameError, match="more than once"):
        multi(core, "MULTI:GPU,GPU.0")


def test_a_device_that_fails_to_compile_is_dropped_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    gpu, _, core = three_devices()
    gpu.faults["GPU.1"] = Faults(compile_error="out of memory")
    with caplog.at_level(logging.WARNING, "inferplex"):
        compiled = multi(core, "MULTI:GPU.0,GPU.1,CPU")
    assert compiled.get_property("EXECUTION_DEVICES") == ["GPU.0", "CPU"]
    assert "GPU.1" in caplog.text and "out of memory" in caplog.text
    submit_many(compiled, 50).wait(10)
    compiled.release()


def test_when_every_device_fails_to_compile_one_error_lists_each() -> None:
    gpu, host, core = three_devices()
    gpu.faults["GPU.0"] = Faults(compile_error="no kernel for Gemm")
    host.faults["CPU"] = Faults(compile_error="bad alloc")
    with pytest.raises(CompileError) as error:
        multi(core, "MULTI:GPU.0,CPU")
    assert re.search(r"GPU\.0: .*RuntimeError: no kernel for Gemm", str(error.value))
    assert re.search(r"CPU: .*RuntimeError: bad alloc", str(error.value))


def test_flaky_device_is_quarantined_then_returns_and_nothing_is_lost() -> None:
    flaky = FaultyPlugin("FLAKY", ("FLAKY",), {"FLAKY": Faults(fail_every=7, workers=2)})
    _, _, core = three_devices(delay=0.002)
    core.register_plugin(flaky)
    compiled = multi(core, "MULTI:FLAKY,CPU", {"MULTI_QUARANTINE_TIME": 0.05,
                                                    "SCHEDULE_POLICY": "DEVICE_PRIORITY"})
    collector = submit_many(compiled, 300, pause=0.001)
    collector.wait(30)
    per_device = collector.check_results()
    stats = compiled.get_property("DEVICE_STATISTICS")["FLAKY"]
    assert stats["failures"] >= 1 and stats["quarantines"] >= 1
    assert stats["returns"] >= 1 and per_device["FLAKY"] > 6  # served again after its return
    assert per_device["FLAKY"] + per_device["CPU"] == 300
    compiled.release()


def test_hanging_device_times_out_and_the_request_runs_elsewhere() -> None:
    slow = FaultyPlugin("SLOW", ("SLOW",), {"SLOW": Faults(hang_on={3}, hang_seconds=20, workers=2)})
    _, _, core = three_devices()
    core.register_plugin(slow)
    compiled = multi(core, "MULTI:SLOW,CPU", {"MULTI_REQUEST_TIMEOUT": "300ms",
                                                   "SCHEDULE_POLICY": "DEVICE_PRIORITY"})
    started = time.monotonic()
    collector = submit_many(compiled, 60, pause=0.002)
    collector.wait(10)
    assert time.monotonic() - started < 5  # did not wait for the hang
    collector.check_results()
    assert compiled.get_property("DEVICE_STATISTICS")["SLOW"]["timeouts"] == 1
    slow.release.set()  # the hung run now returns a late result, which must be dropped
    time.sleep(0.2)
    assert not collector.duplicates and len(collector.outcomes) == 60
    compiled.release()


def test_a_request_that_fails_everywhere_names_each_failure() -> None:
    gpu, host, core = three_devices()
    gpu.faults["GPU.0"] = Faults(fail_always=True)
    host.faults["CPU"] = Faults(fail_always=True)
    compiled = multi(core, "MULTI:GPU.0,CPU", {"MULTI_QUARANTINE_TIME": 10})
    with pytest.raises(InferenceError) as error:
        infer(compiled, 0)
    assert "GPU.0: RuntimeError" in str(error.value) and "CPU: RuntimeError" in str(error.value)
    # the request was at fault, not the devices: no device stays quarantined
    assert compiled.get_property("EXECUTION_DEVICES") == ["GPU.0", "CPU"]
    compiled.release()


def test_without_runtime_fallback_a_failure_ends_the_request() -> None:
    gpu, _, core = three_devices()
    gpu.faults["GPU.0"] = Faults(fail_always=True)
    compiled = multi(core, "MULTI:GPU.0,CPU", {"ENABLE_RUNTIME_FALLBACK": False,
                                                    "SCHEDULE_POLICY": "DEVICE_PRIORITY"})
    with pytest.raises(InferenceError, match=r"GPU\.0: RuntimeError: GPU\.0: injected failure"):
        infer(compiled, 0)
    assert compiled.get_property("EXECUTION_DEVICES") == ["GPU.0", "CPU"]
    compiled.release()


def test_priorities_reorder_exclude_and_restore_under_load() -> None:
    plugin = FaultyPlugin("TEST", ("TEST.0", "TEST.1", "TEST.2"),
                          {f"TEST.{i}": Faults(delay=0.002, workers=1) for i in range(3)})
    core = make_core(plugin)
    compiled = multi(core, "MULTI:TEST.0,TEST.1,TEST.2", {"SCHEDULE_POLICY": "ROUND_ROBIN"})
    collector = Collector(600)
    submit_many(compiled, 200, 0, collector)
    compiled.set_property({"MULTI_DEVICE_PRIORITIES": "TEST.2,TEST.0"})  # exclude TEST.1
    assert compiled.get_property("EXECUTION_DEVICES") == ["TEST.2", "TEST.0"]
    time.sleep(0.05)  # let the request running on TEST.1 finish
    excluded_runs = plugin.runs("TEST.1")
    submit_many(compiled, 200, 200, collector)
    time.sleep(0.2)
    assert plugin.runs("TEST.1") == excluded_runs
    compiled.set_property({"MULTI_DEVICE_PRIORITIES": "TEST.1,TEST.2,TEST.0"})  # restore
    submit_many(compiled, 200, 400, collector)
    collector.wait(30)
    collector.check_results()
    assert plugin.runs("TEST.1") > excluded_runs
    assert compiled.get_property("MULTI_DEVICE_PRIORITIES") == "TEST.1,TEST.2,TEST.0"
    compiled.release()


def test_adding_a_device_that_was_not_compiled_is_refused() -> None:
    _, _, core = three_devices()
    compiled = multi(core, "MULTI:GPU.0,CPU")
    with pytest.raises(PropertyError, match=r"GPU\.1 was not in the original device list"):
        compiled.set_property({"MULTI_DEVICE_PRIORITIES": "GPU.1,GPU.0,CPU"})
    with pytest.raises(PropertyError, match="NPU was not in the original device list"):
        compiled.set_property({"MULTI_DEVICE_PRIORITIES": "NPU"})
    with pytest.raises(PropertyError, match="cannot be changed"):
        compiled.set_property({"NUM_STREAMS": 2})
    compiled.set_property({"MULTI_DEVICE_PRIORITIES": "CPU,GPU"})  # GPU is GPU.0
    assert compiled.get_property("EXECUTION_DEVICES") == ["CPU", "GPU.0"]
    compiled.release()


def test_exclusive_async_requests_run_one_at_a_time() -> None:
    gpu, _, core = three_devices(delay=0.001)
    compiled = multi(core, "MULTI:GPU.0,GPU.1", {"EXCLUSIVE_ASYNC_REQUESTS": True})
    assert compiled.get_property("OPTIMAL_NUMBER_OF_INFER_REQUESTS") == 1
    submit_many(compiled, 100).wait(20)
    assert gpu.max_active == 1
    compiled.release()


def test_close_ends_every_pending_request_once() -> None:
    _, _, core = three_devices(delay=0.05)  # 50 runs of 50 ms: most are still queued at release()
    compiled = multi(core, "MULTI:CPU")
    collector = submit_many(compiled, 50)
    compiled.release()
    collector.wait(10)
    failed = collector.errors()
    assert failed and all("closed" in str(error) for error in failed)
    assert all(isinstance(error, InferenceError) for error in failed)
    for index, outcome in collector.outcomes.items():  # those already running end with their results
        if outcome.error is None:
            np.testing.assert_allclose(outcome.y, expected(input_for(index)), rtol=1e-5)
    with pytest.raises(InferenceError, match=r"closed|released"):
        infer(compiled, 0)


def test_targets_keep_their_request_counts() -> None:
    _, _, core = three_devices()
    compiled = multi(core, "MULTI:CPU(3)")
    assert compiled.get_property("OPTIMAL_NUMBER_OF_INFER_REQUESTS") == 3
    compiled.release()


_HANGING_MEMBER = """
import sys, time
import numpy as np
import inferplex as ov
from multi_plugins import Faults, FaultyPlugin, expected, input_for, linear_model, make_core

slow = FaultyPlugin("SLOW", ("SLOW",), {"SLOW": Faults(hang_on={1}, hang_seconds=600, workers=1)})
cpu = FaultyPlugin("CPU", ("CPU",), {"CPU": Faults(workers=2)}, device_type="host")
compiled = make_core(cpu, slow).compile_model(linear_model(), "MULTI:SLOW,CPU", {
    "MULTI_REQUEST_TIMEOUT": "200ms", "SCHEDULE_POLICY": "DEVICE_PRIORITY"})
ended = {}
queue = ov.AsyncInferQueue(compiled, 4)

def record(request, index):
    ended[index] = (np.array(request.results["y"]), request.device)

queue.set_callback(record)
for index in range(12):
    queue.start_async({"x": input_for(index)}, index)
if sys.argv[1] == "wait":
    queue.wait_all()
    right = all(np.allclose(y, expected(input_for(i))) for i, (y, _) in ended.items())
    print("ended", len(ended), "right", right, "first on", ended[0][1], flush=True)
else:
    print("exiting", flush=True)
"""


@pytest.mark.parametrize("wait", ["wait", "exit"])
def test_a_hanging_member_times_out_and_the_process_still_exits_promptly(wait: str) -> None:
    """SLOW's first run hangs for 10 minutes: the request re-runs on the CPU, and at exit (after
    waiting for the requests, or with them in flight) the hung run does not hold the process."""
    started = time.monotonic()
    done = run_program(_HANGING_MEMBER, wait, timeout=60)
    assert done.returncode == 0, f"exit code {done.returncode}: {done.stderr[-2000:]}"
    if wait == "wait":
        assert done.stdout.split() == ["ended", "12", "right", "True", "first", "on", "CPU"], done.stdout
    else:
        assert done.stdout.split() == ["exiting"], done.stdout
    assert time.monotonic() - started < 30
