"""``ov.Type``: OpenVINO's element type, over onnx-ir's ``DataType`` table.

One dtype type for all of inferplex: ports, tensors and preprocessing speak
``Type``; its sizes, numpy dtypes and short names come from ``onnx_ir.DataType``
(the one table), with OpenVINO's spellings where they differ (``boolean``,
``string``, ``f8e4m3``, ``dynamic``).

    >>> import inferplex as ov, numpy as np
    >>> ov.Type(np.float32) == ov.Type.f32, ov.Type.f32.size, ov.Type.bf16.is_real()
    (True, 4, True)

Where inferplex differs from OpenVINO, on purpose:

- ``Type("f32")`` and the other short names are accepted besides numpy's
  spellings (``"float32"``), since those are the names ``to_string()`` prints.
- ``to_dtype()`` gives ml_dtypes' ``bfloat16``/``int4``/... (what onnx-ir and
  ONNX Runtime use) where OpenVINO gives ``float16``/``uint8`` stand-ins.
- ``str``, ``repr`` and f-strings print OpenVINO's form, ``<Type: 'float32'>``; the short name
  is ``get_type_name()`` (``"f32"``), which inferplex's own messages use.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
import onnx_ir as ir

from inferplex.errors import InputError

__all__ = ["Type", "type_name"]

# OpenVINO's spelling where it differs from onnx-ir's short name.
_OV_NAMES = {
    ir.DataType.BOOL: "boolean",
    ir.DataType.STRING: "string",
    ir.DataType.FLOAT8E4M3FN: "f8e4m3",
    ir.DataType.UNDEFINED: "dynamic",
}
# How OpenVINO prints a Type (``<Type: 'float32'>``) where it differs from the short name.
_PRINTED_NAMES = {"f32": "float32", "f64": "double64", "f16": "float16", "bf16": "bfloat16",
                  "boolean": "char", "nf4": "nfloat4",
                  **{f"{sign}{bits}": f"{'u' if sign == 'u' else ''}int{bits}_t"
                     for sign in ("i", "u") for bits in (1, 2, 3, 4, 6, 8, 16, 32, 64)}}
# The element types OpenVINO names as Type attributes and that ONNX can hold.
_ATTRIBUTE_NAMES = ("f16", "f32", "f64", "bf16", "i4", "i8", "i16", "i32", "i64", "u2", "u4",
                    "u8", "u16", "u32", "u64", "boolean", "string", "f8e4m3", "f8e5m2", "f4e2m1",
                    "f8e8m0", "dynamic")
_QUANTIZED = frozenset({ir.DataType.INT4, ir.DataType.UINT4, ir.DataType.INT8, ir.DataType.UINT8,
                        ir.DataType.INT32})
# OpenVINO sizes a string element as its C++ std::string (32 bytes); byte_size follows it.
_STRING_SIZE = 32


def _short_name(data_type: ir.DataType) -> str:
    return _OV_NAMES.get(data_type) or data_type.short_name()


_BY_NAME = {_short_name(d): d for d in ir.DataType}
_BY_NAME.update({"bool": ir.DataType.BOOL, "undefined": ir.DataType.UNDEFINED})


class Type:
    """An element type (OpenVINO's ``ov.Type``): ``Type.f32``, ``Type(np.uint8)``, ``Type("f16")``.

    Accepted by the constructor: a ``Type``, an ``onnx_ir.DataType``, a numpy
    dtype or scalar type (``np.float32``, ``float``, ``bool``, ``str``,
    ``bytes``), numpy's dtype strings (``"float32"``) or a short name
    (``"f32"``, ``"boolean"``, ``"dynamic"``).  Types are interned: there is one
    ``Type`` object per element type, so ``is`` and ``==`` agree.
    """

    __slots__ = ("_data_type",)
    _data_type: ir.DataType
    _interned: ClassVar[dict[ir.DataType, Type]] = {}

    f16: ClassVar[Type]
    f32: ClassVar[Type]
    f64: ClassVar[Type]
    bf16: ClassVar[Type]
    i4: ClassVar[Type]
    i8: ClassVar[Type]
    i16: ClassVar[Type]
    i32: ClassVar[Type]
    i64: ClassVar[Type]
    u2: ClassVar[Type]
    u4: ClassVar[Type]
    u8: ClassVar[Type]
    u16: ClassVar[Type]
    u32: ClassVar[Type]
    u64: ClassVar[Type]
    boolean: ClassVar[Type]
    string: ClassVar[Type]
    f8e4m3: ClassVar[Type]
    f8e5m2: ClassVar[Type]
    f4e2m1: ClassVar[Type]
    f8e8m0: ClassVar[Type]
    dynamic: ClassVar[Type]
    u1: ClassVar[Type]
    u3: ClassVar[Type]
    u6: ClassVar[Type]
    nf4: ClassVar[Type]

    def __new__(cls, dtype: Any) -> Type:
        if isinstance(dtype, Type) and type(dtype) is not Type:  # a packed type (u1, nf4, ...)
            return dtype
        if isinstance(dtype, str) and dtype in _PACKED:
            return _PACKED[dtype]
        data_type = _data_type_of(dtype)
        interned = cls._interned.get(data_type)
        if interned is None:
            interned = super().__new__(cls)
            interned._data_type = data_type
            cls._interned[data_type] = interned
        return interned

    def __reduce__(self) -> tuple[Any, ...]:
        return (Type, (self.to_string(),))

    # --- the onnx-ir view (inferplex's extension) ---------------------------------

    @property
    def data_type(self) -> ir.DataType:
        """The ``onnx_ir.DataType`` underneath (``UNDEFINED`` for ``dynamic``)."""
        return self._data_type

    # --- OpenVINO's queries -----------------------------------------------------------

    def is_dynamic(self) -> bool:
        return self._data_type == ir.DataType.UNDEFINED

    def is_static(self) -> bool:
        return not self.is_dynamic()

    def is_real(self) -> bool:
        """True for floating-point types (f16, bf16, f32, f64, the f8/f4 types)."""
        return not self.is_dynamic() and self._data_type.is_floating_point()

    def is_integral(self) -> bool:
        """True for every type that is not real (booleans and strings included, as OpenVINO)."""
        return not self.is_real()

    def is_integral_number(self) -> bool:
        """Integral and not boolean."""
        return self.is_integral() and self._data_type != ir.DataType.BOOL

    def is_signed(self) -> bool:
        """True for signed integers and floats; OpenVINO counts boolean as signed too."""
        if self.is_dynamic() or self._data_type == ir.DataType.STRING:
            return False
        return self._data_type == ir.DataType.BOOL or self._data_type.is_signed()

    def is_quantized(self) -> bool:
        """The types OpenVINO marks quantized: i4, u4, i8, u8, i32."""
        return self._data_type in _QUANTIZED

    def get_bitwidth(self) -> int:
        if self.is_dynamic():
            return 0
        if self._data_type == ir.DataType.STRING:
            return _STRING_SIZE * 8
        return self._data_type.bitwidth

    def get_size(self) -> int:
        """Bytes per element, rounded up for sub-byte types (u4: 1)."""
        return (self.get_bitwidth() + 7) // 8

    def get_type_name(self) -> str:
        return _short_name(self._data_type)

    def to_string(self) -> str:
        return self.get_type_name()

    def to_dtype(self) -> np.dtype[Any]:
        """The numpy dtype of this type's elements (``bytes_`` for strings)."""
        if self.is_dynamic():
            raise InputError("Type.dynamic has no numpy dtype; give a static element type")
        if self._data_type == ir.DataType.STRING:
            return np.dtype(np.bytes_)
        return np.dtype(self._data_type.numpy())

    def compatible(self, other: Type) -> bool:
        """True when the types are equal or either is dynamic."""
        other = Type(other)
        return self.is_dynamic() or other.is_dynamic() or self is other

    def merge(self, other: Type) -> Type | None:
        """The more specific of two compatible types; None when they conflict."""
        other = Type(other)
        if not self.compatible(other):
            return None
        return other if self.is_dynamic() else self

    size = property(get_size)
    bitwidth = property(get_bitwidth)
    type_name = property(get_type_name)
    real = property(is_real)
    integral = property(is_integral)
    integral_number = property(is_integral_number)
    signed = property(is_signed)
    quantized = property(is_quantized)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Type) and other._data_type == self._data_type

    def __hash__(self) -> int:
        return hash(("Type", int(self._data_type)))

    def __repr__(self) -> str:
        name = self.get_type_name()
        return f"<Type: '{_PRINTED_NAMES.get(name, name)}'>"

    __str__ = __repr__

    def c_type_name(self) -> str:
        """The element's C type as OpenVINO's op listings print it (``float``, ``int64_t``)."""
        name = self.get_type_name()
        return {"f32": "float", "f64": "double"}.get(name) or _PRINTED_NAMES.get(name, name)


