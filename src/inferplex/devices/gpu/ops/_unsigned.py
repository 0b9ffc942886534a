"""Exact arithmetic on uint16/uint32/uint64 tensors, which torch stores but has few kernels for.

uint16 and uint32 values widen to int64 exactly; results narrow back with a modular
cast, which is ONNX's (numpy's) wrap-around on overflow.  Ops that only move
values (Concat, Gather, Slice, Where, ...) run on the signed type of the same
width, viewed bit for bit (:func:`moves_bits`).  uint64 is reinterpreted
as int64 bit for bit: addition, subtraction, multiplication and the bitwise ops
give the same bits in two's complement, and comparisons flip the sign bit first
so that signed order becomes unsigned order.  Division of uint64 uses the
unsigned long-division identity on int64 (halve the dividend, divide, correct the
last bit), so no value is rounded through floating point.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import onnx_ir as ir
import torch

__all__ = [
    "WIDE_UNSIGNED",
    "bit_shift",
    "moves_bits",
    "narrow",
    "unsigned_abs",
    "unsigned_binary",
    "unsigned_clip",
    "unsigned_compare",
    "unsigned_sign",
    "unsigned_unary",
    "widen",
]

WIDE_UNSIGNED = frozenset({ir.DataType.UINT16, ir.DataType.UINT32, ir.DataType.UINT64})
_UNSIGNED_TORCH = (torch.uint16, torch.uint32, torch.uint64)
_SIGN_BIT = -(2**63)


def widen(x: torch.Tensor) -> torch.Tensor:
    """``x`` as int64: uint16/32 by value, uint64 by its bits; other types unchanged."""
    if x.dtype == torch.uint64:
        return x.view(torch.int64)
    if x.dtype in (torch.uint16, torch.uint32):
        return x.to(torch.int64)
    return x


def narrow(y: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """An int64 result back in unsigned ``dtype`` (modulo 2**bits, like C and numpy)."""
    if dtype == torch.uint64:
        return y.view(torch.uint64)
    return y.to(dtype)


def _ordered(x: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Widened ``x`` in an order that matches unsigned order (uint64 flips its sign bit)."""
    return x ^ _SIGN_BIT if dtype == torch.uint64 else x


