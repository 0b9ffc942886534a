"""``ov.properties.log``: OpenVINO's log level key, which inferplex refuses with the fix.

inferplex logs through Python's ``logging`` (logger ``"inferplex"``): use
``logging.getLogger("inferplex").setLevel(logging.DEBUG)`` rather than
``LOG_LEVEL``, which :mod:`inferplex.config.schema` refuses saying so.
"""

from __future__ import annotations

from inferplex.properties._enums import Level
from inferplex.properties._typed import Property

__all__ = ["Level", "level"]

level = Property("LOG_LEVEL")
"""OpenVINO's log level; refused when used (see the module docstring)."""
