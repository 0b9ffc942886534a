"""Plain data describing how HETERO runs a model: subgraphs, transfers, stages.

Every plan is a frozen dataclass: printable (``describe()``), comparable, and
built deterministically from the model and the device list, so two compilations
of one model give equal plans.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from inferplex.placement.cost import PlacementDecision

__all__ = ["HeteroPlan", "StagePlan", "SubgraphPlan", "TransferPlan", "format_bytes", "format_seconds"]


def format_bytes(count: int) -> str:
    """``1536`` -> ``"1.5 KiB"``."""
    value = float(count)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(value) < 1024 or unit == "GiB":
            return f"{int(value)} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} GiB"  # pragma: no cover - the loop always returns


def format_seconds(seconds: float) -> str:
    """``0.0025`` -> ``"2.50 ms"``; ``4e-05`` -> ``"40.0 us"``; ``1.5`` -> ``"1.500 s"``."""
    if seconds >= 1.0:
        return f"{seconds:.3f} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds * 1e6:.1f} us"


@dataclass(frozen=True)
class SubgraphPlan:
    """One subgraph: connected ops of one device, compiled as one program."""

    index: int
    """Position in execution order (``subgraph<index>`` in counters)."""
    device: str
    """Full device name, e.g. ``"GPU.0"``."""
    nodes: tuple[str, ...]
    """Names of the model's nodes it runs, in topological order (copied constants excluded)."""
    inputs: tuple[str, ...]
    """Values it reads: model inputs and outputs of earlier subgraphs."""
    outputs: tuple[str, ...]
    """Values it produces for later subgraphs or as model outputs."""

    @property
    def op_range(self) -> str:
        """``"first .. last"`` node names (one name for a one-op subgraph)."""
        if not self.nodes:
            return ""
        return self.nodes[0] if len(self.nodes) == 1 else f"{self.nodes[0]} .. {self.nodes[-1]}"


@dataclass(frozen=True)
class TransferPlan:
    """A value that moves from one subgraph to another."""

    value: str
    """Name of the tensor."""
    source: int
    """Index of the producing subgraph."""
    target: int
    """Index of the consuming subgraph."""
    source_device: str
    target_device: str
    nbytes: int = 0
    """Size at the compiled shapes (0 where a dimension is unknown)."""

    @property
    def crosses_devices(self) -> bool:
        """False when both subgraphs run on one device (the tensor stays where it is)."""
        return self.source_device != self.target_device


@dataclass(frozen=True)
class StagePlan:
    """Memory of one subgraph (a pipeline stage under PIPELINE_PARALLEL)."""

    device: str
    first_op: str
    """Name of the stage's first node."""
    last_op: str
    """Name of the stage's last node."""
    op_count: int
    weight_bytes: int
    """Initializers and constants the stage holds (a shared one counted once)."""
    activation_bytes: int
    """Peak live activations at the compiled input shapes."""
    need_bytes: int = 0
    """weights + activations + runtime reserve."""
    capacity_bytes: int | None = None
    """What the device may use (MEMORY_LIMIT or free memory less a margin); None if not planned."""

    def describe(self) -> str:
        cap = "" if self.capacity_bytes is None else f" / {format_bytes(self.capacity_bytes)}"
        return (f"{self.device}: ops {self.first_op} .. {self.last_op} ({self.op_count} ops), "
                f"weights {format_bytes(self.weight_bytes)}, activations "
                f"{format_bytes(self.activation_bytes)}, need {format_bytes(self.need_bytes)}{cap}")


@dataclass(frozen=True)
class HeteroPlan:
    """How a HETERO compiled model runs: its subgraphs in order and the transfers between them."""

    devices: tuple[str, ...]
    """Full device names in priority order."""
    policy: str
    """``"AFFINITY"`` (automatic/manual affinities) or ``"PIPELINE_PARALLEL"``."""
    mode: str
    """``"automatic"``, ``"manual"`` or ``"pipeline"``."""
    subgraphs: tuple[SubgraphPlan, ...]
    transfers: tuple[TransferPlan, ...]
    stages: tuple[StagePlan, ...] = ()
    """Memory per subgraph, in the same order."""
    subgraphs_before_folding: int = 0
    """Subgraph count before glue ops were folded into neighbours (automatic mode)."""
    notes: tuple[str, ...] = field(default=())
    """Decisions worth telling the user (e.g. symbolic dims taken as 1)."""
    placement: PlacementDecision | None = None
    """Under ``HETERO_PLACEMENT=COST`` where op support forced a split: the candidates weighed,
    their costs and the one this plan follows; None otherwise."""

    @property
    def transfer_bytes(self) -> int:
        """Bytes that cross devices per inference, at the compiled shapes."""
        return sum(t.nbytes for t in self.transfers if t.crosses_devices)

    def describe(self) -> str:
        """A multi-line text: one line per subgraph, then the transfers."""
        lines = [f"HETERO plan ({self.mode}, {len(self.subgraphs)} subgraphs"
                 + (f", {self.subgraphs_before_folding} before glue folding"
                    if self.subgraphs_before_folding > len(self.subgraphs) else "")
                 + f") on {','.join(self.devices)}"]
        for sub, stage in zip(self.subgraphs, self.stages or [None] * len(self.subgraphs), strict=True):
            line = f"  subgraph{sub.index}: {sub.device:<8} {len(sub.nodes):>5} ops  {sub.op_range}"
            if stage is not None:
                line += (f"  weights {format_bytes(stage.weight_bytes)},"
                         f" activations {format_bytes(stage.activation_bytes)}")
                if stage.capacity_bytes is not None:
                    line += f", need {format_bytes(stage.need_bytes)} of {format_bytes(stage.capacity_bytes)}"
            lines.append(line)
        moving = [t for t in self.transfers if t.crosses_devices]
        lines.append(f"  transfers: {len(moving)} across devices ({format_bytes(self.transfer_bytes)}),"
                     f" {len(self.transfers) - len(moving)} staying on a device")
        for t in self.transfers:
            where = "" if t.crosses_devices else ", stays on device"
            lines.append(f"    {t.value}: subgraph{t.source} {t.source_device} -> "
                         f"subgraph{t.target} {t.target_device} ({format_bytes(t.nbytes)}{where})")
        if self.placement is not None:
            lines.append(self.placement.describe())
        lines.extend(f"  note: {note}" for note in self.notes)
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.describe()
