"""OpenVINO's RandomUniform (opset 8), GatherTree and CTCLoss as ONNX ops.

RandomUniform draws with ONNX's RandomUniformLike (seeded from ``global_seed`` and ``op_seed`` when
either is set): the values are uniform over [min_val, max_val) of the shape and type asked, but not
OpenVINO's numbers (its Philox stream, TensorFlow's or PyTorch's alignment, is not ONNX's).  Integer
types take ``floor`` of a uniform float, so every integer of [min_val, max_val) may come.

GatherTree walks a beam search's parents back from each beam's last step, unrolled over the
(static) number of steps: each step one GatherElements of the ids and one of the parents.  CTCLoss
runs the forward algorithm over the labels with blanks between them, in logs, unrolled over the
(static) steps too.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx_ir as ir

from inferplex._opsets.build import (
    NodeInput,
    constant_data,
    dim_at,
    int64,
    make_op,
    settle_shape,
    static_dims,
    step,
    value_of,
)
from inferplex._opsets.build import ints as _ints
from inferplex.api.nodes import Node, to_ir_dtype
from inferplex.api.types import type_name
from inferplex.errors import InputError

__all__ = ["ctc_loss", "gather_tree", "random_uniform"]

_FLOAT = int(ir.DataType.FLOAT)
_OUTPUT_TYPES = ("f16", "bf16", "f32", "f64", "i32", "i64")
_ALIGNMENTS = ("tensorflow", "pytorch")


def random_uniform(output_shape: NodeInput, min_val: NodeInput, max_val: NodeInput, output_type: str,
                   global_seed: int = 0, op_seed: int = 0, alignment: str = "tensorflow",
                   name: str | None = None) -> Node:
    """Uniform random numbers of ``output_type`` and shape ``output_shape`` in [``min_val``,
    ``max_val``); not OpenVINO's values for the same seeds (its random stream is not ONNX's)."""
    kind = type_name(output_type).lower()
    if kind not in _OUTPUT_TYPES:
        raise InputError(f"random_uniform output_type {output_type!r}; accepted: {', '.join(_OUTPUT_TYPES)}")
    if str(alignment).lower() not in _ALIGNMENTS:
        raise InputError(f"random_uniform alignment {alignment!r}; accepted: {', '.join(_ALIGNMENTS)}")
    low, high = (constant_data(v) for v in (min_val, max_val))
    if low is not None and high is not None and np.any(np.asarray(low) >= np.asarray(high)):
        raise InputError(f"random_uniform needs min_val < max_val, got {np.asarray(low).tolist()} and "
                         f"{np.asarray(high).tolist()}")
    zeros = step("ConstantOfShape", [int64(output_shape)])  # f32 zeros
    attrs: dict[str, Any] = {"low": 0.0, "high": 1.0, "dtype": _FLOAT}
    if global_seed or op_seed:
        attrs["seed"] = float((int(global_seed) * 2654435761 + int(op_seed)) % (1 << 24))
    unit = step("RandomUniformLike", [zeros], attrs)
    low_f, high_f = (step("Cast", [value_of(v)], {"to": _FLOAT}) for v in (min_val, max_val))
    drawn = step("Add", [low_f, step("Mul", [unit, step("Sub", [high_f, low_f])])])
    target = to_ir_dtype(kind)
    if kind in ("i32", "i64"):
        drawn = step("Min", [step("Floor", [drawn]), step("Sub", [high_f, value_of(np.float32(1))])])
    return make_op("RandomUniform", "Cast", [drawn], {"to": int(target)}, name)


def gather_tree(step_ids: NodeInput, parent_idx: NodeInput, max_seq_len: NodeInput, end_token: NodeInput,
                name: str | None = None) -> Node:
    """The full beams of a beam search: ``step_ids`` and ``parent_idx`` [T, batch, beams] traced back
    from each beam's step ``min(T, max_seq_len[b]) - 1``; ``end_token`` after a sequence's length
    and after its first end token."""
    ids = value_of(step_ids)
    time, _, beams = static_dims(ids, "gather_tree step_ids")
    dtype = ids.dtype or ir.DataType.FLOAT
    parents = int64(parent_idx)
    lengths = step("Unsqueeze", [int64(max_seq_len), _ints([1])])  # [batch, 1]
    end = step("Cast", [step("Reshape", [value_of(end_token, dtype), _ints([])])], {"to": int(dtype)})
    pointer = step("Expand", [_ints(np.arange(beams)[None, :]), step("Shape", [ids], {"start": 1})])
    levels: list[ir.Value] = [end] * time
    for level in reversed(range(time)):
        active = step("Less", [_ints(level), lengths])
        at = _ints([level])
        ids_now = step("Squeeze", [step("Slice", [ids, at, _ints([level + 1]), _ints([0])]), _ints([0])])
        parents_now = step("Squeeze", [step("Slice", [parents, at, _ints([level + 1]), _ints([0])]),
                                       _ints([0])])
        levels[level] = step("Where", [active, step("GatherElements", [ids_now, pointer], {"axis": 1}), end])
        traced_parent = step("GatherElements", [parents_now, pointer], {"axis": 1})
        pointer = step("Where", [active, traced_parent, pointer])
    traced = step("Concat", [step("Unsqueeze", [v, _ints([0])]) for v in levels], {"axis": 0})
    ended = step("Cast", [step("Equal", [traced, end])], {"to": int(ir.DataType.INT64)})
    finished = step("Greater", [step("CumSum", [ended, _ints(0)], {"exclusive": 1}), _ints(0)])
    built = make_op("GatherTree", "Where", [finished, end, traced], {}, name)
    return settle_shape(built, 0, [dim_at(ids, i) for i in range(3)])


_NEG = -1e30
"""The log of an impossible path (finite, so that sums of logs stay numbers)."""


def ctc_loss(logits: NodeInput, logit_length: NodeInput, labels: NodeInput, label_length: NodeInput,
             blank_index: NodeInput = None, preprocess_collapse_repeated: bool = False,
             ctc_merge_repeated: bool = True, unique: bool = False, name: str | None = None) -> Node:
    """The CTC loss [batch]: minus the log probability of ``labels`` [batch, T] (their first
    ``label_length``) under ``logits`` [batch, T, classes] (softmax over the classes, the first
    ``logit_length`` steps), by the forward algorithm unrolled over the (static) T steps;
    ``blank_index`` the blank class (the last by default).  With ``preprocess_collapse_repeated``
    repeated labels count once, with ``unique`` only each label's first occurrence is kept, and
    without ``ctc_merge_repeated`` a path's repeated classes are not merged."""
    scores = value_of(logits)
    batch, time, _ = static_dims(scores, "ctc_loss logits")
    dtype = scores.dtype or ir.DataType.FLOAT
    logp = step("LogSoftmax", [step("Cast", [scores], {"to": _FLOAT})], {"axis": 2})
    targets, lengths = int64(labels), step("Reshape", [int64(label_length), _ints([-1])])
    if blank_index is None:
        blank = step("Sub", [step("Shape", [scores], {"start": 2}), _ints([1])])
    else:
        blank = step("Reshape", [int64(blank_index), _ints([1])])
    positions = _ints(np.arange(time)[None, :])
    inside = step("Less", [positions, step("Unsqueeze", [lengths, _ints([1])])])
    if preprocess_collapse_repeated:
        before = step("Concat", [_ints(np.full((batch, 1), -1)), _slice(targets, 0, time - 1, 1)],
                      {"axis": 1})
        targets, lengths, inside = _compact(targets, step("And", [inside, step("Not", [step(
            "Equal", [targets, before])])]), time)
    if unique:
        earlier = _ints(np.tril(np.ones((time, time), bool), -1).astype(np.int64))  # [i, j]: j before i
        same = step("Equal", [step("Unsqueeze", [targets, _ints([2])]),
                              step("Unsqueeze", [targets, _ints([1])])])
        both = step("And", [same, step("Unsqueeze", [inside, _ints([1])])])
        pairs = step("Mul", [step("Cast", [both], {"to": int(ir.DataType.INT64)}), earlier])
        seen = step("ReduceMax", [pairs],
                    {"axes": [2], "keepdims": 0})
        targets, lengths, inside = _compact(targets, step("And", [inside, step("Equal", [seen, _ints(0)])]),
                                            time)
    states = 2 * time + 1
    odd = np.arange(states) % 2 == 1
    spread = step("Gather", [targets, _ints(np.maximum(np.arange(states) - 1, 0) // 2)], {"axis": 1})
    extended = step("Where", [value_of(odd[None, :]), spread, blank])  # [batch, states]
    two_back = step("Concat", [_ints(np.full((batch, 2), -1)), _slice(extended, 0, states - 2, 1)],
                    {"axis": 1})
    skip = value_of(odd[None, :]) if not ctc_merge_repeated else step(
        "And", [value_of(odd[None, :]), step("Not", [step("Equal", [extended, two_back])])])
    stay = value_of(~odd[None, :]) if not ctc_merge_repeated else value_of(np.ones((1, states), bool))
    neg = value_of(np.full((batch, 1), _NEG, np.float32))
    steps_in = step("Reshape", [int64(logit_length), _ints([-1, 1])])
    alpha = value_of(np.where(np.arange(states) < 2, 0.0, _NEG).astype(np.float32)[None, :])
    for t in range(time):
        emit = step("GatherElements", [step("Squeeze", [_slice(logp, t, t + 1, 1), _ints([1])]), extended],
                    {"axis": 1})
        if t == 0:
            new = step("Add", [alpha, emit])
        else:
            kept = step("Where", [stay, alpha, _f(_NEG)])
            one = step("Concat", [neg, _slice(alpha, 0, states - 1, 1)], {"axis": 1})
            shifted = step("Concat", [neg, neg, _slice(alpha, 0, states - 2, 1)], {"axis": 1})
            two = step("Where", [skip, shifted, _f(_NEG)])
            new = step("Add", [_logsumexp([kept, one, two]), emit])
        alpha = step("Where", [step("Less", [_ints(t), steps_in]), new, alpha]) if t else new
    last = step("Unsqueeze", [step("Mul", [lengths, _ints(2)]), _ints([1])])
    ends = step("Concat", [last, step("Max", [step("Sub", [last, _ints(1)]), _ints(0)])], {"axis": 1})
    final = step("GatherElements", [alpha, ends], {"axis": 1})
    one_end = step("Equal", [last, _ints(0)])  # no labels: only the all-blank path
    final = step("Where", [step("Concat", [step("Equal", [last, last]), step("Not", [one_end])], {"axis": 1}),
                           final, _f(_NEG)])
    loss = step("Neg", [_logsumexp([step("Slice", [final, _ints([0]), _ints([1]), _ints([1])]),
                                    step("Slice", [final, _ints([1]), _ints([2]), _ints([1])])])])
    loss = step("Where", [step("Greater", [loss, _f(1e29)]), _f(np.inf), loss])  # no path: infinite loss
    return make_op("CTCLoss", "Cast", [step("Squeeze", [loss, _ints([1])])], {"to": int(dtype)}, name)


def _f(number: float) -> ir.Value:
    return value_of(np.asarray(number, np.float32))


def _slice(value: ir.Value, begin: int, end: int, axis: int) -> ir.Value:
    return step("Slice", [value, _ints([begin]), _ints([end]), _ints([axis])])


def _logsumexp(parts: list[ir.Value]) -> ir.Value:
    top = step("Max", parts)
    total = step("Sum", [step("Exp", [step("Sub", [p, top])]) for p in parts])
    return step("Add", [top, step("Log", [total])])


def _compact(targets: ir.Value, keep: ir.Value, time: int) -> tuple[ir.Value, ir.Value, ir.Value]:
    """The labels where ``keep`` moved to the front (-1 after), their count and where they are."""
    kept = step("Cast", [keep], {"to": int(ir.DataType.INT64)})
    place = step("Where", [keep, step("CumSum", [kept, _ints(1)], {"exclusive": 1}), _ints(time)])
    spare = step("Expand", [_ints([[-1]]), step("Add", [step("Shape", [targets]), _ints([0, 1])])])
    moved = _slice(step("ScatterElements", [spare, place, targets], {"axis": 1}), 0, time, 1)
    lengths = step("ReduceSum", [kept, _ints([1])], {"keepdims": 0})
    inside = step("Less", [_ints(np.arange(time)[None, :]), step("Unsqueeze", [lengths, _ints([1])])])
    return moved, lengths, inside
