"""Fusion planning for a QDQ model's attention: the chain ``quantize_static`` writes between the
two attention matmuls, emitted as one call
(:func:`~inferplex.devices.gpu.ops._qdq_attention.quantized_attention`).

``quantize_static`` puts a QuantizeLinear -> DequantizeLinear pair after each step of
``softmax(Q @ K^T / c + mask) @ V``: MatMul -> pair -> Div (or Mul) -> pair -> [Add mask -> pair]
-> Softmax -> pair -> MatMul -> pair.  The pairs keep the float chain's fusion
(:func:`~inferplex.devices.gpu.ops._fused_float.scaled_dot_product_attention`) from seeing it; run as
written, it is two matmuls on copies of Q, K and V, a pass per step and a fake-quantize pass
after each.  :func:`quantized_attentions` finds the chain once the pairs are planned (see
:mod:`._qdq_pairs`): each pair in it is optional, the scale and the mask too, Q, K^T and V are
4-D with equal batch and head dims, the key length at most :data:`MAX_KEYS`.
:func:`quantizing_attentions` then lets the call write its output projection's 8-bit input
(the int8 matmul's QuantizeLinear after the Transpose and Reshape that join the heads).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING

import onnx_ir as ir

from inferplex.devices.gpu._graph import ONNX_DOMAINS as _ONNX_DOMAINS
from inferplex.devices.gpu._graph import constant as _constant
from inferplex.devices.gpu._qdq_pairs import (
    PairWalk,
    QuantizeDequantize,
    find_chains,
    pairs_reading,
)

if TYPE_CHECKING:
    from inferplex.devices.gpu._quantized_fusions import QuantizedMatMul
    from inferplex.devices.gpu.lower import Analysis

__all__ = ["MAX_KEYS", "QuantizedAttention", "quantized_attentions", "quantizing_attentions"]

MAX_KEYS = 1024
"""Longest key sequence the fused call takes: a row of scores stays in one program's registers."""

_FLOAT_TYPES = (ir.DataType.FLOAT, ir.DataType.FLOAT16, ir.DataType.BFLOAT16)


@dataclass(frozen=True)
class QuantizedAttention:
    """The chain from the first MatMul to the second's output, with the pair after each step."""

    query: ir.Value
    key_t: ir.Value
    value: ir.Value
    scores: QuantizeDequantize | None
    """The pair after ``Q @ K^T``."""
    divide: bool
    """Whether the scale step divides (Div) or multiplies (Mul); ``factor`` None: no scale step."""
    factor: ir.Value | None
    """The scale step's one-value constant."""
    scaled: QuantizeDequantize | None
    mask: ir.Value | None
    """The Add's other input (added to the scores), or None."""
    masked: QuantizeDequantize | None
    probabilities: QuantizeDequantize | None
    """The pair after the Softmax."""
    context: QuantizeDequantize | None
    """The pair on the second MatMul's output: run by the call, its pairs then change nothing."""
    output: ir.Value
    """The second MatMul's output."""
    absorbed: tuple[ir.Node, ...]
    """The chain's nodes but the second MatMul, which emits the call."""
    quantizer: ir.Node | None = None
    """The QuantizeLinear whose 8-bit data the call writes in place of ``output`` (see
    :func:`quantizing_attentions`), or None."""


def quantized_attentions(analysis: Analysis, names: dict[ir.Node, str], pairs: dict[str, QuantizeDequantize],
                         absorbed: set[ir.Node]
                         ) -> tuple[dict[str, QuantizedAttention], dict[str, QuantizeDequantize]]:
    """The chains of the module docstring by the second MatMul's friendly name, and ``pairs`` without
    the pairs inside them (absorbed, as their nodes are into ``absorbed``) and with the pairs on their
    outputs marked ``identity``."""
    return find_chains(analysis, names, pairs, absorbed, "MatMul", _chain)


