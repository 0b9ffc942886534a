"""Shape inference through ONNX Runtime's quantized contrib ops (domain ``com.microsoft``).

ONNX's shape inference knows no contrib op: it leaves their outputs, and everything computed from
them, without a type or shape, so the GPU analysis could neither check the ops downstream nor
fold their shape arithmetic.  ONNX Runtime's ``symbolic_shape_infer`` knows only a few of them.
Here each contrib node of the weight-free model copy that :mod:`.shapes` infers is replaced by a
*shape twin*: standard ops with the same output names, element types and shapes (their values
mean nothing; the copy is never run), so one pass of ONNX's inference covers the whole graph.

A QLinear op's output has its zero point's type (else its data's) and the shape of the float op
it quantizes: ``QLinearAdd`` is ``Cast(Add(Cast(a), Cast(b)), T)``, ``QGemm`` a Gemm, and so on.
Channels-last ops (ONNX Runtime's layout optimizer writes them) are the float op between
Transposes where ``kernel_shape`` tells the rank; an op with no twin here keeps its unknown outputs.
"""

from __future__ import annotations

from collections.abc import Callable

import onnx
from onnx import TensorProto, helper

__all__ = ["replace_contrib_ops"]

_MS = "com.microsoft"
_F = TensorProto.FLOAT

_Twin = Callable[["_Rewriter", onnx.NodeProto], "list[onnx.NodeProto] | None"]


class _Rewriter:
    """Element types the copy states (initializers, inputs), and fresh names for twin values."""

    def __init__(self, graph: onnx.GraphProto) -> None:
        self.types: dict[str, int] = {t.name: t.data_type for t in graph.initializer}
        for info in [*graph.input, *graph.value_info]:
            if info.type.HasField("tensor_type") and info.type.tensor_type.elem_type:
                self.types.setdefault(info.name, info.type.tensor_type.elem_type)
        self.graph = graph
        self._count = 0

    def name(self, hint: str) -> str:
        self._count += 1
        return f"__contrib_shape_{self._count}_{hint}"

    def input(self, node: onnx.NodeProto, index: int) -> str:
        return node.input[index] if index < len(node.input) else ""

    def type_of(self, name: str) -> int | None:
        return self.types.get(name) if name else None

    def as_float(self, name: str, nodes: list[onnx.NodeProto]) -> str:
        out = self.name("f")
        nodes.append(helper.make_node("Cast", [name], [out], to=_F))
        return out

    def finish(self, value: str, out: str, elem: int | None,
               nodes: list[onnx.NodeProto]) -> list[onnx.NodeProto] | None:
        if elem is None:
            return None
        nodes.append(helper.make_node("Cast", [value], [out], to=elem))
        return nodes


def _qlinear_type(rw: _Rewriter, node: onnx.NodeProto, zero: int, data: int) -> int | None:
    """A QLinear op's output type: its zero point's, else its data's."""
    return rw.type_of(rw.input(node, zero)) or rw.type_of(rw.input(node, data))


def _float_op(op_type: str, data: tuple[int, ...], zero: int, **attrs: object) -> _Twin:
    """Twin ``Cast(op_type(Cast(data...)), T)`` for a QLinear op over its ``data`` inputs."""

    def twin(rw: _Rewriter, node: onnx.NodeProto) -> list[onnx.NodeProto] | None:
        nodes: list[onnx.NodeProto] = []
        floats = [rw.as_float(rw.input(node, i), nodes) for i in data]
        result = rw.name(op_type)
        kept = {a.name: helper.get_attribute_value(a) for a in node.attribute if a.name in attrs}
        nodes.append(helper.make_node(op_type, floats, [result], **kept))
        return rw.finish(result, node.output[0], _qlinear_type(rw, node, zero, data[0]), nodes)

    return twin


def _same_shape(elem: Callable[[_Rewriter, onnx.NodeProto], int | None]) -> _Twin:
    """Twin ``Cast(x, T)``: an element-wise op of one data input."""

    def twin(rw: _Rewriter, node: onnx.NodeProto) -> list[onnx.NodeProto] | None:
        return rw.finish(node.input[0], node.output[0], elem(rw, node), [])

    return twin


def _channels_last(twin: _Twin, always: bool = False) -> _Twin:
    """``twin`` of an op whose data is N x spatial x C (``always``, or where its ``channels_last``
    attribute says so): the float op between Transposes, where ``kernel_shape`` gives the rank
    (else no twin)."""

    def wrapped(rw: _Rewriter, node: onnx.NodeProto) -> list[onnx.NodeProto] | None:
        if not always and not any(a.name == "channels_last" and a.i for a in node.attribute):
            return twin(rw, node)
        kernel = next((list(a.ints) for a in node.attribute if a.name == "kernel_shape"), None)
        if not kernel:
            return None
        rank = len(kernel) + 2
        first, inner = rw.name("nchw"), onnx.NodeProto()
        inner.CopyFrom(node)
        inner.input[0], inner.output[0] = first, rw.name("nchw_out")
        nodes = twin(rw, inner)
        if nodes is None:
            return None
        to_first, to_last = [0, rank - 1, *range(1, rank - 1)], [0, *range(2, rank), 1]
        return [helper.make_node("Transpose", [node.input[0]], [first], perm=to_first), *nodes,
                helper.make_node("Transpose", [inner.output[0]], [node.output[0]], perm=to_last)]

    return wrapped


