"""Lowerings: convolution, Gemm/MatMul, softmax family, Dropout.

Convolution padding follows ONNX through :mod:`._window`.  Pooling lives in
:mod:`._pooling`, normalization in :mod:`._norms`, attention in :mod:`._attention`,
Resize/Upsample in :mod:`._resize`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import onnx_ir as ir
import torch
import torch.nn.functional as F

from inferplex.devices.gpu.ops import _attention, _norms, _pooling, _resize  # noqa: F401  (register their ops)
from inferplex.devices.gpu.ops._window import CONV, Window, floats_only, spatial_rank, symmetric, torch_pad
from inferplex.devices.gpu.registry import NodeInfo, register

_CONV_T = {1: F.conv_transpose1d, 2: F.conv_transpose2d, 3: F.conv_transpose3d}


# --- convolution ------------------------------------------------------------------


def _conv_supports(info: NodeInfo) -> str | None:
    return floats_only(info, (0, 1)) or spatial_rank(info)


@register("Conv", supports=_conv_supports)
def conv(info: NodeInfo) -> Callable[..., Any]:
    window = Window(info)
    group = int(info.attr("group", 1))
    fn = CONV[window.spatial]

    def run(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None = None) -> torch.Tensor:
        pads = window.resolve(x.shape[2:], w.shape[2:])
        padding = symmetric(pads)
        if padding is None:
            return fn(F.pad(x, torch_pad(pads)), w, b, window.strides, 0, window.dilations, group)
        return fn(x, w, b, window.strides, padding, window.dilations, group)

    return run


class _CudnnFusion:
    """Whether cuDNN has taken a fused convolution of one node so far (it may refuse a configuration
    when it builds the plan, on the first eager run, before any CUDA graph is captured)."""

    usable = True


def conv_relu(info: NodeInfo) -> Callable[..., Any]:
    """``Relu(Conv(x, w, b) [+ z])`` of a Conv node: on CUDA for a 2-D convolution with symmetric
    padding, one cuDNN call with the bias, the addition and the Relu in the convolution's epilogue
    (``torch.cudnn_convolution_relu`` / ``cudnn_convolution_add_relu``: one pass over the output where
    torch's ``conv2d`` adds the bias and the Relu in two more); elsewhere, under torch.compile (whose
    own kernels fuse the same) and where cuDNN refuses the fused plan, the ops one after the other."""
    window = Window(info)
    group = int(info.attr("group", 1))
    plain = conv(info)
    fusion = _CudnnFusion()

    def run(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None = None,
            z: torch.Tensor | None = None) -> torch.Tensor:
        if x.is_cuda and window.spatial == 2 and fusion.usable and not torch.compiler.is_compiling():
            padding = symmetric(window.resolve(x.shape[2:], w.shape[2:]))
            if padding is not None:
                try:
                    steps = (window.strides, padding, window.dilations, group)
                    if z is None:
                        return torch.cudnn_convolution_relu(x, w, b, *steps)
                    return torch.cudnn_convolution_add_relu(x, w, z, 1.0, b, *steps)
                except RuntimeError:
                    fusion.usable = False
        y = plain(x, w, b)
        return torch.relu(y if z is None else y + z)

    return run


def _conv_transpose_supports(info: NodeInfo) -> str | None:
    return floats_only(info, (0, 1)) or spatial_rank(info)


@register("ConvTranspose", supports=_conv_transpose_supports)
def conv_transpose(info: NodeInfo) -> Callable[..., Any]:
    window = Window(info)
    group = int(info.attr("group", 1))
    output_padding = list(info.attr("output_padding") or [0] * window.spatial)
    output_shape = info.attr("output_shape")
    fn = _CONV_T[window.spatial]

    def run(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None = None) -> torch.Tensor:
        # Full (unpadded) transposed conv, then crop/extend each spatial dim to ONNX's window.
        y = fn(x, w, None, window.strides, 0, 0, group, window.dilations)
        crop: list[int] = []
        for i in range(window.spatial):
            size, full = x.shape[2 + i], y.shape[2 + i]
            begin, out = _transpose_extent(window, i, size, full, w.shape[2 + i], output_padding,
                                           output_shape)
            crop = [-begin, begin + out - full, *crop]
        if any(crop):
            y = F.pad(y, crop)
        if b is not None:
            y = y + b.reshape((1, -1) + (1,) * window.spatial)
        return y

    return run


def _transpose_extent(window: Window, i: int, size: int, full: int, kernel: int,
                      output_padding: Sequence[int], output_shape: Sequence[int] | None) -> tuple[int, int]:
    """(first output position inside the full result, output length) of ConvTranspose dim ``i``."""
    stride, n = window.strides[i], window.spatial
    extent = (kernel - 1) * window.dilations[i] + 1
    if output_shape or window.auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        out = int(output_shape[-n + i]) if output_shape else size * stride
        total = stride * (size - 1) + output_padding[i] + extent - out
        if window.auto_pad == "SAME_UPPER":
            begin = total // 2
        else:
            begin = total - total // 2
        return begin, out
    pads = [0] * 2 * n if window.auto_pad == "VALID" else window.pads
    out = stride * (size - 1) + output_padding[i] + extent - pads[i] - pads[i + n]
    return pads[i], out


# --- matrix products ----------------------------------------------------------------


def _matmul_supports(info: NodeInfo) -> str | None:
    return floats_only(info, (0, 1))


@register("MatMul", supports=_matmul_supports)
def matmul(info: NodeInfo) -> Callable[..., Any]:
    return torch.matmul


def _gemm_supports(info: NodeInfo) -> str | None:
    return floats_only(info, (0, 1))


@register("Gemm", supports=_gemm_supports)
def gemm(info: NodeInfo) -> Callable[..., Any]:
    alpha, beta = float(info.attr("alpha", 1.0)), float(info.attr("beta", 1.0))
    trans_a, trans_b = bool(info.attr("transA", 0)), bool(info.attr("transB", 0))

    def run(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor | None = None) -> torch.Tensor:
        a = a.t() if trans_a else a
        b = b.t() if trans_b else b
        if c is None or beta == 0.0:
            y = torch.mm(a, b)
            return y if alpha == 1.0 else y * alpha
        return torch.addmm(c.to(a.dtype), a, b, beta=beta, alpha=alpha)

    return run


# --- softmax family -----------------------------------------------------------------


def _softmax_like(info: NodeInfo, fn: Callable[[torch.Tensor, int], torch.Tensor]) -> Callable[..., Any]:
    """Opset >= 13 works along ``axis``; older opsets flatten to 2-D at ``axis`` first."""
    rank = info.rank(0)
    if info.opset >= 13:
        axis = int(info.attr("axis", -1))
        return lambda x: fn(x, axis)
    axis = int(info.attr("axis", 1))

    def run(x: torch.Tensor) -> torch.Tensor:
        cut = axis % x.dim() if x.dim() else 0
        return fn(x.reshape(math.prod(x.shape[:cut]), -1), 1).reshape(x.shape)

    del rank
    return run


def _hardmax(x: torch.Tensor, axis: int) -> torch.Tensor:
    index = x.argmax(axis, keepdim=True)  # first maximum, as ONNX asks
    return torch.zeros_like(x).scatter(axis, index, 1.0)


def _softmax_supports(info: NodeInfo) -> str | None:
    return floats_only(info)


@register("Softmax", supports=_softmax_supports)
def softmax(info: NodeInfo) -> Callable[..., Any]:
    return _softmax_like(info, lambda x, axis: torch.softmax(x, axis))


@register("LogSoftmax", supports=_softmax_supports)
def log_softmax(info: NodeInfo) -> Callable[..., Any]:
    return _softmax_like(info, lambda x, axis: torch.log_softmax(x, axis))


@register("Hardmax", supports=_softmax_supports)
def hardmax(info: NodeInfo) -> Callable[..., Any]:
    return _softmax_like(info, _hardmax)


# --- dropout (inference) -------------------------------------------------------------


def _dropout_supports(info: NodeInfo) -> str | None:
    if info.opset < 7 and int(info.attr("is_test", 0)) == 0:
        return "Dropout with is_test=0 (training) is not supported"
    if info.has_input(2):
        mode = info.const(2)
        if mode is None:
            return "Dropout with a run-time training_mode is not supported (inference only)"
        if bool(mode.reshape(-1)[0]):
            return "Dropout with training_mode=True is random; not supported (inference only)"
    return None


@register("Dropout", supports=_dropout_supports)
def dropout(info: NodeInfo) -> Callable[..., Any]:
    mask_dtype = info.output_dtypes[1] if len(info.output_dtypes) > 1 else None
    want_mask = len(info.node.outputs) > 1 and bool(info.node.outputs[1].name)
    if not want_mask:
        return lambda x, *_: x
    torch_mask = torch.bool if mask_dtype in (None, ir.DataType.BOOL) else None

    def run(x: torch.Tensor, *_: Any) -> tuple[torch.Tensor, torch.Tensor]:
        return x, torch.ones_like(x, dtype=torch_mask or x.dtype)

    return run
