"""ONNX shape inference for the GPU lowering, optionally with the graph inputs' dims fixed.

Shape inference runs on the weight-free copy of the model that
:func:`inferplex.shape_inference.weightless_copy` builds (large initializers
become graph inputs of the same type and shape; ONNX Runtime's contrib ops, which
ONNX's inference does not know, become standard ops of the same output types and
shapes), serialized once per model, so the caller's model is never touched and
specializing on many input shapes does not serialize the weights again.  Fixing
the inputs' dims (``input_shapes``) makes every shape computed from them static,
which lets the analysis fold ``Shape``, ``Size`` and the shape arithmetic
downstream of them to constants.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence

import onnx
import onnx_ir as ir

from inferplex.shape_inference import infer, proto_dims, weightless_copy

__all__ = ["ShapeInference", "TypeMap"]

TypeMap = dict[str, tuple[ir.DataType | None, tuple[int | str | None, ...] | None]]
"""Value name -> (element type, shape: ints, symbolic names, None for unknown dims)."""



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
        self._serialized = weightless_copy(model).SerializeToString()

    def types(self, input_shapes: Mapping[str, Sequence[int]] | None = None) -> TypeMap:
        proto = onnx.ModelProto.FromString(self._serialized)
        if input_shapes:
            _fix_inputs(proto, input_shapes)
        # A model shape inference rejects still lowers with what it declares.
        with contextlib.suppress(Exception):  # noqa: BLE001
            proto = infer(proto, strict=False)
        result: TypeMap = {}
        for info in [*proto.graph.input, *proto.graph.value_info, *proto.graph.output]:
            if not info.type.HasField("tensor_type"):
                continue
            tensor = info.type.tensor_type
            dtype = ir.DataType(tensor.elem_type) if tensor.elem_type else None
            result[info.name] = (dtype, proto_dims(tensor.shape) if tensor.HasField("shape") else None)
        if input_shapes:
            for name, shape in input_shapes.items():  # the run-time shapes, whatever inference said
                dtype = result.get(name, (None, None))[0]
                result[name] = (dtype, tuple(int(s) for s in shape))
        return result
