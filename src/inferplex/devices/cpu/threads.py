"""Thread priority of an engine's worker threads (``THREAD_PRIORITY=LOW``).

Both CPU engines start their worker threads while a model compiles (ONNX
Runtime's intra-op pool per session, OpenVINO's stream threads), and a new
thread on Linux takes its creator's nice value.  Compiling on a thread of the
lowest priority thus gives the engine's workers that priority, while the thread
that calls ``run`` keeps its own.
"""

from __future__ import annotations

import contextlib
import os
import platform
import threading
from collections.abc import Callable
from typing import TypeVar

__all__ = ["in_low_priority_thread", "per_thread_priority"]

LOWEST_PRIORITY = 19
"""The nice value of engine threads under THREAD_PRIORITY=LOW."""

_T = TypeVar("_T")


def per_thread_priority() -> bool:
    """Whether the OS gives each thread its own priority (Linux): elsewhere LOW would slow the process."""
    return platform.system() == "Linux" and hasattr(os, "setpriority")


def in_low_priority_thread(make: Callable[[], _T]) -> _T:
    """``make()`` on a new thread at the lowest priority: the threads it starts inherit that priority."""
    result: list[_T] = []
    failure: list[BaseException] = []

    def body() -> None:
        try:
            with contextlib.suppress(OSError):  # not allowed here: the engine still works
                os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), LOWEST_PRIORITY)
            result.append(make())
        except BaseException as error:  # noqa: BLE001 - raised again in the caller's thread
            failure.append(error)

    thread = threading.Thread(target=body, name="inferplex-cpu-compile")
    thread.start()
    thread.join()
    if failure:
        raise failure[0]
    return result[0]
