"""A lowered model running on one GPU (or on torch's CPU device, emulated).

Each of the ``num_workers`` workers owns a CUDA stream, pinned host staging
buffers for inputs and outputs, and its own CUDA graphs, so workers run
concurrently without sharing mutable state.  One run:

1. inputs are checked against the model (names, element types, ranks, static
   dims); numpy arrays are copied into the worker's pinned buffers and sent with
   non-blocking copies; torch tensors already on the device are used as they
   are; tensors on another GPU are copied device to device;
2. with static shapes on CUDA, the worker replays the CUDA graph it captured for
   this input signature (captured on first sight after one warm-up run; at most
   ``GRAPH_CACHE_SIZE`` signatures, least recently used dropped); graphs with
   data-dependent ops, dynamic inputs that fail capture, and profiling runs go
   eagerly through the GraphModule;
3. outputs come back as numpy arrays through pinned buffers, except those named
   in ``keep_on_device``, which stay torch tensors on the device (``tensor_kind``
   ``"torch"``) so the next GPU subgraph takes them without a host round trip.

Options (compile config): ``CUDA_GRAPHS`` (default True on CUDA; ignored on the
emulated CPU device); ``TORCH_COMPILE`` (default False: ``torch.compile`` makes
steady-state kernels faster but costs seconds to minutes on the first inference
of each shape); ``ENABLE_PROFILING`` (per-op times through a timing
``torch.fx.Interpreter``, plus input/output transfer records with bytes).
"""

from __future__ import annotations

import datetime
import threading
import time
from collections import OrderedDict
from collections.abc import Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
import torch.fx

from inferplex.devices.base import DeviceProgram, ProfilingRecord
from inferplex.devices.gpu.lower import LoweredGraph, numpy_to_torch, torch_to_numpy
from inferplex.errors import InferenceError, InputError, PropertyError

__all__ = ["GRAPH_CACHE_SIZE", "GpuProgram"]

GRAPH_CACHE_SIZE = 8
"""CUDA graphs kept per worker (one per input-shape signature)."""


@dataclass
class _Captured:
    graph: Any
    inputs: list[torch.Tensor]
    outputs: tuple[torch.Tensor, ...]


@dataclass
class _Worker:
    stream: Any = None
    pool: Any = None
    staging: dict[str, torch.Tensor] = field(default_factory=dict)
    staged: Any = None
    """Event recorded after the last host-to-device copies out of ``staging``."""
    graphs: OrderedDict[tuple[Any, ...], _Captured] = field(default_factory=OrderedDict)
    records: list[ProfilingRecord] = field(default_factory=list)


class _TimingInterpreter(torch.fx.Interpreter):
    """Runs the GraphModule node by node and times each ONNX node (CUDA events or perf_counter)."""

    def __init__(self, module: torch.fx.GraphModule, cuda: bool):
        super().__init__(module)
        self.cuda = cuda
        self.marks: list[tuple[str, str, Any, Any]] = []

    def run_node(self, n: torch.fx.Node) -> Any:
        name = n.meta.get("onnx_name")
        if n.op != "call_function" or name is None:
            return super().run_node(n)
        start = torch.cuda.Event(enable_timing=True) if self.cuda else time.perf_counter()
        if self.cuda:
            start.record()
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


class _CaptureGate:
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


_GATE = _CaptureGate()


def _delta(seconds: float) -> datetime.timedelta:
    return datetime.timedelta(seconds=seconds)


