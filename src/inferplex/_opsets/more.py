"""More of OpenVINO's opset functions: element-wise math, comparisons, type conversion, splits,
shape ops and reductions, each one ONNX op (or a few), re-exported by :mod:`inferplex.opset`.

The names and argument orders are OpenVINO's (``ops.split(data, axis, num_splits)``,
``ops.convert(data, destination_type)``, ``ops.reduce_sum(node, reduction_axes, keep_dims)``),
so graph-building code written for ``openvino.opset13`` runs unchanged.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx_ir as ir

from inferplex._opsets.build import as_op, constant_ints, int64, step
from inferplex.api.nodes import Node, to_ir_dtype
from inferplex.errors import InputError

__all__ = [
    "abs", "ceiling", "clamp", "convert", "convert_like", "cos", "elu", "equal", "erf", "exp", "floor",
    "floor_mod", "gather", "gelu", "greater", "greater_equal", "hswish", "identity", "less", "less_equal",
    "log", "logical_and", "logical_not", "logical_or", "logical_xor", "maximum", "minimum", "mish", "mod",
    "negative", "not_equal", "power", "reduce_max", "reduce_mean", "reduce_min", "reduce_prod",
    "reduce_sum", "select", "shape_of", "sign", "sin", "softplus", "split", "sqrt", "squeeze", "swish",
    "tan", "tanh", "tile", "topk", "unsqueeze", "variadic_split",
]

NodeInput = Any


def _unary(type_name: str, op_type: str) -> Any:
    def build(data: NodeInput, name: str | None = None) -> Node:
        from inferplex.opset import _op, _value

        return _op(type_name, op_type, [_value(data)], {}, name)

    build.__name__ = type_name.lower()
    build.__doc__ = f"OpenVINO's {type_name} (ONNX {op_type}), element-wise."
    return build


abs = _unary("Abs", "Abs")
negative = _unary("Negative", "Neg")
exp = _unary("Exp", "Exp")
log = _unary("Log", "Log")
sqrt = _unary("Sqrt", "Sqrt")
tanh = _unary("Tanh", "Tanh")
sin = _unary("Sin", "Sin")
cos = _unary("Cos", "Cos")
tan = _unary("Tan", "Tan")
floor = _unary("Floor", "Floor")
ceiling = _unary("Ceiling", "Ceil")
erf = _unary("Erf", "Erf")
sign = _unary("Sign", "Sign")
softplus = _unary("SoftPlus", "Softplus")
hswish = _unary("HSwish", "HardSwish")
logical_not = _unary("LogicalNot", "Not")


def mish(data: NodeInput, name: str | None = None) -> Node:
    """``x * tanh(softplus(x))`` (ONNX has Mish from opset 18 only)."""
    from inferplex._opsets.build import make_op, step, value_of

    x = value_of(data)
    return make_op("Mish", "Mul", [x, step("Tanh", [step("Softplus", [x])])], {}, name)


def _binary(type_name: str, op_type: str) -> Any:
    def build(left: NodeInput, right: NodeInput, auto_broadcast: str = "NUMPY",
              name: str | None = None) -> Node:
        from inferplex.opset import _binary as binary

        return binary(type_name, op_type, left, right, auto_broadcast, name)

    build.__name__ = type_name.lower()
    build.__doc__ = f"OpenVINO's {type_name} (ONNX {op_type}), numpy broadcasting."
    return build


power = _binary("Power", "Pow")
maximum = _binary("Maximum", "Max")
minimum = _binary("Minimum", "Min")
equal = _binary("Equal", "Equal")
less = _binary("Less", "Less")
greater = _binary("Greater", "Greater")
less_equal = _binary("LessEqual", "LessOrEqual")
greater_equal = _binary("GreaterEqual", "GreaterOrEqual")
logical_and = _binary("LogicalAnd", "And")
logical_or = _binary("LogicalOr", "Or")
logical_xor = _binary("LogicalXor", "Xor")


def mod(left: NodeInput, right: NodeInput, auto_broadcast: str = "NUMPY", name: str | None = None) -> Node:
    """OpenVINO's Mod: the remainder with the dividend's sign (C's fmod; ONNX Mod with fmod=1)."""
    from inferplex.opset import _binary as binary

    node = binary("Mod", "Mod", left, right, auto_broadcast, name)
    node._main.attributes["fmod"] = ir.AttrInt64("fmod", 1)  # type: ignore[union-attr]  # noqa: SLF001
    return node


def floor_mod(left: NodeInput, right: NodeInput, auto_broadcast: str = "NUMPY",
              name: str | None = None) -> Node:
    """OpenVINO's FloorMod: the remainder with the divisor's sign (Python's ``%``).

    ONNX Mod takes fmod=0 for integers only, so floats are ``x - floor(x / y) * y``.
    """
    from inferplex.opset import _binary as binary
    from inferplex.opset import _value, divide, multiply

    x = _value(left) if hasattr(left, "_outputs") or hasattr(left, "_value") else None
    dtype = x.dtype if x is not None else None
    if dtype is not None and not dtype.is_floating_point():
        return binary("FloorMod", "Mod", left, right, auto_broadcast, name)
    quotient = floor(divide(left, right))
    return binary("FloorMod", "Sub", left, multiply(quotient, right), auto_broadcast, name)


def not_equal(left: NodeInput, right: NodeInput, auto_broadcast: str = "NUMPY",
              name: str | None = None) -> Node:
    """OpenVINO's NotEqual: ONNX Equal followed by Not."""
    from inferplex.opset import _op

    eq = equal(left, right, auto_broadcast)
    node = _op("NotEqual", "Not", [eq._outputs[0]], {}, name)  # noqa: SLF001
    node._onnx_nodes[:0] = eq._onnx_nodes  # noqa: SLF001
    return node


def clamp(data: NodeInput, min_value: float, max_value: float, name: str | None = None) -> Node:
    """Clip ``data`` into ``[min_value, max_value]``."""
    from inferplex.opset import _op, _value

    value = _value(data)
    dtype = value.dtype.numpy() if value.dtype is not None else np.float32
    bounds = [_value(np.array(min_value, dtype=dtype)), _value(np.array(max_value, dtype=dtype))]
    return _op("Clamp", "Clip", [value, *bounds], {}, name)


def elu(data: NodeInput, alpha: float, name: str | None = None) -> Node:
    from inferplex.opset import _op, _value

    return _op("Elu", "Elu", [_value(data)], {"alpha": float(alpha)}, name)


def gelu(data: NodeInput, approximation_mode: str = "erf", name: str | None = None) -> Node:
    """GELU; ``approximation_mode`` 'erf' or 'tanh' (ONNX Gelu needs opset 20: built from Erf/Tanh)."""
    from inferplex.opset import _value

    x = _value(data)
    dtype = x.dtype.numpy() if x.dtype is not None else np.float32
    half = np.array(0.5, dtype=dtype)
    mode = str(approximation_mode).lower()
    if mode == "erf":
        inner = erf(_mul(x, np.array(1 / np.sqrt(2), dtype=dtype)))
    elif mode == "tanh":
        cube = _mul(_mul(x, x), x)
        poly = _add(x, _mul(cube, np.array(0.044715, dtype=dtype)))
        inner = tanh(_mul(poly, np.array(np.sqrt(2 / np.pi), dtype=dtype)))
    else:
        raise InputError(f"gelu approximation_mode {approximation_mode!r}; accepted: 'erf', 'tanh'")
    from inferplex.opset import _binary as binary

    # the last product is the op, as OpenVINO reports it (``get_type_name()`` "Gelu")
    return binary("Gelu", "Mul", _mul(x, half), _add(inner, np.array(1, dtype=dtype)), "NUMPY", name)


def swish(data: NodeInput, beta: NodeInput = None, name: str | None = None) -> Node:
    """``x * sigmoid(beta * x)`` (beta 1 by default)."""
    from inferplex.opset import _binary as binary
    from inferplex.opset import _value, sigmoid

    x = _value(data)
    scaled = x if beta is None else _mul(x, beta)
    # the last product is the op, as OpenVINO reports it (``get_type_name()`` "Swish")
    return binary("Swish", "Mul", x, sigmoid(scaled), "NUMPY", name)


def _mul(left: Any, right: Any) -> Node:
    from inferplex.opset import multiply

    return multiply(left, right)


def _add(left: Any, right: Any) -> Node:
    from inferplex.opset import add

    return add(left, right)


def convert(data: NodeInput, destination_type: Any, name: str | None = None) -> Node:
    """Cast to ``destination_type`` (an ov.Type, numpy dtype or name such as ``"f16"``)."""
    from inferplex.opset import _op, _value

    return _op("Convert", "Cast", [_value(data)], {"to": int(to_ir_dtype(destination_type))}, name)


def identity(data: NodeInput, name: str | None = None) -> Node:
    """The input as it is (OpenVINO's opset 16 ``Identity``)."""
    from inferplex.opset import _op, _value

    return _op("Identity", "Identity", [_value(data)], {}, name)


def convert_like(data: NodeInput, like: NodeInput, name: str | None = None) -> Node:
    from inferplex.opset import _op, _value

    return _op("ConvertLike", "CastLike", [_value(data), _value(like)], {}, name)


def split(data: NodeInput, axis: NodeInput, num_splits: int, name: str | None = None) -> Node:
    """``num_splits`` equal parts along ``axis`` (whose length must be known and divisible)."""
    from inferplex.opset import _value

    value = _value(data)
    axis_index = _int_of(axis, "split axis")
    length = _axis_length(value, axis_index, "split")
    if length % int(num_splits):
        raise InputError(f"split: axis {axis_index} of length {length} does not divide into "
                         f"{num_splits} equal parts")
    return _split("Split", value, axis_index, [length // int(num_splits)] * int(num_splits), name)


def variadic_split(data: NodeInput, axis: NodeInput, split_lengths: NodeInput,
                   name: str | None = None) -> Node:
    """Parts of the given lengths along ``axis``; one length may be -1 (the rest)."""
    from inferplex.opset import _value

    value = _value(data)
    axis_index = _int_of(axis, "variadic_split axis")
    lengths = [int(v) for v in np.asarray(getattr(split_lengths, "data", split_lengths)).reshape(-1)]
    if -1 in lengths:
        total = _axis_length(value, axis_index, "variadic_split")
        lengths[lengths.index(-1)] = total - (sum(lengths) + 1)
    return _split("VariadicSplit", value, axis_index, lengths, name)


def _split(type_name: str, value: ir.Value, axis: int, lengths: list[int], name: str | None) -> Node:
    from inferplex.opset import _op, _value

    sizes = _value(np.array(lengths, dtype=np.int64))
    return _op(type_name, "Split", [value, sizes], {"axis": axis}, name, num_outputs=len(lengths))


def _int_of(value: Any, what: str) -> int:
    array = np.asarray(getattr(value, "data", value))
    if array.size != 1:
        raise InputError(f"{what} must be one constant integer, got {value!r}")
    return int(array.reshape(-1)[0])


def _axis_length(value: ir.Value, axis: int, what: str) -> int:
    if value.shape is None or not -len(value.shape) <= axis < len(value.shape):
        raise InputError(f"{what} needs an input of known rank with axis {axis}")
    length = value.shape[axis]
    if not isinstance(length, int):
        raise InputError(f"{what}: axis {axis} has a dynamic length; its parts cannot be sized")
    return length


def squeeze(data: NodeInput, axes: NodeInput = None, allow_axis_skip: bool = False,
            name: str | None = None) -> Node:
    """``data`` without the dims of length 1 at ``axes`` (all such dims without axes).  With
    ``allow_axis_skip`` (opset 15) an axis whose dim is not 1 is kept, not refused: where such a dim
    is not known when the model is built, the output's rank is known only when it runs."""
    from inferplex.opset import _op, _value

    x = _value(data)
    if allow_axis_skip and axes is not None:
        return _squeeze_skipping(x, constant_ints(_axes(axes), "squeeze axes"), name)
    inputs = [x] + ([] if axes is None else [_value(_axes(axes))])
    return _op("Squeeze", "Squeeze", inputs, {}, name)


def _squeeze_skipping(x: ir.Value, axes: list[int], name: str | None) -> Node:
    from inferplex.opset import _op

    if x.shape is None:
        raise InputError("squeeze with allow_axis_skip needs the data's rank")
    dims = list(x.shape)
    rank = len(dims)
    outside = [axis for axis in axes if not -rank <= axis < rank]
    if outside:
        raise InputError(f"squeeze axes {outside} are outside the data's rank {rank}; accepted: "
                         f"-{rank} to {rank - 1}")
    places = sorted({axis % rank for axis in axes})
    if all(isinstance(dims[axis], int) for axis in places):  # which dims are 1 is known now
        ones = [axis for axis in places if dims[axis] == 1]
        if not ones:
            return _op("Squeeze", "Identity", [x], {}, name)
        return _op("Squeeze", "Squeeze", [x, int64(np.asarray(ones, np.int64))], {}, name)
    shape = step("Shape", [x])
    named = np.zeros(rank, dtype=bool)
    named[places] = True
    kept = step("Or", [np.logical_not(named), step("Not", [step("Equal", [shape, np.array(1, np.int64)])])])
    built = as_op("Squeeze", step("Reshape", [x, step("Compress", [shape, kept], {"axis": 0})]), name)
    built._outputs[0].shape = None  # noqa: SLF001 - the rank depends on the dims at run time
    return built


def unsqueeze(data: NodeInput, axes: NodeInput, name: str | None = None) -> Node:
    from inferplex.opset import _op, _value

    return _op("Unsqueeze", "Unsqueeze", [_value(data), _value(_axes(axes))], {}, name)


def _axes(axes: Any) -> Any:
    if isinstance(axes, (int, np.integer, list, tuple)):
        return np.array(axes, dtype=np.int64).reshape(-1)
    return axes


def shape_of(data: NodeInput, output_type: Any = "i64", name: str | None = None) -> Node:
    from inferplex.opset import _op, _value

    node = _op("ShapeOf", "Shape", [_value(data)], {}, name)
    if to_ir_dtype(output_type) != ir.DataType.INT64:
        cast = convert(node, output_type)
        cast._onnx_nodes[:0] = node._onnx_nodes  # noqa: SLF001
        return cast
    return node


def gather(data: NodeInput, indices: NodeInput, axis: NodeInput, batch_dims: int | None = 0,
           name: str | None = None) -> Node:
    """The slices of ``data`` along ``axis`` at ``indices`` (negative ones count from the end); with
    ``batch_dims`` (negative: counted back from the rank of ``indices``) the first dims of ``data``
    and ``indices`` are batch dims that each batch's indices pick within (ONNX GatherND, ``axis``
    moved next to the batch dims)."""
    from inferplex._opsets.build import rank_of, step
    from inferplex.opset import _op, _value

    x, where = _value(data), _value(indices)
    position = _int_of(axis, "gather axis")
    if not batch_dims:
        return _op("Gather", "Gather", [x, where], {"axis": position}, name)
    rank, index_rank = rank_of(x, "gather with batch_dims"), rank_of(where, "gather indices with batch_dims")
    batch = int(batch_dims) + index_rank if int(batch_dims) < 0 else int(batch_dims)
    position = position + rank if position < 0 else position
    if not 0 <= batch <= index_rank or not batch <= position < rank:
        raise InputError(f"gather batch_dims {batch_dims} with axis {_int_of(axis, 'gather axis')}, data "
                         f"of rank {rank} and indices of rank {index_rank}: needs 0 <= batch_dims <= "
                         "indices rank (negative: counted from it) and batch_dims <= axis < data rank")
    length = step("Gather", [step("Shape", [x]), np.array(position, np.int64)])
    if where.dtype != ir.DataType.INT64:
        where = step("Cast", [where], {"to": int(ir.DataType.INT64)})
    where = step("Where", [step("Less", [where, np.array(0, np.int64)]), step("Add", [where, length]), where])
    middle = list(range(batch, position))  # data dims between the batch dims and the axis
    if middle:
        x = step("Transpose", [x], {"perm": [*range(batch), position, *middle, *range(position + 1, rank)]})
    picked_rank = index_rank - batch
    gathered = _op("Gather", "GatherND", [x, step("Unsqueeze", [where, np.array([-1], np.int64)])],
                   {"batch_dims": batch}, None if middle else name)
    if not middle:
        return gathered
    out_rank = rank - 1 + picked_rank
    order = [*range(batch), *range(batch + picked_rank, batch + picked_rank + len(middle)),
             *range(batch, batch + picked_rank), *range(batch + picked_rank + len(middle), out_rank)]
    return _op("Gather", "Transpose", [gathered._outputs[0]], {"perm": order}, name)  # noqa: SLF001


def _reduce(type_name: str, op_type: str) -> Any:
    def build(node: NodeInput, reduction_axes: NodeInput, keep_dims: bool = False,
              name: str | None = None) -> Node:
        from inferplex.opset import _op, _value

        axes = [int(a) for a in np.asarray(getattr(reduction_axes, "data", reduction_axes)).reshape(-1)]
        data = _value(node)
        rank = len(data.shape) if data.shape is not None else None
        outside = [a for a in axes if rank is not None and not -max(rank, 1) <= a < max(rank, 1)]
        if outside:  # OpenVINO's words, at the node's creation
            raise InputError(f"{type_name} axis {outside[0]} out of the tensor rank range "
                             f"[{-max(rank or 0, 1)}, {max(rank or 0, 1) - 1}]")
        attrs: dict[str, Any] = {"keepdims": int(bool(keep_dims))}
        if op_type == "ReduceSum":
            inputs = [data, _value(np.array(axes, dtype=np.int64))]
        else:
            inputs, attrs["axes"] = [data], axes
        return _op(type_name, op_type, inputs, attrs, name)

    build.__name__ = type_name.lower()
    build.__doc__ = f"OpenVINO's {type_name} over ``reduction_axes``."
    return build


reduce_sum = _reduce("ReduceSum", "ReduceSum")
reduce_mean = _reduce("ReduceMean", "ReduceMean")
reduce_max = _reduce("ReduceMax", "ReduceMax")
reduce_min = _reduce("ReduceMin", "ReduceMin")
reduce_prod = _reduce("ReduceProd", "ReduceProd")


def select(cond: NodeInput, then_node: NodeInput, else_node: NodeInput, auto_broadcast: str = "numpy",
           name: str | None = None) -> Node:
    from inferplex.opset import _op, _value

    return _op("Select", "Where", [_value(cond), _value(then_node), _value(else_node)], {}, name)


def tile(data: NodeInput, repeats: NodeInput, name: str | None = None) -> Node:
    """``data`` repeated ``repeats[i]`` times along each axis; fewer repeats than ``data``'s rank
    repeat its last axes (the others once), more repeat new leading axes of length 1 (OpenVINO's
    rule)."""
    from inferplex.opset import _op, _value

    x, times = _value(data), int64(repeats)
    count = times.shape[0] if times.shape is not None and len(times.shape) == 1 else None
    rank = len(x.shape) if x.shape is not None else None
    if isinstance(count, int) and rank is not None and count != rank:
        if count > rank:
            x = step("Unsqueeze", [x, np.arange(count - rank, dtype=np.int64)])
        elif times.const_value is not None:
            times = int64(np.concatenate([np.ones(rank - count, np.int64), times.const_value.numpy()]))
        else:
            times = step("Concat", [np.ones(rank - count, np.int64), times], {"axis": 0})
    return _op("Tile", "Tile", [x, times], {}, name)


def topk(data: NodeInput, k: NodeInput, axis: int, mode: str, sort: str, index_element_type: Any = "i32",
         stable: bool = False, name: str | None = None) -> Node:
    """The ``k`` largest (``mode="max"``) or smallest (``"min"``) values along ``axis`` and their
    indices; ``sort`` "value" (or "none") orders them by value, "index" by their position.  ``k`` is
    a number or a 0-d or 1-element tensor.  Equal values keep their order (ONNX TopK is stable)."""
    from inferplex._opsets.build import constant_data, int64, step
    from inferplex.opset import _op, _value

    if str(mode).lower() not in ("max", "min"):
        raise InputError(f"topk mode {mode!r}; accepted: 'max', 'min'")
    order = str(sort).lower()
    if order not in ("value", "index", "none"):
        raise InputError(f"topk sort {sort!r}; accepted: 'value', 'index', 'none'")
    fixed = constant_data(k)
    count = _value(np.asarray(fixed, dtype=np.int64).reshape(1)) if fixed is not None else int64(k)
    if count.shape is None or len(count.shape) != 1:  # ONNX TopK takes K as a 1-element 1-D tensor
        count = step("Reshape", [count, np.array([1], np.int64)])
    node = _op("TopK", "TopK", [_value(data), count],
               {"axis": int(axis), "largest": int(str(mode).lower() == "max"), "sorted": 1}, name,
               num_outputs=2)
    if order == "index":  # re-order the k found by their indices
        attrs = {"axis": int(axis), "largest": 0, "sorted": 1}
        by_index = _op("TopK", "TopK", [node._outputs[1], count], attrs, None, num_outputs=2)  # noqa: SLF001
        values = step("GatherElements", [node._outputs[0], by_index._outputs[1]], {"axis": int(axis)})  # noqa: SLF001
        node._outputs[:] = [values, by_index._outputs[0]]  # noqa: SLF001
    if to_ir_dtype(index_element_type) != ir.DataType.INT64:
        cast = convert(node._outputs[1], index_element_type)  # noqa: SLF001
        node._outputs[1] = cast._outputs[0]  # noqa: SLF001
        node._onnx_nodes.extend(cast._onnx_nodes)  # noqa: SLF001
    return node
