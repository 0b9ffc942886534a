"""Helpers shared by the lowerings of math, shape, indexing, reduce and misc ops.

Conventions every lowering here keeps:

* Static facts (axes, shapes, pads, ...) become Python ints at lowering time.
  Sizes of the runtime tensors (``x.shape``) are host metadata in torch, so
  reading them in the forward pass costs no device synchronisation.
* A lowering whose forward pass must read tensor *values* on the host (a shape
  given as a computed tensor, NonZero, Unique, ...) marks the callable it returns
  with ``data_dependent = True`` (see :func:`eager`): the graph runner then runs it
  eagerly, outside CUDA graphs.
* Tensors made from Python values use fill kernels (``torch.full``, ``fill_``), not
  host-to-device copies, so that they can be captured in CUDA graphs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, overload

import numpy as np
import onnx_ir as ir
import torch

from inferplex.devices.gpu.registry import NodeInfo
from inferplex.devices.gpu.tensors import TORCH_DTYPES

__all__ = [
    "EXACT_DTYPES", "FLOAT_DTYPES", "INT_DTYPES", "NUMERIC_DTYPES", "VALUE_KINDS", "attrs_reason",
    "const_int", "const_ints", "dtype_reason", "eager", "first_reason", "host_ints", "int64_tensor",
    "normalize_axis", "takes_device", "text", "torch_dtype", "value_kind",
]


FLOAT_DTYPES = frozenset({ir.DataType.FLOAT, ir.DataType.DOUBLE, ir.DataType.FLOAT16,
                          ir.DataType.BFLOAT16})
INT_DTYPES = frozenset({ir.DataType.INT8, ir.DataType.INT16, ir.DataType.INT32,
                        ir.DataType.INT64, ir.DataType.UINT8})
NUMERIC_DTYPES = FLOAT_DTYPES | INT_DTYPES
EXACT_DTYPES = frozenset(TORCH_DTYPES)

VALUE_KINDS = ("tensor", "sequence", "optional tensor", "optional sequence")
"""The kinds of value the GPU device holds (see :func:`value_kind`): a sequence is a Python list of
tensors on the torch side, an optional its value or None."""

# Attributes of opsets 1-5 that carried no meaning (an in-place hint).
_IGNORED_ATTRIBUTES = frozenset({"consumed_inputs"})


def text(value: Any) -> str:
    """A string attribute's value as ``str`` (onnx-ir may hold it as bytes); ``""`` for None."""
    if isinstance(value, bytes):
        return value.decode()
    return "" if value is None else str(value)


def torch_dtype(dtype: ir.DataType | int) -> torch.dtype:
    """The torch dtype of an ONNX element type that :data:`EXACT_DTYPES` holds."""
    return TORCH_DTYPES[ir.DataType(dtype)]


def dtype_reason(info: NodeInfo, indices: Iterable[int] = (0,),
                 allowed: frozenset[ir.DataType] = EXACT_DTYPES) -> str | None:
    """Why the element types of inputs ``indices`` cannot run (None: they can).

    An unknown element type is accepted: torch then fails loudly if it is one it
    lacks, it never computes a wrong value silently.
    """
    for index in indices:
        if not info.has_input(index):
            continue
        value = info.node.inputs[index]
        kind = None if value is None else value.type
        if value_kind(kind) != "tensor":
            return f"input {index} is a {kind}, not a tensor"
        dtype = info.input_dtypes[index] if index < len(info.input_dtypes) else None
        if dtype is not None and dtype not in allowed:
            return f"element type {dtype.name} of input {index} is not supported"
    return None


def attrs_reason(info: NodeInfo, known: Iterable[str]) -> str | None:
    """Why the node's attributes are not all implemented (None: they are)."""
    unknown = sorted(set(info.node.attributes) - set(known) - _IGNORED_ATTRIBUTES)
    return f"attribute(s) {', '.join(unknown)} not implemented" if unknown else None


def first_reason(*reasons: str | None) -> str | None:
    """The first reason that is not None."""
    return next((r for r in reasons if r is not None), None)


def const_ints(info: NodeInfo, index: int) -> list[int] | None:
    """Constant input ``index`` as a list of Python ints (None: absent or computed)."""
    value = info.const(index) if info.has_input(index) else None
    return None if value is None else [int(v) for v in np.asarray(value).reshape(-1)]


def const_int(info: NodeInfo, index: int) -> int | None:
    """Constant scalar input ``index`` as a Python int (None: absent or computed)."""
    values = const_ints(info, index)
    return None if values is None else values[0]


def normalize_axis(axis: int, rank: int) -> int:
    """``axis`` in [0, rank), with ONNX's negative axes counted from the end."""
    return axis + rank if axis < 0 else axis


def eager(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Mark ``fn`` as reading tensor values on the host: it runs outside CUDA graphs."""
    fn.data_dependent = True  # type: ignore[attr-defined]
    return fn


def takes_device(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Mark ``fn`` as taking the program's device as the keyword ``device``, for a tensor it makes
    that no input gives a device to (the length of an empty list, say); callers that do not pass
    it (constant folding) leave it None."""
    fn.takes_device = True  # type: ignore[attr-defined]
    return fn


def value_kind(value_type: ir.TypeProtocol | None) -> str:
    """The kind of an ONNX value, one of :data:`VALUE_KINDS` (a tensor also for an unknown type),
    or the type's own text for kinds the GPU device does not hold (maps, sparse tensors, nested
    sequences)."""
    if value_type is None or isinstance(value_type, ir.TensorType):
        return "tensor"
    if isinstance(value_type, ir.SequenceType) and isinstance(value_type.elem_type, ir.TensorType):
        return "sequence"
    if isinstance(value_type, ir.OptionalType):
        inner = value_kind(value_type.elem_type)
        if inner in ("tensor", "sequence"):
            return f"optional {inner}"
    return str(value_type)


@overload
def host_ints(tensor: torch.Tensor) -> list[int]: ...
@overload
def host_ints(tensor: None) -> None: ...
def host_ints(tensor: torch.Tensor | None) -> list[int] | None:
    """A runtime tensor's values on the host (a device sync: only in eager lowerings)."""
    return None if tensor is None else [int(v) for v in tensor.reshape(-1).tolist()]


def int64_tensor(values: Sequence[int], device: torch.device) -> torch.Tensor:
    """A 1-D int64 tensor of ``values`` built by fill kernels (no host-to-device copy)."""
    out = torch.empty(len(values), dtype=torch.int64, device=device)
    for i, v in enumerate(values):
        out[i] = v
    return out
