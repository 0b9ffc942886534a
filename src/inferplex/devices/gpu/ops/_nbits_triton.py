"""MatMulNBits on CUDA: the packed 2/4/8-bit weight read at its packed size, unpacked in registers.

The weight stays packed in device memory.  Which kernel runs depends on the rows of activations
(the kernels are in :mod:`._nbits_kernels`):

* one row (a decoder's token): :func:`~._nbits_kernels.gemv` reads the packed weight once, on the
  CUDA cores, each thread summing whole blocks: a quarter of a float16 weight's bytes at 4 bits,
  which is what sets a decoding step's speed;
* up to :data:`_TILED_ROWS` rows of 16-bit activations: :func:`~._nbits_kernels.tiled`, 16-row
  tiles on the tensor cores, the weight unpacked tile by tile (float32 products on the tensor
  cores would not be IEEE's: float32 activations take the next path);
* more rows (a prompt): :func:`~._nbits_kernels.dequantize` writes the weight in the activations'
  type once, and cuBLAS multiplies: the compute then outweighs the weight's read, and cuBLAS
  computes faster than a kernel that unpacks as it goes.

The ATen form, where Triton cannot run, unpacked the weight into a float32 copy at every call and
multiplied in float32.

Numbers: each weight is ``(q - zero) * scale`` in float32 (exact: a small integer times a 16-bit or
float32 scale), rounded once to the activations' type, as a float16 model's weight is rounded once
to float16; sums accumulate in float32; the bias is added in float32 before the one rounding of
the output.  Float32 activations meet float32 weights and float32 products (no TF32), as ONNX
Runtime computes them.  Where the depth is split over several programs, their float32 partial
sums are added in a fixed order: the same numbers every run.  Under ``torch.compile`` the whole
is the ``inferplex::nbits_linear`` operator, which Inductor calls as it is.
"""

from __future__ import annotations

import functools
from typing import Any

import torch

from inferplex.devices.gpu.ops import _quantized_triton

__all__ = ["nbits_linear", "nbits_linear_op", "usable", "usable_compiled"]

_TYPES = (torch.float16, torch.bfloat16, torch.float32)

_GEMV_ROWS = 1
"""Up to this many rows the one-row kernel serves (``bench/RESULTS.md`` has the paths compared)."""

_GEMV_TILE = (8, 16)
"""(columns, blocks of the depth) per step of the one-row kernel, with 4 warps."""

_GEMV_STEPS = 16
"""The one-row kernel splits a depth of more steps than this over several programs."""

_TILED_ROWS = 32
"""Up to this many rows the tiled kernel serves; beyond, the weight is unpacked for cuBLAS."""

_DEQUANTIZE_BLOCK = 2048
"""Weight elements (of one row) per program of the unpacking kernel."""

_TARGET_PROGRAMS = 512
"""The tiled kernel splits the depth until about this many programs read the weight at once."""


def usable(a: torch.Tensor, n: int, k: int, block: int) -> bool:
    """Outside ``torch.compile``: whether :func:`nbits_linear` takes ``a`` against an N x K weight
    in blocks of ``block``: a floating CUDA tensor, Triton usable, offsets within 32 bits."""
    return _takes(a, n, k, block) and _quantized_triton.usable(a, _rows(a) * n)


def usable_compiled(a: torch.Tensor, n: int, k: int, block: int) -> bool:
    """Under ``torch.compile``: whether :func:`nbits_linear_op` takes ``a``."""
    return _takes(a, n, k, block) and _quantized_triton.usable_compiled(a, _rows(a) * n)


