"""inferplex's OpenVINO API beside openvino itself: typed property values, pairs, packed tensors.

Each test asks the installed openvino for its answer and checks that inferplex
gives the same one (skipped where openvino is not installed).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import inferplex as ov
from inferplex.properties import device, hint, intel_auto, log, streams

real = pytest.importorskip("openvino")
real_props = pytest.importorskip("openvino.properties")

# --- property enums ---------------------------------------------------------------------------

ENUMS = [
    (ov.properties.CacheMode, "CacheMode"),
    (ov.properties.WorkloadType, "WorkloadType"),
    (hint.Priority, "hint.Priority"),
    (hint.PerformanceMode, "hint.PerformanceMode"),
    (hint.SchedulingCoreType, "hint.SchedulingCoreType"),
    (hint.ModelDistributionPolicy, "hint.ModelDistributionPolicy"),
    (hint.ExecutionMode, "hint.ExecutionMode"),
    (device.Type, "device.Type"),
    (log.Level, "log.Level"),
    (intel_auto.SchedulePolicy, "intel_auto.SchedulePolicy"),
]


def _theirs(path: str) -> Any:
    value: Any = real_props
    for part in path.split("."):
        value = getattr(value, part)
    return value


@pytest.mark.parametrize("ours, path", ENUMS, ids=[p for _, p in ENUMS])
def test_enum_members_print_number_and_order_as_openvinos(ours: Any, path: str) -> None:
    theirs = _theirs(path)
    for name, member in theirs.__members__.items():
        mine = getattr(ours, name)
        assert (str(mine), repr(mine), int(mine), mine.value, mine.name) == \
            (str(member), repr(member), int(member), member.value, member.name)
        assert f"{mine}" == f"{member}" and ours(int(member)) is mine
    members = list(theirs.__members__)
    for first, second in zip(members, members[1:], strict=False):
        expected = theirs.__members__[first] < theirs.__members__[second]
        assert (getattr(ours, first) < getattr(ours, second)) == expected


def test_enum_members_equal_their_member_and_stored_string_but_no_number() -> None:
    latency = hint.PerformanceMode.LATENCY
    assert latency == hint.PerformanceMode(1) and latency != hint.PerformanceMode.THROUGHPUT
    assert latency != 1 and real_props.hint.PerformanceMode.LATENCY != 1  # neither equals its number
    assert latency == "LATENCY" and log.Level.NO == "LOG_NONE"  # inferplex: the stored string too
    assert {latency: "a", hint.PerformanceMode.THROUGHPUT: "b"}[hint.PerformanceMode(1)] == "a"


def test_enum_values_set_and_read_back_through_a_core() -> None:
    core = ov.Core()
    core.set_property("CPU", {hint.performance_mode: hint.PerformanceMode.THROUGHPUT,
                              log.level: log.Level.WARNING})
    try:
        mode = core.get_property("CPU", hint.performance_mode)
        assert mode is hint.PerformanceMode.THROUGHPUT and str(mode) == "PerformanceMode.THROUGHPUT"
        assert int(core.get_property("CPU", log.level)) == int(real_props.log.Level.WARNING)
    finally:
        core.set_property("CPU", {log.level: log.Level.NO})


# --- pairs: what a typed key takes ----------------------------------------------------------------

PAIRS = [
    ("enable_profiling", 1), ("enable_profiling", 0), ("inference_num_threads", -8),
    ("hint.enable_cpu_pinning", 1), ("intel_auto.enable_startup_fallback", 0),
    ("intel_auto.enable_runtime_fallback", 1), ("device.id", "0"), ("device.priorities", "CPU,GPU"),
]


@pytest.mark.parametrize("path, value", PAIRS, ids=[f"{p}={v!r}" for p, v in PAIRS])
def test_pairs_hold_what_openvinos_hold(path: str, value: Any) -> None:
    mine: Any = ov.properties
    for part in path.split("."):
        mine = getattr(mine, part)
    theirs = _theirs(path)(value)
    key, held = mine(value)
    assert key == theirs[0] and held.value == theirs[1].value and type(held.value) is type(theirs[1].value)


def test_streams_pair_holds_the_integer_and_priorities_take_several_names() -> None:
    for num in (streams.Num.AUTO, streams.Num(3)):
        theirs = real_props.streams.num(getattr(real_props.streams.Num, num.name, None)
                                        or real_props.streams.Num(num.to_integer()))
        assert streams.num(num)[1].value == theirs[1].value
    assert device.priorities("CPU", "GPU")[1].value == real_props.device.priorities("CPU", "GPU")[1].value


@pytest.mark.parametrize("make", [lambda p: p.cache_dir(6), lambda p: p.device.priorities("CPU", 6),
                                  lambda p: p.inference_num_threads("8")])
def test_a_value_of_the_wrong_type_is_a_type_error_as_in_openvino(make: Any) -> None:
    with pytest.raises(TypeError):
        make(real_props)
    with pytest.raises(TypeError) as info:
        make(ov.properties)
    assert isinstance(info.value, ov.errors.PropertyError)


def test_a_pair_of_the_right_type_is_refused_where_it_is_set() -> None:
    pair = ov.properties.inference_num_threads(-8)  # made, as OpenVINO makes it
    with pytest.raises(ov.errors.PropertyError, match=r"INFERENCE_NUM_THREADS.*-8.*integer >= 0"):
        ov.Core().set_property("CPU", pair)


def test_a_trailing_comma_of_openvinos_device_list_is_taken() -> None:
    core = ov.Core()
    core.set_property("MULTI", device.priorities("CPU"))
    assert core.get_property("MULTI", device.priorities) == "CPU"


def test_core_wide_options_are_set_with_device_keys() -> None:
    core = ov.Core()
    core.set_property({"ENABLE_MMAP": False, hint.performance_mode: hint.PerformanceMode.LATENCY})
    theirs = real.Core()
    theirs.set_property({"ENABLE_MMAP": False})
    assert core.get_property("ENABLE_MMAP") is theirs.get_property("ENABLE_MMAP") is False
    assert core.get_property("CPU", hint.performance_mode) is hint.PerformanceMode.LATENCY
    with pytest.raises(ov.errors.PropertyError, match="ENABLE_MMAP"):
        core.set_property({"ENABLE_MMAP": "sometimes"})
