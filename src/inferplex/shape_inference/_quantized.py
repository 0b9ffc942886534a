"""Shape twins (see :mod:`inferplex.shape_inference`) of ONNX Runtime's quantized contrib ops.

A QLinear op's output has its zero point's type (else its data's) and the shape of the float op
it quantizes: ``QLinearAdd`` is ``Cast(Add(Cast(a), Cast(b)), T)``, ``QGemm`` a Gemm, and so on.
Channels-last ops (ONNX Runtime's layout optimizer writes them) are the float op between
Transposes where ``kernel_shape`` tells the rank; an op with no twin here keeps its unknown outputs.
Each of these ops has one output: a node that names more gets no twin.
"""

from __future__ import annotations

from collections.abc import Callable

import onnx
from onnx import TensorProto, helper

from inferplex.shape_inference._rewriter import FLOAT, Rewriter, Twin

__all__ = ["QUANTIZED_TWINS"]


def _qlinear_type(rw: Rewriter, node: onnx.NodeProto, zero: int, data: int) -> int | None:
    """A QLinear op's output type: its zero point's, else its data's."""
    return rw.type_of(rw.input(node, zero)) or rw.type_of(rw.input(node, data))


def _float_op(op_type: str, data: tuple[int, ...], zero: int, **attrs: object) -> Twin:
    """Twin ``Cast(op_type(Cast(data...)), T)`` for a QLinear op over its ``data`` inputs."""

    def twin(rw: Rewriter, node: onnx.NodeProto) -> list[onnx.NodeProto] | None:
        nodes: list[onnx.NodeProto] = []
        floats = [rw.as_float(rw.input(node, i), nodes) for i in data]
        result = rw.name(op_type)
        kept = {a.name: helper.get_attribute_value(a) for a in node.attribute if a.name in attrs}
        nodes.append(helper.make_node(op_type, floats, [result], **kept))
        return rw.finish(result, node.output[0], _qlinear_type(rw, node, zero, data[0]), nodes)

    return twin


def _same_shape(elem: Callable[[Rewriter, onnx.NodeProto], int | None]) -> Twin:
    """Twin ``Cast(x, T)``: an element-wise op of one data input."""

    def twin(rw: Rewriter, node: onnx.NodeProto) -> list[onnx.NodeProto] | None:
        return rw.finish(node.input[0], node.output[0], elem(rw, node), [])

    return twin


def _channels_last(twin: Twin, always: bool = False) -> Twin:
    """``twin`` of an op whose data is N x spatial x C (``always``, or where its ``channels_last``
    attribute says so): the float op between Transposes, where ``kernel_shape`` gives the rank
    (else no twin)."""

    def wrapped(rw: Rewriter, node: onnx.NodeProto) -> list[onnx.NodeProto] | None:
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


def _max_pool(rw: Rewriter, node: onnx.NodeProto) -> list[onnx.NodeProto] | None:
    """ONNX's MaxPool, which takes 8-bit data itself (opset 12 on): the output keeps the input's
    type, which the copy may not state yet."""
    kept = ("auto_pad", "ceil_mode", "dilations", "kernel_shape", "pads", "strides")
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute if a.name in kept}
    return [helper.make_node("MaxPool", [node.input[0]], [node.output[0]], **attrs)]


def _concat(rw: Rewriter, node: onnx.NodeProto) -> list[onnx.NodeProto] | None:
    nodes: list[onnx.NodeProto] = []
    floats = [rw.as_float(node.input[i], nodes) for i in range(2, len(node.input), 3)]
    axis = next((a.i for a in node.attribute if a.name == "axis"), 0)
    result = rw.name("concat")
    nodes.append(helper.make_node("Concat", floats, [result], axis=axis))
    return rw.finish(result, node.output[0], rw.type_of(node.input[1]), nodes)


def _where(rw: Rewriter, node: onnx.NodeProto) -> list[onnx.NodeProto] | None:
    nodes: list[onnx.NodeProto] = []
    x, y = rw.as_float(node.input[1], nodes), rw.as_float(node.input[4], nodes)
    result = rw.name("where")
    nodes.append(helper.make_node("Where", [node.input[0], x, y], [result]))
    return rw.finish(result, node.output[0], rw.type_of(node.input[8]), nodes)


def _qgemm(rw: Rewriter, node: onnx.NodeProto) -> list[onnx.NodeProto] | None:
    nodes: list[onnx.NodeProto] = []
    a, b = rw.as_float(node.input[0], nodes), rw.as_float(node.input[3], nodes)
    attrs = {x.name: x.i for x in node.attribute if x.name in ("transA", "transB")}
    result = rw.name("gemm")
    nodes.append(helper.make_node("Gemm", [a, b], [result], **attrs))
    zero = rw.input(node, 8)
    return rw.finish(result, node.output[0], rw.type_of(zero) if zero else FLOAT, nodes)


def _matmul(a: int, b: int, elem: Callable[[Rewriter, onnx.NodeProto], int | None]) -> Twin:
    def twin(rw: Rewriter, node: onnx.NodeProto) -> list[onnx.NodeProto] | None:
        nodes: list[onnx.NodeProto] = []
        floats = [rw.as_float(node.input[a], nodes), rw.as_float(node.input[b], nodes)]
        result = rw.name("matmul")
        nodes.append(helper.make_node("MatMul", floats, [result]))
        return rw.finish(result, node.output[0], elem(rw, node), nodes)

    return twin


def _matmul_nbits(rw: Rewriter, node: onnx.NodeProto) -> list[onnx.NodeProto] | None:
    """``A @ W`` with a K x N weight made by Expand (no data in the copy)."""
    attrs = {a.name: a.i for a in node.attribute}
    if "K" not in attrs or "N" not in attrs:
        return None
    shape, zero = rw.ints([attrs["K"], attrs["N"]]), rw.name("zero")
    rw.graph.initializer.append(helper.make_tensor(zero, FLOAT, [], [0.0]))
    nodes: list[onnx.NodeProto] = []
    a, weight, result = rw.as_float(node.input[0], nodes), rw.name("w"), rw.name("matmul")
    nodes += [helper.make_node("Expand", [zero, shape], [weight]),
              helper.make_node("MatMul", [a, weight], [result])]
    return rw.finish(result, node.output[0], rw.type_of(node.input[2]) or rw.type_of(node.input[0]), nodes)


def _one_output(twin: Twin) -> Twin:
    """``twin`` for nodes of one output (the ops' only form)."""
    return lambda rw, node: twin(rw, node) if len(node.output) == 1 else None


_TWINS: dict[str, Twin] = {
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
    "DynamicQuantizeMatMul": _matmul(0, 1, lambda rw, n: rw.type_of(n.input[0]) or FLOAT),
    "MatMulNBits": _matmul_nbits,
    "QuantizeLinear": _same_shape(lambda rw, n: rw.type_of(rw.input(n, 2)) or TensorProto.UINT8),
    "DequantizeLinear": _same_shape(lambda rw, n: rw.type_of(n.input[1])),
}

QUANTIZED_TWINS: dict[str, Twin] = {op: _one_output(twin) for op, twin in _TWINS.items()}
"""Twins of the quantized ``com.microsoft`` ops, by op type."""
