"""Split a model into cycle-free, topologically ordered subgraphs by affinity.

Grouping (:func:`group_by_affinity`) works in two passes, both deterministic:

1. *Levels.*  Walking the ops in topological order, an op's level is the
   highest level among its producers, plus one for each producer on another
   device.  Ops of one device and one level form a group.  A cross-device edge
   always goes to a higher level, so ordering groups by level is a valid
   execution order: the groups can never form a cycle (the A -> B -> A case
   through another device that a naive union of neighbours runs into).
2. *Merges.*  Two groups of one device merge when no path joins them through a
   third group (the check torch.fx's partitioner makes before each merge); this
   puts independent branches of one device into one subgraph.

Constants (initializers and ``Constant`` ops) belong to no group: each subgraph
that reads one gets its own copy when it is extracted (:func:`extract_submodel`).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

import onnx_ir as ir

from inferplex.placement.graph import GraphIndex, name_of, value_nbytes
from inferplex.placement.plan import SubgraphPlan, TransferPlan

__all__ = ["build_subgraphs", "extract_submodel", "group_by_affinity", "split_into_subgraphs",
           "transfers_between"]

_log = logging.getLogger("inferplex")
_MAX_MERGE_GROUPS = 400  # above this the quadratic merge pass is skipped (levels stay valid)


def _levels(index: GraphIndex, affinity: Mapping[str, str]) -> dict[str, int]:
    level: dict[str, int] = {}
    for node in index.placed_nodes():
        device = affinity[name_of(node)]
        level[name_of(node)] = max((level[name_of(p)] + (affinity[name_of(p)] != device)
                                for p in index.predecessors(node)), default=0)
    return level


def _group_edges(index: GraphIndex, group_of: Mapping[str, int]) -> dict[int, set[int]]:
    edges: dict[int, set[int]] = {g: set() for g in set(group_of.values())}
    for node in index.placed_nodes():
        for pred in index.predecessors(node):
            if group_of[name_of(pred)] != group_of[name_of(node)]:
                edges[group_of[name_of(pred)]].add(group_of[name_of(node)])
    return edges


def _joined_through_third(edges: Mapping[int, set[int]], a: int, b: int) -> bool:
    """Is there a path a -> x -> ... -> b (or b -> ... -> a) with x not in {a, b}?"""
    for start, goal in ((a, b), (b, a)):
        stack = [s for s in edges[start] if s != goal]
        seen = set(stack)
        while stack:
            current = stack.pop()
            if current == goal:
                return True
            for nxt in edges[current]:
                if nxt not in seen:
                    seen.add(nxt)
                    stack.append(nxt)
    return False


def _merge_groups(index: GraphIndex, group_of: dict[str, int], device_of: dict[int, str]) -> None:
    """Merge same-device groups that no third group separates; edits ``group_of`` in place."""
    if len(device_of) > _MAX_MERGE_GROUPS:
        _log.info("inferplex: %d subgraphs; skipping the merge pass", len(device_of))
        return
    merged = True
    while merged:
        merged = False
        edges = _group_edges(index, group_of)
        order = sorted(device_of)
        for i, a in enumerate(order):
            for b in order[i + 1:]:
                if device_of[a] == device_of[b] and not _joined_through_third(edges, a, b):
                    for name, group in group_of.items():
                        if group == b:
                            group_of[name] = a
                    del device_of[b]
                    merged = True
                    break
            if merged:
                break


def _ordered_groups(index: GraphIndex, group_of: Mapping[str, int]) -> list[list[ir.Node]]:
    """Groups in a topological order of the group graph; ties by first op position."""
    members: dict[int, list[ir.Node]] = {}
    for node in index.placed_nodes():
        members.setdefault(group_of[name_of(node)], []).append(node)
    edges = _group_edges(index, group_of)
    indegree = {g: 0 for g in members}
    for targets in edges.values():
        for t in targets:
            indegree[t] += 1
    first = {g: index.position[name_of(nodes[0])] for g, nodes in members.items()}
    ready = sorted((g for g, d in indegree.items() if d == 0), key=first.__getitem__)
    result: list[list[ir.Node]] = []
    while ready:
        group = ready.pop(0)
        result.append(members[group])
        for t in sorted(edges[group]):
            indegree[t] -= 1
            if indegree[t] == 0:
                ready.append(t)
        ready.sort(key=first.__getitem__)
    if len(result) != len(members):  # pragma: no cover - levels make this impossible
        raise RuntimeError("HETERO split produced a cycle between subgraphs")
    return result


def group_by_affinity(index: GraphIndex, affinity: Mapping[str, str]) -> list[list[ir.Node]]:
    """Ops grouped into cycle-free subgraphs, in execution order (see the module docstring)."""
    level = _levels(index, affinity)
    keys: dict[tuple[int, str], int] = {}
    group_of: dict[str, int] = {}
    device_of: dict[int, str] = {}
    for node in index.placed_nodes():
        key = (level[name_of(node)], affinity[name_of(node)])
        if key not in keys:
            keys[key] = len(keys)
            device_of[keys[key]] = key[1]
        group_of[name_of(node)] = keys[key]
    # Number groups by level so the merge pass prefers the earliest partner.
    renumber = {g: i for i, (_, g) in enumerate(sorted(keys.items(), key=lambda kv: (kv[0][0], kv[1])))}
    group_of = {n: renumber[g] for n, g in group_of.items()}
    device_of = {renumber[g]: d for g, d in device_of.items()}
    _merge_groups(index, group_of, device_of)
    return _ordered_groups(index, group_of)


def build_subgraphs(index: GraphIndex, groups: Sequence[Sequence[ir.Node]],
                    devices: Sequence[str]) -> tuple[SubgraphPlan, ...]:
    """Boundary values of each group; ``devices[i]`` runs ``groups[i]``."""
    group_of = {name_of(n): i for i, nodes in enumerate(groups) for n in nodes}
    graph_outputs = {name_of(v) for v in index.graph.outputs}
    plans: list[SubgraphPlan] = []
    for i, nodes in enumerate(groups):
        inputs: dict[str, None] = {}
        outputs: dict[str, None] = {}
        for node in nodes:
            for value in index.reads[name_of(node)]:
                producer = index.producer(value)
                outside = producer is None or group_of.get(name_of(producer)) != i
                if outside and index.is_transferable(value):
                    inputs[name_of(value)] = None
            for value in node.outputs:
                users = index.consumers.get(name_of(value), ())
                if name_of(value) in graph_outputs or any(group_of.get(u, i) != i for u in users):
                    outputs[name_of(value)] = None
        plans.append(SubgraphPlan(i, devices[i], tuple(name_of(n) for n in nodes),
                                  tuple(inputs), tuple(outputs)))
    return tuple(plans)


def split_into_subgraphs(index: GraphIndex, affinity: Mapping[str, str]) -> tuple[SubgraphPlan, ...]:
    """Subgraphs of ``index``'s graph for ``affinity`` (node name -> full device name)."""
    groups = group_by_affinity(index, affinity)
    return build_subgraphs(index, groups, [affinity[name_of(g[0])] for g in groups])


