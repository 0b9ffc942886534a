"""``ov.properties.intel_cpu``: the CPU keys inferplex takes (``openvino.properties.intel_cpu``)."""

from __future__ import annotations

from inferplex.config import values
from inferplex.properties._typed import Property

__all__ = ["denormals_optimization", "sparse_weights_decompression_rate"]

denormals_optimization = Property("CPU_DENORMALS_OPTIMIZATION", parser=values.boolean)
"""Whether the CPU flushes denormal floats to zero (faster on some models, results may differ
in the smallest values); both CPU engines apply it."""

sparse_weights_decompression_rate = Property("CPU_SPARSE_WEIGHTS_DECOMPRESSION_RATE")
"""OpenVINO CPU plugin's sparse-weights option; named so programs import, a value is refused."""
