"""The life of compiled models and requests at its edges: dropping, releasing, exiting, faults.

Threads and memory return when compiled models go; a program exits with
requests in flight, each ending once, and a hung device cannot hold it; plugin
faults reach the user as inferplex errors naming the plugin.
"""

from __future__ import annotations

import gc
import itertools
import os
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import onnx_ir as ir
import pytest
from hooked_plugin import HookedPlugin, hooked_compile
from onnx import TensorProto, helper

import inferplex as ov
from inferplex.errors import CompileError, InferenceError, PluginError

from conftest import make_model, ort_run

TESTS = Path(__file__).parent
SRC = TESTS.parent / "src"
FLOAT = TensorProto.FLOAT


def _model() -> Any:
    return make_model([helper.make_node("Add", ["x", "x"], ["s"], name="add"),
                       helper.make_node("Relu", ["s"], ["y"], name="relu")],
                      [("x", FLOAT, [2, 8])], [("y", FLOAT, [2, 8])])


MODEL = _model()
X = np.linspace(-1, 1, 16, dtype=np.float32).reshape(2, 8)
EXPECTED = ort_run(MODEL, {"x": X})[0]


def _rss_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _settled_thread_count(target: int, seconds: float = 10.0) -> int:
    """Threads alive once those ending have ended (or the deadline passed)."""
    deadline = time.monotonic() + seconds
    while threading.active_count() > target and time.monotonic() < deadline:
        gc.collect()
        time.sleep(0.05)
    return threading.active_count()


def _use_and_drop(core: ov.Core, device: str, release: bool) -> None:
    compiled = core.compile_model(MODEL, device)
    queue = ov.AsyncInferQueue(compiled, 2)
    for _ in range(4):
        queue.start_async({"x": X})
    queue.wait_all()
    np.testing.assert_allclose(queue[0].results["y"], EXPECTED)
    if release:
        compiled.release()


@pytest.mark.parametrize("release", [True, False], ids=["release", "garbage-collected"])
@pytest.mark.parametrize("device", ["CPU", "HETERO:GPU.0,CPU"])
def test_dropped_compiled_models_return_threads_and_memory(emulated_core: ov.Core, device: str,
                                                           release: bool) -> None:
    _use_and_drop(emulated_core, device, release)  # first use: lazy imports, engine pools
    gc.collect()
    threads, rss = _settled_thread_count(0, 0.5), _rss_bytes()
    for _ in range(30):
        _use_and_drop(emulated_core, device, release)
    assert _settled_thread_count(threads) <= threads
    assert _rss_bytes() - rss < 0.10 * rss


def test_release_inside_a_callback_and_results_there(core: ov.Core) -> None:
    compiled = core.compile_model(MODEL, "CPU")
    request = compiled.create_infer_request()
    seen: list[Any] = []
    done = threading.Event()

    def callback(_: Any) -> None:
        seen.append(request.results["y"].copy())  # its own results, inside its callback
        compiled.release()
        done.set()

    request.set_callback(callback)
    request.start_async({"x": X})
    assert done.wait(20)
    request.wait()
    np.testing.assert_allclose(seen[0], EXPECTED)
    with pytest.raises(InferenceError, match="released"):
        compiled.create_infer_request().infer({"x": X})


@pytest.mark.parametrize("device", ["CPU", "GPU.0", "MULTI:GPU.0,CPU", "HETERO:GPU.0,CPU", "AUTO"])
def test_jobs_started_after_a_release_in_a_queue_callback_still_end(emulated_core: ov.Core,
                                                                    device: str) -> None:
    """A callback releases the model while the program goes on feeding its queue: every job
    still ends once and runs its callback (the later ones with an InferenceError), and
    wait_all returns."""
    compiled = emulated_core.compile_model(MODEL, device)
    queue = ov.AsyncInferQueue(compiled, 4)
    ended: dict[int, str] = {}

    def callback(request: ov.InferRequest, userdata: int) -> None:
        try:
            np.testing.assert_allclose(request.results["y"], EXPECTED)
            ended[userdata] = "result"
        except InferenceError:
            ended[userdata] = "error"
        if userdata == 3:
            compiled.release()

    queue.set_callback(callback)
    for job in range(12):
        queue.start_async({"x": X}, job)
    waiting = threading.Thread(target=queue.wait_all, daemon=True)
    waiting.start()
    waiting.join(20)
    assert not waiting.is_alive(), f"wait_all hung; jobs ended: {sorted(ended)}"
    assert sorted(ended) == list(range(12))
    assert ended[3] == "result"
    with pytest.raises(InferenceError, match=r"released|closed"):
        compiled({"x": X})


