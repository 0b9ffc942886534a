"""``inferplex benchmark``: OpenVINO benchmark_app's measurement loop on inferplex.

Flags follow benchmark_app (``-m -d -niter -t -nireq -nstreams -nthreads -hint -b
-shape -data_shape -i -ip -op -iop -pin -cache_dir -load_config -dump_config
-infer_precision -latency_percentile -pc -api -report_folder -json_stats
-inference_only``; :mod:`inferplex.cli.benchmark_options` holds those that shape the
model, the properties and the data).  Defaults, as in benchmark_app: device
CPU, async API, THROUGHPUT hint for async and LATENCY for sync.  Without
``-niter`` or ``-t`` it runs for 10 seconds (benchmark_app: 60).  Without ``-m``
it runs the onnx wheel's ``light_resnet50`` sample model.  Inputs are random
(see :mod:`inferplex.cli.inputs`); the first inference is timed on its own and
not counted.
"""

from __future__ import annotations

import argparse
import json
import time
from collections import Counter
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from inferplex._async_queue import AsyncInferQueue
from inferplex._compiled_model import CompiledModel
from inferplex._core import Core
from inferplex._infer_request import InferRequest
from inferplex.cli.benchmark_options import (
    apply_precisions,
    data_shapes,
    dump_config,
    load_config,
    read_inputs,
)
from inferplex.cli.inputs import (
    apply_shapes,
    batch_size,
    check_static,
    parse_shapes,
    random_inputs,
    sample_model_path,
)
from inferplex.cli.output import describe_ports, print_compiled, print_hetero_plan, read_optional
from inferplex.cli.report import BenchmarkResult, print_counters, print_devices, print_result, write_json
from inferplex.config.devices import parse_device_string
from inferplex.errors import InputError, PropertyError

__all__ = ["add_arguments", "run_benchmark"]

DEFAULT_SECONDS = 10.0
_SHOWN_PROPERTIES = ("OPTIMAL_NUMBER_OF_INFER_REQUESTS", "EXECUTION_DEVICES", "PERFORMANCE_HINT",
                     "NUM_STREAMS", "INFERENCE_NUM_THREADS", "INFERENCE_PRECISION_HINT",
                     "ENABLE_PROFILING")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """benchmark_app's flags (single-dash long names, with its double-dash aliases)."""
    add = parser.add_argument
    add("-m", "--path_to_model", dest="model", help="ONNX model (default: the onnx wheel's "
        "light_resnet50 sample model)")
    add("-d", "--target_device", dest="device", default="CPU",
        help="device string: CPU, GPU.1, HETERO:GPU,CPU, MULTI:GPU.0,GPU.1, AUTO, ... (default: CPU)")
    add("-hint", "--perf_hint", dest="hint", type=str.lower,
        choices=("latency", "throughput", "cumulative_throughput", "none"),
        help="PERFORMANCE_HINT (default: throughput for -api async, latency for sync; "
        "none sets no hint)")
    add("-api", "--api_type", dest="api", choices=("sync", "async"), default="async",
        help="sync: one InferRequest; async: an AsyncInferQueue of -nireq requests (default)")
    add("-niter", "--number_iterations", dest="niter", type=int, help="inferences to run")
    add("-t", "--time", dest="time", type=float,
        help=f"seconds to run (default {DEFAULT_SECONDS:g} when -niter is not given; with both, "
        "runs until both are reached)")
    add("-nireq", "--number_infer_requests", dest="nireq", type=int,
        help="requests in flight for -api async (default: OPTIMAL_NUMBER_OF_INFER_REQUESTS)")
    add("-nstreams", "--number_streams", dest="nstreams",
        help="NUM_STREAMS: a number or AUTO, or per device for HETERO/MULTI/AUTO: 'CPU:2,GPU.0:4'")
    add("-nthreads", "--number_threads", dest="nthreads", type=int, help="INFERENCE_NUM_THREADS")
    add("-infer_precision", dest="precision", help="INFERENCE_PRECISION_HINT: f32, f16 or bf16")
    add("-b", "--batch_size", dest="batch", type=int, help="set dimension 0 of every input")
    add("-shape", dest="shape", help="input shapes: 'name[1,3,224,224]', 'a[1,128],b[1,128]' "
        "or '[1,3,224,224]'")
    add("-data_shape", dest="data_shape", help="shapes of the data fed to dynamic inputs, which "
        "stay dynamic: 'name[1,128]' or '[1,3,224,224]'")
    add("-i", "--paths_to_input", dest="input_files", help="inputs from numpy .npy files: 'x.npy' "
        "(one input) or 'ids:ids.npy,mask:mask.npy' (default: random data)")
    add("-ip", dest="input_precision", help="element type of every input the program feeds, e.g. u8 "
        "(converted inside the model)")
    add("-op", dest="output_precision", help="element type of every output the program reads, e.g. f16")
    add("-iop", dest="io_precision", help="element types per input or output: 'x:u8,y:f16'")
    add("-pin", dest="pin", type=str.upper, choices=("YES", "NO", "TRUE", "FALSE"),
        help="ENABLE_CPU_PINNING")
    add("-cache_dir", dest="cache_dir", help="CACHE_DIR: the model cache folder")
    add("-load_config", dest="load_config", metavar="FILE",
        help='properties per device from a JSON file: {"CPU": {"NUM_STREAMS": "2"}} '
        "(the flags win over it)")
    add("-dump_config", dest="dump_config", metavar="FILE",
        help="write the properties the model was compiled with to FILE as JSON, in -load_config's form")
    add("-latency_percentile", dest="latency_percentile", type=int, default=50,
        help="the latency percentile reported first, 1-100 (default 50: the median)")
    add("-inference_only", dest="inference_only", action="store_true",
        help="accepted for benchmark_app compatibility: inputs are always set once, before measuring")
    add("-pc", "--perf_counts", dest="perf_counts", action="store_true",
        help="print per-op performance counters (sets ENABLE_PROFILING)")
    add("-p", "--property", dest="properties", action="append", default=[], metavar="KEY=VALUE",
        help="any compile property, repeatable: -p MEMORY_LIMIT=8GiB -p SCHEDULE_POLICY=ROUND_ROBIN")
    add("-report_folder", "--report_folder", dest="report_folder",
        help="write benchmark_report.json into this folder")
    add("-json_stats", "--json_stats", dest="json_stats", action="store_true",
        help="accepted for benchmark_app compatibility: reports are always JSON")
    add("--report", dest="report", metavar="FILE", help="write the JSON report to FILE")
    add("--trace", dest="trace", metavar="FILE",
        help="record each request's stages (ENABLE_TRACE) and write them to FILE as a Chrome / "
        "Perfetto trace (open it in chrome://tracing or ui.perfetto.dev)")
    add("--no-progress", dest="no_progress", action="store_true",
        help="no progress bar (it is off anyway when stderr is not a terminal)")
    add("--seed", dest="seed", type=int, default=0, help="seed of the random inputs (default 0)")


