"""Bounded benchmark phases that say where their time went when they run out.

:class:`Phases` runs each phase of a benchmark on a thread of its own, within a
time limit per phase and a budget for the run, and saves what came back.  A
phase reports its steps and requests through a :class:`Progress`; one that
runs out is reported with them, the RAY actors alive, and where the process's
threads wait, so a run never ends with no result and no reason.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["Counted", "Phases", "Progress", "log", "save"]

class Progress:
    """How far a phase got: the steps it reached, when, and its requests submitted and ended.

    Written by the phase's threads, read by :class:`Phases` when the phase runs out.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.steps: list[tuple[str, float]] = []
        self.submitted = 0
        self.ended = 0
        self.last_end: float | None = None

    def step(self, name: str) -> None:
        with self._lock:
            self.steps.append((name, time.monotonic()))

    def submit(self) -> None:
        with self._lock:
            self.submitted += 1

    def end(self) -> None:
        with self._lock:
            self.ended += 1
            self.last_end = time.monotonic()

    def as_dict(self) -> dict[str, Any]:
        """Each step reached and its seconds (the last one: so far), requests submitted and ended."""
        now = time.monotonic()
        with self._lock:
            steps = list(self.steps)
            counts = {"submitted": self.submitted, "ended": self.ended,
                      "last_end_s_ago": None if self.last_end is None else round(now - self.last_end, 1)}
        ends = [when for _, when in steps[1:]] + [now]
        timed = {name: round(end - begin, 2) for (name, begin), end in zip(steps, ends, strict=True)}
        return {"steps": timed, "in_step": steps[-1][0] if steps else None, **counts}

    def describe(self) -> str:
        """``compile 31.2 s, first inference 0.1 s, warm-up 38.0 s so far; 120 of 432 requests ended
        (the last 30.1 s ago)``."""
        facts = self.as_dict()
        steps = list(facts["steps"].items())
        words = [f"{name} {took:g} s" + (" so far" if index == len(steps) - 1 else "")
                 for index, (name, took) in enumerate(steps)]
        ended = f"{facts['ended']} of {facts['submitted']} requests ended"
        if facts["last_end_s_ago"] is not None:
            ended += f" (the last {facts['last_end_s_ago']:g} s ago)"
        return f"{', '.join(words) or 'not started'}; {ended}"


class Counted:
    """An AsyncInferQueue whose submits and completions are counted in a :class:`Progress`."""

    def __init__(self, queue: Any, progress: Progress) -> None:
        self._queue = queue
        self._progress = progress

    def set_callback(self, callback: Callable[[Any, Any], None]) -> None:
        def counted(request: Any, userdata: Any) -> None:
            self._progress.end()
            callback(request, userdata)

        self._queue.set_callback(counted)

    def start_async(self, *args: Any, **kwargs: Any) -> None:
        self._progress.submit()
        self._queue.start_async(*args, **kwargs)

    def wait_all(self) -> None:
        self._queue.wait_all()

    def __len__(self) -> int:
        return len(self._queue)


def log(message: str) -> None:
    print(message, flush=True)


