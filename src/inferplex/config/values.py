"""Value parsers: what a property's value may be written as, and its one canonical form.

Each parser takes a string (``"YES"``, ``"20GiB"``, ``"500ms"``) or a Python
value (``True``, ``4``) and returns the canonical value, or raises
:class:`Reject` with the text of what is accepted; :mod:`.schema` turns that
into a :class:`~inferplex.errors.PropertyError` naming the key and the value.
Device plugins build their own keys' parsers from these
(``DevicePlugin.property_parsers``).
"""

from __future__ import annotations

import enum
import os
import re
import tempfile
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from inferplex.errors import PropertyError

__all__ = ["OptionEnum", "Parser", "Reject", "as_text", "boolean", "byte_size", "choice", "directory",
           "int_at_least", "parse_bytes", "parse_seconds", "seconds", "streams", "yes_no_auto"]


class Reject(Exception):  # noqa: N818 - a parser's "no", not an error the user sees
    """Raised by a value parser; its text says what is accepted."""


class _OptionEnumType(enum.EnumType):
    """The metaclass of :class:`OptionEnum`: gives each such enum pybind11's ``__entries``."""


def _entries(cls: type[enum.Enum]) -> dict[str, tuple[enum.Enum, None]]:
    """``{name: (member, docstring)}`` for every name, aliases included, in the order they were
    written: what pybind11's enums hold as ``__entries`` (their members have no docstrings)."""
    return {name: (member, None) for name, member in cls.__members__.items()}


setattr(_OptionEnumType, "__entries", property(_entries))  # written so: a class body would mangle it


class OptionEnum(enum.Enum, metaclass=_OptionEnumType):
    """A property value enum that behaves as OpenVINO's pybind11 enums do, and names its stored string.

    Members are written ``NAME = (number, text)``: ``number`` is OpenVINO's
    (``value``, ``int()``, ordering, ``Enum(number)``), ``text`` the string the
    schema stores (``"THROUGHPUT"``).  ``str()`` is ``"Class.NAME"`` and the repr
    ``<Class.NAME: number>``, as OpenVINO prints them.  A member equals its
    text too, so a value read back compares with the string a config was
    written with; it equals no number (OpenVINO's members equal no int either).
    ``Enum("THROUGHPUT")`` (the text or the name, any case) finds a member.
    Like pybind11's enums, the class has ``__entries``: ``{name: (member, None)}``.
    """

    _text: str

    def __new__(cls, number: int, text: str) -> OptionEnum:
        member = object.__new__(cls)
        member._value_ = number
        member._text = text
        return member

    @classmethod
    def _missing_(cls, value: object) -> OptionEnum | None:
        if isinstance(value, str):
            wanted = value.strip().upper()
            for name, member in cls.__members__.items():
                if wanted in (name, member._text.upper()):
                    return member
        return None

    @property
    def text(self) -> str:
        """The string inferplex's schema stores for this member (``"THROUGHPUT"``, ``"LOG_NONE"``)."""
        return self._text

    def __int__(self) -> int:
        return int(self._value_)

    def __index__(self) -> int:
        return int(self._value_)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, str):
            return other == self._text
        return self is other

    def __hash__(self) -> int:
        return hash(self._text)

    def __lt__(self, other: object) -> bool:
        return self._order(other) < 0

    def __le__(self, other: object) -> bool:
        return self._order(other) <= 0

    def __gt__(self, other: object) -> bool:
        return self._order(other) > 0

    def __ge__(self, other: object) -> bool:
        return self._order(other) >= 0

    def _order(self, other: object) -> int:
        if type(other) is not type(self):
            raise TypeError(f"'<' is not supported between {type(self).__name__} and {type(other).__name__}")
        return int(self._value_) - int(other._value_)


def as_text(value: Any) -> Any:
    """``value`` with :class:`OptionEnum` members (alone, or in a list, tuple or set) as their texts,
    the form the parsers take."""
    if isinstance(value, OptionEnum):
        return value.text
    if isinstance(value, (list, tuple, set, frozenset)) and any(isinstance(v, OptionEnum) for v in value):
        return type(value)(v.text if isinstance(v, OptionEnum) else v for v in value)
    return value


_TRUE = {"YES", "TRUE", "1", "ON"}
_FALSE = {"NO", "FALSE", "0", "OFF"}
_BYTE_UNITS = {
    "": 1, "B": 1,
    "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12,
    "KIB": 2**10, "MIB": 2**20, "GIB": 2**30, "TIB": 2**40,
}
_BYTES_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*$")

