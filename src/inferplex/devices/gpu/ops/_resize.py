"""Lowerings: Resize and Upsample, exact for every ONNX mode torch can gather.

ONNX resizing is separable: each output element along an axis is a fixed
weighted sum of a few input elements along that axis (1 for nearest, 2 for
linear, 4 for cubic, more with antialias).  For each axis and input length the
taps (indices and weights) are computed on the host with ONNX's own formulas
(coordinate transformation, nearest rounding, cubic coefficients,
exclude_outside, extrapolation), cached, and applied on the device with
``index_select``; so every coordinate mode matches ONNX instead of the few that
``F.interpolate`` happens to share.  Scales, sizes and roi computed at run time are read back to the host
(the program then runs without CUDA graphs).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import lru_cache
from typing import Any

import numpy as np
import onnx_ir as ir
import torch

from inferplex.devices.gpu.ops._common import text
from inferplex.devices.gpu.registry import NodeInfo, register

_FLOATS = (ir.DataType.FLOAT, ir.DataType.DOUBLE, ir.DataType.FLOAT16, ir.DataType.BFLOAT16)
_INTEGERS = (ir.DataType.UINT8, ir.DataType.INT8, ir.DataType.INT16, ir.DataType.INT32, ir.DataType.INT64)
"""Interpolated in floating point, then truncated toward zero and clamped to the type's range,
as ONNX's reference and ONNX Runtime give (a u8 image resized by PrePostProcessor, say)."""
_COORD_MODES = ("half_pixel", "asymmetric", "align_corners", "pytorch_half_pixel", "tf_crop_and_resize",
                "half_pixel_symmetric")
_NEAREST_MODES = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil", "simple")


def _nearest(ratio: float, scale: float, mode: str) -> list[float]:
    if ratio == 1:
        return [0.0, 1.0]
    if mode == "simple":  # opset 10 Resize and Upsample: floor upsampling, ceil downsampling
        mode = "ceil" if scale < 1 else "floor"
    up = {"round_prefer_floor": ratio > 0.5, "round_prefer_ceil": ratio >= 0.5,
          "floor": False, "ceil": True}[mode]
    return [0.0, 1.0] if up else [1.0, 0.0]


def _linear(ratio: float, scale: float, antialias: bool) -> list[float]:
    if not antialias:
        return [1 - ratio, ratio]
    scale = min(scale, 1.0)
    start = int(np.floor(-1 / scale) + 1)
    args = (np.arange(start, 2 - start) - ratio) * scale
    coeffs = np.clip(1 - np.abs(args), 0, 1)
    return list(coeffs / coeffs.sum())


def _cubic(ratio: float, scale: float, a: float, antialias: bool) -> list[float]:
    if not antialias:
        r, s = ratio, 1 - ratio
        return [((a * (r + 1) - 5 * a) * (r + 1) + 8 * a) * (r + 1) - 4 * a,
                ((a + 2) * r - (a + 3)) * r * r + 1,
                ((a + 2) * s - (a + 3)) * s * s + 1,
                ((a * (s + 1) - 5 * a) * (s + 1) + 8 * a) * (s + 1) - 4 * a]
    scale = min(scale, 1.0)

    def coeff(x: float) -> float:
        x = abs(x)
        if x <= 1:
            return (a + 2) * x ** 3 - (a + 3) * x ** 2 + 1
        return a * x ** 3 - 5 * a * x ** 2 + 8 * a * x - 4 * a if x < 2 else 0.0

    start = int(np.floor(-2 / scale) + 1)
    coeffs = np.array([coeff(scale * (i - ratio)) for i in range(start, 2 - start)])
    return list(coeffs / coeffs.sum())


def _neighbours(x: float, n: int, size: int) -> list[int]:
    """The n indexes of the edge-padded axis nearest to x (ties to the smaller), unpadded."""
    pad = math.ceil(n / 2)
    centre, limit = x + pad, size + 2 * pad
    base = math.floor(centre)
    candidates = [i for i in range(base - n, base + n + 2) if 0 <= i < limit]
    chosen = sorted(sorted(candidates, key=lambda i: (abs(centre - i), i))[:n])
    return [i - pad for i in chosen]


