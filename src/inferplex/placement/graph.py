"""Graph facts HETERO needs: topological order, constants, uses, types and sizes.

HETERO works on an annotated copy of the user's model (types and shapes from
ONNX shape inference), never on the model itself; node names are the link
between the two (the Core makes them unique and non-empty).  The copy shares
the model's weights (only nodes and values are new), and its types and shapes
come from the one shape inference ``Model.reshape`` and the GPU use
(:mod:`inferplex.shape_inference`), which sees through ONNX Runtime's
contrib ops: the memory model and the crossing bytes of a quantized LLM or an
optimized BERT count the tensors downstream of them too.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import cast

import numpy as np
import onnx
import onnx_ir as ir

from inferplex.shape_inference import infer, proto_dims, weightless_copy

__all__ = ["GraphIndex", "annotate", "fill_all_missing_types", "fill_missing_types",
           "is_constant_node", "name_of", "value_nbytes"]

_log = logging.getLogger("inferplex")


def name_of(item: ir.Node | ir.Value) -> str:
    """``item.name``, typed as ``str``.

    onnx_ir allows unnamed nodes and values; HETERO never sees one: the Core names
    every node (unique, non-empty) and a model read from ONNX names every value.
    """
    return cast("str", item.name)


def is_constant_node(node: ir.Node) -> bool:
    """A ``Constant`` op: copied into every subgraph that reads it, never transferred."""
    return node.op_type == "Constant" and node.domain in ("", "ai.onnx") and not node.inputs


def _outer_values(node: ir.Node, graph: ir.Graph) -> list[ir.Value]:
    """Values of ``graph`` read by nodes inside ``node``'s subgraph attributes (If, Loop, Scan)."""
    found: list[ir.Value] = []
    for attr in node.attributes.values():
        if not isinstance(attr, ir.Attr) or attr.type not in (ir.AttributeType.GRAPH,
                                                              ir.AttributeType.GRAPHS):
            continue
        bodies = [attr.as_graph()] if attr.type == ir.AttributeType.GRAPH else list(attr.as_graphs())
        for body in bodies:
            for inner in ir.traversal.RecursiveGraphIterator(body):
                found.extend(v for v in inner.inputs if v is not None and v.graph is graph)
    return found


@dataclass(frozen=True)
class GraphIndex:
    """Topological order, producers and consumers of a main graph, by name."""

    graph: ir.Graph
    nodes: tuple[ir.Node, ...]
    """Every node, topologically sorted (stable: the file's order where it is valid)."""
    position: Mapping[str, int]
    """Node name -> index in ``nodes``."""
    reads: Mapping[str, tuple[ir.Value, ...]]
    """Node name -> values it reads (inputs and outer-scope values of its bodies)."""
    consumers: Mapping[str, tuple[str, ...]]
    """Value name -> names of the nodes that read it, in topological order."""
    constant_values: frozenset[str]
    """Names of initializers and Constant outputs (copied, never transferred)."""

    @classmethod
    def build(cls, graph: ir.Graph) -> GraphIndex:
        graph.sort()
        nodes = tuple(graph)
        reads: dict[str, tuple[ir.Value, ...]] = {}
        consumers: dict[str, list[str]] = {}
        for node in nodes:
            values = tuple(dict.fromkeys([v for v in node.inputs if v is not None]
                                         + _outer_values(node, graph)))
            reads[name_of(node)] = values
            for value in values:
                consumers.setdefault(name_of(value), []).append(name_of(node))
        constants = {name_of(v) for v in graph.initializers.values()}
        constants |= {name_of(o) for n in nodes if is_constant_node(n) for o in n.outputs}
        return cls(graph, nodes, {name_of(n): i for i, n in enumerate(nodes)}, reads,
                   {k: tuple(v) for k, v in consumers.items()}, frozenset(constants))

    def node(self, name: str) -> ir.Node:
        return self.nodes[self.position[name]]

    def placed_nodes(self) -> list[ir.Node]:
        """Nodes that a device runs: all but Constant ops."""
        return [n for n in self.nodes if not is_constant_node(n)]

    def producer(self, value: ir.Value) -> ir.Node | None:
        node = value.producer()
        return node if node is not None and node.name in self.position else None

    def predecessors(self, node: ir.Node) -> list[ir.Node]:
        """Non-constant producers of what ``node`` reads, without repeats."""
        found = (self.producer(v) for v in self.reads[name_of(node)])
        return list(dict.fromkeys(p for p in found if p is not None and not is_constant_node(p)))

    def is_transferable(self, value: ir.Value) -> bool:
        return value.name not in self.constant_values


def value_nbytes(value: ir.Value, dims: Mapping[str, int] | None = None) -> int:
    """Bytes of ``value`` at its inferred shape; symbolic dims from ``dims`` or 1; 0 if unknown."""
    if value.dtype is None or value.shape is None:
        return 0
    count = 1
    for dim in value.shape:
        if isinstance(dim, int):
            count *= dim
        else:
            count *= (dims or {}).get(str(dim.value) if dim.value is not None else "", 1)
    # itemsize is fractional (0.5) for 4-bit types, which pack two elements per byte.
    return math.ceil(count * value.dtype.itemsize)


