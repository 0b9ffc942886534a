"""Matching user inputs to a model's input ports, and results by name, index or port.

Inputs may be given as a dict keyed by input name, index or :class:`Port`; as a
list or tuple in input order; as the results of another request; or, for a
one-input model, as a single value (a list of plain numbers counts as one value
there).  A value is a numpy array, an ``ov.Tensor``, a torch tensor (taken as it
is, on any device), a Python or numpy scalar, a 0-d array, a nested list, or
anything with ``__array__``.

Element types follow OpenVINO's data dispatcher: a value whose dtype differs
from the input's is converted with a copy (numpy's ``astype``: int64 data given
to an int32 input wraps as numpy wraps it, float64 rounds to float32).  An
``ov.Tensor`` of another element type is refused, as OpenVINO refuses to set it,
and so is a value that cannot be converted (text for a float input).  Every
problem is collected and reported in one :class:`~inferplex.errors.InputError`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from inferplex._ports import Port, port_named
from inferplex.api.reshape import dim_bounds
from inferplex.api.tensor import Tensor
from inferplex.api.types import Type
from inferplex.errors import InputError, InputTypeError

__all__ = [
    "InferResults", "OVDict", "as_array", "check_inputs", "convert_input", "copy_value", "is_ov_tensor",
    "keyed_inputs", "note_caller_streams", "port_dims", "port_dtype", "tensor_dtype",
]


def is_ov_tensor(value: Any) -> bool:
    return isinstance(value, Tensor)


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


def port_dtype(port: Port) -> np.dtype[Any] | None:
    """The numpy dtype an input takes (object for strings, as ONNX Runtime takes them); None if unknown."""
    element = port.element_type
    if element.is_dynamic():
        return None
    if element == Type.string:
        return np.dtype(object)
    return element.to_dtype()


def port_dims(port: Port) -> tuple[Any, ...] | None:
    """The port's dims as ints, symbol names, ranges (``"1..8"``) or None; None for an unknown rank."""
    return port.dims


def _is_native(value: Any) -> bool:
    """A tensor object taken as it is (a torch tensor, on any device), not through numpy."""
    return not isinstance(value, np.ndarray) and hasattr(value, "shape") and hasattr(value, "dtype") \
        and not is_ov_tensor(value)


def _single(value: Any, ports: list[Port]) -> bool:
    """Whether ``value`` is one input's value rather than a collection of inputs."""
    if isinstance(value, (np.ndarray, np.generic, int, float, bool, str, bytes)) or is_ov_tensor(value):
        return True
    if _is_native(value) or (hasattr(value, "__array__") and not isinstance(value, (Mapping, Sequence))):
        return True
    # OpenVINO: a list of plain numbers given to a one-input model is that input's data.
    return isinstance(value, list) and len(ports) == 1 and all(
        isinstance(item, (int, float, str, bytes)) or (isinstance(item, list) and all(
            isinstance(inner, (int, float, str, bytes)) for inner in item)) for item in value)


def keyed_inputs(ports: list[Port], inputs: Any, by_name: Mapping[str, int] | None = None) -> dict[int, Any]:
    """``{input index: value}`` from whatever form ``inputs`` takes; unknown keys are reported at once.

    ``by_name``: ``{input name: index}`` of ``ports`` when the caller keeps one (built here otherwise).
    """
    if by_name is None:
        by_name = {p.any_name: p.index for p in ports}
    if inputs is None:
        return {}
    if type(inputs) is dict and all(type(key) is str and key in by_name for key in inputs):
        return {by_name[key]: value for key, value in inputs.items()}  # the common case, at once
    if _single(inputs, ports):
        if len(ports) != 1:
            raise InputError(f"a single tensor was given but the model has {len(ports)} inputs "
                             f"({', '.join(by_name)}); pass a dict keyed by input name")
        return {0: inputs}
    if isinstance(inputs, InferResults):  # another request's results feed this one, in order
        inputs = inputs.to_tuple()
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
            elif not isinstance(key, (int, str)) or isinstance(key, bool):
                raise InputTypeError(f"Incompatible key type for input: {key!r}; keys are input names "
                                     "(str), indices (int) or ports")
            elif (named := port_named(ports, key)) is not None:  # another of the tensor's names
                result[named.index] = value
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
    raise InputTypeError(f"Incompatible inputs of type: {type(inputs).__name__}; pass a dict keyed by "
                         "input name, index or port, a list in input order, or one tensor")


