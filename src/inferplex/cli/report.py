"""What ``inferplex benchmark`` measured, printed benchmark_app-style and as JSON.

Times are in milliseconds; throughput is ``count * batch / duration`` in frames
per second (FPS), as benchmark_app reports it.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table

from inferplex.config.values import OptionEnum
from inferplex.devices.base import ProfilingRecord

__all__ = ["BenchmarkResult", "latency_summary", "print_counters", "print_devices",
           "print_result", "to_json", "write_json"]


@dataclass
class BenchmarkResult:
    """Everything one benchmark run measured."""

    model: str
    """Path of the model file."""
    device: str
    """Device string the model was compiled for."""
    api: str
    """``"sync"`` or ``"async"``."""
    requests: int
    """Infer requests kept in flight."""
    batch: int
    """Frames per inference (for FPS)."""
    sample_model: bool = False
    """True when no ``-m`` was given and the onnx wheel's sample model ran."""
    config: dict[str, Any] = field(default_factory=dict)
    """Properties given to compile_model."""
    compiled_properties: dict[str, Any] = field(default_factory=dict)
    """Properties read back from the compiled model."""
    inputs: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Input name -> {"shape": [...], "element_type": "f32"}."""
    read_ms: float = 0.0
    compile_ms: float = 0.0
    first_inference_ms: float = 0.0
    first_inference_device: str = ""
    """Device that ran the first inference (with AUTO, the CPU while the GPU still compiles)."""
    duration_ms: float = 0.0
    latencies_ms: list[float] = field(default_factory=list)
    """Latency of every measured request (the first inference excluded)."""
    device_counts: dict[str, int] = field(default_factory=dict)
    """Device that ran each measured request -> how many it ran."""
    device_statistics: Any = None
    """The compiled model's DEVICE_STATISTICS, where it has them."""
    hetero_subgraphs: str | None = None
    """HETERO's subgraph plan, printed."""
    counters: list[ProfilingRecord] = field(default_factory=list)
    """Per-op counters of one request (with -pc)."""
    percentile: int = 50
    """The latency percentile reported first (``-latency_percentile``; 50: the median)."""

    @property
    def count(self) -> int:
        return len(self.latencies_ms)

    @property
    def throughput_fps(self) -> float:
        seconds = self.duration_ms / 1e3
        return self.count * self.batch / seconds if seconds > 0 else 0.0


def latency_summary(latencies_ms: list[float], percentile: int = 50) -> dict[str, float]:
    """median, average, min, max, p90 and p99 of a list of latencies, and ``p<percentile>``."""
    keys = ("median", "average", "min", "max", "p90", "p99", f"p{percentile}")
    if not latencies_ms:
        return dict.fromkeys(keys, 0.0)
    values = np.asarray(latencies_ms, dtype=np.float64)
    return {
        "median": float(np.median(values)), "average": float(values.mean()),
        "min": float(values.min()), "max": float(values.max()),
        "p90": float(np.percentile(values, 90)), "p99": float(np.percentile(values, 99)),
        f"p{percentile}": float(np.percentile(values, percentile)),
    }


def _ms(record: ProfilingRecord, attribute: str = "real_time") -> float:
    return float(getattr(record, attribute).total_seconds() * 1e3)


def _device_rows(result: BenchmarkResult) -> list[dict[str, Any]]:
    seconds = result.duration_ms / 1e3
    stats = result.device_statistics if isinstance(result.device_statistics, dict) else {}
    rows = []
    for device in sorted(set(result.device_counts) | set(stats)):
        count = result.device_counts.get(device, 0)
        rows.append({
            "device": device, "requests": count,
            "share": count / result.count if result.count else 0.0,
            "throughput_fps": count * result.batch / seconds if seconds > 0 else 0.0,
            "statistics": stats.get(device),
        })
    return rows


def to_json(result: BenchmarkResult) -> dict[str, Any]:
    """A JSON-ready dict of the run (benchmark_app's report fields, and inferplex's)."""
    from inferplex import __version__

    return {
        "inferplex_version": __version__,
        "model": result.model, "sample_model": result.sample_model, "device": result.device,
        "api": result.api, "requests": result.requests, "batch": result.batch,
        "config": _jsonable(result.config),
        "compiled_properties": _jsonable(result.compiled_properties),
        "inputs": result.inputs,
        "read_ms": result.read_ms, "compile_ms": result.compile_ms,
        "first_inference_ms": result.first_inference_ms,
        "first_inference_device": result.first_inference_device,
        "count": result.count, "duration_ms": result.duration_ms,
        "latency_ms": latency_summary(result.latencies_ms, result.percentile),
        "latency_percentile": result.percentile,
        "throughput_fps": result.throughput_fps,
        "devices": _jsonable(_device_rows(result)),
        "hetero_subgraphs": result.hetero_subgraphs,
        "perf_counters": [
            {"node_name": r.node_name, "node_type": r.node_type, "exec_type": r.exec_type,
             "status": r.status, "real_time_ms": _ms(r), "cpu_time_ms": _ms(r, "cpu_time")}
            for r in result.counters
        ],
    }


