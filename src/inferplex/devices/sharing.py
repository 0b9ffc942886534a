"""A host device working beside accelerators leaves them cores (HETERO, MULTI, AUTO).

Each accelerator's requests are fed by host threads: input copies, kernel
launches, result copies.  A host device whose threads take every core, or spin
on them while idle, starves those threads: the accelerators then serve far
less than alone, and in HETERO the GPU's copies of a CPU subgraph's outputs
wait for cores (bench/RESULTS.md has the measurements).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from inferplex.devices.registry import DeviceRegistry

__all__ = ["device_type", "share_the_host"]

HOST_CORES_PER_ACCELERATOR = 2
"""Host cores a host device leaves to each accelerator working beside it."""


def share_the_host(registry: DeviceRegistry, configs: dict[str, dict[str, Any]],
                   yield_cores: bool = False) -> None:
    """Give each host device (DEVICE_TYPE ``host``) in ``configs`` fewer threads and no spinning.

    ``configs`` maps the devices working together to their member configs and
    is updated in place.  The host keeps ``HOST_CORES_PER_ACCELERATOR`` cores
    per accelerator free and its idle threads sleep, where its plugin supports
    ``INFERENCE_NUM_THREADS`` / ``THREAD_SPINNING``; a value the user set is kept.
    With ``yield_cores`` (MULTI, where the host serves whole requests of its own
    beside the accelerators) its threads also run at low priority
    (``THREAD_PRIORITY=LOW``), so an accelerator's feeding threads never wait
    for a core.  HETERO leaves the priority alone: there the host's subgraph is
    on every request's path.
    """
    kinds = {name: device_type(registry, name) for name in configs}
    hosts = [name for name, kind in kinds.items() if kind == "host"]
    accelerators = len(configs) - len(hosts)
    if not hosts or not accelerators:
        return
    for host in hosts:
        plugin, _ = registry.resolve(host)
        supported = plugin.supported_properties()
        config = configs[host]
        if "THREAD_SPINNING" in supported:
            config.setdefault("THREAD_SPINNING", False)
        if yield_cores and "THREAD_PRIORITY" in supported:
            config.setdefault("THREAD_PRIORITY", "LOW")
        if "INFERENCE_NUM_THREADS" in config or "INFERENCE_NUM_THREADS" not in supported:
            continue
        try:
            cores = int(registry.device_property(host, "NUMBER_OF_CORES"))
        except Exception:  # noqa: BLE001 - a host that cannot say keeps its own default
            continue
        config["INFERENCE_NUM_THREADS"] = max(1, cores - HOST_CORES_PER_ACCELERATOR * accelerators)


def device_type(registry: DeviceRegistry, device: str) -> str:
    """The device's DEVICE_TYPE in lower case (``host``, ``discrete``, ...); empty when it does not say."""
    try:
        return str(registry.device_property(device, "DEVICE_TYPE")).lower()
    except Exception:  # noqa: BLE001 - a device that does not say is not the host
        return ""
