"""OpenVINO's opset functions beyond the basic ones, built with ``inferplex.opsetN`` and run on CPU.

Each model is ``parameter -> op -> result``; the reference is numpy computing the op as OpenVINO's
op specification defines it (or ONNX Runtime on the equivalent ONNX node, where the ONNX op's
semantics are the specification's).  Modes ONNX cannot express are refused with an InputError.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pytest
from numpy.lib.stride_tricks import sliding_window_view
from onnx import TensorProto, helper, numpy_helper

import inferplex as ov
from inferplex import opset1, opset8
from inferplex.errors import InputError

RNG = np.random.default_rng(11)
F32 = np.float32


def _opset(number: int) -> Any:
    """``inferplex.opsetN``, imported as programs import ``openvino.opsetN``."""
    return importlib.import_module(f"inferplex.opset{number}")


ops = _opset(13)


def _run(model: ov.Model, *inputs: np.ndarray) -> list[np.ndarray]:
    return list(ov.Core().compile_model(model, "CPU")(list(inputs)).to_tuple())


def _apply(build: Callable[[Any], Any], data: np.ndarray, module: Any = ops) -> list[np.ndarray]:
    """Outputs of ``build(parameter)`` (a node: all its outputs) for ``data``."""
    param = module.parameter(list(data.shape), data.dtype, name="x")
    return _run(ov.Model(build(param), [param], "op"), data)


def _one(build: Callable[[Any], Any], data: np.ndarray, module: Any = ops) -> np.ndarray:
    return _apply(build, data, module)[0]


def _onnx_model(node: Any, data: np.ndarray, initializers: list[Any]) -> Any:
    """A one-node ONNX model reading ``x`` (shaped as ``data``) and the initializers, giving ``y``."""
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, data.shape)]
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)]
    graph = helper.make_graph([node], "reference", inputs, outputs, initializers)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


X = (RNG.standard_normal((3, 4)) * 3).astype(F32)
POSITIVE = np.abs(X) + 0.5
UNIT = np.clip(X / 10, -0.9, 0.9)


def _softplus(x: np.ndarray) -> np.ndarray:
    return np.log1p(np.exp(x))


@pytest.mark.parametrize(("name", "data", "reference"), [
    ("absolute", X, np.abs), ("abs", X, np.abs), ("ceil", X, np.ceil), ("ceiling", X, np.ceil),
    ("floor", X, np.floor), ("negative", X, np.negative), ("sign", X, np.sign), ("exp", X, np.exp),
    ("sqrt", POSITIVE, np.sqrt), ("log", POSITIVE, np.log), ("acos", UNIT, np.arccos),
    ("asin", UNIT, np.arcsin),
    ("atan", X, np.arctan), ("acosh", POSITIVE + 1, np.arccosh), ("asinh", X, np.arcsinh),
    ("atanh", UNIT, np.arctanh), ("cosh", UNIT, np.cosh), ("sinh", UNIT, np.sinh),
    ("softsign", X, lambda x: x / (1 + np.abs(x))), ("hsigmoid", X, lambda x: np.clip(x + 3, 0, 6) / 6),
    ("hswish", X, lambda x: x * np.clip(x + 3, 0, 6) / 6), ("softplus", X, _softplus),
    ("mish", X, lambda x: x * np.tanh(_softplus(x))),
])
def test_unary_functions_match_numpy(name: str, data: np.ndarray, reference: Callable[..., Any]) -> None:
    got = _one(getattr(ops, name), data)
    np.testing.assert_allclose(got, reference(data), rtol=1e-5, atol=1e-5)


def test_round_in_both_modes_and_on_integers() -> None:
    halves = np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 0.4, -0.6], F32)
    np.testing.assert_array_equal(_one(lambda x: ops.round(x, "half_to_even"), halves), np.round(halves))
    away = np.sign(halves) * np.floor(np.abs(halves) + 0.5)
    np.testing.assert_array_equal(_one(lambda x: ops.round(x, "half_away_from_zero"), halves), away)
    ints = np.array([3, -4], np.int32)
    np.testing.assert_array_equal(_one(ops.round, ints), ints)
    with pytest.raises(InputError, match="half_to_even, half_away_from_zero"):
        ops.round(ops.parameter([2], F32), "up")


def test_float_classes() -> None:
    data = np.array([np.inf, -np.inf, np.nan, 1.0], F32)
    np.testing.assert_array_equal(_one(ops.is_inf, data), np.isinf(data))
    positive_only = _one(lambda x: ops.is_inf(x, {"detect_negative": False}), data)
    np.testing.assert_array_equal(positive_only, np.isposinf(data))
    np.testing.assert_array_equal(_one(ops.is_nan, data), np.isnan(data))
    np.testing.assert_array_equal(_one(ops.is_finite, data), np.isfinite(data))


def test_parametrised_activations() -> None:
    shifted = X - X.max(axis=1, keepdims=True)
    log_softmax = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    np.testing.assert_allclose(_one(lambda x: ops.log_softmax(x, 1), X), log_softmax, rtol=1e-5, atol=1e-5)
    hard = _one(lambda x: ops.hard_sigmoid(x, F32(0.2), F32(0.5)), X)
    np.testing.assert_allclose(hard, np.clip(0.2 * X + 0.5, 0, 1), rtol=1e-6)
    selu = _one(lambda x: ops.selu(x, F32(1.67), F32(1.05)), X)
    np.testing.assert_allclose(selu, 1.05 * np.where(X > 0, X, 1.67 * (np.exp(X) - 1)), rtol=1e-5, atol=1e-6)
    squared = _one(lambda x: ops.squared_difference(x, F32(1.5)), X)
    np.testing.assert_allclose(squared, (X - 1.5) ** 2, rtol=1e-6)


def test_prelu_slope_per_channel_and_broadcast() -> None:
    data = RNG.standard_normal((2, 3, 4, 5)).astype(F32)
    per_channel = np.array([0.1, 0.2, 0.3], F32)
    expected = np.where(data >= 0, data, data * per_channel.reshape(1, 3, 1, 1))
    np.testing.assert_allclose(_one(lambda x: ops.prelu(x, per_channel), data), expected, rtol=1e-6)
    last = np.arange(1, 6, dtype=F32) / 10
    np.testing.assert_allclose(_one(lambda x: ops.prelu(x, last), data),
                               np.where(data >= 0, data, data * last), rtol=1e-6)


def test_reductions() -> None:
    flags = RNG.integers(0, 2, (3, 4)).astype(bool)
    np.testing.assert_array_equal(_one(lambda x: ops.reduce_logical_and(x, [1]), flags), flags.all(axis=1))
    np.testing.assert_array_equal(_one(lambda x: ops.reduce_logical_or(x, [0], True), flags),
                                  flags.any(axis=0, keepdims=True))
    np.testing.assert_allclose(_one(lambda x: ops.reduce_l1(x, [0], True), X),
                               np.abs(X).sum(axis=0, keepdims=True), rtol=1e-5)
    np.testing.assert_allclose(_one(lambda x: ops.reduce_l2(x, [1]), X), np.sqrt((X * X).sum(axis=1)),
                               rtol=1e-5)


@pytest.mark.parametrize("exclusive", [False, True])
@pytest.mark.parametrize("reverse", [False, True])
def test_cum_sum(exclusive: bool, reverse: bool) -> None:
    data = X[:, ::-1] if reverse else X
    sums = np.cumsum(data, axis=1) - (data if exclusive else 0)
    expected = sums[:, ::-1] if reverse else sums
    np.testing.assert_allclose(_one(lambda x: ops.cum_sum(x, 1, exclusive, reverse), X), expected,
                               rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(_one(lambda x: ops.cumsum(x, np.int32(1), exclusive, reverse), X), expected,
                               rtol=1e-5, atol=1e-5)


def test_fake_quantize_follows_the_specification() -> None:
    data = np.linspace(-3, 3, 25, dtype=F32).reshape(5, 5)
    low, high = np.array([[-1], [0], [-2], [1], [-1]], F32), np.array([[1], [2], [2], [1.5], [0.5]], F32)
    out_low, out_high, levels = F32(-5), F32(5), 7
    got = _one(lambda x: ops.fake_quantize(x, low, high, out_low, out_high, levels), data)
    steps = np.round((data - low) / (high - low) * (levels - 1)) / (levels - 1)
    inside = steps * (out_high - out_low) + out_low
    expected = np.where(data <= low, out_low, np.where(data > high, out_high, inside))
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


# --- shapes -----------------------------------------------------------------------------------------


def test_broadcast_modes() -> None:
    row = RNG.standard_normal(3).astype(F32)
    np.testing.assert_array_equal(_one(lambda x: ops.broadcast(x, np.array([2, 3])), row),
                                  np.broadcast_to(row, (2, 3)))
    column = RNG.standard_normal((1, 3)).astype(F32)
    both = _one(lambda x: ops.broadcast(x, np.array([4, 1]), broadcast_spec="BIDIRECTIONAL"), column)
    np.testing.assert_array_equal(both, np.broadcast_to(column, (4, 3)))
    pair = RNG.standard_normal((3, 2)).astype(F32)
    explicit = _one(lambda x: ops.broadcast(x, np.array([3, 4, 2]), np.array([0, 2]), "EXPLICIT"), pair)
    np.testing.assert_array_equal(explicit, np.broadcast_to(pair[:, None, :], (3, 4, 2)))
    np.testing.assert_array_equal(_one(lambda x: opset1.broadcast(x, np.array([2, 3]), mode="numpy"), row,
                                       opset1), np.broadcast_to(row, (2, 3)))
    with pytest.raises(InputError, match="numpy, bidirectional, explicit"):
        ops.broadcast(ops.parameter([3], F32), np.array([2, 3]), broadcast_spec="PDPD")


@pytest.mark.parametrize("mode", ["constant", "edge", "reflect", "symmetric"])
def test_pad_modes(mode: str) -> None:
    data = RNG.standard_normal((2, 3, 4)).astype(F32)
    got = _one(lambda x: ops.pad(x, [0, 1, 2], [1, 2, 0], mode), data)
    np.testing.assert_array_equal(got, np.pad(data, [(0, 1), (1, 2), (2, 0)], mode=mode))


def test_pad_value_and_negative_pads_crop() -> None:
    data = RNG.standard_normal((2, 3, 4)).astype(F32)
    filled = _one(lambda x: ops.pad(x, [0, 1, 0], [1, 0, 0], "constant", F32(7)), data)
    np.testing.assert_array_equal(filled, np.pad(data, [(0, 1), (1, 0), (0, 0)], constant_values=7))
    cropped = _one(lambda x: ops.pad(x, [0, -1, 2], [1, 0, -2], "constant"), data)
    np.testing.assert_array_equal(cropped, np.pad(data[:, 1:, :-2], [(0, 1), (0, 0), (2, 0)]))
    with pytest.raises(InputError, match="constant, edge, reflect, symmetric"):
        ops.pad(ops.parameter([2], F32), [1], [1], "wrap")


def test_range_with_and_without_output_type() -> None:
    def built(node: Any) -> np.ndarray:
        return _run(ov.Model([node], [], "range"))[0]

    np.testing.assert_array_equal(built(opset8.range(F32(0.5), F32(5.2), F32(1.5))),
                                  np.arange(0.5, 5.2, 1.5, dtype=F32))
    np.testing.assert_array_equal(built(opset8.range(1, 10, 3)), np.arange(1, 10, 3))
    as_int = built(ops.range(0.5, 5.2, 1.5, "i32"))  # converted first: range(0, 5, 1)
    np.testing.assert_array_equal(as_int, np.arange(0, 5, 1, dtype=np.int32))
    assert as_int.dtype == np.int32
    np.testing.assert_array_equal(built(ops.range(10, 1, -3, "f32")), np.arange(10, 1, -3, dtype=F32))
    start = ops.parameter([], np.int64, name="start")
    computed = _run(ov.Model([ops.range(start, 7, 2, "i64")], [start], "range"), np.array(1, np.int64))[0]
    np.testing.assert_array_equal(computed, np.arange(1, 7, 2))


def _depth_to_space(x: np.ndarray, mode: str, size: int) -> np.ndarray:
    n, c, *spatial = x.shape
    k = len(spatial)
    depth = c // size ** k
    if mode == "blocks_first":
        parts = x.reshape(n, *[size] * k, depth, *spatial)
        order = [0, k + 1, *[v for i in range(k) for v in (k + 2 + i, 1 + i)]]
    else:
        parts = x.reshape(n, depth, *[size] * k, *spatial)
        order = [0, 1, *[v for i in range(k) for v in (k + 2 + i, 2 + i)]]
    return parts.transpose(order).reshape(n, depth, *[d * size for d in spatial])


@pytest.mark.parametrize("mode", ["blocks_first", "depth_first"])
@pytest.mark.parametrize("shape", [(1, 8, 2, 3), (2, 6, 3), (1, 16, 2, 1, 3)])
def test_depth_to_space_and_back(mode: str, shape: tuple[int, ...]) -> None:
    data = RNG.standard_normal(shape).astype(F32)
    spread = _one(lambda x: ops.depth_to_space(x, mode, 2), data)
    np.testing.assert_array_equal(spread, _depth_to_space(data, mode, 2))
    np.testing.assert_array_equal(_one(lambda x: ops.space_to_depth(x, mode, 2), spread), data)


def test_non_zero() -> None:
    data = np.array([[0, 1, 0], [2, 0, 3]], F32)
    np.testing.assert_array_equal(_one(ops.non_zero, data), np.array(np.nonzero(data)))
    as_int = _one(lambda x: ops.non_zero(x, "i32"), data)
    assert as_int.dtype == np.int32


# --- slicing ------------------------------------------------------------------------------------------

CUBE = RNG.standard_normal((4, 5, 6)).astype(F32)


def test_slice() -> None:
    got = _one(lambda x: ops.slice(x, np.array([1, 0]), np.array([3, 5]), np.array([1, 2])), CUBE)
    np.testing.assert_array_equal(got, CUBE[1:3, 0:5:2])
    backwards = _one(lambda x: ops.slice(x, np.array([-1, 4]), np.array([-100, 0]), np.array([-1, -2]),
                                         np.array([2, 1])), CUBE)
    np.testing.assert_array_equal(backwards, CUBE[:, 4:0:-2, ::-1])


@pytest.mark.parametrize(("args", "expected"), [
    (([1, 0], [3, 5], [1, 2], [0, 0], [0, 0]), CUBE[1:3, 0:5:2]),
    (([1, 2], [3, 4], [1, 1], [1, 0], [0, 1]), CUBE[:3, 2:]),
    (([0, 3], [0, 0], [-1, -1], [1, 0], [1, 0]), CUBE[::-1, 3:0:-1]),
    (([2, 3], [0, 0], [-1, -2], [0, 0], [0, 1]), CUBE[2:0:-1, 3::-2]),
    (([1, 0, 2], [2, 0, 3], [1, 1, 1], [0, 1, 0], [0, 1, 0], None, [1, 0, 1]), CUBE[1, :, 2]),
    (([-1], [0], [1], [0], [0], None, [1]), CUBE[-1]),
    (([0, 1, 0], [0, 3, 0], [1, 1, 1], [0, 0, 0], [0, 0, 0], [1, 0, 1]), CUBE[None, 1:3, None]),
    (([0, 1], [0, 3], [1, 1], [0, 0], [0, 0], None, None, [1, 0]), CUBE[..., 1:3]),
    (([1, 0, 0, 1], [2, 0, 0, 3], [1, 1, 1, 1], [0, 0, 0, 0], [0, 0, 0, 0], [0, 1, 0, 0], [1, 0, 0, 0],
      [0, 0, 1, 0]), CUBE[1, None, ..., 1:3]),
])
def test_strided_slice_masks_match_numpy_indexing(args: Sequence[Any], expected: np.ndarray) -> None:
    begin, end, strides, *masks = args
    bounds = (np.array(begin), np.array(end), np.array(strides))
    got = _one(lambda x: ops.strided_slice(x, *bounds, *masks), CUBE)
    np.testing.assert_array_equal(got, expected)


def test_strided_slice_with_computed_bounds_takes_no_masks() -> None:
    x, begin = ops.parameter([4, 5], F32), ops.parameter([2], np.int64)
    with pytest.raises(InputError, match="constant begin/end/strides"):
        ops.strided_slice(x, begin, np.array([3, 3]), np.array([1, 1]), [1, 0], [0, 0])


def test_roll() -> None:
    np.testing.assert_array_equal(_one(lambda x: ops.roll(x, np.array([2, -1]), np.array([0, 2])), CUBE),
                                  np.roll(CUBE, (2, -1), (0, 2)))
    np.testing.assert_array_equal(_one(lambda x: ops.roll(x, np.array([1, 2]), np.array([0, -3])), CUBE),
                                  np.roll(CUBE, 3, 0))
    with pytest.raises(InputError, match="dynamic length"):
        ops.roll(ops.parameter([-1, 3], F32), np.array([1]), np.array([0]))


# --- indexing -----------------------------------------------------------------------------------------


def test_gathers() -> None:
    data = RNG.standard_normal((3, 4, 5)).astype(F32)
    np.testing.assert_array_equal(_one(lambda x: ops.gather_nd(x, np.array([[0, 1], [2, 3]])), data),
                                  data[[0, 2], [1, 3]])
    batched = _one(lambda x: ops.gather_nd(x, np.array([[1], [0], [3]]), 1), data)
    np.testing.assert_array_equal(batched, data[np.arange(3), [1, 0, 3]])
    indices = RNG.integers(-4, 4, (3, 2, 5))
    np.testing.assert_array_equal(_one(lambda x: ops.gather_elements(x, indices, 1), data),
                                  np.take_along_axis(data, indices % 4, axis=1))


def _scatter_elements(data: np.ndarray, indices: np.ndarray, updates: np.ndarray, combine: Any = None,
                      start: float | None = None) -> np.ndarray:
    out = data.copy()
    if start is not None:
        for (i, j), _ in np.ndenumerate(indices):
            out[indices[i, j], j] = start
    for (i, j), target in np.ndenumerate(indices):
        out[target, j] = updates[i, j] if combine is None else combine(out[target, j], updates[i, j])
    return out


@pytest.mark.parametrize(("reduction", "use_init_val", "combine", "start"), [
    ("none", True, None, None), ("sum", True, np.add, None), ("sum", False, np.add, 0.0),
    ("prod", True, np.multiply, None), ("prod", False, np.multiply, 1.0),
])
def test_scatter_elements_update(reduction: str, use_init_val: bool, combine: Any,
                                  start: float | None) -> None:
    data = np.full((3, 4), 2, F32)
    indices = np.array([[1, 0, 2, 0], [0, 2, 1, 1]])
    updates = np.arange(8, dtype=F32).reshape(2, 4) + 1
    got = _one(lambda x: ops.scatter_elements_update(x, indices, updates, 0, reduction, use_init_val), data)
    np.testing.assert_array_equal(got, _scatter_elements(data, indices, updates, combine, start))
    with pytest.raises(InputError, match="none, sum, prod"):
        ops.scatter_elements_update(ops.parameter([3, 4], F32), indices, updates, 0, "mean")


def test_scatter_update_along_any_axis() -> None:
    rows = _one(lambda x: ops.scatter_update(x, np.array([2, 0]), np.ones((2, 3), F32), np.int64(0)),
                np.zeros((4, 3), F32))
    np.testing.assert_array_equal(rows, np.array([[1, 1, 1], [0, 0, 0], [1, 1, 1], [0, 0, 0]], F32))
    updates = np.arange(12, dtype=F32).reshape(2, 2, 1, 3)
    got = _one(lambda x: ops.scatter_update(x, np.array([[3], [1]]), updates, np.int64(1)),
               np.zeros((2, 4, 3), F32))
    expected = np.zeros((2, 4, 3), F32)
    expected[:, [3, 1], :] = updates[:, :, 0, :]
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize(("reduction", "combine"), [(None, None), ("sum", np.add), ("sub", np.subtract),
                                                    ("prod", np.multiply)])
def test_scatter_nd_update(reduction: str | None, combine: Any) -> None:
    data = np.full((4, 3), 2, F32)
    indices, updates = np.array([[3, 1], [0, 2], [3, 1]]), np.array([1, 2, 3], F32)
    expected = data.copy()
    for (row, col), value in zip(indices, updates, strict=True):
        expected[row, col] = value if combine is None else combine(expected[row, col], value)
    if combine is None:
        indices, updates, expected[3, 1] = indices[:2], updates[:2], 1  # repeated targets: any update may win
    np.testing.assert_array_equal(_one(lambda x: ops.scatter_nd_update(x, indices, updates, reduction), data),
                                  expected)
    with pytest.raises(InputError, match="none, sum, sub, prod"):
        ops.scatter_nd_update(ops.parameter([4, 3], F32), indices, updates, "max")


def _one_hot(indices: np.ndarray, depth: int, on: Any, off: Any, axis: int, normalize: bool) -> np.ndarray:
    positions = np.where((indices < 0) & normalize, indices + depth, indices)
    hot = (positions[..., None] == np.arange(depth)).astype(np.asarray(on).dtype)
    return np.moveaxis(np.where(hot, on, off), -1, axis).astype(np.asarray(on).dtype)


def test_one_hot_negative_indices() -> None:
    indices = np.array([[0, -1, 2], [5, 1, -3]], np.int64)
    off_by_default = _one(lambda x: ops.one_hot(x, 4, F32(1), F32(0), -1), indices)
    np.testing.assert_array_equal(off_by_default, _one_hot(indices, 4, F32(1), F32(0), -1, False))
    normalized = _one(lambda x: ops.one_hot(x, 4, F32(1), F32(0), 1, "normalize"), indices)
    np.testing.assert_array_equal(normalized, _one_hot(indices, 4, F32(1), F32(0), 1, True))
    as_int = _one(lambda x: ops.one_hot(x, np.int64(4), np.int32(5), np.int32(-1), 0),
                  indices.astype(np.int32))
    np.testing.assert_array_equal(as_int, _one_hot(indices, 4, np.int32(5), np.int32(-1), 0, False))


@pytest.mark.parametrize("sort", ["value", "index", "none"])
@pytest.mark.parametrize("mode", ["max", "min"])
def test_topk_sort_orders(sort: str, mode: str) -> None:
    data = RNG.standard_normal((2, 6)).astype(F32)
    values, indices = _apply(lambda x: ops.topk(x, 3, 1, mode, sort, "i64"), data)
    ranked = np.argsort(-data if mode == "max" else data, axis=1, kind="stable")[:, :3]
    chosen = np.sort(ranked, axis=1) if sort == "index" else ranked
    np.testing.assert_array_equal(indices, chosen)
    np.testing.assert_array_equal(values, np.take_along_axis(data, chosen, axis=1))


def test_topk_takes_a_scalar_k() -> None:
    data = RNG.standard_normal((2, 6)).astype(F32)
    x, k = ops.parameter([2, 6], F32, name="x"), ops.parameter([], np.int64, name="k")
    model = ov.Model(ops.topk(x, k, -1, "max", "value"), [x, k], "topk")
    values, indices = _run(model, data, np.array(2, np.int64))
    np.testing.assert_array_equal(values, -np.sort(-data, axis=1)[:, :2])
    assert indices.dtype == np.int32
    constant_k = _apply(lambda p: ops.topk(p, ops.constant(np.int64(4)), 1, "min", "value"), data)[0]
    np.testing.assert_array_equal(constant_k, np.sort(data, axis=1)[:, :4])


# --- layers -------------------------------------------------------------------------------------------

IMAGES = RNG.standard_normal((2, 6, 5, 5)).astype(F32)


def test_batch_norm_inference() -> None:
    gamma, beta = np.array([1, 2, 3, 1, 1, 1], F32), np.array([0, 1, 0, 0, -1, 0], F32)
    mean, variance = np.linspace(0, 1, 6, dtype=F32), np.linspace(0.5, 2, 6, dtype=F32)
    got = _one(lambda x: ops.batch_norm_inference(x, gamma, beta, mean, variance, 1e-3), IMAGES)
    shape = (1, 6, 1, 1)
    spread = np.sqrt(variance.reshape(shape) + 1e-3)
    expected = gamma.reshape(shape) * (IMAGES - mean.reshape(shape)) / spread + beta.reshape(shape)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


def _conv2d(x: np.ndarray, w: np.ndarray, pads: tuple[int, int, int, int]) -> np.ndarray:
    padded = np.pad(x, [(0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])])
    windows = sliding_window_view(padded, w.shape[2:], axis=(2, 3))
    return np.einsum("nchwij,ocij->nohw", windows, w)


def test_group_convolution() -> None:
    filters = RNG.standard_normal((3, 4, 2, 3, 3)).astype(F32)  # 3 groups of 2 channels in, 4 out
    got = _one(lambda x: ops.group_convolution(x, filters, [1, 1], [1, 0], [1, 2], [1, 1]), IMAGES)
    groups = [_conv2d(IMAGES[:, 2 * g:2 * g + 2], filters[g], (1, 0, 1, 2)) for g in range(3)]
    np.testing.assert_allclose(got, np.concatenate(groups, axis=1), rtol=1e-4, atol=1e-4)


def test_convolution_backprop_data_matches_onnx_conv_transpose(ort_reference: Any) -> None:
    filters = RNG.standard_normal((6, 2, 3, 3)).astype(F32)
    got = _one(lambda x: ops.convolution_backprop_data(x, filters, [2, 2], pads_begin=[1, 0], pads_end=[0, 1],
                                                       output_padding=[1, 0]), IMAGES)
    node = helper.make_node("ConvTranspose", ["x", "w"], ["y"], strides=[2, 2], pads=[1, 0, 0, 1],
                            output_padding=[1, 0])
    model = _onnx_model(node, IMAGES, [numpy_helper.from_array(filters, "w")])
    np.testing.assert_allclose(got, ort_reference(model, {"x": IMAGES})[0], rtol=1e-4, atol=1e-4)
    with pytest.raises(InputError, match="pads_begin/pads_end"):
        ops.convolution_backprop_data(ops.parameter([1, 6, 5, 5], F32), filters, [1, 1], np.array([7, 7]))


def test_group_convolution_backprop_data_matches_onnx_grouped_conv_transpose(ort_reference: Any) -> None:
    filters = RNG.standard_normal((3, 2, 4, 3, 3)).astype(F32)  # 3 groups of 2 channels in, 4 out
    got = _one(lambda x: ops.group_convolution_backprop_data(x, filters, [2, 2], pads_begin=[1, 0],
                                                             pads_end=[0, 1]), IMAGES)
    node = helper.make_node("ConvTranspose", ["x", "w"], ["y"], strides=[2, 2], pads=[1, 0, 0, 1], group=3)
    model = _onnx_model(node, IMAGES, [numpy_helper.from_array(filters.reshape(6, 4, 3, 3), "w")])
    np.testing.assert_allclose(got, ort_reference(model, {"x": IMAGES})[0], rtol=1e-4, atol=1e-4)


def test_group_normalization() -> None:
    scale, bias = np.arange(1, 7, dtype=F32), np.arange(6, dtype=F32) / 3
    got = _one(lambda x: ops.group_normalization(x, scale, bias, 3, 1e-3), IMAGES)
    groups = IMAGES.reshape(2, 3, -1)
    normal = (groups - groups.mean(axis=2, keepdims=True)) / np.sqrt(groups.var(axis=2, keepdims=True) + 1e-3)
    expected = normal.reshape(IMAGES.shape) * scale.reshape(1, 6, 1, 1) + bias.reshape(1, 6, 1, 1)
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)


def test_shuffle_channels_and_reverse_sequence() -> None:
    shuffled = _one(lambda x: ops.shuffle_channels(x, 1, 3), IMAGES)
    interleaved = IMAGES.reshape(2, 3, 2, 5, 5).swapaxes(1, 2).reshape(IMAGES.shape)
    np.testing.assert_array_equal(shuffled, interleaved)
    sequences = RNG.standard_normal((3, 5, 2)).astype(F32)
    lengths = np.array([1, 5, 3])
    expected = sequences.copy()
    for batch, length in enumerate(lengths):
        expected[batch, :length] = sequences[batch, :length][::-1]
    got = _one(lambda x: ops.reverse_sequence(x, lengths, 0, 1), sequences)
    np.testing.assert_array_equal(got, expected)
    along_last = _one(lambda x: ops.reverse_sequence(x, np.array([1, 2, 2]), 0, 2), sequences)
    for batch, length in enumerate([1, 2, 2]):  # batch axis 0, sequence axis 2
        np.testing.assert_array_equal(along_last[batch, :, :length], sequences[batch, :, :length][:, ::-1])


def _mvn(x: np.ndarray, axes: tuple[int, ...], eps: float, inside: bool) -> np.ndarray:
    centred = x - x.mean(axis=axes, keepdims=True)
    deviation = x.var(axis=axes, keepdims=True)
    return centred / (np.sqrt(deviation + eps) if inside else np.sqrt(deviation) + eps)


def test_mvn_in_opset6_and_opset1_forms() -> None:
    inside = _one(lambda x: ops.mvn(x, np.array([2, 3]), True, 1e-2, "inside_sqrt"), IMAGES)
    np.testing.assert_allclose(inside, _mvn(IMAGES, (2, 3), 1e-2, True), rtol=1e-4, atol=1e-4)
    outside = _one(lambda x: ops.mvn(x, np.array([1, 2, 3]), True, 1e-2, "outside_sqrt"), IMAGES)
    np.testing.assert_allclose(outside, _mvn(IMAGES, (1, 2, 3), 1e-2, False), rtol=1e-4, atol=1e-4)
    centred = _one(lambda x: ops.mvn(x, np.array([1]), False, 1e-2, "inside_sqrt"), IMAGES)
    np.testing.assert_allclose(centred, IMAGES - IMAGES.mean(axis=1, keepdims=True), rtol=1e-5, atol=1e-5)
    across = _one(lambda x: opset1.mvn(x, True, True, 1e-2), IMAGES, opset1)
    np.testing.assert_allclose(across, _mvn(IMAGES, (1, 2, 3), 1e-2, True), rtol=1e-4, atol=1e-4)
    spatial = _one(lambda x: _opset(2).mvn(x, across_channels=False, normalize_variance=True, eps=1e-2),
                   IMAGES)
    np.testing.assert_allclose(spatial, _mvn(IMAGES, (2, 3), 1e-2, True), rtol=1e-4, atol=1e-4)


def test_normalize_l2_and_lrn() -> None:
    squares = (IMAGES * IMAGES).sum(axis=1, keepdims=True)
    added = _one(lambda x: ops.normalize_l2(x, np.array([1]), 1e-2, "add"), IMAGES)
    np.testing.assert_allclose(added, IMAGES / np.sqrt(squares + 1e-2), rtol=1e-5, atol=1e-6)
    floored = _one(lambda x: ops.normalize_l2(x, np.array([1]), 100.0, "max"), IMAGES)
    np.testing.assert_allclose(floored, IMAGES / np.sqrt(np.maximum(squares, 100.0)), rtol=1e-5, atol=1e-6)
    windows = np.pad(IMAGES * IMAGES, [(0, 0), (1, 1), (0, 0), (0, 0)])
    local = sum(windows[:, i:i + 6] for i in range(3))
    lrn = _one(lambda x: ops.lrn(x, np.array([1]), 0.1, 0.75, 1.0, 3), IMAGES)
    np.testing.assert_allclose(lrn, IMAGES / (1.0 + 0.1 / 3 * local) ** 0.75, rtol=1e-5, atol=1e-6)
    with pytest.raises(InputError, match="accepted: \\[1\\]"):
        ops.lrn(ops.parameter([1, 3, 4, 4], F32), np.array([2, 3]))


def test_einsum() -> None:
    a, b = RNG.standard_normal((2, 3, 4)).astype(F32), RNG.standard_normal((2, 4, 5)).astype(F32)
    pa, pb = ops.parameter([2, 3, 4], F32, name="a"), ops.parameter([2, 4, 5], F32, name="b")
    got = _run(ov.Model([ops.einsum([pa, pb], "bij,bjk->bik")], [pa, pb], "einsum"), a, b)[0]
    np.testing.assert_allclose(got, np.einsum("bij,bjk->bik", a, b), rtol=1e-5, atol=1e-5)


def _attention(q: np.ndarray, k: np.ndarray, v: np.ndarray, bias: np.ndarray | float = 0.0,
               scale: float | None = None) -> np.ndarray:
    scores = q @ np.swapaxes(k, -1, -2) * (scale if scale is not None else 1 / np.sqrt(q.shape[-1])) + bias
    weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return (weights / weights.sum(axis=-1, keepdims=True)) @ v


@pytest.mark.parametrize("dynamic", [False, True])
def test_scaled_dot_product_attention(dynamic: bool) -> None:
    q, k, v = (RNG.standard_normal(shape).astype(F32) for shape in ((2, 3, 5, 8), (2, 3, 6, 8), (2, 3, 6, 4)))
    params = [ops.parameter([-1, 3, -1, -1] if dynamic else list(a.shape), F32, name=n)
              for n, a in zip("qkv", (q, k, v), strict=True)]

    def attend(**options: Any) -> np.ndarray:
        node = ops.scaled_dot_product_attention(*params, **options)
        return _run(ov.Model([node], params, "sdpa"), q, k, v)[0]

    np.testing.assert_allclose(attend(), _attention(q, k, v), rtol=1e-4, atol=1e-5)
    causal = np.triu(np.full((5, 6), -np.inf, F32), k=1)
    np.testing.assert_allclose(attend(causal=True), _attention(q, k, v, causal), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(attend(scale=F32(0.5)), _attention(q, k, v, scale=0.5), rtol=1e-4, atol=1e-5)
    added = RNG.standard_normal((5, 6)).astype(F32)
    np.testing.assert_allclose(attend(attention_mask=added), _attention(q, k, v, added), rtol=1e-4, atol=1e-5)
    keep = RNG.integers(0, 2, (1, 1, 5, 6)).astype(bool) | np.eye(5, 6, dtype=bool)
    masked = _attention(q, k, v, np.where(keep, 0, -np.inf).astype(F32))
    np.testing.assert_allclose(attend(attention_mask=keep), masked, rtol=1e-4, atol=1e-5)


# --- interpolate --------------------------------------------------------------------------------------

PICTURE = RNG.standard_normal((1, 2, 4, 6)).astype(F32)


def _linear(x: np.ndarray, axis: int, size: int, coordinate: str) -> np.ndarray:
    """Linear resampling along one axis (bilinear is this along each axis in turn)."""
    length = x.shape[axis]
    out = np.arange(size, dtype=np.float64)
    if coordinate == "align_corners":
        source = out * (length - 1) / max(size - 1, 1)
    else:
        source = (out + 0.5) * length / size - 0.5
    moved = np.moveaxis(x, axis, -1)
    flat = moved.reshape(-1, length)
    resampled = np.stack([np.interp(source, np.arange(length), row) for row in flat])
    return np.moveaxis(resampled.reshape(*moved.shape[:-1], size), -1, axis).astype(x.dtype)


def _bilinear(x: np.ndarray, sizes: tuple[int, int], coordinate: str) -> np.ndarray:
    return _linear(_linear(x, 2, sizes[0], coordinate), 3, sizes[1], coordinate)


@pytest.mark.parametrize("mode", ["linear", "linear_onnx"])
@pytest.mark.parametrize("coordinate", ["half_pixel", "align_corners"])
def test_interpolate_opset11_linear(mode: str, coordinate: str) -> None:
    got = _one(lambda x: ops.interpolate(x, np.array([7, 5]), mode, "sizes", axes=np.array([2, 3]),
                                         coordinate_transformation_mode=coordinate), PICTURE)
    np.testing.assert_allclose(got, _bilinear(PICTURE, (7, 5), coordinate), rtol=1e-5, atol=1e-5)


def test_interpolate_nearest_by_scales_and_one_axis() -> None:
    doubled = _one(lambda x: ops.interpolate(x, np.array([2.0, 2.0], F32), "nearest", "scales",
                                             coordinate_transformation_mode="asymmetric",
                                             nearest_mode="floor", axes=np.array([2, 3])), PICTURE)
    np.testing.assert_array_equal(doubled, PICTURE.repeat(2, axis=2).repeat(2, axis=3))
    widened = _one(lambda x: ops.interpolate(x, np.array([9]), "linear_onnx", "sizes", axes=np.array([3])),
                   PICTURE)
    np.testing.assert_allclose(widened, _linear(PICTURE, 3, 9, "half_pixel"), rtol=1e-5, atol=1e-5)


def test_interpolate_to_computed_sizes() -> None:
    x, sizes = ops.parameter([1, 2, -1, -1], F32, name="x"), ops.parameter([2], np.int64, name="sizes")
    node = ops.interpolate(x, sizes, "nearest", "sizes", coordinate_transformation_mode="asymmetric",
                           nearest_mode="floor", axes=np.array([2, 3]))
    got = _run(ov.Model([node], [x, sizes], "resize"), PICTURE, np.array([8, 18], np.int64))[0]
    np.testing.assert_array_equal(got, PICTURE.repeat(2, axis=2).repeat(3, axis=3))


def test_interpolate_opset4_form_with_pads() -> None:
    got = _one(lambda x: _opset(10).interpolate(x, np.array([12, 4]), np.array([2.0, 0.5], F32), "linear",
                                                "scales", [0, 0, 1, 0], [0, 0, 1, 2], axes=np.array([2, 3])),
               PICTURE)
    padded = np.pad(PICTURE, [(0, 0), (0, 0), (1, 1), (0, 2)])
    np.testing.assert_allclose(got, _bilinear(padded, (12, 4), "half_pixel"), rtol=1e-5, atol=1e-5)


def test_interpolate_cubic_matches_onnx_resize(ort_reference: Any) -> None:
    got = _one(lambda x: ops.interpolate(x, np.array([7, 9]), "cubic", "sizes", cube_coeff=-0.5,
                                         axes=np.array([2, 3])), PICTURE)
    node = helper.make_node("Resize", ["x", "", "", "sizes"], ["y"], mode="cubic", cubic_coeff_a=-0.5,
                            coordinate_transformation_mode="half_pixel")
    model = _onnx_model(node, PICTURE, [numpy_helper.from_array(np.array([1, 2, 7, 9], np.int64), "sizes")])
    np.testing.assert_allclose(got, ort_reference(model, {"x": PICTURE})[0], rtol=1e-5, atol=1e-5)


def test_interpolate_opset1_form() -> None:
    options = {"axes": [2, 3], "mode": "nearest", "align_corners": False}
    nearest = _one(lambda x: opset8.interpolate(x, np.array([8, 12]), options), PICTURE, opset8)
    np.testing.assert_array_equal(nearest, PICTURE.repeat(2, axis=2).repeat(2, axis=3))
    corners = _one(lambda x: opset1.interpolate(x, np.array([7, 5]), {"axes": [2, 3], "mode": "linear"}),
                   PICTURE, opset1)
    np.testing.assert_allclose(corners, _bilinear(PICTURE, (7, 5), "align_corners"), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(("options", "accepted"), [
    ({"antialias": True}, "antialias=False"),
    ({"nearest_mode": "simple"}, "round_prefer_floor, round_prefer_ceil, floor, ceil"),
])
def test_interpolate_refuses_what_onnx_resize_cannot_do(options: dict[str, Any], accepted: str) -> None:
    arguments = {"mode": "nearest", **options}
    with pytest.raises(InputError, match=accepted):
        ops.interpolate(ops.parameter([1, 1, 4, 4], F32), np.array([8, 8]), arguments.pop("mode"), "sizes",
                        axes=np.array([2, 3]), **arguments)


@pytest.mark.parametrize("bounds", [["a"], [0.5]])
def test_integer_inputs_given_other_values_are_refused_by_name(bounds: list[Any]) -> None:
    with pytest.raises(InputError, match=r"an integer input .* give integers"):
        ops.slice(ops.parameter([2, 3], F32), bounds, [2], [1])


def test_integer_inputs_given_whole_floats_take_them_as_integers() -> None:
    data = np.arange(6, dtype=np.float32).reshape(2, 3)
    picked = _one(lambda x: ops.gather_nd(x, np.array([[1.0]])), data, ops)
    np.testing.assert_array_equal(picked, data[[1]])


# --- which module has what ---------------------------------------------------------------------------


def test_each_opset_module_offers_the_functions_of_its_opsets() -> None:
    assert "slice" in opset8.__all__ and "slice" not in opset1.__all__ and not hasattr(opset1, "slice")
    assert "scaled_dot_product_attention" in _opset(13).__all__
    assert not hasattr(opset8, "scaled_dot_product_attention") and not hasattr(opset8, "softsign")
    assert {"softsign", "is_nan"} <= set(_opset(10).__all__)
    for module in (opset1, _opset(5), opset8, _opset(13), _opset(15)):
        assert all(callable(getattr(module, name)) for name in module.__all__)
    named = _run(ov.Model([opset8.range(1, 10, 3, "r")], [], "range"))  # opset 8's range: name fourth
    np.testing.assert_array_equal(named[0], np.arange(1, 10, 3))
    assert _opset(5).range(1, 4, 1).get_output_element_type(0) == ov.Type.i64
    assert _opset(13).range(1, 4, 1, "f32").get_output_element_type(0) == ov.Type.f32
