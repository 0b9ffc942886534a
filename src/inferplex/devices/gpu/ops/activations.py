"""Lowerings: elementwise activations.

Each follows the ONNX formula literally where torch's built-in differs (Selu
and Shrink take their constants from attributes; torch hard-codes them), and
uses torch's fused kernel where the formula is the same.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import onnx_ir as ir
import torch
import torch.nn.functional as F

from inferplex.devices.gpu.registry import NodeInfo, register

_FLOATS = (ir.DataType.FLOAT, ir.DataType.DOUBLE, ir.DataType.FLOAT16, ir.DataType.BFLOAT16)


def _float_input(info: NodeInfo) -> str | None:
    """Torch runs these activations on floating tensors only."""
    dtype = info.input_dtypes[0] if info.input_dtypes else None
    if dtype is not None and dtype not in _FLOATS:
        return f"{info.op_type} on {dtype.name} is not supported (accepted: floating types)"
    return None


def _simple(op_type: str, fn: Callable[..., Any], versions: tuple[int, int | None] = (1, None)) -> None:
    register(op_type, versions=versions, supports=_float_input)(lambda info: fn)


_simple("Sigmoid", torch.sigmoid)
_simple("Tanh", torch.tanh)
_simple("Softsign", F.softsign)
_simple("Mish", F.mish, (18, None))


@register("Relu")
def relu(info: NodeInfo) -> Callable[..., Any]:
    return torch.relu


@register("Softplus", supports=_float_input)
def softplus(info: NodeInfo) -> Callable[..., Any]:
    # log(1 + exp(x)); torch's threshold=20 shortcut returns x where the two agree to float precision.
    return F.softplus


@register("LeakyRelu", supports=_float_input)
def leaky_relu(info: NodeInfo) -> Callable[..., Any]:
    alpha = float(info.attr("alpha", 0.01))
    return lambda x: F.leaky_relu(x, alpha)


@register("Elu", supports=_float_input)
def elu(info: NodeInfo) -> Callable[..., Any]:
    alpha = float(info.attr("alpha", 1.0))
    return lambda x: F.elu(x, alpha)


@register("Celu", versions=(12, None), supports=_float_input)
def celu(info: NodeInfo) -> Callable[..., Any]:
    alpha = float(info.attr("alpha", 1.0))
    return lambda x: F.celu(x, alpha)


@register("Selu", supports=_float_input)
def selu(info: NodeInfo) -> Callable[..., Any]:
    alpha = float(info.attr("alpha", 1.67326319217681884765625))
    gamma = float(info.attr("gamma", 1.05070102214813232421875))
    return lambda x: torch.where(x > 0, x * gamma, (torch.exp(x) * alpha - alpha) * gamma)


@register("HardSigmoid", supports=_float_input)
def hard_sigmoid(info: NodeInfo) -> Callable[..., Any]:
    alpha = float(info.attr("alpha", 0.2))
    beta = float(info.attr("beta", 0.5))
    return lambda x: torch.clamp(x * alpha + beta, 0.0, 1.0)


@register("HardSwish", versions=(14, None), supports=_float_input)
def hard_swish(info: NodeInfo) -> Callable[..., Any]:
    return F.hardswish


def _gelu_supports(info: NodeInfo) -> str | None:
    approximate = info.attr("approximate", "none")
    if approximate not in ("none", "tanh"):
        return f"Gelu approximate={approximate!r} is not supported (accepted: 'none', 'tanh')"
    return _float_input(info)


@register("Gelu", versions=(20, None), supports=_gelu_supports)
def gelu(info: NodeInfo) -> Callable[..., Any]:
    approximate = info.attr("approximate", "none")
    return lambda x: F.gelu(x, approximate=approximate)


@register("PRelu", versions=(7, None), supports=_float_input)
def prelu(info: NodeInfo) -> Callable[..., Any]:
    # ONNX broadcasts slope to X (numpy rules); F.prelu wants one slope per channel.
    return lambda x, slope: torch.where(x < 0, x * slope, x)


@register("ThresholdedRelu", versions=(10, None), supports=_float_input)
def thresholded_relu(info: NodeInfo) -> Callable[..., Any]:
    alpha = float(info.attr("alpha", 1.0))
    return lambda x: torch.where(x > alpha, x, torch.zeros_like(x))


def _shrink_supports(info: NodeInfo) -> str | None:
    dtype = info.input_dtypes[0] if info.input_dtypes else None
    if dtype in (ir.DataType.UINT8,) and float(info.attr("bias", 0.0)) != 0.0:
        return "Shrink with a bias on unsigned integers is not supported"
    return None


@register("Shrink", versions=(9, None), supports=_shrink_supports)
def shrink(info: NodeInfo) -> Callable[..., Any]:
    lambd = float(info.attr("lambd", 0.5))
    bias = float(info.attr("bias", 0.0))

    def run(x: torch.Tensor) -> torch.Tensor:
        shifted = torch.where(x < -lambd, x + bias, torch.where(x > lambd, x - bias, torch.zeros_like(x)))
        return shifted.to(x.dtype)

    return run
