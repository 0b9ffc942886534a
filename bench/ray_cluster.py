"""RAY devices benchmark: a local Ray cluster whose nodes split this host, side by side in one run.

The cluster runs on loopback only, in network and PID namespaces of its own
(``unshare``, as root; see ``tests/local_ray.py``): the script re-runs itself
there.  Each node's processes are pinned to its own share of the host's cores
(``taskset``), so that the nodes split the host as separate machines would;
with ``--gpu-node`` the last node also holds the GPU.  Each node compiles the
model on its own ``AUTO`` (``CUMULATIVE_THROUGHPUT``), as a ``RAY.i`` device does
by default.

Rows, in one run:

1. throughput of each ``RAY.i`` alone (closed loop, its optimal number of
   requests in flight), and of ``MULTI:RAY.0,...`` over every node: the ratio
   MULTI / sum of the nodes alone (target >= 0.9 for a model of 5 ms or more);
2. ``AUTO:RAY`` (``CUMULATIVE_THROUGHPUT``, every node) against the local
   ``AUTO:-RAY`` (``CUMULATIVE_THROUGHPUT``, this process on every core and
   device of the host): the same hardware, reached through Ray or not;
3. the per-request overhead of a remote call: median latency of one
   synchronous request of a tiny model on ``RAY.0`` against the same on the local
   ``CPU``, one request at a time over loopback, and against a bare Ray actor
   call on the same node that returns its input (Ray's own round trip, the
   floor of any remote call).

Usage::

    python bench/ray_cluster.py                         # nodes of 4 cores, 8 x 1024-wide MatMul layers
    python bench/ray_cluster.py --quick                 # 2 nodes of 1 core, a small model, short runs
    python bench/ray_cluster.py --nodes 3 --cores-per-node 4 --gpu-node   # the GPU machine's split
    python bench/ray_cluster.py --own-machine ...       # where unshare is missing, on a host with no network

Prints each row and the ratios; writes ``ray_cluster.json`` to ``$OUT`` when it is set.
"""

from __future__ import annotations

import argparse
import json
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
from closed_loop import keep_full  # noqa: E402
from local_ray import IN_NAMESPACE, LocalCluster, namespace_refusal, rerun_in_namespace  # noqa: E402


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


def throughput(core: Any, model: ModelProto, device: str, config: dict[str, Any],
               feeds: dict[str, np.ndarray], seconds: float) -> dict[str, Any]:
    """Requests per second of ``device`` kept full for ``seconds`` (after a short warm-up)."""
    import inferplex as ov

    compiled = core.compile_model(model, device, config)
    queue = ov.AsyncInferQueue(compiled)
    keep_full(queue, feeds, min(1.0, seconds / 4))
    count, took = keep_full(queue, feeds, seconds)
    result = {"device": device, "requests": count, "seconds": took, "rps": count / took,
              "in_flight": len(queue), "execution_devices": list(compiled.get_property("EXECUTION_DEVICES"))}
    del queue
    compiled.release()
    return result


def one_at_a_time(core: Any, model: ModelProto, device: str, config: dict[str, Any],
                  feeds: dict[str, np.ndarray], count: int) -> dict[str, Any]:
    """Median and 90th percentile latency (ms) of ``count`` synchronous requests, one at a time."""
    compiled = core.compile_model(model, device, config)
    request = compiled.create_infer_request()
    for _ in range(min(50, count)):
        request.infer(feeds)
    samples = []
    for _ in range(count):
        begin = time.perf_counter()
        request.infer(feeds)
        samples.append((time.perf_counter() - begin) * 1e3)
    compiled.release()
    samples.sort()
    return {"device": device, "median_ms": statistics.median(samples),
            "p90_ms": samples[int(0.9 * (len(samples) - 1))]}


