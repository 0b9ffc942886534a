"""HETERO_PLACEMENT=COST: the decision from given numbers, the key, and end to end on test devices
whose costs the test sets (per-op records, transfer records, slow runs), on emulated GPUs and on CUDA.

Either way the decision goes, the outputs equal ONNX Runtime's on the whole model.
"""

from __future__ import annotations

import datetime
import importlib.util
import math
from collections.abc import Collection, Mapping
from typing import Any

import numpy as np
import onnx_ir as ir
import pytest

import inferplex as ov
from inferplex.devices.base import DeviceProgram, ProfilingRecord
from inferplex.errors import CompileError, PropertyError
from inferplex.placement.cost import (
    DEFAULT_LINK,
    HOST_LINK,
    CandidateMeasure,
    Crossing,
    HostLink,
    Measurements,
    choose_placement,
    crossing_seconds,
    estimate,
    link_from_records,
    program_seconds,
)

from conftest import ort_run
from hetero_plugins import LimitedPlugin, LimitedProgram, contrib_model, named

COST = {"HETERO_PLACEMENT": "COST"}
GPU_PLUGIN = importlib.util.find_spec("torch") is not None


def _seconds(value: float) -> datetime.timedelta:
    return datetime.timedelta(seconds=value)


# --- the decision, from numbers alone ---------------------------------------------------------


def _split_and_whole(split_compute: tuple[float, float, float], whole_compute: float,
                     nbytes: int = 4096) -> tuple[CandidateMeasure, CandidateMeasure]:
    split = CandidateMeasure("split GPU.0,CPU,GPU.0",
                             (("GPU.0", split_compute[0]), ("CPU", split_compute[1]),
                              ("GPU.0", split_compute[2])),
                             (Crossing("h", "GPU.0", "CPU", nbytes), Crossing("g", "CPU", "GPU.0", nbytes),
                              Crossing("h", "GPU.0", "GPU.0", nbytes)))
    return split, CandidateMeasure("whole on CPU", (("CPU", whole_compute),))


def _expected_total(measure: CandidateMeasure, links: Mapping[str, HostLink], overhead: float) -> float:
    """The documented formula, written out independently of ``estimate``."""
    total = sum(seconds for _, seconds in measure.programs) + overhead * (len(measure.programs) - 1)
    for crossing in measure.crossings:
        if crossing.source_device != crossing.target_device:
            for device in (crossing.source_device, crossing.target_device):
                link = links.get(device, DEFAULT_LINK)
                if not math.isinf(link.bandwidth):
                    total += link.latency + crossing.nbytes / link.bandwidth
    return total


@pytest.mark.parametrize("split_compute,whole_compute,winner", [
    ((1e-4, 2e-4, 1e-4), 5e-3, "split GPU.0,CPU,GPU.0"),   # the CPU is slow at the GPU's ops
    ((1e-4, 2e-4, 1e-4), 3e-4, "whole on CPU"),            # two crossings cost more than the GPU saves
])
def test_the_cheaper_candidate_is_chosen(split_compute: tuple[float, float, float],
                                         whole_compute: float, winner: str) -> None:
    links = {"GPU.0": HostLink(bandwidth=1e9, latency=5e-5), "CPU": HOST_LINK}
    measures = _split_and_whole(split_compute, whole_compute)
    decision = choose_placement(Measurements(measures, links), margin=0.0, program_overhead=1e-5)
    assert decision.chosen_candidate.label == winner
    for measure, cost in zip(measures, decision.candidates, strict=True):
        assert cost.total_seconds == pytest.approx(_expected_total(measure, links, 1e-5))
    assert min(decision.candidates, key=lambda c: c.total_seconds) is decision.chosen_candidate


def test_crossing_bytes_and_link_speed_decide_between_equal_computes() -> None:
    measures = _split_and_whole((1e-4, 1e-4, 1e-4), 3.5e-4, nbytes=1 << 20)
    fast = choose_placement(Measurements(measures, {"GPU.0": HostLink(1e12), "CPU": HOST_LINK}),
                            margin=0.0, program_overhead=0.0)
    slow = choose_placement(Measurements(measures, {"GPU.0": HostLink(1e9), "CPU": HOST_LINK}),
                            margin=0.0, program_overhead=0.0)
    assert fast.chosen_candidate.label.startswith("split")
    assert slow.chosen_candidate.label == "whole on CPU"
    assert slow.candidates[0].transfer_bytes == 2 << 20  # the GPU.0 -> GPU.0 value stays put


