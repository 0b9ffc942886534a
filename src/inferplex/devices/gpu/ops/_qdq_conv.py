"""A QDQ model's ``Conv -> pair [-> Add -> pair]`` as one call (planned by :mod:`.._qdq_conv`).

:func:`quantized_conv` runs the convolution, then its bias, the pair's fake-quantize and, where
the chain has them, the Add of ``other`` and the second pair.  On CUDA, outside ``torch.compile``,
the convolution runs without its bias (cuDNN) and the rest is one Triton pass
(:func:`~._quantized_triton.conv_quantize`) with the separate calls' numbers: torch's ``conv2d``
adds the bias after cuDNN's convolution too, in the data's type, and each step is rounded to it.
Elsewhere, and under ``torch.compile`` (whose Inductor fuses the elementwise ops itself), the ATen
ops run one by one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from inferplex.devices.gpu.ops import _quantized_triton as triton_kernels
from inferplex.devices.gpu.ops._fake_quantize import FakeQuantizeStep, quantize_dequantize, step_numbers
from inferplex.devices.gpu.ops.nn import conv

__all__ = ["quantized_conv"]

_FLOATS = (torch.float32, torch.float16, torch.bfloat16)


def quantized_conv(info: Any) -> Callable[..., torch.Tensor]:
    """The call of one Conv node's chain: ``run(x, w, b, other, first, second)`` with ``first`` the
    pair after the convolution and, where the chain has an Add, ``other`` its other input and
    ``second`` the pair after it (else both None)."""
    plain = conv(info)

    def run(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None, other: torch.Tensor | None,
            first: FakeQuantizeStep, second: FakeQuantizeStep | None) -> torch.Tensor:
        if x.dtype in _FLOATS and triton_kernels.usable(x):
            y = plain(x, w, None)
            if triton_kernels.usable(y, y.numel()) and (other is None or other.shape == y.shape):
                numbers = step_numbers(first)
                assert numbers is not None
                return triton_kernels.conv_quantize(y, b, other, numbers, step_numbers(second))
            if b is not None:
                y = y + b.reshape(1, -1, 1, 1)
        else:
            y = plain(x, w, b)
        y = quantize_dequantize(y, *first)
        return y if other is None else quantize_dequantize(y + other, *second)  # type: ignore[misc]

    return run
