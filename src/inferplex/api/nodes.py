"""Nodes of OpenVINO's graph API over onnx-ir values: Parameter, Constant, Result and built ops.

A :class:`Node` is what ``inferplex.opset`` functions return: one OpenVINO
operation, made of one or more ONNX nodes, whose outputs are ``onnx_ir``
values with their element types and shapes already inferred.  ``ov.Model``
assembles the nodes reachable from its results into an ONNX graph.

:class:`Parameter` and :class:`Result` are also what ``Model.get_parameters()``
and ``get_results()`` return: there they are live views over the model's graph
inputs and outputs, so ``set_layout`` and ``set_partial_shape`` change the model.
Two views of one graph input, initializer, output or op compare (and hash) equal,
as OpenVINO's nodes do, so a set of visited nodes works in a graph walk.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Sequence
from typing import Any, TypeVar

import numpy as np
import onnx_ir as ir

from inferplex.api import layout_helpers
from inferplex.api.layout import Layout
from inferplex.api.reshape import Dim, parse_shape
from inferplex.api.types import Type
from inferplex.errors import InputError, InputIndexError

__all__ = ["ATTRIBUTES_KEY", "LAYOUT_KEY", "RESULT_KEY", "Constant", "Node", "Parameter", "Result",
           "next_name", "to_ir_dtype"]

LAYOUT_KEY = layout_helpers.LAYOUT_KEY

_FRIENDLY_KEY = "friendly_name"
_RT_INFO_KEY = "inferplex.rt_info"
"""``meta`` key (in memory, never saved) of a graph input's or initializer's node rt_info."""
ATTRIBUTES_KEY = "inferplex.openvino_attributes"
"""ONNX node metadata key of the OpenVINO attributes an op was made with (JSON)."""
RESULT_KEY = "inferplex.result"
"""``meta`` key of a graph output's :class:`_ResultSlot`: it moves to the new value on a rewire."""
_ids = itertools.count(1)

def to_ir_dtype(dtype: Any) -> ir.DataType:
    """An element type from anything ``ov.Type`` takes (``Type.f32``, ``np.float32``, ``"f32"``,
    ``"float32"``), or an object with ``to_dtype()``; the one table is ``Type``'s."""
    if not isinstance(dtype, Type) and callable(getattr(dtype, "to_dtype", None)):
        dtype = dtype.to_dtype()
    return Type(dtype).data_type


def next_name(type_name: str) -> str:
    """A new friendly name for an op of ``type_name`` (``Add_12``)."""
    return f"{type_name}_{next(_ids)}"


def _build(function: str, *operands: Any) -> Node:
    """The node ``inferplex.opset.<function>(*operands)`` builds (the opset module imports this one)."""
    from inferplex import opset

    node: Node = getattr(opset, function)(*operands)
    return node