def _uint64_div(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Unsigned 64-bit quotient of int64 bit patterns ``a // b`` (b != 0)."""
    a, b = torch.broadcast_tensors(a, b)
    huge = b < 0  # b >= 2**63: the quotient is 0 or 1
    safe_b = torch.where(huge, torch.ones_like(b), b)
    half = (a >> 1) & (2**63 - 1)  # logical shift right by one
    q = torch.div(half, safe_b, rounding_mode="trunc") << 1
    r = a - q * safe_b
    q = q + ((r ^ _SIGN_BIT) >= (safe_b ^ _SIGN_BIT)).to(torch.int64)
    return torch.where(huge, ((a ^ _SIGN_BIT) >= (b ^ _SIGN_BIT)).to(torch.int64), q)


def _div(a: torch.Tensor, b: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    if dtype == torch.uint64:
        return _uint64_div(a, b)
    return torch.div(a, b, rounding_mode="trunc")


def _shift_right(a: torch.Tensor, n: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    if dtype != torch.uint64:
        return a >> n
    # logical shift: clear the bits an arithmetic shift copies from the sign
    shifted = a >> n
    keep = torch.where(n <= 0, torch.full_like(n, -1), (1 << (64 - n).clamp(max=63)) - 1)
    return shifted & keep


_BINARY: dict[str, Callable[[torch.Tensor, torch.Tensor, torch.dtype], torch.Tensor]] = {
    "Add": lambda a, b, _: a + b,
    "Sub": lambda a, b, _: a - b,
    "Mul": lambda a, b, _: a * b,
    "Div": _div,
    # unsigned remainders have no sign to choose: fmod and Python's % agree
    "Mod": lambda a, b, d: a - _div(a, b, d) * b,
    "BitwiseAnd": lambda a, b, _: a & b,
    "BitwiseOr": lambda a, b, _: a | b,
    "BitwiseXor": lambda a, b, _: a ^ b,
    "Max": lambda a, b, d: torch.where(_ordered(a, d) >= _ordered(b, d), a, b),
    "Min": lambda a, b, d: torch.where(_ordered(a, d) <= _ordered(b, d), a, b),
}

_COMPARE: dict[str, Callable[[torch.Tensor, torch.Tensor], torch.Tensor]] = {
    "Equal": torch.eq, "Greater": torch.gt, "Less": torch.lt,
    "GreaterOrEqual": torch.ge, "LessOrEqual": torch.le,
}


def unsigned_binary(op: str) -> Callable[..., torch.Tensor]:
    """``op`` (a key of the table above; variadic for Max/Min) on unsigned operands."""
    fn = _BINARY[op]

    def compute(*xs: torch.Tensor) -> torch.Tensor:
        dtype = xs[0].dtype
        result = widen(xs[0])
        for x in xs[1:]:
            result = fn(result, widen(x), dtype)
        return narrow(result, dtype) if dtype in _UNSIGNED_TORCH else result

    return compute


def unsigned_compare(op: str) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    """Comparison ``op`` (Equal, Greater, ...) on unsigned operands, as bool."""
    fn = _COMPARE[op]

    def compare(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return fn(_ordered(widen(a), a.dtype), _ordered(widen(b), a.dtype))

    return compare


def unsigned_unary(fn: Callable[[torch.Tensor], torch.Tensor]) -> Callable[[torch.Tensor], torch.Tensor]:
    """An elementwise int64 ``fn`` (BitwiseNot, ...) applied to an unsigned tensor, result narrowed back."""

    def compute(x: torch.Tensor) -> torch.Tensor:
        return narrow(fn(widen(x)), x.dtype)

    return compute


_BITS = {torch.int8: 8, torch.int16: 16, torch.int32: 32, torch.int64: 64, torch.uint8: 8,
         torch.uint16: 16, torch.uint32: 32, torch.uint64: 64}


def bit_shift(direction: str) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    """ONNX BitShift on any integer type, exactly as its reference: shifts by a negative amount or
    by the type's width or more give 0 (right shifts of negative signed values give -1); left
    shifts wrap modulo 2**bits."""

    def shift(a: torch.Tensor, n: torch.Tensor) -> torch.Tensor:
        dtype, width = a.dtype, _BITS[a.dtype]
        wide_a, wide_n = widen(a).to(torch.int64), widen(n).to(torch.int64)
        if dtype == torch.uint64:
            # a shift amount of 2**63 or more reads as negative here: out of range either way
            wide_n = torch.where(wide_n < 0, torch.full_like(wide_n, width), wide_n)
        wide_a, wide_n = torch.broadcast_tensors(wide_a, wide_n)
        outside = (wide_n < 0) | (wide_n >= width)
        amount = wide_n.clamp(0, width - 1)
        signed = not (dtype in _UNSIGNED_TORCH or dtype == torch.uint8)
        if direction == "LEFT":
            result = torch.where(outside, torch.zeros_like(wide_a), wide_a << amount)
        else:
            shifted = _shift_right(wide_a, amount, dtype) if dtype == torch.uint64 else wide_a >> amount
            spill = torch.where(wide_a < 0, -torch.ones_like(wide_a), torch.zeros_like(wide_a)) \
                if signed else torch.zeros_like(wide_a)
            result = torch.where(outside, spill, shifted)
        return narrow(result, dtype) if dtype in _UNSIGNED_TORCH else result.to(dtype)

    return shift


def unsigned_abs(x: torch.Tensor) -> torch.Tensor:
    """Abs of unsigned values: the values themselves."""
    return x


def unsigned_sign(x: torch.Tensor) -> torch.Tensor:
    """Sign of unsigned values: 1 where non-zero, else 0, in ``x``'s type."""
    return narrow((widen(x) != 0).to(torch.int64), x.dtype)


def unsigned_clip(x: torch.Tensor, low: torch.Tensor | None = None,
                  high: torch.Tensor | None = None) -> torch.Tensor:
    """Clip (opset 11+) of unsigned values in unsigned order; min > max gives max, like torch.clamp."""
    dtype, result = x.dtype, widen(x)
    if low is not None:
        low = widen(low)
        result = torch.where(_ordered(result, dtype) < _ordered(low, dtype), low, result)
    if high is not None:
        high = widen(high)
        result = torch.where(_ordered(result, dtype) > _ordered(high, dtype), high, result)
    return narrow(result, dtype)


_SIGNED_TWIN = {torch.uint16: torch.int16, torch.uint32: torch.int32, torch.uint64: torch.int64}


def moves_bits(lower: Callable[[Any], Callable[..., Any]]) -> Callable[[Any], Callable[..., Any]]:
    """Decorator for the lowering of an op that only moves or selects values (Concat, Gather, Slice,
    Where, ...): on uint16/32/64 data, which torch barely computes, its function runs on the signed
    type of the same width, viewed bit for bit, and its results are viewed back.  Nodes without
    such inputs get the lowering's function unchanged."""

    @functools.wraps(lower)
    def lowering(info: Any) -> Callable[..., Any]:
        fn = lower(info)
        if not any(t in WIDE_UNSIGNED for t in info.input_dtypes if t is not None):
            return fn

        def back(value: Any, unsigned: torch.dtype) -> Any:
            if isinstance(value, torch.Tensor) and value.dtype == _SIGNED_TWIN[unsigned]:
                return value.view(unsigned)
            return value

        def run(*args: Any) -> Any:
            unsigned = next((a.dtype for a in args
                             if isinstance(a, torch.Tensor) and a.dtype in _SIGNED_TWIN), None)
            if unsigned is None:
                return fn(*args)
            twin = _SIGNED_TWIN[unsigned]
            out = fn(*(a.view(twin) if isinstance(a, torch.Tensor) and a.dtype == unsigned else a
                       for a in args))
            return tuple(back(t, unsigned) for t in out) if isinstance(out, tuple) else back(out, unsigned)

        run.__name__ = run.__qualname__ = f"{getattr(fn, '__name__', 'moved')}_unsigned"
        run.__dict__.update(getattr(fn, "__dict__", {}))  # eager / data-dependent marks
        return run

    return lowering
