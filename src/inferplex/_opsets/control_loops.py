"""OpenVINO's Loop and TensorIterator: a body (an inferplex Model) run over iterations, as ONNX ``Loop``.

The node returned by ``loop(trip_count, execution_condition)`` or ``tensor_iterator()`` is set up
as OpenVINO's: ``set_function(body)``, (Loop) ``set_special_body_ports([current_iteration_input_idx,
body_condition_output_idx])``, inputs by ``set_invariant_input``, ``set_merged_input`` and
``set_sliced_input``, outputs by ``get_iter_value`` and ``get_concatenated_slices`` (each returns
the new output's port; the ONNX nodes are made again on each, the ports stay valid).

In the ONNX Loop every input is loop-carried: a merged input carries the body's successive value,
an invariant or sliced one its own value unchanged (a sliced Parameter reads the iteration's part
of it, sliced in the body by the iteration number).  A Result read by ``get_iter_value`` is the
loop-carried value it is the successive value of, or else the last of its per-iteration values (an
ONNX scan output); ``get_concatenated_slices`` joins the per-iteration values along ``axis``.  A
TensorIterator's iteration count comes from its sliced inputs, whose sliced dims must be static.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import onnx_ir as ir

from inferplex._opsets.build import INT64_MIN, NodeInput, value_of
from inferplex._opsets.control_flow import (
    _check_model,
    appended,
    body_copy,
    parameter_index,
    publish,
    result_index,
    scalar_int64,
    set_outputs,
)
from inferplex.api.nodes import Node
from inferplex.errors import InputError

__all__ = ["loop", "merged_parameter", "tensor_iterator"]

_body_ids = itertools.count(1)
_MERGED_DOC = "merged input of body Parameter "
"""``doc_string`` of a body input that stands for a merged input (OpenVINO's back edge), before the
body Parameter's name: :func:`merged_parameter` reads it (``passes.LowLatency2`` names variables so)."""
_Slicing = tuple[int, int, int, int, int]
"""``(start, stride, part_size, end, axis)`` of a sliced input or concatenated output."""


def loop(trip_count: NodeInput, execution_condition: NodeInput, name: str | None = None) -> LoopNode:
    """OpenVINO's Loop: the body runs up to ``trip_count`` times (-1: no limit) while
    ``execution_condition`` and then the body's condition output hold."""
    condition = value_of(execution_condition)
    if condition.dtype is not None and condition.dtype != ir.DataType.BOOL:
        raise InputError(f"Loop execution_condition must be boolean, got {condition.dtype.name.lower()}; "
                         "accepted: a boolean scalar or 1-element tensor")
    count = scalar_int64(trip_count, "Loop trip_count")
    data = count.const_value.numpy() if count.const_value is not None else None
    return LoopNode("Loop", None if data is not None and int(data) < 0 else count,
                    scalar_bool(condition), name)


def tensor_iterator(name: str | None = None) -> LoopNode:
    """OpenVINO's TensorIterator: the body runs once per part of its sliced inputs."""
    return LoopNode("TensorIterator", None, None, name)


def scalar_bool(value: ir.Value) -> ir.Value:
    """A boolean value as a scalar (a 1-element tensor reshaped)."""
    if value.shape is not None and len(value.shape) == 0:
        return value
    node = ir.node("Reshape", [value, value_of(np.zeros(0, dtype=np.int64))])
    out = node.outputs[0]
    out.type, out.shape = ir.TensorType(ir.DataType.BOOL), ir.Shape([])
    return out


class LoopNode(Node):
    """OpenVINO's Loop or TensorIterator op, built as one ONNX ``Loop`` (see the module)."""

    def __init__(self, type_name: str, trip_count: ir.Value | None, condition: ir.Value | None,
                 name: str | None) -> None:
        super().__init__(type_name, [], [], name=name)
        self._version_id = "opset5" if type_name == "Loop" else "opset1"
        self._trip, self._condition = trip_count, condition
        self._body: Any = None
        self._special = [-1, -1]
        self._inputs: list[tuple[str, int, ir.Value, Any]] = []  # kind, Parameter index, value, detail
        self._results: list[tuple[str, int, _Slicing | None]] = []  # kind, Result index, slicing

    def set_function(self, body: Any) -> None:
        """The body Model run at each iteration."""
        self._body = _check_model(body, f"{self._type_name} body")

    set_body = set_function

    def get_function(self) -> Any:
        return self._body

    get_body = get_function

    def set_special_body_ports(self, ports: Any) -> None:
        """``[current_iteration_input_idx, body_condition_output_idx]``: the body Parameter that
        receives the iteration number and the body Result that decides whether to go on (-1: none)."""
        items = list(getattr(ports, "__iter__", lambda: iter([ports]))())
        if self._type_name != "Loop" or len(items) != 2:
            raise InputError(f"set_special_body_ports takes [current_iteration_input_idx, "
                             f"body_condition_output_idx] on a Loop, got {ports!r} on {self._type_name}")
        self._special = [int(items[0]), int(items[1])]

    def get_special_body_ports(self) -> list[int]:
        return list(self._special)

    def set_invariant_input(self, body_parameter: Any, value: NodeInput) -> None:
        """Feed ``value`` unchanged to ``body_parameter`` at every iteration."""
        self._add_input("invariant", body_parameter, value, None)

    def set_merged_input(self, body_parameter: Any, initial_value: NodeInput, successive_value: Any) -> None:
        """``body_parameter`` reads ``initial_value`` at the first iteration, then the body Result
        ``successive_value`` of the iteration before."""
        self._add_input("merged", body_parameter, initial_value,
                        result_index(self._need_body("set_merged_input"), successive_value, "body"))

    def set_sliced_input(self, parameter: Any, value: NodeInput, start: int, stride: int, part_size: int,
                         end: int, axis: int) -> None:
        """``parameter`` reads a part of ``value`` along ``axis`` at each iteration: the part of
        ``part_size`` at ``start`` + iteration * ``stride`` (``end``: the last index, -1 the dim's end;
        a negative stride walks from ``start`` back to ``end``)."""
        slicing = _slicing(start, stride, part_size, end, axis, "set_sliced_input")
        self._add_input("sliced", parameter, value, slicing)

    def get_iter_value(self, body_value: Any, iteration: int = -1) -> Any:
        """An output: the body Result ``body_value`` at the last iteration (``iteration`` -1)."""
        if int(iteration) != -1:
            raise InputError(f"get_iter_value reads the last iteration (iteration=-1), not {iteration}")
        return self._add_output("iter", body_value, None)

    def get_concatenated_slices(self, value: Any, start: int, stride: int, part_size: int, end: int,
                                axis: int) -> Any:
        """An output: the body Result ``value`` of every iteration joined along ``axis`` (in
        reverse order for a negative ``stride``)."""
        return self._add_output("concat", value,
                                _slicing(start, stride, part_size, end, axis, "get_concatenated_slices"))

    def get_num_iterations(self) -> int:
        """The iteration count set by the sliced inputs (-1 when none gives it)."""
        counts = [_count(v, s) for kind, _, v, s in self._inputs if kind == "sliced"]
        return counts[0] if counts and counts[0] is not None else -1

    def _input_values(self) -> list[ir.Value]:
        head = [v for v in (self._trip, self._condition) if v is not None]
        return [*head, *(v for _, _, v, _ in self._inputs)]

    def _need_body(self, call: str) -> Any:
        if self._body is None:
            raise InputError(f"{self._type_name}.{call} needs the body: call set_function(body) first")
        return self._body

    def _add_input(self, kind: str, parameter: Any, value: NodeInput, detail: Any) -> None:
        index = parameter_index(self._need_body(f"set_{kind}_input"), parameter, self._type_name)
        entry = (kind, index, value_of(value), detail)
        if self._results:
            appended(self._inputs, entry, self._remake)
        else:
            self._inputs.append(entry)

    def _add_output(self, kind: str, result: Any, slicing: _Slicing | None) -> Any:
        body = self._need_body("get_iter_value" if kind == "iter" else "get_concatenated_slices")
        appended(self._results, (kind, result_index(body, result, f"{self._type_name} body"), slicing),
                 self._remake)
        return self.output(len(self._results) - 1)

    def _remake(self) -> None:
        prefix = f"{self.get_friendly_name()}/{next(_body_ids)}/"
        graph = body_copy(self._body, prefix)
        params, results = list(graph.inputs), list(graph.outputs)
        fed = {index for _, index, _, _ in self._inputs} | {self._special[0]}
        missing = [p.name for i, p in enumerate(self._body.ir.graph.inputs) if i not in fed]
        if missing:
            raise InputError(f"{self._type_name} body Parameter(s) {', '.join(map(repr, missing))} have no "
                             "input; feed each with set_invariant_input, set_merged_input or "
                             "set_sliced_input")
        iteration = _input(f"{prefix}iter", ir.DataType.INT64, [])
        cond_in = _input(f"{prefix}cond", ir.DataType.BOOL, [])
        carried: list[ir.Value] = []
        carried_out: list[ir.Value] = []
        for kind, index, value, detail in self._inputs:
            shape = params[index].shape if kind == "merged" else value.shape
            inside = _input(f"{prefix}carried{len(carried)}", value.dtype, shape)
            if kind == "merged":
                inside.doc_string = _MERGED_DOC + (self._body.ir.graph.inputs[index].name or str(index))
            carried.append(inside)
            feed = _slice(graph, inside, iteration, detail) if kind == "sliced" else inside
            params[index].replace_all_uses_with(feed, replace_graph_outputs=True)
            carried_out.append(results[detail] if kind == "merged" else inside)
        if self._special[0] >= 0:
            counter = params[self._special[0]]
            made = _emit(graph, "Cast", [iteration], {"to": int(counter.dtype or ir.DataType.INT64)})
            if counter.shape is not None and len(counter.shape) == 1:
                made = _emit(graph, "Reshape", [made, value_of(np.ones(1, dtype=np.int64))])
            counter.replace_all_uses_with(made, replace_graph_outputs=True)
        cond_out = scalar_bool(results[self._special[1]]) if self._special[1] >= 0 else cond_in
        if cond_out.producer() is not None and cond_out.producer().graph is None:  # type: ignore[union-attr]
            graph.append(cond_out.producer())  # type: ignore[arg-type]
        merged = {detail: i for i, (kind, _, _, detail) in enumerate(self._inputs) if kind == "merged"}
        scans = [index for kind, index, _ in self._results if kind == "concat" or index not in merged]
        graph.inputs.clear()
        graph.inputs.extend([iteration, cond_in, *carried])
        set_outputs(graph, [cond_out, *carried_out, *(results[i] for i in scans)], f"{prefix}out")
        _finish(graph, prefix)
        count = self._loop_count()
        known = count.const_value if count is not None and self._type_name == "TensorIterator" else None
        node = ir.node("Loop", [count, self._condition, *(v for _, _, v, _ in self._inputs)],
                       {"body": graph}, num_outputs=len(carried) + len(scans), name=self.get_friendly_name())
        for out, (_, _, value, _) in zip(node.outputs, self._inputs, strict=False):
            out.type, out.shape = value.type, value.shape
        for out, index in zip(node.outputs[len(carried):], scans, strict=True):
            dims = results[index].shape
            first = None if known is None else int(known.numpy())
            out.type, out.shape = results[index].type, None if dims is None else ir.Shape([first, *dims])
        finals, extra = [], []
        for kind, index, slicing in self._results:
            if kind == "iter" and index in merged:
                finals.append(node.outputs[merged[index]])
                continue
            scan = node.outputs[len(carried) + scans.index(index)]
            made_nodes, final = _last(scan) if kind == "iter" else _joined(scan, slicing)  # type: ignore[arg-type]
            extra += made_nodes
            finals.append(final)
        publish(self, [node, *extra], node, finals)

    def _loop_count(self) -> ir.Value | None:
        if self._type_name == "Loop":
            return self._trip
        counts = {_count(v, s) for kind, _, v, s in self._inputs if kind == "sliced"}
        if not counts or None in counts or len(counts) > 1:
            raise InputError("a TensorIterator needs sliced inputs (set_sliced_input) whose sliced dims are "
                             f"static and give one iteration count; they give {sorted(map(str, counts))}")
        return value_of(np.asarray(counts.pop(), dtype=np.int64))


def merged_parameter(body_input: ir.Value) -> str | None:
    """The body Parameter's name where ``body_input`` (a Loop body's carried input) stands for a merged
    input, a value the body updates on each iteration; None for invariant and sliced inputs."""
    doc = body_input.doc_string or ""
    return doc[len(_MERGED_DOC):] if doc.startswith(_MERGED_DOC) else None


def _slicing(start: int, stride: int, part_size: int, end: int, axis: int, call: str) -> _Slicing:
    if int(stride) == 0 or int(part_size) <= 0:
        raise InputError(f"{call} needs a nonzero stride and a positive part_size, got stride {stride}, "
                         f"part_size {part_size}")
    return int(start), int(stride), int(part_size), int(end), int(axis)


def _count(value: ir.Value, slicing: _Slicing) -> int | None:
    """The number of parts of a sliced input (None when its sliced dim is not static)."""
    start, stride, part, end, axis = slicing
    dims = value.shape
    dim = dims[axis] if dims is not None and -len(dims) <= axis < len(dims) else None
    if not isinstance(dim, int):
        return None
    first, last = start + dim if start < 0 else start, end + dim if end < 0 else end
    return (abs(last - first) + 1 - part) // abs(stride) + 1


def _finish(graph: ir.Graph, prefix: str) -> None:
    """The body made whole: the constants its nodes read as Constant nodes in it, a name for each
    value, its nodes in order."""
    inputs = {id(v) for v in graph.inputs}
    numbers = itertools.count()
    for node in list(graph):
        for position, value in enumerate(node.inputs):
            if value is None or value.producer() is not None or value.const_value is None or \
                    id(value) in inputs:
                continue
            constant = ir.node("Constant", [], {"value": value.const_value})
            out = constant.outputs[0]
            out.name, out.type, out.shape = f"{prefix}const{next(numbers)}", value.type, value.shape
            graph.insert_before(node, constant)
            node.replace_input_with(position, out)
    for node in graph:
        node.name = node.name or f"{prefix}{node.op_type}{next(numbers)}"
        for value in node.outputs:
            value.name = value.name or f"{prefix}value{next(numbers)}"
    graph.sort()


def _input(name: str, dtype: ir.DataType | None, shape: Any) -> ir.Value:
    return ir.Value(name=name, type=ir.TensorType(dtype or ir.DataType.FLOAT),
                    shape=None if shape is None else ir.Shape(shape))


def _emit(graph: ir.Graph, op_type: str, inputs: list[ir.Value | None], attrs: dict[str, Any] | None = None,
          ) -> ir.Value:
    node = ir.node(op_type, inputs, attrs or {})
    graph.append(node)
    return node.outputs[0]


def _slice(graph: ir.Graph, data: ir.Value, iteration: ir.Value, slicing: _Slicing) -> ir.Value:
    """The iteration's part of ``data`` (nodes added to the body ``graph``)."""
    start, stride, part, _, axis = slicing
    rank = len(data.shape) if data.shape is not None else None
    if rank is None or not -rank <= axis < rank:
        raise InputError(f"set_sliced_input axis {axis} needs an input of known rank above it, got "
                         f"{'unknown rank' if rank is None else f'rank {rank}'}")
    axis %= rank

    def const(*numbers: int) -> ir.Value:
        return value_of(np.asarray(numbers, dtype=np.int64))

    step = _emit(graph, "Mul", [_emit(graph, "Reshape", [iteration, const(1)]), const(stride)])
    first = const(start)
    if start < 0:
        first = _emit(graph, "Add", [_emit(graph, "Shape", [data], {"start": axis, "end": axis + 1}), first])
    if stride > 0:
        begin = _emit(graph, "Add", [first, step])
        stop = _emit(graph, "Add", [begin, const(part)])
    else:
        stop = _emit(graph, "Add", [_emit(graph, "Add", [first, const(1)]), step])
        begin = _emit(graph, "Sub", [stop, const(part)])
    out = _emit(graph, "Slice", [data, begin, stop, const(axis)])
    out.type = data.type
    if data.shape is not None:
        out.shape = ir.Shape([part if i == axis else d for i, d in enumerate(data.shape)])
    return out


def _last(scan: ir.Value) -> tuple[list[ir.Node], ir.Value]:
    """The last iteration's value of a scan output."""
    node = ir.node("Gather", [scan, value_of(np.asarray(-1, dtype=np.int64))], {"axis": 0})
    out = node.outputs[0]
    out.type, out.shape = scan.type, None if scan.shape is None else ir.Shape(list(scan.shape)[1:])
    return [node], out


def _joined(scan: ir.Value, slicing: _Slicing) -> tuple[list[ir.Node], ir.Value]:
    """A scan output's per-iteration values joined along ``axis`` (reversed for a negative stride)."""
    _, stride, _, _, axis = slicing
    if scan.shape is None:
        raise InputError("get_concatenated_slices needs a body Result of known rank")
    rank = len(scan.shape) - 1
    if not -rank <= axis < rank:
        raise InputError(f"get_concatenated_slices axis {axis} is out of range for a rank-{rank} Result")
    axis %= rank
    made: list[ir.Node] = []
    current = scan
    if stride < 0:
        made.append(ir.node("Slice", [scan, *(value_of(np.asarray([n], dtype=np.int64))
                                                for n in (-1, INT64_MIN, 0, -1))]))
        current = made[-1].outputs[0]
    perm = [*range(1, axis + 1), 0, *range(axis + 1, rank + 1)]
    made.append(ir.node("Transpose", [current], {"perm": perm}))
    moved = made[-1].outputs[0]
    before = ir.node("Shape", [moved], {"start": 0, "end": axis})
    after = ir.node("Shape", [moved], {"start": axis + 2})
    shape = ir.node("Concat", [before.outputs[0], value_of(np.asarray([-1], dtype=np.int64)),
                               after.outputs[0]], {"axis": 0})
    reshape = ir.node("Reshape", [moved, shape.outputs[0]])
    made += [before, after, shape, reshape]
    out = reshape.outputs[0]
    dims = list(scan.shape)
    count, part = dims[0], dims[axis + 1]
    joined = count * part if isinstance(count, int) and isinstance(part, int) else None
    out.type, out.shape = scan.type, ir.Shape([joined if i == axis else d for i, d in enumerate(dims[1:])])
    return made, out