class Phases:
    """Runs each phase with a time limit, within the run's budget, and saves what came back."""

    def __init__(self, budget: float, limit: float, result: dict[str, Any], saved_as: str) -> None:
        """``saved_as``: the file under ``$OUT`` that :attr:`result` is written to after each phase."""
        self.saved_as = saved_as
        self.deadline = time.monotonic() + budget
        self.limit = limit
        self.result = result
        self.stuck: list[str] = []
        """Phases that gave no result in time (their threads may still run)."""

    def run(self, name: str, function: Callable[..., Any], *args: Any) -> Any:
        """``function(progress, *args)`` on a thread of its own; its value, or None if it failed or
        ran out of time (then said: how far it got, see :meth:`_ran_out`)."""
        left = self.deadline - time.monotonic()
        if left < 5.0:
            log(f"  {name}: skipped, the run's budget is spent")
            self.result.setdefault("skipped", []).append(name)
            return None
        box: dict[str, Any] = {}
        progress = Progress()

        def target() -> None:
            try:
                box["value"] = function(progress, *args)
            except BaseException as error:  # noqa: BLE001 - reported as this phase's failure
                box["error"] = error

        thread = threading.Thread(target=target, daemon=True, name=f"bench {name}")
        thread.start()
        thread.join(min(self.limit, left))
        if thread.is_alive():
            self._ran_out(name, progress, min(self.limit, left))
            return None
        if "error" in box:
            log(f"  {name}: failed: {type(box['error']).__name__}: {str(box['error'])[:500]}")
            self.result.setdefault("failed", {})[name] = f"{type(box['error']).__name__}: {box['error']}"
            save(self.result, self.saved_as)
            return None
        self.result[name] = box["value"]
        save(self.result, self.saved_as)
        return box["value"]

    def _ran_out(self, name: str, progress: Progress, limit: float) -> None:
        """Say where a phase's time went: its steps, its requests, the actors, the waiting threads."""
        waits = _where_threads_wait()
        actors = _ray_actors()
        log(f"  {name}: no result within {limit:.0f} s: {progress.describe()}; skipped (it may still load "
            f"the cluster, so later rows may read low)")
        log(f"    RAY actors alive: {', '.join(f'{d} x{n}' for d, n in actors.items()) or 'none'}")
        log("    threads of this process wait in: " + "; ".join(f"{n} x {where}" for where, n in waits[:6]))
        self.stuck.append(name)
        self.result.setdefault("timed_out", []).append(name)
        self.result.setdefault("ran_out", {})[name] = {**progress.as_dict(), "actors": actors,
                                                       "threads": dict(waits)}
        save(self.result, self.saved_as)


def _where_threads_wait() -> list[tuple[str, int]]:
    """Threads of this process by where they wait, most first: their innermost inferplex frame and,
    where it called into Ray, Ray's innermost (``program.py:196 _collect > worker.py:1007 get_objects``);
    else their innermost frame."""
    import traceback
    from collections import Counter

    def named(entry: traceback.FrameSummary) -> str:
        return f"{Path(entry.filename).name}:{entry.lineno} {entry.name}"

    inferplex, ray = (_package_dir(name) for name in ("inferplex", "ray"))
    places: Counter[str] = Counter()
    for frame in sys._current_frames().values():
        stack = traceback.extract_stack(frame)
        ours = [index for index, entry in enumerate(stack)
                if inferplex and entry.filename.startswith(inferplex)]
        inner = stack[ours[-1] + 1:] if ours else stack
        in_ray = [entry for entry in inner if ray and entry.filename.startswith(ray)]
        parts = ([named(stack[ours[-1]])] if ours else []) + ([named(in_ray[-1])] if in_ray else [])
        places[" > ".join(parts) or named(stack[-1])] += 1
    return places.most_common()


def _package_dir(name: str) -> str | None:
    """The directory of an imported package (with a trailing separator), or None."""
    module = sys.modules.get(name)
    where = getattr(module, "__file__", None)
    return str(Path(where).parent) + os.sep if where else None


def _ray_actors() -> dict[str, int]:
    """inferplex's RAY actors alive now, by device (``inferplex RAY.i <id>`` names)."""
    ray = sys.modules.get("ray")
    if ray is None or not ray.is_initialized():
        return {}
    try:
        names = ray.util.list_named_actors()
    except Exception:  # noqa: BLE001 - the cluster cannot say: nothing to report
        return {}
    devices = [name.split()[1] for name in names if name.startswith("inferplex ") and len(name.split()) == 3]
    return {device: devices.count(device) for device in sorted(set(devices))}


def save(result: dict[str, Any], name: str) -> None:
    """Write ``result`` as JSON to ``$OUT/name``, where ``OUT`` is set."""
    if os.environ.get("OUT"):
        (Path(os.environ["OUT"]) / name).write_text(json.dumps(result, indent=2, default=str))
