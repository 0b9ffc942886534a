"""HETERO and PIPELINE_PARALLEL: a chain of subgraph programs over device pools.

``run`` runs the subgraphs in order in the calling thread.  ``submit`` chains
the subgraphs' device pools: when subgraph i finishes request k (on its pool's
thread), request k is queued on subgraph i+1 and subgraph i takes request k+1,
so the subgraphs work as a pipeline.  A request ends exactly once, through its
future: with every output, or with the first error any subgraph raised.

Tensors: a value made by a non-numpy program (torch on a GPU) stays native
(``keep_on_device``) when a program of the same kind reads it; values only
numpy programs read leave through the producer's own (pinned) host path.  A
native value is moved once per reading device: to the host with the producer's
optional ``to_host``, onto another device with the reader's optional
``to_native`` (device to device between GPUs); without them the reader's
``run`` converts it and its plugin counts the transfer.  Moves made here are
timed and reported as ``Transfer`` counters.
"""

from __future__ import annotations

import datetime
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from inferplex.devices.base import ProfilingRecord
from inferplex.engine.device_pool import DevicePool, as_inference_error
from inferplex.engine.request import Outcome, OutputSpec, Request, RunResult, broken_result
from inferplex.engine.runner import Runner

if TYPE_CHECKING:
    from inferplex.placement.plan import HeteroPlan

__all__ = ["ChainRunner", "SubgraphRunner"]


@dataclass(frozen=True)
class SubgraphRunner:
    """One compiled subgraph and how its values flow."""

    index: int
    pool: DevicePool
    inputs: tuple[str, ...]
    """Values it reads (model inputs or earlier subgraphs' outputs)."""
    sources: Mapping[str, int]
    """Input value -> index of the subgraph that makes it (absent: a model input)."""

    @property
    def device(self) -> str:
        return self.pool.device

    @property
    def kind(self) -> str:
        return str(getattr(self.pool.program, "tensor_kind", "numpy"))


_DEFERRED = "in the reader's run"


def _nbytes(value: Any) -> int:
    return int(getattr(value, "nbytes", 0) or 0)


def _to_host(runner: SubgraphRunner, value: Any) -> Any:
    """``value`` as a numpy array, through the producer's ``to_host`` when it has one."""
    if isinstance(value, np.ndarray):
        return value
    to_host = getattr(runner.pool.program, "to_host", None)
    if to_host is not None:
        return to_host(value)
    try:
        return np.asarray(value)
    except (TypeError, ValueError, RuntimeError):
        return value  # e.g. a CUDA tensor: the reader's run converts it


def _convert(value: Any, source: SubgraphRunner, target: SubgraphRunner) -> tuple[Any, str]:
    """``value`` ready for ``target``, and how it moved (the counter's exec_type)."""
    if target.kind == "numpy":
        moved = _to_host(source, value)
        return moved, "to host" if isinstance(moved, np.ndarray) else _DEFERRED
    to_native = getattr(target.pool.program, "to_native", None)
    if to_native is not None:
        return to_native(value), "to device"
    return value, _DEFERRED


@dataclass
class _Travel:
    """What one request carries down the chain: its values, counters and moved tensors."""

    request: Request
    values: dict[str, Any]
    profiling: list[ProfilingRecord] = field(default_factory=list)
    moved: dict[tuple[str, str, str], Any] = field(default_factory=dict)

    def end(self, outcome: RunResult | BaseException) -> None:
        self.request.end(outcome)


