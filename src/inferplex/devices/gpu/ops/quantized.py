"""Lowerings: QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear and the integer kernels
MatMulInteger, ConvInteger, QLinearMatMul, QLinearConv.

Integer results are exact.  Products of 8-bit values summed over a reduction of
length K stay below 2**17 * K, so float64 represents every partial sum exactly
(K up to about 2**36): where torch has no integer kernel on the device, the
integer matmul (and QLinearConv) runs in float64 and is cast back, never rounded.
ConvInteger (``quantize_dynamic``'s convolutions, whose result is cast to float
at once) runs in float32 instead, on the fast float convolution kernels: exact
while every partial sum stays below 2**24 (about 258 products at the extremes of
the 8-bit ranges, far more for real weights); beyond, a sum is within float32
rounding of the exact one, as the Cast to float after it leaves it anyway.
Matmuls whose b is int8 with no zero point (the usual quantized weight) run on
torch's int8 kernel ``torch._int_mm`` with int32 sums, whatever a's type and zero
point (see :func:`integer_matmul`; on CUDA it takes M > 16 and K, N multiples of
8); other matmuls use the CPU's integer kernels, or float64 on CUDA.
The fused calls of quantized models (a QDQ MatMul as one int8 matmul, the
``quantize_dynamic`` chains) are in :mod:`._fused_quantized`; the GPU lowering's
fusion planning (:mod:`..optimize`) picks the nodes they replace.  On CUDA,
per-tensor 8-bit QuantizeLinear, DequantizeLinear and DynamicQuantizeLinear run
as one Triton kernel each (:mod:`._quantized_triton`), with the same numbers.
Requantization follows ONNX Runtime: the scale ratio is formed in the scales'
own type and applied to the integer sums in float32, rounded half to even and
saturated to the output type (in float64, a sum whose scaled value lies within
float32 rounding of a half would round the other way).  Float8 data quantizes
and dequantizes; int4/int2 constants (weight-only quantized weights) arrive
widened to 8 bits (:func:`..tensors.held_array`), int4/int2 tensors computed at
run time are refused.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import onnx_ir as ir
import torch

from inferplex.devices.gpu.ops import _quantized_triton as triton_kernels
from inferplex.devices.gpu.ops import nn
from inferplex.devices.gpu.ops._common import (
    FLOAT_DTYPES,
    attrs_reason,
    dtype_reason,
    first_reason,
    normalize_axis,
)
from inferplex.devices.gpu.ops._unsigned import narrow
from inferplex.devices.gpu.ops.types import FLOAT8, to_float8
from inferplex.devices.gpu.registry import NodeInfo, register

_QUANT = frozenset({ir.DataType.INT8, ir.DataType.UINT8, ir.DataType.INT16, ir.DataType.UINT16,
                    ir.DataType.INT32})
_EIGHT_BIT = frozenset({ir.DataType.INT8, ir.DataType.UINT8})
_HELD = frozenset({ir.DataType.UINT16}) | FLOAT8
_RANGES = {torch.int8: (-128, 127), torch.uint8: (0, 255), torch.int16: (-32768, 32767),
           torch.uint16: (0, 65535), torch.int32: (-(2**31), 2**31 - 1)}
_TORCH = {ir.DataType.INT8: torch.int8, ir.DataType.UINT8: torch.uint8, ir.DataType.INT16: torch.int16,
          ir.DataType.UINT16: torch.uint16, ir.DataType.INT32: torch.int32}


def _per_axis(param: torch.Tensor, x: torch.Tensor, axis: int, block: int) -> torch.Tensor:
    """A scale or zero point shaped to broadcast against ``x`` (per tensor, per axis or per block)."""
    if param.dim() == 0 or (param.numel() == 1 and block == 0):
        return param.reshape(())
    axis = normalize_axis(axis, x.dim())
    if block > 0:
        return param.repeat_interleave(block, dim=axis).narrow(axis, 0, x.shape[axis])
    shape = [1] * x.dim()
    shape[axis] = param.numel()
    return param.reshape(shape)


_EIGHT_BIT_TORCH = (torch.int8, torch.uint8)


def _per_tensor(x: torch.Tensor, scale: torch.Tensor, zero: torch.Tensor | None) -> bool:
    """Whether one scale (and zero point) covers ``x``, which is floating point or 8-bit integer data."""
    return scale.numel() == 1 and (zero is None or zero.numel() == 1) and x.dtype != torch.float64 \
        and scale.dtype != torch.float64


def _as_int(x: torch.Tensor) -> torch.Tensor:
    """Integer data widened to int64 (uint16 has no arithmetic kernels); float8 data as float32."""
    return x.to(torch.float32) if x.dtype.itemsize == 1 and x.is_floating_point() else x.to(torch.int64)


def _saturate(values: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Rounded float values clamped to ``dtype``'s range and cast (exact: they are integers)."""
    low, high = _RANGES[dtype]
    clamped = values.clamp(low, high)
    if dtype in (torch.int8, torch.uint8, torch.int16):
        return clamped.to(dtype)  # one cast: every value in range is a float32 integer
    clamped = clamped.to(torch.int64)
    return narrow(clamped, dtype) if dtype == torch.uint16 else clamped.to(dtype)


