"""Lowerings: ONNX Runtime's fused transformer ops (domain ``com.microsoft``) and the two it registers
in the ONNX domain, as its contrib op spec (``docs/ContribOperators.md``) and its CPU kernels define
them (the CUDA kernel for BiasAdd and BiasSoftmax, which have no other).

Models that ``onnxruntime.transformers.optimizer.optimize_model`` or Hugging Face Optimum optimized
hold these: GELU variants with the bias folded in (Gelu, BiasGelu, FastGelu, QuickGelu), BiasAdd,
BiasSoftmax, SkipLayerNormalization and SkipSimplifiedLayerNormalization (the residual Add and the
normalization of a block), SimplifiedLayerNormalization (RMS normalization) and LayerNormalization
before opset 17 (ONNX Runtime's own, in the ONNX domain), EmbedLayerNormalization (BERT's three
embedding lookups and their normalization), FusedMatMul/FusedGemm/FusedConv (a transpose, a scale or
an activation folded into the product), RotaryEmbedding (position ids before the caches, unlike
opset 23's op) and Inverse.  Attention and MultiHeadAttention live in :mod:`._contrib_attention`.

Normalizations compute their statistics in float32 for half-precision inputs, as ONNX Runtime's
kernels do.  Forms ONNX Runtime refuses (a FusedGemm with Clip, transBatch on operands of unequal
ranks, an activation missing a parameter) are refused here too.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import onnx_ir as ir
import torch
import torch.nn.functional as F

from inferplex.devices.gpu.ops import _contrib_attention  # noqa: F401  (registers its ops)
from inferplex.devices.gpu.ops._common import FLOAT_DTYPES, attrs_reason, dtype_reason, first_reason, text
from inferplex.devices.gpu.ops._norms import layer_norm
from inferplex.devices.gpu.ops._window import floats_only, spatial_rank
from inferplex.devices.gpu.ops.nn import conv, conv_relu, gemm
from inferplex.devices.gpu.ops.transformer import rotate
from inferplex.devices.gpu.registry import NodeInfo, register
from inferplex.errors import CompileError

_MS = "com.microsoft"
"""ONNX Runtime's contrib op domain."""

_INT_IDS = frozenset({ir.DataType.INT32, ir.DataType.INT64})


def _floats(*indices: int) -> Callable[[NodeInfo], str | None]:
    return lambda info: dtype_reason(info, indices, FLOAT_DTYPES)


def _wide(x: torch.Tensor) -> torch.Tensor:
    return x.float() if x.dtype in (torch.float16, torch.bfloat16) else x


# --- activations ---------------------------------------------------------------------


@register("Gelu", domain=_MS, supports=_floats(0))
def _gelu(info: NodeInfo) -> Callable[..., Any]:
    return F.gelu


@register("BiasGelu", domain=_MS, supports=_floats(0, 1))
def _bias_gelu(info: NodeInfo) -> Callable[..., Any]:
    return lambda x, bias: F.gelu(x + bias)


