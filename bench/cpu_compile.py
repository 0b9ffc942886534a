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
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
from gil_timing import alternating_medians, print_table
from onnx import TensorProto, helper, numpy_helper

import inferplex as ov


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
    # IR 10: what ONNX Runtime 1.20 and later read (the onnx package stamps its newest).
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=10), path)
    return path


def _session(source: str | bytes) -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.log_severity_level = 3
    return ort.InferenceSession(source, options, providers=["CPUExecutionProvider"])


def measure_stacks(runners_for: Callable[[Path], dict[str, Callable[[], Any]]], layer_counts: tuple[int, ...],
                   rounds: int) -> list[dict[str, Any]]:
    """Rows for :func:`gil_timing.print_table`: each feed-forward stack's runners, in alternating rounds."""
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        for layers in layer_counts:
            runners = runners_for(feed_forward_stack(Path(folder) / f"ffn{layers}.onnx", layers))
            seconds, kept_out = alternating_medians(runners, rounds)
            rows.append({"model": f"feed-forward x{layers}", "seconds": seconds, "kept_out": kept_out})
    return rows


def stacks_main(description: str, runners_for: Callable[[Path], dict[str, Callable[[], Any]]],
                layer_counts: tuple[int, ...], title: str, before: str, peer: str,
                argv: list[str] | None) -> int:
    """A stack benchmark's command line: ``--rounds``, then :func:`measure_stacks` and its table."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds (default 3)")
    args = parser.parse_args(argv)
    print_table(title, measure_stacks(runners_for, layer_counts, args.rounds), before=before, peer=peer)
    return 0


def runners(path: Path) -> dict[str, Callable[[], Any]]:
    core = ov.Core()
    model = core.read_model(path)
    return {
        "inferplex": lambda: core.compile_model(model, "CPU", {"PERFORMANCE_HINT": "LATENCY"}),
        "serialized bytes": lambda: _session(model.to_onnx().SerializeToString()),
        "raw ORT, file": lambda: _session(str(path)),
    }


def main(argv: list[str] | None = None) -> int:
    return stacks_main(__doc__.splitlines()[0], runners, (4, 12), "CPU compile",
                       before="serialized bytes", peer="raw ORT, file", argv=argv)


if __name__ == "__main__":
    raise SystemExit(main())