# --- QuantizeLinear / DequantizeLinear -------------------------------------------------


def _quantize_supports(info: NodeInfo) -> str | None:
    reason = first_reason(attrs_reason(info, ("axis", "saturate", "block_size", "output_dtype",
                                              "precision")),
                          dtype_reason(info, (0, 1), FLOAT_DTYPES),
                          dtype_reason(info, (2,), _QUANT | FLOAT8))
    if reason is None and _quantized_type(info) not in _TORCH and _quantized_type(info) not in FLOAT8:
        return f"QuantizeLinear to {_quantized_type(info).name} is not supported (float8/int4 types)"
    if reason is None and info.rank(0) is None and info.attr("axis", 1) != 1:
        return "QuantizeLinear per axis needs the input rank"
    return reason


def _quantized_type(info: NodeInfo) -> ir.DataType:
    if info.has_input(2) and info.input_dtypes[2] is not None:
        return info.input_dtypes[2]
    output = info.attr("output_dtype", 0)
    return ir.DataType(output) if output else ir.DataType.UINT8


@register("QuantizeLinear", versions=(10, None), supports=_quantize_supports, held_dtypes=_HELD)
def _quantize_linear(info: NodeInfo) -> Callable[..., Any]:
    axis_attr, block = int(info.attr("axis", 1)), int(info.attr("block_size", 0))
    if _quantized_type(info) in FLOAT8:
        return _quantize_float8(_quantized_type(info), bool(info.attr("saturate", 1)), axis_attr, block)
    dtype = _TORCH[_quantized_type(info)]

    def quantize(x: torch.Tensor, scale: torch.Tensor, zero: torch.Tensor | None = None) -> torch.Tensor:
        if dtype in _EIGHT_BIT_TORCH and _per_tensor(x, scale, zero) and triton_kernels.usable(x):
            return triton_kernels.quantize(x, scale, zero, dtype)  # the same numbers in one pass
        compute = torch.float64 if x.dtype == torch.float64 else torch.float32
        values = torch.round(x.to(compute) / _per_axis(scale, x, axis_attr, block).to(compute))
        if zero is not None:
            values = values + _per_axis(_as_int(zero), x, axis_attr, block).to(compute)
        return _saturate(values, dtype)

    return quantize


def _quantize_float8(target: ir.DataType, saturate: bool, axis: int, block: int) -> Callable[..., Any]:
    """QuantizeLinear to a float8 type: ``x / scale`` (the zero point is 0 for these types), rounded
    and saturated like Cast."""
    cast = to_float8(target, saturate)

    def quantize(x: torch.Tensor, scale: torch.Tensor, zero: torch.Tensor | None = None) -> torch.Tensor:
        compute = torch.float64 if x.dtype == torch.float64 else torch.float32
        return cast(x.to(compute) / _per_axis(scale, x, axis, block).to(compute))

    return quantize


