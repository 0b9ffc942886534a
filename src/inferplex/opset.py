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
operand).  The functions follow OpenVINO's latest opset; ``inferplex.opset1``
keeps opset 1's ``max_pool`` (one output, no dilations).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx
import onnx_ir as ir

from inferplex import _opset_more as _more
from inferplex._opset_more import *  # noqa: F403 - re-exported: element-wise, splits, reductions
from inferplex.api.build import OPSET
from inferplex.api.nodes import Constant, Node, Parameter, Result, to_ir_dtype
from inferplex.errors import InputError

__all__ = [
    "add", "avg_pool", "concat", "constant", "convolution", "divide", "matmul", "max_pool", "multiply",
    "parameter", "relu", "reshape", "result", "sigmoid", "softmax", "subtract", "transpose",
    *_more.__all__,
]

NodeInput = Any
"""A Node, an output port, a numpy array or a number."""

_AUTO_PAD = {"explicit": "NOTSET", "notset": "NOTSET", "same_upper": "SAME_UPPER",
             "same_lower": "SAME_LOWER", "valid": "VALID"}


# --- inputs, outputs and constants ---------------------------------------------------------------


def parameter(shape: Any, dtype: Any = np.float32, name: str | None = None) -> Parameter:
    """A model input of ``shape`` (list, string ``"1,3,?,?"``, PartialShape) and element type ``dtype``."""
    return Parameter(dtype, shape, name=name)


def constant(value: Any, dtype: Any = None, name: str | None = None, **_: Any) -> Constant:
    """A constant from a numpy array, a list or a number (``dtype``: numpy dtype, ``"f32"``, ov.Type)."""
    array = np.asarray(value.data if hasattr(value, "data") and not isinstance(value, np.ndarray)
                       else value)
    if dtype is not None:
        array = array.astype(to_ir_dtype(dtype).numpy())
    return Constant(array, name=name)


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
    return _op("MaxPool", "MaxPool", [_value(data)], attrs, name, num_outputs=num_outputs)


def avg_pool(data_batch: NodeInput, strides: Sequence[int], pads_begin: Sequence[int],
             pads_end: Sequence[int], kernel_shape: Sequence[int], exclude_pad: bool,
             rounding_type: str = "floor", auto_pad: str | None = None, name: str | None = None) -> Node:
    """Average pooling; ``exclude_pad`` leaves padding out of each window's count."""
    attrs = {"kernel_shape": list(kernel_shape), "strides": list(strides), "ceil_mode": _ceil(rounding_type),
             "count_include_pad": 0 if exclude_pad else 1, **_pads(pads_begin, pads_end, auto_pad)}
    return _op("AvgPool", "AveragePool", [_value(data_batch)], attrs, name)


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
    perm = [*range(rank - 2), rank - 1, rank - 2]
    node = _op("Transpose", "Transpose", [value], {"perm": perm}, label)
    helpers.extend(node._onnx_nodes)  # noqa: SLF001
    return node._outputs[0]  # noqa: SLF001


# --- shape ops -------------------------------------------------------------------------------------


def reshape(node: NodeInput, output_shape: NodeInput, special_zero: bool, name: str | None = None) -> Node:
    """Reshape to ``output_shape``; with ``special_zero`` a 0 copies the input's dim, else it is 0."""
    shape = _value(output_shape, dtype=ir.DataType.INT64)
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


def _is_graph_input(item: Any) -> bool:
    return isinstance(item, Node) or isinstance(getattr(item, "_value", None), ir.Value)


def _value(item: NodeInput, dtype: ir.DataType | None = None) -> ir.Value:
    """The onnx-ir value behind a node, port, array or number."""
    if isinstance(item, Node):
        return item._outputs[0]  # noqa: SLF001 - same layer
    if isinstance(getattr(item, "_value", None), ir.Value):  # an output port
        return item._value  # noqa: SLF001
    if isinstance(item, ir.Value):
        return item
    array = np.asarray(item)
    if array.dtype == object:
        raise InputError(f"{type(item).__name__} is not a node, port, array or number")
    if dtype is not None and not isinstance(item, np.ndarray):  # Python numbers and lists follow the node
        array = array.astype(dtype.numpy())
    return Constant(array)._outputs[0]  # noqa: SLF001


def _op(type_name: str, op_type: str, inputs: Sequence[ir.Value], attrs: dict[str, Any], name: str | None,
        num_outputs: int = 1) -> Node:
    """One ONNX node for an OpenVINO op, its output types and shapes inferred now."""
    node = ir.node(op_type, list(inputs), attributes=attrs, num_outputs=num_outputs)
    built = Node(type_name, node.outputs, [node], name=name)
    node.name = built.get_friendly_name()
    _infer(built, node, inputs, attrs)
    return built


def _infer(built: Node, node: ir.Node, inputs: Sequence[ir.Value], attrs: dict[str, Any]) -> None:
    names = [f"in{i}" for i in range(len(inputs))]
    outs = [f"out{i}" for i in range(len(node.outputs))]
    proto = onnx.helper.make_node(node.op_type, names, outs, **attrs)
    types, data = {}, {}
    for label, value in zip(names, inputs, strict=True):
        dims = None if value.shape is None else [d if isinstance(d, int) else d.value for d in value.shape]
        types[label] = onnx.helper.make_tensor_type_proto(int(value.dtype or 0), dims)
        if value.const_value is not None and value.const_value.nbytes <= 1024:
            data[label] = onnx.numpy_helper.from_array(value.const_value.numpy(), label)
    try:
        schema = onnx.defs.get_schema(node.op_type, OPSET)
        inferred = onnx.shape_inference.infer_node_outputs(
            schema, proto, types, data, opset_imports=[onnx.helper.make_opsetid("", OPSET)])
    except (onnx.shape_inference.InferenceError, onnx.defs.SchemaError,
            onnx.checker.ValidationError) as error:  # ValidationError: a type the op does not take
        detail = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        shapes = ", ".join(_show(v) for v in inputs)
        raise InputError(f"{built.get_type_name()} {built.get_friendly_name()!r} cannot take inputs "
                         f"{shapes}: {detail}") from error
    for label, value in zip(outs, node.outputs, strict=True):
        tensor = inferred[label].tensor_type if label in inferred else None
        if tensor is None:
            continue
        value.type = ir.TensorType(ir.DataType(tensor.elem_type)) if tensor.elem_type else None
        if tensor.HasField("shape"):
            value.shape = ir.Shape([d.dim_value if d.HasField("dim_value") else (d.dim_param or None)
                                    for d in tensor.shape.dim])


def _show(value: ir.Value) -> str:
    from inferplex.api.nodes import dims_of
    from inferplex.api.reshape import format_dims

    dtype = value.dtype.name.lower() if value.dtype is not None else "?"
    return f"{dtype}{format_dims(dims_of(value))}"
