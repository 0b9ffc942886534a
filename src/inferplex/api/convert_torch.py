"""``ov.convert_model`` for PyTorch sources: a ``torch.nn.Module``, a TorchScript module or function,
or a ``torch.export.ExportedProgram``, exported to ONNX in memory and read as any ONNX model.

The export is torch's TorchScript-based ONNX exporter (``torch.onnx.export(..., dynamo=False)``,
opset 17), which traces the module on its example input.  The converted model follows OpenVINO's
PyTorch frontend where it can:

- inputs are the tensors of ``example_input`` (a tensor, a tuple or list of them, or a dict of
  ``forward()`` argument names; numpy arrays are taken too; nested tuples are flattened), named as
  ``forward()`` names its arguments (a dict's keys, in ``forward()``'s order);
- with no ``input=`` every dimension is dynamic and the input has the example's rank and element
  type; an input read directly by a convolution takes the convolution's channel count
  (``[?,3,?,?]``), as OpenVINO's shape inference fills it in;
- ``input=`` sets shapes (static, dynamic, bounded) and element types, by name or in order; without
  ``example_input`` its shapes and types are enough: inferplex makes example data of them (a dynamic
  dimension traces at size 2, or its lower bound);
- an ``ExportedProgram`` is traced on its own example inputs unless ``example_input`` is given;
- a module returning a dict names its outputs by the dict's keys.

Tracing keeps what it cannot follow at the example's values: Python control flow, and sizes a
module turns into Python numbers (``nn.MultiheadAttention`` does so with the sequence length, so
its converted model runs at the example's length only).  Such a dimension still shows dynamic;
``input=`` can fix it.

torch is imported only when a torch object is converted.
"""

from __future__ import annotations

import inspect
import io
import sys
import warnings
from collections.abc import Mapping
from typing import Any

import numpy as np
import onnx

from inferplex._model import Model
from inferplex._model_io import load_model
from inferplex.api.convert import _apply_inputs, _InputSpec, _shape_text
from inferplex.api.shapes import PartialShape
from inferplex.errors import InputError, ModelError

__all__ = ["convert_torch", "is_torch_source", "onnx_export"]

OPSET = 17
_DYNAMIC_SIZE = 2
"""The size a dynamic dimension traces at when inferplex makes the example data (1 would let the
tracer treat it as broadcast)."""


def is_torch_source(source: Any) -> bool:
    """Whether ``source`` is a torch module, TorchScript function or ExportedProgram."""
    torch = sys.modules.get("torch")
    if torch is None:  # no torch object exists before torch is imported
        return False
    kinds = (torch.nn.Module, torch.jit.ScriptFunction, torch.export.ExportedProgram)
    return isinstance(source, kinds)


def convert_torch(source: Any, example_input: Any, specs: list[_InputSpec] | None) -> Model:
    """Export ``source`` to ONNX on ``example_input`` (or data made from ``specs``) and read it."""
    import torch

    exported = isinstance(source, torch.export.ExportedProgram)
    specs = [_shape_text(spec) if isinstance(spec.key, str) else spec for spec in specs or []]
    module = source.module() if exported else source
    params = _parameter_names(source)
    if example_input is None and specs:
        args, kwargs = _made_example(torch, params, specs)
    elif example_input is None and exported:
        args, kwargs = source.example_inputs
    elif example_input is None:
        raise InputError(f"convert_model needs example_input to convert a {type(source).__name__} "
                         "(a tensor, a tuple or list of tensors, or a dict of forward() argument "
                         "names to tensors), or input= with every input's shape, such as "
                         "input=[1, 3, 224, 224]")
    else:
        args, kwargs = _example(torch, example_input, params)
    names, tensors, rebuild = _flatten(torch, args, kwargs, params)
    indexes = _spec_indexes(specs, names)
    for i, spec in zip(indexes, specs, strict=True):
        if spec.element is not None:  # traced in the type asked for
            tensors[i] = tensors[i].to(torch.from_numpy(np.zeros(0, spec.element.to_dtype())).dtype)
    given_shapes = {i: spec.shape for i, spec in zip(indexes, specs, strict=True) if spec.shape is not None}
    dynamic = _dynamic_axes(names, tensors, given_shapes)
    if isinstance(source, (torch.jit.ScriptModule, torch.jit.ScriptFunction)):
        args, kwargs = rebuild(tuple(tensors))  # TorchScript takes its arguments in order
        proto = _export(torch, source, names, _positional(args, kwargs, params), dynamic, exported)
    else:
        proto = _export(torch, _wrap(module, rebuild), names, tuple(tensors), dynamic, exported)
    _fill_conv_channels(proto, [name for i, name in enumerate(names) if i not in given_shapes])
    model = load_model(proto)
    if given_shapes:
        _apply_inputs(model, [_InputSpec(names[i], shape) for i, shape in given_shapes.items()])
    return model


