"""Rewrites applied while the GraphModule is built, and the weights shared between lowerings.

* Conv followed by BatchNormalization (inference) becomes one Conv with folded
  weights, ``W' = W * s`` and ``b' = (b - mean) * s + beta`` with
  ``s = gamma / sqrt(var + eps)``, computed in float64 and cast once to the
  weight's type, so f32 results stay within rounding of the unfused pair.  It
  applies when the Conv's output feeds only that BatchNormalization and every
  parameter is a constant.
* MatMul by a constant matrix followed by Add of a constant bias vector becomes
  one ``F.linear``, which runs as a single GEMM with the bias in its epilogue.
* Attention written out, ``MatMul(Q, K^T)``, then an optional ``Div``/``Mul`` by a
  constant scalar, an optional ``Add`` of a mask that does not grow the scores,
  ``Softmax`` over the last axis and ``MatMul`` by V, becomes one
  ``F.scaled_dot_product_attention`` (fused kernels on CUDA: no scores tensor
  in memory).  It applies when every intermediate feeds only the next step and
  Q, K^T and V have the same known batch dims, so that the fused call computes
  exactly what the ONNX ops do, up to rounding.
* ``channels_last``: 4-D Conv weights are stored NHWC and each 4-D Conv's input
  is brought to NHWC (a no-op when it already is, so only the first Conv of a
  chain copies); graph outputs are made contiguous again.  Values keep their
  logical shapes, and every reshape in the lowerings is ``reshape`` (which
  copies non-contiguous data), so results are the same, only the layout the
  convolution kernels see changes.
* ``Mul(Cast(MatMulInteger(a, W)), scale)``, as ``quantize_dynamic`` writes a
  MatMul, becomes one call (:func:`~inferplex.devices.gpu.ops.quantized.dynamic_quantized_linear`)
  when W is a constant 2-D int8 tensor with zero point 0, K and N multiples of
  8, a's zero point one value and the scale one value or one per column; a
  constant bias Add after the Mul joins the call.
* A MatMul (or a plain Gemm) of two DequantizeLinear outputs, as
  ``onnxruntime.quantization.quantize_static(quant_format=QDQ)`` writes it, becomes
  one int8 matmul (:func:`~inferplex.devices.gpu.ops.quantized.quantized_linear`):
  the activation's DequantizeLinear reads 8-bit data with a constant per-tensor
  scale and zero point, the weight's is a constant 2-D int8 tensor with zero
  point 0 and a per-tensor or per-output-channel scale, and K, N are multiples
  of 8 (the int8 kernel's rule on CUDA).  A constant bias (Gemm's C, or an Add
  after a MatMul) joins the epilogue, and the QuantizeLinear that makes the
  activation (same scale and zero point, read by nothing else) runs inside the
  call.  Dequantization is linear, so this is the same sum as the float MatMul
  on dequantized values (see ``quantized_linear``).

:class:`WeightCache` holds the device tensors of constants for every lowering
of one model, so a per-signature specialization reuses the generic lowering's
weights instead of uploading them again.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import onnx_ir as ir
import torch
import torch.nn.functional as F

if TYPE_CHECKING:
    from inferplex.devices.gpu.lower import Analysis

__all__ = ["Attention", "DynamicMatMul", "Fusions", "QuantizedMatMul", "WeightCache", "fold_conv_bn",
           "linear", "plan_fusions", "scaled_dot_product_attention", "to_channels_last"]

_ONNX_DOMAINS = ("", "ai.onnx")
_FLOAT_KINDS = "f"
_ATTENTION_TYPES = (ir.DataType.FLOAT, ir.DataType.FLOAT16, ir.DataType.BFLOAT16, ir.DataType.DOUBLE)


class WeightCache:
    """Device tensors of constants, shared by the generic and the per-signature lowerings of a model.

    Only values that are constant in the generic analysis are shared: those do
    not depend on input shapes.  Values that became constant through
    specialization (a ``Shape`` output, ...) differ per signature and are not.
    """

    def __init__(self) -> None:
        self.tensors: dict[Any, torch.Tensor] = {}
        self.stable: frozenset[ir.Value] | None = None
        self._lock = threading.Lock()

    def adopt(self, analysis: Analysis) -> None:
        """Take the generic analysis's constants as the shareable ones (first lowering only)."""
        if self.stable is None:
            self.stable = frozenset(analysis.constants)

    def get(self, key: Any, sources: Iterable[ir.Value | None],
            make: Callable[[], torch.Tensor]) -> torch.Tensor:
        if self.stable is None or not all(s is None or s in self.stable for s in sources):
            return make()
        with self._lock:
            tensor = self.tensors.get(key)
            if tensor is None:
                tensor = self.tensors[key] = make()
            return tensor


