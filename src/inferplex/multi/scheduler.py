"""The MULTI executor: one model compiled on several devices, requests spread over them.

Each device keeps a pool of workers (one thread each, so a plugin's worker is
used by one thread at a time, and daemon threads, so a hanging device never
blocks the interpreter's exit).  At exit every request given so far still ends
on a device and runs its callback, before the workers stop (see
:func:`_finish_at_exit`): a program may exit with requests in flight.  User
requests wait in one first-in, first-out queue; whenever a request arrives or
a worker frees, the scheduling policy (:mod:`inferplex.multi.policies`) picks
the device for the oldest waiting request.  Inputs go to the device as given, without a copy.

Failures (``ENABLE_RUNTIME_FALLBACK``, default on): a request that fails, or
runs past ``MULTI_REQUEST_TIMEOUT``, is re-run on a device it has not failed on,
ahead of the waiting requests; the failing device is quarantined for
``MULTI_QUARANTINE_TIME`` seconds (doubling while it keeps failing), then takes
requests again.  The last serving device is never quarantined.  A request that
fails on every device ends with an :class:`~inferplex.errors.InferenceError`
naming each failure (and, being the request's fault rather than the devices',
lifts the quarantines it caused).  A late result of an abandoned attempt is
dropped, so every request ends exactly once.

Host devices beside accelerators are held back while they cost the
accelerators more than they add (``MULTI_CHECK_HOST_GAIN``,
:mod:`inferplex.multi.host_gain`).
"""

from __future__ import annotations

import atexit
import logging
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from inferplex.config.devices import DeviceTarget, parse_device_list
from inferplex.config.schema import canonical_key, normalize_property
from inferplex.errors import InferenceError, PropertyError
from inferplex.executor import Done, Executor, RunResult, finish, wait_running_queued
from inferplex.multi.host_gain import HostGainCheck
from inferplex.multi.policies import DevicePriority, make_policy
from inferplex.multi.state import DeviceState, Job, Member, Request, SchedulerOptions, Slot

__all__ = ["MultiExecutor"]

_log = logging.getLogger("inferplex")

# EXCLUSIVE_ASYNC_REQUESTS serialises requests across every compiled model that asks for it.
_EXCLUSIVE = threading.Lock()

_Outcome = tuple[Done, "RunResult | BaseException"]


