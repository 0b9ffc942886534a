"""Test device plugins for MULTI/AUTO: real ONNX Runtime inference plus injected faults.

Tests register them on an ``ov.Core`` (:func:`make_core`) and drive compiled
models through the public API (:func:`submit_many` starts one InferRequest per
request, :class:`Collector` records how each ended).

``FaultyPlugin(family, devices, ...)`` exposes devices that run the model with
ONNX Runtime (so results are real) and can be slow, fail every k-th request,
hang on chosen requests, compile slowly or fail to compile.  Also: ``relu_stack``, a
model big enough to keep devices busy, and ``run_program``, which runs a test program
in a new interpreter (for what happens at exit).
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx
import onnx_ir as ir
import onnxruntime as ort
from onnx import TensorProto, helper

from inferplex.devices.base import DevicePlugin, DeviceProgram, MemoryInfo
from inferplex.devices.registry import DeviceRegistry

IN_FEATURES, OUT_FEATURES = 8, 4
WEIGHT = np.arange(IN_FEATURES * OUT_FEATURES, dtype=np.float32).reshape(IN_FEATURES, OUT_FEATURES) / 10
BIAS = np.linspace(-1, 1, OUT_FEATURES, dtype=np.float32)


def linear_model() -> ir.Model:
    """``y = relu(x @ W + b)`` with ``x: float32[1, 8]``: small, exact, checkable with numpy."""
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["xw"], name="matmul"),
         helper.make_node("Add", ["xw", "b"], ["z"], name="add"),
         helper.make_node("Relu", ["z"], ["y"], name="relu")],
        "linear",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, IN_FEATURES])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, OUT_FEATURES])],
        [onnx.numpy_helper.from_array(WEIGHT, "W"), onnx.numpy_helper.from_array(BIAS, "b")],
    )
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    proto.ir_version = 8
    return ir.from_proto(proto)


def expected(x: np.ndarray) -> np.ndarray:
    return np.maximum(x @ WEIGHT + BIAS, 0)


def input_for(index: int) -> np.ndarray:
    """A distinct input per request index."""
    return (np.arange(IN_FEATURES, dtype=np.float32) + index * 0.5).reshape(1, IN_FEATURES)


class Contention:
    """Runs of one device in progress, which slow another device down (a host beside a GPU)."""

    def __init__(self) -> None:
        self.active = 0
        self._lock = threading.Lock()

    def __enter__(self) -> Contention:
        with self._lock:
            self.active += 1
        return self

    def __exit__(self, *_: object) -> None:
        with self._lock:
            self.active -= 1


@dataclass
class Faults:
    """What a device does wrong.  Request counts start at 1, per device."""

    delay: float = 0.0
    """Extra seconds per run (a slower device)."""
    first_run_delay: float = 0.0
    """Extra seconds on each worker's first run (warm-up, like a CUDA graph capture)."""
    slow_runs: int = 0
    """If set: ``first_run_delay`` goes to the device's first ``slow_runs`` runs over all its
    workers instead (warm-up that holds back other workers' runs too)."""
    contends: Contention | None = None
    """Counted in this while running (this device slows those ``slowed_by`` it)."""
    slowed_by: Contention | None = None
    slowdown: float = 0.0
    """Extra seconds per run started while ``slowed_by`` has runs in progress."""
    fail_every: int = 0
    """Raise on every k-th run (0: never)."""
    fail_always: bool = False
    hang_on: Collection[int] = ()
    """Run numbers that hang for ``hang_seconds`` (then return a result, which must be dropped)."""
    hang_seconds: float = 2.0
    compile_delay: float = 0.0
    compile_error: str | None = None
    unsupported_ops: Collection[str] = ()
    """Op types the device says it cannot run."""
    workers: int = 2


