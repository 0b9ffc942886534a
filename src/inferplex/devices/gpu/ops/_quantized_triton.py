"""The eager tier's quantized calls on CUDA as Triton kernels (:mod:`._quantized_kernels`), each one
pass where the ATen form takes several.

* :func:`int8_linear`: an int8 x int8 matmul whose int32 sums get the zero-point correction, the
  float32 scale, the bias and the cast to the output type in the same kernel (the ATen form writes
  int32 sums and reads them back two or three times), and the pairs after it, or a table looked
  up by its last pair's level;
* :func:`quantize` and :func:`dequantize`: QuantizeLinear and DequantizeLinear per tensor, 8-bit;
* :func:`dynamic_quantize`: DynamicQuantizeLinear as two kernels: one finds the minimum and maximum
  of each slice of the data, the other reduces those few partial results, works out the scale and
  zero point (the ATen form runs a dozen one-value kernels for them) and quantizes.  ATen's
  ``aminmax`` copies a channels-last tensor to contiguous first and reads at a fraction of the
  memory's speed;
  :func:`dynamic_quantize_centered` the same, data minus zero point (or dequantized), for the
  dynamic convolutions; :func:`dynamic_quantize_rows` the same as the int8 matmul reads it, from
  the partial results of the normalization before where it wrote them;
* :func:`quantize_dequantize`: the fake-quantize pass, on the data's own type (the ATen kernel
  reads it element by element, unvectorised);
* :func:`conv_epilogue`: a dynamic convolution's scale, bias and Relu in one pass (the ATen form
  runs two one-value kernels for the factor, ``addcmul``, and the Relu);
* :func:`conv_quantize`: a QDQ convolution's bias, pair, residual Add and second pair in one pass.

Each gives the same numbers as the ATen form it replaces: divisions are IEEE-rounded, rounding is
half to even (:mod:`._triton_rounding`'s exact forms of ``div_rn`` and ``rint``), integer sums are
exact, and no product feeds an addition before it is rounded except in :func:`int8_linear`'s
``sums * scale + bias``, which the ATen form's ``addcmul`` computes the same way.  Under
``torch.compile`` the callers keep their ATen forms (Inductor fuses those itself).  :func:`usable`
says whether these kernels can run: on CUDA tensors, where Triton is installed (it comes with
torch's CUDA builds).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

_log = logging.getLogger("inferplex")

__all__ = ["QUANTIZE_BLOCK", "RANGE_ELEMENTS", "REDUCE_BLOCK", "conv_epilogue", "conv_quantize", "dequantize",
           "dynamic_quantize", "dynamic_quantize_centered", "dynamic_quantize_rows", "float32_inverse",
           "int8_linear", "partial_slices", "quantize", "quantize_dequantize", "step_arguments", "usable",
           "usable_compiled"]

_BLOCK = 2048
"""Elements per program of the elementwise kernels."""

_SMALL_ROWS = 256
"""Up to this many rows :func:`int8_linear` takes 64 x 64 output tiles (4 warps, 4 pipeline
stages), else 128 x 128: loaded through Hopper's tensor copies where the GPU has them (4 warps, 3
stages), else by pointers (8 warps and 3 stages for int8 rows, 4 and 4 for uint8 ones); all with
128-deep steps.  Small tiles keep the GPU's cores busy when there are few rows, large ones reuse
each loaded tile more when there are many (``bench/RESULTS.md`` has the tilings compared)."""


@functools.cache
def _triton() -> Any:
    """The Triton kernels (compiled on first use per signature), or None where Triton is missing or
    cannot build and run a kernel here (then the callers keep their ATen forms, with a warning)."""
    try:
        from inferplex.devices.gpu.ops import _quantized_kernels as kernels
    except Exception:  # noqa: BLE001 - not installed, or no driver it can use: the ATen forms run
        return None
    if torch.cuda.is_available() and not torch.cuda.is_current_stream_capturing():
        try:
            _self_test(kernels)
        except Exception as error:  # noqa: BLE001 - any failure means the kernels are not used
            _log.warning("inferplex: the Triton kernels of quantized models cannot run (%s); "
                         "their ATen forms run instead", error)
            return None
    global _READY
    _READY = True
    return kernels


def _self_test(kernels: Any) -> None:
    """One fake-quantize of three values on the current CUDA device, checked: the compiler, the
    driver and the launch work, or this raises."""
    x = torch.tensor([-1.0, 0.26, 3.0], device="cuda")
    out = torch.empty_like(x)
    kernels.fake_quantize_pass[(1,)](x, out, 3, 0.5, 2.0, 0, -2, 2, DIVIDE=True, BLOCK=_BLOCK)
    if out.tolist() != [-1.0, 0.5, 1.0]:
        raise RuntimeError(f"a fake-quantize gave {out.tolist()}, not [-1.0, 0.5, 1.0]")


_MAX_ELEMENTS = 2**31 - 1
"""The kernels index with 32-bit offsets: larger tensors keep the ATen forms."""


_READY = False
"""Whether :func:`_triton` found the kernels usable (read under ``torch.compile``, which cannot
trace the check itself; the eager tier always runs first)."""


def usable_compiled(x: torch.Tensor, out_elements: int) -> bool:
    """Under ``torch.compile``: whether :func:`int8_linear_op` can take this matmul."""
    return _READY and x.is_cuda and x.numel() <= _MAX_ELEMENTS and out_elements <= _MAX_ELEMENTS


def usable(x: torch.Tensor, out_elements: int = 0) -> bool:
    """Whether the kernels can run on ``x`` (and an output of ``out_elements``): a CUDA tensor,
    outside ``torch.compile``, with Triton, within 32-bit offsets."""
    return x.is_cuda and x.numel() <= _MAX_ELEMENTS and out_elements <= _MAX_ELEMENTS \
        and not torch.compiler.is_compiling() and _triton() is not None


def _elementwise_grid(count: int, block: int = _BLOCK) -> tuple[int]:
    return ((count + block - 1) // block,)


_RANGES = {torch.int8: (-128, 127), torch.uint8: (0, 255)}


def quantize(x: torch.Tensor, scale: torch.Tensor, zero: torch.Tensor | int | None,
             dtype: torch.dtype) -> torch.Tensor:
    """QuantizeLinear per tensor: ``clamp(round(x / scale) + zero)`` of float ``x`` as ``dtype``
    (int8 or uint8; ``scale`` and a tensor ``zero`` hold one value each; ``round`` half to even,
    the division IEEE-rounded in float32)."""
    x = _dense(x)
    out = torch.empty_like(x, dtype=dtype)
    count = x.numel()
    if count:
        low, high = _RANGES[dtype]
        given = isinstance(zero, torch.Tensor)
        point = float(zero) if isinstance(zero, int) else 0.0
        _triton().quantize[_elementwise_grid(count)](
            x, out, scale, zero if given else scale, count, point, float(low), float(high), ZERO=given,
            BLOCK=_BLOCK)
    return out


def dequantize(x: torch.Tensor, scale: torch.Tensor, zero: torch.Tensor | None, dtype: torch.dtype
               ) -> torch.Tensor:
    """DequantizeLinear per tensor of 8-bit ``x``: ``(x - zero) * scale`` in float32, as ``dtype``."""
    x = _dense(x)
    out = torch.empty_like(x, dtype=dtype)
    count = x.numel()
    if count:
        _triton().dequantize[_elementwise_grid(count)](x, out, scale, zero if zero is not None else scale,
                                                        count, ZERO=zero is not None, BLOCK=_BLOCK)
    return out


def dynamic_quantize(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """DynamicQuantizeLinear of float ``x``: uint8 data, the float32 scale and the uint8 zero point,
    from one ``aminmax`` and one kernel (the formulas of ``quantized.dynamic_parameters``)."""
    return _dynamic_quantize(x, centered=False)


def dynamic_quantize_centered(x: torch.Tensor,
                              dequantized: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """DynamicQuantizeLinear's data minus its zero point, in ``x``'s floating type (times the
    scale, rounded once, where ``dequantized``), and its scale (what
    ``_fused_quantized.dynamic_quantize_centered`` hands the dynamic convolutions)."""
    out, scale, _ = _dynamic_quantize(x, centered=True, dequantized=dequantized)
    return out, scale


REDUCE_BLOCK = 4096
"""Elements each step of :func:`_minmax_partials`' loop reads (a slice is a multiple of it)."""

