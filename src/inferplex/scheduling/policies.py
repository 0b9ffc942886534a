"""Scheduling policies of MULTI and AUTO: which device takes the next waiting request.

A policy is a one-method object: ``choose(loads, waiting, arrival_rate)`` gets a
snapshot of every usable device in priority order (:class:`DeviceLoad`), the
number of requests waiting and the recent arrival rate, and returns the name of
a device with an idle worker that should take the oldest waiting request now,
or ``None`` to keep it waiting.  Policies see no devices and no threads, so
they are tested with plain numbers.

- :class:`DevicePriority` (``DEVICE_PRIORITY``, OpenVINO's behaviour): the first
  device in priority order with an idle worker.
- :class:`RoundRobin` (``ROUND_ROBIN``): devices with an idle worker in turn.
- :class:`EarliestFinish` (``EARLIEST_FINISH``, ours): the device where the
  request is expected to finish first, from measured latency and the remaining
  time of busy workers; a slower idle device is used only when the faster
  devices cannot absorb the waiting and arriving work before it would finish.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from inferplex.errors import PropertyError

__all__ = [
    "POLICIES",
    "DeviceLoad",
    "DevicePriority",
    "EarliestFinish",
    "RoundRobin",
    "SchedulePolicy",
    "make_policy",
    "policy_name",
]


@dataclass(frozen=True)
class DeviceLoad:
    """What a policy knows about one device at one instant."""

    name: str
    """Device name, e.g. ``"GPU.0"``."""
    workers: int
    """Size of the device's worker pool."""
    busy: int
    """Workers running a request now (``busy <= workers``)."""
    latency: float | None = None
    """Measured seconds per request on this device; ``None`` until measured."""
    remaining: tuple[float, ...] = field(default=())
    """Expected seconds left of each busy worker's request (one per busy worker)."""

    @property
    def idle(self) -> int:
        """Workers free to take a request now."""
        return self.workers - self.busy


class SchedulePolicy(Protocol):
    """Picks the device for the oldest waiting request."""

    uses_timing: bool
    """Whether :meth:`choose` reads ``latency`` and ``remaining`` (else the dispatcher leaves them out)."""

    def choose(self, loads: Sequence[DeviceLoad], waiting: int, arrival_rate: float) -> str | None:
        """A device with ``idle > 0`` among ``loads`` (priority order), or ``None`` to wait.

        ``waiting``: requests waiting, the oldest included; ``arrival_rate``:
        requests submitted per second recently.
        """
        ...


class DevicePriority:
    """The first device, in priority order, with an idle worker."""

    uses_timing = False
    """Needs no latency or remaining times (the dispatcher skips computing them)."""

    def choose(self, loads: Sequence[DeviceLoad], waiting: int, arrival_rate: float) -> str | None:
        for load in loads:
            if load.idle > 0:
                return load.name
        return None


class RoundRobin:
    """Devices with an idle worker in turn, starting after the last one chosen."""

    uses_timing = False

    def __init__(self) -> None:
        self._last: str | None = None

    def choose(self, loads: Sequence[DeviceLoad], waiting: int, arrival_rate: float) -> str | None:
        names = [load.name for load in loads]
        start = names.index(self._last) + 1 if self._last in names else 0
        for step in range(len(loads)):
            load = loads[(start + step) % len(loads)]
            if load.idle > 0:
                self._last = load.name
                return load.name
        return None


class EarliestFinish:
    """Send the request where it is expected to finish first; never idle a needed device.

    A device with an idle worker finishes a request in its latency; a busy one
    after its first worker frees, plus its latency.  When the earliest finish is
    on a busy device, the fastest idle device ``d`` still takes the request if
    the faster devices cannot finish the work in ``latency(d)``: the waiting
    requests plus those expected to arrive meanwhile (``arrival_rate *
    latency(d)``) exceed what their busy workers complete in that time.  So a
    slow CPU helps a fast GPU under sustained load, but never takes the last
    requests of a burst that the GPU would finish sooner.  Devices not yet
    measured are tried first, so every device gets measured.
    """

    uses_timing = True

    def choose(self, loads: Sequence[DeviceLoad], waiting: int, arrival_rate: float) -> str | None:
        idle = [load for load in loads if load.idle > 0]
        if not idle:
            return None
        for load in idle:
            if load.latency is None:
                return load.name
        best = min(idle, key=_finish)
        faster = [load for load in loads if load.idle == 0 and _finish(load) < _finish(best)]
        if not faster:
            return best.name
        window = _finish(best)
        capacity = sum(_completions(load, window) for load in faster)
        demand = waiting + arrival_rate * window
        return best.name if demand > capacity else None


def _finish(load: DeviceLoad) -> float:
    """Expected seconds until a request sent to ``load`` now would finish."""
    if load.latency is None:
        return math.inf
    if load.idle > 0:
        return load.latency
    return min(load.remaining, default=0.0) + load.latency


def _completions(load: DeviceLoad, window: float) -> int:
    """Requests ``load``'s busy workers can start and finish within ``window`` seconds."""
    if load.latency is None:
        return 0
    if load.latency <= 0:
        return len(load.remaining) * 1_000_000
    return sum(max(0, math.floor((window - left) / load.latency)) for left in load.remaining)


POLICIES: dict[str, type[SchedulePolicy]] = {
    "DEVICE_PRIORITY": DevicePriority,
    "ROUND_ROBIN": RoundRobin,
    "EARLIEST_FINISH": EarliestFinish,
}


def policy_name(policy: SchedulePolicy) -> str:
    """The ``SCHEDULE_POLICY`` value of ``policy``."""
    return next((name for name, kind in POLICIES.items() if type(policy) is kind), type(policy).__name__)


def make_policy(name: str) -> SchedulePolicy:
    """A new policy object for a ``SCHEDULE_POLICY`` value."""
    try:
        return POLICIES[str(name).upper()]()
    except KeyError:
        raise PropertyError(f"SCHEDULE_POLICY: {name!r} is not accepted; accepted: "
                            f"{', '.join(POLICIES)}") from None
