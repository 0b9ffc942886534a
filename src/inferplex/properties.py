"""OpenVINO's typed property mirror (``ov.properties``): names for the string keys.

The keys themselves, their accepted values and who takes them are in
:mod:`inferplex.config.schema`.
"""

from __future__ import annotations

__all__ = ["hint"]


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
