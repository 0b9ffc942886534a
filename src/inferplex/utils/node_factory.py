"""OpenVINO's ``NodeFactory``: ops made by their type name, inputs and attributes.

``NodeFactory("opset8").create("TopK", [data, k], {"axis": 1, "mode": "max", "sort": "value"})``
builds the op as reading it from an OpenVINO IR does (:data:`~inferplex.api.ir.ops.BUILDERS`: the
IR's attribute names, each op in the latest of its versions up to the factory's opset).  An op made
with neither inputs nor attributes is built when ``validate()`` is called, after ``set_arguments``
and ``set_attribute``.  The made op's ``get_attributes()`` gives the attributes it was made with.
Ops whose attributes are bodies (If, Loop, TensorIterator) and extension libraries are not taken.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx_ir as ir

from inferplex._opsets.build import constant_data, int64
from inferplex._ports import Port
from inferplex.api.nodes import Node, next_name
from inferplex.errors import InputError, ModelError

__all__ = ["NodeFactory"]

_BODIES = ("If", "Loop", "TensorIterator")


class NodeFactory:
    """Makes ops of one opset (``"opset1"`` ... ``"opset16"``; the latest by default) by type name."""

    def __init__(self, opset_version: str = "opset16") -> None:
        text = str(opset_version)
        number = text.removeprefix("opset")
        if not number.isdigit() or not 1 <= int(number) <= 16:
            raise InputError(f"NodeFactory takes an opset name 'opset1' ... 'opset16', got {opset_version!r}")
        self._opset = int(number)

    def create(self, op_type_name: str, arguments: Sequence[Any] | None = None,
               attributes: dict[str, Any] | None = None) -> Node:
        """The op ``op_type_name`` reading ``arguments`` (outputs, or ops: all their outputs) with
        ``attributes``; with neither, an op to complete with ``set_arguments``, ``set_attribute``
        and ``validate``."""
        if arguments is None and attributes is None:
            return _PendingNode(self, str(op_type_name))
        if arguments is None:
            raise InputError(f'cannot create "{op_type_name}" op without arguments; give its inputs')
        return self.build(str(op_type_name), self._arguments_as_outputs(arguments), dict(attributes or {}))

    def build(self, type_name: str, outputs: list[Port], attributes: dict[str, Any]) -> Node:
        """The op, from its inputs as output ports."""
        from inferplex.api.ir.ops import BUILDERS, VERSIONS

        if type_name not in BUILDERS or type_name in _BODIES:
            raise ModelError(f"NodeFactory cannot make {type_name!r}: ops with bodies (If, Loop, "
                             "TensorIterator) and unknown types are not taken; the types it makes are "
                             "those an OpenVINO IR may hold (e.g. 'Add', 'Convolution', 'TopK')")
        versions = sorted(v for v in VERSIONS.get(type_name, {self._opset}) if v <= self._opset)
        if not versions:
            raise ModelError(f"{type_name} is not in opset{self._opset}; it comes in opset "
                             f"{min(VERSIONS[type_name])}")
        view = _View(type_name, versions[-1], attributes, outputs)
        try:
            built = BUILDERS[type_name](view)
        except (KeyError, IndexError) as error:
            raise InputError(f"{type_name} needs the attribute or input {error}; it was given attributes "
                             f"{sorted(attributes)} and {len(outputs)} inputs") from error
        built.set_made_attributes(attributes)
        return built

    def add_extension(self, extension: Any) -> None:
        raise ModelError("NodeFactory.add_extension: inferplex loads no extension libraries; build the "
                         "op from inferplex.opset functions, or read a model that holds it")

    @staticmethod
    def _arguments_as_outputs(arguments: Sequence[Any]) -> list[Port]:
        outputs: list[Port] = []
        for argument in arguments:
            if isinstance(argument, Port):
                outputs.append(argument)
            elif isinstance(argument, Node):
                outputs.extend(argument.outputs())
            else:
                raise InputError(f"NodeFactory arguments are ops or their outputs, got "
                                 f"{type(argument).__name__}")
        return outputs


class _View:
    """What an IR builder (:class:`inferplex.api.ir.ops.OpView`) sees of an op made by a factory."""

    node = None

    def __init__(self, type_name: str, version: int, attributes: dict[str, Any], outputs: list[Port]) -> None:
        self.type_name, self.version, self.attrs = type_name, version, attributes
        self.name = next_name(type_name)
        self._outputs = outputs
        self.size = len(outputs)

    def value(self, index: int) -> Port:
        return self._outputs[index]

    def dtype(self, index: int) -> ir.DataType | None:
        return self._outputs[index]._value.dtype  # noqa: SLF001 - same package

    def constant(self, index: int, what: str) -> np.ndarray:
        data = constant_data(self._outputs[index])
        if data is None:
            raise InputError(f"{what} must be constant (a Constant op's output); this one is computed")
        return data

    def arg(self, index: int) -> Any:
        data = constant_data(self._outputs[index])
        return data if data is not None else self._outputs[index]

    def ints(self, index: int) -> Any:
        data = constant_data(self._outputs[index])
        return np.asarray(data, np.int64) if data is not None else int64(self._outputs[index])

    def used(self, index: int) -> bool:
        return True


class _PendingNode(Node):
    """An op made by type name alone: it takes its inputs and attributes, then ``validate`` builds
    it and it becomes that op."""

    def __init__(self, factory: NodeFactory, type_name: str) -> None:
        super().__init__(type_name, [], [])
        self._pending: tuple[NodeFactory, list[Port], dict[str, Any]] | None = (factory, [], {})

    def set_arguments(self, outputs: Sequence[Any]) -> None:
        if self._pending is None:
            super().set_arguments(outputs)
            return
        self._pending[1][:] = NodeFactory._arguments_as_outputs(outputs)  # noqa: SLF001 - same module

    def set_attribute(self, name: str, value: Any) -> None:
        if self._pending is None:
            raise InputError(f"{self.get_type_name()} {self.get_friendly_name()!r} is built; its "
                             "attributes are set when it is made")
        self._pending[2][str(name)] = value

    def validate(self) -> None:
        """Build the op from the inputs and attributes given (again: a built op has nothing to do)."""
        if self._pending is None:
            return
        factory, outputs, attributes = self._pending
        if not outputs:
            raise InputError(f"{self.get_type_name()}: set_arguments before validate; the op has no inputs")
        built = factory.build(self.get_type_name(), outputs, attributes)
        friendly = self._friendly
        self.__dict__.update(built.__dict__)
        self.set_friendly_name(friendly)
        self._pending = None

    def validate_and_infer_types(self) -> None:
        self.validate()
