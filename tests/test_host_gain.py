"""MULTI_CHECK_HOST_GAIN: a host device that costs the accelerators more than it adds is held back.

The check alone with plain numbers, then the MULTI scheduler with test devices
whose host slows the accelerator down (or does not) while it runs.
"""

from __future__ import annotations

import itertools
import threading
import time
from types import SimpleNamespace

import pytest

from inferplex.scheduling import host_gain
from inferplex.scheduling.host_gain import HostGainCheck, HostGainTiming

from multi_plugins import (
    Collector,
    Contention,
    Faults,
    FaultyPlugin,
    linear_model,
    make_core,
    submit_when_free,
)

pytestmark = pytest.mark.timeout(60)

HOSTS, OTHERS = ["CPU"], ["GPU.0"]


def drive(check: HostGainCheck, start: float, seconds: float, gpu_rate: tuple[float, float],
          host_rate: float, in_model: int = 10, host_busy: int = 0) -> float:
    """Feed ``check`` completions; the end time.

    ``gpu_rate``: the accelerator's requests/s with the host serving and without it;
    ``host_rate``: the host's, while it serves.
    """
    now, step = start, 0.001
    gpu_due = host_due = 0.0
    while now < start + seconds:
        gpu_due += gpu_rate[1 if check.held else 0] * step
        host_due += 0.0 if check.held else host_rate * step
        while gpu_due >= 1:
            gpu_due -= 1
            check.finished(host=False)
        while host_due >= 1:
            host_due -= 1
            check.finished(host=True)
        check.observe(now, HOSTS, OTHERS, host_busy=host_busy, in_model=in_model, other_workers=2)
        now += step
    return now


def test_a_host_that_slows_the_accelerator_more_than_it_adds_is_held_back() -> None:
    check = HostGainCheck()
    # With the host: GPU 700/s + host 60/s; without it the GPU serves 1000/s.
    now = drive(check, 0.0, host_gain.WINDOW * 1.05, gpu_rate=(700, 1000), host_rate=60)
    assert check.held and check.checks == 0  # measuring without it now
    drive(check, now, host_gain.WINDOW * 1.05, gpu_rate=(700, 1000), host_rate=60)
    assert check.held and check.checks == 1
    with_host, without = check.last_rates  # type: ignore[misc]
    assert with_host == pytest.approx(760, rel=0.05) and without == pytest.approx(1000, rel=0.05)


def test_a_host_that_adds_more_than_it_costs_keeps_serving() -> None:
    check = HostGainCheck()
    now = drive(check, 0.0, host_gain.WINDOW * 1.05, gpu_rate=(950, 1000), host_rate=200)
    drive(check, now, host_gain.WINDOW * 1.05, gpu_rate=(950, 1000), host_rate=200)
    assert check.checks == 1 and not check.held


def test_a_held_back_host_is_checked_again_when_the_accelerators_rate_strays() -> None:
    # check_budget 1: the shortest wait, whatever the check costs
    check = HostGainCheck(timing=HostGainTiming(interval=2.0, watch=0.5, check_budget=1.0))
    now = drive(check, 0.0, 2 * host_gain.WINDOW + 0.1, gpu_rate=(700, 1000), host_rate=60)
    assert check.held and check.checks == 1
    # Something else now takes the GPU: alone it serves 800/s, not the 1000/s decided on.
    now = drive(check, now, 2.0, gpu_rate=(700, 800), host_rate=60)
    assert not check.held  # the decision's wait is over: the host serves again before a new check
    # Now the host no longer slows the GPU: after the ramp and a new check it keeps serving.
    drive(check, now, host_gain.RAMP + 2 * host_gain.WINDOW + 0.2, gpu_rate=(800, 800), host_rate=60)
    assert check.checks == 2 and not check.held


def test_a_held_back_host_waits_the_longest_interval_while_nothing_changes() -> None:
    timing = HostGainTiming(interval=1.0, longest_interval=5.0, watch=0.5, check_budget=1.0)
    steady, idle = HostGainCheck(timing=timing), HostGainCheck(timing=timing)
    decided = 0.0
    while steady.checks == 0:  # up to the decision, no further: the watch starts there
        drive(idle, decided, 0.01, gpu_rate=(700, 1000), host_rate=60)
        decided = drive(steady, decided, 0.01, gpu_rate=(700, 1000), host_rate=60)
    assert steady.held and steady.checks == 1 and steady.interval == 1.0
    # The GPU serves as it did when measured (within DRIFT); or at another rate, but not under
    # full load (fewer requests than its workers: not comparable).  No new check yet.
    now = drive(steady, decided, 3.0, gpu_rate=(700, 1000 * (1 - host_gain.DRIFT / 2)), host_rate=60)
    drive(idle, decided, 3.0, gpu_rate=(700, 300), host_rate=60, in_model=1)
    for check in (steady, idle):
        assert check.held and check.checks == 1 and check.phase == "decided"
    now = drive(steady, now, decided + timing.longest_interval + 0.01 - now, gpu_rate=(700, 1000),
                host_rate=60)
    assert not steady.held and steady.phase == "host serving again before a new check"


