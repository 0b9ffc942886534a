"""Port and Op: OpenVINO's views of a model's inputs and outputs and of its operations, over onnx-ir.

A port reads its value's element type and shape when asked (``live``, after a
reshape or a PrePostProcessor build) or as they were when it was taken
(``snapshot``, a compiled model's ports).  An op's ``rt_info`` is stored in the
node's ``metadata_props``, so manual affinities survive a save/load round trip.

Walking a graph goes through :func:`source_node`: a value is made by an op
(:class:`Op`), is an initializer (a ``Constant``) or a graph input (a
``Parameter``); the graph's outputs are ``Result`` nodes.  ONNX files often give
no type or shape for the values between ops: the first time a walk asks for one,
ONNX shape inference fills in those of the whole graph (declared ones stay).
"""

from __future__ import annotations

import weakref
from collections.abc import Iterator, MutableMapping, Sequence
from typing import Any

import numpy as np
import onnx_ir as ir

from inferplex.api.nodes import Constant, Node, Parameter, Result
from inferplex.api.reshape import as_dimension
from inferplex.api.shapes import PartialShape, Shape
from inferplex.api.types import Type
from inferplex.config.any_value import OVAny
from inferplex.errors import InputError, InputIndexError

__all__ = ["ElementType", "Input", "Op", "Port", "RTMap", "find_port", "op_of", "port_listing", "source_node"]

_NAMES_KEY = "names"
"""metadata_props key of a value's extra tensor names (OpenVINO tensors have several; ONNX one)."""

Dim = int | str | None


ElementType = Type
"""The element type of a port: :class:`inferplex.Type` (kept as an alias of it)."""


def _element_type(value: ir.Value) -> Type:
    return Type.dynamic if value.dtype is None else Type(value.dtype)


_TYPED_KEY = "inferplex.types_inferred"
_OPENVINO_TYPE_KEY = "inferplex.openvino_type"
"""The OpenVINO op type an opset function built a node as (``inferplex._opsets.build``)."""
_OWN_PREFIX = "inferplex."
"""metadata_props keys inferplex keeps for itself: rt_info views do not list them."""
"""Graph ``meta`` flag: shape inference filled in the values' missing types (cleared by edits)."""
_IR_VERSION = 10
"""IR version of the shell model that shape inference reads a graph through."""


def _typed(value: ir.Value) -> ir.Value:
    """``value``, with the type and shape ONNX shape inference finds where its graph gives none."""
    graph = value.graph
    if (value.type is not None and value.shape is not None) or graph is None or graph.meta.get(_TYPED_KEY):
        return value
    graph.meta[_TYPED_KEY] = True
    from inferplex.shape_inference import infer, proto_dims, weightless_copy

    try:
        inferred = infer(weightless_copy(ir.Model(graph, ir_version=_IR_VERSION)), strict=False)
    except Exception:  # noqa: BLE001 - what inference cannot find stays unknown, as declared
        return value
    infos = {info.name: info.type.tensor_type for info in [*inferred.graph.value_info, *inferred.graph.output]
             if info.type.HasField("tensor_type")}
    for node in graph:
        for output in node.outputs:
            tensor = infos.get(output.name or "")
            if tensor is None:
                continue
            if output.type is None and tensor.elem_type:
                output.type = ir.TensorType(ir.DataType(tensor.elem_type))
            if output.shape is None and tensor.HasField("shape") and output.type is not None:
                output.shape = ir.Shape(list(proto_dims(tensor.shape)))
    return value


def graph_changed(graph: ir.Graph) -> None:
    """Forget what shape inference found for ``graph``: an edit added values to it."""
    graph.meta.pop(_TYPED_KEY, None)


def _dims(value: ir.Value) -> tuple[Dim, ...] | None:
    if value.shape is None:
        return None
    return tuple(d if isinstance(d, int) else getattr(d, "value", None) for d in value.shape)


_NAMED_TENSORS: weakref.WeakSet[ir.Value] = weakref.WeakSet()
"""Values a program named with ``set_names``: a built model's outputs keep these names, as
OpenVINO's outputs are their tensors' names (a Result's friendly name names only the op)."""


def named_by_program(value: ir.Value) -> bool:
    """Whether ``value``'s name was given with ``set_names`` (not chosen by inferplex)."""
    return value in _NAMED_TENSORS


