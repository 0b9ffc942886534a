"""PIPELINE_PARALLEL: a memory model of the ops and contiguous stage cuts.

Memory of a stage = weights + peak live activations + a runtime reserve:

- *weights*: bytes of the initializers and ``Constant`` values the stage reads,
  an initializer shared by several ops counted once per stage (each stage holds
  its own copy);
- *activations*: a liveness walk over the stage's ops at the compiled input
  shapes (symbolic dims resolved from the shapes the model was reshaped to,
  otherwise taken as 1 and said so in the plan): a value lives from its producer
  to its last reader in the stage, or to the end when a later stage reads it;
- *reserve*: ``RESERVE_FRACTION`` of the two, for workspaces and allocator slack.

Cuts (:func:`plan_stages`): the devices equal to the first one (same family,
capacity within 10 %) share the model in proportion to capacity, even when one
of them could hold it all (OpenVINO would leave the second GPU idle).  When they
cannot hold it, devices are filled in priority order instead, each up to its
capacity.  Around each target, the cut with the fewest *bytes* crossing wins.

Balance is by bytes by default: they are known before compiling and, for the
transformer stacks pipelines are used for, weight bytes track FLOPs per layer.
Measured per-op time (``op_costs``) balances throughput better on models whose
cost is not in their weights (attention over long sequences), at the price of a
profiling run before the plan.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import accumulate

from inferplex.errors import MemoryPlanError
from inferplex.placement.graph import GraphIndex, name_of, value_nbytes
from inferplex.placement.plan import StagePlan, format_bytes

__all__ = ["MemoryModel", "plan_stages"]

RESERVE_FRACTION = 0.10
"""Runtime reserve, as a fraction of weights + activations."""
FREE_MEMORY_MARGIN = 0.10
"""Fraction of a device's free memory left unused when no MEMORY_LIMIT is set."""
CUT_WINDOW = 0.05
"""Cut candidates lie within this fraction of the total cost around each target."""
_EQUAL_CAPACITY = 0.10


@dataclass(frozen=True)
class _StageNeed:
    weights: int
    activations: int

    @property
    def total(self) -> int:
        return int((self.weights + self.activations) * (1 + RESERVE_FRACTION))


