"""Element types that cross into OpenVINO's Python API, and back, in a form of their own.

The CPU's OpenVINO engine (:mod:`.openvino_engine`) hands numpy arrays to
OpenVINO and reads its results as numpy arrays; three kinds of element need
converting on the way:

- bfloat16 and float8: OpenVINO's Python API carries bf16 data as float16-typed
  bits and f8e4m3 / f8e5m2 / f8e8m0 data as uint8-typed bits, both ways;
  inferplex's arrays of them are ml_dtypes' (as the GPU device's are), so
  inputs are viewed as those bits and outputs viewed back.  And OpenVINO's ONNX
  frontend reads a bfloat16 tensor's ``int32_data`` as the integers themselves,
  so such tensors move to ``raw_data`` before it reads the model.
- Sub-byte types (``i4``, ``u4``, ``f4e2m1``, ``u2``, ``u1``, ...): OpenVINO keeps
  them packed (:mod:`inferplex.api.packed` has the layouts) and refuses one
  value per byte ("precision i8 vs i4").  An input's values (ml_dtypes
  ``int4``, ``uint4``, ...) are packed into an ``openvino.Tensor(bytes, shape,
  type)``; an output, which OpenVINO gives as its flat packed bytes, is unpacked
  into values of its shape.
- Strings: inferplex holds them in object arrays, which OpenVINO refuses; a
  numpy ``str`` array it takes.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx
from onnx_ir import DataType

from inferplex._openvino_package import openvino_package
from inferplex.api import packed

__all__ = [
    "BFLOAT16",
    "PackedPort",
    "as_openvino_strings",
    "bf16_as_raw_data",
    "pack_input",
    "packed_port",
    "unpack_output",
    "viewed_dtype",
    "viewed_input",
]

BFLOAT16 = DataType.BFLOAT16.numpy()


def bf16_as_raw_data(proto: onnx.ModelProto) -> None:
    """Move bfloat16 tensor data from ``int32_data`` to ``raw_data``, in place, everywhere in ``proto``.

    OpenVINO's ONNX frontend reads a bfloat16 tensor's ``int32_data`` as the
    integers themselves (1.0, stored as 16256, reads 16256.0); its ``raw_data``
    reads right.  ``onnx.helper.make_tensor`` writes bfloat16 as ``int32_data``.
    """
    _graph_as_raw_data(proto.graph)
    for function in proto.functions:
        _nodes_as_raw_data(function.node)


def _graph_as_raw_data(graph: onnx.GraphProto) -> None:
    for tensor in graph.initializer:
        _tensor_as_raw_data(tensor)
    _nodes_as_raw_data(graph.node)


def _nodes_as_raw_data(nodes: Iterable[onnx.NodeProto]) -> None:
    for node in nodes:
        for attribute in node.attribute:
            if attribute.HasField("t"):
                _tensor_as_raw_data(attribute.t)
            for tensor in attribute.tensors:
                _tensor_as_raw_data(tensor)
            if attribute.HasField("g"):
                _graph_as_raw_data(attribute.g)
            for graph in attribute.graphs:
                _graph_as_raw_data(graph)


def _tensor_as_raw_data(tensor: onnx.TensorProto) -> None:
    if tensor.data_type == onnx.TensorProto.BFLOAT16 and len(tensor.int32_data):
        tensor.raw_data = np.asarray(tensor.int32_data, dtype=np.uint16).tobytes()
        del tensor.int32_data[:]


_VIEWED = {"bf16": BFLOAT16, "f8e4m3": DataType.FLOAT8E4M3FN.numpy(),
           "f8e5m2": DataType.FLOAT8E5M2.numpy(), "f8e8m0": DataType.FLOAT8E8M0.numpy()}
"""OpenVINO element types its Python API carries as another type's bits -> inferplex's dtype
(ml_dtypes) for them: ONNX's BFLOAT16, FLOAT8E4M3FN, FLOAT8E5M2 and FLOAT8E8M0."""

_BITS = {BFLOAT16: np.dtype(np.float16)} | {
    dtype: np.dtype(np.uint8) for dtype in _VIEWED.values() if dtype.itemsize == 1}
"""inferplex's dtype -> the dtype of the bits OpenVINO's Python API takes for it."""


def viewed_dtype(port: Any) -> np.dtype[Any] | None:
    """inferplex's dtype for an OpenVINO port whose data OpenVINO's Python API gives and takes
    as another type's bits (bf16 as float16, float8 as uint8); None for any other type."""
    return _VIEWED.get(str(port.get_element_type().get_type_name()))


def viewed_input(value: Any, element: Any) -> Any:
    """An ``openvino.Tensor`` of element type ``element`` (bf16 or a float8 type) over the bits of
    ``value``'s elements (a bfloat16 or float8 array of ml_dtypes).

    A numpy array of the bits alone would be refused when shared ("precision u8 ... is f8e5m2"):
    the tensor carries the element type with them.
    """
    array = np.ascontiguousarray(value)
    bits = _BITS.get(array.dtype)
    if bits is None:
        return value  # another dtype: OpenVINO names the mismatch
    return openvino_package().Tensor(array.view(bits), list(array.shape), element)


def as_openvino_strings(value: Any) -> Any:
    """An object array of strings (as inferplex hands string inputs over) as a numpy ``str`` or
    ``bytes`` array, which OpenVINO takes as a string tensor (it refuses object arrays)."""
    if isinstance(value, np.ndarray) and value.dtype == object:
        return np.array(value.tolist())
    return value


_ONNX_TYPES = {"i4": DataType.INT4, "u4": DataType.UINT4, "f4e2m1": DataType.FLOAT4E2M1,
               "u2": DataType.UINT2, "i2": DataType.INT2}
"""OpenVINO sub-byte types that ONNX has too: inferplex's arrays of them are ONNX's numpy types
(ml_dtypes); the others (u1, u3, u6, nf4) are one uint8 code per element."""


@dataclass(frozen=True)
class PackedPort:
    """An OpenVINO input or output of a sub-byte element type."""

    element: Any
    """Its ``openvino.Type``."""
    bits: int
    """Bits per element (1 to 6)."""
    dtype: np.dtype[Any]
    """The numpy dtype of inferplex's arrays of its values (ml_dtypes ``int4``, ``uint4``, ...)."""


def packed_port(port: Any) -> PackedPort | None:
    """The packing of an OpenVINO port of a sub-byte type; None for any other type."""
    element = port.get_element_type()
    bits = packed.packed_bits(element)
    if not bits:
        return None
    onnx_type = _ONNX_TYPES.get(str(element.get_type_name()))
    return PackedPort(element, bits, np.dtype(onnx_type.numpy() if onnx_type else np.uint8))


def pack_input(value: Any, port: PackedPort) -> Any:
    """An ``openvino.Tensor`` of ``port``'s type holding ``value``'s elements, packed."""
    array = np.asarray(value)
    codes = packed.to_codes(array.astype(port.dtype, copy=False), port.bits)
    return openvino_package().Tensor(packed.pack(codes, port.bits), list(array.shape), port.element)


def unpack_output(data: np.ndarray, port: PackedPort, shape: tuple[int, ...]) -> np.ndarray:
    """The values (of ``shape``) of an output OpenVINO gave as its packed bytes ``data``."""
    codes = packed.unpack(data, port.bits, int(np.prod(shape, dtype=np.int64)))
    return packed.from_codes(codes, port.dtype, shape)
