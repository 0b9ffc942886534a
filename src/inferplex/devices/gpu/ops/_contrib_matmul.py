"""Lowerings of ONNX Runtime's quantized matmul contrib ops (domain ``com.microsoft``): QGemm,
MatMulIntegerToFloat, DynamicQuantizeMatMul and MatMulNBits; the element-wise ones and the
helpers they share are in :mod:`.contrib_quantized`.

* QGemm is QLinearConv's matmul sibling: ``acc = C + (A - za) @ (B - zb)`` in exact int32 (the
  integer kernels of :func:`.quantized.integer_matmul`), then ``acc * (alpha * sa * sb / sy)``
  requantized, or ``acc * (alpha * sa * sb)`` as float32 when the output has no scale.
* MatMulIntegerToFloat is ``(A - za) @ (B - zb) * (sa * sb) + bias``; DynamicQuantizeMatMul the
  same after DynamicQuantizeLinear quantizes A (``quantize_dynamic``'s chains that ORT fuses).
* MatMulNBits (``MatMulNBitsQuantizer``'s block-wise 2/4/8-bit weights, ``(q - zero) * scale``
  per block of K): the weights stay packed in device memory (their point).  On CUDA one Triton
  kernel reads them packed and unpacks them tile by tile in registers (:mod:`._nbits_triton`):
  16-bit activations meet weights rounded once to their type, as in a float16 model; float32
  activations with few rows meet float32 weights.  Elsewhere (and for float32 activations with
  many rows) the weight is unpacked into a float32 copy at every call for a float32 matmul.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import onnx_ir as ir
import torch

from inferplex.devices.gpu.ops import _nbits_triton
from inferplex.devices.gpu.ops._common import FLOAT_DTYPES, attrs_reason, dtype_reason, first_reason
from inferplex.devices.gpu.ops.contrib_quantized import MS_DOMAIN as _MS
from inferplex.devices.gpu.ops.contrib_quantized import quantize, scalar_params_reason
from inferplex.devices.gpu.ops.quantized import integer_matmul, zero_free_int8
from inferplex.devices.gpu.registry import NodeInfo, find_lowering, register

__all__: list[str] = []

_EIGHT_BIT = frozenset({ir.DataType.INT8, ir.DataType.UINT8})
_FLOAT = frozenset({ir.DataType.FLOAT})


def _per_column(param: torch.Tensor) -> torch.Tensor:
    """A scale or zero point, one per output column (1-D) or one for all (0-d)."""
    return param.reshape(-1) if param.numel() > 1 else param.reshape(())


# --- QGemm ------------------------------------------------------------------------------------


def _qgemm_supports(info: NodeInfo) -> str | None:
    reason = first_reason(attrs_reason(info, ("alpha", "transA", "transB")),
                          dtype_reason(info, (0, 2, 3, 5, 8), _EIGHT_BIT),
                          dtype_reason(info, (1, 4, 7), _FLOAT),
                          dtype_reason(info, (6,), frozenset({ir.DataType.INT32})),
                          scalar_params_reason(info, (1, 2)))
    if reason is None and info.has_input(7) != info.has_input(8):
        return "QGemm needs both y_scale and y_zero_point, or neither (float output)"
    for index in (0, 3):
        rank = info.rank(index)
        if reason is None and rank is not None and rank != 2:
            return f"QGemm input {index} has rank {rank}; accepted: 2"
    return reason


@register("QGemm", domain=_MS, supports=_qgemm_supports)
def _qgemm(info: NodeInfo) -> Callable[..., Any]:
    alpha = float(np.float32(info.attr("alpha", 1.0)))
    trans_a, trans_b = bool(info.attr("transA", 0)), bool(info.attr("transB", 0))
    int8_b = zero_free_int8(info, 3, 5)

    def qgemm(a: torch.Tensor, a_scale: torch.Tensor, a_zero: torch.Tensor, b: torch.Tensor,
              b_scale: torch.Tensor, b_zero: torch.Tensor | None, c: torch.Tensor | None = None,
              y_scale: torch.Tensor | None = None, y_zero: torch.Tensor | None = None) -> torch.Tensor:
        acc = integer_matmul(a.t() if trans_a else a, a_zero, b.t() if trans_b else b, b_zero, int8_b)
        if c is not None:
            acc = acc + c  # int32, broadcast to (M, N)
        # ORT's order: alpha * sa * sb per column, then divided by sy.
        scales = alpha * a_scale.to(torch.float32).reshape(()) * _per_column(b_scale.to(torch.float32))
        if y_scale is None or y_zero is None:  # the supports check pairs them
            return acc.to(torch.float32) * scales
        return quantize(acc.to(torch.float32) * (scales / y_scale.reshape(())), None, y_zero, y_zero.dtype)

    return qgemm


# --- MatMulIntegerToFloat / DynamicQuantizeMatMul ------------------------------------------------


def _to_float_supports(info: NodeInfo) -> str | None:
    return first_reason(attrs_reason(info, ()), dtype_reason(info, (0, 1, 4, 5), _EIGHT_BIT),
                        dtype_reason(info, (2, 3, 6), frozenset({ir.DataType.FLOAT, ir.DataType.FLOAT16})),
                        scalar_params_reason(info, (2, 4)))


def _scaled_product(acc: torch.Tensor, a_scale: torch.Tensor, b_scale: torch.Tensor,
                    bias: torch.Tensor | None, dtype: torch.dtype) -> torch.Tensor:
    """``acc * (sa * sb) + bias`` in float32 (ORT's scale-and-bias step), as ``dtype``."""
    multiplier = a_scale.to(torch.float32).reshape(()) * _per_column(b_scale.to(torch.float32))
    result = acc.to(torch.float32) * multiplier
    if bias is not None:
        result = result + bias.to(torch.float32)
    return result.to(dtype)


@register("MatMulIntegerToFloat", domain=_MS, supports=_to_float_supports)
def _matmul_integer_to_float(info: NodeInfo) -> Callable[..., Any]:
    int8_b = zero_free_int8(info, 1, 5)

    def matmul_integer_to_float(a: torch.Tensor, b: torch.Tensor, a_scale: torch.Tensor,
                                b_scale: torch.Tensor, a_zero: torch.Tensor | None = None,
                                b_zero: torch.Tensor | None = None, bias: torch.Tensor | None = None
                                ) -> torch.Tensor:
        acc = integer_matmul(a, a_zero, b, b_zero, int8_b)
        return _scaled_product(acc, a_scale, b_scale, bias, a_scale.dtype)

    return matmul_integer_to_float


def _dynamic_supports(info: NodeInfo) -> str | None:
    return first_reason(attrs_reason(info, ()), dtype_reason(info, (0, 2, 4), _FLOAT),
                        dtype_reason(info, (1, 3), _EIGHT_BIT))


@register("DynamicQuantizeMatMul", domain=_MS, supports=_dynamic_supports)
def _dynamic_quantize_matmul(info: NodeInfo) -> Callable[..., Any]:
    onnx_lowering = find_lowering("", "DynamicQuantizeLinear", 11)
    assert onnx_lowering is not None, "DynamicQuantizeLinear is registered by the quantized ops module"
    quantize_a = onnx_lowering.lower(info)  # reads nothing of the node: x -> (uint8 data, scale, zero)
    int8_b = zero_free_int8(info, 1, 3)

    def dynamic_quantize_matmul(a: torch.Tensor, b: torch.Tensor, b_scale: torch.Tensor,
                                b_zero: torch.Tensor | None = None, bias: torch.Tensor | None = None
                                ) -> torch.Tensor:
        data, a_scale, a_zero = quantize_a(a)
        acc = integer_matmul(data, a_zero, b, b_zero, int8_b)
        return _scaled_product(acc, a_scale, b_scale, bias, a.dtype)

    return dynamic_quantize_matmul


# --- MatMulNBits ----------------------------------------------------------------------------------


def _nbits_supports(info: NodeInfo) -> str | None:
    known = ("K", "N", "accuracy_level", "bits", "block_size", "weight_prepacked")
    reason = first_reason(attrs_reason(info, known), dtype_reason(info, (0, 2, 5), FLOAT_DTYPES),
                          dtype_reason(info, (1,), frozenset({ir.DataType.UINT8})))
    bits, block = int(info.attr("bits", 4)), info.attr("block_size")
    if reason is None and bits not in (2, 4, 8):
        return f"MatMulNBits with bits={bits}; accepted: 2, 4, 8"
    if reason is None and (block is None or info.attr("K") is None or info.attr("N") is None):
        return "MatMulNBits needs its K, N and block_size attributes"
    if reason is None and int(info.attr("weight_prepacked", 0)):
        return "MatMulNBits with weight_prepacked (an execution provider's own layout) is not supported"
    if reason is None and info.has_input(4):
        return "MatMulNBits with g_idx (deprecated act-order groups) is not supported"
    zero_type = info.input_dtypes[3] if info.has_input(3) else None
    if reason is None and zero_type not in (None, ir.DataType.UINT8, info.input_dtypes[2]):
        return (f"MatMulNBits zero points of type {zero_type.name} are not supported "
                "(accepted: packed uint8, or the scales' type)")
    if reason is None:
        k, n = int(info.attr("K")), int(info.attr("N"))
        sizes = {index: _static_size(info.input_shapes[index]) for index in (1, 2, 3, 5)
                 if info.has_input(index)}
        reason = _nbits_size_problem(k, n, bits, int(block), sizes, zero_type == ir.DataType.UINT8)
        a_shape = info.input_shapes[0]
        if reason is None and a_shape and isinstance(a_shape[-1], int) and a_shape[-1] != k:
            reason = f"MatMulNBits input A's last dimension is {a_shape[-1]}; its K attribute says {k}"
    return reason


_NBITS_INPUTS = {1: "B (the packed weight)", 2: "scales", 3: "zero_points", 5: "bias"}


def _static_size(shape: tuple[int | str | None, ...] | None) -> int | None:
    """The element count of a shape whose dims are all known, else None."""
    dims = [d for d in shape or () if isinstance(d, int)]
    if shape is None or len(dims) != len(shape):
        return None
    return int(np.prod(dims, dtype=np.int64))


def _nbits_size_problem(k: int, n: int, bits: int, block: int, sizes: dict[int, int | None],
                        packed_zeros: bool) -> str | None:
    """What is wrong with the element counts ``sizes`` of MatMulNBits' inputs (by input index; None:
    unknown) for its K, N, bits and block_size, or None: the kernels read exactly these counts."""
    blocks = -(-k // block)
    expected = {1: n * blocks * (block * bits // 8), 2: n * blocks,
                3: n * -(-blocks * bits // 8) if packed_zeros else n * blocks, 5: n}
    for index, size in sizes.items():
        if size is not None and size != expected[index]:
            return (f"MatMulNBits input {_NBITS_INPUTS[index]} holds {size} values; K={k}, N={n}, "
                    f"bits={bits} and block_size={block} make {expected[index]}")
    return None


def _unpack(packed: torch.Tensor, bits: int) -> torch.Tensor:
    """The ``8 // bits`` values of each byte of uint8 ``packed`` (lowest bits first), as uint8,
    along a last axis ``8 // bits`` times longer."""
    if bits == 8:
        return packed
    shifts = torch.arange(0, 8, bits, device=packed.device, dtype=torch.uint8)
    values = (packed.unsqueeze(-1) >> shifts) & ((1 << bits) - 1)
    return values.reshape(*packed.shape[:-1], -1)


@register("MatMulNBits", domain=_MS, supports=_nbits_supports)
def _matmul_nbits(info: NodeInfo) -> Callable[..., Any]:
    bits, block = int(info.attr("bits", 4)), int(info.attr("block_size"))
    k, n = int(info.attr("K")), int(info.attr("N"))
    blocks = -(-k // block)

    def weight(packed: torch.Tensor, scales: torch.Tensor, zeros: torch.Tensor | None) -> torch.Tensor:
        """The K x N float32 weight: ``(q - zero) * scale`` per block of K; the zero points packed
        like the weight (uint8), or one float per block."""
        q = _unpack(packed.reshape(n, blocks, -1), bits).to(torch.float32)  # N x blocks x block_size
        if zeros is None:
            q = q - (1 << (bits - 1))
        elif zeros.dtype == torch.uint8:
            q = q - _unpack(zeros.reshape(n, -1), bits)[:, :blocks].unsqueeze(-1).to(torch.float32)
        else:
            q = q - zeros.reshape(n, blocks, 1).to(torch.float32)
        values = q * scales.reshape(n, blocks, 1).to(torch.float32)
        return values.reshape(n, blocks * block)[:, :k].t()

    def matmul_nbits(a: torch.Tensor, packed: torch.Tensor, scales: torch.Tensor,
                     zeros: torch.Tensor | None = None, g_idx: torch.Tensor | None = None,
                     bias: torch.Tensor | None = None) -> torch.Tensor:
        sizes = {1: packed.numel(), 2: scales.numel(), 3: None if zeros is None else zeros.numel(),
                 5: None if bias is None else bias.numel()}
        packed_zeros = zeros is not None and zeros.dtype == torch.uint8
        problem = _nbits_size_problem(k, n, bits, block, sizes, packed_zeros)
        if problem is None and a.shape[-1] != k:
            problem = f"MatMulNBits input A's last dimension is {a.shape[-1]}; its K attribute says {k}"
        if problem is not None:  # the kernels would read past the tensors
            raise ValueError(problem)
        if _nbits_triton.usable(a, n, k, block):
            return _nbits_triton.nbits_linear(a, packed, scales, zeros, bias, n, k, bits, block)
        if _nbits_triton.usable_compiled(a, n, k, block):
            return _nbits_triton.nbits_linear_op(a, packed, scales, zeros, bias, n, k, bits, block)
        result = torch.matmul(a.to(torch.float32), weight(packed, scales, zeros))
        if bias is not None:
            result = result + bias.to(torch.float32)
        return result.to(a.dtype)

    return matmul_nbits
