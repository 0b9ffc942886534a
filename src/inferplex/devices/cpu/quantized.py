"""Quantized models on the CPU: where its engines' integer kernels depart from ONNX.

ONNX defines a quantized model's value by its ops as written: DequantizeLinear,
the float op, QuantizeLinear (the QDQ format), and integer ops whose sums are
exact int32 sums (QLinearConv, QLinearMatMul).  Two departures are found by
comparing both engines with ONNX's reference evaluator and with ONNX Runtime
running each op as written (``tests/test_quantization_matrix.py``):

- OpenVINO's CPU plugin reads 16-bit QuantizeLinear/DequantizeLinear (uint16,
  int16; ``quantize_static`` writes them for 16-bit activations) into results
  thousands of steps away from ONNX's, on any CPU.
- On x86 CPUs without VNNI (AVX512_VNNI, AVX_VNNI or AMX), OpenVINO's int8 kernels and
  ONNX Runtime's fused QDQ kernels multiply uint8 activations by int8 weights
  with an instruction (``vpmaddubsw``) that saturates the 16-bit sum of each pair of
  products: with weights past 7 bits (``quantize_static``'s default int8 weights,
  unless ``reduce_range``) results drift by many steps.  CPUs with VNNI sum in
  32 bits, exactly.

So the default engine leaves such models to ONNX Runtime
(:func:`onnx_runtime_keeps`), and ONNX Runtime runs their QDQ ops as written
(:func:`runs_as_written`: its QDQ fusions off, the session option
``session.disable_quant_qdq``), which computes ONNX's values at float speed.
Models whose weights fit 7 bits, or with uint8 weights, keep the int8 kernels.
"""

from __future__ import annotations

import platform

import numpy as np
import onnx_ir as ir

from inferplex.devices.cpu import cpu_info

__all__ = ["onnx_runtime_keeps", "runs_as_written"]

_SIXTEEN_BIT = frozenset({ir.DataType.UINT16, ir.DataType.INT16})
_QDQ = frozenset({"QuantizeLinear", "DequantizeLinear"})
_WEIGHT_INPUTS = {"DequantizeLinear": 0, "QLinearConv": 3, "QLinearMatMul": 3}
"""The input of each op that holds int8 weights where ``onnxruntime.quantization`` writes them."""
_PAIR_SAFE = 64
"""The largest weight magnitude whose pair sums with uint8 values (2 x 255 x 64) fit 16 bits."""


def onnx_runtime_keeps(model: ir.Model) -> str:
    """Why OpenVINO's CPU plugin computes ``model``'s quantized ops unlike ONNX ('' where it does not)."""
    if _sixteen_bit_qdq(model):
        return ("OpenVINO's CPU plugin computes 16-bit QuantizeLinear/DequantizeLinear unlike ONNX's "
                "definition")
    if not exact_int8_products() and _saturating_weights(model):
        return ("OpenVINO's int8 kernels saturate the 16-bit pair sums of uint8 x int8 products on "
                "CPUs without VNNI, unlike ONNX's exact int32 sums")
    return ""


def runs_as_written(model: ir.Model) -> bool:
    """Whether ONNX Runtime must run ``model``'s QDQ ops as written (its QDQ fusions off): its
    fused kernels depart from ONNX on 16-bit types and, on CPUs without VNNI, on int8 weights
    past 7 bits (see the module docstring)."""
    if not any(node.op_type in _QDQ and node.domain in ("", "ai.onnx") for node in model.graph):
        return False
    return _sixteen_bit_qdq(model) or (not exact_int8_products() and _saturating_weights(model))


def exact_int8_products() -> bool:
    """Whether this CPU's int8 kernels sum uint8 x int8 products exactly: any CPU but an x86
    without VNNI (AVX512_VNNI, AVX_VNNI or AMX)."""
    if platform.machine().lower() not in ("x86_64", "amd64", "i386", "i686"):
        return True
    return bool({"AVX512_VNNI", "AVX_VNNI", "AMX"} & set(cpu_info.instruction_sets()))


def _sixteen_bit_qdq(model: ir.Model) -> bool:
    for node in model.graph:
        if node.op_type in _QDQ and node.domain in ("", "ai.onnx"):
            quantized = node.outputs[0] if node.op_type == "QuantizeLinear" else node.inputs[0]
            if quantized is not None and quantized.dtype in _SIXTEEN_BIT:
                return True
    return False


def _saturating_weights(model: ir.Model) -> bool:
    """Whether a constant int8 weight of a quantized op holds a magnitude past :data:`_PAIR_SAFE`."""
    for node in model.graph:
        index = _WEIGHT_INPUTS.get(node.op_type)
        if index is None or node.domain not in ("", "ai.onnx") or len(node.inputs) <= index:
            continue
        weight = node.inputs[index]
        if weight is None or weight.dtype != ir.DataType.INT8:
            continue
        constant = weight.const_value
        producer = weight.producer()
        if constant is None and producer is not None and producer.op_type == "Constant":
            constant = producer.attributes["value"].as_tensor() if "value" in producer.attributes else None
        if constant is not None and np.abs(constant.numpy().astype(np.int16)).max(initial=0) > _PAIR_SAFE:
            return True
    return False
