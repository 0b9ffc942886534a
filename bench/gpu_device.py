"""inferplex's GPU device vs torch eager and torch.compile on the native module, at large batches.

ResNet-50 (torchvision, random weights) and BERT-base (transformers, random
init, sequence 128) are exported to ONNX once, with a static batch per row, and
run at f16 and bf16, batch 1, 8 and 64 (32 for BERT) by these engines:

* ``inferplex``: the GPU device's defaults (LATENCY), measured once the program is hot:
  after ``HOT_RUNS`` runs and ``HOT_SECONDS`` of serving, ``TORCH_COMPILE=AUTO`` compiles the
  lowering in the background and keeps whichever of the compiled and eager tiers measures
  faster (``tier`` says which);
* ``inferplex-eager``: ``TORCH_COMPILE=NO``: CUDA graphs of the eager lowering only;
* ``inferplex-compiled``: ``TORCH_COMPILE=YES``: the compiled tier, whatever its speed;
* ``inferplex-tp``: the THROUGHPUT hint, whose default ``TORCH_COMPILE=AUTO`` compiles the
  lowering in the background at once at batch >= 8; measured after the switch;
* ``eager``, ``max-autotune``, ``reduce-overhead`` (and ``default``): the native module in
  torch eager and under ``torch.compile`` in that mode, channels_last for the CNN.

Each (model, precision, engine) group runs in a child process of its own, so a
crash or a hang costs that group's rows only.  Per row: the median of CUDA-event
times of one inference with inputs and outputs on the device (``device ms``),
the median wall time of one inference from numpy inputs to numpy outputs
(``e2e ms``), the first inference's wall time after the compile, and the compile
time (``compile_model`` for inferplex, up to the switch for ``inferplex-tp``; the
first call for torch.compile).  Ratios are device throughput over the best
torch.compile mode's at the same model, precision and batch.  JSON goes to
``$OUT/gpu_device.json`` when ``OUT`` is set.

    python bench/gpu_device.py                                  # everything (max-autotune: long)
    python bench/gpu_device.py --models resnet50 --precisions f16 --batches 64 \\
        --engines inferplex,inferplex-tp,eager,reduce-overhead --tier-mode default
    python bench/gpu_device.py --quick     # tiny models on the CPU (emulated GPU), to check the script

Without CUDA the script runs ``--quick``: tiny models, tiny shapes, on
emulated GPUs (where the THROUGHPUT engine asks for ``TORCH_COMPILE=YES``).
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
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

ENGINES = ("inferplex", "inferplex-eager", "inferplex-compiled", "inferplex-tp", "eager", "default",
           "max-autotune", "reduce-overhead")
TORCH_MODES = ("default", "max-autotune", "reduce-overhead")
LARGE = {"resnet50": 64, "bert-base": 32, "small-cnn": 4, "small-bert": 4}
"""The model's large batch (``L`` in ``--batches``)."""
_DTYPES = {"f32": "float32", "f16": "float16", "bf16": "bfloat16"}


# --- models ------------------------------------------------------------------------------


