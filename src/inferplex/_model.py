"""Model: OpenVINO's model API over an onnx-ir graph (its ports and ops in ``_ports``).

A Model wraps an ``onnx_ir.Model``: its inputs and outputs as ports, its ops with
stable friendly names, ``reshape``, and the editing calls of :mod:`inferplex.api.model_edit`.
Reading one from a path, bytes or a ModelProto, and saving it, are in
:mod:`inferplex._model_io`.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import Any

import onnx
import onnx_ir as ir

from inferplex._ports import Op, Port, find_port, op_of, port_listing, source_node
from inferplex.api.keywords import keyword_aliases
from inferplex.errors import InputError, InputTypeError, ModelError

__all__ = ["Model"]

Dim = int | str | None


_UNNAMED = itertools.count()
"""Numbers the models built without a name: ``Model0``, ``Model1``, ... as OpenVINO names them."""

class Model:
    """An ONNX model ready to query and compile; wraps an ``onnx_ir.Model``.

    ``Model(ir_model, name)`` wraps a graph; ``Model(results, parameters, name)``
    assembles one from nodes built with :mod:`inferplex.opset`, as OpenVINO's
    ``ov.Model`` does (``results``: a node, an output port, or a list of them).
    """

    def __init__(self, model: Any = None, *args: Any, results: Any = None, sinks: Any = None,
                 parameters: Any = None, variables: Any = None, name: str | None = None) -> None:
        if results is not None:  # OpenVINO's keyword spelling: Model(results=..., parameters=...)
            model = results
        if model is None:
            raise ModelError("Model needs results: Model(results, parameters, name), "
                             "Model(results, sinks, parameters, variables, name) or "
                             "Model(onnx_ir.Model, name)")
        if isinstance(model, ir.Model):
            args = tuple(arg for arg in args if arg is not None)
            if args and isinstance(args[0], str) and name is None:
                args, name = args[1:], args[0]
            if args or parameters is not None or sinks or variables:
                raise ModelError("Model(onnx_ir.Model, name) takes no parameters; "
                                 "Model(results, parameters, name) builds a model from nodes")
            self.ir = model
            self._param_sources: list[Any] = []
            """The built Parameters' values, by input index (``get_parameter_index`` finds them)."""
        else:
            from inferplex.api.build import build_model
            from inferplex.state.model_state import add_variables, sink_node

            given = _constructor_lists(list(args), sinks, parameters, variables, name)
            sinks, parameters, variables, name = given
            listed = parameters if isinstance(parameters, (list, tuple)) else \
                ([] if parameters is None else [parameters])
            name = name or f"Model{next(_UNNAMED)}"  # OpenVINO's names for models built without one
            self.ir = build_model(model, parameters, name, [sink_node(sink) for sink in sinks])
            self._param_sources = [getattr(p, "_outputs", [None])[0] for p in listed]
            if variables:
                add_variables(self, variables)
        self._name = name or self.ir.graph.name or "model"

    @property
    def friendly_name(self) -> str:
        return self._name

    @friendly_name.setter
    def friendly_name(self, name: str) -> None:
        self.set_friendly_name(name)

    def get_friendly_name(self) -> str:
        return self._name

    def set_friendly_name(self, name: str) -> None:
        """Rename the model (its MODEL_NAME once compiled; the ONNX graph's name when saved)."""
        self._name = str(name)
        self.ir.graph.name = self._name

    def get_name(self) -> str:
        return self._name

    @property
    def name(self) -> str:
        return self._name

    @property
    def inputs(self) -> list[Port]:
        return [Port(v, i, "input", live=True) for i, v in enumerate(self.ir.graph.inputs)]

    @property
    def outputs(self) -> list[Port]:
        return [Port(v, i, "output", live=True) for i, v in enumerate(self.ir.graph.outputs)]

    @keyword_aliases(index="key", tensor_name="key")
    def input(self, key: int | str | Port = 0) -> Port:
        """An input by index, tensor name or port."""
        return find_port(self.inputs, key, "input")

    @keyword_aliases(index="key", tensor_name="key")
    def output(self, key: int | str | Port = 0) -> Port:
        """An output by index, tensor name or port."""
        return find_port(self.outputs, key, "output")

    def get_output_size(self) -> int:
        return len(self.ir.graph.outputs)

    def get_parameters(self) -> list[Any]:
        """The inputs as Parameter nodes (live: ``set_layout`` and shape setters change the model)."""
        from inferplex.api.nodes import Parameter

        return [Parameter.view(value) for value in self.ir.graph.inputs]

    @property
    def parameters(self) -> list[Any]:
        return self.get_parameters()

    def get_results(self) -> list[Any]:
        """The outputs as Result nodes (``input_value(0)`` is the output of the op they read)."""
        from inferplex.api.nodes import Result

        return [Result.view(value) for value in self.ir.graph.outputs]

    @property
    def results(self) -> list[Any]:
        return self.get_results()

    def get_ops(self) -> list[Op]:
        """Every op of the main graph, in graph order: the ops that take affinities and placement.

        Unlike OpenVINO's, the list leaves out the Parameters, Constants and Results, which run
        nowhere (``get_ordered_ops`` lists them).
        """
        return [op_of(node) for node in self.ir.graph]

    def get_ordered_ops(self) -> list[Any]:
        """Parameters, then the ops in topological order, each after the Constants (initializers)
        it is the first to read, then Results: OpenVINO's order."""
        graph = self.ir.graph
        listed: set[int] = set()
        ops: list[Any] = []

        def constants(values: Any) -> None:
            for value in values:
                if (value is not None and id(value) not in listed and value.producer() is None
                        and value.is_initializer() and not value.is_graph_input()):
                    listed.add(id(value))
                    ops.append(source_node(value))

        for node in _topological(graph):
            constants(node.inputs)
            ops.append(op_of(node))
        constants(graph.outputs)
        return [*self.get_parameters(), *ops, *self.get_results()]

    def is_dynamic(self) -> bool:
        """True when some input or output has a dynamic dimension or rank."""
        return any(p.is_dynamic for p in self.inputs + self.outputs)

    @property
    def dynamic(self) -> bool:
        return self.is_dynamic()

    @keyword_aliases(partial_shape="shapes", partial_shapes="shapes", variables_shapes="variable_shapes")
    def reshape(self, shapes: Any, variable_shapes: Any = None) -> None:
        """Set input shapes and re-infer every shape downstream (see :mod:`inferplex.api.reshape`).

        ``shapes``: one shape for a one-input model (``[1, 3, 224, 224]``,
        ``"1..8,3,224,224"``, a PartialShape), or ``{name | index | port: shape}``;
        ``variable_shapes``: ``{variable id: shape}`` for a stateful model's variables.
        A shape the model cannot take raises InputError and leaves the model as it was.
        """
        from inferplex.api.reshape import apply_input_shapes, parse_shape
        from inferplex.state.model_state import reshaped_variables

        _check_reshape_types(shapes)
        if not isinstance(shapes, Mapping):
            if len(self.ir.graph.inputs) != 1:
                raise InputError(f"one shape was given but the model has {len(self.ir.graph.inputs)} "
                                 "inputs; pass {name or index or port: shape}")
            shapes = {0: shapes}
        new = {self.input(key).index: parse_shape(value) for key, value in shapes.items()}
        with reshaped_variables(self.ir, variable_shapes or {}):
            apply_input_shapes(self.ir, new)

    # --- editing, as OpenVINO's Model (see inferplex.api.model_edit) ----------------------

    def add_outputs(self, outputs: Any) -> list[Port]:
        """Make tensors outputs: a tensor name, ``(op name, output index)``, a port, or a list."""
        from inferplex.api import model_edit

        return model_edit.add_outputs(self, outputs)

    def add_results(self, results: Any) -> None:
        from inferplex.api import model_edit

        model_edit.add_results(self, results)

    def remove_result(self, result: Any) -> None:
        from inferplex.api import model_edit

        model_edit.remove_result(self, result)

    @keyword_aliases(value="result")
    def get_result_index(self, result: Any) -> int:
        """The output index of a Result or output port of this model; -1 when it is not one."""
        from inferplex.api import model_edit

        return model_edit.get_result_index(self, result)

    def get_parameter_index(self, parameter: Any) -> int:
        """The input index of a Parameter of this model; -1 when it is not one."""
        from inferplex.api import model_edit

        return model_edit.get_parameter_index(self, parameter)

    @keyword_aliases(parameter_index="index")
    def replace_parameter(self, index: int, parameter: Any) -> None:
        from inferplex.api import model_edit

        model_edit.replace_parameter(self, index, parameter)

    def add_parameters(self, parameters: Any) -> None:
        from inferplex.api import model_edit

        model_edit.add_parameters(self, parameters)

    def remove_parameter(self, parameter: Any) -> None:
        from inferplex.api import model_edit

        model_edit.remove_parameter(self, parameter)

    # --- state: sinks and variables (see inferplex.state) ----------------------------------

    def get_sinks(self) -> list[Op]:
        """The model's ``Assign`` nodes."""
        from inferplex.state import model_state

        return model_state.get_sinks(self)

    @property
    def sinks(self) -> list[Op]:
        return self.get_sinks()

    def add_sinks(self, sinks: Any) -> None:
        from inferplex.state import model_state

        model_state.add_sinks(self, sinks if isinstance(sinks, (list, tuple)) else [sinks])

    def remove_sink(self, sink: Any) -> None:
        from inferplex.state import model_state

        model_state.remove_sink(self, sink)

    @keyword_aliases(value="sink")
    def get_sink_index(self, sink: Any) -> int:
        """The position of an ``Assign`` (node or output) among the sinks; -1 when it is not one."""
        from inferplex.state import model_state

        return model_state.get_sink_index(self, sink)

    def get_variables(self) -> list[Any]:
        """The model's variables (``op.util.Variable``)."""
        from inferplex.state import model_state

        return model_state.get_variables(self)

    @property
    def variables(self) -> list[Any]:
        return self.get_variables()

    def add_variables(self, variables: Any) -> None:
        from inferplex.state import model_state

        model_state.add_variables(self, variables if isinstance(variables, (list, tuple)) else [variables])

    def remove_variable(self, variable: Any) -> None:
        from inferplex.state import model_state

        model_state.remove_variable(self, variable)

    def get_variable_by_id(self, variable_id: str) -> Any:
        from inferplex.state import model_state

        return model_state.get_variable_by_id(self, variable_id)

    def validate_nodes_and_infer_types(self) -> None:
        """Re-infer shapes and types; a ModelError names the node whose inputs do not fit."""
        from inferplex.api import model_edit

        model_edit.validate(self)

    def evaluate(self, output_tensors: Any, input_tensors: Any) -> bool:
        """Run the model once on the CPU, writing the results into ``output_tensors``."""
        from inferplex.api import model_edit

        return model_edit.evaluate(self, output_tensors, input_tensors)

    def get_rt_info(self, path: Any = None) -> Any:
        """The rt_info value at ``path`` (a name or list of names), or all of it as nested dicts."""
        from inferplex.api import model_edit

        return model_edit.get_rt_info(self, path)

    @property
    def rt_info(self) -> Any:
        return self.get_rt_info()

    @keyword_aliases(obj="value")
    def set_rt_info(self, value: Any, path: Any) -> None:
        """Store ``value`` at ``path``; kept in the ONNX model's metadata, so it is saved with it."""
        from inferplex.api import model_edit

        model_edit.set_rt_info(self, value, path)

    def has_rt_info(self, path: Any) -> bool:
        from inferplex.api import model_edit

        return model_edit.has_rt_info(self, path)

    def get_result(self) -> Any:
        """The only Result (OpenVINO's ``get_result``); an error for a model with several."""
        return self.get_results()[find_port(self.outputs, None, "output").index]

    def result(self) -> Any:
        return self.get_result()

    def get_output_op(self, index: int) -> Any:
        return self.get_results()[index]

    def get_output_element_type(self, index: int) -> Any:
        return self.output(index).get_element_type()

    def get_output_partial_shape(self, index: int) -> Any:
        return self.output(index).get_partial_shape()

    def get_output_shape(self, index: int) -> Any:
        return self.output(index).get_shape()

    def to_onnx(self) -> onnx.ModelProto:
        """The model as an ``onnx.ModelProto`` (rt_info included as node metadata)."""
        return ir.serde.serialize_model(self.ir)

    def clone(self) -> Model:
        """A deep copy: reshaping or editing it leaves this model as it is."""
        return Model(ir.serde.deserialize_model(self.to_onnx()), self._name)

    def __repr__(self) -> str:
        """OpenVINO's form: the name, then one line per input and per output port."""
        return f"<Model: {self._name!r}{port_listing(self.inputs, self.outputs)}>"


