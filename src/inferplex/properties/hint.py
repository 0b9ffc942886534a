"""``ov.properties.hint``: the hints a device tunes itself by (OpenVINO's ``openvino.properties.hint``).

    >>> import inferplex as ov
    >>> hint = ov.properties.hint
    >>> hint.performance_mode()
    'PERFORMANCE_HINT'
    >>> hint.performance_mode(hint.PerformanceMode.THROUGHPUT)
    ('PERFORMANCE_HINT', OVAny(<PerformanceMode.THROUGHPUT: 2>))
"""

from __future__ import annotations

import numpy as np

from inferplex.properties._enums import (
    ExecutionMode,
    ModelDistributionPolicy,
    PerformanceMode,
    Priority,
    SchedulingCoreType,
)
from inferplex.properties._typed import Property

__all__ = ["ExecutionMode", "ModelDistributionPolicy", "PerformanceMode", "Priority",
           "SchedulingCoreType", "activations_scale_factor", "allow_auto_batching", "compiled_blob",
           "dynamic_quantization_group_size", "enable_cpu_pinning", "enable_hyper_threading",
           "execution_mode", "inference_precision", "kv_cache_precision", "model",
           "model_distribution_policy", "model_priority", "num_requests", "performance_mode",
           "scheduling_core_type"]

performance_mode = Property("PERFORMANCE_HINT")
"""LATENCY, THROUGHPUT or CUMULATIVE_THROUGHPUT (:class:`PerformanceMode`)."""
num_requests = Property("PERFORMANCE_HINT_NUM_REQUESTS", kind=(int, np.integer))
"""Requests the application keeps in flight (0: the device decides); caps the throughput hint."""
inference_precision = Property("INFERENCE_PRECISION_HINT")
"""The precision to compute in: ``ov.Type.f32``, ``f16``, ``bf16`` (or their names); read as ``ov.Type``."""
execution_mode = Property("EXECUTION_MODE_HINT")
"""PERFORMANCE (the device may compute in lower precision) or ACCURACY (f32 unless
``inference_precision`` is set) (:class:`ExecutionMode`)."""
model_priority = Property("MODEL_PRIORITY")
"""LOW, MEDIUM or HIGH (:class:`Priority`); accepted and read back, see the schema for its effect."""
model_distribution_policy = Property("MODEL_DISTRIBUTION_POLICY",
                                     collect=lambda v: v[0] if len(v) == 1 else set(v),
                                     kind=(set, frozenset, list, tuple, str, ModelDistributionPolicy))
"""A set of :class:`ModelDistributionPolicy`: ``{PIPELINE_PARALLEL}`` on HETERO, or an empty set."""
enable_cpu_pinning = Property("ENABLE_CPU_PINNING")
"""Whether the CPU's inference threads are pinned to cores (OpenVINO's CPU engine)."""
enable_hyper_threading = Property("ENABLE_HYPER_THREADING")
"""Whether the CPU's inference may use both logical cores of a physical one (OpenVINO's CPU engine)."""
scheduling_core_type = Property("SCHEDULING_CORE_TYPE")
"""Which cores of a hybrid CPU run inference (:class:`SchedulingCoreType`; OpenVINO's CPU engine)."""

dynamic_quantization_group_size = Property("DYNAMIC_QUANTIZATION_GROUP_SIZE", kind=(int, np.integer))
"""The group size of OpenVINO's CPU engine's dynamic quantization of activations (0: off)."""
kv_cache_precision = Property("KV_CACHE_PRECISION")
"""The element type OpenVINO's CPU engine keeps an LLM's KV cache in (``ov.Type.u8`` by default)."""
allow_auto_batching = Property("ALLOW_AUTO_BATCHING")
"""Whether OpenVINO may batch requests on a device under THROUGHPUT; the CPU takes it and batches nothing."""

# OpenVINO's names for hints inferplex does not take (compiled blobs, the model pointer of
# auto-batching): named so that programs import; a value is refused.
activations_scale_factor = Property("ACTIVATIONS_SCALE_FACTOR")
compiled_blob = Property("COMPILED_BLOB")
model = Property("MODEL_PTR")