class Port:
    """An input or output of a model (OpenVINO's ``ConstOutput``).

    A model's ports are live: after ``model.reshape`` a port taken before shows
    the new shape, as in OpenVINO.  A compiled model keeps snapshots of the
    ports it was compiled with (:meth:`snapshot`), since its program does not
    change when the model does.
    """

    def __init__(self, value: ir.Value, index: int, kind: str, live: bool = False,
                 node: Any = None) -> None:
        self._value = value
        self.index = index
        self.kind = kind  # "input" or "output"
        self._live = live
        self._node = node
        self._refresh()

    def _refresh(self) -> None:
        value, kind, index = self._value, self.kind, self.index
        if self._node is not None:  # an op's output: between ops, ONNX files often give no type
            _typed(value)
        self._name = value.name or f"{kind}_{index}"
        self._element = _element_type(value)
        self._dims = _dims(value)

    def snapshot(self) -> Port:
        """A port that keeps today's name, type and shape whatever later reshapes do."""
        return Port(self._value, self.index, self.kind, node=self._node)

    def get_node(self) -> Any:
        """The node this port belongs to: a Parameter for a model input, a Result for an output."""
        if self._node is None:
            return Parameter.view(self._value) if self.kind == "input" else Result.view(self._value)
        return self._node

    @property
    def node(self) -> Any:
        return self.get_node()

    def get_index(self) -> int:
        """The output index on its node (0 for a model's inputs and outputs)."""
        return self.index if self._node is not None else 0

    @property
    def any_name(self) -> str:
        if self._live:
            self._refresh()
        return self._name

    def get_any_name(self) -> str:
        return self.any_name

    @property
    def names(self) -> set[str]:
        """Every name of the tensor: the ONNX value's name and the extra ones set with ``set_names``."""
        extra = self._value.metadata_props.get(_NAMES_KEY, "")
        return {self.any_name, *(n for n in extra.split("\n") if n)}

    @names.setter
    def names(self, names: Any) -> None:
        self.set_names(names)

    def get_names(self) -> set[str]:
        return self.names

    def set_names(self, names: Any) -> None:
        """Give the tensor these names (a set of str): the first in sorted order becomes the
        ONNX value's name (what ``any_name`` reads), unless the current name is among them."""
        wanted = {str(n) for n in names}
        if not wanted:
            self._value.metadata_props.pop(_NAMES_KEY, None)
            return
        primary = self._value.name if self._value.name in wanted else min(wanted)
        self._value.name = primary
        _NAMED_TENSORS.add(self._value)
        extra = sorted(wanted - {primary})
        if extra:
            self._value.metadata_props[_NAMES_KEY] = "\n".join(extra)
        else:
            self._value.metadata_props.pop(_NAMES_KEY, None)
        self._refresh()

    def add_names(self, names: Any) -> None:
        self.set_names(self.names | {str(n) for n in names})

    def get_target_inputs(self) -> set[Input]:
        """The inputs this output feeds: of ops (in a model, or built on it) and of the model's Results."""
        targets = set()
        for node, index in self._value.uses():
            op = op_of(node)
            position = sum(1 for value in node.inputs[:index] if value is not None)
            targets.add(Input(op, position))
        graph = self._value.graph
        if self._value.is_graph_output() and graph is not None:
            targets.update(Input(Result.view(value), 0) for value in graph.outputs if value is self._value)
        return targets

    def replace(self, replacement: Port) -> None:
        """Feed every consumer of this output, the model's Results included, from ``replacement``
        instead; the replacement takes this output's names too (as OpenVINO's ``Output.replace``;
        the replacement's own op keeps reading this output)."""
        names, owner = self.names, replacement.get_node()
        for target in self.get_target_inputs():
            if target.get_node() != owner:
                target.replace_source_output(replacement)
        replacement.add_names(names)

    @property
    def is_tensor(self) -> bool:
        """False for sequence, optional and map ports, whose values are lists or None."""
        return self._value.type is None or isinstance(self._value.type, ir.TensorType)

    @property
    def element_type(self) -> Type:
        """The element type; ``Type.dynamic`` when the model does not say."""
        if self._live:
            self._refresh()
        return self._element

    def get_element_type(self) -> Type:
        return self.element_type

    @property
    def dims(self) -> tuple[Dim, ...] | None:
        """Dims as ints, symbolic names or ranges (str, ``"1..8"``) or None; None when the rank is unknown.

        inferplex's own view, kept for the symbol names ONNX gives dynamic dims
        (inputs must agree on a symbol); OpenVINO's view is :attr:`partial_shape`.
        """
        if self._live:
            self._refresh()
        return self._dims

    @property
    def partial_shape(self) -> PartialShape:
        """The shape, with ``?`` for dynamic dims, ``1..8`` for ranges and ``[...]`` for an unknown rank."""
        dims = self.dims
        if dims is None:
            return PartialShape.dynamic()
        return PartialShape([as_dimension(d) for d in dims])

    def get_partial_shape(self) -> PartialShape:
        return self.partial_shape

    @property
    def is_dynamic(self) -> bool:
        dims = self.dims
        return dims is None or any(not isinstance(d, int) for d in dims)

    @property
    def shape(self) -> Shape:
        """Static shape; InputError when some dimension is dynamic."""
        if self.is_dynamic:
            raise InputError(f"{self.kind} {self.any_name!r} has a dynamic shape "
                             f"{self.partial_shape}; use partial_shape, or reshape the model "
                             "to static dims")
        return Shape(self.dims or ())

    def get_shape(self) -> Shape:
        return self.shape

    def get_rt_info(self) -> MutableMapping[str, str]:
        """String properties of the tensor (its ``layout``, ...), stored in the ONNX graph."""
        return RTMap(self._value.metadata_props)

    @property
    def rt_info(self) -> MutableMapping[str, str]:
        return self.get_rt_info()

    @property
    def tensor(self) -> Any:
        """The tensor this port carries: names, element type, shape, byte size (a DescriptorTensor)."""
        from inferplex.api.descriptor import DescriptorTensor

        return DescriptorTensor(self)

    def get_tensor(self) -> Any:
        return self.tensor

    def __repr__(self) -> str:
        """OpenVINO's form: ``<Output: names[A] shape[?,2] type: f32>`` for a model's or an op's port,
        ``<ConstOutput: ...>`` for a compiled model's."""
        return self.described("Output" if self._live else "ConstOutput")

    def described(self, kind: str) -> str:
        """``<kind: names[A] shape[?,2] type: f32>``."""
        names = ",".join(sorted(self.names))
        return f"<{kind}: names[{names}] shape{self.partial_shape} type: {self.element_type.get_type_name()}>"

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, Port) and other.kind == self.kind and other.index == self.index
                and other.any_name == self.any_name)

    def __hash__(self) -> int:
        return hash((self.kind, self.index, self.any_name))


