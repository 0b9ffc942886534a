"""OpenVINO element types, shapes and constant data as inferplex takes them.

OpenVINO's ``Constant.get_data()`` gives the raw storage of the types numpy lacks: bf16 as
float16 bits, the f8 types as uint8 bits, i4/u4 two to a byte.  :func:`constant_array`
reinterprets that storage (with ``ml_dtypes``), so every value keeps its number.
"""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np

from inferplex.api.reshape import parse_shape
from inferplex.api.types import Type
from inferplex.errors import InputError

__all__ = ["constant_array", "element_type", "partial_shape"]

_REINTERPRETED = {"bf16": ml_dtypes.bfloat16, "f8e4m3": ml_dtypes.float8_e4m3fn,
                  "f8e5m2": ml_dtypes.float8_e5m2}
"""Element types whose data OpenVINO hands out as other types' bits."""
_NIBBLES = {"u4": ml_dtypes.uint4, "i4": ml_dtypes.int4}
"""Element types stored two to a byte, the first in the low nibble."""


def element_type(ov_type: Any) -> Type:
    """inferplex's Type of an OpenVINO element type; InputError for one ONNX has no equivalent of."""
    name = ov_type.get_type_name()
    if name == "dynamic":
        raise InputError("element type 'dynamic': an ONNX value needs one element type")
    return Type(name)


def partial_shape(ov_shape: Any) -> str:
    """An OpenVINO PartialShape as the text inferplex's shapes take (``"[1..8,?,4]"``, ``"[...]"``)."""
    text = str(ov_shape.to_string())
    parse_shape(text)  # refuses what inferplex cannot take, naming it
    return text


def constant_array(constant: Any) -> np.ndarray:
    """A Constant's values as a numpy array of its own element type (a copy: OpenVINO's is its memory)."""
    name = constant.get_element_type().get_type_name()
    shape = [int(d) for d in constant.get_output_shape(0)]
    data = np.asarray(constant.get_data())
    if name in _REINTERPRETED:
        return data.view(_REINTERPRETED[name]).reshape(shape).copy()
    if name in _NIBBLES:
        raw = data.view(np.uint8).reshape(-1)
        pairs = np.stack([raw & 0x0F, raw >> 4], axis=-1).reshape(-1)[:int(np.prod(shape, dtype=np.int64))]
        values = pairs.astype(np.int8)
        if name == "i4":
            values = np.where(values > 7, values - 16, values).astype(np.int8)
        return values.astype(_NIBBLES[name]).reshape(shape)
    element_type(constant.get_element_type())  # refuses u1, nf4, ...: ONNX has no such type
    return np.array(data, copy=True).reshape(shape)
