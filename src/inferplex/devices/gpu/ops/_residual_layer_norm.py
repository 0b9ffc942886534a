"""A residual Add and the LayerNormalization after it (with a QDQ model's pairs around them) as one
call (planned by :mod:`.._residual_layer_norm`).

:func:`residual_layer_norm` computes ``LayerNormalization(pair(a + b))`` over the last axis (the
pair where the model has one) and, in a QDQ model, its output's fake-quantize and, where an int8
matmul reads it, its QuantizeLinear's 8-bit data.  On CUDA,
outside ``torch.compile``, it is one Triton pass (:mod:`._residual_layer_norm_kernel`): the Add,
the pairs and the normalization in float32, float16 and bfloat16 data rounded only where it is
loaded and stored (the separate calls round the Add and each pair's value to the data's type; the
kernel's values are those of the chain on the same inputs in float32, its normalization within
the last place of ATen's).
Elsewhere, and under ``torch.compile`` (whose Inductor fuses these ops itself), the ATen ops run
one by one.  :func:`layer_norm_with_partials` is the float form that also writes the minimum and
maximum of each program's rows, for the DynamicQuantizeLinear that reads its output.
Either input may come as a pair's 8-bit levels (the call before hands them over, see
:func:`~.._residual_layer_norm.level_inputs`), dequantized as they are loaded; where nothing reads
the float output, the call writes the QuantizeLinear's data alone.
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

__all__ = ["layer_norm_with_partials", "residual_layer_norm", "separate_calls"]

_WIDEST = 16384
"""The widest row the kernel holds in registers; wider rows take the ATen ops."""

_FLOATS = (torch.float32, torch.float16, torch.bfloat16)


def residual_layer_norm(a: torch.Tensor, b: torch.Tensor | None, weight: torch.Tensor, bias: torch.Tensor,
                         epsilon: float, sum_step: FakeQuantizeStep | None,
                         output_step: FakeQuantizeStep | None, quantize: QuantizeStep | None,
                         levels: tuple[FakeQuantizeStep | None, FakeQuantizeStep | None] = (None, None),
                         value: bool = True) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """``LayerNormalization(pair(a + b), weight, bias)`` over the last axis (``b`` None: of ``a``),
    then ``output_step``'s fake-quantize (None: none).  With ``quantize`` (scale, zero point, int8 or
    uint8), (that value, the QuantizeLinear's 8-bit data of the normalization's output), or the
    data alone where ``value`` is False.

    ``levels``: for ``a`` and ``b``, the pair whose 8-bit levels the tensor holds (its value is
    ``(level - zero) * scale`` in float32, rounded to ``weight``'s type, as the pair's call stores
    it), or None where it holds values."""
    if _kernel_takes(a, b, weight, bias, levels):
        return _run_kernel(a, b, weight, bias, epsilon, sum_step, output_step, quantize, levels=levels,
                           value=value)
    kind = _data_type(a, b, weight, levels)
    first, second = (_values(x, step, kind) for x, step in zip((a, b), levels, strict=True))
    assert first is not None
    result = separate_calls(first, second, weight, bias, epsilon, sum_step, output_step, quantize)
    return result[1] if not value and isinstance(result, tuple) else result


def _values(x: torch.Tensor | None, step: FakeQuantizeStep | None, dtype: torch.dtype) -> torch.Tensor | None:
    """``x``'s values: itself, or where it holds ``step``'s 8-bit levels, those levels' values in
    ``dtype``, as the pair's call stores them."""
    if x is None or step is None:
        return x
    return ((x.to(torch.int32) - step[2]).to(torch.float32) * step[0]).to(dtype)


def layer_norm_with_partials(a: torch.Tensor, b: torch.Tensor | None, weight: torch.Tensor,
                             bias: torch.Tensor, epsilon: float) -> tuple[torch.Tensor, torch.Tensor | None]:
    """A float model's :func:`residual_layer_norm` and the minimum and maximum of each part of its
    output (a 2 x parts float32 tensor, see :func:`~._quantized_triton.dynamic_quantize_rows`),
    which the kernel writes as it writes the output, for the DynamicQuantizeLinear that reads the
    output; None where the ATen ops ran (the quantizer then finds the range itself)."""
    if _kernel_takes(a, b, weight, bias) and a.numel() <= triton_kernels.RANGE_ELEMENTS \
            and 0 < _programs(a) <= triton_kernels.PARTIALS_LIMIT:
        partials = torch.empty((2, _programs(a)), dtype=torch.float32, device=a.device)
        out = _run_kernel(a, b, weight, bias, epsilon, None, None, None, partials)
        assert isinstance(out, torch.Tensor)  # no QuantizeLinear: the output alone
        return out, partials
    out = separate_calls(a, b, weight, bias, epsilon, None, None, None)
    assert isinstance(out, torch.Tensor)
    return out, None


def _kernel_takes(a: torch.Tensor, b: torch.Tensor | None, weight: torch.Tensor, bias: torch.Tensor,
                  levels: tuple[FakeQuantizeStep | None, FakeQuantizeStep | None] = (None, None)) -> bool:
    """Whether the kernel takes these tensors: ``weight``'s float type (or 8-bit levels where
    ``levels`` says), rows of at most :data:`_WIDEST`, a scale and bias of the row's width, ``b`` of
    ``a``'s shape, on CUDA with Triton."""
    width = a.shape[-1] if a.dim() else 1
    kind = _data_type(a, b, weight, levels)
    kinds = [(torch.int8, torch.uint8) if step is not None else (kind,) for step in levels]
    return kind in _FLOATS and width <= _WIDEST and weight.numel() == width and bias.numel() == width \
        and a.dtype in kinds[0] and (b is None or (b.shape == a.shape and b.dtype in kinds[1])) \
        and triton_kernels.usable(a, a.numel())


