"""Fusion planning for LayerNormalization with the residual Add before it, as one call
(:func:`~inferplex.devices.gpu.ops._residual_layer_norm.residual_layer_norm`):
``Add(a, b) -> LayerNormalization`` in a float model, and in a QDQ model
``[Add(a, b) -> [pair] ->] LayerNormalization -> QuantizeLinear``.

A post-norm transformer layer (BERT's) adds the residual and normalizes the sum, which nothing else
reads: two passes over the activation, the Add and the normalization, that the call makes one.

``quantize_static`` writes the residual Add, its pair, the LayerNormalization, and one QuantizeLinear
on its output whose 8-bit data feeds the next int8 matmul and, through a DequantizeLinear, the next
residual Add.  Run as written these are five passes over the activation: the Add, two
fake-quantizes, the normalization and the matmul's quantizing pass.  The call makes them one: it
writes the fake-quantized value for the float readers and, where an int8 matmul reads the 8-bit
data, that data too (the matmul then reads it as it is).

:func:`level_inputs` then hands the calls their residual Add's inputs as 8-bit levels where the
previous normalization and an int8 matmul's last pair make them (the calls dequantize them as they
load them, and the makers write no float copy).

A QDQ chain's QuantizeLinear must alone read the normalization's output, and each reader of its
data must be a DequantizeLinear that ends a pair (a float reader) or that a planned int8 matmul
absorbed; without one, the chain needs the Add.  The Add must add two tensors of one shape and be
read by the normalization (or its pair) alone.  The normalization takes the last axis, a scale and
bias of its width as inputs, float32 statistics (``stash_type`` 1) and has no mean or
inverse-deviation outputs.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING

import onnx_ir as ir

from inferplex.devices.gpu._graph import ONNX_DOMAINS as _ONNX_DOMAINS
from inferplex.devices.gpu._graph import runs as _runs
from inferplex.devices.gpu._graph import same_shapes
from inferplex.devices.gpu._graph import sole_consumer as _sole_consumer
from inferplex.devices.gpu._qdq_pairs import PairWalk, QuantizeDequantize, find_chains, pairs_by_quantizer

if TYPE_CHECKING:
    from inferplex.devices.gpu._quantized_fusions import QuantizedMatMul
    from inferplex.devices.gpu.lower import Analysis

__all__ = ["ResidualLayerNorm", "level_inputs", "residual_layer_norms"]

_FLOAT_TYPES = (ir.DataType.FLOAT, ir.DataType.FLOAT16, ir.DataType.BFLOAT16)


@dataclass(frozen=True)
class ResidualLayerNorm:
    """``LayerNormalization(pair(a + b))`` (or of ``a`` alone, or without the pair), and in a QDQ
    model fake-quantized and quantized by its QuantizeLinear."""

    norm: ir.Node
    norm_name: str
    first: ir.Value
    """``a``: the Add's first input, or the normalization's input where there is no Add."""
    second: ir.Value | None
    """``b``: the Add's second input, or None."""
    sum_pair: QuantizeDequantize | None
    """The pair between the Add and the normalization, or None."""
    output_pair: QuantizeDequantize | None
    """The pair the float readers of the quantized output read through (its numbers), or None where
    only int8 matmuls read the 8-bit data."""
    quantizer: ir.Node | None
    """The QuantizeLinear on the normalization's output, or None (a float model's)."""
    writes_data: bool
    """Whether the call writes the QuantizeLinear's 8-bit data (an int8 matmul reads it)."""
    output: ir.Value
    """The normalization's output: the call binds it to the fake-quantized value where there is a
    QuantizeLinear, which the pairs on it (marked identity) then pass on."""
    absorbed: tuple[ir.Node, ...]
    levels: tuple[QuantizeDequantize | None, QuantizeDequantize | None] = (None, None)
    """For ``first`` and ``second``: the pair whose QuantizeLinear's 8-bit data the call reads in
    place of that value (see :func:`level_inputs`), or None."""
    writes_value: bool = True
    """Whether the call writes the fake-quantized value; where nothing reads it, only the data."""


