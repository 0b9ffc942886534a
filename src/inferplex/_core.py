"""Core: devices, reading, querying and compiling models, properties.

Built-in device families: ``CPU`` (ONNX Runtime), ``GPU`` (PyTorch, loaded
on first use so that ``import inferplex`` does not import torch) and ``RAY``
(the nodes of a reachable Ray cluster; ray is imported only where one is).  Third-party
devices register with :meth:`Core.register_plugin` or through the
``inferplex.devices`` entry-point group (name: the family, e.g. ``NPU``; value:
a DevicePlugin subclass or factory).

The virtual devices' settings (HETERO, MULTI, AUTO: their configs, member devices and the
keys those take) are the Core's base class :class:`~inferplex._virtual_settings.VirtualSettings`.
"""

from __future__ import annotations

import importlib
import io
import logging
import os
import re
from collections.abc import Callable, Mapping
from importlib import metadata
from typing import Any

from inferplex._compiled_model import CompiledModel
from inferplex._import_model import import_compiled
from inferplex._model import Model
from inferplex._model_io import is_model_source, load_model
from inferplex._virtual_settings import VirtualSettings, auto_spec
from inferplex.api.version import Version
from inferplex.config import engine_settings
from inferplex.config.devices import VIRTUAL_DEVICES, DeviceSpec, parse_device_list, parse_device_string
from inferplex.config.engine_settings import EngineSettings, split_compile_config, split_engine_keys
from inferplex.config.output_precision import KEY as OUTPUT_PRECISION
from inferplex.config.output_precision import lowered_precision, with_output_precision
from inferplex.config.schema import (
    CORE_PROPERTIES,
    ENGINE_PROPERTIES,
    VIRTUAL_ONLY,
    as_config,
    canonical_key,
    normalize_config,
)
from inferplex.devices.base import DevicePlugin
from inferplex.devices.cpu import CpuPlugin
from inferplex.devices.registry import DeviceRegistry
from inferplex.engine.device_pool import DevicePool
from inferplex.engine.runner import PoolRunner, Runner
from inferplex.engine.trace import Timeline
from inferplex.errors import (
    DeviceNameError,
    InputTypeError,
    ModelError,
    PluginError,
    PropertyError,
)
from inferplex.state.stateless import stateless_copy

__all__ = ["Core", "Extension", "compile_model", "get_version"]

_log = logging.getLogger("inferplex")


def _gpu_plugin() -> DevicePlugin:
    from inferplex.devices.gpu.plugin import GpuPlugin

    return GpuPlugin()


def _ray_plugin() -> DevicePlugin:
    from inferplex.devices.ray import RayPlugin

    return RayPlugin()


class Extension:
    """Base class of OpenVINO's Python extensions (``class MyExt(ov.Extension)``); Core keeps them."""


