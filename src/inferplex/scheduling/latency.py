"""A device's latency estimate: the median of its latest runs, robust to warm-up.

A device's first runs pay one-off costs (CUDA graph capture, lazy
initialisation): one slow outlier must not make a fast device look slow, or
EARLIEST_FINISH would stop sending it the requests that would correct the
estimate.  So the first run of each worker is left out, and the estimate is the
median of the latest :data:`WINDOW` runs.  Warm-up can also hold back later runs
(a worker process's workers capture one at a time, and other runs wait
meanwhile), so a run :data:`OUTLIER_FACTOR` times faster than the estimate drops
the samples that much slower than it: an estimate that errs fast corrects itself
(the device gets requests, and their times); one that errs slow would not (the
device gets a probe every :data:`PROBE_AFTER` seconds at best).
"""

from __future__ import annotations

import math
from collections import deque

__all__ = ["LatencyEstimate", "expected_left"]

WINDOW = 9
"""Latest run times the estimate is the median of."""
OUTLIER_FACTOR = 4.0
"""A run this many times faster than the estimate drops the samples this many times slower than it."""
PROBE_AFTER = 2.0
"""Seconds without a completed run after which an idle device's latency counts as unknown again."""


class LatencyEstimate:
    """Seconds per request on one device with ``workers`` workers."""

    def __init__(self, workers: int) -> None:
        self.workers = workers
        self.latency: float | None = None
        """The estimate; None until a run past warm-up succeeded."""
        self.warm_runs = 0
        """Successful runs left out as warm-up (one per worker)."""
        self.last_done = -math.inf
        """When the latest run ended (any outcome)."""
        self._recent: deque[float] = deque(maxlen=WINDOW)

    @property
    def warm(self) -> bool:
        """Whether every worker has run once (past warm-up)."""
        return self.warm_runs >= self.workers

    def record(self, elapsed: float, now: float, success: bool = True) -> None:
        """Count a run that took ``elapsed`` seconds and ended at ``now``; successes feed the estimate."""
        self.last_done = now
        if not success:
            return
        if not self.warm:
            self.warm_runs += 1
            return
        if self.latency is not None and elapsed * OUTLIER_FACTOR < self.latency:
            kept = [t for t in self._recent if t <= elapsed * OUTLIER_FACTOR]
            self._recent.clear()
            self._recent.extend(kept)
        self._recent.append(elapsed)
        ordered = sorted(self._recent)
        self.latency = ordered[(len(ordered) - 1) // 2]

    def current(self, now: float, busy: int) -> float | None:
        """The estimate a policy should use at ``now``: None when stale (idle past :data:`PROBE_AFTER`)."""
        if self.latency is not None and busy == 0 and now - self.last_done > PROBE_AFTER:
            return None  # measure again (e.g. after a slow first run)
        return self.latency


def expected_left(latency: float, elapsed: float) -> float:
    """Seconds a run that has taken ``elapsed`` is expected to go on.

    Past its usual latency, a run is assumed to go on about as long again as it
    has overrun, so a hanging device looks slower and slower, not about to finish.
    """
    return latency - elapsed if elapsed <= latency else elapsed - latency
