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

import atexit
import logging
import queue
import threading
import time
import weakref
from abc import ABC, abstractmethod
from collections.abc import Callable, Collection, Mapping
from typing import Any

from inferplex.devices.base import DeviceProgram, ProfilingRecord
from inferplex.errors import PropertyError

__all__ = ["Done", "Executor", "ProgramExecutor", "RunResult", "finish", "wait_running_queued"]

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

        Completion callbacks run on executors' worker threads.  A callback that
        waits for another request would hold up the worker that request may need,
        so on a :class:`ProgramExecutor`'s thread the wait runs that executor's
        queued requests meanwhile (MULTI's scheduler does the same for its own).
        """
        pool: ProgramExecutor | None = getattr(_pool_thread, "executor", None)
        if pool is None:
            return event.wait(timeout)
        return pool.help_until(event, timeout)

    def get_property(self, key: str) -> Any:
        """An executor-specific read-only property; ``KeyError`` when unknown."""
        raise KeyError(key)

    def property_names(self) -> tuple[str, ...]:
        """The keys :meth:`get_property` answers."""
        return ()

    def set_property(self, properties: Mapping[str, Any]) -> None:
        """Change properties of a compiled model; only some executors accept any."""
        raise PropertyError(
            f"properties {sorted(properties)} cannot be changed after compilation on "
            f"{', '.join(self.execution_devices)}")

    def close(self) -> None:  # noqa: B027 - optional hook: most executors have nothing to release
        """Stop worker threads and release devices.  Idempotent."""


_pool_thread = threading.local()
"""``executor``: the :class:`ProgramExecutor` whose pool thread this is (unset elsewhere)."""

_POLL = 0.002
"""Seconds between looks at a waited-for event while a pool thread runs queued requests."""


class ProgramExecutor(Executor):
    """A device program with ``program.num_workers`` workers and a FIFO queue.

    ``run`` uses a free worker in the calling thread (no thread hop on the sync
    path); ``submit`` queues the request for a pool of as many threads, started
    on first use, which take requests first-in, first-out.  A worker index is
    held by one thread at a time.
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
        self._jobs: queue.SimpleQueue[tuple[Mapping[str, Any], Done] | None] = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        self._pool_lock = threading.Lock()
        self._in_flight = 0
        """Requests submitted and not yet ended (their ``done`` has not returned)."""

    @property
    def optimal_number_of_infer_requests(self) -> int:
        return self._workers

    @property
    def execution_devices(self) -> list[str]:
        return [self.program.device]

    def get_property(self, key: str) -> Any:
        try:
            return self.program.get_property(key)
        except PropertyError as error:  # not the program's: the compiled model's settings may have it
            raise KeyError(key) from error

    def property_names(self) -> tuple[str, ...]:
        return tuple(self.program.property_names())

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
        with self._pool_lock:
            if not self._threads:
                self._threads = [threading.Thread(target=self._serve, daemon=True,
                                                  name=f"inferplex-{self.program.device}-{index}")
                                 for index in range(self._workers)]
                for thread in self._threads:
                    thread.start()
                _live_pools.add(self)
            self._in_flight += 1
            self._jobs.put((inputs, done))

    def _serve(self) -> None:
        _pool_thread.executor = self
        while (job := self._jobs.get()) is not None:
            self._run_and_finish(*job)

    def help_until(self, event: threading.Event, timeout: float | None = None) -> bool:
        """Wait for ``event`` on one of this pool's threads, running queued requests meanwhile."""
        return wait_running_queued(event, timeout, self._jobs, lambda job: self._run_and_finish(*job))

    def _run_and_finish(self, inputs: Mapping[str, Any], done: Done) -> None:
        try:
            result = self.run(inputs)
        except BaseException as error:  # noqa: BLE001 - handed to the request, not lost
            finish(done, error)
        else:
            finish(done, result)
        finally:
            with self._pool_lock:  # after ``done``, which may have queued the next step elsewhere
                self._in_flight -= 1

    def close(self) -> None:
        self._stop_threads()
        self.program.close()

    def _stop_threads(self) -> None:
        """End the pool's threads once every request queued so far has run."""
        with self._pool_lock:
            threads, self._threads = self._threads, []
            for _ in threads:
                self._jobs.put(None)
        current = threading.current_thread()
        for thread in threads:
            if thread is not current:  # a callback may close the model it runs for
                thread.join()


def wait_running_queued(event: threading.Event, timeout: float | None, jobs: queue.SimpleQueue[Any],
                        run: Callable[[Any], object]) -> bool:
    """Wait for ``event`` (or ``timeout`` seconds) on a worker thread, running what reaches ``jobs``.

    ``None`` in ``jobs`` asks the thread to stop: it goes back for the thread's own
    loop, and the wait goes on without running more.  True when ``event`` is set.
    """
    deadline = None if timeout is None else time.monotonic() + timeout
    while not event.is_set():
        left = None if deadline is None else deadline - time.monotonic()
        if left is not None and left <= 0:
            return False
        try:  # nothing wakes this thread when the event is set elsewhere: look again soon
            job = jobs.get(timeout=_POLL if left is None else min(_POLL, left))
        except queue.Empty:
            continue
        if job is None:
            jobs.put(None)
            return event.wait(left)
        run(job)
    return True


_live_pools: weakref.WeakSet[ProgramExecutor] = weakref.WeakSet()


@atexit.register
def _drain_pools() -> None:
    """At interpreter exit, before daemon threads stop: every queued request still runs and ends.

    A request's end may queue its next step on another pool (HETERO's and
    PIPELINE_PARALLEL's subgraphs), so the threads stop only once no pool has a
    request in flight: no thread is stopped inside ONNX Runtime or torch (that
    aborts the interpreter) and no request is left half done.  (Stopping one
    pool while another still queued steps on it restarted its threads beside
    the stopping ones, which could take each other's stop signals.)
    """
    pools = list(_live_pools)
    while any(executor._in_flight for executor in pools):
        time.sleep(_POLL)
        pools = list(_live_pools)
    for executor in pools:
        executor._stop_threads()