class _Spec:
    """Attributes of one Resize node, as plain values."""

    def __init__(self, info: NodeInfo, upsample: bool):
        legacy = upsample or info.opset < 11
        self.mode = text(info.attr("mode", "nearest"))
        self.coord = ("asymmetric" if legacy
                      else text(info.attr("coordinate_transformation_mode", "half_pixel")))
        self.nearest = "simple" if legacy else text(info.attr("nearest_mode", "round_prefer_floor"))
        self.a = float(info.attr("cubic_coeff_a", -0.75))
        self.exclude = bool(info.attr("exclude_outside", 0))
        self.extrapolation = float(info.attr("extrapolation_value", 0.0))
        self.antialias = bool(info.attr("antialias", 0))
        self.policy = text(info.attr("keep_aspect_ratio_policy", "stretch"))
        self.axes = info.attr("axes")

    def coeffs(self, ratio: float, scale: float) -> list[float]:
        if self.mode == "nearest":
            return _nearest(ratio, scale, self.nearest)
        if self.mode == "linear":
            return _linear(ratio, scale, self.antialias)
        return _cubic(ratio, scale, self.a, self.antialias)

    def origin(self, x: int, size: int, out: int, scale: float, roi: tuple[float, float]) -> float | None:
        """ONNX's source coordinate of output position x; None where tf_crop_and_resize extrapolates."""
        width = scale * size
        if self.coord == "align_corners":
            return 0.0 if width == 1 else x * (size - 1) / (width - 1)
        if self.coord == "asymmetric":
            return x / scale
        if self.coord == "tf_crop_and_resize":
            start, end = roi
            if width == 1:
                value = (end - start) * (size - 1) / 2
            else:
                value = x * (end - start) * (size - 1) / (width - 1)
            value += start * (size - 1)
            return None if value < 0 or value > size - 1 else value
        if self.coord == "pytorch_half_pixel":
            return -0.5 if width == 1 else (x + 0.5) / scale - 0.5
        if self.coord == "half_pixel_symmetric":
            offset = size / 2 * (1 - out / width)
            return offset + (x + 0.5) / scale - 0.5
        return (x + 0.5) / scale - 0.5


def _axis_taps(spec: _Spec, size: int, out: int, scale: float,
               roi: tuple[float, float]) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """(indices [out, K], weights [out, K], extrapolated [out]) of one axis; None if it is the identity."""
    rows: list[list[tuple[int, float]]] = []
    extrapolated = np.zeros(out, dtype=bool)
    for x in range(out):
        origin = spec.origin(x, size, out, scale, roi)
        if origin is None:
            extrapolated[x] = True
            rows.append([])
            continue
        ratio = 1.0 if float(origin).is_integer() else origin - math.floor(origin)
        coeffs = spec.coeffs(ratio, scale)
        idx = _neighbours(origin, len(coeffs), size)
        if spec.exclude:
            coeffs = [0.0 if i < 0 or i >= size else c for c, i in zip(coeffs, idx, strict=False)]
            total = sum(coeffs)
            coeffs = [c / total for c in coeffs]
        taps: dict[int, float] = {}
        for c, i in zip(coeffs, idx, strict=False):
            if c != 0.0:
                clamped = min(max(i, 0), size - 1)
                taps[clamped] = taps.get(clamped, 0.0) + c
        rows.append(sorted(taps.items()))
    width = max(1, max(len(r) for r in rows))
    indices = np.zeros((out, width), dtype=np.int64)
    weights = np.zeros((out, width), dtype=np.float64)
    for x, row in enumerate(rows):
        for k, (i, c) in enumerate(row):
            indices[x, k], weights[x, k] = i, c
    identity = (out == size and width == 1 and not extrapolated.any()
                and np.array_equal(indices[:, 0], np.arange(size)) and np.all(weights == 1.0))
    return None if identity else (indices, weights, extrapolated)


def _layout(info: NodeInfo, upsample: bool) -> tuple[int | None, int | None, int | None]:
    """Input positions of (roi, scales, sizes) for this op and opset (None: not an input)."""
    if upsample:
        return None, (1 if info.opset >= 9 else None), None
    return (None, 1, None) if info.opset < 11 else (1, 2, 3)


def _const(info: NodeInfo, index: int | None) -> np.ndarray | None:
    value = info.const(index) if index is not None and info.has_input(index) else None
    return None if value is None or value.size == 0 else value


def _supports(info: NodeInfo, upsample: bool) -> str | None:
    spec = _Spec(info, upsample)
    if spec.mode not in ("nearest", "linear", "cubic") or (upsample and spec.mode == "cubic"):
        return f"{info.op_type} mode {spec.mode!r} is not supported"
    if spec.coord not in _COORD_MODES or spec.nearest not in _NEAREST_MODES:
        return f"{info.op_type} coordinate/nearest mode {spec.coord!r}/{spec.nearest!r} is not supported"
    if spec.policy not in ("stretch", "not_larger", "not_smaller"):
        return f"keep_aspect_ratio_policy {spec.policy!r} is not supported"
    if spec.mode == "nearest" and spec.antialias:
        return "antialias with mode 'nearest' is not defined"
    if upsample and info.opset < 9 and not info.attr("scales"):
        return "Upsample needs the scales attribute"
    if info.rank(0) is None:
        return f"{info.op_type} needs the input rank"
    dtype = info.input_dtypes[0]
    if spec.mode != "nearest" and dtype is not None and dtype not in (*_FLOATS, *_INTEGERS):
        return (f"{info.op_type} mode {spec.mode!r} on {dtype.name} is not supported "
                "(accepted: floating types, int8-int64, uint8)")
    return None


