"""The process's OpenVINO Core, and how an inferplex CPU config maps onto OpenVINO's CPU plugin.

The CPU device's OpenVINO engine (:mod:`.openvino_engine`) compiles through the one Core made
here (OpenVINO's CPU plugin keeps one thread pool for every model of a Core); the CPU plugin
reads facts about the CPU (instruction sets, default precision) through it too.  Which
inferplex keys reach OpenVINO, and as what, is :func:`openvino_config`; how many requests a
compiled model keeps is :func:`engine_requests`.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from inferplex._openvino_package import openvino_package

if TYPE_CHECKING:
    import openvino

__all__ = [
    "PASSED_AS_IS",
    "REPORTED",
    "X86_DEFAULTS",
    "available",
    "canonical",
    "core",
    "cpu_fact",
    "cpu_setting",
    "default_precision",
    "engine_requests",
    "openvino_config",
    "openvino_version",
    "optimal_requests",
    "precision_name",
    "threading_facts",
]

_PASSED_ON = ("PERFORMANCE_HINT_NUM_REQUESTS", "INFERENCE_NUM_THREADS", "INFERENCE_PRECISION_HINT",
              "CACHE_DIR", "EXECUTION_MODE_HINT")
"""inferplex keys OpenVINO's CPU plugin takes with the same name and meaning."""

PASSED_AS_IS = ("ENABLE_CPU_RESERVATION", "CPU_SPARSE_WEIGHTS_DECOMPRESSION_RATE", "ENABLE_TENSOR_PARALLEL",
                "TBB_PARTITIONER", "DYNAMIC_QUANTIZATION_GROUP_SIZE", "KV_CACHE_PRECISION",
                "KEY_CACHE_PRECISION", "VALUE_CACHE_PRECISION", "KEY_CACHE_GROUP_SIZE",
                "VALUE_CACHE_GROUP_SIZE", "ENABLE_WEIGHTLESS", "WEIGHTS_PATH", "MODEL_DISTRIBUTION_POLICY")
"""OpenVINO CPU-plugin keys the CPU device takes with OpenVINO's values (its parsers check them),
given to OpenVINO's compile as set."""

X86_DEFAULTS: dict[str, Any] = {
    "ENABLE_CPU_RESERVATION": False, "CPU_SPARSE_WEIGHTS_DECOMPRESSION_RATE": 1.0,
    "ENABLE_TENSOR_PARALLEL": False, "TBB_PARTITIONER": "NONE", "DYNAMIC_QUANTIZATION_GROUP_SIZE": 32,
    "KV_CACHE_PRECISION": "u8", "KEY_CACHE_PRECISION": "u8", "VALUE_CACHE_PRECISION": "u8",
    "KEY_CACHE_GROUP_SIZE": 0, "VALUE_CACHE_GROUP_SIZE": 0, "ENABLE_WEIGHTLESS": False,
    "MODEL_DISTRIBUTION_POLICY": "",
}
"""OpenVINO CPU plugin's x86 defaults of :data:`PASSED_AS_IS` (WEIGHTS_PATH aside): what the CPU
reads for them never set where ONNX Runtime is the engine; with the OpenVINO engine it reads
OpenVINO's own (:func:`cpu_setting`)."""

REPORTED = ("ENABLE_CPU_RESERVATION", "CPU_SPARSE_WEIGHTS_DECOMPRESSION_RATE", "ENABLE_TENSOR_PARALLEL",
            "TBB_PARTITIONER", "DYNAMIC_QUANTIZATION_GROUP_SIZE", "KV_CACHE_PRECISION", "KEY_CACHE_PRECISION",
            "VALUE_CACHE_PRECISION", "KEY_CACHE_GROUP_SIZE", "VALUE_CACHE_GROUP_SIZE",
            "MODEL_DISTRIBUTION_POLICY", "EXECUTION_MODE_HINT", "CPU_DENORMALS_OPTIMIZATION", "LOG_LEVEL")
"""Keys a compiled model on OpenVINO's engine reads from OpenVINO's compiled model (what took effect)."""


@lru_cache(maxsize=1)
def available() -> bool:
    """Whether the ``openvino`` package imports here."""
    try:
        openvino_package()
    except ImportError:
        return False
    return True


_core_lock = threading.Lock()
_cores: list[openvino.Core] = []


def core() -> openvino.Core:
    """The process's one OpenVINO Core (its CPU plugin keeps one thread pool for every model)."""
    with _core_lock:
        if not _cores:
            _cores.append(openvino_package().Core())
        return _cores[0]


def openvino_version() -> str:
    return f"openvino {openvino_package().__version__.split('-')[0]}"


def precision_name(value: Any) -> str:
    """``"f32"``, ``"bf16"``, ``"f16"`` for an ``openvino.Type`` (or its text)."""
    name = value.get_type_name() if hasattr(value, "get_type_name") else str(value)
    return str(name)


def cpu_fact(key: str) -> Any:
    """A fact OpenVINO's CPU plugin gives about this CPU (``OPTIMIZATION_CAPABILITIES``, ...)."""
    return core().get_property("CPU", key)


def canonical(value: Any) -> Any:
    """An OpenVINO property value in the form the CPU's parsers store: an element type's name
    (``"u8"``), an enum's member name (``"STATIC"``; OpenVINO's unnamed TBB partitioner 0 is
    ``"NONE"``), a set of policies as their names comma-joined; numbers and booleans as they are."""
    if hasattr(value, "get_type_name"):
        return precision_name(value)
    if isinstance(value, (set, frozenset)):
        return ",".join(sorted(str(canonical(v)) for v in value))
    if isinstance(value, (bool, int, float, str)):
        return value
    name = str(value).rsplit(".", 1)[-1]
    return "NONE" if name == "???" else name