def residual_layer_norms(analysis: Analysis, names: dict[ir.Node, str], pairs: dict[str, QuantizeDequantize],
                          planned: dict[str, QuantizedMatMul], absorbed: set[ir.Node]
                          ) -> tuple[dict[str, ResidualLayerNorm], dict[str, QuantizeDequantize]]:
    """The chains of the module docstring by the normalization's friendly name, and ``pairs`` without
    the pairs inside them (absorbed) and with those on the output marked identity.  The ``planned``
    int8 matmuls that quantized the normalization's output themselves read the call's 8-bit data
    instead (their ``source`` is cleared)."""
    by_quantizer = pairs_by_quantizer(pairs)
    quantizing = {found.dequantizers[0]: name for name, found in planned.items() if found.source is not None}

    def chain(analysis: Analysis, names: dict[ir.Node, str], norm: ir.Node,
              walk: PairWalk) -> tuple[ResidualLayerNorm, list[str]] | None:
        if not _plain_layer_norm(analysis, names, norm):
            return None
        use = _sole_consumer(norm.outputs[0])
        quantizer = use[0] if use is not None and use[1] == 0 and use[0].op_type == "QuantizeLinear" else None
        if quantizer is None:  # a float normalization: one call with the residual Add, where there is one
            first, second, sum_pair, inner, add = _sum_before(analysis, names, norm, walk)
            if add is None:
                return None
            walk.inner.extend(inner)
            return ResidualLayerNorm(norm, names[norm], first, second, sum_pair, None, None, False,
                                     norm.outputs[0], (add,)), []
        if quantizer in walk.absorbed or quantizer.outputs[0].is_graph_output():
            return None
        ends = [name for name in by_quantizer.get(quantizer, []) if name in walk.pairs
                and not walk.pairs[name].identity]
        end_nodes = {walk.pairs[name].output.producer() for name in ends}
        readers = [use.node for use in quantizer.outputs[0].uses()]
        writes_data = any(node in quantizing for node in readers)
        if not readers or any(node not in end_nodes and node not in quantizing for node in readers):
            return None
        first, second, sum_pair, inner, add = _sum_before(analysis, names, norm, walk)
        walk.inner.extend(inner)
        own = tuple(node for node in (add, quantizer if writes_data else None) if node is not None)
        return ResidualLayerNorm(norm, names[norm], first, second, sum_pair,
                                  walk.pairs[ends[0]] if ends else None, quantizer, writes_data,
                                  norm.outputs[0], own), ends

    found, remaining = find_chains(analysis, names, pairs, absorbed, "LayerNormalization", chain)
    for norm in found.values():
        readers = norm.quantizer.outputs[0].uses() if norm.quantizer is not None else ()
        for reader in (use.node for use in readers):
            if reader in quantizing:  # the matmul reads the call's 8-bit data
                planned[quantizing[reader]] = dataclasses.replace(planned[quantizing[reader]], source=None)
    return found, remaining


def _plain_layer_norm(analysis: Analysis, names: dict[ir.Node, str], norm: ir.Node) -> bool:
    """A normalization over the last axis of float data with a scale and bias of its width and one
    output."""
    info = analysis.infos[names[norm]]
    axis = norm.attributes.get("axis")
    stash = norm.attributes.get("stash_type")
    rank = info.rank(0)
    shapes = info.input_shapes
    width = shapes[0][-1] if shapes and shapes[0] else None
    if not isinstance(width, int) or len(shapes) != 3 or any(shape != (width,) for shape in shapes[1:]):
        return False  # a scale or bias that broadcasts takes the normalization's own lowering
    return norm.domain in _ONNX_DOMAINS and len(norm.inputs) == 3 and None not in norm.inputs \
        and bool(info.input_dtypes) and info.input_dtypes[0] in _FLOAT_TYPES \
        and (axis is None or axis.value == -1 or (rank is not None and axis.value == rank - 1)) \
        and (stash is None or stash.value == 1) \
        and all(not list(value.uses()) and not value.is_graph_output() for value in norm.outputs[1:]
                if value is not None)


def _sum_before(analysis: Analysis, names: dict[ir.Node, str], norm: ir.Node, walk: PairWalk
                ) -> tuple[ir.Value, ir.Value | None, QuantizeDequantize | None, list[str], ir.Node | None]:
    """(a, b, the pair between, its name, the Add) where the normalization reads ``pair(a + b)`` or
    ``a + b`` as the module docstring says; else (its input, None, None, [], None)."""
    value = norm.inputs[0]
    assert value is not None  # a plain normalization's (see _plain_layer_norm)
    alone: tuple[ir.Value, ir.Value | None, QuantizeDequantize | None, list[str], ir.Node | None] = (
        value, None, None, [], None)
    pair_names = [name for name, pair in walk.pairs.items() if pair.output is value and not pair.identity]
    pair = walk.pairs[pair_names[0]] if pair_names else None
    total = value if pair is None else pair.source
    if pair is not None and (len(list(pair.quantizer.outputs[0].uses())) != 1 or len(list(value.uses())) != 1
                             or pair.quantizer.outputs[0].is_graph_output() or value.is_graph_output()):
        return alone
    reader = (norm, 0) if pair is None else (pair.quantizer, 0)
    add = total.producer() if total is not None else None
    if add is None or _sole_consumer(total) != reader or add.op_type != "Add" \
            or add.domain not in _ONNX_DOMAINS or add in walk.absorbed or not _runs(analysis, names, add) \
            or None in add.inputs or not same_shapes(analysis, names, add):
        return alone
    return add.inputs[0], add.inputs[1], pair, pair_names[:1], add  # type: ignore[return-value]


