"""Models and input data for the command line: the sample model, ``-shape``/``-b``, random inputs.

Random inputs follow each input port's element type: floats are uniform in
[0, 1), booleans are random, integers are 0 or 1 (safe as token ids, masks and
indices into any table).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from inferplex._model import Model
from inferplex._ports import Port
from inferplex.errors import InputError, ModelError

__all__ = [
    "apply_shapes",
    "batch_size",
    "check_static",
    "parse_shapes",
    "random_inputs",
    "sample_model_path",
    "tiny_model",
]

SAMPLE_MODEL = "light_resnet50"

Dims = list[int | None]


def sample_model_path(name: str = SAMPLE_MODEL) -> Path:
    """Path of one of the onnx wheel's small test models (``light_resnet50``, ``light_squeezenet``)."""
    import onnx.backend.test

    path = Path(onnx.backend.test.__file__).parent / "data" / "light" / f"{name}.onnx"
    if not path.is_file():
        raise ModelError(f"the onnx package has no sample model {name!r} at {path}; "
                         "pass a model with -m MODEL.onnx")
    return path


_SHAPE_ITEM = re.compile(r"([^\[\],]*)\[([^\]]*)\]")


def parse_shapes(text: str) -> dict[str | int, Dims]:
    """``"ids[1,128],mask[1,128]"`` -> ``{"ids": [1, 128], ...}``; ``"[1,3,224,224]"`` -> ``{0: [...]}``.

    A dimension is an integer >= 0, or ``?`` / ``-1`` for a dynamic one.
    """
    shapes: dict[str | int, Dims] = {}
    position = 0
    for match in _SHAPE_ITEM.finditer(text):
        if text[position:match.start()] != ("" if position == 0 else ","):
            break
        name = match.group(1).strip()
        shapes[name or 0] = [_parse_dim(d, text) for d in match.group(2).split(",") if d.strip()]
        position = match.end()
    if not shapes or position != len(text):
        raise InputError(f"malformed -shape {text!r}; accepted: 'name[1,3,224,224]', "
                         "'a[1,128],b[1,128]', or '[1,3,224,224]' for a one-input model")
    return shapes


def _parse_dim(text: str, whole: str) -> int | None:
    text = text.strip()
    if text in ("?", "-1"):
        return None
    if text.isdigit():
        return int(text)
    raise InputError(f"-shape {whole!r}: dimension {text!r} is not an integer >= 0, '?' or -1")


def apply_shapes(model: Model, shapes: Mapping[str | int, Dims] | None, batch: int | None) -> None:
    """Reshape ``model``'s inputs from ``-shape`` and set dimension 0 of every input to ``-b``."""
    new: dict[str | int, list[Any]] = {}
    for key, dims in (shapes or {}).items():
        if key == 0 and len(model.inputs) != 1:
            raise InputError(f"-shape without an input name needs a one-input model; this one has "
                             f"{_port_list(model.inputs)}; write 'name[dims]'")
        port = model.input(key)  # InputError names the inputs when the name is unknown
        current = port.dims
        if current is not None and len(current) != len(dims):
            raise InputError(f"-shape gives input {port.any_name!r} rank {len(dims)} {dims}, "
                             f"but the model's input has rank {len(current)}: {_show(current)}")
        new[port.any_name] = list(dims)
    if batch is not None:
        if batch < 1:
            raise InputError(f"-b must be at least 1, got {batch}")
        for port in model.inputs:
            known = list(new.get(port.any_name) or port.dims or [])
            if known:
                new[port.any_name] = [batch, *known[1:]]
    if new:
        model.reshape(new)


def check_static(model: Model, given: set[str] | None = None) -> None:
    """InputError naming every input that still has a dynamic dimension (except those whose data
    shape is ``given``: ``-data_shape``, ``-i``)."""
    dynamic = [p for p in model.inputs if p.is_dynamic and p.any_name not in (given or set())]
    if dynamic:
        names = ", ".join(f"{p.any_name!r} {_show(p.dims)}" for p in dynamic)
        example = dynamic[0]
        dims = ",".join("1" if not isinstance(d, int) else str(d) for d in example.dims or [1])
        raise InputError(f"dynamic input {names}: give static dims with -shape, e.g. "
                         f"-shape \"{example.any_name}[{dims}]\" (or -b for the batch dimension), or "
                         f"keep it dynamic and give the data's shape with -data_shape")


def batch_size(model: Model, batch: int | None,
               data_shapes: Mapping[str, tuple[int, ...]] | None = None) -> int:
    """``-b`` if given, else dimension 0 of the first input of rank >= 2 (its ``-data_shape`` where
    given), else 1."""
    if batch is not None:
        return batch
    first: Any = model.inputs[0].dims if model.inputs else None
    if model.inputs and data_shapes and model.inputs[0].any_name in data_shapes:
        first = data_shapes[model.inputs[0].any_name]
    if first and len(first) >= 2 and isinstance(first[0], int) and first[0] > 0:
        return first[0]
    return 1


def random_inputs(ports: list[Port], seed: int = 0,
                  shapes: Mapping[str, tuple[int, ...]] | None = None) -> dict[str, np.ndarray]:
    """One random tensor per input port, of its element type and static shape (or the one
    ``shapes`` gives it: ``-data_shape``)."""
    rng = np.random.default_rng(seed)
    feeds: dict[str, np.ndarray] = {}
    for port in ports:
        element = port.element_type
        dtype = element.to_dtype() if element.is_static() else np.dtype(np.float32)
        if shapes and port.any_name in shapes:
            shape = shapes[port.any_name]
        elif port.is_dynamic:
            continue  # fed from a file (-i); check_static refused the others
        else:
            shape = tuple(port.shape)
        if dtype.kind == "f":
            feeds[port.any_name] = rng.random(shape, dtype=np.float64).astype(dtype)
        elif dtype.kind == "b":
            feeds[port.any_name] = rng.random(shape) < 0.5
        elif dtype.kind in "iu":
            feeds[port.any_name] = rng.integers(0, 2, shape).astype(dtype)
        else:
            raise InputError(f"input {port.any_name!r} has element type {element}; random data "
                             "is made for float, integer and boolean inputs only")
    return feeds


def tiny_model() -> tuple[Any, dict[str, np.ndarray], np.ndarray]:
    """A 2-node model (MatMul, Relu) with its input and the numpy reference output."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(7)
    weight = rng.standard_normal((4, 3)).astype(np.float32)
    x = rng.standard_normal((2, 4)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["h"], name="matmul"),
         helper.make_node("Relu", ["h"], ["y"], name="relu")],
        "self_check",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
        [numpy_helper.from_array(weight, "w")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = min(model.ir_version, 9)
    onnx.checker.check_model(model)
    return model, {"x": x}, np.maximum(x @ weight, 0.0)


def _port_list(ports: list[Port]) -> str:
    return ", ".join(f"{p.any_name!r} {_show(p.dims)}" for p in ports) or "no inputs"


def _show(dims: Any) -> str:
    if dims is None:
        return "[...]"
    return "[" + ",".join("?" if not isinstance(d, int) else str(d) for d in dims) + "]"
