"""Tiers of a :class:`~inferplex.devices.gpu.program.GpuProgram`: serve at once, compile in the background.

Like a JIT's tiers: the program serves its first request with the lowered
GraphModule as it is (and, on CUDA, its CUDA graphs), while a daemon thread
compiles that module with ``torch.compile`` (``dynamic=False``: the input
shapes are static; as one graph where it can be, see :func:`compiled_forward`)
and runs it once on zeros so that the compile really happens.  The program
then captures the compiled forward's CUDA graphs on every worker (inferplex
captures its own graphs, so the modes are the ones without CUDA graphs) and
makes it the forward new runs take, in one step; runs in flight finish on the
forward they began with.

``TORCH_COMPILE`` decides (:func:`plan_compile`):

* ``NO`` (or False): no torch.compile.
* ``YES`` (or True): torch.compile on any GPU, emulated ones included; the
  compiled forward serves whatever its speed (a benchmark's "compiled" row).
* ``AUTO`` (the default): on CUDA, for every input static, a measured
  compile.  Under the THROUGHPUT/CUMULATIVE_THROUGHPUT hint with a leading
  (batch) dim of at least :data:`TIERED_MIN_BATCH` the compile starts once the
  program is warmed up; otherwise (LATENCY, small batches) only once the
  program is hot, as a JIT compiles only hot code: :data:`HOT_RUNS` runs served
  and :data:`HOT_SECONDS` since it was compiled.  A short script or a
  benchmark of seconds then never pays for a compile, nor waits for one at exit.
  Measured, under every hint: the compiled forward replaces the eager one only
  where it runs at least :data:`SWITCH_GAIN` faster on the same inputs while
  runs pause, timed as the program serves (where every worker holds both
  tiers' CUDA graphs, one replay per worker at once, side by side as a
  THROUGHPUT program's workers run); otherwise the eager tier serves on
  (``KEPT_EAGER``, and an INFO log line gives both times).  NO
  on emulated GPUs and for dynamic shapes, where compiling costs CPU time the
  host's work needs.

With static input shapes the compile is tiered as above.  A program with
dynamic input shapes, or one compiled for the model cache (``CACHE_DIR``),
compiles inline instead: its first run compiles (for the cache that run
happens before ``compile_model`` returns, so that torch's artefacts go into
the entry; see :mod:`.cache_form`).  A program loaded from the cache with
static shapes is tiered as any other, its background compile first handing
torch the entry's artefacts (``CompilePlan.artifacts``): the eager tier serves
its first request at once, and the compiled tier follows in the seconds torch
takes to load its kernels rather than to build them.

``TORCH_COMPILE_MODE``: ``AUTO`` (``default``), ``default`` or
``max-autotune-no-cudagraphs``.  AUTO takes ``default``: its compile takes
seconds where max-autotune's kernel search takes minutes, and its compiled tier
already matches torch.compile's best mode at large batches (``bench/gpu_device.py``
measures it; the figures are in ``bench/RESULTS.md``).
torch.compile's own CUDA-graph modes (``reduce-overhead``, ``max-autotune``)
are refused: their graphs would be captured inside inferplex's.

The read-only ``COMPILED_TIER`` says which tier serves: ``EAGER`` (no
torch.compile), ``COMPILING`` (eager, the compile is under way),
``COMPILED``, ``KEPT_EAGER`` (compiled, measured no faster: eager serves on),
``FAILED`` (the compile failed: logged once, eager serves on and no request
fails) or ``ABANDONED`` (the program was released while it compiled).  Before
a hot compile starts, an AUTO program reads ``EAGER``.  Releasing the program
does not wait for the compile: the thread finds the program gone and drops
what it made.  Exit waits for a compile still running up to
:data:`TIER_EXIT_WAIT` seconds (torch's native threads torn down under it
would abort the interpreter), as AUTO's background compile does.
torch.compile is not thread-safe: the process compiles one program at a time
(:data:`COMPILE_LOCK`).
"""

from __future__ import annotations

import logging
import statistics
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.fx