def _build(name: str) -> tuple[Any, Callable[[int], tuple[Any, ...]], list[str], bool]:
    """(module, make_inputs(batch), input names, is a CNN) with fixed random weights."""
    import torch

    torch.manual_seed(0)
    nn = torch.nn
    if name == "small-cnn":
        net = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
                            nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                            nn.Linear(32, 10))
        return net, lambda b: (torch.randn(b, 3, 32, 32),), ["x"], True
    if name == "small-bert":
        return _small_bert(), lambda b: (torch.randint(0, 100, (b, 16)),), ["ids"], False
    if name == "resnet50":
        import torchvision

        return (torchvision.models.resnet50(weights=None), lambda b: (torch.randn(b, 3, 224, 224),), ["x"],
                True)
    if name == "bert-base":
        from transformers import BertConfig, BertModel

        class Bert(nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.bert = BertModel(BertConfig())

            def forward(self, ids: Any) -> Any:
                return self.bert(input_ids=ids).last_hidden_state

        return Bert(), lambda b: (torch.randint(0, 30000, (b, 128)),), ["ids"], False
    raise SystemExit(f"unknown model {name!r}; accepted: {', '.join(LARGE)}")


def _small_bert() -> Any:
    import torch

    class SmallBert(torch.nn.Module):
        """Embedding, one self-attention block written out (MatMul, scale, Softmax, MatMul), LayerNorm."""

        def __init__(self, dim: int = 32, heads: int = 2) -> None:
            super().__init__()
            self.heads, self.embed = heads, torch.nn.Embedding(100, dim)
            self.qkv, self.out, self.norm = torch.nn.Linear(dim, 3 * dim), torch.nn.Linear(dim, dim), \
                torch.nn.LayerNorm(dim)

        def forward(self, ids: Any) -> Any:
            x = self.embed(ids)
            batch, seq, dim = x.shape
            q, k, v = self.qkv(x).reshape(batch, seq, 3, self.heads, -1).permute(2, 0, 3, 1, 4).unbind(0)
            scores = torch.matmul(q, k.transpose(-1, -2)) / (dim // self.heads) ** 0.5
            context = torch.matmul(torch.softmax(scores, dim=-1), v).transpose(1, 2).reshape(batch, seq, dim)
            return self.norm(x + self.out(context))

    return SmallBert()


def _export(name: str, batches: list[int], folder: Path, opset: int) -> dict[int, str]:
    """The model as ONNX files with a static batch each ({batch: path}), at ``opset``."""
    import onnx
    from torch_export import export_onnx

    module, make, names, _ = _build(name)
    dynamic = export_onnx(module, make(1), names, output_names=["y"], dynamic_batch=True, opset=opset)
    paths = {}
    for batch in batches:
        model = onnx.ModelProto()
        model.CopyFrom(dynamic)
        for port in (*model.graph.input, *model.graph.output):
            port.type.tensor_type.shape.dim[0].dim_value = batch
        del model.graph.value_info[:]
        paths[batch] = str(folder / f"{name}-b{batch}.onnx")
        onnx.save(model, paths[batch])
    return paths


# --- one group, in the child ----------------------------------------------------------------


def _timer(cuda: bool) -> Callable[[Callable[[], Any], int, int], float]:
    """Median milliseconds of ``fn`` over ``iters`` runs after ``warmup``: CUDA events on CUDA."""
    import torch

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


def _wall(fn: Callable[[], Any], warmup: int, iters: int) -> float:
    for _ in range(warmup):
        fn()
    samples = []
    for _ in range(iters):
        began = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - began) * 1000)
    return statistics.median(samples)


def _inferplex_row(job: dict[str, Any], batch: int, device: Any, make: Callable[[int], tuple[Any, ...]],
                   names: list[str]) -> dict[str, Any]:
    """One inferplex row: the program straight from the GPU plugin (what ``compile_model`` on
    ``GPU.0`` makes), timed on the device with outputs kept there, and end to end with numpy."""
    import onnx_ir as ir
    import torch

    from inferplex.devices.gpu.plugin import GpuPlugin

    config: dict[str, Any] = {"INFERENCE_PRECISION_HINT": job["precision"]}
    if job["engine"] == "inferplex-tp":
        config["PERFORMANCE_HINT"] = "THROUGHPUT"
        config["TORCH_COMPILE_MODE"] = job["tier_mode"]
        if device.type != "cuda":
            config["TORCH_COMPILE"] = "YES"  # AUTO leaves emulated GPUs eager
    elif job["engine"] == "inferplex-eager":
        config["TORCH_COMPILE"] = "NO"
    elif job["engine"] == "inferplex-compiled":
        config["TORCH_COMPILE"] = "YES"
        config["TORCH_COMPILE_MODE"] = job["tier_mode"]
    model = ir.load(job["onnx"][str(batch)])
    inputs = [t.to(device) for t in make(batch)]
    feeds = dict(zip(names, inputs, strict=True))
    host = {n: t.cpu().numpy() for n, t in feeds.items()}
    began = time.perf_counter()
    program = GpuPlugin().compile(model, "GPU.0", config)
    compiled_at = time.perf_counter()
    program.run(host)
    first = time.perf_counter() - compiled_at
    if job["engine"] == "inferplex":
        from inferplex.devices.gpu.tiers import HOT_RUNS, HOT_SECONDS

        with torch.inference_mode():  # the default's steady state: a hot program's tier
            runs = 0
            while (runs <= HOT_RUNS or time.perf_counter() - compiled_at <= HOT_SECONDS) \
                    and program.get_property("COMPILED_TIER") == "EAGER" and device.type == "cuda":
                program.run(feeds, keep_on_device={"y"})
                runs += 1
    tier = program.get_property("COMPILED_TIER")
    end = compiled_at + job["switch_timeout"]
    while tier == "COMPILING" and time.perf_counter() < end:
        time.sleep(0.05)
        tier = program.get_property("COMPILED_TIER")
    compile_s = (time.perf_counter() if tier != "EAGER" else compiled_at) - began
    warmup, iters = job["warmup"], job["iters"]
    with torch.inference_mode():
        device_ms = _timer(device.type == "cuda")(lambda: program.run(feeds, keep_on_device={"y"}),
                                                  warmup, iters)
        e2e_ms = _wall(lambda: program.run(host), warmup, iters)
    program.close()
    return {"device_ms": device_ms, "e2e_ms": e2e_ms, "first_s": first, "compile_s": compile_s, "tier": tier}


