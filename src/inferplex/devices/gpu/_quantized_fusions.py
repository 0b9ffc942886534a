"""Fusion planning for quantized models: the int8 matmuls and dynamic convolutions of
:mod:`.optimize`'s module docstring (the QDQ pairs are in :mod:`._qdq_pairs`).

:func:`quantized_matmul` finds a MatMul or Gemm of DequantizeLinear outputs
(``quantize_static``'s QDQ format), :func:`dynamic_matmul` and :func:`dynamic_conv` the
``Mul(Cast(MatMulInteger))`` and ``Mul(Cast(ConvInteger))`` chains of ``quantize_dynamic``, and
:func:`absorb_quantizers` which DequantizeLinear nodes the fused calls make
redundant, :func:`centered_quantizers` the
DynamicQuantizeLinear nodes that hand dynamic convolutions centered float data, and
:func:`level_quantizers` those that hand them int8 levels instead.
The calls themselves are
:func:`~inferplex.devices.gpu.ops._fused_quantized.quantized_linear`,
:func:`~inferplex.devices.gpu.ops._fused_quantized.dynamic_quantized_linear`,
:func:`~inferplex.devices.gpu.ops._fused_quantized.dynamic_quantized_conv` and
:func:`~inferplex.devices.gpu.ops._fused_quantized.dynamic_quantize_centered`.
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
from inferplex.devices.gpu._graph import same_shapes, written_pads
from inferplex.devices.gpu._qdq_pairs import QuantizeDequantize, pairs_by_quantizer, pairs_reading
from inferplex.devices.gpu._qdq_pairs import dequantizer as _dequantizer
from inferplex.devices.gpu._qdq_pairs import quantizer_of as _quantizer
from inferplex.devices.gpu._qdq_pairs import read_as_by_dequantizers as _read_as_by_dequantizers

if TYPE_CHECKING:
    from inferplex.devices.gpu._activation_fusions import Gelu
    from inferplex.devices.gpu._qdq_gelu import QuantizedGelu
    from inferplex.devices.gpu._residual_layer_norm import ResidualLayerNorm
    from inferplex.devices.gpu.lower import Analysis

__all__ = [
    "DynamicConv",
    "DynamicMatMul",
    "QuantizedMatMul",
    "RowQuantizer",
    "absorb_quantizers",
    "centered_quantizers",
    "dynamic_conv",
    "dynamic_matmul",
    "gelu_source",
    "level_quantizers",
    "linear_epilogues",
    "quantized_matmul",
    "row_quantizers",
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
    requantize: QuantizeDequantize | None = None
    """The pair on the matmul's output that the call runs before adding ``bias`` (``quantize_static``
    writes MatMul -> pair -> bias Add), or None (see :func:`linear_epilogues`)."""
    quantize: QuantizeDequantize | None = None
    """The pair on ``output`` that the call runs last (its pairs then change nothing), or None."""
    gelu: QuantizedGelu | None = None
    """The GELU formula that alone reads ``quantize``'s output, which the call computes from the
    pair's levels by a table (see :func:`~._qdq_gelu.tabled_gelus`), or None: the call then
    gives the formula's output (or its quantizer's 8-bit data), not ``output``."""
    writes_levels: bool = False
    """Whether the call writes ``quantize``'s levels (its QuantizeLinear's data), which
    normalizations read, in place of ``output`` (see
    :func:`~._residual_layer_norm.level_inputs`)."""


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
    weight_scale: ir.Value | None = None
    """The constant float32 weight scale (one value, or one per column) where ``scale`` is ``Mul``
    of it and the scale of the DynamicQuantizeLinear that makes the data, or None: the call then
    multiplies the two itself (that Mul does not run)."""


@dataclass(frozen=True)
class DynamicConv:
    """``Mul(Cast(ConvInteger(x, constant weight, x_zero, w_zero)), scale) (+ bias) (+ residual)``
    emitted as one float convolution."""

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
    """The Mul's output, or the last Add's, or the Relu's."""
    absorbed: tuple[ir.Node, ...]
    """ConvInteger and Cast (the Mul emits the call), and the Adds and the Relu."""
    relu: bool = False
    """Whether a Relu that alone reads the Mul's (or the Adds') output runs in the call."""
    residual: ir.Value | None = None
    """A tensor of the output's shape that an Add adds after the bias (a residual block's
    shortcut), before the Relu, or None."""
    weight_scale: ir.Value | None = None
    """The constant one-value weight scale where ``scale`` is ``Mul`` of it and the scale of the
    DynamicQuantizeLinear that makes the input (``quantize_dynamic``'s form), or None: a program
    in a reduced precision then runs the float convolution on the dequantized input with the
    scale in its weight (see :func:`~.ops._fused_quantized.dequantized_conv`)."""


