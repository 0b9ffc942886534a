"""Executors: what a CompiledModel runs its requests on.

An :class:`Executor` takes whole inference requests, synchronously (``run``) or
asynchronously (``submit``, whose ``done`` callback is called exactly once, with
a :class:`RunResult` or the exception).  Every compiled model has one:

- :class:`ProgramExecutor`: one :class:`~inferplex.devices.base.DeviceProgram`
  with a pool of workers and a first-in, first-out queue;
- HETERO's chain of subgraph executors (``inferplex.hetero``);
- MULTI's scheduler over several device executors and AUTO's selection
  (``inferplex.multi``).

Inputs reaching an executor are already checked against the model's ports by
the runtime (names, ranks, shapes, dtypes).
"""

from __future__ import annotations

import logging
import queue
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Collection, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from inferplex.devices.base import DeviceProgram, ProfilingRecord
from inferplex.errors import PropertyError

__all__ = ["Done", "Executor", "ProgramExecutor", "RunResult", "finish"]

_log = logging.getLogger("inferplex")


class RunResult:
    """Outputs of one request, with the counters and the device that produced them.

    ``profiling`` may be given as a zero-argument callable: it is called on first
    read only, so engines whose counters are costly to collect (ONNX Runtime ends
    its profiler to report) pay only when someone asks.
    """

    __slots__ = ("_profiling", "device", "outputs")

    def __init__(self, outputs: dict[str, Any],
                 profiling: list[ProfilingRecord] | Callable[[], list[ProfilingRecord]] | None = None,
                 device: str = "") -> None:
        self.outputs = outputs
        """Every model output by name (numpy arrays unless kept on a device)."""
        self.device = device
        """Device that ran the request (for MULTI/AUTO: the one chosen)."""
        self._profiling = profiling if profiling is not None else []

    @property
    def profiling(self) -> list[ProfilingRecord]:
        """Per-op counters of this request (empty unless ENABLE_PROFILING)."""
        if callable(self._profiling):
            self._profiling = list(self._profiling())
        return list(self._profiling)

    @profiling.setter
    def profiling(self, records: list[ProfilingRecord]) -> None:
        self._profiling = records

    def __repr__(self) -> str:
        return f"RunResult(outputs={sorted(self.outputs)}, device={self.device!r})"


Done = Callable[["RunResult | BaseException"], None]


def finish(done: Done, outcome: RunResult | BaseException) -> None:
    """Call ``done`` once; an exception raised by it is logged, never propagated.

    Completion callbacks run on worker threads: an exception escaping one would
    kill the worker and strand every request queued behind it.
    """
    try:
        done(outcome)
    except BaseException:  # noqa: BLE001 - a user callback must not stop the pool
        _log.exception("inferplex: a completion callback raised; the request is complete anyway")


class Executor(ABC):
    """Runs whole requests of one compiled model."""

    @abstractmethod
    def run(self, inputs: Mapping[str, Any]) -> RunResult:
        """Run one request in the calling thread (or block until it is done)."""

    @abstractmethod
    def submit(self, inputs: Mapping[str, Any], done: Done) -> None:
        """Start one request; ``done`` is called exactly once, from any thread."""

    @property
    @abstractmethod
    def optimal_number_of_infer_requests(self) -> int:
        """Requests worth keeping in flight to keep every worker busy."""

    @property
    @abstractmethod
    def execution_devices(self) -> list[str]:
        """Devices this executor runs on now."""

    def wait(self, event: threading.Event, timeout: float | None = None) -> bool:
        """Block until ``event`` is set (a request of this model ended), or ``timeout`` seconds.

        Executors whose worker threads run completion callbacks override it, so that
        a callback waiting for another request does not hold up the worker it needs.
        """
        return event.wait(timeout)

    def get_property(self, key: str) -> Any:
        """An executor-specific read-only property; ``KeyError`` when unknown."""
        raise KeyError(key)

    def set_property(self, properties: Mapping[str, Any]) -> None:
        """Change properties of a compiled model; only some executors accept any."""
        raise PropertyError(
            f"properties {sorted(properties)} cannot be changed after compilation on "
            f"{', '.join(self.execution_devices)}")

    def close(self) -> None:  # noqa: B027 - optional hook: most executors have nothing to release
        """Stop worker threads and release devices.  Idempotent."""


class ProgramExecutor(Executor):
    """A device program with ``program.num_workers`` workers and a FIFO queue.

    ``run`` uses a free worker in the calling thread (no thread hop on the sync
    path); ``submit`` queues the request on a thread pool of the same size, whose
    queue is first-in, first-out.  A worker index is held by one thread at a time.
    """

    def __init__(self, program: DeviceProgram, keep_on_device: Collection[str] = (),
                 profiling: bool = False) -> None:
        workers = int(program.num_workers)
        if workers < 1:
            from inferplex.errors import PluginError

            raise PluginError(f"{type(program).__name__}.num_workers must be >= 1, got {workers}")
        self.program = program
        self.keep_on_device = tuple(keep_on_device)
        self.profiling = profiling
        self._workers = workers
        self._free: queue.SimpleQueue[int] = queue.SimpleQueue()
        for index in range(workers):
            self._free.put(index)
        self._pool: ThreadPoolExecutor | None = None
        self._pool_lock = threading.Lock()

    @property
    def optimal_number_of_infer_requests(self) -> int:
        return self._workers

    @property
    def execution_devices(self) -> list[str]:
        return [self.program.device]

    def get_property(self, key: str) -> Any:
        return self.program.get_property(key)

    def run(self, inputs: Mapping[str, Any]) -> RunResult:
        worker = self._free.get()
        try:
            outputs = self.program.run(inputs, worker, self.keep_on_device)
        finally:
            self._free.put(worker)
        if not self.profiling:
            return RunResult(outputs, None, self.program.device)
        program = self.program
        # Read lazily: the counters are those of the last run on this worker.
        return RunResult(outputs, lambda: program.profiling_info(worker), program.device)

    def submit(self, inputs: Mapping[str, Any], done: Done) -> None:
        self._thread_pool().submit(self._run_and_finish, inputs, done)

    def _run_and_finish(self, inputs: Mapping[str, Any], done: Done) -> None:
        try:
            result = self.run(inputs)
        except BaseException as error:  # noqa: BLE001 - handed to the request, not lost
            finish(done, error)
        else:
            finish(done, result)

    def _thread_pool(self) -> ThreadPoolExecutor:
        with self._pool_lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self._workers,
                                                thread_name_prefix=f"inferplex-{self.program.device}")
            return self._pool

    def close(self) -> None:
        with self._pool_lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True)
        self.program.close()