def _torch_row(job: dict[str, Any], batch: int, device: Any, native: Any,
               make: Callable[[int], tuple[Any, ...]], cnn: bool) -> dict[str, Any]:
    """One torch row: eager, or torch.compile in the engine's mode (compiled per batch)."""
    import torch

    dtype = getattr(torch, _DTYPES[job["precision"]])
    inputs = [t.to(device) for t in make(batch)]
    inputs = [t.to(dtype) if t.is_floating_point() else t for t in inputs]
    if cnn and device.type == "cuda":
        inputs = [t.contiguous(memory_format=torch.channels_last) for t in inputs]
    mode = job["engine"]
    if mode == "eager":
        forward = native
    else:
        torch._dynamo.reset()  # each batch compiles afresh: compile time is this batch's
        forward = torch.compile(native, mode=mode, dynamic=False)
    step = torch.compiler.cudagraph_mark_step_begin if mode == "reduce-overhead" else (lambda: None)

    def run(*args: Any) -> Any:
        step()
        return forward(*args)

    host = [t.cpu() for t in inputs]

    def end_to_end() -> Any:
        return run(*[t.to(device) for t in host]).float().cpu().numpy()

    with torch.inference_mode():
        began = time.perf_counter()
        run(*inputs)
        if device.type == "cuda":
            torch.cuda.synchronize()
        first = time.perf_counter() - began
        device_ms = _timer(device.type == "cuda")(lambda: run(*inputs), job["warmup"], job["iters"])
        e2e_ms = _wall(end_to_end, job["warmup"], job["iters"])
    return {"device_ms": device_ms, "e2e_ms": e2e_ms, "first_s": first,
            "compile_s": first if mode != "eager" else 0.0}


def _child(job: dict[str, Any]) -> list[dict[str, Any]]:
    """Every batch of one (model, precision, engine) group; an error ends the group's later rows."""
    import torch

    cuda = not job["quick"]
    device = torch.device("cuda", 0) if cuda else torch.device("cpu")
    native = None
    module, make, names, cnn = _build(job["model"])
    if not job["engine"].startswith("inferplex"):
        native = module.eval().to(device=device, dtype=getattr(torch, _DTYPES[job["precision"]]))
        if cnn and cuda:
            native = native.to(memory_format=torch.channels_last)
    rows = []
    for batch in job["batches"]:
        row = {"model": job["model"], "engine": job["engine"], "precision": job["precision"], "batch": batch}
        try:
            measured = (_inferplex_row(job, batch, device, make, names) if native is None
                        else _torch_row(job, batch, device, native, make, cnn))
        except Exception as error:  # noqa: BLE001 - a benchmark reports failures, it does not stop at them
            rows.append({**row, "error": f"{type(error).__name__}: {error}".splitlines()[0][:160]})
            continue
        rows.append({**row, **measured, "items_per_s": batch * 1000 / measured["device_ms"]})
        print(f"  {row} {measured}", file=sys.stderr, flush=True)
    return rows


# --- the parent --------------------------------------------------------------------------------


def _run_group(job: dict[str, Any], timeout: float) -> list[dict[str, Any]]:
    """``job`` in a child process; its rows, or error rows when it crashes or runs out of time."""
    rows: list[dict[str, Any]] = []
    env = {**os.environ, **({"INFERPLEX_EMULATED_GPUS": "1"} if job["quick"] else {})}
    try:
        done = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", json.dumps(job)],
                              capture_output=True, text=True, timeout=timeout, env=env)
        for line in done.stdout.splitlines():
            if line.startswith("ROWS "):
                rows = json.loads(line[5:])
        reason = None if rows else f"child exited {done.returncode}: {done.stderr.strip()[-300:]}"
    except subprocess.TimeoutExpired:
        reason = f"timed out after {timeout:.0f} s"
    if reason is not None:
        print(f"  {job['model']} {job['precision']} {job['engine']}: {reason}", flush=True)
        rows = [{"model": job["model"], "engine": job["engine"], "precision": job["precision"], "batch": b,
                 "error": reason} for b in job["batches"]]
    return rows


