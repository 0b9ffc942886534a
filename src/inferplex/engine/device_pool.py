"""One pool of worker threads per compiled device program.

A :class:`~inferplex.devices.base.DeviceProgram` has ``num_workers`` workers
(ONNX Runtime sessions, OpenVINO infer requests, CUDA streams) that may run at
once, each used by one thread at a time.  The pool hands worker indices out
through a queue: ``run`` takes one in the calling thread (no thread hop on the
synchronous path); ``submit`` queues the inputs for the pool's threads, which
take jobs first in, first out, and returns a ``Future``.  Nothing else happens
on these threads: a future's done-callbacks only queue the next step (the next
HETERO stage, a MULTI dispatcher event, a user callback on the compiled
model's completion executor).

The threads are daemon threads (see :mod:`inferplex.engine.lifecycle` for why
and how exit stays bounded) and end when the pool is closed.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Collection, Mapping
from concurrent.futures import InvalidStateError
from time import perf_counter
from typing import TYPE_CHECKING, Any

from inferplex.engine import lifecycle
from inferplex.engine.request import Outcome, RunResult
from inferplex.errors import InferenceError, InferplexError, PluginError

if TYPE_CHECKING:
    from inferplex.devices.base import DeviceProgram
    from inferplex.engine.request import Request

__all__ = ["DevicePool", "as_inference_error"]

_log = logging.getLogger("inferplex")


def as_inference_error(error: BaseException, device: str) -> BaseException:
    """``error`` as an inferplex error naming ``device`` (inferplex's own errors pass as they are)."""
    if isinstance(error, InferplexError):
        return error
    wrapped = InferenceError(f"inference failed on {device}: {type(error).__name__}: {error}")
    wrapped.__cause__ = error
    return wrapped


_Job = tuple[Mapping[str, Any], "Request | None", "threading.Lock | None", Outcome[RunResult], float]
"""A queued run: ``(inputs, request, exclusive lock, future, perf_counter when queued)``.  A plain
tuple: one is made per request, and a class's ``__init__`` would be a Python call on that path."""
_FUTURE = 3


class DevicePool:
    """Runs one compiled device program on its workers, synchronously or from a queue.

    ``threads``: how many jobs may run at once from the queue (default: the
    program's workers; MULTI gives a member ``NAME(n)`` requests).
    ``keep_on_device``: outputs left in the program's native tensors (HETERO).
    ``exit_timeout``: seconds past the slowest run seen after which a run still
    going at exit counts as hung.  ``label``: what its runs are called on the
    timeline (``"subgraph 1"`` in a HETERO chain).
    """

    def __init__(self, program: DeviceProgram, *, threads: int | None = None, profiling: bool = False,
                 keep_on_device: Collection[str] = (), exit_timeout: float | None = None,
                 label: str = "run") -> None:
        workers = _workers_of(program)
        self.program = program
        self.device: str = program.device
        self.workers = workers
        self.threads = max(1, int(threads or workers))
        self.profiling = profiling
        self.keep_on_device = tuple(keep_on_device)
        self.label = label
        self.exit_timeout = lifecycle.DEFAULT_EXIT_TIMEOUT if exit_timeout is None else float(exit_timeout)
        self.slowest = 0.0
        """Seconds of the slowest run seen (exit waits that long, plus ``exit_timeout``)."""
        self._free: queue.SimpleQueue[int] = queue.SimpleQueue()
        for index in range(workers):
            self._free.put(index)
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._running: dict[int, tuple[float, _Job]] = {}
        """Thread id -> (perf_counter when its run started, the job it runs)."""
        self._closed = False
        self._abandoned = False

    # --- running ---------------------------------------------------------------------

    def run(self, inputs: Mapping[str, Any], request: Request | None = None) -> RunResult:
        """Run one request in the calling thread on the first free worker."""
        if self._closed:
            raise InferenceError(f"the compiled model on {self.device} was released")
        if request is not None and request.timeline is not None:
            return self._run_traced(inputs, request)
        worker = self._free.get()
        begin = perf_counter()
        try:
            outputs = self.program.run(inputs, worker, self.keep_on_device)
        finally:
            self._free.put(worker)
        elapsed = perf_counter() - begin
        if elapsed > self.slowest:
            self.slowest = elapsed
        if not self.profiling:
            return RunResult(outputs, None, self.device)
        program = self.program  # read lazily: the counters are those of the last run on this worker
        return RunResult(outputs, lambda: program.profiling_info(worker), self.device)

    def _run_traced(self, inputs: Mapping[str, Any], request: Request) -> RunResult:
        """:meth:`run` for a request whose stages go on the timeline (ENABLE_TRACE)."""
        worker = self._free.get()
        if not self.program.trace_stages:
            self.program.trace_stages = True  # the model records a timeline: so do its runs
        begin = perf_counter()
        try:
            outputs = self.program.run(inputs, worker, self.keep_on_device)
            stages = self.program.stage_times(worker)
        finally:
            self._free.put(worker)
        end = perf_counter()
        self.slowest = max(self.slowest, end - begin)
        request.mark(self.label, self.device, begin, end, worker)
        for stage, stage_begin, stage_end in stages:
            request.mark(stage, self.device, stage_begin, stage_end, worker)
        if not self.profiling:
            return RunResult(outputs, None, self.device)
        program = self.program
        return RunResult(outputs, lambda: program.profiling_info(worker), self.device)

    def submit(self, inputs: Mapping[str, Any], request: Request | None = None,
               exclusive: threading.Lock | None = None,
               future: Outcome[RunResult] | None = None) -> Outcome[RunResult]:
        """Queue one run; the future ends with its RunResult or its error (never raised here).

        ``future``: the outcome to end (a whole request's, when this run is all of
        it: the device thread then ends the request itself); default a new one.
        """
        if future is None:
            future = Outcome()
        with self._lock:
            if self._closed:
                reason = "hung at exit" if self._abandoned else "was released"
                future.set_exception(InferenceError(f"the compiled model on {self.device} {reason}"))
                return future
            if len(self._threads) < self.threads:
                self._start_thread()
            self._jobs.put((inputs, request, exclusive, future, perf_counter()))
        return future

    def submit_request(self, request: Request) -> None:
        """Queue a whole request: the device thread ends it (:meth:`submit` with its future,
        spelled out: it is every single-device request's path)."""
        with self._lock:
            if self._closed:
                reason = "hung at exit" if self._abandoned else "was released"
                request.fail(InferenceError(f"the compiled model on {self.device} {reason}"))
                return
            if len(self._threads) < self.threads:
                self._start_thread()
            self._jobs.put((request.inputs, request, None, request.future, perf_counter()))

    def _start_thread(self) -> None:
        if not self._threads:
            lifecycle.watch(self)
        thread = threading.Thread(target=self._serve, daemon=True,
                                  name=f"inferplex-{self.device}-{len(self._threads)}")
        self._threads.append(thread)
        thread.start()

    def _serve(self) -> None:
        me = threading.get_ident()
        running = self._running  # set and popped without the lock: one key per thread, GIL-atomic
        take, run, device = self._jobs.get, self.run, self.device
        while (job := take()) is not None:
            started = perf_counter()
            running[me] = (started, job)
            if lifecycle.exiting:  # exit's wait looks again (nothing to tell before exit)
                lifecycle.progress()
            inputs, request, exclusive, future, queued = job
            if request is not None and request.timeline is not None:
                request.mark("queued", device, queued, started)
            outcome: RunResult | BaseException
            try:
                if exclusive is None:
                    outcome = run(inputs, request)
                else:
                    with exclusive:
                        outcome = run(inputs, request)
            except BaseException as error:  # noqa: BLE001 - handed to the future, never lost
                outcome = as_inference_error(error, device)
            del running[me]
            if request is not None and future is request.future:  # the whole request:
                if isinstance(outcome, BaseException):
                    request.fail(outcome)
                else:
                    request.succeed(outcome)  # ending it checks its result
            else:
                _settle(future, outcome)
            # An idle thread must not keep the last request (and its model) alive.
            del job, outcome, request, inputs, future
            if lifecycle.exiting:
                lifecycle.progress()

    # --- lifecycle -------------------------------------------------------------------

    def exit_deadline(self) -> float | None:
        running = list(self._running.values())  # one C-level copy: safe while threads add and pop
        if not running or self._abandoned:
            return None
        oldest = min(started for started, _job in running)
        # perf_counter and monotonic share no origin: convert through the time elapsed
        running_for = time.perf_counter() - oldest
        return time.monotonic() - running_for + self.slowest + self.exit_timeout

    def abandon(self) -> None:
        """End the running and queued jobs with an InferenceError naming the device (exit only)."""
        with self._lock:
            self._closed = self._abandoned = True
        running = list(self._running.values())
        waited = self.slowest + self.exit_timeout
        error = InferenceError(f"{self.device} gave no result within {waited:.1f} s at exit "
                               f"(the slowest run seen took {self.slowest:.2f} s; EXIT_TIMEOUT adds "
                               f"{self.exit_timeout:g} s); the device is left running")
        _log.warning("inferplex: %s", error)
        for _started, job in running:
            _settle(job[_FUTURE], error)  # type: ignore[arg-type]  # the tuple's future
        while True:
            try:
                job_or_stop = self._jobs.get_nowait()
            except queue.Empty:
                break
            if job_or_stop is not None:
                _settle(job_or_stop[_FUTURE], error)  # type: ignore[arg-type]

    def close(self) -> None:
        """Let queued jobs run, stop the threads, then close the program.  Idempotent.

        A run that goes on past the slowest run seen plus ``exit_timeout`` is left
        running (with its program open) and a warning is logged.
        """
        with self._lock:
            if self._closed and not self._threads:
                return
            self._closed = True
            threads, self._threads = self._threads, []
            for _ in threads:
                self._jobs.put(None)
        deadline = time.monotonic() + self.slowest + self.exit_timeout + 5.0
        current = threading.current_thread()
        for thread in threads:
            if thread is not current:
                thread.join(max(0.0, deadline - time.monotonic()))
        if any(thread.is_alive() and thread is not current for thread in threads) or self._abandoned:
            _log.warning("inferplex: %s still runs a request at release; its program is left open",
                         self.device)
            return
        try:
            self.program.close()
        except Exception:  # noqa: BLE001 - releasing must not fail the caller
            _log.exception("inferplex: closing the program on %s failed", self.device)


def _settle(future: Outcome[RunResult], outcome: RunResult | BaseException) -> None:
    """Complete ``future`` unless it already ended (a run abandoned at exit that came back late)."""
    try:
        if isinstance(outcome, BaseException):
            future.set_exception(outcome)
        else:
            future.set_result(outcome)
    except InvalidStateError:
        pass


def _workers_of(program: DeviceProgram) -> int:
    try:
        workers = int(program.num_workers)
    except (TypeError, ValueError) as error:
        raise PluginError(f"{type(program).__name__}.num_workers must be an int >= 1, "
                          f"got {getattr(program, 'num_workers', None)!r}") from error
    if workers < 1:
        raise PluginError(f"{type(program).__name__}.num_workers must be >= 1, got {workers}")
    return workers
