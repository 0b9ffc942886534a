"""Lowerings: RotaryEmbedding (opset 23) and TensorScatter (opset 24), the KV-cache ops of
transformer decoders, as a few vectorized torch ops each (no per-token loop)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import onnx_ir as ir
import torch

from inferplex.devices.gpu.ops._common import (
    EXACT_DTYPES,
    FLOAT_DTYPES,
    attrs_reason,
    dtype_reason,
    first_reason,
    normalize_axis,
    text,
)
from inferplex.devices.gpu.registry import NodeInfo, register
from inferplex.errors import CompileError


def _rotary_supports(info: NodeInfo) -> str | None:
    reason = first_reason(attrs_reason(info, ("interleaved", "rotary_embedding_dim", "num_heads")),
                          dtype_reason(info, (0, 1, 2), FLOAT_DTYPES))
    rank = info.rank(0)
    if reason is None and rank is not None and rank not in (3, 4):
        return f"RotaryEmbedding input has rank {rank}; accepted: 3 or 4"
    if reason is None and rank == 3 and not info.attr("num_heads", 0):
        return "RotaryEmbedding on a 3-D input needs num_heads"
    return reason


@register("RotaryEmbedding", versions=(23, None), supports=_rotary_supports)
def _rotary_embedding(info: NodeInfo) -> Callable[..., Any]:
    interleaved = bool(info.attr("interleaved", 0))
    rotary_dim = int(info.attr("rotary_embedding_dim", 0))
    heads = int(info.attr("num_heads", 0))

    def rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
               position_ids: torch.Tensor | None = None) -> torch.Tensor:
        shape = x.shape
        # as [batch, seq, heads, head_size]
        x4 = x.transpose(1, 2) if x.dim() == 4 else x.reshape(shape[0], shape[1], heads, -1)
        dim = rotary_dim or x4.shape[-1]
        if position_ids is not None:
            cos, sin = cos[position_ids], sin[position_ids]
        out = rotate(x4, cos.unsqueeze(2), sin.unsqueeze(2), dim, interleaved)
        return out.transpose(1, 2) if x.dim() == 4 else out.reshape(shape)

    return rotary


def rotate(x4: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, dim: int,
           interleaved: bool) -> torch.Tensor:
    """The rotary embedding of (B, S, N, H) heads: their first ``dim`` features turn by the angles
    whose cosines and sines ``cos`` and ``sin`` hold (broadcast to (B, S, 1, dim / 2)), as (x1, x2)
    halves, or as even/odd pairs when ``interleaved``; the other features pass unchanged.  ONNX's
    RotaryEmbedding and ONNX Runtime's (and its GroupQueryAttention's) share it."""
    turned, keep = x4[..., :dim], x4[..., dim:]
    if interleaved:
        x1, x2 = turned[..., 0::2], turned[..., 1::2]
    else:
        x1, x2 = turned[..., : dim // 2], turned[..., dim // 2:]
    real, imag = cos * x1 - sin * x2, sin * x1 + cos * x2
    if interleaved:
        rotated = torch.stack((real, imag), dim=-1).reshape(turned.shape)
    else:
        rotated = torch.cat((real, imag), dim=-1)
    return torch.cat((rotated, keep), dim=-1)


def _tensor_scatter_supports(info: NodeInfo) -> str | None:
    reason = first_reason(attrs_reason(info, ("mode", "axis")), dtype_reason(info, (0, 1), EXACT_DTYPES),
                          dtype_reason(info, (2,), frozenset({ir.DataType.INT64})))
    if reason is not None:
        return reason
    if text(info.attr("mode", "linear")) not in ("linear", "circular"):
        return f"TensorScatter mode {info.attr('mode')!r} is not linear or circular"
    rank = info.rank(0)  # an unknown rank is told at run time
    if rank is not None and normalize_axis(int(info.attr("axis", -2)), rank) == 0:
        return "TensorScatter along the batch axis is not supported"
    return None


@register("TensorScatter", versions=(24, None), supports=_tensor_scatter_supports)
def _tensor_scatter(info: NodeInfo) -> Callable[..., Any]:
    circular = text(info.attr("mode", "linear")) == "circular"
    axis_attr = int(info.attr("axis", -2))

    def tensor_scatter(cache: torch.Tensor, update: torch.Tensor,
                       write_indices: torch.Tensor | None = None) -> torch.Tensor:
        axis = normalize_axis(axis_attr, cache.dim())
        if axis == 0:
            raise CompileError("TensorScatter along the batch axis is not supported")
        batch, length = update.shape[0], update.shape[axis]
        starts = (torch.zeros(batch, dtype=torch.int64, device=cache.device) if write_indices is None
                  else write_indices.reshape(batch, 1))
        positions = starts.reshape(batch, 1) + torch.arange(length, device=cache.device)
        if circular:
            positions = positions % cache.shape[axis]
        view = [batch] + [1] * (cache.dim() - 1)
        view[axis] = length
        index = positions.reshape(view).expand(update.shape)
        return cache.scatter(axis, index, update)

    return tensor_scatter