def _output_plan(spec: _Spec, shape: tuple[int, ...], roi: tuple[float, ...] | None,
                 scales: tuple[float, ...] | None, sizes: tuple[int, ...] | None
                 ) -> list[tuple[int, int, float, tuple[float, float]]]:
    """(axis, output length, scale, roi) for every axis of an input of this shape."""
    rank = len(shape)
    axes = [a % rank for a in spec.axes] if spec.axes else list(range(rank))
    outs, factors = list(shape), [1.0] * rank
    if sizes is not None:
        if spec.policy == "stretch":
            for a, s in zip(axes, sizes, strict=False):
                outs[a], factors[a] = int(s), int(s) / shape[a]
        else:
            pick = min if spec.policy == "not_larger" else max
            common = pick(s / shape[a] for a, s in zip(axes, sizes, strict=False))
            for a in axes:
                outs[a], factors[a] = math.floor(common * shape[a] + 0.5), common
    elif scales is not None:
        for a, scale in zip(axes, scales, strict=False):
            outs[a], factors[a] = math.floor(scale * shape[a]), float(scale)
    rois = [(0.0, 1.0)] * rank
    if roi is not None:
        n = len(roi) // 2
        for k, a in enumerate(axes if n == len(axes) else range(rank)):
            rois[a] = (float(roi[k]), float(roi[k + n]))
    return [(a, outs[a], factors[a], rois[a]) for a in range(rank)]


def _host(value: Any) -> tuple[float, ...] | None:
    if value is None:
        return None
    array = value.detach().cpu().numpy() if isinstance(value, torch.Tensor) else np.asarray(value)
    return None if array.size == 0 else tuple(array.reshape(-1).tolist())


def _lower(info: NodeInfo, upsample: bool) -> Callable[..., Any]:
    spec = _Spec(info, upsample)
    positions = _layout(info, upsample)
    constants = [_host(_const(info, p)) for p in positions]
    if upsample and info.opset < 9:
        constants[1] = tuple(float(s) for s in info.attr("scales"))
    # Scales or sizes computed at run time are read back to the host: no CUDA graph then.
    runtime = [p is not None and info.has_input(p) and _const(info, p) is None for p in positions]

    @lru_cache(maxsize=64)
    def taps(shape: tuple[int, ...], roi: Any, scales: Any, sizes: Any
             ) -> list[tuple[int, np.ndarray, np.ndarray, np.ndarray]]:
        sizes = None if sizes is None else tuple(int(s) for s in sizes)
        found = []
        for axis, out, scale, axis_roi in _output_plan(spec, shape, roi, scales, sizes):
            axis_taps = _axis_taps(spec, shape[axis], out, scale, axis_roi)
            if axis_taps is not None:
                found.append((axis, *axis_taps))
        return found[::-1]  # innermost axis first, as ONNX's nested interpolation does

    device_cache: dict[tuple[Any, ...], list[Any]] = {}

    def on_device(x: torch.Tensor, params: tuple[Any, ...]) -> list[Any]:
        # Index tables depend on the input's shape and live on its device: key on both.
        key = (tuple(x.shape), x.dtype, x.device, params)
        if key not in device_cache:
            if len(device_cache) >= 64:
                device_cache.pop(next(iter(device_cache)))
            entries = []
            for axis, idx, w, extra in taps(tuple(x.shape), *params):
                gather_only = idx.shape[1] == 1 and np.all(w == 1.0) and not extra.any()
                weights = None if gather_only else torch.tensor(w, dtype=x.dtype, device=x.device)
                fill = (torch.tensor(np.where(extra, spec.extrapolation, 0.0), dtype=x.dtype,
                                     device=x.device)
                        if extra.any() else None)
                entries.append((axis, torch.tensor(idx, device=x.device), weights, fill))
            device_cache[key] = entries
            return entries
        return device_cache[key]

    def run(x: torch.Tensor, *rest: Any) -> torch.Tensor:
        key = tuple(_host(rest[p - 1]) if runtime[i] and p - 1 < len(rest) else constants[i]
                    for i, p in enumerate(p if p is not None else 0 for p in positions))
        if spec.mode != "nearest" and not x.is_floating_point():
            wide = torch.float64 if x.element_size() >= 4 else torch.float32
            y = interpolate(x.to(wide), key)
            info_ = torch.iinfo(x.dtype)
            return torch.trunc(y).clamp_(info_.min, info_.max).to(x.dtype)
        return interpolate(x, key)

    def interpolate(x: torch.Tensor, key: tuple[Any, ...]) -> torch.Tensor:
        for axis, idx, weights, fill in on_device(x, key):
            view = [1] * x.dim()
            view[axis] = -1
            if weights is None:
                x = x.index_select(axis, idx[:, 0])
                continue
            y = x.index_select(axis, idx[:, 0]) * weights[:, 0].reshape(view)
            for k in range(1, idx.shape[1]):
                y = y + x.index_select(axis, idx[:, k]) * weights[:, k].reshape(view)
            x = y if fill is None else y + fill.reshape(view)
        return x

    run.data_dependent = any(runtime)  # type: ignore[attr-defined]
    return run


@register("Resize", versions=(10, None), supports=lambda info: _supports(info, False))
def resize(info: NodeInfo) -> Callable[..., Any]:
    return _lower(info, False)


@register("Upsample", versions=(7, 9), supports=lambda info: _supports(info, True))
def upsample(info: NodeInfo) -> Callable[..., Any]:
    return _lower(info, True)
