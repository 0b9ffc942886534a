"""The Triton kernel of :func:`~inferplex.devices.gpu.ops._qdq_attention.quantized_attention`
(imported only where Triton runs).  One program takes a block of query rows of one batch and head
and the whole key sequence: the scores, each step of the chain and its fake-quantize, the softmax
over the row, and the product with V, rounding to the data's type where the separate calls do.
With TABLE, the steps from the scores' pair to the scaled scores' pair are a lookup by the
scores' level (see ``scores_table``)."""

from __future__ import annotations

import triton
import triton.language as tl
from triton.language.extra import libdevice

from inferplex.devices.gpu.ops._triton_rounding import divide, fake_quantize, quantized_steps, to_integer


@triton.jit
def attention(q_ptr, k_ptr, v_ptr, mask_ptr, table_ptr, out_ptr, heads, rows, keys, depth, width,  # noqa: N803
              sq_b, sq_h, sq_s, sq_d, sk_b, sk_h, sk_d, sk_s, sv_b, sv_h, sv_s, sv_d,
              sm_b, sm_h, sm_s, sm_k, so_b, so_h, so_s, so_d, factor, factor_inverse,
              s1_scale, s1_inverse, s1_zero, s1_low, s1_high,
              s2_scale, s2_inverse, s2_zero, s2_low, s2_high,
              s3_scale, s3_inverse, s3_zero, s3_low, s3_high,
              s4_scale, s4_inverse, s4_zero, s4_low, s4_high,
              s5_scale, s5_inverse, s5_zero, s5_low, s5_high,
              DIVIDE: tl.constexpr, IEEE: tl.constexpr, SCALE: tl.constexpr,
              MASK: tl.constexpr, TABLE: tl.constexpr, S1: tl.constexpr, S2: tl.constexpr, S3: tl.constexpr,
              S4: tl.constexpr, S5: tl.constexpr, BM: tl.constexpr, BK: tl.constexpr,
              BD: tl.constexpr, BV: tl.constexpr):
    KIND: tl.constexpr = out_ptr.dtype.element_ty  # noqa: N806
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
    s = s.to(KIND).to(tl.float32)
    if TABLE:  # the scores pair's level picks the scaled (and requantized) score
        steps = quantized_steps(s, s1_scale, s1_inverse, s1_zero, s1_low, s1_high, DIVIDE)
        s = tl.load(table_ptr + to_integer(steps + (s1_zero - s1_low) * 1.0)).to(tl.float32)
    else:
        if S1:
            s = fake_quantize(s, s1_scale, s1_inverse, s1_zero, s1_low, s1_high, KIND, DIVIDE)
        if SCALE == 1:
            s = divide(s, factor, factor_inverse).to(KIND).to(tl.float32)
        elif SCALE == 2:
            s = libdevice.mul_rn(s, factor).to(KIND).to(tl.float32)
        if S2:
            s = fake_quantize(s, s2_scale, s2_inverse, s2_zero, s2_low, s2_high, KIND, DIVIDE)
    if MASK:
        added = tl.load(mask_ptr + b * sm_b + h * sm_h + r[:, None] * sm_s + k[None, :] * sm_k,
                        mask=in_rows[:, None] & in_keys[None, :], other=0.0).to(tl.float32)
        s = libdevice.add_rn(s, added).to(KIND).to(tl.float32)
        if S3:
            s = fake_quantize(s, s3_scale, s3_inverse, s3_zero, s3_low, s3_high, KIND, DIVIDE)
    s = tl.where(in_keys[None, :], s, float("-inf"))
    top = tl.max(s, axis=1)
    e = tl.where(in_keys[None, :], libdevice.exp(s - top[:, None]), 0.0)
    total = tl.sum(e, axis=1)[:, None]
    p = divide(e, total, libdevice.div_rn(1.0, total)).to(KIND).to(tl.float32)
    if S4:
        p = fake_quantize(p, s4_scale, s4_inverse, s4_zero, s4_low, s4_high, KIND, DIVIDE)
    p = tl.where(in_keys[None, :], p, 0.0)
    v = tl.load(v_ptr + b * sv_b + h * sv_h + k[:, None] * sv_s + c[None, :] * sv_d,
                mask=in_keys[:, None] & (c < width)[None, :], other=0.0)
    if IEEE:
        o = tl.dot(p.to(v.dtype), v, input_precision="ieee")
    else:
        o = tl.dot(p.to(v.dtype), v)
    o = o.to(KIND).to(tl.float32)
    if S5:
        o = fake_quantize(o, s5_scale, s5_inverse, s5_zero, s5_low, s5_high, KIND, DIVIDE)
    tl.store(out_ptr + b * so_b + h * so_h + r[:, None] * so_s + c[None, :] * so_d, o.to(KIND),
             mask=in_rows[:, None] & (c < width)[None, :])
