"""Quantized models on the CPU: where its engines' integer kernels depart from ONNX.

ONNX defines a quantized model's value by its ops as written: DequantizeLinear,
the float op, QuantizeLinear (the QDQ format), and integer ops whose sums are
exact int32 sums (QLinearConv, QLinearMatMul, MatMulInteger).  Comparing both
engines with ONNX's reference evaluator and with ONNX Runtime running each op as
written (``tests/test_quantization_matrix.py``) finds these departures:

- OpenVINO's CPU plugin reads 16-bit QuantizeLinear/DequantizeLinear (uint16,
  int16; ``quantize_static`` writes them for 16-bit activations) into results
  thousands of steps away from ONNX's; ONNX Runtime's fused QDQ kernels put such
  models a hundred steps away.  Neither depends on the instruction set.
- ONNX Runtime fuses a blockwise DequantizeLinear (``block_size``; what
  ``MatMulNBitsQuantizer`` writes in the QDQ format) and its MatMul into
  ``MatMulNBits``, whose kernel computes less accurately than ONNX's float MatMul
  (outputs a few thousandths of their range away).
- On x86 CPUs without VNNI (AVX512_VNNI, AVX_VNNI or AMX), OpenVINO's int8 kernels
  and ONNX Runtime's fused QDQ kernels, QLinearConv (per-channel weights) and
  MatMulInteger multiply uint8 activations by int8 weights with an instruction
  (``vpmaddubsw``) that saturates the 16-bit sum of each pair of products: with
  weights past 7 bits (``onnxruntime.quantization``'s default int8 weights, unless
  ``reduce_range``) results drift by many steps.  With 7-bit weights OpenVINO
  still departs: it requantizes a residual Add of two int8 convolutions' outputs
  a step away from ONNX for some of its values, and the steps add up downstream.
  Intel CPUs with VNNI sum in 32 bits, exactly.
- On an AMD CPU with AVX512_VNNI (Zen 4), OpenVINO's 8-bit kernels depart too, at
  float32: per-channel QLinearConv products by tens of steps, separable per-channel
  convolutions by up to 4 steps, and an MLP with per-channel uint8 weights a step
  away on a quarter of its outputs.

So, on x86 CPUs other than Intel's with VNNI or AMX, the default engine leaves
models with 8-bit weights to ONNX Runtime (:func:`onnx_runtime_keeps`), and ONNX
Runtime runs such models, and 16-bit and blockwise ones, with their quantized ops
as written (:func:`runs_as_written`: its QDQ fusions off through the session option
``session.disable_quant_qdq``, its integer ops rewritten by
:func:`integer_ops_as_written`), which computes ONNX's values at float speed.
Models with 4-bit weights keep OpenVINO's kernels, as do dynamically quantized
models, whose MatMulInteger and ConvInteger OpenVINO sums exactly.
"""

from __future__ import annotations

import platform

import numpy as np
import onnx
import onnx_ir as ir
from onnx import helper

from inferplex.devices.cpu import cpu_info

__all__ = ["exact_int8_products", "integer_ops_as_written", "onnx_runtime_keeps", "runs_as_written"]

_SIXTEEN_BIT = frozenset({ir.DataType.UINT16, ir.DataType.INT16})
_QDQ = frozenset({"QuantizeLinear", "DequantizeLinear"})
_STATIC_WEIGHTS = {"DequantizeLinear": 0, "QLinearConv": 3, "QLinearMatMul": 3}
"""The input of each op that holds int8 weights where ``quantize_static`` writes them: where
OpenVINO's int8 kernels and ONNX Runtime's fused ones depart (OpenVINO's MatMulInteger and
ConvInteger sum exactly)."""
_DYNAMIC_WEIGHTS = {"MatMulInteger": 1}
"""The same where ``quantize_dynamic`` writes them, for ONNX Runtime's kernels that saturate (its
ConvInteger sums exactly)."""
_REWRITTEN = ("QLinearConv", "QLinearMatMul", "MatMulInteger")
_PAIR_SAFE = 64
"""The largest weight magnitude whose pair sums with uint8 values (2 x 255 x 64) fit 16 bits."""


def onnx_runtime_keeps(model: ir.Model) -> str:
    """Why OpenVINO's CPU plugin computes ``model``'s quantized ops unlike ONNX ('' where it does not)."""
    if _sixteen_bit_qdq(model):
        return ("OpenVINO's CPU plugin computes 16-bit QuantizeLinear/DequantizeLinear unlike ONNX's "
                "definition")
    if not exact_int8_products() and _int8_weights(model, _STATIC_WEIGHTS, eight_bit=_EIGHT_BIT):
        return ("OpenVINO's 8-bit kernels compute products unlike ONNX on x86 CPUs other than Intel's with "
                "VNNI or AMX (saturated pair sums on CPUs without VNNI, requantized sums)")
    return ""


