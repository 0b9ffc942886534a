"""Shape twins (see :mod:`inferplex.shape_inference`) of the fused transformer ops that
``onnxruntime.transformers.optimizer`` and Hugging Face Optimum write (domain ``com.microsoft``), and
of the two normalizations ONNX Runtime registers in the ONNX domain.

Output shapes and types, as ONNX Runtime's kernels give them:

- Gelu, BiasGelu, FastGelu, QuickGelu, BiasAdd, BiasSoftmax, RotaryEmbedding, Inverse: the first
  input's.
- SkipLayerNormalization, SkipSimplifiedLayerNormalization: the output and the optional
  input+skip(+bias) sum have the input's; the optional mean and inverse deviation are float32 of
  the input's dims with the last one 1.
- SimplifiedLayerNormalization (ONNX domain) and, before opset 17, LayerNormalization (ONNX
  Runtime's own): the output has the input's dims and the scale's type; the optional statistics
  are of ``stash_type`` (float32 by default) with the dims from ``axis`` on set to 1.
- EmbedLayerNormalization: the output and the optional embedding sum are (B, S, hidden) of the
  word embedding's type, the mask index (B,) int32.
- FusedMatMul, FusedGemm, FusedConv: the MatMul (after the ``transBatch``/``trans`` moves of each
  operand), Gemm or Conv they fuse.
"""

from __future__ import annotations

from typing import Any

import onnx
from onnx import TensorProto, helper

from inferplex.shape_inference._rewriter import FLOAT, Rewriter, Twin, int_attrs

__all__ = ["ONNX_DOMAIN_TWINS", "TRANSFORMER_TWINS"]


def _first_input(rw: Rewriter, node: onnx.NodeProto) -> list[onnx.NodeProto] | None:
    """Output 0 of input 0's type and shape."""
    nodes: list[onnx.NodeProto] = []
    rw.same(node.input[0], rw.output(node, 0), nodes)
    return nodes


def _skip_norm(rw: Rewriter, node: onnx.NodeProto) -> list[onnx.NodeProto] | None:
    nodes: list[onnx.NodeProto] = []
    rw.same(node.input[0], rw.output(node, 0), nodes)
    for index in (1, 2):
        rw.reduced(node.input[0], -1, rw.output(node, index), FLOAT, nodes)
    rw.same(node.input[0], rw.output(node, 3), nodes)
    return nodes


def _normalized(rw: Rewriter, node: onnx.NodeProto, statistics: tuple[int, ...]) -> list[onnx.NodeProto]:
    """The output (input dims, scale's type where the copy states it) and the ``statistics`` outputs
    (``stash_type`` elements, dims from ``axis`` on set to 1)."""
    attrs = int_attrs(node)
    nodes: list[onnx.NodeProto] = []
    scale_type = rw.type_of(rw.input(node, 1))
    if rw.output(node, 0):
        if scale_type:
            nodes.append(helper.make_node("Cast", [node.input[0]], [node.output[0]], to=scale_type))
        else:
            rw.same(node.input[0], node.output[0], nodes)
    for index in statistics:
        rw.reduced(node.input[0], attrs.get("axis", -1), rw.output(node, index),
                   attrs.get("stash_type", FLOAT), nodes)
    return nodes


def _simplified_layer_norm(rw: Rewriter, node: onnx.NodeProto) -> list[onnx.NodeProto] | None:
    return _normalized(rw, node, (1,))


def _old_layer_norm(rw: Rewriter, node: onnx.NodeProto) -> list[onnx.NodeProto] | None:
    """ONNX Runtime's LayerNormalization, before opset 17 made it ONNX's (whose inference then runs)."""
    return _normalized(rw, node, (1, 2)) if rw.opset < 17 else None


