"""Building models in code, with the names and signatures of OpenVINO's opset functions.

    >>> import numpy as np
    >>> import inferplex as ov
    >>> from inferplex import opset
    >>> x = opset.parameter([1, 4], np.float32, name="x")
    >>> y = opset.relu(opset.matmul(x, np.eye(4, dtype=np.float32), False, True))
    >>> model = ov.Model(y, [x], "tiny")

Each function returns a :class:`~inferplex.api.nodes.Node` whose outputs are
onnx-ir values; element types and shapes are inferred as each node is made
(ONNX's per-node shape inference), so a mismatch is reported at the call that
makes it.  An input may be a node, a node's output port, a numpy array or a
number (a constant; a Python number takes the element type of the other
operand).  The functions follow OpenVINO's latest opset (``inferplex.opset9`` to
``opset17`` are this module); ``inferplex.opset1`` (opsets 1 to 7) keeps opset 1's ``max_pool``
(one output, no dilations), and it and ``inferplex.opset8`` leave out the functions of later
opsets (:data:`SINCE_OPSET`) and take ``range`` without ``output_type``.  Where OpenVINO's
Python API changed a function's arguments between opsets (``interpolate``, ``mvn``), the one
function here takes each form.
"""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx_ir as ir

from inferplex._opsets import blocks as _blocks
from inferplex._opsets import colour as _colour
from inferplex._opsets import control_flow as _control_flow
from inferplex._opsets import control_loops as _control_loops
from inferplex._opsets import detection as _detection
from inferplex._opsets import detection_more as _detection_more
from inferplex._opsets import embedding as _embedding
from inferplex._opsets import index as _index
from inferplex._opsets import interpolate as _interpolate
from inferplex._opsets import math as _math
from inferplex._opsets import matrix_nms as _matrix_nms
from inferplex._opsets import more as _more
from inferplex._opsets import nms_rotated as _nms_rotated
from inferplex._opsets import nn as _nn
from inferplex._opsets import opsets_14_to_16 as _opsets_14_to_16
from inferplex._opsets import priors as _priors
from inferplex._opsets import proposal as _proposal
from inferplex._opsets import psroi_deformable as _psroi_deformable
from inferplex._opsets import recent as _recent
from inferplex._opsets import recurrent as _recurrent
from inferplex._opsets import roi_rotated as _roi_rotated
from inferplex._opsets import sequence_ops as _sequence_ops
from inferplex._opsets import shapes as _shapes
from inferplex._opsets import slicing as _slicing
from inferplex._opsets import sparse as _sparse
from inferplex._opsets import spectral as _spectral
from inferplex._opsets.attributes import recording_attributes as _recording_attributes
from inferplex._opsets.blocks import *  # noqa: F403 - re-exported: GRN, Bucketize, BatchToSpace, adaptive pools
from inferplex._opsets.build import NodeInput
from inferplex._opsets.build import int64 as _int64
from inferplex._opsets.build import is_graph_input as _is_graph_input
from inferplex._opsets.build import make_op as _op
from inferplex._opsets.build import step as _step
from inferplex._opsets.build import value_of as _value
from inferplex._opsets.colour import *  # noqa: F403 - re-exported: NV12 and I420 to RGB and BGR
from inferplex._opsets.control_flow import *  # noqa: F403 - re-exported: if_op
from inferplex._opsets.control_loops import *  # noqa: F403 - re-exported: loop, tensor_iterator
from inferplex._opsets.detection import *  # noqa: F403 - re-exported: NMS, ROI pooling, YOLO layers
from inferplex._opsets.detection_more import *  # noqa: F403 - re-exported: MulticlassNms, PSROIPooling
from inferplex._opsets.embedding import *  # noqa: F403 - re-exported: embedding bags, CTC decoders
from inferplex._opsets.index import *  # noqa: F403 - re-exported: gathers, scatters, one_hot
from inferplex._opsets.interpolate import *  # noqa: F403 - re-exported: interpolate
from inferplex._opsets.math import *  # noqa: F403 - re-exported: more element-wise ops and reductions
from inferplex._opsets.matrix_nms import *  # noqa: F403 - re-exported: MatrixNms
from inferplex._opsets.more import *  # noqa: F403 - re-exported: element-wise, splits, reductions
from inferplex._opsets.nms_rotated import *  # noqa: F403 - re-exported: NMSRotated
from inferplex._opsets.nn import *  # noqa: F403 - re-exported: normalizations, group conv, attention
from inferplex._opsets.opsets_14_to_16 import *  # noqa: F403 - re-exported: STFT, SearchSorted, Inverse, ...
from inferplex._opsets.priors import *  # noqa: F403 - re-exported: PriorBox, PriorBoxClustered
from inferplex._opsets.proposal import *  # noqa: F403 - re-exported: Proposal
from inferplex._opsets.psroi_deformable import *  # noqa: F403 - re-exported: DeformablePSROIPooling
from inferplex._opsets.recent import *  # noqa: F403 - re-exported: unique, eye, grid_sample, bitwise ops
from inferplex._opsets.recurrent import *  # noqa: F403 - re-exported: LSTM, GRU, RNN sequences and cells
from inferplex._opsets.roi_rotated import *  # noqa: F403 - re-exported: ROIAlignRotated
from inferplex._opsets.sequence_ops import *  # noqa: F403 - re-exported: RandomUniform, GatherTree
from inferplex._opsets.shapes import *  # noqa: F403 - re-exported: broadcast, pad, range, ...
from inferplex._opsets.slicing import *  # noqa: F403 - re-exported: slice, strided_slice, roll
from inferplex._opsets.sparse import *  # noqa: F403 - re-exported: SparseFillEmptyRows
from inferplex._opsets.spectral import *  # noqa: F403 - re-exported: DFT, IDFT, RDFT, IRDFT
from inferplex.api.nodes import Constant, Node, Parameter, Result, to_ir_dtype
from inferplex.errors import InputError
from inferplex.state.ops import assign, read_value

