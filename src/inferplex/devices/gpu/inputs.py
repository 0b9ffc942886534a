"""Checking a run's inputs against the lowered model: names, element types, ranks, static dims."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from inferplex.devices.gpu.lower import LoweredGraph, numpy_to_torch, torch_to_numpy
from inferplex.errors import InputError

__all__ = ["InputChecker"]

_VALIDATED_LIMIT = 256
"""Input signatures remembered as valid (their shapes are then not checked again)."""

def _numpy_dtype(dtype: torch.dtype) -> np.dtype:
    return torch_to_numpy(torch.empty(0, dtype=dtype)).dtype


class InputChecker:
    """Checks a run's inputs and gives them in the model's order with their signature."""

    def __init__(self, lowered: LoweredGraph) -> None:
        self._specs = tuple(zip(lowered.input_names, lowered.input_dtypes,
                                (_numpy_dtype(d) for d in lowered.input_dtypes), lowered.input_shapes,
                                strict=True))
        self._names = frozenset(lowered.input_names)
        self._validated: set[tuple[Any, ...]] = set()

    def check(self, inputs: Mapping[str, Any]) -> tuple[list[Any], tuple[Any, ...]]:
        """The inputs in the model's order, and their signature (shapes; dtypes are checked equal)."""
        if not isinstance(inputs, Mapping):
            raise InputError(f"inputs must be a mapping of input name to tensor, got {type(inputs).__name__}")
        if len(inputs) != len(self._names) or not self._names.issuperset(inputs):
            self._names_error(inputs)
        values = []
        for name, dtype, np_dtype, _ in self._specs:
            value = inputs[name]
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
            values.append(value)
        signature = tuple(tuple(v.shape) for v in values)
        if signature not in self._validated:
            for (name, _, _, declared), shape in zip(self._specs, signature, strict=True):
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