def _parameter_names(source: Any) -> list[str]:
    """``forward()``'s argument names, ``self`` left out."""
    import torch

    if isinstance(source, torch.export.ExportedProgram):
        return list(source.graph_signature.user_inputs)
    forward = source if isinstance(source, torch.jit.ScriptFunction) else source.forward
    schema = getattr(forward, "schema", None)
    if schema is not None:  # TorchScript: names from its schema, the first of a method being self
        arguments = [argument.name for argument in schema.arguments]
        return arguments if isinstance(source, torch.jit.ScriptFunction) else arguments[1:]
    try:
        signature = inspect.signature(forward)
    except (TypeError, ValueError):
        return []
    return [p.name for p in signature.parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]


def _tensor(torch: Any, value: Any) -> Any:
    """A torch tensor for an example leaf given as a numpy array (or anything numpy reads)."""
    if isinstance(value, torch.Tensor) or value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, np.ndarray) or hasattr(value, "__array__"):
        return torch.from_numpy(np.array(value))
    return value


def _example(torch: Any, example: Any, params: list[str]) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """``example_input`` as ``forward()``'s positional and keyword arguments."""
    from torch.utils._pytree import tree_map

    if isinstance(example, Mapping):
        if not all(isinstance(key, str) for key in example):
            raise InputError("example_input as a dict maps forward() argument names (text) to tensors, "
                             f"not {[type(key).__name__ for key in example]}")
        order = {name: position for position, name in enumerate(params)}
        keys = sorted(example, key=lambda key: order.get(key, len(order)))
        return (), {key: tree_map(lambda leaf: _tensor(torch, leaf), example[key]) for key in keys}
    args = tuple(example) if isinstance(example, (list, tuple)) else (example,)
    return tuple(tree_map(lambda leaf: _tensor(torch, leaf), arg) for arg in args), {}


def _made_example(torch: Any, params: list[str], specs: list[_InputSpec]
                  ) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """Example data of ``input=``'s shapes and types (float32 where it gives none)."""
    tensors = []
    for spec in specs:
        shape = PartialShape(spec.shape) if spec.shape is not None else None
        if shape is None or shape.rank.is_dynamic:
            raise InputError(f"input= entry {spec.key if spec.key is not None else spec.shape!r} gives no "
                             "shape of known rank; without example_input convert_model makes example "
                             "data from input= shapes, so give every input's shape, or give example_input")
        sizes = [dim.get_length() if dim.is_static else
                 min(max(dim.get_min_length(), _DYNAMIC_SIZE), dim.get_max_length())
                 if dim.get_max_length() >= 0 else max(dim.get_min_length(), _DYNAMIC_SIZE)
                 for dim in shape]
        dtype = spec.element.to_dtype() if spec.element is not None else np.dtype(np.float32)
        data = np.ones(sizes, dtype) if dtype.kind == "f" else np.zeros(sizes, dtype)
        tensors.append(torch.from_numpy(data))
    keys = [spec.key for spec in specs]
    if all(isinstance(key, str) for key in keys):
        order = {name: position for position, name in enumerate(params)}
        pairs = sorted(zip(keys, tensors, strict=True), key=lambda pair: order.get(pair[0], len(order)))
        return (), dict(pairs)
    if any(key is not None for key in keys):
        raise InputError("input= without example_input: name every input, or none (then the entries "
                         "go to forward()'s arguments in order)")
    return tuple(tensors), {}


