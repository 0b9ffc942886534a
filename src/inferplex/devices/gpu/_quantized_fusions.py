"""Fusion planning for quantized models: the int8 matmuls, QDQ pairs and dynamic convolutions of
:mod:`.optimize`'s module docstring.

:func:`quantized_matmul` finds a MatMul or Gemm of DequantizeLinear outputs
(``quantize_static``'s QDQ format), :func:`dynamic_matmul` and :func:`dynamic_conv` the
``Mul(Cast(MatMulInteger))`` and ``Mul(Cast(ConvInteger))`` chains of ``quantize_dynamic``, and
:func:`absorb_quantizers` which DequantizeLinear and QuantizeLinear nodes the
fused calls make redundant.  :func:`relu_range_pair` finds the pair after a Conv
whose zero point holds a Relu (which the convolution's call then runs with it),
:func:`quantize_dequantize_pairs` the remaining QuantizeLinear -> DequantizeLinear
pairs (the activations before a QDQ model's convolutions, adds and pools), and
:func:`centered_quantizers` the
DynamicQuantizeLinear nodes that hand dynamic convolutions centered float data.
The calls themselves are
:func:`~inferplex.devices.gpu.ops.fused_quantized.quantized_linear`,
:func:`~inferplex.devices.gpu.ops.fused_quantized.dynamic_quantized_linear`,
:func:`~inferplex.devices.gpu.ops.fused_quantized.dynamic_quantized_conv` and
:func:`~inferplex.devices.gpu.ops._fake_quantize.quantize_dequantize`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import onnx_ir as ir

from inferplex.devices.gpu._graph import ONNX_DOMAINS as _ONNX_DOMAINS
from inferplex.devices.gpu._graph import constant as _constant
from inferplex.devices.gpu._graph import next_consumer as _next
from inferplex.devices.gpu._graph import runs as _runs
from inferplex.devices.gpu._graph import sole_consumer as _sole_consumer

if TYPE_CHECKING:
    from inferplex.devices.gpu.lower import Analysis

__all__ = [
    "DynamicConv",
    "DynamicMatMul",
    "QuantizeDequantize",
    "QuantizedMatMul",
    "absorb_quantizers",
    "centered_quantizers",
    "dynamic_conv",
    "dynamic_matmul",
    "identity_pairs",
    "quantize_dequantize_pairs",
    "quantized_matmul",
    "relu_range_pair",
    "settled_quantizers",
]


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


@dataclass(frozen=True)
class QuantizeDequantize:
    """A QuantizeLinear -> DequantizeLinear pair on one per-tensor scale and zero point, emitted as
    one call in place of the DequantizeLinear (the QuantizeLinear is absorbed)."""

    source: ir.Value
    """The float input of the QuantizeLinear."""
    scale: ir.Value
    """The constant float32 scale, one value."""
    zero_point: int
    low: int
    high: int
    """The 8-bit type's range, which the quantized values saturate to."""
    quantizer: ir.Node
    output: ir.Value
    """The DequantizeLinear's output."""
    identity: bool = False
    """Whether the source already holds only values of this pair's grid (see
    :func:`identity_pairs`): the output is then the source itself, and no call runs."""


@dataclass(frozen=True)
class DynamicConv:
    """``Mul(Cast(ConvInteger(x, constant weight, x_zero, w_zero)), scale) (+ bias)`` emitted as one
    float convolution."""

    conv: ir.Node
    """The ConvInteger."""
    conv_name: str
    """Its friendly name, which the fused call's profiling record carries."""
    weight: ir.Value
    """The constant 8-bit weight (C_out x C_in/group x kernel)."""
    weight_zero: ir.Value | None
    """Its constant zero point (one value or one per output channel), or None."""
    scale: ir.Value
    """The float32 scale the Mul applies, one value."""
    bias: ir.Value | None
    """A constant float32 bias of one value per output channel added after the Mul, or None."""
    output: ir.Value
    """The Mul's output, or the bias Add's."""
    absorbed: tuple[ir.Node, ...]
    """ConvInteger and Cast (the Mul emits the call), and the Add."""


