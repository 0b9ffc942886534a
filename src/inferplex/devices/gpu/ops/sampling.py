"""Lowerings: GridSample, AffineGrid and Col2Im, on torch's ``grid_sample``, ``affine_grid`` and ``fold``.

ONNX's GridSample is torch's ``grid_sample``: the same normalized ``[-1, 1]``
coordinates with the last grid axis ordered (x, y[, z]), the same
``align_corners`` meaning, the same padding modes (zeros, border, reflection),
nearest rounding half to even and the same cubic kernel (A = -0.75).  Opset 20
renamed the modes ``linear``/``cubic``; both spellings map here.  torch samples
cubically only in 2-D and linearly or nearest in 2-D and 3-D, so other ranks and
combinations are refused: at compile, or at run time where shape inference lost
the input's rank.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from inferplex.devices.gpu.ops._common import (
    FLOAT_DTYPES,
    attrs_reason,
    const_ints,
    dtype_reason,
    eager,
    first_reason,
    host_ints,
    text,
)
from inferplex.devices.gpu.registry import NodeInfo, register
from inferplex.errors import CompileError

_MODES = {"bilinear": "bilinear", "linear": "bilinear", "nearest": "nearest", "bicubic": "bicubic",
          "cubic": "bicubic"}
_PADDING = ("zeros", "border", "reflection")


def _grid_sample_supports(info: NodeInfo) -> str | None:
    reason = first_reason(attrs_reason(info, ("mode", "padding_mode", "align_corners")),
                          dtype_reason(info, (0, 1), FLOAT_DTYPES))
    if reason is not None:
        return reason
    mode = text(info.attr("mode", "bilinear" if info.opset < 20 else "linear"))
    padding = text(info.attr("padding_mode", "zeros"))
    if mode not in _MODES:
        return f"GridSample mode {mode!r} is not one of {', '.join(_MODES)}"
    if padding not in _PADDING:
        return f"GridSample padding_mode {padding!r} is not one of {', '.join(_PADDING)}"
    rank = info.rank(0)  # an unknown rank is checked at run time
    if rank is not None and (rank not in (4, 5) or (rank == 5 and _MODES[mode] == "bicubic")):
        return (f"GridSample {mode} on a rank-{rank} input is not supported "
                "(torch: 4-D, or 5-D linear/nearest)")
    if info.input_dtypes[0] is not None and info.input_dtypes[0] != info.input_dtypes[1]:
        return "GridSample with different input and grid element types is not supported"
    return None


@register("GridSample", versions=(16, None), supports=_grid_sample_supports)
def _grid_sample(info: NodeInfo) -> Callable[..., Any]:
    mode = _MODES[text(info.attr("mode", "bilinear" if info.opset < 20 else "linear"))]
    padding = text(info.attr("padding_mode", "zeros"))
    align = bool(info.attr("align_corners", 0))

    def grid_sample(x: torch.Tensor, grid: torch.Tensor) -> torch.Tensor:
        if x.dim() not in (4, 5) or (x.dim() == 5 and mode == "bicubic"):  # a rank unknown at compile
            raise CompileError(f"GridSample {mode} on a rank-{x.dim()} input is not supported "
                               "(torch: 4-D, or 5-D linear/nearest)")
        return F.grid_sample(x, grid, mode=mode, padding_mode=padding, align_corners=align)

    return grid_sample


def _affine_grid_supports(info: NodeInfo) -> str | None:
    reason = first_reason(attrs_reason(info, ("align_corners",)), dtype_reason(info, (0,), FLOAT_DTYPES))
    if reason is not None:
        return reason
    size = const_ints(info, 1)
    if size is not None and len(size) not in (4, 5):
        return f"AffineGrid size has {len(size)} values; accepted: 4 (2-D) or 5 (3-D)"
    return None


@register("AffineGrid", versions=(20, None), supports=_affine_grid_supports)
def _affine_grid(info: NodeInfo) -> Callable[..., Any]:
    align = bool(info.attr("align_corners", 0))
    size = const_ints(info, 1)

    def affine_grid(theta: torch.Tensor, dims: torch.Tensor) -> torch.Tensor:
        shape = size if size is not None else host_ints(dims)
        return F.affine_grid(theta, list(shape), align_corners=align)

    return affine_grid if size is not None else eager(affine_grid)


def _col2im_supports(info: NodeInfo) -> str | None:
    return first_reason(attrs_reason(info, ("dilations", "pads", "strides")),
                        dtype_reason(info, (0,), FLOAT_DTYPES))


@register("Col2Im", versions=(18, None), supports=_col2im_supports)
def _col2im(info: NodeInfo) -> Callable[..., Any]:
    image, block = const_ints(info, 1), const_ints(info, 2)
    attrs = (info.attr("dilations"), info.attr("strides"), info.attr("pads"))
    cache: dict[tuple[Any, ...], Callable[..., torch.Tensor]] = {}

    def col2im(x: torch.Tensor, image_shape: torch.Tensor, block_shape: torch.Tensor) -> torch.Tensor:
        dims = tuple(image if image is not None else host_ints(image_shape))
        kernel = tuple(block if block is not None else host_ints(block_shape))
        key = (dims, kernel, x.device)
        fn = cache.get(key)
        if fn is None:
            fn = cache[key] = _col2im_for(list(dims), list(kernel), *attrs, x.device)
        return fn(x)

    return col2im if image is not None and block is not None else eager(col2im)


def _col2im_for(image: list[int], block: list[int], dilations: list[int] | None, strides: list[int] | None,
                pads: list[int] | None, device: torch.device) -> Callable[[torch.Tensor], torch.Tensor]:
    """Col2Im for one image and block shape: torch's ``fold`` in 2-D with symmetric pads, else a
    scatter-add of every block position into the padded image."""
    dims = len(image)
    dilations, strides = dilations or [1] * dims, strides or [1] * dims
    pads = pads or [0] * (2 * dims)
    if dims == 2 and pads[:2] == pads[2:]:
        return lambda x: F.fold(x, tuple(image), tuple(block), dilation=tuple(dilations),
                                padding=tuple(pads[:2]), stride=tuple(strides))
    padded = [image[d] + pads[d] + pads[d + dims] for d in range(dims)]
    counts = [(padded[d] - (dilations[d] * (block[d] - 1) + 1)) // strides[d] + 1 for d in range(dims)]
    # For every (kernel offset, block position) pair, the flat index in the padded image.
    grids = torch.meshgrid(*[torch.arange(k) for k in block], *[torch.arange(c) for c in counts],
                           indexing="ij")
    flat = torch.zeros((), dtype=torch.int64)
    for d in range(dims):
        flat = flat * padded[d] + grids[d] * dilations[d] + grids[dims + d] * strides[d]
    index = flat.reshape(-1).to(device)
    kernel_size, padded_size = int(np.prod(block)), int(np.prod(padded))
    crop = tuple(slice(pads[d], pads[d] + image[d]) for d in range(dims))

    def scatter(x: torch.Tensor) -> torch.Tensor:
        n, channels = x.shape[0], x.shape[1] // kernel_size
        out = x.new_zeros((n, channels, padded_size))
        out.index_add_(2, index, x.reshape(n, channels, -1))
        return out.reshape(n, channels, *padded)[(slice(None), slice(None), *crop)]

    return scatter


# --- DeformConv ----------------------------------------------------------------------------


def _deform_conv_supports(info: NodeInfo) -> str | None:
    reason = first_reason(attrs_reason(info, ("dilations", "group", "kernel_shape", "offset_group", "pads",
                                              "strides")),
                          dtype_reason(info, (0, 1, 2, 3, 4), FLOAT_DTYPES))
    rank = info.rank(0)
    if reason is None and rank is not None and rank != 4:
        return f"DeformConv on a rank-{rank} input is not supported (accepted: 2-D images, rank 4)"
    return reason


@register("DeformConv", versions=(19, None), supports=_deform_conv_supports)
def _deform_conv(info: NodeInfo) -> Callable[..., Any]:
    group, offset_group = int(info.attr("group", 1)), int(info.attr("offset_group", 1))
    strides = list(info.attr("strides", [1, 1]))
    dilations = list(info.attr("dilations", [1, 1]))
    pads = list(info.attr("pads", [0, 0, 0, 0]))

    def deform_conv(x: torch.Tensor, w: torch.Tensor, offset: torch.Tensor, bias: torch.Tensor | None = None,
                    mask: torch.Tensor | None = None) -> torch.Tensor:
        """Bilinear samples at each kernel tap moved by its offset (zero outside the image), weighted by
        the mask, then one grouped matmul with the weights.  Positions and samples are computed in
        float64: grid_sample's normalized coordinates would otherwise round a tap that falls exactly
        on a pixel into a sliver of its neighbour."""
        n, channels, height, width = x.shape
        out_channels, _, kh, kw = w.shape
        oh, ow = offset.shape[2], offset.shape[3]
        taps = kh * kw
        dev, dtype = x.device, torch.float64
        out_dtype, x, offset = x.dtype, x.to(dtype), offset.to(dtype)
        tap_rows = (torch.arange(kh, device=dev, dtype=dtype) * dilations[0]).repeat_interleave(kw)
        tap_cols = (torch.arange(kw, device=dev, dtype=dtype) * dilations[1]).repeat(kh)
        rows = (torch.arange(oh, device=dev, dtype=dtype) * strides[0] - pads[0]).view(1, oh, 1) \
            + tap_rows.view(taps, 1, 1)
        cols = (torch.arange(ow, device=dev, dtype=dtype) * strides[1] - pads[1]).view(1, 1, ow) \
            + tap_cols.view(taps, 1, 1)
        moves = offset.view(n, offset_group, taps, 2, oh, ow)
        ys, xs = rows + moves[:, :, :, 0], cols + moves[:, :, :, 1]
        # pixel coordinates -> grid_sample's normalized ones (align_corners=False: pixel centres)
        grid = torch.stack(((2 * xs + 1) / width - 1, (2 * ys + 1) / height - 1), dim=-1)
        grid = grid.view(n * offset_group, taps * oh, ow, 2)
        images = x.reshape(n * offset_group, channels // offset_group, height, width)
        sampled = F.grid_sample(images, grid, mode="bilinear", padding_mode="zeros", align_corners=False)
        sampled = sampled.view(n, offset_group, channels // offset_group, taps, oh, ow)
        if mask is not None:
            sampled = sampled * mask.to(dtype).view(n, offset_group, 1, taps, oh, ow)
        sampled = sampled.to(out_dtype)
        columns = sampled.reshape(n, group, (channels // group) * taps, oh * ow)
        weights = w.reshape(group, out_channels // group, (channels // group) * taps)
        out = torch.einsum("gok,ngkl->ngol", weights, columns).reshape(n, out_channels, oh, ow)
        return out if bias is None else out + bias.view(1, -1, 1, 1)

    return deform_conv