def _print_table(rows: list[dict[str, Any]]) -> None:
    best: dict[tuple[Any, ...], float] = {}
    for r in rows:
        if r["engine"] in TORCH_MODES and "error" not in r:
            key = (r["model"], r["precision"], r["batch"])
            best[key] = max(best.get(key, 0.0), r["items_per_s"])
    header = (f"{'model':<11}{'engine':<20}{'prec':<5}{'batch':>6}{'device ms':>11}{'items/s':>10}"
              f"{'vs best compile':>16}{'e2e ms':>10}{'first s':>9}{'compile s':>10}  tier")
    print(header)
    print("-" * len(header))
    for r in rows:
        lead = f"{r['model']:<11}{r['engine']:<20}{r['precision']:<5}{r['batch']:>6}"
        if "error" in r:
            print(f"{lead}  error: {r['error']}")
            continue
        base = best.get((r["model"], r["precision"], r["batch"]))
        ratio = f"{r['items_per_s'] / base:.2f}x" if base else "-"
        print(f"{lead}{r['device_ms']:>11.3f}{r['items_per_s']:>10.1f}{ratio:>16}{r['e2e_ms']:>10.3f}"
              f"{r['first_s']:>9.3f}{r['compile_s']:>10.1f}  {r.get('tier', '')}")


def _batches(spec: str, model: str) -> list[int]:
    return [LARGE[model] if part.strip().upper() == "L" else int(part) for part in spec.split(",")]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="resnet50,bert-base", help="comma-separated: " + ", ".join(LARGE))
    parser.add_argument("--precisions", default="f16,bf16", help="comma-separated: f32, f16, bf16")
    parser.add_argument("--batches", default="1,8,L", help="comma-separated; L: the model's large batch "
                        "(64 ResNet-50, 32 BERT)")
    parser.add_argument("--engines", default=",".join(ENGINES), help="comma-separated: " + ", ".join(ENGINES))
    parser.add_argument("--tier-mode", default="AUTO", help="TORCH_COMPILE_MODE of inferplex-tp and "
                        "inferplex-compiled (AUTO: torch.compile's default mode)")
    parser.add_argument("--switch-timeout", type=float, default=900.0, help="seconds to wait for the switch")
    parser.add_argument("--child-timeout", type=float, default=1800.0, help="seconds per child process")
    parser.add_argument("--budget", type=float, default=0.0, help="seconds for the whole run (0: no "
                        "limit): groups that would start past it are skipped, the table shows what ran")
    parser.add_argument("--opset", type=int, default=17, help="ONNX opset of the export (14: LayerNorm as "
                        "its formula, as exporters targeting older runtimes write it)")
    parser.add_argument("--quick", action="store_true", help="tiny models on the CPU (emulated GPU)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print("ROWS " + json.dumps(_child(json.loads(args.child))), flush=True)
        return 0
    import torch

    quick = args.quick or not torch.cuda.is_available()
    small = {"models": "small-cnn,small-bert", "precisions": "f32", "batches": "1,L",
             "engines": "inferplex,inferplex-tp,eager,default"}
    for option, value in small.items():  # what --quick runs unless told otherwise
        if quick and getattr(args, option) == parser.get_default(option):
            setattr(args, option, value)
    if quick:
        os.environ["INFERPLEX_EMULATED_GPUS"] = "1"
    engines = [e for e in args.engines.split(",") if e]
    unknown = [e for e in engines if e not in ENGINES]
    if unknown:
        raise SystemExit(f"unknown engines {unknown}; accepted: {', '.join(ENGINES)}")
    started = time.perf_counter()
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as folder:
        for model in args.models.split(","):
            batches = _batches(args.batches, model)
            paths = _export(model, batches, Path(folder), args.opset)
            for precision in args.precisions.split(","):
                for engine in engines:
                    job = {"model": model, "precision": precision, "engine": engine, "batches": batches,
                           "onnx": {str(b): p for b, p in paths.items()}, "quick": quick,
                           "tier_mode": args.tier_mode, "switch_timeout": args.switch_timeout,
                           "warmup": 2 if quick else 10, "iters": 5 if quick else 30}
                    spent = time.perf_counter() - started
                    left = args.budget - spent if args.budget else args.child_timeout
                    if left < 10:
                        print(f"skipping {model} {precision} {engine}: out of --budget", flush=True)
                        continue
                    print(f"running {model} {precision} {engine} at batches {batches}", flush=True)
                    rows += _run_group(job, min(args.child_timeout, left))
    _print_table(rows)
    info = {"device": torch.cuda.get_device_name(0) if not quick else "cpu (emulated GPU)",
            "torch": torch.__version__, "quick": quick, "seconds": time.perf_counter() - started,
            "rows": rows}
    if os.environ.get("OUT"):
        with open(os.path.join(os.environ["OUT"], "gpu_device.json"), "w") as handle:
            json.dump(info, handle, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
