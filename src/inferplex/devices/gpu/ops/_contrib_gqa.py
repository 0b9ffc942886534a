"""Lowering: ONNX Runtime's ``com.microsoft`` GroupQueryAttention, the self-attention with a KV cache
of the LLMs that onnxruntime-genai runs (Phi-3, Llama, Qwen, Mistral, Gemma exports of its model
builder), as its contrib op spec and its CPU kernel define it.

The query is (B, S, N*H), or Q, K and V packed along the last dim; key and value hold ``kv_num_heads``
heads, each shared by ``num_heads / kv_num_heads`` query heads.  ``seqlens_k[b]`` is batch entry
``b``'s total length minus one (right padding of a batch), ``total_sequence_length`` the longest.
A step is the *first prompt* when ``S == total_sequence_length``: its tokens sit at positions
``0..S-1``; otherwise entry ``b``'s new tokens follow its ``seqlens_k[b] + 1 - S`` cached ones.
The present caches are (B, kv_num_heads, max(total_sequence_length, past length), H): the valid
past rows, then the new ones, zeros after them (as ONNX Runtime writes present buffers that are
not the past ones).  A query row attends to the keys of its entry's length; with ``causal`` (the
default) only up to its own position, and with a positive ``local_window_size`` W only to the W
keys ending there.  ``do_rotary`` rotates Q and K by the caches' rows at those positions (or at
``position_ids``).

Scores are ``softcap * tanh(Q.K' * scale / softcap)`` (the cap only where ``softcap`` is
positive), plus ``attention_bias``; ``smooth_softmax`` and ``head_sink`` add one more logit (0, or
the head's sink) to each softmax's denominator; ``output_qk`` holds the scores (``qk_output=1``) or
the probabilities (2), zeros at the keys a row does not see.  Plain forms run on
``scaled_dot_product_attention`` with its grouped-query mode; the others on two grouped matmuls in
float32.  Rows of a prompt's padding are computed but mean nothing (ONNX Runtime leaves them
unspecified).  The total length is read on the host (it sizes the caches), so the node runs
eagerly.  Quantized caches, per-head Q/K normalization, ``query_seqlens`` and window-sized caches
are refused, so that HETERO places such nodes where they run.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

from inferplex.devices.gpu.ops._common import (
    FLOAT_DTYPES,
    attrs_reason,
    dtype_reason,
    eager,
    first_reason,
    host_ints,
    text,
)
from inferplex.devices.gpu.ops._contrib_attention import _scale
from inferplex.devices.gpu.ops.contrib_transformer import rotate_heads
from inferplex.devices.gpu.registry import NodeInfo, register
from inferplex.errors import CompileError

_MS = "com.microsoft"

_ATTRIBUTES = ("num_heads", "kv_num_heads", "scale", "softcap", "local_window_size", "do_rotary",
               "rotary_interleaved", "smooth_softmax", "causal", "qk_output", "sliding_window_cache",
               "k_quant_type", "v_quant_type", "kv_cache_bit_width", "qk_norm_epsilon", "q_norm_epsilon",
               "k_norm_epsilon")

_REFUSED_INPUTS = {12: "k_scale (a quantized KV cache)", 13: "v_scale (a quantized KV cache)",
                   14: "q_norm_weight (per-head Q/K normalization)",
                   15: "k_norm_weight (per-head Q/K normalization)",
                   16: "query_seqlens (padded query chunks)"}
"""Optional inputs of the newer spec that this lowering does not compute."""


def _form_reason(info: NodeInfo) -> str | None:
    """Why the node's form (attributes, optional inputs and outputs) is not computed here."""
    heads, kv_heads = int(info.attr("num_heads", 0)), int(info.attr("kv_num_heads", 0))
    if heads <= 0 or kv_heads <= 0 or heads % kv_heads:
        return (f"GroupQueryAttention needs num_heads a positive multiple of kv_num_heads; got {heads} and "
                f"{kv_heads}")
    for index, what in _REFUSED_INPUTS.items():
        if info.has_input(index):
            return f"GroupQueryAttention with {what} is not supported"
    if int(info.attr("sliding_window_cache", 0)):
        return "GroupQueryAttention with sliding_window_cache=1 (window-sized caches) is not supported"
    for name in ("k_quant_type", "v_quant_type"):
        if text(info.attr(name, "NONE")).upper() not in ("", "NONE"):
            return (f"GroupQueryAttention with {name}={text(info.attr(name))} is not supported; "
                    "accepted: NONE")
    qk_output = int(info.attr("qk_output", 0))
    if qk_output not in (0, 1, 2):
        return f"GroupQueryAttention with qk_output={qk_output} is not supported; accepted: 0, 1, 2"
    if not qk_output and len(info.node.outputs) > 3 and info.node.outputs[3] is not None:
        return "GroupQueryAttention's output_qk needs qk_output 1 or 2"
    if int(info.attr("causal", 1)) not in (0, 1):
        return f"GroupQueryAttention with causal={info.attr('causal')} is not supported; accepted: 0, 1"
    if not int(info.attr("causal", 1)) and int(info.attr("local_window_size", -1)) > 0:
        return "GroupQueryAttention with causal=0 takes no local_window_size"
    if int(info.attr("do_rotary", 0)) and not (info.has_input(7) and info.has_input(8)):
        return "GroupQueryAttention with do_rotary=1 needs cos_cache and sin_cache"
    if info.has_input(1) != info.has_input(2) or info.has_input(3) != info.has_input(4):
        return "GroupQueryAttention needs key with value and past_key with past_value (both or neither)"
    if not (info.has_input(5) and info.has_input(6)):
        return "GroupQueryAttention needs seqlens_k and total_sequence_length"
    if info.rank(0) not in (3, None):
        return f"GroupQueryAttention query has rank {info.rank(0)}; accepted: 3"
    return None


