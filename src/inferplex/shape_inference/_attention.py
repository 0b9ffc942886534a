"""Shape twins (see :mod:`inferplex.shape_inference`) of ONNX Runtime's attention ops: Attention,
MultiHeadAttention and GroupQueryAttention (domain ``com.microsoft``).

The twins take their dims where the real op does: the heads are the projected values reshaped to
``num_heads`` heads, the present caches the past ones with the new keys/values appended along the
sequence, so dims known only as symbols (``batch``, ``past_len``) are carried through ONNX's own
Reshape, Transpose and Concat inference.
"""

from __future__ import annotations

from typing import Any

import onnx
from onnx import TensorProto, helper

from inferplex.shape_inference._rewriter import Rewriter, Twin, int_attrs

__all__ = ["ATTENTION_TWINS"]


def _index(rw: Rewriter, value: int) -> str:
    """A new int64 scalar initializer (a Gather index that drops its axis)."""
    name = rw.name("index")
    rw.graph.initializer.append(helper.make_tensor(name, TensorProto.INT64, [], [value]))
    return name


def _node(op: str, inputs: list[str], nodes: list[onnx.NodeProto], rw: Rewriter, **attrs: Any) -> str:
    """Append one node of one output; its output's name."""
    out = rw.name(op.lower())
    nodes.append(helper.make_node(op, inputs, [out], **attrs))
    return out


def _heads_first(rw: Rewriter, value: str, heads: int, nodes: list[onnx.NodeProto]) -> str:
    """(B, L, heads * H) -> (B, heads, L, H)."""
    split = _node("Reshape", [value, rw.ints([0, 0, heads, -1])], nodes, rw)
    return _node("Transpose", [split], nodes, rw, perm=[0, 2, 1, 3])


def _present(rw: Rewriter, past: str, new: str, axis: int, out: str, nodes: list[onnx.NodeProto],
             shared: bool = False) -> None:
    """``out`` = the past cache (where the node has one) with ``new`` appended along ``axis``; the past
    cache as it is where the two share one buffer of the longest length (``shared``)."""
    if not out:
        return
    if past and shared:
        nodes.append(helper.make_node("Identity", [past], [out]))
    elif past:
        nodes.append(helper.make_node("Concat", [past, new], [out], axis=axis))
    else:
        nodes.append(helper.make_node("Identity", [new], [out]))


def _attention(rw: Rewriter, node: onnx.NodeProto) -> list[onnx.NodeProto] | None:
    """Attention's output (B, S, v_hidden) and present (2, B, num_heads, past + S, v_head_size): the
    packed projection ``input @ weights`` split as ``qkv_hidden_sizes`` says (else in three equal
    parts), the values' part as heads (ONNX Runtime sizes the present cache by the values' head size
    where ``qkv_hidden_sizes`` makes it differ from the keys')."""
    heads = int_attrs(node).get("num_heads", 0)
    sizes = next((list(a.ints) for a in node.attribute if a.name == "qkv_hidden_sizes"), [])
    if heads <= 0 or not rw.input(node, 1) or (sizes and len(sizes) != 3):
        return None
    nodes: list[onnx.NodeProto] = []
    packed = _node("MatMul", [node.input[0], node.input[1]], nodes, rw)
    if sizes:
        ends = [sizes[0], sizes[0] + sizes[1], sum(sizes)]
        value = _node("Slice", [packed, rw.ints([ends[1]]), rw.ints([ends[2]]), rw.ints([2])], nodes, rw)
    else:
        thirds = _node("Reshape", [packed, rw.ints([0, 0, 3, -1])], nodes, rw)
        value = _node("Gather", [thirds, _index(rw, 2)], nodes, rw, axis=2)
    rw.same(value, rw.output(node, 0), nodes)
    if rw.output(node, 1):
        both = _node("Expand", [_heads_first(rw, value, heads, nodes), rw.ints([2, 1, 1, 1, 1])], nodes, rw)
        shared = bool(int_attrs(node).get("past_present_share_buffer", 0))
        _present(rw, rw.input(node, 4), both, 3, node.output[1], nodes, shared)
    return nodes


def _packed_heads(rw: Rewriter, packed: str, part: int, nodes: list[onnx.NodeProto]) -> str:
    """Part ``part`` (0 Q, 1 K, 2 V) of MultiHeadAttention's packed (B, L, N, 2 or 3, H) input, as
    (B, N, L, H)."""
    one = _node("Gather", [packed, _index(rw, part)], nodes, rw, axis=3)
    return _node("Transpose", [one], nodes, rw, perm=[0, 2, 1, 3])