@dataclass(frozen=True)
class RowQuantizer:
    """A DynamicQuantizeLinear whose data only planned dynamic matmuls read, emitted as
    :func:`~.ops._fused_quantized.dynamic_quantize_rows` (see :func:`row_quantizers`), or as
    :func:`~.ops._gelu_levels.gelu_quantize_rows` where it quantizes a GELU's output."""

    input: ir.Value
    """What the call quantizes."""
    data: ir.Value
    """The quantizer's data output: the levels."""
    gelu: Gelu | None = None
    """The GELU formula that makes ``input`` and that only this quantizer reads, where a planned
    dynamic matmul's output only that formula reads: the call then computes the GELU itself from
    the formula's input (the formula does not run), or None."""
    matmul: str | None = None
    """With ``gelu``: the name of that matmul (its MatMulInteger's), whose call records what the
    quantizer reads of its output (see :mod:`.ops._gelu_levels`)."""


_F16_SAFE_DEPTH = 65000
"""Longest reduction whose sums of 8-bit products scaled by 2**-16 stay within float16's range."""

_INT32_EXACT_DEPTH = 1 << 16
"""Longest reduction whose int32 sums of (8-bit - zero point) x int8 products cannot overflow."""


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
        scale = mul.inputs[1 - index]
        return DynamicMatMul(matmul, names[matmul], matmul.inputs[1], scale, bias, output,  # type: ignore[arg-type]
                             absorbed, _weight_scale(analysis, matmul, scale, (1, weight.shape[1])))  # type: ignore[arg-type]
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


def linear_epilogues(analysis: Analysis, names: dict[ir.Node, str], planned: dict[str, QuantizedMatMul],
                     pairs: dict[str, QuantizeDequantize],
                     absorbed: set[ir.Node]) -> dict[str, QuantizeDequantize]:
    """Give the ``planned`` int8 matmuls the fake-quantize pairs that follow them, run in their
    epilogue; return ``pairs`` with those pairs marked ``identity`` (their call's output holds
    their grid already) or left out (absorbed into a call).

    ``quantize_static`` writes a MatMul of a Linear and its bias Add as MatMul -> pair -> Add(bias)
    -> pair: the first pair becomes the call's ``requantize``, the Add its ``bias`` (a constant
    float32 vector of N values) and the second pair its ``quantize``.  A Gemm's (or a fused Add's)
    bias, or a matmul with none, takes the pair on its output as ``quantize``.  A pair qualifies
    where the value's only reader is its QuantizeLinear and every reader of that QuantizeLinear's
    8-bit output is a DequantizeLinear of ``pairs`` (no int8 matmul reads the 8-bit data)."""
    by_quantizer = pairs_by_quantizer(pairs)
    marked = dict(pairs)
    for name, found in list(planned.items()):
        first = pairs_reading(found.output, by_quantizer, marked)
        if not first:
            continue
        pair = marked[first[0]]
        weight = _constant(analysis, found.weight)
        columns = weight.shape[0 if found.transposed else 1] if weight is not None else -1
        dq = pair.output.producer()
        add = _bias_add(analysis, names, dq, columns) if found.bias is None and len(first) == 1 \
            and dq is not None else None
        if add is None:
            planned[name] = dataclasses.replace(found, quantize=pair)
            ended = first
        else:
            last = pairs_reading(add[0].outputs[0], by_quantizer, marked)
            planned[name] = dataclasses.replace(found, requantize=pair, bias=add[1], output=add[0].outputs[0],
                                                quantize=marked[last[0]] if last else None)
            absorbed.update((pair.quantizer, dq, add[0]))  # type: ignore[arg-type]
            del marked[first[0]]
            ended = last
        for pair_name in ended:
            marked[pair_name] = dataclasses.replace(marked[pair_name], identity=True)
    return marked


