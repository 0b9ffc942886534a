"""Quantized models and the references the GPU device's quantization tests share.

``quantized`` runs ``onnxruntime.quantization`` on a float model; ``ort_unfused``
is the reference, ONNX Runtime running each op as written (graph optimizations
off: its QDQ fusions requantize differently); ``profiled`` runs a model on
``GPU.0`` and returns its profiling records, where fusions show.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
from onnx import numpy_helper

import inferplex as ov

PROFILED = {"ENABLE_PROFILING": True}


class _Reader:
    """Calibration batches for quantize_static."""

    def __init__(self, batches: list[np.ndarray]) -> None:
        self._batches = iter([{"x": b} for b in batches])

    def get_next(self) -> dict[str, np.ndarray] | None:
        return next(self._batches, None)


def _named(model: onnx.ModelProto) -> onnx.ModelProto:
    for i, node in enumerate(model.graph.node):
        node.name = node.name or f"{node.op_type}_{i}"
    return model


def quantized(tmp_path: Any, model: onnx.ModelProto, static: bool, **options: Any) -> onnx.ModelProto:
    """``model`` through ``quantize_static`` (QDQ format, calibrated on 4 random batches) or
    ``quantize_dynamic``, with ``options``; every node named."""
    from onnxruntime import quantization

    source, target = tmp_path / "float.onnx", tmp_path / "quantized.onnx"
    onnx.save(model, source)
    if static:
        rng = np.random.default_rng(3)
        shape = [d.dim_value or 8 for d in model.graph.input[0].type.tensor_type.shape.dim]
        reader = _Reader([rng.standard_normal(shape).astype(np.float32) for _ in range(4)])
        quantization.quantize_static(str(source), str(target), reader,
                                     quant_format=quantization.QuantFormat.QDQ, **options)
    else:
        quantization.quantize_dynamic(str(source), str(target), **options)
    return _named(onnx.load(target))


def ort_unfused(model: onnx.ModelProto, feeds: dict[str, Any]) -> list[np.ndarray]:
    """ONNX Runtime's outputs on the CPU, every op run as written."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def profiled(core: ov.Core, model: onnx.ModelProto, feeds: dict[str, Any],
             config: dict[str, Any] | None = None) -> tuple[np.ndarray, dict[str, str]]:
    """The first output on GPU.0 and, by node name, each profiling record's node type (its exec
    type for nodes folded at compile time)."""
    compiled = core.compile_model(model, "GPU.0", {**PROFILED, **(config or {})})
    request = compiled.create_infer_request()
    result = np.asarray(request.infer(feeds)[0])
    records = {r.node_name: r.exec_type if r.exec_type == "constant folded" else r.node_type
               for r in request.get_profiling_info()}
    return result, records


def dynamic_quantize_linear(x: np.ndarray) -> tuple[np.ndarray, np.float32, int]:
    """ONNX's DynamicQuantizeLinear in float32 numpy: uint8 levels (as int32), scale and zero point."""
    low, high = np.float32(min(x.min(), 0)), np.float32(max(x.max(), 0))
    scale = np.float32((high - low) / np.float32(255))
    zero = int(np.clip(np.rint(-low / scale), 0, 255))
    return np.clip(np.rint(x / scale) + zero, 0, 255).astype(np.int32), scale, zero


def output_scale(model: onnx.ModelProto) -> float:
    """The scale of the DequantizeLinear that makes the graph output (one quantization step)."""
    last = next(n for n in model.graph.node if n.output[0] == model.graph.output[0].name)
    scale = next(i for i in model.graph.initializer if i.name == last.input[1])
    return float(numpy_helper.to_array(scale).reshape(-1)[0])


def relu_range_dequantizers(model: onnx.ModelProto) -> set[str]:
    """The DequantizeLinear nodes of the pairs that alone read a Conv's output (or a residual Add's
    right after a Conv) with a zero point at the quantized type's minimum: where
    ``quantize_static`` folded the float model's Relu into the range."""
    inits = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    readers: dict[str, list[onnx.NodeProto]] = {}
    for node in model.graph.node:
        for name in node.input:
            readers.setdefault(name, []).append(node)
    producers = {o: n for n in model.graph.node for o in n.output}
    found = set()
    for q in model.graph.node:
        source = producers.get(q.input[0]) if q.op_type == "QuantizeLinear" else None
        if source is not None and source.op_type == "Add":
            source = next((producers[i] for i in source.input if i in producers
                           and producers[i].op_type == "Conv" and len(readers[i]) == 1), None)
        if source is None or source.op_type != "Conv" or len(readers[q.input[0]]) != 1:
            continue
        zero = inits[q.input[2]] if len(q.input) > 2 else np.zeros((), np.uint8)
        (dq,) = readers[q.output[0]]
        if int(zero.reshape(-1)[0]) == np.iinfo(zero.dtype).min:
            found.add(dq.name)
    return found
