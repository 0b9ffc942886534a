"""inferplex's CPU device on its ONNX Runtime engine against raw ONNX Runtime, side by side in one process.

Two questions, on the onnx wheel's light_squeezenet (small) and light_resnet50
(large), batch 1:

1. Latency (sync, one request): median latency of ``InferRequest.infer`` against
   a raw ``onnxruntime.InferenceSession.run`` with the same threads, on the same
   constant-ized model (the light models list their weights as graph inputs;
   inferplex's reader turns them into constants, so raw ORT gets that model too).
   An extra row runs raw ORT on the original file, to show what the reader gains.
   Target: inferplex / raw <= 1.05.
2. Throughput (AsyncInferQueue with OPTIMAL_NUMBER_OF_INFER_REQUESTS requests):
   PERFORMANCE_HINT=THROUGHPUT against LATENCY.  Target: >= 1.5x on 2 cores.

Runners alternate round by round (ABC, BCA, ...) so that drift in machine load
hits them alike.  Prints a table; writes ``cpu_device.json`` into ``$OUT`` when set.

    python bench/cpu_device.py [--seconds 1.0] [--rounds 5]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort
from rich.console import Console
from rich.table import Table

import inferplex as ov

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from inferplex.cli.inputs import random_inputs, sample_model_path
from inferplex.devices.cpu import stream_layout

from closed_loop import keep_full

MODELS = ("light_squeezenet", "light_resnet50")
Runner = Callable[[], Any]


def _raw_session(model: str | bytes, threads: int) -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.log_severity_level = 3
    return ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])


def latency_runners(name: str) -> tuple[dict[str, Runner], int]:
    """The three sync runners of one model, and the threads each uses."""
    path = sample_model_path(name)
    core = ov.Core()
    model = core.read_model(path)
    feeds = random_inputs(model.inputs)
    threads = stream_layout({"PERFORMANCE_HINT": "LATENCY"})[1]
    config = {"PERFORMANCE_HINT": "LATENCY", "ENGINE": "ONNXRUNTIME"}
    request = core.compile_model(model, "CPU", config).create_infer_request()
    constant = _raw_session(model.to_onnx().SerializeToString(), threads)
    original = _raw_session(str(path), threads)
    return {
        "inferplex": lambda: request.infer(feeds),
        "raw ORT": lambda: constant.run(None, feeds),
        "raw ORT, original file": lambda: original.run(None, feeds),
    }, threads


def _time_calls(run: Runner, seconds: float) -> list[float]:
    """Latencies (ms) of back-to-back calls for about ``seconds`` (at least 3 calls)."""
    samples: list[float] = []
    stop = time.perf_counter() + seconds
    while len(samples) < 3 or time.perf_counter() < stop:
        start = time.perf_counter()
        run()
        samples.append((time.perf_counter() - start) * 1e3)
    return samples


def measure_latency(name: str, seconds: float, rounds: int) -> dict[str, Any]:
    runners, threads = latency_runners(name)
    for run in runners.values():  # warm-up: first runs allocate and tune
        _time_calls(run, 0.0)
    samples: dict[str, list[float]] = {label: [] for label in runners}
    per_round: dict[str, list[float]] = {label: [] for label in runners}
    labels = list(runners)
    for index in range(rounds):
        for label in labels[index % len(labels):] + labels[:index % len(labels)]:
            calls = _time_calls(runners[label], seconds)
            samples[label].extend(calls)
            per_round[label].append(statistics.median(calls))
    # Medians of per-round medians: pooled samples would over-weight fast (quiet) rounds.
    medians = {label: statistics.median(values) for label, values in per_round.items()}
    # Ratios are paired round by round, so that load drifting between rounds cancels out.
    return {"model": name, "threads": threads, "median_ms": medians,
            "calls": {label: len(values) for label, values in samples.items()},
            "ratio": _paired_ratio(per_round["inferplex"], per_round["raw ORT"]),
            "ratio_original": _paired_ratio(per_round["inferplex"],
                                            per_round["raw ORT, original file"])}


def _paired_ratio(numerators: list[float], denominators: list[float]) -> float:
    return statistics.median(a / b for a, b in zip(numerators, denominators, strict=True))


def measure_overhead(rounds: int, calls: int = 2000) -> dict[str, float]:
    """Per-call time (us) on a 2-node model, where inferplex's own Python work shows."""
    from inferplex.cli.inputs import tiny_model

    proto, feeds, _ = tiny_model()
    core = ov.Core()
    model = core.read_model(proto)
    config = {"PERFORMANCE_HINT": "LATENCY", "ENGINE": "ONNXRUNTIME"}
    request = core.compile_model(model, "CPU", config).create_infer_request()
    threads = stream_layout({"PERFORMANCE_HINT": "LATENCY"})[1]
    session = _raw_session(model.to_onnx().SerializeToString(), threads)
    runners = {"inferplex": lambda: request.infer(feeds), "raw ORT": lambda: session.run(None, feeds)}
    best = {label: float("inf") for label in runners}
    for _ in range(rounds):
        for label, run in runners.items():
            start = time.perf_counter()
            for _ in range(calls):
                run()
            best[label] = min(best[label], (time.perf_counter() - start) / calls * 1e6)
    return {"inferplex_us": best["inferplex"], "raw_us": best["raw ORT"],
            "overhead_us": best["inferplex"] - best["raw ORT"]}