def dynamic_conv(analysis: Analysis, names: dict[ir.Node, str], mul: ir.Node,
                 order: dict[ir.Node, int]) -> DynamicConv | None:
    """The ``quantize_dynamic`` convolution chain that ends at ``mul``, or None: a ConvInteger of a
    constant 8-bit weight (zero point constant, per tensor or per output channel) whose output only
    a Cast to float reads, that only ``mul`` reads, by a float32 scale of one value; with the bias
    Add, a residual Add of a same-shaped tensor and then the Relu that alone read its output, where
    they do.  The call runs where ``mul`` is (``order``: the nodes' places), so the residual must
    be made before it: of two such chains added together, the later one takes the Add."""
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
        bias, last, absorbed = (None, mul, (conv, cast)) if found is None else (
            found[1], found[0], (conv, cast, found[0]))
        residual = None
        shortcut = _next(analysis, names, last, ("Add",))
        other = shortcut[0].inputs[1 - shortcut[1]] if shortcut is not None else None
        maker = other.producer() if other is not None else None
        if shortcut is not None and other is not None and same_shapes(analysis, names, shortcut[0]) \
                and (maker is None or order.get(maker, len(order)) < order[mul]):
            residual = shortcut[0].inputs[1 - shortcut[1]]
            last, absorbed = shortcut[0], (*absorbed, shortcut[0])
        relu = _next(analysis, names, last, ("Relu",))
        if relu is not None:
            last, absorbed = relu[0], (*absorbed, relu[0])
        scale = mul.inputs[1 - index]
        return DynamicConv(conv, names[conv], conv.inputs[1], zero_value, scale,  # type: ignore[arg-type]
                           bias, last.outputs[0], absorbed, relu is not None, residual,
                           _weight_scale(analysis, conv, scale))  # type: ignore[arg-type]
    return None