def _embed_layer_norm(rw: Rewriter, node: onnx.NodeProto) -> list[onnx.NodeProto] | None:
    """The word embeddings gathered at the ids: (B, S, hidden); the mask index (B,) int32."""
    if not rw.input(node, 2):
        return None
    nodes: list[onnx.NodeProto] = []
    words = rw.name("words")
    nodes.append(helper.make_node("Gather", [node.input[2], node.input[0]], [words], axis=0))
    rw.same(words, rw.output(node, 0), nodes)
    if rw.output(node, 1):
        rows = rw.reduce_max(node.input[0], [1], False, nodes)
        nodes.append(helper.make_node("Cast", [rows], [node.output[1]], to=TensorProto.INT32))
    rw.same(words, rw.output(node, 2), nodes)
    return nodes


_OPERAND_DIMS = {
    (False, False): None,
    (True, False): ((0, -2), (-1, None), (-2, -1)),
    (False, True): ((1, -1), (0, 1), (-1, None)),
    (True, True): ((1, -1), (-1, None), (0, 1)),
}
"""FusedMatMul's operand dims for (trans, transBatch), as slices of the operand's own: transBatch moves
dim 0 behind the batch dims, then trans swaps the last two (None: the operand as it is)."""


def _operand(rw: Rewriter, name: str, trans: bool, trans_batch: bool, nodes: list[onnx.NodeProto]) -> str:
    slices = _OPERAND_DIMS[trans, trans_batch]
    if slices is None:
        return name
    moved = rw.name("operand")
    rw.filled([rw.shape_dims(name, start, end, nodes) for start, end in slices], name, moved, nodes)
    return moved


def _fused_matmul(rw: Rewriter, node: onnx.NodeProto) -> list[onnx.NodeProto] | None:
    attrs = int_attrs(node)
    nodes: list[onnx.NodeProto] = []
    a = _operand(rw, node.input[0], bool(attrs.get("transA")), bool(attrs.get("transBatchA")), nodes)
    b = _operand(rw, node.input[1], bool(attrs.get("transB")), bool(attrs.get("transBatchB")), nodes)
    nodes.append(helper.make_node("MatMul", [a, b], [node.output[0]]))
    return nodes


def _fused_gemm(rw: Rewriter, node: onnx.NodeProto) -> list[onnx.NodeProto] | None:
    if not rw.input(node, 2) and rw.opset < 11:  # Gemm's C became optional at opset 11
        return None
    attrs: dict[str, Any] = {key: value for key, value in int_attrs(node).items()
                             if key in ("transA", "transB")}
    inputs = [name for name in node.input[:3] if name]
    return [helper.make_node("Gemm", inputs, [node.output[0]], **attrs)]


_CONV_ATTRIBUTES = ("auto_pad", "dilations", "group", "kernel_shape", "pads", "strides")


def _fused_conv(rw: Rewriter, node: onnx.NodeProto) -> list[onnx.NodeProto] | None:
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute if a.name in _CONV_ATTRIBUTES}
    inputs = [name for name in node.input[:3]]
    while inputs and not inputs[-1]:
        inputs.pop()
    return [helper.make_node("Conv", inputs, [node.output[0]], **attrs)]


def _one_output(twin: Twin) -> Twin:
    """``twin`` for nodes of one output (the ops' only form)."""
    return lambda rw, node: twin(rw, node) if len(node.output) == 1 and node.output[0] else None


TRANSFORMER_TWINS: dict[str, Twin] = {
    **{op: _one_output(_first_input) for op in ("Gelu", "BiasGelu", "FastGelu", "QuickGelu", "BiasAdd",
                                                 "BiasSoftmax", "RotaryEmbedding", "Inverse")},
    "SkipLayerNormalization": _skip_norm,
    "SkipSimplifiedLayerNormalization": _skip_norm,
    "EmbedLayerNormalization": _embed_layer_norm,
    "FusedMatMul": _one_output(_fused_matmul),
    "FusedGemm": _one_output(_fused_gemm),
    "FusedConv": _one_output(_fused_conv),
}
"""Twins of the fused ``com.microsoft`` transformer ops, by op type."""

ONNX_DOMAIN_TWINS: dict[str, Twin] = {
    "SimplifiedLayerNormalization": _simplified_layer_norm,
    "LayerNormalization": _old_layer_norm,
}
"""Twins of ONNX Runtime's ops in the ONNX domain that ONNX's inference does not know (at the model's
opset), by op type."""