def _dequantize_supports(info: NodeInfo) -> str | None:
    reason = first_reason(attrs_reason(info, ("axis", "block_size", "output_dtype")),
                          dtype_reason(info, (0, 2), _QUANT | FLOAT8), dtype_reason(info, (1,), FLOAT_DTYPES))
    output = info.attr("output_dtype", 0)
    if reason is None and output and ir.DataType(output) not in FLOAT_DTYPES:
        return f"DequantizeLinear to {ir.DataType(output).name} is not supported"
    return reason


@register("DequantizeLinear", versions=(10, None), supports=_dequantize_supports, held_dtypes=_HELD)
def _dequantize_linear(info: NodeInfo) -> Callable[..., Any]:
    axis_attr, block = int(info.attr("axis", 1)), int(info.attr("block_size", 0))
    output = info.attr("output_dtype", 0)
    out_dtype = nn_dtype(ir.DataType(output)) if output else None

    def dequantize(x: torch.Tensor, scale: torch.Tensor, zero: torch.Tensor | None = None) -> torch.Tensor:
        if x.dtype in _EIGHT_BIT_TORCH and _per_tensor(x, scale, zero) and triton_kernels.usable(x):
            return triton_kernels.dequantize(x, scale, zero, out_dtype or scale.dtype)  # one pass
        values = _as_int(x)
        if zero is not None:
            values = values - _per_axis(_as_int(zero), x, axis_attr, block)
        result = values.to(torch.float32) * _per_axis(scale, x, axis_attr, block).to(torch.float32)
        return result.to(out_dtype or scale.dtype)

    return dequantize


def nn_dtype(dtype: ir.DataType) -> torch.dtype:
    """The torch type of a floating ONNX type."""
    return {ir.DataType.FLOAT: torch.float32, ir.DataType.DOUBLE: torch.float64,
            ir.DataType.FLOAT16: torch.float16, ir.DataType.BFLOAT16: torch.bfloat16}[dtype]


@register("DynamicQuantizeLinear", versions=(11, None),
          supports=lambda info: first_reason(attrs_reason(info, ()),
                                             dtype_reason(info, (0,), frozenset({ir.DataType.FLOAT}))))
