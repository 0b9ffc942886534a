"""The cool-down of a device that failed a request (runtime fallback).

A device that fails a request, or runs one past ``MULTI_REQUEST_TIMEOUT``, is
left out for ``base * 2**level`` seconds, ``level`` growing (up to
:data:`MAX_DOUBLINGS`) while it keeps failing and back to 0 after a success.
Each quarantine is an episode with a number, so that a request that turns out
to fail on every device (its own fault, not the devices') lifts exactly the
quarantines it caused, and not a later one.
"""

from __future__ import annotations

import math

__all__ = ["Quarantine"]

MAX_DOUBLINGS = 4
"""The cool-down doubles at most this many times (16x the first)."""


class Quarantine:
    """One device's quarantine state and counters."""

    def __init__(self) -> None:
        self.until = -math.inf
        """When the current quarantine ends (in the past: none)."""
        self.level = 0
        self.episode = 0
        """Number of the latest quarantine."""
        self.quarantines = 0
        """Quarantines started."""
        self.returns = 0
        """Quarantines that ended with the device taking requests again."""
        self._in = False

    def active(self, now: float) -> bool:
        return now < self.until

    def start(self, now: float, base: float) -> int:
        """Leave the device out from ``now`` (no-op while one runs); return the episode number."""
        if self.active(now):
            return self.episode
        self.until = now + base * 2 ** min(self.level, MAX_DOUBLINGS)
        self.level += 1
        self.episode += 1
        self.quarantines += 1
        self._in = True
        return self.episode

    def succeeded(self) -> None:
        """A run succeeded: the next quarantine starts from ``base`` again."""
        self.level = 0

    def check_return(self, now: float) -> bool:
        """True once, when a quarantine has ended and the device takes requests again."""
        if self._in and not self.active(now):
            self._in = False
            self.returns += 1
            return True
        return False

    def lift(self, now: float, episode: int | None = None) -> None:
        """End the quarantine now (``episode``: only if it is still that one)."""
        if self.active(now) and (episode is None or episode == self.episode):
            self.until = now
            self.level = max(0, self.level - 1)
