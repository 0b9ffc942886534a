"""The Triton kernels of MatMulNBits on CUDA (their callers and the choice among them are in
:mod:`._nbits_triton`, which imports this module only where Triton can run).

* :func:`gemv`: a few rows of activations against the packed weight, on the CUDA cores: each
  thread holds whole blocks' bytes, so the sums over a block stay in its registers;
* :func:`tiled`: 16-row tiles on the tensor cores, the weight unpacked tile by tile (:func:`unpack`);
* :func:`dequantize`: the weight unpacked into the activations' type, for cuBLAS to multiply;
* :func:`reduce_splits`: the float32 partial sums of programs that split the depth, added in order.

A weight is ``(q - zero) * scale`` of its block (``QBLOCK`` values of the depth) in float32;
``ZERO`` says how zero points come: 0 none (``2 ** (BITS - 1)``), 1 packed like the weight, 2 one
float per block.
"""

import triton
import triton.language as tl


@triton.jit
def split_values(x, BITS: tl.constexpr, GB: tl.constexpr, BYTES: tl.constexpr):  # noqa: N803
    # [GB, BYTES * PER] values along the depth as PER tensors [GB, BYTES], value t of each byte
    if BITS == 8:
        return x, x, x, x
    elif BITS == 4:
        low, high = tl.split(x.reshape(GB, BYTES, 2))
        return low, high, low, high
    else:
        even, odd = tl.split(x.reshape(GB, BYTES, 2, 2))
        v0, v2 = tl.split(even)
        v1, v3 = tl.split(odd)
        return v0, v1, v2, v3


