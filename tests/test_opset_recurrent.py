"""OpenVINO's recurrent layers built with ``inferplex.opset``: LSTM, GRU and RNN sequences and cells.

The reference is numpy computing OpenVINO's op specifications step by step: batch-major data
([batch, num_directions, seq, hidden]), LSTM gates f, i, c, o, GRU gates z, r, h, one summed bias
(GRU's ``linear_before_reset`` adding the candidate's recurrent bias), ``clip`` bounding the gates
before their activations, each sequence running over its ``sequence_lengths`` steps (zeros after).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import inferplex as ov
from inferplex import opset, opset1, opset8
from inferplex.errors import InputError

RNG = np.random.default_rng(5)
F32 = np.float32
BATCH, STEPS, INPUT, HIDDEN = 3, 5, 4, 6
LENGTHS = np.array([5, 2, 3], np.int32)

_FUNCTIONS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "sigmoid": lambda v: 1 / (1 + np.exp(-v)), "tanh": np.tanh, "relu": lambda v: np.maximum(v, 0)}
_GATES = {"lstm": 4, "gru": 3, "rnn": 1}


def _random(*shape: int) -> np.ndarray:
    return (RNG.standard_normal(shape) * 0.5).astype(F32)


def _step(kind: str, x: np.ndarray, state: tuple[np.ndarray, ...], weights: tuple[np.ndarray, ...],
          activations: list[str], clip: float, linear_before_reset: bool) -> tuple[np.ndarray, ...]:
    """One step of OpenVINO's cell ``kind`` for one direction (weights without the direction dim)."""
    w, r, b = weights
    f, g, *rest = [_FUNCTIONS[a] for a in activations] + [None]

    def bound(v: np.ndarray) -> np.ndarray:
        return np.clip(v, -clip, clip) if clip else v

    h = state[0]
    if kind == "rnn":
        return (f(bound(x @ w.T + h @ r.T + b)),)
    if kind == "lstm":
        gates = np.split(bound(x @ w.T + h @ r.T + b), 4, axis=-1)
        forget, inp, cand, out = f(gates[0]), f(gates[1]), g(gates[2]), f(gates[3])
        cell = forget * state[1] + inp * cand
        return out * rest[0](cell), cell
    wz, wr, wh = np.split(w, 3)
    rz, rr, rh = np.split(r, 3)
    bz, br, bh = b[:HIDDEN], b[HIDDEN:2 * HIDDEN], b[2 * HIDDEN:3 * HIDDEN]
    z = f(bound(x @ wz.T + h @ rz.T + bz))
    reset = f(bound(x @ wr.T + h @ rr.T + br))
    if linear_before_reset:
        cand = g(bound(x @ wh.T + reset * (h @ rh.T + b[3 * HIDDEN:]) + bh))
    else:
        cand = g(bound(x @ wh.T + (reset * h) @ rh.T + bh))
    return ((1 - z) * cand + z * h,)


def _sequence(kind: str, x: np.ndarray, states: list[np.ndarray], weights: tuple[np.ndarray, ...],
              direction: str, activations: list[str], clip: float = 0.0,
              linear_before_reset: bool = False) -> list[np.ndarray]:
    """OpenVINO's *Sequence: Y [batch, dirs, seq, hidden] and the last states [batch, dirs, hidden]."""
    dirs = 2 if direction == "bidirectional" else 1
    y = np.zeros((BATCH, dirs, STEPS, HIDDEN), F32)
    last = [np.zeros_like(s) for s in states]
    for b in range(BATCH):
        for d in range(dirs):
            state = tuple(s[b, d] for s in states)
            backwards = direction == "reverse" or d == 1
            for t in (reversed(range(LENGTHS[b])) if backwards else range(LENGTHS[b])):
                state = _step(kind, x[b, t], state, tuple(w[d] for w in weights), activations, clip,
                              linear_before_reset)
                y[b, d, t] = state[0]
            for index, value in enumerate(state):
                last[index][b, d] = value
    return [y, *last]


