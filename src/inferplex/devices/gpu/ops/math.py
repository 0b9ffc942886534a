"""Lowerings: elementwise math, logic, comparison, Where, Clip, variadic Max/Min/Sum/Mean.

Binary ops need opset >= 7 (numpy broadcasting, like torch); older nodes that ask
for the legacy ``broadcast``/``axis`` attributes are refused.  ONNX gives both
operands of these ops one element type, so torch's type promotion never changes a
result type; Pow, whose exponent may have another type, casts back explicitly.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

import onnx_ir as ir
import torch

from inferplex.devices.gpu.ops._common import (
    EXACT_DTYPES,
    FLOAT_DTYPES,
    INT_DTYPES,
    NUMERIC_DTYPES,
    VALUE_KINDS,
    attrs_reason,
    dtype_reason,
    first_reason,
    torch_dtype,
    value_kind,
)
from inferplex.devices.gpu.ops._unsigned import (
    WIDE_UNSIGNED,
    bit_shift,
    moves_bits,
    unsigned_abs,
    unsigned_binary,
    unsigned_clip,
    unsigned_compare,
    unsigned_sign,
    unsigned_unary,
    widen,
)
from inferplex.devices.gpu.ops.types import CAST_HELD, held_cast, held_cast_reason
from inferplex.devices.gpu.registry import NodeInfo, register
from inferplex.devices.gpu.tensors import HELD_DTYPES
from inferplex.errors import CompileError

_SIGNED = frozenset({ir.DataType.INT8, ir.DataType.INT16, ir.DataType.INT32, ir.DataType.INT64})
_BOOL = frozenset({ir.DataType.BOOL})


def _check(allowed: frozenset[ir.DataType], attrs: tuple[str, ...] = (),
           inputs: tuple[int, ...] | None = None) -> Callable[[NodeInfo], str | None]:
    """A ``supports`` that accepts ``allowed`` element types and the attributes ``attrs``."""

    def supports(info: NodeInfo) -> str | None:
        indices = range(info.num_inputs) if inputs is None else inputs
        return first_reason(attrs_reason(info, attrs), dtype_reason(info, indices, allowed))

    return supports


def _elementwise(op_types: dict[str, Callable[..., Any]], allowed: frozenset[ir.DataType],
                 versions: tuple[int, int | None] = (1, None),
                 unsigned: Callable[[str, Callable[..., Any]], Callable[..., Any]] | None = None) -> None:
    """Register ops that are one torch function each.

    ``unsigned(op_type, fn)`` gives the function for uint16/32/64 inputs (see
    :mod:`._unsigned`); without it those types are refused.
    """
    for op_type, fn in op_types.items():
        if unsigned is None:
            register(op_type, versions=versions, supports=_check(allowed))(
                functools.partial(lambda info, f: f, f=fn))
            continue
        register(op_type, versions=versions, supports=_check(allowed | WIDE_UNSIGNED),
                 held_dtypes=WIDE_UNSIGNED)(
            functools.partial(_maybe_unsigned, fn=fn, wide=unsigned(op_type, fn)))


def _maybe_unsigned(info: NodeInfo, fn: Callable[..., Any], wide: Callable[..., Any]) -> Callable[..., Any]:
    return wide if info.input_dtypes[0] in WIDE_UNSIGNED else fn


_elementwise({
    "Sqrt": torch.sqrt, "Exp": torch.exp, "Log": torch.log, "Reciprocal": torch.reciprocal,
    "Floor": torch.floor, "Ceil": torch.ceil, "Erf": torch.erf,
    # torch.round rounds half to even, as ONNX asks.
    "Round": torch.round,
    "Sin": torch.sin, "Cos": torch.cos, "Tan": torch.tan, "Asin": torch.asin, "Acos": torch.acos,
    "Atan": torch.atan, "Sinh": torch.sinh, "Cosh": torch.cosh, "Asinh": torch.asinh,
    "Acosh": torch.acosh, "Atanh": torch.atanh, "IsNaN": torch.isnan,
}, FLOAT_DTYPES)
_elementwise({"Neg": torch.neg}, FLOAT_DTYPES | _SIGNED)
_elementwise({"Abs": torch.abs}, NUMERIC_DTYPES, unsigned=lambda op, fn: unsigned_abs)
_elementwise({"Not": torch.logical_not, "And": torch.logical_and, "Or": torch.logical_or,
              "Xor": torch.logical_xor}, _BOOL)
_elementwise({"BitwiseNot": torch.bitwise_not}, INT_DTYPES,
             unsigned=lambda op, fn: unsigned_unary(fn))
_elementwise({"BitwiseAnd": torch.bitwise_and, "BitwiseOr": torch.bitwise_or,
              "BitwiseXor": torch.bitwise_xor}, INT_DTYPES, unsigned=lambda op, fn: unsigned_binary(op))
_elementwise({"Equal": torch.eq}, EXACT_DTYPES, versions=(7, None),
             unsigned=lambda op, fn: unsigned_compare(op))
_elementwise({"Greater": torch.gt, "Less": torch.lt, "GreaterOrEqual": torch.ge,
              "LessOrEqual": torch.le}, NUMERIC_DTYPES, versions=(7, None),
             unsigned=lambda op, fn: unsigned_compare(op))
_FLOATS = frozenset({ir.DataType.FLOAT, ir.DataType.FLOAT16, ir.DataType.BFLOAT16, ir.DataType.DOUBLE})


def _scalar_operand(info: NodeInfo, commutes: bool) -> tuple[int, float] | None:
    """(index, value) of a float operand that is a constant of one value and does not broadcast the
    other operand up (where the other is not a constant too); index 1 only unless ``commutes``.

    torch passes such a number to its kernels as an argument where a one-value device tensor is
    read as a broadcast operand: the vectorised kernel then runs instead of the strided one.  A
    Python float meets a float32 tensor as float32 (and a narrower tensor in float32 arithmetic, as
    the reduced-precision hints allow), so Add, Sub and Mul give the same numbers.
    """
    if info.num_inputs != 2 or info.input_dtypes[0] not in _FLOATS:
        return None
    for index in (1, 0) if commutes else (1,):
        array, other = info.constants[index], info.constants[1 - index]
        if array is None or other is not None or array.size != 1:
            continue
        rank = info.rank(1 - index)
        if array.ndim == 0 or (rank is not None and array.ndim <= rank):
            return index, float(array.reshape(-1)[0])
    return None


def _binary(op_type: str, fn: Callable[..., Any]) -> Callable[[NodeInfo], Callable[..., Any]]:
    """Add/Sub/Mul: with a one-value constant operand as a number (see :func:`_scalar_operand`)."""

    def lowering(info: NodeInfo) -> Callable[..., Any]:
        if info.input_dtypes[0] in WIDE_UNSIGNED:
            return unsigned_binary(op_type)
        found = _scalar_operand(info, commutes=True)
        if found is None:
            return fn
        index, value = found
        if index == 1:
            return lambda a, b: fn(a, value)
        if op_type == "Sub":
            return lambda a, b: torch.rsub(b, value)  # value - b
        return lambda a, b: fn(b, value)

    return lowering


_ARITHMETIC: dict[str, Callable[..., Any]] = {"Add": torch.add, "Sub": torch.sub, "Mul": torch.mul}
for _op_type, _fn in _ARITHMETIC.items():
    register(_op_type, versions=(7, None), supports=_check(NUMERIC_DTYPES | WIDE_UNSIGNED),
             held_dtypes=WIDE_UNSIGNED)(_binary(_op_type, _fn))


@register("Sign", versions=(9, None), supports=_check(NUMERIC_DTYPES | WIDE_UNSIGNED),
          held_dtypes=WIDE_UNSIGNED)
def _sign(info: NodeInfo) -> Callable[..., Any]:
    if info.input_dtypes[0] in WIDE_UNSIGNED:
        return unsigned_sign
    if info.input_dtypes[0] not in FLOAT_DTYPES:
        return torch.sign

    def sign(x: torch.Tensor) -> torch.Tensor:
        # torch.sign(NaN) is 0; ONNX (numpy) keeps NaN.
        return torch.where(torch.isnan(x), x, torch.sign(x))

    return sign


def _identity_supports(info: NodeInfo) -> str | None:
    value = info.node.inputs[0] if info.num_inputs else None
    if value is not None and value_kind(value.type) in VALUE_KINDS[1:]:
        return attrs_reason(info, ())  # a sequence or optional passes as it is
    return _check(EXACT_DTYPES | CAST_HELD)(info)


@register("Identity", supports=_identity_supports, held_dtypes=CAST_HELD)
def _identity(info: NodeInfo) -> Callable[..., Any]:
    return lambda x: x


@register("Div", versions=(7, None), supports=_check(NUMERIC_DTYPES | WIDE_UNSIGNED),
          held_dtypes=WIDE_UNSIGNED)
def _div(info: NodeInfo) -> Callable[..., Any]:
    if info.input_dtypes[0] in WIDE_UNSIGNED:
        return unsigned_binary("Div")
    if info.input_dtypes[0] in INT_DTYPES:
        # C and numpy-then-cast both truncate integer quotients toward zero.
        return functools.partial(torch.div, rounding_mode="trunc")
    found = _scalar_operand(info, commutes=False)
    if found is not None and found[1] != 0.0 and math.frexp(found[1])[0] in (0.5, -0.5):
        # a power of two: times its reciprocal is the same quotient (torch's kernels multiply by
        # the reciprocal of any number divisor, which rounds differently for other values)
        inverse = 1.0 / found[1]
        return lambda a, b: torch.mul(a, inverse)
    return torch.div


def _mod_supports(info: NodeInfo) -> str | None:
    return _check(NUMERIC_DTYPES | WIDE_UNSIGNED, ("fmod",))(info)


@register("Mod", versions=(10, None), supports=_mod_supports, held_dtypes=WIDE_UNSIGNED)
def _mod(info: NodeInfo) -> Callable[..., Any]:
    if info.input_dtypes[0] in WIDE_UNSIGNED:
        return unsigned_binary("Mod")
    # fmod=0: the sign of the divisor (Python's %); fmod=1: the sign of the dividend (C's fmod).
    return torch.fmod if info.attr("fmod", 0) else torch.remainder


def _pow_supports(info: NodeInfo) -> str | None:
    # an unsigned exponent converts to the base's floating type exactly enough for torch.pow
    return first_reason(_check(NUMERIC_DTYPES, inputs=(0,))(info),
                        _check(NUMERIC_DTYPES | WIDE_UNSIGNED, inputs=(1,))(info))


@register("Pow", versions=(7, None), supports=_pow_supports, held_dtypes=WIDE_UNSIGNED)
def _pow(info: NodeInfo) -> Callable[..., Any]:
    base, exponent = info.input_dtypes[0], info.input_dtypes[1]

    def power(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        # The result has the base's type.  An integer base with a float exponent is
        # computed in double (like ORT's std::pow and numpy) and truncated back;
        # otherwise both operands are promoted numpy-style, which torch skips for
        # 0-d tensors.  An unsigned 16/32/64-bit exponent is taken as int64 (uint64 by its bits).
        y = widen(y)
        if not x.is_floating_point() and y.is_floating_point():
            common = torch.float64
        else:
            common = torch.promote_types(x.dtype, y.dtype)
        return torch.pow(x.to(common), y.to(common)).to(x.dtype)

    if base is not None and base == exponent:
        return torch.pow
    return power


def _shift_supports(info: NodeInfo) -> str | None:
    reason = _check(INT_DTYPES | WIDE_UNSIGNED, ("direction",))(info)
    if reason is None and info.attr("direction") not in ("LEFT", "RIGHT"):
        return f"BitShift direction {info.attr('direction')!r} is not LEFT or RIGHT"
    return reason


@register("BitShift", versions=(11, None), supports=_shift_supports, held_dtypes=WIDE_UNSIGNED)
def _bit_shift(info: NodeInfo) -> Callable[..., Any]:
    return bit_shift(str(info.attr("direction")))


@register("IsInf", versions=(10, None),
          supports=_check(FLOAT_DTYPES, ("detect_positive", "detect_negative")))
def _is_inf(info: NodeInfo) -> Callable[..., Any]:
    positive, negative = info.attr("detect_positive", 1), info.attr("detect_negative", 1)
    if positive and negative:
        return torch.isinf
    if positive:
        return torch.isposinf
    if negative:
        return torch.isneginf
    return lambda x: torch.zeros_like(x, dtype=torch.bool)


@register("Where", versions=(9, None), held_dtypes=WIDE_UNSIGNED,
          supports=lambda info: first_reason(attrs_reason(info, ()),
                                             dtype_reason(info, (0,), EXACT_DTYPES),
                                             dtype_reason(info, (1, 2), EXACT_DTYPES | WIDE_UNSIGNED)))
@moves_bits
def _where(info: NodeInfo) -> Callable[..., Any]:
    return torch.where


def _clip_supports(info: NodeInfo) -> str | None:
    if info.opset < 11:
        return _check(FLOAT_DTYPES, ("min", "max"))(info)
    return _check(NUMERIC_DTYPES | WIDE_UNSIGNED)(info)


@register("Clip", versions=(6, None), supports=_clip_supports, held_dtypes=WIDE_UNSIGNED)
def _clip(info: NodeInfo) -> Callable[..., Any]:
    if info.input_dtypes[0] in WIDE_UNSIGNED:
        return unsigned_clip
    if info.opset < 11:
        low, high = info.attr("min", float("-inf")), info.attr("max", float("inf"))
        return lambda x: torch.clamp(x, low, high)

    def clip(x: torch.Tensor, low: torch.Tensor | None = None,
             high: torch.Tensor | None = None) -> torch.Tensor:
        # Bounds stay tensors (no host sync); min > max gives max, like np.clip and torch.
        if low is None and high is None:
            return x
        return torch.clamp(x, low, high)

    return clip


def _variadic(op: Callable[..., torch.Tensor]) -> Callable[[NodeInfo], Callable[..., Any]]:
    def lower(info: NodeInfo) -> Callable[..., Any]:
        def fold(*xs: torch.Tensor) -> torch.Tensor:
            result = xs[0]
            for x in xs[1:]:
                result = op(result, x)
            return result

        return fold

    return lower


def _extremum(op: str, fn: Callable[..., torch.Tensor]) -> Callable[[NodeInfo], Callable[..., Any]]:
    def lower(info: NodeInfo) -> Callable[..., Any]:
        return unsigned_binary(op) if info.input_dtypes[0] in WIDE_UNSIGNED else _variadic(fn)(info)

    return lower


# torch.maximum/minimum propagate NaN, like ONNX (numpy's maximum/minimum).
register("Max", versions=(6, None), supports=_check(NUMERIC_DTYPES | WIDE_UNSIGNED),
         held_dtypes=WIDE_UNSIGNED)(_extremum("Max", torch.maximum))
register("Min", versions=(6, None), supports=_check(NUMERIC_DTYPES | WIDE_UNSIGNED),
         held_dtypes=WIDE_UNSIGNED)(_extremum("Min", torch.minimum))
register("Sum", versions=(6, None), supports=_check(FLOAT_DTYPES))(_variadic(torch.add))


@register("Mean", versions=(6, None), supports=_check(FLOAT_DTYPES))
def _mean(info: NodeInfo) -> Callable[..., Any]:
    total = _variadic(torch.add)(info)
    return lambda *xs: total(*xs) / len(xs)


def _target_dtype(info: NodeInfo) -> ir.DataType | None:
    if info.op_type == "CastLike":
        return info.input_dtypes[1] if len(info.input_dtypes) > 1 else None
    return ir.DataType(info.attr("to"))


def _cast_supports(info: NodeInfo) -> str | None:
    # saturate changes casts to float8 only; round_mode only casts to float8e8m0, which is refused.
    reason = _check(EXACT_DTYPES | CAST_HELD, ("to", "saturate", "round_mode"), inputs=(0,))(info)
    if reason is not None:
        return reason
    target = _target_dtype(info)
    if target is None:
        # CastLike takes the type of its second input when it runs (bodies of If/Loop often
        # carry no inferred types); Cast always names its target.
        return None if info.op_type == "CastLike" else "the target element type is unknown"
    if target not in EXACT_DTYPES | CAST_HELD:
        return f"cast to {target.name} is not supported"
    return held_cast_reason(info.input_dtypes[0], target)


_IR_OF_TORCH = {dtype: onnx_type for onnx_type, dtype in HELD_DTYPES.items()}


def _cast_like_at_run_time(saturate: bool) -> Callable[..., Any]:
    """CastLike whose target type is known only from the tensor it receives."""

    def cast_like(x: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
        if x.dtype == like.dtype:
            return x
        source, target = _IR_OF_TORCH.get(x.dtype), _IR_OF_TORCH[like.dtype]
        if target in CAST_HELD or source in CAST_HELD:
            return held_cast(source, target, saturate, like.dtype)(x)
        return x.to(like.dtype)

    return cast_like


@register("Cast", versions=(6, None), supports=_cast_supports, held_dtypes=CAST_HELD)
@register("CastLike", versions=(15, None), supports=_cast_supports, held_dtypes=CAST_HELD)
def _cast(info: NodeInfo) -> Callable[..., Any]:
    # torch, like ONNX, truncates floats toward zero when casting to integers and
    # maps NaN to True when casting to bool.
    target = _target_dtype(info)
    if target is None and info.op_type == "CastLike":
        return _cast_like_at_run_time(bool(info.attr("saturate", 1)))
    if target is None:  # _cast_supports refuses such a node, so it is never lowered
        raise CompileError(f"{info.op_type}: the target element type is unknown")
    source = info.input_dtypes[0]
    if target in CAST_HELD or source in CAST_HELD:
        convert = held_cast(source, target, bool(info.attr("saturate", 1)), HELD_DTYPES[target])
        return lambda x, like=None: convert(x)
    dtype = torch_dtype(target)
    return lambda x, like=None: x.to(dtype)