def test_a_callback_may_wait_for_another_request_of_its_model(core: ov.Core) -> None:
    compiled = core.compile_model(MODEL, "CPU")
    first, second = compiled.create_infer_request(), compiled.create_infer_request()
    outcome: list[Any] = []

    def on_first(_: Any) -> None:
        second.start_async({"x": X})
        second.wait()  # its completion is queued behind this one: the wait must not hang
        outcome.append(second.results["y"])

    first.set_callback(on_first)
    second.set_callback(lambda _: outcome.append("second's callback"))
    first.start_async({"x": X})
    first.wait()
    assert outcome[0] == "second's callback"
    np.testing.assert_allclose(outcome[1], EXPECTED)


def test_with_block_releases(core: ov.Core) -> None:
    with core.compile_model(MODEL, "CPU") as compiled:
        np.testing.assert_allclose(compiled({"x": X})["y"], EXPECTED)
    with pytest.raises(InferenceError, match="released"):
        compiled({"x": X})


class _Broken(HookedPlugin):
    def __init__(self, mode: str) -> None:
        super().__init__(lambda inputs, worker: None)
        self.mode = mode

    def compile(self, model: ir.Model, device: str, config: Mapping[str, Any]) -> Any:
        if self.mode == "raise":
            raise RuntimeError("the device fell over")
        if self.mode == "none":
            return None
        return super().compile(model, device, config)


@pytest.mark.parametrize("device", ["HOOKED", "HETERO:HOOKED,CPU"])
def test_a_plugin_raising_at_compile_is_a_compile_error_naming_it(device: str) -> None:
    core = ov.Core()
    core.register_plugin(_Broken("raise"), "HOOKED")
    with pytest.raises(CompileError, match=r"HOOKED.*_Broken.compile raised RuntimeError: the device fell"):
        core.compile_model(MODEL, device)


@pytest.mark.parametrize("device", ["HOOKED", "HETERO:HOOKED,CPU"])
def test_a_plugin_returning_nothing_is_a_plugin_error(device: str) -> None:
    core = ov.Core()
    core.register_plugin(_Broken("none"), "HOOKED")
    with pytest.raises((PluginError, CompileError), match="must return a DeviceProgram"):
        core.compile_model(MODEL, device)


def test_a_run_that_raises_is_an_inference_error_naming_the_device() -> None:
    def fail(inputs: Mapping[str, Any], worker: int) -> None:
        raise ValueError("bad tensor")

    compiled = hooked_compile(MODEL, None, fail)
    with pytest.raises(InferenceError, match="HOOKED: ValueError: bad tensor"):
        compiled({"x": X})
    request = compiled.create_infer_request()
    request.start_async({"x": X})
    with pytest.raises(InferenceError, match="HOOKED"):
        request.wait()


@pytest.mark.parametrize("device", ["HOOKED", "HETERO:HOOKED,CPU"])
def test_ctrl_c_in_a_synchronous_run_is_not_turned_into_an_inference_error(device: str) -> None:
    """A KeyboardInterrupt raised while ``infer`` runs on the calling thread reaches the caller as
    itself (a loop catching InferenceError must stay stoppable); the request ends and runs again."""
    interrupt = [True]

    def hook(inputs: Mapping[str, Any], worker: int) -> None:
        if interrupt.pop() if interrupt else False:
            raise KeyboardInterrupt

    core = ov.Core()
    core.register_plugin(HookedPlugin(hook), "HOOKED")
    compiled = core.compile_model(MODEL, device)
    request = compiled.create_infer_request()
    with pytest.raises(KeyboardInterrupt):
        request.infer({"x": X})
    np.testing.assert_allclose(request.infer({"x": X})["y"], EXPECTED)


