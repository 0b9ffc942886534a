"""The OpenVINO attributes of an op built by an :mod:`inferplex.opset` function, as ``get_attributes()``
gives them: the function's arguments that are not the op's inputs (``NodeInput``) or its name,
defaults included, in plain Python values (element types by their short names, numpy arrays as
lists).  OpenVINO's opset functions pass their arguments to its ops under the same names."""

from __future__ import annotations

import enum
import functools
import inspect
from collections.abc import Callable
from typing import Any

import numpy as np

from inferplex._opsets.build import plain_attribute
from inferplex.api.nodes import Node
from inferplex.api.types import Type

__all__ = ["recording_attributes"]

_NOT_RECORDED = {"parameter", "constant", "result", "assign", "read_value"}
"""Functions whose ops show their own attributes (a Parameter's or Constant's type and shape, a
variable's id, type and shape)."""

_RENAMED = {"max_pool": {"kernel_shape": "kernel"},
            "avg_pool": {"kernel_shape": "kernel", "exclude_pad": "exclude-pad"},
            "clamp": {"min_value": "min", "max_value": "max"}, "broadcast": {"broadcast_spec": "mode"}}
"""Arguments whose attribute OpenVINO names otherwise, by function."""


def recording_attributes(name: str, function: Callable[..., Any]) -> Callable[..., Any]:
    """``function``, whose built op records the attributes it was given (see the module docstring)."""
    if name in _NOT_RECORDED or not callable(function) or isinstance(function, type):
        return function
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):
        return function
    if "attributes" in signature.parameters:  # given as OpenVINO's own map: the ONNX node's show
        return function
    inputs = {key for key, parameter in signature.parameters.items()
              if "NodeInput" in str(parameter.annotation)}

    @functools.wraps(function)
    def recording(*args: Any, **kwargs: Any) -> Any:
        built = function(*args, **kwargs)
        if isinstance(built, Node):
            bound = signature.bind(*args, **kwargs)
            bound.apply_defaults()
            built.set_made_attributes(_attributes(name, bound.arguments, inputs, signature))
        return built

    return recording


def _attributes(function: str, arguments: dict[str, Any], inputs: set[str],
                signature: inspect.Signature) -> dict[str, Any]:
    """The attributes of the arguments given: named as OpenVINO names them, those left unset
    (None) out, ``auto_pad`` in OpenVINO's words (``"explicit"`` by default)."""
    renamed = _RENAMED.get(function, {})
    variadic = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
    found: dict[str, Any] = {}
    for key, value in arguments.items():
        if key in inputs or key == "name" or signature.parameters[key].kind in variadic:
            continue
        if key == "auto_pad":
            value = str(value or "explicit").lower()
        if value is not None:
            found[renamed.get(key, key)] = _plain(value)
    if "mode" in found and function == "broadcast":
        found["mode"] = str(found["mode"]).lower()
    return found


def _plain(value: Any) -> Any:
    """``value`` as OpenVINO's attribute maps give it: numbers, strings, lists; element types by name."""
    if isinstance(value, Type):
        return value.get_type_name()
    if isinstance(value, np.dtype) or (isinstance(value, type) and issubclass(value, np.generic)):
        return Type(value).get_type_name()
    if isinstance(value, enum.Enum):
        return value.name.lower()
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    return plain_attribute(value)
