"""AsyncInferQueue: a pool of requests fed by ``start_async`` (OpenVINO's Python helper).

``start_async`` takes an idle job, waiting while every job is busy.  A job is
idle again only once its callback has returned, so that nothing overwrites the
results the callback reads.  Waiting is therefore never done on a thread that
is running a completion callback (of this queue or any other request): there a
job that finds no idle job is queued, with its inputs copied, and starts on the
first job that becomes idle, before any later ``start_async``.  Waiting there
could wait for the callback itself (one job, or every job's callback feeding the
queue) and would hold a device worker meanwhile.

At most :data:`QUEUED_PER_JOB` jobs per job of the queue wait that way: a
callback that starts more jobs than end (each result fanning out into two, say)
would otherwise grow the queue, and the input copies it holds, without end.
``start_async`` past that raises :class:`~inferplex.errors.RequestBusyError` in
the callback, and the job is not started.

``wait_all`` inside one of this queue's callbacks, and ``get_idle_request_id``
where every busy job is a callback waiting the same way, raise
:class:`~inferplex.errors.RequestBusyError` instead of hanging.

An exception a callback raises never stalls the queue: every job still ends and
its job becomes idle.  As in OpenVINO, the first such exception is raised as it
is by the next ``start_async`` (which then starts nothing), ``get_idle_request_id``,
``is_ready`` or ``wait_all`` called outside the callbacks; it is raised once (a
second raise aborts OpenVINO's process), and later ones are dropped until then.
Each job's userdata is the queue's (``queue.userdata``), not its request's.
"""

from __future__ import annotations

import logging
import operator
import threading
from collections import deque
from collections.abc import Callable
from typing import Any

from inferplex._binding import check_inputs, convert_input, copy_value, keyed_inputs, port_dims
from inferplex._compiled_model import CompiledModel
from inferplex._infer_request import InferRequest
from inferplex.api.keywords import keyword_aliases
from inferplex.engine.completions import blocking, on_completion_thread
from inferplex.errors import PropertyError, RequestBusyError

__all__ = ["AsyncInferQueue"]

_log = logging.getLogger("inferplex")

QUEUED_PER_JOB = 64
"""Jobs started inside callbacks that may wait for an idle job, per job of the queue."""


