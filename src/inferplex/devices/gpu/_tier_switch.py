"""The compiled tier's side of a :class:`~inferplex.devices.gpu.program.GpuProgram`: when to start
it, and the switch of new runs to it once its graphs are captured (measured where the plan asks).

:class:`TierSwitch` is a base of ``GpuProgram``: the tier's compile (:mod:`.tiers`) calls
back into the program that serves meanwhile, and the switch works on that program's own
state (its lock, workers, generic lowering).  It is kept apart from the program's runs,
which only read the lowering the switch installs.
"""

from __future__ import annotations

import logging
import threading
import time
import weakref
from collections.abc import Callable
from contextlib import nullcontext
from typing import Any

import torch

from inferplex.devices.gpu import tiers
from inferplex.devices.gpu.graphs import GATE
from inferplex.devices.gpu.inputs import InputChecker
from inferplex.devices.gpu.settings import TORCH_SETTINGS
from inferplex.devices.gpu.workers import LruCache, Variant, WorkerState

__all__ = ["TierSwitch"]

_log = logging.getLogger(__name__)


class TierSwitch:
    """Starts a program's compiled tier and switches its runs to it (see the module docstring).

    The attributes below are the program's (set by ``GpuProgram.__init__``).
    """

    device: str
    input_names: tuple[str, ...]
    capture_on_one_thread: bool
    _plan: tiers.CompilePlan
    _tier: tiers.CompiledTier | None
    _generic: Variant | None
    _lock: threading.Condition
    _closed: bool
    _workers: list[WorkerState]
    _inputs_checker: InputChecker
    _eager_signatures: LruCache[tuple[Any, ...], bool]
    _graphs_possible: bool
    _cuda: bool
    _torch_device: torch.device
    _runs: int
    _made_at: float

    def start_compiled_tier(self) -> None:
        """Start compiling in the background where the plan is tiered: once the eager tier is
        warmed up (its captures then do not queue behind the compile's), or, for a plan that
        waits for the program to be hot, from the run that makes it so."""
        generic = self._generic
        if self._plan.how == "tiered" and self._tier is None and generic is not None and self._hot():
            self._tier = tiers.CompiledTier(self.device, generic.lowered, self._plan, self._torch_device,
                                            weakref.WeakMethod(self._switch_to))

    def _hot(self) -> bool:
        """Whether the plan's wait for a hot program is over (runs served and time since made)."""
        return self._runs >= self._plan.after_runs \
            and time.monotonic() - self._made_at >= self._plan.after_seconds

    def _switch_to(self, forward: Any, inputs: list[torch.Tensor]) -> str:
        """Make ``forward`` (the compiled tier) the one new runs take, on CUDA once every worker's
        graph of it is captured (replacing the eager one), unless the plan measures it and it is
        no faster; the tier that serves then (ABANDONED when the program was closed)."""
        with GATE.capture() if self._graphs_possible else nullcontext(), self._lock, TORCH_SETTINGS.scope():
            generic = self._generic
            if self._closed or generic is None:
                return tiers.ABANDONED
            variant = Variant(generic.lowered, forward, generic.graphs, generic.buffer_ptrs)
            signature = self._inputs_checker.check(dict(zip(self.input_names, inputs, strict=True)))[1]
            graphs = None
            if variant.graphs and signature not in self._eager_signatures:
                graphs = tiers.capture_on_workers(variant, inputs, self._workers, self.capture_on_one_thread)
            if self._plan.measured and not self._measured_faster(generic, forward, inputs, signature, graphs):
                if graphs is not None:
                    self._workers[0].stream.synchronize()  # no replay of the dropped graphs still runs
                return tiers.KEPT_EAGER
            if graphs is not None:
                tiers.install_graphs(self._workers, signature, graphs)
            self._generic = variant
            return tiers.COMPILED

    def _measured_faster(self, eager: Variant, forward: Any, inputs: list[torch.Tensor],
                         signature: tuple[Any, ...], graphs: list[Any] | None) -> bool:
        """Whether the compiled ``forward`` runs faster than the eager tier (no other run goes on
        meanwhile) as the program serves: where every worker holds both tiers' graphs, one replay
        per worker at once (a forward can be faster alone yet slower beside itself); otherwise
        the two forwards on worker 0, on the same inputs."""
        olds = [state.graphs.get(signature) for state in self._workers]
        compiled: Callable[[], Any]
        current: Callable[[], Any]
        if graphs is not None and all(old is not None for old in olds):
            workers = len(self._workers)
            compiled = tiers.replay_on_workers(self._workers, [graph.graph for graph in graphs])
            current = tiers.replay_on_workers(self._workers, [old.graph for old in olds if old is not None])

            def synchronize() -> None:
                for state in self._workers:
                    state.stream.synchronize()
        else:
            workers = 1
            compiled, current = (lambda: forward(*inputs)), (lambda: eager.forward(*inputs))
            synchronize = self._workers[0].stream.synchronize if self._cuda else tiers.no_wait
        stream = torch.cuda.stream(self._workers[0].stream) if self._cuda else nullcontext()
        with stream, torch.inference_mode():
            faster, compiled_s, eager_s = tiers.measured_faster(compiled, current, synchronize)
        _log.info("inferplex: %s: torch.compile's forward runs in %.3f ms, the eager tier's in %.3f ms "
                  "(%d worker(s) at once): %s", self.device, compiled_s * 1e3, eager_s * 1e3, workers,
                  "switching" if faster else "the eager tier serves on")
        return faster

    @property
    def compiled_tier(self) -> str:
        """Which tier serves (the ``COMPILED_TIER`` property, see :mod:`.tiers`)."""
        if self._tier is not None:
            return self._tier.state
        return tiers.COMPILED if self._plan.how == "inline" else tiers.EAGER
