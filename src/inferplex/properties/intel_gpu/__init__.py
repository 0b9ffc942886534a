"""``ov.properties.intel_gpu``: OpenVINO's GPU keys (``openvino.properties.intel_gpu``).

inferplex's GPU device (NVIDIA GPUs through torch) answers the read-only facts
(``core.get_property("GPU", intel_gpu.device_total_mem_size)``) and takes
``hint.queue_throttle``; the other keys are named so that OpenVINO programs
import, and a device that does not take one says so when it is set.
"""

from __future__ import annotations

from inferplex.properties._typed import Property
from inferplex.properties.intel_gpu import hint

__all__ = ["CapabilityGPU", "MemoryType", "device_max_alloc_mem_size", "device_total_mem_size",
           "disable_winograd_convolution", "enable_loop_unrolling", "execution_units_count", "hint",
           "memory_statistics", "uarch_version"]

device_total_mem_size = Property("GPU_DEVICE_TOTAL_MEM_SIZE", read_only=True)
"""The GPU's memory in bytes."""

device_max_alloc_mem_size = Property("GPU_DEVICE_MAX_ALLOC_MEM_SIZE", read_only=True)
"""The largest single allocation in bytes (on NVIDIA GPUs: the memory the GPU has)."""

uarch_version = Property("GPU_UARCH_VERSION", read_only=True)
"""The GPU's architecture version (``"9.0"``: CUDA's compute capability on NVIDIA GPUs)."""

execution_units_count = Property("GPU_EXECUTION_UNITS_COUNT", read_only=True)
"""How many execution units the GPU has (streaming multiprocessors on NVIDIA GPUs)."""

memory_statistics = Property("GPU_MEMORY_STATISTICS", read_only=True)
"""Bytes the device's allocator holds, by kind."""

enable_loop_unrolling = Property("GPU_ENABLE_LOOP_UNROLLING")
"""OpenVINO's GPU plugin: unroll Loop and TensorIterator bodies."""

disable_winograd_convolution = Property("GPU_DISABLE_WINOGRAD_CONVOLUTION")
"""OpenVINO's GPU plugin: do not run convolutions as Winograd transforms."""


class MemoryType:
    """``intel_gpu.MemoryType``: the remote tensor memory kinds of OpenVINO's GPU plugin."""

    surface = "GPU_SURFACE"
    buffer = "GPU_BUFFER"


class CapabilityGPU:
    """``intel_gpu.CapabilityGPU``: capabilities OpenVINO's GPU plugin lists."""

    HW_MATMUL = "GPU_HW_MATMUL"
    USM_MEMORY = "GPU_USM_MEMORY"