def level_inputs(analysis: Analysis, norms: dict[str, ResidualLayerNorm], planned: dict[str, QuantizedMatMul],
                 pairs: dict[str, QuantizeDequantize], absorbed: set[ir.Node]) -> None:
    """Hand the QDQ normalizations' residual Adds their inputs as 8-bit levels where they can.

    In a ``quantize_static`` transformer layer each normalization's Add reads two values on a pair's
    grid: the previous normalization's output (through its QuantizeLinear, whose data the next int8
    matmul reads too) and an int8 matmul's output (through the pair it runs last).  Where such a
    QuantizeLinear's data is read only by DequantizeLinear nodes whose outputs only planned int8
    matmuls (reading the data itself) and those Adds read, the call that makes the value writes
    the data alone (a normalization: ``writes_value`` off; an int8 matmul: its ``writes_levels``)
    and the normalizations read the levels and dequantize them as they load them (``levels``): the
    same values, a byte an element read instead of two, and no float copy written.  The
    DequantizeLinear and QuantizeLinear nodes join ``absorbed``."""
    # a QDQ normalization's residual Add (the first of its absorbed nodes) -> the normalization
    takers = {norm.absorbed[0]: name for name, norm in norms.items()
              if norm.second is not None and norm.quantizer is not None}
    makers: dict[ir.Node, tuple[str, bool]] = {}  # a QuantizeLinear -> the call that makes its input
    for name, norm in norms.items():
        if norm.quantizer is not None and not norm.output.is_graph_output():
            makers[norm.quantizer] = (name, True)
    for name, found in planned.items():
        if found.quantize is not None and found.gelu is None and not found.output.is_graph_output():
            makers[found.quantize.quantizer] = (name, False)
    by_output = {pair.output: pair for pair in pairs.values() if pair.identity}
    # the planned int8 matmuls that read 8-bit data as it is, by their MatMul (or Gemm)
    matmuls = {node: planned[name] for name, node in analysis.nodes
               if name in planned and planned[name].source is None}
    folded = {node for name, node in analysis.nodes if name in analysis.folded}  # a Shape's, say
    for quantizer, (maker, is_norm) in makers.items():
        readers = _level_readers(quantizer, takers, by_output, matmuls, folded)
        if not readers:
            continue
        for pair, (norm_name, index) in readers:
            norm = norms[norm_name]
            levels = list(norm.levels)
            levels[index] = pair
            norms[norm_name] = dataclasses.replace(norm, levels=(levels[0], levels[1]))
            absorbed.add(pair.output.producer())  # type: ignore[arg-type]
        absorbed.add(quantizer)
        if is_norm:
            norms[maker] = dataclasses.replace(norms[maker], writes_value=False, writes_data=True)
        else:
            planned[maker] = dataclasses.replace(planned[maker], writes_levels=True)


def _level_readers(quantizer: ir.Node, takers: dict[ir.Node, str],
                   by_output: dict[ir.Value, QuantizeDequantize], matmuls: dict[ir.Node, QuantizedMatMul],
                   folded: set[ir.Node]) -> list[tuple[QuantizeDequantize, tuple[str, int]]]:
    """The (pair, (normalization, input index)) of each residual Add that reads ``quantizer``'s
    values through an identity pair, where every reader of its data is a DequantizeLinear whose
    output only such Adds, int8 matmuls reading the data itself and nodes folded at analysis (which
    read no value when the program runs) read; else []."""
    data = quantizer.outputs[0]
    if data.is_graph_output():
        return []
    found: list[tuple[QuantizeDequantize, tuple[str, int]]] = []
    for use in data.uses():
        dq = use.node
        value = dq.outputs[0]
        pair = by_output.get(value)
        if pair is None or pair.quantizer is not quantizer or value.is_graph_output():
            return []
        for reader in value.uses():
            if reader.node in takers and reader.idx in (0, 1):
                found.append((pair, (takers[reader.node], reader.idx)))
            elif reader.node not in folded \
                    and not (reader.node in matmuls and matmuls[reader.node].dequantizers[0] is dq):
                return []
    return found
