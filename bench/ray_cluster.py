"""RAY devices benchmark: a local Ray cluster whose nodes split this host, side by side in one run.

The cluster runs on loopback only, in network and PID namespaces of its own
(``unshare``, as root; see ``tests/local_ray.py``): the script re-runs itself
there, its output passed through as it comes.  Each node's processes are
pinned to its own share of the host's cores (``taskset``), so that the nodes
split the host as separate machines would; with ``--gpu-node`` the last node
also holds the GPU.  Each node compiles the model on its own ``AUTO``
(``CUMULATIVE_THROUGHPUT``), as a ``RAY.i`` device does by default.

Rows, in one run:

1. the model's latency on one node (``RAY.0``, the node's CPU with a latency
   hint, one request at a time, less Ray's own round trip): the issue's target
   is for a model of 5 ms or more there;
2. throughput of each ``RAY.i`` alone (closed loop, its optimal number of
   requests in flight), and of ``MULTI:RAY.0,...`` over every node, once with
   each request in an actor call of its own (``REQUESTS_PER_CALL=1``: how RAY
   devices ran before requests were gathered into calls) and once as the
   devices run by default: the ratio MULTI / sum of the nodes alone (target
   >= 0.9), and the actor calls per second the driver made (of ``RAY.0``, from
   its ``NODE_CALLS``; the others' alike);
3. ``AUTO:RAY`` (``CUMULATIVE_THROUGHPUT``, every node) against the local
   ``AUTO:-RAY`` (``CUMULATIVE_THROUGHPUT``, this process on every core and
   device of the host): the same hardware, reached through Ray or not;
4. the per-request overhead of a remote call: median latency of one
   synchronous request of a tiny model on ``RAY.0`` against the same on the local
   ``CPU``, and against a bare Ray actor call on the same node that returns its
   input (Ray's own round trip, the floor of any remote call).

Where the nodes leave cores of the host unused (``--nodes 3 --cores-per-node
4`` on 16 cores), the driver runs on those, apart from the nodes, as a client
machine of its own would; else it shares every core with them.

Every phase is bounded: one that gives no result within ``--phase-limit``
seconds, or that would start past ``--budget`` seconds, is reported and
skipped (and the script ends once the rest is done, whatever that phase still
runs).  A phase that runs out says where its time went: each step it reached
(compile, first inference, warm-up, the measured loop, release) and how long
each took, the requests submitted and ended so far and when the last one
ended, the RAY actors alive, and where the process's threads wait (their
innermost inferplex or Ray frame).  Each row also gives its compile and first
inference times.  Results are written to ``$OUT/ray_cluster.json`` after each
phase.

Usage::

    python bench/ray_cluster.py                         # nodes of 4 cores, 8 x MatMul 64x1024x1024
    python bench/ray_cluster.py --quick                 # 2 nodes of 1 core, a small model, short runs
    python bench/ray_cluster.py --nodes 4 --cores-per-node 4 --gpu-node   # the GPU machine's split
    python bench/ray_cluster.py --own-machine ...       # where unshare is missing, on a host with no network
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from onnx import ModelProto, TensorProto, helper, numpy_helper

_HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(_HERE))
sys.path.insert(0, str(_HERE.parent / "tests"))
from bench_phases import Counted, Phases, Progress, log  # noqa: E402

from closed_loop import keep_full  # noqa: E402
from local_ray import IN_NAMESPACE, LocalCluster, namespace_refusal, rerun_in_namespace  # noqa: E402

TARGET_MODEL_MS = 5.0
"""The issue's target (MULTI >= 0.9x the sum of the nodes) is for a model of at least this many ms."""


def matmul_model(hidden: int, layers: int, batch: int) -> tuple[ModelProto, dict[str, np.ndarray]]:
    """``layers`` MatMul + Relu of ``hidden`` x ``hidden`` f32 weights on a ``batch`` x ``hidden`` input."""
    rng = np.random.default_rng(0)
    nodes, weights, last = [], [], "x"
    for index in range(layers):
        weight = (rng.standard_normal((hidden, hidden)) / np.sqrt(hidden)).astype(np.float32)
        weights.append(numpy_helper.from_array(weight, f"w{index}"))
        nodes += [helper.make_node("MatMul", [last, f"w{index}"], [f"m{index}"]),
                  helper.make_node("Relu", [f"m{index}"], [f"y{index}"])]
        last = f"y{index}"
    graph = helper.make_graph(nodes, "matmuls",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, hidden])],
                              [helper.make_tensor_value_info(last, TensorProto.FLOAT, [batch, hidden])],
                              weights)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 10
    return model, {"x": rng.standard_normal((batch, hidden)).astype(np.float32)}


