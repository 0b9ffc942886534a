"""``ov.properties.intel_npu``: OpenVINO's NPU keys (``openvino.properties.intel_npu``).

inferplex has no NPU device: the keys are named so that OpenVINO programs that
mention them import; setting one on a device that does not take it is an error
naming the keys the device takes.
"""

from __future__ import annotations

from inferplex.config.values import OptionEnum
from inferplex.properties._typed import Property

__all__ = ["CompilerType", "bypass_umd_caching", "compilation_mode_params", "compiler_dynamic_quantization",
           "compiler_type", "compiler_version", "defer_weights_load", "device_alloc_mem_size",
           "device_total_mem_size", "disable_idle_memory_prunning", "driver_version", "enable_strides_for",
           "max_tiles", "platform", "qdq_optimization", "qdq_optimization_aggressive",
           "run_inferences_sequentially", "tiles", "turbo"]


class CompilerType(OptionEnum):
    """``intel_npu.CompilerType``: which compiler OpenVINO's NPU plugin uses."""

    PLUGIN = (0, "PLUGIN")
    DRIVER = (1, "DRIVER")
    PREFER_PLUGIN = (2, "PREFER_PLUGIN")


device_alloc_mem_size = Property("NPU_DEVICE_ALLOC_MEM_SIZE", read_only=True)
device_total_mem_size = Property("NPU_DEVICE_TOTAL_MEM_SIZE", read_only=True)
driver_version = Property("NPU_DRIVER_VERSION", read_only=True)
compiler_version = Property("NPU_COMPILER_VERSION", read_only=True)
compilation_mode_params = Property("NPU_COMPILATION_MODE_PARAMS")
compiler_type = Property("NPU_COMPILER_TYPE")
compiler_dynamic_quantization = Property("NPU_COMPILER_DYNAMIC_QUANTIZATION")
turbo = Property("NPU_TURBO")
tiles = Property("NPU_TILES")
max_tiles = Property("NPU_MAX_TILES", read_only=True)
platform = Property("NPU_PLATFORM")
bypass_umd_caching = Property("NPU_BYPASS_UMD_CACHING")
defer_weights_load = Property("NPU_DEFER_WEIGHTS_LOAD")
disable_idle_memory_prunning = Property("NPU_DISABLE_IDLE_MEMORY_PRUNING")
enable_strides_for = Property("NPU_ENABLE_STRIDES_FOR")
qdq_optimization = Property("NPU_QDQ_OPTIMIZATION")
qdq_optimization_aggressive = Property("NPU_QDQ_OPTIMIZATION_AGGRESSIVE")
run_inferences_sequentially = Property("NPU_RUN_INFERENCES_SEQUENTIALLY")