def _takes(a: torch.Tensor, n: int, k: int, block: int) -> bool:
    """A floating type, and the unpacked weight (N x whole blocks) within 32-bit offsets."""
    return a.dtype in _TYPES and n * -(-k // block) * block < 2**31


def _rows(a: torch.Tensor) -> int:
    return a.numel() // max(a.shape[-1], 1) if a.dim() else 1


@functools.cache
def _kernels() -> Any:
    from inferplex.devices.gpu.ops import _nbits_kernels

    return _nbits_kernels


def nbits_linear(a: torch.Tensor, packed: torch.Tensor, scales: torch.Tensor, zeros: torch.Tensor | None,
                 bias: torch.Tensor | None, n: int, k: int, bits: int, block: int) -> torch.Tensor:
    """MatMulNBits of 16-bit ``a`` (..., K): ``a @ W + bias`` where ``W[k, n]`` is
    ``(q - zero) * scale`` of block ``k // block`` of column ``n``.

    ``packed``: uint8, ``8 // bits`` values a byte (N x blocks x ``block * bits / 8`` bytes, in
    any shape); ``scales``: N x blocks; ``zeros``: uint8 packed like the weight (N x
    ``ceil(blocks * bits / 8)``), one float per block, or None (``2 ** (bits - 1)``); ``bias``:
    N values, or None.  The output has ``a``'s type.
    """
    rows = a.reshape(-1, k)
    if rows.stride(-1) != 1:
        rows = rows.contiguous()
    packed, scales = packed.contiguous(), scales.contiguous()
    zeros = zeros.contiguous() if zeros is not None else None
    m = rows.shape[0]
    out = torch.empty((m, n), dtype=a.dtype, device=a.device)
    if m == 0 or n == 0:
        return out.reshape(*a.shape[:-1], n)
    blocks = -(-k // block)
    row_bytes, zero_row = blocks * block * bits // 8, -(-blocks * bits // 8)
    zero_kind = 0 if zeros is None else 1 if zeros.dtype == torch.uint8 else 2
    zeros = zeros if zeros is not None else scales
    if m <= _GEMV_ROWS:
        bn, gb = _GEMV_TILE
        steps = -(-blocks // gb)
        per_split = gb * -(-steps // -(-steps // _GEMV_STEPS))
        splits = -(-blocks // per_split)
        target = out if splits == 1 else torch.empty((splits, m, n), dtype=torch.float32, device=a.device)
        _kernels().gemv[(-(-n // bn), splits)](
            rows, packed, scales, zeros, bias if bias is not None else scales, target, n, k, rows.stride(0),
            row_bytes, blocks, zero_row, per_split, BITS=bits, QBLOCK=block, ZERO=zero_kind,
            BIAS=bias is not None, PARTIAL=splits > 1, ROWS=m, ROWS_P2=1 << (m - 1).bit_length(), BN=bn,
            GB=gb, num_warps=4)
        if splits > 1:
            _reduce_splits(target, bias, out)
    elif m <= _TILED_ROWS and rows.dtype != torch.float32:
        _tiled(rows, packed, scales, zeros, bias, out, n, k, bits, block, zero_kind)
    else:
        weight = torch.empty((n, blocks * block), dtype=a.dtype, device=a.device)
        gb = max(1, _DEQUANTIZE_BLOCK // block)
        _kernels().dequantize[(n, -(-blocks // gb))](
            packed, scales, zeros, weight, blocks * block, row_bytes, blocks, zero_row, BITS=bits,
            QBLOCK=block, ZERO=zero_kind, GB=gb)
        out = torch.nn.functional.linear(rows, weight[:, :k], bias)
    return out.reshape(*a.shape[:-1], n)


def _tiled(rows: torch.Tensor, packed: torch.Tensor, scales: torch.Tensor, zeros: torch.Tensor, bias: Any,
           out: torch.Tensor, n: int, k: int, bits: int, block: int, zero_kind: int) -> None:
    m = rows.shape[0]
    blocks = -(-k // block)
    bm, bn, bk = 16, 32, 128  # one tile of rows; narrow column strips, so that many programs read
    steps = -(-k // bk)
    per_split = -(-steps // max(1, min(steps, _TARGET_PROGRAMS // -(-n // bn))))
    splits = -(-steps // per_split)  # no split left without a step
    target = out if splits == 1 else torch.empty((splits, m, n), dtype=torch.float32, device=rows.device)
    _kernels().tiled[(-(-m // bm) * -(-n // bn), splits)](
        rows, packed, scales, zeros, bias if bias is not None else scales,
        target, m, n, k, rows.stride(0), blocks * block * bits // 8, blocks, -(-blocks * bits // 8),
        per_split, BITS=bits, QBLOCK=block, ZERO=zero_kind, BIAS=bias is not None, PARTIAL=splits > 1,
        IEEE=rows.dtype == torch.float32, BM=bm, BN=bn, BK=bk, num_warps=4, num_stages=4)
    if splits > 1:
        _reduce_splits(target, bias, out)


def _reduce_splits(partial: torch.Tensor, bias: torch.Tensor | None, out: torch.Tensor) -> None:
    """``out`` = the splits' float32 sums (``partial``: splits x M x N) added in order, plus ``bias``."""
    count = out.numel()
    _kernels().reduce_splits[(-(-count // 1024),)](partial, bias if bias is not None else partial, out,
                                                   partial.shape[0], count, out.shape[-1],
                                                   BIAS=bias is not None, BLOCK=1024)


@torch.library.custom_op("inferplex::nbits_linear", mutates_args=())
def nbits_linear_op(a: torch.Tensor, packed: torch.Tensor, scales: torch.Tensor, zeros: torch.Tensor | None,
                    bias: torch.Tensor | None, n: int, k: int, bits: int, block: int) -> torch.Tensor:
    """:func:`nbits_linear` as an operator ``torch.compile`` calls as it is."""
    return nbits_linear(a, packed, scales, zeros, bias, n, k, bits, block)


@nbits_linear_op.register_fake
def _nbits_linear_shape(a: torch.Tensor, packed: torch.Tensor, scales: torch.Tensor,
                        zeros: torch.Tensor | None, bias: torch.Tensor | None, n: int, k: int, bits: int,
                        block: int) -> torch.Tensor:
    return a.new_empty((*a.shape[:-1], n))