class FaultyProgram(DeviceProgram):
    def __init__(self, device: str, model: ir.Model, faults: Faults, plugin: FaultyPlugin,
                 workers: int) -> None:
        self.device = device
        self.num_workers = workers
        self.faults = faults
        self.plugin = plugin
        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        self.session = ort.InferenceSession(ir.to_proto(model).SerializeToString(), options,
                                            providers=["CPUExecutionProvider"])
        self._counter = itertools.count(1)
        self.active: set[int] = set()
        self.runs: list[int] = []
        self._warm: set[int] = set()
        self._lock = threading.Lock()
        self.closed = False

    def run(self, inputs: Mapping[str, Any], worker: int = 0,
            keep_on_device: Collection[str] = ()) -> dict[str, Any]:
        number = next(self._counter)
        with self._lock:
            if worker in self.active:
                raise AssertionError(f"{self.device}: worker {worker} used by two threads at once")
            self.active.add(worker)
        self.plugin.enter()
        try:
            faults = self.faults
            if faults.contends is not None:
                with faults.contends:
                    time.sleep(faults.delay)
            elif faults.delay:
                time.sleep(faults.delay)
            if faults.slowed_by is not None and faults.slowed_by.active:
                time.sleep(faults.slowdown)
            warming = number <= faults.slow_runs if faults.slow_runs else worker not in self._warm
            if faults.first_run_delay and warming:
                self._warm.add(worker)
                time.sleep(faults.first_run_delay)
            if number in faults.hang_on:
                self.plugin.release.wait(faults.hang_seconds)
            if faults.fail_always or (faults.fail_every and number % faults.fail_every == 0):
                raise RuntimeError(f"{self.device}: injected failure on run {number}")
            names = [o.name for o in self.session.get_outputs()]
            outputs = dict(zip(names, self.session.run(names, dict(inputs)), strict=True))
            with self._lock:
                self.runs.append(number)
            return outputs
        finally:
            self.plugin.leave()
            with self._lock:
                self.active.discard(worker)

    def close(self) -> None:
        self.closed = True


@dataclass
class FaultyPlugin(DevicePlugin):
    """A family of test devices; ``faults`` per device name (default: none)."""

    family: str = "TEST"
    names: tuple[str, ...] = ("TEST",)
    faults: dict[str, Faults] = field(default_factory=dict)
    device_type: str | None = None
    programs: list[FaultyProgram] = field(default_factory=list)
    compiled: list[str] = field(default_factory=list)
    release: threading.Event = field(default_factory=threading.Event)
    max_active: int = 0
    _active: int = 0
    _count_lock: threading.Lock = field(default_factory=threading.Lock)

    def enter(self) -> None:
        with self._count_lock:
            self._active += 1
            self.max_active = max(self.max_active, self._active)

    def leave(self) -> None:
        with self._count_lock:
            self._active -= 1

    def devices(self) -> list[str]:
        return list(self.names)

    def supported_properties(self) -> tuple[str, ...]:
        return ("PERFORMANCE_HINT", "PERFORMANCE_HINT_NUM_REQUESTS", "ENABLE_PROFILING", "NUM_STREAMS")

    def device_property(self, device: str, key: str) -> Any:
        if key == "FULL_DEVICE_NAME":
            return f"test device {device}"
        if key == "DEVICE_TYPE" and self.device_type is not None:
            return self.device_type
        raise KeyError(key)

    def supported_nodes(self, model: ir.Model, device: str, config: Mapping[str, Any]) -> set[str]:
        skip = set(self._faults(device).unsupported_ops)
        return {node.name for node in model.graph if node.op_type not in skip}

    def compile(self, model: ir.Model, device: str, config: Mapping[str, Any]) -> DeviceProgram:
        faults = self._faults(device)
        if faults.compile_delay:
            time.sleep(faults.compile_delay)
        if faults.compile_error:
            raise RuntimeError(faults.compile_error)
        workers = int(config.get("NUM_STREAMS", faults.workers))
        program = FaultyProgram(device, model, faults, self, workers)
        self.programs.append(program)
        self.compiled.append(device)
        return program

    def memory(self, device: str) -> MemoryInfo:
        return MemoryInfo(1 << 30, 1 << 30)

    def optimal_number_of_infer_requests(self, device: str, config: Mapping[str, Any]) -> int:
        return self._faults(device).workers

    def runs(self, device: str) -> int:
        """Successful runs of ``device`` so far."""
        return sum(len(p.runs) for p in self.programs if p.device == device)

    def program(self, device: str) -> FaultyProgram:
        return next(p for p in reversed(self.programs) if p.device == device)

    def _faults(self, device: str) -> Faults:
        return self.faults.setdefault(device, Faults())


def make_registry(*plugins: FaultyPlugin) -> DeviceRegistry:
    registry = DeviceRegistry()
    for plugin in plugins:
        registry.register(plugin.family, plugin)
    return registry


def make_core(*plugins: FaultyPlugin) -> Any:
    """An ``ov.Core`` whose device families are ``plugins`` (they replace the built-in ones)."""
    import inferplex as ov

    core = ov.Core()
    for plugin in plugins:
        core.register_plugin(plugin)
    return core


class Outcome:
    """How one request ended: its output ``y`` or its error, and the device that ran it."""

    def __init__(self, request: Any) -> None:
        self.device: str = request.device
        self.error: BaseException | None = None
        self.y: np.ndarray | None = None
        try:
            self.y = np.array(request.results["y"])
        except BaseException as error:  # noqa: BLE001 - recorded, checked by the test
            self.error = error