def _throughput_round(queue: ov.AsyncInferQueue, feeds: dict[str, np.ndarray], seconds: float) -> float:
    ended, elapsed = keep_full(queue, feeds, seconds)
    return ended / elapsed


def measure_throughput(name: str, seconds: float, rounds: int) -> dict[str, Any]:
    core = ov.Core()
    model = core.read_model(sample_model_path(name))
    feeds = random_inputs(model.inputs)
    queues = {}
    for hint in ("THROUGHPUT", "LATENCY"):
        compiled = core.compile_model(model, "CPU", {"PERFORMANCE_HINT": hint})
        queues[hint] = ov.AsyncInferQueue(compiled, 0)
        _throughput_round(queues[hint], feeds, 0.0)  # warm-up
    fps: dict[str, list[float]] = {hint: [] for hint in queues}
    for index in range(rounds):
        for hint in (("THROUGHPUT", "LATENCY") if index % 2 == 0 else ("LATENCY", "THROUGHPUT")):
            fps[hint].append(_throughput_round(queues[hint], feeds, seconds))
    best = {hint: statistics.median(values) for hint, values in fps.items()}
    return {"model": name, "fps": best, "requests": {h: len(q) for h, q in queues.items()},
            "ratio": best["THROUGHPUT"] / best["LATENCY"]}


def _print(console: Console, latency: list[dict[str, Any]], throughput: list[dict[str, Any]],
           overhead: dict[str, float]) -> None:
    table = Table(title="Sync latency, batch 1: median ms (of per-round medians); ratio: median of "
                  "per-round inferplex / raw, target <= 1.05", title_justify="left")
    for column in ("model", "threads", "inferplex", "raw ORT", "ratio", "raw ORT, original file",
                   "inferplex / original"):
        table.add_column(column, justify="left" if column == "model" else "right")
    for row in latency:
        median = row["median_ms"]
        table.add_row(row["model"], str(row["threads"]), f"{median['inferplex']:.2f}",
                      f"{median['raw ORT']:.2f}", f"{row['ratio']:.3f}",
                      f"{median['raw ORT, original file']:.2f}", f"{row['ratio_original']:.3f}")
    console.print(table)
    console.print(f"Per-call cost on a 2-node model (best of rounds): inferplex "
                  f"{overhead['inferplex_us']:.1f} us, raw ORT {overhead['raw_us']:.1f} us: "
                  f"inferplex adds {overhead['overhead_us']:.1f} us per inference")
    table = Table(title=f"AsyncInferQueue throughput on {os.cpu_count()} cores (FPS; target >= 1.5x)",
                  title_justify="left")
    for column in ("model", "THROUGHPUT hint", "requests", "LATENCY hint", "requests", "ratio"):
        table.add_column(column, justify="left" if column == "model" else "right")
    for row in throughput:
        table.add_row(row["model"], f"{row['fps']['THROUGHPUT']:.2f}",
                      str(row["requests"]["THROUGHPUT"]), f"{row['fps']['LATENCY']:.2f}",
                      str(row["requests"]["LATENCY"]), f"{row['ratio']:.2f}x")
    console.print(table)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=1.0,
                        help="seconds per runner per round (default 1.0)")
    parser.add_argument("--rounds", type=int, default=6, help="alternating rounds (default 6)")
    args = parser.parse_args(argv)
    console = Console(highlight=False, width=max(Console().width, 120))
    load_before = os.getloadavg()[0]
    latency = [measure_latency(name, args.seconds, args.rounds) for name in MODELS]
    throughput = [measure_throughput(name, args.seconds * 2, max(2, args.rounds // 2 + 1))
                  for name in MODELS]
    overhead = measure_overhead(args.rounds)
    _print(console, latency, throughput, overhead)
    load = (load_before, os.getloadavg()[0])
    console.print(f"load average (1 min) before/after: {load[0]:.2f} / {load[1]:.2f} on "
                  f"{os.cpu_count()} cores; other processes' load makes every number noisier")
    results = {"onnxruntime": ort.__version__, "cores": os.cpu_count(), "seconds": args.seconds,
               "rounds": args.rounds, "load_average": load, "latency": latency, "overhead": overhead,
               "throughput": throughput}
    if os.environ.get("OUT"):
        target = Path(os.environ["OUT"]) / "cpu_device.json"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
        console.print(f"wrote {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
