"""OpenVINO's element-wise math and reductions beyond :mod:`inferplex._opsets.more`: rounding,
inverse trigonometry, activations (HSigmoid, SoftSign, PRelu, Selu, HardSigmoid), LogSoftmax,
FakeQuantize, CumSum, the float classes (IsNaN, IsInf, IsFinite) and the L1/L2/logical reductions.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx_ir as ir

from inferplex._opsets.build import (
    NodeInput,
    as_op,
    constant_data,
    is_graph_input,
    like,
    make_op,
    show,
    step,
    value_of,
)
from inferplex._opsets.more import _reduce, _unary, ceiling
from inferplex._opsets.more import abs as _abs
from inferplex.api.nodes import Node
from inferplex.errors import InputError

__all__ = [
    "absolute", "acos", "acosh", "asin", "asinh", "atan", "atanh", "ceil", "cosh", "cum_sum", "cumsum",
    "fake_quantize", "hard_sigmoid", "hsigmoid", "is_finite", "is_inf", "is_nan", "log_softmax", "prelu",
    "reduce_l1", "reduce_l2", "reduce_logical_and", "reduce_logical_or", "round", "selu", "sinh",
    "softsign", "squared_difference",
]

absolute = _abs
ceil = ceiling
acos = _unary("Acos", "Acos")
asin = _unary("Asin", "Asin")
atan = _unary("Atan", "Atan")
acosh = _unary("Acosh", "Acosh")
asinh = _unary("Asinh", "Asinh")
atanh = _unary("Atanh", "Atanh")
cosh = _unary("Cosh", "Cosh")
sinh = _unary("Sinh", "Sinh")
softsign = _unary("SoftSign", "Softsign")
is_nan = _unary("IsNaN", "IsNaN")
reduce_l2 = _reduce("ReduceL2", "ReduceL2")

_ROUND_MODES = ("half_to_even", "half_away_from_zero")


def round(data: NodeInput, mode: str = "half_to_even", name: str | None = None) -> Node:
    """Round to the nearest integer; ties go to the even one (``"half_to_even"``, ONNX Round) or away
    from zero (``"half_away_from_zero"``: ``sign(x) * floor(|x| + 0.5)``).  Integers pass unchanged."""
    kind = str(mode).lower()
    if kind not in _ROUND_MODES:
        raise InputError(f"round mode {mode!r}; accepted: {', '.join(_ROUND_MODES)}")
    x = value_of(data)
    if x.dtype is not None and not x.dtype.is_floating_point():
        return make_op("Round", "Identity", [x], {}, name)
    if kind == "half_to_even":
        return make_op("Round", "Round", [x], {}, name)
    magnitude = step("Floor", [step("Add", [step("Abs", [x]), like(x, 0.5)])])
    return make_op("Round", "Mul", [step("Sign", [x]), magnitude], {}, name)


def hsigmoid(data: NodeInput, name: str | None = None) -> Node:
    """``min(max(x + 3, 0), 6) / 6`` (ONNX HardSigmoid with alpha 1/6, beta 0.5)."""
    return make_op("HSigmoid", "HardSigmoid", [value_of(data)], {"alpha": 1 / 6, "beta": 0.5}, name)


def hard_sigmoid(data: NodeInput, alpha: NodeInput, beta: NodeInput, name: str | None = None) -> Node:
    """``max(0, min(1, alpha * x + beta))``: ONNX's HardSigmoid where ``alpha`` and ``beta`` are
    constants, else the same from their tensors (one value each)."""
    x = value_of(data)
    numbers = [_constant_number(v) for v in (alpha, beta)]
    if None not in numbers:
        return make_op("HardSigmoid", "HardSigmoid", [x], {"alpha": numbers[0], "beta": numbers[1]}, name)
    a, b = (_scalar_of(v, x, f"hard_sigmoid {what}") for v, what in ((alpha, "alpha"), (beta, "beta")))
    line = step("Add", [step("Mul", [x, a]), b])
    zero, one = (value_of(np.array(v, (x.dtype or ir.DataType.FLOAT).numpy())) for v in (0, 1))
    return make_op("HardSigmoid", "Max", [step("Min", [line, one]), zero], {}, name)


def selu(data: NodeInput, alpha: NodeInput, lambda_value: NodeInput, name: str | None = None) -> Node:
    """``lambda * (x if x > 0 else alpha * (exp(x) - 1))``: ONNX's Selu where ``alpha`` and
    ``lambda`` are constants, else the same from their tensors (one value each)."""
    x = value_of(data)
    numbers = [_constant_number(v) for v in (alpha, lambda_value)]
    if None not in numbers:
        return make_op("Selu", "Selu", [x], {"alpha": numbers[0], "gamma": numbers[1]}, name)
    a, scale = (_scalar_of(v, x, f"selu {what}") for v, what in ((alpha, "alpha"), (lambda_value, "lambda")))
    zero, one = (value_of(np.array(v, (x.dtype or ir.DataType.FLOAT).numpy())) for v in (0, 1))
    negative = step("Mul", [a, step("Sub", [step("Exp", [x]), one])])
    return make_op("Selu", "Mul", [scale, step("Where", [step("Greater", [x, zero]), x, negative])], {}, name)


def _constant_number(value: NodeInput) -> float | None:
    """One constant number, or None where ``value`` is computed."""
    data = constant_data(value)
    return None if data is None or np.asarray(data).size != 1 else float(np.asarray(data).reshape(-1)[0])


def _scalar_of(value: NodeInput, like: ir.Value, what: str) -> ir.Value:
    """A computed parameter of one value as a scalar of ``like``'s type."""
    tensor = value_of(value, like.dtype)
    if tensor.shape is not None and int(np.prod([d if isinstance(d, int) else 1 for d in tensor.shape])) != 1:
        raise InputError(f"{what} takes one value, got {show(tensor)}")
    return step("Reshape", [tensor, value_of(np.zeros(0, np.int64))])