def test_the_same_answer_doubles_the_wait_for_the_next_check() -> None:
    # check_budget 1: checks cost nothing here, the doubling alone
    check = HostGainCheck(timing=HostGainTiming(interval=1.0, longest_interval=4.0, check_budget=1.0))
    now, decided, waits = 0.0, [], []
    while check.checks < 5:  # the host keeps adding more than it costs
        checks = check.checks
        now = drive(check, now, 0.05, gpu_rate=(1000, 1000), host_rate=60)
        if check.checks > checks:
            decided.append(now)
            waits.append(check.interval)
    assert not check.held and waits == [1.0, 2.0, 4.0, 4.0, 4.0]
    # Each check started once the previous decision's wait was over, not sooner.
    gaps = [later - earlier for earlier, later in itertools.pairwise(decided)]
    assert all(gap >= wait for gap, wait in zip(gaps, waits, strict=False))
    assert all(gap < wait + 2 for gap, wait in zip(gaps, waits, strict=False))
    # The host starts slowing the GPU: the next check changes the answer and the wait starts over.
    while check.checks < 6:
        now = drive(check, now, 0.05, gpu_rate=(700, 1000), host_rate=60)
    assert check.held and check.interval == 1.0


def test_a_costly_check_waits_long_enough_to_keep_within_its_budget() -> None:
    check = HostGainCheck()
    # With the host the devices serve 760/s, without it 1000/s: a check loses 24% for about a second.
    drive(check, 0.0, 2 * host_gain.WINDOW + 0.1, gpu_rate=(700, 1000), host_rate=60)
    assert check.held and check.checks == 1
    lost = (host_gain.RAMP + host_gain.WINDOW) * (1 - 760 / 1000)
    assert check.interval == pytest.approx(lost / host_gain.CHECK_BUDGET, rel=0.1)
    assert check.interval > host_gain.INTERVAL
    cheap = HostGainCheck()  # the host costs the GPU little: the shortest wait
    drive(cheap, 0.0, 2 * host_gain.WINDOW + 0.1, gpu_rate=(998, 1000), host_rate=0)
    assert cheap.checks == 1 and cheap.interval == host_gain.INTERVAL


def test_no_check_before_warm_up_without_full_load_or_without_both_kinds() -> None:
    cold = HostGainCheck()
    for step in range(3000):
        cold.observe(step / 1000, HOSTS, OTHERS, host_busy=0, in_model=10, other_workers=2, warm=False)
    assert cold.phase == "wait for full load" and not cold.held
    check = HostGainCheck()
    drive(check, 0.0, 3.0, gpu_rate=(700, 1000), host_rate=60, in_model=1)  # fewer requests than GPU workers
    assert check.checks == 0 and not check.held
    held = HostGainCheck()
    drive(held, 0.0, 2 * host_gain.WINDOW + 0.1, gpu_rate=(700, 1000), host_rate=60)
    assert held.held
    held.observe(10.0, HOSTS, [], host_busy=0, in_model=10, other_workers=0)  # the GPU left: host serves
    assert not held.held
    off = HostGainCheck(enabled=False)
    drive(off, 0.0, 3.0, gpu_rate=(700, 1000), host_rate=60)
    assert off.checks == 0 and not off.held


# --- in the MULTI scheduler --------------------------------------------------------------


