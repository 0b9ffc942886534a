"""The toolkit that shape twins are written with (see :mod:`inferplex.shape_inference`).

A twin stands in for one contrib node in the weight-free copy that ONNX's shape inference reads:
standard ops whose outputs have the node's output names, element types and shapes.  Their values
mean nothing (the copy is never run), so a twin may take any path to a shape: a Cast of the input,
the float op a quantized op stands for, or a zero broadcast to dims sliced from its inputs' shapes
(ONNX's data propagation carries ``Shape``/``Slice``/``Concat`` values into ``Expand``, so symbolic
dims such as ``batch`` survive; it does so from opset 13 on, before which such a twin gives the rank
alone).  Twins use ops whose form is the same in every ONNX opset from 11 on (the reductions'
``axes`` moved to an input at 18: :meth:`Rewriter.reduce_max` writes both forms).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import onnx
from onnx import TensorProto, helper

__all__ = ["FLOAT", "MS", "Rewriter", "Twin", "int_attrs"]

MS = "com.microsoft"
"""ONNX Runtime's contrib op domain."""

FLOAT = TensorProto.FLOAT

_END = 2**62
"""A Slice end past any dim count."""

_DEFAULT_OPSET = 17
"""The ONNX opset the copy imports for the twins when the model imports none."""

Twin = Callable[["Rewriter", onnx.NodeProto], "list[onnx.NodeProto] | None"]
"""Standard ops that stand in for a node (None: no twin for this form; the node stays)."""


def int_attrs(node: onnx.NodeProto) -> dict[str, int]:
    """The node's integer attributes."""
    return {a.name: a.i for a in node.attribute if a.type == onnx.AttributeProto.INT}


class Rewriter:
    """What the copy states (element types and ranks of initializers and inputs, the ONNX opset),
    fresh names for twin values, and the shape helpers twins are built from."""

    def __init__(self, model: onnx.ModelProto) -> None:
        graph = model.graph
        self.graph = graph
        self.types: dict[str, int] = {t.name: t.data_type for t in graph.initializer}
        self.ranks: dict[str, int] = {t.name: len(t.dims) for t in graph.initializer}
        for info in [*graph.input, *graph.value_info]:
            tensor = info.type.tensor_type
            if not info.type.HasField("tensor_type"):
                continue
            if tensor.elem_type:
                self.types.setdefault(info.name, tensor.elem_type)
            if tensor.HasField("shape"):
                self.ranks.setdefault(info.name, len(tensor.shape.dim))
        versions = {o.domain: o.version for o in model.opset_import}
        self.opset = versions.get("", versions.get("ai.onnx", 0))
        if not self.opset:
            self.opset = _DEFAULT_OPSET
            model.opset_import.append(helper.make_opsetid("", _DEFAULT_OPSET))
        self._count = 0

    # --- names and inputs ------------------------------------------------------------------

    def name(self, hint: str) -> str:
        self._count += 1
        return f"__contrib_shape_{self._count}_{hint}"

    def input(self, node: onnx.NodeProto, index: int) -> str:
        """The node's input ``index``, "" where it has none."""
        return node.input[index] if index < len(node.input) else ""

    def output(self, node: onnx.NodeProto, index: int) -> str:
        """The node's output ``index``, "" where it has none."""
        return node.output[index] if index < len(node.output) else ""

    def type_of(self, name: str) -> int | None:
        return self.types.get(name) if name else None

    # --- values -------------------------------------------------------------------------------

    def ints(self, values: Sequence[int]) -> str:
        """A new int64 initializer of ``values``."""
        name = self.name("ints")
        tensor = helper.make_tensor(name, TensorProto.INT64, [len(values)], list(values))
        self.graph.initializer.append(tensor)
        return name

    def as_float(self, name: str, nodes: list[onnx.NodeProto]) -> str:
        out = self.name("f")
        nodes.append(helper.make_node("Cast", [name], [out], to=FLOAT))
        return out

    def finish(self, value: str, out: str, elem: int | None,
               nodes: list[onnx.NodeProto]) -> list[onnx.NodeProto] | None:
        """``nodes`` then ``out = Cast(value, elem)``; None (no twin) when ``elem`` is unknown."""
        if elem is None:
            return None
        nodes.append(helper.make_node("Cast", [value], [out], to=elem))
        return nodes

    def same(self, source: str, out: str, nodes: list[onnx.NodeProto]) -> None:
        """``out`` of ``source``'s type and shape."""
        if out:
            nodes.append(helper.make_node("Identity", [source], [out]))

    # --- shapes -------------------------------------------------------------------------------

    def shape_dims(self, name: str, start: int, end: int | None, nodes: list[onnx.NodeProto]) -> str:
        """The 1-D int64 value ``shape(name)[start:end]``."""
        shape, part = self.name("shape"), self.name("dims")
        nodes.append(helper.make_node("Shape", [name], [shape]))
        bounds = [self.ints([start]), self.ints([_END if end is None else end])]
        nodes.append(helper.make_node("Slice", [shape, *bounds], [part]))
        return part

    def filled(self, parts: Sequence[str], like: str, out: str, nodes: list[onnx.NodeProto],
               elem: int | None = None) -> None:
        """``out`` of the dims ``parts`` (1-D int64 values, concatenated) and ``like``'s element type
        (``elem`` where given): a zero taken from ``like`` broadcast to the dims."""
        if not out:
            return
        zero, dims, wide = self.name("zero"), self.name("dims"), self.name("filled")
        nodes += [helper.make_node("ReduceMax", [like], [zero], keepdims=0),
                  helper.make_node("Concat", list(parts), [dims], axis=0)]
        if elem is None:
            nodes.append(helper.make_node("Expand", [zero, dims], [out]))
        else:
            nodes += [helper.make_node("Expand", [zero, dims], [wide]),
                      helper.make_node("Cast", [wide], [out], to=elem)]

    def reduced(self, source: str, axis: int, out: str, elem: int, nodes: list[onnx.NodeProto]) -> None:
        """``out`` of ``elem`` type and ``source``'s dims with those from ``axis`` on set to 1 (the
        statistics a normalization over those dims keeps)."""
        if not out:
            return
        if axis >= 0:  # the rank is unknown here: dims before axis, then ones from a full reduction
            ones, ones_shape = self.name("ones"), self.name("shape")
            nodes += [helper.make_node("ReduceMax", [source], [ones], keepdims=1),
                      helper.make_node("Shape", [ones], [ones_shape])]
            tail = self.name("dims")
            bounds = [self.ints([axis]), self.ints([_END])]
            nodes.append(helper.make_node("Slice", [ones_shape, *bounds], [tail]))
            self.filled([self.shape_dims(source, 0, axis, nodes), tail], source, out, nodes, elem)
            return
        kept = self.reduce_max(source, list(range(axis, 0)), True, nodes)
        nodes.append(helper.make_node("Cast", [kept], [out], to=elem))

    def reduce_max(self, source: str, axes: Sequence[int], keepdims: bool,
                   nodes: list[onnx.NodeProto]) -> str:
        """``ReduceMax`` of ``source`` over ``axes``, written in the form of the copy's opset."""
        kept = self.name("reduced")
        if self.opset >= 18:
            node = helper.make_node("ReduceMax", [source, self.ints(axes)], [kept], keepdims=int(keepdims))
        else:
            node = helper.make_node("ReduceMax", [source], [kept], keepdims=int(keepdims), axes=list(axes))
        nodes.append(node)
        return kept