def _weight_scale(analysis: Analysis, product_node: ir.Node, scale: ir.Value,
                  sizes: tuple[int, ...] = (1,)) -> ir.Value | None:
    """The constant float32 factor of ``scale`` (of one of ``sizes`` values) where ``scale`` is
    ``Mul`` of it and the scale output of the DynamicQuantizeLinear whose data ``product_node``
    (a ConvInteger or MatMulInteger) reads, else None."""
    data = product_node.inputs[0]
    product, quantizer = scale.producer(), data.producer() if data is not None else None
    if product is None or quantizer is None or product.op_type != "Mul" \
            or product.domain not in _ONNX_DOMAINS or quantizer.op_type != "DynamicQuantizeLinear" \
            or len(quantizer.outputs) < 2:
        return None
    for index in (0, 1):
        factor = product.inputs[1 - index]
        array = _constant(analysis, factor)
        if product.inputs[index] is quantizer.outputs[1] and array is not None and array.size in sizes \
                and array.dtype == np.float32 and array.ndim <= 1:
            return factor
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
    :func:`~inferplex.devices.gpu.ops._fused_quantized.dynamic_quantize_centered`)."""
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


def level_quantizers(analysis: Analysis, planned: dict[str, DynamicConv], centered: dict[str, ir.Value]
                     ) -> tuple[dict[str, list[int]], dict[str, list[int]], set[str]]:
    """The ``centered`` quantizers whose readers the int8 convolution may all run, which hand them
    their levels: (quantizers, convolutions), each by friendly name to the pads the levels are
    written with (ONNX's begins then ends, the widest of the readers'); and the convolutions among
    those that make such a quantizer's data, which record its value range as they write it (the
    quantizer then skips the pass that finds it).  A reader must be a 2-D
    ConvInteger of one group with its pads written out, whose constant int8 weight has a zero
    point of 0 and a multiple of 64 input channels, and whose scale is the quantizer's times a
    constant weight scale (:attr:`DynamicConv.weight_scale`).  Where the program runs in a
    reduced precision, on CUDA, the quantizer then writes the levels and the convolutions read
    them (see :func:`~.ops._fused_quantized.dequantized_conv`)."""
    writes: dict[str, list[int]] = {}
    reads: dict[str, list[int]] = {}
    for name, data in centered.items():
        readers = [found for found in planned.values() if found.conv.inputs[0] is data]
        pads = [_int8_pads(analysis, found) for found in readers]
        if not readers or any(p is None for p in pads):
            continue
        widest = [max(side) for side in zip(*pads, strict=True)]
        writes[name] = widest
        reads.update((found.conv_name, widest) for found in readers)
    quantized = {data.producer().inputs[0] for name, data in centered.items()  # type: ignore[union-attr]
                 if name in writes}
    ranged = {found.conv_name for found in planned.values()
              if found.output in quantized and found.conv_name in reads}
    return writes, reads, ranged


def _int8_pads(analysis: Analysis, found: DynamicConv) -> list[int] | None:
    """The pads of a dynamic convolution the int8 convolution can run (see :func:`level_quantizers`),
    else None."""
    conv, weight = found.conv, _constant(analysis, found.weight)
    zero = _constant(analysis, found.weight_zero)
    group = conv.attributes.get("group")
    if found.weight_scale is None or weight is None or weight.dtype != np.int8 or weight.ndim != 4 \
            or weight.shape[1] % 64 or (group is not None and int(group.value) != 1) \
            or (found.weight_zero is not None and (zero is None or zero.any())):
        return None
    return written_pads(conv)


def _read_only_by(value: ir.Value, nodes: set[ir.Node], index: int) -> bool:
    """Whether ``value`` is no graph output and only ``nodes`` read it, as their input ``index``."""
    return not value.is_graph_output() and all(use.node in nodes and use.idx == index for use in value.uses())


def row_quantizers(analysis: Analysis, names: dict[ir.Node, str], planned: dict[str, DynamicMatMul],
                   norms: dict[str, ResidualLayerNorm], gelus: dict[str, Gelu]
                   ) -> tuple[dict[str, RowQuantizer], set[str]]:
    """The DynamicQuantizeLinear nodes (by friendly name) whose data only ``planned`` matmuls read,
    as their input 0: they hand those their levels as the int8 matmul reads them; and the float
    normalizations among ``norms`` (by name) whose output such a quantizer reads, whose call
    writes the minimum and maximum of each part of it (the quantizer then skips the pass that
    finds them).  A quantizer of a GELU formula among ``gelus`` (by the name of its last node) that
    reads a planned matmul's output takes the formula (see :attr:`RowQuantizer.gelu`)."""
    matmuls = {found.matmul for found in planned.values()}
    found: dict[str, RowQuantizer] = {}
    partial_norms: set[str] = set()
    for name, node in analysis.nodes:
        if node.op_type != "DynamicQuantizeLinear" or node.domain not in _ONNX_DOMAINS \
                or not _runs(analysis, names, node) or node.inputs[0] is None or not node.outputs:
            continue
        data = node.outputs[0]
        if not list(data.uses()) or not _read_only_by(data, matmuls, 0):
            continue
        source = node.inputs[0]
        formula = gelu_source(names, source, node, gelus, planned)
        found[name] = RowQuantizer(source, data) if formula is None else RowQuantizer(source, data, *formula)
        producer = source.producer()
        norm = names.get(producer) if producer is not None else None
        if norm is not None and norm in norms and norms[norm].quantizer is None:
            partial_norms.add(norm)
    return found, partial_norms


def gelu_source(names: dict[ir.Node, str], source: ir.Value, quantizer: ir.Node, gelus: dict[str, Gelu],
                planned: dict[str, DynamicMatMul]) -> tuple[Gelu, str] | None:
    """(the GELU formula among ``gelus`` that makes ``source``, the name of the ``planned`` matmul
    that makes its input) where only ``quantizer`` reads ``source`` and only the formula reads the
    matmul's output, else None."""
    producer = source.producer()
    formula = gelus.get(names[producer]) if producer is not None and producer in names else None
    if formula is None or formula.output is not source or not _read_only_by(source, {quantizer}, 0):
        return None
    made = formula.input
    matmul = next((found.matmul_name for found in planned.values() if found.output is made), None)
    nodes = {*formula.absorbed, producer}
    if matmul is None or made.is_graph_output() or any(use.node not in nodes for use in made.uses()):
        return None
    return formula, matmul