class Core(VirtualSettings):
    """Entry point of the runtime (OpenVINO's ``ov.Core``)."""

    def __init__(self) -> None:
        self._registry = DeviceRegistry()
        self._registry.register("CPU", CpuPlugin())
        self._registry.register("GPU", _gpu_plugin)
        self._registry.register("RAY", _ray_plugin)
        self._virtual_config: dict[str, dict[str, Any]] = {name: {} for name in VIRTUAL_DEVICES}
        self._extensions: list[Extension] = []
        self._core_config: dict[str, Any] = dict(_CORE_DEFAULTS)
        """Core-wide values (``set_property({...})`` with no device), read by ``get_property(key)``."""
        self._engine_settings = EngineSettings()
        """The engine's keys (OUTPUT_PRECISION, ENABLE_TRACE, ...) set on the Core or a device."""
        self._load_entry_points()

    # --- devices -----------------------------------------------------------------------

    @property
    def registry(self) -> DeviceRegistry:
        """The device registry that virtual devices and tools build on."""
        return self._registry

    @property
    def available_devices(self) -> list[str]:
        """Devices present now, as OpenVINO lists them: a family's only device by the family's name
        (``["CPU", "GPU"]`` with one GPU), several by their full names (``["CPU", "GPU.0", "GPU.1"]``)."""
        devices = self._registry.available_devices()
        families = [device.split(".", 1)[0] for device in devices]
        return [family if families.count(family) == 1 else device
                for device, family in zip(devices, families, strict=True)]

    def get_available_devices(self) -> list[str]:
        return self.available_devices

    def get_versions(self, device_name: str) -> dict[str, Version]:
        """Versions of the devices in ``device_name`` (``"HETERO:GPU,CPU"`` lists both), as
        OpenVINO's ``Version``: inferplex's version, and a description naming the engine."""
        from inferplex import __version__

        spec = parse_device_string(device_name)
        names = spec.names or (() if spec.virtual else (device_name,))
        if spec.virtual == "AUTO" and not spec.names:  # "AUTO", "AUTO:-CPU": its candidates
            from inferplex.multi import auto_candidates

            names = tuple(target.name for target in auto_candidates(self._registry, spec))
        versions = {spec.virtual: Version(__version__, f"inferplex {spec.virtual}")} if spec.virtual else {}
        for name in names:
            plugin, full = self._registry.resolve(name)
            family = full.split(".")[0]
            try:
                engine = f" ({plugin.device_property(full, 'ENGINE')} engine)"
            except KeyError:
                engine = ""
            versions[full] = Version(__version__, f"inferplex {family} plugin{engine}")
        return versions

    def register_plugin(self, plugin: DevicePlugin | type | Callable[[], DevicePlugin] | str,
                        device_name: str | None = None) -> None:
        """Add a device family: a DevicePlugin, its class, a factory, or ``"module:attr"``."""
        if isinstance(plugin, str):
            plugin = _import_object(plugin)
        family = device_name or getattr(plugin, "family", "")
        if not family:
            raise PluginError("register_plugin needs a device name: pass device_name='NPU' or "
                              "give the plugin a 'family' attribute")
        if family in VIRTUAL_DEVICES:
            raise PluginError(f"{family!r} is a virtual device and cannot be replaced by a plugin")
        self._registry.register(family, plugin)  # type: ignore[arg-type]

    def unload_plugin(self, device_name: str) -> None:
        """OpenVINO unloads a plugin's library; here plugins are Python objects that hold no
        library, so this only checks that ``device_name`` names a known device."""
        self._registry.resolve(device_name)

    def add_extension(self, extension: Any) -> None:
        """Accept OpenVINO ``Extension`` objects (or a list of them), kept with the Core.

        Extensions add custom ops to OpenVINO's C++ runtime; inferplex runs ONNX ops only,
        so a library path (``add_extension("libcustom.so")``) is refused with an error.
        """
        items = extension if isinstance(extension, (list, tuple)) else [extension]
        for item in items:
            if not isinstance(item, Extension):
                raise ModelError(f"add_extension takes ov.Extension objects, got {type(item).__name__}; "
                                 "extension libraries (.so/.dll) of OpenVINO's C++ runtime cannot be "
                                 "loaded: inferplex runs ONNX ops")
        self._extensions.extend(items)

    def _load_entry_points(self) -> None:
        for entry in metadata.entry_points(group="inferplex.devices"):
            family = entry.name.upper()

            def factory(entry: metadata.EntryPoint = entry) -> DevicePlugin:
                loaded = entry.load()
                return loaded() if callable(loaded) and not isinstance(loaded, DevicePlugin) else loaded

            try:
                self._registry.register(family, factory)
            except PluginError as error:
                _log.warning("inferplex: ignoring device entry point %s: %s", entry.name, error)

    # --- models ------------------------------------------------------------------------

    def read_model(self, model: Any, weights: Any = None, config: Mapping[str, Any] | None = None) -> Model:
        """Read a model from a path (str or ``pathlib.Path``), bytes, a binary file object
        (``io.BytesIO``), an ``onnx.ModelProto`` or an ``onnx_ir.Model``.

        ``config`` takes the read options OpenVINO's read_model takes: ``ENABLE_MMAP``
        (bool; external weights are memory-mapped either way) and ``CACHE_DIR`` (the folder
        is made, as OpenVINO makes it; the Core's own CACHE_DIR does not change).  Other keys
        are refused.
        """
        config = _read_cache_dir(config)
        _check_read_config(config)
        if hasattr(model, "read") and callable(model.read):  # io.BytesIO and open binary files
            if isinstance(model, io.TextIOBase):
                raise ModelError("read_model got a text file object; open the model file in "
                                 "binary mode ('rb')")
            model = model.read()
        return load_model(model, weights)

    def query_model(self, model: Any, device_name: str, config: Mapping[str, Any] | None = None
                    ) -> dict[str, str]:
        """``{op friendly name: device}`` for the ops ``device_name`` supports.

        For ``HETERO:<list>`` every op is mapped (automatic mode; manual
        affinities are ignored) or the error lists the ops no device takes.
        """
        model = self.read_model(model)
        spec = parse_device_string(device_name)
        if spec.virtual is None:
            device = self._registry.full_name(spec.names[0])
            supported = self._registry.supported_nodes(stateless_copy(model.ir), device, config)
            return {op.get_friendly_name(): device for op in model.get_ops()
                    if op.get_friendly_name() in supported}
        if spec.virtual == "HETERO":
            from inferplex.hetero import query_hetero

            virtual = self._virtual(spec, config)
            devices = self._device_list(spec, virtual)
            return query_hetero(self._registry, stateless_copy(model.ir), devices, virtual)
        raise DeviceNameError(f"query_model accepts a device or HETERO:<devices>, not {device_name!r}")

    def compile_model(self, model: Any, device_name: str | None = None,
                      config: Mapping[str, Any] | None = None, *, weights: Any = None) -> CompiledModel:
        """Compile ``model`` (a Model or anything read_model reads) for ``device_name`` (default AUTO).

        ``weights`` is OpenVINO's buffer form (``compile_model(model=xml, weights=bin, ...)``),
        passed to :meth:`read_model` with the model.
        """
        model = self.read_model(model, weights)
        device_name = device_name or "AUTO"
        if device_name.startswith("BATCH"):
            return self._compile_batch(model, device_name, config)
        spec = parse_device_string(device_name)
        engine, config = self._engine_for(spec, as_config(config))
        timeline = Timeline(model.friendly_name) if engine.get("ENABLE_TRACE") else None
        # its ledger: the programs this compile makes (cache, export); its cache entries encrypted as asked
        registry = self._registry.scoped(engine.get("CACHE_ENCRYPTION_CALLBACKS"))
        if spec.virtual is None:
            device = self._registry.full_name(spec.names[0])
            settings = self._registry.config_for(device, config)
            model = self._in_output_precision(model, engine, [(device, settings)])
            program = registry.compile(stateless_copy(model.ir), device, settings)
            pool = DevicePool(program, profiling=bool(settings.get("ENABLE_PROFILING", False)),
                              exit_timeout=engine.get("EXIT_TIMEOUT"))
            return CompiledModel(model, PoolRunner(pool), device, {**settings, **engine}, timeline,
                                 registry.ledger)
        settings = {**self._virtual(spec, config), **engine}
        model = self._in_output_precision(model, engine, self._member_hints(spec, settings))
        runner = self._compile_virtual(registry, model, spec, settings)
        return CompiledModel(model, runner, device_name, settings, timeline, registry.ledger)

    def _compile_batch(self, model: Model, device_name: str,
                       config: Mapping[str, Any] | None) -> CompiledModel:
        """OpenVINO's automatic batching device, ``BATCH:<device>(<batch>)``: inferplex batches no
        requests together, so the model compiles on the device and runs each request there, and
        the compiled model reports as OpenVINO's does: OPTIMAL_NUMBER_OF_INFER_REQUESTS is the batch
        (1 where none is given) times the device's, and AUTO_BATCH_TIMEOUT (default 1000 ms) reads
        back."""
        match = _BATCH_DEVICE.fullmatch(device_name)
        if match is None:
            raise DeviceNameError(f"{device_name!r}: the automatic batching device is written BATCH:<device> "
                                  "or BATCH:<device>(<batch size>), e.g. 'BATCH:CPU(4)'")
        given = dict(as_config(config) or {})
        timeouts = [value for key, value in given.items() if canonical_key(key) == "AUTO_BATCH_TIMEOUT"]
        timeout = normalize_config({"AUTO_BATCH_TIMEOUT": timeouts[-1]} if timeouts else {},
                                   ("AUTO_BATCH_TIMEOUT",), target="BATCH").get("AUTO_BATCH_TIMEOUT", 1000)
        compiled = self.compile_model(model, match.group(1), given)
        compiled.as_batch(device_name, int(match.group(2) or 1), int(timeout))
        return compiled

    def _compile_virtual(self, registry: DeviceRegistry, model: Model, spec: DeviceSpec,
                         settings: dict[str, Any]) -> Runner:
        graph = stateless_copy(model.ir)  # a stateful model's variables as inputs and outputs
        if spec.virtual == "HETERO":
            from inferplex.hetero import compile_hetero

            return compile_hetero(registry, graph, self._device_list(spec, settings), settings)
        if spec.virtual == "MULTI":
            from inferplex.multi import compile_multi

            targets = spec.targets or parse_device_list(self._priorities(spec, settings),
                                                        allow_counts=True)
            return compile_multi(registry, graph, targets, settings)
        from inferplex.multi import compile_auto

        return compile_auto(registry, graph, auto_spec(spec, settings), settings)

    @staticmethod
    def _in_output_precision(model: Model, engine: Mapping[str, Any],
                             settings: list[tuple[str, Mapping[str, Any]]]) -> Model:
        """``model`` with the output types OUTPUT_PRECISION asks for (see :mod:`.config.output_precision`)."""
        hints = [(device, config.get("INFERENCE_PRECISION_HINT")) for device, config in settings]
        return with_output_precision(model, lowered_precision(engine.get(OUTPUT_PRECISION), hints))

    def import_model(self, model_stream: Any, device_name: str,
                     config: Mapping[str, Any] | None = None) -> CompiledModel:
        """A compiled model from what ``CompiledModel.export_model()`` wrote: bytes, a binary stream,
        or an ``ov.Tensor`` of the bytes.  An ``io.BytesIO`` is read whole, wherever its position
        is (as OpenVINO reads it right after ``export_model(stream)``); other streams from their position.

        As in OpenVINO, the blob carries what is needed to run (the model and the
        compiled program) and imports on the device it was exported from, with
        the same engine version: another device or version is a CompileError.
        ``config`` adds properties to those it was compiled with.
        """
        return import_compiled(self._registry, self.read_model, model_stream, device_name,
                               self._engine_for(parse_device_string(device_name), config))

    def _engine_for(self, spec: DeviceSpec, config: Mapping[str, Any] | None
                    ) -> tuple[dict[str, Any], dict[str, Any] | None]:
        """The engine's keys for a compile on ``spec`` (those set with ``set_property``, then the
        config's), and the rest of ``config`` for the devices."""
        given, rest = split_compile_config(config)
        return {**self._engine_settings.merged(self._engine_scopes(spec)), **given}, rest

    def _engine_scopes(self, spec: DeviceSpec) -> tuple[str, ...]:
        """Where the engine's keys for a compile on ``spec`` come from (:mod:`.config.engine_settings`)."""
        if spec.virtual is not None:
            return ("", spec.virtual)
        plugin, full = self._registry.resolve(spec.names[0])
        return tuple(dict.fromkeys(("", plugin.family, full)))

    # --- properties ----------------------------------------------------------------------

    def set_property(self, device_name: str | Mapping[str, Any] | tuple[str, Any],
                     properties: Mapping[str, Any] | tuple[str, Any] | None = None) -> None:
        """``set_property("CPU", {...})``, ``set_property("HETERO", {...})``, or all devices.

        Properties are a dict or one ``(key, value)`` pair (``hint.performance_mode(...)``).
        """
        if not isinstance(device_name, str):
            device_name = as_config(device_name) or {}
        properties = as_config(properties)
        if isinstance(device_name, Mapping):
            device_name = self._set_core_options(device_name)
            # Every key must be taken by some device (OpenVINO's core-wide set_property); each
            # device gets those it takes.
            plugins = self._present_plugins()
            every = tuple(dict.fromkeys([*(k for name in VIRTUAL_DEVICES for k in self._virtual_keys(name)),
                                         *(k for _, keys in plugins for k in keys), *ENGINE_PROPERTIES]))
            parsed = normalize_config(device_name, every, target="any device", parsers=self._device_parsers())
            engine = {k: v for k, v in parsed.items() if k in ENGINE_PROPERTIES}
            virtual = {name: self._parse_virtual(name, device_name, subset=True) for name in VIRTUAL_DEVICES}
            for family, accepted in plugins:
                subset = {k: v for k, v in device_name.items()
                          if canonical_key(k) in accepted and canonical_key(k) not in VIRTUAL_ONLY}
                if subset:
                    self._registry.set_config(family, subset)
            for name, parsed in virtual.items():
                self._virtual_config[name].update(parsed)
            self._core_config.update({canonical_key(k): parsed.get(canonical_key(k), v)
                                      for k, v in device_name.items()})
            self._core_config.update(engine)
            self._engine_settings.set("", engine)
            return
        if properties is None:
            raise PropertyError("set_property needs properties: set_property('CPU', {'NUM_STREAMS': 2})")
        if device_name in VIRTUAL_DEVICES:
            engine, rest = split_engine_keys(properties, self._virtual_keys(device_name), device_name,
                                              self._device_parsers())
            self._virtual_config[device_name].update(self._parse_virtual(device_name, rest))
            self._engine_settings.set(device_name, engine)
            return
        plugin, full = self._registry.resolve(device_name)
        engine, rest = split_engine_keys(properties, self._registry.accepted_keys(plugin), device_name,
                                          plugin.property_parsers())
        if rest:
            self._registry.set_config(device_name, rest)
        self._engine_settings.set(plugin.family if device_name == plugin.family else full, engine)

    def _set_core_options(self, config: Mapping[str, Any]) -> dict[str, Any]:
        """Store the Core's own options of a Core-wide config (:data:`CORE_PROPERTIES`: ENABLE_MMAP,
        CACHE_MODE...) and return the rest, for the devices."""
        own = {canonical_key(k): v for k, v in config.items() if canonical_key(k) in CORE_PROPERTIES}
        if own:
            self._core_config.update(normalize_config(own, CORE_PROPERTIES, target="the Core"))
        return {k: v for k, v in config.items() if canonical_key(k) not in CORE_PROPERTIES}

    def _present_plugins(self) -> list[tuple[str, tuple[str, ...]]]:
        """(family, keys its plugin accepts) of each device family with a device on this machine."""
        present = []
        for family in self._registry.families():
            try:
                plugin = self._registry.plugin(family)
                if not plugin.devices():  # e.g. GPU on a machine without one: nothing to configure
                    continue
            except Exception as error:  # noqa: BLE001 - like available_devices: skip it
                _log.warning("inferplex: device family %s is unavailable: %s", family, error)
                continue
            present.append((family, tuple(self._registry.accepted_keys(plugin))))
        return present

    def get_property(self, device_name: str | None = None, key: str | None = None, *,
                     name: str | None = None, property: str | None = None, arguments: Any = None) -> Any:
        """A device property (FULL_DEVICE_NAME, DEVICE_TOTAL_MEM_SIZE, settings, ...), typed as
        OpenVINO returns it (:func:`inferplex.properties._typed.typed_value`).

        ``get_property(key)`` alone reads a Core-wide value, as OpenVINO's does: one set with
        ``set_property({...})`` for every device, or a Core default (``CACHE_DIR``,
        ``ENABLE_MMAP``, ``FORCE_TBB_TERMINATE``).
        """
        from inferplex.properties._typed import typed_value

        del arguments  # OpenVINO's per-call arguments: no property here reads them
        key = key if key is not None else name if name is not None else property
        if device_name is None:  # get_property(property=...): a Core-wide value
            device_name, key = key, None
        if device_name is None:
            raise InputTypeError("get_property needs a property name: get_property(key), "
                                 "get_property(device_name, key) or get_property(property=key)")
        if key is None:
            name = canonical_key(device_name)
            if name not in self._core_config:
                raise PropertyError(f"the Core has no property {device_name!r}; Core-wide properties: "
                                    f"{', '.join(sorted(self._core_config))} and those set with "
                                    "set_property({...}); a device's: get_property('CPU', key)")
            return typed_value(name, self._core_config[name])
        name = canonical_key(key)
        value = self._device_property(device_name, name, key)
        if name == "SUPPORTED_PROPERTIES":
            value = _with_openvino_spellings(value)
        return typed_value(name, value)

    def _device_property(self, device_name: str, name: str, key: str) -> Any:
        if name in ENGINE_PROPERTIES:
            spec = parse_device_string(device_name)
            return self._engine_settings.read(name, self._engine_scopes(spec), device_name)
        if device_name in VIRTUAL_DEVICES:
            if name == "SUPPORTED_PROPERTIES":
                return [*self._readable_virtual_keys(device_name), *engine_settings.LISTED,
                        "FULL_DEVICE_NAME", "SUPPORTED_PROPERTIES"]
            if name in self._virtual_config[device_name]:
                return self._virtual_config[device_name][name]
            if name == "FULL_DEVICE_NAME":
                return device_name  # as OpenVINO names them: "AUTO", "MULTI", "HETERO"
            if name not in self._virtual_keys(device_name):
                raise PropertyError(f"{device_name} has no property {key!r}; it has: "
                                    f"{', '.join(sorted(self._virtual_keys(device_name)))}")
            return self._unset_virtual_value(device_name, name)
        if name == "AVAILABLE_DEVICES":  # the family's device ids, as OpenVINO's plugins give them
            family = self._registry.plugin(device_name.split(".")[0])
            return [device.partition(".")[2] for device in family.devices()]
        value = self._registry.device_property(device_name, name)
        if name == "SUPPORTED_PROPERTIES" and isinstance(value, list):
            # set_property takes the engine's keys for the device's compiles; AVAILABLE_DEVICES is the Core's
            value = [*value, *engine_settings.LISTED, "AVAILABLE_DEVICES"]
        return value


