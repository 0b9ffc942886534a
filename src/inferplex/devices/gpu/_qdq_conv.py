"""Fusion planning for a QDQ model's convolutions that end in a pair with no Relu in its range:
``Conv`` -> pair [-> ``Add`` of a same-shaped tensor -> pair],
emitted as one call (:func:`~inferplex.devices.gpu.ops._qdq_conv.quantized_conv`).

``quantize_static`` writes this where the float model had no Relu after the Conv: a ResNet's second
convolution of each block (then the residual Add and its pair) and its downsampling ones.  A pair
whose range holds a Relu goes with :func:`~inferplex.devices.gpu.optimize._plan_relu_range_convs`
instead (one cuDNN call with the bias, the Add and the Relu).  Run as written these are the
convolution, torch's separate bias pass, the fake-quantize, the Add and the second fake-quantize;
the call makes them the convolution and one pass.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import onnx_ir as ir

from inferplex.devices.gpu._graph import constant, same_shapes, written_pads
from inferplex.devices.gpu._qdq_pairs import (
    PairWalk,
    QuantizeDequantize,
    dequantizer,
    find_chains,
    pairs_by_quantizer,
    pairs_reading,
)

if TYPE_CHECKING:
    from inferplex.devices.gpu.lower import Analysis

__all__ = ["Int8Conv", "QuantizedConv", "int8_conv_plan", "level_handoffs", "quantized_convs"]


@dataclass(frozen=True)
class QuantizedConv:
    """``pair(pair(Conv(x, w, b)) + other)``, or ``pair(Conv(x, w, b))`` without the Add."""

    conv_name: str
    conv: ir.Node
    first: QuantizeDequantize
    """The pair after the convolution."""
    add: ir.Node | None
    other: ir.Value | None
    """The Add's other input."""
    second: QuantizeDequantize | None
    """The pair after the Add."""
    output: ir.Value
    """The value the call makes: the Add's (or the convolution's) output, whose pair the call runs
    (and which then changes nothing)."""
    absorbed: tuple[ir.Node, ...]


def quantized_convs(analysis: Analysis, names: dict[ir.Node, str], pairs: dict[str, QuantizeDequantize],
                    absorbed: set[ir.Node], conv_bn: dict[str, ir.Node], read: set[ir.Value]
                    ) -> tuple[dict[str, QuantizedConv], dict[str, QuantizeDequantize]]:
    """The chains of the module docstring by the friendly name of the node that makes their output,
    and ``pairs`` without the pairs inside them (absorbed) and with those the calls run marked
    identity.  A Conv with a BatchNormalization after it (``conv_bn``, emitted as one call already)
    is left as it is, and so is a value in ``read`` (one an int8 matmul quantizes itself, which it
    needs as written, not fake-quantized)."""
    by_quantizer = pairs_by_quantizer(pairs)

    def chain(analysis: Analysis, names: dict[ir.Node, str], conv: ir.Node,
              walk: PairWalk) -> tuple[QuantizedConv, list[str]] | None:
        name = names[conv]
        if analysis.infos[name].rank(0) != 4 or len(conv.inputs) < 2 or conv.inputs[1] is None \
                or name in conv_bn or conv.outputs[0] in read:
            return None
        value = conv.outputs[0]
        first, after = walk.pair_after(value)
        step = walk.next_node(after, ("Add",)) if first is not None else None
        if first is not None and step is not None and same_shapes(analysis, names, step[0]) \
                and step[0].outputs[0] not in read:
            add = step[0]
            ends = pairs_reading(add.outputs[0], by_quantizer, walk.pairs)
            if ends:
                return QuantizedConv(name, conv, first, add, add.inputs[1 - step[1]], walk.pairs[ends[0]],
                                     add.outputs[0], (conv,)), ends
        walk.inner.clear()  # no Add: the pair after the convolution ends the chain
        ends = pairs_reading(value, by_quantizer, walk.pairs)
        if not ends:
            return None
        return QuantizedConv(name, conv, walk.pairs[ends[0]], None, None, None, value, ()), ends

    return find_chains(analysis, names, pairs, absorbed, "Conv", chain)



