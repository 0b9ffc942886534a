"""MULTI's and AUTO's scheduling settings, read once from the compile config."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from inferplex.config.schema import normalize_property

__all__ = ["DEFAULT_POLICY", "HOST_GAIN_KEY", "QUARANTINE_KEY", "TIMEOUT_KEY", "SchedulerOptions",
           "parse_seconds"]

DEFAULT_POLICY = "DEVICE_PRIORITY"
"""SCHEDULE_POLICY when none is given (bench/multi_auto.py compares the three policies)."""

TIMEOUT_KEY = "MULTI_REQUEST_TIMEOUT"
"""Seconds one attempt of a request may run on a device before it counts as failed."""
QUARANTINE_KEY = "MULTI_QUARANTINE_TIME"
"""Seconds a device that failed a request is left out (doubling on repeated failures)."""
HOST_GAIN_KEY = "MULTI_CHECK_HOST_GAIN"
"""Whether to hold the host device back while it costs the accelerators more than it adds."""


def parse_seconds(key: str, value: Any) -> float | None:
    """Seconds from ``2``, ``0.5``, ``"500ms"`` or ``"2s"``; ``None``/``0`` mean no limit."""
    seconds: float | None = normalize_property(key, value)[1]
    return seconds


@dataclass(frozen=True)
class SchedulerOptions:
    """How a MULTI or AUTO dispatcher schedules, read from the compile config."""

    policy: str = DEFAULT_POLICY
    """``SCHEDULE_POLICY``: DEVICE_PRIORITY, ROUND_ROBIN or EARLIEST_FINISH."""
    runtime_fallback: bool = True
    """``ENABLE_RUNTIME_FALLBACK``: re-run a failed request on another device."""
    request_timeout: float | None = None
    """``MULTI_REQUEST_TIMEOUT``: seconds per attempt; ``None`` waits for ever."""
    quarantine_time: float = 5.0
    """``MULTI_QUARANTINE_TIME``: first cool-down of a failing device, in seconds."""
    exclusive: bool = False
    """``EXCLUSIVE_ASYNC_REQUESTS``: one request at a time, across compiled models."""
    check_host_gain: bool = True
    """``MULTI_CHECK_HOST_GAIN``: see :mod:`inferplex.scheduling.host_gain`."""
    hint: str = "CUMULATIVE_THROUGHPUT"
    """``PERFORMANCE_HINT`` of the virtual device (only reported: members compile with their own)."""

    @classmethod
    def from_config(cls, config: Mapping[str, Any],
                    default_hint: str = "CUMULATIVE_THROUGHPUT") -> SchedulerOptions:
        """``default_hint``: what the virtual device does without a PERFORMANCE_HINT (MULTI: spread
        requests over every device; AUTO: LATENCY on one device)."""
        quarantine = parse_seconds(QUARANTINE_KEY, config.get(QUARANTINE_KEY, cls.quarantine_time))
        return cls(
            hint=str(config.get("PERFORMANCE_HINT", default_hint)),
            policy=str(config.get("SCHEDULE_POLICY", DEFAULT_POLICY)).upper(),
            runtime_fallback=bool(config.get("ENABLE_RUNTIME_FALLBACK", True)),
            request_timeout=parse_seconds(TIMEOUT_KEY, config.get(TIMEOUT_KEY)),
            quarantine_time=quarantine or 0.0,
            exclusive=bool(config.get("EXCLUSIVE_ASYNC_REQUESTS", False)),
            check_host_gain=bool(config.get(HOST_GAIN_KEY, True)),
        )
