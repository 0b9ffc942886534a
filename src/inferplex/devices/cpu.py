"""The CPU device: ONNX Runtime's CPU execution provider.

Streams: one ONNX Runtime session per stream, each with its own intra-op
thread pool, so concurrent requests do not fight over one pool.

- ``PERFORMANCE_HINT=LATENCY`` (default): one stream using every core.
- ``PERFORMANCE_HINT=THROUGHPUT``: several streams splitting the cores (one
  core per stream up to 4 cores, then streams of 4 cores), thread spinning off so
  an idle stream does not burn a core another stream needs.
- ``NUM_STREAMS`` / ``INFERENCE_NUM_THREADS`` override both.
- ``THREAD_SPINNING`` (YES/NO): whether idle intra-op threads spin waiting for
  work (ONNX Runtime's ``allow_spinning``).  Default: on with one stream, off
  with several.  HETERO and MULTI turn it off when accelerators work beside the
  CPU: spinning threads slowed the GPU's host copies that follow a CPU subgraph
  from 1.3 ms to 12 ms (a 32 MiB tensor on a 16-core host).
- ``THREAD_PRIORITY`` (NORMAL/LOW): LOW runs the sessions' intra-op threads at
  the lowest OS priority (nice 19; Linux, where priority is per thread), so
  that threads feeding accelerators take a core the moment they wake.  The
  thread calling ``run`` keeps its priority.  MULTI and CUMULATIVE_THROUGHPUT
  set LOW when the CPU works beside accelerators; elsewhere, or on other
  systems, NORMAL.

Precision: ONNX Runtime's CPU provider computes in the model's types, so only
``INFERENCE_PRECISION_HINT=f32`` is accepted; other values are refused rather
than silently ignored.

Tensors: numpy inputs of the right dtype reach ONNX Runtime without a copy, and
``InferenceSession.run`` hands its output buffers to numpy without one.  Binding
preallocated numpy outputs through IOBinding was measured slower (a 64 MiB Add:
10.7 ms with IOBinding into ``np.empty`` vs 6.7 ms with ``run``; the fresh pages
fault on first write), so ``run`` is used.

Counters (``ENABLE_PROFILING``): per-node times of the last run on a worker,
from ONNX Runtime's profiler.  ONNX Runtime writes its events only when the
profiler ends, so reading the counters ends it and the worker's session is
rebuilt before its next run: counters cost nothing until someone reads them.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import platform
import tempfile
import threading
from collections.abc import Collection, Mapping
from functools import lru_cache
from typing import Any

import numpy as np
import onnx
import onnx_ir as ir
import onnxruntime as ort

from inferplex.devices.base import DevicePlugin, DeviceProgram, MemoryInfo, ProfilingRecord
from inferplex.errors import CompileError, InferenceError, PropertyError
from inferplex.serialize import serialize_leaving_out

__all__ = ["CpuPlugin", "CpuProgram", "stream_layout"]

_PROVIDER = "CPUExecutionProvider"
_SUPPORTED = (
    "PERFORMANCE_HINT", "PERFORMANCE_HINT_NUM_REQUESTS", "NUM_STREAMS", "INFERENCE_NUM_THREADS",
    "INFERENCE_PRECISION_HINT", "ENABLE_PROFILING", "MEMORY_LIMIT", "THREAD_SPINNING",
    "THREAD_PRIORITY",
)
_LOWEST_PRIORITY = 19
"""The nice value of intra-op threads under THREAD_PRIORITY=LOW."""


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def stream_layout(config: Mapping[str, Any], cores: int | None = None) -> tuple[int, int]:
    """``(streams, threads_per_stream)`` for a CPU config (see the module docstring)."""
    cores = cores or _cores()
    threads = int(config.get("INFERENCE_NUM_THREADS") or 0) or cores
    streams_setting = config.get("NUM_STREAMS", "AUTO")
    if streams_setting != "AUTO":
        streams = int(streams_setting)
    elif config.get("PERFORMANCE_HINT") in ("THROUGHPUT", "CUMULATIVE_THROUGHPUT"):
        streams = threads if threads <= 4 else max(2, threads // 4)
        requests = int(config.get("PERFORMANCE_HINT_NUM_REQUESTS") or 0)
        if requests:
            streams = max(1, min(streams, requests))
    else:
        streams = 1
    return streams, max(1, threads // streams)


class CpuPlugin(DevicePlugin):
    """ONNX Runtime on the host CPU."""

    family = "CPU"

    def devices(self) -> list[str]:
        return ["CPU"]

    def supported_properties(self) -> tuple[str, ...]:
        return _SUPPORTED

    def device_property(self, device: str, key: str) -> Any:
        if key == "FULL_DEVICE_NAME":
            return _cpu_name()
        if key == "DEVICE_TOTAL_MEM_SIZE":
            return self.memory(device).total_bytes
        if key == "DEVICE_FREE_MEM_SIZE":
            return self.memory(device).free_bytes
        if key == "DEVICE_TYPE":
            return "host"
        if key == "NUMBER_OF_CORES":
            return _cores()
        if key == "ENGINE":
            return f"onnxruntime {ort.__version__} ({_PROVIDER})"
        raise KeyError(key)

    def optimal_number_of_infer_requests(self, device: str, config: Mapping[str, Any]) -> int:
        return stream_layout(config)[0]

    def memory(self, device: str) -> MemoryInfo:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        try:
            free = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES")
        except (ValueError, OSError):
            free = total
        return MemoryInfo(total, free)

    def supported_nodes(self, model: ir.Model, device: str, config: Mapping[str, Any]) -> set[str]:
        opsets = dict(model.opset_imports)
        return {node.name for node in model.graph if _runs_on_ort(node, opsets)}  # type: ignore[misc]

    def compile(self, model: ir.Model, device: str, config: Mapping[str, Any]) -> CpuProgram:
        precision = config.get("INFERENCE_PRECISION_HINT", "f32")
        if precision != "f32":
            raise PropertyError(
                f"INFERENCE_PRECISION_HINT={precision!r} is not supported by the CPU device "
                "(ONNX Runtime computes in the model's own types); accepted: f32")
        return CpuProgram(model, config)


_READ_DEFAULTS = {"PERFORMANCE_HINT": "LATENCY", "INFERENCE_PRECISION_HINT": "f32", "ENABLE_PROFILING": False}
"""What a CPU program reports for these keys when its config does not set them."""


class CpuProgram(DeviceProgram):
    """A model compiled into one ONNX Runtime session per stream."""

    tensor_kind = "numpy"

    def __init__(self, model: ir.Model, config: Mapping[str, Any]) -> None:
        self.device = "CPU"
        self._config = dict(config)
        self._streams, self._threads = stream_layout(config)
        self._spinning = bool(config.get("THREAD_SPINNING", self._streams == 1))
        self._low_priority = config.get("THREAD_PRIORITY", "NORMAL") == "LOW" and _per_thread_priority()
        self.num_workers = self._streams
        self._profiling = bool(config.get("ENABLE_PROFILING", False))
        self._profile_dir = tempfile.mkdtemp(prefix="inferplex-profile-") if self._profiling else ""
        self._model_bytes, self._initializers = _serialize(model)
        self._external_dir = _external_data_dir(model)
        self._sessions = [self._new_session(i) for i in range(self._streams)]
        self._stale = [False] * self._streams
        self._lock = threading.Lock()
        first = self._sessions[0]
        self.input_names = [i.name for i in first.get_inputs()]
        self.output_names = [o.name for o in first.get_outputs()]

    def _new_session(self, worker: int) -> ort.InferenceSession:
        options = ort.SessionOptions()
        options.intra_op_num_threads = self._threads
        options.inter_op_num_threads = 1
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        options.log_severity_level = 3  # warnings about unused initializers are not the user's concern
        if not self._spinning:
            options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        if self._initializers:  # copied into the session's graph before it is optimized
            options.add_external_initializers(*map(list, zip(*self._initializers, strict=True)))
        if self._external_dir:  # the bytes keep external data by relative location
            options.add_session_config_entry(
                "session.model_external_initializers_file_folder_path", self._external_dir)
        if self._profiling:
            options.enable_profiling = True
            options.profile_file_prefix = os.path.join(self._profile_dir, f"worker{worker}")
        try:
            if self._low_priority:
                return _in_low_priority_thread(
                    lambda: ort.InferenceSession(self._model_bytes, options, providers=[_PROVIDER]))
            return ort.InferenceSession(self._model_bytes, options, providers=[_PROVIDER])
        except Exception as error:  # noqa: BLE001 - ORT raises its own exception types
            raise CompileError(f"ONNX Runtime could not compile the model for CPU: {error}") from error

    def run(self, inputs: Mapping[str, Any], worker: int = 0,
            keep_on_device: Collection[str] = ()) -> dict[str, Any]:
        if self._stale[worker]:
            self._sessions[worker] = self._new_session(worker)
            self._stale[worker] = False
        feed = {name: _to_numpy(value) for name, value in inputs.items()}
        try:
            outputs = self._sessions[worker].run(None, feed)
        except Exception as e:  # ONNX Runtime's own classes: the caller gets one of ours, as from a GPU
            raise InferenceError(f"inference failed on {self.device}: {type(e).__name__}: {e}") from e
        return dict(zip(self.output_names, outputs, strict=True))

    def profiling_info(self, worker: int = 0) -> list[ProfilingRecord]:
        if not self._profiling:
            return []
        with self._lock:
            if self._stale[worker]:
                return []
            path = self._sessions[worker].end_profiling()
            self._stale[worker] = True
        try:
            with open(path, encoding="utf-8") as handle:
                events = json.load(handle)
        finally:
            os.unlink(path)
        return _last_run_records(events)

    def get_property(self, key: str) -> Any:
        if key == "NUM_STREAMS":
            return self._streams
        if key == "INFERENCE_NUM_THREADS":
            return self._threads * self._streams
        if key == "OPTIMAL_NUMBER_OF_INFER_REQUESTS":
            return self._streams
        if key == "THREAD_SPINNING":
            return self._spinning
        if key == "THREAD_PRIORITY":
            return "LOW" if self._low_priority else "NORMAL"
        if key == "EXECUTION_DEVICES":
            return ["CPU"]
        if key in self._config:
            return self._config[key]
        if key in _READ_DEFAULTS:
            return _READ_DEFAULTS[key]
        raise KeyError(key)

    def property_names(self) -> tuple[str, ...]:
        own = ("NUM_STREAMS", "INFERENCE_NUM_THREADS", "OPTIMAL_NUMBER_OF_INFER_REQUESTS",
               "THREAD_SPINNING", "THREAD_PRIORITY", "EXECUTION_DEVICES")
        return tuple(dict.fromkeys((*own, *self._config, *_READ_DEFAULTS)))

    def close(self) -> None:
        self._sessions = []


def _per_thread_priority() -> bool:
    """Whether the OS gives each thread its own priority (Linux): elsewhere LOW would slow the process."""
    return platform.system() == "Linux" and hasattr(os, "setpriority")


def _in_low_priority_thread(make: Any) -> Any:
    """``make()`` on a new thread at the lowest priority: the threads it starts inherit that priority.

    ONNX Runtime starts a session's intra-op threads when the session is made,
    and a new thread on Linux takes its creator's nice value.
    """
    result: list[Any] = []
    failure: list[BaseException] = []

    def body() -> None:
        try:
            with contextlib.suppress(OSError):  # not allowed here: the session still works
                os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), _LOWEST_PRIORITY)
            result.append(make())
        except BaseException as error:  # noqa: BLE001 - raised again in the caller's thread
            failure.append(error)

    thread = threading.Thread(target=body, name="inferplex-cpu-compile")
    thread.start()
    thread.join()
    if failure:
        raise failure[0]
    return result[0]


def _to_numpy(value: Any) -> Any:
    if isinstance(value, np.ndarray) or value is None:
        return value
    if isinstance(value, (list, tuple)):  # a sequence input: ONNX Runtime takes a list of arrays
        return [_to_numpy(item) for item in value]
    if type(value).__module__.startswith("torch"):
        return value.detach().cpu().numpy()
    return np.asarray(value)


def _external_data_dir(model: ir.Model) -> str:
    """The folder external initializers are read from ('' when they are all in memory)."""
    folders = {value.const_value.base_dir for value in model.graph.initializers.values()
               if isinstance(value.const_value, ir.ExternalTensor)}
    if len(folders) > 1:
        listed = ", ".join(sorted(str(folder) for folder in folders))
        raise CompileError(f"external data comes from several folders ({listed}); ONNX Runtime "
                           "reads it from one: keep it next to the model")
    return str(folders.pop()) if folders else ""


_IN_MEMORY_BYTES = 1024
"""Main-graph initializers at least this large reach ONNX Runtime as in-memory
values (``add_external_initializers``) instead of inside the serialized model.
protobuf's ``SerializeToString`` holds the GIL while it copies them, seconds for
a BERT-base-sized model, and a GPU compile beside it (AUTO's startup fallback,
MULTI) stalls meanwhile.  ONNX Runtime copies them in while it builds the
session, without the GIL."""

_IN_MEMORY_DTYPES = frozenset({
    ir.DataType.FLOAT16, ir.DataType.FLOAT, ir.DataType.DOUBLE, ir.DataType.INT8, ir.DataType.INT16,
    ir.DataType.INT32, ir.DataType.INT64, ir.DataType.UINT8, ir.DataType.UINT16, ir.DataType.UINT32,
    ir.DataType.UINT64, ir.DataType.BOOL})
"""Element types ``OrtValue.ortvalue_from_numpy`` takes (others stay in the model)."""

_Initializers = list[tuple[str, "ort.OrtValue"]]


def _serialize(model: ir.Model) -> tuple[bytes, _Initializers]:
    """The model as bytes for ONNX Runtime, and the large initializers left out of them."""
    proto, left = serialize_leaving_out(model, _in_memory)
    # onnx.helper stamps the newest IR version, which may be newer than the
    # installed ONNX Runtime reads; the graph itself rarely needs it.
    proto.ir_version = min(proto.ir_version, _max_ir_version())
    initializers: _Initializers = []
    for value in left:
        tensor = value.const_value
        assert tensor is not None  # serialize_leaving_out leaves out constants only
        array = np.ascontiguousarray(tensor.numpy())
        initializers.append((value.name or "", ort.OrtValue.ortvalue_from_numpy(array)))
        stub = proto.graph.initializer.add()  # ONNX Runtime replaces it with the value above
        stub.name, stub.data_type = value.name or "", tensor.dtype.value
        stub.dims.extend(int(d) for d in tensor.shape.numpy())
        stub.data_location = onnx.TensorProto.EXTERNAL
        for key, text in (("location", "inferplex-in-memory"), ("offset", "0"),
                          ("length", str(array.nbytes))):
            entry = stub.external_data.add()
            entry.key, entry.value = key, text
    return proto.SerializeToString(), initializers


def _in_memory(value: ir.Value) -> bool:
    """Whether an initializer goes to ONNX Runtime as an in-memory value (see ``_IN_MEMORY_BYTES``)."""
    tensor = value.const_value
    return (tensor is not None and not isinstance(tensor, ir.ExternalTensor)  # read from its folder
            and tensor.dtype in _IN_MEMORY_DTYPES and tensor.nbytes >= _IN_MEMORY_BYTES)


@lru_cache(maxsize=1)
def _max_ir_version() -> int:
    """Highest IR version the installed ONNX Runtime accepts (asked once, with an empty model)."""
    import re

    probe = onnx.helper.make_model(onnx.helper.make_graph([], "probe", [], []))
    probe.ir_version = 10_000
    try:
        ort.InferenceSession(probe.SerializeToString(), providers=[_PROVIDER])
    except Exception as error:  # noqa: BLE001 - the message carries the number
        match = re.search(r"max supported IR version: (\d+)", str(error))
        if match:
            return int(match.group(1))
    return onnx.IR_VERSION


def _last_run_records(events: list[dict[str, Any]]) -> list[ProfilingRecord]:
    """Node events of the last ``model_run`` in an ONNX Runtime profile."""
    runs = [e for e in events if e.get("cat") == "Session" and e.get("name") == "model_run"]
    if not runs:
        return []
    last = runs[-1]
    start, end = last["ts"], last["ts"] + last["dur"]
    records = []
    for event in events:
        if event.get("cat") != "Node" or not start <= event.get("ts", -1) <= end:
            continue
        name = event.get("name", "")
        if not name.endswith("_kernel_time"):
            continue
        args = event.get("args", {})
        elapsed = datetime.timedelta(microseconds=event.get("dur", 0))
        records.append(ProfilingRecord(
            node_name=name[: -len("_kernel_time")], node_type=args.get("op_name", ""),
            exec_type=args.get("provider", _PROVIDER), real_time=elapsed, cpu_time=elapsed))
    return records


# --- support query ------------------------------------------------------------------


@lru_cache(maxsize=1)
def _kernel_table() -> dict[tuple[str, str], list[tuple[int, int, dict[str, list[str]]]]]:
    """(domain, op) -> [(first version, last version, type constraints)] of ORT's CPU kernels."""
    from onnxruntime.capi import onnxruntime_pybind11_state as ort_c

    table: dict[tuple[str, str], list[tuple[int, int, dict[str, list[str]]]]] = {}
    for kernel in ort_c.get_all_opkernel_def():
        if kernel.provider != _PROVIDER:
            continue
        low, high = kernel.version_range
        domain = "" if kernel.domain == "ai.onnx" else kernel.domain
        table.setdefault((domain, kernel.op_name), []).append((low, high, dict(kernel.type_constraints)))
    return table


