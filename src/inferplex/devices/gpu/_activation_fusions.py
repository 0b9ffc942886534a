"""GELU written out as elementwise ops, found so that it runs as one ``F.gelu`` call.

Exporters write GELU as the formula where the opset has no Gelu op (before 20) or the
model defines it itself (``torch.onnx.export`` of ``nn.GELU``, Hugging Face's BERT,
ViT, GPT-2 ...):

* the erf form, ``x * 0.5 * (1 + erf(x / sqrt(2)))``: ``Div(x, sqrt 2)`` (or
  ``Mul(x, 1 / sqrt 2)``) -> ``Erf`` -> ``Add 1`` -> ``Mul`` by ``x`` -> ``Mul 0.5``,
  or with ``Mul(x, 0.5)`` made first and multiplied in last;
* the tanh form, ``0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3)))``:
  ``Pow(x, 3)`` (or ``x * x * x``) -> ``Mul 0.044715`` -> ``Add x`` -> ``Mul sqrt(2 / pi)``
  -> ``Tanh`` -> ``Add 1`` -> the same two products.

Each step but the last must be read by nothing else, and every constant must be one
value that does not broadcast ``x`` up.  ``F.gelu`` computes the same formula in
float32 (``approximate="none"`` or ``"tanh"``), one pass over ``x`` where the ops run
five to nine, so results agree up to float32 rounding, as ONNX Runtime's own Gelu
fusion (on by default) does.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import onnx_ir as ir
import torch
import torch.nn.functional as F

from inferplex.devices.gpu._graph import ONNX_DOMAINS, constant, next_consumer, runs, sole_consumer

if TYPE_CHECKING:
    from inferplex.devices.gpu.lower import Analysis

__all__ = ["Gelu", "gelu", "gelu_from"]

_FLOATS = (ir.DataType.FLOAT, ir.DataType.FLOAT16, ir.DataType.BFLOAT16, ir.DataType.DOUBLE)
_RELATIVE = 1e-6
"""How near a constant must be to the formula's (float32 rounding of sqrt 2 and the like)."""


@dataclass(frozen=True)
class Gelu:
    """A GELU formula: its input, its output and the nodes it replaces (the last one emits it)."""

    input: ir.Value
    output: ir.Value
    approximate: str
    """``"none"`` (the erf form) or ``"tanh"``."""
    absorbed: tuple[ir.Node, ...]
    """Every node of the formula but the last."""


def gelu(x: torch.Tensor, approximate: str) -> torch.Tensor:
    """The fused call (``F.gelu``)."""
    return F.gelu(x, approximate=approximate)


def gelu_from(analysis: Analysis, names: dict[ir.Node, str], start: ir.Node) -> Gelu | None:
    """The GELU formula whose ``Erf`` or ``Tanh`` is ``start``, or None."""
    if start.op_type == "Erf":
        found = _erf_argument(analysis, names, start)
        approximate = "none"
    elif start.op_type == "Tanh":
        found = _tanh_argument(analysis, names, start)
        approximate = "tanh"
    else:
        return None
    if found is None:
        return None
    x, inner = found
    rank = analysis.infos[names[start]].rank(0)
    added = _step(analysis, names, start, "Add", 1.0, rank)
    if added is None:
        return None
    end = _products(analysis, names, x, added, rank)
    if end is None or not _float(analysis, names, end[-1]):
        return None
    nodes = (*inner, start, added, *end)
    return Gelu(x, end[-1].outputs[0], approximate, nodes[:-1])


def _erf_argument(analysis: Analysis, names: dict[ir.Node, str],
                  erf: ir.Node) -> tuple[ir.Value, tuple[ir.Node, ...]] | None:
    """(x, (the Div or Mul)) where the Erf reads ``x / sqrt 2`` and nothing else reads that."""
    scaled = _producer_reading_only(analysis, names, erf.inputs[0], erf)
    if scaled is None or scaled.op_type not in ("Div", "Mul"):
        return None
    rank = analysis.infos[names[erf]].rank(0)
    for index in (0, 1) if scaled.op_type == "Mul" else (0,):
        factor = _scalar(analysis, scaled.inputs[1 - index], rank)
        wanted = math.sqrt(2.0) if scaled.op_type == "Div" else math.sqrt(0.5)
        if factor is not None and _near(factor, wanted) and scaled.inputs[index] is not None:
            return scaled.inputs[index], (scaled,)  # type: ignore[return-value]
    return None


