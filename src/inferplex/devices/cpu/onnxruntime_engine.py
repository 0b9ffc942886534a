"""The CPU device's ONNX Runtime engine: one ONNX Runtime session per stream.

Chosen with ``ENGINE=ONNXRUNTIME``, and used where OpenVINO is not installed or
cannot read a model (contrib ops such as ``com.microsoft.Inverse``).

Streams: one session per stream, each with its own intra-op thread pool, so
concurrent requests do not fight over one pool.

- ``PERFORMANCE_HINT=LATENCY`` (default): one stream using every core.
- ``PERFORMANCE_HINT=THROUGHPUT``: several streams splitting the cores (one
  core per stream up to 4 cores, then streams of 4 cores).
- ``NUM_STREAMS`` / ``INFERENCE_NUM_THREADS`` override both; ``NUM_STREAMS=AUTO``
  means THROUGHPUT's streams whatever the hint, as on OpenVINO (the hint then
  reads back THROUGHPUT).
- ``THREAD_SPINNING`` (YES/NO): whether idle intra-op threads spin waiting for
  work (ONNX Runtime's ``allow_spinning``).  Default: on with one stream, off
  with several.  HETERO and MULTI turn it off when accelerators work beside the
  CPU, so that idle threads do not slow the accelerators' host copies.
- ``THREAD_PRIORITY=LOW``: the sessions are made on a lowest-priority thread,
  so their intra-op threads run at that priority (see ``threads.py``).

Precision: ONNX Runtime's CPU provider computes in the model's types, so only
``INFERENCE_PRECISION_HINT=f32`` is accepted; other values are refused rather
than silently ignored.

Tensors: numpy inputs of the right dtype reach ONNX Runtime without a copy, and
``InferenceSession.run`` hands its output buffers to numpy without one.  Float8
tensors, which ONNX Runtime's numpy conversions refuse, cross as ``OrtValue`` objects
(:mod:`.onnxruntime_dtypes`).

Counters (``ENABLE_PROFILING``): ONNX Runtime writes its events only when the
profiler ends, so reading the counters ends it and the worker's session is
rebuilt before its next run: counters cost nothing until someone reads them.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
import threading
from collections.abc import Collection, Mapping
from functools import lru_cache
from typing import Any

import numpy as np
import onnx
import onnx_ir as ir
import onnxruntime as ort

from inferplex._serialize import serialize_leaving_out
from inferplex.devices.base import ProfilingRecord
from inferplex.devices.cpu import cpu_info, quantized
from inferplex.devices.cpu.onnxruntime_dtypes import float8_ports, run_with_float8
from inferplex.devices.cpu.profile import ORT_PROVIDER, ort_last_run_records
from inferplex.devices.cpu.program import CpuProgram, to_numpy
from inferplex.devices.cpu.threads import in_low_priority_thread, per_thread_priority
from inferplex.errors import CompileError, InferenceError, PropertyError

__all__ = ["OnnxRuntimeProgram", "check_precision", "ort_version", "serialize_for_ort", "stream_layout"]


def ort_version() -> str:
    return f"onnxruntime {ort.__version__}"


_THROUGHPUT_HINTS = ("THROUGHPUT", "CUMULATIVE_THROUGHPUT")


def stream_layout(config: Mapping[str, Any], cores: int | None = None) -> tuple[int, int]:
    """``(streams, threads_per_stream)`` of ONNX Runtime sessions for a CPU config (module docstring)."""
    cores = cores or cpu_info.cores()
    threads = int(config.get("INFERENCE_NUM_THREADS") or 0) or cores
    streams_setting = config.get("NUM_STREAMS")
    if streams_setting not in (None, "AUTO"):
        streams = int(streams_setting)
    elif streams_setting == "AUTO" or config.get("PERFORMANCE_HINT") in _THROUGHPUT_HINTS:
        streams = threads if threads <= 4 else max(2, threads // 4)
        requests = int(config.get("PERFORMANCE_HINT_NUM_REQUESTS") or 0)
        if requests:
            streams = max(1, min(streams, requests))
    else:
        streams = 1
    return streams, max(1, threads // streams)


def check_precision(config: Mapping[str, Any], why: str = "") -> None:
    """Refuse an INFERENCE_PRECISION_HINT other than f32 (ONNX Runtime computes in the model's types)
    and ENABLE_CPU_RESERVATION=True (its threads reserve no cores).  OpenVINO's other CPU keys are
    reported as set: they tune OpenVINO's kernels (KV cache and dynamic quantization, sparse weights,
    TBB), which ONNX Runtime does not run."""
    precision = config.get("INFERENCE_PRECISION_HINT", "f32")
    if precision != "f32":
        raise PropertyError(
            f"INFERENCE_PRECISION_HINT={precision!r} is not supported by the CPU device's ONNX Runtime "
            f"engine{why} (it computes in the model's own types); accepted: f32, or bf16/f16 "
            "with ENGINE=OPENVINO")
    if config.get("ENABLE_CPU_RESERVATION"):
        raise PropertyError(
            f"ENABLE_CPU_RESERVATION=True is not supported by the CPU device's ONNX Runtime engine{why} "
            "(its threads cannot reserve cores for one model); accepted: False, or True with "
            "ENGINE=OPENVINO")


class OnnxRuntimeProgram(CpuProgram):
    """A model compiled into one ONNX Runtime session per stream."""

    engine = "ONNXRUNTIME"

    def __init__(self, model: ir.Model, config: Mapping[str, Any], fallback_reason: str = "") -> None:
        model_bytes, initializers = serialize_for_ort(model)
        self._as_written = quantized.runs_as_written(model)
        if self._as_written:
            model_bytes = quantized.integer_ops_as_written(model_bytes)
        self._setup(config, model_bytes, initializers, _external_data_dir(model), fallback_reason)

    @classmethod
    def imported(cls, blob: bytes, config: Mapping[str, Any]) -> OnnxRuntimeProgram:
        """A program from :meth:`exported` bytes: sessions over the optimized model, not optimized again."""
        head, _, optimized = blob.partition(b"\n")
        program = cls.__new__(cls)
        program._as_written = False  # the optimized model keeps what the first session kept
        program._setup(config, optimized, [], "", str(json.loads(head)["fallback_reason"]), optimized=True)
        return program

    def exported(self) -> bytes:
        """ONNX Runtime's optimized model (``optimized_model_filepath``) after a one-line JSON header.

        Optimized for this CPU (NCHWc layouts and the like): the cache keys it by
        the CPU's instruction sets and ONNX Runtime's version.
        """
        with tempfile.TemporaryDirectory(prefix="inferplex-ort-") as folder:
            path = os.path.join(folder, "optimized.onnx")
            options = self._options(0)
            options.optimized_model_filepath = path
            ort.InferenceSession(self._model_bytes, options, providers=[ORT_PROVIDER])
            with open(path, "rb") as handle:
                optimized = handle.read()
        return json.dumps({"fallback_reason": self._fallback_reason}).encode() + b"\n" + optimized

    def _setup(self, config: Mapping[str, Any], model_bytes: bytes, initializers: _Initializers,
               external_dir: str, fallback_reason: str, optimized: bool = False) -> None:
        streams, threads = stream_layout(config)
        super().__init__(config, spinning=bool(config.get("THREAD_SPINNING", streams == 1)),
                         low_priority=config.get("THREAD_PRIORITY", "NORMAL") == "LOW"
                         and per_thread_priority(), fallback_reason=fallback_reason)
        self._streams, self._threads = streams, threads
        self.num_workers = self._streams
        self._profiling = bool(config.get("ENABLE_PROFILING", False))
        self._profile_dir = tempfile.mkdtemp(prefix="inferplex-profile-") if self._profiling else ""
        self._model_bytes, self._initializers = model_bytes, initializers
        self._external_dir = external_dir
        self._optimized = optimized
        self._sessions = [self._new_session(i) for i in range(self._streams)]
        self._stale = [False] * self._streams
        self._lock = threading.Lock()
        first = self._sessions[0]
        self.input_names = [i.name for i in first.get_inputs()]
        self.output_names = [o.name for o in first.get_outputs()]
        self._float8 = (float8_ports(first.get_inputs()), float8_ports(first.get_outputs()))
        self._with_float8 = any(self._float8)  # float8 tensors cross ONNX Runtime as OrtValues

    def _options(self, worker: int) -> ort.SessionOptions:
        options = ort.SessionOptions()
        options.intra_op_num_threads = self._threads
        options.inter_op_num_threads = 1
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        options.log_severity_level = 3  # warnings about unused initializers are not the user's concern
        if self._optimized:  # an optimized model from the cache: optimizing it again gains nothing
            options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        if self._as_written:  # its fused QDQ kernels depart from ONNX here (see .quantized)
            options.add_session_config_entry("session.disable_quant_qdq", "1")
        if not self._spinning:
            options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        if self._config.get("CPU_DENORMALS_OPTIMIZATION"):
            options.add_session_config_entry("session.set_denormal_as_zero", "1")
        if self._initializers:  # copied into the session's graph before it is optimized
            options.add_external_initializers(*map(list, zip(*self._initializers, strict=True)))
        if self._external_dir:  # the bytes keep external data by relative location
            options.add_session_config_entry(
                "session.model_external_initializers_file_folder_path", self._external_dir)
        if self._profiling:
            options.enable_profiling = True
            options.profile_file_prefix = os.path.join(self._profile_dir, f"worker{worker}")
        return options

    def _new_session(self, worker: int) -> ort.InferenceSession:
        options = self._options(worker)
        try:
            if self._low_priority:
                return in_low_priority_thread(
                    lambda: ort.InferenceSession(self._model_bytes, options, providers=[ORT_PROVIDER]))
            return ort.InferenceSession(self._model_bytes, options, providers=[ORT_PROVIDER])
        except Exception as error:  # noqa: BLE001 - ORT raises its own exception types
            raise CompileError(f"ONNX Runtime could not compile the model for CPU: {error}") from error

    def run(self, inputs: Mapping[str, Any], worker: int = 0,
            keep_on_device: Collection[str] = ()) -> dict[str, Any]:
        if self._closed or not 0 <= worker < self.num_workers:
            self.check_runnable(worker, self._closed)
        if self._stale[worker]:
            self._sessions[worker] = self._new_session(worker)
            self._stale[worker] = False
        feed = inputs
        for value in inputs.values():  # a loop, not all(generator): this runs per request
            if type(value) is not np.ndarray:
                feed = {name: to_numpy(value) for name, value in inputs.items()}
                break
        try:
            if self._with_float8:
                outputs = run_with_float8(self._sessions[worker], self.output_names, feed, *self._float8)
            else:
                outputs = self._sessions[worker].run(self.output_names, feed)  # named: ORT skips looking
        except InferenceError:
            raise
        except Exception as e:  # ONNX Runtime's own classes: the caller gets one of ours, as from a GPU
            raise InferenceError(f"inference failed on {self.device}: {type(e).__name__}: {e}") from e
        return dict(zip(self.output_names, outputs, strict=True))

    def profiling_info(self, worker: int = 0) -> list[ProfilingRecord]:
        if not self._profiling or self._closed:
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
        return ort_last_run_records(events)

    def _own_property(self, key: str) -> Any:
        if key == "NUM_STREAMS":
            return self._streams
        if key == "INFERENCE_NUM_THREADS":
            return self._threads * self._streams
        if key == "OPTIMAL_NUMBER_OF_INFER_REQUESTS":
            return self._streams
        if key == "INFERENCE_PRECISION_HINT":
            return "f32"
        if key == "ENABLE_CPU_PINNING":
            return False  # ONNX Runtime's threads are not pinned to cores
        if key == "PERFORMANCE_HINT" and self._config.get("NUM_STREAMS") == "AUTO":
            return "THROUGHPUT"  # as OpenVINO reads it back
        raise KeyError(key)

    def _own_property_names(self) -> tuple[str, ...]:
        return ("NUM_STREAMS", "INFERENCE_NUM_THREADS", "OPTIMAL_NUMBER_OF_INFER_REQUESTS",
                "INFERENCE_PRECISION_HINT", "ENABLE_CPU_PINNING")

    def _release(self) -> None:
        self._sessions = []


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


def serialize_for_ort(model: ir.Model) -> tuple[bytes, _Initializers]:
    """The model as bytes for ONNX Runtime, and the large initializers left out of them."""
    proto, left = serialize_leaving_out(model, _in_memory)
    # onnx.helper stamps the newest IR version, which may be newer than the
    # installed ONNX Runtime reads; the graph itself rarely needs it.
    proto.ir_version = min(proto.ir_version, max_ir_version())
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
def max_ir_version() -> int:
    """Highest IR version the installed ONNX Runtime accepts (asked once, with an empty model)."""
    probe = onnx.helper.make_model(onnx.helper.make_graph([], "probe", [], []))
    probe.ir_version = 10_000
    try:
        ort.InferenceSession(probe.SerializeToString(), providers=[ORT_PROVIDER])
    except Exception as error:  # noqa: BLE001 - the message carries the number
        match = re.search(r"max supported IR version: (\d+)", str(error))
        if match:
            return int(match.group(1))
    return onnx.IR_VERSION
