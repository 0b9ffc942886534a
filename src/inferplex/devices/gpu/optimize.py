"""Rewrites applied while the GraphModule is built, and the weights shared between lowerings.

* Conv followed by BatchNormalization (inference) becomes one Conv with folded
  weights, ``W' = W * s`` and ``b' = (b - mean) * s + beta`` with
  ``s = gamma / sqrt(var + eps)``, computed in float64 and cast once to the
  weight's type, so f32 results stay within rounding of the unfused pair.  It
  applies when the Conv's output feeds only that BatchNormalization and every
  parameter is a constant.
* On CUDA, a 2-D Conv (its BatchNormalization folded or not) whose output feeds only a
  Relu, or only an Add of a tensor of the same shape whose output feeds only a
  Relu (a residual block's end), becomes one call
  (:func:`~inferplex.devices.gpu.ops.nn.conv_relu`): one cuDNN kernel
  with the bias, the addition and the Relu in its epilogue, where torch's
  ``conv2d`` runs the bias and each elementwise op as a kernel of its own.
* A 2-D Conv (and such an Add) whose output feeds only a QuantizeLinear ->
  DequantizeLinear pair (see the last item) whose zero point is the quantized
  type's minimum becomes the same call and the pair's fake-quantize, one call
  (:func:`~inferplex.devices.gpu.ops._fake_quantize.conv_fake_quantize`), on every
  device: ``quantize_static`` writes that pair where the float model had a Relu
  after the Conv (the Relu is folded into the range, which saturates every value
  <= 0 to 0), so the Relu put back into the convolution's epilogue changes no
  value.  Off CUDA the Relu is one more elementwise op; planning it there too
  lets the emulated GPU run, and test, the program CUDA runs.  Where only a MaxPool
  (without indices) reads that pair, as after a CNN's stem, the MaxPool runs the
  pair's fake-quantize on its pooled values instead
  (:func:`~inferplex.devices.gpu.ops._pooling.fake_quantized_max_pool`): the same
  numbers from a quarter of the data.  A 2-D Conv whose
  pair has another zero point (no Relu in its range), and a same-shaped Add and
  pair after that pair, become one call too (:mod:`._qdq_conv`): the convolution,
  then its bias, the pairs and the Add in one pass.
* MatMul by a constant matrix followed by Add of a constant bias vector becomes
  one ``F.linear``, which runs as a single GEMM with the bias in its epilogue.
* Attention written out, ``MatMul(Q, K^T)``, then an optional ``Div``/``Mul`` by a
  constant scalar, an optional ``Add`` of a mask that does not grow the scores,
  ``Softmax`` over the last axis and ``MatMul`` by V, becomes one
  ``F.scaled_dot_product_attention`` (fused kernels on CUDA: no scores tensor
  in memory).  It applies when every intermediate feeds only the next step and
  Q, K^T and V have the same known batch dims, so that the fused call computes
  exactly what the ONNX ops do, up to rounding.
* GELU written out as elementwise ops (the erf form or the tanh form, see
  :mod:`._activation_fusions`) becomes one ``F.gelu`` call.
* LayerNorm and RMSNorm written out as reductions and elementwise ops (see
  :mod:`._norm_fusions`) become one ``F.layer_norm`` or ``F.rms_norm`` call.
* A LayerNormalization of a same-shaped residual Add that nothing else reads
  becomes one call with the Add (:mod:`._residual_layer_norm`; one Triton pass on
  CUDA).
* ``channels_last``: 4-D Conv weights are stored NHWC and each 4-D Conv's input
  is brought to NHWC (a no-op when it already is, so only the first Conv of a
  chain copies); graph outputs are made contiguous again.  Values keep their
  logical shapes, and every reshape in the lowerings is ``reshape`` (which
  copies non-contiguous data), so results are the same, only the layout the
  convolution kernels see changes.
* ``Mul(Cast(MatMulInteger(a, W)), scale)``, as ``quantize_dynamic`` writes a
  MatMul, becomes one call (:func:`~inferplex.devices.gpu.ops._fused_quantized.dynamic_quantized_linear`)
  when W is a constant 2-D int8 tensor with zero point 0, K and N multiples of
  8, a's zero point one value and the scale one value or one per column; a
  constant bias Add after the Mul joins the call.  A DynamicQuantizeLinear whose
  data only such calls read hands them its levels as the int8 matmul reads them
  (:func:`~._quantized_fusions.row_quantizers`); the LayerNormalization call whose
  output it reads writes the partial minima and maxima it needs.  Where it
  quantizes a GELU of such a call's output, it computes the GELU itself from
  what that call records of its output (:mod:`.ops._gelu_levels`).
* ``Mul(Cast(ConvInteger(x, W)), scale)``, as ``quantize_dynamic`` writes a Conv,
  becomes one float convolution (:func:`~inferplex.devices.gpu.ops._fused_quantized.dynamic_quantized_conv`)
  when W is a constant 8-bit tensor with a constant zero point and the scale one
  float32 value; a constant per-channel bias Add after the Mul, a residual Add of
  a same-shaped tensor after that and a Relu join the call.  The centered weight
  is made at compile time; the convolution runs in float32 at the model's
  precision, in the compute type under a reduced one.  A DynamicQuantizeLinear
  whose data only such calls read hands them its data centered on the zero
  point, in that floating type, from one fake-quantize
  kernel (no uint8 tensor, no casts); where those calls may all run as int8
  convolutions (:func:`~._quantized_fusions.level_quantizers`), it hands them its
  padded levels, scale and zero point instead, and the dynamic convolution that
  makes its data records their value range for it.  Where the scale is the
  quantizer's times a constant weight scale, the MatMul's call multiplies the two.
* A MatMul (or a plain Gemm) of two DequantizeLinear outputs, as
  ``onnxruntime.quantization.quantize_static(quant_format=QDQ)`` writes it, becomes
  one int8 matmul (:func:`~inferplex.devices.gpu.ops._fused_quantized.quantized_linear`):
  the activation's DequantizeLinear reads 8-bit data with a constant per-tensor
  scale and zero point, the weight's is a constant 2-D int8 tensor with zero
  point 0 and a per-tensor or per-output-channel scale, and K, N are multiples
  of 8 (the int8 kernel's rule on CUDA).  A constant bias (Gemm's C, or an Add
  after a MatMul) joins the epilogue, and the QuantizeLinear that makes the
  activation (same scale and zero point, read by nothing else) runs inside the
  call.  Dequantization is linear, so this is the same sum as the float MatMul
  on dequantized values (see ``quantized_linear``).  A QDQ attention chain, GELU formula
  and LayerNormalization (with the residual Add before it) with the pairs between their
  steps become one call each (:mod:`._qdq_attention`, :mod:`._qdq_gelu`,
  :mod:`._residual_layer_norm`); the GELU, the normalization and the attention
  (through the Transpose and Reshape that join its heads,
  :func:`._qdq_attention.quantizing_attentions`) then write the int8 matmul's 8-bit
  input themselves.  A GELU whose input is the last pair of an int8 matmul's epilogue
  runs in that epilogue, as a table of its value at each of the pair's 256 levels
  (:func:`._qdq_gelu.tabled_gelus`).  A normalization's residual Add reads the previous
  normalization's output and the output projection's as their pairs' 8-bit levels,
  which those calls then write in place of their float values
  (:func:`._residual_layer_norm.level_inputs`).
* Every other QuantizeLinear -> DequantizeLinear pair of float32 data on one
  constant per-tensor scale and zero point, 8-bit, the quantized data read by
  nothing else (what a QDQ model puts before each Conv, Add or pool), becomes one
  fake-quantize call (:func:`~inferplex.devices.gpu.ops._fake_quantize.quantize_dequantize`)
  in the program's precision: one pass over the activation instead of a chain of
  casts and integer arithmetic.  A pair after a data-movement op (Reshape, Transpose,
  Split ...) of a DequantizeLinear output with the same numbers changes nothing and
  runs no call.  The weights' DequantizeLinear of constants is
  folded at lowering time like any node of constant inputs (or, too large for
  the analysis to fold, computed once when the buffers are made) and stored in
  the compute precision, so a QDQ Conv runs as a float (f16 under the f16 hint)
  convolution of the fake-quantized activation and the dequantized weight, the
  same sum as the ONNX ops.  On CUDA, a QDQ Conv of channels-last f16 or f32 data
  (64k input channels, one group, a constant int8 weight with zero point 0) runs
  instead as an int8 convolution of the pair's levels, its chain in the epilogue
  (:mod:`~inferplex.devices.gpu.ops._int8_conv`): the integer sums exactly.  A
  Conv whose pair only such Convs read hands them its int8 levels, written with
  their pads in its epilogue (:func:`._qdq_conv.level_handoffs`).

:class:`WeightCache` holds the device tensors of constants for every lowering
of one model, so a per-signature specialization reuses the generic lowering's
weights instead of uploading them again.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import onnx_ir as ir
import torch

from inferplex.devices.gpu._activation_fusions import Gelu, gelu_from
from inferplex.devices.gpu._graph import ONNX_DOMAINS as _ONNX_DOMAINS
from inferplex.devices.gpu._graph import constant as _constant
from inferplex.devices.gpu._graph import next_consumer as _next
from inferplex.devices.gpu._graph import runs as _runs
from inferplex.devices.gpu._graph import sole_consumer as _sole_consumer
from inferplex.devices.gpu._norm_fusions import Norm, norm_from
from inferplex.devices.gpu._qdq_attention import (
    QuantizedAttention,
    quantized_attentions,
    quantizing_attentions,
)
from inferplex.devices.gpu._qdq_conv import QuantizedConv, level_handoffs, quantized_convs
from inferplex.devices.gpu._qdq_gelu import QuantizedGelu, quantized_gelus, quantizing_gelus, tabled_gelus
from inferplex.devices.gpu._qdq_pairs import (
    QuantizeDequantize,
    identity_pairs,
    quantize_dequantize_pairs,
    relu_range_pair,
    settled_quantizers,
)
from inferplex.devices.gpu._quantized_fusions import (
    DynamicConv,
    DynamicMatMul,
    QuantizedMatMul,
    RowQuantizer,
    absorb_quantizers,
    centered_quantizers,
    dynamic_conv,
    dynamic_matmul,
    level_quantizers,
    linear_epilogues,
    quantized_matmul,
    row_quantizers,
)
from inferplex.devices.gpu._residual_layer_norm import ResidualLayerNorm, level_inputs, residual_layer_norms

if TYPE_CHECKING:
    from inferplex.devices.gpu.lower import Analysis

__all__ = ["Attention", "Fusions", "WeightCache", "fold_conv_bn", "plan_fusions"]

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
class ConvRelu:
    """A Conv and the Relu that ends it, which :func:`~inferplex.devices.gpu.ops.nn.conv_relu` runs as
    one call, emitted where the chain's last node is (a residual Add's other input may come after
    the Conv): the Relu, or the DequantizeLinear of a ``quantize`` pair."""

    conv_name: str
    conv: ir.Node
    add: ir.Node | None
    """The Add of a same-shaped tensor between the Conv and the Relu, if any."""
    other: ir.Value | None
    """That Add's other input."""
    quantize: QuantizeDequantize | None = None
    """The QuantizeLinear -> DequantizeLinear pair whose range holds the Relu (zero point at the
    quantized type's minimum), in place of a Relu node: the call runs its fake-quantize too."""


