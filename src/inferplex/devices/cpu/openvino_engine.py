"""The CPU device's OpenVINO engine: OpenVINO's own CPU plugin, which reads ONNX directly.

The default engine where the ``openvino`` package is installed and reads the
model.  Each worker owns one ``openvino.InferRequest`` of one compiled model;
OpenVINO runs the model on its own streams and threads, and releases the GIL
while a request runs.

Properties map onto OpenVINO's CPU plugin:

- ``PERFORMANCE_HINT`` (LATENCY / THROUGHPUT / CUMULATIVE_THROUGHPUT, which
  OpenVINO's CPU plugin runs as THROUGHPUT), ``PERFORMANCE_HINT_NUM_REQUESTS``,
  ``NUM_STREAMS`` and ``INFERENCE_NUM_THREADS`` go to OpenVINO as they are.
  The workers are OpenVINO's ``OPTIMAL_NUMBER_OF_INFER_REQUESTS`` (one per
  stream), twice that under the THROUGHPUT hint, at most
  ``PERFORMANCE_HINT_NUM_REQUESTS`` where set (see
  :func:`.openvino_core.engine_requests`).  ``NUM_STREAMS=AUTO`` is
  OpenVINO's too: the THROUGHPUT hint's streams, whatever the hint (the hint
  then reads back THROUGHPUT, as OpenVINO's compiled model reads it).
- ``INFERENCE_PRECISION_HINT`` f32 / bf16 / f16 goes to OpenVINO; unset, OpenVINO
  picks bf16 where the CPU has AMX or AVX512_BF16 and f32 elsewhere.  The
  precision read back is the one OpenVINO runs (it runs f32 where the CPU
  lacks the asked type).
- ``ENABLE_PROFILING`` is OpenVINO's ``PERF_COUNT``: per-op counters with the
  kernel that ran each op.
- ``THREAD_SPINNING=NO`` (set when accelerators work beside the CPU):
  OpenVINO has no spin setting (its idle threads park soon), so its nearest
  knob is used: threads are not pinned to cores (``ENABLE_CPU_PINNING=NO``)
  and the OS may run the accelerators' feeding threads on any core.
- ``THREAD_PRIORITY=LOW``: the model is compiled on a lowest-priority thread,
  so OpenVINO's stream threads, made then, run at that priority.
- ``EXECUTION_MODE_HINT`` goes to OpenVINO as it is (ACCURACY also sets f32,
  see the schema); ``ENABLE_CPU_PINNING`` and ``CPU_DENORMALS_OPTIMIZATION``
  go to OpenVINO when set (an explicit ``ENABLE_CPU_PINNING`` wins over
  ``THREAD_SPINNING``'s); the pinning OpenVINO applied is read back.
- ``CACHE_DIR``: compiled through the Core, the device registry's cache keeps
  OpenVINO's ``export_model`` blob (see :mod:`inferplex.devices.cache`) and
  imports it with ``import_model``; given to the plugin directly, it is passed
  to OpenVINO as its own model cache.

Integers: OpenVINO's CPU plugin computes int64 tensors in int32, as raw OpenVINO
does; int64 values beyond int32's range (ids or hashes past 2**31) wrap, where
ONNX Runtime (``ENGINE=ONNXRUNTIME``) keeps them.

Tensors: numpy inputs are shared with OpenVINO (``share_inputs``: no copy when
C-contiguous and of the input's type); outputs are copied out of the request's
buffers, which the worker's next run overwrites.  bfloat16, float8, sub-byte
(int4, uint4, ...) and string tensors are converted on the way (:mod:`.openvino_dtypes`).
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable, Collection, Mapping
from functools import lru_cache
from typing import TYPE_CHECKING, Any

import numpy as np
import onnx_ir as ir

from inferplex._openvino_package import openvino_submodule
from inferplex._serialize import serialize_leaving_out
from inferplex.devices.base import ProfilingRecord
from inferplex.devices.cpu.openvino_core import (
    REPORTED,
    canonical,
    core,
    engine_requests,
    openvino_config,
    precision_name,
    threading_facts,
)
from inferplex.devices.cpu.openvino_dtypes import (
    PackedPort,
    as_openvino_strings,
    bf16_as_raw_data,
    pack_input,
    packed_port,
    unpack_output,
    viewed_dtype,
    viewed_input,
)
from inferplex.devices.cpu.profile import openvino_records
from inferplex.devices.cpu.program import CpuProgram, to_numpy
from inferplex.devices.cpu.threads import in_low_priority_thread, per_thread_priority
from inferplex.errors import InferenceError

if TYPE_CHECKING:
    import openvino

__all__ = [
    "OpenVinoCannotRun",
    "OpenVinoProgram",
    "openvino_supported_nodes",
    "read",
    "reason",
]

class OpenVinoCannotRun(Exception):
    """OpenVINO could not read or compile a model; the message is OpenVINO's reason."""


