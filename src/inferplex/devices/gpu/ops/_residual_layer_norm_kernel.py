"""The Triton kernel of :func:`~inferplex.devices.gpu.ops._residual_layer_norm.residual_layer_norm`
(imported only where Triton runs): one program a few whole rows, held in registers; the Add, each
fake-quantize and the normalization in float32 between the loads and the stores (float16 and
bfloat16 data is rounded only where it is loaded and stored; its quantizers multiply by the scale's
float32 inverse, float32 data's divide as ONNX does); with SHARED (the output's pair and the
QuantizeLinear of one quantizer) each value's steps computed once for both; with PARTIALS the
minimum and maximum of each program's output written for a DynamicQuantizeLinear."""

from __future__ import annotations

import triton
import triton.language as tl
from triton.language.extra import libdevice

from inferplex.devices.gpu.ops._triton_rounding import (
    dequantized,
    divide,
    quantized_level,
    quantized_steps,
    to_integer,
)


@triton.jit
def _low_high(a_low, a_high, b_low, b_high):
    # the smaller low (a NaN's place left to the high) and the larger high, NaN where either is
    return tl.minimum(a_low, b_low), tl.maximum(a_high, b_high, propagate_nan=tl.PropagateNan.ALL)


@triton.jit
def layer_norm(a_ptr, b_ptr, weight_ptr, bias_ptr, out_ptr, data_ptr, low_ptr, high_ptr,  # noqa: N803
               rows, width, epsilon,
               s_scale, s_inverse, s_zero, s_low, s_high,
               o_scale, o_inverse, o_zero, o_low, o_high,
               q_scale, q_inverse, q_zero, q_low, q_high, a_scale, a_zero, b_scale, b_zero,
               ADD: tl.constexpr, SUM: tl.constexpr, OUTPUT: tl.constexpr, QUANTIZE: tl.constexpr,
               SHARED: tl.constexpr, PARTIALS: tl.constexpr, DIVIDE: tl.constexpr, ROWS: tl.constexpr,
               BLOCK: tl.constexpr, A_LEVELS: tl.constexpr = False, B_LEVELS: tl.constexpr = False,
               VALUE: tl.constexpr = True, KIND: tl.constexpr = tl.float32):
    # with A_LEVELS (B_LEVELS) a (b) is a pair's 8-bit levels, its value (level - zero) * scale in
    # float32 rounded to KIND, the data's type, as the pair's call stores it; without VALUE only the
    # QuantizeLinear's data is written
    # ROWS rows a program; with PARTIALS the minimum and maximum of the program's output (NaN where
    # it holds one) at low_ptr and high_ptr, as minmax_partials writes them for the
    # DynamicQuantizeLinear that reads the output
    first = tl.program_id(0) * ROWS
    row = tl.arange(0, ROWS)
    columns = tl.arange(0, BLOCK)
    inside = (first + row < rows)[:, None] & (columns < width)[None, :]
    # a 64-bit start and 32-bit offsets within the program's rows
    start = first.to(tl.int64) * width
    a_ptr, b_ptr, out_ptr, data_ptr = a_ptr + start, b_ptr + start, out_ptr + start, data_ptr + start
    offsets = row[:, None] * width + columns[None, :]
    # past the row's end the values are 0, as the sums below need: levels read the zero point there
    x = tl.load(a_ptr + offsets, mask=inside, other=a_zero if A_LEVELS else 0).to(tl.float32)
    if A_LEVELS:
        x = libdevice.mul_rn(x - a_zero, a_scale).to(KIND).to(tl.float32)
    if ADD:
        other = tl.load(b_ptr + offsets, mask=inside, other=b_zero if B_LEVELS else 0).to(tl.float32)
        if B_LEVELS:
            other = libdevice.mul_rn(other - b_zero, b_scale).to(KIND).to(tl.float32)
        x = libdevice.add_rn(x, other)
    if SUM:
        x = dequantized(x, s_scale, s_inverse, s_zero, s_low, s_high, DIVIDE)
    # each rounding spelled out, so that no variant of the kernel contracts it differently
    mean = libdevice.div_rn(tl.sum(x, axis=1), width * 1.0)[:, None]
    centered = tl.where(inside, x - mean, 0.0)
    variance = libdevice.div_rn(tl.sum(libdevice.mul_rn(centered, centered), axis=1), width * 1.0)[:, None]
    deviation = libdevice.rsqrt(libdevice.add_rn(variance, epsilon))
    weight = tl.load(weight_ptr + columns, mask=columns < width, other=0.0).to(tl.float32)[None, :]
    shift = tl.load(bias_ptr + columns, mask=columns < width, other=0.0).to(tl.float32)[None, :]
    y = libdevice.fma(weight, libdevice.mul_rn(centered, deviation), shift)
    if SHARED:  # the output's pair and the QuantizeLinear are one quantizer: its steps once
        steps = quantized_steps(y, q_scale, q_inverse, q_zero, q_low, q_high, DIVIDE)
        value = libdevice.mul_rn(steps, q_scale)
    elif OUTPUT:
        value = dequantized(y, o_scale, o_inverse, o_zero, o_low, o_high, DIVIDE)
    else:
        value = y
    stored = value.to(out_ptr.dtype.element_ty)
    if VALUE:
        tl.store(out_ptr + offsets, stored, mask=inside)
    if PARTIALS:  # of the values as stored, which the quantizer reads
        seen = stored.to(tl.float32)  # one reduction of both; a NaN shows in the maximum
        lows, highs = tl.reduce((tl.where(inside, seen, float("inf")), tl.where(inside, seen, float("-inf"))),
                                1, _low_high)
        low, high = tl.reduce((lows, highs), 0, _low_high)
        tl.store(low_ptr + tl.program_id(0), tl.where(high != high, float("nan"), low))
        tl.store(high_ptr + tl.program_id(0), high)
    if SHARED:  # NaN gives the range's low end, as a clamp of NaN does
        level = tl.where(y == y, steps + q_zero * 1.0, q_low * 1.0)
        tl.store(data_ptr + offsets, to_integer(level).to(data_ptr.dtype.element_ty), mask=inside)
    elif QUANTIZE:  # QuantizeLinear's numbers on the normalization's output, rounded half to even
        ratio = divide(y, q_scale, q_inverse) if DIVIDE else y * q_inverse
        level = quantized_level(ratio, q_zero * 1.0, q_low * 1.0, q_high * 1.0)
        tl.store(data_ptr + offsets, to_integer(level).to(data_ptr.dtype.element_ty), mask=inside)