def _mha_heads(rw: Rewriter, node: onnx.NodeProto, heads: int,
               nodes: list[onnx.NodeProto]) -> tuple[str, str, str]:
    """MultiHeadAttention's new Q, K and V as (B, N, length, H) values, in each form of its inputs: Q,
    K and V of (B, length, N * H) (K and V of unknown rank are taken so: self-attention's form),
    K and V already (B, N, L, H), K/V packed as key (B, L, N, 2, H), Q/K/V packed as query
    (B, S, N, 3, H)."""
    query, key, value = rw.input(node, 0), rw.input(node, 1), rw.input(node, 2)
    if not key:
        return _packed_heads(rw, query, 0, nodes), _packed_heads(rw, query, 1, nodes), \
            _packed_heads(rw, query, 2, nodes)
    q = _heads_first(rw, query, heads, nodes)
    if not value:
        return q, _packed_heads(rw, key, 0, nodes), _packed_heads(rw, key, 1, nodes)
    if rw.ranks.get(key, 3) == 4:
        return q, key, value
    return q, _heads_first(rw, key, heads, nodes), _heads_first(rw, value, heads, nodes)


def _multi_head_attention(rw: Rewriter, node: onnx.NodeProto) -> list[onnx.NodeProto] | None:
    """MultiHeadAttention's output (B, S, N * Hv) and present key/value (B, N, past + L, H): the new
    heads appended to the past ones, and the output as the attention of Q over them computes it."""
    heads = int_attrs(node).get("num_heads", 0)
    if heads <= 0:
        return None
    nodes: list[onnx.NodeProto] = []
    q, k, v = _mha_heads(rw, node, heads, nodes)
    keys, values = rw.output(node, 1) or rw.name("keys"), rw.output(node, 2) or rw.name("values")
    shared = bool(rw.input(node, 8))  # a past_sequence_length: past and present share a buffer
    _present(rw, rw.input(node, 6), k, 2, keys, nodes, shared)
    _present(rw, rw.input(node, 7), v, 2, values, nodes, shared)
    scores = _node("MatMul", [q, _node("Transpose", [keys], nodes, rw, perm=[0, 1, 3, 2])], nodes, rw)
    context = _node("MatMul", [scores, values], nodes, rw)
    heads_last = _node("Transpose", [context], nodes, rw, perm=[0, 2, 1, 3])
    if rw.output(node, 0):
        nodes.append(helper.make_node("Reshape", [heads_last, rw.ints([0, 0, -1])], [node.output[0]]))
    return nodes


def _gqa_heads(rw: Rewriter, node: onnx.NodeProto, heads: int, kv_heads: int,
               nodes: list[onnx.NodeProto]) -> list[str]:
    """Q, K and V of a GroupQueryAttention as (B, S, heads, H) values, from separate or packed inputs."""
    if rw.input(node, 1):
        return [_node("Reshape", [node.input[index], rw.ints([0, 0, count, -1])], nodes, rw)
                for index, count in ((0, heads), (1, kv_heads), (2, kv_heads))]
    four = _node("Reshape", [node.input[0], rw.ints([0, 0, heads + 2 * kv_heads, -1])], nodes, rw)
    return [_node("Slice", [four, rw.ints([start]), rw.ints([start + count]), rw.ints([2])], nodes, rw)
            for start, count in ((0, heads), (heads, kv_heads), (heads + kv_heads, kv_heads))]


def _group_query_attention(rw: Rewriter, node: onnx.NodeProto) -> list[onnx.NodeProto] | None:
    """GroupQueryAttention's output (B, S, num_heads * H), and its present caches as 4-D values of
    unknown length (the new K/V heads cut at a length no shape tells: the caches' length is
    max(total_sequence_length, past length), runtime values)."""
    attrs = int_attrs(node)
    heads, kv_heads = attrs.get("num_heads", 0), attrs.get("kv_num_heads", 0)
    if heads <= 0 or kv_heads <= 0 or not rw.input(node, 5):
        return None
    nodes: list[onnx.NodeProto] = []
    q, k, v = _gqa_heads(rw, node, heads, kv_heads, nodes)
    nodes.append(helper.make_node("Reshape", [q, rw.ints([0, 0, -1])], [node.output[0]]))
    wide = _node("Cast", [node.input[5]], nodes, rw, to=TensorProto.INT64)
    end = _node("ReduceMax", [wide], nodes, rw, keepdims=1)
    for new, out in ((k, 1), (v, 2)):
        if rw.output(node, out):
            heads_first = _node("Transpose", [new], nodes, rw, perm=[0, 2, 1, 3])
            nodes.append(helper.make_node("Slice", [heads_first, rw.ints([0]), end, rw.ints([2])],
                                          [node.output[out]]))
    return nodes


ATTENTION_TWINS: dict[str, Twin] = {
    "Attention": _attention,
    "MultiHeadAttention": _multi_head_attention,
    "GroupQueryAttention": _group_query_attention,
}
"""Twins of the ``com.microsoft`` attention ops, by op type."""
