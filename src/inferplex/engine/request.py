"""One inference request, from start to end, and the result it ends with.

A :class:`Request` carries a ``concurrent.futures.Future``: the one place where
"every started request ends exactly once, with a result or an error" holds.
A future completes at most once, so a late result of an abandoned attempt (a
MULTI re-run after a timeout, a run abandoned at exit) is dropped by
:meth:`Request.succeed` / :meth:`Request.fail` returning False.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future, InvalidStateError
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from inferplex.devices.base import ProfilingRecord
    from inferplex.engine.trace import Timeline

__all__ = ["Request", "RunResult"]


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


class Request:
    """One request of a compiled model: its inputs and the future it ends through."""

    __slots__ = ("attempt", "failures", "future", "inputs", "started", "timeline")

    def __init__(self, inputs: Mapping[str, Any], timeline: Timeline | None = None) -> None:
        self.inputs = inputs
        """Model inputs by name, already checked against the model's ports."""
        self.future: Future[RunResult] = Future()
        """Completes exactly once: with a :class:`RunResult` or the error the request ended with."""
        self.attempt = 0
        """Runs started so far (MULTI re-runs a failed request on another device)."""
        self.failures: list[tuple[str, BaseException]] = []
        """(device, error) of each failed attempt, in order."""
        self.started = time.perf_counter()
        self.timeline = timeline
        """Where the request's stages are recorded (None: tracing is off)."""

    @property
    def done(self) -> bool:
        return self.future.done()

    def succeed(self, result: RunResult) -> bool:
        """End with ``result``; False (and nothing happens) if the request had already ended."""
        try:
            self.future.set_result(result)
        except InvalidStateError:
            return False
        return True

    def fail(self, error: BaseException) -> bool:
        """End with ``error``; False (and nothing happens) if the request had already ended."""
        try:
            self.future.set_exception(error)
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
