"""The QuantizeLinear -> DequantizeLinear pairs of a QDQ model that the GPU lowering emits as one
fake-quantize call (:func:`~inferplex.devices.gpu.ops._fake_quantize.quantize_dequantize`), or as
none: :func:`quantize_dequantize_pairs` finds them, :func:`identity_pairs` marks those that change
nothing, :func:`relu_range_pair` the one after a Conv whose range holds a Relu, and
:func:`settled_quantizers` says which QuantizeLinear nodes then need not run.  Part of the fusion
planning of :mod:`.optimize` (the int8 matmuls and dynamic chains are in :mod:`._quantized_fusions`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, TypeVar

import numpy as np
import onnx_ir as ir

from inferplex.devices.gpu._graph import ONNX_DOMAINS as _ONNX_DOMAINS
from inferplex.devices.gpu._graph import constant as _constant
from inferplex.devices.gpu._graph import running
from inferplex.devices.gpu._graph import runs as _runs
from inferplex.devices.gpu._graph import sole_consumer as _sole_consumer

if TYPE_CHECKING:
    from inferplex.devices.gpu._quantized_fusions import QuantizedMatMul
    from inferplex.devices.gpu.lower import Analysis

__all__ = [
    "PairWalk",
    "QuantizeDequantize",
    "dequantizer",
    "find_chains",
    "identity_pairs",
    "pairs_by_quantizer",
    "pairs_reading",
    "quantize_dequantize_pairs",
    "quantizer_of",
    "read_as_by_dequantizers",
    "relu_range_pair",
    "settled_quantizers",
    "take_pairs",
]


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


_EIGHT_BIT_RANGES = {ir.DataType.INT8: (-128, 127), ir.DataType.UINT8: (0, 255)}

def dequantizer(value: ir.Value | None) -> ir.Node | None:
    """The DequantizeLinear producing ``value``, when it is per tensor or per axis with a float output."""
    node = None if value is None else value.producer()
    if node is None or node.op_type != "DequantizeLinear" or node.domain not in _ONNX_DOMAINS:
        return None
    unusual = [name for name in ("block_size", "output_dtype") if name in node.attributes
               and node.attributes[name].value]
    return None if unusual else node


def quantizer_of(analysis: Analysis, names: dict[ir.Node, str], dq: ir.Node) -> ir.Node | None:
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


def read_as_by_dequantizers(analysis: Analysis, quantizer: ir.Node, dq: ir.Node) -> bool:
    """Whether every reader of ``quantizer``'s 8-bit output is a DequantizeLinear with its numbers
    (``quantize_static`` writes one DequantizeLinear per consumer of a quantized tensor)."""
    data = quantizer.outputs[0]
    uses = list(data.uses())
    return not data.is_graph_output() and any(use.node is dq for use in uses) and all(
        use.idx == 0 and dequantizer(use.node.outputs[0]) is use.node
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
        if dq.op_type != "DequantizeLinear" or dq in absorbed or dequantizer(dq.outputs[0]) is None \
                or not _runs(analysis, names, dq) or dq.inputs[0] in read:
            continue
        found = _pair(analysis, names, dq)
        if found is not None and found.quantizer not in absorbed:  # not a Conv's, see relu_range_pair
            pairs[name] = found
    return pairs


def _pair(analysis: Analysis, names: dict[ir.Node, str], dq: ir.Node) -> QuantizeDequantize | None:
    """The pair that ends at ``dq`` (see :func:`quantize_dequantize_pairs`), or None."""
    quantizer = quantizer_of(analysis, names, dq)
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
        before = dequantizer(mover.inputs[0])
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
            or dequantizer(dq.outputs[0]) is None or not _runs(analysis, names, dq):
        return None
    found = _pair(analysis, names, dq)
    return found if found is not None and found.zero_point == found.low else None


class PairWalk:
    """Steps along a chain of ops with a pair after some of them (the QDQ attention's and GELU's):
    the pair that alone reads a value where there is one, and the next op; ``inner`` collects
    the names of the pairs passed."""

    def __init__(self, analysis: Analysis, names: dict[ir.Node, str], by_quantizer: dict[ir.Node, list[str]],
                 pairs: dict[str, QuantizeDequantize], absorbed: set[ir.Node]) -> None:
        self.analysis, self.names, self.by_quantizer, self.pairs = analysis, names, by_quantizer, pairs
        self.absorbed = absorbed
        self.inner: list[str] = []

    def pair_after(self, value: ir.Value) -> tuple[QuantizeDequantize | None, ir.Value]:
        """(the one pair that alone reads ``value``, its output), or (None, ``value``)."""
        use = _sole_consumer(value)
        quantizer = use[0] if use is not None and use[1] == 0 else None
        names = [name for name in self.by_quantizer.get(quantizer, []) if name in self.pairs]  # type: ignore[arg-type]
        if quantizer is None or len(names) != 1 or self.pairs[names[0]].identity \
                or len(list(quantizer.outputs[0].uses())) != 1 or quantizer.outputs[0].is_graph_output():
            return None, value
        self.inner.append(names[0])
        return self.pairs[names[0]], self.pairs[names[0]].output

    def next_node(self, value: ir.Value, op_types: tuple[str, ...]) -> tuple[ir.Node, int] | None:
        use = _sole_consumer(value)
        if use is None or use[0].op_type not in op_types or use[0].domain not in _ONNX_DOMAINS \
                or use[0] in self.absorbed or not _runs(self.analysis, self.names, use[0]):
            return None
        return use


def pairs_by_quantizer(pairs: dict[str, QuantizeDequantize]) -> dict[ir.Node, list[str]]:
    """The names of ``pairs`` by their QuantizeLinear (one pair per DequantizeLinear reader)."""
    found: dict[ir.Node, list[str]] = {}
    for name, pair in pairs.items():
        found.setdefault(pair.quantizer, []).append(name)
    return found


def pairs_reading(value: ir.Value, by_quantizer: dict[ir.Node, list[str]],
                  pairs: dict[str, QuantizeDequantize]) -> list[str]:
    """The names of the pairs that end the QuantizeLinear which alone reads ``value``, where every
    reader of its 8-bit output ends one of ``pairs`` (empty otherwise): a call that produces
    ``value`` can run their fake-quantize itself, and they then change nothing."""
    use = _sole_consumer(value)
    if use is None or use[1] != 0:
        return []
    quantizer = use[0]
    names = [name for name in by_quantizer.get(quantizer, []) if name in pairs and not pairs[name].identity]
    data = quantizer.outputs[0]
    ends = {pairs[name].output.producer() for name in names}
    if not names or data.is_graph_output() or any(reader.node not in ends for reader in data.uses()):
        return []
    return names


def take_pairs(pairs: dict[str, QuantizeDequantize], names: list[str], absorbed: set[ir.Node]) -> None:
    """Remove the pairs ``names`` from ``pairs``, their QuantizeLinear and DequantizeLinear into
    ``absorbed`` (a fused call runs them)."""
    for name in names:
        pair = pairs.pop(name)
        absorbed.update((pair.quantizer, pair.output.producer()))  # type: ignore[arg-type]


class _Chain(Protocol):
    @property
    def output(self) -> ir.Value: ...

    @property
    def absorbed(self) -> tuple[ir.Node, ...]: ...


ChainT = TypeVar("ChainT", bound=_Chain)


def find_chains(analysis: Analysis, names: dict[ir.Node, str], pairs: dict[str, QuantizeDequantize],
                absorbed: set[ir.Node], start: str,
                find: Callable[[Analysis, dict[ir.Node, str], ir.Node, PairWalk],
                               tuple[ChainT, list[str]] | None]
                ) -> tuple[dict[str, ChainT], dict[str, QuantizeDequantize]]:
    """The chains ``find`` finds from each running ``start`` node (a chain of ops with pairs between,
    emitted as one call by the node that makes its ``output``), and ``pairs`` without the pairs inside
    them (their nodes go into ``absorbed``, with the chain's own) and with the pairs on their outputs
    that ``find`` names marked ``identity`` (the call runs their fake-quantize)."""
    by_quantizer = pairs_by_quantizer(pairs)
    remaining = dict(pairs)
    found: dict[str, ChainT] = {}
    for node in running(analysis, names, start, absorbed):
        if node in absorbed:  # taken by a chain found before
            continue
        walk = PairWalk(analysis, names, by_quantizer, remaining, absorbed)
        result = find(analysis, names, node, walk)
        if result is None:
            continue
        chain, ends = result
        found[names[chain.output.producer()]] = chain  # type: ignore[index]
        take_pairs(remaining, walk.inner, absorbed)
        for name in ends:
            remaining[name] = dataclasses.replace(remaining[name], identity=True)
        absorbed.update(chain.absorbed)
    return found, remaining

