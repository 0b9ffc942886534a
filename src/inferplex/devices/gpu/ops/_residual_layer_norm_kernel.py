"""The Triton kernel of :func:`~inferplex.devices.gpu.ops._residual_layer_norm.residual_layer_norm`
(imported only where Triton runs): one program a row, the whole row in registers; the Add and each
fake-quantize rounded to the data's type as the separate calls round them."""

from __future__ import annotations

import triton
import triton.language as tl
from triton.language.extra import libdevice

from inferplex.devices.gpu.ops._triton_rounding import divide, fake_quantize, quantized_level, to_integer


@triton.jit
def layer_norm(a_ptr, b_ptr, weight_ptr, bias_ptr, out_ptr, data_ptr, width, epsilon,  # noqa: N803
               s_scale, s_inverse, s_zero, s_low, s_high,
               o_scale, o_inverse, o_zero, o_low, o_high,
               q_scale, q_inverse, q_zero, q_low, q_high,
               ADD: tl.constexpr, SUM: tl.constexpr, OUTPUT: tl.constexpr, QUANTIZE: tl.constexpr,
               DIVIDE: tl.constexpr, BLOCK: tl.constexpr):
    KIND: tl.constexpr = out_ptr.dtype.element_ty  # noqa: N806
    start = tl.program_id(0).to(tl.int64) * width
    columns = tl.arange(0, BLOCK)
    inside = columns < width
    x = tl.load(a_ptr + start + columns, mask=inside, other=0.0).to(tl.float32)
    if ADD:
        other = tl.load(b_ptr + start + columns, mask=inside, other=0.0).to(tl.float32)
        x = libdevice.add_rn(x, other).to(KIND).to(tl.float32)
    if SUM:
        x = fake_quantize(x, s_scale, s_inverse, s_zero, s_low, s_high, KIND, DIVIDE)
    # each rounding spelled out, so that no variant of the kernel contracts it differently
    mean = libdevice.div_rn(tl.sum(x, axis=0), width * 1.0)
    centered = tl.where(inside, x - mean, 0.0)
    variance = libdevice.div_rn(tl.sum(libdevice.mul_rn(centered, centered), axis=0), width * 1.0)
    deviation = libdevice.rsqrt(libdevice.add_rn(variance, epsilon))
    weight = tl.load(weight_ptr + columns, mask=inside, other=0.0).to(tl.float32)
    shift = tl.load(bias_ptr + columns, mask=inside, other=0.0).to(tl.float32)
    y = libdevice.fma(weight, libdevice.mul_rn(centered, deviation), shift).to(KIND).to(tl.float32)
    value = fake_quantize(y, o_scale, o_inverse, o_zero, o_low, o_high, KIND, DIVIDE) if OUTPUT else y
    tl.store(out_ptr + start + columns, value.to(KIND), mask=inside)
    if QUANTIZE:  # QuantizeLinear's numbers on the normalization's output: divided, half to even
        level = quantized_level(divide(y, q_scale, q_inverse), q_zero * 1.0, q_low * 1.0, q_high * 1.0)
        tl.store(data_ptr + start + columns, to_integer(level).to(data_ptr.dtype.element_ty), mask=inside)