__all__ = [
    "add",
    "assign",
    "avg_pool",
    "concat",
    "constant",
    "convolution",
    "divide",
    "matmul",
    "max_pool",
    "multiply",
    "parameter",
    "read_value",
    "relu",
    "reshape",
    "result",
    "sigmoid",
    "softmax",
    "subtract",
    "transpose",
]
__all__ += _more.__all__
__all__ += _math.__all__
__all__ += _shapes.__all__
__all__ += _slicing.__all__
__all__ += _index.__all__
__all__ += _nn.__all__
__all__ += _interpolate.__all__
__all__ += _recurrent.__all__
__all__ += _spectral.__all__
__all__ += _blocks.__all__
__all__ += _embedding.__all__
__all__ += _detection.__all__
__all__ += _detection_more.__all__
__all__ += _proposal.__all__
__all__ += _matrix_nms.__all__
__all__ += _psroi_deformable.__all__
__all__ += _opsets_14_to_16.__all__
__all__ += _sparse.__all__
__all__ += _roi_rotated.__all__
__all__ += _nms_rotated.__all__
__all__ += _priors.__all__
__all__ += _colour.__all__
__all__ += _sequence_ops.__all__
__all__ += _control_flow.__all__
__all__ += _control_loops.__all__
__all__ += _recent.__all__

SINCE_OPSET = {"slice": 8, "softsign": 9, "is_finite": 10, "is_inf": 10, "is_nan": 10,
               "group_normalization": 12, "scaled_dot_product_attention": 13,
               "adaptive_avg_pool": 8, "adaptive_max_pool": 8, "rdft": 9, "irdft": 9,
               "nv12_to_rgb": 8, "nv12_to_bgr": 8, "i420_to_rgb": 8, "i420_to_bgr": 8,
               "random_uniform": 8, "if_op": 8, "identity": 16, "eye": 9, "grid_sample": 9, "unique": 10,
               "bitwise_and": 13, "bitwise_or": 13, "bitwise_xor": 13, "bitwise_not": 13,
               "multinomial": 13, "fake_convert": 13, "deformable_convolution": 8, "multiclass_nms": 8,
               "matrix_nms": 8, "generate_proposals": 9,
               "inverse": 14, "stft": 15, "search_sorted": 15, "slice_scatter": 15, "col2im": 15,
               "segment_max": 16, "embedding_bag_offsets": 15, "embedding_bag_packed": 15,
               "bitwise_left_shift": 15, "bitwise_right_shift": 15,
               "convert_promote_types": 14, "istft": 16, "sparse_fill_empty_rows": 16,
               "roi_align_rotated": 15, "nms_rotated": 13}
"""The functions here that OpenVINO's opsets gained after opset 7, by the opset that added them
(``inferplex.opset1`` stands for opsets 1 to 7, ``inferplex.opset8`` for opset 8)."""

