"""``ov.properties.intel_auto``: MULTI's and AUTO's own settings (``openvino.properties.intel_auto``)."""

from __future__ import annotations

from inferplex.properties._enums import SchedulePolicy
from inferplex.properties._typed import Property

__all__ = ["SchedulePolicy", "device_bind_buffer", "enable_runtime_fallback", "enable_startup_fallback",
           "schedule_policy"]

schedule_policy = Property("SCHEDULE_POLICY")
""":class:`SchedulePolicy`: which device takes the next request under MULTI and CUMULATIVE_THROUGHPUT."""
enable_startup_fallback = Property("ENABLE_STARTUP_FALLBACK")
"""Whether AUTO serves the first requests on the CPU while the chosen device compiles."""
enable_runtime_fallback = Property("ENABLE_RUNTIME_FALLBACK")
"""Whether a request that fails on a device is run again on the next one."""

device_bind_buffer = Property("DEVICE_BIND_BUFFER")
"""OpenVINO AUTO's remote-buffer binding; named so programs import, a value is refused."""