def test_trace_records_each_stage_per_device() -> None:
    core = ov.Core()
    compiled = core.compile_model(MODEL, "CPU", {"ENABLE_TRACE": True})
    queue = ov.AsyncInferQueue(compiled, 2)
    queue.set_callback(lambda request, _: None)
    for _ in range(5):
        queue.start_async({"x": X})
    queue.wait_all()
    trace = compiled.get_property("TRACE")
    spans = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert {e["name"] for e in spans} == {"queued", "run", "callback"}
    assert len({e["args"]["request"] for e in spans}) == 5
    assert all(e["dur"] >= 0 for e in spans)
    with pytest.raises(ov.errors.PropertyError, match="ENABLE_TRACE"):
        core.compile_model(MODEL, "CPU").get_property("TRACE")


@pytest.mark.parametrize("device", ["CPU", "HETERO:GPU.0,CPU"])
def test_each_synchronous_request_is_its_own_on_the_trace(emulated_core: ov.Core, device: str) -> None:
    """Requests made and dropped one after another (infer, compiled(...)) each get a number of
    their own, though a new request object may reuse a dropped one's memory."""
    compiled = emulated_core.compile_model(MODEL, device, {"ENABLE_TRACE": True})
    request = compiled.create_infer_request()
    for _ in range(60):
        request.infer({"x": X})
        compiled({"x": X})
    runs = [e for e in compiled.get_property("TRACE")["traceEvents"]
            if e["ph"] == "X" and e["name"] in ("run", "subgraph 0")]
    assert len(runs) == 120
    assert len({e["args"]["request"] for e in runs}) == 120


def test_hetero_subgraphs_are_their_own_trace_stages(emulated_core: ov.Core) -> None:
    model = make_model([helper.make_node("Relu", ["x"], ["a"], name="relu"),
                        helper.make_node("Tanh", ["a"], ["y"], name="tanh")],
                       [("x", FLOAT, [2, 8])], [("y", FLOAT, [2, 8])])
    read = emulated_core.read_model(model)
    for op in read.get_ops():
        op.get_rt_info()["affinity"] = "GPU.0" if op.get_friendly_name() == "relu" else "CPU"
    compiled = emulated_core.compile_model(read, "HETERO:GPU.0,CPU", {"ENABLE_TRACE": True})
    request = compiled.create_infer_request()
    request.start_async({"x": X})
    request.wait()
    np.testing.assert_allclose(request.results["y"], np.tanh(np.maximum(X, 0)), rtol=1e-6)
    names = {(e["name"], e["cat"]) for e in compiled.get_property("TRACE")["traceEvents"] if e["ph"] == "X"}
    assert {("subgraph 0", "GPU.0"), ("subgraph 1", "CPU")} <= names


@pytest.mark.parametrize("device", ["GPU.0", "HETERO:GPU.0,CPU"])
def test_a_gpu_run_shows_its_copies_and_compute_on_the_trace(emulated_core: ov.Core, device: str) -> None:
    compiled = emulated_core.compile_model(MODEL, device, {"ENABLE_TRACE": True})
    queue = ov.AsyncInferQueue(compiled, 2)
    queue.set_callback(lambda request, _: None)
    for _ in range(4):
        queue.start_async({"x": X})
    queue.wait_all()
    spans = [e for e in compiled.get_property("TRACE")["traceEvents"] if e["ph"] == "X"]
    on_gpu = [e for e in spans if e["cat"] == "GPU.0"]
    stages = ("host-to-device copy", "compute", "device-to-host copy")
    for number in {e["args"]["request"] for e in spans}:
        mine = {e["name"]: e for e in on_gpu if e["args"]["request"] == number}
        assert set(stages) <= set(mine), mine.keys()
        whole = mine["run" if device == "GPU.0" else "subgraph 0"]
        ordered = [mine[stage] for stage in stages]
        for earlier, later in itertools.pairwise(ordered):  # one after another
            assert earlier["ts"] + earlier["dur"] <= later["ts"] + 1e-3
        assert whole["ts"] <= ordered[0]["ts"] + 1e-3
        assert ordered[-1]["ts"] + ordered[-1]["dur"] <= whole["ts"] + whole["dur"] + 1e-3


def _run_script(body: str, timeout: float = 60.0) -> tuple[subprocess.CompletedProcess[str], float]:
    """Run ``body`` in a new interpreter; (the process, seconds from its ``main_done()`` to its end).

    Timing from the script's own mark rather than from the start leaves out the imports, whose
    time depends on the machine's load, not on how the runtime exits."""
    script = textwrap.dedent(body)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), str(TESTS)])}
    begin = time.time()
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env,
                          timeout=timeout)
    end = time.time()
    marks = [float(line.split()[2]) for line in done.stdout.splitlines() if line.startswith("main done ")]
    return done, end - (marks[-1] if marks else begin)