def test_a_near_tie_keeps_the_support_split() -> None:
    measures = _split_and_whole((1e-3, 1e-3, 1e-3), 0.0)
    split_cost = estimate(measures[0], {"CPU": HOST_LINK}, program_overhead=0.0).total_seconds
    whole = CandidateMeasure("whole on CPU", (("CPU", split_cost * 0.95),))
    within = choose_placement(Measurements((measures[0], whole), {"CPU": HOST_LINK}),
                              margin=0.1, program_overhead=0.0)
    beyond = choose_placement(Measurements((measures[0], whole), {"CPU": HOST_LINK}),
                              margin=0.01, program_overhead=0.0)
    assert within.chosen == 0 and "10%" in within.reason
    assert beyond.chosen == 1 and "faster than the support split" in beyond.reason


def test_equal_costs_keep_the_device_lists_order() -> None:
    split = CandidateMeasure("split A,B", (("A", 1e-3), ("B", 1e-3)))
    first = CandidateMeasure("whole on A", (("A", 1e-4),))
    second = CandidateMeasure("whole on B", (("B", 1e-4),))
    decision = choose_placement(Measurements((split, first, second), {}))
    assert decision.chosen_candidate.label == "whole on A"


def test_crossing_seconds_counts_each_devices_link() -> None:
    links = {"GPU.0": HostLink(2e9, 1e-5), "CPU": HOST_LINK}
    assert crossing_seconds(Crossing("v", "GPU.0", "GPU.0", 1 << 20), links) == 0.0
    assert crossing_seconds(Crossing("v", "GPU.0", "CPU", 2000), links) == pytest.approx(1e-5 + 2000 / 2e9)
    unknown = crossing_seconds(Crossing("v", "X.0", "GPU.0", 2000), links)
    assert unknown == pytest.approx(DEFAULT_LINK.seconds(2000) + links["GPU.0"].seconds(2000))


def test_program_seconds_sums_executed_ops_and_falls_back_to_wall_time() -> None:
    run = [ProfilingRecord("a", "MatMul", real_time=_seconds(2e-3)),
           ProfilingRecord("b", "Relu", real_time=_seconds(1e-3)),
           ProfilingRecord("c", "Shape", real_time=_seconds(5e-3), status="NOT_RUN"),
           ProfilingRecord("transfer CPU->X", "Transfer", real_time=_seconds(9e-3), bytes=64)]
    slower = [*run[:1], ProfilingRecord("b", "Relu", real_time=_seconds(4e-3))]
    seconds, how = program_seconds([run, slower, run], [1.0, 1.0, 1.0])
    assert how == "per-op profile" and seconds == pytest.approx(3e-3)  # the median run
    seconds, how = program_seconds([[], []], [0.25, 0.75])
    assert how == "wall time" and seconds == pytest.approx(0.5)
    with pytest.raises(ValueError, match="at least one"):
        program_seconds([], [])


def test_link_from_transfer_records() -> None:
    records = [ProfilingRecord("transfer CPU->X", "Transfer", real_time=_seconds(1e-3), bytes=3000),
               ProfilingRecord("transfer X->CPU", "Transfer", real_time=_seconds(2e-3), bytes=6000),
               ProfilingRecord("a", "MatMul", real_time=_seconds(1.0))]
    link = link_from_records(records)
    assert link is not None and link.measured and link.bandwidth == pytest.approx(9000 / 3e-3)
    assert link_from_records(records[2:]) is None


def test_decision_text_names_candidates_times_and_choice() -> None:
    measures = _split_and_whole((1e-4, 2e-4, 1e-4), 3e-4)
    decision = choose_placement(Measurements(measures, {"CPU": HOST_LINK}, ("whole on X.0: no memory",)))
    text = decision.describe()
    for cost in decision.candidates:
        assert cost.label in text
    assert f"chosen: {decision.chosen_candidate.label}" in text
    assert "whole on X.0: no memory" in text and "host link of GPU.0" in text


