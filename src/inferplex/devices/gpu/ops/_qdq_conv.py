"""A QDQ model's convolutions as one call each, with the chain after them: on CUDA the int8
convolution (:func:`~._int8_conv.int8_conv`) where it takes the Conv, else the float one.

:func:`quantized_relu_conv`: ``Conv [-> Add] -> pair`` whose pair's range holds a Relu
(:func:`~._fake_quantize.conv_fake_quantize`'s chain).

:func:`quantized_conv`: ``Conv -> pair [-> Add -> pair]`` (planned by :mod:`.._qdq_conv`).  The
float form runs the convolution, then its bias, the pair's fake-quantize and, where the chain has
them, the Add of ``other`` and the second pair.  On CUDA, outside ``torch.compile``,
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
from inferplex.devices.gpu.ops._fake_quantize import (
    FakeQuantizeStep,
    conv_fake_quantize,
    quantize_dequantize,
    step_numbers,
)
from inferplex.devices.gpu.ops._int8_conv import Int8Weight, int8_conv, takes
from inferplex.devices.gpu.ops._window import Window
from inferplex.devices.gpu.ops.nn import conv, conv_relu

__all__ = ["quantized_conv", "quantized_relu_conv"]

_FLOATS = (torch.float32, torch.float16, torch.bfloat16)


def quantized_conv(info: Any) -> Callable[..., torch.Tensor]:
    """The call of one Conv node's chain: ``run(x, w, b, other, first, second, int8, reads, writes)``
    with ``first`` the pair after the convolution and, where the chain has an Add, ``other`` its
    other input and ``second`` the pair after it (else both None); ``int8``: the int8 convolution's
    weight, or None; ``reads``: the pads the Conv before writes ``x``'s levels with where it hands
    them over, ``writes`` the pads this one writes its last pair's levels with where it hands them
    to the next Convs (see :func:`~._int8_conv.int8_conv`), or None."""
    plain = conv(info)
    window = Window(info)

    def run(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None, other: torch.Tensor | None,
            first: FakeQuantizeStep, second: FakeQuantizeStep | None,
            int8: Int8Weight | None = None, reads: list[int] | None = None,
            writes: list[int] | None = None) -> torch.Tensor:
        found = _int8_path(window, x, w, b, int8, reads, writes, other=other, first=first, second=second)
        if found is not None:
            return found
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


def quantized_relu_conv(info: Any) -> Callable[..., torch.Tensor]:
    """The call of a Conv whose pair's range holds a Relu: ``run(x, w, b, z, *pair, int8, reads,
    writes)``, the residual ``z`` added before the Relu, ``int8`` and ``reads`` as for
    :func:`quantized_conv`; ``writes``: the next Conv's pads where this one hands it the pair's
    levels (then, where the int8 convolution runs, the result is those levels with the pads around
    them, see :func:`~._int8_conv.int8_conv`), or None.  The float form is
    :func:`~._fake_quantize.conv_fake_quantize` of :func:`~.nn.conv_relu`."""
    fallback = conv_fake_quantize(conv_relu(info))
    window = Window(info)

    def run(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None, z: torch.Tensor | None,
            scale: torch.Tensor, scale_value: float, zero_point: int, low: int, high: int,
            int8: Int8Weight | None = None, reads: list[int] | None = None,
            writes: list[int] | None = None) -> torch.Tensor:
        first = (scale, scale_value, zero_point, low, high)
        found = _int8_path(window, x, w, b, int8, reads, writes, residual=z, relu=True, first=first)
        return found if found is not None else fallback(x, w, b, z, scale, scale_value, zero_point, low, high)

    return run


def _int8_path(window: Window, x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None,
               int8: Int8Weight | None, reads: list[int] | None, writes: list[int] | None,
               **chain: Any) -> torch.Tensor | None:
    """The int8 convolution of ``x`` and ``chain`` (:func:`~._int8_conv.int8_conv`'s keywords) where
    it runs this Conv, always where the Conv before handed over ``x``'s levels (int8 data with
    ``reads`` around them), else None (the caller's float form runs)."""
    kernel = (w.shape[2], w.shape[3]) if w.dim() == 4 else (0, 0)
    if x.dtype == torch.int8:
        assert int8 is not None and reads is not None
        return int8_conv(x, int8, kernel, b, window.pads, window.strides, window.dilations, levels_pads=reads,
                         writes=writes, out_dtype=w.dtype, **chain)
    pads = window.resolve(x.shape[2:], kernel)
    if int8 is None or not takes(x, int8, kernel, pads):
        return None
    return int8_conv(x, int8, kernel, b, pads, window.strides, window.dilations, writes=writes, **chain)
