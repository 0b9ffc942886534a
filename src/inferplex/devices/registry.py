"""The device registry: plugins by family, device names, per-device settings.

The Core owns one registry; virtual devices (HETERO, MULTI, AUTO) receive it and
reach devices only through it, so they never know what a CPU or a GPU is.

Every device program is compiled through :meth:`DeviceRegistry.compile`, which
is therefore where the model cache (``CACHE_DIR``, taken by every device, see
:mod:`inferplex.devices.cache`) is consulted.  Each ``compile_model`` works on a
:meth:`DeviceRegistry.scoped` view whose ledger lists the programs it made, in
whatever thread they were compiled: the compiled model reads
``LOADED_FROM_CACHE`` and exports its program from there.
"""

from __future__ import annotations

import copy
import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from inferplex.config.log_level import apply_log_level
from inferplex.config.schema import COMMON_PROPERTIES, VIRTUAL_ONLY, normalize_config
from inferplex.devices.base import DevicePlugin, DeviceProgram, MemoryInfo
from inferplex.devices.cache import CacheRecord, CompileLedger, Encryption, compile_through_cache
from inferplex.errors import CompileError, DeviceNameError, InferplexError, PluginError, PropertyError

if TYPE_CHECKING:
    import onnx_ir as ir

__all__ = ["DeviceRegistry"]

_log = logging.getLogger("inferplex")

PluginFactory = Callable[[], DevicePlugin]

_DEVICE_FACTS = ("FULL_DEVICE_NAME", "DEVICE_TYPE", "DEVICE_ID", "OPTIMIZATION_CAPABILITIES",
                 "RANGE_FOR_STREAMS", "RANGE_FOR_ASYNC_INFER_REQUESTS", "DEVICE_TOTAL_MEM_SIZE",
                 "DEVICE_FREE_MEM_SIZE", "EXECUTION_DEVICES", "DEVICE_ARCHITECTURE",
                 "GPU_DEVICE_TOTAL_MEM_SIZE", "GPU_DEVICE_MAX_ALLOC_MEM_SIZE", "GPU_UARCH_VERSION",
                 "GPU_EXECUTION_UNITS_COUNT", "GPU_MEMORY_STATISTICS")
"""Read-only device facts a device's SUPPORTED_PROPERTIES lists where its plugin answers them."""


def _execution_mode_applied(config: dict[str, Any], accepted: Sequence[str]) -> dict[str, Any]:
    """EXECUTION_MODE_HINT=ACCURACY means f32 where no INFERENCE_PRECISION_HINT is set (OpenVINO's
    meaning for f32 models); the one place it is applied, for single devices and members alike."""
    if (config.get("EXECUTION_MODE_HINT") == "ACCURACY" and "INFERENCE_PRECISION_HINT" not in config
            and "INFERENCE_PRECISION_HINT" in accepted):
        config["INFERENCE_PRECISION_HINT"] = "f32"
    return config


_UNSET_COMMON = {"CACHE_DIR": "", "LOG_LEVEL": "LOG_NONE"}
"""What the keys every device takes read when never set: no cache, no log level of its own."""