def transfers_between(index: GraphIndex, subgraphs: Sequence[SubgraphPlan],
                      dims: Mapping[str, int] | None = None) -> tuple[TransferPlan, ...]:
    """Every value that one subgraph produces and a later one reads."""
    values = ir.convenience.create_value_mapping(index.graph)
    source = {name: s.index for s in subgraphs for name in s.outputs}
    found: list[TransferPlan] = []
    for sub in subgraphs:
        for name in sub.inputs:
            if name in source:
                src = subgraphs[source[name]]
                found.append(TransferPlan(name, src.index, sub.index, src.device, sub.device,
                                          value_nbytes(values[name], dims)))
    return tuple(found)


def extract_submodel(model: ir.Model, index: GraphIndex, subgraph: SubgraphPlan) -> ir.Model:
    """A standalone model running ``subgraph``; the constants it reads are copied in."""
    values = ir.convenience.create_value_mapping(index.graph)
    graph = ir.convenience.extract(index.graph, [values[n] for n in subgraph.inputs],
                                   [values[n] for n in subgraph.outputs])
    graph.name = f"{index.graph.name or 'model'}_subgraph{subgraph.index}"
    return ir.Model(graph, ir_version=model.ir_version, producer_name="inferplex.hetero",
                    functions=list(model.functions.values()))
