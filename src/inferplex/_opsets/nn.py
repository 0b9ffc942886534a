"""OpenVINO's neural-network layers beyond :mod:`inferplex.opset`'s: BatchNormInference,
GroupConvolution, (Group)ConvolutionBackpropData, MVN, GroupNormalization, NormalizeL2, LRN, Einsum
and (opset 13) ScaledDotProductAttention, each as the ONNX ops that compute the same thing.

DeformableConvolution (opset 8) has no ONNX equivalent: it is the ``org.openvinotoolkit`` domain's
DeformableConv2D, which OpenVINO's ONNX reader makes a DeformableConvolution-8 of, so a model
holding it runs on the CPU device's OpenVINO engine (not on ONNX Runtime, nor on the GPU).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx_ir as ir

from inferplex._opsets.build import (
    NodeInput,
    as_op,
    constant_ints,
    inferred_dims,
    like,
    make_custom,
    make_op,
    rank_of,
    static_dims,
    step,
    value_of,
)
from inferplex.api.nodes import Node
from inferplex.errors import InputError

__all__ = ["batch_norm_inference", "convolution_backprop_data", "deformable_convolution", "einsum",
           "group_convolution",
           "group_convolution_backprop_data", "group_normalization", "lrn", "mvn", "normalize_l2",
           "scaled_dot_product_attention"]

_EPS_MODES = ("inside_sqrt", "outside_sqrt")


def batch_norm_inference(data: NodeInput, gamma: NodeInput, beta: NodeInput, mean: NodeInput,
                         variance: NodeInput, epsilon: float, name: str | None = None) -> Node:
    """``gamma * (x - mean) / sqrt(variance + epsilon) + beta`` per channel (dim 1)."""
    x = value_of(data)
    stats = [value_of(v, x.dtype) for v in (gamma, beta, mean, variance)]
    return make_op("BatchNormInference", "BatchNormalization", [x, *stats], {"epsilon": float(epsilon)}, name)


def group_convolution(data: NodeInput, filters: NodeInput, strides: Sequence[int], pads_begin: Sequence[int],
                      pads_end: Sequence[int], dilations: Sequence[int], auto_pad: str = "EXPLICIT",
                      name: str | None = None) -> Node:
    """Convolution in groups; ``filters`` are ``[groups, C_out / groups, C_in / groups, k...]``
    (OpenVINO's layout, of static shape), folded into ONNX's ``[C_out, C_in / groups, k...]``."""
    from inferplex.opset import _pads

    weights = value_of(filters)
    dims = static_dims(weights, "group_convolution filters")
    folded = step("Reshape", [weights, np.array([dims[0] * dims[1], *dims[2:]], np.int64)])
    attrs = {"group": dims[0], "strides": list(strides), "dilations": list(dilations),
             **_pads(pads_begin, pads_end, auto_pad)}
    return make_op("GroupConvolution", "Conv", [value_of(data), folded], attrs, name)


def convolution_backprop_data(data: NodeInput, filters: NodeInput, strides: Sequence[int],
                              output_shape: NodeInput = None, pads_begin: Sequence[int] | None = None,
                              pads_end: Sequence[int] | None = None, dilations: Sequence[int] | None = None,
                              auto_pad: str | None = None, output_padding: Sequence[int] | None = None,
                              name: str | None = None) -> Node:
    """Transposed convolution (ONNX ConvTranspose); ``filters`` are ``[C_in, C_out, k...]``.
    ``output_shape`` is not taken: ONNX spreads the padding it implies differently."""
    weights = value_of(filters)
    geometry = (strides, output_shape, pads_begin, pads_end, dilations, auto_pad, output_padding)
    return _transposed("ConvolutionBackpropData", value_of(data), weights, 1, geometry, name)


def group_convolution_backprop_data(data: NodeInput, filters: NodeInput, strides: Sequence[int],
                                    output_shape: NodeInput = None,
                                    pads_begin: Sequence[int] | None = None,
                                    pads_end: Sequence[int] | None = None,
                                    dilations: Sequence[int] | None = None, auto_pad: str = "EXPLICIT",
                                    output_padding: Sequence[int] | None = None,
                                    name: str | None = None) -> Node:
    """Transposed convolution in groups; ``filters`` are ``[groups, C_in / groups, C_out / groups,
    k...]`` (of static shape), folded into ONNX's ``[C_in, C_out / groups, k...]``."""
    weights = value_of(filters)
    dims = static_dims(weights, "group_convolution_backprop_data filters")
    folded = step("Reshape", [weights, np.array([dims[0] * dims[1], *dims[2:]], np.int64)])
    geometry = (strides, output_shape, pads_begin, pads_end, dilations, auto_pad, output_padding)
    return _transposed("GroupConvolutionBackpropData", value_of(data), folded, dims[0], geometry, name)


def _transposed(type_name: str, x: ir.Value, weights: ir.Value, group: int, geometry: tuple[Any, ...],
                name: str | None) -> Node:
    from inferplex.opset import _pads

    strides, output_shape, pads_begin, pads_end, dilations, auto_pad, output_padding = geometry
    if output_shape is not None:
        raise InputError(f"{type_name} with output_shape: ONNX ConvTranspose places the implied padding "
                         "differently; give pads_begin/pads_end (and output_padding)")
    spatial = rank_of(weights, type_name) - 2
    attrs: dict[str, Any] = {"strides": list(strides), "dilations": list(dilations or [1] * spatial),
                             **_pads(pads_begin or [0] * spatial, pads_end or [0] * spatial, auto_pad)}
    if output_padding:
        attrs["output_padding"] = list(output_padding)
    if group != 1:
        attrs["group"] = group
    return make_op(type_name, "ConvTranspose", [x, weights], attrs, name)


def mvn(data: NodeInput, axes: NodeInput = None, normalize_variance: bool = False, eps: float = 1e-9,
        eps_mode: str = "inside_sqrt", name: str | None = None, *,
        across_channels: bool | None = None) -> Node:
    """Mean-variance normalization: ``(x - mean) / sqrt(var + eps)`` (``eps_mode`` "inside_sqrt")
    or ``/ (sqrt(var) + eps)`` ("outside_sqrt") over ``axes``; without ``normalize_variance`` only
    the mean is subtracted.  OpenVINO's MVN-1 form, ``mvn(data, across_channels, normalize_variance,
    eps)``, normalizes over the spatial dims (and the channels with ``across_channels``)."""
    x = value_of(data)
    if axes is None or isinstance(axes, bool | np.bool_):  # MVN-1: across_channels in axes' place
        across = bool(axes) if across_channels is None else bool(across_channels)
        reduce_axes = list(range(1 if across else 2, rank_of(x, "mvn")))
        mode = "inside_sqrt"
    else:
        reduce_axes = constant_ints(axes, "mvn axes")
        mode = str(eps_mode).lower()
        if mode not in _EPS_MODES:
            raise InputError(f"mvn eps_mode {eps_mode!r}; accepted: {', '.join(_EPS_MODES)}")
    centred = step("Sub", [x, step("ReduceMean", [x], {"axes": reduce_axes, "keepdims": 1})])
    if not normalize_variance:
        return as_op("MVN", centred, name)
    variance = step("ReduceMean", [step("Mul", [centred, centred])], {"axes": reduce_axes, "keepdims": 1})
    if mode == "inside_sqrt":
        spread = step("Sqrt", [step("Add", [variance, like(x, eps)])])
    else:
        spread = step("Add", [step("Sqrt", [variance]), like(x, eps)])
    return make_op("MVN", "Div", [centred, spread], {}, name)


def group_normalization(data: NodeInput, scale: NodeInput, bias: NodeInput, num_groups: int, epsilon: float,
                        name: str | None = None) -> Node:
    """``(x - mean) / sqrt(var + epsilon) * scale + bias``, the statistics over each of
    ``num_groups`` groups of channels (dim 1) with their spatial dims; ``scale``/``bias`` per channel."""
    x = value_of(data)
    rank = rank_of(x, "group_normalization")
    grouped = step("Reshape", [x, np.array([0, int(num_groups), -1], np.int64)])
    centred = step("Sub", [grouped, step("ReduceMean", [grouped], {"axes": [2], "keepdims": 1})])
    variance = step("ReduceMean", [step("Mul", [centred, centred])], {"axes": [2], "keepdims": 1})
    normal = step("Div", [centred, step("Sqrt", [step("Add", [variance, like(x, epsilon)])])])
    restored = step("Reshape", [normal, step("Shape", [x])])
    per_channel = np.arange(1, rank - 1, dtype=np.int64)
    scaled = step("Mul", [restored, step("Unsqueeze", [value_of(scale, x.dtype), per_channel])])
    shift = step("Unsqueeze", [value_of(bias, x.dtype), per_channel])
    return make_op("GroupNormalization", "Add", [scaled, shift], {}, name)


def normalize_l2(data: NodeInput, axes: NodeInput, eps: float, eps_mode: str,
                 name: str | None = None) -> Node:
    """``x / sqrt(sum(x ** 2) + eps)`` (``eps_mode`` "add") or ``/ sqrt(max(sum, eps))`` ("max")
    over ``axes``."""
    kind = str(eps_mode).lower()
    if kind not in ("add", "max"):
        raise InputError(f"normalize_l2 eps_mode {eps_mode!r}; accepted: 'add', 'max'")
    x = value_of(data)
    axis_list = np.array(constant_ints(axes, "normalize_l2 axes"), np.int64)
    total = step("ReduceSum", [step("Mul", [x, x]), axis_list], {"keepdims": 1})
    guarded = step("Add" if kind == "add" else "Max", [total, like(x, eps)])
    return make_op("NormalizeL2", "Div", [x, step("Sqrt", [guarded])], {}, name)


def lrn(data: NodeInput, axes: NodeInput, alpha: float = 1, beta: float = 0.5, bias: float = 1, size: int = 5,
        name: str | None = None) -> Node:
    """Local response normalization across channels (``axes`` [1], ONNX LRN's only form)."""
    if constant_ints(axes, "lrn axes") != [1]:
        raise InputError(f"lrn axes {constant_ints(axes, 'lrn axes')}: ONNX LRN normalizes across the "
                         "channels only; accepted: [1]")
    attrs = {"alpha": float(alpha), "beta": float(beta), "bias": float(bias), "size": int(size)}
    return make_op("LRN", "LRN", [value_of(data)], attrs, name)


def einsum(inputs: Sequence[NodeInput], equation: str, name: str | None = None) -> Node:
    """Einstein summation over ``inputs`` by ``equation`` (``"ij,jk->ik"``)."""
    return make_op("Einsum", "Einsum", [value_of(v) for v in inputs], {"equation": str(equation)}, name)


def scaled_dot_product_attention(query: NodeInput, key: NodeInput, value: NodeInput,
                                 attention_mask: NodeInput = None, scale: NodeInput = None,
                                 causal: bool = False, name: str | None = None) -> Node:
    """``softmax(query @ key^T * scale + bias) @ value``; ``scale`` is ``1 / sqrt(query.shape[-1])``
    by default; ``bias`` masks the keys after each query with ``causal``, else comes from
    ``attention_mask`` (added, or -inf where a boolean mask is False)."""
    q, k, v = value_of(query), value_of(key), value_of(value)
    rank = rank_of(k, "scaled_dot_product_attention key")
    k_t = step("Transpose", [k], {"perm": [*range(rank - 2), rank - 1, rank - 2]})
    scores = step("Mul", [step("MatMul", [q, k_t]), _scale(q, scale)])
    if causal:
        rows = step("Shape", [q], {"start": -2, "end": -1})
        cols = step("Shape", [k], {"start": -2, "end": -1})
        blocked = step("Expand", [like(q, -np.inf), step("Concat", [rows, cols], {"axis": 0})])
        scores = step("Add", [scores, step("Trilu", [blocked, np.array(1, np.int64)], {"upper": 1})])
    elif attention_mask is not None:
        mask = value_of(attention_mask, q.dtype)
        if mask.dtype == ir.DataType.BOOL:
            mask = step("Where", [mask, like(q, 0), like(q, -np.inf)])
        scores = step("Add", [scores, mask])
    weights = step("Softmax", [scores], {"axis": -1})
    return make_op("ScaledDotProductAttention", "MatMul", [weights, v], {}, name)


def _scale(q: ir.Value, scale: NodeInput) -> ir.Value:
    if scale is not None:
        return value_of(scale, q.dtype)
    depth = q.shape[-1] if q.shape is not None and len(q.shape) else None
    if isinstance(depth, int):
        return like(q, 1 / np.sqrt(depth))
    size = step("Cast", [step("Shape", [q], {"start": -1})], {"to": int(q.dtype or ir.DataType.FLOAT)})
    return step("Reciprocal", [step("Sqrt", [size])])


_DEFORMABLE_PADS = {"explicit": "NOTSET", "notset": "NOTSET", "same_upper": "SAME_UPPER",
                    "same_lower": "SAME_LOWER", "valid": "VALID"}


def deformable_convolution(data: NodeInput, offsets: NodeInput, filters: NodeInput, strides: Sequence[int],
                           pads_begin: Sequence[int], pads_end: Sequence[int], dilations: Sequence[int],
                           mask: NodeInput = None, auto_pad: str = "EXPLICIT", group: int = 1,
                           deformable_group: int = 1, bilinear_interpolation_pad: bool = False,
                           name: str | None = None) -> Node:
    """A 2-D convolution of ``data`` [N, C, H, W] by ``filters`` [C_out, C / group, kH, kW] whose
    taps are moved by ``offsets`` [N, 2 * deformable_group * kH * kW, H_out, W_out] (bilinear
    sampling, zero outside) and, with ``mask`` [N, deformable_group * kH * kW, H_out, W_out],
    scaled by it.  ``bilinear_interpolation_pad`` must be False (OpenVINO's ONNX reader sets no other)."""
    from inferplex._opsets.detection import OPENVINO_DOMAIN

    if bilinear_interpolation_pad:
        raise InputError("deformable_convolution with bilinear_interpolation_pad=True: OpenVINO's ONNX "
                         "reader builds it with False only; accepted: False")
    padding = _DEFORMABLE_PADS.get(str(auto_pad or "explicit").lower())
    if padding is None:
        raise InputError(f"deformable_convolution auto_pad {auto_pad!r}; accepted: "
                         f"{', '.join(_DEFORMABLE_PADS)}")
    x, w = value_of(data), value_of(filters)
    geometry: dict[str, Any] = {"strides": [int(v) for v in strides],
                                "dilations": [int(v) for v in dilations], "group": int(group)}
    if padding == "NOTSET":
        geometry["pads"] = [int(v) for v in (*pads_begin, *pads_end)]
    else:
        geometry["auto_pad"] = padding
    dims = inferred_dims("Conv", [x, w], geometry, "deformable_convolution")
    inputs = [x, value_of(offsets), w] + ([] if mask is None else [value_of(mask)])
    return make_custom("DeformableConvolution", OPENVINO_DOMAIN, "DeformableConv2D", inputs,
                       {**geometry, "deformable_groups": int(deformable_group)}, name,
                       [(x.dtype or ir.DataType.FLOAT, dims)])
