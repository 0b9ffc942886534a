"""The one way opset functions make ONNX nodes: inputs as onnx-ir values, one node per call, its
output types and shapes inferred at once (ONNX's per-node inference), so a mismatch is reported by
the call that makes it.  Shared by :mod:`inferplex.opset` and the other modules of this package.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

import numpy as np
import onnx
import onnx_ir as ir

from inferplex.api.build import OPSET
from inferplex.api.nodes import Constant, Node
from inferplex.api.types import Type
from inferplex.errors import InputError

NodeInput = Any
"""A Node, an output port, a numpy array or a number."""

INT64_MAX = np.iinfo(np.int64).max
INT64_MIN = np.iinfo(np.int64).min


def is_graph_input(item: Any) -> bool:
    """Whether ``item`` is a node or an output port (not a constant given as data)."""
    return isinstance(item, Node) or isinstance(getattr(item, "_value", None), ir.Value)


def value_of(item: NodeInput, dtype: ir.DataType | None = None) -> ir.Value:
    """The onnx-ir value behind a node, port, array or number; ``dtype`` types Python numbers and lists."""
    if isinstance(item, Node):
        return item._outputs[0]  # noqa: SLF001 - same layer
    if isinstance(getattr(item, "_value", None), ir.Value):  # an output port
        return item._value  # noqa: SLF001
    if isinstance(item, ir.Value):
        return item
    array = np.asarray(item)
    if array.dtype == object:
        raise InputError(f"{type(item).__name__} is not a node, port, array or number")
    if dtype is not None and not isinstance(item, np.ndarray):  # Python numbers and lists follow the node
        array = array.astype(dtype.numpy())
    return Constant(array)._outputs[0]  # noqa: SLF001


OPENVINO_TYPE_KEY = "inferplex.openvino_type"
"""ONNX node ``metadata_props`` key: the OpenVINO op type an opset function built the node as, where
it differs from the ONNX op type (``Convolution`` for ``Conv``, ``Multiply`` for ``Mul``); a model's
ops report it as their type (``op.get_type_name()``)."""

EXACT_INTEGERS_KEY = "inferplex.exact_integers"
"""ONNX node ``metadata_props`` key: the node computes integers whose arithmetic (divisions by powers
of two, 32- and 64-bit values) OpenVINO's CPU plugin does in f32 or in 32 bits, so engines that
round it (the CPU's OpenVINO engine) leave the model to one that does not; the value says which op."""


def mark_exact_integers(built: Node, what: str) -> None:
    """Mark ``built``'s node as computing integers that need exact integer arithmetic."""
    for node in built._onnx_nodes:  # noqa: SLF001 - same layer
        node.metadata_props[EXACT_INTEGERS_KEY] = what


def plain_attribute(value: Any) -> Any:
    """An attribute value with numpy's numbers and arrays (as programs pass strides, masks and
    axes) as Python's numbers and lists, which ONNX attributes take."""
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, (list, tuple)):
        return [plain_attribute(item) for item in value]
    return value


def make_op(type_name: str, op_type: str, inputs: Sequence[ir.Value | None], attrs: dict[str, Any],
            name: str | None, num_outputs: int = 1) -> Node:
    """One ONNX node for an OpenVINO op (``None`` for an optional input left out)."""
    attrs = {key: plain_attribute(value) for key, value in attrs.items()}
    node = ir.node(op_type, list(inputs), attributes=attrs, num_outputs=num_outputs)
    if type_name != op_type:  # the model's op keeps OpenVINO's type name (Convolution for a Conv)
        node.metadata_props[OPENVINO_TYPE_KEY] = type_name
    built = Node(type_name, node.outputs, [node], name=name)
    node.name = built.get_friendly_name()
    _infer(built, node, inputs, attrs)
    return built


def make_custom(type_name: str, domain: str, op_type: str, inputs: Sequence[ir.Value],
                attrs: dict[str, Any], name: str | None,
                outputs: Sequence[tuple[ir.DataType, Sequence[int | str | None] | None]]) -> Node:
    """One node of another ONNX domain (which ONNX's inference does not know): its outputs of the
    element types and dims given (None: an unknown rank)."""
    attrs = {key: plain_attribute(value) for key, value in attrs.items()}
    node = ir.node(op_type, list(inputs), attributes=attrs, domain=domain, num_outputs=len(outputs))
    for value, (dtype, dims) in zip(node.outputs, outputs, strict=True):
        value.type = ir.TensorType(dtype)
        value.shape = None if dims is None else ir.Shape(list(dims))
    built = Node(type_name, node.outputs, [node], name=name)
    node.name = built.get_friendly_name()
    return built


