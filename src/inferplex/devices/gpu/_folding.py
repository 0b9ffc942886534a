"""What the GPU lowering resolves before run time: constant values and static shapes.

:func:`~inferplex.devices.gpu.lower.analyze_model` calls these for each node:

- :func:`constant_attribute` and :func:`static_shape_value` read a ``Constant``'s value,
  and ``Shape``/``Size`` of a tensor whose shape is fully static;
- :func:`fold_node` evaluates a deterministic node whose inputs are all constant with its
  own lowering on the host, so its outputs become constants and it never runs;
- :func:`propagate_shapes` runs a run-time node's lowering on meta tensors, under fixed
  input shapes, to find the static output shapes ONNX shape inference left unknown.

:func:`value_type` gives the element type and shape the analysis knows of a value, and
:data:`DATA_DEPENDENT` the ops whose output shape depends on input values (never
folded, and no CUDA graph capture of a program that runs one).  Kept apart from
:mod:`.lower`, which walks the graph and builds the GraphModule.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
import onnx_ir as ir
import torch

from inferplex.devices.gpu.ops._common import value_kind
from inferplex.devices.gpu.registry import NodeInfo
from inferplex.devices.gpu.tensors import HELD_DTYPES, held_array, numpy_to_torch, torch_to_numpy

if TYPE_CHECKING:
    from inferplex.devices.gpu.lower import Analysis

__all__ = ["DATA_DEPENDENT", "constant_attribute", "fold_node", "propagate_shapes", "static_shape_value",
           "value_type"]


# Ops whose output depends on random state: never folded to constants.
_NONDETERMINISTIC = {"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike",
                     "Bernoulli", "Multinomial"}
# Ops whose output shape depends on input values: the forward pass must read the
# device back, which CUDA graph capture forbids.
DATA_DEPENDENT = {"NonZero", "Unique", "NonMaxSuppression", "Compress", "Loop", "If", "Scan",
                  "StringNormalizer", "TfIdfVectorizer"}
# An If whose condition is constant takes one branch statically: its lowering then marks
# itself data-dependent only when that branch is, so the program may still be captured.
_FOLD_LIMIT_ELEMENTS = 1 << 24


def value_type(analysis: Analysis, value: ir.Value | None) -> tuple[Any, Any]:
    """(element type, shape) the analysis knows of ``value``: a constant's own, else what shape
    inference (or :func:`propagate_shapes`) found, else the model's declaration."""
    if value is None:
        return None, None
    if value in analysis.constants:
        array = analysis.constants[value]
        return _dtype_of_array(array), tuple(array.shape)
    dtype, shape = analysis.types.get(value.name or "", (None, None))
    if dtype is None:
        dtype = value.dtype
    if shape is None and value.shape is not None:
        shape = tuple(d if isinstance(d, int) else (d.value if isinstance(d, ir.SymbolicDim) else None)
                      for d in value.shape)
    return dtype, shape


def _dtype_of_array(array: np.ndarray) -> ir.DataType | None:
    try:
        return ir.DataType.from_numpy(array.dtype)
    except (TypeError, ValueError):
        return None


def constant_attribute(node: ir.Node) -> np.ndarray | None:
    """The value of a ``Constant`` node, or None for forms the device does not hold (strings, sparse)."""
    for name in ("value", "value_float", "value_floats", "value_int", "value_ints"):
        attribute = node.attributes.get(name)
        if attribute is None:
            continue
        raw = attribute.value
        if isinstance(raw, ir.TensorProtocol):
            return held_array(raw)
        return np.asarray(raw, dtype=np.float32 if "float" in name else np.int64)
    return None


def static_shape_value(node: ir.Node, info: NodeInfo) -> np.ndarray | None:
    """``Shape``/``Size`` of a tensor whose shape is fully static, as a constant."""
    shape = info.input_shapes[0] if info.input_shapes else None
    if shape is None:
        return None
    dims = [d for d in shape if isinstance(d, int)]
    if len(dims) != len(shape):
        return None
    if node.op_type == "Size":
        return np.asarray(int(np.prod(dims, dtype=np.int64)), dtype=np.int64)
    rank = len(dims)
    start, end = info.attr("start", 0), info.attr("end", rank)
    start, end = (max(0, min(rank, s + rank if s < 0 else s)) for s in (start, end))
    return np.asarray(dims[start:end], dtype=np.int64)


