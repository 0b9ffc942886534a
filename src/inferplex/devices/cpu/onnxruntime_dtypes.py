"""Float8 tensors across ONNX Runtime's Python API.

ONNX Runtime's ``InferenceSession.run`` takes and gives numpy arrays, and numpy
has no float8 type: it refuses ml_dtypes' float8 arrays as inputs ("Numpy_type
... can't be converted"), refuses uint8 arrays for a float8 input, gives a
FLOAT8E4M3FN output as uint8 and refuses the other float8 outputs ("No
corresponding Numpy type").  inferplex's arrays of float8 values are ml_dtypes'
(as the GPU device's and :class:`inferplex.Tensor`'s are), so a program with a
float8 input or output runs through ``run_with_ort_values``: float8 inputs go in
as ``OrtValue`` objects typed by ONNX element type over the arrays' bytes, and float8
outputs come back as copies of their bytes viewed as ml_dtypes' type.  Programs
without float8 tensors keep the plain ``run``.
"""

from __future__ import annotations

import ctypes
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import onnx_ir as ir
import onnxruntime as ort

from inferplex.devices.cpu.program import to_numpy
from inferplex.errors import InferenceError

__all__ = ["FLOAT8", "float8_ports", "run_with_float8"]

FLOAT8 = (ir.DataType.FLOAT8E4M3FN, ir.DataType.FLOAT8E4M3FNUZ, ir.DataType.FLOAT8E5M2,
          ir.DataType.FLOAT8E5M2FNUZ, ir.DataType.FLOAT8E8M0)
"""ONNX's float8 element types."""

_BY_ORT_TYPE = {f"tensor({dtype.name.lower()})": dtype for dtype in FLOAT8}
"""ONNX Runtime's type string of a float8 tensor (``tensor(float8e4m3fn)``) -> its element type."""


def float8_ports(ports: Iterable[Any]) -> dict[str, ir.DataType]:
    """Name -> element type of the float8 tensors among a session's inputs or outputs
    (``InferenceSession.get_inputs()`` / ``get_outputs()``)."""
    return {port.name: _BY_ORT_TYPE[port.type] for port in ports if port.type in _BY_ORT_TYPE}


def run_with_float8(session: ort.InferenceSession, output_names: list[str], feed: Mapping[str, Any],
                    inputs: Mapping[str, ir.DataType], outputs: Mapping[str, ir.DataType]) -> list[Any]:
    """``session.run(output_names, feed)`` for a session with float8 ``inputs`` / ``outputs``
    (name -> element type): every input goes in as an ``OrtValue``, every output comes back as a
    numpy array, float8 ones of ml_dtypes' type."""
    values = {name: _ort_value(name, value, inputs.get(name)) for name, value in feed.items()}
    results = session.run_with_ort_values(output_names, values)
    return [_array(result, outputs.get(name)) for name, result in zip(output_names, results, strict=True)]


def _ort_value(name: str, value: Any, dtype: ir.DataType | None) -> ort.OrtValue:
    """An input as an ``OrtValue``: sharing the array's memory, typed ``dtype`` where it is float8."""
    array = np.ascontiguousarray(to_numpy(value))
    if dtype is None:
        return ort.OrtValue.ortvalue_from_numpy(array)
    if array.dtype != dtype.numpy():
        raise InferenceError(f"input {name!r} is {array.dtype}; the model takes {dtype.numpy()} "
                             "(ml_dtypes' float8 type) there")
    return ort.OrtValue.ortvalue_from_numpy_with_onnx_type(array.view(np.uint8), dtype.value)


def _array(value: ort.OrtValue, dtype: ir.DataType | None) -> Any:
    """An output ``OrtValue`` as a numpy array; a float8 one as a copy of its bytes, viewed as
    ml_dtypes' type (``OrtValue.numpy()`` has no numpy type for it)."""
    if dtype is None:
        return value.numpy()
    shape = tuple(value.shape())
    size = value.tensor_size_in_bytes()
    if size == 0:
        return np.empty(shape, dtype.numpy())
    octets = (ctypes.c_uint8 * size).from_address(value.data_ptr())  # alive while `value` is
    return np.frombuffer(octets, np.uint8).copy().view(dtype.numpy()).reshape(shape)
