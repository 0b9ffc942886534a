"""The Triton kernel of :func:`~inferplex.devices.gpu.ops._qdq_attention.quantized_attention`
(imported only where Triton runs).  One program takes a block of query rows of one batch and head
and the whole key sequence: the scores, each step of the chain and its fake-quantize, the softmax
over the row, and the product with V.  Between its loads and its store the chain runs in float32:
float32 data as ONNX computes it (exact divisions, an accurate exp); float16 and bfloat16 data
rounded only where it is loaded and stored, the divisions as products by the divisor's float32
inverse and the exp as ``exp2``; the probabilities' pair hands the product with V its levels, which
these types hold exactly, and scales the product.  With ``LEVELS`` the program stores, in place of
the result, a QuantizeLinear's 8-bit data of the result as the data's type holds it (1: divided by
the scale as ONNX divides; 2: where the context's pair has the QuantizeLinear's numbers and
requantizing its value gives its levels back, those levels)."""

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

_LOG2_E = tl.constexpr(1.4426950408889634)


@triton.jit
def attention(q_ptr, k_ptr, v_ptr, mask_ptr, out_ptr, heads, rows, keys, depth, width,  # noqa: N803
              sq_b, sq_h, sq_s, sq_d, sk_b, sk_h, sk_d, sk_s, sv_b, sv_h, sv_s, sv_d,
              sm_b, sm_h, sm_s, sm_k, so_b, so_h, so_s, so_d, factor, factor_inverse,
              s1_scale, s1_inverse, s1_zero, s1_low, s1_high,
              s2_scale, s2_inverse, s2_zero, s2_low, s2_high,
              s3_scale, s3_inverse, s3_zero, s3_low, s3_high,
              s4_scale, s4_inverse, s4_zero, s4_low, s4_high,
              s5_scale, s5_inverse, s5_zero, s5_low, s5_high,
              q_scale, q_inverse, q_zero, q_low, q_high, LEVELS: tl.constexpr,
              DIVIDE: tl.constexpr, IEEE: tl.constexpr, SCALE: tl.constexpr, ALL_KEYS: tl.constexpr,
              MASK: tl.constexpr, S1: tl.constexpr, S2: tl.constexpr, S3: tl.constexpr,
              S4: tl.constexpr, S5: tl.constexpr, BM: tl.constexpr, BK: tl.constexpr,
              BD: tl.constexpr, BV: tl.constexpr):
    # DIVIDE: float32 data, computed as ONNX computes it; ALL_KEYS: the sequence fills the key block
    bh = tl.program_id(1)
    b, h = bh // heads, bh % heads
    r = tl.program_id(0) * BM + tl.arange(0, BM)
    d = tl.arange(0, BD)
    k = tl.arange(0, BK)
    c = tl.arange(0, BV)
    in_rows, in_keys = r < rows, k < keys
    q = tl.load(q_ptr + b * sq_b + h * sq_h + r[:, None] * sq_s + d[None, :] * sq_d,
                mask=in_rows[:, None] & (d < depth)[None, :], other=0.0)
    kt = tl.load(k_ptr + b * sk_b + h * sk_h + d[:, None] * sk_d + k[None, :] * sk_s,
                 mask=(d < depth)[:, None] & in_keys[None, :], other=0.0)
    if IEEE:
        s = tl.dot(q, kt, input_precision="ieee")
    else:
        s = tl.dot(q, kt)
    if S1:
        s = dequantized(s, s1_scale, s1_inverse, s1_zero, s1_low, s1_high, DIVIDE)
    if SCALE == 1:
        s = divide(s, factor, factor_inverse) if DIVIDE else s * factor_inverse
    elif SCALE == 2:
        s = libdevice.mul_rn(s, factor)
    if S2:
        s = dequantized(s, s2_scale, s2_inverse, s2_zero, s2_low, s2_high, DIVIDE)
    if MASK:
        added = tl.load(mask_ptr + b * sm_b + h * sm_h + r[:, None] * sm_s + k[None, :] * sm_k,
                        mask=in_rows[:, None] & in_keys[None, :], other=0.0).to(tl.float32)
        s = libdevice.add_rn(s, added)
        if S3:
            s = dequantized(s, s3_scale, s3_inverse, s3_zero, s3_low, s3_high, DIVIDE)
    if not ALL_KEYS:
        s = tl.where(in_keys[None, :], s, float("-inf"))
    top = tl.max(s, axis=1)
    if DIVIDE:
        e = libdevice.exp(s - top[:, None])
    else:
        e = tl.exp2((s - top[:, None]) * _LOG2_E)
    if not ALL_KEYS:
        e = tl.where(in_keys[None, :], e, 0.0)
    total = tl.sum(e, axis=1)[:, None]
    p = divide(e, total, libdevice.div_rn(1.0, total)) if DIVIDE else e * (1.0 / total)
    if S4 and DIVIDE:
        p = dequantized(p, s4_scale, s4_inverse, s4_zero, s4_low, s4_high, DIVIDE)
    elif S4:  # the levels (less the zero point, within +-255: exact in f16 and bf16) times V, then the scale
        p = quantized_steps(p, s4_scale, s4_inverse, s4_zero, s4_low, s4_high, DIVIDE)
    if not ALL_KEYS:
        p = tl.where(in_keys[None, :], p, 0.0)
    v = tl.load(v_ptr + b * sv_b + h * sv_h + k[:, None] * sv_s + c[None, :] * sv_d,
                mask=in_keys[:, None] & (c < width)[None, :], other=0.0)
    if IEEE:
        o = tl.dot(p.to(v.dtype), v, input_precision="ieee")
    else:
        o = tl.dot(p.to(v.dtype), v)
    if S4 and not DIVIDE:
        o = o * s4_scale
    if LEVELS == 2:  # the context's pair is the QuantizeLinear: its levels
        steps = quantized_steps(o, s5_scale, s5_inverse, s5_zero, s5_low, s5_high, DIVIDE)
        result = to_integer(steps + s5_zero * 1.0).to(out_ptr.dtype.element_ty)
    else:
        if S5:
            o = dequantized(o, s5_scale, s5_inverse, s5_zero, s5_low, s5_high, DIVIDE)
        if LEVELS == 1:  # the result as the data's type holds it, then QuantizeLinear's numbers
            stored = o.to(q_ptr.dtype.element_ty).to(tl.float32)
            level = quantized_level(divide(stored, q_scale, q_inverse), q_zero * 1.0, q_low * 1.0,
                                    q_high * 1.0)
            result = to_integer(level).to(out_ptr.dtype.element_ty)
        else:
            result = o.to(out_ptr.dtype.element_ty)
    tl.store(out_ptr + b * so_b + h * so_h + r[:, None] * so_s + c[None, :] * so_d, result,
             mask=in_rows[:, None] & (c < width)[None, :])
