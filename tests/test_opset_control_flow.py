"""OpenVINO's control flow ops built with ``inferplex.opset``: If, Loop and TensorIterator.

Each model is built as OpenVINO's Python API builds it (bodies are Models, inputs and outputs are
set on the op), run on CPU and checked against numpy; bad input is refused with an InputError.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
import pytest

import inferplex as ov
from inferplex import opset, opset1, opset8
from inferplex.errors import InputError

F32 = np.float32
RNG = np.random.default_rng(5)


def _run(model: ov.Model, *inputs: np.ndarray) -> list[np.ndarray]:
    onnx.checker.check_model(model.to_onnx(), full_check=True)
    return list(ov.Core().compile_model(model, "CPU")(list(inputs)).to_tuple())


def _if_model() -> tuple[ov.Model, Any]:
    """``x * 2 + y`` when the condition holds, else ``x - y`` and ``relu(x)``."""
    x = opset.parameter([2, 3], F32, name="x")
    y = opset.parameter([2, 3], F32, name="y")
    cond = opset.parameter([1], np.bool_, name="cond")
    tx, ty = opset.parameter([2, 3], F32, name="x"), opset.parameter([2, 3], F32, name="y")
    then_body = ov.Model([opset.result(opset.add(opset.multiply(tx, 2.0), ty)), opset.result(tx)], [tx, ty])
    ex, ey = opset.parameter([2, 3], F32, name="x"), opset.parameter([2, 3], F32, name="y")
    else_body = ov.Model([opset.result(opset.subtract(ex, ey)), opset.result(opset.relu(ex))], [ex, ey])
    node = opset8.if_op(cond)
    node.set_then_body(then_body)
    node.set_else_body(else_body)
    node.set_input(x.output(0), tx, ex)
    node.set_input(y.output(0), ty, ey)
    first = node.set_output(then_body.get_results()[0], else_body.get_results()[0])
    second = node.set_output(then_body.get_results()[1], else_body.get_results()[1])
    return ov.Model([first, second], [x, y, cond]), node


@pytest.mark.parametrize("flag", [True, False])
def test_if_runs_the_branch_the_condition_picks(flag: bool) -> None:
    model, node = _if_model()
    x, y = RNG.standard_normal((2, 3)).astype(F32), RNG.standard_normal((2, 3)).astype(F32)
    first, second = _run(model, x, y, np.array([flag]))
    np.testing.assert_allclose(first, x * 2 + y if flag else x - y, rtol=1e-6)
    np.testing.assert_allclose(second, x if flag else np.maximum(x, 0), rtol=1e-6)
    assert node.get_type_name() == "If" and node.get_output_size() == 2
    assert node.get_input_size() == 3 and node.get_then_body() is not None
    assert list(node.get_output_partial_shape(0)) == [2, 3]


def test_if_body_with_a_constant_and_a_branch_reading_nothing() -> None:
    x = opset.parameter([3], F32, name="x")
    cond = opset.parameter([], np.bool_, name="cond")
    tx = opset.parameter([3], F32, name="t")
    then_body = ov.Model([opset.result(opset.add(tx, np.array([1, 2, 3], F32)))], [tx])
    else_body = ov.Model([opset.result(opset.constant(np.full(3, 7, F32)))], [])
    node = opset.if_op(cond)
    node.set_then_body(then_body)
    node.set_else_body(else_body)
    node.set_input(x, tx, None)
    out = node.set_output(then_body.get_results()[0], else_body.get_results()[0])
    model = ov.Model([opset.relu(out)], [x, cond])
    data = np.array([-5, 0, 2], F32)
    expected = np.maximum(data + np.array([1, 2, 3], F32), 0)
    np.testing.assert_allclose(_run(model, data, np.array(True))[0], expected)
    np.testing.assert_allclose(_run(model, data, np.array(False))[0], np.full(3, 7, F32))


def test_if_refuses_bad_input() -> None:
    with pytest.raises(InputError, match="must be boolean"):
        opset.if_op(opset.parameter([], F32))
    node = opset.if_op(opset.parameter([], np.bool_))
    with pytest.raises(InputError, match="needs both bodies"):
        node.set_output(None, None)
    p = opset.parameter([2], F32)
    body = ov.Model([opset.result(opset.relu(p))], [p])
    node.set_then_body(body)
    with pytest.raises(InputError, match="must be a Model"):
        node.set_else_body("body")
    node.set_else_body(body)
    with pytest.raises(InputError, match="is not a Parameter of the then body"):
        node.set_input(p, opset.parameter([2], F32, name="stranger"), p)
    with pytest.raises(InputError, match="is not a Result of the else body"):
        node.set_output(body.get_results()[0], opset.result(opset.relu(opset.parameter([2], F32))))


def _loop_model(trip: int) -> ov.Model:
    """Sum of ``x * (i + 1)`` over the iterations, plus every iteration's ``acc`` stacked."""
    x = opset.parameter([2], F32, name="x")
    init = opset.parameter([2], F32, name="init")
    b_iter = opset.parameter([1], np.int64, name="i")
    b_x = opset.parameter([2], F32, name="bx")
    b_acc = opset.parameter([2], F32, name="acc")
    factor = opset.convert(opset.add(b_iter, np.array([1], np.int64)), "f32")
    new_acc = opset.add(b_acc, opset.multiply(b_x, factor))
    keep_going = opset.constant(np.array([True]))
    acc_result = opset.result(new_acc)
    stacked = opset.result(opset.unsqueeze(new_acc, np.array([0], np.int64)))
    body = ov.Model([opset.result(keep_going), acc_result, stacked], [b_iter, b_x, b_acc])
    node = opset.loop(opset.constant(np.int64(trip)), opset.constant(np.array(True)))
    node.set_function(body)
    node.set_special_body_ports([0, 0])
    node.set_invariant_input(b_x, x.output(0))
    node.set_merged_input(b_acc, init.output(0), acc_result.output(0))
    total = node.get_iter_value(acc_result.output(0), -1)
    history = node.get_concatenated_slices(stacked.output(0), 0, 1, 1, -1, 0)
    return ov.Model([total, history], [x, init])


