"""The GPU device on a real CUDA GPU (run with ``pytest -m gpu`` on the GPU machine).

CUDA-graph replay must equal eager execution, results must match ONNX Runtime
(f32 at rtol 1e-4, with TF32 off), f16/bf16 stay within the documented bounds,
device tensors pass through without a host copy, and workers run concurrently.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import onnx
import pytest
from torch_export import export_onnx

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]


def _export(net: torch.nn.Module, example: torch.Tensor) -> onnx.ModelProto:
    """``net`` exported to ONNX with input ``x`` (dynamic batch) and output ``y``."""
    return export_onnx(net, (example,), ["x"], {"x": {0: "batch"}})


def _cnn_model() -> onnx.ModelProto:
    return _export(_cnn_model_module(), torch.randn(2, 3, 32, 32))


def _cnn_model_module() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Conv2d(3, 16, 3, padding=1),
        torch.nn.BatchNorm2d(16),
        torch.nn.ReLU(),
        torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(16, 32, 3, stride=2, padding=1),
        torch.nn.GELU(),
        torch.nn.Upsample(scale_factor=2),
        torch.nn.AdaptiveAvgPool2d(1),
        torch.nn.Flatten(),
        torch.nn.Linear(32, 10),
        torch.nn.Softmax(-1),
    ).eval()


def _program(config: dict[str, Any] | None = None, device: str = "GPU.0") -> Any:
    import onnx_ir as ir

    from inferplex.devices.gpu.plugin import GpuPlugin

    return GpuPlugin().compile(ir.serde.deserialize_model(_cnn_model()), device, config or {})


def _reference(feeds: dict[str, np.ndarray]) -> np.ndarray:
    import onnxruntime as ort

    session = ort.InferenceSession(_cnn_model().SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, feeds)[0]


def _statistics(program: Any) -> Any:
    """What the program holds now (its GPU_PROGRAM_STATISTICS property)."""
    return program.get_property("GPU_PROGRAM_STATISTICS")


def _captured(program: Any) -> list[tuple[Any, ...]]:
    """Per worker, the input signatures it holds a CUDA graph for (least recently used first)."""
    return [worker.captured_signatures for worker in _statistics(program).workers]


def _feeds(batch: int = 4, seed: int = 0) -> dict[str, np.ndarray]:
    return {"x": np.random.default_rng(seed).standard_normal((batch, 3, 32, 32)).astype(np.float32)}


def _on_every_worker(program: Any, count: int, run: Callable[[int, int], np.ndarray]) -> list[np.ndarray]:
    """``run(i, worker)`` for i in ``range(count)`` on worker ``i % num_workers``, each worker on a
    thread of its own: a worker serves one request at a time (the executor's contract), and two
    threads sharing one would overwrite each other's graph inputs."""
    workers = program.num_workers

    def serve(worker: int) -> list[tuple[int, np.ndarray]]:
        return [(i, run(i, worker)) for i in range(worker, count, workers)]

    with ThreadPoolExecutor(workers) as pool:
        done = dict(pair for pairs in pool.map(serve, range(workers)) for pair in pairs)
    return [done[i] for i in range(count)]


def _run_feeds(program: Any, feeds: list[dict[str, np.ndarray]]) -> list[np.ndarray]:
    return _on_every_worker(program, len(feeds), lambda i, worker: program.run(feeds[i], worker=worker)["y"])


def test_cuda_graph_replay_equals_eager() -> None:
    graphs, eager = _program(), _program({"CUDA_GRAPHS": False})
    assert graphs.get_property("CUDA_GRAPHS") is True
    for seed in range(3):  # capture, then replays with new data
        feeds = _feeds(seed=seed)
        np.testing.assert_array_equal(graphs.run(feeds)["y"], eager.run(feeds)["y"])
    assert _captured(graphs)[0] == (((4, 3, 32, 32),),), "no CUDA graph was captured"
    assert _captured(eager)[0] == ()


def test_f32_matches_onnx_runtime_on_cuda() -> None:
    program = _program()
    for batch in (1, 5):
        feeds = _feeds(batch)
        np.testing.assert_allclose(program.run(feeds)["y"], _reference(feeds), rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize(("precision", "bound"), [("f16", 2e-2), ("bf16", 1e-1)])
def test_reduced_precision_bounds_on_cuda(precision: str, bound: float) -> None:
    program = _program({"INFERENCE_PRECISION_HINT": precision})
    feeds = _feeds()
    out = program.run(feeds)["y"]
    assert out.dtype == np.float32
    assert np.abs(out - _reference(feeds)).max() <= bound


def test_device_tensors_in_and_out() -> None:
    program = _program()
    feeds = _feeds()
    x = torch.from_numpy(feeds["x"]).cuda()
    out = program.run({"x": x}, keep_on_device={"y"})["y"]
    assert out.is_cuda
    first = out.clone()
    program.run(_feeds(seed=5), keep_on_device={"y"})
    torch.testing.assert_close(out, first)  # a kept output is not overwritten by the next replay
    np.testing.assert_allclose(out.cpu().numpy(), _reference(feeds), rtol=1e-4, atol=1e-6)


def test_workers_run_concurrently_and_agree() -> None:
    program = _program({"PERFORMANCE_HINT": "THROUGHPUT"})
    assert program.num_workers == 8
    feeds = [_feeds(seed=s) for s in range(16)]
    results = _run_feeds(program, feeds)
    for got, inputs in zip(results, feeds, strict=True):
        np.testing.assert_allclose(got, _reference(inputs), rtol=1e-4, atol=1e-6)


def test_every_worker_captures_on_the_one_capture_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    """cuDNN autotunes once per thread: captures on one thread autotune once, not once per worker."""
    import threading

    real_graph = torch.cuda.graph
    threads: list[str] = []

    def recording_graph(*args: Any, **kwargs: Any) -> Any:
        threads.append(threading.current_thread().name)
        return real_graph(*args, **kwargs)

    monkeypatch.setattr(torch.cuda, "graph", recording_graph)
    program = _program({"PERFORMANCE_HINT": "THROUGHPUT"})
    feeds = [_feeds(seed=s) for s in range(16)]
    results = _run_feeds(program, feeds)
    assert threads == ["inferplex-capture"] * program.num_workers  # one graph per worker, one thread
    assert all(_captured(program))
    for got, inputs in zip(results, feeds, strict=True):  # replayed from each worker's thread
        np.testing.assert_allclose(got, _reference(inputs), rtol=1e-4, atol=1e-6)
    assert torch.cuda.current_stream() == torch.cuda.default_stream()


def test_static_shapes_are_captured_while_compiling(monkeypatch: pytest.MonkeyPatch) -> None:
    """With every input dim static, each worker's graph is captured before compile returns."""
    static = export_onnx(_cnn_model_module(), (torch.randn(4, 3, 32, 32),), ["x"], {})
    program = _compile(static, {"PERFORMANCE_HINT": "THROUGHPUT"})
    assert program.num_workers == 8
    assert _captured(program) == [(((4, 3, 32, 32),),)] * 8
    later: list[int] = []
    real_graph = torch.cuda.graph
    monkeypatch.setattr(torch.cuda, "graph", lambda *a, **k: (later.append(1), real_graph(*a, **k))[1])
    feeds = [_feeds(seed=s) for s in range(16)]
    results = _run_feeds(program, feeds)
    assert later == []  # no request captured: each replayed its worker's graph
    for got, inputs in zip(results, feeds, strict=True):
        np.testing.assert_allclose(got, _reference(inputs), rtol=1e-4, atol=1e-6)
    eager = _compile(static, {"PERFORMANCE_HINT": "THROUGHPUT", "ENABLE_PROFILING": True})
    assert not any(_captured(eager))  # profiling runs eagerly: no warm-up


def test_low_queue_throttle_waits_on_blocking_events_with_the_same_results(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """GPU_QUEUE_THROTTLE LOW: a worker waits for its stream on a blocking event, never spinning on it."""
    program = _program({"PERFORMANCE_HINT": "THROUGHPUT", "GPU_QUEUE_THROTTLE": "LOW"})
    assert program.get_property("GPU_QUEUE_THROTTLE") == "LOW"
    assert all(worker.blocking_waits for worker in _statistics(program).workers)
    spins: list[int] = []
    real_synchronize = torch.cuda.Stream.synchronize
    monkeypatch.setattr(torch.cuda.Stream, "synchronize",
                        lambda stream: (spins.append(1), real_synchronize(stream))[1])
    feeds = [_feeds(seed=s) for s in range(32)]
    results = _run_feeds(program, feeds)
    for got, inputs in zip(results, feeds, strict=True):
        np.testing.assert_allclose(got, _reference(inputs), rtol=1e-4, atol=1e-6)
    captures = sum(bool(signatures) for signatures in _captured(program))
    assert len(spins) <= 2 * captures  # only around each capture; every run's wait is a blocking event
    spins.clear()
    _program({"PERFORMANCE_HINT": "THROUGHPUT"}).run(_feeds())
    assert spins  # the default (MEDIUM) waits on the stream itself


def test_a_run_leaves_the_calling_threads_stream_as_it_was() -> None:
    program, feeds = _program(), _feeds()
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        got = program.run(feeds)["y"]
        assert torch.cuda.current_stream() == side
    assert torch.cuda.current_stream() == torch.cuda.default_stream()
    np.testing.assert_allclose(got, _reference(feeds), rtol=1e-4, atol=1e-6)


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two CUDA GPUs")
def test_a_run_on_another_gpu_leaves_the_current_device_as_it_was() -> None:
    program, feeds = _program(device="GPU.1"), _feeds()
    torch.cuda.set_device(0)
    got = program.run(feeds)["y"]
    assert torch.cuda.current_device() == 0
    assert torch.cuda.current_stream(1) == torch.cuda.default_stream(1)
    np.testing.assert_allclose(got, _reference(feeds), rtol=1e-4, atol=1e-6)


def test_profiling_uses_cuda_events() -> None:
    program = _program({"ENABLE_PROFILING": True})
    program.run(_feeds())
    records = program.profiling_info(0)
    assert {"Conv", "Transfer"} <= {r.node_type for r in records}
    assert all(r.exec_type in ("torch.cuda", "copy", "constant folded") for r in records)


# --- specialization, layouts, graph cache --------------------------------------------


def _compile(model: onnx.ModelProto, config: dict[str, Any] | None = None) -> Any:
    import onnx_ir as ir

    from inferplex.devices.gpu.plugin import GpuPlugin

    return GpuPlugin().compile(ir.serde.deserialize_model(model), "GPU.0", config or {})


class _Block(torch.nn.Module):
    """A BERT-like encoder block; exported with a dynamic batch, its shape arithmetic is computed."""

    def __init__(self, dim: int = 64, heads: int = 4) -> None:
        super().__init__()
        self.heads = heads
        self.qkv, self.proj = torch.nn.Linear(dim, 3 * dim), torch.nn.Linear(dim, dim)
        self.norm1, self.norm2 = torch.nn.LayerNorm(dim), torch.nn.LayerNorm(dim)
        self.mlp = torch.nn.Sequential(
            torch.nn.Linear(dim, 4 * dim), torch.nn.GELU(), torch.nn.Linear(4 * dim, dim)
        )

    def forward(self, x: Any) -> Any:
        b, t, d = x.shape
        q, k, v = self.qkv(x).reshape(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        attn = torch.softmax(q @ k.transpose(-1, -2) / (d // self.heads) ** 0.5, -1)
        x = self.norm1(x + self.proj((attn @ v).transpose(1, 2).reshape(b, t, d)))
        return self.norm2(x + self.mlp(x))


def _block_model() -> onnx.ModelProto:
    torch.manual_seed(0)
    return _export(_Block().eval(), torch.randn(2, 16, 64))


def _block_feeds(batch: int, seed: int = 0) -> dict[str, np.ndarray]:
    return {"x": np.random.default_rng(seed).standard_normal((batch, 16, 64)).astype(np.float32)}


def test_specialized_block_is_captured_and_equals_eager() -> None:
    model = _block_model()
    graphs, eager = _compile(model), _compile(model, {"CUDA_GRAPHS": False})
    for batch in (1, 3, 1):
        feeds = _block_feeds(batch, seed=batch)
        np.testing.assert_allclose(graphs.run(feeds)["y"], eager.run(feeds)["y"], rtol=1e-5, atol=1e-5)
    assert _captured(graphs)[0] == (((3, 16, 64),), ((1, 16, 64),)), "specialized runs were not captured"
    stats = _statistics(graphs)
    assert not stats.capturable and all(v.capturable for v in stats.shape_variants)


def test_concurrent_workers_with_different_shapes() -> None:
    model = _block_model()
    program, eager = (
        _compile(model, {"PERFORMANCE_HINT": "THROUGHPUT"}),
        _compile(model, {"CUDA_GRAPHS": False}),
    )
    results = _on_every_worker(program, 24, lambda i, worker: program.run(_block_feeds(1 + i % 5, i),
                                                                          worker=worker)["y"])
    for i, got in enumerate(results):
        np.testing.assert_allclose(got, eager.run(_block_feeds(1 + i % 5, i))["y"], rtol=1e-5, atol=1e-5)


def test_channels_last_f16_resnet_block_within_bounds() -> None:
    torch.manual_seed(0)
    net = torch.nn.Sequential(
        torch.nn.Conv2d(3, 32, 7, stride=2, padding=3, bias=False),
        torch.nn.BatchNorm2d(32),
        torch.nn.ReLU(),
        torch.nn.MaxPool2d(3, 2, 1),
        torch.nn.Conv2d(32, 32, 3, padding=1, bias=False),
        torch.nn.BatchNorm2d(32),
        torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(1),
        torch.nn.Flatten(),
        torch.nn.Linear(32, 10),
        torch.nn.Softmax(-1),
    ).eval()
    model = _export(net, torch.randn(2, 3, 64, 64))
    program = _compile(model, {"INFERENCE_PRECISION_HINT": "f16"})
    assert program.get_property("GPU_CHANNELS_LAST") is True
    import onnxruntime as ort

    feeds = {"x": np.random.default_rng(0).standard_normal((4, 3, 64, 64)).astype(np.float32)}
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, feeds
    )[0]
    for _ in range(2):  # capture, then replay
        assert np.abs(program.run(feeds)["y"] - want).max() <= 2e-2


def test_many_shapes_cycle_through_the_graph_cache_safely() -> None:
    from inferplex.devices.gpu.program import GRAPH_CACHE_SIZE

    model = _block_model()
    program, eager = _compile(model), _compile(model, {"CUDA_GRAPHS": False})
    batches = list(range(1, GRAPH_CACHE_SIZE + 4))
    for _ in range(2):
        for batch in batches:
            feeds = _block_feeds(batch, seed=batch)
            out = program.run(feeds, keep_on_device={"y"})["y"]
            np.testing.assert_allclose(program.to_host(out), eager.run(feeds)["y"], rtol=1e-5, atol=1e-5)
    torch.cuda.synchronize()  # an illegal access would surface here at the latest
    stats = _statistics(program)
    assert stats.graph_cache_size == GRAPH_CACHE_SIZE
    assert _captured(program)[0] == tuple(((b, 16, 64),) for b in batches[-GRAPH_CACHE_SIZE:])
    assert len(stats.shape_variants) == len(batches)  # every lowering kept: within SHAPE_CACHE_SIZE
    program.close()
    assert _statistics(program).closed and _captured(program) == [()]


def test_to_host_and_to_native_on_cuda() -> None:
    program = _program()
    feeds = _feeds()
    native = program.to_native(feeds["x"])
    assert native.is_cuda
    np.testing.assert_array_equal(program.to_host(native), feeds["x"])
    out = program.run({"x": native}, keep_on_device={"y"})["y"]
    np.testing.assert_allclose(program.to_host(out), _reference(feeds), rtol=1e-4, atol=1e-6)


def _read(path: Any) -> bytes:
    try:
        return bytes(path.read_bytes())
    except OSError:  # the process ended meanwhile
        return b""


def _parent_of(entry: Any) -> int:
    stat = _read(entry / "stat").rsplit(b")", 1)
    return int(stat[1].split()[1]) if len(stat) == 2 else -1


def test_a_gpu_served_from_a_worker_process_gives_the_same_results() -> None:
    """MULTI_WORKER_PROCESSES=YES on CUDA: the GPU member runs in its own process, results unchanged."""
    import os
    from pathlib import Path

    import inferplex as ov

    def worker_processes() -> set[str]:  # this process's children serving a device program
        return {entry.name for entry in Path("/proc").iterdir() if entry.name.isdigit()
                and _parent_of(entry) == os.getpid()
                and b"inferplex.devices.remote.child" in _read(entry / "cmdline")}

    core = ov.Core()
    before = worker_processes()
    assert core.get_property("GPU.0", "GIL_BOUND") is True
    # f32 on the CPU too: its OpenVINO engine runs bf16 by default on CPUs with AMX.
    config = {"PERFORMANCE_HINT": "CUMULATIVE_THROUGHPUT", "MULTI_WORKER_PROCESSES": "YES",
              "DEVICE_PROPERTIES": {"CPU": {"INFERENCE_PRECISION_HINT": "f32"}}}
    compiled = core.compile_model(_cnn_model(), "AUTO:GPU.0,CPU", config)
    try:
        assert len(worker_processes() - before) == 1  # GPU.0's; the host device stays in this process
        queue = ov.AsyncInferQueue(compiled)
        results: dict[int, np.ndarray] = {}
        queue.set_callback(lambda request, index: results.__setitem__(index, np.array(request.results["y"])))
        feeds = [_feeds(batch=1 + index % 5, seed=index) for index in range(200)]
        for index, feed in enumerate(feeds):
            queue.start_async(feed, index)
        queue.wait_all()
        assert sorted(results) == list(range(200))
        for index, feed in enumerate(feeds):
            np.testing.assert_allclose(results[index], _reference(feed), rtol=1e-4, atol=1e-5)
        assert compiled.get_property("DEVICE_STATISTICS")["GPU.0"]["requests"] > 0
    finally:
        compiled.release()


@pytest.fixture
def pinned() -> Iterator[tuple[Any, Any, Callable[[], None]]]:
    """A program, 1 MiB of host memory page-locked for it (as a worker process's buffers are), and unpin."""
    import mmap

    program = _program()
    memory = mmap.mmap(-1, 1 << 20)
    undo = program.pin_host_memory(np.frombuffer(memory, np.uint8).ctypes.data, len(memory))
    assert undo is not None
    done: list[bool] = []

    def unpin() -> None:
        if not done:
            done.append(True)
            undo()

    yield program, memory, unpin
    unpin()
    program.close()
    with contextlib.suppress(BufferError):  # a failed test's traceback may still hold a view
        memory.close()


def test_pinned_host_memory_goes_to_the_gpu_without_a_staging_copy(pinned) -> None:  # noqa: ANN001
    """pin_host_memory: inputs there are read by the GPU directly."""
    program, memory, unpin = pinned
    feeds = _feeds()
    view = np.frombuffer(memory, np.float32, feeds["x"].size).reshape(feeds["x"].shape)
    view[...] = feeds["x"]
    assert torch.from_numpy(view).is_pinned()
    for _ in range(3):  # capture, then replays
        np.testing.assert_allclose(program.run({"x": view})["y"], _reference(feeds), rtol=1e-4, atol=1e-5)
    assert _statistics(program).workers[0].staging_buffers == 0  # read in place: nothing staged
    unpin()
    assert not torch.from_numpy(view).is_pinned()


def test_a_run_queued_behind_another_on_the_same_worker_gets_its_own_results() -> None:
    """run_into's ``queued``: called while the run is still queued on the worker's stream (not after
    it ended), and the worker's next run queued behind it; each run gets its own inputs' results
    (ONNX Runtime's)."""
    import torch

    program = _program({"PERFORMANCE_HINT": "LATENCY"})
    feeds = [_feeds(seed=s) for s in range(4)]
    program.run(feeds[0], worker=0)  # captured
    side = torch.cuda.Stream()
    results: dict[int, np.ndarray] = {}
    order: list[str] = []
    busy_when_handed_on: list[bool] = []

    def chain(index: int, inputs: list[dict[str, Any]]) -> None:
        def queued() -> None:
            order.append(f"queued {index}")
            busy_when_handed_on.append(not side.query())
            if index + 1 < len(inputs):  # the next run starts on this worker before this one returns
                chain(index + 1, inputs)
        results[index] = program.run_into(inputs[index], 0, lambda name, dtype, shape: None, queued)["y"]
        order.append(f"returned {index}")

    with torch.cuda.stream(side):
        inputs = [{"x": torch.from_numpy(feed["x"]).cuda()} for feed in feeds]
        torch.cuda._sleep(200_000_000)  # about 0.1 s of GPU time on the caller's stream
        # Device inputs: the worker's stream waits for the caller's, so every run is queued
        # behind the sleep, and ``side`` still busy means run 0 has not ended.
        chain(0, inputs)
    assert order[:2] == ["queued 0", "queued 1"]  # run 1 was queued behind run 0, which had not returned
    assert busy_when_handed_on[0]  # run 0 handed its worker on before its stream had run it
    for index, feed in enumerate(feeds):
        np.testing.assert_allclose(results[index], _reference(feed), rtol=1e-4, atol=1e-5)


def test_outputs_go_from_the_gpu_straight_into_pinned_host_memory(pinned) -> None:  # noqa: ANN001
    """run_into with page-locked memory: the GPU copies outputs there, equal to ONNX Runtime's."""
    program, memory, _ = pinned
    feeds = _feeds()

    given: list[np.ndarray] = []

    def host_outputs(name: str, dtype: Any, shape: tuple[int, ...]) -> np.ndarray:
        given[:] = [np.frombuffer(memory, dtype, int(np.prod(shape))).reshape(shape)]
        given[0][...] = np.nan
        return given[0]

    for _ in range(3):  # capture, then replays
        out = program.run_into(feeds, 0, host_outputs)["y"]
        assert out is given[0] and torch.from_numpy(out).is_pinned()
        np.testing.assert_allclose(out, _reference(feeds), rtol=1e-4, atol=1e-5)


class _ResidualBlocks(torch.nn.Module):
    """Conv-BN-Relu, then a block whose shortcut Conv comes after its main branch (the Add's other
    input is made after the Conv it ends), then Conv + bias + Relu without a BatchNormalization."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = torch.nn.Sequential(torch.nn.Conv2d(3, 16, 3, padding=1, bias=False),
                                        torch.nn.BatchNorm2d(16), torch.nn.ReLU())
        self.main = torch.nn.Sequential(torch.nn.Conv2d(16, 32, 3, stride=2, padding=1, bias=False),
                                        torch.nn.BatchNorm2d(32))
        self.shortcut = torch.nn.Sequential(torch.nn.Conv2d(16, 32, 1, stride=2, bias=False),
                                            torch.nn.BatchNorm2d(32))
        self.head = torch.nn.Conv2d(32, 8, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stem(x)
        x = torch.relu(self.main(x) + self.shortcut(x))
        return torch.relu(self.head(x))


@pytest.mark.parametrize(("precision", "bound"), [("f32", 1e-4), ("f16", 2e-2), ("bf16", 1e-1)])
@pytest.mark.parametrize("profiling", [False, True])
def test_conv_bias_add_relu_run_fused_and_equal_onnx_runtime(precision: str, bound: float,
                                                             profiling: bool) -> None:
    import onnxruntime as ort

    import inferplex as ov

    torch.manual_seed(0)
    net = _ResidualBlocks().eval()
    for module in net.modules():  # BatchNormalization statistics other than the identity
        if isinstance(module, torch.nn.BatchNorm2d):
            module.running_mean.uniform_(-0.5, 0.5)
            module.running_var.uniform_(0.5, 1.5)
    model = _export(net, torch.randn(2, 3, 16, 16))
    compiled = ov.Core().compile_model(model.SerializeToString(), "GPU.0", {
        "INFERENCE_PRECISION_HINT": precision, "ENABLE_PROFILING": profiling})
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    request = compiled.create_infer_request()
    for seed in range(3):  # warm-up, capture, replay
        feeds = {"x": np.random.default_rng(seed).standard_normal((2, 3, 16, 16)).astype(np.float32)}
        want = session.run(None, feeds)[0]
        got = request.infer(feeds)[0]
        np.testing.assert_allclose(got, want, rtol=bound, atol=bound)
    if profiling:  # the Relus ran inside their Convs' calls: the Convs are timed, nothing else is lost
        types = {r.node_type for r in request.get_profiling_info()}
        assert "Conv" in types
    compiled.release()


def test_fused_convolutions_on_every_worker_under_async_load_equal_onnx_runtime() -> None:
    import onnxruntime as ort

    import inferplex as ov

    torch.manual_seed(1)
    model = _export(_ResidualBlocks().eval(), torch.randn(4, 3, 16, 16))
    compiled = ov.Core().compile_model(model.SerializeToString(), "GPU.0", {
        "INFERENCE_PRECISION_HINT": "f16", "PERFORMANCE_HINT": "THROUGHPUT", "TORCH_COMPILE": "NO"})
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    rngs = [np.random.default_rng(seed) for seed in range(8)]
    feeds = [rng.standard_normal((4, 3, 16, 16)).astype(np.float32) for rng in rngs]
    wants = [session.run(None, {"x": x})[0] for x in feeds]
    got: dict[int, np.ndarray] = {}
    queue = ov.AsyncInferQueue(compiled, 2 * compiled.get_property("OPTIMAL_NUMBER_OF_INFER_REQUESTS"))
    queue.set_callback(lambda request, job: got.__setitem__(job, request.get_output_tensor(0).data.copy()))
    for job in range(400):
        queue.start_async({"x": feeds[job % 8]}, job)
    queue.wait_all()
    assert sorted(got) == list(range(400))
    for job, result in got.items():
        np.testing.assert_allclose(result, wants[job % 8], rtol=2e-2, atol=2e-2)
    compiled.release()