def _chain(analysis: Analysis, names: dict[ir.Node, str], first: ir.Node,
           walk: PairWalk) -> tuple[QuantizedAttention, list[str]] | None:
    """The chain that starts at ``first``, and the names of the pairs on its output."""
    scores, value = walk.pair_after(first.outputs[0])
    nodes: list[ir.Node] = [first]
    step = walk.next_node(value, ("Div", "Mul", "Add", "Softmax"))
    divide, factor, scaled = False, None, None
    if step is not None and step[0].op_type in ("Div", "Mul"):
        node, index = step
        other = node.inputs[1 - index]
        array = _constant(analysis, other)
        if array is None or array.size != 1 or array.dtype.kind != "f" or float(array.reshape(-1)[0]) == 0.0 \
                or (node.op_type == "Div" and index != 0):
            return None
        divide, factor = node.op_type == "Div", other
        nodes.append(node)
        scaled, value = walk.pair_after(node.outputs[0])
        step = walk.next_node(value, ("Add", "Softmax"))
    mask, masked, mask_type = None, None, None
    if step is not None and step[0].op_type == "Add":
        node, index = step
        mask = node.inputs[1 - index]
        add_info = analysis.infos[names[node]]
        mask_type = (add_info.input_shapes[1 - index], add_info.input_dtypes[1 - index])
        nodes.append(node)
        masked, value = walk.pair_after(node.outputs[0])
        step = walk.next_node(value, ("Softmax",))
    if step is None or step[0].op_type != "Softmax":
        return None
    softmax = step[0]
    info = analysis.infos[names[softmax]]
    rank = info.rank(0)
    axis = int(info.attr("axis", -1 if info.opset >= 13 else 1))
    if rank != 4 or axis % rank != 3:
        return None
    nodes.append(softmax)
    probabilities, value = walk.pair_after(softmax.outputs[0])
    step = walk.next_node(value, ("MatMul",))
    if step is None or step[1] != 0:
        return None
    second = step[0]
    if not _shapes_fit(analysis, names, first, second, mask_type):
        return None
    ends = pairs_reading(second.outputs[0], walk.by_quantizer, walk.pairs)
    context = walk.pairs[ends[0]] if ends else None
    if any(name in walk.inner for name in ends):
        return None
    if not (walk.inner or ends):
        return None  # a float model's chain: the float fusion's, or as written
    attention = QuantizedAttention(first.inputs[0], first.inputs[1], second.inputs[1], scores, divide,  # type: ignore[arg-type]
                                   factor, scaled, mask, masked, probabilities, context, second.outputs[0],
                                   tuple(nodes))
    return attention, ends


def _shapes_fit(analysis: Analysis, names: dict[ir.Node, str], first: ir.Node, second: ir.Node,
                mask: tuple[tuple[int | str | None, ...] | None, ir.DataType | None] | None) -> bool:
    """Q (B, H, Sq, D), K^T (B, H, D, Sk), V (B, H, Sk, Dv): known, equal batch and head dims, float,
    Sk at most :data:`MAX_KEYS`; the mask (shape, type) of rank 4 or less, broadcasting to the scores."""
    query, key_t = analysis.infos[names[first]].input_shapes[:2]
    value = analysis.infos[names[second]].input_shapes[1]
    dtypes = analysis.infos[names[first]].input_dtypes
    shapes = (query, key_t, value)
    if any(shape is None or len(shape) != 4 or any(not isinstance(d, int) for d in shape)
           for shape in shapes) \
            or not dtypes or dtypes[0] not in _FLOAT_TYPES:
        return False
    assert query is not None and key_t is not None and value is not None
    if not (query[:2] == key_t[:2] == value[:2] and query[3] == key_t[2] and key_t[3] == value[2]):
        return False
    keys, depth, width = (int(d) for d in (key_t[3], query[3], value[3]))  # type: ignore[arg-type]
    if keys > MAX_KEYS or keys < 1 or depth > 256 or width > 256:
        return False
    if mask is None:
        return True
    dims, dtype = mask
    if dims is None or len(dims) > 4 or any(not isinstance(d, int) for d in dims) \
            or dtype not in _FLOAT_TYPES:
        return False
    target = (*query[:3], key_t[3])
    padded = [1] * (4 - len(dims)) + list(dims)
    return all(d in (1, t) for d, t in zip(padded, target, strict=True))