def _jsonable(value: Any) -> Any:
    """Property values as JSON: containers kept, anything else as its string."""
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, OptionEnum):
        return value.text  # "THROUGHPUT", as the property was written, not "PerformanceMode.THROUGHPUT"
    return str(value)


def write_json(result: BenchmarkResult, path: str | Path) -> Path:
    """Write :func:`to_json` to ``path`` (parent folders created); return the path."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(to_json(result), indent=2) + "\n", encoding="utf-8")
    return target


def print_result(console: Console, result: BenchmarkResult) -> None:
    """Count, duration, latencies and throughput, as benchmark_app prints them."""
    summary = latency_summary(result.latencies_ms, result.percentile)
    console.print(f"Count:          {result.count} iterations")
    console.print(f"Duration:       {result.duration_ms:.2f} ms")
    console.print("Latency:")
    rows = [("Median", "median"), ("Average", "average"), ("Min", "min"), ("Max", "max"),
            ("p90", "p90"), ("p99", "p99")]
    if result.percentile != 50:  # benchmark_app names the percentile asked for first
        rows.insert(0, (f"{result.percentile} percentile", f"p{result.percentile}"))
    for label, key in rows:
        console.print(f"   {label + ':':<12}{summary[key]:.2f} ms" if len(label) < 11
                      else f"   {label}: {summary[key]:.2f} ms")
    console.print(f"Throughput:     {result.throughput_fps:.2f} FPS"
                  + (f" (batch {result.batch})" if result.batch != 1 else ""))


def print_devices(console: Console, result: BenchmarkResult) -> None:
    """Requests, share and throughput per device (MULTI, AUTO)."""
    table = Table(title="Requests per device", title_justify="left")
    for column in ("device", "requests", "share", "throughput"):
        table.add_column(column, justify="left" if column == "device" else "right")
    extra = any(row["statistics"] for row in _device_rows(result))
    if extra:
        table.add_column("DEVICE_STATISTICS")
    for row in _device_rows(result):
        cells = [row["device"], str(row["requests"]), f"{row['share']:.1%}",
                 f"{row['throughput_fps']:.2f} FPS"]
        if extra:
            stats = row["statistics"]
            cells.append(", ".join(f"{k}={v:.2f}" if isinstance(v, float) else f"{k}={v}"
                                   for k, v in stats.items())
                         if isinstance(stats, dict) else str(stats or ""))
        table.add_row(*cells)
    console.print(table)


def print_counters(console: Console, records: list[ProfilingRecord]) -> None:
    """Per-op counters, slowest first, then totals by op type."""
    if not records:
        console.print("Performance counters: none were reported (the device gives no per-op counters)")
        return
    ordered = sorted(records, key=lambda r: (-r.real_time, r.node_name))
    total = sum(_ms(r) for r in records)
    table = Table(title="Performance counters (one request, slowest first)", title_justify="left")
    for column in ("node_name", "node_type", "exec_type", "status", "real_time ms", "cpu_time ms", "%"):
        table.add_column(column, justify="right" if column.endswith(("ms", "%")) else "left",
                         overflow="fold")
    for record in ordered:
        table.add_row(record.node_name, record.node_type, record.exec_type, record.status,
                      f"{_ms(record):.3f}", f"{_ms(record, 'cpu_time'):.3f}",
                      f"{_ms(record) / total:.1%}" if total else "-")
    console.print(table)
    by_type: dict[str, float] = {}
    counts: Counter[str] = Counter()
    for record in records:
        by_type[record.node_type] = by_type.get(record.node_type, 0.0) + _ms(record)
        counts[record.node_type] += 1
    totals = Table(title="Totals by op type", title_justify="left")
    for column in ("node_type", "ops", "real_time ms", "%"):
        totals.add_column(column, justify="left" if column == "node_type" else "right")
    for node_type, spent in sorted(by_type.items(), key=lambda item: (-item[1], item[0])):
        totals.add_row(node_type, str(counts[node_type]), f"{spent:.3f}",
                       f"{spent / total:.1%}" if total else "-")
    totals.add_row("total", str(len(records)), f"{total:.3f}", "100.0%" if total else "-")
    console.print(totals)
