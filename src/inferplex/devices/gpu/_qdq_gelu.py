"""Fusion planning for a QDQ model's GELU: the erf formula torch exports (``Div(x, c)`` -> ``Erf`` ->
``Add 1`` -> ``Mul`` by ``x`` -> ``Mul 0.5``) with the QuantizeLinear -> DequantizeLinear pairs
``quantize_static`` puts after its steps, emitted as one call
(:func:`~inferplex.devices.gpu.ops._qdq_gelu.quantized_gelu`).

The pairs keep the float formula's fusion (:mod:`._activation_fusions`) from seeing it; run as
written it is five passes over the activation and one more per pair.  :func:`quantized_gelus` finds
it once the pairs are planned: each pair after the Erf, the Add and the product by ``x`` is
optional, but one at least; the constants are any one-value floats (the call computes the formula
as written, with
them); ``x`` is one value, or the outputs of two DequantizeLinear nodes of one QuantizeLinear (one
per consumer, as ``quantize_static`` writes them).  The pairs after the last Mul stay as they are;
where the formula's value only feeds an int8 matmul's QuantizeLinear, the call writes that
QuantizeLinear's 8-bit data instead (:func:`quantizing_gelus`).

Where ``x`` is the last pair of an int8 matmul's epilogue, ``x`` has one of that pair's 256
levels, and so has the formula's value one of 256 values: the matmul looks it up in a table of
them, computed once by the same call, and writes the formula's value (or its 8-bit data) itself;
the formula runs no call of its own (:func:`tabled_gelus`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING

import onnx_ir as ir

from inferplex.devices.gpu._graph import ONNX_DOMAINS as _ONNX_DOMAINS
from inferplex.devices.gpu._graph import constant as _constant
from inferplex.devices.gpu._graph import runs as _runs
from inferplex.devices.gpu._graph import sole_consumer as _sole_consumer
from inferplex.devices.gpu._qdq_pairs import (
    PairWalk,
    QuantizeDequantize,
    dequantizer,
    find_chains,
)

if TYPE_CHECKING:
    from inferplex.devices.gpu._quantized_fusions import QuantizedMatMul
    from inferplex.devices.gpu.lower import Analysis

__all__ = ["QuantizedGelu", "quantized_gelus", "quantizing_gelus", "tabled_gelus"]

_FLOAT_TYPES = (ir.DataType.FLOAT, ir.DataType.FLOAT16, ir.DataType.BFLOAT16)


@dataclass(frozen=True)
class QuantizedGelu:
    """``(x * (erf(x / c) + one)) * half`` with the pairs after the erf, the sum and the product."""

    input: ir.Value
    """``x`` as the Div (or Mul) reads it."""
    divide: bool
    """Whether ``x`` is divided by ``factor`` (Div) or multiplied by it (Mul)."""
    factor: ir.Value
    one: ir.Value
    """The Add's constant."""
    half: ir.Value
    """The last Mul's constant."""
    erf: QuantizeDequantize | None
    sum: QuantizeDequantize | None
    product: QuantizeDequantize | None
    output: ir.Value
    """The last Mul's output."""
    absorbed: tuple[ir.Node, ...]
    """The formula's nodes but the last Mul, which emits the call."""
    quantizer: ir.Node | None = None
    """The QuantizeLinear whose 8-bit data the call writes instead of ``output`` (see
    :func:`quantizing_gelus`), or None."""


def quantized_gelus(analysis: Analysis, names: dict[ir.Node, str], pairs: dict[str, QuantizeDequantize],
                    absorbed: set[ir.Node]) -> tuple[dict[str, QuantizedGelu], dict[str, QuantizeDequantize]]:
    """The formulas of the module docstring by the last Mul's friendly name, and ``pairs`` without the
    pairs inside them (absorbed, as their nodes are into ``absorbed``)."""
    def formula(analysis: Analysis, names: dict[ir.Node, str], erf: ir.Node,
                walk: PairWalk) -> tuple[QuantizedGelu, list[str]] | None:
        found = _formula(analysis, names, erf, walk)
        return None if found is None else (found, [])

    return find_chains(analysis, names, pairs, absorbed, "Erf", formula)


def _one_value(analysis: Analysis, value: ir.Value | None) -> bool:
    array = _constant(analysis, value)
    return array is not None and array.size == 1 and array.dtype.kind == "f"


