"""OpenVINO's recurrent layers: LSTMSequence, GRUSequence, RNNSequence and the one-step cells
LSTMCell, GRUCell, RNNCell, each as one ONNX LSTM, GRU or RNN.

OpenVINO's sequences are batch-major (``X`` [batch, seq, input], states [batch, num_directions,
hidden], ``Y`` [batch, num_directions, seq, hidden]), ONNX's sequence-major: Transposes turn one
into the other.  OpenVINO's LSTM gates are ordered f, i, c, o, ONNX's i, o, f, c (GRU's z, r, h in
both); OpenVINO's bias ``B`` is the sum of ONNX's two (input and recurrent) biases, and GRU's
``linear_before_reset`` bias of the candidate's recurrent part is ONNX's ``Rb_h``.  Weights and
biases may be computed values: their gates are reordered with Split and Concat.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx_ir as ir

from inferplex._opsets.build import NodeInput, constant_data, make_op, step, value_of
from inferplex.api.nodes import Node
from inferplex.errors import InputError

__all__ = ["gru_cell", "gru_sequence", "lstm_cell", "lstm_sequence", "rnn_cell", "rnn_sequence"]

_ACTIVATIONS = {"sigmoid": "Sigmoid", "tanh": "Tanh", "relu": "Relu"}
_DEFAULTS = {"LSTM": ["sigmoid", "tanh", "tanh"], "GRU": ["sigmoid", "tanh"], "RNN": ["tanh"]}
_GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}
_LSTM_ORDER = (1, 3, 0, 2)
"""OpenVINO's gate blocks (f, i, c, o) taken in ONNX's order (i, o, f, c)."""
_DIRECTIONS = ("forward", "reverse", "bidirectional")


def lstm_sequence(X: NodeInput, initial_hidden_state: NodeInput, initial_cell_state: NodeInput,
                  sequence_lengths: NodeInput, W: NodeInput, R: NodeInput, B: NodeInput, hidden_size: int,
                  direction: str, activations: Sequence[str] | None = None,
                  activations_alpha: Sequence[float] | None = None,
                  activations_beta: Sequence[float] | None = None, clip: float = 0.0,
                  name: str | None = None) -> Node:
    """LSTM over a sequence: outputs ``Y`` [batch, num_directions, seq, hidden], the last hidden
    and cell states [batch, num_directions, hidden]; ``W`` [num_directions, 4 * hidden, input],
    ``R`` [num_directions, 4 * hidden, hidden], ``B`` [num_directions, 4 * hidden], gates f, i, c, o."""
    return _sequence("LSTMSequence", "LSTM", X, [initial_hidden_state, initial_cell_state], sequence_lengths,
                     (W, R, B), hidden_size, direction, (activations, activations_alpha, activations_beta),
                     clip, False, name)


def gru_sequence(X: NodeInput, initial_hidden_state: NodeInput, sequence_lengths: NodeInput, W: NodeInput,
                 R: NodeInput, B: NodeInput, hidden_size: int, direction: str,
                 activations: Sequence[str] | None = None, activations_alpha: Sequence[float] | None = None,
                 activations_beta: Sequence[float] | None = None, clip: float = 0.0,
                 linear_before_reset: bool = False, name: str | None = None) -> Node:
    """GRU over a sequence: outputs ``Y`` [batch, num_directions, seq, hidden] and the last hidden
    state; gates z, r, h; ``B`` [num_directions, 3 * hidden], or 4 * hidden with
    ``linear_before_reset`` (the last block the bias of the candidate's recurrent part)."""
    return _sequence("GRUSequence", "GRU", X, [initial_hidden_state], sequence_lengths, (W, R, B),
                     hidden_size, direction, (activations, activations_alpha, activations_beta), clip,
                     linear_before_reset, name)


def rnn_sequence(X: NodeInput, initial_hidden_state: NodeInput, sequence_lengths: NodeInput, W: NodeInput,
                 R: NodeInput, B: NodeInput, hidden_size: int, direction: str,
                 activations: Sequence[str] | None = None, activations_alpha: Sequence[float] | None = None,
                 activations_beta: Sequence[float] | None = None, clip: float = 0.0,
                 name: str | None = None) -> Node:
    """Plain RNN over a sequence: outputs ``Y`` [batch, num_directions, seq, hidden] and the last
    hidden state."""
    return _sequence("RNNSequence", "RNN", X, [initial_hidden_state], sequence_lengths, (W, R, B),
                     hidden_size, direction, (activations, activations_alpha, activations_beta), clip, False,
                     name)


def lstm_cell(X: NodeInput, initial_hidden_state: NodeInput, initial_cell_state: NodeInput, W: NodeInput,
              R: NodeInput, B: NodeInput, hidden_size: int, activations: Sequence[str] | None = None,
              activations_alpha: Sequence[float] | None = None,
              activations_beta: Sequence[float] | None = None, clip: float = 0.0,
              name: str | None = None) -> Node:
    """One LSTM step: outputs the hidden and cell states [batch, hidden]; ``X`` [batch, input],
    ``W`` [4 * hidden, input], ``R`` [4 * hidden, hidden], ``B`` [4 * hidden], gates f, i, c, o."""
    return _cell("LSTMCell", "LSTM", X, [initial_hidden_state, initial_cell_state], (W, R, B), hidden_size,
                 (activations, activations_alpha, activations_beta), clip, False, name)


def gru_cell(X: NodeInput, initial_hidden_state: NodeInput, W: NodeInput, R: NodeInput, B: NodeInput,
             hidden_size: int, activations: Sequence[str] | None = None,
             activations_alpha: Sequence[float] | None = None,
             activations_beta: Sequence[float] | None = None, clip: float = 0.0,
             linear_before_reset: bool = False, name: str | None = None) -> Node:
    """One GRU step: outputs the hidden state [batch, hidden]; gates z, r, h."""
    return _cell("GRUCell", "GRU", X, [initial_hidden_state], (W, R, B), hidden_size,
                 (activations, activations_alpha, activations_beta), clip, linear_before_reset, name)


def rnn_cell(X: NodeInput, initial_hidden_state: NodeInput, W: NodeInput, R: NodeInput, B: NodeInput,
             hidden_size: int, activations: Sequence[str], activations_alpha: Sequence[float],
             activations_beta: Sequence[float], clip: float = 0.0, name: str | None = None) -> Node:
    """One plain RNN step: outputs the hidden state [batch, hidden]."""
    return _cell("RNNCell", "RNN", X, [initial_hidden_state], (W, R, B), hidden_size,
                 (activations, activations_alpha, activations_beta), clip, False, name)


# --- shared ---------------------------------------------------------------------------------------


def _sequence(type_name: str, kind: str, data: NodeInput, states: list[NodeInput], lengths: NodeInput,
              weights: tuple[NodeInput, NodeInput, NodeInput], hidden_size: int, direction: str,
              functions: tuple[Any, Any, Any], clip: float, linear_before_reset: bool,
              name: str | None) -> Node:
    way = str(direction).lower()
    if way not in _DIRECTIONS:
        raise InputError(f"{type_name} direction {direction!r}; accepted: {', '.join(_DIRECTIONS)}")
    count = 2 if way == "bidirectional" else 1
    x = step("Transpose", [value_of(data)], {"perm": [1, 0, 2]})
    dtype = x.dtype
    hidden = [step("Transpose", [_typed(s, dtype)], {"perm": [1, 0, 2]}) for s in states]
    sizes = step("Cast", [value_of(lengths)], {"to": int(ir.DataType.INT32)})
    node = _onnx(type_name, kind, x, hidden, sizes, weights, hidden_size, way, count, functions, clip,
                 linear_before_reset, name)
    outputs = node._outputs  # noqa: SLF001 - same layer
    outputs[0] = step("Transpose", [outputs[0]], {"perm": [2, 1, 0, 3]})
    for index in range(1, len(outputs)):
        outputs[index] = step("Transpose", [outputs[index]], {"perm": [1, 0, 2]})
    return node


def _cell(type_name: str, kind: str, data: NodeInput, states: list[NodeInput],
          weights: tuple[NodeInput, NodeInput, NodeInput], hidden_size: int, functions: tuple[Any, Any, Any],
          clip: float, linear_before_reset: bool, name: str | None) -> Node:
    """A cell as a sequence of one step in one direction."""
    first = np.array([0], np.int64)
    x = step("Unsqueeze", [value_of(data), first])
    hidden = [step("Unsqueeze", [_typed(s, x.dtype), first]) for s in states]
    stacked = (_lift(weights[0], x.dtype), _lift(weights[1], x.dtype), _lift(weights[2], x.dtype))
    node = _onnx(type_name, kind, x, hidden, None, stacked, hidden_size, "forward", 1, functions, clip,
                 linear_before_reset, name)
    outputs = node._outputs  # noqa: SLF001 - same layer
    outputs[:] = [step("Squeeze", [value, first]) for value in outputs[1:]]
    return node


def _lift(item: NodeInput, dtype: ir.DataType | None) -> ir.Value:
    """A cell's weight or bias with the leading num_directions dim of 1."""
    data = constant_data(item)
    if data is not None:
        return _typed(np.asarray(data)[None], dtype)
    return step("Unsqueeze", [value_of(item), np.array([0], np.int64)])


def _typed(item: NodeInput, dtype: ir.DataType | None) -> ir.Value:
    """``item`` as a value; constants take ``dtype`` (the element type of ``X``)."""
    data = constant_data(item)
    if data is not None and dtype is not None:
        return value_of(np.asarray(data, dtype.numpy()))
    return value_of(item)


def _onnx(type_name: str, kind: str, x: ir.Value, hidden: list[ir.Value], sizes: ir.Value | None,
          weights: tuple[NodeInput, NodeInput, NodeInput], hidden_size: int, direction: str, count: int,
          functions: tuple[Any, Any, Any], clip: float, linear_before_reset: bool, name: str | None) -> Node:
    """The ONNX recurrent node (inputs sequence-major, weights in OpenVINO's layout and gate order);
    its outputs are ONNX's (``Y``, ``Y_h`` and for LSTM ``Y_c``)."""
    size = int(hidden_size)
    dtype = x.dtype
    w, r = (_gates(kind, _typed(item, dtype)) for item in weights[:2])
    bias = _bias(kind, _typed(weights[2], dtype), size, count, linear_before_reset, type_name)
    attrs: dict[str, Any] = {"hidden_size": size, "direction": direction,
                             "activations": _activations(type_name, kind, functions[0]) * count}
    if functions[1]:
        attrs["activation_alpha"] = [float(v) for v in functions[1]]
    if functions[2]:
        attrs["activation_beta"] = [float(v) for v in functions[2]]
    if clip:
        attrs["clip"] = float(clip)
    if kind == "GRU":
        attrs["linear_before_reset"] = int(bool(linear_before_reset))
    inputs = [x, w, r, bias, sizes, *hidden]
    return make_op(type_name, kind, inputs, attrs, name, num_outputs=3 if kind == "LSTM" else 2)


def _activations(type_name: str, kind: str, names: Sequence[str] | None) -> list[str]:
    chosen = list(names) if names else _DEFAULTS[kind]
    if len(chosen) != len(_DEFAULTS[kind]):
        raise InputError(f"{type_name} takes {len(_DEFAULTS[kind])} activation(s), got {chosen}")
    unknown = [n for n in chosen if str(n).lower() not in _ACTIVATIONS]
    if unknown:
        raise InputError(f"{type_name} activations {unknown}: accepted: {', '.join(_ACTIVATIONS)}")
    return [_ACTIVATIONS[str(n).lower()] for n in chosen]


def _gates(kind: str, value: ir.Value) -> ir.Value:
    """``value`` [num_directions, gates * hidden, ...] with its gate blocks in ONNX's order."""
    if kind != "LSTM":
        return value
    data = value.const_value.numpy() if value.const_value is not None else None
    if data is not None:
        blocks = np.split(data, 4, axis=1)
        return value_of(np.concatenate([blocks[i] for i in _LSTM_ORDER], axis=1))
    split = make_op("Split", "Split", [value], {"axis": 1}, None, num_outputs=4)
    parts = split._outputs  # noqa: SLF001 - same layer
    return step("Concat", [parts[i] for i in _LSTM_ORDER], {"axis": 1})


def _bias(kind: str, bias: ir.Value, size: int, count: int, linear_before_reset: bool,
          type_name: str) -> ir.Value:
    """ONNX's ``B`` [num_directions, 2 * gates * hidden] from OpenVINO's summed bias."""
    numpy_type = bias.dtype.numpy() if bias.dtype is not None else np.float32
    gates = _GATES[kind]
    if kind == "GRU" and linear_before_reset:  # [z, r, h, recurrent h] -> [z, r, h] and [0, 0, recurrent h]
        lengths = value_of(np.array([3 * size, size], np.int64))
        parts = make_op("Split", "Split", [bias, lengths], {"axis": 1}, None,
                        num_outputs=2)._outputs  # noqa: SLF001 - same layer
        zeros = value_of(np.zeros((count, 2 * size), numpy_type))
        return step("Concat", [parts[0], zeros, parts[1]], {"axis": 1})
    if bias.shape is not None and len(bias.shape) == 2 and bias.shape[1] not in (gates * size, None) \
            and isinstance(bias.shape[1], int):
        raise InputError(f"{type_name} B has {bias.shape[1]} values a direction; expected "
                         f"{gates} * hidden_size = {gates * size}")
    zeros = value_of(np.zeros((count, gates * size), numpy_type))
    return step("Concat", [_gates(kind, bias), zeros], {"axis": 1})
