"""inferplex's CPU device against raw OpenVINO and raw ONNX Runtime, side by side in one process.

Batch 1, PERFORMANCE_HINT=LATENCY, the onnx wheel's ``light_*`` models (their
weights are graph inputs; inferplex's reader turns them into constants, and
every runner gets that constant-ized model).  Runners, each a sync call on one
request:

- raw OpenVINO at its default precision (bf16 on CPUs with AMX or AVX512_BF16)
  and at f32: ``InferRequest.infer(feeds, share_inputs=True)``;
- raw ONNX Runtime with OpenVINO's thread count;
- inferplex's CPU device (OpenVINO engine) at its default precision and at
  f32: ``InferRequest.infer(feeds)`` through the public API.

Runners take turns in a shuffled order each round so that drift in machine load hits them
alike; medians are of per-round medians, and the ratios (raw OpenVINO's time
over inferplex's at the same precision: 1.0 means no overhead, target >= 0.97)
are paired round by round.

``--throughput`` measures requests per second under the THROUGHPUT hint instead:
raw OpenVINO's ``AsyncInferQueue`` and inferplex's, each with the compiled
model's OPTIMAL_NUMBER_OF_INFER_REQUESTS jobs kept full (a callback per job;
inferplex keeps two requests per stream where OpenVINO keeps one), raw OpenVINO
again with as many jobs as inferplex (``same requests``: the framework's own
overhead at equal load), and raw ONNX Runtime as OpenVINO's streams would run it (one session and one
Python thread per stream, the stream's share of the threads each).

Besides the ``light_*`` models, ``resnet50`` (torchvision, random weights) and
``bert`` (BERT-base from transformers' default config, sequence 128) are
exported with torch where torch and transformers are installed.

    python bench/cpu_engines.py [--seconds 0.5] [--rounds 5] [--models light_resnet50,resnet50,bert]
                                [--throughput]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import random
import statistics
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import onnxruntime as ort
import openvino
from rich.console import Console
from rich.table import Table

import inferplex as ov

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from inferplex.cli.inputs import random_inputs, sample_model_path

MODELS = ("light_bvlc_alexnet", "light_densenet121", "light_inception_v1", "light_inception_v2",
          "light_resnet50", "light_shufflenet", "light_squeezenet", "light_vgg19", "light_zfnet512")
Runner = Callable[[], Any]


_EXPORTED: dict[str, Path] = {}


def model_path(name: str) -> Path:
    """A ``light_*`` model of the onnx wheel, or ``resnet50`` / ``bert`` exported with torch once."""
    if name.startswith("light_"):
        return sample_model_path(name)
    if name not in _EXPORTED:
        import tempfile

        from multi_auto import bert_base, resnet50

        folder = Path(tempfile.mkdtemp(prefix="cpu_engines_"))
        exporters = {"resnet50": resnet50, "bert": bert_base}
        if name not in exporters:
            raise SystemExit(f"unknown model {name!r}: light_* of the onnx wheel, resnet50 or bert")
        _EXPORTED[name] = Path(exporters[name](1, folder)[0])
    return _EXPORTED[name]


def _setup(name: str) -> tuple[Any, Any, dict[str, Any], bytes, Any, dict[int, Any]]:
    """Both Cores, the model, its random inputs (by name and by index) and its ONNX bytes."""
    core = ov.Core()
    model = core.read_model(model_path(name))
    feeds = random_inputs(model.inputs)
    by_index = {index: feeds[port.any_name] for index, port in enumerate(model.inputs)}
    return core, model, feeds, model.to_onnx().SerializeToString(), openvino.Core(), by_index


def runners(name: str) -> tuple[dict[str, Runner], dict[str, str]]:
    """The five sync runners of one model, and the precision each inferplex / OpenVINO runner uses."""
    core, model, feeds, data, raw_core, by_index = _setup(name)
    raw: dict[str, Any] = {}
    for label, config in (("default", {}), ("f32", {"INFERENCE_PRECISION_HINT": "f32"})):
        compiled = raw_core.compile_model(raw_core.read_model(data, b""), "CPU",
                                          {"PERFORMANCE_HINT": "LATENCY", **config})
        raw[label] = compiled
    threads = int(raw["default"].get_property("INFERENCE_NUM_THREADS"))
    options = ort.SessionOptions()
    options.intra_op_num_threads, options.inter_op_num_threads = threads, 1
    options.log_severity_level = 3
    session = ort.InferenceSession(data, options, providers=["CPUExecutionProvider"])
    ours = {label: core.compile_model(model, "CPU", {"PERFORMANCE_HINT": "LATENCY", **config})
            for label, config in (("default", {}), ("f32", {"INFERENCE_PRECISION_HINT": "f32"}))}
    raw_requests = {label: compiled.create_infer_request() for label, compiled in raw.items()}
    our_requests = {label: compiled.create_infer_request() for label, compiled in ours.items()}
    table: dict[str, Runner] = {
        "raw OpenVINO default": lambda: raw_requests["default"].infer(by_index, share_inputs=True),
        "raw OpenVINO f32": lambda: raw_requests["f32"].infer(by_index, share_inputs=True),
        "raw ORT": lambda: session.run(None, feeds),
        "inferplex default": lambda: our_requests["default"].infer(feeds, share_inputs=True),
        "inferplex f32": lambda: our_requests["f32"].infer(feeds, share_inputs=True),
    }
    raw_precision = raw["default"].get_property("INFERENCE_PRECISION_HINT").get_type_name()
    precisions = {"raw OpenVINO default": raw_precision,
                  "inferplex default": str(ours["default"].get_property("INFERENCE_PRECISION_HINT")),
                  "engine": str(ours["default"].get_property("ENGINE"))}
    return table, precisions


def _time_calls(run: Runner, seconds: float) -> list[float]:
    """Latencies (ms) of back-to-back calls for about ``seconds`` (at least 3 calls)."""
    samples: list[float] = []
    stop = time.perf_counter() + seconds
    while len(samples) < 3 or time.perf_counter() < stop:
        start = time.perf_counter()
        run()
        samples.append((time.perf_counter() - start) * 1e3)
    return samples


def _orders(labels: list[str], rounds: int) -> list[list[str]]:
    """The runners' order in each round: shuffled (a fixed seed), so that no runner always follows
    the same one (ONNX Runtime's threads spin on for a while after its runs, for one)."""
    generator = random.Random(7)
    return [generator.sample(labels, len(labels)) for _ in range(rounds)]


def measure(name: str, seconds: float, rounds: int) -> dict[str, Any]:
    table, precisions = runners(name)
    for run in table.values():  # warm-up: first runs allocate and tune
        _time_calls(run, 0.0)
    per_round: dict[str, list[float]] = {label: [] for label in table}
    for order in _orders(list(table), rounds):
        for label in order:
            per_round[label].append(statistics.median(_time_calls(table[label], seconds)))
    medians = {label: statistics.median(values) for label, values in per_round.items()}

    def paired(raw: str, ours: str) -> float:  # raw time / our time, round by round
        return statistics.median(a / b for a, b in zip(per_round[raw], per_round[ours], strict=True))

    return {"model": name, "median_ms": medians, "precision": precisions,
            "ratio_default": paired("raw OpenVINO default", "inferplex default"),
            "ratio_f32": paired("raw OpenVINO f32", "inferplex f32"),
            "ort_over_inferplex_default": paired("raw ORT", "inferplex default")}


def _keep_full(queue: Any, start: Callable[[], None], seconds: float) -> float:
    """Requests per second with every job of ``queue`` kept busy for ``seconds``."""
    ended = [0]
    lock = threading.Lock()

    def done(*_: Any) -> None:
        with lock:
            ended[0] += 1

    queue.set_callback(done)
    begin = time.perf_counter()
    while time.perf_counter() - begin < seconds:
        start()
    queue.wait_all()
    return ended[0] / (time.perf_counter() - begin)


def _ort_streams(data: bytes, feeds: dict[str, Any], streams: int, threads: int) -> Callable[[float], float]:
    """Raw ONNX Runtime as OpenVINO's streams: ``streams`` sessions, each run by its own thread."""
    sessions = []
    for _ in range(streams):
        options = ort.SessionOptions()
        options.intra_op_num_threads, options.inter_op_num_threads = max(1, threads // streams), 1
        options.log_severity_level = 3
        sessions.append(ort.InferenceSession(data, options, providers=["CPUExecutionProvider"]))

    def rate(seconds: float) -> float:
        counts = [0] * streams
        stop = time.perf_counter() + seconds

        def loop(index: int) -> None:
            while time.perf_counter() < stop:
                sessions[index].run(None, feeds)
                counts[index] += 1

        workers = [threading.Thread(target=loop, args=(i,)) for i in range(streams)]
        begin = time.perf_counter()
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
        return sum(counts) / (time.perf_counter() - begin)

    return rate


def throughput_runners(name: str) -> tuple[dict[str, Callable[[float], float]], dict[str, str]]:
    """Closed-loop runners under the THROUGHPUT hint: label -> run(seconds) -> requests/s."""
    core, model, feeds, data, raw_core, by_index = _setup(name)
    table: dict[str, Callable[[float], float]] = {}
    precisions: dict[str, str] = {}
    raw_default: Any = None
    for label, config in (("default", {}), ("f32", {"INFERENCE_PRECISION_HINT": "f32"})):
        hinted = {"PERFORMANCE_HINT": "THROUGHPUT", **config}
        raw = raw_core.compile_model(raw_core.read_model(data, b""), "CPU", hinted)
        raw_default = raw_default or raw
        raw_queue = openvino.AsyncInferQueue(raw, int(raw.get_property("OPTIMAL_NUMBER_OF_INFER_REQUESTS")))
        table[f"raw OpenVINO {label}"] = lambda seconds, q=raw_queue: _keep_full(
            q, lambda: q.start_async(by_index, share_inputs=True), seconds)
        ours = core.compile_model(model, "CPU", hinted)
        our_requests = int(ours.get_property("OPTIMAL_NUMBER_OF_INFER_REQUESTS"))
        our_queue = ov.AsyncInferQueue(ours, our_requests)
        raw_same = openvino.AsyncInferQueue(raw, our_requests)
        table[f"raw OpenVINO {label}, same requests"] = lambda seconds, q=raw_same: _keep_full(
            q, lambda: q.start_async(by_index, share_inputs=True), seconds)
        table[f"inferplex {label}"] = lambda seconds, q=our_queue: _keep_full(
            q, lambda: q.start_async(feeds, share_inputs=True), seconds)
        if label == "default":
            raw_precision = raw.get_property("INFERENCE_PRECISION_HINT").get_type_name()
            precisions = {"raw OpenVINO default": raw_precision,
                          "inferplex default": str(ours.get_property("INFERENCE_PRECISION_HINT")),
                          "engine": str(ours.get_property("ENGINE")),
                          "streams": str(ours.get_property("NUM_STREAMS"))}
    streams = int(raw_default.get_property("NUM_STREAMS"))
    threads = int(raw_default.get_property("INFERENCE_NUM_THREADS"))
    table["raw ORT"] = _ort_streams(data, feeds, streams, threads)
    return table, precisions


def measure_throughput(name: str, seconds: float, rounds: int) -> dict[str, Any]:
    """Like :func:`measure`, in requests per second (ratios: inferplex's rate over raw OpenVINO's)."""
    table, precisions = throughput_runners(name)
    for run in table.values():
        run(min(seconds, 0.5))
    per_round: dict[str, list[float]] = {label: [] for label in table}
    for order in _orders(list(table), rounds):
        for label in order:
            per_round[label].append(table[label](seconds))
    rates = {label: statistics.median(values) for label, values in per_round.items()}

    def paired(raw: str, ours: str) -> float:
        return statistics.median(b / a for a, b in zip(per_round[raw], per_round[ours], strict=True))

    return {"model": name, "median_per_s": rates, "precision": precisions,
            "ratio_default": paired("raw OpenVINO default", "inferplex default"),
            "ratio_f32": paired("raw OpenVINO f32", "inferplex f32"),
            "ratio_default_same_requests": paired("raw OpenVINO default, same requests", "inferplex default"),
            "ratio_f32_same_requests": paired("raw OpenVINO f32, same requests", "inferplex f32"),
            "ort_over_inferplex_default": paired("inferplex default", "raw ORT")}


def _cpu_model() -> str:
    from inferplex.devices.cpu import cpu_info

    return cpu_info.cpu_name()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=0.5, help="seconds per runner per round")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--throughput", action="store_true",
                        help="requests/s under the THROUGHPUT hint (AsyncInferQueue) instead of sync latency")
    args = parser.parse_args()
    if args.throughput:
        names = args.models.split(",")
        _print_throughput([measure_throughput(name, args.seconds, args.rounds) for name in names])
        return
    rows = [measure(name, args.seconds, args.rounds) for name in args.models.split(",")]
    title = (f"{datetime.date.today()} {_cpu_model()}, {os.cpu_count()} cores, openvino "
             f"{openvino.__version__.split('-')[0]}, onnxruntime {ort.__version__}")
    table = Table(title=title, title_justify="left")
    for column in ("model", "precision", "raw OV default", "raw OV f32", "raw ORT", "inferplex default",
                   "inferplex f32", "raw OV / inferplex default", "raw OV / inferplex f32"):
        table.add_column(column, justify="right")
    for row in rows:
        m = row["median_ms"]
        table.add_row(row["model"], str(row["precision"]["inferplex default"]),
                      *(f"{m[k]:.2f}" for k in ("raw OpenVINO default", "raw OpenVINO f32", "raw ORT",
                                                 "inferplex default", "inferplex f32")),
                      f"{row['ratio_default']:.3f}", f"{row['ratio_f32']:.3f}")
    Console(width=200).print(table)
    out = os.environ.get("OUT")
    if out:
        Path(out, "cpu_engines.json").write_text(json.dumps({"title": title, "rows": rows}, indent=1))