def _constructor_lists(args: list[Any], sinks: Any, parameters: Any, variables: Any, name: str | None
                       ) -> tuple[list[Any], Any, list[Any], str | None]:
    """Sinks, parameters, variables and name from ``Model(results, ...)``'s positional forms:
    ``(parameters, name)``, ``(sinks, parameters, name)``, ``(parameters, variables, name)`` and
    ``(sinks, parameters, variables, name)``, keywords filling what the positions leave out."""
    from inferplex.state.variables import Variable

    if args and isinstance(args[-1], str) and name is None:
        name = args.pop()
    lists = list(args)
    if len(lists) > 3:
        raise ModelError(f"Model(results, ...) takes at most sinks, parameters, variables and a name; got "
                         f"{len(args) + 1} positional arguments")

    def of_variables(item: Any) -> bool:
        return isinstance(item, (list, tuple)) and bool(item) and all(isinstance(v, Variable) for v in item)

    if lists and of_variables(lists[-1]) and variables is None:
        variables = lists.pop()
    if len(lists) == 2:
        sinks, parameters = lists
    elif len(lists) == 1:
        if parameters is None:
            parameters = lists[0]
        else:
            sinks = lists[0]
    return list(sinks or []), parameters, list(variables or []), name


def _check_reshape_types(shapes: Any) -> None:
    """TypeError for keys and values ``reshape`` does not take, as OpenVINO raises it."""
    from inferplex.api.shapes import Dimension, PartialShape, Shape

    shape_types = (PartialShape, Shape, str, list, tuple)
    items = shapes.items() if isinstance(shapes, Mapping) else [(0, shapes)]
    for key, value in items:
        if not isinstance(key, (int, str, Port)) or isinstance(key, bool):
            raise InputTypeError(f"Incorrect key type {type(key)} to reshape a model, expected keys as "
                            "an input port (ov.Output), int or str.")
        if not isinstance(value, shape_types) and not isinstance(value, Dimension):
            raise InputTypeError(f"Incorrect value type {type(value)} to reshape a model, expected values as "
                            "PartialShape, str, list or tuple.")


def _topological(graph: ir.Graph) -> list[ir.Node]:
    """The graph's nodes in a topological order (the graph itself is not reordered)."""
    placed: set[int] = set()
    order: list[ir.Node] = []
    for node in graph:  # ONNX requires graph order to be topological; re-check it cheaply
        pending = [node]
        while pending:
            current = pending[-1]
            if id(current) in placed:
                pending.pop()
                continue
            producers = [v.producer() for v in current.inputs if v is not None and v.producer() is not None]
            todo = [p for p in producers if p is not None and p.graph is graph and id(p) not in placed]
            if todo:
                pending.extend(todo)
                continue
            placed.add(id(current))
            order.append(current)
            pending.pop()
    return order
