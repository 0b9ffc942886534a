"""Test-only device plugins and models for the HETERO and pipeline tests.

``LimitedPlugin`` runs subgraphs with ONNX Runtime but supports only some op
types, like an accelerator that lacks ops.  Its programs have their own tensor
kind (``"boxed"``): outputs kept on the device come back as :class:`Boxed`
values tagged with the device, so tests can see which tensors stayed native and
which crossed to the host.
"""

from __future__ import annotations

import datetime
import threading
import time
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx
import onnx_ir as ir
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

from inferplex.devices.base import DevicePlugin, DeviceProgram, MemoryInfo, ProfilingRecord

FLOAT = TensorProto.FLOAT


@dataclass(frozen=True)
class Boxed:
    """A tensor 'on' a LIMITED device."""

    array: np.ndarray
    device: str

    @property
    def nbytes(self) -> int:
        return int(self.array.nbytes)


class LimitedProgram(DeviceProgram):
    def __init__(self, plugin: LimitedPlugin, model: ir.Model, device: str,
                 config: Mapping[str, Any]) -> None:
        self.plugin = plugin
        self.device = device
        self.model = model
        self.tensor_kind = plugin.tensor_kind
        self.num_workers = plugin.workers
        self.delay = plugin.delay
        data = ir.serde.serialize_model(model).SerializeToString()
        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        self.session = ort.InferenceSession(data, options, providers=["CPUExecutionProvider"])
        self.output_names = [o.name for o in self.session.get_outputs()]
        self.profiling = bool(config.get("ENABLE_PROFILING", False))
        self._last: dict[int, list[ProfilingRecord]] = {}

    def _unbox(self, value: Any) -> np.ndarray:
        if isinstance(value, Boxed):
            if value.device != self.device:
                self.plugin.count("device_to_device")
            return value.array
        if self.tensor_kind != "numpy":
            self.plugin.count("host_to_device")
        return np.asarray(value)

    def to_host(self, value: Any) -> np.ndarray:
        self.plugin.count("to_host")
        return value.array if isinstance(value, Boxed) else np.asarray(value)

    def to_native(self, value: Any) -> Boxed:
        self.plugin.count("to_native")
        return Boxed(self._unbox(value), self.device)

    def run(self, inputs: Mapping[str, Any], worker: int = 0,
            keep_on_device: Collection[str] = ()) -> dict[str, Any]:
        if self.plugin.fail_on is not None and self.plugin.fail_on == self.device:
            raise RuntimeError(f"injected failure on {self.device}")
        start = time.perf_counter()
        feeds = {k: self._unbox(v) for k, v in inputs.items()}
        if self.delay:
            time.sleep(self.delay)
        results = self.session.run(None, feeds)
        elapsed = datetime.timedelta(seconds=time.perf_counter() - start)
        if self.profiling:
            self._last[worker] = [ProfilingRecord(n.name, n.op_type, "ORT", elapsed, elapsed)
                                  for n in self.model.graph]
        out: dict[str, Any] = {}
        for name, value in zip(self.output_names, results, strict=True):
            native = name in keep_on_device and self.tensor_kind != "numpy"
            out[name] = Boxed(value, self.device) if native else value
        return out

    def profiling_info(self, worker: int = 0) -> list[ProfilingRecord]:
        return list(self._last.get(worker, []))


class LimitedPlugin(DevicePlugin):
    """Devices ``<family>.0 .. <family>.<count-1>`` that run only ``ops`` (None: every
    default-domain op) minus ``excluded``; ``extra_domains`` adds whole domains."""

    def __init__(self, family: str = "LIMITED", count: int = 2, ops: Iterable[str] | None = None,
                 excluded: Iterable[str] = (), extra_domains: Iterable[str] = (),
                 tensor_kind: str = "boxed", memory_bytes: int = 1 << 30, workers: int = 2,
                 delay: float = 0.0) -> None:
        self.family = family
        self.count_devices = count
        self.ops = None if ops is None else frozenset(ops)
        self.excluded = frozenset(excluded)
        self.domains = frozenset(("", "ai.onnx", *extra_domains))
        self.tensor_kind = tensor_kind
        self.memory_bytes = memory_bytes
        self.workers = workers
        self.delay = delay
        self.fail_on: str | None = None
        self.compiled: list[tuple[str, ir.Model]] = []
        self.counters: dict[str, int] = {}
        self._lock = threading.Lock()

    def count(self, key: str) -> None:
        with self._lock:
            self.counters[key] = self.counters.get(key, 0) + 1

    def devices(self) -> list[str]:
        return [f"{self.family}.{i}" for i in range(self.count_devices)]

    def supported_properties(self) -> tuple[str, ...]:
        return ("PERFORMANCE_HINT", "ENABLE_PROFILING", "MEMORY_LIMIT", "NUM_STREAMS")

    def device_property(self, device: str, key: str) -> Any:
        if key == "FULL_DEVICE_NAME":
            return f"test device {device}"
        if key == "DEVICE_TOTAL_MEM_SIZE":
            return self.memory_bytes
        raise KeyError(key)

    def supports(self, node: ir.Node) -> bool:
        if node.domain not in self.domains:
            return False
        if node.domain in ("", "ai.onnx") and self.ops is not None and node.op_type not in self.ops:
            return False
        return node.op_type not in self.excluded

    def supported_nodes(self, model: ir.Model, device: str, config: Mapping[str, Any]) -> set[str]:
        return {n.name for n in model.graph if self.supports(n)}

    def compile(self, model: ir.Model, device: str, config: Mapping[str, Any]) -> DeviceProgram:
        self.compiled.append((device, model))
        return LimitedProgram(self, model, device, config)

    def memory(self, device: str) -> MemoryInfo:
        return MemoryInfo(self.memory_bytes, self.memory_bytes)


