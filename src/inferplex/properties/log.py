"""``ov.properties.log``: OpenVINO's log level, which sets inferplex's Python logger
(:mod:`inferplex.config.log_level`)."""

from __future__ import annotations

from inferplex.properties._enums import Level
from inferplex.properties._typed import Property

__all__ = ["Level", "level"]

level = Property("LOG_LEVEL")
"""OpenVINO's log level (``log.Level``), set on the Core or any device."""