def _dynamic_quantize_linear(info: NodeInfo) -> Callable[..., Any]:
    def dynamic_quantize(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        if triton_kernels.usable(x):
            return triton_kernels.dynamic_quantize(x)
        scale, zero = dynamic_parameters(x)
        y = torch.clamp(torch.round(x / scale) + zero, 0, 255).to(torch.uint8)
        return y, scale, zero.to(torch.uint8)

    return dynamic_quantize


def dynamic_parameters(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """DynamicQuantizeLinear's scale and (rounded, float) zero point of ``x``.

    ONNX: the range always holds 0; ``scale = (max(high, 0) - min(low, 0)) / 255`` and
    ``zero = saturate(round(-min(low, 0) / scale))``, written here with ``-min(low, 0)`` as
    ``max(-low, 0)`` (``high - lo`` is ``high + (-lo)`` exactly).  An all-zero input has scale
    1, as ONNX Runtime gives it (any scale quantizes it to zeros): the clamped bounds are equal
    exactly where their difference is 0 (IEEE subtraction of two different finite numbers is
    never 0), so the test reads the difference.  ``-lo / scale`` is never below 0: only the
    upper clamp, which float rounding may need, is kept.  On a 0-d tensor each step is a
    kernel of its own in eager mode: ten here (twelve before these rewrites).
    """
    low, high = torch.aminmax(x) if x.numel() else (x.new_zeros(()), x.new_zeros(()))
    negated_low = torch.clamp(low.neg(), min=0)
    span = torch.clamp(high, min=0) + negated_low
    scale = torch.where(span == 0, 1.0, span / 255)
    return scale, torch.round(torch.clamp(negated_low / scale, max=255))


# --- integer matmul and convolution ------------------------------------------------------


def _centered(x: torch.Tensor, zero: torch.Tensor | None, shape: list[int] | None = None) -> torch.Tensor:
    """``x - zero`` in int32 (zero broadcast as ``shape`` when given)."""
    values = x.to(torch.int32)
    if zero is None:
        return values
    zero = zero.to(torch.int32)
    return values - (zero.reshape(shape) if shape is not None and zero.numel() > 1 else zero.reshape(()))


def integer_matmul(a: torch.Tensor, a_zero: torch.Tensor | None, b: torch.Tensor,
                   b_zero: torch.Tensor | None, int8_b: bool = False) -> torch.Tensor:
    """Exact int32 ``(a - a_zero) @ (b - b_zero)`` of 8-bit data (see the module docstring).

    ``int8_b``: b is int8 with no zero point (or a constant zero one), which lets the product run
    on torch's int8 kernel whatever a's type and zero point are.  a's zero point may be one per
    row (M) and b's one per column (N).
    """
    if int8_b:
        product = _int8_kernel(a, a_zero, b)
        if product is not None:
            return product
    a32, b32 = _centered(a, a_zero, [-1, 1]), _centered(b, b_zero, [1, -1])
    if a.device.type == "cpu":
        return torch.matmul(a32, b32)
    return torch.matmul(a32.to(torch.float64), b32.to(torch.float64)).to(torch.int32)


def _int8_kernel(a: torch.Tensor, a_zero: torch.Tensor | None, b: torch.Tensor) -> torch.Tensor | None:
    """``(a - a_zero) @ b`` on ``torch._int_mm`` (int8 x int8, int32 sums), None where it cannot run.

    uint8 data moves down by 128 into int8, and the shift comes back as one rank-1 correction:
    ``(a8 + c) @ b = a8 @ b + c * colsum(b)`` with ``c = 128 - a_zero`` (``-a_zero`` for int8 a).
    On CUDA the kernel takes M > 16 and K, N multiples of 8.
    """
    if b.dim() != 2 or a.dtype not in (torch.int8, torch.uint8):
        return None
    if a_zero is not None and a_zero.numel() > 1 and a.dim() != 2:
        return None
    rows = a.reshape(-1, a.shape[-1])
    if a.is_cuda and not (rows.shape[0] > 16 and rows.shape[1] % 8 == 0 and b.shape[1] % 8 == 0):
        return None
    shift = 128 if a.dtype == torch.uint8 else 0
    if shift:
        rows = (rows.to(torch.int16) - shift).to(torch.int8)
    # cuBLASLt's int8 kernels read the right operand column-major (a K x N row-major one is refused)
    acc = torch._int_mm(rows.contiguous(), b.t().contiguous().t())
    if shift or a_zero is not None:
        offset = shift - (0 if a_zero is None else a_zero.to(torch.int32).reshape(-1, 1))
        # torch sums integers into int64: keep the column sums int32, like the product
        acc = acc + offset * b.sum(0, keepdim=True, dtype=torch.int32)
    return acc.reshape(*a.shape[:-1], b.shape[1])


def zero_free_int8(info: NodeInfo, data: int, zero: int) -> bool:
    """Whether input ``data`` is int8 with no zero point, or a constant zero one."""
    value = info.const(zero) if info.has_input(zero) else None
    return info.input_dtypes[data] == ir.DataType.INT8 and (
        not info.has_input(zero) or (value is not None and not value.any()))


def _int_supports(info: NodeInfo, data: tuple[int, ...], zeros: tuple[int, ...]) -> str | None:
    return first_reason(dtype_reason(info, data + zeros, _EIGHT_BIT))


@register("MatMulInteger", versions=(10, None),
          supports=lambda info: first_reason(attrs_reason(info, ()), _int_supports(info, (0, 1), (2, 3))))
def _matmul_integer(info: NodeInfo) -> Callable[..., Any]:
    int8_b = zero_free_int8(info, 1, 3)

    def matmul_integer(a: torch.Tensor, b: torch.Tensor, a_zero: torch.Tensor | None = None,
                       b_zero: torch.Tensor | None = None) -> torch.Tensor:
        # a's zero point may be one per row (M), b's one per column (N).
        return integer_matmul(a, a_zero, b, b_zero, int8_b)

    return matmul_integer


def _requantize(acc: torch.Tensor, ratio: torch.Tensor, zero: torch.Tensor | None,
                dtype: torch.dtype) -> torch.Tensor:
    values = torch.round(acc.to(torch.float32) * ratio.to(torch.float32))
    if zero is not None:
        values = values + zero.to(torch.float32)
    return _saturate(values, dtype)


@register("QLinearMatMul", versions=(10, None),
          supports=lambda info: first_reason(attrs_reason(info, ()),
                                             _int_supports(info, (0, 3), (2, 5, 7)),
                                             dtype_reason(info, (1, 4, 6), FLOAT_DTYPES)))
def _qlinear_matmul(info: NodeInfo) -> Callable[..., Any]:
    int8_b = zero_free_int8(info, 3, 5)

    def qlinear_matmul(a: torch.Tensor, a_scale: torch.Tensor, a_zero: torch.Tensor, b: torch.Tensor,
                       b_scale: torch.Tensor, b_zero: torch.Tensor, y_scale: torch.Tensor,
                       y_zero: torch.Tensor) -> torch.Tensor:
        acc = integer_matmul(a, a_zero, b, b_zero, int8_b)
        # a's scale may be one per row (M), b's one per column (N).
        rows = a_scale.reshape(-1, 1) if a_scale.numel() > 1 else a_scale.reshape(())
        columns = b_scale.reshape(-1) if b_scale.numel() > 1 else b_scale.reshape(())
        return _requantize(acc, rows * columns / y_scale.reshape(()), y_zero, y_zero.dtype)

    return qlinear_matmul


def _conv_int_supports(info: NodeInfo, data: tuple[int, ...], zeros: tuple[int, ...]) -> str | None:
    known = ("auto_pad", "dilations", "group", "kernel_shape", "pads", "strides")
    rank = info.rank(0)
    if rank is not None and rank not in (3, 4, 5):
        return f"{info.op_type} on a rank-{rank} input is not supported (accepted: 1 to 3 spatial dims)"
    return first_reason(attrs_reason(info, known), _int_supports(info, data, zeros))


def _channel_shape(zero: torch.Tensor | None, rank: int) -> list[int] | None:
    return None if zero is None else [-1] + [1] * (rank - 1)


@register("ConvInteger", versions=(10, None), supports=lambda info: _conv_int_supports(info, (0, 1), (2, 3)))
def _conv_integer(info: NodeInfo) -> Callable[..., Any]:
    conv = nn.conv(info)

    def conv_integer(x: torch.Tensor, w: torch.Tensor, x_zero: torch.Tensor | None = None,
                     w_zero: torch.Tensor | None = None) -> torch.Tensor:
        # float32, not float64 (see the module docstring): every centered value (at most 255 in
        # magnitude) is exact in float32 and TF32, and sums below 2**24 are exact; rounding to
        # the nearest integer undoes what a transform-based algorithm (Winograd, FFT) adds.
        xs = _centered(x, x_zero).to(torch.float32)
        ws = _centered(w, w_zero, _channel_shape(w_zero, w.dim())).to(torch.float32)
        return torch.round(conv(xs, ws)).to(torch.int32)

    return conv_integer


@register("QLinearConv", versions=(10, None),
          supports=lambda info: first_reason(_conv_int_supports(info, (0, 3), (2, 5, 7)),
                                             dtype_reason(info, (1, 4, 6), FLOAT_DTYPES),
                                             dtype_reason(info, (8,), frozenset({ir.DataType.INT32}))))
def _qlinear_conv(info: NodeInfo) -> Callable[..., Any]:
    conv = nn.conv(info)

    def qlinear_conv(x: torch.Tensor, x_scale: torch.Tensor, x_zero: torch.Tensor, w: torch.Tensor,
                     w_scale: torch.Tensor, w_zero: torch.Tensor, y_scale: torch.Tensor,
                     y_zero: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
        xs = _centered(x, x_zero).to(torch.float64)
        ws = _centered(w, w_zero, _channel_shape(w_zero, w.dim())).to(torch.float64)
        acc = conv(xs, ws, None if bias is None else bias.to(torch.float64))
        ratio = (x_scale.reshape(()) * w_scale.reshape(-1) / y_scale.reshape(()))
        ratio = ratio.reshape([-1] + [1] * (x.dim() - 2)) if ratio.numel() > 1 else ratio.reshape(())
        return _requantize(acc, ratio, y_zero, y_zero.dtype)

    return qlinear_conv
