"""HETERO: a placement plan (``inferplex.placement``) compiled into a chain of device programs.

Entry points for the Core and the CLI:

- :func:`query_hetero` -- node name -> device, automatic mode (``query_model``);
- :func:`plan_hetero` -- the :class:`HeteroPlan` a compilation would use (no compiling);
- :func:`compile_hetero` -- an :class:`~inferplex.engine.chain.ChainRunner` running the plan;
- :func:`write_affinity_dot`, :func:`write_subgraphs_dot`, :func:`render_svg` -- GraphViz files.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import onnx_ir as ir

from inferplex.devices import remote
from inferplex.engine.chain import ChainRunner, SubgraphRunner
from inferplex.engine.device_pool import DevicePool
from inferplex.errors import CompileError, InferplexError
from inferplex.hetero._measure import measure_candidates
from inferplex.placement.cost import Measurements
from inferplex.placement.graph import fill_missing_types, name_of
from inferplex.placement.plan import HeteroPlan, StagePlan, SubgraphPlan, TransferPlan
from inferplex.placement.planner import Measure, PlacementCandidate, Planned, plan, query
from inferplex.placement.split import extract_submodel
from inferplex.placement.visualize import (
    render_svg,
    visualize_requested,
    write_affinity_dot,
    write_subgraphs_dot,
)

if TYPE_CHECKING:
    from inferplex.devices.base import DeviceProgram
    from inferplex.devices.registry import DeviceRegistry

__all__ = [
    "ChainRunner", "HeteroPlan", "HeteroRunner", "StagePlan", "SubgraphPlan", "TransferPlan",
    "compile_hetero", "plan_hetero", "query_hetero", "render_svg", "write_affinity_dot",
    "write_subgraphs_dot",
]



def query_hetero(registry: DeviceRegistry, model: ir.Model, devices: Sequence[str],
                 config: Mapping[str, Any]) -> dict[str, str]:
    """Node name -> full device name for every node, in automatic mode.

    Manual affinities are ignored (as OpenVINO's query_model does).  Under
    ``MODEL_DISTRIBUTION_POLICY=PIPELINE_PARALLEL`` the answer is the stage plan.
    Raises UnsupportedOpError listing every op (type and name) no device supports.
    """
    return query(registry, model, devices, config)


def plan_hetero(registry: DeviceRegistry, model: ir.Model, devices: Sequence[str],
                config: Mapping[str, Any]) -> HeteroPlan:
    """The subgraph (or stage) plan ``compile_hetero`` would run, without compiling it.

    Under ``HETERO_PLACEMENT=COST`` the candidates are compiled and run to be
    measured (as ``compile_hetero`` does), since the plan depends on their times.
    """
    return plan(registry, model, devices, config, _measure(registry, model)).plan


def _measure(registry: DeviceRegistry, model: ir.Model) -> Measure:
    """The measuring step for HETERO_PLACEMENT=COST: candidates compiled here, in this process."""
    def measure(candidates: Sequence[PlacementCandidate]) -> Measurements:
        return measure_candidates(registry, model, candidates,
                                  lambda planned: _compile_all(registry, model, planned, "NO"))

    return measure


class HeteroRunner(ChainRunner):
    """HETERO's chain, also answering ``HETERO_PLACEMENT`` (the policy its plan was made by)."""

    def __init__(self, placement: str, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.placement = placement

    def get_property(self, key: str) -> Any:
        if key == "HETERO_PLACEMENT":
            return self.placement
        return super().get_property(key)

    def property_names(self) -> tuple[str, ...]:
        return (*super().property_names(), "HETERO_PLACEMENT")


def _model_name(model: ir.Model) -> str:
    name = model.graph.name or "model"
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)


def _visualize(model: ir.Model, planned: Planned) -> None:
    name = _model_name(model)
    write_affinity_dot(model, planned.affinity, Path(f"hetero_affinity_{name}.dot"))
    write_subgraphs_dot(model, planned.plan, Path(f"hetero_subgraphs_{name}.dot"))


def _whole_model(model: ir.Model, planned: Planned) -> bool:
    """One subgraph holding every op: compile the model itself (nothing over the device alone)."""
    subs = planned.plan.subgraphs
    graph_outputs = [name_of(v) for v in model.graph.outputs]
    return len(subs) == 1 and len(subs[0].nodes) == len(planned.index.placed_nodes()) \
        and list(subs[0].outputs) == graph_outputs


def _compile_all(registry: DeviceRegistry, model: ir.Model, planned: Planned,
                 worker_processes: str) -> list[DeviceProgram]:
    """Compile every subgraph; on any failure close the others and report every failure.

    ``worker_processes``: the WORKER_PROCESSES setting (see :mod:`inferplex.devices.remote`):
    two GPUs in one chain must not serialise on this process's GIL.
    """
    subs = planned.plan.subgraphs
    own = remote.wants_own_process(registry, sorted({s.device for s in subs}), worker_processes,
                                   min_bound=2)
    boundary = [n for s in subs for n in (*s.inputs, *s.outputs)]
    unknown = [] if _whole_model(model, planned) else fill_missing_types(planned.annotated, boundary)
    if unknown:
        raise CompileError(f"HETERO cannot type the tensors {', '.join(unknown)} between subgraphs;"
                           " add their types to the model (value_info) or place their producers "
                           "and readers on one device")
    programs: list[DeviceProgram] = []
    failures: list[str] = []
    try:
        for sub in subs:
            submodel = model if _whole_model(model, planned) else \
                extract_submodel(planned.annotated, planned.index, sub)
            config = planned.member_configs[sub.device]
            try:
                programs.append(registry.compile(submodel, sub.device, config, own_process=own[sub.device]))
            except InferplexError as error:
                failures.append(f"subgraph{sub.index} on {sub.device} ({len(sub.nodes)} ops, "
                                f"{sub.op_range}): {error}")
    except BaseException:
        # Any other error (a plugin's own exception, KeyboardInterrupt) propagates as it is,
        # but the programs compiled so far must not keep their device memory.
        for program in programs:
            program.close()
        raise
    if failures:
        for program in programs:
            program.close()
        raise CompileError("HETERO could not compile: " + "; ".join(failures))
    return programs


def _constant_outputs(model: ir.Model) -> dict[str, np.ndarray]:
    """Model outputs that are constants (no device computes them)."""
    found: dict[str, np.ndarray] = {}
    for value in model.graph.outputs:
        producer = value.producer()
        tensor = value.const_value
        if tensor is None and producer is not None and producer.op_type == "Constant":
            tensor = ir.convenience.get_const_tensor(value)
        if tensor is not None and (producer is None or producer.op_type == "Constant"):
            found[name_of(value)] = tensor.numpy()
    return found


def compile_hetero(registry: DeviceRegistry, model: ir.Model, devices: Sequence[str],
                   config: Mapping[str, Any]) -> ChainRunner:
    """Split ``model`` over ``devices`` (names as written, priority order) and compile it.

    Under ``HETERO_PLACEMENT=COST``, where op support splits the model over
    devices, the split and the whole model on each device that runs every op
    are first compiled and measured (:mod:`inferplex.hetero._measure`), and the
    cheapest is compiled (:mod:`inferplex.placement.cost`); the plan
    (``HETERO_SUBGRAPHS``) says which candidates were weighed and why.

    ``config`` is the validated HETERO config; each device compiles its subgraphs
    with ``registry.member_config(device, config)``.  With the environment
    variable INFERPLEX_HETERO_VISUALIZE (or OPENVINO_HETERO_VISUALIZE) set, the
    two .dot files are written to the working directory.
    """
    planned = plan(registry, model, devices, config, _measure(registry, model))
    if visualize_requested():
        _visualize(model, planned)
    programs = _compile_all(registry, model, planned, str(config.get("WORKER_PROCESSES", "AUTO")))
    subs = planned.plan.subgraphs
    sources = {name: s.index for s in subs for name in s.outputs}
    readers: dict[str, list[int]] = {}
    for sub in subs:
        for name in sub.inputs:
            readers.setdefault(name, []).append(sub.index)
    # Each subgraph counts when its device's own config says so (``core.set_property("GPU",
    # {"ENABLE_PROFILING": True})``, DEVICE_PROPERTIES, or HETERO's key passed down), as
    # OpenVINO's HETERO does; the chain reports when any of them counts.
    counting = {d: bool(c.get("ENABLE_PROFILING", False)) for d, c in planned.member_configs.items()}
    profiling = bool(config.get("ENABLE_PROFILING", False)) or any(counting[s.device] for s in subs)
    runners = []
    for sub, program in zip(subs, programs, strict=True):
        kind = str(getattr(program, "tensor_kind", "numpy"))
        # Native between like programs; values only numpy readers take leave through
        # the producer's own (pinned) host path.
        keep = [n for n in sub.outputs if kind != "numpy" and any(
            str(getattr(programs[r], "tensor_kind", "numpy")) == kind for r in readers.get(n, ()))]
        inputs = sub.inputs
        if _whole_model(model, planned):
            inputs = tuple(name_of(v) for v in model.graph.inputs if not v.is_initializer())
        pool = DevicePool(program, profiling=counting[sub.device], keep_on_device=keep,
                          label=f"subgraph {sub.index}",
                          exit_timeout=config.get("EXIT_TIMEOUT"))
        runners.append(SubgraphRunner(sub.index, pool, inputs,
                                      {n: sources[n] for n in sub.inputs if n in sources}))
    outputs = [name_of(v) for v in model.graph.outputs]
    return HeteroRunner(str(config.get("HETERO_PLACEMENT", "SUPPORT")), planned.plan, runners, outputs,
                        _constant_outputs(model), profiling)
