"""HETERO:GPU,CPU on a transformer-style model with one CPU-only op in the middle.

Compares, on one model family, side by side:
  cpu      CPU alone, on the model with the CPU-only op (com.microsoft FastGelu);
  hetero   HETERO:GPU,CPU on that model (GPU -> CPU -> GPU);
  gpu      GPU alone, on the same model with the op written in standard ops.
Targets: hetero >= 5x faster than cpu; hetero within 1.3x of gpu; the transfer
share of hetero's time is reported (from its Transfer counters).

    python bench/hetero_transformer.py            # GPU machine (< 6 minutes)
    python bench/hetero_transformer.py --quick    # tiny sizes, emulated GPUs

Writes hetero_transformer.json to $OUT when set.  The decoder builder here is
shared with bench/pipeline_parallel.py.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import time
from dataclasses import asdict, dataclass

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

F = TensorProto.FLOAT


@dataclass(frozen=True)
class DecoderSize:
    layers: int
    width: int
    heads: int
    seq: int
    batch: int
    vocab: int = 0
    """0: the model takes hidden states [B, S, D]; > 0: token ids and an LM head."""


class _Builder:
    def __init__(self, size: DecoderSize, seed: int) -> None:
        self.size, self.nodes, self.inits = size, [], []
        self.rng = np.random.default_rng(seed)
        self.weights: dict[str, np.ndarray] = {}
        self.count = 0

    def weight(self, name: str, shape: tuple[int, ...], scale: float = 0.02) -> str:
        array = (self.rng.standard_normal(shape) * scale).astype(np.float32)
        self.weights[name] = array
        self.inits.append(numpy_helper.from_array(array, name))
        return name

    def const(self, name: str, array: np.ndarray) -> str:
        self.inits.append(numpy_helper.from_array(array, name))
        return name

    def op(self, op_type: str, inputs: list[str], name: str, domain: str = "", **attrs: object) -> str:
        self.count += 1
        out = f"{name}_out"
        self.nodes.append(helper.make_node(op_type, inputs, [out], name=name, domain=domain, **attrs))
        return out

    def gelu(self, x: str, p: str, cpu_only: bool) -> str:
        if cpu_only:
            return self.op("FastGelu", [x], f"{p}.fastgelu", domain="com.microsoft")
        cube = self.op("Mul", [self.op("Mul", [x, x], f"{p}.g_sq"), x], f"{p}.g_cube")
        inner = self.op("Add", [x, self.op("Mul", [cube, "c_0044715"], f"{p}.g_c3")], f"{p}.g_in")
        tanh = self.op("Tanh", [self.op("Mul", [inner, "c_sqrt2pi"], f"{p}.g_sc")], f"{p}.g_tanh")
        half = self.op("Mul", [x, "c_half"], f"{p}.g_half")
        return self.op("Mul", [half, self.op("Add", [tanh, "c_one"], f"{p}.g_1p")], f"{p}.g_out")

    def block(self, x: str, i: int, cpu_only: bool) -> str:
        s, p = self.size, f"h{i}"
        d = s.width
        ln = self.op("LayerNormalization", [x, self.const(f"{p}.ln1.g", np.ones(d, np.float32)),
                                            self.const(f"{p}.ln1.b", np.zeros(d, np.float32))],
                     f"{p}.ln1", axis=-1)
        heads = []
        for name, perm in (("q", [0, 2, 1, 3]), ("k", [0, 2, 3, 1]), ("v", [0, 2, 1, 3])):
            proj = self.op("MatMul", [ln, self.weight(f"{p}.{name}", (d, d))], f"{p}.{name}")
            split = self.op("Reshape", [proj, "shape_bshd"], f"{p}.{name}.split")
            heads.append(self.op("Transpose", [split], f"{p}.{name}.t", perm=perm))
        scores = self.op("Mul", [self.op("MatMul", heads[:2], f"{p}.qk"), "c_scale"], f"{p}.scale")
        probs = self.op("Softmax", [self.op("Add", [scores, "mask"], f"{p}.mask")], f"{p}.softmax", axis=-1)
        ctx = self.op("Transpose", [self.op("MatMul", [probs, heads[2]], f"{p}.pv")], f"{p}.ctx.t",
                      perm=[0, 2, 1, 3])
        merged = self.op("Reshape", [ctx, "shape_bsd"], f"{p}.ctx.merge")
        x = self.op("Add", [x, self.op("MatMul", [merged, self.weight(f"{p}.o", (d, d))], f"{p}.o")],
                    f"{p}.res1")
        ln2 = self.op("LayerNormalization", [x, self.const(f"{p}.ln2.g", np.ones(d, np.float32)),
                                             self.const(f"{p}.ln2.b", np.zeros(d, np.float32))],
                      f"{p}.ln2", axis=-1)
        up = self.op("MatMul", [ln2, self.weight(f"{p}.fc1", (d, 4 * d))], f"{p}.fc1")
        act = self.gelu(up, p, cpu_only)
        down = self.op("MatMul", [act, self.weight(f"{p}.fc2", (4 * d, d))], f"{p}.fc2")
        return self.op("Add", [x, down], f"{p}.res2")


def build_decoder(size: DecoderSize, cpu_only_layer: int | None = None,
                  seed: int = 0) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """An ONNX decoder (pre-LN GPT blocks, causal attention); returns it and its weights.

    ``cpu_only_layer``: the block whose GELU is com.microsoft FastGelu (CPU only).
    """
    b = _Builder(size, seed)
    s = size
    b.const("shape_bshd", np.array([s.batch, s.seq, s.heads, s.width // s.heads], np.int64))
    b.const("shape_bsd", np.array([s.batch, s.seq, s.width], np.int64))
    b.const("c_scale", np.array(1 / math.sqrt(s.width // s.heads), np.float32))
    b.const("mask", np.triu(np.full((s.seq, s.seq), -1e4, np.float32), 1))
    for name, value in (("c_0044715", 0.044715), ("c_sqrt2pi", math.sqrt(2 / math.pi)),
                        ("c_half", 0.5), ("c_one", 1.0)):
        b.const(name, np.array(value, np.float32))
    if s.vocab:
        inputs = [helper.make_tensor_value_info("ids", TensorProto.INT64, [s.batch, s.seq])]
        tok = b.op("Gather", [b.weight("wte", (s.vocab, s.width)), "ids"], "embed")
        x = b.op("Add", [tok, b.weight("wpe", (s.seq, s.width))], "embed.pos")
    else:
        inputs = [helper.make_tensor_value_info("x", F, [s.batch, s.seq, s.width])]
        x = "x"
    for i in range(s.layers):
        x = b.block(x, i, cpu_only=i == cpu_only_layer)
    x = b.op("LayerNormalization", [x, b.const("lnf.g", np.ones(s.width, np.float32)),
                                    b.const("lnf.b", np.zeros(s.width, np.float32))], "lnf", axis=-1)
    out_width = s.vocab or s.width
    y = b.op("MatMul", [x, b.weight("head", (s.width, out_width))], "head")
    b.nodes.append(helper.make_node("Identity", [y], ["y"], name="output"))
    graph = helper.make_graph(b.nodes, "decoder", inputs,
                              [helper.make_tensor_value_info("y", F, [s.batch, s.seq, out_width])],
                              b.inits)
    opsets = [helper.make_opsetid("", 17)] + ([helper.make_opsetid("com.microsoft", 1)]
                                              if cpu_only_layer is not None else [])
    model = helper.make_model(graph, opset_imports=opsets)
    model.ir_version = 9
    return model, b.weights


def feeds_for(size: DecoderSize, seed: int = 1) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    if size.vocab:
        return {"ids": rng.integers(0, size.vocab, (size.batch, size.seq), dtype=np.int64)}
    return {"x": rng.standard_normal((size.batch, size.seq, size.width)).astype(np.float32)}


def latency_ms(compiled, feeds, seconds: float, warmup: int = 3) -> float:  # noqa: ANN001
    """Median sync latency over ``seconds`` (at least 5 runs)."""
    request = compiled.create_infer_request()
    for _ in range(warmup):
        request.infer(feeds)
    times: list[float] = []
    end = time.perf_counter() + seconds
    while time.perf_counter() < end or len(times) < 5:
        start = time.perf_counter()
        request.infer(feeds)
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def transfer_share(core, model, device: str, feeds) -> float:  # noqa: ANN001
    """Transfer time / total counted time of one profiled request."""
    compiled = core.compile_model(model, device, {"ENABLE_PROFILING": True})
    request = compiled.create_infer_request()
    for _ in range(3):
        request.infer(feeds)
    start = time.perf_counter()
    request.infer(feeds)
    total = time.perf_counter() - start
    moved = sum(r.real_time.total_seconds() for r in request.get_profiling_info()
                if r.node_type == "Transfer")
    return moved / total if total else 0.0


def setup_devices(quick: bool, gpus: int) -> None:
    """Emulate GPUs on machines without CUDA (so --quick runs anywhere)."""
    try:
        import torch

        cuda = torch.cuda.is_available() and torch.cuda.device_count() >= gpus
    except ImportError:
        cuda = False
    if not cuda:
        if not quick:
            sys.exit(f"needs {gpus} CUDA GPU(s); use --quick for emulated GPUs")
        os.environ.setdefault("INFERPLEX_EMULATED_GPUS", str(gpus))


def write_json(name: str, payload: dict) -> None:
    out = os.environ.get("OUT")
    if out:
        with open(os.path.join(out, name), "w", encoding="utf-8") as handle:
            json.dump(payload, handle, indent=2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes, emulated GPUs")
    parser.add_argument("--seconds", type=float, default=None, help="measuring time per variant")
    args = parser.parse_args()
    setup_devices(args.quick, 1)
    import inferplex as ov

    size = DecoderSize(2, 64, 2, 16, 2) if args.quick else DecoderSize(12, 1024, 16, 256, 8)
    seconds = args.seconds or (1.0 if args.quick else 10.0)
    middle = size.layers // 2
    with_op, _ = build_decoder(size, cpu_only_layer=middle)
    without_op, _ = build_decoder(size)
    feeds = feeds_for(size)
    core = ov.Core()
    hetero_model, gpu_model = core.read_model(with_op), core.read_model(without_op)
    rows = {}
    for label, model, device in (("cpu", hetero_model, "CPU"), ("hetero", hetero_model, "HETERO:GPU,CPU"),
                                 ("gpu", gpu_model, "GPU")):
        compiled = core.compile_model(model, device)
        rows[label] = latency_ms(compiled, feeds, seconds)
        if label == "hetero":
            plan = compiled.get_property("HETERO_SUBGRAPHS")
    share = transfer_share(core, hetero_model, "HETERO:GPU,CPU", feeds)
    result = {
        "size": asdict(size), "latency_ms": rows, "plan": plan.describe(),
        "hetero_speedup_vs_cpu": rows["cpu"] / rows["hetero"],
        "hetero_over_gpu": rows["hetero"] / rows["gpu"], "transfer_share": share,
        "targets": {"hetero_speedup_vs_cpu": ">= 5", "hetero_over_gpu": "<= 1.3"},
    }
    print(plan.describe())
    print(f"\n{'variant':<10}{'latency ms':>12}")
    for label, value in rows.items():
        print(f"{label:<10}{value:>12.2f}")
    print(f"\nhetero vs cpu: {result['hetero_speedup_vs_cpu']:.2f}x faster (target >= 5)")
    print(f"hetero / gpu:  {result['hetero_over_gpu']:.2f} (target <= 1.3)")
    print(f"transfer share of hetero time: {share * 100:.1f}%")
    write_json("hetero_transformer.json", result)


if __name__ == "__main__":
    main()
