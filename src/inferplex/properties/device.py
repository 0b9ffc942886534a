"""``ov.properties.device``: device lists, per-device settings and device facts.

(OpenVINO's ``openvino.properties.device``.)  ``priorities`` and ``properties``
configure the virtual devices (HETERO, MULTI, AUTO); the others read facts of a
device with ``core.get_property(device, key)``.
"""

from __future__ import annotations

from typing import Any

from inferplex.errors import PropertyTypeError
from inferplex.properties._enums import Capability, DeviceType
from inferplex.properties._typed import Property

Type = DeviceType
"""``device.Type``: INTEGRATED or DISCRETE."""

__all__ = ["Capability", "Type", "architecture", "capabilities", "full_name", "gops", "id", "luid",
           "priorities", "properties", "thermal", "type", "uuid"]


def _device_list(values: tuple[Any, ...]) -> str:
    """``priorities("GPU", "CPU")`` and ``priorities("GPU,CPU")`` both make ``"GPU,CPU,"``: OpenVINO's
    pair ends the list with a comma, which the MULTI_DEVICE_PRIORITIES parser takes."""
    for value in values:
        if not isinstance(value, str):
            raise PropertyTypeError(f"Incorrect passed value: {value} , expected string values. "
                                    "device.priorities takes device names: priorities('GPU', 'CPU')")
    return "".join(f"{value}," for value in values if value)


priorities = Property("MULTI_DEVICE_PRIORITIES", collect=_device_list, as_collected=True)
"""The devices of a virtual device, highest priority first: ``priorities("GPU", "CPU")``."""
properties = Property("DEVICE_PROPERTIES")
"""Per-device settings for a virtual device's members: ``properties({"CPU": {...}, "GPU": {...}})``."""
full_name = Property("FULL_DEVICE_NAME", read_only=True)
"""The device's name as its vendor gives it (read-only)."""
id = Property("DEVICE_ID", kind=(str,))
"""The device's index within its family (``"1"`` for ``GPU.1``; ``""`` for the CPU).  ``id("1")``
makes a pair, as OpenVINO's; a device refuses it where it is set (name the device, ``GPU.1``)."""
type = Property("DEVICE_TYPE", read_only=True)
""":class:`Type` INTEGRATED or DISCRETE (read-only)."""
capabilities = Property("OPTIMIZATION_CAPABILITIES", read_only=True)
"""The precisions the device computes in, as :class:`Capability` names (read-only)."""

# Device facts OpenVINO's plugins may report; inferplex's plugins answer those they know.
architecture = Property("DEVICE_ARCHITECTURE", read_only=True)
gops = Property("DEVICE_GOPS", read_only=True)
thermal = Property("DEVICE_THERMAL", read_only=True)
uuid = Property("DEVICE_UUID", read_only=True)
luid = Property("DEVICE_LUID", read_only=True)
