"""Per-op profiling of a GPU program's runs (``ENABLE_PROFILING``).

A profiled run goes node by node through a :class:`TimingInterpreter` (CUDA
events on a GPU, ``perf_counter`` on the emulated one) instead of the compiled
forward or its CUDA graph, and records, as OpenVINO's performance counters do,
one :class:`~inferplex.devices.base.ProfilingRecord` per ONNX node, one per
direction of host transfer (with its bytes), and a ``NOT_RUN`` record per node
folded into constants at compile time.
"""

from __future__ import annotations

import datetime
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
import torch.fx

from inferplex.devices.base import ProfilingRecord

if TYPE_CHECKING:
    from inferplex.devices.gpu.lower import LoweredGraph
    from inferplex.devices.gpu.workers import WorkerState

__all__ = ["StageClock", "TimingInterpreter", "op_records", "run_profiled", "transfer_record"]


class TimingInterpreter(torch.fx.Interpreter):
    """Runs the GraphModule node by node and times each ONNX node (CUDA events or perf_counter)."""

    def __init__(self, module: torch.fx.GraphModule, cuda: bool):
        super().__init__(module)
        self.cuda = cuda
        self.marks: list[tuple[str, str, Any, Any]] = []

    def run_node(self, n: torch.fx.Node) -> Any:
        name = n.meta.get("onnx_name")
        if n.op != "call_function" or name is None:
            return super().run_node(n)
        start: torch.cuda.Event | float
        end: torch.cuda.Event | float
        if self.cuda:
            start = torch.cuda.Event(enable_timing=True)
            start.record()
        else:
            start = time.perf_counter()
        result = super().run_node(n)
        if self.cuda:
            end = torch.cuda.Event(enable_timing=True)
            end.record()
        else:
            end = time.perf_counter()
        self.marks.append((name, n.meta.get("onnx_op", ""), start, end))
        return result

    def seconds(self) -> dict[tuple[str, str], float]:
        """Seconds per (ONNX node name, op type), in first-run order (call after synchronising)."""
        totals: dict[tuple[str, str], float] = {}
        for name, op, start, end in self.marks:
            elapsed = start.elapsed_time(end) / 1000.0 if self.cuda else end - start
            totals[(name, op)] = totals.get((name, op), 0.0) + elapsed
        return totals


def _delta(seconds: float) -> datetime.timedelta:
    return datetime.timedelta(seconds=seconds)


def transfer_record(source: str, target: str, since: float, moved: int) -> ProfilingRecord:
    """The record of one run's copies from ``source`` to ``target``, begun at ``since`` (perf_counter)."""
    elapsed = _delta(time.perf_counter() - since)
    return ProfilingRecord(f"transfer {source}->{target}", "Transfer", "copy", elapsed, elapsed, bytes=moved)


def op_records(interpreter: TimingInterpreter, kind: str,
               folded: Sequence[tuple[str, str]]) -> list[ProfilingRecord]:
    """One record per node the interpreter ran (after synchronising), then per folded node."""
    records = [ProfilingRecord(name, op, kind, _delta(seconds), _delta(seconds))
               for (name, op), seconds in interpreter.seconds().items()]
    records += [ProfilingRecord(name, op, "constant folded", _delta(0), _delta(0), "NOT_RUN")
                for name, op in folded]
    return records


def run_profiled(state: WorkerState, lowered: LoweredGraph, values: list[Any],
                 move_inputs: Callable[[], list[Any]], device: str,
                 torch_device: torch.device) -> Sequence[torch.Tensor]:
    """One profiled run of ``lowered`` on a worker: its inputs moved by ``move_inputs`` (timed as
    one transfer record with the host bytes of ``values``), then node by node through a
    :class:`TimingInterpreter`; the worker's records are this run's."""
    cuda = torch_device.type == "cuda"
    start = time.perf_counter()
    tensors = move_inputs()
    if cuda:
        state.stream.synchronize()
    moved = sum(v.nbytes if isinstance(v, np.ndarray) else 0 for v in values)
    state.records = [transfer_record("CPU", device, start, moved)]
    interpreter = TimingInterpreter(lowered.module, cuda)
    outputs = interpreter.run(*tensors)
    if cuda:
        state.stream.synchronize()
    state.records += op_records(interpreter, f"torch.{torch_device.type}", lowered.folded_nodes)
    return outputs


class StageClock:
    """Times one run's stages one after another, for the timeline (``trace_stages``).

    Each :meth:`mark` ends the stage begun at the previous one (or at the clock's
    making); on CUDA it first waits for the worker's stream, so that a stage's
    time is its own work on the device and not the host's queueing of it.
    """

    def __init__(self, state: WorkerState, cuda: bool) -> None:
        self._state = state
        self._synchronize = state.stream.synchronize if cuda else None
        state.stages = []
        self._last = time.perf_counter()

    def mark(self, stage: str) -> None:
        if self._synchronize is not None:
            self._synchronize()
        now = time.perf_counter()
        self._state.stages.append((stage, self._last, now))
        self._last = now
