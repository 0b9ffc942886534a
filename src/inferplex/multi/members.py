"""Compiling the member devices of MULTI and AUTO, in parallel, through the registry.

Each member becomes a :class:`~inferplex.engine.dispatch_state.Member`: a
:class:`~inferplex.engine.device_pool.DevicePool` over the compiled program,
with as many threads as the member takes requests at once.

``WORKER_PROCESSES`` (alias ``MULTI_WORKER_PROCESSES``; AUTO | YES | NO;
default AUTO) says which members run in a worker process of their own
(:mod:`inferplex.devices.remote`): AUTO those whose plugin reports
``GIL_BOUND`` (a CUDA GPU), since a GPU driven from the calling process shares
its GIL with every request's scheduling and callback; YES every member but the
host device; NO none.  ``bench/multi_auto.py`` compares them (figures in
bench/RESULTS.md).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from inferplex.config.devices import DeviceTarget
from inferplex.devices.sharing import device_type, share_the_host
from inferplex.engine.device_pool import DevicePool
from inferplex.engine.dispatch_state import Member
from inferplex.errors import CompileError, InferplexError

if TYPE_CHECKING:
    import onnx_ir as ir

    from inferplex.devices.base import DeviceProgram
    from inferplex.devices.registry import DeviceRegistry

__all__ = ["WORKER_PROCESSES_KEY", "compile_error", "compile_member", "compile_members", "failure_reason",
           "member_config", "resolve_targets", "wants_own_process"]

WORKER_PROCESSES_KEY = "WORKER_PROCESSES"

_log = logging.getLogger("inferplex")


def resolve_targets(registry: DeviceRegistry, targets: Sequence[DeviceTarget]) -> list[DeviceTarget]:
    """Full device names (``GPU`` -> ``GPU.0``); unknown names and repeats in one error."""
    names = registry.full_names([t.name for t in targets])
    return [DeviceTarget(name, t.num_requests) for name, t in zip(names, targets, strict=True)]


def member_config(registry: DeviceRegistry, device: str, config: Mapping[str, Any],
                  hint: str | None) -> dict[str, Any]:
    """The member's config, with ``hint`` as its PERFORMANCE_HINT when given.

    Members of MULTI and CUMULATIVE_THROUGHPUT compile for THROUGHPUT: the
    cumulative hint means something only to the virtual device.
    """
    virtual = dict(config)
    if hint is not None:
        virtual["PERFORMANCE_HINT"] = hint
    return registry.member_config(device, virtual)


def wants_own_process(registry: DeviceRegistry, devices: Sequence[str], setting: str) -> dict[str, bool]:
    """Which of the member ``devices`` serve from a worker process (see the module docstring)."""
    from inferplex.devices import remote

    return remote.wants_own_process(registry, devices, setting, min_bound=1)


def compile_member(registry: DeviceRegistry, model: ir.Model, device: str,
                   config: Mapping[str, Any], num_requests: int | None = None,
                   own_process: bool = False, exit_timeout: float | None = None) -> Member:
    """Compile on one device into a pool of ``num_requests`` threads (default: the device's workers).

    ``exit_timeout``: the virtual device's ``EXIT_TIMEOUT`` (see :class:`DevicePool`).
    """
    program: DeviceProgram
    program = registry.compile(model, device, config, own_process=own_process)
    try:
        profiling = bool(config.get("ENABLE_PROFILING", False))
        pool = DevicePool(program, threads=num_requests, profiling=profiling, exit_timeout=exit_timeout)
        host = device_type(registry, device) == "host"
    except BaseException:
        program.close()
        raise
    return Member(device, pool, host=host)


def compile_members(registry: DeviceRegistry, model: ir.Model, targets: Sequence[DeviceTarget],
                    config: Mapping[str, Any], hint: str | None) -> list[Member]:
    """Compile on every target at once; drop (with a warning) those that fail.

    Raises :class:`CompileError` listing every device's reason when all fail.
    Bad names and bad per-device properties are raised before anything compiles.
    """
    targets = resolve_targets(registry, targets)
    configs = {t.name: member_config(registry, t.name, config, hint) for t in targets}
    share_the_host(registry, configs, yield_cores=True)
    setting = str(config.get(WORKER_PROCESSES_KEY, "AUTO"))
    own = wants_own_process(registry, [t.name for t in targets], setting)
    with ThreadPoolExecutor(max(1, len(targets)), thread_name_prefix="inferplex-compile") as pool:
        futures = {t.name: pool.submit(compile_member, registry, model, t.name, configs[t.name],
                                       t.num_requests, own[t.name], config.get("EXIT_TIMEOUT"))
                   for t in targets}
    members: list[Member] = []
    failures: dict[str, BaseException] = {}
    for name, future in futures.items():
        error = future.exception()
        if error is None:
            members.append(future.result())
        else:
            failures[name] = error
            _log.warning("inferplex: %s failed to compile the model and is left out: %s", name, error)
    if not members:
        raise compile_error(failures) from next(iter(failures.values()), None)
    return members


def compile_error(failures: Mapping[str, BaseException | str]) -> CompileError:
    """One CompileError naming each device and its reason."""
    reasons = "; ".join(f"{name}: {failure_reason(error)}" for name, error in failures.items())
    return CompileError(f"no device could compile the model: {reasons}")


def failure_reason(error: BaseException | str) -> str:
    """A compile failure in words (inferplex's own errors as they are, others with their type)."""
    if isinstance(error, str | InferplexError):  # inferplex's errors already say what failed
        return str(error)
    return f"{type(error).__name__}: {error}"
