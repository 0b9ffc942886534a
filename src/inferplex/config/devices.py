"""Device strings: the one grammar, parsed once per compile into a typed :class:`DeviceSpec`.

::

    CPU | GPU | GPU.1                         one device
    HETERO:GPU,CPU                            virtual device over a priority list
    MULTI:CPU(2),GPU.0(4)                     per-device request counts
    AUTO | AUTO:GPU.1,CPU | AUTO:-CPU         candidates, or exclusions
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from inferplex.errors import DeviceNameError

__all__ = ["VIRTUAL_DEVICES", "DeviceSpec", "DeviceTarget", "parse_device_list", "parse_device_string"]

VIRTUAL_DEVICES = ("HETERO", "MULTI", "AUTO")

_DEVICE_RE = re.compile(r"^(?P<name>[A-Z][A-Z0-9_]*(?:\.\d+)?)(?:\((?P<count>\d+)\))?$")


@dataclass(frozen=True)
class DeviceTarget:
    """One entry of a device list."""

    name: str
    """Device name as written: ``"CPU"``, ``"GPU"``, ``"GPU.1"``."""
    num_requests: int | None = None
    """Requests asked for with ``NAME(n)``; ``None`` when not given."""


@dataclass(frozen=True)
class DeviceSpec:
    """A parsed device string."""

    virtual: str | None
    """``"HETERO"``, ``"MULTI"``, ``"AUTO"`` or ``None`` for a single device."""
    targets: tuple[DeviceTarget, ...] = ()
    """Devices in priority order (for a single device: exactly one)."""
    exclusions: tuple[str, ...] = ()
    """Devices excluded with ``-NAME`` (AUTO only)."""
    text: str = field(default="", compare=False)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(t.name for t in self.targets)


def parse_device_list(text: str, *, allow_counts: bool = False,
                      allow_exclusions: bool = False) -> tuple[DeviceTarget, ...]:
    """Parse ``"GPU.0(4),CPU"`` into targets; exclusions (``-CPU``) are returned with a leading '-'."""
    if text.strip() == "":
        raise DeviceNameError("empty device list; write devices comma-separated, e.g. 'GPU,CPU'")
    targets: list[DeviceTarget] = []
    for raw in text.split(","):
        item = raw.strip()
        if item != raw or item == "":
            raise DeviceNameError(
                f"malformed device list {text!r}: devices are separated by single commas "
                "with no spaces, e.g. 'GPU.0,CPU'")
        excluded = item.startswith("-")
        if excluded and not allow_exclusions:
            raise DeviceNameError(f"device exclusion {item!r} is only accepted in AUTO:<list>")
        match = _DEVICE_RE.match(item[1:] if excluded else item)
        if not match:
            raise DeviceNameError(
                f"malformed device name {item!r} in {text!r}; accepted: NAME, NAME.<index>, "
                "NAME(<requests>) e.g. 'CPU', 'GPU.1', 'GPU.0(4)'")
        count = match.group("count")
        if count is not None and (not allow_counts or excluded):
            raise DeviceNameError(f"request count in {item!r} is only accepted in MULTI/AUTO lists")
        if count is not None and int(count) < 1:
            raise DeviceNameError(f"request count in {item!r} must be at least 1")
        name = ("-" if excluded else "") + match.group("name")
        targets.append(DeviceTarget(name, int(count) if count is not None else None))
    names = [t.name for t in targets]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise DeviceNameError(f"device list {text!r} names {', '.join(duplicates)} more than once")
    return tuple(targets)


def parse_device_string(text: str) -> DeviceSpec:
    """Parse a full device string; see the module docstring for the grammar."""
    if not isinstance(text, str) or not text:
        raise DeviceNameError(f"device name must be a non-empty string, got {text!r}")
    head, sep, rest = text.partition(":")
    if head in VIRTUAL_DEVICES:
        if not sep:
            return DeviceSpec(head, (), (), text)
        if rest.strip() == "":
            raise DeviceNameError(
                f"{text!r}: {head} got an empty device list; write the devices after '{head}:' "
                f"comma-separated, highest priority first, e.g. 'GPU,CPU' ({head}:GPU,CPU), or "
                f"{head} alone to use MULTI_DEVICE_PRIORITIES")
        items = parse_device_list(rest, allow_counts=head != "HETERO", allow_exclusions=head == "AUTO")
        if any(t.name in VIRTUAL_DEVICES for t in items):
            raise DeviceNameError(f"{text!r}: a virtual device cannot be listed inside {head}")
        exclusions = tuple(t.name[1:] for t in items if t.name.startswith("-"))
        targets = tuple(t for t in items if not t.name.startswith("-"))
        if exclusions and targets:
            raise DeviceNameError(
                f"{text!r}: AUTO takes either a candidate list or exclusions (-NAME), not both")
        return DeviceSpec(head, targets, exclusions, text)
    if sep:
        raise DeviceNameError(
            f"unknown virtual device {head!r} in {text!r}; accepted: {', '.join(VIRTUAL_DEVICES)}")
    (target,) = parse_device_list(text)
    if target.num_requests is not None:
        raise DeviceNameError(f"{text!r}: request counts are only accepted inside MULTI/AUTO lists")
    return DeviceSpec(None, (target,), (), text)
