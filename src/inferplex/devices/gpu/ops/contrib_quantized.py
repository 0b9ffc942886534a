"""Lowerings of ONNX Runtime's quantized contrib ops (domain ``com.microsoft``), element-wise and
pooling: QLinearAdd, QLinearMul, QLinearSigmoid, QLinearLeakyRelu, QLinearSoftmax, QLinearConcat,
QLinearWhere, QLinearGlobalAveragePool, QLinearAveragePool, QLinearReduceMean, the domain's
own QuantizeLinear / DequantizeLinear, and its QLinearConv and NhwcMaxPool (channels-last data,
as ONNX Runtime's layout optimizer saves them).  The matmuls (QGemm, MatMulIntegerToFloat,
DynamicQuantizeMatMul, MatMulNBits) are in :mod:`._contrib_matmul`, which reuses the helpers here.

``onnxruntime.quantization.quantize_static(..., quant_format=QuantFormat.QOperator)`` writes these
ops; each lowering computes what ONNX Runtime's CPU kernel computes (its contrib op spec, read
beside the kernel where the spec leaves a choice open):

* 8-bit data in, 8-bit data out, per-tensor scales and zero points (ORT refuses others); an absent
  zero point is 0 of the data's type.
* Requantization is ``round_half_even(value / y_scale) + y_zero``, saturated, in float32 from the
  dequantized ``(x - zero) * scale`` (ORT builds a 256-entry table of exactly those numbers for
  the unary ops, which is the same function); QLinearAdd and QLinearMul fold the scale ratios
  first, as MLAS does.  Where ORT's vectorized kernel rounds a float32 sum in another order, a
  value on a rounding boundary may land one quantization step apart.
* QLinearSoftmax follows ORT's algorithm, not the textbook one: ``exp`` of the integer distance to
  the row's maximum (the zero point cancels), times ``floor(1 / y_scale)``, divided by the row sum.
* QLinearGlobalAveragePool sums the integers exactly and requantizes once with
  ``x_scale / (y_scale * count)``; QLinearAveragePool averages the dequantized floats (the float
  AveragePool's lowering) and, like ORT, adds the zero point before it rounds (ties differ).
* QLinearReduceMean (which ORT's quantizer does not write, and its CPU provider has no kernel
  for) is its spec: ``quantize(ReduceMean(dequantize(x)))``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import onnx_ir as ir
import torch

from inferplex.devices.gpu.ops import quantized as _onnx_quantized  # noqa: F401  (registered first)
from inferplex.devices.gpu.ops._common import attrs_reason, dtype_reason, first_reason, normalize_axis
from inferplex.devices.gpu.ops._pooling import average_pool, max_pool
from inferplex.devices.gpu.ops._window import spatial_rank
from inferplex.devices.gpu.registry import NodeInfo, OpLowering, find_lowering, register

__all__ = ["MS_DOMAIN", "centered", "dequantize", "quantize", "scalar_params_reason"]

MS_DOMAIN = "com.microsoft"
_EIGHT_BIT = frozenset({ir.DataType.INT8, ir.DataType.UINT8})
_FLOAT = frozenset({ir.DataType.FLOAT})
_RANGES = {torch.int8: (-128, 127), torch.uint8: (0, 255)}


# --- shared arithmetic ------------------------------------------------------------------


def centered(x: torch.Tensor, zero: torch.Tensor | None) -> torch.Tensor:
    """``x - zero`` in int32 (exact) for 8-bit ``x`` and a per-tensor ``zero`` (None: 0)."""
    values = x.to(torch.int32)
    return values if zero is None else values - zero.to(torch.int32).reshape(())


def dequantize(x: torch.Tensor, scale: torch.Tensor, zero: torch.Tensor | None) -> torch.Tensor:
    """``(x - zero) * scale`` in float32, per tensor."""
    return centered(x, zero).to(torch.float32) * scale.to(torch.float32).reshape(())


def quantize(values: torch.Tensor, scale: torch.Tensor | None, zero: torch.Tensor | None,
             dtype: torch.dtype) -> torch.Tensor:
    """``saturate(round_half_even(values / scale) + zero)`` as ``dtype`` (int8 or uint8), per tensor;
    ``scale`` None: ``values`` are already divided by it."""
    if scale is not None:
        values = values / scale.to(torch.float32).reshape(())
    values = torch.round(values)
    if zero is not None:
        values = values + zero.to(torch.float32).reshape(())
    low, high = _RANGES[dtype]
    return values.clamp(low, high).to(dtype)


def _out_dtype(zero: torch.Tensor | None, data: torch.Tensor) -> torch.dtype:
    """The output's type: its zero point's, else the input data's (ORT's schemas tie them)."""
    return zero.dtype if zero is not None else data.dtype


def scalar_params_reason(info: NodeInfo, indices: Sequence[int]) -> str | None:
    """Why the constant scales or zero points at ``indices`` are not per tensor (None: they are, or
    are computed at run time, where ORT checks the same)."""
    for index in indices:
        value = info.const(index) if info.has_input(index) else None
        if value is not None and np.asarray(value).size != 1:
            return (f"{info.op_type} input {index} holds {np.asarray(value).size} values; accepted: "
                    "one (per-tensor quantization)")
    return None


def _qlinear_reason(info: NodeInfo, data: Sequence[int], scales: Sequence[int], zeros: Sequence[int],
                    attributes: Sequence[str] = ()) -> str | None:
    """The checks every QLinear* contrib op shares: known attributes, 8-bit data and zero points,
    float32 scales, all per tensor."""
    return first_reason(attrs_reason(info, attributes), dtype_reason(info, (*data, *zeros), _EIGHT_BIT),
                        dtype_reason(info, scales, _FLOAT), scalar_params_reason(info, (*scales, *zeros)))


# --- binary and unary ops -----------------------------------------------------------------


def _binary_supports(info: NodeInfo) -> str | None:
    return _qlinear_reason(info, (0, 3), (1, 4, 6), (2, 5, 7))


@register("QLinearAdd", domain=MS_DOMAIN, supports=_binary_supports)
def _qlinear_add(info: NodeInfo) -> Callable[..., Any]:
    def qlinear_add(a: torch.Tensor, a_scale: torch.Tensor, a_zero: torch.Tensor | None, b: torch.Tensor,
                    b_scale: torch.Tensor, b_zero: torch.Tensor | None, c_scale: torch.Tensor,
                    c_zero: torch.Tensor | None = None) -> torch.Tensor:
        # MLAS folds each input's scale into a ratio to the output's before it adds.
        c = c_scale.reshape(())
        values = centered(a, a_zero).to(torch.float32) * (a_scale.reshape(()) / c) \
            + centered(b, b_zero).to(torch.float32) * (b_scale.reshape(()) / c)
        return quantize(values, None, c_zero, _out_dtype(c_zero, a))

    return qlinear_add


@register("QLinearMul", domain=MS_DOMAIN, supports=_binary_supports)
def _qlinear_mul(info: NodeInfo) -> Callable[..., Any]:
    def qlinear_mul(a: torch.Tensor, a_scale: torch.Tensor, a_zero: torch.Tensor | None, b: torch.Tensor,
                    b_scale: torch.Tensor, b_zero: torch.Tensor | None, c_scale: torch.Tensor,
                    c_zero: torch.Tensor | None = None) -> torch.Tensor:
        product = (centered(a, a_zero) * centered(b, b_zero)).to(torch.float32)  # exact: |p| < 2**16
        ratio = a_scale.reshape(()) * b_scale.reshape(()) / c_scale.reshape(())
        return quantize(product * ratio, None, c_zero, _out_dtype(c_zero, a))

    return qlinear_mul


def _unary_supports(info: NodeInfo, attributes: Sequence[str] = ()) -> str | None:
    return _qlinear_reason(info, (0,), (1, 3), (2, 4), attributes)


def _unary(fn: Callable[[torch.Tensor], torch.Tensor]) -> Callable[..., Any]:
    """``quantize(fn(dequantize(x)))``, the function of ORT's 256-entry lookup table."""

    def qlinear_unary(x: torch.Tensor, x_scale: torch.Tensor, x_zero: torch.Tensor | None,
                      y_scale: torch.Tensor, y_zero: torch.Tensor | None = None) -> torch.Tensor:
        return quantize(fn(dequantize(x, x_scale, x_zero)), y_scale, y_zero, _out_dtype(y_zero, x))

    return qlinear_unary