def log_softmax(data: NodeInput, axis: int, name: str | None = None) -> Node:
    return make_op("LogSoftmax", "LogSoftmax", [value_of(data)], {"axis": int(axis)}, name)


def prelu(data: NodeInput, slope: NodeInput, name: str | None = None) -> Node:
    """``x if x >= 0 else slope * x``; a 1-D slope as long as dim 1 applies per channel (dim 1),
    any other slope broadcasts numpy-style."""
    x = value_of(data)
    s = value_of(slope, x.dtype)
    if (x.shape is not None and len(x.shape) > 2 and s.shape is not None and len(s.shape) == 1
            and isinstance(s.shape[0], int) and s.shape[0] > 1 and x.shape[1] == s.shape[0]):
        s = step("Unsqueeze", [s, np.arange(1, len(x.shape) - 1, dtype=np.int64)])
    return make_op("PRelu", "PRelu", [x, s], {}, name)


def squared_difference(x1: NodeInput, x2: NodeInput, auto_broadcast: str = "NUMPY",
                       name: str | None = None) -> Node:
    """``(x1 - x2) ** 2``, numpy broadcasting."""
    from inferplex.opset import subtract

    difference = subtract(x1, x2, auto_broadcast)
    return make_op("SquaredDifference", "Mul", [value_of(difference)] * 2, {}, name)


def is_inf(data: NodeInput, attributes: dict[str, Any] | None = None, name: str | None = None) -> Node:
    """True where ``data`` is infinite; ``attributes`` may turn off ``detect_negative`` or
    ``detect_positive`` (both on by default)."""
    options = dict(attributes or {})
    unknown = set(options) - {"detect_negative", "detect_positive"}
    if unknown:
        raise InputError(f"is_inf attributes {sorted(unknown)}; accepted: detect_negative, detect_positive")
    attrs = {key: int(bool(options.get(key, True))) for key in ("detect_negative", "detect_positive")}
    return make_op("IsInf", "IsInf", [value_of(data)], attrs, name)