class RtValue(str):
    """One ``rt_info`` value: a string that also answers as OpenVINO's ``OVAny`` does
    (``astype(str)``, ``value``, ``aslist()``), so programs written for either read it."""

    __slots__ = ()

    @property
    def value(self) -> str:
        return str(self)

    def astype(self, kind: type) -> Any:
        """The value as ``kind`` (str, int, float, bool; list for a comma-separated list)."""
        if kind is bool:
            return self.strip().lower() in ("1", "true", "yes")
        if kind is list:
            return self.aslist()
        return kind(str(self))

    def aslist(self, kind: type = str) -> list[Any]:
        return [kind(part.strip()) for part in str(self).split(",") if part.strip()]

    def get(self) -> str:
        return str(self)


OVAny.register(RtValue)


class RTMap(MutableMapping[str, str]):
    """``get_rt_info()`` (OpenVINO's ``RTMap``): a dict view over a node's or value's
    metadata_props; values read back as :class:`RtValue` (OpenVINO's ``OVAny``)."""

    def __init__(self, props: MutableMapping[str, str]) -> None:
        self._props = props

    def __getitem__(self, key: str) -> str:
        return RtValue(self._props[key])

    def __setitem__(self, key: str, value: Any) -> None:
        self._props[str(key)] = str(value)

    def __delitem__(self, key: str) -> None:
        del self._props[key]

    def __iter__(self) -> Iterator[str]:
        return iter([key for key in self._props if not key.startswith(_OWN_PREFIX)])

    def __len__(self) -> int:
        return sum(1 for key in self._props if not key.startswith(_OWN_PREFIX))


_RtInfo = RTMap


class Input:
    """One input of a node (OpenVINO's ``ov.Input``): where it reads from and what it carries."""

    def __init__(self, node: Any, index: int) -> None:
        self._owner = node
        self._index = index
        self._rt: dict[str, str] = {}

    def _source(self) -> ir.Value:
        return self._owner._input_values()[self._index]  # noqa: SLF001 - node classes of this package

    def get_node(self) -> Any:
        return self._owner

    def get_index(self) -> int:
        return self._index

    def get_element_type(self) -> Type:
        return _element_type(_typed(self._source()))

    def get_partial_shape(self) -> PartialShape:
        return self.get_source_output().get_partial_shape()

    def get_shape(self) -> Shape:
        return self.get_source_output().get_shape()

    def get_source_output(self) -> Port:
        """The output this input reads: an op's, a Constant's or a model input's (its Parameter's)."""
        value = self._source()
        port: Port = source_node(value).output(value.index() or 0)
        return port

    def get_tensor(self) -> Any:
        return self.get_source_output().get_tensor()

    def get_rt_info(self) -> RTMap:
        return RTMap(self._rt)

    @property
    def rt_info(self) -> RTMap:
        return self.get_rt_info()

    def replace_source_output(self, output: Port) -> None:
        """Read ``output`` instead of the current source."""
        self._owner._replace_input(self._index, output._value)  # noqa: SLF001

    def __repr__(self) -> str:
        """OpenVINO's form: ``<Input: shape[2,3] type: f32>``."""
        return f"<Input: shape{self.get_partial_shape()} type: {self.get_element_type().get_type_name()}>"