def throughput(progress: Progress, core: Any, model: ModelProto, device: str, config: dict[str, Any],
               feeds: dict[str, np.ndarray], seconds: float) -> dict[str, Any]:
    """Requests per second of ``device`` kept full for ``seconds`` (after a short warm-up), the
    driver's CPU time per request (every thread of this process), and the actor calls of its first
    RAY node over the measured window, where it has one."""
    import inferplex as ov

    progress.step("compile")
    begin = time.perf_counter()
    compiled = core.compile_model(model, device, config)
    compiled_in = time.perf_counter() - begin
    progress.step("first inference")
    begin = time.perf_counter()
    compiled.create_infer_request().infer(feeds)
    first = time.perf_counter() - begin
    queue = Counted(ov.AsyncInferQueue(compiled), progress)
    progress.step("warm-up")
    keep_full(queue, feeds, min(1.0, seconds / 4))
    calls_before = _node_calls(compiled)
    progress.step("loop")
    cpu_before = time.process_time()
    count, took = keep_full(queue, feeds, seconds)
    cpu = time.process_time() - cpu_before
    progress.step("release")
    calls_after = _node_calls(compiled)
    result = {"device": device, "requests": count, "seconds": took, "rps": count / took,
              "in_flight": len(queue), "compile_s": compiled_in, "first_inference_s": first,
              "driver_cpu_ms": 1e3 * cpu / max(1, count),
              "execution_devices": list(compiled.get_property("EXECUTION_DEVICES")),
              "node_execution_devices": _node_devices(compiled)}
    if calls_before and calls_after:
        calls = calls_after["calls"] - calls_before["calls"]
        carried = calls_after["requests"] - calls_before["requests"]
        result["node_calls"] = {"device": calls_after["device"], "calls": calls, "requests": carried,
                                "calls_per_s": calls / took, "per_call": carried / max(1, calls)}
    del queue
    compiled.release()
    return result


def _node_devices(compiled: Any) -> list[str] | None:
    """The devices the first RAY node serves from (its own AUTO's choice), or None."""
    try:
        return [str(device) for device in compiled.get_property("NODE_EXECUTION_DEVICES")]
    except Exception:  # noqa: BLE001 - not a RAY device (the local AUTO)
        return None


def _node_calls(compiled: Any) -> dict[str, Any] | None:
    try:
        return dict(compiled.get_property("NODE_CALLS"))
    except Exception:  # noqa: BLE001 - not a RAY device (the local AUTO)
        return None


def one_at_a_time(progress: Progress, core: Any, model: ModelProto, device: str, config: dict[str, Any],
                  feeds: dict[str, np.ndarray], count: int) -> dict[str, Any]:
    """Median and 90th percentile latency (ms) of ``count`` synchronous requests, one at a time."""
    progress.step("compile")
    compiled = core.compile_model(model, device, config)
    request = compiled.create_infer_request()
    progress.step("warm-up")
    for _ in range(min(50, count)):
        _timed_infer(progress, request, feeds)
    progress.step("loop")
    samples = [_timed_infer(progress, request, feeds) for _ in range(count)]
    progress.step("release")
    compiled.release()
    samples.sort()
    return {"device": device, "median_ms": statistics.median(samples),
            "p90_ms": samples[int(0.9 * (len(samples) - 1))]}


def _timed_infer(progress: Progress, request: Any, feeds: dict[str, np.ndarray]) -> float:
    """One synchronous request, counted in ``progress``; its milliseconds."""
    progress.submit()
    begin = time.perf_counter()
    request.infer(feeds)
    took = (time.perf_counter() - begin) * 1e3
    progress.end()
    return took