@dataclass(frozen=True)
class Attention:
    """A MatMul-[scale]-[Add mask]-Softmax-MatMul chain emitted as one scaled dot product attention."""

    query: ir.Value
    key_t: ir.Value
    """K transposed, as the first MatMul takes it."""
    value: ir.Value
    mask: ir.Value | None
    scale: float
    output: ir.Value
    """The second MatMul's output."""
    absorbed: tuple[ir.Node, ...]
    """The chain's nodes before the second MatMul, which emits the fused call: where every
    input (a mask made after the scores, say) is ready."""


@dataclass(frozen=True)
class QuantizedMatMul:
    """A MatMul or Gemm of DequantizeLinear outputs emitted as one int8 matmul."""

    activation: ir.Value
    """The 8-bit data the activation's DequantizeLinear reads."""
    activation_scale: ir.Value
    activation_zero: ir.Value | None
    activation_signed: bool
    """Whether the activation's data is int8 (else uint8)."""
    weight: ir.Value
    """The constant int8 weight as the model holds it: K x N, or N x K where ``transposed``."""
    weight_scale: ir.Value
    transposed: bool
    bias: ir.Value | None
    """A constant float bias of N values, or None."""
    output: ir.Value
    """The value the fused call produces (the MatMul's, or its bias Add's)."""
    dequantizers: tuple[ir.Node, ...]
    """The activation's and weight's DequantizeLinear nodes, absorbed where nothing else reads them."""
    source: ir.Value | None = None
    """The float input of the activation's QuantizeLinear when the call quantizes it itself (the
    QuantizeLinear, with the DequantizeLinear's scale and zero point, feeds nothing else)."""


@dataclass(frozen=True)
class DynamicMatMul:
    """``Mul(Cast(MatMulInteger(a, constant int8 weight)), scale)`` emitted as one call."""

    matmul: ir.Node
    """The MatMulInteger."""
    matmul_name: str
    """Its friendly name, which the fused call's profiling record carries."""
    weight: ir.Value
    """The constant int8 K x N weight."""
    scale: ir.Value
    bias: ir.Value | None
    """A constant float32 bias of N values added after the Mul, or None."""
    output: ir.Value
    """The Mul's output, or the bias Add's."""
    absorbed: tuple[ir.Node, ...]
    """MatMulInteger and Cast (the Mul emits the call, where the scale is ready too), and the Add."""


@dataclass
class Fusions:
    """What :func:`plan_fusions` found, by friendly name of the node that is emitted."""

    conv_bn: dict[str, ir.Node] = field(default_factory=dict)
    """Conv -> the BatchNormalization it absorbs."""
    linear: dict[str, tuple[ir.Node, int]] = field(default_factory=dict)
    """MatMul -> (the Add it absorbs, index of the bias among the Add's inputs)."""
    attention: dict[str, Attention] = field(default_factory=dict)
    """Last MatMul of an attention chain -> the chain."""
    quantized_matmul: dict[str, QuantizedMatMul] = field(default_factory=dict)
    """MatMul or Gemm of DequantizeLinear outputs -> the int8 matmul that replaces it."""
    dynamic_matmul: dict[str, DynamicMatMul] = field(default_factory=dict)
    """Mul of a Cast MatMulInteger by its scale -> the chain."""
    absorbed: set[ir.Node] = field(default_factory=set)
    """Nodes emitted as part of another: they are skipped."""
    channels_last_convs: set[str] = field(default_factory=set)
    """4-D Convs whose input is brought to NHWC."""
    channels_last_weights: set[ir.Value] = field(default_factory=set)
    """4-D Conv weights stored NHWC."""


