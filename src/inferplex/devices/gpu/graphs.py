"""CUDA graphs of :class:`~inferplex.devices.gpu.program.GpuProgram`: capturing one, and when.

Each worker captures a graph per input signature on its first run of it (a
warm-up run first: lazy initialisation, cuDNN autotuning), then replays it.
:data:`GATE` lets one capture run alone in the process; :data:`CAPTURES` makes
every capture on one thread, so that cuDNN autotunes once (see
:class:`CaptureThread`).

:func:`warm_up` makes those first runs part of compiling, for a model whose
input shapes are all static: the compile returns with every worker's graph
captured, so no request waits for a capture, and AUTO's startup helper serves
while they happen: the first request after AUTO's hand-over then waits for no
capture or cuDNN autotuning (``python bench/multi_auto.py --first-inference-only``).
"""

from __future__ import annotations

import logging
import queue
import threading
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

if TYPE_CHECKING:
    from inferplex.devices.base import DeviceProgram
    from inferplex.devices.gpu.lower import LoweredGraph

__all__ = ["CAPTURES", "GATE", "CaptureGate", "CaptureThread", "Captured", "capture_graph", "warm_up"]

_log = logging.getLogger("inferplex")


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


_Jobs = queue.SimpleQueue[tuple[Callable[[], Any], list[Any], threading.Event] | None]