class MultiExecutor(Executor):
    """Spreads requests over ``members`` (priority order) with a scheduling policy.

    ``resolve`` turns a user's device name into a full one (``"GPU"`` -> ``"GPU.0"``)
    for ``MULTI_DEVICE_PRIORITIES``; ``fallback`` names members that only take
    re-runs of failed requests.
    """

    def __init__(self, members: Sequence[Member], options: SchedulerOptions | None = None,
                 resolve: Callable[[str], str] = str, fallback: Sequence[str] = ()) -> None:
        self._options = options or SchedulerOptions()
        self._policy = make_policy(self._options.policy)
        self._resolve = resolve
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._devices: dict[str, DeviceState] = {}
        self._hosts: set[str] = set()
        self.host_gain = HostGainCheck(self._options.check_host_gain)
        """The MULTI_CHECK_HOST_GAIN check (read its ``held``, ``checks`` and ``last_rates``)."""
        self._serving: list[str] = []
        self._fallback: list[str] = list(fallback)
        self._queue: deque[Request] = deque()
        self._retry: deque[Request] = deque()
        self._outbox: list[_Outcome] = []
        self._arrivals: deque[float] = deque(maxlen=64)
        self._busy_total = 0
        self._first_start: float | None = None
        self._last_done = 0.0
        self._closed = False
        for member in members:
            self.add_member(member, serving=member.name not in self._fallback)
        self._watchdog = threading.Thread(target=self._watch, daemon=True,
                                          name="inferplex-multi-watchdog")
        self._watchdog.start()
        _live.add(self)

    # --- members -------------------------------------------------------------------

    def add_member(self, member: Member, serving: bool = True) -> None:
        """Add a compiled device (AUTO's hand-over); ``serving`` puts it last in priority."""
        device = DeviceState(member)
        threads = []
        for slot in device.slots:
            slot.thread = threading.Thread(target=self._work, args=(slot,), daemon=True,
                                           name=f"inferplex-{member.name}-{slot.index}")
            threads.append(slot.thread)
        with self._lock:
            if self._closed:
                member.executor.close()
                return
            if member.name in self._devices:
                raise ValueError(f"device {member.name} is already a member")
            self._devices[member.name] = device
            if member.host:
                self._hosts.add(member.name)
            if serving:
                self._serving.append(member.name)
            for thread in threads:
                thread.start()
            self._dispatch(time.monotonic())

    def set_roles(self, serving: Sequence[str], fallback: Sequence[str] = ()) -> None:
        """Which members take new requests (in priority order) and which only re-runs."""
        with self._lock:
            self._serving = list(dict.fromkeys(serving))
            self._fallback = [name for name in dict.fromkeys(fallback) if name not in self._serving]
            self._dispatch(time.monotonic())
            outcomes = self._take_outbox()
        self._deliver(outcomes)

    # --- Executor ------------------------------------------------------------------

    @property
    def optimal_number_of_infer_requests(self) -> int:
        if self._options.exclusive:
            return 1
        with self._lock:
            return sum(len(self._devices[name].slots) for name in self._serving)

    @property
    def execution_devices(self) -> list[str]:
        now = time.monotonic()
        with self._lock:
            names = [n for n in self._serving if not self._devices[n].is_quarantined(now)]
            return names or list(self._serving)

    def run(self, inputs: Mapping[str, Any]) -> RunResult:
        box: list[RunResult | BaseException] = []
        event = threading.Event()

        def done(outcome: RunResult | BaseException) -> None:
            box.append(outcome)
            event.set()

        self.submit(inputs, done)
        self.wait(event)  # from a callback on a slot thread: runs that slot's jobs meanwhile
        if isinstance(box[0], BaseException):
            raise box[0]
        return box[0]

    def wait(self, event: threading.Event, timeout: float | None = None) -> bool:
        """Wait for ``event``; on one of this executor's slot threads, run that slot's jobs meanwhile.

        A callback that waits for a request of this model (``run``, ``InferRequest.wait``)
        runs on a slot thread, which is idle while it delivers callbacks: the request
        may have gone to that very slot.
        """
        own = getattr(_current, "slot", None)
        if own is None or self._devices.get(own.device.name) is not own.device:
            return super().wait(event, timeout)
        return wait_running_queued(event, timeout, own.inbox, lambda job: self._run_job(own, job))

    def submit(self, inputs: Mapping[str, Any], done: Done) -> None:
        request = Request(inputs, done)
        with self._lock:
            if self._closed:
                self._outbox.append((done, InferenceError("the compiled model was closed")))
            else:
                now = time.monotonic()
                self._arrivals.append(now)
                self._queue.append(request)
                self._dispatch(now)
            outcomes = self._take_outbox()
        self._deliver(outcomes)

    def get_property(self, key: str) -> Any:
        name = canonical_key(key)
        if name == "MULTI_DEVICE_PRIORITIES":
            with self._lock:
                return ",".join(self._serving)
        if name == "DEVICE_STATISTICS":
            return self.statistics()
        if name == "OPTIMAL_NUMBER_OF_INFER_REQUESTS":
            return self.optimal_number_of_infer_requests
        if name == "EXECUTION_DEVICES":
            return self.execution_devices
        values = {
            "SCHEDULE_POLICY": self._policy_name(),
            "ENABLE_RUNTIME_FALLBACK": self._options.runtime_fallback,
            "EXCLUSIVE_ASYNC_REQUESTS": self._options.exclusive,
            "MULTI_REQUEST_TIMEOUT": self._options.request_timeout or 0.0,
            "MULTI_QUARANTINE_TIME": self._options.quarantine_time,
            "MULTI_CHECK_HOST_GAIN": self._options.check_host_gain,
            "PERFORMANCE_HINT": self._options.hint,
        }
        if name in values:
            return values[name]
        raise KeyError(key)

    def property_names(self) -> tuple[str, ...]:
        return ("MULTI_DEVICE_PRIORITIES", "DEVICE_STATISTICS", "OPTIMAL_NUMBER_OF_INFER_REQUESTS",
                "EXECUTION_DEVICES", "SCHEDULE_POLICY", "ENABLE_RUNTIME_FALLBACK", "EXCLUSIVE_ASYNC_REQUESTS",
                "MULTI_REQUEST_TIMEOUT", "MULTI_QUARANTINE_TIME", "MULTI_CHECK_HOST_GAIN", "PERFORMANCE_HINT")

    def set_property(self, properties: Mapping[str, Any]) -> None:
        """``MULTI_DEVICE_PRIORITIES`` (reorder, exclude, restore) and ``SCHEDULE_POLICY``."""
        changes: dict[str, Any] = {}
        problems: list[str] = []
        for key, value in properties.items():
            name = canonical_key(key)
            try:
                if name == "MULTI_DEVICE_PRIORITIES":
                    changes[name] = self._check_priorities(value)
                elif name == "SCHEDULE_POLICY":
                    changes[name] = make_policy(normalize_property(name, value)[1])
                else:
                    problems.append(f"property {key!r} cannot be changed after compilation; "
                                    "changeable: MULTI_DEVICE_PRIORITIES, SCHEDULE_POLICY")
            except PropertyError as error:
                problems.append(str(error))
        if problems:
            raise PropertyError("; ".join(problems))
        if "SCHEDULE_POLICY" in changes:
            with self._lock:
                self._policy = changes["SCHEDULE_POLICY"]
        if "MULTI_DEVICE_PRIORITIES" in changes:
            names = changes["MULTI_DEVICE_PRIORITIES"]
            self.set_roles(names, [n for n in self._fallback if n not in names])

    def statistics(self) -> dict[str, dict[str, Any]]:
        """Per-device counters: requests, share, throughput (requests/s), latency_ms, ...

        ``throughput`` is the device's completed requests over the time from the
        first request started to the last one finished, so the devices' values
        add up to the compiled model's throughput.
        """
        now = time.monotonic()
        with self._lock:
            total = sum(device.requests for device in self._devices.values())
            window = self._last_done - self._first_start if self._first_start is not None else 0.0
            stats = {}
            for name, device in self._devices.items():
                entry = device.statistics(total, window)
                entry["state"] = self._state_of(name, now)
                stats[name] = entry
            return stats

    def drain(self, stall: float) -> bool:
        """Wait until every request given so far has ended; False if none ended for ``stall`` seconds."""
        with self._cond:
            progress, pending = time.monotonic(), -1
            while self._queue or self._retry or self._busy_total:
                now = time.monotonic()
                left = len(self._queue) + len(self._retry) + self._busy_total
                if left != pending:
                    progress, pending = now, left
                elif now - progress > stall:
                    return False
                self._cond.wait(0.02)
        return True

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            for request in (*self._retry, *self._queue):
                self._end(request, InferenceError("the compiled model was closed before the "
                                                  "request started"))
            self._queue.clear()
            self._retry.clear()
            self._cond.notify_all()
            devices = list(self._devices.values())
            outcomes = self._take_outbox()
        self._deliver(outcomes)
        for device in devices:
            for slot in device.slots:
                slot.inbox.put(None)
        deadline = time.monotonic() + 10.0
        for device in devices:
            for slot in device.slots:
                if slot.thread is not None:
                    slot.thread.join(max(0.0, deadline - time.monotonic()))
            if any(slot.thread is not None and slot.thread.is_alive() for slot in device.slots):
                _log.warning("inferplex: %s still runs a request at close; left running", device.name)
                continue
            device.executor.close()

    # --- scheduling (every method below runs under self._lock) -------------------------

    def _dispatch(self, now: float) -> None:
        if self._closed:
            return
        for device in self._devices.values():
            device.check_return(now)
        self._dispatch_retries(now)
        self._check_host_gain(now)
        held = self._hosts if self.host_gain.held else ()
        while self._queue and not self._exclusive_busy():
            usable = [self._devices[name] for name in self._serving
                      if not self._devices[name].is_quarantined(now) and name not in held]
            if not any(device.idle for device in usable):
                return  # every policy waits when no worker is idle
            if len(usable) == 1:  # nothing to choose (e.g. the host held back): skip the policy's work
                self._start(self._queue.popleft(), usable[0], now)
                continue
            if type(self._policy) is DevicePriority:  # its choice needs no snapshot of the loads
                self._start(self._queue.popleft(), next(d for d in usable if d.idle), now)
                continue
            timed = getattr(self._policy, "uses_timing", True)
            loads = [device.load(now, self._running(device.name) if timed else []) for device in usable]
            waiting = len(self._queue) + len(self._retry)
            choice = self._policy.choose(loads, waiting, self._arrival_rate(now))
            if choice is not None and not any(load.name == choice and load.idle > 0 for load in loads):
                _log.error("inferplex: policy %s chose %r, which has no idle worker; using the "
                           "first idle device instead", type(self._policy).__name__, choice)
                choice = DevicePriority().choose(loads, waiting, 0.0)
            if choice is None:
                return
            self._start(self._queue.popleft(), self._devices[choice], now)

    def _check_host_gain(self, now: float) -> None:
        if not self._hosts or not self.host_gain.enabled:
            return  # nothing to check: the check stays as it was made (nothing held)
        serving = [name for name in self._serving if not self._devices[name].is_quarantined(now)]
        hosts = [name for name in serving if name in self._hosts]
        others = [name for name in serving if name not in self._hosts]
        warm = all(self._devices[name].warm for name in serving)
        self.host_gain.observe(now, hosts, others, warm=warm,
                                host_busy=sum(self._devices[name].busy for name in hosts),
                                in_model=len(self._queue) + len(self._retry) + self._busy_total,
                                other_workers=sum(len(self._devices[name].slots) for name in others))

    def _dispatch_retries(self, now: float) -> None:
        for request in list(self._retry):
            left = [n for n in (*self._serving, *self._fallback) if n not in request.tried]
            if not left:
                self._retry.remove(request)
                self._end(request, None)
                continue
            for name in left:
                device = self._devices[name]
                if device.idle and not device.is_quarantined(now) and not self._exclusive_busy():
                    self._retry.remove(request)
                    self._start(request, device, now)
                    break

    def _start(self, request: Request, device: DeviceState, now: float) -> None:
        slot = device.idle.pop()
        request.attempt += 1
        slot.job = Job(request, request.attempt, now)
        self._busy_total += 1
        if self._first_start is None:
            self._first_start = now
        slot.inbox.put(slot.job)

    def _finished_run(self, slot: Slot, job: Job, outcome: RunResult | BaseException,
                      elapsed: float) -> None:
        device, request = slot.device, job.request
        now = time.monotonic()
        slot.job = None
        self._busy_total -= 1
        device.idle.append(slot)
        success = isinstance(outcome, RunResult)
        device.record_run(slot, elapsed, now, success)
        if request.finished or request.attempt != job.attempt:
            return  # an abandoned attempt (timed out and re-run, or the model was closed)
        if isinstance(outcome, BaseException):
            self._failed(request, device, outcome, now)
        else:
            device.requests += 1
            self.host_gain.finished(device.name in self._hosts)
            self._last_done = now
            request.finished = True
            self._outbox.append((request.done, outcome))

    def _failed(self, request: Request, device: DeviceState, error: BaseException, now: float) -> None:
        request.attempt += 1  # any later result of this attempt is stale
        request.tried.append(device.name)
        request.failures.append((device.name, error))
        if not self._options.runtime_fallback:
            self._end(request, None)
            return
        others = [n for n in self._serving if n != device.name
                  and not self._devices[n].is_quarantined(now)]
        if others or device.name not in self._serving:
            request.quarantines.append(
                (device, device.quarantine(now, self._options.quarantine_time)))
        self._retry.append(request)

    def _end(self, request: Request, error: BaseException | None) -> None:
        """Finish ``request`` with ``error``, or with an InferenceError listing its failures."""
        request.finished = True
        if error is None:
            reasons = "; ".join(f"{name}: {type(e).__name__}: {e}" for name, e in request.failures)
            error = InferenceError(f"the request failed on every device it was tried on: {reasons}")
            error.__cause__ = request.failures[-1][1] if request.failures else None
            if len({name for name, _ in request.failures}) > 1:
                now = time.monotonic()  # failing everywhere is the request's fault, not the devices'
                for device, episode in request.quarantines:
                    device.lift_quarantine(now, episode)
        self._outbox.append((request.done, error))

    def _expire(self, now: float) -> None:
        timeout = self._options.request_timeout
        if timeout is None:
            return
        for device in self._devices.values():
            for slot in device.slots:
                job = slot.job
                if job is None or job.request.finished or job.request.attempt != job.attempt:
                    continue
                if now - job.started > timeout:
                    device.timeouts += 1
                    self._failed(job.request, device, TimeoutError(
                        f"no result from {device.name} within {timeout:g} s"), now)

    def _running(self, name: str) -> list[Job]:
        return [slot.job for slot in self._devices[name].slots if slot.job is not None]

    def _exclusive_busy(self) -> bool:
        return self._options.exclusive and self._busy_total > 0

    def _arrival_rate(self, now: float) -> float:
        if len(self._arrivals) < 2:
            return 0.0
        return len(self._arrivals) / max(now - self._arrivals[0], 1e-6)

    def _state_of(self, name: str, now: float) -> str:
        if self._devices[name].is_quarantined(now):
            return "quarantined"
        if name in self._serving:
            return "held back" if name in self._hosts and self.host_gain.held else "serving"
        return "fallback" if name in self._fallback else "excluded"

    def _policy_name(self) -> str:
        from inferplex.multi.policies import POLICIES

        return next((k for k, v in POLICIES.items() if isinstance(self._policy, v)),
                    type(self._policy).__name__)

    def _check_priorities(self, value: Any) -> list[str]:
        _, parsed = normalize_property("MULTI_DEVICE_PRIORITIES", value)
        targets = _device_targets(parsed)
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
        resized = [f"{t.name}({t.num_requests}) ({full} has {len(self._devices[full].slots)})"
                   for t, full in zip(targets, resolved, strict=True)
                   if t.num_requests is not None and t.num_requests != len(self._devices[full].slots)]
        if resized:
            raise PropertyError(
                f"MULTI_DEVICE_PRIORITIES: {', '.join(resized)}: a device's request count is set when "
                "compiling; a compiled model's priorities reorder, exclude and restore devices "
                "(write them without counts)")
        return resolved

    def _take_outbox(self) -> list[_Outcome]:
        outcomes, self._outbox = self._outbox, []
        return outcomes

    # --- threads -----------------------------------------------------------------------

    @staticmethod
    def _deliver(outcomes: list[_Outcome]) -> None:
        for done, outcome in outcomes:
            finish(done, outcome)

    def _work(self, slot: Slot) -> None:
        """A worker thread: run the jobs put in its inbox until it reads ``None``."""
        _current.slot = slot
        while (job := slot.inbox.get()) is not None:
            self._run_job(slot, job)

    def _run_job(self, slot: Slot, job: Job) -> None:
        """Run one job on ``slot`` (in its thread), record it, dispatch, deliver what ended."""
        executor = slot.device.executor
        started = time.perf_counter()
        outcome: RunResult | BaseException
        try:
            if self._options.exclusive:
                with _EXCLUSIVE:
                    outcome = executor.run(job.request.inputs)
            else:
                outcome = executor.run(job.request.inputs)
        except BaseException as error:  # noqa: BLE001 - handed to the request, not lost
            outcome = error
        elapsed = time.perf_counter() - started
        with self._lock:
            self._finished_run(slot, job, outcome, elapsed)
            self._dispatch(time.monotonic())
            outcomes = self._take_outbox()
        self._deliver(outcomes)

    def _watch(self) -> None:
        """Expire attempts past the timeout, end quarantines, retry held requests."""
        while True:
            with self._cond:
                if self._closed:
                    return
                now = time.monotonic()
                self._expire(now)
                self._dispatch(now)
                outcomes = self._take_outbox()
                if not outcomes:
                    waiting = self._queue or self._retry or self._busy_total
                    self._cond.wait(0.02 if waiting else 0.2)
            self._deliver(outcomes)


