"""Closed-loop throughput: keep an AsyncInferQueue full for a while, count what ends.

Shared by the bench scripts so that every throughput figure is measured the same
way (callbacks counted under a lock: they run on several worker threads).
"""

from __future__ import annotations

import threading
import time
from typing import Any


def keep_full(queue: Any, feeds: Any, seconds: float) -> tuple[int, float]:
    """Submit to ``queue`` for ``seconds`` and wait for all; (requests ended, seconds taken)."""
    count = [0]
    lock = threading.Lock()

    def done(_request: Any, _userdata: Any) -> None:
        with lock:
            count[0] += 1

    queue.set_callback(done)
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        queue.start_async(feeds, share_inputs=True)  # as benchmark_app: the engine, not a copy
    queue.wait_all()
    return count[0], time.perf_counter() - start
