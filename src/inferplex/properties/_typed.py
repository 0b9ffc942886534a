"""Callable property keys, and the one conversion of stored values to OpenVINO's typed values.

A :class:`Property` is a key string that can be called, as OpenVINO's
``openvino.properties`` functions are::

    hint.performance_mode()                                 # "PERFORMANCE_HINT"
    hint.performance_mode(hint.PerformanceMode.THROUGHPUT)  # ("PERFORMANCE_HINT", PerformanceMode.THROUGHPUT)
    {hint.performance_mode: "LATENCY"}                      # it is the key string itself, too

A value is checked when the pair is made, by the schema's parser
(:mod:`inferplex.config.schema`): a bad one raises
:class:`~inferplex.errors.PropertyError` naming the key, the value and what is
accepted.  Read-only keys take no value.  A key made with ``kind`` (the Python
types OpenVINO's function for it takes, e.g. ``str`` for ``cache_dir``) checks
only the type, as OpenVINO does: another type raises
:class:`~inferplex.errors.PropertyTypeError` (a ``TypeError``), while a value of
the right type that inferplex would refuse (``inference_num_threads(-8)``,
``{TENSOR_PARALLEL}``) makes a pair, and is refused where the pair is set.

:func:`typed_value` turns what inferplex stores (strings, ints, lists) into what
OpenVINO's ``get_property`` returns (``PerformanceMode.THROUGHPUT``,
``Type.f32``, ``{"NUM_STREAMS": "RW", ...}``); ``Core.get_property`` and
``CompiledModel.get_property`` call it on every value they return (a compiled model's device
program may then present a few in another form: ``DeviceProgram.presented_property``).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from typing import Any

import numpy as np

from inferplex.config.any_value import OVAny
from inferplex.config.schema import READ_ONLY_PROPERTIES, SCHEMA, canonical_key, normalize_property
from inferplex.errors import PropertyError, PropertyTypeError
from inferplex.properties import _enums

__all__ = ["Property", "typed_value"]


class Property(str):
    """A property key (a ``str``) that returns itself, or a checked ``(key, value)`` pair, when called."""

    read_only: bool
    """Whether the key only reads (calling it with a value is an error)."""
    _collect: Callable[[tuple[Any, ...]], Any] | None
    _parser: Callable[[Any], Any] | None
    _kind: tuple[type, ...] | None
    _as_collected: bool

    def __new__(cls, key: str, *, read_only: bool = False,
                collect: Callable[[tuple[Any, ...]], Any] | None = None,
                parser: Callable[[Any], Any] | None = None,
                kind: tuple[type, ...] | None = None, as_collected: bool = False) -> Property:
        """``collect`` makes one value of several arguments; ``as_collected``: the pair holds that
        value once it parses, rather than the parsed one (OpenVINO's ``"GPU,CPU,"``)."""
        instance = super().__new__(cls, key)
        instance.read_only = read_only
        instance._collect = collect
        instance._parser = parser
        instance._kind = kind
        instance._as_collected = as_collected
        return instance

    def __call__(self, *values: Any) -> Any:
        """``key()`` -> the key string; ``key(value)`` -> ``(key, OVAny(typed value))``, as OpenVINO."""
        key = str(self)
        if not values:
            return key
        if self.read_only:
            raise PropertyTypeError(f"{_function_name(self)}(): incompatible function arguments: property "
                                    f"{key} is read-only; call it with no value for its key, then read "
                                    f"it with get_property({key!r})")
        if self._collect is not None:
            value = self._collect(values)
        elif len(values) == 1:
            value = values[0]
        else:
            raise PropertyError(f"property {key} takes one value, got {len(values)}: {values!r}")
        self._check_kind(value)
        name = canonical_key(key)
        # A device's own key (SCHEDULING_CORE_TYPE...) has no schema entry: the device checks it
        # where the pair is set, as OpenVINO's plugins do.
        parser = self._parser or (None if name in SCHEMA else _as_given)
        try:
            name, parsed = normalize_property(key, value, parsers={name: parser} if parser else None)
        except PropertyError:
            if self._kind is None:
                raise
            parsed = value  # the right type: checked where the pair is set, as OpenVINO
        if self._as_collected:
            return key, OVAny(value)
        if name == "NUM_STREAMS":  # an int, as OpenVINO's pair holds: -1 for Num.AUTO
            return key, OVAny(_streams(parsed))
        return key, OVAny(typed_value(name, parsed))

    def _check_kind(self, value: Any) -> None:
        if self._kind is None or isinstance(value, self._kind):
            return
        accepted = " or ".join(k.__name__ for k in self._kind if k is not np.integer)
        raise PropertyTypeError(f"{_function_name(self)}(): incompatible function arguments: property "
                                f"{self!s} takes {accepted}; got {type(value).__name__} {value!r}")


def _function_name(key: Property) -> str:
    """The name of OpenVINO's function for ``key`` (``cache_dir`` for ``CACHE_DIR``), for messages."""
    return str(key).lower()


def _as_given(value: Any) -> Any:
    return value


def _enum(kind: type[Any]) -> Callable[[Any], Any]:
    def convert(value: Any) -> Any:
        try:
            return kind(value)
        except ValueError:
            return value  # a value the enum does not name (a plugin's own) is returned as stored

    return convert


def _precision(value: Any) -> Any:
    from inferplex.api.types import Type

    try:
        return Type(value)
    except Exception:  # noqa: BLE001 - not an element type name: returned as stored
        return value


def _streams(value: Any) -> Any:
    """An int, as OpenVINO reads NUM_STREAMS back: -1 for AUTO (``Num.AUTO.to_integer()``)."""
    return _enums.Num(value).to_integer() if not isinstance(value, bool) else value


def _distribution(value: Any) -> set[Any]:
    names = value if isinstance(value, (set, frozenset, list, tuple)) else str(value).split(",")
    return {_enum(_enums.ModelDistributionPolicy)(name) for name in names if name}


_HOST_TYPES = {"host": _enums.DeviceType.INTEGRATED, "emulated": _enums.DeviceType.DISCRETE}


def _device_type(value: Any) -> Any:
    """DEVICE_TYPE: ``host`` (the CPU) reads as INTEGRATED, as OpenVINO's CPU answers;
    ``emulated`` GPUs read as DISCRETE, the GPUs they stand in for."""
    text = str(value).lower()
    return _HOST_TYPES.get(text) or _enum(_enums.DeviceType)(text)


def _device_properties(value: Any) -> Any:
    if not isinstance(value, Mapping):
        return value
    return {device: {str(k): typed_value(k, v) for k, v in config.items()} if isinstance(config, Mapping)
            else config for device, config in value.items()}


_CONVERT: dict[str, Callable[[Any], Any]] = {
    "PERFORMANCE_HINT": _enum(_enums.PerformanceMode),
    "EXECUTION_MODE_HINT": _enum(_enums.ExecutionMode),
    "MODEL_PRIORITY": _enum(_enums.Priority),
    "GPU_QUEUE_THROTTLE": _enum(_enums.Priority),
    "SCHEDULING_CORE_TYPE": _enum(_enums.SchedulingCoreType),
    "LOG_LEVEL": _enum(_enums.Level),
    "SCHEDULE_POLICY": _enum(_enums.SchedulePolicy),
    "CACHE_MODE": _enum(_enums.CacheMode),
    "WORKLOAD_TYPE": _enum(_enums.WorkloadType),
    "INFERENCE_PRECISION_HINT": _precision,
    "KV_CACHE_PRECISION": _precision,
    "KEY_CACHE_PRECISION": _precision,
    "VALUE_CACHE_PRECISION": _precision,
    "TBB_PARTITIONER": _enum(_enums.TbbPartitioner),
    "NUM_STREAMS": _streams,
    "MODEL_DISTRIBUTION_POLICY": _distribution,
    "DEVICE_TYPE": _device_type,
    "DEVICE_PROPERTIES": _device_properties,
    "EXECUTION_DEVICES": list,
    "AVAILABLE_DEVICES": list,
    "OPTIMIZATION_CAPABILITIES": lambda names: [_enum(_enums.Capability)(n) for n in names],
    "RANGE_FOR_STREAMS": tuple,
    "RANGE_FOR_ASYNC_INFER_REQUESTS": tuple,
}


def typed_value(key: str, value: Any, *, writable: Collection[str] | None = None) -> Any:
    """``value`` of property ``key`` as OpenVINO's ``get_property`` returns it.

    Enums for hints and policies (``PerformanceMode.THROUGHPUT``), ``ov.Type``
    for ``INFERENCE_PRECISION_HINT``, a set for ``MODEL_DISTRIBUTION_POLICY``,
    ``streams.Num.AUTO`` for ``NUM_STREAMS`` left to the device (else its int),
    lists and tuples for the list-valued facts.  ``SUPPORTED_PROPERTIES``
    becomes ``{key: "RO" | "RW"}``: ``writable`` names the keys that can be set
    (default: every key the schema does not mark read-only).  Other values are
    returned unchanged.
    """
    name = canonical_key(key)
    if name == "SUPPORTED_PROPERTIES" and not isinstance(value, Mapping):
        def mode(k: str) -> str:
            if writable is not None:
                return "RW" if k in writable else "RO"
            return "RO" if k in READ_ONLY_PROPERTIES else "RW"

        return {str(k): mode(str(k)) for k in value}
    convert = _CONVERT.get(name)
    return value if convert is None or value is None else convert(value)
