"""Lowering: Attention (opset 23+), step by step as ONNX's reference computes it.

Scaled dot product with ONNX's details kept: the scale is split as sqrt(scale)
on Q and on K, the optional softcap is applied before the mask, boolean masks
become 0/-inf biases padded to the key length, causal masking is aligned to the
bottom right (offset by the past length, or per batch by
``nonpad_kv_seqlen - q_len``), rows with every key masked give zeros, grouped
query heads repeat K/V, and ``qk_matmul_output_mode`` picks which intermediate
the fourth output holds (as ONNX Runtime does: 0 the scaled product before any
softcap, 1 after the softcap, 2 after the mask too, 3 the probabilities).
Sliding windows (``left_window_size``/``right_window_size``) bound each query's
keys around its position, aligned like the causal mask.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import onnx_ir as ir
import torch

from inferplex.devices.gpu.registry import NodeInfo, register
from inferplex.errors import CompileError

_FLOATS = (ir.DataType.FLOAT, ir.DataType.DOUBLE, ir.DataType.FLOAT16, ir.DataType.BFLOAT16)
_SOFTMAX_TYPES = {1: torch.float32, 10: torch.float16, 11: torch.float64, 16: torch.bfloat16}


def _supports(info: NodeInfo) -> str | None:
    for index in (0, 1, 2):
        dtype = info.input_dtypes[index] if index < len(info.input_dtypes) else None
        if dtype is not None and dtype not in _FLOATS:
            return f"Attention input {index} is {dtype.name}; accepted: floating types"
    for name in ("left_window_size", "right_window_size"):
        if int(info.attr(name, -1)) < -1:
            return f"Attention {name} {info.attr(name)} is not -1 or a size"
    precision = info.attr("softmax_precision")
    if precision is not None and int(precision) not in _SOFTMAX_TYPES:
        return f"Attention softmax_precision {precision} is not supported"
    if info.rank(0) not in (3, 4, None):  # an unknown rank is told at run time
        return f"Attention Q has rank {info.rank(0)}; accepted: 3 or 4"
    if info.rank(0) == 3 and not (info.attr("q_num_heads") and info.attr("kv_num_heads")):
        return "Attention on 3-D inputs needs q_num_heads and kv_num_heads"
    return None


def _heads(x: torch.Tensor, heads: int) -> torch.Tensor:
    """(B, S, H*D) -> (B, H, S, D)."""
    return x.reshape(x.shape[0], x.shape[1], heads, -1).transpose(1, 2)


def _causal(q_len: int, kv_len: int, offset: Any, like: torch.Tensor) -> torch.Tensor:
    i = torch.arange(q_len, device=like.device).reshape(q_len, 1)
    j = torch.arange(kv_len, device=like.device).reshape(1, kv_len)
    if isinstance(offset, torch.Tensor):
        allowed = j <= i + offset.reshape(-1, 1, 1)
        return torch.where(allowed, 0.0, -math.inf).to(like.dtype).unsqueeze(1)
    return torch.where(j <= i + offset, 0.0, -math.inf).to(like.dtype)


def _window(q_len: int, kv_len: int, window: tuple[int, int], offset: Any,
            like: torch.Tensor) -> torch.Tensor:
    """0 where a query at position ``offset + i`` may see key ``j`` (within ``left`` before and
    ``right`` after it; -1: unbounded), else -inf."""
    left, right = window
    i = torch.arange(q_len, device=like.device).reshape(q_len, 1)
    j = torch.arange(kv_len, device=like.device).reshape(1, kv_len)
    per_batch = isinstance(offset, torch.Tensor)
    diff = (i + (offset.reshape(-1, 1, 1) if per_batch else offset)) - j
    allowed = torch.ones_like(diff, dtype=torch.bool)
    if left >= 0:
        allowed &= diff <= left
    if right >= 0:
        allowed &= -diff <= right
    bias = torch.where(allowed, 0.0, -math.inf).to(like.dtype)
    return bias.unsqueeze(1) if per_batch else bias


def _bias(q: torch.Tensor, kv_len: int, mask: torch.Tensor | None, causal: bool,
          past: int, nonpad: torch.Tensor | None, window: tuple[int, int] = (-1, -1)) -> torch.Tensor:
    q_len = q.shape[2]
    bias = torch.zeros((q_len, kv_len), dtype=q.dtype, device=q.device)
    if mask is not None and mask.shape[-1] < kv_len:
        pad = torch.full((*mask.shape[:-1], kv_len - mask.shape[-1]),
                         False if mask.dtype == torch.bool else -math.inf, dtype=mask.dtype, device=q.device)
        mask = torch.cat([mask, pad], -1)
    if mask is not None and mask.dtype == torch.bool:
        mask = torch.where(mask, 0.0, -math.inf).to(q.dtype)
    if causal:
        base = bias if mask is None else mask
        offset: Any = past if nonpad is None or past else nonpad.reshape(-1) - q_len
        bias = base + _causal(q_len, kv_len, offset, q)
    elif mask is not None:
        bias = bias + mask
    if window != (-1, -1):
        offset = past if nonpad is None or past else nonpad.reshape(-1) - q_len
        bias = bias + _window(q_len, kv_len, window, offset, q)
    if nonpad is not None:
        keep = torch.arange(kv_len, device=q.device) < nonpad.reshape(-1, 1)
        bias = bias + torch.where(keep, 0.0, -math.inf).to(bias.dtype).reshape(q.shape[0], 1, 1, kv_len)
    return bias


def _softmax(x: torch.Tensor) -> torch.Tensor:
    """Softmax that gives zeros (not NaN) for rows where every key is masked."""
    top = x.amax(-1, keepdim=True)
    top = torch.where(torch.isneginf(top), torch.zeros_like(top), top)
    e = torch.exp(x - top)
    total = e.sum(-1, keepdim=True)
    return e / torch.where(total == 0, torch.ones_like(total), total)


@register("Attention", versions=(23, None), supports=_supports)
def attention(info: NodeInfo) -> Callable[..., Any]:
    scale_attr = info.attr("scale")
    causal = bool(info.attr("is_causal", 0))
    q_heads, kv_heads = info.attr("q_num_heads"), info.attr("kv_num_heads")
    softcap = info.attr("softcap")
    mode = int(info.attr("qk_matmul_output_mode", 0))
    precision = info.attr("softmax_precision")
    outputs = len(info.node.outputs)
    window = (int(info.attr("left_window_size", -1)), int(info.attr("right_window_size", -1)))

    def run(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None = None,
            past_key: torch.Tensor | None = None, past_value: torch.Tensor | None = None,
            nonpad: torch.Tensor | None = None) -> Any:
        rank3 = q.dim() == 3
        if rank3:
            if not (q_heads and kv_heads):
                raise CompileError("Attention on 3-D inputs needs q_num_heads and kv_num_heads")
            q, k, v = _heads(q, int(q_heads)), _heads(k, int(kv_heads)), _heads(v, int(kv_heads))
        scale = float(scale_attr) if scale_attr is not None else 1 / math.sqrt(q.shape[3])
        root = torch.tensor(math.sqrt(scale), dtype=q.dtype).item()
        present_key = k if past_key is None else torch.cat([past_key, k], 2)
        present_value = v if past_value is None else torch.cat([past_value, v], 2)
        past = 0 if past_key is None else past_key.shape[2]
        bias = _bias(q, present_key.shape[2], mask, causal, past, nonpad, window)
        keys, values = present_key, present_value
        if q.shape[1] != keys.shape[1] and q.shape[1] % keys.shape[1] == 0:
            repeat = q.shape[1] // keys.shape[1]
            keys, values = keys.repeat_interleave(repeat, 1), values.repeat_interleave(repeat, 1)
        raw = qk = torch.matmul(q * root, (keys * root).transpose(2, 3))
        if softcap is not None and float(softcap) > 0:
            qk = torch.tanh(qk / float(softcap)) * float(softcap)
        with_bias = qk + bias
        qk_out = (raw, qk, with_bias)[mode] if mode < 3 else qk
        probs = _softmax(with_bias.to(_SOFTMAX_TYPES[int(precision)]) if precision is not None else with_bias)
        probs = torch.where(torch.isneginf(bias.amax(-1, keepdim=True)), torch.zeros_like(probs), probs)
        if mode == 3:
            qk_out = probs
        y = torch.matmul(probs.to(q.dtype), values)
        if rank3:
            y = y.transpose(1, 2).reshape(y.shape[0], y.shape[2], -1)
        if outputs == 1:
            return y
        return (y, present_key, present_value, qk_out.to(q.dtype))[:outputs]

    return run