_current = threading.local()
"""``slot``: the slot whose thread this is (unset in other threads)."""

_live: weakref.WeakSet[MultiExecutor] = weakref.WeakSet()

EXIT_STALL = 30.0
"""Seconds without a request ending after which exit stops waiting for a MULTI model."""


@atexit.register
def _finish_at_exit() -> None:
    """At interpreter exit, before daemon threads stop: every request given so far ends.

    Otherwise the workers' threads would be stopped inside ONNX Runtime or torch
    and abort the interpreter ("terminate called without an active exception"),
    and the requests' callbacks would never run.  A device on which no request
    ends for :data:`EXIT_STALL` seconds stops the wait (a hanging device must not
    keep the process alive).  Registered after the device pools' own exit hook,
    so it runs first, while their threads still serve.
    """
    for executor in list(_live):
        if not executor.drain(EXIT_STALL):
            _log.warning("inferplex: no MULTI request ended for %.0f s at exit; leaving the rest", EXIT_STALL)
            continue
        executor.close()


def _device_targets(value: Any) -> list[DeviceTarget]:
    """The devices of a MULTI_DEVICE_PRIORITIES value (text ``"GPU(4),CPU"`` or a sequence of names)."""
    if isinstance(value, str):
        return list(parse_device_list(value, allow_counts=True))
    return [DeviceTarget(str(name)) for name in value]
