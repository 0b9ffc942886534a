"""The scheduling state of one MULTI or AUTO model, changed by its dispatcher thread only.

:class:`Schedule` holds the members (:class:`~inferplex.engine.dispatch_state.Device`),
the first-in, first-out queue of waiting requests, the re-runs, the timers
(attempts past ``MULTI_REQUEST_TIMEOUT``, quarantine ends) and the host-gain
check, and makes every decision with the pure code of :mod:`inferplex.scheduling`.
The :class:`~inferplex.engine.dispatcher.Dispatcher` calls it from its one
thread, on events; nothing here takes a lock, starts a thread or waits.

Failures (``ENABLE_RUNTIME_FALLBACK``, default on): a request that fails, or
runs past ``MULTI_REQUEST_TIMEOUT``, is re-run on a device it has not failed on,
ahead of the waiting requests; the failing device is quarantined for
``MULTI_QUARANTINE_TIME`` seconds (doubling while it keeps failing), then takes
requests again.  The last serving device is never quarantined.  A request that
fails on every device ends with one :class:`~inferplex.errors.InferenceError`
naming each failure (and, being the request's fault rather than the devices',
lifts the quarantines it caused).  A late result of an abandoned attempt is
dropped (the attempt is no longer live), but its worker is counted free again.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

from inferplex.config.devices import DeviceTarget
from inferplex.engine.dispatch_state import (
    Attempt,
    Device,
    Member,
    Pending,
    check_priorities,
    describe_failures,
)
from inferplex.engine.dispatch_state import statistics as device_statistics
from inferplex.engine.request import Outcome, Request, RunResult
from inferplex.errors import InferenceError, PropertyError
from inferplex.scheduling.host_gain import HostGainCheck
from inferplex.scheduling.options import SchedulerOptions
from inferplex.scheduling.policies import SchedulePolicy, make_policy, policy_name

__all__ = ["Schedule"]

_log = logging.getLogger("inferplex")

_EXCLUSIVE = threading.Lock()
"""EXCLUSIVE_ASYNC_REQUESTS: one run at a time across every compiled model that asks for it."""


class Schedule:
    """Members, waiting requests, re-runs and timers of one model (see the module docstring).

    ``on_run_end(attempt, future)`` is called on the device thread when a run
    ends (the dispatcher posts it back to itself, then calls :meth:`run_ended`).
    """

    def __init__(self, members: Sequence[Member], options: SchedulerOptions,
                 resolve: Callable[[str], str], fallback: Sequence[str],
                 on_run_end: Callable[[Attempt, Outcome[RunResult]], None],
                 starting: str | None = None, expected_requests: int = 0) -> None:
        self._options = options
        self._policy: SchedulePolicy = make_policy(options.policy)
        self._resolve = resolve
        self._on_run_end = on_run_end
        self._devices: dict[str, Device] = {}
        self._serving: list[str] = []
        self._fallback: list[str] = list(fallback)
        self._host_gain = HostGainCheck(options.check_host_gain)
        self._queue: deque[Pending] = deque()
        self._retry: deque[Pending] = deque()
        self._arrivals: deque[float] = deque(maxlen=64)
        self._busy_total = 0
        self._first_start: float | None = None
        self._last_done = 0.0
        self._timers: list[tuple[float, int, Attempt | None]] = []
        self._sequence = itertools.count()
        self._closed = False
        self._starting = starting
        self._expected = expected_requests
        for member in members:
            self.add(member, serving=member.name not in self._fallback)

    # --- requests --------------------------------------------------------------------

    def arrive(self, request: Request, now: float) -> None:
        if self._closed:
            request.fail(InferenceError(f"the compiled model on {self._names()} was closed (released)"))
            return
        self._arrivals.append(now)
        self._queue.append(Pending(request))

    def close(self) -> list[Device]:
        """Take no more requests; fail the waiting ones; the members, whose pools the caller closes."""
        self._closed = True
        for pending in (*self._retry, *self._queue):
            pending.request.fail(InferenceError(
                f"the compiled model on {self._names()} was closed (released) before the request started"))
        self._retry.clear()
        self._queue.clear()
        return list(self._devices.values())

    def _names(self) -> str:
        return ",".join(self._devices)

    def abandon_running(self) -> None:
        """Fail the requests still running (on pools left running at close): nothing will end them."""
        for device in self._devices.values():
            for attempt in list(device.running):
                if attempt.live:
                    attempt.live = False
                    attempt.pending.request.fail(InferenceError(
                        f"the compiled model was released while the request ran on {device.name}, "
                        "which is left running"))

    # --- timers ------------------------------------------------------------------------

    def next_timer(self, now: float) -> float | None:
        """Seconds to the next timer that still matters; None when there is none."""
        while self._timers:
            when, _, attempt = self._timers[0]
            if attempt is not None and not attempt.live:
                heapq.heappop(self._timers)  # that attempt ended: its timeout is moot
                continue
            return when - now
        return None

    def fire_timers(self, now: float) -> None:
        while self._timers and self._timers[0][0] <= now:
            _, _, attempt = heapq.heappop(self._timers)
            if attempt is not None and attempt.live:
                self._expire(attempt, now)
            # a quarantine's end needs no action here: the dispatch that follows sees it

    def _add_timer(self, when: float, attempt: Attempt | None) -> None:
        heapq.heappush(self._timers, (when, next(self._sequence), attempt))

    # --- scheduling (dispatcher thread only) -------------------------------------------

    def dispatch(self, now: float) -> None:
        if self._closed:
            return
        for device in self._devices.values():
            if device.quarantine.check_return(now):
                _log.info("inferplex: device %s is back after its quarantine", device.name)
        self._dispatch_retries(now)
        self._check_host_gain(now)
        held = {name for name, device in self._devices.items() if device.host and self._host_gain.held}
        while self._queue and not self._exclusive_busy():
            usable = [self._devices[name] for name in self._serving
                      if name not in held and not self._devices[name].quarantine.active(now)]
            idle = [device for device in usable if device.idle]
            if not idle:
                return  # every policy waits when no worker is idle
            if len(usable) == 1:  # nothing to choose (e.g. the host held back)
                self._start(self._queue.popleft(), idle[0], now)
                continue
            loads = [device.load(now, self._policy.uses_timing) for device in usable]
            choice = self._policy.choose(loads, len(self._queue) + len(self._retry), self._arrival_rate(now))
            if choice is None:
                return
            self._start(self._queue.popleft(), self._devices[choice], now)

    def _dispatch_retries(self, now: float) -> None:
        for pending in list(self._retry):
            left = [name for name in (*self._serving, *self._fallback) if name not in pending.tried]
            if not left:
                self._retry.remove(pending)
                self._end(pending)
                continue
            for name in left:
                device = self._devices[name]
                if device.idle and not device.quarantine.active(now) and not self._exclusive_busy():
                    self._retry.remove(pending)
                    self._start(pending, device, now)
                    break

    def _check_host_gain(self, now: float) -> None:
        if not self._host_gain.enabled or not any(device.host for device in self._devices.values()):
            return  # nothing to check: the check stays as it was made (nothing held)
        serving = [self._devices[name] for name in self._serving
                   if not self._devices[name].quarantine.active(now)]
        hosts = [device for device in serving if device.host]
        others = [device for device in serving if not device.host]
        self._host_gain.observe(
            now, [d.name for d in hosts], [d.name for d in others],
            warm=all(device.latency.warm for device in serving),
            host_busy=sum(device.busy for device in hosts),
            in_model=len(self._queue) + len(self._retry) + self._busy_total,
            other_workers=sum(device.workers for device in others))

    def _start(self, pending: Pending, device: Device, now: float) -> None:
        attempt = device.start(pending, now)
        self._busy_total += 1
        if self._first_start is None:
            self._first_start = now
        if self._options.request_timeout is not None:
            self._add_timer(now + self._options.request_timeout, attempt)
        request = pending.request
        future = device.pool.submit(request.inputs, request,
                                    exclusive=_EXCLUSIVE if self._options.exclusive else None)
        future.add_done_callback(partial(self._on_run_end, attempt))

    def run_ended(self, attempt: Attempt, future: Outcome[RunResult], ended: float, now: float) -> None:
        device = attempt.device
        self._busy_total -= 1
        error = future.exception()
        if error is None:  # a result that breaks the device program contract is the device's failure
            error = attempt.pending.request.broken(future.result())
        device.finish(attempt, ended, error is None)
        if not attempt.live:
            return  # abandoned: timed out and re-run, or the model was closed; its worker is free again
        attempt.live = False
        if error is not None:
            self._failed(attempt.pending, device, error, now)
            return
        device.requests += 1
        self._host_gain.finished(device.host)
        self._last_done = now
        attempt.pending.request.succeed(future.result())

    def _failed(self, pending: Pending, device: Device, error: BaseException, now: float) -> None:
        pending.request.failures.append((device.name, error))
        pending.tried.append(device.name)
        if not self._options.runtime_fallback or self._closed:
            self._end(pending)
            return
        others = [name for name in self._serving
                  if name != device.name and not self._devices[name].quarantine.active(now)]
        if (others or device.name not in self._serving) and not device.quarantine.active(now):
            episode = device.quarantine.start(now, self._options.quarantine_time)
            pending.quarantines.append((device, episode))
            self._add_timer(device.quarantine.until, None)
            _log.warning("inferplex: device %s is quarantined for %.1f s after a failed request",
                         device.name, device.quarantine.until - now)
        self._retry.append(pending)

    def _end(self, pending: Pending) -> None:
        """Fail ``pending`` with one InferenceError naming each of its failures."""
        failures = pending.request.failures
        error = InferenceError(f"the request failed on every device it was tried on: "
                               f"{describe_failures(failures)}")
        error.__cause__ = failures[-1][1] if failures else None
        if len({name for name, _ in failures}) > 1:  # failing everywhere is the request's fault
            now = time.monotonic()
            for device, episode in pending.quarantines:
                device.quarantine.lift(now, episode)
        pending.request.fail(error)

    def _expire(self, attempt: Attempt, now: float) -> None:
        attempt.live = False  # its late result will be dropped; the worker stays busy until then
        if attempt.pending.request.done:
            return
        attempt.device.timeouts += 1
        self._failed(attempt.pending, attempt.device,
                     TimeoutError(f"no result from {attempt.device.name} within "
                                  f"{self._options.request_timeout:g} s"), now)

    def _exclusive_busy(self) -> bool:
        return self._options.exclusive and self._busy_total > 0

    def _arrival_rate(self, now: float) -> float:
        if len(self._arrivals) < 2:
            return 0.0
        return len(self._arrivals) / max(now - self._arrivals[0], 1e-6)

    # --- members ---------------------------------------------------------------------------

    def add(self, member: Member, serving: bool) -> None:
        if member.name in self._devices:
            raise ValueError(f"device {member.name} is already a member")
        self._devices[member.name] = Device(member)
        if serving:
            self._serving.append(member.name)

    def handed_over(self, member: Member | None, error: BaseException | None) -> None:
        helper, self._starting = self._starting, None
        if member is None:
            _log.warning("inferplex: AUTO keeps running on %s: %s", helper, error)
        elif self._closed:
            member.pool.close()
        else:
            self.add(member, serving=False)
            self._serving = [member.name]
            keep = helper is not None and self._options.runtime_fallback
            self._fallback = [helper] if keep and helper is not None else []
            _log.info("inferplex: AUTO handed over from %s to %s", helper, member.name)

    def helper_compiled(self, member: Member) -> None:
        if self._closed or not self._options.runtime_fallback:
            member.pool.close()
            return
        self.add(member, serving=False)
        self._fallback = [member.name]

    # --- properties (dispatcher thread) --------------------------------------------------------

    def optimal(self) -> int:
        if self._options.exclusive:
            return 1
        number = sum(self._devices[name].workers for name in self._serving)
        return max(number, self._expected) if self._starting else number

    def execution_devices(self) -> list[str]:
        if self._starting:
            return [f"({self._starting})"]
        now = time.monotonic()
        names = [name for name in self._serving if not self._devices[name].quarantine.active(now)]
        return names or list(self._serving)

    def statistics(self) -> dict[str, dict[str, Any]]:
        """DEVICE_STATISTICS (see :func:`~inferplex.engine.dispatch_state.statistics`)."""
        return device_statistics(self._devices, self._serving, self._fallback, self._host_gain,
                                 self._first_start, self._last_done, time.monotonic())

    def apply(self, priorities: list[DeviceTarget] | None, policy: SchedulePolicy | None) -> None:
        if priorities is not None:
            if self._starting:
                raise PropertyError("MULTI_DEVICE_PRIORITIES cannot change while AUTO's chosen device "
                                    "is still compiling; call it after EXECUTION_DEVICES loses its ()")
            names = check_priorities(priorities, self._devices, self._resolve)
            self._serving = list(dict.fromkeys(names))
            self._fallback = [name for name in self._fallback if name not in self._serving]
        if policy is not None:
            self._policy = policy

    @property
    def policy_name(self) -> str:
        return policy_name(self._policy)

    @property
    def priorities(self) -> str:
        return ",".join(self._serving)

    def members(self) -> list[Device]:
        """Serving members in priority order, then the fallback ones."""
        return [self._devices[name] for name in (*self._serving, *self._fallback)]
