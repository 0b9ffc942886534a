"""The value types of OpenVINO's typed properties, as inferplex stores them.

Each enum behaves as OpenVINO's (pybind11) enum of the same name: its
``value`` and ``int()`` are OpenVINO's numbers, ``str()`` is
``"PerformanceMode.THROUGHPUT"``, ``repr`` ``<PerformanceMode.THROUGHPUT: 2>``,
members order by number and ``PerformanceMode(2)`` is ``THROUGHPUT``.  One
addition: a member also equals the string inferplex's schema stores for it
(``PerformanceMode.THROUGHPUT == "THROUGHPUT"``, ``Level.NO == "LOG_NONE"``),
so configs written with strings and values read back compare either way
(:class:`inferplex.config.values.OptionEnum`).
"""

from __future__ import annotations

import enum
from typing import Any, ClassVar

from inferplex.config.values import OptionEnum

__all__ = [
    "CacheMode",
    "Capability",
    "DeviceType",
    "ExecutionMode",
    "Level",
    "ModelDistributionPolicy",
    "Num",
    "PerformanceMode",
    "Priority",
    "SchedulePolicy",
    "SchedulingCoreType",
    "TbbPartitioner",
    "WorkloadType",
]


class CacheMode(OptionEnum):
    """``CacheMode`` (``CACHE_MODE``): what OpenVINO's model cache keeps; named so programs import,
    inferplex's cache (``CACHE_DIR``) keeps the compiled program either way."""

    OPTIMIZE_SIZE = (0, "optimize_size")
    OPTIMIZE_SPEED = (1, "optimize_speed")


class TbbPartitioner(OptionEnum):
    """``intel_cpu.TbbPartitioner`` (``TBB_PARTITIONER``): how OpenVINO's CPU engine splits work among
    its TBB threads.  ``NONE`` (0, unnamed in OpenVINO) is what the CPU reads before one is chosen."""

    NONE = (0, "NONE")
    STATIC = (1, "STATIC")
    AUTO = (2, "AUTO")


class WorkloadType(OptionEnum):
    """``WorkloadType`` (``WORKLOAD_TYPE``): OpenVINO's NPU power hint; named so programs import."""

    DEFAULT = (0, "DEFAULT")
    EFFICIENT = (1, "EFFICIENT")


class PerformanceMode(OptionEnum):
    """``hint.PerformanceMode``: what the device tunes for (``PERFORMANCE_HINT``)."""

    LATENCY = (1, "LATENCY")
    THROUGHPUT = (2, "THROUGHPUT")
    CUMULATIVE_THROUGHPUT = (3, "CUMULATIVE_THROUGHPUT")


class ExecutionMode(OptionEnum):
    """``hint.ExecutionMode`` (``EXECUTION_MODE_HINT``): ACCURACY is f32 unless a precision is set."""

    PERFORMANCE = (1, "PERFORMANCE")
    ACCURACY = (2, "ACCURACY")


class SchedulingCoreType(OptionEnum):
    """``hint.SchedulingCoreType`` (``SCHEDULING_CORE_TYPE``): which cores of a hybrid CPU run inference."""

    ANY_CORE = (0, "ANY_CORE")
    PCORE_ONLY = (1, "PCORE_ONLY")
    ECORE_ONLY = (2, "ECORE_ONLY")


class Priority(OptionEnum):
    """``hint.Priority`` (``MODEL_PRIORITY``); ``DEFAULT`` is ``MEDIUM``, as in OpenVINO."""

    LOW = (0, "LOW")
    MEDIUM = (1, "MEDIUM")
    HIGH = (2, "HIGH")
    DEFAULT = (1, "MEDIUM")


class ModelDistributionPolicy(OptionEnum):
    """``hint.ModelDistributionPolicy``: how HETERO spreads a model over its devices.

    ``PIPELINE_PARALLEL`` gives each device a contiguous stage of the model.
    ``TENSOR_PARALLEL`` (each op's weights split across devices) exists so that
    OpenVINO programs import; inferplex refuses it with a PropertyError where it
    is set.
    """

    TENSOR_PARALLEL = (0, "TENSOR_PARALLEL")
    PIPELINE_PARALLEL = (1, "PIPELINE_PARALLEL")


