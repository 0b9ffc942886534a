"""MULTI / AUTO benchmark: each device alone at its best, then the devices together.

For each model, in one run:

1. throughput of every device alone (THROUGHPUT hint; the better of its optimal number of
   requests in flight and twice that), and of the first GPU alone as MULTI serves it, from
   a worker process (``MULTI:GPU.0``): stricter ratios count each GPU at the better of both;
2. ``MULTI:GPU.0,GPU.1`` against the sum of the two GPUs alone (target >= 0.95): the
   default (``MULTI_WORKER_PROCESSES=AUTO``: each CUDA GPU in a worker process), ``YES``
   (every device but the host in one: for two GPUs the same, so the two rows show the spread
   of one run), all in this process;
3. ``AUTO`` with ``CUMULATIVE_THROUGHPUT`` over GPU.0 + CPU against GPU alone + CPU
   alone (target >= 0.95, and never below GPU alone), once per SCHEDULE_POLICY and
   once with MULTI_CHECK_HOST_GAIN off, closed loop and as a burst (N requests
   submitted at once, time to the last);
4. GPU alone and CUMULATIVE (defaults) measured in turns, ``--rounds`` times, both
   kept compiled: the ratio of each round and the median;
5. first-inference latency of ``AUTO`` (compile_model call to first result) with and
   without ENABLE_STARTUP_FALLBACK, each in a new process; with fallback, requests then
   go on one after another until one runs on the GPU: when it did, and how long it took
   (the hand-over).  With ``--first-inference-only``, also two variants that inferplex does
   not do, for comparison: no CUDA-graph warm-up at compile, and AUTO's CPU helper compiled in
   a worker process of its own.

Usage::

    python bench/multi_auto.py                 # ResNet-50 and BERT-base, GPUs in f16
    python bench/multi_auto.py --quick         # tiny model, 2 emulated GPUs (no CUDA needed)
    python bench/multi_auto.py --models resnet50 --seconds 8
    python bench/multi_auto.py --models bert --rounds 6   # more turns of GPU alone vs CUMULATIVE
    python bench/multi_auto.py --first-inference-only      # section 5 and its variants, 3 samples
    python bench/multi_auto.py --cpu-engine ONNXRUNTIME    # the CPU (alone and as a member) on that engine

Prints a table with ratios; writes ``multi_auto.json`` to ``$OUT`` when it is set.
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

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_export import export_onnx

from closed_loop import keep_full

POLICIES = ("DEVICE_PRIORITY", "ROUND_ROBIN", "EARLIEST_FINISH")


# --- models --------------------------------------------------------------------------


def tiny_model(batch: int) -> tuple[Any, dict[str, np.ndarray]]:
    """A 4-layer MLP (256 wide), built with onnx.helper."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    nodes, inits, prev = [], [], "x"
    for i in range(4):
        w = (rng.standard_normal((256, 256)) / 16).astype(np.float32)
        inits.append(numpy_helper.from_array(w, f"w{i}"))
        nodes.append(helper.make_node("MatMul", [prev, f"w{i}"], [f"m{i}"], name=f"matmul{i}"))
        nodes.append(helper.make_node("Relu", [f"m{i}"], [f"r{i}"], name=f"relu{i}"))
        prev = f"r{i}"
    nodes[-1].output[0] = "y"
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 256])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, 256])
    graph = helper.make_graph(nodes, "mlp", [x], [y], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model, {"x": rng.standard_normal((batch, 256)).astype(np.float32)}


def resnet50(batch: int, folder: Path) -> tuple[Any, dict[str, np.ndarray]]:
    import torch
    import torchvision

    x = torch.randn(batch, 3, 224, 224)
    path = export_onnx(torchvision.models.resnet50(weights=None), (x,), ["x"], path=folder / "resnet50.onnx")
    return str(path), {"x": x.numpy()}


def bert_base(batch: int, folder: Path, seq: int = 128) -> tuple[Any, dict[str, np.ndarray]]:
    import torch
    from transformers import BertConfig, BertModel

    class Wrapped(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.bert = BertModel(BertConfig())

        def forward(self, ids: Any, mask: Any) -> Any:
            return self.bert(input_ids=ids, attention_mask=mask).last_hidden_state

    ids = torch.randint(0, 30000, (batch, seq))
    mask = torch.ones(batch, seq, dtype=torch.int64)
    path = export_onnx(Wrapped(), (ids, mask), ["input_ids", "attention_mask"],
                       path=folder / "bert_base.onnx")
    return str(path), {"input_ids": ids.numpy(), "attention_mask": mask.numpy()}


# --- measurements ----------------------------------------------------------------------


WARMUP_SECONDS = 2.0
"""Closed loop before each measurement: warm-up runs (CUDA graph capture) and the
scheduler's learning (latency estimates, MULTI_CHECK_HOST_GAIN) are not measured."""


def closed_loop(compiled: Any, inputs: dict[str, np.ndarray], seconds: float,
                jobs_per_optimal: int = 1) -> dict[str, Any]:
    """Keep OPTIMAL_NUMBER_OF_INFER_REQUESTS (x ``jobs_per_optimal``) in flight for ``seconds``."""
    import inferplex as ov

    jobs = max(1, int(compiled.get_property("OPTIMAL_NUMBER_OF_INFER_REQUESTS"))) * jobs_per_optimal
    queue = ov.AsyncInferQueue(compiled, jobs)
    warmed, warm_seconds = keep_full(queue, inputs, min(WARMUP_SECONDS, seconds))
    before = _stats(compiled)
    ended, elapsed = keep_full(queue, inputs, seconds)
    after = _stats(compiled)
    return {"fps": ended / elapsed, "requests": ended, "jobs": jobs,
            "warmup_fps": warmed / warm_seconds, "devices": _device_delta(before, after, elapsed),
            "states": {name: s.get("state") for name, s in after.items()}}


def host_gain_check(compiled: Any) -> dict[str, Any] | None:
    """MULTI_CHECK_HOST_GAIN's state as DEVICE_STATISTICS reports it on the host device (None: no host)."""
    try:
        stats = compiled.get_property("DEVICE_STATISTICS")
    except Exception:  # noqa: BLE001 - not a MULTI/AUTO model
        return None
    return next((entry["host_gain"] for entry in stats.values() if "host_gain" in entry), None)


def burst(compiled: Any, inputs: dict[str, np.ndarray], count: int) -> dict[str, Any]:
    """Start ``count`` requests at once (one InferRequest each); requests/s up to the last one's end."""
    requests = [compiled.create_infer_request() for _ in range(count)]
    left = [count]
    finished = threading.Event()
    lock = threading.Lock()

    def done(_: Any) -> None:
        with lock:
            left[0] -= 1
            if left[0] == 0:
                finished.set()

    for request in requests:
        request.set_callback(done, None)
    start = time.perf_counter()
    for request in requests:
        request.start_async(inputs, share_inputs=True)  # as benchmark_app: the engine, not a copy
    finished.wait()
    elapsed = time.perf_counter() - start
    return {"fps": count / elapsed, "makespan_s": elapsed}


def first_inference(core: Any, model: Any, inputs: dict[str, np.ndarray], fallback: bool,
                    config: dict[str, Any], follow_seconds: float = 10.0) -> dict[str, Any]:
    """The compile_model call to the first result, then requests one after another until one
    runs on the chosen device (at most ``follow_seconds``): the hand-over and what it costs."""
    start = time.perf_counter()
    compiled = core.compile_model(model, "AUTO", {**config, "ENABLE_STARTUP_FALLBACK": fallback})
    compiled_at = time.perf_counter() - start
    request = compiled.create_infer_request()
    request.infer(inputs)
    first = time.perf_counter() - start
    devices = compiled.get_property("EXECUTION_DEVICES")
    first_device, latencies = request.device, []
    helper = first_device if devices and str(devices[0]).startswith("(") else None  # startup helper serving
    while request.device == helper and time.perf_counter() - start < first + follow_seconds:
        began = time.perf_counter()
        request.infer(inputs)
        latencies.append(time.perf_counter() - began)
    compiled.release()
    return {"first_inference_s": first, "compile_returned_s": compiled_at,
            "first_device": first_device, "execution_devices_then": devices,
            "on_chosen_device_s": time.perf_counter() - start if request.device != helper else None,
            "chosen_device": request.device,
            "first_on_chosen_latency_s": latencies[-1] if latencies else None,
            "requests_before_chosen": max(0, len(latencies) - 1)}


def _stats(compiled: Any) -> dict[str, dict[str, Any]]:
    try:
        return compiled.get_property("DEVICE_STATISTICS")
    except Exception:  # noqa: BLE001 - single devices have none
        return {}


def _device_delta(before: dict[str, Any], after: dict[str, Any], elapsed: float) -> dict[str, Any]:
    counts = {name: s["requests"] - before.get(name, {}).get("requests", 0) for name, s in after.items()}
    total = sum(counts.values()) or 1
    return {name: {"requests": n, "share": n / total, "fps": n / elapsed} for name, n in counts.items()}


# --- the run -------------------------------------------------------------------------------


def bench_model(core: Any, name: str, model: Any, inputs: dict[str, np.ndarray], gpus: list[str],
                args: argparse.Namespace) -> dict[str, Any]:
    gpu_props = {"INFERENCE_PRECISION_HINT": args.gpu_precision} if args.gpu_precision else {}
    result: dict[str, Any] = {"alone": {}, "alone_worker_process": {}, "multi": {}, "multi_all_processes": {},
                              "multi_one_process": {}, "cumulative": {}, "first_inference": {}}

    def timed(device: str, config: dict[str, Any]) -> Any:
        start = time.perf_counter()
        compiled = core.compile_model(model, device, config)
        log(f"  {name}: compiled {device} in {time.perf_counter() - start:.1f} s")
        return compiled

    cpu_props = {"ENGINE": args.cpu_engine} if args.cpu_engine else {}
    members = {name: props for name, props in (("GPU", gpu_props), ("CPU", cpu_props)) if props}
    per_device = {"DEVICE_PROPERTIES": members} if members else {}
    for device in [*gpus, "CPU"]:
        config = {"PERFORMANCE_HINT": "THROUGHPUT", **(gpu_props if device != "CPU" else cpu_props)}
        compiled = timed(device, config)
        # At its best: the optimal number of requests in flight, or twice that if it serves more.
        tries = [closed_loop(compiled, inputs, args.seconds, k) for k in (1, 2)]
        result["alone"][device] = max(tries, key=lambda r: r["fps"])
        compiled.release()
        log(f"  {name}: {device} alone {result['alone'][device]['fps']:.1f} req/s")
    if gpus:
        # The first GPU alone as MULTI serves it: from a worker process of its own.
        compiled = timed(f"MULTI:{gpus[0]}", {**per_device, "MULTI_WORKER_PROCESSES": "YES"})
        result["alone_worker_process"] = closed_loop(compiled, inputs, args.seconds)
        compiled.release()
        log(f"  {name}: {gpus[0]} alone through a worker process {result['alone_worker_process']['fps']:.1f}")
    if len(gpus) >= 2:
        # MULTI_WORKER_PROCESSES: AUTO (the default: each GIL-bound GPU in a worker process),
        # YES (each GPU in a worker process), NO (every device driven from this process).
        for setting, key in (("AUTO", "multi"), ("YES", "multi_all_processes"), ("NO", "multi_one_process")):
            compiled = timed(f"MULTI:{gpus[0]},{gpus[1]}", {**per_device, "MULTI_WORKER_PROCESSES": setting})
            result[key] = closed_loop(compiled, inputs, args.seconds)
            compiled.release()
            log(f"  {name}: MULTI, MULTI_WORKER_PROCESSES={setting}: {result[key]['fps']:.1f} req/s")
    if gpus:
        # Each policy on a fresh compile (MULTI_CHECK_HOST_GAIN decides anew), then the
        # default policy with the check off: the CPU always serving beside the GPU.
        variants = [(p, {"SCHEDULE_POLICY": p}) for p in POLICIES]
        variants.append(("EARLIEST_FINISH, MULTI_CHECK_HOST_GAIN=NO", {"MULTI_CHECK_HOST_GAIN": False}))
        for label, extra in variants:
            compiled = timed(f"AUTO:{gpus[0]},CPU",
                             {"PERFORMANCE_HINT": "CUMULATIVE_THROUGHPUT", **per_device, **extra})
            entry = closed_loop(compiled, inputs, args.seconds)
            entry["burst"] = burst(compiled, inputs, args.burst)
            check = host_gain_check(compiled)
            entry["host_gain_rates"] = check["rates"] if check is not None else None
            result["cumulative"][label] = entry
            compiled.release()
            log(f"  {name}: CUMULATIVE {label} {entry['fps']:.1f} req/s, burst {entry['burst']['fps']:.1f}")
    if gpus and args.rounds:
        result["paired"] = paired_rounds(core, model, inputs, gpus[0], gpu_props, per_device, args)
    if not args.skip_first_inference:
        result["first_inference"] = first_inferences(model, inputs, per_device, args)
    return result


def first_inferences(model: Any, inputs: dict[str, np.ndarray], per_device: dict[str, Any],
                     args: argparse.Namespace) -> dict[str, Any]:
    """First inference with and without startup fallback, ``args.samples`` new processes each (median).

    With ``--first-inference-only``, also two variants that are not what inferplex does (each
    made in its new process only): the GPU's warm-up at compile turned off (as before it existed:
    each worker then captures its CUDA graph on its first request), and the startup helper
    compiled in a worker process of its own (away from this process's GIL, which ONNX Runtime
    1.30 holds while it builds a session; paid for with a process start and a copy of the model).
    """
    modes: list[tuple[str, bool, str | None]] = [("with startup fallback", True, None),
                                                 ("without startup fallback", False, None)]
    if args.first_inference_only:
        modes += [("with startup fallback, no warm-up at compile", True, NO_WARM_UP),
                  ("without startup fallback, no warm-up at compile", False, NO_WARM_UP),
                  ("with startup fallback, the helper in a worker process", True, HELPER_PROCESS)]
    results: dict[str, Any] = {}
    for _ in range(args.samples):  # in turns: the machine's drift spreads over every mode
        for mode, fallback, variant in modes:
            sample = first_inference_in_a_new_process(model, inputs, fallback, per_device, variant)
            results.setdefault(mode, []).append(sample)
    return {mode: _median_sample(samples) for mode, samples in results.items()}


NO_WARM_UP = "no warm-up"
HELPER_PROCESS = "helper process"


def _median_sample(samples: list[dict[str, Any]]) -> dict[str, Any]:
    """The sample of median first-inference time, with every sample's time beside it."""
    ordered = sorted(samples, key=lambda r: r["first_inference_s"])
    median = dict(ordered[(len(ordered) - 1) // 2])
    median["samples_s"] = [r["first_inference_s"] for r in samples]
    median["first_on_chosen_latency_samples_s"] = [r["first_on_chosen_latency_s"] for r in samples]
    return median


def first_inference_in_a_new_process(model: Any, inputs: dict[str, np.ndarray], fallback: bool,
                                     config: dict[str, Any], variant: str | None = None) -> dict[str, Any]:
    """``first_inference`` in a new process, as a program's first model would see it.

    In this process the sections above have already compiled the model: the
    capture thread keeps cuDNN's autotuning results, and kernels are loaded.
    The new process sets up CUDA before the clock starts, as the sections did.
    """
    import onnx

    with tempfile.TemporaryDirectory() as folder:
        path = model if isinstance(model, str) else str(Path(folder) / "model.onnx")
        if not isinstance(model, str):
            onnx.save(model, path)
        np.savez(Path(folder) / "inputs.npz", **inputs)
        job = json.dumps({"model": path, "inputs": str(Path(folder) / "inputs.npz"), "fallback": fallback,
                          "config": config, "variant": variant})
        done = subprocess.run([sys.executable, __file__, "--first-inference", job],
                              capture_output=True, text=True)
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        raise RuntimeError(f"the first-inference process ended with exit code {done.returncode}: "
                           f"{done.stderr[-2000:]}")
    answer: dict[str, Any] = json.loads(lines[-1])
    return answer


def _first_inference_here(job: dict[str, Any]) -> None:
    import inferplex as ov

    if job.get("variant") == NO_WARM_UP:
        from inferplex.devices.gpu import graphs

        graphs.warm_up = lambda program, lowered: False  # each worker captures on its first request
    if job.get("variant") == HELPER_PROCESS:
        from inferplex.multi import auto

        compile_member = auto.compile_member

        def helper_in_a_process(registry: Any, model: Any, name: str, config: Any, num_requests: Any = None,
                                own_process: bool = False, exit_timeout: Any = None) -> Any:
            host = registry.device_property(name, "DEVICE_TYPE") == "host"
            return compile_member(registry, model, name, config, num_requests, own_process or host,
                                  exit_timeout)

        auto.compile_member = helper_in_a_process
    core = ov.Core()
    if any(d.startswith("GPU") for d in core.available_devices):
        try:
            import torch

            if torch.cuda.is_available():
                torch.cuda.init()
                torch.empty(1, device="cuda")  # the CUDA context, made before the clock starts
        except ImportError:
            pass
    with np.load(job["inputs"]) as saved:
        inputs = {name: saved[name] for name in saved.files}
    result = first_inference(core, job["model"], inputs, job["fallback"], job["config"])
    print(json.dumps(result, default=str))


def paired_rounds(core: Any, model: Any, inputs: dict[str, np.ndarray], gpu: str, gpu_props: dict[str, Any],
                  per_device: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    """GPU alone and CUMULATIVE GPU+CPU (defaults) measured in turns, ``args.rounds`` times.

    Both stay compiled, so each round compares the two a few seconds apart: the
    ratio of each round, and its median, are free of drift between the sections
    above (the GPU's clock, the host's other work).
    """
    alone = core.compile_model(model, gpu, {"PERFORMANCE_HINT": "THROUGHPUT", **gpu_props})
    together = core.compile_model(model, f"AUTO:{gpu},CPU",
                                  {"PERFORMANCE_HINT": "CUMULATIVE_THROUGHPUT", **per_device})
    rounds = []
    for index in range(args.rounds):
        gpu_fps = closed_loop(alone, inputs, args.seconds)["fps"]
        cumulative_fps = closed_loop(together, inputs, args.seconds)["fps"]
        rounds.append({"gpu_alone": gpu_fps, "cumulative": cumulative_fps, "ratio": cumulative_fps / gpu_fps})
        log(f"  round {index + 1}: GPU alone {gpu_fps:.1f}, CUMULATIVE {cumulative_fps:.1f} req/s, "
            f"{cumulative_fps / gpu_fps:.3f}x")
    alone.release()
    together.release()
    ratios = sorted(r["ratio"] for r in rounds)
    return {"rounds": rounds, "median_ratio": float(np.median(ratios)), "min_ratio": ratios[0],
            "max_ratio": ratios[-1]}


def ratios(result: dict[str, Any], gpus: list[str]) -> dict[str, float]:
    alone = {d: r["fps"] for d, r in result["alone"].items()}
    out: dict[str, float] = {}
    # Stricter: each GPU counted at the better of in-process and through a worker process
    # (measured for the first GPU, applied to both).
    worker_gain = (max(1.0, result["alone_worker_process"]["fps"] / alone[gpus[0]])
                   if result.get("alone_worker_process") else 1.0)
    if result["multi"]:
        both = alone[gpus[0]] + alone[gpus[1]]
        out["multi_gpus_vs_sum"] = result["multi"]["fps"] / both
        out["multi_gpus_vs_sum_best_of_both_ways"] = result["multi"]["fps"] / (both * worker_gain)
        out["multi_all_processes_vs_sum"] = result["multi_all_processes"]["fps"] / both
        out["multi_one_process_vs_sum"] = result["multi_one_process"]["fps"] / both
    for policy, entry in result["cumulative"].items():
        out[f"cumulative_{policy}_vs_sum"] = entry["fps"] / (alone[gpus[0]] + alone["CPU"])
        out[f"cumulative_{policy}_vs_gpu"] = entry["fps"] / alone[gpus[0]]
        out[f"cumulative_{policy}_vs_sum_best_of_both_ways"] = entry["fps"] / (
            alone[gpus[0]] * worker_gain + alone["CPU"])
        out[f"cumulative_{policy}_vs_gpu_best_of_both_ways"] = entry["fps"] / (alone[gpus[0]] * worker_gain)
    return out


def print_table(name: str, result: dict[str, Any], table: dict[str, float]) -> None:
    print(f"\n== {name} ==")
    print(f"{'configuration':<38}{'req/s':>10}  per device (requests, share, req/s)")
    rows = [(f"{d} alone", r) for d, r in result["alone"].items()]
    if result.get("alone_worker_process"):
        rows.append(("GPU alone, worker process", result["alone_worker_process"]))
    if result["multi"]:
        rows.append(("MULTI:GPU,GPU (default)", result["multi"]))
        rows.append(("MULTI:GPU,GPU, each in a process", result["multi_all_processes"]))
        rows.append(("MULTI:GPU,GPU, one process", result["multi_one_process"]))
    rows += [(f"CUMULATIVE GPU+CPU {p}", r) for p, r in result["cumulative"].items()]
    for label, r in rows:
        states = r.get("states", {})
        devices = "  ".join(f"{d}: {s['requests']}, {s['share']:.0%}, {s['fps']:.1f}"
                            + (f" ({states[d]})" if states.get(d, "serving") != "serving" else "")
                            for d, s in r.get("devices", {}).items())
        print(f"{label:<38}{r['fps']:>10.1f}  {devices}")
    for p, r in result["cumulative"].items():
        print(f"{'burst ' + p:<38}{r['burst']['fps']:>10.1f}  makespan {r['burst']['makespan_s']:.3f} s")
    for p, r in result["cumulative"].items():
        if r.get("host_gain_rates"):
            print("MULTI_CHECK_HOST_GAIN ({}): {:.1f} req/s with the CPU serving, {:.1f} without".format(
                p, *r["host_gain_rates"]))
    for label, value in table.items():
        target = ("" if "processes" in label or "one_process" in label or "both_ways" in label else
                  " (target >= 0.95)" if label.endswith("_sum") else " (target >= 1.0)")
        print(f"{label:<38}{value:>10.3f}{target}")
    if result.get("paired"):
        paired = result["paired"]
        for index, r in enumerate(paired["rounds"], 1):
            print(f"{'round ' + str(index) + ': GPU alone, CUMULATIVE':<38}{r['gpu_alone']:>10.1f}"
                  f"{r['cumulative']:>10.1f}  {r['ratio']:.3f}x")
        print(f"{'CUMULATIVE / GPU alone, in turns':<38}{paired['median_ratio']:>10.3f} (median; "
              f"{paired['min_ratio']:.3f}-{paired['max_ratio']:.3f}; target >= 1.0)")
    print_first_inferences(None, result)


def print_first_inferences(name: str | None, result: dict[str, Any]) -> None:
    if name is not None:
        print(f"\n== {name} ==")
    for mode, r in result["first_inference"].items():
        samples = ", ".join(f"{t:.2f}" for t in r["samples_s"])
        print(f"first inference {mode}: {r['first_inference_s']:.3f} s "
              f"on {r['first_device']} (EXECUTION_DEVICES then: {r['execution_devices_then']}; "
              f"samples {samples})")
        if r["first_device"] == "CPU" and r["first_on_chosen_latency_s"] is not None:
            latencies = ", ".join(f"{t * 1e3:.0f}" for t in r["first_on_chosen_latency_samples_s"] if t)
            print(f"  hand-over: {r['chosen_device']} served its first request "
                  f"{r['on_chosen_device_s']:.2f} s after compile_model began, "
                  f"in {r['first_on_chosen_latency_s'] * 1e3:.0f} ms (samples {latencies} ms), "
                  f"after {r['requests_before_chosen']} more on the CPU")


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="tiny model, emulated GPUs if no CUDA")
    parser.add_argument("--models", default="resnet50,bert", help="resnet50,bert (ignored with --quick)")
    parser.add_argument("--seconds", type=float, default=None, help="per measurement (default 6; 1.5 quick)")
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--burst", type=int, default=None, help="requests per burst (default 400; 200 quick)")
    parser.add_argument("--gpu-precision", default=None, help="GPU INFERENCE_PRECISION_HINT (default f16)")
    parser.add_argument("--rounds", type=int, default=None,
                        help="GPU alone vs CUMULATIVE measured in turns (default 3; 1 quick; 0: none)")
    parser.add_argument("--samples", type=int, default=None,
                        help="new processes per first-inference mode (default 1; 3 first-inference only)")
    parser.add_argument("--cpu-engine", default=None,
                        help="the CPU's ENGINE (OPENVINO, ONNXRUNTIME; default: the CPU device's own)")
    parser.add_argument("--skip-first-inference", action="store_true",
                        help="leave out the first-inference rows")
    parser.add_argument("--first-inference-only", action="store_true",
                        help="only section 5, also without the GPU's warm-up at compile")
    parser.add_argument("--first-inference", default=None, help=argparse.SUPPRESS)  # one, in this process
    args = parser.parse_args()
    if args.first_inference:
        _first_inference_here(json.loads(args.first_inference))
        return
    args.seconds = args.seconds or (1.5 if args.quick else 6.0)
    args.burst = args.burst or (200 if args.quick else 400)
    if args.rounds is None:
        args.rounds = 1 if args.quick else 3
    if args.samples is None:
        args.samples = 3 if args.first_inference_only else 1
    if args.quick and "INFERPLEX_EMULATED_GPUS" not in os.environ:
        try:
            import torch

            cuda = torch.cuda.device_count()
        except Exception:  # noqa: BLE001
            cuda = 0
        if cuda == 0:
            os.environ["INFERPLEX_EMULATED_GPUS"] = "2"
    if args.gpu_precision is None:
        args.gpu_precision = "" if args.quick else "f16"

    import inferplex as ov

    core = ov.Core()
    gpus = [d for d in core.available_devices if d.startswith("GPU")][:2]
    log(f"devices: {core.available_devices}")
    results: dict[str, Any] = {"devices": core.available_devices, "args": vars(args), "models": {}}
    with tempfile.TemporaryDirectory() as folder:
        if args.quick:
            models = {"tiny_mlp": tiny_model(args.batch)}
        else:
            builders = {"resnet50": resnet50, "bert": bert_base}
            models = {m: builders[m](args.batch, Path(folder)) for m in args.models.split(",")}
        for name, (model, inputs) in models.items():
            if args.first_inference_only:
                per_device = {"DEVICE_PROPERTIES": {"GPU": {"INFERENCE_PRECISION_HINT": args.gpu_precision}}
                              } if args.gpu_precision else {}
                result = {"first_inference": first_inferences(model, inputs, per_device, args)}
                print_first_inferences(name, result)
            else:
                result = bench_model(core, name, model, inputs, gpus, args)
                result["ratios"] = ratios(result, gpus)
                print_table(name, result, result["ratios"])
            results["models"][name] = result
    if os.environ.get("OUT"):
        path = Path(os.environ["OUT"]) / "multi_auto.json"
        path.write_text(json.dumps(results, indent=2, default=str))
        log(f"wrote {path}")


if __name__ == "__main__":
    main()