def test_loop_accumulates_over_the_trip_count() -> None:
    x, init = np.array([1.0, -2.0], F32), np.array([0.5, 0.5], F32)
    total, history = _run(_loop_model(4), x, init)
    steps = [init + x * sum(range(1, k + 2)) for k in range(4)]
    np.testing.assert_allclose(total, steps[-1], rtol=1e-6)
    np.testing.assert_allclose(history, np.stack(steps), rtol=1e-6)


def test_loop_stops_when_the_body_condition_fails() -> None:
    """Doubling while the value is under 100, with no trip count (-1)."""
    start = opset.parameter([], F32, name="start")
    b_v = opset.parameter([], F32, name="v")
    doubled = opset.multiply(b_v, 2.0)
    cond = opset.result(opset.less(doubled, np.float32(100)))
    value = opset.result(doubled)
    body = ov.Model([value, cond], [b_v])
    node = opset1.loop(np.int64(-1), np.array([True]))
    node.set_function(body)
    node.set_special_body_ports([-1, 1])
    node.set_merged_input(b_v, start, value)
    model = ov.Model([node.get_iter_value(value)], [start])
    assert _run(model, np.array(3, F32))[0] == 192


@pytest.mark.parametrize("stride", [1, -1])
def test_tensor_iterator_over_sliced_input(stride: int) -> None:
    """A running sum along axis 1, forward or reversed, with each step's state concatenated."""
    x = opset.parameter([2, 5, 3], F32, name="x")
    h0 = opset.parameter([2, 3], F32, name="h0")
    b_x = opset.parameter([2, 1, 3], F32, name="bx")
    b_h = opset.parameter([2, 3], F32, name="bh")
    new_h = opset.add(b_h, opset.squeeze(b_x, np.array([1], np.int64)))
    h_result = opset.result(new_h)
    out_result = opset.result(opset.unsqueeze(new_h, np.array([1], np.int64)))
    body = ov.Model([h_result, out_result], [b_x, b_h])
    node = opset.tensor_iterator()
    node.set_body(body)
    start, end = (0, -1) if stride > 0 else (-1, 0)
    node.set_sliced_input(b_x, x.output(0), start, stride, 1, end, 1)
    node.set_merged_input(b_h, h0.output(0), h_result.output(0))
    last = node.get_iter_value(h_result.output(0), -1)
    every = node.get_concatenated_slices(out_result.output(0), start, stride, 1, end, 1)
    assert node.get_num_iterations() == 5
    data, state = RNG.standard_normal((2, 5, 3)).astype(F32), RNG.standard_normal((2, 3)).astype(F32)
    got_last, got_every = _run(ov.Model([last, every], [x, h0]), data, state)
    walk = data if stride > 0 else data[:, ::-1]
    sums = state[:, None, :] + np.cumsum(walk, axis=1)
    np.testing.assert_allclose(got_last, sums[:, -1], rtol=1e-5)
    np.testing.assert_allclose(got_every, sums if stride > 0 else sums[:, ::-1], rtol=1e-5)
    assert list(node.get_output_partial_shape(1)) == [2, 5, 3]


def test_loops_refuse_bad_input() -> None:
    with pytest.raises(InputError, match="must be boolean"):
        opset.loop(np.int64(3), np.float32(1))
    node = opset.tensor_iterator()
    with pytest.raises(InputError, match="needs the body"):
        node.set_invariant_input(opset.parameter([1], F32), np.ones(1, F32))
    p, q = opset.parameter([2], F32, name="p"), opset.parameter([2], F32, name="q")
    result = opset.result(opset.add(p, q))
    node.set_function(ov.Model([result], [p, q]))
    with pytest.raises(InputError, match="on a Loop"):
        node.set_special_body_ports([-1, 0])
    with pytest.raises(InputError, match="nonzero stride"):
        node.set_sliced_input(p, np.ones((4, 2), F32), 0, 0, 1, -1, 0)
    node.set_invariant_input(p, np.ones(2, F32))
    with pytest.raises(InputError, match=r"'q'.*no input"):
        node.get_iter_value(result)
    with pytest.raises(InputError, match="last iteration"):
        node.get_iter_value(result, 2)
    assert "if_op" not in dir(opset1) and "loop" in dir(opset1) and "if_op" in dir(opset8)
