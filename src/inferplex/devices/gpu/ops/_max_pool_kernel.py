"""The Triton kernel of :func:`~inferplex.devices.gpu.ops._pooling.max_pool`
(imported only where Triton runs): a 2-D max pool of channels-last data, each program a tile of
output pixels by channels, the channels contiguous in memory; with ``QUANTIZE``, the fake-quantize
of a QDQ model's pair on the pooled values (see
:func:`~inferplex.devices.gpu.ops._pooling.fake_quantized_max_pool`)."""

from __future__ import annotations

import triton
import triton.language as tl

from inferplex.devices.gpu.ops._triton_rounding import dequantized


@triton.jit
def max_pool(x_ptr, out_ptr, pixels, channels, height, width, out_height, out_width,  # noqa: N803
             stride_h, stride_w, pad_h, pad_w, dilation_h, dilation_w, scale, inverse, zero, low, high,
             KH: tl.constexpr, KW: tl.constexpr, QUANTIZE: tl.constexpr, DIVIDE: tl.constexpr,
             BLOCK_P: tl.constexpr, BLOCK_C: tl.constexpr):
    # out[n, oh, ow, c] = max over the window's places inside the input; places outside it (the
    # pads, and ceil mode's overhang) count as -inf, and a NaN in the window gives NaN (torch's rule)
    p = tl.program_id(0) * BLOCK_P + tl.arange(0, BLOCK_P)
    c = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)
    ow = p % out_width
    rest = p // out_width
    oh = rest % out_height
    n = rest // out_height
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
