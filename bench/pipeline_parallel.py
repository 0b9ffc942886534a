"""PIPELINE_PARALLEL over two GPUs on a GPT-2-medium-sized decoder (random weights).

MEMORY_LIMIT forces a two-way split.  Measured side by side:
  pipeline   HETERO:GPU.0,GPU.1 with PIPELINE_PARALLEL, enough requests in flight;
  stage i    each stage's subgraph alone on its GPU (the slowest bounds the pipeline);
  naive      the same decoder in torch, split over the two GPUs with accelerate's
             device_map (dispatch_model), or by hand when accelerate is missing.
Targets: pipeline >= 0.9 x the slowest stage's rate; pipeline >= 1.8 x naive.

    python bench/pipeline_parallel.py            # two-GPU machine (< 6 minutes)
    python bench/pipeline_parallel.py --quick    # tiny sizes, emulated GPUs

Writes pipeline_parallel.json to $OUT when set.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from dataclasses import asdict

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from closed_loop import keep_full
from hetero_transformer import DecoderSize, build_decoder, feeds_for, setup_devices, write_json

STAGE_DEVICES = ("GPU.0", "GPU.1")
"""The HETERO list the pipeline runs on (and the stage-alone runs are planned for)."""


def throughput(compiled, feeds, seconds: float, in_flight: int) -> float:  # noqa: ANN001
    """Requests per second with ``in_flight`` requests kept going (AsyncInferQueue)."""
    import inferplex as ov

    queue = ov.AsyncInferQueue(compiled, in_flight)
    for _ in range(in_flight):  # warm-up
        queue.start_async(feeds)
    queue.wait_all()
    ended, elapsed = keep_full(queue, feeds, seconds)
    return ended / elapsed


def stage_rates(core, model, config, in_flight: int, seconds: float) -> list[float]:  # noqa: ANN001
    """Each stage's subgraph compiled alone on its device, at full load."""
    from inferplex.placement.planner import plan
    from inferplex.placement.split import extract_submodel

    planned = plan(core.registry, model.ir, list(STAGE_DEVICES), config)  # noqa: SLF001
    rates = []
    rng = np.random.default_rng(0)
    for sub in planned.plan.subgraphs:
        submodel = extract_submodel(planned.annotated, planned.index, sub)
        feeds = {}
        for value in submodel.graph.inputs:
            shape = [d if isinstance(d, int) else 1 for d in value.shape]
            dtype = value.dtype.numpy()
            feeds[value.name] = (rng.integers(0, 10, shape).astype(dtype) if dtype.kind == "i"
                                 else rng.standard_normal(shape).astype(dtype))
        compiled = core.compile_model(core.read_model(submodel), sub.device,
                                      {"PERFORMANCE_HINT": "THROUGHPUT"})
        rates.append(throughput(compiled, feeds, seconds, in_flight))
    return rates