_F16_SAFE_DEPTH = 65000
"""Longest reduction whose sums of 8-bit products scaled by 2**-16 stay within float16's range."""

_EIGHT_BIT_RANGES = {ir.DataType.INT8: (-128, 127), ir.DataType.UINT8: (0, 255)}

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


def _cast_integer_products(analysis: Analysis, names: dict[ir.Node, str], mul: ir.Node,
                           op_type: str) -> Iterator[tuple[int, ir.Node, ir.Node]]:
    """(input index, Cast, ``op_type`` node) for each input of ``mul`` that is a Cast to float32 of an
    ``op_type`` node's output, the Cast read only by ``mul`` and the node only by the Cast."""
    for index in (0, 1):
        value = mul.inputs[index]
        cast = value.producer() if value is not None else None
        if cast is None or cast.op_type != "Cast" or cast.domain not in _ONNX_DOMAINS \
                or _next(analysis, names, cast, ("Mul",)) is None:
            continue
        to = cast.attributes.get("to")
        node = cast.inputs[0].producer() if cast.inputs[0] is not None else None
        if to is None or to.value != ir.DataType.FLOAT or node is None or node.op_type != op_type \
                or node.domain not in _ONNX_DOMAINS or _next(analysis, names, node, ("Cast",)) is None:
            continue
        yield index, cast, node


def dynamic_matmul(analysis: Analysis, names: dict[ir.Node, str], mul: ir.Node) -> DynamicMatMul | None:
    """The ``quantize_dynamic`` chain that ends at ``mul`` (see the module docstring), or None."""
    for index, cast, matmul in _cast_integer_products(analysis, names, mul, "MatMulInteger"):
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


def quantized_matmul(analysis: Analysis, names: dict[ir.Node, str], node: ir.Node) -> QuantizedMatMul | None:
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


def absorb_quantizers(analysis: Analysis, names: dict[ir.Node, str], planned: dict[str, QuantizedMatMul],
                      absorbed: set[ir.Node]) -> None:
    """Add to ``absorbed`` the DequantizeLinear nodes that only the ``planned`` int8 matmuls read.
    Where the QuantizeLinear before an activation's has only DequantizeLinear readers with its own
    numbers (see :func:`_quantizer`), the matmul's plan quantizes the float input itself, and
    :func:`settled_quantizers` may leave that QuantizeLinear out (the activation's
    DequantizeLinear, where another node reads it too, then runs as a pair from the float input)."""
    fused = {node for name, node in analysis.nodes if name in planned}
    for name, found in list(planned.items()):
        for dq in found.dequantizers:
            value = dq.outputs[0]
            if not value.is_graph_output() and all(use.node in fused for use in value.uses()):
                absorbed.add(dq)
        activation = found.dequantizers[0]
        if (quantizer := _quantizer(analysis, names, activation)) is not None \
                and _read_as_by_dequantizers(analysis, quantizer, activation):
            planned[name] = dataclasses.replace(found, source=quantizer.inputs[0])


def _quantizer(analysis: Analysis, names: dict[ir.Node, str], dq: ir.Node) -> ir.Node | None:
    """The QuantizeLinear of float32 data whose output ``dq`` reads, with dq's constant scale and
    zero point: quantizing and dequantizing with the same numbers is what the fused calls do.
    Other nodes may read its output too (see :func:`settled_quantizers`)."""
    quantizer = dq.inputs[0].producer()  # type: ignore[union-attr]
    if quantizer is None or quantizer.op_type != "QuantizeLinear" or quantizer.domain not in _ONNX_DOMAINS \
            or not _runs(analysis, names, quantizer) \
            or analysis.infos[names[quantizer]].input_dtypes[0] != ir.DataType.FLOAT:
        return None
    attributes = quantizer.attributes
    if any(attributes[a].value for a in ("block_size", "output_dtype") if a in attributes):
        return None
    return quantizer if _same_numbers(analysis, quantizer, dq) else None