def convert_input(port: Port, value: Any) -> Any:
    """``value`` in the input's element type: the value itself where it already is, else a copy.

    An ``ov.Tensor`` is returned as it is (it must have the input's element
    type); a torch tensor is converted with ``.to``; anything else goes through
    numpy.  Sequence and optional inputs take their values as given.
    """
    if not port.is_tensor:
        return value
    dtype = port_dtype(port)
    if is_ov_tensor(value):
        element, wanted = value.get_element_type().get_type_name(), port.element_type.get_type_name()
        if dtype is not None and element != wanted:
            raise InputError(f"input {port.any_name!r}: an ov.Tensor of element type {element} cannot "
                             f"be set on an input of element type {wanted}; give a "
                             f"{wanted} tensor, or a numpy array (converted with a copy)")
        return value
    if _is_native(value) and (dtype is None or tensor_dtype(value) == dtype):
        return value
    if _is_native(value) and type(value).__module__.startswith("torch"):
        return _torch_as(value, dtype)
    try:
        array = np.asarray(value)
        if dtype is not None and array.dtype != dtype:
            array = array.astype(dtype) if dtype.kind != "O" else np.asarray(value, dtype=object)
    except (TypeError, ValueError, OverflowError) as error:
        raise InputError(f"input {port.any_name!r}: cannot convert {type(value).__name__} "
                         f"to a {port.element_type.get_type_name()} tensor ({error})") from error
    return array


def _torch_as(value: Any, dtype: np.dtype[Any] | None) -> Any:
    import torch

    try:
        target = torch.from_numpy(np.empty(0, dtype)).dtype
    except (TypeError, ValueError) as error:
        raise InputError(f"a torch tensor cannot be converted to {dtype}: {error}") from error
    return value.to(target)


def as_array(value: Any) -> Any:
    """What the engine runs on for a held input: an ov.Tensor's data, or the value itself."""
    if is_ov_tensor(value):
        return np.asarray(value)
    return value


def check_inputs(ports: list[Port], values: Mapping[int, Any],
                 refused: Mapping[int, str] | None = None) -> None:
    """Raise one InputError for every missing input and every dtype or shape that does not fit.

    ``refused``: ``{input index: problem}`` for inputs given but not convertible
    (left out of ``values``); their problems are reported first.
    """
    problems = list((refused or {}).values())
    missing = [p.any_name for p in ports if p.index not in values and p.index not in (refused or {})]
    if missing:
        problems.append(f"missing input {', '.join(repr(m) for m in missing)}; the model's "
                        f"inputs are {', '.join(repr(p.any_name) for p in ports)}")
    symbols: dict[str, tuple[int, str]] = {}
    for port in ports:
        if port.index in values and port.is_tensor:
            problems.extend(_check(port, as_array(values[port.index]), symbols))
    if problems:
        raise InputError("; ".join(problems))


def copy_value(value: Any) -> Any:
    """An own copy of an input value, so that the caller may reuse its array at once."""
    if isinstance(value, np.ndarray):
        return value.copy()
    if is_ov_tensor(value):
        return np.array(value, copy=True)
    if _is_native(value) and callable(getattr(value, "clone", None)):  # a torch tensor
        return value.clone()
    if isinstance(value, (list, tuple)):  # a sequence input
        return type(value)(copy_value(item) for item in value)
    return value  # None (an absent optional) or an immutable scalar


def note_caller_streams(bound: Mapping[Any, Any]) -> None:
    """For the torch CUDA tensors among a request's inputs, note where the caller's current CUDA
    stream stands, before the request leaves the caller's thread.

    The run starts on a pool thread whose current stream knows nothing of the
    caller's; the GPU device orders its run after the noted point
    (:mod:`inferplex.devices.gpu.handoff`).  Nothing is imported for other values.
    """
    for value in bound.values():
        cuda = getattr(value, "is_cuda", False) is True
        if cuda and _is_native(value) and type(value).__module__.startswith("torch"):
            from inferplex.devices.gpu.handoff import note_caller_stream

            note_caller_stream(value)


