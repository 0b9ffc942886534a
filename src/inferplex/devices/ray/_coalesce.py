"""Group commit of runs into calls: runs that arrive while calls are in flight go out as one call.

A node's actor is reached by one Ray call per round trip, and each call costs
the caller's process a fixed share of its one interpreter (submitting the call,
waiting for and reading its reply), whatever the call carries.  :class:`Coalescer`
therefore sends the runs of one program as few calls as it can without making
any run wait for a timer, as a database's group commit does:

- a run that finds fewer than ``in_flight`` calls in flight is sent at once, in a
  call of its own (with whatever else is waiting): an idle node sees a lone run
  as soon as it arrives;
- a run that finds ``in_flight`` calls in flight waits; when one of them
  returns, every waiting run (up to ``per_call``) goes out as the next call.

No thread of its own: the run that sends a call does so on its own thread
(``send`` only submits it), and the first run of each call waits for the call's
reply (``collect``) on its thread, hands every run of the call its result, and
sends the next call from what waits.  All other runs wait on an event, so the
process has at most ``in_flight`` threads in ``collect`` per program, however many
runs it has in flight.

Each run ends exactly once: with its own result or error from the reply, or,
where ``send`` or ``collect`` raises (the actor died, the reply was malformed),
with that error, as does every run of that call.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["Coalescer", "Outcome", "Stats"]

Outcome = tuple[dict[str, Any], list[Any]] | BaseException
"""What ``collect`` gives each run of a call: (outputs by name, profiling rows), or the run's error."""


@dataclass(frozen=True)
class Stats:
    """Calls a :class:`Coalescer` has sent and the runs they carried."""

    calls: int
    """Calls sent (each one actor call)."""
    requests: int
    """Runs those calls carried."""
    largest: int
    """Runs in the largest call so far."""


class _Run:
    __slots__ = ("call", "inputs", "outcome", "wake")

    def __init__(self, inputs: Mapping[str, Any]) -> None:
        self.inputs = inputs
        self.wake = threading.Event()
        """Set when the run has its outcome, or when its thread is to collect ``call``."""
        self.call: _Call | None = None
        self.outcome: Outcome | None = None


class _Call:
    __slots__ = ("handle", "runs")

    def __init__(self, handle: Any, runs: list[_Run]) -> None:
        self.handle = handle
        self.runs = runs


class Coalescer:
    """Runs of one program gathered into calls (see the module docstring).

    ``send(inputs of each run)`` submits one call and returns its handle without
    waiting; ``collect(handle, runs)`` waits for its reply and returns one
    :data:`Outcome` per run, in order.  ``per_call``: most runs in one call;
    ``in_flight``: most calls sent and not yet collected.
    """

    def __init__(self, send: Callable[[list[Mapping[str, Any]]], Any],
                 collect: Callable[[Any, int], list[Outcome]], per_call: int, in_flight: int) -> None:
        if per_call < 1 or in_flight < 1:
            raise ValueError(f"per_call and in_flight must be >= 1, got {per_call} and {in_flight}")
        self._send_call = send
        self._collect_call = collect
        self.per_call = per_call
        self.in_flight = in_flight
        self._lock = threading.Lock()
        self._waiting: deque[_Run] = deque()
        self._sent = 0  # calls in flight
        self._calls = self._requests = self._largest = 0

    def run(self, inputs: Mapping[str, Any]) -> tuple[dict[str, Any], list[Any]]:
        """Run once, in some call; (outputs, profiling rows), or raise the run's error."""
        run = _Run(inputs)
        with self._lock:
            self._waiting.append(run)
            ready = self._take()
        if ready:
            self._send(ready)
        run.wake.wait()
        call, run.call = run.call, None
        if call is not None:  # this thread collects the call its run leads
            self._collect(call)
        outcome = run.outcome
        if outcome is None:  # cannot happen: a run's event is set after its outcome or its call
            raise RuntimeError("a run woke without an outcome")
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    def stats(self) -> Stats:
        with self._lock:
            return Stats(self._calls, self._requests, self._largest)

    def _take(self) -> list[_Run]:
        """With the lock held: the next call's runs where a call may be sent now, else none."""
        if not self._waiting or self._sent >= self.in_flight:
            return []
        count = min(self.per_call, len(self._waiting))
        runs = [self._waiting.popleft() for _ in range(count)]
        self._sent += 1
        self._calls += 1
        self._requests += count
        self._largest = max(self._largest, count)
        return runs

    def _release(self) -> list[_Run]:
        """A call ended: its slot is free; the next call's runs, if any wait."""
        with self._lock:
            self._sent -= 1
            return self._take()

    def _send(self, runs: list[_Run]) -> None:
        """Send ``runs`` as one call; where sending fails, end them and send what waits next."""
        while runs:
            try:
                handle = self._send_call([run.inputs for run in runs])
            except BaseException as error:  # noqa: BLE001 - each run of the call ends with it
                _end(runs, [error] * len(runs))
                runs = self._release()
                continue
            leader = runs[0]
            leader.call = _Call(handle, runs)
            leader.wake.set()
            return

    def _collect(self, call: _Call) -> None:
        """Wait for ``call``'s reply, send the next call, then end the call's runs."""
        count = len(call.runs)
        try:
            outcomes = list(self._collect_call(call.handle, count))
            if len(outcomes) != count:
                raise RuntimeError(f"collect gave {len(outcomes)} outcomes for {count} runs")
        except BaseException as error:  # noqa: BLE001 - each run of the call ends with it
            outcomes = [error] * count
        self._send(self._release())  # first: the node is not left without work meanwhile
        _end(call.runs, outcomes)


def _end(runs: list[_Run], outcomes: list[Outcome]) -> None:
    for run, outcome in zip(runs, outcomes, strict=True):
        run.outcome = outcome
        run.wake.set()
