"""HETERO placement by cost: split by op support, or run the whole model on one device?

Op support alone places a model with one op the GPU lacks as GPU -> CPU -> GPU:
two crossings of the host link and three programs, where running the whole
model on the CPU may be faster.  Under ``HETERO_PLACEMENT=COST`` the planner
builds the candidates (the support split, and the whole model on each listed
device that runs every op), a measuring step (``inferplex.hetero``) runs each
candidate's programs a few times, and :func:`choose_placement` picks one from
the numbers alone:

    cost(candidate) = sum of its programs' compute times
                      + program_overhead per program (the chain's hand-over between programs)
                      + sum over crossings of (latency + bytes / bandwidth) on each device's host link

Compute times come from the devices' own per-op profiles (``ProfilingRecord``s
with ENABLE_PROFILING: the sum of executed ops, transfers left out since the
crossings are counted apart), or a program's wall time where its device
records nothing (:func:`program_seconds`).  A device's host link is measured
from the transfer records it reports (:func:`link_from_records`); a device
that reports none gets :data:`DEFAULT_LINK` (a host device, whose tensors are
host arrays already, :data:`HOST_LINK`).

The split stays unless another candidate is faster by more than ``margin`` of
its cost: measurements over a few runs are noisy, and the split is what op
support asks for, so a near tie keeps it.

Everything here is plain data and pure functions: no device is touched.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from inferplex.devices.base import ProfilingRecord
from inferplex.placement.plan import format_bytes, format_seconds

__all__ = ["DEFAULT_LINK", "DEFAULT_MARGIN", "DEFAULT_PROGRAM_OVERHEAD", "HOST_LINK", "CandidateCost",
           "CandidateMeasure", "Crossing", "HostLink", "Measurements", "PlacementDecision",
           "choose_placement", "crossing_seconds", "estimate", "link_from_records", "program_seconds"]


@dataclass(frozen=True)
class HostLink:
    """How fast a device's tensors reach the host and back (one figure for both directions)."""

    bandwidth: float
    """Bytes per second (``math.inf``: the device's tensors are host arrays)."""
    latency: float = 0.0
    """Seconds per crossing on top of the bytes (a copy's launch and synchronisation)."""
    measured: bool = False
    """True when taken from the device's own transfer records, False for an assumed figure."""

    def seconds(self, nbytes: int) -> float:
        """Time to move ``nbytes`` over this link once."""
        if math.isinf(self.bandwidth):
            return 0.0
        return self.latency + nbytes / self.bandwidth

    def describe(self) -> str:
        if math.isinf(self.bandwidth):
            return "host memory"
        source = "measured" if self.measured else "assumed"
        return f"{format_bytes(int(self.bandwidth))}/s + {format_seconds(self.latency)} per copy ({source})"


DEFAULT_LINK = HostLink(bandwidth=8e9, latency=20e-6)
"""Assumed link of a device that reports no transfer records: a PCIe-attached accelerator
(PCIe 3.0/4.0 x16 copies through pinned memory run at several GB/s; a copy costs tens of
microseconds of launch and synchronisation)."""
HOST_LINK = HostLink(bandwidth=math.inf, measured=True)
"""Link of a host device: its tensors are host memory, reaching them costs nothing."""
DEFAULT_MARGIN = 0.1
"""A candidate replaces the support split only when its cost is below (1 - margin) x the split's."""
DEFAULT_PROGRAM_OVERHEAD = 50e-6
"""Seconds the chain spends handing a request from one program to the next (queues, threads)."""


@dataclass(frozen=True)
class Crossing:
    """A tensor that leaves one device for another between two programs of a candidate."""

    value: str
    source_device: str
    target_device: str
    nbytes: int
    """Size at the compiled shapes (0 where a dimension is unknown)."""


@dataclass(frozen=True)
class CandidateMeasure:
    """What the measuring step found for one candidate placement."""

    label: str
    """``"split GPU.0,CPU,GPU.0"`` or ``"whole on CPU"``."""
    programs: tuple[tuple[str, float], ...]
    """(device, compute seconds per inference) of each program, in execution order."""
    crossings: tuple[Crossing, ...] = ()
    timing: str = "per-op profile"
    """How the compute times were measured: ``"per-op profile"`` or ``"wall time"``."""


@dataclass(frozen=True)
class Measurements:
    """The measuring step's answer: the candidates it measured and the devices' host links."""

    candidates: tuple[CandidateMeasure, ...]
    """The support split first, then the whole-model candidates that could be measured."""
    links: Mapping[str, HostLink]
    """Device -> its host link (devices missing here get :data:`DEFAULT_LINK`)."""
    unmeasured: tuple[str, ...] = ()
    """``"<label>: <why>"`` for candidates that could not be compiled or run."""


@dataclass(frozen=True)
class CandidateCost:
    """One candidate's estimated time per inference, in parts."""

    label: str
    devices: tuple[str, ...]
    """Device of each program, in execution order."""
    compute_seconds: float
    """Sum of the programs' compute times."""
    transfer_seconds: float
    """Crossings of host links plus the hand-over between programs."""
    transfer_bytes: int
    """Bytes that cross devices per inference."""
    timing: str

    @property
    def total_seconds(self) -> float:
        return self.compute_seconds + self.transfer_seconds

    def describe(self) -> str:
        return (f"{self.label}: {format_seconds(self.total_seconds)} (compute "
                f"{format_seconds(self.compute_seconds)} by {self.timing}, transfers "
                f"{format_seconds(self.transfer_seconds)} for {format_bytes(self.transfer_bytes)} "
                f"in {max(len(self.devices) - 1, 0)} hand-over(s))")