@dataclass
class Fusions:
    """What :func:`plan_fusions` found, by friendly name of the node that is emitted."""

    conv_bn: dict[str, ir.Node] = field(default_factory=dict)
    """Conv -> the BatchNormalization it absorbs."""
    conv_relu: dict[str, ConvRelu] = field(default_factory=dict)
    """Relu, or the DequantizeLinear of a pair whose range holds the Relu -> the 2-D Conv (and Add)
    it runs with in one call."""
    linear: dict[str, tuple[ir.Node, int]] = field(default_factory=dict)
    """MatMul -> (the Add it absorbs, index of the bias among the Add's inputs)."""
    attention: dict[str, Attention] = field(default_factory=dict)
    """Last MatMul of an attention chain -> the chain."""
    gelu: dict[str, Gelu] = field(default_factory=dict)
    """Last node of a GELU formula -> the formula."""
    norm: dict[str, Norm] = field(default_factory=dict)
    """Last node of a LayerNorm or RMSNorm formula -> the formula."""
    quantized_matmul: dict[str, QuantizedMatMul] = field(default_factory=dict)
    """MatMul or Gemm of DequantizeLinear outputs -> the int8 matmul that replaces it."""
    dynamic_matmul: dict[str, DynamicMatMul] = field(default_factory=dict)
    """Mul of a Cast MatMulInteger by its scale -> the chain."""
    dynamic_conv: dict[str, DynamicConv] = field(default_factory=dict)
    """Mul of a Cast ConvInteger by its scale -> the chain."""
    centered_quantizers: dict[str, ir.Value] = field(default_factory=dict)
    """DynamicQuantizeLinear -> its data output, which it hands the ``dynamic_conv`` calls as
    centered float data."""
    quantized_attention: dict[str, QuantizedAttention] = field(default_factory=dict)
    """Second MatMul of a QDQ attention chain -> the chain (see :mod:`._qdq_attention`)."""
    quantized_gelu: dict[str, QuantizedGelu] = field(default_factory=dict)
    """Last Mul of a QDQ GELU formula -> the formula (see :mod:`._qdq_gelu`)."""
    residual_layer_norm: dict[str, ResidualLayerNorm] = field(default_factory=dict)
    """A LayerNormalization with the residual Add before it (and a QDQ model's pairs) -> its chain
    (see :mod:`._residual_layer_norm`)."""
    quantized_conv: dict[str, QuantizedConv] = field(default_factory=dict)
    """The Add (or Conv) that ends a QDQ Conv's chain -> the chain (see :mod:`._qdq_conv`)."""
    quantize_dequantize: dict[str, QuantizeDequantize] = field(default_factory=dict)
    """DequantizeLinear -> the QuantizeLinear pair it emits as one fake-quantize call (or as its
    source, where the pair changes nothing)."""
    level_writes: dict[str, list[int]] = field(default_factory=dict)
    """Conv or DynamicQuantizeLinear -> the pads it writes int8 levels with, which the next
    convolutions read as they are (see :func:`~._qdq_conv.level_handoffs` and
    :func:`~._quantized_fusions.level_quantizers`)."""
    level_reads: dict[str, list[int]] = field(default_factory=dict)
    """Conv or ConvInteger -> the pads around the levels the node before writes for it."""
    ranged_convs: set[str] = field(default_factory=set)
    """ConvIntegers whose int8 convolution records the value range of its output for the
    DynamicQuantizeLinear that reads it (see :func:`~._quantized_fusions.level_quantizers`)."""
    ranged_matmuls: set[str] = field(default_factory=set)
    """Dynamic matmuls (by their MatMulInteger's name) whose int8 matmul records what a GELU's
    quantizer reads of its output (see :attr:`~._quantized_fusions.RowQuantizer.gelu`)."""
    row_quantizers: dict[str, RowQuantizer] = field(default_factory=dict)
    """DynamicQuantizeLinear -> what it quantizes for the ``dynamic_matmul`` calls that alone read
    its data, handing them its levels (see :func:`~._quantized_fusions.row_quantizers`)."""
    partial_norms: set[str] = field(default_factory=set)
    """Float LayerNormalizations (``residual_layer_norm`` calls) that write the minimum and maximum
    of each part of their output for the ``row_quantizers`` that read it."""
    pooled_pairs: dict[str, QuantizeDequantize] = field(default_factory=dict)
    """MaxPool -> the pair before it (a ``conv_relu`` chain's, whose call then leaves it out), run on
    the pooled values (see :func:`~inferplex.devices.gpu.ops._pooling.fake_quantized_max_pool`)."""
    absorbed: set[ir.Node] = field(default_factory=set)
    """Nodes emitted as part of another: they are skipped."""
    channels_last_convs: set[str] = field(default_factory=set)
    """4-D Convs whose input is brought to NHWC."""
    channels_last_weights: set[ir.Value] = field(default_factory=set)
    """4-D Conv weights stored NHWC."""