from inferplex.devices.gpu.graphs import Captured, capture_graph
from inferplex.devices.gpu.lower import LoweredGraph
from inferplex.devices.gpu.tensors import numpy_to_torch, torch_to_numpy
from inferplex.devices.gpu.workers import Variant, WorkerState
from inferplex.engine import lifecycle
from inferplex.errors import InferenceError, PropertyError

__all__ = ["COMPILE_LOCK", "COMPILE_MODES", "HOT_RUNS", "HOT_SECONDS", "MODE_PROPERTY", "SWITCH_GAIN",
           "TIERED_MIN_BATCH", "TIER_EXIT_WAIT", "TIER_PROPERTY", "CompilePlan", "CompiledTier",
           "capture_on_workers", "compile_mode", "compiled_forward", "example_inputs", "inline_forward",
           "install_graphs", "measured_faster", "no_wait", "plan_compile", "plan_of_flag",
           "replay_on_workers"]

_log = logging.getLogger("inferplex")

TIER_PROPERTY = "COMPILED_TIER"
"""Read-only property: which tier serves (see the module docstring)."""

MODE_PROPERTY = "TORCH_COMPILE_MODE"
"""The ``torch.compile`` mode of the compiled tier."""

COMPILE_MODES = ("default", "max-autotune-no-cudagraphs")
"""Accepted torch.compile modes (``AUTO`` picks one per device)."""

TIERED_MIN_BATCH = 8
"""Smallest static batch (leading input dim) for which ``TORCH_COMPILE=AUTO`` compiles on CUDA."""

HOT_RUNS = 500
"""Runs after which ``TORCH_COMPILE=AUTO`` compiles a LATENCY or small-batch program (see above)."""

HOT_SECONDS = 30.0
"""Seconds since its compile before which ``TORCH_COMPILE=AUTO`` compiles no LATENCY or small-batch
program, whatever its runs (a compile running at exit holds the exit until it ends)."""

SWITCH_GAIN = 0.02
"""How much faster (a fraction of the eager run's time) a measured compiled tier must run to replace
the eager one."""

TIER_EXIT_WAIT = 30.0
"""Seconds interpreter exit waits for a background compile still running (then leaves it)."""

COMPILE_LOCK = threading.Lock()
"""Held while torch.compile compiles in the background (and for a cache's compile before it
returns): torch.compile is not thread-safe (pytorch/pytorch#136833), so two programs compile
one after the other."""

_THROUGHPUT_HINTS = ("THROUGHPUT", "CUMULATIVE_THROUGHPUT")
EAGER, COMPILING, COMPILED, FAILED, ABANDONED = "EAGER", "COMPILING", "COMPILED", "FAILED", "ABANDONED"
KEPT_EAGER = "KEPT_EAGER"


@dataclass(frozen=True)
class CompilePlan:
    """How a program uses torch.compile."""

    how: str
    """``off``, ``inline`` (the first run of each shape compiles) or ``tiered`` (in the background)."""
    mode: str
    """The torch.compile mode (one of :data:`COMPILE_MODES`)."""
    dynamic: bool | None = False
    """torch.compile's ``dynamic``: False for static input shapes, None (torch decides) otherwise."""
    measured: bool = False
    """The compiled tier replaces the eager one only where it measures faster (AUTO); False: always (YES)."""
    after_runs: int = 0
    """Runs the program serves before a tiered compile starts (0: once it is warmed up)."""
    after_seconds: float = 0.0
    """Seconds since the program was made before a tiered compile starts (with ``after_runs``)."""
    artifacts: bytes | None = None
    """torch.compile's artefacts from a model-cache entry, handed to torch before a tiered compile."""


def compile_mode(setting: Any, cuda: bool, device: str) -> str:
    """``TORCH_COMPILE_MODE`` resolved: AUTO is ``default`` (see the module docstring)."""
    del cuda  # the same choice on every device, for now
    value = str(setting).strip()
    if value.upper() == "AUTO":
        return COMPILE_MODES[0]
    for mode in COMPILE_MODES:
        if value.lower() == mode:
            return mode
    raise PropertyError(f"{MODE_PROPERTY} {setting!r} is not accepted by {device}; accepted: AUTO, "
                        f"{', '.join(COMPILE_MODES)} (torch.compile's CUDA-graph modes are not: inferplex "
                        "captures its own CUDA graphs)")