def _flatten(torch: Any, args: tuple[Any, ...], kwargs: dict[str, Any], params: list[str]
             ) -> tuple[list[str], list[Any], Any]:
    """The example's tensors in order, their input names, and a function that rebuilds
    ``(args, kwargs)`` from tensors in that order (other leaves are kept as they are)."""
    from torch.utils._pytree import tree_flatten, tree_unflatten

    names: list[str] = []
    entries = [(params[i] if i < len(params) else f"input_{i}", arg) for i, arg in enumerate(args)]
    for name, value in [*entries, *kwargs.items()]:
        leaves = tree_flatten(value)[0]
        count = sum(isinstance(leaf, torch.Tensor) for leaf in leaves)
        names.extend([name] if count == 1 and isinstance(value, torch.Tensor) else
                     [f"{name}.{k}" for k in range(count)])
    leaves, spec = tree_flatten((args, kwargs))
    slots = [i for i, leaf in enumerate(leaves) if isinstance(leaf, torch.Tensor)]

    def rebuild(tensors: tuple[Any, ...]) -> tuple[tuple[Any, ...], dict[str, Any]]:
        filled = list(leaves)
        for slot, tensor in zip(slots, tensors, strict=True):
            filled[slot] = tensor
        return tree_unflatten(filled, spec)

    return names, [leaves[i] for i in slots], rebuild


def _spec_indexes(specs: list[_InputSpec], names: list[str]) -> list[int]:
    """The input index each ``input=`` entry gives shape or type to."""
    named = [spec.key is not None for spec in specs]
    if any(named) and not all(named):
        raise InputError("input= mixes named and unnamed entries; name every input, or none "
                         "(then the entries go to the inputs in order)")
    if not any(named):
        if len(specs) > len(names):
            raise InputError(f"input= gives {len(specs)} entries but the model has {len(names)} "
                             f"input(s) ({', '.join(names)})")
        return list(range(len(specs)))
    indexes = []
    for spec in specs:
        key = spec.key
        if isinstance(key, int) and 0 <= key < len(names):
            indexes.append(key)
        elif key in names:
            indexes.append(names.index(key))
        else:
            raise InputError(f"input= names {key!r}, which is not an input of the model; its inputs "
                             f"are {', '.join(names)} (forward()'s argument names)")
    return indexes


def _dynamic_axes(names: list[str], tensors: list[Any], shapes: dict[int, Any]) -> dict[str, dict[int, str]]:
    """The dimensions to export dynamic: those ``input=`` gives dynamic (or other than the
    example's), and every one of an input it gives no shape."""
    axes: dict[str, dict[int, str]] = {}
    for i, (name, tensor) in enumerate(zip(names, tensors, strict=True)):
        if i in shapes:
            shape = PartialShape(shapes[i])
            if shape.rank.is_static and shape.rank.get_length() != tensor.dim():
                raise InputError(f"input= gives input {name!r} shape {shape} but example_input gives "
                                 f"it rank {tensor.dim()} ({list(tensor.shape)})")
            dims = [d for d, dim in enumerate(shape) if not dim.is_static or
                    dim.get_length() != tensor.shape[d]] if shape.rank.is_static else range(tensor.dim())
        else:
            dims = range(tensor.dim())
        if dims:
            axes[name] = {d: f"{name}_dim{d}" for d in dims}
    return axes


def _positional(args: tuple[Any, ...], kwargs: dict[str, Any], params: list[str]) -> tuple[Any, ...]:
    """Keyword arguments as positional ones, for TorchScript (they must fill ``forward()``'s first ones)."""
    ordered = [*args, *kwargs.values()]
    if kwargs and list(kwargs) != params[len(args):len(ordered)]:
        raise InputError(f"example_input gives a TorchScript module arguments {', '.join(kwargs)}; it takes "
                         f"them in order ({', '.join(params)}): give the first ones, or a tuple")
    return tuple(ordered)