def _max_pool(rw: _Rewriter, node: onnx.NodeProto) -> list[onnx.NodeProto] | None:
    """ONNX's MaxPool, which takes 8-bit data itself (opset 12 on): the output keeps the input's
    type, which the copy may not state yet."""
    kept = ("auto_pad", "ceil_mode", "dilations", "kernel_shape", "pads", "strides")
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute if a.name in kept}
    return [helper.make_node("MaxPool", [node.input[0]], [node.output[0]], **attrs)]


def _concat(rw: _Rewriter, node: onnx.NodeProto) -> list[onnx.NodeProto] | None:
    nodes: list[onnx.NodeProto] = []
    floats = [rw.as_float(node.input[i], nodes) for i in range(2, len(node.input), 3)]
    axis = next((a.i for a in node.attribute if a.name == "axis"), 0)
    result = rw.name("concat")
    nodes.append(helper.make_node("Concat", floats, [result], axis=axis))
    return rw.finish(result, node.output[0], rw.type_of(node.input[1]), nodes)


def _where(rw: _Rewriter, node: onnx.NodeProto) -> list[onnx.NodeProto] | None:
    nodes: list[onnx.NodeProto] = []
    x, y = rw.as_float(node.input[1], nodes), rw.as_float(node.input[4], nodes)
    result = rw.name("where")
    nodes.append(helper.make_node("Where", [node.input[0], x, y], [result]))
    return rw.finish(result, node.output[0], rw.type_of(node.input[8]), nodes)


def _qgemm(rw: _Rewriter, node: onnx.NodeProto) -> list[onnx.NodeProto] | None:
    nodes: list[onnx.NodeProto] = []
    a, b = rw.as_float(node.input[0], nodes), rw.as_float(node.input[3], nodes)
    attrs = {x.name: x.i for x in node.attribute if x.name in ("transA", "transB")}
    result = rw.name("gemm")
    nodes.append(helper.make_node("Gemm", [a, b], [result], **attrs))
    zero = rw.input(node, 8)
    return rw.finish(result, node.output[0], rw.type_of(zero) if zero else _F, nodes)


def _matmul(a: int, b: int, elem: Callable[[_Rewriter, onnx.NodeProto], int | None]) -> _Twin:
    def twin(rw: _Rewriter, node: onnx.NodeProto) -> list[onnx.NodeProto] | None:
        nodes: list[onnx.NodeProto] = []
        floats = [rw.as_float(node.input[a], nodes), rw.as_float(node.input[b], nodes)]
        result = rw.name("matmul")
        nodes.append(helper.make_node("MatMul", floats, [result]))
        return rw.finish(result, node.output[0], elem(rw, node), nodes)

    return twin


def _matmul_nbits(rw: _Rewriter, node: onnx.NodeProto) -> list[onnx.NodeProto] | None:
    """``A @ W`` with a K x N weight made by Expand (no data in the copy)."""
    attrs = {a.name: a.i for a in node.attribute}
    if "K" not in attrs or "N" not in attrs:
        return None
    shape, zero = rw.name("kn"), rw.name("zero")
    rw.graph.initializer.extend([helper.make_tensor(shape, TensorProto.INT64, [2], [attrs["K"], attrs["N"]]),
                                 helper.make_tensor(zero, _F, [], [0.0])])
    nodes: list[onnx.NodeProto] = []
    a, weight, result = rw.as_float(node.input[0], nodes), rw.name("w"), rw.name("matmul")
    nodes += [helper.make_node("Expand", [zero, shape], [weight]),
              helper.make_node("MatMul", [a, weight], [result])]
    return rw.finish(result, node.output[0], rw.type_of(node.input[2]) or rw.type_of(node.input[0]), nodes)


def _ints(rw: _Rewriter, values: list[int]) -> str:
    """A new int64 initializer of ``values``."""
    name = rw.name("ints")
    rw.graph.initializer.append(helper.make_tensor(name, TensorProto.INT64, [len(values)], values))
    return name


def _heads(rw: _Rewriter, node: onnx.NodeProto, heads: int, kv_heads: int,
           nodes: list[onnx.NodeProto]) -> list[str]:
    """Q, K and V of a GroupQueryAttention as (B, S, heads, H) values, from separate or packed inputs."""
    if rw.input(node, 1):
        split = []
        for index, count in ((0, heads), (1, kv_heads), (2, kv_heads)):
            split.append(rw.name("heads"))
            nodes.append(helper.make_node("Reshape", [node.input[index], _ints(rw, [0, 0, count, -1])],
                                          [split[-1]]))
        return split
    four, split = rw.name("qkv"), []
    nodes.append(helper.make_node("Reshape", [node.input[0], _ints(rw, [0, 0, heads + 2 * kv_heads, -1])],
                                  [four]))
    for start, count in ((0, heads), (heads, kv_heads), (heads + kv_heads, kv_heads)):
        split.append(rw.name("heads"))
        nodes.append(helper.make_node("Slice", [four, _ints(rw, [start]), _ints(rw, [start + count]),
                                                _ints(rw, [2])], [split[-1]]))
    return split