@dataclass(frozen=True)
class Int8Conv:
    """A QDQ Conv whose data and weight are DequantizeLinear outputs the int8 convolution can take
    (:func:`~inferplex.devices.gpu.ops._int8_conv.int8_conv`)."""

    weight: ir.Value
    """The constant int8 weight (M x C x kh x kw), zero point 0."""
    weight_scale: ir.Value
    """Its constant float32 scale: one value, or one per output channel."""
    x_scale: ir.Value
    """The data's constant float32 scale, one value."""
    x_zero: int
    x_signed: bool
    """The data's zero point and whether it is int8 (else uint8)."""


def int8_conv_plan(analysis: Analysis, conv: ir.Node) -> Int8Conv | None:
    """The :class:`Int8Conv` of a 2-D Conv of one group, or None where its data or weight is not
    such a DequantizeLinear output (then the Conv runs as a float convolution)."""
    group = conv.attributes.get("group")
    if len(conv.inputs) < 2 or (group is not None and int(group.value) != 1):
        return None
    data, weight = dequantizer(conv.inputs[0]), dequantizer(conv.inputs[1])
    if data is None or weight is None:
        return None
    x_scale, x_zero, x_data = (constant(analysis, data.inputs[i]) if i < len(data.inputs) else None
                               for i in (1, 2, 0))
    if x_scale is None or x_scale.dtype != np.float32 or x_scale.size != 1 or x_zero is None \
            or x_zero.size != 1 or x_zero.dtype not in (np.int8, np.uint8) or x_data is not None:
        return None  # a per-tensor scale and zero point on 8-bit data computed at run time
    w_array, w_scale = constant(analysis, weight.inputs[0]), constant(analysis, weight.inputs[1])
    w_zero = constant(analysis, weight.inputs[2]) if len(weight.inputs) > 2 and weight.inputs[2] is not None \
        else np.zeros(1, np.int8)
    if w_array is None or w_array.dtype != np.int8 or w_array.ndim != 4 or w_scale is None \
            or w_scale.dtype != np.float32 or w_zero is None or w_zero.any():
        return None
    axis = weight.attributes.get("axis")
    if w_scale.size != 1 and (w_scale.size != w_array.shape[0] or axis is None or int(axis.value) % 4 != 0):
        return None
    return Int8Conv(weight.inputs[0], weight.inputs[1], data.inputs[1],  # type: ignore[arg-type]
                    int(x_zero.reshape(-1)[0]), x_zero.dtype == np.int8)


def level_handoffs(analysis: Analysis, producers: dict[str, tuple[ir.Node, QuantizeDequantize]],
                   readers: dict[ir.Node, str]) -> tuple[dict[str, list[int]], dict[str, list[int]]]:
    """The Convs whose pair's levels the next Convs read as they are: (writers, readers), each by
    friendly name to the pads (ONNX's begins then ends) the levels are written with, the largest of
    the readers' on each side.  ``producers``: the Convs whose call can write levels (friendly name
    -> the Conv and its chain's last pair); ``readers``: the Convs whose call can read them (Conv ->
    friendly name).  A producer's pair that alone reads its float values, whose QuantizeLinear only
    its DequantizeLinear reads and whose output only readers read, each as its data, where the int8
    convolution takes them all and each reader's pads are written out (not ``auto_pad``'s), is such
    a handoff.  On CUDA the producer then writes the int8 levels with those pads around them in
    its epilogue, where it wrote the pair's float values, and the readers skip the pass that made
    their levels from those (see :func:`~inferplex.devices.gpu.ops._int8_conv.int8_conv`)."""
    writes: dict[str, list[int]] = {}
    reads: dict[str, list[int]] = {}
    for name, (conv, pair) in producers.items():
        output, quantized, source = pair.output, pair.quantizer.outputs[0], pair.source
        if any(value.is_graph_output() or len(list(value.uses())) != 1 for value in (quantized, source)) \
                or output.is_graph_output():
            continue  # the float values before the pair, or its 8-bit data, are read elsewhere
        uses = [(use.node, use.idx) for use in output.uses()]
        takers = [node for node, index in uses if index == 0 and node in readers]
        if not takers or len(takers) != len(uses) or int8_conv_plan(analysis, conv) is None:
            continue
        pads = [written_pads(reader) for reader in takers]
        plans = [int8_conv_plan(analysis, reader) for reader in takers]
        weights = [None if plan is None else constant(analysis, plan.weight) for plan in plans]
        if any(p is None for p in pads) or any(w is None or w.shape[1] % 64 for w in weights):
            continue
        widest = [max(side) for side in zip(*pads, strict=True)]
        writes[name] = widest
        reads.update((readers[reader], widest) for reader in takers)
    return writes, reads
