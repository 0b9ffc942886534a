"""MULTI and AUTO: one dispatcher thread per compiled model spreads requests over member devices.

Each member is a :class:`~inferplex.engine.device_pool.DevicePool` with as many
threads as the member takes requests at once (``NAME(n)``, else the device's
optimal number).  One daemon thread, the dispatcher, owns every piece of
scheduling state and reacts to events from one queue:

- a request arrives (:meth:`Dispatcher.submit`);
- a run ends (the pool future's done-callback posts it, from the device thread);
- a member is added (AUTO's hand-over once the chosen device has compiled);
- a property is read or changed (asked through the queue, answered with a Future);
- the model is closed;

and to timers kept in a heap (an attempt past ``MULTI_REQUEST_TIMEOUT``, the end
of a quarantine).  It waits on the queue with the timeout of the next timer:
nothing polls and no lock guards the state.  The choices themselves are pure
code in :mod:`inferplex.scheduling`, fed with numbers.

User requests wait in one first-in, first-out queue; whenever a request
arrives or a worker frees, the scheduling policy picks the device for the
oldest waiting request.  Inputs go to the device as given, without a copy.

Failures (``ENABLE_RUNTIME_FALLBACK``, default on): a request that fails, or
runs past ``MULTI_REQUEST_TIMEOUT``, is re-run on a device it has not failed on,
ahead of the waiting requests; the failing device is quarantined for
``MULTI_QUARANTINE_TIME`` seconds (doubling while it keeps failing), then takes
requests again.  The last serving device is never quarantined.  A request that
fails on every device ends with one :class:`~inferplex.errors.InferenceError`
naming each failure (and, being the request's fault rather than the devices',
lifts the quarantines it caused).  A late result of an abandoned attempt is
dropped (the request's future has ended), but its worker is counted free again.

Host devices beside accelerators are held back while they cost the
accelerators more than they add (``MULTI_CHECK_HOST_GAIN``,
:mod:`inferplex.scheduling.host_gain`).

Exit needs nothing of its own: the dispatcher is a daemon thread that goes on
dispatching while :mod:`inferplex.engine.lifecycle` waits for the requests in
flight, and the member pools are watched there.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import queue
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from functools import partial
from typing import Any, TypeVar

from inferplex.engine.completions import blocking
from inferplex.engine.dispatch_state import Attempt, Device, Member, Pending, describe_failures
from inferplex.engine.request import Request, RunResult
from inferplex.engine.runner import Runner
from inferplex.errors import InferenceError, PropertyError
from inferplex.properties import DeviceTarget, canonical_key, normalize_property, parse_device_list
from inferplex.scheduling.host_gain import HostGainCheck
from inferplex.scheduling.options import SchedulerOptions
from inferplex.scheduling.policies import SchedulePolicy, make_policy, policy_name

__all__ = ["Dispatcher", "Member"]

_log = logging.getLogger("inferplex")
_T = TypeVar("_T")

_EXCLUSIVE = threading.Lock()
"""EXCLUSIVE_ASYNC_REQUESTS: one run at a time across every compiled model that asks for it."""

_OWN_PROPERTIES = (
    "MULTI_DEVICE_PRIORITIES", "DEVICE_STATISTICS", "OPTIMAL_NUMBER_OF_INFER_REQUESTS", "EXECUTION_DEVICES",
    "SCHEDULE_POLICY", "ENABLE_RUNTIME_FALLBACK", "EXCLUSIVE_ASYNC_REQUESTS", "MULTI_REQUEST_TIMEOUT",
    "MULTI_QUARANTINE_TIME", "MULTI_CHECK_HOST_GAIN", "PERFORMANCE_HINT")


@dataclass(frozen=True)
class _Closed:
    """An event: close the model."""


_CLOSE = _Closed()


class Dispatcher(Runner):
    """Spreads requests over ``members`` (priority order) with a scheduling policy.

    ``resolve`` turns a user's device name into a full one (``"GPU"`` -> ``"GPU.0"``)
    for ``MULTI_DEVICE_PRIORITIES``; ``fallback`` names members that only take
    re-runs of failed requests.  AUTO's startup: ``starting`` names the helper
    device that serves while the chosen one compiles (``EXECUTION_DEVICES``
    reads ``["(CPU)"]`` meanwhile, ``OPTIMAL_NUMBER_OF_INFER_REQUESTS`` at least
    ``expected_requests``); :meth:`hand_over` then makes the chosen device serve.
    """

    def __init__(self, members: Sequence[Member], options: SchedulerOptions | None = None,
                 resolve: Callable[[str], str] = str, fallback: Sequence[str] = (),
                 starting: str | None = None, expected_requests: int = 0) -> None:
        self._options = options or SchedulerOptions()
        self._policy: SchedulePolicy = make_policy(self._options.policy)
        self._resolve = resolve
        self._devices: dict[str, Device] = {}
        self._serving: list[str] = []
        self._fallback: list[str] = list(fallback)
        self._host_gain = HostGainCheck(self._options.check_host_gain)
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
        self._ready = threading.Event()
        if starting is None:
            self._ready.set()
        for member in members:
            self._add(member, serving=member.name not in self._fallback)
        # Shared with other threads: the queue, and under _gate whether it is still read.
        self._events: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._gate = threading.Lock()
        self._closing = False
        self._stopped = False
        names = ",".join(member.name for member in members)
        self._thread = threading.Thread(target=self._serve, daemon=True, name=f"inferplex-dispatch-{names}")
        self._thread.start()

    # --- Runner (any thread) ------------------------------------------------------------

    def submit(self, request: Request) -> None:
        self._post(("arrive", request))

    @property
    def optimal_number_of_infer_requests(self) -> int:
        return self._ask(self._optimal)

    @property
    def execution_devices(self) -> list[str]:
        return self._ask(self._execution_devices)

    def get_property(self, key: str) -> Any:
        """MULTI's own keys; other keys are read from the members' programs, in priority order."""
        name = canonical_key(key)
        readers: dict[str, Callable[[], Any]] = {
            "MULTI_DEVICE_PRIORITIES": lambda: ",".join(self._serving),
            "DEVICE_STATISTICS": self._statistics,
            "OPTIMAL_NUMBER_OF_INFER_REQUESTS": self._optimal,
            "EXECUTION_DEVICES": self._execution_devices,
            "SCHEDULE_POLICY": lambda: policy_name(self._policy),
        }
        if name in readers:
            return self._ask(readers[name])
        values = {
            "ENABLE_RUNTIME_FALLBACK": self._options.runtime_fallback,
            "EXCLUSIVE_ASYNC_REQUESTS": self._options.exclusive,
            "MULTI_REQUEST_TIMEOUT": self._options.request_timeout or 0.0,
            "MULTI_QUARANTINE_TIME": self._options.quarantine_time,
            "MULTI_CHECK_HOST_GAIN": self._options.check_host_gain,
            "PERFORMANCE_HINT": self._options.hint,
        }
        if name in values:
            return values[name]
        return self._member_property(name)

    def property_names(self) -> tuple[str, ...]:
        return _OWN_PROPERTIES

    def set_property(self, properties: Any) -> None:
        """``MULTI_DEVICE_PRIORITIES`` (reorder, exclude, restore) and ``SCHEDULE_POLICY``."""
        priorities: list[DeviceTarget] | None = None
        policy: SchedulePolicy | None = None
        problems: list[str] = []
        for key, value in properties.items():
            name = canonical_key(key)
            try:
                if name == "MULTI_DEVICE_PRIORITIES":
                    priorities = _device_targets(normalize_property(name, value)[1])
                elif name == "SCHEDULE_POLICY":
                    policy = make_policy(normalize_property(name, value)[1])
                else:
                    problems.append(f"property {key!r} cannot be changed after compilation; "
                                    "changeable: MULTI_DEVICE_PRIORITIES, SCHEDULE_POLICY")
            except PropertyError as error:
                problems.append(str(error))
        if problems:
            raise PropertyError("; ".join(problems))
        self._ask(partial(self._apply, priorities, policy))

    def wait_ready(self, timeout: float | None = None) -> bool:
        """Block until AUTO's startup hand-over is over (or failed); True when it is."""
        with blocking():
            return self._ready.wait(timeout)

    def hand_over(self, compiled: Future[Member]) -> None:
        """Done-callback of AUTO's chosen device's compile: it serves from now on."""
        error = compiled.exception()
        self._post(("hand over", None if error is not None else compiled.result(), error))

    def keep_as_fallback(self, compiled: Future[Member]) -> None:
        """Done-callback of AUTO's helper compile that ended after the chosen device's: it re-runs failures."""
        if compiled.exception() is None:
            self._post(("fallback", compiled.result(), None))

    def close(self) -> None:
        """End the waiting requests, close the members' pools (on the dispatcher thread), stop it."""
        with self._gate:
            if not self._closing and not self._stopped:
                self._events.put(_CLOSE)
            self._closing = True
        if threading.current_thread() is not self._thread:
            with blocking():  # from a callback: other completions go on meanwhile
                self._thread.join()

    # --- talking to the dispatcher ------------------------------------------------------

    def _post(self, event: Any) -> None:
        with self._gate:
            if not self._stopped:
                self._events.put(event)
                return
        self._after_stop(event)

    def _ask(self, function: Callable[[], _T]) -> _T:
        """``function()`` run on the dispatcher thread, which alone reads and writes its state."""
        if threading.current_thread() is self._thread:
            return function()
        answer: Future[_T] = Future()
        self._post(("ask", function, answer))
        return answer.result()

    def _after_stop(self, event: Any) -> None:
        """An event posted once the dispatcher has stopped (its state no longer changes)."""
        if event is _CLOSE:
            return
        kind = event[0]
        if kind == "arrive":
            event[1].fail(InferenceError("the compiled model was closed"))
        elif kind == "ask":
            _answer(event[1], event[2])
        elif kind in ("hand over", "fallback") and event[1] is not None:
            event[1].pool.close()  # a compile that ended after the release: its program goes at once
        # a late end of a run left running at close: its request has ended already

    # --- the dispatcher thread ----------------------------------------------------------

    def _serve(self) -> None:
        while True:
            delay = self._next_timer(time.monotonic())
            batch: list[Any] = []
            try:
                batch.append(self._events.get(timeout=None if delay is None else max(0.0, delay)))
                while True:
                    batch.append(self._events.get_nowait())
            except queue.Empty:
                pass
            now = time.monotonic()
            try:
                for event in batch:
                    self._handle(event, now)
                if self._closed:
                    self._shut_down()
                    return
                self._fire_timers(now)
                self._dispatch(now)
            except Exception:  # noqa: BLE001 - the dispatcher must outlive a bug in one step
                _log.exception("inferplex: the MULTI dispatcher failed; it goes on")
            # Hold no event while waiting: it would keep its request, and through the request's
            # callbacks the compiled model, from being collected.
            batch.clear()
            event = None

    def _handle(self, event: Any, now: float) -> None:
        if event is _CLOSE:
            self._closed = True
            return
        kind = event[0]
        if kind == "arrive":
            if self._closed:
                event[1].fail(InferenceError("the compiled model was closed"))
                return
            self._arrivals.append(now)
            self._queue.append(Pending(event[1]))
        elif kind == "ended":
            self._run_ended(event[1], event[2], event[3], now)
        elif kind == "ask":
            _answer(event[1], event[2])
        elif kind == "hand over":
            self._handed_over(event[1], event[2])
        elif kind == "fallback":
            self._helper_compiled(event[1])

    def _shut_down(self) -> None:
        """Closing: waiting requests fail, pools close (running requests end), then the thread stops."""
        for pending in (*self._retry, *self._queue):
            pending.request.fail(InferenceError("the compiled model was closed before the request started"))
        self._retry.clear()
        self._queue.clear()
        self._ready.set()
        for device in self._devices.values():
            device.pool.close()  # lets running requests end (their events are handled below)
        with self._gate:
            self._stopped = True
            left: list[Any] = []
            while True:
                try:
                    left.append(self._events.get_nowait())
                except queue.Empty:
                    break
        now = time.monotonic()
        for event in left:
            self._handle(event, now)
        for device in self._devices.values():
            for attempt in list(device.running):
                if attempt.live:
                    attempt.live = False
                    attempt.pending.request.fail(InferenceError(
                        f"the compiled model was released while the request ran on {device.name}, "
                        "which is left running"))

    # --- timers --------------------------------------------------------------------------

    def _next_timer(self, now: float) -> float | None:
        """Seconds to the next timer that still matters; None when there is none."""
        while self._timers:
            when, _, attempt = self._timers[0]
            if attempt is not None and not attempt.live:
                heapq.heappop(self._timers)  # that attempt ended: its timeout is moot
                continue
            return when - now
        return None

    def _fire_timers(self, now: float) -> None:
        while self._timers and self._timers[0][0] <= now:
            _, _, attempt = heapq.heappop(self._timers)
            if attempt is not None and attempt.live:
                self._expire(attempt, now)
            # a quarantine's end needs no action here: the dispatch that follows sees it

    def _add_timer(self, when: float, attempt: Attempt | None) -> None:
        heapq.heappush(self._timers, (when, next(self._sequence), attempt))

    # --- scheduling (dispatcher thread only) -------------------------------------------

    def _dispatch(self, now: float) -> None:
        if self._closed:
            return
        for device in self._devices.values():
            if device.quarantine.check_return(now):
                _log.info("inferplex: device %s is back after its quarantine", device.name)
        self._dispatch_retries(now)
        self._check_host_gain(now)
        held = {name for name, device in self._devices.items() if device.host} if self._host_gain.held else set()
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
        future.add_done_callback(partial(self._post_run_end, attempt))

    def _post_run_end(self, attempt: Attempt, future: Future[RunResult]) -> None:
        """On the device thread: hand the run's end to the dispatcher, with the time it ended."""
        self._post(("ended", attempt, future, time.monotonic()))

    def _run_ended(self, attempt: Attempt, future: Future[RunResult], ended: float, now: float) -> None:
        device = attempt.device
        self._busy_total -= 1
        error = future.exception()
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

    def _add(self, member: Member, serving: bool) -> None:
        if member.name in self._devices:
            raise ValueError(f"device {member.name} is already a member")
        self._devices[member.name] = Device(member)
        if serving:
            self._serving.append(member.name)

    def _handed_over(self, member: Member | None, error: BaseException | None) -> None:
        helper, self._starting = self._starting, None
        if member is None:
            _log.warning("inferplex: AUTO keeps running on %s: %s", helper, error)
        elif self._closed:
            member.pool.close()
        else:
            self._add(member, serving=False)
            self._serving = [member.name]
            keep = helper is not None and self._options.runtime_fallback
            self._fallback = [helper] if keep and helper is not None else []
            _log.info("inferplex: AUTO handed over from %s to %s", helper, member.name)
        self._ready.set()

    def _helper_compiled(self, member: Member) -> None:
        if self._closed or not self._options.runtime_fallback:
            member.pool.close()
            return
        self._add(member, serving=False)
        self._fallback = [member.name]

    # --- properties (dispatcher thread) --------------------------------------------------------

    def _optimal(self) -> int:
        if self._options.exclusive:
            return 1
        number = sum(self._devices[name].workers for name in self._serving)
        return max(number, self._expected) if self._starting else number

    def _execution_devices(self) -> list[str]:
        if self._starting:
            return [f"({self._starting})"]
        now = time.monotonic()
        names = [name for name in self._serving if not self._devices[name].quarantine.active(now)]
        return names or list(self._serving)

    def _statistics(self) -> dict[str, dict[str, Any]]:
        """Per-device counters: requests, share, throughput (requests/s), latency_ms, ...

        ``throughput`` is the device's completed requests over the time from the
        first request started to the last one finished, so the devices' values
        add up to the compiled model's throughput.  Host devices also carry
        ``host_gain``: the MULTI_CHECK_HOST_GAIN check's phase, decisions so far and
        the rates (with the host, without it) of the latest.
        """
        now = time.monotonic()
        total = sum(device.requests for device in self._devices.values())
        window = self._last_done - self._first_start if self._first_start is not None else 0.0
        stats = {}
        for name, device in self._devices.items():
            entry = device.statistics(total, window)
            entry["state"] = self._state_of(name, now)
            if device.host:
                check = self._host_gain
                entry["host_gain"] = {"phase": check.phase, "checks": check.checks, "held": check.held,
                                      "rates": check.last_rates}
            stats[name] = entry
        return stats

    def _state_of(self, name: str, now: float) -> str:
        device = self._devices[name]
        if device.quarantine.active(now):
            return "quarantined"
        if name in self._serving:
            return "held back" if device.host and self._host_gain.held else "serving"
        return "fallback" if name in self._fallback else "excluded"

    def _apply(self, priorities: list[DeviceTarget] | None, policy: SchedulePolicy | None) -> None:
        if priorities is not None:
            if self._starting:
                raise PropertyError("MULTI_DEVICE_PRIORITIES cannot change while AUTO's chosen device "
                                    "is still compiling; call it after EXECUTION_DEVICES loses its ()")
            names = self._check_priorities(priorities)
            self._serving = list(dict.fromkeys(names))
            self._fallback = [name for name in self._fallback if name not in self._serving]
        if policy is not None:
            self._policy = policy

    def _check_priorities(self, targets: list[DeviceTarget]) -> list[str]:
        resolved: list[str] = []
        problems: list[str] = []
        for target in targets:
            try:
                full = self._resolve(target.name)
            except Exception:  # noqa: BLE001 - an unknown name is reported like a missing one
                full = target.name
            if full not in self._devices:
                problems.append(target.name)
            resolved.append(full)
        if problems:
            raise PropertyError(
                f"MULTI_DEVICE_PRIORITIES: {', '.join(problems)} was not in the original device "
                f"list; devices can be reordered, excluded and restored, not added "
                f"(compiled: {', '.join(self._devices)})")
        resized = [f"{t.name}({t.num_requests}) ({full} has {self._devices[full].workers})"
                   for t, full in zip(targets, resolved, strict=True)
                   if t.num_requests is not None and t.num_requests != self._devices[full].workers]
        if resized:
            raise PropertyError(
                f"MULTI_DEVICE_PRIORITIES: {', '.join(resized)}: a device's request count is set when "
                "compiling; a compiled model's priorities reorder, exclude and restore devices "
                "(write them without counts)")
        return resolved

    def _member_property(self, name: str) -> Any:
        """A key of the members' programs (a device key passed down), serving members first."""
        members = self._ask(lambda: [self._devices[n] for n in (*self._serving, *self._fallback)])
        for device in members:
            try:
                return device.pool.program.get_property(name)
            except (PropertyError, KeyError):
                continue
        raise KeyError(name)


def _answer(function: Callable[[], Any], answer: Future[Any]) -> None:
    try:
        answer.set_result(function())
    except BaseException as error:  # noqa: BLE001 - handed to the asking thread
        answer.set_exception(error)


def _device_targets(value: Any) -> list[DeviceTarget]:
    """The devices of a MULTI_DEVICE_PRIORITIES value (text ``"GPU(4),CPU"`` or a sequence of names)."""
    if isinstance(value, str):
        return list(parse_device_list(value, allow_counts=True))
    return [DeviceTarget(str(name)) for name in value]

