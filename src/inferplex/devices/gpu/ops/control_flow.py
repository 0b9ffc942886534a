"""Lowerings: If, Loop and Scan, whose bodies are ONNX subgraphs.

A body is lowered once, node by node, with the same registry as the main graph
(:class:`Body`); running it is a Python walk over those lowered functions.  A
body node the registry refuses makes the whole control-flow node refused, with
that node's reason.  Values may be tensors, sequences (Python lists) or optionals
(the value or None), as in :mod:`.sequences`.  Values a body reads from enclosing graphs (ONNX's implicit
captures) are passed to the control-flow node's function after its own inputs,
in the order :func:`outer_values` lists them, so the program builder feeds them
like any input.  The branch taken, the trip count and the loop condition are read
back to the host, so programs holding these ops run eagerly (no CUDA graphs).
"""

from __future__ import annotations

import functools
import weakref
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import onnx_ir as ir
import torch

from inferplex._subgraphs import outer_values
from inferplex.devices.gpu.ops._common import (
    EXACT_DTYPES,
    VALUE_KINDS,
    eager,
    takes_device,
    torch_dtype,
    value_kind,
)
from inferplex.devices.gpu.registry import NodeInfo, find_lowering, node_info, register
from inferplex.errors import CompileError

__all__ = ["Body", "bodies_reason", "lower_bodies", "outer_values"]


_BODY_OPSETS: weakref.WeakKeyDictionary[ir.Graph, dict[str, int]] = weakref.WeakKeyDictionary()
"""The opsets in force in each body lowered so far: a nested body's graph declares none itself."""


def _root_opsets(node: ir.Node) -> dict[str, int]:
    graph = node.graph
    if graph is not None and graph in _BODY_OPSETS:
        return _BODY_OPSETS[graph]
    opsets = dict(getattr(graph, "opset_imports", {}) or {})
    return {("" if k == "ai.onnx" else k): int(v) for k, v in opsets.items()}


def _single(results: Sequence[torch.Tensor]) -> Any:
    """A node with one output returns its tensor, not a 1-tuple (the program builder's convention)."""
    return results[0] if len(results) == 1 else tuple(results)


def _empty_scans(values: Sequence[ir.Value], device: torch.device, op: str,
                 axes: Sequence[int] | None = None) -> list[torch.Tensor]:
    """The scan outputs of a Loop or Scan that ran no iteration: empty along the scan axis.

    Their per-iteration shape and type are what the body declares, ONNX Runtime's
    answer: a dimension the body leaves symbolic is 0, and a body output of unknown
    rank gives a 1-D empty tensor.  A body output of unknown type cannot say.
    """
    empties = []
    for k, value in enumerate(values):
        if value.dtype is None or value.dtype not in EXACT_DTYPES:
            raise CompileError(f"a {op} that runs no iteration needs the element type of its scan "
                               f"output {value.name!r} (its body declares {value.dtype})")
        dims = [d if isinstance(d, int) else 0 for d in value.shape or ()]
        axis = 0 if axes is None else axes[k] % (len(dims) + 1)
        dims.insert(axis, 0)
        empties.append(torch.empty(dims, dtype=torch_dtype(value.dtype), device=device))
    return empties


def _held_type_problem(info: NodeInfo, held: frozenset[ir.DataType]) -> str | None:
    """What the main graph's analysis checks first: every known element type is computed by torch
    or taken by this lowering (uint16/32/64 and float8 only where it says so)."""
    for kind, dtypes in (("input", info.input_dtypes), ("output", info.output_dtypes)):
        for index, dtype in enumerate(dtypes):
            if dtype is not None and dtype not in EXACT_DTYPES and dtype not in held:
                return f"{kind} {index} has element type {dtype.name}, which torch cannot compute"
    return None


