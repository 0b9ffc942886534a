"""A set/clear flag that threads can wait for: ``threading.Event`` without its Condition.

Every request sets and clears one (its "ended" flag), so the cost is on the hot
path.  ``threading.Event`` goes through ``threading.Condition``, whose methods
are Python code; here ``set`` and ``clear`` are a plain attribute write and, when
some thread waits, one lock release per waiter.  Waiters park on a lock of
their own, as :class:`~inferplex.engine.request.Outcome` does.
"""

from __future__ import annotations

import threading

__all__ = ["Latch"]


class Latch:
    """``is_set`` / ``set`` / ``clear`` / ``wait(timeout)`` as ``threading.Event`` has them."""

    __slots__ = ("_guard", "_set", "_waiters")

    def __init__(self, is_set: bool = False) -> None:
        self._guard = threading.Lock()
        self._set = is_set
        self._waiters: list[threading.Lock] = []

    def is_set(self) -> bool:
        return self._set

    def clear(self) -> None:
        self._set = False

    def clear_if_set(self) -> bool:
        """Clear it if it is set; whether it was (``is_set`` and ``clear`` in one call: callers
        that must not race another clearer hold a lock of their own around it)."""
        if not self._set:
            return False
        self._set = False
        return True

    def set(self) -> None:
        """Set it and wake every waiter."""
        with self._guard:
            self._set = True
            if not self._waiters:
                return
            waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            waiter.release()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until set, or for ``timeout`` seconds; whether it is set."""
        if self._set:
            return True
        with self._guard:
            if self._set:
                return True
            waiter = threading.Lock()
            waiter.acquire()
            self._waiters.append(waiter)
        if waiter.acquire(timeout=-1 if timeout is None else max(0.0, timeout)):
            return True
        with self._guard:
            if waiter in self._waiters:  # timed out before any set(): stop waiting
                self._waiters.remove(waiter)
                return self._set
        return True  # set() released it just after the timeout
