"""Scheduling policies, with plain numbers and no devices."""

from __future__ import annotations

import pytest

from inferplex.errors import PropertyError
from inferplex.scheduling.policies import DeviceLoad, DevicePriority, EarliestFinish, RoundRobin, make_policy


def load(name: str, workers: int, busy: int, latency: float | None = None,
         remaining: tuple[float, ...] | None = None) -> DeviceLoad:
    if remaining is None:
        remaining = tuple([latency / 2 if latency else 0.0] * busy)
    return DeviceLoad(name, workers, busy, latency, remaining)


def test_device_priority_takes_first_idle_in_priority_order() -> None:
    policy = DevicePriority()
    assert policy.choose([load("GPU", 2, 1), load("CPU", 1, 0)], 1, 0.0) == "GPU"
    assert policy.choose([load("GPU", 2, 2), load("CPU", 1, 0)], 1, 0.0) == "CPU"
    assert policy.choose([load("GPU", 2, 2), load("CPU", 1, 1)], 1, 0.0) is None


def test_round_robin_cycles_over_idle_devices() -> None:
    policy = RoundRobin()
    loads = [load("A", 1, 0), load("B", 1, 0), load("C", 1, 0)]
    assert [policy.choose(loads, 1, 0.0) for _ in range(4)] == ["A", "B", "C", "A"]
    assert policy.choose([load("A", 1, 0), load("B", 1, 1), load("C", 1, 0)], 1, 0.0) == "C"


def test_earliest_finish_measures_unknown_devices_first() -> None:
    loads = [load("GPU", 2, 0, 0.001), load("CPU", 1, 0, None)]
    assert EarliestFinish().choose(loads, 1, 0.0) == "CPU"


def test_earliest_finish_prefers_the_faster_idle_device_whatever_the_priority() -> None:
    loads = [load("CPU", 1, 0, 0.020), load("GPU", 4, 1, 0.002)]
    assert EarliestFinish().choose(loads, 1, 0.0) == "GPU"


def test_earliest_finish_keeps_a_light_load_off_a_slow_device() -> None:
    # GPU busy but frees in 1 ms; CPU would take 20 ms: wait for the GPU.
    loads = [load("GPU", 4, 4, 0.002, (0.001,) * 4), load("CPU", 1, 0, 0.020)]
    assert EarliestFinish().choose(loads, 1, 0.0) is None
    assert EarliestFinish().choose(loads, 2, 100.0) is None


def test_earliest_finish_uses_the_slow_device_under_sustained_load() -> None:
    # 4 GPU workers finish 4 * floor((20 - 1) / 2) = 36 requests in the CPU's 20 ms;
    # 3000 requests/s arrive, 60 in that time: the CPU is needed.
    loads = [load("GPU", 4, 4, 0.002, (0.001,) * 4), load("CPU", 1, 0, 0.020)]
    assert EarliestFinish().choose(loads, 1, 3000.0) == "CPU"


def test_earliest_finish_uses_the_slow_device_for_a_deep_queue_but_not_for_the_tail() -> None:
    loads = [load("GPU", 4, 4, 0.002, (0.001,) * 4), load("CPU", 1, 0, 0.020)]
    assert EarliestFinish().choose(loads, 100, 0.0) == "CPU"
    assert EarliestFinish().choose(loads, 5, 0.0) is None


def test_earliest_finish_routes_around_a_hanging_device() -> None:
    # One GPU worker has overrun its 2 ms by 5 s: it is not about to finish.
    loads = [load("GPU", 1, 1, 0.002, (5.0,)), load("CPU", 1, 0, 0.020)]
    assert EarliestFinish().choose(loads, 1, 0.0) == "CPU"


def test_earliest_finish_with_no_idle_worker_waits() -> None:
    assert EarliestFinish().choose([load("GPU", 1, 1, 0.002)], 3, 0.0) is None


def test_make_policy_names_the_accepted_values() -> None:
    assert isinstance(make_policy("round_robin"), RoundRobin)
    with pytest.raises(PropertyError, match="DEVICE_PRIORITY, ROUND_ROBIN, EARLIEST_FINISH"):
        make_policy("FASTEST")
