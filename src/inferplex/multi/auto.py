"""AUTO: pick the device (or devices) for a model, with startup and runtime fallback.

Candidates are the user's list (``AUTO:GPU.1,GPU.0,CPU``) or every available
device ordered by the ``DEVICE_TYPE`` device property (discrete, then
integrated, then other accelerators, then the host, then remote devices such
as a cluster's nodes, which a request reaches over the network), minus
exclusions (``AUTO:-CPU``; a family name excludes all its devices).  With
``CUMULATIVE_THROUGHPUT`` a family name in the list means all its devices, as in
OpenVINO (``AUTO:GPU`` uses every GPU, ``AUTO:RAY`` every node of the cluster).

- ``LATENCY`` (default) and ``THROUGHPUT`` run on one device: the first
  candidate that supports every op of the model and compiles.
- ``CUMULATIVE_THROUGHPUT`` runs MULTI over every candidate that compiles.

Startup fallback (``ENABLE_STARTUP_FALLBACK``, default on): while the chosen
device compiles, a host device later in the candidate list (one that compiles
fast) serves the requests; ``EXECUTION_DEVICES`` reads ``["(CPU)"]``
meanwhile.  The host leaves the chosen device cores, as in MULTI
(:mod:`inferplex.devices.sharing`), so that the chosen device's compile and,
later, its feeding threads find them free.  When the chosen device is ready it
takes every request not yet started; requests already running on the host
finish there, so none is lost or run twice.  With runtime fallback on, the
host then stays as the device that re-runs failed requests.

AUTO runs on the MULTI :class:`~inferplex.engine.dispatcher.Dispatcher`: the
helper is its first member, and the chosen device's compile, on a daemon thread
of its own (:class:`_BackgroundCompile`), hands over through
:meth:`~inferplex.engine.dispatcher.Dispatcher.hand_over`.  A compile that ends
after the model was released closes its program at once; at interpreter exit,
one still running is waited for a bounded time (``EXIT_TIMEOUT`` where the
program sets it, else :data:`COMPILE_EXIT_WAIT`), since ONNX Runtime and torch
abort the interpreter when their native threads are torn down under a compile.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, wait
from typing import TYPE_CHECKING, Any, Generic, TypeVar, cast

from inferplex.config.devices import DeviceSpec, DeviceTarget
from inferplex.devices.sharing import share_the_host
from inferplex.engine import lifecycle
from inferplex.engine.completions import blocking
from inferplex.engine.dispatch_state import Member
from inferplex.engine.dispatcher import Dispatcher
from inferplex.errors import CompileError, DeviceNameError
from inferplex.multi.members import (
    compile_error,
    compile_member,
    compile_members,
    failure_reason,
    member_config,
    resolve_targets,
)
from inferplex.scheduling.options import SchedulerOptions

if TYPE_CHECKING:
    import onnx_ir as ir

    from inferplex.devices.registry import DeviceRegistry

__all__ = ["auto_candidates", "compile_auto", "device_rank"]

_log = logging.getLogger("inferplex")
_T = TypeVar("_T")

# DEVICE_TYPE values, best first; unknown types rank between accelerators and the host.
_TYPE_RANKS = {"discrete": 0, "integrated": 1, "accelerator": 2, "host": 4, "remote": 5}
_UNKNOWN_RANK = 3
HOST_RANK = _TYPE_RANKS["host"]

COMPILE_EXIT_WAIT = 10.0
"""Seconds interpreter exit waits for a background compile still running (then leaves it), unless
``EXIT_TIMEOUT`` says otherwise: longer than a device's compile takes (the GPU's lowering and
CUDA-graph captures, seconds), shorter than a program that hangs should."""


def device_rank(registry: DeviceRegistry, device: str) -> int | None:
    """Rank of ``device`` for AUTO's default order (lower first); ``None`` when it does not say.

    Read from the device property ``DEVICE_TYPE`` ("discrete", "integrated",
    "accelerator", "host"), else ``DEVICE_PRIORITY_CLASS`` (an int, lower first).
    """
    try:
        kind = registry.device_property(device, "DEVICE_TYPE")
        return _TYPE_RANKS.get(str(kind).lower(), _UNKNOWN_RANK)
    except Exception:  # noqa: BLE001 - a device that cannot say keeps its registration order
        pass
    try:
        return int(registry.device_property(device, "DEVICE_PRIORITY_CLASS"))
    except Exception:  # noqa: BLE001
        return None


def auto_candidates(registry: DeviceRegistry, spec: DeviceSpec,
                    whole_families: bool = False) -> list[DeviceTarget]:
    """AUTO's candidates in priority order: the user's list, or all devices best first.

    ``whole_families``: a family name in the list stands for every device of the
    family (CUMULATIVE_THROUGHPUT), not only its first.
    """
    if spec.targets:
        targets = _whole_families(registry, spec.targets) if whole_families else spec.targets
        candidates = resolve_targets(registry, targets)
    else:
        devices = registry.available_devices()
        ranks = {device: device_rank(registry, device) for device in devices}
        order = sorted(devices, key=lambda d: _UNKNOWN_RANK if (rank := ranks[d]) is None else rank)
        candidates = [DeviceTarget(device) for device in order]
    excluded = _excluded(registry, spec.exclusions)
    kept = [t for t in candidates if t.name not in excluded]
    if not kept:
        raise DeviceNameError(f"AUTO has no candidate device left for {spec.text or 'AUTO'!r}: "
                              f"available: {', '.join(registry.available_devices()) or 'none'}")
    return kept


def _whole_families(registry: DeviceRegistry, targets: Sequence[DeviceTarget]) -> list[DeviceTarget]:
    """``targets`` with each bare family name (``GPU``) replaced by all the family's devices."""
    families = registry.families()
    named = {target.name for target in targets}
    expanded: list[DeviceTarget] = []
    for target in targets:
        devices = registry.plugin(target.name).devices() if target.name in families else []
        if len(devices) > 1:  # devices also named on their own keep their own place
            expanded.extend(DeviceTarget(d, target.num_requests) for d in devices if d not in named)
        else:
            expanded.append(target)
    return expanded