def _same_numbers(analysis: Analysis, quantizer: ir.Node, dq: ir.Node) -> bool:
    """Whether ``dq`` dequantizes with the constant scale and zero point ``quantizer`` quantized with."""
    pairs = [(_constant(analysis, q), _constant(analysis, d)) for q, d in
             zip(quantizer.inputs[1:3], dq.inputs[1:3], strict=False)]
    return len(quantizer.inputs) == len(dq.inputs) and all(
        q is not None and d is not None and q.dtype == d.dtype and np.array_equal(q, d) for q, d in pairs)


def _read_as_by_dequantizers(analysis: Analysis, quantizer: ir.Node, dq: ir.Node) -> bool:
    """Whether every reader of ``quantizer``'s 8-bit output is a DequantizeLinear with its numbers
    (``quantize_static`` writes one DequantizeLinear per consumer of a quantized tensor)."""
    data = quantizer.outputs[0]
    uses = list(data.uses())
    return not data.is_graph_output() and any(use.node is dq for use in uses) and all(
        use.idx == 0 and _dequantizer(use.node.outputs[0]) is use.node
        and _same_numbers(analysis, quantizer, use.node) for use in uses)


def settled_quantizers(planned: dict[str, QuantizedMatMul], pairs: dict[str, QuantizeDequantize],
                       absorbed: set[ir.Node]) -> set[ir.Node]:
    """The QuantizeLinear nodes no call needs any more: every reader of their 8-bit output is a
    DequantizeLinear that an int8 matmul absorbed (and quantizes the float input itself) or that
    ends a pair of ``pairs`` (whose call reads the float input), and no matmul reads that output."""
    read = {found.activation for found in planned.values() if found.source is None}
    paired = {pair.output.producer() for pair in pairs.values()}
    quantizers: set[ir.Node | None] = {pair.quantizer for pair in pairs.values()}
    quantizers.update(found.dequantizers[0].inputs[0].producer()  # type: ignore[union-attr]
                      for found in planned.values() if found.source is not None)
    return {q for q in quantizers if q is not None and q.outputs[0] not in read
            and not q.outputs[0].is_graph_output()
            and all(use.node in absorbed or use.node in paired for use in q.outputs[0].uses())}


def quantize_dequantize_pairs(analysis: Analysis, names: dict[ir.Node, str],
                              planned: dict[str, QuantizedMatMul],
                              absorbed: set[ir.Node]) -> dict[str, QuantizeDequantize]:
    """The QuantizeLinear -> DequantizeLinear pairs to emit as one call, by the DequantizeLinear's
    friendly name: float32 data quantized to 8 bits per tensor, both nodes with the same constant
    scale and zero point (see :func:`_quantizer`), the DequantizeLinear not absorbed already and
    its 8-bit data read by no ``planned`` int8 matmul (which reads it where its own
    DequantizeLinear is kept for another reader).  Several pairs may share a QuantizeLinear (one
    per consumer of the quantized tensor); :func:`settled_quantizers` says which QuantizeLinear
    nodes then need not run."""
    read = {found.activation for found in planned.values() if found.source is None}
    pairs: dict[str, QuantizeDequantize] = {}
    for name, dq in analysis.nodes:
        if dq.op_type != "DequantizeLinear" or dq in absorbed or _dequantizer(dq.outputs[0]) is None \
                or not _runs(analysis, names, dq) or dq.inputs[0] in read:
            continue
        found = _pair(analysis, names, dq)
        if found is not None and found.quantizer not in absorbed:  # not a Conv's, see relu_range_pair
            pairs[name] = found
    return pairs


