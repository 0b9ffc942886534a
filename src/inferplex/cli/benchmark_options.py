"""benchmark_app's options that shape the model, the properties and the data of a run.

- ``-ip`` / ``-op`` / ``-iop``: the element type of the inputs and outputs the
  program exchanges (``ov.preprocess.PrePostProcessor`` converts inside the model,
  as benchmark_app does);
- ``-load_config`` / ``-dump_config``: properties per device from a JSON file
  (``{"CPU": {"NUM_STREAMS": "2"}}``), and the properties a run compiled with written
  in that form (so that ``-load_config`` repeats the run);
- ``-data_shape``: the shapes of the data fed to a model whose inputs stay dynamic;
- ``-i``: inputs from ``.npy`` files instead of random data.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from inferplex._model import Model
from inferplex._ports import Port
from inferplex.api.types import Type
from inferplex.cli.inputs import Dims, parse_shapes
from inferplex.config.values import OptionEnum
from inferplex.errors import InputError, PropertyError

__all__ = ["apply_precisions", "data_shapes", "dump_config", "load_config", "read_inputs"]


def _precision_items(text: str, flag: str) -> dict[str | None, Type]:
    """``"u8"`` -> ``{None: u8}``; ``"x:u8,y:f16"`` -> ``{"x": u8, "y": f16}``."""
    items: dict[str | None, Type] = {}
    for item in text.split(","):
        name, sep, precision = item.rpartition(":")
        key = name.strip() if sep else None
        try:
            items[key] = Type(precision.strip())
        except Exception as error:  # noqa: BLE001 - Type names what it accepts
            raise InputError(f"{flag} {text!r}: {precision.strip()!r} is not an element type "
                             "(accepted: u8, i32, i64, f16, bf16, f32, ...)") from error
    return items


def apply_precisions(model: Model, inputs: str | None, outputs: str | None, both: str | None) -> Model:
    """``model`` with its inputs' and outputs' element types set as ``-ip`` / ``-op`` / ``-iop`` ask."""
    if not (inputs or outputs or both):
        return model
    from inferplex.preprocess import PrePostProcessor

    ppp = PrePostProcessor(model)
    for side, ports, text, flag in (("input", model.inputs, inputs, "-ip"),
                                    ("output", model.outputs, outputs, "-op")):
        wanted = _precision_items(text, flag) if text else {}
        if both:
            named = {k: v for k, v in _precision_items(both, "-iop").items() if k is not None}
            unknown = [k for k in named if k not in {p.any_name for p in model.inputs + model.outputs}]
            if unknown:
                raise InputError(f"-iop names {unknown}, which the model has neither as input nor "
                                 f"output; inputs: {[p.any_name for p in model.inputs]}, outputs: "
                                 f"{[p.any_name for p in model.outputs]}")
            wanted.update({k: v for k, v in named.items() if k in {p.any_name for p in ports}})
        _check_names(wanted, ports, side, flag)
        for port in ports:
            element = wanted.get(port.any_name, wanted.get(None))
            if element is None:
                continue
            step = ppp.input(port.any_name) if side == "input" else ppp.output(port.any_name)
            step.tensor().set_element_type(element)
    return ppp.build()


def _check_names(wanted: Mapping[str | None, Type], ports: list[Port], side: str, flag: str) -> None:
    names = {p.any_name for p in ports}
    unknown = [name for name in wanted if name is not None and name not in names]
    if unknown:
        raise InputError(f"{flag} names {side} {unknown[0]!r}, which the model does not have; its "
                         f"{side}s: {sorted(names)}")


def load_config(path: str, device: str, members: list[str]) -> dict[str, Any]:
    """The compile properties a ``-load_config`` file gives for ``device`` (and, for a virtual
    device, its ``members`` as ``DEVICE_PROPERTIES``)."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise PropertyError(f"-load_config {path!r} cannot be read as JSON: {error}") from error
    if not isinstance(data, dict) or not all(isinstance(v, dict) for v in data.values()):
        raise PropertyError(f"-load_config {path!r}: write one object of properties per device, "
                            'e.g. {"CPU": {"NUM_STREAMS": "2"}}')
    config: dict[str, Any] = dict(data.get(device, {}))
    per_member = {name: dict(data[name]) for name in members if name in data}
    if per_member:
        config.setdefault("DEVICE_PROPERTIES", {}).update(per_member)
    return config