class AsyncInferQueue:
    """A pool of requests: ``start_async`` takes an idle one (waiting if none is idle)."""

    @keyword_aliases(model="compiled")
    def __init__(self, compiled: CompiledModel, jobs: int = 0) -> None:
        try:
            wanted = -1 if isinstance(jobs, bool) else operator.index(jobs)  # ints, numpy ints
        except TypeError:
            wanted = -1
        if wanted < 0:
            raise PropertyError("AsyncInferQueue jobs must be an int >= 0 "
                                f"(0 = OPTIMAL_NUMBER_OF_INFER_REQUESTS), got {jobs!r}")
        count = wanted or max(1, int(compiled.get_property("OPTIMAL_NUMBER_OF_INFER_REQUESTS")))
        self._requests = [compiled.create_infer_request() for _ in range(count)]
        self._ports = compiled.inputs
        self._idle: list[int] = list(range(count))
        self._queued: deque[tuple[dict[int, Any], Any]] = deque()  # (staged inputs, userdata)
        self._index = {id(request): index for index, request in enumerate(self._requests)}
        self._lock = threading.Lock()
        self._waiters: list[threading.Lock] = []  # one parked lock per waiting thread (see _wait_for)
        self._callback: Callable[[InferRequest, Any], None] | None = None
        self._in_callback = threading.local()  # .active: this thread runs one of our callbacks
        self._callbacks_waiting = 0  # our callbacks blocked in get_idle_request_id
        self._callback_error: Exception | None = None  # the first a callback raised: raised once
        self._userdata: list[Any] = [None] * count  # each job's last userdata, as its callback gets it
        for request in self._requests:
            request._completion_hook = self._on_done
            request.set_callback(None)

    def set_callback(self, callback: Callable[[InferRequest, Any], None] | None) -> None:
        """``callback(request, userdata)`` runs when each job ends (also on failure)."""
        self._callback = callback

    def _on_done(self, request: InferRequest) -> None:
        index = self._index[id(request)]
        callback = self._callback
        if callback is not None:
            self._in_callback.active = True
            try:
                callback(request, self._userdata[index])
            except Exception as error:  # noqa: BLE001 - must not stall the queue; raised later, once
                _log.debug("inferplex: an AsyncInferQueue callback raised", exc_info=True)
                with self._lock:
                    if self._callback_error is None:
                        self._callback_error = error
            finally:
                self._in_callback.active = False
        while True:
            with self._lock:
                if not self._queued:
                    self._idle.append(index)
                    if self._waiters:
                        self._wake_all()
                    return
                staged, userdata = self._queued.popleft()
                self._userdata[index] = userdata
            try:  # checked when queued: placing it fails only on what the check cannot see
                bound = request._tensors.bind(staged, share=True)
            except Exception:  # noqa: BLE001 - must not reach the thread delivering this callback
                _log.exception("inferplex: a queued AsyncInferQueue job was refused and dropped")
                continue
            break
        # A queued job takes this request at once; it ends exactly once, through _on_done,
        # even if its submit fails (which must not reach the thread delivering this callback).
        try:
            request._start_bound(bound)
        except Exception:  # noqa: BLE001 - already ended with this error
            _log.debug("inferplex: a queued AsyncInferQueue job failed to start", exc_info=True)

    def start_async(self, inputs: Any = None, userdata: Any = None, share_inputs: bool = False) -> None:
        """Start a job on an idle request (blocks while all are busy, except in a callback).

        ``inputs`` are placed in that request's tensors as :meth:`InferRequest.infer`
        places them (``share_inputs`` likewise); inputs not given read the tensors
        the request holds, those set with ``queue[i].set_tensor`` included.

        On a thread running a completion callback a job that finds no idle
        request is queued with its inputs copied, and starts when one is idle.
        Elsewhere it first raises what a callback raised, if one did (see the module docstring).
        """
        with self._lock:
            if self._idle:
                index: int | None = self._idle.pop(0)
            elif on_completion_thread():
                index = None
            else:
                while not self._idle:
                    self._wait_for(None)
                index = self._idle.pop(0)
            if index is not None and self._callback_error is not None and not on_completion_thread():
                self._idle.insert(0, index)  # OpenVINO raises it after taking an idle job, then starts none
                self._raise_callback_error()
        staged = None
        if index is None:
            staged = self._staged(inputs)
            with self._lock:
                if not self._idle:
                    limit = QUEUED_PER_JOB * len(self._requests)
                    if len(self._queued) >= limit:
                        raise RequestBusyError(
                            f"start_async() inside a callback found no idle job and {limit} jobs already "
                            f"waiting for one ({QUEUED_PER_JOB} per job of this AsyncInferQueue); the job "
                            "was not started. Start fewer jobs from callbacks than end, or start them "
                            "outside the callbacks (there start_async waits for an idle job)")
                    self._queued.append((staged, userdata))
                    return
                index = self._idle.pop(0)  # one became idle meanwhile
        request = self._requests[index]
        try:
            bound = request._tensors.bind(staged, share=True) if staged is not None \
                else request._bind(inputs, share_inputs)
        except BaseException:
            with self._lock:  # rejected before it started: the request is idle again
                self._idle.append(index)
                if self._waiters:
                    self._wake_all()
            raise
        # From here the request ends exactly once, through _on_done, even if submit fails.
        self._userdata[index] = userdata
        request._start_bound(bound)

    def _staged(self, inputs: Any) -> dict[int, Any]:
        """Copies of a queued job's inputs, checked now: the job starts later, on whichever
        request is idle first, so it must carry every input that request cannot supply
        (a dynamic one); static inputs not given read that request's tensors."""
        staged = {i: copy_value(convert_input(self._ports[i], value))
                  for i, value in keyed_inputs(self._ports, inputs).items()}
        needed = {p.index for p in self._ports
                  if p.index not in staged and (port_dims(p) is None or not p.is_tensor or any(
                      not isinstance(d, int) for d in port_dims(p) or ()))}
        check_inputs([p for p in self._ports if p.index in staged or p.index in needed], staged)
        return staged

    def is_ready(self) -> bool:
        """Whether a job is idle; first raises what a callback raised, if one did."""
        with self._lock:
            if not getattr(self._in_callback, "active", False):
                self._raise_callback_error()
            return bool(self._idle)

    def get_idle_request_id(self) -> int:
        """The index of an idle job, waiting while all are busy; then raises what a callback
        raised, if one did (as OpenVINO does)."""
        with self._lock:
            if self._idle or not getattr(self._in_callback, "active", False):
                self._wait_for(lambda: bool(self._idle))
                if not getattr(self._in_callback, "active", False):
                    self._raise_callback_error()
                return self._idle[0]
            self._callbacks_waiting += 1
            self._wake_all()  # the others recheck whether everyone now waits
            try:
                while not self._idle:
                    if self._callbacks_waiting >= len(self._requests):
                        raise RequestBusyError(
                            "get_idle_request_id() was called inside this AsyncInferQueue's callbacks "
                            f"while all {len(self._requests)} jobs were in callbacks waiting for an "
                            "idle job; a job is idle only once its callback returns. Use start_async "
                            "inside callbacks (it queues the job), or more jobs")
                    self._wait_for(None)
                return self._idle[0]
            finally:
                self._callbacks_waiting -= 1

    def wait_all(self) -> None:
        """Wait until every job, queued ones included, has ended and run its callback.

        The first exception a callback raised and not raised yet is raised here, as OpenVINO's
        AsyncInferQueue raises it (the other jobs still ran)."""
        if getattr(self._in_callback, "active", False):
            raise RequestBusyError("wait_all() was called inside this AsyncInferQueue's callback: the "
                                   "job running it is idle only once the callback returns, so the "
                                   "wait would never end; call wait_all() outside the callbacks")
        with self._lock:
            self._wait_for(lambda: len(self._idle) == len(self._requests) and not self._queued)
            self._raise_callback_error()

    def _raise_callback_error(self) -> None:
        """With the lock held: raise the first exception a callback raised, once."""
        error, self._callback_error = self._callback_error, None
        if error is not None:
            raise error

    def _wait_for(self, ready: Callable[[], bool] | None) -> None:
        """With the lock held: wait until ``ready()`` (None: one wake-up), the lock released meanwhile.

        ``threading.Condition`` would do, but its methods are Python code on the path of every
        request that finds the queue full; a waiter parks on a lock of its own instead, which
        :meth:`_wake_all` releases (as :class:`~inferplex.engine.latch.Latch` does).
        """
        while ready is None or not ready():
            waiter = threading.Lock()
            waiter.acquire()
            self._waiters.append(waiter)
            self._lock.release()
            try:
                if on_completion_thread():
                    with blocking():
                        waiter.acquire()
                else:
                    waiter.acquire()
            finally:
                self._lock.acquire()
            if ready is None:
                return

    def _wake_all(self) -> None:
        """With the lock held: wake every thread in :meth:`_wait_for`."""
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            waiter.release()

    def __len__(self) -> int:
        return len(self._requests)

    def __repr__(self) -> str:
        return f"<AsyncInferQueue: {len(self._requests)} jobs>"

    def __getitem__(self, index: int) -> InferRequest:
        return self._requests[index]

    def __iter__(self) -> Any:
        return iter(self._requests)

    @property
    def userdata(self) -> list[Any]:
        """Each job's last userdata (None where none was given yet), in job order."""
        with self._lock:
            return list(self._userdata)
