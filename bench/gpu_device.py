"""inferplex's GPU device vs torch eager and torch.compile on the native module.

ResNet-50 (torchvision, random weights) and BERT-base (transformers, random
init, sequence 128) are exported to ONNX and run through the GPU device
(CUDA graphs on, inputs and outputs kept on the device, like the native
module's), at f32 and f16, batch 1 and a large batch (64 / 32).  Times are
medians of CUDA-event timings; the table shows each engine's ratio of
throughput to torch.compile's.  Per (model, precision, batch) the engines run
in the order torch.compile, torch eager, inferplex, inferplex numpy; an engine
that raises is recorded as ``error: ...`` and the run goes on (after a sticky
CUDA error the later rows fail too).  JSON goes to ``$OUT/gpu_device.json`` when
``OUT`` is set.

    python bench/gpu_device.py            # on a CUDA machine (< 8 minutes)
    python bench/gpu_device.py --quick    # tiny models on the CPU (emulated GPU), to check the script
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from functools import partial
from typing import Any

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_export import export_onnx

TIME_BUDGET_S = 5 * 60


def median_timer(cuda: bool) -> Callable[[Callable[[], Any], int, int], float]:
    """A function timing ``fn`` ``iters`` times after ``warmup`` runs; median milliseconds."""

    def measure(fn: Callable[[], Any], warmup: int, iters: int) -> float:
        for _ in range(warmup):
            fn()
        samples = []
        for _ in range(iters):
            if cuda:
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                fn()
                end.record()
                end.synchronize()
                samples.append(start.elapsed_time(end))
            else:
                began = time.perf_counter()
                fn()
                samples.append((time.perf_counter() - began) * 1000)
        return statistics.median(samples)

    return measure


def _models(
    quick: bool,
) -> list[tuple[str, torch.nn.Module, Callable[[int], tuple[torch.Tensor, ...]], list[str], int]]:
    """(name, module, make_inputs(batch), input names, large batch)."""
    if quick:
        net = torch.nn.Sequential(
            torch.nn.Conv2d(3, 16, 3, padding=1),
            torch.nn.BatchNorm2d(16),
            torch.nn.ReLU(),
            torch.nn.MaxPool2d(2),
            torch.nn.Conv2d(16, 32, 3, padding=1),
            torch.nn.ReLU(),
            torch.nn.AdaptiveAvgPool2d(1),
            torch.nn.Flatten(),
            torch.nn.Linear(32, 10),
        )
        return [("small-cnn", net, lambda b: (torch.randn(b, 3, 32, 32),), ["x"], 8)]
    import torchvision
    from transformers import BertConfig, BertModel

    class Bert(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.bert = BertModel(BertConfig())

        def forward(self, ids: torch.Tensor) -> torch.Tensor:
            return self.bert(input_ids=ids).last_hidden_state

    return [
        (
            "resnet50",
            torchvision.models.resnet50(weights=None),
            lambda b: (torch.randn(b, 3, 224, 224),),
            ["x"],
            64,
        ),
        ("bert-base", Bert(), lambda b: (torch.randint(0, 30000, (b, 128)),), ["ids"], 32),
    ]


def _run_model(
    name: str,
    module: torch.nn.Module,
    make: Callable[[int], tuple[torch.Tensor, ...]],
    names: list[str],
    large: int,
    device: torch.device,
    args: argparse.Namespace,
    started: float,
) -> list[dict[str, Any]]:
    import inferplex as ov
    from inferplex.devices.gpu.plugin import GpuPlugin

    measure = median_timer(device.type == "cuda")
    module = module.eval()
    import onnx_ir as ir

    model = ir.from_proto(export_onnx(module, make(1), names, output_names=["y"], dynamic_batch=True))
    rows = []
    for precision, dtype in (("f32", torch.float32), ("f16", torch.float16)):
        program = GpuPlugin().compile(model, "GPU.0", {"INFERENCE_PRECISION_HINT": precision})
        # The public API, with numpy in and out: the copies to and from the host count too
        # (outputs shared, not copied again, as benchmark_app reads them).
        public = ov.Core().compile_model(model, "GPU.0", {"INFERENCE_PRECISION_HINT": precision})
        # A fresh copy per precision, and a fresh dynamo cache: nothing of the f32 run leaks in.
        native = copy.deepcopy(module).to(device=device, dtype=dtype)
        torch._dynamo.reset()
        compiled = None
        fused = None  # inferplex with TORCH_COMPILE on the lowered graph, at the large batch
        for batch in (1, large):
            inputs = [t.to(device) for t in make(batch)]
            native_inputs = [t.to(dtype) if t.is_floating_point() else t for t in inputs]
            feeds = dict(zip(names, inputs, strict=True))
            iters = 10 if args.quick else (50 if batch == 1 else 20)
            host_feeds = {n: t.cpu().numpy() for n, t in feeds.items()}
            # torch's engines first: a failure in inferplex's rows is then ours to explain.
            engines: dict[str, Callable[[], Any]] = {}
            if not args.no_compile and time.perf_counter() - started < TIME_BUDGET_S:
                compiled = torch.compile(native) if compiled is None else compiled
                engines["torch.compile"] = partial(compiled, *native_inputs)
            engines["torch eager"] = partial(native, *native_inputs)
            engines["inferplex"] = partial(program.run, feeds, keep_on_device={"y"})
            engines["inferplex numpy"] = partial(public, host_feeds, share_outputs=True)
            if batch == large and not args.no_compile and time.perf_counter() - started < TIME_BUDGET_S:
                fused = GpuPlugin().compile(
                    model, "GPU.0", {"INFERENCE_PRECISION_HINT": precision, "TORCH_COMPILE": True}
                )
                engines["inferplex compile"] = partial(fused.run, feeds, keep_on_device={"y"})
            for engine, fn in engines.items():
                rows.append(_measure_row(measure, fn, args, iters, name, engine, precision, batch))
        program.close()
        public.release()
        if fused is not None:
            fused.close()
    return rows


def _measure_row(
    measure: Callable[..., float],
    fn: Callable[[], Any],
    args: argparse.Namespace,
    iters: int,
    name: str,
    engine: str,
    precision: str,
    batch: int,
) -> dict[str, Any]:
    """One table row; an engine that raises is recorded as an error and the run goes on."""
    row: dict[str, Any] = {"model": name, "engine": engine, "precision": precision, "batch": batch}
    try:
        with torch.inference_mode():
            ms = measure(fn, 3 if args.quick else 10, iters)
    except Exception as error:  # noqa: BLE001 - a benchmark reports failures, it does not stop at them
        message = f"{type(error).__name__}: {error}".splitlines()[0][:160]
        print(f"  {name} {engine} {precision} batch {batch}: error: {message}", flush=True)
        return {**row, "error": message}
    print(f"  measured {name} {engine} {precision} batch {batch}: {ms:.3f} ms", flush=True)
    return {**row, "ms": ms, "items_per_s": batch * 1000 / ms}


def _print_table(rows: list[dict[str, Any]]) -> None:
    reference = {
        (r["model"], r["precision"], r["batch"]): r["items_per_s"]
        for r in rows
        if r["engine"] == "torch.compile" and "error" not in r
    }
    header = f"{'model':<11}{'engine':<17}{'prec':<6}{'batch':>6}{'ms':>10}{'items/s':>11}{'vs compile':>12}"
    print(header)
    print("-" * len(header))
    for r in rows:
        if "error" in r:
            print(f"{r['model']:<11}{r['engine']:<17}{r['precision']:<6}{r['batch']:>6}  error: {r['error']}")
            continue
        base = reference.get((r["model"], r["precision"], r["batch"]))
        ratio = f"{r['items_per_s'] / base:.2f}x" if base else "-"
        print(
            f"{r['model']:<11}{r['engine']:<17}{r['precision']:<6}{r['batch']:>6}{r['ms']:>10.3f}"
            f"{r['items_per_s']:>11.1f}{ratio:>12}"
        )


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="tiny model on the CPU (emulated GPU)")
    parser.add_argument("--no-compile", action="store_true", help="skip torch.compile")
    args = parser.parse_args()
    if args.quick or not torch.cuda.is_available():
        os.environ["INFERPLEX_EMULATED_GPUS"] = "1"
        args.quick, args.no_compile = True, args.no_compile or not torch.cuda.is_available()
        device = torch.device("cpu")
    else:
        device = torch.device("cuda", 0)
    started = time.perf_counter()
    torch.manual_seed(0)
    rows: list[dict[str, Any]] = []
    for spec in _models(args.quick):
        rows += _run_model(*spec, device=device, args=args, started=started)
    _print_table(rows)
    info = {
        "device": torch.cuda.get_device_name(0) if device.type == "cuda" else "cpu (emulated GPU)",
        "torch": torch.__version__,
        "quick": args.quick,
        "seconds": time.perf_counter() - started,
        "rows": rows,
    }
    if os.environ.get("OUT"):
        with open(os.path.join(os.environ["OUT"], "gpu_device.json"), "w") as handle:
            json.dump(info, handle, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