class SchedulePolicy(OptionEnum):
    """``intel_auto.SchedulePolicy``: which device of MULTI/AUTO takes the next request.

    ``EARLIEST_FINISH`` (2) is inferplex's own: the device expected to finish the
    request first, from its measured latencies and queue.
    """

    ROUND_ROBIN = (0, "ROUND_ROBIN")
    DEVICE_PRIORITY = (1, "DEVICE_PRIORITY")
    DEFAULT = (1, "DEVICE_PRIORITY")  # OpenVINO's entries first, in its order (``__entries``)
    EARLIEST_FINISH = (2, "EARLIEST_FINISH")


class DeviceType(OptionEnum):
    """``device.Type`` (``DEVICE_TYPE``): whether a device shares the host's memory.

    The CPU answers ``INTEGRATED``, as OpenVINO's CPU plugin does.
    """

    INTEGRATED = (0, "integrated")
    DISCRETE = (1, "discrete")


DeviceType.__name__ = DeviceType.__qualname__ = "Type"


class Capability(enum.StrEnum):
    """``device.Capability``: the names ``OPTIMIZATION_CAPABILITIES`` lists (strings, as in OpenVINO)."""

    FP32 = "FP32"
    BF16 = "BF16"
    FP16 = "FP16"
    INT8 = "INT8"
    INT16 = "INT16"
    BIN = "BIN"
    WINOGRAD = "WINOGRAD"
    EXPORT_IMPORT = "EXPORT_IMPORT"


class Level(OptionEnum):
    """``log.Level`` (``LOG_LEVEL``): the level of inferplex's Python logger."""

    NO = (-1, "LOG_NONE")
    ERR = (0, "LOG_ERROR")
    WARNING = (1, "LOG_WARNING")
    INFO = (2, "LOG_INFO")
    DEBUG = (3, "LOG_DEBUG")
    TRACE = (4, "LOG_TRACE")


class Num:
    """``streams.Num``: a number of streams, ``Num(4)``, or ``Num.AUTO`` / ``Num.NUMA``.

    As in OpenVINO, ``to_integer()`` is -1 for AUTO and -2 for NUMA.  A ``Num``
    compares equal to what inferplex stores for ``NUM_STREAMS``: the string
    ``"AUTO"`` or the int (``Num(4) == 4``, ``Num.AUTO == "AUTO"``).
    """

    AUTO: ClassVar[Num]
    NUMA: ClassVar[Num]
    _NAMES: ClassVar[dict[int, str]] = {-1: "AUTO", -2: "NUMA"}

    __slots__ = ("_value",)
    _value: int

    def __init__(self, value: Any = -1) -> None:
        if isinstance(value, Num):
            value = value._value
        if isinstance(value, str) and value.strip().upper() in ("AUTO", "NUMA"):
            value = {"AUTO": -1, "NUMA": -2}[value.strip().upper()]
        if isinstance(value, bool) or not isinstance(value, int) or (value < 1 and value not in self._NAMES):
            from inferplex.errors import PropertyError

            raise PropertyError(f"streams.Num({value!r}): accepted: an integer >= 1, or "
                                "Num.AUTO / Num.NUMA ('AUTO', 'NUMA')")
        self._value = int(value)

    def to_integer(self) -> int:
        """The number of streams; -1 for AUTO, -2 for NUMA."""
        return self._value

    @property
    def name(self) -> str:
        """``"AUTO"``, ``"NUMA"`` or the number as text."""
        return self._NAMES.get(self._value, str(self._value))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Num):
            return other._value == self._value
        if isinstance(other, str):
            return other.strip().upper() == self.name
        if isinstance(other, int) and not isinstance(other, bool):
            return other == self._value and other > 0
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self.name) if self._value < 0 else hash(self._value)

    def __repr__(self) -> str:
        return f"<Num: {self.name}>"

    def __str__(self) -> str:
        return self.name


Num.AUTO = Num(-1)
Num.NUMA = Num(-2)
