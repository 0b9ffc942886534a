"""A bench script's results as JSON besides its printed table: ``$OUT/<name>`` when the
environment sets ``OUT``, else nothing."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


def write_json(name: str, payload: Any) -> None:
    """Write ``payload`` to ``$OUT/name`` (indented JSON; numbers it cannot encode as text)."""
    folder = os.environ.get("OUT")
    if folder:
        Path(folder, name).write_text(json.dumps(payload, indent=1, default=str))
