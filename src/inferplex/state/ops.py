"""The opset functions ``read_value`` and ``assign`` (OpenVINO's opset 3 and 6 forms), as
:data:`~inferplex.state.variables.STATE_DOMAIN` nodes.

    read_value(init_value, "id", variable_type=None, variable_shape=None, name=None)
    read_value("id", variable_type=None, variable_shape=None, name=None)   # zeros at first
    read_value(variable, name=None) and read_value(init_value, variable, name=None)
    assign(new_value, "id" | variable, name=None); assign() makes an Assign with no value

A ``ReadValue``'s output has the variable's element type and shape, where they are dynamic its
initial value's; the variable's type and shape must take the initial value's (OpenVINO's check).
"""

from __future__ import annotations

from typing import Any

import onnx_ir as ir

from inferplex._opsets.build import value_of
from inferplex.api.nodes import Node
from inferplex.api.reshape import Dim, format_dims, parse_shape
from inferplex.api.types import Type
from inferplex.errors import InputError, InputTypeError
from inferplex.state.variables import (
    ASSIGN,
    READ_VALUE,
    STATE_DOMAIN,
    Variable,
    VariableSpec,
    variable_attributes,
)

__all__ = ["VariableNode", "assign", "read_value"]


class VariableNode(Node):
    """A built ``ReadValue`` or ``Assign``: it names its variable."""

    def get_variable_id(self) -> str:
        return self._onnx_nodes[0].attributes.get_string("variable_id", "")


def read_value(*args: Any, **kwargs: Any) -> VariableNode:
    """A ``ReadValue`` node: the variable's value, or its initial value before it is assigned."""
    init, spec, name = _read_value_arguments(list(args), dict(kwargs))
    inputs = [] if init is None else [init]
    if init is not None:
        spec = _fitted(spec, init)
    node = ir.node(READ_VALUE, inputs, attributes=variable_attributes(spec), domain=STATE_DOMAIN)
    output = node.outputs[0]
    output.type = ir.TensorType(spec.dtype)
    output.shape = None if spec.dims is None else ir.Shape(list(spec.dims))
    built = VariableNode(READ_VALUE, node.outputs, [node], name=name)
    node.name = built.get_friendly_name()
    return built


def assign(new_value: Any = None, variable: Any = "", name: str | None = None) -> VariableNode:
    """An ``Assign`` node: ``new_value`` becomes the variable's value for the next inference."""
    variable_id = _variable_id(variable)
    inputs = [] if new_value is None else [value_of(new_value)]
    node = ir.node(
        ASSIGN,
        inputs,
        attributes={"variable_id": variable_id},
        domain=STATE_DOMAIN,
        num_outputs=1 if inputs else 0,
    )
    if inputs:
        node.outputs[0].type, node.outputs[0].shape = inputs[0].type, inputs[0].shape
    built = VariableNode(ASSIGN, node.outputs, [node], name=name)
    node.name = built.get_friendly_name()
    return built


def _read_value_arguments(
    args: list[Any], kwargs: dict[str, Any]
) -> tuple[ir.Value | None, VariableSpec, str | None]:
    """The initial value (None: none), the variable and the name, from any of the four forms."""
    name = kwargs.pop("name", None)
    init = kwargs.pop("init_value", None)
    variable = kwargs.pop("ov_variable", kwargs.pop("variable_id", None))
    rest = list(args)
    if init is None and rest and not isinstance(rest[0], (str, Variable)):
        init = rest.pop(0)
    if variable is None:
        if not rest:
            raise InputError(
                "read_value needs a variable: read_value(init_value, 'id', type, shape), "
                "read_value('id', type, shape), read_value(variable) or "
                "read_value(init_value, variable)"
            )
        variable = rest.pop(0)
    init_value = None if init is None else value_of(init)
    if isinstance(variable, Variable):
        extra = ["variable_type", "variable_shape"]
    elif isinstance(variable, str):
        extra = []
    else:
        raise InputTypeError(
            f"read_value's variable is an id (str) or a Variable, not {type(variable).__name__}"
        )
    fields: dict[str, Any] = {}
    for key in ("variable_type", "variable_shape", "name"):
        if key in extra:
            continue
        if key in kwargs:
            fields[key] = kwargs.pop(key)
        elif rest:
            fields[key] = rest.pop(0)
    if kwargs or rest:
        raise InputError(
            f"read_value got unexpected arguments {sorted(kwargs) or rest}; accepted: init_value, "
            "variable_id, variable_type, variable_shape, name (or a Variable and a name)"
        )
    name = fields.get("name", name)
    if isinstance(variable, Variable):
        return init_value, variable.spec, name
    variable_type, variable_shape = fields.get("variable_type"), fields.get("variable_shape")
    dtype = ir.DataType.UNDEFINED if variable_type is None else Type(variable_type).data_type
    dims = None if variable_shape is None else parse_shape(variable_shape)
    return init_value, VariableSpec(variable, dtype, None if dims is None else tuple(dims)), name


def _fitted(spec: VariableSpec, init: ir.Value) -> VariableSpec:
    """``spec`` with the initial value's type and dims where it leaves them dynamic; InputError
    where it cannot take the initial value (another type, another rank or size)."""
    dtype = spec.dtype
    if init.dtype is not None and init.dtype != ir.DataType.UNDEFINED:
        if dtype == ir.DataType.UNDEFINED:
            dtype = init.dtype
        elif dtype != init.dtype:
            raise InputError(
                f"variable {spec.variable_id!r} is {Type(dtype).get_type_name()} but its initial "
                f"value is {Type(init.dtype).get_type_name()}; the variable's type must take it"
            )
    init_dims = None if init.shape is None else [d if isinstance(d, int) else d.value for d in init.shape]
    dims: tuple[Dim, ...] | None = spec.dims
    if dims is None:
        dims = None if init_dims is None else tuple(init_dims)
    elif init_dims is not None and not _takes(list(dims), init_dims):
        raise InputError(
            f"variable {spec.variable_id!r} has shape {format_dims(list(dims))}, which does not "
            f"take its initial value's {format_dims(init_dims)}; give a shape that does "
            "(or ? for a dimension that changes)"
        )
    return VariableSpec(spec.variable_id, dtype, dims)


def _takes(dims: list[Dim], given: list[Dim]) -> bool:
    """Whether a variable of ``dims`` takes values of ``given`` dims (same rank, equal static sizes)."""
    if len(dims) != len(given):
        return False
    return all(
        not isinstance(d, int) or not isinstance(g, int) or d == g for d, g in zip(dims, given, strict=True)
    )


def _variable_id(variable: Any) -> str:
    if isinstance(variable, Variable):
        return variable.spec.variable_id
    if isinstance(variable, str):
        return variable
    raise InputTypeError(f"assign's variable is an id (str) or a Variable, not {type(variable).__name__}")
