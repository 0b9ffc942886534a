"""``ov.convert_model``: an ONNX model (path, bytes, proto, onnx-ir) or a PyTorch model as a Model,
inputs reshaped on request.

OpenVINO converts models of several frameworks; inferplex runs ONNX.  PyTorch models (a
``torch.nn.Module``, TorchScript, a ``torch.export.ExportedProgram``) are exported to ONNX in memory
(:mod:`inferplex.api.convert_torch`); other sources are refused with a pointer to ONNX export.
"""

from __future__ import annotations

import io
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx
import onnx_ir as ir
from onnx_ir.passes.common import RemoveUnusedNodesPass

from inferplex._model import Model
from inferplex._model_io import load_model
from inferplex.api.reshape import apply_input_types, parse_shape
from inferplex.api.shapes import Dimension, PartialShape, Shape
from inferplex.api.types import Type
from inferplex.errors import InputError, ModelError

__all__ = ["convert_model"]

_SHAPE_TEXT = re.compile(r"[\s\[\]\d,?.\-]+")
"""Text that may be a shape (``"1,3,?,?"``, ``"[1..8,3]"``) rather than an input's name."""


def convert_model(input_model: Any, *, input: Any = None, output: Any = None, example_input: Any = None,
                  extension: Any = None, verbose: bool = False, share_weights: bool = True,
                  **options: Any) -> Model:
    """Read an ONNX model (``.onnx`` path, bytes, file object, ``onnx.ModelProto``, ``onnx_ir.Model``)
    or convert a PyTorch one (``torch.nn.Module``, ``torch.jit.ScriptModule``/``ScriptFunction``,
    ``torch.export.ExportedProgram``).

    ``input`` gives input shapes and element types in OpenVINO's forms: for one input a
    name, a shape (``[1, 3, 224, 224]``, a ``PartialShape``, ``Shape``), a type (``Type.f32``,
    ``np.float32``) or a tuple of those (``("x", [1, 3, 224, 224], Type.f32)``); for several, a list
    of such entries (named, or unnamed in input order) or ``{name: shape | type | (shape, type)}``.
    A shape reshapes the input (``Model.reshape``); a type retypes it, and every op after it then
    computes in that type, as OpenVINO's does.  Inputs keep the model's order.

    A PyTorch model is traced on ``example_input`` (a tensor or numpy array, a tuple or list of them,
    or a dict of ``forward()`` argument names to them), or, without it, on data of ``input=``'s
    shapes and types; its inputs are named as ``forward()`` names its arguments and, where
    ``input=`` does not fix them, have every dimension dynamic.  ``example_input`` is not used
    for ONNX models, as in OpenVINO.

    ``output`` keeps only the named outputs of an ONNX model (a name or a list of names, each an
    output of the model; they keep the model's order); OpenVINO refuses it for PyTorch models and so
    does inferplex.  ``extension`` (OpenVINO frontend extensions) is refused unless None;
    ``verbose``, ``share_weights`` and ``dynamo=False`` are accepted.
    """
    del verbose, share_weights
    if options.get("dynamo") in (False, None):
        options.pop("dynamo", None)
    given = [key for key in options if options[key] is not None]
    if given:
        why = " (dynamo=True exports with torch.export: pass the torch.export.ExportedProgram " \
              "instead)" if "dynamo" in given else ""
        raise InputError(f"convert_model option {', '.join(given)} is not supported{why}; accepted: "
                         "input, output, example_input, extension=None, verbose, share_weights, dynamo=False")
    if extension is not None:
        raise InputError(f"convert_model extension={extension!r} is not supported: inferplex runs ONNX ops "
                         "and loads no OpenVINO frontend extensions; pass extension=None (export "
                         "custom ops to ONNX instead)")
    specs = _input_specs(input) if input is not None else None
    from inferplex.api.convert_torch import convert_torch, is_torch_source

    if is_torch_source(input_model):
        if output is not None:
            raise InputError(f"convert_model output={output!r} is not supported for PyTorch models "
                             "(OpenVINO refuses it too); return only the outputs you need from forward()")
        return convert_torch(input_model, example_input, specs)
    model = load_model(_source(input_model))
    if output is not None:
        _select_outputs(model, output)
    if specs is not None:
        _apply_inputs(model, specs)
    return model


def _select_outputs(model: Model, output: Any) -> None:
    """Keep the outputs ``output`` names (a name or a list of names), in the model's order."""
    wanted = [output] if isinstance(output, str) else output
    if not isinstance(wanted, (list, tuple)) or not wanted or \
            not all(isinstance(name, str) for name in wanted):
        raise InputError(f"convert_model output={output!r}: give an output's name or a list of names")
    graph = model.ir.graph
    names = [value.name for value in graph.outputs]
    unknown = [name for name in wanted if name not in names]
    if unknown:
        raise InputError(f"convert_model output= names {', '.join(map(repr, unknown))}, not an output of "
                         f"the model; its outputs are {', '.join(map(repr, names))}")
    for index in reversed(range(len(names))):
        if names[index] not in wanted:
            graph.outputs.pop(index)
    RemoveUnusedNodesPass()(model.ir)


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
                     f"onnx_ir.Model) and PyTorch models (torch.nn.Module, torch.jit.ScriptModule, "
                     f"torch.export.ExportedProgram), not a {type(source).__module__}."
                     f"{type(source).__name__}; export it to ONNX first")


