"""Each request's variables: ``InferRequest.query_state()`` and ``reset_state()``.

A request keeps one value per variable of its compiled model (:class:`RequestStates`), which
starts *unset*: every inference feeds the value to the variable's state input (zeros, of the
variable's shape with 0 for each dynamic dimension, while unset) and says whether it is set on
the ready input; after an inference that ends well, the state output is the new value.  A
failed inference leaves the values as they were.  ``VariableState`` is OpenVINO's view of one:
its ``name``, its ``state`` (read, or set to a tensor, which sets the variable) and ``reset()``.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

import numpy as np

from inferplex.api.reshape import format_dims
from inferplex.api.tensor import Tensor
from inferplex.api.types import Type
from inferplex.errors import InputError, InputTypeError
from inferplex.state.stateless import StatePlan, VariableSlot

__all__ = ["RequestStates", "VariableState"]


class RequestStates:
    """The values of one request's variables, fed to its runs and updated by them."""

    def __init__(self, plan: StatePlan) -> None:
        self._slots = plan.slots
        self._lock = threading.Lock()
        self._values: dict[str, np.ndarray] = {}
        self._set: dict[str, bool] = {}
        self.reset()

    def feeds(self) -> dict[str, Any]:
        """The state (and ready) inputs of the next run."""
        feeds: dict[str, Any] = {}
        with self._lock:
            for slot in self._slots:
                variable_id = slot.spec.variable_id
                feeds[slot.state_input] = self._values[variable_id]
                if slot.ready_input is not None:
                    feeds[slot.ready_input] = np.array(self._set[variable_id])
        return feeds

    def ran(self, outputs: Mapping[str, Any]) -> None:
        """Keep what the run's Assigns wrote as the variables' values."""
        with self._lock:
            for slot in self._slots:
                if slot.state_output is not None and slot.state_output in outputs:
                    value = np.array(_host(outputs[slot.state_output]), copy=True)
                    self._values[slot.spec.variable_id] = value
                    self._set[slot.spec.variable_id] = True

    def reset(self, variable_id: str | None = None) -> None:
        """Make a variable (every one where None) unset again: zeros, its initial value at the next run."""
        with self._lock:
            for slot in self._slots:
                if variable_id is None or slot.spec.variable_id == variable_id:
                    self._values[slot.spec.variable_id] = _zeros(slot)
                    self._set[slot.spec.variable_id] = False

    def states(self) -> list[VariableState]:
        return [VariableState(self, slot) for slot in self._slots]

    def value(self, variable_id: str) -> np.ndarray:
        with self._lock:
            return self._values[variable_id]

    def set_value(self, slot: VariableSlot, value: Any) -> None:
        array = _checked(slot, value)
        with self._lock:
            self._values[slot.spec.variable_id] = array
            self._set[slot.spec.variable_id] = True


class VariableState:
    """One variable of a request (OpenVINO's ``VariableState``)."""

    def __init__(self, states: RequestStates, slot: VariableSlot) -> None:
        self._states = states
        self._slot = slot

    @property
    def name(self) -> str:
        """The variable's id."""
        return self._slot.spec.variable_id

    def get_name(self) -> str:
        return self.name

    @property
    def state(self) -> Tensor:
        """The variable's value: a tensor over the request's copy, which the next run replaces."""
        return Tensor(self._states.value(self.name), shared_memory=True)

    @state.setter
    def state(self, value: Any) -> None:
        self._states.set_value(self._slot, value)

    def get_state(self) -> Tensor:
        return self.state

    def set_state(self, value: Any) -> None:
        self.state = value

    def reset(self) -> None:
        """Unset the variable: the next run reads its initial value (zeros where it has none)."""
        self._states.reset(self.name)

    def __repr__(self) -> str:
        return "<VariableState>"


def _zeros(slot: VariableSlot) -> np.ndarray:
    dims = slot.spec.dims
    shape = (0,) if dims is None else tuple(d if isinstance(d, int) else 0 for d in dims)
    return np.zeros(shape, dtype=Type(slot.spec.dtype).to_dtype())


def _host(value: Any) -> Any:
    """A run's output as something numpy reads (a CUDA tensor comes to the host)."""
    if hasattr(value, "detach") and hasattr(value, "cpu"):
        return value.detach().cpu().numpy()
    return value


def _checked(slot: VariableSlot, value: Any) -> np.ndarray:
    """``value`` (a Tensor or an array) as the variable's new value: a copy of the variable's
    element type and of a shape it takes; InputError where it does not fit."""
    if isinstance(value, Tensor):
        given_type, array = value.get_element_type(), np.asarray(value.data)
    elif isinstance(value, np.ndarray):
        given_type, array = Type(value.dtype), value
    else:
        raise InputTypeError(
            f"a VariableState's state is set to an ov.Tensor or a numpy array, not {type(value).__name__}"
        )
    expected = Type(slot.spec.dtype)
    if given_type != expected:
        raise InputError(
            f"variable {slot.spec.variable_id!r} holds {expected.get_type_name()} values; the "
            f"tensor given is {given_type.get_type_name()}: give a tensor of its type"
        )
    dims = slot.spec.dims
    if dims is not None and (
        len(dims) != array.ndim
        or any(isinstance(d, int) and d != n for d, n in zip(dims, array.shape, strict=True))
    ):
        raise InputError(
            f"variable {slot.spec.variable_id!r} has shape {format_dims(list(dims))}; the tensor "
            f"given is {list(array.shape)}: give a tensor of a shape it takes"
        )
    return np.array(array, copy=True)
