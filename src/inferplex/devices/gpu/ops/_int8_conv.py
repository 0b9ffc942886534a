"""A quantized model's convolution on 8-bit data (QDQ or ``quantize_dynamic``'s), as one Triton kernel on CUDA
(:mod:`._int8_conv_kernel`): an implicit GEMM on the tensor cores' int8 path (twice their float16
rate) whose epilogue runs the chain after the Conv.

``quantize_static`` writes a Conv as ``DequantizeLinear(x_q) * DequantizeLinear(w_q)``: the same
sum as the integer convolution of the levels, ``sum((x_q - x_zero) * w_q)``, times
``x_scale * w_scale``.  ONNX Runtime runs that integer convolution (its QDQ optimizer makes the
chain a QLinearConv); the float convolution of the dequantized values rounds each product.
:func:`int8_conv` computes the integer sums exactly in int32 and the epilogue in float32:

* times ``x_scale * w_scale`` (one weight scale, or one per output channel), + bias;
* + a residual of the output's shape, then the Relu (a pair whose range holds the Relu:
  :func:`~._fake_quantize.conv_fake_quantize`'s chain);
* rounded to the program's float type, the pair after the Conv, then + ``other`` and the second
  pair (:mod:`._qdq_conv`'s chain), each step rounded where the separate calls round.

The data arrives as the float values of its pair (the call before the Conv runs the pair and
writes float data every reader can take); :func:`quantize_padded` turns them into the pair's levels,
with the Conv's pads around them, in one pass before the kernel (exact: a level times the scale and
rounded to float16 divides back to the level).  Where the Conv before is one too and only Convs read
its pair (:func:`~inferplex.devices.gpu._qdq_conv.level_handoffs`), it writes those levels in its
epilogue instead of the float values, and that pass does not run: the same numbers.

``quantize_dynamic``'s convolution (ConvInteger of DynamicQuantizeLinear's data, times
``x_scale * w_scale``) is the same integer convolution, with the data's scale and zero point known
only at run time: :func:`quantize_dynamic_padded` writes the levels and those two on the device, and
the kernel reads them (``x_parameters``).

It takes channels-last 2-D data of 64k input channels (64 or 128 a step) with one group; elsewhere
(other layouts, ranks, groups, devices without Triton, and under ``torch.compile``, whose Inductor
fuses the float chain itself) the callers keep the float convolution.
"""

from __future__ import annotations

import numpy as np
import torch

from inferplex.devices.gpu.ops import _quantized_triton as triton_kernels
from inferplex.devices.gpu.ops._fake_quantize import FakeQuantizeStep, step_numbers

__all__ = ["Int8Weight", "dynamic_takes", "int8_conv", "int8_conv_arrays", "quantize_dynamic_padded",
           "quantize_padded", "takes"]

_FLOATS = (torch.float32, torch.float16)

_DYNAMIC_FLOATS = (torch.float32, torch.float16, torch.bfloat16)
"""The data types DynamicQuantizeLinear's pass takes (it reads the data itself, where a QDQ Conv's
pass must give back levels from their float values, which bfloat16 cannot hold apart)."""

_INT32_OFFSETS = 2**31

_QUANTIZE_PIXELS = 32
"""Pixels a program of the quantizing pass (by 64 channels)."""

_CHANNEL_STEP = 64
"""The input channels a kernel step reads at least (and the multiple the input channels must be)."""


Int8Weight = tuple[torch.Tensor, torch.Tensor, torch.Tensor, float, int, bool]
"""What :func:`int8_conv` takes of one Conv besides its data (device tensors made once by the
lowering, see :func:`int8_conv_arrays`, and the data's pair): the int8 weight, out_channels x
(kernel rows x kernel columns x channels); the int32 sum of each output channel's weights; the
float32 ``x_scale * w_scale`` per output channel; and the data's pair: its scale, its zero point
and whether it is int8 (else uint8)."""