def _print_throughput(rows: list[dict[str, Any]]) -> None:
    title = (f"{datetime.date.today()} {_cpu_model()}, {os.cpu_count()} cores, THROUGHPUT hint, requests/s, "
             f"openvino {openvino.__version__.split('-')[0]}, onnxruntime {ort.__version__}")
    table = Table(title=title, title_justify="left")
    for column in ("model", "precision", "streams", "raw OV default", "raw OV f32", "raw ORT",
                   "inferplex default", "inferplex f32", "inferplex / raw OV default",
                   "inferplex / raw OV f32", "same requests: default", "same requests: f32"):
        table.add_column(column, justify="right")
    for row in rows:
        r = row["median_per_s"]
        table.add_row(row["model"], str(row["precision"]["inferplex default"]), row["precision"]["streams"],
                      *(f"{r[k]:.1f}" for k in ("raw OpenVINO default", "raw OpenVINO f32", "raw ORT",
                                                 "inferplex default", "inferplex f32")),
                      f"{row['ratio_default']:.3f}", f"{row['ratio_f32']:.3f}",
                      f"{row['ratio_default_same_requests']:.3f}", f"{row['ratio_f32_same_requests']:.3f}")
    Console(width=240).print(table)
    out = os.environ.get("OUT")
    if out:
        report = json.dumps({"title": title, "rows": rows}, indent=1)
        Path(out, "cpu_engines_throughput.json").write_text(report)


if __name__ == "__main__":
    main()
