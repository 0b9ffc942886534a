"""OpenVINO's Interpolate in its three Python forms, as ONNX Resize (opset 17).

``interpolate(image, output_shape, attrs)`` is Interpolate-1 (``openvino.opset1`` to ``opset9``),
``interpolate(image, output_shape, scales, mode, shape_calculation_mode, ...)`` Interpolate-4
(``opset10``) and ``interpolate(image, scales_or_sizes, mode, shape_calculation_mode, ...)``
Interpolate-11 (``opset11`` on); the one function here tells them apart by the third argument
(a dict, a tensor or a mode string).  What ONNX Resize cannot do (antialiasing, nearest_mode ``"simple"``
where it is not plain floor or ceil) is refused with an InputError.  The Pillow modes
(``bilinear_pillow``, ``bicubic_pillow``, Interpolate-11) are MatMuls by constant weights along
each resized axis, so they need static input dims there and constant sizes or scales.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx_ir as ir

from inferplex._opsets.build import NodeInput, constant_data, constant_ints, make_op, rank_of, step, value_of
from inferplex.api.nodes import Node
from inferplex.errors import InputError

__all__ = ["interpolate"]

_MODES = {"nearest": "nearest", "linear": "linear", "linear_onnx": "linear", "cubic": "cubic"}
_COORDINATES = ("half_pixel", "pytorch_half_pixel", "asymmetric", "tf_half_pixel_for_nn", "align_corners")
_NEAREST = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")
_PILLOW = {"bilinear_pillow": 1.0, "bicubic_pillow": 2.0}
"""The Pillow modes and their filters' support (in input pixels, when growing)."""
_PILLOW_CUBIC = -0.5
"""Pillow's bicubic coefficient (OpenVINO's bicubic_pillow takes it whatever ``cube_coeff``)."""


def interpolate(image: NodeInput, *args: Any, **kwargs: Any) -> Node:
    """Resize ``image`` along some axes (OpenVINO's Interpolate-1, -4 or -11, by the arguments).

    - ``interpolate(image, output_shape, attrs, name=None)``: ``attrs`` a dict with ``axes``,
      ``mode`` (nearest, linear, cubic), ``align_corners`` (default True), ``pads_begin``/``pads_end``.
    - ``interpolate(image, output_shape, scales, mode, shape_calculation_mode, pads_begin=None,
      pads_end=None, coordinate_transformation_mode="half_pixel", nearest_mode="round_prefer_floor",
      antialias=False, cube_coeff=-0.75, axes=None, name=None)``.
    - ``interpolate(image, scales_or_sizes, mode, shape_calculation_mode, ...)``, the rest as above.

    ``mode`` is nearest, linear, linear_onnx, cubic, bilinear_pillow or bicubic_pillow;
    ``shape_calculation_mode`` "sizes" or "scales"; ``axes`` default to every axis.
    """
    third = args[1] if len(args) > 1 else kwargs.get("attrs", kwargs.get("scales", kwargs.get("mode")))
    if isinstance(third, dict):
        return _interpolate_1(image, *args, **kwargs)
    if "scales" in kwargs or "output_shape" in kwargs or (len(args) > 1 and not isinstance(third, str)):
        return _interpolate_4(image, *args, **kwargs)
    return _interpolate_11(image, *args, **kwargs)


def _interpolate_11(image: NodeInput, scales_or_sizes: NodeInput, mode: str, shape_calculation_mode: str,
                    pads_begin: Sequence[int] | None = None, pads_end: Sequence[int] | None = None,
                    coordinate_transformation_mode: str = "half_pixel",
                    nearest_mode: str = "round_prefer_floor", antialias: bool = False,
                    cube_coeff: float = -0.75, axes: NodeInput = None, name: str | None = None) -> Node:
    return _interpolate_4(image, scales_or_sizes, scales_or_sizes, mode, shape_calculation_mode, pads_begin,
                          pads_end, coordinate_transformation_mode, nearest_mode, antialias, cube_coeff, axes,
                          name)


def _interpolate_4(image: NodeInput, output_shape: NodeInput, scales: NodeInput, mode: str,
                   shape_calculation_mode: str, pads_begin: Sequence[int] | None = None,
                   pads_end: Sequence[int] | None = None, coordinate_transformation_mode: str = "half_pixel",
                   nearest_mode: str = "round_prefer_floor", antialias: bool = False,
                   cube_coeff: float = -0.75, axes: NodeInput = None, name: str | None = None) -> Node:
    kind = str(mode).lower()
    if kind in _PILLOW:
        by = _choice(shape_calculation_mode, ("sizes", "scales"), "shape_calculation_mode")
        x = _padded(value_of(image), pads_begin, pads_end)
        return _pillow(x, output_shape if by == "sizes" else scales, by, axes, kind, name)
    if kind not in _MODES:
        raise InputError(f"interpolate mode {mode!r}: ONNX Resize has no {kind!r}; "
                         f"accepted: {', '.join([*_MODES, *_PILLOW])}")
    if antialias:
        raise InputError("interpolate with antialias=True: ONNX Resize antialiases from opset 18 only; "
                         "accepted: antialias=False")
    coordinate = _choice(coordinate_transformation_mode, _COORDINATES, "coordinate_transformation_mode")
    nearest = _choice(nearest_mode, _NEAREST, "nearest_mode")
    by = _choice(shape_calculation_mode, ("sizes", "scales"), "shape_calculation_mode")
    x = _padded(value_of(image), pads_begin, pads_end)
    attrs = {"mode": _MODES[kind], "coordinate_transformation_mode": coordinate, "nearest_mode": nearest,
             "cubic_coeff_a": float(cube_coeff)}
    return _resize(x, output_shape if by == "sizes" else scales, by, axes, attrs, name)


