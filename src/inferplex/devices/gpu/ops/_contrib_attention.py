"""Lowerings: ONNX Runtime's ``com.microsoft`` Attention (BERT/GPT-2 self-attention with the Q/K/V
projection merged in) and MultiHeadAttention (projected Q, K, V), on
``torch.nn.functional.scaled_dot_product_attention``.

The masks are ONNX Runtime's: a masked key adds ``mask_filter_value`` (default -10000) to its score
rather than removing it, so the probabilities are the ones its kernels give, fully masked rows
included.  ``mask_index``/``key_padding_mask`` may be (batch) key lengths (right padding), (2*batch)
end then start positions (left padding), a (batch, total_length) 0/1 mask or a (batch, length,
total_length) one; ``unidirectional`` adds float32's lowest value above the diagonal, offset by
the past length; ``attention_bias`` is added as it is.  The forms only ONNX Runtime's CUDA kernels
take (the Megatron 4-D mask, (3*batch+2) cumulative lengths, shared past/present buffers, rotary
inside Attention, packed Q/K/V, beam-search cache indirection) are refused, so that HETERO places
those nodes where they run.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

from inferplex.devices.gpu.ops._common import (
    FLOAT_DTYPES,
    INT_DTYPES,
    attrs_reason,
    dtype_reason,
    first_reason,
)
from inferplex.devices.gpu.registry import NodeInfo, register
from inferplex.errors import CompileError

_MS = "com.microsoft"
_DEFAULT_FILTER = -10000.0
_LOWEST = torch.finfo(torch.float32).min
"""What ONNX Runtime's CPU kernels add above the diagonal of a unidirectional mask: a masked key
outweighs any padded one (whose ``mask_filter_value`` is far smaller in magnitude by default)."""


def _mask_reason(info: NodeInfo, index: int) -> str | None:
    if not info.has_input(index):
        return None
    rank = info.rank(index)
    if rank == 4:
        return f"{info.op_type} with a 4-D (Megatron) mask is not supported; accepted: ranks 1 to 3"
    shape = info.input_shapes[index] if index < len(info.input_shapes) else None
    batch = info.input_shapes[0][0] if info.input_shapes and info.input_shapes[0] else None
    if rank == 1 and shape and isinstance(shape[0], int) and isinstance(batch, int) \
            and shape[0] not in (batch, 2 * batch):
        return f"{info.op_type} mask of shape ({shape[0]},) is not supported; accepted: (batch) or (2*batch)"
    return dtype_reason(info, (index,), INT_DTYPES)


def _key_bias(mask: torch.Tensor, batch: int, total: int, fill: float) -> torch.Tensor:
    """ONNX Runtime's additive mask, (batch, 1, 1 or length, total), float32."""
    zero = torch.zeros((), dtype=torch.float32, device=mask.device)
    filled = torch.full((), fill, dtype=torch.float32, device=mask.device)
    if mask.dim() == 1:
        keys = torch.arange(total, device=mask.device).reshape(1, total)
        masked = keys >= mask[:batch].reshape(batch, 1)
        if mask.shape[0] == 2 * batch:
            masked |= keys < mask[batch:].reshape(batch, 1)
        elif mask.shape[0] != batch:
            raise CompileError(f"attention mask of shape ({mask.shape[0]},) is not supported; "
                               f"accepted: ({batch},) key lengths or ({2 * batch},) end and start positions")
        return torch.where(masked, filled, zero).reshape(batch, 1, 1, total)
    if mask.dim() == 2:
        return torch.where(mask > 0, zero, filled).reshape(mask.shape[0], 1, 1, mask.shape[1])
    if mask.dim() == 3:
        return torch.where(mask > 0, zero, filled).unsqueeze(1)
    raise CompileError(f"attention mask of rank {mask.dim()} is not supported; accepted: ranks 1 to 3")


def _bias(q: torch.Tensor, total: int, past: int, mask: torch.Tensor | None, causal: bool,
          attention_bias: torch.Tensor | None, fill: float) -> torch.Tensor | None:
    """Everything added to Q.K' * scale, in Q's dtype (None: nothing)."""
    batch, length = q.shape[0], q.shape[2]
    bias = None if mask is None else _key_bias(mask, batch, total, fill)
    if causal:
        rows = torch.arange(length, device=q.device).reshape(length, 1) + past
        above = torch.arange(total, device=q.device).reshape(1, total) > rows
        upper = torch.where(above, _LOWEST, 0.0).to(torch.float32)
        bias = upper if bias is None else bias + upper
    if attention_bias is not None:
        bias = attention_bias.float() if bias is None else bias + attention_bias.float()
    if bias is None or q.dtype == torch.float32:
        return bias
    return bias.clamp(min=torch.finfo(q.dtype).min).to(q.dtype)


def _heads(x: torch.Tensor, heads: int) -> torch.Tensor:
    """(B, S, N*H) -> (B, N, S, H)."""
    return x.reshape(x.shape[0], x.shape[1], heads, -1).transpose(1, 2)


def _attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, bias: torch.Tensor | None,
            scale: float | None) -> torch.Tensor:
    """softmax(Q.K' * scale + bias).V on (B, N, S, H) tensors, as (B, S, N*Hv)."""
    y = F.scaled_dot_product_attention(q, k, v, attn_mask=bias, scale=scale)
    return y.transpose(1, 2).reshape(q.shape[0], q.shape[2], -1)


