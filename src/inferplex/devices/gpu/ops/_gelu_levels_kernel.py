"""The Triton kernels of :mod:`._gelu_levels` (imported only where Triton runs; that module says what
they compute and launches them): :func:`gelu_partials`, the minimum and maximum of each slice of a
GELU's output where the value range its input's matmul recorded does not give them, and
:func:`gelu_quantize`, the GELU's DynamicQuantizeLinear levels, the GELU computed as it quantizes."""

from __future__ import annotations

import triton
import triton.language as tl
from triton.language.extra import libdevice

from inferplex.devices.gpu.ops._quantized_kernels import (
    dynamic_parameters,
    merge_values,
    no_values,
    scale_and_zero,
    store_partials,
)
from inferplex.devices.gpu.ops._triton_rounding import divide, quantized_level, to_integer


@triton.jit
def gelu(x, APPROXIMATE: tl.constexpr):  # noqa: N803
    """ATen's GELU of float32 ``x`` on CUDA, in its order of operations (``F.gelu``'s numbers)."""
    if APPROXIMATE:
        inner = 0.7978845608028654 * libdevice.fma(0.044715, x * x * x, x)
        y = 0.5 * x * (1.0 + libdevice.tanh(inner))
    else:
        y = x * 0.5 * (1.0 + tl.math.erf(x * 0.7071067811865476))
    return y


@triton.jit
def unknown_range(range_ptr, KIND: tl.constexpr, APPROXIMATE: tl.constexpr):  # noqa: N803
    """(whether the recorded range leaves the GELU's range unknown, the GELU's largest output).

    The range is known where an input lies in the band (the GELU's minimum then is the band's) and
    none is NaN.  The largest output is then the GELU of the largest input, stored in ``KIND``
    (``max(0, largest)`` as recorded): over inputs from 0 up the stored GELU does not decrease (two
    neighbouring inputs' GELUs differ by far more than float32's errors), and inputs below 0 give
    outputs of at most 0."""
    band = tl.load(range_ptr) > 0.0
    top = tl.load(range_ptr + 1)
    nan = tl.load(range_ptr + 2) > 0.0
    return (band == 0) | nan, gelu(top, APPROXIMATE).to(KIND).to(tl.float32)


@triton.jit
def gelu_partials(x_ptr, range_ptr, low_ptr, high_ptr, count, per_program,  # noqa: N803
                  APPROXIMATE: tl.constexpr, BLOCK: tl.constexpr):
    # where the range is unknown: the minimum and maximum of the GELU's stored output over one slice
    # of per_program elements, NaN where the slice holds one; else nothing (the quantizer then
    # reads no partial result)
    kind = x_ptr.dtype.element_ty
    unknown, _ = unknown_range(range_ptr, kind, APPROXIMATE)
    if unknown:
        start = tl.program_id(0) * per_program
        lows, highs, nans = no_values(BLOCK)
        for step in range(0, per_program, BLOCK):
            offsets = start + step + tl.arange(0, BLOCK)
            mask = offsets < count
            x = tl.load(x_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
            y = gelu(x, APPROXIMATE).to(kind).to(tl.float32)
            lows, highs, nans = merge_values(lows, highs, nans, y, mask)
        store_partials(low_ptr, high_ptr, lows, highs, nans)


@triton.jit
def gelu_quantize(x_ptr, out_ptr, range_ptr, low_ptr, high_ptr, scale_ptr, zero_ptr, count, parts,  # noqa: N803
                  minimum, APPROXIMATE: tl.constexpr, PARTS: tl.constexpr, BLOCK: tl.constexpr):
    # DynamicQuantizeLinear of the GELU's stored output, as dynamic_quantize's SHIFTED form writes
    # it: its range from the recorded one (the band's minimum, the largest input's GELU) where that gives
    # it, else from gelu_partials' results
    kind = x_ptr.dtype.element_ty
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < count
    x = tl.load(x_ptr + offsets, mask=mask, other=0.0)  # in flight while the range is worked out
    unknown, highest = unknown_range(range_ptr, kind, APPROXIMATE)
    if unknown:
        scale, zero = dynamic_parameters(low_ptr, high_ptr, parts, PARTS)
    else:
        scale, zero = scale_and_zero(minimum, highest)
    if tl.program_id(0) == 0:
        tl.store(scale_ptr, scale)
        tl.store(zero_ptr, zero.to(tl.uint8))
    y = gelu(x.to(tl.float32), APPROXIMATE).to(kind).to(tl.float32)
    level = quantized_level(divide(y, scale, libdevice.div_rn(1.0, scale)), zero, 0.0, 255.0)
    tl.store(out_ptr + offsets, (to_integer(level) - 128).to(tl.int8), mask=mask)
