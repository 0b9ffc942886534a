"""OpenVINO's ``openvino.passes`` for inferplex models: a pass :class:`Manager` running passes in
order on a Model, user passes (:class:`ModelPass` with ``run_on_model``), :class:`Serialize`
(the model as OpenVINO IR), :class:`ConstantFolding` and :class:`MakeStateful` (Parameter/Result
pairs as a variable).

    manager = Manager()
    manager.register_pass(MakeStateful({"cache_in": "cache_out"}))
    manager.register_pass(Serialize("model.xml", "model.bin"))
    manager.run_passes(model)

OpenVINO's pattern matching (``Matcher``, ``WrapType``, ``GraphRewrite``) and its graph
transformations other than these are not here: inferplex's models are ONNX graphs, which
``Model``'s own editing API (and onnx-ir) changes.
"""

from __future__ import annotations

import enum
import os
from collections.abc import Mapping, Sequence
from typing import Any

import onnx_ir as ir

from inferplex.errors import InputError, InputTypeError

__all__ = ["ConstantFolding", "MakeStateful", "Manager", "ModelPass", "PassBase", "Serialize", "Version"]


class Version(enum.Enum):
    """The IR version :class:`Serialize` is asked for; OpenVINO writes IR v11 for each."""

    UNSPECIFIED = 0
    IR_V10 = 10
    IR_V11 = 11


class PassBase:
    """A pass: :meth:`run_on_model` changes the model and says whether it did."""

    def __init__(self) -> None:
        self._name = type(self).__name__

    def get_name(self) -> str:
        return self._name

    def set_name(self, name: str) -> None:
        self._name = str(name)

    def run_on_model(self, model: Any) -> bool:
        raise NotImplementedError(f"{type(self).__name__} must define run_on_model(model) -> bool")


class ModelPass(PassBase):
    """A pass written in Python: subclass it and define ``run_on_model(model) -> bool``."""


class Manager:
    """Runs the registered passes on a model, in the order they were registered."""

    def __init__(self) -> None:
        self._passes: list[PassBase] = []
        self._validate = False

    def register_pass(self, new_pass: PassBase) -> PassBase:
        if not isinstance(new_pass, PassBase):
            raise InputTypeError(f"register_pass takes a pass (ModelPass, Serialize, MakeStateful), not "
                                 f"{type(new_pass).__name__}")
        self._passes.append(new_pass)
        return new_pass

    def set_per_pass_validation(self, new_state: bool) -> None:
        """Validate the model (``validate_nodes_and_infer_types``) after each pass that changed it."""
        self._validate = bool(new_state)

    def run_passes(self, model: Any) -> None:
        for each in self._passes:
            changed = each.run_on_model(model)
            if changed and self._validate:
                model.validate_nodes_and_infer_types()

    def __repr__(self) -> str:
        return f"<Manager: {len(self._passes)} passes>"


class Serialize(PassBase):
    """Write the model as OpenVINO IR (``save_model`` without weight compression)."""

    def __init__(self, path_to_xml: str | os.PathLike[str], path_to_bin: str | os.PathLike[str] | None = None,
                 version: Any = None) -> None:
        super().__init__()
        self._xml, self._bin, self._version = path_to_xml, path_to_bin, version

    def run_on_model(self, model: Any) -> bool:
        from inferplex._model_io import serialize

        serialize(model, self._xml, self._bin, self._version)
        return False


class ConstantFolding(PassBase):
    """Ops whose inputs are all constants become constants (their values computed once, on ONNX
    Runtime's CPU provider), as do ``ShapeOf`` and ``Size`` of tensors whose shape is
    known; ops nothing reads any more go.  Random ops, control flow and the ops whose outputs the
    model returns stay (see :mod:`inferplex.api.constant_folding`)."""

    def run_on_model(self, model: Any) -> bool:
        from inferplex.api.constant_folding import fold_constants

        return fold_constants(model.ir)


class MakeStateful(PassBase):
    """Each (Parameter, Result) pair becomes one variable: a ``ReadValue`` (zeros until assigned)
    where the Parameter was read, an ``Assign`` of what the Result gave.  Pairs are given as
    ``{parameter name: result name}`` (the ops' friendly names) or ``[(parameter, result)]``; the
    variable's id is the two names joined, as OpenVINO names it."""

    def __init__(self, pairs_to_replace: Mapping[str, str] | Sequence[tuple[Any, Any]]) -> None:
        super().__init__()
        self._pairs = pairs_to_replace

    def run_on_model(self, model: Any) -> bool:
        pairs = [(self._parameter(model, p), self._result(model, r)) for p, r in self._named_pairs()]
        for parameter, result in pairs:
            _make_stateful(model, parameter, result)
        return bool(pairs)

    def _named_pairs(self) -> list[tuple[Any, Any]]:
        if isinstance(self._pairs, Mapping):
            return list(self._pairs.items())
        return [(p, r) for p, r in self._pairs]

    @staticmethod
    def _parameter(model: Any, key: Any) -> Any:
        return _op_named(model.get_parameters(), "Parameter", key)

    @staticmethod
    def _result(model: Any, key: Any) -> Any:
        return _op_named(model.get_results(), "Result", key)


def _op_named(ops: list[Any], kind: str, key: Any) -> Any:
    """The op of ``ops`` whose friendly name is ``key`` (a name, or an op whose name it is)."""
    name = key if isinstance(key, str) else key.get_friendly_name()
    found = [op for op in ops if op.get_friendly_name() == name]
    if not found:
        raise InputError(f"MakeStateful: the model has no {kind} {name!r}; its {kind.lower()}s: "
                         f"{[op.get_friendly_name() for op in ops]}")
    return found[0]


def _make_stateful(model: Any, parameter: Any, result: Any) -> None:
    """The Parameter's readers read a new variable (a ReadValue without an initial value: zeros
    until assigned), which an Assign of the Result's value writes; both leave the model."""
    from inferplex.api.build import unique_name
    from inferplex.state.variables import ASSIGN, READ_VALUE, STATE_DOMAIN, VariableSpec, variable_attributes

    graph = model.ir.graph
    state_input = graph.inputs[model.get_parameter_index(parameter)]
    written = graph.outputs[model.get_result_index(result)]
    dims = None if state_input.shape is None else tuple(d if isinstance(d, int) else None
                                                         for d in state_input.shape)
    spec = VariableSpec(parameter.get_friendly_name() + result.get_friendly_name(),
                        state_input.dtype or ir.DataType.FLOAT, dims)
    taken = {v.name for v in graph.inputs} | {v.name for node in graph for v in node.outputs}
    read = ir.node(READ_VALUE, [], attributes=variable_attributes(spec), domain=STATE_DOMAIN,
                   name=f"{spec.variable_id}/read")
    read.outputs[0].name = unique_name(f"{spec.variable_id}/value", taken)
    read.outputs[0].type, read.outputs[0].shape = state_input.type, state_input.shape
    graph.append(read)
    ir.convenience.replace_all_uses_with(state_input, read.outputs[0], replace_graph_outputs=True)
    model.remove_parameter(parameter)
    assign = ir.node(ASSIGN, [written], attributes={"variable_id": spec.variable_id}, domain=STATE_DOMAIN,
                     name=f"{spec.variable_id}/assign")
    assign.outputs[0].name = unique_name(f"{spec.variable_id}/assigned", taken)
    assign.outputs[0].type, assign.outputs[0].shape = written.type, written.shape
    graph.append(assign)
    model.remove_result(result)
    graph.opset_imports.setdefault(STATE_DOMAIN, 1)
    graph.sort()
