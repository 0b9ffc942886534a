"""The Core's settings of the virtual devices (HETERO, MULTI, AUTO), as a base class of Core.

A virtual device's settings come from ``core.set_property("MULTI", {...})`` and from each
compile's config; they hold its own keys and every device family's (each member takes
those it accepts, see ``DeviceRegistry.member_config``).  :class:`VirtualSettings` parses
and checks them, and finds the member devices a virtual device would compile on
(``MULTI_DEVICE_PRIORITIES`` where the device string lists none; AUTO's candidates).  It
works on the Core's own state (its registry and the per-virtual-device configs), so it is
a base of :class:`~inferplex._core.Core` rather than an object of its own; it is kept apart
from the Core's reading, compiling and property calls, which use it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from inferplex.config.devices import DeviceSpec, parse_device_list, parse_device_string
from inferplex.config.output_precision import KEY as OUTPUT_PRECISION
from inferplex.config.schema import (
    HETERO_PROPERTIES,
    MULTI_PROPERTIES,
    SCHEMA,
    VIRTUAL_ONLY,
    canonical_key,
    normalize_config,
)
from inferplex.devices.base import DevicePlugin
from inferplex.devices.registry import DeviceRegistry
from inferplex.errors import DeviceNameError, PropertyError
from inferplex.scheduling.options import SchedulerOptions

__all__ = ["VirtualSettings", "auto_spec"]

_log = logging.getLogger("inferplex")


class VirtualSettings:
    """The virtual devices' settings and member devices; a base of :class:`~inferplex._core.Core`."""

    _registry: DeviceRegistry
    """The Core's device registry."""
    _virtual_config: dict[str, dict[str, Any]]
    """Each virtual device's settings from ``set_property``, by name (``"HETERO"``, ...)."""

    def _virtual(self, spec: DeviceSpec, config: Mapping[str, Any] | None) -> dict[str, Any]:
        settings = dict(self._virtual_config[str(spec.virtual)])
        given = self._parse_virtual(str(spec.virtual), config or {})
        settings.update(given)
        for device in spec.names:  # unknown members are refused before anything compiles
            self._registry.resolve(device)
        self._check_members_take(spec, given, settings)
        return settings

    def _check_members_take(self, spec: DeviceSpec, given: Mapping[str, Any],
                            settings: Mapping[str, Any]) -> None:
        """Refuse a device key given to this compile that no member of the virtual device takes
        (``CUDA_GRAPHS`` for ``MULTI:CPU``).  Keys set with ``set_property`` are left alone:
        they serve every later device list."""
        own = self._own_keys(str(spec.virtual))
        keys = [key for key in given if key not in own]
        members = self._member_names(spec, settings) if keys else None
        if not members:
            return  # nothing to check, or no device list yet (the compile reports that)
        plugins = {name: self._registry.resolve(name)[0] for name in members}
        taken = {key for plugin in plugins.values() for key in self._registry.accepted_keys(plugin)}
        missing = [key for key in keys if key not in taken]
        if missing:
            raise PropertyError(
                f"{', '.join(missing)} given to {spec.text}: no device in it ({', '.join(members)}) takes "
                f"{'them' if len(missing) > 1 else 'it'}; a device's key reaches the members that take it")

    def _member_names(self, spec: DeviceSpec, settings: Mapping[str, Any]) -> list[str] | None:
        """The devices a virtual device would compile on (AUTO: its candidates); None without a list."""
        if spec.virtual == "AUTO":
            from inferplex.multi import auto_candidates

            return [target.name for target in auto_candidates(self._registry, auto_spec(spec, settings))]
        if spec.names:
            return list(spec.names)
        priorities = settings.get("MULTI_DEVICE_PRIORITIES")
        return [t.name for t in parse_device_list(str(priorities), allow_counts=True)] if priorities else None

    @staticmethod
    def _own_keys(virtual: str) -> tuple[str, ...]:
        return HETERO_PROPERTIES if virtual == "HETERO" else MULTI_PROPERTIES

    def _device_keys(self, virtual: str, plugin: DevicePlugin) -> list[str]:
        """The keys of ``plugin``'s devices that ``virtual`` takes for its members: all but another
        virtual device's own (a virtual device's own key keeps its meaning there, see
        :data:`~inferplex.config.schema.VIRTUAL_ONLY`)."""
        own = self._own_keys(virtual)
        return [key for key in self._registry.accepted_keys(plugin) if key not in VIRTUAL_ONLY or key in own]

    def _readable_virtual_keys(self, virtual: str) -> list[str]:
        """The keys ``virtual``'s SUPPORTED_PROPERTIES lists, each of which reads back: its own,
        those of the device families present on this machine, and any set on it."""
        keys = list(self._own_keys(virtual))
        for family in self._registry.families():
            try:
                plugin = self._registry.plugin(family)
                if plugin.devices():
                    keys.extend(self._device_keys(virtual, plugin))
            except Exception:  # noqa: BLE001 - an unavailable family was reported by _virtual_keys
                continue
        keys.extend(self._virtual_config[virtual])
        return sorted(dict.fromkeys(keys))

    def _virtual_keys(self, virtual: str) -> tuple[str, ...]:
        """The keys ``virtual`` takes: its own, and every device family's (each member gets
        those it takes, see DeviceRegistry.member_config)."""
        keys = list(self._own_keys(virtual))
        for family in self._registry.families():
            try:
                keys.extend(self._device_keys(virtual, self._registry.plugin(family)))
            except Exception as error:  # noqa: BLE001 - like available_devices: skip it
                _log.warning("inferplex: device family %s is unavailable: %s", family, error)
        return tuple(dict.fromkeys(keys))

    def _unset_virtual_value(self, virtual: str, key: str) -> Any:
        """What ``virtual``'s ``key`` reads when it was never set: what a compile without it does
        (its own keys, :data:`_UNSET_OWN`), or for a device family's key the value of the first
        available family that takes it (the members compile with their own defaults)."""
        if key == "PERFORMANCE_HINT":  # MULTI spreads requests over its devices; AUTO and HETERO serve one
            return "CUMULATIVE_THROUGHPUT" if virtual == "MULTI" else "LATENCY"
        if key in self._own_keys(virtual) and key in _UNSET_OWN:
            unset = _UNSET_OWN[key]
            return dict(unset) if isinstance(unset, dict) else unset
        for family in self._registry.families():
            try:
                plugin = self._registry.plugin(family)
                if key in self._registry.accepted_keys(plugin) and plugin.devices():
                    return self._registry.device_property(family, key)
            except Exception:  # noqa: BLE001 - an unavailable family was reported by _virtual_keys
                continue
        raise PropertyError(f"{virtual} has no property {key!r} set, and no available device family "
                            "takes it; read a device's with get_property('CPU', key)")

    def _device_parsers(self) -> dict[str, Callable[[Any], Any]]:
        """Every available device family's parsers of its own keys (for virtual devices' configs), but
        for keys the schema declares: the schema's parser says what they mean there
        (MODEL_DISTRIBUTION_POLICY is HETERO's PIPELINE_PARALLEL, where the CPU takes TENSOR_PARALLEL)."""
        parsers: dict[str, Callable[[Any], Any]] = {}
        for family in self._registry.families():
            try:
                for key, parse in self._registry.plugin(family).property_parsers().items():
                    if key not in SCHEMA:
                        parsers.setdefault(key, parse)
            except Exception:  # noqa: BLE001 - an unavailable family was reported by _virtual_keys
                continue
        return parsers

    def _parse_virtual(self, virtual: str, properties: Mapping[str, Any],
                       subset: bool = False) -> dict[str, Any]:
        """``properties`` checked for ``virtual`` (only the keys it takes with ``subset``)."""
        keys = self._virtual_keys(virtual)
        if subset:
            properties = {k: v for k, v in properties.items() if canonical_key(k) in keys}
        parsed = normalize_config(properties, keys, target=virtual, parsers=self._device_parsers())
        self._registry.check_device_properties(parsed.get("DEVICE_PROPERTIES", {}))
        return parsed

    def _priorities(self, spec: DeviceSpec, settings: Mapping[str, Any]) -> str:
        priorities = settings.get("MULTI_DEVICE_PRIORITIES")
        if not priorities:
            raise DeviceNameError(
                f"{spec.virtual} needs devices: write '{spec.virtual}:GPU,CPU' or set "
                f"MULTI_DEVICE_PRIORITIES (core.set_property('{spec.virtual}', "
                "{'MULTI_DEVICE_PRIORITIES': 'GPU,CPU'}) or in the compile config)")
        return str(priorities)

    def _device_list(self, spec: DeviceSpec, settings: Mapping[str, Any]) -> tuple[str, ...]:
        if spec.names:
            return spec.names
        return tuple(t.name for t in parse_device_list(self._priorities(spec, settings)))

    def _member_hints(self, spec: DeviceSpec,
                      settings: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any]]]:
        """Each member's compile settings (where no device list is known yet: the virtual
        device's own and DEVICE_PROPERTIES')."""
        if settings.get(OUTPUT_PRECISION) != "INFERENCE":
            return []
        members = self._member_names(spec, settings)
        if members:
            return [(name, self._registry.member_config(name, settings)) for name in members]
        return [(str(spec.virtual), settings), *settings.get("DEVICE_PROPERTIES", {}).items()]