def runs_as_written(model: ir.Model) -> bool:
    """Whether ONNX Runtime must run ``model``'s quantized ops as written (its QDQ fusions off, its
    QLinearConv, QLinearMatMul and MatMulInteger as :func:`integer_ops_as_written` writes them):
    its fused and integer kernels depart from ONNX on 16-bit types, on blockwise-quantized weights
    and, on CPUs without VNNI, on int8 weights (MatMulInteger's past 7 bits; see the module
    docstring)."""
    if not any(node.op_type in _QDQ | set(_STATIC_WEIGHTS) | set(_DYNAMIC_WEIGHTS)
               and node.domain in ("", "ai.onnx") for node in model.graph):
        return False
    return _sixteen_bit_qdq(model) or _blocked(model) or (not exact_int8_products() and (
        _int8_weights(model, _STATIC_WEIGHTS, eight_bit=_EIGHT_BIT)
        or _int8_weights(model, _DYNAMIC_WEIGHTS, _PAIR_SAFE)))


def exact_int8_products() -> bool:
    """Whether OpenVINO's 8-bit kernels compute ONNX's products on this CPU: any CPU but an x86
    other than Intel's with VNNI (AVX512_VNNI, AVX_VNNI or AMX; see the module docstring)."""
    if platform.machine().lower() not in ("x86_64", "amd64", "i386", "i686"):
        return True
    return cpu_info.vendor() == "GenuineIntel" \
        and bool({"AVX512_VNNI", "AVX_VNNI", "AMX"} & set(cpu_info.instruction_sets()))


def _sixteen_bit_qdq(model: ir.Model) -> bool:
    """Whether a QuantizeLinear or DequantizeLinear (ONNX's, or ONNX Runtime's ``com.microsoft``
    one, which ``quantize_static`` writes for 16-bit activations) has a 16-bit quantized type."""
    return any(node.op_type in _QDQ and node.domain in ("", "ai.onnx", "com.microsoft")
               and _quantized_dtype(node) in _SIXTEEN_BIT for node in model.graph)


def _blocked(model: ir.Model) -> bool:
    """Whether a DequantizeLinear dequantizes blockwise (``block_size``, opset 21)."""
    return any(node.op_type == "DequantizeLinear" and node.domain in ("", "ai.onnx")
               and node.attributes.get_int("block_size", 0) for node in model.graph)


def _quantized_dtype(node: ir.Node) -> ir.DataType | None:
    """The quantized type of a QuantizeLinear (its output) or DequantizeLinear (its input): the
    value's type where known, else its zero point's, else a QuantizeLinear's ``output_dtype``."""
    value = node.outputs[0] if node.op_type == "QuantizeLinear" else node.inputs[0]
    if value is not None and value.dtype is not None:
        return value.dtype
    zero = node.inputs[2] if len(node.inputs) > 2 else None
    if zero is not None and zero.dtype is not None:
        return zero.dtype
    output_dtype = node.attributes.get_int("output_dtype", 0) if node.op_type == "QuantizeLinear" else 0
    return ir.DataType(output_dtype) if output_dtype else None


_EIGHT_BIT = frozenset({ir.DataType.INT8, ir.DataType.UINT8})


def _int8_weights(model: ir.Model, weight_inputs: dict[str, int], past: int = -1,
                  eight_bit: frozenset[ir.DataType] = frozenset({ir.DataType.INT8})) -> bool:
    """Whether a quantized op has a constant weight of a type of ``eight_bit`` (int8 by default; the
    input of ``weight_inputs`` by op type) holding a magnitude past ``past`` (any, by default)."""
    for node in model.graph:
        index = weight_inputs.get(node.op_type)
        if index is None or node.domain not in ("", "ai.onnx") or len(node.inputs) <= index:
            continue
        weight = node.inputs[index]
        if weight is None or weight.dtype not in eight_bit:
            continue
        constant = weight.const_value
        producer = weight.producer()
        if constant is None and producer is not None and producer.op_type == "Constant":
            constant = producer.attributes["value"].as_tensor() if "value" in producer.attributes else None
        if constant is None:
            continue
        if past < 0 or np.abs(constant.numpy().astype(np.int16)).max(initial=0) > past:
            return True  # where any weight decides, none is read
    return False


