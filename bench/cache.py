"""First-inference time (compile_model + first infer) with a warm model cache against a cold one,
and where a GPU compile's time goes.

Rows: the CPU on each engine (OpenVINO, ONNX Runtime), GPU.0 (a CUDA GPU, or
emulated with ``INFERPLEX_EMULATED_GPUS=1``), GPU.0 with ``TORCH_COMPILE``
(``--torch-compile``), AUTO, and beside them raw OpenVINO with its own
CACHE_DIR on the CPU.  Every measurement runs in a fresh process, so nothing
kept in memory (torch's compiled code, cuDNN's autotuning, a Core) carries
over from one to the next; imports and the CUDA context are made before the
clock starts.  "cold" starts from an empty cache directory, "warm" from the
one the cold run filled.  TORCH_COMPILE runs get a fresh
``TORCHINDUCTOR_CACHE_DIR`` each, so a warm run has torch's artefacts only
from inferplex's entry; its last column is the warm run's seconds until the
compiled tier serves (the first inference is served by the eager tier while
torch loads them).  Each figure is the median of ``--repeat`` runs.

Models: ``resnet50`` (onnx's light ResNet-50 with random weights in place of
its ConstantOfShape fills, 98 MiB), ``encoder`` (a 6-layer transformer
encoder, d=512, 128 tokens, exported by torch), or any onnx 'light' model name
as it is (weights computed by ConstantOfShape: folding them is the cold work).

``--breakdown`` times the parts of one cold GPU compile in this process:
shape inference, analysis (constant folding), lowering (fx graph), weights
(Conv+BatchNormalization folding and upload), warm-up (CUDA graphs), the
first run, torch.compile's first run (``--torch-compile``), and the cached
form: made (pack) and imported (unpack + lowering).

    INFERPLEX_EMULATED_GPUS=1 python bench/cache.py --model resnet50 --repeat 3
    INFERPLEX_EMULATED_GPUS=1 python bench/cache.py --model resnet50 --breakdown
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

import numpy as np

_CASES = {
    "cpu-openvino": ("inferplex CPU (OpenVINO engine)", "CPU", {"ENGINE": "OPENVINO"}),
    "cpu-onnxruntime": ("inferplex CPU (ONNX Runtime engine)", "CPU", {"ENGINE": "ONNXRUNTIME"}),
    "gpu": ("inferplex GPU.0", "GPU.0", {}),
    "gpu-torch-compile": ("inferplex GPU.0, TORCH_COMPILE", "GPU.0", {"TORCH_COMPILE": True}),
    "auto": ("inferplex AUTO", "AUTO", {}),
    "openvino": ("raw OpenVINO CPU, its CACHE_DIR", "CPU", {}),
}


# --- models --------------------------------------------------------------------------


def _light(name: str) -> bytes:
    import onnx.backend.test.loader

    return (Path(onnx.backend.test.loader.DATA_DIR) / "light" / f"{name}.onnx").read_bytes()


def _random_weights(data: bytes) -> bytes:
    """A light model with each ConstantOfShape fill replaced by a weight of that shape (the fill
    value times uniform noise in [0.9, 1.1], so signs and scales stay those the model runs with)."""
    import onnx
    import onnx_ir as ir

    model = ir.serde.deserialize_model(onnx.load_from_string(data))
    rng = np.random.default_rng(0)
    graph = model.graph
    for node in list(graph):
        shape = node.inputs[0] if node.op_type == "ConstantOfShape" and node.inputs else None
        if shape is None or shape.const_value is None:
            continue
        fill = node.attributes["value"].value.numpy().reshape(-1)[0] if "value" in node.attributes else 0.0
        dims = [int(d) for d in shape.const_value.numpy()]
        array = (fill * rng.uniform(0.9, 1.1, dims)).astype(np.float32)
        out = node.outputs[0]
        weight = ir.Value(name=f"{out.name}.weight", shape=ir.Shape(dims),
                          type=ir.TensorType(ir.DataType.FLOAT), const_value=ir.Tensor(array))
        graph.register_initializer(weight)
        out.replace_all_uses_with(weight)
        if out.is_graph_output():
            continue
        graph.remove(node, safe=True)
    model.ir_version = max(model.ir_version, 7)  # initializers that are not graph inputs
    return bytes(ir.serde.serialize_model(model).SerializeToString())


def _encoder() -> bytes:
    import torch

    sys.path.insert(0, str(Path(__file__).parent))
    from torch_export import export_onnx

    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(512, 8, 2048, batch_first=True)
    net = torch.nn.TransformerEncoder(layer, 6, enable_nested_tensor=False)
    fast_path = torch.backends.mha.get_fastpath_enabled()
    torch.backends.mha.set_fastpath_enabled(False)  # its fused kernel has no ONNX export
    try:
        return bytes(export_onnx(net, (torch.randn(1, 128, 512),), ["x"]).SerializeToString())
    finally:
        torch.backends.mha.set_fastpath_enabled(fast_path)


def _model_bytes(name: str) -> bytes:
    if name == "resnet50":
        return _random_weights(_light("light_resnet50"))
    if name == "encoder":
        return _encoder()
    return _light(name)


def _feed(data: bytes) -> dict[int, np.ndarray]:
    import inferplex as ov

    model = ov.Core().read_model(data)
    shape = [d if isinstance(d, int) else 1 for d in model.inputs[0].shape]
    return {0: np.random.default_rng(0).standard_normal(shape).astype(np.float32)}


# --- one measurement, in a process of its own -------------------------------------------


def _one(case: str, model_path: str, cache: str) -> tuple[float, float | None]:
    """Seconds from compile_model to the end of the first inference, after imports and CUDA set-up;
    with TORCH_COMPILE, also the seconds until the compiled tier serves (None without it)."""
    data = Path(model_path).read_bytes()
    feed = _feed(data)
    _, device, config = _CASES[case]
    if case == "openvino":
        import openvino

        start = time.perf_counter()
        core = openvino.Core()
        core.set_property({"CACHE_DIR": cache})
        core.compile_model(core.read_model(data, b""), "CPU").create_infer_request().infer(feed)
        return time.perf_counter() - start, None
    import inferplex as ov

    _cuda_ready()
    start = time.perf_counter()
    compiled = ov.Core().compile_model(data, device, {**config, "CACHE_DIR": cache})
    compiled.create_infer_request().infer(feed)
    seconds = time.perf_counter() - start
    if os.environ.get("BENCH_CACHE_PHASE") == "warm" and not compiled.get_property("LOADED_FROM_CACHE"):
        raise RuntimeError(f"{case}: the warm run did not load from the cache")
    tier_seconds = None
    if config.get("TORCH_COMPILE"):
        while compiled.get_property("COMPILED_TIER") == "COMPILING" and time.perf_counter() - start < 600:
            time.sleep(0.05)
        tier_seconds = time.perf_counter() - start
    compiled.release()
    return seconds, tier_seconds


def _cuda_ready() -> None:
    """The CUDA context made (and torch imported) before the clock starts: both runs pay it alike."""
    if os.environ.get("INFERPLEX_EMULATED_GPUS"):
        return
    try:
        import torch
    except ImportError:
        return
    if torch.cuda.is_available():
        torch.zeros(1, device="cuda")
        torch.cuda.synchronize()


def _spawn(case: str, model_path: str, cache: str, phase: str) -> tuple[float, float | None]:
    env = dict(os.environ, BENCH_CACHE_PHASE=phase)
    with tempfile.TemporaryDirectory() as inductor:
        env["TORCHINDUCTOR_CACHE_DIR"] = inductor
        done = subprocess.run([sys.executable, __file__, "--one", case, "--model-path", model_path,
                               "--cache", cache], env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "failed")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    return float(result["seconds"]), result["tier_seconds"]


def _measure(case: str, model_path: str, repeat: int) -> tuple[float, float, float | None]:
    """Median seconds cold and warm, and warm until the compiled tier serves (TORCH_COMPILE only)."""
    cold, warm, tier = [], [], []
    for _ in range(repeat):
        with tempfile.TemporaryDirectory() as folder:
            cold.append(_spawn(case, model_path, folder, "cold")[0])
            seconds, tier_seconds = _spawn(case, model_path, folder, "warm")
            warm.append(seconds)
            if tier_seconds is not None:
                tier.append(tier_seconds)
    return statistics.median(cold), statistics.median(warm), statistics.median(tier) if tier else None


# --- where a cold GPU compile's time goes -------------------------------------------------


def _breakdown(data: bytes, torch_compile: bool) -> list[tuple[str, float]]:
    import onnx
    import onnx_ir as ir
    import torch

    from inferplex.devices.gpu.cache_form import optimised_model, pack, unpack
    from inferplex.devices.gpu.graphs import warm_up
    from inferplex.devices.gpu.lower import analyze_model, lower_model
    from inferplex.devices.gpu.optimize import WeightCache, plan_fusions
    from inferplex.devices.gpu.plugin import GpuPlugin
    from inferplex.devices.gpu.program import GpuProgram
    from inferplex.devices.gpu.settings import TORCH_SETTINGS
    from inferplex.devices.gpu.shapes import ShapeInference

    device = GpuPlugin().torch_device("GPU.0")
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    _cuda_ready()
    parts: list[tuple[str, float]] = []

    def timed(label: str, work: Callable[[], Any]) -> Any:
        start = time.perf_counter()
        result = work()
        sync()
        parts.append((label, time.perf_counter() - start))
        return result

    with TORCH_SETTINGS.scope():
        model = timed("read the model (onnx-ir)",
                      lambda: ir.serde.deserialize_model(onnx.load_from_string(data)))
        inference = timed("shape inference (weight-free copy)", lambda: ShapeInference(model))
        analysis = timed("analysis: shape inference + constant folding",
                         lambda: analyze_model(model, inference=inference))
        cache = WeightCache()
        lowered = timed("lowering + weights (fold Conv+BN, upload)",
                        lambda: lower_model(model, device, "f32", analysis, cache))
        timed("  of which lowering alone (weights cached)",
              lambda: lower_model(model, device, "f32", analysis, cache))
        feed = {lowered.input_names[0]: _feed(data)[0]}
        program = GpuProgram(lowered, "GPU.0", device, 1, {}, {})
        if device.type == "cuda":
            timed("warm-up: CUDA graph capture", lambda: warm_up(program, lowered))
        timed("first run", lambda: program.run(feed))
        optimised = timed("cached form: optimised model", lambda: optimised_model(
            model, analysis, plan_fusions(analysis, False), cache))
        blob = timed("cached form: pack", lambda: pack(optimised, lowered.folded_nodes, lowered.input_names,
                                                       lowered.output_names, None))
        form = timed("warm: unpack the cached form", lambda: unpack(blob))
        timed("warm: analysis + lowering + upload of it", lambda: lower_model(form.model, device, "f32"))
        if torch_compile:
            compiled = GpuProgram(lowered, "GPU.0", device, 1, {"TORCH_COMPILE": True}, {})
            timed("torch.compile: first run", lambda: compiled.run(feed))
    parts.append((f"(cached form: {len(blob) / 2**20:.1f} MiB)", 0.0))
    return parts


# --- main --------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="resnet50",
                        help="resnet50, encoder, or an onnx 'light' model name")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--torch-compile", action="store_true", help="add the TORCH_COMPILE row / part")
    parser.add_argument("--breakdown", action="store_true", help="time the parts of one cold GPU compile")
    parser.add_argument("--cases", default="", help="comma-separated subset of " + ",".join(_CASES))
    parser.add_argument("--one", help=argparse.SUPPRESS)
    parser.add_argument("--model-path", help=argparse.SUPPRESS)
    parser.add_argument("--cache", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        seconds, tier_seconds = _one(args.one, args.model_path, args.cache)
        print(json.dumps({"seconds": seconds, "tier_seconds": tier_seconds}))
        return
    data = _model_bytes(args.model)
    if args.breakdown:
        print(f"{args.model}: one cold GPU.0 compile, f32, seconds")
        for label, seconds in _breakdown(data, args.torch_compile):
            print(f"{label:48} {seconds:8.3f}" if seconds else label)
        return
    import inferplex as ov

    gpus = [d for d in ov.Core().available_devices if d.startswith("GPU")]
    cases = [c for c in (args.cases.split(",") if args.cases else _CASES)
             if (gpus or not c.startswith("gpu")) and (args.torch_compile or c != "gpu-torch-compile")]
    print(f"{args.model} ({len(data) / 2**20:.1f} MiB), median of {args.repeat}, each run a fresh process; "
          "first inference = compile_model + one infer")
    print(f"{'device':40} {'cold s':>8} {'warm s':>8} {'cold/warm':>10}  warm, compiled tier serving s")
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "model.onnx")
        Path(path).write_bytes(data)
        for case in cases:
            label = _CASES[case][0]
            try:
                cold, warm, tier = _measure(case, path, args.repeat)
            except Exception as error:  # noqa: BLE001 - one failing device must not hide the others
                print(f"{label:40} failed: {type(error).__name__}: {str(error)[:120]}")
                continue
            tier_text = "" if tier is None else f"  {tier:8.3f}"
            print(f"{label:40} {cold:8.3f} {warm:8.3f} {cold / warm:9.2f}x{tier_text}", flush=True)


if __name__ == "__main__":
    main()
