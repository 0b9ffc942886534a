"""Run-time helpers of :class:`GpuProgram`: stream switching, host buffers, and the release of the
source code torch.fx generates for each GraphModule (per-op timing is in :mod:`.profiling`)."""

from __future__ import annotations

import linecache
import warnings
import weakref
from typing import Any

import numpy as np
import torch
import torch.fx

from inferplex.devices.gpu.tensors import VIEWED_NUMPY_DTYPES, numpy_to_torch

__all__ = ["OnStream", "forget_source_when_collected", "host_tensor", "pinned_empty"]


class OnStream:
    """``with``: make ``stream`` (and its device) current in this thread, and restore both after.

    What ``torch.cuda.stream(stream)`` does, made once per worker: that one looks
    up the current device through several Python layers on every entry and exit,
    which counts once per request.  One object serves one thread at a time.
    """

    __slots__ = ("_device", "_previous_device", "_previous_stream", "stream")

    def __init__(self, stream: torch.cuda.Stream) -> None:
        self.stream = stream
        self._device = stream.device_index
        self._previous_device = -1
        self._previous_stream: torch.cuda.Stream | None = None

    def __enter__(self) -> torch.cuda.Stream:
        self._previous_device = torch.cuda.current_device()
        self._previous_stream = torch.cuda.current_stream(self._device)
        torch.cuda.set_stream(self.stream)  # makes its device current too
        return self.stream

    def __exit__(self, *exc: object) -> None:
        if self._previous_stream is not None:
            torch.cuda.set_stream(self._previous_stream)
        if self._previous_device != self._device:
            torch.cuda.set_device(self._previous_device)
        self._previous_stream = None


_DIRECT_DTYPES: dict[np.dtype, bool] = {}
"""Per numpy dtype: whether ``torch.from_numpy`` takes it as it is (numpy's ``dtype.name`` is slow)."""


def host_tensor(array: np.ndarray) -> torch.Tensor:
    """A CPU tensor over ``array``'s memory, without numpy's single-threaded copy where torch can read it.

    Read-only arrays are only read here (copied into a pinned buffer by torch's
    multi-threaded ``copy_``), so torch's warning about them does not apply.
    """
    direct = _DIRECT_DTYPES.get(array.dtype)
    if direct is None:
        name = array.dtype.name
        direct = _DIRECT_DTYPES[array.dtype] = name not in VIEWED_NUMPY_DTYPES and array.dtype.isnative
    if not direct or not (array.flags.c_contiguous
                          or all(s >= 0 and s % array.itemsize == 0 for s in array.strides)):
        return numpy_to_torch(array)
    if array.flags.writeable:
        return torch.from_numpy(array)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return torch.from_numpy(array)


def pinned_empty(shape: Any, dtype: torch.dtype) -> torch.Tensor:
    """A page-locked host tensor from torch's caching host allocator (reused after warm-up).

    The allocator hands a block out again only after the copies recorded on it
    have finished, so one per call is safe with asynchronous transfers.
    """
    return torch.empty(shape, dtype=dtype, pin_memory=True)


def forget_source_when_collected(module: torch.fx.GraphModule) -> None:
    """Drop the source torch.fx keeps for ``module``'s generated ``forward`` once ``module`` is freed.

    torch.fx compiles each GraphModule's code from a string and, so that
    tracebacks can show it, files that string under a fresh ``<eval_with_key>.N``
    name in :mod:`linecache` and in its own loader's cache, and never removes
    it: every lowering (one per compile, one per specialized input signature)
    would leave its source behind for the life of the process.  This ties the
    entries' life to the module's.
    """
    forward = getattr(type(module), "forward", None)
    key = getattr(getattr(forward, "__code__", None), "co_filename", None)
    if isinstance(key, str) and key.startswith("<eval_with_key>"):
        weakref.finalize(module, _forget_source, key)


def _forget_source(key: str) -> None:
    linecache.cache.pop(key, None)
    loader = getattr(torch.fx.graph_module, "_loader", None)  # torch.fx's private source cache
    eval_cache = getattr(loader, "eval_cache", None)
    if isinstance(eval_cache, dict):
        eval_cache.pop(key, None)
