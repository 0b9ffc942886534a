"""Paired A/B of two inferplex source trees: both loaded at once, measured in alternating windows.

Two child processes import inferplex from two source trees (``--old`` and
``--new``; the latter defaults to this checkout's ``src``), compile the same
workload once, and then run it in short windows in turn (A B B A A B ...), so
that drift in clocks and machine load hits both alike.  Each pair of windows
gives a ratio (new over old, in requests per second); the median ratio and its
spread are printed per workload.

Workloads (``--workloads``, comma-separated):

- ``gpu-async``: ResNet-50 f16, batch 4, THROUGHPUT hint, an AsyncInferQueue of
  OPTIMAL_NUMBER_OF_INFER_REQUESTS kept full, a callback per request (as
  ``bench/closed_loop.py`` measures every throughput);
- ``gpu-sync``: ResNet-50 f16, batch 1, LATENCY hint, ``infer()`` back to back;
- ``cpu-sync`` / ``cpu-async``: a one-Relu model on the CPU with ONNX Runtime
  (the framework's own cost per request), ``infer()`` and AsyncInferQueue.

A ``-ov`` suffix (``cpu-async-ov``) runs the CPU workloads on the OpenVINO engine.
An ``-2x`` suffix (``gpu-async-2x``) keeps twice OPTIMAL_NUMBER_OF_INFER_REQUESTS in flight; a
``-shared`` suffix (``gpu-sync-shared``) calls ``infer(feeds, share_inputs=True)``: the caller's
arrays are read in place, with no copy into the request's tensors (``benchmark_app``'s way).

    python bench/ab.py --old OLD_SRC [--new NEW_SRC] [--workloads gpu-async,gpu-sync]
                       [--pairs 8] [--seconds 1.0]

Without CUDA the GPU workloads run on an emulated GPU with a small CNN.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


def _export_models(folder: Path, cuda: bool) -> None:
    import numpy as np
    import onnx
    from onnx import TensorProto, helper

    sys.path.insert(0, str(HERE))
    from torch_export import export_onnx

    relu = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "tiny",
                             [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 64])],
                             [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 64])])
    tiny = helper.make_model(relu, opset_imports=[helper.make_opsetid("", 17)])
    tiny.ir_version = 9
    onnx.save(tiny, folder / "tiny.onnx")
    import torch

    if cuda:
        import torchvision

        net: Any = torchvision.models.resnet50(weights=None)
    else:
        net = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, stride=4), torch.nn.ReLU(),
                                  torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(8, 10))
    for batch in (1, 4):
        export_onnx(net, (torch.from_numpy(np.zeros((batch, 3, 224, 224), np.float32)),), ["x"],
                    path=folder / f"cnn_b{batch}.onnx")


# --- the child: one source tree, one workload, windows on demand ---------------------------------


def _workload(name: str, folder: Path) -> Any:
    """A zero-argument callable running the workload for ``seconds``; returns requests ended."""
    import numpy as np

    import inferplex as ov

    sys.path.insert(0, str(HERE))
    from closed_loop import keep_full

    core = ov.Core()
    factor = 2 if name.endswith("-2x") else 1
    name = name.removesuffix("-2x")
    shared = name.endswith("-shared")
    name = name.removesuffix("-shared")
    engine = "OPENVINO" if name.endswith("-ov") else "ONNXRUNTIME"
    name = name.removesuffix("-ov")
    if name.startswith("gpu"):
        batch, hint = (4, "THROUGHPUT") if name == "gpu-async" else (1, "LATENCY")
        compiled = core.compile_model(str(folder / f"cnn_b{batch}.onnx"), "GPU.0",
                                      {"PERFORMANCE_HINT": hint, "INFERENCE_PRECISION_HINT": "f16"})
        feeds = {"x": np.random.default_rng(0).random((batch, 3, 224, 224), np.float32)}
    else:
        config: dict[str, Any] = {"PERFORMANCE_HINT": "THROUGHPUT", "NUM_STREAMS": 2}
        if "ENGINE" in core.get_property("CPU", "SUPPORTED_PROPERTIES"):
            config["ENGINE"] = engine
        compiled = core.compile_model(str(folder / "tiny.onnx"), "CPU", config)
        feeds = {"x": np.ones((4, 64), np.float32)}
    if name.endswith("async"):
        jobs = max(1, int(compiled.get_property("OPTIMAL_NUMBER_OF_INFER_REQUESTS"))) * factor
        queue = ov.AsyncInferQueue(compiled, jobs)
        return lambda seconds: keep_full(queue, feeds, seconds)
    request = compiled.create_infer_request()

    def sync(seconds: float) -> tuple[int, float]:
        count, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds:
            request.infer(feeds, share_inputs=shared)
            count += 1
        return count, time.perf_counter() - start

    return sync


def _child(name: str, folder: str) -> None:
    run = _workload(name, Path(folder))
    run(1.0)  # warm-up
    print("ready", flush=True)
    for line in sys.stdin:
        ended, elapsed = run(float(line))
        print(json.dumps(ended / elapsed), flush=True)


# --- the parent ------------------------------------------------------------------------------------


class _Side:
    def __init__(self, src: str, name: str, folder: Path) -> None:
        path = os.pathsep.join(p for p in (src, os.environ.get("PYTHONPATH")) if p)
        env = dict(os.environ, PYTHONPATH=path)
        self.process = subprocess.Popen([sys.executable, __file__, "--child", name, str(folder)], env=env,
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self.process.stdout is not None
        if self.process.stdout.readline().strip() != "ready":
            raise RuntimeError(f"the {src} side of {name} did not start")

    def window(self, seconds: float) -> float:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(f"{seconds}\n")
        self.process.stdin.flush()
        return float(json.loads(self.process.stdout.readline()))

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(timeout=60)


def compare(name: str, old: str, new: str, folder: Path, pairs: int, seconds: float) -> dict[str, Any]:
    sides = {"old": _Side(old, name, folder), "new": _Side(new, name, folder)}
    rates: dict[str, list[float]] = {"old": [], "new": []}
    try:
        for index in range(pairs):
            order = ("old", "new") if index % 2 == 0 else ("new", "old")
            for label in order:
                rates[label].append(sides[label].window(seconds))
    finally:
        for side in sides.values():
            side.close()
    ratios = [n / o for n, o in zip(rates["new"], rates["old"], strict=True)]
    return {"workload": name, "old": statistics.median(rates["old"]), "new": statistics.median(rates["new"]),
            "ratio": statistics.median(ratios), "ratio_min": min(ratios), "ratio_max": max(ratios),
            "pairs": pairs, "seconds": seconds}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old", required=True, help="the source tree (holding inferplex/) to compare with")
    parser.add_argument("--new", default=str(HERE.parent / "src"))
    parser.add_argument("--workloads", default="gpu-async,gpu-sync,cpu-sync,cpu-async")
    parser.add_argument("--pairs", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=1.0)
    args = parser.parse_args()
    import torch

    cuda = torch.cuda.is_available()
    if not cuda:
        os.environ.setdefault("INFERPLEX_EMULATED_GPUS", "1")
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        _export_models(Path(folder), cuda)
        for name in args.workloads.split(","):
            row = compare(name, args.old, args.new, Path(folder), args.pairs, args.seconds)
            rows.append(row)
            print(f"{name:10s} old {row['old']:10.1f}/s  new {row['new']:10.1f}/s  "
                  f"new/old {row['ratio']:.3f} (pairs {row['ratio_min']:.3f}-{row['ratio_max']:.3f})",
                  flush=True)
    if os.environ.get("OUT"):
        Path(os.environ["OUT"], "ab.json").write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        _child(sys.argv[2], sys.argv[3])
    else:
        main()
