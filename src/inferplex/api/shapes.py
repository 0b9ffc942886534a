"""``ov.Shape``, ``ov.PartialShape`` and ``ov.Dimension``: static and dynamic shapes.

A :class:`Dimension` is an interval ``min..max`` of lengths (``max`` unbounded
for a fully dynamic ``?``); it is static when ``min == max``.  A
:class:`PartialShape` is a list of dimensions, or of unknown rank (``[...]``).
A :class:`Shape` is a list of non-negative ints.  String forms follow
OpenVINO: ``[1,3,?,?]``, ``[1..8,3,224,224]``, ``[..5]``, ``[2..]``, ``[...]``.

    >>> import inferplex as ov
    >>> ov.PartialShape("1..8,3,224,224").get_max_shape()
    <Shape: [8,3,224,224]>

inferplex differs from OpenVINO where OpenVINO accepts nonsense silently:
``Dimension(-2)`` and ``Dimension(5, 2)`` are errors, and dimensions are hashable.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any, SupportsIndex, overload

import numpy as np

from inferplex.api.keywords import keyword_aliases, keywords_in_order
from inferplex.errors import InputError, InputTypeError

__all__ = ["Dimension", "PartialShape", "Shape", "Strides", "Symbol", "parse_dimension_text",
           "split_shape_text"]

# What OpenVINO's get_max_shape() reports for an unbounded dimension.
_UNBOUNDED = np.iinfo(np.int64).max


def _as_int(value: Any, what: str) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise InputError(f"{what} must be an int, got {value!r} ({type(value).__name__})")
    return int(value)


class Symbol:
    """A label that ties dimensions known to be equal (OpenVINO's ``ov.Symbol``).

    Two symbols are equal only when they are the same object; a dimension with
    no symbol reports a null one, which is falsy (``Dimension().get_symbol()``).
    """

    __slots__ = ("_null",)

    def __init__(self) -> None:
        self._null = False

    @classmethod
    def _none(cls) -> Symbol:
        symbol = cls()
        symbol._null = True
        return symbol

    def __bool__(self) -> bool:
        return not self._null

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Symbol) and self._null and other._null:
            return True
        return self is other

    def __hash__(self) -> int:
        return 0 if self._null else id(self)

    def __repr__(self) -> str:
        return "<Symbol: null>" if self._null else f"<Symbol at {id(self):#x}>"


class Dimension:
    """One dimension: static (``Dimension(3)``), dynamic (``Dimension()``, ``Dimension(-1)``)
    or an interval (``Dimension(1, 8)``, ``Dimension(2, -1)`` for ``2..``, ``Dimension("1..8")``).

    A dimension may carry a :class:`Symbol` (``set_symbol``) marking it equal to
    other dimensions with the same symbol; equality of dimensions ignores it.
    """

    __slots__ = ("_max", "_min", "_symbol")
    _min: int
    _max: int | None
    _symbol: Symbol | None

    @keywords_in_order(("dimension",), ("min_dimension", "max_dimension"), ("str",))
    def __init__(self, *args: Any) -> None:
        self._symbol = None
        if len(args) == 1 and isinstance(args[0], Dimension):
            self._min, self._max = args[0]._min, args[0]._max
        elif len(args) == 1 and isinstance(args[0], str):
            self._min, self._max = parse_dimension_text(args[0])
        elif len(args) == 0:
            self._min, self._max = 0, None
        elif len(args) == 1:
            length = _as_int(args[0], "a dimension")
            if length < -1:
                raise InputError(f"dimension {length} is negative; give a length >= 0, "
                                 "or -1 for a dynamic dimension")
            self._min, self._max = (0, None) if length == -1 else (length, length)
        elif len(args) == 2:
            self._min, self._max = _interval(_as_int(args[0], "a dimension's minimum"),
                                             _as_int(args[1], "a dimension's maximum"))
        else:
            raise InputError(f"Dimension takes (), (length), (min, max) or a string; "
                             f"got {len(args)} arguments")

    @staticmethod
    def dynamic() -> Dimension:
        return Dimension()

    def has_symbol(self) -> bool:
        return self._symbol is not None

    def get_symbol(self) -> Symbol:
        """The symbol set on this dimension, or a null (falsy) symbol when none is."""
        return self._symbol if self._symbol is not None else Symbol._none()  # noqa: SLF001

    def set_symbol(self, symbol: Symbol) -> None:
        if not isinstance(symbol, Symbol):
            raise InputError(f"set_symbol takes an ov.Symbol, got {type(symbol).__name__}")
        self._symbol = symbol if symbol else None

    @property
    def is_static(self) -> bool:
        return self._min == self._max

    @property
    def is_dynamic(self) -> bool:
        return not self.is_static

    def get_length(self) -> int:
        """The length of a static dimension; InputError for a dynamic one."""
        if self.is_dynamic:
            raise InputError(f"dimension {self} is dynamic and has no length; use "
                             "get_min_length()/get_max_length()")
        return self._min

    def get_min_length(self) -> int:
        return self._min

    def __len__(self) -> int:
        """The length of a static dimension (``len(Dimension(2)) == 2``), as OpenVINO's."""
        return self.get_length()

    def __bool__(self) -> bool:
        return True  # a dimension is an object, not a length: ``if dim`` never raises

    def get_max_length(self) -> int:
        """The upper bound, or -1 when unbounded."""
        return -1 if self._max is None else self._max

    min_length = property(get_min_length)
    max_length = property(get_max_length)

    @keyword_aliases(dim="other")
    def compatible(self, other: Dimension | int) -> bool:
        """True when the two intervals share a length."""
        other = Dimension(other)
        low = max(self._min, other._min)
        high = min(_bound(self._max), _bound(other._max))
        return low <= high

    @keyword_aliases(dim="other")
    def relaxes(self, other: Dimension | int) -> bool:
        """True when every length ``other`` allows, this one allows too."""
        other = Dimension(other)
        return self._min <= other._min and _bound(other._max) <= _bound(self._max)

    @keyword_aliases(dim="other")
    def refines(self, other: Dimension | int) -> bool:
        """True when this dimension allows no length that ``other`` does not."""
        return Dimension(other).relaxes(self)

    @keyword_aliases(dim="other")
    def same_scheme(self, other: Dimension | int) -> bool:
        """Both static and equal, or both dynamic."""
        other = Dimension(other)
        return self == other if self.is_static else other.is_dynamic

    def to_string(self) -> str:
        if self.is_static:
            return str(self._min)
        if self._min == 0 and self._max is None:
            return "?"
        low = str(self._min) if self._min else ""
        return f"{low}..{'' if self._max is None else self._max}"

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (int, np.integer)) and not isinstance(other, bool):
            other = Dimension(int(other)) if other >= -1 else None
        return isinstance(other, Dimension) and (self._min, self._max) == (other._min, other._max)

    def __hash__(self) -> int:
        return hash(self._min) if self.is_static else hash((self._min, self._max))

    def __str__(self) -> str:
        return self.to_string()

    def __repr__(self) -> str:
        return f"<Dimension: {self.to_string()}>"


