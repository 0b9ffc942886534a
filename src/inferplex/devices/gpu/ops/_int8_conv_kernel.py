"""The Triton kernels of :mod:`._int8_conv` (imported only where Triton runs; that module says what
they compute and launches them): :func:`quantize_padded`, the data's levels with the convolution's
pads around them, and :func:`conv`, the convolution of those levels by an int8 weight as an
implicit GEMM on the tensor cores' int8 path, its epilogue the QDQ chain after the Conv."""

from __future__ import annotations

import triton
import triton.language as tl
from triton.language.extra import libdevice

from inferplex.devices.gpu.ops._quantized_kernels import grouped_tile, min_max, range_parameters, record_range
from inferplex.devices.gpu.ops._triton_rounding import (
    divide,
    fake_quantize,
    quantized_level,
    quantized_steps,
    to_integer,
)


@triton.jit
def quantize_padded(x_ptr, out_ptr, pixels, channels, height, width, padded_height, padded_width,  # noqa: N803
                    pad_h, pad_w, scale, inverse, zero, range_ptr, scale_ptr, zero_ptr,
                    DYNAMIC: tl.constexpr, BLOCK_P: tl.constexpr, BLOCK_C: tl.constexpr):
    # out (batch x padded rows x padded columns x channels, int8) = QuantizeLinear of channels-last
    # x onto [-128, 127] with ``zero``; the places of the pads hold ``zero`` (the level of 0.0).
    # With DYNAMIC, DynamicQuantizeLinear's: the scale and the zero point come from the data's value
    # range (their uint8 levels moved down by 128), and the first program stores them (float32,
    # and the moved zero point as int32) for the convolutions.
    # Each program is a tile of the output's pixels by channels.
    if DYNAMIC:
        scale, unsigned_zero = range_parameters(range_ptr)
        point = unsigned_zero - 128.0
        inverse = libdevice.div_rn(1.0, scale)
        if (tl.program_id(0) == 0) & (tl.program_id(1) == 0):
            tl.store(scale_ptr, scale)
            tl.store(zero_ptr, point.to(tl.int32))
    else:
        point = zero * 1.0
    p = tl.program_id(0) * BLOCK_P + tl.arange(0, BLOCK_P)
    c = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)
    column = p % padded_width - pad_w
    rest = p // padded_width
    row = rest % padded_height - pad_h
    image = rest // padded_height
    pixel_inside = p < pixels
    inside = pixel_inside & (row >= 0) & (row < height) & (column >= 0) & (column < width)
    stored = pixel_inside[:, None] & (c < channels)[None, :]
    x = tl.load(x_ptr + (((image * height + row) * width + column) * channels)[:, None] + c[None, :],
                mask=inside[:, None] & stored, other=0.0).to(tl.float32)
    level = tl.where(inside[:, None], quantized_level(divide(x, scale, inverse), point, -128.0, 127.0), point)
    tl.store(out_ptr + (p * channels)[:, None] + c[None, :], to_integer(level).to(tl.int8), mask=stored)


