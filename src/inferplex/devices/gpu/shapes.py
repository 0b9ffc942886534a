"""ONNX shape inference for the GPU lowering, optionally with the graph inputs' dims fixed.

Shape inference runs on a weight-free copy of the model (large initializers
become graph inputs of the same type and shape), built once per model, so the
caller's model is never touched and specializing on many input shapes does not
serialize the weights again.  Fixing the inputs' dims (``input_shapes``) makes
every shape computed from them static, which lets the analysis fold ``Shape``,
``Size`` and the shape arithmetic downstream of them to constants.  ONNX Runtime's
quantized contrib ops, which ONNX's inference does not know, are replaced in the copy by
standard ops of the same output types and shapes (:mod:`._contrib_shapes`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence

import onnx
import onnx_ir as ir

from inferplex._serialize import serialize_leaving_out
from inferplex.devices.gpu._contrib_shapes import replace_contrib_ops

__all__ = ["ShapeInference", "TypeMap"]

TypeMap = dict[str, tuple[ir.DataType | None, tuple[int | str | None, ...] | None]]
"""Value name -> (element type, shape: ints, symbolic names, None for unknown dims)."""

_WEIGHT_LIMIT_BYTES = 1024
"""Initializers up to this size stay (shape inference may read them: Reshape targets, axes)."""


def _dims(shape: onnx.TensorShapeProto) -> tuple[int | str | None, ...]:
    return tuple(d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in shape.dim)


def _weightless(model: ir.Model) -> bytes:
    """The model with its large initializers as typed inputs, never copied (see ``serialize``)."""
    proto, left = serialize_leaving_out(model, _large)
    inputs = {i.name for i in proto.graph.input}
    for value in left:
        if value.name not in inputs:
            tensor = value.const_value
            assert tensor is not None
            proto.graph.input.append(onnx.helper.make_tensor_value_info(
                value.name or "", tensor.dtype.value, [int(d) for d in tensor.shape.numpy()]))
    replace_contrib_ops(proto)  # ONNX's inference knows no com.microsoft op: standard twins stand in
    return proto.SerializeToString()


def _large(value: ir.Value) -> bool:
    tensor = value.const_value
    return tensor is not None and tensor.nbytes > _WEIGHT_LIMIT_BYTES


def _fix_inputs(proto: onnx.ModelProto, input_shapes: Mapping[str, Sequence[int]]) -> None:
    for info in proto.graph.input:
        shape = input_shapes.get(info.name)
        if shape is None or not info.type.HasField("tensor_type"):
            continue
        dims = info.type.tensor_type.shape.dim
        del dims[:]
        for size in shape:
            dims.add().dim_value = int(size)


class ShapeInference:
    """Element types and shapes of a model's values, for its declared or for fixed input shapes."""

    def __init__(self, model: ir.Model):
        self._serialized = _weightless(model)

    def types(self, input_shapes: Mapping[str, Sequence[int]] | None = None) -> TypeMap:
        proto = onnx.ModelProto.FromString(self._serialized)
        if input_shapes:
            _fix_inputs(proto, input_shapes)
        # A model shape inference rejects still lowers with what it declares.
        with contextlib.suppress(Exception):  # noqa: BLE001
            proto = onnx.shape_inference.infer_shapes(proto, strict_mode=False, data_prop=True)
        result: TypeMap = {}
        for info in [*proto.graph.input, *proto.graph.value_info, *proto.graph.output]:
            if not info.type.HasField("tensor_type"):
                continue
            tensor = info.type.tensor_type
            dtype = ir.DataType(tensor.elem_type) if tensor.elem_type else None
            result[info.name] = (dtype, _dims(tensor.shape) if tensor.HasField("shape") else None)
        if input_shapes:
            for name, shape in input_shapes.items():  # the run-time shapes, whatever inference said
                dtype = result.get(name, (None, None))[0]
                result[name] = (dtype, tuple(int(s) for s in shape))
        return result