class DeviceRegistry:
    """Plugins by family and the global per-device configuration."""

    def __init__(self) -> None:
        self._factories: dict[str, PluginFactory] = {}
        self._plugins: dict[str, DevicePlugin] = {}
        self._config: dict[str, dict[str, Any]] = {}
        self._lock = threading.RLock()
        self._ledger: CompileLedger | None = None
        self._encryption: Encryption | None = None

    def scoped(self, encryption: Encryption | None = None) -> DeviceRegistry:
        """A view of this registry (same plugins and settings) whose compiles go to a new :attr:`ledger`;
        ``encryption``: the ``(encrypt, decrypt)`` its cache entries are written and read through."""
        view = copy.copy(self)
        view._ledger = CompileLedger()
        view._encryption = encryption
        return view

    @property
    def ledger(self) -> CompileLedger | None:
        """The programs compiled through this view (None on the Core's own registry)."""
        return self._ledger

    @staticmethod
    def accepted_keys(plugin: DevicePlugin) -> tuple[str, ...]:
        """The keys a device of ``plugin`` takes: its own and those every device takes (CACHE_DIR)."""
        return (*plugin.supported_properties(), *COMMON_PROPERTIES)

    # --- plugins -----------------------------------------------------------------

    def register(self, family: str, plugin: DevicePlugin | PluginFactory) -> None:
        """Register a plugin (or a zero-argument factory, created on first use)."""
        if not family or not family.isupper() or "." in family or ":" in family:
            raise PluginError(f"device family {family!r} must be an upper-case name such as 'NPU'")
        with self._lock:
            self._plugins.pop(family, None)
            if isinstance(plugin, DevicePlugin):
                self._plugins[family] = plugin
                self._factories[family] = lambda: plugin
            else:
                self._factories[family] = plugin

    def families(self) -> list[str]:
        with self._lock:
            return list(self._factories)

    def plugin(self, family: str) -> DevicePlugin:
        """The plugin of ``family``, created on first use and checked against the contract."""
        with self._lock:
            if family in self._plugins:
                return self._plugins[family]
            if family not in self._factories:
                raise DeviceNameError(
                    f"unknown device family {family!r}; registered: {', '.join(self._factories)}")
            plugin = self._factories[family]()
            if not isinstance(plugin, DevicePlugin):
                raise PluginError(f"the plugin factory for {family!r} returned "
                                  f"{type(plugin).__name__}, not a DevicePlugin subclass")
            self._plugins[family] = plugin
            return plugin

    def available_devices(self) -> list[str]:
        """Every device of every family, CPU first, in registration order."""
        devices: list[str] = []
        for family in self.families():
            try:
                devices.extend(self.plugin(family).devices())
            except Exception as error:  # noqa: BLE001 - one broken plugin must not hide the others
                _log.warning("inferplex: device family %s is unavailable: %s", family, error)
        return devices

    # --- names -------------------------------------------------------------------

    def resolve(self, name: str) -> tuple[DevicePlugin, str]:
        """``"GPU"`` -> (GPU plugin, ``"GPU.0"``); unknown names list what is available."""
        family = name.split(".", 1)[0]
        if family not in self.families():
            raise DeviceNameError(
                f"unknown device {name!r}; available devices: {', '.join(self.available_devices())}"
                f" (virtual: HETERO, MULTI, AUTO)")
        plugin = self.plugin(family)
        devices = plugin.devices()
        if name == family and devices:
            return plugin, devices[0]
        if name in devices:
            return plugin, name
        raise DeviceNameError(
            f"device {name!r} is not available; {family} devices here: "
            f"{', '.join(devices) if devices else 'none'}")

    def full_name(self, name: str) -> str:
        return self.resolve(name)[1]

    def full_names(self, names: Sequence[str], owner: str = "the device list") -> list[str]:
        """Full names of a priority list; unknown names and repeats reported in one error.

        ``owner`` names the list in the message (``"the HETERO list"``); ``GPU`` and
        ``GPU.0`` count as the same device.
        """
        full: list[str] = []
        problems: list[str] = []
        for name in names:
            try:
                full.append(self.full_name(name))
            except DeviceNameError as error:
                problems.append(str(error))
        repeated = sorted({d for d in full if full.count(d) > 1})
        if repeated:
            problems.append(f"{owner} {','.join(names)} names {', '.join(repeated)} more than once "
                            f"(a family name means its first device: GPU is GPU.0)")
        if problems:
            raise DeviceNameError("; ".join(problems))
        return full

    # --- configuration -----------------------------------------------------------

    def set_config(self, name: str, properties: Mapping[str, Any]) -> None:
        """Global properties of a device or family (``core.set_property("GPU", ...)``)."""
        plugin, _ = self.resolve(name)
        parsed = normalize_config(properties, self.accepted_keys(plugin), name, plugin.property_parsers())
        if "LOG_LEVEL" in parsed:
            apply_log_level(parsed["LOG_LEVEL"])
        with self._lock:
            self._config.setdefault(name, {}).update(parsed)

    def global_config(self, name: str) -> dict[str, Any]:
        with self._lock:
            return dict(self._config.get(name, {}))

    def check_device_properties(self, per_device: Mapping[str, Mapping[str, Any]]) -> None:
        """Refuse a ``DEVICE_PROPERTIES`` entry that no device here could take, in one PropertyError.

        Each key must be a device family (``GPU``) or ``FAMILY.<index>`` (``GPU.1``,
        accepted even where that device is absent, so one config serves several
        machines), and its properties must be ones that family accepts.  A
        misspelt key (``GPU0``, ``cpu``) would otherwise be ignored in silence.
        """
        problems: list[str] = []
        families = self.families()
        for key, properties in per_device.items():
            family, dot, index = key.partition(".")
            if family not in families or (dot and not index.isdigit()):
                problems.append(f"DEVICE_PROPERTIES names {key!r}, which is no device here; keys are a "
                                f"device family ({', '.join(families)}) or a device FAMILY.<index> "
                                f"(here: {', '.join(self.available_devices())})")
                continue
            try:
                plugin = self.plugin(family)
                normalize_config(properties, self.accepted_keys(plugin), key, plugin.property_parsers())
            except PropertyError as error:
                problems.append(f"DEVICE_PROPERTIES[{key!r}]: {error}")
        if problems:
            raise PropertyError("; ".join(problems))

    def config_for(self, device: str, overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Family settings, then the device's, then ``overrides`` (validated for this plugin)."""
        plugin, full = self.resolve(device)
        merged: dict[str, Any] = {}
        with self._lock:
            for key in (plugin.family, full):
                merged.update(self._config.get(key, {}))
        merged.update(normalize_config(overrides or {}, self.accepted_keys(plugin), full,
                                       plugin.property_parsers()))
        return _execution_mode_applied(merged, plugin.supported_properties())

    def member_config(self, device: str, virtual_config: Mapping[str, Any]) -> dict[str, Any]:
        """The config a member device of HETERO/MULTI/AUTO compiles with.

        The keys of the virtual config that the device takes (hints, profiling,
        streams, its own keys such as CUDA_GRAPHS: OpenVINO passes them down the
        same way; not the virtual devices' own keys), then ``DEVICE_PROPERTIES[family]``, then
        ``DEVICE_PROPERTIES[device]``.
        """
        plugin, full = self.resolve(device)
        accepted = self.accepted_keys(plugin)
        config = {k: v for k, v in virtual_config.items() if k in accepted and k not in VIRTUAL_ONLY}
        per_device = virtual_config.get("DEVICE_PROPERTIES", {})
        for key in dict.fromkeys((plugin.family, device, full)):
            config.update(per_device.get(key, {}))
        return self.config_for(full, config)

    # --- device operations ---------------------------------------------------------

    def compile(self, model: ir.Model, device: str, config: Mapping[str, Any],
                own_process: bool = False) -> DeviceProgram:
        """Compile on one device; ``config`` must come from config_for/member_config.

        With ``CACHE_DIR`` in ``config`` the program comes from the cache where a
        good entry exists, and goes there after a cold compile.  ``own_process``:
        compile and serve it from a worker process (:mod:`inferplex.devices.remote`),
        which compiles through the same cache.
        """
        plugin, full = self.resolve(device)
        settings = dict(config)
        cache_dir = str(settings.pop("CACHE_DIR", "") or "")
        if own_process:
            from inferplex.devices.remote import compile_in_worker_process

            # the worker reads and writes the cache itself; the callbacks stay in this process
            remote = compile_in_worker_process(self, model, full, settings,
                                               "" if self._encryption else cache_dir)
            program: DeviceProgram = remote
            loaded = remote.loaded_from_cache
        elif cache_dir:
            program, loaded = compile_through_cache(plugin, model, full, settings, cache_dir,
                                                    lambda: self._compile(plugin, model, full, settings),
                                                    self._encryption)
        else:
            program, loaded = self._compile(plugin, model, full, settings), False
        if not isinstance(program, DeviceProgram):
            raise PluginError(f"{type(plugin).__name__}.{'import_program' if loaded else 'compile'} returned "
                              f"{type(program).__name__}; it must return a DeviceProgram")
        if int(getattr(program, "num_workers", 0)) < 1:
            raise PluginError(f"{type(program).__name__}.num_workers must be >= 1")
        if self._ledger is not None:
            self._ledger.add(CacheRecord(full, plugin, settings, program, loaded))
        return program

    @staticmethod
    def _compile(plugin: DevicePlugin, model: ir.Model, full: str, config: dict[str, Any]) -> DeviceProgram:
        """``plugin.compile``, its own exceptions as CompileError naming the plugin and the device."""
        try:
            return plugin.compile(model, full, dict(config))
        except InferplexError:
            raise
        except Exception as error:  # a plugin's own exception: name the plugin and the device
            raise CompileError(f"{full} could not compile the model: {type(plugin).__name__}.compile "
                               f"raised {type(error).__name__}: {error}") from error

    def supported_nodes(self, model: ir.Model, device: str,
                        config: Mapping[str, Any] | None = None) -> set[str]:
        plugin, full = self.resolve(device)
        try:
            supported = plugin.supported_nodes(model, full, self.config_for(full, config))
        except InferplexError:
            raise
        except Exception as error:  # a plugin's own exception: name the plugin and the device
            raise CompileError(f"{full} could not say which ops it runs: {type(plugin).__name__}."
                               f"supported_nodes raised {type(error).__name__}: {error}") from error
        if not isinstance(supported, (set, frozenset)):
            raise PluginError(f"{type(plugin).__name__}.supported_nodes must return a set of node names")
        return set(supported)

    def memory(self, device: str) -> MemoryInfo:
        plugin, full = self.resolve(device)
        return plugin.memory(full)

    def device_property(self, device: str, key: str) -> Any:
        plugin, full = self.resolve(device)
        config = self.config_for(full)
        if key == "SUPPORTED_PROPERTIES":
            return [*self.accepted_keys(plugin), *self._facts_answered(plugin, full)]
        if key in config:
            return config[key]
        if key in _UNSET_COMMON:
            return _UNSET_COMMON[key]  # not set: as OpenVINO answers
        if key == "OPTIMAL_NUMBER_OF_INFER_REQUESTS":
            return plugin.optimal_number_of_infer_requests(full, config)
        try:
            return plugin.device_property(full, key)
        except KeyError:
            raise PropertyError(
                f"device {full} has no property {key!r}; it has: "
                f"{', '.join(self.device_property(full, 'SUPPORTED_PROPERTIES'))}") from None

    @staticmethod
    def _facts_answered(plugin: DevicePlugin, device: str) -> list[str]:
        """The read-only facts of :data:`_DEVICE_FACTS` that ``plugin`` answers for ``device``."""
        answered = ["OPTIMAL_NUMBER_OF_INFER_REQUESTS", "SUPPORTED_PROPERTIES"]
        for key in _DEVICE_FACTS:
            try:
                plugin.device_property(device, key)
            except KeyError:
                continue
            answered.append(key)
        return answered
