"""Element types that cross into OpenVINO's Python API, and back, in a form of their own.

The CPU's OpenVINO engine (:mod:`.openvino_engine`) hands numpy arrays to
OpenVINO and reads its results as numpy arrays; three kinds of element need
converting on the way:

- bfloat16: OpenVINO's Python API carries bf16 data as float16-typed bits,
  both ways; and its ONNX frontend reads a bfloat16 tensor's ``int32_data`` as
  the integers themselves, so such tensors move to ``raw_data`` before it reads
  the model.
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

from inferplex.api import packed

__all__ = [
    "BFLOAT16",
    "PackedPort",
    "as_openvino_strings",
    "bf16_as_raw_data",
    "bf16_bits",
    "is_bf16",
    "pack_input",
    "packed_port",
    "unpack_output",
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


def is_bf16(port: Any) -> bool:
    """Whether an OpenVINO port is of element type bf16."""
    return bool(port.get_element_type().get_type_name() == "bf16")


def bf16_bits(value: Any) -> Any:
    """A bfloat16 array as the float16-typed bits OpenVINO's Python API takes for bf16 inputs."""
    if isinstance(value, np.ndarray) and value.dtype == BFLOAT16:
        return value.view(np.float16)
    return value


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
    import openvino

    array = np.asarray(value)
    codes = packed.to_codes(array.astype(port.dtype, copy=False), port.bits)
    return openvino.Tensor(packed.pack(codes, port.bits), list(array.shape), port.element)


def unpack_output(data: np.ndarray, port: PackedPort, shape: tuple[int, ...]) -> np.ndarray:
    """The values (of ``shape``) of an output OpenVINO gave as its packed bytes ``data``."""
    codes = packed.unpack(data, port.bits, int(np.prod(shape, dtype=np.int64)))
    return packed.from_codes(codes, port.dtype, shape)