@dataclass(frozen=True)
class PlacementDecision:
    """The candidates HETERO_PLACEMENT=COST weighed, their costs, and the one chosen."""

    candidates: tuple[CandidateCost, ...]
    chosen: int
    """Index into :attr:`candidates`."""
    reason: str
    """Why the chosen one won, in words."""
    unmeasured: tuple[str, ...] = ()
    """``"<label>: <why>"`` for candidates left out because they could not be measured."""
    links: tuple[tuple[str, HostLink], ...] = ()
    """(device, host link) of every device that a candidate's tensors cross from or to."""

    @property
    def chosen_candidate(self) -> CandidateCost:
        return self.candidates[self.chosen]

    def describe(self) -> str:
        """One line per candidate (the chosen one marked), then the reason."""
        lines = ["  placement by cost (HETERO_PLACEMENT=COST):"]
        for i, candidate in enumerate(self.candidates):
            mark = "*" if i == self.chosen else " "
            lines.append(f"   {mark} {candidate.describe()}")
        lines.extend(f"     not measured: {why}" for why in self.unmeasured)
        lines.extend(f"     host link of {device}: {link.describe()}" for device, link in self.links)
        lines.append(f"    chosen: {self.chosen_candidate.label} ({self.reason})")
        return "\n".join(lines)


def crossing_seconds(crossing: Crossing, links: Mapping[str, HostLink]) -> float:
    """Time for ``crossing``: out over the source's host link, in over the target's.

    A tensor between two devices of one family may move directly (GPU to GPU);
    counting both links bounds that from above, which only makes a split look
    dearer by the time of a copy it may avoid.
    """
    if crossing.source_device == crossing.target_device:
        return 0.0
    return sum(links.get(device, DEFAULT_LINK).seconds(crossing.nbytes)
               for device in (crossing.source_device, crossing.target_device))


def estimate(measure: CandidateMeasure, links: Mapping[str, HostLink],
             program_overhead: float = DEFAULT_PROGRAM_OVERHEAD) -> CandidateCost:
    """The cost of one measured candidate (see the module docstring for the formula)."""
    moving = [c for c in measure.crossings if c.source_device != c.target_device]
    transfers = sum(crossing_seconds(c, links) for c in moving)
    transfers += program_overhead * max(len(measure.programs) - 1, 0)
    return CandidateCost(measure.label, tuple(d for d, _ in measure.programs),
                         sum(seconds for _, seconds in measure.programs), transfers,
                         sum(c.nbytes for c in moving), measure.timing)


def choose_placement(measurements: Measurements, margin: float = DEFAULT_MARGIN,
                     program_overhead: float = DEFAULT_PROGRAM_OVERHEAD) -> PlacementDecision:
    """The decision between the support split (``measurements.candidates[0]``) and the others.

    ``margin`` (default :data:`DEFAULT_MARGIN`): how much faster, as a share of
    the split's cost, another candidate must be to replace it.  The fastest of
    those that beat the split that way wins; an equal cost keeps the earlier one
    (the device list's priority order).
    """
    if not measurements.candidates:
        raise ValueError("choose_placement needs at least the support split as a candidate")
    if not 0.0 <= margin < 1.0:
        raise ValueError(f"margin must be in [0, 1), not {margin!r}")
    costs = tuple(estimate(m, measurements.links, program_overhead) for m in measurements.candidates)
    split = costs[0]
    best = min(range(len(costs)), key=lambda i: (costs[i].total_seconds, i))
    if best == 0:
        reason = "the support split is the fastest"
    elif costs[best].total_seconds < (1.0 - margin) * split.total_seconds:
        reason = (f"{split.total_seconds / max(costs[best].total_seconds, 1e-12):.2f}x faster than "
                  f"the support split")
    else:
        reason = f"no candidate beats the support split by more than {margin:.0%}"
        best = 0
    if len(costs) == 1:
        reason = "the support split is the only candidate measured"
    crossed = sorted({d for m in measurements.candidates for c in m.crossings
                      if c.source_device != c.target_device for d in (c.source_device, c.target_device)})
    links = tuple((d, measurements.links.get(d, DEFAULT_LINK)) for d in crossed)
    return PlacementDecision(costs, best, reason, measurements.unmeasured, links)


def program_seconds(runs: Sequence[Sequence[ProfilingRecord]],
                    wall_seconds: Sequence[float]) -> tuple[float, str]:
    """One program's compute time per inference, and how it was measured.

    ``runs``: the program's profiling records of each measured run;
    ``wall_seconds``: each run's wall time.  The median over runs of the summed
    real time of executed ops (transfer records left out: crossings are counted
    apart); where no run has op records, the median wall time.
    """
    sums = [sum(r.real_time.total_seconds() for r in records
                if r.status == ProfilingRecord.Status.EXECUTED and r.node_type != "Transfer")
            for records in runs]
    with_ops = [s for s, records in zip(sums, runs, strict=True)
                if any(r.node_type != "Transfer" for r in records)]
    if with_ops:
        return statistics.median(with_ops), "per-op profile"
    if not wall_seconds:
        raise ValueError("program_seconds needs at least one measured run")
    return statistics.median(wall_seconds), "wall time"


def link_from_records(records: Sequence[ProfilingRecord]) -> HostLink | None:
    """A device's host link from its transfer records (``node_type == "Transfer"`` with bytes).

    The effective bandwidth over the copies seen (their bytes over their time),
    latency included; None when the records hold no timed transfer.
    """
    moved = [r for r in records if r.node_type == "Transfer" and r.bytes > 0]
    seconds = sum(r.real_time.total_seconds() for r in moved)
    if not moved or seconds <= 0:
        return None
    return HostLink(bandwidth=sum(r.bytes for r in moved) / seconds, latency=0.0, measured=True)