class MemoryModel:
    """Weights and activations of the placed ops of ``index``, in topological order.

    Stages are given as sorted op positions (``range(start, stop)`` for a pipeline
    stage; any subset for a HETERO subgraph).
    """

    def __init__(self, index: GraphIndex, dims: Mapping[str, int] | None = None) -> None:
        self.index = index
        self.order = [name_of(n) for n in index.placed_nodes()]
        position = {name: i for i, name in enumerate(self.order)}
        self._const_bytes = self._constant_bytes(position)
        self._weights: list[tuple[str, ...]] = []
        self._reads: list[tuple[tuple[str, int], ...]] = []
        self._outputs: list[tuple[tuple[str, int], ...]] = []
        self._readers: dict[str, list[int]] = {}
        for i, name in enumerate(self.order):
            reads = index.reads[name]
            self._weights.append(tuple(name_of(v) for v in reads if name_of(v) in self._const_bytes))
            self._reads.append(tuple((name_of(v), value_nbytes(v, dims)) for v in reads
                                     if index.is_transferable(v)))
            self._outputs.append(tuple((name_of(o), value_nbytes(o, dims))
                                       for o in index.node(name).outputs))
            for value in reads:
                self._readers.setdefault(name_of(value), []).append(i)
        for value in index.graph.outputs:  # read "after the last op"
            self._readers.setdefault(name_of(value), []).append(len(self.order))

    def _constant_bytes(self, placed: Mapping[str, int]) -> dict[str, int]:
        sizes: dict[str, int] = {}
        for value in self.index.graph.initializers.values():
            sizes[name_of(value)] = value.const_value.nbytes if value.const_value is not None else 0
        for node in self.index.nodes:
            if name_of(node) not in placed and node.outputs and "value" in node.attributes:
                sizes[name_of(node.outputs[0])] = int(getattr(node.attributes["value"].value, "nbytes", 0))
        return sizes

    def weights_of(self, positions: Sequence[int]) -> int:
        names = {w for i in positions for w in self._weights[i]}
        return sum(self._const_bytes[w] for w in names)

    def op_weight_bytes(self) -> list[int]:
        """Weight bytes per op, each constant counted at its first reader."""
        seen: set[str] = set()
        result = []
        for weights in self._weights:
            fresh = [w for w in dict.fromkeys(weights) if w not in seen]
            seen.update(fresh)
            result.append(sum(self._const_bytes[w] for w in fresh))
        return result

    def _release_after(self, positions: Sequence[int]) -> dict[str, int]:
        """Value -> position after which the stage may free it (past the end: never)."""
        members, end = set(positions), positions[-1] + 1
        produced = {o: i for i in positions for o, _ in self._outputs[i]}
        release: dict[str, int] = {}
        for i in positions:
            for name, _ in self._reads[i] + self._outputs[i]:
                readers = self._readers.get(name, [])
                if name in produced and any(r not in members for r in readers):
                    release[name] = end  # read by a later stage: lives to the stage's end
                else:
                    release[name] = max([r for r in readers if r in members]
                                        + [produced.get(name, i)])
        return release

    def peak_activations(self, positions: Sequence[int]) -> int:
        """Peak live bytes of the ops at ``positions`` run in order (stage inputs included)."""
        if not positions:
            return 0
        release = self._release_after(positions)
        live: dict[str, int] = {}
        produced = {o for i in positions for o, _ in self._outputs[i]}
        for i in positions:
            live.update((n, s) for n, s in self._reads[i] if n not in produced)
        current = peak = sum(live.values())
        for i in positions:
            for name, size in self._outputs[i]:
                if name not in live:
                    live[name] = size
                    current += size
            peak = max(peak, current)
            for name, _ in self._reads[i] + self._outputs[i]:
                if release.get(name, -1) <= i and name in live:
                    current -= live.pop(name)
        return peak

    def need(self, positions: Sequence[int]) -> _StageNeed:
        return _StageNeed(self.weights_of(positions), self.peak_activations(positions))

    def crossing_bytes(self) -> list[int]:
        """``result[p]``: bytes of the values made before op p and read at or after it."""
        n = len(self.order)
        delta = [0] * (n + 2)
        for i, outputs in enumerate(self._outputs):
            for name, size in outputs:
                last = max(self._readers.get(name, [i]))
                if last > i:
                    delta[i + 1] += size
                    delta[min(last, n) + 1] -= size
        return list(accumulate(delta))[: n + 1]

    def stage_plan(self, device: str, positions: Sequence[int], capacity: int | None) -> StagePlan:
        need = self.need(positions)
        return StagePlan(device, self.order[positions[0]], self.order[positions[-1]],
                         len(positions), need.weights, need.activations, need.total, capacity)


def _equal_prefix(devices: Sequence[str], capacity: Mapping[str, int]) -> list[str]:
    first = devices[0]
    family = first.split(".")[0]
    equal = [first]
    for device in devices[1:]:
        close = abs(capacity[device] - capacity[first]) <= _EQUAL_CAPACITY * max(capacity[first], 1)
        if device.split(".")[0] != family or not close:
            break
        equal.append(device)
    return equal


def _pick_cut(prefix: Sequence[float], crossing: Sequence[int],
              lo: float, hi: float, target: float, start: int, stop_max: int) -> list[int]:
    """Cut positions in (start, stop_max) with prefix cost in [lo, hi], best first."""
    first = max(bisect_left(prefix, lo), start + 1)
    last = min(bisect_left(prefix, hi + 1e-9), stop_max - 1)
    candidates = list(range(first, last + 1)) or [min(max(bisect_left(prefix, target), start + 1),
                                                        stop_max - 1)]
    return sorted(set(candidates), key=lambda p: (crossing[p], abs(prefix[p] - target), p))


def _balanced(memory: MemoryModel, devices: Sequence[str], capacity: Mapping[str, int],
              prefix: Sequence[float], crossing: Sequence[int]) -> list[int] | None:
    """Cuts giving each device a share in proportion to capacity; None if a stage overflows."""
    n, total = len(memory.order), prefix[-1]
    if len(devices) > n:
        devices = devices[:n]
    share = sum(capacity[d] for d in devices)
    cuts, start, acc = [0], 0, 0.0
    for i, device in enumerate(devices[:-1]):
        acc += total * capacity[device] / share
        width = CUT_WINDOW * total
        stop_max = n - (len(devices) - 1 - i)
        best = next((p for p in _pick_cut(prefix, crossing, acc - width, acc + width, acc,
                                          start, stop_max + 1)
                     if memory.need(range(start, p)).total <= capacity[device]), None)
        if best is None:
            return None
        cuts.append(best)
        start = best
    cuts.append(n)
    if memory.need(range(start, n)).total > capacity[devices[-1]]:
        return None
    return cuts