class Node:
    """One operation: its outputs (onnx-ir values) and the ONNX nodes that compute them."""

    def __init__(self, type_name: str, outputs: Sequence[ir.Value], onnx_nodes: Sequence[ir.Node] = (),
                 name: str | None = None) -> None:
        self._type_name = type_name
        self._outputs = list(outputs)
        self._onnx_nodes = list(onnx_nodes)
        self._main = self._onnx_nodes[0] if self._onnx_nodes else None  # the node named after the op
        self._friendly = name or next_name(type_name)
        self._rt_info: dict[str, Any] = {}

    def get_type_name(self) -> str:
        """OpenVINO's op type (``Convolution``, ``MaxPool``, ``Parameter``, ...)."""
        return self._type_name

    def get_friendly_name(self) -> str:
        return self._friendly

    def set_friendly_name(self, name: str) -> None:
        """Rename the op; its ONNX node takes the name in models built afterwards."""
        self._friendly = str(name)
        if self._main is not None:
            self._main.name = self._friendly

    @property
    def friendly_name(self) -> str:
        return self.get_friendly_name()

    @friendly_name.setter
    def friendly_name(self, name: str) -> None:
        self.set_friendly_name(name)

    def get_rt_info(self) -> dict[str, Any]:
        return self._rt_info

    @property
    def rt_info(self) -> Any:
        return self.get_rt_info()

    def get_name(self) -> str:
        """The op's unique name (OpenVINO's ``get_name``): its friendly name, unique here."""
        return self.get_friendly_name()

    @property
    def name(self) -> str:
        return self.get_name()

    def set_argument(self, index: int, output: Any) -> None:
        """Input ``index`` reads ``output`` (an op's output, or an op of one output:
        ``input(index).replace_source_output(output)``)."""
        self.input(index).replace_source_output(output.output(0) if isinstance(output, Node) else output)

    def set_arguments(self, outputs: Sequence[Any]) -> None:
        """Each input reads the output given for it, in order."""
        if len(outputs) != len(self.inputs()):
            raise InputError(f"set_arguments: {self.get_type_name()} {self.get_friendly_name()!r} has "
                             f"{len(self.inputs())} inputs, got {len(outputs)} outputs")
        for index, output in enumerate(outputs):
            self.set_argument(index, output)

    _version_id = "opset13"
    """The opset named by :meth:`get_type_info` (OpenVINO's, for Parameter, Constant and Result)."""

    def get_type_info(self) -> Any:
        """OpenVINO's DiscreteTypeInfo of this op: its ``name``, ``version_id`` and ``parent``."""
        from types import SimpleNamespace

        return SimpleNamespace(name=self.get_type_name(), version_id=self._version_id, parent=None)

    @property
    def type_info(self) -> Any:
        return self.get_type_info()

    def get_instance_id(self) -> int:
        """An id shared by every view of the same op (two views of one Result compare equal)."""
        return id(self._identity())

    def _identity(self) -> object:
        """The object that is this op, whichever view reached it: its ONNX node, or the value it is."""
        return self._main if self._main is not None else self._outputs[0]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Node) and self._identity() is other._identity()  # noqa: SLF001

    def __hash__(self) -> int:
        return id(self._identity())

    _made_attributes: dict[str, Any] | None = None
    """OpenVINO's attributes the op was made with (by an :mod:`inferplex.opset` function or a
    :class:`~inferplex.utils.node_factory.NodeFactory`)."""

    def set_made_attributes(self, attributes: dict[str, Any]) -> None:
        """Record the OpenVINO attributes this op was made with: :meth:`get_attributes` gives them,
        here and on the model's views of the op (its ONNX node keeps them, as JSON, where they are
        plain values)."""
        self._made_attributes = dict(attributes)
        if self._main is not None:
            try:
                self._main.metadata_props[ATTRIBUTES_KEY] = json.dumps(self._made_attributes)
            except (TypeError, ValueError):  # a value JSON does not hold: this object keeps them
                self._main.metadata_props.pop(ATTRIBUTES_KEY, None)

    def get_attributes(self) -> dict[str, Any]:
        """The OpenVINO attributes the op was made with (by an opset function or a NodeFactory),
        else the ONNX node's attributes as Python values (ints, floats, strings, lists, numpy
        arrays)."""
        if self._made_attributes is not None:
            return dict(self._made_attributes)
        if self._main is None:
            return {}
        if ATTRIBUTES_KEY in self._main.metadata_props:
            return dict(json.loads(self._main.metadata_props[ATTRIBUTES_KEY]))
        return {name: _attribute_value(attr) for name, attr in self._main.attributes.items()}

    @property
    def onnx_nodes(self) -> list[ir.Node]:
        """The ONNX nodes this operation is made of (none for Parameter and Constant)."""
        return list(self._onnx_nodes)

    def output(self, index: int = 0) -> Any:
        from inferplex._ports import Port

        if not 0 <= index < len(self._outputs):
            raise InputIndexError(f"{self._type_name} {self.get_friendly_name()!r} has "
                                  f"{len(self._outputs)} output(s); index {index} is out of range")
        return Port(self._outputs[index], index, "output", live=True, node=self)

    def outputs(self) -> list[Any]:
        return [self.output(i) for i in range(len(self._outputs))]

    def get_output_size(self) -> int:
        return len(self._outputs)

    def _input_values(self) -> list[ir.Value]:
        if self._main is None:
            return []
        return [value for value in self._main.inputs if value is not None]

    def _replace_input(self, index: int, value: ir.Value) -> None:
        if self._main is None:
            raise InputError(f"{self._type_name} {self.get_friendly_name()!r} has no inputs to replace")
        from inferplex.api.model_edit import replace_node_input

        position = [i for i, v in enumerate(self._main.inputs) if v is not None][index]
        replace_node_input(self._main, position, value)

    def get_input_size(self) -> int:
        return len(self._input_values())

    def input(self, index: int) -> Any:
        """Input ``index`` of this op (OpenVINO's ``ov.Input``)."""
        from inferplex._ports import Input

        if not 0 <= index < self.get_input_size():
            raise InputIndexError(f"{self._type_name} {self.get_friendly_name()!r} has "
                                  f"{self.get_input_size()} input(s); index {index} is out of range")
        return Input(self, index)

    def inputs(self) -> list[Any]:
        return [self.input(i) for i in range(self.get_input_size())]

    def input_value(self, index: int) -> Any:
        """The output that input ``index`` reads."""
        return self.input(index).get_source_output()

    def get_output_tensor(self, index: int) -> Any:
        return self.output(index).get_tensor()

    def get_input_element_type(self, index: int) -> Any:
        return self.input(index).get_element_type()

    def get_input_partial_shape(self, index: int) -> Any:
        return self.input(index).get_partial_shape()

    def get_input_shape(self, index: int) -> Any:
        return self.input(index).get_shape()

    def get_input_tensor(self, index: int) -> Any:
        return self.input(index).get_tensor()

    def input_values(self) -> list[Any]:
        """The outputs every input reads, in input order."""
        return [self.input_value(i) for i in range(self.get_input_size())]

    # Arithmetic builds ops, as OpenVINO's Node operators do (``param + param`` is an Add).
    def __add__(self, other: Any) -> Node:
        return _build("add", self, other)

    def __radd__(self, other: Any) -> Node:
        return _build("add", other, self)

    def __sub__(self, other: Any) -> Node:
        return _build("subtract", self, other)

    def __rsub__(self, other: Any) -> Node:
        return _build("subtract", other, self)

    def __mul__(self, other: Any) -> Node:
        return _build("multiply", self, other)

    def __rmul__(self, other: Any) -> Node:
        return _build("multiply", other, self)

    def __truediv__(self, other: Any) -> Node:
        return _build("divide", self, other)

    def __rtruediv__(self, other: Any) -> Node:
        return _build("divide", other, self)

    def __neg__(self) -> Node:
        return _build("negative", self)

    def get_output_partial_shape(self, index: int = 0) -> Any:
        return self.output(index).get_partial_shape()

    def get_output_shape(self, index: int = 0) -> Any:
        return self.output(index).get_shape()

    def get_output_element_type(self, index: int = 0) -> Any:
        return self.output(index).get_element_type()

    def get_element_type(self) -> Any:
        """The element type of the only output; InputError for an op with several outputs."""
        self._check_one_output("get_element_type")
        return self.get_output_element_type(0)

    @property
    def element_type(self) -> Any:
        """The element type of the only output (OpenVINO's ``Parameter.element_type``)."""
        return self.get_element_type()

    def set_rt_info(self, value: Any, key: str) -> None:
        """``get_rt_info()[key] = value`` (OpenVINO's ``Node.set_rt_info``)."""
        self.get_rt_info()[key] = value

    def evaluate(self, output_tensors: list[Any], input_tensors: list[Any]) -> bool:
        """Compute the op on ``input_tensors`` (one per input) into ``output_tensors`` (one per
        output, written in place), on the CPU; False where it cannot (OpenVINO's
        ``Node.evaluate``)."""
        from inferplex.api.evaluate import evaluate_node

        return evaluate_node(self, output_tensors, input_tensors)

    @property
    def shape(self) -> Any:
        """The static shape of the only output (OpenVINO's ``Node.shape``); InputError when dynamic."""
        self._check_one_output("shape")
        return self.get_output_shape(0)

    def _check_one_output(self, what: str) -> None:
        if self.get_output_size() != 1:
            raise InputError(f"{what} needs an op with one output; {self.get_type_name()} "
                             f"{self.get_friendly_name()!r} has {self.get_output_size()}: use "
                             f"output(index).get_{'shape' if what == 'shape' else 'element_type'}()")

    def __repr__(self) -> str:
        """OpenVINO's form: ``<Relu: 'act' ([1,?])>``, each output's shape; a Parameter's element type too."""
        ports = self.outputs() or [port.get_source_output() for port in self.inputs()]
        described = [str(port.get_partial_shape()) for port in ports]
        if self._type_name == "Parameter":
            described.append(self.get_element_type().c_type_name())
        return f"<{self._type_name}: {self.get_friendly_name()!r} ({', '.join(described)})>"