def _wrapper_class() -> Any:
    import torch

    class Wrapper(torch.nn.Module):
        """Calls the module with the example's tensors given flat, as the exporter passes them."""

        def __init__(self, module: Any, rebuild: Any) -> None:
            super().__init__()
            self.inner = module
            self.rebuild = rebuild

        def forward(self, *tensors: Any) -> Any:
            args, kwargs = self.rebuild(tensors)
            return self.inner(*args, **kwargs)

        def train(self, mode: bool = True) -> Any:  # the module's own mode is set apart
            self.training = mode
            return self

    return Wrapper


def _wrap(module: Any, rebuild: Any) -> Any:
    return _wrapper_class()(module, rebuild)


def _output_names(torch: Any, target: Any, args: tuple[Any, ...]) -> list[str] | None:
    """A dict output's keys (``key.k`` for its nested tensors); None for other outputs."""
    from torch.utils._pytree import tree_flatten

    with torch.no_grad():
        result = target(*args)
    if not isinstance(result, Mapping):
        return None
    names = []
    for key, value in result.items():
        count = sum(isinstance(leaf, torch.Tensor) for leaf in tree_flatten(value)[0])
        names.extend([str(key)] if isinstance(value, torch.Tensor) else [f"{key}.{k}" for k in range(count)])
    return names


def _export(torch: Any, target: Any, names: list[str], args: tuple[Any, ...],
            dynamic: dict[str, dict[int, str]], exported: bool) -> onnx.ModelProto:
    """The ONNX model torch's TorchScript exporter makes of ``target`` on ``args``, in eval mode."""
    inner = getattr(target, "inner", target)
    training = not exported and getattr(inner, "training", False)
    try:
        if training:
            inner.eval()
        outputs = _output_names(torch, target, args)
        proto = onnx_export(torch, target, names, args, dynamic, outputs)
        if outputs is not None and len(outputs) != len(proto.graph.output):  # outputs it merged
            proto = onnx_export(torch, target, names, args, dynamic, None)
    except (InputError, ModelError):
        raise
    except Exception as error:
        reason = str(error).strip().splitlines()
        raise ModelError(f"exporting the {type(inner).__name__} to ONNX failed ({type(error).__name__}: "
                         f"{reason[0][:500] if reason else 'no message'}); check that example_input "
                         "is what forward() takes, or export it to ONNX yourself") from error
    finally:
        if training:
            inner.train(True)
    return proto


def onnx_export(torch: Any, target: Any, names: list[str], args: tuple[Any, ...],
                 dynamic: dict[str, dict[int, str]], outputs: list[str] | None) -> onnx.ModelProto:
    """``target`` on ``args`` exported by torch's TorchScript exporter (in memory), inputs named
    ``names``, outputs ``outputs`` (None: the exporter's names), ``dynamic`` its dynamic axes."""
    buffer = io.BytesIO()
    with warnings.catch_warnings():  # torch deprecates this exporter; its tracer's warnings still show
        warnings.simplefilter("ignore", DeprecationWarning)
        warnings.filterwarnings("ignore", "no signature found")  # TorchScript methods have none
        torch.onnx.export(target, args, buffer, dynamo=False, opset_version=OPSET,
                          input_names=names, output_names=outputs, dynamic_axes=dynamic)
    return onnx.load_from_string(buffer.getvalue())


def _fill_conv_channels(proto: onnx.ModelProto, names: list[str]) -> None:
    """Give an input of ``names`` that a Conv reads directly the Conv's input channel count."""
    weights = {init.name: list(init.dims) for init in proto.graph.initializer}
    for node in proto.graph.node:
        if node.op_type == "Constant" and node.attribute and node.attribute[0].name == "value":
            weights[node.output[0]] = list(node.attribute[0].t.dims)
    inputs = {value.name: value for value in proto.graph.input if value.name in names}
    for node in proto.graph.node:
        if node.op_type != "Conv" or len(node.input) < 2 or node.input[0] not in inputs:
            continue
        weight = weights.get(node.input[1])
        dims = inputs[node.input[0]].type.tensor_type.shape.dim
        if weight is None or len(weight) != len(dims) or len(dims) < 3:
            continue
        group = next((attr.i for attr in node.attribute if attr.name == "group"), 1)
        dims[1].Clear()
        dims[1].dim_value = weight[1] * group