def _static(shapes: Sequence[Any]) -> bool:
    return all(shape is not None and all(isinstance(d, int) for d in shape) for shape in shapes)


def _batch(shapes: Sequence[Any]) -> int:
    """The largest leading dim of the inputs (0 for scalar inputs only)."""
    return max((int(shape[0]) for shape in shapes if shape), default=0)


def plan_compile(setting: str, mode: str, hint: Any, cuda: bool, input_shapes: Sequence[Any],
                 specialized: bool, for_cache: bool) -> CompilePlan:
    """How a program compiles (see the module docstring).

    ``setting``: ``TORCH_COMPILE`` as ``YES``/``NO``/``AUTO``; ``mode``: a
    resolved :func:`compile_mode`; ``specialized``: the program lowers each
    input signature on its own (dynamic dims); ``for_cache``: it is compiled
    for the model cache (a program loaded from it plans as any other).
    """
    static = _static(input_shapes) and not specialized
    if setting == "AUTO":
        if not (cuda and static):
            return CompilePlan("off", mode)
        large = str(hint).upper() in _THROUGHPUT_HINTS and _batch(input_shapes) >= TIERED_MIN_BATCH
        if for_cache:
            return CompilePlan("inline", mode) if large else CompilePlan("off", mode)
        if large:
            return CompilePlan("tiered", mode, measured=True)
        return CompilePlan("tiered", mode, measured=True, after_runs=HOT_RUNS, after_seconds=HOT_SECONDS)
    if setting != "YES":
        return CompilePlan("off", mode)
    if for_cache or not static:
        return CompilePlan("inline", mode, False if static else None)
    return CompilePlan("tiered", mode)


def plan_of_flag(flag: Any) -> CompilePlan:
    """The plan of a program made without the plugin: ``TORCH_COMPILE`` True (or YES) compiles inline."""
    return CompilePlan("inline" if flag in (True, "YES") else "off", COMPILE_MODES[0], None)


def inline_forward(module: torch.nn.Module, plan: CompilePlan) -> Any:
    """``module`` compiled lazily (on its first run) for the ``inline`` plan, else ``module``."""
    if plan.how != "inline":
        return module
    return torch.compile(module, mode=plan.mode, dynamic=plan.dynamic)


def compiled_forward(module: torch.nn.Module, plan: CompilePlan, inputs: Sequence[Any],
                     torch_device: torch.device, device: str = "") -> Any:
    """``module`` compiled and run once on ``inputs`` (on a stream of its own on CUDA), so that
    what torch.compile builds on the first call is built here and not on a request.

    As one graph (``fullgraph=True``) where it can be; where a graph break stops that, a
    warning names it and the functions breaks fall in run outside torch.compile (see
    :mod:`._compile_breaks`): no piece of the lowering is compiled again per call site and per
    shape until dynamo's recompile limit.  Without a break the one compile is the only one.
    """
    from inferplex.devices.gpu._compile_breaks import compile_forward

    if not isinstance(module, torch.fx.GraphModule):  # not a lowering: no breaks looked for
        return _run_once(torch.compile(module, mode=plan.mode, dynamic=False), inputs, torch_device)
    return compile_forward(module, plan.mode, lambda forward: _run_once(forward, inputs, torch_device),
                           device or str(torch_device))


def _run_once(forward: Any, inputs: Sequence[Any], torch_device: torch.device) -> Any:
    """``forward`` run once on ``inputs`` under inferplex's torch settings (on CUDA on a stream of
    its own, waited for): torch.compile compiles on that call."""
    from inferplex.devices.gpu.settings import TORCH_SETTINGS

    with TORCH_SETTINGS.scope(), torch.inference_mode():
        if torch_device.type != "cuda":
            forward(*inputs)
            return forward
        stream = torch.cuda.Stream(torch_device)
        with torch.cuda.stream(stream):
            forward(*inputs)
        stream.synchronize()
    return forward


