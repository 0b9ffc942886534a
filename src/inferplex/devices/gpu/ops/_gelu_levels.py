"""A GELU's output quantized by DynamicQuantizeLinear for a dynamic matmul (``quantize_dynamic``'s
feed-forward: the up projection's matmul, GELU, DynamicQuantizeLinear, the down projection's
MatMulInteger), without the GELU's output being written or a pass to find its range.

DynamicQuantizeLinear needs the minimum and maximum of its data before it quantizes any of it.  Of
a GELU's output in float16 or bfloat16 both follow from the GELU's input:

* the GELU has one minimum (about -0.17, at about -0.75), and every input within a band around that
  point gives the same stored value, the smallest any input gives (:func:`gelu_band` works out the
  band from the GELU's values over every value of the type, with room for float32's errors);
* from 0 up the stored GELU does not decrease (neighbouring values' GELUs differ by far more than
  float32's errors) and below 0 it is at most 0, so the GELU of the largest input (or of 0) is the
  largest output.

The up projection's int8 matmul records, as it stores its output, the largest value, whether a
value lies in the band and whether one is NaN (``int8_linear``'s ``gelu_range``).  Then
:func:`gelu_quantize_rows` computes each GELU and its level in one pass.  Where the record does not
give the range (no input in the band, or a NaN), a pass finds the range of the
GELU's output first; the levels are DynamicQuantizeLinear's of ``F.gelu``'s output either way.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from inferplex.devices.gpu.ops import _quantized_triton as triton_kernels
from inferplex.devices.gpu.ops._fused_quantized import dynamic_quantize_rows

__all__ = ["GeluBand", "band_types", "gelu_band", "gelu_quantize_rows"]


@dataclass(frozen=True)
class GeluBand:
    """Where a GELU's stored output takes its smallest value."""

    minimum: float
    """The smallest value the GELU's output takes in the type."""
    low: float
    high: float
    """Every input in [low, high] gives ``minimum``."""


_MARGIN = 2.0**-20
"""How far inside the rounding of the minimum a GELU's exact value must lie for its float32 value
to round the same way (float32's errors here are under 2**-24)."""


def band_types() -> tuple[torch.dtype, ...]:
    """The types :func:`gelu_band` takes (float32 has no band: its minimum is each input's own)."""
    return (torch.float16, torch.bfloat16)


@functools.cache
def gelu_band(dtype: torch.dtype, approximate: str) -> GeluBand:
    """The band of the GELU (``approximate``: ``"none"`` or ``"tanh"``) stored in ``dtype``, from its
    exact values (float64) at every finite value of the type."""
    assert dtype in band_types()
    x = torch.arange(-(2**15), 2**15, dtype=torch.int32).to(torch.int16).view(dtype).to(torch.float64)
    x = x[x.isfinite()].unique()  # sorted
    if approximate == "tanh":
        exact = 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))
    else:
        exact = 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))
    stored = exact.to(dtype)
    minimum = stored.min()
    bits = minimum.view(torch.int16)  # negative: one more in the bits is one step further from 0
    below, above = ((bits + step).view(dtype).to(torch.float64) for step in (1, -1))
    smallest = minimum.to(torch.float64)
    assert bool((exact > (smallest + below) / 2 + _MARGIN).all()), "a value could round below the minimum"
    inside = exact < (smallest + above) / 2 - _MARGIN
    where = inside.nonzero().flatten()
    first, last = int(where[0]), int(where[-1])
    assert bool(inside[first:last + 1].all()), "the band is one interval"
    return GeluBand(float(smallest), float(x[first]), float(x[last]))


def gelu_quantize_rows(x: torch.Tensor, approximate: str, value_range: torch.Tensor | None
                       ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """DynamicQuantizeLinear of ``F.gelu(x)`` as :func:`~._fused_quantized.dynamic_quantize_rows`
    gives it (the data, the scale and the zero point), where ``value_range`` is what the matmul
    that made ``x`` recorded of it (see the module's docstring; None: nothing recorded).  On CUDA,
    outside ``torch.compile``, for float16 and bfloat16 ``x``, the GELU runs in the quantizing pass;
    elsewhere as ``F.gelu``, then the quantizer."""
    if value_range is None or x.dtype not in band_types() or not triton_kernels.usable(x) \
            or not 0 < x.numel() <= triton_kernels.RANGE_ELEMENTS:
        return dynamic_quantize_rows(F.gelu(x, approximate=approximate))
    from inferplex.devices.gpu.ops import _gelu_levels_kernel as kernels

    x = x.contiguous()
    count = x.numel()
    tanh = approximate == "tanh"
    lows, highs, per_program = triton_kernels.partial_slices(x)
    parts = lows.numel()
    kernels.gelu_partials[(parts,)](x, value_range, lows, highs, count, per_program, APPROXIMATE=tanh,
                                    BLOCK=triton_kernels.REDUCE_BLOCK)
    out = torch.empty_like(x, dtype=torch.int8)
    scale = torch.empty((), dtype=torch.float32, device=x.device)
    zero = torch.empty((), dtype=torch.uint8, device=x.device)
    kernels.gelu_quantize[(max(1, -(-count // _BLOCK)),)](
        x, out, value_range, lows, highs, scale, zero, count, parts, gelu_band(x.dtype, approximate).minimum,
        APPROXIMATE=tanh, PARTS=max(2, 1 << (parts - 1).bit_length()), BLOCK=_BLOCK, num_warps=4)
    return out, scale, zero


_BLOCK = 2048
"""Elements per program of the GELU quantizer (with 4 warps: measured fastest of 1,024-8,192
elements and 4-16 warps on BERT-base's feed-forward, ``bench/RESULTS.md``)."""
