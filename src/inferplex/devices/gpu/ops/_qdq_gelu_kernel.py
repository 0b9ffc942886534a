"""The Triton kernel of :func:`~inferplex.devices.gpu.ops._qdq_gelu.quantized_gelu` (imported only
where Triton runs): one pass over ``x``, each step rounded to the data's type as the separate calls
round it."""

from __future__ import annotations

import triton
import triton.language as tl
from triton.language.extra import libdevice

from inferplex.devices.gpu.ops._triton_rounding import divide, fake_quantize, quantized_level, to_integer


@triton.jit
def gelu(x_ptr, out_ptr, count, factor, factor_inverse, one, half,  # noqa: N803
         e_scale, e_inverse, e_zero, e_low, e_high,
         s_scale, s_inverse, s_zero, s_low, s_high,
         p_scale, p_inverse, p_zero, p_low, p_high, q_scale, q_inverse, q_zero, q_low, q_high,
         DIVIDE: tl.constexpr, SCALE_DIVIDES: tl.constexpr, ERF: tl.constexpr, SUM: tl.constexpr,
         PRODUCT: tl.constexpr, QUANTIZE: tl.constexpr, BLOCK: tl.constexpr):
    # the data's type: x's, also where the call writes the 8-bit data of a QuantizeLinear (QUANTIZE)
    KIND: tl.constexpr = x_ptr.dtype.element_ty  # noqa: N806
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    inside = offsets < count
    x = tl.load(x_ptr + offsets, mask=inside, other=0.0).to(tl.float32)
    if SCALE_DIVIDES:
        t = divide(x, factor, factor_inverse).to(KIND).to(tl.float32)
    else:
        t = libdevice.mul_rn(x, factor).to(KIND).to(tl.float32)
    e = libdevice.erf(t).to(KIND).to(tl.float32)
    if ERF:
        e = fake_quantize(e, e_scale, e_inverse, e_zero, e_low, e_high, KIND, DIVIDE)
    s = libdevice.add_rn(e, one).to(KIND).to(tl.float32)
    if SUM:
        s = fake_quantize(s, s_scale, s_inverse, s_zero, s_low, s_high, KIND, DIVIDE)
    p = libdevice.mul_rn(x, s).to(KIND).to(tl.float32)
    if PRODUCT:
        p = fake_quantize(p, p_scale, p_inverse, p_zero, p_low, p_high, KIND, DIVIDE)
    result = libdevice.mul_rn(p, half).to(KIND)
    if QUANTIZE:  # QuantizeLinear's numbers: divided by the scale, half to even, saturated
        level = quantized_level(divide(result.to(tl.float32), q_scale, q_inverse), q_zero * 1.0, q_low * 1.0,
                                q_high * 1.0)
        tl.store(out_ptr + offsets, to_integer(level).to(out_ptr.dtype.element_ty), mask=inside)
    else:
        tl.store(out_ptr + offsets, result, mask=inside)