def _interpolate_1(image: NodeInput, output_shape: NodeInput, attrs: dict[str, Any],
                   name: str | None = None) -> Node:
    """Interpolate-1 as OpenVINO runs it (its ConvertInterpolate1ToInterpolate4): sizes, asymmetric
    coordinates unless ``align_corners``, nearest_mode "simple" (floor up, ceil down)."""
    options = dict(attrs)
    unknown = set(options) - {"axes", "mode", "align_corners", "antialias", "pads_begin", "pads_end"}
    if unknown or "axes" not in options or "mode" not in options:
        raise InputError(f"interpolate attrs {sorted(options)}: needs 'axes' and 'mode'; may have "
                         "'align_corners', 'antialias', 'pads_begin', 'pads_end'")
    x = value_of(image)
    rank = rank_of(x, "interpolate")
    axes = [int(a) for a in options["axes"]]
    kind = str(options["mode"]).lower()
    if kind not in ("nearest", "linear", "cubic") or (kind == "linear" and rank > 5):
        raise InputError(f"interpolate (opset 1) mode {kind!r} on rank {rank}; accepted: nearest, cubic, "
                         "and linear up to rank 5")
    begin, end = _spatial_pads(options.get("pads_begin"), rank), _spatial_pads(options.get("pads_end"), rank)
    coordinate = "asymmetric"
    if options.get("align_corners", True):
        coordinate = "align_corners"
    elif kind == "linear" and not any(begin + end) and not (rank == 4 and sorted(axes) == [2, 3]):
        coordinate = "half_pixel"
    nearest = _simple_nearest(x, output_shape, axes) if kind == "nearest" else "round_prefer_floor"
    return _interpolate_4(x, output_shape, output_shape, kind, "sizes", begin, end, coordinate, nearest,
                          bool(options.get("antialias", False)), -0.75, axes, name)


def _spatial_pads(pads: Any, rank: int) -> list[int]:
    values = [int(p) for p in np.asarray(pads if pads is not None else 0).reshape(-1)]
    return values * rank if len(values) == 1 else values


def _simple_nearest(x: ir.Value, output_shape: NodeInput, axes: list[int]) -> str:
    """Interpolate-1's nearest index rounds up where an axis shrinks and down where it grows."""
    sizes = constant_data(output_shape)
    dims = [x.shape[a] if x.shape is not None else None for a in axes]
    if sizes is None or not all(isinstance(d, int) for d in dims):
        raise InputError("interpolate (opset 1) mode 'nearest' needs a constant output_shape and static "
                         "input dims on the axes: its rounding depends on whether each axis grows")
    lengths = [d for d in dims if isinstance(d, int)]
    shrinks = {int(s) < d for s, d in zip(np.asarray(sizes).reshape(-1), lengths, strict=True)}
    if len(shrinks) > 1:
        raise InputError("interpolate (opset 1) mode 'nearest' growing some axes and shrinking others: "
                         "ONNX Resize takes one nearest_mode for all of them")
    return "ceil" if shrinks == {True} else "floor"


def _padded(x: ir.Value, pads_begin: Sequence[int] | None, pads_end: Sequence[int] | None) -> ir.Value:
    begin = [] if pads_begin is None else [int(p) for p in pads_begin]
    end = [] if pads_end is None else [int(p) for p in pads_end]
    if not any(begin + end):
        return x
    rank = rank_of(x, "interpolate with pads")
    begin, end = begin + [0] * (rank - len(begin)), end + [0] * (rank - len(end))
    return step("Pad", [x, np.array(begin + end, np.int64)])


