"""Lowerings that reinterpret element types: BitCast (opset 26), unsigned types included."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import onnx_ir as ir
import torch

from inferplex.devices.gpu.ops._common import EXACT_DTYPES, attrs_reason, dtype_reason, first_reason
from inferplex.devices.gpu.ops._unsigned import WIDE_UNSIGNED
from inferplex.devices.gpu.registry import NodeInfo, register

_HELD: dict[ir.DataType, torch.dtype] = {
    ir.DataType.FLOAT: torch.float32, ir.DataType.DOUBLE: torch.float64,
    ir.DataType.FLOAT16: torch.float16, ir.DataType.BFLOAT16: torch.bfloat16,
    ir.DataType.INT8: torch.int8, ir.DataType.INT16: torch.int16,
    ir.DataType.INT32: torch.int32, ir.DataType.INT64: torch.int64,
    ir.DataType.UINT8: torch.uint8, ir.DataType.UINT16: torch.uint16,
    ir.DataType.UINT32: torch.uint32, ir.DataType.UINT64: torch.uint64,
    ir.DataType.BOOL: torch.bool,
}


def _bitcast_supports(info: NodeInfo) -> str | None:
    reason = first_reason(attrs_reason(info, ("to",)),
                          dtype_reason(info, (0,), EXACT_DTYPES | WIDE_UNSIGNED))
    if reason is not None:
        return reason
    source, target = info.input_dtypes[0], ir.DataType(info.attr("to"))
    if target not in _HELD:
        return f"BitCast to {target.name} is not supported"
    if source is None:
        return "BitCast needs the input's element type"
    if source.itemsize != target.itemsize:
        return f"BitCast between {source.name} and {target.name} changes the element size"
    if ir.DataType.BOOL in (source, target) and source != target:
        # torch's bool holds only 0 and 1: other bytes would not round-trip
        return "BitCast to or from BOOL is not supported"
    return None


@register("BitCast", versions=(26, None), supports=_bitcast_supports, held_dtypes=WIDE_UNSIGNED)
def _bitcast(info: NodeInfo) -> Callable[..., Any]:
    dtype = _HELD[ir.DataType(info.attr("to"))]
    # Same element size: a view keeps the shape and reinterprets the bytes.
    return lambda x: x.view(dtype)