def read(model: ir.Model) -> openvino.Model:
    """``model`` read by OpenVINO's ONNX frontend; raise OpenVinoCannotRun with OpenVINO's reason."""
    proto, external = serialize_leaving_out(
        model, lambda value: isinstance(value.const_value, ir.ExternalTensor))
    for value in external:  # OpenVINO reads ONNX bytes with every weight inside
        tensor = value.const_value
        assert tensor is not None  # serialize_leaving_out leaves out constants only
        inline = ir.Tensor(tensor.numpy(), dtype=tensor.dtype, name=value.name)
        proto.graph.initializer.append(ir.serde.serialize_tensor(inline))
    bf16_as_raw_data(proto)
    try:
        return core().read_model(proto.SerializeToString(), b"")
    except Exception as error:  # noqa: BLE001 - OpenVINO raises RuntimeError and its own types
        raise OpenVinoCannotRun(reason(error)) from error


_FAILED_CHECK = re.compile(r"Check '.*?' failed at \S+?:\d+:\s*")
"""OpenVINO's ``Check '<condition>' failed at <source file>:<line>:``, before its message."""


def reason(error: BaseException) -> str:
    """OpenVINO's message without its source-file lines and failed-check conditions."""
    lines = [_FAILED_CHECK.sub("", line) for line in str(error).splitlines()
             if not line.startswith("Exception from src") and "Frontend_Extensions" not in line]
    return " ".join(line.strip() for line in lines if line.strip()) or type(error).__name__


_UNCONVERTED = re.compile(r"No conversion rule found for operations: ([^\n]+)")


def openvino_supported_nodes(model: ir.Model) -> tuple[set[str], bool]:
    """Nodes of ``model``'s main graph that OpenVINO runs, and whether it runs the whole model.

    Where OpenVINO cannot read the model because it lacks some ops, the nodes of
    the other ops are listed (a HETERO subgraph without them would be read).
    """
    names = {node.name for node in model.graph if node.name}
    try:
        ov_model = read(model)
    except OpenVinoCannotRun as error:
        match = _UNCONVERTED.search(str(error.__cause__))
        if not match:
            return set(), False
        lacking = {op.strip() for op in match.group(1).split(",")}
        return {node.name for node in model.graph if node.name and _qualified(node) not in lacking}, False
    try:
        answered = core().query_model(ov_model, "CPU")
    except Exception:  # noqa: BLE001 - OpenVINO raises RuntimeError and its own types
        # Its transformations may fail where a shape is unknown (a Softmax on an input of
        # dynamic rank): it cannot compile the model either, so ONNX Runtime would run it.
        return set(), False
    refused = {op.get_friendly_name() for op in ov_model.get_ops() if op.get_friendly_name() not in answered}
    if not refused:
        return names, True
    return {node.name for node in model.graph if node.name and node.name not in refused
            and not any(out.name in refused for out in node.outputs)}, False


def _qualified(node: ir.Node) -> str:
    """How OpenVINO names an op in its errors: ``Relu``, ``com.microsoft.Inverse``."""
    return node.op_type if node.domain in ("", "ai.onnx") else f"{node.domain}.{node.op_type}"