def _is_float(array: np.ndarray | None) -> bool:
    return array is not None and (array.dtype.kind == _FLOAT_KINDS or array.dtype.name == "bfloat16")


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


def _residual_add(analysis: Analysis, names: dict[ir.Node, str], conv: ir.Node,
                  bn: ir.Node | None) -> tuple[ir.Node | None, ir.Value | None, ir.Value] | None:
    """(the Add of a same-shaped tensor that alone reads a 2-D Conv's output, that Add's other
    input, the value the two end with) or (None, None, the Conv's output: its BatchNormalization's
    where folded); None where the Conv is no 2-D one with a weight or the Add broadcasts."""
    if analysis.infos[names[conv]].rank(0) != 4 or len(conv.inputs) < 2 or conv.inputs[1] is None:
        return None
    value = (bn or conv).outputs[0]
    step = _sole_consumer(value)
    if step is None or step[0].op_type != "Add" or step[0].domain not in _ONNX_DOMAINS \
            or not _runs(analysis, names, step[0]):
        return None, None, value
    shapes = analysis.infos[names[step[0]]].input_shapes
    if len(shapes) != 2 or shapes[0] is None or None in shapes[0] or shapes[0] != shapes[1]:
        return None  # an Add that broadcasts is not the fused call's
    return step[0], step[0].inputs[1 - step[1]], step[0].outputs[0]