def example_inputs(lowered: LoweredGraph, torch_device: torch.device) -> list[torch.Tensor]:
    """Zeros of the static input shapes, made as a run makes its inputs (torch.compile guards on
    how, and would compile again on the first request otherwise): in inference mode, device
    tensors on CUDA, tensors over numpy arrays on the host."""
    shapes = [([d for d in shape or () if isinstance(d, int)], dtype)
              for shape, dtype in zip(lowered.input_shapes, lowered.input_dtypes, strict=True)]
    with torch.inference_mode():  # runs move their inputs in inference mode too
        if torch_device.type == "cuda":
            return [torch.zeros(shape, dtype=dtype, device=torch_device) for shape, dtype in shapes]
        return [numpy_to_torch(torch_to_numpy(torch.zeros(shape, dtype=dtype))) for shape, dtype in shapes]


def capture_on_workers(variant: Variant, inputs: list[torch.Tensor], workers: Sequence[WorkerState],
                       on_capture_thread: bool) -> list[Captured]:
    """``variant``'s forward captured on every worker: all of them or, raising InferenceError, none
    (the caller holds :data:`.graphs.GATE`)."""
    graphs = [capture_graph(variant.forward, inputs, state.stream, state.pool, variant, on_capture_thread)
              for state in workers]
    captured = [graph for graph in graphs if graph is not None]
    if len(captured) != len(graphs):
        raise InferenceError("the compiled forward cannot be captured in a CUDA graph")
    return captured


def install_graphs(workers: Sequence[WorkerState], signature: tuple[Any, ...],
                   graphs: Sequence[Captured]) -> None:
    """Make ``graphs`` the workers' graphs of ``signature``, replacing those they have."""
    for state, graph in zip(workers, graphs, strict=True):
        state.stream.synchronize()  # no replay of the graph replaced here still runs
        state.graphs[signature] = graph


def replay_on_workers(workers: Sequence[WorkerState], graphs: Sequence[Any]) -> Callable[[], None]:
    """One replay of each worker's graph, queued on that worker's stream (they run side by side,
    as the workers of a THROUGHPUT program serve)."""
    pairs = list(zip(workers, graphs, strict=True))

    def replay() -> None:
        for state, graph in pairs:
            with torch.cuda.stream(state.stream):
                graph.replay()

    return replay


def no_wait() -> None:
    """Nothing to wait for: an emulated GPU runs synchronously."""


def seconds_per_run(run: Callable[[], Any], synchronize: Callable[[], Any], runs: int = 10) -> float:
    """Wall seconds of one ``run()`` (on CUDA one replay: queued ``runs`` times, then waited for)."""
    run()
    synchronize()
    began = time.perf_counter()
    for _ in range(runs):
        run()
    synchronize()
    return (time.perf_counter() - began) / runs


def measured_faster(compiled: Callable[[], Any], eager: Callable[[], Any], synchronize: Callable[[], Any],
                    rounds: int = 5) -> tuple[bool, float, float]:
    """Whether ``compiled`` runs at least :data:`SWITCH_GAIN` faster than ``eager``: (faster, compiled
    seconds, eager seconds), medians of ``rounds`` alternated measurements (no other runs meanwhile)."""
    compiled_s: list[float] = []
    eager_s: list[float] = []
    for round_ in range(rounds):
        pair = [(compiled, compiled_s), (eager, eager_s)]
        for run, times in pair if round_ % 2 == 0 else reversed(pair):
            times.append(seconds_per_run(run, synchronize))
    fast, slow = statistics.median(compiled_s), statistics.median(eager_s)
    return fast <= slow * (1.0 - SWITCH_GAIN), fast, slow


_running: weakref.WeakSet[CompiledTier] = weakref.WeakSet()
_hooked = False
_hook_lock = threading.Lock()


def _wait_before_threading_shuts_down(tier: CompiledTier) -> None:
    """Let exit wait for ``tier``'s compile (up to :data:`TIER_EXIT_WAIT`) before the thread pools stop.

    At exit Python first stops ``threading`` (its own exit hooks end the standard
    library's thread and process pools, and no module may register another), and
    only then runs ``atexit`` hooks, :mod:`inferplex.engine.lifecycle`'s among them.
    A torch.compile still running then fails inside torch (a pool it starts, or a
    module that registers at import, is refused), and torch's native threads torn
    down under it abort the interpreter.  So the wait is one of ``threading``'s own
    exit hooks, registered after the pools' modules are imported: it runs before
    theirs, while they still take work.
    """
    global _hooked
    import concurrent.futures.process
    import concurrent.futures.thread  # noqa: F401

    _running.add(tier)
    register = getattr(threading, "_register_atexit", None)
    with _hook_lock:
        if _hooked or register is None:
            return
        try:
            register(_wait_for_compiles)
        except RuntimeError:  # already shutting down: lifecycle's atexit wait is all there is
            return
        _hooked = True


