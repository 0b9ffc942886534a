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
import queue
import threading
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
    """A first-in, first-out queue of completions with the threads that run them.

    The queue is a ``queue.SimpleQueue``: ``submit`` and an idle thread's wait are
    C code, so a request's hand-over to its completion costs one wake-up and no
    Python-level locking.  ``None`` in the queue tells the thread that takes it to
    end (sent by :meth:`close`, one per thread).
    """

    def __init__(self, name: str) -> None:
        self._name = name
        self._queue: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._threads = 0  # threads serving the queue, those blocked in a completion included
        self._blocked_count = 0
        self._closed = False

    def submit(self, completion: Callable[[], None]) -> None:
        """Run ``completion()`` on a completion thread (its exceptions are logged)."""
        self._queue.put(completion)
        if self._threads - self._blocked_count > 0 and not self._closed:
            return  # a serving thread takes it (threads end only under the lock, see _serve)
        with self._lock:
            if self._closed:
                self._queue.put(None)  # whichever thread runs it ends after it
            if self._threads - self._blocked_count > 0:
                return
            try:
                self._start_thread()
                return
            except RuntimeError:  # interpreter shutdown starts no thread: run it here
                self._threads -= 1
        self._drain_here()

    def _drain_here(self) -> None:
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                return
            if item is not None:
                _run(item)

    def _blocked(self, change: int) -> None:
        with self._lock:
            self._blocked_count += change
            if change > 0 and not self._queue.empty() and self._threads - self._blocked_count <= 0:
                self._start_thread()

    def _start_thread(self) -> None:
        self._threads += 1
        threading.Thread(target=self._serve, daemon=True, name=f"inferplex-callbacks-{self._name}").start()

    def _serve(self) -> None:
        _local.completions = self
        take = self._queue.get
        try:
            while True:
                completion = take()
                if completion is None:
                    with self._lock:
                        self._threads -= 1
                        return
                _run(completion)
                del completion  # an idle thread must not keep the last request (and its model) alive
                if self._queue.empty() and self._threads - self._blocked_count > 1:
                    with self._lock:  # a thread started for a blocked completion: one thread is enough
                        if self._threads - self._blocked_count > 1:
                            self._threads -= 1
                            return
        finally:
            _local.completions = None

    def close(self) -> None:
        """Let the queued completions run, then end the threads.  Idempotent; never blocks."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            for _ in range(self._threads):
                self._queue.put(None)


def _run(completion: Callable[[], None]) -> None:
    try:
        completion()
    except Exception:  # noqa: BLE001 - one callback must not stop the others
        _log.exception("inferplex: a completion callback raised; the request is complete anyway")
