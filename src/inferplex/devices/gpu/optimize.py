"""Rewrites applied while the GraphModule is built, and the weights shared between lowerings.

* Conv followed by BatchNormalization (inference) becomes one Conv with folded
  weights, ``W' = W * s`` and ``b' = (b - mean) * s + beta`` with
  ``s = gamma / sqrt(var + eps)``, computed in float64 and cast once to the
  weight's type, so f32 results stay within rounding of the unfused pair.  It
  applies when the Conv's output feeds only that BatchNormalization and every
  parameter is a constant.
* MatMul by a constant matrix followed by Add of a constant bias vector becomes
  one ``F.linear``, which runs as a single GEMM with the bias in its epilogue.
* ``channels_last``: 4-D Conv weights are stored NHWC and each 4-D Conv's input
  is brought to NHWC (a no-op when it already is, so only the first Conv of a
  chain copies); graph outputs are made contiguous again.  Values keep their
  logical shapes, and every reshape in the lowerings is ``reshape`` (which
  copies non-contiguous data), so results are the same, only the layout the
  convolution kernels see changes.

:class:`WeightCache` holds the device tensors of constants for every lowering
of one model, so a per-signature specialization reuses the generic lowering's
weights instead of uploading them again.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import onnx_ir as ir
import torch
import torch.nn.functional as F

if TYPE_CHECKING:
    from inferplex.devices.gpu.lower import Analysis

__all__ = ["Fusions", "WeightCache", "fold_conv_bn", "linear", "plan_fusions", "to_channels_last"]

_ONNX_DOMAINS = ("", "ai.onnx")
_FLOAT_KINDS = "f"


class WeightCache:
    """Device tensors of constants, shared by the generic and the per-signature lowerings of a model.

    Only values that are constant in the generic analysis are shared: those do
    not depend on input shapes.  Values that became constant through
    specialization (a ``Shape`` output, ...) differ per signature and are not.
    """

    def __init__(self) -> None:
        self.tensors: dict[Any, torch.Tensor] = {}
        self.stable: frozenset[ir.Value] | None = None
        self._lock = threading.Lock()

    def adopt(self, analysis: Analysis) -> None:
        """Take the generic analysis's constants as the shareable ones (first lowering only)."""
        if self.stable is None:
            self.stable = frozenset(analysis.constants)

    def get(self, key: Any, sources: Iterable[ir.Value | None],
            make: Callable[[], torch.Tensor]) -> torch.Tensor:
        if self.stable is None or not all(s is None or s in self.stable for s in sources):
            return make()
        with self._lock:
            tensor = self.tensors.get(key)
            if tensor is None:
                tensor = self.tensors[key] = make()
            return tensor


@dataclass
class Fusions:
    """What :func:`plan_fusions` found, by friendly name of the node that is emitted."""

    conv_bn: dict[str, ir.Node] = field(default_factory=dict)
    """Conv -> the BatchNormalization it absorbs."""
    linear: dict[str, tuple[ir.Node, int]] = field(default_factory=dict)
    """MatMul -> (the Add it absorbs, index of the bias among the Add's inputs)."""
    absorbed: set[ir.Node] = field(default_factory=set)
    """Nodes emitted as part of another: they are skipped."""
    channels_last_convs: set[str] = field(default_factory=set)
    """4-D Convs whose input is brought to NHWC."""
    channels_last_weights: set[ir.Value] = field(default_factory=set)
    """4-D Conv weights stored NHWC."""


def _sole_consumer(value: ir.Value | None) -> tuple[ir.Node, int] | None:
    if value is None or value.is_graph_output():
        return None
    uses = list(value.uses())
    return (uses[0].node, uses[0].idx) if len(uses) == 1 else None


def _is_float(array: np.ndarray | None) -> bool:
    return array is not None and (array.dtype.kind == _FLOAT_KINDS or array.dtype.name == "bfloat16")


def _constant(analysis: Analysis, value: ir.Value | None) -> np.ndarray | None:
    return None if value is None else analysis.constants.get(value)


def _runs(analysis: Analysis, names: dict[ir.Node, str], node: ir.Node) -> bool:
    name = names.get(node)
    return name is not None and name in analysis.functions and name not in analysis.folded


