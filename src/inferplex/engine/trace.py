"""The timeline: where each request's time goes, as a Chrome / Perfetto trace.

With ``ENABLE_TRACE`` set when compiling, the engine records each request's
stages (``queued``, ``run`` on a device and worker, HETERO subgraphs and
PIPELINE stages as ``subgraph <i>``, ``transfer``, ``callback``; within a run,
the stages its device tells apart, such as the GPU's ``host-to-device copy``,
``compute`` and ``device-to-host copy``) and
``compiled.get_property("TRACE")`` returns them in the JSON trace-event format
that chrome://tracing and ui.perfetto.dev open: one track per device worker,
one per stage kind off the devices.  Off by default: requests then carry no
timeline and every record call returns at once.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections import deque
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from inferplex.engine.request import Request

__all__ = ["Timeline"]

MAX_EVENTS = 200_000
"""Events kept per compiled model; the oldest go first (the trace stays bounded in memory)."""


class Timeline:
    """The recorded stages of one compiled model's requests."""

    def __init__(self, model_name: str) -> None:
        self._model_name = model_name
        self._events: deque[tuple[int, str, str, int | None, float, float]] = deque(maxlen=MAX_EVENTS)
        self._counter = itertools.count()
        self._lock = threading.Lock()
        self._origin = time.perf_counter()

    def number(self) -> int:
        """A new request's number on the trace (``args.request``), unique for this model.

        Given when the request is made, not keyed by ``id(request)``: a request that has
        ended frees its id for the next one, and two requests would share a number."""
        return next(self._counter)  # itertools.count: one C call, atomic under the GIL

    def record(self, request: Request, stage: str, device: str, begin: float, end: float | None,
               worker: int | None) -> None:
        """One stage of ``request`` from ``begin`` to ``end`` (perf_counter seconds; None: now)."""
        finish = time.perf_counter() if end is None else end
        with self._lock:
            self._events.append((request.trace_number, stage, device, worker, begin, finish))

    def to_chrome(self) -> dict[str, Any]:
        """The trace-event JSON object (``{"traceEvents": [...]}``), times in microseconds."""
        with self._lock:
            events = list(self._events)
        tracks: dict[str, int] = {}
        trace: list[dict[str, Any]] = []
        for number, stage, device, worker, begin, end in events:
            track = device if worker is None else f"{device} worker {worker}"
            tid = tracks.setdefault(track, len(tracks) + 1)
            trace.append({"name": stage, "cat": device, "ph": "X", "pid": 1, "tid": tid,
                          "ts": (begin - self._origin) * 1e6, "dur": max(0.0, end - begin) * 1e6,
                          "args": {"request": number, "device": device}})
        meta = [{"name": "process_name", "ph": "M", "pid": 1, "args": {"name": self._model_name}}]
        meta += [{"name": "thread_name", "ph": "M", "pid": 1, "tid": tid, "args": {"name": track}}
                 for track, tid in tracks.items()]
        return {"traceEvents": meta + trace, "displayTimeUnit": "ms"}
