"""Where MULTI and CUMULATIVE throughput goes: ResNet-50 (f16, batch 4), configuration by configuration.

Rows, closed loop through AsyncInferQueue for ``--seconds`` each:
  GPU.0 alone in this process (1x and 2x its optimal requests in flight);
  MULTI:GPU.0,GPU.1 (worker processes) and MULTI:GPU.0 alone through a worker process,
  which shows what the worker-process path costs one GPU;
  CUMULATIVE GPU.0+CPU with the CPU's INFERENCE_NUM_THREADS auto/16/8/4, the GPU
  in a worker process (YES) or in this process (NO).

    python bench/multi_diagnostics.py              # two CUDA GPUs (about 3 minutes)
    python bench/multi_diagnostics.py --quick      # tiny model, emulated GPUs
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from multi_auto import closed_loop, resnet50, tiny_model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny model, 2 emulated GPUs")
    parser.add_argument("--seconds", type=float, default=None, help="per row (default 3; 0.5 quick)")
    args = parser.parse_args()
    seconds = args.seconds or (0.5 if args.quick else 3.0)
    if args.quick:
        os.environ.setdefault("INFERPLEX_EMULATED_GPUS", "2")
    import inferplex as ov

    core = ov.Core()
    folder = tempfile.mkdtemp()
    model, inputs = tiny_model(4) if args.quick else resnet50(4, Path(folder))
    gpu = {} if args.quick else {"INFERENCE_PRECISION_HINT": "f16"}

    def row(label: str, device: str, config: dict[str, Any], jobs_per_optimal: int = 1) -> None:
        compiled = core.compile_model(model, device, config)
        result = closed_loop(compiled, inputs, seconds, jobs_per_optimal)
        compiled.release()
        devices = "  ".join(f"{d}: {s['fps']:.0f}" for d, s in result["devices"].items())
        print(f"{label:58s} {result['fps']:8.1f} req/s  jobs {result['jobs']}  {devices}", flush=True)

    row("GPU.0 alone", "GPU.0", {"PERFORMANCE_HINT": "THROUGHPUT", **gpu})
    row("GPU.0 alone, 2x requests", "GPU.0", {"PERFORMANCE_HINT": "THROUGHPUT", **gpu}, 2)
    row("MULTI:GPU.0,GPU.1 (worker processes)", "MULTI:GPU.0,GPU.1", {"DEVICE_PROPERTIES": {"GPU": gpu}})
    row("MULTI:GPU.0 through a worker process", "MULTI:GPU.0",
        {"DEVICE_PROPERTIES": {"GPU": gpu}, "MULTI_WORKER_PROCESSES": "YES"})
    for threads in (0, 16, 8, 4):
        cpu = {"INFERENCE_NUM_THREADS": threads} if threads else {}
        for processes in ("YES", "NO"):
            row(f"CUMULATIVE GPU+CPU, CPU threads {threads or 'auto'}, worker process {processes}",
                "AUTO:GPU.0,CPU", {"PERFORMANCE_HINT": "CUMULATIVE_THROUGHPUT",
                                   "MULTI_WORKER_PROCESSES": processes,
                                   "DEVICE_PROPERTIES": {"GPU": gpu, "CPU": cpu}})


if __name__ == "__main__":
    main()
