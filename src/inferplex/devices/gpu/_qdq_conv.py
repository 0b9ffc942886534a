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

import onnx_ir as ir

from inferplex.devices.gpu._graph import same_shapes
from inferplex.devices.gpu._qdq_pairs import (
    PairWalk,
    QuantizeDequantize,
    find_chains,
    pairs_by_quantizer,
    pairs_reading,
)

if TYPE_CHECKING:
    from inferplex.devices.gpu.lower import Analysis

__all__ = ["QuantizedConv", "quantized_convs"]


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