class Op(Node):
    """One operation of the model (OpenVINO's ``Node``): a view of one ONNX node.

    Views of the same node compare and hash equal; the op's ``rt_info`` is the
    node's ``metadata_props``; :meth:`get_attributes` gives the ONNX attributes.
    """

    def __init__(self, node: ir.Node) -> None:
        type_name = node.metadata_props.get(_OPENVINO_TYPE_KEY, node.op_type)
        Node.__init__(self, type_name, node.outputs, [node], name=node.name or node.op_type)

    @property
    def node(self) -> ir.Node:
        """The underlying onnx-ir node."""
        return self._node

    @property
    def _node(self) -> ir.Node:
        return self._onnx_nodes[0]

    def get_friendly_name(self) -> str:
        return self._node.name or ""

    def set_friendly_name(self, name: str) -> None:
        self._node.name = str(name)

    def get_domain(self) -> str:
        return self._node.domain

    def get_rt_info(self) -> MutableMapping[str, str]:  # type: ignore[override]
        return RTMap(self._node.metadata_props)

    def get_name(self) -> str:
        return self.get_friendly_name()

    def get_type_info(self) -> Any:
        """The op type and the ONNX opset it is read in (``opset13``; ``com.microsoft.opset1``)."""
        info = super().get_type_info()
        node, graph = self._node, self._node.graph
        version = node.version if node.version is not None else \
            (graph.opset_imports.get(node.domain) if graph is not None else None)
        prefix = "" if node.domain in ("", "ai.onnx") else f"{node.domain}."
        info.version_id = f"{prefix}opset{version}" if version is not None else ""
        return info


class _ConstantOp(Op, Constant):
    """An ONNX ``Constant`` node: OpenVINO's Constant, whose ``get_data`` gives its value."""


def port_listing(inputs: Sequence[Port], outputs: Sequence[Port]) -> str:
    """The ports as OpenVINO's reprs of models, compiled models and requests list them."""
    listed = [",".join(f"\n{port.described('ConstOutput')}" for port in ports) for ports in (inputs, outputs)]
    return f"\ninputs[{listed[0]}\n]\noutputs[{listed[1]}\n]"


def op_of(node: ir.Node) -> Op:
    """The op of an ONNX node (a Constant for ONNX's ``Constant``, a ReadValue or Assign that
    names its variable for the state ops)."""
    if node.op_type == "Constant" and node.domain in ("", "ai.onnx"):
        return _ConstantOp(node)
    if node.domain == _STATE_DOMAIN:
        return _VariableOp(node)
    return Op(node)


_STATE_DOMAIN = "ai.inferplex.state"
""":data:`inferplex.state.variables.STATE_DOMAIN` (which imports this module's neighbours)."""


class _VariableOp(Op):
    """A ``ReadValue`` or ``Assign`` of the model."""

    def get_variable_id(self) -> str:
        return self._node.attributes.get_string("variable_id", "")


def source_node(value: ir.Value) -> Node:
    """The node ``value`` is the output of: its op, or the Constant or Parameter it is."""
    producer = value.producer()
    if producer is not None:
        return op_of(producer)
    if value.const_value is not None and not value.is_graph_input():
        return Constant.view(value)
    return Parameter.view(value)


def find_port(ports: Sequence[Port], key: int | np.integer[Any] | str | Port | None, kind: str) -> Port:
    """The port ``key`` names among ``ports``: an index, a name, a port, or None for the only one.

    One lookup for every API that takes a port key (requests, PrePostProcessor,
    compiled models); an unknown key is an InputError that lists the ports.
    """
    if key is None:
        if len(ports) != 1:
            raise InputError(f"the model has {len(ports)} {kind}s; give the {kind} by index "
                             f"(0..{len(ports) - 1}) or by name")
        return ports[0]
    if isinstance(key, Port):
        key = key.any_name
    if isinstance(key, (int, np.integer)) and not isinstance(key, bool):
        if 0 <= key < len(ports):
            return ports[int(key)]
        raise InputIndexError(f"{kind} index {int(key)} is out of range; the model has {len(ports)} "
                              f"{kind}s (indices 0..{len(ports) - 1})")
    for port in ports:
        if port.any_name == key:
            return port
    named = port_named(ports, key)
    if named is not None:
        return named
    raise InputError(f"no {kind} named {key!r}; {kind}s: {', '.join(p.any_name for p in ports)}")


def port_named(ports: Sequence[Port], name: Any) -> Port | None:
    """The port one of whose names (``get_names``: the extra ones too) is ``name``; None if none."""
    return next((port for port in ports if isinstance(name, str) and name in port.get_names()), None)