def _run(outputs: list[Any], params: list[Any], feeds: list[np.ndarray],
         device: str = "CPU") -> list[np.ndarray]:
    model = ov.Model(outputs, params, "recurrent")
    return list(ov.Core().compile_model(model, device)(feeds).to_tuple())


def _weights(kind: str, dirs: int, linear_before_reset: bool = False) -> tuple[np.ndarray, ...]:
    gates = _GATES[kind]
    bias = gates + (1 if linear_before_reset else 0)
    return (_random(dirs, gates * HIDDEN, INPUT), _random(dirs, gates * HIDDEN, HIDDEN),
            _random(dirs, bias * HIDDEN))


def _check(got: list[np.ndarray], expected: list[np.ndarray]) -> None:
    assert len(got) == len(expected)
    for value, reference in zip(got, expected, strict=True):
        assert value.shape == reference.shape
        np.testing.assert_allclose(value, reference, rtol=1e-4, atol=1e-5)


DIRECTIONS = ["forward", "reverse", "bidirectional"]


@pytest.mark.parametrize("direction", DIRECTIONS)
@pytest.mark.parametrize("computed", [False, True], ids=["constant", "computed"])
def test_lstm_sequence(direction: str, computed: bool) -> None:
    dirs = 2 if direction == "bidirectional" else 1
    x, h0, c0 = _random(BATCH, STEPS, INPUT), _random(BATCH, dirs, HIDDEN), _random(BATCH, dirs, HIDDEN)
    weights = _weights("lstm", dirs)
    data = opset.parameter(list(x.shape), F32, name="x")
    params, feeds, given = [data], [x], list(weights)
    if computed:  # the weights and bias as model inputs
        given = [opset.parameter(list(w.shape), F32, name=f"w{i}") for i, w in enumerate(weights)]
        params, feeds = [data, *given], [x, *weights]
    activations = ["sigmoid", "tanh", "tanh"] if not computed else ["sigmoid", "relu", "tanh"]
    node = opset.lstm_sequence(data, h0, c0, LENGTHS, *given, HIDDEN, direction, activations, clip=0.0 if
                               computed else 0.8)
    assert node.get_type_name() == "LSTMSequence" and node.get_output_size() == 3
    got = _run([node.output(i) for i in range(3)], params, feeds)
    _check(got, _sequence("lstm", x, [h0, c0], weights, direction, activations, 0.0 if computed else 0.8))


@pytest.mark.parametrize("direction", DIRECTIONS)
@pytest.mark.parametrize("linear_before_reset", [False, True])
def test_gru_sequence(direction: str, linear_before_reset: bool) -> None:
    dirs = 2 if direction == "bidirectional" else 1
    x, h0 = _random(BATCH, STEPS, INPUT), _random(BATCH, dirs, HIDDEN)
    w, r, b = _weights("gru", dirs, linear_before_reset)
    data, bias = opset.parameter(list(x.shape), F32), opset.parameter(list(b.shape), F32)
    node = opset.gru_sequence(data, h0, LENGTHS, w, r, bias, HIDDEN, direction,
                              linear_before_reset=linear_before_reset)
    got = _run([node.output(0), node.output(1)], [data, bias], [x, b])
    expected = _sequence("gru", x, [h0], (w, r, b), direction, ["sigmoid", "tanh"], 0.0, linear_before_reset)
    _check(got, expected)


@pytest.mark.parametrize("direction", DIRECTIONS)
def test_rnn_sequence(direction: str) -> None:
    dirs = 2 if direction == "bidirectional" else 1
    x, h0 = _random(BATCH, STEPS, INPUT), _random(BATCH, dirs, HIDDEN)
    weights = _weights("rnn", dirs)
    data = opset.parameter(list(x.shape), F32)
    node = opset.rnn_sequence(data, h0, LENGTHS, *weights, HIDDEN, direction, ["relu"], clip=1.5)
    got = _run([node.output(0), node.output(1)], [data], [x])
    _check(got, _sequence("rnn", x, [h0], weights, direction, ["relu"], 1.5))