def _set_input_dims(model: ir.Model, dims: Mapping[str, int]) -> None:
    """Replace symbolic input dims by ``dims`` (unnamed or unknown ones by 1)."""
    for value in model.graph.inputs:
        if value.shape is None:
            continue
        value.shape = ir.Shape([d if isinstance(d, int) else dims.get(str(d.value), 1)
                                for d in value.shape])


def annotate(model: ir.Model, fixed_dims: Mapping[str, int] | None = None) -> ir.Model:
    """A copy of ``model`` with types and shapes on every value that inference can reach.

    The copy has its own nodes and values (callers sort it and type it further)
    but shares the model's weights.  Types and shapes come from ONNX's lenient
    shape inference on the weight-free copy with shape twins for the contrib ops
    (:func:`~inferplex.shape_inference.weightless_copy`); an inferred type or
    shape replaces the declared one.  ``fixed_dims`` (symbolic dim name -> size)
    makes input shapes concrete first; the memory model uses it, the split does
    not (subgraphs keep dynamic shapes).
    """
    copy = model.clone()
    if fixed_dims is not None:
        _set_input_dims(copy, fixed_dims)
    try:
        inferred = infer(weightless_copy(copy), strict=False)
    except Exception as error:  # noqa: BLE001 - inference is best effort; ORT fills gaps after
        _log.debug("inferplex: ONNX shape inference failed: %s", error)
        return copy
    _write_back(copy.graph, inferred.graph)
    return copy


def _write_back(graph: ir.Graph, inferred: onnx.GraphProto) -> None:
    """Types and shapes of ``inferred`` (a graph proto after inference) onto ``graph``'s values of
    the same names, then into the bodies of its control-flow nodes (paired by node name and
    attribute: the twins replace main-graph nodes only, so the bodies are the model's own)."""
    found = {info.name: info.type for info in (*inferred.input, *inferred.value_info, *inferred.output)}
    for value in _values_of(graph):
        kind = found.get(name_of(value))
        if kind is None or not kind.HasField("tensor_type"):
            continue
        tensor = kind.tensor_type
        if tensor.elem_type:
            value.dtype = ir.DataType(tensor.elem_type)
        if tensor.HasField("shape"):
            value.shape = ir.Shape(list(proto_dims(tensor.shape)))
    bodies = {(node.name, attr.name): attr.g for node in inferred.node for attr in node.attribute
              if attr.type == onnx.AttributeProto.GRAPH}
    for node in graph:
        for attr in node.attributes.values():
            body = bodies.get((node.name, attr.name)) if isinstance(attr, ir.Attr) else None
            if body is not None and attr.type == ir.AttributeType.GRAPH:
                _write_back(attr.as_graph(), body)


def _values_of(graph: ir.Graph) -> list[ir.Value]:
    """Inputs, initializers and node outputs of ``graph``, each once."""
    values = [*graph.inputs, *graph.initializers.values(), *(o for n in graph for o in n.outputs)]
    return [v for v in dict.fromkeys(values) if v.name]



def fill_missing_types(model: ir.Model, names: Iterable[str]) -> list[str]:
    """Give ``names`` a dtype where ONNX inference left none (ops of other domains).

    ONNX Runtime knows the types of its contrib ops: a session over the model with
    the values as extra outputs reports them.  Returns the names still unknown.
    """
    values = ir.convenience.create_value_mapping(model.graph)
    missing = [n for n in names if n in values and values[n].dtype is None]
    if not missing:
        return []
    probe = model.clone()
    probe_values = ir.convenience.create_value_mapping(probe.graph)
    for name in missing:
        probe.graph.outputs.append(probe_values[name])
    try:
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        data = ir.serde.serialize_model(probe).SerializeToString()
        session = ort.InferenceSession(data, options, providers=["CPUExecutionProvider"])
    except Exception as error:  # noqa: BLE001 - reported by the caller as unknown types
        _log.debug("inferplex: type probe failed: %s", error)
        return missing
    reported = {o.name: o for o in session.get_outputs()}
    still: list[str] = []
    for name in missing:
        text = getattr(reported.get(name), "type", "")
        if not text.startswith("tensor(") or text == "tensor(undefined)":
            still.append(name)
            continue
        values[name].dtype = ir.DataType.from_numpy(np.dtype(_ORT_TYPES.get(text[7:-1], text[7:-1])))
        shape = reported[name].shape
        if values[name].shape is None and isinstance(shape, list):
            values[name].shape = ir.Shape([d if isinstance(d, int) else None for d in shape])
    return still


def fill_all_missing_types(model: ir.Model) -> None:
    """fill_missing_types for every value of the main graph that inference left untyped."""
    names = [v.name for n in model.graph for v in n.outputs if v.dtype is None and v.name]
    if names:
        fill_missing_types(model, names)


_ORT_TYPES = {"float": "float32", "double": "float64", "float16": "float16", "string": "object"}
