"""The rounding steps of the QDQ kernels as Triton functions (imported only where Triton runs):
each gives what IEEE arithmetic and ONNX's QuantizeLinear give, bit for bit, from a few full-rate
float instructions.  The direct forms (``div_rn``'s division routine, ``rint`` and the float-integer
conversions, which run on the GPU's slower pipes) bound the QuantizeLinear and DynamicQuantizeLinear
passes (``bench/RESULTS.md`` has them measured before and after).

* :func:`divide`: ``x / divisor`` rounded to nearest even, from the divisor's float32 reciprocal;
* :func:`round_half_even`: ``rint`` below 2**22 in magnitude (the callers clamp first);
* :func:`to_integer`: a float32 holding an integer within +-2**22 as int32;
* :func:`quantized_level`: QuantizeLinear's saturated integer, as float32;
* :func:`dequantized` and :func:`fake_quantize`: a QuantizeLinear -> DequantizeLinear pair, and
  :func:`quantized_steps` the pair's level before it is dequantized.

Explicitly rounded operations (``mul_rn``, ``add_rn``) keep the compiler from fusing a product
into the addition after it, which would round once where the separate calls round twice.
"""

from __future__ import annotations

import triton
import triton.language as tl
from triton.language.extra import libdevice

ROUNDING_BIAS = tl.constexpr(12582912.0)
"""1.5 * 2**23: a float32 of magnitude at most 2**22 plus this has its integer, rounded half to
even, in its last mantissa bits; taking it off again leaves that integer."""

_ROUNDING_BITS = tl.constexpr(0x4B400000)
"""The bits of :data:`ROUNDING_BIAS` as a float32."""

_FLOAT32_MAX = tl.constexpr(3.4028234663852886e38)


@triton.jit
def divide(x, divisor, inverse):
    """``x / divisor`` as ``div_rn`` rounds it, where ``inverse`` is the float32 ``1 / divisor``
    rounded to nearest: the product ``x * inverse`` (within an ulp of the quotient), its remainder
    ``x - divisor * product`` (exact in one fused multiply-add) and one correction, which rounds
    correctly (Markstein's theorem) while the quotient and the remainder are normal numbers.
    Where the remainder is 0 the product is exact (and keeps the sign of a zero); where it is not
    finite (an infinite or NaN ``x``, or a quotient past float32's range) the product is the
    quotient.  Where ``x`` or the quotient is below 2**-100 in magnitude (the remainder is then
    subnormal) the last bits may differ from ``div_rn``'s: every quantizer rounds such quotients
    to 0, and the kernels add them only to far larger values (``tests/test_gpu_rounding.py`` checks
    every float32 on CUDA)."""
    product = libdevice.mul_rn(x, inverse)
    remainder = libdevice.fma(-product, divisor, x)
    corrected = libdevice.fma(remainder, inverse, product)
    return tl.where((tl.abs(product) <= _FLOAT32_MAX) & (remainder != 0.0), corrected, product)


@triton.jit
def round_half_even(x):
    """``rint(x)`` for float32 ``x`` of magnitude at most 2**22 (above, the result stays at least
    2**22 - 2 in magnitude); the callers clamp to an 8-bit range first."""
    return libdevice.add_rn(libdevice.add_rn(x, ROUNDING_BIAS), -ROUNDING_BIAS)


@triton.jit
def to_integer(x):
    """Float32 ``x`` holding an integer of magnitude at most 2**22, as int32."""
    return libdevice.add_rn(x, ROUNDING_BIAS).to(tl.int32, bitcast=True) - _ROUNDING_BITS


@triton.jit
def quantized_level(ratio, zero, low, high):
    """``clamp(rint(ratio) + zero, low, high)`` as float32 (the quantized value before it is
    stored); ``zero``, ``low`` and ``high`` are float32 integers.  The ratio is clamped to
    ``[low - zero, high - zero]`` before it is rounded, which gives the same integer (the bounds are
    integers) and keeps it within :func:`round_half_even`'s exact range.  NaN gives ``low``, as a
    clamp of NaN does."""
    return round_half_even(tl.minimum(tl.maximum(ratio, low - zero), high - zero)) + zero


@triton.jit
def dequantized(values, scale, inverse, zero, low, high, DIVIDE: tl.constexpr):  # noqa: N803
    """A QuantizeLinear -> DequantizeLinear pair on float32 ``values``, in float32: divided by the
    scale (``DIVIDE``, float32 data, as ONNX does) or times its float32 inverse (f16/bf16 data, as
    torch's fake-quantize kernel does), rounded half to even, the zero point added, saturated, the
    zero point taken off and times the scale; computed as the ratio clamped to ``[low - zero,
    high - zero]``, rounded, times the scale (the same numbers: the bounds are integers).  NaN
    gives 0, the zero point's value (converting NaN to an integer gives 0 before the zero point is
    added)."""
    return libdevice.mul_rn(quantized_steps(values, scale, inverse, zero, low, high, DIVIDE), scale)


@triton.jit
def quantized_steps(values, scale, inverse, zero, low, high, DIVIDE: tl.constexpr):  # noqa: N803
    """The whole steps of :func:`dequantized` before they are times the scale: the level a
    QuantizeLinear stores less the zero point, as float32 (NaN gives 0)."""
    ratio = divide(values, scale, inverse) if DIVIDE else libdevice.mul_rn(values, inverse)
    point = zero * 1.0  # the integers as float32 (an argument equal to 1 arrives as a constant)
    steps = round_half_even(tl.minimum(tl.maximum(ratio, low * 1.0 - point), high * 1.0 - point))
    return tl.where(ratio == ratio, steps, 0.0)


@triton.jit
def fake_quantize(values, scale, inverse, zero, low, high, KIND: tl.constexpr, DIVIDE: tl.constexpr):  # noqa: N803
    """``quantize_dequantize``'s numbers on float32 ``values`` already rounded to ``KIND``:
    :func:`dequantized`, rounded to ``KIND`` again (and held as float32)."""
    return dequantized(values, scale, inverse, zero, low, high, DIVIDE).to(KIND).to(tl.float32)
