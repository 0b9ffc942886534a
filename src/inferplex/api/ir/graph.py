"""An ``openvino.Model`` rebuilt as an inferplex Model, op by op, with :mod:`inferplex.opset`.

Parameters keep their element types, shapes (dynamic dims too), tensor names, friendly names and
layouts; every op output keeps its tensor names and every op its friendly name (the name of its
main ONNX node, which HETERO affinities and ``query_model`` use); Results keep their friendly
names and layouts, the model its friendly name.  Constants become initializers of their own
element type: f16 weights with a Convert to f32 stay f16 followed by a Cast, as inferplex saves
compressed weights.  Builders that need a constant input (axes, orders, shapes) get its data,
folded through Converts.  Ops inferplex cannot build are listed, all at once, in a ModelError.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx_ir as ir

from inferplex._model import Model
from inferplex._opsets.build import int64, step
from inferplex._ports import Port
from inferplex.api import layout_helpers
from inferplex.api.ir.constants import constant_array, element_type, partial_shape
from inferplex.api.ir.ops import BUILDERS, VERSIONS
from inferplex.api.nodes import Constant, Node, Parameter, Result
from inferplex.errors import InferplexError, InputError, ModelError

__all__ = ["rebuild"]

_SOURCE_OPS = ("Parameter", "Constant", "Result")
_EXPORT_HINT = ("export the source model to ONNX (torch.onnx.export, tf2onnx, paddle2onnx, ...) and read "
                "the .onnx file instead")


def rebuild(ov_model: Any, what: str) -> Model:
    """The inferplex Model computing what ``ov_model`` computes; ``what`` names the source in errors."""
    ops = list(ov_model.get_ordered_ops())
    _check_supported(ops, what)
    if not ov_model.get_results():
        raise ModelError(f"{what} has no Result: a model needs at least one output")
    reader = _Reader(ops)
    try:
        parameters = [reader.parameter(node) for node in ov_model.get_parameters()]
        sinks: list[Node] = []
        for node in ops:
            if node.get_type_name() not in _SOURCE_OPS:
                built = reader.op(node, what)
                if node.get_type_name() == "Assign":
                    sinks.append(built)
        results = [Result(reader.source(node.input_value(0)), name=node.get_friendly_name())
                   for node in ov_model.get_results()]
    except InputError as error:  # a Parameter or Constant of a type or shape ONNX has no equivalent of
        raise ModelError(f"{what} cannot be read: {error}; {_EXPORT_HINT}") from error
    model = Model(results, sinks=sinks, parameters=parameters, name=ov_model.get_friendly_name())
    _keep_result_details(model, ov_model.get_results())
    _keep_rt_info(model, ov_model.get_rt_info())
    return model


def _keep_rt_info(model: Model, tree: Any, path: tuple[str, ...] = ()) -> None:
    """The IR's rt_info (``version``, ``framework``, what ``set_rt_info`` wrote) as the model's."""
    for key in tree:
        value = tree[key]
        if isinstance(value, dict):
            _keep_rt_info(model, value, (*path, str(key)))
        else:
            model.set_rt_info(value.astype(str), [*path, str(key)])


def _check_supported(ops: Sequence[Any], what: str) -> None:
    missing: dict[str, set[str]] = {}
    for node in ops:
        type_name = node.get_type_name()
        if type_name in _SOURCE_OPS:
            continue
        version = _version(node)
        if type_name not in BUILDERS or (type_name in VERSIONS and version not in VERSIONS[type_name]):
            missing.setdefault(type_name, set()).add(node.get_type_info().version_id)
    if missing:
        listed = ", ".join(f"{name} ({', '.join(sorted(versions))})"
                           for name, versions in sorted(missing.items()))
        raise ModelError(f"{what} has ops inferplex cannot read: {listed}; inferplex reads the IR ops its "
                         f"opset builds (inferplex.opset); {_EXPORT_HINT}")


def _version(node: Any) -> int:
    text = str(node.get_type_info().version_id)
    digits = text.removeprefix("opset")
    return int(digits) if digits.isdigit() else -1


class _Reader:
    """The values built so far, by OpenVINO output; constants are built when first read."""

    def __init__(self, ops: Sequence[Any]) -> None:
        self._values: dict[int, list[ir.Value | None]] = {}
        self._arrays: dict[int, np.ndarray] = {}
        self._tensor_names = {name for node in ops for output in node.outputs()
                              for name in output.get_names()}

    def parameter(self, node: Any) -> Parameter:
        output = node.output(0)
        names = sorted(output.get_names())
        friendly = node.get_friendly_name()
        parameter = Parameter(element_type(node.get_element_type()), partial_shape(node.get_partial_shape()),
                              name=names[0] if names else friendly)
        if len(names) > 1:
            Port(parameter.value, 0, "input").set_names(names)
        if friendly != parameter.value.name:
            parameter.set_friendly_name(friendly)
        layout = node.get_layout()
        if not layout.empty:
            parameter.set_layout(layout.to_string())
        self._values[node.get_instance_id()] = [parameter.value]
        return parameter

    def source(self, output: Any) -> ir.Value:
        """The value standing for an OpenVINO output (a Constant's is made here, when first read)."""
        node = output.get_node()
        key = node.get_instance_id()
        if key not in self._values and node.get_type_name() == "Constant":
            self._values[key] = [self._constant(node)]
        built = self._values.get(key, [])
        index = output.get_index()
        value = built[index] if index < len(built) else None
        if value is None:
            raise ModelError(f"{node.get_type_name()} {node.get_friendly_name()!r} output {index} is read, "
                             "but inferplex's builder of the op does not make it")
        return value

    def data(self, output: Any) -> np.ndarray | None:
        """The values of an output that is constant: a Constant, or Converts of one."""
        node = output.get_node()
        if node.get_type_name() == "Constant":
            return self._array(node)
        if node.get_type_name() == "Convert":
            data = self.data(node.input_value(0))
            target = element_type(node.get_output_element_type(0)).data_type.numpy()
            return None if data is None else data.astype(target)
        return None

    def _array(self, node: Any) -> np.ndarray:
        key = node.get_instance_id()
        if key not in self._arrays:
            self._arrays[key] = constant_array(node)
        return self._arrays[key]

    def _constant(self, node: Any) -> ir.Value:
        names = sorted(node.output(0).get_names())
        name = names[0] if names else node.get_friendly_name()
        if not names and name in self._tensor_names:  # a friendly name must not take a tensor's name
            name = f"{name}/constant"
        constant = Constant(self._array(node), name=name)
        if len(names) > 1:
            Port(constant._outputs[0], 0, "output").set_names(names)  # noqa: SLF001 - same layer
        return constant._outputs[0]  # noqa: SLF001

    def op(self, node: Any, what: str) -> Node:
        view = _View(node, self)
        try:
            built = BUILDERS[view.type_name](view)
        except (InputError, ModelError) as error:
            raise ModelError(f"{what}: {view.type_name} {view.name!r} cannot be read: {error}; "
                             f"{_EXPORT_HINT}") from error
        except InferplexError:
            raise
        except (ValueError, TypeError, KeyError, IndexError) as error:
            raise ModelError(f"{what}: {view.type_name} {view.name!r} (attributes {view.attrs}) cannot be "
                             f"read: {type(error).__name__}: {error}; {_EXPORT_HINT}") from error
        values = self._outputs(node, built)
        for output, value in zip(node.outputs(), values, strict=False):
            shape = output.get_partial_shape()
            if value is not None and value.shape is None and shape.rank.is_static:  # inference lost it
                value.shape = ir.Shape(_dims(shape))
        self._values[node.get_instance_id()] = values
        return built

    def _outputs(self, node: Any, built: Node) -> list[ir.Value | None]:
        """The built outputs, of the IR's element types and with its tensor names (an output that is
        one of the op's inputs, as a builder gives for an op that changes nothing, gets its own)."""
        inputs = {id(self.source(item)) for item in node.input_values()}
        values: list[ir.Value | None] = []
        for index, output in enumerate(node.outputs()):
            value = built._outputs[index] if index < len(built._outputs) else None  # noqa: SLF001
            if value is not None:
                if id(value) in inputs:
                    value = step("Identity", [value])
                value = _as_type(value, output, node.get_friendly_name())
                names = output.get_names()
                if names:
                    Port(value, index, "output").set_names(names)
            values.append(value)
        return values


class _View:
    """An OpenVINO op as :class:`inferplex.api.ir.ops.OpView` shows it to the builders."""

    def __init__(self, node: Any, reader: _Reader) -> None:
        self._node, self._reader = node, reader
        self.node = node
        self.type_name = node.get_type_name()
        self.version = _version(node)
        self.attrs = dict(node.get_attributes())
        self.name = node.get_friendly_name()
        self.size = node.get_input_size()

    def value(self, index: int) -> Port:
        return Port(self._reader.source(self._node.input_value(index)), 0, "output")

    def dtype(self, index: int) -> ir.DataType | None:
        return self._reader.source(self._node.input_value(index)).dtype

    def constant(self, index: int, what: str) -> np.ndarray:
        data = self._reader.data(self._node.input_value(index))
        if data is None:
            raise InputError(f"{what} must be constant (a Constant in the IR); this one is computed, which "
                             "the ONNX equivalent does not take")
        return data

    def arg(self, index: int) -> np.ndarray | Port:
        data = self._reader.data(self._node.input_value(index))
        return data if data is not None else self.value(index)

    def ints(self, index: int) -> np.ndarray | ir.Value:
        data = self._reader.data(self._node.input_value(index))
        if data is not None:
            return np.asarray(data, np.int64)
        return int64(self._reader.source(self._node.input_value(index)))

    def used(self, index: int) -> bool:
        return bool(self._node.output(index).get_target_inputs())


def _as_type(value: ir.Value, output: Any, name: str) -> ir.Value:
    """``value``, cast to the element type the IR gives ``output`` where the builder's differs."""
    if value.dtype is None or output.get_element_type().is_dynamic():
        return value
    wanted = element_type(output.get_element_type()).data_type
    if value.dtype == wanted:
        return value
    from inferplex import opset

    return opset.convert(value, wanted, name=f"{name}/{wanted.name.lower()}")._outputs[0]  # noqa: SLF001


def _dims(shape: Any) -> list[int | None]:
    """The dims of an OpenVINO partial shape of static rank (None where dynamic)."""
    return [d.get_length() if d.is_static else None for d in shape]


def _keep_result_details(model: Model, ov_results: Sequence[Any]) -> None:
    """Results keep the IR's friendly names and layouts."""
    for result, ov_result in zip(model.get_results(), ov_results, strict=True):
        result.set_friendly_name(ov_result.get_friendly_name())
        layout = ov_result.get_layout()
        if not layout.empty:
            layout_helpers.set_layout(result.output(0), layout.to_string())
