"""Per-request framework overhead on a tiny model: inferplex against the raw engines.

Prints, for one engine of the CPU device, side by side (requests per second and
microseconds per request):

- raw ONNX Runtime ``session.run``;
- raw OpenVINO ``infer_request.infer`` and OpenVINO's own ``AsyncInferQueue``;
- inferplex's synchronous ``InferRequest.infer``;
- inferplex's ``AsyncInferQueue`` (``share_inputs=True``, as benchmark_app runs);
- "bare threads": the request engine's shape with none of its code (worker threads
  calling OpenVINO's compiled ``InferRequest.infer``, one completion thread running
  the callbacks, 4 requests in flight), to tell the cost of the threads from the
  cost of the Python that runs per request;

with the ratio of each inferplex figure to the raw engine it wraps.  The model is
one Relu on a 4x64 float tensor (``--model tiny``: the run itself takes a few
microseconds, so what is left is the framework's cost per request) or a small
MLP (``--model small``: a run of a few hundred microseconds).

``--compare SRC`` runs the same measurement, in alternating child processes, on
the inferplex found in ``SRC`` (another checkout's ``src``) and on this one, and
prints the medians side by side.

``--calls`` counts instead the function calls one request makes (Python functions
and C functions called from Python, from a profile hook on every thread), per
thread (caller, device worker, completion thread), for ``infer()`` and for an
AsyncInferQueue of 2 jobs with a callback, and lists each call with its count
per request.

    python bench/request_overhead.py [--engine ONNXRUNTIME|OPENVINO] [--model tiny|small]
                                     [--seconds 2] [--rounds 3] [--compare OLD_SRC] [--calls]
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import statistics
import subprocess
import sys
import time
from typing import Any

import numpy as np
from onnx import TensorProto, helper, numpy_helper


def _model(kind: str) -> Any:
    if kind == "tiny":
        nodes = [helper.make_node("Relu", ["x"], ["y"])]
        inits: list[Any] = []
        shape = [4, 64]
    else:
        rng = np.random.default_rng(0)
        nodes, inits, last = [], [], "x"
        for layer in range(3):
            w = numpy_helper.from_array(rng.standard_normal((256, 256)).astype(np.float32) * 0.05,
                                        f"w{layer}")
            inits.append(w)
            out = "y" if layer == 2 else f"h{layer}"
            nodes += [helper.make_node("MatMul", [last, f"w{layer}"], [f"m{layer}"]),
                      helper.make_node("Relu", [f"m{layer}"], [out])]
            last = out
        shape = [32, 256]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 9
    return model, {"x": np.ones(shape, np.float32)}


def _rate(step: Any, seconds: float) -> float:
    for _ in range(200):
        step()
    count, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        step()
        count += 1
    return count / (time.perf_counter() - start)


def _queue_rate(queue: Any, feed: Any, seconds: float, **kwargs: Any) -> float:
    ended = [0]

    def done(*_: Any) -> None:
        ended[0] += 1  # one completion thread runs the callbacks (raw OpenVINO: the GIL orders them)

    queue.set_callback(done)
    for _ in range(200):
        queue.start_async(feed, **kwargs)
    queue.wait_all()
    ended[0] = 0
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        queue.start_async(feed, **kwargs)
    queue.wait_all()
    return ended[0] / (time.perf_counter() - start)


def _bare_threads(compiled: Any, feed: dict[str, np.ndarray], seconds: float) -> float:
    """Requests per second through worker threads and a completion thread, with nothing else."""
    import queue
    import threading

    from openvino._pyopenvino import InferRequest, Tensor

    workers = max(1, int(compiled.get_property("OPTIMAL_NUMBER_OF_INFER_REQUESTS")))
    jobs: queue.SimpleQueue[Any] = queue.SimpleQueue()
    ended: queue.SimpleQueue[Any] = queue.SimpleQueue()
    in_flight, count = threading.Semaphore(4), [0]
    (value,) = feed.values()

    def work(request: Any) -> None:
        while (job := jobs.get()) is not None:
            ended.put(InferRequest.infer(request, {0: Tensor(job, True)}, False, True))

    def complete() -> None:
        while ended.get() is not None:
            count[0] += 1
            in_flight.release()

    threads = [threading.Thread(target=work, args=(compiled.create_infer_request(),), daemon=True)
               for _ in range(workers)] + [threading.Thread(target=complete, daemon=True)]
    for thread in threads:
        thread.start()
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        in_flight.acquire()
        jobs.put(value)
    for _ in range(4):
        in_flight.acquire()
    rate = count[0] / (time.perf_counter() - start)
    for _ in range(workers):
        jobs.put(None)
    ended.put(None)
    return rate


def measure(engine: str, kind: str, seconds: float) -> dict[str, float]:
    """Requests per second of each way of running the model."""
    import onnxruntime as ort
    import openvino

    import inferplex as ov

    model, feed = _model(kind)
    data = model.SerializeToString()
    rates: dict[str, float] = {}
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(data, options, providers=["CPUExecutionProvider"])
    rates["raw ORT sync"] = _rate(lambda: session.run(None, feed), seconds)
    core = openvino.Core()
    raw = core.compile_model(core.read_model(data, b""), "CPU",
                             {"PERFORMANCE_HINT": "THROUGHPUT", "NUM_STREAMS": 2})
    request = raw.create_infer_request()
    rates["raw OV sync"] = _rate(lambda: request.infer(feed, share_inputs=True), seconds)
    rates["raw OV async"] = _queue_rate(openvino.AsyncInferQueue(raw, 4), feed, seconds, share_inputs=True)
    rates["bare threads"] = _bare_threads(raw, feed, seconds)

    config: dict[str, Any] = {"PERFORMANCE_HINT": "THROUGHPUT", "NUM_STREAMS": 2}
    plex = ov.Core()
    if "ENGINE" in plex.get_property("CPU", "SUPPORTED_PROPERTIES"):
        config["ENGINE"] = engine
    compiled = plex.compile_model(model, "CPU", config)
    infer_request = compiled.create_infer_request()
    rates["inferplex sync"] = _rate(lambda: infer_request.infer(feed), seconds)
    queue = ov.AsyncInferQueue(compiled, 4)
    shared = "share_inputs" in inspect.signature(queue.start_async).parameters
    rates["inferplex async"] = _queue_rate(queue, feed, seconds, **({"share_inputs": True} if shared else {}))
    return rates


def count_calls(engine: str, kind: str, requests: int = 200) -> None:
    """Print the calls per request of ``infer()`` and of an AsyncInferQueue (see the module docstring)."""
    import collections
    import threading

    import inferplex as ov

    model, feed = _model(kind)
    counts: collections.Counter[str] = collections.Counter()
    threads: collections.Counter[str] = collections.Counter()
    active = [False]

    def hook(frame: Any, event: str, arg: Any) -> None:
        if not active[0] or event not in ("call", "c_call"):
            return
        code = frame.f_code
        where = f"{code.co_filename.split('/src/')[-1]}:{code.co_name}" if event == "call" \
            else f"C {getattr(arg, '__qualname__', arg)}"
        counts[where] += 1
        name = threading.current_thread().name
        threads["device worker" if name.startswith("inferplex-CPU") else
                "completions" if name.startswith("inferplex-callbacks") else name] += 1

    threading.setprofile(hook)  # threads the engine starts later (the first request starts them)
    sys.setprofile(hook)
    compiled = ov.Core().compile_model(model, "CPU", {"PERFORMANCE_HINT": "THROUGHPUT", "NUM_STREAMS": 2,
                                                      "ENGINE": engine})
    request = compiled.create_infer_request()
    queue = ov.AsyncInferQueue(compiled, 2)
    queue.set_callback(lambda *_: None)
    for _ in range(50):  # warm up: threads started, tensors made
        request.infer(feed)
        queue.start_async(feed, share_inputs=True)
    queue.wait_all()
    for label, step in (("infer()", lambda: request.infer(feed)),
                        ("AsyncInferQueue", lambda: queue.start_async(feed, share_inputs=True))):
        counts.clear()
        threads.clear()
        active[0] = True
        for _ in range(requests):
            step()
        queue.wait_all()
        time.sleep(0.2)  # the last completions
        active[0] = False
        python = sum(n for name, n in counts.items() if not name.startswith("C "))
        print(f"{label}: {sum(counts.values()) / requests:.1f} calls per request "
              f"({python / requests:.1f} Python, {(sum(counts.values()) - python) / requests:.1f} C); "
              + ", ".join(f"{name} {n / requests:.1f}" for name, n in threads.items()))
        for name, n in sorted(counts.items(), key=lambda item: -item[1]):
            if n >= requests // 2:
                print(f"  {n / requests:5.2f} {name}")
    sys.setprofile(None)
    threading.setprofile(None)  # type: ignore[arg-type]


def _child(src: str, args: argparse.Namespace) -> dict[str, float]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (src, os.environ.get("PYTHONPATH")) if p))
    command = [sys.executable, __file__, "--json", "--engine", args.engine, "--model", args.model,
               "--seconds", str(args.seconds)]
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def _report(columns: dict[str, dict[str, float]], engine: str) -> None:
    raw_sync = "raw ORT sync" if engine == "ONNXRUNTIME" else "raw OV sync"
    names = list(next(iter(columns.values())))
    print(f"{'':18}" + "".join(f"{c:>22}" for c in columns))
    for name in names:
        cells = []
        for rates in columns.values():
            rate = rates[name]
            ratio = ""
            if name == "inferplex sync":
                ratio = f" {rates[raw_sync] / rate:4.2f}x"
            elif name in ("inferplex async", "bare threads"):
                ratio = f" {rates['raw OV async'] / rate:4.2f}x"
            cells.append(f"{rate:8.0f}/s {1e6 / rate:6.1f}us{ratio:>6}")
        print(f"{name:18}" + "".join(f"{c:>22}" for c in cells))
    print(f"(ratio: time per request over the raw engine's; sync against {raw_sync}, "
          "async and bare threads against raw OV async)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engine", default="ONNXRUNTIME", choices=["ONNXRUNTIME", "OPENVINO"])
    parser.add_argument("--model", default="tiny", choices=["tiny", "small"])
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--compare", default="", help="another checkout's src to run beside this one")
    parser.add_argument("--calls", action="store_true", help="count the calls per request instead")
    parser.add_argument("--json", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.calls:
        count_calls(args.engine, args.model)
        return
    if args.json:
        print(json.dumps(measure(args.engine, args.model, args.seconds)))
        return
    here = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src")
    sources = {"old": args.compare, "new": here} if args.compare else {"this": here}
    runs: dict[str, list[dict[str, float]]] = {label: [] for label in sources}
    for _ in range(args.rounds):
        for label, src in sources.items():
            runs[label].append(_child(src, args))
    medians = {f"{label} (median of {args.rounds})": {
        name: statistics.median(r[name] for r in rounds) for name in rounds[0]}
        for label, rounds in runs.items()}
    print(f"engine {args.engine}, model {args.model}, {args.seconds:g} s per figure")
    _report(medians, args.engine)


if __name__ == "__main__":
    main()