_ViewedNode = TypeVar("_ViewedNode", bound="Node")


def _view_of(cls: type[_ViewedNode], type_name: str, value: ir.Value) -> _ViewedNode:
    """A ``cls`` node over an existing graph value (an input or initializer), not a new one: its
    rt_info lives on the value, so every view of it shares one."""
    node = cls.__new__(cls)
    Node.__init__(node, type_name, [value], name=value.name)
    node._rt_info = value.meta.setdefault(_RT_INFO_KEY, {})  # noqa: SLF001 - one per value
    return node


class Parameter(Node):
    """A model input (OpenVINO's ``op.Parameter(element_type, shape)``).

    Built in code it is a new graph input; from ``Model.get_parameters()`` it
    is a live view of one, whose layout and shape setters change the model.
    """

    _version_id = "opset1"

    def __init__(self, element_type: Any, shape: Any = (), name: str | None = None) -> None:
        value = ir.Value(name=name or next_name("Parameter"), type=ir.TensorType(to_ir_dtype(element_type)))
        dims = parse_shape(shape)
        value.shape = None if dims is None else ir.Shape(dims)
        super().__init__("Parameter", [value], name=value.name)

    @classmethod
    def view(cls, value: ir.Value) -> Parameter:
        """The Parameter of an existing graph input."""
        return _view_of(cls, "Parameter", value)

    def output(self, index: int = 0) -> Any:
        """The output; for a model's input, the same port as ``model.input(i)``."""
        from inferplex._ports import Port

        position = _position(self.value, self.value.graph.inputs) if self.value.graph is not None else None
        if index != 0 or position is None:
            return super().output(index)
        return Port(self.value, position, "input", live=True)

    def get_attributes(self) -> dict[str, Any]:
        return _tensor_attributes(self)

    @property
    def value(self) -> ir.Value:
        """The graph input (an onnx-ir value)."""
        return self._outputs[0]

    def get_friendly_name(self) -> str:
        return self.value.metadata_props.get(_FRIENDLY_KEY) or self.value.name or self._friendly

    def set_friendly_name(self, name: str) -> None:
        """Sets the display name only: the input's tensor name, used to feed it, stays."""
        self.value.metadata_props[_FRIENDLY_KEY] = str(name)

    def get_partial_shape(self) -> Any:
        return self.get_output_partial_shape(0)

    def set_partial_shape(self, shape: Any) -> None:
        """Set the input's shape (``Model.reshape`` also re-infers every downstream shape)."""
        dims = parse_shape(shape)
        self.value.shape = None if dims is None else ir.Shape(dims)

    def set_element_type(self, element_type: Any) -> None:
        self.value.type = ir.TensorType(to_ir_dtype(element_type))

    def get_layout(self) -> Layout:
        """The layout set on this input (``Layout()``, the empty one, when none is)."""
        return layout_helpers.get_layout(self.output(0))

    def set_layout(self, layout: Layout | str) -> None:
        """Set the layout: an ``ov.Layout`` or its text (``"NCHW"``, ``"[N,C,H,W]"``, ``"N..."``);
        an empty layout clears it.  InputError when it does not fit the input's rank."""
        layout_helpers.set_layout(self.output(0), layout)

    @property
    def layout(self) -> Layout:
        return self.get_layout()

    @layout.setter
    def layout(self, layout: Layout | str) -> None:
        self.set_layout(layout)