def _scale(info: NodeInfo) -> float | None:
    value = info.attr("scale")
    return None if value is None or float(value) == 0.0 else float(value)


def _attention_supports(info: NodeInfo) -> str | None:
    reason = first_reason(
        attrs_reason(info, ("num_heads", "qkv_hidden_sizes", "unidirectional", "scale", "mask_filter_value",
                            "do_rotary", "past_present_share_buffer", "rotary_embedding_dim")),
        dtype_reason(info, (0, 1, 2, 4, 5), FLOAT_DTYPES), _mask_reason(info, 3))
    if reason is None and int(info.attr("do_rotary", 0)):
        return "Attention with do_rotary=1 is not supported"
    if reason is None and (int(info.attr("past_present_share_buffer", 0)) or info.has_input(6)):
        return "Attention with a shared past/present buffer is not supported"
    if reason is None and info.rank(0) not in (3, None):
        return f"Attention input has rank {info.rank(0)}; accepted: 3"
    return reason


@register("Attention", domain=_MS, supports=_attention_supports)
def _attention(info: NodeInfo) -> Callable[..., Any]:
    heads = int(info.attr("num_heads"))
    sizes = info.attr("qkv_hidden_sizes")
    causal = bool(info.attr("unidirectional", 0))
    fill = float(info.attr("mask_filter_value", _DEFAULT_FILTER))
    scale = _scale(info)
    outputs = len(info.node.outputs)

    def run(x: torch.Tensor, weights: torch.Tensor, bias: torch.Tensor | None = None,
            mask: torch.Tensor | None = None, past: torch.Tensor | None = None,
            attention_bias: torch.Tensor | None = None) -> Any:
        qkv = torch.matmul(x, weights) if bias is None else torch.addmm(
            bias, x.reshape(-1, x.shape[-1]), weights).reshape(x.shape[0], x.shape[1], -1)
        split = [int(s) for s in sizes] if sizes else [qkv.shape[-1] // 3] * 3
        q, k, v = (_heads(t, heads) for t in torch.split(qkv, split, -1))
        past_length = 0
        if past is not None:
            past_length = past.shape[3]
            k, v = torch.cat((past[0], k), 2), torch.cat((past[1], v), 2)
        total = k.shape[2]
        y = _attend(q, k, v, _bias(q, total, past_length, mask, causal, attention_bias, fill), scale)
        return y if outputs == 1 else (y, torch.stack((k, v)))

    return run


def _mha_supports(info: NodeInfo) -> str | None:
    reason = first_reason(attrs_reason(info, ("num_heads", "unidirectional", "scale", "mask_filter_value")),
                          dtype_reason(info, (0, 1, 2, 3, 5, 6, 7), FLOAT_DTYPES), _mask_reason(info, 4))
    if reason is not None:
        return reason
    if not (info.has_input(1) and info.has_input(2)):
        return "MultiHeadAttention with packed Q/K/V (no key or value) is not supported"
    if info.has_input(8) or info.has_input(9):
        return "MultiHeadAttention with past_sequence_length or cache_indirection is not supported"
    if len([v for v in info.node.outputs if v is not None and v.name]) > 3 or len(info.node.outputs) > 3:
        return "MultiHeadAttention's qk output is not supported"
    for index in (0, 1, 2):
        if info.rank(index) not in (3, None):
            return (f"MultiHeadAttention input {index} has rank {info.rank(index)}; accepted: 3 "
                    "(packed or pre-projected forms are not supported)")
    return None


@register("MultiHeadAttention", domain=_MS, supports=_mha_supports)
def _multi_head_attention(info: NodeInfo) -> Callable[..., Any]:
    heads = int(info.attr("num_heads"))
    causal = bool(info.attr("unidirectional", 0))
    fill = float(info.attr("mask_filter_value", _DEFAULT_FILTER))
    scale = _scale(info)
    outputs = len(info.node.outputs)

    def run(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, bias: torch.Tensor | None = None,
            mask: torch.Tensor | None = None, attention_bias: torch.Tensor | None = None,
            past_key: torch.Tensor | None = None, past_value: torch.Tensor | None = None) -> Any:
        if query.dim() != 3 or key.dim() != 3 or value.dim() != 3:
            raise CompileError("MultiHeadAttention takes 3-D query, key and value; packed or "
                               "pre-projected forms are not supported")
        if bias is not None:
            q_size, k_size = query.shape[-1], key.shape[-1]
            query, key = query + bias[:q_size], key + bias[q_size:q_size + k_size]
            value = value + bias[q_size + k_size:]
        q, k, v = _heads(query, heads), _heads(key, heads), _heads(value, heads)
        past_length = 0
        if past_key is not None and past_value is not None:
            past_length = past_key.shape[2]
            k, v = torch.cat((past_key, k), 2), torch.cat((past_value, v), 2)
        y = _attend(q, k, v, _bias(q, k.shape[2], past_length, mask, causal, attention_bias, fill), scale)
        return y if outputs == 1 else (y, k, v)[:outputs]

    return run