def _check(port: Port, tensor: Any, symbols: dict[str, tuple[int, str]]) -> list[str]:
    problems: list[str] = []
    want = port_dtype(port)
    dtype = tensor.dtype if type(tensor) is np.ndarray else tensor_dtype(tensor)
    if want is not None and dtype is not None and dtype != want:
        problems.append(f"input {port.any_name!r} has dtype {dtype}; the model takes "
                        f"{port.element_type.get_type_name()} ({want})")
    expected = port_dims(port)
    if expected is None:
        return problems
    shape = tensor.shape if type(tensor) is np.ndarray else tuple(int(d) for d in tensor.shape)
    if shape == expected:
        return problems
    if len(shape) != len(expected):
        problems.append(f"input {port.any_name!r} has rank {len(shape)} (shape {list(shape)}); "
                        f"the model takes rank {len(expected)}: {_show(expected)}")
        return problems
    for axis, (got, want_dim) in enumerate(zip(shape, expected, strict=True)):
        if isinstance(want_dim, int) and got != want_dim:
            problems.append(f"input {port.any_name!r} has shape {list(shape)}; the model takes "
                            f"{_show(expected)} (dimension {axis} must be {want_dim})")
            break
        bounds = dim_bounds(want_dim)
        if bounds is not None:  # a ranged dim ("1..8"), set by Model.reshape
            if got < bounds[0] or (bounds[1] is not None and got > bounds[1]):
                problems.append(f"input {port.any_name!r} has shape {list(shape)}; the model takes "
                                f"{_show(expected)} (dimension {axis} must be in {want_dim})")
                break
        elif isinstance(want_dim, str):
            seen = symbols.setdefault(want_dim, (got, port.any_name))
            if seen[0] != got:
                problems.append(f"dimension {want_dim!r} is {seen[0]} in input {seen[1]!r} but {got} "
                                f"in input {port.any_name!r}; inputs must agree on it")
    return problems


def _show(dims: tuple[Any, ...]) -> str:
    return "[" + ",".join("?" if d is None else str(d) for d in dims) + "]"


class OVDict(Mapping[Port, Any]):
    """Results of one inference, as OpenVINO's ``OVDict``: indexable by output port, index (negative
    ones count from the end, as in a list) or name, and read-only (assigning an item is a TypeError
    naming ``OVDict``, as in OpenVINO).

    As in OpenVINO, its keys are the output ports: iterating, ``keys()``,
    ``items()`` and ``to_dict()`` give ports; ``names()`` gives each output's
    names; ``values()`` and ``to_tuple()`` give the arrays in output order.
    """

    def __init__(self, ports: list[Port], outputs: Mapping[str, Any]) -> None:
        self._ports = ports
        self._outputs = dict(outputs)

    @classmethod
    def _owning(cls, ports: list[Port], outputs: dict[str, Any]) -> OVDict:
        """Results over ``outputs`` itself (a dict nobody else holds): no copy of the dict."""
        results = cls.__new__(cls)
        results._ports = ports
        results._outputs = outputs
        return results

    def _name(self, key: Any) -> str:
        if isinstance(key, Port):
            key = key.any_name
        if isinstance(key, (int, np.integer)):  # as a list is indexed (OpenVINO's: -1 is the last; bools too)
            count = len(self._ports)
            if -count <= key < count:
                return self._ports[key].any_name
            raise KeyError(f"output index {key} out of range; the model has {count} outputs "
                           f"(indices {-count}..{count - 1})")
        if not isinstance(key, str):  # OpenVINO's TypeError, for ``key in results`` too
            raise InputTypeError(f"Unknown key type: {type(key)}; results are read by output index, "
                                 "name or port")
        if key in self._outputs:
            return key
        named = port_named(self._ports, key)  # another of the tensor's names
        if named is not None:
            return named.any_name
        raise KeyError(f"no output {key!r}; outputs: {', '.join(self._outputs)}")

    def __getitem__(self, key: Any) -> Any:
        return self._outputs[self._name(key)]

    def __iter__(self) -> Iterator[Port]:
        return iter(self._ports)

    def __len__(self) -> int:
        return len(self._ports)

    def names(self) -> tuple[set[str], ...]:
        """The names of each output, in output order."""
        return tuple(p.get_names() for p in self._ports)

    def to_tuple(self) -> tuple[Any, ...]:
        return tuple(self._outputs[p.any_name] for p in self._ports)

    def to_dict(self) -> dict[Port, Any]:
        """A plain dict ``{output port: array}`` (OpenVINO's: addressing by name and index is lost)."""
        return {p: self._outputs[p.any_name] for p in self._ports}

    def __repr__(self) -> str:
        shapes = {n: list(getattr(v, "shape", ())) for n, v in self._outputs.items()}
        return f"OVDict({shapes})"


InferResults = OVDict
"""inferplex's earlier name of :class:`OVDict`, kept for programs that use it."""