def build_config(args: argparse.Namespace, virtual: bool,
                 members: list[str] | None = None) -> dict[str, Any]:
    """The compile config the flags ask for (over ``-load_config``'s, where given)."""
    config: dict[str, Any] = {}
    if getattr(args, "load_config", None):
        config.update(load_config(args.load_config, args.device, members or []))
    if getattr(args, "cache_dir", None):
        config["CACHE_DIR"] = args.cache_dir
    if getattr(args, "pin", None):
        config["ENABLE_CPU_PINNING"] = args.pin in ("YES", "TRUE")
    hint = args.hint or ("throughput" if args.api == "async" else "latency")
    if hint != "none":
        config["PERFORMANCE_HINT"] = hint.upper()
    if args.nstreams:
        config.update(_streams_config(args.nstreams, virtual))
    if args.nthreads is not None:
        config["INFERENCE_NUM_THREADS"] = args.nthreads
    if args.precision:
        config["INFERENCE_PRECISION_HINT"] = args.precision
    if args.perf_counts:
        config["ENABLE_PROFILING"] = True
    if args.trace:
        config["ENABLE_TRACE"] = True
    for item in args.properties:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise PropertyError(f"-p {item!r}: write KEY=VALUE, e.g. -p NUM_STREAMS=2")
        config[key.strip().upper()] = value.strip()
    return config


def _streams_config(text: str, virtual: bool) -> dict[str, Any]:
    if ":" not in text:
        return {"NUM_STREAMS": text}
    if not virtual:
        raise PropertyError(f"-nstreams {text!r}: per-device streams ('CPU:2,GPU.0:4') are for "
                            "HETERO/MULTI/AUTO; give one number for a single device")
    per_device: dict[str, dict[str, Any]] = {}
    for item in text.split(","):
        device, _, streams = item.partition(":")
        if not device or not streams:
            raise PropertyError(f"-nstreams {text!r}: write 'DEVICE:N' items, e.g. 'CPU:2,GPU.0:4'")
        per_device[device] = {"NUM_STREAMS": streams}
    return {"DEVICE_PROPERTIES": per_device}


# --- measuring ----------------------------------------------------------------------------


