"""What a :class:`~inferplex.devices.gpu.program.GpuProgram` keeps per worker and per lowering.

A worker owns a CUDA stream, its pinned staging buffers and the CUDA graphs it
captured; a variant is a lowering the program runs (the generic one, or one
specialized to an input signature), kept per signature in an :class:`LruCache`.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import numpy as np
import torch

from inferplex.devices.base import ProfilingRecord
from inferplex.devices.gpu.graphs import Captured
from inferplex.devices.gpu.lower import LoweredGraph
from inferplex.devices.gpu.support import OnStream

__all__ = ["LruCache", "PendingCopies", "Variant", "WorkerState"]


@dataclass(eq=False)
class Variant:
    """A lowering the program runs: the generic one, or one specialized to an input signature."""

    lowered: LoweredGraph
    forward: Any
    graphs: bool
    """Whether its runs are captured in CUDA graphs."""
    buffer_ptrs: frozenset[int]


@dataclass
class WorkerState:
    """One worker's stream, staging buffers, captured graphs and profiling records."""

    stream: Any = None
    on_stream: Any = None
    """``with state.on_stream``: the worker's stream current (:class:`OnStream`)."""
    pool: Any = None
    staging: dict[int, torch.Tensor] = field(default_factory=dict)
    staged: Any = None
    """Event recorded after the last host-to-device copies of a run."""
    borrowed: bool = False
    """This run copies asynchronously out of a caller's pinned tensor: wait for it before returning."""
    host_inputs: bool = False
    """This run copied host inputs through ``staging``."""
    graphs: OrderedDict[tuple[Any, ...], Captured] = field(default_factory=OrderedDict)
    records: list[ProfilingRecord] = field(default_factory=list)
    finished: Any = None
    """GPU_QUEUE_THROTTLE LOW: a blocking event, recorded on the stream to wait for it asleep."""
    stages: list[tuple[str, float, float]] = field(default_factory=list)
    """The last run's stages, when the program traces them (``DeviceProgram.stage_times``)."""

    @classmethod
    def new(cls, torch_device: torch.device, blocking_waits: bool) -> WorkerState:
        """A worker on ``torch_device``: with a stream of its own where that is a CUDA device."""
        if torch_device.type != "cuda":
            return cls()
        with torch.cuda.device(torch_device):
            stream = torch.cuda.Stream(torch_device)
            finished = torch.cuda.Event(blocking=True) if blocking_waits else None
            return cls(stream=stream, on_stream=OnStream(stream), pool=torch.cuda.graph_pool_handle(),
                       finished=finished)

    def wait_for_stream(self) -> None:
        """Wait until the worker's stream has run everything queued on it.

        CUDA's default wait spins on a host core; with GPU_QUEUE_THROTTLE LOW the
        thread sleeps on a blocking event until the device signals, leaving the
        core to other work (a host device serving beside the GPU).
        """
        if self.finished is None:
            self.stream.synchronize()
        else:
            self.finished.record(self.stream)
            self.finished.synchronize()


@dataclass
class PendingCopies:
    """A run's copies back to the host, queued but not waited for (``run_into``'s ``queued``)."""

    pending: list[str]
    arrays: dict[str, np.ndarray]
    done: Any
    """CUDA event recorded after them."""


K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class LruCache(Generic[K, V]):
    """A mapping that keeps at most ``limit`` entries, dropping the least recently used.

    Not thread-safe: the owner holds its own lock around it where threads share it.
    """

    def __init__(self, limit: int) -> None:
        self.limit = max(1, int(limit))
        self._entries: OrderedDict[K, V] = OrderedDict()

    def get(self, key: K) -> V | None:
        """The value of ``key`` (now the most recently used), or None."""
        value = self._entries.get(key)
        if value is not None:
            self._entries.move_to_end(key)
        return value

    def put(self, key: K, value: V) -> V:
        """Keep ``value`` for ``key`` unless one is kept already; return the one kept."""
        kept = self._entries.setdefault(key, value)
        self._entries.move_to_end(key)
        while len(self._entries) > self.limit:
            self._entries.popitem(last=False)
        return kept

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def __len__(self) -> int:
        return len(self._entries)

    def items(self) -> list[tuple[K, V]]:
        """The entries, least recently used first."""
        return list(self._entries.items())

    def keys(self) -> list[K]:
        return list(self._entries)

    def clear(self) -> None:
        self._entries.clear()