class Body:
    """One subgraph, lowered node by node; ``reason`` says why it cannot be (None: it can)."""

    def __init__(self, graph: ir.Graph, opsets: dict[str, int]) -> None:
        self.graph = graph
        _BODY_OPSETS[graph] = opsets
        self.reason: str | None = None
        self.steps: list[tuple[ir.Node, Callable[..., Any], list[ir.Value]]] = []
        self.initializers = {v: torch.from_numpy(v.const_value.numpy().copy())
                             for v in graph.initializers.values() if v.const_value is not None}
        self._on_device: dict[torch.device, dict[ir.Value, torch.Tensor]] = {}
        for node in graph:
            opset = opsets.get(node.domain if node.domain != "ai.onnx" else "", 1)
            lowering = find_lowering(node.domain, node.op_type, opset)
            if lowering is None:
                self.reason = f"its body holds {node.op_type}, which has no GPU lowering at opset {opset}"
                return
            info = node_info(node, opset)
            problem = _held_type_problem(info, lowering.held_dtypes)
            if problem is None and lowering.supports is not None:
                problem = lowering.supports(info)
            if problem is not None:
                self.reason = f"its body's {node.op_type} node: {problem}"
                return
            try:
                fn = lowering.lower(info)
            except Exception as e:  # noqa: BLE001 - a body node that cannot lower refuses the whole node
                self.reason = f"its body's {node.op_type} node cannot lower: {e}"
                return
            self.steps.append((node, fn, outer_values(node)))

    def run(self, scope: dict[ir.Value, Any], inputs: Sequence[torch.Tensor],
            device: torch.device) -> list[torch.Tensor]:
        env = dict(scope)
        on_device = self._on_device.get(device)
        if on_device is None:  # copied once per device, never inside a captured run
            on_device = self._on_device[device] = {v: t.to(device) for v, t in self.initializers.items()}
        env.update(on_device)
        env.update(zip(self.graph.inputs, inputs, strict=False))
        for node, fn, captured in self.steps:
            if node.op_type == "Constant" and node.domain in ("", "ai.onnx"):
                result = fn(device=device)
            else:
                args = [None if v is None else env[v] for v in node.inputs]
                extra = {"device": device} if getattr(fn, "takes_device", False) else {}
                result = fn(*args, *(env[v] for v in captured), **extra)
            # Several outputs come as a tuple; a list is one value (a sequence).
            results = result if isinstance(result, tuple) else (result,)
            env.update((v, r) for v, r in zip(node.outputs, results, strict=False) if v is not None)
        return [env[v] for v in self.graph.outputs]

    @property
    def data_dependent(self) -> bool:
        """Whether a body node reads tensor values back to the host (see ``_common.eager``)."""
        return any(getattr(fn, "data_dependent", False) or node.op_type in ("If", "Loop", "Scan")
                   for node, fn, _ in self.steps)


def lower_bodies(info: NodeInfo, names: Iterable[str]) -> list[Body]:
    opsets = _root_opsets(info.node)
    bodies = []
    for name in names:
        graph = info.attr(name)
        if not isinstance(graph, ir.Graph):
            raise CompileError(f"{info.op_type} needs the graph attribute {name!r}")
        bodies.append(Body(graph, opsets))
    return bodies


def bodies_reason(info: NodeInfo, names: Iterable[str]) -> str | None:
    for name in names:
        if not isinstance(info.attr(name), ir.Graph):
            return f"{info.op_type} needs the graph attribute {name!r}"
    for value in [*info.node.inputs, *info.node.outputs, *outer_values(info.node)]:
        if value is not None and value_kind(value.type) not in VALUE_KINDS:
            return f"{info.op_type} over {value.type} values is not supported"
    return next((b.reason for b in lower_bodies(info, names) if b.reason is not None), None)


# --- If ----------------------------------------------------------------------------------


@register("If", supports=lambda info: bodies_reason(info, ("then_branch", "else_branch")))
def _if(info: NodeInfo) -> Callable[..., Any]:
    then_body, else_body = lower_bodies(info, ("then_branch", "else_branch"))
    outer = outer_values(info.node)
    known = info.const(0)
    if known is not None:
        # A constant condition picks the branch now: no read-back, so CUDA graphs stay possible
        # unless the branch itself reads tensor values.
        body = then_body if bool(known.reshape(-1)[0]) else else_body

        def run_branch(cond: torch.Tensor, *captured: torch.Tensor) -> Any:
            return _single(body.run(dict(zip(outer, captured, strict=True)), [], cond.device))

        return eager(run_branch) if body.data_dependent else run_branch

    def run_if(cond: torch.Tensor, *captured: torch.Tensor) -> Any:
        body = then_body if bool(cond.reshape(-1)[0]) else else_body
        return _single(body.run(dict(zip(outer, captured, strict=True)), [], cond.device))

    return eager(run_if)


# --- Loop --------------------------------------------------------------------------------