def type_name(value: Any) -> str:
    """The short name of an element type given as a ``Type`` (inferplex's or openvino's), a numpy
    dtype or a name (``"f32"``); a name as given."""
    if isinstance(value, str):
        return value
    getter = getattr(value, "get_type_name", None)
    return str(getter()) if callable(getter) else Type(value).get_type_name()


def _data_type_of(dtype: Any) -> ir.DataType:
    if isinstance(dtype, Type):
        return dtype.data_type
    if isinstance(dtype, ir.DataType):
        return dtype
    if isinstance(dtype, str) and dtype in _BY_NAME:
        return _BY_NAME[dtype]
    if isinstance(dtype, type) and dtype in (str, bytes, np.str_, np.bytes_):
        return ir.DataType.STRING
    try:
        numpy_dtype = np.dtype(dtype)
    except TypeError as error:
        raise InputError(_unknown(dtype)) from error
    if numpy_dtype.kind in "SUT":  # bytes, str and numpy 2's StringDType
        return ir.DataType.STRING
    try:
        return ir.DataType.from_numpy(numpy_dtype)
    except TypeError as error:
        raise InputError(_unknown(dtype)) from error


def _unknown(dtype: Any) -> str:
    return (f"{dtype!r} is not an element type; accepted: a Type, a numpy dtype (np.float32, "
            f"'float32', bool, str), an onnx_ir.DataType or a short name "
            f"({', '.join(_ATTRIBUTE_NAMES)})")


