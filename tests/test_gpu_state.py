"""What a GPU program keeps, and what it leaves behind, on emulated GPUs (torch's CPU device).

Per-shape state must grow with the distinct input shapes seen (up to a bound),
never with the number of requests; closing or dropping a compiled model must
free its lowerings (and the source torch.fx generated for them) and its
threads; and torch's process-wide switches must read, after inferplex ran, as
the user set them.  Results are checked against numpy.
"""

from __future__ import annotations

import gc
import linecache
import threading
import tracemalloc
from collections.abc import Iterator
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import inferplex as ov

torch = pytest.importorskip("torch")

_WEIGHT = np.random.default_rng(0).standard_normal((8, 8)).astype(np.float32)


@pytest.fixture(scope="module")
def core(emulated_core: ov.Core) -> ov.Core:
    return emulated_core


def _reshape_model() -> onnx.ModelProto:
    """``(x @ W).reshape(batch, -1)`` with the batch read at run time (Shape -> Gather -> Concat ->
    Reshape): shape arithmetic on a dynamic dim, so the GPU lowers it once per input signature."""
    consts = {"zero": np.array(0, np.int64), "axes": np.array([0], np.int64),
              "rest": np.array([-1], np.int64)}
    nodes = [
        helper.make_node("Shape", ["x"], ["shape"]),
        helper.make_node("Gather", ["shape", "zero"], ["batch"], axis=0),
        helper.make_node("Unsqueeze", ["batch", "axes"], ["batch1"]),
        helper.make_node("Concat", ["batch1", "rest"], ["target"], axis=0),
        helper.make_node("MatMul", ["x", "w"], ["m"]),
        helper.make_node("Reshape", ["m", "target"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes, "reshape", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", None])],
        [numpy_helper.from_array(_WEIGHT, "w"), *(numpy_helper.from_array(v, k) for k, v in consts.items())])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _feeds(batches: range) -> list[dict[str, np.ndarray]]:
    rng = np.random.default_rng(1)
    return [{"x": rng.standard_normal((b, 4, 8)).astype(np.float32)} for b in batches]


def _expected(feed: dict[str, np.ndarray]) -> np.ndarray:
    x = feed["x"]
    return (x @ _WEIGHT).reshape(x.shape[0], -1)


def _statistics(compiled: Any) -> Any:
    return compiled.get_property("GPU_PROGRAM_STATISTICS")


def test_per_shape_state_grows_with_distinct_shapes_not_with_requests(core: ov.Core) -> None:
    """1,500 requests over 20 shapes: after the first pass over them, no new generated source
    and no retained memory however many requests follow (pass 2 against pass 5)."""
    compiled = core.compile_model(_reshape_model(), "GPU.0")
    feeds = _feeds(range(1, 21))

    def one_pass() -> None:  # 300 requests, 15 of each shape
        for _ in range(15):
            for feed in feeds:
                compiled(feed)

    for feed in feeds:
        np.testing.assert_allclose(compiled(feed)["y"], _expected(feed), rtol=1e-5, atol=1e-5)
    one_pass()
    one_pass()
    gc.collect()
    lines = len(linecache.cache)
    tracing = tracemalloc.is_tracing()
    if not tracing:
        tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    for _ in range(3):
        one_pass()
    gc.collect()
    grown = tracemalloc.get_traced_memory()[0] - before
    if not tracing:
        tracemalloc.stop()
    assert len(linecache.cache) <= lines + 2  # a lowering per request left ~900 entries here
    assert grown < 256 * 1024, f"{grown} bytes retained over 900 requests of known shapes"
    stats = _statistics(compiled)
    assert sorted(v.signature for v in stats.shape_variants) == [((b, 4, 8),) for b in range(1, 21)]
    assert stats.shape_cache_size >= 20
    for feed in feeds[::7]:  # still right after all that
        np.testing.assert_allclose(compiled(feed)["y"], _expected(feed), rtol=1e-5, atol=1e-5)
    compiled.release()


def test_the_shape_cache_keeps_the_most_recent_shapes_and_close_frees_everything(
        core: ov.Core, monkeypatch: pytest.MonkeyPatch) -> None:
    from inferplex.devices.gpu import program

    monkeypatch.setattr(program, "SHAPE_CACHE_SIZE", 4)
    core.compile_model(_reshape_model(), "GPU.0").release()  # lazy imports and warnings done
    gc.collect()
    lines = len(linecache.cache)
    compiled = core.compile_model(_reshape_model(), "GPU.0")
    feeds = _feeds(range(1, 7))
    for _ in range(2):
        for feed in feeds:
            np.testing.assert_allclose(compiled(feed)["y"], _expected(feed), rtol=1e-5, atol=1e-5)
    stats = _statistics(compiled)
    assert stats.shape_cache_size == 4
    assert [v.signature for v in stats.shape_variants] == [((b, 4, 8),) for b in (3, 4, 5, 6)]
    gc.collect()
    assert len(linecache.cache) <= lines + 1 + 4  # the generic lowering and the 4 kept, no more

    compiled.release()
    compiled.release()  # idempotent
    gc.collect()
    assert len(linecache.cache) <= lines
    stats = _statistics(compiled)
    assert stats.closed and stats.shape_variants == () and stats.weight_bytes == 0
    assert all(w.captured_signatures == () and w.staging_buffers == 0 for w in stats.workers)
    with pytest.raises(ov.errors.InferenceError, match=r"closed|released"):
        compiled(feeds[0])


def test_dropped_and_released_models_leave_no_threads_and_no_generated_source(core: ov.Core) -> None:
    model = _reshape_model()
    feeds = _feeds(range(1, 4))
    core.compile_model(model, "GPU.0").release()
    gc.collect()
    threads, lines = threading.active_count(), len(linecache.cache)
    for index in range(30):
        compiled = core.compile_model(model, "GPU.0", {"PERFORMANCE_HINT": "THROUGHPUT"})
        if index % 2:
            queue = ov.AsyncInferQueue(compiled, 2)  # starts the program's worker threads
            results: dict[int, np.ndarray] = {}

            def keep(request: Any, i: int, out: dict[int, np.ndarray] = results) -> None:
                out[i] = np.array(request.results["y"])

            queue.set_callback(keep)
            for i, feed in enumerate(feeds):
                queue.start_async(feed, i)
            queue.wait_all()
            for i, feed in enumerate(feeds):
                np.testing.assert_allclose(results[i], _expected(feed), rtol=1e-5, atol=1e-5)
            compiled.release()
            del queue
        else:
            np.testing.assert_allclose(compiled(feeds[0])["y"], _expected(feeds[0]), rtol=1e-5, atol=1e-5)
        del compiled
        gc.collect()
    assert threading.active_count() == threads
    assert len(linecache.cache) <= lines + 2


# --- torch's process-wide switches ----------------------------------------------------------

_LEAVES = ("cuda.matmul", "cudnn.conv", "cudnn.rnn", "mkldnn.matmul", "mkldnn.conv", "mkldnn.rnn")


def _backend(path: str) -> Any:
    target = torch.backends
    for part in path.split("."):
        target = getattr(target, part)
    return target


def _new_api() -> bool:
    return hasattr(torch.backends.cuda.matmul, "fp32_precision")


def _switches() -> dict[str, Any]:
    """Every switch as torch stores it (the fp32_precision leaves where torch has them)."""
    found: dict[str, Any] = {"cudnn.benchmark": torch.backends.cudnn.benchmark}
    if _new_api():
        found.update({leaf: _backend(leaf).fp32_precision for leaf in _LEAVES})
    else:
        found.update(matmul=torch.get_float32_matmul_precision(), cudnn_tf32=torch.backends.cudnn.allow_tf32)
    return found


def _set_switches(values: dict[str, Any]) -> None:
    torch.backends.cudnn.benchmark = values["cudnn.benchmark"]
    if _new_api():
        for leaf in _LEAVES:
            _backend(leaf).fp32_precision = values[leaf]
    else:
        torch.set_float32_matmul_precision(values["matmul"])
        torch.backends.cudnn.allow_tf32 = values["cudnn_tf32"]


@pytest.fixture
def own_torch_switches() -> Iterator[None]:
    """The test sets torch's switches as a user would; they are put back after it."""
    saved = _switches()
    yield
    _set_switches(saved)


def _legacy_reading() -> tuple[Any, ...]:
    return (torch.get_float32_matmul_precision(), torch.backends.cuda.matmul.allow_tf32,
            torch.backends.cudnn.allow_tf32, torch.backends.cudnn.benchmark)


@pytest.mark.parametrize(("precision", "cudnn_tf32"), [("medium", False), ("high", True)])
def test_compiling_and_running_leave_the_users_torch_switches_as_they_were(
        core: ov.Core, own_torch_switches: None, precision: str, cudnn_tf32: bool) -> None:
    torch.set_float32_matmul_precision(precision)  # TF32 (and bf16 on oneDNN for "medium") allowed
    torch.backends.cudnn.allow_tf32 = cudnn_tf32
    torch.backends.cudnn.benchmark = False  # inferplex autotunes: the opposite
    legacy, stored = _legacy_reading(), _switches()
    assert legacy[1] is True  # matmul TF32 on: not the GPU device's f32
    compiled = core.compile_model(_reshape_model(), "GPU.0", {"PERFORMANCE_HINT": "THROUGHPUT"})
    feeds = _feeds(range(1, 5))
    for feed in feeds:
        np.testing.assert_allclose(compiled(feed)["y"], _expected(feed), rtol=1e-5, atol=1e-5)
    queue = ov.AsyncInferQueue(compiled, 2)  # runs from two threads at once share one scope
    for i, feed in enumerate(feeds * 4):
        queue.start_async(feed, i)
    queue.wait_all()
    compiled.release()
    assert _legacy_reading() == legacy
    assert _switches() == stored


def test_the_settings_scope_sets_exact_f32_inside_and_gives_the_users_values_back(
        own_torch_switches: None) -> None:
    from inferplex.devices.gpu.settings import TorchSettingsScope

    torch.set_float32_matmul_precision("medium")
    torch.backends.cudnn.benchmark = False
    before = _switches()
    scope = TorchSettingsScope()

    def ours() -> bool:
        exact = (all(_backend(leaf).fp32_precision == "ieee" for leaf in _LEAVES) if _new_api()
                 else torch.get_float32_matmul_precision() == "highest")
        return exact and torch.backends.cudnn.benchmark is True

    with scope.scope():
        assert ours() and scope.active
        entered = threading.Event()

        def nested() -> None:  # another thread's run, inside and out while this one goes on
            with scope.scope():
                entered.set()

        other = threading.Thread(target=nested)
        other.start()
        other.join()
        assert entered.is_set() and ours()  # the first run in is the last out: still ours
    assert not scope.active and _switches() == before
    if _new_api():
        with scope.scope():
            torch.backends.cuda.matmul.fp32_precision = "none"  # the user's code changed it meanwhile
        assert torch.backends.cuda.matmul.fp32_precision == "none"  # theirs stays
        assert torch.backends.cudnn.benchmark is False


def test_the_capture_thread_ends_with_its_last_lease() -> None:
    from inferplex.devices.gpu.graphs import CaptureThread

    captures = CaptureThread()
    before = set(threading.enumerate())  # other tests' threads may come and go meanwhile: count ours

    def started() -> list[threading.Thread]:
        return [t for t in threading.enumerate() if t not in before and t.name == "inferplex-capture"]

    first, second = captures.lease(), captures.lease()
    assert not captures.running and not started()  # started by the first capture, not by a lease
    assert captures.call(lambda: threading.current_thread().name) == "inferplex-capture"
    thread = started()
    assert captures.running and len(thread) == 1
    first()
    first()  # idempotent: the second lease still holds the thread
    assert captures.running
    second()
    thread[0].join(5)
    assert not captures.running and not thread[0].is_alive()
    third = captures.lease()  # a later program starts it again on its first capture
    assert captures.call(lambda: 42) == 42
    again = started()
    third()
    for t in again:
        t.join(5)
    assert not any(t.is_alive() for t in again)