def _sole_consumer(value: ir.Value | None) -> tuple[ir.Node, int] | None:
    if value is None or value.is_graph_output():
        return None
    uses = list(value.uses())
    return (uses[0].node, uses[0].idx) if len(uses) == 1 else None


def _is_float(array: np.ndarray | None) -> bool:
    return array is not None and (array.dtype.kind == _FLOAT_KINDS or array.dtype.name == "bfloat16")


def _constant(analysis: Analysis, value: ir.Value | None) -> np.ndarray | None:
    return None if value is None else analysis.constants.get(value)


def _runs(analysis: Analysis, names: dict[ir.Node, str], node: ir.Node) -> bool:
    name = names.get(node)
    return name is not None and name in analysis.functions and name not in analysis.folded


def _bn_after(analysis: Analysis, names: dict[ir.Node, str], conv: ir.Node) -> ir.Node | None:
    consumer = _sole_consumer(conv.outputs[0])
    if consumer is None or consumer[1] != 0:
        return None
    bn = consumer[0]
    if bn.op_type != "BatchNormalization" or bn.domain not in _ONNX_DOMAINS or not _runs(analysis, names, bn):
        return None
    params = [_constant(analysis, v) for v in bn.inputs[1:5]]
    weight = _constant(analysis, conv.inputs[1]) if len(conv.inputs) > 1 else None
    has_bias = len(conv.inputs) > 2 and conv.inputs[2] is not None
    bias = _constant(analysis, conv.inputs[2]) if has_bias else None
    if weight is None or len(params) != 4 or not all(_is_float(p) for p in params) or not _is_float(weight):
        return None
    if has_bias and not _is_float(bias):
        return None
    channels = weight.shape[0]
    return bn if all(p.size == channels for p in params) else None  # type: ignore[union-attr]


def _bias_add_after(analysis: Analysis, names: dict[ir.Node, str],
                    matmul: ir.Node) -> tuple[ir.Node, int] | None:
    weight = _constant(analysis, matmul.inputs[1])
    info = analysis.infos.get(names[matmul])
    rank = info.rank(0) if info is not None else None
    if weight is None or not _is_float(weight) or weight.ndim != 2 \
            or matmul.inputs[0] in analysis.constants or rank is None or rank < 2:
        return None
    consumer = _sole_consumer(matmul.outputs[0])
    if consumer is None:
        return None
    add, index = consumer
    if add.op_type != "Add" or add.domain not in _ONNX_DOMAINS or not _runs(analysis, names, add):
        return None
    bias_index = 1 - index
    bias = _constant(analysis, add.inputs[bias_index])
    if bias is None or not _is_float(bias) or bias.ndim != 1 or bias.shape[0] != weight.shape[1] \
            or bias.dtype != weight.dtype:
        return None
    return add, bias_index


def _next(analysis: Analysis, names: dict[ir.Node, str], node: ir.Node,
          op_types: tuple[str, ...]) -> tuple[ir.Node, int] | None:
    """The sole consumer of ``node``'s output when it is one of ``op_types`` and runs."""
    consumer = _sole_consumer(node.outputs[0])
    if consumer is None or consumer[0].op_type not in op_types or consumer[0].domain not in _ONNX_DOMAINS \
            or not _runs(analysis, names, consumer[0]):
        return None
    return consumer


def _scalar(analysis: Analysis, value: ir.Value | None) -> float | None:
    array = _constant(analysis, value)
    return float(array.reshape(-1)[0]) if _is_float(array) and array.size == 1 else None  # type: ignore[union-attr]


def _same_batch_dims(shapes: list[tuple[int | str | None, ...] | None]) -> bool:
    """Known ranks >= 3, equal, and equal known dims before the last two."""
    if any(shape is None or len(shape) < 3 for shape in shapes):
        return False
    batches = {shape[:-2] for shape in shapes if shape is not None}
    return len({len(shape) for shape in shapes if shape is not None}) == 1 and len(batches) == 1 \
        and None not in next(iter(batches))