def _bn_after(analysis: Analysis, names: dict[ir.Node, str], conv: ir.Node) -> ir.Node | None:
    consumer = _sole_consumer(conv.outputs[0])
    if consumer is None or consumer[1] != 0:
        return None
    bn = consumer[0]
    if bn.op_type != "BatchNormalization" or bn.domain not in _ONNX_DOMAINS or not _runs(analysis, names, bn):
        return None
    params = [_constant(analysis, v) for v in bn.inputs[1:5]]
    weight = _constant(analysis, conv.inputs[1]) if len(conv.inputs) > 1 else None
    has_bias = len(conv.inputs) > 2 and conv.inputs[2] is not None
    bias = _constant(analysis, conv.inputs[2]) if has_bias else None
    if weight is None or len(params) != 4 or not all(_is_float(p) for p in params) or not _is_float(weight):
        return None
    if has_bias and not _is_float(bias):
        return None
    channels = weight.shape[0]
    return bn if all(p.size == channels for p in params) else None  # type: ignore[union-attr]


def _bias_add_after(analysis: Analysis, names: dict[ir.Node, str],
                    matmul: ir.Node) -> tuple[ir.Node, int] | None:
    weight = _constant(analysis, matmul.inputs[1])
    info = analysis.infos.get(names[matmul])
    rank = info.rank(0) if info is not None else None
    if weight is None or not _is_float(weight) or weight.ndim != 2 \
            or matmul.inputs[0] in analysis.constants or rank is None or rank < 2:
        return None
    consumer = _sole_consumer(matmul.outputs[0])
    if consumer is None:
        return None
    add, index = consumer
    if add.op_type != "Add" or add.domain not in _ONNX_DOMAINS or not _runs(analysis, names, add):
        return None
    bias_index = 1 - index
    bias = _constant(analysis, add.inputs[bias_index])
    if bias is None or not _is_float(bias) or bias.ndim != 1 or bias.shape[0] != weight.shape[1] \
            or bias.dtype != weight.dtype:
        return None
    return add, bias_index


def plan_fusions(analysis: Analysis, channels_last: bool) -> Fusions:
    """Find the rewrites of the module docstring in an analysis (which is not changed)."""
    names = {node: name for name, node in analysis.nodes}
    fusions = Fusions()
    for name, node in analysis.nodes:
        if node.domain not in _ONNX_DOMAINS or not _runs(analysis, names, node) or node in fusions.absorbed:
            continue
        if node.op_type == "Conv":
            info = analysis.infos[name]
            if channels_last and info.rank(0) == 4:
                fusions.channels_last_convs.add(name)
                weight = node.inputs[1]
                if weight is not None:  # a missing weight fails in the Conv itself
                    fusions.channels_last_weights.add(weight)
            bn = _bn_after(analysis, names, node)
            if bn is not None:
                fusions.conv_bn[name] = bn
                fusions.absorbed.add(bn)
        elif node.op_type == "MatMul":
            found = _bias_add_after(analysis, names, node)
            if found is not None:
                fusions.linear[name] = found
                fusions.absorbed.add(found[0])
    return fusions


def fold_conv_bn(weight: np.ndarray, bias: np.ndarray | None, bn: ir.Node,
                 params: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """(W', b') of a Conv absorbing ``bn`` (params: scale, B, mean, var), in float64, cast to W's type."""
    attribute = bn.attributes.get("epsilon")
    eps = float(attribute.value) if attribute is not None else 1e-5
    scale, beta, mean, var = (np.asarray(p, dtype=np.float64).reshape(-1) for p in params)
    factor = scale / np.sqrt(var + eps)
    folded_w = np.asarray(weight, dtype=np.float64) * factor.reshape((-1,) + (1,) * (weight.ndim - 1))
    base = np.zeros_like(factor) if bias is None else np.asarray(bias, dtype=np.float64).reshape(-1)
    folded_b = (base - mean) * factor + beta
    return folded_w.astype(weight.dtype), folded_b.astype(weight.dtype)


def linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """``x @ weight + bias`` as one GEMM with the bias in its epilogue (weight is ONNX's K x N)."""
    return F.linear(x, weight.t(), bias)


def to_channels_last(x: torch.Tensor) -> torch.Tensor:
    """``x`` in NHWC memory order (itself when it already is)."""
    return x.contiguous(memory_format=torch.channels_last)


def contiguous(x: Any) -> Any:
    """A graph output in plain row-major order, whatever layout the convolutions used."""
    return x.contiguous() if isinstance(x, torch.Tensor) else x
