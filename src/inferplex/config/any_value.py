"""``OVAny``: one property value, as OpenVINO's typed properties carry it.

``hint.performance_mode(PerformanceMode.THROUGHPUT)`` returns ``("PERFORMANCE_HINT",
OVAny(...))`` in OpenVINO; programs read ``pair[1].value`` or pass the pair (or a dict
of pairs) to ``compile_model`` / ``set_property``, where :func:`plain` unwraps it.
"""

from __future__ import annotations

from abc import ABC
from collections.abc import Mapping
from typing import Any

__all__ = ["OVAny", "plain"]


class OVAny(ABC):
    """A value of any type with OpenVINO's ``OVAny`` reading methods; equal to what it holds.

    rt_info's values (:class:`inferplex._ports.RtValue`, strings) are registered as
    OVAny too: OpenVINO gives both as the same class.
    """

    __slots__ = ("value",)
    value: Any

    def __init__(self, value: Any) -> None:
        self.value = value.value if isinstance(value, OVAny) else value

    def get(self) -> Any:
        return self.value

    def set(self, value: Any) -> None:
        """Hold ``value`` instead (OVAny's ``set``)."""
        self.value = value.value if isinstance(value, OVAny) else value

    def __getitem__(self, key: Any) -> Any:
        """An item of the list or dict held (``any[0]``, ``any["key"]``)."""
        return self.value[key]

    def __len__(self) -> int:
        return len(self.value)

    def astype(self, kind: type) -> Any:
        """The value as ``kind`` (``str``, ``int``, ``float``, ``bool``, ``list``)."""
        if kind is list:
            return self.aslist()
        if kind is bool and isinstance(self.value, str):
            return self.value.strip().lower() in ("1", "true", "yes")
        return kind(self.value)

    def aslist(self, kind: type = str) -> list[Any]:
        if isinstance(self.value, (list, tuple, set, frozenset)):
            return [kind(item) for item in self.value]
        return [kind(part.strip()) for part in str(self.value).split(",") if part.strip()]

    def __eq__(self, other: object) -> bool:
        return bool(self.value == (other.value if isinstance(other, OVAny) else other))

    def __hash__(self) -> int:
        return hash(self.value)

    def __str__(self) -> str:
        return str(self.value)

    def __repr__(self) -> str:
        return f"OVAny({self.value!r})"


def plain(value: Any) -> Any:
    """``value`` with every :class:`OVAny` in it (a dict's values included) unwrapped."""
    if isinstance(value, OVAny):
        value = value.value
    if isinstance(value, Mapping):
        return {key: plain(item) for key, item in value.items()}
    return value
