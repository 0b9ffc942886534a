"""The Triton kernels of :mod:`._pooling`'s 2-D pools of channels-last data (imported only where
Triton runs), each program a tile of output pixels by channels, the channels contiguous in memory:
:func:`max_pool` (with ``QUANTIZE``, the fake-quantize of a QDQ model's pair on the pooled values,
see :func:`~inferplex.devices.gpu.ops._pooling.fake_quantized_max_pool`) and
:func:`average_pool`."""

from __future__ import annotations

import triton
import triton.language as tl
from triton.language.extra import libdevice

from inferplex.devices.gpu.ops._triton_rounding import dequantized


@triton.jit
def _tile(out_height, out_width, BLOCK_P: tl.constexpr, BLOCK_C: tl.constexpr):  # noqa: N803
    # the program's output pixels (flat, and as batch, row, column) and channels
    p = tl.program_id(0) * BLOCK_P + tl.arange(0, BLOCK_P)
    c = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)
    rest = p // out_width
    return p, c, rest // out_height, rest % out_height, p % out_width


@triton.jit
def max_pool(x_ptr, out_ptr, pixels, channels, height, width, out_height, out_width,  # noqa: N803
             stride_h, stride_w, pad_h, pad_w, dilation_h, dilation_w, scale, inverse, zero, low, high,
             KH: tl.constexpr, KW: tl.constexpr, QUANTIZE: tl.constexpr, DIVIDE: tl.constexpr,
             BLOCK_P: tl.constexpr, BLOCK_C: tl.constexpr):
    # out[n, oh, ow, c] = max over the window's places inside the input; places outside it (the
    # pads, and ceil mode's overhang) count as -inf, and a NaN in the window gives NaN (torch's rule)
    p, c, n, oh, ow = _tile(out_height, out_width, BLOCK_P, BLOCK_C)
    pixel_inside = p < pixels
    channel_inside = c < channels
    best = tl.full((BLOCK_P, BLOCK_C), float("-inf"), out_ptr.dtype.element_ty)
    for i in tl.static_range(KH):
        ih = oh * stride_h - pad_h + i * dilation_h
        row_inside = pixel_inside & (ih >= 0) & (ih < height)
        for j in tl.static_range(KW):
            iw = ow * stride_w - pad_w + j * dilation_w
            inside = row_inside & (iw >= 0) & (iw < width)
            place = ((n * height + ih) * width + iw).to(tl.int64) * channels
            values = tl.load(x_ptr + place[:, None] + c[None, :],
                             mask=inside[:, None] & channel_inside[None, :], other=float("-inf"))
            best = tl.maximum(best, values, propagate_nan=tl.PropagateNan.ALL)
    if QUANTIZE:  # the fake-quantize pass's numbers (``dequantized``), on the pooled values
        best = dequantized(best.to(tl.float32), scale, inverse, zero, low, high, DIVIDE).to(best.dtype)
    target = p.to(tl.int64)[:, None] * channels + c[None, :]
    tl.store(out_ptr + target, best, mask=pixel_inside[:, None] & channel_inside[None, :])


@triton.jit
def average_pool(x_ptr, out_ptr, pixels, channels, height, width, out_height, out_width,  # noqa: N803
                 stride_h, stride_w, pad_h, pad_w, dilation_h, dilation_w,
                 count_top, count_bottom, count_left, count_right,
                 KH: tl.constexpr, KW: tl.constexpr, BLOCK_P: tl.constexpr, BLOCK_C: tl.constexpr):
    # out[n, oh, ow, c] = the float32 sum of the window's places inside the input, in the window's
    # row-major order, divided by the number of its places inside [count_top, count_bottom) x
    # [count_left, count_right) (the input, or the input and its pads where the pads count), then
    # rounded to the data's type: ATen's channels-last average pool's steps
    p, c, n, oh, ow = _tile(out_height, out_width, BLOCK_P, BLOCK_C)
    pixel_inside = p < pixels
    channel_inside = c < channels
    total = tl.zeros((BLOCK_P, BLOCK_C), tl.float32)
    counted = tl.zeros((BLOCK_P,), tl.float32)
    for i in tl.static_range(KH):
        ih = oh * stride_h - pad_h + i * dilation_h
        row_inside = pixel_inside & (ih >= 0) & (ih < height)
        row_counted = (ih >= count_top) & (ih < count_bottom)
        for j in tl.static_range(KW):
            iw = ow * stride_w - pad_w + j * dilation_w
            inside = row_inside & (iw >= 0) & (iw < width)
            place = ((n * height + ih) * width + iw).to(tl.int64) * channels
            values = tl.load(x_ptr + place[:, None] + c[None, :],
                             mask=inside[:, None] & channel_inside[None, :], other=0.0)
            total = libdevice.add_rn(total, values.to(tl.float32))
            counted += (row_counted & (iw >= count_left) & (iw < count_right)).to(tl.float32)
    mean = libdevice.div_rn(total, counted[:, None])
    target = p.to(tl.int64)[:, None] * channels + c[None, :]
    tl.store(out_ptr + target, mean.to(out_ptr.dtype.element_ty),
             mask=pixel_inside[:, None] & channel_inside[None, :])
