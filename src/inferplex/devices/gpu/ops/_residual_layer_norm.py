"""A residual Add and the LayerNormalization after it (with a QDQ model's pairs around them) as one
call (planned by :mod:`.._residual_layer_norm`).

:func:`residual_layer_norm` computes ``LayerNormalization(pair(a + b))`` over the last axis (the
pair where the model has one) and, in a QDQ model, its output's fake-quantize and, where an int8
matmul reads it, its QuantizeLinear's 8-bit data.  On CUDA,
outside ``torch.compile``, it is one Triton pass (:mod:`._residual_layer_norm_kernel`): the Add and the
normalization's output rounded to the data's type where the separate calls round them, the
statistics in float32 (the normalization's own rounding may differ from ATen's in the last place).
Elsewhere, and under ``torch.compile`` (whose Inductor fuses these ops itself), the ATen ops run
one by one.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from inferplex.devices.gpu.ops import _quantized_triton as triton_kernels
from inferplex.devices.gpu.ops._fake_quantize import (
    FakeQuantizeStep,
    QuantizeStep,
    quantize_dequantize,
    quantize_linear,
    step_numbers,
)

__all__ = ["residual_layer_norm", "separate_calls"]

_WIDEST = 16384
"""The widest row the kernel holds in registers; wider rows take the ATen ops."""

_FLOATS = (torch.float32, torch.float16, torch.bfloat16)


def residual_layer_norm(a: torch.Tensor, b: torch.Tensor | None, weight: torch.Tensor, bias: torch.Tensor,
                         epsilon: float, sum_step: FakeQuantizeStep | None,
                         output_step: FakeQuantizeStep | None, quantize: QuantizeStep | None
                         ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """``LayerNormalization(pair(a + b), weight, bias)`` over the last axis (``b`` None: of ``a``),
    then ``output_step``'s fake-quantize (None: none).  With ``quantize`` (scale, zero point, int8 or
    uint8), (that value, the QuantizeLinear's 8-bit data of the normalization's output)."""
    width = a.shape[-1] if a.dim() else 1
    if a.dtype in _FLOATS and width <= _WIDEST and weight.numel() == width and bias.numel() == width \
            and (b is None or (b.shape == a.shape and b.dtype == a.dtype)) \
            and triton_kernels.usable(a, a.numel()):
        return _run_kernel(a, b, weight, bias, epsilon, sum_step, output_step, quantize)
    return separate_calls(a, b, weight, bias, epsilon, sum_step, output_step, quantize)


def separate_calls(a: torch.Tensor, b: torch.Tensor | None, weight: torch.Tensor, bias: torch.Tensor,
                   epsilon: float, sum_step: FakeQuantizeStep | None, output_step: FakeQuantizeStep | None,
                   quantize: QuantizeStep | None) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """:func:`residual_layer_norm` as the ops it fuses, one call each."""
    width = a.shape[-1] if a.dim() else 1
    x = a if b is None else a + b
    if sum_step is not None:
        x = quantize_dequantize(x, *sum_step)
    y = F.layer_norm(x, (width,), weight.reshape(width), bias.reshape(width), epsilon)
    value = y if output_step is None else quantize_dequantize(y, *output_step)
    return value if quantize is None else (value, quantize_linear(y, *quantize))


def _run_kernel(a: torch.Tensor, b: torch.Tensor | None, weight: torch.Tensor, bias: torch.Tensor,
                epsilon: float, sum_step: FakeQuantizeStep | None, output_step: FakeQuantizeStep | None,
                quantize: QuantizeStep | None) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    from inferplex.devices.gpu.ops._residual_layer_norm_kernel import layer_norm

    a = a if a.is_contiguous() else a.contiguous()
    b = b if b is None or b.is_contiguous() else b.contiguous()
    width = a.shape[-1]
    out = torch.empty_like(a)
    scale, zero, dtype = quantize if quantize is not None else (1.0, 0, torch.uint8)
    data = torch.empty_like(a, dtype=dtype) if quantize is not None else out
    rows = a.numel() // width if width else 0
    if rows:
        low, high = (-128, 127) if dtype == torch.int8 else (0, 255)
        block = 1 << (width - 1).bit_length()
        layer_norm[(rows,)](
            a, b if b is not None else a, weight.contiguous(), bias.contiguous(), out, data, width, epsilon,
            *triton_kernels.step_arguments(step_numbers(sum_step)),
            *triton_kernels.step_arguments(step_numbers(output_step)),
            *triton_kernels.step_arguments([scale, zero, low, high]),
            ADD=b is not None, SUM=sum_step is not None, OUTPUT=output_step is not None,
            QUANTIZE=quantize is not None, DIVIDE=a.dtype == torch.float32, BLOCK=block,
            num_warps=4 if block <= 1024 else 8 if block <= 4096 else 16)
    return out if quantize is None else (out, data)