_MAX_PARTS = 512
"""At most this many slices (and partial results) per tensor: enough to fill the GPU, few enough for
every program of the quantizing kernel to reduce them again from L2."""

PARTIALS_LIMIT = 1024
"""The most partial results :func:`dynamic_quantize_rows` takes from the call before it."""

QUANTIZE_BLOCK = 8192
"""Elements per program of the dynamic quantizing kernel (large: each program first reads the
partial results)."""


def dynamic_quantize_rows(x: torch.Tensor, partials: torch.Tensor | None = None
                          ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """DynamicQuantizeLinear of float ``x`` as the int8 matmul reads it: the uint8 levels moved down
    by 128 into int8, the float32 scale and the uint8 zero point; from ``partials`` (2 x parts
    float32: the minimum and maximum of each part of ``x``, NaN where a part holds one, at most
    :data:`PARTIALS_LIMIT` parts) where the call that made ``x`` wrote them, else from a reduction
    pass.  At most :data:`RANGE_ELEMENTS` elements."""
    assert x.numel() <= RANGE_ELEMENTS, "the callers take no larger tensors"
    assert partials is None or partials.shape[1] <= PARTIALS_LIMIT
    return _dynamic_quantize(x, centered=False, shifted=True,
                             partials=None if partials is None else (partials[0], partials[1]))


def _dynamic_quantize(x: torch.Tensor, centered: bool, dequantized: bool = False, shifted: bool = False,
                      partials: tuple[torch.Tensor, torch.Tensor] | None = None
                      ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    x = _dense(x)
    lows, highs = _minmax_partials(x) if partials is None else partials
    kind = x.dtype if centered else torch.int8 if shifted else torch.uint8
    out = torch.empty_like(x, dtype=kind)
    scale = torch.empty((), dtype=torch.float32, device=x.device)
    zero = torch.empty((), dtype=torch.uint8, device=x.device)
    count, parts = x.numel(), lows.numel()
    _triton().dynamic_quantize[_elementwise_grid(max(count, 1), QUANTIZE_BLOCK)](
        x, out, lows, highs, scale, zero, count, parts, CENTERED=centered, DEQUANTIZED=dequantized,
        SHIFTED=shifted, PARTS=max(2, 1 << (parts - 1).bit_length()), BLOCK=QUANTIZE_BLOCK)
    return out, scale, zero


def _minmax_partials(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The float32 minimum and maximum of each slice of dense ``x``'s storage (at most
    :data:`_MAX_PARTS` slices; ``[inf]`` and ``[-inf]`` for no elements): their minimum and maximum
    are ``torch.aminmax(x)``'s."""
    count = x.numel()
    if count == 0:
        return (torch.full((1,), float("inf"), device=x.device),
                torch.full((1,), float("-inf"), device=x.device))
    if count > _MAX_ELEMENTS // 2:  # the slices' offsets would pass 32 bits: ATen over the storage
        low, high = torch.aminmax(x.as_strided((count,), (1,)))
        return low.reshape(1).to(torch.float32), high.reshape(1).to(torch.float32)
    lows, highs, per_program = partial_slices(x)
    _triton().minmax_partials[(lows.numel(),)](x, lows, highs, count, per_program, RANGE=False,
                                               BLOCK=REDUCE_BLOCK)
    return lows, highs


def partial_slices(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, int]:
    """Room for the minimum and the maximum of each slice of non-empty ``x`` (at most
    :data:`_MAX_PARTS` slices, of whole :data:`REDUCE_BLOCK` steps; at most :data:`RANGE_ELEMENTS`
    elements), and the elements of a slice."""
    per_program = _slice_length(x.numel())
    parts = _cdiv(x.numel(), per_program)
    return (torch.empty(parts, dtype=torch.float32, device=x.device),
            torch.empty(parts, dtype=torch.float32, device=x.device), per_program)


def _slice_length(count: int) -> int:
    """Elements of each of the (at most :data:`_MAX_PARTS`) slices a range pass reduces."""
    return _cdiv(_cdiv(count, _MAX_PARTS), REDUCE_BLOCK) * REDUCE_BLOCK


RANGE_ELEMENTS = _MAX_ELEMENTS // 2
"""The most elements :func:`value_range` takes (its slices' offsets stay within 32 bits)."""


def value_range(x: torch.Tensor) -> torch.Tensor:
    """The value range of dense ``x``'s storage (see :func:`fresh_value_range`; at most
    :data:`RANGE_ELEMENTS` elements): its minimum, its maximum and whether it holds a NaN, in one
    pass of :func:`_minmax_partials`' slices."""
    found = fresh_value_range(x.device)
    count = x.numel()
    assert count <= RANGE_ELEMENTS, "the callers take no larger tensors"
    if count:
        per_program = _slice_length(count)
        _triton().minmax_partials[(_cdiv(count, per_program),)](x, found, found, count, per_program,
                                                                RANGE=True, BLOCK=REDUCE_BLOCK)
    return found


def fresh_value_range(device: torch.device, count: int | None = None) -> torch.Tensor:
    """A value range that has seen nothing yet: three float32 zeros, which :func:`value_range`'s
    pass and the int8 convolution's epilogue raise to ``max(0, -minimum)``, ``max(0, maximum)``
    and a NaN flag (see :func:`~._quantized_kernels.record_range`); with ``count``, that many
    (count x 3), made by one memset for the calls of one run."""
    return torch.zeros((3,) if count is None else (count, 3), dtype=torch.float32, device=device)


def quantize_dequantize(x: torch.Tensor, scale_value: float, inverse: float, zero: int, low: int,
                        high: int) -> torch.Tensor:
    """The fake-quantize pass in ``x``'s type: float32 data divided by the scale (as ONNX does),
    f16/bf16 data times ``inverse`` (the float32 ``1 / scale``, as the ATen kernel does)."""
    x = _dense(x)
    out = torch.empty_like(x)
    count = x.numel()
    if count:
        _triton().fake_quantize_pass[_elementwise_grid(count)](
            x, out, count, scale_value, inverse, zero, low, high, DIVIDE=x.dtype == torch.float32,
            BLOCK=_BLOCK)
    return out


def conv_epilogue(acc: torch.Tensor, scale: torch.Tensor, inverse: float, bias: torch.Tensor | None,
                  relu: bool, other: torch.Tensor | None = None) -> torch.Tensor:
    """``relu?(acc * (scale * inverse) + bias [+ other])`` of a convolution's 16-bit output ``acc``
    (N x C x spatial, contiguous or channels-last), one pass: the factor is rounded once to
    ``acc``'s type, the product and the sum are computed in float32 and rounded once
    (``torch.addcmul``'s numbers), then ``other`` (a residual of ``acc``'s shape and type) is added
    and rounded as a separate Add rounds it; ``scale``: one value; ``bias``: one per channel, or
    None."""
    acc = _dense(acc)
    channels_last = not acc.is_contiguous()
    if other is not None and other.stride() != acc.stride():  # read at the same offsets as acc
        other = torch.empty_like(acc).copy_(other)
    out = torch.empty_like(acc)
    count = acc.numel()
    if count:
        inner = count // (acc.shape[0] * acc.shape[1]) if acc.shape[0] * acc.shape[1] else 1
        _triton().conv_epilogue[_elementwise_grid(count)](
            acc, out, scale, bias if bias is not None else scale, other if other is not None else acc, count,
            acc.shape[1], inner, inverse, CHANNELS_LAST=channels_last, BIAS=bias is not None,
            ADD=other is not None, RELU=relu, BLOCK=_BLOCK)
    return out


def conv_quantize(acc: torch.Tensor, bias: torch.Tensor | None, other: torch.Tensor | None,
                  first: Sequence[float], second: Sequence[float] | None) -> torch.Tensor:
    """A QDQ model's convolution output ``acc`` (N x C x spatial, contiguous or channels-last) plus
    its ``bias`` (one per channel, or None), fake-quantized by ``first``, then, with ``other`` (same
    shape), plus ``other`` and fake-quantized by ``second``: one pass, each sum rounded to ``acc``'s
    type as the separate calls round it (``first`` and ``second``: scale, zero point, low, high)."""
    acc = _dense(acc)
    out = torch.empty_like(acc)
    if other is not None and other.stride() != acc.stride():  # the kernel walks both in one order
        other = torch.empty_like(acc).copy_(other)
    count = acc.numel()
    if count:
        inner = count // (acc.shape[0] * acc.shape[1])
        _triton().conv_quantize[_elementwise_grid(count)](
            acc, bias if bias is not None else acc, other if other is not None else acc, out, count,
            acc.shape[1], inner, *step_arguments(first), *step_arguments(second),
            CHANNELS_LAST=not acc.is_contiguous(), BIAS=bias is not None, ADD=other is not None,
            DIVIDE=acc.dtype == torch.float32, BLOCK=_BLOCK)
    return out


def int8_linear(a: torch.Tensor, weight: torch.Tensor, columns: torch.Tensor | None,
                zero: torch.Tensor | None, shift: int, scales: torch.Tensor, bias: torch.Tensor | None,
                out_dtype: torch.dtype, mid: Sequence[float] | None = None,
                last: Sequence[float] | None = None, table: torch.Tensor | None = None,
                x_scale: torch.Tensor | None = None, levels: bool = False,
                gelu_range: tuple[torch.Tensor, float, float] | None = None) -> torch.Tensor:
    """``((rows(a) @ weight.T + offset * columns) * scales + bias)`` in ``out_dtype``, one kernel.

    ``a``: 8-bit data (..., K), uint8 moved down by 128 in the kernel; ``weight``: int8 N x K;
    ``columns``: int32 per output column (1 x N or N), or None; ``offset``: ``shift - zero`` where
    ``zero`` (a one-value tensor) is given, else ``shift``; ``scales``: float32, one value or one
    per column; ``bias``: one per column, or None.  The integer sums are exact in int32.

    ``mid`` and ``last`` are fake-quantize steps ``(scale, zero point, low, high)`` the epilogue
    runs on the float32 output: ``mid`` before the bias, ``last`` after it, dividing by the scale
    where ``out_dtype`` is float32 (as ONNX does), else multiplying by its float32 inverse; the
    output is rounded to ``out_dtype`` once, where it is stored.
    With ``table`` (one value per level of ``last``'s range, low to high), each output is the
    table's value at its ``last`` level instead, in the table's type: a function of the
    fake-quantized output, computed beforehand for each of its levels.

    With ``x_scale`` (a one-value float32 tensor: the data's scale) ``scales`` are the weight's and
    the kernel multiplies them by it, in float32.

    With ``levels``, each output is ``last``'s level (its QuantizeLinear's data: int8 where its
    range starts below 0, else uint8) instead of its value.

    With ``gelu_range`` (a value range of :func:`fresh_value_range`, and the ends of a GELU's band,
    see :func:`~._gelu_levels.gelu_band`) the kernel merges into that range the largest output,
    whether an output lies in the band (its first value then is 1) and whether one is NaN, for
    :func:`~._gelu_levels.gelu_quantize_rows`.
    """
    rows = a.reshape(-1, a.shape[-1])
    if rows.stride(-1) != 1:
        rows = rows.contiguous()
    count, depth = rows.shape
    width = weight.shape[0]
    kind = _linear_out_dtype(out_dtype, last, table, levels)
    out = torch.empty((count, width), dtype=kind, device=a.device)
    if count:
        descriptors = None
        if count <= _SMALL_ROWS:
            block_m, block_n, warps, stages = 64, 64, 4, 4
        else:
            block_m, block_n = 128, 128
            descriptors = _tensor_descriptors(rows, weight, block_m, block_n, 128)
            if descriptors is not None:  # Hopper's tensor copies: 4 warps measured faster
                warps, stages = 4, 3
            else:  # 8 warps measured faster for int8 rows; uint8 rows (moved down in the loop) keep 4
                warps, stages = (4, 4) if rows.dtype == torch.uint8 else (8, 3)
        tiles = _cdiv(count, block_m) * _cdiv(width, block_n)
        # persistent programs for the plain epilogue (measured faster); the QDQ pairs, tables and
        # levels keep a program a tile (a QDQ encoder measured slower persistent)
        plain = mid is None and last is None and table is None and not levels
        persistent = descriptors is not None and plain
        programs = min(tiles, _persistent_programs(a.device)) if persistent else tiles
        a_source, w_source = descriptors or (rows, weight)
        value_range, band_low, band_high = gelu_range or (scales, 0.0, 0.0)
        kernels = _triton()
        kernels.linear[(programs,)](
            a_source, w_source, out, columns if columns is not None else scales,
            zero if zero is not None else scales, scales, bias if bias is not None else scales,
            table if table is not None else scales, x_scale if x_scale is not None else scales,
            value_range, count, width, depth, rows.stride(0), weight.stride(0), out.stride(0), shift,
            *step_arguments(mid), *step_arguments(last), band_low, band_high,
            A_UINT8=rows.dtype == torch.uint8, COLUMNS=columns is not None, ZERO=zero is not None,
            SCALES=scales.numel() > 1, BIAS=bias is not None, EVEN_K=depth % 128 == 0,
            MID=mid is not None, LAST=last is not None, TABLE=table is not None,
            X_SCALE=x_scale is not None, LEVELS=levels, GELU_RANGE=gelu_range is not None,
            DIVIDE=out_dtype == torch.float32,
            TMA=descriptors is not None, BM=block_m, BN=block_n, BK=128, GROUP=8, FLATTEN=programs < tiles,
            num_warps=warps, num_stages=stages)
    return out.reshape(*a.shape[:-1], width)


_PERSISTENT_PER_SM = 2
"""Programs per streaming multiprocessor of :func:`int8_linear`'s kernel with tensor copies and no
fake-quantize steps in its epilogue, where its output has more tiles: each walks several, pipelined
across them (two are resident at once; ``bench/RESULTS.md`` has one a tile, two and three per
multiprocessor compared)."""


@functools.cache
def _persistent_programs(device: torch.device) -> int:
    """How many programs :func:`int8_linear`'s kernel with tensor copies runs at most on ``device``."""
    return _PERSISTENT_PER_SM * torch.cuda.get_device_properties(device).multi_processor_count


def _linear_out_dtype(out_dtype: torch.dtype, last: Sequence[float] | None, table: torch.Tensor | None,
                      levels: bool) -> torch.dtype:
    """The type :func:`int8_linear` writes: the table's, the levels' 8-bit type, or ``out_dtype``."""
    if table is not None:
        return table.dtype
    if levels:
        assert last is not None  # the levels are those of the last pair
        return torch.int8 if last[2] < 0 else torch.uint8
    return out_dtype


def _tensor_descriptors(rows: torch.Tensor, weight: torch.Tensor, block_m: int, block_n: int,
                        block_k: int) -> tuple[Any, Any] | None:
    """TMA descriptors of the rows and the weight for :func:`int8_linear`'s kernel, on GPUs that
    have the tensor copy engine (compute capability 9.0 and later) where both tensors meet its
    alignment (16-byte base and row stride, dense rows); else None (the kernel's pointer loads)."""
    device = rows.device.index if rows.device.index is not None else torch.cuda.current_device()
    if not _tensor_copies(device):
        return None
    if any(t.data_ptr() % 16 or t.stride(0) % 16 or t.stride(1) != 1 for t in (rows, weight)):
        return None
    from triton.tools.tensor_descriptor import TensorDescriptor

    return (TensorDescriptor.from_tensor(rows, [block_m, block_k]),
            TensorDescriptor.from_tensor(weight, [block_n, block_k]))


@functools.cache
def _tensor_copies(device: int) -> bool:
    """Whether CUDA device ``device`` has the tensor copy engine and Triton can describe tensors
    for it."""
    if torch.cuda.get_device_capability(device)[0] < 9:
        return False
    try:
        from triton.tools.tensor_descriptor import TensorDescriptor  # noqa: F401
    except ImportError:
        return False
    return True


def step_arguments(step: Sequence[float] | None) -> tuple[float, float, int, int, int]:
    """The kernel's scale, float32 inverse, zero point, low and high of a fake-quantize step."""
    if step is None:
        return 1.0, 1.0, 0, 0, 0
    scale, zero, low, high = step
    return float(scale), float32_inverse(scale), int(zero), int(low), int(high)


def float32_inverse(value: float) -> float:
    """The float32 ``1 / value`` rounded to nearest: what the kernels multiply f16/bf16 data by, and
    what their exact division (``_triton_rounding.divide``) corrects from."""
    return float(np.float32(1.0) / np.float32(value))


@torch.library.custom_op("inferplex::int8_linear", mutates_args=())
def int8_linear_op(a: torch.Tensor, weight: torch.Tensor, columns: torch.Tensor | None,
                   zero: torch.Tensor | None, shift: int, scales: torch.Tensor, bias: torch.Tensor | None,
                   out_dtype: torch.dtype, mid: list[float] | None = None,
                   last: list[float] | None = None, table: torch.Tensor | None = None,
                   x_scale: torch.Tensor | None = None, levels: bool = False) -> torch.Tensor:
    """:func:`int8_linear` as an operator ``torch.compile`` calls as it is (Inductor would otherwise
    write the int32 sums of ``torch._int_mm`` out and read them back for the epilogue)."""
    return int8_linear(a, weight, columns, zero, shift, scales, bias, out_dtype, mid, last, table, x_scale,
                       levels)


@int8_linear_op.register_fake
def _int8_linear_shape(a: torch.Tensor, weight: torch.Tensor, columns: torch.Tensor | None,
                       zero: torch.Tensor | None, shift: int, scales: torch.Tensor, bias: torch.Tensor | None,
                       out_dtype: torch.dtype, mid: list[float] | None = None,
                       last: list[float] | None = None, table: torch.Tensor | None = None,
                       x_scale: torch.Tensor | None = None, levels: bool = False) -> torch.Tensor:
    kind = _linear_out_dtype(out_dtype, last, table, levels)
    return a.new_empty((*a.shape[:-1], weight.shape[0]), dtype=kind)


def _cdiv(a: int, b: int) -> int:
    return (a + b - 1) // b


def _dense(x: torch.Tensor) -> torch.Tensor:
    """``x`` itself where its elements fill its storage in some memory format (contiguous or
    channels_last, as the convolutions leave them), else a contiguous copy: the elementwise
    kernels walk the storage, and ``torch.empty_like`` gives their output the same strides."""
    if x.is_contiguous() or (x.dim() == 4 and x.is_contiguous(memory_format=torch.channels_last)) \
            or (x.dim() == 5 and x.is_contiguous(memory_format=torch.channels_last_3d)):
        return x
    return x.contiguous()
