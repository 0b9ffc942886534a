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

and to timers kept in a heap by its :class:`~inferplex.engine.schedule.Schedule`
(an attempt past ``MULTI_REQUEST_TIMEOUT``, the end of a quarantine).  It waits
on the queue with the timeout of the next timer: nothing polls and no lock
guards the state.  The schedule holds the state (see there for failures,
quarantine and re-runs); the choices are pure code in :mod:`inferplex.scheduling`
(policies, host gain, latency estimates, quarantine), fed with numbers.

User requests wait in one first-in, first-out queue; whenever a request
arrives or a worker frees, the scheduling policy picks the device for the
oldest waiting request.  Inputs go to the device as given, without a copy.

Closing (``release()``, also from a completion callback: callbacks never run
on the dispatcher's thread, which never joins itself) fails the requests still
waiting with an InferenceError, closes the members' pools on the dispatcher
thread (requests already running end with their results) and ends the thread.

Exit needs nothing of its own: the dispatcher is a daemon thread that goes on
dispatching while :mod:`inferplex.engine.lifecycle` waits for the requests in
flight, and the member pools are watched there.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from functools import partial
from typing import Any, TypeVar

from inferplex.config.devices import DeviceTarget
from inferplex.config.schema import canonical_key, normalize_property
from inferplex.engine.completions import blocking
from inferplex.engine.dispatch_state import Attempt, Member, device_targets
from inferplex.engine.request import Outcome, Request, RunResult
from inferplex.engine.runner import Runner
from inferplex.engine.schedule import Schedule
from inferplex.errors import InferenceError, PropertyError
from inferplex.scheduling.options import SchedulerOptions
from inferplex.scheduling.policies import SchedulePolicy, make_policy

__all__ = ["Dispatcher", "Member"]

_log = logging.getLogger("inferplex")
_T = TypeVar("_T")

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
        self._schedule = Schedule(members, self._options, resolve, fallback, self._post_run_end,
                                  starting, expected_requests)
        """Read and changed on the dispatcher thread only."""
        # Shared with other threads: the queue, and under _gate whether it is still read.
        self._events: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._gate = threading.Lock()
        self._closing = False
        self._stopped = False
        self._closing_seen = False  # dispatcher thread only
        names = ",".join(member.name for member in members)
        self._names = names
        self._thread = threading.Thread(target=self._serve, daemon=True, name=f"inferplex-dispatch-{names}")
        self._thread.start()

    # --- Runner (any thread) ------------------------------------------------------------

    def submit(self, request: Request) -> None:
        self._post(("arrive", request))

    @property
    def optimal_number_of_infer_requests(self) -> int:
        return self._ask(self._schedule.optimal)

    @property
    def execution_devices(self) -> list[str]:
        return self._ask(self._schedule.execution_devices)

    def get_property(self, key: str) -> Any:
        """MULTI's own keys; other keys are read from the members' programs, in priority order."""
        name = canonical_key(key)
        schedule = self._schedule
        readers: dict[str, Callable[[], Any]] = {
            "MULTI_DEVICE_PRIORITIES": lambda: schedule.priorities,
            "DEVICE_STATISTICS": schedule.statistics,
            "OPTIMAL_NUMBER_OF_INFER_REQUESTS": schedule.optimal,
            "EXECUTION_DEVICES": schedule.execution_devices,
            "SCHEDULE_POLICY": lambda: schedule.policy_name,
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
                    priorities = device_targets(normalize_property(name, value)[1])
                elif name == "SCHEDULE_POLICY":
                    policy = make_policy(normalize_property(name, value)[1])
                else:
                    problems.append(f"property {key!r} cannot be changed after compilation; "
                                    "changeable: MULTI_DEVICE_PRIORITIES, SCHEDULE_POLICY")
            except PropertyError as error:
                problems.append(str(error))
        if problems:
            raise PropertyError("; ".join(problems))
        self._ask(partial(self._schedule.apply, priorities, policy))

    def hand_over(self, compiled: Future[Member]) -> None:
        """Done-callback of AUTO's chosen device's compile: it serves from now on."""
        error = compiled.exception()
        self._post(("hand over", None if error is not None else compiled.result(), error))

    def keep_as_fallback(self, compiled: Future[Member]) -> None:
        """Done-callback of AUTO's helper compile that ended after the chosen device's (re-runs failures)."""
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
            event[1].fail(InferenceError(f"the compiled model on {self._names} was closed (released)"))
        elif kind == "ask":
            _answer(event[1], event[2])
        elif kind in ("hand over", "fallback") and event[1] is not None:
            event[1].pool.close()  # a compile that ended after the release: its program goes at once
        # a late end of a run left running at close: its request has ended already

    # --- the dispatcher thread ----------------------------------------------------------

    def _serve(self) -> None:
        while True:
            delay = self._schedule.next_timer(time.monotonic())
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
                if self._closing_seen:
                    self._shut_down()
                    return
                self._schedule.fire_timers(now)
                self._schedule.dispatch(now)
            except Exception:  # noqa: BLE001 - the dispatcher must outlive a bug in one step
                _log.exception("inferplex: the MULTI dispatcher failed; it goes on")
            # Hold no event while waiting: it would keep its request, and through the request's
            # callbacks the compiled model, from being collected.
            batch.clear()
            event = None

    def _handle(self, event: Any, now: float) -> None:
        if event is _CLOSE:
            self._closing_seen = True
            self._schedule.close()
            return
        kind = event[0]
        if kind == "arrive":
            self._schedule.arrive(event[1], now)
        elif kind == "ended":
            self._schedule.run_ended(event[1], event[2], event[3], now)
        elif kind == "ask":
            _answer(event[1], event[2])
        elif kind == "hand over":
            self._schedule.handed_over(event[1], event[2])
        elif kind == "fallback":
            self._schedule.helper_compiled(event[1])

    def _post_run_end(self, attempt: Attempt, future: Outcome[RunResult]) -> None:
        """On the device thread: hand the run's end to the dispatcher, with the time it ended."""
        self._post(("ended", attempt, future, time.monotonic()))

    def _shut_down(self) -> None:
        """Closing: pools close (running requests end, their events handled), then the thread stops."""
        for device in self._schedule.close():
            device.pool.close()
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
        self._schedule.abandon_running()

    # --- properties ------------------------------------------------------------------------

    def _member_property(self, name: str) -> Any:
        """A key of the members' programs (a device key passed down), serving members first."""
        members = self._ask(self._schedule.members)
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
