"""Whether the host device's requests pay for what they cost the accelerators beside it.

A CPU serving whole requests beside a GPU takes host cores, memory bandwidth
and hyper-threads that the GPU's feeding threads need: beside a fast GPU it can
add a few percent of requests while the GPU loses far more, even with the CPU's
threads at the lowest priority (bench/multi_auto.py, the
``MULTI_CHECK_HOST_GAIN=NO`` row; bench/RESULTS.md has the figures).

``MULTI_CHECK_HOST_GAIN`` (YES/NO, default YES) measures it instead of
assuming it.  While the devices are under full load (at least as many requests
in the model as the accelerators have workers), the check (once every
worker of every device has run, past warm-up) counts completed requests for
:data:`WINDOW` seconds with the host serving, then holds the host
back (it finishes what it runs, then takes nothing new), and counts the
accelerators alone for as long.  The host keeps serving only if the devices
together completed more.

A check serves the losing way for about a second (:data:`RAMP`, then
:data:`WINDOW`), which costs a share of the throughput when the losing way is
much slower.  So the wait before the next check is at least :data:`INTERVAL`
seconds, and long enough, from the rates just measured, that checks cost at
most :data:`CHECK_BUDGET` of the throughput; each check that confirms the last answer
doubles it, up to :data:`LONGEST_INTERVAL`, and one that changes it starts
over.  A window without full load is dropped (the host serves meanwhile).  A
held-back host still re-runs failed requests, and serves again at once when no
accelerator is left serving.

A check can only change a held-back host's answer when something changed, and
what usually changes the host's cost (other work on the machine, new input
shapes) also moves the accelerators' own rate.  So while the host is held back the
accelerators' rate under full load is watched in windows of :data:`WATCH`
seconds: only once it strays more than :data:`DRIFT` from the rate the decision
measured is the host checked again (after the wait above); otherwise the next
check comes after :data:`LONGEST_INTERVAL`.  A GPU whose own rate wanders more
than that (``python bench/multi_diagnostics.py --model bert --long 120``
measures it) is checked as before.

:class:`HostGainCheck` is plain state, fed by the MULTI dispatcher with the
time and the load on each event; it starts no thread and reads no clock.  The
figures above are the defaults of :class:`HostGainTiming`, which a check takes
(tests give it shorter ones).
"""

from __future__ import annotations

import logging
from collections.abc import Collection
from dataclasses import dataclass
from enum import Enum

__all__ = ["HostGainCheck", "HostGainTiming"]

_log = logging.getLogger("inferplex")

WINDOW = 0.5
"""Seconds of each measurement (host serving, then held back)."""
INTERVAL = 30.0
"""The shortest wait from a decision to the next check."""
LONGEST_INTERVAL = 480.0
"""The longest wait from a decision to the next check."""
CHECK_BUDGET = 0.005
"""The share of the throughput checks may cost: what a check loses, over the wait after it."""
RAMP = 0.5
"""Seconds a host that was held back serves before it is measured again (its workers fill)."""
DRAIN_LIMIT = 5.0
"""Longest wait for the host's running requests before measuring without it (else no check)."""
WATCH = 2.0
"""Seconds of each window in which a held-back host's accelerators are watched."""
WATCH_COUNT = 50
"""Completed requests a watch window needs before its rate is compared (it grows until then)."""
DRIFT = 0.1
"""How far (a share) the accelerators' rate may stray from the decision's before a held-back host is
checked again at the decision's wait rather than after :data:`LONGEST_INTERVAL`."""


@dataclass(frozen=True)
class HostGainTiming:
    """The check's durations and shares (defaults: the module's constants, documented above)."""

    window: float = WINDOW
    interval: float = INTERVAL
    longest_interval: float = LONGEST_INTERVAL
    check_budget: float = CHECK_BUDGET
    ramp: float = RAMP
    drain_limit: float = DRAIN_LIMIT
    watch: float = WATCH
    watch_count: int = WATCH_COUNT
    drift: float = DRIFT


class _Phase(Enum):
    WAIT_FOR_LOAD = "wait for full load"
    WITH_HOST = "measuring with the host"
    DRAIN = "host finishing its requests"
    WITHOUT_HOST = "measuring without the host"
    DECIDED = "decided"
    RAMP = "host serving again before a new check"


