"""Element types torch holds but barely computes: BitCast (opset 26), and the conversions Cast
makes to and from float8 and uint16/32/64 (:func:`held_cast`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import onnx_ir as ir
import torch

from inferplex.devices.gpu.ops._common import EXACT_DTYPES, attrs_reason, dtype_reason, first_reason
from inferplex.devices.gpu.ops._unsigned import WIDE_UNSIGNED
from inferplex.devices.gpu.registry import NodeInfo, register
from inferplex.devices.gpu.tensors import HELD_DTYPES


def _bitcast_supports(info: NodeInfo) -> str | None:
    reason = first_reason(attrs_reason(info, ("to",)),
                          dtype_reason(info, (0,), EXACT_DTYPES | WIDE_UNSIGNED))
    if reason is not None:
        return reason
    source, target = info.input_dtypes[0], ir.DataType(info.attr("to"))
    if target not in HELD_DTYPES:
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
    dtype = HELD_DTYPES[ir.DataType(info.attr("to"))]
    # Same element size: a view keeps the shape and reinterprets the bytes.
    return lambda x: x.view(dtype)


# --- casts to and from the types torch holds but barely computes ------------------------------

FLOAT8 = frozenset({ir.DataType.FLOAT8E4M3FN, ir.DataType.FLOAT8E4M3FNUZ, ir.DataType.FLOAT8E5M2,
                    ir.DataType.FLOAT8E5M2FNUZ})
CAST_HELD = FLOAT8 | WIDE_UNSIGNED
"""Element types Cast converts from and to beyond the computed ones."""
_FLOAT8_TORCH = {t: HELD_DTYPES[t] for t in FLOAT8}
_E4M3FN_OVERFLOW = 464.0
"""Halfway from float8_e4m3fn's largest value (448) to the next power step: beyond it, rounding to
nearest even leaves the type's range."""


def held_cast_reason(source: ir.DataType | None, target: ir.DataType) -> str | None:
    """Why Cast from ``source`` to ``target`` cannot run (None: it can), where either is held only."""
    if target in FLOAT8 and source is not None and source not in FLOAT8 and not source.is_floating_point():
        return f"Cast from {source.name} to {target.name} is not supported (floating sources only)"
    return None


def to_float8(target: ir.DataType, saturate: bool) -> Callable[[torch.Tensor], torch.Tensor]:
    """ONNX's cast to a float8 type: round to nearest even; ``saturate`` clamps out-of-range values
    and infinities to the largest finite value, else they become NaN (infinity for float8e5m2)."""
    dtype = _FLOAT8_TORCH[target]
    largest = torch.finfo(dtype).max

    def cast(x: torch.Tensor) -> torch.Tensor:
        wide = x.float() if x.dtype != torch.float64 else x
        if saturate:
            wide = torch.clamp(wide, -largest, largest)
        elif target == ir.DataType.FLOAT8E4M3FN:
            # torch's conversion saturates this type: ONNX asks for NaN beyond its range
            wide = torch.where(wide.abs() > _E4M3FN_OVERFLOW, torch.full_like(wide, float("nan")), wide)
        return wide.to(dtype)

    return cast


def held_cast(source: ir.DataType | None, target: ir.DataType, saturate: bool,
              target_dtype: torch.dtype) -> Callable[[torch.Tensor], torch.Tensor]:
    """Cast between element types where either side is float8 or uint16/32/64."""
    if target in FLOAT8:
        return to_float8(target, saturate)
    if source in FLOAT8 and not target_dtype.is_floating_point:
        return lambda x: x.float().to(target_dtype)  # via float32: exact, then truncating
    return lambda x: x.to(target_dtype)