def _dimension_of(item: Any) -> Dimension:
    """One entry of a PartialShape list: an int, a string, a Dimension or a ``(min, max)`` pair,
    as OpenVINO takes them; another type is an InputTypeError (a TypeError) naming it."""
    from inferplex.errors import InputTypeError

    if isinstance(item, (tuple, list)):
        if len(item) != 2:
            raise InputTypeError(f"Two elements are expected in tuple(lower, upper) for dynamic dimension, "
                                 f"but {len(item)} elements were given.")
        if not all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in item):
            raise InputTypeError(f"Incorrect pair of types ({type(item[0])}, {type(item[1])}) for dynamic "
                                 "dimension, ints are expected.")
        return Dimension(int(item[0]), int(item[1]))
    if not isinstance(item, (Dimension, str, int, np.integer)) or isinstance(item, bool):
        raise InputTypeError(f"Incorrect type {type(item)} for dimension. Expected types are: int, str, "
                             "Dimension, list/tuple with lower and upper values for dynamic dimension.")
    return Dimension(item)


def _bound(maximum: int | None) -> float:
    return float("inf") if maximum is None else maximum


def _interval(low: int, high: int) -> tuple[int, int | None]:
    low = max(low, 0) if low == -1 else low
    if low < 0 or high < -1 or (high != -1 and high < low):
        raise InputError(f"dimension interval {low}..{high} is not valid; give 0 <= min <= max, "
                         "or max = -1 for no upper bound")
    return low, None if high == -1 else high