def cpu_setting(key: str) -> Any:
    """OpenVINO CPU plugin's value of a setting never set (:func:`canonical`)."""
    return canonical(cpu_fact(key))


def default_precision() -> str:
    """The precision OpenVINO's CPU plugin computes in when none is asked (bf16 on AMX/AVX512_BF16 CPUs)."""
    return precision_name(core().get_property("CPU", "INFERENCE_PRECISION_HINT"))


def openvino_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """OpenVINO CPU-plugin properties for an inferplex CPU config (see the module docstring)."""
    ov_config: dict[str, Any] = {"PERFORMANCE_HINT": str(config.get("PERFORMANCE_HINT", "LATENCY"))}
    for key in _PASSED_ON:
        if config.get(key):  # 0 threads / 0 requests mean "OpenVINO decides"
            ov_config[key] = config[key]
    if "NUM_STREAMS" in config:  # AUTO included: OpenVINO's THROUGHPUT streams, whatever the hint
        streams = config["NUM_STREAMS"]
        ov_config["NUM_STREAMS"] = "AUTO" if streams == "AUTO" else int(streams)
    if config.get("ENABLE_PROFILING"):
        ov_config["PERF_COUNT"] = True
    if config.get("THREAD_SPINNING") is False:
        ov_config["ENABLE_CPU_PINNING"] = False
    for key in ("ENABLE_CPU_PINNING", "CPU_DENORMALS_OPTIMIZATION", "ENABLE_HYPER_THREADING"):
        if key in config:
            ov_config[key] = bool(config[key])
    if "SCHEDULING_CORE_TYPE" in config:
        ov_config["SCHEDULING_CORE_TYPE"] = str(config["SCHEDULING_CORE_TYPE"])
    for key in PASSED_AS_IS:
        if key in config:
            ov_config[key] = config[key]
    return ov_config


def engine_requests(hint: str, config: Mapping[str, Any], openvino_requests: int) -> int:
    """The requests this engine keeps for a compiled model whose OpenVINO
    OPTIMAL_NUMBER_OF_INFER_REQUESTS is ``openvino_requests`` (one per stream): twice that under
    the THROUGHPUT hint (``hint`` as OpenVINO's compiled model reads it), at most
    ``PERFORMANCE_HINT_NUM_REQUESTS`` where that is set; OpenVINO's number otherwise.

    A request through this runtime ends on the device's worker thread and its callback runs on
    the completion thread (never on a device's thread), so between one run's end and the next
    run's start of a closed loop lie two more thread hand-offs than in OpenVINO's AsyncInferQueue.
    With one request per stream a small model's stream idles through them; a second request per
    stream, queued in OpenVINO behind the first, keeps it busy (bench/cpu_engines.py --throughput
    measures both).
    """
    if hint != "THROUGHPUT":
        return openvino_requests
    cap = int(config.get("PERFORMANCE_HINT_NUM_REQUESTS") or 0)  # 0: no cap
    doubled = 2 * openvino_requests
    return max(openvino_requests, min(doubled, cap)) if cap else doubled


_optimal_lock = threading.Lock()
_optimal: dict[tuple[tuple[str, str], ...], int] = {}


def optimal_requests(config: Mapping[str, Any]) -> int:
    """OPTIMAL_NUMBER_OF_INFER_REQUESTS that OpenVINO gives a small model under ``config``.

    OpenVINO says it only for a compiled model; a one-op model compiled once per
    distinct config answers before the real model is compiled.
    """
    ov_config = openvino_config(config)
    for left_out in ("CACHE_DIR", *PASSED_AS_IS):  # none of them changes the streams of one socket
        ov_config.pop(left_out, None)
    key = tuple(sorted((k, str(v)) for k, v in ov_config.items()))
    with _optimal_lock:
        if key not in _optimal:
            ov = openvino_package()
            parameter = ov.opset13.parameter([1, 64], ov.Type.f32)
            probe = ov.Model([ov.opset13.relu(parameter)], [parameter], "probe")
            compiled = core().compile_model(probe, "CPU", ov_config)
            _optimal[key] = engine_requests(threading_facts(compiled)["PERFORMANCE_HINT"], config,
                                            int(compiled.get_property("OPTIMAL_NUMBER_OF_INFER_REQUESTS")))
        return _optimal[key]


def threading_facts(compiled: openvino.CompiledModel) -> dict[str, Any]:
    """What OpenVINO's compiled model says of its hint and threads, as a CPU program reads it back
    (the hint is OpenVINO's: ``NUM_STREAMS=AUTO`` makes it THROUGHPUT)."""
    return {
        "PERFORMANCE_HINT": str(compiled.get_property("PERFORMANCE_HINT")).rsplit(".", 1)[-1],
        "PERFORMANCE_HINT_NUM_REQUESTS": int(compiled.get_property("PERFORMANCE_HINT_NUM_REQUESTS")),
        "ENABLE_CPU_PINNING": bool(compiled.get_property("ENABLE_CPU_PINNING")),
        "ENABLE_HYPER_THREADING": bool(compiled.get_property("ENABLE_HYPER_THREADING")),
        "SCHEDULING_CORE_TYPE": str(compiled.get_property("SCHEDULING_CORE_TYPE")).rsplit(".", 1)[-1],
    }