def run_closed_loop(config: dict[str, object], host_slows_gpu: bool, wait: float = 8.0,  # noqa: ANN201
                    gpu_warmup: float = 0.0):
    """A closed loop over MULTI:GPU.0,CPU: until the check decides (at most ``wait`` s), then 1 s more.

    Returns the requests per device at the decision and at the end, the devices' states at the
    decision, and the check as DEVICE_STATISTICS reports it on the host (``checks``, ``rates``).
    The GPU serves 2 / 10 ms = 200 requests/s alone.  The host adds 2 / 50 ms = 40, and when it
    slows the GPU (35 ms more per GPU run while it runs), the GPU falls to about 2 / 45 ms = 44.
    (Runs of milliseconds, not less: a busy test machine's scheduling noise stays small beside them.)
    """
    contention = Contention()
    gpu = FaultyPlugin("GPU", ("GPU.0",), {"GPU.0": Faults(
        workers=2, delay=0.01, slowed_by=contention, slowdown=0.035 if host_slows_gpu else 0.0,
        first_run_delay=gpu_warmup)},
        device_type="discrete")
    host = FaultyPlugin("CPU", ("CPU",), {"CPU": Faults(workers=2, delay=0.05, contends=contention)},
                        device_type="host")
    compiled = make_core(host, gpu).compile_model(linear_model(), "MULTI:GPU.0,CPU", config)
    in_flight = compiled.get_property("OPTIMAL_NUMBER_OF_INFER_REQUESTS")
    slots = threading.Semaphore(in_flight)
    collector = Collector(0)
    index = 0

    def requests() -> dict[str, int]:
        return {name: s["requests"] for name, s in compiled.get_property("DEVICE_STATISTICS").items()}

    def check() -> dict[str, object]:
        return compiled.get_property("DEVICE_STATISTICS")["CPU"]["host_gain"]

    try:
        for phase_seconds, until_decided in ((wait, True), (1.0, False)):
            start = time.monotonic()
            while time.monotonic() - start < phase_seconds:
                submit_when_free(compiled, collector, index, slots)
                index += 1
                if until_decided and check()["checks"]:
                    break
            if until_decided:
                at_decision, states = requests(), compiled.get_property("DEVICE_STATISTICS")
        collector.expected_count = index
        for _ in range(in_flight):
            slots.acquire()
        collector.wait(10)
        per_device = collector.check_results()
        assert per_device == requests()
        decided = check()
        return (at_decision, per_device, {name: s["state"] for name, s in states.items()},
                SimpleNamespace(checks=decided["checks"], last_rates=decided["rates"]))
    finally:
        compiled.release()


def test_multi_holds_back_a_host_that_slows_the_accelerator() -> None:
    at_decision, at_end, states, check = run_closed_loop({}, host_slows_gpu=True)
    assert check.checks == 1 and states["CPU"] == "held back", (states, check.last_rates)
    with_host, without = check.last_rates
    assert without > with_host
    # After the decision the host took nothing new (at most the runs it was finishing).
    assert at_end["CPU"] - at_decision["CPU"] <= 2, (at_decision, at_end)
    assert at_end["GPU.0"] - at_decision["GPU.0"] > 80


def test_multi_keeps_a_host_that_does_not_slow_the_accelerator() -> None:
    at_decision, at_end, states, check = run_closed_loop({}, host_slows_gpu=False)
    assert check.checks == 1 and states["CPU"] == "serving", (states, check.last_rates)
    assert at_end["CPU"] - at_decision["CPU"] >= 10, (at_decision, at_end)  # still serving


def test_the_check_waits_until_the_accelerator_is_warm() -> None:
    """Measured during the GPU's slow first runs, "with the host" would look slower than the
    GPU alone once warm, and a host that costs nothing would be held back."""
    _, _, states, check = run_closed_loop({}, host_slows_gpu=False, gpu_warmup=0.6)
    assert check.checks == 1 and states["CPU"] == "serving", (states, check.last_rates)
    with_host, without = check.last_rates
    assert with_host > without > 120  # the GPU was at full speed in both windows


def test_the_check_can_be_turned_off() -> None:
    at_decision, at_end, states, check = run_closed_loop({"MULTI_CHECK_HOST_GAIN": False},
                                                         host_slows_gpu=True, wait=1.5)
    assert check.checks == 0 and states["CPU"] == "serving"
    assert at_end["CPU"] - at_decision["CPU"] >= 10, (at_decision, at_end)


def test_a_host_whose_requests_never_end_is_not_held_back_for_ever() -> None:
    check = HostGainCheck()
    now = drive(check, 0.0, host_gain.WINDOW * 1.05, gpu_rate=(700, 1000), host_rate=60, host_busy=1)
    assert check.held and check.phase == "host finishing its requests"
    check.observe(now + host_gain.DRAIN_LIMIT + 0.1, HOSTS, OTHERS, host_busy=1, in_model=10, other_workers=2)
    assert not check.held and check.checks == 0


def test_the_setting_is_validated_and_readable(core) -> None:  # noqa: ANN001
    import inferplex as ov

    model = core.read_model(linear_model())
    compiled = core.compile_model(model, "MULTI:CPU", {"MULTI_CHECK_HOST_GAIN": "NO"})
    assert compiled.get_property("MULTI_CHECK_HOST_GAIN") is False
    with pytest.raises(ov.errors.PropertyError, match="MULTI_CHECK_HOST_GAIN"):
        core.compile_model(model, "MULTI:CPU", {"MULTI_CHECK_HOST_GAIN": "sometimes"})
