"""Variables (OpenVINO's ``op.util.VariableInfo`` and ``op.util.Variable``) and how a graph holds them.

``ReadValue`` and ``Assign`` are ONNX nodes of the :data:`STATE_DOMAIN` domain. Their attributes
name the variable (``variable_id``) and, on ``ReadValue``, its element type (``variable_type``,
an ONNX element type, 0 when dynamic) and shape (``variable_shape``, OpenVINO's spelling:
``[2,?]``, ``[...]``). Variables that no node names (``Model.add_variables``) are listed in the
model's ``metadata_props`` under :data:`DECLARED_KEY`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import onnx_ir as ir

from inferplex.api.reshape import Dim, format_dims, parse_shape
from inferplex.api.shapes import PartialShape
from inferplex.api.types import Type
from inferplex.errors import InputTypeError

__all__ = [
    "ASSIGN",
    "DECLARED_KEY",
    "READ_VALUE",
    "STATE_DOMAIN",
    "Variable",
    "VariableInfo",
    "VariableSpec",
    "declared_variables",
    "is_state_node",
    "node_variable",
    "set_declared_variables",
]

STATE_DOMAIN = "ai.inferplex.state"
"""The ONNX domain of ``ReadValue`` and ``Assign`` nodes."""
READ_VALUE = "ReadValue"
ASSIGN = "Assign"
DECLARED_KEY = "inferplex.variables"
"""Model ``metadata_props`` key: a JSON list of the variables declared without a node."""


@dataclass(frozen=True)
class VariableSpec:
    """What a graph says of one variable: its id, element type and dims (None: dynamic rank)."""

    variable_id: str
    dtype: ir.DataType
    dims: tuple[Dim, ...] | None

    def info(self) -> VariableInfo:
        info = VariableInfo()
        info.variable_id = self.variable_id
        info.data_type = Type(self.dtype)
        info.data_shape = PartialShape(format_dims(self.dims))
        return info


class VariableInfo:
    """A variable's id, element type and shape (OpenVINO's ``op.util.VariableInfo``): a dynamic
    type and shape until they are set."""

    def __init__(self) -> None:
        self.variable_id = ""
        self.data_type: Any = Type.dynamic
        self.data_shape: Any = PartialShape.dynamic()

    def spec(self) -> VariableSpec:
        """The variable as the graph's attributes describe it; InputTypeError for fields of the wrong type."""
        if not isinstance(self.variable_id, str):
            raise InputTypeError(
                f"VariableInfo.variable_id must be a str, not {type(self.variable_id).__name__}"
            )
        dims = parse_shape(self.data_shape)
        return VariableSpec(
            self.variable_id, Type(self.data_type).data_type, None if dims is None else tuple(dims)
        )

    def __repr__(self) -> str:
        return (
            f"<VariableInfo: {self.variable_id!r} {Type(self.data_type).get_type_name()} {self.data_shape}>"
        )


class Variable:
    """A variable (OpenVINO's ``op.util.Variable``): ``Variable(info)``, read by ``read_value`` and
    written by ``assign``.  Two Variables are the same variable when their ids are equal."""

    def __init__(self, info: VariableInfo | None = None) -> None:
        if info is not None and not isinstance(info, VariableInfo):
            raise InputTypeError(f"Variable takes a VariableInfo, not {type(info).__name__}")
        self._spec = (info or VariableInfo()).spec()

    @classmethod
    def of(cls, spec: VariableSpec) -> Variable:
        variable = cls.__new__(cls)
        variable._spec = spec
        return variable

    @property
    def spec(self) -> VariableSpec:
        return self._spec

    def get_info(self) -> VariableInfo:
        return self._spec.info()

    @property
    def info(self) -> VariableInfo:
        return self.get_info()

    def update(self, info: VariableInfo) -> None:
        """Replace the variable's type and shape (and id) by ``info``'s."""
        self._spec = info.spec()

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Variable) and other._spec.variable_id == self._spec.variable_id

    def __hash__(self) -> int:
        return hash(self._spec.variable_id)

    def __repr__(self) -> str:
        return "<Variable>"


def is_state_node(node: ir.Node, op_type: str | None = None) -> bool:
    """Whether ``node`` is a ``ReadValue`` or ``Assign`` (or the one ``op_type`` names)."""
    return node.domain == STATE_DOMAIN and (
        node.op_type == op_type if op_type else node.op_type in (READ_VALUE, ASSIGN)
    )


def node_variable(node: ir.Node) -> VariableSpec:
    """The variable a ``ReadValue`` or ``Assign`` node names (an ``Assign`` types it by its input)."""
    variable_id = node.attributes.get_string("variable_id", "")
    if node.op_type == READ_VALUE:
        dtype = ir.DataType(node.attributes.get_int("variable_type", 0))
        dims = parse_shape(node.attributes.get_string("variable_shape", "[...]"))
        return VariableSpec(variable_id, dtype, None if dims is None else tuple(dims))
    source = node.inputs[0] if node.inputs else None
    dtype = source.dtype if source is not None and source.dtype is not None else ir.DataType.UNDEFINED
    held: tuple[Dim, ...] | None = None
    if source is not None and source.shape is not None:
        held = tuple(d if isinstance(d, int) else d.value for d in source.shape)
    return VariableSpec(variable_id, dtype, held)


def variable_attributes(spec: VariableSpec) -> dict[str, Any]:
    """A ``ReadValue`` node's attributes for ``spec``."""
    return {
        "variable_id": spec.variable_id,
        "variable_type": int(spec.dtype),
        "variable_shape": format_dims(spec.dims),
    }


def declared_variables(model: ir.Model) -> list[VariableSpec]:
    """The variables ``model`` lists without a node (``Model.add_variables``)."""
    text = model.metadata_props.get(DECLARED_KEY)
    if not text:
        return []
    specs = []
    for entry in json.loads(text):
        dims = parse_shape(entry["shape"])
        specs.append(
            VariableSpec(entry["id"], ir.DataType(entry["type"]), None if dims is None else tuple(dims))
        )
    return specs


def set_declared_variables(model: ir.Model, specs: Iterable[VariableSpec]) -> None:
    entries = [{"id": s.variable_id, "type": int(s.dtype), "shape": format_dims(s.dims)} for s in specs]
    if entries:
        model.metadata_props[DECLARED_KEY] = json.dumps(entries)
    else:
        model.metadata_props.pop(DECLARED_KEY, None)