def _tanh_argument(analysis: Analysis, names: dict[ir.Node, str],
                   tanh: ir.Node) -> tuple[ir.Value, tuple[ir.Node, ...]] | None:
    """(x, the nodes) where the Tanh reads ``sqrt(2 / pi) * (x + 0.044715 * x^3)`` alone."""
    rank = analysis.infos[names[tanh]].rank(0)
    outer = _producer_reading_only(analysis, names, tanh.inputs[0], tanh)
    if outer is None:
        return None
    inner = _scaled(analysis, outer, math.sqrt(2.0 / math.pi), rank)
    total = None if inner is None else _producer_reading_only(analysis, names, inner, outer)
    if total is None or total.op_type != "Add":
        return None
    for index in (0, 1):
        x, other = total.inputs[index], total.inputs[1 - index]
        cubed_scaled = _producer_reading_only(analysis, names, other, total)
        cubed = None if cubed_scaled is None else _scaled(analysis, cubed_scaled, 0.044715, rank)
        cube = None if cubed is None or cubed_scaled is None \
            else _producer_reading_only(analysis, names, cubed, cubed_scaled)
        if x is None or cube is None or cubed_scaled is None:
            continue
        cube_nodes = _cube_of(analysis, names, cube, x)
        if cube_nodes is not None:
            return x, (*cube_nodes, cubed_scaled, total, outer)
    return None


def _cube_of(analysis: Analysis, names: dict[ir.Node, str], node: ir.Node,
             x: ir.Value) -> tuple[ir.Node, ...] | None:
    """The nodes that make ``x^3`` ending at ``node``: ``Pow(x, 3)``, or ``x * x * x`` in two Muls."""
    if node.op_type == "Pow" and node.inputs[0] is x:
        exponent = constant(analysis, node.inputs[1])
        three = exponent is not None and exponent.size == 1 and float(exponent.reshape(-1)[0]) == 3.0
        return (node,) if three else None
    if node.op_type != "Mul":
        return None
    for index in (0, 1):
        square = _producer_reading_only(analysis, names, node.inputs[index], node)
        if node.inputs[1 - index] is x and square is not None and square.op_type == "Mul" \
                and square.inputs[0] is x and square.inputs[1] is x:
            return square, node
    return None


def _products(analysis: Analysis, names: dict[ir.Node, str], x: ir.Value, added: ir.Node,
              rank: int | None) -> tuple[ir.Node, ...] | None:
    """The Muls that end the formula after ``1 + erf(...)``: ``(x * a) * 0.5`` or ``(x * 0.5) * a``."""
    step = next_consumer(analysis, names, added, ("Mul",))
    if step is None:
        return None
    product = step[0]
    other = product.inputs[1 - step[1]]
    if other is x:
        half = _step(analysis, names, product, "Mul", 0.5, rank)
        return None if half is None else (product, half)
    halved = None if other is None else other.producer()
    if halved is None or halved.op_type != "Mul" or halved.domain not in ONNX_DOMAINS \
            or sole_consumer(other) is None or not runs(analysis, names, halved):
        return None
    for index in (0, 1):
        factor = _scalar(analysis, halved.inputs[1 - index], rank)
        if halved.inputs[index] is x and factor == 0.5:
            return halved, product
    return None


def _step(analysis: Analysis, names: dict[ir.Node, str], node: ir.Node, op_type: str, value: float,
          rank: int | None) -> ir.Node | None:
    """The sole consumer of ``node`` when it is ``op_type`` with the constant ``value``."""
    step = next_consumer(analysis, names, node, (op_type,))
    if step is None:
        return None
    found = _scalar(analysis, step[0].inputs[1 - step[1]], rank)
    return step[0] if found == value else None


def _scaled(analysis: Analysis, node: ir.Node, factor: float, rank: int | None) -> ir.Value | None:
    """``v`` where ``node`` is ``Mul(v, factor)`` (either order), else None."""
    if node.op_type != "Mul":
        return None
    for index in (0, 1):
        found = _scalar(analysis, node.inputs[1 - index], rank)
        if found is not None and _near(found, factor):
            return node.inputs[index]
    return None


def _producer_reading_only(analysis: Analysis, names: dict[ir.Node, str], value: ir.Value | None,
                           reader: ir.Node) -> ir.Node | None:
    """The running ONNX-domain node that makes ``value``, which only ``reader`` reads."""
    node = None if value is None else value.producer()
    use = sole_consumer(value)
    if node is None or use is None or use[0] is not reader or node.domain not in ONNX_DOMAINS \
            or not runs(analysis, names, node):
        return None
    return node


def _scalar(analysis: Analysis, value: ir.Value | None, rank: int | None) -> float | None:
    """The one float value of a constant that does not broadcast a tensor of ``rank`` up."""
    array = constant(analysis, value)
    if array is None or array.size != 1 or array.dtype.kind != "f":
        return None
    if array.ndim and (rank is None or array.ndim > rank):
        return None
    return float(array.reshape(-1)[0])


def _near(value: float, wanted: float) -> bool:
    return abs(value - wanted) <= _RELATIVE * abs(wanted)


def _float(analysis: Analysis, names: dict[ir.Node, str], node: ir.Node) -> bool:
    dtypes: Any = analysis.infos[names[node]].output_dtypes
    return bool(dtypes) and dtypes[0] in _FLOATS
