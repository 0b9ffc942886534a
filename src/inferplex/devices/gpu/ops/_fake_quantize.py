"""Fake-quantize: a QDQ model's QuantizeLinear -> DequantizeLinear pair on one per-tensor scale
as one pass over the activation (:func:`quantize_dequantize`), alone or at the end of a
convolution's call (:func:`conv_fake_quantize`).  The GPU lowering's fusion planning
(:mod:`..optimize`, :mod:`.._quantized_fusions`) picks the pairs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from inferplex.devices.gpu.ops import _quantized_triton as triton_kernels

__all__ = ["FakeQuantizeStep", "QuantizeStep", "conv_fake_quantize", "quantize_dequantize", "quantize_linear",
           "quantized_levels", "step_numbers"]

FakeQuantizeStep = tuple[torch.Tensor, float, int, int, int]
"""A fake-quantize's arguments after the data, as :func:`quantize_dequantize` takes them: the
scale as a float32 tensor and as a number, the zero point, and the range's low and high."""


QuantizeStep = tuple[float, int, torch.dtype]
"""A QuantizeLinear per tensor that a fused call runs on its result: the scale, the zero point, and
int8 or uint8."""


def step_numbers(step: FakeQuantizeStep | None) -> list[float] | None:
    """The numbers a fused kernel's epilogue takes of ``step``: scale, zero point, low, high."""
    return None if step is None else [float(step[1]), float(step[2]), float(step[3]), float(step[4])]


def quantize_dequantize(x: torch.Tensor, scale: torch.Tensor, scale_value: float, zero_point: int,
                        low: int, high: int) -> torch.Tensor:
    """``DequantizeLinear(QuantizeLinear(x))`` on one per-tensor scale and zero point, as a QDQ
    model writes it before each convolution or matmul: ``(clamp(round(x / s) + z, low, high) - z) * s``
    with ``round`` half to even, in ``x``'s floating type.

    ``scale``: the scale as a float32 tensor on ``x``'s device, ``scale_value`` the same number as a
    Python float; ``[low, high]``: the 8-bit type's range.  ``torch.fake_quantize_per_tensor_affine``
    rounds half to even, adds the zero point after rounding and saturates as ONNX does, but
    multiplies by ``1 / s`` where ONNX divides by ``s``, which moves about one value in a million
    (those whose ``x / s`` lies within float32 rounding of a half) by one step.  float32 data (a
    program at the model's own precision) is therefore divided first, exactly as ONNX does, and
    goes through the kernel with scale 1 (three kernels); f16/bf16 data, already rounded far
    more coarsely than that, goes through it in one kernel.

    Under ``torch.compile`` the same numbers are written as elementwise ops
    (:func:`_quantize_dequantize_elementwise`): Inductor has no lowering of the fake-quantize
    kernel and calls it as an opaque ATen op (one more pass over the activation, and a copy),
    where elementwise ops join the kernel that finishes the convolution's bias or Relu.
    """
    if torch.compiler.is_compiling() and x.dtype in _ELEMENTWISE_FAKE_QUANTIZE:
        return _quantize_dequantize_elementwise(x, scale, scale_value, zero_point, low, high)
    if triton_kernels.usable(x) and x.dtype in _ELEMENTWISE_FAKE_QUANTIZE:  # one vectorised pass
        inverse = float(np.float32(1.0) / np.float32(scale_value))
        return triton_kernels.quantize_dequantize(x, scale_value, inverse, zero_point, low, high)
    if x.dtype == torch.float32:
        return torch.fake_quantize_per_tensor_affine(x / scale, 1.0, zero_point, low, high).mul_(scale)
    return torch.fake_quantize_per_tensor_affine(x, scale_value, zero_point, low, high)


_ELEMENTWISE_FAKE_QUANTIZE = (torch.float32, torch.float16, torch.bfloat16)


def quantize_linear(x: torch.Tensor, scale: float, zero: int, dtype: torch.dtype) -> torch.Tensor:
    """QuantizeLinear's 8-bit data of float ``x`` as ATen ops: ``clamp(round(x / scale) + zero)``,
    divided in float32 as ONNX divides, rounded half to even (the fused calls' form where their
    Triton kernel does not run)."""
    low, high = (-128, 127) if dtype == torch.int8 else (0, 255)
    divisor = torch.full((), scale, dtype=torch.float32, device=x.device)
    return torch.clamp(torch.round(x.to(torch.float32) / divisor) + zero, low, high).to(dtype)