_AUTO_PAD = {"explicit": "NOTSET", "notset": "NOTSET", "same_upper": "SAME_UPPER",
             "same_lower": "SAME_LOWER", "valid": "VALID"}


# --- inputs, outputs and constants ---------------------------------------------------------------


def parameter(shape: Any, dtype: Any = np.float32, name: str | None = None) -> Parameter:
    """A model input of ``shape`` (list, string ``"1,3,?,?"``, PartialShape) and element type ``dtype``
    (Python's ``float`` and ``int``: f32 and i32, as OpenVINO's opset functions take them)."""
    return Parameter(_sized(dtype), shape, name=name)


def constant(value: Any, dtype: Any = None, name: str | None = None, **_: Any) -> Constant:
    """A constant from a numpy array, a list or a number (``dtype``: numpy dtype, ``"f32"``, ov.Type;
    Python's ``float`` and ``int``: f32 and i32)."""
    array = np.asarray(value.data if hasattr(value, "data") and not isinstance(value, np.ndarray)
                       else value)
    if dtype is not None:
        array = array.astype(to_ir_dtype(_sized(dtype)).numpy())
    return Constant(array, name=name)


def _sized(dtype: Any) -> Any:
    """Python's ``float`` and ``int`` as the opset functions take them: f32 and i32."""
    return "f32" if dtype is float else "i32" if dtype is int else dtype


def result(data: NodeInput, name: str | None = None) -> Result:
    """Mark ``data`` as a model output."""
    return Result(_value(data), name=name)


# --- element-wise ----------------------------------------------------------------------------------


def add(left: NodeInput, right: NodeInput, auto_broadcast: str = "NUMPY", name: str | None = None) -> Node:
    return _binary("Add", "Add", left, right, auto_broadcast, name)


def subtract(left: NodeInput, right: NodeInput, auto_broadcast: str = "NUMPY",
             name: str | None = None) -> Node:
    return _binary("Subtract", "Sub", left, right, auto_broadcast, name)


def multiply(left: NodeInput, right: NodeInput, auto_broadcast: str = "NUMPY",
             name: str | None = None) -> Node:
    return _binary("Multiply", "Mul", left, right, auto_broadcast, name)


def divide(left: NodeInput, right: NodeInput, auto_broadcast: str = "NUMPY", name: str | None = None) -> Node:
    return _binary("Divide", "Div", left, right, auto_broadcast, name)


def relu(node: NodeInput, name: str | None = None) -> Node:
    return _op("Relu", "Relu", [_value(node)], {}, name)


def sigmoid(data: NodeInput, name: str | None = None) -> Node:
    return _op("Sigmoid", "Sigmoid", [_value(data)], {}, name)


def softmax(data: NodeInput, axis: int, name: str | None = None) -> Node:
    """Softmax along ``axis`` (negative counts from the end)."""
    return _op("Softmax", "Softmax", [_value(data)], {"axis": int(axis)}, name)


# --- convolution, pooling, matmul ------------------------------------------------------------------


def convolution(data: NodeInput, filters: NodeInput, strides: Sequence[int], pads_begin: Sequence[int],
                pads_end: Sequence[int], dilations: Sequence[int], auto_pad: str = "EXPLICIT",
                name: str | None = None) -> Node:
    """N-D convolution; ``filters`` are ``[C_out, C_in, k...]`` as in ONNX."""
    attrs = {"strides": list(strides), "dilations": list(dilations), **_pads(pads_begin, pads_end, auto_pad)}
    return _op("Convolution", "Conv", [_value(data), _value(filters)], attrs, name)


def max_pool(data: NodeInput, strides: Sequence[int], dilations: Sequence[int], pads_begin: Sequence[int],
             pads_end: Sequence[int], kernel_shape: Sequence[int], rounding_type: str = "floor",
             auto_pad: str | None = None, index_element_type: Any = "i64", axis: int = 0,
             name: str | None = None) -> Node:
    """Max pooling with two outputs: the values and their flat indices (over the whole tensor)."""
    if axis != 0:
        raise InputError(f"max_pool with axis={axis}: only axis 0 (indices over the whole tensor) "
                         "has an ONNX equivalent")
    node = max_pool_node(data, strides, dilations, pads_begin, pads_end, kernel_shape, rounding_type,
                         auto_pad, name, num_outputs=2)
    index_type = to_ir_dtype(index_element_type)
    if index_type != ir.DataType.INT64:
        cast = _op("Convert", "Cast", [node._outputs[1]], {"to": int(index_type)}, None)  # noqa: SLF001
        node._outputs[1] = cast._outputs[0]  # noqa: SLF001
        node._onnx_nodes.extend(cast._onnx_nodes)  # noqa: SLF001
    return node