def _resize(x: ir.Value, target: NodeInput, by: str, axes: NodeInput, attrs: dict[str, Any],
            name: str | None) -> Node:
    rank = rank_of(x, "interpolate")
    axis_list = list(range(rank))
    if axes is not None:
        axis_list = [a % rank for a in constant_ints(axes, "interpolate axes")]
    dtype = np.int64 if by == "sizes" else np.float32
    data = constant_data(target)
    if data is not None:
        values = np.asarray(data, dtype=dtype).reshape(-1)
        if len(values) != len(axis_list):
            raise InputError(f"interpolate: {len(values)} {by} for axes {axis_list}; give one per axis")
        if axis_list == list(range(rank)):
            full = value_of(values)
        elif by == "scales":
            full = value_of(_scattered(np.ones(rank, np.float32), axis_list, values))
        else:
            full = _into_shape(x, axis_list, value_of(values))
    else:
        computed = step("Cast", [target], {"to": int(ir.DataType.from_numpy(np.dtype(dtype)))})
        if axis_list == list(range(rank)):
            full = computed
        else:
            base = step("Shape", [x]) if by == "sizes" else value_of(np.ones(rank, np.float32))
            full = step("ScatterElements", [base, np.array(axis_list, np.int64), computed])
    inputs = [x, None, full, None] if by == "scales" else [x, None, None, full]
    return make_op("Interpolate", "Resize", inputs, attrs, name)


def _pillow(x: ir.Value, target: NodeInput, by: str, axes: NodeInput, kind: str, name: str | None) -> Node:
    """Pillow's resampling: along each resized axis, each output element a weighted sum of the input
    elements its filter (stretched by the shrink factor when shrinking, so antialiased) covers,
    as a MatMul by the constant weights."""
    rank = rank_of(x, "interpolate")
    axis_list = list(range(rank)) if axes is None else [
        a % rank for a in constant_ints(axes, "interpolate axes")]
    data = constant_data(target)
    dims = [x.shape[a] if x.shape is not None else None for a in axis_list]
    if data is None or not all(isinstance(d, int) for d in dims):
        raise InputError(f"interpolate mode {kind!r} needs constant {by} and static input dims on the axes "
                         f"{axis_list}: its weights are computed from the sizes as the model is built")
    if x.dtype not in (ir.DataType.FLOAT, ir.DataType.FLOAT16, ir.DataType.BFLOAT16, ir.DataType.DOUBLE):
        raise InputError(f"interpolate mode {kind!r} of {x.dtype}: it takes floating-point data here")
    values = np.asarray(data).reshape(-1)
    if len(values) != len(axis_list):
        raise InputError(f"interpolate: {len(values)} {by} for axes {axis_list}; give one per axis")
    out = x
    for axis, size, value in zip(axis_list, dims, values, strict=True):
        assert isinstance(size, int)
        target_size = int(value) if by == "sizes" else int(np.floor(size * float(np.float32(value))))
        if target_size == size:
            continue
        weights = _pillow_weights(size, target_size, kind).T.astype(x.dtype.numpy())
        if axis == rank - 1:
            out = step("MatMul", [out, weights])
            continue
        order = [*range(axis), *range(axis + 1, rank), axis]
        moved = step("MatMul", [step("Transpose", [out], {"perm": order}), weights])
        out = step("Transpose", [moved], {"perm": [int(i) for i in np.argsort(order)]})
    return make_op("Interpolate", "Identity", [out], {}, name)


def _pillow_weights(size: int, target: int, kind: str) -> np.ndarray:
    """[target, size]: Pillow's resampling weights of one axis (its ``precompute_coeffs``)."""
    weights = np.zeros((target, size))
    if target == 0 or size == 0:
        return weights
    scale = size / target
    stretch = max(scale, 1.0)
    support = _PILLOW[kind] * stretch
    for index in range(target):
        center = (index + 0.5) * scale
        first = max(int(center - support + 0.5), 0)
        last = min(int(center + support + 0.5), size)
        taps = _pillow_filter((np.arange(first, last) - center + 0.5) / stretch, kind)
        total = taps.sum()
        weights[index, first:last] = taps / total if total else taps
    return weights


def _pillow_filter(t: np.ndarray, kind: str) -> np.ndarray:
    t = np.abs(t)
    if kind == "bilinear_pillow":
        return np.maximum(1.0 - t, 0.0)
    a = _PILLOW_CUBIC
    near = ((a + 2) * t - (a + 3)) * t * t + 1
    far = (((t - 5) * t + 8) * t - 4) * a
    return np.where(t < 1, near, np.where(t < 2, far, 0.0))


def _scattered(base: np.ndarray, axes: list[int], values: np.ndarray) -> np.ndarray:
    base[axes] = values
    return base


def _into_shape(x: ir.Value, axes: list[int], sizes: ir.Value) -> ir.Value:
    dims = [x.shape[a] if x.shape is not None else None for a in range(len(x.shape or []))]
    if all(isinstance(d, int) for d in dims):
        return value_of(_scattered(np.array(dims, np.int64), axes, sizes.const_value.numpy()))  # type: ignore[union-attr]
    return step("ScatterElements", [step("Shape", [x]), np.array(axes, np.int64), sizes])


def _choice(value: str, accepted: Sequence[str], what: str) -> str:
    kind = str(value).lower()
    if kind not in accepted:
        raise InputError(f"interpolate {what} {value!r}; accepted: {', '.join(accepted)}")
    return kind
