"""A QDQ model's attention chain as one call (planned by :mod:`.._qdq_attention`).

:func:`quantized_attention` computes ``softmax(Q @ K^T / c + mask) @ V`` with a fake-quantize
pass after each step where the model has a QuantizeLinear -> DequantizeLinear pair.  On CUDA,
outside ``torch.compile``, it is one Triton kernel (:mod:`._qdq_attention_kernel`) that writes the
result in (batch, row, head, width) order, so the Transpose and Reshape after it move nothing;
under ``torch.compile`` the same kernel is the ``inferplex::qdq_attention`` operator; elsewhere the
ATen ops run one by one.  The kernel runs the chain in float32 between its loads and its store, as
the model's float32 arithmetic runs it: on float32 data it differs from the separate calls only by
the order of float32 sums (the matmuls' and the softmax's), which may move a quantized value by one
step where it lies on a rounding boundary; on float16 and bfloat16 data it does not round each step
to the data's type as the separate calls do, so its values are those of the chain on the same
inputs in float32, within such steps.

With ``levels`` the call gives, in place of the result, the 8-bit data of the QuantizeLinear that
reads it after the Transpose to (batch, row, head, width) (an int8 matmul's input): one pass less
over the activation, and half the bytes written where the data's type is float16.
"""

from __future__ import annotations

import functools
from typing import Any

import torch

from inferplex.devices.gpu.ops import _quantized_triton as triton_kernels
from inferplex.devices.gpu.ops._fake_quantize import (
    FakeQuantizeStep,
    QuantizeStep,
    quantize_dequantize,
    quantize_linear,
    step_numbers,
)

__all__ = ["quantized_attention"]

_STEPS = 5
"""The fake-quantize steps, in order: scores, scaled, masked, probabilities, context."""


def quantized_attention(query: torch.Tensor, key_t: torch.Tensor, value: torch.Tensor,
                        mask: torch.Tensor | None, factor: float | None, divide: bool,
                        steps: tuple[FakeQuantizeStep | None, ...],
                        levels: QuantizeStep | None = None) -> torch.Tensor:
    """The chain on Q (B, H, Sq, D), K^T (B, H, D, Sk) and V (B, H, Sk, Dv): ``factor`` divides
    (``divide``) or multiplies the scores (None: no scale step); ``mask`` is added to them;
    ``steps`` are the five pairs (see :data:`_STEPS`), None where the model has none.

    With ``levels`` (scale, zero point, int8 or uint8), QuantizeLinear's data of the result (as
    the data's type holds it, divided by the scale as ONNX divides), contiguous in (B, Sq, H, Dv)
    order; else the result (B, H, Sq, Dv)."""
    numbers = [step_numbers(step) for step in steps]
    quantize = None if levels is None else _level_numbers(levels)
    if _kernel_fits(query, key_t, value, mask) and triton_kernels.usable(query):
        return _run_kernel(query, key_t, value, mask, factor, divide, numbers, quantize)
    if _kernel_fits(query, key_t, value, mask) and torch.compiler.is_compiling() \
            and triton_kernels.usable_compiled(query, 0):
        return quantized_attention_op(query, key_t, value, mask, factor, divide, *numbers, quantize)
    result = _aten(query, key_t, value, mask, factor, divide, steps)
    if levels is None:
        return result
    return quantize_linear(result.transpose(1, 2), *levels).contiguous()


def _level_numbers(levels: QuantizeStep) -> list[float]:
    """The kernel's numbers of a QuantizeLinear: scale, zero point, low and high."""
    scale, zero, dtype = levels
    low, high = (-128, 127) if dtype == torch.int8 else (0, 255)
    return [scale, zero, low, high]