def max_pool_node(data: NodeInput, strides: Sequence[int], dilations: Sequence[int],
                  pads_begin: Sequence[int], pads_end: Sequence[int], kernel_shape: Sequence[int],
                  rounding_type: str, auto_pad: str | None, name: str | None, num_outputs: int) -> Node:
    """One ONNX MaxPool: values, and with ``num_outputs=2`` their flat indices."""
    attrs = {"kernel_shape": list(kernel_shape), "strides": list(strides), "dilations": list(dilations),
             "ceil_mode": _ceil(rounding_type), **_pads(pads_begin, pads_end, auto_pad)}
    node = _op("MaxPool", "MaxPool", [_value(data)], attrs, name, num_outputs=num_outputs)
    return _torch_ceil(node, rounding_type, attrs, dilations)


def avg_pool(data_batch: NodeInput, strides: Sequence[int], pads_begin: Sequence[int],
             pads_end: Sequence[int], kernel_shape: Sequence[int], exclude_pad: bool,
             rounding_type: str = "floor", auto_pad: str | None = None, name: str | None = None) -> Node:
    """Average pooling; ``exclude_pad`` leaves padding out of each window's count."""
    attrs = {"kernel_shape": list(kernel_shape), "strides": list(strides), "ceil_mode": _ceil(rounding_type),
             "count_include_pad": 0 if exclude_pad else 1, **_pads(pads_begin, pads_end, auto_pad)}
    node = _op("AvgPool", "AveragePool", [_value(data_batch)], attrs, name)
    return _torch_ceil(node, rounding_type, attrs, [1] * len(kernel_shape))