@pytest.mark.parametrize("margin", [-0.1, 1.0])
def test_choose_placement_refuses_bad_arguments(margin: float) -> None:
    with pytest.raises(ValueError, match="margin"):
        choose_placement(Measurements(_split_and_whole((1, 1, 1), 1), {}), margin=margin)
    with pytest.raises(ValueError, match="at least the support split"):
        choose_placement(Measurements((), {}))


# --- the key -------------------------------------------------------------------------------


def test_key_is_parsed_read_back_and_refused_when_bad() -> None:
    core = ov.Core()
    core.set_property("HETERO", {"HETERO_PLACEMENT": "cost"})
    assert core.get_property("HETERO", "HETERO_PLACEMENT") == "COST"
    with pytest.raises(PropertyError, match=r"HETERO_PLACEMENT.*'FASTEST'.*SUPPORT, COST"):
        core.set_property("HETERO", {"HETERO_PLACEMENT": "FASTEST"})
    with pytest.raises(PropertyError, match="HETERO_PLACEMENT"):
        core.compile_model(named(contrib_model()), "CPU", COST)


# --- end to end on test devices with set costs -----------------------------------------------


class TimedProgram(LimitedProgram):
    """Reports, with ENABLE_PROFILING, each op as taking the plugin's ``op_seconds`` and, where the
    plugin has a ``link`` (bytes, seconds), one transfer record of that size and time."""

    def run(self, inputs: Mapping[str, Any], worker: int = 0,
            keep_on_device: Collection[str] = ()) -> dict[str, Any]:
        self.plugin.count("runs")
        return super().run(inputs, worker, keep_on_device)

    def profiling_info(self, worker: int = 0) -> list[ProfilingRecord]:
        if not self.profiling:
            return []
        plugin = self.plugin
        records = [ProfilingRecord(n.name, n.op_type, "test", _seconds(plugin.op_seconds),
                                   _seconds(plugin.op_seconds)) for n in self.model.graph
                   if n.op_type != "Constant"]
        if plugin.link is not None:
            records.append(ProfilingRecord("transfer", "Transfer", "copy", _seconds(plugin.link[1]),
                                           _seconds(plugin.link[1]), bytes=plugin.link[0]))
        return records


class TimedPlugin(LimitedPlugin):
    """A LIMITED device whose ops take ``op_seconds`` in its profile; ``host`` marks it DEVICE_TYPE
    host; ``profiles=False`` takes no ENABLE_PROFILING (its cost is then its runs' wall time);
    ``broken`` fails every compile."""

    def __init__(self, family: str, op_seconds: float = 0.0, link: tuple[int, float] | None = None,
                 host: bool = False, profiles: bool = True, broken: bool = False, **kwargs: Any) -> None:
        super().__init__(family, 1, **kwargs)
        self.op_seconds, self.link, self.host = op_seconds, link, host
        self.profiles, self.broken = profiles, broken

    def supported_properties(self) -> tuple[str, ...]:
        keys = super().supported_properties()
        return keys if self.profiles else tuple(k for k in keys if k != "ENABLE_PROFILING")

    def device_property(self, device: str, key: str) -> Any:
        if key == "DEVICE_TYPE":
            return "host" if self.host else "discrete"
        return super().device_property(device, key)

    def compile(self, model: ir.Model, device: str, config: Mapping[str, Any]) -> DeviceProgram:
        if self.broken:
            raise RuntimeError(f"{device} is out of order")
        self.compiled.append((device, model))
        return TimedProgram(self, model, device, config)


def _accel(op_seconds: float, **kwargs: Any) -> TimedPlugin:
    """An accelerator that lacks Trilu (so the contrib model splits around it)."""
    return TimedPlugin("ACCEL", op_seconds, excluded={"Trilu"}, **kwargs)


def _host(op_seconds: float, **kwargs: Any) -> TimedPlugin:
    return TimedPlugin("HOST", op_seconds, host=True, tensor_kind="numpy",
                       extra_domains=["com.microsoft"], **kwargs)