def _aten(query: torch.Tensor, key_t: torch.Tensor, value: torch.Tensor, mask: torch.Tensor | None,
          factor: float | None, divide: bool, steps: tuple[FakeQuantizeStep | None, ...]) -> torch.Tensor:
    def quantized(x: torch.Tensor, step: FakeQuantizeStep | None) -> torch.Tensor:
        return x if step is None else quantize_dequantize(x, *step)

    scores = quantized(torch.matmul(query, key_t), steps[0])
    if factor is not None:
        # a one-value tensor made on the device (no copy from the host, which a CUDA graph's
        # capture refuses), divided by as the Div divides by its constant
        constant = torch.full((), factor, dtype=scores.dtype, device=scores.device)
        scores = quantized(scores / constant if divide else scores * constant, steps[1])
    if mask is not None:
        scores = quantized(scores + mask, steps[2])
    probabilities = quantized(torch.softmax(scores, dim=-1), steps[3])
    return quantized(torch.matmul(probabilities, value), steps[4])


_SHARED_SHARE = 0.7
"""The share of a block's shared memory (the device's opt-in limit) that K^T and V of one head may
take: Triton's pipelining needs the rest."""

_MAX_OFFSET = 2**31 - 1
"""The kernel indexes with 32-bit offsets."""


def _kernel_fits(query: torch.Tensor, key_t: torch.Tensor, value: torch.Tensor,
                 mask: torch.Tensor | None) -> bool:
    """Whether the kernel takes these tensors: CUDA, one floating type, 4-D, the mask of that type,
    every element within 32-bit offsets, and K^T and V of one head within :data:`_SHARED_SHARE` of
    the device's shared memory (longer sequences run the ATen ops)."""
    kinds = {query.dtype, key_t.dtype, value.dtype} | ({mask.dtype} if mask is not None else set())
    floats = (torch.float32, torch.float16, torch.bfloat16)
    tensors = (query, key_t, value) if mask is None else (query, key_t, value, mask)
    if not (query.is_cuda and len(kinds) == 1 and query.dtype in floats
            and query.dim() == key_t.dim() == value.dim() == 4 and (mask is None or mask.dim() <= 4)
            and all(_last_offset(x) <= _MAX_OFFSET for x in tensors)
            and query.numel() // max(query.shape[3], 1) * value.shape[3] <= _MAX_OFFSET):
        return False
    held = (_pow2(query.shape[3]) + _pow2(value.shape[3])) * _pow2(key_t.shape[3]) * query.element_size()
    return held <= _SHARED_SHARE * _shared_memory(query.device)


def _last_offset(x: torch.Tensor) -> int:
    """The offset of ``x``'s last element from its first, in elements."""
    return sum((size - 1) * abs(stride) for size, stride in zip(x.shape, x.stride(), strict=True) if size)


@functools.cache
def _shared_memory(device: torch.device) -> int:
    """Bytes of shared memory a block may use on ``device`` (its opt-in limit)."""
    properties = torch.cuda.get_device_properties(device)
    return int(getattr(properties, "shared_memory_per_block_optin", 0) or properties.shared_memory_per_block)


def _rows_per_program(block_k: int) -> int:
    """Query rows per program for a key block of ``block_k``: 64, fewer past 256 keys so a row block
    of scores stays within 16,384 values (the fastest measured at 128, 256 and 512 keys:
    ``bench/gpu_qdq_kernels.py --tilings``)."""
    return max(16, min(64, 16384 // block_k))


def _pow2(n: int) -> int:
    return max(16, 1 << (max(n, 1) - 1).bit_length())


def _run_kernel(query: torch.Tensor, key_t: torch.Tensor, value: torch.Tensor, mask: torch.Tensor | None,
                factor: float | None, divide: bool, numbers: list[list[float] | None],
                quantize: list[float] | None = None) -> torch.Tensor:
    from inferplex.devices.gpu.ops._qdq_attention_kernel import attention

    batch, heads, rows, depth = query.shape
    keys, width = key_t.shape[3], value.shape[3]
    dtype = query.dtype if quantize is None else torch.int8 if quantize[2] < 0 else torch.uint8
    out = torch.empty((batch, rows, heads, width), dtype=dtype, device=query.device)
    view = out.permute(0, 2, 1, 3)  # (B, H, Sq, Dv) over (B, Sq, H, Dv) storage
    result = view if quantize is None else out
    if out.numel() == 0:
        return result
    block_k = _pow2(keys)
    block_m = _rows_per_program(block_k)
    scores = mask.expand(batch, heads, rows, keys) if mask is not None else query
    step_arguments = [x for numbers_of in numbers for x in triton_kernels.step_arguments(numbers_of)]
    grid = ((rows + block_m - 1) // block_m, batch * heads)
    attention[grid](
        query, key_t, value, scores, view, heads, rows, keys, depth, width,
        *query.stride(), *key_t.stride(), *value.stride(),
        *(scores.stride() if mask is not None else (0, 0, 0, 0)), *view.stride(),
        float(factor) if factor is not None else 1.0,
        triton_kernels.float32_inverse(factor) if factor is not None else 1.0, *step_arguments,
        *triton_kernels.step_arguments(quantize), LEVELS=_levels_form(query.dtype, numbers[4], quantize),
        DIVIDE=query.dtype == torch.float32, IEEE=query.dtype == torch.float32, ALL_KEYS=keys == block_k,
        SCALE=0 if factor is None else (1 if divide else 2), MASK=mask is not None,
        S1=numbers[0] is not None, S2=numbers[1] is not None, S3=numbers[2] is not None,
        S4=numbers[3] is not None, S5=numbers[4] is not None,
        BM=block_m, BK=block_k, BD=_pow2(depth), BV=_pow2(width), num_warps=4 if block_k <= 256 else 8)
    return result


def _levels_form(dtype: torch.dtype, context: list[float] | None, quantize: list[float] | None) -> int:
    """The kernel's ``LEVELS``: 0 without ``quantize``; 2 where the context's pair has its numbers
    and the data's type holds each of the pair's values closely enough that QuantizeLinear gives
    its level back (float32, and float16 for a scale within :data:`_FLOAT16_SCALES`: within 255
    steps of 0 their rounding moves a value by less than half a step; not bfloat16); else 1."""
    if quantize is None:
        return 0
    if context != quantize:
        return 1
    low, high = _FLOAT16_SCALES if dtype == torch.float16 else _FLOAT32_SCALES
    return 2 if dtype in (torch.float32, torch.float16) and low <= quantize[0] <= high else 1


_FLOAT16_SCALES = (2.0**-20, 2.0**7)
"""Scales whose values up to 255 steps float16 holds as normal numbers or, below 2**-14, with an
absolute error under half a step; none overflows."""

_FLOAT32_SCALES = (2.0**-100, 2.0**100)
"""The same for float32, far from its subnormals and its overflow."""


@torch.library.custom_op("inferplex::qdq_attention", mutates_args=())
def quantized_attention_op(query: torch.Tensor, key_t: torch.Tensor, value: torch.Tensor,
                           mask: torch.Tensor | None,
                           factor: float | None, divide: bool, scores: list[float] | None,
                           scaled: list[float] | None, masked: list[float] | None,
                           probabilities: list[float] | None, context: list[float] | None,
                           levels: list[float] | None) -> torch.Tensor:
    """:func:`quantized_attention`'s kernel as an operator ``torch.compile`` calls as it is
    (``levels``: the QuantizeLinear's scale, zero point, low and high, or None)."""
    steps = [scores, scaled, masked, probabilities, context]
    return _run_kernel(query, key_t, value, mask, factor, divide, steps, levels)


@quantized_attention_op.register_fake
def _quantized_attention_shape(query: torch.Tensor, key_t: torch.Tensor, value: torch.Tensor, mask: Any,
                               factor: Any, divide: Any, scores: Any, scaled: Any, masked: Any,
                               probabilities: Any, context: Any, levels: list[float] | None) -> torch.Tensor:
    batch, heads, rows, _ = query.shape
    if levels is not None:
        dtype = torch.int8 if levels[2] < 0 else torch.uint8
        return query.new_empty((batch, rows, heads, value.shape[3]), dtype=dtype)
    return query.new_empty((batch, rows, heads, value.shape[3])).permute(0, 2, 1, 3)
