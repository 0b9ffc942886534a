"""Lowerings: normalizations (Batch, Instance, Layer, Group, LRN, RMS, Lp), two classification losses, Swish.

Losses follow ONNX's reference: NegativeLogLikelihoodLoss gathers ``-input`` at
the target class (optionally weighted), skips ``ignore_index``, and its
``mean`` divides by the summed weights of the counted elements, which is
``F.nll_loss``'s rule too; SoftmaxCrossEntropyLoss is the same loss on
``log_softmax(scores, axis=1)`` and may also return those log-probabilities.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import onnx_ir as ir
import torch
import torch.nn.functional as F

from inferplex.devices.gpu.registry import NodeInfo, register

_FLOATS = (ir.DataType.FLOAT, ir.DataType.DOUBLE, ir.DataType.FLOAT16, ir.DataType.BFLOAT16)


def _floats_only(info: NodeInfo) -> str | None:
    dtype = info.input_dtypes[0] if info.input_dtypes else None
    if dtype is not None and dtype not in _FLOATS:
        return f"{info.op_type} input 0 is {dtype.name}; accepted: floating types"
    return None


# --- normalization ------------------------------------------------------------------


def _batch_norm_supports(info: NodeInfo) -> str | None:
    if int(info.attr("training_mode", 0)) != 0:
        return None if info.opset >= 14 else "BatchNormalization training before opset 14 is not supported"
    if int(info.attr("spatial", 1)) != 1:
        return "BatchNormalization with spatial=0 is not supported"
    if info.opset < 7 and int(info.attr("is_test", 0)) == 0:
        return "BatchNormalization with is_test=0 (training) is not supported"
    if sum(1 for v in info.node.outputs if v is not None and v.name) > 1:
        return "BatchNormalization training outputs (running mean/var) are not supported"
    return _floats_only(info)


@register("BatchNormalization", supports=_batch_norm_supports)
def batch_norm(info: NodeInfo) -> Callable[..., Any]:
    eps = float(info.attr("epsilon", 1e-5))
    if int(info.attr("training_mode", 0)):
        return _batch_norm_training(eps, float(info.attr("momentum", 0.9)))

    def run(x: torch.Tensor, scale: torch.Tensor, bias: torch.Tensor, mean: torch.Tensor,
            var: torch.Tensor) -> torch.Tensor:
        mean, var, scale, bias = (t.to(x.dtype) for t in (mean, var, scale, bias))
        return F.batch_norm(x, mean, var, scale, bias, training=False, eps=eps)

    return run


def _batch_norm_training(eps: float, momentum: float) -> Callable[..., Any]:
    """training_mode=1: normalize with the batch's statistics (biased variance, as ONNX) and return
    the running mean and variance updated by ``momentum``."""

    def run(x: torch.Tensor, scale: torch.Tensor, bias: torch.Tensor, mean: torch.Tensor,
            var: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        dims = [d for d in range(x.dim()) if d != 1]
        batch_var, batch_mean = torch.var_mean(x, dim=dims, correction=0)
        y = F.batch_norm(x, batch_mean, batch_var, scale.to(x.dtype), bias.to(x.dtype), training=False,
                         eps=eps)
        return (y, (mean * momentum + batch_mean * (1 - momentum)).to(x.dtype),
                (var * momentum + batch_var * (1 - momentum)).to(x.dtype))

    return run


@register("InstanceNormalization", supports=lambda info: _floats_only(info))
def instance_norm(info: NodeInfo) -> Callable[..., Any]:
    eps = float(info.attr("epsilon", 1e-5))
    return lambda x, scale, bias: F.instance_norm(x, weight=scale, bias=bias, eps=eps)


@register("LayerNormalization", versions=(17, None), supports=_floats_only)
def layer_norm(info: NodeInfo) -> Callable[..., Any]:
    # The axis resolves against the tensor's rank at run time: no inferred rank is needed.
    axis_attr = int(info.attr("axis", -1))
    eps = float(info.attr("epsilon", 1e-5))
    stats = any(v is not None and v.name for v in info.node.outputs[1:])
    outputs = len(info.node.outputs)

    def run(x: torch.Tensor, scale: torch.Tensor, bias: torch.Tensor | None = None) -> Any:
        axis = axis_attr % x.dim()
        dims = tuple(range(axis, x.dim()))
        shape = tuple(x.shape[axis:])
        if not stats and tuple(scale.shape) == shape and (bias is None or tuple(bias.shape) == shape):
            return F.layer_norm(x, shape, scale, bias, eps)
        wide = x.float() if x.dtype in (torch.float16, torch.bfloat16) else x
        mean = wide.mean(dims, keepdim=True)
        inv_std = torch.rsqrt((wide - mean).square().mean(dims, keepdim=True) + eps)
        y = ((wide - mean) * inv_std).to(x.dtype) * scale
        if bias is not None:
            y = y + bias
        # a scale or bias that only broadcasts to the normalized shape comes here without statistics
        return (y, mean, inv_std)[:outputs] if stats else y

    return run


def _group_norm_supports(info: NodeInfo) -> str | None:
    if info.attr("num_groups") is None:
        return "GroupNormalization needs num_groups"
    return _floats_only(info)


@register("GroupNormalization", versions=(18, None), supports=_group_norm_supports)
def group_norm(info: NodeInfo) -> Callable[..., Any]:
    groups = int(info.attr("num_groups"))
    eps = float(info.attr("epsilon", 1e-5))
    per_group = info.opset < 21  # opset 18's scale and bias hold one value per group

    def run(x: torch.Tensor, scale: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        if per_group:
            channels = x.shape[1] // groups
            scale, bias = scale.repeat_interleave(channels), bias.repeat_interleave(channels)
        wide = x.float() if x.dtype in (torch.float16, torch.bfloat16) else x
        y = F.group_norm(wide, groups, None, None, eps).to(x.dtype)
        view = (1, -1) + (1,) * (x.dim() - 2)
        return y * scale.reshape(view) + bias.reshape(view)

    return run


@register("LRN", supports=lambda info: _floats_only(info))
def lrn(info: NodeInfo) -> Callable[..., Any]:
    size = int(info.attr("size"))
    alpha, beta = float(info.attr("alpha", 1e-4)), float(info.attr("beta", 0.75))
    bias = float(info.attr("bias", 1.0))
    before, after = (size - 1) // 2, size // 2 if size % 2 == 0 else (size - 1) // 2
    if size % 2 == 0:
        after = size - 1 - before

    def run(x: torch.Tensor) -> torch.Tensor:
        if size % 2 == 1:
            return F.local_response_norm(x, size, alpha, beta, bias)
        # ONNX's window for even sizes leans forward; torch's leans back.
        square = (x * x).movedim(1, -1)
        sums = F.pad(square, (before, after)).unfold(-1, size, 1).sum(-1).movedim(-1, 1)
        return x / (bias + alpha / size * sums).pow(beta)

    return run


@register("RMSNormalization", versions=(23, None), supports=_floats_only)
def rms_norm(info: NodeInfo) -> Callable[..., Any]:
    # As LayerNormalization: the axis resolves against the tensor's rank at run time.
    axis = int(info.attr("axis", -1))
    eps = float(info.attr("epsilon", 1e-5))
    stash = int(info.attr("stash_type", 1))

    def run(x: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
        dims = tuple(range(axis % x.dim(), x.dim()))
        wide = x.float() if stash == 1 and x.dtype != torch.float64 else x
        normed = wide * torch.rsqrt(wide.square().mean(dims, keepdim=True) + eps)
        return (normed.to(x.dtype) * scale).to(x.dtype)

    return run


def _lp_supports(info: NodeInfo) -> str | None:
    if int(info.attr("p", 2)) not in (1, 2):
        return "LpNormalization supports p=1 and p=2 only (as ONNX defines)"
    return _floats_only(info)


@register("LpNormalization", supports=_lp_supports)
def lp_norm(info: NodeInfo) -> Callable[..., Any]:
    axis, p = int(info.attr("axis", -1)), int(info.attr("p", 2))

    def run(x: torch.Tensor) -> torch.Tensor:
        norm = x.abs().sum(axis, keepdim=True) if p == 1 else x.square().sum(axis, keepdim=True).sqrt()
        # A zero norm gives zeros, as in ONNX's reference (not 0/0 = NaN).
        safe = torch.where(norm == 0, torch.ones_like(norm), norm)
        return torch.where(norm == 0, torch.zeros_like(x), x / safe)

    return run


def _loss_supports(info: NodeInfo) -> str | None:
    reduction = info.attr("reduction", "mean")
    if reduction not in ("none", "sum", "mean"):
        return f"{info.op_type} reduction {reduction!r} is not supported (accepted: none, sum, mean)"
    dtype = info.input_dtypes[0] if info.input_dtypes else None
    if dtype is not None and dtype not in _FLOATS:
        return f"{info.op_type} input 0 is {dtype.name}; accepted: floating types"
    return None


def _nll(info: NodeInfo) -> Callable[[torch.Tensor, torch.Tensor, torch.Tensor | None], torch.Tensor]:
    reduction = info.attr("reduction", "mean")
    ignore = info.attr("ignore_index")
    ignore_index = -100 if ignore is None else int(ignore)

    def loss(log_prob: torch.Tensor, target: torch.Tensor, weight: torch.Tensor | None) -> torch.Tensor:
        target = target.long()
        if ignore is not None:
            # ONNX lets ignore_index lie outside [0, C); torch needs every other target in range.
            target = torch.where(target == ignore_index, torch.full_like(target, -100), target)
        return F.nll_loss(log_prob, target, weight, ignore_index=-100, reduction=reduction)

    return loss


@register("NegativeLogLikelihoodLoss", versions=(12, None), supports=_loss_supports)
def negative_log_likelihood_loss(info: NodeInfo) -> Callable[..., Any]:
    loss = _nll(info)
    return lambda x, target, weight=None: loss(x, target, weight).to(x.dtype)


@register("SoftmaxCrossEntropyLoss", versions=(12, None), supports=_loss_supports)
def softmax_cross_entropy_loss(info: NodeInfo) -> Callable[..., Any]:
    loss = _nll(info)
    want_log_prob = len(info.node.outputs) > 1 and bool(info.node.outputs[1].name)

    def run(scores: torch.Tensor, labels: torch.Tensor, weights: torch.Tensor | None = None) -> Any:
        log_prob = torch.log_softmax(scores, 1)
        value = loss(log_prob, labels, weights).to(scores.dtype)
        return (value, log_prob) if want_log_prob else value

    return run


@register("Swish", versions=(24, None), supports=_floats_only)
def swish(info: NodeInfo) -> Callable[..., Any]:
    alpha = float(info.attr("alpha", 1.0))
    return lambda x: x * torch.sigmoid(x * alpha)
