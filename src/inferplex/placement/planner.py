"""From a model, a device list and a config to a :class:`HeteroPlan`.

Steps: resolve the devices; annotate a copy of the model with types and shapes;
ask each device which ops it supports; place ops (pipeline stages, manual
affinities, or automatic placement with glue folding); split into subgraphs;
size every subgraph with the memory model.  Under ``HETERO_PLACEMENT=COST``,
where op support splits the model over devices, the split and the whole model
on each device that runs every op are measured and the cheapest is kept
(:mod:`inferplex.placement.cost`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import onnx_ir as ir

from inferplex.devices.sharing import share_the_host
from inferplex.errors import DeviceNameError, InferplexError
from inferplex.placement.affinity import automatic_affinity, fold_glue_ops, manual_affinity
from inferplex.placement.cost import Measurements, choose_placement
from inferplex.placement.graph import GraphIndex, annotate, fill_all_missing_types, name_of
from inferplex.placement.pipeline import FREE_MEMORY_MARGIN, MemoryModel, plan_stages
from inferplex.placement.plan import HeteroPlan, StagePlan
from inferplex.placement.split import split_into_subgraphs, transfers_between

if TYPE_CHECKING:
    from inferplex.devices.registry import DeviceRegistry

__all__ = ["Measure", "PlacementCandidate", "Planned", "plan", "query", "resolve_devices"]

PIPELINE_PARALLEL = "PIPELINE_PARALLEL"


@dataclass(frozen=True)
class Planned:
    """A plan with what compiling it needs."""

    plan: HeteroPlan
    affinity: Mapping[str, str]
    """Node name -> full device name (every node, constants included)."""
    annotated: ir.Model
    """The typed copy of the model that subgraphs are extracted from."""
    index: GraphIndex
    member_configs: Mapping[str, dict[str, Any]]


@dataclass(frozen=True)
class PlacementCandidate:
    """One placement HETERO_PLACEMENT=COST weighs: its label, its plan, and whether it is the
    whole model on one device (then the model itself is compiled, not a subgraph of it)."""

    label: str
    """``"split GPU.0,CPU,GPU.0"`` or ``"whole on CPU"``: the label its measure carries back."""
    planned: Planned
    whole: bool


Measure = Callable[[Sequence[PlacementCandidate]], Measurements]
"""The measuring step: compile and run the candidates, return their :class:`Measurements`
(the support split, ``candidates[0]``, first)."""


def resolve_devices(registry: DeviceRegistry, devices: Sequence[str]) -> list[str]:
    """Full names in priority order; every bad name reported at once."""
    if not devices:
        raise DeviceNameError("HETERO needs a device list: write 'HETERO:GPU,CPU' or set "
                              "MULTI_DEVICE_PRIORITIES, e.g. core.set_property('HETERO', "
                              "{'MULTI_DEVICE_PRIORITIES': 'GPU,CPU'})")
    return registry.full_names(devices, "the HETERO list")


def _capacity(registry: DeviceRegistry, device: str, config: Mapping[str, Any]) -> int:
    if config.get("MEMORY_LIMIT") is not None:
        return int(config["MEMORY_LIMIT"])
    return int(registry.memory(device).free_bytes * (1 - FREE_MEMORY_MARGIN))


def _symbolic_dims(model: ir.Model) -> list[str]:
    return sorted({str(d) for v in model.graph.inputs if v.shape is not None
                   for d in v.shape if not isinstance(d, int)})


def _pipeline_affinity(memory: MemoryModel, stages: Sequence[StagePlan],
                       supported: Mapping[str, set[str]], index: GraphIndex) -> dict[str, str]:
    """Stage devices, with ops a stage's device lacks sent to the first device that has them."""
    affinity: dict[str, str] = {}
    position = 0
    for stage in stages:
        for name in memory.order[position: position + stage.op_count]:
            affinity[name] = stage.device
        position += stage.op_count
    fallback = automatic_affinity(index, supported)
    for name, device in list(affinity.items()):
        if name not in supported[device]:
            affinity[name] = fallback[name]
    for node in index.nodes:
        affinity.setdefault(name_of(node), fallback[name_of(node)])
    return affinity


def _place(registry: DeviceRegistry, index: GraphIndex, supported: Mapping[str, set[str]],
           memory: MemoryModel, configs: Mapping[str, dict[str, Any]],
           pipeline: bool) -> tuple[dict[str, str], str, int]:
    """Affinity, mode, and the subgraph count before glue folding."""
    devices = list(supported)
    if pipeline:
        capacity = {d: _capacity(registry, d, configs[d]) for d in devices}
        stages = plan_stages(memory, devices, capacity)
        return _pipeline_affinity(memory, stages, supported, index), "pipeline", 0

    def resolve(name: str) -> str | None:
        try:
            full = registry.full_name(name)
        except InferplexError:
            return None
        return full if full in supported else None

    manual = manual_affinity(index, resolve, supported)
    if manual is not None:
        for node in index.nodes:
            manual.setdefault(name_of(node), _first_supporting(supported, name_of(node)))
        return manual, "manual", 0
    greedy = automatic_affinity(index, supported)
    before = len(split_into_subgraphs(index, greedy))
    return fold_glue_ops(index, greedy, supported), "automatic", before


def _first_supporting(supported: Mapping[str, set[str]], name: str) -> str:
    return next((d for d, names in supported.items() if name in names), next(iter(supported)))


