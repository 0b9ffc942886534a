"""``Version``: what ``Core.get_versions`` gives per device, shaped as OpenVINO's.

OpenVINO programs print ``version.description`` and ``version.build_number``
(``benchmark_app`` does), and some read ``major``/``minor``/``patch``.  Here the
build number is inferplex's version and the description names the plugin and
the engine that runs the device (``inferplex CPU plugin (OPENVINO engine)``).
"""

from __future__ import annotations

__all__ = ["Version"]


class Version:
    """A device plugin's version: ``build_number``, ``description``, ``major``, ``minor``, ``patch``."""

    __slots__ = ("build_number", "description", "major", "minor", "patch")

    def __init__(self, build_number: str, description: str) -> None:
        self.build_number = build_number
        self.description = description
        numbers = [int(part) if part.isdigit() else 0 for part in build_number.split("-")[0].split(".")[:3]]
        self.major, self.minor, self.patch = (*numbers, 0, 0, 0)[:3]

    def __repr__(self) -> str:
        return f"<Version: {self.build_number} {self.description}>"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Version):
            return NotImplemented
        return (self.build_number, self.description) == (other.build_number, other.description)

    def __hash__(self) -> int:
        return hash((self.build_number, self.description))