_PRELUDE = """
    import sys, threading, time
    import numpy as np
    import inferplex as ov
    from hooked_plugin import hooked_compile
    from test_lifecycle import MODEL, X, EXPECTED
    def say(*words):
        # one write per line: a callback thread's line never lands inside the main thread's
        sys.stdout.write(" ".join(map(str, words)) + "\\n")
        sys.stdout.flush()
    def main_done():
        say("main done", time.time())
"""


def test_exit_with_requests_in_flight_ends_each_with_its_result() -> None:
    done, _ = _run_script(_PRELUDE + """
    def slow(inputs, worker):
        time.sleep(0.01)
    compiled = hooked_compile(MODEL, None, slow)
    ok = []
    def callback(request, userdata):
        ok.append(np.allclose(request.results["y"], EXPECTED))
        if len(ok) == 40:
            say("all", sum(ok))
    queue = ov.AsyncInferQueue(compiled, 4)
    queue.set_callback(callback)
    for i in range(40):
        queue.start_async({"x": X}, i)
    """)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "all 40"


@pytest.mark.timeout(180)
@pytest.mark.parametrize(("device", "config", "ending"), [
    ("MULTI:GPU.0,GPU.1", {"WORKER_PROCESSES": "YES"}, "sys.exit(3)"),
    ("HETERO:GPU.0,GPU.1", {"MODEL_DISTRIBUTION_POLICY": "PIPELINE_PARALLEL", "WORKER_PROCESSES": "YES"},
     "raise KeyboardInterrupt"),
], ids=["MULTI-worker-processes-sys.exit", "PIPELINE-worker-processes-KeyboardInterrupt"])
def test_exit_with_requests_in_flight_on_worker_processes(device: str, config: dict[str, str],
                                                          ending: str) -> None:
    done, seconds = _run_script(_PRELUDE + f"""
    import os
    os.environ["INFERPLEX_EMULATED_GPUS"] = "2"
    compiled = ov.Core().compile_model(MODEL, "{device}", {config!r})
    lock, ok = threading.Lock(), []
    def callback(request, userdata):
        with lock:
            ok.append(bool(np.allclose(request.results["y"], EXPECTED)))
            if len(ok) == 40:
                say("all", sum(ok))
    queue = ov.AsyncInferQueue(compiled, 4)
    queue.set_callback(callback)
    for i in range(40):
        queue.start_async({{"x": X}}, i)
    main_done()
    {ending}
    """, timeout=150)
    assert done.returncode == (3 if "exit" in ending else -2), done.stderr
    assert "all 40" in done.stdout.splitlines()
    assert seconds < 15


@pytest.mark.parametrize("mode", ["normal", "sys.exit", "KeyboardInterrupt"])
def test_a_hung_device_cannot_hold_the_process_at_exit(mode: str) -> None:
    ending = {"normal": "", "sys.exit": "sys.exit(3)", "KeyboardInterrupt": "raise KeyboardInterrupt"}[mode]
    done, seconds = _run_script(_PRELUDE + f"""
    hang = threading.Event()
    def stuck(inputs, worker):
        hang.wait()
    compiled = hooked_compile(MODEL, {{"EXIT_TIMEOUT": 1}}, stuck)
    request = compiled.create_infer_request()
    def callback(_):
        try:
            request.wait()
        except ov.errors.InferenceError as error:
            say("ended:", error)
    request.set_callback(callback)
    request.start_async({{"x": X}})
    main_done()
    {ending}
    """)
    assert seconds < 10
    # An uncaught KeyboardInterrupt ends the process by SIGINT (-2), as Python does.
    assert done.returncode == {"normal": 0, "sys.exit": 3, "KeyboardInterrupt": -2}[mode], done.stderr
    assert "ended: HOOKED gave no result within 1.0 s at exit" in done.stdout


