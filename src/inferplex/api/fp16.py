"""``save_model(..., compress_to_fp16=True)``: float32 weights stored as float16, cast back on load.

OpenVINO's IR keeps such weights as f16 constants followed by a Convert to f32;
the ONNX equivalent is a float16 initializer followed by ``Cast(to=FLOAT)``.
Small initializers (scalars, axes, scales) and weights whose values do not fit
float16 stay float32, since rounding them changes what the model computes.
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

__all__ = ["compressed_weights_copy"]

_MIN_ELEMENTS = 16
"""Initializers with fewer elements are left as they are (they are not where the bytes are)."""
_FP16_MAX = float(np.finfo(np.float16).max)


def compressed_weights_copy(model: ir.Model) -> ir.Model:
    """A copy of ``model`` whose large float32 initializers are float16 + Cast."""
    copy = ir.serde.deserialize_model(ir.serde.serialize_model(model))
    graph = copy.graph
    for value in list(graph.initializers.values()):
        array = _compressible(value)
        if array is None or value.is_graph_input() or value.is_graph_output():
            continue
        half = ir.Value(name=f"{value.name}/fp16", const_value=ir.tensor(array.astype(np.float16)))
        half.type, half.shape = ir.TensorType(ir.DataType.FLOAT16), ir.Shape(array.shape)
        graph.initializers.pop(value.name or "")
        graph.register_initializer(half)
        cast = ir.node("Cast", [half], attributes={"to": int(ir.DataType.FLOAT)},
                       name=f"{value.name}/decompress")
        out = cast.outputs[0]
        out.type, out.shape = ir.TensorType(ir.DataType.FLOAT), ir.Shape(array.shape)
        value.replace_all_uses_with(out)
        value.const_value = None
        out.name = value.name
        first = next(iter(graph), None)
        if first is None:
            graph.append(cast)
        else:
            graph.insert_before(first, cast)
    return copy


def _compressible(value: ir.Value) -> np.ndarray | None:
    tensor = value.const_value
    if tensor is None or tensor.dtype != ir.DataType.FLOAT or tensor.size < _MIN_ELEMENTS:
        return None
    array = tensor.numpy()
    if not np.isfinite(array).all() or np.abs(array).max(initial=0.0) > _FP16_MAX:
        return None
    return array
