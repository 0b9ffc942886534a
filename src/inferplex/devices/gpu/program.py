"""A lowered model running on one GPU (or on torch's CPU device, emulated).

Each of the ``num_workers`` workers owns a CUDA stream, pinned host staging
buffers for inputs and outputs, and its own CUDA graphs, so workers run
concurrently without sharing mutable state.  One run:

1. inputs are checked against the model (names, element types, ranks, static
   dims) and moved to the device (:mod:`.inputs`): numpy arrays through the
   worker's pinned buffers with non-blocking copies, torch tensors already on
   the device as they are, tensors on another GPU device to device; the worker's
   stream waits for the caller's CUDA inputs (:mod:`.handoff`);
2. a model whose generic lowering cannot be captured (shape arithmetic on
   dynamic dims reads the device) is lowered again for each new input signature
   with those dims fixed (:mod:`.specialize`; weights shared, at most
   ``SHAPE_CACHE_SIZE`` signatures kept, least recently used dropped: state
   grows with the distinct shapes seen, never with the requests);
3. on CUDA, the worker replays the CUDA graph it captured for this signature
   (captured on first sight after one warm-up run, or while compiling when
   every input shape is static, see :func:`.graphs.warm_up`; at most ``GRAPH_CACHE_SIZE``
   per worker, least recently used dropped); lowerings with data-dependent ops,
   signatures that fail capture, and profiling runs go eagerly through the
   GraphModule;
4. outputs come back (:mod:`.outputs`) as numpy arrays over pinned host memory
   from torch's caching host allocator (no host copy after the transfer), except
   those named in ``keep_on_device``, which stay torch tensors on the device
   (``tensor_kind`` ``"torch"``, the caller's stream ordered after the worker's)
   so the next GPU subgraph takes them without a host round trip.
   :meth:`GpuProgram.to_host` and :meth:`GpuProgram.to_native` move such tensors
   for HETERO.  A sequence output comes back as a list of numpy arrays, an
   optional one as its value or None; sequence inputs (lists of tensors) are
   copied element by element, synchronously (such programs never replay graphs);
5. with ``run_into``'s ``queued`` (a worker process's slots), the worker is
   handed on once the run, copies back included, is queued on its stream: the
   next run queues behind it while this one waits for an event of its own.
   The worker's state (:mod:`.workers`) is then the next run's.

Lowering, capturing and eager runs happen under inferplex's torch settings
(:mod:`.settings`: no TF32, cuDNN autotuning), which are put back to the user's
afterwards.  :meth:`GpuProgram.close` waits for the runs in flight, then drops
every graph, stream, buffer, lowering and weight, and ends the capture thread
when no other program needs it; a run after it raises InferenceError.
What the program holds is reported by the ``GPU_PROGRAM_STATISTICS`` property
(:mod:`.statistics`).

Options (compile config): ``CUDA_GRAPHS`` (default True on CUDA; ignored on the
emulated CPU device); ``TORCH_COMPILE`` and ``TORCH_COMPILE_MODE`` (the plugin's
:class:`.tiers.CompilePlan`: torch.compile in the background while the eager
lowering serves, see :mod:`.tiers`); ``ENABLE_PROFILING`` (per-op times through a timing
``torch.fx.Interpreter``, plus input/output transfer records with bytes, see :mod:`.profiling`);
``GPU_QUEUE_THROTTLE`` (MEDIUM default and HIGH: a worker waiting for its stream
spins on a host core, CUDA's default; LOW: it sleeps on a blocking CUDA event).
"""

from __future__ import annotations

import logging
import threading
import time
import weakref
from collections import Counter
from collections.abc import Callable, Collection, Mapping, Sequence
from contextlib import nullcontext
from typing import Any

import torch
import torch.fx