@dataclass(frozen=True)
class _InputSpec:
    """What ``input=`` says of one input."""

    key: Any
    """Its name (or, in a dict, an index or port); None for an entry that counts inputs in order."""
    shape: Any = None
    """Its new shape as given (a list, PartialShape, ...); None to keep it."""
    element: Type | None = None
    """Its new element type; None to keep it."""


_FORMS = ("a name, a shape ([1, 3, 224, 224], PartialShape, Shape), a type (Type.f32, np.float32), a "
          "tuple of those such as ('x', [1, 3, 224, 224], Type.f32), a list of such entries, or "
          "{name: shape | type | (shape, type)}")


def _is_type(value: Any) -> bool:
    return isinstance(value, (Type, type, np.dtype)) and not _is_shape(value)


def _is_shape(value: Any) -> bool:
    if isinstance(value, (PartialShape, Shape)):
        return True
    return isinstance(value, (list, tuple)) and all(
        isinstance(dim, (int, np.integer, Dimension)) and not isinstance(dim, bool) for dim in value)


def _input_specs(given: Any) -> list[_InputSpec]:
    """The entries of ``input=``, read as OpenVINO's ``convert_model`` reads them."""
    if isinstance(given, Mapping):
        specs = []
        for key, value in given.items():
            spec = _single(value)
            if spec.key is not None and spec.key != key:
                raise InputError(f"input={{{key!r}: ...}} names input {spec.key!r} in its value; "
                                 "give each input's name once, as the key")
            specs.append(_InputSpec(key, spec.shape, spec.element))
        return specs
    if isinstance(given, (list, tuple)):
        if not given:
            return []
        if isinstance(given[0], (int, np.integer, Dimension)):  # one shape
            given = [given]
        if _one_input(given):
            return [_single(given)]
        return [_single(item) for item in given]
    return [_single(given)]


def _one_input(items: Sequence[Any]) -> bool:
    """Whether a list's items describe one input: at most one name, one type and one shape."""
    kinds = ["name" if isinstance(item, str) else "type" if _is_type(item) else
             "shape" if _is_shape(item) else "other" for item in items]
    return "other" not in kinds and len(set(kinds)) == len(kinds)


def _single(entry: Any) -> _InputSpec:
    """One input's entry: a name, a shape, a type, or a tuple of them."""
    if isinstance(entry, str):
        return _InputSpec(entry)
    if _is_type(entry):
        return _InputSpec(None, element=Type(entry))
    if not isinstance(entry, (list, tuple, PartialShape, Shape)):
        raise InputError(f"input entry {entry!r} ({type(entry).__name__}) is not understood; "
                         f"accepted: {_FORMS}")
    parts = [entry] if _is_shape(entry) else list(entry)
    found: dict[str, Any] = {}
    for part in parts:
        kind = "name" if isinstance(part, str) else "type" if _is_type(part) else \
            "shape" if _is_shape(part) or part is None else None
        if kind is None:
            raise InputError(f"input entry {entry!r}: {part!r} is not a name, a shape or a type; "
                             f"accepted: {_FORMS}")
        if kind in found:
            hint = " (a type is an ov.Type or a numpy type, not text)" if kind == "name" else ""
            raise InputError(f"input entry {entry!r} gives more than one {kind}{hint}; give one "
                             "name, one shape and one type per input")
        found[kind] = part
    element = found.get("type")
    return _InputSpec(found.get("name"), found.get("shape"), None if element is None else Type(element))


def _shape_text(spec: _InputSpec) -> _InputSpec:
    """An entry that is text alone and names no input, read as a shape (``"1,3,?,?"``), as
    ``Model.reshape`` reads text; OpenVINO reads text as a name only."""
    if spec.shape is not None or spec.element is not None or not _SHAPE_TEXT.fullmatch(spec.key):
        return spec  # an unknown name: model.input reports it with the model's input names
    parse_shape(spec.key)
    return _InputSpec(None, spec.key)


def _apply_inputs(model: Model, specs: list[_InputSpec]) -> None:
    """Retype, then reshape, the inputs ``specs`` name (or count, in order)."""
    names = {port.any_name for port in model.inputs}
    specs = [_shape_text(spec) if isinstance(spec.key, str) and spec.key not in names else spec
             for spec in specs]
    named = [spec.key is not None for spec in specs]
    if any(named) and not all(named):
        raise InputError("input= mixes named and unnamed entries; name every input, or none "
                         "(then the entries go to the inputs in order)")
    count = len(model.inputs)
    if not any(named) and len(specs) > count:
        raise InputError(f"input= gives {len(specs)} entries but the model has {count} input(s) "
                         f"({', '.join(p.any_name for p in model.inputs)})")
    indexes = [model.input(spec.key).index if spec.key is not None else position
               for position, spec in enumerate(specs)]
    types = {index: spec.element.data_type for index, spec in zip(indexes, specs, strict=True)
             if spec.element is not None}
    if any(element.is_dynamic() for spec in specs if (element := spec.element) is not None):
        raise InputError("input= gives Type.dynamic; give a static element type, or none")
    apply_input_types(model.ir, types)
    shapes = {index: spec.shape for index, spec in zip(indexes, specs, strict=True)
              if spec.shape is not None}
    if shapes:
        model.reshape(shapes)
