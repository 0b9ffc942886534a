"""``ov.Tensor``: a typed, shaped host buffer that numpy sees as an array.

A tensor owns a flat buffer (its capacity) and shows the first ``size``
elements of it in its shape.  As in OpenVINO:

- ``Tensor(array)`` copies; ``Tensor(array, shared_memory=True)`` views the
  array's memory (which must be C-contiguous), so writes show on both sides.
- ``Tensor(array, shape, type)`` reads the array's bytes as ``type`` in
  ``shape`` (e.g. a uint16 or float16 array as ``Type.bf16``), sharing memory.
- ``Tensor(type, shape)`` allocates a tensor of zeros.
- Setting ``shape`` to one that fits the capacity reshapes in place; a larger
  shape reallocates a tensor that owns its memory (one made by copying or
  allocating, and the tensors an InferRequest hands out over its own memory),
  and is an error for one that views a caller's array.
- String tensors hold Python strings: ``str_data``/``bytes_data`` read and
  write them; ``data`` gives the bytes, as OpenVINO does.

Sub-byte types (``u1``, ``u2``, ``u3``, ``u4``, ``i4``, ``u6``, ``nf4``,
``f4e2m1``) are packed as in OpenVINO (:mod:`inferplex.api.packed`): ``data``
is the flat uint8 array (int8 for ``i4``) of the ``byte_size`` bytes, and
``Tensor(buffer, shape, Type.u4)`` reads a packed buffer in place.  numpy (and
a model's input) sees the element values: ``np.asarray(tensor)`` unpacks them
into ml_dtypes' ``int4``/``uint4``/... (uint8 for ``u1``, ``u3``, ``u6``,
``nf4``), and ``Tensor(int4_array)`` packs a copy.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np

from inferplex.api import packed
from inferplex.api.keywords import keyword_aliases
from inferplex.api.shapes import PartialShape, Shape, Strides
from inferplex.api.types import Type
from inferplex.errors import InputError

__all__ = ["Tensor", "tensor_from_file"]

_ACCEPTED = ("Tensor(array, shared_memory=False), Tensor(array, shape, type), "
             "Tensor(type, shape), Tensor(list) or Tensor(port)")


class Tensor:
    """A host tensor (OpenVINO's ``ov.Tensor``); see the module docstring for the constructors."""

    __slots__ = ("_array", "_buffer", "_dims", "_owned", "_type")
    _array: np.ndarray
    _buffer: Any
    _dims: tuple[int, ...] | None
    """The shape of a packed (sub-byte) tensor, whose ``_array`` is its flat bytes; None otherwise."""
    _owned: bool
    _type: Type

    def __init__(self, *args: Any, shared_memory: bool = False, **kwargs: Any) -> None:
        args = _positional(args, kwargs)
        if not args:
            raise InputError(f"Tensor needs arguments; accepted: {_ACCEPTED}")
        first = args[0]
        if isinstance(first, Tensor) and len(args) == 3:
            self._roi(first, args[1], args[2])
        elif isinstance(first, np.ndarray) and len(args) == 1:
            self._from_array(first, shared_memory)
        elif isinstance(first, np.ndarray) and len(args) in (2, 3):
            self._view_bytes(first, _shape_of(args[1]), Type(args[2]) if len(args) == 3 else None)
        elif isinstance(first, (list, tuple, np.generic, int, float, bool, str, bytes)):
            if len(args) == 2:
                self._allocate(Type(first), _shape_of(args[1]))
            else:
                self._from_array(np.array(first), shared_memory=False)
        elif hasattr(first, "get_element_type") and hasattr(first, "get_partial_shape"):
            self._from_port(first, args[1] if len(args) == 2 else None)
        elif len(args) == 2:
            self._allocate(Type(first), _shape_of(args[1]))
        elif len(args) == 1 and hasattr(first, "__array__"):  # PIL images, array-likes
            self._from_array(np.asarray(first), shared_memory)
        else:
            raise InputError(f"Tensor cannot be built from {', '.join(type(a).__name__ for a in args)}"
                             f"; accepted: {_ACCEPTED}")

    def _from_port(self, port: Any, array: np.ndarray | None) -> None:
        """A tensor of ``port``'s type and shape (empty for a dynamic shape), over ``array``'s memory
        when given; a mismatch of size or type is warned about, as OpenVINO does."""
        element = port.get_element_type()
        partial = port.get_partial_shape()
        shape = tuple(partial.to_shape()) if partial.is_static else (0,)
        if array is None:
            self._allocate(element, shape)
            return
        if not partial.is_static:
            shape = (0,)
        needed = _nbytes(element, math.prod(shape))
        if array.nbytes < needed:
            raise InputError("Shape of the port exceeds shape of the array. The port needs "
                             f"{needed} bytes, the array holds {array.nbytes}")
        if partial.is_static and (array.nbytes != needed or array.dtype != element.to_dtype()):
            warnings.warn(f"the array ({array.dtype}, {array.nbytes} bytes) does not match the port "
                          f"({element.get_type_name()}, {needed} bytes); its memory is read as the "
                          "port's type",
                          RuntimeWarning, stacklevel=3)
        self._view_bytes(array, shape, element)

    def _roi(self, parent: Tensor, begin: Any, end: Any) -> None:
        """A region of ``parent`` from ``begin`` to ``end`` (OpenVINO's ROI tensor), sharing memory."""
        if parent._type.get_bitwidth() < 8:
            raise InputError("an ROI tensor cannot be made for types with bitwidths less then 8 bit")
        low, high = list(begin), list(end)
        if len(low) != parent._array.ndim or len(high) != parent._array.ndim:
            raise InputError(f"ROI begin {low} and end {high} need one entry per dimension of "
                             f"shape {list(parent._array.shape)}")
        region = parent._array[tuple(slice(b, e) for b, e in zip(low, high, strict=True))]
        self._type, self._buffer, self._owned, self._array = parent._type, region, False, region
        self._dims = None

    # --- construction ---------------------------------------------------------------

    def _from_array(self, array: np.ndarray, shared_memory: bool) -> None:
        element = Type(array.dtype)
        bits = packed.packed_bits(element)
        if bits:  # ml_dtypes' int4, uint4, ...: one element per byte, packed into a copy
            codes = packed.pack(packed.to_codes(array, bits), bits)
            self._set(element, codes, tuple(array.shape), owned=True)
            return
        if element == Type.string:
            shared_memory = False
            array = np.vectorize(_as_str, otypes=[object])(array) if array.size else \
                array.astype(object)
        if shared_memory and not array.flags.c_contiguous:
            raise InputError("Tensor(array, shared_memory=True) needs a C-contiguous array; "
                             "pass np.ascontiguousarray(array), or shared_memory=False to copy")
        if not shared_memory:
            array = np.array(array, order="C", copy=True)
            self._set(element, array.reshape(-1), tuple(array.shape), owned=True)
            return
        self._set(element, _bytes_of(array).view(array.dtype), tuple(array.shape), owned=False)

    def _view_bytes(self, array: np.ndarray, shape: tuple[int, ...], element: Type | None) -> None:
        element = Type(array.dtype) if element is None or element.is_dynamic() else element
        if element == Type.string or array.dtype.kind in "OUS":
            raise InputError("Tensor(array, shape, type) reads an array's bytes; string tensors "
                             "are made with Tensor(array_of_str)")
        if not array.flags.c_contiguous:
            raise InputError("Tensor(array, shape, type) shares the array's memory and needs a "
                             "C-contiguous array; pass np.ascontiguousarray(array)")
        dtype = element.to_dtype()
        needed = _nbytes(element, math.prod(shape))
        if array.nbytes < needed:
            raise InputError(f"the array holds {array.nbytes} bytes but a {element.get_type_name()} "
                             f"tensor of shape {list(shape)} needs {needed}")
        if packed.packed_bits(element):
            self._set(element, _bytes_of(array), shape, owned=False)
            return
        flat = _bytes_of(array)[: array.nbytes - array.nbytes % dtype.itemsize]
        self._set(element, flat.view(dtype), shape, owned=False)

    def _allocate(self, element: Type, shape: tuple[int, ...]) -> None:
        element = Type(element)
        if element.is_dynamic():
            raise InputError("a tensor needs a static element type, got Type.dynamic")
        self._set(element, _zeros(element, math.prod(shape)), shape, owned=True)

    def _set(self, element: Type, buffer: np.ndarray, shape: tuple[int, ...], owned: bool) -> None:
        """Show ``buffer`` (elements; for a packed type, its bytes) as a tensor of ``shape``."""
        self._type, self._buffer, self._owned = element, buffer, owned
        if packed.packed_bits(element):
            self._dims = tuple(int(d) for d in shape)
            raw = buffer[: _nbytes(element, math.prod(shape))]
            self._array = raw.view(np.int8 if element.get_type_name() == "i4" else np.uint8)
            return
        self._dims = None
        self._array = buffer[: math.prod(shape)].reshape(shape)

    # --- OpenVINO's API ----------------------------------------------------------------

    @property
    def data(self) -> np.ndarray:
        """A numpy view of the tensor (for strings, a copy as bytes)."""
        if self._type == Type.string:
            return self.bytes_data
        return self._array

    def get_element_type(self) -> Type:
        return self._type

    def get_shape(self) -> Shape:
        return Shape(self._dims if self._dims is not None else self._array.shape)

    def set_shape(self, shape: Any) -> None:
        """Reshape in place when the capacity allows, else reallocate (owned tensors only)."""
        dims = _shape_of(shape)
        size = math.prod(dims)
        if (_nbytes(self._type, size) if self._dims is not None else size) <= self._buffer.size:
            self._set(self._type, self._buffer, dims, self._owned)
        elif self._owned:
            self._set(self._type, _zeros(self._type, size), dims, owned=True)
        else:
            raise InputError(f"set_shape failed: cannot set shape {list(dims)} on a tensor that shares "
                             f"a caller's memory of {self._buffer.size} elements; it would need {size}. "
                             "Accepted: shapes that fit that memory; for a larger one, copy into a "
                             "tensor that owns its memory (ov.Tensor(type, shape))")

    def get_size(self) -> int:
        return math.prod(self._dims) if self._dims is not None else int(self._array.size)

    def get_byte_size(self) -> int:
        if self._dims is not None:  # packed: whole bytes (3-byte groups for u3 and u6)
            return _nbytes(self._type, self.get_size())
        return (self.get_size() * self._type.get_bitwidth() + 7) // 8

    def get_strides(self) -> Strides:
        """Byte strides per dimension; sub-byte types (u1, u4, i4, ...) have none, as in OpenVINO."""
        if self._type.get_bitwidth() < 8:
            raise InputError("Could not get strides for types with bitwidths less then 8 bit. "
                             f"This tensor is {self._type.get_type_name()}.")
        if self._type == Type.string:
            item = self._type.get_size()
            dims = self._array.shape
            return Strides(item * math.prod(dims[i + 1:]) for i in range(len(dims)))
        return Strides(self._array.strides)

    def is_continuous(self) -> bool:
        return bool(self._array.flags.c_contiguous)

    element_type = property(get_element_type)
    shape = property(get_shape, set_shape)
    size = property(get_size)
    byte_size = property(get_byte_size)
    strides = property(get_strides)

    @keyword_aliases(target_tensor="target")
    def copy_to(self, target: Tensor) -> None:
        """Copy into ``target``, reshaping it to this shape; the element types must match."""
        if not isinstance(target, Tensor):
            raise InputError(f"copy_to takes a Tensor, got {type(target).__name__}")
        target.copy_from(self)

    @keyword_aliases(source_tensor="source")
    def copy_from(self, source: Tensor | np.ndarray) -> None:
        """Copy ``source`` (a Tensor or array of this element type) in, taking its shape."""
        if isinstance(source, np.ndarray):
            source = Tensor(source, shared_memory=source.flags.c_contiguous)
        if not isinstance(source, Tensor):
            raise InputError(f"copy_from takes a Tensor or a numpy array, got "
                             f"{type(source).__name__}")
        if source.element_type != self._type:
            raise InputError(f"cannot copy a {source.element_type.get_type_name()} tensor into a "
                             f"{self._type.get_type_name()} "
                             "tensor; element types must be equal")
        self.set_shape(source.get_shape())
        self._array[...] = source._array

    @property
    def str_data(self) -> np.ndarray:
        """The strings of a string tensor, as a numpy array of ``str``; settable."""
        self._check_string("str_data")
        return self._array.astype(str) if self._array.size else np.zeros(self._array.shape, str)

    @str_data.setter
    def str_data(self, values: Any) -> None:
        self._set_strings(values)

    @property
    def bytes_data(self) -> np.ndarray:
        """The strings of a string tensor as UTF-8 bytes; settable."""
        self._check_string("bytes_data")
        encoded = [s.encode() for s in self._array.reshape(-1)]
        return np.array(encoded, dtype=np.bytes_).reshape(self._array.shape)

    @bytes_data.setter
    def bytes_data(self, values: Any) -> None:
        self._set_strings(values)

    def _check_string(self, what: str) -> None:
        if self._type != Type.string:
            raise InputError(f"{what} is for string tensors; this tensor is {self._type.get_type_name()} "
                             "(use .data)")

    def _set_strings(self, values: Any) -> None:
        self._check_string("setting strings")
        array = np.asarray(values)
        self.set_shape(array.shape)
        if array.size:
            self._array[...] = np.vectorize(_as_str, otypes=[object])(array)

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        if self._dims is not None:  # packed: the element values, unpacked into a new array
            if copy is False:
                raise ValueError(f"a {self._type.get_type_name()} tensor is packed: numpy sees its values "
                                 "only in a new array (np.array(tensor)); tensor.data views its bytes")
            bits = packed.packed_bits(self._type)
            codes = packed.unpack(self._array, bits, self.get_size())
            values = packed.from_codes(codes, self._type.to_dtype(), self._dims)
            return values if dtype is None else values.astype(dtype)
        array = self._array if self._type != Type.string else self.str_data.astype(object)
        if dtype is not None and np.dtype(dtype) != array.dtype:
            return array.astype(dtype)
        return array.copy() if copy else array

    def __repr__(self) -> str:
        return f"<Tensor: shape{self.get_shape()} type: {self._type.get_type_name()}>"


def tensor_owning(array: np.ndarray) -> Tensor:
    """A tensor over ``array``, which nobody else writes to (an InferRequest's own input or result
    array): it shares the memory while its shape fits, and a larger shape reallocates it, as
    OpenVINO's request tensors do.  An array that is not C-contiguous, or holds strings or
    sub-byte values, is copied."""
    if not array.flags.c_contiguous or array.dtype.kind in "OUS" \
            or packed.packed_bits(Type(array.dtype)):
        return Tensor(array)
    tensor = Tensor.__new__(Tensor)
    tensor._set(Type(array.dtype), array.reshape(-1), tuple(array.shape), owned=True)  # noqa: SLF001
    return tensor


def tensor_from_file(path: Any) -> Tensor:
    """A u8 tensor of a file's bytes, memory-mapped read-only (OpenVINO's ``ov.tensor_from_file``)."""
    import os

    try:
        data = np.memmap(os.fspath(path), dtype=np.uint8, mode="r") if os.path.getsize(path) else \
            np.zeros(0, np.uint8)
    except OSError as error:
        raise InputError(f"tensor_from_file cannot read {os.fspath(path)!r}: {error}") from error
    tensor = Tensor.__new__(Tensor)
    tensor._set(Type.u8, data, (data.size,), owned=False)  # noqa: SLF001
    return tensor


def _bytes_of(array: np.ndarray) -> np.ndarray:
    """The bytes of a C-contiguous array as a flat uint8 view through one memoryview, so the
    tensor holds one reference to the caller's array however many views it makes (as OpenVINO's
    tensor holds one).  ml_dtypes' types (isbuiltin 2; float8_e5m2 is of kind "f") have no
    buffer format: their arrays are viewed directly."""
    if array.size == 0 or array.dtype.kind in "OV" or array.dtype.isbuiltin == 2:
        return array.reshape(-1).view(np.uint8)
    return np.frombuffer(memoryview(array).cast("B"), dtype=np.uint8)  # type: ignore[arg-type]


def _positional(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, ...]:
    """OpenVINO's keyword spellings (``array=``, ``type=``/``shape=``, ``port=``) as positions."""
    if not kwargs:
        return args
    orders = [("array", "shape", "type"), ("type", "shape"), ("port", "array"), ("other", "begin", "end")]
    if args:
        fitting = [o for o in orders if set(kwargs) <= set(o[len(args):])]
    else:
        fitting = [o for o in orders if o[0] in kwargs]
    if fitting:
        given, rest = list(args), dict(kwargs)
        for name in fitting[0][len(args):]:
            if name not in rest:
                break
            given.append(rest.pop(name))
        if not rest:
            return tuple(given)
    raise InputError(f"Tensor got unexpected keyword arguments {sorted(kwargs)}; accepted: {_ACCEPTED}")


def _as_str(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _zeros(element: Type, size: int) -> np.ndarray:
    """A buffer for ``size`` elements (for a packed type, its bytes)."""
    if element == Type.string:
        return np.full(size, "", dtype=object)
    if packed.packed_bits(element):
        return np.zeros(_nbytes(element, size), dtype=np.uint8)
    return np.zeros(size, dtype=element.to_dtype())


def _nbytes(element: Type, size: int) -> int:
    """Bytes that ``size`` elements of ``element`` take (packed for sub-byte types)."""
    bits = packed.packed_bits(element)
    return packed.packed_size(bits, size) if bits else size * element.get_size()


def _shape_of(shape: Any) -> tuple[int, ...]:
    if isinstance(shape, PartialShape):
        return tuple(shape.to_shape())
    if isinstance(shape, (int, np.integer)):
        raise InputError(f"a tensor shape is a list of dims, got the int {shape}; "
                         f"write [{shape}]")
    return tuple(Shape(shape))