class Collector:
    """Completion callbacks for many requests; fails the test on a second call."""

    def __init__(self, expected_count: int) -> None:
        self.expected_count = expected_count
        self.outcomes: dict[int, Outcome] = {}
        self.duplicates: list[int] = []
        self.requests: list[Any] = []
        self._lock = threading.Lock()
        self._all_done = threading.Event()

    def record(self, index: int, request: Any) -> None:
        outcome = Outcome(request)
        with self._lock:
            if index in self.outcomes:
                self.duplicates.append(index)
            self.outcomes[index] = outcome
            if len(self.outcomes) >= self.expected_count:
                self._all_done.set()

    def wait(self, timeout: float) -> None:
        assert self._all_done.wait(timeout), (
            f"only {len(self.outcomes)} of {self.expected_count} requests ended in {timeout} s")
        assert not self.duplicates, f"requests ended twice: {self.duplicates[:10]}"

    def errors(self) -> list[BaseException]:
        return [o.error for o in self.outcomes.values() if o.error is not None]

    def check_results(self) -> dict[str, int]:
        """Every outcome is the right result for its input; return requests per device."""
        per_device: dict[str, int] = {}
        for index, outcome in self.outcomes.items():
            assert outcome.error is None, f"request {index} failed: {outcome.error!r}"
            np.testing.assert_allclose(outcome.y, expected(input_for(index)), rtol=1e-5)
            per_device[outcome.device] = per_device.get(outcome.device, 0) + 1
        return per_device


def start(compiled: Any, collector: Collector, index: int, then: Any = None) -> None:
    """Start request ``index`` on a new InferRequest of ``compiled``; its callback records it."""
    request = compiled.create_infer_request()

    def done(_: object) -> None:
        collector.record(index, request)
        if then is not None:
            then()

    request.set_callback(done, None)
    collector.requests.append(request)
    request.start_async({"x": input_for(index)})


def submit_when_free(compiled: Any, collector: Collector, index: int, free: threading.Semaphore) -> None:
    """One closed-loop step: take a place in ``free``, start request ``index``, free it when done."""
    free.acquire()
    start(compiled, collector, index, free.release)


def submit_many(compiled: Any, count: int, begin: int = 0, collector: Collector | None = None,
                pause: float = 0.0) -> Collector:
    """Start ``count`` requests at once with distinct inputs (indices from ``begin``)."""
    collector = collector or Collector(count)
    for index in range(begin, begin + count):
        start(compiled, collector, index)
        if pause:
            time.sleep(pause)
    return collector


def relu_stack(layers: int, width: int, batch: int,
               seed: int = 0) -> tuple[onnx.ModelProto, list[np.ndarray]]:
    """``y = relu(... relu(x @ W0) ... @ Wn)`` with ``x: float32[batch, width]``, and its weights.

    Big enough (``layers * width**2 * 4`` bytes) to keep devices busy: for programs that
    exit while requests run or while a device still compiles.
    """
    from onnx import numpy_helper

    rng = np.random.default_rng(seed)
    scale = np.float32(1 / np.sqrt(width))
    weights = [(rng.standard_normal((width, width)) * scale).astype(np.float32) for _ in range(layers)]
    nodes, previous = [], "x"
    for i in range(layers):
        nodes += [helper.make_node("MatMul", [previous, f"w{i}"], [f"m{i}"]),
                  helper.make_node("Relu", [f"m{i}"], [f"r{i}"])]
        previous = f"r{i}"
    nodes[-1].output[0] = "y"
    graph = helper.make_graph(
        nodes, "relu_stack", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, width])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, width])],
        [numpy_helper.from_array(w, f"w{i}") for i, w in enumerate(weights)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model, weights


def relu_stack_reference(x: np.ndarray, weights: list[np.ndarray]) -> np.ndarray:
    for w in weights:
        x = np.maximum(x @ w, 0)
    return x


def run_program(source: str, *args: str, emulated_gpus: int = 2, timeout: float = 100) -> Any:
    """Run ``source`` in a new interpreter (this folder importable, emulated GPUs); the CompletedProcess."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    here = str(Path(__file__).resolve().parent)
    path = os.pathsep.join(p for p in (here, os.environ.get("PYTHONPATH", "")) if p)
    env = {**os.environ, "INFERPLEX_EMULATED_GPUS": str(emulated_gpus), "PYTHONPATH": path}
    source = "import cpu_precision\ncpu_precision.pin_float32()\n" + source  # f32, as in the suite
    return subprocess.run([sys.executable, "-c", source, *args], capture_output=True, text=True, env=env,
                          timeout=timeout)