_READ_OPTIONS = ("ENABLE_MMAP",)

_BATCH_DEVICE = re.compile(r"BATCH:([A-Z]+(?:\.\d+)?)(?:\((\d+)\))?")
"""``BATCH:CPU``, ``BATCH:GPU.1(8)``: the device, and the batch size where given."""

_CORE_DEFAULTS = {"CACHE_DIR": "", "ENABLE_MMAP": True, "FORCE_TBB_TERMINATE": False}
"""Core-wide properties and their values before any ``set_property``, as OpenVINO's Core reads them."""


_OPENVINO_SPELLINGS = {"ENABLE_PROFILING": "PERF_COUNT"}
"""Keys OpenVINO lists under another name in SUPPORTED_PROPERTIES (``props.enable_profiling``
is ``"PERF_COUNT"``); both are accepted everywhere, and both are listed."""


def _with_openvino_spellings(supported: Any) -> Any:
    """SUPPORTED_PROPERTIES with OpenVINO's spelling beside inferplex's for aliased keys."""
    if isinstance(supported, Mapping):
        extra = {alias: supported[key] for key, alias in _OPENVINO_SPELLINGS.items() if key in supported}
        return {**supported, **extra}
    if isinstance(supported, (list, tuple)):
        return [*supported, *(alias for key, alias in _OPENVINO_SPELLINGS.items()
                              if key in supported and alias not in supported)]
    return supported