def _attention_from(analysis: Analysis, names: dict[ir.Node, str], matmul: ir.Node) -> Attention | None:
    """The attention chain that starts at ``matmul`` (see the module docstring), or None."""
    scores = analysis.infos[names[matmul]].output_shapes
    if not scores or scores[0] is None or None in scores[0]:
        return None
    chain, step, scale, mask = [], _next(analysis, names, matmul, ("Div", "Mul", "Add", "Softmax")), 1.0, None
    for op_types in (("Div", "Mul"), ("Add",)):
        if step is None or step[0].op_type not in op_types:
            continue
        node, index = step
        if analysis.infos[names[node]].output_shapes[:1] != scores[:1]:
            return None  # a scale or mask that broadcasts the scores up is not attention's
        if op_types == ("Add",):
            mask = node.inputs[1 - index]
        else:
            factor = _scalar(analysis, node.inputs[1 - index])
            if factor is None or factor == 0.0 or (node.op_type == "Div" and index != 0):
                return None
            scale = 1.0 / factor if node.op_type == "Div" else factor
        chain.append(node)
        step = _next(analysis, names, node, ("Add", "Softmax"))
    if step is None or step[0].op_type != "Softmax":
        return None
    softmax, info = step[0], analysis.infos[names[step[0]]]
    rank = info.rank(0)
    axis = int(info.attr("axis", -1 if info.opset >= 13 else 1))
    last = _next(analysis, names, softmax, ("MatMul",))
    if rank is None or axis % rank != rank - 1 or last is None or last[1] != 0:
        return None
    shapes = [*analysis.infos[names[matmul]].input_shapes[:2], analysis.infos[names[last[0]]].input_shapes[1]]
    dtypes = analysis.infos[names[matmul]].input_dtypes
    if not _same_batch_dims(shapes) or not dtypes or dtypes[0] not in _ATTENTION_TYPES:
        return None
    return Attention(matmul.inputs[0], matmul.inputs[1], last[0].inputs[1], mask, scale,  # type: ignore[arg-type]
                     last[0].outputs[0], (matmul, *chain, softmax))

_INT32_EXACT_DEPTH = 1 << 16
"""Longest reduction whose int32 sums of (8-bit - zero point) x int8 products cannot overflow."""


def _dequantizer(value: ir.Value | None) -> ir.Node | None:
    """The DequantizeLinear producing ``value``, when it is per tensor or per axis with a float output."""
    node = None if value is None else value.producer()
    if node is None or node.op_type != "DequantizeLinear" or node.domain not in _ONNX_DOMAINS:
        return None
    unusual = [name for name in ("block_size", "output_dtype") if name in node.attributes
               and node.attributes[name].value]
    return None if unusual else node


def _activation_dequantizer(analysis: Analysis, names: dict[ir.Node, str], node: ir.Node) -> ir.Node | None:
    """Input 0's DequantizeLinear, running on 8-bit data with a constant float32 per-tensor scale."""
    dq = _dequantizer(node.inputs[0])
    if dq is None or not _runs(analysis, names, dq) or analysis.infos[names[dq]].input_dtypes[0] \
            not in (ir.DataType.INT8, ir.DataType.UINT8):
        return None
    scale = _constant(analysis, dq.inputs[1])
    zero = _constant(analysis, dq.inputs[2]) if len(dq.inputs) > 2 and dq.inputs[2] is not None else None
    if scale is None or scale.dtype != np.float32 or scale.size != 1:
        return None
    if zero is None and len(dq.inputs) > 2 and dq.inputs[2] is not None:
        return None  # a zero point computed at run time
    return dq if zero is None or zero.size == 1 else None