_SCHEDULING = SchedulerOptions()
_UNSET_OWN: dict[str, Any] = {
    "PERFORMANCE_HINT_NUM_REQUESTS": 0,
    "EXECUTION_MODE_HINT": "PERFORMANCE",
    "MODEL_PRIORITY": "MEDIUM",
    "ENABLE_PROFILING": False,
    "MULTI_DEVICE_PRIORITIES": "",
    "DEVICE_PROPERTIES": {},
    "MODEL_DISTRIBUTION_POLICY": "",
    "HETERO_PLACEMENT": "SUPPORT",
    "SCHEDULE_POLICY": _SCHEDULING.policy,
    "ENABLE_STARTUP_FALLBACK": True,
    "ENABLE_RUNTIME_FALLBACK": _SCHEDULING.runtime_fallback,
    "EXCLUSIVE_ASYNC_REQUESTS": _SCHEDULING.exclusive,
    "MULTI_REQUEST_TIMEOUT": 0.0,
    "MULTI_QUARANTINE_TIME": _SCHEDULING.quarantine_time,
    "MULTI_CHECK_HOST_GAIN": _SCHEDULING.check_host_gain,
    "WORKER_PROCESSES": "AUTO",
    "CACHE_DIR": "",
    "LOG_LEVEL": "LOG_NONE",
}
"""A virtual device's own keys as they read before any ``set_property``: what its compiles do
without them (no request timeout; a device list only once one is set).  PERFORMANCE_HINT, which
differs by virtual device, is read in ``_unset_virtual_value``."""


def auto_spec(spec: DeviceSpec, settings: Mapping[str, Any]) -> DeviceSpec:
    """``AUTO`` with neither a list nor exclusions takes MULTI_DEVICE_PRIORITIES as its list."""
    if not spec.targets and not spec.exclusions and settings.get("MULTI_DEVICE_PRIORITIES"):
        return parse_device_string("AUTO:" + str(settings["MULTI_DEVICE_PRIORITIES"]))
    return spec