def torch_decoder(size: DecoderSize, weights: dict[str, np.ndarray]):  # noqa: ANN201
    """The same decoder as a torch module (submodules embed, blocks.i, lnf, head)."""
    import torch
    from torch import nn

    def param(name: str) -> nn.Parameter:
        return nn.Parameter(torch.from_numpy(weights[name].copy()), requires_grad=False)

    class Block(nn.Module):
        def __init__(self, i: int) -> None:
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(size.width), nn.LayerNorm(size.width)
            for n in ("q", "k", "v", "o", "fc1", "fc2"):
                setattr(self, n, param(f"h{i}.{n}"))
            self.register_buffer("mask", torch.triu(torch.full((size.seq, size.seq), -1e4), 1))

        def forward(self, x):  # noqa: ANN001, ANN202
            b, s, d = x.shape
            h = self.ln1(x)
            q, k, v = ((h @ w).view(b, s, size.heads, d // size.heads).transpose(1, 2)
                       for w in (self.q, self.k, self.v))
            att = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(d // size.heads) + self.mask, -1)
            x = x + (att @ v).transpose(1, 2).reshape(b, s, d) @ self.o
            up = self.ln2(x) @ self.fc1
            return x + nn.functional.gelu(up, approximate="tanh") @ self.fc2

    class Embed(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.wte, self.wpe = param("wte"), param("wpe")

        def forward(self, ids):  # noqa: ANN001, ANN202
            return self.wte[ids] + self.wpe

    class Head(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.weight = param("head")

        def forward(self, x):  # noqa: ANN001, ANN202
            return x @ self.weight

    class Decoder(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = Embed()
            self.blocks = nn.ModuleList(Block(i) for i in range(size.layers))
            self.lnf = nn.LayerNorm(size.width)
            self.head = Head()

        def forward(self, ids):  # noqa: ANN001, ANN202
            x = self.embed(ids)
            for block in self.blocks:
                x = block(x.to(block.q.device))
            return self.head(self.lnf(x.to(self.head.weight.device)))

    return Decoder().eval()


def naive_rate(size: DecoderSize, weights, feeds, cut: int, seconds: float) -> tuple[float, str]:  # noqa: ANN001
    """Requests/s of the torch decoder over two devices, one request at a time."""
    import torch

    model = torch_decoder(size, weights)
    cuda = torch.cuda.is_available() and torch.cuda.device_count() >= 2
    devices = (0, 1) if cuda else ("cpu", "cpu")
    device_map = {"embed": devices[0], "lnf": devices[1], "head": devices[1]}
    device_map.update({f"blocks.{i}": devices[0] if i < cut else devices[1] for i in range(size.layers)})
    try:
        from accelerate import dispatch_model

        model = dispatch_model(model, device_map=device_map)
        how = "accelerate dispatch_model"
    except ImportError:
        for name, device in device_map.items():
            model.get_submodule(name).to(device)
        how = "manual device placement (accelerate missing)"
    ids = torch.from_numpy(feeds["ids"]).to(devices[0])
    with torch.inference_mode():
        for _ in range(3):
            model(ids).cpu()
        count, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds:
            model(ids).cpu()
            count += 1
    return count / (time.perf_counter() - start), how


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes, emulated GPUs")
    parser.add_argument("--seconds", type=float, default=None)
    args = parser.parse_args()
    setup_devices(args.quick, 2)
    import inferplex as ov

    size = (DecoderSize(4, 64, 2, 16, 2, vocab=128) if args.quick
            else DecoderSize(24, 1024, 16, 128, 4, vocab=50257))
    seconds = args.seconds or (1.0 if args.quick else 15.0)
    proto, weights = build_decoder(size)
    feeds = feeds_for(size)
    weight_bytes = sum(w.nbytes for w in weights.values())
    limit = int(weight_bytes * 0.8)  # too small for one GPU (weights + activations + reserve)
    config = {"MODEL_DISTRIBUTION_POLICY": "PIPELINE_PARALLEL", "PERFORMANCE_HINT": "THROUGHPUT",
              "DEVICE_PROPERTIES": {"GPU": {"MEMORY_LIMIT": limit}}}
    core = ov.Core()
    model = core.read_model(proto)
    compiled = core.compile_model(model, "HETERO:" + ",".join(STAGE_DEVICES), config)
    plan = compiled.get_property("HETERO_SUBGRAPHS")
    print(plan.describe())
    in_flight = max(4, compiled.get_property("OPTIMAL_NUMBER_OF_INFER_REQUESTS"))
    pipe = throughput(compiled, feeds, seconds, in_flight)
    stages = stage_rates(core, model, config, max(2, in_flight // 2), seconds / 2)
    cut = sum(1 for n in plan.subgraphs[0].nodes if n.endswith(".res2"))
    naive, how = naive_rate(size, weights, feeds, cut, seconds)
    result = {
        "size": asdict(size), "memory_limit": limit, "plan": plan.describe(),
        "pipeline_rps": pipe, "stage_rps": stages, "naive_rps": naive, "naive": how,
        "pipeline_efficiency": pipe / min(stages), "pipeline_over_naive": pipe / naive,
        "targets": {"pipeline_efficiency": ">= 0.9", "pipeline_over_naive": ">= 1.8"},
    }
    print(f"\n{'variant':<28}{'requests/s':>12}")
    print(f"{'pipeline (HETERO)':<28}{pipe:>12.2f}")
    for i, rate in enumerate(stages):
        print(f"{f'stage {i} alone':<28}{rate:>12.2f}")
    print(f"{'naive (' + how.split()[0] + ')':<28}{naive:>12.2f}")
    print(f"\npipeline efficiency: {result['pipeline_efficiency']:.2f} of the slowest stage (target >= 0.9)")
    print(f"pipeline / naive:    {result['pipeline_over_naive']:.2f}x (target >= 1.8)")
    write_json("pipeline_parallel.json", result)


if __name__ == "__main__":
    main()
