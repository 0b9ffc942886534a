"""Run-time helpers of :class:`GpuProgram`: the per-op timing interpreter, the capture gate, host buffers."""

from __future__ import annotations

import queue
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import torch
import torch.fx

from inferplex.devices.gpu.tensors import numpy_to_torch

__all__ = ["CAPTURES", "GATE", "CaptureGate", "CaptureThread", "OnStream", "TimingInterpreter", "host_tensor",
           "pinned_empty"]


class TimingInterpreter(torch.fx.Interpreter):
    """Runs the GraphModule node by node and times each ONNX node (CUDA events or perf_counter)."""

    def __init__(self, module: torch.fx.GraphModule, cuda: bool):
        super().__init__(module)
        self.cuda = cuda
        self.marks: list[tuple[str, str, Any, Any]] = []

    def run_node(self, n: torch.fx.Node) -> Any:
        name = n.meta.get("onnx_name")
        if n.op != "call_function" or name is None:
            return super().run_node(n)
        start: torch.cuda.Event | float
        end: torch.cuda.Event | float
        if self.cuda:
            start = torch.cuda.Event(enable_timing=True)
            start.record()
        else:
            start = time.perf_counter()
        result = super().run_node(n)
        if self.cuda:
            end = torch.cuda.Event(enable_timing=True)
            end.record()
        else:
            end = time.perf_counter()
        self.marks.append((name, n.meta.get("onnx_op", ""), start, end))
        return result

    def seconds(self) -> dict[tuple[str, str], float]:
        """Seconds per (ONNX node name, op type), in first-run order (call after synchronising)."""
        totals: dict[tuple[str, str], float] = {}
        for name, op, start, end in self.marks:
            elapsed = start.elapsed_time(end) / 1000.0 if self.cuda else end - start
            totals[(name, op)] = totals.get((name, op), 0.0) + elapsed
        return totals


class CaptureGate:
    """Process-wide: many runs at once, or one CUDA-graph capture alone.

    While a stream captures, work that other threads queue (pinned-memory
    bookkeeping, event queries, allocations) can invalidate the capture or fail
    with ``operation not permitted when stream is capturing``.  Captures happen
    once per input shape, so pausing other runs for them costs little.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._running = 0
        self._capturing = False
        self._waiting = 0

    @contextmanager
    def run(self) -> Iterator[None]:
        with self._cond:
            self._cond.wait_for(lambda: not self._capturing and not self._waiting)
            self._running += 1
        try:
            yield
        finally:
            with self._cond:
                self._running -= 1
                self._cond.notify_all()

    @contextmanager
    def capture(self) -> Iterator[None]:
        with self._cond:
            self._waiting += 1
            self._cond.wait_for(lambda: not self._capturing and self._running == 0)
            self._waiting -= 1
            self._capturing = True
        try:
            yield
        finally:
            with self._cond:
                self._capturing = False
                self._cond.notify_all()


GATE = CaptureGate()


class CaptureThread:
    """One thread of the process that makes every CUDA-graph capture, for every worker.

    PyTorch keeps cuDNN's autotuning results (``cudnn.benchmark``) per thread,
    since cuDNN's execution plans are not thread-safe.  A worker thread that
    captured its own graph autotuned every convolution again first, one worker
    at a time under :data:`GATE`: ResNet-50's 8 workers took 5.2 s to have all
    served a request on an H200, against 0.09 s with every capture on this
    thread, at the same steady throughput (``bench/gpu_warmup.py``).  Captures
    run one at a time anyway; on one thread only the first autotunes.  A graph
    captured here replays on its worker's stream from the worker's thread.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._jobs: queue.SimpleQueue[tuple[Callable[[], Any], list[Any], threading.Event]] = \
            queue.SimpleQueue()
        self._thread: threading.Thread | None = None

    def call(self, work: Callable[[], Any]) -> Any:
        """Run ``work()`` on the capture thread and return its result (or raise its error)."""
        if threading.current_thread() is self._thread:
            return work()
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._serve, name="inferplex-capture", daemon=True)
                self._thread.start()
        outcome: list[Any] = []
        done = threading.Event()
        self._jobs.put((work, outcome, done))
        done.wait()
        value, error = outcome
        if error is not None:
            raise error
        return value

    def _serve(self) -> None:
        while True:
            work, outcome, done = self._jobs.get()
            try:
                outcome.extend((work(), None))
            except BaseException as error:  # noqa: BLE001 - handed to the waiting worker
                outcome.extend((None, error))
            finally:
                done.set()
                del work, outcome, done  # hold no graph past its capture


CAPTURES = CaptureThread()


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
        direct = _DIRECT_DTYPES[array.dtype] = array.dtype.name != "bfloat16" and array.dtype.isnative
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