@register("QLinearSigmoid", domain=MS_DOMAIN, supports=_unary_supports)
def _qlinear_sigmoid(info: NodeInfo) -> Callable[..., Any]:
    return _unary(torch.sigmoid)


@register("QLinearLeakyRelu", domain=MS_DOMAIN, supports=lambda info: _unary_supports(info, ("alpha",)))
def _qlinear_leaky_relu(info: NodeInfo) -> Callable[..., Any]:
    alpha = float(np.float32(info.attr("alpha", 0.01)))
    return _unary(lambda v: torch.where(v >= 0, v, v * alpha))


# --- softmax --------------------------------------------------------------------------------

_FLOAT32_MAX = float(np.finfo(np.float32).max)


def _softmax_supports(info: NodeInfo) -> str | None:
    reason = _qlinear_reason(info, (0,), (1, 3), (2, 4), ("axis", "opset"))
    if reason is None and info.attr("opset") is None:
        return "QLinearSoftmax needs its opset attribute"
    return reason


@register("QLinearSoftmax", domain=MS_DOMAIN, supports=_softmax_supports)
def _qlinear_softmax(info: NodeInfo) -> Callable[..., Any]:
    opset = int(info.attr("opset"))
    axis_attr = int(info.attr("axis", 1 if opset < 13 else -1))
    flatten = opset < 13

    def qlinear_softmax(x: torch.Tensor, x_scale: torch.Tensor, x_zero: torch.Tensor | None,
                        y_scale: torch.Tensor, y_zero: torch.Tensor) -> torch.Tensor:
        axis = normalize_axis(axis_attr, x.dim())
        rows = x.reshape(*x.shape[:axis], -1) if flatten else x.movedim(axis, -1)
        scaled = _scaled_exp(rows, x_scale, max(int(rows.shape[-1]), 1))  # int: a static length
        total = scaled.sum(-1, keepdim=True)
        multiplier = torch.floor(1.0 / y_scale.to(torch.float32).reshape(()))
        y = quantize(scaled * multiplier / total, None, y_zero, y_zero.dtype)
        return y.reshape(x.shape) if flatten else y.movedim(-1, axis)

    return qlinear_softmax


