"""What the CPU device's programs share, whichever engine compiled them.

A CPU program answers the same properties on both engines (``ENGINE`` says
which one runs it), takes numpy arrays and other devices' tensors, and after
``close()`` refuses to run.  Each engine's program fills in the engine-specific
part: :class:`~inferplex.devices.cpu.openvino_engine.OpenVinoProgram` and
:class:`~inferplex.devices.cpu.onnxruntime_engine.OnnxRuntimeProgram`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from inferplex.config.values import OptionEnum
from inferplex.devices.base import DeviceProgram
from inferplex.devices.cpu.openvino_core import X86_DEFAULTS

__all__ = ["ENGINES", "CpuProgram", "to_numpy"]

ENGINES = ("OPENVINO", "ONNXRUNTIME")
"""Values of the CPU's ``ENGINE`` property."""

_READ_DEFAULTS = {"PERFORMANCE_HINT": "LATENCY", "ENABLE_PROFILING": False,
                  "EXECUTION_MODE_HINT": "PERFORMANCE", "MODEL_PRIORITY": "MEDIUM",
                  "CPU_DENORMALS_OPTIMIZATION": False, **X86_DEFAULTS}
"""What a CPU program reports for these keys when its config does not set them (the OpenVINO
engine reads most from OpenVINO's compiled model instead)."""


_AS_TEXT: dict[str, Any] = {
    "PERFORMANCE_HINT": lambda value: value.text if isinstance(value, OptionEnum) else str(value),
    "PERFORMANCE_HINT_NUM_REQUESTS": lambda value: str(int(value)),
    "PERF_COUNT": lambda value: "YES" if value else "NO",
}
"""The keys :meth:`CpuProgram.presented_property` answers as text, and how."""


class CpuProgram(DeviceProgram):
    """A model compiled by one of the CPU engines."""

    tensor_kind = "numpy"
    engine = ""
    """``"OPENVINO"`` or ``"ONNXRUNTIME"``: what ``get_property("ENGINE")`` reads."""

    def __init__(self, config: Mapping[str, Any], spinning: bool, low_priority: bool,
                 fallback_reason: str = "") -> None:
        self.device = "CPU"
        self._config = dict(config)
        self._spinning = spinning
        self._low_priority = low_priority
        self._fallback_reason = fallback_reason
        self._closed = False

    def _own_property(self, key: str) -> Any:
        """The engine's answer for ``key``; raise KeyError where it has none."""
        raise KeyError(key)

    def _own_property_names(self) -> tuple[str, ...]:
        return ()

    def get_property(self, key: str) -> Any:
        if key == "ENGINE":
            return self.engine
        if key == "ENGINE_FALLBACK_REASON":
            return self._fallback_reason
        if key == "THREAD_SPINNING":
            return self._spinning
        if key == "THREAD_PRIORITY":
            return "LOW" if self._low_priority else "NORMAL"
        if key == "EXECUTION_DEVICES":
            return ["CPU"]
        try:
            return self._own_property(key)
        except KeyError:
            pass
        if key in self._config:
            return self._config[key]
        if key in _READ_DEFAULTS:
            return _READ_DEFAULTS[key]
        raise KeyError(key)

    def property_names(self) -> tuple[str, ...]:
        own = ("ENGINE", "ENGINE_FALLBACK_REASON", "THREAD_SPINNING", "THREAD_PRIORITY",
               "EXECUTION_DEVICES", *self._own_property_names())
        return tuple(dict.fromkeys((*own, *self._config, *_READ_DEFAULTS)))

    def presented_property(self, key: str, value: Any) -> Any:
        """OpenVINO's CPU compiled models answer a few hints as text where the device answers them
        typed: ``'THROUGHPUT'``, ``'0'``, and ``'YES'``/``'NO'`` for ``PERF_COUNT`` (the
        ``ENABLE_PROFILING`` spelling reads a bool)."""
        present = _AS_TEXT.get(str(key).strip().upper())
        return value if present is None or value is None else present(value)

    def close(self) -> None:
        """Release the engine's sessions or compiled model; later runs raise InferenceError."""
        self._closed = True
        self._release()

    def _release(self) -> None:
        """Drop the engine's objects (called by ``close``, maybe more than once)."""


def to_numpy(value: Any) -> Any:
    """A numpy array (or a list of them, for sequence inputs) for an input value of any kind."""
    if isinstance(value, np.ndarray) or value is None:
        return value
    if isinstance(value, (list, tuple)):  # a sequence input: ONNX Runtime takes a list of arrays
        return [to_numpy(item) for item in value]
    if type(value).__module__.startswith("torch"):
        return value.detach().cpu().numpy()
    return np.asarray(value)
