"""Lowerings: MaxPool, AveragePool, LpPool and the global pools.

Pooling whose ONNX output size differs from torch's (asymmetric pads, pads over
half a kernel, ceil mode's last-window rule) is padded explicitly so torch's
floor-mode pooling yields exactly ONNX's windows; MaxPool's indices are mapped
back to ONNX's (whole-input, optionally column-major) numbering.  On CUDA, outside
``torch.compile``, a 2-D MaxPool (without indices) or AveragePool of channels-last float data is
one Triton pass (:mod:`._pool_kernels`): ATen's channels-last pools read at a fraction of the
memory's speed (``bench/RESULTS.md``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import onnx_ir as ir
import torch
import torch.nn.functional as F

from inferplex.devices.gpu.ops import _quantized_triton as triton_kernels
from inferplex.devices.gpu.ops._fake_quantize import quantize_dequantize, step_numbers
from inferplex.devices.gpu.ops._window import CONV, Window, floats_only, spatial_rank, symmetric, torch_pad
from inferplex.devices.gpu.registry import NodeInfo, register
from inferplex.errors import CompileError

_MAX_POOL = {1: F.max_pool1d, 2: F.max_pool2d, 3: F.max_pool3d}
_AVG_POOL = {1: F.avg_pool1d, 2: F.avg_pool2d, 3: F.avg_pool3d}


def _pool_output(size: int, begin: int, end: int, k: int, s: int, d: int, ceil: bool) -> int:
    """ONNX's (and torch's) pooled length, including ceil mode's last-window rule."""
    span = size + begin + end - d * (k - 1) - 1
    out = (-(-span // s) if ceil else span // s) + 1
    if ceil and (out - 1) * s >= size + begin:
        out -= 1
    return out


def _pool_plan(window: Window, sizes: Sequence[int], ceil: bool) -> tuple[list[int], list[int]]:
    """ONNX pads for these sizes, and the end pads that make floor-mode pooling produce ONNX's windows."""
    kernel = window.kernel_shape()
    pads = window.resolve(sizes, kernel)
    n = window.spatial
    ends = []
    for i, size in enumerate(sizes):
        k, s, d = kernel[i], window.strides[i], window.dilations[i]
        out = _pool_output(size, pads[i], pads[i + n], k, s, d, ceil)
        ends.append((out - 1) * s + d * (k - 1) + 1 - size - pads[i])
    return pads, ends


def _native_pool_ok(window: Window, pads: Sequence[int]) -> list[int] | None:
    """Torch's own padding when it gives ONNX's windows (symmetric, at most half a kernel); else None.

    With symmetric pads torch's output length and ceil-mode rule are ONNX's, and
    its average divisor also counts pads but not the ceil-mode overhang.
    """
    kernel = window.kernel_shape()
    padding = symmetric(pads)
    if padding is None or any(2 * p > k for p, k in zip(padding, kernel, strict=False)):
        return None
    return padding


def _pool_supports(info: NodeInfo) -> str | None:
    if not info.attr("kernel_shape"):
        return f"{info.op_type} needs kernel_shape"
    return floats_only(info) or spatial_rank(info)


_SMALL_INTS = (ir.DataType.INT8, ir.DataType.UINT8)


def _max_pool_supports(info: NodeInfo) -> str | None:
    if info.input_dtypes and info.input_dtypes[0] in _SMALL_INTS:
        # 8-bit integers pool exactly in float32 (every value is representable)
        problem = None if info.attr("kernel_shape") else "MaxPool needs kernel_shape"
        problem = problem or spatial_rank(info)
    else:
        problem = _pool_supports(info)
    return problem


@register("MaxPool", supports=_max_pool_supports)
def max_pool(info: NodeInfo) -> Callable[..., Any]:
    return _max_pool(info)


def fake_quantized_max_pool(info: NodeInfo) -> Callable[..., torch.Tensor]:
    """``quantize_dequantize(MaxPool(x), scale, scale_value, zero_point, low, high)``: a QDQ model's
    pair before a MaxPool (without indices), run on the pooled values instead of the input.

    The fake-quantize never decreases (``round`` and ``clamp`` keep the order), so the largest of a
    window's fake-quantized values is the fake-quantize of its largest value: the same numbers from
    a quarter of the data for a 3 x 3 window of stride 2 (a NaN pools to NaN first).  On CUDA the
    channels-last pass pools and fake-quantizes at once."""
    return _max_pool(info)


def _max_pool(info: NodeInfo) -> Callable[..., Any]:
    """``run(x, *step)``: the MaxPool of ``x``; with ``step`` (scale tensor, scale, zero point,
    low, high), :func:`fake_quantized_max_pool`'s fake-quantize of the pooled values."""
    window = Window(info)
    kernel = window.kernel_shape()
    ceil = bool(info.attr("ceil_mode", 0))
    want_indices = len(info.node.outputs) > 1 and bool(info.node.outputs[1].name)
    column_major = int(info.attr("storage_order", 0)) != 0
    fn = _MAX_POOL[window.spatial]

    def run(x: torch.Tensor, *step: Any) -> Any:
        if x.dtype in (torch.int8, torch.uint8):
            pooled = run(x.to(torch.float32))
            if isinstance(pooled, tuple):
                return pooled[0].to(x.dtype), pooled[1]
            return pooled.to(x.dtype)
        pads, ends = _pool_plan(window, x.shape[2:], ceil)
        if not want_indices and _channels_last_kernel_fits(x, kernel):
            numbers = step_numbers(step) if step else None
            return _channels_last_max_pool(x, kernel, window, pads, ends, numbers)
        padding = _native_pool_ok(window, pads)
        begins = pads[:window.spatial]
        if padding is None:
            x_in = F.pad(x, torch_pad(begins + ends), value=-math.inf)
            padding, use_ceil = [0] * window.spatial, False
        else:
            x_in, use_ceil = x, ceil
            begins = [0] * window.spatial
        if not want_indices:
            pooled = fn(x_in, kernel, window.strides, padding, window.dilations, use_ceil)
            return quantize_dequantize(pooled, *step) if step else pooled
        y, idx = fn(x_in, kernel, window.strides, padding, window.dilations, use_ceil, True)
        return y, _onnx_indices(idx, x.shape, x_in.shape[2:], begins, column_major)

    return run


_KERNEL_FLOATS = (torch.float32, torch.float16, torch.bfloat16)


_KERNEL_PLACES = 64
"""The most places a window of the Triton pools holds: they unroll the window, and their compile
time grows faster than it (``bench/RESULTS.md``); larger windows keep ATen's pools."""


def _channels_last_kernel_fits(x: torch.Tensor, kernel: Sequence[int]) -> bool:
    """Whether the Triton pools take ``x`` and a window of ``kernel``: 2-D pooling of channels-last
    float data on CUDA, where the Triton kernels run, of at most :data:`_KERNEL_PLACES` places."""
    return x.dim() == 4 and x.dtype in _KERNEL_FLOATS and kernel[0] * kernel[1] <= _KERNEL_PLACES \
        and x.is_contiguous(memory_format=torch.channels_last) and triton_kernels.usable(x, x.numel())


def _channels_last_max_pool(x: torch.Tensor, kernel: Sequence[int], window: Window, pads: Sequence[int],
                            ends: Sequence[int], step: Sequence[float] | None = None) -> torch.Tensor:
    """MaxPool of channels-last ``x`` with ONNX's windows: ``pads[:2]`` before each spatial axis,
    ``ends`` after it (the places past the input count as -inf), as one Triton pass; with ``step``
    (scale, zero point, low, high), the pooled values fake-quantized in it (the fake-quantize pass's
    numbers)."""
    from inferplex.devices.gpu.ops._pool_kernels import max_pool as kernel_pass

    def launch(grid: tuple[int, int], out: torch.Tensor, pixels: int, dims: list[int], block_p: int,
               block_c: int) -> None:
        kernel_pass[grid](x, out, pixels, x.shape[1], *x.shape[2:], *dims, *window.strides, pads[0], pads[1],
                          *window.dilations, *triton_kernels.step_arguments(step), KH=kernel[0], KW=kernel[1],
                          QUANTIZE=step is not None, DIVIDE=x.dtype == torch.float32, BLOCK_P=block_p,
                          BLOCK_C=block_c, num_warps=4)

    return _channels_last_pool(x, kernel, window, pads, ends, launch)


def _channels_last_average_pool(x: torch.Tensor, kernel: Sequence[int], window: Window, pads: Sequence[int],
                                ends: Sequence[int], count_pads: bool) -> torch.Tensor:
    """AveragePool of channels-last ``x`` with ONNX's windows (see :func:`_channels_last_max_pool`)
    as one Triton pass: each window's sum over its number of places inside the input, or inside the
    input and its pads where ``count_pads`` (the ceil-mode overhang past the end pads never counts),
    ONNX's rule and ``_padded_sums``'."""
    from inferplex.devices.gpu.ops._pool_kernels import average_pool as kernel_pass

    height, width = x.shape[2:]
    if count_pads:
        bounds = (-pads[0], height + min(ends[0], pads[2]), -pads[1], width + min(ends[1], pads[3]))
    else:
        bounds = (0, height, 0, width)

    def launch(grid: tuple[int, int], out: torch.Tensor, pixels: int, dims: list[int], block_p: int,
               block_c: int) -> None:
        kernel_pass[grid](x, out, pixels, x.shape[1], height, width, *dims, *window.strides, pads[0], pads[1],
                          *window.dilations, *bounds, KH=kernel[0], KW=kernel[1], BLOCK_P=block_p,
                          BLOCK_C=block_c, num_warps=4)

    return _channels_last_pool(x, kernel, window, pads, ends, launch)


def _channels_last_pool(x: torch.Tensor, kernel: Sequence[int], window: Window, pads: Sequence[int],
                        ends: Sequence[int], launch: Callable[..., None]) -> torch.Tensor:
    """The channels-last output of a 2-D pool with ONNX's windows, filled by
    ``launch(grid, out, output pixels, output sizes, pixels a program, channels a program)``."""
    batch, channels, height, width = x.shape
    dims = []
    for axis, size in enumerate((height, width)):
        span = size + pads[axis] + ends[axis] - window.dilations[axis] * (kernel[axis] - 1) - 1
        dims.append(span // window.strides[axis] + 1)
    out = torch.empty((batch, channels, *dims), dtype=x.dtype, device=x.device,
                      memory_format=torch.channels_last)
    pixels = batch * dims[0] * dims[1]
    if pixels and channels:
        # 1,024 values a program of 4 warps, up to 64 channels wide: the fastest tiling measured
        # for a stem's max pool at batch 1 to 64 (``bench/RESULTS.md``)
        block_c = min(64, 1 << (channels - 1).bit_length())
        block_p = max(1, 1024 // block_c)
        launch((-(-pixels // block_p), -(-channels // block_c)), out, pixels, dims, block_p, block_c)
    return out


def _onnx_indices(idx: torch.Tensor, shape: Sequence[int], padded: Sequence[int],
                  begins: Sequence[int], column_major: bool = False) -> torch.Tensor:
    """torch's per-plane indices (into the padded input) -> ONNX's indices into the whole input
    (``column_major``: storage_order=1, the spatial axes flattened first axis fastest)."""
    if any(begins) or list(padded) != list(shape[2:]):
        flat = torch.zeros_like(idx)
        rest = idx
        for axis in reversed(range(len(padded))):
            coord = rest % padded[axis] - begins[axis]
            rest = rest // padded[axis]
            stride = math.prod(shape[3 + axis:])
            flat = flat + coord * stride
        idx = flat
    if column_major:
        spatial, rest, flat = list(shape[2:]), idx, torch.zeros_like(idx)
        for axis in reversed(range(len(spatial))):
            flat = flat + (rest % spatial[axis]) * math.prod(spatial[:axis])
            rest = rest // spatial[axis]
        idx = flat
    plane = math.prod(shape[2:])
    offsets = torch.arange(shape[0] * shape[1], device=idx.device, dtype=idx.dtype) * plane
    return idx + offsets.reshape(shape[0], shape[1], *([1] * (len(shape) - 2)))


def _sum_pool(x: torch.Tensor, window: Window) -> torch.Tensor:
    """Window sums (with dilation) of an already padded tensor, as a depthwise conv with ones."""
    kernel = window.kernel_shape()
    channels = x.shape[1]
    ones = torch.ones((channels, 1, *kernel), dtype=x.dtype, device=x.device)
    return CONV[window.spatial](x, ones, None, window.strides, 0, window.dilations, channels)


def _padded_sums(x: torch.Tensor, window: Window, ceil: bool,
                 count_pads: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """Window sums of x and the number of elements each window averages over (ONNX's rule)."""
    n = window.spatial
    sizes = list(x.shape[2:])
    pads, ends = _pool_plan(window, sizes, ceil)
    begins = pads[:n]
    x_pad = F.pad(x, torch_pad(begins + ends))
    mask = torch.ones([1, 1, *sizes], dtype=x.dtype, device=x.device)
    if count_pads:
        # Pads count, the ceil-mode overhang past the end pads does not.
        explicit = [min(e, pads[i + n]) for i, e in enumerate(ends)]
        mask = F.pad(mask, torch_pad(begins + explicit), value=1.0)
        mask = F.pad(mask, torch_pad([0] * n + [e - x for e, x in zip(ends, explicit, strict=True)]))
    else:
        mask = F.pad(mask, torch_pad(begins + ends))
    return _sum_pool(x_pad, window), _sum_pool(mask, window)


def _avg_pool_supports(info: NodeInfo) -> str | None:
    return _pool_supports(info)


@register("AveragePool", supports=_avg_pool_supports)
def average_pool(info: NodeInfo) -> Callable[..., Any]:
    window = Window(info)
    kernel = window.kernel_shape()
    ceil = bool(info.attr("ceil_mode", 0))
    count_pads = bool(info.attr("count_include_pad", 0))
    fn = _AVG_POOL[window.spatial]

    def run(x: torch.Tensor) -> torch.Tensor:
        pads, ends = _pool_plan(window, x.shape[2:], ceil)
        if _channels_last_kernel_fits(x, kernel):
            return _channels_last_average_pool(x, kernel, window, pads, ends, count_pads)
        padding = _native_pool_ok(window, pads)
        if padding is not None and all(d == 1 for d in window.dilations):
            return fn(x, kernel, window.strides, padding, ceil, count_pads)
        sums, counts = _padded_sums(x, window, ceil, count_pads)
        return sums / counts

    return run


@register("LpPool", supports=_pool_supports)
def lp_pool(info: NodeInfo) -> Callable[..., Any]:
    window = Window(info)
    ceil = bool(info.attr("ceil_mode", 0))
    p = float(info.attr("p", 2))

    def run(x: torch.Tensor) -> torch.Tensor:
        sums, _ = _padded_sums(x.abs().pow(p), window, ceil, True)
        return sums.pow(1.0 / p)

    return run


def _global_supports(info: NodeInfo) -> str | None:
    rank = info.rank(0)  # an unknown rank is checked at run time
    if rank is not None and rank < 2:
        return f"{info.op_type} needs an input of rank >= 2 (got rank {rank})"
    return floats_only(info)


def _spatial_dims(info: NodeInfo, x: torch.Tensor) -> tuple[int, ...]:
    """The axes past N and C: from the rank shape inference found, else from ``x`` (an input
    declared without a shape), checked as the support check does for a known rank."""
    rank = info.rank(0)
    if rank is None:
        rank = x.dim()
        if rank < 2:
            raise CompileError(f"{info.op_type} needs an input of rank >= 2 (got rank {rank})")
    return tuple(range(2, rank))


@register("GlobalAveragePool", supports=_global_supports)
def global_average_pool(info: NodeInfo) -> Callable[..., Any]:
    def run(x: torch.Tensor) -> torch.Tensor:
        dims = _spatial_dims(info, x)
        return x.mean(dims, keepdim=True) if dims else x

    return run


@register("GlobalMaxPool", supports=_global_supports)
def global_max_pool(info: NodeInfo) -> Callable[..., Any]:
    def run(x: torch.Tensor) -> torch.Tensor:
        dims = _spatial_dims(info, x)
        return x.amax(dims, keepdim=True) if dims else x

    return run


@register("GlobalLpPool", supports=_global_supports)
def global_lp_pool(info: NodeInfo) -> Callable[..., Any]:
    p = float(info.attr("p", 2))

    def run(x: torch.Tensor) -> torch.Tensor:
        dims = _spatial_dims(info, x)
        return x.abs().pow(p).sum(dims, keepdim=True).pow(1.0 / p) if dims else x.abs()

    return run