def fold_node(analysis: Analysis, node: ir.Node, info: NodeInfo, fn: Callable[..., Any]) -> bool:
    """Evaluate a node with constant inputs on the host; record its outputs as constants."""
    if node.op_type in _NONDETERMINISTIC or (
            node.op_type in DATA_DEPENDENT and node.op_type != "NonZero"):
        return False
    present = [c for i, c in enumerate(info.constants) if info.has_input(i)]
    known = [c for c in present if c is not None]
    if len(known) != len(present) or any(a.dtype.name not in _NP_OK for a in known):
        return False
    try:
        with torch.no_grad():
            args = [None if c is None else numpy_to_torch(c) for c in info.constants]
            result = fn(*args)
    except Exception:  # noqa: BLE001 - a node that fails to fold simply runs at run time
        return False
    # Several outputs come as a tuple; a list is one value (a sequence), never folded.
    results = result if isinstance(result, tuple) else (result,)
    arrays = []
    for tensor in results:
        if not isinstance(tensor, torch.Tensor) or tensor.numel() > _FOLD_LIMIT_ELEMENTS:
            return False
        arrays.append(torch_to_numpy(tensor).copy())
    # A lowering may return fewer results than the node declares outputs.
    for value, array in zip(node.outputs, arrays, strict=False):
        if value is not None:
            analysis.constants[value] = array
    return True


_NP_OK = {"float32", "float64", "float16", "bfloat16", "int8", "int16", "int32", "int64", "uint8", "bool",
          "uint16", "uint32", "uint64", "float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz"}


_IR_DTYPES = {torch_dtype: ir_dtype for ir_dtype, torch_dtype in HELD_DTYPES.items()}


def _meta_args(analysis: Analysis, node: ir.Node) -> list[torch.Tensor | None] | None:
    """The node's inputs as meta tensors (shapes and types only); None when a shape is not static."""
    args: list[torch.Tensor | None] = []
    for value in node.inputs:
        if value is None:
            args.append(None)
        elif value_kind(value.type) != "tensor":  # a sequence or optional: no meta tensor stands for it
            return None
        elif value in analysis.constants:
            args.append(numpy_to_torch(analysis.constants[value]).to("meta"))
        else:
            dtype, shape = value_type(analysis, value)
            if dtype not in HELD_DTYPES or shape is None or not all(isinstance(d, int) for d in shape):
                return None
            args.append(torch.empty(shape, dtype=HELD_DTYPES[dtype], device="meta"))
    return args


def propagate_shapes(analysis: Analysis, node: ir.Node, fn: Callable[..., Any],
                     fresh: Callable[[], Callable[..., Any]]) -> None:
    """Static output shapes of a run-time node, where ONNX shape inference left dims unknown.

    Under fixed input shapes, the node's own lowering run on meta tensors gives
    the shapes it will produce, so ``Shape`` of its outputs folds downstream.
    Lowerings that read tensor values (data-dependent shapes) are skipped: their
    output shapes may differ between runs of one signature.  The meta run uses a
    fresh lowering (``fresh()``), so per-shape caches inside the one the module
    runs never hold meta tensors.
    """
    if (node.op_type in DATA_DEPENDENT or node.op_type in _NONDETERMINISTIC
            or getattr(fn, "data_dependent", False)):
        return
    names = [v.name for v in node.outputs if v is not None and v.name]
    known = [analysis.types.get(n, (None, None))[1] for n in names]
    if all(shape is not None and all(isinstance(d, int) for d in shape) for shape in known):
        return
    args = _meta_args(analysis, node)
    if args is None:
        return
    try:
        with torch.no_grad():
            result = fresh()(*args)
    except Exception:  # noqa: BLE001 - an op meta tensors cannot run keeps what inference said
        return
    results = result if isinstance(result, tuple) else (result,)
    # A lowering may return fewer results than the node declares outputs.
    for value, tensor in zip(node.outputs, results, strict=False):
        if value is None or not value.name or not isinstance(tensor, torch.Tensor):
            continue
        dtype = analysis.types.get(value.name, (None, None))[0] or _IR_DTYPES.get(tensor.dtype)
        analysis.types[value.name] = (dtype, tuple(int(d) for d in tensor.shape))
