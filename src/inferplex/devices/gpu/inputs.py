"""A run's inputs: checked against the lowered model (names, element types, ranks, static
dims), then moved to the program's device.

:class:`InputChecker` checks.  A sequence input is a list (or tuple) of tensors, each checked for the element
type; an optional input is None or its value.  Their signature entry is the
shapes of the tensors they hold (a sequence's tagged ``"sequence"``), None for an
absent optional.

:class:`InputMover` moves: numpy arrays are copied into the worker's pinned
staging buffers and sent with non-blocking copies; torch tensors already on the
device are used as they are; tensors on another GPU are copied device to device;
pinned host tensors are sent directly (the run then holds them until its copies
are done).  Sequences and optionals are moved element by element, synchronously.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from inferplex.devices.gpu.lower import LoweredGraph, numpy_to_torch, torch_to_numpy
from inferplex.devices.gpu.support import host_tensor
from inferplex.devices.gpu.transfers import stage, to_device
from inferplex.devices.gpu.workers import WorkerState
from inferplex.errors import InputError

__all__ = ["InputChecker", "InputMover"]

_VALIDATED_LIMIT = 256
"""Input signatures remembered as valid (their shapes are then not checked again)."""

def _numpy_dtype(dtype: torch.dtype) -> np.dtype:
    return torch_to_numpy(torch.empty(0, dtype=dtype)).dtype


class InputChecker:
    """Checks a run's inputs and gives them in the model's order with their signature."""

    def __init__(self, lowered: LoweredGraph) -> None:
        kinds = lowered.input_kinds or ("tensor",) * len(lowered.input_names)
        self._specs = tuple(zip(lowered.input_names, lowered.input_dtypes,
                                (_numpy_dtype(d) for d in lowered.input_dtypes), lowered.input_shapes,
                                kinds, strict=True))
        self._names = frozenset(lowered.input_names)
        self._validated: set[tuple[Any, ...]] = set()

    def check(self, inputs: Mapping[str, Any]) -> tuple[list[Any], tuple[Any, ...]]:
        """The inputs in the model's order, and their signature (shapes; dtypes are checked equal)."""
        if not isinstance(inputs, Mapping):
            raise InputError(f"inputs must be a mapping of input name to tensor, got {type(inputs).__name__}")
        if len(inputs) != len(self._names) or not self._names.issuperset(inputs):
            self._names_error(inputs)
        values = []
        for name, dtype, np_dtype, _, kind in self._specs:
            value = inputs[name]
            if kind == "tensor":
                values.append(_tensor(name, value, dtype, np_dtype))
            else:
                values.append(_structured(name, kind, value, dtype, np_dtype))
        signature = tuple(_signature_of(v) for v in values)
        if signature not in self._validated:
            for (name, _, _, declared, kind), shape in zip(self._specs, signature, strict=True):
                if kind == "tensor":  # a sequence's elements may differ in shape
                    _check_shape(name, shape, declared)
            if len(self._validated) < _VALIDATED_LIMIT:
                self._validated.add(signature)
        return values, signature

    def forget(self) -> None:
        """Drop the signatures remembered as valid."""
        self._validated.clear()

    def _names_error(self, inputs: Mapping[str, Any]) -> None:
        names = [spec[0] for spec in self._specs]
        unknown = sorted(set(inputs) - self._names)
        missing = [n for n in names if n not in inputs]
        raise InputError(f"inputs do not match the model: unknown {unknown}, missing {missing}; "
                         f"the model takes {names}")


def _tensor(name: str, value: Any, dtype: torch.dtype, np_dtype: np.dtype) -> Any:
    """``value`` as a numpy array or torch tensor of the element type the model takes."""
    if isinstance(value, np.ndarray):
        ok = value.dtype == np_dtype
    elif isinstance(value, torch.Tensor):
        ok = value.dtype == dtype
    else:
        value = torch.from_dlpack(value) if hasattr(value, "__dlpack__") else np.asarray(value)
        ok = value.dtype == (dtype if isinstance(value, torch.Tensor) else np_dtype)
    if not ok:
        got = (value.dtype if isinstance(value, torch.Tensor)
               else numpy_to_torch(value.reshape(-1)[:0]).dtype)
        raise InputError(f"input {name!r} has element type {got}, the model takes {dtype}")
    return value