class CaptureThread:
    """One thread of the process that makes every CUDA-graph capture, for every worker.

    PyTorch keeps cuDNN's autotuning results (``cudnn.benchmark``) per thread,
    since cuDNN's execution plans are not thread-safe.  A worker thread that
    captured its own graph would autotune every convolution again first, one
    worker at a time under :data:`GATE` (``bench/gpu_warmup.py`` measures it).
    Captures run one at a time anyway; on one thread only the first autotunes.  A graph
    captured here replays on its worker's stream from the worker's thread.

    The thread lives while some program holds a :meth:`lease` on it: it starts
    on the first capture and ends when the last lease is released (the last
    program capturing graphs closed), so no thread outlives the programs.  It
    holds nothing of a capture once that capture has returned.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._jobs: _Jobs = queue.SimpleQueue()
        """The running thread's queue (each thread has its own: one ending never takes another's job)."""
        self._thread: threading.Thread | None = None
        self._leases = 0

    def lease(self) -> Callable[[], None]:
        """Count one more user; returns the function (idempotent) that ends its use."""
        with self._lock:
            self._leases += 1
        released: list[bool] = []

        def release() -> None:
            if not released:
                released.append(True)
                self._release()

        return release

    def _release(self) -> None:
        with self._lock:
            self._leases -= 1
            if self._leases > 0 or self._thread is None:
                return
            thread, self._thread = self._thread, None
            self._jobs.put(None)  # ends the thread once the jobs queued before it have run
        if thread is not threading.current_thread():
            thread.join()

    @property
    def running(self) -> bool:
        """Whether the capture thread exists now."""
        with self._lock:
            return self._thread is not None

    def call(self, work: Callable[[], Any]) -> Any:
        """Run ``work()`` on the capture thread and return its result (or raise its error)."""
        if threading.current_thread() is self._thread:
            return work()
        with self._lock:
            if self._thread is None:
                self._jobs = queue.SimpleQueue()
                self._thread = threading.Thread(target=_serve, args=(self._jobs,), name="inferplex-capture",
                                                daemon=True)
                self._thread.start()
            jobs = self._jobs
        outcome: list[Any] = []
        done = threading.Event()
        jobs.put((work, outcome, done))
        done.wait()
        value, error = outcome
        if error is not None:
            raise error
        return value


def _serve(jobs: _Jobs) -> None:
    """The capture thread: runs each job in turn until it takes None."""
    while (job := jobs.get()) is not None:
        work, outcome, done = job
        try:
            outcome.extend((work(), None))
        except BaseException as error:  # noqa: BLE001 - handed to the waiting worker
            outcome.extend((None, error))
        finally:
            done.set()
            del work, outcome, done, job  # hold no graph past its capture


CAPTURES = CaptureThread()


@dataclass(eq=False)
class Captured:
    """A captured graph with its own input and output tensors."""

    graph: Any
    inputs: list[torch.Tensor]
    """Refilled before each replay."""
    outputs: tuple[torch.Tensor, ...]
    """Overwritten by each replay."""
    owner: Any
    """What the graph reads (the lowering's buffers): held as long as the graph."""


def _clear_cublas_workspaces() -> None:
    clear = getattr(torch._C, "_cuda_clearCublasWorkspaces", None)  # noqa: SLF001 - torch's own cudagraph trees call it
    if clear is not None:
        clear()


@contextmanager
def _workspaces_in_pool() -> Iterator[None]:
    """Within: cuBLAS allocates its workspace anew, so a capture puts it in the graph's private pool.

    cuBLAS keeps one workspace per (handle, stream) for the life of the process,
    and a captured GEMM bakes in its address.  A workspace made by the warm-up run
    (or any earlier run on the stream) lives outside the graph's pool, and torch
    frees every one of them whenever it likes: ``torch.compile``'s CUDA-graph
    trees (modes ``reduce-overhead`` and ``max-autotune``) clear them before and
    after each warm-up and recording, then empty the allocator's cache, and
    destroying a graph clears its stream's.  A graph that read such a workspace
    then replays into freed or unmapped memory: ``unspecified launch failure``,
    sticky to the CUDA context, at the next inferplex run after the user's
    compile.  Cleared before the capture, the workspace the graph uses is
    allocated in its pool, which lives as long as the graph; cleared after, the
    worker's later eager runs do not take that pool memory as their own
    workspace.  Cleared workspaces of other streams are only made again on their
    next use (what the CUDA-graph trees do anyway).
    """
    _clear_cublas_workspaces()
    try:
        yield
    finally:
        _clear_cublas_workspaces()


def capture_graph(forward: Callable[..., Sequence[torch.Tensor]], tensors: list[torch.Tensor],
                  stream: torch.cuda.Stream, pool: Any, owner: Any,
                  on_capture_thread: bool = True) -> Captured | None:
    """Warm ``forward`` up once on ``tensors``, then capture it on ``stream``; None when it cannot be.

    ``on_capture_thread``: on :data:`CAPTURES` (the caller waits), else on the
    calling thread.  Capture fails for ops that synchronise with the host; the
    signature then runs eagerly.
    """
    def capture() -> Captured | None:
        with torch.cuda.stream(stream), torch.inference_mode():
            static = [t.clone() for t in tensors]  # the graph's own inputs
            forward(*static)  # warm-up: lazy init, cuDNN autotuning, resize index tables
            stream.synchronize()
            graph = torch.cuda.CUDAGraph()
            try:
                with _workspaces_in_pool(), warnings.catch_warnings():
                    # a forward that launches no kernel (its outputs are inputs or constants) makes an
                    # empty graph, whose replay does nothing: torch's warning about it is not the user's
                    warnings.filterwarnings("ignore", message="The CUDA Graph is empty", category=UserWarning)
                    with torch.cuda.graph(graph, pool=pool, stream=stream, capture_error_mode="thread_local"):
                        outputs = tuple(forward(*static))
            except Exception:  # noqa: BLE001 - an op that syncs with the host
                stream.synchronize()
                return None
            return Captured(graph, static, outputs, owner)

    if not on_capture_thread:
        return capture()
    captured: Captured | None = CAPTURES.call(capture)
    return captured


def warm_up(program: DeviceProgram, lowered: LoweredGraph) -> bool:
    """Run each of ``program``'s workers once on zeros of the model's input shapes (see the module docstring).

    Returns False, running nothing, when an input has a dynamic dim: which
    shapes will come is not known.  A run that fails is logged and left to the
    first request (zeros may be no input the model was made for).
    """
    shapes = lowered.input_shapes
    if any(shape is None or not all(isinstance(d, int) for d in shape) for shape in shapes):
        return False
    zeros = {name: torch.zeros([d for d in shape or () if isinstance(d, int)], dtype=dtype)
             for name, dtype, shape in zip(lowered.input_names, lowered.input_dtypes, shapes, strict=True)}
    for worker in range(program.num_workers):
        try:
            program.run(zeros, worker)
        except Exception as error:  # noqa: BLE001 - the requests will capture, as without warming up
            _log.info("inferplex: %s: warming up worker %d on zeros failed, its first request will "
                      "capture instead: %s", program.device, worker, error)
            break
    return True