def _formula(analysis: Analysis, names: dict[ir.Node, str], erf: ir.Node,
             walk: PairWalk) -> QuantizedGelu | None:
    scale = erf.inputs[0].producer() if erf.inputs[0] is not None else None
    if scale is None or scale.op_type not in ("Div", "Mul") or scale.domain not in _ONNX_DOMAINS \
            or scale in walk.absorbed or not _runs(analysis, names, scale) \
            or _sole_consumer(scale.outputs[0]) is None:
        return None
    x, factor = scale.inputs[0], scale.inputs[1]
    if scale.op_type == "Mul" and _one_value(analysis, x):
        x, factor = factor, x
    info = analysis.infos[names[erf]]
    if x is None or not _one_value(analysis, factor) or x in analysis.constants or not info.input_dtypes \
            or info.input_dtypes[0] not in _FLOAT_TYPES:
        return None
    erf_pair, value = walk.pair_after(erf.outputs[0])
    step = walk.next_node(value, ("Add",))
    if step is None or not _one_value(analysis, step[0].inputs[1 - step[1]]):
        return None
    add, one = step[0], step[0].inputs[1 - step[1]]
    sum_pair, value = walk.pair_after(add.outputs[0])
    step = walk.next_node(value, ("Mul",))
    if step is None or not _same_data(analysis, step[0].inputs[1 - step[1]], x):
        return None
    product = step[0]
    product_pair, value = walk.pair_after(product.outputs[0])
    step = walk.next_node(value, ("Mul",))
    if step is None or not _one_value(analysis, step[0].inputs[1 - step[1]]):
        return None
    last, half = step[0], step[0].inputs[1 - step[1]]
    shapes = {analysis.infos[names[node]].output_shapes[0] for node in (scale, erf, add, product, last)
              if analysis.infos[names[node]].output_shapes}
    if len(shapes) != 1:
        return None  # a constant that broadcasts x up is not the call's
    if erf_pair is None and sum_pair is None and product_pair is None:
        return None  # a float model's formula: the float fusion's, or as written
    return QuantizedGelu(x, scale.op_type == "Div", factor, one, half, erf_pair, sum_pair,  # type: ignore[arg-type]
                         product_pair, last.outputs[0], (scale, erf, add, product))


def _same_data(analysis: Analysis, a: ir.Value | None, b: ir.Value) -> bool:
    """Whether ``a`` is ``b``, or both are DequantizeLinear outputs of one 8-bit tensor with the same
    numbers."""
    if a is b:
        return True
    first, second = dequantizer(a), dequantizer(b)
    if first is None or second is None or first.inputs[0] is not second.inputs[0]:
        return False
    numbers = zip(first.inputs[1:], second.inputs[1:], strict=False)
    return all(_constant_equal(analysis, x, y) for x, y in numbers) \
        and len(first.inputs) == len(second.inputs)


def _constant_equal(analysis: Analysis, a: ir.Value | None, b: ir.Value | None) -> bool:
    if a is b:
        return True
    x, y = _constant(analysis, a), _constant(analysis, b)
    return x is not None and y is not None and x.dtype == y.dtype and x.shape == y.shape \
        and bool((x == y).all())


def quantizing_gelus(gelus: dict[str, QuantizedGelu], planned: dict[str, QuantizedMatMul],
                     absorbed: set[ir.Node]) -> None:
    """Where an int8 matmul quantizes a GELU's output itself (its ``source``) and nothing else reads
    that output or the QuantizeLinear's data, the GELU's call writes the 8-bit data (one pass less
    over the activation, and half its bytes written) and the matmul reads it."""
    by_output = {gelu.output: name for name, gelu in gelus.items()}
    for name, found in list(planned.items()):
        source = found.source
        if source is None or source not in by_output or source.is_graph_output():
            continue
        data = found.dequantizers[0].inputs[0]
        quantizer = data.producer() if data is not None else None
        readers = list(source.uses())
        if quantizer is None or len(readers) != 1 or readers[0].node is not quantizer \
                or quantizer.outputs[0].is_graph_output() \
                or any(use.node is not found.dequantizers[0] for use in quantizer.outputs[0].uses()):
            continue
        gelu = by_output[source]
        gelus[gelu] = dataclasses.replace(gelus[gelu], quantizer=quantizer)
        planned[name] = dataclasses.replace(found, source=None)
        absorbed.add(quantizer)


def tabled_gelus(gelus: dict[str, QuantizedGelu], planned: dict[str, QuantizedMatMul],
                 absorbed: set[ir.Node]) -> None:
    """Give each formula whose ``x`` only an int8 matmul's last pair (its ``quantize``) gives, and
    only the formula reads, to that matmul (its ``gelu``): the matmul's epilogue then looks the
    formula's value up by the pair's level (see the module docstring).  The formula leaves
    ``gelus``; its last Mul and the pair's nodes join ``absorbed``."""
    by_input = {gelu.input: name for name, gelu in gelus.items()}
    for name, found in list(planned.items()):
        pair = found.quantize
        if pair is None or found.output.is_graph_output():
            continue
        data = pair.quantizer.outputs[0]
        dequantizers = [use.node for use in data.uses()]
        inputs = [dq.outputs[0] for dq in dequantizers]
        gelu_name = next((by_input[value] for value in inputs if value in by_input), None)
        if gelu_name is None:
            continue
        gelu = gelus[gelu_name]
        readers = (gelu.absorbed[0], gelu.absorbed[-1])  # the Div (or Mul) by the factor, the product by x
        if data.is_graph_output() or any(value.is_graph_output() or any(
                use.node not in readers for use in value.uses()) for value in inputs):
            continue
        planned[name] = dataclasses.replace(found, gelu=gelu)
        del gelus[gelu_name]
        absorbed.update((pair.quantizer, *dequantizers, gelu.output.producer()))  # type: ignore[arg-type]