@register("Loop", versions=(1, None), supports=lambda info: bodies_reason(info, ("body",)))
def _loop(info: NodeInfo) -> Callable[..., Any]:
    (body,) = lower_bodies(info, ("body",))
    outer = outer_values(info.node)
    carried = len(info.node.inputs) - 2

    @takes_device
    def run_loop(trip: torch.Tensor | None, cond: torch.Tensor | None, *rest: Any,
                 device: torch.device | None = None) -> Any:
        state, captured = list(rest[:carried]), rest[carried:]
        scope = dict(zip(outer, captured, strict=True))
        if device is None:  # not given by the builder: the first tensor's (state may be lists)
            device = next(t.device for t in (trip, cond, *rest) if isinstance(t, torch.Tensor))
        limit = None if trip is None else int(trip.reshape(-1)[0])
        going = True if cond is None else bool(cond.reshape(-1)[0])
        scans: list[list[torch.Tensor]] = []
        i = 0
        while going and (limit is None or i < limit):
            counter = torch.tensor(i, dtype=torch.int64, device=device)
            flag = torch.tensor(going, dtype=torch.bool, device=device)
            outs = body.run(scope, [counter, flag, *state], device)
            going = bool(outs[0].reshape(-1)[0])
            state = outs[1:1 + carried]
            for k, piece in enumerate(outs[1 + carried:]):
                if len(scans) <= k:
                    scans.append([])
                scans[k].append(piece)
            i += 1
        if i == 0:
            return _single([*state, *_empty_scans(body.graph.outputs[1 + carried:], device, "Loop")])
        return _single([*state, *(torch.stack(s) for s in scans)])

    return eager(run_loop)


# --- Scan --------------------------------------------------------------------------------


def _scan_rows(scan_once: Callable[..., list[torch.Tensor]], states: list[torch.Tensor],
               xs: list[torch.Tensor], lengths: torch.Tensor | None) -> list[torch.Tensor]:
    """Scan-8: ``scan_once`` over each batch row, for its first ``lengths[b]`` steps (all without
    lengths), its scan outputs zero-padded to the longest row as ONNX Runtime pads them."""
    rows = []
    longest = xs[0].shape[1]
    for b in range(xs[0].shape[0]):
        steps = longest if lengths is None else int(lengths[b])
        row = scan_once([s[b] for s in states], [x[b, :steps] for x in xs])
        for k in range(len(states), len(row)):
            missing = longest - row[k].shape[0]
            if missing > 0:
                row[k] = torch.cat([row[k], row[k].new_zeros((missing, *row[k].shape[1:]))])
        rows.append(row)
    return [torch.stack(list(column)) for column in zip(*rows, strict=True)]


def _scan_supports(info: NodeInfo) -> str | None:
    return bodies_reason(info, ("body",))


@register("Scan", versions=(8, None), supports=_scan_supports)
def _scan(info: NodeInfo) -> Callable[..., Any]:
    (body,) = lower_bodies(info, ("body",))
    outer = outer_values(info.node)
    batched = info.opset < 9  # Scan-8: a leading batch axis and a sequence_lens input
    own = len(info.node.inputs) - (1 if batched else 0)
    scans_in = int(info.attr("num_scan_inputs"))
    states_n = own - scans_in
    in_axes = list(info.attr("scan_input_axes", [0] * scans_in))
    in_dirs = list(info.attr("scan_input_directions", info.attr("directions", [0] * scans_in)))
    scans_out = len(body.graph.outputs) - states_n
    out_axes = list(info.attr("scan_output_axes", [0] * scans_out))
    out_dirs = list(info.attr("scan_output_directions", [0] * scans_out))

    def scan_once(scope: dict[ir.Value, Any], states: list[torch.Tensor],
                  xs: Sequence[torch.Tensor], device: torch.device) -> list[torch.Tensor]:
        axes = [a % x.dim() for a, x in zip(in_axes, xs, strict=True)]
        steps = xs[0].shape[axes[0]] if xs else 0
        if steps == 0:
            return [*states, *_empty_scans(body.graph.outputs[states_n:], device, "Scan", out_axes)]
        pieces: list[list[torch.Tensor]] = [[] for _ in range(scans_out)]
        for t in range(steps):
            slices = [x.select(a, steps - 1 - t if d else t)
                      for x, a, d in zip(xs, axes, in_dirs, strict=True)]
            outs = body.run(scope, [*states, *slices], device)
            states = outs[:states_n]
            for k, piece in enumerate(outs[states_n:]):
                pieces[k].append(piece)
        results = []
        for k, parts in enumerate(pieces):
            if out_dirs[k]:
                parts = parts[::-1]
            axis = out_axes[k] % (parts[0].dim() + 1)
            results.append(torch.stack(parts, dim=axis))
        return [*states, *results]

    def run_scan(*args: torch.Tensor) -> Any:
        # Scan-8's sequence_lens: each row runs its first steps, its scan outputs zero-padded
        lengths = args[0] if batched and info.has_input(0) else None
        args = args[1:] if batched else args
        mine, captured = args[:own], args[own:]
        scope = dict(zip(outer, captured, strict=True))
        device = mine[0].device
        states, xs = list(mine[:states_n]), list(mine[states_n:])
        if not batched:
            return _single(scan_once(scope, states, xs, device))
        return _single(_scan_rows(functools.partial(scan_once, scope, device=device), states, xs, lengths))

    return eager(run_scan)