@triton.jit
def block_params(scale_ptr, zero_ptr, rn, g, ok, blocks, zero_row, BITS: tl.constexpr,  # noqa: N803
                 ZERO: tl.constexpr):
    # the float32 scale and zero point of blocks g of columns rn: [len(rn), len(g)]
    scale = tl.load(scale_ptr + rn[:, None] * blocks + g[None, :], mask=ok, other=0.0).to(tl.float32)
    if ZERO == 1:  # packed like the weight, one per block
        zb = tl.load(zero_ptr + rn[:, None] * zero_row + (g * BITS // 8)[None, :], mask=ok, other=0)
        zero = ((zb >> ((g * BITS) % 8).to(tl.uint8)[None, :]) & ((1 << BITS) - 1)).to(tl.float32)
    elif ZERO == 2:  # one float per block
        zero = tl.load(zero_ptr + rn[:, None] * blocks + g[None, :], mask=ok, other=0.0).to(tl.float32)
    else:
        zero = tl.zeros(scale.shape, tl.float32) + (1 << (BITS - 1))
    return scale, zero


@triton.jit
def unpack(packed, BITS: tl.constexpr, ROWS: tl.constexpr, COLUMNS: tl.constexpr):  # noqa: N803
    # the values of a [ROWS, COLUMNS / PER] byte tile, lowest bits first, as [ROWS, COLUMNS] float32
    if BITS == 4:
        values = tl.join(packed & 0xF, packed >> 4).reshape(ROWS, COLUMNS)
    elif BITS == 2:
        values = tl.join(tl.join(packed & 3, (packed >> 4) & 3),
                         tl.join((packed >> 2) & 3, packed >> 6)).reshape(ROWS, COLUMNS)
    else:
        values = packed
    return values.to(tl.float32)


@triton.jit
def gemv(a_ptr, b_ptr, scale_ptr, zero_ptr, bias_ptr, out_ptr, N, K, stride_am,  # noqa: N803
         row_bytes, blocks, zero_row, blocks_per_split, BITS: tl.constexpr, QBLOCK: tl.constexpr,
         ZERO: tl.constexpr, BIAS: tl.constexpr, PARTIAL: tl.constexpr, ROWS: tl.constexpr,
         ROWS_P2: tl.constexpr, BN: tl.constexpr, GB: tl.constexpr):
    # ROWS rows of a against BN columns, GB blocks of the depth a step.  A step's bytes are a
    # [BN, GB, bytes per block] tile, each thread holding whole blocks' bytes (so the sums
    # over a block stay in its registers); a's values are read contiguously and split by
    # their place in the byte; the unpacked weight serves every row.  Program (i, s) takes
    # blocks [s * blocks_per_split, (s + 1) * blocks_per_split) of the depth.
    PER: tl.constexpr = 8 // BITS
    BYTES: tl.constexpr = QBLOCK // PER
    MASK: tl.constexpr = (1 << BITS) - 1
    rn = tl.program_id(0) * BN + tl.arange(0, BN)
    rj = tl.arange(0, BYTES)
    rq = tl.arange(0, QBLOCK)
    rr = tl.arange(0, ROWS_P2)
    n_ok = rn < N
    acc = tl.zeros((ROWS_P2, BN, GB), dtype=tl.float32)  # per thread; reduced across GB once
    split = tl.program_id(1)
    end = tl.minimum((split + 1) * blocks_per_split, blocks)
    for g0 in range(split * blocks_per_split, end, GB):
        g = g0 + tl.arange(0, GB)
        ok = n_ok[:, None] & (g < end)[None, :]
        packed = tl.load(b_ptr + rn[:, None, None] * row_bytes + (g * BYTES)[None, :, None]
                         + rj[None, None, :], mask=ok[:, :, None], other=0)
        scale, zero = block_params(scale_ptr, zero_ptr, rn, g, ok, blocks, zero_row, BITS, ZERO)
        q0 = (packed & MASK).to(tl.float32) - zero[:, :, None]
        q1 = q0
        q2 = q0
        q3 = q0
        if PER >= 2:
            q1 = ((packed >> BITS) & MASK).to(tl.float32) - zero[:, :, None]
        if PER == 4:
            q2 = ((packed >> (2 * BITS)) & MASK).to(tl.float32) - zero[:, :, None]
            q3 = ((packed >> (3 * BITS)) & MASK).to(tl.float32) - zero[:, :, None]
        k = (g * QBLOCK)[:, None] + rq[None, :]
        k_ok = (g < end)[:, None] & (k < K)
        for r in tl.static_range(ROWS):
            a = tl.load(a_ptr + r * stride_am + k, mask=k_ok, other=0.0).to(tl.float32)
            a0, a1, a2, a3 = split_values(a, BITS, GB, BYTES)
            if PER == 1:
                part = q0 * a0[None, :, :]
            elif PER == 2:
                part = q0 * a0[None, :, :] + q1 * a1[None, :, :]
            else:
                part = q0 * a0[None, :, :] + q1 * a1[None, :, :] + q2 * a2[None, :, :] + q3 * a3[None, :, :]
            acc = tl.where((rr == r)[:, None, None], acc + (tl.sum(part, axis=2) * scale)[None, :, :], acc)
    mask = (rr < ROWS)[:, None] & n_ok[None, :]
    sums = tl.sum(acc, axis=2)
    if PARTIAL:  # this split's float32 sums, added in order by reduce_splits
        tl.store(out_ptr + split * ROWS * N + rr[:, None] * N + rn[None, :], sums, mask=mask)
    else:
        if BIAS:
            sums += tl.load(bias_ptr + rn, mask=n_ok, other=0.0).to(tl.float32)[None, :]
        tl.store(out_ptr + rr[:, None] * N + rn[None, :], sums.to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def reduce_splits(partial_ptr, bias_ptr, out_ptr, splits, count, N, BIAS: tl.constexpr,  # noqa: N803
                  BLOCK: tl.constexpr):
    # out = the splits' float32 partial sums added in split order (+ bias), in out's type
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    ok = offsets < count
    total = tl.zeros((BLOCK,), dtype=tl.float32)
    for split in range(0, splits):
        total += tl.load(partial_ptr + split * count + offsets, mask=ok, other=0.0)
    if BIAS:
        total += tl.load(bias_ptr + offsets % N, mask=ok, other=0.0).to(tl.float32)
    tl.store(out_ptr + offsets, total.to(out_ptr.dtype.element_ty), mask=ok)


@triton.jit
def dequantize(b_ptr, scale_ptr, zero_ptr, out_ptr, width, row_bytes, blocks,  # noqa: N803
               zero_row, BITS: tl.constexpr, QBLOCK: tl.constexpr, ZERO: tl.constexpr,
               GB: tl.constexpr):
    # GB blocks of row n of the N x width weight (width = blocks * QBLOCK) in out's type
    PER: tl.constexpr = 8 // BITS
    BYTES: tl.constexpr = QBLOCK // PER
    n = tl.program_id(0)
    g = tl.program_id(1) * GB + tl.arange(0, GB)
    g_ok = g < blocks
    packed = tl.load(b_ptr + n * row_bytes + (g * BYTES)[:, None] + tl.arange(0, BYTES)[None, :],
                     mask=g_ok[:, None], other=0)
    scale, zero = block_params(scale_ptr, zero_ptr, tl.full((1,), 0, tl.int32) + n, g, g_ok[None, :],
                               blocks, zero_row, BITS, ZERO)
    scale, zero = tl.reshape(scale, (GB, 1)), tl.reshape(zero, (GB, 1))
    w = (unpack(packed, BITS, GB, QBLOCK) - zero) * scale
    tl.store(out_ptr + n * width + (g * QBLOCK)[:, None] + tl.arange(0, QBLOCK)[None, :],
             w.to(out_ptr.dtype.element_ty), mask=g_ok[:, None])


@triton.jit
def tiled(a_ptr, b_ptr, scale_ptr, zero_ptr, bias_ptr, out_ptr, M, N, K,  # noqa: N803
           stride_am, row_bytes, blocks, zero_row, steps_per_split,
           BITS: tl.constexpr, QBLOCK: tl.constexpr, ZERO: tl.constexpr, BIAS: tl.constexpr,
           PARTIAL: tl.constexpr, IEEE: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pid_m = tl.program_id(0) % tl.cdiv(M, BM)  # few row tiles: no grouping of programs
    pid_n = tl.program_id(0) // tl.cdiv(M, BM)
    split = tl.program_id(1)
    PER: tl.constexpr = 8 // BITS
    SUB: tl.constexpr = BK if BK < QBLOCK else QBLOCK  # depth that shares one scale in a tile
    G: tl.constexpr = BK // SUB
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    row_ok, column_ok = rm < M, rn < N
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for step in range(split * steps_per_split, (split + 1) * steps_per_split):
        k0 = step * BK
        rk = k0 + tl.arange(0, BK)
        a = tl.load(a_ptr + rm[:, None] * stride_am + rk[None, :],
                    mask=row_ok[:, None] & (rk < K)[None, :], other=0.0)
        rb = k0 // PER + tl.arange(0, BK // PER)
        packed = tl.load(b_ptr + rn[:, None] * row_bytes + rb[None, :],
                         mask=column_ok[:, None] & (rb < row_bytes)[None, :], other=0)
        q = unpack(packed, BITS, BN, BK)
        g = (k0 + tl.arange(0, G) * SUB) // QBLOCK
        g_ok = column_ok[:, None] & (g < blocks)[None, :]
        scale, zero = block_params(scale_ptr, zero_ptr, rn, g, g_ok, blocks, zero_row, BITS, ZERO)
        w = ((q.reshape(BN, G, SUB) - zero[:, :, None]) * scale[:, :, None]).reshape(BN, BK)
        if IEEE:  # float32 activations: float32 products, as ONNX Runtime's
            acc += tl.dot(a, tl.trans(w), input_precision="ieee")
        else:
            acc += tl.dot(a, tl.trans(w.to(a_ptr.dtype.element_ty)))
    mask = row_ok[:, None] & column_ok[None, :]
    if PARTIAL:  # this split's float32 partial sums, added in order by the caller
        tl.store(out_ptr + split * M * N + rm[:, None] * N + rn[None, :], acc, mask=mask)
    else:
        if BIAS:
            acc += tl.load(bias_ptr + rn, mask=column_ok, other=0.0).to(tl.float32)[None, :]
        tl.store(out_ptr + rm[:, None] * N + rn[None, :], acc.to(out_ptr.dtype.element_ty), mask=mask)