def inferred_dims(op_type: str, inputs: Sequence[ir.Value | None], attrs: dict[str, Any],
                  what: str) -> list[int | str | None] | None:
    """The dims ONNX's inference gives the first output of one ``op_type`` node on ``inputs``
    (without making the node); InputError naming ``what`` when the inputs do not fit it."""
    probe = ir.node(op_type, [None if v is None else ir.Value(type=v.type, shape=v.shape,
                                                              const_value=v.const_value) for v in inputs],
                    attributes=attrs)
    label: Any = _Label(what)
    _infer(label, probe, list(probe.inputs), attrs)
    shape = probe.outputs[0].shape
    return None if shape is None else [d if isinstance(d, int) else (d.value if d is not None else None)
                                       for d in shape]


class _Label:
    """What an inference error names in place of a built node."""

    def __init__(self, what: str) -> None:
        self._what = what

    def get_type_name(self) -> str:
        return self._what

    def get_friendly_name(self) -> str:
        return "(its output shape)"


def step(op_type: str, inputs: Sequence[NodeInput | None], attrs: dict[str, Any] | None = None) -> ir.Value:
    """The one output of one ONNX node: a step of an op built from several."""
    values = [None if item is None else value_of(item) for item in inputs]
    return make_op(op_type, op_type, values, attrs or {}, None)._outputs[0]  # noqa: SLF001


def ints(values: Any) -> ir.Value:
    """An int64 constant of ``values`` (shapes, axes, bounds)."""
    return value_of(np.asarray(values, np.int64))


def floats(values: Any) -> ir.Value:
    """A float32 constant of ``values``."""
    return value_of(np.asarray(values, np.float32))


def dim_at(value: ir.Value, axis: int) -> Any:
    """Dim ``axis`` of ``value``'s shape as shape inference knows it (an int, a symbolic dim), or None."""
    if value.shape is None or not -len(value.shape) <= axis < len(value.shape):
        return None
    return value.shape[axis]


def settle_shape(built: Node, index: int, dims: Sequence[Any]) -> Node:
    """``built``'s output ``index`` given ``dims``, as OpenVINO's shape inference gives them, where
    ONNX's inference of the ops it is built from lost some (None: unknown); ``built`` itself."""
    built._outputs[index].shape = ir.Shape([d for d in dims])  # noqa: SLF001 - same layer
    return built


def ascending(key: ir.Value, bound: int | None = None) -> ir.Value:
    """The order of the rows by ``key`` (distinct int64 values below ``bound``, by default 2**31 - 1:
    OpenVINO's CPU holds 64-bit integers in 32 bits, and TopK may order equal keys as it likes),
    smallest first."""
    rows = dim(key, 0)
    top = _INT32_MAX if bound is None else bound
    padded = step("Concat", [key, ints([top])], {"axis": 0})  # keeps TopK's k above 0
    order = make_op("TopK", "TopK", [padded, step("Add", [rows, ints([1])])],
                    {"axis": 0, "largest": 0, "sorted": 1}, None, num_outputs=2)._outputs[1]  # noqa: SLF001
    return step("Slice", [order, ints([0]), rows, ints([0])])


_INT32_MAX = int(np.iinfo(np.int32).max)


def dim(value: ir.Value, axis: int) -> ir.Value:
    """Dim ``axis`` of ``value`` (negative: from the end) as an int64 tensor of one element."""
    return step("Shape", [value], {"start": axis} if axis == -1 else {"start": axis, "end": axis + 1})


def round_half_away(value: ir.Value) -> ir.Value:
    """C's ``round``: to the nearest integer, halves away from zero."""
    away = step("Floor", [step("Add", [step("Abs", [value]), floats(0.5)])])
    return step("Mul", [step("Sign", [value]), away])


def choice(value: Any, accepted: Collection[str], what: str) -> str:
    """``value`` lower-cased where ``accepted`` holds it; else an InputError naming ``what`` (the op
    and its argument) and what it accepts.  An element type may be given as a ``Type``."""
    text = (value.get_type_name() if isinstance(value, Type) else str(value)).lower()
    if text not in accepted:
        raise InputError(f"{what} {value!r}; accepted: {', '.join(accepted)}")
    return text


def as_op(type_name: str, value: ir.Value, name: str | None) -> Node:
    """The node that produces ``value``, as the OpenVINO op ``type_name`` named ``name``."""
    producer = value.producer()
    built = Node(type_name, [value], [producer] if producer is not None else [], name=name)
    if producer is not None:
        producer.name = built.get_friendly_name()
        if type_name != producer.op_type:
            producer.metadata_props[OPENVINO_TYPE_KEY] = type_name
    return built


def constant_data(item: NodeInput) -> np.ndarray | None:
    """The data of a constant input (array, number, Constant node or its port); None when computed."""
    if isinstance(item, Node) or isinstance(getattr(item, "_value", None), ir.Value) or isinstance(
            item, ir.Value):
        tensor = value_of(item).const_value
        return None if tensor is None else tensor.numpy()
    array = np.asarray(getattr(item, "data", item) if not isinstance(item, np.ndarray) else item)
    return None if array.dtype == object else array