class Constant(Node):
    """A constant tensor: ``Constant(array)`` or ``Constant(element_type, shape, values)``."""

    def __init__(self, *args: Any, name: str | None = None, **kwargs: Any) -> None:
        kwargs.pop("shared_memory", None)
        array = _constant_array(args, kwargs)
        value = ir.Value(name=name, const_value=ir.tensor(array))
        value.type = ir.TensorType(value.const_value.dtype)  # type: ignore[union-attr]
        value.shape = ir.Shape(array.shape)
        super().__init__("Constant", [value], name=name)

    _version_id = "opset1"

    @classmethod
    def view(cls, value: ir.Value) -> Constant:
        """The Constant of an existing initializer."""
        return _view_of(cls, "Constant", value)

    def get_data(self) -> np.ndarray:
        """The constant's values (a numpy array; an ONNX ``Constant`` node's value too)."""
        value = self._outputs[0]
        if value.const_value is not None:
            return value.const_value.numpy()
        producer = value.producer()
        attributes = producer.attributes if producer is not None else {}
        for name, attr in attributes.items():
            if name.startswith("value"):  # Constant's one attribute: value, value_float, value_ints, ...
                return np.asarray(_attribute_value(attr))
        raise InputError(f"Constant {self.get_friendly_name()!r} holds no data inferplex can read")

    def get_attributes(self) -> dict[str, Any]:
        return _tensor_attributes(self)

    @property
    def data(self) -> np.ndarray:
        return self.get_data()

    def get_byte_size(self) -> int:
        """The bytes of the constant's values."""
        return int(self.get_data().nbytes)

    def get_vector(self) -> np.ndarray:
        return self.get_data().reshape(-1)


