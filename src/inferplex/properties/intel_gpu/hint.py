"""``ov.properties.intel_gpu.hint``: OpenVINO's GPU hints (``openvino.properties.intel_gpu.hint``).

``queue_throttle`` is inferplex's GPU's ``GPU_QUEUE_THROTTLE`` (LOW: a worker waits
for its stream asleep; MEDIUM, the default, and HIGH: it spins).
"""

from __future__ import annotations

from inferplex.properties._enums import Priority
from inferplex.properties._typed import Property

__all__ = ["ThrottleLevel", "available_device_mem", "enable_large_allocations", "enable_lora_operation",
           "host_task_priority", "queue_priority", "queue_throttle"]


class ThrottleLevel:
    """``ThrottleLevel``: OpenVINO's name for :class:`~inferplex.properties.hint.Priority`'s levels
    (``DEFAULT`` is ``MEDIUM``)."""

    LOW = Priority.LOW
    MEDIUM = Priority.MEDIUM
    HIGH = Priority.HIGH
    DEFAULT = Priority.DEFAULT


queue_throttle = Property("GPU_QUEUE_THROTTLE")
"""How a GPU worker waits for its stream (a :class:`ThrottleLevel`)."""

queue_priority = Property("GPU_QUEUE_PRIORITY")
"""OpenVINO's GPU plugin: its command queue's priority (a ``Priority``)."""

host_task_priority = Property("GPU_HOST_TASK_PRIORITY")
"""OpenVINO's GPU plugin: its host threads' priority (a ``Priority``)."""

available_device_mem = Property("AVAILABLE_DEVICE_MEM_SIZE")
"""OpenVINO's GPU plugin: the device memory a compile may use, in bytes."""

enable_large_allocations = Property("GPU_ENABLE_LARGE_ALLOCATIONS")
"""OpenVINO's GPU plugin: allow allocations larger than the device's single-allocation limit."""

enable_lora_operation = Property("GPU_ENABLE_LORA_OPERATION")
"""OpenVINO's GPU plugin: fuse LoRA adapters' operations."""