def _torch_ceil(node: Node, rounding_type: str, attrs: dict[str, Any], dilations: Sequence[int]) -> Node:
    """A pool of ``rounding_type`` ``ceil_torch``: ONNX's ``ceil_mode``, less a last window that
    starts past the input and its begin padding (PyTorch's rule, which OpenVINO's ceil_torch
    follows), taken off each output with a Slice.  A window starts at ``i * stride`` in the padded
    input, so at most ``ceil((length + pad_begin) / stride)`` windows start before its end padding:
    the Slice ends there (worked out here where the length is known, from the tensor's shape where
    it is not)."""
    if str(rounding_type).lower() != "ceil_torch" or "pads" not in attrs:
        return node
    source = node._onnx_nodes[0].inputs[0]  # noqa: SLF001
    if source is None or source.shape is None:
        raise InputError("a pool with rounding_type 'ceil_torch' needs its input's rank")
    strides, pads = attrs["strides"], attrs["pads"]
    rank = len(attrs["kernel_shape"])
    dims = list(source.shape)[-rank:]
    outputs = node._outputs  # noqa: SLF001
    known = [length for length in dims if isinstance(length, int)]
    if len(known) == rank:
        counts = [-(-(length + pads[axis]) // strides[axis]) for axis, length in enumerate(known)]
        pooled = list(outputs[0].shape)[-rank:] if outputs[0].shape is not None else [None] * rank
        if all(isinstance(have, int) and have <= end for have, end in zip(pooled, counts, strict=True)):
            return node  # no window starts in the end padding
        ends: Any = _value(np.asarray(counts, np.int64))
    else:
        lengths = _step("Slice", [_step("Shape", [source]), np.array([-rank], np.int64),
                                  np.array([len(source.shape)], np.int64)])
        begun = _step("Add", [lengths, np.asarray(pads[:rank], np.int64)])
        stride = np.asarray(strides, np.int64)
        ends = _step("Div", [_step("Add", [begun, stride - 1]), stride])  # a ceiling division
    axes = list(builtins.range(-rank, 0))
    for index, output in enumerate(list(outputs)):
        bounds = [_value(np.zeros(rank, np.int64)), ends, _value(np.asarray(axes, np.int64))]
        sliced = _op("Slice", "Slice", [output, *bounds], {}, None)
        node._onnx_nodes.extend(sliced._onnx_nodes)  # noqa: SLF001
        outputs[index] = sliced._outputs[0]  # noqa: SLF001
    return node


def matmul(data_a: NodeInput, data_b: NodeInput, transpose_a: bool, transpose_b: bool,
           name: str | None = None) -> Node:
    """Matrix product, numpy-style batched; ``transpose_*`` swap the last two dims of an input first."""
    a, b = _value(data_a), _value(data_b)
    helpers: list[ir.Node] = []
    label = name or "MatMul"
    if transpose_a:
        a = _swap_last(a, f"{label}/transpose_a", helpers)
    if transpose_b:
        b = _swap_last(b, f"{label}/transpose_b", helpers)
    node = _op("MatMul", "MatMul", [a, b], {}, name)
    node._onnx_nodes[:0] = helpers  # noqa: SLF001
    return node


def _swap_last(value: ir.Value, label: str, helpers: list[ir.Node]) -> ir.Value:
    rank = len(value.shape) if value.shape is not None else None
    if rank is None:
        raise InputError("matmul with a transpose needs inputs of known rank")
    if rank < 2:
        return value  # OpenVINO ignores the transpose of a 1-D input
    perm = [*builtins.range(rank - 2), rank - 1, rank - 2]  # this module's range is the op
    node = _op("Transpose", "Transpose", [value], {"perm": perm}, label)
    helpers.extend(node._onnx_nodes)  # noqa: SLF001
    return node._outputs[0]  # noqa: SLF001


# --- shape ops -------------------------------------------------------------------------------------


def reshape(node: NodeInput, output_shape: NodeInput, special_zero: bool, name: str | None = None) -> Node:
    """Reshape to ``output_shape``; with ``special_zero`` a 0 copies the input's dim, else it is 0."""
    shape = _int64(output_shape)
    const = shape.const_value.numpy() if shape.const_value is not None else None
    attrs = {} if special_zero or (const is not None and not (const == 0).any()) else {"allowzero": 1}
    return _op("Reshape", "Reshape", [_value(node), shape], attrs, name)


def concat(nodes: Sequence[NodeInput], axis: int, name: str | None = None) -> Node:
    return _op("Concat", "Concat", [_value(n) for n in nodes], {"axis": int(axis)}, name)


def transpose(data: NodeInput, input_order: NodeInput, name: str | None = None) -> Node:
    """Permute dims; ``input_order`` must be constant (ONNX takes it as an attribute)."""
    order = _value(input_order, dtype=ir.DataType.INT64)
    if order.const_value is None:
        raise InputError("transpose needs a constant input_order (a list or a constant node)")
    perm = [int(i) for i in order.const_value.numpy().reshape(-1)]
    return _op("Transpose", "Transpose", [_value(data)], {"perm": perm} if perm else {}, name)


# --- helpers -------------------------------------------------------------------------------------


def _pads(begin: Sequence[int], end: Sequence[int], auto_pad: str | None) -> dict[str, Any]:
    mode = _AUTO_PAD.get(str(auto_pad or "explicit").lower())
    if mode is None:
        raise InputError(f"auto_pad {auto_pad!r} is not one of {', '.join(_AUTO_PAD)}")
    if mode != "NOTSET":
        return {"auto_pad": mode}
    return {"pads": [*begin, *end]}


def _ceil(rounding_type: str) -> int:
    kind = str(rounding_type).lower()
    if kind not in ("floor", "ceil", "ceil_torch"):
        raise InputError(f"rounding_type {rounding_type!r} is not one of floor, ceil, ceil_torch")
    return 0 if kind == "floor" else 1


def _binary(type_name: str, op_type: str, left: NodeInput, right: NodeInput, auto_broadcast: str,
            name: str | None) -> Node:
    if str(auto_broadcast).upper() not in ("NUMPY", "NONE"):
        raise InputError(f"auto_broadcast {auto_broadcast!r}: ONNX broadcasts numpy-style; "
                         "accepted: 'numpy', 'none'")
    like = _value(left) if _is_graph_input(left) else _value(right) if _is_graph_input(right) else None
    dtype = like.dtype if like is not None else None
    return _op(type_name, op_type, [_value(left, dtype), _value(right, dtype)], {}, name)


# Every op built here records the OpenVINO attributes it was given (``get_attributes()``).
for _name in __all__:
    globals()[_name] = _recording_attributes(_name, globals()[_name])
del _name