def _compile(plugins: list[TimedPlugin], config: Mapping[str, Any] = COST
             ) -> tuple[ov.CompiledModel, np.ndarray, np.ndarray]:
    core = ov.Core()
    for plugin in plugins:
        core.register_plugin(plugin, plugin.family)
    proto = named(contrib_model())
    devices = "HETERO:" + ",".join(f"{p.family}.0" for p in plugins)
    compiled = core.compile_model(core.read_model(proto), devices, dict(config))
    x = np.random.default_rng(3).standard_normal((2, 8)).astype(np.float32)
    return compiled, compiled({"x": x})["y"], ort_run(proto, {"x": x})[0]


@pytest.mark.parametrize("accel_op,host_op,devices,chosen", [
    (1e-5, 1e-2, ["ACCEL.0", "HOST.0", "ACCEL.0"], "split ACCEL.0,HOST.0,ACCEL.0"),
    (1e-2, 1e-5, ["HOST.0"], "whole on HOST.0"),
])
def test_decision_goes_each_way_with_set_op_costs(accel_op: float, host_op: float, devices: list[str],
                                                  chosen: str) -> None:
    compiled, result, expected = _compile([_accel(accel_op), _host(host_op)])
    plan = compiled.get_property("HETERO_SUBGRAPHS")
    assert [s.device for s in plan.subgraphs] == devices
    assert plan.placement.chosen_candidate.label == chosen
    assert [c.label for c in plan.placement.candidates] == ["split ACCEL.0,HOST.0,ACCEL.0", "whole on HOST.0"]
    assert compiled.get_property("HETERO_PLACEMENT") == "COST"
    assert f"chosen: {chosen}" in str(plan)
    np.testing.assert_allclose(result, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("link_seconds,devices", [
    (1e-6, ["ACCEL.0", "HOST.0", "ACCEL.0"]),   # a fast link: the accelerator's faster ops win
    (1e-2, ["HOST.0"]),                          # a slow link: the two crossings cost more
])
def test_measured_transfer_records_weigh_the_crossings(link_seconds: float, devices: list[str]) -> None:
    accel = _accel(1e-4, link=(64, link_seconds))
    compiled, result, expected = _compile([accel, _host(1e-3)])
    plan = compiled.get_property("HETERO_SUBGRAPHS")
    assert [s.device for s in plan.subgraphs] == devices
    assert dict(plan.placement.links)["ACCEL.0"].bandwidth == pytest.approx(64 / link_seconds)
    np.testing.assert_allclose(result, expected, rtol=1e-5, atol=1e-5)


def test_slow_runs_without_profiles_are_timed_whole() -> None:
    slow = _accel(0.0, profiles=False, delay=0.03)
    compiled, result, expected = _compile([slow, _host(0.0, profiles=False)])
    plan = compiled.get_property("HETERO_SUBGRAPHS")
    assert [s.device for s in plan.subgraphs] == ["HOST.0"]
    split = plan.placement.candidates[0]
    assert split.timing == "wall time" and split.compute_seconds >= 2 * 0.03
    assert slow.counters["runs"] <= 2 * (1 + 5)  # a warm-up and at most five measured runs per program
    np.testing.assert_allclose(result, expected, rtol=1e-5, atol=1e-5)


def test_support_is_the_default_and_measures_nothing() -> None:
    accel = _accel(1e-2)
    compiled, result, expected = _compile([accel, _host(1e-5)], {})
    plan = compiled.get_property("HETERO_SUBGRAPHS")
    assert [s.device for s in plan.subgraphs] == ["ACCEL.0", "HOST.0", "ACCEL.0"]
    assert plan.placement is None and "placement by cost" not in str(plan)
    assert compiled.get_property("HETERO_PLACEMENT") == "SUPPORT"
    assert "HETERO_PLACEMENT" in compiled.get_property("SUPPORTED_PROPERTIES")
    # Its two subgraphs compiled once and ran once each, for this test's one inference: no measuring.
    assert len(accel.compiled) == 2 and accel.counters["runs"] == 2
    np.testing.assert_allclose(result, expected, rtol=1e-5, atol=1e-5)


def test_a_candidate_that_cannot_compile_is_named_and_left_out() -> None:
    broken = TimedPlugin("BROKEN", 0.0, broken=True, extra_domains=["com.microsoft"])
    compiled, result, expected = _compile([_accel(1e-2), _host(1e-5), broken])
    decision = compiled.get_property("HETERO_SUBGRAPHS").placement
    assert [c.label for c in decision.candidates] == ["split ACCEL.0,HOST.0,ACCEL.0", "whole on HOST.0"]
    assert len(decision.unmeasured) == 1 and "whole on BROKEN.0" in decision.unmeasured[0]
    assert "out of order" in decision.unmeasured[0]
    assert decision.chosen_candidate.label == "whole on HOST.0"
    np.testing.assert_allclose(result, expected, rtol=1e-5, atol=1e-5)


def test_a_split_that_cannot_be_measured_fails_the_compile() -> None:
    accel = _accel(1e-5)
    accel.fail_on = "ACCEL.0"
    with pytest.raises(CompileError, match=r"could not measure the support split.*injected failure"):
        _compile([accel, _host(1e-5)])


def test_no_device_runs_every_op_keeps_the_split_with_a_note() -> None:
    compiled, result, expected = _compile([_accel(1e-2), _host(1e-5, excluded={"MatMul"})])
    plan = compiled.get_property("HETERO_SUBGRAPHS")
    assert [s.device for s in plan.subgraphs] == ["ACCEL.0", "HOST.0", "ACCEL.0"]
    assert plan.placement is None and any("no listed device runs every op" in n for n in plan.notes)
    np.testing.assert_allclose(result, expected, rtol=1e-5, atol=1e-5)


def test_manual_affinities_are_followed_under_cost() -> None:
    core = ov.Core()
    core.register_plugin(_accel(1e-2), "ACCEL")
    core.register_plugin(_host(1e-5), "HOST")
    proto = named(contrib_model())
    model = core.read_model(proto)
    for op in model.get_ops():
        op.get_rt_info()["affinity"] = "HOST.0" if op.get_type_name() == "Trilu" else "ACCEL.0"
    compiled = core.compile_model(model, "HETERO:ACCEL.0,HOST.0", COST)
    plan = compiled.get_property("HETERO_SUBGRAPHS")
    assert [s.device for s in plan.subgraphs] == ["ACCEL.0", "HOST.0", "ACCEL.0"]
    assert plan.placement is None and any("manual placement is followed" in n for n in plan.notes)
    x = np.ones((2, 8), np.float32)
    np.testing.assert_allclose(compiled({"x": x})["y"], ort_run(proto, {"x": x})[0], rtol=1e-5, atol=1e-5)


# --- real devices: emulated GPUs here, CUDA on the GPU machine --------------------------------


def _gpu_cpu_case(core: ov.Core) -> None:
    proto = named(contrib_model())
    compiled = core.compile_model(core.read_model(proto), "HETERO:GPU,CPU", COST)
    plan = compiled.get_property("HETERO_SUBGRAPHS")
    decision = plan.placement
    assert [c.label for c in decision.candidates] == ["split GPU.0,CPU,GPU.0", "whole on CPU"]
    assert all(c.total_seconds > 0 for c in decision.candidates)
    expected_devices = ["CPU"] if decision.chosen == 1 else ["GPU.0", "CPU", "GPU.0"]
    assert [s.device for s in plan.subgraphs] == expected_devices
    x = np.random.default_rng(5).standard_normal((2, 8)).astype(np.float32)
    np.testing.assert_allclose(compiled({"x": x})["y"], ort_run(proto, {"x": x})[0], rtol=1e-5, atol=1e-5)


@pytest.mark.skipif(not GPU_PLUGIN, reason="the GPU plugin (torch) is not installed")
def test_emulated_gpu_and_cpu(emulated_core: ov.Core) -> None:
    _gpu_cpu_case(emulated_core)


@pytest.mark.gpu
def test_cuda_gpu_and_cpu(core: ov.Core) -> None:
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    _gpu_cpu_case(core)
    decision = core.compile_model(named(contrib_model()), "HETERO:GPU,CPU", COST) \
        .get_property("HETERO_SUBGRAPHS").placement
    assert dict(decision.links)["GPU.0"].measured  # the GPU's transfer records gave its link
