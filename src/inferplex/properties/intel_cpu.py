"""``ov.properties.intel_cpu``: the CPU keys inferplex takes (``openvino.properties.intel_cpu``)."""

from __future__ import annotations

from inferplex.config import values
from inferplex.properties._enums import TbbPartitioner
from inferplex.properties._typed import Property

__all__ = ["TbbPartitioner", "denormals_optimization", "sparse_weights_decompression_rate", "tbb_partitioner"]

denormals_optimization = Property("CPU_DENORMALS_OPTIMIZATION", parser=values.boolean)
"""Whether the CPU flushes denormal floats to zero (faster on some models, results may differ
in the smallest values); both CPU engines apply it."""

sparse_weights_decompression_rate = Property("CPU_SPARSE_WEIGHTS_DECOMPRESSION_RATE")
"""The sparsity (0.0 to 1.0) from which OpenVINO's CPU engine decompresses sparse weights as it runs."""

tbb_partitioner = Property("TBB_PARTITIONER")
"""How OpenVINO's CPU engine splits work among its threads (:class:`TbbPartitioner`)."""