class ChainRunner(Runner):
    """Runs the subgraphs of a :class:`HeteroPlan` as a chain (see the module docstring)."""

    def __init__(self, plan: HeteroPlan, runners: Sequence[SubgraphRunner],
                 outputs: Sequence[str], constants: Mapping[str, np.ndarray],
                 profiling: bool = False) -> None:
        self.plan = plan
        self.runners = tuple(runners)
        self.outputs = tuple(outputs)
        self.constants = dict(constants)
        self.profiling = profiling
        self._closed = False
        made = {sub.index: tuple(sub.outputs) for sub in getattr(plan, "subgraphs", ())}
        self._expected: dict[int, OutputSpec] = {
            r.index: tuple((name, False, None) for name in made.get(r.index, ())) for r in self.runners}
        """Per subgraph: the values its program's run must return (checked as a whole request's are)."""

    # --- Runner --------------------------------------------------------------

    @property
    def optimal_number_of_infer_requests(self) -> int:
        # One request per worker of every subgraph keeps each of them busy.
        return sum(r.pool.workers for r in self.runners)

    @property
    def execution_devices(self) -> list[str]:
        return list(dict.fromkeys(r.device for r in self.runners))

    def get_property(self, key: str) -> Any:
        if key == "HETERO_NUMBER_OF_SUBMODELS":
            return len(self.runners)
        if key == "HETERO_SUBGRAPHS":
            return self.plan
        if key == "PIPELINE_STAGES":
            return self.plan.stages
        if key == "EXECUTION_DEVICES":
            return self.execution_devices
        raise KeyError(key)

    def property_names(self) -> tuple[str, ...]:
        return ("HETERO_NUMBER_OF_SUBMODELS", "HETERO_SUBGRAPHS", "PIPELINE_STAGES", "EXECUTION_DEVICES")

    def run(self, request: Request) -> RunResult:
        travel = _Travel(request, dict(request.inputs))
        for runner in self.runners:
            try:
                result = runner.pool.run(self._feeds(runner, travel), request)
            except Exception as error:  # KeyboardInterrupt and SystemExit go through: the caller's to stop on
                raise as_inference_error(error, runner.device) from error
            self._collect(runner, travel, result)
        result = self._result(travel)
        if not request.succeed(result):  # a result that breaks the contract ends it with an error
            return request.future.result()
        return result

    def submit(self, request: Request) -> None:
        self._submit_from(0, _Travel(request, dict(request.inputs)))

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for runner in self.runners:
            runner.pool.close()

    # --- the chain -----------------------------------------------------------

    def _submit_from(self, position: int, travel: _Travel) -> None:
        try:
            if position == len(self.runners):
                travel.end(self._result(travel))
                return
            runner = self.runners[position]
            feeds = self._feeds(runner, travel)
            future = runner.pool.submit(feeds, travel.request)
            future.add_done_callback(lambda done: self._after(position, travel, done))
        except BaseException as error:  # noqa: BLE001 - ends the request instead of being lost
            travel.end(as_inference_error(error, self.runners[min(position, len(self.runners) - 1)].device))

    def _after(self, position: int, travel: _Travel, done: Outcome[RunResult]) -> None:
        error = done.exception()
        if error is not None:
            travel.end(error)
            return
        try:
            self._collect(self.runners[position], travel, done.result())
        except BaseException as failure:  # noqa: BLE001
            travel.end(as_inference_error(failure, self.runners[position].device))
            return
        self._submit_from(position + 1, travel)

    def _collect(self, runner: SubgraphRunner, request: _Travel, result: RunResult) -> None:
        error = broken_result(result, self._expected.get(runner.index, ()), arrays=False)
        if error is not None:  # a PluginError naming the device, not a TypeError from update()
            raise error
        request.values.update(result.outputs)
        if self.profiling:
            prefix = f"subgraph{runner.index}: "
            request.profiling.extend(r.with_prefix(prefix) for r in result.profiling)

    def _feeds(self, runner: SubgraphRunner, request: _Travel) -> dict[str, Any]:
        feeds: dict[str, Any] = {}
        for name in runner.inputs:
            value = request.values[name]
            source = runner.sources.get(name)
            if source is not None:
                value = self._move(name, value, self.runners[source], runner, request)
            feeds[name] = value
        return feeds

    def _move(self, name: str, value: Any, source: SubgraphRunner, target: SubgraphRunner,
              request: _Travel) -> Any:
        if source.device == target.device and source.kind == target.kind:
            return value
        if isinstance(value, np.ndarray) and target.kind == "numpy":
            return value  # the producer already brought it to the host (and counted it)
        key = (name, target.device, target.kind)
        if key in request.moved:
            return request.moved[key]
        start = time.perf_counter()
        moved, how = _convert(value, source, target)
        elapsed = datetime.timedelta(seconds=time.perf_counter() - start)
        request.moved[key] = moved
        if self.profiling and how != _DEFERRED:  # a deferred move is the reader plugin's to count
            request.profiling.append(ProfilingRecord(
                f"subgraph{target.index}: transfer {name} {source.device}->{target.device}",
                "Transfer", how, elapsed, elapsed, bytes=_nbytes(value)))
        return moved

    def _result(self, request: _Travel) -> RunResult:
        outputs: dict[str, Any] = {}
        producer = {n: r for r in self.runners for n in r.pool.keep_on_device}
        for name in self.outputs:
            if name in self.constants:
                outputs[name] = self.constants[name]
            elif name in producer:
                outputs[name] = _to_host(producer[name], request.values[name])
            else:
                outputs[name] = request.values[name]
        device = ",".join(self.execution_devices)
        return RunResult(outputs, request.profiling, device)