def _relu_after(analysis: Analysis, names: dict[ir.Node, str], conv: ir.Node,
                bn: ir.Node | None) -> tuple[ir.Node, ConvRelu] | None:
    """The Relu (after an optional residual Add) that ends a 2-D Conv, each step read by nothing else."""
    found = _residual_add(analysis, names, conv, bn)
    step = None if found is None else _sole_consumer(found[2])
    if found is None or step is None or step[0].op_type != "Relu" or step[0].domain not in _ONNX_DOMAINS \
            or not _runs(analysis, names, step[0]):
        return None
    return step[0], ConvRelu(names[conv], conv, found[0], found[1])


def _plan_relu_range_convs(analysis: Analysis, names: dict[ir.Node, str], fusions: Fusions) -> None:
    """Add to ``fusions.conv_relu`` each 2-D Conv (its BatchNormalization folded, a residual Add
    after it or not) that ends in a QuantizeLinear -> DequantizeLinear pair whose range holds a
    Relu (:func:`relu_range_pair`), keyed by the DequantizeLinear.  Runs after the int8 matmuls
    took their quantizers: a pair one of them absorbed, whose 8-bit data one reads, or whose float
    input one quantizes itself, stays."""
    read = {found.activation for found in fusions.quantized_matmul.values() if found.source is None}
    # an int8 matmul that quantizes a Conv's float output itself needs that output as written
    quantized = {found.source for found in fusions.quantized_matmul.values()}
    for name, conv in analysis.nodes:
        if conv.op_type != "Conv" or conv.domain not in _ONNX_DOMAINS or conv in fusions.absorbed \
                or not _runs(analysis, names, conv):
            continue
        found = _residual_add(analysis, names, conv, fusions.conv_bn.get(name))
        if found is None or (found[0] is not None and found[0] in fusions.absorbed):
            continue  # an Add of two Convs goes with the first
        pair = relu_range_pair(analysis, names, found[2], fusions.absorbed)
        if pair is None or pair.quantizer.outputs[0] in read or pair.source in quantized:
            continue
        pool = _max_pool_after(analysis, names, pair.output)
        if pool is not None:  # the MaxPool fake-quantizes the pooled values: a quarter of the data
            fusions.pooled_pairs[names[pool]] = pair
        fusions.conv_relu[names[pair.output.producer()]] = ConvRelu(  # type: ignore[index]
            name, conv, *found[:2], pair if pool is None else None)
        fusions.absorbed.update(n for n in (conv, found[0], pair.quantizer) if n is not None)