@register("FastGelu", domain=_MS, supports=_floats(0, 1))
def _fast_gelu(info: NodeInfo) -> Callable[..., Any]:
    # 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) of x (+ bias): torch's tanh approximation
    def run(x: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
        return F.gelu(x if bias is None else x + bias, approximate="tanh")

    return run


@register("QuickGelu", domain=_MS, supports=_floats(0))
def _quick_gelu(info: NodeInfo) -> Callable[..., Any]:
    alpha = float(info.attr("alpha", 1.702))
    return lambda x: x * torch.sigmoid(x * alpha)


@register("BiasAdd", domain=_MS, supports=_floats(0, 1, 2))
def _bias_add(info: NodeInfo) -> Callable[..., Any]:
    return lambda x, bias, skip: x + bias + skip


def _bias_softmax_supports(info: NodeInfo) -> str | None:
    if info.attr("is_inner_broadcast") is None:
        return "BiasSoftmax needs is_inner_broadcast"
    return _floats(0, 1)(info)


@register("BiasSoftmax", domain=_MS, supports=_bias_softmax_supports)
def _bias_softmax(info: NodeInfo) -> Callable[..., Any]:
    """softmax(data + bias) over the dims from ``axis`` on, taken together (as ONNX Runtime's CUDA
    kernel, its only one): the data are rows of those dims, the bias holds ``R`` such rows, and data
    row ``i`` takes bias row ``i // (rows / R)`` (``is_inner_broadcast=1``: the bias spans the leading
    dims) or ``i % R`` (0: the bias spans the dims just before ``axis``)."""
    axis_attr = int(info.attr("axis", 1))
    inner = bool(info.attr("is_inner_broadcast"))

    def run(x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        axis = axis_attr % x.dim()
        width = math.prod(x.shape[axis:])
        bias_rows = bias.numel() // width
        groups = x.numel() // width // bias_rows
        b = bias.reshape(bias_rows, 1, width) if inner else bias.reshape(1, bias_rows, width)
        view = (bias_rows, groups, width) if inner else (groups, bias_rows, width)
        return torch.softmax(x.reshape(view) + b, -1).reshape(x.shape)

    return run


# --- normalizations ------------------------------------------------------------------


def _skip_norm_supports(info: NodeInfo) -> str | None:
    return first_reason(attrs_reason(info, ("epsilon",)), _floats(0, 1, 2, 3, 4)(info))


def _skip_norm(info: NodeInfo, simplified: bool) -> Callable[..., Any]:
    eps = float(info.attr("epsilon", 1e-12))
    outputs = len(info.node.outputs)

    def run(x: torch.Tensor, skip: torch.Tensor, gamma: torch.Tensor, beta: torch.Tensor | None = None,
            bias: torch.Tensor | None = None) -> Any:
        total = x + skip if bias is None else x + skip + bias
        wide = _wide(total)
        if simplified:
            mean = torch.zeros_like(wide[..., :1])
            inv_std = torch.rsqrt(wide.square().mean(-1, keepdim=True) + eps)
        else:
            mean = wide.mean(-1, keepdim=True)
            inv_std = torch.rsqrt((wide - mean).square().mean(-1, keepdim=True) + eps)
        y = ((wide - mean) * inv_std * gamma).to(x.dtype)
        if beta is not None:
            y = y + beta
        if outputs == 1:
            return y
        return (y, mean.to(torch.float32), inv_std.to(torch.float32), total)[:outputs]

    return run


@register("SkipLayerNormalization", domain=_MS, supports=_skip_norm_supports)
def _skip_layer_norm(info: NodeInfo) -> Callable[..., Any]:
    return _skip_norm(info, simplified=False)


@register("SkipSimplifiedLayerNormalization", domain=_MS, supports=_skip_norm_supports)
def _skip_simplified_layer_norm(info: NodeInfo) -> Callable[..., Any]:
    norm = _skip_norm(info, simplified=True)
    # inputs: input, skip, gamma, bias (no beta)
    return lambda x, skip, gamma, bias=None: norm(x, skip, gamma, None, bias)


def _simplified_supports(info: NodeInfo) -> str | None:
    return first_reason(attrs_reason(info, ("axis", "epsilon", "stash_type")), _floats(0, 1)(info))


@register("SimplifiedLayerNormalization", versions=(1, None), supports=_simplified_supports)
def _simplified_layer_norm(info: NodeInfo) -> Callable[..., Any]:
    """RMS normalization over the dims from ``axis``: ``x / sqrt(mean(x^2) + eps) * scale``; the
    optional second output is the inverse deviation (float32 with ``stash_type=1``)."""
    axis_attr = int(info.attr("axis", -1))
    eps = float(info.attr("epsilon", 1e-5))
    stash = int(info.attr("stash_type", 1))
    outputs = len(info.node.outputs)

    def run(x: torch.Tensor, scale: torch.Tensor) -> Any:
        dims = tuple(range(axis_attr % x.dim(), x.dim()))
        wide = x.float() if stash == 1 and x.dtype != torch.float64 else x
        inv_std = torch.rsqrt(wide.square().mean(dims, keepdim=True) + eps)
        y = (wide * inv_std).to(x.dtype) * scale
        return y if outputs == 1 else (y, inv_std)

    return run


# Before opset 17 ONNX Runtime registers its own LayerNormalization in the ONNX domain: the op that
# opset 17 took over unchanged.
register("LayerNormalization", versions=(1, 16), supports=lambda info: floats_only(info))(layer_norm)


# --- embeddings ----------------------------------------------------------------------


def _embed_supports(info: NodeInfo) -> str | None:
    return first_reason(attrs_reason(info, ("epsilon", "mask_index_type")),
                        dtype_reason(info, (0, 1, 7, 8), _INT_IDS), _floats(2, 3, 4, 5, 6)(info))


@register("EmbedLayerNormalization", domain=_MS, supports=_embed_supports)
def _embed_layer_norm(info: NodeInfo) -> Callable[..., Any]:
    """LayerNorm(word[ids] + position[position_ids or 0..S-1] + segment[segment_ids]); the mask index is
    each row's count of ones in ``mask`` (the length of a right-padded sequence), zeros without one."""
    eps = float(info.attr("epsilon", 1e-12))
    outputs = len(info.node.outputs)

    def run(ids: torch.Tensor, segment_ids: torch.Tensor | None, word: torch.Tensor, position: torch.Tensor,
            segment: torch.Tensor | None, gamma: torch.Tensor, beta: torch.Tensor,
            mask: torch.Tensor | None = None, position_ids: torch.Tensor | None = None) -> Any:
        length = ids.shape[1]
        positions = (position[:length].unsqueeze(0) if position_ids is None
                     else F.embedding(position_ids.long(), position))
        total = F.embedding(ids.long(), word) + positions
        if segment is not None and segment_ids is not None:
            total = total + F.embedding(segment_ids.long(), segment)
        y = F.layer_norm(_wide(total), (total.shape[-1],), _wide(gamma), _wide(beta), eps).to(total.dtype)
        if outputs == 1:
            return y
        if mask is None:
            index = torch.zeros(ids.shape[0], dtype=torch.int32, device=ids.device)
        else:
            index = (mask == 1).sum(1, dtype=torch.int32)
        return (y, index, total)[:outputs]

    return run


def _rotary_supports(info: NodeInfo) -> str | None:
    reason = first_reason(attrs_reason(info, ("interleaved", "rotary_embedding_dim", "num_heads",
                                              "is_packed_batching", "scale")),
                          _floats(0, 2, 3)(info), dtype_reason(info, (1,), _INT_IDS))
    if reason is None and int(info.attr("is_packed_batching", 0)):
        return "RotaryEmbedding with is_packed_batching=1 is not supported"
    if reason is None and float(info.attr("scale", 1.0)) != 1.0:
        return "RotaryEmbedding with a scale other than 1 is not supported"
    rank = info.rank(0)
    if reason is None and rank is not None and rank not in (3, 4):
        return f"RotaryEmbedding input has rank {rank}; accepted: 3 or 4"
    partial = info.attr("rotary_embedding_dim", 0)
    if reason is None and rank == 3 and partial and not info.attr("num_heads", 0):
        return "RotaryEmbedding with rotary_embedding_dim on a 3-D input needs num_heads"
    return reason


@register("RotaryEmbedding", domain=_MS, supports=_rotary_supports)
def _rotary_embedding(info: NodeInfo) -> Callable[..., Any]:
    """Rotates the first ``rotary_embedding_dim`` (default: all) features of each head by the angles of
    the caches' rows at ``position_ids`` ((B, S), or one start offset for every row)."""
    interleaved = bool(info.attr("interleaved", 0))
    rotary_dim = int(info.attr("rotary_embedding_dim", 0))
    heads = int(info.attr("num_heads", 0))

    def run(x: torch.Tensor, position_ids: torch.Tensor, cos: torch.Tensor,
            sin: torch.Tensor) -> torch.Tensor:
        shape = x.shape
        if x.dim() == 4:  # (B, N, S, H) -> (B, S, N, H)
            x4 = x.transpose(1, 2)
        else:
            head_size = shape[-1] // heads if heads else 2 * cos.shape[-1]
            x4 = x.reshape(shape[0], shape[1], -1, head_size)
        length = x4.shape[1]
        if position_ids.numel() == 1:
            steps = torch.arange(length, device=x.device).reshape(1, length)
            position_ids = position_ids.reshape(1, 1) + steps
        out = rotate_heads(x4, position_ids.long(), cos, sin, rotary_dim or 2 * cos.shape[-1], interleaved)
        return out.transpose(1, 2) if x.dim() == 4 else out.reshape(shape)

    return run


def rotate_heads(x4: torch.Tensor, position_ids: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                 dim: int, interleaved: bool) -> torch.Tensor:
    """ONNX Runtime's rotary embedding of (B, S, N, H) heads: the first ``dim`` features of each head
    turn by the angles of the caches' rows at ``position_ids`` (int64, (B, S) or (1, S)); as
    (x1, x2) halves, or as even/odd pairs when ``interleaved``.  GroupQueryAttention's own rotary
    (:mod:`._contrib_gqa`) uses it too."""
    return rotate(x4, cos[position_ids].unsqueeze(2), sin[position_ids].unsqueeze(2), dim, interleaved)


# --- fused products ------------------------------------------------------------------


_BATCH_RANKS = "FusedMatMul with transBatchA or transBatchB needs two inputs of one rank, 3 or more"


def _fused_matmul_supports(info: NodeInfo) -> str | None:
    reason = first_reason(attrs_reason(info, ("alpha", "transA", "transB", "transBatchA", "transBatchB")),
                          _floats(0, 1)(info))
    ranks = (info.rank(0), info.rank(1))
    if reason is None and (info.attr("transBatchA", 0) or info.attr("transBatchB", 0)) and None not in ranks \
            and (ranks[0] != ranks[1] or (ranks[0] or 0) < 3):
        return _BATCH_RANKS
    return reason


def _operand(x: torch.Tensor, trans: bool, trans_batch: bool) -> torch.Tensor:
    """FusedMatMul's view of an operand: ``transBatch`` moves dim 0 behind the batch dims (it held
    the rows), then ``trans`` swaps the two matrix dims."""
    if trans_batch:
        x = x.permute(*range(1, x.dim() - 1), 0, x.dim() - 1)
    if trans:
        x = x.transpose(-1, -2) if x.dim() > 1 else x
    return x


@register("FusedMatMul", domain=_MS, supports=_fused_matmul_supports)
def _fused_matmul(info: NodeInfo) -> Callable[..., Any]:
    alpha = float(info.attr("alpha", 1.0))
    flags = [bool(info.attr(name, 0)) for name in ("transA", "transBatchA", "transB", "transBatchB")]

    def run(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        if (flags[1] or flags[3]) and (a.dim() != b.dim() or a.dim() < 3):
            raise CompileError(f"{_BATCH_RANKS}; got ranks {a.dim()} and {b.dim()}")
        y = torch.matmul(_operand(a, flags[0], flags[1]), _operand(b, flags[2], flags[3]))
        return y if alpha == 1.0 else y * alpha

    return run


_CONV_ACTIVATIONS: dict[str, Callable[[list[float]], Callable[[torch.Tensor], torch.Tensor]]] = {
    "Relu": lambda p: torch.relu,
    "Tanh": lambda p: torch.tanh,
    "Sigmoid": lambda p: torch.sigmoid,
    "LeakyRelu": lambda p: lambda x: F.leaky_relu(x, p[0]),
    "Clip": lambda p: lambda x: torch.clamp(x, p[0], p[1]),
    "HardSigmoid": lambda p: lambda x: torch.clamp(x * p[0] + p[1], 0.0, 1.0),
}
"""FusedConv's activations (ONNX Runtime's MLAS activations), from ``activation_params``."""

_GEMM_ACTIVATIONS: dict[str, Callable[[list[float]], Callable[[torch.Tensor], torch.Tensor]]] = {
    "Relu": lambda p: torch.relu,
    "Tanh": lambda p: torch.tanh,
    "Sigmoid": lambda p: torch.sigmoid,
    "Softsign": lambda p: F.softsign,
    "Softplus": lambda p: F.softplus,
    "LeakyRelu": lambda p: lambda x: F.leaky_relu(x, p[0]),
    "HardSigmoid": lambda p: lambda x: torch.clamp(x * p[0] + p[1], 0.0, 1.0),
    "Elu": lambda p: lambda x: F.elu(x, p[0]),
    "Selu": lambda p: lambda x: p[1] * torch.where(x > 0, x, p[0] * torch.expm1(x)),
    "ThresholdedRelu": lambda p: lambda x: torch.where(x > p[0], x, torch.zeros_like(x)),
    "ScaledTanh": lambda p: lambda x: p[0] * torch.tanh(p[1] * x),
    "ParametricSoftplus": lambda p: lambda x: p[0] * F.softplus(p[1] * x),
}
"""FusedGemm's activations (ONNX Runtime's element-wise functors; no Clip), from ``activation_alpha``,
``activation_beta`` and ``activation_gamma`` in that order."""

_GEMM_PARAMS = {"LeakyRelu": ("alpha",), "HardSigmoid": ("alpha", "beta"), "Elu": ("alpha",),
                "Selu": ("alpha", "gamma"), "ThresholdedRelu": ("alpha",), "ScaledTanh": ("alpha", "beta"),
                "ParametricSoftplus": ("alpha", "beta")}
"""The ``activation_*`` attributes each FusedGemm activation reads (ONNX Runtime has no defaults)."""

_CONV_PARAMS = {"LeakyRelu": 1, "Clip": 2, "HardSigmoid": 2}
"""How many ``activation_params`` each FusedConv activation reads."""


def _activation_params(info: NodeInfo, name: str) -> list[float] | None:
    """The activation's parameters, None where ONNX Runtime would miss one."""
    if info.op_type == "FusedGemm":
        values = [info.attr(f"activation_{key}") for key in _GEMM_PARAMS.get(name, ())]
        return None if None in values else [float(v) for v in values]
    params = [float(p) for p in info.attr("activation_params", []) or []]
    return params if len(params) >= _CONV_PARAMS.get(name, 0) else None


def _activation_reason(info: NodeInfo) -> str | None:
    name = text(info.attr("activation"))
    table = _GEMM_ACTIVATIONS if info.op_type == "FusedGemm" else _CONV_ACTIVATIONS
    if name and name not in table:
        return f"{info.op_type} activation {name!r} is not supported (accepted: {', '.join(table)})"
    if name and _activation_params(info, name) is None:
        return f"{info.op_type} activation {name} lacks a parameter"
    return None


def _activation(info: NodeInfo) -> Callable[[torch.Tensor], torch.Tensor] | None:
    name = text(info.attr("activation"))
    table = _GEMM_ACTIVATIONS if info.op_type == "FusedGemm" else _CONV_ACTIVATIONS
    return table[name](_activation_params(info, name) or []) if name else None


def _fused_gemm_supports(info: NodeInfo) -> str | None:
    return _activation_reason(info) or floats_only(info, (0, 1))


@register("FusedGemm", domain=_MS, supports=_fused_gemm_supports)
def _fused_gemm(info: NodeInfo) -> Callable[..., Any]:
    product, act = gemm(info), _activation(info)
    if act is None:
        return product
    return lambda a, b, c=None: act(product(a, b, c))


def _fused_conv_supports(info: NodeInfo) -> str | None:
    return _activation_reason(info) or floats_only(info, (0, 1)) or spatial_rank(info)


@register("FusedConv", domain=_MS, supports=_fused_conv_supports)
def _fused_conv(info: NodeInfo) -> Callable[..., Any]:
    """activation(Conv(X, W, B) + Z): the optional Z is added before the activation, as ONNX Runtime's
    kernel accumulates the convolution onto it.  With Relu, the Conv+Relu fusion of ``nn`` (one cuDNN
    call on CUDA where it takes the configuration)."""
    if text(info.attr("activation")) == "Relu":
        return conv_relu(info)
    convolve, act = conv(info), _activation(info)

    def run(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None = None,
            z: torch.Tensor | None = None) -> torch.Tensor:
        y = convolve(x, w, b)
        if z is not None:
            y = y + z
        return y if act is None else act(y)

    return run


# --- linear algebra ------------------------------------------------------------------


@register("Inverse", domain=_MS, supports=_floats(0))
def _inverse(info: NodeInfo) -> Callable[..., Any]:
    def run(x: torch.Tensor) -> torch.Tensor:
        # inv_ex: no check of singular matrices, which would read a flag back to the host
        return torch.linalg.inv_ex(_wide(x)).inverse.to(x.dtype)

    return run