class OpenVinoProgram(CpuProgram):
    """A model compiled by OpenVINO's CPU plugin; worker ``i`` owns infer request ``i``."""

    engine = "OPENVINO"

    def __init__(self, model: ir.Model, config: Mapping[str, Any]) -> None:
        ov_model = read(model)
        self._kept = [value.name or "" for value in model.graph.inputs
                      if value.uses() or value.is_graph_output()]
        self._setup(lambda ov_config: core().compile_model(ov_model, "CPU", ov_config), config,
                    [value.name or "" for value in model.graph.inputs],
                    [value.name or "" for value in model.graph.outputs])

    @classmethod
    def imported(cls, blob: bytes, config: Mapping[str, Any]) -> OpenVinoProgram:
        """A program from :meth:`exported` bytes (OpenVINO's ``import_model``)."""
        head, _, ov_blob = blob.partition(b"\n")
        names = json.loads(head)
        program = cls.__new__(cls)
        program._kept = list(names.get("kept", names["inputs"]))
        program._setup(lambda ov_config: core().import_model(ov_blob, "CPU", ov_config), config,
                       list(names["inputs"]), list(names["outputs"]))
        return program

    def exported(self) -> bytes:
        """The model's input and output names (and the inputs OpenVINO keeps, see :func:`_input_index`),
        then OpenVINO's ``export_model`` blob."""
        if self._compiled is None:
            raise InferenceError("the program on CPU was closed; it cannot be exported")
        names = json.dumps({"inputs": self.input_names, "outputs": self.output_names,
                            "kept": self._kept}).encode()
        blob = self._compiled.export_model()
        return names + b"\n" + bytes(blob.getvalue() if hasattr(blob, "getvalue") else blob)

    def _setup(self, make: Callable[[dict[str, Any]], openvino.CompiledModel], config: Mapping[str, Any],
               input_names: list[str], output_names: list[str]) -> None:
        """Compile (or import) with ``make(openvino config)`` and make the workers' requests."""
        low_priority = config.get("THREAD_PRIORITY", "NORMAL") == "LOW" and per_thread_priority()
        ov_config = openvino_config(config)
        try:
            compiled = in_low_priority_thread(lambda: make(ov_config)) if low_priority else make(ov_config)
        except Exception as error:  # noqa: BLE001 - OpenVINO raises RuntimeError and its own types
            raise OpenVinoCannotRun(reason(error)) from error
        streams = int(compiled.get_property("NUM_STREAMS"))
        super().__init__(config, spinning=bool(config.get("THREAD_SPINNING", streams == 1)),
                         low_priority=low_priority)
        self._compiled: openvino.CompiledModel | None = compiled
        self._facts: dict[str, Any] = {key: int(compiled.get_property(key)) for key in
                       ("NUM_STREAMS", "INFERENCE_NUM_THREADS", "OPTIMAL_NUMBER_OF_INFER_REQUESTS")}
        self._facts["INFERENCE_PRECISION_HINT"] = precision_name(
            compiled.get_property("INFERENCE_PRECISION_HINT"))
        self._facts.update(threading_facts(compiled))
        for key in REPORTED:  # what OpenVINO took, as it reads it back
            try:
                self._facts[key] = canonical(compiled.get_property(key))
            except Exception:  # noqa: BLE001 - a key this openvino's compiled model does not answer
                continue
        self._profiling = bool(config.get("ENABLE_PROFILING", False))
        self.num_workers = max(1, engine_requests(self._facts["PERFORMANCE_HINT"], config,
                                                  int(self._facts["OPTIMAL_NUMBER_OF_INFER_REQUESTS"])))
        self._facts["OPTIMAL_NUMBER_OF_INFER_REQUESTS"] = self.num_workers
        self._requests = [compiled.create_infer_request() for _ in range(self.num_workers)]
        self._holding: list[dict[int, tuple[np.ndarray, tuple[int, ...], np.dtype[Any]]]] = [
            {} for _ in self._requests]  # per worker: input index -> (array, shape, dtype) its tensor holds
        _first_uses(self._requests)
        self._inputs = _input_index(compiled.inputs, input_names, self._kept)
        by_name = {name: i for i, port in enumerate(compiled.outputs) for name in port.get_names()}
        self.input_names = input_names
        self.output_names = output_names
        self._output_index = [by_name.get(name, at) for at, name in enumerate(self.output_names)]
        self._outputs_in_order = self._output_index == list(range(len(compiled.outputs)))
        self._direct = _direct_call()
        # bfloat16, float8 and sub-byte types cross OpenVINO's Python API in forms of their own
        # (openvino_dtypes).
        outputs = list(zip(self.output_names, self._output_index, strict=True))
        self._viewed_outputs = [(name, dtype) for name, at in outputs
                                if (dtype := viewed_dtype(compiled.outputs[at])) is not None]
        self._packed_outputs = [(name, at, port) for name, at in outputs
                                if (port := packed_port(compiled.outputs[at])) is not None]
        self._packed_inputs: dict[str, PackedPort] = {
            name: port for name, at in self._inputs.items() if (port := packed_port(compiled.inputs[at]))}
        self._viewed_inputs = {name: compiled.inputs[at].get_element_type()
                               for name, at in self._inputs.items() if viewed_dtype(compiled.inputs[at])}
        self._converted = set(self._viewed_inputs)
        self._converted.update(self._packed_inputs)

    def run(self, inputs: Mapping[str, Any], worker: int = 0,
            keep_on_device: Collection[str] = ()) -> dict[str, Any]:
        if self._closed or not 0 <= worker < self.num_workers:
            self.check_runnable(worker, self._closed)
        request = self._requests[worker]
        try:
            direct, shared = self._direct, self._shared_inputs(inputs, worker)
            if direct is not None and shared is not None:
                results = direct[0](request, shared, False, True).values()
            else:
                self._holding[worker].clear()  # infer() sets tensors of its own
                results = request.infer(self._converted_inputs(inputs), share_inputs=True).to_tuple()
        except Exception as e:  # OpenVINO's own classes: the caller gets one of ours, as from a GPU
            self._holding[worker].clear()  # what the request holds is unknown after a failure
            raise InferenceError(
                f"inference failed on {self.device}: {type(e).__name__}: {reason(e)}") from e
        if self._outputs_in_order:
            outputs = dict(zip(self.output_names, results, strict=True))
        else:
            by_index = tuple(results)
            outputs = {name: by_index[at]
                       for name, at in zip(self.output_names, self._output_index, strict=True)}
        for name, dtype in self._viewed_outputs:
            outputs[name] = outputs[name].view(dtype)
        for name, at, port in self._packed_outputs:  # OpenVINO gives the packed bytes, flat
            outputs[name] = unpack_output(outputs[name], port, tuple(request.get_output_tensor(at).shape))
        return outputs

    def _shared_inputs(self, inputs: Mapping[str, Any], worker: int) -> dict[int, Any] | None:
        """OpenVINO tensors over the inputs' own memory, by OpenVINO input index; None where this
        openvino has no direct call or an input is not a numeric numpy array (see :func:`_direct_call`).

        The very array the worker's request holds a tensor over (the caller's array run again, an
        InferRequest's own input array) is left out: binding a new tensor is a visible share of a
        small model's run.  Same object, shape and dtype is same memory (numpy moves an array's
        data only on ``resize``, which refuses while this holds a reference).  Inputs OpenVINO
        left out of the compiled model (nothing reads them, or only their type) are not fed.
        """
        if self._direct is None:
            return None
        index, tensor, holding, shared = self._inputs, self._direct[1], self._holding[worker], {}
        for name, value in inputs.items():
            at = index.get(name)
            if at is None:
                continue
            if type(value) is not np.ndarray or value.dtype.kind not in "biuf" or name in self._converted:
                return None  # bfloat16, float8 and sub-byte types go through infer(), converted
            flags = value.flags  # OpenVINO shares only C-ordered memory it may write
            if not (flags.c_contiguous and flags.writeable):
                holding.pop(at, None)
                shared[at] = tensor(np.array(value, order="C"), True)
                continue
            held = holding.get(at)
            if held is not None and held[0] is value and held[1] == value.shape and held[2] is value.dtype:
                continue
            shared[at] = tensor(value, True)
            holding[at] = (value, value.shape, value.dtype)
        return shared

    def _converted_inputs(self, inputs: Mapping[str, Any]) -> dict[int, Any]:
        """The inputs as arrays OpenVINO's ``InferRequest.infer`` takes, by OpenVINO input index."""
        packed, viewed = self._packed_inputs, self._viewed_inputs
        return {self._inputs[name]: pack_input(to_numpy(value), packed[name]) if name in packed
                else viewed_input(to_numpy(value), viewed[name]) if name in viewed
                else as_openvino_strings(to_numpy(value))
                for name, value in inputs.items() if name in self._inputs}

    def profiling_info(self, worker: int = 0) -> list[ProfilingRecord]:
        if not self._profiling or self._closed:
            return []
        return openvino_records(self._requests[worker].get_profiling_info())

    def _own_property(self, key: str) -> Any:
        return self._facts[key]

    def _own_property_names(self) -> tuple[str, ...]:
        return tuple(self._facts)

    def _release(self) -> None:
        self._requests = []
        self._holding = []
        self._compiled = None