def _plan_level_handoffs(analysis: Analysis, fusions: Fusions) -> None:
    """``fusions.level_writes`` and ``level_reads``: among the QDQ Convs the int8 convolution may run
    (a relu-range chain's, or :mod:`._qdq_conv`'s), those that hand the next one its levels."""
    relu_range = {found.conv_name: found for found in fusions.conv_relu.values()
                  if found.quantize is not None and found.conv_name not in fusions.conv_bn}
    producers = {name: (found.conv, found.quantize) for name, found in relu_range.items()
                 if found.quantize is not None}
    producers.update({found.conv_name: (found.conv, found.second or found.first)
                      for found in fusions.quantized_conv.values()})
    readers = {found.conv: name for name, found in relu_range.items()}
    readers.update({found.conv: found.conv_name for found in fusions.quantized_conv.values()})
    fusions.level_writes, fusions.level_reads = level_handoffs(analysis, producers, readers)


def _max_pool_after(analysis: Analysis, names: dict[ir.Node, str], value: ir.Value) -> ir.Node | None:
    """The MaxPool that alone reads ``value``, without an indices output, or None."""
    step = _sole_consumer(value)
    pool = step[0] if step is not None and step[1] == 0 else None
    if pool is None or pool.op_type != "MaxPool" or pool.domain not in _ONNX_DOMAINS \
            or not _runs(analysis, names, pool) or any(output.name for output in pool.outputs[1:]):
        return None
    return pool


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