def dump_config(path: str, device: str, properties: Mapping[str, Any]) -> Path:
    """Write ``{device: {key: value}}`` (values as text, as benchmark_app writes them) to ``path``."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps({device: {k: _text(v) for k, v in properties.items()}}, indent=2) + "\n",
                      encoding="utf-8")
    return target


def _text(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _text(v) for k, v in value.items()}
    if isinstance(value, (bool, int, float, str)) or value is None:
        return value
    if isinstance(value, (list, tuple)):
        return [_text(v) for v in value]
    if isinstance(value, OptionEnum):
        return value.text  # the text a config takes back ("THROUGHPUT"), not OpenVINO's number
    return str(getattr(value, "value", value))


def data_shapes(text: str, ports: list[Port]) -> dict[str, tuple[int, ...]]:
    """``-data_shape``: a static shape per input (by name), each fitting the input's dynamic shape."""
    shapes: dict[str, tuple[int, ...]] = {}
    for key, dims in parse_shapes(text).items():
        if key == 0 and len(ports) != 1:
            raise InputError(f"-data_shape without an input name needs a one-input model; this one "
                             f"has {[p.any_name for p in ports]}; write 'name[dims]'")
        port = next((p for p in ports if p.any_name == key), ports[0] if key == 0 else None)
        if port is None:
            raise InputError(f"-data_shape names input {key!r}, which the model does not have; its "
                             f"inputs: {[p.any_name for p in ports]}")
        shapes[port.any_name] = _fitting(port, dims, text)
    return shapes


def _fitting(port: Port, dims: Dims, text: str) -> tuple[int, ...]:
    if any(d is None for d in dims):
        raise InputError(f"-data_shape {text!r}: data shapes are static; input {port.any_name!r} got {dims}")
    model_dims = port.dims
    fits = model_dims is None or (len(model_dims) == len(dims) and all(
        not isinstance(m, int) or m == d for m, d in zip(model_dims, dims, strict=True)))
    if not fits:
        raise InputError(f"-data_shape gives input {port.any_name!r} the shape {dims}, which its "
                         f"shape {port.partial_shape} does not allow")
    return tuple(int(d) for d in dims if d is not None)


def read_inputs(text: str, ports: list[Port]) -> dict[str, np.ndarray]:
    """``-i``: ``file.npy`` (a one-input model) or ``name:file.npy,name2:file2.npy``, each array
    cast to its input's element type."""
    arrays: dict[str, np.ndarray] = {}
    names = {p.any_name: p for p in ports}
    for item in text.split(","):
        name, sep, path = item.rpartition(":") if ":" in item and not Path(item).is_file() else ("", "", item)
        if not sep:
            if len(ports) != 1:
                raise InputError(f"-i {item!r} without an input name needs a one-input model; this "
                                 f"one has {sorted(names)}; write 'name:file.npy'")
            name = ports[0].any_name
        port = names.get(name.strip())
        if port is None:
            raise InputError(f"-i names input {name!r}, which the model does not have; its inputs: "
                             f"{sorted(names)}")
        arrays[port.any_name] = _load(path.strip(), port)
    return arrays


def _load(path: str, port: Port) -> np.ndarray:
    if not path.endswith(".npy"):
        raise InputError(f"-i {path!r}: input files are numpy .npy files (numpy.save)")
    try:
        array = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as error:
        raise InputError(f"-i {path!r} cannot be read as a .npy file: {error}") from error
    dtype = port.element_type.to_dtype() if port.element_type.is_static() else array.dtype
    return np.ascontiguousarray(array, dtype=dtype)
