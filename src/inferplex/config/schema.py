"""The one property schema: every key inferplex itself reads, its parser, and who takes it.

A key's *takers* are the places it means something: ``"engine"`` (the request
engine reads it for any device), ``"device"`` (device plugins that list it in
``supported_properties``), ``"HETERO"``, ``"MULTI"`` and ``"AUTO"`` (the
virtual devices).  Keys only one device family knows (``CUDA_GRAPHS``,
``ENGINE``) live in that plugin (``DevicePlugin.property_parsers``), not here.

Values may be given as strings (``"THROUGHPUT"``, ``"YES"``, ``"20GiB"``) or as
Python values (``True``, ``4``); :func:`normalize_property` turns either into one
canonical value and raises :class:`~inferplex.errors.PropertyError` naming the
key, the value and what is accepted.  A config is a dict or one ``(key, value)``
pair (:func:`as_config`), as in OpenVINO; keys may be the typed mirror's
callable keys (:mod:`inferplex.properties`) and values its enums.

Keys whose effect in inferplex needs saying:

- ``EXECUTION_MODE_HINT``: ``ACCURACY`` means f32 on every device where no
  ``INFERENCE_PRECISION_HINT`` is set (``DeviceRegistry.config_for`` applies it,
  for single devices and the members of virtual ones alike); OpenVINO's CPU
  engine receives the hint too.  ``PERFORMANCE`` (the default) leaves each
  device its default precision.
- ``MODEL_PRIORITY``: accepted by every device and read back as set.  OpenVINO's
  AUTO uses it to give the best device to the highest-priority model when
  several models share devices; inferplex does not rank models yet, so it
  changes no placement or scheduling.
- ``HETERO_PLACEMENT`` (inferplex's): ``SUPPORT`` (the default, OpenVINO's way)
  places each op on the first listed device that supports it; ``COST``, where
  that splits the model over devices, also measures the whole model on each
  listed device that runs every op and keeps the fastest
  (:mod:`inferplex.placement.cost`).  Not the default because measuring
  compiles every candidate and runs it a few times before the real compile.
- ``ENABLE_CPU_PINNING``: the CPU's OpenVINO engine pins its threads to cores
  (OpenVINO's default where the OS allows it); ONNX Runtime's threads are never
  pinned, and a CPU program read back says which held.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from inferplex.config import output_precision, values
from inferplex.config.any_value import plain
from inferplex.config.devices import DeviceTarget, parse_device_list
from inferplex.config.log_level import LEVELS
from inferplex.errors import DeviceNameError, PropertyError

__all__ = ["COMMON_PROPERTIES", "CORE_PROPERTIES", "ENGINE_PROPERTIES", "HETERO_PROPERTIES",
           "MULTI_PROPERTIES", "NOT_SUPPORTED", "READ_ONLY_PROPERTIES", "SCHEMA", "VIRTUAL_ONLY",
           "Property", "as_config", "canonical_key", "normalize_config", "normalize_property",
           "priority_targets"]


def _device_priorities(value: Any) -> str:
    """A validated device list, kept as its text: ``"GPU.0(4),CPU"`` (:func:`priority_targets` reads it)."""
    if isinstance(value, (list, tuple)):
        value = ",".join(str(v) for v in value)
    if not isinstance(value, str):
        raise values.Reject("a comma-separated device list such as 'GPU,CPU'")
    if value.endswith(",") and not value.endswith(",,"):
        value = value[:-1]  # OpenVINO's device.priorities("GPU", "CPU") ends its list with a comma
    try:
        parse_device_list(value, allow_counts=True)
    except DeviceNameError as e:
        raise values.Reject(f"a comma-separated device list such as 'GPU,CPU' ({e})") from None
    return value


def priority_targets(value: Any) -> tuple[DeviceTarget, ...]:
    """The devices of a MULTI_DEVICE_PRIORITIES value (its text, or a sequence of names)."""
    if isinstance(value, str):
        return parse_device_list(value, allow_counts=True)
    return tuple(DeviceTarget(str(name)) for name in value)


def _device_properties(value: Any) -> dict[str, dict[str, Any]]:
    accepted = "a mapping of device name to its properties, e.g. {'CPU': {'NUM_STREAMS': 2}}"
    if not isinstance(value, Mapping):
        raise values.Reject(accepted)
    try:
        return {str(device): as_config(props) or {} for device, props in value.items()}
    except PropertyError:
        raise values.Reject(accepted) from None


def _distribution_policy(value: Any) -> str:
    """A set of policies (OpenVINO's form), one name, or empty; stored as their names comma-joined."""
    value = values.as_text(value)
    names = [str(v) for v in value] if isinstance(value, (set, frozenset, list, tuple)) else [value]
    if any(isinstance(n, str) and n.strip().upper() == "TENSOR_PARALLEL" for n in names):
        raise values.Reject("PIPELINE_PARALLEL, or an empty set; TENSOR_PARALLEL (each op's weights "
                            "split across devices) is not implemented in inferplex")
    return ",".join(values.choice("", "PIPELINE_PARALLEL")(n) for n in names if n != "")


def _precision(value: Any) -> str:
    """f32, f16 or bf16: a name, or an element type (``ov.Type.f32``, OpenVINO's ``Type`` too)."""
    if not isinstance(value, str) and callable(getattr(value, "get_type_name", None)):
        value = value.get_type_name()
    return values.choice("f32", "f16", "bf16", aliases={
        "FP32": "f32", "FLOAT32": "f32", "FP16": "f16", "FLOAT16": "f16", "BFLOAT16": "bf16"})(value)


def _encryption_callbacks(value: Any) -> tuple[Callable[[bytes], Any], Callable[[bytes], Any]]:
    """OpenVINO's ``[encrypt, decrypt]``: two functions, each taking bytes and returning bytes."""
    if isinstance(value, (list, tuple)) and len(value) == 2 and all(callable(f) for f in value):
        return value[0], value[1]
    raise values.Reject("[encrypt, decrypt]: two functions, each taking bytes and returning bytes")


@dataclass(frozen=True)
class Property:
    """One key of the schema."""

    key: str
    """OpenVINO's spelling (or inferplex's, for its own keys)."""
    parse: Callable[[Any], Any]
    """The value parser (:mod:`inferplex.config.values`)."""
    takers: frozenset[str]
    """Where the key means something: "engine", "device", "registry" (every device, through the
    device registry), "core" (the Core's own options, see :data:`CORE_PROPERTIES`), "HETERO",
    "MULTI", "AUTO"."""


_VIRTUAL = frozenset({"HETERO", "MULTI", "AUTO"})
_MULTI = frozenset({"MULTI", "AUTO"})
_DEVICE_AND_VIRTUAL = _VIRTUAL | {"device"}

_LOG_LEVEL_ALIASES = {"NO": "LOG_NONE", "ERR": "LOG_ERROR", "ERROR": "LOG_ERROR", "WARNING": "LOG_WARNING",
                      "INFO": "LOG_INFO", "DEBUG": "LOG_DEBUG", "TRACE": "LOG_TRACE"}
"""``log.Level``'s member names, taken for OpenVINO's ``LOG_*`` values."""

SCHEMA: dict[str, Property] = {p.key: p for p in (
    Property("PERFORMANCE_HINT", values.choice("LATENCY", "THROUGHPUT", "CUMULATIVE_THROUGHPUT"),
             _DEVICE_AND_VIRTUAL),
    Property("PERFORMANCE_HINT_NUM_REQUESTS", values.int_at_least(0), _DEVICE_AND_VIRTUAL),
    Property("NUM_STREAMS", values.streams, frozenset({"device"})),
    Property("INFERENCE_NUM_THREADS", values.int_at_least(0), frozenset({"device"})),
    Property("INFERENCE_PRECISION_HINT", _precision, _DEVICE_AND_VIRTUAL),
    Property("EXECUTION_MODE_HINT", values.choice("PERFORMANCE", "ACCURACY"), _DEVICE_AND_VIRTUAL),
    Property("MODEL_PRIORITY", values.choice("LOW", "MEDIUM", "HIGH", aliases={"DEFAULT": "MEDIUM"}),
             _DEVICE_AND_VIRTUAL),
    Property("ENABLE_CPU_PINNING", values.boolean, frozenset({"device"})),
    Property("ENABLE_PROFILING", values.boolean, _DEVICE_AND_VIRTUAL),
    Property("MULTI_DEVICE_PRIORITIES", _device_priorities, _VIRTUAL),
    Property("DEVICE_PROPERTIES", _device_properties, _VIRTUAL),
    Property("MODEL_DISTRIBUTION_POLICY", _distribution_policy, frozenset({"HETERO"})),
    Property("HETERO_PLACEMENT", values.choice("SUPPORT", "COST"), frozenset({"HETERO"})),
    Property("MEMORY_LIMIT", values.byte_size, _DEVICE_AND_VIRTUAL),
    Property("SCHEDULE_POLICY", values.choice("DEVICE_PRIORITY", "ROUND_ROBIN", "EARLIEST_FINISH"), _MULTI),
    Property("ENABLE_STARTUP_FALLBACK", values.boolean, _MULTI),
    Property("ENABLE_RUNTIME_FALLBACK", values.boolean, _MULTI),
    Property("EXCLUSIVE_ASYNC_REQUESTS", values.boolean, _MULTI),
    Property("MULTI_REQUEST_TIMEOUT", values.seconds, _MULTI),
    Property("MULTI_QUARANTINE_TIME", values.seconds, _MULTI),
    Property("MULTI_CHECK_HOST_GAIN", values.boolean, _MULTI),
    Property("WORKER_PROCESSES", values.yes_no_auto, _VIRTUAL),
    Property("EXIT_TIMEOUT", values.seconds, frozenset({"engine"})),
    Property("ENABLE_TRACE", values.boolean, frozenset({"engine"})),
    Property(output_precision.KEY, output_precision.parse, frozenset({"engine"})),
    Property("CACHE_ENCRYPTION_CALLBACKS", _encryption_callbacks, frozenset({"engine"})),
    Property("CACHE_DIR", values.directory, _VIRTUAL | {"registry"}),
    Property("LOG_LEVEL", values.choice(*LEVELS, aliases=_LOG_LEVEL_ALIASES), _VIRTUAL | {"registry"}),
    Property("ENABLE_MMAP", values.boolean, frozenset({"core"})),
    Property("FORCE_TBB_TERMINATE", values.boolean, frozenset({"core"})),
    Property("CACHE_MODE", values.choice("OPTIMIZE_SPEED", "OPTIMIZE_SIZE"), frozenset({"core"})),
    Property("ALLOW_AUTO_BATCHING", values.boolean, frozenset({"core"})),
    Property("AUTO_BATCH_TIMEOUT", values.int_at_least(0), frozenset({"core"})),
)}


def _taken_by(taker: str) -> tuple[str, ...]:
    return tuple(key for key, prop in SCHEMA.items() if taker in prop.takers)


ENGINE_PROPERTIES = _taken_by("engine")
"""Compile keys every device takes, read by the request engine itself (not passed to plugins):
``EXIT_TIMEOUT`` (seconds past the slowest run seen that interpreter exit waits for a run still
going before its request ends with an InferenceError; default 5) and ``ENABLE_TRACE`` (record
each request's stages; read them as a Chrome trace with ``get_property("TRACE")``) and
``OUTPUT_PRECISION`` (MODEL, the default: floating outputs in the model's types; INFERENCE: in
the f16/bf16 the devices are hinted at, see :mod:`.output_precision`) and
``CACHE_ENCRYPTION_CALLBACKS`` (OpenVINO's ``[encrypt, decrypt]``: ``export_model`` returns
``encrypt(blob)`` and ``import_model`` given the same key reads ``decrypt(blob)``; with
``CACHE_DIR`` the model cache's entries are written encrypted and read through ``decrypt``)."""
COMMON_PROPERTIES = _taken_by("registry")
"""Keys every device takes, read by the device registry rather than by plugins: ``CACHE_DIR``
(the model cache, see :mod:`inferplex.devices.cache`)."""
CORE_PROPERTIES = _taken_by("core")
"""The Core's own options, as OpenVINO's Core takes them: set Core-wide (``set_property({...})``,
read back with ``get_property(key)``), and taken, checked, by a compile's config or
``set_property(device, ...)`` for any device, where no device reads them, so that a compiled model
reports none of them, as in OpenVINO.  ``ENABLE_MMAP`` is ``read_model``'s (a compile's model is
read already); ``CACHE_MODE`` changes nothing, inferplex's model cache keeping the compiled program
either way; ``ALLOW_AUTO_BATCHING`` and ``AUTO_BATCH_TIMEOUT`` are OpenVINO's automatic batching,
which inferplex does not do; ``FORCE_TBB_TERMINATE`` is OpenVINO's exit-time TBB option."""
HETERO_PROPERTIES = _taken_by("HETERO")
"""HETERO's own keys; the devices' keys are accepted too and reach each member that takes them."""
MULTI_PROPERTIES = _taken_by("MULTI")
"""MULTI's and AUTO's own keys; the devices' keys are accepted too and reach each member that takes them."""
VIRTUAL_ONLY = frozenset(key for key, prop in SCHEMA.items() if prop.takers <= _VIRTUAL)
"""The virtual devices' own keys.  A device may take one with a meaning of its own (the CPU's
MODEL_DISTRIBUTION_POLICY is OpenVINO CPU's ``{TENSOR_PARALLEL}``, HETERO's is
``{PIPELINE_PARALLEL}``): set on the device it means the device's; in a virtual device's config,
or Core-wide, the virtual device's, and it reaches no member (``DEVICE_PROPERTIES`` gives it one)."""

_ALIASES = {"PERF_COUNT": "ENABLE_PROFILING", "DEVICE_PRIORITIES": "MULTI_DEVICE_PRIORITIES",
            "MULTI_WORKER_PROCESSES": "WORKER_PROCESSES"}

NOT_SUPPORTED: dict[str, str] = {}
"""OpenVINO keys inferplex refuses with the reason, rather than accepting them and doing nothing."""

READ_ONLY_PROPERTIES = (
    "AVAILABLE_DEVICES",
    "DEVICE_ID",
    "DEVICE_TYPE",
    "OPTIMIZATION_CAPABILITIES",
    "RANGE_FOR_STREAMS",
    "RANGE_FOR_ASYNC_INFER_REQUESTS",
    "OPTIMAL_NUMBER_OF_INFER_REQUESTS",
    "EXECUTION_DEVICES",
    "SUPPORTED_PROPERTIES",
    "FULL_DEVICE_NAME",
    "DEVICE_TOTAL_MEM_SIZE",
    "DEVICE_FREE_MEM_SIZE",
    "GPU_DEVICE_TOTAL_MEM_SIZE",
    "GPU_DEVICE_MAX_ALLOC_MEM_SIZE",
    "GPU_UARCH_VERSION",
    "GPU_EXECUTION_UNITS_COUNT",
    "GPU_MEMORY_STATISTICS",
    "HETERO_NUMBER_OF_SUBMODELS",
    "NETWORK_NAME",
    "MODEL_NAME",
    "PIPELINE_STAGES",
    "HETERO_SUBGRAPHS",
    "DEVICE_STATISTICS",
    "LOADED_FROM_CACHE",
)


def canonical_key(key: str) -> str:
    """The canonical spelling of a property key (``PERF_COUNT`` -> ``ENABLE_PROFILING``)."""
    upper = str(key).strip().upper()
    return _ALIASES.get(upper, upper)


def normalize_property(key: str, value: Any, accepted_keys: tuple[str, ...] | None = None,
                       target: str = "",
                       parsers: Mapping[str, Callable[[Any], Any]] | None = None) -> tuple[str, Any]:
    """Validate one property and return ``(canonical_key, canonical_value)``.

    ``accepted_keys`` limits the writable keys (a device's SUPPORTED_PROPERTIES);
    ``target`` names the device in error messages; ``parsers`` are the device
    plugins' parsers of their own keys.
    """
    where = f" for {target}" if target else ""
    name = canonical_key(key)
    if name in NOT_SUPPORTED:
        raise PropertyError(f"property {key!r}{where} is not supported by inferplex: {NOT_SUPPORTED[name]}")
    if name in READ_ONLY_PROPERTIES:
        raise PropertyError(f"property {key!r} is read-only{where}; it can be read with get_property")
    own = parsers or {}
    allowed = accepted_keys if accepted_keys is not None else (*SCHEMA, *own)
    if name not in allowed:
        raise PropertyError(
            f"unknown property {key!r}{where}; accepted keys: {', '.join(sorted(allowed))}")
    # A device's own parser of a key comes first: MODEL_DISTRIBUTION_POLICY means one thing to HETERO
    # and another to the CPU, as in OpenVINO.
    parse = own.get(name) or (SCHEMA[name].parse if name in SCHEMA else None)
    if parse is None:  # a device's own key without a parser: its plugin checks the value
        return name, values.as_text(value)
    try:
        return name, parse(values.as_text(value))
    except values.Reject as reject:
        raise PropertyError(f"property {name}{where}: value {value!r} is not accepted; "
                            f"accepted: {reject}") from None


def as_config(config: Any) -> dict[str, Any] | None:
    """A config as a dict: a dict, or one ``(key, value)`` pair (what the typed mirror's
    ``hint.performance_mode(...)`` returns), as OpenVINO's Python API takes; None stays None.
    Values a typed property wrapped (:class:`~inferplex.config.any_value.OVAny`) are unwrapped."""
    if config is None or isinstance(config, Mapping):
        return None if config is None else {key: plain(value) for key, value in config.items()}
    if isinstance(config, tuple) and len(config) == 2 and isinstance(config[0], str):
        return {config[0]: plain(config[1])}
    hint = " (several pairs: pass dict(pairs))" if isinstance(config, (list, tuple)) else ""
    raise PropertyError(
        f"config must be a dict of property name to value, or one (name, value) pair such as "
        f"hint.performance_mode(hint.PerformanceMode.THROUGHPUT){hint}; got {type(config).__name__} "
        f"{config!r}")


def normalize_config(config: Mapping[str, Any] | tuple[str, Any] | None,
                     accepted_keys: tuple[str, ...] | None = None, target: str = "",
                     parsers: Mapping[str, Callable[[Any], Any]] | None = None) -> dict[str, Any]:
    """Validate every entry of a config; all problems are reported in one error."""
    config = as_config(config)
    if config is None:
        return {}
    result: dict[str, Any] = {}
    problems: list[str] = []
    for key, value in config.items():
        try:
            name, parsed = normalize_property(key, value, accepted_keys, target, parsers)
        except PropertyError as e:
            problems.append(str(e))
        else:
            result[name] = parsed
    if problems:
        raise PropertyError("; ".join(problems))
    return result