def _input_index(ports: Any, input_names: list[str], kept: list[str]) -> dict[str, int]:
    """Model input name -> OpenVINO input index.

    OpenVINO's ONNX frontend makes one Parameter per graph input, in order, and
    leaves out the inputs nothing reads; but a Parameter's tensor names may be
    those of a value it flows into unchanged (an input read only by a Dropout is
    named after the Dropout's output), so names alone would miss it and leave it
    unfed.  Where every input has its Parameter, position decides; where exactly
    the inputs nothing reads (not in ``kept``) are left out, position among the
    ``kept`` ones decides; elsewhere the names do.
    """
    if len(ports) == len(input_names):
        return {name: index for index, name in enumerate(input_names)}
    if len(ports) == len(kept):
        return {name: index for index, name in enumerate(kept)}
    return {name: index for index, port in enumerate(ports) for name in port.get_names()}


@lru_cache(maxsize=1)
def _direct_call() -> tuple[Callable[..., Any], Callable[..., Any]] | None:
    """OpenVINO's compiled ``InferRequest.infer(inputs, share_outputs, decode_strings)`` and
    ``Tensor(array, shared_memory)``, or None where this openvino has neither in that form.

    ``openvino.InferRequest.infer`` is a Python wrapper: it sorts out every input form
    OpenVINO accepts, then builds an ``OVDict``; for numeric numpy arrays (what the engine
    hands over, checked already) that work is a visible share of a small model's time
    (bench/cpu_engines.py).  The compiled method does the run and the output copies alone.
    """
    try:
        bindings = openvino_submodule("_pyopenvino")
    except ImportError:
        return None
    InferRequest, Tensor = bindings.InferRequest, bindings.Tensor  # noqa: N806 - OpenVINO's class names
    infer = getattr(InferRequest, "infer", None)
    signature = "inputs: dict, share_outputs: bool, decode_strings: bool"
    if infer is None or signature not in (infer.__doc__ or ""):
        return None  # another openvino: its wrapper is the one way in
    return infer, Tensor


_FIRST_USES = threading.Lock()


def _first_uses(requests: list[Any]) -> None:
    """Make, on this one thread, the first calls that initialise OpenVINO's binding statics.

    The first ``Type.to_dtype()`` (and numpy view) of a process initialises a function-local
    static while holding the GIL; two threads making that first call at once (two
    workers' first runs side by side, or two models compiled at once, as MULTI and
    AUTO compile their members) could deadlock on it.  One compile at a time makes
    these calls (:data:`_FIRST_USES`): waiting for the lock releases the GIL.
    """
    with _FIRST_USES:
        _touch(requests)


def _touch(requests: list[Any]) -> None:
    for request in requests:
        for tensor in (*request.input_tensors, *request.output_tensors):
            if tensor.get_element_type().to_dtype().kind in "OSU":
                continue  # a string tensor: no numpy view, .data copies (and warns so)
            try:
                _ = tensor.data  # the first numpy view likewise
            except Exception:  # noqa: BLE001 - a tensor with no data yet (dynamic shape)
                continue

