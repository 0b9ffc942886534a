"""CUDA tensors handed from the caller's thread to a run that starts on another thread.

torch orders GPU work by streams: a tensor the caller made on its current stream
(``with torch.cuda.stream(s):``) is ready for work queued on that stream after
it, and for nothing else.  A synchronous run starts on the caller's thread, where
that stream is still current, and the worker's stream waits for it.  A run
started with ``start_async`` (or by ``AsyncInferQueue``, MULTI, HETERO) starts on
a pool thread, whose current stream is the default one: waiting for that would
let the worker read the tensor before the caller's stream has written it.

:func:`note_caller_stream`, called on the caller's thread as the request starts,
records an event on the caller's current stream for each CUDA tensor; the run
(:func:`wait_for_callers`) makes its worker's stream wait for that event, on the
device, with no host wait.  A tensor given to several requests keeps the latest
event (it comes after the earlier ones on the same stream); the record goes
when the tensor is collected.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable
from typing import Any

import torch

__all__ = ["note_caller_stream", "wait_for_callers"]

_NOTED: dict[int, tuple[weakref.ref[torch.Tensor], torch.cuda.Event]] = {}
"""id(tensor) -> (the tensor, the event recorded after it on the caller's stream).  Keyed by id:
a tensor's ``==`` compares elements, so tensors cannot be dictionary keys themselves."""


def note_caller_stream(value: Any) -> None:
    """Record, for a CUDA tensor, where the calling thread's current stream stands now."""
    if not isinstance(value, torch.Tensor) or not value.is_cuda:
        return
    event = torch.cuda.Event()
    event.record(torch.cuda.current_stream(value.device))
    key = id(value)
    entry = _NOTED.get(key)
    if entry is None or entry[0]() is not value:
        weakref.finalize(value, _NOTED.pop, key, None)
    _NOTED[key] = (weakref.ref(value), event)


def wait_for_callers(stream: torch.cuda.Stream, values: Iterable[Any]) -> None:
    """Make ``stream`` wait for the events noted for ``values`` (those with none are skipped)."""
    for value in values:
        entry = _NOTED.get(id(value))
        if entry is not None and entry[0]() is value:
            stream.wait_event(entry[1])
