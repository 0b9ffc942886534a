"""``ov.Layout``: names for a tensor's dimensions (``NCHW``, ``NC...``, ``[N,C,H,W]``).

A layout names some or all dimensions of a tensor.  Two spellings, as in
OpenVINO: one letter per dimension (``"NCHW"``, ``"N?HW"``, ``"NC..."``), or a
bracketed list of names (``"[batch,channels,h,w]"``, ``"[N,...,C]"``).  ``?``
is an unnamed dimension; ``...`` (once) stands for any number of dimensions,
so names after it are counted from the end (``Layout("...C").get_index_by_name("C") == -1``).
Names are upper-cased, and the long names ``batch``, ``channels``, ``depth``,
``height``, ``width`` (and ``b``, ``c``, ``d``, ``h``, ``w``) mean ``N``, ``C``,
``D``, ``H``, ``W``.
"""

from __future__ import annotations

from typing import Any

from inferplex.api.keywords import keyword_aliases
from inferplex.errors import InputError

__all__ = ["Layout"]

_ALIASES = {"BATCH": "N", "B": "N", "CHANNELS": "C", "DEPTH": "D", "HEIGHT": "H", "WIDTH": "W"}
_ACCEPTED = ("one letter per dimension ('NCHW', 'N?HW', 'NC...') or a bracketed list of names "
             "('[N,C,H,W]', '[batch,...,channels]')")


class Layout:
    """A tensor layout (OpenVINO's ``ov.Layout``); ``Layout()`` is the empty layout ``[...]``."""

    __slots__ = ("_dynamic", "_left", "_right")
    _left: list[str | None]
    _right: list[str | None]
    _dynamic: bool

    @keyword_aliases(layout_str="layout")
    def __init__(self, layout: str | Layout = "") -> None:
        if isinstance(layout, Layout):
            self._left, self._right, self._dynamic = layout._left, layout._right, layout._dynamic
            return
        if not isinstance(layout, str):
            raise InputError(f"Layout takes a string, got {type(layout).__name__}; "
                             f"accepted: {_ACCEPTED}")
        self._left, self._right, self._dynamic = _parse(layout)

    @classmethod
    def scalar(cls) -> Layout:
        """The layout of a tensor of no dimensions (``**SCALAR**``, as OpenVINO writes it)."""
        return cls(_SCALAR)

    @property
    def empty(self) -> bool:
        """True for the layout that names nothing (``[...]``)."""
        return self._dynamic and not self._left and not self._right

    @property
    def rank(self) -> int | None:
        """The number of dimensions, or None when the layout has ``...``."""
        return None if self._dynamic else len(self._left)

    @keyword_aliases(dimension_name="name")
    def has_name(self, name: str) -> bool:
        return _canonical(name) in self._left + self._right

    @keyword_aliases(dimension_name="name")
    def get_index_by_name(self, name: str) -> int:
        """The dimension's index; negative (from the end) for names after ``...``."""
        canonical = _canonical(name)
        if canonical in self._left:
            return self._left.index(canonical)
        if canonical in self._right:
            return self._right.index(canonical) - len(self._right)
        raise InputError(f"layout {self} has no dimension named {name!r}")

    def names(self, rank: int) -> list[str | None]:
        """The name of each of ``rank`` dimensions (None where unnamed); inferplex's extension.

        InputError when the layout cannot describe a tensor of that rank.
        """
        fixed = len(self._left) + len(self._right)
        if (self._dynamic and rank < fixed) or (not self._dynamic and rank != fixed):
            raise InputError(f"layout {self} does not fit a tensor of rank {rank}")
        return [*self._left, *[None] * (rank - fixed), *self._right]

    def to_string(self) -> str:
        if not self._dynamic and not self._left:
            return _SCALAR
        names = ["?" if n is None else n for n in self._left]
        if self._dynamic:
            names.append("...")
        names += ["?" if n is None else n for n in self._right]
        return "[" + ",".join(names) + "]"

    def __eq__(self, other: object) -> bool:
        if isinstance(other, str):
            try:
                other = Layout(other)
            except InputError:
                return False
        if not isinstance(other, Layout):
            return NotImplemented
        return (self._left, self._right, self._dynamic) == (other._left, other._right,
                                                            other._dynamic)

    def __hash__(self) -> int:
        return hash(self.to_string())

    def __str__(self) -> str:
        return self.to_string()

    def __repr__(self) -> str:
        return f"<Layout: {self.to_string()}>"


_SCALAR = "**SCALAR**"
"""OpenVINO's name of the layout of no dimensions."""


def _canonical(name: str) -> str:
    upper = name.strip().upper()
    return _ALIASES.get(upper, upper)


def _parse(text: str) -> tuple[list[Any], list[Any], bool]:
    body = text.strip()
    if not body:
        return [], [], True
    if body in (_SCALAR, "[]"):
        return [], [], False
    if body.startswith("["):
        if not body.endswith("]"):
            raise InputError(f"layout {text!r} opens '[' without closing it; accepted: {_ACCEPTED}")
        parts = [p.strip() for p in body[1:-1].split(",")] if body[1:-1].strip() else []
    else:
        parts = _letters(body)
    if parts.count("...") > 1:
        raise InputError(f"layout {text!r} has '...' more than once; accepted: {_ACCEPTED}")
    names = [None if p == "?" else p if p == "..." else _checked_name(p, text) for p in parts]
    named = [n for n in names if n not in (None, "...")]
    duplicates = sorted({n for n in named if named.count(n) > 1})
    if duplicates:
        raise InputError(f"layout {text!r} names dimension {', '.join(duplicates)} more than once")
    if "..." in names:
        cut = names.index("...")
        return names[:cut], names[cut + 1:], True
    return names, [], False


def _letters(body: str) -> list[str]:
    parts: list[str] = []
    index = 0
    while index < len(body):
        if body.startswith("...", index):
            parts.append("...")
            index += 3
        else:
            parts.append(body[index])
            index += 1
    return parts


def _checked_name(part: str, text: str) -> str:
    if not part or not all(c.isascii() and (c.isalnum() or c == "_") for c in part):
        raise InputError(f"Layout name is invalid: layout {text!r} has the dimension name {part!r}, not "
                         f"made of English letters, digits and '_'; accepted: {_ACCEPTED}")
    return _canonical(part)