def is_finite(data: NodeInput, name: str | None = None) -> Node:
    """True where ``data`` is neither infinite nor NaN."""
    x = value_of(data)
    special = step("Or", [step("IsInf", [x]), step("IsNaN", [x])])
    return make_op("IsFinite", "Not", [special], {}, name)


def reduce_l1(node: NodeInput, reduction_axes: NodeInput, keep_dims: bool = False,
              name: str | None = None) -> Node:
    """The sum of absolute values over ``reduction_axes`` (as ReduceSum of Abs: OpenVINO's ONNX
    reader drops ReduceL1's axes attribute and reduces everything)."""
    return _reduce("ReduceL1", "ReduceSum")(step("Abs", [node]), reduction_axes, keep_dims, name)


def _logical_reduce(type_name: str, op_type: str) -> Any:
    def build(node: NodeInput, reduction_axes: NodeInput, keep_dims: bool = False,
              name: str | None = None) -> Node:
        # ONNX's ReduceMin/ReduceMax take no booleans before opset 20: reduce them as uint8
        as_bytes = step("Cast", [node], {"to": int(ir.DataType.UINT8)})
        reduced = _reduce(type_name, op_type)(as_bytes, reduction_axes, keep_dims)
        return make_op(type_name, "Cast", [value_of(reduced)], {"to": int(ir.DataType.BOOL)}, name)

    build.__name__ = type_name.lower()
    build.__doc__ = f"OpenVINO's {type_name} over ``reduction_axes`` of a boolean tensor."
    return build


reduce_logical_and = _logical_reduce("ReduceLogicalAnd", "ReduceMin")
reduce_logical_or = _logical_reduce("ReduceLogicalOr", "ReduceMax")


def cum_sum(arg: NodeInput, axis: NodeInput, exclusive: bool = False, reverse: bool = False,
            name: str | None = None) -> Node:
    """Running sums along ``axis``; ``exclusive`` leaves each element out of its own sum,
    ``reverse`` sums from the end."""
    axis_value = value_of(axis) if is_graph_input(axis) else value_of(np.asarray(axis, np.int64).reshape(()))
    attrs = {"exclusive": int(bool(exclusive)), "reverse": int(bool(reverse))}
    return make_op("CumSum", "CumSum", [value_of(arg), axis_value], attrs, name)


cumsum = cum_sum


def fake_quantize(data: NodeInput, input_low: NodeInput, input_high: NodeInput, output_low: NodeInput,
                  output_high: NodeInput, levels: int, auto_broadcast: str = "NUMPY",
                  name: str | None = None) -> Node:
    """Quantize ``data`` to ``levels`` levels over ``[input_low, input_high]`` and map them onto
    ``[output_low, output_high]``; values at or below the lower bound give ``output_low``, above
    the upper one ``output_high`` (OpenVINO's FakeQuantize; ties round to even)."""
    if str(auto_broadcast).upper() != "NUMPY":
        raise InputError(f"fake_quantize auto_broadcast {auto_broadcast!r}; accepted: 'numpy'")
    if int(levels) < 2:
        raise InputError(f"fake_quantize levels={levels}; accepted: 2 or more")
    x = value_of(data)
    il, ih, ol, oh = (value_of(v, x.dtype) for v in (input_low, input_high, output_low, output_high))
    steps = like(x, int(levels) - 1)
    scaled = step("Div", [step("Sub", [x, il]), step("Sub", [ih, il])])
    level = step("Div", [step("Round", [step("Mul", [scaled, steps])]), steps])
    inside = step("Add", [step("Mul", [level, step("Sub", [oh, ol])]), ol])
    low = step("LessOrEqual", [x, step("Min", [il, ih])])
    high = step("Greater", [x, step("Max", [il, ih])])
    clipped = step("Where", [high, oh, inside])
    return as_op("FakeQuantize", step("Where", [low, ol, clipped]), name)