def _excluded(registry: DeviceRegistry, exclusions: Sequence[str]) -> set[str]:
    excluded: set[str] = set()
    families = registry.families()
    for name in exclusions:
        if name in families:
            excluded.update(registry.plugin(name).devices())
        else:
            excluded.add(registry.full_name(name))
    return excluded


def compile_auto(registry: DeviceRegistry, model: ir.Model, spec: DeviceSpec,
                 config: Mapping[str, Any]) -> Dispatcher:
    """Compile for AUTO; see the module docstring."""
    hint = str(config.get("PERFORMANCE_HINT", "LATENCY"))
    candidates = auto_candidates(registry, spec, whole_families=hint == "CUMULATIVE_THROUGHPUT")
    options = SchedulerOptions.from_config(config, default_hint="LATENCY")
    member_hint = "THROUGHPUT" if hint == "CUMULATIVE_THROUGHPUT" else hint
    configs, unsupported = _supporting(registry, model, candidates, config, member_hint)
    if not configs:
        raise compile_error(unsupported)
    if hint == "CUMULATIVE_THROUGHPUT":
        for name, reason in unsupported.items():
            _log.warning("inferplex: AUTO leaves out %s: %s", name, reason)
        kept = [t for t in candidates if t.name in configs]
        members = compile_members(registry, model, kept, config, member_hint)
        return Dispatcher(members, options, resolve=registry.full_name)
    names = list(configs)
    counts = {t.name: t.num_requests for t in candidates}
    compile_one = lambda name: compile_member(  # noqa: E731
        registry, model, name, configs[name], counts.get(name), exit_timeout=config.get("EXIT_TIMEOUT"))
    helper = _startup_helper(registry, names) if config.get("ENABLE_STARTUP_FALLBACK", True) else None
    if helper is None:
        member = _compile_first(names, compile_one, unsupported)
        return Dispatcher([member], options, resolve=registry.full_name)
    chosen = names[:names.index(helper)]
    # The helper serves, and compiles, beside the device it stands in for: leave that one cores.
    share_the_host(registry, {chosen[0]: configs[chosen[0]], helper: configs[helper]}, yield_cores=True)
    expected = _optimal_guess(registry, chosen[0], configs[chosen[0]])
    exit_wait = config.get("EXIT_TIMEOUT")
    return _start_with_helper(helper, chosen, compile_one, unsupported, options,
                              registry.full_name, expected,
                              COMPILE_EXIT_WAIT if exit_wait is None else float(exit_wait))


def _supporting(registry: DeviceRegistry, model: ir.Model, candidates: Sequence[DeviceTarget],
                config: Mapping[str, Any], hint: str) -> tuple[dict[str, dict[str, Any]], dict[str, str]]:
    """Member configs of the candidates that run every op; reasons for the others."""
    # The Core names every node (unique, non-empty) before a virtual device sees the model.
    types = {cast("str", node.name): node.op_type for node in model.graph}
    nodes = set(types)
    configs: dict[str, dict[str, Any]] = {}
    reasons: dict[str, str] = {}
    unranked = [value.name for value in model.graph.inputs if value.shape is None]
    reshape = (f" (the model's inputs {', '.join(map(repr, unranked))} are declared without a shape: "
               "model.reshape gives them one, which may let the device run these)") if unranked else ""
    for target in candidates:
        device_config = member_config(registry, target.name, config, hint)
        try:
            missing = nodes - registry.supported_nodes(model, target.name, device_config)
        except Exception as error:  # noqa: BLE001 - a device that cannot tell is not chosen
            reasons[target.name] = f"cannot check op support: {type(error).__name__}: {error}"
            continue
        if missing:
            listed = ", ".join(f"{types[n]} ({n})" for n in sorted(missing)[:5])
            more = f" and {len(missing) - 5} more" if len(missing) > 5 else ""
            reasons[target.name] = f"does not support {listed}{more}{reshape}"
        else:
            configs[target.name] = device_config
    return configs, reasons