def _scaled_exp(rows: torch.Tensor, x_scale: torch.Tensor, length: int) -> torch.Tensor:
    """ORT's table of ``exp`` (float32 values of a float64 ``exp``), read at each element's
    distance below its row's maximum: ``exp((x - max + shift) * x_scale)``, where the shift keeps
    a row's sum of up to ``length`` values below float32's maximum."""
    shift = max(0.0, math.log(_FLOAT32_MAX / length) - 5)  # ORT keeps 5 bits in reserve for float
    scale = x_scale.to(torch.float64).reshape(())
    steps = torch.arange(-255, 1, device=rows.device, dtype=torch.float64)
    table = torch.exp((steps + shift / scale) * scale).to(torch.float32)
    values = rows.to(torch.int32)
    index = values - values.amax(-1, keepdim=True) + 255
    return table[index.to(torch.int64)]


# --- concat and where -----------------------------------------------------------------------


def _concat_supports(info: NodeInfo) -> str | None:
    count = info.num_inputs - 2
    if count <= 0 or count % 3:
        return (f"QLinearConcat takes Y_scale, Y_zero_point and (X, scale, zero point) triples, "
                f"not {count + 2} inputs")
    data = tuple(range(2, info.num_inputs, 3))
    return _qlinear_reason(info, data, (0, *(i + 1 for i in data)), (1, *(i + 2 for i in data)), ("axis",))


def _same_params(info: NodeInfo, scale: int, zero: int, out_scale: int, out_zero: int) -> bool:
    """Whether two (scale, zero point) pairs are equal constants: requantizing is then the identity."""
    values = [info.const(i) if info.has_input(i) else None for i in (scale, zero, out_scale, out_zero)]
    known = [v for v in values if v is not None]
    if len(known) < 4:
        return False
    return bool(np.array_equal(known[0], known[2]) and np.array_equal(known[1], known[3]))


def _requantizer(identity: bool) -> Callable[..., torch.Tensor]:
    """``x`` with scale and zero point ``(s, z)`` requantized to ``(ys, yz)`` (ORT: a lookup table)."""

    def requantize(x: torch.Tensor, s: torch.Tensor, z: torch.Tensor | None, ys: torch.Tensor,
                   yz: torch.Tensor) -> torch.Tensor:
        return x if identity else quantize(dequantize(x, s, z), ys, yz, yz.dtype)

    return requantize


@register("QLinearConcat", domain=MS_DOMAIN, supports=_concat_supports)
def _qlinear_concat(info: NodeInfo) -> Callable[..., Any]:
    axis_attr = int(info.attr("axis"))
    parts = [_requantizer(_same_params(info, i + 1, i + 2, 0, 1)) for i in range(2, info.num_inputs, 3)]

    def qlinear_concat(y_scale: torch.Tensor, y_zero: torch.Tensor, *triples: torch.Tensor) -> torch.Tensor:
        inputs = [part(*triples[3 * k:3 * k + 3], y_scale, y_zero) for k, part in enumerate(parts)]
        return torch.cat(inputs, normalize_axis(axis_attr, inputs[0].dim()))

    return qlinear_concat


