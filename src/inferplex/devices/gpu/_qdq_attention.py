"""Fusion planning for a QDQ model's attention: the chain ``quantize_static`` writes between the
two attention matmuls, emitted as one call
(:func:`~inferplex.devices.gpu.ops._qdq_attention.quantized_attention`).

``quantize_static`` puts a QuantizeLinear -> DequantizeLinear pair after each step of
``softmax(Q @ K^T / c + mask) @ V``: MatMul -> pair -> Div (or Mul) -> pair -> [Add mask -> pair]
-> Softmax -> pair -> MatMul -> pair.  The pairs keep the float chain's fusion
(:func:`~inferplex.devices.gpu.optimize.scaled_dot_product_attention`) from seeing it; run as
written, it is two matmuls on copies of Q, K and V, a pass per step and a fake-quantize pass
after each.  :func:`quantized_attentions` finds the chain once the pairs are planned (see
:mod:`._qdq_pairs`): each pair in it is optional, the scale and the mask too, Q, K^T and V are
4-D with equal batch and head dims, the key length at most :data:`MAX_KEYS`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import onnx_ir as ir

from inferplex.devices.gpu._graph import constant as _constant
from inferplex.devices.gpu._qdq_pairs import (
    PairWalk,
    QuantizeDequantize,
    find_chains,
    pairs_reading,
)

if TYPE_CHECKING:
    from inferplex.devices.gpu.lower import Analysis

__all__ = ["MAX_KEYS", "QuantizedAttention", "quantized_attentions"]

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