_PACKED: dict[str, Type] = {}
for _name in _ATTRIBUTE_NAMES:
    setattr(Type, _name, Type(_BY_NAME[_name]))


class _PackedType(Type):
    """OpenVINO's packed types with no ONNX element type (u1, u3, u6, nf4): they name and size
    buffers (``Tensor(Type.u1, shape)``, ``pack_data``) but no model port can have them."""

    __slots__ = ("_bits", "_name", "_real")
    _bits: int
    _name: str
    _real: bool

    def __new__(cls, name: str, bits: int, real: bool = False) -> _PackedType:
        packed = object.__new__(cls)
        packed._data_type = ir.DataType.UNDEFINED
        packed._name, packed._bits, packed._real = name, bits, real
        return packed

    @property
    def data_type(self) -> ir.DataType:
        raise InputError(f"element type {self._name} has no ONNX equivalent; a model cannot use it")

    def is_dynamic(self) -> bool:
        return False

    def is_real(self) -> bool:
        return self._real

    def is_signed(self) -> bool:
        return False

    def is_quantized(self) -> bool:
        return False

    def get_bitwidth(self) -> int:
        return self._bits

    def get_type_name(self) -> str:
        return self._name

    def to_dtype(self) -> np.dtype[Any]:
        return np.dtype(np.uint8)

    def __eq__(self, other: object) -> bool:
        return other is self

    def __hash__(self) -> int:
        return hash(("Type", self._name))

    size = property(Type.get_size)
    bitwidth = property(get_bitwidth)
    type_name = property(get_type_name)
    real = property(is_real)
    signed = property(is_signed)
    quantized = property(is_quantized)


_PACKED.update({"u1": _PackedType("u1", 1), "u3": _PackedType("u3", 3), "u6": _PackedType("u6", 6),
           "nf4": _PackedType("nf4", 4, real=True)})
for _name, _packed in _PACKED.items():
    setattr(Type, _name, _packed)