def boolean(value: Any) -> bool:
    """True/False, 'YES'/'NO' (any case), or 1/0 (OpenVINO's typed keys take ints as bools)."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().upper() in _TRUE | _FALSE:
        return value.strip().upper() in _TRUE
    raise Reject("True/False, 1/0 or 'YES'/'NO'")


def int_at_least(minimum: int) -> Callable[[Any], int]:
    def parse(value: Any) -> int:
        if isinstance(value, bool):
            raise Reject(f"an integer >= {minimum}")
        try:
            number = int(value)
        except (TypeError, ValueError):
            raise Reject(f"an integer >= {minimum}") from None
        if (isinstance(value, float) and value != number) or number < minimum:
            raise Reject(f"an integer >= {minimum}")
        return number

    return parse


def choice(*choices: str, aliases: Mapping[str, str] | None = None) -> Callable[[Any], str]:
    table = {c.upper(): c for c in choices}
    table.update({k.upper(): v for k, v in (aliases or {}).items()})

    def parse(value: Any) -> str:
        value = as_text(value)
        if isinstance(value, str) and value.strip().upper() in table:
            return table[value.strip().upper()]
        raise Reject("one of " + ", ".join(choices))

    return parse


def parse_bytes(value: Any) -> int:
    """Bytes from an int or a string such as ``"20GiB"``, ``"512 MB"`` or ``"1024"``."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    if isinstance(value, str):
        match = _BYTES_RE.match(value)
        if match and match.group(2).upper() in _BYTE_UNITS:
            return int(float(match.group(1)) * _BYTE_UNITS[match.group(2).upper()])
    raise PropertyError(
        f"MEMORY_LIMIT: {value!r} is not a size; accepted: a number of bytes (int) "
        "or a string like '20GiB', '512MB', '1.5GB'"
    )


def byte_size(value: Any) -> int:
    try:
        return parse_bytes(value)
    except PropertyError:
        raise Reject("bytes as an int, or a string like '20GiB', '512MB'") from None


_SECONDS_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s)?\s*$", re.IGNORECASE)


def parse_seconds(value: Any) -> float | None:
    """Seconds from ``2``, ``0.5``, ``"500ms"`` or ``"2s"``; ``None`` and ``0`` mean no limit."""
    if value is None:
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0:
        return float(value) or None
    match = _SECONDS_RE.match(value) if isinstance(value, str) else None
    if match is None:
        raise Reject("seconds as a number (0 = no limit), or a string like '500ms', '2s'")
    number = float(match.group(1)) / (1000.0 if (match.group(2) or "").lower() == "ms" else 1.0)
    return number or None


def streams(value: Any) -> int | str:
    """``AUTO`` or an int >= 1; OpenVINO's ``streams.Num`` (anything with ``to_integer()``)
    and its integer codes too: -1 (or "-1") means AUTO, as in OpenVINO.  NUMA (-2: a stream
    per NUMA node) is refused."""
    if callable(getattr(value, "to_integer", None)):
        value = value.to_integer()
    if not isinstance(value, bool) and str(value).strip() in ("-1", "-2"):
        value = {"-1": "AUTO", "-2": "NUMA"}[str(value).strip()]
    if isinstance(value, str) and value.strip().upper() == "AUTO":
        return "AUTO"
    if isinstance(value, str) and value.strip().upper() == "NUMA":
        raise Reject("AUTO (or -1) or an integer >= 1 (NUMA, a stream per NUMA node, is not implemented; "
                     "give the number of streams)")
    try:
        return int_at_least(1)(value)
    except Reject:
        raise Reject("AUTO (or -1) or an integer >= 1") from None




def seconds(value: Any) -> float | None:
    """:func:`parse_seconds` as a parser."""
    return parse_seconds(value)


def yes_no_auto(value: Any) -> str:
    """``AUTO``, ``YES`` or ``NO`` (booleans read as YES/NO)."""
    if isinstance(value, bool):
        return "YES" if value else "NO"
    return choice("AUTO", "YES", "NO", aliases={"TRUE": "YES", "FALSE": "NO"})(value)


Parser = Callable[[Any], Any]
"""A value parser: the canonical value, or :class:`Reject`."""


def directory(value: Any) -> str:
    """A directory path (str, os.PathLike, or a ``tempfile.TemporaryDirectory``: its folder) as
    text; '' means none.  Whether it is safe is checked where it is used (the model cache checks
    its owner and mode at compile)."""
    if isinstance(value, tempfile.TemporaryDirectory):  # OpenVINO's docs pass one to CACHE_DIR
        return str(value.name)
    if isinstance(value, (str, os.PathLike)):
        return os.fspath(value)
    raise Reject("a directory path (str, pathlib.Path or tempfile.TemporaryDirectory), or '' for none")
