"""``LOG_LEVEL``: OpenVINO's log level, applied to inferplex's Python logger.

inferplex logs through Python's ``logging`` (logger ``"inferplex"``).  Setting
``LOG_LEVEL`` on the Core or on any device sets that logger's level, for the
whole process as OpenVINO's is: ``LOG_NONE`` silences it, ``LOG_ERROR``,
``LOG_WARNING``, ``LOG_INFO`` map to the levels of those names, ``LOG_DEBUG`` and
``LOG_TRACE`` to ``DEBUG``.  A program's own ``logging`` configuration otherwise
decides, as for any library.
"""

from __future__ import annotations

import logging

__all__ = ["LEVELS", "apply_log_level"]

LEVELS = {"LOG_NONE": logging.CRITICAL + 10, "LOG_ERROR": logging.ERROR, "LOG_WARNING": logging.WARNING,
          "LOG_INFO": logging.INFO, "LOG_DEBUG": logging.DEBUG, "LOG_TRACE": logging.DEBUG}
"""OpenVINO's level names and the ``logging`` level each sets."""


def apply_log_level(level: str) -> None:
    """Set the ``"inferplex"`` logger to OpenVINO's ``level`` (a key of :data:`LEVELS`)."""
    logging.getLogger("inferplex").setLevel(LEVELS[level])
