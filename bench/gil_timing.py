"""How long work takes, and how long it keeps a Python thread beside it out (the GIL, or the cores)."""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Callable
from typing import Any

_LATE = 0.005
"""A ticker wake-up later than this counts as kept out."""


def timed_with_ticker(work: Callable[[], Any]) -> tuple[float, float]:
    """(seconds ``work`` took, seconds a 1 ms ticker thread beside it was kept out)."""
    late = [0.0]
    stop = threading.Event()

    def tick() -> None:
        last = time.perf_counter()
        while not stop.is_set():
            time.sleep(0.001)
            now = time.perf_counter()
            if now - last > _LATE:
                late[0] += now - last
            last = now

    ticker = threading.Thread(target=tick)
    ticker.start()
    start = time.perf_counter()
    result = work()
    elapsed = time.perf_counter() - start
    stop.set()
    ticker.join()
    del result
    return elapsed, late[0]


def alternating_medians(runners: dict[str, Callable[[], Any]],
                        rounds: int) -> tuple[dict[str, float], dict[str, float]]:
    """Each runner once to warm up, then ``rounds`` rounds in rotating order.

    Returns the median seconds taken and the median seconds kept out, by label.
    """
    for run in runners.values():
        run()  # warm-up: first loads of libraries and files
    labels = list(runners)
    seconds: dict[str, list[float]] = {label: [] for label in labels}
    kept_out: dict[str, list[float]] = {label: [] for label in labels}
    for index in range(rounds):
        for label in labels[index % len(labels):] + labels[:index % len(labels)]:
            took, late = timed_with_ticker(runners[label])
            seconds[label].append(took)
            kept_out[label].append(late)
    return ({k: statistics.median(v) for k, v in seconds.items()},
            {k: statistics.median(v) for k, v in kept_out.items()})


def print_table(title: str, rows: list[dict[str, Any]], before: str, peer: str) -> None:
    """One line per model and way: seconds, ratios to ``peer`` and ``before``, seconds kept out.

    Each row: ``{"model": name, "seconds": {way: s}, "kept_out": {way: s}}`` (from
    :func:`alternating_medians`); ``before`` and ``peer`` are ways in every row.
    """
    from rich.console import Console
    from rich.table import Table

    console = Console(highlight=False, width=max(Console().width, 120))
    table = Table(title=f"{title}: median seconds, and seconds a Python thread beside it was kept out",
                  title_justify="left")
    for column in ("model", "way", "seconds", f"vs {peer}", f"vs {before}", "kept out s",
                   f"kept out vs {before}"):
        table.add_column(column, justify="left" if column in ("model", "way") else "right")
    for row in rows:
        seconds, kept_out = row["seconds"], row["kept_out"]
        for way, took in seconds.items():
            late, late_before = kept_out[way], kept_out[before]
            table.add_row(row["model"], way, f"{took:.2f}", f"{took / seconds[peer]:.2f}x",
                          f"{took / seconds[before]:.2f}x", f"{late:.2f}",
                          f"{late / late_before:.2f}x" if late_before > 0 else "-")
    console.print(table)
