"""The calls a float model's fused chains run (planned by :mod:`..optimize`): a MatMul with its
bias Add as one GEMM, an attention chain as ``scaled_dot_product_attention``, and the layout moves
around channels-last convolutions."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

__all__ = ["contiguous", "linear", "scaled_dot_product_attention", "to_channels_last"]


def linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """``x @ weight + bias`` as one GEMM with the bias in its epilogue (weight is ONNX's K x N)."""
    return F.linear(x, weight.t(), bias)


def scaled_dot_product_attention(query: torch.Tensor, key_t: torch.Tensor, value: torch.Tensor,
                                 mask: torch.Tensor | None, scale: float) -> torch.Tensor:
    """``softmax(query @ key_t * scale + mask) @ value`` as one fused call (``key_t``: K transposed).

    The fused CUDA kernels take Q, K and V with a dense last dim only (else torch
    falls back to its unfused math): a K^T made contiguous as it is gets copied back.
    """
    if mask is not None and mask.dtype != query.dtype:
        mask = mask.to(query.dtype)
    query, key, value = (x if x.stride(-1) == 1 else x.contiguous()
                         for x in (query, key_t.transpose(-1, -2), value))
    return F.scaled_dot_product_attention(query, key, value, attn_mask=mask, scale=scale)


def to_channels_last(x: torch.Tensor) -> torch.Tensor:
    """``x`` in NHWC memory order (itself when it already is)."""
    return x.contiguous(memory_format=torch.channels_last)


def contiguous(x: Any) -> Any:
    """A graph output in plain row-major order, whatever layout the convolutions used."""
    return x.contiguous() if isinstance(x, torch.Tensor) else x