def _pair(analysis: Analysis, names: dict[ir.Node, str], dq: ir.Node) -> QuantizeDequantize | None:
    """The pair that ends at ``dq`` (see :func:`quantize_dequantize_pairs`), or None."""
    quantizer = _quantizer(analysis, names, dq)
    limits = _EIGHT_BIT_RANGES.get(analysis.infos[names[dq]].input_dtypes[0])  # type: ignore[arg-type]
    precision = quantizer.attributes.get("precision") if quantizer is not None else None
    if quantizer is None or limits is None or (precision is not None and precision.value):
        return None  # a division in another precision than float32 is not the fused call's
    scale = _constant(analysis, dq.inputs[1])
    zero_value = dq.inputs[2] if len(dq.inputs) > 2 else None
    zero = _constant(analysis, zero_value)
    if scale is None or scale.dtype != np.float32 or scale.size != 1 or (
            zero_value is not None and (zero is None or zero.size != 1)):
        return None
    step = float(scale.reshape(-1)[0])
    if not np.isfinite(step) or step == 0.0:
        return None
    zero_point = 0 if zero is None else int(zero.reshape(-1)[0])
    return QuantizeDequantize(quantizer.inputs[0], dq.inputs[1], zero_point, *limits,  # type: ignore[arg-type]
                              quantizer, dq.outputs[0])


_GRID_PRESERVING = frozenset({"Expand", "Flatten", "Gather", "Identity", "MaxPool", "Reshape", "Slice",
                               "Split", "Squeeze", "Transpose", "Unsqueeze"})
"""Ops whose outputs hold only values of their data input (input 0): moved, copied or picked."""


def identity_pairs(analysis: Analysis, pairs: dict[str, QuantizeDequantize]) -> dict[str, QuantizeDequantize]:
    """``pairs`` with those that change nothing marked ``identity``: the QuantizeLinear reads a
    data-movement op (:data:`_GRID_PRESERVING`) of a DequantizeLinear's output with the same scale,
    zero point and 8-bit type, as ``quantize_static`` writes around a Reshape, Transpose or Split.
    Every such value is ``(q - z) * s`` for an integer ``q`` in range, which the fake-quantize maps
    to itself exactly (``round`` of ``(q - z) * s / s``, or of its f16 rounding times ``1 / s``, is
    ``q - z`` for the 8-bit ranges)."""
    marked = dict(pairs)
    for name, pair in pairs.items():
        mover = pair.source.producer()
        if mover is None or mover.op_type not in _GRID_PRESERVING or mover.domain not in _ONNX_DOMAINS \
                or not mover.inputs or mover.inputs[0] is None:
            continue
        before = _dequantizer(mover.inputs[0])
        dq = pair.output.producer()
        if before is None or dq is None or not _same_numbers(analysis, before, dq) \
                or before.inputs[0] is None or dq.inputs[0] is None \
                or before.inputs[0].dtype != dq.inputs[0].dtype:
            continue
        marked[name] = dataclasses.replace(pair, identity=True)
    return marked


def relu_range_pair(analysis: Analysis, names: dict[ir.Node, str], value: ir.Value,
                    taken: set[ir.Node]) -> QuantizeDequantize | None:
    """The QuantizeLinear -> DequantizeLinear pair that alone reads ``value`` (see
    :func:`quantize_dequantize_pairs`) when its zero point is the quantized type's minimum (uint8
    0, int8 -128), or None: such a pair maps every value <= 0 to 0, so a Relu before it changes
    nothing, which is how ``quantize_static`` folds the Relu after a Conv into the range.
    Neither node may be in ``taken`` (emitted as part of another call already)."""
    step = _sole_consumer(value)
    quantizer = step[0] if step is not None and step[1] == 0 else None
    if quantizer is None or quantizer.op_type != "QuantizeLinear" or quantizer.domain not in _ONNX_DOMAINS:
        return None
    use = _sole_consumer(quantizer.outputs[0])
    dq = use[0] if use is not None and use[1] == 0 else None
    if dq is None or dq.op_type != "DequantizeLinear" or dq in taken or quantizer in taken \
            or _dequantizer(dq.outputs[0]) is None or not _runs(analysis, names, dq):
        return None
    found = _pair(analysis, names, dq)
    return found if found is not None and found.zero_point == found.low else None


