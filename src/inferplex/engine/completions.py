"""User callbacks of one compiled model, run off the devices' threads.

Device threads only run devices: a request's completion (the user's callback,
then whatever the request's owner does next, e.g. an AsyncInferQueue starting
a waiting job) runs on the compiled model's :class:`Completions`, first in,
first out.  A callback may therefore block, wait for another request, start
new ones or release the model without holding up any device.

One thread serves a model's completions.  A callback that waits (for another
request, say, whose own completion is queued behind it) announces it with
:func:`blocking`; while it waits a second thread serves the queue, so the
wait cannot wait on itself.  A thread that finds the queue empty while another
serves it ends.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager

__all__ = ["Completions", "blocking", "on_completion_thread"]

_log = logging.getLogger("inferplex")

_local = threading.local()  # .completions: the Completions whose thread this is


def on_completion_thread() -> bool:
    """True on a thread that runs completions (inside a user callback, say)."""
    return getattr(_local, "completions", None) is not None


@contextmanager
def blocking() -> Iterator[None]:
    """Wrap a wait that a completion may do: its queue gets another thread meanwhile."""
    owner: Completions | None = getattr(_local, "completions", None)
    if owner is None:
        yield
        return
    owner._blocked(+1)
    try:
        yield
    finally:
        owner._blocked(-1)


class Completions:
    """A first-in, first-out queue of completions with the threads that run them."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._queue: deque[Callable[[], None]] = deque()
        self._lock = threading.Lock()  # submit takes it directly: a Condition's methods are Python code
        self._cond = threading.Condition(self._lock)
        self._threads = 0
        self._idle = 0
        self._blocked_count = 0
        self._closed = False

    def submit(self, completion: Callable[[], None]) -> None:
        """Run ``completion()`` on a completion thread (its exceptions are logged)."""
        with self._lock:
            self._queue.append(completion)
            if self._idle:
                self._cond.notify()
                return
            if self._threads - self._blocked_count > 0:
                return
            try:
                self._start_thread()
                return
            except RuntimeError:  # interpreter shutdown starts no thread: run it here
                self._threads -= 1
                pending, self._queue = list(self._queue), deque()
        for item in pending:
            _run(item)

    def _blocked(self, change: int) -> None:
        with self._cond:
            self._blocked_count += change
            if change > 0 and self._queue and not self._idle and self._threads - self._blocked_count <= 0:
                self._start_thread()

    def _start_thread(self) -> None:
        self._threads += 1
        threading.Thread(target=self._serve, daemon=True, name=f"inferplex-callbacks-{self._name}").start()

    def _serve(self) -> None:
        _local.completions = self
        queue = self._queue
        try:
            while True:
                try:  # a non-empty queue is served without the lock (deque pops are atomic)
                    completion = queue.popleft()
                except IndexError:
                    completion = self._next()
                    if completion is None:
                        return
                _run(completion)
                del completion  # an idle thread must not keep the last request (and its model) alive
        finally:
            _local.completions = None

    def _next(self) -> Callable[[], None] | None:
        """The next completion, waiting for one; None when this thread is to end."""
        with self._cond:
            while not self._queue:
                serving = self._threads - self._blocked_count
                if self._closed or serving > 1:
                    self._threads -= 1
                    return None
                self._idle += 1
                self._cond.wait()
                self._idle -= 1
            return self._queue.popleft()

    def close(self) -> None:
        """Let the queued completions run, then end the threads.  Idempotent; never blocks."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()


def _run(completion: Callable[[], None]) -> None:
    try:
        completion()
    except Exception:  # noqa: BLE001 - one callback must not stop the others
        _log.exception("inferplex: a completion callback raised; the request is complete anyway")