class Echo:
    """A bare Ray actor that returns what it is given: Ray's own round trip."""

    def echo(self, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        return inputs


def ray_round_trip(node_id: str, feeds: dict[str, np.ndarray], count: int) -> dict[str, Any]:
    """Median and 90th percentile latency (ms) of ``count`` calls of :class:`Echo` on ``node_id``."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    actor = ray.remote(Echo).options(
        num_cpus=0, scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False)).remote()
    for _ in range(min(50, count)):
        ray.get(actor.echo.remote(feeds))
    samples = []
    for _ in range(count):
        begin = time.perf_counter()
        ray.get(actor.echo.remote(feeds))
        samples.append((time.perf_counter() - begin) * 1e3)
    ray.kill(actor)
    samples.sort()
    return {"median_ms": statistics.median(samples), "p90_ms": samples[int(0.9 * (len(samples) - 1))]}


def log(message: str) -> None:
    print(message, flush=True)


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Every row, inside the namespace (see the module docstring)."""
    host_cores = len(os.sched_getaffinity(0))
    nodes = args.nodes or max(1, host_cores // args.cores_per_node)
    sets = [f"{i * args.cores_per_node}-{(i + 1) * args.cores_per_node - 1}" for i in range(nodes)]
    begin = time.perf_counter()
    cluster = LocalCluster(nodes=nodes, cpus=args.cores_per_node, gpus=1 if args.gpu_node else 0,
                           core_sets=sets, own_machine=args.own_machine).start()
    log(f"cluster: {nodes} nodes of {args.cores_per_node} cores ({', '.join(sets)}) on 127.0.0.1, "
        f"up in {time.perf_counter() - begin:.1f} s; host cores {host_cores}")
    os.environ["RAY_ADDRESS"] = cluster.address
    try:
        import inferplex as ov

        core = ov.Core()
        model, feeds = matmul_model(args.hidden, args.layers, args.batch)
        devices = [d for d in core.available_devices if d.startswith("RAY.")]
        return rows(core, model, feeds, devices, args)
    finally:
        import ray

        ray.shutdown()
        cluster.stop()


def rows(core: Any, model: ModelProto, feeds: dict[str, np.ndarray], devices: list[str],
         args: argparse.Namespace) -> dict[str, Any]:
    result: dict[str, Any] = {"devices": devices, "args": vars(args)}
    latency_hint = {"PERFORMANCE_HINT": "LATENCY"}
    one = one_at_a_time(core, model, "CPU", latency_hint, feeds, max(5, args.latency // 20))
    log(f"model: {args.layers} x MatMul {args.batch}x{args.hidden}x{args.hidden}: "
        f"{one['median_ms']:.2f} ms per request on the local CPU (latency hint)")
    result["model_ms"] = one["median_ms"]
    alone = [throughput(core, model, device, {}, feeds, args.seconds) for device in devices]
    for row in alone:
        log(f"  {row['device']:<10} alone        {row['rps']:9.1f} req/s  ({row['in_flight']} in flight)")
    multi = throughput(core, model, f"MULTI:{','.join(devices)}", {}, feeds, args.seconds)
    total = sum(row["rps"] for row in alone)
    log(f"  MULTI over {len(devices)} nodes   {multi['rps']:9.1f} req/s  ({multi['in_flight']} in flight)  "
        f"MULTI / sum of nodes alone = {multi['rps'] / total:.2f}  (target >= 0.9)")
    cumulative = {"PERFORMANCE_HINT": "CUMULATIVE_THROUGHPUT"}
    auto_ray = throughput(core, model, "AUTO:RAY", cumulative, feeds, args.seconds)
    auto_local = throughput(core, model, "AUTO:-RAY", cumulative, feeds, args.seconds)
    log(f"  AUTO:RAY             {auto_ray['rps']:9.1f} req/s  on {','.join(auto_ray['execution_devices'])}")
    log(f"  local AUTO:-RAY      {auto_local['rps']:9.1f} req/s  on "
        f"{','.join(auto_local['execution_devices'])}  AUTO:RAY / local AUTO = "
        f"{auto_ray['rps'] / auto_local['rps']:.2f}")
    tiny, tiny_feeds = matmul_model(16, 1, 1)
    node_cpu = {"NODE_DEVICE": "CPU", "NODE_PROPERTIES": {"PERFORMANCE_HINT": "LATENCY"}}
    remote = one_at_a_time(core, tiny, "RAY.0", node_cpu, tiny_feeds, args.latency)
    local = one_at_a_time(core, tiny, "CPU", latency_hint, tiny_feeds, args.latency)
    bare = ray_round_trip(core.get_property("RAY.0", "DEVICE_ID"), tiny_feeds, args.latency)
    log(f"  tiny model, one request at a time: RAY.0 {remote['median_ms']:.3f} ms "
        f"(p90 {remote['p90_ms']:.3f}), local CPU {local['median_ms']:.3f} ms (p90 {local['p90_ms']:.3f}): "
        f"a remote call adds {remote['median_ms'] - local['median_ms']:.3f} ms "
        f"({remote['median_ms'] / local['median_ms']:.1f}x)")
    log(f"  bare Ray actor round trip to the same node: {bare['median_ms']:.3f} ms "
        f"(p90 {bare['p90_ms']:.3f}); RAY.0 / bare Ray = {remote['median_ms'] / bare['median_ms']:.2f}")
    result.update(alone=alone, multi=multi, multi_over_sum=multi["rps"] / total, auto_ray=auto_ray,
                  auto_local=auto_local, auto_ratio=auto_ray["rps"] / auto_local["rps"],
                  remote_latency=remote, local_latency=local, ray_round_trip=bare,
                  remote_overhead_ms=remote["median_ms"] - local["median_ms"])
    return result


_FULL: dict[str, Any] = {"nodes": 0, "cores_per_node": 4, "hidden": 1024, "layers": 8, "batch": 16,
                         "seconds": 8.0, "latency": 1000}
_QUICK: dict[str, Any] = {"nodes": 2, "cores_per_node": 1, "hidden": 512, "layers": 4, "batch": 8,
                          "seconds": 3.0, "latency": 300}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="2 nodes of 1 core, a small model, short runs")
    parser.add_argument("--nodes", type=int, help="CPU nodes (default: host cores / cores per node)")
    parser.add_argument("--cores-per-node", type=int)
    parser.add_argument("--gpu-node", action="store_true", help="the last node also holds the GPU")
    parser.add_argument("--hidden", type=int)
    parser.add_argument("--layers", type=int)
    parser.add_argument("--batch", type=int)
    parser.add_argument("--seconds", type=float, help="per throughput row")
    parser.add_argument("--latency", type=int, help="requests per latency row")
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
        done = rerun_in_namespace([sys.executable, __file__, *sys.argv[1:]], timeout=3600, env=env)
        print(done.stdout, end="")
        if done.returncode != 0:
            print(done.stderr[-4000:], file=sys.stderr)
        sys.exit(done.returncode)
    result = run(args)
    if os.environ.get("OUT"):
        (Path(os.environ["OUT"]) / "ray_cluster.json").write_text(json.dumps(result, indent=2, default=str))


if __name__ == "__main__":
    main()