def _gqa_supports(info: NodeInfo) -> str | None:
    return first_reason(attrs_reason(info, _ATTRIBUTES), dtype_reason(info, (0, 1, 2, 3, 4, 7, 8, 10, 11),
                                                                      FLOAT_DTYPES),
                        _form_reason(info))


def _split(query: torch.Tensor, key: torch.Tensor | None, value: torch.Tensor | None, heads: int,
           kv_heads: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Q (B, S, N, H), K and V (B, S, N_kv, H) from separate or packed inputs."""
    batch, length = query.shape[0], query.shape[1]
    if key is None or value is None:
        head_size = query.shape[2] // (heads + 2 * kv_heads)
        q, k, v = torch.split(query, [heads * head_size, kv_heads * head_size, kv_heads * head_size], -1)
    else:
        q, k, v = query, key, value
    return (q.reshape(batch, length, heads, -1), k.reshape(batch, length, kv_heads, -1),
            v.reshape(batch, length, kv_heads, -1))


def _positions(starts: torch.Tensor, length: int, position_ids: torch.Tensor | None,
               first: bool) -> torch.Tensor:
    """Each new token's position, (B, S) int64: ``position_ids`` where given (only its first element,
    the start, in a first prompt), else each entry's past length plus the token's index."""
    steps = torch.arange(length, device=starts.device).reshape(1, length)
    if position_ids is None:
        return starts.reshape(-1, 1) + steps
    if first:
        return position_ids.reshape(-1)[:1].long().reshape(1, 1) + steps
    return position_ids.long()


def _cache(past: torch.Tensor | None, new: torch.Tensor, starts: torch.Tensor, total: int) -> torch.Tensor:
    """The present cache (B, N_kv, total, H): each entry's ``starts[b]`` past rows, its new rows
    (B, N_kv, S, H) after them, zeros after those."""
    batch, kv_heads, length, head_size = new.shape
    rows = torch.arange(total, device=new.device).reshape(1, total)
    start = starts.reshape(batch, 1)
    index = (rows - start).clamp(0, length - 1).reshape(batch, 1, total, 1)
    placed = new.gather(2, index.expand(batch, kv_heads, total, head_size))
    is_new = ((rows >= start) & (rows < start + length)).reshape(batch, 1, total, 1)
    if past is None:
        return torch.where(is_new, placed, torch.zeros((), dtype=new.dtype, device=new.device))
    kept = past[:, :, :total]
    if kept.shape[2] < total:
        kept = F.pad(kept, (0, 0, 0, total - kept.shape[2]))
    is_past = (rows < start).reshape(batch, 1, total, 1)
    kept = torch.where(is_past, kept, torch.zeros((), dtype=new.dtype, device=new.device))
    return torch.where(is_new, placed, kept)


def _allowed(starts: torch.Tensor, lengths: torch.Tensor, length: int, total: int, window: int,
             causal: bool) -> torch.Tensor:
    """Which keys each query row sees, (B, 1, S, total) bool: within its entry's length, and where
    ``causal`` up to its own position and within the local window.  A row that would see none
    (prompt padding) sees key 0, so that it stays finite."""
    rows = starts.reshape(-1, 1, 1) + torch.arange(length, device=starts.device).reshape(1, length, 1)
    keys = torch.arange(total, device=starts.device).reshape(1, 1, total)
    allowed = keys < lengths.reshape(-1, 1, 1)
    if causal:
        allowed = allowed & (keys <= rows)
    if window > 0:
        allowed &= keys > rows - window
    allowed[..., 0] |= ~allowed.any(-1)
    return allowed.unsqueeze(1)


def _grouped_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, allowed: torch.Tensor,
                       bias: torch.Tensor | None, scale: float, softcap: float,
                       sink: torch.Tensor | None, qk_output: int) -> tuple[torch.Tensor, torch.Tensor | None]:
    """softmax(cap(Q.K' * scale) + bias).V in float32 on (B, N, S, H) Q and (B, N_kv, T, H) K, V,
    with ``sink`` (B or 1, N, S or 1, 1) as an extra logit of each softmax (None: none); and the
    ``output_qk`` of ``qk_output`` (1: the scores fed to the softmax, 2: the probabilities; zeros at
    keys a row does not see), in Q's dtype, or None for 0."""
    batch, heads, length, head_size = q.shape
    kv_heads, total = k.shape[1], k.shape[2]
    grouped = q.float().reshape(batch, kv_heads, -1, head_size)
    scores = torch.matmul(grouped, k.float().transpose(-1, -2)).reshape(batch, heads, length, total) * scale
    if softcap > 0.0:
        scores = torch.tanh(scores / softcap) * softcap
    if bias is not None:
        scores = scores + bias.float()
    raw = None if qk_output != 1 else scores.masked_fill(~allowed, 0.0).to(q.dtype)
    scores = scores.masked_fill(~allowed, float("-inf"))
    if sink is None:
        probs = torch.softmax(scores, -1)
    else:
        extra = sink.float().expand(batch, heads, length, 1)
        probs = torch.softmax(torch.cat((scores, extra), -1), -1)[..., :total]
    out = torch.matmul(probs.reshape(batch, kv_heads, -1, total), v.float())
    qk = probs.to(q.dtype) if qk_output == 2 else raw
    return out.reshape(batch, heads, length, -1).to(q.dtype), qk


_HAS_ENABLE_GQA = tuple(int(part) for part in torch.__version__.split(".")[:2]) >= (2, 5)
"""Whether ``scaled_dot_product_attention`` takes ``enable_gqa`` (torch 2.5 on)."""


def _sdpa(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor,
          scale: float) -> torch.Tensor:
    """Attention of (B, N, S, H) Q over (B, N_kv, T, H) K and V, each K/V head serving ``N / N_kv``
    consecutive query heads: SDPA's grouped-query mode, or repeated K/V heads before torch 2.5."""
    if q.shape[1] == k.shape[1]:
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale)
    if _HAS_ENABLE_GQA:
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale, enable_gqa=True)
    group = q.shape[1] // k.shape[1]
    return F.scaled_dot_product_attention(q, k.repeat_interleave(group, 1), v.repeat_interleave(group, 1),
                                          attn_mask=mask, scale=scale)


