"""numpy <-> torch conversions that keep memory shared where they can (bfloat16 and float8 included)."""

from __future__ import annotations

import numpy as np
import onnx_ir as ir
import torch

__all__ = ["HELD_DTYPES", "TORCH_DTYPES", "VIEWED_NUMPY_DTYPES", "held_array", "numpy_to_torch",
           "torch_to_numpy"]

TORCH_DTYPES: dict[ir.DataType, torch.dtype] = {
    ir.DataType.FLOAT: torch.float32, ir.DataType.DOUBLE: torch.float64,
    ir.DataType.FLOAT16: torch.float16, ir.DataType.BFLOAT16: torch.bfloat16,
    ir.DataType.INT8: torch.int8, ir.DataType.INT16: torch.int16,
    ir.DataType.INT32: torch.int32, ir.DataType.INT64: torch.int64,
    ir.DataType.UINT8: torch.uint8, ir.DataType.BOOL: torch.bool,
}
"""ONNX element types the GPU device computes exactly (torch lacks kernels for the others)."""
HELD_DTYPES: dict[ir.DataType, torch.dtype] = {
    **TORCH_DTYPES, ir.DataType.UINT16: torch.uint16, ir.DataType.UINT32: torch.uint32,
    ir.DataType.UINT64: torch.uint64,
    ir.DataType.FLOAT8E4M3FN: torch.float8_e4m3fn, ir.DataType.FLOAT8E4M3FNUZ: torch.float8_e4m3fnuz,
    ir.DataType.FLOAT8E5M2: torch.float8_e5m2, ir.DataType.FLOAT8E5M2FNUZ: torch.float8_e5m2fnuz,
}
"""Element types the GPU device holds: model inputs, outputs and constants may have them.  torch
stores uint16/32/64 and the float8 types but has few kernels for them, so only lowerings that
name them in ``held_dtypes`` (they widen, convert or reinterpret them) take nodes that touch them;
strings, complex, float4 and int2/int4 are not held at all (int2/int4 constants are widened,
see :func:`held_array`)."""

_WIDENED = {ir.DataType.INT4: np.int8, ir.DataType.UINT4: np.uint8, ir.DataType.INT2: np.int8,
            ir.DataType.UINT2: np.uint8}
"""Packed integer types torch lacks: their constants (int4 weights) are held as 8-bit values."""


def held_array(tensor: ir.TensorProtocol) -> np.ndarray | None:
    """A constant's values as the GPU holds them (None: a type it does not hold); int4/int2
    weights widened to int8/uint8, the same values, which DequantizeLinear and Cast then take."""
    if tensor.dtype in _WIDENED:
        return tensor.numpy().astype(_WIDENED[tensor.dtype])
    return tensor.numpy() if tensor.dtype in HELD_DTYPES else None


_FLOAT8 = {"float8_e4m3fn": torch.float8_e4m3fn, "float8_e4m3fnuz": torch.float8_e4m3fnuz,
           "float8_e5m2": torch.float8_e5m2, "float8_e5m2fnuz": torch.float8_e5m2fnuz}
"""ml_dtypes' float8 types (numpy's dtype name) and torch's, which share their bit layouts."""
VIEWED_NUMPY_DTYPES = frozenset({"bfloat16", *_FLOAT8})
"""numpy dtype names (ml_dtypes') that ``torch.from_numpy`` refuses: :func:`numpy_to_torch` reads
them through an integer view of the same bits."""


def numpy_to_torch(array: np.ndarray) -> torch.Tensor:
    """A torch tensor sharing ``array``'s memory (bfloat16 and float8 arrays of ml_dtypes included)."""
    array = np.asarray(array)
    # np.ascontiguousarray makes 0-d arrays 1-d: the reshape keeps scalars scalar.
    if array.dtype.name == "bfloat16":
        bits = np.ascontiguousarray(array).view(np.uint16).reshape(array.shape)
        return torch.from_numpy(bits).view(torch.bfloat16)
    if array.dtype.name in _FLOAT8:
        octets = np.ascontiguousarray(array).view(np.uint8).reshape(array.shape)
        return torch.from_numpy(octets).view(_FLOAT8[array.dtype.name])
    if not array.flags.writeable or not array.flags.c_contiguous:
        array = np.array(array, copy=True, order="C")
    return torch.from_numpy(array)


def torch_to_numpy(tensor: torch.Tensor) -> np.ndarray:
    """A host numpy array with ``tensor``'s values (bfloat16 becomes ml_dtypes.bfloat16)."""
    tensor = tensor.detach()
    if tensor.device.type != "cpu":
        tensor = tensor.cpu()
    if tensor.dtype == torch.bfloat16:
        import ml_dtypes

        return tensor.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    if tensor.dtype in _FLOAT8.values():
        import ml_dtypes

        name = next(n for n, t in _FLOAT8.items() if t == tensor.dtype)
        return tensor.view(torch.uint8).numpy().view(getattr(ml_dtypes, name))
    return tensor.numpy()