from inferplex.devices.base import CallOnce, DeviceProgram, ProfilingRecord
from inferplex.devices.gpu import tiers
from inferplex.devices.gpu._tier_switch import TierSwitch
from inferplex.devices.gpu.graphs import CAPTURES, GATE, Captured, capture_graph
from inferplex.devices.gpu.handoff import hand_to_caller, worker_stream
from inferplex.devices.gpu.inputs import InputChecker, InputMover
from inferplex.devices.gpu.lower import LoweredGraph
from inferplex.devices.gpu.outputs import OutputCollector
from inferplex.devices.gpu.profiling import StageClock, run_profiled
from inferplex.devices.gpu.settings import TORCH_SETTINGS
from inferplex.devices.gpu.specialize import Specializer
from inferplex.devices.gpu.statistics import GpuProgramStatistics, collect
from inferplex.devices.gpu.transfers import host_arrays, register_host_memory, to_host
from inferplex.devices.gpu.workers import LruCache, Variant, WorkerState
from inferplex.errors import InferenceError, InputError, PropertyError

__all__ = ["GRAPH_CACHE_SIZE", "SHAPE_CACHE_SIZE", "STATISTICS_PROPERTY", "GpuProgram"]

GRAPH_CACHE_SIZE = 8
"""CUDA graphs kept per worker (one per input signature)."""

SHAPE_CACHE_SIZE = 64
"""Specialized lowerings kept per program (one per input signature), and signatures remembered
as failing CUDA-graph capture."""

STATISTICS_PROPERTY = "GPU_PROGRAM_STATISTICS"
"""Read-only property: a :class:`~.statistics.GpuProgramStatistics` of what the program holds now."""

_log = logging.getLogger(__name__)