def _weight_dequantizer(analysis: Analysis, node: ir.Node, transposed: bool) -> tuple[ir.Node, int] | None:
    """Input 1's DequantizeLinear of a constant int8 weight (see :func:`_int8_weight`) with a
    float32 scale per tensor or per output column, and the weight's width N."""
    dq = _dequantizer(node.inputs[1])
    if dq is None:
        return None
    zero = dq.inputs[2] if len(dq.inputs) > 2 else None
    weight, scale = _int8_weight(analysis, dq.inputs[0], zero, transposed), _constant(analysis, dq.inputs[1])
    if weight is None or scale is None or scale.dtype != np.float32:
        return None
    columns = weight.shape[0] if transposed else weight.shape[1]
    attribute = dq.attributes.get("axis")
    axis = int(attribute.value) % 2 if attribute is not None else 1
    if scale.size != 1 and (scale.size != columns or axis != (0 if transposed else 1)):
        return None
    return dq, columns


def _int8_weight(analysis: Analysis, weight: ir.Value | None, zero: ir.Value | None,
                 transposed: bool = False) -> np.ndarray | None:
    """A constant 2-D int8 weight with zero point 0 (absent or constant zeros) whose depth K and
    width N suit the int8 kernel (multiples of 8, K small enough for exact int32 sums)."""
    array, zeros = _constant(analysis, weight), _constant(analysis, zero)
    if array is None or array.dtype != np.int8 or array.ndim != 2 or (zero is not None and (
            zeros is None or zeros.any())):
        return None
    depth, columns = array.shape[::-1] if transposed else array.shape
    return None if depth % 8 or columns % 8 or depth > _INT32_EXACT_DEPTH else array


def _dynamic_matmul(analysis: Analysis, names: dict[ir.Node, str], mul: ir.Node) -> DynamicMatMul | None:
    """The ``quantize_dynamic`` chain that ends at ``mul`` (see the module docstring), or None."""
    for index in (0, 1):
        value = mul.inputs[index]
        cast = value.producer() if value is not None else None
        if cast is None or cast.op_type != "Cast" or cast.domain not in _ONNX_DOMAINS \
                or _next(analysis, names, cast, ("Mul",)) is None:
            continue
        to = cast.attributes.get("to")
        matmul = cast.inputs[0].producer() if cast.inputs[0] is not None else None
        if to is None or to.value != ir.DataType.FLOAT or matmul is None \
                or matmul.op_type != "MatMulInteger" or _next(analysis, names, matmul, ("Cast",)) is None:
            continue
        info = analysis.infos[names[matmul]]
        weight_zero = matmul.inputs[3] if len(matmul.inputs) > 3 else None
        weight = _int8_weight(analysis, matmul.inputs[1], weight_zero)
        zero_shape = info.input_shapes[2] if info.has_input(2) else ()
        scale_shape = analysis.infos[names[mul]].input_shapes[1 - index]
        if weight is None or (info.rank(0) or 0) < 2 or zero_shape not in ((), (1,)) \
                or scale_shape not in ((), (1,), (weight.shape[1],)) \
                or analysis.infos[names[mul]].input_dtypes[1 - index] != ir.DataType.FLOAT:
            continue
        found = _bias_add(analysis, names, mul, weight.shape[1])
        absorbed: tuple[ir.Node, ...]
        if found is None:
            bias, output, absorbed = None, mul.outputs[0], (matmul, cast)
        else:
            bias, output, absorbed = found[1], found[0].outputs[0], (matmul, cast, found[0])
        return DynamicMatMul(matmul, names[matmul], matmul.inputs[1], mul.inputs[1 - index],  # type: ignore[arg-type]
                             bias, output, absorbed)
    return None


def _bias_add(analysis: Analysis, names: dict[ir.Node, str], node: ir.Node,
              columns: int) -> tuple[ir.Node, ir.Value] | None:
    """The Add that alone reads ``node``'s output, with the constant float32 bias of ``columns``
    values it adds."""
    found = _next(analysis, names, node, ("Add",))
    if found is None:
        return None
    add, index = found
    bias = add.inputs[1 - index]
    return (add, bias) if bias is not None and _float_vector(analysis, bias, columns) else None


def _float_vector(analysis: Analysis, value: ir.Value | None, size: int) -> bool:
    array = _constant(analysis, value)
    return array is not None and array.dtype == np.float32 and array.shape == (size,)