def _largest_fit(memory: MemoryModel, start: int, stop_max: int, limit: int) -> int:
    lo, hi = start, stop_max  # need(start, lo) fits (empty stage); find the largest fitting stop
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if memory.need(range(start, mid)).total <= limit:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _filled(memory: MemoryModel, devices: Sequence[str], capacity: Mapping[str, int],
            prefix: Sequence[float], crossing: Sequence[int]) -> tuple[list[int], list[str]]:
    """Fill devices in priority order; returns cuts and the devices used (may not fit)."""
    n, total = len(memory.order), prefix[-1]
    cuts, used, start = [0], [], 0
    for i, device in enumerate(devices):
        used.append(device)
        if i == len(devices) - 1 or memory.need(range(start, n)).total <= capacity[device]:
            cuts.append(n)
            break
        far = _largest_fit(memory, start, n, capacity[device])
        if far <= start:
            cuts.append(n)
            break
        width = CUT_WINDOW * total
        best = _pick_cut(prefix, crossing, prefix[far] - width, prefix[far], prefix[far],
                         start, far + 1)[0]
        cuts.append(best)
        start = best
    return cuts, used


def plan_stages(memory: MemoryModel, devices: Sequence[str], capacity: Mapping[str, int],
                op_costs: Sequence[float] | None = None) -> list[StagePlan]:
    """Contiguous stages over ``devices`` (priority order) within ``capacity`` (bytes).

    ``op_costs`` (one per placed op, e.g. measured seconds) balances by cost
    instead of weight bytes.  Raises MemoryPlanError listing each device's need and
    capacity when the model fits nowhere.
    """
    if not memory.order:
        return []
    costs = list(op_costs) if op_costs is not None else _byte_costs(memory)
    prefix = [0.0, *accumulate(costs)]
    crossing = memory.crossing_bytes()
    equal = _equal_prefix(devices, capacity)
    cuts = _balanced(memory, equal, capacity, prefix, crossing)
    if cuts is None:
        cuts, used = _filled(memory, devices, capacity, prefix, crossing)
    else:
        used = equal[: len(cuts) - 1]
    stages = [memory.stage_plan(d, range(cuts[i], cuts[i + 1]), capacity[d]) for i, d in enumerate(used)]
    if any(s.need_bytes > capacity[s.device] for s in stages):
        raise MemoryPlanError(_overflow_message(memory, stages, devices, capacity))
    return stages


def _byte_costs(memory: MemoryModel) -> list[float]:
    weights = memory.op_weight_bytes()
    per_op = max(sum(weights) / (100 * len(weights)), 1.0)  # ops with no weights still count
    return [w + per_op for w in weights]


def _overflow_message(memory: MemoryModel, stages: Sequence[StagePlan], devices: Sequence[str],
                      capacity: Mapping[str, int]) -> str:
    whole = memory.need(range(len(memory.order)))
    parts = [f"{s.device} needs {format_bytes(s.need_bytes)} (weights "
             f"{format_bytes(s.weight_bytes)}, activations {format_bytes(s.activation_bytes)}) "
             f"for ops {s.first_op} .. {s.last_op}, capacity {format_bytes(capacity[s.device])}"
             for s in stages]
    idle = [f"{d} capacity {format_bytes(capacity[d])}" for d in devices
            if d not in {s.device for s in stages}]
    return (f"the model does not fit the devices' memory: it needs {format_bytes(whole.total)} "
            f"in all (weights {format_bytes(whole.weights)}, peak activations "
            f"{format_bytes(whole.activations)}, reserve {int(RESERVE_FRACTION * 100)}%); "
            + "; ".join(parts + idle)
            + "; fix: add devices to the HETERO list, raise MEMORY_LIMIT, or reshape to smaller inputs")
