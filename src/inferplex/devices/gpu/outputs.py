"""A run's outputs handed back by name: host arrays, device tensors, sequences and optionals.

Outputs named in ``keep`` stay torch tensors on the device (a copy where the
tensor is a captured graph's output, which its next replay overwrites, or shares
memory with a constant).  On CUDA the others come back as numpy arrays over
pinned host memory from torch's caching host allocator, or in the arrays
``run_into``'s ``host_outputs`` gives, with non-blocking copies on the worker's
stream; with ``queue_behind`` those copies are queued and not waited for (see
:class:`~.workers.PendingCopies`).  On the emulated device they are numpy views
of the tensors (copied where they may share a constant's or a user's memory).
A sequence output comes back as a list of numpy arrays, an optional one as its
value or None.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from inferplex.devices.gpu.lower import torch_to_numpy
from inferplex.devices.gpu.profiling import transfer_record
from inferplex.devices.gpu.support import pinned_empty
from inferplex.devices.gpu.transfers import given_output, host_arrays, host_copy
from inferplex.devices.gpu.workers import PendingCopies, Variant, WorkerState

__all__ = ["OutputCollector"]

HostOutputs = Callable[[str, Any, tuple[int, ...]], Any]


@dataclass(frozen=True)
class OutputCollector:
    """How one program hands its outputs back (see the module docstring)."""

    device: str
    """The program's device name (``GPU.0``), for profiling records."""
    cuda: bool
    """Whether the program runs on CUDA (else on the emulated CPU device)."""
    blocking_waits: bool
    """Whether the events recorded after the copies block (``GPU_QUEUE_THROTTLE`` LOW) or spin."""
    profiling: bool
    """Whether runs record the copies back (``ENABLE_PROFILING``)."""

    def collect(self, state: WorkerState, variant: Variant, outputs: Sequence[Any], keep: set[str],
                host_outputs: HostOutputs | None = None,
                queue_behind: bool = False) -> tuple[dict[str, Any], PendingCopies | None]:
        """Outputs by name: torch tensors for ``keep``, numpy arrays (pinned host memory, or the
        arrays ``host_outputs`` gives) for the rest.  With ``queue_behind``, copies back are
        queued and not waited for: the copies, and the event recorded after them, come back
        with the outputs (tensors until :func:`.transfers.host_arrays`)."""
        start = time.perf_counter()
        result: dict[str, Any] = {}
        pending: list[str] = []
        arrays: dict[str, np.ndarray] = {}  # the host_outputs arrays written by the device
        for name, tensor in zip(variant.lowered.output_names, outputs, strict=True):
            if not isinstance(tensor, torch.Tensor):  # a sequence or an optional: copied at once
                result[name] = tensor if name in keep else host_copy(tensor)
            elif name in keep:
                # A graph's outputs are overwritten by its next replay: the caller gets a copy.
                aliased = variant.graphs or self.aliases(variant, tensor)
                result[name] = tensor.clone() if aliased else tensor
            elif self.cuda:
                given = given_output(host_outputs, name, tensor)
                if given is None:
                    host = pinned_empty(tensor.shape, tensor.dtype)
                else:
                    host, arrays[name] = torch.from_numpy(given), given
                result[name] = host.copy_(tensor, non_blocking=True)
                pending.append(name)
            else:
                result[name] = self._on_host(variant, name, tensor, host_outputs)
        return result, self._finish(state, result, pending, arrays, queue_behind, start)

    def _on_host(self, variant: Variant, name: str, tensor: torch.Tensor,
                 host_outputs: HostOutputs | None) -> np.ndarray:
        """An output of the emulated device: a numpy view, or a copy where memory may be shared."""
        array = torch_to_numpy(tensor)
        given = given_output(host_outputs, name, tensor)
        if given is not None:
            np.copyto(given, array, casting="no")
            return given
        return array.copy() if self.aliases(variant, tensor) else array

    def _finish(self, state: WorkerState, result: dict[str, Any], pending: list[str],
                arrays: dict[str, np.ndarray], queue_behind: bool, start: float) -> PendingCopies | None:
        """Wait for (or queue) the copies back, and note when the run's staging buffers are free."""
        if pending and queue_behind:
            done = torch.cuda.Event(blocking=self.blocking_waits)
            done.record(state.stream)
            state.staged = done  # the next run's staging waits for this run's copies
            return PendingCopies(pending, arrays, done)
        if pending:
            state.wait_for_stream()  # the inputs' copies are done too: no staging event needed
            state.staged = None
            host_arrays(result, pending, arrays)
        elif state.host_inputs:
            state.staged = torch.cuda.Event(blocking=self.blocking_waits)
            state.staged.record(state.stream)
            if state.borrowed:
                state.staged.synchronize()  # the caller may reuse its pinned input once we return
        if self.profiling and pending:
            state.records.append(transfer_record(self.device, "CPU", start,
                                                 sum(result[n].nbytes for n in pending)))
        return None

    def aliases(self, variant: Variant, tensor: torch.Tensor) -> bool:
        """Whether an output shares memory with a constant (or, on the host, may share a user's array)."""
        if not self.cuda:
            return True
        return tensor.numel() > 0 and tensor.untyped_storage().data_ptr() in variant.buffer_ptrs
