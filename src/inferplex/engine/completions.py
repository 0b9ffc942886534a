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

Closing does not stop completions from coming: a request started after the
model was released (by a callback, say, while an AsyncInferQueue still feeds
it) still ends, with an error, and its completion must still run.  So after
:meth:`Completions.close` the threads drain the queue and end only once it is
empty; a completion submitted after that gets a thread of its own again.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable

__all__ = ["Completions", "blocking", "on_completion_thread"]

_log = logging.getLogger("inferplex")

_local = threading.local()  # .completions: the Completions whose thread this is
_END = object()  # what _take_or_end returns to a thread that has ended


def on_completion_thread() -> bool:
    """True on a thread that runs completions (inside a user callback, say)."""
    return getattr(_local, "completions", None) is not None


class blocking:  # noqa: N801 - used as a function: ``with blocking(): ...``
    """Wrap a wait that a completion may do: its queue gets another thread meanwhile.

    A class rather than a ``contextmanager`` generator: every ``wait()`` passes
    through one, and off completion threads it does nothing but look once.
    """

    __slots__ = ("_owner",)

    def __enter__(self) -> None:
        owner: Completions | None = getattr(_local, "completions", None)
        self._owner = owner
        if owner is not None:
            owner._blocked(+1)

    def __exit__(self, *exc: object) -> None:
        owner = self._owner
        if owner is not None:
            self._owner = None
            owner._blocked(-1)


class Completions:
    """A first-in, first-out queue of completions with the threads that run them.

    The queue is a ``queue.SimpleQueue``: ``submit`` and an idle thread's wait are
    C code, so a request's hand-over to its completion costs one wake-up and no
    Python-level locking.  ``None`` in the queue wakes a waiting thread after
    :meth:`close` (one per thread), which then drains the queue and ends.
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
            if self._threads - self._blocked_count > 0:
                return  # a thread that finds the queue empty ends only under the lock: it sees this one
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
                completion = take() if not self._closed else self._take_or_end()
                if completion is None:  # close()'s wake-up: drain what is queued, then end
                    continue
                if completion is _END:
                    return
                try:
                    completion()  # type: ignore[operator]  # neither None nor _END here
                except Exception:  # noqa: BLE001 - one callback must not stop the others
                    _log.exception("inferplex: a completion callback raised; the request is complete anyway")
                del completion  # an idle thread must not keep the last request (and its model) alive
                if self._queue.empty() and self._threads - self._blocked_count > 1:
                    with self._lock:  # a thread started for a blocked completion: one thread is enough
                        if self._threads - self._blocked_count > 1:
                            self._threads -= 1
                            return
        finally:
            _local.completions = None

    def _take_or_end(self) -> Callable[[], None] | object | None:
        """Once closed: the next queued completion, or :data:`_END` (this thread has ended) when
        there is none.  The check and the count change share the lock with :meth:`submit`'s look
        at the count, so a completion queued meanwhile is either seen here or gets a new thread."""
        try:
            return self._queue.get_nowait()
        except queue.Empty:
            pass
        with self._lock:
            if not self._queue.empty():
                return None
            self._threads -= 1
            return _END

    def close(self) -> None:
        """Let the queued completions run, then end the threads.  Idempotent; never blocks.

        Completions submitted later still run (see the module docstring).
        """
        with self._lock:
            if self._closed:
                return
            self._closed = True
            for _ in range(self._threads):
                self._queue.put(None)  # wakes a thread waiting on the queue: it drains it, then ends


def _run(completion: Callable[[], None]) -> None:
    try:
        completion()
    except Exception:  # noqa: BLE001 - one callback must not stop the others
        _log.exception("inferplex: a completion callback raised; the request is complete anyway")
