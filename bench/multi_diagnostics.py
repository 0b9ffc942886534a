"""Where MULTI and CUMULATIVE throughput goes: ResNet-50 or BERT-base (f16, batch 4), row by row.

Rows, closed loop through AsyncInferQueue for ``--seconds`` each, with the
calling process's CPU time per request (it drives every worker process):
  GPU.0 alone in this process (1x and 2x its optimal requests in flight);
  MULTI:GPU.0 alone through a worker process (1x and 2x), which shows what the
  worker-process path costs one GPU;
  MULTI:GPU.0,GPU.1 with MULTI_WORKER_PROCESSES AUTO (GPU.1 in a process), YES, NO;
  CUMULATIVE GPU.0+CPU with the defaults, then without MULTI_CHECK_HOST_GAIN (the
  CPU always serving): CPU threads at THREAD_PRIORITY LOW (the default beside
  accelerators) or NORMAL, the GPU in this process or in a worker process.

    python bench/multi_diagnostics.py              # two CUDA GPUs (about 4 minutes)
    python bench/multi_diagnostics.py --model bert # BERT-base instead of ResNet-50
    python bench/multi_diagnostics.py --quick      # tiny model, emulated GPUs
    python bench/multi_diagnostics.py --streams    # one GPU: NUM_STREAMS 4, 8 and 16, both ways
    python bench/multi_diagnostics.py --throttle   # one GPU: GPU_QUEUE_THROTTLE MEDIUM vs LOW
    python bench/multi_diagnostics.py --long 120   # one GPU: long runs, MULTI_CHECK_HOST_GAIN's re-checks
    python bench/multi_diagnostics.py --ceiling    # one GPU: what the calling process can feed
    python bench/multi_diagnostics.py --queue-behind --model bert  # one GPU: runs queued behind or not

``--streams`` measures only GPU.0, with the THROUGHPUT hint's worker count and
with NUM_STREAMS 4, 8 and 16, in this process and from a worker process, and
prints each row's ratio to the hint's default in this process.

``--throttle`` compares a GPU worker's wait for its stream spinning on a host
core (GPU_QUEUE_THROTTLE MEDIUM, the default) with sleeping on a blocking CUDA
event (LOW), which leaves the core to a CPU serving beside the GPU: GPU.0
alone in this process and through a worker process, then CUMULATIVE GPU.0+CPU
with and without MULTI_CHECK_HOST_GAIN, then GPU.0 alone and CUMULATIVE (both
throttles) in turns for ``--rounds`` rounds; ratios are to GPU.0 alone (MEDIUM)
in this process, of the same round for the turns.

``--long SECONDS`` measures GPU.0 alone, then CUMULATIVE GPU.0+CPU twice, each
for SECONDS in one closed loop of 3 s slices: MULTI_CHECK_HOST_GAIN as it is
(a held-back CPU is checked again only once the GPU's rate strays from the one
decided on, else after the longest wait), then checked again after each
budgeted wait whatever the GPU serves, as before (``host_gain.DRIFT`` set to 0
in this process, where the MULTI scheduler runs).  It prints how many checks
each made, its ratio to GPU.0 alone, and its slowest slice against the median
slice of GPU.0 alone.

``--queue-behind`` measures GPU.0 alone, and ``MULTI:GPU.0`` through a worker
process twice: as it runs now (a slot hands its GPU worker on once its run is
queued on the worker's stream, copies back included, so the next run queues
behind it) and as before (the worker handed on when the run had ended), in
turns for ``--rounds`` rounds; ratios are to GPU.0 alone in the same round.

``--ceiling`` measures how many requests/s the calling process can drive through
worker processes, with a model so small (a 4x256 MLP) that neither the GPU nor
a worker process limits it: GPU.0 in this process, ``MULTI:GPU.0`` through one
worker process, then two such compiled models (two worker processes, as MULTI
over two GPUs has) fed at once from two threads; ratios are to one worker process.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from multi_auto import bert_base, closed_loop, host_gain_check, keep_full, resnet50, tiny_model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny model, 2 emulated GPUs")
    parser.add_argument("--seconds", type=float, default=None, help="per row (default 3; 0.5 quick)")
    parser.add_argument("--model", choices=("resnet50", "bert"), default="resnet50")
    parser.add_argument("--streams", action="store_true", help="only the NUM_STREAMS sweep on GPU.0")
    parser.add_argument("--throttle", action="store_true", help="only GPU_QUEUE_THROTTLE MEDIUM vs LOW")
    parser.add_argument("--rounds", type=int, default=3,
                        help="--throttle, --queue-behind: rounds measured in turns")
    parser.add_argument("--ceiling", action="store_true",
                        help="only the calling process's ceiling through one and two worker processes")
    parser.add_argument("--queue-behind", action="store_true",
                        help="only GPU.0 alone and through a worker process, runs queued behind or not")
    parser.add_argument("--long", type=float, default=None, metavar="SECONDS",
                        help="only GPU.0 alone and CUMULATIVE over long runs (the check's waits)")
    args = parser.parse_args()
    seconds = args.seconds or (0.5 if args.quick else 3.0)
    if args.quick:
        os.environ.setdefault("INFERPLEX_EMULATED_GPUS", "2")
    import inferplex as ov

    core = ov.Core()
    if args.ceiling:  # its own tiny model: ResNet-50 or BERT-base is not needed
        ceiling_rows(core, seconds)
        return
    folder = tempfile.mkdtemp()
    make = bert_base if args.model == "bert" else resnet50
    model, inputs = tiny_model(4) if args.quick else make(4, Path(folder))
    gpu = {} if args.quick else {"INFERENCE_PRECISION_HINT": "f16"}

    def row(label: str, device: str, config: dict[str, Any] | Any, jobs_per_optimal: int = 1,
            baseline: float | None = None) -> float:
        compiled = core.compile_model(model, device, config) if isinstance(config, dict) else config
        before = _cpu_seconds()
        result = closed_loop(compiled, inputs, seconds, jobs_per_optimal)
        # closed_loop warms up for min(2 s, seconds) first: count the CPU of both loops.
        warmup = result["warmup_fps"] * min(2.0, seconds)
        per_request = (_cpu_seconds() - before) / max(1.0, result["requests"] + warmup) * 1e6
        check = host_gain_check(compiled)
        if isinstance(config, dict):
            compiled.release()
        states = result["states"]
        marks = {d: f" ({state})" for d, state in states.items() if state != "serving"}
        devices = "  ".join(f"{d}: {s['fps']:.0f}{marks.get(d, '')}" for d, s in result["devices"].items())
        if check is not None and check["checks"]:  # MULTI_CHECK_HOST_GAIN's latest measurement
            devices += "  [with/without the host: {:.0f}/{:.0f} req/s]".format(*check["rates"])
        ratio = f"  {result['fps'] / baseline:5.2f}x" if baseline else ""
        print(f"{label:58s} {result['fps']:8.1f} req/s{ratio}  jobs {result['jobs']}  "
              f"caller CPU {per_request:5.0f} us/request  {devices}", flush=True)
        return float(result["fps"])

    throughput = {"PERFORMANCE_HINT": "THROUGHPUT", **gpu}
    if args.streams:
        default = row("GPU.0 alone (THROUGHPUT hint's workers)", "GPU.0", throughput)
        for streams in (4, 8, 16):
            row(f"GPU.0 alone, NUM_STREAMS={streams}", "GPU.0", {**throughput, "NUM_STREAMS": streams},
                baseline=default)
            row(f"MULTI:GPU.0 through a worker process, NUM_STREAMS={streams}", "MULTI:GPU.0",
                {"DEVICE_PROPERTIES": {"GPU": {**gpu, "NUM_STREAMS": streams}},
                 "MULTI_WORKER_PROCESSES": "YES"}, baseline=default)
        return

    if args.throttle:
        throttle_rows(row, core, model, throughput, gpu, args.rounds)
        return
    if args.long:
        long_rows(core, model, inputs, throughput, gpu, args.long)
        return
    if args.queue_behind:
        queue_behind_rows(core, model, inputs, throughput, gpu, seconds, args.rounds)
        return

    row("GPU.0 alone", "GPU.0", throughput)
    row("GPU.0 alone, 2x requests", "GPU.0", throughput, 2)
    for jobs in (1, 2):
        row(f"MULTI:GPU.0 through a worker process{', 2x requests' if jobs == 2 else ''}", "MULTI:GPU.0",
            {"DEVICE_PROPERTIES": {"GPU": gpu}, "MULTI_WORKER_PROCESSES": "YES"}, jobs)
    two_gpus = sum(d.startswith("GPU") for d in core.available_devices) >= 2
    for setting in ("AUTO", "YES", "NO") if two_gpus else ():  # one GPU: these rows are left out
        row(f"MULTI:GPU.0,GPU.1, MULTI_WORKER_PROCESSES={setting}", "MULTI:GPU.0,GPU.1",
            {"DEVICE_PROPERTIES": {"GPU": gpu}, "MULTI_WORKER_PROCESSES": setting})
    row("CPU alone", "CPU", {"PERFORMANCE_HINT": "THROUGHPUT"})
    cumulative = {"PERFORMANCE_HINT": "CUMULATIVE_THROUGHPUT"}
    variants: list[tuple[str, dict[str, Any], dict[str, Any]]] = [
        ("defaults", {}, {}),
        ("MULTI_CHECK_HOST_GAIN=NO", {"MULTI_CHECK_HOST_GAIN": False}, {}),
        ("MULTI_CHECK_HOST_GAIN=NO, CPU THREAD_PRIORITY=NORMAL", {"MULTI_CHECK_HOST_GAIN": False},
         {"THREAD_PRIORITY": "NORMAL"}),
        ("MULTI_CHECK_HOST_GAIN=NO, GPU in a worker process", {"MULTI_CHECK_HOST_GAIN": False,
                                                              "MULTI_WORKER_PROCESSES": "YES"}, {}),
    ]
    for label, extra, cpu in variants:
        row(f"CUMULATIVE GPU+CPU, {label}", "AUTO:GPU.0,CPU",
            {**cumulative, **extra, "DEVICE_PROPERTIES": {"GPU": gpu, "CPU": cpu}})


def throttle_rows(row: Any, core: Any, model: Any, throughput: dict[str, Any], gpu: dict[str, Any],
                  rounds: int) -> None:
    """The ``--throttle`` rows (see the module docstring)."""
    throttles = ("MEDIUM", "LOW")
    baseline = row("GPU.0 alone, MEDIUM", "GPU.0", throughput)
    row("GPU.0 alone, LOW", "GPU.0", {**throughput, "GPU_QUEUE_THROTTLE": "LOW"}, baseline=baseline)
    for throttle in throttles:
        row(f"MULTI:GPU.0 through a worker process, {throttle}", "MULTI:GPU.0",
            {"DEVICE_PROPERTIES": {"GPU": {**gpu, "GPU_QUEUE_THROTTLE": throttle}},
             "MULTI_WORKER_PROCESSES": "YES"}, baseline=baseline)
    cumulative = {"PERFORMANCE_HINT": "CUMULATIVE_THROUGHPUT"}
    for check in (False, True):
        for throttle in throttles:
            label = f"CUMULATIVE GPU+CPU, GPU {throttle}" + ("" if check else ", MULTI_CHECK_HOST_GAIN=NO")
            per_device = {"GPU": {**gpu, "GPU_QUEUE_THROTTLE": throttle}}
            row(label, "AUTO:GPU.0,CPU", {**cumulative, "MULTI_CHECK_HOST_GAIN": check,
                                          "DEVICE_PROPERTIES": per_device}, baseline=baseline)
    # In turns, all kept compiled: each round's ratios are free of drift between rows.
    alone = core.compile_model(model, "GPU.0", throughput)
    together = {t: core.compile_model(model, "AUTO:GPU.0,CPU", {
        **cumulative, "DEVICE_PROPERTIES": {"GPU": {**gpu, "GPU_QUEUE_THROTTLE": t}}}) for t in throttles}
    ratios: dict[str, list[float]] = {t: [] for t in throttles}
    for index in range(rounds):
        base = row(f"round {index + 1}: GPU.0 alone, MEDIUM", "GPU.0", alone)
        for throttle, compiled in together.items():
            ratios[throttle].append(row(f"round {index + 1}: CUMULATIVE GPU+CPU, GPU {throttle}",
                                        "AUTO:GPU.0,CPU", compiled, baseline=base) / base)
    for compiled in (alone, *together.values()):
        compiled.release()
    for throttle, values in ratios.items():
        print(f"CUMULATIVE GPU+CPU, GPU {throttle}, vs GPU.0 alone in turns: median "
              f"{statistics.median(values):.3f}x (range {min(values):.3f}-{max(values):.3f})", flush=True)


def long_rows(core: Any, model: Any, inputs: dict[str, Any], throughput: dict[str, Any],
              gpu: dict[str, Any], seconds: float) -> None:
    """The ``--long`` rows (see the module docstring)."""
    import functools

    from inferplex.scheduling import host_gain

    alone = core.compile_model(model, "GPU.0", throughput)
    base, base_slices = _sliced_loop(alone, inputs, seconds)
    alone.release()
    typical = statistics.median(base_slices)
    print(f"{'GPU.0 alone':58s} {base:8.1f} req/s  ({seconds:.0f} s; {LONG_SLICE:.0f} s slices: "
          f"{min(base_slices) / typical:.3f}-{max(base_slices) / typical:.3f}x their median)", flush=True)
    timing = host_gain.HostGainTiming
    for label, setting in (("a held-back CPU watched (now)", host_gain.DRIFT),
                           ("checked again after each wait (before)", 0.0)):
        # 0: every watch window counts as a change (each check reads its timing from the module)
        host_gain.HostGainTiming = functools.partial(timing, drift=setting)  # type: ignore[misc]
        try:
            compiled = core.compile_model(model, "AUTO:GPU.0,CPU", {
                "PERFORMANCE_HINT": "CUMULATIVE_THROUGHPUT", "DEVICE_PROPERTIES": {"GPU": gpu}})
            fps, slices = _sliced_loop(compiled, inputs, seconds)
            check = host_gain_check(compiled)
            compiled.release()
        finally:
            host_gain.HostGainTiming = timing  # type: ignore[misc]
        print(f"{'CUMULATIVE GPU+CPU, ' + label:58s} {fps:8.1f} req/s  {fps / base:5.3f}x  "
              f"checks {check['checks'] if check else 0}; slowest slice {min(slices) / typical:.3f}x, "
              f"{sum(r < 0.97 * typical for r in slices)} of {len(slices)} under 0.97x the GPU's median",
              flush=True)


def queue_behind_rows(core: Any, model: Any, inputs: dict[str, Any], throughput: dict[str, Any],
                      gpu: dict[str, Any], seconds: float, rounds: int) -> None:
    """The ``--queue-behind`` rows (see the module docstring), in turns for ``rounds`` rounds."""
    member = {"DEVICE_PROPERTIES": {"GPU": gpu}, "MULTI_WORKER_PROCESSES": "YES"}
    compiled = {"GPU.0 alone": core.compile_model(model, "GPU.0", throughput),
                "MULTI:GPU.0, runs queued behind (now)": core.compile_model(model, "MULTI:GPU.0", member)}
    # The worker process is started with this process's path: the folder first there makes it
    # run as before (bench/site_runs_not_queued/sitecustomize.py).
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "site_runs_not_queued"))
    try:
        before = core.compile_model(model, "MULTI:GPU.0", member)
        compiled["MULTI:GPU.0, each run to its end (before)"] = before
    finally:
        sys.path.pop(0)
    rates: dict[str, list[float]] = {label: [] for label in compiled}
    for index in range(rounds):
        for label, model_on in compiled.items():
            rates[label].append(closed_loop(model_on, inputs, seconds)["fps"])
        print(f"round {index + 1}: " + ", ".join(f"{r[-1]:.1f}" for r in rates.values()), flush=True)
    base = rates["GPU.0 alone"]
    for label, values in rates.items():
        ratios = [value / alone for value, alone in zip(values, base, strict=True)]
        print(f"{label:58s} {statistics.median(values):8.1f} req/s  {statistics.median(ratios):5.3f}x "
              f"GPU.0 alone (median of {rounds} rounds; {min(ratios):.3f}-{max(ratios):.3f})", flush=True)
    for model_on in compiled.values():
        model_on.release()


LONG_SLICE = 3.0
"""Seconds of each slice of a ``--long`` run (the loop drains between slices, in every row alike)."""


def _sliced_loop(compiled: Any, inputs: dict[str, Any], seconds: float) -> tuple[float, list[float]]:
    """A closed loop at the optimal requests in flight for ``seconds`` after warm-up, in slices of
    :data:`LONG_SLICE`: (requests/s over all, requests/s of each slice)."""
    import inferplex as ov

    jobs = max(1, int(compiled.get_property("OPTIMAL_NUMBER_OF_INFER_REQUESTS")))
    queue = ov.AsyncInferQueue(compiled, jobs)
    keep_full(queue, inputs, 2.0)
    slices, ended, elapsed = [], 0, 0.0
    while elapsed < seconds:
        count, taken = keep_full(queue, inputs, LONG_SLICE)
        slices.append(count / taken)
        ended, elapsed = ended + count, elapsed + taken
    return ended / elapsed, slices


def ceiling_rows(core: Any, seconds: float) -> None:
    """The ``--ceiling`` rows (see the module docstring), each measured twice."""
    model, inputs = tiny_model(4)
    processes = {"MULTI_WORKER_PROCESSES": "YES"}
    alone = core.compile_model(model, "GPU.0", {"PERFORMANCE_HINT": "THROUGHPUT"})
    first, second = (core.compile_model(model, "MULTI:GPU.0", processes) for _ in range(2))
    rows = [("GPU.0 in this process", [alone]), ("MULTI:GPU.0, one worker process", [first]),
            ("two MULTI:GPU.0 models, two worker processes at once", [first, second])]
    one = None
    for _ in range(2):
        for label, models in rows:
            fps, per_request = _fed_at_once(models, inputs, seconds)
            one = fps if len(models) == 1 and label.startswith("MULTI") else one
            ratio = f"  {fps / one:5.2f}x one worker process" if one and len(models) == 2 else ""
            print(f"{label:58s} {fps:8.1f} req/s  caller CPU {per_request:5.0f} us/request{ratio}",
                  flush=True)
    for compiled in (alone, first, second):
        compiled.release()


def _fed_at_once(models: list[Any], inputs: dict[str, Any], seconds: float) -> tuple[float, float]:
    """Closed loops on every model at once, one thread each: (requests/s in all, caller CPU us/request)."""
    import threading

    import inferplex as ov

    from closed_loop import keep_full

    queues = [ov.AsyncInferQueue(m, int(m.get_property("OPTIMAL_NUMBER_OF_INFER_REQUESTS"))) for m in models]
    for queue in queues:
        keep_full(queue, inputs, min(1.0, seconds))  # warm-up: captures, first messages
    ended = [0] * len(queues)

    def loop(index: int) -> None:
        ended[index] = keep_full(queues[index], inputs, seconds)[0]

    threads = [threading.Thread(target=loop, args=(i,)) for i in range(len(queues))]
    before, start = _cpu_seconds(), time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed, cpu = time.perf_counter() - start, _cpu_seconds() - before
    return sum(ended) / elapsed, cpu / max(1, sum(ended)) * 1e6


def _cpu_seconds() -> float:
    """CPU time of this (the calling) process so far, every thread included."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


if __name__ == "__main__":
    main()
