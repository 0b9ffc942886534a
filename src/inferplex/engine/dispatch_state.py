"""What the MULTI/AUTO dispatcher knows of its members and requests.

Plain objects, read and changed by the dispatcher thread only
(:mod:`inferplex.engine.dispatcher`); the estimates and cool-downs themselves
are the pure code of :mod:`inferplex.scheduling`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from inferplex.errors import InferplexError
from inferplex.scheduling.latency import LatencyEstimate, expected_left
from inferplex.scheduling.policies import DeviceLoad
from inferplex.scheduling.quarantine import Quarantine

if TYPE_CHECKING:
    from inferplex.engine.device_pool import DevicePool
    from inferplex.engine.request import Request

__all__ = ["Attempt", "Device", "Member", "Pending", "describe_failures"]


@dataclass(frozen=True)
class Member:
    """One compiled device of a MULTI or AUTO model."""

    name: str
    """Full device name, e.g. ``"GPU.0"``."""
    pool: DevicePool
    """Runs the device's program; its ``threads`` are the requests the member takes at once."""
    host: bool = False
    """Whether the device is the host (DEVICE_TYPE ``host``: the CPU the accelerators' feeding runs on)."""

    @property
    def workers(self) -> int:
        return self.pool.threads


class Pending:
    """A user request inside the dispatcher, with what its failures did."""

    __slots__ = ("quarantines", "request", "tried")

    def __init__(self, request: Request) -> None:
        self.request = request
        self.tried: list[str] = []
        """Devices the request failed on, in order."""
        self.quarantines: list[tuple[Device, int]] = []
        """(device, quarantine episode) this request's failures caused."""


class Attempt:
    """One run of a request on one device."""

    __slots__ = ("device", "live", "pending", "started")

    def __init__(self, pending: Pending, device: Device, started: float) -> None:
        self.pending = pending
        self.device = device
        self.started = started
        self.live = True
        """False once abandoned (timed out, or the model closed): its result is dropped."""


class Device:
    """A member's idle workers, runs in progress, latency estimate, quarantine and counters."""

    def __init__(self, member: Member) -> None:
        self.name = member.name
        self.pool = member.pool
        self.host = member.host
        self.workers = member.workers
        self.idle = self.workers
        self.running: set[Attempt] = set()
        """Runs in progress, abandoned ones included (they hold a worker until they end)."""
        self.latency = LatencyEstimate(self.workers)
        self.quarantine = Quarantine()
        self.requests = self.failures = self.timeouts = 0
        self.busy_seconds = 0.0

    @property
    def busy(self) -> int:
        return self.workers - self.idle

    def start(self, pending: Pending, now: float) -> Attempt:
        attempt = Attempt(pending, self, now)
        self.idle -= 1
        self.running.add(attempt)
        pending.request.attempt += 1
        return attempt

    def finish(self, attempt: Attempt, ended: float, success: bool) -> None:
        """A run ended at ``ended``: free its worker and count it."""
        self.idle += 1
        self.running.discard(attempt)
        elapsed = max(0.0, ended - attempt.started)
        self.busy_seconds += elapsed
        self.latency.record(elapsed, ended, success)
        if success:
            self.quarantine.succeeded()
        else:
            self.failures += 1

    def load(self, now: float, timed: bool) -> DeviceLoad:
        """Snapshot for the policy (latency and remaining times only when it reads them)."""
        if not timed:
            return DeviceLoad(self.name, self.workers, self.busy)
        latency = self.latency.current(now, self.busy)
        remaining = tuple(expected_left(latency or 0.0, now - attempt.started) for attempt in self.running)
        return DeviceLoad(self.name, self.workers, self.busy, latency, remaining)

    def statistics(self, total: int, window: float) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "share": self.requests / total if total else 0.0,
            "throughput": self.requests / window if window > 0 else 0.0,
            "latency_ms": (self.latency.latency or 0.0) * 1000.0,
            "workers": self.workers,
            "failures": self.failures,
            "timeouts": self.timeouts,
            "quarantines": self.quarantine.quarantines,
            "returns": self.quarantine.returns,
        }


def describe_failures(failures: Sequence[tuple[str, BaseException]]) -> str:
    """``"GPU.0: <error>; CPU: <error>"``; inferplex's own errors already name what failed."""
    return "; ".join(f"{name}: {error}" if isinstance(error, InferplexError)
                     else f"{name}: {type(error).__name__}: {error}" for name, error in failures)
