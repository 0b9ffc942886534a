"""``openvino.utils.types``' helpers: ``get_dtype`` (the numpy dtype of an element type),
``get_element_type`` and ``get_element_type_str`` (the element type of a numpy or Python type:
Python's ``float`` and ``int`` are f32 and i32 there, as in the opset functions) and
``make_constant_node``.

OpenVINO's samples fill request tensors with
``rs.uniform(...).astype(get_dtype(tensor.element_type))``.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np

from inferplex.api.types import Type
from inferplex.errors import InputError

__all__ = ["get_dtype", "get_element_type", "get_element_type_str", "make_constant_node"]

_log = logging.getLogger("inferplex")


def get_dtype(element_type: Any) -> np.dtype[Any]:
    """The numpy dtype of ``element_type`` (an ``ov.Type`` or a port's element type).

    >>> get_dtype(compiled.input(0).element_type)                 # doctest: +SKIP
    dtype('float32')
    """
    to_dtype = getattr(element_type, "to_dtype", None)
    if not callable(to_dtype):
        raise InputError(f"get_dtype takes an element type (ov.Type), got {type(element_type).__name__}")
    return np.dtype(to_dtype())


def get_element_type(data_type: Any) -> Type:
    """The element type of a numpy dtype or type, or of Python's ``float`` (f32) and ``int`` (i32),
    which have no width: OpenVINO's choice, with its warning."""
    if data_type is int or data_type is float:
        kind, width = ("integer", "i32") if data_type is int else ("float", "f32")
        _log.warning("Converting %s type of undefined bitwidth to 32-bit %s.", data_type.__name__, kind)
        return Type(width)
    try:
        return Type(np.dtype(data_type))
    except (TypeError, InputError) as error:
        raise InputError(f"get_element_type takes a numpy dtype or type, or Python's float, int or bool; "
                         f"got {data_type!r}") from error


def get_element_type_str(data_type: Any) -> str:
    """:func:`get_element_type` as its short name (``"f32"``)."""
    return get_element_type(data_type).get_type_name()


def make_constant_node(value: Any, dtype: Any = None, *, name: str | None = None) -> Any:
    """A Constant of ``value`` (a number or array) in ``dtype`` (a numpy or Python type, or an
    ``ov.Type``; None: the array's own), its friendly name prefixed by ``name + "/"`` where given."""
    from inferplex import opset

    array = np.asarray(value)
    element = array.dtype if dtype is None else dtype
    kind = element if isinstance(element, Type) else get_element_type(element)
    constant = opset.constant(array, kind)
    if name:
        constant.set_friendly_name(f"{name}/{constant.get_friendly_name()}")
    return constant
