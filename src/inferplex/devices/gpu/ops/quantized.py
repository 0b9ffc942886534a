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
:func:`quantized_linear` runs a MatMul of two DequantizeLinear outputs (a QDQ
model's) on the same int8 kernel; the GPU lowering's fusion planning
(:mod:`..optimize`) picks the nodes it replaces.
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

import numpy as np
import onnx_ir as ir
import torch
import torch.nn.functional as F

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
        scale, zero = _dynamic_parameters(x)
        y = torch.clamp(torch.round(x / scale) + zero, 0, 255).to(torch.uint8)
        return y, scale, zero.to(torch.uint8)

    return dynamic_quantize


def _dynamic_parameters(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
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


def dynamic_quantize_centered(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """DynamicQuantizeLinear's data, centered, and scale: ``y - zero`` in ``x``'s floating type
    (exact: at most 255 in magnitude), for convolutions that read nothing else of it (see
    :func:`dynamic_quantized_conv`; the zero point, which they do not read, is not made: the
    lowering's third output is None).

    ``clamp(round(x / scale) + zero, 0, 255) - zero`` runs as the division and one fake-quantize
    kernel (scale 1, which rounds half to even and adds the zero point after rounding, as ONNX
    does) instead of a chain of passes and a uint8 tensor.  Under ``torch.compile`` it is written
    out as those elementwise ops, which Inductor fuses into one pass (it has no lowering of the
    fake-quantize kernel and would call it as an opaque op, with the mask it writes besides).
    """
    if triton_kernels.usable(x):
        return triton_kernels.dynamic_quantize_centered(x)
    scale, zero = _dynamic_parameters(x)
    if torch.compiler.is_compiling():
        return torch.clamp(torch.round(x / scale) + zero, 0, 255) - zero, scale
    one = torch.ones((), dtype=torch.float32, device=x.device)
    return torch.fake_quantize_per_tensor_affine(x / scale, one, zero.to(torch.int32), 0, 255), scale


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
    acc = torch._int_mm(rows.contiguous(), b.contiguous())
    if shift or a_zero is not None:
        offset = shift - (0 if a_zero is None else a_zero.to(torch.int32).reshape(-1, 1))
        # torch sums integers into int64: keep the column sums int32, like the product
        acc = acc + offset * b.sum(0, keepdim=True, dtype=torch.int32)
    return acc.reshape(*a.shape[:-1], b.shape[1])


_CUDA_MIN_ROWS = 17
"""``torch._int_mm`` on CUDA takes more than 16 rows."""


def quantized_linear_arrays(weight: np.ndarray, transposed: bool, activation_scale: np.ndarray,
                            weight_scale: np.ndarray, offset: int
                            ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The int8 N x K weight, the int32 correction (1 x N) and the float32 scale products (N or 1)
    that :func:`quantized_linear` takes, from a QDQ MatMul's constants (weight N x K if
    ``transposed``, else K x N).  N x K rows make the K x N operand column-major, the layout
    cuBLASLt's int8 kernels read.  ``offset``: ``128 - za`` for uint8 data, ``-za`` for int8."""
    nk = np.ascontiguousarray(weight if transposed else weight.T, dtype=np.int8)
    correction = (offset * nk.sum(axis=1, dtype=np.int64)).astype(np.int32).reshape(1, -1)
    scales = (activation_scale.astype(np.float32).reshape(()) * weight_scale.astype(np.float32).reshape(-1))
    return nk, correction, scales.astype(np.float32)


def quantized_linear(a: torch.Tensor, weight: torch.Tensor, correction: torch.Tensor | None,
                     scales: torch.Tensor, bias: torch.Tensor | None, out_dtype: torch.dtype,
                     a_scale: torch.Tensor | None = None, a_zero: int = 0) -> torch.Tensor:
    """``DequantizeLinear(a) @ DequantizeLinear(weight) (+ bias)`` as one int8 matmul.

    ``a``: 8-bit data (..., K); ``weight``: int8 N x K (the matmul's K x N operand transposed)
    with zero point 0; ``scales``: float32 ``a_scale * w_scale`` per tensor or per output column.
    Same numbers as ONNX's ops up to float32 rounding:
    ``sum_k (a_k - za) sa * w_kn sw_n = (sa sw_n) * sum_k (a_k - za) w_kn`` and the integer sum is
    exact in int32 (K <= 2**16), so only the float32 rounding of the products and the sum differs.
    uint8 ``a`` moves down by 128 into int8 (see :func:`_int8_rows_matmul`); that shift and a's zero
    point come back exactly as the int32 ``correction``, ``(128 - za) * colsum`` (None when 0).
    With ``a_scale``, ``a`` is the float input of the QuantizeLinear before (same scale and zero
    point) and is quantized here as ONNX does, ``clamp(round(a / a_scale) + za)``, straight to
    the int8 rows: ``a_zero`` is ``za - 128`` for uint8 data (``za`` for int8), whose range
    [0, 255] moves to [-128, 127] with it.
    """
    if triton_kernels.usable(a):  # the same numbers in two kernels
        if a_scale is not None:
            a = triton_kernels.quantize(a, a_scale, a_zero, torch.int8)
        return triton_kernels.int8_linear(a, weight, correction, None, 1, scales, bias, out_dtype)
    if a_scale is not None:
        values = torch.round(a.to(torch.float32) / a_scale) + a_zero
        a = values.clamp(-128, 127).to(torch.int8)
    acc = _int8_rows_matmul(a, weight)
    if correction is not None:
        acc = acc + correction
    # int32 x float32 promotes to float32 inside the one kernel
    result = acc * scales if bias is None else torch.addcmul(bias, acc, scales)
    return result.reshape(*a.shape[:-1], weight.shape[0]).to(out_dtype)


def dynamic_quantized_linear(a: torch.Tensor, zero: torch.Tensor | None, weight: torch.Tensor,
                             column_sums: torch.Tensor, scale: torch.Tensor, bias: torch.Tensor | None,
                             out_dtype: torch.dtype) -> torch.Tensor:
    """``Cast(MatMulInteger(a, weight, zero), float) * scale (+ bias)``, as ``quantize_dynamic``
    writes a MatMul (and the Add of a Gemm's bias).

    ``a``: 8-bit data (..., K) with a per-tensor ``zero`` point computed at run time
    (DynamicQuantizeLinear's, or None); ``weight``: int8 N x K, zero point 0, with its int32
    ``column_sums`` (1 x N); ``scale``: float32, per tensor or per output column; ``bias``:
    float32, one per output column, or None.  The integer product is exact as in
    :func:`integer_matmul`; the float32 product (and sum) is the Cast, Mul (and Add)'s up to
    float32 rounding.
    """
    shift = 128 if a.dtype == torch.uint8 else 0
    if triton_kernels.usable(a):  # the same numbers in one kernel
        columns = column_sums if shift or zero is not None else None
        return triton_kernels.int8_linear(a, weight, columns, zero, shift, scale.reshape(-1), bias, out_dtype)
    acc = _int8_rows_matmul(a, weight)
    offset = shift if zero is None else shift - zero.to(torch.int32).reshape(())
    acc = acc + offset * column_sums
    result = acc * scale.reshape(-1) if bias is None else torch.addcmul(bias, acc, scale.reshape(-1))
    return result.reshape(*a.shape[:-1], weight.shape[0]).to(out_dtype)


def _int8_rows_matmul(a: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """int32 ``rows(a) @ weight.T`` on ``torch._int_mm``, uint8 ``a`` moved down by 128 into int8
    (``a ^ 0x80`` read as int8); on CUDA fewer than 17 rows are padded with zeros (the kernel's rule)."""
    rows = a.reshape(-1, a.shape[-1])
    count = rows.shape[0]
    if rows.dtype == torch.uint8:
        rows = torch.bitwise_xor(rows, 0x80).view(torch.int8)
    if rows.is_cuda and count < _CUDA_MIN_ROWS:
        rows = F.pad(rows, (0, 0, 0, _CUDA_MIN_ROWS - count))
    return torch._int_mm(rows.contiguous(), weight.t())[:count]


def _zero_free_int8(info: NodeInfo, data: int, zero: int) -> bool:
    """Whether input ``data`` is int8 with no zero point, or a constant zero one."""
    value = info.const(zero) if info.has_input(zero) else None
    return info.input_dtypes[data] == ir.DataType.INT8 and (
        not info.has_input(zero) or (value is not None and not value.any()))


def _int_supports(info: NodeInfo, data: tuple[int, ...], zeros: tuple[int, ...]) -> str | None:
    return first_reason(dtype_reason(info, data + zeros, _EIGHT_BIT))


@register("MatMulInteger", versions=(10, None),
          supports=lambda info: first_reason(attrs_reason(info, ()), _int_supports(info, (0, 1), (2, 3))))
def _matmul_integer(info: NodeInfo) -> Callable[..., Any]:
    int8_b = _zero_free_int8(info, 1, 3)

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
    int8_b = _zero_free_int8(info, 3, 5)

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


DYNAMIC_CONV_WEIGHT_FACTOR = 2.0 ** -16
"""Under a reduced precision the centered 8-bit weight is stored times this power of two: exact
in f16 and bf16, and sums of up to 65000 products of 255 x 255 stay within f16's range."""


_WEIGHT_FACTOR_INVERSE = 1.0 / DYNAMIC_CONV_WEIGHT_FACTOR


def dynamic_quantized_conv(conv: Callable[..., Any], channels_last: bool) -> Callable[..., Any]:
    """``Mul(Cast(ConvInteger(x, w, zero), float), scale) (+ bias)``, as ``quantize_dynamic`` writes a
    Conv, on the float convolution kernels; ``conv`` runs the ConvInteger's window, and with
    ``channels_last`` the 8-bit data is brought to NHWC first (cheaper than the float values).

    The call takes ``x``: 8-bit data with a per-tensor ``zero`` point computed at run time (or
    None), or the centered data of :func:`dynamic_quantize_centered` with no zero point;
    ``weight``: the constant ``w - w_zero`` made at compile time, float32 at the model's
    precision, else in the compute type times :data:`DYNAMIC_CONV_WEIGHT_FACTOR`; ``scale``: one
    value; ``bias``: one per output channel, shaped to broadcast over axis 1, or None.  Centered
    values (at most 255 in magnitude) are exact in every floating type.  In float32 the sums are
    ConvInteger's while below 2**24 (see the module docstring), so the result is the Cast, Mul
    and Add's; in f16/bf16 each sum is rounded once to the compute type, which a reduced
    precision allows (and, scaled by 2**-16, cannot overflow as the Cast to f16 of a large sum
    does), and the convolution runs on the tensor-core kernels.
    """

    def dynamic_conv(x: torch.Tensor, zero: torch.Tensor | None, weight: torch.Tensor, scale: torch.Tensor,
                     bias: torch.Tensor | None) -> torch.Tensor:
        dtype = weight.dtype
        if channels_last:
            x = x.contiguous(memory_format=torch.channels_last)
        values = x.to(dtype)
        if zero is not None:
            values = values.sub_(zero.reshape(()).to(dtype))
        acc = conv(values, weight)
        if dtype == torch.float32:  # the Mul, then the Add, each rounded as ONNX Runtime rounds them
            acc = acc.mul_(scale.reshape(()))
            return acc if bias is None else acc.add_(bias)
        # scale / 2**-16 as one product in the scale's type where that is float32 or the compute
        # type: times a power of two is exact, and rounded once to the compute type it is the
        # value the float32 division and cast gave, in one kernel where there were three
        scale = scale.reshape(())
        if scale.dtype not in (dtype, torch.float32):
            scale = scale.to(torch.float32)
        factor = (scale * _WEIGHT_FACTOR_INVERSE).to(dtype)
        return acc.mul_(factor) if bias is None else torch.addcmul(bias, acc, factor)

    return dynamic_conv


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
