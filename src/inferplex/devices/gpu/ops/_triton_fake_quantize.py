"""The fake-quantize step as a Triton function the fused kernels of QDQ models call (the attention's
and GELU's; imported only where Triton runs)."""

from __future__ import annotations

import triton
import triton.language as tl
from triton.language.extra import libdevice


@triton.jit
def fake_quantize(values, scale, inverse, zero, low, high, KIND: tl.constexpr, DIVIDE: tl.constexpr):  # noqa: N803
    """``quantize_dequantize``'s numbers on float32 ``values`` (already rounded to ``KIND``): float32
    data divided by the scale, f16/bf16 times the float32 inverse, rounded half to even, saturated,
    and the result rounded to ``KIND`` again."""
    ratio = libdevice.div_rn(values, scale) if DIVIDE else values * inverse
    q = tl.minimum(tl.maximum(libdevice.rint(ratio).to(tl.int32) + zero, low), high)
    return libdevice.mul_rn((q - zero).to(tl.float32), scale).to(KIND).to(tl.float32)