@triton.jit
def conv(x_ptr, w_ptr, out_ptr, column_ptr, scale_ptr, bias_ptr, other_ptr,  # noqa: N803
         x_scale_ptr, x_zero_ptr, range_ptr, rows, height, width, channels, out_height, out_width,
         out_channels, depth, zero,
         stride_h, stride_w, dilation_h, dilation_w, in_top, in_left,
         out_top, out_left, stored_height, stored_width, out_zero,
         f_scale, f_inverse, f_zero, f_low, f_high, s_scale, s_inverse, s_zero, s_low, s_high,
         KW: tl.constexpr, ZERO: tl.constexpr, DYNAMIC: tl.constexpr, BIAS: tl.constexpr,
         RESIDUAL: tl.constexpr, RELU: tl.constexpr, FIRST: tl.constexpr, ADD: tl.constexpr,
         LEVELS: tl.constexpr, RANGE: tl.constexpr, KIND: tl.constexpr, DIVIDE: tl.constexpr,
         BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP: tl.constexpr):
    # Rows are output pixels (batch, row, column flattened), columns output channels, the depth the
    # window's places times the input channels, walked place by place, BK channels a step (the
    # weight is stored the same way: out_channels x (kernel rows, kernel columns, channels)).  x is
    # :func:`quantize_padded`'s int8 levels (height x width with the pads; a row's window starts
    # ``in_top`` and ``in_left`` into them where they have wider pads than this Conv), so every
    # place a row reads is inside it, its pads holding ``zero``: with ``zero`` times each column's
    # weight sum (``column_ptr``) taken off, the sums are those of (level - zero point) x weight,
    # exact in int32 (with DYNAMIC the zero point and the data's scale are read from
    # ``x_zero_ptr`` and ``x_scale_ptr``, and ``scale_ptr`` holds the weight's).  Offsets are int32
    # (the caller keeps the data and the weight within it), the output's int64.  The epilogue:
    # times the scale (per column); + bias; + the residual (RESIDUAL, before the Relu); the Relu;
    # rounded to KIND; the first pair (FIRST); + other and the second pair (ADD).
    # With LEVELS the last pair's levels are stored instead, as int8 (moved down by 128 for uint8:
    # ``out_zero`` is the level of 0.0 so moved), in stored_height x stored_width images whose
    # output pixels start at (out_top, out_left): the next Conv's data with its pads.  With RANGE
    # the stored values' minimum and maximum are merged into the value range at ``range_ptr``.
    pid_m, pid_n = grouped_tile(tl.program_id(0), rows, out_channels, BM, BN, GROUP)
    rm = (pid_m * BM + tl.arange(0, BM)) % rows
    plane = out_height * out_width
    image = rm // plane
    place = rm - image * plane
    top = image * height + (place // out_width) * stride_h + in_top
    left = (place % out_width) * stride_w + in_left
    rk = tl.arange(0, BK)
    rn = (pid_n * BN + tl.arange(0, BN)) % out_channels
    chunks = channels // BK
    acc = tl.zeros((BM, BN), dtype=tl.int32)
    for step in range(0, depth // BK):
        tap = step // chunks
        first_channel = (step - tap * chunks) * BK
        kernel_row = tap // KW
        base = ((top + kernel_row * dilation_h) * width + left + (tap - kernel_row * KW) * dilation_w) \
            * channels + first_channel
        a = tl.load(x_ptr + base[:, None] + rk[None, :])
        w = tl.load(w_ptr + rn[None, :] * depth + step * BK + rk[:, None])
        acc = tl.dot(a, w, acc, out_dtype=tl.int32)
    if DYNAMIC:  # the data's scale and (moved) zero point as its quantizer stored them
        acc -= tl.load(x_zero_ptr) * tl.load(column_ptr + rn)[None, :]
        scale = tl.load(x_scale_ptr) * tl.load(scale_ptr + rn)
    else:
        if ZERO:
            acc -= zero * tl.load(column_ptr + rn)[None, :]
        scale = tl.load(scale_ptr + rn)
    values = acc.to(tl.float32) * scale[None, :]
    if BIAS:
        values = values + tl.load(bias_ptr + rn)[None, :].to(tl.float32)
    out_rows = pid_m * BM + tl.arange(0, BM)
    columns = pid_n * BN + tl.arange(0, BN)
    mask = (out_rows[:, None] < rows) & (columns[None, :] < out_channels)
    targets = out_rows.to(tl.int64)[:, None] * out_channels + columns[None, :]
    if RESIDUAL:
        values = values + tl.load(other_ptr + targets, mask=mask, other=0.0).to(tl.float32)
    if RELU:
        values = tl.maximum(values, 0.0)
    values = values.to(KIND).to(tl.float32)
    if ADD:  # the first pair, + other, rounded; the second pair is the last
        values = fake_quantize(values, f_scale, f_inverse, f_zero, f_low, f_high, KIND, DIVIDE)
        values = (values + tl.load(other_ptr + targets, mask=mask, other=0.0).to(tl.float32)).to(KIND)
        values = values.to(tl.float32)
        if LEVELS:
            steps = quantized_steps(values, s_scale, s_inverse, s_zero, s_low, s_high, DIVIDE)
        else:
            values = fake_quantize(values, s_scale, s_inverse, s_zero, s_low, s_high, KIND, DIVIDE)
    elif LEVELS:
        steps = quantized_steps(values, f_scale, f_inverse, f_zero, f_low, f_high, DIVIDE)
    elif FIRST:
        values = fake_quantize(values, f_scale, f_inverse, f_zero, f_low, f_high, KIND, DIVIDE)
    if LEVELS:
        row = place // out_width
        stored = ((image * stored_height + row + out_top) * stored_width + place - row * out_width + out_left)
        tl.store(out_ptr + stored.to(tl.int64)[:, None] * out_channels + columns[None, :],
                 to_integer(steps + out_zero * 1.0).to(tl.int8), mask=mask)
    else:
        tl.store(out_ptr + targets, values.to(out_ptr.dtype.element_ty), mask=mask)
        if RANGE:  # the stored values' range, for the DynamicQuantizeLinear that reads them
            lows, highs = tl.reduce((tl.where(mask, values, float("inf")),
                                     tl.where(mask, values, float("-inf"))), 1, min_max)
            low, high = tl.reduce((lows, highs), 0, min_max)
            nan = ((low != low) | (high != high)).to(tl.int32)
            record_range(range_ptr, low, high, nan)
