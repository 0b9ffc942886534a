"""The lowerings a GPU program is made from, and the optimised model of its cached form.

:func:`lower_with_form` lowers a model for :meth:`GpuPlugin._compile
<inferplex.devices.gpu.plugin.GpuPlugin._compile>`: the generic lowering, the specializer
that shares its weights (a lowering per input signature, see :mod:`.specialize`), and, for
a compile for the model cache, the optimised model its cached form stores
(:mod:`.cache_form`).  :func:`form_of` makes that form again for ``export_model`` of a
program compiled without one; :func:`with_folded` and :class:`FoldedBefore` make a program
loaded from the cache list the nodes its cold compile folded.  Kept apart from the plugin's
device facts and properties; torch is imported only when a function runs.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import onnx_ir as ir

    from inferplex.devices.gpu.lower import LoweredGraph
    from inferplex.devices.gpu.specialize import Specializer

__all__ = ["FoldedBefore", "form_of", "lower_generic", "lower_with_form", "with_folded"]

_log = logging.getLogger("inferplex")


def lower_generic(model: ir.Model, torch_device: Any, precision: str, channels_last: bool,
                  specialize: bool) -> tuple[Any, Any]:
    """The generic lowering, and the specializer sharing its weights (None when turned off)."""
    lowered, specializer, _ = lower_with_form(model, torch_device, precision, channels_last, specialize)
    return lowered, specializer


def lower_with_form(model: ir.Model, torch_device: Any, precision: str, channels_last: bool,
                    specialize: bool, keep_form: bool = False) -> tuple[Any, Any, ir.Model | None]:
    """:func:`lower_generic`, and with ``keep_form`` the optimised model of the cached form (None
    where it has none)."""
    from inferplex.devices.gpu.lower import analyze_model, lower_model
    from inferplex.devices.gpu.optimize import WeightCache
    from inferplex.devices.gpu.shapes import ShapeInference
    from inferplex.devices.gpu.specialize import Specializer

    inference, cache = ShapeInference(model), WeightCache()
    analysis = analyze_model(model, inference=inference)
    lowered = lower_model(model, torch_device, precision, analysis, cache, channels_last)
    specializer = (Specializer(model, torch_device, precision, cache, inference, channels_last)
                   if specialize else None)
    return lowered, specializer, _optimised(model, analysis, channels_last, cache) if keep_form else None


def _optimised(model: ir.Model, analysis: Any, channels_last: bool, cache: Any) -> ir.Model | None:
    """The cached form's optimised model; None (logged) for a model that has none."""
    from inferplex.devices.gpu.cache_form import NotCacheableError, optimised_model
    from inferplex.devices.gpu.optimize import plan_fusions

    try:
        return optimised_model(model, analysis, plan_fusions(analysis, channels_last), cache)
    except NotCacheableError as error:
        _log.info("inferplex: the GPU program is not cached: %s", error)
        return None


def form_of(model: ir.Model, precision: str, channels_last: bool) -> bytes | None:
    """A cached form made again from the model (export_model of a program compiled without one)."""
    from inferplex.devices.gpu.cache_form import pack
    from inferplex.devices.gpu.lower import analyze_model
    from inferplex.devices.gpu.optimize import WeightCache
    from inferplex.devices.gpu.settings import TORCH_SETTINGS

    with TORCH_SETTINGS.scope():
        analysis = analyze_model(model)
        optimised = _optimised(model, analysis, channels_last, WeightCache())
    if optimised is None:
        return None
    folded = [(name, node.op_type) for name, node in analysis.nodes if name in analysis.folded]
    inputs = [v.name or f"input_{i}" for i, v in enumerate(v for v in model.graph.inputs
                                                            if v not in analysis.constants)]
    outputs = [v.name or f"output_{i}" for i, v in enumerate(model.graph.outputs)]
    return pack(optimised, folded, inputs, outputs, None)


def with_folded(lowered: LoweredGraph, folded: tuple[tuple[str, str], ...]) -> LoweredGraph:
    """``lowered`` listing ``folded`` (the cold compile's folded nodes) before its own."""
    return dataclasses.replace(lowered, folded_nodes=tuple(dict.fromkeys((*folded, *lowered.folded_nodes))))


class FoldedBefore:
    """A specializer of a cached form's model: its lowerings list the cold compile's folded nodes too."""

    def __init__(self, specializer: Specializer, folded: tuple[tuple[str, str], ...]):
        self._specializer = specializer
        self._folded = folded

    def lower(self, input_names: Any, shapes: Any) -> LoweredGraph:
        return with_folded(self._specializer.lower(input_names, shapes), self._folded)