def _constant_array(args: Sequence[Any], kwargs: dict[str, Any]) -> np.ndarray:
    if len(args) >= 2 and not isinstance(args[1], bool):  # (element_type, shape[, values])
        dtype = np.dtype(to_ir_dtype(args[0]).numpy())
        dims = parse_shape(args[1])
        if dims is None or not all(isinstance(d, int) for d in dims):
            raise InputError(f"a constant needs a static shape, got {args[1]!r}")
        values = args[2] if len(args) > 2 else kwargs.pop("values", 0)
        data = np.asarray(values, dtype=dtype)
        shape = tuple(int(d) for d in dims)  # type: ignore[arg-type]
        if data.size == 1 and int(np.prod(shape)) != 1:
            return np.full(shape, data.reshape(()), dtype=dtype)
        if data.size != int(np.prod(shape)):
            raise InputError(f"a constant of shape {list(shape)} needs {int(np.prod(shape))} values, "
                             f"got {data.size}")
        return data.reshape(shape)
    if not args:
        raise InputError("Constant needs a value: Constant(array) or Constant(element_type, shape, values)")
    value = args[0]
    value = getattr(value, "data", value) if not isinstance(value, np.ndarray) else value
    return np.array(value)


class _ResultSlot:
    """One model output, as OpenVINO's Result node: its rt_info; what it outputs may change."""

    __slots__ = ("friendly_name", "rt_info")

    def __init__(self) -> None:
        self.rt_info: dict[str, Any] = {}
        self.friendly_name: str | None = None  # set_friendly_name's; else the output's name


class Result(Node):
    """A model output: ``opset.result(node)``, or a view from ``Model.get_results()``.

    A view follows its graph output: after ``result.input(0).replace_source_output(x)``
    it outputs ``x`` and keeps the output's names.
    """

    _version_id = "opset1"

    def __init__(self, source: ir.Value, name: str | None = None) -> None:
        super().__init__("Result", [source], name=name)
        self._graph: ir.Graph | None = None
        self._slot: _ResultSlot | None = None

    @classmethod
    def view(cls, value: ir.Value) -> Result:
        """The Result of one of a graph's outputs (``value``)."""
        node = cls(value, name=value.name)
        node._graph = value.graph
        node._slot = value.meta.setdefault(RESULT_KEY, _ResultSlot())
        node._rt_info = node._slot.rt_info
        return node

    @property
    def value(self) -> ir.Value:
        """The value this result outputs."""
        if self._graph is not None:
            for value in self._graph.outputs:
                if value.meta.get(RESULT_KEY) is self._slot:
                    self._outputs[0] = value
                    break
        return self._outputs[0]

    def _identity(self) -> object:
        return self._slot if self._slot is not None else self

    def get_friendly_name(self) -> str:
        if self._graph is None:
            return self._friendly
        assert self._slot is not None
        return self._slot.friendly_name or self.value.name or self._friendly

    def set_friendly_name(self, name: str) -> None:
        """Sets the display name only: the output's tensor name, by which results are read, stays."""
        if self._slot is None:
            super().set_friendly_name(name)
        else:
            self._slot.friendly_name = str(name)

    def output(self, index: int = 0) -> Any:
        """The output; for a model's Result, the same port as ``model.output(i)``."""
        from inferplex._ports import Port

        value = self.value
        position = _position(value, self._graph.outputs) if self._graph is not None else None
        if index != 0 or position is None:
            return super().output(index)
        return Port(value, position, "output", live=True)

    def _input_values(self) -> list[ir.Value]:
        return [self.value]

    def _replace_input(self, index: int, value: ir.Value) -> None:
        if self._graph is None:
            self._outputs[0] = value
            return
        from inferplex.api.model_edit import replace_result_source

        self._outputs[0] = replace_result_source(self._graph, self.value, value)


def _position(value: ir.Value, values: Sequence[ir.Value]) -> int | None:
    return next((i for i, v in enumerate(values) if v is value), None)


def _tensor_attributes(node: Node) -> dict[str, Any]:
    """OpenVINO's attributes of a Parameter or Constant: its element type and shape."""
    shape = node.get_output_partial_shape(0)
    dims = [int(d.get_length()) for d in shape] if shape.is_static else str(shape)
    return {"element_type": node.get_output_element_type(0).get_type_name(), "shape": dims}


def _attribute_value(attr: Any) -> Any:
    """An ONNX attribute as a Python value: tensors as numpy arrays, repeated fields as lists."""
    value = attr.value
    if isinstance(value, ir.TensorProtocol):
        return value.numpy()
    if isinstance(value, Sequence) and not isinstance(value, (str, bytes)):
        return [v.numpy() if isinstance(v, ir.TensorProtocol) else v for v in value]
    return value


def dims_of(value: ir.Value) -> list[Dim] | None:
    """A value's dims: ints, range or symbol names, None for unknown dims; None for an unknown rank."""
    if value.shape is None:
        return None
    return [d if isinstance(d, int) else d.value for d in value.shape]
