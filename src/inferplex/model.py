"""Model, Op and Port: OpenVINO's model API over an onnx-ir graph.

``read_model`` accepts a path, bytes, an ``onnx.ModelProto`` or an
``onnx_ir.Model``.  On reading, inferplex

- checks the model with ``onnx.checker`` and names what is malformed, and
  refuses external data whose location leaves the model's folder
  (:mod:`inferplex.model_check`);
- treats initializers that are also listed as graph inputs (IR version < 4,
  e.g. the ``light`` models in the onnx wheel) as constants, so engines can fold
  them — ONNX Runtime runs such models 2-3x slower otherwise;
- gives every node a stable, unique friendly name: its ONNX name, or
  ``<op_type>_<index>`` when it has none.

An op's ``rt_info`` is stored in the node's ``metadata_props``, so manual
affinities survive a save/load round trip.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, MutableMapping, Sequence
from pathlib import Path
from typing import Any

import onnx
import onnx_ir as ir

from inferplex.api.shapes import Dimension, PartialShape, Shape
from inferplex.api.types import Type
from inferplex.errors import InputError, ModelError
from inferplex.model_check import check_external_data, check_model

__all__ = ["ElementType", "Model", "Op", "Port", "load_model", "save_model"]

Dim = int | str | None


ElementType = Type
"""The element type of a port: :class:`inferplex.Type` (kept as an alias of it)."""


def _element_type(value: ir.Value) -> Type:
    return Type.dynamic if value.dtype is None else Type(value.dtype)


def _dims(value: ir.Value) -> tuple[Dim, ...] | None:
    if value.shape is None:
        return None
    return tuple(d if isinstance(d, int) else getattr(d, "value", None) for d in value.shape)


class Port:
    """An input or output of a model (OpenVINO's ``ConstOutput``).

    A port is a snapshot: name, element type and shape are read from the graph
    when the port is made (``model.inputs`` makes fresh ones after a reshape;
    a compiled model keeps the ports it was compiled with).
    """

    def __init__(self, value: ir.Value, index: int, kind: str) -> None:
        self._value = value
        self.index = index
        self.kind = kind  # "input" or "output"
        self._name = value.name or f"{kind}_{index}"
        self._element = _element_type(value)
        self._dims = _dims(value)

    @property
    def any_name(self) -> str:
        return self._name

    def get_any_name(self) -> str:
        return self.any_name

    @property
    def names(self) -> set[str]:
        return {self.any_name}

    def get_names(self) -> set[str]:
        return self.names

    @property
    def is_tensor(self) -> bool:
        """False for sequence, optional and map ports, whose values are lists or None."""
        return self._value.type is None or isinstance(self._value.type, ir.TensorType)

    @property
    def element_type(self) -> Type:
        """The element type; ``Type.dynamic`` when the model does not say."""
        return self._element

    def get_element_type(self) -> Type:
        return self.element_type

    @property
    def dims(self) -> tuple[Dim, ...] | None:
        """Dims as ints, symbolic names (str) or None; None when the rank is unknown.

        inferplex's own view, kept for the symbol names ONNX gives dynamic dims
        (inputs must agree on a symbol); OpenVINO's view is :attr:`partial_shape`.
        """
        return self._dims

    @property
    def partial_shape(self) -> PartialShape:
        """The shape, with ``?`` for dynamic dims and ``[...]`` for an unknown rank."""
        if self._dims is None:
            return PartialShape.dynamic()
        return PartialShape([d if isinstance(d, int) else Dimension() for d in self._dims])

    def get_partial_shape(self) -> PartialShape:
        return self.partial_shape

    @property
    def is_dynamic(self) -> bool:
        dims = self._dims
        return dims is None or any(not isinstance(d, int) for d in dims)

    @property
    def shape(self) -> Shape:
        """Static shape; InputError when some dimension is dynamic."""
        if self.is_dynamic:
            raise InputError(f"{self.kind} {self.any_name!r} has a dynamic shape "
                             f"{self.partial_shape}; use partial_shape, or reshape the model "
                             "to static dims")
        return Shape(self._dims or ())

    def get_shape(self) -> Shape:
        return self.shape

    def get_rt_info(self) -> MutableMapping[str, str]:
        """String properties of the tensor (its ``layout``, ...), stored in the ONNX graph."""
        return _RtInfo(self._value.metadata_props)

    def __repr__(self) -> str:
        return (f"<Port {self.kind}[{self.index}] {self.any_name!r} "
                f"{self.element_type} {self.partial_shape}>")

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, Port) and other.kind == self.kind and other.index == self.index
                and other.any_name == self.any_name)

    def __hash__(self) -> int:
        return hash((self.kind, self.index, self.any_name))


class _RtInfo(MutableMapping[str, str]):
    """``get_rt_info()``: a dict view over a node's or value's metadata_props (string values)."""

    def __init__(self, props: MutableMapping[str, str]) -> None:
        self._props = props

    def __getitem__(self, key: str) -> str:
        return self._props[key]

    def __setitem__(self, key: str, value: Any) -> None:
        self._props[str(key)] = str(value)

    def __delitem__(self, key: str) -> None:
        del self._props[key]

    def __iter__(self) -> Iterator[str]:
        return iter(dict(self._props))

    def __len__(self) -> int:
        return len(self._props)


class Op:
    """One operation of the model (OpenVINO's ``Node``)."""

    def __init__(self, node: ir.Node) -> None:
        self._node = node

    @property
    def node(self) -> ir.Node:
        """The underlying onnx-ir node."""
        return self._node

    def get_friendly_name(self) -> str:
        return self._node.name or ""

    @property
    def friendly_name(self) -> str:
        return self.get_friendly_name()

    def get_type_name(self) -> str:
        return self._node.op_type

    def get_domain(self) -> str:
        return self._node.domain

    def get_rt_info(self) -> MutableMapping[str, str]:
        return _RtInfo(self._node.metadata_props)

    def __repr__(self) -> str:
        return f"<Op {self._node.op_type} {self._node.name!r}>"


class Model:
    """An ONNX model ready to query and compile; wraps an ``onnx_ir.Model``."""

    def __init__(self, model: ir.Model, name: str | None = None) -> None:
        self.ir = model
        self._name = name or model.graph.name or "model"

    @property
    def friendly_name(self) -> str:
        return self._name

    def get_friendly_name(self) -> str:
        return self._name

    @property
    def inputs(self) -> list[Port]:
        return [Port(v, i, "input") for i, v in enumerate(self.ir.graph.inputs)]

    @property
    def outputs(self) -> list[Port]:
        return [Port(v, i, "output") for i, v in enumerate(self.ir.graph.outputs)]

    def input(self, key: int | str = 0) -> Port:
        return _find_port(self.inputs, key, "input")

    def output(self, key: int | str = 0) -> Port:
        return _find_port(self.outputs, key, "output")

    def get_ops(self) -> list[Op]:
        """Every op of the main graph, in graph order."""
        return [Op(node) for node in self.ir.graph]

    def get_ordered_ops(self) -> list[Op]:
        return self.get_ops()

    def is_dynamic(self) -> bool:
        return any(p.is_dynamic for p in self.inputs + self.outputs)

    def reshape(self, shapes: Mapping[str | int, Sequence[Dim]] | Sequence[Dim]) -> None:
        """Set input shapes (``{name: [1, 3, 224, 224]}``, or one shape for a single input)."""
        if not isinstance(shapes, Mapping):
            shapes = {0: shapes}
        for key, dims in shapes.items():
            port = self.input(key)
            value = self.ir.graph.inputs[port.index]
            value.shape = ir.Shape([d if isinstance(d, int) and d >= 0 else
                                    (None if d in (None, -1) else str(d)) for d in dims])
        _clear_inferred_shapes(self.ir.graph)

    def to_onnx(self) -> onnx.ModelProto:
        """The model as an ``onnx.ModelProto`` (rt_info included as node metadata)."""
        return ir.serde.serialize_model(self.ir)

    def clone(self) -> Model:
        return Model(ir.serde.deserialize_model(self.to_onnx()), self._name)

    def __repr__(self) -> str:
        return (f"<Model {self._name!r} inputs={[p.any_name for p in self.inputs]} "
                f"outputs={[p.any_name for p in self.outputs]} ops={self.ir.graph.num_nodes()}>")


def _find_port(ports: list[Port], key: int | str | Port, kind: str) -> Port:
    if isinstance(key, Port):
        key = key.any_name
    if isinstance(key, int) and not isinstance(key, bool):
        if 0 <= key < len(ports):
            return ports[key]
        raise InputError(f"{kind} index {key} is out of range; the model has {len(ports)} {kind}s")
    for port in ports:
        if port.any_name == key:
            return port
    raise InputError(f"no {kind} named {key!r}; {kind}s: {', '.join(p.any_name for p in ports)}")


def _clear_inferred_shapes(graph: ir.Graph) -> None:
    for node in graph:
        for value in node.outputs:
            if not value.is_graph_output():
                value.shape = None


# --- reading and saving ------------------------------------------------------------


def load_model(source: Any, weights: Any = None) -> Model:
    """Read a model from a path, bytes, ``onnx.ModelProto`` or ``onnx_ir.Model``."""
    del weights  # OpenVINO's read_model(model, weights): ONNX keeps weights inside or beside
    base_dir: Path | None = None
    name: str | None = None
    if isinstance(source, Model):
        return source
    if isinstance(source, ir.Model):
        return Model(_prepare(source), None)
    if isinstance(source, (str, os.PathLike)):
        path = Path(source)
        if not path.is_file():
            raise ModelError(f"model file {str(path)!r} does not exist or is not a file; "
                             "read_model accepts a path to an .onnx file, bytes, an "
                             "onnx.ModelProto or an onnx_ir.Model")
        proto = _parse(lambda: onnx.load(str(path), load_external_data=False), str(path))
        base_dir, name = path.resolve().parent, path.stem
    elif isinstance(source, (bytes, bytearray, memoryview)):
        proto = _parse(lambda: onnx.load_from_string(bytes(source)), "the given bytes")
    elif isinstance(source, onnx.ModelProto):
        proto = source
    else:
        raise ModelError(f"read_model cannot read a {type(source).__name__}; accepted: a path "
                         "(str or os.PathLike), bytes, onnx.ModelProto or onnx_ir.Model")
    check_external_data(proto, base_dir)
    check_model(proto, source if base_dir is not None else None)
    model = ir.serde.deserialize_model(proto)
    if base_dir is not None:
        ir.external_data.set_base_dir(model.graph, str(base_dir))
    return Model(_prepare(model), name or proto.graph.name or None)


def save_model(model: Model, path: str | os.PathLike[str]) -> None:
    """Write ``model`` (with rt_info such as affinities) to an .onnx file."""
    ir.save(model.ir, os.fspath(path))


def _parse(load: Any, what: str) -> onnx.ModelProto:
    try:
        return load()
    except Exception as error:  # noqa: BLE001 - protobuf raises several unrelated types
        raise ModelError(f"{what} is not a readable ONNX model: {error}") from error


def _prepare(model: ir.Model) -> ir.Model:
    """Initializers listed as inputs become constants; every node gets a unique name."""
    graph = model.graph
    initializer_inputs = [v for v in graph.inputs if v.name in graph.initializers]
    for value in initializer_inputs:
        graph.inputs.remove(value)
    if initializer_inputs and model.ir_version < 4:
        # IR < 4 requires every initializer to be a graph input; IR 4 is the first
        # version where an initializer may be a plain constant (ONNX Runtime refuses
        # an IR 3 model with an unused initializer that is not an input).
        model.ir_version = 4
    used: set[str] = set()
    for index, node in enumerate(graph):
        name = node.name or f"{node.op_type}_{index}"
        if name in used:
            suffix = 1
            while f"{name}_{suffix}" in used:
                suffix += 1
            name = f"{name}_{suffix}"
        node.name = name
        used.add(name)
    return model