def _startup_helper(registry: DeviceRegistry, names: Sequence[str]) -> str | None:
    """A host device after the first candidate, to serve while that one compiles."""
    ranks = [device_rank(registry, name) for name in names]
    if all(rank is None for rank in ranks):
        return names[-1] if len(names) > 1 else None  # devices do not say: the last one
    for name, rank in zip(names[1:], ranks[1:], strict=True):
        if rank == HOST_RANK:
            return name
    return None


def _optimal_guess(registry: DeviceRegistry, device: str, config: Mapping[str, Any]) -> int:
    try:
        plugin, full = registry.resolve(device)
        return int(plugin.optimal_number_of_infer_requests(full, config))
    except Exception:  # noqa: BLE001 - only a hint for OPTIMAL_NUMBER_OF_INFER_REQUESTS
        return 1


def _compile_first(names: Sequence[str], compile_one: Callable[[str], Member],
                   failures: dict[str, str]) -> Member:
    """The first of ``names`` that compiles; CompileError with every reason otherwise."""
    reasons: dict[str, BaseException | str] = dict(failures)
    for name in names:
        try:
            return compile_one(name)
        except Exception as error:  # noqa: BLE001 - the next candidate is tried
            _log.warning("inferplex: AUTO: %s failed to compile the model: %s", name, error)
            reasons[name] = error
    raise compile_error(reasons)


class _BackgroundCompile(Generic[_T]):
    """A compile on a daemon thread of its own, ending through :attr:`future`.

    Not ``concurrent.futures``: its threads are joined at exit without bound.
    Watched by :mod:`inferplex.engine.lifecycle`, which holds exit up to
    ``exit_wait`` seconds while the compile runs.
    """

    holds_exit = True

    def __init__(self, function: Callable[[], _T], name: str, exit_wait: float = COMPILE_EXIT_WAIT) -> None:
        self.future: Future[_T] = Future()
        self._exit_wait = exit_wait
        self._exit_began: float | None = None
        self._abandoned = False
        lifecycle.watch(self)
        self._function: Callable[[], _T] | None = function
        threading.Thread(target=self._run, daemon=True, name=name).start()

    def _run(self) -> None:
        # The thread holds nothing once the future is set: what the function's closure
        # drops, it drops before exit may go on (native destructors cut short by the
        # interpreter's finalization abort it).
        function, self._function = self._function, None
        assert function is not None
        try:
            result = function()
        except BaseException as error:  # noqa: BLE001 - handed to the future
            del function
            self.future.set_exception(error)
        else:
            del function
            self.future.set_result(result)
        finally:
            lifecycle.progress()

    def exit_deadline(self) -> float | None:
        if self.future.done() or self._abandoned:
            return None
        if self._exit_began is None:
            self._exit_began = time.monotonic()
        return self._exit_began + self._exit_wait

    def abandon(self) -> None:
        self._abandoned = True
        _log.warning("inferplex: AUTO: a device still compiles at exit after %.0f s; left running",
                     self._exit_wait)


def _start_with_helper(helper: str, chosen: list[str], compile_one: Callable[[str], Member],
                       failures: dict[str, str], options: SchedulerOptions,
                       resolve: Callable[[str], str], expected: int, exit_wait: float) -> Dispatcher:
    """Serve from ``helper`` as soon as it compiles, unless a chosen device is ready first."""
    selected = _BackgroundCompile(lambda: _compile_first(chosen, compile_one, failures), "inferplex-auto",
                                  exit_wait)
    helping = _BackgroundCompile(lambda: compile_one(helper), "inferplex-auto-helper", exit_wait)
    with blocking():
        wait([selected.future, helping.future], return_when=FIRST_COMPLETED)
    if selected.future.done() and selected.future.exception() is None:
        dispatcher = Dispatcher([selected.future.result()], options, resolve=resolve)
        helping.future.add_done_callback(dispatcher.keep_as_fallback)
        return dispatcher
    if helping.future.exception() is not None:
        with blocking():
            wait([selected.future])
        error = selected.future.exception()
        if error is not None:
            helper_error = helping.future.exception()
            raise CompileError(f"{error}; {helper}: {failure_reason(cast('BaseException', helper_error))}") \
                from error
        return Dispatcher([selected.future.result()], options, resolve=resolve)
    dispatcher = Dispatcher([helping.future.result()], options, resolve=resolve, starting=helper,
                            expected_requests=expected)
    selected.future.add_done_callback(dispatcher.hand_over)
    return dispatcher