def _runs_on_ort(node: ir.Node, opsets: Mapping[str, int]) -> bool:
    domain = "" if node.domain == "ai.onnx" else node.domain
    version = opsets.get(domain, opsets.get("ai.onnx", 1) if domain == "" else 1)
    if domain == "" and node.op_type == "Constant":
        return True  # ONNX Runtime turns Constant nodes into initializers: no kernel needed
    kernels = [k for k in _kernel_table().get((domain, node.op_type), []) if k[0] <= version <= k[1]]
    if not kernels:
        return _expands_to_function(domain, node.op_type, version)
    schema = _schema(domain, node.op_type, version)
    if schema is None:
        return True
    return any(_types_match(node, schema, constraints) for _, _, constraints in kernels)


def _schema(domain: str, op_type: str, version: int) -> onnx.defs.OpSchema | None:
    try:
        return onnx.defs.get_schema(op_type, version, domain)
    except onnx.defs.SchemaError:
        return None


def _expands_to_function(domain: str, op_type: str, version: int) -> bool:
    """ORT inlines ops that ONNX defines as functions when it has no kernel for them."""
    schema = _schema(domain, op_type, version)
    return schema is not None and bool(getattr(schema, "has_function", False)
                                       or getattr(schema, "has_context_dependent_function", False))


def _types_match(node: ir.Node, schema: onnx.defs.OpSchema,
                 constraints: Mapping[str, list[str]]) -> bool:
    formals = list(schema.inputs)
    for index, value in enumerate(node.inputs):
        if value is None or value.dtype is None or not formals:
            continue
        formal = formals[min(index, len(formals) - 1)]
        allowed = constraints.get(formal.type_str)
        if allowed is None:
            continue
        if _type_string(value.dtype) not in allowed:
            return False
    return True


def _type_string(dtype: ir.DataType) -> str:
    name = onnx.helper.tensor_dtype_to_string(int(dtype)).removeprefix("TensorProto.").lower()
    names = {"float": "float", "float16": "float16", "double": "double", "bool": "bool"}
    return f"tensor({names.get(name, name)})"


@lru_cache(maxsize=1)
def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "CPU"
