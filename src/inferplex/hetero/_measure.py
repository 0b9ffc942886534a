"""The measuring step of ``HETERO_PLACEMENT=COST``: compile each candidate, run it, read its times.

Each candidate placement (:class:`~inferplex.placement.planner.PlacementCandidate`)
is compiled with ``ENABLE_PROFILING`` on every device that takes it, run once to
warm up and then up to :data:`MEASURED_RUNS` times on generated inputs of the
model's shapes (zeros for integer and boolean inputs, so that indices stay in
range; uniform values in [0, 1) for floating ones), stopping early once
:data:`TIME_CAP` seconds of runs have passed.  Its programs are closed
afterwards: the compile that follows builds the chosen plan with the user's
own settings.  What the runs report becomes the plain numbers that
:func:`~inferplex.placement.cost.choose_placement` decides on.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import numpy as np
import onnx_ir as ir

from inferplex.errors import CompileError, InferplexError
from inferplex.placement.cost import (
    DEFAULT_LINK,
    HOST_LINK,
    CandidateMeasure,
    Crossing,
    HostLink,
    Measurements,
    link_from_records,
    program_seconds,
)
from inferplex.placement.graph import name_of

if TYPE_CHECKING:
    from inferplex.devices.base import DeviceProgram, ProfilingRecord
    from inferplex.devices.registry import DeviceRegistry
    from inferplex.placement.planner import PlacementCandidate, Planned

__all__ = ["MEASURED_RUNS", "TIME_CAP", "generated_inputs", "measure_candidates"]

MEASURED_RUNS = 5
"""Runs measured per candidate after one warm-up run (fewer when :data:`TIME_CAP` passes first)."""
TIME_CAP = 2.0
"""Seconds of measured runs per candidate after which no further run starts (at least one runs)."""

CompilePrograms = Callable[["Planned"], list["DeviceProgram"]]


def generated_inputs(model: ir.Model, seed: int = 0) -> dict[str, np.ndarray]:
    """Inputs of ``model``'s shapes and types (symbolic dims taken as 1), the same for every call."""
    rng = np.random.default_rng(seed)
    feeds: dict[str, np.ndarray] = {}
    for value in model.graph.inputs:
        if value.is_initializer() or value.dtype is None:
            continue
        shape = [d if isinstance(d, int) else 1 for d in (value.shape or ())]
        dtype = value.dtype.numpy()
        if np.issubdtype(dtype, np.floating):
            feeds[name_of(value)] = rng.random(shape, dtype=np.float64).astype(dtype)
        else:
            feeds[name_of(value)] = np.zeros(shape, dtype=dtype)
    return feeds


def _profiling(registry: DeviceRegistry, planned: Planned) -> Planned:
    """``planned`` with ENABLE_PROFILING on for each device that takes the key."""
    configs = {}
    for device, config in planned.member_configs.items():
        takes = "ENABLE_PROFILING" in registry.accepted_keys(registry.resolve(device)[0])
        configs[device] = {**config, "ENABLE_PROFILING": True} if takes else dict(config)
    return replace(planned, member_configs=configs)


def _run_once(candidate: PlacementCandidate, programs: Sequence[DeviceProgram],
              feeds: Mapping[str, np.ndarray], graph_inputs: Sequence[str]
              ) -> tuple[list[float], list[list[ProfilingRecord]], dict[str, Any]]:
    """One inference through the candidate's programs: wall times, records and every value."""
    values: dict[str, Any] = dict(feeds)
    walls: list[float] = []
    for sub, program in zip(candidate.planned.plan.subgraphs, programs, strict=True):
        names = graph_inputs if candidate.whole else sub.inputs
        start = time.perf_counter()
        values.update(program.run({n: values[n] for n in names}))
        walls.append(time.perf_counter() - start)
    return walls, [list(p.profiling_info(0)) for p in programs], values