class GpuProgram(DeviceProgram):
    """A :class:`LoweredGraph` compiled for one device; see the module docstring."""

    tensor_kind = "torch"

    def __init__(self, lowered: LoweredGraph, device: str, torch_device: torch.device,
                 num_workers: int = 1, config: Mapping[str, Any] | None = None,
                 properties: Mapping[str, Any] | None = None):
        config = dict(config or {})
        self.device = device
        self.num_workers = max(1, int(num_workers))
        self._lowered = lowered
        self._torch_device = torch_device
        self._cuda = torch_device.type == "cuda"
        self._profiling = bool(config.get("ENABLE_PROFILING", False))
        self._graphs = self._cuda and bool(config.get("CUDA_GRAPHS", True)) and lowered.capturable
        self._compiled = bool(config.get("TORCH_COMPILE", False))
        self._forward: Any = torch.compile(lowered.module) if self._compiled else lowered.module
        self._properties = dict(properties or {})
        self._eager_signatures: set[tuple[Any, ...]] = set()
        self._lock = threading.Lock()
        self._workers = [self._new_worker() for _ in range(self.num_workers)]
        self._buffer_ptrs = {b.data_ptr() for b in lowered.module.buffers()}
        self._closed = False

    def _new_worker(self) -> _Worker:
        if not self._cuda:
            return _Worker()
        with torch.cuda.device(self._torch_device):
            return _Worker(stream=torch.cuda.Stream(self._torch_device), pool=torch.cuda.graph_pool_handle())

    # --- inputs ---------------------------------------------------------------------

    def _check(self, inputs: Mapping[str, Any]) -> list[Any]:
        if not isinstance(inputs, Mapping):
            raise InputError(f"inputs must be a mapping of input name to tensor, got {type(inputs).__name__}")
        names = self._lowered.input_names
        unknown = sorted(set(inputs) - set(names))
        missing = [n for n in names if n not in inputs]
        if unknown or missing:
            raise InputError(f"inputs do not match the model: unknown {unknown}, missing {missing}; "
                             f"the model takes {list(names)}")
        values = []
        for name, dtype, shape in zip(names, self._lowered.input_dtypes, self._lowered.input_shapes):
            value = inputs[name]
            if not isinstance(value, (np.ndarray, torch.Tensor)):
                value = torch.from_dlpack(value) if hasattr(value, "__dlpack__") else np.asarray(value)
            got = value.dtype if isinstance(value, torch.Tensor) else numpy_to_torch(value[:0] if value.ndim else value.reshape(1)[:0]).dtype
            if got != dtype:
                raise InputError(f"input {name!r} has element type {got}, the model takes {dtype}")
            _check_shape(name, tuple(value.shape), shape)
            values.append(value)
        return values

    def _to_device(self, worker: _Worker, name: str, value: Any, out: torch.Tensor | None = None) -> torch.Tensor:
        """``value`` on this program's device; into ``out`` when given (a CUDA graph's static input)."""
        if isinstance(value, np.ndarray):
            value = numpy_to_torch(value)
        if not self._cuda:
            return value if out is None else out.copy_(value)
        if value.device == self._torch_device:
            return value if out is None else out.copy_(value, non_blocking=True)
        if value.device.type == "cpu" and not value.is_pinned():
            value = self._stage(worker, name, value)
        dest = out if out is not None else torch.empty(value.shape, dtype=value.dtype, device=self._torch_device)
        return dest.copy_(value, non_blocking=True)

    def _stage(self, worker: _Worker, name: str, value: torch.Tensor) -> torch.Tensor:
        """A pinned copy of a host tensor in the worker's reusable staging buffer."""
        if worker.staged is not None:
            worker.staged.synchronize()  # the previous run's copies out of the buffer are done
            worker.staged = None
        nbytes = value.numel() * value.element_size()
        buffer = worker.staging.get(name)
        if buffer is None or buffer.numel() < nbytes:
            buffer = torch.empty(max(nbytes, 1), dtype=torch.uint8, pin_memory=True)
            worker.staging[name] = buffer
        pinned = buffer[:nbytes].view(value.dtype).view(value.shape)
        pinned.copy_(value)
        return pinned

    # --- running --------------------------------------------------------------------

    def run(self, inputs: Mapping[str, Any], worker: int = 0,
            keep_on_device: Collection[str] = ()) -> dict[str, Any]:
        if self._closed:
            raise InferenceError(f"the program on {self.device} was closed")
        if not 0 <= worker < self.num_workers:
            raise InferenceError(f"worker {worker} does not exist on {self.device}; "
                                 f"workers are 0..{self.num_workers - 1}")
        values = self._check(inputs)
        state = self._workers[worker]
        keep = set(keep_on_device)
        gate = _GATE.capture() if self._will_capture(state, values) else _GATE.run()
        try:
            with gate, torch.inference_mode(), self._stream_context(state):
                if self._profiling:
                    outputs = self._run_profiled(state, values)
                else:
                    outputs = self._run_tensors(state, values)
                result = self._collect(state, outputs, keep)
            if self._cuda and keep:
                self._hand_to_caller(state, result, keep)
        except (InputError, InferenceError):
            raise
        except Exception as e:
            raise InferenceError(f"inference failed on {self.device}: {type(e).__name__}: {e}") from e
        return result

    def _hand_to_caller(self, state: _Worker, result: dict[str, Any], keep: set[str]) -> None:
        """Order the caller's stream after this worker's, for tensors returned on the device.

        The worker ran on its own stream; without this the caller's next kernel
        (or a CUDA event it records) could run before the outputs are written.
        """
        caller = torch.cuda.current_stream(self._torch_device)
        caller.wait_stream(state.stream)
        for name in keep:
            tensor = result.get(name)
            if isinstance(tensor, torch.Tensor) and tensor.is_cuda:
                tensor.record_stream(caller)  # its memory must outlive the caller's use, not ours

    def _stream_context(self, state: _Worker) -> Any:
        if not self._cuda:
            return _Null()
        state.stream.wait_stream(torch.cuda.current_stream(self._torch_device))
        return torch.cuda.stream(state.stream)

    @staticmethod
    def _signature(values: list[Any]) -> tuple[Any, ...]:
        return tuple((tuple(v.shape), str(v.dtype)) for v in values)

    def _will_capture(self, state: _Worker, values: list[Any]) -> bool:
        if not self._graphs or self._profiling:
            return False
        signature = self._signature(values)
        return signature not in self._eager_signatures and signature not in state.graphs

    def _run_tensors(self, state: _Worker, values: list[Any]) -> Sequence[torch.Tensor]:
        names = self._lowered.input_names
        signature = self._signature(values)
        if self._graphs and signature not in self._eager_signatures:
            captured = state.graphs.get(signature)
            if captured is None:
                tensors = [self._to_device(state, n, v) for n, v in zip(names, values)]
                self._mark_staged(state)
                captured = self._capture(state, signature, tensors)
                if captured is None:
                    return self._forward(*tensors)
            else:
                state.graphs.move_to_end(signature)
                for n, v, static in zip(names, values, captured.inputs):
                    self._to_device(state, n, v, out=static)
                self._mark_staged(state)
            captured.graph.replay()
            return captured.outputs
        tensors = [self._to_device(state, n, v) for n, v in zip(names, values)]
        self._mark_staged(state)
        return self._forward(*tensors)

    def _mark_staged(self, state: _Worker) -> None:
        if self._cuda:
            state.staged = torch.cuda.Event()
            state.staged.record(state.stream)

    def _capture(self, state: _Worker, signature: tuple[Any, ...],
                 tensors: list[torch.Tensor]) -> _Captured | None:
        """Warm up once, then capture a CUDA graph for this signature; None when capture is impossible."""
        static = [t.clone() for t in tensors]
        self._forward(*static)  # warm-up: lazy init, cuDNN autotuning, resize index tables
        state.stream.synchronize()
        graph = torch.cuda.CUDAGraph()
        try:
            with torch.cuda.graph(graph, pool=state.pool, stream=state.stream, capture_error_mode="thread_local"):
                outputs = tuple(self._forward(*static))
        except Exception:  # noqa: BLE001 - an op that syncs with the host: this signature runs eagerly
            with self._lock:
                self._eager_signatures.add(signature)
            state.stream.synchronize()
            return None
        captured = _Captured(graph, static, outputs)
        state.graphs[signature] = captured
        while len(state.graphs) > GRAPH_CACHE_SIZE:
            state.graphs.popitem(last=False)
        for static_input, tensor in zip(static, tensors):
            static_input.copy_(tensor, non_blocking=True)
        return captured

    def _collect(self, state: _Worker, outputs: Sequence[Any], keep: set[str]) -> dict[str, Any]:
        """Outputs by name: torch tensors for ``keep``, numpy arrays (through pinned buffers) for the rest."""
        start = time.perf_counter()
        result: dict[str, Any] = {}
        pending: list[tuple[str, torch.Tensor]] = []
        moved = 0
        for name, tensor in zip(self._lowered.output_names, outputs):
            if name in keep:
                result[name] = tensor.clone() if self._graphs or self._aliases(tensor) else tensor
            elif self._cuda:
                host = self._output_buffer(state, name, tensor)
                host.copy_(tensor, non_blocking=True)
                pending.append((name, host))
                moved += tensor.numel() * tensor.element_size()
            else:
                array = torch_to_numpy(tensor)
                result[name] = array.copy() if self._aliases(tensor) else array
        if self._cuda:
            state.stream.synchronize()
        for name, host in pending:
            result[name] = torch_to_numpy(host).copy()
        if self._profiling and pending:
            state.records.append(ProfilingRecord(
                f"transfer {self.device}->CPU", "Transfer", "copy", _delta(time.perf_counter() - start),
                _delta(time.perf_counter() - start), bytes=moved))
        return {name: result[name] for name in self._lowered.output_names}

    def _output_buffer(self, state: _Worker, name: str, tensor: torch.Tensor) -> torch.Tensor:
        key = "output:" + name
        nbytes = tensor.numel() * tensor.element_size()
        buffer = state.staging.get(key)
        if buffer is None or buffer.numel() < nbytes:
            buffer = torch.empty(max(nbytes, 1), dtype=torch.uint8, pin_memory=True)
            state.staging[key] = buffer
        return buffer[:nbytes].view(tensor.dtype).view(tensor.shape)

    def _aliases(self, tensor: torch.Tensor) -> bool:
        """Whether an output shares memory with a constant (or, on the host, may share a user's array)."""
        if tensor.numel() == 0:
            return False
        return tensor.untyped_storage().data_ptr() in self._buffer_ptrs or not self._cuda

    def _run_profiled(self, state: _Worker, values: list[Any]) -> Sequence[torch.Tensor]:
        state.records = []
        start = time.perf_counter()
        tensors = [self._to_device(state, n, v) for n, v in zip(self._lowered.input_names, values)]
        self._mark_staged(state)
        if self._cuda:
            state.stream.synchronize()
        moved = sum(v.nbytes if isinstance(v, np.ndarray) else 0 for v in values)
        elapsed = _delta(time.perf_counter() - start)
        state.records.append(ProfilingRecord(f"transfer CPU->{self.device}", "Transfer", "copy",
                                             elapsed, elapsed, bytes=moved))
        interpreter = _TimingInterpreter(self._lowered.module, self._cuda)
        outputs = interpreter.run(*tensors)
        if self._cuda:
            state.stream.synchronize()
        kind = f"torch.{self._torch_device.type}"
        for (name, op), seconds in interpreter.seconds().items():
            state.records.append(ProfilingRecord(name, op, kind, _delta(seconds), _delta(seconds)))
        for name, op in self._lowered.folded_nodes:
            state.records.append(ProfilingRecord(name, op, "constant folded", _delta(0), _delta(0), "NOT_RUN"))
        return outputs

    def profiling_info(self, worker: int = 0) -> list[ProfilingRecord]:
        if not 0 <= worker < self.num_workers:
            return []
        return list(self._workers[worker].records)

    def get_property(self, key: str) -> Any:
        values = {
            "OPTIMAL_NUMBER_OF_INFER_REQUESTS": self.num_workers,
            "NUM_STREAMS": self.num_workers,
            "EXECUTION_DEVICES": (self.device,),
            "ENABLE_PROFILING": self._profiling,
            "CUDA_GRAPHS": self._graphs,
            "TORCH_COMPILE": self._compiled,
            **self._properties,
        }
        if key not in values:
            raise PropertyError(f"compiled model on {self.device} has no property {key!r}; "
                                f"accepted: {', '.join(sorted(values))}")
        return values[key]

    def close(self) -> None:
        self._closed = True
        for state in self._workers:
            state.graphs.clear()
            state.staging.clear()


class _Null:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: Any) -> None:
        return None


def _check_shape(name: str, got: tuple[int, ...], declared: tuple[int | str | None, ...] | None) -> None:
    if declared is None:
        return
    if len(got) != len(declared):
        raise InputError(f"input {name!r} has rank {len(got)} (shape {list(got)}); the model takes rank "
                         f"{len(declared)} (shape {list(declared)})")
    for axis, (size, want) in enumerate(zip(got, declared)):
        if isinstance(want, int) and size != want:
            raise InputError(f"input {name!r} has size {size} on axis {axis} (shape {list(got)}); "
                             f"the model takes {list(declared)}")