def plan_fusions(analysis: Analysis, channels_last: bool, cuda: bool = False) -> Fusions:
    """Find the rewrites of the module docstring in an analysis (which is not changed); ``cuda``: the
    program runs on a CUDA GPU (Conv + Relu is fused there only: elsewhere it gains nothing)."""
    names = {node: name for name, node in analysis.nodes}
    order = {node: index for index, (_, node) in enumerate(analysis.nodes)}
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
            end = _relu_after(analysis, names, node, bn) if cuda else None
            if end is not None and names[end[0]] not in fusions.conv_relu:  # an Add of two Convs: the first
                relu, conv_end = end
                fusions.conv_relu[names[relu]] = conv_end
                fusions.absorbed.update(n for n in (node, conv_end.add) if n is not None)
        elif node.op_type == "MatMul" and name in fusions.attention:
            continue  # the end of an attention chain: it emits the chain
        elif node.op_type == "MatMul" and (attention := _attention_from(analysis, names, node)) is not None:
            fusions.attention[names[attention.output.producer()]] = attention  # type: ignore[index]
            fusions.absorbed.update(attention.absorbed)
        elif node.op_type in ("MatMul", "Gemm") \
                and (quantized := quantized_matmul(analysis, names, node)) is not None:
            fusions.quantized_matmul[name] = quantized
            if quantized.output is not node.outputs[0]:
                fusions.absorbed.add(quantized.output.producer())  # type: ignore[arg-type]
        elif node.op_type in ("Erf", "Tanh") and (formula := gelu_from(analysis, names, node)) is not None:
            fusions.gelu[names[formula.output.producer()]] = formula  # type: ignore[index]
            fusions.absorbed.update(formula.absorbed)
        elif node.op_type in ("ReduceMean", "Pow", "Mul") \
                and (norm := norm_from(analysis, names, node)) is not None:
            fusions.norm[names[norm.output.producer()]] = norm  # type: ignore[index]
            fusions.absorbed.update(norm.absorbed)
        elif node.op_type == "Mul" and (dynamic := dynamic_matmul(analysis, names, node)) is not None:
            fusions.dynamic_matmul[name] = dynamic
            fusions.absorbed.update(dynamic.absorbed)
        elif node.op_type == "Mul" \
                and (integer_conv := dynamic_conv(analysis, names, node, order)) is not None:
            fusions.dynamic_conv[name] = integer_conv
            fusions.absorbed.update(integer_conv.absorbed)
            if channels_last and analysis.infos[integer_conv.conv_name].rank(0) == 4:
                fusions.channels_last_convs.add(integer_conv.conv_name)
        elif node.op_type == "MatMul":
            found = _bias_add_after(analysis, names, node)
            if found is not None:
                fusions.linear[name] = found
                fusions.absorbed.add(found[0])
    absorb_quantizers(analysis, names, fusions.quantized_matmul, fusions.absorbed)
    _plan_relu_range_convs(analysis, names, fusions)
    pairs = linear_epilogues(analysis, names, fusions.quantized_matmul, identity_pairs(
        analysis, quantize_dequantize_pairs(analysis, names, fusions.quantized_matmul, fusions.absorbed)),
        fusions.absorbed)
    fusions.quantized_attention, pairs = quantized_attentions(analysis, names, pairs, fusions.absorbed)
    fusions.quantized_gelu, pairs = quantized_gelus(analysis, names, pairs, fusions.absorbed)
    fusions.residual_layer_norm, pairs = residual_layer_norms(
        analysis, names, pairs, fusions.quantized_matmul, fusions.absorbed)
    sources = {found.source for found in fusions.quantized_matmul.values() if found.source is not None}
    fusions.quantized_conv, fusions.quantize_dequantize = quantized_convs(
        analysis, names, pairs, fusions.absorbed, fusions.conv_bn, sources)
    _plan_level_handoffs(analysis, fusions)
    fusions.absorbed.update(settled_quantizers(fusions.quantized_matmul, fusions.quantize_dequantize,
                                               fusions.absorbed))
    quantizing_gelus(fusions.quantized_gelu, fusions.quantized_matmul, fusions.absorbed)
    quantizing_attentions(analysis, names, fusions.quantized_attention, fusions.quantized_matmul,
                          fusions.quantize_dequantize, fusions.absorbed)
    tabled_gelus(fusions.quantized_gelu, fusions.quantized_matmul, fusions.absorbed)
    level_inputs(analysis, fusions.residual_layer_norm, fusions.quantized_matmul, fusions.quantize_dequantize,
                 fusions.absorbed)
    fusions.centered_quantizers = centered_quantizers(analysis, names, fusions.dynamic_conv)
    writes, reads, fusions.ranged_convs = level_quantizers(analysis, fusions.dynamic_conv,
                                                           fusions.centered_quantizers)
    fusions.level_writes.update(writes)
    fusions.level_reads.update(reads)
    fusions.row_quantizers, fusions.partial_norms = row_quantizers(
        analysis, names, fusions.dynamic_matmul, fusions.residual_layer_norm, fusions.gelu)
    for quantizer in fusions.row_quantizers.values():
        if quantizer.gelu is not None and quantizer.matmul is not None:  # the quantizer runs the GELU
            last = quantizer.gelu.output.producer()
            assert last is not None
            del fusions.gelu[names[last]]
            fusions.absorbed.update((*quantizer.gelu.absorbed, last))
            fusions.ranged_matmuls.add(quantizer.matmul)
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