def _read_cache_dir(config: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    """read_model's config less CACHE_DIR, whose folder is made here."""
    if not isinstance(config, Mapping):
        return config
    rest = {key: value for key, value in config.items() if canonical_key(str(key)) != "CACHE_DIR"}
    for key, value in config.items():
        if canonical_key(str(key)) == "CACHE_DIR" and value:
            os.makedirs(os.fspath(value), exist_ok=True)
    return rest


def _check_read_config(config: Mapping[str, Any] | None) -> None:
    """Refuse read_model options other than ENABLE_MMAP, and values that are not booleans."""
    if config is None:
        return
    if not isinstance(config, Mapping):
        raise PropertyError(f"read_model's config must be a dict, got {type(config).__name__}")
    problems = []
    for key, value in config.items():
        name = canonical_key(str(key))
        if name not in _READ_OPTIONS:
            problems.append(f"unknown read_model option {key!r}; "
                            f"accepted: {', '.join(_READ_OPTIONS)}")
        elif not (isinstance(value, bool) or str(value).upper() in ("YES", "NO", "TRUE", "FALSE")):
            problems.append(f"read_model option {name}: value {value!r} is not accepted; "
                            "accepted: True, False")
    if problems:
        raise PropertyError("; ".join(problems))


def compile_model(model: Any, device_name: str | None = "AUTO",
                  config: Mapping[str, Any] | None = None) -> CompiledModel:
    """Compile ``model`` (a Model, path, bytes, ModelProto, ...) with a new Core.

    OpenVINO's ``ov.compile_model``: a shortcut for ``Core().compile_model(...)``.  An object of
    another type is refused as OpenVINO's is, as a path that does not exist (an InputTypeError).
    """
    if not (is_model_source(model) or callable(getattr(model, "read", None))):
        raise InputTypeError(f"Path: '{model}' does not exist. Please provide valid model's path either "
                             "as a string, bytes or pathlib.Path; ov.compile_model also takes an ov.Model, "
                             f"onnx.ModelProto, onnx_ir.Model or a binary file, not {type(model).__name__}")
    return Core().compile_model(model, device_name or "AUTO", config)


def get_version() -> str:
    """The runtime's version string (OpenVINO's ``ov.get_version()``)."""
    from inferplex import __version__

    return __version__


def _import_object(path: str) -> Any:
    module_name, _, attribute = path.partition(":")
    if not attribute:
        raise PluginError(f"plugin path {path!r} must look like 'package.module:PluginClass'")
    try:
        return getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError) as error:
        raise PluginError(f"cannot load device plugin {path!r}: {error}") from error