def _quantize_dequantize_elementwise(x: torch.Tensor, scale: torch.Tensor, scale_value: float,
                                     zero_point: int, low: int, high: int) -> torch.Tensor:
    """:func:`quantize_dequantize`'s results, bit for bit, as elementwise ops.

    float32: ``x / scale`` as the eager form divides it, then what the kernel does with scale 1
    (its products by 1 are exact).  f16/bf16: the kernel's own steps, all in float32: ``x``
    times the float32 reciprocal ``1.0f / s`` (the kernel's ``inv_scale``), rounded half to
    even, the zero point added and clamped, the zero point taken off and times ``s``, rounded
    once to ``x``'s type.  The clamped value goes through int32 as the kernel's goes through
    int64, so a ratio that rounds to ``-0`` gives ``+0`` as in the kernel even where a compiler
    drops the ``+ 0`` of a zero point 0 (float arithmetic would keep the sign).  NaN gives 0
    (the zero point's level), as in the Triton kernels, where torch's kernel saturates it to
    ``low``.  On CUDA, Inductor's Triton kernels divide float32 approximately (``div.full``,
    within 2 ulp) unless its ``eager_numerics.division_rounding`` is set: there a float32
    ``x / scale`` within that of a half may round the other way, as the division before the
    kernel in the eager form did under torch.compile already; f16/bf16 data is only multiplied,
    exactly.
    """
    levels = quantized_levels(x, scale, scale_value, zero_point, low, high)
    return ((levels - zero_point).to(torch.float32) * scale).to(x.dtype)


def level_values(step: FakeQuantizeStep, dtype: torch.dtype) -> torch.Tensor:
    """The value :func:`quantize_dequantize` gives at each level of ``step``'s range, low to high:
    ``(level - zero) * scale`` in float32, rounded once to ``dtype``, on the scale's device (what a
    table of a function of the pair's values is computed from)."""
    scale, _, zero, low, high = step
    level = torch.arange(low, high + 1, dtype=torch.int32, device=scale.device)
    return ((level - zero).to(torch.float32) * scale).to(dtype)


def quantized_levels(x: torch.Tensor, scale: torch.Tensor, scale_value: float, zero_point: int,
                     low: int, high: int) -> torch.Tensor:
    """The int32 levels :func:`quantize_dequantize`'s pair stores before it dequantizes them (its
    arguments): ``clamp(round(x / s) + z, low, high)``, float32 data divided by the scale, f16/bf16
    data times its float32 inverse, rounded half to even; NaN gives the zero point, as in the
    Triton kernels."""
    if x.dtype == torch.float32:
        ratio = x / scale
    else:
        ratio = x.to(torch.float32) * triton_kernels.float32_inverse(scale_value)
    ratio = torch.where(torch.isnan(ratio), 0.0, ratio)
    return torch.clamp(torch.round(ratio) + zero_point, low, high).to(torch.int32)


def conv_fake_quantize(conv_relu: Callable[..., Any]) -> Callable[..., Any]:
    """``quantize_dequantize(conv_relu(x, w, b, z))``: a QDQ model's Conv (and residual Add) whose
    QuantizeLinear has the quantized type's minimum as zero point, as one call.

    ``conv_relu`` is :func:`~inferplex.devices.gpu.ops.nn.conv_relu` of the Conv (one cuDNN call
    on CUDA).  The Relu changes nothing: with ``z == low``, ``clamp(round(y / s) + z, low, high)``
    is ``low`` for every ``y <= 0`` (``round`` of a small negative ratio is ``-0``, and
    ``-0 + z == z``), and so is it for ``relu(y) = 0``; positive values pass the Relu unchanged.
    ``quantize_static`` writes such a QuantizeLinear where the float model had a Relu after the
    Conv (it folds the Relu into the range): on CUDA the Relu it took out comes back in the
    convolution's epilogue, where it costs nothing, with the bias (and the residual addition),
    and the fake-quantize is the one pass that follows (under torch.compile, elementwise ops
    Inductor fuses into the epilogue's kernel).
    """

    def conv_quantize(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None, z: torch.Tensor | None,
                      scale: torch.Tensor, scale_value: float, zero_point: int, low: int,
                      high: int) -> torch.Tensor:
        return quantize_dequantize(conv_relu(x, w, b, z), scale, scale_value, zero_point, low, high)

    return conv_quantize