class Echo:
    """A bare Ray actor that returns what it is given: Ray's own round trip."""

    def echo(self, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        return inputs


def ray_round_trip(progress: Progress, node_id: str, feeds: dict[str, np.ndarray],
                   count: int) -> dict[str, Any]:
    """Median and 90th percentile latency (ms) of ``count`` calls of :class:`Echo` on ``node_id``."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    progress.step("actor start")
    actor = ray.remote(Echo).options(
        num_cpus=0, scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False)).remote()
    progress.step("warm-up")
    for _ in range(min(50, count)):
        ray.get(actor.echo.remote(feeds))
    progress.step("loop")
    samples = []
    for _ in range(count):
        progress.submit()
        begin = time.perf_counter()
        ray.get(actor.echo.remote(feeds))
        samples.append((time.perf_counter() - begin) * 1e3)
        progress.end()
    ray.kill(actor)
    samples.sort()
    return {"median_ms": statistics.median(samples), "p90_ms": samples[int(0.9 * (len(samples) - 1))]}


def run(args: argparse.Namespace) -> bool:
    """Every row, inside the namespace (see the module docstring); False where a phase got stuck."""
    host_cores = len(os.sched_getaffinity(0))
    nodes = args.nodes or max(1, host_cores // args.cores_per_node)
    sets = [f"{i * args.cores_per_node}-{(i + 1) * args.cores_per_node - 1}" for i in range(nodes)]
    begin = time.perf_counter()
    cluster = LocalCluster(nodes=nodes, cpus=args.cores_per_node, gpus=1 if args.gpu_node else 0,
                           core_sets=sets, own_machine=args.own_machine).start()
    spare = sorted(os.sched_getaffinity(0) - set(range(nodes * args.cores_per_node)))
    if spare:  # the driver apart from the nodes' cores, as a client machine of its own would be
        os.sched_setaffinity(0, spare)  # before ray.init: the threads it starts inherit this
    log(f"cluster: {nodes} nodes of {args.cores_per_node} cores ({', '.join(sets)}) on 127.0.0.1, "
        f"up in {time.perf_counter() - begin:.1f} s; host cores {host_cores}; the driver on "
        f"{_cores(spare) if spare else 'every core, beside the nodes'}")
    os.environ["RAY_ADDRESS"] = cluster.address
    result: dict[str, Any] = {"args": vars(args), "nodes": nodes, "core_sets": sets}
    phases = Phases(args.budget - (time.perf_counter() - begin), args.phase_limit, result, "ray_cluster.json")
    try:
        import inferplex as ov

        core = ov.Core()
        devices = [d for d in core.available_devices if d.startswith("RAY")]
        result["devices"] = devices
        result["object_store"] = _object_store()
        log(f"object store: {result['object_store']}")
        rows(core, devices, args, phases)
    finally:
        if not phases.stuck:  # a stuck phase may hold the driver's Ray calls: do not wait on it
            import ray

            ray.shutdown()
        cluster.stop()
    return not phases.stuck


def rows(core: Any, devices: list[str], args: argparse.Namespace, phases: Phases) -> None:
    model, feeds = matmul_model(args.hidden, args.layers, args.batch)
    tiny, tiny_feeds = matmul_model(16, 1, 1)
    node_cpu = {"NODE_DEVICE": "CPU", "NODE_PROPERTIES": {"PERFORMANCE_HINT": "LATENCY"}}
    node_id = core.get_property("RAY.0", "DEVICE_ID")
    bare = phases.run("ray_round_trip", ray_round_trip, node_id, tiny_feeds, args.latency)
    on_node = phases.run("model_on_a_node", one_at_a_time, core, model, "RAY.0", node_cpu, feeds,
                         max(5, args.latency // 20))
    if on_node is not None:
        model_ms = on_node["median_ms"] - (bare["median_ms"] if bare else 0.0)
        phases.result["model_ms_on_a_node"] = model_ms
        note = "" if model_ms >= TARGET_MODEL_MS else (f"  (below the target's {TARGET_MODEL_MS:g} ms: "
                                                        f"raise --batch or --layers)")
        log(f"model: {args.layers} x MatMul {args.batch}x{args.hidden}x{args.hidden}: {model_ms:.2f} ms "
            f"per request on one node of {args.cores_per_node} cores (RAY.0, its CPU, latency hint, one "
            f"at a time, less Ray's round trip){note}")
    alone = [phases.run(f"alone_{device}", throughput, core, model, device, {}, feeds, args.seconds)
             for device in devices]
    for row in alone:
        if row is not None:
            log(f"  {row['device']:<10} alone          {row['rps']:9.1f} req/s  "
                f"({row['in_flight']} in flight, {_calls(row)}; {_started(row)})")
    total = sum(row["rps"] for row in alone if row is not None)
    complete = all(row is not None for row in alone) and total > 0
    node_optimal = phases.run("node_optimal", _node_optimal, core, tiny) or 4
    one_per_call = {"DEVICE_PROPERTIES": {"RAY": {"REQUESTS_PER_CALL": 1,
                                                  "CALLS_IN_FLIGHT": min(16, 2 * node_optimal)}}}
    multi_device = f"MULTI:{','.join(devices)}"
    for name, label, config in (("multi_one_per_call", "one request per call", one_per_call),
                                ("multi", "gathered (default)", {})):
        row = phases.run(name, throughput, core, model, multi_device, config, feeds, args.seconds)
        if row is None:
            continue
        ratio = f"MULTI / sum of nodes alone = {row['rps'] / total:.2f}" if complete else "no sum"
        phases.result[f"{name}_over_sum"] = row["rps"] / total if complete else None
        log(f"  MULTI, {label:<22} {row['rps']:9.1f} req/s  ({row['in_flight']} in flight, {_calls(row)}; "
            f"{_started(row)})  {ratio}  (target >= 0.9)")
    cumulative = {"PERFORMANCE_HINT": "CUMULATIVE_THROUGHPUT"}
    auto_ray = phases.run("auto_ray", throughput, core, model, "AUTO:RAY", cumulative, feeds, args.seconds)
    auto_local = phases.run("auto_local", throughput, core, model, "AUTO:-RAY", cumulative, feeds,
                            args.seconds)
    if auto_ray is not None and auto_local is not None:
        phases.result["auto_ratio"] = auto_ray["rps"] / auto_local["rps"]
        log(f"  AUTO:RAY               {auto_ray['rps']:9.1f} req/s  on "
            f"{','.join(auto_ray['execution_devices'])} ({_started(auto_ray)})")
        log(f"  local AUTO:-RAY        {auto_local['rps']:9.1f} req/s  on "
            f"{','.join(auto_local['execution_devices'])}  AUTO:RAY / local AUTO = "
            f"{auto_ray['rps'] / auto_local['rps']:.2f}")
    overhead(core, tiny, tiny_feeds, node_cpu, bare, args, phases)


def overhead(core: Any, tiny: ModelProto, tiny_feeds: dict[str, np.ndarray], node_cpu: dict[str, Any],
             bare: dict[str, Any] | None, args: argparse.Namespace, phases: Phases) -> None:
    """Row 4: one request at a time of a tiny model, on RAY.0 and on the local CPU."""
    latency_hint = {"PERFORMANCE_HINT": "LATENCY"}
    remote = phases.run("remote_latency", one_at_a_time, core, tiny, "RAY.0", node_cpu, tiny_feeds,
                        args.latency)
    local = phases.run("local_latency", one_at_a_time, core, tiny, "CPU", latency_hint, tiny_feeds,
                       args.latency)
    if remote is None or local is None:
        return
    phases.result["remote_overhead_ms"] = remote["median_ms"] - local["median_ms"]
    log(f"  tiny model, one request at a time: RAY.0 {remote['median_ms']:.3f} ms "
        f"(p90 {remote['p90_ms']:.3f}), local CPU {local['median_ms']:.3f} ms (p90 {local['p90_ms']:.3f}): "
        f"a remote call adds {remote['median_ms'] - local['median_ms']:.3f} ms")
    if bare is not None:
        log(f"  bare Ray actor round trip to the same node: {bare['median_ms']:.3f} ms "
            f"(p90 {bare['p90_ms']:.3f}); RAY.0 / bare Ray = {remote['median_ms'] / bare['median_ms']:.2f}")


def _started(row: dict[str, Any]) -> str:
    """``compiled in 16.2 s, first inference 0.03 s, first node on CPU``: the node's own devices
    (its AUTO's choice, read from the first RAY member), so a node using a GPU shows."""
    words = f"compiled in {row['compile_s']:.1f} s, first inference {row['first_inference_s']:.2f} s"
    if row.get("node_execution_devices"):
        words += f", first node on {','.join(row['node_execution_devices'])}"
    return words


def _calls(row: dict[str, Any]) -> str:
    calls = row.get("node_calls")
    driver = f"driver CPU {row['driver_cpu_ms']:.2f} ms/request"
    if not calls:
        return driver
    return (f"{driver}; {calls['device']}: {calls['calls_per_s']:.0f} calls/s, "
            f"{calls['per_call']:.1f} requests per call")


def _object_store() -> dict[str, Any]:
    """Each node's object store (MiB) and where it lives: a store too small for the arrays in
    flight spills to disk and stalls every call (Ray falls back to /tmp when /dev/shm is small)."""
    import shutil

    import ray

    try:
        nodes = [node for node in ray.nodes() if node.get("Alive")]
    except Exception:  # noqa: BLE001 - not connected: nothing to say
        nodes = []
    sizes = [round(node["Resources"].get("object_store_memory", 0) / 2**20) for node in nodes]
    shm = shutil.disk_usage("/dev/shm").total / 2**20 if os.path.isdir("/dev/shm") else 0.0
    return {"per_node_mib": sizes, "dev_shm_mib": round(shm)}


def _cores(cores: list[int]) -> str:
    return f"core {cores[0]}" if len(cores) == 1 else f"cores {cores[0]}-{cores[-1]}" \
        if cores == list(range(cores[0], cores[-1] + 1)) else f"cores {','.join(map(str, cores))}"


def _node_optimal(progress: Progress, core: Any, tiny: ModelProto) -> int:
    """RAY.0's own optimal number of requests (what a call of one request each kept in flight before)."""
    progress.step("compile")
    compiled = core.compile_model(tiny, "RAY.0")
    try:
        return int(compiled.get_property("NODE_OPTIMAL_NUMBER_OF_INFER_REQUESTS"))
    finally:
        compiled.release()


_FULL: dict[str, Any] = {"nodes": 0, "cores_per_node": 4, "hidden": 1024, "layers": 8, "batch": 64,
                         "seconds": 8.0, "latency": 1000, "budget": 500.0, "phase_limit": 90.0}
_QUICK: dict[str, Any] = {"nodes": 2, "cores_per_node": 1, "hidden": 512, "layers": 4, "batch": 8,
                          "seconds": 3.0, "latency": 300, "budget": 300.0, "phase_limit": 60.0}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="2 nodes of 1 core, a small model, short runs")
    parser.add_argument("--nodes", type=int, help="CPU nodes (default: host cores / cores per node)")
    parser.add_argument("--cores-per-node", type=int)
    parser.add_argument("--gpu-node", action="store_true", help="the last node also holds the GPU")
    parser.add_argument("--hidden", type=int, help="the model's width (default 1024)")
    parser.add_argument("--layers", type=int, help="the model's MatMul layers (default 8)")
    parser.add_argument("--batch", type=int, help="rows of the model's input (default 64)")
    parser.add_argument("--seconds", type=float, help="per throughput row")
    parser.add_argument("--latency", type=int, help="requests per latency row")
    parser.add_argument("--budget", type=float, help="seconds for the whole run, cluster start included "
                                                     "(default 500); phases past it are skipped")
    parser.add_argument("--phase-limit", type=float, help="seconds one phase may take (default 90)")
    parser.add_argument("--own-machine", action="store_true",
                        help="no namespace: for a host that reaches no network and runs no other Ray "
                             "(the cluster is ended with `ray stop`, which ends all of the host's Ray)")
    args = parser.parse_args()
    defaults = _QUICK if args.quick else _FULL
    for key, value in defaults.items():  # what is given on the command line wins
        if getattr(args, key) is None:
            setattr(args, key, value)
    if os.environ.get(IN_NAMESPACE) != "1" and not args.own_machine:
        refusal = namespace_refusal()
        if refusal is not None:
            sys.exit(f"cannot start a local Ray cluster here: {refusal}")
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
        done = rerun_in_namespace([sys.executable, __file__, *sys.argv[1:]], timeout=args.budget + 120,
                                  env=env, capture=False)
        sys.exit(done.returncode)
    finished = run(args)
    sys.stdout.flush()
    if not finished:
        os._exit(3)  # a stuck phase's thread would hold the interpreter's exit


if __name__ == "__main__":
    main()
