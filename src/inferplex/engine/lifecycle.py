"""Releasing what compiled models hold, and a bounded interpreter exit.

Every thread the engine starts is a daemon thread, so nothing of inferplex's
can keep the interpreter alive by itself.  At exit (normal end, ``sys.exit``,
an uncaught ``KeyboardInterrupt``) :func:`_finish_at_exit` lets every request
in flight end first, with its result and its callback, as a program that
exits with requests in flight expects.  A device whose run goes on past the
slowest run seen on it by ``EXIT_TIMEOUT`` seconds (default
:data:`DEFAULT_EXIT_TIMEOUT`) counts as hung: its requests end with an
:class:`~inferplex.errors.InferenceError` naming it, and exit goes on.

(``concurrent.futures.ThreadPoolExecutor`` joins its threads at exit with no
bound, so a hung device would hold the process: that is why device pools run
on daemon threads of their own.)
"""

from __future__ import annotations

import atexit
import itertools
import logging
import threading
import time
import weakref
from collections.abc import Callable
from typing import Protocol

__all__ = ["Watched", "ended", "exiting", "live_requests", "progress", "run_first_at_exit", "started",
           "watch"]

_log = logging.getLogger("inferplex")

DEFAULT_EXIT_TIMEOUT = 5.0
"""Seconds past the slowest run seen that exit waits for a run still going (``EXIT_TIMEOUT``)."""


class Watched(Protocol):
    """Something that runs work at exit: a device pool or a background compile."""

    def exit_deadline(self) -> float | None:
        """``time.monotonic()`` past which its current work counts as hung; None when idle."""

    def abandon(self) -> None:
        """End its current and queued work with errors naming the device; take no more."""


def _holds_exit(item: Watched) -> bool:
    """Whether exit waits for ``item``'s work even with no user request left (a background compile:
    native threads torn down under it abort the interpreter); ``holds_exit = True`` on the item."""
    return bool(getattr(item, "holds_exit", False))


_lock = threading.Lock()  # taken directly on the hot path (a Condition's own methods are Python code)
_cond = threading.Condition(_lock)
exiting = False
"""True once exit's wait has begun: hot paths read it before calling :func:`progress`."""
_starts = itertools.count()
_ends = itertools.count()
# Live requests are _starts' count less _ends': both counters advance in C (atomic under the GIL,
# no lock and no Python frame per request); reading them (_live) advances both, which keeps the
# difference.
_last_progress = time.monotonic()
_watched: weakref.WeakSet[Watched] = weakref.WeakSet()


started: Callable[[], object] = _starts.__next__
"""``started()``: a user request started (it counts until :func:`ended`); a C call."""


def ended() -> None:
    """A user request ended and its callback returned."""
    global _last_progress
    next(_ends)
    if exiting:  # only exit's wait looks at these
        with _cond:
            _last_progress = time.monotonic()
            _cond.notify_all()


_reading = threading.Lock()  # one reader at a time: two interleaved reads would skew each other


def _live() -> int:
    """User requests started and not yet ended.  Ends are read first: a request that starts
    between the two reads counts as live, one that ends between them too (never too few)."""
    with _reading:
        ends = next(_ends)
        return next(_starts) - ends


def progress() -> None:
    """A run started or ended on some device: exit's wait looks again (a no-op before exit)."""
    global _last_progress
    if not exiting:
        return
    with _cond:
        _last_progress = time.monotonic()
        _cond.notify_all()


def watch(item: Watched) -> None:
    """Let exit look at ``item``'s runs (held weakly)."""
    with _cond:
        _watched.add(item)
    run_first_at_exit()


def run_first_at_exit() -> None:
    """Make the exit wait run before the exit hooks registered so far.

    ``atexit`` runs hooks last registered first.  Hooks registered after this
    module's (``weakref.finalize``'s, which stop worker processes; a library's
    own) would otherwise run while requests are still in flight.
    """
    atexit.unregister(_finish_at_exit)
    atexit.register(_finish_at_exit)


def live_requests() -> int:
    """User requests started and not yet ended."""
    return _live()


def _finish_at_exit() -> None:
    """Wait until every request in flight has ended; abandon devices that hang."""
    global _last_progress, exiting
    with _cond:
        exiting = True
        _last_progress = time.monotonic()  # ended() and progress() keep it from here on
    while True:
        with _cond:
            now = time.monotonic()
            deadlines = [(deadline, item) for item in list(_watched)
                         if (deadline := item.exit_deadline()) is not None]
            live = _live()
            if live <= 0:  # runs left over (an attempt already re-run elsewhere) are abandoned
                deadlines = [(deadline, item) for deadline, item in deadlines if _holds_exit(item)]
                if not deadlines:
                    return
            overdue = [item for deadline, item in deadlines if deadline <= now]
            if not overdue:
                if deadlines:
                    wake = min(deadline for deadline, _ in deadlines)
                else:  # requests wait in a scheduler or run callbacks: bound the wait anyway
                    wake = _last_progress + DEFAULT_EXIT_TIMEOUT
                    if wake <= now:
                        _log.warning("inferplex: %d requests had not ended %.0f s into exit; leaving them",
                                     live, DEFAULT_EXIT_TIMEOUT)
                        return
                _cond.wait(wake - now)
                continue
        for item in overdue:  # outside the lock: ending requests runs their completions
            item.abandon()


atexit.register(_finish_at_exit)