@pytest.mark.parametrize("device", ["HOOKED", "HETERO:HOOKED,CPU"])
def test_sigint_during_a_synchronous_run_on_a_hung_device_stops_the_program(device: str) -> None:
    done, seconds = _run_script(_PRELUDE + f"""
    import os, signal
    from hooked_plugin import HookedPlugin
    hang, calls = threading.Event(), []
    def stuck(inputs, worker):
        calls.append(1)
        if len(calls) > 1:
            hang.wait()
    core = ov.Core()
    core.register_plugin(HookedPlugin(stuck), "HOOKED")
    compiled = core.compile_model(MODEL, "{device}", {{"EXIT_TIMEOUT": 1}})
    compiled({{"x": X}})
    threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT)).start()
    main_done()
    while True:  # a program that retries failed runs stops only if Ctrl-C reaches it as itself
        try:
            compiled({{"x": X}})
        except ov.errors.InferenceError:
            continue
    """)
    assert done.returncode == -2, done.stderr  # ended by SIGINT, as Python ends on KeyboardInterrupt
    assert "KeyboardInterrupt" in done.stderr
    assert seconds < 10


def test_the_exit_wait_defaults_to_a_few_seconds_past_the_slowest_run() -> None:
    done, seconds = _run_script(_PRELUDE + """
    hang = threading.Event()
    calls = []
    def stuck(inputs, worker):
        calls.append(1)
        if len(calls) > 1:
            hang.wait()
    compiled = hooked_compile(MODEL, None, stuck)
    compiled({"x": X})
    compiled.create_infer_request().start_async({"x": X})
    main_done()
    """)
    assert done.returncode == 0, done.stderr
    assert 5.0 < seconds < 12, seconds
    assert "HOOKED gave no result within 5.0 s at exit" in done.stderr


@pytest.mark.timeout(120)
def test_a_long_run_of_requests_keeps_memory_flat() -> None:
    """100,000 inferences, sync and async, in an interpreter of their own (background work that
    earlier tests leave, such as a released program's compile, would move this one's RSS)."""
    done, _ = _run_script("""
    import gc
    import numpy as np
    import inferplex as ov
    from test_lifecycle import MODEL, X, EXPECTED, _rss_bytes
    compiled = ov.Core().compile_model(MODEL, "CPU")
    queue = ov.AsyncInferQueue(compiled, 2)
    request = compiled.create_infer_request()
    for _ in range(10_000):
        request.infer({"x": X})
    for _ in range(2_000):
        queue.start_async({"x": X})
    queue.wait_all()
    gc.collect()
    rss = _rss_bytes()
    for _ in range(70_000):
        request.infer({"x": X})
    for _ in range(18_000):
        queue.start_async({"x": X})
    queue.wait_all()
    gc.collect()
    print("right", bool(np.allclose(request.results["y"], EXPECTED)), flush=True)
    print("grew", _rss_bytes() - rss, flush=True)
    """, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "right True" in done.stdout
    grew = int(done.stdout.split("grew ")[1].split()[0])
    assert grew < 8 << 20, f"RSS grew {grew / 2**20:.1f} MiB over 88,000 requests"


def test_dropped_cores_return_threads_and_memory() -> None:
    def use() -> None:
        core = ov.Core()
        compiled = core.compile_model(MODEL, "CPU")
        np.testing.assert_allclose(compiled({"x": X})["y"], EXPECTED)

    use()
    gc.collect()
    threads, rss = _settled_thread_count(0, 0.5), _rss_bytes()
    for _ in range(30):
        use()
    assert _settled_thread_count(threads) <= threads
    assert _rss_bytes() - rss < 0.10 * rss


@pytest.mark.parametrize(("config", "bound"), [({"EXIT_TIMEOUT": 1}, 6), ({}, 15)],
                         ids=["EXIT_TIMEOUT=1", "default"])
def test_auto_abandons_a_hung_background_compile_at_exit(config: dict[str, int], bound: float) -> None:
    done, seconds = _run_script(_PRELUDE + f"""
    from hooked_plugin import HookedPlugin
    class Hung(HookedPlugin):
        family = "HUNG"
        def devices(self):
            return ["HUNG"]
        def device_property(self, device, key):
            return "discrete" if key == "DEVICE_TYPE" else super().device_property(device, key)
        def compile(self, model, device, config):
            threading.Event().wait()  # an accelerator whose compile never ends
    core = ov.Core()
    core.register_plugin(Hung(lambda inputs, worker: None), "HUNG")
    compiled = core.compile_model(MODEL, "AUTO:HUNG,CPU", {config!r})
    print("served", bool(np.allclose(compiled({{"x": X}})["y"], EXPECTED)), flush=True)
    main_done()
    """)
    assert done.returncode == 0, done.stderr
    assert "served True" in done.stdout
    assert seconds < bound