def _quantized_matmul(analysis: Analysis, names: dict[ir.Node, str], node: ir.Node) -> QuantizedMatMul | None:
    """The int8 matmul that replaces ``node`` (MatMul or Gemm; see the module docstring), or None."""
    transposed, bias, output = False, None, node.outputs[0]
    if node.op_type == "Gemm":
        attrs = {name: attribute.value for name, attribute in node.attributes.items()}
        if set(attrs) - {"alpha", "beta", "transA", "transB"} or attrs.get("alpha", 1.0) != 1.0 \
                or attrs.get("beta", 1.0) != 1.0 or attrs.get("transA", 0):
            return None
        transposed = bool(attrs.get("transB", 0))
        bias = node.inputs[2] if len(node.inputs) > 2 else None
    elif (analysis.infos[names[node]].rank(0) or 0) < 2:
        return None
    activation = _activation_dequantizer(analysis, names, node)
    weight = _weight_dequantizer(analysis, node, transposed)
    if activation is None or weight is None:
        return None
    (dq, columns) = weight
    if node.op_type == "Gemm" and bias is not None and not _float_vector(analysis, bias, columns):
        return None
    if node.op_type == "MatMul" and (add := _bias_add(analysis, names, node, columns)) is not None:
        bias, output = add[1], add[0].outputs[0]
    zero = activation.inputs[2] if len(activation.inputs) > 2 else None
    signed = analysis.infos[names[activation]].input_dtypes[0] == ir.DataType.INT8
    return QuantizedMatMul(activation.inputs[0], activation.inputs[1], zero, signed,  # type: ignore[arg-type]
                           dq.inputs[0], dq.inputs[1], transposed, bias, output,  # type: ignore[arg-type]
                           (activation, dq))


def _absorb_dequantizers(analysis: Analysis, names: dict[ir.Node, str], fusions: Fusions) -> None:
    """Skip the DequantizeLinear nodes that only fused int8 matmuls read, and the QuantizeLinear
    before an activation's when it feeds only that one fused matmul (see :func:`_quantizer`)."""
    fused = {node for name, node in analysis.nodes if name in fusions.quantized_matmul}
    for name, found in list(fusions.quantized_matmul.items()):
        for dq in found.dequantizers:
            value = dq.outputs[0]
            if not value.is_graph_output() and all(use.node in fused for use in value.uses()):
                fusions.absorbed.add(dq)
        activation = found.dequantizers[0]
        if activation in fusions.absorbed and _sole_consumer(activation.outputs[0]) is not None \
                and (quantizer := _quantizer(analysis, names, activation)) is not None:
            fusions.absorbed.add(quantizer)
            fusions.quantized_matmul[name] = dataclasses.replace(found, source=quantizer.inputs[0])


def _quantizer(analysis: Analysis, names: dict[ir.Node, str], dq: ir.Node) -> ir.Node | None:
    """The QuantizeLinear of float32 data whose output only ``dq`` reads, with dq's constant scale
    and zero point: quantizing and dequantizing with the same numbers is what the fused call does."""
    quantizer, data = dq.inputs[0].producer(), dq.inputs[0]  # type: ignore[union-attr]
    if quantizer is None or quantizer.op_type != "QuantizeLinear" or quantizer.domain not in _ONNX_DOMAINS \
            or not _runs(analysis, names, quantizer) or _sole_consumer(data) is None \
            or analysis.infos[names[quantizer]].input_dtypes[0] != ir.DataType.FLOAT:
        return None
    attributes = quantizer.attributes
    if any(attributes[a].value for a in ("block_size", "output_dtype") if a in attributes):
        return None
    pairs = [(_constant(analysis, q), _constant(analysis, d)) for q, d in
             zip(quantizer.inputs[1:3], dq.inputs[1:3], strict=False)]
    if len(quantizer.inputs) != len(dq.inputs) or any(
            q is None or d is None or q.dtype != d.dtype or not np.array_equal(q, d) for q, d in pairs):
        return None
    return quantizer