class _Limits:
    """When to stop: -niter and/or -t (both given: both must be reached)."""

    def __init__(self, niter: int | None, seconds: float | None) -> None:
        if niter is not None and niter < 1:
            raise InputError(f"-niter must be at least 1, got {niter}")
        if seconds is not None and seconds <= 0:
            raise InputError(f"-t must be a positive number of seconds, got {seconds:g}")
        self.niter = niter
        self.seconds = seconds if seconds is not None or niter is not None else DEFAULT_SECONDS

    def done(self, count: int, elapsed: float) -> bool:
        by_count = self.niter is None or count >= self.niter
        by_time = self.seconds is None or elapsed >= self.seconds
        return by_count and by_time

    def describe(self) -> str:
        parts = ([f"{self.niter} iterations"] if self.niter else []) + (
            [f"{self.seconds:g} s"] if self.seconds else [])
        return " and ".join(parts)


class _Ticker:
    """A progress bar on stderr, updated at most 20 times a second."""

    def __init__(self, console: Console | None, limits: _Limits) -> None:
        self._progress: Progress | None = None
        self._limits = limits
        self._last = 0.0
        if console is not None:
            self._progress = Progress(TextColumn("[progress.description]{task.description}"),
                                      BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                                      console=console, transient=True)
            total = limits.niter if limits.niter and not limits.seconds else limits.seconds
            self._task = self._progress.add_task("benchmarking", total=total)

    def __enter__(self) -> _Ticker:
        if self._progress is not None:
            self._progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._progress is not None:
            self._progress.stop()

    def update(self, count: int, elapsed: float) -> None:
        if self._progress is None or elapsed - self._last < 0.05:
            return
        self._last = elapsed
        by_count = self._limits.niter and not self._limits.seconds
        self._progress.update(self._task, completed=count if by_count else round(elapsed, 1))


def _since(start: float) -> float:
    """Milliseconds since ``start`` (a perf_counter reading)."""
    return (time.perf_counter() - start) * 1e3


def _measure_sync(request: InferRequest, feeds: dict[str, Any], limits: _Limits,
                  ticker: _Ticker, result: BenchmarkResult) -> None:
    devices: Counter[str] = Counter()
    latencies = result.latencies_ms
    start = time.perf_counter()
    elapsed = 0.0
    while not limits.done(len(latencies), elapsed):
        request.infer(feeds, share_inputs=True)  # as benchmark_app: the feeds are not copied per run
        latencies.append(request.latency)
        devices[request.device] += 1
        elapsed = time.perf_counter() - start
        ticker.update(len(latencies), elapsed)
    result.duration_ms = (time.perf_counter() - start) * 1e3
    result.device_counts = dict(devices)


def _measure_async(queue: AsyncInferQueue, feeds: dict[str, Any], limits: _Limits,
                   ticker: _Ticker, result: BenchmarkResult) -> None:
    finished: list[tuple[float, str]] = []
    failures: list[BaseException] = []

    def on_done(request: InferRequest, _: Any) -> None:
        try:
            request.wait()  # the request has ended: this only raises its error, if any
        except BaseException as error:  # noqa: BLE001 - re-raised in the main thread
            failures.append(error)
            return
        finished.append((request.latency, request.device))

    queue.set_callback(on_done)
    started = 0
    start = time.perf_counter()
    elapsed = 0.0
    while not failures and not limits.done(started, elapsed):
        queue.start_async(feeds, share_inputs=True)  # as benchmark_app: the feeds are not copied per run
        started += 1
        elapsed = time.perf_counter() - start
        ticker.update(len(finished), elapsed)
    queue.wait_all()
    result.duration_ms = (time.perf_counter() - start) * 1e3
    if failures:
        raise failures[0]
    result.latencies_ms = [latency for latency, _ in finished]
    result.device_counts = dict(Counter(device for _, device in finished))


# --- the command --------------------------------------------------------------------------


