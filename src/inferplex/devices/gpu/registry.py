"""The table of ONNX ops the GPU device lowers to torch, and what a lowering sees.

A lowering is registered per (domain, op type) with the opset versions it
implements::

    @register("Relu", versions=(6, None))
    def relu(info: NodeInfo) -> Callable[..., Any]:
        return torch.relu

It receives the node's static facts (:class:`NodeInfo`: attributes, constant
inputs as numpy, input dtypes and shapes, opset) and returns a function of the
node's input tensors (``None`` for an absent optional input) that returns one
tensor or a tuple of tensors, one per output.  Everything the function needs
beyond its tensors (axes, pads, shapes read from constant inputs) is resolved to
Python values at lowering time, so the forward pass never synchronises with the
host and can be captured in a CUDA graph.

A returned function that reads tensor values back to the host (a shape given as
a computed tensor, NonZero, ...) carries the attribute ``data_dependent = True``;
a program holding one runs eagerly, outside CUDA graphs.

``supports(info)`` returns ``None`` when the lowering runs the node exactly, or a
short reason when it cannot (HETERO then places the node on another device).  A
lowering that would only approximate ONNX semantics must say no.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx_ir as ir

__all__ = ["LOWERINGS", "NodeInfo", "OpLowering", "find_lowering", "node_info", "register"]

Lowering = Callable[["NodeInfo"], Callable[..., Any]]
SupportCheck = Callable[["NodeInfo"], "str | None"]


@dataclass(frozen=True)
class NodeInfo:
    """Static facts about one node, known when the graph is lowered."""

    node: ir.Node
    """The onnx-ir node."""
    opset: int
    """Version of the node's domain imported by the model."""
    input_dtypes: tuple[ir.DataType | None, ...]
    """Element type of each input (None: absent or unknown)."""
    input_shapes: tuple[tuple[int | str | None, ...] | None, ...]
    """Shape of each input: ints, symbolic names, None for unknown dims; None for unknown rank."""
    constants: tuple[np.ndarray | None, ...]
    """Value of each input that is an initializer or a Constant's output, else None."""
    output_dtypes: tuple[ir.DataType | None, ...] = ()
    """Element type of each output, where known."""
    output_shapes: tuple[tuple[int | str | None, ...] | None, ...] = ()
    """Shape of each output, where known (from shape inference)."""

    @property
    def op_type(self) -> str:
        return self.node.op_type

    @property
    def num_inputs(self) -> int:
        return len(self.node.inputs)

    def has_input(self, index: int) -> bool:
        """Whether optional input ``index`` is given (present and not the empty name)."""
        return index < len(self.node.inputs) and self.node.inputs[index] is not None

    def const(self, index: int) -> np.ndarray | None:
        """The constant value of input ``index``, or None when it is computed at run time."""
        return self.constants[index] if index < len(self.constants) else None

    def attr(self, name: str, default: Any = None) -> Any:
        """Attribute ``name`` as a Python value (int, float, str, list, numpy array for tensors)."""
        attribute = self.node.attributes.get(name)
        if attribute is None:
            return default
        value = attribute.value
        if isinstance(value, ir.TensorProtocol):
            return value.numpy()
        if isinstance(value, (tuple, list)):
            return list(value)
        return value

    def rank(self, index: int) -> int | None:
        shape = self.input_shapes[index] if index < len(self.input_shapes) else None
        return None if shape is None else len(shape)


@dataclass(frozen=True)
class OpLowering:
    """One registered lowering."""

    domain: str
    op_type: str
    versions: tuple[int, int | None]
    """Inclusive opset range the lowering implements (None: no upper bound)."""
    lower: Lowering
    supports: SupportCheck | None = field(default=None)
    held_dtypes: frozenset[ir.DataType] = field(default=frozenset())
    """Element types torch holds but barely computes (uint16/32/64) that this lowering handles itself
    (by widening, bit views, ...); the analysis refuses them for every other lowering."""

    def covers(self, opset: int) -> bool:
        low, high = self.versions
        return opset >= low and (high is None or opset <= high)


LOWERINGS: dict[tuple[str, str], list[OpLowering]] = {}


def register(op_type: str, *, domain: str = "", versions: tuple[int, int | None] = (1, None),
             supports: SupportCheck | None = None,
             held_dtypes: frozenset[ir.DataType] = frozenset()) -> Callable[[Lowering], Lowering]:
    """Decorator: register ``fn`` as the lowering of ``domain::op_type`` for ``versions``.

    ``held_dtypes``: see :attr:`OpLowering.held_dtypes`.
    """

    def decorate(fn: Lowering) -> Lowering:
        LOWERINGS.setdefault((domain, op_type), []).append(
            OpLowering(domain, op_type, versions, fn, supports, held_dtypes))
        return fn

    return decorate


def find_lowering(domain: str, op_type: str, opset: int) -> OpLowering | None:
    """The lowering registered for this op at this opset, if any."""
    domain = "" if domain == "ai.onnx" else domain
    for lowering in LOWERINGS.get((domain, op_type), ()):
        if lowering.covers(opset):
            return lowering
    return None


def node_info(node: ir.Node, opset: int) -> NodeInfo:
    """Collect a node's static facts from the onnx-ir graph."""

    def shape_of(value: ir.Value | None) -> tuple[int | str | None, ...] | None:
        if value is None or value.shape is None:
            return None
        return tuple(d if isinstance(d, int) else (d.value if isinstance(d, ir.SymbolicDim) else None)
                     for d in value.shape)

    def dtype_of(value: ir.Value | None) -> ir.DataType | None:
        return None if value is None else value.dtype

    def constant_of(value: ir.Value | None) -> np.ndarray | None:
        if value is None:
            return None
        if value.const_value is not None:
            return value.const_value.numpy()
        producer = value.producer()
        if producer is not None and producer.op_type == "Constant" and producer.domain in ("", "ai.onnx"):
            for name in ("value", "value_float", "value_floats", "value_int", "value_ints"):
                attribute = producer.attributes.get(name)
                if attribute is not None:
                    raw = attribute.value
                    if isinstance(raw, ir.TensorProtocol):
                        return raw.numpy()
                    dtype = np.float32 if "float" in name else np.int64
                    return np.asarray(raw, dtype=dtype)
        return None

    return NodeInfo(
        node=node,
        opset=opset,
        input_dtypes=tuple(dtype_of(v) for v in node.inputs),
        input_shapes=tuple(shape_of(v) for v in node.inputs),
        constants=tuple(constant_of(v) for v in node.inputs),
        output_dtypes=tuple(dtype_of(v) for v in node.outputs),
        output_shapes=tuple(shape_of(v) for v in node.outputs),
    )
