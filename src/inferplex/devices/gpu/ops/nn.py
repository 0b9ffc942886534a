"""Lowerings: convolution, pooling, normalization, Gemm/MatMul, softmax family, Dropout.

Padding follows ONNX, which torch does not always take directly: asymmetric
pads (and SAME_UPPER/SAME_LOWER, computed from the run-time input shape, which
torch knows on the host without a device read) are applied with ``F.pad``
first; pooling whose ONNX output size differs from torch's is padded explicitly
so torch's floor-mode pooling yields exactly ONNX's windows.  Resize/Upsample
live in :mod:`._resize`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import onnx_ir as ir
import torch
import torch.nn.functional as F

from inferplex.devices.gpu.ops import _attention, _norms, _resize  # noqa: F401  (register their ops)
from inferplex.devices.gpu.registry import NodeInfo, register
from inferplex.errors import CompileError

_FLOATS = (ir.DataType.FLOAT, ir.DataType.DOUBLE, ir.DataType.FLOAT16, ir.DataType.BFLOAT16)
_CONV = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}
_CONV_T = {1: F.conv_transpose1d, 2: F.conv_transpose2d, 3: F.conv_transpose3d}
_MAX_POOL = {1: F.max_pool1d, 2: F.max_pool2d, 3: F.max_pool3d}
_AVG_POOL = {1: F.avg_pool1d, 2: F.avg_pool2d, 3: F.avg_pool3d}


def _floats_only(info: NodeInfo, inputs: Sequence[int] = (0,)) -> str | None:
    for index in inputs:
        dtype = info.input_dtypes[index] if index < len(info.input_dtypes) else None
        if dtype is not None and dtype not in _FLOATS:
            return f"{info.op_type} input {index} is {dtype.name}; accepted: floating types"
    return None


def _spatial_rank(info: NodeInfo, allowed: Sequence[int] = (1, 2, 3)) -> str | None:
    rank = info.rank(0)
    kernel = info.attr("kernel_shape")
    spatial = rank - 2 if rank is not None else (len(kernel) if kernel else None)
    if spatial is None:
        return f"{info.op_type} needs the input rank (shape inference could not tell it)"
    if spatial not in allowed:
        return f"{info.op_type} with {spatial} spatial dims is not supported (accepted: {list(allowed)})"
    return None


def _same_pads(auto_pad: str, sizes: Sequence[int], kernels: Sequence[int], strides: Sequence[int],
               dilations: Sequence[int]) -> list[int]:
    """ONNX SAME_UPPER/SAME_LOWER pads ([begins..., ends...]) for these input sizes."""
    begins, ends = [], []
    for size, k, s, d in zip(sizes, kernels, strides, dilations, strict=False):
        out = -(-size // s)
        total = max(0, (out - 1) * s + (k - 1) * d + 1 - size)
        small, large = total // 2, total - total // 2
        begins.append(small if auto_pad == "SAME_UPPER" else large)
        ends.append(large if auto_pad == "SAME_UPPER" else small)
    return begins + ends


def _torch_pad(pads: Sequence[int]) -> list[int]:
    """ONNX [b1, b2, .., e1, e2, ..] -> F.pad's last-dim-first [b_n, e_n, ..., b_1, e_1]."""
    n = len(pads) // 2
    result: list[int] = []
    for axis in reversed(range(n)):
        result += [pads[axis], pads[axis + n]]
    return result


class _Window:
    """Kernel/stride/dilation/pad attributes of a conv or pool node, resolved per input shape."""

    def __init__(self, info: NodeInfo, spatial: int | None = None):
        kernel = info.attr("kernel_shape")
        if spatial is None:
            spatial = len(kernel) if kernel else (info.rank(0) or 4) - 2
        self.op_type = info.op_type
        self.spatial = spatial
        self.kernel = list(kernel) if kernel else None
        self.strides = list(info.attr("strides") or [1] * self.spatial)
        self.dilations = list(info.attr("dilations") or [1] * self.spatial)
        self.auto_pad = info.attr("auto_pad", "NOTSET")
        if isinstance(self.auto_pad, bytes):
            self.auto_pad = self.auto_pad.decode()
        self.pads = list(info.attr("pads") or [0] * 2 * self.spatial)

    def kernel_shape(self) -> list[int]:
        """The kernel_shape attribute, which pooling requires (its support check rejects nodes without)."""
        if self.kernel is None:
            raise CompileError(f"{self.op_type} needs the kernel_shape attribute")
        return self.kernel

    def resolve(self, sizes: Sequence[int], kernel: Sequence[int]) -> list[int]:
        if self.auto_pad in ("SAME_UPPER", "SAME_LOWER"):
            return _same_pads(self.auto_pad, sizes, kernel, self.strides, self.dilations)
        if self.auto_pad == "VALID":
            return [0] * 2 * self.spatial
        return self.pads


