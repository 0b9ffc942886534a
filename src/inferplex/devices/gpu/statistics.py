"""What a GPU program holds now, as plain read-only facts (its ``GPU_PROGRAM_STATISTICS`` property).

``compiled.get_property("GPU_PROGRAM_STATISTICS")`` answers how many input
signatures a program has specialized lowerings and CUDA graphs for, which of
those run eagerly, what its lowering calls and how many bytes of constants it
holds: what a user checks to see that per-shape state stays within its bounds,
and what tests check instead of reading the program's internals.  A signature
is the tuple of the inputs' shapes, in the model's input order, e.g.
``((1, 16, 64),)`` for one input of shape ``[1, 16, 64]``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from inferplex.devices.gpu.workers import Variant, WorkerState

__all__ = ["GpuProgramStatistics", "ShapeVariantStatistics", "Signature", "WorkerStatistics", "collect"]

Signature = tuple[tuple[int, ...], ...]
"""The inputs' shapes of one run, in the model's input order."""


@dataclass(frozen=True)
class ShapeVariantStatistics:
    """One lowering specialized to an input signature."""

    signature: Signature
    """The input shapes it was made for (and runs for)."""
    capturable: bool
    """Whether its runs can be captured in a CUDA graph (no op reads device data on the host)."""
    own_constant_bytes: int
    """Bytes of constants it holds of its own (folded shape values, masks); weights are shared."""


@dataclass(frozen=True)
class WorkerStatistics:
    """One worker (a CUDA stream of its own)."""

    captured_signatures: tuple[Signature, ...]
    """Signatures it holds a CUDA graph for, least recently used first."""
    staging_buffers: int
    """Pinned host buffers it keeps for staging host inputs."""
    blocking_waits: bool
    """Whether it waits for its stream asleep on a blocking event (GPU_QUEUE_THROTTLE LOW)."""


@dataclass(frozen=True)
class GpuProgramStatistics:
    """A GPU program's state; see the module docstring."""

    closed: bool
    """Whether the program was closed (then it holds nothing, and every count is 0)."""
    capturable: bool
    """Whether the generic lowering (every input signature) can be captured in CUDA graphs."""
    calls: tuple[str, ...]
    """Names of the functions the generic lowering calls, in order (``linear``: a fused MatMul and Add)."""
    ops_run: tuple[str, ...]
    """ONNX op type of each node the generic lowering runs, in order; nodes folded to constants or
    fused into a neighbour (a BatchNormalization into its Conv) are not among them."""
    channels_last_weights: int
    """4-D constants stored in channels-last (NHWC) memory order."""
    weight_bytes: int
    """Bytes of constants of the generic lowering, which the specialized ones share."""
    shape_variants: tuple[ShapeVariantStatistics, ...]
    """Specialized lowerings kept, least recently used first."""
    shape_cache_size: int
    """The most specialized lowerings kept (least recently used dropped beyond)."""
    eager_signatures: tuple[Signature, ...]
    """Signatures whose CUDA-graph capture failed: they run eagerly."""
    workers: tuple[WorkerStatistics, ...]
    """Per worker."""
    graph_cache_size: int
    """The most CUDA graphs a worker keeps (least recently used dropped beyond)."""


def _call_name(target: object) -> str:
    return str(getattr(target, "__name__", None) or target)


def _storages(module: torch.nn.Module) -> dict[int, int]:
    """Data pointer -> bytes of the storages behind ``module``'s buffers."""
    found: dict[int, int] = {}
    for tensor in module.buffers():
        if tensor.numel() > 0:
            storage = tensor.untyped_storage()
            found[storage.data_ptr()] = storage.nbytes()
    return found


def _variant_statistics(signature: Signature, variant: Variant,
                        shared: dict[int, int]) -> ShapeVariantStatistics:
    own = sum(size for ptr, size in _storages(variant.lowered.module).items() if ptr not in shared)
    return ShapeVariantStatistics(signature, variant.lowered.capturable, own)


def collect(generic: Variant | None, variants: Iterable[tuple[Signature, Variant]],
            eager: Iterable[Signature], workers: Iterable[WorkerState], shape_cache_size: int,
            graph_cache_size: int) -> GpuProgramStatistics:
    """The statistics of a program from its parts (``generic`` None: the program was closed)."""
    worker_stats = tuple(WorkerStatistics(tuple(state.graphs), len(state.staging), state.finished is not None)
                         for state in workers)
    if generic is None:
        return GpuProgramStatistics(True, False, (), (), 0, 0, (), shape_cache_size, (), worker_stats,
                                    graph_cache_size)
    module = generic.lowered.module
    shared = _storages(module)
    nhwc = sum(1 for t in module.buffers() if t.dim() == 4 and not t.is_contiguous()
               and t.is_contiguous(memory_format=torch.channels_last))
    calls = tuple(_call_name(n.target) for n in module.graph.nodes if n.op == "call_function")
    ops = {n.meta["onnx_name"]: n.meta.get("onnx_op", "") for n in module.graph.nodes
           if n.op == "call_function" and "onnx_name" in n.meta}
    return GpuProgramStatistics(
        closed=False, capturable=generic.lowered.capturable, calls=calls, ops_run=tuple(ops.values()),
        channels_last_weights=nhwc,
        weight_bytes=sum(shared.values()),
        shape_variants=tuple(_variant_statistics(s, v, shared) for s, v in variants),
        shape_cache_size=shape_cache_size, eager_signatures=tuple(eager), workers=worker_stats,
        graph_cache_size=graph_cache_size)