def _group_query_attention(rw: _Rewriter, node: onnx.NodeProto) -> list[onnx.NodeProto] | None:
    """GroupQueryAttention's output (B, S, num_heads * H), and its present caches as 4-D values of
    unknown dims (the new K/V heads cut at a length no shape tells: the caches' length is
    max(total_sequence_length, past length), runtime values)."""
    attrs = {a.name: a.i for a in node.attribute if a.type == onnx.AttributeProto.INT}
    heads, kv_heads = attrs.get("num_heads", 0), attrs.get("kv_num_heads", 0)
    if heads <= 0 or kv_heads <= 0 or not rw.input(node, 5):
        return None
    nodes: list[onnx.NodeProto] = []
    q, k, v = _heads(rw, node, heads, kv_heads, nodes)
    nodes.append(helper.make_node("Reshape", [q, _ints(rw, [0, 0, -1])], [node.output[0]]))
    wide, end = rw.name("seqlens"), rw.name("end")
    nodes += [helper.make_node("Cast", [node.input[5]], [wide], to=TensorProto.INT64),
              helper.make_node("ReduceMax", [wide], [end], keepdims=1)]
    for new, out in ((k, 1), (v, 2)):
        if out >= len(node.output) or not node.output[out]:
            continue
        heads_first = rw.name("bnsh")
        nodes.append(helper.make_node("Transpose", [new], [heads_first], perm=[0, 2, 1, 3]))
        nodes.append(helper.make_node("Slice", [heads_first, _ints(rw, [0]), end, _ints(rw, [2])],
                                      [node.output[out]]))
    return nodes


_MULTI_OUTPUT_TWINS: dict[str, _Twin] = {"GroupQueryAttention": _group_query_attention}
"""Twins of ops with several outputs (each twin names every output it states)."""

_TWINS: dict[str, _Twin] = {
    "QLinearAdd": _float_op("Add", (0, 3), 7),
    "QLinearMul": _float_op("Mul", (0, 3), 7),
    "QLinearSigmoid": _same_shape(lambda rw, n: _qlinear_type(rw, n, 4, 0)),
    "QLinearLeakyRelu": _same_shape(lambda rw, n: _qlinear_type(rw, n, 4, 0)),
    "QLinearSoftmax": _same_shape(lambda rw, n: _qlinear_type(rw, n, 4, 0)),
    "QLinearConcat": _concat,
    "QLinearWhere": _where,
    "QLinearGlobalAveragePool": _channels_last(_float_op("GlobalAveragePool", (0,), 4)),
    "QLinearAveragePool": _channels_last(_float_op(
        "AveragePool", (0,), 4, auto_pad=1, ceil_mode=1, count_include_pad=1, kernel_shape=1, pads=1,
        strides=1)),
    "QLinearConv": _channels_last(_float_op(
        "Conv", (0, 3), 7, auto_pad=1, dilations=1, group=1, kernel_shape=1, pads=1, strides=1)),
    "NhwcMaxPool": _channels_last(_max_pool, always=True),
    "QGemm": _qgemm,
    "MatMulIntegerToFloat": _matmul(0, 1, lambda rw, n: rw.type_of(n.input[2])),
    "DynamicQuantizeMatMul": _matmul(0, 1, lambda rw, n: rw.type_of(n.input[0]) or _F),
    "MatMulNBits": _matmul_nbits,
    "QuantizeLinear": _same_shape(lambda rw, n: rw.type_of(rw.input(n, 2)) or TensorProto.UINT8),
    "DequantizeLinear": _same_shape(lambda rw, n: rw.type_of(n.input[1])),
}


def replace_contrib_ops(model: onnx.ModelProto) -> None:
    """Replace, in place, each contrib node of ``model``'s main graph that has a twin (see the
    module docstring); a model with none is left as it is."""
    graph = model.graph
    if not any(node.domain == _MS and (node.op_type in _TWINS or node.op_type in _MULTI_OUTPUT_TWINS)
               for node in graph.node):
        return
    rewriter = _Rewriter(graph)
    nodes: list[onnx.NodeProto] = []
    for node in graph.node:
        twin = _TWINS.get(node.op_type) if node.domain == _MS and len(node.output) == 1 else None
        if node.domain == _MS and twin is None:
            twin = _MULTI_OUTPUT_TWINS.get(node.op_type)
        replaced = twin(rewriter, node) if twin is not None else None
        nodes.extend(replaced if replaced is not None else [node])
    del graph.node[:]
    graph.node.extend(nodes)