def parse_dimension_text(text: str) -> tuple[int, int | None]:
    """(min, max) of one dimension written as OpenVINO writes it: ``3``, ``?``/``-1``, ``1..8``,
    ``..8``, ``2..`` (max None: unbounded).  Shared by PartialShape and ``Model.reshape``."""
    part = text.strip()
    accepted = "accepted: a length (3), '?' or -1, or an interval ('1..8', '..8', '2..')"
    if part in ("?", "-1"):
        return 0, None
    if ".." in part:
        low, high = part.split("..", 1)
        return _interval(_bound_of(low, "min", accepted), _bound_of(high, "max", accepted))
    try:
        length = int(part)
    except ValueError as error:
        raise InputError(f'Cannot parse dimension: "{part}"; {accepted}') from error
    if length < 0:
        raise InputError(f"dimension {text!r} is negative; give a length >= 0, '?' or -1")
    return length, length


def _bound_of(text: str, which: str, accepted: str) -> int:
    """One bound of ``min..max``: an int, or empty (0 for min, -1: unbounded, for max)."""
    if not text.strip():
        return 0 if which == "min" else -1
    try:
        return int(text)
    except ValueError as error:
        raise InputError(f'Cannot parse {which} bound: "{text.strip()}"; {accepted}') from error


class Shape:
    """A static shape: a mutable list of non-negative ints (``Shape([1, 3, 224, 224])``)."""

    __slots__ = ("_dims",)
    __hash__ = None  # type: ignore[assignment]  # mutable, as OpenVINO's

    @keyword_aliases(axis_lengths="dims", shape="dims")
    def __init__(self, dims: Iterable[Any] = ()) -> None:
        if isinstance(dims, str):
            raise InputError(f"Shape takes a list of ints, got the string {dims!r}; "
                             "PartialShape reads strings")
        self._dims = [self._check(d) for d in dims]

    @classmethod
    def _check(cls, value: Any) -> int:
        if isinstance(value, Dimension):
            value = value.get_length()
        length = _as_int(value, f"a {cls.__name__} entry")
        if length < 0:
            raise InputError(f"{cls.__name__} entries must be >= 0, got {length}; "
                             "use PartialShape for dynamic dimensions")
        return length

    def to_string(self) -> str:
        return "[" + ",".join(map(str, self._dims)) + "]"

    def __len__(self) -> int:
        return len(self._dims)

    def __iter__(self) -> Iterator[int]:
        return iter(self._dims)

    @overload
    def __getitem__(self, key: SupportsIndex) -> int: ...
    @overload
    def __getitem__(self, key: slice) -> Shape: ...

    def __getitem__(self, key: SupportsIndex | slice) -> int | Shape:
        if isinstance(key, slice):
            return type(self)(self._dims[key])
        return self._dims[key]

    def __setitem__(self, key: SupportsIndex, value: Any) -> None:
        self._dims[key] = self._check(value)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (Shape, list, tuple)):
            return self._dims == list(other)
        if isinstance(other, PartialShape):
            return other == self
        return NotImplemented

    def __str__(self) -> str:
        return self.to_string()

    def __repr__(self) -> str:
        return f"<{type(self).__name__}: {self.to_string()}>"


