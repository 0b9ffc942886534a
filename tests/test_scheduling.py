"""The pure scheduling pieces besides policies and host gain: quarantine and latency, with numbers."""

from __future__ import annotations

import pytest

from inferplex.scheduling.latency import PROBE_AFTER, LatencyEstimate, expected_left
from inferplex.scheduling.options import SchedulerOptions
from inferplex.scheduling.quarantine import MAX_DOUBLINGS, Quarantine


def test_a_quarantine_doubles_while_the_device_keeps_failing_and_resets_after_a_success() -> None:
    quarantine = Quarantine()
    lengths = []
    now = 0.0
    for _ in range(MAX_DOUBLINGS + 2):
        quarantine.start(now, 1.0)
        lengths.append(quarantine.until - now)
        now = quarantine.until
    assert lengths == [1.0, 2.0, 4.0, 8.0, 16.0, 16.0]
    quarantine.succeeded()
    quarantine.start(now, 1.0)
    assert quarantine.until - now == 1.0
    assert quarantine.quarantines == MAX_DOUBLINGS + 3


def test_a_quarantine_is_not_restarted_while_it_runs_and_returns_once() -> None:
    quarantine = Quarantine()
    first = quarantine.start(0.0, 1.0)
    assert quarantine.start(0.5, 1.0) == first and quarantine.until == 1.0
    assert quarantine.active(0.9) and not quarantine.check_return(0.9)
    assert quarantine.check_return(1.0) and not quarantine.check_return(1.1)
    assert quarantine.returns == 1


def test_lifting_ends_only_the_episode_named() -> None:
    quarantine = Quarantine()
    old = quarantine.start(0.0, 1.0)
    quarantine.check_return(2.0)
    quarantine.start(2.0, 1.0)  # a new episode, 2 s long
    quarantine.lift(2.5, old)
    assert quarantine.active(2.5)
    quarantine.lift(2.5, quarantine.episode)
    assert not quarantine.active(2.5) and quarantine.level == 1


def test_an_idle_devices_latency_goes_stale_and_is_measured_again() -> None:
    estimate = LatencyEstimate(workers=1)
    estimate.record(0.5, 0.0)  # warm-up, left out
    assert estimate.current(0.0, busy=0) is None
    estimate.record(0.01, 1.0)
    assert estimate.current(1.0 + PROBE_AFTER / 2, busy=0) == 0.01
    assert estimate.current(1.0 + 2 * PROBE_AFTER, busy=0) is None  # idle too long: probe it
    assert estimate.current(1.0 + 2 * PROBE_AFTER, busy=1) == 0.01


def test_a_run_past_its_latency_is_expected_to_go_on_as_long_as_it_overran() -> None:
    assert expected_left(0.010, 0.004) == pytest.approx(0.006)
    assert expected_left(0.010, 0.030) == pytest.approx(0.020)


def test_options_from_a_compile_config() -> None:
    options = SchedulerOptions.from_config({"MULTI_REQUEST_TIMEOUT": "250ms", "MULTI_QUARANTINE_TIME": 2,
                                            "SCHEDULE_POLICY": "round_robin"}, default_hint="LATENCY")
    assert options.request_timeout == pytest.approx(0.25) and options.quarantine_time == 2.0
    assert options.policy == "ROUND_ROBIN" and options.hint == "LATENCY"
    assert SchedulerOptions.from_config({}).request_timeout is None