def _measure_one(candidate: PlacementCandidate, programs: Sequence[DeviceProgram],
                 feeds: Mapping[str, np.ndarray], graph_inputs: Sequence[str],
                 runs: int, time_cap: float) -> tuple[CandidateMeasure, dict[str, list[ProfilingRecord]]]:
    """Warm up, run up to ``runs`` times within ``time_cap``; the measure and each device's records."""
    _, _, values = _run_once(candidate, programs, feeds, graph_inputs)
    walls: list[list[float]] = []
    records: list[list[list[ProfilingRecord]]] = []
    deadline = time.perf_counter() + time_cap
    while len(walls) < max(runs, 1) and (not walls or time.perf_counter() < deadline):
        wall, record, _ = _run_once(candidate, programs, feeds, graph_inputs)
        walls.append(wall)
        records.append(record)
    subs = candidate.planned.plan.subgraphs
    measured = [program_seconds([run[i] for run in records], [run[i] for run in walls])
                for i in range(len(subs))]
    crossings = tuple(Crossing(t.value, t.source_device, t.target_device,
                               int(getattr(values.get(t.value), "nbytes", 0)) or t.nbytes)
                      for t in candidate.planned.plan.transfers if t.crosses_devices)
    timing = "wall time" if any(how == "wall time" for _, how in measured) else "per-op profile"
    by_device: dict[str, list[ProfilingRecord]] = {}
    for run in records:
        for sub, program_records in zip(subs, run, strict=True):
            by_device.setdefault(sub.device, []).extend(program_records)
    return CandidateMeasure(candidate.label, tuple((s.device, seconds) for s, (seconds, _) in
                                                   zip(subs, measured, strict=True)),
                            crossings, timing), by_device


def _link(registry: DeviceRegistry, device: str, records: Sequence[ProfilingRecord]) -> HostLink:
    """The device's measured host link; a host device's costs nothing; else the assumed default."""
    measured = link_from_records(records)
    if measured is not None:
        return measured
    try:
        host = registry.device_property(device, "DEVICE_TYPE") == "host"
    except InferplexError:
        host = False
    return HOST_LINK if host else DEFAULT_LINK


def measure_candidates(registry: DeviceRegistry, model: ir.Model,
                       candidates: Sequence[PlacementCandidate], compile_programs: CompilePrograms,
                       runs: int = MEASURED_RUNS, time_cap: float = TIME_CAP) -> Measurements:
    """Measure every candidate; ``candidates[0]`` (the support split) must measure, others may fail.

    ``compile_programs(planned)`` compiles a plan's subgraphs in order (HETERO's own
    compile, in this process).  A whole-model candidate that fails to compile or run is
    left out and named in ``Measurements.unmeasured``.
    """
    feeds = generated_inputs(model)
    graph_inputs = list(feeds)
    measures: list[CandidateMeasure] = []
    unmeasured: list[str] = []
    records: dict[str, list[ProfilingRecord]] = {}
    for candidate in candidates:
        programs: list[DeviceProgram] = []
        try:
            programs = compile_programs(_profiling(registry, candidate.planned))
            measure, by_device = _measure_one(candidate, programs, feeds, graph_inputs, runs, time_cap)
        except Exception as error:  # noqa: BLE001 - a plugin's own exceptions too: name them below
            if candidate is candidates[0]:
                raise CompileError(f"HETERO_PLACEMENT=COST could not measure the support split "
                                   f"({candidate.label}): {error}") from error
            unmeasured.append(f"{candidate.label}: {type(error).__name__}: {error}")
            continue
        finally:
            for program in programs:
                program.close()
        measures.append(measure)
        for device, found in by_device.items():
            records.setdefault(device, []).extend(found)
    devices = sorted({d for m in measures for d, _ in m.programs})
    links = {d: _link(registry, d, records.get(d, [])) for d in devices}
    return Measurements(tuple(measures), links, tuple(unmeasured))
