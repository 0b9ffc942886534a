"""OpenVINO's ops of opsets 9 to 13 that have no one ONNX opset 17 equivalent: Unique, Eye,
GridSample, the bitwise ops, Multinomial and FakeConvert, as ONNX ops.

- Unique (opset 10) is ONNX Unique; its indices and counts cast to the types asked.  Unique slices
  along an axis other than 0 are found along axis 0 of the transposed input (OpenVINO's CPU finds
  them along a last axis wrongly at times), the unique slices transposed back.
- Eye (opset 9) compares a row range with a column range shifted by the diagonal index, so its
  sizes and diagonal may be computed; ``batch_shape`` expands it.
- GridSample (opset 9) is ONNX GridSample (opset 16).
- BitwiseAnd, BitwiseOr and BitwiseXor (opset 13) of integers take each input apart into its bits
  (division by powers of two, in int64, or uint64 for uint64; a negative number's bits are those
  of ``-1 - x`` flipped) and add the combined bits back up, 16 at a time (a negative result as
  ``-1`` less its flipped bits): ONNX has its bitwise ops from opset 18 only.  Of booleans they
  are And, Or and Xor.  BitwiseNot is ``-1 - x`` (signed), ``max - x`` (unsigned) or Not.  On
  ONNX Runtime they are exact for every integer type; OpenVINO's CPU engine computes 32- and
  64-bit integers as 32-bit signed ones and divides them in f32, so there they are exact for 8-
  and 16-bit integers and for signed wider ones of magnitude below 2 ** 24.
- Multinomial (opset 13) draws by the Gumbel-max trick: each class's log probability plus Gumbel
  noise from RandomUniformLike, the largest per sample (with replacement) or the ``num_samples``
  largest of one draw (without).  The samples follow the distribution asked, but they are not
  OpenVINO's numbers for the same seeds.
- FakeConvert (opset 13) rounds ``data * scale - shift`` to f16 and then to the nearest f8 value
  (ties to even, saturating at the type's largest finite value), as OpenVINO does, by
  arithmetic (ONNX opset 17 has no f8 types), then undoes the scale and shift.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx_ir as ir

from inferplex._opsets.build import (
    NodeInput,
    constant_data,
    int64,
    is_graph_input,
    like,
    make_op,
    mark_exact_integers,
    rank_of,
    show,
    step,
    value_of,
)
from inferplex._opsets.build import ints as _ints
from inferplex.api.nodes import Node, to_ir_dtype
from inferplex.api.types import type_name
from inferplex.errors import InputError

__all__ = ["bitwise_and", "bitwise_not", "bitwise_or", "bitwise_xor", "eye", "fake_convert", "grid_sample",
           "multinomial", "unique"]

_INDEX_TYPES = ("i32", "i64")
_GRID_MODES = ("bilinear", "bicubic", "nearest")
_GRID_PADDING = ("zeros", "border", "reflection")
_INT64 = int(ir.DataType.INT64)
_FLOAT = int(ir.DataType.FLOAT)


def _index_type(value: Any, what: str) -> ir.DataType:
    kind = str(getattr(value, "get_type_name", lambda: value)()).lower()
    dtype = to_ir_dtype(value)
    if dtype not in (ir.DataType.INT32, ir.DataType.INT64):
        raise InputError(f"{what} {kind!r}; accepted: {', '.join(_INDEX_TYPES)}")
    return dtype


def _cast(value: ir.Value, dtype: ir.DataType) -> ir.Value:
    return value if value.dtype == dtype else step("Cast", [value], {"to": int(dtype)})


# --- Unique ------------------------------------------------------------------------------------


def unique(data: NodeInput, axis: NodeInput = None, sorted: bool | None = True,
           index_element_type: Any = "i64", count_element_type: Any = "i64",
           name: str | None = None) -> Node:
    """The unique elements of ``data`` (flattened, or its unique slices along ``axis``), sorted or in
    the order they first occur, with four outputs: the unique values, the index of each one's first
    occurrence, the index in the unique values of each input element (or slice), and how often each
    occurs; the indices of ``index_element_type``, the counts of ``count_element_type``."""
    x = value_of(data)
    index_type = _index_type(index_element_type, "unique index_element_type")
    count_type = _index_type(count_element_type, "unique count_element_type")
    attrs: dict[str, Any] = {"sorted": int(True if sorted is None else bool(sorted))}
    if axis is not None:
        where = constant_data(axis)
        if where is None or where.size != 1:
            raise InputError("unique axis must be one constant integer (ONNX Unique takes it as an "
                             "attribute)")
        rank = rank_of(x, "unique with an axis")
        position = int(where.reshape(-1)[0])
        if not -rank <= position < rank:
            raise InputError(f"unique axis {position} is out of range for {show(x)}")
        position %= rank
        attrs["axis"] = 0
        if position:  # OpenVINO's CPU finds unique slices along axis 0 only reliably: move the axis there
            order = [position, *(a for a in range(rank) if a != position)]
            x = step("Transpose", [x], {"perm": order})
    node = make_op("Unique", "Unique", [x], attrs, name, num_outputs=4)
    outputs = node._outputs  # noqa: SLF001 - same layer
    if axis is not None and position:
        back = make_op("Unique", "Transpose", [outputs[0]], {"perm": [int(i) for i in np.argsort(order)]},
                       None)
        outputs[0] = back._outputs[0]  # noqa: SLF001
        node._onnx_nodes.extend(back._onnx_nodes)  # noqa: SLF001
    for index, dtype in ((1, index_type), (2, index_type), (3, count_type)):
        if dtype != ir.DataType.INT64:
            cast = make_op("Convert", "Cast", [outputs[index]], {"to": int(dtype)}, None)
            outputs[index] = cast._outputs[0]  # noqa: SLF001
            node._onnx_nodes.extend(cast._onnx_nodes)  # noqa: SLF001
    return node


# --- Eye -------------------------------------------------------------------------------------------


def eye(num_rows: NodeInput, num_columns: NodeInput, diagonal_index: NodeInput, output_type: Any,
        batch_shape: NodeInput = None, name: str | None = None) -> Node:
    """A ``num_rows`` x ``num_columns`` matrix of ``output_type`` with ones on the diagonal
    ``diagonal_index`` (above the main one where positive, below where negative; none where it lies
    outside), zeros elsewhere; ``batch_shape`` (a 1-D list of dims) adds leading dims of copies."""
    dtype = to_ir_dtype(output_type)
    fixed = [constant_data(v) for v in (num_rows, num_columns, diagonal_index)]
    for what, data in zip(("num_rows", "num_columns", "diagonal_index"), fixed, strict=True):
        if data is not None and np.asarray(data).size != 1:
            raise InputError(f"eye {what} must hold one integer, got {np.asarray(data).tolist()}")
    for what, data in zip(("num_rows", "num_columns"), fixed[:2], strict=True):
        if data is not None and int(np.asarray(data).reshape(-1)[0]) < 0:
            raise InputError(f"eye {what} must not be negative, got {int(np.asarray(data).reshape(-1)[0])}")
    rows, columns, diagonal = (_scalar(v, data) for v, data in zip(
        (num_rows, num_columns, diagonal_index), fixed, strict=True))
    row_range = step("Unsqueeze", [step("Range", [_ints(0), rows, _ints(1)]), _ints([1])])
    column_range = step("Unsqueeze", [step("Range", [_ints(0), columns, _ints(1)]), _ints([0])])
    ones = step("Equal", [step("Sub", [column_range, row_range]), diagonal])
    if batch_shape is None:
        return make_op("Eye", "Cast", [ones], {"to": int(dtype)}, name)
    batch_data = constant_data(batch_shape)
    if batch_data is not None and fixed[0] is not None and fixed[1] is not None:
        dims = [*np.asarray(batch_data).reshape(-1).tolist(), *(int(np.asarray(d).reshape(-1)[0])
                                                                  for d in fixed[:2])]
        if any(int(d) < 0 for d in dims):
            raise InputError(f"eye batch_shape must not hold negative dims, got {dims[:-2]}")
        shape = _ints(dims)
    else:
        shape = step("Concat", [step("Reshape", [int64(batch_shape), _ints([-1])]), step("Shape", [ones])],
                     {"axis": 0})
    return make_op("Eye", "Cast", [step("Expand", [ones, shape])], {"to": int(dtype)}, name)


def _scalar(item: NodeInput, data: np.ndarray | None) -> ir.Value:
    if data is not None:
        return _ints(int(np.asarray(data).reshape(-1)[0]))
    return step("Reshape", [int64(item), _ints([])])


# --- GridSample ------------------------------------------------------------------------------------


def grid_sample(data: NodeInput, grid: NodeInput, attributes: dict[str, Any],
                name: str | None = None) -> Node:
    """``data`` [N, C, H, W] sampled at ``grid`` [N, H_out, W_out, 2] (x then y, -1 to 1 spanning the
    image); ``attributes``: ``align_corners`` (False: -1 and 1 are the outer pixels' outer edges),
    ``mode`` (bilinear, bicubic, nearest), ``padding_mode`` (zeros, border, reflection)."""
    options = dict(attributes or {})
    unknown = set(options) - {"align_corners", "mode", "padding_mode"}
    if unknown:
        raise InputError(f"grid_sample attributes {sorted(unknown)}; accepted: align_corners, mode, "
                         "padding_mode")
    mode = str(options.get("mode", "bilinear")).lower()
    padding = str(options.get("padding_mode", "zeros")).lower()
    if mode not in _GRID_MODES:
        raise InputError(f"grid_sample mode {options['mode']!r}; accepted: {', '.join(_GRID_MODES)}")
    if padding not in _GRID_PADDING:
        raise InputError(f"grid_sample padding_mode {options['padding_mode']!r}; accepted: "
                         f"{', '.join(_GRID_PADDING)}")
    attrs = {"align_corners": int(bool(options.get("align_corners", False))), "mode": mode,
             "padding_mode": padding}
    return make_op("GridSample", "GridSample", [value_of(data), value_of(grid)], attrs, name)


# --- bitwise ops -----------------------------------------------------------------------------------

_SIGNED_BITS = {ir.DataType.INT8: 8, ir.DataType.INT16: 16, ir.DataType.INT32: 32, ir.DataType.INT64: 64}
_UNSIGNED_BITS = {ir.DataType.UINT8: 8, ir.DataType.UINT16: 16, ir.DataType.UINT32: 32,
                  ir.DataType.UINT64: 64}
_BOOLEAN = {"BitwiseAnd": "And", "BitwiseOr": "Or", "BitwiseXor": "Xor"}


def bitwise_and(left_node: NodeInput, right_node: NodeInput, auto_broadcast: str = "NUMPY",
                name: str | None = None) -> Node:
    """``left & right``, element-wise, of integers or booleans (numpy broadcasting)."""
    return _bitwise("BitwiseAnd", left_node, right_node, auto_broadcast, name)


def bitwise_or(left_node: NodeInput, right_node: NodeInput, auto_broadcast: str = "NUMPY",
               name: str | None = None) -> Node:
    """``left | right``, element-wise, of integers or booleans (numpy broadcasting)."""
    return _bitwise("BitwiseOr", left_node, right_node, auto_broadcast, name)


def bitwise_xor(left_node: NodeInput, right_node: NodeInput, auto_broadcast: str = "NUMPY",
                name: str | None = None) -> Node:
    """``left ^ right``, element-wise, of integers or booleans (numpy broadcasting)."""
    return _bitwise("BitwiseXor", left_node, right_node, auto_broadcast, name)


def bitwise_not(node: NodeInput, name: str | None = None) -> Node:
    """``~x``, element-wise, of integers or booleans."""
    x = value_of(node)
    dtype = x.dtype
    if dtype == ir.DataType.BOOL:
        return make_op("BitwiseNot", "Not", [x], {}, name)
    if dtype in _SIGNED_BITS or dtype in _UNSIGNED_BITS:  # in 64 bits, where -1 - x and max - x fit
        top = -1 if dtype in _SIGNED_BITS else int(np.iinfo(dtype.numpy()).max)
        wide = ir.DataType.UINT64 if dtype == ir.DataType.UINT64 else ir.DataType.INT64
        flipped = step("Sub", [value_of(np.asarray(top, wide.numpy())), _cast(x, wide)])
        built = make_op("BitwiseNot", "Cast", [flipped], {"to": int(dtype)}, name)
        if _SIGNED_BITS.get(dtype, _UNSIGNED_BITS.get(dtype, 0)) >= 32:
            mark_exact_integers(built, f"BitwiseNot of {show(x)}")
        return built
    raise InputError(f"bitwise_not of {show(x)}: it takes integers or booleans")


def _bitwise(type_name: str, left: NodeInput, right: NodeInput, auto_broadcast: str,
             name: str | None) -> Node:
    if str(auto_broadcast).upper() not in ("NUMPY", "NONE"):
        raise InputError(f"{type_name} auto_broadcast {auto_broadcast!r}; accepted: 'numpy', 'none'")
    typed = value_of(left) if is_graph_input(left) else value_of(right) if is_graph_input(right) else None
    dtype = typed.dtype if typed is not None else None
    a, b = value_of(left, dtype), value_of(right, dtype)
    if a.dtype != b.dtype:
        raise InputError(f"{type_name} of {show(a)} and {show(b)}: both inputs need one element type")
    if a.dtype == ir.DataType.BOOL:
        return make_op(type_name, _BOOLEAN[type_name], [a, b], {}, name)
    if a.dtype not in _SIGNED_BITS and a.dtype not in _UNSIGNED_BITS:
        raise InputError(f"{type_name} of {show(a)}: it takes integers or booleans")
    wide, weights, bits_a, sign_a = _bits(a)
    _, _, bits_b, sign_b = _bits(b)
    if type_name == "BitwiseAnd":
        combined = step("Mul", [bits_a, bits_b])
    elif type_name == "BitwiseOr":
        combined = step("Max", [bits_a, bits_b])
    else:
        combined = step("Mod", [step("Add", [bits_a, bits_b]), like(bits_a, 2)])
    total = _add_bits(combined, weights)
    if sign_a is not None and sign_b is not None:  # a negative result is -1 - (its flipped bits' sum)
        sign = step(_BOOLEAN[type_name], [sign_a, sign_b])
        flipped = _add_bits(step("Sub", [like(combined, 1), combined]), weights)
        total = step("Where", [sign, step("Sub", [_ints(-1), flipped]), total])
    if a.dtype == wide:
        built = make_op(type_name, "Identity", [total], {}, name)
    else:
        built = make_op(type_name, "Cast", [total], {"to": int(a.dtype)}, name)
    if _SIGNED_BITS.get(a.dtype, _UNSIGNED_BITS.get(a.dtype, 0)) >= 32:
        mark_exact_integers(built, f"{type_name} of {show(a)}")
    return built


def _add_bits(bits: ir.Value, weights: np.ndarray) -> ir.Value:
    """The sum of ``bits`` (last axis) times ``weights``: 16 bits at a time (a ReduceSum may add in
    floating point, exact to 2 ** 24 in f32), the parts then added as integers."""
    total: ir.Value | None = None
    for start in range(0, len(weights), _CHUNK):
        part = weights[start:start + _CHUNK]
        scale = part[0] if part[0] > 0 else 1  # the weight of the chunk's lowest bit
        chunk = step("Slice", [bits, _ints([start]), _ints([start + len(part)]), _ints([-1])])
        local = _ints((part // scale).astype(np.int64))  # at most 16 bits: int64 fits any chunk
        value = step("ReduceSum", [step("Mul", [_cast(chunk, ir.DataType.INT64), local]), _ints([-1])],
                     {"keepdims": 0})
        value = _cast(value, ir.DataType.from_numpy(weights.dtype))
        if scale != 1:
            value = step("Mul", [value, value_of(np.asarray(scale, weights.dtype))])
        total = value if total is None else step("Add", [total, value])
    assert total is not None
    return total


_CHUNK = 16


def _bits(x: ir.Value) -> tuple[ir.DataType, np.ndarray, ir.Value, ir.Value | None]:
    """``x``'s bits (0 or 1, lowest first) along a new last axis, in int64 (uint64 for uint64), and
    the weight of each; a signed type's top bit is left out of them and given apart, as its sign."""
    dtype = x.dtype
    assert dtype is not None
    if dtype == ir.DataType.UINT64:
        powers = np.array([1 << b for b in range(64)], np.uint64)
        shifted = step("Div", [step("Unsqueeze", [x, _ints([-1])]), value_of(powers)])
        return dtype, powers, step("Mod", [shifted, value_of(np.uint64(2))]), None
    signed = dtype in _SIGNED_BITS
    width = _SIGNED_BITS[dtype] if signed else _UNSIGNED_BITS[dtype]
    weights = np.array([1 << b for b in range(width - 1 if signed else width)], np.int64)
    column = step("Unsqueeze", [_cast(x, ir.DataType.INT64), _ints([-1])])
    if not signed:
        bits = step("Mod", [step("Div", [column, _ints(weights)]), _ints(2)])
        return ir.DataType.INT64, weights, bits, None
    # a negative x's bits are those of -1 - x (not negative) flipped: small numbers stay small
    sign = step("Less", [column, _ints(0)])
    magnitude = step("Where", [sign, step("Sub", [_ints(-1), column]), column])
    bits = step("Mod", [step("Div", [magnitude, _ints(weights)]), _ints(2)])
    bits = step("Where", [sign, step("Sub", [_ints(1), bits]), bits])
    return ir.DataType.INT64, weights, bits, step("Squeeze", [sign, _ints([-1])])


# --- Multinomial -----------------------------------------------------------------------------------


def multinomial(probs: NodeInput, num_samples: NodeInput, convert_type: Any, with_replacement: bool,
                log_probs: bool, global_seed: int = 0, op_seed: int = 0, name: str | None = None) -> Node:
    """``num_samples`` class indices [batch, num_samples] drawn for each row of ``probs`` [batch,
    classes] (probabilities, or unnormalized log probabilities with ``log_probs``), with or
    without replacement, of ``convert_type`` (i32, i64); not OpenVINO's numbers for the seeds."""
    dtype = _index_type(convert_type, "multinomial convert_type")
    weights = value_of(probs)
    rank = rank_of(weights, "multinomial probs")
    if rank != 2:
        raise InputError(f"multinomial probs {show(weights)}: it takes a 2-D [batch, classes] tensor")
    fixed = constant_data(num_samples)
    if fixed is not None and (np.asarray(fixed).size != 1 or int(np.asarray(fixed).reshape(-1)[0]) < 0):
        raise InputError(f"multinomial num_samples must be one non-negative integer, got "
                         f"{np.asarray(fixed).tolist()}")
    classes = weights.shape[-1] if weights.shape is not None else None
    if fixed is not None and not with_replacement and isinstance(classes, int) and \
            int(np.asarray(fixed).reshape(-1)[0]) > classes:
        raise InputError(f"multinomial without replacement of {int(np.asarray(fixed).reshape(-1)[0])} "
                         f"samples from {classes} classes: at most {classes}")
    count = _ints([int(np.asarray(fixed).reshape(-1)[0])]) if fixed is not None else step(
        "Reshape", [int64(num_samples), _ints([1])])
    scores = _cast(weights, ir.DataType.FLOAT)
    if not log_probs:
        scores = step("Log", [scores])
    attrs: dict[str, Any] = {"low": 0.0, "high": 1.0, "dtype": _FLOAT}
    if global_seed or op_seed:
        attrs["seed"] = float((int(global_seed) * 2654435761 + int(op_seed)) % (1 << 24))
    if with_replacement:  # one draw of noise per sample: [batch, samples, classes]
        head, tail = step("Shape", [scores], {"end": 1}), step("Shape", [scores], {"start": 1})
        shape = step("Concat", [head, count, tail], {"axis": 0})
        noisy = step("Add", [step("Unsqueeze", [scores, _ints([1])]), _gumbel(shape, attrs)])
        drawn = step("ArgMax", [noisy], {"axis": -1, "keepdims": 0})
    else:  # one draw: the samples are the classes of the largest noisy scores
        noisy = step("Add", [scores, _gumbel(step("Shape", [scores]), attrs)])
        drawn = make_op("TopK", "TopK", [noisy, count], {"axis": -1, "largest": 1, "sorted": 1}, None,
                        num_outputs=2)._outputs[1]  # noqa: SLF001
    return make_op("Multinomial", "Cast", [drawn], {"to": int(dtype)}, name)


def _gumbel(shape: ir.Value, attrs: dict[str, Any]) -> ir.Value:
    """Standard Gumbel noise of ``shape``: ``-log(-log(u))``, ``u`` uniform in (0, 1)."""
    unit = step("RandomUniformLike", [step("ConstantOfShape", [shape])], attrs)
    tiny = np.float32(1e-20)
    unit = step("Clip", [unit, value_of(tiny), value_of(np.float32(1) - np.float32(2 ** -24))])
    return step("Neg", [step("Log", [step("Neg", [step("Log", [unit])])])])


# --- FakeConvert -----------------------------------------------------------------------------------

_F8 = {"f8e4m3": (3, -6, 448.0), "f8e5m2": (2, -14, 57344.0)}
"""Mantissa bits, the smallest normal exponent and the largest finite value of each f8 type."""
_F16 = (10, -14, 65504.0)


def fake_convert(data: NodeInput, scale: NodeInput, shift: NodeInput = None, destination_type: str = "f8e4m3",
                 name: str | None = None) -> Node:
    """``(f8(data * scale - shift) + shift) / scale``: ``data`` rounded as if converted to
    ``destination_type`` (f8e4m3 or f8e5m2, nearest value, ties to even, saturating) and back."""
    kind = type_name(destination_type).lower()
    if kind not in _F8:
        raise InputError(f"fake_convert destination_type {destination_type!r}; accepted: {', '.join(_F8)}")
    mantissa, smallest, largest = _F8[kind]
    x = value_of(data)
    dtype = x.dtype or ir.DataType.FLOAT
    value = _cast(x, ir.DataType.FLOAT)
    scaled = step("Mul", [value, _cast(value_of(scale, dtype), ir.DataType.FLOAT)])
    if shift is not None:
        scaled = step("Sub", [scaled, _cast(value_of(shift, dtype), ir.DataType.FLOAT)])
    # OpenVINO rounds to f16 first (its f8 conversion starts from f16), then to f8
    rounded = _round_float(_round_float(scaled, *_F16), mantissa, smallest, largest)
    if shift is not None:
        rounded = step("Add", [rounded, _cast(value_of(shift, dtype), ir.DataType.FLOAT)])
    restored = step("Div", [rounded, _cast(value_of(scale, dtype), ir.DataType.FLOAT)])
    return make_op("FakeConvert", "Cast", [restored], {"to": int(dtype)}, name)


def _round_float(value: ir.Value, mantissa: int, smallest: int, largest: float) -> ir.Value:
    """``value`` (f32) rounded to the nearest number of a float type with ``mantissa`` bits after
    the point and normal exponents from ``smallest`` (ties to even), clipped to +-``largest``."""
    magnitude = step("Abs", [value])
    exponent = step("Floor", [step("Div", [step("Log", [magnitude]), _f(np.log(2.0))])])
    exponent = step("Where", [step("Equal", [magnitude, _f(0)]), _f(smallest), exponent])
    exponent = step("Max", [exponent, _f(smallest)])
    # Log's rounding may put a power of two's neighbours one exponent off: set them right
    exponent = step("Sub", [exponent, step("Cast", [step("Greater", [step("Pow", [_f(2), exponent]),
                                                                     magnitude])], {"to": _FLOAT})])
    exponent = step("Add", [exponent, step("Cast", [step("LessOrEqual", [
        step("Pow", [_f(2), step("Add", [exponent, _f(1)])]), magnitude])], {"to": _FLOAT})])
    exponent = step("Max", [exponent, _f(smallest)])
    quantum = step("Pow", [_f(2), step("Sub", [exponent, _f(mantissa)])])
    rounded = step("Mul", [step("Round", [step("Div", [value, quantum])]), quantum])
    return step("Clip", [rounded, _f(-largest), _f(largest)])


def _f(number: float) -> ir.Value:
    return value_of(np.asarray(number, np.float32))