def plan_fusions(analysis: Analysis, channels_last: bool) -> Fusions:
    """Find the rewrites of the module docstring in an analysis (which is not changed)."""
    names = {node: name for name, node in analysis.nodes}
    fusions = Fusions()
    for name, node in analysis.nodes:
        if node.domain not in _ONNX_DOMAINS or not _runs(analysis, names, node) or node in fusions.absorbed:
            continue
        if node.op_type == "Conv":
            info = analysis.infos[name]
            if channels_last and info.rank(0) == 4:
                fusions.channels_last_convs.add(name)
                weight = node.inputs[1]
                if weight is not None:  # a missing weight fails in the Conv itself
                    fusions.channels_last_weights.add(weight)
            bn = _bn_after(analysis, names, node)
            if bn is not None:
                fusions.conv_bn[name] = bn
                fusions.absorbed.add(bn)
        elif node.op_type == "MatMul" and name in fusions.attention:
            continue  # the end of an attention chain: it emits the chain
        elif node.op_type == "MatMul" and (attention := _attention_from(analysis, names, node)) is not None:
            fusions.attention[names[attention.output.producer()]] = attention  # type: ignore[index]
            fusions.absorbed.update(attention.absorbed)
        elif node.op_type in ("MatMul", "Gemm") \
                and (quantized := _quantized_matmul(analysis, names, node)) is not None:
            fusions.quantized_matmul[name] = quantized
            if quantized.output is not node.outputs[0]:
                fusions.absorbed.add(quantized.output.producer())  # type: ignore[arg-type]
        elif node.op_type == "Mul" and (dynamic := _dynamic_matmul(analysis, names, node)) is not None:
            fusions.dynamic_matmul[name] = dynamic
            fusions.absorbed.update(dynamic.absorbed)
        elif node.op_type == "MatMul":
            found = _bias_add_after(analysis, names, node)
            if found is not None:
                fusions.linear[name] = found
                fusions.absorbed.add(found[0])
    _absorb_dequantizers(analysis, names, fusions)
    return fusions


def fold_conv_bn(weight: np.ndarray, bias: np.ndarray | None, bn: ir.Node,
                 params: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """(W', b') of a Conv absorbing ``bn`` (params: scale, B, mean, var), in float64, cast to W's type."""
    attribute = bn.attributes.get("epsilon")
    eps = float(attribute.value) if attribute is not None else 1e-5
    scale, beta, mean, var = (np.asarray(p, dtype=np.float64).reshape(-1) for p in params)
    factor = scale / np.sqrt(var + eps)
    folded_w = np.asarray(weight, dtype=np.float64) * factor.reshape((-1,) + (1,) * (weight.ndim - 1))
    base = np.zeros_like(factor) if bias is None else np.asarray(bias, dtype=np.float64).reshape(-1)
    folded_b = (base - mean) * factor + beta
    return folded_w.astype(weight.dtype), folded_b.astype(weight.dtype)


def linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """``x @ weight + bias`` as one GEMM with the bias in its epilogue (weight is ONNX's K x N)."""
    return F.linear(x, weight.t(), bias)


def scaled_dot_product_attention(query: torch.Tensor, key_t: torch.Tensor, value: torch.Tensor,
                                 mask: torch.Tensor | None, scale: float) -> torch.Tensor:
    """``softmax(query @ key_t * scale + mask) @ value`` as one fused call (``key_t``: K transposed).

    The fused CUDA kernels take Q, K and V with a dense last dim only (else torch
    falls back to its unfused math): a K^T made contiguous as it is gets copied back.
    """
    if mask is not None and mask.dtype != query.dtype:
        mask = mask.to(query.dtype)
    query, key, value = (x if x.stride(-1) == 1 else x.contiguous()
                         for x in (query, key_t.transpose(-1, -2), value))
    return F.scaled_dot_product_attention(query, key, value, attn_mask=mask, scale=scale)


def to_channels_last(x: torch.Tensor) -> torch.Tensor:
    """``x`` in NHWC memory order (itself when it already is)."""
    return x.contiguous(memory_format=torch.channels_last)


def contiguous(x: Any) -> Any:
    """A graph output in plain row-major order, whatever layout the convolutions used."""
    return x.contiguous() if isinstance(x, torch.Tensor) else x
