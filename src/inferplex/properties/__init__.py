"""OpenVINO's typed property mirror (``ov.properties``): callable keys, enums, typed read-back.

Each property is a callable key string, as in ``openvino.properties``::

    import inferplex as ov
    import inferplex.properties as props
    import inferplex.properties.hint as hints

    props.enable_profiling()                                   # "PERF_COUNT"
    core.compile_model(model, "CPU", {hints.performance_mode: hints.PerformanceMode.THROUGHPUT})
    core.set_property("CPU", props.streams.num(2))             # one (key, value) pair
    core.get_property("CPU", hints.performance_mode())         # PerformanceMode.THROUGHPUT

Submodules: :mod:`.hint`, :mod:`.streams`, :mod:`.device`, :mod:`.intel_auto`,
:mod:`.intel_cpu`, :mod:`.intel_gpu` (and its ``hint``), :mod:`.intel_npu`,
:mod:`.log`.  The keys, their accepted values and who takes
them are in :mod:`inferplex.config.schema`; this package only names them.
Values read with ``get_property`` come back typed as OpenVINO returns them
(see :func:`inferplex.properties._typed.typed_value`).
"""

from __future__ import annotations

import os

import numpy as np

from inferplex.properties import device, hint, intel_auto, intel_cpu, intel_gpu, intel_npu, log, streams
from inferplex.properties._enums import CacheMode, WorkloadType
from inferplex.properties._typed import Property

__all__ = ["CacheMode", "Property", "WorkloadType", "auto_batch_timeout", "available_devices",
           "cache_dir", "cache_mode", "compilation_num_threads", "device", "enable_mmap",
           "enable_profiling", "enable_weightless", "execution_devices", "force_tbb_terminate", "hint",
           "inference_num_threads", "intel_auto", "intel_cpu", "intel_gpu", "intel_npu",
           "key_cache_group_size",
           "key_cache_precision", "loaded_from_cache", "log", "max_batch_size", "model_name",
           "num_streams", "optimal_batch_size", "optimal_number_of_infer_requests",
           "range_for_async_infer_requests", "range_for_streams", "streams", "supported_properties",
           "value_cache_group_size", "value_cache_precision", "weights_path"]

enable_profiling = Property("PERF_COUNT")
"""Whether requests record per-op counters (``get_profiling_info``); inferplex's ``ENABLE_PROFILING``."""
cache_dir = Property("CACHE_DIR", kind=(str, os.PathLike))
"""OpenVINO's compiled-model cache folder (see the schema for whether inferplex takes it)."""
inference_num_threads = Property("INFERENCE_NUM_THREADS", kind=(int, np.integer))
"""Threads the CPU computes with (0: all cores)."""
num_streams = Property("NUM_STREAMS")
"""The same key as :data:`streams.num`."""
supported_properties = Property("SUPPORTED_PROPERTIES", read_only=True)
"""``{key: "RO" | "RW"}`` of a device or compiled model."""
optimal_number_of_infer_requests = Property("OPTIMAL_NUMBER_OF_INFER_REQUESTS", read_only=True)
"""Requests worth keeping in flight (an int)."""
execution_devices = Property("EXECUTION_DEVICES", read_only=True)
"""The devices a compiled model runs on (a list)."""
available_devices = Property("AVAILABLE_DEVICES", read_only=True)
"""The devices of a family (``core.get_property("GPU", available_devices)``)."""
model_name = Property("NETWORK_NAME", read_only=True)
"""The compiled model's name (OpenVINO's key is ``NETWORK_NAME``)."""
range_for_streams = Property("RANGE_FOR_STREAMS", read_only=True)
"""``(min, max)`` streams a device runs."""
range_for_async_infer_requests = Property("RANGE_FOR_ASYNC_INFER_REQUESTS", read_only=True)
"""``(min, max, step)`` of requests a device keeps in flight."""
loaded_from_cache = Property("LOADED_FROM_CACHE", read_only=True)
"""Whether a compiled model came from the model cache (False unless caching applies)."""

# OpenVINO's LLM-cache and weights keys, which the CPU takes (see inferplex.devices.cpu.plugin).
weights_path = Property("WEIGHTS_PATH", kind=(str, os.PathLike))
key_cache_group_size = Property("KEY_CACHE_GROUP_SIZE", kind=(int, np.integer))
value_cache_group_size = Property("VALUE_CACHE_GROUP_SIZE", kind=(int, np.integer))
key_cache_precision = Property("KEY_CACHE_PRECISION")
value_cache_precision = Property("VALUE_CACHE_PRECISION")
enable_weightless = Property("ENABLE_WEIGHTLESS")

# The Core's options (Core.set_property, or a compile's config; see inferplex.config.schema) and
# OpenVINO's names for features inferplex does not have (auto-batching's sizes, compile-time
# options of its C++ plugins): named so that programs import.
optimal_batch_size = Property("OPTIMAL_BATCH_SIZE", read_only=True)
max_batch_size = Property("MAX_BATCH_SIZE", read_only=True)
cache_mode = Property("CACHE_MODE")
auto_batch_timeout = Property("AUTO_BATCH_TIMEOUT")
compilation_num_threads = Property("COMPILATION_NUM_THREADS", kind=(int, np.integer))
force_tbb_terminate = Property("FORCE_TBB_TERMINATE")
enable_mmap = Property("ENABLE_MMAP")