def _where_supports(info: NodeInfo) -> str | None:
    return first_reason(dtype_reason(info, (0,), frozenset({ir.DataType.BOOL})),
                        _qlinear_reason(info, (1, 4), (2, 5, 7), (3, 6, 8)))


@register("QLinearWhere", domain=MS_DOMAIN, supports=_where_supports)
def _qlinear_where(info: NodeInfo) -> Callable[..., Any]:
    x_part = _requantizer(_same_params(info, 2, 3, 7, 8))
    y_part = _requantizer(_same_params(info, 5, 6, 7, 8))

    def qlinear_where(condition: torch.Tensor, x: torch.Tensor, x_scale: torch.Tensor, x_zero: torch.Tensor,
                      y: torch.Tensor, y_scale: torch.Tensor, y_zero: torch.Tensor, z_scale: torch.Tensor,
                      z_zero: torch.Tensor) -> torch.Tensor:
        return torch.where(condition, x_part(x, x_scale, x_zero, z_scale, z_zero),
                           y_part(y, y_scale, y_zero, z_scale, z_zero))

    return qlinear_where


# --- pooling and reduction ------------------------------------------------------------------


def _spatial(rank: int, channels_last: bool) -> tuple[int, ...]:
    return tuple(range(1, rank - 1)) if channels_last else tuple(range(2, rank))


def _global_pool_supports(info: NodeInfo) -> str | None:
    rank = info.rank(0)
    reason = _unary_supports(info, ("channels_last",))
    if reason is None and rank is not None and rank < 3:
        return f"QLinearGlobalAveragePool of a rank-{rank} input; accepted: rank 3 or more"
    return reason


@register("QLinearGlobalAveragePool", domain=MS_DOMAIN, supports=_global_pool_supports)
def _qlinear_global_average_pool(info: NodeInfo) -> Callable[..., Any]:
    channels_last = bool(info.attr("channels_last", 0))

    def qlinear_global_average_pool(x: torch.Tensor, x_scale: torch.Tensor, x_zero: torch.Tensor | None,
                                    y_scale: torch.Tensor, y_zero: torch.Tensor | None = None
                                    ) -> torch.Tensor:
        dims = _spatial(x.dim(), channels_last)
        count = math.prod(x.shape[d] for d in dims)
        sums = centered(x, None).sum(dims, keepdim=True, dtype=torch.int32)  # exact below 2**23 values
        if x_zero is not None:
            sums = sums - x_zero.to(torch.int32).reshape(()) * count
        ratio = x_scale.to(torch.float32).reshape(()) / (y_scale.to(torch.float32).reshape(()) * float(count))
        return quantize(sums.to(torch.float32) * ratio, None, y_zero, _out_dtype(y_zero, x))

    return qlinear_global_average_pool


def _average_pool_supports(info: NodeInfo) -> str | None:
    known = ("auto_pad", "ceil_mode", "channels_last", "count_include_pad", "kernel_shape", "pads", "strides")
    reason = _unary_supports(info, known)
    if reason is None and not info.attr("kernel_shape"):
        return "QLinearAveragePool needs kernel_shape"
    return reason or spatial_rank(info)


@register("QLinearAveragePool", domain=MS_DOMAIN, supports=_average_pool_supports)
def _qlinear_average_pool(info: NodeInfo) -> Callable[..., Any]:
    pool = average_pool(info)  # the float AveragePool's lowering reads the same attributes
    channels_last = bool(info.attr("channels_last", 0))

    def qlinear_average_pool(x: torch.Tensor, x_scale: torch.Tensor, x_zero: torch.Tensor | None,
                             y_scale: torch.Tensor, y_zero: torch.Tensor | None = None) -> torch.Tensor:
        values = dequantize(x, x_scale, x_zero)
        pooled = pool(values.movedim(-1, 1)).movedim(1, -1) if channels_last else pool(values)
        pooled = pooled / y_scale.to(torch.float32).reshape(())
        if y_zero is not None:  # ORT adds the zero point before it rounds (ties land apart)
            pooled = pooled + y_zero.to(torch.float32).reshape(())
        return quantize(pooled, None, None, _out_dtype(y_zero, x))

    return qlinear_average_pool


