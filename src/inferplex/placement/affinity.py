"""Which device runs each op: automatic, manual and combined modes, and glue folding.

*Automatic*: devices are asked in priority order; the first device that supports
an op takes it.  *Manual*: every op carries ``metadata_props["affinity"]``
(``op.get_rt_info()["affinity"]``); one op with an affinity switches automatic
mode off, and then every op needs one.  *Combined*: query, edit the answer, set
it as affinities, compile (that is manual mode fed by a query).

``Constant`` ops are exempt from manual affinities: HETERO copies a constant
into every subgraph that reads it, so its own affinity would never be used.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from inferplex.errors import AffinityError, UnsupportedOpError
from inferplex.placement.graph import GraphIndex, is_constant_node, name_of
from inferplex.placement.split import split_into_subgraphs, transfers_between

__all__ = ["AFFINITY_KEY", "GLUE_OPS", "automatic_affinity", "fold_glue_ops", "manual_affinity"]

AFFINITY_KEY = "affinity"

# Ops that are cheap when their inputs are shapes or scalars known on the host.
GLUE_OPS = frozenset({
    "Shape", "Size", "Gather", "Unsqueeze", "Squeeze", "Concat", "Slice", "Cast", "Add", "Sub",
    "Mul", "Div", "Mod", "Neg", "Floor", "Ceil", "Min", "Max", "Range", "ConstantOfShape",
    "Equal", "Less", "Greater", "Where", "Not", "And", "Or", "Identity", "ReduceProd", "Reshape",
})
_SHAPE_READERS = frozenset({"Shape", "Size"})


def _describe(index: GraphIndex, names: Sequence[str]) -> str:
    return ", ".join(f"{index.node(n).op_type} '{n}'" for n in names)


def automatic_affinity(index: GraphIndex, supported: Mapping[str, set[str]]) -> dict[str, str]:
    """Node name -> the first device (in ``supported``'s order) whose set names it.

    Raises UnsupportedOpError listing every op (type and name) that no device supports.
    """
    affinity: dict[str, str] = {}
    missing: list[str] = []
    for node in index.nodes:
        device = next((d for d, names in supported.items() if name_of(node) in names), None)
        if device is not None:
            affinity[name_of(node)] = device
        elif not is_constant_node(node):
            missing.append(name_of(node))
    if missing:
        raise UnsupportedOpError(
            f"{len(missing)} op(s) are supported by none of {', '.join(supported)}: "
            f"{_describe(index, missing)}; add a device that runs them (e.g. CPU) to the list")
    for node in index.nodes:  # constants no device claims go with their first reader
        if name_of(node) not in affinity:
            readers = index.consumers.get(name_of(node.outputs[0]), ()) if node.outputs else ()
            affinity[name_of(node)] = next((affinity[r] for r in readers if r in affinity),
                                       next(iter(supported)))
    return affinity


def manual_affinity(index: GraphIndex, resolve: Callable[[str], str | None],
                    supported: Mapping[str, set[str]]) -> dict[str, str] | None:
    """Affinities set on the ops, or None when no op has one (automatic mode).

    ``resolve`` maps a written device name to its full name in the HETERO list,
    or None when the name is not in the list.  Every problem is reported at once.
    """
    written = {name_of(n): n.metadata_props[AFFINITY_KEY] for n in index.nodes
               if n.metadata_props.get(AFFINITY_KEY)}
    if not written:
        return None
    problems: list[str] = []
    without = [name_of(n) for n in index.placed_nodes() if name_of(n) not in written]
    if without:
        problems.append(f"{len(without)} op(s) have no affinity (manual mode needs one on every "
                        f"op once any op has one): {_describe(index, without)}")
    affinity: dict[str, str] = {}
    unknown: list[str] = []
    for name, device in written.items():
        full = resolve(device)
        if full is None:
            unknown.append(f"'{name}' -> {device!r}")
        else:
            affinity[name] = full
    if unknown:
        problems.append(f"affinities name devices outside the HETERO list "
                        f"{', '.join(supported)}: {', '.join(unknown)}")
    wrong = [f"{index.node(n).op_type} '{n}' -> {d}" for n, d in affinity.items()
             if n not in supported.get(d, set()) and not is_constant_node(index.node(n))]
    if wrong:
        problems.append(f"ops assigned to a device that does not support them: {', '.join(wrong)}")
    if problems:
        raise AffinityError("; ".join(problems) + "; fix: set op.get_rt_info()['affinity'] on "
                            "every op to a listed device that supports it, or clear all affinities "
                            "for automatic mode")
    return affinity


def _host_known_glue(index: GraphIndex) -> list[str]:
    """Glue ops: GLUE_OPS whose inputs are all known on the host (shapes, constants)."""
    known = set(index.constant_values)
    glue: list[str] = []
    for node in index.placed_nodes():
        reads = index.reads[name_of(node)]
        if node.op_type in _SHAPE_READERS or (
                node.op_type in GLUE_OPS and reads and all(name_of(v) in known for v in reads)):
            glue.append(name_of(node))
            known.update(name_of(o) for o in node.outputs)
    return glue


def _clusters(index: GraphIndex, glue: Sequence[str]) -> list[list[str]]:
    """Connected components of glue ops, each in topological order."""
    glue_set = set(glue)
    parent = {n: n for n in glue}

    def root(n: str) -> str:
        while parent[n] != n:
            parent[n] = parent[parent[n]]
            n = parent[n]
        return n

    for name in glue:
        for pred in index.predecessors(index.node(name)):
            if name_of(pred) in glue_set:
                parent[root(name_of(pred))] = root(name)
    groups: dict[str, list[str]] = {}
    for name in glue:
        groups.setdefault(root(name), []).append(name)
    return [g for g in groups.values() if len(g) > 1]


def _neighbour_devices(index: GraphIndex, unit: Sequence[str], affinity: Mapping[str, str],
                       order: Sequence[str]) -> list[str]:
    names = set(unit)
    found = {affinity[n] for n in unit}  # a partly moved run may finish moving
    for name in unit:
        node = index.node(name)
        found.update(affinity[name_of(p)] for p in index.predecessors(node) if name_of(p) not in names)
        for out in node.outputs:
            found.update(affinity[c] for c in index.consumers.get(name_of(out), ()) if c not in names)
    return [d for d in order if d in found]


def _cost(index: GraphIndex, affinity: Mapping[str, str]) -> tuple[int, int]:
    subgraphs = split_into_subgraphs(index, affinity)
    return len(subgraphs), len(transfers_between(index, subgraphs))


def fold_glue_ops(index: GraphIndex, affinity: Mapping[str, str],
                  supported: Mapping[str, set[str]], max_rounds: int = 4) -> dict[str, str]:
    """Move glue ops (and connected runs of them) to a neighbour's device when that cuts
    the number of subgraphs or transfers; devices must support the ops they receive."""
    result = dict(affinity)
    glue = _host_known_glue(index)
    if not glue or len(set(result.values())) < 2:
        return result
    units = _clusters(index, glue) + [[n] for n in glue]
    best = _cost(index, result)
    for _ in range(max_rounds):
        improved = False
        for unit in units:
            for device in _neighbour_devices(index, unit, result, list(supported)):
                if all(result[n] == device for n in unit) or \
                        not all(n in supported[device] for n in unit):
                    continue
                trial = dict(result)
                trial.update((n, device) for n in unit)
                cost = _cost(index, trial)
                if cost < best:
                    result, best, improved = trial, cost, True
                    break
        if not improved:
            break
    return result