def run_benchmark(args: argparse.Namespace, out: Console, err: Console) -> int:
    """Read, compile, measure and report; errors propagate to the caller as InferplexError."""
    limits = _Limits(args.niter, args.time)
    if args.nireq is not None and args.nireq < 1:
        raise InputError(f"-nireq must be at least 1, got {args.nireq}")
    if not 1 <= args.latency_percentile <= 100:
        raise InputError("-latency_percentile must be between 1 and 100, "
                         f"got {args.latency_percentile}")
    spec = parse_device_string(args.device)
    members = list(spec.names) if spec.virtual else []
    config = build_config(args, virtual=spec.virtual is not None, members=members)
    core = Core()
    versions = core.get_versions(args.device)  # also refuses unknown devices before any work
    path, sample = (Path(args.model), False) if args.model else (sample_model_path(), True)
    if sample:
        out.print(f"No -m given: running the onnx wheel's sample model {path.stem} "
                  "(pass -m MODEL.onnx to benchmark yours)")
    out.print("Devices: " + "; ".join(f"{name} ({version.description} {version.build_number})"
                                      for name, version in versions.items()))
    result = BenchmarkResult(model=str(path), device=args.device, api=args.api, requests=1, batch=1,
                             sample_model=sample, config=config)
    start = time.perf_counter()
    model = core.read_model(path)
    result.read_ms = _since(start)
    apply_shapes(model, parse_shapes(args.shape) if args.shape else None, args.batch)
    model = apply_precisions(model, args.input_precision, args.output_precision, args.io_precision)
    shapes = data_shapes(args.data_shape, model.inputs) if args.data_shape else {}
    check_static(model, given=set(shapes) | set(_file_names(args.input_files, model)))
    result.batch = batch_size(model, args.batch, shapes)
    result.percentile = args.latency_percentile
    result.inputs = describe_ports(model.inputs)
    out.print(f"Read model took {result.read_ms:.2f} ms")
    start = time.perf_counter()
    compiled = core.compile_model(model, args.device, config)
    result.compile_ms = _since(start)
    try:
        return _run_compiled(compiled, args, limits, result, out, err, spec.virtual)
    finally:
        compiled.release()


def _run_compiled(compiled: CompiledModel, args: argparse.Namespace, limits: _Limits,
                  result: BenchmarkResult, out: Console, err: Console, virtual: str | None) -> int:
    out.print(f"Compile model took {result.compile_ms:.2f} ms")
    result.compiled_properties = print_compiled(out, compiled, _SHOWN_PROPERTIES)
    if virtual == "HETERO":
        result.hetero_subgraphs = print_hetero_plan(out, compiled)
    feeds = random_inputs(compiled.inputs, args.seed, data_shapes(args.data_shape, compiled.inputs)
                          if args.data_shape else None)
    if args.input_files:
        feeds.update(read_inputs(args.input_files, compiled.inputs))
    result.inputs.update({name: {**result.inputs.get(name, {}), "shape": list(value.shape)}
                          for name, value in feeds.items()})
    if args.api == "sync":
        runner: InferRequest = compiled.create_infer_request()
        queue = None
    else:
        nireq = args.nireq or max(1, int(compiled.get_property("OPTIMAL_NUMBER_OF_INFER_REQUESTS")))
        queue = AsyncInferQueue(compiled, nireq)
        runner, result.requests = queue[0], nireq
    out.print(f"Measuring: {args.api} API, {result.requests} request(s), limits: {limits.describe()}, "
              f"inputs: {_inputs_line(result)}")
    start = time.perf_counter()
    runner.infer(feeds)
    result.first_inference_ms = _since(start)
    result.first_inference_device = runner.device  # AUTO: the startup helper, while the GPU compiles
    out.print(f"First inference took {result.first_inference_ms:.2f} ms on {result.first_inference_device}")
    show = err if (err.is_terminal and not args.no_progress) else None
    with _Ticker(show, limits) as ticker:
        if queue is None:
            _measure_sync(runner, feeds, limits, ticker, result)
        else:
            _measure_async(queue, feeds, limits, ticker, result)
    if virtual in ("MULTI", "AUTO"):
        result.device_statistics = read_optional(compiled, "DEVICE_STATISTICS")
    if args.perf_counts:
        requests = [runner] if queue is None else list(queue)
        result.counters = next((records for records in (r.get_profiling_info() for r in requests)
                                if records), [])
    _report(result, args, out, virtual)
    if args.dump_config:
        out.print(f"Config written to {dump_config(args.dump_config, args.device, result.config)}")
    if args.trace:
        Path(args.trace).write_text(json.dumps(compiled.get_property("TRACE")))
        out.print(f"Trace written to {args.trace}")
    return 0


def _file_names(text: str | None, model: Any) -> list[str]:
    """The inputs ``-i`` feeds (their shapes come from the files)."""
    return list(read_inputs(text, model.inputs)) if text else []


def _inputs_line(result: BenchmarkResult) -> str:
    return ", ".join(f"{name} {info['element_type']} {info['shape']}"
                     for name, info in result.inputs.items())


def _report(result: BenchmarkResult, args: argparse.Namespace, out: Console, virtual: str | None) -> None:
    print_result(out, result)
    if virtual in ("MULTI", "AUTO") or len(result.device_counts) > 1:
        print_devices(out, result)
    if args.perf_counts:
        print_counters(out, result.counters)
    for target in ([args.report] if args.report else []) + (
            [Path(args.report_folder) / "benchmark_report.json"] if args.report_folder else []):
        out.print(f"Report written to {write_json(result, target)}")
