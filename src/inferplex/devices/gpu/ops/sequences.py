"""Lowerings of ONNX's sequence and optional ops.

On the torch side an ONNX sequence is a Python ``list`` of tensors and an
optional is its value or ``None``; a node with several outputs returns a
``tuple``, so a list is always one value.  ONNX sequences are immutable: every
op here returns a new list and never changes the one it was given.

A position (SequenceAt, SequenceInsert, SequenceErase) or split (SplitToSequence)
given as a constant becomes a Python int at lowering time; one computed at run
time is read on the host, so that lowering is marked ``data_dependent`` (see
``_common.eager``) and its program runs outside CUDA graphs.  Lengths of lists
built inside a program depend only on the graph and its input shapes, so such a
program stays capturable; a model whose inputs or outputs are sequences or
optionals never is (the lowering's ``capturable``), since a list's length is not
part of an input signature.

Ops whose result is a new tensor that no input gives a device to (SequenceLength
of an empty sequence, OptionalHasElement of an absent value) are marked with
:func:`takes_device`: the program builder passes its device as ``device=``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import onnx_ir as ir
import torch

from inferplex.devices.gpu.ops._common import (
    EXACT_DTYPES,
    VALUE_KINDS,
    attrs_reason,
    dtype_reason,
    eager,
    first_reason,
    normalize_axis,
    takes_device,
    value_kind,
)
from inferplex.devices.gpu.ops.control_flow import bodies_reason, lower_bodies, outer_values
from inferplex.devices.gpu.ops.types import CAST_HELD
from inferplex.devices.gpu.registry import NodeInfo, register
from inferplex.errors import InferenceError

_POSITION_DTYPES = frozenset({ir.DataType.INT32, ir.DataType.INT64})


def _device_of(values: Sequence[Any], device: torch.device | None) -> torch.device:
    """``device`` when the builder gave one, else that of the first tensor among ``values``."""
    if device is not None:
        return device
    for value in values:
        if isinstance(value, torch.Tensor):
            return value.device
        if isinstance(value, list) and value:
            return value[0].device
    return torch.device("cpu")


# --- checks ---------------------------------------------------------------------------------


def _input_kind(info: NodeInfo, index: int) -> str | None:
    """The kind of input ``index``; None when it is absent or its type unknown (a subgraph's
    value that shape inference did not type: ONNX's type rules make it what the op takes)."""
    value = info.node.inputs[index] if info.has_input(index) else None
    return None if value is None or value.type is None else value_kind(value.type)


def _kind_reason(info: NodeInfo, index: int, accepted: Sequence[str]) -> str | None:
    kind = _input_kind(info, index)
    if kind is None or kind in accepted:
        return None
    return f"input {index} is a {kind}; {info.op_type} takes a {' or '.join(accepted)}"


def _position_reason(info: NodeInfo, index: int) -> str | None:
    if not info.has_input(index):
        return None
    dtype = info.input_dtypes[index]
    if dtype is not None and dtype not in _POSITION_DTYPES:
        return f"position of element type {dtype.name} is not int32 or int64"
    return _kind_reason(info, index, ("tensor",))


def _sequence_op(*checks: Callable[[NodeInfo], str | None],
                 attrs: tuple[str, ...] = ()) -> Callable[[NodeInfo], str | None]:
    """A support check: known attributes, input 0 a sequence, then ``checks``."""

    def supports(info: NodeInfo) -> str | None:
        return first_reason(attrs_reason(info, attrs), _kind_reason(info, 0, ("sequence",)),
                            *(check(info) for check in checks))

    return supports


# --- positions ----------------------------------------------------------------------------


def _at(position: int, length: int, op: str, insert: bool = False) -> int:
    """``position`` counted from the start; ONNX accepts [-n, n-1] ([-n, n] for an insert)."""
    top = length if insert else length - 1
    if not -length <= position <= top:
        raise InferenceError(f"{op}: position {position} is outside [{-length}, {top}] for a "
                             f"sequence of {length} tensor(s)")
    return position + length if position < 0 else position


def _with_position(info: NodeInfo, index: int,
                   build: Callable[[int | None], Callable[..., Any]]) -> Callable[..., Any]:
    """The forward of an op taking a position input: ``build(position)`` now for a constant (or
    absent) one; for a computed one, read on the host on every call (eager)."""
    if not info.has_input(index):
        return build(None)
    known = info.const(index)
    if known is not None:
        return build(int(known.reshape(-1)[0]))

    def run(*args: Any) -> Any:
        return build(int(args[index].reshape(-1)[0]))(*args)

    return eager(run)


# --- sequence ops -------------------------------------------------------------------------


@register("SequenceConstruct", versions=(11, None), held_dtypes=CAST_HELD,
          supports=lambda info: first_reason(attrs_reason(info, ()),
                                             dtype_reason(info, range(info.num_inputs),
                                                          EXACT_DTYPES | CAST_HELD)))
def _sequence_construct(info: NodeInfo) -> Callable[..., Any]:
    return lambda *tensors: list(tensors)


@register("SequenceEmpty", versions=(11, None), held_dtypes=CAST_HELD,
          supports=lambda info: attrs_reason(info, ("dtype",)))
def _sequence_empty(info: NodeInfo) -> Callable[..., Any]:
    # The element type only matters to the model's type checks: an empty list holds no tensor.
    return lambda: []


@register("SequenceLength", versions=(11, None), held_dtypes=CAST_HELD, supports=_sequence_op())
def _sequence_length(info: NodeInfo) -> Callable[..., Any]:
    @takes_device
    def length(sequence: list[torch.Tensor], *, device: torch.device | None = None) -> torch.Tensor:
        # A fill kernel, not a host-to-device copy: capturable in a CUDA graph.
        return torch.full((), len(sequence), dtype=torch.int64, device=_device_of([sequence], device))

    return length


@register("SequenceAt", versions=(11, None), held_dtypes=CAST_HELD,
          supports=_sequence_op(lambda info: _position_reason(info, 1)))
def _sequence_at(info: NodeInfo) -> Callable[..., Any]:
    def build(position: int | None) -> Callable[..., Any]:
        def at(sequence: list[torch.Tensor], _position: Any = None) -> torch.Tensor:
            return sequence[_at(position or 0, len(sequence), "SequenceAt")]

        return at

    return _with_position(info, 1, build)


@register("SequenceInsert", versions=(11, None), held_dtypes=CAST_HELD,
          supports=_sequence_op(lambda info: dtype_reason(info, (1,), EXACT_DTYPES | CAST_HELD),
                                lambda info: _position_reason(info, 2)))
def _sequence_insert(info: NodeInfo) -> Callable[..., Any]:
    def build(position: int | None) -> Callable[..., Any]:
        def insert(sequence: list[torch.Tensor], tensor: torch.Tensor,
                   _position: Any = None) -> list[torch.Tensor]:
            n = len(sequence)
            at = n if position is None else _at(position, n, "SequenceInsert", insert=True)
            return [*sequence[:at], tensor, *sequence[at:]]

        return insert

    return _with_position(info, 2, build)


@register("SequenceErase", versions=(11, None), held_dtypes=CAST_HELD,
          supports=_sequence_op(lambda info: _position_reason(info, 1)))
def _sequence_erase(info: NodeInfo) -> Callable[..., Any]:
    def build(position: int | None) -> Callable[..., Any]:
        def erase(sequence: list[torch.Tensor], _position: Any = None) -> list[torch.Tensor]:
            at = _at(-1 if position is None else position, len(sequence), "SequenceErase")
            return [*sequence[:at], *sequence[at + 1:]]

        return erase

    return _with_position(info, 1, build)


def _split_to_sequence_supports(info: NodeInfo) -> str | None:
    reason = first_reason(attrs_reason(info, ("axis", "keepdims")), dtype_reason(info, (0,)),
                          _position_reason(info, 1))
    if reason is None and info.has_input(1) and info.rank(1) not in (None, 0, 1):
        return f"split of rank {info.rank(1)} is not a scalar or 1-D"
    return reason


@register("SplitToSequence", versions=(11, None), supports=_split_to_sequence_supports)
def _split_to_sequence(info: NodeInfo) -> Callable[..., Any]:
    axis = int(info.attr("axis", 0))
    keepdims = bool(info.attr("keepdims", 1))

    def build(split: list[int] | int | None) -> Callable[..., Any]:
        def split_to_sequence(x: torch.Tensor, _split: Any = None) -> list[torch.Tensor]:
            a = normalize_axis(axis, x.dim())
            if split is None:  # pieces of one, the axis dropped unless keepdims
                return list(x.split(1, dim=a)) if keepdims else list(x.unbind(a))
            if isinstance(split, list) and sum(split) != x.shape[a]:
                raise InferenceError(f"SplitToSequence: split sizes {split} add up to {sum(split)}, "
                                     f"not to the size {x.shape[a]} of axis {axis}")
            # An int: pieces of that size, the last one what remains (torch.split does just that).
            return list(x.split(split, dim=a))

        return split_to_sequence

    if not info.has_input(1):
        return build(None)
    known = info.const(1)
    if known is not None:
        return build(_split_value(known))

    def run(x: torch.Tensor, split: torch.Tensor) -> list[torch.Tensor]:
        return build(_split_value(split.cpu().numpy()))(x)

    return eager(run)


def _split_value(split: Any) -> list[int] | int:
    """A scalar split as one chunk size, a 1-D one as the list of sizes."""
    return int(split) if split.ndim == 0 else [int(v) for v in split.reshape(-1)]


@register("ConcatFromSequence", versions=(11, None),
          supports=_sequence_op(attrs=("axis", "new_axis")))
def _concat_from_sequence(info: NodeInfo) -> Callable[..., Any]:
    axis = int(info.attr("axis"))
    new_axis = bool(info.attr("new_axis", 0))

    def concat(sequence: list[torch.Tensor]) -> torch.Tensor:
        if not sequence:
            raise InferenceError("ConcatFromSequence: the sequence is empty; it needs one tensor or more")
        if new_axis:  # the axis counts the new one: [-rank-1, rank]
            return torch.stack(sequence, dim=normalize_axis(axis, sequence[0].dim() + 1))
        return torch.cat(sequence, dim=axis)

    return concat


# --- SequenceMap ------------------------------------------------------------------------------


def _sequence_map_supports(info: NodeInfo) -> str | None:
    reason = first_reason(attrs_reason(info, ("body",)), _kind_reason(info, 0, ("sequence",)),
                          *(_kind_reason(info, i, ("sequence", "tensor")) for i in range(1, info.num_inputs)))
    return reason or bodies_reason(info, ("body",))


@register("SequenceMap", versions=(17, None), supports=_sequence_map_supports)
def _sequence_map(info: NodeInfo) -> Callable[..., Any]:
    """The body once per element of the first input: sequence inputs give their element at that
    position, tensor inputs themselves; each body output is gathered into a sequence."""
    (body,) = lower_bodies(info, ("body",))
    outer = outer_values(info.node)
    own = info.num_inputs
    outputs = len(info.node.outputs)

    @takes_device
    def sequence_map(*args: Any, device: torch.device | None = None) -> Any:
        mine, captured = args[:own], args[own:]
        scope = dict(zip(outer, captured, strict=True))
        where = _device_of(mine, device)
        count = len(mine[0])
        if any(isinstance(x, list) and len(x) != count for x in mine):
            lengths = [len(x) for x in mine if isinstance(x, list)]
            raise InferenceError(f"SequenceMap: the input sequences have different lengths {lengths}")
        gathered: list[list[torch.Tensor]] = [[] for _ in range(outputs)]
        for i in range(count):
            inputs = [x[i] if isinstance(x, list) else x for x in mine]
            for k, result in enumerate(body.run(scope, inputs, where)):
                gathered[k].append(result)
        return gathered[0] if outputs == 1 else tuple(gathered)

    return eager(sequence_map) if body.data_dependent else sequence_map


# --- optionals ------------------------------------------------------------------------------


@register("Optional", versions=(15, None), held_dtypes=CAST_HELD,
          supports=lambda info: first_reason(attrs_reason(info, ("type",)),
                                             _kind_reason(info, 0, ("tensor", "sequence"))))
def _optional(info: NodeInfo) -> Callable[..., Any]:
    # An absent input makes an empty optional (the type attribute only types it for the checker).
    return lambda value=None: value


@register("OptionalHasElement", versions=(15, None), held_dtypes=CAST_HELD,
          supports=lambda info: first_reason(attrs_reason(info, ()), _kind_reason(
              info, 0, VALUE_KINDS if info.opset >= 18 else ("optional tensor", "optional sequence"))))
def _optional_has_element(info: NodeInfo) -> Callable[..., Any]:
    @takes_device
    def has_element(value: Any = None, *, device: torch.device | None = None) -> torch.Tensor:
        return torch.full((), value is not None, dtype=torch.bool, device=_device_of([value], device))

    return has_element


@register("OptionalGetElement", versions=(15, None), held_dtypes=CAST_HELD,
          supports=lambda info: first_reason(attrs_reason(info, ()), _kind_reason(
              info, 0, VALUE_KINDS if info.opset >= 18 else ("optional tensor", "optional sequence"))))
def _optional_get_element(info: NodeInfo) -> Callable[..., Any]:
    def get_element(value: Any) -> Any:
        if value is None:
            raise InferenceError("OptionalGetElement: the optional is empty; check it with "
                                 "OptionalHasElement first")
        return value

    return get_element
