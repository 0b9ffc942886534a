"""Compiling for the CPU beside other work: how long it takes, and how long it keeps other Python threads out.

A CPU compile often runs beside another device's (AUTO's startup fallback, MULTI,
HETERO), and that one is mostly Python: every second the CPU compile holds the
GIL is a second the other stalls.  For each model, in one process, rounds
alternate between:

- ``inferplex``: ``core.compile_model(model, "CPU")`` on a model already read
  (large weights go to ONNX Runtime as in-memory values, see devices/cpu.py);
- ``serialized bytes``: what the CPU device did before, the whole model serialized
  (``SerializeToString``) then ``onnxruntime.InferenceSession(bytes)``;
- ``raw ORT, file``: ``onnxruntime.InferenceSession(path)``, the peer.

Beside each compile a Python thread wakes every millisecond; "kept out" is how
long its wake-ups were late by more than 5 ms in all (the GIL, or the cores).
Models: stacks of 4 and 12 feed-forward layers of BERT-base's sizes (75 and
226 MB of f32 weights), written to a temporary folder.

    python bench/cpu_compile.py [--rounds 3]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper
from rich.console import Console
from rich.table import Table

import inferplex as ov

_LATE = 0.005
"""A ticker wake-up later than this counts as kept out."""


def feed_forward_stack(path: Path, layers: int = 12, width: int = 768, hidden: int = 3072) -> Path:
    """``layers`` x (MatMul, Add, Relu, MatMul, Add) with random weights, saved to ``path``."""
    rng = np.random.default_rng(0)
    nodes, inits, prev = [], [], "x"
    for i in range(layers):
        for name, shape in ((f"w{i}a", (width, hidden)), (f"b{i}a", (hidden,)),
                            (f"w{i}b", (hidden, width)), (f"b{i}b", (width,))):
            inits.append(numpy_helper.from_array((rng.standard_normal(shape) / 32).astype(np.float32), name))
        nodes += [helper.make_node("MatMul", [prev, f"w{i}a"], [f"h{i}"]),
                  helper.make_node("Add", [f"h{i}", f"b{i}a"], [f"g{i}"]),
                  helper.make_node("Relu", [f"g{i}"], [f"r{i}"]),
                  helper.make_node("MatMul", [f"r{i}", f"w{i}b"], [f"o{i}"]),
                  helper.make_node("Add", [f"o{i}", f"b{i}b"], [f"y{i}"])]
        prev = f"y{i}"
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, width])
    y = helper.make_tensor_value_info(prev, TensorProto.FLOAT, [4, width])
    graph = helper.make_graph(nodes, "ffn", [x], [y], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def timed_with_ticker(compile_once: Callable[[], Any]) -> tuple[float, float]:
    """(seconds ``compile_once`` took, seconds a 1 ms ticker thread beside it was kept out)."""
    late = [0.0]
    stop = threading.Event()

    def tick() -> None:
        last = time.perf_counter()
        while not stop.is_set():
            time.sleep(0.001)
            now = time.perf_counter()
            if now - last > _LATE:
                late[0] += now - last
            last = now

    ticker = threading.Thread(target=tick)
    ticker.start()
    start = time.perf_counter()
    result = compile_once()
    elapsed = time.perf_counter() - start
    stop.set()
    ticker.join()
    del result
    return elapsed, late[0]


def _session(source: str | bytes) -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.log_severity_level = 3
    return ort.InferenceSession(source, options, providers=["CPUExecutionProvider"])


def measure(name: str, path: Path, rounds: int) -> dict[str, Any]:
    core = ov.Core()
    model = core.read_model(path)
    runners: dict[str, Callable[[], Any]] = {
        "inferplex": lambda: core.compile_model(model, "CPU", {"PERFORMANCE_HINT": "LATENCY"}),
        "serialized bytes": lambda: _session(model.to_onnx().SerializeToString()),
        "raw ORT, file": lambda: _session(str(path)),
    }
    for run in runners.values():
        run()  # warm-up: first loads of libraries and files
    labels = list(runners)
    seconds: dict[str, list[float]] = {label: [] for label in labels}
    kept_out: dict[str, list[float]] = {label: [] for label in labels}
    for index in range(rounds):
        for label in labels[index % len(labels):] + labels[:index % len(labels)]:
            took, late = timed_with_ticker(runners[label])
            seconds[label].append(took)
            kept_out[label].append(late)
    return {"model": name, "seconds": {k: statistics.median(v) for k, v in seconds.items()},
            "kept_out": {k: statistics.median(v) for k, v in kept_out.items()}}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds (default 3)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as folder:
        rows = [measure(f"feed-forward x{layers}",
                        feed_forward_stack(Path(folder) / f"ffn{layers}.onnx", layers), args.rounds)
                for layers in (4, 12)]
    console = Console(highlight=False, width=max(Console().width, 120))
    table = Table(title="CPU compile: median seconds, and seconds a Python thread beside it was kept out",
                  title_justify="left")
    for column in ("model", "engine", "compile s", "vs raw ORT", "vs serialized", "kept out s",
                   "kept out vs serialized"):
        table.add_column(column, justify="left" if column in ("model", "engine") else "right")
    for row in rows:
        raw, before = row["seconds"]["raw ORT, file"], row["seconds"]["serialized bytes"]
        serialized = row["kept_out"]["serialized bytes"]
        for label, took in row["seconds"].items():
            late = row["kept_out"][label]
            table.add_row(row["model"], label, f"{took:.2f}", f"{took / raw:.2f}x", f"{took / before:.2f}x",
                          f"{late:.2f}", f"{late / serialized:.2f}x" if serialized > 0 else "-")
    console.print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
