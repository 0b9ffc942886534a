"""AUTO: pick the device (or devices) for a model, with startup and runtime fallback.

Candidates are the user's list (``AUTO:GPU.1,GPU.0,CPU``) or every available
device ordered by the ``DEVICE_TYPE`` device property (discrete, then
integrated, then other accelerators, then the host), minus exclusions
(``AUTO:-CPU``; a family name excludes all its devices).

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
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, wait
from typing import TYPE_CHECKING, Any, TypeVar, cast

from inferplex.config.devices import DeviceSpec, DeviceTarget
from inferplex.devices.sharing import share_the_host
from inferplex.errors import CompileError, DeviceNameError, PropertyError
from inferplex.executor import Done, Executor, RunResult
from inferplex.multi.members import (
    compile_error,
    compile_member,
    compile_members,
    member_config,
    resolve_targets,
)
from inferplex.multi.scheduler import MultiExecutor
from inferplex.multi.state import Member, SchedulerOptions

if TYPE_CHECKING:
    import onnx_ir as ir

    from inferplex.devices.registry import DeviceRegistry

__all__ = ["AutoExecutor", "auto_candidates", "compile_auto", "device_rank"]

_log = logging.getLogger("inferplex")
_T = TypeVar("_T")

# DEVICE_TYPE values, best first; unknown types rank between accelerators and the host.
_TYPE_RANKS = {"discrete": 0, "integrated": 1, "accelerator": 2, "host": 4}
_UNKNOWN_RANK = 3
HOST_RANK = _TYPE_RANKS["host"]


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


def auto_candidates(registry: DeviceRegistry, spec: DeviceSpec) -> list[DeviceTarget]:
    """AUTO's candidates in priority order: the user's list, or all devices best first."""
    if spec.targets:
        candidates = resolve_targets(registry, spec.targets)
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
                 config: Mapping[str, Any]) -> Executor:
    """Compile for AUTO; see the module docstring."""
    hint = str(config.get("PERFORMANCE_HINT", "LATENCY"))
    candidates = auto_candidates(registry, spec)
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
        return MultiExecutor(members, options, resolve=registry.full_name)
    names = list(configs)
    counts = {t.name: t.num_requests for t in candidates}
    compile_one = lambda name: compile_member(  # noqa: E731
        registry, model, name, configs[name], counts.get(name))
    helper = _startup_helper(registry, names) if config.get("ENABLE_STARTUP_FALLBACK", True) else None
    if helper is None:
        member = _compile_first(names, compile_one, unsupported)
        return AutoExecutor(MultiExecutor([member], options, resolve=registry.full_name))
    chosen = names[:names.index(helper)]
    # The helper serves, and compiles, beside the device it stands in for: leave that one cores.
    share_the_host(registry, {chosen[0]: configs[chosen[0]], helper: configs[helper]}, yield_cores=True)
    expected = _optimal_guess(registry, chosen[0], configs[chosen[0]])
    return _start_with_helper(helper, chosen, compile_one, unsupported, options,
                              registry.full_name, expected)


def _supporting(registry: DeviceRegistry, model: ir.Model, candidates: Sequence[DeviceTarget],
                config: Mapping[str, Any], hint: str) -> tuple[dict[str, dict[str, Any]], dict[str, str]]:
    """Member configs of the candidates that run every op; reasons for the others."""
    # The Core names every node (unique, non-empty) before a virtual device sees the model.
    types = {cast("str", node.name): node.op_type for node in model.graph}
    nodes = set(types)
    configs: dict[str, dict[str, Any]] = {}
    reasons: dict[str, str] = {}
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
            reasons[target.name] = f"does not support {listed}{more}"
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


def _in_thread(function: Callable[[], _T], name: str) -> Future[_T]:
    """Run ``function`` on a thread of its own, which interpreter exit waits for.

    A compile still running in a daemon thread at exit (the helper's, or the
    chosen device's after the helper served a short program's requests) aborted
    the interpreter: ONNX Runtime's and torch's native threads were torn down
    under it ("terminate called without an active exception").
    """
    future: Future[_T] = Future()

    def target() -> None:
        try:
            future.set_result(function())
        except BaseException as error:  # noqa: BLE001 - handed to the future
            future.set_exception(error)

    threading.Thread(target=target, daemon=False, name=name).start()
    return future


def _start_with_helper(helper: str, chosen: list[str], compile_one: Callable[[str], Member],
                       failures: dict[str, str], options: SchedulerOptions,
                       resolve: Callable[[str], str], expected: int) -> Executor:
    """Serve from ``helper`` as soon as it compiles, unless a chosen device is ready first."""
    selected = _in_thread(lambda: _compile_first(chosen, compile_one, failures), "inferplex-auto")
    helping = _in_thread(lambda: compile_one(helper), "inferplex-auto-helper")
    wait([selected, helping], return_when=FIRST_COMPLETED)
    if selected.done() and selected.exception() is None:
        executor = AutoExecutor(MultiExecutor([selected.result()], options, resolve=resolve))
        helping.add_done_callback(executor._keep_as_fallback)
        return executor
    if helping.exception() is not None:
        wait([selected])
        error = selected.exception()
        if error is not None:
            helper_error = helping.exception()
            raise CompileError(f"{error}; {helper}: {type(helper_error).__name__}: "
                               f"{helper_error}") from error
        return AutoExecutor(MultiExecutor([selected.result()], options, resolve=resolve))
    executor = AutoExecutor(MultiExecutor([helping.result()], options, resolve=resolve),
                            starting=helper, expected_requests=expected)
    selected.add_done_callback(executor._hand_over)
    return executor


class AutoExecutor(Executor):
    """AUTO's executor: a MULTI scheduler, plus the startup hand-over state."""

    def __init__(self, scheduler: MultiExecutor, starting: str | None = None,
                 expected_requests: int = 0) -> None:
        self.scheduler = scheduler
        self._starting = starting
        self._expected = expected_requests
        self._lock = threading.Lock()
        self._closed = False
        self._ready = threading.Event()
        if starting is None:
            self._ready.set()

    def wait_ready(self, timeout: float | None = None) -> bool:
        """Block until the startup hand-over is over (or failed); True when it is."""
        return self._ready.wait(timeout)

    @property
    def optimal_number_of_infer_requests(self) -> int:
        number = self.scheduler.optimal_number_of_infer_requests
        return max(number, self._expected) if self._starting else number

    @property
    def execution_devices(self) -> list[str]:
        with self._lock:
            if self._starting:
                return [f"({self._starting})"]
        return self.scheduler.execution_devices

    def run(self, inputs: Mapping[str, Any]) -> RunResult:
        return self.scheduler.run(inputs)

    def submit(self, inputs: Mapping[str, Any], done: Done) -> None:
        self.scheduler.submit(inputs, done)

    def wait(self, event: threading.Event, timeout: float | None = None) -> bool:
        return self.scheduler.wait(event, timeout)

    def get_property(self, key: str) -> Any:
        if key == "EXECUTION_DEVICES":
            return self.execution_devices
        if key == "OPTIMAL_NUMBER_OF_INFER_REQUESTS":
            return self.optimal_number_of_infer_requests
        return self.scheduler.get_property(key)

    def property_names(self) -> tuple[str, ...]:
        return self.scheduler.property_names()

    def set_property(self, properties: Mapping[str, Any]) -> None:
        if self._starting and "MULTI_DEVICE_PRIORITIES" in properties:
            raise PropertyError("MULTI_DEVICE_PRIORITIES cannot change while AUTO's chosen device "
                                "is still compiling; call it after EXECUTION_DEVICES loses its ()")
        self.scheduler.set_property(properties)

    def close(self) -> None:
        with self._lock:
            self._closed = True
        self.scheduler.close()
        self._ready.set()

    def _hand_over(self, future: Future[Member]) -> None:
        """The chosen device compiled (or every chosen one failed): switch to it."""
        helper = self._starting
        try:
            member = future.result()
        except Exception as error:  # noqa: BLE001 - the helper keeps serving
            _log.warning("inferplex: AUTO keeps running on %s: %s", helper, error)
            with self._lock:
                self._starting = None
            self._ready.set()
            return
        with self._lock:
            if self._closed:
                member.executor.close()
                return
            self.scheduler.add_member(member, serving=False)
            fallback: list[str] = []
            if helper is not None and self.scheduler.get_property("ENABLE_RUNTIME_FALLBACK"):
                fallback = [helper]
            self.scheduler.set_roles([member.name], fallback)
            self._starting = None
        _log.info("inferplex: AUTO handed over from %s to %s", helper, member.name)
        self._ready.set()

    def _keep_as_fallback(self, future: Future[Member]) -> None:
        """The host compiled after the chosen device: keep it for runtime fallback, or close it."""
        if future.exception() is not None:
            return
        member = future.result()
        with self._lock:
            keep = not self._closed and self.scheduler.get_property("ENABLE_RUNTIME_FALLBACK")
            if keep:
                self.scheduler.add_member(member, serving=False)
                self.scheduler.set_roles(self.scheduler.get_property(
                    "MULTI_DEVICE_PRIORITIES").split(","), [member.name])
        if not keep:
            member.executor.close()