# --- models ----------------------------------------------------------------------------


def _model(nodes: list[onnx.NodeProto], inputs: list[onnx.ValueInfoProto],
           outputs: list[onnx.ValueInfoProto], inits: Sequence[onnx.TensorProto] = (),
           name: str = "m", opsets: Mapping[str, int] | None = None) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, name, inputs, outputs, initializer=list(inits))
    imports = [helper.make_opsetid(d, v) for d, v in (opsets or {"": 17}).items()]
    model = helper.make_model(graph, opset_imports=imports)
    model.ir_version = 9
    return model


def _weight(name: str, shape: tuple[int, ...], seed: int) -> onnx.TensorProto:
    rng = np.random.default_rng(seed)
    return numpy_helper.from_array((rng.standard_normal(shape) * 0.3).astype(np.float32), name)


def named(model: onnx.ModelProto) -> onnx.ModelProto:
    """Give every node a unique name (what the Core does at read time)."""
    for i, node in enumerate(model.graph.node):
        if not node.name:
            node.name = f"{node.op_type}_{i}"
    return model


def diamond_model() -> onnx.ModelProto:
    """x -> a(Relu) -> {b(Sigmoid), c(Tanh)} -> d(Add) -> e(Mul with a): a diamond plus a residual."""
    nodes = [
        helper.make_node("MatMul", ["x", "w0"], ["h0"], name="mm0"),
        helper.make_node("Relu", ["h0"], ["a"], name="relu"),
        helper.make_node("Sigmoid", ["a"], ["b"], name="sig"),
        helper.make_node("Tanh", ["a"], ["c"], name="tanh"),
        helper.make_node("Add", ["b", "c"], ["d"], name="add"),
        helper.make_node("Mul", ["d", "a"], ["e"], name="mul_residual"),
        helper.make_node("MatMul", ["e", "w1"], ["f"], name="mm1"),
        helper.make_node("Add", ["f", "h0"], ["y"], name="add_residual"),
    ]
    return _model(nodes, [helper.make_tensor_value_info("x", FLOAT, ["N", 8])],
                  [helper.make_tensor_value_info("y", FLOAT, ["N", 8])],
                  [_weight("w0", (8, 8), 0), _weight("w1", (8, 8), 1)], "diamond")


def chain_model(layers: int = 8, width: int = 16, name: str = "chain") -> onnx.ModelProto:
    """An MLP: (MatMul, Add bias, Relu) x layers, with a shared initializer read twice."""
    nodes, inits = [], [numpy_helper.from_array(np.full((width,), 0.01, np.float32), "bias")]
    current = "x"
    for i in range(layers):
        inits.append(_weight(f"w{i}", (width, width), i))
        nodes += [helper.make_node("MatMul", [current, f"w{i}"], [f"m{i}"], name=f"mm{i}"),
                  helper.make_node("Add", [f"m{i}", "bias"], [f"a{i}"], name=f"bias{i}"),
                  helper.make_node("Relu", [f"a{i}"], [f"r{i}"], name=f"relu{i}")]
        current = f"r{i}"
    nodes.append(helper.make_node("Identity", [current], ["y"], name="out"))
    return _model(nodes, [helper.make_tensor_value_info("x", FLOAT, ["N", width])],
                  [helper.make_tensor_value_info("y", FLOAT, ["N", width])], inits, name)


def glue_model() -> onnx.ModelProto:
    """Reshape driven by shape arithmetic on the input's shape (what exporters emit)."""
    c = lambda name, vals: helper.make_node(  # noqa: E731
        "Constant", [], [name], name=f"const_{name}",
        value=numpy_helper.from_array(np.array(vals, np.int64), name))
    nodes = [
        c("zero", [0]), c("minus1", [-1]), c("axes0", [0]),
        helper.make_node("MatMul", ["x", "w0"], ["h"], name="mm0"),
        helper.make_node("Relu", ["h"], ["r"], name="relu"),
        helper.make_node("Shape", ["x"], ["s"], name="shape"),
        helper.make_node("Gather", ["s", "zero"], ["n"], name="gather_n"),
        helper.make_node("Concat", ["n", "minus1"], ["new_shape"], name="concat_shape", axis=0),
        helper.make_node("Reshape", ["r", "new_shape"], ["flat"], name="reshape"),
        helper.make_node("MatMul", ["flat", "w1"], ["y"], name="mm1"),
    ]
    return _model(nodes, [helper.make_tensor_value_info("x", FLOAT, ["N", 8])],
                  [helper.make_tensor_value_info("y", FLOAT, ["N", 8])],
                  [_weight("w0", (8, 8), 2), _weight("w1", (8, 8), 3)], "glue")


def contrib_model() -> onnx.ModelProto:
    """MatMul -> com.microsoft Trilu (CPU only) -> MatMul, then a residual Add."""
    nodes = [
        helper.make_node("MatMul", ["x", "w0"], ["h"], name="mm0"),
        helper.make_node("Trilu", ["h"], ["g"], name="trilu", domain="com.microsoft"),
        helper.make_node("MatMul", ["g", "w1"], ["m"], name="mm1"),
        helper.make_node("Add", ["m", "h"], ["y"], name="residual"),
    ]
    return _model(nodes, [helper.make_tensor_value_info("x", FLOAT, [2, 8])],
                  [helper.make_tensor_value_info("y", FLOAT, [2, 8])],
                  [_weight("w0", (8, 8), 4), _weight("w1", (8, 8), 5)], "contrib",
                  {"": 17, "com.microsoft": 1})
