"""One inference request, from start to end, and the result it ends with.

A :class:`Request` carries an :class:`Outcome`, a lighter stand-in for
``concurrent.futures.Future`` with the same API (``done``, ``result``,
``exception``, ``add_done_callback``, ``set_result``, ``set_exception``): the one
place where "every started request ends exactly once, with a result or an
error" holds.  An outcome completes at most once, so a late result of an
abandoned attempt (a MULTI re-run after a timeout, a run abandoned at exit) is
dropped by :meth:`Request.succeed` / :meth:`Request.fail` returning False.

Why not a ``Future``: one is made per request and per device run, and a
``Future`` builds a ``Condition`` (an RLock and a waiter list) when made and
notifies it when set, microseconds per request that a tiny model's run does not
take.  An :class:`Outcome` takes one plain lock per transition and makes a
waiter lock only for a thread that actually waits.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import InvalidStateError
from concurrent.futures import TimeoutError as FutureTimeoutError
from time import perf_counter
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import numpy as np

from inferplex.errors import PluginError

if TYPE_CHECKING:
    from inferplex.devices.base import ProfilingRecord
    from inferplex.engine.trace import Timeline

OutputSpec = tuple[tuple[str, bool, Any], ...]
"""What a request's outputs must be: ``(output name, is a tensor, numpy dtype or None)`` per output
(values of other outputs, sequences or optionals, are only looked for)."""

__all__ = ["Outcome", "OutputSpec", "Request", "RunResult", "broken_result"]

_log = logging.getLogger("inferplex")
_T = TypeVar("_T")
_PENDING, _SUCCEEDED, _FAILED = 0, 1, 2


class Outcome(Generic[_T]):
    """What something ends with, once: a result or an error (``concurrent.futures.Future``'s API).

    Done-callbacks run on the thread that completes it (or at once, when added
    after), in the order added; an exception they raise is logged, as a
    ``Future`` logs it.  It cannot be cancelled (``cancel`` returns False).
    """

    __slots__ = ("_callbacks", "_error", "_lock", "_result", "_state", "_waiters")

    def __init__(self, callback: Callable[[Outcome[_T]], Any] | None = None) -> None:
        """``callback``: a first done-callback, as :meth:`add_done_callback` adds one."""
        self._state = _PENDING
        self._result: Any = None
        self._error: BaseException | None = None
        self._lock = threading.Lock()
        self._callbacks: list[Callable[[Outcome[_T]], Any]] | None = None if callback is None else [callback]
        self._waiters: list[threading.Lock] | None = None

    def done(self) -> bool:
        return self._state != _PENDING

    @staticmethod
    def cancelled() -> bool:
        return False

    @staticmethod
    def cancel() -> bool:
        return False

    def running(self) -> bool:
        return self._state == _PENDING

    def _wait(self, timeout: float | None) -> None:
        if self._state != _PENDING:
            return
        with self._lock:
            if self._state != _PENDING:
                return
            waiter = threading.Lock()
            waiter.acquire()
            if self._waiters is None:
                self._waiters = []
            self._waiters.append(waiter)
        if not waiter.acquire(timeout=-1 if timeout is None else max(0.0, timeout)):
            with self._lock:
                if self._state == _PENDING:
                    self._waiters.remove(waiter)
                    raise FutureTimeoutError()

    def result(self, timeout: float | None = None) -> _T:
        """The result, waiting up to ``timeout`` seconds; raises the error it ended with."""
        if self._state == _PENDING:
            self._wait(timeout)
        if self._error is not None:
            raise self._error
        return self._result

    def exception(self, timeout: float | None = None) -> BaseException | None:
        """The error it ended with (None after a result), waiting up to ``timeout`` seconds."""
        if self._state == _PENDING:
            self._wait(timeout)
        return self._error

    def settled(self) -> tuple[Any, BaseException | None]:
        """``(result, error)`` as it ended, without waiting (``(None, None)`` while pending): for a
        done-callback, which knows it has ended, one call instead of ``exception`` and ``result``."""
        return self._result, self._error

    def add_done_callback(self, callback: Callable[[Outcome[_T]], Any]) -> None:
        """``callback(self)`` once it is done: now if it already is."""
        if self._state == _PENDING:
            with self._lock:
                if self._state == _PENDING:
                    if self._callbacks is None:
                        self._callbacks = []
                    self._callbacks.append(callback)
                    return
        _call(callback, self)

    def set_result(self, result: _T) -> None:
        """End with ``result``; InvalidStateError if it already ended."""
        self._end(_SUCCEEDED, result, None)

    def set_exception(self, error: BaseException) -> None:
        """End with ``error``; InvalidStateError if it already ended."""
        self._end(_FAILED, None, error)

    def _end(self, state: int, result: Any, error: BaseException | None) -> None:
        with self._lock:
            if self._state != _PENDING:
                raise InvalidStateError(f"already ended: {self!r}")
            self._result, self._error = result, error
            self._state = state
            waiters, self._waiters = self._waiters, None
            callbacks, self._callbacks = self._callbacks, None
        if waiters:
            for waiter in waiters:
                waiter.release()
        if callbacks:
            for callback in callbacks:
                try:
                    callback(self)
                except Exception:  # noqa: BLE001 - as Future does: one callback must not stop the others
                    _log.exception("inferplex: a done-callback raised")

    def __repr__(self) -> str:
        state = ("pending", "succeeded", "failed")[self._state]
        return f"<Outcome {state}>"


def _call(callback: Callable[[Any], Any], outcome: Outcome[Any]) -> None:
    try:
        callback(outcome)
    except Exception:  # noqa: BLE001 - as Future does: one callback must not stop the others
        _log.exception("inferplex: a done-callback raised")



class RunResult:
    """Outputs of one request, with the counters and the device that produced them.

    ``profiling`` may be given as a zero-argument callable: it is called on first
    read only, so engines whose counters are costly to collect pay only when
    someone asks.
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

    def __repr__(self) -> str:
        return f"RunResult(outputs={sorted(self.outputs)}, device={self.device!r})"


def broken_result(result: RunResult, expected: OutputSpec, arrays: bool = True) -> PluginError | None:
    """The PluginError naming the device when ``result`` breaks the program contract, else None.

    A device program's ``run`` returns every model output by name, as an array
    of the output's element type.  A plugin that returns nothing, another
    mapping, a missing output, a non-array or another element type would
    otherwise reach the user as a ``TypeError`` or ``KeyError`` from deep inside
    the results, or as wrong data.  Shapes are not checked: a model's declared
    output shapes may be narrower than what it computes (ONNX Runtime only warns).
    ``arrays=False`` checks the mapping and the names only: values a HETERO
    subgraph hands to the next one may be a device's native tensors of any type.
    """
    outputs = result.outputs
    if type(outputs) is dict and arrays and _conforms(outputs, expected):
        return None  # the common case, in one pass: each output an array of its dtype
    device = result.device or "the device"
    if not isinstance(outputs, Mapping):
        return PluginError(f"{device} broke the device program contract: its run returned "
                           f"{type(outputs).__name__}; it must return a dict of output name to array")
    problems = []
    for name, tensor, dtype in expected:
        value = outputs.get(name, _MISSING)
        if value is _MISSING:
            problems.append(f"output {name!r} is missing (it returned {sorted(map(str, outputs))})")
        elif not (arrays and tensor):
            continue
        elif type(value) is np.ndarray:
            strings = dtype is not None and dtype.kind in "OSU" and value.dtype.kind in "OSU"
            if dtype is not None and value.dtype != dtype and not strings:
                problems.append(f"output {name!r} is {value.dtype}, the model says {dtype}")
        elif not (hasattr(value, "shape") and hasattr(value, "dtype")):
            problems.append(f"output {name!r} is a {type(value).__name__}, not an array")
    if not problems:
        return None
    return PluginError(f"{device} broke the device program contract: {'; '.join(problems)}")


_MISSING = object()


def _conforms(outputs: dict[str, Any], expected: OutputSpec) -> bool:
    """Whether every expected output is there, each tensor output a numpy array of its dtype
    (strings of any string kind); False sends :func:`broken_result` the long way, which names
    what is wrong."""
    for name, tensor, dtype in expected:
        value = outputs.get(name, _MISSING)
        if value is _MISSING:
            return False
        if tensor and not (type(value) is np.ndarray and (dtype is None or value.dtype == dtype)):
            return False
    return True


class Request:
    """One request of a compiled model: its inputs and the future it ends through."""

    __slots__ = ("attempt", "expected", "failures", "future", "inputs", "started", "timeline", "trace_number")

    def __init__(self, inputs: Mapping[str, Any], timeline: Timeline | None = None,
                 expected: OutputSpec | None = None,
                 on_end: Callable[[Outcome[RunResult]], Any] | None = None) -> None:
        self.inputs = inputs
        """Model inputs by name, already checked against the model's ports."""
        self.future: Outcome[RunResult] = Outcome(on_end)
        """Completes exactly once: with a :class:`RunResult` or the error the request ended with
        (``on_end``: its first done-callback)."""
        self.attempt = 0
        """Runs started so far (MULTI re-runs a failed request on another device)."""
        self.failures: list[tuple[str, BaseException]] = []
        """(device, error) of each failed attempt, in order."""
        self.started = perf_counter()
        self.timeline = timeline
        """Where the request's stages are recorded (None: tracing is off)."""
        self.trace_number = -1 if timeline is None else timeline.number()
        """The request's number on the timeline (-1 when tracing is off)."""
        self.expected = expected
        """What its result's outputs must be (:func:`broken_result`); None: not checked."""

    @property
    def done(self) -> bool:
        return self.future.done()

    def broken(self, result: RunResult) -> PluginError | None:
        """The error ``result`` breaks the device program contract with, if it does."""
        return None if self.expected is None else broken_result(result, self.expected)

    def succeed(self, result: RunResult) -> bool:
        """End with ``result``; False if the request had already ended, or if ``result`` breaks
        the device program contract (the request then ends with a PluginError naming the device)."""
        expected = self.expected
        if expected is not None:
            outputs = result.outputs
            if type(outputs) is not dict or not _conforms(outputs, expected):
                error = broken_result(result, expected)  # names what is wrong
                if error is not None:
                    self.fail(error)
                    return False
        try:
            self.future._end(_SUCCEEDED, result, None)
        except InvalidStateError:
            return False
        return True

    def fail(self, error: BaseException) -> bool:
        """End with ``error``; False (and nothing happens) if the request had already ended."""
        try:
            self.future._end(_FAILED, None, error)
        except InvalidStateError:
            return False
        return True

    def end(self, outcome: RunResult | BaseException) -> bool:
        """End with a result or an error, whichever ``outcome`` is."""
        if isinstance(outcome, BaseException):
            return self.fail(outcome)
        return self.succeed(outcome)

    def mark(self, stage: str, device: str, begin: float, end: float | None = None,
             worker: int | None = None) -> None:
        """Record one stage on the timeline, when tracing is on (free otherwise)."""
        if self.timeline is not None:
            self.timeline.record(self, stage, device, begin, end, worker)