def integer_ops_as_written(model_bytes: bytes) -> bytes:
    """The serialized model with each QLinearConv and QLinearMatMul written as the ops that define
    it: DequantizeLinear of its inputs (and of a QLinearConv's int32 bias, at the product of the
    input and weight scales), the float Conv or MatMul, QuantizeLinear of the result; and each
    MatMulInteger as a float64 MatMul of its zero-point-centered inputs, exact for any depth
    ONNX Runtime's int32 sums hold.  Run so, ONNX Runtime computes ONNX's values where its
    integer kernels saturate; models at opsets before 13 (no per-axis DequantizeLinear) and
    models with none of these ops come back unchanged."""
    model = onnx.load_from_string(model_bytes)
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)
    if opset < 13 or not any(n.op_type in _REWRITTEN and n.domain in ("", "ai.onnx")
                             for n in model.graph.node):
        return model_bytes
    nodes: list[onnx.NodeProto] = []
    for node in model.graph.node:
        if node.op_type == "MatMulInteger" and node.domain in ("", "ai.onnx"):
            nodes.extend(_matmul_integer_as_written(node))
        elif node.op_type in _REWRITTEN and node.domain in ("", "ai.onnx"):
            nodes.extend(_as_written(node))
        else:
            nodes.append(node)
    del model.graph.node[:]
    model.graph.node.extend(nodes)
    return model.SerializeToString()


def _as_written(node: onnx.NodeProto) -> list[onnx.NodeProto]:
    """DequantizeLinear - Conv or MatMul - QuantizeLinear for one QLinearConv or QLinearMatMul."""
    x, x_scale, x_zero, w, w_scale, w_zero, y_scale, y_zero, *bias = node.input
    name = node.name or node.output[0]
    conv = node.op_type == "QLinearConv"
    # a Conv's per-channel scales run along the weight's first axis, a MatMul's along B's last
    axis = 0 if conv else -1
    nodes = [helper.make_node("DequantizeLinear", [x, x_scale, x_zero], [f"{name}/x"], name=f"{name}/dq_x"),
             helper.make_node("DequantizeLinear", [w, w_scale, w_zero], [f"{name}/w"], name=f"{name}/dq_w",
                              axis=axis)]
    inputs = [f"{name}/x", f"{name}/w"]
    if conv and bias and bias[0]:
        nodes += [helper.make_node("Mul", [x_scale, w_scale], [f"{name}/b_scale"], name=f"{name}/b_scale"),
                  helper.make_node("DequantizeLinear", [bias[0], f"{name}/b_scale"], [f"{name}/b"],
                                   name=f"{name}/dq_b", axis=0)]
        inputs.append(f"{name}/b")
    nodes.append(helper.make_node("Conv" if conv else "MatMul", inputs, [f"{name}/y"], name=name))
    if conv:
        nodes[-1].attribute.extend(node.attribute)
    nodes.append(helper.make_node("QuantizeLinear", [f"{name}/y", y_scale, y_zero], list(node.output),
                                  name=f"{name}/q_y"))
    return nodes


def _matmul_integer_as_written(node: onnx.NodeProto) -> list[onnx.NodeProto]:
    """A MatMulInteger as its inputs centered in float64 (:func:`_centered`), their MatMul, and a
    Cast to int32."""
    a, b, *zeros = node.input
    a_zero, b_zero = [*zeros, "", ""][:2]
    name = node.name or node.output[0]
    return [*_centered(a, a_zero, f"{name}/a", per_row=True),
            *_centered(b, b_zero, f"{name}/b", per_row=False),
            helper.make_node("MatMul", [f"{name}/a", f"{name}/b"], [f"{name}/y"], name=name),
            helper.make_node("Cast", [f"{name}/y"], list(node.output), name=f"{name}/int32",
                             to=onnx.TensorProto.INT32)]


def _centered(data: str, zero: str, label: str, per_row: bool) -> list[onnx.NodeProto]:
    """Nodes computing ``label``, ``data - zero`` in float64; A's zero points are per row (or one),
    made a column so that they run along A's rows."""
    double = onnx.TensorProto.DOUBLE
    if not zero:
        return [helper.make_node("Cast", [data], [label], name=label, to=double)]
    nodes = [helper.make_node("Cast", [data], [f"{label}64"], name=f"{label}64", to=double),
             helper.make_node("Cast", [zero], [f"{label}_zero64"], name=f"{label}_zero64", to=double)]
    if per_row:
        nodes += [helper.make_node("Constant", [], [f"{label}_axis"], name=f"{label}_axis", value_ints=[-1]),
                  helper.make_node("Unsqueeze", [f"{label}_zero64", f"{label}_axis"], [f"{label}_zero"],
                                   name=f"{label}_zero")]
    else:
        nodes[-1].output[0] = f"{label}_zero"
    centered = helper.make_node("Sub", [f"{label}64", f"{label}_zero"], [label], name=f"{label}_centered")
    return [*nodes, centered]
