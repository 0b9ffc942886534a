"""Triton kernels that check the GPU's exact rounding steps (``devices/gpu/ops/_triton_rounding``)
against the hardware's own IEEE division and rounding over every float32 bit pattern (imported
only where Triton and CUDA are present, by ``test_gpu_rounding.py``)."""

from __future__ import annotations

import triton
import triton.language as tl
from triton.language.extra import libdevice

from inferplex.devices.gpu.ops._triton_rounding import divide, round_half_even, to_integer


@triton.jit
def count_division_mismatches(counts_ptr, start, divisor, inverse, BLOCK: tl.constexpr):  # noqa: N803
    """counts[0]: patterns where ``divide`` and ``div_rn`` differ in any bit (NaN equal to NaN);
    counts[1]: those among them where ``x`` and the quotient are both at least 2**-100 in magnitude."""
    bits = start + tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    x = bits.to(tl.uint32).to(tl.float32, bitcast=True)
    want = libdevice.div_rn(x, divisor)
    got = divide(x, divisor, inverse)
    same = want.to(tl.int32, bitcast=True) == got.to(tl.int32, bitcast=True)
    same = same | ((want != want) & (got != got))
    tiny = 7.888609052210118e-31  # 2**-100
    normal = (tl.abs(x) >= tiny) & (tl.abs(want) >= tiny)
    tl.atomic_add(counts_ptr, tl.sum((~same).to(tl.int32), axis=0))
    tl.atomic_add(counts_ptr + 1, tl.sum((~same & normal).to(tl.int32), axis=0))


@triton.jit
def count_rounding_mismatches(counts_ptr, start, BLOCK: tl.constexpr):  # noqa: N803
    """counts[0]: patterns of magnitude at most 2**22 where ``round_half_even`` differs from ``rint``
    (a zero's sign aside) or ``to_integer`` of it from ``rint``'s integer; counts[1]: larger finite
    ones that come out smaller than 2**22 - 2 in magnitude (which the callers would not saturate)."""
    bits = start + tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    x = bits.to(tl.uint32).to(tl.float32, bitcast=True)
    small = tl.abs(x) <= 4194304.0
    want = libdevice.rint(x)
    got = round_half_even(x)
    wrong_small = small & ((want != got) | (to_integer(got) != want.to(tl.int32)))
    wrong_large = ~small & (x == x) & (tl.abs(got) < 4194302.0)
    tl.atomic_add(counts_ptr, tl.sum(wrong_small.to(tl.int32), axis=0))
    tl.atomic_add(counts_ptr + 1, tl.sum(wrong_large.to(tl.int32), axis=0))