class Strides(Shape):
    """Byte strides of a tensor, one per dimension (``tensor.strides``)."""

    __slots__ = ()


class Coordinate(Shape):
    """A position in a tensor, one index per dimension: the corners of an ROI tensor
    (``Tensor(parent, Coordinate([0, 1]), Coordinate([2, 3]))``)."""

    __slots__ = ()


class AxisVector(Shape):
    """An ordered list of axes (OpenVINO's ``AxisVector``)."""

    __slots__ = ()


class CoordinateDiff(Shape):
    """Signed offsets, one per dimension (OpenVINO's ``CoordinateDiff``: pads, for one)."""

    __slots__ = ()

    @classmethod
    def _check(cls, value: Any) -> int:
        return _as_int(value, "a CoordinateDiff entry")


class AxisSet:
    """A set of axes (OpenVINO's ``AxisSet``), listed in increasing order."""

    __slots__ = ("_axes",)

    def __init__(self, axes: Iterable[Any] = ()) -> None:
        self._axes = sorted({Shape._check(axis) for axis in ([axes] if isinstance(axes, int) else axes)})

    def __len__(self) -> int:
        return len(self._axes)

    def __iter__(self) -> Iterator[int]:
        return iter(self._axes)

    def __contains__(self, axis: object) -> bool:
        return axis in self._axes

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (AxisSet, set, frozenset, list, tuple)):
            return set(self._axes) == set(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return "<AxisSet {" + ", ".join(map(str, self._axes)) + "}>"


class PartialShape:
    """A shape whose dimensions may be dynamic, or whose rank may be unknown.

    Built from a list/tuple of ints (-1 for dynamic), :class:`Dimension` objects,
    a :class:`Shape`, or a string (``"1,3,?,?"``, ``"[1..8,3,224,224]"``, ``"..."``).
    """

    __slots__ = ("_dims",)
    __hash__ = None  # type: ignore[assignment]

    @keyword_aliases(shape="dims")
    def __init__(self, dims: Any = ()) -> None:
        if isinstance(dims, PartialShape):
            self._dims: list[Dimension] | None = None if dims._dims is None else list(dims._dims)
        elif isinstance(dims, str):
            self._dims = _parse_shape(dims)
        else:
            try:
                items = list(dims)
            except TypeError as error:
                raise InputError(f"PartialShape takes a list of dims, a Shape or a string, "
                                 f"got {type(dims).__name__}") from error
            self._dims = [_dimension_of(d) for d in items]

    @staticmethod
    def dynamic(rank: int | Dimension | None = None) -> PartialShape:
        """A shape of unknown rank, or of ``rank`` fully dynamic dimensions."""
        if rank is None or (isinstance(rank, Dimension) and rank.is_dynamic):
            shape = PartialShape()
            shape._dims = None
            return shape
        count = rank.get_length() if isinstance(rank, Dimension) else _as_int(rank, "a rank")
        return PartialShape([Dimension() for _ in range(count)])

    @property
    def rank(self) -> Dimension:
        return Dimension() if self._dims is None else Dimension(len(self._dims))

    @property
    def is_static(self) -> bool:
        return self._dims is not None and all(d.is_static for d in self._dims)

    @property
    def is_dynamic(self) -> bool:
        return not self.is_static

    @property
    def all_non_negative(self) -> bool:
        return True  # every Dimension is >= 0 by construction

    def _static_dims(self, what: str) -> list[Dimension]:
        if self._dims is None:
            raise InputError(f"{what} needs a shape of known rank; this one is {self}")
        return self._dims

    def get_dimension(self, index: int) -> Dimension:
        return self._static_dims("get_dimension")[index]

    def to_shape(self) -> Shape:
        """The static shape; InputError when some dimension (or the rank) is dynamic."""
        if not self.is_static:
            raise InputError(f"shape {self} is dynamic and cannot be a static Shape; "
                             "use get_min_shape()/get_max_shape(), or reshape to static dims")
        return Shape(d.get_length() for d in self._dims or ())

    get_shape = to_shape

    def get_min_shape(self) -> Shape:
        return Shape(d.get_min_length() for d in self._dims or ())

    def get_max_shape(self) -> Shape:
        """Upper bounds; an unbounded dimension reports int64's maximum, as OpenVINO."""
        return Shape(_UNBOUNDED if d.get_max_length() < 0 else d.get_max_length()
                     for d in self._dims or ())

    def _pairs(self, other: Any) -> list[tuple[Dimension, Dimension]] | None:
        other = PartialShape(other)
        if self._dims is None or other._dims is None or len(self._dims) != len(other._dims):
            return None
        return list(zip(self._dims, other._dims, strict=True))

    @keyword_aliases(shape="other")
    def compatible(self, other: Any) -> bool:
        other = PartialShape(other)
        if self._dims is None or other._dims is None:
            return True
        pairs = self._pairs(other)
        return pairs is not None and all(a.compatible(b) for a, b in pairs)

    @keyword_aliases(shape="other")
    def relaxes(self, other: Any) -> bool:
        other = PartialShape(other)
        if self._dims is None:
            return True
        pairs = self._pairs(other)
        return pairs is not None and all(a.relaxes(b) for a, b in pairs)

    @keyword_aliases(shape="other")
    def refines(self, other: Any) -> bool:
        return PartialShape(other).relaxes(self)

    @keyword_aliases(shape="other")
    def same_scheme(self, other: Any) -> bool:
        other = PartialShape(other)
        if self._dims is None or other._dims is None:
            return self._dims is None and other._dims is None
        pairs = self._pairs(other)
        return pairs is not None and all(a.same_scheme(b) for a, b in pairs)

    def to_string(self) -> str:
        if self._dims is None:
            return "[...]"
        return "[" + ",".join(d.to_string() for d in self._dims) + "]"

    def __len__(self) -> int:
        return len(self._static_dims("len()"))

    def __iter__(self) -> Iterator[Dimension]:
        return iter(self._static_dims("iteration"))

    @overload
    def __getitem__(self, key: SupportsIndex) -> Dimension: ...
    @overload
    def __getitem__(self, key: slice) -> PartialShape: ...

    def __getitem__(self, key: SupportsIndex | slice) -> Dimension | PartialShape:
        dims = self._static_dims("indexing")
        return PartialShape(dims[key]) if isinstance(key, slice) else dims[key]

    def __setitem__(self, key: SupportsIndex, value: Any) -> None:
        self._static_dims("item assignment")[key] = Dimension(value)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, (PartialShape, Shape, list, tuple)):
            return NotImplemented
        if self._dims is None and isinstance(other, (list, tuple)):
            raise InputTypeError(f"Cannot compare dynamic shape with {type(other)}: a shape of unknown rank "
                                 "compares with another PartialShape (PartialShape.dynamic())")
        try:
            other = PartialShape(other)
        except InputError:
            return False
        return self._dims == other._dims

    def __str__(self) -> str:
        return self.to_string()

    def __repr__(self) -> str:
        return f"<PartialShape: {self.to_string()}>"


def split_shape_text(text: str) -> list[str] | None:
    """The dims of a shape string (``"1,3,?,?"``, ``"[1..8,3]"``) as text; None for ``"..."``
    (a dynamic rank).  Shared by PartialShape and ``Model.reshape``."""
    body = text.strip()
    if body.startswith("[") and body.endswith("]"):
        body = body[1:-1].strip()
    if body == "...":
        return None
    if not body:
        return []
    return body.split(",")


def _parse_shape(text: str) -> list[Dimension] | None:
    parts = split_shape_text(text)
    if parts is not None and any(not part.strip() for part in parts):
        raise InputError(f'Cannot get vector of dimensions! "{text}" is incorrect: a dimension is '
                         "empty; write dims between single commas, e.g. '[?,3,224..]'")
    return None if parts is None else [Dimension(part) for part in parts]