def _cell_reference(kind: str, x: np.ndarray, states: list[np.ndarray], weights: tuple[np.ndarray, ...],
                    activations: list[str], linear_before_reset: bool = False) -> list[np.ndarray]:
    return list(_step(kind, x, tuple(states), weights, activations, 0.0, linear_before_reset))


def test_cells() -> None:
    x, h, c = _random(BATCH, INPUT), _random(BATCH, HIDDEN), _random(BATCH, HIDDEN)
    data = opset.parameter(list(x.shape), F32)
    lstm = tuple(w[0] for w in _weights("lstm", 1))
    weight = opset.parameter(list(lstm[0].shape), F32)
    for module in (opset1, opset):  # LSTMCell-1 and -4 take the same arguments
        node = module.lstm_cell(data, h, c, weight, *lstm[1:], HIDDEN)
        _check(_run([node.output(0), node.output(1)], [data, weight], [x, lstm[0]]),
               _cell_reference("lstm", x, [h, c], lstm, ["sigmoid", "tanh", "tanh"]))
    for linear_before_reset in (False, True):
        gru = tuple(w[0] for w in _weights("gru", 1, linear_before_reset))
        node = opset.gru_cell(data, h, *gru, HIDDEN, linear_before_reset=linear_before_reset)
        _check(_run([node], [data], [x]),
               _cell_reference("gru", x, [h], gru, ["sigmoid", "tanh"], linear_before_reset))
    rnn = tuple(w[0] for w in _weights("rnn", 1))
    node = opset.rnn_cell(data, h, *rnn, HIDDEN, ["tanh"], [], [])
    assert node.get_type_name() == "RNNCell"
    _check(_run([node], [data], [x]), _cell_reference("rnn", x, [h], rnn, ["tanh"]))


def test_bidirectional_lstm_with_computed_weights_on_the_emulated_gpu(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("INFERPLEX_EMULATED_GPUS", "1")
    x, h0, c0 = _random(BATCH, STEPS, INPUT), _random(BATCH, 2, HIDDEN), _random(BATCH, 2, HIDDEN)
    w, r, b = _weights("lstm", 2)
    data, weight = opset.parameter(list(x.shape), F32), opset.parameter(list(w.shape), F32)
    node = opset.lstm_sequence(data, h0, c0, LENGTHS, weight, r, b, HIDDEN, "bidirectional")
    got = _run([node.output(i) for i in range(3)], [data, weight], [x, w], "GPU.0")
    _check(got, _sequence("lstm", x, [h0, c0], (w, r, b), "bidirectional", ["sigmoid", "tanh", "tanh"]))


def test_bad_arguments_are_named() -> None:
    x = opset.parameter([BATCH, STEPS, INPUT], F32)
    h0 = np.zeros((BATCH, 1, HIDDEN), F32)
    w, r, b = _weights("rnn", 1)
    with pytest.raises(InputError, match="forward, reverse, bidirectional"):
        opset.rnn_sequence(x, h0, LENGTHS, w, r, b, HIDDEN, "sideways")
    with pytest.raises(InputError, match="accepted: sigmoid, tanh, relu"):
        opset.rnn_sequence(x, h0, LENGTHS, w, r, b, HIDDEN, "forward", ["elu"])
    with pytest.raises(InputError, match="takes 1 activation"):
        opset.rnn_sequence(x, h0, LENGTHS, w, r, b, HIDDEN, "forward", ["tanh", "tanh"])


def test_each_opset_module_has_the_recurrent_functions() -> None:
    names = {"lstm_sequence", "gru_sequence", "rnn_sequence", "lstm_cell", "gru_cell", "rnn_cell"}
    for module in (opset1, opset8, opset):
        assert names <= set(module.__all__)
