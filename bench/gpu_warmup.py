"""How long a GPU takes to serve at full speed: CUDA-graph captures on one thread or on each worker's.

Each worker of the GPU device captures a CUDA graph on its first run (one at a
time: other runs wait).  PyTorch keeps cuDNN's autotuning results
(``cudnn.benchmark``) per thread, so a capture on each worker's own thread
autotunes every convolution again; on the process's one capture thread only
the first does.  Variants, each in a fresh process (autotuning results last as
long as the thread):

- ``worker threads``: each worker captures on its own thread (the old way);
- ``one capture thread``: every capture on the process's capture thread (the default);
- ``one capture thread, no autotuning``: the same with ``cudnn.benchmark`` off,
  to show what autotuning buys in steady state.

For each: the first request's latency after compile, the time until one request
per worker has ended (every worker captured), and steady throughput with twice
the workers' requests in flight.

Usage::

    python bench/gpu_warmup.py                  # ResNet-50, f16, batch 4, THROUGHPUT (8 workers)
    python bench/gpu_warmup.py --quick          # tiny model, emulated GPU if no CUDA (no captures)

Prints a table with ratios to the old way; writes ``gpu_warmup.json`` to ``$OUT`` when set.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

VARIANTS = ("worker threads", "one capture thread", "one capture thread, no autotuning")


def measure(variant: str, args: argparse.Namespace) -> dict[str, Any]:
    import torch
    from multi_auto import resnet50, tiny_model

    import inferplex as ov
    from inferplex.devices.gpu.program import GpuProgram

    from closed_loop import keep_full

    GpuProgram.capture_on_one_thread = variant != "worker threads"
    core = ov.Core()
    with tempfile.TemporaryDirectory() as folder:
        model, inputs = tiny_model(args.batch) if args.quick else resnet50(args.batch, Path(folder))
        config = {"PERFORMANCE_HINT": "THROUGHPUT"}
        if not args.quick:
            config["INFERENCE_PRECISION_HINT"] = "f16"
        compiled = core.compile_model(model, "GPU.0", config)
        if variant.endswith("no autotuning"):
            torch.backends.cudnn.benchmark = False  # after compile, which turns it on
        workers = int(compiled.get_property("OPTIMAL_NUMBER_OF_INFER_REQUESTS"))
        start = time.perf_counter()
        compiled.create_infer_request().infer(inputs)
        first = time.perf_counter() - start

        # One request per worker at once: all have ended once every worker has captured.
        queue = ov.AsyncInferQueue(compiled, workers)
        ended = threading.Semaphore(0)
        queue.set_callback(lambda _request, _userdata: ended.release())
        start = time.perf_counter()
        for _ in range(workers):
            queue.start_async(inputs)
        queue.wait_all()
        all_workers = time.perf_counter() - start

        steady_queue = ov.AsyncInferQueue(compiled, 2 * workers)
        keep_full(steady_queue, inputs, 1.0)
        count, seconds = keep_full(steady_queue, inputs, args.seconds)
        compiled.release()
    return {"variant": variant, "workers": workers, "first_request_s": first,
            "all_workers_s": all_workers, "steady_fps": count / seconds}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="tiny model, emulated GPU if no CUDA")
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=3.0, help="steady-state measurement")
    parser.add_argument("--variant", choices=VARIANTS, help=argparse.SUPPRESS)  # one, in this process
    args = parser.parse_args()
    if args.quick and "INFERPLEX_EMULATED_GPUS" not in os.environ:
        import torch

        if not torch.cuda.is_available():
            os.environ["INFERPLEX_EMULATED_GPUS"] = "1"
    if args.variant:
        print(json.dumps(measure(args.variant, args)))
        return
    rows = []
    for variant in VARIANTS:
        command = [sys.executable, __file__, "--variant", variant, "--batch", str(args.batch),
                   "--seconds", str(args.seconds), *(["--quick"] if args.quick else [])]
        output = subprocess.run(command, check=True, capture_output=True, text=True, env=os.environ).stdout
        rows.append(json.loads(output.strip().splitlines()[-1]))
        print(f"  {variant}: {rows[-1]}", file=sys.stderr, flush=True)
    old = rows[0]
    print(f"\nResNet-50{' (quick: tiny model)' if args.quick else ''}, batch {args.batch}, "
          f"{old['workers']} workers")
    print(f"{'variant':<36}{'first req s':>12}{'all workers s':>15}{'ratio':>8}"
          f"{'steady req/s':>14}{'ratio':>8}")
    for row in rows:
        print(f"{row['variant']:<36}{row['first_request_s']:>12.3f}{row['all_workers_s']:>15.3f}"
              f"{row['all_workers_s'] / old['all_workers_s']:>8.2f}{row['steady_fps']:>14.1f}"
              f"{row['steady_fps'] / old['steady_fps']:>8.2f}")
    if os.environ.get("OUT"):
        (Path(os.environ["OUT"]) / "gpu_warmup.json").write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
