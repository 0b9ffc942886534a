"""Lowerings: DFT, STFT, the window functions HannWindow, HammingWindow, BlackmanWindow, and
MelWeightMatrix.

ONNX carries complex values as a trailing axis of size 2 (real, imaginary), or 1
for a real signal.  The lowerings view that axis as a torch complex tensor and
call ``torch.fft``, which pads or truncates to the requested length like numpy's
FFT that ONNX's reference uses.  Signals are transformed in float64, as that
reference does, and cast back to their type (torch's half-precision FFT takes
power-of-two lengths only, and float32 rounding differs from the reference's).
Lengths, axes and frame steps given as computed tensors are read back to the
host (the program then runs without CUDA graphs).  Windows use ONNX's own
coefficients (Hamming's are 25/46 and 21/46, not torch's 0.54 and 0.46), held in
float32 and computed in float64 on the host as ONNX Runtime does, then cast to
``output_datatype``.  MelWeightMatrix builds its filter bank on the host (its
inputs are scalars, constants in real models, so the node folds at compile) as
ONNX Runtime does (:func:`mel_weights`).
"""

from __future__ import annotations

import functools
import math
import struct
from collections.abc import Callable
from typing import Any

import onnx_ir as ir
import torch

from inferplex.devices.gpu.ops._common import (
    EXACT_DTYPES,
    FLOAT_DTYPES,
    attrs_reason,
    const_int,
    dtype_reason,
    eager,
    first_reason,
    normalize_axis,
    torch_dtype,
)
from inferplex.devices.gpu.registry import NodeInfo, register
from inferplex.errors import InputError

_INTS = frozenset({ir.DataType.INT32, ir.DataType.INT64})


def _int_input(info: NodeInfo, index: int) -> tuple[int | None, bool]:
    """(constant value or None, whether it must be read at run time)."""
    if not info.has_input(index):
        return None, False
    value = const_int(info, index)
    return value, value is None


def _to_complex(x: torch.Tensor) -> torch.Tensor:
    wide = x.to(torch.float64)
    if x.shape[-1] == 1:
        return wide.squeeze(-1)
    return torch.view_as_complex(wide.contiguous())