@dataclass(frozen=True)
class _Context:
    """What turning an affinity into a :class:`Planned` needs (shared by every candidate)."""

    registry: DeviceRegistry
    devices: tuple[str, ...]
    configs: Mapping[str, dict[str, Any]]
    annotated: ir.Model
    index: GraphIndex
    memory: MemoryModel
    symbolic: tuple[str, ...]
    pipeline: bool

    def planned(self, affinity: dict[str, str], mode: str, before: int,
                notes: Sequence[str] = ()) -> Planned:
        """Split ``affinity`` into subgraphs, size them, and wrap it all as a :class:`Planned`."""
        subgraphs = split_into_subgraphs(self.index, affinity)
        position = {name: i for i, name in enumerate(self.memory.order)}
        stages = tuple(self.memory.stage_plan(
            s.device, sorted(position[n] for n in s.nodes),
            _capacity(self.registry, s.device, self.configs[s.device]) if self.pipeline else None)
            for s in subgraphs)
        symbolic = (f"symbolic input dims {', '.join(self.symbolic)} taken as 1 for memory sizes",) \
            if self.symbolic else ()
        hetero_plan = HeteroPlan(self.devices, PIPELINE_PARALLEL if self.pipeline else "AFFINITY", mode,
                                 subgraphs, transfers_between(self.memory.index, subgraphs, {}), stages,
                                 before or len(subgraphs), (*symbolic, *notes))
        return Planned(hetero_plan, affinity, self.annotated, self.index, self.configs)


def plan(registry: DeviceRegistry, model: ir.Model, devices: Sequence[str],
         config: Mapping[str, Any], measure: Measure | None = None) -> Planned:
    """Place, split and size ``model`` for HETERO over ``devices`` (names as written).

    Under ``HETERO_PLACEMENT=COST``, where op support splits the model over
    devices, ``measure`` (the compiling side's measuring step) is called with
    the candidates and :func:`~inferplex.placement.cost.choose_placement`
    picks one; without ``measure`` the support split is kept, with a note.
    """
    full = resolve_devices(registry, devices)
    configs = {d: registry.member_config(d, config) for d in full}
    share_the_host(registry, configs)
    annotated = annotate(model)
    fill_all_missing_types(annotated)
    index = GraphIndex.build(annotated.graph)
    supported = {d: registry.supported_nodes(annotated, d, configs[d]) for d in full}
    symbolic = _symbolic_dims(model)
    if symbolic:
        sized = annotate(model, fixed_dims={})
        fill_all_missing_types(sized)
        memory = MemoryModel(GraphIndex.build(sized.graph), {})
    else:
        memory = MemoryModel(index)
    pipeline = config.get("MODEL_DISTRIBUTION_POLICY") == PIPELINE_PARALLEL
    context = _Context(registry, tuple(full), configs, annotated, index, memory, tuple(symbolic), pipeline)
    affinity, mode, before = _place(registry, index, supported, memory, configs, pipeline)
    if config.get("HETERO_PLACEMENT") != "COST":
        return context.planned(affinity, mode, before)
    if mode != "automatic":
        return context.planned(affinity, mode, before, (
            f"HETERO_PLACEMENT=COST weighs automatic placements only; the {mode} placement is followed",))
    return _by_cost(context, context.planned(affinity, mode, before), supported, measure)


def _by_cost(context: _Context, split: Planned, supported: Mapping[str, set[str]],
             measure: Measure | None) -> Planned:
    """The support split, or the whole model on one device, whichever costs less."""
    if len({s.device for s in split.plan.subgraphs}) < 2:
        return split  # op support forced no split: nothing to weigh
    placed = [name_of(n) for n in context.index.placed_nodes()]
    whole = [d for d in context.devices if all(n in supported[d] for n in placed)]
    if not whole or measure is None:
        why = "no listed device runs every op" if not whole else "nothing measured the candidates"
        return _with_note(split, f"HETERO_PLACEMENT=COST: {why}; the support split is kept")
    candidates = [PlacementCandidate("split " + ",".join(s.device for s in split.plan.subgraphs), split,
                                     whole=False)]
    for device in whole:
        affinity = {name_of(n): device for n in context.index.nodes}
        candidates.append(PlacementCandidate(f"whole on {device}", context.planned(affinity, "automatic", 0),
                                             whole=True))
    decision = choose_placement(measure(candidates))
    chosen = next(c for c in candidates if c.label == decision.chosen_candidate.label)
    return replace(chosen.planned, plan=replace(chosen.planned.plan, placement=decision))


def _with_note(planned: Planned, note: str) -> Planned:
    return replace(planned, plan=replace(planned.plan, notes=(*planned.plan.notes, note)))


def query(registry: DeviceRegistry, model: ir.Model, devices: Sequence[str],
          config: Mapping[str, Any]) -> dict[str, str]:
    """Automatic affinities (manual ones ignored); pipeline stages under PIPELINE_PARALLEL."""
    if config.get("MODEL_DISTRIBUTION_POLICY") == PIPELINE_PARALLEL:
        return dict(plan(registry, model, devices, config).affinity)
    full = resolve_devices(registry, devices)
    annotated = annotate(model)
    fill_all_missing_types(annotated)
    index = GraphIndex.build(annotated.graph)
    supported = {d: registry.supported_nodes(annotated, d, registry.member_config(d, config))
                 for d in full}
    affinity = automatic_affinity(index, supported)
    return {name_of(node): affinity[name_of(node)] for node in model.graph}
