"""The Triton kernels of :mod:`._quantized_triton` (imported only where Triton runs; that module
says what each computes and launches them).  Their rounding steps are :mod:`._triton_rounding`'s,
bit for bit what IEEE arithmetic and the ATen forms give; the int8 matmul's epilogue runs in
float32 up to its store."""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from triton.language.extra import libdevice

from inferplex.devices.gpu.ops._triton_rounding import (
    dequantized,
    divide,
    fake_quantize,
    quantized_level,
    quantized_steps,
    to_integer,
)

FLOAT_TYPES = {torch.float32: tl.float32, torch.float16: tl.float16, torch.bfloat16: tl.bfloat16}
"""Triton's float types by torch's, for the kernels that take the program's type as a constant."""


@triton.jit
def quantize(x_ptr, out_ptr, scale_ptr, zero_ptr, count, zero, low, high,  # noqa: N803
             ZERO: tl.constexpr, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < count
    x = tl.load(x_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
    point = tl.load(zero_ptr).to(tl.float32) if ZERO else zero
    scale = tl.load(scale_ptr).to(tl.float32)
    level = quantized_level(divide(x, scale, libdevice.div_rn(1.0, scale)), point, low, high)
    tl.store(out_ptr + offsets, to_integer(level).to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def dequantize(x_ptr, out_ptr, scale_ptr, zero_ptr, count, ZERO: tl.constexpr,  # noqa: N803
               BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < count
    values = tl.load(x_ptr + offsets, mask=mask, other=0).to(tl.int32)
    if ZERO:
        values = values - tl.load(zero_ptr).to(tl.int32)
    result = values.to(tl.float32) * tl.load(scale_ptr).to(tl.float32)
    tl.store(out_ptr + offsets, result.to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def minmax_partials(x_ptr, low_ptr, high_ptr, count, per_program,  # noqa: N803
                    RANGE: tl.constexpr, BLOCK: tl.constexpr):
    # the minimum and maximum of one slice of per_program elements; NaN where the slice holds one
    # (as torch.aminmax propagates it); with RANGE merged into the value range at low_ptr instead
    start = tl.program_id(0) * per_program
    lows, highs, nans = no_values(BLOCK)
    for step in range(0, per_program, BLOCK):
        offsets = start + step + tl.arange(0, BLOCK)
        mask = offsets < count
        x = tl.load(x_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
        lows, highs, nans = merge_values(lows, highs, nans, x, mask)
    if RANGE:
        record_range(low_ptr, tl.min(lows, axis=0), tl.max(highs, axis=0), tl.max(nans, axis=0))
    else:
        store_partials(low_ptr, high_ptr, lows, highs, nans)


@triton.jit
def no_values(BLOCK: tl.constexpr):  # noqa: N803
    """Running minima, maxima and NaN flags (see :func:`merge_values`) that have seen no value."""
    return (tl.full((BLOCK,), float("inf"), tl.float32), tl.full((BLOCK,), float("-inf"), tl.float32),
            tl.zeros((BLOCK,), tl.int32))


@triton.jit
def merge_values(lows, highs, nans, x, mask):
    """Running minima, maxima and NaN flags (blocks of float32, int32) with the values ``x`` where
    ``mask`` holds."""
    return (tl.where(mask, tl.minimum(lows, x), lows), tl.where(mask, tl.maximum(highs, x), highs),
            nans | (x != x).to(tl.int32))


@triton.jit
def store_partials(low_ptr, high_ptr, lows, highs, nans):
    """This program's minimum and maximum of :func:`merge_values`' running values, NaN where one
    was NaN (as ``torch.aminmax`` propagates it)."""
    nan = tl.max(nans, axis=0) > 0
    tl.store(low_ptr + tl.program_id(0), tl.where(nan, float("nan"), tl.min(lows, axis=0)))
    tl.store(high_ptr + tl.program_id(0), tl.where(nan, float("nan"), tl.max(highs, axis=0)))


@triton.jit
def record_range(range_ptr, low, high, nan):
    """Merge a block's minimum, maximum and NaN count into the value range at ``range_ptr``: three
    float32 values, ``max(0, -minimum)``, ``max(0, maximum)`` and a flag (1 where a NaN was
    seen), which start at 0 (all DynamicQuantizeLinear reads of a range: its span always holds
    0).  Relaxed atomics: the kernel that reads the range runs after this one ends."""
    tl.atomic_max(range_ptr, -low, sem="relaxed")
    tl.atomic_max(range_ptr + 1, high, sem="relaxed")
    tl.atomic_max(range_ptr + 2, tl.minimum(nan, 1).to(tl.float32), sem="relaxed")


@triton.jit
def min_max(a_low, a_high, b_low, b_high):
    """The minimum and maximum of two pairs, NaN where either holds one (a ``tl.reduce`` combiner)."""
    return tl.minimum(a_low, b_low, propagate_nan=tl.PropagateNan.ALL), \
        tl.maximum(a_high, b_high, propagate_nan=tl.PropagateNan.ALL)


@triton.jit
def _band_max(a_band, a_high, b_band, b_high):
    # the larger band flag, and the larger value, NaN where either is
    return tl.maximum(a_band, b_band), tl.maximum(a_high, b_high, propagate_nan=tl.PropagateNan.ALL)


@triton.jit
def range_parameters(range_ptr):
    """DynamicQuantizeLinear's float32 scale and zero point (see :func:`dynamic_parameters`) from a
    value range :func:`record_range` made."""
    nan = tl.load(range_ptr + 2) > 0.0
    low = tl.where(nan, float("nan"), -tl.load(range_ptr))
    high = tl.where(nan, float("nan"), tl.load(range_ptr + 1))
    return scale_and_zero(low, high)


@triton.jit
def dynamic_parameters(low_ptr, high_ptr, parts, PARTS: tl.constexpr):  # noqa: N803
    """DynamicQuantizeLinear's float32 scale and zero point (a float32 integer in [0, 255]) from
    :func:`minmax_partials`' ``parts`` results (PARTS: a power of two at least as large); each
    program reduces them again (a few hundred values, read from L2)."""
    part = tl.arange(0, PARTS)
    lows = tl.load(low_ptr + part, mask=part < parts, other=float("inf"))
    highs = tl.load(high_ptr + part, mask=part < parts, other=float("-inf"))
    nan = tl.max(((lows != lows) | (highs != highs)).to(tl.int32), axis=0) > 0
    low = tl.where(nan, float("nan"), tl.min(lows, axis=0))
    high = tl.where(nan, float("nan"), tl.max(highs, axis=0))
    return scale_and_zero(low, high)


@triton.jit
def scale_and_zero(low, high):
    """DynamicQuantizeLinear's float32 scale and zero point (a float32 integer in [0, 255]) of data
    whose minimum is ``low`` and maximum ``high``: the range is widened to hold 0."""
    negated_low = tl.maximum(-low, 0.0)
    span = tl.maximum(high, 0.0) + negated_low
    scale = tl.where(span == 0.0, 1.0, libdevice.div_rn(span, 255.0))
    zero = libdevice.rint(tl.minimum(libdevice.div_rn(negated_low, scale), 255.0))
    return scale, zero


@triton.jit
def dynamic_quantize(x_ptr, out_ptr, low_ptr, high_ptr, scale_ptr, zero_ptr, count, parts,
                     CENTERED: tl.constexpr, DEQUANTIZED: tl.constexpr, SHIFTED: tl.constexpr,  # noqa: N803
                     PARTS: tl.constexpr, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < count
    x = tl.load(x_ptr + offsets, mask=mask, other=0.0)  # in flight while the partials are reduced
    scale, zero = dynamic_parameters(low_ptr, high_ptr, parts, PARTS)
    if tl.program_id(0) == 0:
        tl.store(scale_ptr, scale)
        if not CENTERED:
            tl.store(zero_ptr, zero.to(tl.uint8))
    level = quantized_level(divide(x.to(tl.float32), scale, libdevice.div_rn(1.0, scale)), zero, 0.0, 255.0)
    if DEQUANTIZED:  # (level - zero) * scale, rounded once to x's type
        tl.store(out_ptr + offsets, libdevice.mul_rn(level - zero, scale).to(x.dtype), mask=mask)
    elif CENTERED:  # level - zero, at most 255 in magnitude: exact in every floating type
        tl.store(out_ptr + offsets, (level - zero).to(x.dtype), mask=mask)
    elif SHIFTED:  # the uint8 level moved down by 128 into int8, as the int8 matmul reads it
        tl.store(out_ptr + offsets, (to_integer(level) - 128).to(tl.int8), mask=mask)
    else:
        tl.store(out_ptr + offsets, to_integer(level).to(tl.uint8), mask=mask)


@triton.jit
def fake_quantize_pass(x_ptr, out_ptr, count, scale, inverse, zero, low, high,  # noqa: N803
                       DIVIDE: tl.constexpr, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < count
    x = tl.load(x_ptr + offsets, mask=mask, other=0.0)
    values = dequantized(x.to(tl.float32), scale, inverse, zero, low, high, DIVIDE)
    tl.store(out_ptr + offsets, values.to(x.dtype), mask=mask)


@triton.jit
def conv_epilogue(acc_ptr, out_ptr, scale_ptr, bias_ptr, other_ptr, count, channels, inner,  # noqa: N803
                  inverse, CHANNELS_LAST: tl.constexpr, BIAS: tl.constexpr, ADD: tl.constexpr,
                  RELU: tl.constexpr, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < count
    acc = tl.load(acc_ptr + offsets, mask=mask, other=0.0)
    # the factor rounded to the data's type once, as the ATen form's ``.to(dtype)``
    factor = (tl.load(scale_ptr).to(tl.float32) * inverse).to(acc.dtype).to(tl.float32)
    values = acc.to(tl.float32) * factor
    if BIAS:
        channel = offsets % channels if CHANNELS_LAST else (offsets // inner) % channels
        values = tl.load(bias_ptr + channel, mask=mask, other=0.0).to(tl.float32) + values
    if ADD:  # the residual Add after the call's value, rounded as the separate Add rounds it
        other = tl.load(other_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
        values = libdevice.add_rn(values.to(acc.dtype).to(tl.float32), other)
    if RELU:  # NaN stays NaN, as torch.relu keeps it
        values = tl.where(values < 0.0, 0.0, values)
    tl.store(out_ptr + offsets, values.to(acc.dtype), mask=mask)


@triton.jit
def conv_quantize(acc_ptr, bias_ptr, other_ptr, out_ptr, count, channels, inner,  # noqa: N803
                  f_scale, f_inverse, f_zero, f_low, f_high, s_scale, s_inverse, s_zero, s_low, s_high,
                  CHANNELS_LAST: tl.constexpr, BIAS: tl.constexpr, ADD: tl.constexpr,
                  DIVIDE: tl.constexpr, BLOCK: tl.constexpr):
    # a convolution's output: + bias, rounded; the first pair; + other, rounded; the second pair
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < count
    kind = out_ptr.dtype.element_ty
    values = tl.load(acc_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
    if BIAS:
        channel = offsets % channels if CHANNELS_LAST else (offsets // inner) % channels
        bias = tl.load(bias_ptr + channel, mask=mask, other=0.0).to(tl.float32)
        values = (values + bias).to(kind).to(tl.float32)
    values = fake_quantize(values, f_scale, f_inverse, f_zero, f_low, f_high, kind, DIVIDE)
    if ADD:
        other = tl.load(other_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
        values = fake_quantize((values + other).to(kind).to(tl.float32), s_scale, s_inverse, s_zero, s_low,
                               s_high, kind, DIVIDE)
    tl.store(out_ptr + offsets, values.to(kind), mask=mask)


@triton.jit
def grouped_tile(pid, rows, columns, BM: tl.constexpr, BN: tl.constexpr, GROUP: tl.constexpr):  # noqa: N803
    """The (row, column) tile number ``pid`` is of a BM x BN tiling of the output: tiles go GROUP
    tile rows a column at a time, so programs working on neighbouring numbers at once reuse each
    weight tile from L2."""
    blocks_m, blocks_n = tl.cdiv(rows, BM), tl.cdiv(columns, BN)
    group = pid // (GROUP * blocks_n)
    first = group * GROUP
    size = tl.minimum(blocks_m - first, GROUP)
    return first + (pid % (GROUP * blocks_n)) % size, (pid % (GROUP * blocks_n)) // size


@triton.jit
def linear(a_ptr, w_ptr, out_ptr, column_ptr, zero_ptr, scale_ptr, bias_ptr, table_ptr, x_scale_ptr,  # noqa: N803
           range_ptr, M, N, K, stride_am, stride_wn, stride_om, shift,
           mid_scale, mid_inverse, mid_zero, mid_low, mid_high,
           last_scale, last_inverse, last_zero, last_low, last_high, band_low, band_high,
           A_UINT8: tl.constexpr, COLUMNS: tl.constexpr,
           ZERO: tl.constexpr, SCALES: tl.constexpr, BIAS: tl.constexpr, EVEN_K: tl.constexpr,
           MID: tl.constexpr, LAST: tl.constexpr, TABLE: tl.constexpr, X_SCALE: tl.constexpr,
           LEVELS: tl.constexpr, GELU_RANGE: tl.constexpr, DIVIDE: tl.constexpr, TMA: tl.constexpr,
           BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP: tl.constexpr,
           FLATTEN: tl.constexpr):
    # Program p computes output tiles p, p + programs, p + 2 programs and so on: one where the grid
    # has a program per tile; where it has fewer (persistent programs), FLATTEN makes the tiles'
    # steps one loop, pipelined across tiles, so a tile's loads overlap the epilogue before.
    # With TMA, a_ptr and w_ptr are tensor descriptors of the rows and the weight (Hopper's tensor
    # copies; reads past their edges give 0, which adds nothing: past K the weight is 0, past M
    # or N nothing is stored).  The epilogue, in float32 up to the store: the scales; with MID,
    # fake-quantized (a QuantizeLinear -> DequantizeLinear pair on the matmul's output) before the
    # bias; with LAST, fake-quantized after it (dividing by the scale for float32 output, as ONNX
    # does, or times its inverse, DIVIDE off).  With
    # TABLE, LAST's level (less its low end) picks the stored value in ``table_ptr`` instead: the
    # value of a function of the fake-quantized output, computed for each of its 256 levels; with
    # LEVELS, LAST's levels themselves (its QuantizeLinear's 8-bit data).
    # With X_SCALE the scales are the weight's, times the data's at ``x_scale_ptr`` (the model's
    # Mul of the two, in float32).  With GELU_RANGE the stored values' largest, whether one lies
    # in [band_low, band_high] and whether one is NaN are merged into the value range at range_ptr
    # (see record_range; the first of its values is 1 where one lies in the band), for the GELU
    # quantizer that reads this output (see _gelu_levels).
    tiles = tl.cdiv(M, BM) * tl.cdiv(N, BN)
    for tile in tl.range(tl.program_id(0), tiles, tl.num_programs(0), flatten=FLATTEN):
        pid_m, pid_n = grouped_tile(tile, M, N, BM, BN, GROUP)
        rm = (pid_m * BM + tl.arange(0, BM)) % M
        rn = (pid_n * BN + tl.arange(0, BN)) % N
        acc = tl.zeros((BM, BN), dtype=tl.int32)
        if TMA:
            for k in range(0, tl.cdiv(K, BK)):
                a = a_ptr.load([pid_m * BM, k * BK])
                if A_UINT8:
                    a = (a ^ 0x80).to(tl.int8, bitcast=True)
                acc = tl.dot(a, w_ptr.load([pid_n * BN, k * BK]).T, acc, out_dtype=tl.int32)
        else:
            rk = tl.arange(0, BK)
            a_ptrs = a_ptr + rm[:, None] * stride_am + rk[None, :]
            w_ptrs = w_ptr + rn[None, :] * stride_wn + rk[:, None]
            for k in range(0, tl.cdiv(K, BK)):
                if EVEN_K:
                    a = tl.load(a_ptrs)
                    w = tl.load(w_ptrs)
                else:
                    inside = rk < K - k * BK
                    a = tl.load(a_ptrs, mask=inside[None, :], other=128 if A_UINT8 else 0)
                    w = tl.load(w_ptrs, mask=inside[:, None], other=0)
                if A_UINT8:  # uint8 moved down by 128: x ^ 0x80 read as int8
                    a = (a ^ 0x80).to(tl.int8, bitcast=True)
                acc += tl.dot(a, w)
                a_ptrs += BK
                w_ptrs += BK
        rows = pid_m * BM + tl.arange(0, BM)
        columns = pid_n * BN + tl.arange(0, BN)
        if COLUMNS:  # the shift and zero point times each column's sum, exact in int32
            offset = shift - tl.load(zero_ptr).to(tl.int32) if ZERO else shift
            acc += offset * tl.load(column_ptr + rn)[None, :]
        values = acc.to(tl.float32)
        if SCALES:
            scales = tl.load(scale_ptr + rn)[None, :].to(tl.float32)
        else:
            scales = tl.load(scale_ptr).to(tl.float32)
        if X_SCALE:
            scales = libdevice.mul_rn(tl.load(x_scale_ptr).to(tl.float32), scales)
        values = values * scales
        if MID:
            values = dequantized(values, mid_scale, mid_inverse, mid_zero, mid_low, mid_high, DIVIDE)
        if BIAS:
            values = values + tl.load(bias_ptr + rn)[None, :].to(tl.float32)
        if TABLE:
            steps = quantized_steps(values, last_scale, last_inverse, last_zero, last_low, last_high, DIVIDE)
            values = tl.load(table_ptr + to_integer(steps + (last_zero - last_low) * 1.0))
        elif LEVELS:
            steps = quantized_steps(values, last_scale, last_inverse, last_zero, last_low, last_high, DIVIDE)
            values = to_integer(steps + last_zero * 1.0)
        elif LAST:
            values = dequantized(values, last_scale, last_inverse, last_zero, last_low, last_high, DIVIDE)
        mask = (rows[:, None] < M) & (columns[None, :] < N)
        stored = values.to(out_ptr.dtype.element_ty)
        tl.store(out_ptr + rows[:, None] * stride_om + columns[None, :], stored, mask=mask)
        if GELU_RANGE:  # one reduction of both: whether a value lies in the band, the largest (NaN kept)
            stored = stored.to(tl.float32)
            inside = mask & (stored >= band_low) & (stored <= band_high)
            bands, highs = tl.reduce((tl.where(inside, 1.0, 0.0), tl.where(mask, stored, float("-inf"))), 1,
                                     _band_max)
            band, high = tl.reduce((bands, highs), 0, _band_max)
            record_range(range_ptr, -band, high, (high != high).to(tl.int32))
