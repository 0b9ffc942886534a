"""OpenVINO's ``openvino.passes`` for inferplex models: a pass :class:`Manager` running passes in
order on a Model, user passes (:class:`ModelPass` with ``run_on_model``), :class:`Serialize`
(the model as OpenVINO IR), :class:`VisualizeTree` (the model as a Graphviz drawing),
:class:`ConstantFolding` and :class:`MakeStateful` (Parameter/Result pairs as a variable).

    manager = Manager()
    manager.register_pass(MakeStateful({"cache_in": "cache_out"}))
    manager.register_pass(Serialize("model.xml", "model.bin"))
    manager.run_passes(model)

Pattern matching (:mod:`inferplex.api.patterns`: ``Matcher``, ``WrapType``, ``AnyInput``, ``Or``,
``Optional`` and the predicates) and the passes that rewrite what it finds: a :class:`MatcherPass`
(a matcher and a callback that changes the graph and says whether it did), run by the Manager on
every op of the model in topological order, and :class:`GraphRewrite` and
:class:`BackwardGraphRewrite` (several matcher passes, each op tried with each in turn until one
rewrites it; backward: from the Results up).  As in OpenVINO, ops that no longer feed the model
after a rewrite leave it.  OpenVINO's other graph transformations are not here: inferplex's models
are ONNX graphs, which ``Model``'s own editing API (and onnx-ir) changes.
"""

from __future__ import annotations

import enum
import os
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import onnx_ir as ir

from inferplex.api.nodes import Node
from inferplex.api.patterns import (
    AnyInput,
    Matcher,
    Optional,
    Or,
    Predicate,
    WrapType,
    consumers_count,
    has_static_dim,
    has_static_dims,
    has_static_rank,
    has_static_shape,
    rank_equals,
    shape_matches,
    type_matches,
    type_matches_any,
)
from inferplex.errors import InputError, InputTypeError

__all__ = [
    "AnyInput",
    "BackwardGraphRewrite",
    "ConstantFolding",
    "GraphRewrite",
    "LowLatency2",
    "MakeStateful",
    "Manager",
    "Matcher",
    "MatcherPass",
    "ModelPass",
    "Optional",
    "Or",
    "PassBase",
    "Predicate",
    "Serialize",
    "Version",
    "VisualizeTree",
    "WrapType",
    "consumers_count",
    "has_static_dim",
    "has_static_dims",
    "has_static_rank",
    "has_static_shape",
    "rank_equals",
    "shape_matches",
    "type_matches",
    "type_matches_any",
]


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
            raise InputTypeError(f"register_pass takes a pass (ModelPass, MatcherPass, GraphRewrite, "
                                 f"Serialize, MakeStateful, ...), not {type(new_pass).__name__}")
        self._passes.append(new_pass)
        return new_pass

    def set_per_pass_validation(self, new_state: bool) -> None:
        """Validate the model (``validate_nodes_and_infer_types``) after each pass that changed it."""
        self._validate = bool(new_state)

    def run_passes(self, model: Any) -> None:
        from inferplex._model import Model

        if not isinstance(model, Model):
            raise InputTypeError(f"run_passes takes a Model (ov.Model, or core.read_model's), not "
                                 f"{type(model).__name__}")
        for each in self._passes:
            changed = each.run_on_model(model)
            if changed and self._validate:
                model.validate_nodes_and_infer_types()

    def __repr__(self) -> str:
        return f"<Manager: {len(self._passes)} passes>"


Callback = Callable[[Matcher], bool]
"""A MatcherPass's callback: it gets the matcher after a match, rewrites, and says whether it did."""


class MatcherPass(PassBase):
    """A pattern and what to do where it matches: ``MatcherPass(matcher, callback)``, or a subclass
    that calls :meth:`register_matcher` in its ``__init__``.  Run by a Manager (or in a
    :class:`GraphRewrite`), it tries the pattern on the first output of every op of the model."""

    def __init__(self, matcher: Matcher | None = None, callback: Callback | None = None) -> None:
        super().__init__()
        self._matcher: Matcher | None = None
        self._callback: Callback | None = None
        self._new_nodes: list[Node] = []
        self.callback_ran = False
        """Whether the last :meth:`apply` matched and ran the callback (which may have changed the graph)."""
        if matcher is not None or callback is not None:
            self.register_matcher(matcher, callback)  # type: ignore[arg-type]

    def register_matcher(self, matcher: Matcher, callback: Callback) -> None:
        """Match with ``matcher``; ``callback(matcher) -> bool`` rewrites each match.  The pass takes
        the matcher's name."""
        if not isinstance(matcher, Matcher):
            raise InputTypeError(f"register_matcher takes a Matcher and a callback, got "
                                 f"{type(matcher).__name__}")
        if not callable(callback):
            raise InputTypeError(f"register_matcher takes a callback (matcher) -> bool, got "
                                 f"{type(callback).__name__}")
        self._matcher, self._callback = matcher, callback
        self.set_name(matcher.get_name())

    def register_new_node(self, node: Node) -> Node:
        """Have the running GraphRewrite try its matchers on ``node`` (a node the callback made) next."""
        if not isinstance(node, Node):
            raise InputTypeError(f"register_new_node takes a node, got {type(node).__name__}")
        self._new_nodes.append(node)
        return node

    def take_new_nodes(self) -> list[Node]:
        """The nodes registered since the last call, in order; the list empties."""
        nodes, self._new_nodes = self._new_nodes, []
        return nodes

    def apply(self, node: Node) -> bool:
        """Match the pattern on ``node``'s first output; where it matches, the callback's verdict."""
        self._new_nodes.clear()
        self.callback_ran = False
        if self._matcher is None or self._callback is None or node.get_output_size() == 0:
            return False
        matched = self.callback_ran = self._matcher.match(node.output(0))
        try:
            return _verdict(self._callback(self._matcher)) if matched else False
        finally:
            self._matcher.clear_state()

    def run_on_model(self, model: Any) -> bool:
        """Apply to every op of the model, in topological order (OpenVINO's Manager runs a
        MatcherPass so, as a GraphRewrite of one)."""
        rewrite = GraphRewrite()
        rewrite.add_matcher(self)
        return rewrite.run_on_model(model)


