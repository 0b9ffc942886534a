"""The fused calls the GPU lowering emits for quantized models (see :mod:`.._quantized_fusions`):
a QDQ model's MatMul of DequantizeLinear outputs as one int8 matmul (:func:`quantized_linear`),
``quantize_dynamic``'s ``Mul(Cast(MatMulInteger))`` and ``Mul(Cast(ConvInteger))`` chains
(:func:`dynamic_quantized_linear`, :func:`dynamic_quantized_conv`, or in a reduced precision
:func:`dequantized_conv`), and the DynamicQuantizeLinear that hands those convolutions centered
(or dequantized) data (:func:`dynamic_quantize_centered`).  On CUDA they
run as the Triton kernels of :mod:`._quantized_triton` outside ``torch.compile``, else as ATen
ops; the numbers are those of :mod:`.quantized`'s lowerings of the ops they replace.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from inferplex.devices.gpu.ops import _quantized_triton as triton_kernels
from inferplex.devices.gpu.ops._fake_quantize import (
    FakeQuantizeStep,
    quantize_dequantize,
    quantized_levels,
    step_numbers,
)
from inferplex.devices.gpu.ops._int8_conv import Int8Weight, dynamic_takes, int8_conv, quantize_dynamic_padded
from inferplex.devices.gpu.ops._window import Window
from inferplex.devices.gpu.ops.quantized import dynamic_parameters

__all__ = ["DYNAMIC_CONV_WEIGHT_FACTOR", "dequantized_conv", "dynamic_quantize_centered",
           "dynamic_quantize_rows", "dynamic_quantized_conv", "dynamic_quantized_linear", "quantized_linear",
           "quantized_linear_arrays"]


def dynamic_quantize_centered(x: torch.Tensor, dequantized: bool = False, pads: list[int] | None = None,
                              value_range: torch.Tensor | None = None
                              ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """DynamicQuantizeLinear's data, centered, and scale: ``y - zero`` in ``x``'s floating type
    (exact: at most 255 in magnitude), for convolutions that read nothing else of it (see
    :func:`dynamic_quantized_conv`; the zero point, which they do not read, is not made: the
    third output is None).  With ``dequantized``, ``(y - zero) * scale`` rounded once
    to ``x``'s type: the input of :func:`dequantized_conv`.

    With ``pads`` (the widest of the reading convolutions', which run as int8 convolutions
    where they get int8 data, see :func:`dequantized_conv`), on CUDA where the int8 convolution
    takes ``x``: the levels with those pads around them, the scale and the zero point, as
    :func:`~._int8_conv.quantize_dynamic_padded` makes them (from ``value_range`` where the
    convolution that made ``x`` recorded it).

    ``clamp(round(x / scale) + zero, 0, 255) - zero`` runs as the division and one fake-quantize
    kernel (scale 1, which rounds half to even and adds the zero point after rounding, as ONNX
    does) instead of a chain of passes and a uint8 tensor.  Under ``torch.compile`` it is written
    out as those elementwise ops, which Inductor fuses into one pass (it has no lowering of the
    fake-quantize kernel and would call it as an opaque op, with the mask it writes besides).
    """
    if pads is not None and dynamic_takes(x, pads):
        return quantize_dynamic_padded(x, pads, value_range)
    if triton_kernels.usable(x):
        return (*triton_kernels.dynamic_quantize_centered(x, dequantized), None)
    scale, zero = dynamic_parameters(x)
    if torch.compiler.is_compiling():
        centered = torch.clamp(torch.round(x / scale) + zero, 0, 255) - zero
    else:
        one = torch.ones((), dtype=torch.float32, device=x.device)
        centered = torch.fake_quantize_per_tensor_affine(x / scale, one, zero.to(torch.int32), 0, 255)
    # a one-value float32 tensor: the product is computed in float32 and rounded once to x's type
    return (centered * scale.reshape(()) if dequantized else centered), scale, None


def dynamic_quantize_rows(x: torch.Tensor, partials: torch.Tensor | None = None
                          ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """DynamicQuantizeLinear of ``x`` for the dynamic matmuls that alone read its data (see
    :func:`dynamic_quantized_linear`'s ``levels``): the data, scale and zero point.  On CUDA,
    outside ``torch.compile``, the data are the uint8 levels moved down by 128 into int8, which the
    int8 matmul reads as they are, from two passes, or one where the call that made ``x`` wrote
    the minimum and maximum of each part of it (``partials``, see
    :func:`~._residual_layer_norm.layer_norm_with_partials`); elsewhere the DynamicQuantizeLinear
    lowering's uint8 data.  The numbers are DynamicQuantizeLinear's either way."""
    if triton_kernels.usable(x) and x.numel() <= triton_kernels.RANGE_ELEMENTS:
        return triton_kernels.dynamic_quantize_rows(x, partials)
    scale, zero = dynamic_parameters(x)
    y = torch.clamp(torch.round(x / scale) + zero, 0, 255).to(torch.uint8)
    return y, scale, zero.to(torch.uint8)


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
                     a_scale: torch.Tensor | None = None, a_zero: int = 0,
                     requantize: FakeQuantizeStep | None = None,
                     quantize: FakeQuantizeStep | None = None,
                     table: torch.Tensor | None = None, levels: bool = False) -> torch.Tensor:
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

    The epilogue may hold the QuantizeLinear -> DequantizeLinear pairs after the matmul, as
    ``quantize_static`` writes a MatMul and its bias Add: ``requantize`` (the pair on the matmul's
    output, then ``bias`` is added to its result in ``out_dtype``, as the Add does) and
    ``quantize`` (the pair on the result): the numbers of the separate calls
    (:func:`~._fake_quantize.quantize_dequantize`, the Add), with no pass over the output between.
    With ``table`` (a function's value at each of ``quantize``'s levels, low to high), the call
    gives the table's value at each output's level instead: that function of the fake-quantized
    output, in the table's type; with ``levels``, ``quantize``'s levels themselves (its
    QuantizeLinear's 8-bit data, int8 or uint8 as its range).
    """
    elements = _out_elements(a, weight)
    mid, last = step_numbers(requantize), step_numbers(quantize)
    if triton_kernels.usable(a, elements):  # the same numbers in two kernels
        if a_scale is not None:
            a = triton_kernels.quantize(a, a_scale, a_zero, torch.int8)
        return triton_kernels.int8_linear(a, weight, correction, None, 1, scales, bias, out_dtype, mid, last,
                                          table, levels=levels)
    if a_scale is not None:
        values = torch.round(a.to(torch.float32) / a_scale) + a_zero
        a = values.clamp(-128, 127).to(torch.int8)
    if triton_kernels.usable_compiled(a, elements):  # the quantize above joins its producer's kernel
        return triton_kernels.int8_linear_op(a, weight, correction, None, 1, scales, bias, out_dtype, mid,
                                             last, table, levels=levels)
    acc = _int8_rows_matmul(a, weight)
    if correction is not None:
        acc = acc + correction
    # int32 x float32 promotes to float32 inside the one kernel
    direct = bias if requantize is None else None
    result = acc * scales if direct is None else torch.addcmul(direct, acc, scales)
    result = result.reshape(*a.shape[:-1], weight.shape[0]).to(out_dtype)
    if requantize is not None:
        result = quantize_dequantize(result, *requantize)
        if bias is not None:
            result = result + bias
    if quantize is None:
        return result
    if levels:
        return quantized_levels(result, *quantize).to(torch.int8 if quantize[3] < 0 else torch.uint8)
    if table is None:
        return quantize_dequantize(result, *quantize)
    return table[(quantized_levels(result, *quantize) - quantize[3]).long()]


def dynamic_quantized_linear(a: torch.Tensor, zero: torch.Tensor | None, weight: torch.Tensor,
                             column_sums: torch.Tensor, scale: torch.Tensor, bias: torch.Tensor | None,
                             out_dtype: torch.dtype, x_scale: torch.Tensor | None = None,
                             levels: bool = False, gelu_range: tuple[torch.Tensor, float, float] | None = None
                             ) -> torch.Tensor:
    """``Cast(MatMulInteger(a, weight, zero), float) * scale (+ bias)``, as ``quantize_dynamic``
    writes a MatMul (and the Add of a Gemm's bias).

    ``a``: 8-bit data (..., K) with a per-tensor ``zero`` point computed at run time
    (DynamicQuantizeLinear's, or None); ``weight``: int8 N x K, zero point 0, with its int32
    ``column_sums`` (1 x N); ``scale``: float32, per tensor or per output column; ``bias``:
    float32, one per output column, or None.  The integer product is exact as in
    :func:`integer_matmul`; the float32 product (and sum) is the Cast, Mul (and Add)'s up to
    float32 rounding.  With ``x_scale`` (the data's scale, one value) ``scale`` is the weight's and
    the call multiplies them, as the model's Mul of the two does.  With ``levels``, ``a`` comes
    from :func:`dynamic_quantize_rows`: int8 data are uint8 levels moved down by 128.  With
    ``gelu_range`` the Triton kernel records what :func:`~._gelu_levels.gelu_quantize_rows` reads
    of the output (see :func:`~._quantized_triton.int8_linear`); the other forms record nothing.
    """
    shift = 128 if a.dtype == torch.uint8 or levels else 0
    columns = column_sums if shift or zero is not None else None
    elements = _out_elements(a, weight)
    if triton_kernels.usable(a, elements):  # the same numbers in one kernel
        return triton_kernels.int8_linear(a, weight, columns, zero, shift, scale.reshape(-1), bias, out_dtype,
                                          x_scale=x_scale, gelu_range=gelu_range)
    if triton_kernels.usable_compiled(a, elements):
        return triton_kernels.int8_linear_op(a, weight, columns, zero, shift, scale.reshape(-1), bias,
                                             out_dtype, x_scale=x_scale)
    if x_scale is not None:
        scale = x_scale.to(torch.float32).reshape(()) * scale
    acc = _int8_rows_matmul(a, weight)
    offset = shift if zero is None else shift - zero.to(torch.int32).reshape(())
    acc = acc + offset * column_sums
    result = acc * scale.reshape(-1) if bias is None else torch.addcmul(bias, acc, scale.reshape(-1))
    return result.reshape(*a.shape[:-1], weight.shape[0]).to(out_dtype)


def _out_elements(a: torch.Tensor, weight: torch.Tensor) -> int:
    """Elements of a matmul's output: ``a``'s rows times the N x K weight's N."""
    return a.numel() // max(a.shape[-1], 1) * weight.shape[0]


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


DYNAMIC_CONV_WEIGHT_FACTOR = 2.0 ** -16
"""Under a reduced precision the centered 8-bit weight is stored times this power of two: exact
in f16 and bf16, and sums of up to 65000 products of 255 x 255 stay within f16's range."""


_WEIGHT_FACTOR_INVERSE = 1.0 / DYNAMIC_CONV_WEIGHT_FACTOR


def dynamic_quantized_conv(conv: Callable[..., Any], channels_last: bool,
                           relu: bool = False) -> Callable[..., Any]:
    """``Mul(Cast(ConvInteger(x, w, zero), float), scale) (+ bias) (+ residual)``, as
    ``quantize_dynamic`` writes a Conv (and a residual block's Add after it), on the float
    convolution kernels, and with ``relu`` the Relu after it; ``conv`` runs the ConvInteger's
    window, and with ``channels_last`` the 8-bit data is brought to NHWC first (cheaper than the
    float values).

    The call takes ``x``: 8-bit data with a per-tensor ``zero`` point computed at run time (or
    None), or the centered data of :func:`dynamic_quantize_centered` with no zero point;
    ``weight``: the constant ``w - w_zero`` made at compile time, float32 at the model's
    precision, else in the compute type times :data:`DYNAMIC_CONV_WEIGHT_FACTOR`; ``scale``: one
    value; ``bias``: one per output channel, shaped to broadcast over axis 1, or None;
    ``residual``: a tensor of the output's shape added after the bias, or None.  Centered
    values (at most 255 in magnitude) are exact in every floating type.  In float32 the sums are
    ConvInteger's while below 2**24 (see the module docstring), so the result is the Cast, Mul
    and Add's; in f16/bf16 each sum is rounded once to the compute type, which a reduced
    precision allows (and, scaled by 2**-16, cannot overflow as the Cast to f16 of a large sum
    does), and the convolution runs on the tensor-core kernels; on CUDA the scale, bias, residual
    Add and Relu after it are one Triton pass (:func:`~._quantized_triton.conv_epilogue`, the same
    numbers).
    """

    def dynamic_conv(x: torch.Tensor, zero: torch.Tensor | None, weight: torch.Tensor, scale: torch.Tensor,
                     bias: torch.Tensor | None, residual: torch.Tensor | None = None) -> torch.Tensor:
        dtype = weight.dtype
        if channels_last:
            x = x.contiguous(memory_format=torch.channels_last)
        values = x.to(dtype)
        if zero is not None:
            values = values.sub_(zero.reshape(()).to(dtype))
        acc = conv(values, weight)
        if dtype == torch.float32:  # the Mul, then the Adds, each rounded as ONNX Runtime rounds them
            acc = acc.mul_(scale.reshape(()))
            acc = acc if bias is None else acc.add_(bias)
            acc = acc if residual is None else acc.add_(residual)
            return acc.relu_() if relu else acc
        if triton_kernels.usable(acc):
            return triton_kernels.conv_epilogue(acc, scale.reshape(()), _WEIGHT_FACTOR_INVERSE, bias, relu,
                                                residual)
        # scale / 2**-16 as one product in the scale's type where that is float32 or the compute
        # type: times a power of two is exact, and rounded once to the compute type it is the
        # value the float32 division and cast gave, in one kernel where there were three
        scale = scale.reshape(())
        if scale.dtype not in (dtype, torch.float32):
            scale = scale.to(torch.float32)
        factor = (scale * _WEIGHT_FACTOR_INVERSE).to(dtype)
        acc = acc.mul_(factor) if bias is None else torch.addcmul(bias, acc, factor)
        acc = acc if residual is None else acc.add_(residual)
        return acc.relu_() if relu else acc

    return dynamic_conv


def dequantized_conv(conv: Callable[..., Any], conv_relu: Callable[..., Any], window: Window,
                     channels_last: bool, relu: bool, ranged: bool = False) -> Callable[..., Any]:
    """:func:`dynamic_quantized_conv`'s chain in a reduced precision where its scale is the input's
    DynamicQuantizeLinear scale times a constant weight scale: ``conv(x * s_x, w * s_w) (+ bias)
    (+ residual)`` (and the Relu), the same sum, as the float model's convolution.

    The call takes ``x``: :func:`dynamic_quantize_centered`'s dequantized data; ``weight``: the
    constant ``(w - w_zero) * s_w`` in the compute type; ``bias``: one per output channel, or
    None; ``residual``: a tensor of the output's shape, or None.  ``conv`` and ``conv_relu`` are
    the Conv's float lowerings (``conv_relu`` puts the bias, the residual and the Relu in one
    cuDNN call on CUDA): no pass over the output follows, where the centered form's integer sums
    need one for the scale.  Each product is rounded to the compute type where the centered form
    rounds each sum once, as a reduced precision allows.

    Where the quantizer handed over its levels (int8 ``x``, with ``reads`` around them, and its
    scale and zero point: ``x_scale`` and ``x_zero``), the call is the int8 convolution of those
    levels by ``int8``'s weight (the weight's scale its own, see
    :func:`~._int8_conv.int8_conv`), whose epilogue adds the bias and the residual and runs the
    Relu: the integer sums are exact, and the float32 products and sums are the Cast, Mul and
    Adds' up to float32 rounding, rounded once to the compute type (``window``: the Conv's).
    With ``ranged`` the call gives the result and its value range, which the int8 convolution
    records in ``out_range`` (a fresh one, see :func:`~._quantized_triton.fresh_value_range`) as
    it writes it (None where the float convolution ran): the DynamicQuantizeLinear that reads the
    result takes it.
    """

    def run(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
            residual: torch.Tensor | None = None, int8: Int8Weight | None = None,
            x_scale: torch.Tensor | None = None, x_zero: torch.Tensor | None = None,
            reads: list[int] | None = None, out_range: torch.Tensor | None = None) -> Any:
        if x.dtype == torch.int8:
            assert int8 is not None and reads is not None and x_scale is not None and x_zero is not None
            kernel = (int(weight.shape[2]), int(weight.shape[3]))
            y = int8_conv(x, int8, kernel, bias, window.pads, window.strides, window.dilations,
                          residual=residual, relu=relu, levels_pads=reads, out_dtype=weight.dtype,
                          x_parameters=(x_scale, x_zero), out_range=out_range)
            return (y, out_range) if ranged else y
        y = float_form(x, weight, bias, residual)
        return (y, None) if ranged else y

    def float_form(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
                   residual: torch.Tensor | None) -> torch.Tensor:
        if channels_last:
            x = x.contiguous(memory_format=torch.channels_last)
        if relu:
            return conv_relu(x, weight, bias, residual)
        y = conv(x, weight, bias)
        return y if residual is None else y + residual

    return run