def _data_type(a: torch.Tensor, b: torch.Tensor | None, weight: torch.Tensor,
               levels: tuple[FakeQuantizeStep | None, FakeQuantizeStep | None]) -> torch.dtype:
    """The float type of the call's values: ``a``'s, else ``b``'s where ``a`` holds levels, else
    ``weight``'s."""
    for x, step in zip((a, b), levels, strict=True):
        if x is not None and step is None:
            return x.dtype
    return weight.dtype


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


_FLOAT_ROWS = 4
"""Rows a program of the float form (no pair, no QuantizeLinear): the fastest measured
(``bench/RESULTS.md``); more where that leaves more programs than a DynamicQuantizeLinear takes
partial results from, up to :data:`_PROGRAM_ELEMENTS`.  The QDQ forms take one."""

_PROGRAM_ELEMENTS = 16384
"""The most elements a program of the float form holds."""


def _rows_per_program(a: torch.Tensor, quantized: bool) -> int:
    """Rows a program: a function of the shape and the form alone, so that a call gives the same
    numbers whether or not it writes its partial results."""
    block = 1 << (a.shape[-1] - 1).bit_length()
    if quantized or block * _FLOAT_ROWS > _PROGRAM_ELEMENTS:
        return 1
    rows, step = a.numel() // a.shape[-1], _FLOAT_ROWS
    while -(-rows // step) > triton_kernels.PARTIALS_LIMIT and block * step * 2 <= _PROGRAM_ELEMENTS:
        step *= 2
    return step


def _programs(a: torch.Tensor, quantized: bool = False) -> int:
    """The kernel's programs for ``a`` in the float form (or a QDQ one, where ``quantized``)."""
    if not a.shape[-1]:
        return 0
    rows, step = a.numel() // a.shape[-1], _rows_per_program(a, quantized)
    return (rows + step - 1) // step


def _one_quantizer(step: FakeQuantizeStep | None, quantize: QuantizeStep | None) -> bool:
    """Whether the output's pair and the QuantizeLinear have one scale, zero point and range (as
    ``quantize_static`` writes them: one QuantizeLinear)."""
    if step is None or quantize is None:
        return False
    low, high = (-128, 127) if quantize[2] == torch.int8 else (0, 255)
    return (step[1], step[2], step[3], step[4]) == (quantize[0], quantize[1], low, high)


def _run_kernel(a: torch.Tensor, b: torch.Tensor | None, weight: torch.Tensor, bias: torch.Tensor,
                epsilon: float, sum_step: FakeQuantizeStep | None, output_step: FakeQuantizeStep | None,
                quantize: QuantizeStep | None, partials: torch.Tensor | None = None,
                levels: tuple[FakeQuantizeStep | None, FakeQuantizeStep | None] = (None, None),
                value: bool = True) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    from inferplex.devices.gpu.ops._quantized_kernels import FLOAT_TYPES
    from inferplex.devices.gpu.ops._residual_layer_norm_kernel import layer_norm

    a = a if a.is_contiguous() else a.contiguous()
    b = b if b is None or b.is_contiguous() else b.contiguous()
    width = a.shape[-1]
    kind = _data_type(a, b, weight, levels)
    scale, zero, dtype = quantize if quantize is not None else (1.0, 0, torch.uint8)
    data = torch.empty_like(a, dtype=dtype) if quantize is not None else None
    out = torch.empty_like(a, dtype=kind) if value or data is None else data
    rows = a.numel() // width if width else 0
    quantized = sum_step is not None or output_step is not None or quantize is not None
    if rows:
        low, high = (-128, 127) if dtype == torch.int8 else (0, 255)
        block = 1 << (width - 1).bit_length()
        step = _rows_per_program(a, quantized)
        a_levels, b_levels = ((1.0, 0) if pair is None else (pair[1], pair[2]) for pair in levels)
        layer_norm[(_programs(a, quantized),)](
            a, b if b is not None else a, weight.contiguous(), bias.contiguous(), out,
            data if data is not None else out,
            partials[0] if partials is not None else out, partials[1] if partials is not None else out,
            rows, width, epsilon,
            *triton_kernels.step_arguments(step_numbers(sum_step)),
            *triton_kernels.step_arguments(step_numbers(output_step)),
            *triton_kernels.step_arguments([scale, zero, low, high]), *a_levels, *b_levels,
            ADD=b is not None, SUM=sum_step is not None, OUTPUT=output_step is not None,
            QUANTIZE=quantize is not None, SHARED=_one_quantizer(output_step, quantize),
            PARTIALS=partials is not None, DIVIDE=kind == torch.float32,
            ROWS=step, BLOCK=block, A_LEVELS=levels[0] is not None, B_LEVELS=levels[1] is not None,
            VALUE=value or data is None, KIND=FLOAT_TYPES[kind],
            num_warps=4 if block * step <= 4096 else 8 if block * step <= 16384 else 16)
    if data is None:
        return out
    return (out, data) if value else data
