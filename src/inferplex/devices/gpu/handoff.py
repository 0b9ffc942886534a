"""Stream hand-offs between the caller and a run's worker: inputs in, device outputs out.

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

:func:`worker_stream` enters a run's worker stream after ordering it behind the
caller's CUDA inputs; :func:`hand_to_caller` orders the caller's stream behind
the worker's for outputs returned on the device.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable, Sequence
from contextlib import nullcontext
from typing import TYPE_CHECKING, Any

import torch

if TYPE_CHECKING:
    from inferplex.devices.gpu.workers import WorkerState

__all__ = ["hand_to_caller", "note_caller_stream", "wait_for_callers", "worker_stream"]

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


def worker_stream(state: WorkerState, values: Sequence[Any], device: torch.device, cuda: bool) -> Any:
    """The context a run works in: its worker's stream, ordered after the caller's CUDA inputs
    (``values``, sequences' elements included); no context on the emulated device."""
    if not cuda:
        return nullcontext()
    tensors = [t for v in values for t in (v if isinstance(v, list) else (v,))]  # sequences' too
    if any(isinstance(v, torch.Tensor) and v.is_cuda for v in tensors):
        # Inputs made on the caller's stream: our stream must not read them early.
        state.stream.wait_stream(torch.cuda.current_stream(device))
        wait_for_callers(state.stream, tensors)  # a run started on another thread (start_async)
    return state.on_stream


def hand_to_caller(state: WorkerState, result: dict[str, Any], keep: set[str], device: torch.device) -> None:
    """Order the caller's stream after this worker's, for tensors returned on the device.

    The worker ran on its own stream; without this the caller's next kernel
    (or a CUDA event it records) could run before the outputs are written.
    """
    caller = torch.cuda.current_stream(device)
    caller.wait_stream(state.stream)
    for name in keep:
        tensor = result.get(name)
        if isinstance(tensor, torch.Tensor) and tensor.is_cuda:
            tensor.record_stream(caller)  # its memory must outlive the caller's use, not ours
