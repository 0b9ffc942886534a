"""``OUTPUT_PRECISION``: a compiled model's floating outputs in the model's types, or in the lowered one.

``MODEL`` (the default) keeps the types the model declares: with an
``INFERENCE_PRECISION_HINT`` of f16 or bf16 a device computes in that precision
and converts its f32 (and f64) outputs back, as OpenVINO does.  ``INFERENCE``
gives those outputs in the lowered precision instead: the compiled model's
``outputs[i].get_element_type()`` says f16 or bf16 and results come back in that
dtype.  It is what ``PrePostProcessor``'s ``output(i).tensor().set_element_type``
does for each such output, applied at compile: the GPU then hands its f16/bf16
results out as they are (no conversion to f32 runs), and a device that computes
in f32 converts its outputs to the lowered type, so that every device of a
MULTI, AUTO or HETERO compile gives the same output types.

The lowered precision is the INFERENCE_PRECISION_HINT the compile's devices run
under (a virtual device's own, or its members' from ``DEVICE_PROPERTIES`` or
``set_property``).  Where none is f16 or bf16, INFERENCE changes nothing (the
model's types are the inference precision's); members hinted at f16 and bf16
both have no one lowered type and are refused.

The key is taken by the engine for every device (``schema.ENGINE_PROPERTIES``):
the model the devices compile, and whose ports the compiled model shows, is the
converted one.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from inferplex.api.types import type_name
from inferplex.config import values
from inferplex.errors import PropertyError

if TYPE_CHECKING:
    from inferplex._model import Model

__all__ = ["KEY", "lowered_precision", "parse", "with_output_precision"]

KEY = "OUTPUT_PRECISION"

parse = values.choice("MODEL", "INFERENCE")
"""``MODEL`` or ``INFERENCE`` (any case)."""

_LOWERED = ("f16", "bf16")
_CONVERTED = ("f32", "f64")
"""Output types brought to the lowered precision: those a device computes at the hinted precision."""


def lowered_precision(setting: Any, hints: Iterable[tuple[str, Any]]) -> str | None:
    """The type floating outputs come back in: None for the model's own, else ``"f16"``/``"bf16"``.

    ``setting``: the parsed OUTPUT_PRECISION (None when not given).  ``hints``:
    ``(device, INFERENCE_PRECISION_HINT or None)`` for each device of the compile.
    """
    if setting != "INFERENCE":
        return None
    lowered: dict[str, list[str]] = {}
    for device, hint in hints:
        name = None if hint is None else type_name(hint).lower()
        if name in _LOWERED:
            lowered.setdefault(name, []).append(device)
    if len(lowered) > 1:
        described = "; ".join(f"{precision} on {', '.join(names)}" for precision, names in lowered.items())
        raise PropertyError(f"{KEY} INFERENCE needs one lowered precision for every device, but the devices "
                            f"are hinted at several ({described}); accepted: one INFERENCE_PRECISION_HINT "
                            f"(f16 or bf16) for all of them, or {KEY} MODEL")
    return next(iter(lowered), None)


def with_output_precision(model: Model, precision: str | None) -> Model:
    """``model`` with its f32/f64 outputs given in ``precision`` (a converted copy); ``model`` itself
    when ``precision`` is None or no output is f32/f64."""
    if precision is None:
        return model
    from inferplex.api.types import Type
    from inferplex.preprocess import PrePostProcessor

    indices = [i for i, port in enumerate(model.outputs) if port.element_type.get_type_name() in _CONVERTED]
    if not indices:
        return model
    converted = model.clone()  # PrePostProcessor changes the model it is given: not the caller's
    ppp = PrePostProcessor(converted)
    for index in indices:
        ppp.output(index).tensor().set_element_type(Type(precision))
    return ppp.build()
