"""A QDQ model's GELU formula as one call (planned by :mod:`.._qdq_gelu`).

:func:`quantized_gelu` computes ``(x * (erf(x / c) + one)) * half`` (or ``x * c`` for a Mul) with a
fake-quantize pass after the erf, the sum and the product where the model has a pair there.  On
CUDA, outside ``torch.compile``, it is one Triton pass (:mod:`._qdq_gelu_kernel`) with the separate
calls' numbers: each step rounded to the data's type, the erf of libdevice (torch's CUDA erf), the
division IEEE-rounded.  Elsewhere, and under ``torch.compile`` (whose Inductor fuses the
elementwise ops itself), the ATen ops run one by one.

:func:`gelu_table` gives the call's result for each level of the pair that hands it ``x``: an
int8 matmul whose epilogue ends with that pair looks the result up there (see
:func:`~inferplex.devices.gpu._qdq_gelu.tabled_gelus`).
"""

from __future__ import annotations

import torch

from inferplex.devices.gpu.ops import _quantized_triton as triton_kernels
from inferplex.devices.gpu.ops._fake_quantize import (
    FakeQuantizeStep,
    QuantizeStep,
    level_values,
    quantize_dequantize,
    quantize_linear,
    step_numbers,
)

__all__ = ["gelu_table", "quantized_gelu"]

_BLOCK = 2048


def quantized_gelu(x: torch.Tensor, factor: float, divide: bool, one: float, half: float,
                   steps: tuple[FakeQuantizeStep | None, ...],
                   quantize: QuantizeStep | None = None) -> torch.Tensor:
    """The formula on ``x``; ``factor`` divides (``divide``) or multiplies ``x``; ``steps``: the pairs
    after the erf, the sum and the product (None where the model has none).  ``factor``, ``one`` and
    ``half`` are the constants as the program holds them.  With ``quantize`` (scale, zero point,
    int8 or uint8) the result is a QuantizeLinear's 8-bit data of the formula's value."""
    if x.dtype in (torch.float32, torch.float16, torch.bfloat16) and triton_kernels.usable(x, x.numel()):
        return _run_kernel(x, factor, divide, one, half, steps, quantize)
    value = _aten(x, factor, divide, one, half, steps)
    return value if quantize is None else quantize_linear(value, *quantize)


def gelu_table(levels: FakeQuantizeStep, dtype: torch.dtype, factor: float, divide: bool, one: float,
               half: float, steps: tuple[FakeQuantizeStep | None, ...],
               quantize: QuantizeStep | None = None) -> torch.Tensor:
    """:func:`quantized_gelu` (its arguments after ``x``) of each value the pair ``levels`` gives in
    ``dtype``: ``(level - zero) * scale`` in float32, rounded to ``dtype``, for each level from low
    to high, on the scale's device; one result per level."""
    return quantized_gelu(level_values(levels, dtype), factor, divide, one, half, steps, quantize)


def _aten(x: torch.Tensor, factor: float, divide: bool, one: float, half: float,
          steps: tuple[FakeQuantizeStep | None, ...]) -> torch.Tensor:
    def quantized(value: torch.Tensor, step: FakeQuantizeStep | None) -> torch.Tensor:
        return value if step is None else quantize_dequantize(value, *step)

    scaled = x / torch.full((), factor, dtype=x.dtype, device=x.device) if divide else x * factor
    total = quantized(quantized(torch.erf(scaled), steps[0]) + one, steps[1])
    return quantized(x * total, steps[2]) * half


def _run_kernel(x: torch.Tensor, factor: float, divide: bool, one: float, half: float,
                steps: tuple[FakeQuantizeStep | None, ...],
                quantize: QuantizeStep | None) -> torch.Tensor:
    from inferplex.devices.gpu.ops._qdq_gelu_kernel import gelu

    x = x if x.is_contiguous() else x.contiguous()
    out = torch.empty_like(x, dtype=quantize[2] if quantize is not None else x.dtype)
    count = x.numel()
    if count:
        arguments = [a for step in steps for a in triton_kernels.step_arguments(step_numbers(step))]
        scale, zero, dtype = quantize if quantize is not None else (1.0, 0, torch.uint8)
        low, high = (-128, 127) if dtype == torch.int8 else (0, 255)
        gelu[((count + _BLOCK - 1) // _BLOCK,)](
            x, out, count, factor, triton_kernels.float32_inverse(factor), one, half, *arguments,
            *triton_kernels.step_arguments([scale, zero, low, high]),
            DIVIDE=x.dtype == torch.float32, SCALE_DIVIDES=divide, ERF=steps[0] is not None,
            SUM=steps[1] is not None, PRODUCT=steps[2] is not None, QUANTIZE=quantize is not None,
            BLOCK=_BLOCK)
    return out