@register("QLinearReduceMean", domain=MS_DOMAIN,
          supports=lambda info: _unary_supports(info, ("axes", "keepdims")))
def _qlinear_reduce_mean(info: NodeInfo) -> Callable[..., Any]:
    axes_attr = info.attr("axes")
    keep = bool(info.attr("keepdims", 1))

    def qlinear_reduce_mean(x: torch.Tensor, x_scale: torch.Tensor, x_zero: torch.Tensor | None,
                            y_scale: torch.Tensor, y_zero: torch.Tensor | None = None) -> torch.Tensor:
        axes = range(x.dim()) if axes_attr is None else axes_attr
        dims = tuple(normalize_axis(a, x.dim()) for a in axes)
        mean = dequantize(x, x_scale, x_zero).mean(dims, keepdim=keep)
        return quantize(mean, y_scale, y_zero, _out_dtype(y_zero, x))

    return qlinear_reduce_mean


# --- the domain's QuantizeLinear / DequantizeLinear -----------------------------------------


def _delegate(op_type: str) -> OpLowering:
    """ONNX's own lowering of ``op_type``: the contrib op computes the same (its types are a
    subset of ONNX's at opset 21: 8/16-bit integers, int4 constants)."""
    lowering = find_lowering("", op_type, 21)
    assert lowering is not None, f"{op_type} is registered by the quantized ops module"
    return lowering


def _register_delegate(op_type: str) -> None:
    onnx_lowering = _delegate(op_type)

    def supports(info: NodeInfo) -> str | None:
        return first_reason(attrs_reason(info, ("axis",)),
                            onnx_lowering.supports(info) if onnx_lowering.supports else None)

    register(op_type, domain=MS_DOMAIN, supports=supports,
             held_dtypes=onnx_lowering.held_dtypes)(onnx_lowering.lower)


_register_delegate("QuantizeLinear")
_register_delegate("DequantizeLinear")



# --- the domain's QLinearConv (ONNX Runtime's NHWC layout) ----------------------------------


def _nhwc_conv_supports(info: NodeInfo) -> str | None:
    known = ("auto_pad", "channels_last", "dilations", "group", "kernel_shape", "pads", "strides")
    rank = info.rank(0)
    if rank is not None and rank not in (3, 4, 5):
        return f"QLinearConv on a rank-{rank} input is not supported (accepted: 1 to 3 spatial dims)"
    # The weight's scale and zero point may be one per output channel.
    return first_reason(attrs_reason(info, known), dtype_reason(info, (0, 2, 3, 5, 7), _EIGHT_BIT),
                        dtype_reason(info, (1, 4, 6), _FLOAT), scalar_params_reason(info, (1, 2, 6, 7)),
                        dtype_reason(info, (8,), frozenset({ir.DataType.INT32})))


@register("QLinearConv", domain=MS_DOMAIN, supports=_nhwc_conv_supports)
def _nhwc_qlinear_conv(info: NodeInfo) -> Callable[..., Any]:
    """ONNX's QLinearConv (its lowering reads the same attributes), on channels-last data where
    ``channels_last`` says so: what ONNX Runtime's layout optimizer writes (the weight stays
    O x I x spatial)."""
    conv = _delegate("QLinearConv").lower(info)
    if not info.attr("channels_last", 0):
        return conv

    def nhwc_qlinear_conv(x: torch.Tensor, *rest: torch.Tensor | None) -> torch.Tensor:
        return conv(x.movedim(-1, 1), *rest).movedim(1, -1)

    return nhwc_qlinear_conv


def _nhwc_max_pool_supports(info: NodeInfo) -> str | None:
    known = ("auto_pad", "ceil_mode", "dilations", "kernel_shape", "pads", "strides")
    reason = first_reason(attrs_reason(info, known), dtype_reason(info, (0,), _EIGHT_BIT))
    if reason is None and not info.attr("kernel_shape"):
        return "NhwcMaxPool needs kernel_shape"
    return reason or spatial_rank(info)


@register("NhwcMaxPool", domain=MS_DOMAIN, supports=_nhwc_max_pool_supports)
def _nhwc_max_pool(info: NodeInfo) -> Callable[..., Any]:
    """MaxPool of 8-bit channels-last data (ONNX's lowering, which reads the same attributes)."""
    pool = max_pool(info)

    def nhwc_max_pool(x: torch.Tensor) -> torch.Tensor:
        return pool(x.movedim(-1, 1)).movedim(1, -1)

    return nhwc_max_pool
