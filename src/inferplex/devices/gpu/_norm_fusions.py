"""LayerNorm and RMSNorm written out as elementwise ops and reductions, found so that each runs
as one ``F.layer_norm`` or ``F.rms_norm`` call.

Models exported before opset 17 (LayerNormalization) or 23 (RMSNormalization), or that define
the norm themselves (Hugging Face's LLaMA, Qwen, Gemma, T5 ...), hold the formula:

* LayerNorm: ``ReduceMean(x)`` -> ``Sub(x, mean)`` -> ``Pow(d, 2)`` (or ``Mul(d, d)``) ->
  ``ReduceMean`` -> ``Add eps`` -> ``Sqrt`` -> ``Div(d, std)``, then an optional ``Mul`` by a
  weight and ``Add`` of a bias;
* RMSNorm: ``Pow(x, 2)`` -> ``ReduceMean`` -> ``Add eps`` -> ``Sqrt`` -> ``Div(1, s)`` (or
  ``Reciprocal``) -> ``Mul(x, r)``, then an optional ``Mul`` by a weight; a ``Cast`` of ``x`` to
  its own type before and after (what ``hidden.to(torch.float32)`` exports in a float32 model)
  joins the formula.

Both reduce over the last axis only (``keepdims`` 1), every intermediate is read by nothing
outside the formula, eps is one value and the weight and bias are constants of the last
dim's size.  The fused calls compute the same formula with float32 statistics (even for
f16/bf16 data), one kernel where the ops run eight to ten, so float32 results agree up to
rounding, as ONNX Runtime's own LayerNorm fusions (on by default) do.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import onnx_ir as ir
import torch
import torch.nn.functional as F

from inferplex.devices.gpu._graph import ONNX_DOMAINS, constant, runs, sole_consumer

if TYPE_CHECKING:
    from inferplex.devices.gpu.lower import Analysis

__all__ = ["Norm", "layer_norm", "norm_from", "rms_norm"]


@dataclass(frozen=True)
class Norm:
    """A LayerNorm or RMSNorm formula (``kind`` ``"layer"`` or ``"rms"``), emitted by its last node."""

    kind: str
    input: ir.Value
    output: ir.Value
    epsilon: float
    weight: ir.Value | None
    bias: ir.Value | None
    absorbed: tuple[ir.Node, ...]
    """Every node of the formula but the last."""


def layer_norm(x: torch.Tensor, weight: torch.Tensor | None, bias: torch.Tensor | None,
               epsilon: float) -> torch.Tensor:
    """The fused LayerNorm over the last axis."""
    return F.layer_norm(x, (x.shape[-1],), _like(weight, x), _like(bias, x), epsilon)


def rms_norm(x: torch.Tensor, weight: torch.Tensor | None, epsilon: float) -> torch.Tensor:
    """The fused RMSNorm over the last axis."""
    return F.rms_norm(x, (x.shape[-1],), _like(weight, x), epsilon)


def _like(parameter: torch.Tensor | None, x: torch.Tensor) -> torch.Tensor | None:
    return parameter if parameter is None or parameter.dtype == x.dtype else parameter.to(x.dtype)


class _Walk:
    """Steps of one formula: each found node is recorded; a step read outside the formula ends it."""

    def __init__(self, analysis: Analysis, names: dict[ir.Node, str]) -> None:
        self.analysis, self.names = analysis, names
        self.nodes: list[ir.Node] = []

    def op(self, node: ir.Node | None, op_type: str) -> bool:
        return node is not None and node.op_type == op_type and node.domain in ONNX_DOMAINS \
            and runs(self.analysis, self.names, node)

    def only_reader(self, node: ir.Node, op_type: str) -> tuple[ir.Node, int] | None:
        """The one reader of ``node``'s output, when it is ``op_type``."""
        use = sole_consumer(node.outputs[0])
        return use if use is not None and self.op(use[0], op_type) else None

    def scalar(self, value: ir.Value | None) -> float | None:
        array = constant(self.analysis, value)
        if array is None or array.size != 1 or array.dtype.kind != "f":
            return None
        return float(array.reshape(-1)[0])

    def last_axis_mean(self, node: ir.Node | None, reads: ir.Value) -> bool:
        """Whether ``node`` is a ReduceMean of ``reads`` over the last axis, dims kept."""
        if not self.op(node, "ReduceMean") or node is None or node.inputs[0] is not reads:
            return False
        info = self.analysis.infos[self.names[node]]
        rank = info.rank(0)
        if rank is None or int(info.attr("keepdims", 1)) != 1:
            return False
        axes = info.attr("axes") if info.opset < 18 else constant(self.analysis, node.inputs[1]) \
            if len(node.inputs) > 1 else None
        return axes is not None and [int(a) % rank for a in list(axes)] == [rank - 1]

    def same_type_cast(self, node: ir.Node | None) -> bool:
        if not self.op(node, "Cast") or node is None:
            return False
        info = self.analysis.infos[self.names[node]]
        return bool(info.input_dtypes) and info.input_dtypes[0] == ir.DataType(int(info.attr("to", 0)))

    def parameter(self, node: ir.Node, op_type: str, width: int | None) -> tuple[ir.Node, ir.Value] | None:
        """The ``op_type`` that alone reads ``node`` with a constant of ``width`` values as the other
        operand (a weight or bias over the last axis)."""
        use = self.only_reader(node, op_type)
        if use is None:
            return None
        other = use[0].inputs[1 - use[1]]
        array = constant(self.analysis, other)
        if array is None or array.dtype.kind != "f" or array.ndim != 1 or width is None \
                or array.shape[0] != width:
            return None
        return use[0], other  # type: ignore[return-value]