def _from_complex(z: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    if not z.is_complex():
        return z.unsqueeze(-1).to(dtype)
    # ``ifft`` of a real signal returns a lazily conjugated view, which ``view_as_real`` refuses.
    return torch.view_as_real(z.resolve_conj()).to(dtype)


# --- DFT ---------------------------------------------------------------------------------


def _dft_supports(info: NodeInfo) -> str | None:
    return first_reason(attrs_reason(info, ("axis", "inverse", "onesided")),
                        dtype_reason(info, (0,), FLOAT_DTYPES), dtype_reason(info, (1, 2), _INTS))


@register("DFT", versions=(17, None), supports=_dft_supports)
def _dft(info: NodeInfo) -> Callable[..., Any]:
    inverse, onesided = bool(info.attr("inverse", 0)), bool(info.attr("onesided", 0))
    length, length_at_run = _int_input(info, 1)
    axis_value: int | None
    if info.opset < 20:
        axis_value, axis_at_run = int(info.attr("axis", 1)), False
    else:
        axis_value, axis_at_run = _int_input(info, 2)
        axis_value = -2 if axis_value is None and not axis_at_run else axis_value

    def dft(x: torch.Tensor, dft_length: torch.Tensor | None = None,
            axis_tensor: torch.Tensor | None = None) -> torch.Tensor:
        axis = int(axis_tensor.reshape(-1)[0]) if axis_at_run and axis_tensor is not None else axis_value
        axis = normalize_axis(int(axis or 0), x.dim())
        n = int(dft_length.reshape(-1)[0]) if length_at_run and dft_length is not None else length
        signal = _to_complex(x)
        if n is None:
            n = 2 * (x.shape[axis] - 1) if inverse and onesided else x.shape[axis]
        if inverse and onesided:
            result = torch.fft.irfft(signal, n=n, dim=axis)
        elif inverse:
            result = torch.fft.ifft(signal, n=n, dim=axis)
        else:
            result = torch.fft.fft(signal, n=n, dim=axis)
            if onesided:
                result = result.narrow(axis, 0, n // 2 + 1)
        return _from_complex(result, x.dtype)

    return eager(dft) if length_at_run or axis_at_run else dft


# --- STFT --------------------------------------------------------------------------------


def _stft_supports(info: NodeInfo) -> str | None:
    return first_reason(attrs_reason(info, ("onesided",)), dtype_reason(info, (0, 2), FLOAT_DTYPES),
                        dtype_reason(info, (1, 3), _INTS))


@register("STFT", versions=(17, None), supports=_stft_supports)
def _stft(info: NodeInfo) -> Callable[..., Any]:
    onesided = bool(info.attr("onesided", 1))
    step_value, step_at_run = _int_input(info, 1)
    length_value, length_at_run = _int_input(info, 3)

    def stft(signal: torch.Tensor, frame_step: torch.Tensor, window: torch.Tensor | None = None,
             frame_length: torch.Tensor | None = None) -> torch.Tensor:
        step = int(frame_step.reshape(-1)[0]) if step_at_run else step_value
        size = int(frame_length.reshape(-1)[0]) if length_at_run and frame_length is not None \
            else length_value
        if size is None:
            size = window.shape[0] if window is not None else signal.shape[-2]
        # [batch, frames, 1 or 2, size] -> [batch, frames, size, 1 or 2]
        frames = signal.unfold(1, size, int(step or 1)).transpose(-1, -2)
        z = _to_complex(frames)
        if window is not None:
            z = z * window.to(z.real.dtype if z.is_complex() else z.dtype)
        result = torch.fft.fft(z, n=size, dim=-1)
        if onesided:
            result = result[..., : size // 2 + 1]
        return _from_complex(result, signal.dtype)

    return eager(stft) if step_at_run or length_at_run else stft


# --- windows -----------------------------------------------------------------------------

def _f32(value: float) -> float:
    """``value`` rounded to float32, as ONNX Runtime stores the window coefficients."""
    return struct.unpack("f", struct.pack("f", value))[0]


# Cosine-sum windows a0 - a1 cos(2 pi n / N) + a2 cos(4 pi n / N) as ONNX Runtime evaluates them, so that
# integer output types (truncated) get its 0s and 1s where a window touches 1: ONNX's coefficients held
# in float32, its pi (3.14159265), float64 arithmetic in its order, and the C library's cos on the host
# (a device's cos may be an ulp off, which flips a truncated 1 to 0).
_PI = 3.14159265
_BLACKMAN_A2 = _f32(_f32(0.16) / 2)
_WINDOWS: dict[str, tuple[float, float, float]] = {
    "HannWindow": (0.5, 0.5, 0.0),
    "HammingWindow": (_f32(25 / 46), _f32(1 - _f32(25 / 46)), 0.0),
    "BlackmanWindow": (_f32(0.5 - _BLACKMAN_A2), 0.5, _BLACKMAN_A2),
}


@functools.lru_cache(maxsize=64)
def _cosine_sum(size: int, periodic: bool, a0: float, a1: float, a2: float) -> torch.Tensor:
    """The window of ``size`` points in float64 on the host (a window of 1 non-periodic point is NaN,
    0/0, as in ONNX Runtime)."""
    denominator = size if periodic else size - 1
    step = 2 * _PI / denominator if denominator else math.inf
    values = [a0 - a1 * math.cos(step * i) + (a2 * math.cos(2 * step * i) if a2 else 0.0)
              for i in range(size)]
    return torch.tensor(values, dtype=torch.float64)


def _window_supports(info: NodeInfo) -> str | None:
    reason = first_reason(attrs_reason(info, ("output_datatype", "periodic")),
                          dtype_reason(info, (0,), _INTS))
    target = ir.DataType(info.attr("output_datatype", 1))
    if reason is None and target not in EXACT_DTYPES:
        return f"{info.op_type} output_datatype {target.name} is not supported"
    return reason


def _window(info: NodeInfo) -> Callable[..., Any]:
    coefficients = _WINDOWS[info.op_type]
    dtype = torch_dtype(ir.DataType(info.attr("output_datatype", 1)))
    periodic = bool(info.attr("periodic", 1))

    def window(size: torch.Tensor) -> torch.Tensor:
        values = _cosine_sum(int(size.reshape(-1)[0]), periodic, *coefficients)
        return values.to(device=size.device, dtype=dtype, copy=True)  # never the cached tensor itself

    return eager(window)


for _name in _WINDOWS:
    register(_name, versions=(17, None), supports=_window_supports)(_window)


# --- MelWeightMatrix ---------------------------------------------------------------------


def _hz_to_mel(hz: float) -> float:
    return 2595 * math.log10(1 + hz / 700)


def _mel_to_hz(mel: float) -> float:
    return 700 * (10 ** (mel / 2595) - 1)


def mel_weights(bins: int, dft_length: int, sample_rate: int, low_hz: float,
                high_hz: float) -> list[list[float]]:
    """The [dft_length // 2 + 1, bins] triangular mel filter bank, as ONNX Runtime builds it.

    ``bins + 2`` points evenly spaced on the mel scale from ``low_hz`` to
    ``high_hz`` (the step is the range over ``bins + 2``) are mapped to FFT bin
    indices ``floor((dft_length + 1) * hz / sample_rate)``; filter ``i`` rises
    from point ``i`` to 1 at point ``i + 1`` and falls to point ``i + 2``.
    """
    spectrum = dft_length // 2 + 1
    edges = [math.floor((dft_length + 1) * hz / sample_rate) for hz in (low_hz, high_hz)]
    if not all(0 <= edge < spectrum for edge in edges):
        raise InputError(f"MelWeightMatrix: {low_hz}-{high_hz} Hz at sample rate {sample_rate} falls outside "
                         f"the {spectrum} bins of a {dft_length}-point DFT")
    low_mel, high_mel = _hz_to_mel(low_hz), _hz_to_mel(high_hz)
    step = (high_mel - low_mel) / (bins + 2)
    points = [math.floor((dft_length + 1) * _mel_to_hz(low_mel + step * i) / sample_rate)
              for i in range(bins + 2)]
    weights = [[0.0] * bins for _ in range(spectrum)]
    for i in range(bins):
        left, center, right = points[i], points[i + 1], points[i + 2]
        if center == left:
            weights[center][i] = 1.0
        else:
            for j in range(left, center + 1):
                weights[j][i] = (j - left) / (center - left)
        for j in range(center, right):
            weights[j][i] = (right - j) / (right - center)
    return weights


def _mel_supports(info: NodeInfo) -> str | None:
    reason = first_reason(attrs_reason(info, ("output_datatype",)), dtype_reason(info, (0, 1, 2), _INTS),
                          dtype_reason(info, (3, 4), FLOAT_DTYPES))
    target = ir.DataType(info.attr("output_datatype", 1))
    if reason is None and target not in EXACT_DTYPES:
        return f"MelWeightMatrix output_datatype {target.name} is not supported"
    return reason


@register("MelWeightMatrix", versions=(17, None), supports=_mel_supports)
def _mel_weight_matrix(info: NodeInfo) -> Callable[..., Any]:
    dtype = torch_dtype(ir.DataType(info.attr("output_datatype", 1)))

    def mel_weight_matrix(bins: torch.Tensor, dft_length: torch.Tensor, sample_rate: torch.Tensor,
                          low: torch.Tensor, high: torch.Tensor) -> torch.Tensor:
        scalars = [t.reshape(-1)[0].item() for t in (bins, dft_length, sample_rate, low, high)]
        table = mel_weights(int(scalars[0]), int(scalars[1]), int(scalars[2]),
                            float(scalars[3]), float(scalars[4]))
        # Built in float32, then cast: ONNX Runtime's integer outputs truncate the same values.
        return torch.tensor(table, dtype=torch.float32, device=bins.device).to(dtype)

    return eager(mel_weight_matrix)