def _symmetric(pads: Sequence[int]) -> list[int] | None:
    n = len(pads) // 2
    return list(pads[:n]) if list(pads[:n]) == list(pads[n:]) else None


# --- convolution ------------------------------------------------------------------


def _conv_supports(info: NodeInfo) -> str | None:
    return _floats_only(info, (0, 1)) or _spatial_rank(info)


@register("Conv", supports=_conv_supports)
def conv(info: NodeInfo) -> Callable[..., Any]:
    window = _Window(info)
    group = int(info.attr("group", 1))
    fn = _CONV[window.spatial]

    def run(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None = None) -> torch.Tensor:
        pads = window.resolve(x.shape[2:], w.shape[2:])
        padding = _symmetric(pads)
        if padding is None:
            return fn(F.pad(x, _torch_pad(pads)), w, b, window.strides, 0, window.dilations, group)
        return fn(x, w, b, window.strides, padding, window.dilations, group)

    return run


class _CudnnFusion:
    """Whether cuDNN has taken a fused convolution of one node so far (it may refuse a configuration
    when it builds the plan, on the first eager run, before any CUDA graph is captured)."""

    usable = True


def conv_relu(info: NodeInfo) -> Callable[..., Any]:
    """``Relu(Conv(x, w, b) [+ z])`` of a Conv node: on CUDA for a 2-D convolution with symmetric
    padding, one cuDNN call with the bias, the addition and the Relu in the convolution's epilogue
    (``torch.cudnn_convolution_relu`` / ``cudnn_convolution_add_relu``: one pass over the output where
    torch's ``conv2d`` adds the bias and the Relu in two more); elsewhere, under torch.compile (whose
    own kernels fuse the same) and where cuDNN refuses the fused plan, the ops one after the other."""
    window = _Window(info)
    group = int(info.attr("group", 1))
    plain = conv(info)
    fusion = _CudnnFusion()

    def run(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None = None,
            z: torch.Tensor | None = None) -> torch.Tensor:
        if x.is_cuda and window.spatial == 2 and fusion.usable and not torch.compiler.is_compiling():
            padding = _symmetric(window.resolve(x.shape[2:], w.shape[2:]))
            if padding is not None:
                try:
                    steps = (window.strides, padding, window.dilations, group)
                    if z is None:
                        return torch.cudnn_convolution_relu(x, w, b, *steps)
                    return torch.cudnn_convolution_add_relu(x, w, z, 1.0, b, *steps)
                except RuntimeError:
                    fusion.usable = False
        y = plain(x, w, b)
        return torch.relu(y if z is None else y + z)

    return run


def _conv_transpose_supports(info: NodeInfo) -> str | None:
    return _floats_only(info, (0, 1)) or _spatial_rank(info)


@register("ConvTranspose", supports=_conv_transpose_supports)
def conv_transpose(info: NodeInfo) -> Callable[..., Any]:
    window = _Window(info)
    group = int(info.attr("group", 1))
    output_padding = list(info.attr("output_padding") or [0] * window.spatial)
    output_shape = info.attr("output_shape")
    fn = _CONV_T[window.spatial]

    def run(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None = None) -> torch.Tensor:
        # Full (unpadded) transposed conv, then crop/extend each spatial dim to ONNX's window.
        y = fn(x, w, None, window.strides, 0, 0, group, window.dilations)
        crop: list[int] = []
        for i in range(window.spatial):
            size, full = x.shape[2 + i], y.shape[2 + i]
            begin, out = _transpose_extent(window, i, size, full, w.shape[2 + i], output_padding,
                                           output_shape)
            crop = [-begin, begin + out - full, *crop]
        if any(crop):
            y = F.pad(y, crop)
        if b is not None:
            y = y + b.reshape((1, -1) + (1,) * window.spatial)
        return y

    return run