def norm_from(analysis: Analysis, names: dict[ir.Node, str], start: ir.Node) -> Norm | None:
    """The LayerNorm whose first ReduceMean is ``start``, or the RMSNorm whose square (Pow or Mul)
    is ``start``."""
    walk = _Walk(analysis, names)
    if start.op_type == "ReduceMean":
        return _layer_norm(walk, start)
    if start.op_type in ("Pow", "Mul"):
        return _rms_norm(walk, start)
    return None


def _variance_tail(walk: _Walk, square: ir.Node,
                   squared: ir.Value) -> tuple[list[ir.Node], ir.Node, float] | None:
    """``ReduceMean(square) -> Add eps -> Sqrt`` after ``square`` (which makes ``squared``):
    (those nodes, the Sqrt, eps)."""
    mean = walk.only_reader(square, "ReduceMean")
    if mean is None or not walk.last_axis_mean(mean[0], squared):
        return None
    add = walk.only_reader(mean[0], "Add")
    epsilon = None if add is None else walk.scalar(add[0].inputs[1 - add[1]])
    root = None if add is None else walk.only_reader(add[0], "Sqrt")
    if add is None or epsilon is None or root is None:
        return None
    return [mean[0], add[0]], root[0], epsilon


def _squares(walk: _Walk, node: ir.Node, base: ir.Value) -> bool:
    """Whether ``node`` is ``Pow(base, 2)`` or ``Mul(base, base)``."""
    if walk.op(node, "Pow"):
        return node.inputs[0] is base and walk.scalar(node.inputs[1]) == 2.0
    return walk.op(node, "Mul") and node.inputs[0] is base and node.inputs[1] is base


def _width(walk: _Walk, node: ir.Node) -> int | None:
    shapes = walk.analysis.infos[walk.names[node]].input_shapes
    last = shapes[0][-1] if shapes and shapes[0] else None
    return last if isinstance(last, int) else None


def _layer_norm(walk: _Walk, mean: ir.Node) -> Norm | None:
    x = mean.inputs[0]
    sub = walk.only_reader(mean, "Sub")
    if x is None or sub is None or sub[1] != 1 or sub[0].inputs[0] is not x \
            or not walk.last_axis_mean(mean, x):
        return None
    centered = sub[0].outputs[0]
    uses = [(use.node, use.idx) for use in centered.uses()] if not centered.is_graph_output() else []
    square = next((node for node, _ in uses if node.op_type in ("Pow", "Mul")), None)
    divide = next((node for node, idx in uses if node.op_type == "Div" and idx == 0), None)
    if square is None or divide is None or not _squares(walk, square, centered) \
            or len(uses) != (3 if square.op_type == "Mul" else 2):
        return None
    tail = _variance_tail(walk, square, square.outputs[0])
    if tail is None or not walk.op(divide, "Div") or divide.inputs[1] is not tail[1].outputs[0] \
            or sole_consumer(tail[1].outputs[0]) is None:
        return None
    nodes = [mean, sub[0], square, *tail[0], tail[1], divide]
    width = _width(walk, mean)
    scaled = walk.parameter(divide, "Mul", width)
    weight = bias = None
    if scaled is not None:
        nodes.append(scaled[0])
        weight = scaled[1]
        shifted = walk.parameter(scaled[0], "Add", width)
        if shifted is not None:
            nodes.append(shifted[0])
            bias = shifted[1]
    return Norm("layer", x, nodes[-1].outputs[0], tail[2], weight, bias, tuple(nodes[:-1]))


def _rms_norm(walk: _Walk, square: ir.Node) -> Norm | None:
    base = square.inputs[0]
    if base is None or not _squares(walk, square, base):
        return None
    tail = _variance_tail(walk, square, square.outputs[0])
    if tail is None:
        return None
    root = tail[1]
    inverse = walk.only_reader(root, "Div") or walk.only_reader(root, "Reciprocal")
    if inverse is None or (inverse[0].op_type == "Div"
                           and (inverse[1] != 1 or walk.scalar(inverse[0].inputs[0]) != 1.0)):
        return None
    product = walk.only_reader(inverse[0], "Mul")
    if product is None or product[0].inputs[1 - product[1]] is not base:
        return None
    nodes = [square, *tail[0], root, inverse[0], product[0]]
    cast_in, x = base.producer(), base
    formula_uses = (2 if square.op_type == "Mul" else 1) + 1  # a Cast only the formula reads joins it
    if cast_in is not None and walk.same_type_cast(cast_in) and cast_in.inputs[0] is not None \
            and not base.is_graph_output() and len(list(base.uses())) == formula_uses:
        nodes.insert(0, cast_in)
        x = cast_in.inputs[0]
    end = product[0]
    cast_out = walk.only_reader(end, "Cast")
    if cast_out is not None and walk.same_type_cast(cast_out[0]):
        nodes.append(cast_out[0])
        end = cast_out[0]
    scaled = walk.parameter(end, "Mul", _width(walk, square))
    weight = None
    if scaled is not None:
        nodes.append(scaled[0])
        weight = scaled[1]
    return Norm("rms", x, nodes[-1].outputs[0], tail[2], weight, None, tuple(nodes[:-1]))