def _verdict(status: Any) -> bool:
    if not isinstance(status, bool) and type(status).__name__ != "bool_":
        raise InputTypeError(f"a MatcherPass callback must return a bool (whether it changed the graph), "
                             f"got {type(status).__name__}")
    return bool(status)


class GraphRewrite(PassBase):
    """Matcher passes run together: each op of the model, in topological order, is tried with each
    pass in the order they were added until one rewrites it; ops a pass registers
    (``register_new_node``) are tried next."""

    def __init__(self, matcher_pass: MatcherPass | None = None) -> None:
        super().__init__()
        self._matchers: list[MatcherPass] = []
        if matcher_pass is not None:
            self.add_matcher(matcher_pass)

    def add_matcher(self, matcher_pass: MatcherPass) -> MatcherPass:
        """Append a MatcherPass to those run; returns it."""
        if not isinstance(matcher_pass, MatcherPass):
            raise InputTypeError(f"add_matcher takes a MatcherPass, got {type(matcher_pass).__name__}")
        self._matchers.append(matcher_pass)
        return matcher_pass

    def _order(self, ops: list[Any]) -> Iterable[Any]:
        return ops

    def run_on_model(self, model: Any) -> bool:
        queue = deque(self._order(model.get_ordered_ops()))
        rewritten = False
        while queue:
            node = queue.popleft()
            if _in_graph(node, model.ir.graph):
                rewritten = self._apply(node, queue, model.ir.graph) or rewritten
        return rewritten

    def _apply(self, node: Any, queue: deque[Any], graph: ir.Graph) -> bool:
        """Try each matcher pass on ``node`` until one rewrites it."""
        for matcher_pass in self._matchers:
            status = matcher_pass.apply(node)
            queue.extendleft(reversed(matcher_pass.take_new_nodes()))
            if matcher_pass.callback_ran:
                _drop_unused(graph)
            if status:
                return True
        return False


class BackwardGraphRewrite(GraphRewrite):
    """A GraphRewrite that visits the ops from the model's Results to its Parameters."""

    def _order(self, ops: list[Any]) -> Iterable[Any]:
        return reversed(ops)


def _in_graph(node: Any, graph: ir.Graph) -> bool:
    """Whether ``node`` is still part of the model (a rewrite may have dropped it)."""
    main = node._main  # noqa: SLF001 - the node classes of this package
    if main is not None:
        return bool(main.graph is graph)
    return True


def _drop_unused(graph: ir.Graph) -> None:
    """Remove the ops whose outputs nothing reads and the model does not output (OpenVINO frees
    them); variables' Assigns stay."""
    from inferplex.state.variables import STATE_DOMAIN

    dropped = True
    while dropped:
        outputs = {id(value) for value in graph.outputs}
        unused = [node for node in graph if node.domain != STATE_DOMAIN
                  and all(not value.uses() and id(value) not in outputs for value in node.outputs)]
        for node in reversed(unused):
            graph.remove(node, safe=True)
        dropped = bool(unused)


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


class LowLatency2(PassBase):
    """The values each Loop or TensorIterator carries between iterations (its merged inputs) carried
    between inferences too, as variables (OpenVINO's ``LowLatency2``): a ``ReadValue`` starts the
    loop, an ``Assign`` keeps the last iteration's value.  With ``use_const_initializer`` (the
    default) a variable starts as zeros, else as the starting value the model gives the loop
    (see :mod:`inferplex.state.low_latency`)."""

    def __init__(self, use_const_initializer: bool = True) -> None:
        super().__init__()
        self._use_const_initializer = bool(use_const_initializer)

    def run_on_model(self, model: Any) -> bool:
        from inferplex.state.low_latency import make_loops_stateful

        return make_loops_stateful(model.ir.graph, self._use_const_initializer)


class VisualizeTree(PassBase):
    """Draw the model as Graphviz does (OpenVINO's ``VisualizeTree``): ``<file_name>.dot``, and
    ``file_name`` itself (``.svg``, ``.png``) where Graphviz's ``dot`` is installed; ``dot_only``
    writes the Graphviz text to ``file_name``.  ``nm(node, attributes)`` may append Graphviz
    attributes to a node's list (see :mod:`inferplex.api.visualize`)."""

    def __init__(self, file_name: str | os.PathLike[str], nm: Callable[[Any, list[str]], Any] | None = None,
                 dot_only: bool = False) -> None:
        super().__init__()
        if not isinstance(file_name, (str, os.PathLike)):
            raise InputTypeError(f"VisualizeTree takes a file name (str or pathlib.Path), got "
                                 f"{type(file_name).__name__}")
        if nm is not None and not callable(nm):
            raise InputTypeError(f"VisualizeTree's nm is a function (node, attributes) -> None, got "
                                 f"{type(nm).__name__}")
        self._file, self._modifier, self._dot_only = file_name, nm, bool(dot_only)

    def run_on_model(self, model: Any) -> bool:
        from inferplex.api.visualize import write_visualization

        write_visualization(model, self._file, self._modifier, self._dot_only)
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
