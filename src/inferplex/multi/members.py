"""Compiling the member devices of MULTI and AUTO, in parallel, through the registry."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from inferplex.errors import CompileError
from inferplex.executor import ProgramExecutor
from inferplex.multi.state import Member
from inferplex.properties import DeviceTarget

if TYPE_CHECKING:
    import onnx_ir as ir

    from inferplex.devices.registry import DeviceRegistry

__all__ = ["compile_error", "compile_member", "compile_members", "member_config", "resolve_targets",
           "share_the_host"]

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


HOST_CORES_PER_ACCELERATOR = 2
"""Host cores a host device leaves to each accelerator working beside it."""


def share_the_host(registry: DeviceRegistry, configs: dict[str, dict[str, Any]]) -> None:
    """A host device (DEVICE_TYPE ``host``) beside accelerators leaves them cores.

    Each accelerator's requests are fed by host threads (input copies, kernel
    launches, result copies).  A host device whose streams take every core
    starves them: on a 32-core host, CPU+GPU served about half of what the GPU
    alone did (bench/multi_auto.py).  A thread count the user set is kept.
    """
    kinds = {name: _device_type(registry, name) for name in configs}
    hosts = [name for name, kind in kinds.items() if kind == "host"]
    accelerators = len(configs) - len(hosts)
    if not hosts or not accelerators:
        return
    for host in hosts:
        plugin, _ = registry.resolve(host)
        if "INFERENCE_NUM_THREADS" in configs[host] or \
                "INFERENCE_NUM_THREADS" not in plugin.supported_properties():
            continue
        try:
            cores = int(registry.device_property(host, "NUMBER_OF_CORES"))
        except Exception:  # noqa: BLE001 - a host that cannot say keeps its own default
            continue
        configs[host]["INFERENCE_NUM_THREADS"] = max(1, cores - HOST_CORES_PER_ACCELERATOR * accelerators)


def _device_type(registry: DeviceRegistry, device: str) -> str:
    try:
        return str(registry.device_property(device, "DEVICE_TYPE")).lower()
    except Exception:  # noqa: BLE001 - a device that does not say is not the host
        return ""


def compile_member(registry: DeviceRegistry, model: ir.Model, device: str,
                   config: Mapping[str, Any], num_requests: int | None = None) -> Member:
    """Compile on one device and wrap it; the pool is ``num_requests`` or the device's number."""
    program = registry.compile(model, device, config)
    executor = ProgramExecutor(program, profiling=bool(config.get("ENABLE_PROFILING", False)))
    return Member(device, executor, num_requests or int(program.num_workers))


def compile_members(registry: DeviceRegistry, model: ir.Model, targets: Sequence[DeviceTarget],
                    config: Mapping[str, Any], hint: str | None) -> list[Member]:
    """Compile on every target at once; drop (with a warning) those that fail.

    Raises :class:`CompileError` listing every device's reason when all fail.
    Bad names and bad per-device properties are raised before anything compiles.
    """
    targets = resolve_targets(registry, targets)
    configs = {t.name: member_config(registry, t.name, config, hint) for t in targets}
    share_the_host(registry, configs)
    with ThreadPoolExecutor(max(1, len(targets)), thread_name_prefix="inferplex-compile") as pool:
        futures = {t.name: pool.submit(compile_member, registry, model, t.name, configs[t.name],
                                       t.num_requests) for t in targets}
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
    reasons = "; ".join(f"{name}: {_reason(error)}" for name, error in failures.items())
    return CompileError(f"no device could compile the model: {reasons}")


def _reason(error: BaseException | str) -> str:
    return error if isinstance(error, str) else f"{type(error).__name__}: {error}"