def dynamic_conv(analysis: Analysis, names: dict[ir.Node, str], mul: ir.Node) -> DynamicConv | None:
    """The ``quantize_dynamic`` convolution chain that ends at ``mul``, or None: a ConvInteger of a
    constant 8-bit weight (zero point constant, per tensor or per output channel) whose output only
    a Cast to float reads, that only ``mul`` reads, by a float32 scale of one value."""
    for index, cast, conv in _cast_integer_products(analysis, names, mul, "ConvInteger"):
        weight = _constant(analysis, conv.inputs[1])
        zero_value = conv.inputs[3] if len(conv.inputs) > 3 else None
        zero = _constant(analysis, zero_value)
        mul_info = analysis.infos[names[mul]]
        if weight is None or weight.dtype not in (np.int8, np.uint8) or weight.ndim < 3 \
                or int(np.prod(weight.shape[1:])) > _F16_SAFE_DEPTH \
                or (zero_value is not None and (zero is None or zero.size not in (1, weight.shape[0]))) \
                or mul_info.input_shapes[1 - index] not in ((), (1,)) \
                or mul_info.input_dtypes[1 - index] != ir.DataType.FLOAT:
            continue
        found = _conv_bias_add(analysis, names, mul, weight.shape[0], weight.ndim)
        bias, output, absorbed = (None, mul.outputs[0], (conv, cast)) if found is None else (
            found[1], found[0].outputs[0], (conv, cast, found[0]))
        return DynamicConv(conv, names[conv], conv.inputs[1], zero_value, mul.inputs[1 - index],  # type: ignore[arg-type]
                           bias, output, absorbed)
    return None


def _conv_bias_add(analysis: Analysis, names: dict[ir.Node, str], node: ir.Node, channels: int,
                   rank: int) -> tuple[ir.Node, ir.Value] | None:
    """The Add that alone reads ``node``'s output (a convolution's, of ``rank`` dims), with the
    constant float32 bias of one value per channel it adds (shaped to broadcast over axis 1)."""
    found = _next(analysis, names, node, ("Add",))
    if found is None:
        return None
    add, index = found
    bias = add.inputs[1 - index]
    array = _constant(analysis, bias)
    spatial = (1,) * (rank - 2)
    if array is None or array.dtype != np.float32 or array.shape not in ((1, channels, *spatial),
                                                                        (channels, *spatial)):
        return None
    return add, bias  # type: ignore[return-value]


def centered_quantizers(analysis: Analysis, names: dict[ir.Node, str],
                        planned: dict[str, DynamicConv]) -> dict[str, ir.Value]:
    """DynamicQuantizeLinear nodes (by friendly name, with their data output) whose data and zero
    point only ``planned`` convolutions read (as their data and its zero point): they hand those
    the centered data instead (see
    :func:`~inferplex.devices.gpu.ops.fused_quantized.dynamic_quantize_centered`)."""
    convs = {found.conv for found in planned.values()}
    found: dict[str, ir.Value] = {}
    for name, node in analysis.nodes:
        if node.op_type != "DynamicQuantizeLinear" or node.domain not in _ONNX_DOMAINS \
                or not _runs(analysis, names, node) or len(node.outputs) != 3:
            continue
        data, zero = node.outputs[0], node.outputs[2]
        if list(data.uses()) and _read_only_by(data, convs, 0) and _read_only_by(zero, convs, 2):
            found[name] = data
    return found


def _read_only_by(value: ir.Value, nodes: set[ir.Node], index: int) -> bool:
    """Whether ``value`` is no graph output and only ``nodes`` read it, as their input ``index``."""
    return not value.is_graph_output() and all(use.node in nodes and use.idx == index for use in value.uses())
