"""Property keys (OpenVINO spelling), their accepted values, and device strings.

Property values may be given as strings (``"THROUGHPUT"``, ``"YES"``, ``"20GiB"``)
or as Python values (``True``, ``4``); :func:`normalize_property` turns either into
one canonical Python value and raises :class:`~inferplex.errors.PropertyError`
naming the key, the value and what is accepted.

Device strings (:func:`parse_device_string`)::

    CPU | GPU | GPU.1                         one device
    HETERO:GPU,CPU                            virtual device over a priority list
    MULTI:CPU(2),GPU.0(4)                     per-device request counts
    AUTO | AUTO:GPU.1,CPU | AUTO:-CPU         candidates, or exclusions
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from inferplex.errors import DeviceNameError, PropertyError

__all__ = [
    "COMMON_PROPERTIES",
    "ENGINE_PROPERTIES",
    "VIRTUAL_DEVICES",
    "DeviceSpec",
    "DeviceTarget",
    "hint",
    "normalize_config",
    "normalize_property",
    "parse_bytes",
    "parse_device_list",
    "parse_device_string",
]

VIRTUAL_DEVICES = ("HETERO", "MULTI", "AUTO")

COMMON_PROPERTIES = ("CACHE_DIR",)
"""Keys every device and virtual device takes, handled by the device registry, not by plugins
(``CACHE_DIR``: the model cache, see :mod:`inferplex.devices.cache`)."""

ENGINE_PROPERTIES = ("EXIT_TIMEOUT", "ENABLE_TRACE")
"""Compile keys every device takes, read by the request engine itself (not passed to plugins):
``EXIT_TIMEOUT`` (seconds past the slowest run seen that interpreter exit waits for a run still
going before its request ends with an InferenceError; default 5) and ``ENABLE_TRACE`` (record
each request's stages; read them as a Chrome trace with ``get_property("TRACE")``)."""

# --- typed mirror of the string keys (OpenVINO's ov.properties.hint.*) -----------


class hint:  # noqa: N801 - mirrors OpenVINO's module path `properties.hint`
    """String constants for hint properties, as in ``openvino.properties.hint``."""

    performance_mode = "PERFORMANCE_HINT"
    num_requests = "PERFORMANCE_HINT_NUM_REQUESTS"
    inference_precision = "INFERENCE_PRECISION_HINT"
    model_distribution_policy = "MODEL_DISTRIBUTION_POLICY"

    class PerformanceMode:
        LATENCY = "LATENCY"
        THROUGHPUT = "THROUGHPUT"
        CUMULATIVE_THROUGHPUT = "CUMULATIVE_THROUGHPUT"

    class ModelDistributionPolicy:
        PIPELINE_PARALLEL = "PIPELINE_PARALLEL"


# --- value parsers ---------------------------------------------------------------

_TRUE = {"YES", "TRUE", "1", "ON"}
_FALSE = {"NO", "FALSE", "0", "OFF"}
_BYTE_UNITS = {
    "": 1, "B": 1,
    "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12,
    "KIB": 2**10, "MIB": 2**20, "GIB": 2**30, "TIB": 2**40,
}
_BYTES_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*$")


class _Reject(Exception):
    """Raised by a value parser; carries the 'accepted' text."""


def _bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().upper() in _TRUE | _FALSE:
        return value.strip().upper() in _TRUE
    raise _Reject("True/False or 'YES'/'NO'")


def _int_at_least(minimum: int) -> Callable[[Any], int]:
    def parse(value: Any) -> int:
        if isinstance(value, bool):
            raise _Reject(f"an integer >= {minimum}")
        try:
            number = int(value)
        except (TypeError, ValueError):
            raise _Reject(f"an integer >= {minimum}") from None
        if (isinstance(value, float) and value != number) or number < minimum:
            raise _Reject(f"an integer >= {minimum}")
        return number

    return parse


def _enum(*choices: str, aliases: Mapping[str, str] | None = None) -> Callable[[Any], str]:
    table = {c.upper(): c for c in choices}
    table.update({k.upper(): v for k, v in (aliases or {}).items()})

    def parse(value: Any) -> str:
        if isinstance(value, str) and value.strip().upper() in table:
            return table[value.strip().upper()]
        raise _Reject("one of " + ", ".join(choices))

    return parse


def parse_bytes(value: Any) -> int:
    """Bytes from an int or a string such as ``"20GiB"``, ``"512 MB"`` or ``"1024"``."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    if isinstance(value, str):
        match = _BYTES_RE.match(value)
        if match and match.group(2).upper() in _BYTE_UNITS:
            return int(float(match.group(1)) * _BYTE_UNITS[match.group(2).upper()])
    raise PropertyError(
        f"MEMORY_LIMIT: {value!r} is not a size; accepted: a number of bytes (int) "
        "or a string like '20GiB', '512MB', '1.5GB'"
    )


def _bytes(value: Any) -> int:
    try:
        return parse_bytes(value)
    except PropertyError:
        raise _Reject("bytes as an int, or a string like '20GiB', '512MB'") from None


_SECONDS_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s)?\s*$", re.IGNORECASE)


def parse_seconds(value: Any) -> float | None:
    """Seconds from ``2``, ``0.5``, ``"500ms"`` or ``"2s"``; ``None`` and ``0`` mean no limit."""
    if value is None:
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0:
        return float(value) or None
    match = _SECONDS_RE.match(value) if isinstance(value, str) else None
    if match is None:
        raise _Reject("seconds as a number (0 = no limit), or a string like '500ms', '2s'")
    number = float(match.group(1)) / (1000.0 if (match.group(2) or "").lower() == "ms" else 1.0)
    return number or None


def _cache_dir(value: Any) -> str:
    """A directory path (str or os.PathLike); '' turns the cache off.  Its safety is checked at compile."""
    if isinstance(value, (str, os.PathLike)):
        return os.fspath(value)
    raise _Reject("a directory path (str or pathlib.Path), or '' for no cache")


def _streams(value: Any) -> int | str:
    if isinstance(value, str) and value.strip().upper() == "AUTO":
        return "AUTO"
    return _int_at_least(1)(value)


def _device_priorities(value: Any) -> str:
    """A validated device list, kept as its text: ``"GPU.0(4),CPU"`` (parse_device_list reads it)."""
    if isinstance(value, (list, tuple)):
        value = ",".join(str(v) for v in value)
    if not isinstance(value, str):
        raise _Reject("a comma-separated device list such as 'GPU,CPU'")
    try:
        parse_device_list(value, allow_counts=True)
    except DeviceNameError as e:
        raise _Reject(f"a comma-separated device list such as 'GPU,CPU' ({e})") from None
    return value


def _device_properties(value: Any) -> dict[str, dict[str, Any]]:
    if not isinstance(value, Mapping) or not all(isinstance(v, Mapping) for v in value.values()):
        raise _Reject("a mapping of device name to its properties, e.g. {'CPU': {'NUM_STREAMS': 2}}")
    return {str(device): dict(props) for device, props in value.items()}


def _distribution_policy(value: Any) -> str:
    if isinstance(value, (set, frozenset, list, tuple)):
        value = ",".join(str(v) for v in value)
    return _enum("", "PIPELINE_PARALLEL")(value)


# key -> parser.  The CPU/GPU plugins and virtual devices each declare which of
# these they accept (SUPPORTED_PROPERTIES); this table only knows what values mean.
_PARSERS: dict[str, Callable[[Any], Any]] = {
    "PERFORMANCE_HINT": _enum("LATENCY", "THROUGHPUT", "CUMULATIVE_THROUGHPUT"),
    "PERFORMANCE_HINT_NUM_REQUESTS": _int_at_least(0),
    "NUM_STREAMS": _streams,
    "INFERENCE_NUM_THREADS": _int_at_least(0),
    "INFERENCE_PRECISION_HINT": _enum(
        "f32", "f16", "bf16",
        aliases={"FP32": "f32", "FLOAT32": "f32", "FP16": "f16", "FLOAT16": "f16", "BFLOAT16": "bf16"},
    ),
    "ENABLE_PROFILING": _bool,
    "MULTI_DEVICE_PRIORITIES": _device_priorities,
    "DEVICE_PROPERTIES": _device_properties,
    "MODEL_DISTRIBUTION_POLICY": _distribution_policy,
    "SCHEDULE_POLICY": _enum("DEVICE_PRIORITY", "ROUND_ROBIN", "EARLIEST_FINISH"),
    "ENABLE_STARTUP_FALLBACK": _bool,
    "ENABLE_RUNTIME_FALLBACK": _bool,
    "EXCLUSIVE_ASYNC_REQUESTS": _bool,
    "MEMORY_LIMIT": _bytes,
    "TORCH_COMPILE": _bool,
    "CUDA_GRAPHS": _bool,
    "SHAPE_SPECIALIZATION": _bool,
    "THREAD_SPINNING": _bool,
    "THREAD_PRIORITY": _enum("NORMAL", "LOW"),
    "ENGINE": _enum("OPENVINO", "ONNXRUNTIME", aliases={"ONNX_RUNTIME": "ONNXRUNTIME", "ORT": "ONNXRUNTIME"}),
    "GPU_CHANNELS_LAST": lambda v: ("YES" if v else "NO") if isinstance(v, bool) else _enum(
        "AUTO", "YES", "NO", aliases={"TRUE": "YES", "FALSE": "NO"})(v),
    "GPU_QUEUE_THROTTLE": _enum("LOW", "MEDIUM", "HIGH"),
    "MULTI_REQUEST_TIMEOUT": parse_seconds,
    "MULTI_QUARANTINE_TIME": parse_seconds,
    "MULTI_CHECK_HOST_GAIN": _bool,
    "EXIT_TIMEOUT": parse_seconds,
    "ENABLE_TRACE": _bool,
    "CACHE_DIR": _cache_dir,
    "WORKER_PROCESSES": lambda v: ("YES" if v else "NO") if isinstance(v, bool) else _enum(
        "AUTO", "YES", "NO", aliases={"TRUE": "YES", "FALSE": "NO"})(v),
}
_ALIASES = {"PERF_COUNT": "ENABLE_PROFILING", "DEVICE_PRIORITIES": "MULTI_DEVICE_PRIORITIES",
            "MULTI_WORKER_PROCESSES": "WORKER_PROCESSES"}

NOT_SUPPORTED: dict[str, str] = {}
"""OpenVINO keys inferplex refuses with the reason, rather than accepting them and doing nothing."""

READ_ONLY_PROPERTIES = (
    "OPTIMAL_NUMBER_OF_INFER_REQUESTS",
    "EXECUTION_DEVICES",
    "SUPPORTED_PROPERTIES",
    "FULL_DEVICE_NAME",
    "DEVICE_TOTAL_MEM_SIZE",
    "DEVICE_FREE_MEM_SIZE",
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
                       target: str = "") -> tuple[str, Any]:
    """Validate one property and return ``(canonical_key, canonical_value)``.

    ``accepted_keys`` limits the writable keys (a device's SUPPORTED_PROPERTIES);
    ``target`` names the device in error messages.
    """
    where = f" for {target}" if target else ""
    name = canonical_key(key)
    if name in NOT_SUPPORTED:
        raise PropertyError(f"property {key!r}{where} is not supported by inferplex: {NOT_SUPPORTED[name]}")
    if name in READ_ONLY_PROPERTIES:
        raise PropertyError(f"property {key!r} is read-only{where}; it can be read with get_property")
    allowed = accepted_keys if accepted_keys is not None else tuple(_PARSERS)
    if name not in _PARSERS and name in allowed:
        return name, value  # a device's own key: its plugin checks the value
    if name not in _PARSERS or name not in allowed:
        raise PropertyError(
            f"unknown property {key!r}{where}; accepted keys: {', '.join(sorted(allowed))}"
        )
    try:
        return name, _PARSERS[name](value)
    except _Reject as reject:
        raise PropertyError(f"property {name}{where}: value {value!r} is not accepted; "
                            f"accepted: {reject}") from None


def normalize_config(config: Mapping[str, Any] | None, accepted_keys: tuple[str, ...] | None = None,
                     target: str = "") -> dict[str, Any]:
    """Validate every entry of a config; all problems are reported in one error."""
    if config is None:
        return {}
    if not isinstance(config, Mapping):
        raise PropertyError(f"config must be a dict of property name to value, got {type(config).__name__}")
    result: dict[str, Any] = {}
    problems: list[str] = []
    for key, value in config.items():
        try:
            name, parsed = normalize_property(key, value, accepted_keys, target)
        except PropertyError as e:
            problems.append(str(e))
        else:
            result[name] = parsed
    if problems:
        raise PropertyError("; ".join(problems))
    return result


# --- device strings ---------------------------------------------------------------

_DEVICE_RE = re.compile(r"^(?P<name>[A-Z][A-Z0-9_]*(?:\.\d+)?)(?:\((?P<count>\d+)\))?$")


@dataclass(frozen=True)
class DeviceTarget:
    """One entry of a device list."""

    name: str
    """Device name as written: ``"CPU"``, ``"GPU"``, ``"GPU.1"``."""
    num_requests: int | None = None
    """Requests asked for with ``NAME(n)``; ``None`` when not given."""


@dataclass(frozen=True)
class DeviceSpec:
    """A parsed device string."""

    virtual: str | None
    """``"HETERO"``, ``"MULTI"``, ``"AUTO"`` or ``None`` for a single device."""
    targets: tuple[DeviceTarget, ...] = ()
    """Devices in priority order (for a single device: exactly one)."""
    exclusions: tuple[str, ...] = ()
    """Devices excluded with ``-NAME`` (AUTO only)."""
    text: str = field(default="", compare=False)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(t.name for t in self.targets)


def parse_device_list(text: str, *, allow_counts: bool = False,
                      allow_exclusions: bool = False) -> tuple[DeviceTarget, ...]:
    """Parse ``"GPU.0(4),CPU"`` into targets; exclusions (``-CPU``) are returned with a leading '-'."""
    if text.strip() == "":
        raise DeviceNameError("empty device list; write devices comma-separated, e.g. 'GPU,CPU'")
    targets: list[DeviceTarget] = []
    for raw in text.split(","):
        item = raw.strip()
        if item != raw or item == "":
            raise DeviceNameError(
                f"malformed device list {text!r}: devices are separated by single commas "
                "with no spaces, e.g. 'GPU.0,CPU'")
        excluded = item.startswith("-")
        if excluded and not allow_exclusions:
            raise DeviceNameError(f"device exclusion {item!r} is only accepted in AUTO:<list>")
        match = _DEVICE_RE.match(item[1:] if excluded else item)
        if not match:
            raise DeviceNameError(
                f"malformed device name {item!r} in {text!r}; accepted: NAME, NAME.<index>, "
                "NAME(<requests>) e.g. 'CPU', 'GPU.1', 'GPU.0(4)'")
        count = match.group("count")
        if count is not None and (not allow_counts or excluded):
            raise DeviceNameError(f"request count in {item!r} is only accepted in MULTI/AUTO lists")
        if count is not None and int(count) < 1:
            raise DeviceNameError(f"request count in {item!r} must be at least 1")
        name = ("-" if excluded else "") + match.group("name")
        targets.append(DeviceTarget(name, int(count) if count is not None else None))
    names = [t.name for t in targets]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise DeviceNameError(f"device list {text!r} names {', '.join(duplicates)} more than once")
    return tuple(targets)


def parse_device_string(text: str) -> DeviceSpec:
    """Parse a full device string; see the module docstring for the grammar."""
    if not isinstance(text, str) or not text:
        raise DeviceNameError(f"device name must be a non-empty string, got {text!r}")
    head, sep, rest = text.partition(":")
    if head in VIRTUAL_DEVICES:
        if not sep:
            return DeviceSpec(head, (), (), text)
        if rest.strip() == "":
            raise DeviceNameError(
                f"{text!r}: {head} got an empty device list; write the devices after '{head}:' "
                f"comma-separated, highest priority first, e.g. 'GPU,CPU' ({head}:GPU,CPU), or "
                f"{head} alone to use MULTI_DEVICE_PRIORITIES")
        items = parse_device_list(rest, allow_counts=head != "HETERO", allow_exclusions=head == "AUTO")
        if any(t.name in VIRTUAL_DEVICES for t in items):
            raise DeviceNameError(f"{text!r}: a virtual device cannot be listed inside {head}")
        exclusions = tuple(t.name[1:] for t in items if t.name.startswith("-"))
        targets = tuple(t for t in items if not t.name.startswith("-"))
        if exclusions and targets:
            raise DeviceNameError(
                f"{text!r}: AUTO takes either a candidate list or exclusions (-NAME), not both")
        return DeviceSpec(head, targets, exclusions, text)
    if sep:
        raise DeviceNameError(
            f"unknown virtual device {head!r} in {text!r}; accepted: {', '.join(VIRTUAL_DEVICES)}")
    (target,) = parse_device_list(text)
    if target.num_requests is not None:
        raise DeviceNameError(f"{text!r}: request counts are only accepted inside MULTI/AUTO lists")
    return DeviceSpec(None, (target,), (), text)
