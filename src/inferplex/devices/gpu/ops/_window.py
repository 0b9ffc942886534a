"""Shared by the convolution and pooling lowerings: ONNX's kernel, stride, dilation and pad
attributes resolved per input shape, and the padding forms torch takes.

Torch takes symmetric padding directly; asymmetric pads (and SAME_UPPER/SAME_LOWER,
computed from the run-time input shape, which torch knows on the host without a
device read) are applied with ``F.pad`` first.
"""

from __future__ import annotations

from collections.abc import Sequence

import onnx_ir as ir
import torch.nn.functional as F

from inferplex.devices.gpu.registry import NodeInfo
from inferplex.errors import CompileError

FLOATS = (ir.DataType.FLOAT, ir.DataType.DOUBLE, ir.DataType.FLOAT16, ir.DataType.BFLOAT16)
CONV = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}


def floats_only(info: NodeInfo, inputs: Sequence[int] = (0,)) -> str | None:
    for index in inputs:
        dtype = info.input_dtypes[index] if index < len(info.input_dtypes) else None
        if dtype is not None and dtype not in FLOATS:
            return f"{info.op_type} input {index} is {dtype.name}; accepted: floating types"
    return None


_WEIGHTED = frozenset({"Conv", "ConvTranspose", "ConvInteger"})
"""Ops whose input 1 is a weight of the data input's rank ([M, C/group, k1, ..., kn])."""


def input_rank(info: NodeInfo) -> int | None:
    """The data input's rank; for a convolution whose input's rank shape inference could not tell
    (a graph input declared without a shape), the weight's rank, which ONNX makes the same."""
    rank = info.rank(0)
    if rank is None and info.op_type in _WEIGHTED:
        rank = info.rank(1)
    return rank


def spatial_rank(info: NodeInfo, allowed: Sequence[int] = (1, 2, 3)) -> str | None:
    rank = input_rank(info)
    kernel = info.attr("kernel_shape")
    spatial = rank - 2 if rank is not None else (len(kernel) if kernel else None)
    if spatial is None:
        return f"{info.op_type} needs the input rank (shape inference could not tell it)"
    if spatial not in allowed:
        return f"{info.op_type} with {spatial} spatial dims is not supported (accepted: {list(allowed)})"
    return None


def same_pads(auto_pad: str, sizes: Sequence[int], kernels: Sequence[int], strides: Sequence[int],
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


def torch_pad(pads: Sequence[int]) -> list[int]:
    """ONNX [b1, b2, .., e1, e2, ..] -> F.pad's last-dim-first [b_n, e_n, ..., b_1, e_1]."""
    n = len(pads) // 2
    result: list[int] = []
    for axis in reversed(range(n)):
        result += [pads[axis], pads[axis + n]]
    return result


class Window:
    """Kernel/stride/dilation/pad attributes of a conv or pool node, resolved per input shape."""

    def __init__(self, info: NodeInfo, spatial: int | None = None):
        kernel = info.attr("kernel_shape")
        if spatial is None:
            spatial = len(kernel) if kernel else (input_rank(info) or 4) - 2
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
            return same_pads(self.auto_pad, sizes, kernel, self.strides, self.dilations)
        if self.auto_pad == "VALID":
            return [0] * 2 * self.spatial
        return self.pads


def symmetric(pads: Sequence[int]) -> list[int] | None:
    n = len(pads) // 2
    return list(pads[:n]) if list(pads[:n]) == list(pads[n:]) else None