def constant_ints(item: NodeInput, what: str) -> list[int]:
    """The integers of a constant input; InputError naming ``what`` when it is computed."""
    data = constant_data(item)
    if data is None:
        raise InputError(f"{what} must be constant (a list, an array or a constant node); "
                         "a computed value has no ONNX equivalent here")
    return [int(v) for v in np.asarray(data).reshape(-1)]


def rank_of(value: ir.Value, what: str) -> int:
    if value.shape is None:
        raise InputError(f"{what} needs an input of known rank")
    return len(value.shape)


def static_dims(value: ir.Value, what: str) -> list[int]:
    """Every dim of ``value``; InputError naming ``what`` when one is dynamic."""
    dims = [d if isinstance(d, int) else None for d in (value.shape or [])]
    if value.shape is None or None in dims:
        raise InputError(f"{what} needs an input of static shape, got {show(value)}")
    return dims  # type: ignore[return-value]


def int64(item: NodeInput) -> ir.Value:
    """``item`` as int64 (constants converted here, computed values through a Cast)."""
    data = constant_data(item)
    if data is not None:
        whole = data.dtype.kind in "iub" or (data.dtype.kind == "f" and bool(np.all(np.mod(data, 1) == 0)))
        if not whole:
            raise InputError(f"an integer input (indices, axes, a shape, slice bounds) was given "
                             f"{data.dtype} values {data.reshape(-1)[:4].tolist()}; give integers")
        return value_of(np.asarray(data, dtype=np.int64))
    value = value_of(item)
    if value.dtype == ir.DataType.INT64:
        return value
    return step("Cast", [value], {"to": int(ir.DataType.INT64)})


def like(value: ir.Value, number: Any) -> ir.Value:
    """A constant of ``value``'s element type."""
    dtype = value.dtype.numpy() if value.dtype is not None else np.float32
    return value_of(np.asarray(number, dtype=dtype))


PATTERN_KEY = "inferplex.pattern"
"""onnx-ir value ``meta`` key: the value is part of a pattern (``inferplex.passes.AnyInput``,
``WrapType``, ... or an op built on one), of no element type or shape, so ops built on it are not
inferred and their outputs are pattern values too."""


def _infer(built: Node, node: ir.Node, inputs: Sequence[ir.Value | None], attrs: dict[str, Any]) -> None:
    if any(value is not None and PATTERN_KEY in value.meta for value in inputs):
        for output in node.outputs:  # a pattern's op: of any type and shape, as its inputs
            output.meta[PATTERN_KEY] = True
        return
    names = ["" if v is None else f"in{i}" for i, v in enumerate(inputs)]
    outs = [f"out{i}" for i in range(len(node.outputs))]
    proto = onnx.helper.make_node(node.op_type, names, outs, **attrs)
    types, data = {}, {}
    for label, value in zip(names, inputs, strict=True):
        if value is None:
            continue
        dims = None if value.shape is None else [d if isinstance(d, int) else d.value for d in value.shape]
        types[label] = onnx.helper.make_tensor_type_proto(int(value.dtype or 0), dims)
        if value.const_value is not None and value.const_value.nbytes <= 1024:
            data[label] = onnx.numpy_helper.from_array(value.const_value.numpy(), label)
    try:
        schema = onnx.defs.get_schema(node.op_type, OPSET)
        inferred = onnx.shape_inference.infer_node_outputs(
            schema, proto, types, data, opset_imports=[onnx.helper.make_opsetid("", OPSET)])
    except (onnx.shape_inference.InferenceError, onnx.defs.SchemaError,
            onnx.checker.ValidationError) as error:  # ValidationError: a type the op does not take
        detail = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        shapes = ", ".join(show(v) for v in inputs if v is not None)
        raise InputError(f"{built.get_type_name()} {built.get_friendly_name()!r} cannot take inputs "
                         f"{shapes}: {detail}") from error
    for label, value in zip(outs, node.outputs, strict=True):
        tensor = inferred[label].tensor_type if label in inferred else None
        if tensor is None:
            continue
        value.type = ir.TensorType(ir.DataType(tensor.elem_type)) if tensor.elem_type else None
        if tensor.HasField("shape"):
            value.shape = ir.Shape([d.dim_value if d.HasField("dim_value") else (d.dim_param or None)
                                    for d in tensor.shape.dim])


def show(value: ir.Value) -> str:
    """``f32[1,3,?,?]``: a value's element type and dims, for messages."""
    from inferplex.api.nodes import dims_of
    from inferplex.api.reshape import format_dims

    dtype = value.dtype.name.lower() if value.dtype is not None else "?"
    return f"{dtype}{format_dims(dims_of(value))}"