def _wait_for_compiles() -> None:
    deadline = time.monotonic() + TIER_EXIT_WAIT
    for tier in list(_running):
        tier.wait(max(0.0, deadline - time.monotonic()))


class CompiledTier:
    """A background compile of ``lowered`` that hands its forward to the program when it is ready.

    On a daemon thread: :func:`compiled_forward` on :func:`example_inputs`, then
    ``install()(forward, inputs)`` (a weak method of the program: the thread
    keeps no released program alive) makes it the program's forward where the
    plan allows and returns the tier that serves then (``COMPILED``,
    ``KEPT_EAGER``, or ``ABANDONED`` when the program was released meanwhile).  Watched by
    :mod:`inferplex.engine.lifecycle` (``holds_exit``) while it runs.
    """

    holds_exit = True

    def __init__(self, device: str, lowered: LoweredGraph, plan: CompilePlan, torch_device: torch.device,
                 install: Callable[[], Callable[[Any, list[torch.Tensor]], str] | None]) -> None:
        self.device = device
        self._state = COMPILING
        self._lock = threading.Lock()
        self._released = False
        self._done = threading.Event()
        self._exit_began: float | None = None
        lifecycle.watch(self)
        inputs = example_inputs(lowered, torch_device)

        def compile_forward() -> Any:
            if plan.artifacts is not None:
                from inferplex.devices.gpu.cache_form import load_torch_artifacts

                load_torch_artifacts(plan.artifacts)
            return compiled_forward(lowered.module, plan, inputs, torch_device, device)

        def switch(forward: Any) -> str:
            method = install()
            return ABANDONED if method is None else method(forward, inputs)

        _wait_before_threading_shuts_down(self)
        self._job: tuple[Callable[[], Any], Callable[[Any], str]] | None = (compile_forward, switch)
        threading.Thread(target=self._run, daemon=True, name=f"inferplex-compile-{device}").start()

    @property
    def state(self) -> str:
        """COMPILING, COMPILED, KEPT_EAGER, FAILED or ABANDONED."""
        with self._lock:
            return self._state

    def release(self) -> None:
        """Stop waiting for the compile: its forward is dropped when it ends."""
        with self._lock:
            self._released = True
            if self._state == COMPILING:
                self._state = ABANDONED

    def _run(self) -> None:
        job, self._job = self._job, None
        assert job is not None
        state = self._compile_and_install(*job)
        # What the compile made (modules, kernels, the released program's weights) is dropped
        # here, before exit may go on: torch's native destructors cut short by the interpreter's
        # finalization abort it ("terminate called without an active exception").
        del job
        with self._lock:
            self._state = ABANDONED if self._released else state
        self._done.set()
        lifecycle.progress()

    def _compile_and_install(self, compile_forward: Callable[[], Any], install: Callable[[Any], str]) -> str:
        try:
            with COMPILE_LOCK:
                forward = None if self._released else compile_forward()
                if forward is not None and not self._released:
                    return install(forward)
                return ABANDONED
        except Exception as error:  # noqa: BLE001 - the eager tier serves on; no request fails
            _log.warning("inferplex: %s: torch.compile in the background failed, the eager lowering "
                         "serves on: %s: %s", self.device, type(error).__name__, error)
            return FAILED

    def wait(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for the compile to end and drop what it made; True if it has."""
        return self._done.wait(timeout)

    def exit_deadline(self) -> float | None:
        if self._done.is_set():
            return None
        if self._exit_began is None:
            self._exit_began = time.monotonic()
        return self._exit_began + TIER_EXIT_WAIT

    def abandon(self) -> None:
        _log.warning("inferplex: %s: torch.compile still runs at exit after %.0f s; left running",
                     self.device, TIER_EXIT_WAIT)
