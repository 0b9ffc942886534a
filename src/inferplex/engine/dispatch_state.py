"""What the MULTI/AUTO dispatcher knows of its members and requests.

Plain objects, read and changed by the dispatcher thread only
(:mod:`inferplex.engine.dispatcher`); the estimates and cool-downs themselves
are the pure code of :mod:`inferplex.scheduling`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from inferplex.config.devices import DeviceTarget, parse_device_list
from inferplex.errors import InferplexError, PropertyError
from inferplex.scheduling.latency import LatencyEstimate, expected_left
from inferplex.scheduling.policies import DeviceLoad
from inferplex.scheduling.quarantine import Quarantine

if TYPE_CHECKING:
    from inferplex.engine.device_pool import DevicePool
    from inferplex.engine.request import Request
    from inferplex.scheduling.host_gain import HostGainCheck

__all__ = ["Attempt", "Device", "Member", "Pending", "check_priorities", "describe_failures",
           "device_targets", "statistics"]


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


def statistics(devices: Mapping[str, Device], serving: Sequence[str], fallback: Sequence[str],
               host_gain: HostGainCheck, first_start: float | None, last_done: float,
               now: float) -> dict[str, dict[str, Any]]:
    """DEVICE_STATISTICS: per-device requests, share, throughput (requests/s), latency_ms, ...

    ``throughput`` is the device's completed requests over the time from the
    first request started to the last one finished, so the devices' values add
    up to the compiled model's throughput.  ``state``: serving, held back,
    quarantined, fallback or excluded.  Host devices also carry ``host_gain``:
    the MULTI_CHECK_HOST_GAIN check's phase, decisions so far, whether the host
    is held back, and the rates (with the host, without it) of the latest decision.
    """
    total = sum(device.requests for device in devices.values())
    window = last_done - first_start if first_start is not None else 0.0
    stats = {}
    for name, device in devices.items():
        entry = device.statistics(total, window)
        if device.quarantine.active(now):
            entry["state"] = "quarantined"
        elif name in serving:
            entry["state"] = "held back" if device.host and host_gain.held else "serving"
        else:
            entry["state"] = "fallback" if name in fallback else "excluded"
        if device.host:
            entry["host_gain"] = {"phase": host_gain.phase, "checks": host_gain.checks,
                                  "held": host_gain.held, "rates": host_gain.last_rates}
        stats[name] = entry
    return stats


def device_targets(value: Any) -> list[DeviceTarget]:
    """The devices of a MULTI_DEVICE_PRIORITIES value (text ``"GPU(4),CPU"`` or a sequence of names)."""
    if isinstance(value, str):
        return list(parse_device_list(value, allow_counts=True))
    return [DeviceTarget(str(name)) for name in value]


def check_priorities(targets: Sequence[DeviceTarget], devices: Mapping[str, Device],
                     resolve: Callable[[str], str]) -> list[str]:
    """Full names of new MULTI_DEVICE_PRIORITIES; PropertyError naming devices not compiled or resized."""
    resolved: list[str] = []
    problems: list[str] = []
    for target in targets:
        try:
            full = resolve(target.name)
        except Exception:  # noqa: BLE001 - an unknown name is reported like a missing one
            full = target.name
        if full not in devices:
            problems.append(target.name)
        resolved.append(full)
    if problems:
        raise PropertyError(
            f"MULTI_DEVICE_PRIORITIES: {', '.join(problems)} was not in the original device "
            f"list; devices can be reordered, excluded and restored, not added "
            f"(compiled: {', '.join(devices)})")
    resized = [f"{t.name}({t.num_requests}) ({full} has {devices[full].workers})"
               for t, full in zip(targets, resolved, strict=True)
               if t.num_requests is not None and t.num_requests != devices[full].workers]
    if resized:
        raise PropertyError(
            f"MULTI_DEVICE_PRIORITIES: {', '.join(resized)}: a device's request count is set when "
            "compiling; a compiled model's priorities reorder, exclude and restore devices "
            "(write them without counts)")
    return resolved