def quantizing_attentions(analysis: Analysis, names: dict[ir.Node, str],
                          attentions: dict[str, QuantizedAttention], planned: dict[str, QuantizedMatMul],
                          pairs: dict[str, QuantizeDequantize], absorbed: set[ir.Node]) -> None:
    """Where an int8 matmul quantizes an attention's result itself (its ``source``) after a Transpose
    to (batch, row, head, width) and a Reshape joining the heads (a multi-head attention's output
    projection), with at most pairs that change nothing between (marked ``identity``), and nothing
    else reads those values or the QuantizeLinear's data: the attention's call writes that data in
    the Transpose's order, which the Reshape only views, and the matmul reads it.  The Transpose,
    the Reshape, the pairs between and the QuantizeLinear join ``absorbed``."""
    by_output = {attention.output: name for name, attention in attentions.items()}
    identities = {pair.output: pair for pair in pairs.values() if pair.identity}
    for name, found in list(planned.items()):
        data = found.dequantizers[0].inputs[0]
        quantizer = data.producer() if data is not None else None
        if found.source is None or data is None or quantizer is None \
                or quantizer.op_type != "QuantizeLinear" or data.is_graph_output() \
                or any(use.node is not found.dequantizers[0] for use in data.uses()):
            continue
        path = _joined_heads(analysis, names, found.source, quantizer, identities)
        if path is None or path[0] not in by_output:
            continue
        attention_name = by_output[path[0]]
        attentions[attention_name] = dataclasses.replace(attentions[attention_name], quantizer=quantizer)
        planned[name] = dataclasses.replace(found, source=None)
        absorbed.update((*path[1], quantizer))


def _joined_heads(analysis: Analysis, names: dict[ir.Node, str], source: ir.Value, quantizer: ir.Node,
                  identities: dict[ir.Value, QuantizeDequantize]) -> tuple[ir.Value, list[ir.Node]] | None:
    """(x, the nodes from x to ``source``) where ``source``, which only ``quantizer`` reads, is
    ``Reshape(Transpose(x, perm=(0, 2, 1, 3)))`` of a 4-D ``x`` of static shape, the Reshape joining
    the last two dims, with identity pairs between, and each value on the way is read by the next
    node alone; else None."""
    steps: list[ir.Node] = []  # from source back to x

    def before_pairs(value: ir.Value) -> ir.Value:
        while value in identities:
            pair = identities[value]
            steps.extend((value.producer(), pair.quantizer))  # type: ignore[arg-type]
            value = pair.source
        return value

    reshape = source.producer()
    if reshape is None or reshape.op_type != "Reshape" or reshape.domain not in _ONNX_DOMAINS \
            or reshape.inputs[0] is None:
        return None
    steps.append(reshape)
    transpose = before_pairs(reshape.inputs[0]).producer()
    perm = transpose.attributes.get("perm") if transpose is not None else None
    if transpose is None or transpose.op_type != "Transpose" or transpose.domain not in _ONNX_DOMAINS \
            or perm is None or list(perm.value) != [0, 2, 1, 3] or transpose.inputs[0] is None:
        return None
    steps.append(transpose)
    x = before_pairs(transpose.inputs[0])
    shape = analysis.infos[names[transpose]].input_shapes[0]
    joined = analysis.infos[names[quantizer]].input_shapes[0]
    if shape is None or joined is None or len(shape) != 4 or len(joined) != 3 \
            or not all(isinstance(d, int) for d in (*shape, *joined)) \
            or tuple(joined) != (shape[0], shape[2], shape[1] * shape[3]):  # type: ignore[operator]
        return None
    forward = [*reversed(steps), quantizer]
    values = [x, *(node.outputs[0] for node in forward[:-1])]
    if any(value.is_graph_output() or any(use.node is not reader for use in value.uses())
           for value, reader in zip(values, forward, strict=True)):
        return None
    return x, steps