class GpuProgram(TierSwitch, DeviceProgram):
    """A :class:`LoweredGraph` compiled for one device; see the module docstring (its compiled
    tier: :class:`._tier_switch.TierSwitch`)."""

    tensor_kind = "torch"
    capture_on_one_thread = True
    """Capture every CUDA graph on the process's capture thread; False: on each worker's
    own thread (``bench/gpu_warmup.py`` compares the two)."""
    cache_form: bytes | None = None
    """The program's cached form (:mod:`.cache_form`) when it was compiled for the model cache;
    the plugin takes it once, to write the entry, and drops it."""
    rebuild_form: Callable[[], bytes | None] | None = None
    """Makes the cached form again from the model (``export_model`` of a program compiled
    without one); None where the program was imported."""

    def __init__(self, lowered: LoweredGraph, device: str, torch_device: torch.device,
                 num_workers: int = 1, config: Mapping[str, Any] | None = None,
                 properties: Mapping[str, Any] | None = None, specializer: Specializer | None = None,
                 plan: tiers.CompilePlan | None = None):
        config = dict(config or {})
        self._plan = plan or tiers.plan_of_flag(config.get("TORCH_COMPILE", False))
        self._tier: tiers.CompiledTier | None = None
        self.device = device
        self.num_workers = max(1, int(num_workers))
        self.input_names = lowered.input_names
        """The model inputs the program takes, in the lowering's order."""
        self.output_names = lowered.output_names
        """The model outputs it returns."""
        self._torch_device = torch_device
        self._cuda = torch_device.type == "cuda"
        self._profiling = bool(config.get("ENABLE_PROFILING", False))
        self._graphs_on = self._cuda and bool(config.get("CUDA_GRAPHS", True))
        self._blocking_waits = self._cuda and str(config.get("GPU_QUEUE_THROTTLE", "MEDIUM")).upper() == "LOW"
        self._specializer = (specializer if specializer is not None and Specializer.worthwhile(lowered)
                             else None)
        self._generic: Variant | None = self._make_variant(lowered)
        self._graphs_possible = self._graphs_on and (self._generic.graphs or self._specializer is not None)
        self._variants: LruCache[tuple[Any, ...], Variant] = LruCache(SHAPE_CACHE_SIZE)
        self._inputs_checker = InputChecker(lowered)
        self._mover = InputMover(device, torch_device, self._cuda)
        self._outputs = OutputCollector(device, self._cuda, self._blocking_waits, self._profiling)
        self._properties = dict(properties or {})
        self._eager_signatures: LruCache[tuple[Any, ...], bool] = LruCache(SHAPE_CACHE_SIZE)
        self._lock = threading.Condition()
        self._runners: Counter[int] = Counter()
        """Thread id -> runs of this program in flight on that thread (close waits for the others)."""
        self._workers = [WorkerState.new(torch_device, self._blocking_waits) for _ in range(self.num_workers)]
        self._closed = False
        self._runs = 0
        """Runs started so far (a plan may wait for the program to be hot, see :mod:`.tiers`)."""
        self._made_at = time.monotonic()
        self._waits_to_be_hot = self._plan.how == "tiered" and self._plan.after_runs > 0
        # Programs the caller drops without closing still give the capture thread back.
        self._release_captures = CAPTURES.lease() if self._graphs_possible else None
        if self._release_captures is not None:
            weakref.finalize(self, self._release_captures)

    def _make_variant(self, lowered: LoweredGraph) -> Variant:
        forward = tiers.inline_forward(lowered.module, self._plan)
        return Variant(lowered, forward, self._graphs_on and lowered.capturable,
                       frozenset(b.data_ptr() for b in lowered.module.buffers()))

    @property
    def torch_device(self) -> torch.device:
        """The torch device the program runs on (``cpu`` for an emulated GPU)."""
        return self._torch_device

    # --- running --------------------------------------------------------------------

    def run(self, inputs: Mapping[str, Any], worker: int = 0,
            keep_on_device: Collection[str] = ()) -> dict[str, Any]:
        return self._run(inputs, worker, keep_on_device, None)

    def run_into(self, inputs: Mapping[str, Any], worker: int,
                 host_outputs: Callable[[str, Any, tuple[int, ...]], Any],
                 queued: Callable[[], None] | None = None) -> dict[str, Any]:
        """``run`` with the outputs copied from the device straight into ``host_outputs``' arrays.

        With ``queued``, a run that replays a captured graph (or runs eagerly)
        hands its worker on once everything is queued on the worker's stream,
        copies back included: the next run queues behind it, and the stream
        does not idle while this one's thread wakes, returns and finds the next
        request.  This run then waits for an event of its own.
        """
        return self._run(inputs, worker, (), host_outputs, queued)

    def _run(self, inputs: Mapping[str, Any], worker: int, keep_on_device: Collection[str],
             host_outputs: Callable[[str, Any, tuple[int, ...]], Any] | None,
             queued: Callable[[], None] | None = None) -> dict[str, Any]:
        hand_on = CallOnce(queued)
        state: WorkerState | None = None
        thread = threading.get_ident()
        counted = False
        try:
            with self._lock:
                self.check_runnable(worker, self._closed)
                self._runners[thread] += 1
                counted = True
                self._runs += 1
                hot = self._waits_to_be_hot and self._hot()
                if hot:
                    self._waits_to_be_hot = False
            if hot:
                self.start_compiled_tier()
            values, signature = self._inputs_checker.check(inputs)
            state = self._workers[worker]
            variant = self._variant(signature)
            replay = variant.graphs and not self._profiling and signature in state.graphs \
                and signature not in self._eager_signatures
            # A replay's kernels were chosen at capture: only the other runs need the settings.
            with nullcontext() if replay else TORCH_SETTINGS.scope():
                return self._run_variant(state, variant, values, signature, keep_on_device, host_outputs,
                                         hand_on, queued is not None)
        except (InputError, InferenceError):
            raise
        except Exception as e:
            raise InferenceError(f"inference failed on {self.device}: {type(e).__name__}: {e}") from e
        finally:
            if not hand_on.done:
                if state is not None:
                    state.borrowed = False
                hand_on()
            if counted:
                self._end_run(thread)

    def _end_run(self, thread: int) -> None:
        with self._lock:
            self._runners[thread] -= 1
            if not self._runners[thread]:
                del self._runners[thread]
            self._lock.notify_all()

    def _run_variant(self, state: WorkerState, variant: Variant, values: list[Any],
                     signature: tuple[Any, ...],
                     keep_on_device: Collection[str],
                     host_outputs: Callable[[str, Any, tuple[int, ...]], Any] | None,
                     hand_on: CallOnce, queued: bool) -> dict[str, Any]:
        """One run of ``variant`` on the worker ``state``; ``hand_on`` calls ``run_into``'s ``queued``
        (``queued``: whether there is one)."""
        keep = set(keep_on_device) if keep_on_device else set()
        capture = variant.graphs and not self._profiling and signature not in state.graphs \
            and signature not in self._eager_signatures
        clock = StageClock(state, self._cuda) if self.trace_stages and not self._profiling else None
        queue_behind = queued and self._cuda and not (self._profiling or capture or keep or clock)
        with GATE.capture() if capture else GATE.run(), torch.inference_mode():
            # The worker's stream: one thread's at a time, left before handing on.
            with worker_stream(state, values, self._torch_device, self._cuda):
                if self._profiling:
                    outputs = run_profiled(state, variant.lowered, values,
                                           lambda: self._mover.move(state, values), self.device,
                                           self._torch_device)
                else:
                    outputs = self._run_tensors(state, variant, values, signature, clock)
                result, copies = self._outputs.collect(state, variant, outputs, keep, host_outputs,
                                                       queue_behind)
                if clock is not None:
                    clock.mark("device-to-host copy")
            if copies is not None:
                state.borrowed = False
                hand_on()
                copies.done.synchronize()  # this run's end, not the next one's queued behind it
                host_arrays(result, copies.pending, copies.arrays)
        if self._cuda and keep:
            hand_to_caller(state, result, keep, self._torch_device)
        return result

    def _variant(self, signature: tuple[Any, ...]) -> Variant:
        """The lowering for this signature: specialized when that helps (made once, then cached)."""
        generic = self._generic
        if generic is None:  # closed since the run began
            raise InferenceError(f"the program on {self.device} was closed")
        if self._specializer is None:
            return generic
        with self._lock:
            variant = self._variants.get(signature)
        if variant is not None:
            return variant
        # Uploads new constants: not while another thread captures.  Folding constants runs
        # torch on the host: under inferplex's settings (exact f32).
        with GATE.run(), TORCH_SETTINGS.scope():
            variant = self._specialize(generic, self._specializer, signature)
        with self._lock:  # captured graphs keep their own variant alive once it is dropped here
            return self._variants.put(signature, variant)

    def _specialize(self, generic: Variant, specializer: Specializer, signature: tuple[Any, ...]) -> Variant:
        try:
            lowered = specializer.lower(generic.lowered.input_names, signature)
        except Exception as e:  # noqa: BLE001 - the generic lowering is exact for every shape
            _log.warning("%s: specializing to input shapes %s failed (%s: %s); running the generic lowering",
                         self.device, signature, type(e).__name__, e)
            return generic
        return self._make_variant(lowered)

    def _run_tensors(self, state: WorkerState, variant: Variant, values: list[Any],
                     signature: tuple[Any, ...], clock: StageClock | None = None) -> Sequence[torch.Tensor]:
        """The run's outputs on the device; ``clock`` (tracing) marks the inputs' copies and the compute."""
        def moved(out: Sequence[torch.Tensor] | None = None) -> list[Any]:
            tensors = self._mover.move(state, values, out)
            if clock is not None:
                clock.mark("host-to-device copy")
            return tensors

        def computed(outputs: Sequence[Any]) -> Sequence[Any]:
            if clock is not None:
                clock.mark("compute")
            return outputs

        if variant.graphs and signature not in self._eager_signatures:
            captured = state.graphs.get(signature)
            if captured is None:
                tensors = moved()
                captured = self._capture(state, variant, signature, tensors)
                if captured is None:
                    return computed(variant.forward(*tensors))
            else:
                state.graphs.move_to_end(signature)
                moved(captured.inputs)
            captured.graph.replay()
            return computed(captured.outputs)
        return computed(variant.forward(*moved()))

    def stage_times(self, worker: int = 0) -> list[tuple[str, float, float]]:
        """The last traced run's stages on ``worker`` (see ``DeviceProgram.stage_times``)."""
        return list(self._workers[worker].stages) if 0 <= worker < len(self._workers) else []

    def _capture(self, state: WorkerState, variant: Variant, signature: tuple[Any, ...],
                 tensors: list[torch.Tensor]) -> Captured | None:
        """Capture this signature's graph for the worker (see :mod:`.graphs`); None: it runs eagerly."""
        captured = capture_graph(variant.forward, tensors, state.stream, state.pool, variant,
                                 self.capture_on_one_thread)
        if captured is None:
            with self._lock:
                self._eager_signatures.put(signature, True)
            return None
        state.graphs[signature] = captured
        if len(state.graphs) > GRAPH_CACHE_SIZE:
            # Graphs share the worker's memory pool: a dropped graph's memory goes back to
            # it, so no replay of that graph may still be running when it is dropped.
            state.stream.synchronize()
            while len(state.graphs) > GRAPH_CACHE_SIZE:
                state.graphs.popitem(last=False)
        return captured

    # --- transfers for other programs (HETERO) ----------------------------------------

    def to_host(self, value: Any) -> Any:
        """``value`` as a numpy array: a device tensor through pinned memory (:func:`.transfers.to_host`);
        a sequence as a list of them, an absent optional as None."""
        if isinstance(value, (list, tuple)):
            return [to_host(item) for item in value]
        return None if value is None else to_host(value)

    def to_native(self, value: Any) -> Any:
        """``value`` on this program's device, ready for :meth:`run` (:func:`.transfers.to_device`);
        a sequence as a list of tensors, an absent optional as None."""
        return self._mover.native(value)

    def pin_host_memory(self, address: int, size: int) -> Callable[[], None] | None:
        """Page-lock host memory (``cudaHostRegister``): ``run`` then copies inputs there to
        the GPU directly, without its staging copy, as from any pinned tensor."""
        if not self._cuda or size <= 0:
            return None
        return register_host_memory(address, size, self._torch_device, self.device)

    # --- properties -------------------------------------------------------------------

    def profiling_info(self, worker: int = 0) -> list[ProfilingRecord]:
        if not 0 <= worker < self.num_workers:
            return []
        return list(self._workers[worker].records)

    def get_property(self, key: str) -> Any:
        if key == STATISTICS_PROPERTY:
            return self.statistics()
        values = self._property_values()
        if key not in values:
            raise PropertyError(f"compiled model on {self.device} has no property {key!r}; "
                                f"accepted: {', '.join(sorted([*values, STATISTICS_PROPERTY]))}")
        return values[key]

    def property_names(self) -> tuple[str, ...]:
        return (*self._property_values(), STATISTICS_PROPERTY)

    def _property_values(self) -> dict[str, Any]:
        return {
            "OPTIMAL_NUMBER_OF_INFER_REQUESTS": self.num_workers,
            "NUM_STREAMS": self.num_workers,
            "EXECUTION_DEVICES": (self.device,),
            "ENABLE_PROFILING": self._profiling,
            "CUDA_GRAPHS": self._graphs_possible,
            "TORCH_COMPILE": self._plan.how != "off",
            tiers.MODE_PROPERTY: self._plan.mode,
            tiers.TIER_PROPERTY: self.compiled_tier,
            **self._properties,
        }

    def statistics(self) -> GpuProgramStatistics:
        """What the program holds now (its ``GPU_PROGRAM_STATISTICS`` property)."""
        with self._lock:
            variants = self._variants.items()
            eager = self._eager_signatures.keys()
            return collect(self._generic, variants, eager, list(self._workers), self._variants.limit,
                           GRAPH_CACHE_SIZE)

    def close(self) -> None:
        """Wait for the runs in flight on other threads, then release everything the program holds.

        Idempotent.  CUDA graphs, streams, staging buffers, the specialized
        lowerings, the generic lowering and its weights go; so does the
        program's hold on the capture thread (which ends when no program needs
        it).  Properties stay readable; a run raises InferenceError.
        """
        if self._tier is not None:
            self._tier.release()  # not waited for: the compile drops its forward when it ends
        me = threading.get_ident()
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._lock.wait_for(lambda: sum(self._runners.values()) == self._runners[me])
            workers, self._workers = self._workers, [WorkerState() for _ in self._workers]
            self._variants.clear()
            self._eager_signatures.clear()
            self._generic = None
            self._specializer = None
        for state in workers:
            if state.stream is not None:
                state.stream.synchronize()  # no replay or copy still uses what is dropped here
            state.graphs.clear()
            state.staging.clear()
        self._inputs_checker.forget()
        if self._release_captures is not None:
            self._release_captures()