def _transpose_extent(window: _Window, i: int, size: int, full: int, kernel: int,
                      output_padding: Sequence[int], output_shape: Sequence[int] | None) -> tuple[int, int]:
    """(first output position inside the full result, output length) of ConvTranspose dim ``i``."""
    stride, n = window.strides[i], window.spatial
    extent = (kernel - 1) * window.dilations[i] + 1
    if output_shape or window.auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        out = int(output_shape[-n + i]) if output_shape else size * stride
        total = stride * (size - 1) + output_padding[i] + extent - out
        if window.auto_pad == "SAME_UPPER":
            begin = total // 2
        else:
            begin = total - total // 2
        return begin, out
    pads = [0] * 2 * n if window.auto_pad == "VALID" else window.pads
    out = stride * (size - 1) + output_padding[i] + extent - pads[i] - pads[i + n]
    return pads[i], out


# --- pooling ----------------------------------------------------------------------


def _pool_output(size: int, begin: int, end: int, k: int, s: int, d: int, ceil: bool) -> int:
    """ONNX's (and torch's) pooled length, including ceil mode's last-window rule."""
    span = size + begin + end - d * (k - 1) - 1
    out = (-(-span // s) if ceil else span // s) + 1
    if ceil and (out - 1) * s >= size + begin:
        out -= 1
    return out


def _pool_plan(window: _Window, sizes: Sequence[int], ceil: bool) -> tuple[list[int], list[int]]:
    """ONNX pads for these sizes, and the end pads that make floor-mode pooling produce ONNX's windows."""
    kernel = window.kernel_shape()
    pads = window.resolve(sizes, kernel)
    n = window.spatial
    ends = []
    for i, size in enumerate(sizes):
        k, s, d = kernel[i], window.strides[i], window.dilations[i]
        out = _pool_output(size, pads[i], pads[i + n], k, s, d, ceil)
        ends.append((out - 1) * s + d * (k - 1) + 1 - size - pads[i])
    return pads, ends


def _native_pool_ok(window: _Window, pads: Sequence[int]) -> list[int] | None:
    """Torch's own padding when it gives ONNX's windows (symmetric, at most half a kernel); else None.

    With symmetric pads torch's output length and ceil-mode rule are ONNX's, and
    its average divisor also counts pads but not the ceil-mode overhang.
    """
    kernel = window.kernel_shape()
    padding = _symmetric(pads)
    if padding is None or any(2 * p > k for p, k in zip(padding, kernel, strict=False)):
        return None
    return padding


def _pool_supports(info: NodeInfo) -> str | None:
    if not info.attr("kernel_shape"):
        return f"{info.op_type} needs kernel_shape"
    return _floats_only(info) or _spatial_rank(info)


_SMALL_INTS = (ir.DataType.INT8, ir.DataType.UINT8)


def _max_pool_supports(info: NodeInfo) -> str | None:
    if info.input_dtypes and info.input_dtypes[0] in _SMALL_INTS:
        # 8-bit integers pool exactly in float32 (every value is representable)
        problem = None if info.attr("kernel_shape") else "MaxPool needs kernel_shape"
        problem = problem or _spatial_rank(info)
    else:
        problem = _pool_supports(info)
    return problem


@register("MaxPool", supports=_max_pool_supports)
def max_pool(info: NodeInfo) -> Callable[..., Any]:
    window = _Window(info)
    kernel = window.kernel_shape()
    ceil = bool(info.attr("ceil_mode", 0))
    want_indices = len(info.node.outputs) > 1 and bool(info.node.outputs[1].name)
    column_major = int(info.attr("storage_order", 0)) != 0
    fn = _MAX_POOL[window.spatial]

    def run(x: torch.Tensor) -> Any:
        if x.dtype in (torch.int8, torch.uint8):
            pooled = run(x.to(torch.float32))
            if isinstance(pooled, tuple):
                return pooled[0].to(x.dtype), pooled[1]
            return pooled.to(x.dtype)
        pads, ends = _pool_plan(window, x.shape[2:], ceil)
        padding = _native_pool_ok(window, pads)
        begins = pads[:window.spatial]
        if padding is None:
            x_in = F.pad(x, _torch_pad(begins + ends), value=-math.inf)
            padding, use_ceil = [0] * window.spatial, False
        else:
            x_in, use_ceil = x, ceil
            begins = [0] * window.spatial
        if not want_indices:
            return fn(x_in, kernel, window.strides, padding, window.dilations, use_ceil)
        y, idx = fn(x_in, kernel, window.strides, padding, window.dilations, use_ceil, True)
        return y, _onnx_indices(idx, x.shape, x_in.shape[2:], begins, column_major)

    return run


def _onnx_indices(idx: torch.Tensor, shape: Sequence[int], padded: Sequence[int],
                  begins: Sequence[int], column_major: bool = False) -> torch.Tensor:
    """torch's per-plane indices (into the padded input) -> ONNX's indices into the whole input
    (``column_major``: storage_order=1, the spatial axes flattened first axis fastest)."""
    if any(begins) or list(padded) != list(shape[2:]):
        flat = torch.zeros_like(idx)
        rest = idx
        for axis in reversed(range(len(padded))):
            coord = rest % padded[axis] - begins[axis]
            rest = rest // padded[axis]
            stride = math.prod(shape[3 + axis:])
            flat = flat + coord * stride
        idx = flat
    if column_major:
        spatial, rest, flat = list(shape[2:]), idx, torch.zeros_like(idx)
        for axis in reversed(range(len(spatial))):
            flat = flat + (rest % spatial[axis]) * math.prod(spatial[:axis])
            rest = rest // spatial[axis]
        idx = flat
    plane = math.prod(shape[2:])
    offsets = torch.arange(shape[0] * shape[1], device=idx.device, dtype=idx.dtype) * plane
    return idx + offsets.reshape(shape[0], shape[1], *([1] * (len(shape) - 2)))


def _sum_pool(x: torch.Tensor, window: _Window) -> torch.Tensor:
    """Window sums (with dilation) of an already padded tensor, as a depthwise conv with ones."""
    kernel = window.kernel_shape()
    channels = x.shape[1]
    ones = torch.ones((channels, 1, *kernel), dtype=x.dtype, device=x.device)
    return _CONV[window.spatial](x, ones, None, window.strides, 0, window.dilations, channels)


def _padded_sums(x: torch.Tensor, window: _Window, ceil: bool,
                 count_pads: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """Window sums of x and the number of elements each window averages over (ONNX's rule)."""
    n = window.spatial
    sizes = list(x.shape[2:])
    pads, ends = _pool_plan(window, sizes, ceil)
    begins = pads[:n]
    x_pad = F.pad(x, _torch_pad(begins + ends))
    mask = torch.ones([1, 1, *sizes], dtype=x.dtype, device=x.device)
    if count_pads:
        # Pads count, the ceil-mode overhang past the end pads does not.
        explicit = [min(e, pads[i + n]) for i, e in enumerate(ends)]
        mask = F.pad(mask, _torch_pad(begins + explicit), value=1.0)
        mask = F.pad(mask, _torch_pad([0] * n + [e - x for e, x in zip(ends, explicit, strict=True)]))
    else:
        mask = F.pad(mask, _torch_pad(begins + ends))
    return _sum_pool(x_pad, window), _sum_pool(mask, window)


def _avg_pool_supports(info: NodeInfo) -> str | None:
    return _pool_supports(info)


@register("AveragePool", supports=_avg_pool_supports)
def average_pool(info: NodeInfo) -> Callable[..., Any]:
    window = _Window(info)
    kernel = window.kernel_shape()
    ceil = bool(info.attr("ceil_mode", 0))
    count_pads = bool(info.attr("count_include_pad", 0))
    fn = _AVG_POOL[window.spatial]

    def run(x: torch.Tensor) -> torch.Tensor:
        pads, _ = _pool_plan(window, x.shape[2:], ceil)
        padding = _native_pool_ok(window, pads)
        if padding is not None and all(d == 1 for d in window.dilations):
            return fn(x, kernel, window.strides, padding, ceil, count_pads)
        sums, counts = _padded_sums(x, window, ceil, count_pads)
        return sums / counts

    return run


@register("LpPool", supports=_pool_supports)
def lp_pool(info: NodeInfo) -> Callable[..., Any]:
    window = _Window(info)
    ceil = bool(info.attr("ceil_mode", 0))
    p = float(info.attr("p", 2))

    def run(x: torch.Tensor) -> torch.Tensor:
        sums, _ = _padded_sums(x.abs().pow(p), window, ceil, True)
        return sums.pow(1.0 / p)

    return run


def _global_supports(info: NodeInfo) -> str | None:
    rank = info.rank(0)
    if rank is None or rank < 2:
        return f"{info.op_type} needs an input of known rank >= 2"
    return _floats_only(info)


def _spatial_dims(info: NodeInfo) -> tuple[int, ...]:
    return tuple(range(2, info.rank(0) or 2))


@register("GlobalAveragePool", supports=_global_supports)
def global_average_pool(info: NodeInfo) -> Callable[..., Any]:
    dims = _spatial_dims(info)
    return lambda x: x.mean(dims, keepdim=True) if dims else x


@register("GlobalMaxPool", supports=_global_supports)
def global_max_pool(info: NodeInfo) -> Callable[..., Any]:
    dims = _spatial_dims(info)
    return lambda x: x.amax(dims, keepdim=True) if dims else x


@register("GlobalLpPool", supports=_global_supports)
def global_lp_pool(info: NodeInfo) -> Callable[..., Any]:
    dims = _spatial_dims(info)
    p = float(info.attr("p", 2))
    return lambda x: x.abs().pow(p).sum(dims, keepdim=True).pow(1.0 / p)


# --- matrix products ----------------------------------------------------------------


def _matmul_supports(info: NodeInfo) -> str | None:
    return _floats_only(info, (0, 1))


@register("MatMul", supports=_matmul_supports)
def matmul(info: NodeInfo) -> Callable[..., Any]:
    return torch.matmul


def _gemm_supports(info: NodeInfo) -> str | None:
    return _floats_only(info, (0, 1))


@register("Gemm", supports=_gemm_supports)
def gemm(info: NodeInfo) -> Callable[..., Any]:
    alpha, beta = float(info.attr("alpha", 1.0)), float(info.attr("beta", 1.0))
    trans_a, trans_b = bool(info.attr("transA", 0)), bool(info.attr("transB", 0))

    def run(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor | None = None) -> torch.Tensor:
        a = a.t() if trans_a else a
        b = b.t() if trans_b else b
        if c is None or beta == 0.0:
            y = torch.mm(a, b)
            return y if alpha == 1.0 else y * alpha
        return torch.addmm(c.to(a.dtype), a, b, beta=beta, alpha=alpha)

    return run


# --- softmax family -----------------------------------------------------------------


def _softmax_like(info: NodeInfo, fn: Callable[[torch.Tensor, int], torch.Tensor]) -> Callable[..., Any]:
    """Opset >= 13 works along ``axis``; older opsets flatten to 2-D at ``axis`` first."""
    rank = info.rank(0)
    if info.opset >= 13:
        axis = int(info.attr("axis", -1))
        return lambda x: fn(x, axis)
    axis = int(info.attr("axis", 1))

    def run(x: torch.Tensor) -> torch.Tensor:
        cut = axis % x.dim() if x.dim() else 0
        return fn(x.reshape(math.prod(x.shape[:cut]), -1), 1).reshape(x.shape)

    del rank
    return run


def _hardmax(x: torch.Tensor, axis: int) -> torch.Tensor:
    index = x.argmax(axis, keepdim=True)  # first maximum, as ONNX asks
    return torch.zeros_like(x).scatter(axis, index, 1.0)


def _softmax_supports(info: NodeInfo) -> str | None:
    return _floats_only(info)


@register("Softmax", supports=_softmax_supports)
def softmax(info: NodeInfo) -> Callable[..., Any]:
    return _softmax_like(info, lambda x, axis: torch.softmax(x, axis))


@register("LogSoftmax", supports=_softmax_supports)
def log_softmax(info: NodeInfo) -> Callable[..., Any]:
    return _softmax_like(info, lambda x, axis: torch.log_softmax(x, axis))


@register("Hardmax", supports=_softmax_supports)
def hardmax(info: NodeInfo) -> Callable[..., Any]:
    return _softmax_like(info, _hardmax)


# --- dropout (inference) -------------------------------------------------------------


def _dropout_supports(info: NodeInfo) -> str | None:
    if info.opset < 7 and int(info.attr("is_test", 0)) == 0:
        return "Dropout with is_test=0 (training) is not supported"
    if info.has_input(2):
        mode = info.const(2)
        if mode is None:
            return "Dropout with a run-time training_mode is not supported (inference only)"
        if bool(mode.reshape(-1)[0]):
            return "Dropout with training_mode=True is random; not supported (inference only)"
    return None


@register("Dropout", supports=_dropout_supports)
def dropout(info: NodeInfo) -> Callable[..., Any]:
    mask_dtype = info.output_dtypes[1] if len(info.output_dtypes) > 1 else None
    want_mask = len(info.node.outputs) > 1 and bool(info.node.outputs[1].name)
    if not want_mask:
        return lambda x, *_: x
    torch_mask = torch.bool if mask_dtype in (None, ir.DataType.BOOL) else None

    def run(x: torch.Tensor, *_: Any) -> tuple[torch.Tensor, torch.Tensor]:
        return x, torch.ones_like(x, dtype=torch_mask or x.dtype)

    return run
