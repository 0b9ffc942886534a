"""``ov.convert_model``: an ONNX model (path, bytes, proto, onnx-ir) as a Model, inputs reshaped on request.

OpenVINO converts models of several frameworks; inferplex runs ONNX, so other
sources are refused with a pointer to ``torch.onnx.export``.
"""

from __future__ import annotations

import io
import os
from collections.abc import Mapping, Sequence
from typing import Any

import onnx
import onnx_ir as ir

from inferplex._model import Model
from inferplex._model_io import load_model
from inferplex.errors import InputError, ModelError

__all__ = ["convert_model"]

_REFUSED = ("output", "example_input", "extension")


def convert_model(input_model: Any, *, input: Any = None, verbose: bool = False,
                  share_weights: bool = True, **options: Any) -> Model:
    """Read an ONNX model (``.onnx`` path, bytes, file object, ``onnx.ModelProto``, ``onnx_ir.Model``).

    ``input`` sets input shapes as OpenVINO's does: one shape (one-input models),
    ``{name: shape}``, or a list of shapes or ``(name, shape)`` pairs in input order.
    ``verbose`` and ``share_weights`` are accepted; ``output``, ``example_input``
    and ``extension`` are refused (they cut or trace models, which ONNX export does).
    """
    del verbose, share_weights
    given = [key for key in options if options[key] is not None]
    if given:
        known = [key for key in given if key in _REFUSED]
        why = " (it cuts or traces a model; do that when exporting to ONNX)" if known else ""
        raise InputError(f"convert_model option {', '.join(given)} is not supported{why}; "
                         "accepted: input, verbose, share_weights")
    model = load_model(_source(input_model))
    if input is not None:
        model.reshape(_input_shapes(model, input))
    return model


def _source(source: Any) -> Any:
    if isinstance(source, (str, os.PathLike, bytes, bytearray, onnx.ModelProto, ir.Model, Model)):
        if isinstance(source, (str, os.PathLike)) and not str(source).lower().endswith(".onnx") and \
                os.path.isdir(source):
            raise ModelError(f"{str(source)!r} is a folder; convert_model reads ONNX files "
                             "(export SavedModels and checkpoints to ONNX first)")
        return source
    if isinstance(source, io.IOBase) or callable(getattr(source, "read", None)):
        return source.read()
    raise ModelError(f"convert_model reads ONNX models (a path, bytes, a file object, onnx.ModelProto, "
                     f"onnx_ir.Model), not a {type(source).__module__}.{type(source).__name__}; "
                     "export it to ONNX first (e.g. torch.onnx.export)")


def _input_shapes(model: Model, given: Any) -> Mapping[Any, Any]:
    """``{name | index: shape}`` from the forms of ``input``; a list of non-scalars is one shape per input."""
    if isinstance(given, Mapping):
        return given
    if isinstance(given, Sequence) and not isinstance(given, str) and given and all(
            isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], str) for item in given):
        return dict(given)  # [("x", [1, 3]), ...]
    if isinstance(given, Sequence) and not isinstance(given, str) and given and all(
            not isinstance(item, (int, str)) and item is not None for item in given):
        return dict(enumerate(given))  # one shape per input, in order
    return {0: given}