def _padded_bias(bias: torch.Tensor | None, total: int) -> torch.Tensor | None:
    """attention_bias (B or 1, N or 1, S, total_sequence_length) widened with zeros to the cache."""
    if bias is None or bias.shape[-1] == total:
        return bias
    if bias.shape[-1] > total:
        raise CompileError(f"GroupQueryAttention attention_bias has {bias.shape[-1]} key columns; accepted: "
                           f"at most total_sequence_length ({total})")
    return F.pad(bias, (0, total - bias.shape[-1]))


@register("GroupQueryAttention", domain=_MS, supports=_gqa_supports)
def _group_query_attention(info: NodeInfo) -> Callable[..., Any]:
    heads, kv_heads = int(info.attr("num_heads")), int(info.attr("kv_num_heads"))
    scale_attr = _scale(info)
    softcap = float(info.attr("softcap", 0.0))
    window = int(info.attr("local_window_size", -1))
    rotary = bool(info.attr("do_rotary", 0))
    interleaved = bool(info.attr("rotary_interleaved", 0))
    smooth = bool(info.attr("smooth_softmax", 0))
    causal = bool(info.attr("causal", 1))
    qk_output = int(info.attr("qk_output", 0))
    outputs = len(info.node.outputs)

    @eager
    def run(query: torch.Tensor, key: torch.Tensor | None, value: torch.Tensor | None,
            past_key: torch.Tensor | None, past_value: torch.Tensor | None, seqlens_k: torch.Tensor,
            total_sequence_length: torch.Tensor, cos: torch.Tensor | None = None,
            sin: torch.Tensor | None = None, position_ids: torch.Tensor | None = None,
            attention_bias: torch.Tensor | None = None, head_sink: torch.Tensor | None = None) -> Any:
        batch, length = query.shape[0], query.shape[1]
        total_max = host_ints(total_sequence_length)[0]
        first = length == total_max
        lengths = seqlens_k.reshape(-1).long() + 1
        starts = torch.zeros_like(lengths) if first else lengths - length
        q, k, v = _split(query, key, value, heads, kv_heads)
        if rotary and cos is not None and sin is not None:
            ids = _positions(starts, length, position_ids, first)
            q = rotate_heads(q, ids, cos, sin, 2 * cos.shape[-1], interleaved)
            k = rotate_heads(k, ids, cos, sin, 2 * cos.shape[-1], interleaved)
        total = max(total_max, 0 if past_key is None else past_key.shape[2])
        present_key = _cache(past_key, k.transpose(1, 2), starts, total)
        present_value = _cache(past_value, v.transpose(1, 2), starts, total)
        allowed = _allowed(starts, lengths, length, total, window, causal)
        bias = _padded_bias(attention_bias, total)
        scale = scale_attr if scale_attr is not None else q.shape[-1] ** -0.5
        q = q.transpose(1, 2)
        qk = None
        if softcap > 0.0 or smooth or head_sink is not None or qk_output:
            sink = None if head_sink is None else head_sink.reshape(1, heads, 1, 1)
            if sink is None and smooth:
                sink = torch.zeros((1, heads, 1, 1), dtype=torch.float32, device=q.device)
            y, qk = _grouped_attention(q, present_key, present_value, allowed, bias, scale, softcap, sink,
                                       qk_output)
        else:
            mask: torch.Tensor = allowed
            if bias is not None:
                mask = bias.to(q.dtype).masked_fill(~allowed, float("-inf"))
            y = _sdpa(q, present_key, present_value, mask, scale)
        out = y.transpose(1, 2).reshape(batch, length, -1)
        return out if outputs == 1 else (out, present_key, present_value, qk)[:outputs]

    return run