def _structured(name: str, kind: str, value: Any, dtype: torch.dtype, np_dtype: np.dtype) -> Any:
    """A sequence input as a list of checked tensors; an optional one as None or its value."""
    if kind.startswith("optional "):
        if value is None:
            return None
        kind = kind.removeprefix("optional ")
        if kind == "tensor":
            return _tensor(name, value, dtype, np_dtype)
    if not isinstance(value, (list, tuple)):
        raise InputError(f"input {name!r} is a {kind}: give a list of tensors (numpy arrays or torch "
                         f"tensors), not a {type(value).__name__}")
    return [_tensor(f"{name}[{i}]", item, dtype, np_dtype) for i, item in enumerate(value)]


def _signature_of(value: Any) -> Any:
    """A value's part of the input signature: a tensor's shape, the shapes in a sequence, None."""
    if isinstance(value, list):
        return ("sequence", *(tuple(item.shape) for item in value))
    return None if value is None else tuple(value.shape)


def _check_shape(name: str, got: tuple[int, ...], declared: tuple[int | str | None, ...] | None) -> None:
    if declared is None:
        return
    if len(got) != len(declared):
        raise InputError(f"input {name!r} has rank {len(got)} (shape {list(got)}); the model takes rank "
                         f"{len(declared)} (shape {list(declared)})")
    for axis, (size, want) in enumerate(zip(got, declared, strict=True)):
        if isinstance(want, int) and size != want:
            raise InputError(f"input {name!r} has size {size} on axis {axis} (shape {list(got)}); "
                             f"the model takes {list(declared)}")


@dataclass(frozen=True)
class InputMover:
    """Moves a run's checked inputs to one program's device (see the module docstring)."""

    device: str
    """The program's device name (``GPU.0``), for errors."""
    torch_device: torch.device
    """Where the program runs (``cpu`` for an emulated GPU)."""
    cuda: bool
    """Whether that is a CUDA device (kept, not derived: it is read for every input)."""

    def move(self, state: WorkerState, values: list[Any],
             out: Sequence[torch.Tensor] | None = None) -> list[Any]:
        """``values`` (in the model's order) on the device; into ``out`` when given (a CUDA graph's
        static inputs)."""
        if out is None:
            tensors = [self.to_device(state, i, v) for i, v in enumerate(values)]
        else:
            tensors = [self.to_device(state, i, v, o)
                       for i, (v, o) in enumerate(zip(values, out, strict=True))]
        # Collecting the outputs records (or, when it waits for the stream anyway, skips) the
        # event that tells the next run when this run's staging buffers are free again.
        state.host_inputs = self.cuda and any(
            isinstance(v, np.ndarray) or (isinstance(v, torch.Tensor) and v.device.type == "cpu")
            for v in values)
        return tensors

    def to_device(self, state: WorkerState, index: int, value: Any, out: torch.Tensor | None = None) -> Any:
        """``value`` on the device; into ``out`` when given (a CUDA graph's static input)."""
        if value is None or isinstance(value, list):  # an optional or a sequence input
            return self.native(value)
        if isinstance(value, np.ndarray):
            value = host_tensor(value) if self.cuda else numpy_to_torch(value)
        if not self.cuda:
            return value if out is None else out.copy_(value)
        if value.device == self.torch_device:
            return value if out is None else out.copy_(value, non_blocking=True)
        if value.device.type == "cpu":
            if value.is_pinned():
                state.borrowed = True
            else:
                value = stage(state, index, value)
        dest = (out if out is not None
                else torch.empty(value.shape, dtype=value.dtype, device=self.torch_device))
        return dest.copy_(value, non_blocking=True)

    def native(self, value: Any) -> Any:
        """``value`` on the device (:func:`.transfers.to_device`); a sequence as a list of tensors,
        an absent optional as None."""
        if isinstance(value, (list, tuple)):
            return [self.native(item) for item in value]
        return None if value is None else to_device(value, self.torch_device, self.device)
