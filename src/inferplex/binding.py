"""Matching user inputs to a model's input ports, and results by name, index or port.

Inputs may be given as a dict keyed by input name, index or :class:`Port`; as a
list or tuple in input order; or, for a one-input model, as a single tensor.
Tensors are numpy arrays, torch tensors (taken as they are, on any device), or
anything ``numpy.asarray`` accepts (lists and scalars are converted to the
port's type).  Every problem is collected and reported in one
:class:`~inferplex.errors.InputError`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from inferplex.api.reshape import dim_bounds
from inferplex.errors import InputError
from inferplex.model import Port

__all__ = ["InferResults", "bind_inputs", "copy_inputs", "tensor_dtype"]


def tensor_dtype(tensor: Any) -> np.dtype[Any] | None:
    """The numpy dtype of a numpy array or torch tensor (None if unknown)."""
    dtype = getattr(tensor, "dtype", None)
    if dtype is None:
        return None
    if isinstance(dtype, np.dtype):
        return dtype
    name = str(dtype).removeprefix("torch.")
    aliases = {"float": "float32", "double": "float64", "half": "float16", "long": "int64",
               "int": "int32", "short": "int16"}
    try:
        return np.dtype(aliases.get(name, name))
    except TypeError:
        return None


def _is_tensor(value: Any) -> bool:
    return isinstance(value, np.ndarray) or (hasattr(value, "shape") and hasattr(value, "dtype"))


def _keyed(ports: list[Port], inputs: Any) -> dict[int, Any]:
    """Map user inputs to port indices; unknown keys are reported at once."""
    by_name = {p.any_name: p.index for p in ports}
    if inputs is None:
        return {}
    if type(inputs) is dict and all(type(key) is str and key in by_name for key in inputs):
        return {by_name[key]: value for key, value in inputs.items()}  # the common case, at once
    if _is_tensor(inputs) or np.isscalar(inputs):
        if len(ports) != 1:
            raise InputError(f"a single tensor was given but the model has {len(ports)} inputs "
                             f"({', '.join(by_name)}); pass a dict keyed by input name")
        return {0: inputs}
    if isinstance(inputs, Mapping):
        result: dict[int, Any] = {}
        unknown: list[str] = []
        for key, value in inputs.items():
            if isinstance(key, Port):
                key = key.any_name
            if isinstance(key, int) and not isinstance(key, bool) and 0 <= key < len(ports):
                result[key] = value
            elif isinstance(key, str) and key in by_name:
                result[by_name[key]] = value
            else:
                unknown.append(repr(key))
        if unknown:
            raise InputError(f"unknown input {', '.join(unknown)}; the model's inputs are "
                             f"{', '.join(repr(n) for n in by_name)} (or indices 0..{len(ports) - 1})")
        return result
    if isinstance(inputs, Sequence) and not isinstance(inputs, (str, bytes)):
        if len(inputs) > len(ports):
            raise InputError(f"{len(inputs)} inputs given but the model has {len(ports)}: "
                             f"{', '.join(by_name)}")
        return dict(enumerate(inputs))
    raise InputError(f"inputs of type {type(inputs).__name__} are not accepted; pass a dict "
                     "keyed by input name, index or port, a list in input order, or one tensor")


def bind_inputs(ports: list[Port], inputs: Any, preset: Mapping[int, Any] | None = None) -> dict[str, Any]:
    """Check ``inputs`` against ``ports``; return ``{input name: tensor}`` for the executor."""
    given = dict(preset or {})
    given.update(_keyed(ports, inputs))
    problems: list[str] = []
    missing = [p.any_name for p in ports if p.index not in given]
    if missing:
        problems.append(f"missing input {', '.join(repr(m) for m in missing)}; the model's "
                        f"inputs are {', '.join(repr(p.any_name) for p in ports)}")
    symbols: dict[str, tuple[int, str]] = {}
    bound: dict[str, Any] = {}
    for port in ports:
        if port.index not in given:
            continue
        if not port.is_tensor:  # sequences (lists) and optionals (None or a value) go as given
            bound[port.any_name] = given[port.index]
            continue
        tensor = _as_tensor(port, given[port.index])
        problems.extend(_check(port, tensor, symbols))
        bound[port.any_name] = tensor
    if problems:
        raise InputError("; ".join(problems))
    return bound


def copy_inputs(bound: Mapping[str, Any]) -> dict[str, Any]:
    """Own copies of bound inputs, so that the caller may reuse its arrays at once."""
    return {name: _copy_value(value) for name, value in bound.items()}


def _copy_value(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return value.copy()
    if _is_tensor(value) and callable(getattr(value, "clone", None)):  # a torch tensor
        return value.clone()
    if isinstance(value, (list, tuple)):  # a sequence input
        return type(value)(_copy_value(item) for item in value)
    return value  # None (an absent optional) or an immutable scalar


def _as_tensor(port: Port, value: Any) -> Any:
    if _is_tensor(value):
        return value
    element = port.element_type
    dtype = element.dtype if element is not None else None
    try:
        return np.asarray(value, dtype=dtype)
    except (TypeError, ValueError) as error:
        raise InputError(f"input {port.any_name!r}: cannot convert {type(value).__name__} "
                         f"to a {element} tensor ({error})") from error


def _check(port: Port, tensor: Any, symbols: dict[str, tuple[int, str]]) -> list[str]:
    problems: list[str] = []
    element = port.element_type
    dtype = tensor.dtype if type(tensor) is np.ndarray else tensor_dtype(tensor)
    if element is not None and dtype is not None and dtype != element.dtype:
        problems.append(f"input {port.any_name!r} has dtype {dtype}; the model takes "
                        f"{element} ({element.dtype})")
    expected = port.partial_shape
    if expected is None:
        return problems
    shape = tensor.shape if type(tensor) is np.ndarray else tuple(int(d) for d in tensor.shape)
    if shape == expected:
        return problems
    if len(shape) != len(expected):
        problems.append(f"input {port.any_name!r} has rank {len(shape)} (shape {list(shape)}); "
                        f"the model takes rank {len(expected)}: {_show(expected)}")
        return problems
    for axis, (got, want) in enumerate(zip(shape, expected, strict=True)):
        if isinstance(want, int) and got != want:
            problems.append(f"input {port.any_name!r} has shape {list(shape)}; the model takes "
                            f"{_show(expected)} (dimension {axis} must be {want})")
            break
        bounds = dim_bounds(want)
        if bounds is not None:  # a ranged dim ("1..8"), set by Model.reshape
            if got < bounds[0] or (bounds[1] is not None and got > bounds[1]):
                problems.append(f"input {port.any_name!r} has shape {list(shape)}; the model takes "
                                f"{_show(expected)} (dimension {axis} must be in {want})")
                break
        elif isinstance(want, str):
            seen = symbols.setdefault(want, (got, port.any_name))
            if seen[0] != got:
                problems.append(f"dimension {want!r} is {seen[0]} in input {seen[1]!r} but {got} "
                                f"in input {port.any_name!r}; inputs must agree on it")
    return problems


def _show(dims: tuple[Any, ...]) -> str:
    return "[" + ",".join("?" if d is None else str(d) for d in dims) + "]"


class InferResults(Mapping[str, Any]):
    """Results of one inference, indexable by output name, index or port.

    Iterating gives output names; ``to_tuple()`` gives tensors in output order.
    """

    def __init__(self, ports: list[Port], outputs: Mapping[str, Any]) -> None:
        self._ports = ports
        self._outputs = dict(outputs)

    def _name(self, key: Any) -> str:
        if isinstance(key, Port):
            key = key.any_name
        if isinstance(key, int) and not isinstance(key, bool):
            if 0 <= key < len(self._ports):
                return self._ports[key].any_name
            raise KeyError(f"output index {key} out of range; the model has {len(self._ports)} outputs")
        if isinstance(key, str) and key in self._outputs:
            return key
        raise KeyError(f"no output {key!r}; outputs: {', '.join(self._outputs)}")

    def __getitem__(self, key: Any) -> Any:
        return self._outputs[self._name(key)]

    def __iter__(self) -> Iterator[str]:
        return iter(p.any_name for p in self._ports)

    def __len__(self) -> int:
        return len(self._ports)

    def to_tuple(self) -> tuple[Any, ...]:
        return tuple(self._outputs[p.any_name] for p in self._ports)

    def to_dict(self) -> dict[str, Any]:
        return {p.any_name: self._outputs[p.any_name] for p in self._ports}

    def __repr__(self) -> str:
        shapes = {n: list(getattr(v, "shape", ())) for n, v in self._outputs.items()}
        return f"InferResults({shapes})"
