"""Plain state of the MULTI scheduler: options, requests, devices and their statistics.

Nothing here starts a thread or takes a lock; :mod:`inferplex.multi.scheduler`
owns the lock under which every object below is read and changed.
"""

from __future__ import annotations

import logging
import math
import queue
import threading
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from inferplex.config.schema import normalize_property
from inferplex.executor import Done, Executor
from inferplex.multi.policies import DeviceLoad

__all__ = ["DeviceState", "Job", "Member", "Request", "SchedulerOptions", "Slot", "parse_seconds"]

_log = logging.getLogger("inferplex")

DEFAULT_POLICY = "DEVICE_PRIORITY"
"""SCHEDULE_POLICY when none is given.  bench/multi_auto.py compares the three: on one
H200 with ResNet-50, CUMULATIVE GPU+CPU served 2,027-2,056 requests/s with DEVICE_PRIORITY,
2,005-2,031 with ROUND_ROBIN and 1,976-2,021 with EARLIEST_FINISH (BERT-base: 1,205, 1,203,
1,207), so EARLIEST_FINISH does not win there (bench/RESULTS.md, 2026-11-23)."""

TIMEOUT_KEY = "MULTI_REQUEST_TIMEOUT"
"""Seconds one attempt of a request may run on a device before it counts as failed."""
QUARANTINE_KEY = "MULTI_QUARANTINE_TIME"
"""Seconds a device that failed a request is left out (doubling on repeated failures)."""
HOST_GAIN_KEY = "MULTI_CHECK_HOST_GAIN"
"""Whether to hold the host device back while it costs the accelerators more than it adds."""


def parse_seconds(key: str, value: Any) -> float | None:
    """Seconds from ``2``, ``0.5``, ``"500ms"`` or ``"2s"``; ``None``/``0`` mean no limit."""
    seconds: float | None = normalize_property(key, value)[1]
    return seconds


@dataclass(frozen=True)
class SchedulerOptions:
    """How a MULTI executor schedules, read from the compile config."""

    policy: str = DEFAULT_POLICY
    """``SCHEDULE_POLICY``: DEVICE_PRIORITY, ROUND_ROBIN or EARLIEST_FINISH."""
    runtime_fallback: bool = True
    """``ENABLE_RUNTIME_FALLBACK``: re-run a failed request on another device."""
    request_timeout: float | None = None
    """``MULTI_REQUEST_TIMEOUT``: seconds per attempt; ``None`` waits for ever."""
    quarantine_time: float = 5.0
    """``MULTI_QUARANTINE_TIME``: first cool-down of a failing device, in seconds."""
    exclusive: bool = False
    """``EXCLUSIVE_ASYNC_REQUESTS``: one request at a time, across compiled models."""
    check_host_gain: bool = True
    """``MULTI_CHECK_HOST_GAIN``: see :mod:`inferplex.multi.host_gain`."""
    hint: str = "CUMULATIVE_THROUGHPUT"
    """``PERFORMANCE_HINT`` of the virtual device (only reported: members compile with their own)."""

    @classmethod
    def from_config(cls, config: Mapping[str, Any],
                    default_hint: str = "CUMULATIVE_THROUGHPUT") -> SchedulerOptions:
        """``default_hint``: what the virtual device does without a PERFORMANCE_HINT (MULTI: spread
        requests over every device; AUTO: LATENCY on one device)."""
        quarantine = parse_seconds(QUARANTINE_KEY, config.get(QUARANTINE_KEY, cls.quarantine_time))
        return cls(
            hint=str(config.get("PERFORMANCE_HINT", default_hint)),
            policy=str(config.get("SCHEDULE_POLICY", DEFAULT_POLICY)).upper(),
            runtime_fallback=bool(config.get("ENABLE_RUNTIME_FALLBACK", True)),
            request_timeout=parse_seconds(TIMEOUT_KEY, config.get(TIMEOUT_KEY)),
            quarantine_time=quarantine or 0.0,
            exclusive=bool(config.get("EXCLUSIVE_ASYNC_REQUESTS", False)),
            check_host_gain=bool(config.get(HOST_GAIN_KEY, True)),
        )


@dataclass(frozen=True)
class Member:
    """One compiled device of a MULTI executor."""

    name: str
    """Full device name, e.g. ``"GPU.0"``."""
    executor: Executor
    """Runs one request on the device (``run`` is called from the pool's threads)."""
    workers: int
    """Pool size: ``NAME(n)`` from the device list, else the device's optimal number."""
    host: bool = False
    """Whether the device is the host (DEVICE_TYPE ``host``: the CPU the accelerators' feeding runs on)."""


@dataclass(eq=False)
class Request:
    """One user request, from submit until ``done`` is called (exactly once)."""

    inputs: Mapping[str, Any]
    done: Done
    tried: list[str] = field(default_factory=list)
    """Devices the request failed on, in order."""
    failures: list[tuple[str, BaseException]] = field(default_factory=list)
    attempt: int = 0
    """Bumped at each start and each failure, so a late result of an abandoned attempt is dropped."""
    finished: bool = False
    quarantines: list[tuple[DeviceState, int]] = field(default_factory=list)
    """(device, quarantine episode) this request's failures caused."""


@dataclass(eq=False)
class Job:
    """One attempt of a request on one worker."""

    request: Request
    attempt: int
    started: float


