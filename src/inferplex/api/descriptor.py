"""``port.tensor`` / ``port.get_tensor()``: the description of the tensor a port carries.

OpenVINO's ``DescriptorTensor``: its names, element type, shape and byte size.
Code written for OpenVINO reads it to size inputs (``sync_benchmark2`` checks
``tensor.size`` and fills ``tensor.shape`` random values of ``tensor.element_type``).
Here it is a view over a model's port: it reads what the port reads, so after a
``Model.reshape`` it shows the new shape, as OpenVINO's does.
"""

from __future__ import annotations

from collections.abc import MutableMapping
from math import prod
from typing import Any

from inferplex.api.shapes import PartialShape, Shape
from inferplex.api.types import Type

__all__ = ["DescriptorTensor"]


class DescriptorTensor:
    """The tensor a model input or output carries (OpenVINO's ``openvino.DescriptorTensor``).

    ``size`` is in bytes, as OpenVINO's: ``[1, 1, 1, 1]`` f32 is 4; sub-byte types round up
    (u4 ``[3]``: 2).  ``shape`` and ``size`` raise ``InputError`` for a dynamic shape, as
    OpenVINO's raise; ``partial_shape`` always reads.
    """

    def __init__(self, port: Any) -> None:
        self._port = port

    @property
    def names(self) -> set[str]:
        return set(self._port.get_names())

    @names.setter
    def names(self, names: Any) -> None:
        self._port.set_names(names)

    def get_names(self) -> set[str]:
        return self.names

    def set_names(self, names: Any) -> None:
        """Rename the tensor (OpenVINO's ``set_names``): see :meth:`inferplex.Port.set_names`."""
        self._port.set_names(names)

    def add_names(self, names: Any) -> None:
        self._port.add_names(names)

    @property
    def any_name(self) -> str:
        return str(self._port.get_any_name())

    def get_any_name(self) -> str:
        return self.any_name

    @property
    def element_type(self) -> Type:
        return self._port.get_element_type()

    def get_element_type(self) -> Type:
        return self.element_type

    @property
    def partial_shape(self) -> PartialShape:
        return self._port.get_partial_shape()

    def get_partial_shape(self) -> PartialShape:
        return self.partial_shape

    @property
    def shape(self) -> Shape:
        return self._port.get_shape()

    def get_shape(self) -> Shape:
        return self.shape

    @property
    def size(self) -> int:
        """Bytes of one tensor of this shape and element type."""
        return (prod(self.shape) * self.element_type.get_bitwidth() + 7) // 8

    # Bounds and value symbols: what OpenVINO's shape inference may know of the tensor's values.
    # They live with the port's value for the life of the graph (not saved with the model).

    def _meta(self) -> Any:
        return self._port._value.meta  # noqa: SLF001 - the port of this package

    def set_lower_value(self, value: Any) -> None:
        self._meta()["lower_value"] = value

    def get_lower_value(self) -> Any:
        return self._meta().get("lower_value")

    def set_upper_value(self, value: Any) -> None:
        self._meta()["upper_value"] = value

    def get_upper_value(self) -> Any:
        return self._meta().get("upper_value")

    def set_value_symbol(self, symbols: Any) -> None:
        self._meta()["value_symbol"] = list(symbols)

    def get_value_symbol(self) -> list[Any]:
        return list(self._meta().get("value_symbol", []))

    @property
    def rt_info(self) -> MutableMapping[str, str]:
        return self._port.get_rt_info()

    def get_rt_info(self) -> MutableMapping[str, str]:
        return self.rt_info

    def __repr__(self) -> str:
        names = ", ".join(sorted(self.names))
        element = self.element_type.get_type_name()
        return f"<DescriptorTensor: names[{names}] shape{self.partial_shape} type: {element}>"
