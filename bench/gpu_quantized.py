"""Quantized models on the GPU device: static QDQ and dynamic quantization against the f16 model.

Three models, exported from torch with a static batch and quantized with
``onnxruntime.quantization``:

* ``mlp``: 4 x (Linear 1024 -> 1024, ReLU), batch 256;
* ``resnet18``: a ResNet-18-shaped CNN (BasicBlocks 64-128-256-512, 224 x 224), batch 32;
* ``encoder``: BERT-base's encoder (12 post-norm layers, hidden 768, 12 heads, GELU feed-forward
  3072) on float hidden states, sequence 128, batch 32;
* ``decoder``: a LLaMA-style decoder's feed-forward stack (3 x residual SwiGLU MLP, hidden 4096,
  intermediate 11008, LLaMA-7B's sizes) on ``--tokens`` tokens (1: one decoding step); items are
  tokens.

Variants, each compiled on ``GPU.0`` through the public API:

* ``float-f16``: the float model with ``INFERENCE_PRECISION_HINT`` f16 (the baseline);
* ``float-f32``: the float model at the default f32;
* ``qdq-static``: ``quantize_static(quant_format=QDQ)``, per-channel int8 weights, int8
  activations (MatMul/Gemm of DequantizeLinear outputs run as int8 matmuls; Convs run in
  float on weights dequantized at compile time, each activation's QuantizeLinear ->
  DequantizeLinear pair one fake-quantize call; a Conv whose pair holds the float model's
  Relu in its range runs as Conv + bias + Relu, one cuDNN call, and the fake-quantize, one
  call; under torch.compile the fake-quantize is elementwise ops Inductor fuses);
* ``qdq-static-f16``: the same under the f16 hint (float values between layers, the Convs
  and their weights in f16);
* ``dynamic``: ``quantize_dynamic`` (DynamicQuantizeLinear + MatMulInteger; the CNN's Convs
  become ConvInteger, which this device runs, with the Cast, scale Mul and bias Add after it,
  as one float32 convolution: torch has no int8 convolution kernel);
* ``dynamic-f16``: the same under the f16 hint (those convolutions in f16);
* ``nbits4``: ``MatMulNBitsQuantizer`` (block-wise symmetric 4-bit weights, blocks of 32, the
  ``MatMulNBits`` op onnxruntime-genai's int4 models hold), at the default f32;
* ``nbits4-f16``: the same under the f16 hint.

Per row (model, ``PERFORMANCE_HINT``, ``TORCH_COMPILE``, variant): the median wall time of
one synchronous ``infer`` (``sync ms``) and the throughput of an ``AsyncInferQueue`` of
``--jobs`` requests over ``--iters`` inferences (``items/s``); ``vs f16`` is that throughput
over ``float-f16``'s under the same hint and ``TORCH_COMPILE``.  Under THROUGHPUT the
compiled tier (torch.compile, batch >= 8) is awaited before timing; ``tier`` says which
served.  ``--torch-compile NO,YES,AUTO`` runs each row under each setting: NO is the eager
tier alone, YES the compiled tier whatever its speed, AUTO (the default) what the measured
switch keeps, which should be the faster of the two.  On CUDA the inputs are torch tensors
already on the GPU (no host copy in); outputs come back to the host as ``infer`` returns
them.  ``--calls`` adds, per row, the calls one profiled run of the eager lowering makes (one
per fused call or unfused node; the profiled program is compiled apart, with no compiled
tier, and not timed), the most frequent op types first.  ``--gpu-time`` adds, per row on CUDA,
the GPU time of one inference: the kernels' device time summed by ``torch.profiler`` over 20
synchronous runs (the steadiest measure of the device's own work; host time and transfers out of
the device are not in it), and ``vs f16`` of it (float-f16's over the row's).  JSON goes to
``$OUT/gpu_quantized.json`` when ``OUT`` is set.

    python bench/gpu_quantized.py                    # both models on CUDA
    python bench/gpu_quantized.py --models mlp --hints LATENCY,THROUGHPUT
    python bench/gpu_quantized.py --quick            # tiny shapes on the emulated GPU, to check the script
    python bench/gpu_quantized.py --models decoder --variants float-f16,nbits4-f16,nbits4 --tokens 1
    python bench/gpu_quantized.py --models resnet18 --variants float-f16,qdq-static-f16 --calls
    python bench/gpu_quantized.py --models encoder --variants float-f16,qdq-static-f16,dynamic-f16 --gpu-time
    python bench/gpu_quantized.py --models resnet18 --variants float-f16,dynamic-f16 --hints THROUGHPUT \
        --torch-compile NO,YES,AUTO

Without CUDA the script runs ``--quick`` on an emulated ``GPU.0`` (torch on the CPU).
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_output import write_json

VARIANTS = ("float-f16", "float-f32", "qdq-static", "qdq-static-f16", "dynamic", "dynamic-f16", "nbits4",
            "nbits4-f16")
_SOURCES = {"float-f16": "float", "float-f32": "float", "qdq-static": "static", "qdq-static-f16": "static",
            "dynamic": "dynamic", "dynamic-f16": "dynamic", "nbits4": "nbits4", "nbits4-f16": "nbits4"}


# --- models ------------------------------------------------------------------------------


def _mlp(width: int, layers: int = 4) -> Any:
    import torch

    blocks: list[Any] = []
    for _ in range(layers):
        blocks += [torch.nn.Linear(width, width), torch.nn.ReLU()]
    return torch.nn.Sequential(*blocks)


def _resnet18(base: int, classes: int) -> Any:
    """ResNet-18's layout: a 7x7 stem, four stages of two BasicBlocks, global pool, a Linear head."""
    import torch

    nn = torch.nn

    class Block(nn.Module):
        def __init__(self, cin: int, cout: int, stride: int) -> None:
            super().__init__()
            self.conv1, self.bn1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout)
            self.conv2, self.bn2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False), nn.BatchNorm2d(cout)
            self.down = None if stride == 1 and cin == cout else nn.Sequential(
                nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

        def forward(self, x: Any) -> Any:
            y = torch.relu(self.bn1(self.conv1(x)))
            y = self.bn2(self.conv2(y))
            return torch.relu(y + (x if self.down is None else self.down(x)))

    widths = [base, base * 2, base * 4, base * 8]
    stages, cin = [], base
    for i, width in enumerate(widths):
        stages += [Block(cin, width, 1 if i == 0 else 2), Block(width, width, 1)]
        cin = width
    return nn.Sequential(nn.Conv2d(3, base, 7, 2, 3, bias=False), nn.BatchNorm2d(base), nn.ReLU(),
                         nn.MaxPool2d(3, 2, 1), *stages, nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                         nn.Linear(cin, classes))


def _encoder(hidden: int, heads: int, layers: int) -> Any:
    """BERT-base's encoder layout: post-norm layers of self-attention and a GELU feed-forward of 4x width."""
    import torch

    nn = torch.nn

    class Layer(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.qkv, self.out = nn.Linear(hidden, 3 * hidden), nn.Linear(hidden, hidden)
            self.up, self.down = nn.Linear(hidden, 4 * hidden), nn.Linear(4 * hidden, hidden)
            self.norm1, self.norm2 = nn.LayerNorm(hidden), nn.LayerNorm(hidden)

        def forward(self, x: Any) -> Any:
            batch, length, _ = x.shape
            q, k, v = self.qkv(x).reshape(batch, length, 3, heads, -1).permute(2, 0, 3, 1, 4)
            weights = torch.softmax(q @ k.transpose(-1, -2) / (hidden // heads) ** 0.5, dim=-1)
            context = (weights @ v).transpose(1, 2).reshape(batch, length, hidden)
            x = self.norm1(x + self.out(context))
            return self.norm2(x + self.down(torch.nn.functional.gelu(self.up(x))))

    return nn.Sequential(*[Layer() for _ in range(layers)])


def _decoder(hidden: int, intermediate: int, layers: int) -> Any:
    import torch

    class SwiGLU(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.gate = torch.nn.Linear(hidden, intermediate, bias=False)
            self.up = torch.nn.Linear(hidden, intermediate, bias=False)
            self.down = torch.nn.Linear(intermediate, hidden, bias=False)

        def forward(self, x: Any) -> Any:
            return x + self.down(torch.nn.functional.silu(self.gate(x)) * self.up(x))

    return torch.nn.Sequential(*[SwiGLU() for _ in range(layers)])


def _shapes(name: str, quick: bool, tokens: int = 1) -> tuple[Any, tuple[int, ...]]:
    """(module with fixed random weights, input shape) of a model at full or quick size."""
    import torch

    torch.manual_seed(0)
    if name == "mlp":
        width, batch = (64, 32) if quick else (1024, 256)
        return _mlp(width), (batch, width)
    if name == "resnet18":
        base, side, batch = (8, 32, 2) if quick else (64, 224, 32)
        return _resnet18(base, 1000), (batch, 3, side, side)
    if name == "encoder":
        hidden, heads, layers, length, batch = (64, 4, 2, 16, 2) if quick else (768, 12, 12, 128, 32)
        return _encoder(hidden, heads, layers), (batch, length, hidden)
    if name == "decoder":
        hidden, intermediate, layers = (64, 128, 2) if quick else (4096, 11008, 3)
        return _decoder(hidden, intermediate, layers), (1, tokens, hidden)
    raise SystemExit(f"unknown model {name!r}; accepted: mlp, resnet18, encoder, decoder")


class _Calibration:
    """quantize_static's calibration reader: a few random batches of one example each."""

    def __init__(self, shape: tuple[int, ...], count: int) -> None:
        rng = np.random.default_rng(1)
        one = (1, *shape[1:])
        self._batches = iter([{"x": rng.standard_normal(one).astype(np.float32)} for _ in range(count)])

    def get_next(self) -> dict[str, np.ndarray] | None:
        return next(self._batches, None)


def _prepare(name: str, quick: bool, folder: Path, kinds: set[str], tokens: int
             ) -> tuple[dict[str, str], tuple[int, ...]]:
    """The ONNX files of a model the variants need ({kind: path}: float, static QDQ, dynamic,
    4-bit block-wise) and its input shape."""
    import onnx
    import torch
    from onnxruntime import quantization
    from torch_export import export_onnx

    module, shape = _shapes(name, quick, tokens)
    paths = {kind: str(folder / f"{name}-{kind}.onnx") for kind in kinds | {"float"}}
    export_onnx(module, (torch.randn(*shape),), ["x"], path=Path(paths["float"]), output_names=["y"])
    if "static" in kinds:
        # quantize_static calibrates with one example per batch: make the batch dim free for it.
        dynamic_batch = folder / f"{name}-float-any-batch.onnx"
        export_onnx(module, (torch.randn(*shape),), ["x"], path=dynamic_batch, output_names=["y"],
                    dynamic_batch=True)
        quantization.quantize_static(str(dynamic_batch), paths["static"], _Calibration(shape, 4),
                                     quant_format=quantization.QuantFormat.QDQ, per_channel=True)
        model = onnx.load(paths["static"])
        for port in (*model.graph.input, *model.graph.output):
            port.type.tensor_type.shape.dim[0].dim_value = shape[0]
        onnx.save(model, paths["static"])
    if "dynamic" in kinds:
        quantization.quantize_dynamic(paths["float"], paths["dynamic"])
    if "nbits4" in kinds:
        from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer

        quantizer = MatMulNBitsQuantizer(onnx.load(paths["float"]), block_size=32, is_symmetric=True)
        quantizer.process()
        onnx.save(quantizer.model.model, paths["nbits4"])
    return paths, shape


# --- timing ------------------------------------------------------------------------------


def _items(model: str, shape: tuple[int, ...]) -> int:
    """Items one inference serves: the decoder's tokens, the others' batch."""
    return shape[1] if model == "decoder" else shape[0]


def _sync_ms(request: Any, feeds: dict[str, Any], warmup: int, iters: int) -> float:
    for _ in range(warmup):
        request.infer(feeds)
    samples = []
    for _ in range(iters):
        start = time.perf_counter()
        request.infer(feeds)
        samples.append((time.perf_counter() - start) * 1e3)
    return statistics.median(samples)


def _queue_items_per_s(ov: Any, compiled: Any, feeds: dict[str, Any], batch: int, jobs: int,
                       iters: int) -> float:
    queue = ov.AsyncInferQueue(compiled, jobs)
    for _ in range(jobs * 2):  # warm every request of the queue
        queue.start_async(feeds)
    queue.wait_all()
    start = time.perf_counter()
    for _ in range(iters):
        queue.start_async(feeds)
    queue.wait_all()
    return batch * iters / (time.perf_counter() - start)


def _variant(variant: str, paths: dict[str, str]) -> tuple[str, dict[str, Any]]:
    source = _SOURCES[variant]
    precision = "f16" if variant.endswith("f16") else "f32"
    return paths[source], {"INFERENCE_PRECISION_HINT": precision}


def _measure(ov: Any, core: Any, variant: str, hint: str, setting: str, paths: dict[str, str],
             shape: tuple[int, ...], items_per_run: int, args: argparse.Namespace,
             feed: Callable[[np.ndarray], Any]) -> dict[str, Any]:
    """One row; under THROUGHPUT the compiled tier is awaited (``--switch-timeout``) before timing."""
    path, config = _variant(variant, paths)
    config["PERFORMANCE_HINT"] = hint
    config["TORCH_COMPILE"] = setting
    start = time.perf_counter()
    compiled = core.compile_model(path, "GPU.0", config)
    feeds = {"x": feed(np.random.default_rng(2).standard_normal(shape).astype(np.float32))}
    request = compiled.create_infer_request()
    request.infer(feeds)
    tier = compiled.get_property("COMPILED_TIER")
    while tier == "COMPILING" and time.perf_counter() - start < args.switch_timeout:
        time.sleep(0.05)
        tier = compiled.get_property("COMPILED_TIER")
    compile_s = time.perf_counter() - start
    sync_ms = _sync_ms(request, feeds, args.warmup, args.iters)
    items = _queue_items_per_s(ov, compiled, feeds, items_per_run, args.jobs, args.iters)
    row = {"sync_ms": sync_ms, "items_per_s": items, "compile_s": compile_s, "tier": tier}
    if args.gpu_time and not args.quick:
        row["gpu_us"] = _gpu_us(request, feeds)
    if args.calls:
        # the eager lowering's calls; no background compile of this program outlives the row
        row["calls"] = _calls(core, path, {**config, "ENABLE_PROFILING": True, "TORCH_COMPILE": "NO"}, feeds)
    return row


def _gpu_us(request: Any, feeds: dict[str, Any], runs: int = 20) -> float:
    """µs of CUDA kernel and copy time per synchronous inference, summed by ``torch.profiler``."""
    import torch

    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as profile:
        for _ in range(runs):
            request.infer(feeds)
        torch.cuda.synchronize()
    device = sum(event.device_time for event in profile.events()
                 if event.device_type == torch.autograd.DeviceType.CUDA)
    return device / runs


def _calls(core: Any, path: str, config: dict[str, Any], feeds: dict[str, Any]) -> dict[str, int]:
    """{op type: calls} of one profiled run, most frequent first (transfers and folded nodes left out)."""
    request = core.compile_model(path, "GPU.0", config).create_infer_request()
    request.infer(feeds)
    counts: dict[str, int] = {}
    for record in request.get_profiling_info():
        if record.node_type != "Transfer" and str(record.status).upper().endswith("EXECUTED"):
            counts[record.node_type] = counts.get(record.node_type, 0) + 1
    return dict(sorted(counts.items(), key=lambda item: (-item[1], item[0])))


# --- main --------------------------------------------------------------------------------


def _print(rows: list[dict[str, Any]]) -> None:
    print(f"{'model':<10}{'hint':<12}{'compile':<9}{'variant':<16}{'sync ms':>10}{'items/s':>12}{'vs f16':>8}"
          f"{'compile s':>11}  tier")
    baseline = {(r["model"], r["hint"], r["torch_compile"]): r.get("items_per_s") for r in rows
                if r["variant"] == "float-f16"}
    gpu_baseline = {(r["model"], r["hint"], r["torch_compile"]): r.get("gpu_us") for r in rows
                    if r["variant"] == "float-f16"}
    for r in rows:
        lead = f"{r['model']:<10}{r['hint']:<12}{r['torch_compile']:<9}{r['variant']:<16}"
        if "error" in r:
            print(f"{lead}  failed: {r['error']}")
            continue
        base = baseline.get((r["model"], r["hint"], r["torch_compile"]))
        ratio = f"{r['items_per_s'] / base:.2f}x" if base else "-"
        print(f"{lead}{r['sync_ms']:>10.3f}{r['items_per_s']:>12.1f}{ratio:>8}{r['compile_s']:>11.2f}"
              f"  {r['tier']}")
        if "gpu_us" in r:
            base_us = gpu_baseline.get((r["model"], r["hint"], r["torch_compile"]))
            gpu_ratio = f"{base_us / r['gpu_us']:.2f}x" if base_us else "-"
            print(f"{'':<10}GPU µs per inference: {r['gpu_us']:.0f} ({gpu_ratio} float-f16's)")
        if "calls" in r:
            print(f"{'':<10}calls: {sum(r['calls'].values())} "
                  + ", ".join(f"{op} {count}" for op, count in r["calls"].items()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="mlp,resnet18")
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--hints", default="LATENCY",
                        help="PERFORMANCE_HINT values, comma-separated: LATENCY (CUDA graphs of the eager "
                             "lowering), THROUGHPUT (the torch.compile tier at batch >= 8, awaited)")
    parser.add_argument("--torch-compile", default="AUTO",
                        help="TORCH_COMPILE values, comma-separated: NO, YES, AUTO (each row under each)")
    parser.add_argument("--switch-timeout", type=float, default=300.0,
                        help="seconds to wait for the compiled tier under THROUGHPUT")
    parser.add_argument("--jobs", type=int, default=4, help="requests in flight in the AsyncInferQueue")
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--iters", type=int, default=200)
    parser.add_argument("--tokens", type=int, default=1, help="the decoder's tokens per inference")
    parser.add_argument("--quick", action="store_true", help="tiny shapes on an emulated GPU.0")
    parser.add_argument("--calls", action="store_true",
                        help="per row, the calls of one profiled run by op type (fusions show there)")
    parser.add_argument("--gpu-time", action="store_true",
                        help="per row on CUDA, the GPU time of one inference (torch.profiler)")
    args = parser.parse_args()
    import torch

    if args.quick or not torch.cuda.is_available():
        args.quick, args.warmup, args.iters = True, 2, 6
        os.environ["INFERPLEX_EMULATED_GPUS"] = "1"
    logging.getLogger().setLevel(logging.ERROR)  # quantize_* advise pre-processing on every call
    logging.getLogger("onnxruntime.quantization.matmul_nbits_quantizer").setLevel(logging.ERROR)
    logging.getLogger("inferplex").setLevel(logging.WARNING)  # a graph break's warning stays shown
    import inferplex as ov

    core = ov.Core()
    cuda = not args.quick

    def feed(array: np.ndarray) -> Any:
        return torch.from_numpy(array).cuda() if cuda else array

    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as folder:
        for model in args.models.split(","):
            kinds = {_SOURCES[variant] for variant in args.variants.split(",")}
            paths, shape = _prepare(model, args.quick, Path(folder), kinds, args.tokens)
            for hint in args.hints.split(","):
                for setting in args.torch_compile.split(","):
                    for variant in args.variants.split(","):
                        row: dict[str, Any] = {"model": model, "hint": hint, "torch_compile": setting,
                                               "variant": variant, "batch": shape[0]}
                        try:
                            items = _items(model, shape)
                            row.update(_measure(ov, core, variant, hint, setting, paths, shape, items, args,
                                                feed))
                        except Exception as e:  # noqa: BLE001 - one failing variant costs its row only
                            row["error"] = f"{type(e).__name__}: {e}"[:300]
                        rows.append(row)
    _print(rows)
    device = torch.cuda.get_device_name() if cuda else "emulated"
    write_json("gpu_quantized.json", {"device": device, "rows": rows})


if __name__ == "__main__":
    main()
