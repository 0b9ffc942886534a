"""Lowerings of a model specialized to one input signature.

A model exported with dynamic dims (a ``batch`` axis) computes its shape
arithmetic at run time (``Shape -> Gather -> Unsqueeze -> Concat -> Reshape``):
those ops read device values on the host, so the generic lowering runs eagerly,
outside CUDA graphs, as hundreds of small launches.  For one input signature
all of that is constant: :class:`Specializer` re-analyses the same model with
the graph inputs' dims fixed (shape inference on the model's weight-free copy,
then constant folding), so ``Shape``/``Size`` and everything computed from them
fold away, and lowers it again.  The model itself is never changed, and the
weights come from the generic lowering's :class:`WeightCache`: a specialization
costs only the constants that became new (folded shape values, masks).

A specialized lowering is exact for exactly the input shapes it was made for;
the program keys it by those shapes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import onnx_ir as ir

from inferplex.devices.gpu.lower import LoweredGraph, analyze_model, lower_model
from inferplex.devices.gpu.optimize import WeightCache
from inferplex.devices.gpu.shapes import ShapeInference

__all__ = ["Specializer"]


class Specializer:
    """Lowers ``model`` for given input shapes, sharing weights with the generic lowering."""

    def __init__(self, model: ir.Model, device: Any, precision: str, cache: WeightCache,
                 inference: ShapeInference, channels_last: bool = False):
        self._model = model
        self._device = device
        self._precision = precision
        self._cache = cache
        self._inference = inference
        self._channels_last = channels_last

    @staticmethod
    def worthwhile(generic: LoweredGraph) -> bool:
        """Whether specializing can help: the generic lowering is eager and some input dim is dynamic
        (never with sequence or optional inputs, whose signature holds no dims to fix)."""
        if generic.capturable or generic.input_kinds:
            return False
        return any(shape is None or not all(isinstance(d, int) for d in shape)
                   for shape in generic.input_shapes)

    def lower(self, input_names: Sequence[str], shapes: Sequence[Sequence[int]]) -> LoweredGraph:
        """The model lowered for inputs of exactly these shapes (names in the generic lowering's order)."""
        fixed = {name: tuple(int(d) for d in shape)
                 for name, shape in zip(input_names, shapes, strict=True)}
        analysis = analyze_model(self._model, fixed, self._inference)
        return lower_model(self._model, self._device, self._precision, analysis, self._cache,
                           self._channels_last)