class Slot:
    """One worker of a device's pool: a thread with an inbox of jobs."""

    def __init__(self, device: DeviceState, index: int) -> None:
        self.device = device
        self.index = index
        self.inbox: queue.SimpleQueue[Job | None] = queue.SimpleQueue()
        self.job: Job | None = None
        self.thread: threading.Thread | None = None
        self.warm = False
        """Whether a run on this worker has succeeded (its first pays one-off warm-up costs)."""


class DeviceState:
    """A device's pool, latency estimate, quarantine and counters."""

    LATENCY_WINDOW = 9
    """Latest run times the latency estimate is the median of."""
    OUTLIER_FACTOR = 4.0
    """A run this many times faster than the estimate drops the samples this many times slower than it."""
    PROBE_AFTER = 2.0
    """Seconds without a completed request after which the latency is measured again."""

    def __init__(self, member: Member) -> None:
        self.name = member.name
        self.executor = member.executor
        self.slots = [Slot(self, index) for index in range(member.workers)]
        self.idle: list[Slot] = list(reversed(self.slots))
        self.latency: float | None = None
        self._recent: deque[float] = deque(maxlen=self.LATENCY_WINDOW)
        self.warm_slots = 0
        self.last_done = -math.inf
        self.requests = self.failures = self.timeouts = 0
        self.quarantines = self.returns = 0
        self.busy_seconds = 0.0
        self.quarantined_until = -math.inf
        self.quarantine_level = 0
        self.episode = 0
        self.in_quarantine = False

    @property
    def warm(self) -> bool:
        """Whether every worker has run once (past CUDA graph capture and other warm-up)."""
        return self.warm_slots >= len(self.slots)

    @property
    def busy(self) -> int:
        return len(self.slots) - len(self.idle)

    def is_quarantined(self, now: float) -> bool:
        return now < self.quarantined_until

    def load(self, now: float, running: list[Job]) -> DeviceLoad:
        """Snapshot for the policy; ``running``: the jobs of this device's busy workers."""
        latency = self.latency
        if latency is not None and now - self.last_done > self.PROBE_AFTER and self.busy == 0:
            latency = None  # stale: measure again (e.g. after a slow first run)
        remaining = tuple(_expected_left(latency or 0.0, now - job.started) for job in running)
        return DeviceLoad(self.name, len(self.slots), self.busy, latency, remaining)

    def record_run(self, slot: Slot, elapsed: float, now: float, success: bool) -> None:
        """Count a finished run on ``slot``; successful ones feed the latency estimate.

        The estimate is the median of the latest runs, leaving out each worker's
        first (CUDA graph capture, lazy initialisation): one slow outlier must not
        make a fast device look slow, or EARLIEST_FINISH would stop sending it the
        requests that would correct the estimate.  Warm-up can also hold back
        later runs (a worker process's workers capture one at a time, and other
        runs wait meanwhile), so a run ``OUTLIER_FACTOR`` times faster than the
        estimate drops the samples that much slower than it: an estimate that
        errs fast corrects itself (the device gets requests, and their times),
        one that errs slow does not (the device gets a probe every
        ``PROBE_AFTER`` seconds at best).
        """
        self.busy_seconds += elapsed
        self.last_done = now
        if not success:
            self.failures += 1
            return
        self.quarantine_level = 0
        if not slot.warm:
            slot.warm = True
            self.warm_slots += 1
            return
        if self.latency is not None and elapsed * self.OUTLIER_FACTOR < self.latency:
            kept = [t for t in self._recent if t <= elapsed * self.OUTLIER_FACTOR]
            self._recent.clear()
            self._recent.extend(kept)
        self._recent.append(elapsed)
        ordered = sorted(self._recent)
        self.latency = ordered[(len(ordered) - 1) // 2]

    def quarantine(self, now: float, base: float) -> int:
        """Leave the device out for ``base * 2**level`` seconds; return the episode number."""
        if self.is_quarantined(now):
            return self.episode
        seconds = base * 2 ** min(self.quarantine_level, 4)
        self.quarantine_level += 1
        self.quarantined_until = now + seconds
        self.episode += 1
        self.quarantines += 1
        self.in_quarantine = True
        _log.warning("inferplex: device %s is quarantined for %.1f s after a failed request",
                     self.name, seconds)
        return self.episode

    def check_return(self, now: float) -> bool:
        """True once, when a quarantine has ended and the device takes requests again."""
        if self.in_quarantine and not self.is_quarantined(now):
            self.in_quarantine = False
            self.returns += 1
            _log.info("inferplex: device %s is back after its quarantine", self.name)
            return True
        return False

    def lift_quarantine(self, now: float, episode: int | None = None) -> None:
        """End the quarantine now (``episode``: only if it is still that one)."""
        if self.is_quarantined(now) and (episode is None or episode == self.episode):
            self.quarantined_until = now
            self.quarantine_level = max(0, self.quarantine_level - 1)

    def statistics(self, total: int, window: float) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "share": self.requests / total if total else 0.0,
            "throughput": self.requests / window if window > 0 else 0.0,
            "latency_ms": (self.latency or 0.0) * 1000.0,
            "workers": len(self.slots),
            "failures": self.failures,
            "timeouts": self.timeouts,
            "quarantines": self.quarantines,
            "returns": self.returns,
        }


def _expected_left(latency: float, elapsed: float) -> float:
    """Seconds a run that has taken ``elapsed`` is expected to go on.

    Past its usual latency, a run is assumed to go on about as long again as it
    has overrun, so a hanging device looks slower and slower, not about to finish.
    """
    return latency - elapsed if elapsed <= latency else elapsed - latency
