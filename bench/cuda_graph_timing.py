"""Timing one CUDA call as replays of a CUDA graph (the way the GPU device's programs run),
shared by the kernel benches (``gpu_nbits.py``, ``gpu_qdq_kernels.py``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def graph_us(fn: Callable[[int], Any], copies: int = 1, calls: int = 20, replays: int = 5) -> float:
    """µs per call of ``fn(copy)``: ``calls`` calls captured in one graph, taking turns over
    ``copies`` (of the weights, say, so none is still in L2 when read again); the best of
    ``replays`` replays."""
    import torch

    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):  # compile and warm outside the capture
        fn(0)
        fn(copies - 1)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for call in range(calls):
            fn(call % copies)
    graph.replay()
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(replays):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        torch.cuda.synchronize()
        best = min(best, start.elapsed_time(end) * 1000 / calls)
    return best
