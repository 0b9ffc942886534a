"""ONNX shape inference on a weight-free copy of a model, through ONNX Runtime's contrib ops.

``Model.reshape`` (:mod:`inferplex.api.reshape`), the runtime model's precisions, HETERO's and
PIPELINE_PARALLEL's placement (:mod:`inferplex.placement.graph`) and the GPU lowering
(:mod:`inferplex.devices.gpu.shapes`) all read every value's type and shape from ONNX's shape
inference, run on the one copy :func:`weightless_copy` builds: the large initializers become typed
graph inputs (never serialized: the weights are not copied), the small ones stay (inference reads
them: Reshape targets, axes).

ONNX's inference knows no ``com.microsoft`` op: it would leave their outputs, and everything computed
from them, without a type or shape (ONNX Runtime's ``symbolic_shape_infer`` knows only some).  So
each contrib node of the copy is replaced by a *shape twin*: standard ops with the same output
names, element types and shapes (their values mean nothing; the copy is never run), and one pass
of ONNX's inference covers the whole graph.  Twins exist for the quantized ops
(:mod:`._quantized`), the attention ops (:mod:`._attention`) and the fused transformer
ops, with the two normalizations ONNX Runtime registers in the ONNX domain
(:mod:`._transformer`), for the state ops ``ReadValue`` and ``Assign`` (:mod:`._state`), and for
the ``org.openvinotoolkit`` ops OpenVINO's ONNX reader takes (:mod:`._openvino`).
A node with no twin, or of a form its twin does not cover, stays: its
outputs keep unknown shapes, as before.  Nodes inside control-flow subgraphs are not replaced.

What ONNX's inference lets through that a model cannot run (a Conv's input channels that its
weight does not take, a window larger than its input) is found by :func:`find_conflicts`
(:mod:`._conflicts`), over the shapes inference wrote into the graph.
"""

from __future__ import annotations

import onnx
import onnx_ir as ir

from inferplex._serialize import weights_as_inputs
from inferplex.shape_inference._attention import ATTENTION_TWINS
from inferplex.shape_inference._conflicts import find_conflicts
from inferplex.shape_inference._openvino import OPENVINO_TWINS
from inferplex.shape_inference._quantized import QUANTIZED_TWINS
from inferplex.shape_inference._rewriter import MS, Rewriter, Twin
from inferplex.shape_inference._state import STATE_TWINS
from inferplex.shape_inference._transformer import ONNX_DOMAIN_TWINS, TRANSFORMER_TWINS

__all__ = ["WEIGHT_LIMIT_BYTES", "find_conflicts", "infer", "proto_dims", "replace_contrib_ops",
           "weightless_copy"]

WEIGHT_LIMIT_BYTES = 1024
"""Initializers up to this size stay in the copy (shape inference may read them: Reshape targets, axes)."""

_TWINS: dict[str, dict[str, Twin]] = {
    MS: {**QUANTIZED_TWINS, **ATTENTION_TWINS, **TRANSFORMER_TWINS},
    "": ONNX_DOMAIN_TWINS,
    "ai.onnx": ONNX_DOMAIN_TWINS,
    "ai.inferplex.state": STATE_TWINS,
    "org.openvinotoolkit": OPENVINO_TWINS,
}
"""Twins by domain, then op type."""


def weightless_copy(model: ir.Model) -> onnx.ModelProto:
    """``model`` as a proto whose large initializers are typed graph inputs and whose contrib ops are
    shape twins (see the module docstring); ``model`` is not changed."""
    proto, _ = weights_as_inputs(model, _large)
    replace_contrib_ops(proto)
    return proto


def infer(proto: onnx.ModelProto, strict: bool) -> onnx.ModelProto:
    """ONNX's shape inference with data propagation (symbolic shape arithmetic) over ``proto``.

    ``strict``: a node whose inputs do not fit raises ``onnx.shape_inference.InferenceError``
    (what a reshape must refuse); otherwise inference leaves what it cannot infer unknown.
    """
    return onnx.shape_inference.infer_shapes(proto, check_type=strict, strict_mode=strict, data_prop=True)


def proto_dims(shape: onnx.TensorShapeProto) -> tuple[int | str | None, ...]:
    """An inferred shape's dims: sizes, symbolic names, None where unknown."""
    return tuple(int(d.dim_value) if d.HasField("dim_value") else (d.dim_param or None) for d in shape.dim)


def replace_contrib_ops(proto: onnx.ModelProto) -> None:
    """Replace, in place, each node of ``proto``'s main graph that has a shape twin; a model with
    none is left as it is."""
    graph = proto.graph
    if not any(_twin_of(node) is not None for node in graph.node):
        return
    rewriter = Rewriter(proto)
    nodes: list[onnx.NodeProto] = []
    for node in graph.node:
        twin = _twin_of(node)
        replaced = twin(rewriter, node) if twin is not None else None
        nodes.extend(replaced if replaced is not None else [node])
    del graph.node[:]
    graph.node.extend(nodes)
    proto.ir_version = max(proto.ir_version, 4)  # the twins' constants are initializers, not inputs


def _twin_of(node: onnx.NodeProto) -> Twin | None:
    return _TWINS.get(node.domain, {}).get(node.op_type)


def _large(value: ir.Value) -> bool:
    tensor = value.const_value
    return tensor is not None and tensor.nbytes > WEIGHT_LIMIT_BYTES