def int8_conv_arrays(weight: np.ndarray, w_scale: np.ndarray, x_scale: float
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The weight (int8 M x C x kh x kw) as the kernel reads it, its per-channel sums and the
    per-channel float32 ``x_scale * w_scale`` (``w_scale``: one value or M)."""
    rows = np.ascontiguousarray(weight.transpose(0, 2, 3, 1).reshape(weight.shape[0], -1))
    sums = rows.sum(axis=1, dtype=np.int32)
    scale = np.float32(x_scale) * np.broadcast_to(w_scale.astype(np.float32).reshape(-1), (weight.shape[0],))
    return rows, sums, np.ascontiguousarray(scale, dtype=np.float32)


def takes(x: torch.Tensor, weight: Int8Weight | None, kernel: tuple[int, int], pads: list[int]) -> bool:
    """Whether :func:`int8_conv` runs this Conv: 4-D channels-last float16 or float32 data on CUDA
    with Triton, outside ``torch.compile``, of channels the kernel steps through, within 32-bit
    offsets with its pads."""
    if weight is None or x.dim() != 4 or x.dtype not in _FLOATS or x.shape[1] % _CHANNEL_STEP \
            or x.shape[1] * kernel[0] * kernel[1] != weight[0].shape[1]:
        return False
    batch, channels, height, width = x.shape
    padded = batch * channels * (height + pads[0] + pads[2]) * (width + pads[1] + pads[3])
    return padded < _INT32_OFFSETS and weight[0].numel() < _INT32_OFFSETS \
        and x.is_contiguous(memory_format=torch.channels_last) and triton_kernels.usable(x, x.numel())


def int8_conv(x: torch.Tensor, weight: Int8Weight, kernel: tuple[int, int], bias: torch.Tensor | None,
              pads: list[int], strides: list[int], dilations: list[int], residual: torch.Tensor | None = None,
              relu: bool = False, first: FakeQuantizeStep | None = None, other: torch.Tensor | None = None,
              second: FakeQuantizeStep | None = None, levels_pads: list[int] | None = None,
              writes: list[int] | None = None, out_dtype: torch.dtype | None = None,
              x_parameters: tuple[torch.Tensor, torch.Tensor] | None = None,
              out_range: torch.Tensor | None = None) -> torch.Tensor:
    """The Conv of ``x`` (its pair's float values, see the module docstring) by a ``kernel``-sized
    window and its chain, as a channels-last tensor of ``x``'s type (or ``out_dtype``): ``residual``
    is added before the Relu, ``other`` after the ``first`` pair, then the ``second`` (see
    :mod:`._int8_conv_kernel`).  ``pads``: ONNX's begins then ends.

    A Conv can hand the next ones its levels: with ``writes`` (pads at least as wide as theirs) the
    result is its last pair's levels as :func:`quantize_padded` makes them, with those pads around
    them, not the pair's float values; a next Conv takes them with ``levels_pads`` (``x`` is then
    such levels, with ``levels_pads`` around them, and ``out_dtype`` the program's float type).
    With ``x_parameters`` the levels are :func:`quantize_dynamic_padded`'s, with the scale and the
    zero point it made (``weight``'s scale is then the weight's alone, and its pair unused).
    With ``out_range`` (a value range, see :func:`~._quantized_triton.fresh_value_range`; not with
    ``writes``) the float result's minimum and maximum are merged into it as they are stored."""
    from inferplex.devices.gpu.ops import _int8_conv_kernel as kernels

    rows_weight, columns, scale, _, x_zero, x_signed = weight
    if levels_pads is not None:
        levels, zero, around = x, x_zero - (0 if x_signed else 128), levels_pads
    else:
        (levels, zero), around = quantize_padded(x, weight, pads), pads
        out_dtype = x.dtype
    assert out_dtype is not None
    batch, channels, padded_size = levels.shape[0], levels.shape[1], levels.shape[2:]
    sizes = [(size - around[axis] - around[axis + 2] + pads[axis] + pads[axis + 2]
              - dilations[axis] * (kernel[axis] - 1) - 1) // strides[axis] + 1
             for axis, size in enumerate(padded_size)]
    out_channels = rows_weight.shape[0]
    if writes is not None and batch * out_channels * (sizes[0] + writes[0] + writes[2]) \
            * (sizes[1] + writes[1] + writes[3]) >= _INT32_OFFSETS:
        writes = None  # levels past 32-bit offsets: the float values, which the next Convs quantize
    if writes is None:
        out = torch.empty((batch, out_channels, *sizes), dtype=out_dtype, device=levels.device,
                          memory_format=torch.channels_last)
        out_pads, out_zero = [0, 0, 0, 0], 0
    else:
        last = second if second is not None else first
        assert last is not None
        out_pads = writes
        out_zero = int(last[2]) - (0 if last[3] < 0 else 128)  # the level of 0.0, as int8
        stored = (sizes[0] + writes[0] + writes[2], sizes[1] + writes[1] + writes[3])
        out = torch.empty((batch, out_channels, *stored), dtype=torch.int8, device=levels.device,
                          memory_format=torch.channels_last)
        out.fill_(out_zero)
    rows = batch * sizes[0] * sizes[1]
    if rows == 0 or out_channels == 0:
        return out
    block_m, block_n, block_k, warps, stages = _tiling(channels, out_channels)
    extra = residual if residual is not None else other
    if extra is not None:  # the kernel reads it in the output's order
        extra = extra.contiguous(memory_format=torch.channels_last)
    grid = (-(-rows // block_m) * -(-out_channels // block_n),)
    kernels.conv[grid](
        levels, rows_weight, out, columns, scale, bias if bias is not None else scale,
        extra if extra is not None else out, *(x_parameters or (scale, columns)),
        out_range if out_range is not None else scale, rows, *padded_size,
        channels, *sizes, out_channels, rows_weight.shape[1], zero, *strides, *dilations,
        around[0] - pads[0], around[1] - pads[1], out_pads[0], out_pads[1],
        sizes[0] + out_pads[0] + out_pads[2], sizes[1] + out_pads[1] + out_pads[3], out_zero,
        *triton_kernels.step_arguments(step_numbers(first)),
        *triton_kernels.step_arguments(step_numbers(second)),
        KW=kernel[1], ZERO=zero != 0, DYNAMIC=x_parameters is not None, BIAS=bias is not None,
        RESIDUAL=residual is not None, RELU=relu,
        FIRST=first is not None, ADD=other is not None, LEVELS=writes is not None,
        RANGE=out_range is not None and writes is None,
        KIND=triton_kernels._triton().FLOAT_TYPES[out_dtype], DIVIDE=out_dtype == torch.float32,
        BM=block_m, BN=block_n, BK=block_k, GROUP=8, num_warps=warps, num_stages=stages)
    return out


def quantize_padded(x: torch.Tensor, weight: Int8Weight, pads: list[int]) -> tuple[torch.Tensor, int]:
    """The levels of ``x`` on its pair (``weight``'s), int8 (uint8 levels moved down by 128), with
    ``pads`` (ONNX's begins then ends) around them holding the level of 0.0, as a channels-last
    batch x channels x padded rows x padded columns tensor; and that level."""
    from inferplex.devices.gpu.ops import _int8_conv_kernel as kernels

    x_scale, x_zero, x_signed = weight[3:]
    zero = x_zero - (0 if x_signed else 128)
    batch, channels, height, width = x.shape
    padded_size = (height + pads[0] + pads[2], width + pads[1] + pads[3])
    levels = torch.empty((batch, channels, *padded_size), dtype=torch.int8, device=x.device,
                         memory_format=torch.channels_last)
    pixels = batch * padded_size[0] * padded_size[1]
    if pixels:
        kernels.quantize_padded[(-(-pixels // _QUANTIZE_PIXELS), channels // _CHANNEL_STEP)](
            x, levels, pixels, channels, height, width, *padded_size, pads[0], pads[1], x_scale,
            triton_kernels.float32_inverse(x_scale), zero, x, x, x, DYNAMIC=False,
            BLOCK_P=_QUANTIZE_PIXELS, BLOCK_C=_CHANNEL_STEP)
    return levels, zero


def dynamic_takes(x: torch.Tensor, pads: list[int]) -> bool:
    """Whether :func:`quantize_dynamic_padded` takes ``x`` with ``pads`` around it for the int8
    convolutions: 4-D channels-last float data on CUDA with Triton, outside ``torch.compile``, of
    channels the kernel steps through, within 32-bit offsets with its pads (and within what
    :func:`~._quantized_triton.value_range` takes)."""
    if x.dim() != 4 or x.dtype not in _DYNAMIC_FLOATS or x.shape[1] % _CHANNEL_STEP or x.numel() == 0 \
            or x.numel() > triton_kernels.RANGE_ELEMENTS:
        return False
    batch, channels, height, width = x.shape
    padded = batch * channels * (height + pads[0] + pads[2]) * (width + pads[1] + pads[3])
    return padded < _INT32_OFFSETS and x.is_contiguous(memory_format=torch.channels_last) \
        and triton_kernels.usable(x, x.numel())


def quantize_dynamic_padded(x: torch.Tensor, pads: list[int], value_range: torch.Tensor | None = None
                            ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """DynamicQuantizeLinear of ``x`` (where :func:`dynamic_takes` it) as the int8 convolutions
    read it: its uint8 levels moved down by 128 into int8, with ``pads`` (ONNX's begins then ends)
    around them holding the level of 0.0, as a channels-last tensor; its float32 scale; and its
    zero point moved down by 128, as int32 (the ``x_parameters`` of :func:`int8_conv`).  The
    levels, scale and zero point are DynamicQuantizeLinear's (the formulas of
    ``quantized.dynamic_parameters``), from ``x``'s value range (where the int8 convolution that
    made ``x`` recorded it, else a reduction pass finds it) and one quantizing pass."""
    from inferplex.devices.gpu.ops import _int8_conv_kernel as kernels

    batch, channels, height, width = x.shape
    padded_size = (height + pads[0] + pads[2], width + pads[1] + pads[3])
    levels = torch.empty((batch, channels, *padded_size), dtype=torch.int8, device=x.device,
                         memory_format=torch.channels_last)
    scale = torch.empty((), dtype=torch.float32, device=x.device)
    zero = torch.empty((), dtype=torch.int32, device=x.device)
    if value_range is None:
        value_range = triton_kernels.value_range(x)
    pixels = batch * padded_size[0] * padded_size[1]
    kernels.quantize_padded[(-(-pixels // _QUANTIZE_PIXELS), channels // _CHANNEL_STEP)](
        x, levels, pixels, channels, height, width, *padded_size, pads[0], pads[1], 1.0, 1.0, 0,
        value_range, scale, zero, DYNAMIC=True, BLOCK_P=_QUANTIZE_PIXELS, BLOCK_C=_CHANNEL_STEP)
    return levels, scale, zero


def _tiling(channels: int, out_channels: int) -> tuple[int, int, int, int, int]:
    """(pixels, output channels, input channels) a program step, warps and pipeline stages: the
    fastest measured on ResNet's convolutions at batch 32 (``bench/RESULTS.md``)."""
    if channels % 128 == 0:
        return 64, 128 if out_channels % 128 == 0 else 64, 128, 4, 3
    return 128, 64, 64, 4, 4