class HostGainCheck:
    """Holds the host devices back while they cost the accelerators more than they add."""

    def __init__(self, enabled: bool = True, timing: HostGainTiming | None = None) -> None:
        self.enabled = enabled
        self.timing = timing or HostGainTiming()
        self.held = False
        """Whether the host devices take no new requests now."""
        self.checks = 0
        """Decisions made so far."""
        self.last_rates: tuple[float, float] | None = None
        """(requests/s with the host, without it) of the latest decision."""
        self.interval = self.timing.interval
        """Seconds from the latest decision to the next check."""
        self._phase = _Phase.WAIT_FOR_LOAD
        self._started = 0.0
        self._window = 0.0
        """When the current watch window began (see :meth:`_watch`)."""
        self._completed = 0
        self._with_host = 0.0
        self._load = 0.0
        """Requests in the model, integrated over time since the phase started."""
        self._seen = 0.0
        self._in_model = 0
        self._last_held = False
        self._drifted = False
        """The accelerators' rate strayed from the latest decision's while the host was held back."""

    def finished(self, host: bool) -> None:
        """Count one successfully completed request (``host``: served by a host device)."""
        if self._phase is _Phase.WITH_HOST or (
                not host and self._phase in (_Phase.WITHOUT_HOST, _Phase.DECIDED)):
            self._completed += 1

    def observe(self, now: float, hosts: Collection[str], others: Collection[str], host_busy: int,
                in_model: int, other_workers: int, warm: bool = True) -> None:
        """Advance the check.

        ``hosts`` / ``others``: host and other devices serving now (not quarantined);
        ``host_busy``: host workers running a request; ``in_model``: requests waiting
        or running; ``other_workers``: the other devices' workers; ``warm``: every
        worker of every serving device has run once (a GPU's first runs capture
        CUDA graphs: measured then, it looks idle).  Full load: on
        average over a window, at least ``other_workers`` requests in the model (a
        closed loop dips below between a request's end and its successor's submit).
        """
        t = self.timing
        if not self.enabled or not hosts or not others:
            self._reset(now)  # nothing to compare (and a host alone must serve)
            return
        self._load += self._in_model * (now - self._seen)
        self._seen, self._in_model = now, in_model
        phase, elapsed = self._phase, now - self._started
        if phase is _Phase.WAIT_FOR_LOAD and warm and in_model >= other_workers:
            self._start(_Phase.WITH_HOST, now)
        elif phase in (_Phase.WITH_HOST, _Phase.WITHOUT_HOST) and elapsed >= t.window:
            if self._load / elapsed < other_workers:
                self._reset(now)  # not under full load: what the host costs cannot be measured now
            elif phase is _Phase.WITH_HOST:
                self._with_host = self._completed / elapsed
                self.held = True
                self._start(_Phase.DRAIN, now)
            else:
                self._decide(self._completed / elapsed, now, hosts)
        elif phase is _Phase.DRAIN and host_busy == 0:
            self._start(_Phase.WITHOUT_HOST, now)
        elif phase is _Phase.DRAIN and elapsed >= t.drain_limit:
            self._reset(now)  # the host's requests run too long to measure without them
        elif phase is _Phase.DECIDED:
            if self.held and not self._drifted:
                self._watch(now, other_workers)
            if elapsed >= (self.interval if self._drifted or not self.held else t.longest_interval):
                if self.held:
                    self.held = False
                    self._start(_Phase.RAMP, now)
                else:
                    self._start(_Phase.WAIT_FOR_LOAD, now)
        elif phase is _Phase.RAMP and elapsed >= t.ramp:
            self._start(_Phase.WAIT_FOR_LOAD, now)

    def _watch(self, now: float, other_workers: int) -> None:
        """One watch window of the accelerators while the host is held back (see the module docstring)."""
        t = self.timing
        span = now - self._window
        if span < t.watch or (self._load / span >= other_workers and self._completed < t.watch_count):
            return  # the window goes on
        if self._load / span >= other_workers and self.last_rates is not None:
            rate, decided = self._completed / span, self.last_rates[1]
            if abs(rate - decided) > t.drift * decided:
                self._drifted = True
                _log.info("inferplex: the accelerators serve %.1f requests/s, %.1f when the host was held "
                          "back: the host is checked again", rate, decided)
        self._window, self._completed, self._load = now, 0, 0.0

    def _decide(self, without_host: float, now: float, hosts: Collection[str]) -> None:
        t = self.timing
        with_host = self._with_host
        held = without_host >= with_host
        same = self.checks > 0 and held == self._last_held
        wait = 2 * self.interval if same else t.interval
        best = max(with_host, without_host)
        lost = (t.ramp + t.window) * (1 - min(with_host, without_host) / best) if best > 0 else 0.0
        self.interval = min(t.longest_interval, max(wait, lost / t.check_budget))
        self.held = self._last_held = held
        self._drifted = False
        self.checks += 1
        self.last_rates = (with_host, without_host)
        _log.info("inferplex: %.1f requests/s with %s serving, %.1f without: %s", with_host,
                  ", ".join(hosts), without_host, "held back" if self.held else "serving")
        self._start(_Phase.DECIDED, now)

    def _start(self, phase: _Phase, now: float) -> None:
        self._phase = phase
        self._started = self._window = now
        self._completed = 0
        self._load = 0.0

    def _reset(self, now: float) -> None:
        """Back to waiting for full load, the host serving."""
        self.held = False
        self._start(_Phase.WAIT_FOR_LOAD, now)

    @property
    def phase(self) -> str:
        """What the check is doing, in words (for DEVICE_STATISTICS)."""
        return self._phase.value
